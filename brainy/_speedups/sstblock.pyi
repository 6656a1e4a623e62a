# Types for the compiled sstblock (sstblock.pyx); the pure twin sstblock_py.py has the same surface.
from array import array
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Final

from typing_extensions import Buffer

__all__ = [
    "encode_block",
    "decode_block",
    "read_index",
    "bisect_index",
    "crc32",
    "bloom_holds",
    "build_bloom",
    "write_entries",
    "RESTART_INTERVAL",
]

RESTART_INTERVAL: Final[int]

def crc32(data: Buffer) -> int: ...
def encode_block(
    keys: Sequence[bytes],
    gens: Sequence[int],
    values: Sequence[bytes],
    restart_interval: int = 16,
) -> bytes: ...
def decode_block(buf: Buffer, offset: int, size: int) -> tuple[list[bytes], list[int], list[bytes]]: ...
def bloom_holds(contents: Buffer, key: bytes) -> bool: ...
def build_bloom(keys: list[bytes], bits_per_key: int, probes: int) -> bytes: ...
def write_entries(
    entries: Iterable[tuple[bytes, int, bytes]],
    write: Callable[[bytes], object],
    block_bytes: int,
    restart_interval: int = ...,
) -> tuple[list[list[Any]], list[bytes], int, int, int, int]: ...
def read_index(contents: Buffer) -> tuple[array[int], array[int], array[int]]: ...
def bisect_index(contents: Buffer, bounds: array[int], key: bytes) -> int: ...
