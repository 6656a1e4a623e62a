"""Benchmark: the pool over many brains: names known at start, readmission of an evicted brain, a sweep under
a budget.

    python perf/bench_pool.py --fast -p 2
    python perf/bench_pool.py --brains 1000 --hold 50 --stores DIR

The manager lays out ``--brains`` stores under one ``--brains-dir`` (each 200 entities in two commits,
closed cleanly), once. What is timed:

- ``pool.start+first-get[N names]``: a ``Pool`` over the directory (the names listed, nothing opened)
  and the first ``get`` on one brain: what a server started with ``--brains-dir`` pays before its first
  answer, less the listener.
- ``readmit+get``: a writer evicted by the arbiter (flushed, lease kept), then the next door: the
  open with the kept lease and one ``get``.

Once, outside pyperf, the manager sweeps every brain (a ``get`` on each, in order, twice) under a
budget the size of ``--hold`` brains' measured footprint (``BRAINY_POOL_BUDGET_BYTES``'s in-process
twin), ticking the arbiter after each door, and prints the largest held figure against the budget,
the evictions, and that every door answered.
"""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("BRAINY_EMBED_MODEL_DIR", "/nonexistent-model-dir")  # no model: rows stored unembedded

import pyperf  # noqa: E402

from brainy.engine import Brain, init_store  # noqa: E402
from brainy.host import arbiter as A  # noqa: E402
from brainy.host.pool import Pool  # noqa: E402


def lay_out(root: Path, brains: int) -> None:
    for i in range(brains):
        path = root / f"b{i:04d}"
        if (path / "MANIFEST").exists():
            continue
        init_store(path)
        with Brain.open(path) as brain:
            for c in range(2):
                brain.addMany(
                    {
                        "items": [
                            {"type": "document", "id": f"n{c}-{j}", "data": f"note {i} {c} {j}"} for j in range(100)
                        ]
                    }
                )


def door(pool: Pool, name: str, key: str = "n1-99") -> None:
    """One read door on ``name`` as the dispatcher runs it: in flight, resolved (readmitting), answered."""
    entered = pool.enter(name)
    try:
        assert pool.resolve(name, False).get(key)["entity"]["key"] == key
    finally:
        pool.left(entered)


def budget(bytes_: int) -> A.Budget:
    return A.Budget(bytes_, "bench", None, None, A.rss_bytes(), overridden=True)


def time_start(root: Path) -> Callable[[int], float]:
    def run(loops: int) -> float:
        total = 0.0
        for _ in range(loops):
            started = time.perf_counter()
            pool = Pool(brains_dir=root, budget=budget(1 << 40))
            assert len(pool.known()) > 0
            door(pool, "b0000")
            total += time.perf_counter() - started
            pool.close_all()
        return total

    return run


def time_readmit(root: Path) -> Callable[[int], float]:
    def run(loops: int) -> float:
        pool = Pool(brains_dir=root, budget=budget(1 << 40))
        pool.arbiter.stop()
        entry = pool._entry("b0001")
        pool.resolve("b0001", True)  # the writer, so its eviction keeps the lease
        total = 0.0
        for _ in range(loops):
            assert pool.evict(entry, "bench")
            started = time.perf_counter()
            door(pool, "b0001")
            total += time.perf_counter() - started
        pool.close_all()
        return total

    return run


def sweep(root: Path, brains: int, hold: int) -> None:
    probe = Pool(brains_dir=root, budget=budget(1 << 40))
    probe.arbiter.stop()
    before = A.rss_bytes()
    for i in range(hold):
        door(probe, f"b{i:04d}")
    for entry in probe.resident_entries():  # what a brain holds includes the projections its admission builds
        assert entry.handle is not None
        entry.handle.follower.settle()
    per_brain = max(1, (A.rss_bytes() - before) // hold)
    probe.close_all()
    pool = Pool(brains_dir=root, budget=budget(per_brain * hold))
    pool.arbiter.stop()  # ticked by hand after each door, as a busy server's would be
    pool.arbiter.budget.baseline_bytes = A.rss_bytes()
    answered = worst = 0
    started = time.perf_counter()
    for _ in range(2):
        for i in range(brains):
            door(pool, f"b{i:04d}")
            answered += 1
            pool.arbiter.rebalance()
            worst = max(worst, pool.arbiter.held_bytes())
    seconds = time.perf_counter() - started
    b = pool.arbiter.budget.budget_bytes
    print(
        f"  sweep: {answered} doors over {brains} brains in {seconds:.1f} s, budget {b:,} bytes "
        f"({hold} brains at {per_brain:,}), largest held {worst:,} ({worst / b:.0%} of the budget), "
        f"{pool.arbiter.evictions} evictions, {len(pool.resident_entries())} resident at the end "
        f"(scale {pool.arbiter.scale:.2f})",
        flush=True,
    )
    pool.close_all()


def _pass(cmd: list[str], args: Any) -> None:
    cmd.extend(["--stores", args.stores, "--brains", str(args.brains), "--hold", str(args.hold)])


def main() -> None:
    runner = pyperf.Runner(add_cmdline_args=_pass)
    runner.argparser.add_argument("--stores", help="the brains directory (laid out there once; kept)")
    runner.argparser.add_argument("--brains", type=int, default=1000)
    runner.argparser.add_argument("--hold", type=int, default=50, help="the budget, in brains")
    args = runner.parse_args()
    runner.metadata["description"] = "brainy: the pool over many brains"
    if not args.worker:
        if args.stores is None:
            made = Path(tempfile.mkdtemp(prefix="brainy-bench-pool-"))
            atexit.register(shutil.rmtree, made, True)
            args.stores = str(made)
        root = Path(args.stores)
        root.mkdir(parents=True, exist_ok=True)
        started = time.perf_counter()
        lay_out(root, args.brains)
        print(f"  {args.brains} brains laid out in {time.perf_counter() - started:.1f} s", flush=True)
        sweep(root, args.brains, args.hold)
    root = Path(args.stores)
    runner.bench_time_func(f"pool.start+first-get[{args.brains} names]", time_start(root))
    runner.bench_time_func("readmit+get", time_readmit(root))


if __name__ == "__main__":
    sys.exit(main())
