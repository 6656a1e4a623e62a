"""HTTP/3, sans-IO: a server connection's requests over aioquic's own sans-IO QUIC and HTTP/3 state machines.

QUIC events in (:meth:`H3Connection.quic_event_received`), request events out;
answers in (:meth:`H3Connection.send_response`), and the datagrams they make
are the QUIC connection's to hand the glue (``brainy.net.glue.h3``). No socket,
no task, no clock here: QUIC's own timers are the QUIC connection's, driven by
the glue.

HTTP/1.1, HTTP/2 and HTTP/3 differ in how they frame a request and not at all in
what a request is (seed 000, Transports 4), so a stream's request is the same
:class:`~brainy.net.http.Request` HTTP/2 hands out (``Request.from_fields``)
and goes to the same app; the events are HTTP/2's own (``brainy.net.h2``), and a
body over the limit is refused the same way, dropped as it comes.
"""

from __future__ import annotations

import aioquic.h3.connection
import aioquic.h3.events
import aioquic.quic.events
from aioquic.quic.connection import QuicConnection

from brainy.net.h2 import H2Event, Stream, StreamReset
from brainy.net.http import MAX_BODY, Response
from brainy.net.quic_shim import sending_reset, unacknowledged_bytes

ALPN = ["h3"]  # exactly h3: offering more would let a client negotiate what this listener does not serve


class H3Connection:
    """One HTTP/3 connection, server side, over the QUIC connection ``quic``."""

    def __init__(self, quic: QuicConnection, *, max_body: int = MAX_BODY) -> None:
        self._h3 = aioquic.h3.connection.H3Connection(quic)
        self._quic = quic
        self._max_body = max_body
        self._streams: dict[int, Stream] = {}  # from their HEADERS until answered
        self._held: set[int] = set()  # streams answered by a held change stream, still open

    def quic_event_received(self, event: aioquic.quic.events.QuicEvent) -> list[H2Event]:
        """Feed one QUIC event; answer the request events it caused, in order."""
        out: list[H2Event] = []
        if isinstance(event, (aioquic.quic.events.StreamReset, aioquic.quic.events.StopSendingReceived)):
            # the peer reset its request (RESET_STREAM), or wants no answer to it (STOP_SENDING, RFC 9114
            # 4.1.1): either way nothing is answered on the stream, and an answer still being made is let go
            stream = self._streams.pop(event.stream_id, None)
            self._held.discard(event.stream_id)
            if stream is not None and stream.handed_out:
                out.append(StreamReset(event.stream_id))
        for h3_event in self._h3.handle_event(event):
            if isinstance(h3_event, aioquic.h3.events.HeadersReceived):
                # a second HEADERS on a stream is its trailers: a request's trailers carry nothing read here
                stream = self._streams.setdefault(h3_event.stream_id, Stream(h3_event.headers))
            elif isinstance(h3_event, aioquic.h3.events.DataReceived):
                stream = self._streams.get(h3_event.stream_id)
                if stream is not None:
                    stream.take(h3_event.data, self._max_body)
            else:
                continue
            if h3_event.stream_ended and stream is not None and not stream.handed_out:
                if sending_reset(self._quic, h3_event.stream_id):
                    # a STOP_SENDING already reset the answer's side (its event may only come after this
                    # one): the request is not run, since no answer to it can be sent
                    del self._streams[h3_event.stream_id]
                    continue
                out.append(stream.event(h3_event.stream_id))
        return out

    def send_response(self, stream_id: int, response: Response) -> None:
        """Frame the answer on ``stream_id``: HEADERS, the body as DATA, trailers if it has any. QUIC's
        flow control is the QUIC connection's: what the peer's window holds back it sends later. A stream
        the peer reset or stopped meanwhile takes nothing."""
        stream = self._streams.pop(stream_id, None)
        if stream is None or sending_reset(self._quic, stream_id):
            return
        headers = [(b":status", str(response.status).encode()), *response.headers]
        trailers = response.trailers
        if trailers is None:
            headers.append((b"content-length", str(len(response.body)).encode()))
        body = b"" if stream.head else response.body
        self._h3.send_headers(stream_id, headers, end_stream=not body and not trailers)
        if body:
            self._h3.send_data(stream_id, body, end_stream=not trailers)
        if trailers:
            self._h3.send_headers(stream_id, trailers, end_stream=True)

    def send_stream_head(self, stream_id: int, response: Response) -> None:
        """HEADERS of an answer whose body is a stream (the held change feed): DATA follows by
        :meth:`send_stream_data` until :meth:`end_stream`."""
        stream = self._streams.get(stream_id)
        if stream is None or sending_reset(self._quic, stream_id):
            return
        self._held.add(stream_id)
        self._h3.send_headers(
            stream_id, [(b":status", str(response.status).encode()), *response.headers], end_stream=False
        )

    def send_stream_data(self, stream_id: int, data: bytes) -> bool:
        """More of a streamed body; False once the stream is gone (reset by the peer)."""
        if stream_id not in self._held or stream_id not in self._streams or sending_reset(self._quic, stream_id):
            return False
        if data:
            self._h3.send_data(stream_id, data, end_stream=False)
        return True

    def end_stream(self, stream_id: int) -> None:
        if stream_id in self._held:
            self._held.discard(stream_id)
            if self._streams.pop(stream_id, None) is not None and not sending_reset(self._quic, stream_id):
                self._h3.send_data(stream_id, b"", end_stream=True)

    def stream_backlog(self, stream_id: int) -> int:
        """Bytes of a streamed body QUIC holds unacknowledged (back-pressure reads it); aioquic keeps them in
        the stream's sender until the peer acknowledges them, and exposes no public measure of it (the one
        reach is :func:`brainy.net.quic_shim.unacknowledged_bytes`)."""
        return unacknowledged_bytes(self._quic, stream_id)

    @property
    def busy(self) -> bool:
        """True while a request handed out is not yet answered."""
        return any(stream.handed_out for stream in self._streams.values())
