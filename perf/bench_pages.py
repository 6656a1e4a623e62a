"""Benchmark: a 1,000-row ``find`` page and a ``get`` as a transport answers them, in process.

    python perf/bench_pages.py --fast            # quick look (about a minute on two cores)
    python perf/bench_pages.py -o pages.json     # keep the figures (pyperf compare_to ...)
    python perf/bench_pages.py --store DIR       # reuse (or build once into) DIR across runs

The store is built once, by the pyperf manager process, before anything is timed: 2,000 entities
with a 384-number vector each (given with the write, so no model runs), a sentence of data and
metadata of every JSON type (strings with non-ASCII letters, integers, floats, booleans, null,
arrays, nested objects), flushed to one table with the last 500 in the memtable. A worker attaches
it read-only. Every timed call goes the way a transport's does (``brainy/net/app.py``): the
dispatcher's ``run`` (gate, argument check, the door), then the answer's wire document
(``Outcome.body``) encoded by ``brainy/net/codecs.py``: the answer bytes, not a Python dict.

What is timed:

- ``find.page[1000].json`` / ``.msgpack``: ``{"limit": 1000}``, the page's answer bytes.
- ``orjson.page[1000]``: ``orjson.dumps`` of that same page's answer built as plain documents
  (what the wire sends); the target is a page within 2x of this.
- ``get.json`` / ``get.msgpack``: one entity (stored with its vector, answered without it).
- ``get.vector.json`` / ``.msgpack``: the same with ``includeVector``.
"""

from __future__ import annotations

import asyncio
import atexit
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pyperf
import stored  # perf/stored.py: the shared --store option

from brainy.auth.principal import Principal
from brainy.engine import Brain, init_store
from brainy.host import dispatch as X
from brainy.host.pool import Pool
from brainy.net import codecs

ENTITIES = 2_000
IN_MEMTABLE = 500
SEED = 20261201
PAGE = {"limit": 1000}
WHO = Principal.static_key("person:bench")

_cache: dict[str, Any] = {}


def entities(rnd: random.Random) -> list[dict[str, Any]]:
    """The 2,000 entities, vectors and metadata of every JSON type, the same for every seed-equal call."""
    vectors = np.random.default_rng(SEED).standard_normal((ENTITIES, 384)).astype("<f4")
    out = []
    for i in range(ENTITIES):
        metadata = {
            "status": rnd.choice(["open", "closed", "brouillon", "überprüft"]),
            "rank": rnd.randint(-(10**6), 10**6),
            "score": rnd.random() * 100,
            "done": rnd.random() < 0.5,
            "owner": None,
            "tags": rnd.sample(["a", "b", "c", "d", "é", "日本"], 3),
            "where": {"x": rnd.random(), "y": [1, 2.5, "three"]},
        }
        out.append(
            {
                "type": "document",
                "id": f"doc-{i:05d}",
                "metadata": metadata,
                "data": f"note {i}: the quick brown fox ✓ {rnd.random()}",
                "vector": vectors[i].tolist(),
            }
        )
    return out


def build_store(path: Path) -> None:
    init_store(path)
    brain = Brain.open(path, flush_bytes=1 << 40, compact_at=1 << 30)
    try:
        items = entities(random.Random(SEED))
        for start in range(0, ENTITIES, 250):
            brain.addMany({"items": items[start : start + 250]})
            if start + 250 == ENTITIES - IN_MEMTABLE:
                brain.flush()
    finally:
        brain.close()


def served() -> tuple[X.Dispatcher, Pool]:
    if "dispatcher" not in _cache:
        pool = Pool({"main": Path(_cache["args"].store) / "store"})
        _cache["dispatcher"], _cache["pool"] = X.Dispatcher(pool), pool
        atexit.register(pool.close_all)
    return _cache["dispatcher"], _cache["pool"]


def answer_bytes(door: str, id_: Any, document: dict[str, Any], msgpack_out: bool) -> bytes:
    """One call the way a transport answers it: the dispatcher's run, then the wire document encoded."""
    dispatcher, _ = served()
    answer = dispatcher.run(WHO, door, "main", id_, dict(document))
    body, _ = codecs.encode(X.Outcome(door, 0.1, answer=answer).body(), msgpack_out)
    return body


def timed(door: str, id_: Any, document: dict[str, Any], msgpack_out: bool) -> Callable[[int], float]:
    def run(loops: int) -> float:
        answer_bytes(door, id_, document, msgpack_out)  # warm: projections, caches
        started = pyperf.perf_counter()
        for _ in range(loops):
            answer_bytes(door, id_, document, msgpack_out)
        return pyperf.perf_counter() - started

    return run


def time_orjson(loops: int) -> float:
    """orjson alone over the page's plain wire document (decoded back from its own JSON bytes)."""
    page = orjson.loads(answer_bytes("find", None, PAGE, False))
    assert len(page["results"]) == 1000
    started = pyperf.perf_counter()
    for _ in range(loops):
        orjson.dumps(page)
    return pyperf.perf_counter() - started


def main() -> None:
    runner = stored.runner()
    args = runner.parse_args()
    _cache["args"] = args
    runner.metadata["description"] = "brainy answer bytes: a 1,000-row find page and a get, in process"
    if not args.worker:
        root, missing = stored.root(args, "brainy-bench-pages-")
        if missing:
            print(f"building {ENTITIES:,} entities with vectors under {root} ...", flush=True)
            build_store(root / "store")
        print(
            f"  page answer: {len(answer_bytes('find', None, PAGE, False)):,} bytes JSON, "
            f"{len(answer_bytes('find', None, PAGE, True)):,} MessagePack",
            flush=True,
        )
        asyncio.set_event_loop(None)
    one = "doc-01234"
    results: dict[str, Any] = {}
    for name, door, id_, document in (
        ("find.page[1000]", "find", None, PAGE),
        ("get", "get", one, {}),
        ("get.vector", "get", one, {"includeVector": True}),
    ):
        for encoding, msgpack_out in (("json", False), ("msgpack", True)):
            label = f"{name}.{encoding}"
            results[label] = runner.bench_time_func(label, timed(door, id_, document, msgpack_out))
        if name == "find.page[1000]":
            results["orjson.page[1000]"] = runner.bench_time_func("orjson.page[1000]", time_orjson)
    if args.worker or any(r is None for r in results.values()):
        return
    mean = {name: bench.mean() for name, bench in results.items()}
    print()
    print("Summary (means)")
    for name, seconds in mean.items():
        print(f"  {name:28s} {seconds * 1e6:12.1f} us")
    for encoding in ("json", "msgpack"):
        ratio = mean[f"find.page[1000].{encoding}"] / mean["orjson.page[1000]"]
        print(f"  find.page[1000].{encoding} / orjson.page[1000] = {ratio:.2f}x (target: within 2x)")


if __name__ == "__main__":
    main()
