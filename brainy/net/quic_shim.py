"""Every reach into aioquic's private state, in one place: what HTTP/3 needs and aioquic's public API does not give.

aioquic (read at 1.7.2; ``setup.py`` allows ``>=1.2,<2``) is otherwise used through
its public API only (``brainy.net.h3``, ``brainy.net.glue.h3``). The three reaches below
have no public equivalent; each names the private attribute it reads and why, and
``tests/test_quic_shim.py`` pins every one against the installed aioquic, so an
upgrade that renames or reshapes one fails that test by name instead of the server.

* :func:`unacknowledged_bytes`: ``QuicConnection._streams`` and
  ``QuicStreamSender._buffer``. A held change stream's back-pressure needs the
  bytes a stream holds that the peer has not acknowledged; aioquic keeps them in
  the stream sender's buffer and surfaces neither the stream nor any measure of
  it (no delivery event, no accessor).
* :func:`sending_reset`: ``QuicConnection._streams`` and ``QuicStreamSender._reset_error_code``.
  A peer's STOP_SENDING (RFC 9000 3.5) resets a stream's sending part inside
  ``receive_datagram``, before any event of that datagram is handed out, and a
  write to it then raises; the ``StopSendingReceived`` event may come after the
  request it stops (the frames' order in the packet), so whether a stream can
  still be answered must be asked of the stream itself, which aioquic does not
  expose.
* :func:`connection_routes`: ``QuicServer._protocols``. A stopping endpoint
  must tell a datagram for a connection it serves from one that would open a new
  connection, and must reach every connection to close it; the server's map of
  connection ids to connection protocols is the only record of either (it follows
  connection-id issue and retirement, which the server wires up through the
  protocol's private handlers).

Nothing is imported at run time: aioquic's classes are named for types only (its server's module imports
asyncio, which the sans-IO ``brainy.net.h3`` must not).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from aioquic.asyncio.protocol import QuicConnectionProtocol
    from aioquic.asyncio.server import QuicServer
    from aioquic.quic.connection import QuicConnection


def unacknowledged_bytes(quic: QuicConnection, stream_id: int) -> int:
    """Bytes of ``stream_id`` that ``quic`` holds, queued or sent, until the peer acknowledges them; 0 for a
    stream it no longer (or never) had."""
    stream = quic._streams.get(stream_id)  # dict[int, QuicStream]: no public lookup of a stream
    sender = getattr(stream, "sender", None)
    # QuicStreamSender._buffer: a bytearray from the first unacknowledged offset to the last written one
    return len(getattr(sender, "_buffer", b""))


def sending_reset(quic: QuicConnection, stream_id: int) -> bool:
    """True when ``quic`` has reset the sending part of ``stream_id`` (the peer's STOP_SENDING, or a reset of
    its own), so nothing may be written on it; False for a stream it does not (or no longer) have."""
    stream = quic._streams.get(stream_id)  # dict[int, QuicStream]: no public lookup of a stream
    sender = getattr(stream, "sender", None)
    # QuicStreamSender._reset_error_code: the code of the reset, None until the sending part is reset
    return getattr(sender, "_reset_error_code", None) is not None


def connection_routes(server: QuicServer) -> Mapping[bytes, QuicConnectionProtocol]:
    """``server``'s live map of connection id (each one a connection answers to) to its connection protocol;
    read only, never changed here."""
    return server._protocols
