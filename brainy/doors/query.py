"""The query doors: find, related, explain, fields (door catalogue, sections 4 and 5.1).

``find`` plans from the projections: the metadata leg narrows candidates by
intersecting postings (type, subtype, service, visibility, the where's
equalities), the rest of the where is evaluated on the rows that survive, the
text leg scores with BM25 over word postings (compiled, into arrays:
``brainy/_speedups/ranking.pyx``), the semantic leg ranks by cosine on the
vector index (``brainy/doors/semantic.py``), and the ranked legs are fused:
as arrays, only the page's first hits put in order (``Fusion.order``), or,
with a graph or purpose leg or an orderBy, a dict a hit (``Fusion.fuse``).
``connected`` keeps only the entities the graph walk reaches
(``brainy/index/graph.py``), or adds 1/hops as one more ranked leg when
``fusion.weights.graph > 0``. The page is cut in store order, score order or
the orderBy column. A find pinned at a past generation (asOf, or a cursor from
an older head) reads that generation's rows instead, with the same evaluator:
slower, never different. The aggregated shape (``aggregate``) is answered by
``brainy/doors/aggregates.py`` over the rows the metadata leg selects. The
ranked shapes (purpose, rerank, passages) work on the ranked legs' hits
(``brainy/doors/shapes.py``).
"""

from __future__ import annotations

import math
import operator
import time
from array import array
from collections.abc import Callable, Iterable
from itertools import repeat
from typing import Any

import numpy as np

from brainy._speedups import pagerows
from brainy._speedups import postings as P
from brainy._speedups import ranking as RK
from brainy.contract import refusals as R
from brainy.doors import aggregates
from brainy.doors import semantic as S
from brainy.doors import shapes as SH
from brainy.doors import traverse as G
from brainy.doors.cursors import decode_cursor, encode_cursor
from brainy.doors.registry import door
from brainy.index import encoded_rows as E
from brainy.index.graph import StoredAdjacency, graph_at_head
from brainy.index.projections import TYPECODE, WORD, Projections, column_values, words
from brainy.index.snapshot import Snapshot
from brainy.index.vector_matrix import unit
from brainy.index.vectors import VectorIndex
from brainy.index.where import ENTITY_FIELDS, Predicate, compile_where, sort_by_value
from brainy.store import keys as K
from brainy.store import rows
from brainy.store.counts import Ledger

MODES = ("auto", "text", "semantic", "vector", "hybrid", "metadata", "graph")
TIERS = ("public", "internal", "system")
BM25_K1, BM25_B = 1.2, 0.75
#: The text and semantic legs fused as arrays, the page's first hits alone put in order (False: a dict a hit and a
#: sort of them all, the path a graph or purpose leg or an orderBy takes; tests/test_fused_find.py holds the two equal).
ARRAYS = True
_UNBOUND = frozenset(("limit", "offset", "cursor", "explain", "includeData", "includeVector"))  # a cursor's pages vary


_list = rows.listed


def _string(value: Any, field: str) -> str:
    if not isinstance(value, str):
        raise R.InvalidArgumentError(f"{field}: must be a string", field=field, reason="wrong-type")
    return value


class Query:
    """A checked FindQuery (its argument names and scalar types checked against the contract before)."""

    def __init__(self, a: dict[str, Any], door: str = "find") -> None:
        self.args = a
        self.door = door
        self.include_self = True  # similar.to leaves its anchor out
        self.mode = a["searchMode"]
        if self.mode not in MODES:
            raise R.InvalidArgumentError(f"searchMode: one of {MODES}", field="searchMode", reason="bad-operand")
        self.text = a.get("query")
        if self.text is not None:
            _string(self.text, "query")
        if self.mode == "metadata" and (
            self.text is not None or a.get("vector") is not None or a.get("near") is not None
        ):
            raise R.InvalidArgumentError(
                "searchMode metadata takes no query, vector or near", field="searchMode", reason="bad-operand"
            )
        self.types = _list(a.get("type"), "type", lambda v, f: rows.noun(v, f))
        self.subtypes = _list(a.get("subtype"), "subtype", _string)
        self.services = _list(a.get("service"), "service", _string)
        tiers = a["visibility"]
        self.tiers = list(TIERS) if tiers == "all" else _list(tiers, "visibility", _string)
        if any(t not in TIERS for t in self.tiers or ()):
            raise R.InvalidArgumentError(
                "visibility: a tier, a list of tiers, or all", field="visibility", reason="bad-visibility"
            )
        self.exclude_vfs = a["excludeVFS"]
        self.where: Predicate = compile_where(a.get("where"))
        self.order_by = a.get("orderBy")
        if self.order_by is not None:
            _string(self.order_by, "orderBy")
        self.descending = a["order"] == "desc"
        if a["order"] not in ("asc", "desc"):
            raise R.InvalidArgumentError("order: asc or desc", field="order", reason="bad-operand")
        self.limit = rows.integer(a["limit"], "limit", 1, 1000)
        self.offset = rows.integer(a["offset"], "offset", 0, 10000)
        self.explain = a["explain"]
        self.include_data = a["includeData"]
        self.include_vector = a["includeVector"]
        self.connected = G.Connected(a["connected"]) if a.get("connected") is not None else None
        if self.mode == "graph" and self.connected is None:
            raise R.InvalidArgumentError(
                "searchMode graph walks from connected: give it", field="connected", reason="missing"
            )
        self.graph_weight = G.graph_weight(a.get("fusion"))
        self.fusion = S.Fusion.of(a)
        self.semantic: S.Source | None = None
        self.shapes = SH.Shapes.of(a)
        self.legs = self._legs()
        self.words = SH.terms(self.text) if self.text is not None else []
        self.shapes.check(self.ranked, a.get("aggregate") is not None, bool(self.order_by), bool(self.words))
        self.purpose = S.query_vector(self.shapes.purpose) if self.shapes.purpose is not None else None

    def _legs(self) -> dict[str, dict[str, Any]]:
        """Which legs run: the refusals of explicit modes, and the loud omissions of auto."""
        a, mode = self.args, self.mode
        legs: dict[str, dict[str, Any]] = {"metadata": {"served": True}}
        if self.connected is not None:
            legs["graph"] = {"served": True}
        if mode == "hybrid" and self.text is None:
            raise R.InvalidArgumentError(
                "searchMode hybrid needs query (its text leg)", field="query", reason="missing"
            )
        if self.text is not None and mode in ("auto", "text", "hybrid"):
            legs["text"] = {"served": True}
        self.semantic = S.plan(a, mode, self.text, legs)
        return legs

    @property
    def graph_ranked(self) -> bool:
        """The graph leg adds 1/hops as a ranked signal instead of filtering (DOORS 4.2)."""
        return self.connected is not None and self.graph_weight > 0

    @property
    def ranked(self) -> bool:
        return "text" in self.legs or self.semantic is not None or self.graph_ranked

    def semantic_depth(self) -> int:
        """How many hits the semantic leg ranks: one past the page (to know there is more); in a fusion a fixed
        depth, so every page of a ranked cursor fuses the same lists; every candidate an orderBy reorders."""
        if self.order_by:
            return S.ORDERED_MAX
        return S.HYBRID_DEPTH if "text" in self.legs or self.graph_ranked else self.offset + self.limit + 1

    def fingerprint(self) -> tuple[dict[str, Any], bytes]:
        """What a cursor is bound to (brainy/doors/cursors.py): the arguments but the paging and shaping ones, and
        a given vector's unit float32s as searched (one query however its numbers came: a list, or packed by the
        transport), digested as bytes, not as its 384 numbers printed (15 of a top-10 page cursor's 20 us)."""
        kept = {k: v for k, v in self.args.items() if k not in _UNBOUND}
        if kept.get("vector") is not None and self.semantic is not None and self.semantic.vector is not None:
            kept["vector"] = True  # given: bound by its unit, the bytes beside
            return kept, self.semantic.vector.tobytes()
        return kept, b""

    def cursor(self, generation: int, position: int) -> str:
        """The find cursor of the page that ends before ``position``, read at ``generation``."""
        bound_to, vector = self.fingerprint()
        return encode_cursor("find", bound_to, generation, position, vector)


# -- candidates --------------------------------------------------------------------------------------


def _union(lists: Iterable[array]) -> array:
    lists = [x for x in lists if len(x)]
    if len(lists) == 1:
        return lists[0]
    return P.union_many(lists) if lists else array(TYPECODE)


def _narrow(
    proj: Projections, q: Query, ledger: Ledger | None = None, whole: bool = True
) -> tuple[array | None, list[str]]:
    """The candidate dense ints the postings allow, and the postings read (for explain).

    ``ledger``, the counts at the head (a find's): a tier filter every row passes is not read (the default
    find asks for public rows, on a store that holds only public ones). ``whole`` False (a ranked find, which
    asks only how many there are): None when every row is a candidate, not the array of them. After a crash
    both are O(store) merges of the snapshot and the log tail's rows: 50 ms of a first find at a million."""
    parts: list[array] = []
    used: list[str] = []
    for path, values in (("type", q.types), ("subtype", q.subtypes), ("service", q.services), ("visibility", q.tiers)):
        if values is not None and not (path == "visibility" and _every_tier(values, proj, ledger)):
            parts.append(_union(proj.posting(path, v) for v in values))
            used.append(path)
    for eq in q.where.equalities():
        parts.append(_union(proj.posting(eq.path, v) for v in eq.values))
        used.append(eq.path)
    # one posting is its own intersection: uncopied, as proj.all is (a find copies what it keeps past the lock)
    candidates = P.intersect_many(parts) if len(parts) > 1 else parts[0] if parts else None
    if q.exclude_vfs:
        subtypes = proj.postings.get("subtype", {})  # the values first: only a vfs subtype's posting is read
        vfs = _union(subtypes[key] for key in subtypes if key[0] == "string" and key[1].startswith("vfs."))
        if len(vfs):
            candidates = P.difference(proj.all if candidates is None else candidates, vfs)
    return proj.all if candidates is None and whole else candidates, used


def _every_tier(tiers: list[str], proj: Projections, ledger: Ledger | None) -> bool:
    """Whether every row's tier is among ``tiers``, told without a posting: all of them asked, or public asked
    and the ledger at the projections' stamp counting no row of another tier (it moves in the same commits)."""
    if len(tiers) >= len(TIERS) and all(tier in tiers for tier in TIERS):
        return True
    return (
        ledger is not None
        and "public" in tiers
        and ledger.generation == proj.stamp
        and ledger.n["entities"] == ledger.n["entitiesAllTiers"]
    )


def _row_allowed(q: Query, row: dict[str, Any]) -> bool:
    """The metadata leg on a row, for a find that reads rows instead of postings (a pinned generation)."""
    return (
        (q.types is None or row["type"] in q.types)
        and (q.subtypes is None or row.get("subtype") in q.subtypes)
        and (q.services is None or row.get("service") in q.services)
        and (q.tiers is None or row.get("visibility", "public") in q.tiers)
        and not (q.exclude_vfs and str(row.get("subtype") or "").startswith("vfs."))
        and q.where.matches(row)
    )


# -- the text leg --------------------------------------------------------------------------------------


class TextLeg:
    """The text leg's hits as arrays, copies a read keeps past the projections' lock: their dense ints ascending,
    their BM25 scores, and each scoring word's dense ints (what a hit's ``textMatches`` says)."""

    def __init__(self, words: list[str], dense: np.ndarray, scores: np.ndarray, runs: list[np.ndarray]) -> None:
        self.words, self.dense, self.scores, self.runs = words, dense, scores, runs

    def __len__(self) -> int:
        return len(self.dense)

    def matched(self, dense: int) -> list[str]:
        """The words a hit holds, in the query's order."""
        return self.matches_of([dense]).get(dense, [])

    def matches_of(self, dense_ints: list[int]) -> dict[int, list[str]]:
        """The words each of ``dense_ints`` that is a hit holds, in the query's order (one search a word)."""
        wanted = np.array(dense_ints, dtype=np.uint64)
        out: dict[int, list[str]] = {}
        for word, run in zip(self.words, self.runs):
            for d in wanted[_held(run, wanted)[1]].tolist():
                out.setdefault(d, []).append(word)
        return out

    def scores_of(self, dense_ints: list[int]) -> dict[int, float]:
        """The scores of those of ``dense_ints`` that are hits."""
        wanted = np.array(dense_ints, dtype=np.uint64)
        at, there = _held(self.dense, wanted)
        return dict(zip(wanted[there].tolist(), self.scores[at[there]].tolist()))

    def by_dense(self) -> dict[int, float]:
        """Every hit's score, a dict (what a graph or purpose leg's fusion takes)."""
        return dict(zip(self.dense.tolist(), self.scores.tolist()))


def _held(ascending: np.ndarray, wanted: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Where each wanted dense int is in an ascending array, and whether it is there."""
    at = np.minimum(np.searchsorted(ascending, wanted), max(0, len(ascending) - 1))
    return at, (ascending[at] == wanted) if len(ascending) else np.zeros(len(wanted), dtype=bool)


def _text_leg(proj: Projections, text: str, allowed: array | None) -> TextLeg:
    """BM25 scores of the entities ``allowed`` holds (a posting list; None: every entity) holding any of the text's
    words, scored in compiled code (brainy/_speedups/ranking.pyx) with idf over every entity."""
    n = max(1, len(proj.lengths))
    average = (proj.total_length / n) or 1.0
    used: list[str] = []
    postings: list[Any] = []
    idfs: list[float] = []
    for term in dict.fromkeys(WORD.findall(text.lower())):
        found = proj.word_postings(term)  # (dense ints ascending, term frequencies)
        if found is None:
            continue
        used.append(term)
        postings.append(found)
        df = len(found[0])
        idfs.append(math.log(1 + (n - df + 0.5) / (df + 0.5)))
    dense, scores, runs = RK.bm25(postings, idfs, proj.word_lengths(), average, allowed, BM25_K1, BM25_B)
    return TextLeg(used, dense, scores, runs)


class _ComparedKeys:
    """Id keys (:class:`~brainy.index.projections.IdKeys`' shape) for the hits of one find on projections that keep
    none (read in place, or an id that is not a canonical UUID): each hit's id looked up, and its place among theirs
    in id order is its key."""

    def __init__(self, ids: Any, legs: list[S.Leg]) -> None:
        hits = np.unique(np.concatenate([leg.dense for leg in legs])) if legs else np.empty(0, np.uint64)
        names = list(map(ids.__getitem__, hits.tolist()))
        order = sorted(range(len(names)), key=names.__getitem__)
        self.hi = np.zeros(int(hits[-1]) + 1 if len(hits) else 1, dtype=np.uint64)
        self.lo = np.zeros(len(self.hi), dtype=np.uint64)
        self.hi[hits[order]] = np.arange(len(hits), dtype=np.uint64)


#: The row's own fields an orderBy reads from the row rather than from its metadata: a where's, and the dense int.
ROW_FIELDS = ENTITY_FIELDS | {"denseInt"}


def _column_value(row: dict[str, Any], path: str) -> tuple[bool, Any]:
    if path in ROW_FIELDS:
        return (path in row, row.get(path))
    node: Any = row.get("metadata") or {}
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            return (False, None)
        node = node[part]
    if isinstance(node, list):
        return (bool(node), node[0] if node else None)
    return (not isinstance(node, dict), node)


# -- find ------------------------------------------------------------------------------------------------


@door("find", embeds=S.query_texts)
def find(snap: Snapshot, id_: Any, args: dict[str, Any]) -> dict[str, Any]:
    return run_find(Query(args), snap)


def run_find(q: Query, snap: Snapshot) -> dict[str, Any]:
    """A checked query run at its snapshot (or at its cursor's generation)."""
    if q.args.get("cursor") is not None:
        generation, position = decode_cursor(q.args["cursor"], "find", *q.fingerprint())
        q.offset = position
        if generation != snap.head:
            snap = snap.at(generation)
    if q.args.get("aggregate") is not None:
        return _find_aggregated(q, snap)
    if not snap.at_head:
        return _find_by_rows(q, snap)
    return _find_by_projections(q, snap)


class Stages:
    """The answer's ``stages`` under ``explain``: each stage's time and how many candidates it left."""

    def __init__(self, on: bool) -> None:
        self.on, self.list, self._t = on, [], time.perf_counter()

    def mark(self, stage: str, candidates: int) -> None:
        if self.on:
            now = time.perf_counter()
            self.list.append({"stage": stage, "ms": round((now - self._t) * 1000, 3), "candidates": candidates})
            self._t = now


class Ranking:
    """The ranked legs' scores and their fusion: what each hit's score, matchSource and explanation say."""

    def __init__(
        self,
        q: Query,
        text: dict[int, float] | None,
        matched: Callable[[int], list[str]] | None,
        semantic: dict[int, float] | None,
        id_of: Callable[[int], str],
        graph: dict[int, float] | None = None,
        purpose: dict[int, float] | None = None,
        fused: dict[int, float] | None = None,
    ) -> None:
        """``fused``: the fused scores when :meth:`Fusion.order` gave them (a page's hits; the legs' scores then need
        only theirs)."""
        self.text, self.semantic, self.graph = text, semantic, graph
        self.matched: Callable[[int], list[str]] = matched or (lambda dense: [])
        self.purpose = purpose
        self.exact: dict[int, dict[str, Any]] = {}  # rerank's scores of the hits it re-scored
        legs = {
            name: scores
            for name, scores in (("text", text), ("semantic", semantic), ("graph", graph), ("purpose", purpose))
            if scores is not None
        }
        self.fusing = len(legs) > 1
        # the semantic leg alone ranks (every hit is one of its own): what hit() answers is its score and source
        self.semantic_alone = semantic is not None and len(legs) == 1
        if fused is not None:
            self.fused = fused
        else:
            self.fused = q.fusion.fuse(legs, id_of) if self.fusing else next(iter(legs.values()))

    def hit(self, dense: int, hit: dict[str, Any], explain: bool) -> None:
        exact = self.exact.get(dense)
        hit["score"] = self.fused[dense] if exact is None else exact["score"]
        if (self.text is None or dense not in self.text) and (self.semantic is None or dense not in self.semantic):
            hit["matchSource"] = "graph"  # only the graph leg ranked it
        else:
            hit["matchSource"] = S.match_source(dense, self.text, self.semantic)
        if self.text is not None:
            hit["textMatches"] = self.matched(dense)
        if explain:
            explanation: dict[str, Any] = {}
            for name, scores in (
                ("text", self.text),
                ("semantic", self.semantic),
                ("graph", self.graph),
                ("purpose", self.purpose),
            ):
                if scores is not None and dense in scores:
                    explanation[name] = scores[dense]
            explanation["fused"] = self.fused[dense]
            if exact is not None:
                explanation["rerank"] = exact
            hit["explanation"] = explanation

    def rerank(
        self,
        q: Query,
        kept: list[int],
        row_of: Callable[[int], dict[str, Any]],
        vector_of: Callable[[int], bytes | None],
        query_vector: Any,
        id_of: Callable[[int], str],
    ) -> list[int]:
        """``rerank``: the first limit × 4 hits of the fused order re-scored exactly from their rows (and the
        vectors ``vector_of`` reads for them)."""

        def unit_of(dense: int) -> Any:
            vector = vector_of(dense)
            return unit(vector) if vector else None

        def score_of(window: list[int]) -> dict[int, dict[str, Any]]:
            cosine = None
            if query_vector is not None:
                cosine = SH.cosines(query_vector, window, unit_of)
            near = (lambda d: SH.proximity(q.words, words(row_of(d)))) if "text" in q.legs else None
            return SH.rerank(window, cosine, near, q.fusion.alpha, id_of)

        kept, self.exact = SH.reorder(kept, q.limit, score_of, id_of)
        return kept


def _page(
    q: Query,
    view: Snapshot,
    ordered: list[int],
    entities_of: Callable[[list[int], list[str], bool, bool], list[Any]],
    id_of: Callable[[int], str],
    rows_of: Callable[[int], dict[str, Any]],
    ranking: Ranking | None,
    total: int | None,
    cost: dict[str, int],
    stages: Stages,
) -> dict[str, Any]:
    """The answer's page: the hits' entities (``entities_of`` the window and its ids: encoded once per
    version for a transport, brainy/index/encoded_rows.py); ``rows_of``, the decoded row, only for what
    reads inside it (passages)."""
    window = ordered[q.offset : q.offset + q.limit]
    ids = list(map(id_of, window))  # once: an id map read in place finds each by bisection
    entities = entities_of(window, ids, q.include_vector, q.include_data)
    if ranking is None and q.connected is None and q.shapes.passages is None:
        # a plain page (no scores, no sources, no passages): its hits built in one pass
        results = pagerows.plain_hits(ids, entities)
    elif ranking is not None and ranking.semantic_alone and not (ranking.exact or q.explain or q.shapes.passages):
        # the semantic leg's page, nothing re-scored: each hit's score its own, its source the leg (Ranking.hit's)
        fused = ranking.fused
        results = [
            {"id": id_, "score": fused[dense], "entity": entity, "matchSource": "semantic"}
            for dense, id_, entity in zip(window, ids, entities)
        ]
    else:
        results = []
        for dense, id_, entity in zip(window, ids, entities):
            hit: dict[str, Any] = {"id": id_, "score": None, "entity": entity}
            if ranking is not None:
                ranking.hit(dense, hit, q.explain)
            elif q.connected is not None:
                hit["matchSource"] = "graph"
            if q.shapes.passages is not None:
                hit["passages"] = SH.passages(SH.text_of(rows_of(dense)), q.words, q.shapes.passages)
            results.append(hit)
    more = q.offset + q.limit < len(ordered)
    cursor = None
    if more and q.door == "find":  # similar takes no cursor: its answer says there is more, and stops
        cursor = q.cursor(view.generation, q.offset + q.limit)
    answer: dict[str, Any] = {
        "results": results,
        "brain": view.brain,
        "generation": view.generation,
        "cursor": cursor,
        "hasMore": more,
        "legs": q.legs,
        "cost": cost,
    }
    if total is not None:
        answer["total"] = total
    if q.explain:
        stages.mark("page", len(window))
        answer["stages"] = stages.list
    return answer


def _semantic_scores(q: Query, scores: Any, dense_ints: Any, exclude: int | None) -> dict[int, float]:
    """The semantic leg's hits as dense int -> cosine, its threshold applied and ``similar``'s anchor left out."""
    floor = q.semantic.threshold if q.semantic is not None else None
    out: dict[int, float] = {}
    for score, dense in zip(scores.tolist(), dense_ints.tolist()):
        if dense != exclude and (floor is None or score >= floor):
            out[dense] = score
    return out


def _hits(*legs: dict[int, float] | None) -> set[int]:
    """Every hit some ranked leg found."""
    return set().union(*(leg for leg in legs if leg is not None))


def _ordered(
    q: Query,
    kept: list[int],
    ranking: Ranking | None,
    id_of: Callable[[int], str],
    value_of: Callable[[int], tuple[bool, Any]],
) -> list[int]:
    if ranking is not None and not q.order_by:
        fused = ranking.fused
        kept.sort(key=lambda d: (-fused[d], id_of(d)))
    elif q.order_by:  # only the page is read from it (rerank, which reads further, takes no orderBy)
        kept = sort_by_value(kept, value_of, id_of, q.descending, q.offset + q.limit)
    return kept


def _find_by_projections(q: Query, snap: Snapshot) -> dict[str, Any]:
    stages = Stages(q.explain)
    semantic = purpose = vector = None
    truncated = False
    anchor = None
    # the text and semantic legs fused as arrays, and only the page's first hits ordered (Fusion.order); a graph or
    # purpose leg, or an orderBy, fuses dicts a hit and sorts them (Ranking, Fusion.fuse)
    arrays = ARRAYS and q.ranked and not q.order_by and not q.graph_ranked and q.purpose is None
    text: TextLeg | None = None
    keys: S.Keys | None = None
    with snap.projections() as proj:
        candidates, _ = _narrow(proj, q, snap.ledger() if snap.at_head else None, whole=not q.ranked)
        if candidates is None and q.connected is not None:
            candidates = proj.all
        stages.mark("metadata", len(proj) if candidates is None else len(candidates))
        generation = proj.stamp
        view = snap.at(generation)  # the head the projections hold still (every read below is of it)
        ids = proj.ids
        residual = q.where.residual()
        needs_rows = not residual.matches_all
        text_scores = graph_scores = None
        if q.connected is not None:
            graph = graph_at_head(proj, view)
            hops = G.reachable(graph, q.connected)
            if q.graph_ranked:  # one more ranked leg: hits it does not reach may still come from the others
                graph_scores = G.graph_signal(hops, graph.dense.get, set(candidates))
            else:
                candidates = G.within(candidates, hops, graph.dense)
        # candidates are a subset of every row: as many means all of them (public only, on a store of public rows)
        narrowed = candidates is not None and len(candidates) < len(proj)
        if "text" in q.legs:
            text = _text_leg(proj, q.text or "", candidates if narrowed else None)
            stages.mark("text", len(text))
            if not arrays:
                text_scores = text.by_dense()
        columns = (
            None
            if not q.order_by
            else column_values(  # a ranked leg's hits are known only later: all rows
                proj.columns.get(q.order_by) or {}, proj.all if q.ranked else candidates
            )
        )
        matched_count = len(proj) if candidates is None else len(candidates)
        if not q.ranked:  # the page is cut from them after the lock: a copy, as later commits move the postings
            candidates = array(TYPECODE, candidates)
        if q.semantic is not None:
            vector, anchor_dense = S.anchor_vector(view, q.semantic)  # the lock held here keeps the head still
            anchor = None if q.include_self else anchor_dense
            try:
                with view.vectors() as index:
                    depth = q.semantic_depth() * (4 if needs_rows else 1) + (anchor is not None)
                    found, dense_found, how = index.search(vector, depth, candidates if narrowed else None)
                    truncated = len(dense_found) >= depth
            except R.ProjectionBehindError as behind:  # the auto-mode law (DOORS 4.2): left out loudly
                if q.mode != "auto" or "text" not in q.legs:
                    raise
                q.legs["semantic"] = {"served": False, "reason": f"ProjectionBehindError: {behind.message}"}
            else:
                semantic = _semantic_scores(q, found, dense_found, anchor)
                stages.mark(f"semantic ({how})", len(semantic))
        if q.purpose is not None:
            with view.vectors() as index:
                purpose = SH.cosines(q.purpose, sorted(_hits(text_scores, semantic, graph_scores)), index.vector_of)
            stages.mark("purpose", len(purpose))
        if arrays:
            keys = proj.id_keys()  # held past the lock: what a commit adds never changes a key already there
    id_list = ids  # entries are never removed or changed (projections.py), so this reads safely unlocked
    stored: dict[int, tuple[bytes, int, bytes]] = {}
    cache: dict[int, dict[str, Any]] = {}
    read = 0

    def stored_of(dense: int) -> tuple[bytes, int, bytes]:
        nonlocal read
        hit = stored.get(dense)
        if hit is None:
            user_key = K.entity_key(id_list[dense])
            found = E.version(view, user_key)
            assert found is not None, f"projection names dense int {dense} that has no row"
            hit = stored[dense] = (user_key, found[0], found[1])
            read += 1
        return hit

    def row_of(dense: int) -> dict[str, Any]:
        row = cache.get(dense)
        if row is None:
            row = cache[dense] = rows.unpack(stored_of(dense)[2])
        return row

    def entities_of(window: list[int], ids: list[str], include_vector: bool, include_data: bool) -> list[Any]:
        nonlocal read
        # the others were read already, for the where or rerank
        fresh = [i for i, d in enumerate(window) if d not in stored] if stored else range(len(window))
        read += len(fresh)
        # mapped, not a comprehension: the key cache's C wrapper called a row without a Python frame
        keys = list(map(K.entity_key, ids if len(fresh) == len(ids) else [ids[i] for i in fresh]))
        looked = E.lookup_many(view, keys, include_vector, include_data)
        # identity tests only, in C: an entity is a Mapping, whose == would run Python per row
        assert all(map(operator.is_not, looked, repeat(None))), "the projections name a dense int that has no row"
        if len(fresh) == len(window):
            return looked
        fetched = iter(looked)
        return [
            E.answer(view, *stored[d], include_vector, include_data) if d in stored else next(fetched) for d in window
        ]

    if semantic is not None and needs_rows:
        semantic = {d: score for d, score in semantic.items() if residual.matches(row_of(d))}
        if truncated and len(semantic) < q.semantic_depth():
            # the where kept too few of the oversampled hits: that generation's rows, scanned exactly
            return _find_by_rows(q, view)
    cost = {"segments": 1, "candidates": matched_count, "rowsRead": 0}
    if arrays:
        # one past the page (is there more?), or past rerank's window; every hit when explain counts the kept ones
        upto = max(q.offset + q.limit, q.limit * SH.RERANK_FACTOR if q.shapes.rerank else 0) + 1
        lone = None if text is not None or semantic is None or needs_rows else S.lone_order(semantic, upto)
        if lone is not None:  # the index's top-k alone, in its order: the page's hits without arrays made of them
            kept, fused_of, count = lone, semantic, len(semantic)
        else:
            legs = [S.Leg("text", text.dense, text.scores)] if text is not None else []
            if semantic is not None:
                legs.append(S.Leg("semantic", np.fromiter(semantic, np.uint64, len(semantic)), list(semantic.values())))
            keep = None
            if needs_rows:  # the where's rest, read from the rows of the hits the order reaches
                keep = lambda dense: np.array([residual.matches(row_of(d)) for d in dense.tolist()], dtype=bool)  # noqa: E731
            order, fused, count = q.fusion.order(
                legs,
                keys or _ComparedKeys(id_list, legs),
                None if q.explain and needs_rows and len(legs) > 1 else upto,
                keep,
            )
            kept = order.tolist()
            fused_of = dict(zip(kept, fused.tolist()))
        matches = text.matches_of(kept) if text is not None else {}
        ranking = Ranking(
            q,
            text.scores_of(kept) if text is not None else None,
            lambda dense: matches.get(dense, []),
            semantic,
            id_list.__getitem__,
            fused=fused_of,
        )
        if ranking.fusing:
            stages.mark(f"fusion ({q.fusion.strategy})", len(kept) if count is None else count)
        if q.shapes.rerank:
            kept = ranking.rerank(q, kept, row_of, lambda d: view.vector(row_of(d)), vector, id_list.__getitem__)
            stages.mark("rerank", len(ranking.exact))
        answer = _page(q, view, kept, entities_of, id_list.__getitem__, row_of, ranking, None, cost, stages)
        cost["rowsRead"] = read
        return answer
    ranking = (
        Ranking(
            q,
            text_scores,
            text.matched if text is not None else None,
            semantic,
            id_list.__getitem__,
            graph_scores,
            purpose,
        )
        if q.ranked
        else None
    )
    # unranked and unordered, the candidates' array is the order: the page is sliced from it, never listed whole
    kept = sorted(ranking.fused) if ranking is not None else candidates if not q.order_by else list(candidates)
    if needs_rows:
        kept = [d for d in kept if residual.matches(row_of(d))]
    if ranking is not None and ranking.fusing:
        stages.mark(f"fusion ({q.fusion.strategy})", len(kept))
    column = columns or {}  # every scalar path has a column; a path with none is missing from every row
    kept = _ordered(q, kept, ranking, id_list.__getitem__, lambda d: (d in column, column.get(d)))
    if q.shapes.rerank:
        kept = ranking.rerank(q, kept, row_of, lambda d: view.vector(row_of(d)), vector, id_list.__getitem__)
        stages.mark("rerank", len(ranking.exact))
    answer = _page(
        q, view, kept, entities_of, id_list.__getitem__, row_of, ranking, None if q.ranked else len(kept), cost, stages
    )
    cost["rowsRead"] = read
    return answer


def _find_by_rows(q: Query, view: Snapshot) -> dict[str, Any]:
    """find at a pinned past generation: every row of that generation through the same evaluator."""
    stages = Stages(q.explain)
    found: dict[int, dict[str, Any]] = {}
    stored: dict[int, tuple[bytes, int, bytes]] = {}
    scanned = 0
    for user_key, generation, raw in view.scan_versions(K.ENTITY, b"f"):
        scanned += 1
        row = rows.unpack(raw)
        if _row_allowed(q, row):
            found[row["denseInt"]] = row
            stored[row["denseInt"]] = (user_key, generation, raw)
    stages.mark("metadata", len(found))
    text_scores = semantic = graph_scores = purpose = vector = None
    text: TextLeg | None = None
    if q.connected is not None:
        hops = G.reachable(StoredAdjacency(view), q.connected)
        if q.graph_ranked:
            graph_scores = {d: 1.0 / hops[row["id"]] for d, row in found.items() if row["id"] in hops}
        else:
            found = {d: row for d, row in found.items() if row["id"] in hops}
    if "text" in q.legs:  # idf over the whole store at that generation, as the live leg scores it
        built = Projections.build(view.entities(), view.generation)
        text = _text_leg(built, q.text or "", array(TYPECODE, sorted(found)))
        text_scores = text.by_dense()
        stages.mark("text", len(text_scores))
    if q.semantic is not None or q.purpose is not None:
        for row in found.values():  # whole: the exact scan, the purpose and the rerank read their vectors
            view.whole(row)
    if q.semantic is not None:
        vector, anchor_dense = S.anchor_vector(view, q.semantic)
        anchor = None if q.include_self else anchor_dense
        index = VectorIndex.build(found.values(), view.generation, graph=False)
        scores, dense_ints = index.exact(vector, q.semantic_depth() + 1)
        semantic = _semantic_scores(q, scores, dense_ints, anchor)
        stages.mark("semantic (exact)", len(semantic))
    if q.purpose is not None:
        purpose = SH.cosines(
            q.purpose,
            sorted(_hits(text_scores, semantic, graph_scores)),
            lambda d: unit(found[d]["vector"]) if found[d].get("vector") else None,
        )
        stages.mark("purpose", len(purpose))
    id_of = lambda d: found[d]["id"]  # noqa: E731
    matched = text.matched if text is not None else None
    ranking = Ranking(q, text_scores, matched, semantic, id_of, graph_scores, purpose) if q.ranked else None
    kept = sorted(ranking.fused) if ranking is not None else sorted(found)
    if ranking is not None and ranking.fusing:
        stages.mark(f"fusion ({q.fusion.strategy})", len(kept))
    kept = _ordered(q, kept, ranking, id_of, lambda d: _column_value(found[d], q.order_by))
    if q.shapes.rerank:
        kept = ranking.rerank(q, kept, found.__getitem__, lambda d: found[d].get("vector"), vector, id_of)
        stages.mark("rerank", len(ranking.exact))
    cost = {"segments": 1, "candidates": scanned, "rowsRead": scanned}
    return _page(
        q,
        view,
        kept,
        lambda window, ids, v, i: [E.answer(view, *stored[d], v, i) for d in window],
        id_of,
        found.__getitem__,
        ranking,
        None if q.ranked else len(kept),
        cost,
        stages,
    )


def _find_aggregated(q: Query, snap: Snapshot) -> dict[str, Any]:
    """The aggregated shape: the metadata leg's rows (postings at the head, the rows of a past generation)
    handed to the aggregate's counting."""
    if not snap.at_head:
        scanned = {"segments": 1, "candidates": 0, "rowsRead": 0}

        def allowed() -> Iterable[dict[str, Any]]:
            for row in snap.entities():
                scanned["candidates"] += 1
                scanned["rowsRead"] += 1
                if _row_allowed(q, row):
                    yield row

        return aggregates.find_shape(q, snap, allowed(), scanned)
    with snap.projections() as proj:
        candidates, _ = _narrow(proj, q)
        generation, ids = proj.stamp, proj.ids
        candidates = array(TYPECODE, candidates)  # a copy: later commits move the live postings
    view, residual = snap.at(generation), q.where.residual()
    cost = {"segments": 1, "candidates": len(candidates), "rowsRead": len(candidates)}
    matching = (row for row in (view.entity(ids[d]) for d in candidates) if row is not None and residual.matches(row))
    return aggregates.find_shape(q, view, matching, cost)


# -- related ---------------------------------------------------------------------------------------------


@door("related")
def related(view: Snapshot, id_: Any, a: dict[str, Any]) -> dict[str, Any]:
    """One hop from the graph adjacency, or every relation: relation id ascending on every path."""
    anchors = [k for k in ("node", "from", "to") if a.get(k) is not None]
    if len(anchors) > 1:
        raise R.InvalidArgumentError("give at most one of node, from and to", field=anchors[1], reason="ambiguous")
    verbs = _list(a.get("type"), "type", lambda v, f: rows.verb(v, f))
    subtypes = _list(a.get("subtype"), "subtype", _string)
    services = _list(a.get("service"), "service", _string)
    tiers_arg = a["visibility"]
    tiers = list(TIERS) if tiers_arg == "all" else _list(tiers_arg, "visibility", _string)
    if any(t not in TIERS for t in tiers or ()):
        raise R.InvalidArgumentError(
            "visibility: a tier, a list of tiers, or all", field="visibility", reason="bad-visibility"
        )
    where = compile_where(a.get("where"), relation=True)
    include_entities = a["includeEntities"]
    limit = rows.integer(a["limit"], "limit", 1, 1000)
    offset = rows.integer(a["offset"], "offset", 0, 10000)
    fingerprint = {k: v for k, v in a.items() if k not in ("limit", "offset", "cursor", "includeEntities")}
    if a.get("cursor") is not None:
        generation, offset = decode_cursor(a["cursor"], "related", fingerprint)
        view = view.at(min(generation, view.generation))
    anchor_id = None
    if anchors:
        anchor_id, _ = K.resolve(a[anchors[0]], anchors[0])
        if view.entity(anchor_id) is None:
            raise R.EntityNotFoundError(f"{anchors[0]}: no entity {a[anchors[0]]!r}", id=a[anchors[0]])
        prefix = K.adjacency_prefix(anchor_id)
        wanted = {"node": K.OUT | K.IN, "from": K.OUT, "to": K.IN}[anchors[0]]
        edge_keys = [
            K.relation_key(K.relation_id_of_adjacency(key))
            for key, raw in view.scan(prefix, K.prefix_end(prefix))
            if rows.unpack(raw) & wanted
        ]
        edges: Iterable[tuple[bytes, int, bytes]] = (
            (key, *found) for key, found in ((key, E.version(view, key)) for key in edge_keys) if found is not None
        )
    else:
        edges = view.scan_versions(K.RELATION, b"s")
    filtered = not (
        verbs is None and subtypes is None and services is None and a.get("where") is None and tiers_arg == "all"
    )
    kept: list[tuple[dict[str, Any], bytes, int, bytes]] = []  # each row decoded to be filtered, and its version
    for key, generation, raw in edges:
        row = rows.unpack(raw)
        if (
            (verbs is None or row["type"] in verbs)
            and (subtypes is None or row.get("subtype") in subtypes)
            and (services is None or row.get("service") in services)
            and (tiers is None or row.get("visibility", "public") in tiers)
            and where.matches(row)
        ):
            kept.append((row, key, generation, raw))
    page = kept[offset : offset + limit]
    more = offset + limit < len(kept)
    answer: dict[str, Any] = {
        "relations": [E.answer(view, *stored) for _, *stored in page],
        "brain": view.brain,
        "generation": view.generation,
        "cursor": encode_cursor("related", fingerprint, view.generation, offset + limit) if more else None,
        "hasMore": more,
    }
    if anchors and not filtered:
        answer["total"] = len(kept)  # counted from the adjacency alone
    if include_entities:
        far: dict[str, Any] = {}
        for r, *_ in page:
            for end in (r["from"], r["to"]):
                if end != anchor_id and end not in far:
                    entity = E.lookup(view, K.entity_key(end))
                    if entity is not None:
                        far[end] = entity
        answer["entities"] = far
    return answer


# -- explain and fields ------------------------------------------------------------------------------------


@door("explain", embeds=S.query_texts)
def explain(snap: Snapshot, id_: Any, args: dict[str, Any]) -> dict[str, Any]:
    """The plan find would run for this query, without running it: legs, indexes, estimates, order."""
    generation = snap.generation
    try:
        q = Query(args)
    except R.Refusal as refusal:
        if isinstance(refusal, R.InvalidArgumentError):
            raise  # argument validation is explain's own answer
        return {"legs": [], "order": "store", "wouldRefuse": refusal.to_wire(), "generation": generation}
    with snap.projections() as proj:
        candidates, used = _narrow(proj, q)
        generation = proj.stamp
    legs: list[dict[str, Any]] = [
        {
            "leg": "metadata",
            "servable": True,
            "index": "metadata postings" + (f" ({', '.join(used)})" if used else ""),
            "estimatedCandidates": len(candidates),
        }
    ]
    if "text" in q.legs:
        legs.append({"leg": "text", "servable": True, "index": "word postings (BM25)"})
    if q.connected is not None:
        legs.append({"leg": "graph", "servable": True, "index": "graph adjacency"})
    if q.semantic is not None:
        legs.append({"leg": "semantic", "servable": True, "index": "vector index (cosine)"})
    elif "semantic" in q.legs:
        legs.append(
            {"leg": "semantic", "servable": False, "reason": q.legs["semantic"]["reason"], "index": "vector index"}
        )
    if q.purpose is not None:
        legs.append({"leg": "purpose", "servable": True, "index": "vector index (cosine to the purpose)"})
    if q.shapes.rerank:
        legs.append({"leg": "rerank", "servable": True, "index": "rows (exact cosine, word proximity)"})
    if q.order_by:
        legs.append({"leg": "order", "servable": True, "index": f"order column {q.order_by}"})
    order = "key" if q.order_by else "score" if q.ranked else "store"
    answer: dict[str, Any] = {"legs": legs, "order": order, "generation": generation}
    if "text" in q.legs and q.semantic is not None:
        answer["fusion"] = q.fusion.describe()
    return answer


@door("fields")
def fields(snap: Snapshot, id_: Any, a: dict[str, Any]) -> dict[str, Any]:
    """Which metadata fields exist, how many rows hold each, of what kinds, and their common values."""
    kind_filter = rows.noun(a["type"]) if a.get("type") is not None else None
    prefix = _string(a["prefix"], "prefix") if a.get("prefix") is not None else ""
    top_n = rows.integer(a["values"], "values", 0, 50)
    limit = rows.integer(a["limit"], "limit", 1, 10000)
    with snap.projections() as proj:
        within = set(proj.posting("type", kind_filter)) if kind_filter else None
        out = []
        for path in sorted(proj.postings):
            if path in ("type", "subtype", "service", "visibility", "key", "hasVector", "createdBy", "updatedBy"):
                continue
            if not path.startswith(prefix):
                continue
            values = proj.postings[path]
            counted = [(key, len(p) if within is None else len(within.intersection(p))) for key, p in values.items()]
            counted = [(key, n) for key, n in counted if n]
            if not counted:
                continue
            holders = set().union(*(values[key] for key, _ in counted))
            if within is not None:
                holders &= within
            entry: dict[str, Any] = {
                "path": path,
                "count": len(holders),
                "kinds": sorted({key[0] for key, _ in counted}),
                "distinct": len(counted),
            }
            if top_n:
                entry["top"] = [
                    {"value": key[1], "count": n}
                    for key, n in sorted(counted, key=lambda kn: (-kn[1], str(kn[0][1])))[:top_n]
                ]
            out.append(entry)
            if len(out) == limit:
                break
        generation = proj.stamp
    return {"fields": out, "generation": generation}
