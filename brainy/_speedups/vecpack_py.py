"""Pure twin of ``vecpack``: a vector argument packed as little-endian float32 bytes, checked on the way.

``pack(value, dimensions)`` answers the ``dimensions × 4`` bytes of a list or tuple of that many finite
numbers (an int or a float, never a bool), not all zero. Anything else raises
:class:`~brainy._speedups.errors.VectorRefused` with its ``reason``: ``"not-a-list"``, ``"length"``,
``"not-a-number"`` (a non-number, a bool, a value past float32's range, NaN or infinity) or
``"zero-vector"``. Which reason wins when several apply: the order just given.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from brainy._speedups.errors import VectorRefused

__all__ = ["pack"]

_NUMBERS = frozenset((int, float))


def pack(value: Any, dimensions: int) -> bytes:
    if not isinstance(value, (list, tuple)):
        raise VectorRefused("not-a-list")
    if len(value) != dimensions:
        raise VectorRefused("length")
    if not set(map(type, value)) <= _NUMBERS:
        raise VectorRefused("not-a-number")
    try:
        with np.errstate(over="ignore", invalid="ignore"):  # past float32's range reads as inf, refused below
            packed = np.asarray(value, dtype="<f4")
    except OverflowError:  # an int past float64's range
        raise VectorRefused("not-a-number") from None
    if not np.isfinite(packed).all():
        raise VectorRefused("not-a-number")
    if not packed.any():
        raise VectorRefused("zero-vector")
    return packed.tobytes()
