"""The textjoin speedup: a content's pieces joined into its UTF-8 or base64 text, both twins.

Whatever the cut into pieces, each twin answers what a decode (or encode) of the whole would: the same
text, or for bytes that are not UTF-8 the same offset ``bytes.decode`` names, a character cut short by
the end included. A size hint that is wrong (too small, too large, none) changes nothing but speed.
"""

from __future__ import annotations

import base64
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from brainy._speedups.errors import TextStops

# bytes that stress the decoder: ASCII, every sequence length, continuation bytes, invalid leads
ALPHABET = st.sampled_from(
    [
        b"a",
        b"\n",
        "é".encode(),
        "€".encode(),
        "𝄞".encode(),
        b"\x80",
        b"\xc3",
        b"\xe2\x82",
        b"\xf0\x9d",
        b"\xff",
        b"\xed\xa0\x80",
        b"\xc0\xaf",
        b"\x00",
    ]
)


def pieces(data: bytes, cuts: list[int]) -> list[memoryview]:
    points = sorted({c % (len(data) + 1) for c in cuts} | {0, len(data)})
    view = memoryview(data)
    return [view[a:b] for a, b in zip(points, points[1:])]


def joined_text(twin, data: bytes, cuts: list[int], hint: int) -> str | int:
    join = twin.Utf8Join(hint)
    for piece in pieces(data, cuts):
        join.add(bytearray(piece))  # a fresh buffer each time: a joiner keeps no view of a piece
    try:
        return join.finish()
    except TextStops as exc:
        return exc.offset


def whole_text(data: bytes) -> str | int:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return exc.start


@settings(max_examples=400, deadline=None)
@given(
    parts=st.lists(ALPHABET, max_size=40),
    cuts=st.lists(st.integers(0, 200), max_size=8),
    hint=st.sampled_from([0, -1, 1, 3]),
)
def test_utf8_join_answers_what_a_whole_decode_does(textjoin_twin, parts, cuts, hint):
    data = b"".join(parts)
    size = {0: 0, -1: len(data), 1: len(data) + 5, 3: max(0, len(data) - 3)}[hint]
    assert joined_text(textjoin_twin, data, cuts, size) == whole_text(data)


@settings(max_examples=300, deadline=None)
@given(
    data=st.binary(max_size=300), cuts=st.lists(st.integers(0, 300), max_size=8), hint=st.sampled_from([0, -1, 1, 3])
)
def test_base64_join_answers_what_a_whole_encode_does(textjoin_twin, data, cuts, hint):
    size = {0: 0, -1: len(data), 1: len(data) + 5, 3: max(0, len(data) - 3)}[hint]
    join = textjoin_twin.Base64Join(size)
    for piece in pieces(data, cuts):
        join.add(bytearray(piece))
    assert join.finish() == base64.b64encode(data).decode()


@pytest.mark.parametrize("size", [1 << 20, (1 << 20) + 1])
def test_large_contents_in_chunk_sized_pieces(textjoin_twin, size):
    rng = random.Random(size)
    text = "".join(rng.choice("abc \n") for _ in range(size))
    data = text.encode()
    cuts = sorted(rng.randrange(size) for _ in range(64))
    assert joined_text(textjoin_twin, data, cuts, size) == text
    # one character past the ASCII: the compiled twin hands over mid-content and still answers the whole
    mixed = data[: size // 2] + "ü".encode() + data[size // 2 :]
    assert joined_text(textjoin_twin, mixed, cuts, len(mixed)) == mixed.decode()
    assert joined_text(textjoin_twin, mixed[:-1] + b"\xe2", cuts, len(mixed)) == len(mixed) - 1
    binary = rng.randbytes(size)
    join = textjoin_twin.Base64Join(size)
    for piece in pieces(binary, cuts):
        join.add(piece)
    assert join.finish() == base64.b64encode(binary).decode()
