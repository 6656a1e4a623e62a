"""HTTP/1.1, sans-IO: bytes in, request events out; responses in, bytes to send out.

Parsing is httptools (keep-alive, pipelining, chunked bodies); response
framing is the ``h1frame`` speedup. Limits are enforced while parsing, before
a byte of an oversized request is buffered: a header block over
``max_header_bytes`` is ``HeaderTooLargeError`` (431) and a body over
``max_body`` is ``PayloadTooLargeError`` (413); a request that does not parse
is ``MalformedRequestError`` (400). Each of those answers once and ends the
connection.
"""

from __future__ import annotations

from dataclasses import dataclass

import httptools

from brainy._speedups import h1frame
from brainy.contract import refusals as R
from brainy.net.http import MAX_BODY, MAX_HEADER_BYTES, Request, Response


@dataclass
class RequestReceived:
    request: Request
    keep_alive: bool


@dataclass
class ProtocolFailed:
    """The connection broke a rule: answer ``refusal`` and close."""

    refusal: R.Refusal


class H1Connection:
    def __init__(self, max_header_bytes: int = MAX_HEADER_BYTES, max_body: int = MAX_BODY) -> None:
        self._parser = httptools.HttpRequestParser(self)
        self._max_header = max_header_bytes
        self._max_body = max_body
        self._events: list[RequestReceived | ProtocolFailed] = []
        self._out = bytearray()
        self._failed = False
        self.mid_request = False  # a request has begun and not yet completed (the read deadline runs)
        self._reset()

    def _reset(self) -> None:
        self._url = bytearray()
        self._headers: dict[str, str] = {}
        self._header_bytes = 0
        self._body: list[bytes] = []
        self._body_bytes = 0
        self._refusal: R.Refusal | None = None

    # httptools callbacks -----------------------------------------------------------------------

    def on_message_begin(self) -> None:
        self._reset()
        self.mid_request = True

    def on_url(self, url: bytes) -> None:
        self._url += url
        self._count(len(url))

    def on_header(self, name: bytes, value: bytes) -> None:
        self._header_bytes += len(name) + len(value) + 4
        if self._header_bytes > self._max_header:
            self._count(0)
        key = name.lower().decode("latin-1")
        text = value.decode("latin-1")
        self._headers[key] = f"{self._headers[key]}, {text}" if key in self._headers else text

    def _count(self, n: int) -> None:
        self._header_bytes += n
        if self._header_bytes > self._max_header and self._refusal is None:
            self._refusal = R.HeaderTooLargeError(f"the request's header block is over {self._max_header} bytes",
                                                  limit=self._max_header)
            raise _Stop

    def on_headers_complete(self) -> None:
        length = self._headers.get("content-length")
        if length is not None and length.isdigit() and int(length) > self._max_body:
            self._refusal = R.PayloadTooLargeError(f"the body is over {self._max_body} bytes", limit=self._max_body)
            raise _Stop

    def on_body(self, body: bytes) -> None:
        self._body_bytes += len(body)
        if self._body_bytes > self._max_body:
            self._refusal = R.PayloadTooLargeError(f"the body is over {self._max_body} bytes", limit=self._max_body)
            raise _Stop
        self._body.append(body)

    def on_message_complete(self) -> None:
        url = bytes(self._url)
        if url[:1] == b"/":  # origin form, nearly every request: split it without a URL parser
            path, _, query = url.partition(b"?")
        else:
            parsed = httptools.parse_url(url)
            path, query = parsed.path or b"/", parsed.query or b""
        body = self._body[0] if len(self._body) == 1 else b"".join(self._body)
        request = Request(self._parser.get_method().decode("ascii"), path.decode("latin-1"),
                          query.decode("latin-1"), self._headers, body)
        self._events.append(RequestReceived(request, self._parser.should_keep_alive()))
        self.mid_request = False

    # the sans-IO surface ------------------------------------------------------------------------

    def receive_data(self, data: bytes) -> list[RequestReceived | ProtocolFailed]:
        """Feed bytes; answer the requests (and at most one failure) they completed."""
        if self._failed:
            return []
        try:
            self._parser.feed_data(data)
        except _Stop:
            self._fail(self._refusal)
        except httptools.HttpParserUpgrade:
            self._fail(R.MalformedRequestError("protocol upgrades are not spoken on this listener",
                                               reason="upgrade"))
        except httptools.HttpParserError as exc:
            if isinstance(exc.__context__, _Stop) and self._refusal is not None:
                self._fail(self._refusal)
            else:
                self._fail(R.MalformedRequestError(f"the request does not parse: {exc}", reason="parse"))
        events, self._events = self._events, []
        return events

    def _fail(self, refusal: R.Refusal | None) -> None:
        self._failed = True
        self._events.append(ProtocolFailed(refusal or R.MalformedRequestError("bad request", reason="parse")))

    def send_response(self, response: Response, keep_alive: bool, head: bool = False) -> None:
        self._out += h1frame.frame_response(response.status, response.headers, response.body, keep_alive, head)

    def data_to_send(self) -> bytes:
        """The bytes framed so far, handed over once (no IO here: the caller writes them)."""
        out, self._out = bytes(self._out), bytearray()
        return out


class _Stop(Exception):
    """Raised inside a parser callback to stop parsing at a limit."""
