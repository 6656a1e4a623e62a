"""Benchmark: the instructions a row of durable MessagePack ingest costs, counted by callgrind, whatever else the
machine does (its load moves the served cells of perf/bench_ingest.py by a fifth either way between runs).

    python perf/count_ingest.py                          # this tree
    python perf/count_ingest.py --tree /path/to/other    # and another checkout, the same way

Each tree runs twice under ``valgrind --tool=callgrind`` (Debian's ``valgrind``): a fresh store opened in process
(no flush: it runs on its own thread, and callgrind's one thread at a time put a part of one in some windows and
not in others) and admitted as the server's pool admits it (``Brain.served``), the collector set as the server
sets it, two
``addMany`` of 1,000 vectored rows to warm up, the projections' build waited for, then ``--low`` and ``--high``
more (the body of perf/bench_ingest.py's ``msgpack`` cell, decoded as the server decodes it). Printed: the
difference of the two runs' instructions over the rows between them, every thread's (the commit's own, the fsync
worker's followers with their postings), and no socket, HTTP or event loop, and no flush: the write path's share
of a served row. Two runs' difference leaves out the start-up (imports, the store's open), which is most of
each. The graph's catch-up is kept waiting: it is idle work, behind every other thread; and callgrind runs one
thread at a time, so where its graph adds fell decided the count.

Measured (--low 1, --high 5), each the same to 0.05% run to run: this tree 76,474 and 76,439 instructions a row,
66b5bef (before a commit's projection moves went in one call) 79,635, 79,664 and 79,626 (-4.0%), ae7b8fa (before
session 24's collector and memtable changes) 83,767 (-4.9% to 66b5bef). With the flushes left where they
fell, the same trees read 114k to 132k; the first version of this script, which also let the graph's catch-up and
the projections' build fall where they would, read 47k to 174k for one tree, and its -7 to -9% for session 24's
collector and memtable changes was of what fell in each window, not of the change.

Session 30 (--low 1, --high 5): 0b3162b 74,380, this tree 60,892 (-18%: a commit's new rows posted in one compiled
call, the vector slots of new rows decided by array operations, the vector packer called without a wrapper).

Session 31 (--low 1, --high 5): 0febd80 60,766, this tree 54,585 (-10.2%: each new row a copy of a template row,
the MessagePack float32s swapped three a step with SSSE3, the ops counted and the moves checked without a Python
step each, and three lookups in rowpost and addrow made one).

Session 36 (--low 1, --high 5): f275294 51,084, this tree 45,319 (-11.3%: the decoded vectors placed by one
compiled loop, a row's fixed fields packed once a walk, the cell check and the float32 swap in AVX2, the log
payload packed by addrow's writer, the memtable's put walking the staged dict).

Session 37 (--low 1, --high 5): 359f698 45,319, this tree 40,364 (-10.9%: the body read in one pass with its
vectors in place, brainy/_speedups/mpread*, where msgpack read the rest, the vectors were placed and the nesting
walked after, 41,003; rowpost's reserved names read without the error state saved and restored, and which read
as null when absent known once a call).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent

# run under callgrind with the tree first on sys.path: N batches after two, then out without closing (a close's
# flush and snapshot would land in the count)
_RUN = """
import gc, os, sys, tempfile
tree, perf, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
sys.path[:0] = [tree, perf]
import bench_ingest
from brainy.engine import Brain, init_store
from brainy.net import codecs
from brainy.net.server import GC_YOUNG
from brainy.index import follower
follower.FIRST_READ_GRACE_SECONDS = 1e9  # the graph's catch-up waits for a read that never comes: it is idle work
body = bench_ingest.batch_bodies(1000)["application/msgpack"]
root = tempfile.mkdtemp(prefix="brainy-count-ingest-")
init_store(root + "/store")
brain = Brain.open(root + "/store", name="count", flush_bytes=1 << 40)  # no flush: its thread's timing decides
brain.served()  # as the server's pool admits a handle: the followers build off the write path
gc.collect(); gc.freeze(); gc.set_threshold(GC_YOUNG, *gc.get_threshold()[1:])
for at in range(2 + n):
    brain.write("addMany", codecs.decode(body, "application/msgpack", vectors="items"), caller="person:count")
    if at == 1:  # the projections built (as a served writer's are once its first reads came): each run alike
        brain.followers.until_built(600)
os._exit(0)
"""


def instructions(tree: Path, batches: int) -> int:
    """Every thread's instructions, callgrind's count, of a run writing ``batches`` batches after the two."""
    out = Path(tempfile.mkdtemp(prefix="brainy-callgrind-"))
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", PYTHONHASHSEED="0", BRAINY_EMBED_MODEL_DIR="/nonexistent")
    try:
        done = subprocess.run(
            [
                "valgrind",
                "--tool=callgrind",
                f"--callgrind-out-file={out / 'cg.out'}",
                sys.executable,
                "-c",
                _RUN,
                str(tree),
                str(HERE),
                str(batches),
            ],
            capture_output=True,
            text=True,
            env=env,
            timeout=3600,
            check=False,
        )
        found = re.search(r"Collected : (\d+)", done.stderr)
        if found is None:
            raise SystemExit(f"callgrind gave no count ({tree}, {batches}):\n{done.stderr[-2000:]}")
        return int(found[1])
    finally:
        shutil.rmtree(out, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tree", action="append", default=[], help="another checkout to count the same way")
    parser.add_argument("--low", type=int, default=1, help="batches of 1,000 rows in the first run (after two)")
    parser.add_argument("--high", type=int, default=5, help="batches of 1,000 rows in the second run (after two)")
    args = parser.parse_args()
    if shutil.which("valgrind") is None:
        raise SystemExit("perf/count_ingest.py needs valgrind (apt-get install valgrind)")
    if args.high <= args.low:
        raise SystemExit("--high must be above --low")
    for tree in [HERE.parent, *map(Path, args.tree)]:
        low, high = instructions(tree, args.low), instructions(tree, args.high)
        rows = (args.high - args.low) * 1000
        print(f"{tree}: {(high - low) / rows:,.0f} instructions a row ({rows:,} rows, {args.low} -> {args.high})")


if __name__ == "__main__":
    main()
