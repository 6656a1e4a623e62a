"""Vectors on the wire (DOORS.md 0.3): MessagePack carries each number as a float32, JSON as the shortest
decimal that reads back as the same float32, so the two encodings decode to equal float32s.

A stored vector leaves the engine as a :class:`Vector`: a list whose numbers already are those shortest
decimals (so any JSON encoder prints them right), and which the MessagePack codec
(``brainy/net/codecs.py``) recognises and packs as float32s. The decimals are worked out by the
``vecdecimal`` speedup, a floor above this one: ``brainy.store.rows.vector_out`` makes a Vector of a
stored vector's bytes.
"""

from __future__ import annotations

import numpy as np


class Vector(list):
    """A vector on its way out: a list of the shortest decimals of its float32s."""

    __slots__ = ()

    def float32_msgpack(self) -> bytes:
        """This vector as a MessagePack array of float32s: 5 bytes a number (not a float64's 9)."""
        return float32_msgpack(np.asarray(self, dtype=">f4"))


class Float32s:
    """A vector argument that came in as an array of numbers (JSON, or MessagePack float32s or float64s), kept as
    the little-endian float32 bytes the store would pack it to, never read as Python floats
    (brainy/_speedups/vecscan*). It stands where the list
    would: ``len`` is its count of numbers, and the vector packer (``vecpack``) checks it as it checks a list of
    those numbers, with the same refusals."""

    __slots__ = ("cells",)

    def __init__(self, cells: bytes) -> None:
        self.cells = cells

    def __len__(self) -> int:
        return len(self.cells) // 4

    def __eq__(self, other: object) -> bool:
        return type(other) is Float32s and other.cells == self.cells

    __hash__ = None  # type: ignore[assignment]  # as a list's

    def __repr__(self) -> str:
        return f"Float32s({np.frombuffer(self.cells, dtype='<f4').tolist()!r})"


def float32_msgpack(values: np.ndarray) -> bytes:
    """Float32 ``values`` (any byte order) as a MessagePack array of float32s: what
    :meth:`Vector.float32_msgpack` answers for the Vector of the same numbers, without reading them as
    Python floats first."""
    n = len(values)
    header = bytes([0x90 | n]) if n < 16 else b"\xdc" + n.to_bytes(2, "big")
    cells = np.empty((n, 5), np.uint8)
    cells[:, 0] = 0xCA
    cells[:, 1:] = values.astype(">f4", copy=False).view(np.uint8).reshape(n, 4)
    return header + cells.tobytes()
