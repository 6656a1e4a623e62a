"""The OpenAPI 3.1 document (brainy/contract/openapi.py): valid, generated from the contract, joined back to it in
both directions, committed as docs/openapi.json and served byte for byte at GET /openapi.json.

DESIGN.md "The door table is a law" (every surface is generated and joined back); DOORS.md 0.2 (the HTTP
scheme), 0.3 (answers), 10.2 (server doors), 11 (refusals); issue 10, "OpenAPI, generated".
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from openapi_spec_validator import OpenAPIV31SpecValidator, validate

from brainy import __version__
from brainy.contract import doors as D
from brainy.contract import openapi as O
from brainy.contract import refusals as R
from brainy.contract import types as T
from brainy.net import codecs
from brainy.net import server_doors as S

ROOT = Path(__file__).resolve().parent.parent
DOC = O.document(__version__)
TABLE = {r["name"]: r for r in D.CONTRACT.refusals}


def _operations() -> list[tuple[str, str, dict[str, Any]]]:
    return [(method.upper(), path, op) for path, item in DOC["paths"].items() for method, op in item.items()]


def _resolve(node: dict[str, Any]) -> dict[str, Any]:
    """A ``$ref`` to ``#/components/...`` followed, once."""
    if "$ref" not in node:
        return node
    section, name = node["$ref"].removeprefix("#/components/").split("/", 1)
    return DOC["components"][section][name]


def _validator(schema: dict[str, Any]) -> Draft202012Validator:
    """A JSON Schema validator whose ``#/components/...`` references resolve in this document."""
    return Draft202012Validator({**schema, "components": DOC["components"]})


def test_the_document_is_valid_openapi_3_1():
    """openapi-spec-validator accepts the whole document as OpenAPI 3.1."""
    assert DOC["openapi"] == "3.1.0" and DOC["info"]["version"] == __version__
    validate(DOC, cls=OpenAPIV31SpecValidator)


def test_every_binding_is_one_operation():
    """Each contract door is reached by exactly one operation (the 17 vfs doors by the one POST P/vfs), each server
    door by its own or, for the SSE stream, by the changes door's negotiation; /openapi.json is listed too."""
    doors: list[str] = []
    server: list[str] = []
    for method, path, op in _operations():
        mark = op["x-brainy"]
        if "door" in mark:
            door = D.BY_NAME[mark["door"]]
            assert (door.method, door.path) == (method, path) and op["operationId"] == door.name
            doors.append(door.name)
            server.extend(mark.get("negotiated", {}).values())
        elif "doors" in mark:
            assert (method, path) == D.VFS_ROUTE and op["operationId"] == "vfs"
            doors.extend(mark["doors"])
        else:
            sdoor = S.BY_NAME[mark["serverDoor"]]
            assert (sdoor.method, sdoor.path) == (method, path)
            server.append(sdoor.name)
    assert Counter(doors) == Counter(d.name for d in D.DOORS)
    assert Counter(server) == Counter(s.name for s in S.SERVER_DOORS)
    operation_ids = [op["operationId"] for _, _, op in _operations()]
    assert len(operation_ids) == len(set(operation_ids))


@pytest.mark.parametrize("door", [d for d in D.DOORS if d.layer != "vfs"], ids=lambda d: d.name)
def test_parameters_and_bodies_are_typed_from_the_contract(door):
    """Path and query parameters are the door's own, each typed by schema() of its param's notation with its declared
    default; the body is a closed object of the body params in JSON and MessagePack, required when a body param is."""

    def typed(p):
        return T.schema(p.tree) | ({"default": p.default} if p.default is not None else {})

    op = DOC["paths"][door.path][door.method.lower()]
    declared = {(p["name"], p["in"]): p for p in op["parameters"] if "$ref" not in p}
    assert set(declared) == {(p.name, p.location) for p in door.params if p.location != "body"}
    for p in door.params:
        if p.location != "body":
            assert declared[p.name, p.location]["schema"] == typed(p)
            assert declared[p.name, p.location]["required"] is p.required
    body = [p for p in door.params if p.location == "body"]
    if not body:
        assert "requestBody" not in op
        return
    request = op["requestBody"]
    assert set(request["content"]) == {codecs.JSON, codecs.MSGPACK}
    schema = request["content"][codecs.JSON]["schema"]
    assert request["content"][codecs.MSGPACK]["schema"] == schema
    assert schema["additionalProperties"] is False
    assert schema["properties"] == {p.name: typed(p) for p in body}
    assert schema.get("required", []) == [p.name for p in body if p.required]
    assert request["required"] is any(p.required for p in body)


def test_the_vfs_route_is_one_of_keyed_by_op():
    """POST P/vfs takes one of 17 bodies, told apart by op, each op's schema holding op as a constant and the
    door's own body params."""
    op = DOC["paths"][D.VFS_ROUTE[1]]["post"]
    schema = op["requestBody"]["content"][codecs.MSGPACK]["schema"]
    assert schema["discriminator"]["propertyName"] == "op"
    vfs = [d for d in D.DOORS if d.layer == "vfs"]
    assert list(schema["discriminator"]["mapping"]) == [d.name for d in vfs]
    assert [ref["$ref"] for ref in schema["oneOf"]] == list(schema["discriminator"]["mapping"].values())
    validator = _validator(schema)
    for door in vfs:
        body = _resolve(schema["oneOf"][[d.name for d in vfs].index(door.name)])
        assert body["properties"]["op"] == {"const": door.name, "description": body["properties"]["op"]["description"]}
        assert set(body["properties"]) == {"op"} | {p.name for p in door.params if p.location == "body"}
        assert body["required"][0] == "op"
    assert validator.is_valid({"op": "readFile", "path": "/a.md"})
    assert not validator.is_valid({"op": "readFile"})  # path is required
    assert not validator.is_valid({"op": "readFile", "path": "/a", "recursive": True})  # readdir's, not readFile's
    assert not validator.is_valid({"op": "format", "path": "/a"})
    assert not validator.is_valid({"path": "/a.md"})


def _statuses(names: list[str]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for name in names:
        if TABLE[name]["status"] is not None:
            out.setdefault(str(TABLE[name]["status"]), []).append(name)
    return out


def _refusal_names(response: dict[str, Any]) -> list[str]:
    content = _resolve(response)["content"]
    schema = next(iter(content.values()))["schema"]
    error = schema["properties"]["error"]
    if "data" in error.get("properties", {}):
        error = error["properties"]["data"]
    return error["properties"]["name"]["enum"]


@pytest.mark.parametrize("door", [d for d in D.DOORS if d.layer != "vfs"], ids=lambda d: d.name)
def test_each_status_a_door_refuses_with_is_a_response(door):
    """Every status of the door's refusals (its sets, its own, its disposition's) is a response naming exactly its
    classes; the answer is 200 unless the door is in-process only; before-a-door refusals are the default."""
    op = DOC["paths"][door.path][door.method.lower()]
    names = list(D.all_refusals(door))
    if door.name == "changes":  # the SSE stream shares the path (DOORS.md 10.2)
        names.extend(n for n in S.BY_NAME["server.changesStream"].refusals if n not in names)
    want = _statuses(names)
    got = {status: _refusal_names(r) for status, r in op["responses"].items() if status not in ("200", "default")}
    assert got == want
    assert ("200" in op["responses"]) is (door.disposition != "inProcessOnly")
    assert _refusal_names(op["responses"]["default"]) == list(O.BEFORE_A_DOOR)


def test_vfs_and_server_doors_refuse_with_their_statuses():
    """The vfs route answers every status any vfs door refuses with; each server door its sets', its own and its
    disposition's (the WebSocket frame classes travel on the socket, so no HTTP status lists them)."""
    op = DOC["paths"][D.VFS_ROUTE[1]]["post"]
    names: list[str] = []
    for door in D.DOORS:
        if door.layer == "vfs":
            names.extend(n for n in D.all_refusals(door) if n not in names)
    assert {s: _refusal_names(r) for s, r in op["responses"].items() if s not in ("200", "default")} == _statuses(names)
    for sdoor in S.SERVER_DOORS:
        if sdoor.accept is not None:
            continue
        op = DOC["paths"][sdoor.path][sdoor.method.lower()]
        names = [n for key in sdoor.sets for n in D.REFUSAL_SETS[key].names] + list(sdoor.refusals)
        names += ["NotYetNativeError"] if sdoor.disposition == "notYetNative" else []
        got = {s: _refusal_names(r) for s, r in op["responses"].items() if s not in ("200", "202", "default")}
        assert got == _statuses(names), sdoor.name
        assert ("200" in op["responses"]) is (sdoor.disposition == "native"), sdoor.name
        assert op["security"] == ([] if sdoor.who == "anyone" else [{"bearer": []}]), sdoor.name


def test_answers_and_refusals_have_the_wire_shape():
    """A door's answer is an object with _meta.ms; a refusal is {error: {name, message, ...fields}, _meta}, and a
    response admits exactly its classes. Real refusals, as the classes put them on the wire, validate."""
    answer = _validator({"$ref": "#/components/schemas/Answer"})
    assert answer.is_valid({"entity": None, "_meta": {"ms": 0.2}})
    assert not answer.is_valid({"entity": None})
    refusal = _validator({"$ref": "#/components/schemas/Refusal"})
    for cls in R.REGISTRY.values():
        fields = {f: "x" for f in cls.required}
        assert refusal.is_valid({"error": cls(**fields).to_wire(), "_meta": {"ms": 1.0}}), cls.name
    wire = R.InProcessOnlyError(door="use", instead="x").to_wire()
    assert not refusal.is_valid({"error": {**wire, "colour": "red"}, "_meta": {"ms": 1.0}})
    assert not refusal.is_valid({"error": {"name": "NoSuchError", "message": "x"}, "_meta": {"ms": 1.0}})
    using = D.BY_NAME["use"]
    pending = DOC["paths"][using.path][using.method.lower()]["responses"]["501"]
    narrowed = _validator(_resolve(pending)["content"][codecs.JSON]["schema"])
    assert narrowed.is_valid({"error": wire, "_meta": {"ms": 1.0}})
    other = R.NotYetNativeError(door="host.move", release="0.7.0").to_wire()
    assert refusal.is_valid({"error": other, "_meta": {"ms": 1.0}}) and not narrowed.is_valid(
        {"error": other, "_meta": {"ms": 1.0}}
    )


def test_every_refusal_class_is_a_schema():
    """Each refusal in the contract is a component schema: its name as a constant, message, its fields (required
    ones required), no others."""
    for entry in D.CONTRACT.refusals:
        schema = DOC["components"]["schemas"][entry["name"]]
        assert schema["properties"]["name"] == {"const": entry["name"]}
        assert set(schema["properties"]) == {"name", "message", *entry["fields"], *entry["optional"]}
        assert schema["required"] == ["name", "message", *entry["fields"]]
        assert schema["additionalProperties"] is False


def test_media_types_are_the_ones_the_codecs_speak():
    """The document's two encodings are brainy/net/codecs.py's (the contract package cannot import net)."""
    assert (O.JSON, O.MSGPACK) == (codecs.JSON, codecs.MSGPACK)


def test_the_committed_copy_is_fresh():
    """docs/openapi.json is exactly a freshly generated document (tools/gen_contract.py writes it; the generator's
    --check, run by test_contract_surfaces, reports it when stale)."""
    assert (ROOT / "docs" / "openapi.json").read_text("utf-8") == O.text(__version__)


def test_get_openapi_json_serves_the_committed_copy_to_anyone(tmp_path):
    """GET /openapi.json needs no credential and answers docs/openapi.json byte for byte, as application/json
    with Server-Timing; it is served as text, so no _meta is merged into it."""
    from brainy.auth.keys import KeyTable
    from brainy.engine import init_store
    from brainy.host.pool import Pool
    from brainy.net.app import App, Request, Response

    init_store(tmp_path / "notes")
    keys = tmp_path / "keys"
    keys.write_text("bky_openapi_tests_person_key_0123456  person:a@example.com  notes\n")
    keys.chmod(0o600)
    pool = Pool({"notes": tmp_path / "notes"})
    try:
        app = App(pool, KeyTable.open(keys), "1970-01-01T00:00:00Z")
        for method in ("GET", "HEAD"):
            answered = app.handle(Request(method, "/openapi.json", "", {}, b""))
            if not isinstance(answered, Response):
                answered = asyncio.run(answered)
            headers = dict(answered.headers)
            assert answered.status == 200
            assert headers[b"content-type"] == b"application/json"
            assert headers[b"server-timing"].startswith(b"brainy;dur=")
            assert answered.body == (ROOT / "docs" / "openapi.json").read_bytes()
        assert "_meta" not in json.loads(answered.body)
    finally:
        pool.close_all()
