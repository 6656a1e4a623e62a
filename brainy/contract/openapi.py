"""The OpenAPI 3.1 document of every HTTP binding, generated from the contract.

One more surface derived from ``api-contract.json`` (DESIGN.md, "The door table is a
law"): every door's binding (DOORS.md 0.2) and every server door's (10.2), with

* paths and methods, path parameters and a GET door's query parameters, each typed by
  the JSON Schema of its param's notation (``brainy/contract/types.py``);
* request bodies in JSON and MessagePack (the media types ``brainy/net/codecs.py``
  speaks), closed objects of the door's body params. The 17 vfs doors share
  ``POST P/vfs``: its body is a ``oneOf`` of one schema per door, keyed by ``op``;
* the answer shape, an object with ``_meta.ms`` (DOORS.md 0.3). The contract carries an
  answer *type* in each signature, not a schema, so the rest of the answer is described
  in words, never invented;
* the refusal shape, ``{error: {name, message, ...fields}, _meta}`` (DOORS.md 11), under
  each status the operation can refuse with: its refusal sets, its own refusals and its
  disposition's, each class a schema of its own under ``components.schemas``.

A server door that shares a door's route, told apart by ``Accept`` (the SSE stream on
``GET P/changes``), is described inside that door's operation, since OpenAPI has one
operation per method and path.

``/openapi.json`` itself is not a contract server door: DOORS.md 10.2 lists nine and the
contract transcribes them. ``OPENAPI_DOOR`` describes it in the same record a server
door has, so the server routes it and this document lists it like the others.

Pure: ``document(version)`` builds the document from the contract; ``text(version)``
renders it as the committed ``docs/openapi.json`` is written (``tools/gen_contract.py``)
and as ``GET /openapi.json`` serves it, byte for byte.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from functools import partial
from typing import Any

from brainy.contract import doors as D
from brainy.contract import types as T

OPENAPI_VERSION = "3.1.0"
#: The two encodings of every body (brainy/net/codecs.py: JSON and MSGPACK; a test holds them equal).
JSON = "application/json"
MSGPACK = "application/msgpack"
BODY_MEDIA = (JSON, MSGPACK)

#: ``GET /openapi.json``: served beside the contract, outside it (DOORS.md 10.2 lists nine server doors).
OPENAPI_DOOR = D.ServerDoor(
    name="server.openapi",
    who="anyone",
    summary="The OpenAPI 3.1 document of every HTTP binding, generated from the contract.",
    when="Build time: generate an HTTP client, or read the bindings with OpenAPI tools.",
    answer="OpenAPI 3.1 (JSON), exactly as docs/openapi.json",
    method="GET",
    path="/openapi.json",
    accept=None,
    sets=(),
    refusals=(),
    disposition="native",
)

#: Refusals a request can meet before any door is known (DOORS.md 0.6), and the two the listeners
#: add (api-contract.md, "Refusals beyond the catalogue"): the ``default`` answer of every operation.
BEFORE_A_DOOR = (
    "UnknownDoorError",
    "MethodNotAllowedError",
    "TransportNotWiredError",
    "MalformedRequestError",
    "HeaderTooLargeError",
)

#: A server door's answer by the first word of its contract ``answer``: (media type, schema), or
#: absent for an object answer in JSON or MessagePack with ``_meta`` merged in.
_TEXT_ANSWERS: dict[str, tuple[str, dict[str, Any]]] = {
    "Markdown": ("text/markdown", {"type": "string"}),
    "text": ("text/plain", {"type": "string"}),
    "SSE": ("text/event-stream", {"type": "string"}),
    "JSON-RPC": (JSON, {"type": "object", "description": "A JSON-RPC 2.0 reply (MCP 2025-06-18)."}),
    "OpenAPI": (JSON, {"type": "object", "description": "This document, with no _meta: it is served as committed."}),
}

_SCHEMAS = "#/components/schemas/"
_META = {"$ref": _SCHEMAS + "Meta"}
_TIMING = {"Server-Timing": {"$ref": "#/components/headers/Server-Timing"}}
_BEARER: list[dict[str, list[str]]] = [{"bearer": []}]


def _refusal_table(contract: D.Contract) -> dict[str, Any]:
    return {r["name"]: r for r in contract.refusals}


def _refusal_schema(entry: Any) -> dict[str, Any]:
    """One refusal class as it travels inside ``error``: its name, its text and its fields (DOORS.md 11)."""
    fields = [*entry.get("fields", ()), *entry.get("optional", ())]
    notes = [entry.get("meaning", "")]
    if entry.get("status") is None:
        notes.append("Never an HTTP answer: " + ("a WebSocket frame." if entry.get("ws") else "it refuses a start."))
    if entry.get("emitted") is False:
        notes.append("Never emitted: listed so old clients can map it.")
    return {
        "type": "object",
        "description": " ".join(n for n in notes if n),
        "properties": {"name": {"const": entry["name"]}, "message": {"type": "string"}, **{f: {} for f in fields}},
        "required": ["name", "message", *entry.get("fields", ())],
        "additionalProperties": False,
    }


def _refused(names: Sequence[str], lead: str = "Refused", jsonrpc: bool = False) -> dict[str, Any]:
    """The response for refusals ``names``: the refusal document, or MCP's JSON-RPC error carrying it.

    The document is ``components.schemas.Refusal`` (any class), narrowed to ``names`` by an enum on
    ``error.name``: exact, and a fraction of the size of a ``oneOf`` per response.
    """
    narrowed = {"properties": {"name": {"enum": list(names)}}}
    if jsonrpc:
        schema: dict[str, Any] = {
            "$ref": _SCHEMAS + "JsonRpcRefusal",
            "properties": {"error": {"properties": {"data": narrowed}}},
        }
        content = {JSON: {"schema": schema}}
    else:
        schema = {"$ref": _SCHEMAS + "Refusal", "properties": {"error": narrowed}}
        content = {media: {"schema": schema} for media in BODY_MEDIA}
    return {
        "description": f"{lead}: " + ", ".join(f"`{n}`" for n in names) + ".",
        "headers": _TIMING,
        "content": content,
    }


class _Responses:
    """The refusal responses of the whole document, each written once under ``components.responses``.

    A response is named for exactly what it holds, its status and its classes
    (``404.NoSuchBrainError.StoreNotFoundError``), so the name is stable while those are, and
    the hundred operations that refuse alike share one entry.
    """

    def __init__(self, table: dict[str, Any]) -> None:
        self.table = table
        self.components: dict[str, Any] = {}

    def _ref(self, key: str, make: Callable[[], dict[str, Any]]) -> dict[str, str]:
        if key not in self.components:
            self.components[key] = make()
        return {"$ref": "#/components/responses/" + key}

    def for_names(self, names: Iterable[str], jsonrpc: bool = False) -> dict[str, Any]:
        """A response per HTTP status ``names`` can refuse with (classes with no HTTP status are left out)."""
        by_status: dict[int, list[str]] = {}
        for name in names:
            status = self.table[name].get("status")
            if status is not None:
                by_status.setdefault(status, []).append(name)
        prefix = "mcp." if jsonrpc else ""
        out = {
            str(status): self._ref(
                f"{prefix}{status}." + ".".join(by_status[status]),
                partial(_refused, by_status[status], jsonrpc=jsonrpc),
            )
            for status in sorted(by_status)
        }
        out["default"] = self._ref(
            prefix + "beforeADoor",
            lambda: _refused(
                BEFORE_A_DOOR, "Before any door is known, a request can also be refused with", jsonrpc=jsonrpc
            ),
        )
        return out


def _answer_type(door: D.Door) -> str:
    """The answer type of a door's signature, without its ``Promise``: ``FindAnswer``, ``{id, generation}``."""
    result = T.parse_signature(door.signature)[1].result
    if isinstance(result, T.Named) and result.name == "Promise" and len(result.args) == 1:
        result = result.args[0]
    return str(result)


def _answer(description: str) -> dict[str, Any]:
    return {
        "description": description,
        "headers": _TIMING,
        "content": {media: {"schema": {"$ref": _SCHEMAS + "Answer"}} for media in BODY_MEDIA},
    }


def _today(disposition: str, release: str | None, instead: str | None) -> str:
    if disposition == "notYetNative":
        return f"Not native yet: every call refuses 501 `NotYetNativeError` until {release}."
    if disposition == "inProcessOnly":
        return f"In-process only: every call refuses 501 `InProcessOnlyError`; instead, {instead}."
    return ""


#: What a door's access class and owner rung ask of the credential (DOORS.md 0.4), in words.
_ASKS = {
    "principal": "",
    "service": "Access: the service key only.",
    None: "",
    "owner": "Owner rung: an owner triple, or an asserted owner (DOORS.md 0.4).",
    "ownerTriple": "Owner triple: a minted token scoped read, write and owner (DOORS.md 0.4).",
}


def _door_description(door: D.Door) -> str:
    asks = (_ASKS[door.access], _ASKS[door.rung], _today(door.disposition, door.release, door.instead))
    return "\n".join([door.when, "", f"Signature: `{door.signature}`", *(line for line in asks if line)])


def _param_schema(p: D.Param) -> dict[str, Any]:
    """A param's type as JSON Schema, with the default the contract declares for it."""
    schema = T.schema(p.tree)
    if p.default is not None:
        schema = {**schema, "default": p.default}
    return schema


def _body_schema(params: Sequence[D.Param], op: str | None = None) -> dict[str, Any]:
    """The argument document: a closed object of the body params (``op`` first on the shared vfs route)."""
    properties: dict[str, Any] = {}
    required: list[str] = []
    if op is not None:
        properties[D.VFS_SELECTOR] = {"const": op, "description": "The door, named on the shared vfs route."}
        required.append(D.VFS_SELECTOR)
    for p in params:
        properties[p.name] = _param_schema(p)
        if p.required:
            required.append(p.name)
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    schema["additionalProperties"] = False
    return schema


def _request_body(schema: dict[str, Any], required: bool) -> dict[str, Any]:
    return {
        "required": required,
        "description": "The argument document (DOORS.md 0.2): JSON, or MessagePack with `Content-Type: "
        "application/msgpack`. An empty body is `{}`.",
        "content": {media: {"schema": schema} for media in BODY_MEDIA},
    }


def _parameters(door: D.Door) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [
        {"name": p.name, "in": p.location, "required": p.required, "schema": _param_schema(p)}
        for p in door.params
        if p.location in ("path", "query")
    ]
    out.extend({"$ref": f"#/components/parameters/{h}"} for h in _CALLER_HEADERS)
    return out


def _door_operation(door: D.Door, refused: _Responses, stream: D.ServerDoor | None = None) -> dict[str, Any]:
    """A door's operation; ``stream`` is a server door sharing its route, picked by ``Accept`` (DOORS.md 10.2),
    folded in because OpenAPI has one operation per method and path."""
    responses: dict[str, Any] = {}
    if door.disposition != "inProcessOnly":  # an in-process-only door never answers over a wire
        answer = (
            f"an object with `_meta.ms` merged in (DOORS.md 0.3). Its fields are the signature's answer, "
            f"`{_answer_type(door)}`; the contract carries no machine-readable answer schema."
        )
        when = f"From {door.release}, the answer: " if door.disposition == "notYetNative" else "The answer: "
        responses["200"] = _answer(when + answer)
    refusals = list(D.all_refusals(door))
    description = _door_description(door)
    extra: dict[str, Any] = {}
    if stream is not None:
        refusals.extend(n for n in _server_refusals(stream) if n not in refusals)
        description += (
            f"\n\nWith `Accept: {stream.accept}` this path is the server door `{stream.name}`: "
            f"{stream.summary} {_server_description(stream, refused.table).splitlines()[-1]}"
        )
        if stream.disposition == "native":
            responses["200"]["content"].update(_server_answer(stream)["content"])
        extra["negotiated"] = {stream.accept: stream.name}
    responses.update(refused.for_names(refusals))
    op: dict[str, Any] = {
        "operationId": door.name,
        "tags": [door.layer],
        "summary": door.summary,
        "description": description,
        "security": _BEARER,
        "parameters": _parameters(door),
    }
    body = [p for p in door.params if p.location == "body"]
    if body:
        op["requestBody"] = _request_body(_body_schema(body), any(p.required for p in body))
    op["responses"] = responses
    op["x-brainy"] = {"door": door.name, "kind": door.kind, "access": door.access, **door.disposition_entry(), **extra}
    return op


def _vfs_operation(doors: Sequence[D.Door], refused: _Responses) -> dict[str, Any]:
    """``POST P/vfs``: one operation for the 17 vfs doors, its body a oneOf keyed by ``op`` (DOORS.md 0.2, 8)."""
    refusals: list[str] = []
    for door in doors:
        refusals.extend(n for n in D.all_refusals(door) if n not in refusals)
    lines = ["Every vfs door is this one route; the body field `op` names the door (DOORS.md 0.2).", ""]
    for door in doors:
        today = _today(door.disposition, door.release, door.instead)
        lines.append(f"- `{door.name}` ({door.kind}): {door.when} `{door.signature}`" + (f" {today}" if today else ""))
    answers = "; ".join(f"`{d.name}`: `{_answer_type(d)}`" for d in doors)
    responses = {
        "200": _answer(
            f"The door's answer, an object with `_meta.ms` merged in; by op, {answers}. The "
            "contract carries no machine-readable answer schema."
        ),
        **refused.for_names(refusals),
    }
    mapping = {d.name: _SCHEMAS + _vfs_schema_name(d) for d in doors}
    schema = {
        "oneOf": [{"$ref": ref} for ref in mapping.values()],
        "discriminator": {"propertyName": D.VFS_SELECTOR, "mapping": mapping},
    }
    return {
        "operationId": "vfs",
        "tags": ["vfs"],
        "summary": "The virtual file system: 17 doors on one route, by `op`.",
        "description": "\n".join(lines),
        "security": _BEARER,
        "parameters": _parameters(doors[0]),
        "requestBody": _request_body(schema, True),
        "responses": responses,
        "x-brainy": {"selector": D.VFS_SELECTOR, "doors": [d.name for d in doors]},
    }


def _vfs_schema_name(door: D.Door) -> str:
    return f"vfs.{door.name}"


def _server_refusals(door: D.ServerDoor) -> list[str]:
    """Every refusal a server door can give: its sets', its own, then its disposition's."""
    names = [n for key in door.sets for n in D.REFUSAL_SETS[key].names_for(D.SERVER_LAYER)]
    names.extend(n for n in door.refusals if n not in names)
    if door.disposition == "notYetNative":
        names.append("NotYetNativeError")
    return names


def _server_answer(door: D.ServerDoor) -> dict[str, Any]:
    """A native server door's 200: a text answer in its media type, or an object with ``_meta``."""
    text = _TEXT_ANSWERS.get(door.answer.split()[0].rstrip(":"))
    if text is None:
        return _answer(f"{door.answer}, with `_meta.ms` merged in.")
    return {"description": door.answer, "headers": _TIMING, "content": {text[0]: {"schema": text[1]}}}


#: What a server door's description adds, beyond its contract entry, by name.
_SERVER_NOTES = {
    "server.mcp": "`DELETE /mcp` with `Mcp-Session-Id` ends a session; `GET /mcp` is 405 (docs/mcp.md).",
    "server.oauthProtectedResource": "Served only when an authorization server is configured; without one the path "
    "is `404 UnknownDoorError` (DOORS.md 10.2), and this release configures none.",
}


def _server_description(door: D.ServerDoor, table: dict[str, Any]) -> str:
    who = {
        "anyone": "Anyone: no credential.",
        "credential": "Any credential.",
        "principal": "A principal's credential.",
    }[door.who]
    lines = [door.when, "", f"Answer: {door.answer}", f"Who: {who}"]
    if door.name in _SERVER_NOTES:
        lines.append(_SERVER_NOTES[door.name])
    socket_only = [n for n in door.refusals if table[n].get("status") is None]  # the WebSocket frame classes
    if socket_only:
        lines.append("Refusals on the socket, not as HTTP answers: " + ", ".join(f"`{n}`" for n in socket_only) + ".")
    lines.append(_today(door.disposition, door.release, door.instead) or "Native: it answers.")
    return "\n".join(lines)


def _server_operation(door: D.ServerDoor, refused: _Responses) -> dict[str, Any]:
    jsonrpc = door.answer == "JSON-RPC"  # MCP: a refusal is a JSON-RPC error carrying it (docs/mcp.md)
    responses: dict[str, Any] = {}
    if door.disposition == "native":
        responses["200"] = _server_answer(door)
        if jsonrpc:
            responses["202"] = {"description": "A notification or a response, accepted; no body.", "headers": _TIMING}
    responses.update(refused.for_names(_server_refusals(door), jsonrpc))
    op: dict[str, Any] = {
        "operationId": door.name,
        "tags": [D.SERVER_LAYER],
        "summary": door.summary,
        "description": _server_description(door, refused.table),
        "security": [] if door.who == "anyone" else _BEARER,
    }
    if jsonrpc:
        op["requestBody"] = {
            "required": True,
            "description": "One JSON-RPC 2.0 message.",
            "content": {JSON: {"schema": {"type": "object"}}},
        }
    op["responses"] = responses
    op["x-brainy"] = {"serverDoor": door.name, "who": door.who, "disposition": door.to_entry()["disposition"]}
    return op


_CALLER_HEADERS = {
    "X-Brainy-Caller": (
        {"type": "string"},
        "The caller a service key asserts (DOORS.md 0.4): `kind:principal`. "
        "Refused from any other credential (`CallerAssertionRefusedError`).",
    ),
    "X-Brainy-Owner": ({"type": "string", "enum": ["true", "false"]}, "With X-Brainy-Caller: the caller is the owner."),
    "X-Brainy-Roles": ({"type": "string"}, "With X-Brainy-Caller: the caller's roles, comma-separated."),
}


def document(version: str, contract: D.Contract = D.CONTRACT) -> dict[str, Any]:
    """The OpenAPI 3.1 document of every HTTP binding in ``contract``; ``version`` is brainy's."""
    refused = _Responses(_refusal_table(contract))
    paths: dict[str, dict[str, Any]] = {}
    vfs = [d for d in contract.doors if d.layer == "vfs"]
    by_name = {d.name: d for d in contract.doors}
    # The loader lets a server door share a door's route only with an accept; one per route is all there is.
    streams = {(s.method, s.path): s for s in contract.server_doors if s.accept is not None}
    for route in D.route_table(contract.doors):
        if route.door is None:
            op = _vfs_operation(vfs, refused)
        else:
            op = _door_operation(by_name[route.door], refused, streams.get((route.method, route.path)))
        paths.setdefault(route.path, {})[route.method.lower()] = op
    for sdoor in (*contract.server_doors, OPENAPI_DOOR):
        if sdoor.accept is None:
            paths.setdefault(sdoor.path, {})[sdoor.method.lower()] = _server_operation(sdoor, refused)

    schemas: dict[str, Any] = {
        "Meta": {
            "type": "object",
            "description": "Added by the dispatcher to every JSON and MessagePack answer.",
            "properties": {
                "ms": {
                    "type": "number",
                    "description": "The call's wall time in milliseconds, the same figure as Server-Timing.",
                }
            },
            "required": ["ms"],
        },
        "Answer": {
            "type": "object",
            "description": "A door's answer: always an object (DOORS.md 0.3). The contract "
            "states each answer's type in the door's signature; only `_meta` "
            "is described here.",
            "properties": {"_meta": _META},
            "required": ["_meta"],
        },
    }
    schemas.update(
        {_vfs_schema_name(d): _body_schema([p for p in d.params if p.location == "body"], d.name) for d in vfs}
    )
    schemas.update({r["name"]: _refusal_schema(r) for r in contract.refusals})
    error = {
        "oneOf": [{"$ref": _SCHEMAS + r["name"]} for r in contract.refusals],
        "discriminator": {"propertyName": "name"},
    }
    schemas["Refusal"] = {
        "type": "object",
        "description": "A refusal (DOORS.md 11): its class, its text and its fields, with `_meta.ms`.",
        "properties": {"error": error, "_meta": _META},
        "required": ["error", "_meta"],
    }
    schemas["JsonRpcRefusal"] = {
        "type": "object",
        "description": "A refusal on /mcp: a JSON-RPC 2.0 error reply whose `error.data` is the refusal (docs/mcp.md).",
        "properties": {
            "jsonrpc": {"const": "2.0"},
            "id": {},
            "error": {
                "type": "object",
                "properties": {"code": {"type": "integer"}, "message": {"type": "string"}, "data": error},
                "required": ["code", "message", "data"],
            },
        },
        "required": ["jsonrpc", "id", "error"],
    }
    layers = [(layer, f"The {layer} doors.") for layer in D.LAYERS]
    return {
        "openapi": OPENAPI_VERSION,
        "info": {
            "title": "brainy",
            "version": version,
            "summary": "A knowledge store for AI agents and the services around them.",
            "description": (
                f"Every HTTP binding of brainy's contract {contract.contract_version} (`GET /contract.json`), "
                "generated from it: the contract is the source, this document a view of it. A request carries the "
                "door's path parameters and its argument document (query parameters on GET; a JSON or MessagePack "
                "body otherwise). An answer is an object with `_meta.ms`; a refusal is `{error: {name, message, "
                "...fields}, _meta}` with its class's status (DOORS.md 0.2, 0.3, 11). `Accept: application/msgpack` "
                "answers in MessagePack. Every answer carries `Server-Timing: brainy;dur=<ms>`."
            ),
        },
        "tags": [{"name": name, "description": text} for name, text in layers]
        + [{"name": D.SERVER_LAYER, "description": "The server's own doors (DOORS.md 10.2)."}],
        "paths": paths,
        "components": {
            "schemas": schemas,
            "responses": refused.components,
            "parameters": {
                name: {"name": name, "in": "header", "required": False, "schema": schema, "description": text}
                for name, (schema, text) in _CALLER_HEADERS.items()
            },
            "headers": {
                "Server-Timing": {
                    "description": "`brainy;dur=<ms>`: the call's one clock, as `_meta.ms`.",
                    "schema": {"type": "string"},
                }
            },
            "securitySchemes": {
                "bearer": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "`Authorization: Bearer <key>`: a key of the server's keys file, or a minted `bk1.` "
                    "token (docs/keys.md).",
                }
            },
        },
    }


def text(version: str, contract: D.Contract = D.CONTRACT) -> str:
    """``document`` rendered as ``docs/openapi.json`` is committed and ``GET /openapi.json`` serves it."""
    return json.dumps(document(version, contract), indent=1, ensure_ascii=False) + "\n"
