"""The listeners and the stop sequence: HTTP/1.1 and HTTP/2 (prior knowledge) on one port per listen, gRPC, HTTP/3.

Each accepted connection is an :class:`~brainy.net.glue.tcp.HttpProtocol`
(the asyncio glue over the sans-IO protocol objects, ``brainy.net.glue``).
Stopping is a sequence of steps (see :meth:`Server.stop`).
"""

from __future__ import annotations

import asyncio
import functools
import gc
import logging
import signal
import sys
from dataclasses import dataclass
from typing import Any

from brainy.net.app import App
from brainy.net.deadlines import IDLE_SECONDS, REQUEST_SECONDS
from brainy.net.glue.h3 import H3Endpoint, open_endpoint
from brainy.net.glue.tcp import HttpProtocol
from brainy.net.grpc_service import GrpcService
from brainy.net.http import Header
from brainy.net.tls import Certificate

log = logging.getLogger("brainy.serve")

ALT_SVC_SECONDS = 86400  # how long a client may remember the h3 alternative (RFC 7838 ma)


# The collector's youngest generation is collected after this many new container objects, not CPython's 700. A
# served write keeps its rows (each a dict holding a dict, which the collector never untracks) until the flush, so
# every collection walks them again: ingest of 20 batches of 1,000 vectored rows took 202 young collections and a
# full one (1.3 us a row of the main thread; 5.0 over 100 batches, its full passes up to 75 ms). At 10,000: 9, and
# 0.55 us a row (1.9 over 100 batches, its longest pass 36 ms).
GC_YOUNG = 10_000

# How long a thread holding the interpreter lock keeps it once another asks for it (CPython's default: 5 ms). The
# loop's thread, woken by a request's bytes or a worker's answer, waits that long whenever a background thread
# (a flush at nice 19, a graph catch-up at SCHED_IDLE) holds the lock in Python, and on a shared core such a
# thread may not even run until another process yields. At 5 ms, durable MessagePack ingest (perf/bench_ingest.py's
# cell, 30 batches of 1,000 rows, ten interleaved pairs) ran 46,578 rows/s median; at 0.5 ms, 55,763, every pair
# faster. Two threads both busy in Python then trade the lock up to 2,000 times a second, each trade a few us.
SWITCH_SECONDS = 0.0005

PROTOCOLS = ("h1", "h2", "grpc", "h3")  # what one --listen may name; none names h1 and h2 on one port


@dataclass(frozen=True)
class Listen:
    host: str
    port: int
    protocols: tuple[str, ...] = ("h1", "h2")

    @classmethod
    def parse(cls, text: str) -> Listen:
        """``HOST:PORT[,h1|h2|grpc|h3]``; IPv6 hosts in brackets."""
        address, _, proto = text.partition(",")
        host, sep, port = address.rpartition(":")
        if not sep or not port.isdigit() or not host:
            raise ValueError(f"--listen {text!r}: expected HOST:PORT[,h1|h2|grpc|h3]")
        host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
        if proto in ("", *PROTOCOLS):
            return cls(host, int(port), ("h1", "h2") if proto == "" else (proto,))
        raise ValueError(f"--listen {text!r}: {proto!r} is not a protocol this build serves ({', '.join(PROTOCOLS)})")


class Server:
    def __init__(self, app: App, listens: list[Listen], certificate: Certificate | None = None) -> None:
        self.app = app
        self.grpc = GrpcService(app.calls)
        self.listens = listens
        self.certificate = certificate  # the host's, for the h3 listeners (brainy.net.tls judged it)
        self.endpoints: list[H3Endpoint] = []
        self.advertised: list[Header] = []  # Alt-Svc on every h1/h2 answer, exactly when an h3 listener exists
        self.connections: set[HttpProtocol] = set()
        self.in_flight = 0  # requests the app is answering (the glue counts them)
        self.stopping = False
        self.idle_seconds = IDLE_SECONDS  # a connection's deadlines (brainy.net.deadlines)
        self.request_seconds = REQUEST_SECONDS
        self._servers: list[asyncio.AbstractServer] = []
        self.addresses: list[tuple[str, int]] = []
        self.bound: list[Listen] = []  # the listen each address came from

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        for listen in self.listens:
            if listen.protocols == ("h3",):
                assert self.certificate is not None, "brainy.net.tls.judge refuses an h3 listener without files"
                endpoint = await open_endpoint(self.app, self, listen.host, listen.port, self.certificate)
                self.endpoints.append(endpoint)
                self._bound(listen, endpoint.address)
                continue
            if listen.protocols == ("grpc",):  # gRPC is HTTP/2 (prior knowledge) whose requests are rpcs
                factory = functools.partial(HttpProtocol, self.grpc, self, ("h2",), advertise=False)
            else:
                factory = functools.partial(HttpProtocol, self.app, self, listen.protocols)
            server = await loop.create_server(factory, listen.host, listen.port, reuse_address=True, backlog=1024)
            self._servers.append(server)
            for sock in server.sockets:
                self._bound(listen, sock.getsockname()[:2])
        if self.endpoints:
            self.advertised = [
                (b"alt-svc", ", ".join(f'h3=":{e.address[1]}"; ma={ALT_SVC_SECONDS}' for e in self.endpoints).encode())
            ]
        # what is alive once the server is built (modules, the contract, the tables) lives as long as the
        # process: kept out of the collector's full passes, which then cost what the brains hold (a fresh
        # process's first full pass was 12-13 ms, paid inside whichever door's attach it landed in)
        gc.freeze()
        gc.set_threshold(GC_YOUNG, *gc.get_threshold()[1:])
        sys.setswitchinterval(SWITCH_SECONDS)

    def _bound(self, listen: Listen, address: tuple[str, int]) -> None:
        self.addresses.append(address)
        self.bound.append(listen)
        log.info("listening on %s:%d (%s)", address[0], address[1], "+".join(listen.protocols))

    async def stop(self, drain_seconds: float = 10.0) -> list[dict[str, Any]]:
        """The stop sequence, in order."""
        self.stopping = True
        # 1. stop accepting: no new connection is taken from here on
        for server in self._servers:
            server.close()
        for endpoint in self.endpoints:
            endpoint.accepting = False
        # 2. close connections that have nothing in flight; the busy ones close after their answer
        for conn in list(self.connections):
            conn.close_if_idle()
        for endpoint in self.endpoints:
            for quic in endpoint.connections():
                quic.close_if_idle()
        # 3. wait for the requests in flight, and for h2 answers the peer's flow control still holds back,
        #    up to the drain limit
        loop = asyncio.get_running_loop()
        deadline = loop.time() + drain_seconds
        while (self.in_flight or any(conn.sending for conn in self.connections)) and loop.time() < deadline:
            await asyncio.sleep(0.01)
        if self.in_flight:
            log.warning(
                "stop: %d request(s) still in flight after %.0f s; closing anyway", self.in_flight, drain_seconds
            )
        for conn in list(self.connections):
            if conn.transport is not None:
                conn.transport.close()
        for endpoint in self.endpoints:
            endpoint.close()  # CONNECTION_CLOSE to any connection still open, then the socket
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
