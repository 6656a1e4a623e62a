"""The asyncio side of HTTP/2: the sans-IO :class:`~brainy.net.h2.H2Connection`'s streams to the app, at once.

Every stream's request goes to the app as it completes, so many streams are
answered concurrently on one connection. A door that answers at once (every
read) is answered right in ``data_received``; one that waits (a write's fsync)
runs as a task, cancelled if the peer resets its stream or the connection is
lost. Flow control is the sans-IO object's: this only writes what it framed,
once per pass of the event loop, and closes once it has ended.
"""

from __future__ import annotations

import asyncio
import functools
from typing import TYPE_CHECKING, Any

from brainy.net.glue.session import Session
from brainy.net.glue.sse import BACKLOG_BYTES, FeedRunner
from brainy.net.h2 import H2Connection, RequestReceived, RequestRefused, StreamReset
from brainy.net.http import Request, Response, StreamingResponse, refusal_response

if TYPE_CHECKING:
    from brainy.net.glue.tcp import HttpProtocol


class H2Glue(Session[H2Connection]):
    """An HTTP/2 connection's streams, each answered as soon as its door answers."""

    def __init__(self, protocol: "HttpProtocol", conn: H2Connection) -> None:
        super().__init__(protocol, conn)
        self._tasks: dict[int, asyncio.Future[Response]] = {}  # answers that wait, by stream
        self._feeds: dict[int, FeedRunner] = {}  # held change streams, by stream
        self._loop = asyncio.get_running_loop()
        self._lost = False
        self._flush_due = False
        self._flush()  # our SETTINGS lead

    def data_received(self, data: bytes, now: float) -> None:
        for event in self.conn.receive_data(data, now):
            if isinstance(event, RequestReceived):
                self._answer(event.stream_id, event.request)
            elif isinstance(event, RequestRefused):
                self.conn.send_response(event.stream_id, refusal_response(event.refusal))
            elif isinstance(event, StreamReset):
                task = self._tasks.get(event.stream_id)
                if task is not None:
                    task.cancel()
                feed = self._feeds.pop(event.stream_id, None)
                if feed is not None:
                    feed.stop()
        self._flush_soon()

    def _answer(self, stream_id: int, request: Request) -> None:
        self.server.in_flight += 1
        answered = self.app.handle(request)
        if isinstance(answered, StreamingResponse):
            self.server.in_flight -= 1
            self.conn.send_stream_head(stream_id, answered)
            self._feeds[stream_id] = FeedRunner(answered.feed, _StreamSink(self, stream_id),  # type: ignore[arg-type]
                                                self.app.pool)
            self._flush_soon()
            return
        if isinstance(answered, Response):
            self.server.in_flight -= 1
            self.conn.send_response(stream_id, answered)
            return
        # the awaitable itself becomes the task, so one cancelled before it ran is closed, not left unawaited
        task = self._tasks[stream_id] = asyncio.ensure_future(answered)
        task.add_done_callback(functools.partial(self._answered_later, stream_id))

    def _answered_later(self, stream_id: int, task: "asyncio.Future[Any]") -> None:
        self.server.in_flight -= 1
        self._tasks.pop(stream_id, None)
        if task.cancelled():
            return  # the peer reset the stream, or the connection was lost
        self.conn.send_response(stream_id, task.result())
        self._flush_soon()
        self.protocol.arm()

    def _flush_soon(self) -> None:
        """Write what was framed once the loop has run every callback now ready. With many connections
        busy, writing as each answer is framed cost 10-15% more server CPU per request than writing after
        the loop's pass (perf/measure.py's h2 cells at 8 and 64 connections), and one write per pass
        also carries every frame of it together."""
        if not self._flush_due:
            self._flush_due = True
            self._loop.call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_due = False
        data = self.conn.data_to_send()
        if data and not self._lost:  # an answer that finished as the connection went has nowhere to go
            self.transport.write(data)
        if self.conn.ended:
            self.transport.close()

    def close_if_idle(self) -> None:
        """The polite end: GOAWAY now, the streams in hand answered (a held change stream ends), then the close."""
        self.conn.close()
        for feed in list(self._feeds.values()):
            feed.stop()
        self._flush_soon()

    def connection_lost(self) -> None:
        self._lost = True
        for task in list(self._tasks.values()):
            task.cancel()
        for feed in list(self._feeds.values()):
            feed.stop()


class _StreamSink:
    """A held change stream's bytes as the DATA of one HTTP/2 stream, sent as its window allows."""

    def __init__(self, glue: H2Glue, stream_id: int) -> None:
        self.glue = glue
        self.stream_id = stream_id

    def write(self, data: bytes) -> None:
        self.glue.conn.send_stream_data(self.stream_id, data)
        self.glue._flush_soon()

    def end(self) -> None:
        self.glue._feeds.pop(self.stream_id, None)
        self.glue.conn.end_stream(self.stream_id)
        self.glue._flush_soon()

    @property
    def backlogged(self) -> bool:
        return (self.glue.conn.stream_backlog(self.stream_id) > BACKLOG_BYTES
                or self.glue.transport.get_write_buffer_size() > BACKLOG_BYTES)

    @property
    def sending(self) -> bool:
        return self.conn.sending
