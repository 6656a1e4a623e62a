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
    doc["doors"][_index("counts")]["params"].append(
        {"name": "x", "type": "string", "required": False, "in": "body"})


def _lost_path_param(doc: dict[str, Any]) -> None:
    entry = doc["doors"][_index("history")]
    entry["params"] = [p for p in entry["params"] if p["name"] != "id"]


def _object_in_query(doc: dict[str, Any]) -> None:
    doc["doors"][_index("fields")]["params"].append(
        {"name": "where", "type": "Where", "required": False, "in": "query"})


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
    ("get", _set("get", "disposition", {"native": True, "notYetNative": {"release": "0.3.0"}}),
     "disposition must be exactly one of"),
    ("get", _set("get", "disposition", {"native": False}), "disposition must be"),
    ("find", _set("find", "disposition", {"notYetNative": {}}), "disposition must be"),
    ("find", _set("find", "disposition", {"notYetNative": {"release": "soon"}}), "disposition must be"),
    ("use", _set("use", "disposition", {"inProcessOnly": {"instead": ""}}), "disposition must be"),
    ("find", _set("find", "disposition", "native"), "disposition must be exactly one of"),
    ("find", _set("find", "disposition", {"maybe": True}), "disposition must be exactly one of"),
    ("find", _set("find", "http", {"method": "POST", "path": "/brains/{brain}/find"}), "must start with '/v1/'"),
    ("find", _set("find", "http", {"method": "PATCH", "path": "/v1/brains/{brain}/find"}), "http method"),
    ("add", _set("add", "refusals", ["EntityExistsError", "NoSuchRefusalError"]),
     "'NoSuchRefusalError', which is not in the refusals table"),
    ("add", _set("add", "sets", ["C", "Z"]), "'Z', which is not a refusal set"),
    ("add", _set("add", "sets", ["W"]), "sets must include 'C'"),
    ("get", _set("get", "sets", ["C", "W"]), "set 'W' is for row-writing doors"),
    ("add", _set("add", "refusals", ["InvalidArgumentError"]), "repeat names its sets already give"),
    ("readFile", _set("readFile", "http", {"method": "POST", "path": "/v1/brains/{brain}/readFile"}),
     "every vfs door is POST"),
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
    """The same path with no mutation loads the same 108 doors, so the cases above fail for their mutation alone."""
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


def test_import_fails_loudly_on_a_broken_contract(tmp_path):
    """Importing the door table over a broken api-contract.json stops the import with the entry named."""
    package = tmp_path / "brainy"
    (package / "contract").mkdir(parents=True)
    # A bare package: the test is about the door table's import, not whatever else brainy imports.
    (package / "__init__.py").write_text("", "utf-8")
    for name in ("__init__.py", "doors.py", "refusals.py"):  # doors.py takes the contract path from refusals.py
        shutil.copy(ROOT / "brainy" / "contract" / name, package / "contract" / name)
    doc = copy.deepcopy(ORIGINAL)
    doc["doors"][_index("find")]["kind"] = "peek"
    (package / "contract" / "api-contract.json").write_text(json.dumps(doc), "utf-8")
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    result = subprocess.run(
        [sys.executable, "-c", "import brainy.contract.doors"],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60, check=False,
    )
    assert result.returncode != 0
    assert f"doors[{_index('find')}] 'find': unknown kind 'peek'" in result.stderr
