"""MCP's tool surface: every contract door a tool, the list generated once, and a call's result shapes.

Seed 000, "MCP": ``tools/list`` is the generated table, whole
(:func:`brainy.contract.doors.mcp_tools`), and a door's refusal is a result the model
reads, not a protocol error.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from brainy.contract import doors as D
from brainy.contract import refusals as R
from brainy.net import codecs
from brainy.net.mcp.jsonrpc import JsonDoc

#: The tool list, generated once per reach: a key reaching exactly one brain may leave ``brain`` out.
#: Built at import in contract order, so every answer of a process is the same bytes a client may cache.
TOOLS: Mapping[bool, tuple[JsonDoc, ...]] = MappingProxyType(
    {single: tuple(D.mcp_tools(single_brain=single)) for single in (False, True)}
)
TOOL_DOORS: Mapping[str, D.Door] = MappingProxyType({d.mcp_tool: d for d in D.DOORS})


@dataclass(frozen=True)
class ToolShape:
    """What tools/call checks before the door: the arguments the schema names, and which it requires."""

    path: tuple[str, ...]  # path parameters, in order (brain, id, sha256)
    body: bool  # the door takes an argument document
    body_required: bool
    allowed: frozenset[str]


def _shape(door: D.Door) -> ToolShape:
    path = tuple(p.name for p in door.path_params)
    body = bool(door.document_params)
    required = bool(body and any(p.required for p in door.document_params))
    return ToolShape(path, body, required, frozenset(path + (("body",) if body else ())))


SHAPES: Mapping[str, ToolShape] = MappingProxyType({d.mcp_tool: _shape(d) for d in D.DOORS})


def tool_result(answer: JsonDoc) -> JsonDoc:
    """A door's answer: its JSON as text (for a model) and whole in structuredContent (for a program)."""
    return {
        "content": [{"type": "text", "text": codecs.to_json(answer).decode()}],
        "structuredContent": answer,
        "isError": False,
        "_meta": {"ms": 0.0},
    }


def tool_refusal(refusal: R.Refusal) -> JsonDoc:
    """A door's refusal: a result, flagged isError, with the class and its fields in structuredContent."""
    doc = {"error": refusal.to_wire()}
    return {
        "content": [{"type": "text", "text": codecs.to_json(doc).decode()}],
        "structuredContent": doc,
        "isError": True,
        "_meta": {"ms": 0.0},
    }
