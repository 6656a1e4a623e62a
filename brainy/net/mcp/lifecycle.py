"""The MCP session lifecycle (2025-06-18 "Lifecycle"), as a table.

``STYLE.md`` 3: a mapping from (state, input) to (action, next state), every pair
written out; a test walks them all. The server looks an action up here, performs it,
and commits the next state once the action held.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any


class State(enum.Enum):
    """Where a session stands."""

    AWAITING_INIT = "awaiting-init"  # opened; nothing but initialize or ping is served
    INITIALIZING = "initializing"  # initialize answered; waiting for notifications/initialized
    READY = "ready"  # operating
    CLOSED = "closed"  # ended (HTTP DELETE, stdio end of input); nothing is served


class Input(enum.Enum):
    """What a client message is, as far as the lifecycle cares."""

    INITIALIZE = "initialize"  # the initialize request
    INITIALIZED = "initialized"  # the notifications/initialized notification
    PING = "ping"  # a ping request: answered in every open state
    REQUEST = "request"  # any other request
    NOTIFICATION = "notification"  # any other notification (cancelled, progress, ...)
    RESPONSE = "response"  # a response (this server sends no requests; it is dropped)
    CLOSE = "close"  # the transport ends the session


class Action(enum.Enum):
    """What a (state, input) pair does."""

    INITIALIZE = "initialize"  # answer initialize
    PONG = "pong"  # answer ping with {}
    SERVE = "serve"  # answer the request by its method
    ACCEPT = "accept"  # take the notification; nothing to answer
    DROP = "drop"  # ignore it; nothing to answer
    REFUSE_UNINITIALIZED = "refuse-uninitialized"  # a request before initialize: INVALID_REQUEST
    REFUSE_REINITIALIZE = "refuse-reinitialize"  # initialize twice on one session: INVALID_REQUEST
    REFUSE_CLOSED = "refuse-closed"  # anything on an ended session: INVALID_REQUEST
    CLOSE = "close"  # end the session


_S, _I, _A = State, Input, Action

#: (state, input) -> (action, next state), every pair written out; a test walks them all.
#: Lenient where the specification says SHOULD: a request after initialize was answered
#: but before notifications/initialized arrived is served (many clients pipeline them).
LIFECYCLE: Mapping[tuple[State, Input], tuple[Action, State]] = MappingProxyType(
    {
        (_S.AWAITING_INIT, _I.INITIALIZE): (_A.INITIALIZE, _S.INITIALIZING),
        (_S.AWAITING_INIT, _I.INITIALIZED): (_A.DROP, _S.AWAITING_INIT),
        (_S.AWAITING_INIT, _I.PING): (_A.PONG, _S.AWAITING_INIT),
        (_S.AWAITING_INIT, _I.REQUEST): (_A.REFUSE_UNINITIALIZED, _S.AWAITING_INIT),
        (_S.AWAITING_INIT, _I.NOTIFICATION): (_A.DROP, _S.AWAITING_INIT),
        (_S.AWAITING_INIT, _I.RESPONSE): (_A.DROP, _S.AWAITING_INIT),
        (_S.AWAITING_INIT, _I.CLOSE): (_A.CLOSE, _S.CLOSED),
        (_S.INITIALIZING, _I.INITIALIZE): (_A.REFUSE_REINITIALIZE, _S.INITIALIZING),
        (_S.INITIALIZING, _I.INITIALIZED): (_A.ACCEPT, _S.READY),
        (_S.INITIALIZING, _I.PING): (_A.PONG, _S.INITIALIZING),
        (_S.INITIALIZING, _I.REQUEST): (_A.SERVE, _S.INITIALIZING),
        (_S.INITIALIZING, _I.NOTIFICATION): (_A.ACCEPT, _S.INITIALIZING),
        (_S.INITIALIZING, _I.RESPONSE): (_A.DROP, _S.INITIALIZING),
        (_S.INITIALIZING, _I.CLOSE): (_A.CLOSE, _S.CLOSED),
        (_S.READY, _I.INITIALIZE): (_A.REFUSE_REINITIALIZE, _S.READY),
        (_S.READY, _I.INITIALIZED): (_A.ACCEPT, _S.READY),
        (_S.READY, _I.PING): (_A.PONG, _S.READY),
        (_S.READY, _I.REQUEST): (_A.SERVE, _S.READY),
        (_S.READY, _I.NOTIFICATION): (_A.ACCEPT, _S.READY),
        (_S.READY, _I.RESPONSE): (_A.DROP, _S.READY),
        (_S.READY, _I.CLOSE): (_A.CLOSE, _S.CLOSED),
        (_S.CLOSED, _I.INITIALIZE): (_A.REFUSE_CLOSED, _S.CLOSED),
        (_S.CLOSED, _I.INITIALIZED): (_A.DROP, _S.CLOSED),
        (_S.CLOSED, _I.PING): (_A.REFUSE_CLOSED, _S.CLOSED),
        (_S.CLOSED, _I.REQUEST): (_A.REFUSE_CLOSED, _S.CLOSED),
        (_S.CLOSED, _I.NOTIFICATION): (_A.DROP, _S.CLOSED),
        (_S.CLOSED, _I.RESPONSE): (_A.DROP, _S.CLOSED),
        (_S.CLOSED, _I.CLOSE): (_A.DROP, _S.CLOSED),
    }
)
_missing = [(s, i) for s in State for i in Input if (s, i) not in LIFECYCLE]
if _missing:  # pragma: no cover - the table above is whole; this keeps it so
    raise RuntimeError(f"the MCP lifecycle table has no entry for {_missing}")


def classify(kind: str, method: str | None) -> Input:
    """The lifecycle input a JSON-RPC message of ``kind`` ("request", "notification", "response") is."""
    if kind == "response":
        return Input.RESPONSE
    if kind == "notification":
        return Input.INITIALIZED if method == "notifications/initialized" else Input.NOTIFICATION
    if method == "initialize":
        return Input.INITIALIZE
    return Input.PING if method == "ping" else Input.REQUEST


@dataclass
class Session:
    """One MCP session: its id, the credential that opened it, where it stands in :data:`LIFECYCLE`."""

    id: str
    owner: tuple[str, str, str | None]
    seen: float = 0.0
    state: State = State.AWAITING_INIT
    client: Mapping[str, Any] | None = None  # the client's clientInfo, for the log

    def lookup(self, given: Input) -> tuple[Action, State]:
        """The table's (action, next state) for ``given``; the caller commits the state once the action held."""
        return LIFECYCLE[(self.state, given)]
