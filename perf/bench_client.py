"""Benchmark: what brainy.client costs per call beside a raw socket request, over HTTP/1.1 and HTTP/2, and
addMany/export/import throughput.

    python perf/bench_client.py                    # 3,000 gets a form; 100,000 rows with vectors
    python perf/bench_client.py --rows 10000       # a quick look

The server runs on one core (``taskset``), this script on the other. Per call: ``get`` of one entity, one call
at a time, five ways, interleaved in rounds so the box's drift falls on all alike: a raw socket (one keep-alive
HTTP/1.1 connection; the request's bytes built once, the answer read by its Content-Length, nothing decoded), and
``Client`` over HTTP/1.1 and over HTTP/2, each with MessagePack and with JSON answers; the client's own cost is
its median less the raw median. Then ``AsyncClient`` with 64 gets in flight at once, calls per second over each
protocol (HTTP/1.1: its pool of 4 connections; HTTP/2: the streams of one). Throughput, each protocol in turn on
the same brain: ``--rows`` rows with 384-number vectors added in ``addMany`` batches of 2,000 (the batches
alternate between the protocols), then every row read back through the ``export`` door's pages (1,000 rows with
vectors, JSON, as ``brainy export`` reads them); then ``brainy export`` of the brain to a file and ``brainy
import`` of it into a second server, with the command line's default protocol. Loopback only; every loop bounded.
"""

from __future__ import annotations

import argparse
import asyncio
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

from brainy.client import AsyncClient, Client  # noqa: E402

PROTOCOLS = {"HTTP/1.1": False, "HTTP/2": True}


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
    forms: dict[str, Client | None] = {"raw socket (HTTP/1.1)": None}
    for answers, json in (("msgpack", False), ("json", True)):
        for protocol, http2 in PROTOCOLS.items():
            forms[f"Client {protocol} {answers}"] = Client(url, key, json=json, http2=http2)
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


def in_flight(url: str, key: str, brain: str, ids: list[str], count: int, width: int = 64) -> dict[str, float]:
    """Calls per second of one AsyncClient with ``width`` gets awaited at once, over each protocol."""

    async def run(http2: bool) -> float:
        async with AsyncClient(url, key, http2=http2) as client:
            b = client.brain(brain)
            await b.get(ids[0])
            started = time.perf_counter()
            for at in range(0, count, width):
                await asyncio.gather(*(b.get(ids[(at + j) % len(ids)]) for j in range(width)))
            return count / (time.perf_counter() - started)

    rates: dict[str, list[float]] = {protocol: [] for protocol in PROTOCOLS}
    for _ in range(3):
        for protocol, http2 in PROTOCOLS.items():
            rates[protocol].append(asyncio.run(run(http2)))
    return {protocol: statistics.median(values) for protocol, values in rates.items()}


def rows(start: int, end: int, rng: random.Random) -> list[dict[str, object]]:
    out = []
    for i in range(start, end):
        v = [rng.gauss(0, 1) for _ in range(384)]
        n = sum(x * x for x in v) ** 0.5
        out.append({"type": "document", "data": f"row {i}", "metadata": {"i": i}, "vector": [x / n for x in v]})
    return out


def add_rows(url: str, key: str, brain: str, count: int) -> tuple[list[str], dict[str, float]]:
    """``count`` rows added in batches of 2,000, the batches alternating between the protocols: the ids, and rows
    per second over each (the time of its batches alone)."""
    rng = random.Random(3)
    clients = {protocol: Client(url, key, timeout=300, http2=http2) for protocol, http2 in PROTOCOLS.items()}
    spent = dict.fromkeys(PROTOCOLS, 0.0)
    added = dict.fromkeys(PROTOCOLS, 0)
    ids: list[str] = []
    for n, start in enumerate(range(0, count, 2000)):
        protocol = list(PROTOCOLS)[n % 2]
        batch = rows(start, min(count, start + 2000), rng)
        t0 = time.perf_counter()
        ids += clients[protocol].brain(brain).addMany({"items": batch})["ids"]
        spent[protocol] += time.perf_counter() - t0
        added[protocol] += len(batch)
    for client in clients.values():
        client.close()
    return ids, {protocol: added[protocol] / spent[protocol] for protocol in PROTOCOLS if spent[protocol]}


def export_pages(url: str, key: str, brain: str) -> dict[str, float]:
    """Every row read through the ``export`` door's pages, as ``brainy export`` reads them: rows per second over
    each protocol."""
    out = {}
    for protocol, http2 in PROTOCOLS.items():
        with Client(url, key, timeout=300, json=True, http2=http2) as client:
            b = client.brain(brain)
            cursor, count = None, 0
            t0 = time.perf_counter()
            while True:
                page = b.export({"includeVectors": True, "limit": 1000, **({"cursor": cursor} if cursor else {})})
                count += len(page["entities"])
                if not page["hasMore"]:
                    break
                cursor = page["cursor"]
            seconds = time.perf_counter() - t0
        out[protocol] = count / seconds
    return out


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
        ids, adding = add_rows(url, server.key, server.brain, args.rows)
        cost = per_call(url, server.key, server.brain, ids[:1000], args.count)
        rates = in_flight(url, server.key, server.brain, ids[:1000], args.count)
        exporting = export_pages(url, server.key, server.brain)
        base = cost["raw socket (HTTP/1.1)"]
        print(f"per call (get, one call at a time, median of {args.count}):")
        for name, us in cost.items():
            extra = "" if name.startswith("raw") else f"  (+{us - base:.0f} us for the client)"
            print(f"  {name:<24} {us:7.0f} us{extra}")
        print(f"AsyncClient, 64 gets in flight ({args.count} a run, median of 3 runs):")
        for protocol, rate in rates.items():
            print(f"  {protocol:<24} {rate:7,.0f} calls/s")
        print(f"{args.rows:,} rows with vectors:")
        for protocol in PROTOCOLS:
            print(f"  addMany of 2,000, {protocol:<8} {adding[protocol]:7,.0f} rows/s")
        for protocol, per_second in exporting.items():
            print(f"  export pages of 1,000, {protocol:<8} {per_second:7,.0f} rows/s (JSON, vectors included)")
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
        print("the command line (its default: HTTP/2 to brainy):")
        print(
            f"  brainy export {exported:.1f} s ({args.rows / exported:,.0f} rows/s, {out.stat().st_size / 1e6:,.0f} MB)"
        )
        if done.returncode == 0:
            print(f"  brainy import {imported:.1f} s ({args.rows / imported:,.0f} rows/s)")
        else:
            print(f"  import refused: {done.stderr.strip()[-300:]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
