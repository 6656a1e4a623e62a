"""A page's rows out of the row cache and its plain hits, pure Python: the twin of ``pagerows.pyx``.

``cached``: the cached answer of each key whose version is known at the read's generation without a
read (brainy/index/encoded_rows.py, ``Resolved``: key -> (generation of the version, the highest read
generation it is known for)), each one found marked used (``Encoded.used``: the cache's sweep gives it a
second chance, brainy/index/encoded_rows.py); None for the others, whose places are listed. The caller holds
the cache's lock.

``plain_hits``: a plain page's hits (no score, sources or passages), ``{"id", "score", "entity"}``. An
:class:`~brainy.contract.encoded.Encoded` entity's hit is made once and kept with it (a read-only
:class:`~brainy.contract.encoded.Hit`): a page read again builds no dicts. A plain document's hit (a call
in process) is a fresh dict. A page of encoded rows only is a :class:`~brainy.contract.encoded.Hits`.

``hits_json``: such a page's JSON array, one join of its hits' heads and rows' bytes (what orjson writes
for the same hits, without a call back a row).
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from brainy.contract.encoded import Encoded, Hit, Hits, plain_hit

__all__ = ["cached", "hits_json", "plain_hits"]


def cached(
    keys: list[bytes],
    found: dict[bytes, tuple[int, int]],
    entries: OrderedDict,
    at: int,
    serial: int,
    include_vector: bool,
    include_data: bool,
) -> tuple[list[Any], list[int]]:
    """``(answers, missing)``: each key's cached answer (an entry's second item) or None, and the places of the Nones."""
    known_of, entry_of = found.get, entries.get
    out: list[Any] = []
    missing: list[int] = []
    for key in keys:
        known = known_of(key)
        if known is not None and known[0] <= at <= known[1]:
            slot = (serial, key, known[0], include_vector, include_data)
            entry = entry_of(slot)
            if entry is not None:
                entry[1].used = True
                out.append(entry[1])
                continue
        missing.append(len(out))
        out.append(None)
    return out, missing


def plain_hits(ids: list[str], entities: list[Any]) -> list[dict[str, Any]]:
    """Each id with its entity as a hit without a score: a :class:`~brainy.contract.encoded.Hits` when every
    entity is encoded, else a list."""
    out: list[dict[str, Any]] = []
    every_encoded = True
    for id_, entity in zip(ids, entities):
        if type(entity) is not Encoded:
            out.append({"id": id_, "score": None, "entity": entity})
            every_encoded = False
            continue
        hit = entity.hit
        if hit is None or hit["id"] != id_:
            hit = entity.hit = plain_hit(id_, entity)
        out.append(hit)
    return Hits(out) if every_encoded else out


def hits_json(hits: list[Any]) -> bytes | None:
    """The JSON array of a page's hits, each its JSON head, its entity's JSON and ``}``; None when one of them
    is not a :class:`~brainy.contract.encoded.Hit` of an encoded row with its head (the caller encodes the
    list as it is)."""
    parts = []
    for hit in hits:
        entity = hit.get("entity") if type(hit) is Hit else None
        head = getattr(hit, "json_head", None)
        if type(entity) is not Encoded or type(head) is not bytes:
            return None
        parts.append(head + entity.json + b"}")
    return b"[" + b",".join(parts) + b"]"
