"""gRPC's framing of the ``brainy.v1.Brainy`` service, sans-IO: one request message in, one answer's bytes out.

gRPC is HTTP/2 with a length-prefixed message in each direction and the
status in trailers (the gRPC "HTTP/2 protocol" document). This module is
the part of that which is gRPC's own and not HTTP/2's: the five-byte
length prefix, the protobuf wire form of the two messages of
``docs/brainy.proto``, the status codes, and the header and trailer fields
of an answer. It is handed bytes and hands back values and a
:class:`~brainy.net.http.Response`; the HTTP/2 connection
(``brainy.net.h2``) frames that like any other answer, trailers included.

The two messages have string fields only (``DoorRequest``: brain 1, id 2,
document 3, sha256 4; ``DoorAnswer``: oneof document 1, refusal 2), so their
protobuf form is read and written here directly rather than through
generated code: a generated module would need protoc at build time for
four strings. A message that does not read cleanly (a short or trailing
prefix, a compressed flag, a field of the wrong wire type, bad UTF-8) is
:class:`MessageUnreadable`, never half-read (STYLE 7).
"""

from __future__ import annotations

from typing import NamedTuple
from urllib.parse import quote

from brainy.contract import doors as D
from brainy.net.http import Response

SERVICE_PATH = f"/{D.GRPC_PACKAGE}.{D.GRPC_SERVICE}/"  # every rpc's :path is this plus its name
CONTENT_TYPE = b"application/grpc"  # gRPC's media type; "+proto" is the same message form

# The status codes this server answers (grpc/doc/statuscodes.md). A door's refusal is never one of them:
# it is an answer (status OK) carrying the refusal (seed 000, Transports 3).
OK = 0
INVALID_ARGUMENT = 3  # the request message, or the document in it, does not read
UNIMPLEMENTED = 12  # an rpc this service does not declare, or a method that is not POST
UNAUTHENTICATED = 16  # no credential, or an identity-time token refusal (the message names which)

_PREFIX = 5  # compressed-flag byte + four-byte big-endian length
_LEN, _VARINT, _FIXED64, _FIXED32 = 2, 0, 1, 5  # protobuf wire types


class MessageUnreadable(Exception):
    """The request's bytes are not one uncompressed ``DoorRequest`` message; ``reason`` says where."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class DoorRequest(NamedTuple):
    """``brainy.v1.DoorRequest``: an absent field is the empty string, as proto3 reads it."""

    brain: str = ""
    id: str = ""
    document: str = ""
    sha256: str = ""


_REQUEST_FIELDS = ("brain", "id", "document", "sha256")  # field numbers 1 to 4


def read_request(body: bytes) -> DoorRequest:
    """The one message of a unary request body, or :class:`MessageUnreadable`."""
    if len(body) < _PREFIX:
        raise MessageUnreadable(f"the body is {len(body)} bytes; a message starts with a 5-byte prefix")
    if body[0] != 0:
        raise MessageUnreadable("the message is compressed; this server accepts grpc-encoding identity only")
    length = int.from_bytes(body[1:_PREFIX], "big")
    if len(body) != _PREFIX + length:
        raise MessageUnreadable(
            f"the prefix announces {length} bytes and {len(body) - _PREFIX} follow "
            "(a unary rpc carries exactly one message)"
        )
    return _fields(body, _PREFIX)


def _fields(data: bytes, at: int) -> DoorRequest:
    """The fields from ``at`` to the end. A one-byte key or length (every field under 128 bytes) is read
    inline: the message of a door call is a few short strings, and this is on every rpc's path."""
    found = ["", "", "", ""]
    end = len(data)
    while at < end:
        key = data[at]
        if key < 0x80:
            at += 1
        else:
            key, at = _varint(data, at)
        number, wire = key >> 3, key & 7
        if wire == _LEN:
            if at < end and data[at] < 0x80:
                size, at = data[at], at + 1
            else:
                size, at = _varint(data, at)
            stop = at + size
            if stop > end:
                raise MessageUnreadable(f"field {number} at byte {at - _PREFIX} runs past the message")
            if 1 <= number <= 4:
                try:
                    found[number - 1] = data[at:stop].decode("utf-8")
                except UnicodeDecodeError:
                    raise MessageUnreadable(f"field {number} ({_REQUEST_FIELDS[number - 1]}) is not UTF-8") from None
            at = stop
        elif 1 <= number <= 4:
            raise MessageUnreadable(
                f"field {number} ({_REQUEST_FIELDS[number - 1]}) has wire type {wire}, not a string"
            )
        elif wire == _VARINT:  # an unknown field is skipped, as protobuf readers do
            _, at = _varint(data, at)
        elif wire in (_FIXED64, _FIXED32):
            at += 8 if wire == _FIXED64 else 4
            if at > end:
                raise MessageUnreadable(f"field {number} runs past the message")
        else:
            raise MessageUnreadable(f"field {number} has wire type {wire}, which proto3 does not write")
    return DoorRequest(*found)


def _varint(data: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if at >= len(data) or shift > 63:
            raise MessageUnreadable(f"a varint at byte {at - _PREFIX} does not end")
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, at
        shift += 7


def _string_field(number: int, text: bytes) -> bytes:
    size = len(text)
    if size < 0x80:  # one length byte: most answers under 128 bytes
        return bytes((number << 3 | _LEN, size)) + text
    head = bytearray([number << 3 | _LEN])
    while size >= 0x80:
        head.append(size & 0x7F | 0x80)
        size >>= 7
    head.append(size)
    return bytes(head) + text


def answer_message(document: bytes | None = None, refusal: bytes | None = None) -> bytes:
    """One length-prefixed ``DoorAnswer``: the answer document's JSON, or the refusal's (field 1 or 2)."""
    payload = _string_field(1, document) if refusal is None else _string_field(2, refusal)  # type: ignore[arg-type]
    return b"\x00" + len(payload).to_bytes(4, "big") + payload


_ANSWER_HEAD: list[tuple[bytes, bytes]] = [(b"content-type", CONTENT_TYPE)]
_OK: list[tuple[bytes, bytes]] = [(b"grpc-status", b"0")]


def answered(message: bytes, ms: float) -> Response:
    """Status OK with one answer message; the dispatcher's milliseconds in the response metadata."""
    return Response(200, [*_ANSWER_HEAD, (b"brainy-ms", b"%.3f" % ms)], message, _OK)


def failed(status: int, message: str, ms: float = 0.0) -> Response:
    """A transport failure: the Trailers-Only form (one HEADERS block, no message), its message
    percent-encoded as the gRPC protocol document asks."""
    return Response(
        200,
        [
            (b"content-type", CONTENT_TYPE),
            (b"brainy-ms", b"%.3f" % ms),
            (b"grpc-status", str(status).encode()),
            (b"grpc-message", quote(message, safe=" !\"#$&'()*+,-./:;<=>?@[\\]^_`{|}~").encode()),
        ],
        b"",
        trailers=[],
    )
