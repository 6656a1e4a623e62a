"""The listeners: our own asyncio protocol on uvloop, HTTP/1.1 and HTTP/2 (prior knowledge) on one port.

The protocol class is thin glue: it sets TCP_NODELAY, tells h1 from h2 by the
connection preface, feeds bytes to the sans-IO connection, hands each request
to the app in order, and writes what the connection framed. Stopping is a
sequence of steps (see :meth:`Server.stop`).
"""

from __future__ import annotations

import asyncio
import collections
import logging
import signal
import socket
from dataclasses import dataclass
from typing import Any

from brainy.contract import refusals as R
from brainy.net.app import App
from brainy.net.h1 import H1Connection, ProtocolFailed, RequestReceived
from brainy.net.http import Response, refusal_response

log = logging.getLogger("brainy.serve")

H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
# A connection that sends nothing for IDLE_SECONDS with nothing in flight is closed, and so is one
# whose request has been arriving for longer than REQUEST_SECONDS: a client that trickles a
# request a byte at a time (slowloris) would otherwise hold a connection for ever.
IDLE_SECONDS = 75.0
REQUEST_SECONDS = 30.0
MAX_PIPELINE = 32  # requests queued on one connection before reading pauses


@dataclass(frozen=True)
class Listen:
    host: str
    port: int
    protocols: tuple[str, ...] = ("h1", "h2")

    @classmethod
    def parse(cls, text: str) -> "Listen":
        """``HOST:PORT[,h1|h2]``; IPv6 hosts in brackets."""
        address, _, proto = text.partition(",")
        host, sep, port = address.rpartition(":")
        if not sep or not port.isdigit() or not host:
            raise ValueError(f"--listen {text!r}: expected HOST:PORT[,h1|h2]")
        host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
        if proto in ("", "h1", "h2"):
            return cls(host, int(port), ("h1", "h2") if proto == "" else (proto,))
        raise ValueError(f"--listen {text!r}: {proto!r} is not a protocol this build serves (h1, h2)")


class HttpProtocol(asyncio.Protocol):
    def __init__(self, app: App, server: "Server", protocols: tuple[str, ...]) -> None:
        self.app = app
        self.server = server
        self.protocols = protocols
        self.transport: asyncio.Transport | None = None
        self._head = b""
        self._h1: H1Connection | None = None
        self._h2: Any = None
        self._queue: collections.deque[RequestReceived | ProtocolFailed] = collections.deque()
        self._waiting: asyncio.Task[None] | None = None
        self._closing = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's transports are not asyncio's classes
        loop = asyncio.get_running_loop()
        self._last_data = self._request_began = loop.time()
        self._timer = loop.call_later(min(self.server.idle_seconds, self.server.request_seconds),
                                      self._check_deadlines)
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.server.connections.add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self.server.connections.discard(self)
        self._timer.cancel()
        self._closing = True
        if self._h2 is not None:
            self._h2.connection_lost()

    def data_received(self, data: bytes) -> None:
        now = asyncio.get_running_loop().time()
        if self._h1 is None or not self._h1.mid_request:
            self._request_began = now
        self._last_data = now
        if self._h1 is not None:
            self._feed_h1(data)
        elif self._h2 is not None:
            self._h2.data_received(data)
        else:
            self._choose(data)

    def _choose(self, data: bytes) -> None:
        """Tell h2 (the prior-knowledge preface) from h1 by the first bytes of the connection."""
        self._head += data
        head = self._head
        if H2_PREFACE.startswith(head[:len(H2_PREFACE)]) and len(head) < len(H2_PREFACE):
            return  # could still be either: wait for more
        self._head = b""
        if head.startswith(H2_PREFACE) and "h2" in self.protocols:
            from brainy.net.h2 import H2Session
            self._h2 = H2Session(self.app, self.transport, self.server)
            self._h2.data_received(head)
        elif "h1" in self.protocols:
            self._h1 = H1Connection()
            self._feed_h1(head)
        else:
            self._answer_and_close(R.MalformedRequestError("this listener speaks HTTP/2 only (prior knowledge)",
                                                           reason="preface"))

    def _check_deadlines(self) -> None:
        """One timer per connection: close it when idle too long or when a request trickles in too slowly."""
        loop = asyncio.get_running_loop()
        now, server = loop.time(), self.server
        busy = self._waiting is not None or bool(self._queue) or (self._h2 is not None and self._h2.streams)
        trickling = self._h1 is not None and self._h1.mid_request or (self._h1 is None and self._h2 is None)
        if not busy and trickling and now - self._request_began >= server.request_seconds:
            log.info("closing a connection whose request took over %.0f s to arrive", server.request_seconds)
            self.transport.close()
            return
        if not busy and now - self._last_data >= server.idle_seconds:
            self.transport.close()
            return
        due = self._last_data + server.idle_seconds
        if trickling:
            due = min(due, self._request_began + server.request_seconds)
        self._timer = loop.call_later(max(0.05, due - now), self._check_deadlines)

    def _answer_and_close(self, refusal: R.Refusal) -> None:
        conn = H1Connection()
        conn.send_response(refusal_response(refusal), keep_alive=False)
        assert self.transport is not None
        self.transport.write(conn.data_to_send())
        self.transport.close()

    def _feed_h1(self, data: bytes) -> None:
        assert self._h1 is not None
        self._queue.extend(self._h1.receive_data(data))
        if len(self._queue) >= MAX_PIPELINE and self.transport is not None:
            self.transport.pause_reading()
        if self._waiting is None:
            self._drain()

    def _drain(self) -> None:
        """Answer queued requests in the order they came (pipelining). A request whose door answers at
        once (every read) is answered right here, with no task; one that waits (a write's fsync) parks
        the queue behind it until its answer is written."""
        transport = self.transport
        assert transport is not None
        while self._queue and not self._closing:
            event = self._queue.popleft()
            if isinstance(event, ProtocolFailed):
                self._write(refusal_response(event.refusal), keep_alive=False, head=False)
                return
            self.server.in_flight += 1
            answered = self.app.handle(event.request)
            if not isinstance(answered, Response):
                self._waiting = asyncio.get_running_loop().create_task(self._later(answered, event))
                return
            self.server.in_flight -= 1
            if not self._answer(answered, event):
                return
        if len(self._queue) < MAX_PIPELINE // 2:
            transport.resume_reading()
        if self.server.stopping and not self._queue:
            transport.close()

    async def _later(self, pending: Any, event: RequestReceived) -> None:
        try:
            response = await pending
        finally:
            self.server.in_flight -= 1
            self._waiting = None
        if self._answer(response, event):
            self._drain()

    def _answer(self, response: Response, event: RequestReceived) -> bool:
        """Write one answer; False once the connection is closing."""
        keep_alive = event.keep_alive and not self.server.stopping
        self._write(response, keep_alive, event.request.method == "HEAD")
        return keep_alive

    def _write(self, response: Response, keep_alive: bool, head: bool) -> None:
        conn, transport = self._h1, self.transport
        assert conn is not None and transport is not None
        conn.send_response(response, keep_alive, head)
        transport.write(conn.data_to_send())
        if not keep_alive:
            self._closing = True
            transport.close()

    def close_if_idle(self) -> None:
        if self._waiting is None and not self._queue and self.transport is not None:
            if self._h2 is not None:
                self._h2.close()
            else:
                self.transport.close()


class Server:
    def __init__(self, app: App, listens: list[Listen]) -> None:
        self.app = app
        self.listens = listens
        self.connections: set[HttpProtocol] = set()
        self.in_flight = 0
        self.stopping = False
        self.idle_seconds = IDLE_SECONDS
        self.request_seconds = REQUEST_SECONDS
        self._servers: list[asyncio.AbstractServer] = []
        self.addresses: list[tuple[str, int]] = []
        self.bound: list[Listen] = []  # the listen each address came from

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        for listen in self.listens:
            server = await loop.create_server(lambda listen=listen: HttpProtocol(self.app, self, listen.protocols),
                                              listen.host, listen.port, reuse_address=True, backlog=1024)
            self._servers.append(server)
            for sock in server.sockets:
                host, port = sock.getsockname()[:2]
                self.addresses.append((host, port))
                self.bound.append(listen)
                log.info("listening on %s:%d (%s)", host, port, "+".join(listen.protocols))

    async def stop(self, drain_seconds: float = 10.0) -> list[dict[str, Any]]:
        """The stop sequence, in order."""
        self.stopping = True
        # 1. stop accepting: no new connection is taken from here on
        for server in self._servers:
            server.close()
        # 2. close connections that have nothing in flight; the busy ones close after their answer
        for conn in list(self.connections):
            conn.close_if_idle()
        # 3. wait for the requests in flight, up to the drain limit
        loop = asyncio.get_running_loop()
        deadline = loop.time() + drain_seconds
        while self.in_flight and loop.time() < deadline:
            await asyncio.sleep(0.01)
        if self.in_flight:
            log.warning("stop: %d request(s) still in flight after %.0f s; closing anyway", self.in_flight,
                        drain_seconds)
        for conn in list(self.connections):
            if conn.transport is not None:
                conn.transport.close()
        # 4. close every brain: flush, clean-close record, lease released; each one narrated
        closed = await loop.run_in_executor(None, self.app.pool.close_all)
        for server in self._servers:
            await server.wait_closed()
        return closed


async def serve_until_stopped(server: Server, ready: Any = None) -> list[dict[str, Any]]:
    """Run until SIGTERM or SIGINT, then stop in order."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await server.start()
    if ready is not None:
        ready(server)
    await stop.wait()
    log.info("stopping: no new connections; draining %d request(s) in flight", server.in_flight)
    return await server.stop()
