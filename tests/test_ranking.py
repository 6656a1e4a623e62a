"""find's ranked legs in compiled code (brainy/_speedups/ranking*.py[x]), run against both twins.

Tests taking ``ranking_twin`` run once with the compiled twin and once with the pure one, against a plain model
(the BM25 loop find ran before, a dict a hit; ``sorted`` on (-score, id key, position)); tests taking
``ranking_twins`` compare the two twins' answers exactly.
"""

from __future__ import annotations

import math
import random
import uuid

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from brainy.index.projections import IdKeys, Projections, word_arrays

K1, B = 1.2, 0.75
QUICK = settings(deadline=None, max_examples=120)


def old_bm25(postings, idfs, lengths, average, allowed):
    """The text leg as query.py scored it before: each word's dict walked, a dict a hit, summed in word order."""
    scores: dict[int, float] = {}
    for tfs, idf in zip(postings, idfs):
        for dense, tf in tfs.items():
            if allowed is not None and dense not in allowed:
                continue
            length = lengths.get(dense, 0)
            scores[dense] = scores.get(dense, 0.0) + idf * tf * (K1 + 1) / (tf + K1 * (1 - B + B * length / average))
    return scores


def model_order(dense, scores, hi, lo):
    """Every position in rank order: the higher score, then the smaller (hi, lo) of its dense int, then position."""
    return sorted(range(len(dense)), key=lambda i: (-scores[i], int(hi[dense[i]]), int(lo[dense[i]]), i))


@st.composite
def text_legs(draw):
    """Word postings over a few hundred dense ints, their dicts in any order (rows moved since posting), lengths as
    an array or a dict, and sometimes an allowed posting list."""
    rnd = random.Random(draw(st.integers(0, 2**32)))
    universe = draw(st.sampled_from([8, 60, 400]))
    lengths = {d: rnd.randrange(0, 9) for d in range(1, universe) if rnd.random() < 0.9}
    words = []
    for _ in range(draw(st.integers(0, 4))):
        held = rnd.sample(sorted(lengths), rnd.randrange(0, len(lengths) + 1)) if lengths else []
        words.append({d: rnd.choice([1, 1, 1, 2, 3, 7]) for d in held})
    idfs = [rnd.choice([0.1, 1.0, math.log(1 + 3.5 / 1.5), rnd.random() * 5]) for _ in words]
    allowed = None
    if draw(st.booleans()):
        allowed = np.array(sorted(rnd.sample(range(universe + 3), rnd.randrange(0, universe))), dtype=np.uint64)
    average = rnd.choice([1.0, 3.25, 4.0, rnd.random() * 10 + 0.5])
    return words, idfs, lengths, average, allowed


def _lengths_array(lengths, universe_pad=0):
    out = np.zeros(max(lengths, default=0) + 1 + universe_pad, dtype=np.uint32)
    for d, n in lengths.items():
        out[d] = n
    return out


@QUICK
@given(text_legs(), st.booleans())
def test_bm25_is_the_old_loops_scores_to_the_bit(ranking_twin, leg, as_array):
    """Each hit's score is the double the old Python loop summed (same expression, same word order), the hits
    ascending, only those ``allowed`` holds; each word's run is its hits; lengths read from an array indexed by
    dense int or from a mapping give the same."""
    words, idfs, lengths, average, allowed = leg
    want = old_bm25(words, idfs, lengths, average, None if allowed is None else set(allowed.tolist()))
    by = _lengths_array(lengths, 2) if as_array else lengths
    dense, scores, runs = ranking_twin.bm25([word_arrays(w) for w in words], idfs, by, average, allowed, K1, B)
    assert dense.dtype == np.uint64 and scores.dtype == np.float64
    assert dense.tolist() == sorted(want)
    assert scores.tolist() == [want[d] for d in sorted(want)]  # exact: the same doubles
    kept = set(want)
    assert [run.tolist() for run in runs] == [sorted(d for d in w if d in kept) for w in words]


@QUICK
@given(text_legs())
def test_bm25_twins_agree(ranking_twins, leg):
    """Both twins answer the same arrays, lengths as an array or a dict."""
    words, idfs, lengths, average, allowed = leg
    arrays = [word_arrays(w) for w in words]
    for by in (lengths, _lengths_array(lengths)):
        compiled, pure = (twin.bm25(arrays, idfs, by, average, allowed) for twin in ranking_twins)
        assert compiled[0].tolist() == pure[0].tolist() and compiled[1].tolist() == pure[1].tolist()
        assert [r.tolist() for r in compiled[2]] == [r.tolist() for r in pure[2]]


@st.composite
def ranked(draw):
    """A ranked list with many ties: scores from a handful of values, id keys colliding in hi (and sometimes lo)."""
    rnd = random.Random(draw(st.integers(0, 2**32)))
    m = draw(st.sampled_from([0, 1, 2, 5, 40, 300]))
    dense = np.array(rnd.sample(range(1, 3 * m + 2), m), dtype=np.uint64)
    palette = [rnd.random() for _ in range(draw(st.integers(1, 6)))] + [0.0, -0.0]
    scores = np.array([rnd.choice(palette) for _ in range(m)], dtype=np.float64)
    size = 3 * m + 2
    hi = np.array([rnd.choice([0, 1, 2**63, 2**64 - 1, rnd.randrange(2**64)]) for _ in range(size)], dtype=np.uint64)
    lo = np.array([rnd.choice([0, 5, rnd.randrange(2**64)]) for _ in range(size)], dtype=np.uint64)
    if draw(st.booleans()) and m > 1:  # two entries with the very same key: position decides
        hi[dense[1]], lo[dense[1]] = hi[dense[0]], lo[dense[0]]
    return dense, scores, hi, lo


@QUICK
@given(ranked(), st.integers(0, 320))
def test_first_is_the_head_of_the_full_sort(ranking_twin, case, n):
    """first(n) is the first n positions of the sort on (-score, id key, position), in that order."""
    dense, scores, hi, lo = case
    got = ranking_twin.first(dense, scores, n, hi, lo)
    assert got.dtype == np.intp
    assert got.tolist() == model_order(dense, scores, hi, lo)[:n]


@QUICK
@given(ranked(), st.data())
def test_ranks_are_places_in_the_full_sort(ranking_twin, case, data):
    """ranks(which) is each asked-about entry's 1-based place in that same sort, in the order asked."""
    dense, scores, hi, lo = case
    which = data.draw(st.lists(st.integers(0, max(0, len(dense) - 1)), max_size=12, unique=True)) if len(dense) else []
    place = {i: r for r, i in enumerate(model_order(dense, scores, hi, lo), 1)}
    got = ranking_twin.ranks(dense, scores, np.array(which, dtype=np.intp), hi, lo)
    assert got.tolist() == [place[i] for i in which]


def test_the_twins_refuse_alike(ranking_twins):
    """Mismatched lengths, a negative n, a dense int past the keys and a position past the entries are the same
    errors from both twins."""
    dense, scores = np.array([1, 2], dtype=np.uint64), np.array([0.5, 0.25])
    keys = np.zeros(3, dtype=np.uint64)
    for twin in ranking_twins:
        with pytest.raises(ValueError):
            twin.first(dense, scores[:1], 1, keys, keys)
        with pytest.raises(ValueError):
            twin.first(dense, scores, -1, keys, keys)
        with pytest.raises(IndexError):
            twin.first(np.array([7], dtype=np.uint64), scores[:1], 1, keys, keys)
        with pytest.raises(IndexError):
            twin.ranks(dense, scores, np.array([2]), keys, keys)
        with pytest.raises(ValueError):
            twin.bm25([word_arrays({1: 1})], [], {}, 1.0)
        with pytest.raises(ValueError):
            twin.bm25([(np.array([1], dtype=np.uint64), np.array([], dtype=np.uint32))], [1.0], {}, 1.0)
        assert twin.first(dense, scores, 0, keys, keys).tolist() == []
        assert twin.ranks(dense, scores, np.array([], dtype=np.intp), keys, keys).tolist() == []


# -- the id keys the ranks break ties on -------------------------------------------------------------------


def _ids(rnd: random.Random, n: int) -> list[str]:
    makers = [
        lambda: str(uuid.UUID(int=rnd.getrandbits(128))),
        lambda: str(uuid.uuid5(uuid.NAMESPACE_URL, str(rnd.random()))),
        lambda: f"01890000-0000-7000-8{rnd.getrandbits(12):03x}-{rnd.getrandbits(48):012x}",  # one high half
    ]
    return [rnd.choice(makers)() for _ in range(n)]


def test_id_keys_order_as_the_ids_and_move_with_the_rows():
    """(hi, lo) of every dense int compares as its id does; a row posted after the keys were built is keyed too
    (in new arrays past the old size, the old ones left as a read holding them saw them); an id that is not a
    canonical UUID leaves the projections without keys, for good."""
    rnd = random.Random(7)
    ids = _ids(rnd, 500)
    keys = IdKeys({d + 1: id_ for d, id_ in enumerate(ids)})
    pairs = [(int(keys.hi[d + 1]), int(keys.lo[d + 1])) for d in range(len(ids))]
    assert sorted(range(len(ids)), key=lambda i: pairs[i]) == sorted(range(len(ids)), key=lambda i: ids[i])
    held = keys.hi
    late = _ids(rnd, 1)[0]
    assert (
        keys.add(5000, late)
        and keys.hi is not held
        and int(keys.hi[5000]) << 64 | int(keys.lo[5000]) == int(uuid.UUID(late))
    )
    assert not keys.add(5001, "not-a-uuid") and not keys.add(5002, late.upper())
    with pytest.raises(ValueError):
        IdKeys({1: ids[0], 2: ids[1].upper()})

    proj = Projections()
    for d, id_ in enumerate(ids[:20], 1):
        proj.apply(None, _row(d, id_, "apple pie"))
    built = proj.id_keys()
    assert built is not None
    proj.apply(None, _row(21, ids[20], "fig"))
    assert (int(built.hi[21]), int(built.lo[21])) == divmod(int(uuid.UUID(ids[20])), 1 << 64)
    proj.apply(None, _row(22, "Odd-Key", "fig"))
    assert proj.id_keys() is None


def _row(dense: int, id_: str, data: str) -> dict:
    return {
        "denseInt": dense,
        "id": id_,
        "type": "thing",
        "data": data,
        "createdAt": 0,
        "updatedAt": 0,
        "generation": 1,
    }


def test_word_arrays_and_lengths_follow_every_move():
    """A word's arrays (kept between queries) and the lengths array answer as the dicts do after adds, a changed
    row (its entry now last in the word's dict) and a removal; a word no entity holds has none."""
    proj = Projections()
    ids = _ids(random.Random(3), 6)
    for d, text in enumerate(["apple pie", "apple apple tart", "fig"], 1):
        proj.apply(None, _row(d, ids[d], text))
    assert proj.word_postings("apple")[0].tolist() == [1, 2] and proj.word_lengths()[2] == 3
    proj.apply(_row(1, ids[1], "apple pie"), _row(1, ids[1], "apple apple apple pie plum"))
    dense, tf = proj.word_postings("apple")
    assert dense.tolist() == [1, 2] and tf.tolist() == [3, 2] and proj.word_lengths()[1] == 5
    proj.apply(_row(2, ids[2], "apple apple tart"), None)
    assert proj.word_postings("apple")[0].tolist() == [1] and proj.word_lengths()[2] == 0
    proj.apply(None, _row(4000, ids[4], "apple"))  # past the lengths array: grown
    assert proj.word_postings("apple")[0].tolist() == [1, 4000] and proj.word_lengths()[4000] == 1
    assert proj.word_postings("tart") is None and proj.word_postings("never") is None
