"""Benchmark: the graph walk over a 100,000-edge graph: traverse depth 3, and find with connected depth 2.

    python perf/bench_graph.py --fast            # quick look
    python perf/bench_graph.py -o graph.json     # keep the figures (pyperf compare_to ...)
    python perf/bench_graph.py --store DIR       # reuse (or build once into) DIR across runs

The store is built once, by the pyperf manager process, before anything is timed: 10,000 entities
(``thing`` and ``person``, natural keys ``n00000``...) and 100,000 distinct relations between uniformly
random pairs (self-loops and cycles included) of five verbs, written in commits of 1,000 (``addMany``,
``relateMany``), flushed and compacted into one table. Each worker attaches it read-only and makes its
first walk outside the timed loops: that builds the head's graph from the relation identity keys, as
the first walk after an open does (the manager prints how long that took).

What is timed (each loop walks from the next of 64 fixed anchors, so no anchor's rows stay hot):

- ``traverse.depth3``: ``{"from": anchor, "depth": 3}``: out-edges, breadth-first, the defaults
  (``limit`` 1,000 nodes, ``includeEntities``), so about 1,000 nodes, their rows and their relations.
- ``traverse.depth3[no entities]``: the same with ``includeEntities: false`` (the relations still ride).
- ``find.connected.depth2``: ``{"connected": {"node": anchor, "depth": 2}, "limit": 10}``: both
  directions, about 400 reachable entities intersected with the candidates, ten rows read.

The summary prints each cell's median (p50 of pyperf's values) and mean.
"""

from __future__ import annotations

import atexit
import random
import time
from pathlib import Path
from typing import Any

import stored  # perf/stored.py: the shared --store option

from brainy.engine import Brain, init_store

ENTITIES = 10_000
RELATIONS = 100_000
BATCH = 1_000
VERBS = ("relatedTo", "causes", "contains", "references", "dependsOn")
SEED = 20261201
ANCHORS = [f"n{i:05d}" for i in range(0, ENTITIES, ENTITIES // 64)][:64]

_cache: dict[str, Any] = {}


def build_store(path: Path) -> dict[str, Any]:
    """Write the graph at ``path``: commits of 1,000, one flush, one compaction, a clean close."""
    rnd = random.Random(SEED)
    started = time.perf_counter()
    init_store(path)
    brain = Brain.open(path, flush_bytes=1 << 40, compact_at=1 << 30)
    try:
        for start in range(0, ENTITIES, BATCH):
            brain.addMany(
                {
                    "items": [
                        {"type": "person" if i % 3 == 0 else "thing", "id": f"n{i:05d}", "metadata": {"i": i}}
                        for i in range(start, start + BATCH)
                    ]
                }
            )
        seen: set[tuple[int, int, str]] = set()  # relating the same three again would update, not add
        while len(seen) < RELATIONS:
            items = []
            while len(items) < BATCH:
                edge = (rnd.randrange(ENTITIES), rnd.randrange(ENTITIES), rnd.choice(VERBS))
                if edge not in seen:
                    seen.add(edge)
                    items.append({"from": f"n{edge[0]:05d}", "to": f"n{edge[1]:05d}", "type": edge[2]})
            brain.relateMany({"items": items})
        brain.flush()
        brain.compact()
        info = {"relationships": brain.counts()["relationshipsAllTiers"], "generation": brain.head}
    finally:
        brain.close()
    info["build seconds"] = round(time.perf_counter() - started, 1)
    return info


def first_walk(store: Path) -> dict[str, Any]:
    """The first walk after an attach builds the head's graph; how long it takes, and the answers' sizes."""
    b = Brain.attach(store)
    try:
        with b.at().projections():
            pass
        started = time.perf_counter()
        walk = b.traverse({"from": ANCHORS[0], "depth": 3})
        built = time.perf_counter() - started
        found = b.find({"connected": {"node": ANCHORS[0], "depth": 2}, "limit": 10})
        return {
            "first walk seconds (graph build)": round(built, 2),
            "traverse.depth3 nodes": len(walk["nodes"]),
            "traverse truncated": walk["truncated"],
            "connected.depth2 reachable": found["total"],
        }
    finally:
        b.close()


# -- in a worker -------------------------------------------------------------------------------------------


def brain() -> Brain:
    """The store attached read-only, its projections and graph built (outside every timed loop)."""
    if "brain" not in _cache:
        b = Brain.attach(Path(_cache["args"].store) / "store")
        atexit.register(b.close)
        b.traverse({"from": ANCHORS[0], "depth": 1})
        _cache["brain"] = b
    return _cache["brain"]


def time_door(door: str, args_of: Any):
    def run(loops: int) -> float:
        call = getattr(brain(), door)
        documents = [args_of(anchor) for anchor in ANCHORS]
        t0 = time.perf_counter()
        for i in range(loops):
            call(documents[i % len(documents)])
        return time.perf_counter() - t0

    return run


# -- main ----------------------------------------------------------------------------------------------


def main() -> None:
    runner = stored.runner()
    args = runner.parse_args()
    _cache["args"] = args
    runner.metadata["description"] = "brainy graph walk over 100,000 relations"

    if not args.worker:
        root, missing = stored.root(args, "brainy-bench-graph-")
        if missing:
            print(f"building {ENTITIES:,} entities and {RELATIONS:,} relations under {root} ...", flush=True)
            info = build_store(root / "store")
            print("  " + ", ".join(f"{k}: {v}" for k, v in info.items()), flush=True)
        print("  " + ", ".join(f"{k}: {v}" for k, v in first_walk(root / "store").items()), flush=True)

    results: dict[str, Any] = {}
    results["traverse.depth3"] = runner.bench_time_func(
        "traverse.depth3", time_door("traverse", lambda a: {"from": a, "depth": 3})
    )
    results["traverse.depth3[no entities]"] = runner.bench_time_func(
        "traverse.depth3[no entities]",
        time_door("traverse", lambda a: {"from": a, "depth": 3, "includeEntities": False}),
    )
    results["find.connected.depth2"] = runner.bench_time_func(
        "find.connected.depth2", time_door("find", lambda a: {"connected": {"node": a, "depth": 2}, "limit": 10})
    )

    if args.worker or any(r is None for r in results.values()):
        return
    print()
    print("Summary")
    for name, bench in results.items():
        print(f"  {name:32s} p50 {bench.median() * 1e3:8.2f} ms   mean {bench.mean() * 1e3:8.2f} ms")


if __name__ == "__main__":
    main()
