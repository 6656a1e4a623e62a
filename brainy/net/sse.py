"""The held change stream, sans-IO: ``GET P/changes`` with ``Accept: text/event-stream`` (DOORS.md 10.2, 1.4).

Transport-neutral: a :class:`ChangeStream` is handed commits (read from the log
by ``brainy.doors.feed``) and time, and hands back the bytes of the event stream
(:meth:`ChangeStream.data_to_send`) for whichever transport carries it (h1
chunked, an h2 stream, an h3 stream); it never reads a file, a socket or a clock.

    change    := "id: " generation "." index LF  "event: change" LF  "data: " ChangeFrame LF LF
    caught-up := "event: caught-up" LF  "data: " {cursor, hasMore, brain, liveTail, meta: {ms}} LF LF
    heartbeat := ":" LF LF                         every HEARTBEAT_SECONDS an idle stream is silent
    refused   := "event: error" LF  "data: " {error} LF LF   the log refused mid-stream; the stream ends

Seed 001, "The change feed", whose laws these are: frames come whole commits at a
time; ``caught-up`` follows the first catch-up; then the stream is held, woken
by a commit and draining the log on its own tick (:data:`POLL_SECONDS`) either
way; a ``limit`` ends the stream after the page (no new commit past it). Resume
lands on a commit boundary (``brainy.doors.feed.resume_cursor``): ``Last-Event-ID``
wins over ``since``, and a ``since`` past the head refuses with the head.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from brainy.contract import refusals as R
from brainy.net import codecs

POLL_SECONDS = 2.0  # FEED_POLL_MS: the tick that drains the log whatever woke the stream
HEARTBEAT_SECONDS = 15.0  # a comment line down an idle stream
MEDIA_TYPE = "text/event-stream"
HEADERS = [
    (b"content-type", b"text/event-stream; charset=utf-8"),
    (b"cache-control", b"no-store"),
    (b"x-accel-buffering", b"no"),
]


def _event(name: str, document: Any, id_: str | None = None) -> bytes:
    head = b"id: " + id_.encode() + b"\n" if id_ is not None else b""
    return head + b"event: " + name.encode() + b"\ndata: " + codecs.to_json(document) + b"\n\n"


class ChangeStream:
    """One held stream of one brain's change frames from ``cursor`` on (``now``: when it opened)."""

    def __init__(
        self, brain: str, cursor: int, now: float, *, held: bool, source: str, limit: int | None = None
    ) -> None:
        self.brain = brain
        self.cursor = cursor
        self.limit = limit
        self.live_tail = {
            "held": held and limit is None,
            "pollMs": int(POLL_SECONDS * 1000),
            "heartbeatSeconds": int(HEARTBEAT_SECONDS),
            "source": source,
        }
        self.caught_up = False
        self.ended = False
        self._out: list[bytes] = []
        self._sent_at = now
        self._drained_at = now

    def opened(self, now: float) -> None:
        """The transport holds the stream from ``now``: the tick and the heartbeat count from here."""
        self._sent_at = self._drained_at = now

    def commits_landed(self, commits: list[list[dict[str, Any]]], now: float) -> None:
        """Queue the frames of whole commits, in order (each commit one generation, its ops in order)."""
        self._drained_at = now
        for commit in commits:
            for frame in commit:
                self._out.append(_event("change", frame, f"{frame['generation']}.{frame['index']}"))
            if commit:
                self.cursor = commit[0]["generation"]
        if commits:
            self._sent_at = now

    def catch_up_done(self, has_more: bool, ms: float, now: float) -> None:
        """The first catch-up is sent: ``caught-up``; the stream ends here unless it is held."""
        self.caught_up = True
        self._out.append(
            _event(
                "caught-up",
                {
                    "cursor": self.cursor,
                    "hasMore": has_more,
                    "brain": self.brain,
                    "liveTail": self.live_tail,
                    "meta": {"ms": ms},
                },
            )
        )
        self._sent_at = now
        if not self.live_tail["held"]:
            self.ended = True

    def refused(self, refusal: R.Refusal) -> None:
        """The log refused mid-stream (damage): say so by name and end; the stream never reads around it."""
        self._out.append(_event("error", {"error": refusal.to_wire()}))
        self.ended = True

    def next_deadline(self) -> float | None:
        """When :meth:`timer_fired` is next due: the next tick, or the heartbeat if it comes first."""
        if self.ended:
            return None
        return min(self._drained_at + POLL_SECONDS, self._sent_at + HEARTBEAT_SECONDS)

    def timer_fired(self, now: float) -> bool:
        """A heartbeat if one is due (queued); answers True when the log is due a drain (the tick)."""
        if self.ended:
            return False
        if now >= self._sent_at + HEARTBEAT_SECONDS:
            self._out.append(b":\n\n")
            self._sent_at = now
        return now >= self._drained_at + POLL_SECONDS

    def data_to_send(self) -> bytes:
        """The bytes framed so far, handed over once (no IO here: the caller writes them)."""
        out = b"".join(self._out)
        self._out = []
        return out


class Held(Protocol):
    """What a stream reads of the dispatcher's held feed (``brainy.host.feeds.HeldFeed``): its first catch-up,
    then a drain at a time, the brain's commits waking it between ticks."""

    brain: str
    cursor: int
    source: str
    limit: int | None
    commits: list[list[dict[str, Any]]]
    more: bool

    def drain(self) -> list[list[dict[str, Any]]]: ...

    def listen(self, wake: Callable[[], None]) -> None: ...

    def close(self) -> None: ...


@dataclass
class OpenedFeed:
    """A stream past its checks and its first catch-up: the glue holds it (``brainy.net.glue.sse``), draining
    ``feed`` and writing what ``stream`` frames."""

    stream: ChangeStream
    feed: Held


def opened(feed: Held, ms: float) -> OpenedFeed:
    """The stream of a held feed the dispatcher opened in ``ms``: its first catch-up framed, then ``caught-up``."""
    stream = ChangeStream(feed.brain, feed.cursor, 0.0, held=True, source=feed.source, limit=feed.limit)
    stream.commits_landed(feed.commits, 0.0)
    stream.catch_up_done(feed.more, ms, 0.0)
    return OpenedFeed(stream, feed)
