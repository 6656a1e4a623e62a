"""HTTP/2 for the client, sans-IO (STYLE 1): door calls as the streams of one connection, many at once, over the h2
library's state machine. Requests in (:meth:`H2Session.send`), bytes in (:meth:`H2Session.receive_data`), events
out, bytes to write out (:meth:`H2Session.data_to_send`); no socket, no clock, no event loop. ``sync.py`` and
``aio.py`` move the bytes; ``wire.py`` says what a call's request and answer mean, on either protocol.

* The connection opens with the prior-knowledge preface and our SETTINGS (RFC 9113 3.3, 3.4). The server's first
  bytes must be its SETTINGS frame; anything else (an HTTP/1.1 server answering the preface as a bad request) is
  :class:`NotHttp2Error` before any stream is opened, so the caller can speak HTTP/1.1 instead, having sent
  nothing a server could act on.
* Streams up to the server's SETTINGS_MAX_CONCURRENT_STREAMS (brainy: 128); calls past it wait their turn, in
  order, for a stream to end, rather than being refused by the server.
* Flow control both ways. A request body goes as DATA as the server's windows allow, the rest when a
  WINDOW_UPDATE (or a SETTINGS growing the initial window) comes (RFC 9113 6.9). What we receive is
  acknowledged as it is taken; our windows (:data:`STREAM_WINDOW`, :data:`CONNECTION_WINDOW`) are wide enough
  that a page of an export never waits a round trip for one.
* A GOAWAY ends the taking of new streams: the streams above its last stream id were never processed
  (RFC 9113 6.8) and fail :class:`~brainy.client.wire.Unprocessed`, which a caller may send again whatever they
  were; the streams below it are still answered (GOAWAY frames are taken out before h2 sees them: it would
  refuse every frame after one). A connection error fails every stream still open.
* A held stream (the change feed) hands its body out as it comes (:class:`BodyReceived`) instead of whole; one
  answered other than 200 is a refusal, kept whole like any answer.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass

import h2.config
import h2.connection
import h2.errors
import h2.events
import h2.exceptions
import h2.settings
import hpack

from brainy._speedups import h2frame
from brainy._speedups.errors import HeaderListTooLarge, HpackError
from brainy.client import wire

#: what each stream may send us before we acknowledge any of it: a whole export page in flight (brainy's pages
#: are a few MB at most), so a large answer streams at the wire's pace, not a window per round trip
STREAM_WINDOW = 8 << 20
#: what all streams together may send us: bounds what one connection can make this process buffer
CONNECTION_WINDOW = 32 << 20
#: the largest DATA frame we take: fewer, larger frames cost fewer trips through the state machine (RFC 9113
#: 4.2 lets a peer send up to our SETTINGS_MAX_FRAME_SIZE; brainy answers in frames this large when allowed)
MAX_FRAME_SIZE = 1 << 20
#: the header block we accept; an answer's headers are a handful of short fields
MAX_HEADER_LIST_SIZE = 1 << 16
_DEFAULT_WINDOW = 65535  # the connection window every HTTP/2 connection starts with (RFC 9113 6.9.2)
_SETTINGS, _GOAWAY = 0x4, 0x7  # frame types (RFC 9113 6.5, 6.8)


def _code_name(code: int) -> str:
    """An HTTP/2 error code by its name (RFC 9113 7), or in hex when it has none."""
    try:
        return h2.errors.ErrorCodes(code).name
    except ValueError:
        return hex(code)


class _Encoder:
    """HPACK for the header blocks we send, by brainy's compiled codec (``brainy._speedups.h2frame``, the server's),
    in the place of the hpack package's: the h2 state machine asks of an encoder what this gives (``encode``, and
    ``header_table_size`` when the server's SETTINGS sets it), and hpack's pure Python was a fifth of what a call
    cost this client (about 20 of 105 us, encoding the request and decoding the answer)."""

    def __init__(self) -> None:
        self._codec = h2frame.Encoder()
        self._size = 4096

    def encode(self, headers: Iterable[tuple[bytes, bytes]], huffman: bool = True) -> bytes:
        return self._codec.encode(headers)

    @property
    def header_table_size(self) -> int:
        return self._size

    @header_table_size.setter
    def header_table_size(self, size: int) -> None:
        self._size = size
        self._codec.set_max_table_size(size)


class _Decoder:
    """HPACK for the header blocks we receive, by ``h2frame`` (see :class:`_Encoder`); its refusals become hpack's,
    which h2 turns into a connection error (COMPRESSION_ERROR), as with its own decoder."""

    def __init__(self, max_header_list_size: int) -> None:
        self._codec = h2frame.Decoder(max_header_list_size=max_header_list_size)

    def decode(self, data: bytes, raw: bool = False) -> list[tuple[bytes, bytes]]:
        try:
            return self._codec.decode(data)
        except HeaderListTooLarge as exc:
            raise hpack.OversizedHeaderListError(str(exc)) from exc
        except HpackError as exc:
            raise hpack.HPACKDecodingError(str(exc)) from exc

    @property
    def max_header_list_size(self) -> int:
        return self._codec.max_header_list_size

    @max_header_list_size.setter
    def max_header_list_size(self, size: int) -> None:
        self._codec.max_header_list_size = size

    @property
    def max_allowed_table_size(self) -> int:
        return self._codec.max_table_size

    @max_allowed_table_size.setter
    def max_allowed_table_size(self, size: int) -> None:
        self._codec.max_table_size = size


class NotHttp2Error(wire.NotSpoken):
    """The server does not speak HTTP/2 here: its first bytes are not a SETTINGS frame (``first``: an HTTP/1.1
    server's ``HTTP/1.1 400 ...``), or TLS's ALPN chose another protocol."""

    def __init__(self, first: bytes, why: str | None = None) -> None:
        self.first = first
        shown = first[:40].decode("latin-1", "replace")
        super().__init__(f"the server does not speak HTTP/2 here: {why or f'its first bytes were {shown!r}'}")


class ProtocolChoice:
    """Which protocol a client speaks to its server, by its ``http2`` setting (docs/client.md, "Connect"):

    * ``False``: HTTP/1.1 (over TLS, ALPN offers ``http/1.1`` alone);
    * ``True``: HTTP/2 — with prior knowledge in cleartext, by ALPN over TLS — and a server that does not speak
      it is a :class:`NotHttp2Error` (the call's TransportError);
    * ``None``: over TLS, what ALPN chose of ``h2`` and ``http/1.1``; in cleartext, HTTP/2 with prior knowledge
      when the first connection's preface is answered by a SETTINGS frame (:attr:`probing` until then), else
      HTTP/1.1 for the client's life — an HTTP/1.1 server or proxy answers the preface as a bad request, or
      closes, having acted on nothing.
    """

    def __init__(self, http2: bool | None) -> None:
        self.http2 = http2
        self.spoken: str | None = None if http2 is None else ("h2" if http2 else "h1")  # "h1", "h2", or unknown

    @property
    def alpn(self) -> list[str]:
        """What a TLS connection offers (RFC 7301), preferred first."""
        return {None: ["h2", "http/1.1"], True: ["h2"], False: ["http/1.1"]}[self.http2]

    @property
    def probing(self) -> bool:
        """Nothing is known yet: the next cleartext connection opens with the preface and learns."""
        return self.spoken is None

    def chosen_by_alpn(self, selected: str | None) -> str:
        """The protocol of a TLS connection whose ALPN chose ``selected`` (None: the server chose none)."""
        spoken = "h2" if selected == "h2" else "h1"
        if self.http2 and spoken != "h2":
            raise NotHttp2Error(b"", f"ALPN chose {selected or 'nothing'} of h2")
        self.spoken = spoken
        return spoken

    def heard(self, speaks_h2: bool) -> None:
        """The probe's outcome: the server's SETTINGS came (HTTP/2 from here), or not (:class:`NotHttp2Error`, or
        the connection closed before a byte: HTTP/1.1 from here)."""
        self.spoken = "h2" if speaks_h2 else "h1"


class StreamResetError(ConnectionError):
    """The server reset the call's stream with ``code`` (RFC 9113 7) after it may have acted on it."""

    def __init__(self, code: int) -> None:
        self.code = code
        super().__init__(f"the server reset the call's stream ({_code_name(code)})")


class ConnectionEndedError(ConnectionError):
    """The HTTP/2 connection ended (a GOAWAY with an error, a protocol violation, a close) with the call's stream
    still open."""


class Exchange:
    """One call on the connection: its request, then its answer as it comes. ``done`` once the answer is whole or
    the stream failed (``error``); a held stream's body goes out as :class:`BodyReceived` and is not kept."""

    __slots__ = ("request", "fields", "held", "stream_id", "response", "error", "done", "_parts", "_body", "_at")

    def __init__(self, request: wire.Request, fields: list[tuple[bytes, bytes]], held: bool) -> None:
        self.request = request
        self.fields = fields
        self.held = held
        self.stream_id: int | None = None  # set when its stream opens (it may wait its turn first)
        self.response = wire.Response()
        self.error: Exception | None = None
        self.done = False
        self._parts: list[bytes] = []
        self._body = memoryview(request.body)
        self._at = 0  # how much of the body is framed

    @property
    def sent(self) -> bool:
        """Its stream opened: the server may have begun acting on it."""
        return self.stream_id is not None


@dataclass(slots=True)
class BodyReceived:
    """A piece of a held stream's body."""

    exchange: Exchange
    data: bytes


@dataclass(slots=True)
class ResponseEnded:
    """A call's answer is whole (``exchange.response``); for a held stream, its body ended."""

    exchange: Exchange


@dataclass(slots=True)
class ExchangeFailed:
    """A call's stream failed (``exchange.error``): reset, refused, or the connection ended under it."""

    exchange: Exchange


H2Event = BodyReceived | ResponseEnded | ExchangeFailed


class H2Session:
    """The client's side of one HTTP/2 connection to ``authority`` over ``scheme`` (``http``: cleartext with prior
    knowledge; ``https``: TLS whose ALPN chose ``h2``)."""

    def __init__(self, authority: str, scheme: str) -> None:
        self._authority = authority.encode("latin-1")
        self._scheme = scheme.encode("latin-1")
        config = h2.config.H2Configuration(
            client_side=True,
            header_encoding=None,
            # our fields are built by wire.py, lower-case and valid: checking them again costs a call every request
            validate_outbound_headers=False,
            normalize_outbound_headers=False,
            # an answer's fields are read for its status and content type alone (wire.answer), and h2's checks of
            # every character of every field were a tenth of what a call cost this client
            validate_inbound_headers=False,
            normalize_inbound_headers=False,
        )
        self._conn = h2.connection.H2Connection(config)
        self._conn.encoder = _Encoder()  # type: ignore[assignment]
        self._conn.decoder = _Decoder(MAX_HEADER_LIST_SIZE)  # type: ignore[assignment]
        S = h2.settings.SettingCodes
        self._conn.local_settings = h2.settings.Settings(
            client=True,
            initial_values={
                S.ENABLE_PUSH: 0,
                S.MAX_CONCURRENT_STREAMS: 100,  # streams the server may open: none, with push off
                S.INITIAL_WINDOW_SIZE: STREAM_WINDOW,
                S.MAX_FRAME_SIZE: MAX_FRAME_SIZE,
                S.MAX_HEADER_LIST_SIZE: MAX_HEADER_LIST_SIZE,
            },
        )
        # h2 reads the frame limit from the settings it was built with; ours hold from our first byte, as the
        # server reads our SETTINGS before anything of ours it answers
        self._conn.max_inbound_frame_size = self._conn.incoming_buffer.max_frame_size = MAX_FRAME_SIZE
        self._conn.initiate_connection()
        self._conn.increment_flow_control_window(CONNECTION_WINDOW - _DEFAULT_WINDOW)
        self._streams: dict[int, Exchange] = {}
        self._waiting: deque[Exchange] = deque()  # past the server's stream limit, in order
        self._sending: list[Exchange] = []  # streams whose body is not all framed yet
        self._header = b""  # a frame header split across reads (_sift)
        self._left = 0  # what is still to come of the frame being read
        self._goaway: bytearray | None = None  # a GOAWAY's payload as it comes
        self.heard = False  # the server's first frame was its SETTINGS: it speaks HTTP/2
        self.accepting = True  # new calls may open streams here (no GOAWAY yet, not ended)
        self.ended = False

    # -- calls in ---------------------------------------------------------------------------------------

    def send(self, request: wire.Request, fields: list[tuple[bytes, bytes]], held: bool = False) -> Exchange:
        """Open a stream for ``request`` (``fields``: its header fields past the pseudo-headers, wire.fields),
        now or once a stream under the server's limit is free."""
        if not self.accepting:
            raise wire.Unprocessed("the connection takes no new calls (GOAWAY, or ended)")
        exchange = Exchange(request, fields, held)
        self._waiting.append(exchange)
        self._open()
        return exchange

    def cancel(self, exchange: Exchange) -> None:
        """The caller stopped waiting (its timeout): reset the stream (RST_STREAM CANCEL) and forget it."""
        if exchange.done:
            return
        exchange.done = True
        if exchange.stream_id is None:
            self._waiting.remove(exchange)
            return
        self._forget(exchange)
        if not self.ended:
            try:
                self._conn.reset_stream(exchange.stream_id, h2.errors.ErrorCodes.CANCEL)
            except h2.exceptions.ProtocolError:
                pass  # it ended on its own meanwhile
        self._open()

    def close(self) -> None:
        """The polite end: GOAWAY (NO_ERROR) to write before closing the connection."""
        if not self.ended:
            try:
                self._conn.close_connection()
            except h2.exceptions.ProtocolError:
                pass  # h2 closed its side already: nothing more is to be said
        self.accepting = False
        self.ended = True

    @property
    def idle(self) -> bool:
        """No call is open or waiting."""
        return not self._streams and not self._waiting

    def data_to_send(self) -> bytes:
        """The bytes to write, taken; not called ``read`` as it does no IO (h2's own reasoning)."""
        return self._conn.data_to_send()

    # -- bytes in -------------------------------------------------------------------------------------

    def receive_data(self, data: bytes) -> list[H2Event]:
        """The events of ``data`` from the server. Until its first frame is seen to be SETTINGS, bytes that cannot
        begin one raise :class:`NotHttp2Error`."""
        out: list[H2Event] = []
        data = self._sift(data, out)
        if not data:
            return out
        try:
            events = self._conn.receive_data(data)
        except h2.exceptions.ProtocolError as exc:  # h2 queued the GOAWAY naming it
            return self._end(ConnectionEndedError(f"the server broke HTTP/2: {exc}"), out)
        streams = self._streams
        for event in events:
            if type(event) is h2.events.DataReceived:
                stream_id = event.stream_id or 0
                if event.flow_controlled_length:
                    self._conn.acknowledge_received_data(event.flow_controlled_length, stream_id)
                exchange = streams.get(stream_id)
                if exchange is not None and event.data:
                    if exchange.held:
                        out.append(BodyReceived(exchange, event.data))
                    else:
                        exchange._parts.append(event.data)
            elif type(event) is h2.events.ResponseReceived:
                exchange = streams.get(event.stream_id or 0)
                if exchange is not None:
                    self._head(exchange, event.headers or [])
            elif type(event) is h2.events.StreamEnded:
                exchange = streams.get(event.stream_id or 0)
                if exchange is not None:
                    exchange.response.body = b"".join(exchange._parts)
                    exchange._parts = []
                    exchange.done = True
                    self._forget(exchange)
                    out.append(ResponseEnded(exchange))
            elif type(event) is h2.events.StreamReset:
                exchange = streams.get(event.stream_id or 0)
                if exchange is not None:
                    # REFUSED_STREAM: the server did no work on it (RFC 9113 8.7), so it may go again
                    error: Exception = (
                        wire.Unprocessed("the server refused the call's stream unprocessed (REFUSED_STREAM)")
                        if event.error_code == h2.errors.ErrorCodes.REFUSED_STREAM
                        else StreamResetError(int(event.error_code or 0))
                    )
                    self._fail(exchange, error, out)
            # WindowUpdated and RemoteSettingsChanged free what waits: the pump and the opener run after the loop;
            # SettingsAcknowledged, PingReceived, TrailersReceived and informational answers ask nothing of us
        if not self.ended:
            self._open()
            self._pump()
        return out

    def connection_lost(self, cause: Exception | None = None) -> list[H2Event]:
        """The connection closed (``cause``: why, if an error said): every call still open fails — with ``cause``
        itself when it was :class:`NotHttp2Error` (the calls are not to go again), else ConnectionEndedError."""
        if isinstance(cause, NotHttp2Error):
            return self._end(cause, [])
        reason = f"the connection closed: {cause}" if cause else "the connection closed"
        return self._end(ConnectionEndedError(reason), [])

    # -- inside -------------------------------------------------------------------------------------------

    def _sift(self, data: bytes, out: list[H2Event]) -> bytes:
        """``data`` less its GOAWAY frames, which are handled here; the rest goes to h2. h2 closes its state machine
        on a GOAWAY and refuses every frame after it (python-hyper/h2#1181), where RFC 9113 6.8 lets the streams
        at or below its last stream id finish, and brainy's polite close answers them after its first GOAWAY.
        Frames are followed across reads by their headers; only a split header, and a GOAWAY, are held."""
        passed: list[bytes] = []
        at, end = 0, len(data)
        while at < end:
            if self._left:  # inside a frame: the rest of it, or what of it this read holds
                take = min(self._left, end - at)
                if self._goaway is None:
                    passed.append(data[at : at + take])
                else:
                    self._goaway += data[at : at + take]
                at += take
                self._left -= take
                if not self._left and self._goaway is not None:
                    self._goaway_received(bytes(self._goaway), out)
                    self._goaway = None
                continue
            need = 9 - len(self._header)
            self._header += data[at : at + need]
            at += need
            if len(self._header) < 9:
                break
            header, self._header = self._header, b""
            length, kind = int.from_bytes(header[:3], "big"), header[3]
            if not self.heard:  # RFC 9113 3.4: the server's preface is its SETTINGS frame
                if kind != _SETTINGS or header[4] & 0x1 or header[5:9] != b"\0\0\0\0":
                    self.accepting, self.ended = False, True
                    raise NotHttp2Error(header + data[at:])
                self.heard = True
            if kind == _GOAWAY:
                self._goaway, self._left = bytearray(), length
                if not length:
                    self._goaway_received(b"", out)
                    self._goaway = None
            else:
                passed.append(header)
                self._left = length
        return passed[0] if len(passed) == 1 else b"".join(passed)

    def _open(self) -> None:
        """Open streams for the waiting calls while the server's stream limit allows."""
        conn = self._conn
        limit = conn.remote_settings.max_concurrent_streams
        while self._waiting and self.accepting and len(self._streams) < limit:
            exchange = self._waiting.popleft()
            stream_id = conn.get_next_available_stream_id()
            exchange.stream_id = stream_id
            self._streams[stream_id] = exchange
            request = exchange.request
            headers = [
                (b":method", request.method.encode("latin-1")),
                (b":scheme", self._scheme),
                (b":authority", self._authority),
                (b":path", request.target.encode("latin-1")),
                *exchange.fields,
            ]
            conn.send_headers(stream_id, headers, end_stream=not request.body)
            if request.body:
                self._sending.append(exchange)
        self._pump()

    def _pump(self) -> None:
        """Frame as much of each open body as the windows allow, in the order the calls came."""
        if not self._sending:
            return
        conn = self._conn
        frame = conn.max_outbound_frame_size
        for exchange in list(self._sending):
            stream_id = exchange.stream_id
            assert stream_id is not None
            body, at = exchange._body, exchange._at
            while at < len(body):
                room = min(conn.local_flow_control_window(stream_id), frame, len(body) - at)
                if room <= 0:
                    break
                conn.send_data(stream_id, body[at : at + room].tobytes(), end_stream=at + room == len(body))
                at += room
            exchange._at = at
            if at == len(body):
                self._sending.remove(exchange)

    def _head(self, exchange: Exchange, headers: list[tuple[bytes, bytes]]) -> None:
        response = exchange.response
        for name, value in headers:
            if name == b":status":
                response.status = int(value)
            else:
                response.headers[name.decode("latin-1")] = value.decode("latin-1")
        if response.status != 200:
            exchange.held = False  # a held stream refused: its body is the refusal, kept whole like any answer

    def _forget(self, exchange: Exchange) -> None:
        if exchange.stream_id is not None:
            self._streams.pop(exchange.stream_id, None)
        if exchange in self._sending:
            self._sending.remove(exchange)

    def _fail(self, exchange: Exchange, error: Exception, out: list[H2Event]) -> None:
        exchange.error = error
        exchange.done = True
        self._forget(exchange)
        out.append(ExchangeFailed(exchange))

    def _goaway_received(self, payload: bytes, out: list[H2Event]) -> None:
        """A GOAWAY: no new stream; the streams above its last stream id fail unprocessed; with an error code, the
        connection is over (RFC 9113 6.8)."""
        if len(payload) < 8:
            self._conn.close_connection(h2.errors.ErrorCodes.FRAME_SIZE_ERROR)
            self._end(ConnectionEndedError("the server sent a GOAWAY shorter than 8 bytes"), out)
            return
        last = int.from_bytes(payload[:4], "big") & 0x7FFFFFFF
        code = int.from_bytes(payload[4:8], "big")
        self.accepting = False
        for exchange in list(self._streams.values()):
            if exchange.stream_id is not None and exchange.stream_id > last:
                self._fail(exchange, wire.Unprocessed("the server's GOAWAY left the call's stream unprocessed"), out)
        for exchange in self._waiting:
            self._fail(exchange, wire.Unprocessed("the connection took no new calls (GOAWAY)"), out)
        self._waiting.clear()
        if code:  # a connection error: nothing more comes on it (RFC 9113 5.4.1)
            self._end(ConnectionEndedError(f"the server ended the connection ({_code_name(code)})"), out)

    def _end(self, error: Exception, out: list[H2Event]) -> list[H2Event]:
        self.accepting = False
        self.ended = True
        for exchange in list(self._streams.values()):
            self._fail(exchange, error, out)
        for exchange in self._waiting:  # never left: they may go again on another connection
            self._fail(exchange, wire.Unprocessed(f"{error}, before the call's stream opened"), out)
        self._waiting.clear()
        return out
