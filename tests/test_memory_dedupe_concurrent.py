"""memory.remember's dedupe under concurrent callers (DOORS 9.2): two callers remembering the same text at the same
moment keep one memory, and exactly one of them is told ``deduplicated: true``.

The rule runs under the commit lock, but the first caller's commit waits for its fsync outside it: the second's
search of the durable head cannot see that memory yet. The rule then also compares the rows of the commits applied
above the generation it searched (brainy/doors/memory/keeping.py ``duplicate``). Real threads, a real store and the
real embedder (and, once, no model at all), many bounded rounds each started together at a barrier.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from brainy.doors.memory.keeping import DEDUPE
from brainy.engine import init_store
from brainy.engine.brain import Brain
from brainy.index import embedder

ME = "person:agent@example.com"
ROUNDS = 30
CALLERS = 2
WORDS = (
    "apple river engine violin harbor pepper glacier lantern tiger basket comet saddle orchid marble falcon tunnel "
    "velvet quartz meadow cobalt"
).split()


@pytest.fixture
def brain(tmp_path) -> Iterator[Brain]:
    init_store(tmp_path / "mem")
    with Brain.open(tmp_path / "mem") as b:
        yield b


def _texts(with_model: bool) -> list[str]:
    """One text a round, no two of them the same memory by the rule (below the cosine threshold with a model, a
    different normalised text without), so each round can only repeat its own text."""
    rng = random.Random(5)
    texts = [f"the {' '.join(rng.sample(WORDS, 5))}" for _ in range(ROUNDS)]
    assert len(set(texts)) == ROUNDS
    if with_model:
        vectors, _ = embedder.embed_many(texts)
        similar = vectors @ vectors.T
        np.fill_diagonal(similar, 0)
        assert similar.max() < DEDUPE, "two rounds' texts are one memory by the rule: pick other words"
    return texts


def _at_once(brain: Brain, text: str) -> list[dict[str, Any]]:
    """``CALLERS`` threads remember ``text``, released together."""
    answers: list[Any] = [None] * CALLERS
    start = threading.Barrier(CALLERS)

    def remember(i: int) -> None:
        start.wait()
        try:
            answers[i] = brain.call("memory.remember", {"text": text}, caller=ME)
        except Exception as exc:  # the assertion below names it
            answers[i] = exc

    threads = [threading.Thread(target=remember, args=(i,)) for i in range(CALLERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not any(thread.is_alive() for thread in threads), "a remember never answered"
    assert all(isinstance(a, dict) for a in answers), answers
    return answers


@pytest.mark.parametrize("with_model", [True, False], ids=["model", "no-model"])
def test_two_callers_at_once_keep_one_memory_and_one_is_told_it_was_deduplicated(
    brain, tmp_path, monkeypatch, with_model
):
    """Each round two threads remember the same new text at the same moment: both answer the same id, exactly
    one answers ``deduplicated: true``, and after every round the brain holds one memory a text."""
    texts = _texts(with_model)
    if not with_model:  # the rule then dedupes on the same normalised text
        monkeypatch.setenv(embedder.OVERRIDE, str(tmp_path / "empty"))
    for round_, text in enumerate(texts):
        answers = _at_once(brain, text)
        assert len({a["id"] for a in answers}) == 1, (round_, answers)
        # one caller added it, every other was told it was the memory already held
        assert sorted(a["deduplicated"] for a in answers) == [False] + [True] * (CALLERS - 1), (round_, answers)
    stats = brain.call("memory.stats")
    assert stats["byKind"]["fact"] == ROUNDS
    listed = brain.call("memory.list", {"limit": 100})["memories"]
    assert sorted(m["text"] for m in listed) == sorted(texts)
