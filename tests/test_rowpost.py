"""A durable row's leaves posted into the projections (brainy/_speedups/rowpost*, brainy/index/projections.py):
both twins leave the postings and columns that posting each of ``leaves(row)`` with its ``value_key`` leaves
(a leaf yielded twice posted once, its column keeping the first value), over existing postings that take the
new int at the end, in the middle, or hold it already; and a new row's id, int and order columns with them."""

from __future__ import annotations

import bisect
from array import array

from hypothesis import given, settings
from hypothesis import strategies as st

from brainy.index.projections import _NULLABLE, COLUMN_ONLY, RESERVED_POSTED, leaves, value_key, words
from brainy.index.where import kind_of

SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**63), 2**64 - 1),
    st.sampled_from([0, 1, 1.0, True, False, 0.0, -0.0, 2.5]),  # kinds that share a key, and ones that do not
    st.floats(allow_nan=False),
    st.text(alphabet="ab.", max_size=3),
)
KEYS = st.text(alphabet="ab.n", min_size=1, max_size=3)  # dotted keys that spell a nested path too
METADATA = st.recursive(
    st.dictionaries(KEYS, SCALARS, max_size=4),
    lambda inner: st.dictionaries(KEYS, st.one_of(SCALARS, inner, st.lists(st.one_of(SCALARS, inner), max_size=4))),
    max_leaves=12,
)
RESERVED = st.fixed_dictionaries(
    {},
    optional={
        name: st.one_of(SCALARS, st.sampled_from(["document", "public", "person:x"])) for name in RESERVED_POSTED
    },
)


def model(row, dense, postings, columns):
    """Projections._post's leaves as it was written in Python: each (path, key) once, a sorted insert, first value."""
    seen = set()
    for path, value in leaves(row):
        key = value_key(value)
        if (path, key) in seen:
            continue
        seen.add((path, key))
        posting = postings.setdefault(path, {}).setdefault(key, array("Q"))
        i = bisect.bisect_left(posting, dense)
        if i == len(posting) or posting[i] != dense:
            posting.insert(i, dense)
        columns.setdefault(path, {}).setdefault(dense, value)


def existing(rows_before):
    """Postings and columns as earlier rows left them (their dense ints on either side of the new one)."""
    postings, columns = {}, {}
    for dense, row in rows_before:
        model(row, dense, postings, columns)
    return postings, columns


def copied(postings, columns):
    return (
        {p: {k: array("Q", v) for k, v in values.items()} for p, values in postings.items()},
        {p: dict(c) for p, c in columns.items()},
    )


@settings(max_examples=400, deadline=None)
@given(
    reserved=RESERVED,
    metadata=st.one_of(st.none(), METADATA),
    dense=st.integers(0, 40),
    before=st.lists(st.tuples(st.integers(0, 40), st.fixed_dictionaries({"metadata": METADATA})), max_size=4),
)
def test_post_leaves_posts_what_the_leaves_say(rowpost_twin, reserved, metadata, dense, before):
    """Each twin leaves the postings and columns the model does, on top of what earlier rows posted."""
    row = dict(reserved)
    if metadata is not None:
        row["metadata"] = metadata
    postings, columns = existing(before)
    want_p, want_c = copied(postings, columns)
    model(row, dense, want_p, want_c)
    rowpost_twin.post_leaves(row, dense, RESERVED_POSTED, _NULLABLE, postings, columns, kind_of)
    assert postings == want_p
    assert columns == want_c
    for values in postings.values():
        for key, posting in values.items():
            assert type(posting) is array and posting.typecode == "Q", key


def test_an_int_already_posted_stays_once_and_a_smaller_one_goes_in_order(rowpost_twin):
    """A posting holding the int keeps it once; an int below its last goes where it sorts; above, at the end."""
    postings = {"type": {("string", "note"): array("Q", [2, 5, 9])}}
    columns: dict = {"type": {5: "note"}}
    for dense in (5, 3, 12, 0):
        rowpost_twin.post_leaves({"type": "note"}, dense, ("type",), (), postings, columns, kind_of)
    assert postings["type"][("string", "note")] == array("Q", [0, 2, 3, 5, 9, 12])
    assert columns["type"] == {5: "note", 3: "note", 12: "note", 0: "note"}


def test_a_posting_whose_buffer_a_reader_holds_is_never_moved(rowpost_twin):
    """An append to a posting whose buffer is held refuses as the array's own append does (BufferError), whichever
    twin posts; let go, the same append goes in, and a posting grown past its room keeps every int in order."""
    import pytest

    posting = array("Q", [1, 2])
    postings = {"type": {("string", "note"): posting}}
    held = memoryview(posting)
    with pytest.raises(BufferError):
        rowpost_twin.post_leaves({"type": "note"}, 3, ("type",), (), postings, {}, kind_of)
    held.release()
    for dense in range(3, 3000):
        rowpost_twin.post_leaves({"type": "note"}, dense, ("type",), (), postings, {}, kind_of)
    assert posting == array("Q", range(1, 3000))


def test_a_posting_of_another_kind_of_sequence_is_kept_sorted_by_its_own_methods(rowpost_twin):
    """A posting that is not an array('Q') (a list) is inserted into as the pure twin does."""
    postings = {"type": {("string", "note"): [1, 4]}}
    for dense in (4, 2, 7):
        rowpost_twin.post_leaves({"type": "note"}, dense, ("type",), (), postings, {}, kind_of)
    assert postings["type"][("string", "note")] == [1, 2, 4, 7]


def test_kinds_of_other_types_come_from_kind_of(rowpost_twin):
    """A value of a type the compiled twin does not know (a subclass of str, bytes) takes kind_of's kind."""

    class Text(str):
        pass

    postings: dict = {}
    rowpost_twin.post_leaves({"metadata": {"a": Text("x"), "b": b"y"}}, 1, (), (), postings, {}, kind_of)
    assert set(postings["a"]) == {(kind_of(Text("x")), "x")} and set(postings["b"]) == {("other", b"y")}


def test_a_metadata_that_is_no_object_fails_as_in_python(rowpost_twin):
    """A metadata of another type raises what walking it in Python raises (AttributeError: no items)."""
    import pytest

    with pytest.raises(AttributeError):
        rowpost_twin.post_leaves({"metadata": [1]}, 1, (), (), {}, {}, kind_of)


DATA = st.one_of(st.none(), st.text(alphabet="ab ", max_size=4), st.dictionaries(KEYS, SCALARS, max_size=2))


@settings(max_examples=300, deadline=None)
@given(
    reserved=RESERVED,
    metadata=st.one_of(st.none(), METADATA),
    data=DATA,
    dense=st.integers(0, 40),
    before=st.lists(st.tuples(st.integers(0, 40), st.fixed_dictionaries({"metadata": METADATA})), max_size=4),
)
def test_post_row_is_the_id_the_int_the_leaves_and_the_order_columns(
    rowpost_twin, reserved, metadata, data, dense, before
):
    """post_row leaves what Projections._post's steps before the words did: the id under the int, the int in the
    sorted list of every row's, the leaves as post_leaves posts them, each order column set; and it answers False
    only for a row that holds no words."""
    row = {**reserved, "id": f"id-{dense}", "createdAt": 1, "updatedAt": 2, "generation": 3}
    if metadata is not None:
        row["metadata"] = metadata
    if data is not None:
        row["data"] = data
    postings, columns = existing(before)
    ids = {d: f"id-{d}" for d, _ in before}
    everyone = array("Q", sorted({d for d, _ in before}))
    want_p, want_c = copied(postings, columns)
    model(row, dense, want_p, want_c)
    for name in ("id", "createdAt", "updatedAt", "generation"):
        want_c.setdefault(name, {})[dense] = row[name]
    want_all = array("Q", sorted({*everyone, dense}))
    may_hold = rowpost_twin.post_row(
        row, dense, RESERVED_POSTED, _NULLABLE, postings, columns, kind_of, ids, everyone, COLUMN_ONLY
    )
    assert postings == want_p and columns == want_c and everyone == want_all and ids[dense] == f"id-{dense}"
    if not may_hold:
        assert words(row) == []
    if data is None and (metadata is None or all(isinstance(v, (int, float)) or v is None for v in metadata.values())):
        assert may_hold is False


# values that share a key (1, 1.0, True; equal strings that are not one object) and ones that do not, so a run of
# rows holds the same value at a reserved name now as the same object, now as an equal one, now as another kind
SHARED = st.sampled_from([None, True, 1, 1.0, 0, False, "document", "".join(["docu", "ment"]), "person:x", "a"])
RUN_RESERVED = st.fixed_dictionaries(
    {}, optional={name: SHARED for name in ("type", "subtype", "visibility", "hasVector", "createdBy")}
)


@settings(max_examples=300, deadline=None)
@given(
    run=st.lists(
        st.tuples(
            RUN_RESERVED, st.one_of(st.none(), METADATA), st.one_of(st.none(), st.text(alphabet="ab ", max_size=2))
        ),
        min_size=1,
        max_size=8,
    ),
    before=st.lists(st.tuples(st.integers(0, 60), st.fixed_dictionaries({"metadata": METADATA})), max_size=3),
    start=st.integers(0, 50),
)
def test_post_rows_is_post_row_of_each_row_in_turn(rowpost_twin, run, before, start):
    """post_rows leaves what post_row of each row in order leaves, over existing postings (ints on either side of
    the run's), whatever run of values the rows share at a reserved name (the same object, an equal one, or one of
    another kind that an equal key would mistake); a row with no words gets a length of 0, the rest are answered
    in order."""
    rows = []
    for at, (reserved, metadata, data) in enumerate(run):
        row = {**reserved, "id": f"id-{start + at}", "denseInt": start + at, "createdAt": at, "updatedAt": 2}
        row["generation"] = 3
        if metadata is not None:
            row["metadata"] = metadata
        if data is not None:
            row["data"] = data
        rows.append(row)
    postings, columns = existing(before)
    want_p, want_c = copied(postings, columns)
    ids, want_ids = {}, {}
    everyone = array("Q", sorted({d for d, _ in before}))
    want_all = array("Q", everyone)
    want_wordy = []
    for row in rows:
        if rowpost_twin.post_row(
            row, row["denseInt"], RESERVED_POSTED, _NULLABLE, want_p, want_c, kind_of, want_ids, want_all, COLUMN_ONLY
        ):
            want_wordy.append(row)
    lengths: dict = {}
    wordy = rowpost_twin.post_rows(
        rows, RESERVED_POSTED, _NULLABLE, postings, columns, kind_of, ids, everyone, COLUMN_ONLY, lengths
    )
    assert postings == want_p and columns == want_c and everyone == want_all and ids == want_ids
    assert [row["denseInt"] for row in wordy] == [row["denseInt"] for row in want_wordy]
    assert lengths == {row["denseInt"]: 0 for row in rows if row not in want_wordy}
    for values in postings.values():  # the kind beside each value as a key looked up afresh holds it
        for kind, value in values:
            assert kind == kind_of(value)


ROW_TEXT = st.one_of(st.none(), st.sampled_from(["alpha beta", "beta", "gamma alpha alpha", ""]))


@settings(max_examples=150, deadline=None)
@given(
    commits=st.lists(
        st.lists(
            st.tuples(
                st.integers(0, 11),  # the entity (its dense int)
                st.sampled_from(["put", "put", "put", "remove"]),
                RUN_RESERVED,
                st.one_of(st.none(), st.dictionaries(st.sampled_from(["n", "k"]), SHARED, max_size=2)),
                ROW_TEXT,
            ),
            max_size=10,
        ),
        min_size=1,
        max_size=4,
    ),
    lengths_at=st.integers(0, 4),
)
def test_a_commits_moves_at_once_leave_the_projections_one_at_a_time_leave(commits, lengths_at):
    """Projections.apply_moves (a run of new rows posted in one post_rows call, the rest one at a time) leaves the
    postings, columns, ids, words, lengths and word lengths that apply() of each move in turn leaves, whether the
    word lengths were built before a commit or not."""
    from brainy.index.projections import Projections

    at_once, one_by_one = Projections(), Projections()
    rows: dict[int, dict] = {}
    for at, commit in enumerate(commits):
        if at == lengths_at:
            at_once.word_lengths(), one_by_one.word_lengths()
        moves = []
        for dense, op, reserved, metadata, data in commit:
            before = rows.pop(dense, None)
            after = None
            if op == "put":
                after = {**reserved, "id": f"id-{dense}", "denseInt": dense, "createdAt": at, "updatedAt": at}
                after["generation"] = at
                if metadata is not None:
                    after["metadata"] = metadata
                if data is not None:
                    after["data"] = data
                rows[dense] = after
            if before is not None or after is not None:
                moves.append(("e", before, after))
        at_once.apply_moves(moves)
        for _, before, after in moves:
            one_by_one.apply(before, after)
        for name in ("ids", "postings", "columns", "terms", "lengths", "total_length", "all"):
            assert getattr(at_once, name) == getattr(one_by_one, name), name
        assert at_once.word_lengths().tolist() == one_by_one.word_lengths().tolist()
