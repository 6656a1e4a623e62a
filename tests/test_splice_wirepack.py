"""The wirepack speedup: an answer's MessagePack with its encoded rows and vectors spliced in, both twins.

Each twin writes, byte for byte, what ``msgpack.packb(use_bin_type=True, strict_types=True)`` writes for
a document of plain values (every integer width, strings and bytes of every header size, nested arrays
and maps, tuples and subclasses packed as their base), and splices an :class:`Encoded` row's own bytes
and a :class:`Vector`'s float32 array where they stand. What msgpack refuses, both refuse the same way.
"""

from __future__ import annotations

from collections import OrderedDict

import msgpack
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from brainy.contract.encoded import Encoded
from brainy.index.encoded_rows import encode_row
from brainy.store.rows import vector_out

INTS = st.one_of(
    st.integers(-40, 300),
    st.integers(-(2**63), 2**64 - 1),
    st.sampled_from([2**7, 2**8, 2**15, 2**16, 2**31, 2**32, 2**63, -(2**7) - 1, -(2**15) - 1, -(2**31) - 1]),
)
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    INTS,
    st.floats(allow_nan=False),
    st.text(max_size=40),
    st.binary(max_size=40),
    st.sampled_from(["é" * 300, "x" * 70_000, b"\x00" * 300, b"b" * 70_000]),
)
PLAIN = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=20),
        st.lists(inner, max_size=4).map(tuple),
        st.dictionaries(st.text(max_size=8), inner, max_size=20),
    ),
    max_leaves=60,
)


def _as_msgpack(value):
    if isinstance(value, (tuple, list)):
        return list(value)
    if isinstance(value, dict):
        return dict(value)
    raise TypeError(f"cannot pack {type(value).__name__}")


@settings(max_examples=200, deadline=None)
@given(PLAIN)
def test_plain_documents_pack_as_msgpack_packs_them(wirepack_twin, document):
    assert wirepack_twin.pack(document) == msgpack.packb(
        document, use_bin_type=True, strict_types=True, default=_as_msgpack
    )


def _float32s(numbers: list[float]) -> bytes:
    return np.asarray(numbers, dtype="<f4").tobytes()  # as a row stores its vector


def _row(i: int, text: str) -> Encoded:
    stored = msgpack.packb(
        {
            "id": f"id-{i}",
            "type": "document",
            "data": text,
            "metadata": {"n": i, "tags": ["a", text]},
            "vector": _float32s([0.5, -1.25, i]),
        }
    )
    return encode_row(stored, include_vector=bool(i % 2))


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 10**6), st.text(max_size=30)), max_size=30), PLAIN)
def test_a_page_of_encoded_rows_and_vectors_is_spliced_the_same_by_both_twins(wirepack_twins, rows, extra):
    compiled, pure = wirepack_twins
    page = {
        "results": [{"id": f"id-{i}", "score": None, "entity": _row(i, text)} for i, text in rows],
        "vectors": [vector_out(_float32s([0.1, i, -2.5])) for i, _ in rows[:3]],
        "extra": extra,
        "cost": OrderedDict(segments=1),
    }
    packed = compiled.pack(page)
    assert packed == pure.pack(page)
    plain = msgpack.unpackb(packed, raw=False)
    assert [hit["entity"] for hit in plain["results"]] == [hit["entity"].msgpack_document() for hit in page["results"]]
    assert plain["vectors"] == [msgpack.unpackb(v.float32_msgpack()) for v in page["vectors"]]
    assert plain["cost"] == {"segments": 1}


def _nested(depth: int) -> list:
    document: list = []
    for _ in range(depth):
        document = [document]
    return document


@pytest.mark.parametrize(
    "bad, refusal",
    [
        (2**64, TypeError),
        (-(2**63) - 1, TypeError),
        (object(), TypeError),
        ({1.5: {"x": {1, 2}}}, TypeError),
        (_nested(1025), ValueError),
    ],
)
def test_both_twins_refuse_what_msgpack_refuses(wirepack_twin, bad, refusal):
    with pytest.raises(refusal):
        msgpack.packb(bad, use_bin_type=True, strict_types=True, default=_as_msgpack)
    with pytest.raises(refusal):
        wirepack_twin.pack(bad)


def test_the_deepest_document_msgpack_packs_packs(wirepack_twin):
    deepest = _nested(1024)
    assert wirepack_twin.pack(deepest) == msgpack.packb(deepest)
