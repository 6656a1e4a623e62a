"""The query doors: find, related, explain, fields (door catalogue, sections 4 and 5.1).

``find`` plans from the projections: the metadata leg narrows candidates by
intersecting postings (type, subtype, service, visibility, the where's
equalities), the rest of the where is evaluated on the rows that survive, the
text leg scores with BM25 over word postings, and the page is cut in store
order, score order or the orderBy column. A find pinned at a past generation
(asOf, or a cursor from an older head) reads that generation's rows instead,
with the same evaluator: slower, never different. ``connected`` keeps only the
entities the graph walk reaches (``brainy/engine/graph.py``), or ranks them by
1/hops when ``fusion.weights.graph > 0``. The aggregated shape (``aggregate``)
is answered by ``brainy/engine/aggregates.py`` over the rows the metadata leg
selects. Legs this release cannot serve (vectors, ranked shapes) refuse by name
in an explicit mode and are left out loudly in ``auto``; nothing is approximated.
"""

from __future__ import annotations

import math
from array import array
from typing import Any, Callable, Iterable

from brainy._speedups import postings as P
from brainy.contract import refusals as R
from brainy.engine import aggregates
from brainy.engine import graph as G
from brainy.engine import keys as K
from brainy.engine import rows
from brainy.engine.projections import TYPECODE, WORD, Projections
from brainy.engine.cursors import decode_cursor, encode_cursor
from brainy.engine.registry import door
from brainy.engine.snapshot import Snapshot
from brainy.engine.where import Predicate, compile_where, kind_of

MODES = ("auto", "text", "semantic", "vector", "hybrid", "metadata", "graph")
TIERS = ("public", "internal", "system")
BM25_K1, BM25_B = 1.2, 0.75
NO_VECTORS = "no vector index is attached in this release; the semantic leg arrives in 0.5.0"


_list = rows.listed


def _string(value: Any, field: str) -> str:
    if not isinstance(value, str):
        raise R.InvalidArgumentError(f"{field}: must be a string", field=field, reason="wrong-type")
    return value


class Query:
    """A checked FindQuery (its argument names and scalar types checked against the contract before)."""

    def __init__(self, a: dict[str, Any]) -> None:
        self.args = a
        self.mode = a["searchMode"]
        if self.mode not in MODES:
            raise R.InvalidArgumentError(f"searchMode: one of {MODES}", field="searchMode", reason="bad-operand")
        self.text = a.get("query")
        if self.text is not None:
            _string(self.text, "query")
        if self.mode == "metadata" and (self.text is not None or a.get("vector") is not None):
            raise R.InvalidArgumentError("searchMode metadata takes no query or vector", field="searchMode",
                                         reason="bad-operand")
        self.types = _list(a.get("type"), "type", lambda v, f: rows.noun(v, f))
        self.subtypes = _list(a.get("subtype"), "subtype", _string)
        self.services = _list(a.get("service"), "service", _string)
        tiers = a["visibility"]
        self.tiers = list(TIERS) if tiers == "all" else _list(tiers, "visibility", _string)
        if any(t not in TIERS for t in self.tiers or ()):
            raise R.InvalidArgumentError("visibility: a tier, a list of tiers, or all", field="visibility",
                                         reason="bad-visibility")
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
            raise R.InvalidArgumentError("searchMode graph walks from connected: give it", field="connected",
                                         reason="missing")
        self.graph_weight = G.graph_weight(a.get("fusion"))
        self.legs = self._legs()

    def _legs(self) -> dict[str, dict[str, Any]]:
        """Which legs run: the refusals of explicit modes, and the loud omissions of auto."""
        a, mode = self.args, self.mode
        legs: dict[str, dict[str, Any]] = {"metadata": {"served": True}}
        if a.get("vector") is not None or a.get("near") is not None or mode in ("semantic", "vector", "hybrid"):
            if mode in ("semantic", "vector", "hybrid") or a.get("vector") is not None or a.get("near") is not None:
                raise R.IndexNotAttachedError(NO_VECTORS, absent="vectors", servedBy="0.5.0")
        if self.connected is not None:
            legs["graph"] = {"served": True}
        for shape in ("purpose", "rerank", "passages", "fusion", "threshold"):
            if shape == "fusion" and self.graph_ranked and self.text is None:
                continue  # the graph leg ranked alone needs no fusion of legs
            if a.get(shape) not in (None, False):
                raise R.IndexNotAttachedError(f"{shape} needs the ranked shapes, which arrive in 0.5.0",
                                              absent=shape, servedBy="0.5.0")
        if self.text is not None:
            legs["text"] = {"served": True}
            if mode == "auto":
                legs["semantic"] = {"served": False, "reason": NO_VECTORS}
        return legs

    @property
    def graph_ranked(self) -> bool:
        """The graph leg adds 1/hops as a ranked signal instead of filtering (DOORS 4.2)."""
        return self.connected is not None and self.graph_weight > 0

    @property
    def ranked(self) -> bool:
        return "text" in self.legs or self.graph_ranked

    def fingerprint(self) -> dict[str, Any]:
        return {k: v for k, v in self.args.items() if k not in ("limit", "offset", "cursor", "explain",
                                                                 "includeData", "includeVector")}


# -- candidates --------------------------------------------------------------------------------------

def _union(lists: Iterable[array]) -> array:
    lists = [x for x in lists if len(x)]
    if len(lists) == 1:
        return lists[0]
    return P.union_many(lists) if lists else array(TYPECODE)


def _narrow(proj: Projections, q: Query) -> tuple[array, list[str]]:
    """The candidate dense ints the postings allow, and the postings read (for explain)."""
    parts: list[array] = []
    used: list[str] = []
    for path, values in (("type", q.types), ("subtype", q.subtypes), ("service", q.services),
                         ("visibility", q.tiers)):
        if values is not None:
            parts.append(_union(proj.posting(path, v) for v in values))
            used.append(path)
    for eq in q.where.equalities():
        parts.append(_union(proj.posting(eq.path, v) for v in eq.values))
        used.append(eq.path)
    candidates = P.intersect_many(parts) if parts else proj.all
    if q.exclude_vfs:
        vfs = _union(posting for (kind, value), posting in proj.postings.get("subtype", {}).items()
                     if kind == "string" and value.startswith("vfs."))
        candidates = P.difference(candidates, vfs)
    return candidates, used


def _row_allowed(q: Query, row: dict[str, Any]) -> bool:
    """The metadata leg on a row, for a find that reads rows instead of postings (a pinned generation)."""
    return ((q.types is None or row["type"] in q.types)
            and (q.subtypes is None or row.get("subtype") in q.subtypes)
            and (q.services is None or row.get("service") in q.services)
            and (q.tiers is None or row.get("visibility", "public") in q.tiers)
            and not (q.exclude_vfs and str(row.get("subtype") or "").startswith("vfs."))
            and q.where.matches(row))


# -- the text leg --------------------------------------------------------------------------------------

def _bm25(proj: Projections, text: str, candidates: set[int] | None) -> tuple[dict[int, float],
                                                                             dict[int, list[str]]]:
    """BM25 scores of the candidates (None: every entity) holding any of the text's words."""
    terms = list(dict.fromkeys(WORD.findall(text.lower())))
    n = max(1, len(proj.lengths))
    average = (proj.total_length / n) or 1.0
    scores: dict[int, float] = {}
    matched: dict[int, list[str]] = {}
    for term in terms:
        postings = proj.terms.get(term)
        if not postings:
            continue
        idf = math.log(1 + (n - len(postings) + 0.5) / (len(postings) + 0.5))
        for dense, tf in postings.items():
            if candidates is not None and dense not in candidates:
                continue
            length = proj.lengths.get(dense, 0)
            scores[dense] = scores.get(dense, 0.0) + idf * tf * (BM25_K1 + 1) / (
                tf + BM25_K1 * (1 - BM25_B + BM25_B * length / average))
            matched.setdefault(dense, []).append(term)
    return scores, matched


# -- order ---------------------------------------------------------------------------------------------

_KIND_RANK = {"number": 0, "string": 1, "boolean": 2, "null": 3}


def _order_key(value: Any, present: bool) -> tuple[int, int, Any]:
    if not present:
        return (1, 0, 0)
    kind = kind_of(value)
    return (0, _KIND_RANK.get(kind, 4), value if kind in ("number", "string", "boolean") else 0)


def _sorted(dense_ints: list[int], value_of: Callable[[int], tuple[bool, Any]], id_of: Callable[[int], str],
            descending: bool) -> list[int]:
    """The key's value order; rows missing the key last (whatever the direction); ties on id ascending."""
    present, missing = [], []
    for d in dense_ints:
        has, value = value_of(d)
        (present if has else missing).append((d, value))
    present.sort(key=lambda dv: id_of(dv[0]))
    present.sort(key=lambda dv: _order_key(dv[1], True)[1:], reverse=descending)
    missing.sort(key=lambda dv: id_of(dv[0]))
    return [d for d, _ in present] + [d for d, _ in missing]


def _column_value(row: dict[str, Any], path: str) -> tuple[bool, Any]:
    if path in ("id", "key", "type", "subtype", "service", "visibility", "createdAt", "updatedAt", "createdBy",
                "updatedBy", "hasVector", "generation", "denseInt"):
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

@door("find")
def find(snap: Snapshot, id_: Any, args: dict[str, Any]) -> dict[str, Any]:
    q = Query(args)
    if q.args.get("cursor") is not None:
        generation, position = decode_cursor(q.args["cursor"], "find", q.fingerprint())
        q.offset = position
        if generation != snap.head:
            snap = snap.at(generation)
    if q.args.get("aggregate") is not None:
        return _find_aggregated(q, snap)
    if not snap.at_head:
        return _find_by_rows(q, snap)
    return _find_by_projections(q, snap)


def _page(q: Query, view: Snapshot, ordered: list[int], rows_of: Callable[[int], dict[str, Any]],
          scores: dict[int, float] | None, matched: dict[int, list[str]], total: int | None,
          cost: dict[str, int]) -> dict[str, Any]:
    window = ordered[q.offset:q.offset + q.limit]
    results = []
    for dense in window:
        row = rows_of(dense)
        hit: dict[str, Any] = {"id": row["id"], "score": scores.get(dense) if scores is not None else None,
                               "entity": rows.public_view(row, q.include_vector, q.include_data)}
        if "text" in q.legs:
            hit["matchSource"] = "text"
            hit["textMatches"] = matched.get(dense, [])
        elif q.connected is not None:
            hit["matchSource"] = "graph"
        if q.explain and scores is not None:
            leg = "text" if "text" in q.legs else "graph"
            hit["explanation"] = {leg: scores.get(dense), "fused": scores.get(dense)}
        results.append(hit)
    more = q.offset + q.limit < len(ordered)
    answer: dict[str, Any] = {
        "results": results, "brain": view.brain, "generation": view.generation,
        "cursor": encode_cursor("find", q.fingerprint(), view.generation, q.offset + q.limit) if more else None,
        "hasMore": more, "legs": q.legs, "cost": cost}
    if total is not None:
        answer["total"] = total
    return answer


def _find_by_projections(q: Query, snap: Snapshot) -> dict[str, Any]:
    with snap.projections() as proj:
        candidates, _ = _narrow(proj, q)
        generation = proj.stamp
        ids = proj.ids
        residual = q.where.residual()
        needs_rows = not residual.matches_all
        scores = matched = None
        if q.connected is not None:
            graph = G.graph_at_head(proj, snap.at(proj.stamp))
            hops = G.reachable(graph, q.connected)
            candidates = G.within(candidates, hops, graph.dense)
            if q.graph_ranked:
                scores, matched = G.graph_signal(hops, graph.dense.get, set(candidates)), {}
        if "text" in q.legs:
            scores, matched = _bm25(proj, q.text or "", None if candidates is proj.all else set(candidates))
        columns = dict(proj.columns.get(q.order_by) or {}) if q.order_by else None
        candidates = array(TYPECODE, candidates)  # a copy: later commits move the live postings
    id_list = ids  # entries are never removed or changed (projections.py), so this reads safely unlocked
    view = snap.at(generation)
    cache: dict[int, dict[str, Any]] = {}
    read = 0

    def row_of(dense: int) -> dict[str, Any]:
        nonlocal read
        row = cache.get(dense)
        if row is None:
            row = view.entity(id_list[dense])
            assert row is not None, f"projection names dense int {dense} that has no row"
            cache[dense] = row
            read += 1
        return row

    kept = sorted(scores) if scores is not None else list(candidates)
    if needs_rows:
        kept = [d for d in kept if residual.matches(row_of(d))]
    if scores is not None and not q.order_by:
        kept.sort(key=lambda d: (-scores[d], id_list[d]))
    elif q.order_by:  # every scalar path has a column; a path with none is missing from every row
        column = columns or {}
        kept = _sorted(kept, lambda d: (d in column, column.get(d)), id_list.__getitem__, q.descending)
    cost = {"segments": 1, "candidates": len(candidates), "rowsRead": 0}
    answer = _page(q, view, kept, row_of, scores, matched or {}, None if q.ranked else len(kept), cost)
    cost["rowsRead"] = read
    return answer


def _find_by_rows(q: Query, view: Snapshot) -> dict[str, Any]:
    """find at a pinned past generation: every row of that generation through the same evaluator."""
    found: dict[int, dict[str, Any]] = {}
    scanned = 0
    for row in view.entities():
        scanned += 1
        if _row_allowed(q, row):
            found[row["denseInt"]] = row
    scores = matched = None
    if q.connected is not None:
        hops = G.reachable(G.StoredAdjacency(view), q.connected)
        found = {d: row for d, row in found.items() if row["id"] in hops}
        if q.graph_ranked:
            scores, matched = {d: 1.0 / hops[row["id"]] for d, row in found.items()}, {}
    if "text" in q.legs:  # idf over the whole store at that generation, as the live leg scores it
        scores, matched = _bm25(Projections.build(view.entities(), view.generation), q.text or "", set(found))
    kept = sorted(found)
    if scores is not None:
        kept = [d for d in kept if d in scores]
    if scores is not None and not q.order_by:
        kept.sort(key=lambda d: (-scores[d], found[d]["id"]))
    elif q.order_by:
        kept = _sorted(kept, lambda d: _column_value(found[d], q.order_by), lambda d: found[d]["id"], q.descending)
    cost = {"segments": 1, "candidates": scanned, "rowsRead": scanned}
    return _page(q, view, kept, found.__getitem__, scores, matched or {}, None if q.ranked else len(kept),
                 cost)


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
    matching = (row for row in (view.entity(ids[d]) for d in candidates)
                if row is not None and residual.matches(row))
    return aggregates.find_shape(q, view, matching, cost)


# -- related ---------------------------------------------------------------------------------------------

@door("related")
def related(view: Snapshot, id_: Any, a: dict[str, Any]) -> dict[str, Any]:
    """One hop from the graph adjacency, or every relation: relation id ascending on every path."""
    anchors = [k for k in ("node", "from", "to") if a.get(k) is not None]
    if len(anchors) > 1:
        raise R.InvalidArgumentError("give at most one of node, from and to", field=anchors[1],
                                     reason="ambiguous")
    verbs = _list(a.get("type"), "type", lambda v, f: rows.verb(v, f))
    subtypes = _list(a.get("subtype"), "subtype", _string)
    services = _list(a.get("service"), "service", _string)
    tiers_arg = a["visibility"]
    tiers = list(TIERS) if tiers_arg == "all" else _list(tiers_arg, "visibility", _string)
    if any(t not in TIERS for t in tiers or ()):
        raise R.InvalidArgumentError("visibility: a tier, a list of tiers, or all", field="visibility",
                                     reason="bad-visibility")
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
        edge_ids = [K.relation_id_of_adjacency(key) for key, raw in view.scan(prefix, K.prefix_end(prefix))
                    if rows.unpack(raw) & wanted]
        edges: Iterable[dict[str, Any]] = (view.relation(rid) for rid in edge_ids)
    else:
        edges = view.relations()
    filtered = not (verbs is None and subtypes is None and services is None and a.get("where") is None
                    and tiers_arg == "all")
    kept: list[dict[str, Any]] = []
    for row in edges:
        if row is None:
            continue
        if ((verbs is None or row["type"] in verbs) and (subtypes is None or row.get("subtype") in subtypes)
                and (services is None or row.get("service") in services)
                and (tiers is None or row.get("visibility", "public") in tiers) and where.matches(row)):
            kept.append(row)
    page = kept[offset:offset + limit]
    more = offset + limit < len(kept)
    answer: dict[str, Any] = {
        "relations": [rows.public_view(r) for r in page], "brain": view.brain, "generation": view.generation,
        "cursor": encode_cursor("related", fingerprint, view.generation, offset + limit) if more else None,
        "hasMore": more}
    if anchors and not filtered:
        answer["total"] = len(kept)  # counted from the adjacency alone
    if include_entities:
        far: dict[str, Any] = {}
        for r in page:
            for end in (r["from"], r["to"]):
                if end != anchor_id and end not in far:
                    row = view.entity(end)
                    if row is not None:
                        far[end] = rows.public_view(row)
        answer["entities"] = far
    return answer


# -- explain and fields ------------------------------------------------------------------------------------

@door("explain")
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
    legs: list[dict[str, Any]] = [{"leg": "metadata", "servable": True,
                                   "index": "metadata postings" + (f" ({', '.join(used)})" if used else ""),
                                   "estimatedCandidates": len(candidates)}]
    if "text" in q.legs:
        legs.append({"leg": "text", "servable": True, "index": "word postings (BM25)"})
    if q.connected is not None:
        legs.append({"leg": "graph", "servable": True, "index": "graph adjacency"})
    if "semantic" in q.legs:
        legs.append({"leg": "semantic", "servable": False, "reason": q.legs["semantic"]["reason"],
                     "index": "vector index"})
    if q.order_by:
        legs.append({"leg": "order", "servable": True, "index": f"order column {q.order_by}"})
    order = "key" if q.order_by else "score" if q.ranked else "store"
    return {"legs": legs, "order": order, "generation": generation}


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
            entry: dict[str, Any] = {"path": path, "count": len(holders),
                                     "kinds": sorted({key[0] for key, _ in counted}), "distinct": len(counted)}
            if top_n:
                entry["top"] = [{"value": key[1], "count": n}
                                for key, n in sorted(counted, key=lambda kn: (-kn[1], str(kn[0][1])))[:top_n]]
            out.append(entry)
            if len(out) == limit:
                break
        generation = proj.stamp
    return {"fields": out, "generation": generation}
