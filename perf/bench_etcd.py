"""Benchmark: the etcd clients the fleet could use, on the three calls it makes most, against a local etcd.

    python perf/bench_etcd.py                      # starts its own etcd on loopback (needs `etcd` on PATH)
    python perf/bench_etcd.py --etcd http://127.0.0.1:2379 -n 2000

Timed, one call at a time (the fleet's calls are a node's renewal loop and its claims, never a flood), each
``n`` times after ``n // 10`` untimed: ``put`` (a 40-byte value), ``txn`` (compare a key's version, put it:
a claim's shape) and ``keepalive`` (renew one lease). Printed per client: p50 and p99 in microseconds.

Candidates: brainy's own gateway client (``brainy.fleet.etcd``: HTTP/1.1 JSON on asyncio), aetcd (asyncio,
grpc.aio), etcd3gw (the same gateway through requests, blocking) and etcd3 (grpcio, blocking). A client that
is not installed, or fails to import, is reported as such and skipped: install them in a scratch virtualenv
to compare (``pip install aetcd etcd3gw etcd3``); brainy installs none of them.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Awaitable, Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

VALUE = b"x" * 40


def _quantiles(samples: list[int]) -> str:
    samples.sort()
    p50 = samples[len(samples) // 2] / 1000
    p99 = samples[min(len(samples) - 1, int(len(samples) * 0.99))] / 1000
    return f"p50 {p50:8.1f} us   p99 {p99:8.1f} us"


async def _atimed(n: int, op: Callable[[int], Awaitable[object]]) -> str:
    for i in range(n // 10):
        await op(i)
    samples = []
    for i in range(n):
        started = time.perf_counter_ns()
        await op(i)
        samples.append(time.perf_counter_ns() - started)
    return _quantiles(samples)


def _timed(n: int, op: Callable[[int], object]) -> str:
    for i in range(n // 10):
        op(i)
    samples = []
    for i in range(n):
        started = time.perf_counter_ns()
        op(i)
        samples.append(time.perf_counter_ns() - started)
    return _quantiles(samples)


async def bench_brainy(url: str, n: int) -> dict[str, str]:
    from brainy.fleet import etcd as E

    client = E.Etcd([url])
    lease = await client.grant(60)

    out = {
        "put": await _atimed(n, lambda i: client.put(b"bench/brainy/put", VALUE)),
        "txn": await _atimed(n, lambda i: client.txn([E.version_is(b"bench/brainy/t", 0)], [E.range_op(b"x")])),
        "keepalive": await _atimed(n, lambda i: client.keepalive(lease)),
    }
    client.close()
    return out


async def bench_aetcd(url: str, n: int) -> dict[str, str]:
    import aetcd

    host, port = url.split("//")[1].split(":")
    client = aetcd.Client(host=host, port=int(port))
    await client.connect()
    lease = await client.lease(60)
    key = b"bench/aetcd/t"

    async def txn(i: int) -> object:
        return await client.transaction(
            compare=[client.transactions.version(key) == 0], success=[client.transactions.get(b"x")], failure=[]
        )

    out = {
        "put": await _atimed(n, lambda i: client.put(b"bench/aetcd/put", VALUE)),
        "txn": await _atimed(n, txn),
        "keepalive": await _atimed(n, lambda i: lease.refresh()),
    }
    await client.close()
    return out


def bench_etcd3gw(url: str, n: int) -> dict[str, str]:
    import etcd3gw

    host, port = url.split("//")[1].split(":")
    client = etcd3gw.client(host=host, port=int(port))
    lease = client.lease(60)
    key = "bench/etcd3gw/t"
    txn_doc = {
        "compare": [{"key": etcd3gw.utils._encode(key), "result": "EQUAL", "target": "VERSION", "version": 0}],
        "success": [{"request_range": {"key": etcd3gw.utils._encode("x")}}],
        "failure": [],
    }
    return {
        "put": _timed(n, lambda i: client.put("bench/etcd3gw/put", VALUE)),
        "txn": _timed(n, lambda i: client.transaction(txn_doc)),
        "keepalive": _timed(n, lambda i: lease.refresh()),
    }


def bench_etcd3(url: str, n: int) -> dict[str, str]:
    import etcd3

    host, port = url.split("//")[1].split(":")
    client = etcd3.client(host=host, port=int(port))
    lease = client.lease(60)
    key = "bench/etcd3/t"
    return {
        "put": _timed(n, lambda i: client.put("bench/etcd3/put", VALUE)),
        "txn": _timed(
            n, lambda i: client.transaction(compare=[client.transactions.version(key) == 0], success=[], failure=[])
        ),
        "keepalive": _timed(n, lambda i: lease.refresh()),
    }


def _start_etcd(directory: str) -> tuple[str, subprocess.Popen[bytes]]:
    import socket

    ports = []
    for _ in range(2):
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            ports.append(sock.getsockname()[1])
    url, peer = f"http://127.0.0.1:{ports[0]}", f"http://127.0.0.1:{ports[1]}"
    proc = subprocess.Popen(
        [
            *("etcd", "--name", "bench", "--data-dir", f"{directory}/data"),
            *("--listen-client-urls", url, "--advertise-client-urls", url),
            *("--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer),
            *("--initial-cluster", f"bench={peer}", "--log-level", "error"),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=1) as answer:
                if b"true" in answer.read():
                    return url, proc
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise SystemExit("etcd did not become healthy in 20 s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--etcd", help="an etcd client URL; default: start one on loopback")
    parser.add_argument("-n", type=int, default=1000, help="timed calls per operation")
    args = parser.parse_args()
    proc = None
    scratch = tempfile.mkdtemp(prefix="bench-etcd-")
    try:
        if args.etcd:
            url = args.etcd
        else:
            if shutil.which("etcd") is None:
                raise SystemExit("no etcd on PATH: run tools/test-services, or pass --etcd URL")
            url, proc = _start_etcd(scratch)
        try:
            import uvloop

            asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
        except ImportError:
            pass
        candidates: list[tuple[str, Callable[[], dict[str, str]]]] = [
            ("brainy gateway (asyncio, HTTP/1.1 JSON)", lambda: asyncio.run(bench_brainy(url, args.n))),
            ("aetcd (asyncio, grpc.aio)", lambda: asyncio.run(bench_aetcd(url, args.n))),
            ("etcd3gw (requests, blocking)", lambda: bench_etcd3gw(url, args.n)),
            ("etcd3 (grpcio, blocking)", lambda: bench_etcd3(url, args.n)),
        ]
        for name, run in candidates:
            try:
                figures = run()
            except ImportError as exc:
                print(f"{name}: not installed or failed to import ({exc})")
                continue
            except Exception as exc:  # a client that cannot talk to this etcd is a finding, not a crash
                print(f"{name}: failed: {type(exc).__name__}: {exc}")
                continue
            print(name)
            for op, line in figures.items():
                print(f"  {op:10} {line}")
    finally:
        if proc is not None:
            proc.kill()
            proc.wait()
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
