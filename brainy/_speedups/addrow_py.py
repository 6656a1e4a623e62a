"""Pure twin of ``addrow``: a batch's adds of new rows, each id minted here, laid out and staged in one walk.

``add_minted(items, start, staged, plan, ids) -> (end, next_dense)`` takes the items of an ``addMany`` from
``start`` on, while each is a *plain* add, and for each does what the ``add`` rule and ``Txn.put_entity`` do for a
row whose id is minted in the commit (brainy/doors/writes.py, brainy/store/txn.py): the row laid out in the rule's
field order and packed, its vector packed, both keys staged with nothing to undo to, the op and the move recorded,
the id appended to ``ids``. It stops at the first item that is not plain (``end``: its index, or ``len(items)``);
the caller runs the rule on that one (which refuses it, or adds it in the general way) and calls again after it.

A plain add is a dict with no argument but ``type``, ``vector``, ``data`` and ``metadata``: ``type`` a noun
type (``str``); ``vector`` one ``pack_vector(vector, dimensions)`` packs (else its refusal is the rule's to word); ``data`` absent,
None or a ``str``; ``metadata`` absent, None or a ``dict`` of ``str`` keys none reserved, each value a leaf that
stores as it is (an exact ``str``, ``bool``, None, finite ``float`` or 64-bit ``int``). Nothing is staged before
an item is known plain, so an item stopped at leaves the transaction as it was.

``staged`` is the transaction's ``(overlay, undo, ops, moves, generation, timestamp, caller, next_dense)``;
``plan`` is the rule's ``(nouns, reserved, visibility, pack_vector, dimensions, refused, pack_row)`` then the
store's ``(missing, mint, entity, vector_key)``: the noun types, the reserved metadata names, the default
visibility, the vector packer, the vector's length and the exception the packer refuses with, the row packer; the undo log's "no value" mark, the id minter
(``mint() -> (text, raw)``), and the row and vector key prefixes.

``pack_column``, ``pack_postings`` and ``pack_texts`` pack a projections snapshot's sections a slice at a time
(brainy/index/sections.py), each value as msgpack's Packer packs it alone.

``Payloads().pack(doc)`` answers a read-only view of ``doc`` packed as msgpack's Packer (``use_bin_type=True``)
packs it (a commit's log payload, brainy/store/log.py), valid until the same ``Payloads``' next ``pack``. The
compiled twin packs each into the same memory and refuses (``BufferError``) while a view of the last is held.
"""

from __future__ import annotations

import math
import struct
from array import array
from typing import Any

import msgpack

__all__ = ["Payloads", "add_minted", "pack_column", "pack_postings", "pack_texts"]

_ARGUMENTS = frozenset(("type", "vector", "data", "metadata"))


def _leaf(value: Any) -> bool:
    kind = type(value)
    if kind is str or kind is bool or value is None:
        return True
    if kind is int:
        return bool(-(1 << 63) <= value < (1 << 64))
    return kind is float and math.isfinite(value)


def _metadata(value: Any, reserved: frozenset[str]) -> dict[str, Any] | None:
    """The row's metadata when it is plain (a new ``{}`` for None), else None."""
    if value is None:
        return {}
    if type(value) is not dict:
        return None
    for key, leaf in value.items():
        if type(key) is not str or key in reserved or not _leaf(leaf):
            return None
    return value


def add_minted(
    items: list[Any], start: int, staged: tuple[Any, ...], plan: tuple[Any, ...], ids: list[str]
) -> tuple[int, int]:
    overlay, undo, ops, moves, generation, timestamp, caller, next_dense = staged
    nouns, reserved, visibility, pack_vector, dimensions, refused, pack_row, missing, mint, entity, vector_key = plan
    i, n = start, len(items)
    while i < n:
        item = items[i]
        if type(item) is not dict or not _ARGUMENTS.issuperset(item):
            break
        kind = item.get("type")
        if type(kind) is not str or kind not in nouns:
            break
        data = item.get("data")
        if data is not None and type(data) is not str:
            break
        meta = _metadata(item.get("metadata"), reserved)
        if meta is None:
            break
        vector = item.get("vector")
        if vector is None:
            break
        try:
            packed = pack_vector(vector, dimensions)
        except refused:
            break
        text, raw = mint()
        row = {
            "id": text,
            "type": kind,
            "subtype": None,
            "service": None,
            "data": data,
            "metadata": meta,
            "visibility": visibility,
            "confidence": None,
            "weight": None,
            "hasVector": True,
            "generation": generation,
            "updatedAt": timestamp,
            "createdAt": timestamp,
            "denseInt": next_dense,
        }
        next_dense += 1
        if caller is not None:
            row["createdBy"] = caller
            row["updatedBy"] = caller
        stored = pack_row(row)
        row["vector"] = packed
        key, vkey = entity + raw, vector_key + raw
        undo.append((key, missing))
        overlay[key] = stored
        undo.append((vkey, missing))
        overlay[vkey] = packed
        ops.append({"k": "e", "o": "put", "row": stored, "vec": packed})
        moves.append(("e", None, row))
        ids.append(text)
        i += 1
    return i, next_dense


def pack_column(column: dict[int, Any], keys: list[int], lo: int, hi: int, base: int) -> tuple[bytes, bytes] | None:
    """The values of ``column`` at ``keys[lo:hi]``, each packed as msgpack's Packer (``use_bin_type=True``) packs
    it, laid end to end, and the end of each one's bytes as native u64s counted from ``base`` (a projections
    snapshot's column section, brainy/index/projections.py); None when a value is not a leaf (an exact ``str``,
    ``bool``, None, ``float`` or 64-bit ``int``): nothing is packed then, the caller packs that column a value at
    a time."""
    values = [column[key] for key in keys[lo:hi]]
    if not all(_leaf(value) or type(value) is float for value in values):
        return None
    packer = msgpack.Packer(use_bin_type=True)
    parts, ends, at = [], [], base
    for value in values:
        part = packer.pack(value)
        parts.append(part)
        at += len(part)
        ends.append(at)
    return struct.pack(f"={len(ends)}Q", *ends), b"".join(parts)


def pack_postings(items: list[Any], lo: int, hi: int, first: int) -> tuple[bytes, bytes] | None:
    """Each ``((kind, value), posting)`` of ``items[lo:hi]`` as its projections snapshot directory entry ``[kind,
    value, first, count]`` packed as msgpack's Packer packs it, laid end to end, and its posting's u64s laid end to
    end (brainy/index/projections.py, format 3's ``postings/<path>`` and ``postingInts/<path>``); ``first`` is
    where the slice's ints start. None when a kind is not a ``str``, a value not a leaf (a ``float`` any float) or a
    posting not an ``array`` of u64: nothing is packed then, the caller packs that path in Python."""
    packer = msgpack.Packer(use_bin_type=True)
    entries, ints = [], []
    for key, posting in items[lo:hi]:
        if type(key) is not tuple or len(key) != 2:
            return None
        kind, value = key
        if type(kind) is not str or not (_leaf(value) or type(value) is float):
            return None
        if type(posting) is not array or posting.typecode != "Q":
            return None
        entries.append(packer.pack([kind, value, first, len(posting)]))
        ints.append(posting.tobytes())
        first += len(posting)
    return b"".join(entries), b"".join(ints)


def pack_texts(texts: dict[int, Any], keys: list[int], lo: int, hi: int, base: int) -> tuple[bytes, bytes] | None:
    """The UTF-8 of ``texts`` at ``keys[lo:hi]`` laid end to end, and the end of each as native u64s counted from
    ``base`` (a projections snapshot's ``idText`` and ``idOffsets``); None when one is not a ``str``."""
    parts, ends, at = [], [], base
    for key in keys[lo:hi]:
        text = texts[key]
        if type(text) is not str:
            return None
        part = text.encode("utf-8")
        parts.append(part)
        at += len(part)
        ends.append(at)
    return struct.pack(f"={len(ends)}Q", *ends), b"".join(parts)


class Payloads:
    def pack(self, doc: Any) -> memoryview:
        return memoryview(msgpack.packb(doc, use_bin_type=True))
