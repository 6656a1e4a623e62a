"""A vector in an answer, as DOORS 0.3 puts it on the wire.

Every vector an answer carries (``get``/``find`` with ``includeVector``, ``embed``, ``embedBatch``)
is a :class:`WireVector`: a list of its float32 values, so in process it compares, indexes and
iterates as a list does, and a type the encoders know, so ``brainy.net.codecs`` writes each number
as a float32 in MessagePack (5 bytes, not a float64's 9) and as the shortest decimal that
round-trips to the same float32 in JSON: the two encodings decode to the same float32s. It lives
here, beside the contract, because both the engine (which answers vectors) and the net layer's
encoders (which write them) need it, and the engine never imports the net layer.
"""

from __future__ import annotations

from array import array
from typing import Iterable


class WireVector(list):  # type: ignore[type-arg]
    """The float32 numbers of one vector, in an answer."""

    __slots__ = ()

    @classmethod
    def of(cls, values: "bytes | bytearray | memoryview | Iterable[float]") -> "WireVector":
        """From float32 bytes (a stored vector, ``ndarray.tobytes()``) or from numbers (rounded to float32)."""
        if isinstance(values, (bytes, bytearray, memoryview)):
            packed = array("f")
            packed.frombytes(values)
            return cls(packed.tolist())
        return cls(array("f", values).tolist())
