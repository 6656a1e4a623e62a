"""Benchmark: what the nesting check adds to decoding a request, each twin of the nesting speedup.

    python perf/bench_nesting.py --fast          # quick look
    python perf/bench_nesting.py -o nesting.json # keep the figures (pyperf compare_to ...)

Every decoded request is walked once for how deep it nests (brainy/contract/limits.py). Timed, each beside
``orjson.loads`` of the same body (what the request costs to decode anyway):

- ``1kb``: a ~1 KB ``find`` body (a where, an order, a few dozen metadata fields): the common request.
- ``addmany``: an ``addMany`` of 1,000 rows shaped like perf/bench_engine.py's (a natural key, a sentence,
  three metadata fields with a two-tag list), about 130 KB of JSON.
- ``addmany_vectors``: the same rows each carrying its 384-number vector, about 7.5 MB: a list of scalars is
  the case that costs a walk the most members.
"""

import random

import orjson
import pyperf

from brainy._speedups import load
from brainy.contract.limits import MAX_NESTING


def _row(i: int, vector: bool) -> dict:
    row = {
        "type": "document",
        "id": f"doc-{i:06d}",
        "data": f"document {i} about topic {i % 97}",
        "metadata": {"n": i, "topic": f"t{i % 97}", "tags": ["bench", f"g{i % 7}"]},
    }
    if vector:
        rng = random.Random(i)
        row["vector"] = [rng.uniform(-1, 1) for _ in range(384)]
    return row


FIND = {
    "query": "notes about the quarterly plan",
    "where": {"type": {"$in": ["document", "note"]}, "metadata.topic": "t3", "createdAt": {"$gte": 1700000000000}},
    "limit": 20,
    "orderBy": [{"field": "createdAt", "dir": "desc"}],
    "metadata": {f"k{i}": "v" * 20 for i in range(25)},
}
BODIES = {
    "1kb": orjson.dumps(FIND),
    "addmany": orjson.dumps({"items": [_row(i, False) for i in range(1000)]}),
    "addmany_vectors": orjson.dumps({"items": [_row(i, True) for i in range(1000)]}),
}


def main():
    runner = pyperf.Runner()
    for name, body in BODIES.items():
        runner.metadata[f"nesting_{name}"] = f"{len(body)} bytes of JSON"
        runner.bench_func(f"nesting.orjson_loads[{name}]", orjson.loads, body)
        document = orjson.loads(body)
        for which in ("cython", "python"):
            try:
                twin = load("nesting", which)
            except ImportError:
                continue  # the compiled twin is not built here; the pure one still runs
            runner.bench_func(f"nesting.too_deep[{name}][{which}]", twin.too_deep, document, MAX_NESTING)


if __name__ == "__main__":
    main()
