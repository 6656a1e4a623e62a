"""The asyncio side of the WebSocket session: the sans-IO :class:`~brainy.net.ws.WsConnection`'s calls to the
dispatcher, answered as each completes.

Every text frame is one call through the same gate and dispatcher as every
transport, run inside the dispatcher's one clock. A call that answers at once
(every read) is answered in ``data_received``; one that waits (a write's fsync)
runs as a task, so calls pipeline and their answers leave in the order they
complete, each echoing its ``ref``. What was framed is written once per pass of
the event loop.

The end is a half-close (RFC 6455 7.1.1): once the session ended, its close
frame written, the connection lingers (``HttpProtocol.linger``: its writing side
shut, what comes read and discarded until the peer closes its side). Closing
outright would drop a peer that is still sending with a reset, and a reset
throws away the close frame that named why the session ended (the fuzzer's
finding: a frame refused mid-write lost its close 1002).

Back-pressure (issue 15): a client that stops reading must not grow the server's
memory without bound. Reading pauses while :data:`MAX_IN_FLIGHT` calls wait, and
while the transport's buffer is over its high-water mark (``pause_writing``), so
at most that many answers are ever held for a peer that does not read.
"""

from __future__ import annotations

import asyncio
import functools
from typing import Any

from brainy.auth.principal import Principal
from brainy.host.dispatch import Answer, Outcome
from brainy.net import ws
from brainy.net.glue.seams import HttpHandler
from brainy.net.glue.session import Connection, FlushedOncePerPass, Session

MAX_IN_FLIGHT = 64  # calls waiting on one session before reading pauses


class WsGlue(FlushedOncePerPass, Session[ws.WsConnection]):
    """One upgraded connection's WebSocket session for ``principal``, checked before the upgrade."""

    app: HttpHandler  # the handler that granted the upgrade: its dispatcher runs the calls

    def __init__(self, protocol: Connection, conn: ws.WsConnection, principal: Principal) -> None:
        super().__init__(protocol, conn)
        self.principal = principal
        self.dispatcher = self.app.calls  # in a fleet, one that calls a door where its brain is served
        self._start_flushing()
        self._tasks: set[asyncio.Future[Outcome]] = set()
        self._write_paused = False
        self._read_paused = False

    def data_received(self, data: bytes, now: float) -> None:
        for event in self.conn.receive_data(data, now):
            if isinstance(event, ws.TextReceived):
                self._call(event.payload)
            elif isinstance(event, ws.FrameRefused):
                self.conn.send_text(ws.answer(None, None, Outcome("", 0.0, refusal=event.refusal)))
        self._flush_soon()
        self._pace()

    def _call(self, payload: bytes) -> None:
        called: list[ws.WsCall] = []
        outcome = self.dispatcher.timed("ws", lambda: self._run(payload, called))
        call = called[0] if called else None
        ref, door = (call.ref, call.door) if call is not None else (ws.ref_of(payload), None)
        if isinstance(outcome, Outcome):
            self.conn.send_text(ws.answer(ref, door, outcome))
            return
        self.server.in_flight += 1
        task = asyncio.ensure_future(outcome)
        self._tasks.add(task)
        task.add_done_callback(functools.partial(self._answered, ref, door))

    def _run(self, payload: bytes, called: list[ws.WsCall]) -> Answer:
        call = ws.parse_call(payload)
        called.append(call)
        # a call that names no brain reaches the one brain of a one-brain key (the dispatcher's rule)
        return self.dispatcher.run(self.principal, call.door, call.brain, call.id, call.body)

    def _answered(self, ref: Any, door: str | None, task: asyncio.Future[Outcome]) -> None:
        self.server.in_flight -= 1
        self._tasks.discard(task)
        if task.cancelled():
            return  # the connection was lost
        self.conn.send_text(ws.answer(ref, door, task.result()))
        self._flush_soon()
        self._pace()
        if self.server.stopping:
            self.close_if_idle()

    # -- writing and pacing -------------------------------------------------------------------------

    def _pace(self) -> None:
        """Read only while few calls wait and the peer is taking what is written."""
        should_pause = self._write_paused or len(self._tasks) >= MAX_IN_FLIGHT
        if should_pause and not self._read_paused:
            self._read_paused = True
            self.transport.pause_reading()
        elif not should_pause and self._read_paused and len(self._tasks) < MAX_IN_FLIGHT // 2:
            self._read_paused = False
            self.transport.resume_reading()

    def pause_writing(self) -> None:
        self._write_paused = True
        self._pace()

    def resume_writing(self) -> None:
        self._write_paused = False
        self._pace()

    # -- the end ------------------------------------------------------------------------------------

    def close_if_idle(self) -> None:
        """The server is stopping: a going-away close once the calls in hand are answered."""
        if not self._tasks:
            self.conn.close(ws.GOING_AWAY)
            self._flush_soon()

    def connection_lost(self) -> None:
        self._lost = True
        for task in list(self._tasks):
            task.cancel()
