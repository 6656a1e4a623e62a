"""Conversations: memory.turn appends one message, memory.turns reads a transcript (DOORS 9.2, rule A2).

A conversation is the entity ``conversation:<name>``; its turns are ``conversation:<name>#<seq>``, numbered
1..n with no gap, each ``partOf`` the conversation, and the conversation keeps ``lastSeq``. Because a turn's id
is derived from its seq, a stretch of a transcript is one point read per turn. A timeline whose turns are not
one gap-free range (a turn removed through the engine's ``remove``, which may remove any row) is never read
around: ``TimelineCorruptError {expected, found}`` says how many turns the conversation should hold and how
many it does.
"""

from __future__ import annotations

from typing import Any

from brainy.contract import arguments
from brainy.contract import doors as D
from brainy.contract import refusals as R
from brainy.doors.memory import records as M
from brainy.doors.memory.keeping import caller, changed, new_row, put, relate, said_text
from brainy.doors.query import Query, run_find
from brainy.doors.registry import WRITE, door
from brainy.doors.timetravel import _instant
from brainy.doors.writes import Context
from brainy.index.snapshot import Snapshot
from brainy.store import keys as K
from brainy.store import rows
from brainy.store.rows import invalid
from brainy.store.txn import Txn


def _name(value: Any, field: str = "conversation") -> str:
    name = rows.string(value, field)
    if not name:
        raise invalid(field, "empty", "a conversation has a name")
    return name


@door("memory.turn", WRITE, embeds=said_text)
def turn(txn: Txn, a: dict[str, Any], ctx: Context) -> dict[str, Any]:
    caller(txn)
    name = _name(a.get("conversation"))
    role = a.get("role")
    if role not in M.ROLES:
        raise invalid("role", "bad-operand", f"one of {', '.join(M.ROLES)}")
    text = M.text(a.get("text"))
    fields: dict[str, Any] = {"conversation": name, "role": role}
    if a.get("at") is not None:
        fields["at"] = _instant(a["at"])
    conversation_key = f"conversation:{name}"
    conversation_id, _ = K.resolve(conversation_key, "conversation")
    before = txn.entity(conversation_id)
    if before is not None and M.kind_of(before) != "conversation":
        raise invalid("conversation", "id-taken", f"{conversation_key!r} names a row that is not a conversation")
    seq = int((before or {}).get("metadata", {}).get("lastSeq", 0)) + 1
    key = f"{conversation_key}#{seq}"
    turn_id, _ = K.resolve(key, "conversation")  # the natural key's length limit bounds the name
    if before is None:
        conversation = new_row(txn, ctx, "conversation", name, {"lastSeq": seq}, conversation_id, conversation_key)
    else:
        conversation = changed(before, lastSeq=seq)
    put(txn, conversation, before)
    fields["seq"] = seq
    put(txn, new_row(txn, ctx, "turn", text, fields, turn_id, key), None)
    relate(txn, ctx, turn_id, conversation_id, "partOf", M.TURN_OF)
    return {"id": turn_id, "conversation": name, "seq": seq}


def conversation_of(view: Snapshot, name: str) -> dict[str, Any] | None:
    row = view.entity(M.conversation_id(name))
    return row if row is not None and M.kind_of(row) == "conversation" else None


def _counted(view: Snapshot, name: str) -> int:
    """How many turns the conversation holds, from the metadata postings (find's metadata leg)."""
    document = {
        "subtype": M.subtype("turn"),
        "visibility": "internal",
        "where": {"conversation": name},
        "searchMode": "metadata",
        "limit": 1,
        "includeData": False,
    }
    return run_find(Query(arguments.check(D.BY_NAME["find"], document)), view)["total"]


def _corrupt(view: Snapshot, name: str, last: int, found: int) -> R.Refusal:
    missing = next((s for s in range(1, last + 1) if view.entity(M.turn_id(name, s)) is None), None)
    where = f"turn {missing} is missing" if missing is not None else "it holds turns past its last"
    return R.TimelineCorruptError(
        f"conversation {name!r} should hold turns 1 to {last}, and {where}", expected=last, found=found
    )


def read_turns(view: Snapshot, name: str, after: int, limit: int) -> tuple[list[dict[str, Any]], int, bool]:
    """Turns ``after``+1 onwards, at most ``limit``, checked against rule A2: (records, last seq, more)."""
    conversation = conversation_of(view, name)
    if conversation is None:
        raise R.RecordNotFoundError(f"no conversation {name!r}", id=name)
    last = int(conversation["metadata"].get("lastSeq", 0))
    held = _counted(view, name)
    if held != last:
        raise _corrupt(view, name, last, held)
    out = []
    for seq in range(after + 1, min(last, after + limit) + 1):
        row = view.entity(M.turn_id(name, seq))
        if row is None or row["metadata"].get("seq") != seq:
            raise _corrupt(view, name, last, held)
        out.append(M.record(row))
    return out, last, after + limit < last


def recent_turns(view: Snapshot, name: str, count: int) -> list[dict[str, Any]]:
    """The conversation's last ``count`` turns, oldest first (none for a conversation that does not exist)."""
    conversation = conversation_of(view, name)
    if conversation is None or count == 0:
        return []
    last = int(conversation["metadata"].get("lastSeq", 0))
    return read_turns(view, name, max(0, last - count), count)[0]


@door("memory.turns")
def turns(view: Snapshot, id_: Any, a: dict[str, Any]) -> dict[str, Any]:
    """``lastSeq`` is the seq of the last turn answered (``afterSeq`` when none), the ``afterSeq`` of the next
    read: a reader that saw turn n asks for the turns after n and gets only the new ones."""
    name = _name(id_, "id")
    after = rows.integer(a["afterSeq"], "afterSeq", 0)
    limit = rows.integer(a["limit"], "limit", 1, 1000)
    found, _, more = read_turns(view, name, after, limit)
    return {"conversation": name, "turns": found, "lastSeq": found[-1]["seq"] if found else after, "hasMore": more}
