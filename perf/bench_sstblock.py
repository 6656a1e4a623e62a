"""Benchmark: decode one realistic 4 KiB SSTable data block with each twin of sstblock.

    python perf/bench_sstblock.py --fast          # quick look
    python perf/bench_sstblock.py -o sst.json     # keep the figures (pyperf compare_to ...)

The block holds ~25 versions shaped like the store's rows (docs/store-format.md, "Keys"):
entity keys "e" + id[16] (17 bytes) and adjacency keys "a" + id[16] + id[16] (33 bytes), with
~150-byte values, cut as the table writer cuts: once the contents pass 4,096 bytes.
"""

import random

import pyperf

from brainy._speedups import load

BLOCK_TARGET = 4096  # "A data block is cut once its contents pass 4,096 bytes"


def realistic_block(twin):
    rnd = random.Random(20240601)  # fixed, so every pyperf worker decodes the same block
    ids = [rnd.randbytes(16) for _ in range(7)]
    rows = []
    for ent in ids:
        for _ in range(rnd.randint(1, 2)):  # an entity put, sometimes put again
            rows.append((b"e" + ent, rnd.randrange(1, 10_000)))
    for ent in ids[:5]:
        rows.append((b"r" + ent[::-1], rnd.randrange(1, 10_000)))
    for ent in ids[:5]:
        for other in rnd.sample(ids, 2):
            rows.append((b"a" + ent + other, rnd.randrange(1, 10_000)))
    rows = sorted(set(rows), key=lambda r: (r[0], -r[1]))  # table order
    keys, gens, values = [], [], []
    for key, gen in rows:
        keys.append(key)
        gens.append(gen)
        values.append(b"" if rnd.random() < 0.05 else rnd.randbytes(rnd.randint(135, 165)))
        if sum(map(len, keys)) + sum(map(len, values)) > BLOCK_TARGET:
            break
    block = twin.encode_block(keys, gens, values)
    return block, len(keys)


def main():
    runner = pyperf.Runner()
    for which in ("cython", "python"):
        try:
            twin = load("sstblock", which)
        except ImportError:
            continue  # the compiled twin is not built here; the pure one still runs
        block, entries = realistic_block(twin)
        runner.metadata[f"sstblock_{which}_block"] = f"{len(block) - 4} bytes, {entries} entries"
        runner.bench_func(f"sstblock.decode_block[{which}]", twin.decode_block, block, 0, len(block) - 4)


if __name__ == "__main__":
    main()
