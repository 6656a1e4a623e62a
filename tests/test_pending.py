"""What the commit path hands on a generation at a time (brainy/store/pending.py): taken and dropped from the lowest
generation up, read as a run, and never losing or tearing a put while another thread takes."""

from __future__ import annotations

import threading

from brainy.store.pending import Pending


def test_take_and_drop_answer_the_front_in_generation_order():
    """take answers every generation at or below its bound, in order, and removes them; drop removes without
    answering; what is above the bound stays."""
    held: Pending[str] = Pending()
    for g in range(5, 11):
        held.put(g, f"m{g}")
    assert held.take(4) == []
    assert held.take(7) == [(5, "m5"), (6, "m6"), (7, "m7")]
    held.drop(8)
    assert held.copy() == {9: "m9", 10: "m10"} and len(held) == 2 and 9 in held and 8 not in held
    assert held.take(10**9) == [(9, "m9"), (10, "m10")] and len(held) == 0
    held.put(11, "m11")  # put after everything was taken: the front starts there
    assert held.take(11) == [(11, "m11")]


def test_a_run_is_whole_or_none():
    """between answers the values of a run of generations in order, or None when one of them is not held (a
    follower then knows a snapshot is out of the moves' reach)."""
    held: Pending[int] = Pending({3: 30, 4: 40, 6: 60})
    assert held.between(2, 4) == [30, 40] and held.reaches(2, 4)
    assert held.between(2, 6) is None and not held.reaches(4, 6)
    assert held.between(4, 4) == [] and held.reaches(4, 4)
    assert held.get(6) == 60 and held.get(5) is None


def test_a_span_answers_what_is_held_in_it_and_leaves_it_held():
    """span answers the values held in a range of generations, in order, skipping those not held (a follower
    looking at each commit's moves once), whether the range is near (counted up) or far (the keys filtered), and
    removes nothing."""
    held: Pending[int] = Pending({3: 30, 4: 40, 6: 60, 90_000: 9})
    assert held.span(2, 6) == [30, 40, 60]
    assert held.span(4, 5) == [] and held.span(6, 6) == []
    assert held.span(0, 10**12) == [30, 40, 60, 9]  # far: the keys themselves
    assert held.span(5, 90_000) == [60, 9]
    assert len(held) == 4


def test_a_sparse_front_is_taken_whole():
    """Generations held with gaps (an adopted map) are taken in order, however far the bound reaches."""
    held: Pending[int] = Pending({10: 1, 500: 2, 90_000: 3})
    assert held.take(1_000) == [(10, 1), (500, 2)]
    assert held.take(10**12) == [(90_000, 3)]


def test_a_taker_never_misses_a_put_made_meanwhile():
    """One thread puts generation after generation (a commit's thread) while another takes and drops the front
    (the thread moving the durable head): nothing raises, and every put is taken exactly once, in order."""
    held: Pending[int] = Pending()
    total, taken, done = 20_000, [], threading.Event()

    def putter():
        for g in range(1, total + 1):
            held.put(g, g)
        done.set()

    thread = threading.Thread(target=putter)
    thread.start()
    while not done.is_set() or len(held):
        upto = taken[-1] + 7 if taken else 7
        taken.extend(g for g, _ in held.take(upto))
        held.reaches(upto, upto + 3)
        held.copy()
    thread.join()
    assert taken == list(range(1, total + 1))
