"""The vector index's snapshot files: their layouts, how a link is encoded and written, and the reading ahead
of a chain at an open. The law is docs/store-format.md, "Vector index snapshots":

- **A base** (``<stamp>.vec``) holds the whole index, graph included; **deltas** (``<stamp>.vecd``) after it
  hold the slots written and killed since the link before; a base's **quantised copy** (``<stamp>.vecq``)
  holds its slots as int8 codes with a scale each; a large base's **partitioned copy** (``<stamp>.vecp``) holds
  them in lists by centroid (its layout and search: ``vector_partitions.py``, which stands on this module). :class:`Link` says where an index's chain stands,
  :class:`Frozen` is one link copied to be encoded, :func:`write_link` writes it.
- **Reading ahead.** :func:`check_ahead` begins, when a handle opens, to read and check a large chain's files
  on a helper thread (:class:`Ahead`), so that the read of the index finds them done.

The index (``brainy/index/vectors.py``) freezes itself into links and decodes them, and reads its chain
(``read_chain``); this module stands below it and knows only the slot matrix (``vector_matrix.py``).
"""

from __future__ import annotations

import hashlib
import mmap
import os
import struct
import threading
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import crc32c
import faiss
import numpy as np

from brainy._speedups import vecpack
from brainy.index.projections import newest_snapshot, snapshot_name
from brainy.index.vector_matrix import CHUNK_SLOTS, DIMENSIONS, NO_SLOT, _Codes
from brainy.store.crc import crc32
from brainy.store.directory import store_id_of
from brainy.store.files import write_durably
from brainy.store.workers import LongLived


def _slot_arrays(
    view: memoryview, count: int, dense_at: int, room: int, dense_ints: int
) -> tuple[np.ndarray, np.ndarray, int, int]:
    """A base's dense ints (owned, with ``room`` past its count) and its slot map (dense int -> slot, room for
    ``room`` more and for ``dense_ints``): ``(dense, slot map, live slots, largest dense int)``; ValueError when a
    dense int is out of range."""
    dense = np.empty(max(1024, count + room), np.int64)  # past the count: written before it is read
    dense[:count] = np.frombuffer(view, "<i8", count, dense_at)
    if count and dense[:count].min() < NO_SLOT:
        raise ValueError("a dense int out of range")
    live = dense[:count] != NO_SLOT
    top = int(dense[:count].max(initial=NO_SLOT))
    # room for the dense ints the deltas mint (new entities take the next ones): grown once, here, not by them
    slot = np.full(max(1024, top + 1 + room, dense_ints), NO_SLOT, np.int64)
    slot[dense[:count][live]] = np.flatnonzero(live)
    return dense, slot, int(np.count_nonzero(live)), top


@dataclass
class Prepared:
    """A format 3 or 4 base read ahead (:func:`check_ahead`): its file mapped, its header and dense section checked
    (``layout``, as :func:`_layout` answers it) and the arrays :func:`_slot_arrays` makes of it, with room."""

    data: mmap.mmap
    stamp: int
    count: int
    layout: tuple[int, int, np.ndarray, int, int]
    dense: np.ndarray
    slot: np.ndarray
    live: int
    top: int

    def fits(self, room: int, dense_ints: int) -> bool:
        """Whether the arrays have the room a decode for ``room`` and ``dense_ints`` would give them, or more."""
        return len(self.dense) >= max(1024, self.count + room) and len(self.slot) >= max(
            1024, self.top + 1 + room, dense_ints
        )


def _layout(view: memoryview, count: int, graph_bytes: int) -> tuple[int, int, np.ndarray, int, int]:
    """Where a format 3 or 4 base's sections are, its header and dense section checked: (dense at, vectors at, the
    chunks' checksums, slots a chunk, graphCrc); ValueError when they do not check out."""
    header = _HEADER4 if _HEADER.unpack_from(view)[1] == SNAPSHOT_FORMAT else _HEADER3
    if len(view) < header.size + _CRC.size:
        raise ValueError("sizes do not add up")
    head = header.unpack_from(view)
    chunk, header_crc = head[7], head[-1]
    if crc32c.crc32c(view[: header.size - 4]) != header_crc or chunk == 0:
        raise ValueError("header checksum mismatch")
    chunks = -(-count // chunk)
    dense_at = header.size
    crcs_at = dense_at + 8 * count
    dense_crc_at = crcs_at + 4 * chunks
    vectors_at = _aligned(dense_crc_at + _CRC.size)
    if vectors_at + 4 * DIMENSIONS * count + graph_bytes + _CRC.size != len(view):
        raise ValueError("sizes do not add up")
    if crc32c.crc32c(view[dense_at:dense_crc_at]) != _CRC.unpack_from(view, dense_crc_at)[0]:
        raise ValueError("dense section checksum mismatch")
    graph_crc = _CRC.unpack_from(view, len(view) - _CRC.size)[0]
    if not graph_bytes and graph_crc != 0:
        raise ValueError("checksum mismatch")
    return dense_at, vectors_at, np.frombuffer(view, "<u4", chunks, crcs_at), chunk, graph_crc


def _aligned(at: int) -> int:
    """The vectors section starts on a 64-byte boundary of the file (a cache line: whole rows per line)."""
    return -(-at // 64) * 64


@dataclass
class GraphPart:
    """A base's graph section, as read: checked (format 2 and later) and deserialised only when the graph is wanted."""

    data: bytes | mmap.mmap
    at: int
    size: int
    graphed: int
    crc: int | None  # the base's graphCrc; None: format 1, checked whole with the slots
    crc_of: Any = crc32  # how graphCrc is computed: zlib's crc32 (format 2) or crc32c (format 3 and later)

    def _view(self) -> memoryview:
        part = memoryview(self.data)[self.at : self.at + self.size]
        if self.crc is not None and self.crc_of(part) != self.crc:
            raise ValueError("checksum mismatch")
        return part

    def checked(self) -> bytes:
        return bytes(self._view())

    def load(self) -> Any:
        # read in place: faiss copies what it deserialises, so no copy of the section is made first
        graph = faiss.deserialize_index(np.frombuffer(self._view(), np.uint8))
        if (
            not isinstance(graph, faiss.IndexHNSW)
            or graph.d != DIMENSIONS
            or graph.metric_type != faiss.METRIC_INNER_PRODUCT
        ):
            raise ValueError("the graph is not an inner-product HNSW index of 384 dimensions")
        if graph.ntotal != self.graphed:
            raise ValueError("the graph does not hold the slots the header names")
        return graph


MAGIC = b"BVX1"
DELTA_MAGIC = b"BVD1"
# a base's: crc32c of its header, of its dense ints, of each chunk of vectors, of its graph, and its store named
SNAPSHOT_FORMAT = 4
DELTA_FORMAT = 3  # a delta's: crc32c of it all, and its store named (format 2 names none; format 1: zlib's crc32)
_HEADER = struct.Struct("<4sIQIxxxxQQQ")
_HEADER3 = struct.Struct("<4sIQIxxxxQQQII")  # format 3: chunkSlots and headerCrc after format 2's header
_HEADER4 = struct.Struct("<4sIQIxxxxQQQI16sI")  # format 4: storeTag between them
_DELTA = struct.Struct("<4sIQQQIxxxxQQQ")
_DELTA_STORE = struct.Struct("<16s")  # a format 3 delta's storeTag, after format 2's header
_CRC = struct.Struct("<I")
_CRCS = struct.Struct("<II")  # a format 2 base's slotsCrc and graphCrc
QUANTISED_MAGIC = b"BVQ1"
QUANTISED_FORMAT = 2  # format 1, which named no store, is not read: the next flush writes the copy again
_QUANTISED = struct.Struct("<4sIQIxxxxQI16sI")  # a quantised copy's header, headerCrc last
NO_STORE = bytes(16)  # the storeTag of a file written where no IDENTITY reads: it names no store


def store_tag(root: Path) -> bytes | None:
    """The 16 bytes that name the store at ``root`` in its vector snapshots: the first 16 bytes of the SHA-256 of
    IDENTITY's storeId (docs/store-format.md, "Vector index snapshots"); None when IDENTITY does not read."""
    found = store_id_of(root)
    return None if found is None else hashlib.sha256(found.encode()).digest()[:16]


def owned(named: bytes, store: bytes | None) -> None:
    """ValueError when a file's storeTag ``named`` is another store's than ``store`` (a file copied in from
    another store under the same name is never trusted); a file or a store that names none passes."""
    if store is not None and named != NO_STORE and named != store:
        raise ValueError(f"it is another store's (storeTag {named.hex()}, this store's {store.hex()})")


SUFFIX = ".vec"
DELTA_SUFFIX = ".vecd"
QUANTISED_SUFFIX = ".vecq"
PARTITIONED_SUFFIX = ".vecp"  # a large base's partitioned copy (its layout: brainy/index/vector_partitions.py)
QUANTISE_ROWS = 4_096  # slots quantised at a time when a copy is written (their codes: one 1.5 MB piece of it)


@dataclass(frozen=True)
class Link:
    """Where the snapshot chain of an index stands: its base's stamp, the last link's stamp and slot count, the
    base's slots, the slots the deltas since the base wrote and killed, and how many deltas there are."""

    base: int
    stamp: int
    count: int
    base_slots: int
    since_base: int
    deltas: int


@dataclass
class Owed:
    """A base's copies a flush is to write again (missing, stale, another store's or damaged at the open): the
    base's stamp and slots, its slot matrix (``Slots``: rows below the count are never written again) and its dense
    ints as copied under the brain's lock, and which copies."""

    stamp: int
    slots: int
    vectors: Any
    dense: np.ndarray
    quantised: bool
    partitioned: bool


@dataclass
class Frozen:
    """One link copied under the brain's lock (:meth:`VectorIndex.freeze`), encoded without it. A base has
    ``killed`` None and the index's :class:`Slots` by reference (the slots below its count are never written
    again), and its ``graph`` serialised by :meth:`VectorIndex.graph_for` under the index's graph lock; a delta
    has its vectors copied."""

    stamp: int
    base: int
    previous: int
    first: int
    dense: np.ndarray
    vectors: Any  # Slots (a base) or np.ndarray (a delta)
    killed: np.ndarray | None
    epoch: int = 0
    graph: bytes = b""
    graphed: int = 0
    store: bytes = NO_STORE  # the storeTag written in the file (:func:`store_tag`), set by the writer
    # a base's: the base before it (stamp, slots) when its slots are this one's first ones, unchanged (no
    # compaction since): its quantised copy's codes are this copy's first ones (:func:`write_link`)
    prior: tuple[int, int] | None = None

    @property
    def is_base(self) -> bool:
        return self.killed is None

    def encode(self) -> bytes:
        """The link's file (Damaged when a base's mapped slots fail a check: it is then not written)."""
        return b"".join(self.parts())

    def parts(self) -> list[memoryview]:
        """The link's file as the buffers it is made of, in order: a base's vectors are the slots' own memory (150 MB
        at 100,000 slots: a join of them cost two copies and most of a flush's base). Damaged as :meth:`encode`."""
        written = len(self.dense)
        if self.killed is None:
            vectors = [_bytes_of(part) for part in self.vectors.contiguous(written)]
            chunks = _chunk_checks(vectors, CHUNK_SLOTS * 4 * DIMENSIONS)
            head = _HEADER4.pack(
                MAGIC,
                SNAPSHOT_FORMAT,
                self.stamp,
                DIMENSIONS,
                written,
                self.graphed,
                len(self.graph),
                CHUNK_SLOTS,
                self.store,
                0,
            )[:-4]
            dense = self.dense.astype("<i8").tobytes() + chunks.tobytes()
            front = b"".join((head, _CRC.pack(crc32c.crc32c(head)), dense, _CRC.pack(crc32c.crc32c(dense))))
            pad = bytes(_aligned(len(front)) - len(front))
            graph = memoryview(self.graph)
            return [memoryview(front + pad), *vectors, graph, memoryview(_CRC.pack(crc32c.crc32c(graph)))]
        header = _DELTA.pack(
            DELTA_MAGIC,
            DELTA_FORMAT,
            self.stamp,
            self.base,
            self.previous,
            DIMENSIONS,
            self.first,
            written,
            len(self.killed),
        ) + _DELTA_STORE.pack(self.store)
        body = [
            memoryview(header),
            _bytes_of(self.killed.astype("<i8", copy=False)),
            _bytes_of(self.dense.astype("<i8", copy=False)),
            _bytes_of(self.vectors.astype("<f4", copy=False)),
        ]
        check = 0
        for part in body:
            check = crc32c.crc32c(part, check)
        return [*body, memoryview(_CRC.pack(check))]


def _bytes_of(array: np.ndarray) -> memoryview:
    """An array's memory as bytes, without a copy when it is C-contiguous already."""
    return memoryview(np.ascontiguousarray(array).reshape(-1).view(np.uint8))  # an empty one too (cast refuses it)


def _chunk_checks(parts: list[memoryview], size: int) -> np.ndarray:
    """The crc32c of every ``size`` bytes of the parts laid end to end (the last chunk may be shorter), as little-
    endian uint32s: a chunk may span two parts."""
    checks, check, filled = [], 0, 0
    for part in parts:
        at = 0
        while at < len(part):
            take = min(size - filled, len(part) - at)
            check = crc32c.crc32c(part[at : at + take], check)
            filled, at = filled + take, at + take
            if filled == size:
                checks.append(check)
                check, filled = 0, 0
    if filled:
        checks.append(check)
    return np.array(checks, "<u4")


def write_link(folder: Path, frozen: Frozen, data: bytes | list[memoryview]) -> None:
    """Write one link; a base then its quantised copy, and removes every older base, delta and copy (quantised or
    partitioned: the caller writes the new base's partitioned copy next)."""
    folder.mkdir(exist_ok=True)
    name = snapshot_name(frozen.stamp, SUFFIX if frozen.is_base else DELTA_SUFFIX)
    write_durably(folder / name, data)
    if frozen.is_base:
        copy = snapshot_name(frozen.stamp, QUANTISED_SUFFIX)
        parts = frozen.vectors.contiguous(len(frozen.dense))
        prior = _prior_codes(folder, frozen)
        write_durably(folder / copy, quantised_parts(frozen.stamp, parts, frozen.store, prior))
        kinds = (SUFFIX, DELTA_SUFFIX, QUANTISED_SUFFIX, PARTITIONED_SUFFIX)
        for older in [p for suffix in kinds for p in folder.glob("*" + suffix)]:
            if older.name not in (name, copy):
                older.unlink(missing_ok=True)


def quantise(vectors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Unit vectors as int8 codes and one float32 scale each: ``scale = max |x| / 127``, ``code = round(x / scale)``,
    so no cell lies more than half a scale from its code times the scale (``vecpack.quantise``: one compiled pass
    a row, where numpy's five over float64 work space took 2.2-3.9 us a row, a partitioned copy's every row)."""
    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    codes = np.empty(vectors.shape, np.int8)
    scales = np.empty(len(vectors), np.float32)
    vecpack.quantise(vectors, codes, scales)
    return codes, scales


def encode_quantised(stamp: int, parts: list[np.ndarray], store: bytes = NO_STORE) -> bytes:
    """A base's quantised copy (docs/store-format.md, "Vector index snapshots") of its slots, given in order."""
    return b"".join(quantised_parts(stamp, parts, store))


def quantised_parts(
    stamp: int, parts: list[np.ndarray], store: bytes = NO_STORE, prior: _Codes | None = None
) -> list[memoryview]:
    """:func:`encode_quantised`'s bytes as the buffers they are made of. ``prior``: the quantised copy of the base
    before, whose slots are these slots' first ones: the codes and scales of its whole chunks that check out are
    taken as they are (a slot's codes are its own alone), not worked out again from the float32 rows (4.5 us a row
    of every base, all the store's rows each time). A chunk that fails its check, and every one after it, is
    worked out again: a damaged byte is never carried into a new copy."""
    size = CHUNK_SLOTS * DIMENSIONS
    taken = 0 if prior is None else _checked_chunks(prior) * CHUNK_SLOTS
    codes: list[memoryview] = []
    scales: list[bytes] = []
    crcs = []
    if prior is not None and taken:
        codes.append(_bytes_of(prior.rows[:taken]))
        scales.append(prior.scales[:taken].astype("<f4").tobytes())
        crcs.append(prior.crcs[: taken // CHUNK_SLOTS].astype("<u4"))
    fresh = []
    skip = taken
    for part in parts:
        if skip >= len(part):
            skip -= len(part)
            continue
        for at in range(skip, len(part), QUANTISE_ROWS):
            c, s = quantise(part[at : at + QUANTISE_ROWS])
            fresh.append(c.tobytes())
            scales.append(s.astype("<f4").tobytes())
        skip = 0
    body = b"".join(fresh)
    view = memoryview(body)
    crcs.append(np.array([crc32c.crc32c(view[at : at + size]) for at in range(0, len(body), size)], "<u4"))
    codes.append(view)
    slots = taken + len(body) // DIMENSIONS
    head = _QUANTISED.pack(QUANTISED_MAGIC, QUANTISED_FORMAT, stamp, DIMENSIONS, slots, CHUNK_SLOTS, store, 0)[:-4]
    front = b"".join(scales) + np.concatenate(crcs).astype("<u4").tobytes()
    start = b"".join((head, _CRC.pack(crc32c.crc32c(head)), front, _CRC.pack(crc32c.crc32c(front))))
    return [memoryview(start + bytes(_aligned(len(start)) - len(start))), *codes]


def _checked_chunks(prior: _Codes) -> int:
    """How many of the prior copy's first chunks are whole and check out (crc32c of each chunk's codes)."""
    size = CHUNK_SLOTS * DIMENSIONS
    view = _bytes_of(prior.rows)
    whole = len(prior.rows) // CHUNK_SLOTS
    for c in range(whole):
        if crc32c.crc32c(view[c * size : (c + 1) * size]) != int(prior.crcs[c]):
            return c
    return whole


def _prior_codes(folder: Path, frozen: Frozen) -> _Codes | None:
    """The quantised copy of the base before ``frozen`` (:attr:`Frozen.prior`), read in place, or None: there is
    none, or it is not that base's copy or this store's, or its header or front does not check out."""
    if frozen.prior is None:
        return None
    stamp, slots = frozen.prior
    path = folder / snapshot_name(stamp, QUANTISED_SUFFIX)
    try:
        return decode_quantised(_mapped(path, ahead=False), path.name, stamp, slots, frozen.store)
    except (OSError, ValueError):
        return None


def write_quantised(folder: Path, stamp: int, parts: list[np.ndarray], store: bytes) -> _Codes:
    """Write the quantised copy of the base of ``stamp`` again (it was missing, stale or damaged) and read it back."""
    path = folder / snapshot_name(stamp, QUANTISED_SUFFIX)
    write_durably(path, encode_quantised(stamp, parts, store))
    slots = sum(len(part) for part in parts)
    return decode_quantised(_mapped(path, ahead=False), path.name, stamp, slots, store)


def copy_header(
    view: memoryview,
    layout: struct.Struct,
    magic: bytes,
    form: int,
    stamp: int | None,
    slots: int | None,
    store: bytes | None = None,
) -> tuple[Any, ...]:
    """A base's copy's header (quantised or partitioned: magic, format, stamp, dimensions, slots, a u32 that is not
    0, storeTag, headerCrc), unpacked with ``layout`` and checked; ValueError when it does not check out, or the
    copy is not of the base of ``stamp`` and ``slots`` (a stale copy), or is another store's than ``store`` (None
    for any of the three: not asked)."""
    if len(view) < layout.size:
        raise ValueError("sizes do not add up")
    head = layout.unpack_from(view)
    if head[0] != magic or head[1] != form or head[3] != DIMENSIONS:
        raise ValueError(f"not a {magic.decode()} copy of format {form} at {DIMENSIONS} dimensions")
    if crc32c.crc32c(view[: layout.size - 4]) != head[-1] or head[5] == 0:
        raise ValueError("header checksum mismatch")
    owned(head[6], store)
    if stamp is not None and (head[2] != stamp or head[4] != slots):
        raise ValueError(f"it is the copy of a base of generation {head[2]} and {head[4]} slots")
    return head


def decode_quantised(
    data: bytes | mmap.mmap, name: str, stamp: int | None, slots: int | None, store: bytes | None = None
) -> _Codes:
    """A base's quantised copy read in place, its header and front checked; ValueError when they do not check out
    or it is not the copy of the base of ``stamp`` and ``slots`` or is another store's (:func:`copy_header`)."""
    view = memoryview(data)
    *_, count, chunk, _, _ = copy_header(view, _QUANTISED, QUANTISED_MAGIC, QUANTISED_FORMAT, stamp, slots, store)
    chunks = -(-count // chunk)
    crcs_at = _QUANTISED.size + 4 * count
    front_crc_at = crcs_at + 4 * chunks
    codes_at = _aligned(front_crc_at + _CRC.size)
    if codes_at + DIMENSIONS * count != len(view):
        raise ValueError("sizes do not add up")
    if crc32c.crc32c(view[_QUANTISED.size : front_crc_at]) != _CRC.unpack_from(view, front_crc_at)[0]:
        raise ValueError("front checksum mismatch")
    return _Codes(
        name,
        np.frombuffer(view, np.int8, DIMENSIONS * count, codes_at).reshape(count, DIMENSIONS),
        np.frombuffer(view, "<f4", count, _QUANTISED.size),
        np.frombuffer(view, "<u4", chunks, crcs_at),
        chunk,
    )


@dataclass
class Ahead:
    """What an open reads and checks off the read path, on the ahead helper's thread, begun when a handle opens, by
    file name: a large base's dense ints and slot map (:class:`Prepared`), its quantised copy (mapped, its header
    and front checked, its codes checked whole, :meth:`_Mapped.check_whole`: the generation it copies and the
    copy), and the deltas after the base (each mapped, its checksum found good). A result of None: not read."""

    checks: dict[str, Future[Any]]

    def take(self, path: Path) -> Any:
        """What was read ahead of the file at ``path`` (waited for if under way), or None: the read reads it itself
        (a check not yet begun is called off, so the two threads share the work)."""
        checking = self.checks.pop(path.name, None)
        if checking is None or checking.cancel():
            return None
        return checking.result()

    def cancel(self) -> None:
        """Call off the checks not begun; one under way ends on its own, and its map goes with it."""
        for checking in self.checks.values():
            checking.cancel()


AHEAD_SLOTS = 65_536  # a base this large is read ahead, its copy checked (below it, the scan's checks take < 5 ms)
AHEAD_DELTA_BYTES = AHEAD_SLOTS * DIMENSIONS  # deltas this large in all are checked ahead (each a whole-file pass)
AHEAD_ROOM = 65_536  # the slots and dense ints a base read ahead has room for past its deltas and the MANIFEST's
# one thread for every handle of the process: a check is one GIL-free pass at the memory's pace
_ahead_helper = LongLived(1, "brainy-vectors-ahead")


def check_ahead(folder: Path, dense_ints: int = 0, opened: threading.Event | None = None) -> Ahead | None:
    """Begin reading the newest base's dense ints and checking its quantised copy, if the base is large, and the
    deltas after it, if they are, so that the read of the index and the first scan after an open find them done:
    at a million slots the base's two arrays (16 MB, 17 ms in a new process, mostly faulting their pages in), the
    copy's 364 MB (50-70 ms) and 95 MB of deltas after a crash (13-19 ms), overlapped with the open's replay of the
    log instead. ``dense_ints``: the MANIFEST's next dense int. None when there is nothing to do ahead.

    ``opened``, set once the open has read what it reads itself: when the files are not in the page cache, the
    reading ahead waits for it (at most ``OPEN_WAIT_SECONDS``). Then the disk, not the memory, is what the two
    threads share, and a first door that is not a vector search (a ``get`` after a crash, at a million rows:
    195-330 ms while 450 MB were read beside the open) waits for no byte of the index."""
    found = newest_snapshot(folder, SUFFIX) if folder.is_dir() else None
    if found is None:
        return None
    stamp, base = found
    copy = folder / snapshot_name(stamp, QUANTISED_SUFFIX)
    try:
        # a small base has small deltas too (a new base is written once they pass a quarter of it): a small
        # store's open lists and reads nothing more
        if base.stat().st_size < AHEAD_SLOTS * 4 * DIMENSIONS:
            return None
        copied = copy.is_file()
        # with a partitioned copy the first search reads a few of its lists, not the quantised copy: that is left
        # to be checked chunk by chunk by the scans that read it (reading it ahead took the disk from that search)
        partitioned = (folder / snapshot_name(stamp, PARTITIONED_SUFFIX)).is_file()
        copy_large = copied and not partitioned and copy.stat().st_size >= AHEAD_SLOTS * DIMENSIONS
        deltas = [p for _, p in _deltas(folder, stamp)]
        sized = sum(p.stat().st_size for p in deltas) >= AHEAD_DELTA_BYTES
    except OSError:
        return None
    # the copy first, the largest: an open with no log to replay reads the base and the deltas itself while this
    # thread checks the copy, and one with a long replay finds all of it done
    helper, checks = _ahead_helper(), {}
    if opened is not None and not _cached(copy if copy_large else base):
        helper.submit(opened.wait, OPEN_WAIT_SECONDS)  # the helper's jobs run in turn: every one after this
    if copy_large:
        checks[copy.name] = helper.submit(_checked_ahead, copy)
    room = sum(_written(p) for p in deltas) + AHEAD_ROOM
    checks[base.name] = helper.submit(_prepared, base, copied, room, dense_ints + AHEAD_ROOM)
    if sized:
        checks.update((p.name, helper.submit(_checked_delta, p)) for p in deltas)
    return Ahead(checks)


OPEN_WAIT_SECONDS = 2.0  # the most the reading ahead of cold files waits for the open's own reads


def _cached(path: Path) -> bool:
    """Whether the first, middle and last bytes of ``path`` are in the page cache (a read that would wait for the
    disk is refused, ``RWF_NOWAIT``); True where that cannot be asked, so the reading ahead begins at once."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return True
    try:
        size, probe = os.fstat(fd).st_size, bytearray(1)
        for at in (0, size // 2, max(0, size - 1)):
            os.preadv(fd, [probe], at, os.RWF_NOWAIT)
    except BlockingIOError:
        return False
    except (OSError, AttributeError, ValueError):  # no RWF_NOWAIT here (an older kernel, another system)
        return True
    finally:
        os.close(fd)
    return True


def _prepared(path: Path, copied: bool, room: int, dense_ints: int) -> Prepared | None:
    """A format 3 or 4 base mapped as :func:`read_chain` maps it, its header and dense section checked and its arrays
    made (numpy lets the interpreter lock go while it fills them); None when it is not one or does not check
    out (the read then reads it itself, and says why)."""
    try:
        mapped = _mapped(path, ahead=not copied)
        view = memoryview(mapped)
        magic, form, stamp, dims, count, _, graph_bytes = _HEADER.unpack_from(view)
        if magic != MAGIC or form not in (3, SNAPSHOT_FORMAT) or dims != DIMENSIONS:
            return None
        layout = _layout(view, count, graph_bytes)
        dense, slot, live, top = _slot_arrays(view, count, layout[0], room, dense_ints)
    except (OSError, ValueError, struct.error):
        return None
    return Prepared(mapped, stamp, count, layout, dense, slot, live, top)


def _checked_ahead(path: Path) -> tuple[int, _Codes] | None:
    try:
        mapped = _mapped(path)
        header = _QUANTISED.unpack_from(mapped)
        codes = decode_quantised(mapped, path.name, None, None)
    except (OSError, ValueError, struct.error):
        return None  # the read of the index takes it up again, and says why
    codes.check_whole()
    return header[2], header[6], codes


def _checked_delta(path: Path) -> mmap.mmap | None:
    """A delta of this format mapped, its checksum computed with the interpreter lock let go; None when it does not
    check out (its read then checks it again and says why) or is of format 1."""
    try:
        mapped = _mapped(path)
    except (OSError, ValueError):
        return None
    view = memoryview(mapped)
    if len(view) < _DELTA.size + _CRC.size or _DELTA.unpack_from(view)[1] not in (2, DELTA_FORMAT):
        return None
    if crc32c.crc32c(view[:-4], gil_release_mode=1) != _CRC.unpack_from(view, len(view) - 4)[0]:
        return None
    return mapped


def _deltas(folder: Path, stamp: int, head: int | None = None) -> list[tuple[int, Path]]:
    """The deltas after the base of ``stamp`` (up to ``head``), by stamp."""
    cut = len(DELTA_SUFFIX)
    return [
        (at, p)
        for at, p in sorted((int(p.name[:-cut]), p) for p in folder.glob("*" + DELTA_SUFFIX) if p.name[:-cut].isdigit())
        if stamp < at and (head is None or at <= head)
    ]


def _mapped(path: Path, ahead: bool = True) -> mmap.mmap:
    """A snapshot file mapped read-only. Not populated: its pages are touched as the reads check them (at
    1,000,000 vectors, populating the 1.5 GB map took longer than the first search), and read ahead unless
    ``ahead`` is False (a base with a quantised copy: its first scan reads a few dozen chunks of it, which
    must not queue behind the whole file; the graph's thread later reads it in order)."""
    with open(path, "rb") as f:
        mapped = mmap.mmap(f.fileno(), 0, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ)
    if ahead and hasattr(mapped, "madvise"):
        mapped.madvise(mmap.MADV_WILLNEED)
    return mapped


def _written(path: Path) -> int:
    """The slots a delta says it writes (its header only; the whole delta is checked when it is applied)."""
    try:
        with open(path, "rb") as f:
            header, size = f.read(_DELTA.size), path.stat().st_size
    except OSError:
        return 0
    if len(header) < _DELTA.size:
        return 0
    return min(_DELTA.unpack(header)[7], size // (8 + 4 * DIMENSIONS))  # a damaged header claims no more than fits
