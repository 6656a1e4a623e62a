"""The asyncio side of HTTP/3: one UDP endpoint per h3 listener, its QUIC connections' requests to the app.

aioquic's asyncio layer drives the QUIC connection (datagrams in and out, its
timer); :class:`H3Protocol` hands each QUIC event to the sans-IO
:class:`~brainy.net.h3.H3Connection` and answers the requests it hands out as
the HTTP/2 glue does (``glue.streams``): at once for a door that does not wait
(every read), in a task for one that does, cancelled if the peer resets its stream.

Stopping (``brainy.net.server``): the endpoint stops accepting (a datagram
that would open a new connection is dropped), a connection with nothing in
flight is closed at once (CONNECTION_CLOSE, NO_ERROR), a busy one once its
last answer is sent; the endpoint closes when the server's drain is done.
Streams are never cut: to a client that would look exactly like a network
failure (seed 000, Transports 4).
"""

from __future__ import annotations

import asyncio
import functools
from typing import TYPE_CHECKING, Any

from aioquic.asyncio.protocol import QuicConnectionProtocol
from aioquic.asyncio.server import QuicServer
from aioquic.buffer import Buffer
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.events import ConnectionTerminated, QuicEvent
from aioquic.quic.packet import pull_quic_header

from brainy.net.glue.seams import Handler, Serving
from brainy.net.glue.streams import StreamAnswers
from brainy.net.h3 import ALPN, H3Connection
from brainy.net.quic_shim import connection_routes

if TYPE_CHECKING:
    from brainy.net.tls import Certificate


class H3Protocol(QuicConnectionProtocol):
    """One QUIC connection on an h3 listener."""

    def __init__(self, quic: Any, *, app: Handler, server: Serving, **kwargs: Any) -> None:
        super().__init__(quic, **kwargs)
        self.conn = H3Connection(quic)
        self._answers = StreamAnswers(app, server, self.conn, self._written_later)
        self._closing = False

    def quic_event_received(self, event: QuicEvent) -> None:
        # aioquic transmits once the datagram carrying this event is handled: an answer framed now goes with it
        self._answers.received(self.conn.quic_event_received(event))
        if isinstance(event, ConnectionTerminated):
            self._answers.cancel_all()

    def _written_later(self) -> None:
        self.transmit()
        if self._closing and not self.conn.busy:
            self.close()

    def close_if_idle(self) -> None:
        """The server is stopping: close now if nothing is in flight, else once the last answer is sent."""
        self._closing = True
        self._answers.stop_feeds()  # a held change stream ends, then the close follows its last frame
        if not self.conn.busy:
            self.close()


class H3Endpoint(QuicServer):
    """One h3 listener's UDP endpoint: aioquic's server, which can stop accepting without closing.

    It keeps its own references to what it was handed (the configuration, the socket's transport); which
    connection a datagram belongs to is aioquic's private record, read through ``brainy.net.quic_shim``."""

    accepting = True

    def __init__(self, *, configuration: QuicConfiguration, **kwargs: Any) -> None:
        super().__init__(configuration=configuration, **kwargs)
        self.configuration = configuration
        self.udp: asyncio.DatagramTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.udp = transport  # type: ignore[assignment]  # a datagram endpoint's transport
        super().connection_made(transport)

    def datagram_received(self, data: bytes | str, addr: Any) -> None:
        if not self.accepting and not self._known(bytes(data)):
            return  # it would open a new connection: the server is stopping
        super().datagram_received(data, addr)

    def _known(self, data: bytes) -> bool:
        try:
            header = pull_quic_header(Buffer(data=data), host_cid_length=self.configuration.connection_id_length)
        except ValueError:
            return False
        return header.destination_cid in connection_routes(self)

    def connections(self) -> list[H3Protocol]:
        return list({id(p): p for p in connection_routes(self).values()}.values())  # type: ignore[misc]

    @property
    def address(self) -> tuple[str, int]:
        assert self.udp is not None
        host, port = self.udp.get_extra_info("sockname")[:2]
        return host, port


async def open_endpoint(app: Handler, server: Serving, host: str, port: int, certificate: Certificate) -> H3Endpoint:
    """Bind one h3 listener: ALPN exactly h3, the host's certificate and key."""
    configuration = QuicConfiguration(is_client=False, alpn_protocols=list(ALPN))
    configuration.load_cert_chain(certificate.cert_path, certificate.key_path)
    create = functools.partial(H3Protocol, app=app, server=server)
    loop = asyncio.get_running_loop()
    _, endpoint = await loop.create_datagram_endpoint(
        lambda: H3Endpoint(configuration=configuration, create_protocol=create), local_addr=(host, port)
    )
    return endpoint
