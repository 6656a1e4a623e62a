"""The changes door held open: the dispatcher's held answer, read a drain at a time through the pool.

A held feed (``GET P/changes`` as a Server-Sent Events stream, DOORS.md 10.2) is
opened by :meth:`brainy.host.dispatch.Dispatcher.hold` past the same gate as any
call, and every drain after that reads the brain as a door does: the brain is
entered in the pool (so the arbiter never closes the handle under a read), its
live handle looked up afresh (a brain closed and reopened, or evicted and
readmitted, is a new handle, and
the feed follows it, listening for its commits), and left. The transport only
frames what it drains (``brainy.net.sse``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from brainy.contract import refusals as R
from brainy.doors import feed as feed_
from brainy.doors.feed import Commit, LogTail


class Followed(feed_.Brain, Protocol):
    """What a held feed reads of a brain's handle: the feed's view of it, where its log is, and the listeners
    its commits wake (called from whichever thread made a commit durable)."""

    path: Any
    on_durable: list[Callable[[], None]]


class Pool(Protocol):
    """What a held feed asks of the pool (``brainy.host.pool.Pool``): a read's way in (not a door's arrival:
    a stream's tick does not keep its brain resident), and out."""

    def follow(self, name: str) -> Any: ...

    def held(self, entered: Any, for_write: bool) -> Followed: ...

    def left(self, entered: Any) -> None: ...


class HeldFeed:
    """One brain's commits after a commit boundary: the first catch-up (``commits``, ``more``), then
    :meth:`drain` for each later read."""

    def __init__(self, pool: Pool, brain: str, limit: int | None) -> None:
        self.pool = pool
        self.brain = brain
        self.limit = limit
        self.commits: list[Commit] = []
        self.more = False
        self.cursor = 0
        self.source = "commits"
        self._tail: LogTail | None = None
        self._wake: Callable[[], None] | None = None
        self._handle: Followed | None = None

    def open(self, since: Any, resume: str | None) -> None:
        """Resume at the commit boundary ``resume`` (a ``Last-Event-ID``) or ``since`` names, and read the first
        catch-up (at most ``limit`` frames, whole commits)."""
        entered = self.pool.follow(self.brain)
        try:
            handle = self.pool.held(entered, False)
            # the writer's head is its durable generation; an attach's is the last whole frame of the log
            head = handle.head if handle.role == "writer" else LogTail(handle.path, handle.head).landed(handle)

            def ops_of(generation: int) -> int | None:
                return handle.at().commit(generation)["ops"] if generation <= handle.head else None

            self._tail = LogTail(handle.path, feed_.resume_cursor(resume, since, head, ops_of))
            self.commits, self.more = self._tail.drain(handle, self.limit)
            self.cursor = self._tail.cursor
            self.source = "commits" if handle.role == "writer" else "log-file"
        finally:
            self.pool.left(entered)

    def listen(self, wake: Callable[[], None]) -> None:
        """Call ``wake`` when a commit on the brain is durable (from the thread that made it so; it must not
        raise); a later drain moves it to whichever handle then holds the brain."""
        self._wake = wake
        self._follow(self._current())

    def drain(self) -> list[Commit]:
        """The commits landed since the last drain, whole and in order; the log's damage refused by name. A
        brain closed between the lookup and the read answers nothing this time: the next drain reads it anew."""
        assert self._tail is not None, "open the feed first"
        entered = self.pool.follow(self.brain)
        try:
            handle = self._follow(self.pool.held(entered, False))
            commits, _ = self._tail.drain(handle)
        except R.ShuttingDownError:
            return []
        finally:
            self.pool.left(entered)
        return commits

    def close(self) -> None:
        """Stop listening: the stream has ended."""
        self._follow(None)
        self._wake = None

    def _current(self) -> Followed:
        entered = self.pool.follow(self.brain)
        try:
            return self.pool.held(entered, False)
        finally:
            self.pool.left(entered)

    def _follow(self, handle: Followed | None) -> Any:
        """Listen on ``handle`` (None: on nothing) instead of the handle listened on before."""
        if handle is self._handle:
            return handle
        if self._handle is not None and self._wake is not None:
            try:
                self._handle.on_durable.remove(self._wake)
            except ValueError:
                pass
        self._handle = handle
        if handle is not None and self._wake is not None and self._wake not in handle.on_durable:
            handle.on_durable.append(self._wake)  # a claimed writer inherits its reader's listeners
        return handle
