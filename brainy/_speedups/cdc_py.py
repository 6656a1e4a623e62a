"""Content-defined chunking, the pure twin of ``cdc.pyx`` (docs/store-format.md, "Blobs").

FastCDC with normalised chunking over a gear fingerprint: ``cuts(data)`` answers the end offset of
every chunk of ``data`` (the last is ``len(data)``; none for empty data). A cut depends only on the
bytes since the previous cut, so chunking may restart from any earlier cut point.
"""

from __future__ import annotations

import hashlib

MIN_SIZE = 8 << 10
AVG_SIZE = 16 << 10
MAX_SIZE = 64 << 10
MASK_S = 0xFFFE000000000000  # 15 bits: strict, before the average size
MASK_L = 0xFFF8000000000000  # 13 bits: loose, from the average size on
_U64 = (1 << 64) - 1

GEAR = tuple(int.from_bytes(hashlib.sha256(b"brainy-gear" + bytes((i,))).digest()[:8], "little") for i in range(256))


def cut(data, start: int = 0) -> int:
    """The end of the chunk that starts at ``start``."""
    view = memoryview(data).cast("B")
    n = len(view)
    if n - start <= MIN_SIZE:
        return n
    end = min(n, start + MAX_SIZE)
    normal = min(end, start + AVG_SIZE)
    gear, fp, i = GEAR, 0, start + MIN_SIZE
    while i < normal:
        fp = ((fp << 1) + gear[view[i]]) & _U64
        i += 1
        if not fp & MASK_S:
            return i
    while i < end:
        fp = ((fp << 1) + gear[view[i]]) & _U64
        i += 1
        if not fp & MASK_L:
            return i
    return end


def cuts(data, start: int = 0) -> list[int]:
    """The end offset of every chunk of ``data[start:]``, in order."""
    n = len(memoryview(data).cast("B"))
    out = []
    while start < n:
        start = cut(data, start)
        out.append(start)
    return out
