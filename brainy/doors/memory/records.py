"""A memory record as rows (docs/memory.md is the law): what kind is which entity, and the MemoryRecord
every memory door answers (DOORS 9.2).

| kind         | type               | id                                   |
|--------------|--------------------|--------------------------------------|
| fact         | proposition        | minted                               |
| preference   | proposition        | minted                               |
| note         | document           | minted                               |
| turn         | message            | natural key conversation:<name>#<seq> |
| conversation | event              | natural key conversation:<name>      |
| abstract     | informationContent | minted                               |

The record's fields live in the row's ``metadata``; its text is the row's ``data``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from brainy.contract import refusals as R
from brainy.contract.limits import quote
from brainy.store import keys as K
from brainy.store import rows
from brainy.store.rows import invalid

NOUN = {
    "fact": "proposition",
    "preference": "proposition",
    "note": "document",
    "turn": "message",
    "conversation": "event",
    "abstract": "informationContent",
}
KINDS = tuple(NOUN)
SUBTYPES = {f"memory.{kind}": kind for kind in KINDS}
# what recall and context search unless told otherwise: what the agent knows, not its transcripts
KNOWN = ("fact", "preference", "note", "abstract")
SAID = ("fact", "preference", "turn")  # the kinds whose text may name its speaker (said.py)
ROLES = ("user", "assistant", "system", "tool")
STATUSES = ("active", "retired")

CITE, SUPERSEDE, TURN_OF, DESCRIBES = "memory.cite", "memory.supersede", "memory.turn", "memory.abstract"
CITE_GAIN = 0.05  # what one citation adds to a memory's strength (DOORS 9.2)
DEFAULT_STRENGTH = 0.5

# the record fields kept in metadata, answered as they are stored when present
_OPTIONAL = ("conversation", "seq", "role", "path", "contentType", "members", "supersededBy", "retiredReason", "source")


def subtype(kind: str) -> str:
    return f"memory.{kind}"


def kind_of(row: dict[str, Any]) -> str | None:
    """The memory kind of a row, or None when the row is not a memory."""
    return SUBTYPES.get(row.get("subtype") or "")


def conversation_id(name: str) -> str:
    return K.resolve(f"conversation:{name}", "conversation")[0]


def turn_id(name: str, seq: int) -> str:
    return K.resolve(f"conversation:{name}#{seq}", "conversation")[0]


def kinds(value: Any, field: str = "kinds", default: Iterable[str] = KNOWN) -> list[str]:
    """A ``kinds`` argument checked against the six kinds (the default when left out)."""
    if value is None:
        return list(default)
    if not isinstance(value, list):
        raise invalid(field, "wrong-type", "a list of memory kinds")
    if not value:
        raise invalid(field, "bad-operand", "an empty list matches nothing; leave it out")
    for kind in value:
        if kind not in KINDS:
            raise invalid(field, "bad-operand", f"{quote(kind)} is not a memory kind ({', '.join(KINDS)})")
    return list(dict.fromkeys(value))


def tags(value: Any, field: str = "tags") -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(t, str) and t for t in value):
        raise invalid(field, "wrong-type", "must be an array of non-empty strings")
    return list(dict.fromkeys(value))


def strength(value: Any, field: str = "strength") -> float:
    got = rows.unit_number(value, field)
    return DEFAULT_STRENGTH if got is None else got


def text(value: Any, field: str = "text") -> str:
    if not isinstance(value, str) or not value.strip():
        raise invalid(field, "missing" if value is None else "empty", "must be a non-empty string")
    return value


def lookup(read: Any, id_text: Any, field: str = "id") -> dict[str, Any]:
    """The memory row ``id_text`` names (an id or natural key), read through ``read`` (a Txn or a Snapshot);
    ``RecordNotFoundError`` when no memory has it (a row that is not a memory included)."""
    if not isinstance(id_text, str):
        raise invalid(field, "wrong-type", "must be a string")
    id_, _ = K.resolve(id_text, field)
    row = read.entity(id_)
    if row is None or kind_of(row) is None:
        raise R.RecordNotFoundError(f"{field}: no memory {id_text!r}", id=id_text)
    return row


def record(row: dict[str, Any]) -> dict[str, Any]:
    """The MemoryRecord of a memory row (DOORS 9.2)."""
    m = row.get("metadata") or {}
    out: dict[str, Any] = {
        "id": row["id"],
        "kind": m.get("kind", kind_of(row)),
        "text": row.get("data") or "",
        "scope": m.get("scope"),
        "tags": list(m.get("tags") or ()),
        "strength": float(m.get("strength", 0.0)),
        "status": m.get("status", "active"),
        "author": row.get("createdBy"),
        "createdAt": row["createdAt"],
        "updatedAt": row["updatedAt"],
        "generation": row["generation"],
        "citations": int(m.get("citations", 0)),
    }
    for name in _OPTIONAL:
        if name in m:
            out[name] = m[name]
    if "extra" in m:
        out["metadata"] = m["extra"]
    return out


def active(row: dict[str, Any]) -> bool:
    return (row.get("metadata") or {}).get("status", "active") == "active"
