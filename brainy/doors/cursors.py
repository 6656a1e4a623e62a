"""Paging cursors: opaque, pinned to the generation their first page read, bound to one door and query.

A cursor is base64url of ``{d: door, q: digest of the query, g: generation, p: position}``. A later
page reads at ``g``, so a multi-page walk is one consistent state; a cursor handed to another door
or another query is ``CursorInvalidError``.
"""

from __future__ import annotations

import base64
import hashlib
from typing import Any

import orjson

from brainy.contract import refusals as R
from brainy.contract.limits import json_loads


def _digest(door: str, query: dict[str, Any], bound: bytes) -> str:
    # orjson: a query may hold numbers by the hundred; ``bound`` follows the query's JSON, whose end is its own (a
    # JSON document is never the start of another), so two different pairs never digest the same text
    text = orjson.dumps(
        {k: v for k, v in query.items() if k not in ("cursor", "limit")},
        option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS,
        default=str,
    )
    return hashlib.sha256(door.encode() + b"\0" + text + bound).hexdigest()[:16]


def encode_cursor(door: str, query: dict[str, Any], generation: int, position: Any, bound: bytes = b"") -> str:
    """An opaque cursor: the door, a digest of the query (and of ``bound``, bytes it is bound to besides, such as a
    find's query vector: Query.fingerprint), the pinned generation and where the next page starts."""
    payload = orjson.dumps({"d": door, "q": _digest(door, query, bound), "g": generation, "p": position})
    return base64.urlsafe_b64encode(payload).decode().rstrip("=")


def decode_cursor(text: Any, door: str, query: dict[str, Any], bound: bytes = b"") -> tuple[int, Any]:
    """``(generation, position)`` of a cursor minted by this door for this query, or CursorInvalidError."""
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
        doc = json_loads(raw)
        if doc["d"] == door and doc["q"] == _digest(door, query, bound) and isinstance(doc["g"], int):
            return doc["g"], doc["p"]
    except (TypeError, ValueError, KeyError):
        pass
    raise R.CursorInvalidError("the cursor is malformed, or belongs to another door or query")
