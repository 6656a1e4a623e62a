"""Latency sweeps per transport: brainy against the floor, in the same run.

    python perf/measure.py [--requests N] [--rows N]

Builds a store, starts `brainy serve` on it (h1/h2, gRPC and h3 listeners, h3
with a self-signed certificate made here) and two floors: a bare uvloop +
httptools server answering 30 bytes, and a bare grpcio unary server answering
a 30-byte message (perf/grpcio_server.py). Then sweeps h1 JSON, h1 MessagePack,
h2, h3 and MCP (tools/call over streamable HTTP at /mcp, on HTTP/1.1, in one
session) against the first floor and gRPC against the second, at concurrency 1,
8 and 64 over `get` and `counts`. ``--grpcio`` adds brainy's gRPC service on
grpcio's own server, the candidate brainy's HTTP/2 layer was chosen over.
Prints nearest-rank p50, p90 and p99 per row with the request count, requests
per second and answer bytes. Clients set TCP_NODELAY. Loopback only; every
loop is bounded by its request count.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import aioquic.h3.connection
import aioquic.h3.events
import h2.config
import h2.connection
import h2.events
import ssl
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


CLIENTS = {"h1": H1Client, "h2": H2Client, "grpc": GrpcClient}


async def open_clients(port: int, kind: str, concurrency: int) -> list:
    loop = asyncio.get_running_loop()
    if kind != "h3":
        return [(await loop.create_connection(CLIENTS[kind], "127.0.0.1", port))[1] for _ in range(concurrency)]
    configuration = QuicConfiguration(is_client=True, alpn_protocols=["h3"], verify_mode=ssl.CERT_NONE)
    clients = []
    for _ in range(concurrency):
        _, client = await loop.create_datagram_endpoint(lambda: H3Client(QuicConnection(configuration=configuration)),
                                                        remote_addr=("127.0.0.1", port))
        client.connect(("127.0.0.1", port))
        await client.wait_connected()
        clients.append(client)
    return clients


async def sweep(port: int, kind: str, request, concurrency: int, total: int) -> tuple[list[float], int, float]:
    clients = await open_clients(port, kind, concurrency)
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
        if kind == "h3":
            c.close()  # CONNECTION_CLOSE; the endpoint closes with the loop
        else:
            c.transport.close()
    return sorted(latencies), size, len(latencies) / wall


def h1_get(path: str, accept: str = "application/json") -> bytes:
    return (f"GET {path} HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: Bearer {KEY}\r\n"
            f"accept: {accept}\r\n\r\n").encode()


def h2_get(path: str, scheme: bytes = b"http") -> list[tuple[bytes, bytes]]:
    return [(b":method", b"GET"), (b":path", path.encode()), (b":scheme", scheme), (b":authority", b"127.0.0.1"),
            (b"authorization", f"Bearer {KEY}".encode())]


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
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(1).not_valid_before(now).not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
            .sign(key, hashes.SHA256()))
    (root / "cert.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (root / "key.pem").write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                     serialization.NoEncryption()))
    return root / "cert.pem", root / "key.pem"


def grpc_call(rpc: str, brain: str = "", id_: str = "") -> tuple[list[tuple[bytes, bytes]], bytes]:
    """A unary call of brainy.v1.Brainy/<rpc>: DoorRequest{brain, id} (fields 1 and 2) as its one message."""
    fields = b"".join(bytes([n << 3 | 2, len(v)]) + v.encode() for n, v in ((1, brain), (2, id_)) if v)
    return ([(b":method", b"POST"), (b":path", f"/brainy.v1.Brainy/{rpc}".encode()), (b":scheme", b"http"),
             (b":authority", b"127.0.0.1"), (b"content-type", b"application/grpc"), (b"te", b"trailers"),
             (b"authorization", f"Bearer {KEY}".encode())], b"\x00" + len(fields).to_bytes(4, "big") + fields)


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
    parser.add_argument("--grpcio", action="store_true", help="also brainy's gRPC service on grpcio's own server")
    parser.add_argument("--only", help="only the cells whose name contains this")
    parser.add_argument("--repeat", type=int, default=1, help="sweeps per cell; the one with the lowest p50 is shown")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        store = build_store(root, args.rows)
        keys = root / "keys"
        fd = os.open(keys, os.O_WRONLY | os.O_CREAT, 0o600)
        os.write(fd, f"{KEY} person:measure *\n{SERVICE} service:ops !\n".encode())
        os.close(fd)
        port, floor_port, grpc_port, grpc_floor_port, grpcio_port, h3_port = (free_port() for _ in range(6))
        cert, key = self_signed(root)
        procs = [
            subprocess.Popen([sys.executable, "-m", "brainy.cli", "serve", "--listen", f"127.0.0.1:{port}",
                              "--listen", f"127.0.0.1:{grpc_port},grpc", "--listen", f"127.0.0.1:{h3_port},h3",
                              "--tls-cert", str(cert), "--tls-key", str(key),
                              "--brain", f"main={store}", "--keys", str(keys)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL),
            subprocess.Popen([sys.executable, str(HERE / "floor_server.py"), str(floor_port)],
                             stdout=subprocess.DEVNULL),
            subprocess.Popen([sys.executable, str(HERE / "grpcio_server.py"), "floor", str(grpc_floor_port)],
                             stdout=subprocess.DEVNULL),
        ]
        if args.grpcio:  # brainy's service on grpcio's own server: the candidate brainy's h2 layer was measured against
            procs.append(subprocess.Popen([sys.executable, str(HERE / "grpcio_server.py"), "brainy", str(grpcio_port),
                                           str(store), str(keys)], stdout=subprocess.DEVNULL))
        try:
            for p in (port, floor_port, grpc_port, grpc_floor_port) + ((grpcio_port,) if args.grpcio else ()):
                wait_ready(p)
            session = mcp_session(port)
            # (name, port, client, request, the floor it is judged against)
            cells = [
                ("floor h1", floor_port, "h1", h1_get("/"), "floor h1"),
                ("get h1 json", port, "h1", h1_get("/v1/brains/main/get/row-7"), "floor h1"),
                ("get h1 msgpack", port, "h1", h1_get("/v1/brains/main/get/row-7", "application/msgpack"), "floor h1"),
                ("get h2", port, "h2", h2_get("/v1/brains/main/get/row-7"), "floor h1"),
                ("get h3", h3_port, "h3", h2_get("/v1/brains/main/get/row-7", b"https"), "floor h1"),
                ("counts h1 json", port, "h1", h1_get("/v1/brains/main/counts"), "floor h1"),
                ("counts h1 msgpack", port, "h1", h1_get("/v1/brains/main/counts", "application/msgpack"), "floor h1"),
                ("counts h2", port, "h2", h2_get("/v1/brains/main/counts"), "floor h1"),
                ("counts h3", h3_port, "h3", h2_get("/v1/brains/main/counts", b"https"), "floor h1"),
                ("get mcp", port, "h1", mcp_call(session, "brainy_get", {"id": "row-7"}), "floor h1"),
                ("counts mcp", port, "h1", mcp_call(session, "brainy_counts", {}), "floor h1"),
                ("floor grpc", grpc_floor_port, "grpc", grpc_call("get"), "floor grpc"),
                ("get grpc", grpc_port, "grpc", grpc_call("get", "main", "row-7"), "floor grpc"),
                ("counts grpc", grpc_port, "grpc", grpc_call("counts", "main"), "floor grpc"),
            ]
            if args.grpcio:
                cells += [("get grpc/grpcio", grpcio_port, "grpc", grpc_call("get", "main", "row-7"), "floor grpc"),
                          ("counts grpc/grpcio", grpcio_port, "grpc", grpc_call("counts", "main"), "floor grpc")]
            cells = [c for c in cells if not args.only or args.only in c[0] or c[0] == c[4]]
            print(f"{'cell':<20}{'c':>4}{'n':>6}{'p50 ms':>9}{'p90 ms':>9}{'p99 ms':>9}{'req/s':>9}{'bytes':>7}")
            for concurrency in (1, 8, 64):
                floor = {}
                for name, p, kind, request, judged_by in cells:
                    # on a shared box, the quietest of --repeat sweeps (lowest p50) stands for the cell
                    runs = [uvloop.run(sweep(p, kind, request, concurrency, args.requests)) for _ in range(args.repeat)]
                    lat, size, rate = min(runs, key=lambda run: nearest_rank(run[0], 50))
                    p50 = nearest_rank(lat, 50)
                    if name == judged_by:
                        floor[name] = (p50, rate)
                    ratio = f"  {p50 / floor[judged_by][0]:.2f}x p50, {rate / floor[judged_by][1]:.2f}x req/s"
                    print(f"{name:<20}{concurrency:>4}{len(lat):>6}{p50:>9.3f}{nearest_rank(lat, 90):>9.3f}"
                          f"{nearest_rank(lat, 99):>9.3f}{rate:>9.0f}{size:>7}" + ("" if name == judged_by else ratio))
                print()
        finally:
            for proc in procs:
                proc.terminate()
                proc.wait(timeout=15)


if __name__ == "__main__":
    main()
