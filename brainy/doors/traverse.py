"""The graph walk: the bounded breadth-first (or depth-first) walk over an adjacency
(``brainy/index/graph.py``), the ``traverse`` door, and find's ``connected`` leg (door catalogue 4.1,
4.2 and 5.1).

Every walk visits a node once (cycles and self-loops end there), is bounded by ``depth`` (1 to 6),
and ``traverse`` also by ``limit`` nodes: a walk that reaches more answers the first ``limit`` of them
and ``truncated: true`` (DOORS 5.1 names no refusal for it).
"""

from __future__ import annotations

from array import array
from collections.abc import Callable
from typing import Any

from brainy._speedups import postings as P
from brainy.contract import refusals as R
from brainy.doors.registry import door
from brainy.index.graph import Graph, Step, StoredAdjacency, graph_at_head
from brainy.index.projections import TYPECODE
from brainy.index.snapshot import Snapshot
from brainy.index.where import compile_where
from brainy.store import keys as K
from brainy.store import rows

MAX_DEPTH = 6
MAX_NODES = 10000
DIRECTIONS = {"out": K.OUT, "in": K.IN, "both": K.OUT | K.IN}


# -- arguments -----------------------------------------------------------------------------------------


def _ids(value: Any, field: str) -> list[str]:
    items = value if isinstance(value, list) else [value]
    if not items:
        raise R.InvalidArgumentError(f"{field}: name at least one entity", field=field, reason="missing")
    return list(
        dict.fromkeys(
            K.resolve(item, f"{field}[{i}]" if isinstance(value, list) else field)[0] for i, item in enumerate(items)
        )
    )


def _verbs(value: Any, field: str) -> list[str] | None:
    return rows.listed(value, field, rows.verb)


def _direction(value: Any, field: str) -> int:
    if not isinstance(value, str) or value not in DIRECTIONS:  # a string first: an object is unhashable
        raise R.InvalidArgumentError(f"{field}: out, in or both", field=field, reason="bad-operand")
    return DIRECTIONS[value]


def _check_anchors(adjacency: Graph | StoredAdjacency, anchors: list[str], given: dict[str, str], field: str) -> None:
    for anchor in anchors:
        if not adjacency.exists(anchor):
            raise R.EntityNotFoundError(
                f"{field}: no entity {given.get(anchor, anchor)!r}", id=given.get(anchor, anchor)
            )


class Connected:
    """find's ``connected``, checked: one walk per anchor field given (``from`` out, ``to`` in, ``node``
    along ``direction``), every one of which a hit must be reachable by."""

    FIELDS = frozenset(("from", "to", "node", "via", "depth", "direction"))

    def __init__(self, value: Any) -> None:
        if not isinstance(value, dict):
            raise R.InvalidArgumentError("connected: must be an object", field="connected", reason="wrong-type")
        unknown = sorted(set(value) - self.FIELDS)
        if unknown:
            raise R.InvalidArgumentError(
                f"connected.{unknown[0]}: not a field of connected",
                field=f"connected.{unknown[0]}",
                reason="unknown-argument",
            )
        self.walks: list[tuple[str, list[str], int]] = []  # (field, anchor ids, direction)
        self.given: dict[str, str] = {}
        for name in ("from", "to", "node"):
            if value.get(name) is not None:
                anchors = _ids(value[name], f"connected.{name}")
                raw = value[name] if isinstance(value[name], list) else [value[name]]
                self.given.update(zip(anchors, raw))
                bits = (
                    K.OUT
                    if name == "from"
                    else K.IN
                    if name == "to"
                    else _direction(value.get("direction", "both"), "connected.direction")
                )
                self.walks.append((name, anchors, bits))
        if not self.walks:
            raise R.InvalidArgumentError("connected: give from, to or node", field="connected", reason="missing")
        if value.get("direction") is not None and value.get("node") is None:
            raise R.InvalidArgumentError(
                "connected.direction: steers the node walk; from walks out and to in",
                field="connected.direction",
                reason="bad-operand",
            )
        self.verbs = _verbs(value.get("via"), "connected.via")
        self.depth = rows.integer(value.get("depth", 1), "connected.depth", 1, MAX_DEPTH)


# -- the walks -----------------------------------------------------------------------------------------


def reachable(adjacency: Graph | StoredAdjacency, connected: Connected) -> dict[str, int]:
    """Entity id -> hops, for every entity reachable by a walk of 1 to ``depth`` hops from the anchors of
    every walk ``connected`` names (the most hops of any walk). An anchor is in it only when a walk
    comes back to it (a cycle or a self-loop)."""
    found: dict[str, int] | None = None
    for field, anchors, direction in connected.walks:
        _check_anchors(adjacency, anchors, connected.given, f"connected.{field}")
        step = adjacency.steps(direction, connected.verbs)
        hops: dict[str, int] = {}
        frontier = anchors
        for d in range(1, connected.depth + 1):
            reached = []
            for node in frontier:
                for _, far in step(node):
                    if far not in hops:
                        hops[far] = d
                        reached.append(far)
            if not reached:
                break
            frontier = reached
        found = hops if found is None else {n: max(h, hops[n]) for n, h in found.items() if n in hops}
    assert found is not None
    return found


def within(candidates: array, hops: dict[str, int], dense: dict[str, int]) -> array:
    """The candidates (sorted dense ints) that the walk reached: the graph leg as a filter."""
    reached = array(TYPECODE, sorted(dense[node] for node in hops if node in dense))
    return P.intersect_many([candidates, reached])


def graph_weight(fusion: Any) -> float:
    """``fusion.weights.graph`` (0 when absent): above 0 the graph leg ranks instead of filtering."""
    weights = fusion.get("weights") if isinstance(fusion, dict) else None
    weight = weights.get("graph") if isinstance(weights, dict) else None
    if weight is None:
        return 0.0
    if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not weight >= 0:
        raise R.InvalidArgumentError(
            "fusion.weights.graph: a number, 0 or more", field="fusion.weights.graph", reason="wrong-type"
        )
    return float(weight)


def graph_signal(hops: dict[str, int], dense_of: Callable[[str], int | None], candidates: set[int]) -> dict[int, float]:
    """The graph leg as a ranked signal (DOORS 4.2, ``fusion.weights.graph > 0``): dense int -> 1/hops,
    for the candidates the walk reached. A fusion of legs weighs it by ``fusion.weights.graph``."""
    out: dict[int, float] = {}
    for node, h in hops.items():
        dense = dense_of(node)
        if dense is not None and dense in candidates:
            out[dense] = 1.0 / h
    return out


class Walk:
    """What a traverse reached: nodes in answer order with their hops, the relation and the node each
    was reached from (None for an anchor), and whether ``limit`` cut it short."""

    __slots__ = ("order", "hops", "via", "parent", "truncated")

    def __init__(self) -> None:
        self.order: list[str] = []
        self.hops: dict[str, int] = {}
        self.via: dict[str, str | None] = {}
        self.parent: dict[str, str | None] = {}
        self.truncated = False

    def path(self, node: str) -> list[str]:
        out = [node]
        while self.parent[out[-1]] is not None:
            out.append(self.parent[out[-1]])  # type: ignore[arg-type]
        return out[::-1]


def breadth_first(anchors: list[str], step: Step, depth: int, keep: Callable[[str], bool], limit: int) -> Walk:
    """Level by level: each level's new nodes in id order, each reached by its smallest relation id from
    the level before, so the answer is the same whichever adjacency served it. Nodes ``keep`` refuses
    are neither listed nor expanded."""
    walk = Walk()
    seen = set(anchors)
    for a in anchors[:limit]:
        walk.order.append(a)
        walk.hops[a], walk.via[a], walk.parent[a] = 0, None, None
    walk.truncated = len(anchors) > limit
    frontier = list(anchors)
    for d in range(1, depth + 1):
        if walk.truncated:
            break
        reached: dict[str, tuple[str, str]] = {}
        for node in frontier:
            for rid, far in step(node):
                if far in seen:
                    continue
                best = reached.get(far)
                if best is None or rid < best[0]:
                    reached[far] = (rid, node)
        level = []
        for far in sorted(reached):
            seen.add(far)
            if keep(far):
                level.append(far)
        if len(walk.order) + len(level) > limit:
            level = level[: limit - len(walk.order)]
            walk.truncated = True
        for far in level:
            walk.order.append(far)
            walk.hops[far] = d
            walk.via[far], walk.parent[far] = reached[far]
        frontier = level
        if not frontier:
            break
    return walk


def depth_first(anchors: list[str], step: Step, depth: int, keep: Callable[[str], bool], limit: int) -> Walk:
    """Depth-first, each node's relations in relation-id order; nodes listed in the order first reached.
    A node reached again by a shorter walk is expanded again (so every node within ``depth`` hops is
    found and carries its fewest hops), which bounds the work at ``depth`` expansions a node."""
    walk = Walk()
    refused: set[str] = set()
    for a in anchors[:limit]:
        walk.order.append(a)
        walk.hops[a], walk.via[a], walk.parent[a] = 0, None, None
    walk.truncated = len(anchors) > limit
    stack = [(a, 0) for a in reversed(walk.order)]
    while stack:
        node, d = stack.pop()
        if d > walk.hops[node] or d == depth:
            continue  # reached since by a shorter walk, or as deep as the walk goes
        children = []
        for rid, far in sorted(step(node)):
            if far in refused or walk.hops.get(far, depth + 1) <= d + 1:
                continue
            if far not in walk.hops:
                if not keep(far):
                    refused.add(far)
                    continue
                if len(walk.order) == limit:
                    walk.truncated = True
                    continue
                walk.order.append(far)
            walk.hops[far], walk.via[far], walk.parent[far] = d + 1, rid, node
            children.append((far, d + 1))
        stack.extend(reversed(children))
    return walk


# -- the traverse door ---------------------------------------------------------------------------------


@door("traverse")
def traverse(snap: Snapshot, id_: Any, a: dict[str, Any]) -> dict[str, Any]:
    """Walk up to ``depth`` hops from one or more entities; nodes with their hops and the relation that
    reached each, the relations themselves, and optionally the entities and the paths."""
    anchors = _ids(a["from"], "from")
    given = dict(zip(anchors, a["from"] if isinstance(a["from"], list) else [a["from"]]))
    direction = _direction(a["direction"], "direction")
    verbs = _verbs(a.get("via"), "via")
    depth = rows.integer(a["depth"], "depth", 1, MAX_DEPTH)
    if a["strategy"] not in ("bfs", "dfs"):
        raise R.InvalidArgumentError("strategy: bfs or dfs", field="strategy", reason="bad-operand")
    types = rows.listed(a.get("type"), "type", rows.noun)
    where = compile_where(a.get("where"))
    limit = rows.integer(a["limit"], "limit", 1, MAX_NODES)
    view = snap
    entities: dict[str, dict[str, Any]] = {}

    def row_of(node: str) -> dict[str, Any]:
        row = entities.get(node)
        if row is None:
            row = entities[node] = view.entity(node)  # type: ignore[assignment]
            assert row is not None, f"the adjacency names entity {node} that has no row"
        return row

    filtered = types is not None or not where.matches_all
    keep = (
        (lambda node: (types is None or row_of(node)["type"] in types) and where.matches(row_of(node)))
        if filtered
        else (lambda node: True)
    )
    walker = depth_first if a["strategy"] == "dfs" else breadth_first
    if snap.at_head:
        with snap.projections() as proj:
            view = snap.at(proj.stamp)
            graph = graph_at_head(proj, view)
            _check_anchors(graph, anchors, given, "from")
            # walked under the hold: the follower moves this graph when a commit becomes durable
            walk = walker(anchors, graph.steps(direction, verbs), depth, keep, limit)
    else:
        stored = StoredAdjacency(snap)
        _check_anchors(stored, anchors, given, "from")
        walk = walker(anchors, stored.steps(direction, verbs), depth, keep, limit)
    nodes = []
    for node in walk.order:
        entry: dict[str, Any] = {"id": node, "depth": walk.hops[node], "via": walk.via[node]}
        if a["includeEntities"]:
            entry["entity"] = rows.public_view(row_of(node))
        nodes.append(entry)
    relations = []
    for node in walk.order:
        rid = walk.via[node]
        if rid is not None:
            row = view.relation(rid)
            assert row is not None, f"the adjacency names relation {rid} that has no row"
            relations.append(rows.public_view(row))
    answer: dict[str, Any] = {
        "nodes": nodes,
        "relations": relations,
        "truncated": walk.truncated,
        "generation": view.generation,
    }
    if a["includePaths"]:
        answer["paths"] = [walk.path(node) for node in walk.order]
    return answer
