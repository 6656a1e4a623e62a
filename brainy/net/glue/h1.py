"""The asyncio side of HTTP/1.1: the sans-IO :class:`~brainy.net.h1.H1Connection`'s requests to the app, in order.

Requests on one connection are answered in the order they came
(pipelining). A request whose door answers at once (every read) is answered
right in ``data_received``, with no task; one that waits (a write's fsync)
parks the queue behind it in a task until its answer is written. Reading
pauses while :data:`MAX_PIPELINE` requests wait.
"""

from __future__ import annotations

import asyncio
import collections
import functools
import logging
from typing import Any

from brainy.net.glue.seams import HttpHandler
from brainy.net.glue.session import Connection, Session
from brainy.net.glue.sse import BACKLOG_BYTES, Runner, run_feed
from brainy.net.h1 import H1Connection, ProtocolFailed, RequestReceived, UpgradeRequested
from brainy.net.http import Passed, Response, StreamingResponse, refusal_response
from brainy.net.sse import OpenedFeed

log = logging.getLogger("brainy.serve")
MAX_PIPELINE = 32  # requests queued on one connection before reading pauses
_SPLICED: Any = object()  # what the queue waits for while a spliced request's answer is on its way


class H1Glue(Session[H1Connection]):
    """An HTTP/1.1 connection's requests, answered one after another in the order they came."""

    app: HttpHandler  # an HTTP/1.1 listener's: it also judges the /v1/ws upgrade

    def __init__(self, protocol: Connection, conn: H1Connection) -> None:
        super().__init__(protocol, conn)
        self._queue: collections.deque[RequestReceived | UpgradeRequested | ProtocolFailed] = collections.deque()
        self._waiting: asyncio.Future[Any] | None = None  # the answer the queue waits for (a task, or a future)
        self._closing = False
        self._paused = False  # reading paused behind MAX_PIPELINE queued requests
        self._feed: Runner | None = None  # the held change stream this connection carries, once asked
        self._splice = self.app.splice  # in a fleet: the edge's road for a request another node answers
        self._spliced: RequestReceived | None = None  # the request whose owner's answer _passed waits for
        self._take = self.app.take  # the same road's first look at a read (Edge.take)

    def data_received(self, data: bytes, now: float) -> None:
        conn = self.conn
        take = self._take
        if (
            take is not None
            and self._waiting is None
            and not self._queue
            and not self._closing
            and not self.server.stopping
        ):
            event = take(conn, data, now, self._passed)
            if event is not None:  # one plain get, read and sent on to its brain's node: _drain's splice, at once
                self.server.in_flight += 1
                self._waiting = _SPLICED
                self._spliced = event
                self.hastens = False
                return
        self._queue.extend(conn.receive_data(data, now))
        self._received()

    def body_received(self, count: int, now: float) -> None:
        """:meth:`data_received` for ``count`` bytes a read put straight into the arriving body's room
        (``H1Connection.body_room``, which the connection's reads ask for first: brainy/net/glue/tcp.py)."""
        self._queue.extend(self.conn.body_received(count, now))
        self._received()

    def _received(self) -> None:
        self.hastens = self.conn.mid_request  # a request part-way in: its arrival deadline runs from now
        if len(self._queue) >= MAX_PIPELINE:
            self.transport.pause_reading()
            self._paused = True
        if self._waiting is None:
            self._drain()

    def _drain(self) -> None:
        """Answer queued requests in the order they came, each at once unless its door waits."""
        transport, conn = self.transport, self.conn
        server, app, queue = self.server, self.app, self._queue
        while queue and not self._closing:
            event = queue.popleft()
            if type(event) is not RequestReceived:  # a failure or an upgrade: the connection's last event
                if isinstance(event, ProtocolFailed):
                    self._write(refusal_response(event.refusal), keep_alive=False, head=False)
                else:
                    self._upgrade(event)
                return
            server.in_flight += 1
            request = event.request
            splice = self._splice
            if (
                splice is not None
                and not queue
                and event.keep_alive
                and not server.stopping
                and splice(request, self._passed)
            ):
                self._waiting = _SPLICED  # the owner's answer comes to _passed
                self._spliced = event
                return
            answered = app.handle(request)
            if type(answered) is Response:  # the common answer, written here (_answer's, without two calls)
                server.in_flight -= 1
                keep_alive = event.keep_alive and not server.stopping
                transport.write(conn.respond(answered, keep_alive, request.method == "HEAD"))
                if not keep_alive:
                    self._closing = True
                    self.protocol.linger()
                    return
                continue
            if type(answered) is asyncio.Future:  # on its way (a request forwarded to its brain's node): no task
                self._waiting = answered
                answered.add_done_callback(functools.partial(self._landed, event))
                return
            if not isinstance(answered, Response):
                self._waiting = asyncio.get_running_loop().create_task(self._later(answered, event))
                return
            server.in_flight -= 1
            if not self._answer(answered, event):
                return
        if self._paused and len(self._queue) < MAX_PIPELINE // 2:
            self._paused = False
            transport.resume_reading()
        if self.server.stopping and not self._queue:
            transport.close()

    async def _later(self, pending: Any, event: RequestReceived) -> None:
        try:
            response = await pending
        finally:
            self.server.in_flight -= 1
            self._waiting = None
        self._then(response, event)

    def _landed(self, event: RequestReceived, answer: asyncio.Future[Response]) -> None:
        """:meth:`_later` for an answer that came as a future."""
        self.server.in_flight -= 1
        self._waiting = None
        exc = None if answer.cancelled() else answer.exception()
        if answer.cancelled() or exc is not None:  # (a server stopping, or a bug: said) closed, not left waiting
            if exc is not None:
                log.error("a request's answer failed", exc_info=exc)
            self.transport.close()
            return
        self._then(answer.result(), event)

    def _passed(self, answer: Response | Passed) -> None:
        """A spliced request's answer (brainy/net/edge.py ``Edge.splice``): passed on as it came, or framed."""
        self.server.in_flight -= 1
        self._waiting = None
        if type(answer) is not Passed:
            event, self._spliced = self._spliced, None
            assert event is not None  # (set with _waiting, before any answer can come)
            self._then(answer, event)
            return
        self._spliced = None
        transport = self.transport
        if transport.is_closing():
            return  # the client went while its answer was on the way
        transport.write(self.conn.relay(answer, self.protocol.now()))
        if self._queue or self._paused or self.server.stopping:
            self._drain()  # the requests queued behind it; a stopping server's connection closes once they are answered
            self.protocol.arm()
        else:
            self.protocol.answered()

    def _then(self, response: Response, event: RequestReceived) -> None:
        """A request's answer that waited, written in its turn; then the requests queued behind it."""
        if self.transport.is_closing():
            # the peer went while its answer was on the way (a forwarded request's client that hung up): there
            # is nothing to write it to, and a write to a closed transport raises out of this task unseen
            if isinstance(response, StreamingResponse) and not isinstance(response.feed, OpenedFeed):
                response.feed.close()  # type: ignore[attr-defined]  # a relayed stream's connection to its owner
            return
        if self._answer(response, event):
            self.conn.answered_at(self.protocol.now())
            self._drain()
        self.protocol.arm()

    def _upgrade(self, event: UpgradeRequested) -> None:
        """Switch protocols (``/v1/ws``) once the app granted it, the credential and the handshake checked
        first; a refused upgrade is answered and closed, and never gets a socket."""
        response, principal = self.app.upgrade(event.request)
        if principal is None:
            self._write(response, keep_alive=False, head=False)
            return
        self.conn.send_response(response, keep_alive=True)
        self.transport.write(self.conn.data_to_send())
        self._closing = True  # nothing more is HTTP/1.1 here
        self.protocol.switch_to_websocket(principal, event.rest)

    def _answer(self, response: Response, event: RequestReceived) -> bool:
        """Write one answer; False once the connection is closing."""
        if isinstance(response, StreamingResponse):
            self.conn.send_stream_head(response)
            self.transport.write(self.conn.data_to_send())
            self._closing = True  # the stream is the connection's last answer
            self._feed = run_feed(response.feed, _ChunkedSink(self))
            return False
        keep_alive = event.keep_alive and not self.server.stopping
        self._write(response, keep_alive, event.request.method == "HEAD")
        return keep_alive

    def _write(self, response: Response, keep_alive: bool, head: bool) -> None:
        self.transport.write(self.conn.respond(response, keep_alive, head))
        if not keep_alive:
            # the connection's last answer: a refusal may come with the request's body still arriving, so the
            # connection lingers rather than closing on it (a reset would throw the refusal away)
            self._closing = True
            self.protocol.linger()

    def close_if_idle(self) -> None:
        if self._feed is not None:
            self._feed.stop()  # a held stream is idle by nature: it ends with its last chunk
        elif self._waiting is None and not self._queue:
            self.transport.close()

    def connection_lost(self) -> None:
        self._closing = True
        if self._feed is not None:
            self._feed.stop()


class _ChunkedSink:
    """A held stream's bytes as the chunks of one HTTP/1.1 answer."""

    def __init__(self, glue: H1Glue) -> None:
        self.glue = glue

    def write(self, data: bytes) -> None:
        self.glue.conn.send_chunk(data)
        self.glue.transport.write(self.glue.conn.data_to_send())

    def end(self) -> None:
        transport = self.glue.transport
        if not transport.is_closing():
            self.glue.conn.end_stream()
            transport.write(self.glue.conn.data_to_send())
            self.glue.protocol.linger()

    @property
    def backlogged(self) -> bool:
        return self.glue.transport.get_write_buffer_size() > BACKLOG_BYTES
