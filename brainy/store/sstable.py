"""Immutable sorted tables (docs/store-format.md, "SSTables").

    table  := data_block* bloom_block index_block footer
    block  := contents  crc: u32
    footer := index_offset: u64  index_size: u32  bloom_offset: u64  bloom_size: u32
              entries: u64  version: u32  crc: u32  magic[8]        (FOOTER_SIZE = 48)

Versions are sorted by user key ascending, then generation descending.
Block decoding is the ``sstblock`` speedup (Cython, with a pure twin).
"""

from __future__ import annotations

import bisect
import hashlib
import itertools
import mmap
import os
import struct
import threading
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import msgpack

from brainy._speedups import sstblock
from brainy._speedups.errors import BlockCorruptError
from brainy.contract import refusals as R
from brainy.store.crc import crc32
from brainy.store.files import fsync_dir

MAGIC = b"brnysst1"
VERSION = 2  # 2: the index block names the store (storeId); 1, read as well, does not
READ_VERSIONS = (1, 2)
FOOTER_SIZE = 8 + 4 + 8 + 4 + 8 + 4 + 4 + 8
BLOCK_BYTES = 4096
RESTART_INTERVAL = 16
# A table is written through a buffer this large: its blocks are about BLOCK_BYTES each (a vectored row's entry is
# 1.5 KB), and the default 8 KiB buffer made each block its own write call (5,448 calls for a 28,000-entry flush).
WRITE_BUFFER = 1 << 20
BLOOM_BITS_PER_KEY = 10
BLOOM_PROBES = 7
BLOCK_CACHE = 2048  # decoded blocks kept per table (a 1,000-row page spans a few hundred)

_footer = struct.Struct("<QIQIQII8s")
assert _footer.size == FOOTER_SIZE
_u32 = struct.Struct("<I")


def torn(path: Path, detail: str) -> Exception:
    return R.StoreUnservableError(
        f"table {path.parent.name}/{path.name} is torn: {detail}",
        reason="torn-sstable",
        file=f"{path.parent.name}/{path.name}",
    )


def _bloom_hash(key: bytes) -> tuple[int, int]:
    h = int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "little")
    return h & 0xFFFFFFFF, h >> 32


def _with_crc(contents: bytes) -> bytes:
    return contents + _u32.pack(crc32(contents))


def write_table(path: Path, entries: Iterable[tuple[bytes, int, bytes]], store_id: str | None = None) -> dict:
    """Write ``entries`` (sorted: key ascending, generation descending) to ``path`` durably, its index block
    naming ``store_id``, the store it is written in.

    Answers the table's MANIFEST entry fields: size, minGen, maxGen, entries.
    """
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb", buffering=WRITE_BUFFER) as out:
        index, bloom_keys, count, min_gen, max_gen, offset = sstblock.write_entries(
            entries, out.write, BLOCK_BYTES, RESTART_INTERVAL
        )
        bloom = _with_crc(sstblock.build_bloom(bloom_keys, BLOOM_BITS_PER_KEY, BLOOM_PROBES))
        bloom_offset = offset
        out.write(bloom)
        offset += len(bloom)
        owner = {} if store_id is None else {"storeId": store_id}
        index_doc = msgpack.packb(
            {"blocks": index, **owner, "minGen": min_gen, "maxGen": max_gen, "entries": count}, use_bin_type=True
        )
        index_block = _with_crc(index_doc)
        index_offset = offset
        out.write(index_block)
        head = struct.pack("<QIQIQI", index_offset, len(index_doc), bloom_offset, len(bloom) - 4, count, VERSION)
        out.write(head + _u32.pack(crc32(head)) + MAGIC)
        out.flush()
        os.fsync(out.fileno())
    os.replace(tmp, path)
    fsync_dir(path.parent)
    return {"size": path.stat().st_size, "minGen": min_gen, "maxGen": max_gen, "entries": count}


_FIELDS = ("minGen", "maxGen", "entries")


def _tail_fields(doc: bytes) -> dict[str, Any] | None:
    """The index block's storeId (when it names one), minGen, maxGen and entries read from its end, where
    :func:`write_table` puts them (after "blocks"), without passing over the blocks: None when the block is not
    laid out so (the caller then reads it in order). Skipping the blocks was a walk of every block's row: 78M
    instructions, 20 ms, of an attach at a million rows."""
    owned = doc.startswith(b"\x85\xa6blocks")
    if not owned and not doc.startswith(b"\x84\xa6blocks"):
        return None
    at = doc.rfind(b"\xa6minGen", max(0, len(doc) - 64))
    if at < 0:
        return None
    try:
        fields = msgpack.unpackb(b"\x83" + doc[at:], raw=False)
        if list(fields) != list(_FIELDS) or not all(type(fields[name]) is int for name in _FIELDS):
            return None
        if owned:
            named = doc.rfind(b"\xa7storeId", max(0, at - 128), at)
            if named < 0:
                return None
            store = msgpack.unpackb(b"\x81" + doc[named:at], raw=False)
            if list(store) != ["storeId"] or not isinstance(store["storeId"], str):
                return None
            fields.update(store)
    except (ValueError, msgpack.UnpackException):
        return None
    return fields


class Table:
    """A read handle on one table: footer, bloom and index in memory, blocks read through a cache."""

    def __init__(self, path: Path, store_id: str | None = None) -> None:
        """``store_id``: the store the table is read for; a table whose index block names another store (one
        copied in under a name this store's MANIFEST gives) is refused as torn, never read as this store's."""
        self.path = path
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size < FOOTER_SIZE:
                raise torn(path, "shorter than its footer")
            self._map = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        mm = self._map
        # the footer, then the bloom and index blocks before it, asked for exactly: a first touch of a cold
        # page read 8 MB around it (this disk's read-ahead), 15 ms a table, of blocks an open never reads
        self._will_need(size - FOOTER_SIZE, FOOTER_SIZE - 4)
        (index_offset, index_size, bloom_offset, bloom_size, entries, version, crc, magic) = _footer.unpack_from(
            mm, size - FOOTER_SIZE
        )
        if magic != MAGIC or crc32(mm[size - FOOTER_SIZE : size - 12]) != crc:
            raise torn(path, "bad footer")
        if version not in READ_VERSIONS:
            raise R.StoreUnservableError(
                f"table {path.name} has version {version}", reason="newer-record-profile", file=f"sst/{path.name}"
            )
        if index_offset + index_size + 4 > size or bloom_offset + bloom_size + 4 > size:
            raise torn(path, "footer points past the end")
        tail = min(index_offset, bloom_offset)
        self._will_need(tail, size - FOOTER_SIZE - tail - 4)
        self._bloom = self._checked(bloom_offset, bloom_size, "bloom block")
        if len(self._bloom) <= 4:
            raise torn(path, "bloom block holds no bits")
        # checked at open, decoded when a lookup first gets past the bloom (most of a replayed tail's keys are in
        # no table: an attach at a million rows opened 50 tables, 30 ms, to consult their blooms alone)
        self._index_doc = self._checked(index_offset, index_size, "index block")
        self._bounds: Any = None  # array("Q"): where each block's last key lies in the index, once read
        self._offsets: Any = None  # array("Q"): where each block lies, and its size
        self._sizes: Any = None
        try:  # the index's other fields, its blocks passed over unbuilt (a read asks every table's maxGen)
            fields = _tail_fields(self._index_doc)
            if fields is None:
                fields = {}
                unpacker = msgpack.Unpacker(raw=False, max_buffer_size=max(len(self._index_doc), 1))
                unpacker.feed(self._index_doc)
                for _ in range(unpacker.read_map_header()):
                    name = unpacker.unpack()
                    if name == "blocks":
                        unpacker.skip()
                    else:
                        fields[name] = unpacker.unpack()
            self.min_gen, self.max_gen, self.entries = fields["minGen"], fields["maxGen"], fields["entries"]
            named = fields.get("storeId")
        except Exception:
            raise torn(path, "index block does not decode") from None
        if named is not None and store_id is not None and named != store_id:
            raise torn(path, f"it is another store's table (storeId {named})")
        self._cache: OrderedDict[int, tuple[list[bytes], list[int], list[bytes]]] = OrderedDict()
        self._lock = threading.Lock()
        self.size = size

    @property
    def cached_blocks(self) -> int:
        """How many decoded blocks this table holds in its cache (the host's footprint counts them)."""
        return len(self._cache)

    def _index(self) -> Any:
        """Where each block's last key lies in the index block, read with the blocks' offsets and sizes the first
        time they are needed (two threads may both read them: equal arrays). ``sstblock.read_index`` reads them
        in place into three arrays and ``sstblock.bisect_index`` searches the keys where they lie: no object a
        block (326,686 at 1.8 GB: 74 ms through msgpack; then 28-100 ms of a first read at a million rows for a
        bytes object a key, 7 ms without)."""
        bounds = self._bounds
        if bounds is not None:
            return bounds
        try:
            bounds, self._offsets, self._sizes = sstblock.read_index(self._index_doc)
        except ValueError:
            raise torn(self.path, "index block does not decode") from None
        self._bounds = bounds  # last: a thread that sees them sees the offsets too
        return bounds

    def _first_block(self, key: bytes) -> tuple[int, int]:
        """The first block whose last key is at or after ``key``, and how many blocks there are."""
        bounds = self._index()
        return sstblock.bisect_index(self._index_doc, bounds, key), len(bounds) // 2

    def _checked(self, offset: int, size: int, what: str) -> bytes:
        contents = self._map[offset : offset + size]
        if crc32(contents) != _u32.unpack_from(self._map, offset + size)[0]:
            raise torn(self.path, f"{what} checksum mismatch")
        return contents

    def may_contain(self, key: bytes) -> bool:
        return sstblock.bloom_holds(self._bloom, key)

    def block(self, i: int, point: bool = False) -> tuple[list[bytes], list[int], list[bytes]]:
        """Data block ``i`` decoded (kept in the block cache). ``point`` (a lookup, not a scan): the kernel is asked
        for exactly the block's pages before they are touched. A fault on a page not in memory otherwise reads
        around it as far as the device's read-ahead (8 MB on this box's disk): 1.9 ms for a 5 KB block of a
        cold table against 76 us asked for, while a scan wants that read-around, and keeps it."""
        with self._lock:
            hit = self._cache.get(i)
            if hit is not None:
                self._cache.move_to_end(i)
                return hit
        self._index()
        offset, size = self._offsets[i], self._sizes[i]
        if point:
            self._will_need(offset, size)
        try:
            decoded = sstblock.decode_block(self._map, offset, size)
        except BlockCorruptError as exc:
            raise torn(self.path, f"data block {i} at offset {offset}: {exc.reason}") from None
        with self._lock:
            self._cache[i] = decoded
            if len(self._cache) > BLOCK_CACHE:
                self._cache.popitem(last=False)
        return decoded

    def prefetch(self, key: bytes) -> tuple[int, int]:
        """Ask the kernel to read ahead the block a lookup of ``key`` reads first, unless it is decoded already. A
        replay asks for all of a frame's blocks before it reads one: from a cold page cache each read alone was
        a disk read waited for in turn (150 us a block at a million rows); asked together they are read at once.
        Answers where the lookup starts (``get``'s ``first``), so it searches the index once."""
        first = self._first_block(key)
        i = first[0]
        if i < first[1] and i not in self._cache:
            self._will_need(self._offsets[i], self._sizes[i])
        return first

    def _will_need(self, offset: int, size: int) -> None:
        """Ask the kernel to read the pages of the block at ``offset`` (and its checksum), and only those."""
        start = offset - offset % mmap.PAGESIZE
        self._map.madvise(mmap.MADV_WILLNEED, start, offset + size + 4 - start)

    def get(self, key: bytes, generation: int, first: tuple[int, int] | None = None) -> tuple[int, bytes] | None:
        """The newest version of ``key`` at or below ``generation``, or None if the table has none. ``first``,
        what :meth:`prefetch` answered for ``key`` once its bloom passed it: the bloom and the index not asked
        again."""
        if first is None:
            if not sstblock.bloom_holds(self._bloom, key):
                return None
            first = self._first_block(key)
        i, blocks = first
        while i < blocks:
            keys, gens, values = self.block(i, point=True)
            j = bisect.bisect_left(keys, key)
            while j < len(keys) and keys[j] == key:
                if gens[j] <= generation:
                    return gens[j], values[j]
                j += 1
            if j < len(keys):
                return None
            i += 1  # the key's older versions continue in the next block
        return None

    def scan(self, start: bytes, stop: bytes | None) -> Iterator[tuple[bytes, int, bytes]]:
        """Every version with ``start <= key < stop`` (``stop`` None: to the end), in table order."""
        i, blocks = self._first_block(start)
        while i < blocks:
            keys, gens, values = self.block(i)
            first = bisect.bisect_left(keys, start) if keys[0] < start else 0
            for j in range(first, len(keys)):
                if stop is not None and keys[j] >= stop:
                    return
                yield keys[j], gens[j], values[j]
            i += 1

    def verify(self) -> None:
        """Decode every block (checking every checksum)."""
        self._index()
        for i, (offset, size) in enumerate(zip(self._offsets, self._sizes)):
            try:
                sstblock.decode_block(self._map, offset, size)
            except BlockCorruptError as exc:
                raise torn(self.path, f"data block {i}: {exc.reason}") from None

    def close(self) -> None:
        self._map.close()


class Blooms:
    """The bloom blocks of several tables, probed together for many keys (:meth:`holding`): each key hashed
    once, each probe run over every table in one array operation. A replayed tail looks up thousands of keys,
    most of them new, in every table (50 at a million rows); one call a key and table costs 1.1 us, half of
    the attach. The same filter ``sstblock.build_bloom`` writes (docs/store-format.md, "Bloom block")."""

    def __init__(self, tables: Iterable[Table]) -> None:
        import numpy as np  # the vector index's dependency; only a replay pays for its import here

        self._np = np
        self.tables = list(tables)
        sizes = [len(t._bloom) - 4 for t in self.tables]
        self._bits = np.frombuffer(b"".join(t._bloom[4:] for t in self.tables), dtype=np.uint8)
        self._starts = np.array([0, *itertools.accumulate(sizes)][: len(sizes)], dtype=np.uint64)[None, :]
        self._m = np.array([8 * size for size in sizes], dtype=np.uint64)[None, :]
        self._probes = np.array([_u32.unpack_from(t._bloom, 0)[0] for t in self.tables])

    def holding(self, keys: list[bytes]) -> dict[bytes, list[Table]]:
        """For each key, the tables (in their order) whose bloom may hold it: most often none."""
        np = self._np
        if not keys:
            return {}
        hashes = np.array([_bloom_hash(key) for key in keys], dtype=np.uint64)
        h1, h2 = hashes[:, :1], hashes[:, 1:]
        holds = np.ones((len(keys), len(self.tables)), dtype=bool)
        three, seven = np.uint64(3), np.uint64(7)
        for i in range(int(self._probes.max())):
            b = (h1 + np.uint64(i) * h2) % self._m
            bit = (self._bits[self._starts + (b >> three)] >> (b & seven).astype(np.uint8)) & 1
            holds &= (bit == 1) | (i >= self._probes)[None, :]
        tables = self.tables
        out: dict[bytes, list[Table]] = {key: [] for key in keys}
        for row, column in zip(*np.nonzero(holds)):
            out[keys[row]].append(tables[column])
        return out


class Probed:
    """Sources (sources.py) whose lookups of keys probed ahead (:meth:`probe`) visit only the
    memtables and the tables whose bloom may hold them, with the answers ``Sources.lookup`` gives; every other
    key and every scan goes to the sources as it would. A replay looks its frames' rows up through it.

    ``fresh_from`` is the flushed ``nextDenseInt``: a row keeps its dense int for its life and a new row mints
    one above every one minted before (docs/store-format.md, "Frames"), so a frame whose first op on a key puts
    a row of a dense int at or above it writes a key no table holds live: it is looked up in the memtables
    alone, no bloom asked (at a million rows 40% of a tail's new keys passed some table's bloom falsely, each
    pass a block read and the table's index decoded)."""

    def __init__(self, sources: Any, fresh_from: int) -> None:
        self.sources = sources
        self._blooms: Blooms | None = None  # built for the first key no fresh row vouches for
        self._fresh_from = fresh_from
        self._holding: dict[bytes, list[tuple[Table, tuple[int, int]]]] = {}  # each table, where its lookup starts

    def probe(self, written: list[tuple[bytes, dict[str, Any] | None]]) -> None:
        """Probe for the keys a frame writes (``log.Frame.written``: each op's key and the row it puts)."""
        fresh: dict[bytes, bool] = {}
        for key, row in written:
            if key not in fresh:  # the first op decides: a delete before a put reads what the tables hold
                fresh[key] = row is not None and row["denseInt"] >= self._fresh_from
        probed = [key for key, new in fresh.items() if not new]
        if probed and self._blooms is None:
            self._blooms = Blooms(self.sources.tables)  # 1.5 ms at a million rows, spared a tail of new rows
        tables = self._blooms.holding(probed) if self._blooms is not None and probed else {}
        self._holding = {
            key: [] if new else [(table, table.prefetch(key)) for table in tables[key]] for key, new in fresh.items()
        }

    def lookup(self, key: bytes, generation: int) -> bytes | None:
        holding = self._holding.get(key)
        if holding is None:
            return self.sources.lookup(key, generation)
        for source in (self.sources.mem, *self.sources.frozen):
            hit = source.get(key, generation)
            if hit is not None:
                return hit[1] or None
        for table, first in holding:
            hit = table.get(key, generation, first)
            if hit is not None:
                return hit[1] or None
        return None

    def scan(self, start: bytes, stop: bytes | None, generation: int) -> Iterator[tuple[bytes, bytes]]:
        return self.sources.scan(start, stop, generation)
