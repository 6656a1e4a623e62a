"""The door table as api-contract.json states it: counts, names, dispositions, bindings, refusals.

DESIGN.md "The door table is a law"; DOORS.md sections 0, 5-10 and 12.1.
"""

from __future__ import annotations

import dataclasses
import json
from collections import Counter

import pytest

from brainy.contract import doors as D
from brainy.contract import refusals as R

P = D.BRAIN_PREFIX

#: The release plan (api-contract.md): which release makes each door native.
# Refusals brainy adds to the catalogue's 89 (api-contract.md, "Refusals beyond the catalogue").
BRAINY_REFUSALS = ("MalformedRequestError", "HeaderTooLargeError")

# The 0.3.0 doors that have landed so far (the query doors of that release follow).
TIME_TRAVEL = {"now", "history", "asOf", "diff", "export", "changes", "find", "related", "explain", "fields"}
# The 0.5.0 doors that have landed so far (issue 11).
LANDED_0_5 = {
    "traverse",
    "aggregate",
    "aggregates",
    "defineAggregate",
    "removeAggregate",
    "similar",
    "embed",
    "embedBatch",
    "similarity",
    "diagnostics",
    "repair",
    "snapshot",
    "warm",
    "stats",
    "import",
    # all 17 vfs doors (DOORS.md 8)
    "readFile",
    "readdir",
    "stat",
    "exists",
    "getxattr",
    "listxattr",
    "fileHistory",
    "writeFile",
    "appendFile",
    "mkdir",
    "rmdir",
    "unlink",
    "rename",
    "move",
    "copy",
    "setxattr",
    "removexattr",
}
# The 0.6.0 doors that have landed (issue 13, issue 33): the nine policy doors, the fourteen memory doors and the
# thirteen accords doors.
LANDED_0_6 = (
    {
        "policy.check",
        "policy.audit",
        "policy.rules",
        "policy.declare",
        "policy.propose",
        "policy.retire",
        "policy.ratify",
        "policy.unlock",
        "policy.freeze",
    }
    | {
        f"memory.{name}"
        for name in (
            "read",
            "list",
            "recall",
            "context",
            "stats",
            "turns",
            "remember",
            "write",
            "turn",
            "abstract",
            "cite",
            "reinforce",
            "retire",
            "consolidate",
        )
    }
    | {
        f"accords.{name}"
        for name in (
            "inbox",
            "dashboard",
            "search",
            "read",
            "timeline",
            "file",
            "postRound",
            "postUpdate",
            "record",
            "decide",
            "vote",
            "resolve",
            "escalate",
        )
    }
)
# The 0.6.0 host provisioning doors, landed ahead of their release (issue 17).
LANDED_HOST = {
    "host.provision",
    "host.archive",
    "host.unarchive",
    "host.mintKey",
    "host.listKeys",
    "host.revokeKey",
    "host.persist",
    "host.persistStatus",
}

RELEASE_PLAN = {
    "0.1.0": {
        "add",
        "update",
        "remove",
        "addMany",
        "updateMany",
        "removeMany",
        "relate",
        "relateMany",
        "updateRelation",
        "unrelate",
        "transact",
        "clear",
        "get",
        "batchGet",
        "counts",
        "generation",
    },
    "0.2.0": {"init", "close", "health"},
    "0.3.0": {"find", "related", "explain", "now", "history", "asOf", "diff", "export", "changes", "fields"},
    "0.5.0": {
        "traverse",
        "similar",
        "embed",
        "embedBatch",
        "similarity",
        "import",
        "aggregate",
        "aggregates",
        "defineAggregate",
        "removeAggregate",
        "repair",
        "snapshot",
        "warm",
        "stats",
        "diagnostics",
    },
    "0.7.0": {"host.move"},
}
IN_PROCESS_ONLY = {"use", "storageAdapter", "onChange"}


def test_contract_loads_and_import_validates_it():
    """Importing the door table validates api-contract.json: DOORS is validate() of the file."""
    assert D.DOORS == D.validate(D.read_contract())
    assert D.CONTRACT.contract_version == "1.0.0"
    assert all(isinstance(d, D.Door) for d in D.DOORS)


def test_108_doors_and_9_server_doors():
    """DOORS.md 12.1: 109 contract doors plus the server's own 9."""
    assert len(D.DOORS) == 109
    assert len(D.SERVER_DOORS) == 9


def test_per_layer_counts_match_doors_md_12_1():
    """DOORS.md 12.1: the per-layer and read/write counts of every layer."""
    by_layer = Counter(d.layer for d in D.DOORS)
    assert by_layer == {"engine": 47, "vfs": 17, "accords": 13, "memory": 14, "policy": 9, "host": 9}
    split = Counter((d.layer, d.kind) for d in D.DOORS)
    assert (split["vfs", "read"], split["vfs", "write"]) == (7, 10)
    assert (split["accords", "read"], split["accords", "write"]) == (5, 8)
    assert (split["memory", "read"], split["memory", "write"]) == (6, 8)
    assert (split["policy", "read"], split["policy", "write"]) == (3, 6)
    engine = [d for d in D.DOORS if d.layer == "engine"]
    mechanics = [d for d in engine if d.access == "service"]
    in_process = [d for d in engine if d.disposition == "inProcessOnly"]
    principal = [d for d in engine if d.access == "principal" and d.disposition != "inProcessOnly"]
    assert len(mechanics) == 8
    assert len(in_process) == 3
    # 12 engine reads + 6 time-travel/feed reads + 3 embeddings; 15 engine writes.
    assert Counter(d.kind for d in principal) == {"read": 21, "write": 15}
    assert all(d.access == "service" for d in D.DOORS if d.layer == "host")


def test_names_are_unique_and_shaped_by_layer():
    """DOORS.md 0.1: bare camelCase names for engine and vfs, layer.name for the rest; no name twice."""
    names = [d.name for d in D.DOORS] + [s.name for s in D.SERVER_DOORS]
    assert len(names) == len(set(names))
    for door in D.DOORS:
        if door.layer in ("engine", "vfs"):
            assert "." not in door.name, door.name
        else:
            assert door.name.startswith(door.layer + "."), door.name
    assert set(D.BY_NAME) == {d.name for d in D.DOORS}
    # read, search, retire and resolve exist only qualified, so a bare name never reaches them.
    assert not {"read", "search", "retire", "resolve"} & set(D.BY_NAME)


def test_every_signature_names_its_door():
    """Each signature is DOORS.md's, which opens with the door's own (unqualified) name."""
    for door in D.DOORS:
        assert door.signature.startswith(door.short + "("), door.name
        assert "\n" not in door.signature


def test_dispositions_follow_the_release_plan():
    """api-contract.md release plan: 0.1.0 and 0.2.0 doors native, three in-process only, every other door
    notYetNative with its release."""
    planned = {name: rel for rel, names in RELEASE_PLAN.items() for name in names}
    landed = (
        RELEASE_PLAN["0.1.0"]
        | RELEASE_PLAN["0.2.0"]
        | TIME_TRAVEL
        | LANDED_0_5
        | LANDED_0_6
        | LANDED_HOST
        | RELEASE_PLAN["0.7.0"]
    )
    for door in D.DOORS:
        if door.name in landed:
            assert door.disposition == "native", door.name
        elif door.name in IN_PROCESS_ONLY:
            assert door.disposition == "inProcessOnly", door.name
            assert door.instead
        else:
            expected = planned.get(door.name) or ("0.5.0" if door.layer == "vfs" else "0.6.0")
            assert door.disposition == "notYetNative", door.name
            assert door.release == expected, door.name
    assert {d.name for d in D.DOORS if d.native} == landed
    for layer in ("accords", "memory", "policy"):
        assert {d.release for d in D.DOORS if d.layer == layer and not d.native} <= {"0.6.0"}
    assert {d.name for d in D.DOORS if d.layer == "host"} == LANDED_HOST | RELEASE_PLAN["0.7.0"]


def test_every_door_has_landed():
    """Issues 33 and 36: every door of the contract has its final disposition: 106 answer natively (host.move, the
    fleet's, the last of them) and the three in-process-only doors refuse by name with what to call instead. All
    thirteen accords doors are native."""
    by = Counter(d.disposition for d in D.DOORS)
    assert by == {"native": 106, "inProcessOnly": 3}
    assert D.BY_NAME["host.move"].native
    assert all(d.native for d in D.DOORS if d.layer == "accords")


def test_in_process_only_doors_say_what_to_call_instead():
    """DOORS.md 10.1: the three in-process doors refuse with InProcessOnlyError and name an alternative."""
    for name in IN_PROCESS_ONLY:
        door = D.BY_NAME[name]
        assert door.refusal_today == "InProcessOnlyError"
        assert "InProcessOnlyError" in door.refusals
    assert "changes" in D.BY_NAME["onChange"].instead
    assert "stats" in D.BY_NAME["storageAdapter"].instead
    assert "plugin" in D.BY_NAME["use"].instead


FIXED = {
    "init": ("POST", P + "/open"),
    "close": ("POST", P + "/close"),
    "counts": ("GET", P + "/counts"),
    "changes": ("GET", P + "/changes"),
    "host.persist": ("POST", P + "/ceremonies/persist"),
    "host.persistStatus": ("GET", P + "/ceremonies/persist"),
    "host.move": ("POST", P + "/move"),
    "host.revokeKey": ("DELETE", "/v1/keys/{sha256}"),
    "host.mintKey": ("POST", "/v1/keys"),
    "host.listKeys": ("GET", "/v1/keys"),
}


@pytest.mark.parametrize("door", D.DOORS, ids=lambda d: d.name)
def test_http_binding_follows_the_scheme(door):
    """DOORS.md 0.2: P/<door>, P/<layer>/<name>, GET P/<door>/{id} for by-id reads, vfs on POST P/vfs, the fixed bindings."""
    binding = (door.method, door.path)
    if door.name in FIXED:
        assert binding == FIXED[door.name]
    elif door.layer == "vfs":
        assert binding == ("POST", P + "/vfs")
    elif door.layer == "engine":
        assert door.path in (f"{P}/{door.name}", f"{P}/{door.name}/{{id}}")
    elif door.layer == "host":
        assert door.path == f"{P}/{door.short}"
    else:
        assert door.path in (f"{P}/{door.layer}/{door.short}", f"{P}/{door.layer}/{door.short}/{{id}}")
    if door.path.endswith("/{id}"):
        assert door.method == "GET" and door.kind == "read", "a by-id door is a GET read"
    if door.method == "GET":
        assert door.kind == "read"
        assert all(p.location in ("path", "query") for p in door.params)
    assert door.path.startswith("/v1/")


def test_params_hold_the_path_parameters():
    """Path params (brain, id, sha256) are listed, required, and match the path's placeholders."""
    for door in D.DOORS:
        names = [p.name for p in door.path_params]
        for placeholder in ("brain", "id", "sha256"):
            assert (placeholder in names) == ("{" + placeholder + "}" in door.path), door.name
        assert all(p.required for p in door.path_params)


def test_params_match_their_method():
    """DOORS.md 0.2: GET doors take scalar query parameters; POST and DELETE take no query."""
    for door in D.DOORS:
        for p in door.document_params:
            assert p.location == ("query" if door.method == "GET" else "body"), (door.name, p.name)


def test_every_named_refusal_exists():
    """Every refusal a door or a set names is in the refusal table and has a class."""
    table = {r["name"] for r in D.CONTRACT.refusals}
    assert len(table) == 89 + len(BRAINY_REFUSALS)
    for door in D.DOORS + D.SERVER_DOORS:
        for name in door.refusals:
            assert name in table, (door.name, name)
            assert name in R.REGISTRY
    for refusal_set in D.REFUSAL_SETS.values():
        assert set(refusal_set.names) <= table
    for door in D.DOORS:
        for name in D.all_refusals(door):
            assert name in R.REGISTRY, (door.name, name)


def test_refusal_sets_follow_doors_md_0_6():
    """C on every door; W on every row-writing door (engine, vfs and profile writes), never on mechanics or host."""
    assert len(D.REFUSAL_SETS["C"].names) == 20
    assert len(D.REFUSAL_SETS["W"].names) == 5
    for door in D.DOORS:
        assert "C" in door.sets
        row_writing = (
            door.kind == "write"
            and door.layer in ("engine", "vfs", "accords", "memory", "policy")
            and door.access == "principal"
            and door.disposition != "inProcessOnly"
        )
        assert ("W" in door.sets) == row_writing, door.name


def test_policy_writes_do_not_inherit_guardrail_refusal():
    """DOORS.md 0.6 and 9.3: W omits GuardrailRefusedError on policy doors, keeps it elsewhere."""
    assert "GuardrailRefusedError" not in D.all_refusals(D.BY_NAME["policy.declare"])
    assert "GuardrailRefusedError" in D.all_refusals(D.BY_NAME["add"])
    assert "GuardrailRefusedError" in D.all_refusals(D.BY_NAME["memory.remember"])


def test_doors_list_only_what_they_add():
    """DOORS.md 0.6: a refusal column lists what a door adds; no door repeats a name its sets give."""
    for door in D.DOORS:
        inherited = {n for key in door.sets for n in D.REFUSAL_SETS[key].names_for(door.layer)}
        assert not inherited & set(door.refusals), door.name


def test_disposition_refusals_carry_their_fields():
    """NotYetNativeError carries door and release; InProcessOnlyError door and instead (DOORS.md 11.3)."""
    assert set(R.by_name("NotYetNativeError").required) == {"door", "release"}
    assert set(R.by_name("InProcessOnlyError").required) == {"door", "instead"}
    door = dataclasses.replace(D.BY_NAME["host.move"], disposition="notYetNative", release="0.7.0")
    refusal = R.by_name(door.refusal_today)(door=door.name, release=door.release)
    assert refusal.to_wire()["release"] == "0.7.0"


def test_entries_round_trip():
    """Each Door and ServerDoor turns back into exactly the JSON entry it was loaded from."""
    doc = D.read_contract()
    assert [d.to_entry() for d in D.DOORS] == doc["doors"]
    assert [s.to_entry() for s in D.SERVER_DOORS] == doc["serverDoors"]
    assert {k: s.to_entry() for k, s in D.REFUSAL_SETS.items()} == doc["refusalSets"]


def test_refusal_table_is_untouched_by_the_door_table():
    """The refusals section stays the one refusals.py is generated from: every entry, same order."""
    doc = json.loads(D.CONTRACT_PATH.read_text("utf-8"))
    assert [r["name"] for r in doc["refusals"]] == list(R.REGISTRY)


def test_server_doors():
    """DOORS.md 10.2: nine server doors, the SSE stream sharing GET P/changes only by its Accept."""
    paths = {s.name: (s.method, s.path) for s in D.SERVER_DOORS}
    assert paths["server.contract"] == ("GET", "/contract.json")
    assert paths["server.mcp"] == ("POST", "/mcp")
    assert paths["server.ws"] == ("GET", "/v1/ws")
    stream = next(s for s in D.SERVER_DOORS if s.name == "server.changesStream")
    assert (stream.method, stream.path) == (D.BY_NAME["changes"].method, D.BY_NAME["changes"].path)
    assert stream.accept == "text/event-stream"
    assert all(s.accept is None for s in D.SERVER_DOORS if s is not stream)
