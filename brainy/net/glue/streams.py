"""The answers of one multiplexed connection (HTTP/2, HTTP/3): every stream's request to the app, at once.

Both transports' sans-IO objects hand out the same events (``RequestReceived``,
``RequestRefused``, ``StreamReset``, from ``brainy.net.h2``) and take answers
the same way (``send_response(stream_id, response)``), so this is written once
for both. A door that answers at once (every read) is answered right in the
caller's read; one that waits (a write's fsync) runs as a task, cancelled if the
peer resets its stream or the connection is lost, and ``written`` is called
once its answer is framed, for the glue to write it.
"""

from __future__ import annotations

import asyncio
import functools
from typing import TYPE_CHECKING, Any, Callable, Iterable, Protocol

from brainy.net.h2 import H2Event, RequestReceived, RequestRefused, StreamReset
from brainy.net.http import Request, Response, refusal_response

if TYPE_CHECKING:
    from brainy.net.server import Server


class Answers(Protocol):
    def send_response(self, stream_id: int, response: Response) -> None: ...


class StreamAnswers:
    """The streams of one connection ``conn``, answered by ``app`` as they complete."""

    def __init__(self, app: Any, server: "Server", conn: Answers, written: Callable[[], None]) -> None:
        self.app = app
        self.server = server
        self.conn = conn
        self.written = written
        self.tasks: dict[int, asyncio.Future[Response]] = {}  # answers that wait, by stream

    def received(self, events: Iterable[H2Event]) -> None:
        for event in events:
            if isinstance(event, RequestReceived):
                self._answer(event.stream_id, event.request)
            elif isinstance(event, RequestRefused):
                self.conn.send_response(event.stream_id, refusal_response(event.refusal))
            elif isinstance(event, StreamReset):
                task = self.tasks.get(event.stream_id)
                if task is not None:
                    task.cancel()

    def _answer(self, stream_id: int, request: Request) -> None:
        self.server.in_flight += 1
        answered = self.app.handle(request)
        if isinstance(answered, Response):
            self.server.in_flight -= 1
            self.conn.send_response(stream_id, answered)
            return
        # the awaitable itself becomes the task, so one cancelled before it ran is closed, not left unawaited
        task = self.tasks[stream_id] = asyncio.ensure_future(answered)
        task.add_done_callback(functools.partial(self._answered_later, stream_id))

    def _answered_later(self, stream_id: int, task: "asyncio.Future[Any]") -> None:
        self.server.in_flight -= 1
        self.tasks.pop(stream_id, None)
        if not task.cancelled():  # cancelled: the peer reset the stream, or the connection was lost
            self.conn.send_response(stream_id, task.result())
        self.written()

    def cancel_all(self) -> None:
        for task in list(self.tasks.values()):
            task.cancel()
