"""Benchmark: the engine's commit path, its point reads, and SSTable block decoding on a real table.

    python perf/bench_engine.py --fast          # quick look
    python perf/bench_engine.py -o engine.json  # keep the figures (pyperf compare_to ...)

What is timed, each in a fresh store under a temp dir (made lazily in the pyperf worker that runs
the benchmark, and removed when it exits):

- ``commit.add``: one single-op ``add`` commit, durable (its log frame fsynced) when it returns.
- ``commit.transact[100]``: one ``transact`` of 100 ``add`` ops: one commit, one fsync.
- ``get.memtable`` / ``get.tables``: ``get`` by natural key over 20,000 entities, keys in a fixed
  shuffled order; first with every row in the memtable, then after ``flush()`` has moved them all
  into a table (so a get walks the bloom filter, the index and the table's block cache).
- ``sstblock.decode_block[cython|python]``: decoding one data block of that table, straight from
  its map, with each twin of ``sstblock``.
- ``open.attach[N MiB]``: a read-only attach of a store whose unsealed log segment holds N MiB of
  small commits (8, 16, 32, 64), left as a crash leaves it: the tables cover all but the last
  10,000 commits (about one flush's worth), so the attach checks every frame and replays those. The stores are built once
  by the master process (about a minute for all four) and shared with the workers through
  ``BRAINY_BENCH_OPEN``; ``--only open`` runs just these cells.

  Measured on the 2-core box (issue 18), before the linear log read and after:
  8 MiB 7.4 s -> 0.20 s, 16 MiB 29.5 s -> 0.25 s, 32 MiB 118 s -> 0.28 s, 64 MiB 2,752 s -> 0.40 s.
  After, the figure is about 0.18 s of replaying the 10,000 commits plus 3.5 ms per MiB checked.
"""

from __future__ import annotations

import atexit
import os
import random
import shutil
import tempfile
import time
from pathlib import Path

import pyperf

from brainy._speedups import load
from brainy.engine import Brain, init_store
from brainy.engine.brain import FLUSH_BYTES
from brainy.index import embedder
from brainy.store import log as log_
from brainy.store.sstable import Table

ENTITIES = 20_000
TX_OPS = 100

# The commit path alone: rows with data would be embedded at write, and the model's cost is
# perf/bench_embed.py's. An empty model directory (inherited by the workers) leaves them unembedded.
if not os.environ.get(embedder.OVERRIDE):
    os.environ[embedder.OVERRIDE] = tempfile.mkdtemp(prefix="brainy-bench-no-model-")
    atexit.register(shutil.rmtree, os.environ[embedder.OVERRIDE], True)

_dir: Path | None = None
_open: list[Brain] = []
_cache: dict[str, object] = {}


def _cleanup() -> None:
    for brain in _open:
        brain.close()
    if _dir is not None:
        shutil.rmtree(_dir, ignore_errors=True)


def new_brain(name: str, **options: int) -> Brain:
    global _dir
    if _dir is None:
        _dir = Path(tempfile.mkdtemp(prefix="brainy-bench-"))
        atexit.register(_cleanup)
    path = _dir / name
    init_store(path)
    brain = Brain.open(path, **options)
    _open.append(brain)
    return brain


def row(i: int) -> dict:
    """An entity shaped like a small real one: a natural key, a sentence of data, a few metadata fields."""
    return {
        "type": "document",
        "id": f"doc-{i:06d}",
        "data": f"document {i} about topic {i % 97}",
        "metadata": {"n": i, "topic": f"t{i % 97}", "tags": ["bench", f"g{i % 7}"]},
    }


def filled_brain() -> tuple[Brain, list[str]]:
    """20,000 entities in one store, all in the memtable (nothing flushes on its own)."""
    if "filled" not in _cache:
        brain = new_brain("filled", flush_bytes=1 << 34)
        for start in range(0, ENTITIES, 1000):
            brain.addMany({"items": [row(i) for i in range(start, start + 1000)]})
        keys = [f"doc-{i:06d}" for i in range(ENTITIES)]
        random.Random(7).shuffle(keys)
        _cache["filled"] = (brain, keys)
    return _cache["filled"]  # type: ignore[return-value]


# -- commits ------------------------------------------------------------------------------------------


def time_add(loops: int) -> float:
    brain = _cache.get("add") or _cache.setdefault("add", new_brain("add"))
    rows = [row(i) for i in range(loops)]
    for r in rows:
        del r["id"]  # minted ids: every loop is a new row, whatever the loop count
    add = brain.add
    t0 = time.perf_counter()
    for r in rows:
        add(r)
    return time.perf_counter() - t0


def time_transact(loops: int) -> float:
    brain = _cache.get("tx") or _cache.setdefault("tx", new_brain("tx"))
    batches = []
    for _ in range(loops):
        ops = []
        for i in range(TX_OPS):
            r = row(i)
            del r["id"]
            ops.append({"door": "add", "args": r})
        batches.append({"ops": ops})
    transact = brain.transact
    t0 = time.perf_counter()
    for b in batches:
        transact(b)
    return time.perf_counter() - t0


# -- reads --------------------------------------------------------------------------------------------


def _time_gets(brain: Brain, keys: list[str], loops: int) -> float:
    get = brain.get
    n = len(keys)
    t0 = time.perf_counter()
    for i in range(loops):
        get(keys[i % n])
    return time.perf_counter() - t0


def time_get_memtable(loops: int) -> float:
    brain, keys = filled_brain()
    assert not brain.sources.tables
    return _time_gets(brain, keys, loops)


def flushed_brain() -> tuple[Brain, list[str]]:
    brain, keys = filled_brain()
    if brain.sources.tables == ():
        brain.flush()
        assert len(brain.sources.tables) == 1 and not len(brain.sources.mem)
    return brain, keys


def time_get_tables(loops: int) -> float:
    brain, keys = flushed_brain()
    return _time_gets(brain, keys, loops)


# -- block decoding -----------------------------------------------------------------------------------


def real_block() -> tuple[Table, int, int]:
    """A data block from the middle of the flushed table: (table, offset, size)."""
    if "block" not in _cache:
        brain, _ = flushed_brain()
        table = Table(brain.sources.tables[0].path)  # a handle of our own, so the brain's cache stays out of it
        offset, size = table._handles[len(table._handles) // 2]
        _cache["block"] = (table, offset, size)
    return _cache["block"]  # type: ignore[return-value]


def time_decode(which: str):
    twin = load("sstblock", which)

    def run(loops: int) -> float:
        table, offset, size = real_block()
        mm, decode = table._map, twin.decode_block
        t0 = time.perf_counter()
        for _ in range(loops):
            decode(mm, offset, size)
        return time.perf_counter() - t0

    return run


# -- opening ------------------------------------------------------------------------------------------

OPEN_SIZES_MIB = (8, 16, 32, 64)
OPEN_ENV = "BRAINY_BENCH_OPEN"
OPEN_TAIL = 10_000  # commits past the last flush: about one flush's worth of small rows


def crashed_store(path: Path, mib: int) -> None:
    """A store whose one (unsealed) segment holds ``mib`` MiB of single-row commits, left unclosed.

    Commits go through the real commit path; their fsyncs are grouped 500 at a time only so the
    fixture builds in seconds. The memtable is flushed as service flushes it (at ``FLUSH_BYTES``),
    except the last ``OPEN_TAIL`` commits, which only the log holds: what an open replays.
    """
    init_store(path)
    brain = Brain.open(path, flush_bytes=1 << 40)  # flushed here, by size, so the tail is the same each run
    target, i, seq, gen = mib << 20, 0, 0, 0
    tail_from = None
    while brain.commits.log._size < target:
        answer, seq = brain.writes.commit("add", row(i), None, None)
        gen, i = answer["generation"], i + 1
        if i % 500 == 0:
            brain.commits.durable_at(seq, gen)
        if tail_from is None:
            if brain.commits.log._size >= target - OPEN_TAIL * brain.commits.log._size / i:
                brain.flush()
                tail_from = gen
            elif brain.state.mem.bytes >= FLUSH_BYTES:
                brain.flush()
    brain.commits.durable_at(seq, gen)
    brain.maintenance.stop()
    brain.commits.log.close()
    brain._lease.abandon()  # as a kill leaves it: no flush, no close record
    assert len(log_.segments(path / "log")) == 1


def open_stores() -> Path:
    """The directory of the open-time stores, built by the master process and inherited by workers."""
    folder = os.environ.get(OPEN_ENV)
    if folder:
        return Path(folder)
    root = Path(tempfile.mkdtemp(prefix="brainy-bench-open-"))
    atexit.register(shutil.rmtree, root, True)
    for mib in OPEN_SIZES_MIB:
        t0 = time.perf_counter()
        crashed_store(root / f"{mib}", mib)
        print(f"built the {mib} MiB store in {time.perf_counter() - t0:.1f} s", flush=True)
    os.environ[OPEN_ENV] = str(root)
    return root


def time_open(path: Path):
    def run(loops: int) -> float:
        total = 0.0
        for _ in range(loops):
            t0 = time.perf_counter()
            brain = Brain.attach(path)
            total += time.perf_counter() - t0
            brain.close()
        return total

    return run


def main() -> None:
    runner = pyperf.Runner()
    runner.argparser.add_argument("--only", choices=("open",), help="run only the open-time cells")
    args = runner.parse_args()
    runner.metadata["description"] = "brainy engine: commits, point reads, SSTable block decoding, open time"
    runner.metadata["entities"] = str(ENTITIES)
    if not args.worker or os.environ.get(OPEN_ENV):
        stores = open_stores() if not args.worker else Path(os.environ[OPEN_ENV])
        runner.args.inherit_environ = (runner.args.inherit_environ or []) + [OPEN_ENV]
        for mib in OPEN_SIZES_MIB:
            runner.bench_time_func(f"open.attach[{mib} MiB]", time_open(stores / f"{mib}"))
    if args.only == "open":
        return
    runner.bench_time_func("commit.add", time_add)
    runner.bench_time_func(f"commit.transact[{TX_OPS}]", time_transact)
    runner.bench_time_func("get.memtable", time_get_memtable)
    runner.bench_time_func("get.tables", time_get_tables)
    for which in ("cython", "python"):
        try:
            load("sstblock", which)
        except ImportError:
            continue  # the compiled twin is not built here; the pure one still runs
        runner.bench_time_func(f"sstblock.decode_block[{which}]", time_decode(which))


if __name__ == "__main__":
    main()
