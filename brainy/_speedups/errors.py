"""Errors shared by both twins of every speedup.

Plain Python on purpose: the compiled and the pure twin raise the very same classes, so no
``except`` anywhere depends on which twin the facade picked (STYLE rule 9).
"""

from __future__ import annotations

__all__ = [
    "BlockCorruptError",
    "HeaderListTooLarge",
    "HpackError",
    "REASONS",
    "RequestMalformed",
    "TextStops",
    "VectorRefused",
]

# Every reason a data block can be refused for (docs/store-format.md, "Data block": a block that
# fails any of these is a *torn table*). Short and lowercase, as leveldb words its Corruption
# statuses, so a log line or a refusal body can quote one as is.
REASONS = frozenset(
    {
        "truncated block read",  # the buffer ends before contents + crc
        "block checksum mismatch",  # crc32(contents) differs from the stored crc
        "block too short",  # contents cannot hold num_restarts
        "bad restart count",  # num_restarts is 0, or its array does not fit in contents
        "bad restart offset",  # a restart is not the start of an entry, or the first entry is not one
        "bad varint",  # a varint longer than 64 bits
        "entry runs past restarts",  # a varint, key delta or value reaches into the restart array
        "bad shared length",  # shared is longer than the previous key, or non-zero at a restart
        "keys out of order",  # (key ascending, generation descending) does not strictly increase
    }
)


class BlockCorruptError(ValueError):
    """A data block that must not be read: its crc or its structure is wrong.

    ``reason`` is one of :data:`REASONS`; ``at`` is the offset within the block's contents of
    the entry being decoded when the damage was seen (``None`` for damage to the block as a
    whole). The caller that knows the file turns this into ``StoreUnservableError``
    (reason ``torn-sstable``).
    """

    def __init__(self, reason: str, at: int | None = None) -> None:
        super().__init__(reason, at)  # both in args, so the error pickles and compares whole
        self.reason = reason
        self.at = at

    def __str__(self) -> str:
        if self.at is None:
            return f"torn data block: {self.reason}"
        return f"torn data block: {self.reason} (entry at byte {self.at})"


class VectorRefused(ValueError):
    """A vector argument ``vecpack.pack`` will not pack; ``reason`` is one of ``not-a-list``, ``length``,
    ``not-a-number``, ``zero-vector`` (the caller turns it into the refusal the door names)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class TextStops(ValueError):
    """Content that is not UTF-8 from ``offset`` on (the offset ``bytes.decode`` names: where the first bad
    sequence begins); ``textjoin`` raises it and the file layer turns it into ``TextDecodeError``."""

    def __init__(self, offset: int) -> None:
        super().__init__(offset)
        self.offset = offset

    def __str__(self) -> str:
        return f"not UTF-8 from offset {self.offset}"


class HpackError(ValueError):
    """A header block that does not decode (RFC 7541): HTTP/2's COMPRESSION_ERROR, a connection error,
    since the peer's and our dynamic tables can no longer agree. ``reason`` says what was wrong."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class HeaderListTooLarge(HpackError):
    """A header block decoding to more than the advertised SETTINGS_MAX_HEADER_LIST_SIZE (RFC 9113 6.5.2,
    counting each field as name + value + 32): refused before it is held whole."""


class RequestMalformed(ValueError):
    """An HTTP/2 request whose header fields break RFC 9113 8.1.1-8.3.1 (a stream error, PROTOCOL_ERROR);
    ``reason`` says which rule."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason
