"""Pure twin of ``vecdecimal``: a float32 vector's numbers as the shortest decimals that read back as them.

``shortest(blob)`` takes little-endian float32 bytes (a stored vector, ``ndarray.tobytes()``; ValueError when
the length is not a multiple of 4) and answers a list of floats, one a number: for each float32, the double
nearest its shortest round-tripping decimal (DOORS.md 0.3). That decimal has the fewest significant digits of
any that a reader rounding to the nearest float32 (half to even) reads back as the same bits; of two such,
the nearer to the float32, a tie to the even last digit. It is what numpy prints for a float32 (Dragon4 in its
unique mode), and since a double holds any decimal of nine digits or fewer more closely than a float32 can tell
apart, a JSON encoder printing that double's shortest form prints the same decimal back. ``-0.0`` stays
``-0.0``; NaN and the infinities (never in a stored vector) come out as ``float('nan')`` and ``±inf``.
"""

from __future__ import annotations

import numpy as np

__all__ = ["shortest"]


def shortest(blob: bytes | bytearray | memoryview) -> list[float]:
    return list(map(float, np.frombuffer(blob, dtype="<f4").astype(str)))
