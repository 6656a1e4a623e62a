"""What a read consults: the live memtable, the frozen ones a flush is writing out, and the tables, newest first.

Every version is tagged with the generation that wrote it, so a read at a generation takes, for each key, the
newest version at or below it from the first source that holds the key. The handle's head (``head.py``) holds
the sources of now; a flush or compaction swaps in new ones, and a read snapshot (brainy/index/snapshot.py)
keeps reading the ones it took.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from brainy.store.memtable import Memtable
from brainy.store.sstable import Table


class Sources:
    """What a read consults, newest first: the live memtable, frozen memtables, tables."""

    __slots__ = ("mem", "frozen", "tables", "resolved")

    def __init__(self, mem: Memtable, frozen: tuple[Memtable, ...], tables: tuple[Table, ...]) -> None:
        self.mem, self.frozen, self.tables = mem, frozen, tables
        # which version of a key reads through these sources found (brainy/index/encoded_rows.py, Resolved)
        self.resolved: Any = None

    def __iter__(self) -> Iterator[Any]:
        yield self.mem
        yield from self.frozen
        yield from self.tables

    def lookup(self, key: bytes, generation: int) -> bytes | None:
        hit = self.version(key, generation)
        return hit[1] if hit is not None else None

    def version(self, key: bytes, generation: int) -> tuple[int, bytes] | None:
        """``(the generation that wrote it, its value)`` of the version of ``key`` read at ``generation``."""
        for source in self:
            hit = source.get(key, generation)
            if hit is not None:
                return hit if hit[1] else None
        return None

    def scan(self, start: bytes, stop: bytes | None, generation: int) -> Iterator[tuple[bytes, bytes]]:
        for key, _, value in self.scan_versions(start, stop, generation):
            yield key, value

    def scan_versions(self, start: bytes, stop: bytes | None, generation: int) -> Iterator[tuple[bytes, int, bytes]]:
        """:meth:`scan` with the generation that wrote each value."""
        decided: dict[bytes, tuple[int, bytes]] = {}
        for source in self:
            for key, gen, value in source.scan(start, stop):
                if gen <= generation and key not in decided:
                    decided[key] = (gen, value)
        for key in sorted(decided):
            gen, value = decided[key]
            if value:
                yield key, gen, value

    def versions(self, key: bytes, generation: int) -> list[tuple[int, bytes]]:
        """Every version of ``key`` at or below ``generation``, newest first (a tombstone's value is empty)."""
        found: dict[int, bytes] = {}
        stop = key + b"\x00"
        for source in self:
            for k, gen, value in source.scan(key, stop):
                if k == key and gen <= generation:
                    found.setdefault(gen, value)
        return sorted(found.items(), reverse=True)
