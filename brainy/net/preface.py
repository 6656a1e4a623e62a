"""The first bytes of an accepted connection, sans-IO: HTTP/2's prior-knowledge preface, or HTTP/1.1.

h1 and h2 share one cleartext port, so a connection is read here until its
first bytes either are the 24-byte HTTP/2 preface or depart from it; every
byte read is handed on, whole, to the protocol object chosen
(:class:`ProtocolChosen`). A connection that says nothing is held to the
request deadline like a request that trickles in (``brainy.net.deadlines``).
"""

from __future__ import annotations

from dataclasses import dataclass

from brainy.net.deadlines import IDLE_SECONDS, REQUEST_SECONDS, DeadlinePassed, Deadlines
from brainy.net.h2 import PREFACE as H2_PREFACE


@dataclass(frozen=True)
class ProtocolChosen:
    """The first bytes told the protocol: ``"h2"`` (they begin with the preface) or ``"h1"``."""

    protocol: str
    data: bytes  # every byte read so far, for the chosen protocol object to read from its start


class PrefaceReader:
    """The connection from its accept (``now``) until :meth:`receive_data` answers a choice."""

    def __init__(
        self, now: float, idle_seconds: float = IDLE_SECONDS, request_seconds: float = REQUEST_SECONDS
    ) -> None:
        self._head = b""
        self._deadlines = Deadlines(now, idle_seconds, request_seconds)

    def receive_data(self, data: bytes, now: float) -> ProtocolChosen | None:
        """The choice, once the bytes so far decide it; None while they could still be either."""
        self._deadlines.heard(now, True)
        head = self._head = self._head + data
        if len(head) < len(H2_PREFACE) and H2_PREFACE.startswith(head):
            return None
        return ProtocolChosen("h2" if head.startswith(H2_PREFACE) else "h1", head)

    def next_deadline(self) -> float | None:
        """When :meth:`timer_fired` should next be called."""
        return self._deadlines.due(False, True)

    def timer_fired(self, now: float) -> DeadlinePassed | None:
        """The deadline passed by ``now`` (the caller closes the connection), or None."""
        return self._deadlines.passed(now, False, True)
