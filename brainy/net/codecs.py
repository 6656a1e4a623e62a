"""The two encodings every transport speaks: JSON (the default) and MessagePack.

One facade with the same names for both (``decode``, ``encode``), chosen per
request by ``Content-Type`` and ``Accept``. A body that does not decode
cleanly in its declared encoding (JSON sent as MessagePack, trailing bytes,
bad UTF-8) is ``BodyDecodeError``: never half-read.
"""

from __future__ import annotations

from typing import Any

import msgpack
import orjson

from brainy._speedups import pagerows, wirepack
from brainy.contract import refusals as R
from brainy.contract.encoded import Encoded, Hits

JSON = "application/json"
MSGPACK = "application/msgpack"
_MSGPACK_TYPES = frozenset(("application/msgpack", "application/x-msgpack", "application/vnd.msgpack"))


def media_type(header: str | None) -> str | None:
    """The bare, lowercased media type of a Content-Type or Accept value (no parameters)."""
    if not header:
        return None
    return header.split(";", 1)[0].strip().lower()


def decode(body: bytes, content_type: str | None) -> Any:
    """The document in a request body. An empty body is ``{}``."""
    kind = media_type(content_type)
    if kind in _MSGPACK_TYPES:
        if not body:
            return {}
        try:
            return msgpack.unpackb(body, raw=False, strict_map_key=True)
        except msgpack.ExtraData as exc:
            raise R.BodyDecodeError(
                "bytes remain after the MessagePack document (is this JSON?)",
                encoding="msgpack",
                offset=len(body) - len(exc.extra),
            ) from None
        except (ValueError, msgpack.UnpackException, TypeError) as exc:
            raise R.BodyDecodeError(f"the body is not MessagePack: {exc}", encoding="msgpack") from None
    if kind is None or kind == JSON or kind.endswith("+json"):
        if not body:
            return {}
        try:
            return orjson.loads(body)
        except orjson.JSONDecodeError as exc:
            raise R.BodyDecodeError(f"the body is not JSON: {exc.msg}", encoding="json", offset=exc.pos) from None
    raise R.UnsupportedMediaTypeError(f"{content_type!r} is neither JSON nor MessagePack", contentType=content_type)


def wants_msgpack(accept: str | None) -> bool:
    """True when the Accept header asks for MessagePack before JSON."""
    if not accept:
        return False
    for part in accept.split(","):
        kind = media_type(part)
        if kind in _MSGPACK_TYPES:
            return True
        if kind in (JSON, "*/*", "application/*"):
            return False
    return False


def encode(document: Any, msgpack_out: bool) -> tuple[bytes, str]:
    """``(bytes, content type)`` of a document in the chosen encoding."""
    if msgpack_out:
        return to_msgpack(document), MSGPACK
    return to_json(document), JSON


def _fragment(value: Any) -> Any:
    if type(value) is Encoded:
        return value.fragment
    raise TypeError(f"cannot encode {type(value).__name__} as JSON")


def to_json(document: Any) -> bytes:
    """JSON of a document. A :class:`~brainy.contract.vectors.Vector`'s numbers already are the shortest
    decimals of its float32s (DOORS.md 0.3), so the plain encoder writes them right; an
    :class:`~brainy.contract.encoded.Encoded` (a row encoded once per version) is written as its bytes. A
    plain page's results (:class:`~brainy.contract.encoded.Hits`, an answer's top-level ``results``) are
    written as one join of their hits' bytes (brainy/_speedups/pagerows.pyx ``hits_json``): orjson would call
    back once a row for its entity."""
    if type(document) is dict and type(document.get("results")) is Hits:
        joined = pagerows.hits_json(document["results"])
        if joined is not None:
            document = dict(document)  # the caller's answer keeps its hits
            document["results"] = orjson.Fragment(joined)
    return orjson.dumps(document, default=_fragment)


def to_msgpack(document: Any) -> bytes:
    """MessagePack of a document, every :class:`~brainy.contract.vectors.Vector` in it an array of float32s
    (DOORS.md 0.3: 5 bytes a number, not 9) and every :class:`~brainy.contract.encoded.Encoded` its own
    MessagePack bytes (brainy/_speedups/wirepack.pyx: one pass, the rows' bytes copied in)."""
    return wirepack.pack(document)
