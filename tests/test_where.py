"""The `where` filter (door catalogue, section 3): every operator and alias, the kind rules, array
and missing-field semantics, the refusals with their locations, the planner's split, and a property
test of the compiled predicates against a small reference interpreter written here from the
catalogue rather than from ``brainy/index/where.py``.
"""

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from brainy.contract import refusals as R
from brainy.index.where import MAX_DEPTH, Equality, compile_where

PROPERTY = settings(deadline=None, max_examples=300)


def row(metadata=None, **reserved):
    """A stored entity row: a few reserved fields, then the caller's, with ``metadata``."""
    out = {
        "id": "0193a0f0-0000-7000-8000-000000000001",
        "type": "product",
        "subtype": None,
        "service": None,
        "visibility": "public",
        "createdAt": 1000,
        "updatedAt": 2000,
        "hasVector": False,
        "generation": 7,
    }
    out.update(reserved)
    out["metadata"] = {} if metadata is None else metadata
    return out


def hits(where, rows, **kw):
    """Which of ``rows`` (a dict of name to row) the where matches, as a sorted list of names."""
    predicate = compile_where(where, **kw)
    return sorted(name for name, r in rows.items() if predicate.matches(r))


def refusal(where, **kw):
    with pytest.raises(R.InvalidArgumentError) as caught:
        compile_where(where, **kw)
    return caught.value.fields["field"], caught.value.fields["reason"]


# A small shop: each row names the case it is here for.
SHOP = {
    "int5": row({"price": 5}),
    "float5": row({"price": 5.0}),
    "str5": row({"price": "5"}),
    "true": row({"price": True}),
    "null": row({"price": None}),
    "absent": row({}),
    "arr": row({"price": [1, 5, "x"]}),
    "obj": row({"price": {"amount": 5}}),
}


# --- eq and ne -----------------------------------------------------------------------------------


def test_eq_scalar_matches_equal_values_of_the_same_kind_and_arrays_holding_one():
    """eq with a scalar: the field equals it (1 equals 1.0; "5" and true are not 5), or the field is
    an array with an element equal to it; objects, null and missing fields do not match."""
    assert hits({"price": 5}, SHOP) == ["arr", "float5", "int5"]
    assert hits({"price": {"eq": 5.0}}, SHOP) == ["arr", "float5", "int5"]
    assert hits({"price": "5"}, SHOP) == ["str5"]
    assert hits({"price": True}, SHOP) == ["true"]
    assert hits({"price": 1}, SHOP) == ["arr"]
    assert hits({"price": 6}, SHOP) == []


def test_eq_aliases_and_dollar_forms_are_eq():
    """equals, is, $eq, $equals, $is and a bare value are one operator."""
    for key in ("eq", "equals", "is", "$eq", "$equals", "$is"):
        assert hits({"price": {key: 5}}, SHOP) == hits({"price": 5}, SHOP), key


def test_eq_with_an_array_operand_is_exact_array_equality():
    """An array operand matches only an equal array: same length, same order, elements equal by
    kind; it does not match an array that merely holds it, nor a scalar."""
    rows = {
        "same": row({"t": [1, "a"]}),
        "float": row({"t": [1.0, "a"]}),
        "order": row({"t": ["a", 1]}),
        "longer": row({"t": [1, "a", 2]}),
        "nested": row({"t": [[1, "a"]]}),
        "scalar": row({"t": 1}),
        "bool": row({"t": [True, "a"]}),
    }
    assert hits({"t": [1, "a"]}, rows) == ["float", "same"]
    assert hits({"t": {"eq": []}}, {"empty": row({"t": []}), "one": row({"t": [None]})}) == ["empty"]
    assert hits({"t": [{"k": 1}]}, {"o": row({"t": [{"k": 1.0}]}), "p": row({"t": [{"k": True}]})}) == ["o"]


def test_null_equals_only_null():
    """null matches a field holding null, or an array holding null; never 0, false, "", a missing
    field or an empty array."""
    rows = {
        "null": row({"n": None}),
        "zero": row({"n": 0}),
        "false": row({"n": False}),
        "empty": row({"n": ""}),
        "absent": row({}),
        "arr": row({"n": [1, None]}),
        "nothing": row({"n": []}),
    }
    assert hits({"n": None}, rows) == ["arr", "null"]
    assert hits({"n": {"in": [None]}}, rows) == ["arr", "null"]
    assert hits({"n": {"ne": None}}, rows) == ["absent", "empty", "false", "nothing", "zero"]


def test_ne_is_not_eq_and_missing_fields_match():
    """ne (notEquals, isNot) is the negation of eq, so a missing field matches, and an array
    holding the value does not."""
    for key in ("ne", "notEquals", "isNot", "$ne", "$notEquals", "$isNot"):
        assert hits({"price": {key: 5}}, SHOP) == ["absent", "null", "obj", "str5", "true"], key
    assert hits({"price": {"ne": [1, 5, "x"]}}, SHOP) == sorted(set(SHOP) - {"arr"})


# --- comparisons ---------------------------------------------------------------------------------


def test_comparisons_hold_only_between_values_of_the_same_kind():
    """gt, gte, lt, lte compare numbers numerically and strings by code point; mixed kinds, booleans
    (not numbers), null, arrays, objects and missing fields never match."""
    assert hits({"price": {"gt": 4}}, SHOP) == ["float5", "int5"]
    assert hits({"price": {"gte": 5}}, SHOP) == ["float5", "int5"]
    assert hits({"price": {"gt": 5}}, SHOP) == []
    assert hits({"price": {"lt": 6}}, SHOP) == ["float5", "int5"]
    assert hits({"price": {"lte": 4.5}}, SHOP) == []
    assert hits({"price": {"gte": "0"}}, SHOP) == ["str5"]
    assert hits({"price": {"lt": "5"}}, SHOP) == []
    assert hits({"price": {"gte": 0}}, {"bool": row({"price": True})}) == []


def test_comparison_aliases():
    """greaterThan, greaterEqual, lessThan, lessEqual and the $ forms are gt, gte, lt, lte."""
    pairs = {
        "gt": ("greaterThan", "$gt", "$greaterThan"),
        "gte": ("greaterEqual", "$gte", "$greaterEqual"),
        "lt": ("lessThan", "$lt", "$lessThan"),
        "lte": ("lessEqual", "$lte", "$lessEqual"),
    }
    for op, aliases in pairs.items():
        for bound in (4, 5, 6, "5"):
            for alias in aliases:
                assert hits({"price": {alias: bound}}, SHOP) == hits({"price": {op: bound}}, SHOP), (alias, bound)


def test_strings_order_by_code_point():
    """Strings compare by code point: "Z" < "a" < "z" < "é", and a prefix sorts first."""
    rows = {name: row({"s": name}) for name in ("Z", "a", "ab", "z", "é")}
    assert hits({"s": {"gt": "a"}}, rows) == ["ab", "z", "é"]
    assert hits({"s": {"lt": "a"}}, rows) == ["Z"]
    assert hits({"s": {"gte": "z"}}, rows) == ["z", "é"]


def test_between_is_inclusive_under_the_same_kind_rule():
    """between [lo, hi] holds for lo <= v <= hi, both ends included, for numbers or strings, never
    across kinds; lo above hi matches nothing."""
    rows = {str(v): row({"v": v}) for v in (1, 2, 2.5, 3, 4)} | {"s": row({"v": "b"}), "t": row({"v": True})}
    assert hits({"v": {"between": [2, 3]}}, rows) == ["2", "2.5", "3"]
    assert hits({"v": {"$between": [2.5, 2.5]}}, rows) == ["2.5"]
    assert hits({"v": {"between": ["a", "c"]}}, rows) == ["s"]
    assert hits({"v": {"between": [3, 2]}}, rows) == []
    assert hits({"v": {"between": [0, 1]}}, rows) == ["1"]


# --- membership ----------------------------------------------------------------------------------


def test_in_matches_the_value_or_any_element_of_an_array_field():
    """in (oneOf, hasAny): the value, or any element of an array field, is in the list, by kind;
    an empty list matches nothing; a missing field never matches."""
    for key in ("in", "oneOf", "hasAny", "$in", "$oneOf", "$hasAny"):
        assert hits({"price": {key: [5, "nope"]}}, SHOP) == ["arr", "float5", "int5"], key
        assert hits({"price": {key: ["x"]}}, SHOP) == ["arr"], key
        assert hits({"price": {key: [True, None]}}, SHOP) == ["null", "true"], key
        assert hits({"price": {key: []}}, SHOP) == [], key


def test_nin_is_not_in_and_missing_fields_match():
    """nin (noneOf) is the negation of in: a missing field matches, an array with any listed
    element does not."""
    for key in ("nin", "noneOf", "$nin", "$noneOf"):
        assert hits({"price": {key: [5, "x"]}}, SHOP) == ["absent", "null", "obj", "str5", "true"], key
        assert hits({"price": {key: []}}, SHOP) == sorted(SHOP), key


def test_exists_and_missing_look_at_presence_only():
    """exists true matches a present key even holding null; exists false and missing true match an
    absent key; missing is the inverse of exists."""
    assert hits({"price": {"exists": True}}, SHOP) == sorted(set(SHOP) - {"absent"})
    assert hits({"price": {"$exists": False}}, SHOP) == ["absent"]
    assert hits({"price": {"missing": True}}, SHOP) == ["absent"]
    assert hits({"price": {"$missing": False}}, SHOP) == sorted(set(SHOP) - {"absent"})


def test_contains_an_element_or_a_substring():
    """contains (includes): an array field has an equal element, or a string field has the string
    operand as a case-sensitive substring; excludes is its negation, so a missing field matches."""
    rows = {
        "tags": row({"t": ["red", "blue", 3]}),
        "text": row({"t": "credit"}),
        "num": row({"t": 3}),
        "absent": row({}),
        "upper": row({"t": "RED"}),
    }
    for key in ("contains", "includes", "$contains", "$includes"):
        assert hits({"t": {key: "red"}}, rows) == ["tags", "text"], key
        assert hits({"t": {key: 3}}, rows) == ["tags"], key
        assert hits({"t": {key: "edi"}}, rows) == ["text"], key
    assert hits({"t": {"excludes": "red"}}, rows) == ["absent", "num", "upper"]
    assert hits({"t": {"$excludes": 3.0}}, rows) == ["absent", "num", "text", "upper"]


def test_has_all_needs_every_listed_value_in_an_array_field():
    """hasAll (all): an array field holds every listed value (an empty list: any array); scalars
    never match."""
    rows = {
        "both": row({"t": ["a", "b", "c"]}),
        "one": row({"t": ["a"]}),
        "scalar": row({"t": "a"}),
        "empty": row({"t": []}),
    }
    for key in ("hasAll", "all", "$hasAll", "$all"):
        assert hits({"t": {key: ["a", "b"]}}, rows) == ["both"], key
        assert hits({"t": {key: ["a"]}}, rows) == ["both", "one"], key
        assert hits({"t": {key: []}}, rows) == ["both", "empty", "one"], key


def test_size_is_an_array_fields_length():
    """size: an array field has exactly this many elements; strings and objects have no size."""
    rows = {
        "two": row({"t": [1, 2]}),
        "none": row({"t": []}),
        "str": row({"t": "ab"}),
        "obj": row({"t": {"a": 1, "b": 2}}),
    }
    assert hits({"t": {"size": 2}}, rows) == ["two"]
    assert hits({"t": {"$size": 0}}, rows) == ["none"]


def test_kind_names_the_values_kind():
    """kind ($type, $kind): null, boolean, number, string, array or object; a missing field has
    none of them."""
    expected = {
        "number": ["float5", "int5"],
        "string": ["str5"],
        "boolean": ["true"],
        "null": ["null"],
        "array": ["arr"],
        "object": ["obj"],
    }
    for kind, names in expected.items():
        for key in ("kind", "$type", "$kind"):
            assert hits({"price": {key: kind}}, SHOP) == names, (key, kind)


def test_starts_with_and_ends_with_are_case_sensitive_string_tests():
    """startsWith / endsWith: a string field's prefix / suffix, case-sensitive; arrays of strings
    and other kinds do not match."""
    rows = {"a": row({"s": "Alpha"}), "b": row({"s": "alphabet"}), "arr": row({"s": ["alpha"]}), "n": row({"s": 1})}
    assert hits({"s": {"startsWith": "alpha"}}, rows) == ["b"]
    assert hits({"s": {"$startsWith": "A"}}, rows) == ["a"]
    assert hits({"s": {"endsWith": "ha"}}, rows) == ["a"]
    assert hits({"s": {"$endsWith": "bet"}}, rows) == ["b"]
    assert hits({"s": {"startsWith": ""}}, rows) == ["a", "b"]


def test_matches_is_a_python_regex_search():
    """matches (regex): re.search over a string field, no flags unless the pattern says (?i)."""
    rows = {"a": row({"s": "Order 66"}), "b": row({"s": "order 7"}), "n": row({"s": 66})}
    for key in ("matches", "regex", "$matches", "$regex"):
        assert hits({"s": {key: r"\d\d"}}, rows) == ["a"], key
        assert hits({"s": {key: "^order"}}, rows) == ["b"], key
        assert hits({"s": {key: "(?i)^order"}}, rows) == ["a", "b"], key


def test_a_pattern_is_compiled_once_when_the_where_is(monkeypatch):
    """The pattern is compiled by compile_where, once, and not again per row."""
    calls = []
    real = re.compile
    monkeypatch.setattr(re, "compile", lambda *a: calls.append(a) or real(*a))
    predicate = compile_where({"s": {"regex": "ab+"}, "t": {"anyOf": [{"matches": "x"}]}})
    assert len(calls) == 2
    assert [predicate.matches(row({"s": "abb" * i, "t": "x"})) for i in range(50)] == [False] + [True] * 49
    assert len(calls) == 2


# --- several operators, logic --------------------------------------------------------------------


def test_keys_and_operators_are_anded():
    """The keys of a where, and the operators of one operator object, must all hold."""
    rows = {n: row({"p": n, "c": n % 2}) for n in range(6)}
    assert hits({"p": {"gte": 1, "lt": 4}, "c": 1}, {str(k): v for k, v in rows.items()}) == ["1", "3"]
    assert hits({}, {"x": row()}) == ["x"]
    assert hits(None, {"x": row()}) == ["x"]


def test_all_any_not_nor_over_documents():
    """allOf/and/$and: every sub-where; anyOf/or/$or: at least one; not/$not: the sub-where fails;
    nor/$nor: none holds. Empty allOf and nor match all, empty anyOf none."""
    rows = {str(n): row({"n": n}) for n in range(6)}
    small, even = {"n": {"lt": 3}}, {"n": {"in": [0, 2, 4]}}
    for key in ("allOf", "and", "$and"):
        assert hits({key: [small, even]}, rows) == ["0", "2"]
        assert hits({key: []}, rows) == sorted(rows)
    for key in ("anyOf", "or", "$or"):
        assert hits({key: [small, even]}, rows) == ["0", "1", "2", "4"]
        assert hits({key: []}, rows) == []
    for key in ("not", "$not"):
        assert hits({key: small}, rows) == ["3", "4", "5"]
    for key in ("nor", "$nor"):
        assert hits({key: [small, even]}, rows) == ["3", "5"]
        assert hits({key: []}, rows) == sorted(rows)


def test_logic_nests():
    """Logical keys nest to any depth up to the limit and combine with fields at each level."""
    rows = {str(n): row({"n": n, "tag": "odd" if n % 2 else "even"}) for n in range(10)}
    where = {"anyOf": [{"not": {"n": {"lt": 8}}}, {"allOf": [{"tag": "odd"}, {"nor": [{"n": 1}, {"n": {"gt": 5}}]}]}]}
    assert hits(where, rows) == ["3", "5", "8", "9"]
    deep = {"n": 4}
    for _ in range(MAX_DEPTH - 2):  # an even number of nots, the deepest allowed
        deep = {"not": deep}
    assert hits(deep, rows) == ["4"]


def test_logic_inside_an_operator_object_combines_conditions_of_that_field():
    """Inside a field's operator object, not/anyOf/allOf/nor take field conditions (bare values or
    operator objects) of that same field."""
    rows = {str(n): row({"n": n}) for n in range(6)} | {"absent": row({})}
    assert hits({"n": {"not": {"gt": 3}}}, rows) == ["0", "1", "2", "3", "absent"]
    assert hits({"n": {"$not": 2}}, rows) == ["0", "1", "3", "4", "5", "absent"]
    assert hits({"n": {"anyOf": [0, {"gt": 4}]}}, rows) == ["0", "5"]
    assert hits({"n": {"or": [{"lt": 1}, {"in": [3]}], "ne": 0}}, rows) == ["3"]
    assert hits({"n": {"allOf": [{"gt": 1}, {"lt": 4}]}}, rows) == ["2", "3"]
    assert hits({"n": {"nor": [{"lt": 2}, {"gt": 3}]}}, rows) == ["2", "3", "absent"]


def test_an_object_value_is_always_an_operator_object():
    """A where never matches a nested object by value: an object value is read as operators, and a
    dotted path reaches inside."""
    rows = {"obj": row({"spec": {"width": 13, "size": 2}})}
    assert refusal({"spec": {"width": 13}}) == ("where.spec", "unknown-operator")
    assert hits({"spec.width": 13}, rows) == ["obj"]
    assert hits({"spec": {"size": 2}}, rows) == []  # the size operator, not a key named size


# --- paths ---------------------------------------------------------------------------------------


def test_dotted_paths_walk_metadata_objects_only():
    """A dotted path walks metadata object by object; through a scalar or an array it is missing."""
    rows = {
        "deep": row({"specs": {"display": {"size": 13.3}}}),
        "flat": row({"specs": 13.3}),
        "arr": row({"specs": [{"display": {"size": 13.3}}]}),
        "absent": row({}),
    }
    assert hits({"specs.display.size": 13.3}, rows) == ["deep"]
    assert hits({"specs.display.size": {"exists": False}}, rows) == ["absent", "arr", "flat"]
    assert hits({"specs.display": {"kind": "object"}}, rows) == ["deep"]


def test_reserved_fields_read_the_row_not_metadata():
    """type, id, key, createdAt... read the row's own fields; subtype and service (string | null)
    read as null when a row leaves them out; key is missing when the row has none."""
    rows = {
        "a": row({"type": "not-this"}, type="person", key="alice", subtype="staff"),
        "b": row({}, type="product"),
        "c": {"id": "c", "type": "person", "metadata": {}},
    }
    assert hits({"type": "person"}, rows) == ["a", "c"]
    assert hits({"key": {"exists": True}}, rows) == ["a"]
    assert hits({"subtype": None}, rows) == ["b", "c"]
    assert hits({"service": {"exists": True}}, rows) == ["a", "b", "c"]
    assert hits({"createdAt": {"lt": 1500}}, rows) == ["a", "b"]
    assert hits({"hasVector": False}, rows) == ["a", "b"]
    assert hits({"id": {"startsWith": "0193"}}, rows) == ["a", "b"]


def test_relation_wheres_address_relation_fields():
    """With relation=True, from, to, weight and confidence are addressable (confidence null when
    left out), and paths address relation metadata; on entities those names are refused."""
    rel = {
        "x": {"id": "r1", "from": "e1", "to": "e2", "type": "relatedTo", "weight": 0.5, "metadata": {"since": 2020}},
        "y": {
            "id": "r2",
            "from": "e2",
            "to": "e1",
            "type": "relatedTo",
            "weight": 1.0,
            "confidence": 0.9,
            "metadata": {},
        },
    }
    assert hits({"from": "e1"}, rel, relation=True) == ["x"]
    assert hits({"weight": {"gte": 0.75}}, rel, relation=True) == ["y"]
    assert hits({"confidence": None}, rel, relation=True) == ["x"]
    assert hits({"since": {"lt": 2021}}, rel, relation=True) == ["x"]
    for name in ("from", "to", "weight", "confidence"):
        assert refusal({name: 1}) == (f"where.{name}", "reserved-field")


# --- refusals ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("where", "field", "reason"),
    [
        ({"price": {"bogus": 1}}, "where.price", "unknown-operator"),
        ({"price": {"type": "number"}}, "where.price", "unknown-operator"),  # only $type is kind
        ({"price": {"$$gt": 1}}, "where.price", "unknown-operator"),
        ({"price": {"gt": 1, "gtt": 2}}, "where.price", "unknown-operator"),
        ({"$gt": 1}, "where.$gt", "unknown-operator"),
        ({"anyOf": [{}, {"price": {"gt": True}}]}, "where.anyOf[1].price", "bad-operand"),
        ({"a": {"gt": None}}, "where.a", "bad-operand"),
        ({"a": {"gt": [1]}}, "where.a", "bad-operand"),
        ({"a": {"lte": float("nan")}}, "where.a", "bad-operand"),
        ({"a": {"between": [1]}}, "where.a", "bad-operand"),
        ({"a": {"between": [1, 2, 3]}}, "where.a", "bad-operand"),
        ({"a": {"between": [1, "z"]}}, "where.a", "bad-operand"),
        ({"a": {"between": 1}}, "where.a", "bad-operand"),
        ({"a": {"in": 1}}, "where.a", "bad-operand"),
        ({"a": {"oneOf": [[1]]}}, "where.a", "bad-operand"),
        ({"a": {"nin": {"x": 1}}}, "where.a", "bad-operand"),
        ({"a": {"hasAll": "x"}}, "where.a", "bad-operand"),
        ({"a": {"size": "2"}}, "where.a", "bad-operand"),
        ({"a": {"size": True}}, "where.a", "bad-operand"),
        ({"a": {"size": -1}}, "where.a", "bad-operand"),
        ({"a": {"size": 1.0}}, "where.a", "bad-operand"),
        ({"a": {"exists": 1}}, "where.a", "bad-operand"),
        ({"a": {"missing": "yes"}}, "where.a", "bad-operand"),
        ({"a": {"kind": "integer"}}, "where.a", "bad-operand"),
        ({"a": {"contains": [1]}}, "where.a", "bad-operand"),
        ({"a": {"excludes": {}}}, "where.a", "bad-operand"),
        ({"a": {"startsWith": 1}}, "where.a", "bad-operand"),
        ({"a": {"endsWith": None}}, "where.a", "bad-operand"),
        ({"a": {"regex": "("}}, "where.a", "bad-operand"),
        ({"a": {"matches": 3}}, "where.a", "bad-operand"),
        ({"a": {"eq": {"b": 1}}}, "where.a", "bad-operand"),
        ({"a": {"ne": float("inf")}}, "where.a", "bad-operand"),
        ({"a": {}}, "where.a", "bad-operand"),
        ({"anyOf": {"a": 1}}, "where.anyOf", "bad-operand"),
        ({"or": [{"a": 1}, 3]}, "where.or[1]", "bad-operand"),
        ({"and": "a"}, "where.and", "bad-operand"),
        ({"$nor": {}}, "where.$nor", "bad-operand"),
        ({"not": [{"a": 1}]}, "where.not", "bad-operand"),
        ({"a": {"anyOf": 1}}, "where.a.anyOf", "bad-operand"),
        ({"a": {"anyOf": [1, {"gt": {}}]}}, "where.a.anyOf[1]", "bad-operand"),
        ({"a": {"not": {"zz": 1}}}, "where.a.not", "unknown-operator"),
        ({"nor": [{"not": {"b.c": {"size": None}}}]}, "where.nor[0].not.b.c", "bad-operand"),
        ([{"a": 1}], "where", "bad-operand"),
        ("a", "where", "bad-operand"),
        ({"": 1}, "where.", "bad-path"),
        ({"a..b": 1}, "where.a..b", "bad-path"),
        ({"a.": 1}, "where.a.", "bad-path"),
        ({"data": "x"}, "where.data", "reserved-field"),
        ({"metadata.a": 1}, "where.metadata.a", "reserved-field"),
        ({"denseInt": 1}, "where.denseInt", "reserved-field"),
        ({"vector": {"exists": True}}, "where.vector", "reserved-field"),
    ],
)
def test_a_mistake_is_refused_by_name_and_place(where, field, reason):
    """An unknown operator, a mistyped operand, a bad path or an unaddressable field is an
    InvalidArgumentError naming the place in the where (root ``where``, ``.key``, ``[i]``) and the
    reason; never a predicate that matches nothing."""
    assert refusal(where) == (field, reason)


def test_the_whole_tree_is_checked_before_any_row():
    """A mistake deep inside a branch that a row would never reach is still refused at compile."""
    where = {"anyOf": [{"type": "person"}, {"not": {"price": {"between": "cheap"}}}]}
    assert refusal(where) == ("where.anyOf[1].not.price", "bad-operand")


def test_the_root_name_is_the_callers():
    """name= roots the locations, for doors whose filter argument is called otherwise."""
    assert refusal({"a": {"bogus": 1}}, name="filter") == ("filter.a", "unknown-operator")


def test_nesting_beyond_the_limit_is_refused():
    """A where nested past MAX_DEPTH levels is refused as too-deep, not run into recursion."""
    deep = {"a": 1}
    for _ in range(MAX_DEPTH + 1):
        deep = {"not": deep}
    field, reason = refusal(deep)
    assert reason == "too-deep" and field.startswith("where.not.not")


# --- the planner's part --------------------------------------------------------------------------


def test_equalities_are_the_top_level_anded_eq_and_in_conditions():
    """equalities() lists bare scalars, eq and in conditions reached through ANDs only (top level,
    allOf, a field's operator object and its allOf), with their values; array operands, other
    operators and anything under anyOf/not/nor stay in the residual."""
    where = {
        "type": "person",
        "tags": {"in": ["a", "b", "a", 1, 1.0]},
        "n": {"gt": 1, "eq": 3},
        "arr": [1, 2],
        "allOf": [{"city": "Oslo"}, {"anyOf": [{"x": 1}]}],
        "m": {"allOf": [{"is": None}, {"ne": 2}]},
        "not": {"y": 2},
        "z": {"anyOf": [1, 2]},
    }
    got = [(e.path, e.values, e.reserved) for e in compile_where(where).equalities()]
    assert got == [
        ("type", ("person",), True),
        ("tags", ("a", "b", 1), False),
        ("n", (3,), False),
        ("city", ("Oslo",), False),
        ("m", (None,), False),
    ]
    assert compile_where({"anyOf": [{"a": 1}]}).equalities() == []
    assert isinstance(compile_where({"a": 1}).equalities()[0], Equality)


def test_equalities_and_residual_together_are_the_predicate():
    """matches(row) == every equality holds and residual().matches(row), row by row."""
    where = {"type": "product", "price": {"in": [5, "x"], "gte": 5}, "anyOf": [{"price": 5}, {"price": "5"}]}
    predicate = compile_where(where)
    for r in SHOP.values():
        split = all(e.holds(r) for e in predicate.equalities()) and predicate.residual().matches(r)
        assert predicate.matches(r) == split
    assert compile_where({"a": 1}).residual().matches(row({}))


def test_matches_all_says_no_row_needs_reading():
    """matches_all is true exactly when the predicate has no condition left (no where, an empty
    one, or the residual of a where made only of equalities)."""
    assert compile_where(None).matches_all and compile_where({}).matches_all
    assert compile_where({"allOf": []}).matches_all
    assert compile_where({"type": "person", "n": {"in": [1, 2]}}).residual().matches_all
    assert not compile_where({"type": "person"}).matches_all
    assert not compile_where({"type": "person", "n": {"gt": 1}}).residual().matches_all


# --- a reference interpreter, written from the catalogue -----------------------------------------

MISSING = object()
ENTITY = {
    "id",
    "key",
    "type",
    "subtype",
    "service",
    "visibility",
    "createdAt",
    "updatedAt",
    "createdBy",
    "updatedBy",
    "hasVector",
    "generation",
}
NULLABLE = {"subtype", "service", "confidence"}
NAMES = {
    "eq": "eq",
    "equals": "eq",
    "is": "eq",
    "ne": "ne",
    "notEquals": "ne",
    "isNot": "ne",
    "gt": "gt",
    "greaterThan": "gt",
    "gte": "gte",
    "greaterEqual": "gte",
    "lt": "lt",
    "lessThan": "lt",
    "lte": "lte",
    "lessEqual": "lte",
    "between": "between",
    "in": "in",
    "oneOf": "in",
    "hasAny": "in",
    "nin": "nin",
    "noneOf": "nin",
    "exists": "exists",
    "missing": "missing",
    "contains": "contains",
    "includes": "contains",
    "excludes": "excludes",
    "hasAll": "hasAll",
    "all": "hasAll",
    "size": "size",
    "kind": "kind",
    "startsWith": "startsWith",
    "endsWith": "endsWith",
    "matches": "matches",
    "regex": "matches",
    "allOf": "allOf",
    "and": "allOf",
    "anyOf": "anyOf",
    "or": "anyOf",
    "not": "not",
    "nor": "nor",
}


def ref_name(key):
    if key == "$type":
        return "kind"
    return NAMES.get(key[1:] if key.startswith("$") else key)


def ref_kind(v):
    if v is MISSING:
        return "missing"
    for kind, types in (
        ("null", type(None)),
        ("boolean", bool),
        ("number", (int, float)),
        ("string", str),
        ("array", list),
        ("object", dict),
    ):
        if isinstance(v, types):
            return kind


def ref_equal(a, b):
    if ref_kind(a) != ref_kind(b):
        return False
    if isinstance(a, list):
        return len(a) == len(b) and all(ref_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return set(a) == set(b) and all(ref_equal(a[k], b[k]) for k in a)
    return a == b


def ref_has(v, x):
    """v equals x, or v is an array with an element equal to x."""
    return ref_equal(v, x) or (isinstance(v, list) and any(ref_equal(e, x) for e in v))


def ref_op(op, x, v):
    if op == "eq":
        return ref_equal(v, x) if isinstance(x, list) else ref_has(v, x)
    if op == "ne":
        return not ref_op("eq", x, v)
    if op in ("gt", "gte", "lt", "lte"):
        if ref_kind(v) != ref_kind(x):
            return False
        return {"gt": v > x, "gte": v >= x, "lt": v < x, "lte": v <= x}[op]
    if op == "between":
        return ref_kind(v) == ref_kind(x[0]) and x[0] <= v <= x[1]
    if op == "in":
        return any(ref_has(v, e) for e in x)
    if op == "nin":
        return not ref_op("in", x, v)
    if op == "exists":
        return (v is not MISSING) == x
    if op == "missing":
        return (v is MISSING) == x
    if op == "contains":
        if isinstance(v, list):
            return any(ref_equal(e, x) for e in v)
        return isinstance(v, str) and isinstance(x, str) and x in v
    if op == "excludes":
        return not ref_op("contains", x, v)
    if op == "hasAll":
        return isinstance(v, list) and all(any(ref_equal(e, want) for e in v) for want in x)
    if op == "size":
        return isinstance(v, list) and len(v) == x
    if op == "kind":
        return ref_kind(v) == x
    if op == "startsWith":
        return isinstance(v, str) and v[: len(x)] == x
    if op == "endsWith":
        return isinstance(v, str) and len(v) >= len(x) and v[len(v) - len(x) :] == x
    if op == "matches":
        return isinstance(v, str) and re.search(x, v) is not None
    raise AssertionError(op)


def ref_logic(op, x, holds):
    """A logical key over its operand, each part judged by ``holds``; None for any other key."""
    if op in ("allOf", "anyOf", "nor"):
        found = [holds(part) for part in x]
        return all(found) if op == "allOf" else (any(found) if op == "anyOf" else not any(found))
    if op == "not":
        return not holds(x)
    return None


def ref_condition(cond, v):
    if not isinstance(cond, dict):
        return ref_op("eq", cond, v)
    for key, x in cond.items():
        op = ref_name(key)
        ok = ref_logic(op, x, lambda c: ref_condition(c, v))
        if not (ref_op(op, x, v) if ok is None else ok):
            return False
    return True


def ref_resolve(r, path):
    parts = path.split(".")
    if parts[0] in ENTITY:
        v = r.get(parts[0], None if parts[0] in NULLABLE else MISSING)
        parts = parts[1:]
    else:
        v = r.get("metadata", MISSING)
    for p in parts:
        v = v.get(p, MISSING) if isinstance(v, dict) else MISSING
    return v


def ref_where(where, r):
    for key, x in where.items():
        ok = ref_logic(ref_name(key), x, lambda w: ref_where(w, r))
        if not (ref_condition(x, ref_resolve(r, key)) if ok is None else ok):
            return False
    return True


# --- random rows and random wheres ---------------------------------------------------------------

SCALARS = st.sampled_from([None, True, False, 0, 1, 1.0, 2, -1.5, 10, "", "a", "ab", "ba", "B", "é"])
ARRAYS = st.lists(SCALARS, max_size=3)
VALUES = st.one_of(SCALARS, ARRAYS, st.fixed_dictionaries({"x": SCALARS}))
META_PATHS = ["a", "b", "c", "o.x", "o"]
PATHS = st.sampled_from(META_PATHS + ["a", "b", "type", "subtype", "service", "key"])


@st.composite
def rows(draw):
    r = {"id": draw(st.sampled_from(["i1", "i2"])), "type": draw(st.sampled_from(["person", "place"]))}
    for name in ("subtype", "service", "key"):
        choice = draw(st.sampled_from(["absent", "null", "value"]))
        if choice != "absent":
            r[name] = None if choice == "null" else draw(st.sampled_from(["a", "ab", "person"]))
    meta = {}
    for name in ("a", "b", "c", "o"):
        if draw(st.booleans()):
            meta[name] = draw(VALUES)
    r["metadata"] = meta
    return r


def dollar(names):
    """One spelling of an operator: a name or alias, bare or with a $ prefix."""
    return st.tuples(st.sampled_from(names), st.booleans()).map(lambda t: ("$" if t[1] else "") + t[0])


COMPARABLE = st.sampled_from([0, 1, 1.5, 2, -1, "", "a", "ab", "b", "é"])
SCALAR_LISTS = st.lists(SCALARS, max_size=3)
OPERATORS = [
    (dollar(["eq", "equals", "is", "ne", "notEquals", "isNot"]), st.one_of(SCALARS, ARRAYS)),
    (dollar(["gt", "gte", "lt", "lte", "greaterThan", "greaterEqual", "lessThan", "lessEqual"]), COMPARABLE),
    (
        dollar(["between"]),
        st.one_of(
            st.lists(st.sampled_from([-1, 0, 1, 1.5, 2]), min_size=2, max_size=2),
            st.lists(st.sampled_from(["", "a", "ab", "b"]), min_size=2, max_size=2),
        ),
    ),
    (dollar(["in", "oneOf", "hasAny", "nin", "noneOf", "hasAll", "all"]), SCALAR_LISTS),
    (dollar(["exists", "missing"]), st.booleans()),
    (dollar(["contains", "includes", "excludes"]), SCALARS),
    (dollar(["size"]), st.integers(0, 3)),
    (
        st.sampled_from(["kind", "$kind", "$type"]),
        st.sampled_from(["null", "boolean", "number", "string", "array", "object"]),
    ),
    (dollar(["startsWith", "endsWith"]), st.sampled_from(["", "a", "b", "B"])),
    (dollar(["matches", "regex"]), st.sampled_from(["a", "^a", "b$", "(?i)b", "a+b", ""])),
]
# Uniform over the operator families, then over each family's spellings and operands.
ONE_OPERATOR = st.sampled_from(OPERATORS).flatmap(lambda op: st.tuples(*op))
BARE = st.one_of(SCALARS, ARRAYS)


def conditions(depth=2):
    """A field condition: a bare value, an operator object, or field-level logic over conditions."""
    operator_object = st.lists(ONE_OPERATOR, min_size=1, max_size=3).map(dict)
    if depth == 0:
        return st.one_of(BARE, operator_object, operator_object)
    inner = conditions(depth - 1)
    return st.one_of(
        BARE,
        operator_object,
        operator_object,
        operator_object,
        st.tuples(dollar(["allOf", "and", "anyOf", "or", "nor"]), st.lists(inner, max_size=3)).map(
            lambda t: {t[0]: t[1]}
        ),
        st.tuples(dollar(["not"]), inner).map(lambda t: {t[0]: t[1]}),
    )


def wheres(depth=2):
    """A where document: up to three fields, and up to two logical keys over smaller documents."""
    fields = st.dictionaries(PATHS, conditions(), min_size=1 if depth == 2 else 0, max_size=3)
    if depth == 0:
        return fields
    inner = wheres(depth - 1)
    logic = st.one_of(
        st.tuples(dollar(["allOf", "and", "anyOf", "or", "nor"]), st.lists(inner, min_size=1, max_size=3)),
        st.tuples(dollar(["not"]), inner),
    )
    return st.tuples(fields, st.lists(logic, max_size=2)).map(lambda t: {**t[0], **dict(t[1])})


@PROPERTY
@given(where=wheres(), sample=st.lists(rows(), min_size=10, max_size=40, unique_by=repr))
def test_compiled_predicates_agree_with_the_reference_interpreter(where, sample):
    """For random where trees over random rows, the compiled predicate and the reference
    interpreter (written above from the catalogue) match exactly the same rows, and the planner's
    split (equalities, then residual) matches them too."""
    predicate = compile_where(where)
    for r in sample:
        expected = ref_where(where, r)
        assert predicate.matches(r) == expected, r
        split = all(e.holds(r) for e in predicate.equalities()) and predicate.residual().matches(r)
        assert split == expected, r


@PROPERTY
@given(path=PATHS, condition=conditions(depth=0), sample=st.lists(rows(), min_size=10, max_size=40, unique_by=repr))
def test_single_conditions_agree_with_the_reference_interpreter(path, condition, sample):
    """One field condition at a time (where each operator decides the answer alone): the compiled
    predicate and the reference interpreter match the same rows."""
    predicate = compile_where({path: condition})
    for r in sample:
        assert predicate.matches(r) == ref_where({path: condition}, r), r


VALUE_POOL = [
    None,
    True,
    False,
    0,
    1,
    1.0,
    2,
    2.5,
    -1,
    "",
    "a",
    "A",
    "ab",
    "ba",
    "b",
    "é",
    [],
    [1],
    [1, "a"],
    ["a", 1],
    [None],
    [True],
    ["ab", "b"],
    [[1]],
    {},
    {"x": 1},
    {"x": {"y": 1}},
]
OPERAND_POOL = {
    "eq": [None, True, False, 0, 1, 1.0, 2.5, "", "a", "ab", [], [1], [1, "a"], [1.0, "a"], [[1]], [{"x": 1}]],
    "gt": [-1, 0, 1, 1.0, 2, 2.5, 3, "", "a", "ab", "b", "é"],
    "between": [[0, 1], [1, 1], [1, 2.5], [2, 1], ["a", "b"], ["", "a"], ["b", "a"], [-1.5, 0]],
    "in": [[], [None], [1], [1.0, "a"], [True, False], ["ab", "b"], [0, "", None]],
    "exists": [True, False],
    "contains": [None, True, 0, 1, 1.0, "", "a", "b", "A", "é"],
    "size": [0, 1, 2, 3],
    "kind": ["null", "boolean", "number", "string", "array", "object"],
    "startsWith": ["", "a", "A", "b", "ab", "abc"],
    "matches": ["", "a", "^a", "b$", "(?i)a", "^$", "[0-9]"],
}
FAMILY = {
    "eq": "eq",
    "ne": "eq",
    "gt": "gt",
    "gte": "gt",
    "lt": "gt",
    "lte": "gt",
    "between": "between",
    "in": "in",
    "nin": "in",
    "hasAll": "in",
    "exists": "exists",
    "missing": "exists",
    "contains": "contains",
    "excludes": "contains",
    "size": "size",
    "kind": "kind",
    "startsWith": "startsWith",
    "endsWith": "startsWith",
    "matches": "matches",
}


def test_every_operator_on_every_value_agrees_with_the_reference_interpreter():
    """Every spelling of every operator (name, alias, $ form), with every operand of a small pool,
    on every value of a small pool and on a missing field, matches as the reference interpreter
    says: an exhaustive sweep of the leaf rules."""
    spellings = [k for k in NAMES if NAMES[k] in FAMILY] + ["$" + k for k in NAMES if NAMES[k] in FAMILY] + ["$type"]
    samples = [row({"v": v}) for v in VALUE_POOL] + [row({})]
    checked = 0
    for spelling in spellings:
        op = ref_name(spelling)
        for operand in OPERAND_POOL[FAMILY[op]]:
            where = {"v": {spelling: operand}}
            predicate = compile_where(where)
            for r in samples:
                assert predicate.matches(r) == ref_where(where, r), (where, r["metadata"])
                checked += 1
    assert checked > 15_000


BAD = [
    ({"bogus": 1}, "unknown-operator"),
    ({"gt": True}, "bad-operand"),
    ({"between": [1]}, "bad-operand"),
    ({"in": 3}, "bad-operand"),
    ({"size": "2"}, "bad-operand"),
    ({"exists": 1}, "bad-operand"),
    ({"regex": "("}, "bad-operand"),
    ({"$type": "int"}, "bad-operand"),
    ({}, "bad-operand"),
    ({"anyOf": {}}, "bad-operand"),
]


def field_conditions(where, at):
    """Every (container, key, location) of a field condition in a where, in document order."""
    out = []
    for key, x in where.items():
        name = ref_name(key)
        if name in ("allOf", "anyOf", "nor"):
            for i, sub in enumerate(x):
                out += field_conditions(sub, f"{at}.{key}[{i}]")
        elif name == "not":
            out += field_conditions(x, f"{at}.{key}")
        else:
            out.append((where, key, f"{at}.{key}"))
    return out


@PROPERTY
@given(where=wheres(), bad=st.sampled_from(BAD), data=st.data())
def test_one_bad_condition_anywhere_is_refused_at_its_place(where, bad, data):
    """Put one bad field condition anywhere in a random valid where: compiling refuses with that
    condition's location and reason (for a bad field-level anyOf, the location of the anyOf)."""
    places = field_conditions(where, "where")
    if not places:
        where["a"] = 1
        places = field_conditions(where, "where")
    container, key, location = data.draw(st.sampled_from(places))
    condition, reason = bad
    container[key] = condition
    if "anyOf" in condition:
        location += ".anyOf"
    assert refusal(where) == (location, reason)
