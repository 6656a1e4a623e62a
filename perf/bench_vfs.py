"""Benchmark: writeFile and readFile through the door, and what rewriting a large file costs on disk.

    python perf/bench_vfs.py --fast
    python perf/bench_vfs.py -o vfs.json

Each door is called in process (``Brain.call``: the contract's argument check, then the door), on a
real store, the commit durable before the call returns. ``embed: false``: these measure the file
path (decoding the content, chunking, hashing, the pack's fsync, the commit; verified reads), not
the embedding model, which ``perf/bench_embed.py`` measures.

- ``writeFile[base64, 1 MiB | 100 MiB]``: fresh random bytes each loop (nothing deduplicates).
- ``writeFile[utf-8, ...]``: fresh text each loop.
- ``readFile[base64 | utf-8, ...]``: read back whole, every chunk verified and the whole checked
  against its address before a byte is answered.

The dedup figure (new chunk bytes on disk for a 100 MiB file rewritten through writeFile with 1 KiB
changed in the middle) is printed once by the master process and kept in the metadata.
"""

from __future__ import annotations

import atexit
import binascii
import os
import random
import shutil
import tempfile
import time
from pathlib import Path

import pyperf

from brainy.engine import Brain, init_store

MiB = 1 << 20
CALLER = "person:bench@example.com"
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
            brain().writeFile({"path": f"/bench/{encoding}-{size}-{i % 4}", "content": text, "encoding": encoding,
                               "createParents": True, "embed": False}, caller=CALLER)
            total += time.perf_counter() - t0
        return total
    return run


def time_read(size: int, encoding: str):
    path = f"/read/{encoding}-{size}"
    brain().writeFile({"path": path, "content": content(size, encoding), "encoding": encoding,
                       "createParents": True, "embed": False}, caller=CALLER)

    def run(loops: int) -> float:
        t0 = time.perf_counter()
        for _ in range(loops):
            brain().readFile({"path": path, "encoding": encoding})
        return time.perf_counter() - t0
    return run


def dedup_figure() -> str:
    b = brain()
    data = bytearray(random.Random(1).randbytes(100 * MiB))
    b.writeFile({"path": "/dedup.bin", "content": binascii.b2a_base64(data, newline=False).decode(),
                 "encoding": "base64", "embed": False}, caller=CALLER)
    before = b.blobs.disk_bytes()
    data[50 * MiB:50 * MiB + 1024] = random.Random(2).randbytes(1024)
    b.writeFile({"path": "/dedup.bin", "content": binascii.b2a_base64(data, newline=False).decode(),
                 "encoding": "base64", "embed": False}, caller=CALLER)
    grown = b.blobs.disk_bytes() - before
    return f"{grown} bytes of new chunks on disk for {len(data)} rewritten ({grown / 1024:.1f} KiB)"


def main() -> None:
    runner = pyperf.Runner()
    args = runner.parse_args()
    runner.metadata["description"] = "brainy vfs: writeFile and readFile through the door"
    if not args.worker:
        figure = dedup_figure()
        print(f"100 MiB rewritten through writeFile with 1 KiB changed: {figure}")
        runner.metadata["dedup"] = figure
    for size, name in ((MiB, "1 MiB"), (100 * MiB, "100 MiB")):
        for encoding in ("base64", "utf-8"):
            runner.bench_time_func(f"writeFile[{encoding}, {name}]", time_write(size, encoding))
            runner.bench_time_func(f"readFile[{encoding}, {name}]", time_read(size, encoding))


if __name__ == "__main__":
    main()
