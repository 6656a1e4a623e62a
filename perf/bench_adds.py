"""Benchmark: served single ``add`` writes a second at many connections, each one acknowledged once durable.

    python perf/bench_adds.py                                  # this tree, 3 rounds
    python perf/bench_adds.py --tree /path/to/other --rounds 4 # and another checkout, interleaved
    python perf/bench_adds.py --connections 64 --seconds 8

Each run serves a fresh store (``brainy serve`` from that tree, perf/bench_ingest.py's ``serve``: pinned to one
core) and loads it from the other core with h2load: ``--connections`` HTTP/1.1 keep-alive connections with one
``add`` in flight on each (``{"type": "document", "metadata": {"n": 1}}``, no id: a new entity every time) for
``--seconds`` after a second's warm-up. Printed: each run's writes a second and the server's CPU a write (every
thread), then each tree's median. With ``--tree`` the trees take turns, their order reversed every other round.

Measured (session 33; the box's pace moved a fifth either way within minutes), 16 connections, 3 rounds
interleaved with 2b1c4f4, the tree before a served write's durable wait went with the others waiting
(brainy/engine/commits.py, ``_Durability``): median 3,628 adds a second (3,154-3,735; 255-306 us of the server's
CPU a write) against 2,556 (2,128-2,617; 364-449 us).

Session 34, 4 rounds interleaved with fb80410, the tree before a served write was answered once durable, before
its followers moved (brainy/store/commit_path.py, ``durable_at``): median 3,460 adds a second (3,291-3,819; 272 us
of CPU a write) against 3,159 (3,089-3,350; 297 us), 4 of 4 faster.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_ingest import KEY, serve, stop  # noqa: E402
from measure import cpu_seconds, h1_writes, split_cores  # noqa: E402

BODY = b'{"type": "document", "metadata": {"n": 1}}'


def run(
    tree: Path, connections: int, seconds: int, cores: tuple[set[int] | None, set[int] | None]
) -> tuple[float, float]:
    """One run on a fresh store served from ``tree``: (writes a second, the server's CPU seconds a write)."""
    server, client = cores
    with tempfile.TemporaryDirectory(prefix="brainy-adds-") as scratch:
        body = Path(scratch) / "add.json"
        body.write_bytes(BODY)
        proc, port = serve(tree, Path(scratch), server)
        try:
            before = cpu_seconds(proc.pid)
            rate = h1_writes(f"http://127.0.0.1:{port}/v1/brains/main/add", body, KEY, connections, seconds, client)
            busy = cpu_seconds(proc.pid) - before
        finally:
            stop(proc)
    # the server's CPU over the warm-up second and the run, over the writes of both at the run's pace
    return rate, busy / (rate * (seconds + 1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tree", action="append", default=[], help="another checkout to measure beside this one")
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--seconds", type=int, default=6)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    trees = [HERE.parent, *(Path(t).resolve() for t in args.tree)]
    cores = split_cores()
    rates: dict[Path, list[float]] = {tree: [] for tree in trees}
    for r in range(args.rounds):
        for tree in trees if r % 2 == 0 else trees[::-1]:
            rate, cpu = run(tree, args.connections, args.seconds, cores)
            rates[tree].append(rate)
            print(f"{tree}: {rate:8,.0f} adds/s  server CPU {cpu * 1e6:4.0f} us a write", flush=True)
    for tree, values in rates.items():
        print(f"{tree}: median {statistics.median(values):,.0f} adds/s ({', '.join(f'{v:,.0f}' for v in values)})")


if __name__ == "__main__":
    main()
