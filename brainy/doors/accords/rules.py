"""The board's rules (DOORS 9.1, "Rules"), each where it is enforced and refused by name.

- **A1, one mandate.** At most one mandate is ``live``: ``decide`` with ``mandate`` supersedes the live one in
  the commit that sets the new one (``writes.decide``), and a read that needs the mandate and finds more than
  one refuses ``MandateAmbiguousError {ids}`` (:func:`live_mandate`) rather than choosing.
- **A2, a contiguous timeline.** A thread's rounds and an action's log entries are numbered 1..n with no gap:
  the parent's ``lastSeq`` is n, its rounds' postings hold exactly n rows, and each position read holds its
  seq; anything else refuses ``TimelineCorruptError {expected, found}`` (:func:`counted_rounds`,
  :func:`corrupt`), never a negotiation answered with a turn missing.
- **A3, the owner's word.** ``decide`` asks the owner rung, loose form (an owner triple, or a service's asserted
  ``X-Brainy-Owner: true``): the gate's question (``brainy/host/dispatch.py``), asked before the door runs,
  as the ruling doors' owner triple is; ``OwnerRungRequiredError``.
- **A4, closed records.** No round, update, vote or escalation on a resolved or abandoned thread or action, and
  no vote or second word on a decided decision (:func:`still_open`): ``RecordStateError {state}``.
- **R16, presence.** A participant reading its own ``inbox`` stamps its ``lastReadAt``, a write made only when
  this process holds the lease and the credential may write (the inbox's ``stamp``, :func:`stamp_wanted`, run
  by the two roads to a door, ``brainy/doors/calling.py``); otherwise the answer says ``stamped: false`` with
  the reason, and nothing is refused.

Every write is attributed to its caller; one that reaches the profile with none (in process, no caller
bound) is refused ``AccordsHostCannotWriteError {missing: "caller"}`` (:func:`caller`).
"""

from __future__ import annotations

from typing import Any

from brainy.contract import refusals as R
from brainy.doors.accords import ids
from brainy.doors.accords import model as M
from brainy.doors.accords.views import Reading, narrowing
from brainy.store.txn import Txn


def caller(txn: Txn) -> str:
    """The caller an accords write is attributed to (DOORS 0.4)."""
    if txn.caller is None:
        raise R.AccordsHostCannotWriteError("an accords write needs a caller, and none is bound", missing="caller")
    return txn.caller


# -- A1 -------------------------------------------------------------------------------------------------------


def live_mandate(reading: Reading) -> dict[str, Any] | None:
    """The board's one live mandate (None when none is set), one segment; ``MandateAmbiguousError`` naming
    every live one when there is more than one."""
    found = reading.segment(narrowing(("mandate",), status="live"), 20, order_by="createdAt")
    if found.total is not None and found.total > 1:
        names = [M.key_of(row) for row in found.rows]
        raise R.MandateAmbiguousError(
            f"rule A1: {found.total} mandates are live ({', '.join(names)}); the owner's next decide supersedes them",
            ids=names,
        )
    return found.rows[0] if found.rows else None


# -- A2 -------------------------------------------------------------------------------------------------------


def counted_rounds(reading: Reading, parent: dict[str, Any]) -> tuple[int, dict[str, Any] | None]:
    """How many rounds the postings hold under ``parent``, and its last one (highest seq), one segment that
    reads one row; the reading then stands at the generation the postings did, so the parent is read again
    there when a commit landed in between."""
    found = reading.segment(
        narrowing(("round",), parent=M.key_of(parent)), 1, order_by="seq", order="desc", includeData=True
    )
    reading.at(found.generation)
    return found.total or 0, found.rows[0] if found.rows else None


def corrupt(reading: Reading, parent: str, last: int, held: int) -> R.Refusal:
    """``TimelineCorruptError``: ``parent`` should hold rounds 1 to ``last`` and holds ``held``; the message names
    the first position missing (read only now, to say where)."""
    missing = next(
        (s for s in range(1, last + 1) if reading.view.entity(ids.row_id(ids.round_(parent, s))) is None), None
    )
    where = f"round {missing} is missing" if missing is not None else "it holds rounds past its last"
    return R.TimelineCorruptError(
        f"rule A2: {parent} should hold rounds 1 to {last}, and {where}", expected=last, found=held
    )


# -- A4 -------------------------------------------------------------------------------------------------------


def still_open(row: dict[str, Any], door: str) -> None:
    """Rule A4: ``row`` (a thread, an action or a decision) takes rounds, updates and votes only while open."""
    kind = M.kind_of(row) or ""
    state = M.meta(row, "status")
    if kind in M.OPEN and state != M.OPEN[kind]:
        raise R.RecordStateError(
            f"rule A4: {M.key_of(row)} is {state}; {door} writes only to an open {kind}",
            state=state,
            reason="closed",
            expected=M.OPEN[kind],
            actual=state,
        )


# -- R16 ------------------------------------------------------------------------------------------------------

#: What an inbox answer says before any road stamped it: the read alone writes nothing.
UNSTAMPED = "unstamped"


def stamp_wanted(answer: dict[str, Any]) -> dict[str, Any] | None:
    """The stamp an inbox answer asks for: the participant's own, when the read left it to the road."""
    said = answer.get("presenceStamped") or {}
    return {"participant": answer["participant"]} if said.get("reason") == UNSTAMPED else None


def stamp_said(answer: dict[str, Any], at: int | None, reason: str | None) -> None:
    """What the road did, in the answer: stamped at ``at``, or not, for ``reason``."""
    answer["presenceStamped"] = {"stamped": True, "at": at} if at is not None else {"stamped": False, "reason": reason}
