"""HTTP/2 with prior knowledge, sans-IO: brainy's own server connection (RFC 9113) over the ``h2frame`` speedup.

Bytes and time in (:meth:`H2Connection.receive_data`), request events out;
answers in (:meth:`H2Connection.send_response`), bytes out
(:meth:`H2Connection.data_to_send`). No socket, no task, no event loop: the
glue (``brainy.net.glue.h2``) runs the app and writes what this framed. The
frame layout and HPACK are ``brainy._speedups.h2frame`` (compiled, with its
pure twin); the rules of the protocol are here.

* Many streams at once, up to :data:`MAX_CONCURRENT_STREAMS` (one past that is
  refused with RST_STREAM REFUSED_STREAM); a stream's request is handed out
  once whole (:class:`RequestReceived`).
* A body over the limit is :class:`RequestRefused` (413), dropped as it comes.
* Flow control both ways. Ours: every stream may send :data:`STREAM_WINDOW`
  (our SETTINGS_INITIAL_WINDOW_SIZE) and the connection :data:`CONNECTION_WINDOW`
  (a WINDOW_UPDATE right after our SETTINGS), topped up once half is used, so
  a client never waits a round trip per 16 KiB; a peer sending past either
  window is a FLOW_CONTROL_ERROR. The peer's: an answer is queued whole (with
  its trailers, if it has any: gRPC's status) and sent as DATA as its windows
  allow; what does not fit waits for a WINDOW_UPDATE or a SETTINGS that grows
  the initial window (RFC 9113 6.9.2).
* A frame header announcing more than our SETTINGS_MAX_FRAME_SIZE ends the
  connection with FRAME_SIZE_ERROR as soon as its nine bytes land; any other
  connection error (RFC 9113 5.4.1) ends it with GOAWAY naming the error.
  Either way :attr:`H2Connection.ended` turns true: write the bytes, then close.
  A stream error (a malformed request, a window overrun on one stream) resets
  that stream alone.
* :meth:`H2Connection.close` is the polite end: GOAWAY at once, the streams in
  hand still answered, then the final GOAWAY and ``ended``.
* The idle deadline runs while no stream is open (``brainy.net.deadlines``), and our SETTINGS must be
  acknowledged within :data:`SETTINGS_ACK_SECONDS` (RFC 9113 6.5.3, else GOAWAY SETTINGS_TIMEOUT).
* A HEADERS on a stream the peer already used resets that stream (STREAM_CLOSED); one on an id it
  skipped ends the connection (PROTOCOL_ERROR), RFC 9113 5.1 and 5.1.1.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import cast

from brainy._speedups import h2frame
from brainy._speedups.errors import HpackError, RequestMalformed
from brainy.contract import refusals as R
from brainy.net.deadlines import IDLE_SECONDS, DeadlinePassed, Deadlines
from brainy.net.http import MAX_BODY, MAX_HEADER_BYTES, Header, Request, Response

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"  # RFC 9113 3.4: what a prior-knowledge client sends first
# A resource defence: each open stream holds its headers and body until answered.
MAX_CONCURRENT_STREAMS = 128
MAX_FRAME_SIZE = 16384  # ours (RFC 9113 6.5.2's default, not raised: no request needs more)
STREAM_WINDOW = 1 << 20  # what each stream may send us before we acknowledge any of it
CONNECTION_WINDOW = 16 << 20  # what all streams together may send us; bounds what one connection buffers
DEFAULT_WINDOW = 65535  # every window's start until SETTINGS or WINDOW_UPDATE says otherwise
MAX_WINDOW = (1 << 31) - 1
# RFC 9113 6.5.3: a peer that never acknowledges our SETTINGS may be held to defaults we do not keep
# (our windows, our stream limit); nghttp2 waits as long
SETTINGS_ACK_SECONDS = 10.0
SKIPPED_KEPT = 16  # runs of skipped stream ids remembered (clients skip none: each is a sign)

# Frame types and flags (RFC 9113 6)
DATA, HEADERS, PRIORITY, RST_STREAM, SETTINGS, PUSH_PROMISE, PING, GOAWAY, WINDOW_UPDATE, CONTINUATION = range(10)
END_STREAM = ACK = 0x1
END_HEADERS, PADDED, PRIORITY_FLAG = 0x4, 0x8, 0x20
_WHOLE_MASK = END_STREAM | END_HEADERS | PADDED | PRIORITY_FLAG
_WHOLE = END_STREAM | END_HEADERS  # a request in one HEADERS frame, nothing to strip from its block
# Error codes (RFC 9113 7)
NO_ERROR, PROTOCOL_ERROR, FLOW_CONTROL_ERROR, STREAM_CLOSED, FRAME_SIZE_ERROR = 0x0, 0x1, 0x3, 0x5, 0x6
REFUSED_STREAM, COMPRESSION_ERROR = 0x7, 0x9
SETTINGS_TIMEOUT = 0x4
# Settings (RFC 9113 6.5.2)
S_HEADER_TABLE_SIZE, S_ENABLE_PUSH, S_MAX_CONCURRENT_STREAMS, S_INITIAL_WINDOW_SIZE = 0x1, 0x2, 0x3, 0x4
S_MAX_FRAME_SIZE, S_MAX_HEADER_LIST_SIZE = 0x5, 0x6
# A DATA frame's nine-byte header alone (RFC 9113 4.1: length and type in one 32-bit word, flags, stream):
# a large answer's frames go out as header + a view of the body, the body never copied into frames
_FRAME_HEAD = struct.Struct(">IBI")
# the :status field of the answers a door gives most, made once rather than on every answer
_STATUS = {code: (b":status", str(code).encode()) for code in (200, 201, 204, 304, 400, 401, 403, 404, 409, 413, 429)}


@dataclass(slots=True)
class RequestReceived:
    """A stream's request arrived whole: answer it with :meth:`H2Connection.send_response`."""

    stream_id: int
    request: Request


@dataclass(slots=True)
class RequestRefused:
    """A stream's request broke a limit (its body is over ``max_body``): answer ``refusal`` on it."""

    stream_id: int
    refusal: R.Refusal


@dataclass(slots=True)
class StreamReset:
    """The peer reset a stream whose request was handed out: its answer is no longer wanted."""

    stream_id: int


H2Event = RequestReceived | RequestRefused | StreamReset


class Stream:
    """One stream's request as it arrives (HTTP/2 here, HTTP/3 in ``brainy.net.h3``): its header fields and
    its body, refused once the body is over the limit."""

    __slots__ = ("headers", "body", "size", "refused", "head", "handed_out")

    def __init__(self, headers: list[tuple[bytes, bytes]]) -> None:
        self.headers = headers
        self.body: list[bytes] = []
        self.size = 0
        self.refused: R.Refusal | None = None
        self.head = False  # a HEAD request: its answer states a length and sends no body
        self.handed_out = False  # its request event has been emitted

    def take(self, data: bytes, max_body: int) -> None:
        """Keep a piece of the body; past ``max_body``, drop it all as it comes and refuse the request."""
        if self.refused is not None:
            return
        self.size += len(data)
        if self.size > max_body:
            self.refused = R.PayloadTooLargeError(f"the body is over {max_body} bytes", limit=max_body)
            self.body = []
            return
        self.body.append(data)

    def event(self, stream_id: int) -> RequestReceived | RequestRefused:
        """The stream's request, whole, handed out once (its body ended)."""
        self.handed_out = True
        request = Request.from_fields(self.headers, b"".join(self.body))
        self.head = request.method == "HEAD"
        if self.refused is not None:
            return RequestRefused(stream_id, self.refused)
        return RequestReceived(stream_id, request)


class H2Stream(Stream):
    """An HTTP/2 stream's request: its head read once from its fields (``h2frame.request_head``)."""

    __slots__ = ("request_head",)

    def __init__(self, headers: list[tuple[bytes, bytes]], head: tuple[str, str, str, dict[str, str], int]) -> None:
        # Stream's fields set here, not by its __init__: one call less on every request
        self.headers = headers
        self.body: list[bytes] = []
        self.size = 0
        self.refused: R.Refusal | None = None
        self.head = head[0] == "HEAD"
        self.handed_out = False
        self.request_head = head

    def event(self, stream_id: int) -> RequestReceived | RequestRefused:
        self.handed_out = True
        method, path, query, headers, _ = self.request_head
        self.head = method == "HEAD"
        if self.refused is not None:
            return RequestRefused(stream_id, self.refused)
        return RequestReceived(stream_id, Request(method, path, query, headers, b"".join(self.body)))


class Answering:
    """A stream whose request came whole in one HEADERS frame, handed out, its answer not yet sent: all that
    is kept of it is whether it was a HEAD. Nothing more arrives on it (any DATA is STREAM_CLOSED), so the
    two instances below stand for every such stream and are never changed."""

    __slots__ = ("head", "handed_out")

    def __init__(self, head: bool) -> None:
        self.head = head
        self.handed_out = True


ANSWERING, ANSWERING_HEAD = Answering(False), Answering(True)


class ProtocolViolation(Exception):
    """A connection error (RFC 9113 5.4.1): GOAWAY with ``code``, then the end."""

    def __init__(self, code: int, reason: str) -> None:
        super().__init__(reason)
        self.code = code


class H2Connection:
    """One HTTP/2 connection, server side, from the preface on (``now``: when its first bytes came)."""

    def __init__(
        self,
        now: float = 0.0,
        *,
        idle_seconds: float = IDLE_SECONDS,
        max_body: int = MAX_BODY,
        max_header_bytes: int = MAX_HEADER_BYTES,
        max_concurrent_streams: int = MAX_CONCURRENT_STREAMS,
        advertise: list[Header] | None = None,
    ) -> None:
        self._max_body = max_body
        self._max_header_bytes = max_header_bytes
        self._max_streams = max_concurrent_streams
        self._advertise = advertise or []  # header fields on every answer (Alt-Svc when an h3 listener exists)
        self._decoder = h2frame.Decoder(4096, max_header_bytes)
        self._encoder = h2frame.Encoder(4096)
        self._streams: dict[int, H2Stream | Answering] = {}  # open streams, from their HEADERS until answered whole
        self._receiving: dict[int, int] = {}  # streams the peer still sends on: our window left on each
        # the peer's window on each open stream, once it differs from the peer's initial window (a
        # WINDOW_UPDATE, or DATA sent): a stream answered in one frame never gets an entry
        self._windows: dict[int, int] = {}
        self._sending: dict[int, memoryview] = {}  # answer bytes waiting for window, by stream, oldest first
        self._held: set[int] = set()  # streams whose answer is a stream still being written (send_stream_head)
        self._trailers: dict[int, list[tuple[bytes, bytes]]] = {}  # what ends each of those answers (gRPC)
        self._connection_window = DEFAULT_WINDOW  # the peer's connection window
        self._receive_window = CONNECTION_WINDOW  # ours, left before the peer must wait for an update
        self._peer_initial_window = DEFAULT_WINDOW
        self._peer_max_frame = 16384
        self._highest = 0  # the highest stream id the peer opened
        self._next_id = 1  # the id the peer's next stream has unless it skips some
        self._skipped: list[tuple[int, int]] = []  # runs of ids the peer skipped (first, last), the latest kept
        self._continuing: tuple[int, int, list[bytes]] | None = None  # HEADERS awaiting CONTINUATION
        self._settled = False  # the peer's first frame (its SETTINGS, RFC 9113 3.4) has arrived
        self._preface_at = 0  # bytes of the preface read so far
        self._buffer = b""  # the start of a frame not yet whole
        self._deadlines = Deadlines(now, idle_seconds)
        self._settings_due: float | None = now + SETTINGS_ACK_SECONDS  # until the peer acknowledges ours
        self._closing: int | None = None  # the last stream id a polite GOAWAY promised to answer
        self._opened = False  # a window grew while reading: queued answers may move on
        self._topping: set[int] = set()  # streams this read used half their window on: to grant again
        self.framed_bytes = 0  # answer bytes framed by _pump and not yet handed over (a writer may write early)
        self._out: list[bytes | memoryview] = [
            h2frame.frame(
                SETTINGS,
                0,
                0,
                b"".join(
                    setting.to_bytes(2, "big") + value.to_bytes(4, "big")
                    for setting, value in (
                        (S_MAX_CONCURRENT_STREAMS, max_concurrent_streams),
                        (S_INITIAL_WINDOW_SIZE, STREAM_WINDOW),
                        (S_MAX_HEADER_LIST_SIZE, max_header_bytes),
                    )
                ),
            ),
            h2frame.frame(WINDOW_UPDATE, 0, 0, (CONNECTION_WINDOW - DEFAULT_WINDOW).to_bytes(4, "big")),
        ]
        self.ended = False  # nothing more is read or framed: write data_to_send(), then close

    # -- bytes in -----------------------------------------------------------------------------------

    def receive_data(self, data: bytes, now: float) -> list[H2Event]:
        """Feed the bytes that arrived at ``now``; answer the events they caused, in order."""
        if self.ended:
            return []
        self._deadlines.heard(now, False)
        if self._preface_at < len(PREFACE):
            take = len(PREFACE) - self._preface_at
            if data[:take] != PREFACE[self._preface_at : self._preface_at + len(data[:take])]:
                self.ended = True  # not HTTP/2: no GOAWAY (RFC 9113 3.4 lets it be left out)
                return []
            self._preface_at += len(data[:take])
            data = data[take:]
        out: list[H2Event] = []
        self._opened = False
        buffer, at = data, 0
        try:
            if self._buffer:
                pending, need = self._buffer, self._pending_need(data)
                if need is None:  # the kept frame's head is cut, or it is not whole with these bytes either
                    buffer = pending + data
                else:  # the kept frame made whole alone (its bytes only copied), then this read from where it ends
                    self._buffer = b""
                    if self._frames(pending + data[:need], 0, out) is None:
                        return []
                    at = need
            stop = self._frames(buffer, at, out)
            if stop is None:
                return []
        except ProtocolViolation as error:
            self._fail(error.code)
            return []
        except HpackError:
            self._fail(COMPRESSION_ERROR)
            return []
        self._buffer = buffer[stop:] if stop < len(buffer) else b""
        if self._topping or self._receive_window < CONNECTION_WINDOW // 2:
            self._top_up()
        if self._opened and self._sending:
            self._pump()
        return out

    def _pending_need(self, data: bytes) -> int | None:
        """How many of ``data``'s bytes make the frame kept from the last read whole, or None when its head is
        cut or these bytes do not make it whole (the two are then read as one buffer)."""
        pending = self._buffer
        if len(pending) < 9:
            return None
        need = 9 + int.from_bytes(pending[:3], "big") - len(pending)
        return need if need <= len(data) else None

    def _frames(self, buffer: bytes, at: int, out: list[H2Event]) -> int | None:
        """Read the whole frames of ``buffer`` from ``at`` on; answers where the first frame not yet whole starts,
        or None once the peer's GOAWAY ended the connection (nothing it asked on it is answered)."""
        end = len(buffer)
        parse_header = h2frame.parse_header
        view: memoryview | None = None
        while True:
            head = parse_header(buffer, at)
            if head is None:
                return at
            length, kind, flags, stream_id = head
            if length > MAX_FRAME_SIZE:
                raise ProtocolViolation(FRAME_SIZE_ERROR, f"a frame of {length} bytes")
            if end - at - 9 < length:
                return at
            if kind == DATA and type(buffer) is bytes:
                # a body's piece kept as a view of the read (bytes: never changed) until the body is joined, the one
                # copy of it; a view stands where bytes would, as _data only measures and slices it
                if view is None:
                    view = memoryview(buffer)
                payload = cast(bytes, view[at + 9 : at + 9 + length])
            else:
                payload = buffer[at + 9 : at + 9 + length]
            at += 9 + length
            if kind == HEADERS and self._continuing is None and self._settled:
                shape = flags & _WHOLE_MASK
                if shape == _WHOLE:
                    self._whole_request(stream_id, payload, out)  # the common frame: a request in one HEADERS
                    continue
                if shape == END_HEADERS:  # a body follows: in this very read, for a unary gRPC call
                    after = self._unary_request(stream_id, payload, buffer, at, end, out)
                    if after is not None:
                        at = after
                        continue
            self._frame(kind, flags, stream_id, payload, out)
            if self.ended:  # the peer's GOAWAY: nothing it asked on this connection is answered
                return None

    def _fail(self, code: int) -> None:
        self._out.append(self._goaway(code))
        self.ended = True

    def _goaway(self, code: int, last: int | None = None) -> bytes:
        last = self._highest if last is None else last
        return h2frame.frame(GOAWAY, 0, 0, last.to_bytes(4, "big") + code.to_bytes(4, "big"))

    def _frame(self, kind: int, flags: int, stream_id: int, payload: bytes, out: list[H2Event]) -> None:
        if not self._settled:
            if kind != SETTINGS or flags & ACK:
                raise ProtocolViolation(PROTOCOL_ERROR, "the first frame is not SETTINGS")
            self._settled = True
        if self._continuing is not None:
            if kind != CONTINUATION or stream_id != self._continuing[0]:
                raise ProtocolViolation(PROTOCOL_ERROR, "a frame between HEADERS and its CONTINUATION")
            self._continuation(flags, payload, out)
        elif kind == HEADERS:
            self._headers(flags, stream_id, payload, out)
        elif kind == DATA:
            self._data(flags, stream_id, payload, out)
        elif kind == WINDOW_UPDATE:
            self._window_update(stream_id, payload)
        elif kind == SETTINGS:
            self._settings(flags, stream_id, payload)
        elif kind == PING:
            if len(payload) != 8:
                raise ProtocolViolation(FRAME_SIZE_ERROR, "a PING not of 8 bytes")
            if stream_id:
                raise ProtocolViolation(PROTOCOL_ERROR, "a PING on a stream")
            if not flags & ACK:
                self._out.append(h2frame.frame(PING, ACK, 0, payload))
        elif kind == RST_STREAM:
            if len(payload) != 4:
                raise ProtocolViolation(FRAME_SIZE_ERROR, "a RST_STREAM not of 4 bytes")
            if not stream_id or stream_id > self._highest:
                raise ProtocolViolation(PROTOCOL_ERROR, "a RST_STREAM on stream 0 or an idle stream")
            self._drop(stream_id, out)
        elif kind == PRIORITY:  # read and ignored: answers go out in the order they are ready
            if not stream_id:
                raise ProtocolViolation(PROTOCOL_ERROR, "a PRIORITY on stream 0")
            if len(payload) != 5:
                self._reset(stream_id, FRAME_SIZE_ERROR, out)
        elif kind == GOAWAY:
            if stream_id:
                raise ProtocolViolation(PROTOCOL_ERROR, "a GOAWAY on a stream")
            self.ended = True
        elif kind == PUSH_PROMISE:
            raise ProtocolViolation(PROTOCOL_ERROR, "a PUSH_PROMISE from a client")
        elif kind == CONTINUATION:
            raise ProtocolViolation(PROTOCOL_ERROR, "a CONTINUATION with no HEADERS before it")
        # any other type is an extension this server does not speak: ignored (RFC 9113 5.5)

    @staticmethod
    def _unpadded(flags: int, payload: bytes) -> bytes:
        if flags & PADDED:
            if not payload or payload[0] >= len(payload):
                raise ProtocolViolation(PROTOCOL_ERROR, "padding as long as the frame")
            return payload[1 : len(payload) - payload[0]]
        return payload

    def _headers(self, flags: int, stream_id: int, payload: bytes, out: list[H2Event]) -> None:
        if not stream_id:
            raise ProtocolViolation(PROTOCOL_ERROR, "HEADERS on stream 0")
        block = self._unpadded(flags, payload)
        if flags & PRIORITY_FLAG:
            if len(block) < 5:
                raise ProtocolViolation(FRAME_SIZE_ERROR, "HEADERS too short for its priority")
            block = block[5:]
        if flags & END_HEADERS:
            self._block(stream_id, flags & END_STREAM, self._decoder.decode(block), out)
        else:
            self._continuing = (stream_id, flags & END_STREAM, [block])

    def _whole_request(self, stream_id: int, block: bytes, out: list[H2Event]) -> None:
        """A HEADERS frame with END_HEADERS and END_STREAM, neither padded nor prioritised: on a new stream
        under every limit, a body-less request handed out at once; anything else takes :meth:`_block`'s
        path (the same rules, step by step)."""
        fields = self._decoder.decode(block)  # always: the dynamic table must follow every block
        if not self._opens_plainly(stream_id):
            self._block(stream_id, END_STREAM, fields, out)
            return
        if stream_id == self._next_id:  # in order, as every client opens them: _open_stream's short branch
            self._highest, self._next_id = stream_id, stream_id + 2
        else:
            self._open_stream(stream_id)
        try:
            head = h2frame.request_head(fields)
        except RequestMalformed:
            self._out.append(h2frame.frame(RST_STREAM, 0, stream_id, PROTOCOL_ERROR.to_bytes(4, "big")))
            return
        if head[4] > 0:  # RFC 9113 8.1.1: a stated length the (empty) body does not have
            self._out.append(h2frame.frame(RST_STREAM, 0, stream_id, PROTOCOL_ERROR.to_bytes(4, "big")))
            return
        self._hand_out(stream_id, head, b"", out)

    def _unary_request(
        self, stream_id: int, block: bytes, buffer: bytes, at: int, end: int, out: list[H2Event]
    ) -> int | None:
        """A HEADERS frame with END_HEADERS alone (neither padded nor prioritised) and, right behind it in the
        same read, its stream's one DATA frame with END_STREAM, unpadded: a unary gRPC call, a small POST. On
        a new stream under every limit, with a body within the windows, ``max_body`` and any stated length,
        the request is handed out at once, as the two frames' own paths would hand it out; answers where the
        frame after the DATA starts. None, with nothing read (not even the block), when that DATA frame is
        not there whole: the HEADERS takes its own path. A request that is not plain after all takes the
        step-by-step path from its decoded block, and its DATA then its own (answers ``at``)."""
        head = h2frame.parse_header(buffer, at)
        if head is None:
            return None
        length, kind, flags, data_stream = head
        # a DATA frame is at most MAX_FRAME_SIZE, far inside a new stream's window (STREAM_WINDOW)
        if (
            kind != DATA
            or flags != END_STREAM
            or data_stream != stream_id
            or length > MAX_FRAME_SIZE
            or end - at - 9 < length
            or length > self._receive_window
            or length > self._max_body
        ):
            return None
        fields = self._decoder.decode(block)  # always: the dynamic table must follow every block
        if not self._opens_plainly(stream_id):
            self._block(stream_id, 0, fields, out)
            return at
        try:
            request = h2frame.request_head(fields)
        except RequestMalformed:
            request = None
        if request is None or (request[4] >= 0 and request[4] != length):  # refused step by step (8.1.1)
            self._block(stream_id, 0, fields, out)
            return at
        self._open_stream(stream_id)
        self._receive_window -= length  # the connection's window counts every DATA byte (topped up after the read)
        self._hand_out(stream_id, request, buffer[at + 9 : at + 9 + length], out)
        return at + 9 + length

    def _opens_plainly(self, stream_id: int) -> bool:
        """Whether a request on ``stream_id`` opens a new stream under every limit (nothing to refuse)."""
        return (
            stream_id > self._highest
            and stream_id & 1 == 1
            and self._closing is None
            and len(self._streams) < self._max_streams
        )

    def _hand_out(
        self, stream_id: int, head: tuple[str, str, str, dict[str, str], int], body: bytes, out: list[H2Event]
    ) -> None:
        """A request whose stream the peer has ended already, handed out whole: nothing more arrives on it."""
        method = head[0]
        self._streams[stream_id] = ANSWERING_HEAD if method == "HEAD" else ANSWERING
        out.append(RequestReceived(stream_id, Request(method, head[1], head[2], head[3], body)))

    def _continuation(self, flags: int, payload: bytes, out: list[H2Event]) -> None:
        stream_id, end_stream, fragments = self._continuing  # type: ignore[misc]
        fragments.append(payload)
        if sum(map(len, fragments)) > self._max_header_bytes:
            # no block over the limit can decode to a list under it: refused before it is held whole
            raise ProtocolViolation(COMPRESSION_ERROR, "a header block over the header list limit")
        if flags & END_HEADERS:
            self._continuing = None
            self._block(stream_id, end_stream, self._decoder.decode(b"".join(fragments)), out)

    def _block(self, stream_id: int, end_stream: int, fields: list[tuple[bytes, bytes]], out: list[H2Event]) -> None:
        """A whole header block on ``stream_id``, decoded (always: the dynamic table must follow every
        block): a new stream's request, or an open one's trailers."""
        if stream_id in self._receiving:
            if not end_stream:
                raise ProtocolViolation(PROTOCOL_ERROR, "a second HEADERS without END_STREAM")
            self._ended(stream_id, out)  # trailers: the request is whole (their fields are not used)
            return
        if not stream_id & 1:
            raise ProtocolViolation(PROTOCOL_ERROR, "HEADERS on an even stream (the server's to open)")
        if stream_id <= self._highest:
            self._late_headers(stream_id, out)
            return
        self._open_stream(stream_id)
        if self._closing is not None and stream_id > self._closing:
            # past the polite GOAWAY's last stream: never processed, so the peer may retry it elsewhere
            self._out.append(h2frame.frame(RST_STREAM, 0, stream_id, REFUSED_STREAM.to_bytes(4, "big")))
            return
        if len(self._streams) >= self._max_streams:
            self._out.append(h2frame.frame(RST_STREAM, 0, stream_id, REFUSED_STREAM.to_bytes(4, "big")))
            return
        try:
            head = h2frame.request_head(fields)
        except RequestMalformed:
            self._out.append(h2frame.frame(RST_STREAM, 0, stream_id, PROTOCOL_ERROR.to_bytes(4, "big")))
            return
        self._streams[stream_id] = H2Stream(fields, head)
        if end_stream:
            self._receiving[stream_id] = 0
            self._ended(stream_id, out)
        else:
            self._receiving[stream_id] = STREAM_WINDOW

    def _open_stream(self, stream_id: int) -> None:
        """The peer opened ``stream_id``, above every stream before it; the ids it skipped are kept (the
        last :data:`SKIPPED_KEPT` runs of them) to tell a HEADERS reopening one from a late one."""
        if stream_id != self._next_id:
            self._skipped.append((self._next_id, stream_id - 2))
            if len(self._skipped) > SKIPPED_KEPT:
                del self._skipped[0]
        self._highest, self._next_id = stream_id, stream_id + 2

    def _late_headers(self, stream_id: int, out: list[H2Event]) -> None:
        """HEADERS on an odd id at or below the highest the peer opened (RFC 9113 5.1). On a stream it
        opened: half-closed (remote), its request whole and its answer not yet sent, or closed since (by
        END_STREAM both ways or a RST_STREAM either way: not remembered), a stream error STREAM_CLOSED,
        as 5.1 asks of the half-closed state and of a stream reset; the other streams go on (5.1 allows the
        connection error only after END_STREAM both ways, and a forgotten stream cannot be told apart).
        On an id it skipped, a connection error PROTOCOL_ERROR (5.1.1: a new stream's id is above every
        stream's before it)."""
        for low, high in self._skipped:
            if low <= stream_id <= high:
                raise ProtocolViolation(PROTOCOL_ERROR, "HEADERS opening a stream below one already opened")
        self._reset(stream_id, STREAM_CLOSED, out)

    def _data(self, flags: int, stream_id: int, payload: bytes, out: list[H2Event]) -> None:
        if not stream_id:
            raise ProtocolViolation(PROTOCOL_ERROR, "DATA on stream 0")
        length = len(payload)
        if length > self._receive_window:
            raise ProtocolViolation(FLOW_CONTROL_ERROR, "DATA past the connection window")
        self._receive_window -= length
        window = self._receiving.get(stream_id)
        if window is None:
            if stream_id > self._highest:
                raise ProtocolViolation(PROTOCOL_ERROR, "DATA on an idle stream")
            self._reset(stream_id, STREAM_CLOSED, out)
            return
        if length > window:
            self._reset(stream_id, FLOW_CONTROL_ERROR, out)
            return
        data = self._unpadded(flags, payload)
        stream = cast(H2Stream, self._streams[stream_id])  # receiving, so not Answering (which receives nothing)
        stream.take(data, self._max_body)
        self._receiving[stream_id] = window - length
        if flags & END_STREAM:
            self._ended(stream_id, out)
        elif window - length < STREAM_WINDOW // 2:
            self._topping.add(stream_id)

    def _top_up(self) -> None:
        """Grant again what this read consumed, once half a window is used: one WINDOW_UPDATE per read at
        most for the connection and for each stream, after the frames it answers (a peer is held to what
        it was told, never to a grant still unsent)."""
        if self._receive_window < CONNECTION_WINDOW // 2:
            self._out.append(
                h2frame.frame(WINDOW_UPDATE, 0, 0, (CONNECTION_WINDOW - self._receive_window).to_bytes(4, "big"))
            )
            self._receive_window = CONNECTION_WINDOW
        for stream_id in self._topping:
            window = self._receiving.get(stream_id)
            if window is not None:
                self._out.append(
                    h2frame.frame(WINDOW_UPDATE, 0, stream_id, (STREAM_WINDOW - window).to_bytes(4, "big"))
                )
                self._receiving[stream_id] = STREAM_WINDOW
        self._topping.clear()

    def _ended(self, stream_id: int, out: list[H2Event]) -> None:
        """The peer ended its side of ``stream_id``: its request is whole."""
        del self._receiving[stream_id]
        stream = cast(H2Stream, self._streams[stream_id])  # receiving, so not Answering (which receives nothing)
        expected = stream.request_head[4]
        if expected >= 0 and expected != stream.size and stream.refused is None:
            self._reset(stream_id, PROTOCOL_ERROR, out)  # RFC 9113 8.1.1: the body is not its stated length
            return
        out.append(stream.event(stream_id))

    def _reset(self, stream_id: int, code: int, out: list[H2Event]) -> None:
        """A stream error (RFC 9113 5.4.2): RST_STREAM, and the stream is gone."""
        self._out.append(h2frame.frame(RST_STREAM, 0, stream_id, code.to_bytes(4, "big")))
        self._drop(stream_id, out)

    def _drop(self, stream_id: int, out: list[H2Event]) -> None:
        stream = self._streams.get(stream_id)
        self._receiving.pop(stream_id, None)
        if stream is not None:
            self._answered(stream_id)
            if stream.handed_out:
                out.append(StreamReset(stream_id))

    def _window_update(self, stream_id: int, payload: bytes) -> None:
        if len(payload) != 4:
            raise ProtocolViolation(FRAME_SIZE_ERROR, "a WINDOW_UPDATE not of 4 bytes")
        increment = int.from_bytes(payload, "big") & MAX_WINDOW
        if not stream_id:
            if not increment:
                raise ProtocolViolation(PROTOCOL_ERROR, "a WINDOW_UPDATE of 0")
            self._connection_window += increment
            if self._connection_window > MAX_WINDOW:
                raise ProtocolViolation(FLOW_CONTROL_ERROR, "the connection window over 2^31-1")
        elif stream_id in self._streams:
            if not increment:
                self._reset(stream_id, PROTOCOL_ERROR, [])
                return
            self._windows[stream_id] = self._windows.get(stream_id, self._peer_initial_window) + increment
            if self._windows[stream_id] > MAX_WINDOW:
                self._reset(stream_id, FLOW_CONTROL_ERROR, [])
                return
        elif stream_id > self._highest:
            raise ProtocolViolation(PROTOCOL_ERROR, "a WINDOW_UPDATE on an idle stream")
        self._opened = True

    def _settings(self, flags: int, stream_id: int, payload: bytes) -> None:
        if stream_id:
            raise ProtocolViolation(PROTOCOL_ERROR, "SETTINGS on a stream")
        if flags & ACK:
            if payload:
                raise ProtocolViolation(FRAME_SIZE_ERROR, "a SETTINGS ACK with a payload")
            self._settings_due = None  # we send one SETTINGS only: this acknowledges it
            return
        if len(payload) % 6:
            raise ProtocolViolation(FRAME_SIZE_ERROR, "SETTINGS not a whole number of settings")
        for at in range(0, len(payload), 6):
            setting = int.from_bytes(payload[at : at + 2], "big")
            value = int.from_bytes(payload[at + 2 : at + 6], "big")
            if setting == S_HEADER_TABLE_SIZE:
                self._encoder.set_max_table_size(value)
            elif setting == S_ENABLE_PUSH and value > 1:
                raise ProtocolViolation(PROTOCOL_ERROR, "SETTINGS_ENABLE_PUSH neither 0 nor 1")
            elif setting == S_INITIAL_WINDOW_SIZE:
                if value > MAX_WINDOW:
                    raise ProtocolViolation(FLOW_CONTROL_ERROR, "SETTINGS_INITIAL_WINDOW_SIZE over 2^31-1")
                delta = value - self._peer_initial_window
                self._peer_initial_window = value
                # RFC 9113 6.9.2: every open stream's window moves by the change (those without an entry
                # follow _peer_initial_window itself)
                for open_id in self._windows:
                    self._windows[open_id] += delta
                    if self._windows[open_id] > MAX_WINDOW:
                        raise ProtocolViolation(FLOW_CONTROL_ERROR, "a stream window over 2^31-1")
                self._opened = True
            elif setting == S_MAX_FRAME_SIZE:
                if not 16384 <= value <= (1 << 24) - 1:
                    raise ProtocolViolation(PROTOCOL_ERROR, "SETTINGS_MAX_FRAME_SIZE out of range")
                self._peer_max_frame = value
        self._out.append(h2frame.frame(SETTINGS, ACK, 0, b""))

    # -- answers out --------------------------------------------------------------------------------

    def send_response(self, stream_id: int, response: Response) -> None:
        """Queue the answer on ``stream_id``: its HEADERS now, its body as DATA as the windows allow. A
        stream the peer reset meanwhile takes nothing."""
        stream = self._streams.get(stream_id)
        if stream is None or self.ended:
            return
        status = _STATUS.get(response.status) or (b":status", str(response.status).encode())
        headers = [status, *response.headers, *self._advertise]
        trailers = response.trailers
        if trailers is None:
            headers.append((b"content-length", str(len(response.body)).encode()))
        body = b"" if stream.head else response.body
        encoder, frame_size = self._encoder, self._peer_max_frame
        self._out.append(encoder.headers(stream_id, headers, not body and not trailers, frame_size))
        if not body:
            if trailers:
                self._out.append(encoder.headers(stream_id, trailers, True, frame_size))
            self._answered(stream_id)
            return
        size = len(body)
        window = self._windows.get(stream_id, self._peer_initial_window)
        if size <= frame_size and size <= self._connection_window and size <= window:
            # the common answer: one DATA frame within every window, ending the stream or followed by the
            # trailers that do (gRPC's)
            self._connection_window -= size
            if trailers:
                self._out.append(h2frame.frame(DATA, 0, stream_id, body))
                self._out.append(encoder.headers(stream_id, trailers, True, frame_size))
            else:
                self._out.append(h2frame.frame(DATA, END_STREAM, stream_id, body))
            self._answered(stream_id)
            return
        self._sending[stream_id] = memoryview(body)
        if trailers:
            self._trailers[stream_id] = trailers
        self._pump()

    def send_stream_head(self, stream_id: int, response: Response) -> None:
        """Queue the HEADERS of an answer whose body is a stream (no length): its DATA follows by
        :meth:`send_stream_data` until :meth:`end_stream`."""
        if stream_id not in self._streams or self.ended:
            return
        status = _STATUS.get(response.status) or (b":status", str(response.status).encode())
        self._out.append(self._encoder.headers(stream_id, [status, *response.headers], False, self._peer_max_frame))
        self._held.add(stream_id)

    def send_stream_data(self, stream_id: int, data: bytes) -> bool:
        """Queue more of a streamed body, sent as the windows allow; False once the stream is gone."""
        if stream_id not in self._held or self.ended:
            return False
        if data:
            queued = self._sending.get(stream_id)
            self._sending[stream_id] = memoryview(queued.tobytes() + data if queued else data)
            self._pump()
        return True

    def end_stream(self, stream_id: int) -> None:
        """The streamed body is whole: END_STREAM after what is queued."""
        if stream_id not in self._held:
            return
        self._held.discard(stream_id)
        if stream_id in self._sending:
            self._pump()
            return
        if not self.ended:
            self._out.append(h2frame.frame(DATA, END_STREAM, stream_id, b""))
        self._answered(stream_id)

    def stream_backlog(self, stream_id: int) -> int:
        """Bytes of a streamed body queued for want of window (back-pressure reads it)."""
        queued = self._sending.get(stream_id)
        return len(queued) if queued is not None else 0

    def _pump(self) -> None:
        """Send what the windows allow of every queued answer, oldest first, a frame at a time: each frame
        its header and a view of the body (the body is copied once, by the socket, not into frames)."""
        head, out = _FRAME_HEAD.pack, self._out
        for stream_id, view in list(self._sending.items()):
            window = self._windows.get(stream_id, self._peer_initial_window)
            while view:
                size = min(len(view), window, self._connection_window, self._peer_max_frame)
                if size <= 0:
                    break
                chunk, view = view[:size], view[size:]
                window -= size
                self._connection_window -= size
                trailers = None if view else self._trailers.pop(stream_id, None)
                end = not view and trailers is None and stream_id not in self._held
                out.append(head(size << 8 | DATA, END_STREAM if end else 0, stream_id))
                out.append(chunk)
                self.framed_bytes += size
                if trailers is not None:
                    out.append(self._encoder.headers(stream_id, trailers, True, self._peer_max_frame))
            self._windows[stream_id] = window
            if view:
                self._sending[stream_id] = view
            elif stream_id in self._held:
                self._sending.pop(stream_id, None)  # all written; the stream goes on
            else:
                self._answered(stream_id)
            if self._connection_window <= 0:
                break

    def _answered(self, stream_id: int) -> None:
        # each table tested before it is searched: on most answers all but _streams are empty
        if self._held:
            self._held.discard(stream_id)
        if self._sending:
            self._sending.pop(stream_id, None)
        if self._trailers:
            self._trailers.pop(stream_id, None)
        if self._windows:
            self._windows.pop(stream_id, None)
        self._streams.pop(stream_id, None)
        if self._closing is not None:
            self._end_if_done()

    def _end_if_done(self) -> None:
        if self._closing is not None and not self._streams and not self.ended:
            self._out.append(self._goaway(NO_ERROR, self._closing))
            self.ended = True

    def data_to_send(self) -> bytes:
        """The bytes framed so far, handed over once (no IO here: the caller writes them)."""
        out = self._out
        if not out:
            return b""
        self._out = []
        self.framed_bytes = 0
        # a lone part is a frame: a body's view is never without its frame's header before it
        return cast(bytes, out[0]) if len(out) == 1 else b"".join(out)

    def buffers_to_send(self) -> list[bytes | memoryview]:
        """What :meth:`data_to_send` would join, handed over once as its parts (views of a large answer's
        body among them), for a writer that takes many buffers at once (``transport.writelines``)."""
        out = self._out
        self._out = []
        self.framed_bytes = 0
        return out

    @property
    def sending(self) -> bool:
        """True while an answer waits for the peer to open a flow-control window."""
        return bool(self._sending)

    # -- the end ------------------------------------------------------------------------------------

    def close(self) -> None:
        """A polite end (RFC 9113 6.8): GOAWAY naming the last stream opened, those streams still answered,
        then the final GOAWAY and ``ended``."""
        if self.ended or self._closing is not None:
            return
        self._closing = self._highest
        if not self._streams:
            self._end_if_done()
            return
        self._out.append(self._goaway(NO_ERROR, self._closing))

    # -- the deadline -------------------------------------------------------------------------------

    def answered_at(self, now: float) -> None:
        """An answer that waited was framed at ``now``: with no stream left open, the idle clock runs from then
        (``Deadlines.quiet``), as h1's does."""
        if not self._streams:
            self._deadlines.quiet(now)

    def next_deadline(self) -> float | None:
        """When :meth:`timer_fired` should next be called: the idle deadline (none while a stream is open)
        or, until the peer acknowledges our SETTINGS, that acknowledgement's, whichever comes first."""
        if self.ended:
            return None
        due = self._deadlines.due(bool(self._streams), False)
        settings = self._settings_due
        if settings is not None and (due is None or settings < due):
            return settings
        return due

    def timer_fired(self, now: float) -> DeadlinePassed | None:
        """A deadline passed by ``now``, or None. ``"settings"``: our SETTINGS went unacknowledged for
        :data:`SETTINGS_ACK_SECONDS`, a connection error SETTINGS_TIMEOUT (RFC 9113 6.5.3); ``"idle"``:
        GOAWAY NO_ERROR (6.8). Either way :attr:`ended`: write the GOAWAY, then close."""
        if self.ended:
            return None
        if self._settings_due is not None and now >= self._settings_due:
            self._fail(SETTINGS_TIMEOUT)
            return DeadlinePassed("settings", SETTINGS_ACK_SECONDS)
        passed = self._deadlines.passed(now, bool(self._streams), False)
        if passed is not None:
            self._out.append(self._goaway(NO_ERROR))
            self.ended = True
        return passed
