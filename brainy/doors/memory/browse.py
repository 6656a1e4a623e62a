"""The memory doors that look without asking: read, list, stats (DOORS 9.2).

They read the rows docs/memory.md lays out, through find's metadata leg (postings and order columns) where a
filter or an order is wanted, so nothing here scans the store.
"""

from __future__ import annotations

from typing import Any

from brainy.contract import refusals as R
from brainy.contract.limits import quote
from brainy.doors.cursors import decode_cursor, encode_cursor
from brainy.doors.memory import records as M
from brainy.doors.memory.recall import ANY, leg, narrowing
from brainy.doors.registry import door
from brainy.index.snapshot import Snapshot
from brainy.store import keys as K
from brainy.store import rows
from brainy.store.rows import invalid


def _outgoing(view: Snapshot, id_: str, verb: str, sub: str) -> list[dict[str, Any]]:
    """The relations of type ``verb`` and subtype ``sub`` leaving entity ``id_``, in relation id order."""
    prefix = K.adjacency_prefix(id_)
    found = []
    for key, raw in view.scan(prefix, K.prefix_end(prefix)):
        if rows.unpack(raw) & K.OUT:
            relation = view.relation(K.relation_id_of_adjacency(key))
            if relation is not None and relation["type"] == verb and relation.get("subtype") == sub:
                found.append(relation)
    return found


@door("memory.read")
def read(view: Snapshot, id_: Any, a: dict[str, Any]) -> dict[str, Any]:
    if (a.get("id") is None) == (a.get("path") is None):
        raise invalid("id", "ambiguous" if a.get("id") is not None else "missing", "give exactly one of id and path")
    if a.get("id") is not None:
        row = M.lookup(view, a["id"])
    else:
        path = rows.string(a["path"], "path")
        hits = leg(
            view, {**narrowing(["note"], include_retired=True), "where": {"path": path}}, 1, searchMode="metadata"
        )
        if not hits:
            raise R.RecordNotFoundError(f"path: no memory was written to {quote(path)}", id=path)
        row = view.entity(next(iter(hits)))
        assert row is not None
    citations = []
    for relation in _outgoing(view, row["id"], "references", M.CITE):
        target = view.entity(relation["to"]) or {}
        # evidence as it was named: a key, a file's path (where it stands now), else the entity id
        named = target.get("key") or (
            (target.get("metadata") or {}).get("path") if (target.get("subtype") or "").startswith("vfs.") else None
        )
        cited: dict[str, Any] = {"relationId": relation["id"], "evidence": named or relation["to"]}
        note = (relation.get("metadata") or {}).get("note")
        if note is not None:
            cited["note"] = note
        citations.append(cited)
    supersedes = [r["to"] for r in _outgoing(view, row["id"], "supersedes", M.SUPERSEDE)]
    return {"memory": M.record(row), "citations": citations, "supersedes": supersedes}


@door("memory.list")
def list_(view: Snapshot, id_: Any, a: dict[str, Any]) -> dict[str, Any]:
    """Newest first (``createdAt`` descending, then id), through find's order column; a cursor pins the
    generation of its first page."""
    kinds = M.kinds([a["kind"]], "kind") if a.get("kind") is not None else list(M.KINDS)
    status = a["status"]
    if status not in ("active", "retired", "all"):
        raise invalid("status", "bad-operand", "active, retired or all")
    limit = rows.integer(a["limit"], "limit", 1, 1000)
    scope = rows.string(a["scope"], "scope") if a.get("scope") is not None else ANY
    narrowed = narrowing(
        kinds, scope, [rows.string(a["tag"], "tag")] if a.get("tag") is not None else None, include_retired=True
    )
    where = dict(narrowed.get("where") or {})
    if status != "all":
        where["status"] = status
    if a.get("conversation") is not None:
        where["conversation"] = rows.string(a["conversation"], "conversation")
    if where:
        narrowed["where"] = where
    fingerprint = {k: v for k, v in a.items() if k not in ("limit", "cursor")}
    offset = 0
    if a.get("cursor") is not None:
        generation, offset = decode_cursor(a["cursor"], "memory.list", fingerprint)
        if not isinstance(offset, int) or offset < 0:
            raise R.CursorInvalidError("the cursor does not read")
        if generation != view.generation:
            view = view.at(generation)
    if offset > 10_000:  # find's own reach
        raise invalid("cursor", "out-of-range", "a listing pages at most 10,000 memories deep; narrow it")
    hits = leg(view, narrowed, limit + 1, searchMode="metadata", orderBy="createdAt", order="desc", offset=offset)
    page = list(hits.values())[:limit]
    more = len(hits) > limit
    return {
        "memories": [M.record(row) for _, row in page],
        "cursor": encode_cursor("memory.list", fingerprint, view.generation, offset + limit) if more else None,
        "hasMore": more,
    }


def strongest(view: Snapshot, kinds: list[str], scope: Any, count: int) -> list[dict[str, Any]]:
    """The ``count`` strongest active memories of these kinds (newest first on ties), as records."""
    hits = leg(view, narrowing(kinds, scope), 1000, searchMode="metadata", orderBy="createdAt", order="desc")
    records = [M.record(row) for _, row in hits.values()]
    records.sort(key=lambda r: -r["strength"])  # stable: newest first among equals
    return records[:count]


@door("memory.stats")
def stats(view: Snapshot, id_: Any, a: dict[str, Any]) -> dict[str, Any]:
    """A census from the metadata postings and order columns: no row is read. ``averageStrength`` is over the
    active memories; ``lastConsolidatedAt`` is the last consolidation that merged anything."""
    by_kind: dict[str, int] = {}
    by_status = {"active": 0, "retired": 0}
    strengths: list[float] = []
    consolidated: int | None = None
    with view.projections() as proj:
        status_of = proj.columns.get("status", {})
        strength_of = proj.columns.get("strength", {})
        consolidated_at = proj.columns.get("consolidatedAt", {})
        for kind in M.KINDS:
            posting = proj.posting("subtype", M.subtype(kind))
            by_kind[kind] = len(posting)
            for dense in posting:
                status = status_of.get(dense, "active")
                by_status[status] = by_status.get(status, 0) + 1
                if status == "active" and isinstance(strength_of.get(dense), (int, float)):
                    strengths.append(float(strength_of[dense]))
                at = consolidated_at.get(dense)
                if isinstance(at, int) and (consolidated is None or at > consolidated):
                    consolidated = at
    return {
        "total": sum(by_kind.values()),
        "byKind": by_kind,
        "byStatus": by_status,
        "conversations": by_kind["conversation"],
        "averageStrength": round(sum(strengths) / len(strengths), 6) if strengths else 0.0,
        "lastConsolidatedAt": consolidated,
        "generation": view.generation,
    }
