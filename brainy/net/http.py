"""The HTTP request and response every HTTP transport (h1, h2, h3) speaks, its limits, and a refusal's answer.

A leaf: it imports nothing of the app or of any transport, so the sans-IO
protocol objects (``brainy.net.h1``, ``brainy.net.h2``) and the app
(``brainy.net.app``, MCP's streamable HTTP) all build on it and none on another.
A refusal's HTTP headers (``WWW-Authenticate``, ``Allow``) are declared here
once, in :data:`_HEADERS`, for every place that answers a refusal over HTTP.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from brainy.contract import refusals as R
from brainy.net import codecs

MAX_BODY = 64 << 20  # PayloadTooLargeError above this (DOORS.md 11.1)
MAX_HEADER_BYTES = 64 << 10  # HeaderTooLargeError above this (DOORS.md 11.1); h2's SETTINGS_MAX_HEADER_LIST_SIZE

Header = tuple[bytes, bytes]


@dataclass(slots=True)
class Request:
    method: str
    path: str  # without the query string, still percent-encoded
    query: str = ""
    headers: dict[str, str] = field(default_factory=dict)  # lowercase names
    body: bytes = b""

    @classmethod
    def from_fields(cls, fields: list[Header], body: bytes) -> Request:
        """The request of an HTTP/2 or HTTP/3 stream: its header fields (pseudo-headers first) and its body."""
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in fields}
        path, _, query = headers.get(":path", "/").partition("?")
        plain = {k: v for k, v in headers.items() if not k.startswith(":")}
        return cls(headers.get(":method", "GET"), path, query, plain, body)


class Passed:
    """An answer passed on as it came (a brain's owner's, proxied over HTTP/1.1, brainy/net/edge.py): ``data`` its
    bytes, its body from ``head`` on, and ``added`` (framed lines) to add to its head."""

    __slots__ = ("data", "head", "added")

    def __init__(self, data: bytes, head: int, added: bytes) -> None:
        self.data = data
        self.head = head
        self.added = added


@dataclass(slots=True)
class Response:
    status: int
    headers: list[Header]
    body: bytes
    # HTTP/2 and HTTP/3 only (gRPC's status travels here): None frames a content-length and ends the
    # stream with the body; a list ends it with these fields instead, and [] with the headers alone
    trailers: list[Header] | None = None


@dataclass(slots=True)
class StreamingResponse(Response):
    """An answer whose body is a stream the glue keeps writing (the held change feed): ``feed`` is the
    opened :class:`~brainy.net.sse.OpenedFeed`; ``body`` is empty."""

    feed: object = None


# The header fields a refusal's class carries over HTTP, beside its body: RFC 9110 11.6.1 (a 401
# names its scheme) and 15.5.6 (a 405 lists the methods the resource takes).
_HEADERS: dict[str, Callable[[R.Refusal], Header]] = {
    R.UnauthenticatedError.name: lambda refusal: (b"www-authenticate", b'Bearer realm="brainy"'),
    R.MethodNotAllowedError.name: lambda refusal: (b"allow", ", ".join(refusal.fields["allowed"]).encode()),
}


def refusal_headers(refusal: R.Refusal, resource_metadata: str | None = None) -> list[Header]:
    """The header fields ``refusal`` carries on an HTTP answer (none for most classes).

    With ``resource_metadata`` (the URL of this server's RFC 9728 document, when an authorization server
    is configured) every 401 names it in its challenge (RFC 9728 5.1), so an MCP client that was refused
    learns where to get a token.
    """
    header = _HEADERS.get(refusal.name)
    found = [header(refusal)] if header is not None else []
    if resource_metadata is not None and refusal.status == 401:
        challenge = f'Bearer realm="brainy", resource_metadata="{resource_metadata}"'.encode()
        found = [h for h in found if h[0] != b"www-authenticate"] + [(b"www-authenticate", challenge)]
    return found


def refusal_response(refusal: R.Refusal) -> Response:
    """The answer to a refusal met before any door ran (a request over a limit, one that does not parse):
    the refusal body with a zero ``_meta.ms`` and ``Server-Timing``, since no dispatcher clock ran."""
    body, kind = codecs.encode({"error": refusal.to_wire(), "_meta": {"ms": 0.0}}, False)
    return Response(
        refusal.status or 400,
        [(b"content-type", kind.encode()), (b"server-timing", b"brainy;dur=0.000"), *refusal_headers(refusal)],
        body,
    )
