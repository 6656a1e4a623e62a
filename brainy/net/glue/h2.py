"""The asyncio side of HTTP/2: the sans-IO :class:`~brainy.net.h2.H2Connection`'s streams to the app, at once.

Every stream's request goes to the app as it completes, so many streams are
answered concurrently on one connection (``glue.streams``, shared with HTTP/3):
a door that answers at once (every read) is answered right in
``data_received``; one that waits (a write's fsync) runs as a task. Flow
control is the sans-IO object's: this only writes what it framed, once per
pass of the event loop, and closes once it has ended.
"""

from __future__ import annotations

from brainy.net.glue.session import Connection, FlushedOncePerPass, Session
from brainy.net.glue.streams import StreamAnswers
from brainy.net.h2 import H2Connection

# A read whose answers framed this much body is written at once, not at the end of the loop's pass: 64
# connections each holding a 1,000-row page (380 KB) until the pass ends kept 24 MB alive per pass, and
# the heap grown and given back each pass cost a page fault per 4 KB (perf/measure.py's find page over
# h2 at 64 connections)
WRITE_NOW_BYTES = 64 << 10


class H2Glue(FlushedOncePerPass, Session[H2Connection]):
    """An HTTP/2 connection's streams, each answered as soon as its door answers."""

    def __init__(self, protocol: Connection, conn: H2Connection) -> None:
        super().__init__(protocol, conn)
        self._answers = StreamAnswers(
            self.app, self.server, conn, self._written_later, lambda: self.transport.get_write_buffer_size()
        )
        self._start_flushing()
        self._flush()  # our SETTINGS lead

    def data_received(self, data: bytes, now: float) -> None:
        self._answers.received(self.conn.receive_data(data, now))
        if self.conn.framed_bytes >= WRITE_NOW_BYTES:
            self._flush()
        else:
            self._flush_soon()

    def _flush(self) -> None:
        """Write what the connection framed, its parts in one call: a large answer's DATA frames are views of
        its body, so the body is copied once, into the socket, not into frames and then into one buffer."""
        self._flush_due = False
        if self._lost:  # an answer that finished as the connection went has nowhere to go
            return
        large = self.conn.framed_bytes
        parts = self.conn.buffers_to_send()
        if len(parts) == 1:
            self.transport.write(parts[0])
        elif large:
            self.transport.writelines(parts)
        elif parts:
            self.transport.write(b"".join(parts))  # small frames: one copy is cheaper than a buffer each
        if self.conn.ended:
            self.protocol.linger()  # the GOAWAY reaches a peer still sending, not a reset

    def closing(self) -> None:
        self._flush()  # the GOAWAY of a deadline (idle, or our SETTINGS never acknowledged)

    def _written_later(self) -> None:
        self._flush_soon()
        self.conn.answered_at(self.protocol.now())
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
