"""HTTP/3 (seed 000, Transports 4), spoken to a real ``brainy serve --listen HOST:PORT,h3`` by aioquic's own
HTTP/3 client, against a certificate issued by a throwaway CA made here with ``cryptography``.

The same doors, encodings, gate and dispatcher as h1/h2 (add/get, ``/contract.json``, MessagePack, a
refusal, ``/mcp``); ALPN exactly h3; Alt-Svc on the h1/h2 answers exactly when an h3 listener exists;
each certificate refusal at startup by name, binding nothing; a stop closes the connection with
NO_ERROR rather than cutting it.
"""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import json
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgpack
import pytest
from aioquic.asyncio.client import connect
from aioquic.asyncio.protocol import QuicConnectionProtocol
from aioquic.h3.connection import H3Connection
from aioquic.h3.events import DataReceived, HeadersReceived
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.events import ConnectionTerminated
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from server import HOST, H2Client, ServerProcess, curl, free_port, start_server, write_keys

from brainy.engine import init_store

TIMEOUT = 10.0


# -- a throwaway CA --------------------------------------------------------------------------------


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


def _pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


@dataclass(frozen=True)
class Pki:
    ca: Path  # the CA certificate a client trusts
    cert: Path  # the server's certificate, issued by the CA
    key: Path  # its key
    other_key: Path  # a key that belongs to no certificate here


def make_pki(directory: Path) -> Pki:
    """A CA and one server certificate (localhost, 127.0.0.1) it issued, as PEM files."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (
        x509.CertificateBuilder()
        .subject_name(_name("brainy test CA"))
        .issuer_name(_name("brainy test CA"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    leaf = (
        x509.CertificateBuilder()
        .subject_name(_name("localhost"))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address(HOST))]),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    directory.mkdir(parents=True, exist_ok=True)
    pki = Pki(directory / "ca.pem", directory / "cert.pem", directory / "key.pem", directory / "other-key.pem")
    pki.ca.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    pki.cert.write_bytes(leaf.public_bytes(serialization.Encoding.PEM))
    pki.key.write_bytes(_pem(key))
    pki.other_key.write_bytes(_pem(ec.generate_private_key(ec.SECP256R1())))
    return pki


# -- an HTTP/3 client ------------------------------------------------------------------------------


@dataclass
class H3Answer:
    status: int
    headers: dict[str, str]
    body: bytes

    @property
    def doc(self) -> Any:
        kind = self.headers.get("content-type", "")
        return msgpack.unpackb(self.body) if kind.startswith("application/msgpack") else json.loads(self.body)


class H3Client(QuicConnectionProtocol):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.h3 = H3Connection(self._quic)
        self.waiting: dict[int, tuple[asyncio.Future[H3Answer], list[Any], bytearray]] = {}
        self.terminated: ConnectionTerminated | None = None

    def quic_event_received(self, event: Any) -> None:
        if isinstance(event, ConnectionTerminated):
            self.terminated = event
        for h3_event in self.h3.handle_event(event):
            if h3_event.stream_id not in self.waiting:
                continue
            future, heads, body = self.waiting[h3_event.stream_id]
            if isinstance(h3_event, HeadersReceived):
                heads.extend(h3_event.headers)
            elif isinstance(h3_event, DataReceived):
                body.extend(h3_event.data)
            if h3_event.stream_ended:
                del self.waiting[h3_event.stream_id]
                fields = {k.decode(): v.decode() for k, v in heads}
                future.set_result(H3Answer(int(fields.pop(":status")), fields, bytes(body)))

    async def request(
        self,
        method: str,
        path: str,
        key: str | None = None,
        body: bytes = b"",
        headers: tuple[tuple[str, str], ...] = (),
    ) -> H3Answer:
        stream_id = self._quic.get_next_available_stream_id()
        fields = [
            (b":method", method.encode()),
            (b":scheme", b"https"),
            (b":authority", b"localhost"),
            (b":path", path.encode()),
        ] + [(k.encode(), v.encode()) for k, v in headers]
        if key:
            fields.append((b"authorization", f"Bearer {key}".encode()))
        future = asyncio.get_running_loop().create_future()
        self.waiting[stream_id] = (future, [], bytearray())
        self.h3.send_headers(stream_id, fields, end_stream=not body)
        if body:
            self.h3.send_data(stream_id, body, end_stream=True)
        self.transmit()
        return await asyncio.wait_for(future, TIMEOUT)


def client_configuration(pki: Pki, alpn: list[str]) -> QuicConfiguration:
    configuration = QuicConfiguration(is_client=True, alpn_protocols=alpn, server_name="localhost")
    configuration.load_verify_locations(str(pki.ca))
    return configuration


def run(coroutine: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coroutine, 30))


# -- fixtures --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, pki: Pki) -> Iterator[tuple[ServerProcess, int]]:
    """h1/h2 on a TCP port (tests/server.py's) and h3 on a UDP port, one server."""
    udp = _free_udp_port()
    with start_server(
        tmp_path_factory.mktemp("h3"),
        extra_args=("--listen", f"{HOST}:{udp},h3", "--tls-cert", str(pki.cert), "--tls-key", str(pki.key)),
    ) as server:
        yield server, udp


def _free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def _udp_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        try:
            sock.bind((HOST, port))
        except OSError:
            return False
        return True


def _tcp_refused(port: int) -> bool:
    try:
        with socket.create_connection((HOST, port), timeout=2.0):
            return False
    except OSError:
        return True


# -- the same doors --------------------------------------------------------------------------------


def test_h3_serves_the_same_doors_encodings_and_refusals(served: tuple[ServerProcess, int], pki: Pki) -> None:
    """Over HTTP/3: add then get, in JSON and MessagePack; GET /contract.json the same document h1 serves;
    a request with no key the same 401 UnauthenticatedError, the SSE change stream a page of frames
    and caught-up as on h1/h2, Server-Timing equal to _meta.ms; ALPN
    negotiated is h3; and no Alt-Svc on an h3 answer (it advertises h3 to the h1/h2 clients)."""
    server, udp = served

    async def main() -> dict[str, Any]:
        async with connect(
            HOST, udp, configuration=client_configuration(pki, ["h3"]), create_protocol=H3Client
        ) as client:
            assert isinstance(client, H3Client)
            got: dict[str, Any] = {"alpn": client._quic.tls.alpn_negotiated}
            got["add"] = await client.request(
                "POST",
                server.path("add"),
                server.key,
                json.dumps({"type": "person", "id": "alice", "data": "hello", "metadata": {"n": 1}}).encode(),
                (("content-type", "application/json"),),
            )
            got["get"] = await client.request("GET", server.path("get/alice"), server.key)
            got["get msgpack"] = await client.request(
                "GET", server.path("get/alice"), server.key, headers=(("accept", "application/msgpack"),)
            )
            got["contract"] = await client.request("GET", "/contract.json")
            got["no key"] = await client.request("GET", server.path("counts"))
            got["stream"] = await client.request(
                "GET",
                server.path("changes") + "?since=0&limit=5",
                server.key,
                headers=(("accept", "text/event-stream"),),
            )
            got["absent"] = await client.request(
                "POST",
                server.path("update"),
                server.key,
                json.dumps({"id": "nobody", "data": "x"}).encode(),
                (("content-type", "application/json"),),
            )
            return got

    got = run(main())
    assert got["alpn"] == "h3"
    assert got["add"].status == 200 and got["add"].doc["generation"] == 1, got["add"]
    entity = got["get"].doc["entity"]
    assert got["get"].status == 200 and entity["key"] == "alice" and entity["metadata"] == {"n": 1}
    assert got["get msgpack"].headers["content-type"] == "application/msgpack"
    assert got["get msgpack"].doc["entity"] == entity
    over_h1 = curl(server, "GET", "/contract.json")
    assert got["contract"].status == 200
    assert {**got["contract"].doc, "_meta": None} == {**over_h1.doc, "_meta": None}  # only the ms differ
    # the change stream over h3 as over h1/h2: a page of frames (limit ends it), then caught-up
    stream = got["stream"]
    assert stream.status == 200 and stream.headers["content-type"].startswith("text/event-stream")
    assert b"event: change" in stream.body and b'"kind":"entity"' in stream.body and b"event: caught-up" in stream.body
    for name, status, refusal in (("no key", 401, "UnauthenticatedError"), ("absent", 404, "EntityNotFoundError")):
        answer = got[name]
        assert answer.status == status and answer.doc["error"]["name"] == refusal, answer
        assert answer.headers["server-timing"] == f"brainy;dur={answer.doc['_meta']['ms']:.3f}"
    assert got["no key"].headers["www-authenticate"] == 'Bearer realm="brainy"'
    assert all("alt-svc" not in answer.headers for answer in got.values() if isinstance(answer, H3Answer))


def test_mcp_answers_over_h3(served: tuple[ServerProcess, int], pki: Pki) -> None:
    """/mcp over HTTP/3: initialize answers the protocol revision and a session, and a tools/call of
    brainy_counts in that session answers the brain's counts, on the same dispatcher."""
    server, udp = served
    headers = (("content-type", "application/json"), ("accept", "application/json, text/event-stream"))

    async def main() -> tuple[H3Answer, H3Answer]:
        async with connect(
            HOST, udp, configuration=client_configuration(pki, ["h3"]), create_protocol=H3Client
        ) as client:
            assert isinstance(client, H3Client)
            init = await client.request(
                "POST",
                "/mcp",
                server.key,
                json.dumps(
                    {
                        "jsonrpc": "2.0",
                        "id": 0,
                        "method": "initialize",
                        "params": {
                            "protocolVersion": "2025-06-18",
                            "capabilities": {},
                            "clientInfo": {"name": "h3-test", "version": "1"},
                        },
                    }
                ).encode(),
                headers,
            )
            session = (("mcp-session-id", init.headers["mcp-session-id"]), ("mcp-protocol-version", "2025-06-18"))
            await client.request(
                "POST",
                "/mcp",
                server.key,
                json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}).encode(),
                headers + session,
            )
            call = await client.request(
                "POST",
                "/mcp",
                server.key,
                json.dumps(
                    {
                        "jsonrpc": "2.0",
                        "id": 1,
                        "method": "tools/call",
                        "params": {"name": "brainy_counts", "arguments": {}},
                    }
                ).encode(),
                headers + session,
            )
            return init, call

    init, call = run(main())
    assert init.status == 200 and init.doc["result"]["protocolVersion"] == "2025-06-18", init
    assert call.status == 200, call
    result = call.doc["result"]
    assert not result.get("isError") and "entities" in result["structuredContent"], result


def test_alpn_offers_exactly_h3(served: tuple[ServerProcess, int], pki: Pki) -> None:
    """A client offering h3 among others negotiates h3; one offering only other protocols (h2, http/1.1,
    a draft h3) is refused in the handshake, never served something the listener does not speak."""
    _, udp = served

    async def negotiated(alpn: list[str]) -> str | None:
        try:
            async with connect(
                HOST, udp, configuration=client_configuration(pki, alpn), create_protocol=H3Client, wait_connected=True
            ) as client:
                return client._quic.tls.alpn_negotiated
        except ConnectionError:
            return None

    assert run(negotiated(["h3-29", "h3"])) == "h3"
    assert run(negotiated(["h2", "http/1.1"])) is None
    assert run(negotiated(["h3-29"])) is None


def test_alt_svc_is_advertised_on_h1_and_h2_exactly_when_an_h3_listener_exists(
    served: tuple[ServerProcess, int], tmp_path: Path
) -> None:
    """With an h3 listener, every h1 and h2 answer (a door, a refusal, /contract.json) carries
    ``alt-svc: h3=":<udp port>"; ma=86400``; a server with no h3 listener sends no Alt-Svc at all."""
    server, udp = served
    want = f'h3=":{udp}"; ma=86400'
    for path, key in (("/contract.json", None), (server.path("counts"), server.key), (server.path("counts"), None)):
        fields = (("authorization", f"Bearer {key}"),) if key else ()
        assert curl(server, "GET", path, headers=fields).headers.get("alt-svc") == want, path
        h2 = H2Client(server.address)
        try:
            assert h2.call("GET", path, None, fields).headers.get("alt-svc") == want, path
        finally:
            h2.close()
    with start_server(tmp_path / "plain") as plain:
        assert "alt-svc" not in curl(plain, "GET", "/contract.json").headers
        h2 = H2Client(plain.address)
        try:
            assert "alt-svc" not in h2.call("GET", "/contract.json", None, ()).headers
        finally:
            h2.close()


def test_a_stop_closes_h3_connections_with_no_error(tmp_path: Path, pki: Pki) -> None:
    """SIGTERM with an HTTP/3 client connected: the client hears CONNECTION_CLOSE with NO_ERROR (a polite
    end, not a cut), and the server exits 0."""
    udp = _free_udp_port()
    with start_server(
        tmp_path / "stop",
        extra_args=("--listen", f"{HOST}:{udp},h3", "--tls-cert", str(pki.cert), "--tls-key", str(pki.key)),
    ) as server:

        async def main() -> Any:
            async with connect(
                HOST, udp, configuration=client_configuration(pki, ["h3"]), create_protocol=H3Client
            ) as client:
                assert isinstance(client, H3Client)
                assert (await client.request("GET", server.path("counts"), server.key)).status == 200
                server.proc.send_signal(signal.SIGTERM)
                await asyncio.wait_for(client.wait_closed(), TIMEOUT)
                return client.terminated

        terminated = run(main())
        assert server.proc.wait(timeout=15) == 0
    assert terminated is not None and terminated.error_code == 0, terminated
    assert _udp_free(udp)


# -- the certificate refusals ----------------------------------------------------------------------


def _refusal_cases(pki: Pki, root: Path) -> list[tuple[str, tuple[str, ...]]]:
    root.mkdir(parents=True, exist_ok=True)
    no_cert = root / "no-cert.pem"
    no_cert.write_bytes(pki.key.read_bytes())  # a PEM, but its only block is a key
    no_key = root / "no-key.pem"
    no_key.write_bytes(pki.cert.read_bytes())  # a PEM, but its only block is a certificate
    directory = root / "a-directory.pem"
    directory.mkdir(exist_ok=True)
    return [
        ("CertificateFileMissingError", ("--tls-cert", str(root / "absent.pem"), "--tls-key", str(pki.key))),
        ("CertificateFileMissingError", ("--tls-cert", str(pki.cert), "--tls-key", str(root / "absent.pem"))),
        ("CertificateFileUnreadableError", ("--tls-cert", str(directory), "--tls-key", str(pki.key))),
        ("CertificateBlockMissingError", ("--tls-cert", str(no_cert), "--tls-key", str(pki.key))),
        ("PrivateKeyBlockMissingError", ("--tls-cert", str(pki.cert), "--tls-key", str(no_key))),
        ("KeyMismatchError", ("--tls-cert", str(pki.cert), "--tls-key", str(pki.other_key))),
        ("TlsFilesRequiredError", ("--tls-cert", str(pki.cert))),
        ("TlsFilesRequiredError", ()),
    ]


def test_each_certificate_refusal_stops_the_start_by_name_binding_nothing(tmp_path: Path, pki: Pki) -> None:
    """A missing file, an unreadable one, a PEM with no CERTIFICATE block, one with no PRIVATE KEY block, a key
    of another certificate, and an h3 listener without both files: each refuses the start by its own name
    (exit 2), and neither the TCP listener named beside it nor the h3 address is bound: no h2 fallback.
    The TLS files named with no h3 listener refuse as well (h1 and h2 are cleartext here)."""
    init_store(tmp_path / "notes")
    keys = write_keys(tmp_path / "keys", "notes")
    base = ("serve", "--brain", f"notes={tmp_path / 'notes'}", "--keys", str(keys))
    for name, flags in _refusal_cases(pki, tmp_path / "cases"):
        tcp, udp = free_port(), _free_udp_port()
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "brainy.cli",
                *base,
                "--listen",
                f"{HOST}:{tcp}",
                "--listen",
                f"{HOST}:{udp},h3",
                *flags,
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 2 and f"{name}: " in done.stderr, (name, flags, done.stderr)
        assert "listening on" not in done.stderr and _tcp_refused(tcp) and _udp_free(udp), (name, done.stderr)
    tcp = free_port()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "brainy.cli",
            *base,
            "--listen",
            f"{HOST}:{tcp}",
            "--tls-cert",
            str(pki.cert),
            "--tls-key",
            str(pki.key),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and "TlsFilesRequiredError: " in done.stderr and _tcp_refused(tcp), done.stderr
