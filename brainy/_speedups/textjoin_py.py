"""A file's text joined from consecutive pieces of its content: the pure twin of ``textjoin.pyx``.

A verified read hands a file's bytes out chunk by chunk (``BlobStore.pieces``), each piece a view into
one reused buffer. A joiner takes them in order (``add``) and answers the whole text (``finish``)
without the bytes ever being gathered into one buffer first: that gathering (a 100 MiB allocation and
copy) and a decode or encode of the whole were most of a large read after its hash.

``Utf8Join``: the content as UTF-8 text.
A character may straddle two pieces: its first bytes wait (``carry``) for the rest. The first byte where
the text stops being UTF-8 is remembered as ``TextStops.offset`` (the offset ``bytes.decode`` would
name) and later pieces are ignored, so the caller can finish checking the content's address before it
says which refusal applies: damage is ``BlobCorruptError``, never a decode error. ``finish`` raises
``TextStops`` for content that is not UTF-8, a character cut short at the end included.

``Base64Join``: the content as base64 (RFC 4648, padded, no line breaks). A group of three bytes may
straddle two pieces: its first bytes are carried to the next.
"""

from __future__ import annotations

import codecs

import pybase64

from brainy._speedups.errors import TextStops

__all__ = ["Base64Join", "TextStops", "Utf8Join"]

_decode = codecs.utf_8_decode


def sequence_length(lead: int) -> int:
    """How many bytes the UTF-8 sequence beginning with ``lead`` takes (1 for a byte that begins none)."""
    return 2 if 0xC0 <= lead < 0xE0 else 3 if 0xE0 <= lead < 0xF0 else 4 if 0xF0 <= lead < 0xF8 else 1


class Utf8Join:
    """Text assembled piece by piece; ``total`` (the content's size) is a hint the compiled twin sizes by."""

    def __init__(self, total: int = 0, parts: list[str] | None = None, at: int = 0) -> None:
        self.parts: list[str] = parts if parts is not None else []
        self.carry = b""  # the first bytes of a character the next piece completes
        self.at = at  # the offset of the next piece's first byte
        self.stop: int | None = None

    def add(self, piece) -> None:
        if self.stop is not None:
            return
        view = memoryview(piece).cast("B")
        start = self.at
        self.at += len(view)
        if self.carry:
            need = sequence_length(self.carry[0]) - len(self.carry)
            if len(view) < need:
                self.carry += bytes(view)  # still short: the next piece completes it (or the end cuts it)
                return
            head = self.carry + bytes(view[:need])
            if self._decode(head, start - len(self.carry)) is None:
                return
            self.carry = b""
            view = view[need:]
            start += need
        used = self._decode(view, start)
        if used is not None and used != len(view):
            self.carry = bytes(view[used:])

    def _decode(self, data, start: int) -> int | None:
        """Decode ``data`` (its first byte at offset ``start``) onto the parts; answer the bytes used, or None
        when text stops in it (then ``stop`` is where)."""
        try:
            text, used = _decode(data, None, False)
        except UnicodeDecodeError as exc:
            self.stop = start + exc.start
            return None
        self.parts.append(text)
        return used

    def finish(self) -> str:
        if self.stop is None and self.carry:
            self.stop = self.at - len(self.carry)  # a character cut short by the end of the content
        if self.stop is not None:
            raise TextStops(self.stop)
        return "".join(self.parts)


class Base64Join:
    """Base64 assembled piece by piece; ``total`` (the content's size) is a hint the compiled twin sizes by."""

    def __init__(self, total: int = 0, parts: list[str] | None = None, carry: bytes = b"") -> None:
        self.parts: list[str] = parts if parts is not None else []
        self.carry = carry  # the first bytes of a group of three the next piece completes

    def add(self, piece) -> None:
        view = memoryview(piece).cast("B")
        if self.carry:
            need = 3 - len(self.carry)
            self.carry += bytes(view[:need])
            view = view[need:]
            if len(self.carry) < 3:
                return
            self.parts.append(pybase64.b64encode_as_string(self.carry))
        cut = len(view) // 3 * 3
        if cut:
            self.parts.append(pybase64.b64encode_as_string(view[:cut]))
        self.carry = bytes(view[cut:])

    def finish(self) -> str:
        if self.carry:
            self.parts.append(pybase64.b64encode_as_string(self.carry))
            self.carry = b""
        return "".join(self.parts)
