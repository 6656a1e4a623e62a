"""Vectors on the wire (DOORS.md 0.3): MessagePack carries each number as a float32, JSON as the shortest
decimal that reads back as the same float32, so the two encodings decode to equal float32s.

A stored vector leaves the engine as a :class:`Vector`: a list whose numbers already are those shortest
decimals (so any JSON encoder prints them right), and which the MessagePack codec
(``brainy/net/codecs.py``) recognises and packs as float32s.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np


class Vector(list):
    """A vector on its way out: a list of the shortest decimals of its float32s."""

    __slots__ = ()

    @classmethod
    def of(cls, values: bytes | bytearray | memoryview | Iterable[float]) -> Vector:
        """From float32 bytes (a stored vector, ``ndarray.tobytes()``) or from numbers (rounded to float32)."""
        if isinstance(values, (bytes, bytearray, memoryview)):
            return cls.of_float32(bytes(values))
        return cls.of_float32(np.asarray(list(values), dtype="<f4").tobytes())

    @classmethod
    def of_float32(cls, blob: bytes) -> Vector:
        """The vector stored as little-endian float32 bytes. numpy prints a float32 as its shortest
        round-tripping decimal; the double nearest that decimal is what a JSON encoder prints back."""
        return cls(map(float, np.frombuffer(blob, dtype="<f4").astype(str)))

    def float32_msgpack(self) -> bytes:
        """This vector as a MessagePack array of float32s: 5 bytes a number (not a float64's 9)."""
        n = len(self)
        header = bytes([0x90 | n]) if n < 16 else b"\xdc" + n.to_bytes(2, "big")
        cells = np.empty((n, 5), np.uint8)
        cells[:, 0] = 0xCA
        cells[:, 1:] = np.asarray(self, dtype=">f4").view(np.uint8).reshape(n, 4)
        return header + cells.tobytes()
