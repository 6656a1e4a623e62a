"""A write's MessagePack vectors packed before its body is decoded (brainy/_speedups/vecscan*, brainy/net/codecs.py):
both twins find the same vectors and leave the same rest; decoding with the walk gives the plain decode's document,
each packed vector a ``Float32s`` of the float32s the packer would have made of its numbers, and the plain decode's
refusal for anything else; the packer takes a ``Float32s`` as it takes the list, with the same bytes and reasons."""

from __future__ import annotations

import json
import math
import random
import struct

import msgpack
import numpy as np
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from brainy._speedups import vecscan_py
from brainy._speedups.errors import VectorRefused
from brainy.contract import refusals as R
from brainy.contract.vectors import Float32s
from brainy.net import codecs

SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**63), 2**64 - 1),
    st.floats(width=32, allow_nan=False),  # any float packs as a float32 too
    st.text(max_size=5),
    st.binary(max_size=5),
)
FLOAT32S = st.floats(width=32, allow_nan=True, allow_infinity=True)
# A NaN is refused at the packer whichever way it came, but a list holding one is not equal to itself, and a
# signalling NaN's bits are quieted on the way through a Python float: the documents compared hold none.
NUMBERS = st.floats(width=32, allow_nan=False, allow_infinity=True)


def vectors_of(numbers):
    return st.one_of(
        st.lists(numbers, min_size=1, max_size=20),  # packed as float32s below, or as float64s
        st.lists(st.one_of(numbers, st.integers(-3, 3)), max_size=4),  # mixed: not packed
        SCALARS,
    )


VECTOR = vectors_of(NUMBERS)
VALUE = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=6,
)


def documents(vector, value=VALUE):
    """Bodies of a write door: a batch of items (a vector each, or any value), one vector, or any value."""
    item = st.one_of(
        st.fixed_dictionaries({"type": st.just("thing"), "vector": vector}, optional={"metadata": value}),
        value,
    )
    return st.one_of(
        st.fixed_dictionaries(
            {"items": st.lists(item, max_size=4)}, optional={"continueOnError": st.booleans(), "vector": vector}
        ),
        st.fixed_dictionaries({"vector": vector}, optional={"type": st.text(max_size=3), "items": value}),
        value,
    )


TOP = documents(VECTOR)


def _pack(document, single: bool) -> bytes:
    return msgpack.packb(document, use_bin_type=True, use_single_float=single)


def _outcome(body: bytes, vectors: str | None, media: str = codecs.MSGPACK):
    try:
        return codecs.decode(body, media, vectors=vectors)
    except R.Refusal as refusal:
        return refusal.name, str(refusal)


def _packed_as_the_packer_would(document, vectors: str, packs=lambda x: type(x) is float):
    """The plain decode's document with each vector the walk packs (an array of numbers ``packs`` takes: floats
    in MessagePack) as Float32s of what the packer makes of its numbers."""
    if not isinstance(document, dict):
        return document
    holders = [document] if vectors == "vector" else document.get("items", [])
    for holder in holders if isinstance(holders, list) else []:
        value = holder.get("vector") if isinstance(holder, dict) else None
        if isinstance(value, list) and value and all(packs(x) for x in value):
            with np.errstate(over="ignore"):  # past float32's range: inf, as the packer makes it
                holder["vector"] = Float32s(np.asarray(value, dtype=np.float64).astype("<f4").tobytes())
    return document


@settings(max_examples=1500, deadline=None)
@given(documents(vectors_of(FLOAT32S)), st.booleans(), st.sampled_from(["vector", "items"]), st.integers(0, 8))
def test_both_twins_find_the_same_vectors(vecscan_twins, document, single, vectors, cut):
    compiled, pure = vecscan_twins
    body = _pack(document, single)
    for b in (body, body[: max(0, len(body) - cut)], body + b"\x00"[: cut % 2]):
        assert compiled.msgpack_vectors(b, vectors == "items") == pure.msgpack_vectors(b, vectors == "items")


@settings(max_examples=1500, deadline=None)
@given(TOP, st.booleans(), st.sampled_from(["vector", "items"]), st.integers(0, 8))
def test_decoding_with_the_walk_is_the_plain_decode(document, single, vectors, cut):
    """Whatever the body (whole, cut short, with a byte after it): the plain decode's document with its vector
    lists of floats packed, or the plain decode's very refusal."""
    body = _pack(document, single)
    for b in (body, body[: max(0, len(body) - cut)], body + b"\x00"[: cut % 2]):
        plain = _outcome(b, None)
        walked = _outcome(b, vectors)
        if isinstance(plain, tuple):
            assert walked == plain
        else:
            assert walked == _packed_as_the_packer_would(plain, vectors)


def test_a_batch_of_float32_vectors_comes_out_packed_and_the_rest_as_msgpack_makes_it():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((3, 384), dtype=np.float32)
    items = [{"type": "thing", "vector": v.tolist(), "metadata": {"n": i}} for i, v in enumerate(x)]
    body = msgpack.packb({"items": items, "continueOnError": True}, use_single_float=True)
    document = codecs.decode(body, codecs.MSGPACK, vectors="items")
    assert document["continueOnError"] is True
    for i, item in enumerate(document["items"]):
        assert item["metadata"] == {"n": i} and item["type"] == "thing"
        assert item["vector"] == Float32s(x[i].astype("<f4").tobytes())
    as_doubles = msgpack.packb({"vector": x[0].tolist(), "type": "thing"})  # float64s: rounded to float32
    assert codecs.decode(as_doubles, codecs.MSGPACK, vectors="vector")["vector"] == Float32s(x[0].tobytes())


def test_float32_vectors_of_every_length_with_a_member_of_another_kind_anywhere(vecscan_twins):
    """Every length to 40 (the compiled walk takes float32s three a step while a fourth follows, then one at a time),
    packed as the values' little-endian bytes; a type byte of another kind at any place, in a step or in the tail,
    and both twins leave the vector alone."""
    compiled, pure = vecscan_twins
    rng = np.random.default_rng(5)
    for n in range(1, 41):
        values = rng.standard_normal(n).astype(np.float32)
        body = msgpack.packb({"vector": values.tolist()}, use_single_float=True)
        found = compiled.msgpack_vectors(body, False)
        assert found == pure.msgpack_vectors(body, False)
        assert found is not None and found[1] == [(-1, values.astype("<f4").tobytes())]
        start = len(body) - 5 * n  # the members, each 0xca and four bytes, end the body
        for at in range(n):
            for odd in (0xCB, 0x00, 0xCA ^ 0x80):
                damaged = bytearray(body)
                damaged[start + 5 * at] = odd
                assert compiled.msgpack_vectors(bytes(damaged), False) == pure.msgpack_vectors(bytes(damaged), False)
                assert compiled.msgpack_vectors(bytes(damaged), False) is None, (n, at, odd)


def test_both_twins_place_the_vectors_as_float32s_that_read_as_made_by_their_class(vecscan_twins):
    """``place`` puts a ``Float32s`` of each found vector's cells at its item, or at the top; the compiled twin's,
    made without the class's ``__init__``, are read as one made by it in every way: type, cells, length, equality,
    repr, hash, a copy, and what the vector packer makes of it."""
    import copy
    import gc
    import pickle

    from brainy._speedups import vecpack, vecpack_py

    compiled, pure = vecscan_twins
    rng = np.random.default_rng(9)
    x = rng.standard_normal((4, 7), dtype=np.float32)
    items = [{"type": "thing", "vector": v.tolist(), "metadata": {"n": i}} for i, v in enumerate(x)]
    items.insert(2, {"type": "thing"})  # an item without a vector keeps none
    body = msgpack.packb({"items": items}, use_single_float=True)
    one = msgpack.packb({"vector": x[0].tolist(), "type": "thing"}, use_single_float=True)
    for twin in (compiled, pure):
        rest, found = twin.msgpack_vectors(body, True)
        document = msgpack.unpackb(rest)
        twin.place(document, found)
        assert [item.get("vector") for item in document["items"]] == [
            Float32s(v.astype("<f4").tobytes()) for v in x[:2]
        ] + [None] + [Float32s(v.astype("<f4").tobytes()) for v in x[2:]]
        rest, found = twin.msgpack_vectors(one, False)
        document = msgpack.unpackb(rest)
        twin.place(document, found)
        made = document["vector"]
        by_class = Float32s(x[0].astype("<f4").tobytes())
        assert type(made) is Float32s and made.cells == by_class.cells and made == by_class and by_class == made
        assert len(made) == 7 and repr(made) == repr(by_class) and made != Float32s(b"\0" * 28)
        with pytest.raises(TypeError):
            hash(made)
        assert copy.copy(made) == made and pickle.loads(pickle.dumps(made)) == made
        assert gc.is_tracked(made) == gc.is_tracked(by_class)
        for packer in (vecpack, vecpack_py):
            assert packer.pack(made, 7) == packer.pack(by_class, 7) == x[0].astype("<f4").tobytes()


def test_what_the_walk_leaves_alone_is_decoded_as_before():
    """Keys given twice, a bin key, mixed numbers, another door's body: the plain decode, lists and all."""
    f = [0.5, -1.25]
    twice = b"\x82\xa6vector" + msgpack.packb(f, use_single_float=True) + b"\xa6vector" + msgpack.packb([1.5])
    assert codecs.decode(twice, codecs.MSGPACK, vectors="vector") == {"vector": [1.5]}
    binary_key = msgpack.packb({b"vector": f}, use_bin_type=True)
    assert codecs.decode(binary_key, codecs.MSGPACK, vectors="vector") == {b"vector": f}
    mixed = msgpack.packb({"vector": [0.5, 1]})
    assert codecs.decode(mixed, codecs.MSGPACK, vectors="vector") == {"vector": [0.5, 1]}
    body = msgpack.packb({"vector": f})
    assert codecs.decode(body, codecs.MSGPACK) == {"vector": f}  # no door that stores a vector: no walk


# -- JSON --------------------------------------------------------------------------------------------------------

JSON_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**63), 2**64 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=5),
)
JSON_NUMBERS = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False),
    st.floats(width=32, allow_nan=False, allow_infinity=False),
    st.integers(-(10**18), 10**18),  # an int of 19 digits or more is left to the decoder
)
# keys an encoder writes without an escape: the walk gives up on an escaped key, which the test below shows
JSON_KEYS = st.text("abcvtoris", max_size=6)
JSON_VALUE = st.recursive(
    JSON_SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(JSON_KEYS, inner, max_size=3),
    max_leaves=6,
)
JSON_VECTOR = st.one_of(
    st.lists(JSON_NUMBERS, min_size=1, max_size=20),
    st.lists(st.one_of(JSON_NUMBERS, JSON_SCALARS), max_size=4),
    JSON_SCALARS,
)


def _texts(document, cut: int) -> list[bytes]:
    """The document as JSON, compact and spread over lines, each also cut short and followed by a stray byte."""
    out = []
    for text in (orjson.dumps(document), json.dumps(document, indent=1).encode()):
        out += [text, text[: max(0, len(text) - cut)], text + b" x"[: cut % 3]]
    return out


def _json_packed(document, vectors: str):
    """In JSON the walk packs floats and ints of at most 18 digits."""
    return _packed_as_the_packer_would(
        document, vectors, lambda x: type(x) is float or (type(x) is int and abs(x) < 10**18)
    )


@settings(max_examples=1500, deadline=None)
@given(documents(JSON_VECTOR, JSON_VALUE), st.sampled_from(["vector", "items"]), st.integers(0, 8))
def test_both_twins_find_the_same_json_vectors(vecscan_twins, document, vectors, cut):
    compiled, pure = vecscan_twins
    for b in _texts(document, cut):
        assert compiled.json_vectors(b, vectors == "items") == pure.json_vectors(b, vectors == "items")


@settings(max_examples=1500, deadline=None)
@given(documents(JSON_VECTOR, JSON_VALUE), st.sampled_from(["vector", "items"]), st.integers(0, 8))
def test_decoding_json_with_the_walk_is_the_plain_decode(document, vectors, cut):
    for b in _texts(document, cut):
        plain = _outcome(b, None, codecs.JSON)
        walked = _outcome(b, vectors, codecs.JSON)
        if isinstance(plain, tuple):
            assert walked == plain
        else:
            assert walked == _json_packed(plain, vectors)


@pytest.mark.parametrize(
    "body",
    [
        b'{"vector": [1.5, 01]}',  # a leading zero
        b'{"vector": [1.5, 2,]}',  # a trailing comma
        b'{"vector": [1.5, 1e400]}',  # past a double's range
        b'{"vector": [1.5, 1.]}',
        b'{"vector": [1.5, -]}',
        b'{"vector": [1.5, .5]}',
        b'{"vector": [1.5, +1]}',
        b'{"vector": [1.5 2.5]}',
        b'{"vector": [1.5, 2.5]',
        b'{"vector": [1.5, 2.5]} {}',
        b'{"vector" [1.5, 2.5]}',
        rb'{"type": "thing\", "vector": [1.5]}',  # the string runs on: no vector
        b'{"items": [{"vector": [1.5]}, {"vector": [1.5], }]}',
    ],
)
def test_a_malformed_json_body_is_refused_as_the_decoder_refuses_it(body):
    for vectors in ("vector", "items"):
        assert _outcome(body, vectors, codecs.JSON) == _outcome(body, None, codecs.JSON)
        assert isinstance(_outcome(body, None, codecs.JSON), tuple)


def test_json_numbers_are_read_as_the_decoder_and_the_packer_read_them():
    """Every way a number may be written, midpoints between float32s among them: the float32 the plain decode and
    the packer make, bit for bit; where the walk gives up (escaped or twice-given keys), the plain document."""
    rng = np.random.default_rng(35)
    f = rng.standard_normal(2000).astype(np.float32) * np.float32(10.0) ** rng.integers(-30, 30, 2000).astype(
        np.float32
    )
    f = f[np.isfinite(f) & (f != 0)]
    mid = (f.astype(np.float64) + np.nextafter(f, np.float32(np.inf)).astype(np.float64)) / 2
    texts = ["0", "-0", "-0.0", "0e5", "-0e-5", "1e-400", "-1e-400", "123456789012345678", "1E5", "1.0E+2", "2.5e-0"]
    texts += ["3.4028235e38", "3.40282357e38", "3.4028235677973366e38", "1.4e-45", "7e-46", "7.1e-46", "5e-324"]
    for m, x in zip(mid, f, strict=True):
        texts += ["%.25e" % m, "%.17g" % m, "%.17g" % np.nextafter(m, np.inf), "%.17g" % np.nextafter(m, -np.inf)]
        texts += [repr(float(x)), str(x), "%.9e" % x, "%.19e" % m]
    body = ('{"items": [' + ",".join('{"vector": [%s]}' % t for t in texts) + "]}").encode()
    document = codecs.decode(body, codecs.JSON, vectors="items")
    packed = 0
    with np.errstate(over="ignore"):  # past float32's range: inf, as the packer makes it
        for t, item in zip(texts, document["items"], strict=True):
            if type(item["vector"]) is list:  # more than 19 significant digits: left to the decoder
                assert item["vector"] == [orjson.loads(t)], t
                continue
            packed += 1
            want = np.asarray(orjson.loads(t), dtype=np.float64).astype("<f4").tobytes()
            assert item["vector"] == Float32s(want), t
    assert packed > 0.7 * len(texts)
    escaped = rb'{"items": [{"vec\u0074or": [1.5]}]}'
    assert codecs.decode(escaped, codecs.JSON, vectors="items") == {"items": [{"vector": [1.5]}]}
    twice = b'{"vector": [1.5], "vector": [2.5]}'
    assert codecs.decode(twice, codecs.JSON, vectors="vector") == orjson.loads(twice)


def test_json_digits_read_eight_at_a_time_are_the_digits_read_one_by_one():
    """The compiled walk reads a fraction's digits eight at a time once a significant digit is in: numbers with
    every count of significant digits around the 19 it takes (and past them: left to the decoder), leading zeros
    before them, and every digit count after the last full eight, each packed as the decoder and the packer make it
    and as the pure twin walks it."""
    rng = random.Random(8)
    texts = []
    for zeros in (0, 1, 3, 9):
        for digits in range(1, 23):
            for _ in range(6):
                body = str(rng.randrange(1, 10)) + "".join(str(rng.randrange(10)) for _ in range(digits - 1))
                whole = rng.choice(["0", "7", "12"])
                texts.append(f"{rng.choice(['', '-'])}{whole}.{'0' * zeros}{body}{rng.choice(['', 'e-3', 'E+2'])}")
    body = ('{"items": [' + ",".join('{"vector": [%s, %s ]}' % (t, t) for t in texts) + "]}").encode()
    document = codecs.decode(body, codecs.JSON, vectors="items")
    walked = vecscan_py.json_vectors(body, True)
    packed = 0
    for t, item in zip(texts, document["items"], strict=True):
        if type(item["vector"]) is list:  # more than 19 significant digits: left to the decoder
            assert item["vector"] == [orjson.loads(t)] * 2, t
            continue
        packed += 1
        want = np.asarray([orjson.loads(t)] * 2, dtype=np.float64).astype("<f4").tobytes()
        assert item["vector"] == Float32s(want), t
    assert packed > 0.6 * len(texts)
    assert walked is not None and [cells for _, cells in walked[1]] == [
        item["vector"].cells for item in document["items"] if type(item["vector"]) is not list
    ]


def test_a_number_is_packed_the_same_far_from_the_body_end_and_near_it(vecscan_twins):
    """The compiled walk reads a number of one integer digit in a quicker way unless it ends within 40 bytes of the
    body's end: every shape around that reading's limits (digit counts across its three eight-byte loads, leading
    zeros, exponents of up to four digits, float32 midpoints at every digit count), read both ways, packs as the
    decoder and the packer make it."""
    rng = np.random.default_rng(36)
    texts = []
    for digits in range(1, 23):
        for zeros in (0, 1, 2, 9):
            for exponent in ("", "e5", "E-7", "e+012", "e-0003", "e30"):
                tail = "".join(str(d) for d in rng.integers(0, 10, digits))
                texts.append(f"{rng.choice(['', '-'])}{rng.integers(0, 10)}.{'0' * zeros}{tail}{exponent}")
    f = rng.standard_normal(300).astype(np.float32)
    mid = (f.astype(np.float64) + np.nextafter(f, np.float32(np.inf)).astype(np.float64)) / 2
    for m in mid:
        texts += [f"{m:.{p}e}" for p in (15, 16, 17, 18, 19)]
    for t in texts:
        want = np.asarray([orjson.loads(t)] * 2, dtype=np.float64).astype("<f4").tobytes()
        far = f'{{"vector": [{t}, {t}], "metadata": {{"padding": "{"x" * 48}"}}}}'.encode()
        near = f'{{"vector": [{t}, {t}]}}'.encode()
        for body in (far, near):
            document = codecs.decode(body, codecs.JSON, vectors="vector")
            if type(document["vector"]) is list:  # more than 19 significant digits: left to the decoder
                assert document["vector"] == [orjson.loads(t)] * 2, t
            else:
                assert document["vector"] == Float32s(want), t
            compiled, pure = vecscan_twins
            assert compiled.json_vectors(body, False) == pure.json_vectors(body, False), t


DIM = 8


def _both(vecpack_twin, numbers: list[float]):
    cells = struct.pack(f"<{len(numbers)}f", *numbers)
    out = []
    for value in (numbers, Float32s(cells)):
        try:
            out.append(vecpack_twin.pack(value, DIM))
        except VectorRefused as refused:
            out.append(refused.reason)
    return out


@pytest.mark.parametrize(
    "numbers",
    [
        [0.25] * DIM,
        [-0.0] * DIM,
        [0.0] * (DIM - 1) + [1e-45],
        [1.0] * (DIM - 1) + [math.inf],
        [math.nan] + [1.0] * (DIM - 1),
        [1.0] * (DIM - 1),
        [0.0] * (DIM + 1),
        [math.inf] * (DIM + 1),
    ],
)
def test_the_packer_takes_float32s_as_it_takes_their_list(vecpack_twin, numbers):
    as_list, as_cells = _both(vecpack_twin, numbers)
    assert as_list == as_cells


@settings(max_examples=500, deadline=None)
@given(st.lists(FLOAT32S, min_size=DIM - 1, max_size=DIM + 1))
def test_the_packer_agrees_on_any_float32s(vecpack_twin, numbers):
    as_list, as_cells = _both(vecpack_twin, numbers)
    assert as_list == as_cells


def test_a_served_batch_stores_the_same_vectors_and_refuses_the_same_items_whatever_the_encoding(server):
    """Over the wire: one addMany in JSON, in MessagePack float32s and in MessagePack float64s, each with a zero
    vector and a short one among good ones (continueOnError): the same failures, the same stored float32s."""
    from server import H1Client

    rng = np.random.default_rng(9)
    x = rng.standard_normal((3, 384), dtype=np.float32)
    vectors = [x[0].tolist(), [0.0] * 384, x[1].tolist(), [0.5] * 383, x[2].tolist()]
    answers = {}
    with H1Client(server.address) as client:
        for encoding, body in (
            (
                "json",
                orjson.dumps({"items": [{"type": "thing", "vector": v} for v in vectors], "continueOnError": True}),
            ),
            (
                "f32",
                msgpack.packb(
                    {"items": [{"type": "thing", "vector": v} for v in vectors], "continueOnError": True},
                    use_single_float=True,
                ),
            ),
            (
                "f64",
                msgpack.packb({"items": [{"type": "thing", "vector": v} for v in vectors], "continueOnError": True}),
            ),
        ):
            media = codecs.JSON if encoding == "json" else codecs.MSGPACK
            headers = (("Authorization", f"Bearer {server.key}"), ("Content-Type", media), ("Accept", codecs.JSON))
            client.send(H1Client.request("POST", server.path("addMany"), body, headers))
            answer = client.read_answer()
            assert answer.status == 200, answer.body
            done = answer.result()
            stored = []
            for id_ in done["ids"]:
                client.send(
                    H1Client.request("GET", server.path(f"get/{id_}") + "?includeVector=true", None, headers[:1])
                )
                stored.append(np.asarray(client.read_answer().result()["entity"]["vector"], dtype=np.float32))
            answers[encoding] = done["failed"], stored
    failed, stored = answers["json"]
    assert [f["index"] for f in failed] == [1, 3]
    assert [f["error"]["name"] for f in failed] == ["InvalidArgumentError", "DimensionMismatchError"]
    assert all(np.array_equal(s, x[i]) for i, s in enumerate(stored))
    for encoding in ("f32", "f64"):
        assert answers[encoding][0] == failed
        assert all(np.array_equal(a, b) for a, b in zip(answers[encoding][1], stored, strict=True))


def test_a_served_find_by_vector_pages_alike_whatever_the_encoding_and_its_cursor_binds_the_vector(server):
    """find's vector is packed by the walk as a write's is: a JSON, a MessagePack float32 and a float64 body of the
    same query answer the same page, a cursor minted by one encoding pages on in another (it binds the vector
    searched, not how its numbers came), a cursor of another vector is CursorInvalidError, and a short or zero
    vector is refused as before."""
    from server import H1Client

    rng = np.random.default_rng(11)
    x = rng.standard_normal((30, 384), dtype=np.float32)
    q, other = (x[3] + 0.1 * rng.standard_normal(384, dtype=np.float32)).tolist(), x[7].tolist()

    def body(encoding, document):
        if encoding == "json":
            return orjson.dumps(document)
        return msgpack.packb(document, use_single_float=encoding == "f32")

    with H1Client(server.address) as client:

        def call(door, encoding, document):
            media = codecs.JSON if encoding == "json" else codecs.MSGPACK
            headers = (("Authorization", f"Bearer {server.key}"), ("Content-Type", media), ("Accept", codecs.JSON))
            client.send(H1Client.request("POST", server.path(door), body(encoding, document), headers))
            return client.read_answer()

        added = call("addMany", "json", {"items": [{"type": "thing", "vector": v.tolist()} for v in x]})
        assert added.status == 200, added.body
        pages = {}
        for encoding in ("json", "f32", "f64"):
            first = call("find", encoding, {"vector": q, "limit": 4})
            assert first.status == 200, first.body
            pages[encoding] = first.result()
        hits = [(h["id"], h["score"]) for h in pages["json"]["results"]]
        assert len(hits) == 4 and hits[0][0] == added.result()["ids"][3]
        for encoding in ("f32", "f64"):
            assert [(h["id"], h["score"]) for h in pages[encoding]["results"]] == hits
        cursor = pages["json"]["cursor"]
        seconds = [call("find", e, {"vector": q, "limit": 4, "cursor": cursor}) for e in ("json", "f32")]
        assert all(s.status == 200 for s in seconds), [s.body for s in seconds]
        second = [h["id"] for h in seconds[0].result()["results"]]
        assert second == [h["id"] for h in seconds[1].result()["results"]]
        assert len(second) == 4 and not set(second) & {h[0] for h in hits}
        stray = call("find", "f32", {"vector": other, "limit": 4, "cursor": cursor})
        assert (stray.status, stray.refusal) == (400, "CursorInvalidError")
        for encoding in ("json", "f32"):
            short = call("find", encoding, {"vector": q[:383]})
            assert (short.status, short.refusal) == (422, "DimensionMismatchError")
            zero = call("find", encoding, {"vector": [0.0] * 384})
            assert (zero.status, zero.refusal) == (400, "InvalidArgumentError")
