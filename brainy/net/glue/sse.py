"""The asyncio side of the held change stream: one task per stream, draining the log into its sans-IO
:class:`~brainy.net.sse.ChangeStream` and writing what it framed through a transport's :class:`Sink`.

Transport-neutral: h1 (chunked) and h2 (one stream) each hand a sink; another
transport (h3) hands its own. The task wakes on a commit (the brain's
``on_durable``, from the thread that made it durable) or on the stream's own
deadline (the 2-second tick, the heartbeat), and drains the log either way, so
a wakeup that is lost (the brain was closed and reopened: a new handle, a new
listener list) costs at most one tick, never a frame (seed 001). Each drain
is the dispatcher's held feed's (``brainy.host.feeds.HeldFeed``): the brain's
handle looked up in the pool afresh, as a door's, for the same reason.

A peer that does not read holds the stream still: while the sink is
backlogged nothing is drained, and the log, not memory, holds what is owed.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Protocol

from brainy.contract import refusals as R
from brainy.net.sse import OpenedFeed

log = logging.getLogger("brainy.serve")

BACKLOG_BYTES = 1 << 20  # a sink holding more than this unwritten is backlogged
BACKLOG_PAUSE = 0.05  # seconds a relayed stream waits for a backlogged sink before looking again


class Sink(Protocol):
    """Where a stream's bytes go on one transport."""

    def write(self, data: bytes) -> None: ...

    def end(self) -> None: ...

    @property
    def backlogged(self) -> bool: ...


class Relayed(Protocol):
    """A held stream whose bytes come framed from elsewhere (the brain's owner in a fleet: brainy/net/edge.py):
    ``next`` answers what arrived, ``b""`` at its end."""

    async def next(self) -> bytes: ...

    def close(self) -> None: ...


class Runner(Protocol):
    def stop(self) -> None: ...


def run_feed(feed: object, sink: Sink) -> Runner:
    """The runner that holds a streaming answer's feed on ``sink``: this node's stream, or one relayed."""
    if isinstance(feed, OpenedFeed):
        return FeedRunner(feed, sink)
    return RelayRunner(feed, sink)  # type: ignore[arg-type]


class RelayRunner:
    """Holds one relayed stream on ``sink``: what the owner sends is written as it arrives (a backlogged sink is
    waited for, so a reader that does not read holds the owner's stream still); it ends with the owner's."""

    def __init__(self, relayed: Relayed, sink: Sink) -> None:
        self.relayed = relayed
        self.sink = sink
        self.task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        try:
            while data := await self.relayed.next():
                self.sink.write(data)
                while self.sink.backlogged:
                    await asyncio.sleep(BACKLOG_PAUSE)
        except asyncio.CancelledError:
            pass
        except OSError as exc:  # the owner went: the stream ends, and the client resumes from its last id
            log.info("a relayed change stream ended: %s", exc)
        finally:
            self.relayed.close()
            self.sink.end()

    def stop(self) -> None:
        self.task.cancel()


class FeedRunner:
    """Holds one opened stream on ``sink`` until it ends, the peer goes, or the server stops."""

    def __init__(self, opened: OpenedFeed, sink: Sink) -> None:
        self.opened = opened
        self.sink = sink
        self._loop = asyncio.get_running_loop()
        self._woken = asyncio.Event()
        self.task = self._loop.create_task(self._run())

    def _wake_threadsafe(self) -> None:
        """Called from whichever thread made a commit durable; never raises into the commit path."""
        try:
            self._loop.call_soon_threadsafe(self._woken.set)
        except RuntimeError:
            pass  # the loop is closed: the stream is gone with it

    async def _run(self) -> None:
        stream, feed, loop = self.opened.stream, self.opened.feed, self._loop
        stream.opened(loop.time())
        try:
            self._flush()
            if not stream.ended:
                feed.listen(self._wake_threadsafe)  # from the start: a commit after the catch-up wakes the stream
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
            feed.close()
            self._flush()
            self.sink.end()

    def _drain(self, now: float) -> None:
        stream = self.opened.stream
        try:
            commits = self.opened.feed.drain()  # a brain closed under it answers none: the next tick reads anew
        except R.Refusal as refusal:
            stream.refused(refusal)
            return
        except Exception:
            log.exception("the change stream of %s failed", self.opened.feed.brain)
            stream.refused(R.InternalError("the change stream failed", ref="change-stream"))
            return
        stream.commits_landed(commits, now)

    def _flush(self) -> None:
        data = self.opened.stream.data_to_send()
        if data:
            self.sink.write(data)

    def stop(self) -> None:
        """End the stream (the peer reset it, the connection went, the server stops)."""
        self.task.cancel()
