"""Pure twin of ``vecpack``: a vector argument packed as little-endian float32 bytes, checked on the way.

``pack(value, dimensions)`` answers the ``dimensions × 4`` bytes of a list or tuple of that many finite
numbers (an int or a float, never a bool), not all zero, or of a
:class:`~brainy.contract.vectors.Float32s` (a vector that came in packed) of that many finite float32s, not all
zero (its own bytes). Anything else raises
:class:`~brainy._speedups.errors.VectorRefused` with its ``reason``: ``"not-a-list"``, ``"length"``,
``"not-a-number"`` (a non-number, a bool, a value past float32's range, NaN or infinity) or
``"zero-vector"``. Which reason wins when several apply: the order just given.

``code_bounds(codes, query, scales, step, per_scale, constant, out)`` writes into ``out`` (float32, one per row)
``scale * (step * dot + per_scale) + constant`` computed in float64, ``dot`` the exact product of the row of
``codes`` (a C-contiguous int8 matrix: a base's quantised copy) with ``query`` (int16, as long as a row; rows
of at most 516 cells, so no sum leaves int32) and ``scale`` the row's in ``scales`` (float32): the upper bound
of each slot's score (brainy/index/vector_matrix.py). ValueError when the shapes do not fit together. Float64
products of these integers are exact and the rest is the same float64 arithmetic, so the twins agree to the bit.

``quantise(vectors, codes, scales)`` writes a base's quantised copy of ``vectors`` (a C-contiguous float32
matrix of finite cells) into ``codes`` (int8, the same shape) and ``scales`` (float32, one per row): a row's
scale is its largest ``|x|`` over 127 in float32, and each cell's code ``round(x / scale)`` to the nearest even
in float64, clipped to -127..127 (a row of zeros: scale 0, codes 0). ValueError when the shapes do not fit
together. Both twins do those operations in that precision, so they agree to the bit.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from brainy._speedups.errors import VectorRefused
from brainy.contract.vectors import Float32s

__all__ = ["code_bounds", "pack", "quantise"]

CODE_MAX = 127  # a code's range, -127..127 (brainy/index/vector_matrix.py CODE_MAX: this floor imports nothing above)

_NUMBERS = frozenset((int, float))


def pack(value: Any, dimensions: int) -> bytes:
    if type(value) is Float32s:
        if len(value) != dimensions:
            raise VectorRefused("length")
        cells = np.frombuffer(value.cells, dtype="<f4")
        if not np.isfinite(cells).all():
            raise VectorRefused("not-a-number")
        if not cells.any():
            raise VectorRefused("zero-vector")
        return value.cells
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


def code_bounds(
    codes: np.ndarray,
    query: np.ndarray,
    scales: np.ndarray,
    step: float,
    per_scale: float,
    constant: float,
    out: np.ndarray,
) -> None:
    if codes.ndim != 2 or codes.shape[1] != len(query) or len(out) != len(codes) or len(scales) != len(codes):
        raise ValueError("codes, query, scales and out do not fit together")
    if codes.shape[1] > 516:
        raise ValueError("rows longer than 516 cells could overflow int32")
    dots = codes.astype(np.float64) @ query.astype(np.float64)
    out[:] = (scales.astype(np.float64) * (step * dots + per_scale) + constant).astype(np.float32)


def quantise(vectors: np.ndarray, codes: np.ndarray, scales: np.ndarray) -> None:
    if vectors.ndim != 2 or codes.shape != vectors.shape or scales.shape != (len(vectors),):
        raise ValueError("vectors, codes and scales do not fit together")
    scales[:] = np.abs(vectors).max(axis=1, initial=0) / np.float32(CODE_MAX)
    wide = np.where(scales > 0, scales, 1).astype(np.float64)
    codes[:] = np.clip(np.rint(vectors / wide[:, None]), -CODE_MAX, CODE_MAX)
