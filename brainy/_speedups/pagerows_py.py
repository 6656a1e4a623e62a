"""A page's rows out of the row cache and its plain hits, pure Python: the twin of ``pagerows.pyx``.

``cached``: the cached answer of each key whose version is known at the read's generation without a
read (brainy/engine/encoded_rows.py, ``Resolved``: key -> (generation of the version, the highest read
generation it is known for)), each one found touched as most recently used; None for the others, whose
places are listed. The caller holds the cache's lock.

``plain_hits``: a plain page's hits (no score, sources or passages), ``{"id", "score", "entity"}``. An
:class:`~brainy.contract.encoded.Encoded` entity's hit is made once and kept with it (a read-only
:class:`~brainy.contract.encoded.Hit`): a page read again builds no dicts. A plain document's hit (a call
in process) is a fresh dict.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from brainy.contract.encoded import Encoded, Hit

__all__ = ["cached", "plain_hits"]


def cached(keys: list[bytes], found: dict[bytes, tuple[int, int]], entries: OrderedDict, at: int, serial: int,
           include_vector: bool, include_data: bool) -> tuple[list[Any], list[int]]:
    """``(answers, missing)``: each key's cached answer (an entry's second item) or None, and the places of the Nones."""
    known_of, entry_of, touch = found.get, entries.get, entries.move_to_end
    out: list[Any] = []
    missing: list[int] = []
    for key in keys:
        known = known_of(key)
        if known is not None and known[0] <= at <= known[1]:
            slot = (serial, key, known[0], include_vector, include_data)
            entry = entry_of(slot)
            if entry is not None:
                touch(slot)
                out.append(entry[1])
                continue
        missing.append(len(out))
        out.append(None)
    return out, missing


def plain_hits(ids: list[str], entities: list[Any]) -> list[dict[str, Any]]:
    """Each id with its entity as a hit without a score."""
    out: list[dict[str, Any]] = []
    for id_, entity in zip(ids, entities):
        if type(entity) is not Encoded:
            out.append({"id": id_, "score": None, "entity": entity})
            continue
        hit = entity.hit
        if hit is None or hit["id"] != id_:
            hit = entity.hit = Hit(id=id_, score=None, entity=entity)
        out.append(hit)
    return out
