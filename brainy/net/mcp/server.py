"""The MCP methods over one dispatcher (2025-06-18): the session's actions, tools and resources.

Transport-free: streamable HTTP (:mod:`brainy.net.mcp.streamable_http`) and stdio
(:mod:`brainy.net.mcp.stdio_glue`) bring the session, the principal and the message;
:class:`McpServer` answers it. Two kinds of failure, kept apart (seed 000, "MCP"): a
door's refusal is an answer, a tool result with ``isError: true``; a protocol error (a
JSON-RPC ``error``) is kept for a malformed request, an unknown method or tool, and a
missing argument. Every message that calls a door is answered under the dispatcher's
one clock: :func:`finish` stamps ``result._meta.ms``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Any, Protocol

import brainy.net.mcp.resources as resources
from brainy import __version__
from brainy.auth.principal import Principal
from brainy.contract import doors as D
from brainy.contract import refusals as R
from brainy.contract.limits import brief, quote
from brainy.contract.mcp_resources import SKILL, SKILLS_LISTED_BY, ResourceTemplate
from brainy.contract.onboarding import MCP_PROTOCOL, mcp_instructions
from brainy.net.mcp.jsonrpc import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    NO_REPLY,
    JsonDoc,
    Message,
    ProtocolError,
    Reply,
    error_reply,
    refusal_error,
)
from brainy.net.mcp.lifecycle import Action, Session
from brainy.net.mcp.tools import SHAPES, TOOL_DOORS, TOOLS, tool_refusal, tool_result
from brainy.net.ws import CallOutcome  # what a call's outcome is read for, as the WebSocket session reads it

#: The store's own ceremony, served as initialize.instructions when present (seed 000, "MCP").
INSTRUCTIONS = "/_brainy/mcp/instructions.md"

#: The one protocol revision served: one revision, not a range (seed 000, "MCP").
PROTOCOL_VERSION = MCP_PROTOCOL
SERVER_INFO = MappingProxyType({"name": "brainy", "title": "brainy", "version": __version__})


class Dispatching(Protocol):
    """What the MCP methods use of the one dispatcher (``brainy.host.dispatch.Dispatcher``), which this package
    does not import (it sits below the dispatcher): the gate and the door, and the call's one clock."""

    def call(
        self, principal: Principal, name: str, brain: str | None, id_: Any, document: Any
    ) -> CallOutcome | Awaitable[CallOutcome]: ...

    def reach(self, principal: Principal) -> Sequence[str]: ...

    def only_brain(self, principal: Principal) -> str | None: ...

    def timed(self, door: str, work: Callable[..., Any], *args: Any) -> CallOutcome | Awaitable[CallOutcome]: ...


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

    The dispatcher's ``reach(principal)`` answers the names of the brains a credential reaches here, and
    its ``only_brain`` the one rule for a call that leaves ``brain`` out.
    """

    def __init__(self, dispatcher: Dispatching) -> None:
        self.dispatcher = dispatcher
        self.reach = dispatcher.reach
        self._methods: Mapping[str, Callable[[Principal, Mapping[str, Any]], Any]] = MappingProxyType(
            {
                "tools/list": self._tools_list,
                "tools/call": self._tools_call,
                "resources/list": self._resources_list,
                "resources/templates/list": self._templates_list,
                "resources/read": self._resources_read,
            }
        )
        self._actions: Mapping[Action, Callable[[Session, Principal, Message], Any]] = MappingProxyType(
            {
                Action.INITIALIZE: self._initialize,
                Action.PONG: lambda s, p, m: {},
                Action.SERVE: self._serve,
                Action.ACCEPT: lambda s, p, m: None,
                Action.DROP: lambda s, p, m: None,
                Action.CLOSE: lambda s, p, m: None,
                Action.REFUSE_UNINITIALIZED: self._refuse("the session is not initialized: send initialize first"),
                Action.REFUSE_REINITIALIZE: self._refuse("this session is already initialized"),
                Action.REFUSE_CLOSED: self._refuse("this session has ended"),
            }
        )

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

    def exchange(
        self, session: Session, authenticate: Callable[[], Principal], message: Message
    ) -> CallOutcome | Awaitable[CallOutcome]:
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
            raise ProtocolError(METHOD_NOT_FOUND, f"Method not found: {brief(message.method)}")
        return method(principal, message.params)

    # -- lifecycle ------------------------------------------------------------------------------

    def _initialize(self, session: Session, principal: Principal, message: Message) -> JsonDoc:
        params = message.params
        if not isinstance(params.get("protocolVersion"), str):
            raise ProtocolError(
                INVALID_PARAMS, "initialize: protocolVersion is required", {"supported": [PROTOCOL_VERSION]}
            )
        client = params.get("clientInfo")
        session.client = client if isinstance(client, dict) else None
        brains = list(self.reach(principal))
        # 2025-06-18 "Version negotiation": a server that does not support the requested
        # revision answers with one it does; this server has exactly one.
        return {
            "protocolVersion": PROTOCOL_VERSION,
            "capabilities": {"tools": {}, "resources": {}},
            "serverInfo": dict(SERVER_INFO),
            "instructions": self._store_file(principal, brains, INSTRUCTIONS) or mcp_instructions(brains),
        }

    def _store_file(self, principal: Principal, brains: list[str], path: str) -> str | None:
        """A text file of the one brain the key reaches, read as a skill is; None when there is no one brain,
        no such file, or the read is refused (the caller then answers its default)."""
        if len(brains) != 1:
            return None
        outcome = self.dispatcher.call(principal, SKILL.door, brains[0], None, {"path": path})
        answer = None if isinstance(outcome, Awaitable) else outcome.answer
        return answer["content"] if answer is not None else None

    # -- tools ----------------------------------------------------------------------------------

    def _tools_list(self, principal: Principal, params: Mapping[str, Any]) -> JsonDoc:
        # The whole table on one page: no cursor is ever handed out, so none is accepted.
        if params.get("cursor") is not None:
            raise ProtocolError(INVALID_PARAMS, "tools/list: this server hands out no cursor")
        return {"tools": list(TOOLS[len(self.reach(principal)) == 1])}

    def _tools_call(self, principal: Principal, params: Mapping[str, Any]) -> Any:
        name = params.get("name")
        door = TOOL_DOORS.get(name) if isinstance(name, str) else None
        if door is None or not isinstance(name, str):
            # quoted short: the name is the client's, of any size and shape
            raise ProtocolError(INVALID_PARAMS, f"Unknown tool: {brief(name)}")
        arguments = params.get("arguments")
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            raise ProtocolError(INVALID_PARAMS, f"{name}: arguments must be an object")
        shape = SHAPES[name]
        extra = sorted(set(arguments) - shape.allowed)
        if extra:
            raise ProtocolError(
                INVALID_PARAMS,
                f"{name}: {quote(extra[0])} is not an argument of this tool (it takes {sorted(shape.allowed)})",
            )
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

    def _only_brain(self, principal: Principal, asked: str) -> str:
        """The brain a call (a tool, an address) that names none reaches: the one brain of a one-brain key, else
        a parameter error."""
        brain = self.dispatcher.only_brain(principal)
        if brain is not None:
            return brain
        brains = list(self.reach(principal))
        raise ProtocolError(
            INVALID_PARAMS,
            f"{asked}: the argument 'brain' is required: this key reaches {len(brains)} brains here",
            {"brains": brains[:64]},
        )

    def _call(
        self, principal: Principal, door: D.Door, brain: str | None, id_: Any, document: JsonDoc | None
    ) -> JsonDoc | Awaitable[JsonDoc]:
        """One door through the dispatcher: the answer or the refusal, both as a tool result."""
        if door.layer == "vfs" and document is not None and D.VFS_SELECTOR in document:
            # DOORS.md 0.2: off HTTP the tool names the vfs door; op may be sent, and must agree.
            document = dict(document)
            if document.pop(D.VFS_SELECTOR) != door.name:
                return tool_refusal(
                    R.InvalidArgumentError(
                        f"op: this tool is the {door.name} door", field=D.VFS_SELECTOR, reason="unknown-door"
                    )
                )
        outcome = self.dispatcher.call(principal, door.name, brain, id_, document)
        return self._call_later(outcome) if isinstance(outcome, Awaitable) else _tool(outcome)

    @staticmethod
    async def _call_later(pending: Awaitable[CallOutcome]) -> JsonDoc:
        return _tool(await pending)

    # -- resources ------------------------------------------------------------------------------

    def _resources_list(self, principal: Principal, params: Mapping[str, Any]) -> JsonDoc:
        brains = list(self.reach(principal))
        listed = resources.resources_for(brains)
        if len(brains) == 1 and D.BY_NAME[SKILLS_LISTED_BY].native:
            # the store's skills, their text inline for the front matter; none when there is no /skills yet,
            # or nothing this key may read
            outcome = self.dispatcher.call(principal, SKILLS_LISTED_BY, brains[0], None, {"path": resources.SKILLS})
            listed += resources.skills((None if isinstance(outcome, Awaitable) else outcome.answer) or {})
        return {"resources": listed}

    def _templates_list(self, principal: Principal, params: Mapping[str, Any]) -> JsonDoc:
        return {"resourceTemplates": resources.templates()}

    def _resources_read(self, principal: Principal, params: Mapping[str, Any]) -> Any:
        uri = params.get("uri")
        if not isinstance(uri, str):
            raise ProtocolError(INVALID_PARAMS, "resources/read: the argument 'uri' is required")
        template, values = resources.address(uri)
        brain, id_, document = resources.door_arguments(template, values)
        if brain is None:
            brain = self._only_brain(principal, uri)
        outcome = self.dispatcher.call(principal, template.door, brain, id_, document)
        if isinstance(outcome, Awaitable):  # the dispatcher answers at once for a door that does not wait
            return self._read_later(uri, template, outcome)
        return resources.read(uri, template, outcome)

    @staticmethod
    async def _read_later(uri: str, template: ResourceTemplate, pending: Awaitable[CallOutcome]) -> JsonDoc:
        outcome = await pending  # a door of a brain another node serves waits for its owner (brainy/net/edge.py)
        return _noted(resources.read(uri, template, outcome), outcome)


class Answered(dict):
    """A tool result (or a resource read) a node of the fleet other than this one gave (``answered_by``): the streamable HTTP reply
    names it in ``brainy-node`` (docs/fleet.md "Any node answers any brain")."""

    answered_by = ""


def _tool(outcome: CallOutcome) -> JsonDoc:
    """A door's outcome as a tool result: its answer, or its refusal flagged ``isError``."""
    assert outcome.refusal is not None or outcome.answer is not None
    result = tool_refusal(outcome.refusal) if outcome.refusal is not None else tool_result(outcome.answer)
    return _noted(result, outcome)


def _noted(result: JsonDoc, outcome: CallOutcome) -> JsonDoc:
    """``result`` marked :class:`Answered` when another node of the fleet gave the outcome it was made from."""
    node = getattr(outcome.refusal if outcome.refusal is not None else outcome.answer, "answered_by", "")
    if not node:
        return result
    answered = Answered(result)
    answered.answered_by = node
    return answered


def answered_by(reply: Any) -> str:
    """The node of the fleet that gave a reply's tool result ("" for this node, or a reply of no tool)."""
    return getattr(reply.get("result"), "answered_by", "") if isinstance(reply, dict) else ""


def finish(outcome: CallOutcome, message: Message | None) -> JsonDoc:
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
