"""A door given a value of the wrong shape refuses it by name; it never faults.

Every native door of the contract (the host's aside), each of its document arguments in turn given an object,
a list of lists, a list of objects, a boolean, a float, a negative number, an empty string and a long one, the
others filled with a plain value: the answer is a refusal (an ``R.Refusal``) or an answer, never another
exception. An object where a string was expected used to reach a set or a dict as a key (``unhashable type``),
and a number where a list was expected a ``for`` loop: each of those was a 500 over the wire. A refusal's
message quotes the value short, whatever its size.
"""

from __future__ import annotations

from typing import Any

import pytest
from helpers import new_store

from brainy.contract import doors as D
from brainy.contract import refusals as R
from brainy.contract.limits import QUOTE_CHARS
from brainy.engine import Brain

WRONG: list[Any] = [{"a": [{"b": 1}]}, [[1]], [{"a": 1}], True, 1.5, -1, "", "x" * 300]
DOORS = [d for d in D.DOORS if d.disposition == "native" and d.layer != "host" and d.document_params]


def _plain(param: D.Param) -> Any:
    return "x" if "string" in param.type else 1


@pytest.fixture(scope="module")
def brain(tmp_path_factory: pytest.TempPathFactory):
    with Brain.open(new_store(tmp_path_factory.mktemp("shapes"))) as opened:
        opened.write("add", {"type": "thing", "id": "x", "data": "hello"}, caller="person:tester")
        yield opened


@pytest.mark.parametrize("door", DOORS, ids=[d.name for d in DOORS])
def test_every_argument_of_the_wrong_shape_is_refused_by_name(brain: Brain, door: D.Door) -> None:
    """Each argument of ``door``, given each wrong shape, is answered or refused; a refusal quoting the value
    stays short."""
    faults = []
    for param in door.document_params:
        for value in WRONG:
            args = {p.name: _plain(p) for p in door.document_params if p.required}
            args[param.name] = value
            try:
                if door.kind == "write":
                    brain.write(door.name, args, caller="person:tester")
                else:
                    brain.call(door.name, args)
            except R.Refusal as refusal:
                # a message may name the argument and its rule, but never the whole long value
                assert "x" * (QUOTE_CHARS + 1) not in refusal.message, (param.name, refusal.message)
            except Exception as exc:  # noqa: BLE001 (the law: nothing but a refusal comes out)
                faults.append(f"{param.name}={value!r:.40}: {type(exc).__name__}: {exc}")
    assert faults == [], faults
