"""MCP's streamable HTTP transport (2025-06-18 "Transports") at ``/mcp``, sans-IO: one request in, one reply out.

Sessions (``Mcp-Session-Id``), the ``MCP-Protocol-Version`` header, the Origin check
and the same Bearer keys as every other door; the glue (``brainy/net/app.py``) hands
in the method, the header fields, the body and ``now``, and frames the
:class:`HttpReply` it gets back.
"""

from __future__ import annotations

import collections
import ipaddress
import logging
import secrets
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import orjson

from brainy.auth.principal import Principal
from brainy.contract import refusals as R
from brainy.net import codecs
from brainy.net.http import refusal_headers
from brainy.net.mcp.jsonrpc import (
    ENVELOPE,
    MAX_MESSAGE,
    NO_REPLY,
    Message,
    ProtocolError,
    Reply,
    error_reply,
    parse_message,
    refusal_error,
    request_id,
)
from brainy.net.mcp.lifecycle import Input, Session, State
from brainy.net.mcp.server import PROTOCOL_VERSION, CallOutcome, McpServer, answered_by, finish

log = logging.getLogger("brainy.mcp")

MCP_PATH = "/mcp"
#: Sessions held at once; opening one more forgets the one idle longest. A session is a
#: few hundred bytes, so this bounds memory, not work.
MAX_SESSIONS = 1024
#: A session idle this long is gone (404, and the client initializes again).
IDLE_SECONDS = 3600.0


def _owner(principal: Principal) -> tuple[str, str, str | None]:
    """Who a session belongs to: another credential presenting its id finds no session there."""
    return principal.id, principal.kind, principal.token_brain


def _origin_host(origin: str) -> str | None:
    """The host an Origin names; None for one that does not parse as a URL (``http://[::1``, an unclosed
    bracket), which names no loopback host."""
    try:
        return urlsplit(origin.strip()).hostname
    except ValueError:
        return None


def _loopback(host: str | None) -> bool:
    if not host:
        return False
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@dataclass
class HttpReply:
    """One HTTP answer for the glue to frame: status, header fields, body."""

    status: int
    headers: list[tuple[bytes, bytes]]
    body: bytes


@dataclass
class _Exchange:
    """What one POST/DELETE learned on its way through, for the reply."""

    status: int = 200
    message: Message | None = None
    request_id: Any = None
    session_id: str | None = None  # set when this exchange opened a session


class StreamableHttp:
    """MCP's streamable HTTP transport (2025-06-18 "Transports") at ``/mcp``: one request, one reply.

    * ``POST`` carries one JSON-RPC message. A request is answered ``200 application/json``
      (this server never needs an SSE stream: it sends no requests or notifications of
      its own); a notification or a response is ``202`` with no body.
    * ``initialize`` without ``Mcp-Session-Id`` opens a session, and the answer carries its
      id. Every later message must carry it: none is ``400``, one that is gone (ended,
      idle past :data:`IDLE_SECONDS`, or opened by another credential) is ``404``.
    * ``DELETE`` with the session id ends the session.
    * ``GET`` is ``405``: this server offers no server-to-client stream.
    * ``MCP-Protocol-Version``, when sent, must be ``2025-06-18``; anything else is
      ``400 ProtocolVersionError`` with ``supported``.
    * The credential is checked first, exactly as on every other door (the same 401s).
    * A browser's ``Origin`` must be a loopback one (the specification's DNS-rebinding
      defence); a request with no ``Origin`` is not a browser's and is not asked.
    """

    def __init__(
        self,
        server: McpServer,
        authenticate: Callable[[Mapping[str, str]], Principal],
        max_sessions: int = MAX_SESSIONS,
        idle_seconds: float = IDLE_SECONDS,
    ) -> None:
        self.server = server
        self.authenticate = authenticate
        self.max_sessions = max_sessions
        self.idle_seconds = idle_seconds
        self.sessions: collections.OrderedDict[str, Session] = collections.OrderedDict()  # least recent first
        self.resource_metadata: str | None = None  # named on every 401 when an authorization server is configured

    def handle(
        self, method: str, headers: Mapping[str, str], body: bytes, now: float
    ) -> HttpReply | Awaitable[HttpReply]:
        """The reply now (every read, every lifecycle message), or an awaitable of it (a write door)."""
        exchange = _Exchange()
        outcome = self.server.dispatcher.timed("server.mcp", lambda: self._serve(method, headers, body, now, exchange))
        if isinstance(outcome, Awaitable):  # the clock's answer is an Outcome now, or an awaitable of one later
            return self._reply_later(outcome, exchange)
        return self._reply(outcome, exchange)

    async def _reply_later(self, pending: Awaitable[CallOutcome], exchange: _Exchange) -> HttpReply:
        return self._reply(await pending, exchange)

    # -- the request ----------------------------------------------------------------------------

    def _serve(self, method: str, headers: Mapping[str, str], body: bytes, now: float, exchange: _Exchange) -> Reply:
        if method not in ("POST", "DELETE"):
            raise R.MethodNotAllowedError(
                f"{MCP_PATH} takes POST and DELETE; this server offers no server-sent stream, so GET is not served",
                allowed=["DELETE", "POST"],
            )
        origin = headers.get("origin")
        if origin is not None and not _loopback(_origin_host(origin)):
            raise R.ForbiddenError(
                f"the Origin {origin!r} is not a loopback origin; MCP over HTTP refuses "
                "other browsers' origins (DNS-rebinding defence)",
                reason="origin",
            )
        principal = self.authenticate(headers)
        version = headers.get("mcp-protocol-version")
        if version is not None and version.strip() != PROTOCOL_VERSION:
            raise R.ProtocolVersionError(
                f"MCP-Protocol-Version {version.strip()!r} is not served; this server speaks {PROTOCOL_VERSION} only",
                supported=PROTOCOL_VERSION,
            )
        session_id = headers.get("mcp-session-id")
        if method == "DELETE":
            session = self._session(session_id, principal, now)
            action, session.state = session.lookup(Input.CLOSE)
            del self.sessions[session.id]
            return NO_REPLY
        if len(body) > MAX_MESSAGE:
            raise R.PayloadTooLargeError(f"the body is over {MAX_MESSAGE} bytes", limit=MAX_MESSAGE)
        kind = (headers.get("content-type") or "").split(";", 1)[0].strip().lower()
        if kind and kind != "application/json" and not kind.endswith("+json"):
            raise R.UnsupportedMediaTypeError(f"{kind!r}: MCP messages are JSON", contentType=kind)
        doc = codecs.loads_json(body)
        exchange.request_id = request_id(doc)  # a string or an integer, or null: safe to echo in the refusal
        codecs.check_nesting(doc, "json", ENVELOPE)
        try:
            message = parse_message(doc)
        except ProtocolError as exc:
            exchange.status = 400
            return error_reply(exchange.request_id, exc.error())
        exchange.message = message
        if message.kind != "request":
            exchange.status = 202  # a notification or a response: accepted, nothing to answer
        if session_id is None and message.input is Input.INITIALIZE:
            session = Session(secrets.token_urlsafe(24), _owner(principal), now)
            reply = self.server.handle(session, principal, message)
            if session.state is not State.AWAITING_INIT:  # initialize held: keep the session
                self._keep(session, now)
                exchange.session_id = session.id
            return reply
        session = self._session(session_id, principal, now)
        return self.server.handle(session, principal, message)

    # -- sessions -------------------------------------------------------------------------------

    def _keep(self, session: Session, now: float) -> None:
        self._expire(now)
        while len(self.sessions) >= self.max_sessions:
            gone, _ = self.sessions.popitem(last=False)  # the one idle longest
            log.info("MCP session %s forgotten: %d sessions held", gone[:8], self.max_sessions)
        self.sessions[session.id] = session

    def _expire(self, now: float) -> None:
        while self.sessions:
            oldest = next(iter(self.sessions.values()))
            if now - oldest.seen <= self.idle_seconds:
                return
            del self.sessions[oldest.id]

    def _session(self, session_id: str | None, principal: Principal, now: float) -> Session:
        if session_id is None or not session_id.strip():
            raise R.InvalidArgumentError(
                "Mcp-Session-Id: required on every message after initialize", field="Mcp-Session-Id", reason="missing"
            )
        session = self.sessions.get(session_id.strip())
        if session is not None and now - session.seen > self.idle_seconds:
            del self.sessions[session.id]
            session = None
        if session is None or session.owner != _owner(principal):
            # 2025-06-18: a session the server ended is 404, and the client initializes again.
            # Another credential's session is answered the same, so a session id probes nothing.
            raise R.UnknownDoorError(
                "no MCP session by that id here (it ended, or never began); "
                "send initialize without Mcp-Session-Id to open one",
                path=MCP_PATH,
            )
        session.seen = now
        self.sessions.move_to_end(session.id)
        return session

    # -- the reply ------------------------------------------------------------------------------

    def _reply(self, outcome: CallOutcome, exchange: _Exchange) -> HttpReply:
        headers = [(b"server-timing", b"brainy;dur=%.3f" % outcome.ms)]
        refusal = outcome.refusal
        if refusal is not None:
            headers += refusal_headers(refusal, self.resource_metadata)
            headers.append((b"content-type", b"application/json"))
            body = orjson.dumps(error_reply(exchange.request_id, refusal_error(refusal)))
            return HttpReply(refusal.status or 500, headers, body)
        node = answered_by(outcome.answer)
        if node:  # a tool called at the brain's owner elsewhere in the fleet (brainy/net/edge.py)
            headers.append((b"brainy-node", node.encode()))
        reply = finish(outcome, exchange.message)
        if exchange.session_id is not None:
            headers.append((b"mcp-session-id", exchange.session_id.encode("ascii")))
        if reply is NO_REPLY:
            return HttpReply(exchange.status, headers, b"")
        headers.append((b"content-type", b"application/json"))
        return HttpReply(exchange.status, headers, codecs.to_json(reply))
