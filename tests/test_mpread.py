"""A MessagePack body read in one pass with its vectors in their places (brainy/_speedups/mpread*, brainy/net/codecs.py):
both twins read any document as msgpack reads it, or both say None where msgpack would make something else or
nothing; a hole's value stands where its span was; the nesting limit is the one ``nesting.too_deep`` counts."""

from __future__ import annotations

import msgpack
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from brainy._speedups import nesting_py, vecscan_py
from brainy.contract import refusals as R
from brainy.contract.vectors import Float32s
from brainy.net import codecs

SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**63), 2**64 - 1),
    st.floats(allow_nan=False),
    st.floats(width=32, allow_nan=False),
    st.text(max_size=40),
    st.binary(max_size=40),
)
KEYS = st.one_of(st.text(max_size=6), st.binary(max_size=3))
VALUE = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(KEYS, inner, max_size=4),
    max_leaves=12,
)


def _level(value) -> int:
    if isinstance(value, dict):
        return 1 + max((_level(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((_level(v) for v in value), default=0)
    return 0


def _msgpack(body: bytes):
    try:
        return msgpack.unpackb(body, raw=False, strict_map_key=True)
    except Exception:  # noqa: BLE001  (any refusal: the reader's None)
        return None


@settings(max_examples=1500, deadline=None)
@given(VALUE, st.booleans())
def test_both_twins_read_any_document_as_msgpack_reads_it(mpread_twins, document, single):
    compiled, pure = mpread_twins
    try:  # every float a float32 (0xca) where each fits
        body = msgpack.packb(document, use_bin_type=True, use_single_float=single)
    except OverflowError:
        body = msgpack.packb(document, use_bin_type=True)
    plain = msgpack.unpackb(body, raw=False, strict_map_key=True)
    for twin in (compiled, pure):
        assert twin.unpack(body, [], 64) == plain
        assert twin.unpack(bytearray(body), [], 64) == plain
    level = _level(plain)
    # the limit counted as the nesting check counts it: None exactly where it would refuse
    for limit in (max(0, level - 1), level):
        expected = None if nesting_py.too_deep(plain, limit) is not None else plain
        assert compiled.unpack(body, [], limit) == expected == pure.unpack(body, [], limit)


@settings(max_examples=1500, deadline=None)
@given(VALUE, st.integers(0, 10**6), st.integers(0, 255), st.integers(0, 6))
def test_a_damaged_body_is_read_alike_by_both_or_left_to_msgpack(mpread_twins, document, at, byte, cut):
    """A byte changed anywhere, the body cut short or followed by a byte: both twins answer the same, and what they
    answer is msgpack's document (None where msgpack refuses, or reads an ext value)."""
    compiled, pure = mpread_twins
    body = msgpack.packb(document, use_bin_type=True)
    damaged = bytearray(body)
    damaged[at % len(damaged)] = byte
    for b in (bytes(damaged), body[: max(0, len(body) - cut)], body + bytes([byte])[: cut % 2]):
        read = compiled.unpack(b, [], 64)
        # compared as their reprs: a NaN a damaged byte made is not equal to itself
        assert repr(read) == repr(pure.unpack(b, [], 64))
        if read is not None:
            assert repr(read) == repr(_msgpack(b))


def test_what_msgpack_would_read_otherwise_is_none(mpread_twins):
    for twin in mpread_twins:
        for body in (
            b"",
            b"\xc1",  # reserved
            b"\xd4\x01\x02",  # fixext 1
            msgpack.packb(msgpack.ExtType(5, b"abc")),
            msgpack.packb({"when": msgpack.Timestamp(1, 2)}),
            b"\x81\x01\x02",  # an int key (strict_map_key)
            b"\x81\x90\x02",  # an array key
            b"\xa2\xff\xfe",  # not UTF-8
            b"\x81\xa2\xc3\x28\x01",  # a key not UTF-8
            b"\xdd\xff\xff\xff\xff\x01",  # an array of four billion members claimed, one byte given
            b"\xdf\xff\xff\xff\xff\xa1a\x01",  # and a map
            b"\x91\x01\x02",  # a byte after the document
        ):
            assert twin.unpack(body, [], 64) is None, body


def test_short_strs_come_back_equal_however_often_and_whatever_their_bytes(mpread_twins):
    """The compiled twin's cache of short ASCII strs: a thousand different keys and values (more than it holds),
    read twice, each equal to msgpack's; non-ASCII and the lengths either side of the longest cached."""
    words = [f"k{i}" for i in range(1000)] + ["", "é", "ä" * 16, "a" * 31, "a" * 32, "a" * 33, "\x00" * 5]
    document = [{w: w, "type": w[:3]} for w in words]
    body = msgpack.packb(document, use_bin_type=True)
    for twin in mpread_twins:
        for _ in range(2):
            assert twin.unpack(body, [], 64) == document


def _vector_body(n: int, items: bool, extra=None) -> tuple[bytes, np.ndarray]:
    x = np.random.default_rng(n).standard_normal((n, 6)).astype(np.float32)
    if items:
        rows = [
            {"type": "document", "vector": v.tolist(), "metadata": {"n": i, "tags": ["a", i]}} for i, v in enumerate(x)
        ]
        document = {"items": rows, "continueOnError": True, **(extra or {})}
    else:
        document = {"vector": x[0].tolist(), "type": "thing", **(extra or {})}
    return msgpack.packb(document, use_single_float=True, use_bin_type=True), x


def test_the_holes_values_stand_where_the_walk_found_the_vectors(mpread_twins):
    """The walk's holes read in place: the document msgpack reads with each vector the walk packed put at its item
    after (vecscan's rest and place), for both twins."""
    for items in (True, False):
        for n in (1, 3, 40):
            body, x = _vector_body(n, items, {"deep": [[{"a": b"b"}]]})
            holes = vecscan_py.msgpack_holes(body, items)
            rest, found = vecscan_py.msgpack_vectors(body, items)
            expected = msgpack.unpackb(rest, raw=False, strict_map_key=True)
            vecscan_py.place(expected, found)
            for twin in mpread_twins:
                read = twin.unpack(body, holes, 64)
                assert read == expected
                vectors = [item["vector"] for item in read["items"]] if items else [read["vector"]]
                assert all(type(v) is Float32s for v in vectors)
                assert [v.cells for v in vectors] == [row.astype("<f4").tobytes() for row in x[: len(vectors)]]
                # a hole left out: its array read as the list of floats it is
                last = twin.unpack(body, holes[:-1], 64)
                last = last["items"][-1]["vector"] if items else last["vector"]
                assert last == [float(f) for f in x[len(vectors) - 1]]
                assert twin.unpack(body, [(s + 1, e, v) for s, e, v in holes], 64) is None  # not a value's start


def test_both_twins_find_the_same_holes(vecscan_twins):
    compiled, pure = vecscan_twins
    for items in (True, False):
        body, _ = _vector_body(5, items)
        assert compiled.msgpack_holes(body, items) == pure.msgpack_holes(body, items)
        assert compiled.msgpack_holes(body[:-1], items) is None is pure.msgpack_holes(body[:-1], items)
    assert compiled.msgpack_holes(msgpack.packb({"items": [{"vector": "x"}]}), True) is None


def test_a_body_the_reader_leaves_is_decoded_as_before():
    """An addMany body holding an ext value, or nesting past the limit: the walk and msgpack decode it (the vectors
    packed all the same), or the nesting check refuses it in its own words."""
    body, x = _vector_body(3, True, {"when": msgpack.Timestamp(1, 2)})
    document = codecs.decode(body, codecs.MSGPACK, vectors="items")
    assert document["when"] == msgpack.Timestamp(1, 2)
    assert [item["vector"] for item in document["items"]] == [Float32s(row.astype("<f4").tobytes()) for row in x]
    deep: list = []
    for _ in range(70):
        deep = [deep]
    body, _ = _vector_body(2, True, {"deep": deep})
    with pytest.raises(R.BodyDecodeError, match="64 levels"):
        codecs.decode(body, codecs.MSGPACK, vectors="items")
    assert codecs.decode(body, codecs.MSGPACK, vectors="items", envelope=10)["deep"] == deep  # within 64 + 10
