"""The HTTP application: one request in, one response out, for every HTTP transport (h1, h2).

Sans-IO: it never touches a socket. A transport parses a request into a
:class:`Request`, awaits :meth:`App.handle`, and frames the :class:`Response`.
The whole handling (route, credential, body, gate, door) runs inside the
dispatcher's one clock, so ``Server-Timing`` and ``_meta.ms`` on an answer and
on every refusal, even a 401 or a 404, come from the same measurement.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import Any

from brainy import __version__
from brainy.auth.keys import KeyTable
from brainy.auth.principal import Principal
from brainy.auth.reading_door import ReadingDoor
from brainy.contract import doors as D
from brainy.contract import openapi
from brainy.contract import refusals as R
from brainy.contract.onboarding import agent_markdown, llms_txt
from brainy.doors.writes import VECTORS_AT  # where a write's vectors stand: packed before the body is decoded
from brainy.fleet.proxy import WRITE
from brainy.host.dispatch import Answer, Dispatcher, Outcome, check_brain_name
from brainy.host.feeds import HeldFeed
from brainy.host.host_doors import Host
from brainy.host.pool import Pool
from brainy.index import embedder
from brainy.net import codecs, sse, ws
from brainy.net import server_doors as S
from brainy.net.edge import Edge, EdgeDispatcher
from brainy.net.http import MAX_BODY, Passed, Request, Response, StreamingResponse, refusal_headers
from brainy.net.mcp import MCP_PATH, HttpReply, McpServer, StreamableHttp
from brainy.net.routes import Match, Router, query_document
from brainy.store.workers import LongLived


class App:
    def __init__(
        self,
        pool: Pool,
        keys: KeyTable,
        built_at: str,
        base_url: str = "",
        reading_door: ReadingDoor | None = None,
        host: Host | None = None,
        auth_server: str | None = None,
        sign_in: Any = None,
    ) -> None:
        self.pool = pool
        # --sign-in: the door that claims /auth/* and RFC 8414's document ahead of every route (seed 001)
        self.sign_in = sign_in
        self.keys = keys
        self.host = host if host is not None else Host(keys)
        self.auth_server = auth_server  # --auth-server: where a client gets a token (RFC 9728 discovery)
        self.router = Router(server=S.routes(configured=S.CONFIGURED_ONLY if auth_server else ()))
        self._routes: dict[tuple[str, str, str | None], Match] = {}  # see _route
        self.dispatcher = Dispatcher(pool, reading_door, self.host, keys, self.host.fleet)
        self.built_at = built_at
        self._contract = D.contract_envelope(__version__, built_at)
        self._openapi: str | None = None  # GET /openapi.json, rendered on first call
        self.started = time.monotonic()
        self.listeners: list[tuple[str, tuple[str, ...]]] = []  # (address, protocols), set by the server
        # --fleet: the edge that keeps a brain's request here or forwards it to the owner (brainy/net/edge.py);
        # ``calls`` is the dispatcher the door-calling transports (gRPC, WebSocket, MCP) are handed: in a fleet,
        # one that calls a door of a brain owned elsewhere at its owner
        self.fleet = self.host.fleet
        self.edge: Edge | None = None
        self.calls: Dispatcher = self.dispatcher
        self.splice: Callable[[Request, Callable[[Response | Passed], None]], bool] | None = None
        self.take: Callable[[Any, bytes, float, Callable[[Response | Passed], None]], Any] | None = None
        if self.fleet is not None:
            self.edge = Edge(
                self.fleet, self.dispatcher, self._route, self._handle, self.refusal_response, self._routes
            )
            self.splice = self.edge.splice
            self.take = self.edge.take
            self.calls = EdgeDispatcher(pool, reading_door, self.host, keys, self.fleet)
            self.calls.edge = self.edge
        # MCP over streamable HTTP: the same dispatcher, the same keys (brainy/net/mcp.py)
        self.mcp = StreamableHttp(McpServer(self.calls), self.calls.credential)
        self._base_url = base_url
        self.base_url = base_url

    @property
    def base_url(self) -> str:
        return self._base_url

    @base_url.setter
    def base_url(self, url: str) -> None:
        """Where this server answers (set once it listens); the RFC 9728 document's URL follows it."""
        self._base_url = url
        self.mcp.resource_metadata = f"{url}{OAUTH_PATH}" if self.auth_server else None

    def handle(self, request: Request) -> Response | Awaitable[Response]:
        """The response, now for a door that does not wait (every read), or an awaitable of it. In a fleet, a
        brain's request the edge forwards to its owner is answered by the owner."""
        if self.edge is not None:
            forwarded = self.edge.consider(request)
            if forwarded is not None:
                return forwarded
        return self._handle(request)

    def _handle(self, request: Request) -> Response | Awaitable[Response]:
        if self.sign_in is not None and self.sign_in.claims(request.path):
            return self._sign_in(request)
        if request.path == MCP_PATH:  # JSON-RPC in and out: the MCP transport frames its own replies
            reply = self.mcp.handle(request.method, request.headers, request.body, time.monotonic())
            return self._mcp_response(reply) if isinstance(reply, HttpReply) else self._mcp_later(reply)
        text: list[tuple[str, str]] = []  # a text answer (/agent, /llms.txt): (content type, body)
        outcome = self.dispatcher.timed(request.path, self._serve, request, text)
        if isinstance(outcome, Outcome):
            return self._respond(request, outcome, text)
        return self._respond_later(request, outcome, text)

    def upgrade(self, request: Request) -> tuple[Response, Principal | None]:
        """A request to switch protocols: ``(101 answer, principal)`` for a valid ``/v1/ws`` handshake by a
        caller whose credential passed, else ``(refusal, None)``. Everything is checked before the upgrade
        is granted (DOORS.md 10.2), so a caller that failed never holds a live socket."""
        granted: list[tuple[Principal, str]] = []
        outcome = self.dispatcher.timed(request.path, self._grant, request, granted)
        if isinstance(outcome, Outcome) and outcome.ok and granted:
            principal, accept = granted[0]
            headers = ws.switching_headers(accept)
            if self.edge is not None:  # a session whose one brain another node serves says which (docs/fleet.md)
                headers += self.edge.session_node(principal)
            return Response(101, headers, b""), principal
        assert isinstance(outcome, Outcome)  # the grant never waits
        return self._respond(request, outcome, []), None

    def _grant(self, request: Request, granted: list[tuple[Principal, str]]) -> dict[str, Any]:
        match = self.router.match(request.method, request.path, request.headers.get("accept"))
        if match.server != "server.ws":
            raise R.MalformedRequestError(f"{request.path} does not switch protocols", reason="upgrade")
        principal = self.calls.credential(request.headers)  # a WebSocket's calls are door calls
        granted.append((principal, ws.check_handshake(request.method, request.headers)))
        return {}

    def refusal_response(self, request: Request, refusal: R.Refusal) -> Response:
        """``refusal`` as this app answers one, for a refusal made outside a door's call (the fleet's edge)."""
        return self._respond(request, Outcome("", 0.0, None, refusal), [])

    async def _respond_later(
        self, request: Request, pending: Awaitable[Outcome], text: list[tuple[str, str]]
    ) -> Response:
        return self._respond(request, await pending, text)

    async def _sign_in(self, request: Request) -> Response:
        """The sign-in's answer, worked out on its own thread: its records are a brainy store whose writes fsync,
        which the event loop never waits on, and one thread keeps the sign-in's state single-threaded (a reply
        still to be awaited, a mail being sent, runs on the loop)."""
        reply = await asyncio.get_running_loop().run_in_executor(
            _sign_in_worker(),
            self.sign_in.handle,
            request.method,
            request.path,
            request.query,
            request.headers,
            request.body,
        )
        return _sign_in_response(await reply if inspect.isawaitable(reply) else reply)

    @staticmethod
    def _mcp_response(reply: HttpReply) -> Response:
        return Response(reply.status, reply.headers, reply.body)

    async def _mcp_later(self, pending: Awaitable[HttpReply]) -> Response:
        return self._mcp_response(await pending)

    def _route(self, method: str, path: str, accept: str | None) -> Match:
        """The router's match, remembered per (method, path, Accept): a client asks the same paths again and
        again. Only matches are kept (a refusal is made afresh), and a bounded number of them."""
        key = (method, path, accept)
        match = self._routes.get(key)
        if match is None:
            match = self.router.match(method, path, accept)
            if len(self._routes) >= ROUTES_HELD:
                self._routes.clear()
            self._routes[key] = match
        return match

    def _serve(self, request: Request, text: list[tuple[str, str]]) -> Answer:
        method, path, accept = request.method, request.path, request.headers.get("accept")
        match = self._routes.get((method, path, accept)) or self._route(method, path, accept)  # remembered: no call
        if match.server is not None:
            return self._server_door(match, request, text)
        door_name = match.door
        principal = self.dispatcher.credential(request.headers)
        if len(request.body) > MAX_BODY:
            raise R.PayloadTooLargeError(f"the body is over {MAX_BODY} bytes", limit=MAX_BODY)
        if request.method in ("GET", "HEAD", "DELETE"):
            # no query, no arguments: the dispatcher fills the defaults from the door's plan
            document: Any = (
                query_document(D.BY_NAME.get(door_name) if door_name else None, request.query)
                if request.query
                else None
            )
        else:
            document = codecs.decode(
                request.body, request.headers.get("content-type"), vectors=VECTORS_AT.get(door_name)
            )
            if match.selector is not None:
                door_name = self._select(match, document)
        id_ = match.params.get("id", match.params.get("sha256"))  # host.revokeKey's one path parameter
        brain, write = match.params.get("brain"), request.headers.get(WRITE)
        return self.dispatcher.run(principal, door_name, brain, id_, document, write)

    @staticmethod
    def _select(match: Match, document: Any) -> str:
        """The door a shared route (vfs) names by a body field; the field is the route's, not the door's."""
        if not isinstance(document, dict) or not isinstance(document.get(match.selector), str):
            raise R.InvalidArgumentError(
                f"{match.selector}: required, naming the door", field=str(match.selector), reason="missing"
            )
        chosen = (match.choices or {}).get(document.pop(match.selector))
        if chosen is None:
            raise R.InvalidArgumentError(
                f"{match.selector}: not one of {sorted(match.choices or {})}",
                field=str(match.selector),
                reason="unknown-door",
            )
        return chosen

    def _server_door(self, match: Match, request: Request, text: list[tuple[str, str]]) -> dict[str, Any] | HeldFeed:
        """A server door (DOORS.md 10.2): the credential its ``who`` asks for, then its disposition, then its
        handler. The brain in its path is checked as a door's is, before the disposition."""
        door = S.BY_NAME[str(match.server)]
        principal = None if door.who == "anyone" else self.dispatcher.credential(request.headers)
        if door.disposition != "native":
            if "brain" in match.params:
                check_brain_name(match.params["brain"])
            raise S.refusal_today(door)
        return SERVER_HANDLERS[door.name](self, principal, text, match, request)

    # The handlers of the native server doors, each ``(principal, text) -> answer``: ``principal`` is
    # None for a door anyone may call; a text answer is appended to ``text`` as (content type, body).

    def _contract_door(self, principal: Principal | None, text: list[tuple[str, str]], *_: Any) -> dict[str, Any]:
        return self._contract

    def _agent_door(self, principal: Principal | None, text: list[tuple[str, str]], *_: Any) -> dict[str, Any]:
        text.append(("text/markdown; charset=utf-8", agent_markdown(__version__, self.base_url)))
        return {}

    def _llms_txt_door(self, principal: Principal | None, text: list[tuple[str, str]], *_: Any) -> dict[str, Any]:
        text.append(("text/plain; charset=utf-8", llms_txt(__version__, self.base_url)))
        return {}

    def _openapi_door(self, principal: Principal | None, text: list[tuple[str, str]], *_: Any) -> dict[str, Any]:
        # Served as text, byte for byte docs/openapi.json: a _meta key would make it no OpenAPI document.
        if self._openapi is None:
            self._openapi = openapi.text(__version__)
        text.append((openapi.JSON, self._openapi))
        return {}

    def _changes_stream_door(
        self, principal: Principal, text: list[tuple[str, str]], match: Match, request: Request
    ) -> HeldFeed:
        """``GET P/changes`` with ``Accept: text/event-stream``: the door this server door shares a route with,
        held open by the dispatcher past its gate and its first catch-up (so a refusal is an HTTP answer);
        the Outcome's ``held`` is then framed as the stream (:meth:`_respond`, ``glue.sse``)."""
        door = S.BY_NAME[str(match.server)].holds
        assert door is not None
        return self.dispatcher.hold(
            principal,
            door,
            match.params["brain"],
            query_document(D.BY_NAME[door], request.query),
            request.headers.get("last-event-id"),
        )

    def _ws_door(self, principal: Principal, text: list[tuple[str, str]], *_: Any) -> dict[str, Any]:
        """``GET /v1/ws`` that asked for no upgrade: the session is only reached by one (:meth:`upgrade`)."""
        raise R.MalformedRequestError(
            "GET /v1/ws is a WebSocket upgrade: send Upgrade: websocket", reason="websocket-handshake"
        )

    def _oauth_door(self, principal: Principal | None, text: list[tuple[str, str]], *_: Any) -> dict[str, Any]:
        """``GET /.well-known/oauth-protected-resource`` (RFC 9728), routed only with ``--auth-server``."""
        document: dict[str, Any] = {
            "resource": self.base_url,
            "authorization_servers": [self.auth_server],
            "bearer_methods_supported": ["header"],
        }
        if self.sign_in is not None:  # what a client asks for by default: never the owner triple (docs/sign-in.md)
            document["scopes_supported"] = ["read", "write"]
        return document

    def _brains_door(self, principal: Principal, text: list[tuple[str, str]], match: Match, request: Request) -> Answer:
        """``GET /v1/brains``; in a fleet, every node's (docs/fleet.md "GET /v1/brains in a fleet")."""
        here = self.pool.brains_for(principal)
        return {"brains": here} if self.edge is None else self.edge.every_brain(principal, request, here)

    def _health_door(self, principal: Principal, text: list[tuple[str, str]], *_: Any) -> dict[str, Any]:
        """``GET /v1/health``: liveness for any credential; the pool and auth detail for the service key."""
        pool = self.pool.report()
        answer: dict[str, Any] = {
            "status": "degraded" if pool["fenceLost"] else "ok",
            "version": __version__,
            "uptimeMs": int((time.monotonic() - self.started) * 1000),
            "listeners": [{"address": a, "protocols": list(p)} for a, p in self.listeners],
            "embedder": {"loaded": embedder.loaded(), "model": embedder.MODEL},
        }
        if principal.service_key:  # DOORS.md 10.2: the pool detail (it names brains) needs the service key
            pool.pop("fenceLost")
            answer["pool"] = pool
            verifier = self.keys.token_verifier
            trusted = verifier.counts() if hasattr(verifier, "counts") else {"issuers": 0, "revoked": 0}
            answer["auth"] = {"keys": len(self.keys), **trusted}
            if self.fleet is not None:  # docs/fleet.md "/v1/health": it names brains, as the pool detail does
                answer["fleet"] = self.fleet.health()
                if self.host.shipping is not None:  # each owned brain's shipping: mode, last shipped, lag
                    answer["fleet"]["shipping"] = self.host.shipping.health()
        return answer

    def _respond(self, request: Request, outcome: Outcome, text: list[tuple[str, str]]) -> Response:
        timing = _TIMINGS.get(outcome.ms)
        if timing is None:
            timing = _timing(outcome.ms)
        refusal = outcome.refusal
        if outcome.held is not None:
            return StreamingResponse(200, [*sse.HEADERS, timing], b"", feed=sse.opened(outcome.held, outcome.ms))
        if text and refusal is None:
            kind, body = text[0]
            return Response(200, [(b"content-type", kind.encode()), timing], body.encode())
        msgpack_out = _wants_msgpack(request.headers.get("accept"))
        if refusal is None:  # the answer, its _meta merged in here (Outcome.body's, without the call)
            document = dict(outcome.answer)  # type: ignore[arg-type]
            document["_meta"] = {"ms": outcome.ms}
            if msgpack_out:
                return Response(200, [_MSGPACK_FIELD, timing], codecs.to_msgpack(document))
            return Response(200, [_JSON_FIELD, timing], codecs.to_json(document))
        body, kind = codecs.encode(outcome.body(), msgpack_out)
        headers = [_CONTENT_TYPE_FIELD[kind], timing, *refusal_headers(refusal, self.mcp.resource_metadata)]
        return Response(outcome.status, headers, body)


#: (method, path, Accept) matches the app remembers (bounded: a caller may send any number of paths).
ROUTES_HELD = 4096
OAUTH_PATH = S.BY_NAME["server.oauthProtectedResource"].path
_CONTENT_TYPE_FIELD = {kind: (b"content-type", kind.encode()) for kind in (codecs.JSON, codecs.MSGPACK)}
_JSON_FIELD, _MSGPACK_FIELD = _CONTENT_TYPE_FIELD[codecs.JSON], _CONTENT_TYPE_FIELD[codecs.MSGPACK]
# The Server-Timing field of each measured duration, formatted once: a duration is whole microseconds
# (elapsed_ms), and a server's reads take a few hundred different ones (bounded: a slow door may take any).
TIMINGS_HELD = 4096
_TIMINGS: dict[float, tuple[bytes, bytes]] = {}


_sign_in_worker = LongLived(1, "brainy-sign-in")


def _sign_in_response(reply: Any) -> Response:
    """The sign-in door's reply (str headers: it imports nothing of the net) as this app's Response."""
    return Response(reply.status, [(k.encode(), v.encode()) for k, v in reply.headers], reply.body)


def _timing(ms: float) -> tuple[bytes, bytes]:
    field = (b"server-timing", b"brainy;dur=%.3f" % ms)
    if len(_TIMINGS) >= TIMINGS_HELD:
        _TIMINGS.clear()
    _TIMINGS[ms] = field
    return field


# A client sends the same Accept on every request: its reading is remembered (bounded, as any cache of
# what a caller sends must be).
_wants_msgpack = functools.lru_cache(maxsize=256)(codecs.wants_msgpack)

#: The handler of each native server door, joined to the contract's ``serverDoors`` at import (DOORS.md 10.2).
SERVER_HANDLERS = S.join(
    {
        "server.contract": App._contract_door,
        "server.agent": App._agent_door,
        "server.llmsTxt": App._llms_txt_door,
        "server.health": App._health_door,
        "server.brains": App._brains_door,
        "server.ws": App._ws_door,
        "server.changesStream": App._changes_stream_door,  # the session itself is reached by App.upgrade
        "server.oauthProtectedResource": App._oauth_door,  # routed only when configured
        "server.openapi": App._openapi_door,  # beyond the contract (brainy/net/server_doors.py)
    }
)
