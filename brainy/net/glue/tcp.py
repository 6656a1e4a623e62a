"""The asyncio protocol of one accepted TCP connection: HTTP/1.1 and HTTP/2 (prior knowledge) on one port.

Thin glue: it sets TCP_NODELAY, reads the first bytes with the sans-IO
:class:`~brainy.net.preface.PrefaceReader`, then hands the connection to the
glue of the protocol they chose (``glue.h1``, ``glue.h2``), feeding it bytes
with the loop's time. It keeps the connection's one timer at the deadline the
sans-IO object in charge reports, and closes the connection when that object
says a deadline passed. A connection whose last answer is written lingers
(:meth:`HttpProtocol.linger`) rather than closing on a peer still sending.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from typing import Protocol

from brainy.auth.principal import Principal
from brainy.contract import refusals as R
from brainy.net.deadlines import Lingering, Timed
from brainy.net.glue.h1 import H1Glue
from brainy.net.glue.h2 import H2Glue
from brainy.net.glue.seams import Handler, Serving
from brainy.net.glue.ws import WsGlue
from brainy.net.h1 import H1Connection
from brainy.net.h2 import H2Connection
from brainy.net.http import Header, refusal_response
from brainy.net.preface import PrefaceReader, ProtocolChosen
from brainy.net.ws import WsConnection

log = logging.getLogger("brainy.serve")


class Listening(Serving, Protocol):
    """What an accepted connection reads of the server that accepted it (``brainy.net.server.Server``, which
    this module does not import: the server builds the connections): the set of its open connections, the
    Alt-Svc fields to advertise, and the deadlines a connection keeps."""

    connections: set[HttpProtocol]
    advertised: list[Header]
    idle_seconds: float
    request_seconds: float


class HttpProtocol(asyncio.Protocol):
    """One accepted connection on a listener speaking ``protocols`` (``"h1"``, ``"h2"`` or both).

    While an HTTP/1.1 body arrives over several reads, the transport reads into the body itself
    (:class:`_BodyReads`, ``H1Connection.body_room``: its one copy, from the kernel); every other read comes as
    :meth:`data_received`, as a plain protocol's do (a small request pays nothing for the body's road)."""

    def __init__(self, app: Handler, server: Listening, protocols: tuple[str, ...], advertise: bool = True) -> None:
        self.app = app
        self.server = server
        self.protocols = protocols
        self.advertise = advertise  # the server's Alt-Svc on every answer (not on gRPC's: no client reads it)
        self.transport: asyncio.Transport | None = None
        self.session: H1Glue | H2Glue | WsGlue | None = None  # set once the first bytes chose the protocol
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = 0.0
        self._lingering = False  # the last answer is written and the writing side shut (linger)
        # the rest of an HTTP/1.1 body still arriving, where the next read goes while _BodyReads is the
        # transport's protocol (H1Connection.body_room); asked once a read leaves a request part-way in
        self.room: memoryview | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's transports are not asyncio's classes
        self._loop = asyncio.get_running_loop()
        self._reader = PrefaceReader(self._loop.time(), self.server.idle_seconds, self.server.request_seconds)
        self._timed: Timed = self._reader  # the sans-IO object whose deadline the timer keeps
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.server.connections.add(self)
        self.arm()

    def connection_lost(self, exc: Exception | None) -> None:
        # Every reference back to this object (the timer's callback, the session's) is dropped here: a closed
        # connection is freed by reference counting as it closes, not left as cyclic garbage (21 objects an
        # h1 connection, 36 an h2) that pushes the collector into more passes, whose pauses land in the p99
        # of every other connection (perf/measure.py's 64 connections, opened afresh each sweep).
        self.server.connections.discard(self)
        self.room = None
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        session, self.session = self.session, None
        if session is not None:
            session.connection_lost()

    def _fill(self, session: H1Glue) -> None:
        """A read left a request part-way in: if it is a body arriving, the next reads go straight into it."""
        room = session.conn.body_room()
        if room is None or self._lingering or self.transport is None:
            return
        self.room = room
        self.transport.set_protocol(_BodyReads(self))

    def body_read(self, nbytes: int) -> None:
        """``nbytes`` more of the arriving body are in its room (:class:`_BodyReads`)."""
        session = self.session
        assert type(session) is H1Glue  # (it stays one while a body arrives: no upgrade mid-body)
        session.body_received(nbytes, self._loop.time())
        room = None if self._lingering else session.conn.body_room()
        self.room = room
        if room is None and self.transport is not None:  # whole (or the connection done): plain reads again
            self.transport.set_protocol(self)
        if self._timer is not None and not session.hastens:
            return  # as in data_received
        self.arm()

    def data_received(self, data: bytes) -> None:
        if self._lingering:
            return  # the last answer is written: what the peer still sends is read and discarded
        now = self._loop.time()
        session = self.session
        if session is not None:
            session.data_received(data, now)
            if type(session) is H1Glue and session.conn.mid_request and self.session is session:
                self._fill(session)
            if self._timer is not None and not session.hastens:
                return  # the deadline moved later, if at all: the timer set finds it (arm's docstring)
        else:
            chosen = self._reader.receive_data(data, now)
            if chosen is None:
                return  # could still be either: wait for more
            self._choose(chosen, now)
            session = self.session
            if type(session) is H1Glue and session.conn.mid_request:
                self._fill(session)
        self.arm()

    def _choose(self, chosen: ProtocolChosen, now: float) -> None:
        server = self.server
        advertised = server.advertised if self.advertise else []
        if chosen.protocol == "h2" and "h2" in self.protocols:
            h2 = H2Connection(now, idle_seconds=server.idle_seconds, advertise=advertised)
            self._timed, self.session = h2, H2Glue(self, h2)
        elif "h1" in self.protocols:
            h1 = H1Connection(
                now, idle_seconds=server.idle_seconds, request_seconds=server.request_seconds, advertise=advertised
            )
            self._timed, self.session = h1, H1Glue(self, h1)
        else:
            self._answer_and_close(
                R.MalformedRequestError("this listener speaks HTTP/2 only (prior knowledge)", reason="preface")
            )
            return
        self.session.data_received(chosen.data, now)

    def switch_to_websocket(self, principal: Principal, rest: bytes) -> None:
        """The h1 glue granted ``/v1/ws``: from here the connection is a WebSocket session for ``principal``,
        starting with ``rest``, the bytes that came after the upgrade request."""
        conn = WsConnection()
        self._timed, self.session = conn, WsGlue(self, conn, principal)
        if rest:
            self.session.data_received(rest, self._loop.time())

    def pause_writing(self) -> None:
        if self.session is not None:
            self.session.pause_writing()

    def resume_writing(self) -> None:
        if self.session is not None:
            self.session.resume_writing()

    def _answer_and_close(self, refusal: R.Refusal) -> None:
        conn = H1Connection()
        conn.send_response(refusal_response(refusal), keep_alive=False)
        assert self.transport is not None
        self.transport.write(conn.data_to_send())
        self.linger()

    def linger(self) -> None:
        """The connection's last answer is written: shut the writing side (FIN, once what is written is sent)
        and read on, discarding, until the peer closes its side (``eof_received``: the connection closes) or
        the linger deadline passes (``brainy.net.deadlines.Lingering``: the connection is aborted). Closing at
        once would leave the peer's bytes still arriving unread, and the kernel answers those with a reset
        that can throw the answer away before the peer reads it: a refusal sent mid-body, a WebSocket close
        frame, an HTTP/2 GOAWAY (RFC 9112 9.6; RFC 6455 7.1.1)."""
        transport = self.transport
        if self._lingering or transport is None or transport.is_closing():
            return
        if not transport.can_write_eof():
            transport.close()
            return
        if self.room is not None:  # what the peer still sends is read and discarded (data_received)
            self.room = None
            transport.set_protocol(self)
        transport.write_eof()
        self._lingering = True
        self._timed = Lingering(self._loop.time())
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self.arm()

    # -- the one timer ------------------------------------------------------------------------------

    def arm(self) -> None:
        """Keep the timer at or before the deadline the sans-IO object reports. A deadline that moved
        later (every answer moves it) is found when the earlier timer fires, so the hot path costs one
        comparison and no timer call."""
        due = self._timed.next_deadline()
        if due is None:
            return
        if self._timer is not None:
            if self._timer_at <= due:
                return
            self._timer.cancel()
        self._timer_at = due
        self._timer = self._loop.call_at(due, self._fired)

    def now(self) -> float:
        """The loop's clock, the one the deadlines are kept on."""
        return self._loop.time()

    def answered(self) -> None:
        """:meth:`arm` once an answer that waited is written: the deadline only moved later (the wait for the next
        request), which a timer already set finds when it fires (as ``data_received``'s own answers leave it);
        only a connection whose timer went while its answer was owed sets one."""
        if self._timer is None:
            self.arm()

    def _fired(self) -> None:
        self._timer = None
        passed = self._timed.timer_fired(self._loop.time())
        if passed is None:
            self.arm()
            return
        assert self.transport is not None
        if passed.reason == "linger":
            # abort, not close: a peer that reads nothing holds what is still unwritten, and the socket with it
            self.transport.abort()
            return
        if passed.reason == "request":
            log.info("closing a connection whose request took over %.0f s to arrive", passed.seconds)
        if self.session is not None:
            self.session.closing()
        self.transport.close()

    # -- the stop sequence --------------------------------------------------------------------------

    def close_if_idle(self) -> None:
        """Close now if nothing is in flight; otherwise once it is answered (the server is stopping)."""
        if self.session is not None:
            self.session.close_if_idle()
        elif self.transport is not None:
            self.transport.close()

    @property
    def sending(self) -> bool:
        """True while an answer is held back by the peer's flow control (h2), not yet handed to the socket."""
        return self.session is not None and self.session.sending


class _BodyReads(asyncio.BufferedProtocol):
    """The transport's protocol while an HTTP/1.1 body arrives: each read goes into the rest of the body
    (``HttpProtocol.room``) and is handed to the connection as a count; every other callback is the
    connection's own. Set by ``HttpProtocol._fill``, replaced by the connection again once the body is whole."""

    __slots__ = ("_conn",)

    def __init__(self, conn: HttpProtocol) -> None:
        self._conn = conn

    def get_buffer(self, sizehint: int) -> memoryview:
        room = self._conn.room
        assert room is not None  # (the connection is the protocol again before its room goes)
        return room

    def buffer_updated(self, nbytes: int) -> None:
        self._conn.body_read(nbytes)

    def eof_received(self) -> bool | None:
        return self._conn.eof_received()

    def connection_lost(self, exc: Exception | None) -> None:
        self._conn.connection_lost(exc)

    def pause_writing(self) -> None:
        self._conn.pause_writing()

    def resume_writing(self) -> None:
        self._conn.resume_writing()
