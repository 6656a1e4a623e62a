"""The vector packer's twins (brainy/_speedups/vecpack*): the same bytes and the same refusals, both
held to numpy's float32 rounding, on hypothesis's numbers and on the edges of float32's range."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from brainy._speedups.errors import VectorRefused

DIM = 8
FLOAT32_MAX = float(np.finfo(np.float32).max)

number = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(-(2**1100), 2**1100),
    st.floats(-1e39, 1e39),
    st.sampled_from([FLOAT32_MAX, -FLOAT32_MAX, 3.4028235e38, 3.40282357e38, 0.0, -0.0, 1e-46]),
)
item = st.one_of(number, number, number, st.booleans(), st.none(), st.text(max_size=2))


def _outcome(twin, value):
    try:
        return twin.pack(value, DIM)
    except VectorRefused as refused:
        return refused.reason


@settings(max_examples=3000, deadline=None)
@given(
    st.one_of(
        st.lists(item, min_size=DIM, max_size=DIM),
        st.lists(number, min_size=DIM, max_size=DIM),
        st.lists(number, max_size=DIM + 2),
        st.tuples(*[number] * DIM),
    )
)
def test_both_twins_agree_on_every_vector(vecpack_twins, value):
    compiled, pure = vecpack_twins
    assert _outcome(compiled, value) == _outcome(pure, value)


def test_bytes_are_numpy_float32_little_endian(vecpack_twin):
    rng = np.random.default_rng(5)
    values = [float(x) for x in rng.standard_normal(DIM) * 1e3]
    values[0] = 7  # an int
    assert vecpack_twin.pack(values, DIM) == np.asarray(values, dtype="<f4").tobytes()


@pytest.mark.parametrize(
    "value, reason",
    [
        ("abc", "not-a-list"),
        ({"a": 1}, "not-a-list"),
        ([1.0] * (DIM - 1), "length"),
        ([1.0] * (DIM - 1) + [True], "not-a-number"),
        ([1.0] * (DIM - 1) + [None], "not-a-number"),
        ([1.0] * (DIM - 1) + [float("nan")], "not-a-number"),
        ([1.0] * (DIM - 1) + [1e39], "not-a-number"),
        ([1.0] * (DIM - 1) + [10**400], "not-a-number"),
        ([1.0] * (DIM - 1) + [np.float64(1.0)], "not-a-number"),
        ([0.0] * DIM, "zero-vector"),
        ([-0.0] * DIM, "zero-vector"),
        ([1e-46] * DIM, "zero-vector"),
    ],
)
def test_each_refusal_names_its_reason(vecpack_twin, value, reason):
    with pytest.raises(VectorRefused) as refused:
        vecpack_twin.pack(value, DIM)
    assert refused.value.reason == reason
