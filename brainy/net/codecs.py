"""The two encodings every transport speaks: JSON (the default) and MessagePack.

One facade with the same names for both (``decode``, ``encode``), chosen per
request by ``Content-Type`` and ``Accept``. A body that does not decode
cleanly in its declared encoding (JSON sent as MessagePack, trailing bytes,
bad UTF-8) is ``BodyDecodeError``: never half-read.

Vectors (DOORS 0.3): an answer carries each as a :class:`~brainy.contract.vectors.WireVector`, and this
is the one place that writes it: in MessagePack an array of float32 (5 bytes a number, not a
float64's 9), in JSON the shortest decimal that round-trips to the same float32, so the two
encodings decode equal. Every JSON answer, MCP's included, is written by :func:`to_json`.
"""

from __future__ import annotations

from typing import Any

import msgpack
import numpy as np
import orjson

from brainy.contract import refusals as R
from brainy.contract.vectors import WireVector

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
            raise R.BodyDecodeError("bytes remain after the MessagePack document (is this JSON?)",
                                    encoding="msgpack", offset=len(body) - len(exc.extra)) from None
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


# -- vectors -------------------------------------------------------------------------------------

# orjson writes a float32 numpy array with the shortest float32 decimals; list subclasses (a
# WireVector) are handed to the default instead of being written as float64 lists.
_JSON_OPTIONS = orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_PASSTHROUGH_SUBCLASS


def _plain(obj: Any) -> Any:
    """A subclass of a JSON/MessagePack type as its base type (a tuple as a list)."""
    for base in (dict, list, tuple, str, int, float):
        if isinstance(obj, base):
            return list(obj) if base is tuple else base(obj)
    raise TypeError(f"{type(obj).__name__} is not a JSON value")


def _json_default(obj: Any) -> Any:
    return np.asarray(obj, dtype=np.float32) if isinstance(obj, WireVector) else _plain(obj)


def to_json(document: Any) -> bytes:
    """The JSON bytes of a document, its vectors as shortest float32 decimals."""
    return orjson.dumps(document, default=_json_default, option=_JSON_OPTIONS)


class _HoldsVector(Exception):
    """The document holds a vector: pack it part by part."""


def _msgpack_default(obj: Any) -> Any:
    if isinstance(obj, WireVector):
        raise _HoldsVector
    return _plain(obj)


_FLOAT32 = np.dtype([("marker", "u1"), ("value", ">f4")])  # MessagePack float 32: 0xca, big-endian


def float32_array(values: np.ndarray) -> bytes:
    """A MessagePack array of float32 numbers."""
    n = len(values)
    head = bytes((0x90 | n,)) if n < 16 else (b"\xdc" + n.to_bytes(2, "big") if n < 1 << 16
                                              else b"\xdd" + n.to_bytes(4, "big"))
    body = np.empty(n, dtype=_FLOAT32)
    body["marker"] = 0xCA
    body["value"] = values
    return head + body.tobytes()


def to_msgpack(document: Any) -> bytes:
    """The MessagePack bytes of a document, its vectors as arrays of float32."""
    # strict_types hands list subclasses to the default, so a document holding no vector packs in
    # one call, and one that does is found out without a separate walk. A packer per call: a
    # packer holds a buffer, and answers are encoded on more than one thread.
    packer = msgpack.Packer(use_bin_type=True, strict_types=True, default=_msgpack_default, autoreset=True)
    out: list[bytes] = []
    _pack(packer, document, out)
    return b"".join(out)


def _pack(packer: msgpack.Packer, obj: Any, out: list[bytes]) -> None:
    if isinstance(obj, WireVector):
        out.append(float32_array(np.asarray(obj, dtype=np.float32)))
        return
    try:
        out.append(packer.pack(obj))
        return
    except _HoldsVector:
        packer.reset()
    if isinstance(obj, dict):
        out.append(packer.pack_map_header(len(obj)))
        for key, value in obj.items():
            out.append(packer.pack(key))
            _pack(packer, value, out)
    else:  # a list or tuple holding a vector somewhere inside
        out.append(packer.pack_array_header(len(obj)))
        for value in obj:
            _pack(packer, value, out)
