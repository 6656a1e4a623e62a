"""The projections the query doors read: metadata postings, word postings, order columns, the id map.

They describe the store at one generation, their *stamp*, which is always the
brain's durable head: a commit's changes are applied to them when the commit
becomes durable, in generation order, so a query never sees a commit that was
not acknowledged. They are built from the rows on first need (an open pays
nothing until the first query) and say so.

- **Metadata postings**: for every reserved field a filter can name (type,
  subtype, service, visibility, key, hasVector, createdBy, updatedBy) and every
  metadata leaf (dotted path; each scalar element of an array), the sorted
  dense ints of the entities holding that value. Values are keyed by kind, so
  ``1`` and ``1.0`` share a posting and ``true`` and ``1`` do not.
- **Word postings**: lower-cased alphanumeric runs of ``data`` and of string
  metadata values, with term frequencies and document lengths for BM25. A text
  query reads a word's postings as arrays (:meth:`Projections.word_postings`,
  kept until a commit moves that word) and the lengths as an array indexed by
  dense int (built on the first text query, moved from then on).
- **Order columns**: for every scalar path, dense int to value, so orderBy
  sorts without reading rows.
- **The id map**: dense int to entity id, for every row the projections have seen (a dense int is
  never reused, so an entry outlives its row). Beside it, built on the first ranked find and moved from
  then on, each id as two u64 (:class:`IdKeys`): what a ranked find breaks its ties on.
- **The graph** (``brainy/index/graph.py``): adjacency out and in per entity, built on the first
  graph walk and moved with the rest from then on (None until then; it is not persisted).
"""

from __future__ import annotations

import bisect
import itertools
import mmap
import re
import struct
from array import array
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, Protocol

import msgpack
import numpy as np

from brainy._speedups import postings as P
from brainy._speedups import rowpost
from brainy.index.sections import TYPECODE, column_sections, id_sections, packed, posting_sections
from brainy.index.where import kind_of
from brainy.store.crc import crc32

RESERVED_POSTED = ("type", "subtype", "service", "visibility", "key", "hasVector", "createdBy", "updatedBy")
_NULLABLE = ("subtype", "service")  # string | null: absent reads as null (leaves, rowpost.post_leaves)
# Reserved fields an orderBy may name that are not worth a posting (nearly every value is unique).
COLUMN_ONLY = ("id", "createdAt", "updatedAt", "generation")
WORD = re.compile(r"[^\W_]+")


class Adjacency(Protocol):
    """What the projections ask of the graph they carry (``brainy/index/graph.py``'s ``Graph``, built on the
    first walk): to move with each entity and relation version, as the postings do."""

    def entity(self, before: dict[str, Any] | None, after: dict[str, Any] | None) -> None: ...

    def relation(self, before: dict[str, Any] | None, after: dict[str, Any] | None) -> None: ...


def value_key(value: Any) -> tuple[str, Any]:
    """The posting key of a scalar: its where kind and value (equal for equal scalars only)."""
    return kind_of(value), value


def leaves(row: dict[str, Any]) -> Iterator[tuple[str, Any]]:
    """(path, scalar) for every posted value of a row: reserved fields, then metadata leaves."""
    for name in RESERVED_POSTED:
        if name in row:
            yield name, row[name]
        elif name in _NULLABLE:
            yield name, None
    yield from _walk(row.get("metadata") or {}, "")


def _walk(node: dict[str, Any], prefix: str) -> Iterator[tuple[str, Any]]:
    for key, value in node.items():
        path = prefix + key
        if isinstance(value, dict):
            yield from _walk(value, path + ".")
        elif isinstance(value, list):
            for element in value:
                if not isinstance(element, (dict, list)):
                    yield path, element
        else:
            yield path, value


_ABSENT = object()


def path_values(row: dict[str, Any], path: str) -> list[Any]:
    """The scalars :func:`leaves` yields for one path of a row, in the order it yields them, without walking
    the rest of the row (a metadata path is reached through each key that is a dotted prefix of it)."""
    out: list[Any] = []
    if path in RESERVED_POSTED:
        if path in row:
            out.append(row[path])
        elif path in ("subtype", "service"):
            out.append(None)
    _values_at(row.get("metadata") or {}, path, out)
    return out


def _values_at(node: dict[str, Any], path: str, out: list[Any]) -> None:
    if "." not in path:  # only a key of that name reaches it (a nested key's path has a dot)
        value = node.get(path, _ABSENT)
        if isinstance(value, list):
            out.extend(e for e in value if not isinstance(e, (dict, list)))
        elif value is not _ABSENT and not isinstance(value, dict):
            out.append(value)
        return
    for key, value in node.items():
        if key == path:
            if isinstance(value, list):
                out.extend(e for e in value if not isinstance(e, (dict, list)))
            elif not isinstance(value, dict):
                out.append(value)
        elif isinstance(value, dict) and path.startswith(key) and path[len(key) : len(key) + 1] == ".":
            _values_at(value, path[len(key) + 1 :], out)


def words(row: dict[str, Any]) -> list[str]:
    """The words of a row's text: its data (a string, or the strings inside an object) and string metadata."""
    texts: list[str] = []
    data, metadata = row.get("data"), row.get("metadata")
    if data is not None:
        strings_of(data, texts)
    if type(metadata) is dict:  # its plain leaves looked at here, not a call each (most rows' metadata is a few)
        for value in metadata.values():
            kind = type(value)
            if kind is str:
                texts.append(value)
            elif kind is not int and kind is not float and kind is not bool and value is not None:
                strings_of(value, texts)
    elif metadata is not None:
        strings_of(metadata, texts)
    if not texts:
        return []
    return [w for text in texts for w in WORD.findall(text.lower())]


def strings_of(value: Any, out: list[str]) -> None:
    if isinstance(value, str):
        out.append(value)
    elif isinstance(value, dict):
        for v in value.values():
            strings_of(v, out)
    elif isinstance(value, list):
        for v in value:
            strings_of(v, out)


def _remove(posting: array, dense: int) -> None:
    i = bisect.bisect_left(posting, dense)
    if i < len(posting) and posting[i] == dense:
        del posting[i]


_CANONICAL = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_HYPHENS = [8, 13, 18, 23]
_NIBBLE = np.full(256, 255, dtype=np.uint8)
_NIBBLE[np.frombuffer(b"0123456789abcdef", np.uint8)] = np.arange(16, dtype=np.uint8)


class IdKeys:
    """Every dense int's id as the two halves of its UUID's 128 bits: ``hi`` and ``lo``, u64 arrays indexed by
    dense int (0 where no id is known).

    An id is a canonical UUID (lower-case hex, hyphens at 8, 13, 18 and 23), whose text orders as its value:
    comparing ``(hi[d], lo[d])`` compares the ids, so a ranked find breaks its ties on id from these two arrays
    (brainy/_speedups/ranking.pyx) without reading an id. 16 bytes a dense int. An id map's entries never change
    (a dense int is never reused), so the arrays are only ever added to: a read holding them keeps reading the
    same keys for the dense ints it knows, whatever is added after. Built from the id map in one pass of numpy
    (about 20 ms at 100,000), then moved a row at a time."""

    def __init__(self, ids: Mapping[int, str]) -> None:
        dense = np.fromiter(ids.keys(), dtype=np.uint64, count=len(ids))
        halves = _halves(list(ids.values()))
        if halves is None:
            raise ValueError("an id that is not a canonical UUID")
        size = int(dense.max()) + 1 if len(dense) else 0
        self.hi = np.zeros(max(1024, size + size // 4), dtype=np.uint64)
        self.lo = np.zeros(len(self.hi), dtype=np.uint64)
        at = dense.astype(np.intp)
        self.hi[at], self.lo[at] = halves

    def add(self, dense: int, id_: str) -> bool:
        """Key one more id (False, keying nothing, when it is not a canonical UUID)."""
        if _CANONICAL.fullmatch(id_) is None:
            return False
        if dense >= len(self.hi):  # new arrays, not grown in place: a read may hold the old ones
            size = max(dense + 1, 2 * len(self.hi))
            hi, lo = np.zeros(size, dtype=np.uint64), np.zeros(size, dtype=np.uint64)
            hi[: len(self.hi)], lo[: len(self.lo)] = self.hi, self.lo
            self.hi, self.lo = hi, lo
        value = int(id_.replace("-", ""), 16)
        self.hi[dense], self.lo[dense] = value >> 64, value & 0xFFFFFFFFFFFFFFFF
        return True


#: Postings the word arrays a text query reads keep in all (12 bytes each, so about 25 MB): the words queried last.
WORD_CACHE_POSTINGS = 1 << 21


def word_arrays(tfs: Mapping[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """One word's postings (dense int -> term frequency) as arrays: the dense ints ascending (u64) and their term
    frequencies (u32), what brainy/_speedups/ranking.pyx scores."""
    dense = np.fromiter(tfs.keys(), dtype=np.uint64, count=len(tfs))
    tf = np.fromiter(tfs.values(), dtype=np.uint32, count=len(tfs))
    if len(dense) > 1 and not bool((dense[1:] > dense[:-1]).all()):  # a row moved: its entry went to the end
        order = np.argsort(dense, kind="stable")
        dense, tf = dense[order], tf[order]
    return dense, tf


def _halves(ids: list[str]) -> tuple[np.ndarray, np.ndarray] | None:
    """The high and low u64 of each canonical UUID, or None when one is not canonical."""
    n = len(ids)
    if n == 0:
        return np.empty(0, np.uint64), np.empty(0, np.uint64)
    joined = "".join(ids)
    if set(map(len, ids)) != {36} or not joined.isascii():
        return None
    text = np.frombuffer(joined.encode("ascii"), np.uint8).reshape(n, 36)
    if not (text[:, _HYPHENS] == ord("-")).all():
        return None
    nibbles = _NIBBLE[np.delete(text, _HYPHENS, axis=1)]
    if (nibbles == 255).any():  # not lower-case hex
        return None
    nibbles = nibbles.astype(np.uint64)
    hi, lo = np.zeros(n, np.uint64), np.zeros(n, np.uint64)
    for i in range(16):
        hi = (hi << np.uint64(4)) | nibbles[:, i]
        lo = (lo << np.uint64(4)) | nibbles[:, 16 + i]
    return hi, lo


class Projections:
    def __init__(self) -> None:
        self.stamp = 0
        self.ids: dict[int, str] = {}
        self.postings: dict[str, dict[tuple[str, Any], array]] = {}
        self.columns: dict[str, dict[int, Any]] = {}
        self.terms: dict[str, dict[int, int]] = {}
        self.lengths: dict[int, int] = {}
        self.total_length = 0
        self.all = array(TYPECODE)
        self.graph: Adjacency | None = None
        self._keys: IdKeys | None = None
        self._keyable = True  # False once an id is not a canonical UUID: no keys, ever
        self._words: OrderedDict[str, tuple[np.ndarray, np.ndarray]] = OrderedDict()  # word_postings' arrays
        self._words_held = 0  # postings they hold
        self._lengths_by_dense: np.ndarray | None = None

    @classmethod
    def build(cls, entities: Iterator[dict[str, Any]], stamp: int) -> Projections:
        built = cls()
        for row in sorted(entities, key=lambda r: r["denseInt"]):
            built.apply(None, row)
        built.stamp = stamp
        return built

    def __len__(self) -> int:
        return len(self.all)

    def copy(self) -> Projections:
        """A copy to encode while commits move the original (every array and map copied in C; ~1.4 µs a
        row against ~11 µs for the encode). The graph is not persisted, so not copied."""
        out = Projections()
        out.stamp, out.total_length = self.stamp, self.total_length
        out.ids, out.all, out.lengths = self.ids.copy(), array(TYPECODE, self.all), self.lengths.copy()
        out.postings = {
            path: {key: array(TYPECODE, posting) for key, posting in values.items()}
            for path, values in self.postings.items()
        }
        out.columns = {path: column.copy() for path, column in self.columns.items()}
        out.terms = {word: tfs.copy() for word, tfs in self.terms.items()}
        return out

    def posting(self, path: str, value: Any) -> array:
        return self.postings.get(path, {}).get(value_key(value), array(TYPECODE))

    def id_keys(self) -> IdKeys | None:
        """Every id as two u64 (built on first need, then moved with the id map), or None when some id is not a
        canonical UUID; the caller holds the projections still."""
        if self._keys is None and self._keyable:
            try:
                self._keys = IdKeys(self.ids)
            except ValueError:
                self._keyable = False
        return self._keys

    def word_postings(self, word: str) -> tuple[np.ndarray, np.ndarray] | None:
        """One word's postings as arrays (:func:`word_arrays`), None when no entity holds it; kept for the next
        text query until a commit moves that word's postings (or :data:`WORD_CACHE_POSTINGS` pushes it out)."""
        found = self._words.get(word)
        if found is not None:
            self._words.move_to_end(word)
            return found
        tfs = self.terms.get(word)
        if not tfs:
            return None
        found = self._words[word] = word_arrays(tfs)
        self._words_held += len(found[0])
        while self._words_held > WORD_CACHE_POSTINGS and len(self._words) > 1:
            _, (dense, _) = self._words.popitem(last=False)
            self._words_held -= len(dense)
        return found

    def word_lengths(self) -> np.ndarray:
        """Every entity's word count in an array indexed by dense int (0: no entity), built on the first text query
        and moved with the rows from then on; the caller holds the projections still."""
        if self._lengths_by_dense is None:
            dense = np.fromiter(self.lengths.keys(), dtype=np.intp, count=len(self.lengths))
            size = int(dense.max()) + 1 if len(dense) else 0
            self._lengths_by_dense = np.zeros(max(1024, size + size // 4), dtype=np.uint32)
            self._lengths_by_dense[dense] = np.fromiter(self.lengths.values(), dtype=np.uint32, count=len(dense))
        return self._lengths_by_dense

    def _word_moved(self, word: str) -> None:
        dropped = self._words.pop(word, None)
        if dropped is not None:
            self._words_held -= len(dropped[0])

    def _length_moved(self, dense: int, length: int) -> None:
        lengths = self._lengths_by_dense
        if lengths is None:
            return
        if dense >= len(lengths):
            grown = np.zeros(max(dense + 1, 2 * len(lengths)), dtype=np.uint32)
            grown[: len(lengths)] = lengths
            lengths = self._lengths_by_dense = grown
        lengths[dense] = length

    def apply(self, before: dict[str, Any] | None, after: dict[str, Any] | None) -> None:
        """Move the projections from an entity's old row to its new one (None: absent)."""
        if before is not None:
            self._unpost(before)
        if after is not None:
            self._post_new([after])
        if self.graph is not None:
            self.graph.entity(before, after)

    def apply_moves(self, moves: Iterable[tuple[str, dict[str, Any] | None, dict[str, Any] | None]]) -> None:
        """:meth:`apply` or :meth:`apply_relation` of each of a commit's moves, in order, in one call (a call a row
        fewer on the durable step of a batch); a run of new rows (an ``addMany``'s) posted by one compiled call."""
        unpost, graph = self._unpost, self.graph
        new: list[dict[str, Any]] = []
        for kind, before, after in moves:
            if kind == "e" and before is None and after is not None:
                new.append(after)
                continue
            if new:
                self._post_new(new, graph)
                new = []
            if kind == "e":
                if before is not None:
                    unpost(before)
                if after is not None:
                    self._post_new([after])
                if graph is not None:
                    graph.entity(before, after)
            elif graph is not None:
                graph.relation(before, after)
        if new:
            self._post_new(new, graph)

    def apply_relation(self, before: dict[str, Any] | None, after: dict[str, Any] | None) -> None:
        """Move the graph from a relation's old row to its new one, once the graph is built."""
        if self.graph is not None:
            self.graph.relation(before, after)

    def unpost(self, row: dict[str, Any]) -> None:
        """Take a row out without a row to take its place (a delta's voided rows, laid on its base)."""
        self._unpost(row)

    def merge(self, other: Projections) -> None:
        """Merge in the projections of rows this holds none of (a delta's, once its voided rows are unposted)."""
        self.ids.update(other.ids)
        self._keys = self._lengths_by_dense = None  # built again when next needed
        self._words.clear()
        self._words_held = 0
        self.all = P.union(self.all, other.all) if len(self.all) else array(TYPECODE, other.all)
        for path, values in other.postings.items():
            mine = self.postings.setdefault(path, {})
            for key, posting in values.items():
                found = mine.get(key)
                mine[key] = P.union(found, posting) if found else array(TYPECODE, posting)
        for path, column in other.columns.items():
            self.columns.setdefault(path, {}).update(column)
        for word, tfs in other.terms.items():
            self.terms.setdefault(word, {}).update(tfs)
        self.lengths.update(other.lengths)
        self.total_length += other.total_length

    def _post_new(self, rows: list[dict[str, Any]], graph: Adjacency | None = None) -> None:
        """Post each of ``rows``, rows no version of which is posted, in order; then give them to ``graph``."""
        keys = self._keys
        if keys is not None:
            for row in rows:
                if not keys.add(row["denseInt"], row["id"]):
                    self._keys, self._keyable = None, False
                    break
        # each one's id, dense int, leaves' postings and columns (a leaf yielded twice: once, its first value) and
        # order columns, compiled; a row that cannot hold words is not looked through for them (its length: 0)
        wordy = rowpost.post_rows(
            rows,
            RESERVED_POSTED,
            _NULLABLE,
            self.postings,
            self.columns,
            kind_of,
            self.ids,
            self.all,
            COLUMN_ONLY,
            self.lengths,
        )
        if self._lengths_by_dense is not None:
            for row in rows:
                self._length_moved(row["denseInt"], 0)  # a wordy row's own length below
        for row in wordy:
            dense = row["denseInt"]
            counts: dict[str, int] = {}
            found = words(row)
            for word in found:
                counts[word] = counts.get(word, 0) + 1
            for word, tf in counts.items():
                self.terms.setdefault(word, {})[dense] = tf
                self._word_moved(word)
            self.lengths[dense] = len(found)
            self._length_moved(dense, len(found))
            self.total_length += len(found)
        if graph is not None:
            for row in rows:
                graph.entity(None, row)

    def _unpost(self, row: dict[str, Any]) -> None:
        dense = row["denseInt"]
        # the id map keeps a removed row's entry: a dense int is never reused, so a query that read the
        # postings before this removal can still name the row it is reading at its own generation
        _remove(self.all, dense)
        for path, value in leaves(row):
            values = self.postings.get(path)
            if values is None:
                continue
            key = value_key(value)
            posting = values.get(key)
            if posting is not None:
                _remove(posting, dense)
                if not posting:
                    del values[key]
            column = self.columns.get(path)
            if column is not None:
                column.pop(dense, None)
        for name in COLUMN_ONLY:
            self.columns.get(name, {}).pop(dense, None)
        for word in set(words(row)):
            postings = self.terms.get(word)
            if postings is not None:
                postings.pop(dense, None)
                if not postings:
                    del self.terms[word]
            self._word_moved(word)
        self.total_length -= self.lengths.pop(dense, 0)
        self._length_moved(dense, 0)


# -- snapshots (docs/store-format.md, "Projection snapshots") -------------------------------------------

SNAPSHOT_FORMAT = 3
PAGE_BYTES = 16384  # the unit a read in place checks: a lookup pays the pages it touches, not its section
MAGIC = b"brnyproj"
_crc = struct.Struct("<I")
_head = struct.Struct("<8sII")  # magic, head size, crc32 of the head
_offsets = struct.Struct("<QQ")  # two neighbouring u64 offsets: where one id or value starts and ends


class Damaged(ValueError):
    """Bytes of a snapshot read in place that do not check out, found by a read (the head checked out when the
    file was mapped): the snapshot is no longer used, and the projections are rebuilt from the rows."""


def head_check(data: bytes) -> int:
    """The crc32 of a snapshot's head, from its first 16 bytes (ValueError when they are not a snapshot's)."""
    if len(data) < _head.size or data[: len(MAGIC)] != MAGIC:
        raise ValueError("not a snapshot of format 2 or 3")
    return _head.unpack_from(data, 0)[2]


def snapshot_name(stamp: int, suffix: str = ".proj") -> str:
    return f"{stamp:020d}{suffix}"


def _page_checks(parts: Iterable[bytes], page: int) -> array:
    """The crc32 of every ``page`` bytes of the parts joined (the last page shorter), without joining them."""
    checks, crc, filled = array("I"), 0, 0
    for part in parts:
        view, at = memoryview(part), 0
        while at < len(view):
            take = min(page - filled, len(view) - at)
            crc = crc32(view[at : at + take], crc)
            filled, at = filled + take, at + take
            if filled == page:
                checks.append(crc)
                crc = filled = 0
    if filled:
        checks.append(crc)
    return checks


def encode_snapshot(
    proj: Projections, extra_head: dict[str, Any] | None = None, extra_sections: Iterable[tuple[str, bytes]] = ()
) -> bytes:
    """The projections as a head naming each section (offset, size) and the crc32 of every page of the body, then
    the sections (docs/store-format.md, "Projection snapshots"): a read in place checks only the pages it
    touches, a posting is found by its value in its path's directory, an order column's value by its dense int."""
    dense, id_offsets, id_text = id_sections(proj.ids)
    sections: list[tuple[str, bytes]] = [
        ("dense", dense),
        ("idOffsets", id_offsets),
        ("idText", id_text),
        ("all", proj.all.tobytes()),
        (
            "lengths",
            msgpack.packb(
                [array(TYPECODE, proj.lengths.keys()).tobytes(), array("I", proj.lengths.values()).tobytes()],
                use_bin_type=True,
            ),
        ),
        (
            "terms",
            packed(
                [word, array(TYPECODE, tfs.keys()).tobytes(), array("I", tfs.values()).tobytes()]
                for word, tfs in proj.terms.items()
            ),
        ),
    ]
    for path, values in proj.postings.items():
        directory, ints = posting_sections(values)
        sections.append((f"postings/{path}", directory))
        sections.append((f"postingInts/{path}", ints))
    for path, column in proj.columns.items():
        keys = sorted(column)  # a moved row re-enters its column last; a lookup bisects the sorted ints
        offsets, values = column_sections(column, keys)
        sections.append((f"columns/{path}", array(TYPECODE, keys).tobytes()))
        sections.append((f"columnOffsets/{path}", offsets))
        sections.append((f"columnValues/{path}", values))
    sections.extend(extra_sections)  # a delta's masked ints and voided rows (brainy/index/chain.py)
    table, at = {}, 0
    for name, data in sections:
        table[name] = [at, len(data)]
        at += len(data)
    pages = _page_checks((data for _, data in sections), PAGE_BYTES)
    head = msgpack.packb(
        {
            "format": SNAPSHOT_FORMAT,
            "stamp": proj.stamp,
            "totalLength": proj.total_length,
            "sections": table,
            "pageBytes": PAGE_BYTES,
            "pages": pages.tobytes(),
            **(extra_head or {}),
        },
        use_bin_type=True,
    )
    return b"".join([_head.pack(MAGIC, len(head), crc32(head)), head, *(data for _, data in sections)])


def _ints(data: bytes | memoryview, typecode: str = TYPECODE) -> array:
    out = array(typecode)
    out.frombytes(data)
    return out


def _int_view(data: memoryview) -> Any:
    """A section of u64 read as ints where it lies (an empty one as an empty array)."""
    return data.cast("B").cast(TYPECODE) if len(data) else array(TYPECODE)


class InPlace:
    """A snapshot file read in place: its head at once, the bytes of each section checked and decoded the first
    time a read asks for them (format 3: by the page; format 2: the whole section). It answers the reads
    :class:`Projections` answers (it is one, at its stamp, for reading); nothing moves it: it serves only
    while its stamp is the head, until the full load lands."""

    def __init__(self, data: bytes | mmap.mmap) -> None:
        self._data = memoryview(data)
        self._map = data if isinstance(data, mmap.mmap) else None  # a mapped file: its pages asked for
        if len(data) < _head.size:
            raise ValueError("shorter than its head")
        magic, size, crc = _head.unpack_from(data, 0)
        if magic != MAGIC:
            raise ValueError("not a snapshot of format 2 or 3")
        if self._map is not None and _head.size + size <= len(data):
            self._map.madvise(mmap.MADV_WILLNEED, 0, _head.size + size)
        self.check = crc  # the head's crc32: what a delta names its base by
        head_bytes = self._data[_head.size : _head.size + size]
        if crc32(head_bytes) != crc:
            raise ValueError("head checksum mismatch")
        self._base = _head.size + size
        try:
            self.head = head = msgpack.unpackb(head_bytes, raw=False, strict_map_key=False)
            self.format = head["format"]
            if self.format not in (2, 3):
                raise ValueError(f"snapshot format {head['format']}")
            self.stamp, self.total_length = int(head["stamp"]), int(head["totalLength"])
            self._sections: dict[str, list[int]] = head["sections"]
            self._pages: array | None = None
            if self.format == 3:
                self._page, self._pages = int(head["pageBytes"]), _ints(head["pages"], "I")
                if self._page <= 0 or len(self._pages) != -(-(len(data) - self._base) // self._page):
                    raise ValueError("the page checks do not cover the body (a torn file)")
                self._verified = bytearray(len(self._pages))
        except (KeyError, TypeError, msgpack.UnpackException) as exc:
            raise ValueError(f"head does not decode: {exc}") from None
        for name, (at, length, *_) in self._sections.items():
            if at < 0 or length < 0 or self._base + at + length > len(data):
                raise ValueError(f"section {name} runs past the end of the file")
        self._whole: set[str] = set()  # format 2: the sections checked whole already
        self.graph: Adjacency | None = None
        self._all: array | None = None
        self._dense: Any = None
        self.ids = _IdMap(self)
        if self.format == 3:
            self.postings = _Sections(self, "postings/", lambda path: Posted(self, path))
            self.columns = _Sections(self, "columns/", lambda path: _Column(self, path))
        else:
            self.postings = _Sections(self, "postings/", lambda path: _postings(self.section("postings/" + path)))
            self.columns = _Sections(self, "columns/", lambda path: _column(self.section("columns/" + path)))
        self._terms: dict[str, dict[int, int]] | None = None
        self._lengths: dict[int, int] | None = None

    def _checked_pages(self, at: int, length: int) -> None:
        assert self._pages is not None
        page, verified = self._page, self._verified
        first, last = at // page, (at + length - 1) // page
        if self._map is not None and not all(verified[first : last + 1]):
            # asked for exactly: a first touch of a cold page read 8 MB around it (this disk's read-ahead),
            # and a first find checks a few dozen single pages scattered over the file
            start = self._base + first * page
            start -= start % mmap.PAGESIZE
            self._map.madvise(mmap.MADV_WILLNEED, start, min(self._base + (last + 1) * page, len(self._map)) - start)
        for p in range(first, last + 1):
            if not verified[p]:
                start = self._base + p * page
                if crc32(self._data[start : start + page]) != self._pages[p]:
                    raise Damaged(f"page {p} (at {start}): checksum mismatch")
                verified[p] = 1

    def part(self, name: str, start: int, length: int) -> memoryview:
        """Bytes [start, start + length) of one section, checked (ValueError when they do not check out)."""
        at, size, *crc = self._sections[name]
        if start < 0 or length < 0 or start + length > size:
            raise Damaged(f"section {name}: bytes {start}+{length} lie outside it")
        if self._pages is not None:
            if length:
                self._checked_pages(at + start, length)
        elif name not in self._whole:
            if crc32(self._data[self._base + at : self._base + at + size]) != crc[0]:
                raise Damaged(f"section {name}: checksum mismatch")
            self._whole.add(name)
        return self._data[self._base + at + start : self._base + at + start + length]

    def section(self, name: str) -> memoryview:
        """One section's bytes, checked (ValueError when they do not check out)."""
        return self.part(name, 0, self._sections[name][1])

    def ints(self, name: str) -> array:
        """A section of u64, checked and copied out."""
        return _ints(self.section(name))

    def __len__(self) -> int:  # from the section's size: a read that only counts the live set decodes nothing
        return self._sections["all"][1] // 8

    @property
    def all(self) -> array:
        if self._all is None:
            self._all = _ints(self.section("all"))
        return self._all

    def dense(self) -> Any:
        """The id map's sorted dense ints (checked whole the first time a read names an id)."""
        if self._dense is None:
            dense = _int_view(self.section("dense"))
            if self._sections["idOffsets"][1] != 8 * (len(dense) + 1):
                raise Damaged("the id map's offsets do not match its dense ints")
            self._dense = dense
        return self._dense

    def posting(self, path: str, value: Any) -> array:
        return self.postings.get(path, {}).get(value_key(value), array(TYPECODE))

    def id_keys(self) -> IdKeys | None:
        """None: a read in place keeps no id keys (it serves until the full load lands), and a ranked find looks
        up the ids it compares instead."""
        return None

    def word_postings(self, word: str) -> tuple[np.ndarray, np.ndarray] | None:
        """One word's postings as arrays (:func:`word_arrays`, made for each query), None when no entity holds it."""
        tfs = self.terms.get(word)
        return word_arrays(tfs) if tfs else None

    def word_lengths(self) -> Mapping[int, int]:
        """The word counts (the mapping: a read in place makes no array of them)."""
        return self.lengths

    @property
    def terms(self) -> dict[str, dict[int, int]]:
        if self._terms is None:
            self._terms = _terms(self.section("terms"))
        return self._terms

    @property
    def lengths(self) -> dict[int, int]:
        if self._lengths is None:
            keys, lengths = msgpack.unpackb(self.section("lengths"), raw=False)
            self._lengths = _zipped(_ints(keys), _ints(lengths, "I"))
        return self._lengths

    def load(self) -> Projections:
        """Every section decoded into :class:`Projections` (the full load a served handle runs off the read path)."""
        proj = Projections()
        proj.stamp, proj.total_length = self.stamp, self.total_length
        dense, offsets = self.dense(), _int_view(self.section("idOffsets"))
        text = bytes(self.section("idText"))
        proj.ids = {d: text[offsets[i] : offsets[i + 1]].decode("utf-8") for i, d in enumerate(dense)}
        proj.all = array(TYPECODE, self.all)
        for path in self.postings:
            proj.postings[path] = dict(self.postings[path])
        for path in self.columns:
            if self.format == 3:
                proj.columns[path] = _zipped(
                    _int_view(self.section("columns/" + path)), _stream(self.section("columnValues/" + path))
                )
            else:
                proj.columns[path] = self.columns[path]
        proj.terms, proj.lengths = self.terms, self.lengths
        return proj


class _IdMap(Mapping[int, str]):
    """The id map read in place: a dense int found by bisection in the sorted dense ints, its id sliced out."""

    def __init__(self, snap: InPlace) -> None:
        self._snap = snap

    def __getitem__(self, dense: int) -> str:
        ints = self._snap.dense()
        i = bisect.bisect_left(ints, dense)
        if i == len(ints) or ints[i] != dense:
            raise KeyError(dense)
        return bytes(_slice(self._snap, "idOffsets", "idText", i)).decode("utf-8")

    def __iter__(self) -> Iterator[int]:
        return iter(self._snap.dense())

    def __len__(self) -> int:
        return len(self._snap.dense())


def _slice(snap: InPlace, offsets: str, text: str, i: int) -> memoryview:
    """Item i of a text section indexed by an offsets section (u64, one more than the items)."""
    start, end = _offsets.unpack(snap.part(offsets, 8 * i, 16))
    return snap.part(text, start, end - start)


class _Sections(Mapping[str, Any]):
    """Per-path sections (postings or order columns), each read the first time it is asked for."""

    def __init__(self, snap: InPlace, prefix: str, read: Any) -> None:
        self._snap, self._prefix, self._read = snap, prefix, read
        self._names = [name[len(prefix) :] for name in snap._sections if name.startswith(prefix)]
        self._decoded: dict[str, Any] = {}

    def __getitem__(self, path: str) -> Any:
        found = self._decoded.get(path)
        if found is None:
            if self._prefix + path not in self._snap._sections:
                raise KeyError(path)
            found = self._decoded[path] = self._read(path)
        return found

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)


class Posted(Mapping[tuple[str, Any], array]):
    """One path's postings in place (format 3): its directory decoded, each value's ints read when asked for."""

    def __init__(self, snap: InPlace, path: str) -> None:
        self._snap, self._ints = snap, "postingInts/" + path
        self._where = {
            (kind, value): (first, count) for kind, value, first, count in unpacked(snap.section("postings/" + path))
        }

    def __getitem__(self, key: tuple[str, Any]) -> array:
        first, count = self._where[key]
        return _ints(self._snap.part(self._ints, 8 * first, 8 * count))

    def count(self, key: tuple[str, Any]) -> int:
        """How many entities hold the value, from the directory (no posting read)."""
        return self._where[key][1]

    def __iter__(self) -> Iterator[tuple[str, Any]]:
        return iter(self._where)

    def __len__(self) -> int:
        return len(self._where)


class _Column(Mapping[int, Any]):
    """One order column in place (format 3): a dense int found by bisection, its value unpacked alone."""

    def __init__(self, snap: InPlace, path: str) -> None:
        self._snap, self._path = snap, path
        self._dense = _int_view(snap.section("columns/" + path))
        if snap._sections["columnOffsets/" + path][1] != 8 * (len(self._dense) + 1):
            raise Damaged(f"column {path}: its offsets do not match its dense ints")

    def __getitem__(self, dense: int) -> Any:
        ints = self._dense
        i = bisect.bisect_left(ints, dense)
        if i == len(ints) or ints[i] != dense:
            raise KeyError(dense)
        path = self._path
        return msgpack.unpackb(_slice(self._snap, "columnOffsets/" + path, "columnValues/" + path, i), raw=False)

    def __iter__(self) -> Iterator[int]:
        return iter(self._dense)

    def __len__(self) -> int:
        return len(self._dense)


def column_values(column: Mapping[int, Any], wanted: Iterable[int]) -> dict[int, Any]:
    """The values an order column holds for the dense ints ``wanted`` (the whole column when they are most of it),
    in a dict the caller owns (it reads them after the lock, while commits move the column): a narrowed find
    copies its own values, not the column, and a column read in place decodes only theirs."""
    wanted = wanted if isinstance(wanted, (array, list)) else list(wanted)
    if isinstance(column, dict) and 4 * len(wanted) >= len(column):
        return column.copy()  # nearly all of it: one copy in C beats a lookup a row
    out: dict[int, Any] = {}
    for d in wanted:
        try:
            out[d] = column[d]
        except KeyError:
            pass
    return out


def unpacked(data: memoryview) -> list[Any]:
    """A section's MessagePack array, unpacked an element at a time (the reason :func:`packed` packs so)."""
    unpacker = msgpack.Unpacker(raw=False, strict_map_key=False, max_buffer_size=max(len(data), 1))
    unpacker.feed(data)
    return [unpacker.unpack() for _ in range(unpacker.read_array_header())]


def _stream(data: memoryview) -> Iterator[Any]:
    """MessagePack values one after another (an order column's values), unpacked as they are asked for."""
    unpacker = msgpack.Unpacker(raw=False, strict_map_key=False, max_buffer_size=max(len(data), 1))
    unpacker.feed(data)
    return iter(unpacker)


def _zipped(keys: Iterable[Any], values: Iterable[Any], chunk: int = 1 << 15) -> dict[Any, Any]:
    """``dict(zip(keys, values))`` a chunk at a time: one C call over a million pairs would hold the interpreter
    lock for a tenth of a second, and a read answered meanwhile (in place) would wait on the load."""
    out: dict[Any, Any] = {}
    ints = keys.tolist() if hasattr(keys, "tolist") else list(keys)  # one C pass: the ints of a view or array
    rest = iter(values)
    for at in range(0, len(ints), chunk):  # dict.update over zip: no tuple list made per chunk (~30% less)
        out.update(zip(ints[at : at + chunk], itertools.islice(rest, chunk)))
    return out


def _postings(data: memoryview) -> dict[tuple[str, Any], array]:
    """A format 2 postings section: [[kind, value, bin]] decoded whole."""
    return {(kind, value): _ints(posting) for kind, value, posting in unpacked(data)}


def _column(data: memoryview) -> dict[int, Any]:
    """A format 2 order column: [bin (dense ints), bin (the values, one MessagePack array)] decoded whole."""
    keys, values = msgpack.unpackb(data, raw=False)
    return _zipped(_ints(keys), unpacked(memoryview(values)))


def _terms(data: memoryview) -> dict[str, dict[int, int]]:
    return {word: _zipped(_ints(keys), _ints(tfs, "I")) for word, keys, tfs in unpacked(data)}


_BY_ELEMENT = frozenset(("ids", "postings", "columns", "terms"))


def _decode_format_1(data: bytes) -> Projections:
    """A snapshot of format 1 (one MessagePack document and its crc32), as stores written before format 2 hold
    it: read whole, unpacked a member at a time; the next flush writes format 2."""
    if len(data) < 4 or crc32(memoryview(data)[:-4]) != _crc.unpack_from(data, len(data) - 4)[0]:
        raise ValueError("checksum mismatch")
    try:
        unpacker = msgpack.Unpacker(raw=False, strict_map_key=False, max_buffer_size=len(data))
        unpacker.feed(memoryview(data)[:-4])
        doc: dict[str, Any] = {}
        for _ in range(unpacker.read_map_header()):
            key = unpacker.unpack()
            if key in _BY_ELEMENT:
                doc[key] = [unpacker.unpack() for _ in range(unpacker.read_array_header())]
            else:
                doc[key] = unpacker.unpack()
                if key == "format" and doc[key] != 1:
                    raise ValueError(f"snapshot format {doc['format']}")
        proj = Projections()
        proj.stamp, proj.total_length = doc["stamp"], doc["totalLength"]
        proj.ids = dict(zip(_ints(doc["dense"]), doc["ids"]))
        proj.all = _ints(doc["all"])
        for path, kind, value, posting in doc["postings"]:
            proj.postings.setdefault(path, {})[(kind, value)] = _ints(posting)
        for path, keys, values in doc["columns"]:
            proj.columns[path] = dict(zip(_ints(keys), values))
        for word, keys, tfs in doc["terms"]:
            proj.terms[word] = dict(zip(_ints(keys), _ints(tfs, "I")))
        keys, lengths = doc["lengths"]
        proj.lengths = dict(zip(_ints(keys), _ints(lengths, "I")))
    except (KeyError, TypeError, ValueError, msgpack.UnpackException) as exc:
        raise ValueError(f"snapshot does not decode: {exc}") from None
    return proj


def decode_snapshot(data: bytes) -> Projections:
    """Projections from a snapshot; ValueError when it does not check out (it is then rebuilt, never trusted)."""
    if data[: len(MAGIC)] != MAGIC:
        return _decode_format_1(data)
    try:
        return InPlace(data).load()
    except (KeyError, TypeError, IndexError, UnicodeDecodeError, msgpack.UnpackException) as exc:
        raise ValueError(f"snapshot does not decode: {exc}") from None


def newest_snapshot(folder: Path, suffix: str = ".proj") -> tuple[int, Path] | None:
    cut = len(suffix)
    found = sorted((int(p.name[:-cut]), p) for p in folder.glob("*" + suffix) if p.name[:-cut].isdigit())
    return found[-1] if found else None
