"""``crc32``: zlib's checksum, the one the store's formats name for their blocks, frames, pages and documents
(docs/store-format.md), the same polynomial and the same values ``zlib.crc32`` gives.

Computed by ISA-L (the ``isal`` package), which folds with carry-less multiplication: 41 GB/s on this box against
zlib's 0.8. An attach checks every table's bloom and index blocks, each log frame it replays and each
projection page it reads, so at a million rows zlib's pace alone was tens of milliseconds of a first door.
"""

from __future__ import annotations

from isal.isal_zlib import crc32

__all__ = ["crc32"]
