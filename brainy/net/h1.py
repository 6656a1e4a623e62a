"""HTTP/1.1, sans-IO: bytes and time in, request events out; responses in, bytes to send out.

Parsing is the ``h1frame`` speedup's ``parse_head`` for the plain request
(no chunks, no upgrade, a body within the limit that has all arrived: nearly
every request), between messages, and httptools for everything else
(keep-alive, pipelining, chunked bodies, partial heads, what the fast parse
declines); response framing is the ``h1frame`` speedup too. Limits are enforced while parsing, before
a byte of an oversized request is buffered: a header block over
``max_header_bytes`` is ``HeaderTooLargeError`` (431) and a body over
``max_body`` is ``PayloadTooLargeError`` (413); a request that does not parse
is ``MalformedRequestError`` (400). Each of those answers once and ends the
connection.

Every call that moves the connection on is handed ``now``; the idle and
request-arrival deadlines (``brainy.net.deadlines``) are read off
:meth:`H1Connection.next_deadline` and checked by
:meth:`H1Connection.timer_fired`, so the glue keeps one timer and a test keeps
a fake clock. A request handed out is owed an answer: until every one is sent,
neither deadline runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import httptools

from brainy._speedups import h1frame
from brainy.contract import refusals as R
from brainy.net.deadlines import IDLE_SECONDS, REQUEST_SECONDS, DeadlinePassed, Deadlines
from brainy.net.http import MAX_BODY, MAX_HEADER_BYTES, Header, Passed, Request, Response

if TYPE_CHECKING:  # the picked twin's type (brainy/_speedups/h1frame.pyi)
    from brainy._speedups.h1frame import Filling

# The methods a request names as text, decoded once rather than per request (httptools answers bytes).
_METHODS = {m.encode(): m for m in ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")}


@dataclass(slots=True)
class RequestReceived:
    request: Request
    keep_alive: bool


@dataclass
class UpgradeRequested:
    """A request asking to switch protocols (RFC 9110 7.8): answer it (``101`` and hand ``rest``, the bytes
    after it, to the new protocol; or a refusal, and close). Nothing after it is parsed as HTTP/1.1."""

    request: Request
    rest: bytes


@dataclass
class ProtocolFailed:
    """The connection broke a rule: answer ``refusal`` and close."""

    refusal: R.Refusal


class H1Connection:
    """One HTTP/1.1 connection, server side, from the bytes that told it apart (``now``: when they came)."""

    def __init__(
        self,
        now: float = 0.0,
        *,
        idle_seconds: float = IDLE_SECONDS,
        request_seconds: float = REQUEST_SECONDS,
        max_header_bytes: int = MAX_HEADER_BYTES,
        max_body: int = MAX_BODY,
        advertise: list[Header] | None = None,
    ) -> None:
        # made at the first bytes the plain parse declines (most connections never have one): the parser holds
        # this object's callbacks, a cycle only the collector would free once the connection closes
        self._parser: httptools.HttpRequestParser | None = None
        self._advertise = advertise or []  # header fields on every answer (Alt-Svc when an h3 listener exists)
        self._advertised = b"".join(b"%s: %s\r\n" % field for field in self._advertise)  # framed: relay()
        self._max_header = max_header_bytes
        self._max_body = max_body
        self._events: list[RequestReceived | UpgradeRequested | ProtocolFailed] = []
        self._out: list[bytes] = []  # framed answers, handed over joined (one answer: as it is, uncopied)
        self._failed = False
        self.mid_request = False  # a request has begun and not yet completed (the request deadline runs)
        self._owed = 0  # events handed out and not yet answered by send_response
        # a plain request whose body is still arriving: its head's fields, its length, the body filled so far
        self._arriving: tuple[tuple[str, str, str, dict[str, str], bool], int, Filling] | None = None
        self._arrived = 0  # of its body's bytes
        self._deadlines = Deadlines(now, idle_seconds, request_seconds)
        self._reset()

    def _reset(self) -> None:
        self._url = b""
        self._headers: dict[str, str] = {}
        self._header_bytes = 0
        self._body: list[bytes] | None = None  # made at the first piece: most requests carry none
        self._body_bytes = 0
        self._refusal: R.Refusal | None = None

    # httptools callbacks (one call each per request, one per header: kept short, they are the parse's cost) --

    def on_message_begin(self) -> None:
        self._reset()
        self.mid_request = True

    def on_url(self, url: bytes) -> None:
        self._url += url
        self._header_bytes += len(url)
        if self._header_bytes > self._max_header:
            self._count(0)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._header_bytes += len(name) + len(value) + 4
        if self._header_bytes > self._max_header:
            self._count(0)
        key = name.lower().decode("latin-1")
        headers = self._headers
        if key in headers:
            headers[key] = f"{headers[key]}, {value.decode('latin-1')}"
        else:
            headers[key] = value.decode("latin-1")

    def _count(self, n: int) -> None:
        self._header_bytes += n
        if self._header_bytes > self._max_header and self._refusal is None:
            self._refusal = R.HeaderTooLargeError(
                f"the request's header block is over {self._max_header} bytes", limit=self._max_header
            )
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
        if self._body is None:
            self._body = [body]
        else:
            self._body.append(body)

    def on_message_complete(self) -> None:
        url = self._url
        if url[:1] == b"/":  # origin form, nearly every request: split it without a URL parser
            path, _, query = url.partition(b"?")
        else:
            parsed = httptools.parse_url(url)
            path, query = parsed.path or b"/", parsed.query or b""
        pieces = self._body
        body = b"" if pieces is None else pieces[0] if len(pieces) == 1 else b"".join(pieces)
        parser = self._parser
        assert parser is not None  # this callback runs inside its feed_data
        method = parser.get_method()
        request = Request(
            _METHODS.get(method) or method.decode("ascii"),
            path.decode("latin-1"),
            query.decode("latin-1") if query else "",
            self._headers,
            body,
        )
        self._events.append(RequestReceived(request, parser.should_keep_alive()))
        self._owed += 1
        self.mid_request = False

    # the sans-IO surface ------------------------------------------------------------------------

    def receive_data(self, data: bytes, now: float) -> list[RequestReceived | UpgradeRequested | ProtocolFailed]:
        """Feed the bytes that arrived at ``now``; answer the requests (and at most one failure) they
        completed. Each event is owed one :meth:`send_response`, in the order given."""
        if self._failed:
            return []
        deadlines = self._deadlines  # Deadlines.heard, inline: every read pays it
        deadlines.last_data = now
        if self._arriving is not None:
            data = self._take_body(data)
            if not data or self._failed:
                events, self._events = self._events, []
                return events
        if not self.mid_request:  # between messages: the plain requests first, without the parser's callbacks
            deadlines.request_began = now
            taken = self._take_plain(data)
            if taken == len(data) or self._failed:
                events, self._events = self._events, []
                return events
            if taken:
                data = data[taken:]
        if self._parser is None:
            self._parser = httptools.HttpRequestParser(self)
        try:
            self._parser.feed_data(data)
        except _Stop:
            self._fail(self._refusal)
        except httptools.HttpParserUpgrade as exc:
            last = self._events[-1] if self._events else None
            if isinstance(last, RequestReceived) and not self.mid_request:
                self._events[-1] = UpgradeRequested(last.request, bytes(data[exc.args[0] :]))
                self._failed = True  # what follows is the new protocol's, never parsed here
            else:
                self._fail(
                    R.MalformedRequestError("protocol upgrades are not spoken on this listener", reason="upgrade")
                )
        except httptools.HttpParserError as exc:
            if isinstance(exc.__context__, _Stop) and self._refusal is not None:
                self._fail(self._refusal)
            else:
                self._fail(R.MalformedRequestError(f"the request does not parse: {exc}", reason="parse"))
        events, self._events = self._events, []
        return events

    def _take_plain(self, data: bytes) -> int:
        """Read the whole plain requests at the start of ``data`` (``h1frame.parse_head``: no chunks, no
        upgrade, a body within the limit and all here) into events; answer how many bytes they took. The
        first request that is not plain, or not all here, is left with the rest for httptools, which is
        between messages too. After a request that closes the connection nothing more is read."""
        at = 0
        end = len(data)
        max_header = self._max_header
        while at < end:
            head = h1frame.parse_head(data, at, max_header)
            if head is None:
                return at
            method, path, query, headers, keep_alive, length, body_at = head
            if length > self._max_body:
                return at  # httptools refuses it
            if body_at + length > end:
                # the rest of its body comes in later reads: it is filled in place as they come (httptools would
                # copy each read into a piece of its own, and the pieces be joined), the glue's reads going
                # straight into it (body_room): a batch's megabytes copied once, from the kernel
                filling = h1frame.Filling(length)
                filling.room(0)[: end - body_at] = memoryview(data)[body_at:]
                self._arriving = ((method, path, query, headers, keep_alive), length, filling)
                self._arrived = end - body_at
                self.mid_request = True
                return end
            at = body_at + length
            body = data[body_at:at] if length else b""
            self._events.append(RequestReceived(Request(method, path, query, headers, body), keep_alive))
            self._owed += 1
            if not keep_alive:
                self._failed = True  # the connection ends with this answer: what follows is never read
                return end
        return at

    def _take_body(self, data: bytes) -> bytes:
        """Take the next of the arriving body's bytes from ``data``; once the body is whole, its request's event.
        Answers the bytes after the body (none while it is still arriving, or after a request that closes)."""
        assert self._arriving is not None
        take = min(self._arriving[1] - self._arrived, len(data))
        self._arriving[2].room(self._arrived)[:take] = memoryview(data)[:take]
        if not self._filled(take) or self._failed:
            return b""
        return data[take:]

    def _filled(self, count: int) -> bool:
        """``count`` more of the arriving body's bytes are in; answers whether it is whole (its request's event
        made; after a request that closes, the connection reads nothing more)."""
        assert self._arriving is not None
        fields, length, filling = self._arriving
        self._arrived += count
        if self._arrived < length:
            return False
        self._arriving = None
        self.mid_request = False
        method, path, query, headers, keep_alive = fields
        self._events.append(RequestReceived(Request(method, path, query, headers, filling.take()), keep_alive))
        self._owed += 1
        if not keep_alive:
            self._failed = True  # the connection ends with this answer: what follows is never read
        return True

    def body_room(self) -> memoryview | None:
        """Where the next read may go straight in: the rest of a plain request's body while it arrives (exactly
        its bytes: a request after it is read as usual), else None. The view is for the next read, whose count
        :meth:`body_received` takes; a fresh one is asked for after it."""
        arriving = self._arriving
        if arriving is None or self._failed:
            return None
        return arriving[2].room(self._arrived)

    def body_received(self, count: int, now: float) -> list[RequestReceived | UpgradeRequested | ProtocolFailed]:
        """:meth:`receive_data` for ``count`` bytes a read put into :meth:`body_room`'s view."""
        self._deadlines.last_data = now
        self._filled(count)
        events, self._events = self._events, []
        return events

    def _fail(self, refusal: R.Refusal | None) -> None:
        self._failed = True
        self._events.append(ProtocolFailed(refusal or R.MalformedRequestError("bad request", reason="parse")))
        self._owed += 1

    def send_response(self, response: Response, keep_alive: bool, head: bool = False) -> None:
        """Frame the answer to the oldest event still owed one (``head``: the body left out, its length
        stated; ``keep_alive`` false: ``connection: close``, and the caller closes after writing)."""
        self._out.append(self.respond(response, keep_alive, head))

    def respond(self, response: Response, keep_alive: bool, head: bool = False) -> bytes:
        """:meth:`send_response`, then :meth:`data_to_send`, in one call: the bytes to write, this answer's
        after any framed before it (the glue writes every answer as it is given, so nearly always it alone,
        handed over as framed)."""
        headers = response.headers + self._advertise if self._advertise else response.headers
        framed = h1frame.frame_response(response.status, headers, response.body, keep_alive, head)
        if self._owed:  # none is owed when the glue frames an answer with no request (an h2-only listener)
            self._owed -= 1
        if self._out:
            self._out.append(framed)
            return self.data_to_send()
        return framed

    def relay(self, answer: Passed, now: float) -> bytes:
        """:meth:`respond` for an answer passed on as it came (a proxied one), written at ``now``: its head and body as
        they are, its ``added`` lines and this connection's own fields added to the head, a ``connection`` field of
        the hop it came over left out (the connection it goes on stays open: only a kept-alive request's answer is
        passed on so). An answer that waited, so :meth:`answered_at` too."""
        if self._owed:
            self._owed -= 1
        framed = h1frame.relay_answer(answer.data, answer.head, answer.added, self._advertised)
        if not self._owed:  # answered_at, inline (the proxied get's road)
            deadlines = self._deadlines
            if now > deadlines.last_data:
                deadlines.last_data = now
        if self._out:
            self._out.append(framed)
            return self.data_to_send()
        return framed

    def send_stream_head(self, response: Response) -> None:
        """Frame the head of an answer whose body is a stream (chunked, then ``connection: close``): the
        oldest event stays owed until :meth:`end_stream`, so no deadline runs while the stream is held."""
        self._out.append(h1frame.frame_chunked_head(response.status, response.headers, False))

    def send_chunk(self, data: bytes) -> None:
        """Frame one piece of a streamed body."""
        if data:
            self._out.append(h1frame.frame_chunk(data))

    def end_stream(self) -> None:
        """Frame the streamed body's last chunk: the answer is whole (the caller closes after writing)."""
        self._out.append(h1frame.LAST_CHUNK)
        if self._owed:
            self._owed -= 1

    def answered_at(self, now: float) -> None:
        """An answer that waited (a door's write, a forwarded request) was written at ``now``: with nothing more
        owed, the idle clock runs from then (``Deadlines.quiet``)."""
        if not self._owed:
            self._deadlines.quiet(now)

    def next_deadline(self) -> float | None:
        """When :meth:`timer_fired` should next be called, on the clock ``now`` is read from; None while a
        request is owed its answer (or the connection has failed), when no deadline runs."""
        if self._failed:
            return None
        return self._deadlines.due(self._owed > 0, self.mid_request)

    def timer_fired(self, now: float) -> DeadlinePassed | None:
        """The deadline passed by ``now`` (the caller closes the connection), or None: ask
        :meth:`next_deadline` again."""
        passed = self._deadlines.passed(now, self._owed > 0, self.mid_request)
        if passed is not None:
            self._failed = True  # nothing more is read; the connection is over
        return passed

    def data_to_send(self) -> bytes:
        """The bytes framed so far, handed over once (no IO here: the caller writes them). One framed answer
        is handed over as it was framed: a 100 MiB body is not copied twice more on its way out."""
        out, self._out = self._out, []
        return out[0] if len(out) == 1 else b"".join(out)


class _Stop(Exception):
    """Raised inside a parser callback to stop parsing at a limit."""
