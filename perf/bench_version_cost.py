"""Benchmark: what one metadata-only update of a row with a vector costs on disk (log and tables).

    python perf/bench_version_cost.py                      # 10,000 rows, 20,000 updates
    python perf/bench_version_cost.py --updates 200000     # the figure the issue measured
    PYTHONPATH=/path/to/older/tree python perf/bench_version_cost.py    # the same on an older tree

A fresh store gets ``--rows`` entities (default 10,000), each with a given 384-number vector and a small
metadata bag, in ``addMany`` commits of 100; the writer is closed (its clean close flushes) and opened again.
Then ``--updates`` metadata-only updates (``updateMany``, 100 items a commit, each item one row's
``metadata.n`` set to a new number: no data, no vector) and the writer is closed again, so every version is in
the tables. What is printed: the bytes of ``log/`` and ``sst/`` after the load and after the updates, the
difference over the number of updates (bytes per update: the log's, the tables', both), and the rates of the
adds and of the updates (durable commits, fsync included) with the process's CPU time for each (every thread:
on a shared box steadier than the rates). Compaction keeps every version, so the tables' growth is what the versions
cost in them (a merge rewrites bytes but keeps their count).

A version that carries the whole row writes its 1,536-byte vector twice (in the frame, then in the table); a
version that carries only what changed writes none.
"""

from __future__ import annotations

import argparse
import random
import shutil
import struct
import tempfile
import time
from pathlib import Path

from brainy.engine import Brain, init_store

BATCH = 100
DIMENSIONS = 384
SEED = 20261207


def folder_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.iterdir() if p.is_file())


def vector(rng: random.Random) -> list[float]:
    # float32-exact numbers, so the stored vector is the given one
    return [struct.unpack("<f", struct.pack("<f", rng.uniform(-1, 1)))[0] for _ in range(DIMENSIONS)]


def sizes(root: Path) -> tuple[int, int]:
    return folder_bytes(root / "log"), folder_bytes(root / "sst")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--updates", type=int, default=20_000)
    parser.add_argument("--keep", help="build the store in this directory and keep it (default: a temp dir)")
    args = parser.parse_args()
    rng = random.Random(SEED)
    where = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="brainy-bench-version-"))
    root = where / "store"
    try:
        init_store(root)
        brain = Brain.open(root)
        ids: list[str] = []
        loading, loading_cpu = time.perf_counter(), time.process_time()
        for start in range(0, args.rows, BATCH):
            items = [
                {"type": "thing", "metadata": {"n": 0, "group": i % 17}, "vector": vector(rng)}
                for i in range(start, min(start + BATCH, args.rows))
            ]
            ids += brain.write("addMany", {"items": items})["ids"]
        loaded, loaded_cpu = time.perf_counter() - loading, time.process_time() - loading_cpu
        brain.close()
        log0, sst0 = sizes(root)
        brain = Brain.open(root)
        started, started_cpu = time.perf_counter(), time.process_time()
        done = 0
        while done < args.updates:
            n = min(BATCH, args.updates - done)
            items = [{"id": ids[(done + i) % len(ids)], "metadata": {"n": done + i + 1}} for i in range(n)]
            brain.write("updateMany", {"items": items})
            done += n
        elapsed, elapsed_cpu = time.perf_counter() - started, time.process_time() - started_cpu
        brain.close()
        log1, sst1 = sizes(root)
        per_log, per_sst = (log1 - log0) / done, (sst1 - sst0) / done
        print(f"rows {args.rows:,}, metadata-only updates {done:,} ({BATCH} a commit)")
        print(f"after the load:    log {log0:>14,} B   sst {sst0:>14,} B")
        print(f"after the updates: log {log1:>14,} B   sst {sst1:>14,} B")
        print(f"per update:        log {per_log:>14,.0f} B   sst {per_sst:>14,.0f} B   both {per_log + per_sst:,.0f} B")
        print(f"adds/s:            {args.rows / loaded:,.0f}   CPU {loaded_cpu / args.rows * 1e6:,.0f} us an add")
        print(f"updates/s:         {done / elapsed:,.0f}   CPU {elapsed_cpu / done * 1e6:,.0f} us an update")
    finally:
        if not args.keep:
            shutil.rmtree(where, ignore_errors=True)


if __name__ == "__main__":
    main()
