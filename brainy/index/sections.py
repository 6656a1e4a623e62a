"""A projections snapshot's sections packed (docs/store-format.md, "Projection snapshots", format 3): the id map's
text and offsets, each posted path's directory and ints, each order column's values and offsets, a slice of
``COLUMN_SLICE`` entries a compiled call (brainy/_speedups/addrow ``pack_texts``, ``pack_postings``,
``pack_column``), a section holding what the compiled packer does not take packed by msgpack a value at a time.

A snapshot is encoded off the commit path, by a flush or a close, on a thread that holds the interpreter lock
while it packs: no call here packs an O(store) list in one C step, so a commit or a read of the process waits on
it at most a slice's time (0.5-1 ms). brainy/index/projections.py lays the sections out (``encode_snapshot``).
"""

from __future__ import annotations

import itertools
from array import array
from collections.abc import Callable, Iterable
from typing import Any

import msgpack

from brainy._speedups import addrow

TYPECODE = "Q"  # the sections' dense ints and offsets, u64 each


def packed(items: Iterable[Any]) -> bytes:
    """A MessagePack array packed an element at a time: a single C call over an O(store) list would hold the
    interpreter lock throughout, and every commit and read of the process would wait on a background flush."""
    items = list(items)
    packer = msgpack.Packer(use_bin_type=True, autoreset=False)
    packer.pack_array_header(len(items))
    for item in items:
        packer.pack(item)
    return packer.bytes()


# Values a call packs of a column (brainy/_speedups/addrow ``pack_column``): a call holds the interpreter lock, and
# at this size (0.5-1 ms) no commit or read waits long on a background flush.
COLUMN_SLICE = 16_384


def _end_to_end(
    pack: Callable[..., tuple[bytes, bytes] | None],
    source: dict[int, Any],
    keys: list[int],
    one: Callable[[Any], bytes],
) -> tuple[bytes, bytes]:
    """``source``'s values at ``keys`` laid end to end and their offsets: a slice of ``COLUMN_SLICE`` a compiled
    call (``pack``: addrow's ``pack_column`` or ``pack_texts``), or, when a slice holds a value it does not take,
    every value a call of ``one`` (which packs it, or says what it is)."""
    ends, parts, at = [_ZERO_OFFSET], [], 0
    for lo in range(0, len(keys), COLUMN_SLICE):
        got = pack(source, keys, lo, min(lo + COLUMN_SLICE, len(keys)), at)
        if got is None:
            encoded = [one(source[d]) for d in keys]
            return offsets_of(encoded), b"".join(encoded)
        ends.append(got[0])
        parts.append(got[1])
        at += len(got[1])
    return b"".join(ends), b"".join(parts)


def column_sections(column: dict[int, Any], keys: list[int]) -> tuple[bytes, bytes]:
    """A column's offsets and its values packed end to end: a slice of plain leaves a compiled call (the column
    packed a value at a time in Python was half a base's encoding, 1.6 us a row), a column holding any other value
    a value at a time."""
    packer = msgpack.Packer(use_bin_type=True)  # resets after each value: one value's bytes a call
    return _end_to_end(addrow.pack_column, column, keys, packer.pack)


_ZERO_OFFSET = array(TYPECODE, [0]).tobytes()


def id_sections(ids: dict[int, str]) -> tuple[bytes, bytes, bytes]:
    """The id map's ``dense``, ``idOffsets`` and ``idText`` sections: the ids' UTF-8 laid end to end a slice a
    compiled call, not each id encoded into bytes of its own, listed, then joined (an id that is not a str: a
    value at a time, whose encode says what it is)."""
    keys = sorted(ids)
    offsets, text = _end_to_end(addrow.pack_texts, ids, keys, lambda text: text.encode("utf-8"))
    return array(TYPECODE, keys).tobytes(), offsets, text


def posting_sections(values: dict[tuple[str, Any], array]) -> tuple[bytes, bytes]:
    """A path's ``postings/<path>`` directory (``[kind, value, first, count]`` each, in the map's order) and its
    ``postingInts/<path>``: a slice of values a compiled call, a path holding any other value a value at a time
    (with both in Python, a base of 50,000 rows of an ``addMany``'s shape took 103-115 ms to encode; 84-87 now)."""
    entries, ints, first = iter(values.items()), [], 0
    parts = [msgpack.Packer(use_bin_type=True).pack_array_header(len(values))]  # a Packer is no thread's to share
    while chunk := list(itertools.islice(entries, COLUMN_SLICE)):
        got = addrow.pack_postings(chunk, 0, len(chunk), first)
        if got is None:
            directory, first = [], 0
            for (kind, value), posting in values.items():
                directory.append([kind, value, first, len(posting)])
                first += len(posting)
            return packed(directory), b"".join(posting.tobytes() for posting in values.values())
        parts.append(got[0])
        ints.append(got[1])
        first += len(got[1]) // 8
    return b"".join(parts), b"".join(ints)


def offsets_of(parts: list[bytes]) -> bytes:
    """len(parts) + 1 u64 offsets: part i is bytes [offsets[i], offsets[i+1]) of the parts joined."""
    offsets = array(TYPECODE, [0])
    offsets.extend(itertools.accumulate(len(p) for p in parts))
    return offsets.tobytes()
