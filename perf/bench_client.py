"""Benchmark: what brainy.client costs per call beside a raw socket request, and export/import throughput.

    python perf/bench_client.py                    # 3,000 gets a form; export/import of 100,000 rows with vectors
    python perf/bench_client.py --rows 10000       # a quick look

The server runs on one core (``taskset``), this script on the other. Per call: ``get`` of one entity over one
keep-alive HTTP/1.1 connection, three ways, interleaved in rounds so the box's drift falls on all alike: a raw
socket (the request's bytes built once, the answer read by its Content-Length, nothing decoded), ``Client``
(MessagePack) and ``Client(json=True)``; the client's own cost is its median less the raw median. Throughput:
``--rows`` rows with 384-number vectors added to a brain, ``brainy export`` of it to a file, ``brainy import``
of the file into a second brain of the same server, each timed whole. Loopback only; every loop bounded.
"""

from __future__ import annotations

import argparse
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))

from measure import split_cores  # noqa: E402
from server import start_server  # noqa: E402

from brainy.client import Client  # noqa: E402


def raw_get(sock: socket.socket, request: bytes) -> None:
    sock.sendall(request)
    data = b""
    while b"\r\n\r\n" not in data:
        data += sock.recv(65536)
    head, _, body = data.partition(b"\r\n\r\n")
    length = int(
        next(line.split(b":")[1] for line in head.split(b"\r\n") if line.lower().startswith(b"content-length"))
    )
    while len(body) < length:
        body += sock.recv(65536)


def per_call(url: str, key: str, brain: str, ids: list[str], count: int) -> dict[str, float]:
    host, port = url.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    requests = [
        f"GET /v1/brains/{brain}/get/{i} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {key}\r\n"
        f"Accept: application/msgpack\r\n\r\n".encode()
        for i in ids
    ]
    forms = {"raw socket": None, "Client (msgpack)": Client(url, key), "Client (json)": Client(url, key, json=True)}
    times: dict[str, list[float]] = {name: [] for name in forms}
    for round_ in range(count // 100):
        for name, client in forms.items():
            for j in range(100):
                k = (round_ * 100 + j) % len(ids)
                t0 = time.perf_counter()
                if client is None:
                    raw_get(sock, requests[k])
                else:
                    client.brain(brain).get(ids[k])
                times[name].append(time.perf_counter() - t0)
    sock.close()
    for client in forms.values():
        if client is not None:
            client.close()
    return {name: statistics.median(values) * 1e6 for name, values in times.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=3000)
    parser.add_argument("--rows", type=int, default=100_000)
    args = parser.parse_args()
    server_cores, load_cores = split_cores()
    if load_cores:
        os.sched_setaffinity(0, load_cores)
    scratch = Path(tempfile.mkdtemp(prefix="brainy-bench-client-"))
    (scratch / "no-model").mkdir()
    env = {"BRAINY_EMBED_MODEL_DIR": str(scratch / "no-model")}
    command = ("-m", "brainy.cli")  # each server is pinned to its core once it runs (taskset -p)
    with start_server(scratch / "served", env_extra=env, command=command) as server:
        if server_cores:
            os.system(f"taskset -pc {','.join(map(str, server_cores))} {server.proc.pid} > /dev/null")
        url = f"http://{server.address[0]}:{server.address[1]}"
        rng = random.Random(3)
        with Client(url, server.key, timeout=300) as client:
            b = client.brain(server.brain)
            ids: list[str] = []
            started = time.monotonic()
            for start in range(0, args.rows, 2000):
                items = []
                for i in range(start, min(args.rows, start + 2000)):
                    v = [rng.gauss(0, 1) for _ in range(384)]
                    n = sum(x * x for x in v) ** 0.5
                    items.append(
                        {"type": "document", "data": f"row {i}", "metadata": {"i": i}, "vector": [x / n for x in v]}
                    )
                ids += b.addMany({"items": items})["ids"]
            added = time.monotonic() - started
            cost = per_call(url, server.key, server.brain, ids[:1000], args.count)
        base = cost["raw socket"]
        print(f"per call (get, one keep-alive connection, median of {args.count}):")
        for name, us in cost.items():
            extra = "" if name == "raw socket" else f"  (+{us - base:.0f} us for the client)"
            print(f"  {name:<18} {us:7.0f} us{extra}")
        cli = [sys.executable, "-m", "brainy.cli"]
        environ = {**os.environ, "BRAINY_URL": url, "BRAINY_KEY": server.key}
        out = scratch / "export.jsonl"
        t0 = time.monotonic()
        subprocess.run([*cli, "export", "--brain", server.brain, "--out", str(out)], env=environ, check=True)
        exported = time.monotonic() - t0
    with start_server(scratch / "copy", env_extra=env, command=command) as copy:
        if server_cores:
            os.system(f"taskset -pc {','.join(map(str, server_cores))} {copy.proc.pid} > /dev/null")
        environ = {**os.environ, "BRAINY_URL": f"http://{copy.address[0]}:{copy.address[1]}", "BRAINY_KEY": copy.key}
        t0 = time.monotonic()
        done = subprocess.run([*cli, "import", str(out)], env=environ, capture_output=True, text=True)
        imported = time.monotonic() - t0
        print(
            f"{args.rows:,} rows with vectors: added in {added:.1f} s ({args.rows / added:,.0f} rows/s, addMany of 2,000)"
        )
        print(f"  export {exported:.1f} s ({args.rows / exported:,.0f} rows/s, {out.stat().st_size / 1e6:,.0f} MB)")
        if done.returncode == 0:
            print(f"  import {imported:.1f} s ({args.rows / imported:,.0f} rows/s)")
        else:
            print(f"  import refused: {done.stderr.strip()[-300:]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
