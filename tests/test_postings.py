"""Posting lists (brainy/_speedups/postings*.py[x]), run against both twins.

Every test taking ``postings_twin`` runs once with the compiled twin and once with the pure one,
against Python's own set operations as the model; tests taking ``postings_twins`` compare the two
twins' answers byte for byte.
"""

import random
from array import array

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from brainy._speedups import load

U64_MAX = 2**64 - 1
QUICK = settings(deadline=None, max_examples=150)
BIG = settings(deadline=None, max_examples=12)
OPS = ("intersect", "union", "difference")


def model(op, a, b):
    """The answer Python's sets give, as a sorted list."""
    sa, sb = set(a), set(b)
    return sorted({"intersect": sa & sb, "union": sa | sb, "difference": sa - sb}[op])


def plist(values):
    return array("Q", sorted(set(values)))


def check(answer, expected):
    """An answer is a fresh array('Q') holding exactly ``expected``, sorted and duplicate-free."""
    assert isinstance(answer, array) and answer.typecode == "Q"
    assert answer.tolist() == expected


# --- strategies -------------------------------------------------------------------------------

values_st = st.one_of(
    st.integers(0, 40),
    st.integers(0, 5_000),
    st.integers(0, U64_MAX),
    st.sampled_from([0, 1, 2**32, 2**63, U64_MAX - 1, U64_MAX]),
)
postings_st = st.lists(values_st, max_size=300).map(plist)


@st.composite
def skewed_pair(draw):
    """A short list and a long one (ratio around and far past the gallop threshold), overlapping."""
    rnd = random.Random(draw(st.integers(0, 2**32)))
    long_n = draw(st.sampled_from([9, 64, 1_000, 20_000]))
    short_n = draw(st.integers(0, max(1, long_n // draw(st.sampled_from([7, 8, 9, 50, 1_000])))))
    universe = draw(st.sampled_from([long_n * 2, long_n * 50, U64_MAX]))
    long = (
        rnd.sample(range(universe + 1), long_n)
        if universe < 10**7
        else [rnd.randrange(universe) for _ in range(long_n)]
    )
    short = rnd.sample(long, min(short_n // 2, len(long))) + [rnd.randrange(universe + 1) for _ in range(short_n // 2)]
    return plist(short), plist(long)


# --- pairwise operations against the set model -----------------------------------------------


@QUICK
@given(a=postings_st, b=postings_st)
def test_pairwise_operations_are_the_set_operations(postings_twin, a, b):
    """intersect, union and difference of two posting lists hold exactly what the set operations
    hold, sorted and duplicate-free, as a new array('Q'); the inputs are left as they were."""
    before = (a.tobytes(), b.tobytes())
    for op in OPS:
        check(getattr(postings_twin, op)(a, b), model(op, a, b))
        check(getattr(postings_twin, op)(b, a), model(op, b, a))
    assert (a.tobytes(), b.tobytes()) == before


@BIG
@given(pair=skewed_pair())
def test_skewed_sizes_answer_the_same_either_way(postings_twin, pair):
    """With one list far longer than the other (galloping) or only a little longer (merging), in
    either argument order, each operation still equals the set model."""
    short, long = pair
    for op in OPS:
        check(getattr(postings_twin, op)(short, long), model(op, short, long))
        check(getattr(postings_twin, op)(long, short), model(op, long, short))


def test_one_against_a_hundred_thousand(postings_twin):
    """1 vs 100,000 (ratio far past GALLOP_RATIO): the single value found, not found, below the
    first, at the last and past the end all answer as the sets do."""
    long = array("Q", range(3, 300_003, 3))
    for x in (3, 4, 150_000, 300_000, 300_003, 0, U64_MAX):
        short = array("Q", [x])
        for op in OPS:
            check(getattr(postings_twin, op)(short, long), model(op, short, long))
            check(getattr(postings_twin, op)(long, short), model(op, long, short))


def test_the_gallop_threshold_does_not_change_answers(postings_twin):
    """Right at the threshold (ratio GALLOP_RATIO and GALLOP_RATIO + 1) the answers are the sets'."""
    rnd = random.Random(8)
    ratio = postings_twin.GALLOP_RATIO
    for short_n in (1, 2, 17, 100):
        for n in (ratio * short_n, ratio * short_n + 1):
            long = plist(rnd.sample(range(n * 3), n))
            short = plist(rnd.sample(range(n * 3), short_n))
            for op in OPS:
                check(getattr(postings_twin, op)(short, long), model(op, short, long))
                check(getattr(postings_twin, op)(long, short), model(op, long, short))


@QUICK
@given(a=postings_st)
def test_equal_lists(postings_twin, a):
    """A list with itself (or an equal copy): intersect and union are the list, difference empty;
    the answers are never the input object."""
    for other in (a, array("Q", a)):
        assert postings_twin.intersect(a, other) == a and postings_twin.intersect(a, other) is not a
        assert postings_twin.union(a, other) == a and postings_twin.union(a, other) is not a
        check(postings_twin.difference(a, other), [])


def test_empty_inputs(postings_twin):
    """Empty against empty or non-empty: intersect empty, union the other, difference the left;
    an empty list contains nothing and is valid."""
    empty, some = array("Q"), array("Q", [0, 5, U64_MAX])
    check(postings_twin.intersect(empty, empty), [])
    check(postings_twin.intersect(empty, some), [])
    check(postings_twin.intersect(some, empty), [])
    check(postings_twin.union(empty, empty), [])
    check(postings_twin.union(empty, some), [0, 5, U64_MAX])
    check(postings_twin.union(some, empty), [0, 5, U64_MAX])
    check(postings_twin.difference(empty, some), [])
    check(postings_twin.difference(some, empty), [0, 5, U64_MAX])
    assert not postings_twin.contains(empty, 0)
    assert postings_twin.valid(empty)


# --- many lists --------------------------------------------------------------------------------


@QUICK
@given(lists=st.lists(postings_st, max_size=7))
def test_many_lists_are_the_set_operations(postings_twin, lists):
    """union_many is the union of every list (none: empty); intersect_many the intersection of
    every list (at least one); any order of the lists gives the same answer."""
    check(postings_twin.union_many(lists), sorted(set().union(*map(set, lists))))
    check(postings_twin.union_many(reversed(lists)), sorted(set().union(*map(set, lists))))
    if lists:
        check(postings_twin.intersect_many(lists), sorted(set(lists[0]).intersection(*map(set, lists[1:]))))
        check(postings_twin.intersect_many(iter(lists[::-1])), sorted(set(lists[0]).intersection(*map(set, lists[1:]))))


@BIG
@given(seed=st.integers(0, 2**32), k=st.integers(2, 12))
def test_many_large_lists(postings_twin, seed, k):
    """Ten-thousand-long lists of very different densities union and intersect as sets do."""
    rnd = random.Random(seed)
    lists = [plist(rnd.sample(range(rnd.choice([20_000, 200_000])), rnd.choice([1, 50, 10_000]))) for _ in range(k)]
    check(postings_twin.union_many(lists), sorted(set().union(*map(set, lists))))
    check(postings_twin.intersect_many(lists), sorted(set(lists[0]).intersection(*map(set, lists[1:]))))


def test_intersect_many_needs_a_list_and_union_many_does_not(postings_twin):
    """The intersection of no lists is refused (it would be everything); the union of none is
    empty; one list gives a copy of it."""
    with pytest.raises(ValueError, match="at least one posting list"):
        postings_twin.intersect_many([])
    check(postings_twin.union_many([]), [])
    one = array("Q", [1, 2, 3])
    assert postings_twin.intersect_many([one]) == one and postings_twin.intersect_many([one]) is not one
    assert postings_twin.union_many([one]) == one and postings_twin.union_many([one]) is not one


# --- contains and valid ------------------------------------------------------------------------


@QUICK
@given(a=postings_st, x=st.one_of(values_st, st.integers(-5, -1), st.integers(U64_MAX + 1, U64_MAX + 5)))
def test_contains_is_membership(postings_twin, a, x):
    """contains(a, x) is ``x in a`` for any integer, negative and past 64 bits included."""
    assert postings_twin.contains(a, x) == (x in set(a))
    for y in a[:5]:
        assert postings_twin.contains(a, y)


def test_contains_takes_integers_only(postings_twin):
    """contains takes anything with __index__ (a bool is 0 or 1); a float or a string is a
    TypeError."""
    a = array("Q", [0, 1, 7])
    assert postings_twin.contains(a, True) and postings_twin.contains(a, False)
    for bad in (1.0, "1", None):
        with pytest.raises(TypeError):
            postings_twin.contains(a, bad)


def test_valid_is_strictly_ascending(postings_twin):
    """valid(a) says whether a is sorted strictly ascending: duplicates and descents are not."""
    assert postings_twin.valid(array("Q", [0, 1, U64_MAX]))
    assert postings_twin.valid(array("Q", [9]))
    assert not postings_twin.valid(array("Q", [1, 1]))
    assert not postings_twin.valid(array("Q", [2, 1, 3]))


# --- what a posting list may be -----------------------------------------------------------------


def test_any_buffer_of_unsigned_64_bit_ints_is_a_posting_list(postings_twin):
    """array('Q'), a memoryview of one, a read-only memoryview over bytes cast to 'Q', and (where a
    C long is 8 bytes) array('L') are all posting lists."""
    q = array("Q", [1, 2, 3])
    readonly = memoryview(array("Q", [2, 3, 4]).tobytes()).cast("Q")
    forms = [q, memoryview(q), readonly]
    if array("L").itemsize == 8:
        forms.append(array("L", [3, 4]))
    for form in forms:
        for other in forms:
            check(postings_twin.union(form, other), sorted(set(form) | set(other)))
        assert postings_twin.contains(form, 3)
    check(postings_twin.intersect_many([q, readonly]), [2, 3])


@pytest.mark.parametrize(
    "bad",
    [
        [1, 2, 3],
        b"\x00" * 16,
        bytearray(16),
        "ab",
        None,
        7,
        array("q", [1, 2]),
        array("I", [1, 2]),
        array("d", [1.0]),
        memoryview(array("Q", [1, 2, 3, 4]))[::2],
        memoryview(array("Q", [1, 2, 3, 4]).tobytes()).cast("Q", (2, 2)),
    ],
    ids=["list", "bytes", "bytearray", "str", "None", "int", "signed", "uint32", "double", "strided", "2-d"],
)
def test_anything_else_is_a_type_error(postings_twin, bad):
    """A non-buffer, or a buffer that is not a C-contiguous 1-d run of unsigned 8-byte ints, is a
    TypeError naming what a posting list is, from every function and in either position."""
    good = array("Q", [1])
    calls = [
        lambda: postings_twin.intersect(bad, good),
        lambda: postings_twin.intersect(good, bad),
        lambda: postings_twin.union(bad, good),
        lambda: postings_twin.difference(good, bad),
        lambda: postings_twin.contains(bad, 1),
        lambda: postings_twin.valid(bad),
        lambda: postings_twin.intersect_many([good, bad]),
        lambda: postings_twin.union_many([good, bad]),
        lambda: postings_twin.intersect_many([bad]),
    ]
    for call in calls:
        with pytest.raises(TypeError, match=r"a posting list is a C-contiguous one-dimensional buffer"):
            call()


# --- the two twins -----------------------------------------------------------------------------


@QUICK
@given(a=postings_st, b=postings_st, more=st.lists(postings_st, min_size=1, max_size=4))
def test_twins_answer_byte_for_byte_alike(postings_twins, a, b, more):
    """The compiled and the pure twin give byte-identical answers (same type code, same bytes) to
    every operation, and the same names and constants."""
    compiled, pure = postings_twins
    assert compiled.__all__ == pure.__all__
    assert (compiled.TYPECODE, compiled.GALLOP_RATIO) == (pure.TYPECODE, pure.GALLOP_RATIO)
    for op in OPS:
        x, y = getattr(compiled, op)(a, b), getattr(pure, op)(a, b)
        assert (x.typecode, x.tobytes()) == (y.typecode, y.tobytes())
    for op in ("intersect_many", "union_many"):
        x, y = getattr(compiled, op)(more), getattr(pure, op)(more)
        assert (x.typecode, x.tobytes()) == (y.typecode, y.tobytes())
    assert compiled.valid(a) == pure.valid(a)


def test_twins_give_the_same_messages(postings_twins):
    """A wrong argument raises the same class with the same message from either twin."""
    compiled, pure = postings_twins
    for bad in ([1], array("q", [1]), memoryview(array("Q", [1, 2, 3, 4]))[::2]):
        messages = []
        for twin in (compiled, pure):
            with pytest.raises(TypeError) as caught:
                twin.intersect(array("Q"), bad)
            messages.append(str(caught.value))
        assert messages[0] == messages[1]


def test_the_facade_picks_postings_as_it_picks_sstblock():
    """One BRAINY_SPEEDUPS and one setup.py serve every speedup, so the facade's pick for postings
    is its pick for sstblock (whose own test checks that against the environment), and
    ``brainy._speedups.postings`` is that twin."""
    from brainy import _speedups
    from brainy._speedups import postings

    assert _speedups.picks["postings"] == _speedups.picks["sstblock"]
    assert postings is load("postings", _speedups.picks["postings"])
    assert load("postings", "python").__name__ == "brainy._speedups.postings_py"
