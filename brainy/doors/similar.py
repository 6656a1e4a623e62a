"""The ``similar`` door (DOORS.md 5.1): find's semantic leg alone (``brainy/doors/semantic.py``), run by find's
planner and evaluator (``brainy/doors/query.py``) from exactly one of an entity, a text or a vector."""

from __future__ import annotations

from typing import Any

from brainy.contract import arguments
from brainy.contract import doors as D
from brainy.contract import refusals as R
from brainy.doors.query import Query, run_find
from brainy.doors.registry import door
from brainy.doors.semantic import query_texts
from brainy.index.snapshot import Snapshot


@door("similar", embeds=query_texts)
def similar(snap: Snapshot, id_: Any, a: dict[str, Any]) -> dict[str, Any]:
    """find's semantic leg alone, from exactly one of an entity, a text or a vector."""
    given = [name for name in ("to", "text", "vector") if a.get(name) is not None]
    if len(given) != 1:
        raise R.InvalidArgumentError(
            "give exactly one of to, text and vector",
            field=given[1] if given else "to",
            reason="ambiguous" if given else "missing",
        )
    document: dict[str, Any] = {
        name: a[name]
        for name in ("limit", "threshold", "type", "subtype", "where", "service", "visibility", "excludeVFS")
        if a.get(name) is not None
    }
    document["searchMode"] = "semantic"
    if given == ["to"]:
        document["near"] = {"id": a["to"]}
    elif given == ["text"]:
        document["query"] = a["text"]
    else:
        document["vector"] = a["vector"]
    q = Query(arguments.check(D.BY_NAME["find"], document), door="similar")
    if given == ["to"]:
        # similar.to keeps every cosine (find's near defaults its floor to 0), and leaves the anchor out
        q.semantic.threshold = a.get("threshold")
        q.include_self = a["includeSelf"]
    return run_find(q, snap)
