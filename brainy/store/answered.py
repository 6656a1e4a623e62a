"""The answers of the last writes sent with an id (docs/fleet.md "A write sent twice"), so the same write sent
again is answered, not committed again.

A commit made for a write that came with an id (``brainy-write``) logs the id, the caller and the door's answer in
its frame (docs/store-format.md "Frame payload", ``w``); the commit path remembers them as it appends the frame,
and as an open, a restore or a reader replays it. :meth:`Answered.recall` is asked under the commit lock before a
write with an id is run. The memory is bounded: the last :data:`MAX_IDS` ids, :data:`MAX_BYTES` of answers.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import msgpack

MAX_IDS = 4096
MAX_BYTES = 16 << 20

Written = tuple[str, "str | None", bytes]  # a frame's ``w``: the write's id, its caller, its answer's MessagePack


class Answered:
    """Write id -> (caller, the answer's MessagePack, the log sequence of its frame: 0 when replayed)."""

    def __init__(self) -> None:
        self._held: OrderedDict[str, tuple[str | None, bytes, int]] = OrderedDict()
        self._bytes = 0

    def __len__(self) -> int:
        return len(self._held)

    def remember(self, write: Written, seq: int) -> None:
        id_, caller, answer = write
        old = self._held.pop(id_, None)
        if old is not None:
            self._bytes -= len(old[1])
        self._held[id_] = (caller, answer, seq)
        self._bytes += len(answer)
        while self._held and (len(self._held) > MAX_IDS or self._bytes > MAX_BYTES):
            _, (_, gone, _) = self._held.popitem(last=False)
            self._bytes -= len(gone)

    def recall(self, id_: str, caller: str | None) -> tuple[dict[str, Any], int] | None:
        """The answer the write ``id_`` of ``caller`` was given and its frame's log sequence (0: replayed, durable
        already); None when no such write is remembered (another caller's id is not this caller's)."""
        found = self._held.get(id_)
        if found is None or found[0] != caller:
            return None
        return msgpack.unpackb(found[1], raw=False), found[2]


def written(id_: str, caller: str | None, answer: dict[str, Any]) -> Written | None:
    """A frame's ``w`` for ``answer`` (its generation and timestamp in it), or None when the answer does not pack
    (then the write is not remembered: sent again, it would be run again)."""
    try:
        return id_, caller, msgpack.packb(answer, use_bin_type=True)
    except (TypeError, ValueError, OverflowError):
        return None
