"""Benchmark: the vector index and find's semantic leg, in process.

    python perf/bench_vectors.py --fast -p 2           # quick look (a few minutes on two cores)
    python perf/bench_vectors.py --stores DIR          # reuse (or build once into) DIR across runs
    python perf/bench_vectors.py -o vectors.json       # keep the figures (pyperf compare_to ...)

The manager builds three stores once, before anything is timed, with ``addMany`` commits of 1,000
rows carrying given vectors: ``clustered-20k`` and ``clustered-100k`` (unit vectors around n/200
centres, noise 0.35) and ``random-20k`` (Gaussian, unit length). Each row has ``data`` of four words
from a vocabulary of 50 and ``metadata`` {p: i % 100, m: i % 1000}, so ``where {p: 7}`` keeps 1% of
the rows and ``where {m: 7}`` 0.1%. Each store's graph is caught up and the store closed, which
writes its vector index snapshot; a worker attaches the store read-only and loads that snapshot
before its first timed loop. 200 queries, each a stored vector plus noise 0.1, are cycled through.

Printed by the manager (outside pyperf, once):

- ``ingest``: 20,000 rows with given vectors into a new store, ``addMany`` of 1,000, durable
  (each commit's fsync awaited), records per second; and the share of that time spent in the
  commit path's parts (rule, log append, memtable apply, fsync wait, the follower).
- ``recall@10`` of ``find`` against the exact scan, per store, and at 100,000 for several efSearch.

Timed (pyperf):

- ``index.top10[store]``: ``VectorIndex.search`` of one query, k 10 (the index alone).
- ``find.top10[store]``: ``find({"vector": q, "limit": 10, "includeData": false})``, the door.
- ``find.filtered[1%|0.1%][store]``: the same with ``where {p: 7}`` / ``where {m: 7}``.
- ``find.hybrid[store]``: ``find({"query": "<word>", "vector": q, "limit": 10})``, rrf fusion.
- ``exact.top10[store]``: the numpy exact scan over the same index, for comparison.
"""

from __future__ import annotations

import atexit
import random
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np
import pyperf

from brainy.engine import Brain, init_store
from brainy.index import vectors as V

DIM = 384
BATCH = 1_000
SEED = 20251201
STORES = {
    "clustered-20k": (20_000, "clustered"),
    "clustered-100k": (100_000, "clustered"),
    "random-20k": (20_000, "random"),
}
WORDS = [f"w{i}" for i in range(50)]
QUERIES = 200


def vectors(n: int, kind: str, seed: int = SEED) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if kind == "random":
        x = rng.standard_normal((n, DIM), dtype=np.float32)
    else:
        centres = rng.standard_normal((max(10, n // 200), DIM), dtype=np.float32)
        x = centres[rng.integers(0, len(centres), n)] + 0.35 * rng.standard_normal((n, DIM), dtype=np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def queries(x: np.ndarray, seed: int = SEED + 1) -> np.ndarray:
    rng = np.random.default_rng(seed)
    q = x[rng.integers(0, len(x), QUERIES)] + 0.1 * rng.standard_normal((QUERIES, DIM), dtype=np.float32)
    return q / np.linalg.norm(q, axis=1, keepdims=True)


def items(x: np.ndarray, start: int, stop: int, rnd: random.Random) -> list[dict]:
    return [
        {
            "type": "document",
            "vector": x[i].tolist(),
            "data": " ".join(rnd.choices(WORDS, k=4)),
            "metadata": {"p": i % 100, "m": i % 1000},
        }
        for i in range(start, stop)
    ]


def ingest(path: Path, x: np.ndarray) -> float:
    """Seconds to write every row of ``x`` durably into a new store at ``path``."""
    init_store(path)
    rnd = random.Random(SEED)
    batches = [items(x, s, min(s + BATCH, len(x)), rnd) for s in range(0, len(x), BATCH)]
    brain = Brain.open(path)
    started = time.perf_counter()
    for batch in batches:
        brain.addMany({"items": batch})
    took = time.perf_counter() - started
    brain.close()
    return took


def build(folder: Path) -> None:
    for name, (n, kind) in STORES.items():
        path = folder / name
        if path.exists():
            continue
        took = ingest(path, vectors(n, kind))
        print(
            f"{name}: ingested {n:,} rows with given vectors in {took:.1f} s ({n / took:,.0f} records/s durable)",
            flush=True,
        )
        brain = Brain.open(path)
        started = time.perf_counter()
        brain.find({"vector": vectors(1, "random")[0].tolist()})  # builds the index from the rows
        brain.vector_follower.catch_up()
        print(f"{name}: index from rows and graph of {n:,} in {time.perf_counter() - started:.1f} s", flush=True)
        brain.close()


def profile_ingest() -> None:
    """Where a durable ingest's time goes: the commit path's parts, timed by shims around them."""
    from brainy.contract import arguments as A
    from brainy.index.follower import ProjectionFollower, VectorFollower
    from brainy.store import commit_path as C
    from brainy.store import log as L
    from brainy.store import maintenance as M
    from brainy.store import rows as ROWS

    spent: dict[str, float] = {}

    def shim(owner, name, label):
        original = getattr(owner, name)

        def timed(*a, **k):
            t = time.perf_counter()
            try:
                return original(*a, **k)
            finally:
                spent[label] = spent.get(label, 0.0) + time.perf_counter() - t

        setattr(owner, name, timed)
        return original

    saved = [
        (C.CommitPath, "apply", shim(C.CommitPath, "apply", "apply (memtable, ledger, record)")),
        (L.LogWriter, "append", shim(L.LogWriter, "append", "log append")),
        (L.LogWriter, "wait", shim(L.LogWriter, "wait", "fsync wait")),
        (ProjectionFollower, "advance", shim(ProjectionFollower, "advance", "postings follower")),
        (VectorFollower, "advance", shim(VectorFollower, "advance", "vector follower")),
        (L, "encode_payload", shim(L, "encode_payload", "frame encode")),
        (ROWS, "vector", shim(ROWS, "vector", "vector argument check")),
        (A, "check", shim(A, "check", "argument check (door and items)")),
        (M.Maintenance, "flush", shim(M.Maintenance, "flush", "flush (background thread)")),
        (M.Maintenance, "compact", shim(M.Maintenance, "compact", "compaction (background thread)")),
    ]
    folder = Path(tempfile.mkdtemp(prefix="brainy-ingest-"))
    try:
        x = vectors(20_000, "clustered")
        took = ingest(folder / "b", x)
        # the index is built on first need: an ingest into a store that was queried pays the follower too
        init_store(folder / "c")
        brain = Brain.open(folder / "c")
        brain.find({"vector": x[0].tolist()})
        rnd = random.Random(SEED)
        batches = [items(x, s, s + BATCH, rnd) for s in range(0, len(x), BATCH)]
        started = time.perf_counter()
        for batch in batches:
            brain.addMany({"items": batch})
        queried = time.perf_counter() - started
        brain.close()
    finally:
        for owner, name, original in saved:
            setattr(owner, name, original)
        shutil.rmtree(folder, ignore_errors=True)
    print(
        f"ingest 20,000 with given vectors: {20_000 / took:,.0f} records/s durable (index not yet built), "
        f"{20_000 / queried:,.0f} records/s into a queried store (index followed)"
    )
    total = took + queried
    for label, seconds in sorted(spent.items(), key=lambda kv: -kv[1]):
        print(f"  {label:<34} {seconds:6.2f} s  {100 * seconds / total:5.1f}% of both runs")


def recall(folder: Path) -> None:
    for name, (n, kind) in STORES.items():
        x = vectors(n, kind)
        brain = Brain.attach(folder / name)
        qs = queries(x)
        chosen = V.EF_SEARCH  # efSearch by the graph's size: the one for this store first, then a sweep at 100,000
        own = V.ef_search(n)
        sweep = (own, 64, 128, 256, 384, 512) if name == "clustered-100k" else (own,)
        for ef in sweep:
            V.EF_SEARCH = ((None, ef),)
            got = total = 0
            times = []
            with brain.at().vectors() as index:
                for q in qs:
                    truth = set(np.argsort(-(x @ q))[:10].tolist())
                    t = time.perf_counter()
                    _, dense, how = index.search(q, 10)
                    times.append(time.perf_counter() - t)
                    got += len(truth & {d - 1 for d in dense.tolist()})  # row i has dense int i + 1
                    total += 10
            print(
                f"{name}: efSearch {ef}: recall@10 {got / total:.3f}, index.search p50 "
                f"{1000 * float(np.median(times)):.3f} ms ({how})",
                flush=True,
            )
        V.EF_SEARCH = chosen
        brain.close()


def _pass_stores(cmd: list[str], args) -> None:
    cmd.extend(["--stores", args.stores])


def main() -> None:
    runner = pyperf.Runner(add_cmdline_args=_pass_stores)
    runner.argparser.add_argument("--stores", help="build the stores once into DIR and reuse them")
    runner.argparser.add_argument("--no-ingest", action="store_true", help="skip the ingest profile")
    args = runner.parse_args()
    if not args.worker:
        if args.stores is None:
            args.stores = tempfile.mkdtemp(prefix="brainy-vectors-")
            atexit.register(shutil.rmtree, args.stores, True)
        folder = Path(args.stores)
        folder.mkdir(parents=True, exist_ok=True)
        build(folder)
        if not args.no_ingest:
            profile_ingest()
        recall(folder)
    folder = Path(args.stores)
    for name, (n, kind) in STORES.items():
        x = vectors(n, kind)
        qs = [q.tolist() for q in queries(x)]
        qa = queries(x)
        state: dict = {"i": 0, "brain": None}

        def brain_of(path: Path = folder / name) -> Brain:
            if state["brain"] is None:  # attached by the worker that times this store, once
                state["brain"] = Brain.attach(path)
                with state["brain"].at().vectors():
                    pass  # the snapshot loads before the first timed loop
            return state["brain"]

        def nxt() -> int:
            state["i"] = (state["i"] + 1) % QUERIES
            return state["i"]

        def index(method: str):
            def run(loops: int) -> float:
                with brain_of().at().vectors() as ix:
                    search = getattr(ix, method)
                    t = time.perf_counter()
                    for _ in range(loops):
                        search(qa[nxt()], 10)
                    return time.perf_counter() - t

            return run

        def door(extra: dict):
            def run(loops: int) -> float:
                brain = brain_of()
                t = time.perf_counter()
                for _ in range(loops):
                    brain.find({"vector": qs[nxt()], "limit": 10, "includeData": False, **extra})
                return time.perf_counter() - t

            return run

        runner.bench_time_func(f"index.top10[{name}]", index("search"))
        runner.bench_time_func(f"exact.top10[{name}]", index("exact"))
        runner.bench_time_func(f"find.top10[{name}]", door({}))
        runner.bench_time_func(f"find.filtered[1%][{name}]", door({"where": {"p": 7}}))
        runner.bench_time_func(f"find.filtered[0.1%][{name}]", door({"where": {"m": 7}}))
        runner.bench_time_func(f"find.hybrid[{name}]", door({"query": "w7"}))


if __name__ == "__main__":
    main()
