"""The memtable: every version written since the flushed generation, in memory.

Each user key maps to its versions in generation order. Writes come from the
one committing thread; reads come from any thread and pick the newest version
at or below the generation they read at, so a reader never sees a commit that
is not yet durable.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator

from sortedcontainers import SortedList

from brainy._speedups import memput

Version = tuple[int, bytes]  # (generation, value)


class Memtable:
    """Each key's versions: one version as its ``(generation, value)`` tuple, two or more as a list of them in
    generation order. A tuple of an int and bytes is let go by the cyclic garbage collector the first time it
    looks at it, where a list is scanned by every collection until the flush: a burst of new rows (two keys
    each, a row and its vector) would otherwise add two lists a row to every full collection of the process."""

    def __init__(self) -> None:
        self._versions: dict[bytes, Version | list[Version]] = {}
        self._keys = SortedList()
        # keys put since the last scan, not yet in _keys: a scan sorts them in first, so a burst of writes with no
        # scan between pays one sort at the next scan (a flush's, at the latest), not an insertion a key
        self._pending: list[bytes] = []
        self._lock = threading.Lock()  # guards _keys and _pending against a scan racing an insert
        self.bytes = 0
        self.max_generation = 0

    def __len__(self) -> int:
        return len(self._versions)

    def put(self, key: bytes, generation: int, value: bytes) -> None:
        self.put_many(((key, value),), generation)

    def put_many(self, items: Iterable[tuple[bytes, bytes]] | dict[bytes, bytes], generation: int) -> None:
        """:meth:`put` of every ``(key, value)`` of one commit (pairs, or a dict of them: brainy/_speedups/memput*):
        its new keys put in the sorted index at once, under one taking of the lock (a batch of a thousand rows puts
        two thousand keys). A new key's version is in ``_versions`` before the index, so a key scanned is always
        there."""
        new, size = memput.put_many(self._versions, items, generation)
        if new:
            with self._lock:
                self._pending.extend(new)
        self.bytes += size
        if generation > self.max_generation:
            self.max_generation = generation

    def get(self, key: bytes, generation: int) -> tuple[int, bytes] | None:
        versions = self._versions.get(key)
        if versions is None:
            return None
        if isinstance(versions, tuple):
            return versions if versions[0] <= generation else None
        for i in range(len(versions) - 1, -1, -1):
            gen, value = versions[i]
            if gen <= generation:
                return gen, value
        return None

    def _sorted(self, start: bytes, stop: bytes | None) -> list[bytes]:
        """The keys with ``start <= key < stop``, ascending (the ones put since the last look sorted in first)."""
        with self._lock:
            if self._pending:
                self._keys.update(self._pending)
                self._pending = []
            return list(
                self._keys.irange(start, stop, inclusive=(True, False))
                if stop is not None
                else self._keys.irange(start)
            )

    def scan(self, start: bytes, stop: bytes | None) -> Iterator[tuple[bytes, int, bytes]]:
        """Every version with ``start <= key < stop``, key ascending then generation descending."""
        for key in self._sorted(start, stop):
            versions = self._versions[key]
            if isinstance(versions, tuple):
                yield key, versions[0], versions[1]
                continue
            for gen, value in reversed(versions[:]):
                yield key, gen, value

    def entries(self) -> list[tuple[bytes, int, bytes]]:
        """Every version, as :meth:`scan` yields them, in one list made by one compiled call (a flush's)."""
        return memput.versions_in(self._sorted(b"", None), self._versions)
