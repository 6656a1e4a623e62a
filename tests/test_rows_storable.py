"""What a row may store (brainy/store/rows.py ``metadata`` and ``content``): plain leaves are passed over without
their paths, and every value is accepted or refused, with the same field and reason, as a check that walks every
leaf with its path."""

from __future__ import annotations

import math
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from brainy.contract import refusals as R
from brainy.store import rows


def _walked(value: Any, field: str, depth: int = 0) -> None:
    """The check as a walk of every leaf, each with its path: the law the quicker check keeps."""
    if depth > 32:
        raise rows.invalid(field, "too-deep", "nested more than 32 levels")
    if isinstance(value, dict):
        for k, v in value.items():
            if not isinstance(k, str):
                raise rows.invalid(field, "wrong-type", "object keys must be strings")
            _walked(v, f"{field}.{k}", depth + 1)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            _walked(v, f"{field}[{i}]", depth + 1)
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise rows.invalid(field, "wrong-type", "numbers must be finite")
    elif isinstance(value, int) and not isinstance(value, bool):
        if not -(1 << 63) <= value < (1 << 64):
            raise rows.invalid(field, "out-of-range", "integers must fit in 64 bits")
    elif value is not None and not isinstance(value, (str, bool)):
        raise rows.invalid(field, "wrong-type", "not a JSON value")


class Text(str):
    pass


LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**65), 2**65),
    st.floats(),
    st.text(max_size=3),
    st.builds(Text, st.text(max_size=2)),
    st.just(b"bytes"),
    st.just(object()),
)
VALUES = st.recursive(
    LEAVES,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text("abc", max_size=2), inner, max_size=3),
    max_leaves=12,
)


def _outcome(check, value: Any) -> Any:
    try:
        check(value, "metadata")
    except R.InvalidArgumentError as refused:
        return refused.fields["field"], refused.fields["reason"]
    return "stored"


@settings(max_examples=800, deadline=None)
@given(st.dictionaries(st.text("abc", max_size=2), VALUES, max_size=4))
def test_a_value_is_stored_or_refused_as_a_walk_of_every_leaf_says(value):
    assert _outcome(rows._check_storable, value) == _outcome(_walked, value)


def test_a_leaf_past_the_depth_is_refused_a_container_at_it_is_not():
    """32 objects deep stores; a plain leaf one level further is refused as too deep, as every leaf was."""
    for depth, want in ((32, "stored"), (33, ("metadata" + ".a" * 33, "too-deep"))):
        value: Any = 1
        for _ in range(depth):
            value = {"a": value}
        assert _outcome(rows._check_storable, value) == want == _outcome(_walked, value)
