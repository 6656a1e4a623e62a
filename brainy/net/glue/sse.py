"""The asyncio side of the held change stream: one task per stream, draining the log into its sans-IO
:class:`~brainy.net.sse.ChangeStream` and writing what it framed through a transport's :class:`Sink`.

Transport-neutral: h1 (chunked) and h2 (one stream) each hand a sink; another
transport (h3) hands its own. The task wakes on a commit (the brain's
``on_durable``, from the thread that made it durable) or on the stream's own
deadline (the 2-second tick, the heartbeat), and drains the log either way, so
a wakeup that is lost (the brain was closed and reopened: a new handle, a new
listener list) costs at most one tick, never a frame (seed 001). The brain's
handle is looked up in the pool at every drain for the same reason.

A peer that does not read holds the stream still: while the sink is
backlogged nothing is drained, and the log, not memory, holds what is owed.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Protocol

from brainy.contract import refusals as R
from brainy.net.sse import OpenedFeed

if TYPE_CHECKING:
    from brainy.engine import Brain

log = logging.getLogger("brainy.serve")

BACKLOG_BYTES = 1 << 20  # a sink holding more than this unwritten is backlogged


class Brains(Protocol):
    """What a held stream reads of the brain pool (``brainy.host.pool.Pool``): a brain's live handle by name."""

    def resolve(self, name: str, for_write: bool) -> "Brain": ...


class Sink(Protocol):
    """Where a stream's bytes go on one transport."""

    def write(self, data: bytes) -> None: ...

    def end(self) -> None: ...

    @property
    def backlogged(self) -> bool: ...


class FeedRunner:
    """Holds one opened stream on ``sink`` until it ends, the peer goes, or the server stops."""

    def __init__(self, feed: OpenedFeed, sink: Sink, pool: Brains) -> None:
        self.feed = feed
        self.sink = sink
        self.pool = pool
        self._loop = asyncio.get_running_loop()
        self._woken = asyncio.Event()
        self._handle: "Brain | None" = None
        self.task = self._loop.create_task(self._run())

    def _wake_threadsafe(self) -> None:
        """Called from whichever thread made a commit durable; never raises into the commit path."""
        try:
            self._loop.call_soon_threadsafe(self._woken.set)
        except RuntimeError:
            pass  # the loop is closed: the stream is gone with it

    def _brain(self) -> "Brain":
        handle = self.pool.resolve(self.feed.brain, False)
        if handle is not self._handle:
            self._unlisten()
            if self._wake_threadsafe not in handle.on_durable:  # a claimed writer inherits its reader's listeners
                handle.on_durable.append(self._wake_threadsafe)
            self._handle = handle
        return handle

    def _unlisten(self) -> None:
        if self._handle is not None:
            try:
                self._handle.on_durable.remove(self._wake_threadsafe)
            except ValueError:
                pass
            self._handle = None

    async def _run(self) -> None:
        stream, tail, loop = self.feed.stream, self.feed.tail, self._loop
        stream.opened(loop.time())
        try:
            self._flush()
            if not stream.ended:
                self._brain()  # listen from the start: a commit after the catch-up wakes the stream
            while not stream.ended:
                due = stream.next_deadline()
                assert due is not None
                try:
                    await asyncio.wait_for(self._woken.wait(), max(0.0, due - loop.time()))
                except TimeoutError:
                    pass
                woken = self._woken.is_set()
                self._woken.clear()
                now = loop.time()
                if (stream.timer_fired(now) or woken) and not self.sink.backlogged:
                    self._drain(now)
                self._flush()
        except asyncio.CancelledError:
            pass
        finally:
            self._unlisten()
            self._flush()
            self.sink.end()

    def _drain(self, now: float) -> None:
        stream = self.feed.stream
        try:
            commits, _ = self.feed.tail.drain(self._brain())
        except R.ShuttingDownError:
            commits = []  # closed between the lookup and the read: the next tick reads the new handle
        except R.Refusal as refusal:
            stream.refused(refusal)
            return
        except Exception:
            log.exception("the change stream of %s failed", self.feed.brain)
            stream.refused(R.InternalError("the change stream failed", ref="change-stream"))
            return
        stream.commits_landed(commits, now)

    def _flush(self) -> None:
        data = self.feed.stream.data_to_send()
        if data:
            self.sink.write(data)

    def stop(self) -> None:
        """End the stream (the peer reset it, the connection went, the server stops)."""
        self.task.cancel()
