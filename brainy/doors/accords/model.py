"""The accords board as rows (DOORS 9.1, "Model"; docs/accords.md is the law): which entity each of the nine
record kinds is, and the AccordRecord every accords door answers.

| kind        | type        | key (``ids.py``)                 | status                         |
|-------------|-------------|----------------------------------|--------------------------------|
| mandate     | norm        | ``mandate:<n>``                  | live, superseded               |
| participant | person/agent| ``participant:<principal>``      | —                              |
| thread      | process     | ``thread:ACC-<n>``               | open, resolved, abandoned      |
| round       | message     | ``round:<parent>:<seq>``         | —                              |
| action      | task        | ``action:<slug>``                | open, done, abandoned          |
| decision    | proposition | ``decision:<slug>``              | awaiting, decided              |
| vote        | proposition | ``vote:<target>:<principal>``    | —                              |
| update      | message     | ``update:<target>:<n>``          | —                              |
| escalation  | event       | ``escalation:<target>:<n>``      | —                              |

Every row is ``internal`` with subtype ``accords.<kind>``; the record's fields live in ``metadata`` (so a
``where`` and the postings reach them), its searchable text is the row's ``data``. Two metadata leaves serve
the reads: ``involves``, every principal a record concerns (author, assignee, a thread's participants), so
"what concerns this participant" is one posting; and ``parent``, the record a round, an action, a decision,
a vote, an update or an escalation belongs to. A parent keeps ``lastSeq`` (rule A2), ``updates`` and
``escalations``, the counters its children's ids are numbered from. One more row, the board (subtype
``accords.board``, from an id namespace of its own as the policy board's), counts threads and mandates and
names the live mandate.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from brainy.contract import refusals as R
from brainy.doors.accords import ids

NOUN = {
    "mandate": "norm",
    "participant": "agent",  # "person" for a person:<name> principal (noun_of)
    "thread": "process",
    "round": "message",
    "action": "task",
    "decision": "proposition",
    "vote": "proposition",
    "update": "message",
    "escalation": "event",
}
SUBTYPES = {f"accords.{kind}": kind for kind in ids.KINDS}
STATUSES = {
    "mandate": ("live", "superseded"),
    "thread": ("open", "resolved", "abandoned"),
    "action": ("open", "done", "abandoned"),
    "decision": ("awaiting", "decided"),
}
#: The state a record must be in to take rounds, updates or votes (rule A4); every other state is closed.
OPEN = {"thread": "open", "action": "open", "decision": "awaiting"}
UPDATE_STATES = ("on-track", "at-risk", "blocked", "done")
VOTES = ("yes", "no", "abstain")

#: The board row: an id no natural key can land on (as the policy board's), never one of the nine kinds.
ACCORDS_NAMESPACE = uuid.UUID("3f6c2a9e-1d4b-5e87-a0c3-7b2d9e4f6a18")
BOARD_ID = str(uuid.uuid5(ACCORDS_NAMESPACE, "board"))
BOARD_TYPE, BOARD_SUBTYPE = "state", "accords.board"

# the AccordRecord fields kept in metadata, answered as stored when present (DOORS 9.1, "AccordRecord"); a vote
# or a decision's ``note``, an escalation's ``decision`` and a participant's ``principal`` beside them
FIELDS = (
    "status",
    "title",
    "text",
    "seq",
    "parent",
    "assignee",
    "due",
    "question",
    "options",
    "choice",
    "decidedBy",
    "note",
    "value",
    "state",
    "decision",
    "lab",
    "provenance",
    "participants",
    "principal",
    "lastReadAt",
)


def subtype(kind: str) -> str:
    return f"accords.{kind}"


def kind_of(row: dict[str, Any] | None) -> str | None:
    """The accords kind of a row, or None when it is no accords record (the board row included)."""
    return SUBTYPES.get((row or {}).get("subtype") or "")


def noun_of(kind: str, principal: str | None = None) -> str:
    """The noun type of a record of ``kind``; a participant is a person when its principal is one."""
    if kind == "participant" and principal is not None and principal.startswith("person:"):
        return "person"
    return NOUN[kind]


def meta(row: dict[str, Any], name: str, default: Any = None) -> Any:
    return (row.get("metadata") or {}).get(name, default)


def record(row: dict[str, Any]) -> dict[str, Any]:
    """The AccordRecord of an accords row (DOORS 9.1): its protocol id, kind and author, its times and commit,
    and the record fields it holds."""
    m = row.get("metadata") or {}
    out: dict[str, Any] = {
        "id": row.get("key") or row["id"],
        "kind": m.get("kind", kind_of(row)),
        "author": m.get("author", row.get("createdBy")),
        "createdAt": row["createdAt"],
        "updatedAt": row["updatedAt"],
        "generation": row["generation"],
    }
    for name in FIELDS:
        if m.get(name) is not None:
            out[name] = m[name]
    return out


def key_of(row: dict[str, Any]) -> str:
    """A record's protocol id."""
    return str(row.get("key") or row["id"])


def resolve(
    entity: Callable[[str], dict[str, Any] | None], text: Any, kinds: tuple[str, ...], field: str
) -> dict[str, Any]:
    """The record ``text`` names among ``kinds``, through ``entity`` (a read's or a commit's point read): a
    prefixed id is read as it is, a bare one under every kind's prefix, all of them before anything is decided.
    One hit answers; several refuse ``RecordAmbiguousError {ids}``; none ``RecordNotFoundError {id, probed}``.
    A row at a probed id that is no accords record of those kinds is no hit."""
    text = ids.checked_id(text, field)
    probed = ids.probes(text, kinds)
    found = [(key, entity(ids.row_id(key))) for key in probed]  # one batch: every probe read
    hits = [row for _, row in found if row is not None and kind_of(row) in kinds]
    if len(hits) == 1:
        return hits[0]
    if hits:
        names = [key_of(row) for row in hits]
        raise R.RecordAmbiguousError(f"{field}: {text!r} names {len(hits)} records: {', '.join(names)}", ids=names)
    what = " or ".join(kinds) if len(kinds) < len(ids.KINDS) else "accords record"
    raise R.RecordNotFoundError(f"{field}: no {what} {text!r} (probed {', '.join(probed)})", id=text, probed=probed)
