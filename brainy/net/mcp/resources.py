"""MCP's resource surface: addresses matched against the one declaration of templates, and the answers.

The templates are :data:`brainy.contract.mcp_resources.RESOURCE_TEMPLATES`; this
module only reads an address against them and shapes what ``resources/list``,
``resources/templates/list`` and ``resources/read`` answer. Pure: the server calls the
door (:class:`brainy.net.mcp.server.McpServer`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from urllib.parse import quote, unquote

from brainy.contract import doors as D
from brainy.contract import refusals as R
from brainy.contract.mcp_resources import RESOURCE_TEMPLATES, SCHEME, ResourceTemplate, fill
from brainy.net import codecs
from brainy.net.mcp.jsonrpc import INTERNAL_ERROR, INVALID_PARAMS, JsonDoc, ProtocolError

MIME_TYPE = "application/json"
#: The store's skills folder (seed 000, "MCP"), served at ``brainy://skills/<path>``.
SKILLS = "/skills"
SKILL_PREFIX = "brainy://skills/"


def _not_found(uri: str) -> ProtocolError:
    # 2025-06-18 "Resources": an unknown resource is INVALID_PARAMS, with the uri in data.
    return ProtocolError(INVALID_PARAMS, "Resource not found", {"uri": uri})


def _match(template: ResourceTemplate, segments: Sequence[str]) -> dict[str, str] | None:
    """The placeholders' values when the address has the template's shape, each segment decoded once."""
    shape = template.template[len(SCHEME) :].split("/")
    if len(shape) != len(segments):
        return None
    values: dict[str, str] = {}
    for part, segment in zip(shape, segments):
        if part.startswith("{") and part.endswith("}"):
            values[part[1:-1]] = unquote(segment, errors="strict")
        elif part != segment:
            return None
    return values


def address(uri: str) -> tuple[ResourceTemplate, dict[str, str]]:
    """The offered template a ``brainy://`` URI fills, first in declaration order, with its placeholders' values.

    Each segment is percent-decoded once, as on HTTP (an id holding ``/`` travels as ``%2F``).
    """
    if not uri.startswith(SCHEME):
        raise _not_found(uri)
    segments = uri[len(SCHEME) :].split("/")
    for template in RESOURCE_TEMPLATES:
        if not template.offered:
            continue
        try:
            values = _match(template, segments)
        except UnicodeDecodeError:
            raise _not_found(uri) from None
        if values is not None:
            return template, values
    raise _not_found(uri)


def door_arguments(template: ResourceTemplate, values: dict[str, str]) -> tuple[str | None, str | None, JsonDoc]:
    """The door call an address stands for: its brain (None: the one brain of the key), its id, its document."""
    door = D.BY_NAME[template.door]
    id_ = next((values[p.name] for p in door.path_params if p.name != "brain"), None)
    document = {name: fill(text, values) for name, text in template.fills.items()}
    return values.get("brain"), id_, document


def resources_for(brains: Sequence[str]) -> list[JsonDoc]:
    """``resources/list``: for a key reaching one brain, each offered template that needs only the brain.

    A key reaching several brains is answered an empty list: no one store speaks for it
    (seed 001, "Which brain a call reaches"). The store's /skills/ join this list (:func:`skills`).
    """
    if len(brains) != 1:
        return []
    brain = brains[0]
    return [
        {
            "uri": t.fill({"brain": brain}),
            "name": f"{t.name} of {brain}",
            "title": f"{t.title}: {brain}",
            "mimeType": MIME_TYPE,
        }
        for t in RESOURCE_TEMPLATES
        if t.offered and t.placeholders == ("brain",)
    ]


def front_matter(text: str) -> dict[str, str]:
    """The ``key: value`` lines of a document's leading ``---`` block (scalars only; quotes stripped)."""
    lines = text.splitlines()
    if not lines or lines[0].strip() != "---":
        return {}
    found: dict[str, str] = {}
    for line in lines[1:]:
        if line.strip() in ("---", "..."):
            return found
        key, sep, value = line.partition(":")
        if sep and key.strip() and not key.startswith((" ", "\t")):
            found[key.strip()] = value.strip().strip("'\"")
    return {}  # never closed: not front matter


def _heading(text: str) -> str | None:
    for line in text.splitlines():
        if line.startswith("# "):
            return line[2:].strip() or None
    return None


def skills(listing: dict[str, Any]) -> list[JsonDoc]:
    """``resources/list``'s skills: every file of a readdir of /skills, titled and described by its front
    matter (``title`` or ``name``, ``description``), else by its first heading and its path."""
    found = []
    for node in listing.get("nodes", ()):
        if node.get("type") != "file":
            continue
        relative = node["path"][len(SKILLS) + 1 :]
        text = node.get("content") or ""
        meta = front_matter(text)
        entry: JsonDoc = {
            "uri": SKILL_PREFIX + quote(relative, safe=""),
            "name": relative,
            "title": meta.get("title") or meta.get("name") or _heading(text) or relative,
            "mimeType": node.get("contentType") or "application/octet-stream",
            "size": node["size"],
        }
        if meta.get("description"):
            entry["description"] = meta["description"]
        found.append(entry)
    return found


def file_contents(uri: str, answer: JsonDoc) -> JsonDoc:
    """A readFile answer (a skill) as the resource's contents: the file's own text and media type."""
    return {
        "contents": [{"uri": uri, "mimeType": answer["contentType"], "text": answer["content"]}],
        "_meta": {"ms": 0.0},
    }


def templates() -> list[JsonDoc]:
    """``resources/templates/list``: every offered template, in declaration order."""
    return [
        {
            "uriTemplate": t.template,
            "name": t.name,
            "title": t.title,
            "description": t.description,
            "mimeType": MIME_TYPE,
        }
        for t in RESOURCE_TEMPLATES
        if t.offered
    ]


def contents(uri: str, answer: JsonDoc) -> JsonDoc:
    """A door's answer as the resource's contents, with the ``_meta.ms`` slot the clock fills."""
    return {
        "contents": [{"uri": uri, "mimeType": MIME_TYPE, "text": codecs.to_json(answer).decode()}],
        "_meta": {"ms": 0.0},
    }


def read(uri: str, template: ResourceTemplate, outcome: Any) -> JsonDoc:
    """``resources/read``'s answer from the door's outcome (``brainy.net.ws.CallOutcome``): the contents, or the
    refusal raised as a JSON-RPC error."""
    if outcome.refusal is not None:
        raise refused(outcome.refusal)
    return file_contents(uri, outcome.answer) if template.file else contents(uri, outcome.answer)


def refused(refusal: R.Refusal) -> ProtocolError:
    """A refused read as a JSON-RPC error, the refusal whole in data.

    Resources are application-driven, not model-driven: a read that fails is a JSON-RPC
    error (2025-06-18 "Resources": not found is INVALID_PARAMS), not an ``isError`` result.
    """
    code = INTERNAL_ERROR if refusal.name == "InternalError" else INVALID_PARAMS
    return ProtocolError(code, refusal.message, refusal.to_wire())


__all__ = [
    "MIME_TYPE",
    "address",
    "contents",
    "door_arguments",
    "file_contents",
    "front_matter",
    "read",
    "refused",
    "resources_for",
    "skills",
    "templates",
]
