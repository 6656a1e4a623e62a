"""The two encodings every transport speaks: JSON (the default) and MessagePack.

One facade with the same names for both (``decode``, ``encode``), chosen per
request by ``Content-Type`` and ``Accept``. A body that does not decode
cleanly in its declared encoding (JSON sent as MessagePack, trailing bytes,
bad UTF-8) is ``BodyDecodeError``: never half-read. So is one whose arrays and
objects nest deeper than ``MAX_NESTING`` (brainy/contract/limits.py), refused
here, before any code walks it; every transport's decoder comes through
:func:`loads_json` / :func:`check_nesting` or :func:`decode`.
"""

from __future__ import annotations

from typing import Any

import msgpack
import orjson

from brainy._speedups import mpread, nesting, pagerows, picks, vecscan, wirepack
from brainy.contract import refusals as R
from brainy.contract.encoded import Encoded, Hits
from brainy.contract.limits import MAX_NESTING, too_deep

JSON = "application/json"
MSGPACK = "application/msgpack"
_MSGPACK_TYPES = frozenset(("application/msgpack", "application/x-msgpack", "application/vnd.msgpack"))


def media_type(header: str | None) -> str | None:
    """The bare, lowercased media type of a Content-Type or Accept value (no parameters)."""
    if not header:
        return None
    return header.split(";", 1)[0].strip().lower()


def decode(body: bytes, content_type: str | None, envelope: int = 0, vectors: str | None = None) -> Any:
    """The document in a request body. An empty body is ``{}``. ``envelope`` is how many levels the transport
    wraps the argument document in (0 for an HTTP body: the body is the document). ``vectors`` says where a
    write door's vectors stand (``"vector"``: the document's; ``"items"``: each item's): there, an array of
    numbers comes out as a :class:`~brainy.contract.vectors.Float32s`, its numbers never made Python floats
    (:func:`packed_vectors`)."""
    kind = media_type(content_type)
    if kind in _MSGPACK_TYPES:
        if not body:
            return {}
        if vectors is not None and _SCANS:
            document = _msgpack_with_vectors(body, vectors == "items", envelope)
            if document is not None:
                return document
        try:
            document = msgpack.unpackb(body, raw=False, strict_map_key=True)
        except msgpack.ExtraData as exc:
            raise R.BodyDecodeError(
                "bytes remain after the MessagePack document (is this JSON?)",
                encoding="msgpack",
                offset=len(body) - len(exc.extra),
            ) from None
        except (msgpack.StackError, RecursionError):  # msgpack's own limit (1,024 levels; its pure fallback
            # recurses): past ours too, and said the same way
            raise R.BodyDecodeError(_TOO_DEEP, encoding="msgpack") from None
        except (ValueError, msgpack.UnpackException, TypeError) as exc:
            raise R.BodyDecodeError(f"the body is not MessagePack: {exc}", encoding="msgpack") from None
        check_nesting(document, "msgpack", envelope)
        return document
    if kind is None or kind == JSON or kind.endswith("+json"):
        if not body:
            return {}
        if vectors is not None and _SCANS:
            document = packed_vectors(body, vectors == "items", "json")
            if document is not None:
                check_nesting(document, "json", envelope)
                return document
        document = loads_json(body)
        check_nesting(document, "json", envelope)
        return document
    raise R.UnsupportedMediaTypeError(f"{content_type!r} is neither JSON nor MessagePack", contentType=content_type)


# The vector walk only where it is compiled: its pure twin holds the law, but walking a body in Python costs more
# than the floats it spares msgpack from making.
_SCANS = picks["vecscan"] == "cython"
_READS = picks["mpread"] == "cython"  # likewise the one-pass reader: msgpack reads faster than its pure twin


def _msgpack_with_vectors(body: bytes, items: bool, envelope: int) -> Any:
    """The MessagePack document in ``body`` with its vectors packed, its nesting checked; None when the walk packs
    none or gives up (the plain decode then reads the body, or words its refusal)."""
    if _READS:
        holes = vecscan.msgpack_holes(body, items)
        if holes is None:
            return None
        document = mpread.unpack(body, holes, MAX_NESTING + envelope)
        if document is not None:  # read in one pass, its vectors in place, its nesting within the limit
            return document
        # what the reader leaves (an ext value, a document too deep): msgpack reads it, the check words a refusal
    document = packed_vectors(body, items, "msgpack")
    if document is not None:
        check_nesting(document, "msgpack", envelope)
    return document


def packed_vectors(body: bytes, items: bool, encoding: str) -> Any:
    """The document in ``body`` (``encoding`` ``"json"`` or ``"msgpack"``) with its vectors (the document's, or
    with ``items`` each item's) as :class:`~brainy.contract.vectors.Float32s` where they are arrays of numbers the
    walk packs (brainy/_speedups/vecscan*); None when there is none, or when the rest does not decode: the plain
    decode of the body then says what it says."""
    json = encoding == "json"
    found = (vecscan.json_vectors if json else vecscan.msgpack_vectors)(body, items)
    if found is None:
        return None
    rest, packed = found
    try:
        document = orjson.loads(rest) if json else msgpack.unpackb(rest, raw=False, strict_map_key=True)
    except Exception:  # noqa: BLE001  (whatever it is, the body's own decode words it)
        return None
    vecscan.place(document, packed)
    return document


_TOO_DEEP = f"arrays and objects nest deeper than the {MAX_NESTING} levels brainy reads in a document"  # no path:
# the parser stopped before a value was built


def loads_json(data: bytes, what: str = "the body") -> Any:
    """The JSON document in ``data``, or ``BodyDecodeError`` saying where it stops being JSON. A document
    past orjson's own nesting limit (1,024 levels) is refused in the words of ours."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        if exc.msg.startswith("depth limit exceeded"):
            raise R.BodyDecodeError(_TOO_DEEP, encoding="json", offset=exc.pos) from None
        raise R.BodyDecodeError(f"{what} is not JSON: {exc.msg}", encoding="json", offset=exc.pos) from None


def check_nesting(document: Any, encoding: str, envelope: int = 0) -> None:
    """``BodyDecodeError`` naming the path and the limit when a decoded document nests deeper than
    ``MAX_NESTING`` levels below its transport's ``envelope`` (one C pass over its containers)."""
    path = nesting.too_deep(document, MAX_NESTING + envelope)
    if path is not None:
        raise R.BodyDecodeError(too_deep(path), encoding=encoding)


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
