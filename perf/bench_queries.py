"""Benchmark: find over a store of 100,000 entities, the postings it intersects, and where a page's time goes.

    python perf/bench_queries.py --fast            # quick look (about three minutes on two cores)
    python perf/bench_queries.py -p 3              # fewer worker processes
    python perf/bench_queries.py -o queries.json   # keep the figures (pyperf compare_to ...)
    python perf/bench_queries.py --store DIR       # reuse (or build once into) DIR across runs

The store is built once, by the pyperf manager process, before anything is timed: 100,000
entities of four types (document, task, message, person; people under natural keys, the rest
under minted ids), each with a sentence of 10 to 20 words drawn Zipf-wise from a vocabulary of
3,000, and five metadata fields of varied cardinality: ``status`` (5 values, skewed), ``team``
(50, skewed), ``score`` (a number), ``tags`` (1 to 3 of 40) and ``owner`` (2,000). They are
written in commits of 1,000 (``addMany``), flushed to a table every 20,000, and the five tables
compacted into one. The manager passes the store's path to every worker (``--store``); a worker
attaches it read-only and builds the projections from its rows on first need, as the engine does
on open, before its first timed loop. The manager removes the store when it exits (unless it
was given one with ``--store``).

What is timed:

- ``find.two-predicates``: ``{"type": "document", "where": {"status": "open", "team": "t7"},
  "limit": 10}``: four postings intersected (type, visibility, status, team), ten rows read.
- ``find.page[1000]``: ``{"where": {"status": "open"}, "limit": 1000}``: a 1,000-row page.
- ``orjson.page[1000]``: ``orjson.dumps`` of that same page's answer (the rows as the wire sends
  them); the target is a find page within 2x of this.
- ``find.text``: ``{"query": "<two words>", "limit": 10}``, BM25 over word postings.
- ``postings.intersect_many[find2][cython|python]``: the very lists the two-predicate find
  intersects (type, visibility, status, team), with each twin of ``postings``.
- ``postings.intersect[status x team][cython|python]``: the two predicates' own lists.

Afterwards the manager profiles ``find.page[1000]`` (then, more briefly, the two-predicate and
text finds) outside pyperf and prints the share of its time spent decoding
(``sstblock.decode_block`` and the msgpack unpack of rows, ``rows.unpack``), intersecting (the
``postings`` calls find makes) and everything else, measured twice: with perf_counter shims
around those calls and no profiler (the shares to quote), and under cProfile (inflates
pure-Python code; used for the breakdown of "the rest"). ``--no-profile`` skips them.
"""

from __future__ import annotations

import atexit
import cProfile
import io
import pickle
import pstats
import random
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import orjson
import stored  # perf/stored.py: the shared --store option

from brainy._speedups import load
from brainy.contract import arguments
from brainy.contract import doors as D
from brainy.doors import query as Q
from brainy.engine import Brain, init_store
from brainy.store import rows as ROWS
from brainy.store import sstable as SST

ENTITIES = 100_000
BATCH = 1_000
FLUSH_EVERY = 20_000  # five tables, then one compaction
VOCABULARY = 3_000
SEED = 20250605

TYPES = (("document", 45), ("task", 25), ("message", 20), ("person", 10))
STATUS = (("open", 30), ("closed", 35), ("draft", 15), ("review", 12), ("archived", 8))
TEAMS = [f"t{i}" for i in range(50)]
TAGS = [f"tag{i}" for i in range(40)]
OWNERS = 2_000

FIND2 = {"type": "document", "where": {"status": "open", "team": "t7"}, "limit": 10}
PAGE = {"where": {"status": "open"}, "limit": 1000}
TEXT_RANKS = (40, 180)  # vocabulary ranks of the two query words: one common, one rarer

_cache: dict[str, Any] = {}


# -- the store -----------------------------------------------------------------------------------------


def vocabulary(rnd: random.Random) -> list[str]:
    """3,000 distinct pronounceable words, most common first."""
    onsets = [
        "b",
        "c",
        "d",
        "f",
        "g",
        "h",
        "k",
        "l",
        "m",
        "n",
        "p",
        "r",
        "s",
        "t",
        "v",
        "w",
        "z",
        "br",
        "ch",
        "cl",
        "dr",
        "fl",
        "gr",
        "pl",
        "sh",
        "st",
        "th",
        "tr",
    ]
    vowels = ["a", "e", "i", "o", "u", "ai", "ea", "ou"]
    codas = ["", "", "n", "r", "s", "t", "l", "m", "nd", "st"]
    seen: dict[str, None] = {}
    while len(seen) < VOCABULARY:
        syllables = rnd.choice((1, 2, 2, 2, 3, 3))
        seen["".join(rnd.choice(onsets) + rnd.choice(vowels) + rnd.choice(codas) for _ in range(syllables))] = None
    return list(seen)


def _cumulative(weights: list[float]) -> list[float]:
    out, total = [], 0.0
    for w in weights:
        total += w
        out.append(total)
    return out


def entities(seed: int = SEED) -> Iterator[list[dict[str, Any]]]:
    """The 100,000 entities, in batches of 1,000, the same for every seed-equal call."""
    rnd = random.Random(seed)
    words = vocabulary(rnd)
    word_cum = _cumulative([1 / (r + 1) ** 1.07 for r in range(len(words))])
    team_cum = _cumulative([1 / (i + 1) ** 0.5 for i in range(len(TEAMS))])
    type_names, type_cum = [t for t, _ in TYPES], _cumulative([w for _, w in TYPES])
    status_names, status_cum = [s for s, _ in STATUS], _cumulative([w for _, w in STATUS])
    people = 0
    for _start in range(0, ENTITIES, BATCH):
        batch = []
        for _ in range(BATCH):
            kind = rnd.choices(type_names, cum_weights=type_cum)[0]
            metadata: dict[str, Any] = {
                "status": rnd.choices(status_names, cum_weights=status_cum)[0],
                "team": rnd.choices(TEAMS, cum_weights=team_cum)[0],
                "tags": rnd.sample(TAGS, rnd.randint(1, 3)),
                "owner": f"u{rnd.randrange(OWNERS)}",
            }
            if kind != "person":
                metadata["score"] = round(rnd.uniform(0, 100), 2)
            text = " ".join(rnd.choices(words, cum_weights=word_cum, k=rnd.randint(10, 20)))
            item: dict[str, Any] = {"type": kind, "data": text, "metadata": metadata}
            if kind == "person":
                item["id"] = f"person-{people:06d}"  # a natural key: its id lands anywhere in key order
                people += 1
            batch.append(item)
        yield batch


def build_store(path: Path) -> dict[str, Any]:
    """Write the store at ``path``: commits of 1,000, a flush every 20,000, one compaction, a clean close."""
    started = time.perf_counter()
    init_store(path)
    brain = Brain.open(path, flush_bytes=1 << 40, compact_at=1 << 30)  # we flush and compact, not the timer
    try:
        written = 0
        for batch in entities():
            brain.addMany({"items": batch})
            written += len(batch)
            if written % FLUSH_EVERY == 0:
                brain.flush()
        flushed_tables = len(brain.sources.tables)
        brain.compact()
        assert len(brain.sources.tables) == 1 and not len(brain.sources.mem)
        table = brain.sources.tables[0]
        info = {
            "tables before compaction": flushed_tables,
            "table bytes": table.size,
            "table blocks": len(table._handles),
            "versions": table.entries,
            "generation": brain.head,
        }
    finally:
        brain.close()
    info["build seconds"] = round(time.perf_counter() - started, 1)
    return info


def fixtures(store: Path) -> dict[str, Any]:
    """What the workers that need no projections use: the postings find intersects, the page's answer."""
    brain = Brain.attach(store)
    try:
        started = time.perf_counter()
        with brain.at().projections() as proj:
            pass
        built = time.perf_counter() - started
        q = Q.Query(arguments.check(D.BY_NAME["find"], FIND2))  # the document as the dispatcher hands it
        lists = [
            proj.posting("type", "document"),
            proj.posting("visibility", "public"),
            proj.posting("status", "open"),
            proj.posting("team", "t7"),
        ]
        candidates, used = Q._narrow(proj, q)
        assert used == ["type", "visibility", "status", "team"], used
        assert Q.P.intersect_many(lists) == candidates  # the very lists find intersects, in its order
        page = brain.find(PAGE)
        assert len(page["results"]) == 1000 and page["hasMore"]
        words = vocabulary(random.Random(SEED))
        text = f"{words[TEXT_RANKS[0]]} {words[TEXT_RANKS[1]]}"
        found = brain.find({"query": text, "limit": 10})
        assert len(found["results"]) == 10
        two = brain.find(FIND2)
        assert len(two["results"]) == 10
        return {
            "lists": {"find2": lists, "status": lists[2], "team": lists[3]},
            "page": page,
            "text": text,
            "sizes": {
                "type=document": len(lists[0]),
                "visibility=public": len(lists[1]),
                "status=open": len(lists[2]),
                "team=t7": len(lists[3]),
                "find2 candidates": len(candidates),
                "page candidates": page["cost"]["candidates"],
                "page rowsRead": page["cost"]["rowsRead"],
                "page total": page["total"],
                f"docs with {words[TEXT_RANKS[0]]!r}": len(proj.terms.get(words[TEXT_RANKS[0]], ())),
                f"docs with {words[TEXT_RANKS[1]]!r}": len(proj.terms.get(words[TEXT_RANKS[1]], ())),
                "page answer bytes (orjson)": len(orjson.dumps(page)),
            },
            "projections seconds": round(built, 1),
        }
    finally:
        brain.close()


# -- in a worker -------------------------------------------------------------------------------------------


def _store() -> Path:
    return Path(_cache["args"].store)


def brain() -> Brain:
    """The store attached read-only, its projections built (outside every timed loop)."""
    if "brain" not in _cache:
        b = Brain.attach(_store() / "store")
        atexit.register(b.close)
        with b.at().projections():
            pass
        _cache["brain"] = b
    return _cache["brain"]


def fixture(name: str) -> Any:
    if "fixtures" not in _cache:
        _cache["fixtures"] = pickle.loads((_store() / "fixtures.pickle").read_bytes())
    return _cache["fixtures"][name]


def time_find(args_of: Any):
    def run(loops: int) -> float:
        b = brain()
        args = args_of() if callable(args_of) else args_of
        find = b.find
        t0 = time.perf_counter()
        for _ in range(loops):
            find(args)
        return time.perf_counter() - t0

    return run


def time_orjson(loops: int) -> float:
    page = fixture("page")
    dumps = orjson.dumps
    t0 = time.perf_counter()
    for _ in range(loops):
        dumps(page)
    return time.perf_counter() - t0


def time_postings(which: str, op: str, lists_of: str):
    twin = load("postings", which)

    def run(loops: int) -> float:
        lists = fixture("lists")
        if op == "intersect_many":
            fn, args = twin.intersect_many, (lists[lists_of],)
        else:
            fn, args = twin.intersect, (lists["status"], lists["team"])
        t0 = time.perf_counter()
        for _ in range(loops):
            fn(*args)
        return time.perf_counter() - t0

    return run


# -- the profile of a page (in the manager, after the benchmarks) ---------------------------------------


@contextmanager
def shims(acc: dict[str, float]) -> Iterator[dict[str, int]]:
    """Thin Python wrappers, timed, around the calls a find makes into decoding and intersection.

    The compiled calls are invisible to cProfile (Cython functions are not traced); the wrappers
    make them visible and time them without a profiler. Each costs well under a microsecond.
    """
    perf = time.perf_counter
    calls = {"decode_block": 0, "unpack": 0, "postings": 0}
    real_block, real_unpack, real_p = SST.sstblock, ROWS.unpack, Q.P

    def decode_block(mm: Any, offset: int, size: int) -> Any:
        calls["decode_block"] += 1
        t = perf()
        try:
            return real_block.decode_block(mm, offset, size)
        finally:
            acc["decode_block"] += perf() - t

    def unpack(data: bytes) -> Any:
        calls["unpack"] += 1
        t = perf()
        try:
            return real_unpack(data)
        finally:
            acc["unpack"] += perf() - t

    def postings_call(fn: Any) -> Any:
        def call(*args: Any) -> Any:
            calls["postings"] += 1
            t = perf()
            try:
                return fn(*args)
            finally:
                acc["postings"] += perf() - t

        return call

    def intersect_many(lists: Any) -> Any:
        return _intersect_many(lists)

    def union_many(lists: Any) -> Any:
        return _union_many(lists)

    def difference(a: Any, b: Any) -> Any:
        return _difference(a, b)

    _intersect_many = postings_call(real_p.intersect_many)
    _union_many = postings_call(real_p.union_many)
    _difference = postings_call(real_p.difference)
    SST.sstblock = SimpleNamespace(decode_block=decode_block, encode_block=real_block.encode_block)
    ROWS.unpack = unpack
    Q.P = SimpleNamespace(
        intersect_many=intersect_many,
        union_many=union_many,
        difference=difference,
        intersect=postings_call(real_p.intersect),
        union=postings_call(real_p.union),
        contains=real_p.contains,
        valid=real_p.valid,
        TYPECODE=real_p.TYPECODE,
    )
    try:
        yield calls
    finally:
        SST.sstblock, ROWS.unpack, Q.P = real_block, real_unpack, real_p


def _pct(part: float, whole: float) -> str:
    return f"{100 * part / whole:5.1f}%"


def profile_find(b: Brain, name: str, args: dict[str, Any], runs: int, top: int) -> None:
    """Print the shares of one find's time (decoding, intersecting, the rest) and its costliest functions."""
    for _ in range(3):
        b.find(args)  # warm: the block cache as a steady stream of such finds leaves it
    print()
    print(f"Profile of {name} ({runs} runs after 3 warm ones; outside pyperf)")
    # 1. wall clock with timed shims, no profiler: the shares to quote
    acc = {"decode_block": 0.0, "unpack": 0.0, "postings": 0.0}
    with shims(acc) as calls:
        t0 = time.perf_counter()
        for _ in range(runs):
            b.find(args)
        total = time.perf_counter() - t0
    decode = acc["decode_block"] + acc["unpack"]
    rest = total - decode - acc["postings"]
    per = 1e3 / runs
    print(f"  wall clock, timed shims, no profiler: {total * per:.2f} ms per find")
    print(
        f"    decoding     {_pct(decode, total)}  {decode * per:7.3f} ms  "
        f"(sstblock.decode_block {acc['decode_block'] * per:.3f} ms over {calls['decode_block'] / runs:.0f} "
        f"blocks, rows.unpack {acc['unpack'] * per:.3f} ms over {calls['unpack'] / runs:.0f} rows)"
    )
    print(
        f"    intersecting {_pct(acc['postings'], total)}  {acc['postings'] * per:7.3f} ms  "
        f"({calls['postings'] / runs:.0f} postings calls)"
    )
    print(f"    the rest     {_pct(rest, total)}  {rest * per:7.3f} ms")

    # 2. cProfile, the same shims: where "the rest" goes
    acc = {"decode_block": 0.0, "unpack": 0.0, "postings": 0.0}
    profiler = cProfile.Profile()
    with shims(acc):
        profiler.enable()
        for _ in range(runs):
            b.find(args)
        profiler.disable()
    entries = pstats.Stats(profiler).stats  # type: ignore[attr-defined]
    total_p = sum(tt for (_, _, tt, _, _) in entries.values())

    def cum(func: str) -> float:
        return sum(ct for (f, _, fn), (_, _, _, ct, _) in entries.items() if fn == func and f == __file__)

    decode_p = cum("decode_block") + cum("unpack")
    inter_p = cum("intersect_many") + cum("union_many") + cum("difference")
    print(f"  under cProfile (pure Python inflated): {total_p * per:.2f} ms per find")
    print(
        f"    decoding     {_pct(decode_p, total_p)}   intersecting {_pct(inter_p, total_p)}   "
        f"the rest {_pct(total_p - decode_p - inter_p, total_p)}"
    )
    print(f"  top {top} functions by own time (cProfile; {runs} runs):")
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(top)
    lines = out.getvalue().splitlines()
    start = next(i for i, line in enumerate(lines) if line.lstrip().startswith("ncalls"))
    prefix = str(Path(Q.__file__).parent.parent.parent) + "/"
    for line in lines[start:]:
        if line.strip():
            print("    " + line.replace(prefix, ""))


def profiles(store: Path, text: str) -> None:
    b = Brain.attach(store)
    try:
        with b.at().projections():
            pass
        profile_find(b, "find.page[1000]", PAGE, runs=30, top=20)
        profile_find(b, "find.two-predicates", FIND2, runs=300, top=10)
        profile_find(b, "find.text", {"query": text, "limit": 10}, runs=30, top=10)
    finally:
        b.close()


# -- main ----------------------------------------------------------------------------------------------


def main() -> None:
    runner = stored.runner()
    runner.argparser.add_argument("--no-profile", action="store_true", help="skip the profiles of the finds")
    args = runner.parse_args()
    _cache["args"] = args
    runner.metadata["description"] = "brainy find over 100,000 entities; postings intersection"
    runner.metadata["entities"] = str(ENTITIES)

    if not args.worker:
        root, missing = stored.root(args, "brainy-bench-queries-")
        if missing:
            print(f"building {ENTITIES:,} entities under {root} ...", flush=True)
            info = build_store(root / "store")
            print("  " + ", ".join(f"{k}: {v:,}" if isinstance(v, int) else f"{k}: {v}" for k, v in info.items()))
        if not (root / "fixtures.pickle").exists():
            (root / "fixtures.pickle").write_bytes(pickle.dumps(fixtures(root / "store"), protocol=5))
        fx = pickle.loads((root / "fixtures.pickle").read_bytes())
        print(f"  projections built in {fx['projections seconds']} s; text query {fx['text']!r}")
        print("  " + ", ".join(f"{k}: {v:,}" for k, v in fx["sizes"].items()), flush=True)

    results: dict[str, Any] = {}
    results["find.two-predicates"] = runner.bench_time_func("find.two-predicates", time_find(FIND2))
    results["find.page[1000]"] = runner.bench_time_func("find.page[1000]", time_find(PAGE))
    results["orjson.page[1000]"] = runner.bench_time_func("orjson.page[1000]", time_orjson)
    results["find.text"] = runner.bench_time_func(
        "find.text", time_find(lambda: {"query": fixture("text"), "limit": 10})
    )
    for which in ("cython", "python"):
        try:
            load("postings", which)
        except ImportError:
            continue  # the compiled twin is not built here; the pure one still runs
        name = f"postings.intersect_many[find2][{which}]"
        results[name] = runner.bench_time_func(name, time_postings(which, "intersect_many", "find2"))
        name = f"postings.intersect[status x team][{which}]"
        results[name] = runner.bench_time_func(name, time_postings(which, "intersect", ""))

    if args.worker or any(r is None for r in results.values()):
        return  # a worker, or a manager that timed nothing (compare_to and the like)
    mean = {name: bench.mean() for name, bench in results.items()}
    print()
    print("Summary (means)")
    for name, seconds in mean.items():
        print(f"  {name:44s} {seconds * 1e6:12.1f} us")
    ratio = mean["find.page[1000]"] / mean["orjson.page[1000]"]
    print(f"  find.page[1000] / orjson.page[1000] = {ratio:.1f}x (target: within 2x)")
    for lists in ("intersect_many[find2]", "intersect[status x team]"):
        c, p = mean.get(f"postings.{lists}[cython]"), mean.get(f"postings.{lists}[python]")
        if c and p:
            print(f"  postings.{lists}: cython {p / c:.0f}x faster than python")
    if not args.no_profile:
        profiles(Path(args.store) / "store", fixture("text"))


if __name__ == "__main__":
    main()
