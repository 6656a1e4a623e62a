# Types for the compiled memtable put (memput.pyx); the pure twin memput_py.py has the same surface.
from collections.abc import Iterable

__all__ = ["put_many", "versions_in", "with_version"]

Version = tuple[int, bytes]

def put_many(
    versions: dict[bytes, Version | list[Version]],
    items: Iterable[tuple[bytes, bytes]] | dict[bytes, bytes],
    generation: int,
) -> tuple[list[bytes], int]: ...
def with_version(versions: Version | list[Version], generation: int, value: bytes) -> Version | list[Version]: ...
def versions_in(
    keys: list[bytes], versions: dict[bytes, Version | list[Version]]
) -> list[tuple[bytes, int, bytes]]: ...
