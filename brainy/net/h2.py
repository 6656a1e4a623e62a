"""HTTP/2 with prior knowledge, sans-IO: a server connection over the h2 library's own sans-IO state machine.

Bytes and time in (:meth:`H2Connection.receive_data`), request events out;
answers in (:meth:`H2Connection.send_response`), bytes out
(:meth:`H2Connection.data_to_send`). No socket, no task, no event loop: the
glue (``brainy.net.glue.h2``) runs the app and writes what this framed.

* Many streams at once, up to :data:`MAX_CONCURRENT_STREAMS`; a stream's
  request is handed out once whole (:class:`RequestReceived`), its body
  acknowledged as it is consumed.
* A body over the limit is :class:`RequestRefused` (413), dropped as it comes.
* An answer is queued whole (with its trailers, if it has any: gRPC's status)
  and sent as DATA as the peer's flow-control
  windows allow: what does not fit waits for a WINDOW_UPDATE or a SETTINGS
  that grows the initial window (RFC 9113 6.9.2), both read here.
* A frame header announcing more than our SETTINGS_MAX_FRAME_SIZE ends the
  connection with FRAME_SIZE_ERROR as soon as its nine bytes land; any other
  protocol violation ends it with the library's GOAWAY. Either way
  :attr:`H2Connection.ended` turns true: write the bytes, then close.
* :meth:`H2Connection.close` is the polite end: GOAWAY at once, the streams in
  hand still answered, then the final GOAWAY and ``ended``.
* The idle deadline runs while no stream is open (``brainy.net.deadlines``).
"""

from __future__ import annotations

from dataclasses import dataclass

import h2.config
import h2.connection
import h2.errors
import h2.events
import h2.exceptions
import h2.settings
from hyperframe.frame import GoAwayFrame

from brainy.contract import refusals as R
from brainy.net.deadlines import IDLE_SECONDS, DeadlinePassed, Deadlines
from brainy.net.http import MAX_BODY, MAX_HEADER_BYTES, Header, Request, Response

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"  # RFC 9113 3.4: what a prior-knowledge client sends first
# A resource defence: each open stream holds its headers and body until answered.
MAX_CONCURRENT_STREAMS = 128


@dataclass(frozen=True)
class RequestReceived:
    """A stream's request arrived whole: answer it with :meth:`H2Connection.send_response`."""

    stream_id: int
    request: Request


@dataclass(frozen=True)
class RequestRefused:
    """A stream's request broke a limit (its body is over ``max_body``): answer ``refusal`` on it."""

    stream_id: int
    refusal: R.Refusal


@dataclass(frozen=True)
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
        self.head = False         # a HEAD request: its answer states a length and sends no body
        self.handed_out = False   # its request event has been emitted

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

    def event(self, stream_id: int) -> "RequestReceived | RequestRefused":
        """The stream's request, whole, handed out once (its body ended)."""
        self.handed_out = True
        request = Request.from_fields(self.headers, b"".join(self.body))
        self.head = request.method == "HEAD"
        if self.refused is not None:
            return RequestRefused(stream_id, self.refused)
        return RequestReceived(stream_id, request)


class H2Connection:
    """One HTTP/2 connection, server side, from the preface on (``now``: when its first bytes came)."""

    def __init__(self, now: float = 0.0, *, idle_seconds: float = IDLE_SECONDS, max_body: int = MAX_BODY,
                 max_header_bytes: int = MAX_HEADER_BYTES,
                 max_concurrent_streams: int = MAX_CONCURRENT_STREAMS, advertise: list[Header] | None = None) -> None:
        config = h2.config.H2Configuration(client_side=False, header_encoding=None, validate_inbound_headers=True)
        self._conn = h2.connection.H2Connection(config=config)
        self._conn.local_settings = h2.settings.Settings(client=False, initial_values={
            h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS: max_concurrent_streams,
            h2.settings.SettingCodes.MAX_HEADER_LIST_SIZE: max_header_bytes,
        })
        self._conn.initiate_connection()
        self._max_body = max_body
        self._advertise = advertise or []  # header fields on every answer (Alt-Svc when an h3 listener exists)
        self._streams: dict[int, Stream] = {}        # open streams, from their HEADERS until answered whole
        self._sending: dict[int, memoryview] = {}     # answer bytes waiting for window, by stream, oldest first
        self._held: set[int] = set()  # streams whose answer is a stream still being written (send_stream_head)
        self._trailers: dict[int, list[tuple[bytes, bytes]]] = {}  # what ends each of those answers (gRPC)
        self._early = bytearray()  # our own frames, ahead of whatever the library queues after them
        self._deadlines = Deadlines(now, idle_seconds)
        self._closing: int | None = None  # the last stream id a polite GOAWAY promised to answer
        self._skip = len(PREFACE)  # bytes before the next frame header starts (the preface comes first)
        self._frame_head = b""     # the first bytes of a frame header split across reads
        self.ended = False  # nothing more is read or framed: write data_to_send(), then close

    # -- bytes in -----------------------------------------------------------------------------------

    def receive_data(self, data: bytes, now: float) -> list[H2Event]:
        """Feed the bytes that arrived at ``now``; answer the events they caused, in order."""
        if self.ended:
            return []
        self._deadlines.heard(now, False)
        if self._oversized_frame(data):
            self._conn.close_connection(error_code=h2.errors.ErrorCodes.FRAME_SIZE_ERROR)
            self.ended = True
            return []
        try:
            events = self._conn.receive_data(data)
        except h2.exceptions.ProtocolError:
            self.ended = True  # the library queued a GOAWAY naming the violation
            return []
        out: list[H2Event] = []
        window_opened = False
        for event in events:
            if isinstance(event, h2.events.RequestReceived):
                self._open(event, out)
            elif isinstance(event, h2.events.DataReceived):
                self._data(event)
            elif isinstance(event, h2.events.StreamEnded):
                self._complete(event.stream_id, out)
            elif isinstance(event, h2.events.StreamReset):
                stream = self._streams.pop(event.stream_id, None)
                if stream is not None:
                    self._sending.pop(event.stream_id, None)
                    self._held.discard(event.stream_id)
                    self._trailers.pop(event.stream_id, None)
                    if stream.handed_out:
                        out.append(StreamReset(event.stream_id))
                    self._end_if_done()
            elif isinstance(event, h2.events.WindowUpdated):
                window_opened = True
            elif isinstance(event, h2.events.RemoteSettingsChanged):
                # a new initial window resizes every open stream's window (RFC 9113 6.9.2)
                window_opened |= h2.settings.SettingCodes.INITIAL_WINDOW_SIZE in event.changed_settings
            elif isinstance(event, h2.events.ConnectionTerminated):
                self.ended = True  # the peer's GOAWAY: nothing it asked on this connection is answered
                return []
        if window_opened and self._sending:
            self._pump()
        return out

    def _oversized_frame(self, data: bytes) -> bool:
        """True when a frame header in ``data`` announces a length over our SETTINGS_MAX_FRAME_SIZE.

        The h2 library checks a frame's length only once the whole announced frame has arrived, so a
        peer announcing 16 MiB would be buffered, unanswered, until 16 MiB came; each header is read
        here as it lands instead (RFC 9113 4.2: FRAME_SIZE_ERROR)."""
        at = 0
        while at < len(data):
            if self._skip:
                step = min(self._skip, len(data) - at)
                self._skip -= step
                at += step
                continue
            take = 9 - len(self._frame_head)
            self._frame_head += data[at:at + take]
            at += take
            if len(self._frame_head) < 9:
                break
            self._skip = int.from_bytes(self._frame_head[:3], "big")
            self._frame_head = b""
            if self._skip > self._conn.max_inbound_frame_size:
                return True
        return False

    def _open(self, event: h2.events.RequestReceived, out: list[H2Event]) -> None:
        if self._closing is not None and event.stream_id > self._closing:
            # past the polite GOAWAY's last stream: never processed, so the peer may retry it elsewhere
            self._conn.reset_stream(event.stream_id, h2.errors.ErrorCodes.REFUSED_STREAM)
            return
        self._streams[event.stream_id] = Stream(event.headers)
        if event.stream_ended:
            self._complete(event.stream_id, out)

    def _data(self, event: h2.events.DataReceived) -> None:
        stream = self._streams.get(event.stream_id)
        self._conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
        if stream is not None:
            stream.take(event.data, self._max_body)

    def _complete(self, stream_id: int, out: list[H2Event]) -> None:
        stream = self._streams.get(stream_id)
        if stream is not None and not stream.handed_out:
            out.append(stream.event(stream_id))

    # -- answers out --------------------------------------------------------------------------------

    def send_response(self, stream_id: int, response: Response) -> None:
        """Queue the answer on ``stream_id``: its HEADERS now, its body as DATA as the windows allow. A
        stream the peer reset meanwhile takes nothing."""
        stream = self._streams.get(stream_id)
        if stream is None or self.ended:
            return
        headers = [(b":status", str(response.status).encode()), *response.headers, *self._advertise]
        trailers = response.trailers
        if trailers is None:
            headers.append((b"content-length", str(len(response.body)).encode()))
        body = b"" if stream.head else response.body
        try:
            self._conn.send_headers(stream_id, headers, end_stream=not body and not trailers)
            if trailers and not body:
                self._conn.send_headers(stream_id, trailers, end_stream=True)
        except (h2.exceptions.StreamClosedError, h2.exceptions.ProtocolError):
            body = b""  # the stream closed under us: nothing more to send on it
        if body:
            self._sending[stream_id] = memoryview(body)
            if trailers:
                self._trailers[stream_id] = trailers
            self._pump()
        else:
            self._answered(stream_id)

    def send_stream_head(self, stream_id: int, response: Response) -> None:
        """Queue the HEADERS of an answer whose body is a stream (no length): its DATA follows by
        :meth:`send_stream_data` until :meth:`end_stream`."""
        if stream_id not in self._streams or self.ended:
            return
        headers = [(b":status", str(response.status).encode()), *response.headers]
        try:
            self._conn.send_headers(stream_id, headers, end_stream=False)
        except (h2.exceptions.StreamClosedError, h2.exceptions.ProtocolError):
            self._answered(stream_id)
            return
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
        try:
            self._conn.end_stream(stream_id)
        except (h2.exceptions.StreamClosedError, h2.exceptions.ProtocolError):
            pass
        self._answered(stream_id)

    def stream_backlog(self, stream_id: int) -> int:
        """Bytes of a streamed body queued for want of window (back-pressure reads it)."""
        queued = self._sending.get(stream_id)
        return len(queued) if queued is not None else 0

    def _pump(self) -> None:
        """Send what the windows allow of every queued answer, oldest first, a frame at a time."""
        for stream_id, view in list(self._sending.items()):
            try:
                while view:
                    window = min(self._conn.local_flow_control_window(stream_id), self._conn.max_outbound_frame_size)
                    if window <= 0:
                        break
                    chunk, view = view[:window], view[window:]
                    trailers = None if view else self._trailers.pop(stream_id, None)
                    self._conn.send_data(stream_id, chunk.tobytes(),
                                         end_stream=not view and trailers is None and stream_id not in self._held)
                    if trailers is not None:
                        self._conn.send_headers(stream_id, trailers, end_stream=True)
            except (h2.exceptions.StreamClosedError, h2.exceptions.ProtocolError):
                view = memoryview(b"")  # the stream closed under us
                self._held.discard(stream_id)
            if view:
                self._sending[stream_id] = view
            elif stream_id in self._held:
                self._sending.pop(stream_id, None)  # all written; the stream goes on
            else:
                self._answered(stream_id)

    def _answered(self, stream_id: int) -> None:
        self._held.discard(stream_id)
        self._sending.pop(stream_id, None)
        self._trailers.pop(stream_id, None)
        self._streams.pop(stream_id, None)
        self._end_if_done()

    def _end_if_done(self) -> None:
        if self._closing is not None and not self._streams and not self.ended:
            self._conn.close_connection(last_stream_id=self._closing)
            self.ended = True

    def data_to_send(self) -> bytes:
        """The bytes framed so far, handed over once (no IO here: the caller writes them)."""
        if self._early:
            out = bytes(self._early) + self._conn.data_to_send()
            self._early = bytearray()
            return out
        return self._conn.data_to_send()

    @property
    def sending(self) -> bool:
        """True while an answer waits for the peer to open a flow-control window."""
        return bool(self._sending)

    # -- the end ------------------------------------------------------------------------------------

    def close(self) -> None:
        """A polite end (RFC 9113 6.8): GOAWAY naming the last stream opened, those streams still answered,
        then ``ended``. The library refuses to send anything after its own GOAWAY, so the first one is
        framed here and the library's comes last, once the streams are answered."""
        if self.ended or self._closing is not None:
            return
        self._closing = self._conn.highest_inbound_stream_id
        if not self._streams:
            self._end_if_done()
            return
        self._early += self._conn.data_to_send()  # what the library framed before stays before
        self._early += GoAwayFrame(0, last_stream_id=self._closing, error_code=0).serialize()

    # -- the deadline -------------------------------------------------------------------------------

    def next_deadline(self) -> float | None:
        """When :meth:`timer_fired` should next be called; None while a stream is open."""
        if self.ended:
            return None
        return self._deadlines.due(bool(self._streams), False)

    def timer_fired(self, now: float) -> DeadlinePassed | None:
        """The idle deadline passed by ``now`` (the caller closes the connection), or None."""
        passed = self._deadlines.passed(now, bool(self._streams), False)
        if passed is not None:
            self.ended = True
        return passed
