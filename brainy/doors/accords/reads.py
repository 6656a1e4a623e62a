"""Four of the five accords reads (DOORS 9.1, "Reads"; seed 000, "The accords reads"): inbox, dashboard, read and
timeline (``search.py`` is the fifth). Each runs its segments on one ``Reading`` and answers what it cost.

- **inbox**: what needs this participant, in protocol order: the mandate (rule A1), the decisions awaiting the
  owner, its open actions, its live threads; each segment clipped at ``limit`` with its count before the clip
  in ``totals``. A participant reading its own inbox asks for the presence stamp (rule R16), which the road
  that called the door writes, or says why not.
- **dashboard**: the whole board: the mandate, threads, actions, decisions and participants, and totals by
  status from the postings; ``lab`` is a condition on ``provenance.lab`` inside every query (the lists' and the
  totals'), never a filter after the fetch.
- **read**: one door for all nine kinds: an id names its own kind; a bare one is probed under every prefix in
  one batch (``model.resolve``).
- **timeline**: a thread's rounds or an action's log, one door for both: only the positions after ``afterSeq``
  are read, by id (a round's id is its parent's and its seq), after the count of the parent's rounds in the
  postings is checked against its ``lastSeq`` (rule A2).
"""

from __future__ import annotations

from typing import Any

from brainy._speedups import postings as P
from brainy.doors import policy
from brainy.doors.accords import ids
from brainy.doors.accords import model as M
from brainy.doors.accords.rules import UNSTAMPED, corrupt, counted_rounds, live_mandate, stamp_said, stamp_wanted
from brainy.doors.accords.views import Reading, narrowing
from brainy.doors.accords.writes import present
from brainy.doors.registry import Stamp, door
from brainy.index.snapshot import Snapshot
from brainy.store import rows
from brainy.store.rows import invalid

#: Rule R16 as the roads to the inbox door run it (``brainy/doors/calling.py``).
PRESENCE = Stamp(stamp_wanted, present, stamp_said)
#: The dashboard's lists with statuses, each counted by status in its totals.
TOTALLED = (("threads", "thread"), ("actions", "action"), ("decisions", "decision"))


def _limit(a: dict[str, Any], default: int) -> int:
    return rows.integer(a["limit"] if a.get("limit") is not None else default, "limit", 1, 1000)


def _records(found: Any) -> list[dict[str, Any]]:
    return [M.record(row) for row in found.rows]


def _presence(view: Snapshot, participant: str, who: str | None) -> dict[str, Any]:
    """What the read alone says of the stamp: why none is due, or :data:`UNSTAMPED` for the road to write it."""
    if not view.at_head:
        reason = "past-generation"  # a pinned read moves nothing
    elif who is None:
        reason = "no-caller"
    elif who != participant:
        reason = "not-own-inbox"
    else:
        reason = UNSTAMPED
    return {"stamped": False, "reason": reason}


@door("accords.inbox", asks=True, stamp=PRESENCE)
def inbox(view: Snapshot, id_: Any, a: dict[str, Any]) -> dict[str, Any]:
    asked = policy.asked()
    who = asked.caller if asked is not None else None
    participant = a.get("participant") if a.get("participant") is not None else who
    if participant is None:
        raise invalid("participant", "missing", "name the participant: this call has no caller to default to")
    participant = rows.string(participant, "participant")
    limit = _limit(a, 20)
    reading = Reading(view, "accords.inbox")
    mandate = live_mandate(reading)
    awaiting = reading.segment(narrowing(("decision",), status="awaiting"), limit, "createdAt")
    actions = reading.segment(narrowing(("action",), status="open", assignee=participant), limit, "createdAt")
    threads = reading.segment(narrowing(("thread",), status="open", involves=participant), limit, "updatedAt", "desc")
    return {
        "board": view.brain,
        "participant": participant,
        "mandate": M.record(mandate) if mandate is not None else None,
        "decisionsAwaiting": _records(awaiting),
        "openActions": _records(actions),
        "liveThreads": _records(threads),
        "totals": {"decisionsAwaiting": awaiting.total, "openActions": actions.total, "liveThreads": threads.total},
        "presenceStamped": _presence(view, participant, who),
        "cost": reading.cost.answer(),
    }


def census(reading: Reading, lab: str | None) -> dict[str, dict[str, int]]:
    """How many threads, actions and decisions stand in each status (under ``lab`` when given): one segment over
    the postings, no row read at the head (a past generation's postings are built from its rows, each counted)."""
    counts: dict[str, dict[str, int]] = {}
    with reading.view.projections() as proj:
        lens = proj.posting("provenance.lab", lab) if lab is not None else None
        for name, kind in TOTALLED:
            records = proj.posting("subtype", M.subtype(kind))
            if lens is not None:
                records = P.intersect_many([records, lens])
            reading.cost.candidates += len(records)
            counts[name] = {s: len(P.intersect_many([records, proj.posting("status", s)])) for s in M.STATUSES[kind]}
        if not reading.view.at_head:
            reading.cost.rows_read += len(proj)
    reading.cost.segments += 1
    return counts


@door("accords.dashboard")
def dashboard(view: Snapshot, id_: Any, a: dict[str, Any]) -> dict[str, Any]:
    lab = rows.string(a["lab"], "lab") if a.get("lab") is not None else None
    limit = _limit(a, 50)
    reading = Reading(view, "accords.dashboard")
    mandate = live_mandate(reading)
    lists = {name: reading.segment(narrowing((kind,), lab=lab), limit, "updatedAt", "desc") for name, kind in TOTALLED}
    # the participants are the board's: no participant holds a lab
    participants = reading.segment(narrowing(("participant",)), limit, "updatedAt", "desc")
    totals: dict[str, Any] = {**census(reading, lab), "participants": participants.total}
    return {
        "board": view.brain,
        "mandate": M.record(mandate) if mandate is not None else None,
        **{name: _records(found) for name, found in lists.items()},
        "participants": _records(participants),
        "totals": totals,
        "cost": reading.cost.answer(),
    }


@door("accords.read")
def read(view: Snapshot, id_: Any, a: dict[str, Any]) -> dict[str, Any]:
    reading = Reading(view, "accords.read")
    row = reading.record(id_)
    return {"record": M.record(row), "cost": reading.cost.answer()}


@door("accords.timeline")
def timeline(view: Snapshot, id_: Any, a: dict[str, Any]) -> dict[str, Any]:
    """``lastSeq`` is the seq of the last entry answered (``afterSeq`` when none): the ``afterSeq`` of the next
    read, so a reader that saw round n asks for what came after n and reads only that."""
    after = rows.integer(a["afterSeq"] if a.get("afterSeq") is not None else 0, "afterSeq", 0)
    limit = _limit(a, 200)
    reading = Reading(view, "accords.timeline")
    parent = reading.record(id_, ids.PARENTS)
    read_at = reading.view.generation
    held, last_row = counted_rounds(reading, parent)
    if reading.view.generation != read_at:  # a commit landed between: the parent as the postings stand
        parent = reading.entity(parent["id"]) or parent
    key = M.key_of(parent)
    last = int(M.meta(parent, "lastSeq", 0))
    if held != last or (last_row is not None and M.meta(last_row, "seq") != last):
        raise corrupt(reading, key, last, held)
    entries = []
    for seq in range(after + 1, min(last, after + limit) + 1):
        row = last_row if seq == last else reading.entity(ids.row_id(ids.round_(key, seq)))
        if row is None or M.kind_of(row) != "round" or M.meta(row, "seq") != seq:
            raise corrupt(reading, key, last, held)
        entries.append(M.record(row))
    return {
        "id": key,
        "kind": M.kind_of(parent),
        "entries": entries,
        "lastSeq": entries[-1]["seq"] if entries else after,
        "hasMore": after + limit < last,
        "cost": reading.cost.answer(),
    }
