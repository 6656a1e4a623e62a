"""One door call as both roads to a door make it: the dispatcher (every transport) and ``Brain.call`` (in
process). The argument check and the read's call live here once, so the two can never disagree on what a
document must hold or on who a read that asks (``policy.asking``) is told is asking.
"""

from __future__ import annotations

from typing import Any

from brainy.contract import arguments
from brainy.contract import doors as D
from brainy.contract import refusals as R
from brainy.doors import policy
from brainy.doors.registry import Registered


class Checked:
    """The argument check of one door, with what it asks of every call worked out once: whether the door
    takes an id, and the checked document of a call that sends none (every plain get)."""

    __slots__ = ("door", "takes_id", "_none", "_fresh", "defaults")

    def __init__(self, door: D.Door) -> None:
        self.door = door
        self.takes_id = any(p.name == "id" for p in door.path_params)
        # the defaults, or None when a required argument makes the full check refuse each such call
        try:
            self._none: dict[str, Any] | None = arguments.check(door, None)
        except R.Refusal:
            self._none = None
        self._fresh = self._none is not None and any(isinstance(v, (list, dict)) for v in self._none.values())
        # what no_arguments copies when a copy is all it does, read by the dispatcher without a call
        self.defaults = None if self._none is None or self._fresh else self._none

    def no_arguments(self) -> dict[str, Any]:
        """The checked document of a call with no arguments: a new dict each call (a door may keep or change
        what it is handed), its lists and maps new too."""
        if self._none is None or self._fresh:  # the refusal, or defaults holding lists and maps: checked afresh
            return arguments.check(self.door, None)
        return self._none.copy()

    def document(self, id_: Any, document: Any) -> dict[str, Any]:
        """``document`` checked against the door's declared arguments, its defaults filled; the id the door's
        path names must be there."""
        if document is not None and not isinstance(document, dict):
            raise R.InvalidArgumentError(
                "the argument document must be an object", field="document", reason="wrong-type"
            )
        if id_ is None and self.takes_id:
            raise R.InvalidArgumentError("id: required", field="id", reason="missing")
        if document:
            return arguments.check(self.door, document)
        defaults = self.defaults
        return defaults.copy() if defaults is not None else self.no_arguments()


CHECKED: dict[str, Checked] = {d.name: Checked(d) for d in D.DOORS}


def read(entry: Registered, snapshot: Any, id_: Any, document: dict[str, Any], asking: policy.Asking) -> Any:
    """A read door's answer on ``snapshot``; a read that asks who is asking (``policy.check``'s default caller)
    is told ``asking``, and every other read is spared the binding."""
    if entry.asks:
        with policy.asking(asking):
            return entry.fn(snapshot, id_, document)
    return entry.fn(snapshot, id_, document)


# -- a read's stamp (registry.Stamp: the inbox's presence, DOORS 9.1 R16) ----------------------------------------

#: Why a road leaves a stamp unwritten, as the answer says it.
NO_CALLER = "no-caller"  # nobody to attribute the write to
READ_ONLY_CREDENTIAL = "credential-read-only"  # a token whose scope lacks write
LEASE_NOT_HELD = "lease-not-held"  # this process does not hold the brain's writer lease; a read never claims it


def stamp_wanted(entry: Registered, answer: Any, blocked: Any) -> dict[str, Any] | None:
    """The arguments of the stamp ``entry``'s answer asks for, when this road may write it; ``blocked()`` says why
    it may not (one of the reasons above, or None), and then the answer says so and nothing is written."""
    if entry.stamp is None or not isinstance(answer, dict):
        return None
    args = entry.stamp.wanted(answer)
    if args is None:
        return None
    reason = blocked()
    if reason is not None:
        entry.stamp.said(answer, None, reason)
        return None
    return args


def stamped(
    entry: Registered, answer: dict[str, Any], receipt: dict[str, Any] | None, refused: R.Refusal | None
) -> dict[str, Any]:
    """``answer`` told how its stamp went: written at the commit's timestamp, or refused (its class the reason).
    The read stands either way: a stamp is never the read's refusal."""
    assert entry.stamp is not None
    if refused is not None:
        entry.stamp.said(answer, None, refused.name)
    else:
        assert receipt is not None
        entry.stamp.said(answer, receipt["timestamp"], None)
    return answer
