"""Latency sweeps per transport: brainy against the floor, in the same run.

    python perf/measure.py [--requests N] [--rows N]

Builds a store, starts `brainy serve` on it and the floor server (bare uvloop +
httptools answering 30 bytes), then sweeps h1 JSON, h1 MessagePack, h2, MCP
(tools/call over streamable HTTP at /mcp, on HTTP/1.1, in one session) and the
WebSocket session (/v1/ws, one call in flight per connection) at concurrency 1,
8 and 64 over `get` and `counts`, and the floor the same way. Then the
WebSocket pipelined 16 deep on one connection against h1 keep-alive at c=1, and
the change feed's commit-to-frame latency: from a write's acknowledgement to its
frame's arrival on a held stream of the writer (negative when the frame came
first: the stream is woken by the commit, not by the answer).
Prints nearest-rank p50, p90 and p99 per row with the request count, requests
per second and answer bytes. Clients set TCP_NODELAY. Loopback only; every
loop is bounded by its request count.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import collections
import json
import math
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import h2.config
import h2.connection
import h2.events
import uvloop

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
            length = int(head[i + 15:head.find(b"\r\n", i) if head.find(b"\r\n", i) > 0 else None])
            self.need = end + 4 + length
        if len(self.buf) >= self.need:
            body = bytes(self.buf[self.need - (self.need - self.buf.find(b"\r\n\r\n") - 4):self.need])
            del self.buf[:self.need]
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
        transport.write((f"GET /v1/ws HTTP/1.1\r\nhost: 127.0.0.1\r\nupgrade: websocket\r\nconnection: Upgrade\r\n"
                         f"sec-websocket-version: 13\r\nsec-websocket-key: {nonce}\r\n"
                         f"authorization: Bearer {KEY}\r\n\r\n").encode())

    def data_received(self, data):
        self.buf += data
        if not self.ready.done():
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                return
            assert self.buf.startswith(b"HTTP/1.1 101"), bytes(self.buf[:200])
            del self.buf[:end + 4]
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
            body = bytes(self.buf[at:at + n])
            del self.buf[:at + n]
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


CLIENTS = {"h1": H1Client, "h2": H2Client, "ws": WsClient}


async def connect(port: int, kind: str):
    client = (await asyncio.get_running_loop().create_connection(CLIENTS[kind], "127.0.0.1", port))[1]
    if kind == "ws":
        await client.ready
    return client


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
        c.transport.close()
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
    client.transport.close()
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
            generation = int(self.buf[at + 4:end])
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
    stream.transport.close()
    writer.transport.close()
    return sorted(gaps)


def h1_get(path: str, accept: str = "application/json") -> bytes:
    return (f"GET {path} HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: Bearer {KEY}\r\n"
            f"accept: {accept}\r\n\r\n").encode()


def h2_get(path: str) -> list[tuple[bytes, bytes]]:
    return [(b":method", b"GET"), (b":path", path.encode()), (b":scheme", b"http"), (b":authority", b"127.0.0.1"),
            (b"authorization", f"Bearer {KEY}".encode())]


def h1_post(path: str, body: bytes, headers: dict[str, str]) -> bytes:
    head = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    return (f"POST {path} HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: Bearer {KEY}\r\n{head}"
            f"content-length: {len(body)}\r\n\r\n").encode() + body


MCP_JSON = {"content-type": "application/json", "accept": "application/json, text/event-stream"}


def mcp_session(port: int) -> str:
    """Open one MCP session (initialize, then notifications/initialized) and answer its Mcp-Session-Id."""
    init = json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "measure", "version": "1"}}})
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(h1_post("/mcp", init.encode(), MCP_JSON))
        head = sock.recv(65536).split(b"\r\n\r\n", 1)[0].decode("latin-1")
    session = next(line.split(":", 1)[1].strip() for line in head.split("\r\n")
                   if line.lower().startswith("mcp-session-id:"))
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(h1_post("/mcp", b'{"jsonrpc":"2.0","method":"notifications/initialized"}',
                             {**MCP_JSON, "mcp-session-id": session}))
        answer = sock.recv(65536)
        assert answer.startswith(b"HTTP/1.1 202"), f"notifications/initialized was not accepted: {answer!r}"
    return session


def mcp_call(session: str, tool: str, arguments: dict) -> bytes:
    """tools/call of one door as an MCP client sends it (brain left out: the key reaches one brain)."""
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                       "params": {"name": tool, "arguments": arguments}}).encode()
    return h1_post("/mcp", body, {**MCP_JSON, "mcp-session-id": session, "mcp-protocol-version": "2025-06-18"})


def build_store(root: Path, rows: int) -> Path:
    from brainy.engine import Brain, init_store

    path = root / "store"
    init_store(path)
    brain = Brain.open(path)
    for start in range(0, rows, 500):
        brain.addMany({"items": [{"type": "thing", "id": f"row-{i}", "data": f"row {i}",
                                  "metadata": {"i": i, "tags": ["a", "b"]}} for i in range(start, min(rows, start + 500))]})
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=640, help="requests per cell (default 640)")
    parser.add_argument("--rows", type=int, default=2000, help="entities in the store (default 2000)")
    parser.add_argument("--writes", type=int, default=200, help="writes timed to their frame (default 200)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        store = build_store(root, args.rows)
        keys = root / "keys"
        fd = os.open(keys, os.O_WRONLY | os.O_CREAT, 0o600)
        os.write(fd, f"{KEY} person:measure *\n{SERVICE} service:ops !\n".encode())
        os.close(fd)
        port, floor_port = free_port(), free_port()
        procs = [
            subprocess.Popen([sys.executable, "-m", "brainy.cli", "serve", "--listen", f"127.0.0.1:{port}",
                              "--brain", f"main={store}", "--keys", str(keys)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL),
            subprocess.Popen([sys.executable, str(HERE / "floor_server.py"), str(floor_port)],
                             stdout=subprocess.DEVNULL),
        ]
        try:
            wait_ready(port)
            wait_ready(floor_port)
            session = mcp_session(port)
            cells = [
                ("floor h1", floor_port, "h1", h1_get("/")),
                ("get h1 json", port, "h1", h1_get("/v1/brains/main/get/row-7")),
                ("get h1 msgpack", port, "h1", h1_get("/v1/brains/main/get/row-7", "application/msgpack")),
                ("get h2", port, "h2", h2_get("/v1/brains/main/get/row-7")),
                ("counts h1 json", port, "h1", h1_get("/v1/brains/main/counts")),
                ("counts h1 msgpack", port, "h1", h1_get("/v1/brains/main/counts", "application/msgpack")),
                ("counts h2", port, "h2", h2_get("/v1/brains/main/counts")),
                ("get mcp", port, "h1", mcp_call(session, "brainy_get", {"id": "row-7"})),
                ("counts mcp", port, "h1", mcp_call(session, "brainy_counts", {})),
                ("get ws", port, "ws", ws_frame({"ref": 1, "door": "get", "brain": "main", "id": "row-7"})),
                ("counts ws", port, "ws", ws_frame({"ref": 1, "door": "counts", "brain": "main"})),
            ]
            print(f"{'cell':<20}{'c':>4}{'n':>6}{'p50 ms':>9}{'p90 ms':>9}{'p99 ms':>9}{'req/s':>9}{'bytes':>7}")
            floor = {}
            for concurrency in (1, 8, 64):
                for name, p, kind, request in cells:
                    lat, size, rate = uvloop.run(sweep(p, kind, request, concurrency, args.requests))
                    p50 = nearest_rank(lat, 50)
                    if name == "floor h1":
                        floor[concurrency] = (p50, rate)
                    ratio = f"  {p50 / floor[concurrency][0]:.2f}x p50, {rate / floor[concurrency][1]:.2f}x req/s"
                    print(f"{name:<20}{concurrency:>4}{len(lat):>6}{p50:>9.3f}{nearest_rank(lat, 90):>9.3f}"
                          f"{nearest_rank(lat, 99):>9.3f}{rate:>9.0f}{size:>7}" + ("" if name == "floor h1" else ratio))
                print()
            for name, door in (("get", {"door": "get", "id": "row-7"}), ("counts", {"door": "counts"})):
                h1_lat, _, h1_rate = uvloop.run(sweep(port, "h1", h1_get(f"/v1/brains/main/{door['door']}"
                                                                        + (f"/{door['id']}" if "id" in door else "")),
                                                      1, args.requests))
                lat, size, rate = uvloop.run(pipelined(port, ws_frame({"ref": 1, "brain": "main", **door}), 16,
                                                       args.requests * 4))
                print(f"{name + ' ws pipelined 16':<26}{rate:>9.0f} calls/s  {rate / h1_rate:.2f}x h1 keep-alive c=1 "
                      f"({h1_rate:.0f} req/s); batch p50 {nearest_rank(lat, 50):.3f} ms")
            gaps = uvloop.run(commit_to_frame(port, args.writes))
            print(f"{'commit-to-frame':<26}p50 {nearest_rank(gaps, 50):.3f} ms  p99 {nearest_rank(gaps, 99):.3f} ms  "
                  f"({len(gaps)} writes; from the write's acknowledgement)")
        finally:
            for proc in procs:
                proc.terminate()
                proc.wait(timeout=15)


if __name__ == "__main__":
    main()
