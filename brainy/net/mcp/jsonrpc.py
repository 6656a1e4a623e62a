"""The JSON-RPC 2.0 envelope MCP rides on (2025-06-18 "Base protocol"): messages, ids, errors.

Pure: a decoded JSON document in, a :class:`Message` or a :class:`ProtocolError` out;
an error or a refusal in, the error object to answer out. Nothing here knows a door,
a session or a transport.
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping
from dataclasses import dataclass, field
from typing import Any

from brainy.contract import refusals as R
from brainy.net.mcp.lifecycle import Input, classify

# JSON-RPC 2.0 error codes (and MCP's use of them, 2025-06-18).
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603

#: A message (an HTTP body, or one stdio line) over this is refused: the HTTP body limit.
MAX_MESSAGE = 64 << 20
#: A tool's argument document sits at level 4 of its message (message, params, arguments, body), so a message
#: may nest this many levels past MAX_NESTING: a body is read as deep over MCP as over HTTP.
ENVELOPE = 3

JsonDoc = dict[str, Any]
Reply = JsonDoc | Awaitable[JsonDoc]
#: What is answered for a notification or a response: nothing to send.
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


@dataclass(frozen=True)
class Message:
    """One JSON-RPC message from the client."""

    kind: str  # "request" | "notification" | "response"
    method: str | None = None
    id: Any = None  # str | int for a request; None otherwise
    params: Mapping[str, Any] = field(default_factory=dict)

    @property
    def input(self) -> Input:
        """What this message is to the session lifecycle."""
        return classify(self.kind, self.method)


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
