"""The counts ledger (brainy/store/counts.py): a commit's moves applied at once (``move_all``, new entities counted
by group) leave it as applying them one at a time does, whatever the moves."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from brainy.store.counts import Ledger

ROWS = st.fixed_dictionaries(
    {"type": st.sampled_from(["document", "person", "thing"])},
    optional={"visibility": st.sampled_from(["public", "internal", "private"]), "hasVector": st.booleans()},
)
MOVES = st.lists(
    st.tuples(st.sampled_from(["e", "r"]), st.none() | ROWS, st.none() | ROWS).filter(lambda m: m[1] or m[2]),
    max_size=30,
)


@settings(max_examples=500, deadline=None)
@given(st.lists(MOVES, min_size=1, max_size=4))
def test_a_commits_moves_at_once_count_as_one_at_a_time(commits):
    at_once, one_by_one = Ledger(), Ledger()
    for moves in commits:
        at_once.move_all(moves)
        for move in moves:
            one_by_one.move(*move)
        assert at_once.to_doc() == one_by_one.to_doc()


@settings(max_examples=200, deadline=None)
@given(st.lists(MOVES, min_size=1, max_size=4), MOVES)
def test_a_copy_moves_apart_from_its_ledger(commits, later):
    """A ledger's copy (each commit keeps one) holds what the ledger did when copied, whatever either is moved by
    afterwards, and moves as the ledger would."""
    ledger = Ledger()
    for moves in commits:
        ledger.move_all(moves)
    ledger.generation, ledger.last_updated = 7, 1234
    held = ledger.to_doc()
    copied = ledger.copy()
    assert copied.to_doc() == held
    copied.move_all(later)
    assert ledger.to_doc() == held
    ledger.move_all(later)
    assert copied.to_doc() == ledger.to_doc()
