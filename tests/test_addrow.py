"""A batch's plain adds staged in one walk (brainy/_speedups/addrow*): both twins stage what the ``add`` rule and
``Txn.put_entity`` stage for a new row, byte for byte; they stop, staging nothing, at the first item that is not
plain; and ``addMany`` answers as before around the items the rule takes."""

from __future__ import annotations

import gc
import math

import msgpack
import numpy as np
import pytest
from helpers import new_store
from hypothesis import given, settings
from hypothesis import strategies as st

from brainy.contract import refusals as R
from brainy.contract.vectors import Float32s
from brainy.doors import writes
from brainy.engine import Brain
from brainy.store import rows
from brainy.store.txn import Txn

DIM = rows.DIMENSIONS
RNG = np.random.default_rng(7)


def _vector() -> np.ndarray:
    return RNG.standard_normal(DIM).astype(np.float32)


def _txn(caller: str | None = "person:ada", dense: int = 40, generation: int = 9) -> Txn:
    return Txn(lambda key: None, lambda start, stop: iter(()), dense, generation, 1_760_000_000_123, caller)


def _counting_mint():
    """A mint whose ids are known in advance: the same for both twins."""
    count = [0]

    def mint() -> tuple[str, bytes]:
        count[0] += 1
        raw = (0x0190_0000_0000_7000_8000_0000_0000_0000 + count[0]).to_bytes(16, "big")
        text = raw.hex()
        return f"{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}", raw

    return mint


def _staged(twin, items, start=0, caller="person:ada", dense=40, generation=9):
    txn = _txn(caller, dense, generation)
    ids: list[str] = []
    plan = (*writes._plain_adds(), object(), _counting_mint(), b"e", b"v")
    end, next_dense = twin.add_minted(
        items,
        start,
        (txn.overlay, txn._undo, txn.ops, txn.moves, txn.generation, txn.timestamp, txn.caller, txn.next_dense),
        plan,
        ids,
    )
    return end, next_dense, txn, ids, plan[6]


PLAIN = [
    {"type": "document", "vector": Float32s(_vector().tobytes())},
    {"type": "thing", "vector": _vector().tolist(), "metadata": {"n": 1, "s": "é ☃", "b": True, "z": None}},
    {"type": "person", "vector": _vector().tolist(), "data": "a line of text", "metadata": None},
    {"type": "document", "vector": _vector().tolist(), "data": None, "metadata": {"f": 0.1, "g": -1e300}},
    {"type": "thing", "vector": _vector().tolist(), "metadata": {"lo": -(1 << 63), "hi": (1 << 64) - 1, "c": 127}},
    {"type": "thing", "vector": _vector().tolist(), "metadata": {"k" * 40: "v" * 300, "m": -33, "x": 65_536}},
    {"type": "thing", "vector": _vector().tolist(), "data": "d" * 70_000, "metadata": {f"k{i}": i for i in range(20)}},
    {
        "type": "thing",
        "vector": _vector().tolist(),
        "metadata": {
            "ints": -129,
            "i2": -32_769,
            "i3": -(1 << 31) - 1,
            "u1": 255,
            "u2": 256,
            "u3": (1 << 32),
            "u4": (1 << 63),
            "neg": -32,
            "zero": 0,
            "f": False,
            "nan-free": 1.5e-310,
        },
    },
]


@pytest.mark.parametrize(
    ("dense", "generation"), [(40, 9), (250, 300), (65_530, 70_000), ((1 << 32) - 3, 1 << 33)]
)  # each int form of msgpack's, a walk's rows crossing from one to the next
def test_both_twins_stage_the_same_bytes(addrow_twins, dense, generation):
    compiled, pure = addrow_twins
    for caller in ("person:ada", None):
        a = _staged(compiled, PLAIN, caller=caller, dense=dense, generation=generation)
        b = _staged(pure, PLAIN, caller=caller, dense=dense, generation=generation)
        assert a[0] == b[0] == len(PLAIN) and a[1] == b[1] == dense + len(PLAIN)
        assert a[3] == b[3] and a[2].ops == b[2].ops and a[2].overlay == b[2].overlay
        assert a[2].moves == b[2].moves
        # the keys in the same order too (a read answers a row's fields in its dict's order): the compiled rows
        # are copies of one template row
        assert [list(row) for _, _, row in a[2].moves] == [list(row) for _, _, row in b[2].moves]
        assert [list(op) for op in a[2].ops] == [list(op) for op in b[2].ops]
        assert [k for k, _ in a[2]._undo] == [k for k, _ in b[2]._undo]


def test_the_compiled_walks_rows_and_moves_are_left_out_of_the_collectors_passes(addrow_twins):
    """Held until the next flush, the rows of a burst would be visited by every pass over the older generations;
    holding only leaves, they cannot be in a cycle, so the compiled walk untracks them (the pure twin cannot).
    A container put into such a row afterwards tracks it again: nothing can hide a cycle there later."""
    compiled, _ = addrow_twins
    _, _, txn, _, _ = _staged(compiled, PLAIN)
    assert len(txn.moves) == len(PLAIN)
    for move in txn.moves:
        row = move[2]
        assert not gc.is_tracked(move) and not gc.is_tracked(row)
        assert gc.is_tracked(row["metadata"]) is False  # the metadata of leaves the row holds: untracked too
    row = txn.moves[0][2]
    row["later"] = [row]  # a cycle through the row
    assert gc.is_tracked(row)
    row.pop("later")


def test_a_plain_add_stages_what_the_rule_stages(addrow_twin):
    """Each row, key, op and move is the one the add rule and put_entity(minted) make for the same item, but for
    the minted id (the rule mints its own)."""
    end, _, txn, ids, _ = _staged(addrow_twin, PLAIN)
    assert end == len(PLAIN)
    rule = _txn()
    rule.next_dense = 40
    answers = [writes.add(rule, item, writes.Context("b")) for item in PLAIN]
    assert all(a["embedded"] is False and "reason" not in a for a in answers)

    def same_id(row: dict, id_: str) -> dict:
        return {**row, "id": id_}

    for i, (id_, ((_, _, mine), (_, _, theirs))) in enumerate(zip(ids, zip(txn.moves, rule.moves, strict=True))):
        assert mine == same_id(theirs, id_), i
        assert mine["denseInt"] == 40 + i and mine["vector"] == rows.vector(PLAIN[i]["vector"])
    for mine, theirs, id_ in zip(txn.ops, rule.ops, ids, strict=True):
        assert list(mine) == list(theirs) == ["k", "o", "row", "vec"] and mine["vec"] == theirs["vec"]
        theirs_row = msgpack.unpackb(theirs["row"])
        assert mine["row"] == msgpack.packb(same_id(theirs_row, id_), use_bin_type=True)
        assert msgpack.unpackb(mine["row"]) == rows.stored(txn.moves[ids.index(id_)][2])[0]
    keys = list(txn.overlay)
    assert len(keys) == 2 * len(PLAIN) and [k[:1] for k in keys] == [b"e", b"v"] * len(PLAIN)
    assert [k for k, _ in txn._undo] == keys


@pytest.mark.parametrize(
    "item",
    [
        {"type": "thing", "id": "given", "vector": [1.0] * DIM},  # an id: the rule reads the row
        {"type": "thing", "vector": [1.0] * DIM, "subtype": "x"},
        {"type": "thing", "vector": [1.0] * DIM, "upsert": True},
        {"type": "thing", "vector": [1.0] * DIM, "visibility": "internal"},
        {"type": "thing", "vector": [1.0] * DIM, "confidence": 0.5},
        {"type": "thing", "vector": [1.0] * DIM, "what": 1},  # not an argument: the rule refuses it
        {"type": "nope", "vector": [1.0] * DIM},
        {"type": 3, "vector": [1.0] * DIM},
        {"vector": [1.0] * DIM},
        {"type": "thing"},  # no vector: the rule embeds its data or says why not
        {"type": "thing", "vector": None},
        {"type": "thing", "vector": [1.0] * (DIM - 1)},
        {"type": "thing", "vector": [0.0] * DIM},
        {"type": "thing", "vector": [math.nan] * DIM},
        {"type": "thing", "vector": [1.0] * DIM, "data": {"nested": "object"}},
        {"type": "thing", "vector": [1.0] * DIM, "data": 5},
        {"type": "thing", "vector": [1.0] * DIM, "metadata": {"id": "reserved"}},
        {"type": "thing", "vector": [1.0] * DIM, "metadata": {"deep": {"er": 1}}},
        {"type": "thing", "vector": [1.0] * DIM, "metadata": {"n": math.inf}},
        {"type": "thing", "vector": [1.0] * DIM, "metadata": {"n": 1 << 64}},
        {"type": "thing", "vector": [1.0] * DIM, "metadata": {"n": -(1 << 63) - 1}},
        {"type": "thing", "vector": [1.0] * DIM, "metadata": {1: "key"}},
        {"type": "thing", "vector": [1.0] * DIM, "metadata": ["a", "list"]},
        ["not", "an", "object"],
    ],
)
def test_the_walk_stops_at_an_item_that_is_not_plain_and_stages_nothing_of_it(addrow_twin, item):
    items = [PLAIN[0], PLAIN[1], item, PLAIN[2]]
    end, next_dense, txn, ids, _ = _staged(addrow_twin, items)
    assert end == 2 and next_dense == 42 and len(ids) == 2
    assert len(txn.ops) == len(txn.moves) == 2 and len(txn.overlay) == len(txn._undo) == 4
    end, next_dense, txn, ids, _ = _staged(addrow_twin, items, start=3)
    assert end == 4 and len(ids) == 1


def test_add_many_answers_as_before_around_the_items_the_rule_takes(tmp_path):
    """Plain items staged in one walk, the rest by the rule: the answer's ids in item order, a refused item's index
    its own, every row read back as a single add stores it."""
    vectors = [_vector() for _ in range(6)]
    items = [
        {"type": "thing", "vector": vectors[0].tolist(), "metadata": {"n": 0}},
        {"type": "thing", "vector": vectors[1].tolist(), "metadata": {"n": 1}},
        {"type": "nope", "vector": vectors[2].tolist()},
        {"type": "thing", "id": "named", "vector": vectors[3].tolist(), "metadata": {"n": 3}},
        {"type": "thing", "vector": vectors[4].tolist(), "metadata": {"n": 4}, "data": "four"},
        {"type": "thing", "vector": vectors[5].tolist(), "metadata": {"deep": {"n": 5}}},
    ]
    with Brain.open(new_store(tmp_path)) as brain:
        head = brain.head
        with pytest.raises(R.TransactionAbortedError) as refused:
            brain.addMany({"items": items})
        assert refused.value.fields["index"] == 2 and "items[2]" in refused.value.message
        assert brain.head == head  # nothing written
        out = brain.addMany({"items": items, "continueOnError": True})
        assert [f["index"] for f in out["failed"]] == [2]
        assert len(out["ids"]) == 5 and out["ids"][2] == brain.get("named")["entity"]["id"]
        single = brain.add(dict(items[0]))
        for id_, i in zip(out["ids"], [0, 1, 3, 4, 5], strict=True):
            got = brain.get(id_, {"includeVector": True})["entity"]
            assert got["metadata"] == items[i]["metadata"] and got["data"] == items[i].get("data")
            assert np.allclose(got["vector"], vectors[i]) and got["visibility"] == "public"
        mine = brain.get(out["ids"][0])["entity"]
        theirs = brain.get(single["id"])["entity"]
        differ = {k for k in mine if mine[k] != theirs[k]}
        assert differ <= {"id", "generation", "createdAt", "updatedAt", "denseInt"}


_LEAVES = [
    None,
    True,
    False,
    0,
    127,
    128,
    255,
    256,
    65_535,
    65_536,
    (1 << 32) - 1,
    1 << 32,
    (1 << 64) - 1,
    -1,
    -32,
    -33,
    -128,
    -129,
    -32_768,
    -32_769,
    -(1 << 31),
    -(1 << 31) - 1,
    -(1 << 63),
    0.0,
    -2.5,
    1e300,
    math.inf,
    math.nan,
    "",
    "x" * 31,
    "x" * 32,
    "é" * 200,
    "y" * 65_535,
    "z" * 65_536,
]


def test_a_columns_leaves_pack_as_msgpack_packs_them_one_at_a_time(addrow_twin):
    """pack_column packs each value of a slice of a column as msgpack's Packer packs it alone, laid end to end,
    with the end of each counted from ``base``: every form of every leaf kind (an int in each width, a float
    however odd, a str at each length header), in slices, in the keys' order."""
    column = {dense: value for dense, value in enumerate(_LEAVES * 3)}
    keys = sorted(column, reverse=True)  # the keys' order, whatever it is
    one = [msgpack.packb(column[k], use_bin_type=True) for k in keys]
    ends, parts, at = [], [], 1_000
    for lo in range(0, len(keys), 7):
        packed = addrow_twin.pack_column(column, keys, lo, min(lo + 7, len(keys)), at)
        assert packed is not None
        offsets, values = packed
        parts.append(values)
        ends.extend(np.frombuffer(offsets, "=u8").tolist())
        at += len(values)
    assert b"".join(parts) == b"".join(one)
    assert ends == (1_000 + np.cumsum([len(p) for p in one])).tolist()


@pytest.mark.parametrize("odd", [[1], {"a": 1}, b"bytes", 1 << 64, -(1 << 63) - 1, 7.5j])
def test_a_column_holding_a_value_that_is_not_a_leaf_is_not_packed(addrow_twin, odd):
    column = {1: "a", 2: odd, 3: "c"}
    assert addrow_twin.pack_column(column, [1, 2, 3], 0, 3, 0) is None
    assert addrow_twin.pack_column(column, [1, 3], 0, 2, 0) is not None  # only the slice asked for is looked at


def test_a_paths_postings_pack_as_their_directory_and_ints_do(addrow_twin):
    """pack_postings lays each ``[kind, value, first, count]`` out as msgpack's Packer packs it alone and the
    postings' u64s end to end, ``first`` counting on from where the slice starts: every leaf kind as a value, in
    slices, in the items' order; the header and the slices joined are the directory a Packer writes whole."""
    from array import array

    items = [((f"kind{i % 3}", value), array("Q", range(i, i + i % 4))) for i, value in enumerate(_LEAVES * 2)]
    directory, first = [], 0
    for (kind, value), posting in items:
        directory.append([kind, value, first, len(posting)])
        first += len(posting)
    parts, ints, at = [], [], 0
    for lo in range(0, len(items), 5):
        packed = addrow_twin.pack_postings(items, lo, min(lo + 5, len(items)), at)
        assert packed is not None
        parts.append(packed[0])
        ints.append(packed[1])
        at += len(packed[1]) // 8
    header = msgpack.Packer(use_bin_type=True).pack_array_header(len(items))
    assert header + b"".join(parts) == msgpack.packb(directory, use_bin_type=True)
    assert b"".join(ints) == b"".join(posting.tobytes() for _, posting in items)


@pytest.mark.parametrize(
    "odd",
    [
        (("number", [1]), "array"),
        (("number", 1 << 64), "array"),
        ((1, "a"), "array"),
        (("a", "b", "c"), "array"),
        (("string", "a"), [1, 2]),
        (("string", "a"), "I"),
    ],
)
def test_postings_holding_what_is_not_packed_so_are_not_packed(addrow_twin, odd):
    """A value that is not a leaf, a kind that is not a str, a key that is not a pair, or a posting that is not an
    array of u64 (``"array"``: a good one; ``"I"``: an array of u32) leaves the path to the caller's Packer."""
    from array import array

    key, posting = odd
    posting = array("Q", [3]) if posting == "array" else array("I", [3]) if posting == "I" else posting
    items = [(("string", "a"), array("Q", [1])), (key, posting)]
    assert addrow_twin.pack_postings(items, 0, 2, 0) is None
    assert addrow_twin.pack_postings(items, 0, 1, 0) is not None  # only the slice asked for is looked at


def test_ids_pack_as_their_utf8_end_to_end_and_a_non_ascii_id_keeps_no_utf8(addrow_twin):
    """pack_texts lays out the ids' UTF-8 in the keys' order with each one's end counted from ``base``; a text
    that is not ASCII comes out right, and one that is not a str leaves the section to the caller."""
    texts = {5: "a", 2: "ünïcode-ïd", 9: "", 7: "z" * 300, 1: "日本"}
    keys = sorted(texts)
    ends, parts, at = [], [], 10
    for lo in range(0, len(keys), 2):
        packed = addrow_twin.pack_texts(texts, keys, lo, min(lo + 2, len(keys)), at)
        assert packed is not None
        ends.extend(np.frombuffer(packed[0], "=u8").tolist())
        parts.append(packed[1])
        at += len(packed[1])
    encoded = [texts[k].encode("utf-8") for k in keys]
    assert b"".join(parts) == b"".join(encoded)
    assert ends == (10 + np.cumsum([len(e) for e in encoded])).tolist()
    assert addrow_twin.pack_texts({1: "a", 2: b"b"}, [1, 2], 0, 2, 0) is None


_PAYLOAD_LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),  # past 64 bits too: msgpack's refusal
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=40),
    st.binary(max_size=300),
)
_VALUES = st.recursive(
    _PAYLOAD_LEAVES,
    lambda inner: (
        st.lists(inner, max_size=20)
        | st.tuples(inner, inner)
        | st.dictionaries(st.one_of(st.text(max_size=8), st.integers(-5, 5)), inner, max_size=6)
    ),
    max_leaves=40,
)


def _outcome(pack, doc):
    try:
        return bytes(pack(doc))
    except Exception as exc:  # noqa: BLE001  (compared: the same refusal)
        return type(exc)


@settings(max_examples=600, deadline=None)
@given(_VALUES)
def test_both_twins_pack_a_payload_as_msgpack_packs_it(addrow_twin, doc):
    """Any value (a payload's dicts, lists, leaves and bytes, and tuples, deep nests and ints past 64 bits, which
    the compiled twin leaves to msgpack): msgpack's bytes, or its refusal."""
    payloads = addrow_twin.Payloads()
    assert _outcome(payloads.pack, doc) == _outcome(lambda d: msgpack.packb(d, use_bin_type=True), doc)


def test_a_payload_of_every_header_size_and_a_deep_nest_packs_as_msgpack_packs_it(addrow_twin):
    payloads = addrow_twin.Payloads()
    for n in (0, 15, 16, 65_535, 65_536):
        for doc in ([1] * n, {i: None for i in range(n)}, "s" * n, b"b" * n):
            assert bytes(payloads.pack(doc)) == msgpack.packb(doc, use_bin_type=True)
    deep: list = [b"x", {"k": 1.5}]
    for _ in range(30):
        deep = [deep, {"a": deep}] if len(msgpack.packb(deep)) < 10_000 else [deep]
    assert bytes(payloads.pack(deep)) == msgpack.packb(deep, use_bin_type=True)


def test_the_compiled_payloads_are_packed_into_the_same_memory_never_over_a_held_view(addrow_twins):
    compiled, _ = addrow_twins
    payloads = compiled.Payloads()
    first = payloads.pack({"ops": [{"row": b"r" * 5000}]})
    kept = bytes(first)
    with pytest.raises(BufferError):
        payloads.pack({"ops": []})
    part = first[10:20]
    del first
    with pytest.raises(BufferError):  # a slice holds it too
        payloads.pack({"ops": []})
    assert bytes(part) == kept[10:20]
    del part
    second = payloads.pack({"g": 2})
    assert bytes(second) == msgpack.packb({"g": 2}) and second.readonly
