"""Benchmark: writeFile and readFile through the door, in process and over the wire, and what rewriting a
large file costs on disk.

    python perf/bench_vfs.py --fast
    python perf/bench_vfs.py -o vfs.json
    python perf/bench_vfs.py --fast --wire      # also over h1 to a real ``brainy serve`` on loopback

Each door is called in process (``Brain.call``: the contract's argument check, then the door), on a
real store, the commit durable before the call returns. ``embed: false``: these measure the file
path (decoding the content, chunking, hashing, the pack's fsync, the commit; verified reads), not
the embedding model, which ``perf/bench_embed.py`` measures.

- ``writeFile[base64, 1 MiB | 100 MiB]``: fresh random bytes each loop (nothing deduplicates).
- ``writeFile[utf-8, ...]``: fresh text each loop.
- ``readFile[base64 | utf-8, ...]``: read back whole, every chunk verified and the whole checked
  against its address before a byte is answered.
- ``wire readFile[...]`` / ``wire writeFile[...]`` (``--wire``): the same doors as ``POST
  /v1/brains/main/vfs`` on one keep-alive HTTP/1.1 connection to a ``brainy serve`` the master
  process starts (its store filled in process first): the server's door, its JSON answer, loopback
  and the client reading the whole body. A write's body is built before the clock starts; a request
  body is at most 64 MiB, so the large write over the wire is 32 MiB.

The dedup figure (new chunk bytes on disk for a 100 MiB file rewritten through writeFile with 1 KiB
changed in the middle) is printed once by the master process and kept in the metadata.
"""

from __future__ import annotations

import argparse
import atexit
import binascii
import http.client
import json
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyperf

from brainy.engine import Brain, init_store

MiB = 1 << 20
CALLER = "person:bench@example.com"
KEY = "bky_bench_vfs_wire_person_0123456789"
WIRE_WRITE_MAX = 32 * MiB  # base64 of it fits the 64 MiB request limit
_dir = Path(tempfile.mkdtemp(prefix="brainy-bench-vfs-"))
atexit.register(shutil.rmtree, _dir, True)
_brain: Brain | None = None


def brain() -> Brain:
    global _brain
    if _brain is None:
        init_store(_dir / "store")
        _brain = Brain.open(_dir / "store")
        atexit.register(_brain.close)
    return _brain


def content(size: int, encoding: str) -> str:
    if encoding == "base64":
        return binascii.b2a_base64(os.urandom(size), newline=False).decode("ascii")
    line = os.urandom(32).hex() + " the quick brown fox\n"
    return (line * (size // len(line) + 1))[:size]


def time_write(size: int, encoding: str):
    def run(loops: int) -> float:
        total = 0.0
        for i in range(loops):
            text = content(size, encoding)
            t0 = time.perf_counter()
            brain().writeFile(
                {
                    "path": f"/bench/{encoding}-{size}-{i % 4}",
                    "content": text,
                    "encoding": encoding,
                    "createParents": True,
                    "embed": False,
                },
                caller=CALLER,
            )
            total += time.perf_counter() - t0
        return total

    return run


def time_read(size: int, encoding: str):
    path = f"/read/{encoding}-{size}"
    brain().writeFile(
        {"path": path, "content": content(size, encoding), "encoding": encoding, "createParents": True, "embed": False},
        caller=CALLER,
    )

    def run(loops: int) -> float:
        t0 = time.perf_counter()
        for _ in range(loops):
            brain().readFile({"path": path, "encoding": encoding})
        return time.perf_counter() - t0

    return run


def dedup_figure() -> str:
    b = brain()
    data = bytearray(random.Random(1).randbytes(100 * MiB))
    b.writeFile(
        {
            "path": "/dedup.bin",
            "content": binascii.b2a_base64(data, newline=False).decode(),
            "encoding": "base64",
            "embed": False,
        },
        caller=CALLER,
    )
    before = b.blobs.disk_bytes()
    data[50 * MiB : 50 * MiB + 1024] = random.Random(2).randbytes(1024)
    b.writeFile(
        {
            "path": "/dedup.bin",
            "content": binascii.b2a_base64(data, newline=False).decode(),
            "encoding": "base64",
            "embed": False,
        },
        caller=CALLER,
    )
    grown = b.blobs.disk_bytes() - before
    return f"{grown} bytes of new chunks on disk for {len(data)} rewritten ({grown / 1024:.1f} KiB)"


# -- over the wire ---------------------------------------------------------------------------------------


def serve(folder: Path) -> tuple[int, subprocess.Popen[bytes]]:
    """A ``brainy serve`` of a store whose /read/ files are written (in process, before it starts)."""
    init_store(folder / "store")
    filled = Brain.open(folder / "store")
    for size in (MiB, 100 * MiB):
        for encoding in ("base64", "utf-8"):
            filled.writeFile(
                {
                    "path": f"/read/{encoding}-{size}",
                    "content": content(size, encoding),
                    "encoding": encoding,
                    "createParents": True,
                    "embed": False,
                },
                caller=CALLER,
            )
    filled.close()
    keys = folder / "keys"
    keys.write_text(f"{KEY} {CALLER} *\n")
    keys.chmod(0o600)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "brainy.cli",
            "serve",
            "--listen",
            f"127.0.0.1:{port}",
            "--brain",
            f"main={folder / 'store'}",
            "--keys",
            str(keys),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return port, proc
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError("brainy serve did not start")


def vfs_call(connection: http.client.HTTPConnection, body: bytes) -> bytes:
    connection.request(
        "POST", "/v1/brains/main/vfs", body, {"authorization": f"Bearer {KEY}", "content-type": "application/json"}
    )
    response = connection.getresponse()
    answer = response.read()
    if response.status != 200:
        raise RuntimeError(f"{response.status}: {answer[:200]!r}")
    return answer


def wire_read(port: int, size: int, encoding: str):
    body = json.dumps({"op": "readFile", "path": f"/read/{encoding}-{size}", "encoding": encoding}).encode()

    def run(loops: int) -> float:
        connection = http.client.HTTPConnection("127.0.0.1", port)
        vfs_call(connection, body)  # connected and warm
        t0 = time.perf_counter()
        for _ in range(loops):
            vfs_call(connection, body)
        elapsed = time.perf_counter() - t0
        connection.close()
        return elapsed

    return run


def wire_write(port: int, size: int, encoding: str):
    def run(loops: int) -> float:
        connection = http.client.HTTPConnection("127.0.0.1", port)
        total = 0.0
        for i in range(loops):
            body = json.dumps(
                {
                    "op": "writeFile",
                    "path": f"/wire/{encoding}-{size}-{i % 4}",
                    "content": content(size, encoding),
                    "encoding": encoding,
                    "createParents": True,
                    "embed": False,
                }
            ).encode()
            t0 = time.perf_counter()
            vfs_call(connection, body)
            total += time.perf_counter() - t0
        connection.close()
        return total

    return run


def main() -> None:
    runner = pyperf.Runner(
        add_cmdline_args=lambda cmd, args: cmd.extend(["--wire", "--port", str(args.port)] if args.wire else [])
    )
    runner.argparser.add_argument("--wire", action="store_true", help="also over h1 to a real brainy serve")
    runner.argparser.add_argument(
        "--port", type=int, default=0, help=argparse.SUPPRESS
    )  # the master's server, for its workers
    args = runner.parse_args()
    runner.metadata["description"] = "brainy vfs: writeFile and readFile through the door"
    if not args.worker:
        figure = dedup_figure()
        print(f"100 MiB rewritten through writeFile with 1 KiB changed: {figure}")
        runner.metadata["dedup"] = figure
        if args.wire:
            args.port, proc = serve(_dir / "served")
            atexit.register(proc.wait)
            atexit.register(proc.terminate)
    for size, name in ((MiB, "1 MiB"), (100 * MiB, "100 MiB")):
        for encoding in ("base64", "utf-8"):
            runner.bench_time_func(f"writeFile[{encoding}, {name}]", time_write(size, encoding))
            runner.bench_time_func(f"readFile[{encoding}, {name}]", time_read(size, encoding))
            if args.wire:  # a request body is at most 64 MiB (PayloadTooLargeError): the large write is 32 MiB
                sent = min(size, WIRE_WRITE_MAX)
                runner.bench_time_func(
                    f"wire writeFile[{encoding}, {sent // MiB} MiB]", wire_write(args.port, sent, encoding)
                )
                runner.bench_time_func(f"wire readFile[{encoding}, {name}]", wire_read(args.port, size, encoding))


if __name__ == "__main__":
    main()
