"""Benchmark: the aggregate door over 20,000 entities, maintained against recomputed, and what keeping three
aggregates adds to a commit.

    python perf/bench_aggregates.py --fast            # quick look
    python perf/bench_aggregates.py -o aggs.json      # keep the figures (pyperf compare_to ...)

The manager builds one store before anything is timed: 20,000 ``product`` entities in commits of 1,000,
each with ``cat`` (12 values), ``region`` (5), a float ``price``, an int ``qty`` and a ``when`` instant over
a year, and three aggregates: ``by_cat`` (count, sum, avg, min, max, stddev of price, by cat), ``by_day``
(sum of qty, by day of ``when`` and region) and ``by_region`` (count, variance of qty, max price, by
region). A worker attaches it read-only and builds the aggregate state before its first timed loop.

What is timed:

- ``aggregate.maintained[by_cat]`` / ``[by_day]``: ``aggregate`` at the head, answered from the state the
  follower keeps (the 12 or about 1,800 groups ordered and paged; no row read).
- ``aggregate.recomputed[by_cat]`` / ``[by_day]``: the same answer computed from the 20,000 rows, as a read
  at a past generation computes it.
- ``apply[100 moves x 3 aggregates]``: one commit's worth of entity moves (100 updates that move rows
  between groups) applied to the three aggregates' state: the work maintenance adds once a commit is
  durable.
- ``commit.addMany[100][N aggregates]``: a durable ``addMany`` of 100 rows on a fresh writer store of 2,000
  rows, with no aggregate and with the three (state built), fsync included.
"""

from __future__ import annotations

import atexit
import random
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import stored  # perf/stored.py: the shared --store option

from brainy.doors import aggregates as AD
from brainy.engine import Brain, init_store
from brainy.index import aggregates as A

ENTITIES = 20_000
BATCH = 1_000
SEED = 20261201
CALLER = "person:bench"
DAY = 86_400_000
START = 1_767_225_600_000  # 2026-01-01

DEFINITIONS = (
    {
        "name": "by_cat",
        "source": {"type": "product"},
        "groupBy": ["cat"],
        "metrics": {
            "n": {"op": "count"},
            "total": {"op": "sum", "field": "price"},
            "mean": {"op": "avg", "field": "price"},
            "lo": {"op": "min", "field": "price"},
            "hi": {"op": "max", "field": "price"},
            "sd": {"op": "stddev", "field": "price"},
        },
    },
    {
        "name": "by_day",
        "source": {"type": "product"},
        "groupBy": [{"field": "when", "window": "day"}, "region"],
        "metrics": {"qty": {"op": "sum", "field": "qty"}},
    },
    {
        "name": "by_region",
        "source": {"type": "product", "where": {"qty": {"gt": 0}}},
        "groupBy": ["region"],
        "metrics": {"v": {"op": "variance", "field": "qty"}, "hi": {"op": "max", "field": "price"}},
    },
)

_cache: dict[str, Any] = {}


def item(rnd: random.Random) -> dict[str, Any]:
    return {
        "type": "product",
        "metadata": {
            "cat": f"c{rnd.randrange(12)}",
            "region": f"r{rnd.randrange(5)}",
            "price": round(rnd.uniform(1, 500), 2),
            "qty": rnd.randrange(0, 20),
            "when": START + rnd.randrange(365 * DAY),
        },
    }


def build(path: Path, entities: int, define: bool) -> Brain:
    init_store(path)
    brain = Brain.open(path)
    rnd = random.Random(SEED)
    for start in range(0, entities, BATCH):
        brain.addMany({"items": [item(rnd) for _ in range(min(BATCH, entities - start))]}, caller=CALLER)
    if define:
        for definition in DEFINITIONS:
            brain.defineAggregate(definition, caller=CALLER)
    return brain


# -- in a worker ---------------------------------------------------------------------------------------


def reader() -> Brain:
    if "reader" not in _cache:
        b = Brain.attach(Path(_cache["args"].store) / "store")
        atexit.register(b.close)
        with b.at().aggregates():
            pass
        _cache["reader"] = b
    return _cache["reader"]


def time_maintained(name: str):
    def run(loops: int) -> float:
        b = reader()
        args = {"name": name}
        started = time.perf_counter()
        for _ in range(loops):
            b.aggregate(args)
        return time.perf_counter() - started

    return run


def time_recomputed(name: str):
    def run(loops: int) -> float:
        b = reader()
        args = {"name": name, "order": "desc", "limit": 100, "offset": 0}
        started = time.perf_counter()
        for _ in range(loops):
            snap = b.at()
            definition = AD._definition_at(snap, name)
            AD.page(definition, A.Aggregate(definition, snap.entities()).rows(), args)
        return time.perf_counter() - started

    return run


def time_apply(loops: int) -> float:
    b = reader()
    with b.at().aggregates() as held:
        built = list(held.built.values())
    rows = list(b.at().entities())[:100]
    rnd = random.Random(SEED)
    moved = []
    for row in rows:  # each row moves to another cat, region, day and price
        after = dict(row, metadata=dict(item(rnd)["metadata"]))
        moved.append((row, after))
    back = [(a, b_) for b_, a in moved]
    state = A.Aggregates(0)
    state.built = {a.definition.name: A.Aggregate(a.definition) for a in built}
    for row in rows:
        for a in state.built.values():
            a.move(None, row)
    total = 0.0
    for i in range(loops):
        moves = moved if i % 2 == 0 else back
        started = time.perf_counter()
        state.apply(moves, i + 1)
        total += time.perf_counter() - started
    return total


def time_commit(define: bool):
    def run(loops: int) -> float:
        key = f"writer{define}"
        if key not in _cache:
            root = Path(tempfile.mkdtemp(prefix="brainy-bench-aggs-w-"))
            atexit.register(shutil.rmtree, root, True)
            brain = build(root / "store", 2_000, define)
            atexit.register(brain.close)
            brain.aggregates()
            with brain.at().aggregates():
                pass
            _cache[key] = brain
        brain = _cache[key]
        rnd = random.Random(SEED + loops)
        batches = [{"items": [item(rnd) for _ in range(100)]} for _ in range(loops)]
        started = time.perf_counter()
        for batch in batches:
            brain.addMany(batch, caller=CALLER)
        return time.perf_counter() - started

    return run


def main() -> None:
    runner = stored.runner()
    args = runner.parse_args()
    _cache["args"] = args
    runner.metadata["description"] = "brainy aggregates over 20,000 entities: maintained vs recomputed"
    if not args.worker:
        root, missing = stored.root(args, "brainy-bench-aggs-")
        if missing:
            print(f"building {ENTITIES:,} entities and {len(DEFINITIONS)} aggregates under {root} ...", flush=True)
            build(root / "store", ENTITIES, True).close()
    for name in ("by_cat", "by_day"):
        runner.bench_time_func(f"aggregate.maintained[{name}]", time_maintained(name))
        runner.bench_time_func(f"aggregate.recomputed[{name}]", time_recomputed(name))
    runner.bench_time_func("apply[100 moves x 3 aggregates]", time_apply)
    for define in (False, True):
        runner.bench_time_func(
            f"commit.addMany[100][{3 if define else 0} aggregates]", time_commit(define), inner_loops=1
        )


if __name__ == "__main__":
    main()
