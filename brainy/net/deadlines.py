"""A connection's two deadlines, sans-IO: idle, and a request's arrival. Handed ``now``; never reads a clock.

A connection that sends nothing for ``idle_seconds`` with nothing in flight (counted
from its last bytes, or from its last answer when that one waited) is closed, and so
is one whose request has been arriving for longer than ``request_seconds``: a client
that trickles a request a byte at a time (slowloris) would otherwise hold a
connection for ever, since every byte would restart the idle clock. A connection with a request in hand (being answered,
or queued behind one) is never closed by either.

Each protocol object (the preface reader, h1, h2) keeps one :class:`Deadlines`
and says when it is busy and when a request is arriving; it exposes
``next_deadline()`` and ``timer_fired(now)``, and the asyncio glue keeps one
timer at the deadline it reports (aioquic's ``get_timer``/``handle_timer``).

A third deadline is a connection's last: once its last answer is written and its
writing side shut, it is :class:`Lingering`, reading and discarding until the peer
closes its side, for at most :data:`LINGER_SECONDS`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

IDLE_SECONDS = 75.0  # a keep-alive connection with nothing to say
REQUEST_SECONDS = 30.0  # from a request's first byte to its last
# from a connection's last answer to the peer closing its side: RFC 6455 7.1.1 has the server close first and
# the client then (the websockets library waits as long for it: close_timeout=10 s); an HTTP/1.1 peer whose
# request was refused mid-body may still be sending it
LINGER_SECONDS = 10.0


@dataclass(frozen=True)
class DeadlinePassed:
    """The connection outlived a deadline: close it. ``reason`` is ``"idle"``, ``"request"`` or ``"linger"``."""

    reason: str
    seconds: float


class Timed(Protocol):
    """What the glue's one timer asks of the sans-IO object in charge of a connection."""

    def next_deadline(self) -> float | None:
        """When to call :meth:`timer_fired` next (on the clock ``now`` comes from); None: no deadline runs."""

    def timer_fired(self, now: float) -> DeadlinePassed | None:
        """The deadline passed by ``now`` (close the connection), or None (ask :meth:`next_deadline` again)."""


class Deadlines:
    """The two clocks of one connection; its protocol object says when it is busy and when a request arrives."""

    def __init__(
        self, now: float, idle_seconds: float = IDLE_SECONDS, request_seconds: float = REQUEST_SECONDS
    ) -> None:
        self.idle_seconds = idle_seconds
        self.request_seconds = request_seconds
        self.last_data = now  # the last bytes heard
        self.request_began = now  # the first bytes of the request now arriving (or the accept)

    def heard(self, now: float, starts_request: bool) -> None:
        """Bytes arrived at ``now``; ``starts_request`` when no request was part-way in before them."""
        self.last_data = now
        if starts_request:
            self.request_began = now

    def quiet(self, now: float) -> None:
        """Nothing is in flight from ``now`` (an answer that waited was written then): the idle clock runs from
        then, not from the request's last bytes, or a request that took longer than the idle limit would leave its
        connection closed the moment its answer was out, under a client about to send the next."""
        if now > self.last_data:
            self.last_data = now

    def due(self, busy: bool, arriving: bool) -> float | None:
        """When the next deadline falls, or None while busy (nothing can expire until an answer is out)."""
        if busy:
            return None
        due = self.last_data + self.idle_seconds
        if arriving:
            return min(due, self.request_began + self.request_seconds)
        return due

    def passed(self, now: float, busy: bool, arriving: bool) -> DeadlinePassed | None:
        """The deadline passed by ``now``, if any."""
        if busy:
            return None
        if arriving and now - self.request_began >= self.request_seconds:
            return DeadlinePassed("request", self.request_seconds)
        if now - self.last_data >= self.idle_seconds:
            return DeadlinePassed("idle", self.idle_seconds)
        return None


class Lingering:
    """The one deadline of a connection whose last answer is written and whose writing side is shut (a
    half-close, from ``now``): the peer closes its side within ``seconds``, or the connection is dropped. What
    the peer sends meanwhile is read and discarded, never answered.

    Closing at once instead would leave the peer's bytes still arriving unread, and a kernel answers those
    with a reset, which can throw the answer away before the peer has read it: the refusal that said why,
    lost (RFC 9112 9.6; RFC 6455 7.1.1)."""

    def __init__(self, now: float, seconds: float = LINGER_SECONDS) -> None:
        self.seconds = seconds
        self.due = now + seconds

    def next_deadline(self) -> float | None:
        return self.due

    def timer_fired(self, now: float) -> DeadlinePassed | None:
        return DeadlinePassed("linger", self.seconds) if now >= self.due else None
