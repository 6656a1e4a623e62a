"""The graph's adjacencies: which (relation, far entity) pairs leave a node, at the head or at a pinned
generation. The walks over them, find's ``connected`` leg and the ``traverse`` door are
``brainy/doors/traverse.py``.

Two adjacencies answer the same question, "which (relation, far entity) pairs leave this node this
way": :class:`Graph`, the projection held at the durable head (DESIGN.md: "graph adjacency, out and
in per node"), and :class:`StoredAdjacency`, which reads one generation's versioned adjacency keys
(docs/store-format.md, "Rows and keys") for a snapshot pinned in the past. The walks run on either,
so a pinned walk is slower, never different.

The head's graph is built on the first walk after an open, from the relation identity keys (``q``:
from, to and verb in the key, the relation id in the value), so no relation row is decoded; from
then on the projection follower moves it with every durable commit, beside the other projections.
It is not persisted: a reopen rebuilds it on the first walk.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import msgpack

from brainy.index.projections import Projections
from brainy.index.snapshot import Snapshot
from brainy.store import keys as K
from brainy.store import rows

Step = Callable[[str], Iterable[tuple[str, str]]]  # node id -> (relation id, far entity id) pairs


# -- the adjacencies -----------------------------------------------------------------------------------


class Graph:
    """The head's adjacency: per entity id, per verb, relation id -> far entity id, out and in; and the
    entity id -> dense int map find intersects with. A self-loop is in both tables of its node."""

    __slots__ = ("out", "into", "dense")

    def __init__(self) -> None:
        self.out: dict[str, dict[str, dict[str, str]]] = {}
        self.into: dict[str, dict[str, dict[str, str]]] = {}
        self.dense: dict[str, int] = {}

    @classmethod
    def build(cls, proj: Projections, view: Snapshot) -> Graph:
        """The graph at ``view``'s generation (the projections' stamp): entities from the id map, edges
        from the relation identity keys, so no row is decoded."""
        graph = cls()
        ids = proj.ids
        graph.dense = {ids[d]: d for d in proj.all}
        to_str, unpack = _uuid_text, msgpack.unpackb
        for key, raw in view.scan(K.IDENTITY, K.prefix_end(K.IDENTITY)):
            a, b = to_str(key[1:17]), to_str(key[17:33])
            verb = key[33 : key.index(0, 33)].decode("utf-8")
            graph._link(unpack(raw, raw=False), a, b, verb)
        return graph

    def entity(self, before: dict[str, Any] | None, after: dict[str, Any] | None) -> None:
        if after is not None:
            self.dense[after["id"]] = after["denseInt"]
        elif before is not None:
            self.dense.pop(before["id"], None)

    def relation(self, before: dict[str, Any] | None, after: dict[str, Any] | None) -> None:
        if before is not None:
            self._unlink(before["id"], before["from"], before["to"], before["type"])
        if after is not None:
            self._link(after["id"], after["from"], after["to"], after["type"])

    def _link(self, rid: str, a: str, b: str, verb: str) -> None:
        self.out.setdefault(a, {}).setdefault(verb, {})[rid] = b
        self.into.setdefault(b, {}).setdefault(verb, {})[rid] = a

    def _unlink(self, rid: str, a: str, b: str, verb: str) -> None:
        for table, node in ((self.out, a), (self.into, b)):
            by_verb = table.get(node)
            group = by_verb.get(verb) if by_verb else None
            if group is not None and group.pop(rid, None) is not None and not group:
                del by_verb[verb]  # type: ignore[union-attr]
                if not by_verb:
                    del table[node]

    def exists(self, node: str) -> bool:
        return node in self.dense

    def steps(self, direction: int, verbs: list[str] | None) -> Step:
        tables = [t for bit, t in ((K.OUT, self.out), (K.IN, self.into)) if direction & bit]

        def step(node: str) -> Iterator[tuple[str, str]]:
            for table in tables:
                by_verb = table.get(node)
                if not by_verb:
                    continue
                for group in by_verb.values() if verbs is None else (by_verb.get(v) for v in verbs):
                    if group:
                        yield from group.items()

        return step


def _uuid_text(raw: bytes) -> str:
    return str(uuid.UUID(bytes=raw))


class StoredAdjacency:
    """One generation's adjacency read from the store's versioned keys: a prefix scan per node, and the
    relation row of each edge for its far end and verb (the adjacency value holds only the direction)."""

    def __init__(self, view: Snapshot) -> None:
        self._view = view
        self._edges: dict[str, tuple[str, str, str]] = {}  # relation id -> (from, to, verb), read once

    def exists(self, node: str) -> bool:
        return self._view.lookup(K.entity_key(node)) is not None

    def _edge(self, rid: str) -> tuple[str, str, str]:
        edge = self._edges.get(rid)
        if edge is None:
            row = self._view.relation(rid)
            assert row is not None, f"adjacency names relation {rid} that has no row"
            edge = self._edges[rid] = (row["from"], row["to"], row["type"])
        return edge

    def steps(self, direction: int, verbs: list[str] | None) -> Step:
        view = self._view

        def step(node: str) -> Iterator[tuple[str, str]]:
            prefix = K.adjacency_prefix(node)
            for key, raw in view.scan(prefix, K.prefix_end(prefix)):
                if not rows.unpack(raw) & direction:
                    continue
                rid = K.relation_id_of_adjacency(key)
                a, b, verb = self._edge(rid)
                if verbs is not None and verb not in verbs:
                    continue
                if direction & K.OUT and a == node:
                    yield rid, b
                if direction & K.IN and b == node:
                    yield rid, a

        return step


def graph_at_head(proj: Projections, view: Snapshot) -> Graph:
    """The head's graph, built on the first walk; the caller holds the projections (and so the lock the
    follower moves them under)."""
    if proj.graph is None:
        proj.graph = Graph.build(proj, view)
    return proj.graph
