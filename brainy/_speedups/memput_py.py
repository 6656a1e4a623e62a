"""Pure twin of ``memput``: one commit's keys put into the memtable's versions (brainy/store/memtable.py).

``put_many(versions, items, generation) -> (new, size)``: each ``(key, value)`` of ``items`` (pairs, or a dict's
items: a commit's staged keys) put into ``versions`` (a dict of each key's versions: one version as its
``(generation, value)`` tuple, two or more as a list of them in generation order) at ``generation``; answers the
keys that were not there (in the order put) and the bytes the puts add to the memtable's count (each
``len(key) + len(value) + 16``).

A key's versions with ``(generation, value)`` put: a later op of the same commit replaces the commit's version;
a later commit's is added after it (a list from the second version on, changed in place, which a scan copies
before it reads).

``versions_in(keys, versions) -> entries``: every version of each of ``keys`` (in their order) in ``versions``
as ``(key, generation, value)``, a key's newest first: a frozen memtable's entries as a flush's table takes them.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["put_many", "versions_in", "with_version"]

Version = tuple[int, bytes]


def put_many(
    versions: dict[bytes, Version | list[Version]],
    items: Iterable[tuple[bytes, bytes]] | dict[bytes, bytes],
    generation: int,
) -> tuple[list[bytes], int]:
    new: list[bytes] = []
    size = 0
    for key, value in items.items() if isinstance(items, dict) else items:
        found = versions.get(key)
        if found is None:
            new.append(key)
            versions[key] = (generation, value)
        else:
            versions[key] = with_version(found, generation, value)
        size += len(key) + len(value) + 16
    return new, size


def with_version(versions: Version | list[Version], generation: int, value: bytes) -> Version | list[Version]:
    """A key's versions with ``(generation, value)`` put."""
    if isinstance(versions, tuple):
        if versions[0] == generation:
            return (generation, value)
        return [versions, (generation, value)]
    if versions[-1][0] == generation:
        versions[-1] = (generation, value)
    else:
        versions.append((generation, value))
    return versions


def versions_in(keys: list[bytes], versions: dict[bytes, Version | list[Version]]) -> list[tuple[bytes, int, bytes]]:
    entries: list[tuple[bytes, int, bytes]] = []
    for key in keys:
        found = versions[key]
        if isinstance(found, tuple):
            entries.append((key, found[0], found[1]))
        else:
            entries.extend((key, gen, value) for gen, value in reversed(found[:]))
    return entries
