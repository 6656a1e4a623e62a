"""A malformed contract fails loudly, naming the entry and what is wrong; it never loads half-right.

Each case writes a modified copy of api-contract.json to a temporary file and loads it through
the same path the import takes (``read_contract`` then ``load``/``validate``).
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from brainy.contract import doors as D

ROOT = Path(__file__).resolve().parent.parent
ORIGINAL = D.read_contract()


def _index(name: str) -> int:
    return next(i for i, e in enumerate(ORIGINAL["doors"]) if e["name"] == name)


def _load_copy(tmp_path: Path, mutate: Callable[[dict[str, Any]], None]) -> tuple[D.Door, ...]:
    doc = copy.deepcopy(ORIGINAL)
    mutate(doc)
    path = tmp_path / "api-contract.json"
    path.write_text(json.dumps(doc), "utf-8")
    return D.validate(D.read_contract(path))


def _set(name: str, key: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def mutate(doc: dict[str, Any]) -> None:
        doc["doors"][_index(name)][key] = value

    return mutate


def _drop(name: str, key: str) -> Callable[[dict[str, Any]], None]:
    def mutate(doc: dict[str, Any]) -> None:
        del doc["doors"][_index(name)][key]

    return mutate


def _duplicate(doc: dict[str, Any]) -> None:
    doc["doors"][_index("find")]["name"] = "get"


def _get_with_body(doc: dict[str, Any]) -> None:
    doc["doors"][_index("counts")]["params"].append({"name": "x", "type": "string", "required": False, "in": "body"})


def _lost_path_param(doc: dict[str, Any]) -> None:
    entry = doc["doors"][_index("history")]
    entry["params"] = [p for p in entry["params"] if p["name"] != "id"]


def _object_in_query(doc: dict[str, Any]) -> None:
    doc["doors"][_index("fields")]["params"].append(
        {"name": "where", "type": "Where", "required": False, "in": "query"}
    )


def _route_taken(doc: dict[str, Any]) -> None:
    doc["doors"][_index("related")]["http"] = {"method": "POST", "path": "/v1/brains/{brain}/find"}


CASES = [
    # (door named in the error, mutation, words the error must carry)
    ("find", _set("find", "layer", "search"), "unknown layer"),
    ("add", _set("add", "kind", "mutate"), "unknown kind"),
    ("get", _set("get", "access", "anyone"), "unknown access"),
    ("counts", _drop("counts", "when"), "missing field(s) ['when']"),
    ("add", _drop("add", "disposition"), "missing field(s) ['disposition']"),
    ("get", _set("get", "colour", "blue"), "unknown field(s) ['colour']"),
    ("get", _duplicate, "duplicate name"),
    (
        "get",
        _set("get", "disposition", {"native": True, "notYetNative": {"release": "0.3.0"}}),
        "disposition must be exactly one of",
    ),
    ("get", _set("get", "disposition", {"native": False}), "disposition must be"),
    ("find", _set("find", "disposition", {"notYetNative": {}}), "disposition must be"),
    ("find", _set("find", "disposition", {"notYetNative": {"release": "soon"}}), "disposition must be"),
    ("use", _set("use", "disposition", {"inProcessOnly": {"instead": ""}}), "disposition must be"),
    ("find", _set("find", "disposition", "native"), "disposition must be exactly one of"),
    ("find", _set("find", "disposition", {"maybe": True}), "disposition must be exactly one of"),
    ("find", _set("find", "http", {"method": "POST", "path": "/brains/{brain}/find"}), "must start with '/v1/'"),
    ("find", _set("find", "http", {"method": "PATCH", "path": "/v1/brains/{brain}/find"}), "http method"),
    (
        "add",
        _set("add", "refusals", ["EntityExistsError", "NoSuchRefusalError"]),
        "'NoSuchRefusalError', which is not in the refusals table",
    ),
    ("add", _set("add", "sets", ["C", "Z"]), "'Z', which is not a refusal set"),
    ("add", _set("add", "sets", ["W"]), "sets must include 'C'"),
    ("get", _set("get", "sets", ["C", "W"]), "set 'W' is for row-writing doors"),
    ("add", _set("add", "refusals", ["InvalidArgumentError"]), "repeat names its sets already give"),
    (
        "readFile",
        _set("readFile", "http", {"method": "POST", "path": "/v1/brains/{brain}/readFile"}),
        "every vfs door is POST",
    ),
    ("counts", _get_with_body, "a GET door takes no body"),
    ("fields", _object_in_query, "non-scalar type"),
    ("history", _lost_path_param, "path placeholders"),
    ("related", _route_taken, "is already 'find''s"),
    ("get", _set("get", "name", "accords.get"), "bare camelCase name"),
    ("accords.read", _set("accords.read", "name", "read"), "accords.<camelCase>"),
    ("memory.read", _set("memory.read", "access", "service"), "access service is only for"),
    ("host.archive", _set("host.archive", "access", "principal"), "host doors are access: service"),
    ("get", _set("get", "destructive", True), "only a write door can be destructive"),
    ("add", _set("add", "rung", "king"), "unknown rung"),
]


@pytest.mark.parametrize(("name", "mutate", "words"), CASES, ids=[f"{c[0]}:{c[2][:30]}" for c in CASES])
def test_broken_entry_is_refused_by_index_and_name(tmp_path, name, mutate, words):
    """A malformed door entry raises a RuntimeError naming doors[<index>] '<name>' and what is wrong."""
    index = _index(name)
    with pytest.raises(RuntimeError) as caught:
        _load_copy(tmp_path, mutate)
    message = str(caught.value)
    assert isinstance(caught.value, D.ContractError)
    assert message.startswith("api-contract.json: ")
    assert f"doors[{index}]" in message
    shown = ORIGINAL["doors"][index]["name"]
    if mutate is _duplicate:
        shown = "get"
    elif words in ("bare camelCase name", "accords.<camelCase>"):
        shown = {"get": "accords.get", "accords.read": "read"}[name]
    assert repr(shown) in message
    assert words in message


def test_the_untouched_copy_loads(tmp_path):
    """The same path with no mutation loads the same 109 doors, so the cases above fail for their mutation alone."""
    assert _load_copy(tmp_path, lambda doc: None) == D.DOORS


def test_missing_top_level_key_is_refused(tmp_path):
    """A contract without its refusal sets or server doors is refused before any door is read."""
    with pytest.raises(D.ContractError, match=r"top level: missing field\(s\) \['serverDoors'\]"):
        _load_copy(tmp_path, lambda doc: doc.pop("serverDoors"))


def test_broken_server_door_is_refused(tmp_path):
    """A server door sharing a door's route without an Accept to tell them apart is refused by index and name."""

    def mutate(doc):
        doc["serverDoors"][0]["http"] = {"method": "GET", "path": "/v1/brains/{brain}/counts"}

    with pytest.raises(D.ContractError, match=r"serverDoors\[0\] 'server.contract': route GET"):
        _load_copy(tmp_path, mutate)


def test_unknown_name_in_a_refusal_set_is_refused(tmp_path):
    """A refusal set naming a class the table lacks is refused, naming the set."""
    with pytest.raises(D.ContractError, match=r"refusalSets\['W'\].*'NoSuchError'"):
        _load_copy(tmp_path, lambda doc: doc["refusalSets"]["W"]["names"].append("NoSuchError"))


def test_unreadable_contract_is_refused(tmp_path):
    """Bytes that are not JSON are refused as unreadable, never half-read."""
    path = tmp_path / "api-contract.json"
    path.write_text('{"doors": [', "utf-8")
    with pytest.raises(D.ContractError, match="unreadable"):
        D.read_contract(path)


def _import_over(tmp_path: Path, doc: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    """``import brainy.contract.doors`` in a fresh interpreter, over ``doc`` as the contract."""
    package = tmp_path / "brainy"
    (package / "contract").mkdir(parents=True)
    # A bare package: the test is about the door table's import, not whatever else brainy imports.
    (package / "__init__.py").write_text("", "utf-8")
    for name in ("__init__.py", "doors.py", "types.py"):
        shutil.copy(ROOT / "brainy" / "contract" / name, package / "contract" / name)
    (package / "contract" / "api-contract.json").write_text(json.dumps(doc), "utf-8")
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    return subprocess.run(
        [sys.executable, "-c", "import brainy.contract.doors"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=60,
        check=False,
    )


def test_import_fails_loudly_on_a_broken_contract(tmp_path):
    """Importing the door table over a broken api-contract.json stops the import with the entry named."""
    doc = copy.deepcopy(ORIGINAL)
    doc["doors"][_index("find")]["kind"] = "peek"
    result = _import_over(tmp_path, doc)
    assert result.returncode != 0
    assert f"doors[{_index('find')}] 'find': unknown kind 'peek'" in result.stderr


def _refusal_index(name: str) -> int:
    return next(i for i, e in enumerate(ORIGINAL["refusals"]) if e["name"] == name)


@pytest.mark.parametrize(("key", "field"), [("fields", "name"), ("optional", "message"), ("fields", "message")])
def test_a_refusal_field_named_for_the_refusal_itself_is_refused(tmp_path, key, field):
    """DOORS.md 11: a refusal travels as {name, message, ...fields}, so a field named name or message would
    overwrite the class or the text; the loader refuses it, naming the refusal."""
    index = _refusal_index("AggregateNotFoundError")

    def mutate(doc):
        doc["refusals"][index][key] = [*doc["refusals"][index][key], field]

    with pytest.raises(D.ContractError) as caught:
        _load_copy(tmp_path, mutate)
    assert str(caught.value) == (
        f"api-contract.json: refusals[{index}] 'AggregateNotFoundError': field {field!r} collides with the "
        f"refusal's own {field!r} on the wire (DOORS.md 11); name the field for what it holds"
    )


def test_the_import_stops_on_a_refusal_field_named_name(tmp_path):
    """The same law at import: a contract whose refusal carries a `name` field stops the door table's import."""
    doc = copy.deepcopy(ORIGINAL)
    index = _refusal_index("SnapshotRunNotFoundError")
    doc["refusals"][index]["fields"] = ["name"]
    result = _import_over(tmp_path, doc)
    assert result.returncode != 0
    assert f"refusals[{index}] 'SnapshotRunNotFoundError': field 'name' collides" in result.stderr


def test_the_renamed_refusal_fields_are_doors_md_11s():
    """AggregateNotFoundError carries aggregate; SnapshotNameInvalidError and SnapshotRunNotFoundError carry
    snapshot (DOORS.md 11); no refusal carries name or message."""
    from brainy.contract import refusals as R

    assert R.by_name("AggregateNotFoundError").required == ("aggregate",)
    assert R.by_name("SnapshotNameInvalidError").required == ("snapshot",)
    assert R.by_name("SnapshotRunNotFoundError").required == ("snapshot",)
    assert R.by_name("AggregateNotFoundError")(aggregate="weekly").to_wire()["name"] == "AggregateNotFoundError"
    for entry in D.CONTRACT.refusals:
        assert not set(D.REFUSAL_OWN_KEYS) & {*entry["fields"], *entry["optional"]}, entry["name"]


@pytest.mark.parametrize(
    ("fields", "words"),
    [("name", "fields must be a list of field names"), (["a b"], "fields must be a list of field names")],
)
def test_refusal_fields_are_lists_of_plain_names(tmp_path, fields, words):
    """A refusal's fields are a list of plain identifiers."""
    index = _refusal_index("EntityNotFoundError")
    with pytest.raises(D.ContractError, match=rf"refusals\[{index}\] 'EntityNotFoundError': {words}"):
        _load_copy(tmp_path, lambda doc: doc["refusals"][index].__setitem__("fields", fields))


def test_a_param_type_that_does_not_parse_is_refused(tmp_path):
    """Every param's type is parsed when the contract loads; one that does not parse is refused by door and
    param, saying where in the type."""
    index = _index("find")

    def mutate(doc):
        doc["doors"][index]["params"][1]["type"] = "string | "

    with pytest.raises(D.ContractError) as caught:
        _load_copy(tmp_path, mutate)
    param = ORIGINAL["doors"][index]["params"][1]["name"]
    assert f"doors[{index}] 'find' params[1]: {param!r}: type 'string | ': at character 9: expected a type" in str(
        caught.value
    )
