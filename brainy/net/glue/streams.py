"""The answers of one multiplexed connection (HTTP/2, HTTP/3): every stream's request to the app, at once.

Both transports' sans-IO objects hand out the same events (``RequestReceived``,
``RequestRefused``, ``StreamReset``, from ``brainy.net.h2``) and take answers
the same way (``send_response(stream_id, response)``), so this is written once
for both. A door that answers at once (every read) is answered right in the
caller's read; one that waits (a write's fsync) runs as a task, cancelled if the
peer resets its stream or the connection is lost, and ``written`` is called
once its answer is framed, for the glue to write it. A held change stream (a
``StreamingResponse``) is one stream kept open: its HEADERS now, its DATA as the
:class:`~brainy.net.glue.sse.FeedRunner` frames it, through :class:`StreamSink`.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from brainy.net.glue.seams import Handler, Serving
from brainy.net.glue.sse import BACKLOG_BYTES, Runner, run_feed
from brainy.net.h2 import H2Event, RequestReceived, RequestRefused, StreamReset
from brainy.net.http import Response, StreamingResponse, refusal_response


class Answers(Protocol):
    def send_response(self, stream_id: int, response: Response) -> None: ...

    def send_stream_head(self, stream_id: int, response: Response) -> None: ...

    def send_stream_data(self, stream_id: int, data: bytes) -> bool: ...

    def end_stream(self, stream_id: int) -> None: ...

    def stream_backlog(self, stream_id: int) -> int: ...


class StreamAnswers:
    """The streams of one connection ``conn``, answered by ``app`` as they complete."""

    def __init__(
        self,
        app: Handler,
        server: Serving,
        conn: Answers,
        written: Callable[[], None],
        transport_backlog: Callable[[], int] = lambda: 0,
    ) -> None:
        self.app = app
        self.server = server
        self.conn = conn
        self.written = written
        self.transport_backlog = transport_backlog  # bytes the connection's transport holds unwritten
        self.tasks: dict[int, asyncio.Future[Response]] = {}  # answers that wait, by stream
        self.feeds: dict[int, Runner] = {}  # held change streams, by stream

    def received(self, events: Iterable[H2Event]) -> None:
        handle, conn = self.app.handle, self.conn
        for event in events:
            if type(event) is RequestReceived:
                # an answer given at once is never in flight (nothing else runs meanwhile): only one that
                # waits counts (_answer)
                answered = handle(event.request)
                if type(answered) is Response:  # the common answer, framed here: one call fewer
                    conn.send_response(event.stream_id, answered)
                else:
                    self._answer(event.stream_id, answered)
            elif isinstance(event, RequestRefused):
                self.conn.send_response(event.stream_id, refusal_response(event.refusal))
            elif isinstance(event, StreamReset):
                task = self.tasks.get(event.stream_id)
                if task is not None:
                    task.cancel()
                feed = self.feeds.pop(event.stream_id, None)
                if feed is not None:
                    feed.stop()

    def _answer(self, stream_id: int, answered: Any) -> None:
        """The app's answer to a stream's request when it is not a plain :class:`Response`: a held stream,
        a Response subclass, or an awaitable run as a task."""
        if isinstance(answered, StreamingResponse):
            self.conn.send_stream_head(stream_id, answered)
            self.feeds[stream_id] = run_feed(answered.feed, StreamSink(self, stream_id))
            self.written()
            return
        if isinstance(answered, Response):
            self.conn.send_response(stream_id, answered)
            return
        self.server.in_flight += 1
        # the awaitable itself becomes the task, so one cancelled before it ran is closed, not left unawaited
        task = self.tasks[stream_id] = asyncio.ensure_future(answered)
        task.add_done_callback(functools.partial(self._answered_later, stream_id))

    def _answered_later(self, stream_id: int, task: asyncio.Future[Any]) -> None:
        self.server.in_flight -= 1
        self.tasks.pop(stream_id, None)
        if not task.cancelled():  # cancelled: the peer reset the stream, or the connection was lost
            answered = task.result()
            if isinstance(answered, StreamingResponse):  # a held stream relayed from its owner (brainy/net/edge.py)
                self._answer(stream_id, answered)
                return
            self.conn.send_response(stream_id, answered)
        self.written()

    def stop_feeds(self) -> None:
        """The polite end: every held change stream ends (its last frames sent, then END_STREAM)."""
        for feed in list(self.feeds.values()):
            feed.stop()

    def cancel_all(self) -> None:
        """The connection is gone: every answer that waits is cancelled, every held stream ends, and nothing
        framed later is written. The glue is let go (``written`` and ``transport_backlog`` were its): the
        connection's objects are freed by reference counting as it closes, not left as a cycle for the
        collector (glue.tcp's connection_lost says why that matters)."""
        for task in list(self.tasks.values()):
            task.cancel()
        self.stop_feeds()
        self.written = _nowhere
        self.transport_backlog = _empty


def _nowhere() -> None:
    """Where an answer framed after its connection went is written: nowhere."""


def _empty() -> int:
    return 0


class StreamSink:
    """A held change stream's bytes as the DATA of one stream, sent as its window allows."""

    def __init__(self, answers: StreamAnswers, stream_id: int) -> None:
        self.answers = answers
        self.stream_id = stream_id

    def write(self, data: bytes) -> None:
        self.answers.conn.send_stream_data(self.stream_id, data)
        self.answers.written()

    def end(self) -> None:
        self.answers.feeds.pop(self.stream_id, None)
        self.answers.conn.end_stream(self.stream_id)
        self.answers.written()

    @property
    def backlogged(self) -> bool:
        return (
            self.answers.conn.stream_backlog(self.stream_id) > BACKLOG_BYTES
            or self.answers.transport_backlog() > BACKLOG_BYTES
        )
