"""The point reads: get, batchGet, counts (door catalogue, section 5.1).

Each is a registered read: ``(snapshot, id, args) -> answer`` at the snapshot's generation, so
``asOf`` runs the same function on a past one.
"""

from __future__ import annotations

from typing import Any

from brainy.doors.registry import door
from brainy.index import encoded_rows as E
from brainy.index.snapshot import Snapshot
from brainy.store import keys as K
from brainy.store import rows

MAX_BATCH_GET = 1000


@door("get")
def get(snap: Snapshot, id_: Any, args: dict[str, Any]) -> dict[str, Any]:
    """``{entity | None, generation}``: one entity by id or natural key."""
    row_key = _ROW_KEYS.get(id_) if type(id_) is str else None
    if row_key is None:
        key, _ = K.resolve(id_)
        row_key = K.entity_key(key)
        if len(_ROW_KEYS) >= ROW_KEYS_HELD:
            _ROW_KEYS.clear()
        _ROW_KEYS[id_] = row_key
    return {
        "entity": E.lookup(snap, row_key, args["includeVector"], args["includeData"]),
        "generation": snap.generation,
    }


#: An id's entity row key, as ``get`` last resolved it (a function of the id's text alone: a refusal is never
#: kept; bounded, since a caller may send any number of ids): a hot id is read again and again.
ROW_KEYS_HELD = 1 << 16
_ROW_KEYS: dict[str, bytes] = {}


def _entity(snap: Snapshot, id_: str, include_vector: bool, include_data: bool) -> Any:
    """One entity's answer, or None: encoded once per version, never decoded beyond what it answers."""
    return E.lookup(snap, K.entity_key(id_), include_vector, include_data)


@door("batchGet")
def batch_get(snap: Snapshot, id_: Any, args: dict[str, Any]) -> dict[str, Any]:
    """``{entities, missing, generation}``: up to 1,000 entities in the order asked."""
    ids = args["ids"]
    if not isinstance(ids, list) or not 1 <= len(ids) <= MAX_BATCH_GET:
        raise rows.invalid("ids", "out-of-range", f"an array of 1 to {MAX_BATCH_GET} ids")
    include_vector = args["includeVector"]
    include_data = args["includeData"]
    entities, missing = [], []
    for i, text in enumerate(ids):
        key, _ = K.resolve(text, f"ids[{i}]")
        entity = _entity(snap, key, include_vector, include_data)
        entities.append(entity)
        if entity is None:
            missing.append(text)
    return {"entities": entities, "missing": missing, "generation": snap.generation}


@door("counts")
def counts(snap: Snapshot, id_: Any, args: dict[str, Any]) -> dict[str, Any]:
    """The census: totals by type and relation type, public and across every tier."""
    return snap.census()
