"""The nesting speedup and the words of the limit (brainy/contract/limits.py), both twins.

``too_deep(value, limit)`` answers what a plain recursive definition does: None for a value whose arrays
and objects nest at most ``limit`` levels (a scalar is level 0, a container one more than its deepest
member, a dict's keys never walked), else the path to the first container, in document order, at level
``limit + 1``. A refusal's path and a quoted value are bounded whatever the value, so describing an
untrusted value can never recurse without bound nor grow a message to the value's size.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from brainy.contract.limits import MAX_NESTING, QUOTE_CHARS, brief, quote, too_deep, where


def level(value) -> int:
    if isinstance(value, dict):
        return 1 + max((level(v) for v in value.values()), default=0)
    if isinstance(value, list | tuple):
        return 1 + max((level(v) for v in value), default=0)
    return 0


def first_path(value, limit: int, path: tuple = ()) -> list | None:
    """The reference: pre-order, document order."""
    if not isinstance(value, dict | list | tuple):
        return None
    if limit == 0:
        return list(path)
    pairs = value.items() if isinstance(value, dict) else enumerate(value)
    for key, member in pairs:
        found = first_path(member, limit - 1, (*path, key))
        if found is not None:
            return found
    return None


def nested(depth: int, leaf=1, key="a"):
    """``depth`` objects one inside the other, built without recursion."""
    value = leaf
    for _ in range(depth):
        value = {key: value}
    return value


VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=3),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.text(max_size=2), inner, max_size=4)
        | st.lists(inner, max_size=3).map(tuple)
    ),
    max_leaves=40,
)


@settings(max_examples=500, deadline=None)
@given(value=VALUES, limit=st.integers(0, 8))
def test_each_twin_answers_the_recursive_definition(nesting_twin, value, limit):
    """None exactly when the value is at most ``limit`` levels deep; otherwise the first path past it."""
    found = nesting_twin.too_deep(value, limit)
    assert (found is None) == (level(value) <= limit)
    assert found == first_path(value, limit)


def test_at_the_limit_and_one_past(nesting_twin):
    """A document exactly MAX_NESTING deep passes; one level more is named by its path, down the first
    member that goes too deep (not the first member)."""
    assert nesting_twin.too_deep(nested(MAX_NESTING), MAX_NESTING) is None
    assert nesting_twin.too_deep(nested(MAX_NESTING + 1), MAX_NESTING) == ["a"] * MAX_NESTING
    value = {"flat": [1, 2, {"x": 3}], "deep": [0, nested(3)]}
    assert nesting_twin.too_deep(value, 3) == ["deep", 1, "a"]
    assert nesting_twin.too_deep(value, 5) is None


def test_scalars_keys_and_subclasses(nesting_twin):
    """A scalar is never too deep; a dict's keys are not walked (a tuple key is no level); a subclass of dict or
    list counts as one; each twin takes limits 0 to MAX_LIMIT and refuses others."""
    for scalar in (None, 1, 1.5, "[[[[", b"{{{{"):
        assert nesting_twin.too_deep(scalar, 0) is None
    assert nesting_twin.too_deep({((1,), (2,)): 1}, 1) is None

    class Bag(dict):
        pass

    assert nesting_twin.too_deep(Bag(a=Bag(b=[])), 2) == ["a", "b"]
    assert nesting_twin.too_deep(nested(2000), nesting_twin.MAX_LIMIT) == ["a"] * nesting_twin.MAX_LIMIT
    for bad in (-1, nesting_twin.MAX_LIMIT + 1):
        with pytest.raises(ValueError, match="limit must be"):
            nesting_twin.too_deep([], bad)


def test_a_value_far_past_every_limit_is_walked_no_deeper_than_the_limit(nesting_twin):
    """A value 100,000 levels deep (deeper than CPython's recursion limit) is answered, not a RecursionError:
    the walk stops at the limit."""
    assert nesting_twin.too_deep(nested(100_000), MAX_NESTING) == ["a"] * MAX_NESTING


def test_the_twins_agree_on_a_large_document(nesting_twins):
    """A thousand rows with metadata: within the limit for both; one row made too deep is found by both."""
    compiled, pure = nesting_twins
    rows = [{"type": "document", "id": f"d{i}", "metadata": {"n": i, "tags": ["a", "b"]}} for i in range(1000)]
    document = {"items": rows}
    assert compiled.too_deep(document, MAX_NESTING) is None and pure.too_deep(document, MAX_NESTING) is None
    rows[617]["metadata"]["deep"] = nested(70)
    path = ["items", 617, "metadata", "deep"] + ["a"] * (MAX_NESTING - 4)
    assert compiled.too_deep(document, MAX_NESTING) == pure.too_deep(document, MAX_NESTING) == path


def test_paths_are_written_as_refusals_write_them_and_cut():
    """Keys that are names read ``.key``; others ``["…"]`` (long ones cut); indexes ``[3]``; a long path is cut
    with an ellipsis; the refusal's words name the limit."""
    assert where(["ops", 3, "id"]) == "$.ops[3].id"
    assert where(["a b", 'q"', "x" * 40]) == '$["a b"]["q\\""]["' + "x" * 32 + '…"]'
    assert where([b"raw"]) == "$[b'raw']"
    long = where(["a"] * 500)
    assert len(long) == 161 and long.endswith("…")
    assert "64 levels" in too_deep(["a"] * 64) and "$.a.a" in too_deep(["a"] * 64)


def test_quoting_an_untrusted_value_is_bounded():
    """A value 100,000 levels deep, a huge list, a huge string and a huge int are each quoted in at most
    QUOTE_CHARS characters, without a RecursionError; a short string name is given as it is."""
    for value in (nested(100_000), list(range(1_000_000)), "x" * 10_000_000, 10**5000, {"k" * 1000: [[[[1]]]]}):
        text = quote(value)
        assert 0 < len(text) <= QUOTE_CHARS
    assert brief("brainy_find") == "brainy_find"
    assert brief({"a": {"a": {"a": {"a": 1}}}}) == "{'a': {'a': {'a': {...}}}}"
    assert len(brief("n" * 1000)) <= QUOTE_CHARS
