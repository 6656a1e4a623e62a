# Types for the compiled postings (postings.pyx); the pure twin postings_py.py has the same surface.
# A posting list is any C-contiguous 1-d buffer of unsigned 64-bit ints: array('Q') in practice.
from array import array
from collections.abc import Iterable
from typing import Final, SupportsIndex

from typing_extensions import Buffer

__all__ = [
    "GALLOP_RATIO",
    "TYPECODE",
    "contains",
    "difference",
    "intersect",
    "intersect_many",
    "union",
    "union_many",
    "valid",
]

TYPECODE: Final[str]
GALLOP_RATIO: Final[int]

def valid(a: Buffer) -> bool: ...
def contains(a: Buffer, x: SupportsIndex) -> bool: ...
def intersect(a: Buffer, b: Buffer) -> array[int]: ...
def intersect_many(lists: Iterable[Buffer]) -> array[int]: ...
def union(a: Buffer, b: Buffer) -> array[int]: ...
def union_many(lists: Iterable[Buffer]) -> array[int]: ...
def difference(a: Buffer, b: Buffer) -> array[int]: ...
