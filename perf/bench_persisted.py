"""Benchmark: the first aggregate door and the first vector find after a clean restart and after a SIGKILL,
and what persisting them adds to a flush (docs/store-format.md, "Aggregate snapshots", "Vector index
snapshots").

    python perf/bench_persisted.py --fast --stores DIR                      # build once into DIR, then time
    python perf/bench_persisted.py --stores DIR --sizes 10000,100000,1000000 --million /path/clean-1000000

Stores, built once into ``--stores`` with the public API only (so the same script measures any version of
brainy on its own copy: run it with ``PYTHONPATH`` at another checkout for the figures before a change):

- ``agg-clean-N``: the entities of ``bench_queries.py`` (commits of 1,000, a flush every 20,000; at 1,000,000
  a copy of ``--million``, a store built that way), then one aggregate, ``by_team`` (count, mean and max of
  ``score`` and the count of ``owner``, by team and status), defined and closed cleanly.
- ``agg-crashed-N``: a copy of it into which a child process writes a tail of 2,000 entities in 20 durable
  commits, then SIGKILLs itself (no flush, no close record).
- ``vec-clean-N``: N random unit 384-d vectors (``bench_vectors.py``'s rows) in commits of 1,000, a flush
  every 20,000, the graph caught up, closed cleanly; ``vec-crashed-N``: a copy, a child writes 2,000 new
  vectors and 1,000 vector updates in 30 commits, flushes once midway, and SIGKILLs itself.

Timed, each value one ``Brain.attach`` in the worker (a crashed store replays its tail) and one door:

- ``first-aggregate[clean|crashed N]``: ``aggregate`` of ``by_team``.
- ``first-vector-find[clean|crashed N]``: a ``find`` by vector, limit 10.
- ``flush-lock.aggregates[N]``: the groups copied under the brain's lock by a flush; ``flush.aggregates[N]``:
  the encode outside it (written to disk on top, not timed).
- ``flush-lock.vectors[N]``: a delta of 2,000 written slots and 200 killed copied under the lock;
  ``flush.vectors[N]``: its encode outside it.

The manager prints, once, where each first door's state came from (``snapshot at G`` or ``rows``) and the
snapshot files' sizes. ``--fresh K`` instead times each first door in K new processes (the clock starts at the attach, the
imports outside it) and prints the values, without pyperf: what a before-and-after
comparison on a 1,000,000-entity store can afford when the "before" scans every row. ``--served`` marks each
handle as the server's pool does (``background``: the postings read in place, no projection built inside a
read), which isolates the vector index's own part of the first find. ``--rewrite-from OLD`` copies the
``vec-*`` stores another version built under ``OLD`` (a 1,000,000-vector store takes most of an hour to
build) and rewrites their vector snapshot files in this version's formats, the chain's shape kept (the same
links at the same stamps, the graph's bytes as they were): the same stores, as this version would write them.
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("BRAINY_EMBED_MODEL_DIR", "/nonexistent-model-dir")  # no model: only given vectors

import numpy as np  # noqa: E402
import pyperf  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_cold_start as BC  # noqa: E402  (the entity stores and their crashed tail)
import bench_vectors as BV  # noqa: E402  (the vectored rows)

from brainy.engine import Brain, init_store  # noqa: E402

BY_TEAM = {
    "name": "by_team",
    "source": {},
    "groupBy": ["team", "status"],
    "metrics": {
        "n": {"op": "count"},
        "mean": {"op": "avg", "field": "score"},
        "hi": {"op": "max", "field": "score"},
        "owned": {"op": "count", "field": "owner"},
    },
}
FLUSH_EVERY = 20_000
TAIL_NEW, TAIL_UPDATES, TAIL_BATCH = 2_000, 1_000, 100

VECTOR_CRASH = r"""
import os, signal, sys
sys.path.insert(0, sys.argv[2])
import numpy as np
import bench_vectors as BV
from brainy.engine import Brain
n, new, updates, batch = map(int, sys.argv[3:7])
brain = Brain.open(sys.argv[1], flush_bytes=1 << 40)
x = BV.vectors(new + updates, "random", seed=BV.SEED + 9)
commits = [[{"type": "document", "id": f"tail-{i}", "vector": x[i].tolist()} for i in range(s, s + batch)]
           for s in range(0, new, batch)]
commits += [[{"type": "document", "id": f"u{(i * 7919) % n}", "vector": x[new + i].tolist(), "upsert": True}
             for i in range(s, s + batch)] for s in range(0, updates, batch)]
for c, items in enumerate(commits):
    brain.addMany({"items": items})
    if c == len(commits) // 2:
        brain.flush()
os.kill(os.getpid(), signal.SIGKILL)
"""


def rewrite_vector_snapshots(old: Path, store: Path) -> None:
    """``old`` copied to ``store``, its vector base and deltas written again in this version's formats."""
    import crc32c

    from brainy.index import vector_format as F
    from brainy.index import vectors as V
    from brainy.store.files import write_durably

    shutil.copytree(old, store)
    for path in sorted((store / "index").glob("*" + F.SUFFIX)):
        index = V.VectorIndex.decode(F._mapped(path), graph_later=True, name=path.name)
        frozen = index.freeze(base=True)
        index.graph_for(frozen)
        write_durably(path, frozen.encode())
    for path in sorted((store / "index").glob("*" + F.DELTA_SUFFIX)):
        body = bytearray(path.read_bytes()[:-4])
        body[4:8] = F.DELTA_FORMAT.to_bytes(4, "little")
        write_durably(path, bytes(body) + F._CRC.pack(crc32c.crc32c(body)))


def _crash(script: str, store: Path, *args: Any) -> None:
    done = subprocess.run(
        [sys.executable, "-c", script, str(store), str(Path(__file__).resolve().parent), *map(str, args)]
    )
    assert done.returncode == -9, done


def build_aggregates(root: Path, n: int, million: Path | None) -> None:
    clean, crashed = root / f"agg-clean-{n}", root / f"agg-crashed-{n}"
    if not (clean / "MANIFEST").exists():
        shutil.rmtree(clean, ignore_errors=True)
        started = time.perf_counter()
        if n == 1_000_000 and million is not None:
            shutil.copytree(million, clean)
        else:
            BC.build(root, n)  # clean-N (and crashed-N, the projection bench's): the entities
            shutil.copytree(root / f"clean-{n}", clean)
        with Brain.open(clean) as brain:
            brain.defineAggregate(BY_TEAM, caller="person:bench")
        print(f"  agg-clean-{n}: built in {time.perf_counter() - started:.1f} s", flush=True)
    if not (crashed / "MANIFEST").exists():
        shutil.rmtree(crashed, ignore_errors=True)
        shutil.copytree(clean, crashed)
        _crash(BC.CRASH, crashed)


def build_vectors(root: Path, n: int) -> None:
    clean, crashed = root / f"vec-clean-{n}", root / f"vec-crashed-{n}"
    if not (clean / "MANIFEST").exists():
        shutil.rmtree(clean, ignore_errors=True)
        started = time.perf_counter()
        init_store(clean)
        x, rnd = BV.vectors(n, "random"), random.Random(BV.SEED)
        brain = Brain.open(clean, flush_bytes=1 << 40)
        for s in range(0, n, BV.BATCH):
            items = BV.items(x, s, min(s + BV.BATCH, n), rnd)
            brain.addMany({"items": [dict(item, id=f"u{s + i}") for i, item in enumerate(items)]})
            if (s + BV.BATCH) % FLUSH_EVERY == 0:
                brain.flush()
        brain.find({"vector": x[0].tolist()})
        brain.vector_follower.catch_up()
        brain.close()
        print(f"  vec-clean-{n}: built in {time.perf_counter() - started:.1f} s", flush=True)
    if not (crashed / "MANIFEST").exists():
        shutil.rmtree(crashed, ignore_errors=True)
        shutil.copytree(clean, crashed)
        _crash(VECTOR_CRASH, crashed, n, TAIL_NEW, TAIL_UPDATES, TAIL_BATCH)


QUERY = BV.vectors(1, "random", seed=BV.SEED + 5)[0].tolist()


def first_aggregate(brain: Brain) -> Any:
    return brain.aggregate({"name": "by_team", "limit": 10})


def first_vector_find(brain: Brain) -> Any:
    return brain.find({"vector": QUERY, "limit": 10})


def time_first(store: Path, door: Callable[[Brain], Any]) -> Callable[[int], float]:
    def run(loops: int) -> float:
        total = 0.0
        for _ in range(loops):
            started = time.perf_counter()
            brain = Brain.attach(store)
            door(brain)
            total += time.perf_counter() - started
            closed(brain)
        return total

    return run


def closed(brain: Brain) -> None:
    """Close once the graph's catch-up thread (a daemon the door may start) is done: a process must not exit
    while faiss is inserting."""
    while getattr(brain.vector_follower, "_catching_up", False):
        time.sleep(0.01)
    brain.close()


def time_aggregate_flush(store: Path, part: str) -> Callable[[int], float]:
    from brainy.index import aggregate_follower as A

    def run(loops: int) -> float:
        with Brain.attach(store) as brain, brain.at().aggregates() as state:  # loaded outside the clock
            built = sorted(state.built)
            total = 0.0
            for _ in range(loops):
                started = time.perf_counter()
                frozen = [A._frozen(state.built[name]) for name in built]
                if part == "encode":
                    started = time.perf_counter()
                    A.encode_snapshot(state.stamp, frozen, [])
                total += time.perf_counter() - started
        return total

    return run


def time_vector_flush(store: Path, part: str) -> Callable[[int], float]:
    def run(loops: int) -> float:
        x = BV.vectors(2_000, "random", seed=BV.SEED + 11)
        with Brain.attach(store) as brain, brain.at().vectors() as index:
            total = 0.0
            rng = np.random.default_rng(1)
            if index.link is None:  # built from the rows: the chain starts with a base
                index.freeze(base=True)
            top = int(index._dense[: len(index._dense)].max()) + 1
            for _ in range(loops):
                for i in range(2_000):  # a flush's worth of new vectors, and 200 killed (outside the clock)
                    index.apply(None, {"denseInt": top, "vector": x[i].tobytes()})
                    top += 1
                for d in rng.integers(0, top, 200).tolist():
                    held = index.vector_of(d)
                    if held is not None:
                        index.apply({"denseInt": d, "vector": held.tobytes()}, None)
                index.stamp += 1
                started = time.perf_counter()
                frozen = index.freeze(base=False)
                if part == "encode":
                    started = time.perf_counter()
                    frozen.encode()
                total += time.perf_counter() - started
        return total

    return run


FRESH = """
import sys, time
sys.path.insert(0, sys.argv[3])
from brainy.engine import Brain
import bench_persisted as B
started = time.perf_counter()
brain = Brain.attach(sys.argv[1])
if sys.argv[4] == "served":  # as the server's pool serves a handle: no read builds a projection inline
    brain.follower.background = brain.vector_follower.background = True
    brain.follower.door_ends_first_read = brain.vector_follower.door_ends_first_read = True
try:
    (B.first_aggregate if sys.argv[2] == "agg" else B.first_vector_find)(brain)
    how = "from " + (getattr(brain.aggregate_follower if sys.argv[2] == "agg" else brain.vector_follower,
                             'built_from', None) or 'rows')
except Exception as exc:
    how = "refused: " + type(exc).__name__
print(f"{(time.perf_counter() - started) * 1000:.0f} ms {how}")
if sys.argv[4] == "served":  # the door has answered: the pool lets what waited for it start
    brain.first_door_done()
B.closed(brain)
"""


def fresh(root: Path, sizes: list[int], vector_sizes: list[int], runs: int, served: bool) -> None:
    for prefix, ns in (("agg", sizes), ("vec", vector_sizes)):
        for n in ns:
            for kind in ("clean", "crashed"):
                store = root / f"{prefix}-{kind}-{n}"
                values = [
                    subprocess.run(
                        [
                            sys.executable,
                            "-c",
                            FRESH,
                            str(store),
                            prefix,
                            str(Path(__file__).resolve().parent),
                            "served" if served else "attach",
                        ],
                        capture_output=True,
                        text=True,
                        check=True,
                    ).stdout.strip()
                    for _ in range(runs)
                ]
                print(f"  {store.name}: {'; '.join(values)}", flush=True)


def _pass(cmd: list[str], args: Any) -> None:
    cmd.extend(["--stores", args.stores, "--sizes", args.sizes, "--vector-sizes", args.vector_sizes])


def report(root: Path, sizes: list[int], vector_sizes: list[int]) -> None:
    for prefix, ns, door in (("agg", sizes, first_aggregate), ("vec", vector_sizes, first_vector_find)):
        for n in ns:
            for kind in ("clean", "crashed"):
                store = root / f"{prefix}-{kind}-{n}"
                started = time.perf_counter()
                brain = Brain.attach(store)
                door(brain)
                took = time.perf_counter() - started
                follower = brain.aggregate_follower if prefix == "agg" else brain.vector_follower
                how = getattr(follower, "built_from", None) or "rows"
                closed(brain)
                files = sorted(
                    (p.name, p.stat().st_size) for p in (store / "index").iterdir() if not p.name.endswith(".proj")
                )
                print(
                    f"  {prefix}-{kind}-{n}: first door {took * 1000:.0f} ms from {how}; snapshots {files}", flush=True
                )


def main() -> None:
    runner = pyperf.Runner(add_cmdline_args=_pass)
    runner.argparser.add_argument("--stores", required=True, help="a directory for the stores (built once; kept)")
    runner.argparser.add_argument("--sizes", default="10000,100000", help="entity counts for the aggregates")
    runner.argparser.add_argument("--vector-sizes", default="10000,100000", help="vector counts")
    runner.argparser.add_argument("--million", help="a 1,000,000-entity store of bench_cold_start.py to copy")
    runner.argparser.add_argument(
        "--fresh", type=int, help="time each first door in this many new processes, without pyperf"
    )
    runner.argparser.add_argument(
        "--rewrite-from",
        help="a --stores directory of another version: its vec-* "
        "stores copied and their vector snapshots rewritten in this version's formats",
    )
    runner.argparser.add_argument(
        "--served",
        action="store_true",
        help="with --fresh: the handle as the server's "
        "pool serves it (the projections read in place, never built inside a read)",
    )
    args = runner.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s]
    vector_sizes = [int(s) for s in args.vector_sizes.split(",") if s]
    runner.metadata["description"] = "brainy: the first aggregate and vector door after a restart or a SIGKILL"
    root = Path(args.stores)
    if not args.worker:
        root.mkdir(parents=True, exist_ok=True)
        for n in sizes:
            build_aggregates(root, n, Path(args.million) if args.million else None)
        for n in vector_sizes:
            if args.rewrite_from:
                for kind in ("clean", "crashed"):
                    if not (root / f"vec-{kind}-{n}" / "MANIFEST").exists():
                        rewrite_vector_snapshots(Path(args.rewrite_from) / f"vec-{kind}-{n}", root / f"vec-{kind}-{n}")
            build_vectors(root, n)
        if args.fresh:
            fresh(root, sizes, vector_sizes, args.fresh, args.served)
            return
        report(root, sizes, vector_sizes)
    persisted = hasattr(__import__("brainy.index.aggregates", fromlist=["x"]), "encode_snapshot")
    for n in sizes:
        for kind in ("clean", "crashed"):
            runner.bench_time_func(
                f"first-aggregate[{kind} {n}]", time_first(root / f"agg-{kind}-{n}", first_aggregate)
            )
        if persisted:
            for part in ("copy", "encode"):
                runner.bench_time_func(
                    f"flush{'-lock' if part == 'copy' else ''}.aggregates[{n}]",
                    time_aggregate_flush(root / f"agg-clean-{n}", part),
                )
    for n in vector_sizes:
        for kind in ("clean", "crashed"):
            runner.bench_time_func(
                f"first-vector-find[{kind} {n}]", time_first(root / f"vec-{kind}-{n}", first_vector_find)
            )
        if persisted:
            for part in ("copy", "encode"):
                runner.bench_time_func(
                    f"flush{'-lock' if part == 'copy' else ''}.vectors[{n}]",
                    time_vector_flush(root / f"vec-clean-{n}", part),
                )


if __name__ == "__main__":
    main()
