"""The long-conversation recall set (perf/conversations.py) and its harness's measures (perf/eval_conversations.py),
with no model: the set is made from its seed alone, every question's evidence is turns of its own conversation,
every category is asked, the measures are right on hand-made rankings, and dev and held-out never share a
conversation. The harness's run itself needs the embedder and is not run here.
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
from perf import eval_conversations as E  # noqa: E402


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


def test_recall_at_k_is_the_share_of_evidence_in_the_top_k():
    ranked = ["a", "b", "c", "d", "e", "f"]
    assert E.recall_at(ranked, ["a"], 1) == 1.0
    assert E.recall_at(ranked, ["b"], 1) == 0.0
    assert E.recall_at(ranked, ["a", "e"], 1) == 0.5
    assert E.recall_at(ranked, ["a", "e"], 5) == 1.0
    assert E.recall_at(ranked, ["a", "z"], 10) == 0.5
    assert E.recall_at([], ["a"], 5) == 0.0


def test_mrr_counts_the_first_evidence_found():
    assert E.reciprocal_rank(["a", "b", "c"], ["a"]) == 1.0
    assert E.reciprocal_rank(["a", "b", "c"], ["c", "b"]) == 0.5
    assert E.reciprocal_rank(["a", "b", "c"], ["z"]) == 0.0


def test_percentiles_are_nearest_rank():
    values = list(range(1, 101))
    assert E.percentile(values, 50) == 50
    assert E.percentile(values, 99) == 99
    assert E.percentile([3.0], 99) == 3.0
    assert E.percentile([], 50) == 0.0


def test_summary_averages_per_category_and_overall():
    """Two questions: one found first, one found third of two evidence turns; overall averages them."""
    answers = [
        {"category": "single-fact", "evidence": ["a"], "ranked": ["a", "b"], "ms": 2.0},
        {"category": "multi-hop", "evidence": ["x", "y"], "ranked": ["p", "q", "x"], "ms": 4.0},
    ]
    got = E.summarise(answers)
    assert got["single-fact"]["recall@1"] == 1.0 and got["single-fact"]["mrr"] == 1.0
    assert got["multi-hop"]["recall@1"] == 0.0 and got["multi-hop"]["recall@5"] == 0.5
    assert got["multi-hop"]["mrr"] == 0.333
    assert got["overall"]["questions"] == 2 and got["overall"]["recall@5"] == 0.75
    assert "temporal" not in got


def test_the_harness_refuses_held_out_figures_without_the_flag(monkeypatch, capsys):
    """Asking for a held-out conversation without --held-out, or for misses with it, is refused before any store
    is built."""
    for argv in (["--seed", str(C.HELD_OUT[0])], ["--held-out", "--misses", "2"], ["--held-out", "--seed", "0"]):
        monkeypatch.setattr(sys, "argv", ["eval_conversations.py", *argv])
        with pytest.raises(SystemExit) as refused:
            E.main()
        assert refused.value.code == 2
    assert "held-out" in capsys.readouterr().err
