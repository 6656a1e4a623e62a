"""Each row version's wire answer, encoded once, in both encodings, in a bounded cache.

A page answered to a transport (``find``, ``related``, ``export``, ``history``, ``get``, ``batchGet``) carries its
rows as :class:`~brainy.contract.encoded.Encoded` bytes, which the codecs splice into the page's
envelope: the 1,000 rows of a page are not rebuilt as dicts and encoded again on every call.

Made from the stored row's bytes (docs/store-format.md, "Rows and keys": a MessagePack map) without
decoding what the answer leaves out: the map's entries are walked and skipped, never decoded, so the
MessagePack answer is the stored entries themselves under a new map header, and only the entries
kept are decoded (for the JSON answer). A ``get`` without its vector never reads the vector; one with it reads
the row's vector key (a row of format 1 holds its vector inline, and that entry is decoded instead).

**Never stale.** An answer is a function of the stored bytes alone (and of the two answer options), with its
vector that of the row's vector key at the version's generation: a vector key is written only with its row, so
that too is named by the version.
The cache is keyed by (brain handle, user key, the generation that wrote the version, the options):
a commit writes a new version under a new generation, and a time-travel read finds that generation's
version. Where the read found the stored bytes, a hit also checks they are the bytes the entry was
made from (the same object, or equal); where it did not need them (:class:`Resolved`), the key alone
names them, since a handle's versions are written once under a generation and never rewritten.

**Bounded.** ``BRAINY_ROW_CACHE_BYTES`` (default 64 MiB) caps the bytes held, counted as both
encodings, the stored bytes the entry checks against, and a fixed overhead per entry. Entries leave
oldest first, but one read since the sweep last passed it gets a second chance (CLOCK): a hit only
marks its entry (``Encoded.used``), where moving it to the newest end cost a page of 1,000 hits ~55 µs.
A handle's close drops its entries (:meth:`RowCache.forget`): no later read can name its serial, and a pool
sweeping a thousand brains would otherwise fill the cache with answers no one can ask for again.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import msgpack
import numpy as np
import orjson

from brainy._speedups import pagerows
from brainy.contract.encoded import Encoded
from brainy.contract.vectors import float32_msgpack
from brainy.store import keys as K
from brainy.store import rows

if TYPE_CHECKING:
    from brainy.index.snapshot import Snapshot, Sources

DEFAULT_BUDGET = 64 << 20
# the key tuple, the entry tuple, the Encoded and its Fragment, the OrderedDict's links, the plain hit a
# page keeps with it and its two heads (brainy/contract/encoded.py, Hit, plain_hit): about this many bytes
ENTRY_OVERHEAD = 760
_VECTOR_KEY = msgpack.packb("vector")


def map_header(n: int) -> bytes:
    """A MessagePack map header for ``n`` entries (fixmap, map 16, map 32)."""
    if n < 16:
        return bytes((0x80 | n,))
    if n < 1 << 16:
        return b"\xde" + n.to_bytes(2, "big")
    return b"\xdf" + n.to_bytes(4, "big")


def entries(raw: bytes) -> list[tuple[str, int, int, int]]:
    """``(key, start, value start, end)`` of each entry of a stored row's map, in stored order; every
    value is skipped, never decoded."""
    unpacker = msgpack.Unpacker(raw=False)
    unpacker.feed(raw)
    out = []
    for _ in range(unpacker.read_map_header()):
        start = unpacker.tell()
        key = unpacker.unpack()
        at = unpacker.tell()
        unpacker.skip()
        out.append((key, start, at, unpacker.tell()))
    return out


def _no_split() -> bytes | None:
    return None


def encode_row(
    raw: bytes,
    include_vector: bool = False,
    include_data: bool = True,
    read_split: Callable[[], bytes | None] = _no_split,
) -> Encoded:
    """A stored row's answer (:func:`brainy.store.rows.public_view`) in both encodings, made from its bytes;
    with ``include_vector``, the vector :func:`brainy.store.rows.vector_of` finds (inline in a format 1 row,
    else under the row's vector key, which ``read_split`` reads)."""
    kept: list[bytes] = []
    inline = has = None
    for key, start, at, end in entries(raw):
        if key == "vector":
            inline = (at, end)
        elif include_data or key != "data":
            kept.append(raw[start:end])
            if key == "hasVector":
                has = (at, end)
    body = b"".join(kept)
    plain = map_header(len(kept)) + body
    # orjson's bytes keep their whole ~4 KiB working buffer: a cached answer is copied to its own size, or
    # a 100-byte row would hold 4 KiB for as long as it is kept
    json = bytes(memoryview(orjson.dumps(msgpack.unpackb(plain, raw=False))))
    if not include_vector:
        return Encoded(json, plain)
    # only the two entries the rule reads are decoded
    told = {
        "vector": None if inline is None else msgpack.unpackb(raw[inline[0] : inline[1]]),
        "hasVector": None if has is None else msgpack.unpackb(raw[has[0] : has[1]]),
    }
    blob = rows.vector_of(told, read_split)
    if blob is None:
        return Encoded(json, plain)
    # public_view puts the vector last: so do both encodings here
    out = rows.vector_out(blob)
    json = json[:-1] + (b',"vector":' if len(json) > 2 else b'"vector":') + orjson.dumps(out) + b"}"
    # the float32s as they are stored: the decimals read back as the same bits
    cells = float32_msgpack(np.frombuffer(blob, dtype="<f4"))
    return Encoded(json, map_header(len(kept) + 1) + body + _VECTOR_KEY + cells)


class RowCache:
    """Encoded row versions within a byte budget, the oldest not read since the sweep passed it out first
    (a second chance for one read). Thread-safe.

    Keyed by (brain handle serial, user key, generation of the version, the two answer options)."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self.bytes = 0
        self.hits = self.misses = 0
        self._entries: OrderedDict[tuple[int, bytes, int, bool, bool], tuple[bytes, Encoded, int]] = OrderedDict()
        self._by_serial: dict[int, set[tuple[int, bytes, int, bool, bool]]] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    def cached(self, slot: tuple[int, bytes, int, bool, bool]) -> Encoded | None:
        """The answer kept for ``slot``, if it is kept."""
        with self._lock:
            entry = self._entries.get(slot)
            if entry is None:
                return None
            entry[1].used = True
            self.hits += 1
            return entry[1]

    def encoded(
        self,
        slot: tuple[int, bytes, int, bool, bool],
        raw: bytes,
        read_split: Callable[[], bytes | None] = _no_split,
    ) -> Encoded:
        """The answer for ``slot`` (serial, user key, generation, options) of the version whose stored bytes
        are ``raw``: kept only if made from these very bytes. ``read_split`` reads the row's vector key at the
        version's generation (:func:`encode_row`); what it answers is the same for every read of the version,
        since a vector key is written only with its row, so the slot still names the answer."""
        with self._lock:
            entry = self._entries.get(slot)
            if entry is not None and (entry[0] is raw or entry[0] == raw):
                entry[1].used = True
                self.hits += 1
                return entry[1]
        made = encode_row(raw, slot[3], slot[4], read_split)
        cost = made.size + len(raw) + ENTRY_OVERHEAD
        with self._lock:
            self.misses += 1
            old = self._entries.pop(slot, None)
            if old is not None:
                self.bytes -= old[2]
            if cost <= self.budget:
                self._entries[slot] = (raw, made, cost)
                self._by_serial.setdefault(slot[0], set()).add(slot)
                self.bytes += cost
                while self.bytes > self.budget:
                    oldest, kept = self._entries.popitem(last=False)
                    # read since the sweep last passed it: cleared, and to the newest end; the entry just
                    # made never makes room for itself
                    if kept[1].used or oldest is slot:
                        kept[1].used = False
                        self._entries[oldest] = kept
                        continue
                    self.bytes -= kept[2]
                    self._unindex(oldest)
            elif old is not None:
                self._unindex(slot)
        return made

    def _unindex(self, slot: tuple[int, bytes, int, bool, bool]) -> None:
        slots = self._by_serial.get(slot[0])
        if slots is not None:
            slots.discard(slot)
            if not slots:
                del self._by_serial[slot[0]]

    def forget(self, serial: int) -> None:
        """Drop every answer kept for the handle ``serial`` (it closed)."""
        with self._lock:
            for slot in self._by_serial.pop(serial, ()):
                entry = self._entries.pop(slot, None)
                if entry is not None:
                    self.bytes -= entry[2]

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._by_serial.clear()
            self.bytes = 0


#: The process's one cache, shared by every brain it serves.
CACHE = RowCache(int(os.environ.get("BRAINY_ROW_CACHE_BYTES", DEFAULT_BUDGET)))


class Resolved:
    """Which version of each key reads through one :class:`~brainy.index.snapshot.Sources` found, so a
    read at or above it needs no table: the point lookups of a page cost more than its encoding did.

    Sound because of what a Sources is: its tables and frozen memtables never change, and its live
    memtable only gains versions above the durable head. A version found by a read at G0 at or above
    ``settled`` (the newest generation in the tables and frozen memtables) is, for any generation G at
    or above its own, still the newest version at G unless the live memtable holds a newer one at or
    below G: the unchanging sources hold nothing newer (everything they hold is at or below G0, and the
    read at G0 found nothing newer), so one memtable probe settles it. A flush or compaction swaps in
    new Sources, which start with nothing resolved. Bounded: past ``MAX_KEYS`` keys it starts again.

    Each key also keeps the highest read generation its answer is known for (``through``): a read at
    ``at`` between the version's generation and ``through`` needs no memtable probe either, since the
    read at ``through`` found nothing newer and every version the memtable gains later is above the
    durable head, so above ``through`` (a read's generation is durable). A page read again at the same
    head, the common case, probes nothing.
    """

    MAX_KEYS = 1 << 17

    __slots__ = ("settled", "found")

    def __init__(self, sources: Sources) -> None:
        gens = [t.max_gen for t in sources.tables] + [m.max_generation for m in sources.frozen]
        self.settled = max(gens, default=0)
        # user key -> (generation of the version found, the highest read generation it is known for)
        self.found: dict[bytes, tuple[int, int]] = {}

    @staticmethod
    def of(sources: Sources) -> Resolved:
        resolved = sources.resolved
        if resolved is None:
            resolved = sources.resolved = Resolved(sources)
        return resolved

    def generation(self, sources: Sources, key: bytes, generation: int) -> int | None:
        """The generation of the version of ``key`` a read at ``generation`` finds, when known without one."""
        known = self.found.get(key)
        if known is None or generation < known[0]:
            return None
        if generation <= known[1]:
            return known[0]
        newer = sources.mem.get(key, generation)
        if newer is not None and newer[0] > known[0]:
            return None
        self.found[key] = (known[0], generation)
        return known[0]

    def note(self, key: bytes, read_at: int, generation: int) -> None:
        """A read at ``read_at`` found the version of ``key`` written at ``generation``."""
        if read_at >= self.settled:
            if len(self.found) >= self.MAX_KEYS:
                self.found.clear()
            self.found[key] = (generation, read_at)


def answer(
    view: Snapshot, key: bytes, generation: int, raw: bytes, include_vector: bool = False, include_data: bool = True
) -> Any:
    """A row version's answer as ``view`` hands rows out: encoded bytes for a transport's snapshot
    (:meth:`~brainy.index.snapshot.Snapshot.for_wire`), a plain document for a call in process. The
    plain document without a vector is decoded from the cached MessagePack, which never held the vector;
    one with its vector is the whole row's :func:`~brainy.store.rows.public_view` (a
    :class:`~brainy.contract.vectors.Vector`, as in-process callers get it). The vector is read at
    ``generation``, the version's, as every read of it would find it."""
    if not include_vector:
        made = CACHE.encoded((view.serial, key, generation, False, include_data), raw)
        return made if view.wire else made.msgpack_document()
    vkey, sources = K.vector_key(key), view.sources

    def read_split() -> bytes | None:
        return sources.lookup(vkey, generation)

    if not view.wire:
        return rows.public_view(rows.whole(rows.unpack(raw), read_split), True, include_data)
    made = CACHE.encoded((view.serial, key, generation, include_vector, include_data), raw, read_split)
    return made if view.wire else made.msgpack_document()


def lookup(view: Snapshot, key: bytes, include_vector: bool = False, include_data: bool = True) -> Any:
    """The answer of the row under user key ``key`` as ``view`` reads it (:func:`answer`), None when absent."""
    sources, at = view.sources, view.generation
    resolved = sources.resolved or Resolved.of(sources)
    if view.wire or not include_vector:
        known = resolved.generation(sources, key, at)
        if known is not None:
            made = CACHE.cached((view.serial, key, known, include_vector, include_data))
            if made is not None:
                return made if view.wire else made.msgpack_document()
    found = version(view, key)
    if found is None:
        return None
    return answer(view, key, found[0], found[1], include_vector, include_data)


def lookup_many(
    view: Snapshot, keys: list[bytes], include_vector: bool = False, include_data: bool = True
) -> list[Any]:
    """:func:`lookup` of each key, in order: a page's rows, those known without a read found in one pass
    under the cache's lock (brainy/_speedups/pagerows.pyx: a page of 1,000 rows read again at its head is
    2,000 dict probes in one C loop, not 1,000 table lookups nor 1,000 memtable probes); the others
    each by :func:`lookup`."""
    if not view.wire and include_vector:
        return [lookup(view, key, True, include_data) for key in keys]
    with CACHE._lock:
        out, missing = pagerows.cached(
            keys,
            Resolved.of(view.sources).found,
            CACHE._entries,
            view.generation,
            view.serial,
            include_vector,
            include_data,
        )
        CACHE.hits += len(keys) - len(missing)
    if not view.wire:
        out = [made if made is None else made.msgpack_document() for made in out]
    for i in missing:
        out[i] = lookup(view, keys[i], include_vector, include_data)
    return out


def version(view: Snapshot, key: bytes) -> tuple[int, bytes] | None:
    """``(generation, stored bytes)`` of the version of ``key`` ``view`` reads (None when absent), noted
    for :func:`lookup`."""
    sources = view.sources
    found = sources.version(key, view.generation)
    if found is not None:
        Resolved.of(sources).note(key, view.generation, found[0])
    return found
