"""The contract's type notation as data (brainy/contract/types.py): every param type parses, its JSON
Schema is valid 2020-12, and ``check`` agrees with that schema on what conforms.

DOORS.md writes every argument's type in a TypeScript-like notation; api-contract.json carries it in
each param's ``type``. The laws: each type string in the contract (and each door signature) parses
and prints back to itself; ``schema`` is valid JSON Schema; ``check`` accepts the values of a type,
refuses every other value with a reason and a path, and says "conforms" exactly when the schema does
(but for ``1.0`` as an ``int``, which JSON cannot tell from ``1`` and the doors refuse).
"""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from brainy.contract import doors as D
from brainy.contract import types as T

#: Every distinct param type string in the contract, in first-seen order.
TYPES = list(dict.fromkeys(p.type for d in D.DOORS for p in d.params))


def test_the_contract_types_are_the_ones_this_file_knows():
    """The notation's features all appear in the contract: unions, lists, fixed lengths, shapes with bare and
    optional keys, index signatures, literals, named types and a callback."""
    for needle in (
        "number[384]",
        '"asc" | "desc"',
        "string | string[]",
        "NounType | NounType[]",
        "{text?, semantic?, graph?}",
        "[m: string]",
        "(e: ChangeFrame) => void",
        "1 | 2",
        "string | null",
        'int | "head"',
        "Where",
        'tier | tier[] | "all"',
    ):
        assert any(needle in t for t in TYPES), needle


@pytest.mark.parametrize("text", TYPES)
def test_every_contract_type_parses_and_prints_back(text):
    """Each param type parses into a tree, and the tree's notation parses to the same tree."""
    tree = T.parse(text)
    assert T.parse(str(tree)) == tree
    assert T.parse(text) is tree  # parsed once, shared


def test_every_signature_parses_as_a_function():
    """Each door's signature (``name(args): Answer``) is the same notation: its arguments and answer parse, and
    its name is the door's own."""
    for door in D.DOORS:
        name, tree = T.parse_signature(door.signature)
        assert name == door.short, door.name
        assert T.parse(str(tree)) == tree
    name, tree = T.parse_signature("onChange(listener: (e: ChangeFrame) => void): Unsubscribe")
    assert tree == T.Func((T.Field("listener", T.parse("(e: ChangeFrame) => void")),), T.Named("Unsubscribe"))
    with pytest.raises(T.NotationError, match="not name"):
        T.parse_signature("find")


def test_the_tree_spells_the_notation():
    """The nodes a string becomes: primitives, literals, named types, lists, unions, shapes, functions."""
    assert T.parse("string") == T.Prim("string")
    assert T.parse("null") == T.Lit(None)
    assert T.parse('"a" | 1 | true') == T.Union((T.Lit("a"), T.Lit(1), T.Lit(True)))
    assert T.parse("number[384]") == T.Array(T.Prim("number"), 384)
    assert T.parse('("a" | "b")[]') == T.Array(T.Union((T.Lit("a"), T.Lit("b"))))
    assert T.parse("| string | (int | null)") == T.Union((T.Prim("string"), T.Prim("int"), T.Lit(None)))
    assert T.parse("{a?, b: int; c?: string}") == T.Shape(
        (T.Field("a", None, True), T.Field("b", T.Prim("int")), T.Field("c", T.Prim("string"), True))
    )
    assert T.parse("{[k]: int}") == T.Shape((), T.Prim("int"))
    assert T.parse("Promise<{x: FindAnswer}>") == T.Named("Promise", (T.Shape((T.Field("x", T.Named("FindAnswer")),)),))
    assert T.parse("[{id}]") == T.Array(T.Shape((T.Field("id", None),)))
    assert T.parse("(e: ChangeFrame) => void") == T.Func((T.Field("e", T.Named("ChangeFrame")),), T.Prim("void"))


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("", "at character 0: expected a type, found the end"),
        ("string[", "at character 7: expected ']' or a length, found the end"),
        ("int[x]", "at character 4: expected ']' or a length, found 'x'"),
        ("{a: }", "at character 4: expected a type, found '}'"),
        ("{a, a}", "the key 'a' is listed twice"),
        ("{a b}", "expected ',' or '}', found 'b'"),
        ('"open', "at character 0: unexpected character '\"'"),
        ("string $", "at character 7: unexpected character '$'"),
        ("a | | b", "at character 4: expected a type, found '|'"),
        ("(a: int) =>", "expected a type, found the end"),
        ("string string", "expected the end of the type, found 'string'"),
        ("Promise<int", "expected '>', found the end"),
    ],
)
def test_a_broken_type_says_where(text, where):
    """A string that does not parse raises NotationError (a ValueError) naming the type and the character."""
    with pytest.raises(T.NotationError) as caught:
        T.parse(text)
    assert isinstance(caught.value, ValueError)
    assert str(caught.value).startswith(f"type {text!r}: ")
    assert where in str(caught.value)


def test_a_type_is_a_string():
    """Anything but a string is refused as a type, never hashed or half-read."""
    with pytest.raises(T.NotationError, match="a type is a string"):
        T.parse(["string"])  # type: ignore[arg-type]


# ------------------------------------------------------------------ JSON Schema


@pytest.mark.parametrize("text", TYPES)
def test_every_schema_is_valid_json_schema(text):
    """schema(t) is a valid JSON Schema 2020-12 document (the dialect OpenAPI 3.1 uses)."""
    Draft202012Validator.check_schema(T.schema(T.parse(text)))


def test_schemas_say_what_the_notation_says():
    """Primitives, literal unions as enums, fixed lengths, closed shapes, named types described and permissive."""
    assert T.schema(T.parse("int")) == {"type": "integer"}
    assert T.schema(T.parse('"asc" | "desc"')) == {"type": "string", "enum": ["asc", "desc"]}
    assert T.schema(T.parse("1 | 2")) == {"type": "integer", "enum": [1, 2]}
    assert T.schema(T.parse("number[384]")) == {
        "type": "array",
        "items": {"type": "number"},
        "minItems": 384,
        "maxItems": 384,
    }
    assert T.schema(T.parse("{id: string, threshold?: number}")) == {
        "type": "object",
        "properties": {"id": {"type": "string"}, "threshold": {"type": "number"}},
        "required": ["id"],
        "additionalProperties": False,
    }
    assert T.schema(T.parse("{[m: string]: int}")) == {"type": "object", "additionalProperties": {"type": "integer"}}
    assert T.schema(T.parse("string | null")) == {"anyOf": [{"type": "string"}, {"const": None}]}
    where = T.schema(T.parse("Where"))
    assert set(where) == {"description"} and where["description"].startswith("Where: ")
    noun = T.schema(T.parse("NounType"))
    assert noun["type"] == "string" and "DOORS.md 2.1" in noun["description"]
    callback = T.schema(T.parse("(e: ChangeFrame) => void"))
    assert callback["not"] == {} and "no wire" in callback["description"]


# ------------------------------------------------------------------ check


def _samples(t: T.Node) -> list[Any]:
    """Values of type ``t``, one or more per branch of the tree."""
    if isinstance(t, T.Prim):
        return {
            "string": ["", "x"],
            "int": [0, -7, 2**40],
            "number": [0, 1.5, -2e300],
            "boolean": [True, False],
            "object": [{}, {"a": [1]}],
            "any": [None, 1, "s", [], {"k": None}],
            "void": [],
        }[t.name]
    if isinstance(t, T.Lit):
        return [t.value]
    if isinstance(t, T.Named):
        return ["person", ""] if t.name in T.STRING_NAMES else [None, 3, "s", {"a": 1}, [1]]
    if isinstance(t, T.Array):
        items = _samples(t.item)
        if t.length is not None:
            return [[items[i % len(items)] for i in range(t.length)]]
        return [[], items[:3]]
    if isinstance(t, T.Union):
        return [v for o in t.options for v in _samples(o)]
    if isinstance(t, T.Shape):

        def value(f: T.Field) -> Any:
            return None if f.type is None else _samples(f.type)[-1]

        least = {f.name: value(f) for f in t.fields if not f.optional}
        most = {f.name: value(f) for f in t.fields}
        if t.rest is not None:
            most["someKey"] = _samples(t.rest)[0]
        return [least, most]
    return []  # a Func: no value


@pytest.mark.parametrize("text", TYPES)
def test_check_accepts_the_values_of_every_type(text):
    """Every sample value of each contract type conforms, by check and by its JSON Schema alike."""
    tree = T.parse(text)
    validator = Draft202012Validator(T.schema(tree))
    for value in _samples(tree):
        assert T.check(tree, value) is None, (text, value)
        assert validator.is_valid(value), (text, value)


CASES = [
    # (type, value, path, reason, expected)
    ("string", 1, "", "wrong-type", "string"),
    ("int", 1.5, "", "wrong-type", "int"),
    ("int", 1.0, "", "wrong-type", "int"),
    ("int", True, "", "wrong-type", "int"),
    ("number", "1", "", "wrong-type", "number"),
    ("number", math.inf, "", "wrong-type", "number"),
    ("number", False, "", "wrong-type", "number"),
    ("boolean", 0, "", "wrong-type", "boolean"),
    ("object", [], "", "wrong-type", "object"),
    ('"asc" | "desc"', "up", "", "not-one-of", '"asc" | "desc"'),
    ('"asc" | "desc"', 3, "", "wrong-type", '"asc" | "desc"'),
    ("1 | 2", 3, "", "not-one-of", "1 | 2"),
    ("1 | 2", True, "", "wrong-type", "1 | 2"),
    ('int | "head"', "tail", "", "not-one-of", 'int | "head"'),
    ("number[384]", [0.5] * 383, "", "bad-length", "number[384]"),
    ("number[384]", [0.5] * 383 + ["x"], "[383]", "wrong-type", "number"),
    ("string | string[]", 5, "", "wrong-type", "string | string[]"),
    ("string | string[]", ["a", 2], "[1]", "wrong-type", "string"),
    ("NounType | NounType[]", ["person", 3], "[1]", "wrong-type", "NounType"),
    ("{id: string, threshold?: number}", {"threshold": 0.5}, ".id", "missing", "string"),
    (
        "{id: string, threshold?: number}",
        {"id": "a", "zz": 1, "b": 2},
        ".b",
        "unknown-argument",
        "{id: string, threshold?: number}",
    ),
    ("{id: string, threshold?: number}", {"id": "a", "threshold": "x"}, ".threshold", "wrong-type", "number"),
    (
        '{[m: string]: {op: "count" | "sum", field?: string}}',
        {"a": {"op": "count"}, "b": {"op": "mean"}},
        ".b.op",
        "not-one-of",
        '"count" | "sum"',
    ),
    (
        '(string | {field: string, window: "hour" | "day"})[]',
        ["f", {"field": "g", "window": "year"}],
        "[1].window",
        "not-one-of",
        '"hour" | "day"',
    ),
    ("boolean | {max?: int, size?: int}", {"max": "x"}, ".max", "wrong-type", "int"),
    ("boolean | {max?: int, size?: int}", "yes", "", "wrong-type", "boolean | {max?: int, size?: int}"),
    ("{text?, semantic?}", {"text": [1], "graph": 1}, ".graph", "unknown-argument", "{text?, semantic?}"),
    ("(e: ChangeFrame) => void", {}, "", "wrong-type", "(e: ChangeFrame) => void"),
]


@pytest.mark.parametrize(
    ("text", "value", "path", "reason", "expected"), CASES, ids=[f"{c[0][:24]}:{c[3]}" for c in CASES]
)
def test_check_refuses_with_a_path_and_a_reason(text, value, path, reason, expected):
    """A value that does not conform gets a Mismatch: where below the value, which reason, what was expected."""
    found = T.check(T.parse(text), value)
    assert found == T.Mismatch(path, reason, expected)
    assert found.reason in T.REASONS


def test_numbers_are_any_finite_json_number():
    """A whole number past a float's range is still a number; infinities and NaN are not (no JSON carries them)."""
    vector = T.parse("number[3]")
    assert T.check(vector, [1, 10**400, 0.5]) is None
    assert T.check(vector, [1, math.nan, 0.5]) == T.Mismatch("[1]", "wrong-type", "number")
    assert T.check(vector, [True, 1, 0.5]) == T.Mismatch("[0]", "wrong-type", "number")


def test_named_types_leave_deeper_checks_to_the_door():
    """Named types the notation does not define accept any value; NounType, VerbType and tier any string,
    so a wrong noun still meets the door's own refusal."""
    for value in (None, 1, "x", [], {"anything": True}):
        assert T.check(T.parse("Where"), value) is None
        assert T.check(T.parse("AddArgs[]"), [value]) is None
    assert T.check(T.parse("NounType"), "wizard") is None
    assert T.check(T.parse("tier"), 7) == T.Mismatch("", "wrong-type", "tier")


def _json() -> st.SearchStrategy[Any]:
    keys = st.sampled_from(["id", "op", "field", "max", "text", "a", "b", "window", "zz"])
    # Whole floats are left out: JSON Schema holds 1.0 equal to 1, the doors (and check) do not.
    scalars = (
        st.none()
        | st.booleans()
        | st.integers(-3, 2**53)
        | st.floats(allow_nan=False, allow_infinity=False).filter(lambda f: not f.is_integer())
        | st.sampled_from(["", "x", "asc", "head", "count", "hour", "all", "person", "*"])
    )
    return st.recursive(
        scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(keys, inner, max_size=4), max_leaves=12
    )


@st.composite
def _value_near(draw: st.DrawFn, tree: T.Node) -> Any:
    """A sample of the type, or one with a part swapped for any JSON value, or any JSON value."""
    samples = _samples(tree)
    choice = draw(st.integers(0, 2)) if samples else 2
    if choice == 2:
        return draw(_json())
    value = draw(st.sampled_from(samples))
    if choice == 1 and isinstance(value, dict) and value:
        value = {**value, draw(st.sampled_from(sorted(value) + ["zz"])): draw(_json())}
    elif choice == 1 and isinstance(value, list) and value:
        value = [*value[:-1], draw(_json())]
    return value


VALIDATORS = {text: Draft202012Validator(T.schema(T.parse(text))) for text in TYPES}


@pytest.mark.parametrize("text", TYPES)
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_check_agrees_with_the_schema(text, data):
    """For values near and far from the type, check says "conforms" exactly when the JSON Schema does."""
    tree = T.parse(text)
    value = data.draw(_value_near(tree))
    assert (T.check(tree, value) is None) == VALIDATORS[text].is_valid(value), value


def test_query_types_are_scalars():
    """is_scalar: strings, numbers, booleans, literals and the string-valued named types, and unions of those
    (DOORS.md 0.2); every GET door's query param is one."""
    for text in ("string", "int", "number", "boolean", "NounType", '"a" | "b"', 'int | "head"', "1 | 2"):
        assert T.is_scalar(T.parse(text)), text
    for text in ("Where", "string[]", "object", "string | null", "{a: int}", "any"):
        assert not T.is_scalar(T.parse(text)), text
    for door in D.DOORS:
        for p in door.params:
            if p.location == "query":
                assert T.is_scalar(T.parse(p.type)), (door.name, p.name)
