"""Speakers lifted from what was said (brainy/doors/memory/said.py; docs/memory.md "Speakers"), on a real store
with the real embedder: the lift itself, the vector made from what was said, the speaker kept and favoured by
recall, and dedupe and consolidation that never join two speakers' lines.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from brainy.doors.memory.recall import SPEAKER_WEIGHT
from brainy.doors.memory.said import Said, named, said
from brainy.engine import init_store
from brainy.engine.brain import Brain
from brainy.index import embedder

ME = "person:agent@example.com"


@pytest.fixture
def brain(tmp_path) -> Iterator[Brain]:
    init_store(tmp_path / "mem")
    with Brain.open(tmp_path / "mem") as b:
        yield b


def remember(b: Brain, text: str, **more: Any) -> dict[str, Any]:
    return b.call("memory.remember", {"text": text, "dedupe": False, **more}, caller=ME)


@pytest.mark.parametrize(
    "text, expect",
    [
        (
            "Kofi (23 October 2023): I have too many succulents.",
            Said("kofi", "23 October 2023", "I have too many succulents."),
        ),
        ("Mary Jane: see you at five", Said("mary jane", None, "see you at five")),
        ("  Dr. O'Neil (9am):   hello", Said("dr. o'neil", "9am", "hello")),
        ("the user prefers dark mode", Said(None, None, "the user prefers dark mode")),
        ("Kofi said: nothing", Said(None, None, "Kofi said: nothing")),  # a lower-case word is no name
        ("Kofi:", Said(None, None, "Kofi:")),  # nothing said after the colon
        ("One Two Three Four: too long a name", Said(None, None, "One Two Three Four: too long a name")),
        ("Ana (a (nested) aside): x", Said(None, None, "Ana (a (nested) aside): x")),
    ],
)
def test_the_lift(text, expect):
    assert said(text) == expect


def test_a_query_names_every_run_of_up_to_three_words():
    runs = named("Did Mary Jane call Kofi's cousin?")
    assert {"mary jane", "kofi", "mary jane call", "cousin"} <= set(runs)
    assert "did mary jane call" not in runs


def test_the_vector_is_what_was_said_and_the_speaker_is_kept(brain):
    got = remember(brain, "Kofi (23 October 2023): I have way too many succulents.")
    row = brain.call("get", got["id"], {"includeVector": True})["entity"]
    assert row["data"] == "Kofi (23 October 2023): I have way too many succulents."
    assert row["metadata"]["speaker"] == "kofi"
    body = embedder.embed_one("I have way too many succulents.")[0]
    assert float(np.dot(np.asarray(row["vector"], dtype=np.float32), body)) > 0.999
    read = brain.call("memory.read", {"id": got["id"]})["memory"]
    assert read["text"] == "Kofi (23 October 2023): I have way too many succulents."
    plain = remember(brain, "The user prefers dark mode.")
    assert "speaker" not in brain.call("get", plain["id"])["entity"]["metadata"]


def test_recall_favours_the_named_speaker_and_says_so(brain):
    lines = {
        "Kofi (1 May 2023): Lol, classic.": "kofi",
        "Kofi (1 May 2023): Eaten anywhere nice lately?": "kofi",
        "Kofi (2 May 2023): I have way too many succulents, my shelves are groaning.": "kofi",
        "Lena (2 May 2023): I collect vintage stamps from every trip.": "lena",
        "Lena (3 May 2023): My cactus collection keeps growing.": "lena",
    }
    for text in lines:
        remember(brain, text, scope="c")
    answer = brain.call("memory.recall", {"query": "What plants does Kofi collect?", "scope": "c"})
    assert answer["speakers"] == {"named": ["kofi"]}
    hits = answer["memories"]
    assert hits[0]["memory"]["text"].startswith("Kofi (2 May 2023): I have way too many succulents")
    for hit in hits:  # the named speaker's lines come first, and why says the speaker part
        kofi = lines[hit["memory"]["text"]] == "kofi"
        assert hit["why"].get("speaker") == (SPEAKER_WEIGHT if kofi else None)
    assert [lines[h["memory"]["text"]] for h in hits] == ["kofi"] * 3 + ["lena"] * 2
    # unnamed, nobody is favoured: the meaning leg alone orders the lines
    unnamed = brain.call("memory.recall", {"query": "Who collects plants?", "scope": "c"})["memories"]
    assert all("speaker" not in h["why"] for h in unnamed)
    assert {unnamed[0]["memory"]["text"], unnamed[1]["memory"]["text"]} & {
        "Kofi (2 May 2023): I have way too many succulents, my shelves are groaning.",
        "Lena (3 May 2023): My cactus collection keeps growing.",
    }


def test_the_named_speaker_is_a_candidate_however_many_others_there_are(brain):
    for i in range(60):  # more close lines by others than a leg hands the fusion
        remember(brain, f"Lena (1 May 2023): I repotted succulent number {i} today.", scope="c")
    remember(brain, "Kofi (2 May 2023): My shelf is full of little green plants.", scope="c")
    hits = brain.call("memory.recall", {"query": "Which plants does Kofi keep?", "scope": "c", "limit": 3})
    assert hits["memories"][0]["memory"]["text"] == "Kofi (2 May 2023): My shelf is full of little green plants."


def test_dedupe_and_consolidate_never_join_two_speakers(brain):
    first = brain.call("memory.remember", {"text": "Kofi (1 May 2023): See you next week!"}, caller=ME)
    other = brain.call("memory.remember", {"text": "Lena (1 May 2023): See you next week!"}, caller=ME)
    again = brain.call("memory.remember", {"text": "Kofi (8 May 2023): See you next week!"}, caller=ME)
    assert not other["deduplicated"] and other["id"] != first["id"]
    assert again["deduplicated"] and again["id"] == first["id"]
    remember(brain, "Lena (9 May 2023): See you next week!")
    groups = brain.call("memory.consolidate", {"threshold": 0.95}, caller=ME)["groups"]
    assert len(groups) == 1
    kept = brain.call("memory.read", {"id": groups[0]["kept"]})["memory"]["text"]
    retired = [brain.call("memory.read", {"id": i})["memory"]["text"] for i in groups[0]["retired"]]
    assert {t.split(" ")[0] for t in [kept, *retired]} == {"Lena"}


def test_a_line_that_asks_or_says_little_gives_way_to_one_that_tells(brain):
    asks = "Kofi (1 May 2023): Do you like jazz music, old records and live gigs?"
    tells = "Kofi (1 May 2023): I really like music, jazz records most of all."
    brief = "Kofi (1 May 2023): Music, ha."
    for text in (asks, tells, brief):
        remember(brain, text, scope="c")
    query = embedder.embed_one("What music does Kofi like?")[0]
    closer = {t: float(np.dot(query, embedder.embed_one(said(t).body)[0])) for t in (asks, tells)}
    assert closer[asks] > closer[tells]  # by meaning alone the question would come first
    hits = brain.call("memory.recall", {"query": "What music does Kofi like?", "scope": "c"})["memories"]
    assert [h["memory"]["text"] for h in hits] == [tells, asks, brief]
    forms = {h["memory"]["text"]: h["why"].get("form") for h in hits}
    assert forms == {tells: None, asks: -0.1, brief: -0.05}


def test_turns_are_recalled_with_their_conversation_and_seq(brain):
    said_lines = [
        ("user", "Maya (3 June 2023): I finally finished painting the kitchen yellow."),
        ("assistant", "That sounds bright! How long did it take?"),
        ("user", "Maya (3 June 2023): Two weekends, and my cat walked through the tray twice."),
    ]
    for role, text in said_lines:
        brain.call("memory.turn", {"conversation": "maya", "role": role, "text": text}, caller=ME)
    remember(brain, "Maya (1 June 2023): I am thinking about painting the kitchen.")
    answer = brain.call("memory.recall", {"query": "What colour did Maya paint her kitchen?", "kinds": ["turn"]})
    top = answer["memories"][0]
    assert top["memory"]["kind"] == "turn" and top["memory"]["text"] == said_lines[0][1]
    assert (top["memory"]["conversation"], top["memory"]["seq"], top["memory"]["role"]) == ("maya", 1, "user")
    assert top["why"]["speaker"] == SPEAKER_WEIGHT
    assert all(h["memory"]["kind"] == "turn" for h in answer["memories"])


def test_without_a_model_the_words_and_the_speaker_still_rank(brain, tmp_path, monkeypatch):
    monkeypatch.setenv(embedder.OVERRIDE, str(tmp_path / "empty"))
    remember(brain, "Lena (1 May 2023): My ukulele needs new strings.", scope="c")
    remember(brain, "Kofi (1 May 2023): My ukulele needs new strings too.", scope="c")
    answer = brain.call("memory.recall", {"query": "What does Kofi's ukulele need?", "scope": "c"})
    assert answer["semantic"]["served"] is False and answer["speakers"] == {"named": ["kofi"]}
    top = answer["memories"][0]
    assert top["memory"]["text"].startswith("Kofi") and top["why"]["speaker"] == SPEAKER_WEIGHT
