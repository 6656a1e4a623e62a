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
  metadata values, with term frequencies and document lengths for BM25.
- **Order columns**: for every scalar path, dense int to value, so orderBy
  sorts without reading rows.
- **The id map**: dense int to entity id, for every row the projections have seen (a dense int is
  never reused, so an entry outlives its row).
- **The graph** (``brainy/engine/graph.py``): adjacency out and in per entity, built on the first
  graph walk and moved with the rest from then on (None until then; it is not persisted).
"""

from __future__ import annotations

import bisect
import re
from array import array
from typing import TYPE_CHECKING, Any, Iterator

import struct
import zlib
from pathlib import Path

import msgpack

from brainy.engine.where import kind_of

if TYPE_CHECKING:
    from brainy.engine.graph import Graph

RESERVED_POSTED = ("type", "subtype", "service", "visibility", "key", "hasVector", "createdBy", "updatedBy")
# Reserved fields an orderBy may name that are not worth a posting (nearly every value is unique).
COLUMN_ONLY = ("id", "createdAt", "updatedAt", "generation")
WORD = re.compile(r"[^\W_]+")
TYPECODE = "Q"


def value_key(value: Any) -> tuple[str, Any]:
    """The posting key of a scalar: its where kind and value (equal for equal scalars only)."""
    return kind_of(value), value


def leaves(row: dict[str, Any]) -> Iterator[tuple[str, Any]]:
    """(path, scalar) for every posted value of a row: reserved fields, then metadata leaves."""
    for name in RESERVED_POSTED:
        if name in row:
            yield name, row[name]
        elif name in ("subtype", "service"):  # string | null: absent reads as null
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


def words(row: dict[str, Any]) -> list[str]:
    """The words of a row's text: its data (a string, or the strings inside an object) and string metadata."""
    texts: list[str] = []
    strings_of(row.get("data"), texts)
    strings_of(row.get("metadata"), texts)
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


def _insert(posting: array, dense: int) -> None:
    if not posting or posting[-1] < dense:  # new rows mint increasing ints: the common case appends
        posting.append(dense)
        return
    i = bisect.bisect_left(posting, dense)
    if i == len(posting) or posting[i] != dense:
        posting.insert(i, dense)


def _remove(posting: array, dense: int) -> None:
    i = bisect.bisect_left(posting, dense)
    if i < len(posting) and posting[i] == dense:
        del posting[i]


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
        self.graph: "Graph | None" = None

    @classmethod
    def build(cls, entities: Iterator[dict[str, Any]], stamp: int) -> "Projections":
        built = cls()
        for row in sorted(entities, key=lambda r: r["denseInt"]):
            built.apply(None, row)
        built.stamp = stamp
        return built

    def __len__(self) -> int:
        return len(self.all)

    def copy(self) -> "Projections":
        """A copy to encode while commits move the original (every array and map copied in C; ~1.4 µs a
        row against ~11 µs for the encode). The graph is not persisted, so not copied."""
        out = Projections()
        out.stamp, out.total_length = self.stamp, self.total_length
        out.ids, out.all, out.lengths = self.ids.copy(), array(TYPECODE, self.all), self.lengths.copy()
        out.postings = {path: {key: array(TYPECODE, posting) for key, posting in values.items()}
                        for path, values in self.postings.items()}
        out.columns = {path: column.copy() for path, column in self.columns.items()}
        out.terms = {word: tfs.copy() for word, tfs in self.terms.items()}
        return out

    def posting(self, path: str, value: Any) -> array:
        return self.postings.get(path, {}).get(value_key(value), array(TYPECODE))

    def apply(self, before: dict[str, Any] | None, after: dict[str, Any] | None) -> None:
        """Move the projections from an entity's old row to its new one (None: absent)."""
        if before is not None:
            self._unpost(before)
        if after is not None:
            self._post(after)
        if self.graph is not None:
            self.graph.entity(before, after)

    def apply_relation(self, before: dict[str, Any] | None, after: dict[str, Any] | None) -> None:
        """Move the graph from a relation's old row to its new one, once the graph is built."""
        if self.graph is not None:
            self.graph.relation(before, after)

    def _post(self, row: dict[str, Any]) -> None:
        dense = row["denseInt"]
        self.ids[dense] = row["id"]
        _insert(self.all, dense)
        seen: set[tuple[str, tuple[str, Any]]] = set()
        for path, value in leaves(row):
            key = value_key(value)
            if (path, key) in seen:
                continue
            seen.add((path, key))
            _insert(self.postings.setdefault(path, {}).setdefault(key, array(TYPECODE)), dense)
            self.columns.setdefault(path, {}).setdefault(dense, value)
        for name in COLUMN_ONLY:
            self.columns.setdefault(name, {})[dense] = row[name]
        counts: dict[str, int] = {}
        found = words(row)
        for word in found:
            counts[word] = counts.get(word, 0) + 1
        for word, tf in counts.items():
            self.terms.setdefault(word, {})[dense] = tf
        self.lengths[dense] = len(found)
        self.total_length += len(found)

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
        self.total_length -= self.lengths.pop(dense, 0)


# -- snapshots (docs/store-format.md, "Projection snapshots") -------------------------------------------

SNAPSHOT_FORMAT = 1
_crc = struct.Struct("<I")


def snapshot_name(stamp: int, suffix: str = ".proj") -> str:
    return f"{stamp:020d}{suffix}"


def encode_snapshot(proj: Projections) -> bytes:
    """The projections as one MessagePack document followed by its crc32 (u32 little-endian).

    Packed a member at a time (the same bytes as one ``packb`` of the whole map): a single C call
    over an O(store) document would hold the interpreter lock throughout, and every commit and read
    of the process would wait on a background flush."""
    dense = array(TYPECODE, sorted(proj.ids))
    members: list[tuple[str, Any, bool]] = [  # (key, value, packed element by element)
        ("format", SNAPSHOT_FORMAT, False), ("stamp", proj.stamp, False), ("totalLength", proj.total_length, False),
        ("dense", dense.tobytes(), False), ("ids", [proj.ids[d] for d in dense], True),
        ("all", proj.all.tobytes(), False),
        ("postings", [[path, kind, value, posting.tobytes()] for path, values in proj.postings.items()
                      for (kind, value), posting in values.items()], True),
        ("columns", [[path, array(TYPECODE, column.keys()).tobytes(), list(column.values())]
                     for path, column in proj.columns.items()], True),
        ("terms", [[word, array(TYPECODE, tfs.keys()).tobytes(), array("I", tfs.values()).tobytes()]
                   for word, tfs in proj.terms.items()], True),
        ("lengths", [array(TYPECODE, proj.lengths.keys()).tobytes(), array("I", proj.lengths.values()).tobytes()],
         False),
    ]
    packer = msgpack.Packer(use_bin_type=True, autoreset=False)
    packer.pack_map_header(len(members))
    for key, value, by_element in members:
        packer.pack(key)
        if by_element:
            packer.pack_array_header(len(value))
            for element in value:
                packer.pack(element)
        else:
            packer.pack(value)
    body = packer.bytes()
    return body + _crc.pack(zlib.crc32(body))


def _ints(data: bytes, typecode: str = TYPECODE) -> array:
    out = array(typecode)
    out.frombytes(data)
    return out


_BY_ELEMENT = frozenset(("ids", "postings", "columns", "terms"))


def decode_snapshot(data: bytes) -> Projections:
    """Projections from a snapshot; ValueError when it does not check out (it is then rebuilt, never trusted).

    Unpacked a member at a time, for the reason :func:`encode_snapshot` packs so: a background load
    must not hold the interpreter lock for the whole document."""
    if len(data) < 4 or zlib.crc32(memoryview(data)[:-4]) != _crc.unpack_from(data, len(data) - 4)[0]:
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
                if key == "format" and doc[key] != SNAPSHOT_FORMAT:
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


def newest_snapshot(folder: Path, suffix: str = ".proj") -> tuple[int, Path] | None:
    cut = len(suffix)
    found = sorted((int(p.name[:-cut]), p) for p in folder.glob("*" + suffix) if p.name[:-cut].isdigit())
    return found[-1] if found else None
