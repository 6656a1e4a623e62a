"""MCP, protocol revision 2025-06-18: every contract door a tool, sans-IO.

Seed 000, "MCP": MCP is a transport here, not a curated selection. A client that
speaks only MCP reaches exactly the engine an HTTP client reaches, through the same
dispatcher, so neither can serve a method the other does not. This module holds
everything about MCP that is not IO:

* the session lifecycle, as a table (:data:`LIFECYCLE`);
* JSON-RPC messages, parsed and answered (:func:`parse_message`, :class:`McpServer`):
  ``initialize``, ``ping``, ``tools/list`` (the generated table, whole), ``tools/call``
  (through the dispatcher), ``resources/list``, ``resources/templates/list`` and
  ``resources/read`` (each resource read by calling its door);
* streamable HTTP (:class:`StreamableHttp`): one request in, one reply out, with
  sessions (``Mcp-Session-Id``), the ``MCP-Protocol-Version`` header and the same
  Bearer keys as every other door;
* stdio framing (:class:`StdioFraming`): newline-delimited JSON-RPC, bytes in and out.

Nothing here opens a socket, reads a file or a clock: the glue hands in ``now``
(``brainy/net/app.py`` for HTTP, ``brainy/net/mcp_stdio.py`` for stdio).

Two kinds of failure, kept apart (seed 000, "MCP"). A door's refusal is an answer:
a tool result with ``isError: true`` and ``{"error": {name, message, ...fields}}`` in
``structuredContent``, so a model reads it rather than retrying forever. A protocol
error (a JSON-RPC ``error``) is kept for a malformed request, an unknown method or
tool, and a missing argument. A request refused before it reaches MCP at all (a
credential, the protocol version header, a session that is gone) answers the
refusal's HTTP status, with a JSON-RPC error whose ``data`` is the refusal document.

Every message that calls a door is answered under the dispatcher's one clock: the
reply's ``result._meta.ms`` and, over HTTP, ``Server-Timing: brainy;dur=<ms>``.
"""

from __future__ import annotations

import collections
import enum
import ipaddress
import logging
import secrets
import uuid
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Awaitable, Callable, Mapping, Sequence, Union
from urllib.parse import unquote, urlsplit

import orjson

from brainy import __version__
from brainy.contract import doors as D
from brainy.contract import refusals as R
from brainy.contract.onboarding import MCP_PROTOCOL
from brainy.net.dispatch import Dispatcher, Outcome
from brainy.net.http import refusal_headers
from brainy.net.principal import Principal

log = logging.getLogger("brainy.mcp")

#: The one protocol revision served: one revision, not a range (seed 000, "MCP").
PROTOCOL_VERSION = MCP_PROTOCOL
MCP_PATH = "/mcp"
SERVER_INFO = MappingProxyType({"name": "brainy", "title": "brainy", "version": __version__})
#: A message (an HTTP body, or one stdio line) over this is refused: the HTTP body limit.
MAX_MESSAGE = 64 << 20
#: Sessions held at once; opening one more forgets the one idle longest. A session is a
#: few hundred bytes, so this bounds memory, not work.
MAX_SESSIONS = 1024
#: A session idle this long is gone (404, and the client initializes again).
IDLE_SECONDS = 3600.0

# JSON-RPC 2.0 error codes (and MCP's use of them, 2025-06-18).
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603

JsonDoc = dict[str, Any]
Reply = Union[JsonDoc, Awaitable[JsonDoc]]
#: What :meth:`McpServer.handle` answers for a notification or a response: nothing to send.
#: Compared by identity; never mutated.
NO_REPLY: JsonDoc = {}


class ProtocolError(Exception):
    """A JSON-RPC error: the message is malformed, the method or tool unknown, an argument missing."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data

    def error(self) -> JsonDoc:
        error: JsonDoc = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error


def error_reply(id_: Any, error: JsonDoc) -> JsonDoc:
    return {"jsonrpc": "2.0", "id": id_, "error": error}


def refusal_error(refusal: R.Refusal) -> JsonDoc:
    """A refusal as a JSON-RPC error object: its class and fields whole in ``data``."""
    if refusal.name == "InternalError":
        code = INTERNAL_ERROR
    elif refusal.name == "BodyDecodeError":
        code = PARSE_ERROR
    else:
        code = INVALID_REQUEST
    return {"code": code, "message": refusal.message, "data": refusal.to_wire()}


def fault(where: str, exc: BaseException) -> R.Refusal:
    """An unexpected exception, logged under a reference and never shown (as the dispatcher does)."""
    ref = str(uuid.uuid4())
    log.error("internal error in %s (ref %s)", where, ref, exc_info=exc)
    return R.InternalError(f"an unexpected fault; see the log under {ref}", ref=ref)


# --------------------------------------------------------------------------- the lifecycle


class State(enum.Enum):
    """Where a session stands (2025-06-18, "Lifecycle")."""

    AWAITING_INIT = "awaiting-init"   # opened; nothing but initialize or ping is served
    INITIALIZING = "initializing"     # initialize answered; waiting for notifications/initialized
    READY = "ready"                   # operating
    CLOSED = "closed"                 # ended (HTTP DELETE, stdio end of input); nothing is served


class Input(enum.Enum):
    """What a client message is, as far as the lifecycle cares."""

    INITIALIZE = "initialize"         # the initialize request
    INITIALIZED = "initialized"       # the notifications/initialized notification
    PING = "ping"                     # a ping request: answered in every open state
    REQUEST = "request"               # any other request
    NOTIFICATION = "notification"     # any other notification (cancelled, progress, ...)
    RESPONSE = "response"             # a response (this server sends no requests; it is dropped)
    CLOSE = "close"                   # the transport ends the session


class Action(enum.Enum):
    """What a (state, input) pair does."""

    INITIALIZE = "initialize"                    # answer initialize
    PONG = "pong"                                # answer ping with {}
    SERVE = "serve"                              # answer the request by its method
    ACCEPT = "accept"                            # take the notification; nothing to answer
    DROP = "drop"                                # ignore it; nothing to answer
    REFUSE_UNINITIALIZED = "refuse-uninitialized"  # a request before initialize: INVALID_REQUEST
    REFUSE_REINITIALIZE = "refuse-reinitialize"    # initialize twice on one session: INVALID_REQUEST
    REFUSE_CLOSED = "refuse-closed"              # anything on an ended session: INVALID_REQUEST
    CLOSE = "close"                              # end the session


_S, _I, _A = State, Input, Action

#: (state, input) -> (action, next state), every pair written out; a test walks them all.
#: Lenient where the specification says SHOULD: a request after initialize was answered
#: but before notifications/initialized arrived is served (many clients pipeline them).
LIFECYCLE: Mapping[tuple[State, Input], tuple[Action, State]] = MappingProxyType({
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
})
_missing = [(s, i) for s in State for i in Input if (s, i) not in LIFECYCLE]
if _missing:  # pragma: no cover - the table above is whole; this keeps it so
    raise RuntimeError(f"the MCP lifecycle table has no entry for {_missing}")


def _owner(principal: Principal) -> tuple[str, str, str | None]:
    """Who a session belongs to: another credential presenting its id finds no session there."""
    return principal.id, principal.kind, principal.token_brain


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


# --------------------------------------------------------------------------- messages


@dataclass(frozen=True)
class Message:
    """One JSON-RPC message from the client."""

    kind: str                       # "request" | "notification" | "response"
    method: str | None = None
    id: Any = None                  # str | int for a request; None otherwise
    params: Mapping[str, Any] = field(default_factory=dict)

    @property
    def input(self) -> Input:
        if self.kind == "response":
            return Input.RESPONSE
        if self.kind == "notification":
            return Input.INITIALIZED if self.method == "notifications/initialized" else Input.NOTIFICATION
        if self.method == "initialize":
            return Input.INITIALIZE
        return Input.PING if self.method == "ping" else Input.REQUEST


def _valid_id(value: Any) -> bool:
    # MCP: a request id is a string or an integer, never null (and a bool is not an integer).
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def request_id(doc: Any) -> Any:
    """The id to answer a malformed message under: its own when it is a legal id, else null."""
    if isinstance(doc, dict) and _valid_id(doc.get("id")):
        return doc["id"]
    return None


def parse_message(doc: Any) -> Message:
    """A decoded JSON document as one JSON-RPC message, or a ProtocolError (INVALID_REQUEST / INVALID_PARAMS)."""
    if not isinstance(doc, dict):
        raise ProtocolError(INVALID_REQUEST, "a message is one JSON-RPC object (2025-06-18 has no batches)")
    if doc.get("jsonrpc") != "2.0":
        raise ProtocolError(INVALID_REQUEST, 'jsonrpc must be "2.0"')
    if "method" in doc:
        method = doc["method"]
        if not isinstance(method, str) or not method:
            raise ProtocolError(INVALID_REQUEST, "method must be a non-empty string")
        params = doc.get("params")
        if params is None:
            params = {}
        if not isinstance(params, dict):
            raise ProtocolError(INVALID_PARAMS, "params must be an object")
        if "id" not in doc:
            return Message("notification", method, None, params)
        if not _valid_id(doc["id"]):
            raise ProtocolError(INVALID_REQUEST, "id must be a string or an integer")
        return Message("request", method, doc["id"], params)
    if "result" in doc or "error" in doc:
        return Message("response", None, doc.get("id"))
    raise ProtocolError(INVALID_REQUEST, "not a request, a notification or a response")


# --------------------------------------------------------------------------- tools and resources

#: The tool list, generated once per reach: a key reaching exactly one brain may leave ``brain`` out.
TOOLS: Mapping[bool, tuple[JsonDoc, ...]] = MappingProxyType(
    {single: tuple(D.mcp_tools(single_brain=single)) for single in (False, True)})
TOOL_DOORS: Mapping[str, D.Door] = MappingProxyType({d.mcp_tool: d for d in D.DOORS})


@dataclass(frozen=True)
class _ToolShape:
    """What tools/call checks before the door: the arguments the schema names, and which it requires."""

    path: tuple[str, ...]           # path parameters, in order (brain, id, sha256)
    body: bool                      # the door takes an argument document
    body_required: bool
    allowed: frozenset[str]


def _shape(door: D.Door) -> _ToolShape:
    path = tuple(p.name for p in door.path_params)
    body = bool(door.document_params)
    required = bool(body and any(p.required for p in door.document_params))
    return _ToolShape(path, body, required, frozenset(path + (("body",) if body else ())))


SHAPES: Mapping[str, _ToolShape] = MappingProxyType({d.mcp_tool: _shape(d) for d in D.DOORS})


@dataclass(frozen=True)
class ResourceTemplate:
    """A resource is a record with an address; each template names the door that reads it (DOORS.md 0.7)."""

    template: str
    door: str
    name: str
    title: str
    description: str

    @property
    def offered(self) -> bool:
        """A resource whose door has no implementation is not offered (seed 000, "MCP")."""
        return D.BY_NAME[self.door].native


#: DOORS.md 0.7, in order. There is no relation resource: no door reads one relation by id.
RESOURCE_TEMPLATES: tuple[ResourceTemplate, ...] = (
    ResourceTemplate("brainy://{brain}/counts", "counts", "census", "A brain's census",
                     "The brain's size: entities and relations by type (the counts door)."),
    ResourceTemplate("brainy://{brain}/entities/{id}", "get", "entity", "An entity",
                     "One entity by its id or natural key (the get door)."),
    ResourceTemplate("brainy://{brain}/entities/{id}/history", "history", "history", "An entity's history",
                     "Every version of one entity (the history door)."),
    ResourceTemplate("brainy://skills/{path}", "readFile", "skill", "A skill",
                     "A document of the store's /skills/ folder (the readFile door)."),
)


def _resource_address(uri: str) -> tuple[ResourceTemplate, str | None, Any, JsonDoc]:
    """The template a ``brainy://`` URI fills, with its brain, id and the door's document.

    Each segment is percent-decoded once, as on HTTP (an id holding ``/`` travels as ``%2F``).
    """
    head, sep, rest = uri.partition("://")
    if head != "brainy" or not sep:
        raise ProtocolError(INVALID_PARAMS, "Resource not found", {"uri": uri})
    segments = rest.split("/")
    try:
        decoded = [unquote(s, errors="strict") for s in segments]
    except UnicodeDecodeError:
        raise ProtocolError(INVALID_PARAMS, "Resource not found", {"uri": uri}) from None
    by_door = {t.door: t for t in RESOURCE_TEMPLATES}
    if len(segments) == 2 and segments[1] == "counts":
        return by_door["counts"], decoded[0], None, {}
    if len(segments) == 3 and segments[1] == "entities":
        return by_door["get"], decoded[0], decoded[2], {}
    if len(segments) == 4 and segments[1] == "entities" and segments[3] == "history":
        return by_door["history"], decoded[0], decoded[2], {"id": decoded[2]}
    raise ProtocolError(INVALID_PARAMS, "Resource not found", {"uri": uri})


# --------------------------------------------------------------------------- instructions

_NO_REACH = "This key reaches no brain served here; every door on a brain refuses it."


def instructions(brains: Sequence[str]) -> str:
    """The compact default ``initialize.instructions``, for a key reaching ``brains``.

    The store's own ``/_brainy/mcp/instructions.md`` replaces it once files exist in
    the store (the vfs doors, release 0.5.0); a key reaching several brains always gets
    this text, since no one store speaks for it (seed 001, "Which brain a call reaches").
    A test holds it within 700 tokens by the embedder's tokenizer.
    """
    if len(brains) == 1:
        reach = f"This key reaches one brain, `{brains[0]}`: leave `brain` out, or name it."
    elif brains:
        named = ", ".join(f"`{b}`" for b in brains[:8]) + (", ..." if len(brains) > 8 else "")
        reach = (f"This key reaches {len(brains)} brains ({named}): name one in `brain` on every call; "
                 "a call without it is refused.")
    else:
        reach = _NO_REACH
    native = ", ".join(d.mcp_tool for d in D.DOORS if d.native)
    resources = "; ".join(f"{t.template} ({t.door})" for t in RESOURCE_TEMPLATES if t.offered)
    return "\n\n".join([
        "brainy is a knowledge store: entities and relations (and, later, files) in brains. Every "
        "commit is a numbered generation, and every write answers the generation it made.",
        reach,
        "Every door of the contract is a tool: brainy_<door> for engine and file doors, <layer>_<door> "
        "for the profiles (accords, memory, policy) and the host. A description gives the door's "
        "signature: send its argument document whole as `body`, and `id` beside it where the door "
        f"takes one. Doors that answer today: {native}. Every other tool refuses by name, and its "
        "description says which refusal and when the door arrives.",
        "A refusal is a tool result with isError true and structuredContent {\"error\": {\"name\", "
        "\"message\", ...}}. Read the name before trying again: NotYetNativeError and "
        "InProcessOnlyError refuse every call; ForbiddenError and BRAINY_KEY_* concern the key; "
        "InvalidArgumentError names the field to fix.",
        "An id is a UUID or your own natural key (1 to 256 characters); every door that takes an id "
        "accepts either. Adding with a natural key is how to write idempotently.",
        f"Resources: {resources}.",
        "The whole contract, every door and every refusal: GET /contract.json on the HTTP server.",
    ])


# --------------------------------------------------------------------------- the server


def _tool_result(answer: JsonDoc) -> JsonDoc:
    """A door's answer: its JSON as text (for a model) and whole in structuredContent (for a program)."""
    return {"content": [{"type": "text", "text": orjson.dumps(answer).decode()}],
            "structuredContent": answer, "isError": False, "_meta": {"ms": 0.0}}


def _tool_refusal(refusal: R.Refusal) -> JsonDoc:
    """A door's refusal: a result, flagged isError, with the class and its fields in structuredContent."""
    doc = {"error": refusal.to_wire()}
    return {"content": [{"type": "text", "text": orjson.dumps(doc).decode()}],
            "structuredContent": doc, "isError": True, "_meta": {"ms": 0.0}}


def stamp(reply: JsonDoc, ms: float) -> JsonDoc:
    """Put the call's one measured wall into ``result._meta.ms`` where the reply carries a door's answer."""
    result = reply.get("result")
    if isinstance(result, dict):
        meta = result.get("_meta")
        if isinstance(meta, dict) and "ms" in meta:
            meta["ms"] = ms
    return reply


class McpServer:
    """The MCP methods over one dispatcher. Transport-free: the glue brings the session and the principal.

    ``reach(principal)`` answers the names of the brains a credential reaches here (the
    pool's ``brains_for``): exactly one means ``brain`` may be left out of a call.
    """

    def __init__(self, dispatcher: Dispatcher, reach: Callable[[Principal], Sequence[str]]) -> None:
        self.dispatcher = dispatcher
        self.reach = reach
        self._methods: Mapping[str, Callable[[Principal, Mapping[str, Any]], Any]] = MappingProxyType({
            "tools/list": self._tools_list,
            "tools/call": self._tools_call,
            "resources/list": self._resources_list,
            "resources/templates/list": self._templates_list,
            "resources/read": self._resources_read,
        })
        self._actions: Mapping[Action, Callable[[Session, Principal, Message], Any]] = MappingProxyType({
            Action.INITIALIZE: self._initialize,
            Action.PONG: lambda s, p, m: {},
            Action.SERVE: self._serve,
            Action.ACCEPT: lambda s, p, m: None,
            Action.DROP: lambda s, p, m: None,
            Action.CLOSE: lambda s, p, m: None,
            Action.REFUSE_UNINITIALIZED: self._refuse("the session is not initialized: send initialize first"),
            Action.REFUSE_REINITIALIZE: self._refuse("this session is already initialized"),
            Action.REFUSE_CLOSED: self._refuse("this session has ended"),
        })

    # -- one message ----------------------------------------------------------------------------

    def handle(self, session: Session, principal: Principal, message: Message) -> Reply:
        """The reply to ``message`` (``NO_REPLY`` for a notification or a response), or an awaitable of it.

        Never raises for a protocol error or a door's refusal: both are the reply.
        """
        action, following = session.lookup(message.input)
        try:
            result = self._actions[action](session, principal, message)
        except ProtocolError as exc:
            return NO_REPLY if message.kind != "request" else error_reply(message.id, exc.error())
        session.state = following
        if message.kind != "request":
            return NO_REPLY
        if isinstance(result, dict):
            return {"jsonrpc": "2.0", "id": message.id, "result": result}
        return self._later(message.id, result)

    @staticmethod
    async def _later(id_: Any, pending: Awaitable[JsonDoc]) -> JsonDoc:
        try:
            return {"jsonrpc": "2.0", "id": id_, "result": await pending}
        except ProtocolError as exc:
            return error_reply(id_, exc.error())

    def exchange(self, session: Session, authenticate: Callable[[], Principal],
                 message: Message) -> "Outcome | Awaitable[Outcome]":
        """``handle`` under the dispatcher's one clock, the credential proven inside it (stdio's path).

        A refusal of the credential becomes the Outcome's refusal; :func:`finish` turns it into
        a JSON-RPC error for a request.
        """
        return self.dispatcher.timed("server.mcp", lambda: self.handle(session, authenticate(), message))

    @staticmethod
    def _refuse(why: str) -> Callable[[Session, Principal, Message], Any]:
        def refuse(session: Session, principal: Principal, message: Message) -> Any:
            raise ProtocolError(INVALID_REQUEST, why)
        return refuse

    def _serve(self, session: Session, principal: Principal, message: Message) -> Any:
        method = self._methods.get(message.method or "")
        if method is None:
            raise ProtocolError(METHOD_NOT_FOUND, f"Method not found: {message.method}")
        return method(principal, message.params)

    # -- lifecycle ------------------------------------------------------------------------------

    def _initialize(self, session: Session, principal: Principal, message: Message) -> JsonDoc:
        params = message.params
        if not isinstance(params.get("protocolVersion"), str):
            raise ProtocolError(INVALID_PARAMS, "initialize: protocolVersion is required",
                                {"supported": [PROTOCOL_VERSION]})
        client = params.get("clientInfo")
        session.client = client if isinstance(client, dict) else None
        # 2025-06-18 "Version negotiation": a server that does not support the requested
        # revision answers with one it does; this server has exactly one.
        return {
            "protocolVersion": PROTOCOL_VERSION,
            "capabilities": {"tools": {}, "resources": {}},
            "serverInfo": dict(SERVER_INFO),
            "instructions": instructions(list(self.reach(principal))),
        }

    # -- tools ----------------------------------------------------------------------------------

    def _tools_list(self, principal: Principal, params: Mapping[str, Any]) -> JsonDoc:
        # The whole table on one page: no cursor is ever handed out, so none is accepted.
        if params.get("cursor") is not None:
            raise ProtocolError(INVALID_PARAMS, "tools/list: this server hands out no cursor")
        return {"tools": list(TOOLS[len(self.reach(principal)) == 1])}

    def _tools_call(self, principal: Principal, params: Mapping[str, Any]) -> Any:
        name = params.get("name")
        door = TOOL_DOORS.get(name) if isinstance(name, str) else None
        if door is None:
            raise ProtocolError(INVALID_PARAMS, f"Unknown tool: {name}")
        arguments = params.get("arguments")
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            raise ProtocolError(INVALID_PARAMS, f"{name}: arguments must be an object")
        shape = SHAPES[name]
        extra = sorted(set(arguments) - shape.allowed)
        if extra:
            raise ProtocolError(INVALID_PARAMS, f"{name}: {extra[0]!r} is not an argument of this tool "
                                f"(it takes {sorted(shape.allowed)})")
        brain, id_ = None, None
        for param in shape.path:
            value = arguments.get(param)
            if value is None and param == "brain":
                value = self._only_brain(principal, name)
            elif value is None:
                raise ProtocolError(INVALID_PARAMS, f"{name}: the argument {param!r} is required")
            if not isinstance(value, str):
                raise ProtocolError(INVALID_PARAMS, f"{name}: {param!r} must be a string")
            if param == "brain":
                brain = value
            else:
                id_ = value  # id, or host.revokeKey's sha256: the one path parameter beside brain
        document = arguments.get("body")
        if document is None and shape.body_required:
            raise ProtocolError(INVALID_PARAMS, f"{name}: the argument 'body' is required (see the signature)")
        if document is not None and not isinstance(document, dict):
            raise ProtocolError(INVALID_PARAMS, f"{name}: 'body' must be an object")
        return self._call(principal, door, brain, id_, document)

    def _only_brain(self, principal: Principal, tool: str) -> str:
        """The brain a call that names none reaches: the one brain of a one-brain key, else a parameter error."""
        brains = list(self.reach(principal))
        if len(brains) == 1:
            return brains[0]
        raise ProtocolError(INVALID_PARAMS, f"{tool}: the argument 'brain' is required: this key reaches "
                            f"{len(brains)} brains here", {"brains": brains[:64]})

    def _call(self, principal: Principal, door: D.Door, brain: str | None, id_: Any,
              document: JsonDoc | None) -> "JsonDoc | Awaitable[JsonDoc]":
        """One door through the dispatcher: the answer or the refusal, both as a tool result."""
        try:
            if door.layer == "vfs" and document is not None and D.VFS_SELECTOR in document:
                # DOORS.md 0.2: off HTTP the tool names the vfs door; op may be sent, and must agree.
                document = dict(document)
                if document.pop(D.VFS_SELECTOR) != door.name:
                    raise R.InvalidArgumentError(f"op: this tool is the {door.name} door",
                                                 field=D.VFS_SELECTOR, reason="unknown-door")
            answer = self.dispatcher.run(principal, door.name, brain, id_, document)
        except R.Refusal as refusal:
            return _tool_refusal(refusal)
        except Exception as exc:
            return _tool_refusal(fault(door.name, exc))
        if isinstance(answer, dict):
            return _tool_result(answer)
        return self._call_later(door.name, answer)

    @staticmethod
    async def _call_later(door: str, pending: Awaitable[JsonDoc]) -> JsonDoc:
        try:
            return _tool_result(await pending)
        except R.Refusal as refusal:
            return _tool_refusal(refusal)
        except Exception as exc:
            return _tool_refusal(fault(door, exc))

    # -- resources ------------------------------------------------------------------------------

    def _resources_list(self, principal: Principal, params: Mapping[str, Any]) -> JsonDoc:
        # A key reaching several brains is answered an empty list: no one store speaks for it
        # (seed 001, "Which brain a call reaches"). The store's /skills/ join this list once
        # files exist in the store.
        brains = list(self.reach(principal))
        census = next(t for t in RESOURCE_TEMPLATES if t.door == "counts")
        if len(brains) != 1 or not census.offered:
            return {"resources": []}
        brain = brains[0]
        return {"resources": [{"uri": census.template.replace("{brain}", brain), "name": f"census of {brain}",
                               "title": f"{census.title}: {brain}", "mimeType": "application/json"}]}

    def _templates_list(self, principal: Principal, params: Mapping[str, Any]) -> JsonDoc:
        return {"resourceTemplates": [
            {"uriTemplate": t.template, "name": t.name, "title": t.title, "description": t.description,
             "mimeType": "application/json"}
            for t in RESOURCE_TEMPLATES if t.offered]}

    def _resources_read(self, principal: Principal, params: Mapping[str, Any]) -> Any:
        uri = params.get("uri")
        if not isinstance(uri, str):
            raise ProtocolError(INVALID_PARAMS, "resources/read: the argument 'uri' is required")
        template, brain, id_, document = _resource_address(uri)
        door = D.BY_NAME[template.door]
        try:
            answer = self.dispatcher.run(principal, door.name, brain, id_, document)
        except R.Refusal as refusal:
            raise self._resource_refused(refusal) from None
        except Exception as exc:
            raise self._resource_refused(fault(door.name, exc)) from None
        if isinstance(answer, dict):
            return self._contents(uri, answer)
        return self._read_later(uri, door.name, answer)

    @staticmethod
    def _resource_refused(refusal: R.Refusal) -> ProtocolError:
        # Resources are application-driven, not model-driven: a read that fails is a JSON-RPC
        # error (2025-06-18 "Resources": not found is INVALID_PARAMS), its refusal whole in data.
        code = INTERNAL_ERROR if refusal.name == "InternalError" else INVALID_PARAMS
        return ProtocolError(code, refusal.message, refusal.to_wire())

    @staticmethod
    def _contents(uri: str, answer: JsonDoc) -> JsonDoc:
        return {"contents": [{"uri": uri, "mimeType": "application/json", "text": orjson.dumps(answer).decode()}],
                "_meta": {"ms": 0.0}}

    async def _read_later(self, uri: str, door: str, pending: Awaitable[JsonDoc]) -> JsonDoc:
        try:  # no read door waits today; this keeps the path whole for one that will
            return self._contents(uri, await pending)
        except R.Refusal as refusal:
            raise self._resource_refused(refusal) from None


def finish(outcome: Outcome, message: Message | None) -> JsonDoc:
    """The reply to send once the clock stopped: the answer stamped with ``_meta.ms``, or the refusal as an error.

    ``NO_REPLY`` when nothing is owed (a notification or a response, even a refused one).
    """
    if outcome.refusal is not None:
        if message is not None and message.kind != "request":
            return NO_REPLY
        return error_reply(message.id if message is not None else None, refusal_error(outcome.refusal))
    answer = outcome.answer
    if answer is None or answer is NO_REPLY:
        return NO_REPLY
    return stamp(answer, outcome.ms)


# --------------------------------------------------------------------------- streamable HTTP


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
    session_id: str | None = None   # set when this exchange opened a session


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

    def __init__(self, server: McpServer, authenticate: Callable[[Mapping[str, str]], Principal],
                 max_sessions: int = MAX_SESSIONS, idle_seconds: float = IDLE_SECONDS) -> None:
        self.server = server
        self.authenticate = authenticate
        self.max_sessions = max_sessions
        self.idle_seconds = idle_seconds
        self.sessions: collections.OrderedDict[str, Session] = collections.OrderedDict()  # least recent first

    def handle(self, method: str, headers: Mapping[str, str], body: bytes,
               now: float) -> "HttpReply | Awaitable[HttpReply]":
        """The reply now (every read, every lifecycle message), or an awaitable of it (a write door)."""
        exchange = _Exchange()
        outcome = self.server.dispatcher.timed(
            "server.mcp", lambda: self._serve(method, headers, body, now, exchange))
        if isinstance(outcome, Outcome):
            return self._reply(outcome, exchange)
        return self._reply_later(outcome, exchange)

    async def _reply_later(self, pending: Awaitable[Outcome], exchange: _Exchange) -> HttpReply:
        return self._reply(await pending, exchange)

    # -- the request ----------------------------------------------------------------------------

    def _serve(self, method: str, headers: Mapping[str, str], body: bytes, now: float,
               exchange: _Exchange) -> Reply:
        if method not in ("POST", "DELETE"):
            raise R.MethodNotAllowedError(f"{MCP_PATH} takes POST and DELETE; this server offers no "
                                          "server-sent stream, so GET is not served", allowed=["DELETE", "POST"])
        origin = headers.get("origin")
        if origin is not None and not _loopback(urlsplit(origin.strip()).hostname):
            raise R.ForbiddenError(f"the Origin {origin!r} is not a loopback origin; MCP over HTTP refuses "
                                   "other browsers' origins (DNS-rebinding defence)", reason="origin")
        principal = self.authenticate(headers)
        version = headers.get("mcp-protocol-version")
        if version is not None and version.strip() != PROTOCOL_VERSION:
            raise R.ProtocolVersionError(f"MCP-Protocol-Version {version.strip()!r} is not served; this "
                                         f"server speaks {PROTOCOL_VERSION} only", supported=PROTOCOL_VERSION)
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
        try:
            doc = orjson.loads(body)
        except orjson.JSONDecodeError as exc:
            raise R.BodyDecodeError(f"the body is not JSON: {exc.msg}", encoding="json", offset=exc.pos) from None
        exchange.request_id = request_id(doc)
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
            raise R.InvalidArgumentError("Mcp-Session-Id: required on every message after initialize",
                                         field="Mcp-Session-Id", reason="missing")
        session = self.sessions.get(session_id.strip())
        if session is not None and now - session.seen > self.idle_seconds:
            del self.sessions[session.id]
            session = None
        if session is None or session.owner != _owner(principal):
            # 2025-06-18: a session the server ended is 404, and the client initializes again.
            # Another credential's session is answered the same, so a session id probes nothing.
            raise R.UnknownDoorError("no MCP session by that id here (it ended, or never began); "
                                     "send initialize without Mcp-Session-Id to open one", path=MCP_PATH)
        session.seen = now
        self.sessions.move_to_end(session.id)
        return session

    # -- the reply ------------------------------------------------------------------------------

    def _reply(self, outcome: Outcome, exchange: _Exchange) -> HttpReply:
        headers = [(b"server-timing", b"brainy;dur=%.3f" % outcome.ms)]
        refusal = outcome.refusal
        if refusal is not None:
            headers += refusal_headers(refusal)
            headers.append((b"content-type", b"application/json"))
            body = orjson.dumps(error_reply(exchange.request_id, refusal_error(refusal)))
            return HttpReply(refusal.status or 500, headers, body)
        reply = finish(outcome, exchange.message)
        if exchange.session_id is not None:
            headers.append((b"mcp-session-id", exchange.session_id.encode("ascii")))
        if reply is NO_REPLY:
            return HttpReply(exchange.status, headers, b"")
        headers.append((b"content-type", b"application/json"))
        return HttpReply(exchange.status, headers, orjson.dumps(reply))


# --------------------------------------------------------------------------- stdio framing


@dataclass(frozen=True)
class LineReceived:
    """One whole line that decoded as JSON."""

    document: Any


@dataclass(frozen=True)
class LineRefused:
    """One line that could not be read: too long, or not JSON. Answered with ``id: null``."""

    refusal: R.Refusal


class StdioFraming:
    """Newline-delimited JSON-RPC (2025-06-18 "stdio"): bytes in, documents out; documents in, lines out.

    A message never holds a newline, so a line is a message. A blank line is skipped; a
    line over ``max_line`` bytes is consumed to its end and reported once, never half-read.
    """

    def __init__(self, max_line: int = MAX_MESSAGE) -> None:
        self.max_line = max_line
        self._buffer = bytearray()
        self._discarding = False
        self._out = bytearray()

    def receive_data(self, data: bytes) -> list[LineReceived | LineRefused]:
        events: list[LineReceived | LineRefused] = []
        self._buffer += data
        while True:
            end = self._buffer.find(b"\n")
            if end < 0:
                if len(self._buffer) > self.max_line:
                    if not self._discarding:
                        events.append(LineRefused(R.PayloadTooLargeError(
                            f"a message is over {self.max_line} bytes", limit=self.max_line)))
                    self._discarding = True
                    self._buffer.clear()
                return events
            line = bytes(self._buffer[:end])
            del self._buffer[:end + 1]
            if self._discarding:  # the tail of a line already refused
                self._discarding = False
                continue
            if len(line) > self.max_line:
                events.append(LineRefused(R.PayloadTooLargeError(f"a message is over {self.max_line} bytes",
                                                                 limit=self.max_line)))
                continue
            if not line.strip():
                continue
            try:
                events.append(LineReceived(orjson.loads(line)))
            except orjson.JSONDecodeError as exc:
                events.append(LineRefused(R.BodyDecodeError(f"the line is not JSON: {exc.msg}", encoding="json",
                                                            offset=exc.pos)))

    def send(self, document: JsonDoc) -> None:
        """Frame one message (orjson writes no newline inside a document)."""
        self._out += orjson.dumps(document)
        self._out += b"\n"

    def data_to_send(self) -> bytes:
        """The lines framed so far, handed over once (no IO here: the glue writes them)."""
        out, self._out = bytes(self._out), bytearray()
        return out


__all__ = [
    "IDLE_SECONDS", "LIFECYCLE", "MAX_SESSIONS", "MCP_PATH", "NO_REPLY", "PROTOCOL_VERSION", "RESOURCE_TEMPLATES",
    "TOOLS", "Action", "HttpReply", "Input", "LineReceived", "LineRefused", "McpServer", "Message", "ProtocolError",
    "Session", "State", "StdioFraming", "StreamableHttp", "finish", "instructions", "parse_message",
]
