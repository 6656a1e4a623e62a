"""Benchmark: the first door on a brain after an open, clean or after a SIGKILL, at 10,000 and 100,000 entities.

    python perf/bench_cold_start.py --fast -p 2                    # quick look
    python perf/bench_cold_start.py --sizes 10000,100000,1000000   # add a million (builds in about 15 min)
    python perf/bench_cold_start.py --stores DIR                   # reuse (or build once into) DIR

The manager builds, once per size, the stores of ``bench_queries.py`` (its entities; commits of 1,000,
a flush every 20,000, closed cleanly, so the projections are persisted at the head), then copies each
and has a child process write a tail into the copy — 2,000 entities in 20 commits, durable, never
flushed — and SIGKILL itself: no flush, no close record. Workers get the directory (``--stores``).

What is timed (every value is one open; what a loop sets up or closes is outside the clock):

- ``first-get[clean|crashed N]``: ``Brain.attach`` (the crashed one replays its tail) and one ``get``.
- ``first-find[clean|crashed N]``: attach and a two-predicate ``find`` answered in the read: the persisted
  snapshot decoded and caught up from the replayed tail (what an in-process open pays).
- ``first-find-served[clean|crashed N]``: attach as the server's pool does (projections built on their
  own thread from admission, once the first read in place is answered) and the same ``find``: answered
  from the snapshot read in place, at the head (the clean store) or behind it with the replayed tail laid
  over it (the crashed one, ``brainy/index/overlaid.py``); ``ProjectionBehindError`` after
  ``READ_WAIT_SECONDS`` only where no snapshot is reachable. The manager prints which it was.
- ``first-find-ordered-served[clean|crashed N]``: the same, the find ordered by ``createdAt`` (in place, the
  order column's values of the candidates only, and ids only where values tie).
- ``flush-lock.encode[N]`` and ``flush-lock.copy[N]``: how long a flush holds the state lock (which
  every commit's acknowledgement takes) to persist the projections: the encode it held before, the
  copy it holds now (the encode then runs on the copy, unlocked).

Once, outside pyperf, the manager times the build from rows (what the first find paid before the
projections were persisted at every flush) and the served first find's outcome.
"""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("BRAINY_EMBED_MODEL_DIR", "/nonexistent-model-dir")  # no model: rows stored unembedded

import pyperf  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_queries as BQ  # noqa: E402  (the same entities as the query benchmark)

from brainy.contract import refusals as R  # noqa: E402
from brainy.engine import Brain, init_store  # noqa: E402
from brainy.index.projections import Projections, encode_snapshot  # noqa: E402

TAIL_COMMITS, TAIL_BATCH = 20, 100
FIND = {"type": "document", "where": {"status": "open", "team": "t7"}, "limit": 10}
ORDERED = dict(FIND, orderBy="createdAt", order="desc")  # the order column read for the candidates only
KEY = "person-000001"  # a natural key every size holds

CRASH = r"""
import os, signal, sys
sys.path.insert(0, sys.argv[2])
import bench_queries as BQ
from brainy.engine import Brain
brain = Brain.open(sys.argv[1], flush_bytes=1 << 40)
batch = next(BQ.entities(seed=7))
for c in range(%d):
    brain.addMany({"items": [dict(item, id=f"tail-{c}-{i}") for i, item in enumerate(batch[:%d])]})
os.kill(os.getpid(), signal.SIGKILL)
""" % (TAIL_COMMITS, TAIL_BATCH)


def build(root: Path, n: int) -> None:
    clean, crashed = root / f"clean-{n}", root / f"crashed-{n}"
    if not (clean / "MANIFEST").exists():
        shutil.rmtree(clean, ignore_errors=True)
        BQ.ENTITIES = n
        started = time.perf_counter()
        init_store(clean)
        brain = Brain.open(clean, flush_bytes=1 << 40, compact_at=1 << 30)
        written = 0
        for batch in BQ.entities():
            brain.addMany({"items": batch})
            written += len(batch)
            if written % 20_000 == 0:
                brain.flush()
        brain.close()
        print(f"  clean-{n}: built in {time.perf_counter() - started:.1f} s", flush=True)
    if not (crashed / "MANIFEST").exists():
        shutil.rmtree(crashed, ignore_errors=True)
        shutil.copytree(clean, crashed)
        done = subprocess.run([sys.executable, "-c", CRASH, str(crashed), str(Path(__file__).resolve().parent)])
        assert done.returncode == -9, done
        assert (crashed / "locks" / "_writer.lock").exists() and not (crashed / "locks" / "_writer.close").exists()


def time_open(store: Path, door: Callable[[Brain], Any], served: bool = False) -> Callable[[int], float]:
    def run(loops: int) -> float:
        total = 0.0
        for _ in range(loops):
            started = time.perf_counter()
            brain = Brain.attach(store)
            if served:
                brain.follower.background = brain.vector_follower.background = True
                brain.follower.warm()
            door(brain)
            total += time.perf_counter() - started
            brain.close()
        return total

    return run


def served_find(brain: Brain, query: dict[str, Any] = FIND) -> str:
    try:
        brain.find(query)
        return "answered"
    except R.ProjectionBehindError:
        return "ProjectionBehindError"


def time_lock(store: Path, how: str) -> Callable[[int], float]:
    def run(loops: int) -> float:
        with Brain.attach(store) as brain, brain.at().projections() as proj:  # outside the clock
            pass
        started = time.perf_counter()
        for _ in range(loops):
            proj.copy() if how == "copy" else encode_snapshot(proj)
        return time.perf_counter() - started

    return run


def _pass(cmd: list[str], args: Any) -> None:
    cmd.extend(["--stores", args.stores, "--sizes", args.sizes])


def main() -> None:
    runner = pyperf.Runner(add_cmdline_args=_pass)
    runner.argparser.add_argument("--stores", help="a directory for the stores (built there once; kept)")
    runner.argparser.add_argument("--sizes", default="10000,100000", help="entity counts, comma-separated")
    args = runner.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    runner.metadata["description"] = "brainy: the first door after an open, clean and after a SIGKILL"
    if not args.worker:
        if args.stores is None:
            made = Path(tempfile.mkdtemp(prefix="brainy-bench-cold-"))
            atexit.register(shutil.rmtree, made, True)
            args.stores = str(made)
        root = Path(args.stores)
        root.mkdir(parents=True, exist_ok=True)
        for n in sizes:
            build(root, n)
            with Brain.attach(root / f"clean-{n}") as brain:
                started = time.perf_counter()
                Projections.build(brain.at().entities(), brain.head)
                rows = time.perf_counter() - started
            for kind in ("clean", "crashed"):
                with Brain.attach(root / f"{kind}-{n}") as brain:
                    brain.follower.background = True
                    brain.follower.warm()
                    outcome = served_find(brain)
                    replayed = brain.recovery["replayedGenerations"] if brain.recovery else 0
                print(f"  {kind}-{n}: replays {replayed} generation(s); first served find: {outcome}", flush=True)
            print(
                f"  {n}: projections from the rows (the first find before every flush persisted them): "
                f"{rows * 1000:.0f} ms",
                flush=True,
            )
    root = Path(args.stores)
    for n in sizes:
        for kind in ("clean", "crashed"):
            store = root / f"{kind}-{n}"
            runner.bench_time_func(f"first-get[{kind} {n}]", time_open(store, lambda b: b.get(KEY)))
            runner.bench_time_func(f"first-find[{kind} {n}]", time_open(store, lambda b: b.find(FIND)))
            runner.bench_time_func(f"first-find-served[{kind} {n}]", time_open(store, served_find, served=True))
            runner.bench_time_func(
                f"first-find-ordered-served[{kind} {n}]",
                time_open(store, lambda b: served_find(b, ORDERED), served=True),
            )
        runner.bench_time_func(f"flush-lock.encode[{n}]", time_lock(root / f"clean-{n}", "encode"))
        runner.bench_time_func(f"flush-lock.copy[{n}]", time_lock(root / f"clean-{n}", "copy"))


if __name__ == "__main__":
    main()
