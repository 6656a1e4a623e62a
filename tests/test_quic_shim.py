"""``brainy.net.quic_shim`` pinned against the installed aioquic: every private attribute it reads exists and
means what the shim assumes, so an aioquic upgrade that changes one fails here, by name, not in a server.

A client and a server QUIC connection talk in memory (datagrams handed across, the clock a number), as
aioquic's own tests do; the server side is aioquic's asyncio ``QuicServer`` on a transport that only
records, for the connection-id map.
"""

from __future__ import annotations

import asyncio
import datetime
from pathlib import Path
from typing import Any

import aioquic
import pytest
from aioquic.asyncio.protocol import QuicConnectionProtocol
from aioquic.asyncio.server import QuicServer
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.connection import QuicConnection
from aioquic.quic.stream import QuicStreamSender
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from brainy.net.quic_shim import connection_routes, sending_reset, unacknowledged_bytes

ADDR = ("127.0.0.1", 4433)
VERSION = f"aioquic {aioquic.__version__}"


def _server_configuration(directory: Path) -> QuicConfiguration:
    """A server configuration with a throwaway self-signed certificate (the client does not verify it)."""
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .sign(key, hashes.SHA256())
    )
    (directory / "cert.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (directory / "key.pem").write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    configuration = QuicConfiguration(is_client=False, alpn_protocols=["h3"])
    configuration.load_cert_chain(directory / "cert.pem", directory / "key.pem")
    return configuration


def _client() -> QuicConnection:
    return QuicConnection(configuration=QuicConfiguration(is_client=True, alpn_protocols=["h3"], verify_mode=0))


def _connecting(directory: Path) -> tuple[QuicConnection, QuicConnection]:
    """A client that sent its first datagram, and the server connection that read it (the rest of the handshake
    is the caller's :func:`_pump`)."""
    client = _client()
    client.connect(ADDR, now=0.0)
    first = client.datagrams_to_send(0.0)[0][0]
    server = QuicConnection(
        configuration=_server_configuration(directory),
        original_destination_connection_id=client.original_destination_connection_id,
    )
    server.receive_datagram(first, ADDR, 0.0)
    return client, server


def _pump(client: QuicConnection, server: QuicConnection, now: float) -> float:
    """Hand datagrams across, firing each side's timers, until neither has anything to send; the clock after."""
    for _ in range(100):
        moved = 0
        for sender, receiver in ((client, server), (server, client)):
            for data, _ in sender.datagrams_to_send(now):
                receiver.receive_datagram(data, ADDR, now)
                moved += 1
        if not moved:
            timers = [t for t in (client.get_timer(), server.get_timer()) if t is not None]
            if not timers or min(timers) - now > 1.0:  # only idle timeouts are left
                return now
            now = max(now, min(timers))
            for side in (client, server):
                timer = side.get_timer()
                if timer is not None and timer <= now:
                    side.handle_timer(now)
    raise AssertionError("the in-memory connection never went quiet")


def test_unacknowledged_bytes_are_the_stream_senders_buffer_until_the_peer_acknowledges_them(tmp_path):
    """``QuicConnection._streams`` maps a stream id to its ``QuicStream``, whose ``sender._buffer`` holds what
    was written and not yet acknowledged: it counts a write at once, and drops to 0 once the peer's ACK came.
    A stream the connection does not have counts 0."""
    client, server = _connecting(tmp_path)
    now = _pump(client, server, 0.0)

    assert isinstance(client._streams, dict), VERSION
    assert unacknowledged_bytes(client, 0) == 0  # no such stream yet
    client.send_stream_data(0, b"x" * 5000)
    stream = client._streams[0]
    assert isinstance(stream.sender, QuicStreamSender), VERSION
    assert isinstance(stream.sender._buffer, bytearray), VERSION
    assert unacknowledged_bytes(client, 0) == 5000, VERSION  # written, not yet sent
    for data, _ in client.datagrams_to_send(now):  # sent, not yet acknowledged: still held
        server.receive_datagram(data, ADDR, now)
    assert unacknowledged_bytes(client, 0) == 5000, VERSION
    _pump(client, server, now)  # the server's ACK reaches the client
    assert unacknowledged_bytes(client, 0) == 0, VERSION


def test_sending_reset_is_the_stream_senders_reset_code_set_by_a_peers_stop_sending(tmp_path):
    """``QuicStreamSender._reset_error_code`` is None until the stream's sending part is reset, and the peer's
    STOP_SENDING sets it while the datagram is read (before its event is handed out); from then a write raises.
    A stream the connection does not have, or one still sending, is not reset."""
    client, server = _connecting(tmp_path)
    now = _pump(client, server, 0.0)
    assert sending_reset(server, 0) is False  # no such stream yet
    client.send_stream_data(0, b"request", end_stream=False)
    client.send_stream_data(4, b"request", end_stream=False)
    client.stop_stream(4, 0x10C)
    for data, _ in client.datagrams_to_send(now + 0.01):
        server.receive_datagram(data, ADDR, now + 0.01)
    assert server._streams[4].sender._reset_error_code == 0x10C, VERSION
    assert sending_reset(server, 4) is True and sending_reset(server, 0) is False, VERSION
    server.send_stream_data(0, b"answer")
    with pytest.raises(RuntimeError):  # what a write to it would do: what the shim's answer spares
        server.send_stream_data(4, b"answer")


def test_connection_routes_map_every_id_a_connection_answers_to_its_protocol(tmp_path):
    """``QuicServer._protocols`` is the server's own dict from connection id to connection protocol: after a
    client's first datagram it holds the id the client chose and the one the server issued, both to the one
    protocol made for that connection."""
    made: list[tuple[QuicConnection, QuicConnectionProtocol]] = []

    class Recording(asyncio.DatagramTransport):
        def sendto(self, data: Any, addr: Any = None) -> None:
            pass

    def create(quic: QuicConnection, **kwargs: Any) -> QuicConnectionProtocol:
        made.append((quic, QuicConnectionProtocol(quic, **kwargs)))
        return made[-1][1]

    async def exchange() -> None:
        server = QuicServer(configuration=_server_configuration(tmp_path), create_protocol=create)
        server.connection_made(Recording())
        routes = connection_routes(server)
        assert routes is server._protocols and isinstance(routes, dict) and not routes, VERSION
        client = _client()
        client.connect(ADDR, now=0.0)
        for data, _ in client.datagrams_to_send(0.0):
            server.datagram_received(data, ADDR)
        assert len(made) == 1, VERSION
        quic, protocol = made[0]
        assert routes[client.original_destination_connection_id] is protocol, VERSION
        assert routes[quic.host_cid] is protocol, VERSION
        assert set(routes.values()) == {protocol}, VERSION

    asyncio.run(exchange())
