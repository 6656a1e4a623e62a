"""Benchmark: hybrid ``find`` (words + meaning) at 100,000 rows, with a word in 8% of them (issue 35).

    python perf/bench_hybrid.py --store DIR                   # this tree: p50 of each case
    python perf/bench_hybrid.py --store DIR --before TREE     # and an earlier tree, interleaved, ratios
    python perf/bench_hybrid.py --store DIR --profile hybrid  # cProfile of one case, in process

The store (built once into ``DIR/store`` when it holds none, kept afterwards) is perf/bench_vectors.py's
``clustered-100k``: 100,000 rows with given unit vectors (around 500 centres, noise 0.35), ``data`` of
four words drawn from a vocabulary of 50 (so a word is in 1 - (49/50)^4 = 7.8% of rows; ``w7`` in about
7,800) and ``metadata`` {p: i % 100, m: i % 1000}. Built with ``addMany`` commits of 1,000, then the
vector index built and the store closed (its snapshots written).

Each round runs one worker process per tree (this one, and ``--before``'s, alternating which goes
first): it opens the store (``Brain.open``), calls every case ``--warm`` times, then times ``--calls``
calls of each through the engine (``brain.find(...)``, the door as a host calls it), cycling through 200
query vectors (a stored vector plus noise 0.1). The figure is the p50 of every call of every round.

Cases (all ``limit 10``):

- ``hybrid``: ``{"query": "w7", "vector": q}``, the text and semantic legs fused by rrf (the target);
- ``hybrid.weighted``: the same with ``fusion {strategy: weighted}`` and ``hybridAlpha 0.3``;
- ``text``: ``{"query": "w7", "searchMode": "text"}``, BM25 alone;
- ``vector``: ``{"vector": q}``, the semantic leg alone;
- ``metadata``: ``{"where": {"p": 7}}``, postings alone (1% of rows, unranked).

Where a hybrid find's time went (``--profile hybrid``; 2 cores shared with other work, load 8-10; cProfile
inflates Python, so shares, not times, are the figures to read):

- before (62.6 ms a call profiled): rrf's ``Fusion.fuse`` 36% (7,800 text hits sorted on (-score, id) by a
  Python key), ``_bm25`` 34% (a dict a hit, a lengths lookup a hit), the page's sort of every fused hit 21%,
  freeing those dicts 2%, the vector leg 3%, the page's rows 2%;
- after (5.65 ms a call profiled): the vector leg 41% (faiss's HNSW search 30%), ``Fusion.order`` 19% (the
  text leg's ranks of the semantic hits it holds, and its first n, in C), the page 18% (rows 9%, the cursor's
  digest of the query vector 5%), the argument check 5%, the text leg 3%. Unprofiled, the vector leg alone is
  about half a hybrid find's p50 (``vector`` against ``hybrid`` below).
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROWS = 100_000
WORD = "w7"

CASES: dict[str, dict[str, Any]] = {
    "hybrid": {"query": WORD},
    "hybrid.weighted": {"query": WORD, "fusion": {"strategy": "weighted"}, "hybridAlpha": 0.3},
    "text": {"query": WORD, "searchMode": "text"},
    "vector": {},
    "metadata": {"where": {"p": 7}},
}
VECTORED = ("hybrid", "hybrid.weighted", "vector")


def build(path: Path) -> None:
    """The clustered-100k store of perf/bench_vectors.py at ``path``."""
    import bench_vectors as BV

    from brainy.engine import Brain

    x = BV.vectors(ROWS, "clustered")
    took = BV.ingest(path, x)
    print(f"store: {ROWS:,} rows with vectors and text in {took:.1f} s", flush=True)
    brain = Brain.open(path)
    started = time.perf_counter()
    brain.find({"vector": x[0].tolist()})  # the vector index, built from the rows
    brain.vector_follower.catch_up()
    brain.find({"query": WORD, "searchMode": "text"})  # the projections
    print(f"store: index and graph in {time.perf_counter() - started:.1f} s", flush=True)
    brain.close()


def _queries() -> list[list[float]]:
    import bench_vectors as BV

    return [q.tolist() for q in BV.queries(BV.vectors(ROWS, "clustered"))]


def _args(case: str, q: list[float]) -> dict[str, Any]:
    args = {"limit": 10, **CASES[case]}
    if case in VECTORED:
        args["vector"] = q
    return args


def opened(store: Path, qs: list[list[float]]) -> Any:
    """The store opened, read once, and its vector graph whole: on open a background thread deserialises the
    snapshot's graph and grows it over the tail, and until then a search scans exactly (and that thread takes a
    core); nothing is timed before it is done."""
    from brainy.engine import Brain

    brain = Brain.open(store)
    brain.find(_args("hybrid", qs[0]))
    follower = brain.vector_follower
    deadline = time.monotonic() + 600
    while True:
        with brain.at().vectors() as index:
            whole = not index.graph_waiting and index.pending == 0 and index.graphed > 0
        if whole and not follower._catching_up:
            return brain
        if time.monotonic() > deadline:
            raise RuntimeError("the vector graph was not whole after 600 s")
        if not follower._catching_up:
            follower.catch_up()
        time.sleep(0.05)


def worker(store: Path, cases: list[str], warm: int, calls: int) -> dict[str, list[float]]:
    """Seconds of each call of each case, on a store opened by this process."""
    qs = _queries()
    brain = opened(store, qs)
    out: dict[str, list[float]] = {}
    try:
        for case in cases:
            for i in range(warm):
                brain.find(_args(case, qs[i % len(qs)]))
        for case in cases:
            times = []
            for i in range(calls):
                args = _args(case, qs[i % len(qs)])
                t = time.perf_counter()
                brain.find(args)
                times.append(time.perf_counter() - t)
            out[case] = times
    finally:
        brain.close()
    return out


def profile(store: Path, case: str, calls: int) -> None:
    """cProfile of ``calls`` calls of one case (after a warm-up), top functions by own time and by cumulative."""
    qs = _queries()
    brain = opened(store, qs)
    try:
        for i in range(50):
            brain.find(_args(case, qs[i % len(qs)]))
        prof = cProfile.Profile()
        prof.enable()
        for i in range(calls):
            brain.find(_args(case, qs[i % len(qs)]))
        prof.disable()
    finally:
        brain.close()
    for order in ("tottime", "cumulative"):
        print(f"-- {case}: {calls} calls, by {order}")
        pstats.Stats(prof).sort_stats(order).print_stats(22)


def _p50(xs: list[float]) -> float:
    xs = sorted(xs)
    return xs[(len(xs) - 1) // 2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--store", required=True, help="a directory for the store (built there if it holds none)")
    parser.add_argument("--before", help="an earlier tree (a directory holding brainy/) timed in the same run")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--calls", type=int, default=200, help="timed calls of each case per round")
    parser.add_argument("--warm", type=int, default=30)
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--profile", help="profile this case in process instead of timing")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    store = Path(args.store) / "store"
    cases = args.cases.split(",")
    if args.worker:
        json.dump(worker(store, cases, args.warm, args.calls), sys.stdout)
        return
    if not (store / "MANIFEST").exists():
        Path(args.store).mkdir(parents=True, exist_ok=True)
        build(store)
    if args.profile:
        profile(store, args.profile, args.calls)
        return
    trees = {"after": str(HERE.parent)}
    if args.before:
        trees = {"before": str(Path(args.before).resolve()), **trees}
    samples: dict[str, dict[str, list[float]]] = {name: {c: [] for c in cases} for name in trees}
    for r in range(args.rounds):
        order = list(trees) if r % 2 == 0 else list(reversed(trees))
        for name in order:
            env = {**os.environ, "PYTHONPATH": trees[name]}
            command = [sys.executable, __file__, "--worker", "--store", args.store, "--cases", args.cases]
            command += ["--calls", str(args.calls), "--warm", str(args.warm)]
            done = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
            for case, times in json.loads(done.stdout).items():
                samples[name][case].extend(times)
        print(f"round {r + 1} of {args.rounds} done", file=sys.stderr, flush=True)
    head = f"{'case':<18}" + "".join(f"{name + ' p50 ms':>16}" for name in trees)
    print(head + ("    after/before" if args.before else ""))
    for case in cases:
        p50 = {name: 1000 * _p50(samples[name][case]) for name in trees}
        line = f"{case:<18}" + "".join(f"{p50[name]:>16.3f}" for name in trees)
        if args.before:
            line += f"{p50['after'] / p50['before']:>16.4f}"
        print(line)
    n = args.rounds * args.calls
    print(f"({n} calls a case a tree, {args.rounds} rounds interleaved, one process a round, Brain.open + find)")


if __name__ == "__main__":
    main()
