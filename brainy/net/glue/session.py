"""What every transport's glue is to the accepted connection: the seam a new transport's glue fills in.

:class:`~brainy.net.glue.tcp.HttpProtocol` reads the first bytes, builds the
sans-IO protocol object they chose, and from then on hands every read to one
:class:`Session` over it, with the loop's time; the session runs the app and
writes. The protocol object itself (``conn``) answers the connection's
deadlines, which ``HttpProtocol`` keeps one timer for.
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from typing import Any, Generic, Protocol, TypeVar

from brainy.auth.principal import Principal
from brainy.net.glue.seams import Handler, Serving

Conn = TypeVar("Conn")


class Connection(Protocol):
    """What a session reads of the accepted connection it serves (:class:`~brainy.net.glue.tcp.HttpProtocol`,
    which this module does not import: ``tcp`` builds the sessions)."""

    app: Handler
    server: Serving
    transport: asyncio.Transport | None

    def arm(self) -> None:
        """Keep the connection's one timer at the deadline ``conn`` now reports."""

    def answered(self) -> None:
        """:meth:`arm` once an answer that waited is written (its deadline only moved later)."""

    def now(self) -> float:
        """The clock the connection's deadlines are kept on."""

    def switch_to_websocket(self, principal: Principal, rest: bytes) -> None:
        """From here the connection is a WebSocket session (an HTTP/1.1 upgrade was granted)."""

    def linger(self) -> None:
        """The connection's last answer is written: shut its writing side, read and discard until the peer
        closes its side or the linger deadline passes (``brainy.net.deadlines.Lingering``)."""


class Session(ABC, Generic[Conn]):
    """One connection's glue once its protocol is known, over that protocol's sans-IO object ``conn``."""

    # True after a read that may have brought ``conn``'s deadline earlier than any it reported before (an
    # HTTP/1.1 request begun and not yet whole starts its arrival clock): only then, or while no timer is
    # kept, does the connection ask ``conn`` for its deadline again after a read. Every other deadline only
    # moves later as bytes come (the idle one) or is fixed when ``conn`` is made (HTTP/2's SETTINGS
    # acknowledgement), and the timer already set for an earlier one finds the later one when it fires.
    hastens = False

    def __init__(self, protocol: Connection, conn: Conn) -> None:
        assert protocol.transport is not None
        self.protocol = protocol
        self.app = protocol.app
        self.server = protocol.server
        self.transport = protocol.transport
        self.conn = conn

    @abstractmethod
    def data_received(self, data: bytes, now: float) -> None:
        """Bytes read at ``now``: feed them to ``conn``, answer what it hands out, write what it framed."""

    @abstractmethod
    def close_if_idle(self) -> None:
        """The server is stopping: end the connection now if nothing is in flight, else once it is answered."""

    @abstractmethod
    def connection_lost(self) -> None:
        """The transport is gone: drop what waits on it."""

    def closing(self) -> None:
        """A deadline passed and the connection is about to close: write what ``conn`` framed on its way
        out (HTTP/2's GOAWAY). Most sessions have nothing to say."""

    def pause_writing(self) -> None:
        """The transport's buffer is over its high-water mark: a session that streams or pipelines stops
        producing (the HTTP sessions answer one request's worth at a time and need not)."""

    def resume_writing(self) -> None:
        """The transport's buffer drained below its low-water mark."""

    @property
    def sending(self) -> bool:
        """True while an answer is held back in ``conn`` (by the peer's flow control), not yet written."""
        return False


class FlushedOncePerPass:
    """Writes what ``conn`` framed once the loop has run every callback now ready, for a session over a
    multiplexed protocol (h2, the WebSocket). With many connections busy, writing as each answer is framed
    cost 10-15% more server CPU per request than writing after the loop's pass (perf/measure.py's h2 cells
    at 8 and 64 connections), and one write per pass also carries every frame of it together. The session
    sets ``_lost`` when its transport goes."""

    conn: Any
    transport: Any
    protocol: Connection

    def _start_flushing(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._flush_due = False
        self._lost = False

    def _flush_soon(self) -> None:
        if not self._flush_due:
            self._flush_due = True
            self._loop.call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_due = False
        if self._lost:  # an answer that finished as the connection went has nowhere to go
            return
        data = self.conn.data_to_send()
        if data:
            self.transport.write(data)
        if self.conn.ended:
            self.protocol.linger()
