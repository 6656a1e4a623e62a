"""The vector index's moves taken in one batch (``VectorIndex.apply_all``, what a replayed tail's first read
applies) leave exactly the index the same moves one at a time leave: the same slots, the same vectors bit for
bit, the same dead slots and kills since the last link, the same count of dead slots in the graph."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_vectors import live_vectors

from brainy.index import vector_matrix as M
from brainy.index.vectors import VectorIndex

DIM = M.DIMENSIONS
_POOL = np.random.default_rng(7).standard_normal((6, DIM)).astype(np.float32)


def _vector(i: int) -> bytes:
    return _POOL[i].tobytes()


def _index(rows: dict[int, dict], linked: bool, graphed: bool) -> VectorIndex:
    index = VectorIndex.build(rows.values(), 1)
    if linked:
        index.freeze(base=True)  # slots killed below the link are then listed for the next delta
    if graphed:
        index.catch_up()
    return index


def _state(index: VectorIndex) -> tuple:
    count = index._count
    slot = index._slot
    return (
        count,
        index._live,
        index._dense[:count].tolist(),
        index._slots.copy(0, count).tobytes(),
        {d: int(slot[d]) for d in range(len(slot)) if slot[d] != M.NO_SLOT},
        list(index._killed),
        index._dead_in_graph,
        index.graphed,
    )


def _batched_as_one_at_a_time(start: dict[int, int], moves: list, linked: bool, graphed: bool) -> VectorIndex:
    """The index ``moves`` in one batch leave over ``start``'s rows, held to the one the moves one at a time leave."""
    initial = {d: {"denseInt": d, "vector": _vector(v)} for d, v in start.items()}
    one_at_a_time, batched = _index(initial, linked, graphed), _index(initial, linked, graphed)
    for before, after in moves:
        one_at_a_time.apply(before, after)
    batched.apply_all(iter(moves))
    assert _state(batched) == _state(one_at_a_time)
    return batched


# an op on one of a few entities: put a vector from the pool (or none), or remove it
_ops = st.lists(
    st.tuples(st.integers(0, 7), st.sampled_from(["put", "put", "bare", "remove"]), st.integers(0, 5)), max_size=40
)


@settings(max_examples=300, deadline=None)
@given(
    start=st.dictionaries(st.integers(0, 7), st.integers(0, 5), max_size=8),
    ops=_ops,
    linked=st.booleans(),
    graphed=st.booleans(),
)
def test_moves_in_one_batch_leave_the_index_the_moves_one_at_a_time_leave(start, ops, linked, graphed):
    rows = {d: {"denseInt": d, "vector": _vector(v)} for d, v in start.items()}
    moves = []
    for dense, op, v in ops:  # each move from the entity's row as it stands to its next (None: absent)
        before = rows.get(dense)
        after = None if op == "remove" else {"denseInt": dense, **({"vector": _vector(v)} if op == "put" else {})}
        moves.append((before, after))
        rows.pop(dense, None)
        if after is not None:
            rows[dense] = after
    batched = _batched_as_one_at_a_time(start, moves, linked, graphed)
    assert live_vectors(batched) == {d: M.unit(r["vector"]).tobytes() for d, r in rows.items() if r.get("vector")}


def test_a_batch_of_vectors_is_scaled_bit_for_bit_as_one_at_a_time():
    """A commit's vectors are divided by their lengths as they are written into the slots (across a full owned
    part's end here: 1,000 rows in, then 500 over the first part's 1,024): the same bits as each made a unit alone,
    from bytes or from a list of numbers alike."""
    vectors = np.random.default_rng(3).standard_normal((1_500, DIM)).astype(np.float32) * 7
    raw = [v.tobytes() for v in vectors]
    alone = b"".join(M.unit(v).tobytes() for v in raw)
    for vectors_in in (raw, [v.tolist() for v in vectors]):
        slots = M.Slots()
        for part in (vectors_in[:1_000], vectors_in[1_000:]):
            slots.extend(*M._scaled(part))
        assert len(slots._parts) == 1 and slots.copy(0, 1_500).tobytes() == alone


def _vm_flags(address: int) -> tuple[list[str], int]:
    """The kernel's VmFlags of the mapping holding ``address`` and its resident kilobytes (/proc/self/smaps)."""
    flags: list[str] | None = None
    rss = 0
    inside = False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        head = line.split()[0]
        if "-" in head and not head.endswith(":"):
            lo, hi = (int(x, 16) for x in head.split("-"))
            inside = lo <= address < hi
        elif inside and head == "Rss:":
            rss = int(line.split()[1])
        elif inside and head == "VmFlags:":
            flags = line.split()[1:]
    assert flags is not None, "no mapping holds the address"
    return flags, rss


@pytest.mark.skipif(not Path("/proc/self/smaps").exists(), reason="the kernel's view of a mapping: Linux only")
def test_owned_slots_lie_in_small_pages_made_present_a_commit_at_a_time():
    """The owned parts are anonymous mappings kept from huge pages (a huge page the kernel must compact memory for
    stalls the fsync worker), and a commit's slots are made present as they are written, not the part ahead."""
    vectors = np.random.default_rng(5).standard_normal((3_100, DIM)).astype(np.float32)
    slots = M.Slots()
    slots.extend(*M._scaled(vectors[:3_000]))  # a part of 1,024, then one of 1,976, full
    slots.extend(*M._scaled(vectors[3_000:3_001]))  # a third part, as large as every slot so far: one slot in it
    assert len(slots._parts) == 2 and len(slots.owned) == 3_000
    flags, before = _vm_flags(slots.owned.ctypes.data)
    assert "nh" in flags and "hg" not in flags  # MADV_NOHUGEPAGE; never MADV_HUGEPAGE, which numpy asks for
    slots.extend(*M._scaled(vectors[3_001:]))
    _, after = _vm_flags(slots.owned.ctypes.data)
    written_kb = 99 * M.ROW_BYTES / 1024  # 148.5: the commit's slots, not the 4,500 KiB part ahead of them
    assert written_kb - 4 <= after - before <= written_kb + 8
    assert slots.copy(0, 3_100).tobytes() == b"".join(M.unit(v).tobytes() for v in vectors)


def test_a_zero_vector_in_a_batch_fails_where_one_at_a_time_fails():
    good = {"denseInt": 0, "vector": _vector(1)}
    zero = {"denseInt": 1, "vector": bytes(4 * DIM)}
    one_at_a_time, batched = VectorIndex(), VectorIndex()
    with pytest.raises(ValueError, match="zero vector"):
        for before, after in [(None, good), (None, zero)]:
            one_at_a_time.apply(before, after)
    with pytest.raises(ValueError, match="zero vector"):
        batched.apply_all([(None, good), (None, zero)])
    assert _state(batched) == _state(one_at_a_time)


@settings(max_examples=300, deadline=None)
@given(
    start=st.dictionaries(st.integers(0, 7), st.integers(0, 5), max_size=8),
    writes=st.lists(st.tuples(st.integers(0, 9), st.one_of(st.none(), st.integers(0, 5))), max_size=30),
    linked=st.booleans(),
    graphed=st.booleans(),
)
def test_moves_with_no_row_before_leave_the_index_one_at_a_time_leaves(start, writes, linked, graphed):
    """A batch whose every move has no row before (an addMany's, taken by array operations) leaves what the moves
    one at a time leave, as a delta may say it: an entity written twice in the batch, one that holds a slot
    already, a row with no vector."""
    moves = [(None, {"denseInt": d, **({} if v is None else {"vector": _vector(v)})}) for d, v in writes]
    _batched_as_one_at_a_time(start, moves, linked, graphed)
