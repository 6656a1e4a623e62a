"""A row's words (brainy/index/projections.py ``words``): its data's strings and its metadata's, read as a walk of
every value with ``strings_of`` reads them, whatever the values (plain leaves are looked at in place)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from brainy.index.projections import WORD, strings_of, words


class Text(str):
    pass


LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False),
    st.text("ab c", max_size=6),
    st.builds(Text, st.text("de f", max_size=4)),
)
VALUES = st.recursive(
    LEAVES, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text("k", max_size=2), inner, max_size=3)
)


def _walked(row: dict) -> list[str]:
    texts: list[str] = []
    strings_of(row.get("data"), texts)
    strings_of(row.get("metadata"), texts)
    return [w for text in texts for w in WORD.findall(text.lower())]


@settings(max_examples=500, deadline=None)
@given(st.none() | VALUES, st.none() | VALUES | st.dictionaries(st.text("xyz", max_size=2), VALUES, max_size=4))
def test_a_rows_words_are_those_a_walk_of_every_value_finds(data, metadata):
    row = {"data": data, "metadata": metadata}
    assert words(row) == _walked(row)
