"""Every generated surface joins back to the contract in both directions, exactly once per door.

DESIGN.md: "A test joins each generated surface back to the contract in both directions."
Surfaces: the HTTP route table, the WebSocket door set, the MCP tools, the gRPC service and
docs/brainy.proto, /contract.json and its committed copy.
"""

from __future__ import annotations

import importlib.util
import json
import keyword
import re
from collections import Counter
from pathlib import Path

import pytest

from brainy import __version__
from brainy.contract import doors as D

ROOT = Path(__file__).resolve().parent.parent
NAMES = [d.name for d in D.DOORS]


def _once(found: list[str]) -> None:
    """``found`` names every contract door exactly once and nothing else."""
    counts = Counter(found)
    assert set(counts) == set(NAMES), (set(NAMES) - set(counts), set(counts) - set(NAMES))
    assert all(n == 1 for n in counts.values()), {k: v for k, v in counts.items() if v != 1}


# ------------------------------------------------------------------ HTTP routes


def test_route_table_reaches_every_door_once():
    """Each door is reached by exactly one route (directly or through the op selector), and no route reaches a non-door."""
    found = []
    for route in D.route_table():
        if route.door is not None:
            assert route.selector is None and not route.choices
            found.append(route.door)
        else:
            found.extend(route.choices.values())
    _once(found)


def test_routes_are_unique_and_match_their_doors():
    """(method, path) pairs are unique, and each route's door declares exactly that binding."""
    routes = D.route_table()
    keys = [(r.method, r.path) for r in routes]
    assert len(keys) == len(set(keys))
    for route in routes:
        targets = [route.door] if route.door is not None else list(route.choices.values())
        for name in targets:
            door = D.BY_NAME[name]
            assert (door.method, door.path) == (route.method, route.path)


def test_vfs_doors_share_one_route_selected_by_op():
    """DOORS.md 0.2 and 8: all 17 vfs doors are POST P/vfs, chosen by op equal to the door name."""
    shared = [r for r in D.route_table() if r.door is None]
    assert len(shared) == 1
    (route,) = shared
    assert (route.method, route.path, route.selector) == ("POST", "/v1/brains/{brain}/vfs", "op")
    vfs = {d.name for d in D.DOORS if d.layer == "vfs"}
    assert set(route.choices) == vfs and len(vfs) == 17
    assert all(op == door for op, door in route.choices.items())


# ------------------------------------------------------------------ WebSocket


def test_ws_door_set_is_the_contract_names():
    """DOORS.md 0.1: a WebSocket frame's door is the contract name, for every door and no other."""
    assert D.ws_doors() == frozenset(NAMES)


# ------------------------------------------------------------------ MCP

TOOLS = D.mcp_tools()
TOOL_BY_NAME = {t["name"]: t for t in TOOLS}


def test_mcp_tools_join_back_to_doors():
    """One tool per door, named per DOORS.md 0.1 (brainy_<name> for engine/vfs, <layer>_<name> otherwise)."""
    assert len(TOOLS) == len(TOOL_BY_NAME) == len(D.DOORS)
    back = {d.mcp_tool: d.name for d in D.DOORS}
    _once([back[t["name"]] for t in TOOLS])
    for door in D.DOORS:
        expected = "brainy_" + door.name if door.layer in ("engine", "vfs") else door.name.replace(".", "_")
        assert door.mcp_tool == expected
        assert expected in TOOL_BY_NAME


def test_mcp_tool_names_are_legal():
    """MCP tool names stay within letters, digits, _ and -, at most 64 characters."""
    for tool in TOOLS:
        assert re.fullmatch(r"[A-Za-z0-9_-]{1,64}", tool["name"]), tool["name"]


@pytest.mark.parametrize("single_brain", [False, True])
def test_mcp_input_schemas_carry_path_params_as_required_strings(single_brain):
    """Path params are required string properties; brain is required unless the key reaches one brain."""
    for door, tool in zip(D.DOORS, D.mcp_tools(single_brain=single_brain), strict=True):
        schema = tool["inputSchema"]
        assert schema["type"] == "object"
        assert schema["additionalProperties"] is False
        required = schema.get("required", [])
        for p in door.path_params:
            assert schema["properties"][p.name] == {"type": "string"}
            if p.name == "brain" and single_brain:
                assert "brain" not in required
            else:
                assert p.name in required, (door.name, p.name)
        if "{brain}" in door.path:
            assert "brain" in schema["properties"]


def test_mcp_body_follows_the_document():
    """`body` is present exactly when the door takes an argument document, and required when the document has
    a required field. Its fields are not spelled out (seed 000, "MCP": the contract carries signatures, not
    schemas; the signature travels verbatim in the description)."""
    for door in D.DOORS:
        schema = TOOL_BY_NAME[door.mcp_tool]["inputSchema"]
        document = door.document_params
        assert ("body" in schema["properties"]) == bool(document), door.name
        if document:
            assert schema["properties"]["body"] == {"type": "object"}
            needed = [p.name for p in document if p.required]
            assert ("body" in schema.get("required", [])) == bool(needed)
        assert set(schema["properties"]) <= {"brain", "id", "sha256", "body"}


def test_mcp_descriptions_say_what_the_door_does_and_refuses_today():
    """The description holds the summary, the when line and the verbatim signature, and names the refusal a door gives today."""
    for door in D.DOORS:
        desc = TOOL_BY_NAME[door.mcp_tool]["description"]
        assert desc.startswith(door.summary)
        assert door.signature in desc
        assert door.when in desc
        if door.disposition == "notYetNative":
            assert f"NotYetNativeError until {door.release}." in desc
        elif door.disposition == "inProcessOnly":
            assert "InProcessOnlyError" in desc and door.instead in desc
        else:
            assert "NotYetNativeError" not in desc and "InProcessOnlyError" not in desc


def _word_runs(text: str, n: int = 3) -> set[tuple[str, ...]]:
    words = re.findall(r"[a-z0-9]+", text.lower())
    return {tuple(words[i : i + n]) for i in range(len(words) - n + 1)}


def test_mcp_descriptions_never_say_the_same_thing_twice():
    """A door's summary says what its when line does not (issue 10): the two share no run of three words, since
    an agent pays for every token of both."""
    for door in D.DOORS:
        assert not _word_runs(door.summary) & _word_runs(door.when), (door.name, door.summary, door.when)


def test_mcp_descriptions_are_a_sane_length():
    """No tool description runs past 1024 characters: agents read every one."""
    longest = max(TOOLS, key=lambda t: len(t["description"]))
    assert len(longest["description"]) <= 1024, longest["name"]


def test_mcp_annotations():
    """readOnlyHint is kind == read; a write's destructiveHint (said, or the default) is true for doors that delete
    or replace."""
    for door in D.DOORS:
        # A value equal to 2025-06-18's default is left out: readOnlyHint false, destructiveHint true.
        ann = TOOL_BY_NAME[door.mcp_tool].get("annotations", {})
        assert ann.get("readOnlyHint", False) is (door.kind == "read")
        assert "title" not in ann  # the tool's own title (2025-06-18) is the display name; no second copy
        if door.kind == "write":
            assert ann.get("destructiveHint", True) is door.destructive
        else:
            assert "destructiveHint" not in ann
    for name in ("remove", "removeMany", "clear", "unrelate", "rmdir", "unlink", "host.revokeKey"):
        assert D.BY_NAME[name].destructive, name
    for name in ("add", "relate", "mkdir", "memory.remember"):
        assert not D.BY_NAME[name].destructive, name


def test_mcp_tools_are_json():
    """The tool list serialises to JSON as the MCP tools/list answer carries it."""
    assert json.loads(json.dumps(TOOLS)) == TOOLS


# ------------------------------------------------------------------ gRPC


def test_grpc_service_joins_back_to_doors():
    """One rpc per door: the contract name with . replaced by _ (and a trailing _ on a reserved word of a
    stub language: import_, export_), and it maps back to its door."""
    service = D.grpc_service()
    assert len(service) == len(D.DOORS)
    _once(list(service.values()))
    for rpc, name in service.items():
        plain = name.replace(".", "_")
        assert rpc == (plain + "_" if plain in D.GRPC_RESERVED else plain)
        assert rpc.isidentifier() and not keyword.iskeyword(rpc)
    assert service["import_"] == "import" and service["export_"] == "export"


def test_proto_declares_one_unary_rpc_per_door():
    """docs/brainy.proto: package brainy.v1, service Brainy, one `rpc <door> (DoorRequest) returns (DoorAnswer);` per door."""
    text = D.proto_text()
    assert "\npackage brainy.v1;\n" in text
    assert "\nservice Brainy {\n" in text
    assert "message DoorRequest {" in text and "message DoorAnswer {" in text
    rpcs = re.findall(r"^  rpc (\w+) \(DoorRequest\) returns \(DoorAnswer\);$", text, re.M)
    assert rpcs == list(D.grpc_service())
    assert len(re.findall(r"\brpc\b", text.split("service Brainy", 1)[1])) == len(D.DOORS)


def test_proto_request_carries_every_path_param():
    """Every path param a door takes has a field in DoorRequest (DOORS.md 0.2: brain, id, sha256)."""
    text = D.proto_text()
    start = text.index("message DoorRequest {")
    request = text[start : text.index("\n}\n", start)]
    fields = set(re.findall(r"string (\w+) = \d+;", request))
    assert {"document"} | {p.name for d in D.DOORS for p in d.path_params} <= fields


# ------------------------------------------------------------------ /contract.json

ENVELOPE = D.contract_envelope("9.9.9", "2000-01-01T00:00:00Z")


def test_envelope_has_the_design_shape():
    """DESIGN.md /contract.json: service, version, builtAt, contractVersion, layers in order, refusals."""
    assert ENVELOPE["service"] == "brainy"
    assert ENVELOPE["version"] == "9.9.9"
    assert ENVELOPE["builtAt"] == "2000-01-01T00:00:00Z"
    assert ENVELOPE["contractVersion"] == D.CONTRACT.contract_version
    assert [layer["name"] for layer in ENVELOPE["layers"]] == [
        "engine",
        "vfs",
        "accords",
        "memory",
        "policy",
        "host",
        "server",
    ]


def test_envelope_lists_every_door_once_with_its_bindings():
    """Each door appears once, as its contract entry plus mcp/grpc/ws bindings that match the generated surfaces."""
    found = []
    tools = {t["name"] for t in TOOLS}
    rpcs = D.grpc_service()
    ws = D.ws_doors()
    for layer in ENVELOPE["layers"][:-1]:
        for entry in layer["doors"]:
            door = D.BY_NAME[entry["name"]]
            assert door.layer == layer["name"]
            found.append(door.name)
            bindings = {k: entry[k] for k in ("mcp", "grpc", "ws")}
            assert bindings == {
                "mcp": {"tool": door.mcp_tool},
                "grpc": {"rpc": door.grpc_rpc},
                "ws": {"door": door.ws_door},
            }
            assert entry["mcp"]["tool"] in tools
            assert rpcs[entry["grpc"]["rpc"]] == door.name
            assert entry["ws"]["door"] in ws
            assert {k: v for k, v in entry.items() if k not in bindings} == door.to_entry()
    _once(found)


def test_envelope_server_layer_and_refusals():
    """The server layer holds the nine server doors; refusals list every class with its status and meaning."""
    server = ENVELOPE["layers"][-1]["doors"]
    assert [s["name"] for s in server] == [s.name for s in D.SERVER_DOORS]
    assert all("mcp" not in s and "grpc" not in s for s in server)
    table = D.CONTRACT.refusals
    assert [r["name"] for r in ENVELOPE["refusals"]] == [r["name"] for r in table]
    for row, entry in zip(ENVELOPE["refusals"], table, strict=True):
        assert row["status"] == entry["status"]
        assert row["meaning"] == entry["meaning"]
        assert row["fields"] == entry["fields"]
    assert set(ENVELOPE["refusalSets"]) == set(D.REFUSAL_SETS)


# ------------------------------------------------------------------ committed copies


def _without_built_at(doc: dict) -> dict:
    return {k: v for k, v in doc.items() if k != "builtAt"}


def test_committed_contract_json_is_fresh():
    """docs/contract.json equals a freshly generated envelope in everything but builtAt."""
    committed = json.loads((ROOT / "docs" / "contract.json").read_text("utf-8"))
    fresh = D.contract_envelope(__version__, "whenever")
    assert _without_built_at(committed) == _without_built_at(fresh)


def test_committed_proto_is_fresh():
    """docs/brainy.proto equals a freshly generated one."""
    assert (ROOT / "docs" / "brainy.proto").read_text("utf-8") == D.proto_text()


def test_generator_check_passes():
    """tools/gen_contract.py --check finds nothing stale, and the committed builtAt is the placeholder."""
    spec = importlib.util.spec_from_file_location("gen_contract", ROOT / "tools" / "gen_contract.py")
    assert spec is not None and spec.loader is not None
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    assert gen.main(["--check"]) == 0
    committed = json.loads((ROOT / "docs" / "contract.json").read_text("utf-8"))
    assert committed["builtAt"] == gen.BUILT_AT_PLACEHOLDER
