"""The first vector find on a large store with its files evicted: the partitioned copy against the scan it replaced.

    python perf/bench_vector_cold.py --store DIR [--rows 1000000] [--rounds 3] [--queries 200]

Builds (once, into DIR) perf/bench_vectors.py's ``clustered`` store of ``--rows`` rows: ``addMany`` of 1,000,
the index read and its graph caught up, closed cleanly (a base with its graph, its quantised copy and, from
this version on, its partitioned copy). A store whose base has no partitioned copy yet (built by an earlier
version) gets one from a flush, timed: that is the copy's build (k-means, the lists, the write).

Then, ``--rounds`` times, interleaved, each in a new process with every file of the store evicted from the page
cache (``posix_fadvise(POSIX_FADV_DONTNEED)``; dropping the whole cache needs root): ``Brain.attach``, admitted as
the server's pool admits a handle (``served()``), and one ``find {vector, limit: 10, explain: true}`` (a stored vector plus noise, a different one each round), timed
apart, with the bytes the process read from the disk (``/proc/self/io`` ``read_bytes``) and how the index
answered (``explain``'s stage). The rows:

- ``partitioned``: the store as written;
- ``quantised scan``: the same store with its partitioned copy moved aside, so the first search is the bounded
  scan of the whole quantised copy (the path before partitioned copies).

Then, in this process, warm: recall@10 against the exact scan over ``--queries`` queries, and p50, of the index's
search before its graph is in (the partitioned copy), once it is in (the index's own pick), and of the graph
alone (efSearch by size).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import bench_vectors as BV  # noqa: E402

FIRST = r"""
import json, sys, time
t0 = time.perf_counter()
from brainy.engine import Brain
t1 = time.perf_counter()
def read_bytes():
    with open("/proc/self/io") as f:
        return int(next(line for line in f if line.startswith("read_bytes:")).split()[1])
before = read_bytes()
brain = Brain.attach(sys.argv[1])
brain.served()  # as the server's pool admits it: the projections read in place, the builds off the read path
t2 = time.perf_counter()
opened = read_bytes()
answer = brain.find({"vector": json.loads(sys.argv[2]), "limit": 10, "explain": True})
t3 = time.perf_counter()
brain.first_door_done()
stage = next(s["stage"] for s in answer["stages"] if s["stage"].startswith("semantic"))
print(json.dumps({"attach": t2 - t1, "find": t3 - t2, "opened": opened - before, "read": read_bytes() - opened,
                  "how": stage, "dense": [h["entity"]["denseInt"] for h in answer["results"]]}))
"""


def build(path: Path, n: int) -> None:
    from brainy.engine import Brain, init_store

    x = BV.vectors(n, "clustered")
    init_store(path)
    brain = Brain.open(path)
    rnd = random.Random(BV.SEED)
    started = time.perf_counter()
    for s in range(0, n, BV.BATCH):
        brain.addMany({"items": BV.items(x, s, min(s + BV.BATCH, n), rnd)})
    print(f"ingested {n:,} rows in {time.perf_counter() - started:.0f} s", flush=True)
    brain.close()
    brain = Brain.open(path)
    started = time.perf_counter()
    brain.find({"vector": x[0].tolist()})
    brain.vector_follower.catch_up()
    print(f"index and graph in {time.perf_counter() - started:.0f} s", flush=True)
    with brain.at().vectors() as held:
        held.link = None  # a base with the whole graph: the one the flush during the build holds only part of it
    brain.flush()
    brain.close()


def partitioned_copy(path: Path) -> Path:
    """The base's partitioned copy, written by a flush (timed) when the base has none yet."""
    from brainy.engine import Brain

    index = path / "index"
    (base,) = index.glob("*.vec")
    copy = base.with_suffix(".vecp")
    if not copy.exists():
        started = time.perf_counter()
        with Brain.open(path) as brain:
            with brain.at().vectors():
                pass  # read the chain: a large base without a copy owes one
            brain.flush()
        print(f"partitioned copy built and written by a flush in {time.perf_counter() - started:.1f} s")
    sizes = {p.suffix: p.stat().st_size for p in index.iterdir() if p.suffix in (".vec", ".vecq", ".vecp")}
    print("files: " + ", ".join(f"{suffix} {size / 1e6:,.0f} MB" for suffix, size in sorted(sizes.items())))
    return copy


def evict(path: Path) -> None:
    """Every file of the store out of the page cache (they are clean: written and fsynced)."""
    for file in path.rglob("*"):
        if file.is_file():
            fd = os.open(file, os.O_RDONLY)
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)


def first_find(path: Path, q: np.ndarray) -> dict:
    evict(path)
    done = subprocess.run(
        [sys.executable, "-c", FIRST, str(path), json.dumps(q.tolist())],
        capture_output=True,
        text=True,
        check=True,
        cwd=path.parent,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def warm(path: Path, x: np.ndarray, qs: np.ndarray) -> None:
    """Recall@10 and p50 of the partitioned search, then of the graph's, in this process."""
    from brainy.index import vectors as V
    from brainy.index.vectors import read_chain

    index, why = read_chain(path / "index", 10**12, graph_later=True)
    assert index is not None and not why, why
    truth = []
    for at in range(0, len(qs), 50):  # the exact top-10 of every query, 50 queries a pass over the rows
        scores = x @ qs[at : at + 50].T
        truth += [set(np.argpartition(-scores[:, j], 10)[:10].tolist()) for j in range(scores.shape[1])]

    def measure(label: str) -> None:
        for q in qs:  # a first pass: each list and chunk is checked the first time a search reads it
            index.search(q, 10)
        found, times, how = 0, [], ""
        for q, want in zip(qs, truth):
            started = time.perf_counter()
            _, dense, how = index.search(q, 10)
            times.append(time.perf_counter() - started)
            found += len(want & {d - 1 for d in dense.tolist()})  # row i is dense int i + 1
        print(
            f"warm {label} ({how}): recall@10 {found / (10 * len(qs)):.3f}, p50 {1000 * statistics.median(times):.2f} ms"
        )

    measure("before the graph is in")
    started = time.perf_counter()
    index.catch_up()  # the graph checked and loaded, as the graph's thread does after the first read
    print(f"graph taken in {time.perf_counter() - started:.1f} s")
    measure("the graph in")  # the index's own pick: past PARTITIONS_FIRST, the copy still answers first
    chosen, V.PARTITIONS_FIRST = V.PARTITIONS_FIRST, 1 << 62
    try:
        measure("the graph alone")
    finally:
        V.PARTITIONS_FIRST = chosen


KEYS = (("attach", 1000), ("find", 1000), ("read", 1e-6))  # shown in ms, ms and MB


def spread(values: list[float]) -> str:
    """The lowest and highest of the rounds."""
    return f"{min(values):,.0f}-{max(values):,.0f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", required=True, help="the store (built here when absent)")
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--no-warm", action="store_true")
    args = parser.parse_args()
    path = Path(args.store).resolve()
    if not (path / "MANIFEST").exists():
        build(path, args.rows)
    copy = partitioned_copy(path)
    aside = copy.with_name(copy.name + ".aside")
    x = BV.vectors(args.rows, "clustered")
    qs = BV.queries(x)
    rows: dict[str, list[dict]] = {"partitioned": [], "quantised scan": []}
    try:
        for r in range(args.rounds):
            q = qs[r]
            truth = set((np.argpartition(-(x @ q), 10)[:10] + 1).tolist())
            for name in rows:
                if name == "quantised scan":
                    copy.rename(aside)
                try:
                    got = first_find(path, q)
                finally:
                    if aside.exists():
                        aside.rename(copy)
                got["recall"] = len(truth & set(got["dense"])) / 10
                rows[name].append(got)
    finally:
        if aside.exists():
            aside.rename(copy)
    print(
        f"\nfirst vector find, {args.rows:,} rows, every store file evicted, a new process each ({args.rounds} rounds)"
    )
    print(f"{'path':<16} {'attach ms':>16} {'first find ms':>18} {'MB read by find':>16}  how, recall@10")
    for name, runs in rows.items():
        attach, find, read = (spread([r[key] * scale for r in runs]) for key, scale in KEYS)
        recall = statistics.mean(r["recall"] for r in runs)
        print(f"{name:<16} {attach:>16} {find:>18} {read:>16}  {runs[0]['how']}, {recall:.2f}")
    if not args.no_warm:
        warm(path, x, qs[: args.queries])


if __name__ == "__main__":
    main()
