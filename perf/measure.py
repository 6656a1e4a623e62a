"""Latency sweeps per transport: brainy against the floors, in the same run, load from the other core.

    python perf/measure.py [--requests N] [--rows N] [--writes N] [--repeat N] [--concurrency 1,8,64]
                           [--only TEXT] [--grpcio] [--python-client] [--before PYTHON]

Builds a store, starts `brainy serve` on it (h1/h2, gRPC and h3 listeners, h3
with a self-signed certificate made here) and three floors: a bare uvloop +
httptools server answering 30 bytes and the same on the `h2` library
(perf/floor_server.py), and a bare grpcio unary server
answering a 30-byte message (perf/grpcio_server.py). Every server is pinned to
one core and the load runs on the other: h2load (Debian's nghttp2-client) for
every cell it can send (h1, h2, MCP, gRPC, the 1,000-row `find` page), this
script's own client (also pinned to the other core) for h3 and the WebSocket,
and for every cell with ``--python-client`` or when h2load is not installed.
The client column says which. A Python client is slower than the server it
loads, so its rows measure the pair; h2load's measure the server.

Sweeps each cell at each concurrency (``--concurrency``) and prints nearest-
rank p50, p90 and p99, p99 over p50, the request count, requests per second,
the serving process's CPU per request (user + system over requests, every
thread: on a shared box steadier than the wall figures, since a server waiting
for its core loses time but spends no CPU) and answer bytes (h2load's: headers
included), each beside its floor's. Above one connection a cell sends at least
160 requests per connection (the 1,000-row page 8): one stall holds every
request in flight, and with fewer it alone would be over 1% of them and set
p99. Above one connection an h2load cell leaves out the connect round, the
first request of each connection (the ``c`` earliest by start time): they wait
for the server to accept every connection at once, and h2load stamps some of a
connection's later requests with that connection's start, so a slow round
there set p99 alone (the ``n`` column counts what is left).
``--grpcio`` adds brainy's gRPC service on grpcio's own server, the candidate
brainy's HTTP/2 layer was chosen over. ``--before PYTHON`` serves the same
doors from an earlier tree (installed in another venv, its interpreter named)
on a store it builds, and follows each brainy h1/h2/gRPC row with its
'before' row: before and after in one run, interleaved.

Then the WebSocket pipelined 16 deep on one connection against h1 keep-alive at
c=1 (both from this script's client), and the change feed's commit-to-frame
latency (``--writes`` of them): from a write's acknowledgement to its frame's
arrival on a held SSE stream of the writer (negative when the frame came first:
the stream is woken by the commit, not by the answer).

``--repeat N`` runs each sweep N times and shows the quietest (lowest p50); the
writes are timed once. ``--only TEXT`` keeps the rows whose name contains TEXT
(or one of TEXT's comma-separated parts) and their floors. Clients set TCP_NODELAY. Loopback only; every loop is
bounded by its request or write count.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import collections
import json
import math
import os
import re
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aioquic.h3.connection
import aioquic.h3.events
import h2.config
import h2.connection
import h2.events
import uvloop
from aioquic.asyncio.protocol import QuicConnectionProtocol
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.connection import QuicConnection

HERE = Path(__file__).resolve().parent
KEY = "bky_" + "m" * 32
SERVICE = "bks_" + "s" * 32


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def nearest_rank(sorted_values: list[float], pct: float) -> float:
    return sorted_values[max(0, math.ceil(pct / 100 * len(sorted_values)) - 1)]


class H1Client(asyncio.Protocol):
    """One keep-alive connection; a request is written whole and timed until its answer is whole."""

    def __init__(self) -> None:
        self.buf = bytearray()
        self.waiter: asyncio.Future[bytes] | None = None
        self.need = -1

    def connection_made(self, transport):
        transport.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.transport = transport

    def data_received(self, data):
        self.buf += data
        if self.need < 0:
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                return
            head = bytes(self.buf[:end]).lower()
            i = head.find(b"content-length:")
            length = int(head[i + 15 : head.find(b"\r\n", i) if head.find(b"\r\n", i) > 0 else None])
            self.need = end + 4 + length
        if len(self.buf) >= self.need:
            body = bytes(self.buf[self.need - (self.need - self.buf.find(b"\r\n\r\n") - 4) : self.need])
            del self.buf[: self.need]
            self.need = -1
            self.waiter.set_result(body)

    async def request(self, raw: bytes) -> bytes:
        self.waiter = asyncio.get_running_loop().create_future()
        self.transport.write(raw)
        return await self.waiter


class H2Client(asyncio.Protocol):
    def __init__(self) -> None:
        self.conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding=None))
        self.waiters: dict[int, asyncio.Future[bytes]] = {}
        self.bodies: dict[int, bytearray] = {}

    def connection_made(self, transport):
        transport.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.transport = transport
        self.conn.initiate_connection()
        transport.write(self.conn.data_to_send())

    def data_received(self, data):
        for event in self.conn.receive_data(data):
            if isinstance(event, h2.events.DataReceived):
                self.bodies[event.stream_id] += event.data
                self.conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
            elif isinstance(event, h2.events.StreamEnded):
                self.waiters.pop(event.stream_id).set_result(bytes(self.bodies.pop(event.stream_id)))
        out = self.conn.data_to_send()
        if out:
            self.transport.write(out)

    async def request(self, headers: list[tuple[bytes, bytes]]) -> bytes:
        sid = self.conn.get_next_available_stream_id()
        self.bodies[sid] = bytearray()
        fut = self.waiters[sid] = asyncio.get_running_loop().create_future()
        self.conn.send_headers(sid, headers, end_stream=True)
        self.transport.write(self.conn.data_to_send())
        return await fut


class GrpcClient(H2Client):
    """A unary rpc as gRPC frames it: HEADERS, one length-prefixed message, then the answer's trailers."""

    async def request(self, call: tuple[list[tuple[bytes, bytes]], bytes]) -> bytes:
        headers, message = call
        sid = self.conn.get_next_available_stream_id()
        self.bodies[sid] = bytearray()
        fut = self.waiters[sid] = asyncio.get_running_loop().create_future()
        self.conn.send_headers(sid, headers)
        self.conn.send_data(sid, message, end_stream=True)
        self.transport.write(self.conn.data_to_send())
        return await fut


class H3Client(QuicConnectionProtocol):
    """One QUIC connection speaking HTTP/3 (aioquic's client); a request is timed until its stream ends."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.h3 = aioquic.h3.connection.H3Connection(self._quic)
        self.waiters: dict[int, asyncio.Future[bytes]] = {}
        self.bodies: dict[int, bytearray] = {}

    def quic_event_received(self, event) -> None:
        for h3_event in self.h3.handle_event(event):
            if isinstance(h3_event, aioquic.h3.events.DataReceived):
                self.bodies[h3_event.stream_id] += h3_event.data
            if getattr(h3_event, "stream_ended", False) and h3_event.stream_id in self.waiters:
                self.waiters.pop(h3_event.stream_id).set_result(bytes(self.bodies.pop(h3_event.stream_id)))

    async def request(self, headers: list[tuple[bytes, bytes]]) -> bytes:
        sid = self._quic.get_next_available_stream_id()
        self.bodies[sid] = bytearray()
        fut = self.waiters[sid] = asyncio.get_running_loop().create_future()
        self.h3.send_headers(sid, headers, end_stream=True)
        self.transmit()
        return await fut


WS_MASK = b"\x11\x22\x33\x44"


def ws_frame(call: dict) -> bytes:
    """One masked client text frame carrying a call (RFC 6455 5.2, written here, not by brainy's framing)."""
    payload = json.dumps(call).encode()
    n = len(payload)
    head = bytes((0x81, 0x80 | n)) if n < 126 else bytes((0x81, 0x80 | 126)) + n.to_bytes(2, "big")
    return head + WS_MASK + bytes(b ^ WS_MASK[i % 4] for i, b in enumerate(payload))


class WsClient(asyncio.Protocol):
    """One upgraded /v1/ws connection; each answer frame resolves the oldest waiting call."""

    def __init__(self) -> None:
        self.buf = bytearray()
        self.waiters: collections.deque[asyncio.Future[bytes]] = collections.deque()
        self.ready = asyncio.get_running_loop().create_future()

    def connection_made(self, transport):
        transport.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.transport = transport
        nonce = base64.b64encode(os.urandom(16)).decode()
        transport.write(
            (
                f"GET /v1/ws HTTP/1.1\r\nhost: 127.0.0.1\r\nupgrade: websocket\r\nconnection: Upgrade\r\n"
                f"sec-websocket-version: 13\r\nsec-websocket-key: {nonce}\r\n"
                f"authorization: Bearer {KEY}\r\n\r\n"
            ).encode()
        )

    def data_received(self, data):
        self.buf += data
        if not self.ready.done():
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                return
            assert self.buf.startswith(b"HTTP/1.1 101"), bytes(self.buf[:200])
            del self.buf[: end + 4]
            self.ready.set_result(None)
        while len(self.buf) >= 2:
            n, at = self.buf[1] & 0x7F, 2
            if n == 126:
                if len(self.buf) < 4:
                    return
                n, at = int.from_bytes(self.buf[2:4], "big"), 4
            elif n == 127:
                if len(self.buf) < 10:
                    return
                n, at = int.from_bytes(self.buf[2:10], "big"), 10
            if len(self.buf) < at + n:
                return
            body = bytes(self.buf[at : at + n])
            del self.buf[: at + n]
            self.waiters.popleft().set_result(body)

    async def request(self, frame: bytes) -> bytes:
        fut = asyncio.get_running_loop().create_future()
        self.waiters.append(fut)
        self.transport.write(frame)
        return await fut

    async def pipeline(self, frame: bytes, depth: int) -> list[bytes]:
        loop = asyncio.get_running_loop()
        futs = [loop.create_future() for _ in range(depth)]
        self.waiters.extend(futs)
        self.transport.write(frame * depth)
        return await asyncio.gather(*futs)


# the clients over TCP; h3 (QUIC over UDP) is opened by connect() itself
CLIENTS = {"h1": H1Client, "h2": H2Client, "grpc": GrpcClient, "ws": WsClient}
H3_CLIENT = QuicConfiguration(is_client=True, alpn_protocols=["h3"], verify_mode=ssl.CERT_NONE)


async def connect(port: int, kind: str):
    """One client connection of ``kind``, answered when it can carry a request (QUIC handshake, ws upgrade done)."""
    loop = asyncio.get_running_loop()
    if kind == "h3":
        _, client = await loop.create_datagram_endpoint(
            lambda: H3Client(QuicConnection(configuration=H3_CLIENT)), remote_addr=("127.0.0.1", port)
        )
        client.connect(("127.0.0.1", port))
        await client.wait_connected()
        return client
    client = (await loop.create_connection(CLIENTS[kind], "127.0.0.1", port))[1]
    if kind == "ws":
        await client.ready
    return client


def close(client) -> None:
    if isinstance(client, H3Client):
        client.close()  # CONNECTION_CLOSE; the endpoint closes with the loop
    else:
        client.transport.close()


async def sweep(port: int, kind: str, request, concurrency: int, total: int) -> tuple[list[float], int, float]:
    clients = [await connect(port, kind) for _ in range(concurrency)]
    for c in clients:  # warm each connection once
        await c.request(request)
    per = max(1, total // concurrency)
    latencies: list[float] = []
    size = 0

    async def run(client) -> None:
        nonlocal size
        for _ in range(per):
            t = time.perf_counter()
            body = await client.request(request)
            latencies.append((time.perf_counter() - t) * 1000)
            size = len(body)

    started = time.perf_counter()
    await asyncio.gather(*(run(c) for c in clients))
    wall = time.perf_counter() - started
    for c in clients:
        close(c)
    return sorted(latencies), size, len(latencies) / wall


async def pipelined(port: int, request: bytes, depth: int, total: int) -> tuple[list[float], int, float]:
    """One WebSocket connection, ``depth`` calls written at once and all awaited, ``total`` calls in all:
    the latency of each batch per call, the answer size, calls per second."""
    client = await connect(port, "ws")
    await client.pipeline(request, depth)
    latencies: list[float] = []
    size = 0
    started = time.perf_counter()
    for _ in range(max(1, total // depth)):
        t = time.perf_counter()
        answers = await client.pipeline(request, depth)
        latencies.append((time.perf_counter() - t) * 1000)
        size = len(answers[-1])
    wall = time.perf_counter() - started
    close(client)
    return sorted(latencies), size, len(latencies) * depth / wall


class SseClient(asyncio.Protocol):
    """A held change stream over h1: the arrival time of every event whose id names a generation."""

    def __init__(self) -> None:
        self.buf = b""
        self.arrived: dict[int, float] = {}
        self.waiters: dict[int, asyncio.Future[float]] = {}

    def connection_made(self, transport):
        transport.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.transport = transport
        transport.write(h1_get("/v1/brains/main/changes?since=head", "text/event-stream"))

    def data_received(self, data):
        now = time.perf_counter()
        self.buf += data
        while b"\nid: " in self.buf or self.buf.startswith(b"id: "):
            at = self.buf.find(b"id: ")
            end = self.buf.find(b".", at)
            if end < 0:
                return
            generation = int(self.buf[at + 4 : end])
            self.buf = self.buf[end:]
            self.arrived.setdefault(generation, now)
            waiter = self.waiters.pop(generation, None)
            if waiter is not None and not waiter.done():
                waiter.set_result(now)


async def commit_to_frame(port: int, writes: int) -> list[float]:
    """Milliseconds from each write's acknowledgement (h1, keep-alive) to its frame on a held stream."""
    loop = asyncio.get_running_loop()
    stream = (await loop.create_connection(SseClient, "127.0.0.1", port))[1]
    writer = await connect(port, "h1")
    await asyncio.sleep(0.3)  # the stream is open and caught up
    gaps: list[float] = []
    for i in range(writes):
        body = json.dumps({"type": "thing", "metadata": {"i": i}}).encode()
        answer = await writer.request(h1_post("/v1/brains/main/add", body, {"content-type": "application/json"}))
        acked = time.perf_counter()
        generation = json.loads(answer)["generation"]
        if generation not in stream.arrived:
            fut = stream.waiters[generation] = loop.create_future()
            await asyncio.wait_for(fut, 5)
        gaps.append((stream.arrived[generation] - acked) * 1000)
    close(stream)
    close(writer)
    return sorted(gaps)


def h1_get(path: str, accept: str = "application/json") -> bytes:
    return (
        f"GET {path} HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: Bearer {KEY}\r\naccept: {accept}\r\n\r\n"
    ).encode()


def h2_get(path: str, scheme: bytes = b"http") -> list[tuple[bytes, bytes]]:
    return [
        (b":method", b"GET"),
        (b":path", path.encode()),
        (b":scheme", scheme),
        (b":authority", b"127.0.0.1"),
        (b"authorization", f"Bearer {KEY}".encode()),
    ]


def self_signed(root: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 signed by its own key, for the h3 listener (the client does not verify)."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "measure")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(1)
        .not_valid_before(now)
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
        .sign(key, hashes.SHA256())
    )
    (root / "cert.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (root / "key.pem").write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return root / "cert.pem", root / "key.pem"


def grpc_call(rpc: str, brain: str = "", id_: str = "") -> tuple[list[tuple[bytes, bytes]], bytes]:
    """A unary call of brainy.v1.Brainy/<rpc>: DoorRequest{brain, id} (fields 1 and 2) as its one message."""
    fields = b"".join(bytes([n << 3 | 2, len(v)]) + v.encode() for n, v in ((1, brain), (2, id_)) if v)
    return (
        [
            (b":method", b"POST"),
            (b":path", f"/brainy.v1.Brainy/{rpc}".encode()),
            (b":scheme", b"http"),
            (b":authority", b"127.0.0.1"),
            (b"content-type", b"application/grpc"),
            (b"te", b"trailers"),
            (b"authorization", f"Bearer {KEY}".encode()),
        ],
        b"\x00" + len(fields).to_bytes(4, "big") + fields,
    )


def h1_post(path: str, body: bytes, headers: dict[str, str]) -> bytes:
    head = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    return (
        f"POST {path} HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: Bearer {KEY}\r\n{head}"
        f"content-length: {len(body)}\r\n\r\n"
    ).encode() + body


MCP_JSON = {"content-type": "application/json", "accept": "application/json, text/event-stream"}


def mcp_session(port: int) -> str:
    """Open one MCP session (initialize, then notifications/initialized) and answer its Mcp-Session-Id."""
    init = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "measure", "version": "1"},
            },
        }
    )
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(h1_post("/mcp", init.encode(), MCP_JSON))
        head = sock.recv(65536).split(b"\r\n\r\n", 1)[0].decode("latin-1")
    session = next(
        line.split(":", 1)[1].strip() for line in head.split("\r\n") if line.lower().startswith("mcp-session-id:")
    )
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(
            h1_post(
                "/mcp",
                b'{"jsonrpc":"2.0","method":"notifications/initialized"}',
                {**MCP_JSON, "mcp-session-id": session},
            )
        )
        answer = sock.recv(65536)
        assert answer.startswith(b"HTTP/1.1 202"), f"notifications/initialized was not accepted: {answer!r}"
    return session


def mcp_call(session: str, tool: str, arguments: dict) -> bytes:
    """tools/call of one door as an MCP client sends it (brain left out: the key reaches one brain)."""
    body = json.dumps(
        {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": tool, "arguments": arguments}}
    ).encode()
    return h1_post("/mcp", body, {**MCP_JSON, "mcp-session-id": session, "mcp-protocol-version": "2025-06-18"})


def build_store(root: Path, rows: int) -> Path:
    from brainy.engine import Brain, init_store

    path = root / "store"
    init_store(path)
    brain = Brain.open(path)
    for start in range(0, rows, 500):
        brain.addMany(
            {
                "items": [
                    {"type": "thing", "id": f"row-{i}", "data": f"row {i}", "metadata": {"i": i, "tags": ["a", "b"]}}
                    for i in range(start, min(rows, start + 500))
                ]
            }
        )
    brain.close()
    return path


def wait_ready(port: int, deadline: float = 20.0) -> None:
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"nothing answered on port {port}")


def quietest(measure, repeat: int) -> tuple[list[float], int, float, float]:
    """The run with the lowest p50 of ``repeat`` runs of ``measure()``: on a shared box, the quietest stands for it."""
    runs = [measure() for _ in range(repeat)]
    return min(runs, key=lambda run: nearest_rank(run[0], 50))


def cpu_seconds(pid: int | None) -> float:
    """The CPU time (user + system, every thread) the process ``pid`` has used, from each thread's
    schedstat (nanoseconds, where /proc/PID/stat counts clock ticks); 0.0 when it is not known."""
    if pid is None:
        return 0.0
    total = 0
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return 0.0
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            pass  # a thread that ended meanwhile
    return total / 1e9


def with_cpu(measure, pid: int | None):
    """``measure`` with the server's CPU per request (microseconds) beside its figures: on a shared box
    the steadier figure, since a server waiting for its core costs time but no CPU."""

    def run() -> tuple[list[float], int, float, float]:
        before = cpu_seconds(pid)
        lat, size, rate = measure()
        return lat, size, rate, (cpu_seconds(pid) - before) / max(1, len(lat)) * 1e6

    return run


# -- the cores: servers on one, load on the other ----------------------------------------------

SERVER_CORE, LOAD_CORE = 0, 1


def pinned(cores: set[int] | None) -> list[str]:
    """The ``taskset`` prefix that keeps a process on ``cores`` (nothing when the box has one core)."""
    return ["taskset", "-c", ",".join(map(str, sorted(cores)))] if cores else []


def h1_writes(url: str, body: Path, key: str, connections: int, seconds: float, cores: set[int] | None) -> float:
    """h2load's writes a second: ``connections`` HTTP/1.1 connections, one JSON POST of ``body`` to ``url`` in flight
    on each, for ``seconds`` after a second's warm-up; SystemExit unless every one succeeded."""
    argv = [
        *pinned(cores),
        str(H2LOAD),
        "--h1",
        *("-c", str(connections), "-m", "1", "-D", str(round(seconds)), "--warm-up-time", "1"),
        *("-d", str(body), "-H", "content-type: application/json", "-H", f"authorization: Bearer {key}"),
        url,
    ]
    out = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
    done = re.search(r"requests: \d+ total, \d+ started, (\d+) done, (\d+) succeeded", out)
    if done is None or done[1] != done[2]:
        raise SystemExit(f"h2load: not every write succeeded:\n{out}")
    rate = re.search(r"finished in [\d.]+m?s, ([\d.]+) req/s", out)
    if rate is None:
        raise SystemExit(f"h2load said no rate:\n{out}")
    return float(rate[1])


def pin_process(pid: int, cores: set[int] | None) -> None:
    """Every thread of the running process ``pid`` on ``cores`` (threads it starts later inherit it); nothing when
    the box has one core."""
    if cores:
        subprocess.run(
            ["taskset", "-a", "-p", "-c", ",".join(map(str, sorted(cores))), str(pid)],
            check=True,
            stdout=subprocess.DEVNULL,
        )


def split_cores() -> tuple[set[int] | None, set[int] | None]:
    """(server cores, load cores): one each when the box has two or more, else None and None (said)."""
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < 2:
        print("one core only: servers and load share it, every figure below is flattered", file=sys.stderr)
        return None, None
    return {cores[SERVER_CORE]}, {cores[LOAD_CORE]}


# -- h2load: the load generator that is not the bottleneck --------------------------------------

H2LOAD = shutil.which("h2load")


@dataclass
class Load:
    """How h2load sends one cell's request: the URL, its protocol flag, extra header lines, a body."""

    url: str
    flags: list[str]
    headers: list[str]
    body: bytes | None = None


def h2load_sweep(
    load: Load, concurrency: int, total: int, cores: set[int] | None, tmp: Path
) -> tuple[list[float], int, float]:
    """One h2load run pinned to ``cores``: sorted per-request milliseconds (its --log-file), the answer size
    (bytes received over requests, headers included: h2load does not split them), requests per second."""
    log = tmp / "h2load.log"
    log.unlink(missing_ok=True)  # h2load appends
    argv = [
        *pinned(cores),
        H2LOAD,
        *load.flags,
        "-c",
        str(concurrency),
        "-n",
        str(total),
        "-m",
        "1",
        "--log-file",
        str(log),
    ]
    for header in load.headers:
        argv += ["-H", header]
    if load.body is not None:
        (tmp / "body").write_bytes(load.body)
        argv += ["-d", str(tmp / "body")]
    done = subprocess.run([*argv, load.url], capture_output=True, text=True, timeout=300)
    out = done.stdout
    if done.returncode != 0 or not log.exists():
        raise SystemExit(f"h2load failed on {load.url}: {done.stdout}{done.stderr}")
    rows = [line.split("\t") for line in log.read_text().splitlines() if line]
    failed = sum(1 for r in rows if not r[1].startswith("2"))
    if failed:
        raise SystemExit(f"h2load: {failed} of {len(rows)} requests to {load.url} failed\n{out}")
    # the connect round left out above one connection (the module's docstring says why)
    steady = sorted(rows, key=lambda r: int(r[0]))[concurrency if concurrency > 1 else 0 :]
    latencies = sorted(int(r[2]) / 1000 for r in steady)
    rate = float(out.split(" req/s")[0].rsplit(",", 1)[1])
    traffic = int(out.split("traffic: ")[1].split("(")[1].split(")")[0])  # "197.27KB (202000) total"
    size = traffic // max(1, len(rows))
    return latencies, size, rate


def python_sweep(port: int, kind: str, request, concurrency: int, total: int) -> tuple[list[float], int, float]:
    return uvloop.run(sweep(port, kind, request, concurrency, total))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=4000, help="requests per cell (default 4000)")
    parser.add_argument("--rows", type=int, default=2000, help="entities in the store (default 2000)")
    parser.add_argument("--writes", type=int, default=200, help="writes timed to their frame (default 200)")
    parser.add_argument("--grpcio", action="store_true", help="also brainy's gRPC service on grpcio's own server")
    parser.add_argument(
        "--only",
        help="only the rows whose name contains this, or one of these comma-separated texts (and their floors)",
    )
    parser.add_argument("--repeat", type=int, default=1, help="sweeps per cell; the one with the lowest p50 is shown")
    parser.add_argument("--concurrency", default="1,8,64", help="connection counts swept (default 1,8,64)")
    parser.add_argument(
        "--python-client",
        action="store_true",
        help="load every cell from this script's own client, even where h2load is installed",
    )
    parser.add_argument(
        "--before",
        metavar="PYTHON",
        help="also serve from this interpreter's brainy (an earlier tree installed in another venv), "
        "on a store it builds itself: each brainy h1/h2/gRPC row is followed by its 'before' row",
    )
    args = parser.parse_args()
    server_cores, load_cores = split_cores()
    use_h2load = H2LOAD is not None and not args.python_client
    if not use_h2load:
        print(
            "h2load not found (Debian: nghttp2-client): every cell is loaded by this script's own client"
            if H2LOAD is None
            else "every cell is loaded by this script's own client",
            file=sys.stderr,
        )
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        store = build_store(root, args.rows)
        keys = root / "keys"
        fd = os.open(keys, os.O_WRONLY | os.O_CREAT, 0o600)
        os.write(fd, f"{KEY} person:measure *\n{SERVICE} service:ops !\n".encode())
        os.close(fd)
        port, floor_port, h2_floor_port, grpc_port, grpc_floor_port, grpcio_port, h3_port = (
            free_port() for _ in range(7)
        )
        cert, key = self_signed(root)
        on_server = pinned(server_cores)
        procs = [
            subprocess.Popen(
                [
                    *on_server,
                    sys.executable,
                    "-m",
                    "brainy.cli",
                    "serve",
                    "--listen",
                    f"127.0.0.1:{port}",
                    "--listen",
                    f"127.0.0.1:{grpc_port},grpc",
                    "--listen",
                    f"127.0.0.1:{h3_port},h3",
                    "--tls-cert",
                    str(cert),
                    "--tls-key",
                    str(key),
                    "--brain",
                    f"main={store}",
                    "--keys",
                    str(keys),
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            ),
            subprocess.Popen(
                [*on_server, sys.executable, str(HERE / "floor_server.py"), str(floor_port)], stdout=subprocess.DEVNULL
            ),
            subprocess.Popen(
                [*on_server, sys.executable, str(HERE / "floor_server.py"), str(h2_floor_port), "h2"],
                stdout=subprocess.DEVNULL,
            ),
            subprocess.Popen(
                [*on_server, sys.executable, str(HERE / "grpcio_server.py"), "floor", str(grpc_floor_port)],
                stdout=subprocess.DEVNULL,
            ),
        ]
        if args.grpcio:  # brainy's service on grpcio's own server: the candidate brainy's h2 layer was measured against
            procs.append(
                subprocess.Popen(
                    [
                        *on_server,
                        sys.executable,
                        str(HERE / "grpcio_server.py"),
                        "brainy",
                        str(grpcio_port),
                        str(store),
                        str(keys),
                    ],
                    stdout=subprocess.DEVNULL,
                )
            )
        before_port = before_grpc_port = None
        if args.before:  # the earlier tree on its own store (its own format), served as this tree is: the same
            # listeners (an h3 one too: its socket in the loop and the alt-svc header each h1 answer then carries
            # made this tree's h1 get at c=64 a fifth slower than the same tree as 'before', an A/A run)
            before_port, before_grpc_port, before_h3_port = free_port(), free_port(), free_port()
            subprocess.run(
                [
                    args.before,
                    "-c",
                    "import sys; from pathlib import Path; sys.path.insert(0, sys.argv[1]); "
                    "import measure; measure.build_store(Path(sys.argv[2]), int(sys.argv[3]))",
                    str(HERE),
                    str(root / "before"),
                    str(args.rows),
                ],
                check=True,
                cwd=root,
            )
            # cwd=root: `-c` and `-m` put the working directory first on sys.path, and it must not hold a brainy
            procs.append(
                subprocess.Popen(
                    [
                        *on_server,
                        args.before,
                        "-m",
                        "brainy.cli",
                        "serve",
                        "--listen",
                        f"127.0.0.1:{before_port}",
                        "--listen",
                        f"127.0.0.1:{before_grpc_port},grpc",
                        "--listen",
                        f"127.0.0.1:{before_h3_port},h3",
                        "--tls-cert",
                        str(cert),
                        "--tls-key",
                        str(key),
                        "--brain",
                        f"main={root / 'before' / 'store'}",
                        "--keys",
                        str(keys),
                    ],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    cwd=root,
                )
            )
        if load_cores:  # this process is the Python client where h2load is not used: it loads from the other core
            os.sched_setaffinity(0, load_cores)
        try:
            for p in (
                (port, floor_port, h2_floor_port, grpc_port, grpc_floor_port)
                + ((grpcio_port,) if args.grpcio else ())
                + ((before_port, before_grpc_port) if args.before else ())
            ):
                wait_ready(p)
            session = mcp_session(port)
            cells = build_cells(
                port, floor_port, h2_floor_port, grpc_port, grpc_floor_port, grpcio_port, h3_port, session, args.grpcio
            )
            if args.before:
                cells = with_before(cells, {port: before_port, grpc_port: before_grpc_port})
            # which process serves each port: its CPU per request is read beside each cell's figures
            pids = {
                port: procs[0].pid,
                grpc_port: procs[0].pid,
                h3_port: procs[0].pid,
                floor_port: procs[1].pid,
                h2_floor_port: procs[2].pid,
                grpc_floor_port: procs[3].pid,
            }
            if args.grpcio:
                pids[grpcio_port] = procs[4].pid
            if args.before:
                pids[before_port] = pids[before_grpc_port] = procs[-1].pid
            run_cells(cells, args, use_h2load, load_cores, root, pids)
            run_pipelined_and_feed(port, cells, args)
        finally:
            for proc in procs:
                proc.terminate()
                proc.wait(timeout=15)


@dataclass
class Cell:
    """One row of the table: what is asked of which port, by which client, judged against which floor."""

    name: str
    port: int
    kind: str  # the Python client's kind: h1, h2, grpc, h3, ws
    request: Any  # the Python client's request
    floor: str  # the name of the cell it is judged against (itself for a floor)
    load: Load | None = None  # how h2load sends it; None: only the Python client can (h3, the WebSocket)


FIND_PAGE = json.dumps({"limit": 1000, "type": "thing"}).encode()


def build_cells(
    port: int,
    floor_port: int,
    h2_floor_port: int,
    grpc_port: int,
    grpc_floor_port: int,
    grpcio_port: int,
    h3_port: int,
    session: str,
    grpcio: bool,
) -> list[Cell]:
    auth = f"authorization: Bearer {KEY}"
    base = f"http://127.0.0.1:{port}"
    msgpack = "accept: application/msgpack"

    def h1(path: str, *headers: str, body: bytes | None = None) -> Load:
        return Load(base + path, ["--h1"], [auth, *headers], body)

    def h2(path: str, *headers: str, body: bytes | None = None, at: str = base) -> Load:
        return Load(at + path, [], [auth, *headers], body)

    def grpc(at: int, rpc: str, brain: str = "", id_: str = "") -> Load:
        headers, message = grpc_call(rpc, brain, id_)
        return Load(
            f"http://127.0.0.1:{at}/brainy.v1.Brainy/{rpc}",
            [],
            ["content-type: application/grpc", "te: trailers", auth],
            message,
        )

    mcp_get = mcp_call(session, "brainy_get", {"id": "row-7"})
    mcp_counts = mcp_call(session, "brainy_counts", {})
    mcp_headers = [
        f"{k}: {v}" for k, v in {**MCP_JSON, "mcp-session-id": session, "mcp-protocol-version": "2025-06-18"}.items()
    ]
    find_json = "content-type: application/json"
    cells = [
        Cell(
            "floor h1", floor_port, "h1", h1_get("/"), "floor h1", Load(f"http://127.0.0.1:{floor_port}/", ["--h1"], [])
        ),
        Cell(
            "floor h2", h2_floor_port, "h2", h2_get("/"), "floor h2", Load(f"http://127.0.0.1:{h2_floor_port}/", [], [])
        ),
        Cell(
            "get h1 json", port, "h1", h1_get("/v1/brains/main/get/row-7"), "floor h1", h1("/v1/brains/main/get/row-7")
        ),
        Cell(
            "get h1 msgpack",
            port,
            "h1",
            h1_get("/v1/brains/main/get/row-7", "application/msgpack"),
            "floor h1",
            h1("/v1/brains/main/get/row-7", msgpack),
        ),
        Cell("get h2", port, "h2", h2_get("/v1/brains/main/get/row-7"), "floor h1", h2("/v1/brains/main/get/row-7")),
        Cell(
            "get h2 vs h2 floor",
            port,
            "h2",
            h2_get("/v1/brains/main/get/row-7"),
            "floor h2",
            h2("/v1/brains/main/get/row-7"),
        ),
        # h2load speaks no h3 here: h3 is judged against h2 loaded by the same (Python) client
        Cell("get h2 python", port, "h2", h2_get("/v1/brains/main/get/row-7"), "get h2 python"),
        Cell("get h3", h3_port, "h3", h2_get("/v1/brains/main/get/row-7", b"https"), "get h2 python"),
        Cell("counts h1 json", port, "h1", h1_get("/v1/brains/main/counts"), "floor h1", h1("/v1/brains/main/counts")),
        Cell("counts h2", port, "h2", h2_get("/v1/brains/main/counts"), "floor h1", h2("/v1/brains/main/counts")),
        Cell("counts h2 python", port, "h2", h2_get("/v1/brains/main/counts"), "counts h2 python"),
        Cell("counts h3", h3_port, "h3", h2_get("/v1/brains/main/counts", b"https"), "counts h2 python"),
        Cell(
            "find 1000 h1 json",
            port,
            "h1",
            h1_post("/v1/brains/main/find", FIND_PAGE, {"content-type": "application/json"}),
            "floor h1",
            h1("/v1/brains/main/find", find_json, body=FIND_PAGE),
        ),
        Cell(
            "find 1000 h1 msgpack",
            port,
            "h1",
            h1_post(
                "/v1/brains/main/find", FIND_PAGE, {"content-type": "application/json", "accept": "application/msgpack"}
            ),
            "floor h1",
            h1("/v1/brains/main/find", find_json, msgpack, body=FIND_PAGE),
        ),
        Cell("find 1000 h2", port, "h2", None, "floor h1", h2("/v1/brains/main/find", find_json, body=FIND_PAGE)),
        Cell(
            "get mcp", port, "h1", mcp_get, "floor h1", h1("/mcp", *mcp_headers, body=mcp_get.split(b"\r\n\r\n", 1)[1])
        ),
        Cell(
            "counts mcp",
            port,
            "h1",
            mcp_counts,
            "floor h1",
            h1("/mcp", *mcp_headers, body=mcp_counts.split(b"\r\n\r\n", 1)[1]),
        ),
        Cell("get ws", port, "ws", ws_frame({"ref": 1, "door": "get", "brain": "main", "id": "row-7"}), "floor h1"),
        Cell("counts ws", port, "ws", ws_frame({"ref": 1, "door": "counts", "brain": "main"}), "floor h1"),
        Cell("floor grpc", grpc_floor_port, "grpc", grpc_call("get"), "floor grpc", grpc(grpc_floor_port, "get")),
        Cell(
            "get grpc",
            grpc_port,
            "grpc",
            grpc_call("get", "main", "row-7"),
            "floor grpc",
            grpc(grpc_port, "get", "main", "row-7"),
        ),
        Cell(
            "counts grpc",
            grpc_port,
            "grpc",
            grpc_call("counts", "main"),
            "floor grpc",
            grpc(grpc_port, "counts", "main"),
        ),
    ]
    if grpcio:
        cells += [
            Cell(
                "get grpc/grpcio",
                grpcio_port,
                "grpc",
                grpc_call("get", "main", "row-7"),
                "floor grpc",
                grpc(grpcio_port, "get", "main", "row-7"),
            ),
            Cell(
                "counts grpc/grpcio",
                grpcio_port,
                "grpc",
                grpc_call("counts", "main"),
                "floor grpc",
                grpc(grpcio_port, "counts", "main"),
            ),
        ]
    return cells


def with_before(cells: list[Cell], ports: dict[int, int]) -> list[Cell]:
    """Each brainy cell on an h1/h2 or gRPC port followed by the same cell on the earlier tree's port (MCP's
    cells are left out: their session belongs to the first server)."""
    out: list[Cell] = []
    for cell in cells:
        out.append(cell)
        if cell.port in ports and "mcp" not in cell.name:
            to = ports[cell.port]
            load = (
                None
                if cell.load is None
                else Load(
                    cell.load.url.replace(f":{cell.port}/", f":{to}/", 1),
                    cell.load.flags,
                    cell.load.headers,
                    cell.load.body,
                )
            )
            out.append(
                Cell(
                    f"{cell.name} before",
                    to,
                    cell.kind,
                    cell.request,
                    cell.floor if cell.floor != cell.name else f"{cell.name} before",
                    load,
                )
            )
    return out


def chosen(only: str | None, name: str) -> bool:
    """Whether ``--only`` keeps the row ``name``: it names one of the comma-separated texts (no --only: all)."""
    return not only or any(text in name for text in only.split(","))


def run_cells(
    cells: list[Cell],
    args: argparse.Namespace,
    use_h2load: bool,
    load_cores: set[int] | None,
    tmp: Path,
    pids: dict[int, int] | None = None,
) -> None:
    def wanted(name: str) -> bool:
        return chosen(args.only, name)

    floors = {c.floor for c in cells if wanted(c.name)}
    cells = [c for c in cells if wanted(c.name) or c.name in floors]  # a row is printed beside its floor
    if not cells:
        return
    pids = pids or {}
    print(
        f"{'cell':<22}{'client':>8}{'c':>4}{'n':>7}{'p50 ms':>9}{'p90 ms':>9}{'p99 ms':>9}{'p99/50':>7}"
        f"{'req/s':>9}{'cpu us':>8}{'bytes':>8}"
    )
    for concurrency in (int(c) for c in args.concurrency.split(",")):
        floor: dict[str, tuple[float, float, float]] = {}
        for cell in cells:
            by_h2load = use_h2load and cell.load is not None
            if not by_h2load and cell.request is None:
                continue  # a cell only h2load sends
            total = args.requests if concurrency > 1 or by_h2load else max(1, args.requests // 4)
            page = cell.name.startswith("find 1000")
            if page:
                total = max(concurrency, total // 20)  # a 1,000-row page is ~200 KB: fewer of them
            if concurrency > 1:
                # one stall holds every request in flight: with fewer than 100 requests per connection it
                # alone is over 1% of them and sets p99 whatever the rest did
                total = max(total, (8 if page else 160) * concurrency)
            if by_h2load:
                measure = lambda: h2load_sweep(cell.load, concurrency, total, load_cores, tmp)  # noqa: E731
            else:
                measure = lambda: python_sweep(cell.port, cell.kind, cell.request, concurrency, total)  # noqa: E731
            lat, size, rate, cpu = quietest(with_cpu(measure, pids.get(cell.port)), args.repeat)
            p50 = nearest_rank(lat, 50)
            if cell.name == cell.floor:
                floor[cell.name] = (p50, rate, cpu)
            judged = floor.get(cell.floor)
            ratio = (
                ""
                if cell.name == cell.floor or judged is None
                else f"  {p50 / judged[0]:.2f}x p50, {rate / judged[1]:.2f}x req/s, {cpu / judged[2]:.2f}x cpu"
            )
            print(
                f"{cell.name:<22}{'h2load' if by_h2load else 'python':>8}{concurrency:>4}{len(lat):>7}{p50:>9.3f}"
                f"{nearest_rank(lat, 90):>9.3f}{nearest_rank(lat, 99):>9.3f}{nearest_rank(lat, 99) / p50:>7.1f}"
                f"{rate:>9.0f}{cpu:>8.1f}{size:>8}" + ratio,
                flush=True,
            )
        print()


def run_pipelined_and_feed(port: int, cells: list[Cell], args: argparse.Namespace) -> None:
    """The WebSocket pipelined 16 deep on one connection against h1 keep-alive at c=1 (both this script's own
    client, so the two are loaded alike), then the change feed's commit-to-frame latency."""

    def wanted(name: str) -> bool:
        return chosen(args.only, name)

    request_of = {c.name: c.request for c in cells}
    for door in ("get", "counts"):
        name = f"{door} ws pipelined 16"
        if not wanted(name):
            continue
        _, _, h1_rate = quietest(
            lambda: python_sweep(port, "h1", request_of[f"{door} h1 json"], 1, args.requests), args.repeat
        )
        lat, size, rate = quietest(
            lambda: uvloop.run(pipelined(port, request_of[f"{door} ws"], 16, args.requests * 4)), args.repeat
        )
        print(
            f"{name:<26}{rate:>9.0f} calls/s  {rate / h1_rate:.2f}x h1 keep-alive c=1 "
            f"({h1_rate:.0f} req/s, the same client); batch p50 {nearest_rank(lat, 50):.3f} ms"
        )
    if wanted("commit-to-frame"):
        gaps = uvloop.run(commit_to_frame(port, args.writes))
        print(
            f"{'commit-to-frame':<26}p50 {nearest_rank(gaps, 50):.3f} ms  p99 {nearest_rank(gaps, 99):.3f} ms"
            f"  ({len(gaps)} writes; from the write's acknowledgement)"
        )


if __name__ == "__main__":
    main()
