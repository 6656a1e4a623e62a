"""``crc32``: zlib's checksum, the one the store's formats name for their blocks, frames, pages and documents
(docs/store-format.md), the same polynomial and the same values ``zlib.crc32`` gives.

Computed by ISA-L (the ``isal`` package), which folds with carry-less multiplication: 41 GB/s on this box against
zlib's 0.8. An attach checks every table's bloom and index blocks, each log frame it replays and each
projection page it reads, so at a million rows zlib's pace alone was tens of milliseconds of a first door.

``crc32c_joined``: the CRC-32C (the vector sections' checksum, by the ``crc32c`` package) of chunks laid end to
end from the chunks' own, so one pass over a section can vouch for all of its chunk checksums at once.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

import numpy as np
from isal.isal_zlib import crc32

__all__ = ["crc32", "crc32c_joined"]

CRC32C_POLY = 0x82F63B78  # Castagnoli's polynomial, reflected: the crc32c package's (the vector sections')


def _times(matrix: Sequence[int], vector: int) -> int:
    """A 32x32 matrix over GF(2) (its columns, as ints) times a vector."""
    total, bit = 0, 0
    while vector:
        if vector & 1:
            total ^= matrix[bit]
        vector >>= 1
        bit += 1
    return total


def _composed(outer: Sequence[int], inner: Sequence[int]) -> list[int]:
    """The matrix applying ``inner`` then ``outer``."""
    return [_times(outer, column) for column in inner]


@lru_cache(maxsize=8)
def _advance(size: int) -> tuple[tuple[int, ...], ...]:
    """What ``size`` zero bytes do to a CRC-32C register, as four tables of 256 (one per byte of the register),
    built by squaring the one-zero-bit operator as zlib's crc32_combine does."""
    power = [CRC32C_POLY] + [1 << n for n in range(31)]  # one zero bit
    for _ in range(3):  # 2, 4, then 8 zero bits: one byte
        power = _composed(power, power)
    matrix = [1 << n for n in range(32)]
    while size:
        if size & 1:
            matrix = _composed(power, matrix)
        size >>= 1
        if size:
            power = _composed(power, power)
    values = np.arange(256, dtype=np.uint32)
    tables = []
    for b in range(4):  # a register byte's value maps to the xor of the columns its bits pick
        table = np.zeros(256, np.uint32)
        for bit in range(8):
            table ^= np.where((values >> bit) & 1, np.uint32(matrix[8 * b + bit]), np.uint32(0))
        tables.append(tuple(table.tolist()))
    return tuple(tables)


def crc32c_joined(crcs: Sequence[int], size: int, last: int) -> int:
    """The CRC-32C of parts laid end to end, from each part's own: every part ``size`` bytes but the last,
    ``last`` (crc(A + B) is crc(A) advanced over len(B) zero bytes, xor crc(B)). One pass over a whole section can
    then vouch for every chunk checksum it holds."""
    crcs = [int(crc) for crc in crcs]
    if not crcs:
        return 0
    joined, t0, t1, t2, t3 = crcs[0], *_advance(size)
    for i in range(1, len(crcs)):
        if i == len(crcs) - 1:
            t0, t1, t2, t3 = _advance(last)
        joined = t0[joined & 255] ^ t1[(joined >> 8) & 255] ^ t2[(joined >> 16) & 255] ^ t3[joined >> 24] ^ crcs[i]
    return joined
