"""The long-conversation recall set (perf/conversations.py), with no model: the set is made from its seed alone,
every question's evidence is turns of its own conversation, every category is asked, and dev and held-out never
share a conversation.
"""

from __future__ import annotations

import datetime as dt
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from perf import conversations as C  # noqa: E402


@pytest.fixture(scope="module")
def every() -> list[C.Conversation]:
    return list(C.conversations(C.SEEDS))


def test_a_seed_makes_the_same_conversation_every_time():
    """Deterministic per seed: two builds of one seed are equal, turn for turn and question for question."""
    assert C.conversation(4) == C.conversation(4)
    assert C.conversation(4).turns != C.conversation(6).turns


def test_the_set_is_as_large_as_promised(every):
    """At least 10 conversations; each has 2 speakers, 15-30 sessions of 15-40 turns, >= 300 turns and >= 100
    questions."""
    assert len(every) >= 10
    for c in every:
        assert len(set(c.speakers)) == 2
        assert 15 <= len(c.sessions) <= 30
        assert all(15 <= len(s.turns) <= 40 for s in c.sessions), [len(s.turns) for s in c.sessions]
        assert len(c.turns) >= 300 and len(c.questions) >= 100


def test_every_evidence_id_is_a_turn_of_the_questions_own_conversation(every):
    """A question's evidence is 1 to 4 distinct turn ids, each a turn of its conversation (not of another)."""
    for c in every:
        ids = {t.id for t in c.turns}
        assert len(ids) == len(c.turns)
        for q in c.questions:
            assert 1 <= len(q.evidence) <= 4 and len(set(q.evidence)) == len(q.evidence), q
            assert set(q.evidence) <= ids, q
            assert all(e.startswith(c.name + ":") for e in q.evidence)


def test_every_category_is_asked_in_every_conversation(every):
    """Single-fact, multi-hop, temporal and open-domain questions in each conversation; multi-hop needs two turns."""
    for c in every:
        assert {q.category for q in c.questions} == set(C.CATEGORIES)
        assert all(len(q.evidence) >= 2 for q in c.questions if q.category == "multi-hop")


def test_questions_paraphrase_rather_than_copy(every):
    """No question is read back whole from a turn that answers it, and no question is asked twice."""
    for c in every:
        by_id = {t.id: t for t in c.turns}
        for q in c.questions:
            asked = q.text.lower().rstrip("?")
            assert all(asked not in by_id[e].text.lower() for e in q.evidence), q
        assert len({q.text for q in c.questions}) == len(c.questions)


def test_turns_are_dated_by_their_session_and_stored_with_speaker_and_date(every):
    """Speakers alternate within a session; a turn is kept as ``<speaker> (<session date>): <text>``."""
    c = every[0]
    for s in c.sessions:
        assert all(t.date == s.date and t.session == s.number for t in s.turns)
        assert all(a.speaker != b.speaker for a, b in zip(s.turns, s.turns[1:]))
    turn = c.sessions[0].turns[0]
    assert turn.stored() == f"{turn.speaker} ({C.day(turn.date)}): {turn.text}"
    assert C.day(dt.date(2023, 5, 8)) == "8 May 2023"


def test_relative_dates_resolve_to_the_day_they_name():
    """ "last Saturday" said on Monday 8 May 2023 is 6 May; said on a Saturday it is the one a week before."""
    phrases = dict(C.WHEN)
    assert phrases["last Saturday"](dt.date(2023, 5, 8)) == "6 May 2023"
    assert phrases["last Saturday"](dt.date(2023, 5, 6)) == "29 April 2023"
    assert phrases["yesterday"](dt.date(2023, 3, 1)) == "28 February 2023"
    assert phrases["last month"](dt.date(2023, 1, 15)) == "December 2022"


def test_dev_and_held_out_are_disjoint_and_cover_the_set():
    """Even seeds are dev, odd seeds held-out; no conversation is in both."""
    assert not set(C.DEV) & set(C.HELD_OUT)
    assert set(C.DEV) | set(C.HELD_OUT) == set(C.SEEDS)
    assert all(C.split_of(s) == "dev" for s in C.DEV) and all(C.split_of(s) == "held-out" for s in C.HELD_OUT)
    assert C.conversation(C.HELD_OUT[0]).split == "held-out"
