"""Pure twin of ``mpread``: a MessagePack document read to Python objects, with given spans taken as given values.

``unpack(body, holes, limit)`` answers the document ``msgpack.unpackb(body, raw=False, strict_map_key=True)``
makes of ``body`` (maps as dicts, arrays as lists, str as str, bin as bytes, every int and float as Python's),
except that where a value's encoding starts at a hole's ``start`` the hole's ``value`` stands instead, and the
decoding goes on at its ``stop``: the bytes between are not read. ``holes`` is a list of ``(start, stop, value)``
in increasing order, as ``vecscan.msgpack_holes`` finds them (each span one value's whole encoding, a vector's
array).

None, where msgpack would make something else or nothing: a body that is not exactly one document (truncated,
the reserved byte ``0xc1``, bytes after it), a str that is not UTF-8, a map key that is neither str nor bin, an
ext value (msgpack's ``ExtType`` or ``Timestamp``: not read here), a hole whose start is not where a value
starts; and a document nesting deeper than ``limit`` levels, counted as ``nesting.too_deep`` counts them (a
list or a dict one level above its deepest member; a hole's value none). The caller then decodes the body the
usual way, whose answer or refusal is the one given.

The decoder it replaces on a MessagePack ``addMany`` (msgpack's ``unpackb`` of the body with nils for its
vectors, then each vector put at its item and the nesting walked) made a fresh key str a row and interned it:
4,700 instructions a row of the ingest benchmark's body, with 1,300 more to put the vectors in and check the
nesting. The compiled twin reads the body once, a short ASCII str taken from a cache of the last ones read.
"""

from __future__ import annotations

import struct
from typing import Any

__all__ = ["unpack"]


class _Unreadable(Exception):
    """Where the body stops being what this reader reads as msgpack does: ``unpack`` answers None."""


_FIXED = {0xCA: ">f", 0xCB: ">d", 0xCC: ">B", 0xCD: ">H", 0xCE: ">I", 0xCF: ">Q"}
_FIXED.update({0xD0: ">b", 0xD1: ">h", 0xD2: ">i", 0xD3: ">q"})
_STR = {0xD9: 1, 0xDA: 2, 0xDB: 4}
_BIN = {0xC4: 1, 0xC5: 2, 0xC6: 4}
_ARRAY = {0xDC: 2, 0xDD: 4}
_MAP = {0xDE: 2, 0xDF: 4}
_WIDTHS = {1: ">B", 2: ">H", 4: ">I"}


class _Reader:
    def __init__(self, body: bytes, holes: list[tuple[int, int, Any]], limit: int) -> None:
        self.b, self.at, self.limit = body, 0, limit
        self.holes, self.next = holes, 0

    def take(self, n: int) -> bytes:
        if n > len(self.b) - self.at:
            raise _Unreadable
        out = self.b[self.at : self.at + n]
        self.at += n
        return out

    def length(self, width: int) -> int:
        return struct.unpack(_WIDTHS[width], self.take(width))[0]

    def text(self, n: int) -> str:
        try:
            return self.take(n).decode("utf-8")
        except UnicodeDecodeError:
            raise _Unreadable from None

    def value(self, depth: int) -> Any:
        if self.next < len(self.holes) and self.holes[self.next][0] == self.at:
            _, self.at, found = self.holes[self.next]
            self.next += 1
            return found
        t = self.take(1)[0]
        if t <= 0x7F:
            return t
        if t >= 0xE0:
            return t - 0x100
        if 0xA0 <= t <= 0xBF:
            return self.text(t & 0x1F)
        if 0x90 <= t <= 0x9F:
            return self.array(t & 0x0F, depth)
        if 0x80 <= t <= 0x8F:
            return self.map(t & 0x0F, depth)
        if t == 0xC0:
            return None
        if t in (0xC2, 0xC3):
            return t == 0xC3
        if t in _FIXED:
            form = _FIXED[t]
            return struct.unpack(form, self.take(struct.calcsize(form)))[0]
        if t in _STR:
            return self.text(self.length(_STR[t]))
        if t in _BIN:
            return self.take(self.length(_BIN[t]))
        if t in _ARRAY:
            return self.array(self.length(_ARRAY[t]), depth)
        if t in _MAP:
            return self.map(self.length(_MAP[t]), depth)
        raise _Unreadable  # 0xc1, and the ext types 0xc7-0xc9, 0xd4-0xd8

    def array(self, n: int, depth: int) -> list[Any]:
        if depth + 1 > self.limit:
            raise _Unreadable
        return [self.value(depth + 1) for _ in range(n)]

    def map(self, n: int, depth: int) -> dict[Any, Any]:
        if depth + 1 > self.limit:
            raise _Unreadable
        out = {}
        for _ in range(n):
            t = self.take(1)[0]
            if 0xA0 <= t <= 0xBF:
                key: Any = self.text(t & 0x1F)
            elif t in _STR:
                key = self.text(self.length(_STR[t]))
            elif t in _BIN:
                key = self.take(self.length(_BIN[t]))
            else:
                raise _Unreadable  # strict_map_key: a str or a bin (and never a hole: holes are values)
            out[key] = self.value(depth + 1)
        return out


def unpack(body: bytes | bytearray | memoryview, holes: list[tuple[int, int, Any]], limit: int) -> Any:
    reader = _Reader(bytes(body), holes, limit)
    try:
        document = reader.value(0)
    except _Unreadable:
        return None
    if reader.at != len(reader.b) or reader.next != len(holes):
        return None
    return document
