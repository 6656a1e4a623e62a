"""The asyncio side of HTTP/2: the sans-IO :class:`~brainy.net.h2.H2Connection`'s streams to the app, at once.

Every stream's request goes to the app as it completes, so many streams are
answered concurrently on one connection (``glue.streams``, shared with HTTP/3):
a door that answers at once (every read) is answered right in
``data_received``; one that waits (a write's fsync) runs as a task. Flow
control is the sans-IO object's: this only writes what it framed, once per
pass of the event loop, and closes once it has ended.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from brainy.net.glue.session import FlushedOncePerPass, Session
from brainy.net.glue.streams import StreamAnswers
from brainy.net.h2 import H2Connection

if TYPE_CHECKING:
    from brainy.net.glue.tcp import HttpProtocol


class H2Glue(FlushedOncePerPass, Session[H2Connection]):
    """An HTTP/2 connection's streams, each answered as soon as its door answers."""

    def __init__(self, protocol: "HttpProtocol", conn: H2Connection) -> None:
        super().__init__(protocol, conn)
        self._answers = StreamAnswers(self.app, self.server, conn, self._written_later,
                                      lambda: self.transport.get_write_buffer_size())
        self._start_flushing()
        self._flush()  # our SETTINGS lead

    def data_received(self, data: bytes, now: float) -> None:
        self._answers.received(self.conn.receive_data(data, now))
        self._flush_soon()

    def _written_later(self) -> None:
        self._flush_soon()
        self.protocol.arm()

    def close_if_idle(self) -> None:
        """The polite end: GOAWAY now, the streams in hand answered (a held change stream ends), then the close."""
        self.conn.close()
        self._answers.stop_feeds()
        self._flush_soon()

    def connection_lost(self) -> None:
        self._lost = True
        self._answers.cancel_all()

    @property
    def sending(self) -> bool:
        return self.conn.sending
