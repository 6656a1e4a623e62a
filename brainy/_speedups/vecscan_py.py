"""Pure twin of ``vecscan``: a write's vectors found in its request body and packed, before the body is decoded.

``msgpack_vectors(body, items)`` walks the one MessagePack document in ``body`` to where a write door's vectors
stand: with ``items`` false, the value of the top-level map's ``"vector"`` key (``add``, ``update``); with
``items`` true, the value of the ``"vector"`` key of each map in the array under the top-level map's ``"items"``
key (``addMany``, ``updateMany``). Keys match as strings only (a bin key is another key). Such a value is
packed when it is an array of one number or more, all float32 (``0xca``) or all float64 (``0xcb``).

The answer is ``(rest, found)``: ``found`` lists ``(where, cells)`` in document order, ``where`` -1 for the
top-level vector and the item's index for an item's, ``cells`` the little-endian float32 bytes of its numbers (a
float64 rounded to the nearest float32, half to even, as the vector packer rounds a float); ``rest`` is ``body``
with each packed array replaced by nil (``0xc0``). Decoding ``rest`` and putting ``Float32s(cells)`` at each
``where`` gives the document ``body`` holds, each packed vector's list of numbers aside.

``msgpack_holes(body, items)`` is the same walk answering ``[(start, stop, Float32s(cells)), ...]`` instead: where
each packed array's encoding starts and stops in ``body``, with its vector, for ``mpread.unpack`` to read the body
with each vector in its place (no ``rest`` copied, nothing placed after).

None when there is nothing to pack, and whenever the walk would have to choose for the decoder: the body is not
exactly one well-formed document (truncated, a reserved byte ``0xc1``, bytes after it), the top level is not a
map, or ``"items"`` (at the top) or ``"vector"`` (in one map) is a key twice. The caller then decodes the body as
it is, so every error is the decoder's own.

``json_vectors(body, items)`` is the same for a JSON body, with ``null`` for each packed array in ``rest``. There
an array is packed when it holds one number or more, each written as the JSON grammar writes a number and read by
the decoder as the packer takes it: an integer of at most 18 digits (``-0`` is the int 0, so ``+0.0``), or a
number with a fraction or an exponent of at most 19 significant digits, read as the nearest double (one past a
double's range, which the decoder refuses, is not packed); each is rounded to float32 as the packer rounds. An
array holding anything else is left in ``rest`` for the decoder to read, or to refuse. The walk gives up (None)
where it would have to choose: the body is not one object (whitespace aside), a key it reads is escaped (it does
not unescape) or given twice, or an object it walks is not well formed around its members.

``place(document, found)`` puts ``Float32s(cells)`` at each ``(where, cells)`` of ``found`` in the decoded
``rest``: ``document["vector"]`` for -1, ``document["items"][where]["vector"]`` for an item's. The compiled twin
makes each ``Float32s`` without a call into its Python ``__init__`` (which set ``cells`` alone): a served row of a
MessagePack ``addMany`` paid that call, and this loop's steps in the interpreter, more than its vector's walk.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from brainy.contract.vectors import Float32s

__all__ = ["json_vectors", "msgpack_holes", "msgpack_vectors", "place"]

# bytes after the type byte of each fixed-size type
_FIXED = {0xC0: 0, 0xC2: 0, 0xC3: 0, 0xCA: 4, 0xCB: 8, 0xCC: 1, 0xCD: 2, 0xCE: 4, 0xCF: 8, 0xD0: 1, 0xD1: 2}
_FIXED.update({0xD2: 4, 0xD3: 8, 0xD4: 2, 0xD5: 3, 0xD6: 5, 0xD7: 9, 0xD8: 17})
# (width of the length, extra bytes before the payload) of each sized type: bin, ext (its type byte), str
_SIZED = {0xC4: (1, 0), 0xC5: (2, 0), 0xC6: (4, 0), 0xC7: (1, 1), 0xC8: (2, 1), 0xC9: (4, 1)}
_SIZED.update({0xD9: (1, 0), 0xDA: (2, 0), 0xDB: (4, 0)})
_COUNTED = {0xDC: ("array", 2), 0xDD: ("array", 4), 0xDE: ("map", 2), 0xDF: ("map", 4)}
_STRS = frozenset((0xD9, 0xDA, 0xDB))
_VECTOR, _ITEMS = b"vector", b"items"


class _Malformed(Exception):
    pass


def _head(b: bytes, i: int) -> tuple[str, int, int]:
    """``(kind, n, j)`` of the value at ``i``: a map of n pairs or an array of n values whose members start at
    ``j``; a ``str`` (or other ``bytes``) whose n bytes start at ``j``; a ``scalar`` ending at ``j``."""
    if i >= len(b):
        raise _Malformed
    t = b[i]
    if t <= 0x7F or t >= 0xE0:
        return "scalar", 0, i + 1
    if t <= 0x8F:
        return "map", t & 0x0F, i + 1
    if t <= 0x9F:
        return "array", t & 0x0F, i + 1
    if t <= 0xBF:
        n, j = t & 0x1F, i + 1
        if j + n > len(b):
            raise _Malformed
        return "str", n, j
    if t in _FIXED:
        j = i + 1 + _FIXED[t]
        if j > len(b):
            raise _Malformed
        return "scalar", 0, j
    if t in _SIZED:
        width, extra = _SIZED[t]
        if i + 1 + width > len(b):
            raise _Malformed
        n = int.from_bytes(b[i + 1 : i + 1 + width], "big")
        j = i + 1 + width + extra
        if j + n > len(b):
            raise _Malformed
        return ("str" if t in _STRS else "bytes"), n, j
    if t in _COUNTED:
        kind, width = _COUNTED[t]
        if i + 1 + width > len(b):
            raise _Malformed
        return kind, int.from_bytes(b[i + 1 : i + 1 + width], "big"), i + 1 + width
    raise _Malformed  # 0xc1, never used


def _skip(b: bytes, i: int) -> int:
    """Where the value at ``i`` ends."""
    remaining = 1
    while remaining:
        kind, n, j = _head(b, i)
        remaining -= 1
        if kind == "map":
            remaining += 2 * n
        elif kind == "array":
            remaining += n
        elif kind != "scalar":
            j += n
        if remaining > len(b):  # each value takes a byte at least: a count past the body is a truncation
            raise _Malformed
        i = j
    return i


def _key(b: bytes, i: int) -> tuple[bytes | None, int]:
    """A map key's UTF-8 bytes when it is a string (None otherwise), and where it ends."""
    kind, n, j = _head(b, i)
    if kind == "str":
        return b[j : j + n], j + n
    return None, _skip(b, i)


def _packed(b: bytes, i: int) -> tuple[bytes, int] | None:
    """The float32 cells of the array at ``i`` and where it ends, if it is one of floats of one width."""
    kind, n, j = _head(b, i)
    if kind != "array" or n == 0 or j >= len(b) or b[j] not in (0xCA, 0xCB):
        return None
    stride = 5 if b[j] == 0xCA else 9
    end = j + stride * n
    if end > len(b):
        return None
    cells = np.frombuffer(b, np.uint8, count=stride * n, offset=j).reshape(n, stride)
    if not (cells[:, 0] == b[j]).all():
        return None
    numbers = np.ascontiguousarray(cells[:, 1:]).view(">f4" if stride == 5 else ">f8").ravel()
    with np.errstate(over="ignore"):  # past float32's range: inf, which the packer refuses
        return numbers.astype("<f4").tobytes(), end


def _vector_of_map(b: bytes, i: int, where: int, found: list, spans: list) -> int:
    """Walk the map at ``i`` (any other value is skipped), packing its ``"vector"``; where it ends."""
    kind, n, j = _head(b, i)
    if kind != "map":
        return _skip(b, i)
    seen = False
    for _ in range(n):
        key, j = _key(b, j)
        if key == _VECTOR:
            if seen:
                raise _Malformed  # the decoder keeps the last: not chosen here
            seen = True
            packed = _packed(b, j)
            if packed is not None:
                found.append((where, packed[0]))
                spans.append((j, packed[1]))
                j = packed[1]
                continue
        j = _skip(b, j)
    return j


def msgpack_vectors(body: bytes | bytearray | memoryview, items: bool) -> tuple[bytes, list[tuple[int, bytes]]] | None:
    walked = _msgpack_walk(bytes(body), items)
    if walked is None:
        return None
    spans, found = walked
    return _rest(bytes(body), spans, b"\xc0"), found


def msgpack_holes(body: bytes | bytearray | memoryview, items: bool) -> list[tuple[int, int, Float32s]] | None:
    walked = _msgpack_walk(bytes(body), items)
    if walked is None:
        return None
    spans, found = walked
    return [(start, stop, Float32s(cells)) for (start, stop), (_, cells) in zip(spans, found)]


def _msgpack_walk(b: bytes, items: bool) -> tuple[list[tuple[int, int]], list[tuple[int, bytes]]] | None:
    """Where each vector the walk packs stands, and its packing; None for msgpack_vectors's None."""
    found: list[tuple[int, bytes]] = []
    spans: list[tuple[int, int]] = []
    try:
        kind, n, j = _head(b, 0)
        if kind != "map":
            return None
        if not items:
            end = _vector_of_map(b, 0, -1, found, spans)
        else:
            seen = False
            for _ in range(n):
                key, j = _key(b, j)
                if key != _ITEMS:
                    j = _skip(b, j)
                    continue
                if seen:
                    return None
                seen = True
                kind, count, k = _head(b, j)
                if kind != "array":
                    j = _skip(b, j)
                    continue
                for index in range(count):
                    k = _vector_of_map(b, k, index, found, spans)
                j = k
            end = j
    except _Malformed:
        return None
    if end != len(b) or not found:
        return None
    return spans, found


def _rest(b: bytes, spans: list[tuple[int, int]], filler: bytes) -> bytes:
    """The body with ``filler`` (a nil, a null) in place of each packed array's span."""
    pieces, at = [], 0
    for start, stop in spans:
        pieces += [b[at:start], filler]
        at = stop
    pieces.append(b[at:])
    return b"".join(pieces)


# -- JSON --------------------------------------------------------------------------------------------------------

_WS = re.compile(rb"[ \t\n\r]*")
_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.S)
_SCALAR = re.compile(rb"[^,}\] \t\n\r]*")
_NUMBER = re.compile(rb"(-?)(0|[1-9][0-9]*)(?:\.([0-9]+))?(?:[eE]([+-]?[0-9]+))?")


class _GiveUp(Exception):
    pass


def _ws(b: bytes, i: int) -> int:
    return _WS.match(b, i).end()  # type: ignore[union-attr]


def _js_skip(b: bytes, i: int) -> int:
    """Where the value at ``i`` ends: brackets matched, strings skipped (the decoder checks the rest)."""
    if i >= len(b):
        raise _GiveUp
    if b[i] == 0x22:
        found = _STRING.match(b, i)
        if found is None:
            raise _GiveUp
        return found.end()
    if b[i] not in b"{[":
        return _SCALAR.match(b, i).end()  # type: ignore[union-attr]
    depth = 0
    while i < len(b):
        c = b[i]
        if c == 0x22:
            found = _STRING.match(b, i)
            if found is None:
                raise _GiveUp
            i = found.end()
            continue
        if c in b"{[":
            depth += 1
        elif c in b"}]":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    raise _GiveUp


def _js_number(b: bytes, i: int) -> tuple[float, int] | None:
    """The number at ``i`` as the decoder and the packer take it (a float, or an int as a float), and its end."""
    found = _NUMBER.match(b, i)
    if found is None:
        return None
    sign, whole, fraction, exponent = found.groups()
    if whole == b"0" and found.end() < len(b) and b[found.end()] in b"0123456789":
        return None  # a leading zero: the decoder refuses it
    if fraction is None and exponent is None:
        if len(whole) > 18:
            return None  # an int the decoder might make a float of
        value = float(int(whole))  # "-0" is the int 0: +0.0
        return (-value if sign and value else value), found.end()
    significant = (whole + (fraction or b"")).lstrip(b"0")
    if len(significant) > 19 or abs(int(exponent or 0)) > 100000:
        return None
    number = float(found.group())  # correctly rounded, as the decoder reads it
    if number in (float("inf"), float("-inf")):
        return None  # past a double's range: the decoder refuses it
    return number, found.end()


def _js_vector(b: bytes, i: int, where: int, found: list, spans: list) -> int:
    if i >= len(b) or b[i] != 0x5B:  # '['
        return _js_skip(b, i)
    numbers = []
    j = _ws(b, i + 1)
    while True:
        read = _js_number(b, j)
        if read is None:
            return _js_skip(b, i)
        numbers.append(read[0])
        j = _ws(b, read[1])
        if j < len(b) and b[j] == 0x2C:  # ','
            j = _ws(b, j + 1)
            continue
        if j < len(b) and b[j] == 0x5D:  # ']'
            break
        return _js_skip(b, i)
    with np.errstate(over="ignore"):  # past float32's range: inf, which the packer refuses
        found.append((where, np.asarray(numbers, dtype=np.float64).astype("<f4").tobytes()))
    spans.append((i, j + 1))
    return j + 1


def _js_pairs(b: bytes, i: int, name: bytes, where: int, found: list, spans: list) -> int:
    """The object at ``i`` (any other value skipped), its ``name`` member walked; where it ends."""
    if i >= len(b) or b[i] != 0x7B:  # '{'
        return _js_skip(b, i)
    j = _ws(b, i + 1)
    if j < len(b) and b[j] == 0x7D:  # '}'
        return j + 1
    seen = False
    while True:
        key = _STRING.match(b, j) if j < len(b) and b[j] == 0x22 else None
        if key is None or b"\\" in key.group():
            raise _GiveUp
        j = _ws(b, key.end())
        if j >= len(b) or b[j] != 0x3A:  # ':'
            raise _GiveUp
        j = _ws(b, j + 1)
        if key.group()[1:-1] == name:
            if seen:
                raise _GiveUp  # the decoder keeps the last: not chosen here
            seen = True
            j = _js_items(b, j, found, spans) if where == -2 else _js_vector(b, j, where, found, spans)
        else:
            j = _js_skip(b, j)
        j, more = _after(b, j, 0x7D)  # '}'
        if not more:
            return j


def _after(b: bytes, j: int, close: int) -> tuple[int, bool]:
    """After a member ending at ``j``: the next one's start and True, or the container's end (``close``) and False."""
    j = _ws(b, j)
    if j < len(b) and b[j] == 0x2C:  # ','
        return _ws(b, j + 1), True
    if j < len(b) and b[j] == close:
        return j + 1, False
    raise _GiveUp


def _js_items(b: bytes, i: int, found: list, spans: list) -> int:
    if i >= len(b) or b[i] != 0x5B:  # '['
        return _js_skip(b, i)
    j = _ws(b, i + 1)
    if j < len(b) and b[j] == 0x5D:  # ']'
        return j + 1
    index = 0
    while True:
        j, more = _after(b, _js_pairs(b, j, _VECTOR, index, found, spans), 0x5D)  # ']'
        index += 1
        if not more:
            return j


def json_vectors(body: bytes | bytearray | memoryview, items: bool) -> tuple[bytes, list[tuple[int, bytes]]] | None:
    b = bytes(body)
    found: list[tuple[int, bytes]] = []
    spans: list[tuple[int, int]] = []
    i = _ws(b, 0)
    if i >= len(b) or b[i] != 0x7B:  # '{'
        return None
    try:
        end = _js_pairs(b, i, _ITEMS if items else _VECTOR, -2 if items else -1, found, spans)
    except _GiveUp:
        return None
    if _ws(b, end) != len(b) or not found:
        return None
    return _rest(b, spans, b"null"), found


def place(document: Any, found: list[tuple[int, bytes]]) -> None:
    for where, cells in found:
        (document if where < 0 else document["items"][where])["vector"] = Float32s(cells)
