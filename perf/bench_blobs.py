"""Benchmark: blob writes and verified reads, and what a small edit of a large file costs on disk.

    python perf/bench_blobs.py --fast
    python perf/bench_blobs.py -o blobs.json

- ``put[1 MiB]`` / ``put[100 MiB]``: chunk, hash, append and fsync fresh content (each loop's
  content is new, so nothing deduplicates).
- ``read[1 MiB]`` / ``read[100 MiB]``: read it back whole, every chunk verified against its key and
  the whole against its address.
- ``cdc[cython|python]``: the chunker alone over 8 MiB.

The dedup figure (new bytes stored for a 100 MiB file rewritten with 1 KiB changed in the middle) is
printed once by the master process and kept in the metadata.
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
from brainy.store.blobs import BlobStore

MiB = 1 << 20
_dir = Path(tempfile.mkdtemp(prefix="brainy-bench-blobs-"))
atexit.register(shutil.rmtree, _dir, True)
_store = BlobStore(_dir / "blobs", writable=True)


def time_put(size: int):
    def run(loops: int) -> float:
        contents = [os.urandom(size) for _ in range(loops)]
        t0 = time.perf_counter()
        for c in contents:
            _store.put(c)
        return time.perf_counter() - t0

    return run


def time_read(size: int):
    address = _store.put(os.urandom(size)).address

    def run(loops: int) -> float:
        t0 = time.perf_counter()
        for _ in range(loops):
            _store.read_all(address)
        return time.perf_counter() - t0

    return run


def time_cdc(which: str):
    twin = load("cdc", which)
    data = os.urandom(8 * MiB if which == "cython" else MiB // 4)

    def run(loops: int) -> float:
        t0 = time.perf_counter()
        for _ in range(loops):
            twin.cuts(data)
        return time.perf_counter() - t0

    return run


def dedup_figure() -> str:
    data = bytearray(random.Random(1).randbytes(100 * MiB))
    store = BlobStore(_dir / "dedup", writable=True)
    store.put(bytes(data))
    data[50 * MiB : 50 * MiB + 1024] = random.Random(2).randbytes(1024)
    edited = store.put(bytes(data))
    return f"{edited.new_bytes} bytes new of {len(data)} ({edited.new_chunks} new chunks of {edited.chunks})"


def main() -> None:
    runner = pyperf.Runner()
    args = runner.parse_args()
    runner.metadata["description"] = "brainy blobs: chunked, deduplicated, verified file content"
    if not args.worker:
        figure = dedup_figure()
        print(f"100 MiB rewritten with 1 KiB changed: {figure}")
        runner.metadata["dedup"] = figure
    for size, name in ((MiB, "1 MiB"), (100 * MiB, "100 MiB")):
        runner.bench_time_func(f"put[{name}]", time_put(size))
        runner.bench_time_func(f"read[{name}]", time_read(size))
    for which in ("cython", "python"):
        try:
            load("cdc", which)
        except ImportError:
            continue
        runner.bench_time_func(f"cdc[{which}]", time_cdc(which))


if __name__ == "__main__":
    main()
