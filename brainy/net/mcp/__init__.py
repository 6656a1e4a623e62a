"""MCP, protocol revision 2025-06-18: every contract door a tool, sans-IO.

Seed 000, "MCP": MCP is a transport here, not a curated selection. A client that
speaks only MCP reaches exactly the engine an HTTP client reaches, through the same
dispatcher, so neither can serve a method the other does not. The package is cut
along the protocol's seams, one module each:

* :mod:`~brainy.net.mcp.jsonrpc`: the JSON-RPC envelope (messages, ids, error codes);
* :mod:`~brainy.net.mcp.lifecycle`: the session state machine, as a table;
* :mod:`~brainy.net.mcp.tools` and :mod:`~brainy.net.mcp.resources`: the tool and
  resource surface, generated from the contract (``brainy.contract.doors.mcp_tools``,
  ``brainy.contract.mcp_resources``);
* :mod:`~brainy.net.mcp.server`: the MCP methods over one dispatcher;
* :mod:`~brainy.net.mcp.streamable_http`: streamable HTTP at ``/mcp`` (sessions, Origin);
* :mod:`~brainy.net.mcp.stdio`: newline-delimited stdio framing.

All of that is sans-IO: nothing opens a socket, reads a file or a clock; the glue
hands in ``now`` (``brainy/net/app.py`` for HTTP, :mod:`~brainy.net.mcp.stdio_glue`,
the one module here that does IO, for ``brainy mcp``). The instructions an agent is
handed at ``initialize`` are onboarding prose and live with the other onboarding
documents (``brainy.contract.onboarding``).

The names other modules use are importable from here.
"""

from brainy.contract.mcp_resources import RESOURCE_TEMPLATES, ResourceTemplate
from brainy.contract.onboarding import mcp_instructions as instructions
from brainy.net.mcp.jsonrpc import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    MAX_MESSAGE,
    METHOD_NOT_FOUND,
    NO_REPLY,
    PARSE_ERROR,
    Message,
    ProtocolError,
    error_reply,
    parse_message,
    refusal_error,
    request_id,
)
from brainy.net.mcp.lifecycle import LIFECYCLE, Action, Input, Session, State
from brainy.net.mcp.server import PROTOCOL_VERSION, SERVER_INFO, McpServer, finish
from brainy.net.mcp.stdio import LineReceived, LineRefused, StdioFraming
from brainy.net.mcp.streamable_http import IDLE_SECONDS, MAX_SESSIONS, MCP_PATH, HttpReply, StreamableHttp
from brainy.net.mcp.tools import SHAPES, TOOL_DOORS, TOOLS

__all__ = [
    "IDLE_SECONDS",
    "INTERNAL_ERROR",
    "INVALID_PARAMS",
    "INVALID_REQUEST",
    "LIFECYCLE",
    "MAX_MESSAGE",
    "MAX_SESSIONS",
    "MCP_PATH",
    "METHOD_NOT_FOUND",
    "NO_REPLY",
    "PARSE_ERROR",
    "PROTOCOL_VERSION",
    "RESOURCE_TEMPLATES",
    "SERVER_INFO",
    "SHAPES",
    "TOOLS",
    "TOOL_DOORS",
    "Action",
    "HttpReply",
    "Input",
    "LineReceived",
    "LineRefused",
    "McpServer",
    "Message",
    "ProtocolError",
    "ResourceTemplate",
    "Session",
    "State",
    "StdioFraming",
    "StreamableHttp",
    "error_reply",
    "finish",
    "instructions",
    "parse_message",
    "refusal_error",
    "request_id",
]
