"""brainy/contract/refusals.py is generated from the contract's refusals table and stays in step with it.

``tools/gen_contract.py`` writes one ``class XError(Refusal)`` statement per entry (api-contract.md, "Every
surface is generated"), so editors, linters and type checkers see every refusal; each class registers itself
in ``REGISTRY`` as it is made (``Refusal.__init_subclass__``, in ``brainy/contract/_refusal_base.py``).
"""

from __future__ import annotations

import ast
import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from brainy.contract import _refusal_base as base
from brainy.contract import doors as D
from brainy.contract import refusals as R

ROOT = Path(__file__).resolve().parent.parent
MODULE = ROOT / "brainy" / "contract" / "refusals.py"


@pytest.fixture(scope="module")
def gen() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_contract", ROOT / "tools" / "gen_contract.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _words(text: str | None) -> list[str]:
    return (text or "").split()


def test_the_committed_module_is_what_the_contract_says(gen):
    """The committed module is exactly a fresh rendering of the table (regenerate with tools/gen_contract.py)."""
    assert gen.REFUSALS_PY == MODULE
    assert MODULE.read_text("utf-8") == gen.render()[gen.REFUSALS_PY], (
        "brainy/contract/refusals.py is stale: regenerate with `python tools/gen_contract.py`"
    )


def test_check_names_the_module_when_the_contract_changes(gen, monkeypatch, capsys):
    """A contract whose refusals table differs from the committed module makes --check fail, naming the module."""
    entries = [dict(entry) for entry in D.CONTRACT.refusals]
    entries[0]["status"] = 418
    monkeypatch.setattr(D, "CONTRACT", D.CONTRACT._replace(refusals=tuple(entries)))
    assert gen.main(["--check"]) == 1
    assert "brainy/contract/refusals.py" in capsys.readouterr().err


def test_every_refusal_is_a_class_statement():
    """Statically: one top-level ``class <name>(Refusal)`` per entry, in the table's order, and no ``type()``;
    ``meaning`` is written once: as the docstring, and apart only where the docstring cannot give it back."""
    tree = ast.parse(MODULE.read_text("utf-8"))
    classes = [node for node in tree.body if isinstance(node, ast.ClassDef)]
    assert [c.name for c in classes] == [entry["name"] for entry in D.CONTRACT.refusals]
    for cls, entry in zip(classes, D.CONTRACT.refusals):
        assert [ast.unparse(b) for b in cls.bases] == ["Refusal"], cls.name
        assigned = {
            (t.id if isinstance(t, ast.Name) else None)
            for node in cls.body
            for t in ([node.target] if isinstance(node, ast.AnnAssign) else getattr(node, "targets", []))
        }
        assert {"status", "required", "optional"} <= assigned, cls.name
        said = base.meaning_of(ast.get_docstring(cls, clean=False))
        assert ("meaning" in assigned) == (said != entry.get("meaning", "")), cls.name
    calls = {ast.unparse(node.func) for node in ast.walk(tree) if isinstance(node, ast.Call)}
    assert not calls & {"type", "globals", "setattr"}
    head = MODULE.read_text("utf-8").splitlines()[:2]
    assert head[0].startswith("# Generated from brainy/contract/api-contract.json") and "do not edit" in head[0]
    assert "python tools/gen_contract.py" in head[1]


def test_every_refusal_class_carries_its_entry():
    """At run time each class is the table's entry: name, status, fields, meaning, ws; registered in order."""
    assert list(R.REGISTRY) == [entry["name"] for entry in D.CONTRACT.refusals]
    for entry in D.CONTRACT.refusals:
        name = entry["name"]
        cls = getattr(R, name)
        assert cls is R.REGISTRY[name] is R.by_name(name)
        assert isinstance(cls, type) and type(cls) is type and issubclass(cls, R.Refusal)
        assert (cls.__name__, cls.__qualname__, cls.__module__) == (name, name, "brainy.contract.refusals")
        assert cls.name == name
        assert cls.status == entry.get("status")
        assert cls.required == tuple(entry.get("fields", ()))
        assert cls.optional == tuple(entry.get("optional", ()))
        assert cls.meaning == entry.get("meaning", "")
        assert cls.ws == entry.get("ws")
        assert _words(cls.__doc__) == _words(entry.get("meaning")), name


def test_the_module_gives_the_root_registry_and_by_name():
    """``R.Refusal`` is the root every class derives from; ``REGISTRY`` and ``by_name`` are the root module's."""
    assert R.Refusal is base.Refusal and R.REGISTRY is base.REGISTRY and R.by_name is base.by_name
    assert set(R.__all__) == {"Refusal", "REGISTRY", "by_name", *R.REGISTRY}
    assert R.Refusal.name == "Refusal" and R.Refusal not in R.REGISTRY.values()


def test_a_refusal_behaves_as_before():
    """Fields are checked, the meaning is the default message, fields read as attributes, the wire nests."""
    err = R.EntityNotFoundError("no such row", id="n1")
    assert (err.message, err.fields, err.id, str(err)) == ("no such row", {"id": "n1"}, "n1", "no such row")
    assert err.to_wire() == {"name": "EntityNotFoundError", "message": "no such row", "id": "n1"}
    assert repr(err) == "EntityNotFoundError(id='n1')"
    with pytest.raises(AttributeError):
        _ = err.nothing
    assert R.EntityNotFoundError(id="n1").message == R.EntityNotFoundError.meaning
    with pytest.raises(TypeError, match=r"EntityNotFoundError has no field\(s\) \['colour'\]"):
        R.EntityNotFoundError(id="n1", colour="red")
    with pytest.raises(TypeError, match=r"EntityNotFoundError needs field\(s\) \['id'\]"):
        R.EntityNotFoundError("x")
    inner = R.EntityNotFoundError(id="n2")
    outer = R.by_name("TransactionAbortedError")("items[0] was refused", index=0, error=inner)
    assert outer.to_wire()["error"] == {"name": "EntityNotFoundError", "message": inner.meaning, "id": "n2"}


def test_a_name_defined_twice_is_refused():
    """A second class under a registered name is refused as it is made, and the registry keeps the first."""
    before = dict(R.REGISTRY)
    with pytest.raises(RuntimeError, match="'EntityNotFoundError' is defined twice"):

        class EntityNotFoundError(R.Refusal):
            pass

    with pytest.raises(RuntimeError, match=f"'{next(iter(before))}' is defined twice"):
        again = compile(MODULE.read_text("utf-8"), "refusals-again.py", "exec")
        exec(again, {"__name__": "refusals_again"})  # noqa: S102 - the committed module, run a second time
    assert R.REGISTRY == before


# A table with what a literal has to survive: quotes at either end, backslashes, triple quotes, a meaning over
# the line limit, fields that do not fit on one line, a WebSocket entry, no status, no meaning, a builtin's name.
AWKWARD = (
    {"name": "QuotedError", "status": 403, "fields": ["reason"], "optional": [], "group": "G1", "meaning": '"reach"'},
    {
        "name": "EscapedError",
        "status": 400,
        "fields": [],
        "optional": ["path"],
        "group": "G1",
        "meaning": 'A back\\slash, a """triple""", it\'s "quoted"\tand\nsplit.',
    },
    {
        "name": "LongError",
        "status": None,
        "fields": [f"fieldNumber{i}" for i in range(12)],
        "optional": [],
        "group": "G2",
        "ws": {"close": 1002, "frame": "error"},
        "meaning": " ".join(["A meaning far over the line limit, said again and again."] * 9),
    },
    {"name": "SilentError", "status": 500, "fields": [], "optional": [], "group": "G2", "meaning": ""},
    {"name": "TimeoutError", "status": 504, "fields": [], "optional": [], "group": "G2", "meaning": "Too slow."},
)


def test_the_generator_writes_any_table_faithfully(gen, monkeypatch):
    """Rendered from an awkward table, the module compiles, keeps lines within 120 and makes exactly its classes."""
    text = gen.refusals_text(AWKWARD)
    assert max(len(line) for line in text.splitlines()) <= 120
    assert "``TimeoutError``" in text and "# G1\nclass QuotedError" in text and "# G2\nclass LongError" in text
    spec = importlib.util.spec_from_file_location("refusal_base_copy", base.__file__)
    assert spec is not None and spec.loader is not None
    fresh_base = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fresh_base)  # its own REGISTRY, so the awkward classes never meet the real ones
    monkeypatch.setitem(sys.modules, "brainy.contract._refusal_base", fresh_base)
    namespace: dict = {"__name__": "awkward_refusals"}
    exec(compile(text, "awkward_refusals.py", "exec"), namespace)  # noqa: S102 - the generator's own output
    assert list(fresh_base.REGISTRY) == [entry["name"] for entry in AWKWARD]
    for entry in AWKWARD:
        cls = namespace[entry["name"]]
        assert (cls.name, cls.status, cls.required, cls.optional, cls.meaning, cls.ws) == (
            entry["name"],
            entry["status"],
            tuple(entry["fields"]),
            tuple(entry["optional"]),
            entry["meaning"],
            entry.get("ws"),
        )
        assert _words(cls.__doc__) == _words(entry["meaning"])
    assert namespace["SilentError"].__doc__ is None
    # only the meaning wrapping would change (a tab, a newline) is written apart from its docstring
    stated = [block.split("(")[0] for block in text.split("class ")[1:] if "\n    meaning = " in block]
    assert stated == ["EscapedError"]
    with pytest.raises(ValueError, match="QuotedError"):
        gen.refusals_text([*AWKWARD, AWKWARD[0]])


def test_a_class_means_what_its_docstring_says():
    """The root reads ``meaning`` from a class's own docstring, its lines joined by single spaces; a ``meaning``
    the class states wins, and a class with neither keeps its parent's."""
    spec = importlib.util.spec_from_file_location("refusal_base_copy", base.__file__)
    assert spec is not None and spec.loader is not None
    fresh = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fresh)  # its own REGISTRY: these classes never meet the real ones

    class WrappedError(fresh.Refusal):
        """A meaning said over
        two lines."""

    class QuotedError(fresh.Refusal):
        """ "reach" """

    class StatedError(fresh.Refusal):
        """A docstring."""

        meaning = "A\tmeaning of its own."

    class ChildError(WrappedError):
        pass

    assert WrappedError.meaning == "A meaning said over two lines."
    assert QuotedError.meaning == '"reach"'
    assert StatedError.meaning == "A\tmeaning of its own."
    assert ChildError.meaning == WrappedError.meaning
    assert fresh.Refusal.meaning == "" and fresh.meaning_of(None) == ""
    assert WrappedError().message == "A meaning said over two lines."


def test_ruff_finds_nothing_to_change():
    """The module passes ruff's default rules and its formatter, at the repository's line length."""
    for args in (["check"], ["format", "--check"]):
        done = subprocess.run(
            ["ruff", *args, "--line-length", "120", str(MODULE)], capture_output=True, text=True, cwd=ROOT, check=False
        )
        assert done.returncode == 0, done.stdout + done.stderr
