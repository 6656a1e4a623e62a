"""The answers of the last writes sent with an id (docs/fleet.md "A write sent twice"), so the same write sent
again is answered, not committed again.

A commit made for a write that came with an id (``brainy-write``) logs the id and the door's answer in its frame
(docs/store-format.md "Frame payload", ``w``; the caller is the frame's author); the commit path remembers them,
with the caller, as it appends the frame,
and as an open, a restore or a reader replays it. :meth:`Answered.recall` is asked under the commit lock before a
write with an id is run. The memory is bounded, a brain's: the last :data:`MAX_IDS` ids, :data:`MAX_BYTES` of
answers, none remembered longer than :data:`KEEP_SECONDS` (a write is sent again within its edge's hand-over
bound, the fleet's TTL plus 5 s; a node holds many brains, and most answer no forwarded write).
"""

from __future__ import annotations

import time
from collections import OrderedDict
from typing import Any

import msgpack

MAX_IDS = 1024
MAX_BYTES = 4 << 20
KEEP_SECONDS = 120.0

Written = tuple[str, bytes]  # a frame's ``w``: the write's id and its answer's MessagePack


class Answered:
    """Write id -> (caller, the answer's MessagePack, the log sequence of its frame: 0 when replayed, and when
    it was remembered: time.monotonic()), oldest first."""

    def __init__(self) -> None:
        self._held: OrderedDict[str, tuple[str | None, bytes, int, float]] = OrderedDict()
        self._bytes = 0

    def __len__(self) -> int:
        return len(self._held)

    def remember(self, write: Written, caller: str | None, seq: int) -> None:
        id_, answer = write
        self._forget(id_)
        self._held[id_] = (caller, answer, seq, time.monotonic())
        self._bytes += len(answer)
        self._expire()

    def recall(self, id_: str, caller: str | None) -> tuple[dict[str, Any], int] | None:
        """The answer the write ``id_`` of ``caller`` was given and its frame's log sequence (0: replayed, durable
        already); None when no such write is remembered (another caller's id is not this caller's)."""
        self._expire()
        found = self._held.get(id_)
        if found is None or found[0] != caller:
            return None
        return msgpack.unpackb(found[1], raw=False), found[2]

    def _forget(self, id_: str) -> None:
        old = self._held.pop(id_, None)
        if old is not None:
            self._bytes -= len(old[1])

    def _expire(self) -> None:
        """The oldest let go while there are too many, they weigh too much, or they are too old."""
        held, since = self._held, time.monotonic() - KEEP_SECONDS
        while held:
            id_, (_, answer, _, at) = next(iter(held.items()))
            if len(held) <= MAX_IDS and self._bytes <= MAX_BYTES and at >= since:
                return
            self._forget(id_)


def written(id_: str, answer: dict[str, Any]) -> Written | None:
    """A frame's ``w`` for ``answer`` (its generation and timestamp in it), or None when the answer does not pack
    (then the write is not remembered: sent again, it would be run again)."""
    try:
        return id_, msgpack.packb(answer, use_bin_type=True)
    except (TypeError, ValueError, OverflowError):
        return None
