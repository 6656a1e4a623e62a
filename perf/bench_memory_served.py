"""Benchmark: the memory doors served over HTTP/1.1. memory.remember from one connection and from 16 at once,
each remember a new conversation line (dedupe off, as perf/eval_conversations.py keeps them), durable before
its answer; then memory.recall in a scope of 10,000 memories, each question new (so its embedding is inside the
clock), one connection.

    python perf/bench_memory_served.py                   # 600 remembers a cell, 400 recalls
    python perf/bench_memory_served.py --count 200       # a quick look

The server runs on one core (``taskset``) and this script's client on the other; a remember costs the server
milliseconds, so a Python client on its own core is not what limits it. Each cell runs twice in one run,
against two servers on their own stores: the embedder's integer model (``brainy/index/quantize.py``) and the
model as installed (``BRAINY_CACHE_DIR`` at a file, so nothing can be derived), so the ratio is read from one
run on a shared box. Lines are distinct (perf/conversations.py's), so no embedding is ever reused.
Loopback only; every loop is bounded by its count.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import conversations as C  # noqa: E402
from measure import KEY, H1Client, free_port, nearest_rank, pinned, split_cores, wait_ready  # noqa: E402

from brainy.engine import init_store  # noqa: E402

PATH = "/v1/brains/main/memory/remember"
RECALL = "/v1/brains/main/memory/recall"
SCOPE_SIZE = 10_000


def lines(n: int, offset: int) -> list[str]:
    out: list[str] = []
    for conversation in C.conversations(range(12)):
        out.extend(t.stored() for t in conversation.turns)
        if len(out) >= n + offset:
            break
    return out[offset : offset + n]


def request(text: str, path: str = PATH) -> bytes:
    document = {"text": text, "scope": "bench", "dedupe": False} if path == PATH else {"query": text, "scope": "bench"}
    body = orjson.dumps(document)
    return (
        f"POST {path} HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: Bearer {KEY}\r\n"
        f"content-type: application/json\r\ncontent-length: {len(body)}\r\n\r\n"
    ).encode() + body


def questions(n: int) -> list[str]:
    out: list[str] = []
    for conversation in C.conversations(range(12)):
        out.extend(q.text for q in conversation.questions)
    return list(dict.fromkeys(out))[:n]


async def one_connection(port: int, texts: list[str], latencies: list[float], path: str = PATH) -> None:
    loop = asyncio.get_running_loop()
    transport, client = await loop.create_connection(H1Client, "127.0.0.1", port)
    try:
        for text in texts:
            client.waiter = loop.create_future()
            started = time.perf_counter()
            transport.write(request(text, path))
            answer = await client.waiter
            latencies.append((time.perf_counter() - started) * 1000)
            if b'"id"' not in answer and b'"memories"' not in answer:
                raise SystemExit(f"refused: {answer[:300]!r}")
    finally:
        transport.close()


async def cell(port: int, texts: list[str], connections: int, path: str = PATH) -> tuple[float, list[float]]:
    """(requests a second, sorted milliseconds) for ``texts`` split over ``connections``."""
    latencies: list[float] = []
    share = [texts[i::connections] for i in range(connections)]
    started = time.perf_counter()
    await asyncio.gather(*(one_connection(port, part, latencies, path) for part in share))
    return len(texts) / (time.perf_counter() - started), sorted(latencies)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=600, help="remembers a cell")
    parser.add_argument("--recalls", type=int, default=400, help="recalls, each a new question")
    args = parser.parse_args()
    server_cores, load_cores = split_cores()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        keys = root / "keys"
        keys.write_text(f"{KEY} person:bench *\n")
        keys.chmod(0o600)
        blocked = root / "no-cache"
        blocked.write_text("")
        servers = {}
        procs = []
        for name, env in (("integer model", {}), ("as installed", {"BRAINY_CACHE_DIR": str(blocked)})):
            store = root / name.replace(" ", "-")
            init_store(store)
            port = free_port()
            procs.append(
                subprocess.Popen(
                    [*pinned(server_cores), sys.executable, "-m", "brainy.cli", "serve", "--listen"]
                    + [f"127.0.0.1:{port}", "--brain", f"main={store}", "--keys", str(keys)],
                    env={**os.environ, **env},
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            )
            servers[name] = port
        try:
            for port in servers.values():
                wait_ready(port)
            if load_cores:
                os.sched_setaffinity(0, load_cores)
            texts = lines(2 * 16 + 4 * args.count, 0)
            for port in servers.values():  # the model loaded, and each connection's first answer out of the clock
                asyncio.run(cell(port, texts[:16], 16))
            used = 16
            print(f"the memory doors over HTTP/1.1; remember: {args.count} a cell, durable, distinct lines")
            print(f"{'cell':<28}{'server':<16}{'per s':>8}{'p50 ms':>9}{'p99 ms':>9}")
            for connections in (1, 16):
                rates = {}
                for name, port in servers.items():
                    batch = texts[used : used + args.count]
                    used += args.count
                    rate, latencies = asyncio.run(cell(port, batch, connections))
                    rates[name] = rate
                    p50, p99 = nearest_rank(latencies, 50), nearest_rank(latencies, 99)
                    print(f"{f'{connections} connection(s)':<28}{name:<16}{rate:>8.0f}{p50:>9.1f}{p99:>9.1f}")
                print(f"{'':<28}{'ratio':<16}{rates['integer model'] / rates['as installed']:>8.2f}")
            port = servers["integer model"]
            held = 16 + 2 * args.count
            filler = lines(SCOPE_SIZE - held, 0)  # the lines again, each made new by its number
            asyncio.run(cell(port, [f"{t} ({i})" for i, t in enumerate(filler)], 16))
            asked = questions(args.recalls)
            for name, port in servers.items():
                if name == "as installed":
                    continue
                rate, latencies = asyncio.run(cell(port, asked, 1, RECALL))
                p50, p99 = nearest_rank(latencies, 50), nearest_rank(latencies, 99)
                print(f"{f'recall, {SCOPE_SIZE} in scope':<28}{name:<16}{rate:>8.0f}{p50:>9.1f}{p99:>9.1f}")
        finally:
            for proc in procs:
                proc.terminate()
                proc.wait(10)


if __name__ == "__main__":
    main()
