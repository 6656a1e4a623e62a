"""Recall on long conversations: recall@1/5/10, MRR and latency of memory.recall, per question category, on the
multi-session conversations of ``perf/conversations.py`` (DOORS 9.2).

Every turn is kept through the door as a user would keep it: ``memory.remember {text, scope, dedupe: false}``,
one scope per conversation, the text ``<speaker> (<session date>): <turn>``; each question is asked with
``memory.recall {query, scope, limit: 10}``. A hit is mapped back to its turn by the memory id remember
answered. recall@k is the share of a question's evidence turns in the top k, averaged over questions; MRR is
the mean of 1 / the rank of the first evidence turn in the top 10 (0 when none is). Latency is each recall's
wall time in process, the question's embedding included. Remember's throughput is the ingest's turns / s.

The set is split by seed, once and for all: even seeds are ``dev``, odd seeds ``held-out``. Tune on dev only.
NEVER TUNE ON THE HELD-OUT SPLIT: read its figures only to report a change already chosen on dev, so they stay
a fair estimate of what it does on conversations nobody looked at. The harness refuses to print them unless
``--held-out`` is given.

    python perf/eval_conversations.py                       # dev split: the table
    python perf/eval_conversations.py --json                # the same, as JSON
    python perf/eval_conversations.py --conversations 1 --limit-questions 40     # a quick look
    python perf/eval_conversations.py --misses 3            # and three missed questions per category, dev only
    python perf/eval_conversations.py --held-out            # the held-out split: report only, never tune

A real store is built per run in a temporary directory, with the real embedder (installed with brainy;
nothing is fetched).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from brainy.engine import init_store  # noqa: E402
from brainy.engine.brain import Brain  # noqa: E402
from brainy.index import embedder  # noqa: E402
from perf import conversations as C  # noqa: E402

ME = "person:eval"
LIMIT = 10
KS = (1, 5, 10)


# -- the measures ----------------------------------------------------------------------------------------------


def recall_at(ranked: Sequence[str], evidence: Sequence[str], k: int) -> float:
    """The share of ``evidence`` found among the first ``k`` of ``ranked``."""
    top = set(ranked[:k])
    return sum(e in top for e in evidence) / len(evidence)


def reciprocal_rank(ranked: Sequence[str], evidence: Sequence[str]) -> float:
    """1 / the rank (from 1) of the first evidence id in ``ranked``; 0 when none is there."""
    wanted = set(evidence)
    return next((1 / r for r, id_ in enumerate(ranked, 1) if id_ in wanted), 0.0)


def percentile(values: Sequence[float], q: float) -> float:
    """The nearest-rank ``q``-th percentile (0 < q ≤ 100) of ``values``."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(len(ordered) * q / 100) - 1)] if ordered else 0.0


def summarise(answers: Sequence[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Per category and ``overall``: questions, recall@k, MRR and recall latency p50/p99 (ms)."""
    out: dict[str, dict[str, float]] = {}
    for category in (*C.CATEGORIES, "overall"):
        rows = [a for a in answers if category in (a["category"], "overall")]
        if not rows:
            continue
        figures: dict[str, float] = {"questions": len(rows)}
        for k in KS:
            figures[f"recall@{k}"] = round(statistics.fmean(recall_at(a["ranked"], a["evidence"], k) for a in rows), 3)
        figures["mrr"] = round(statistics.fmean(reciprocal_rank(a["ranked"], a["evidence"]) for a in rows), 3)
        ms = [a["ms"] for a in rows]
        figures["p50_ms"], figures["p99_ms"] = round(percentile(ms, 50), 1), round(percentile(ms, 99), 1)
        out[category] = figures
    return out


# -- the run ---------------------------------------------------------------------------------------------------


def ingest(brain: Brain, conversation: C.Conversation) -> dict[str, str]:
    """Every turn kept through memory.remember, in order; the memory id each answered -> the turn's id."""
    turns = {}
    for turn in conversation.turns:
        got = brain.call(
            "memory.remember", {"text": turn.stored(), "scope": conversation.name, "dedupe": False}, caller=ME
        )
        turns[got["id"]] = turn.id
    return turns


def ask(brain: Brain, conversation: C.Conversation, question: C.Question, turns: dict[str, str]) -> dict[str, Any]:
    """One question through memory.recall: the turn ids it ranked, best first, and its wall time."""
    start = time.perf_counter()
    got = brain.call("memory.recall", {"query": question.text, "scope": conversation.name, "limit": LIMIT})
    ms = (time.perf_counter() - start) * 1000
    ranked = [turns.get(h["memory"]["id"], h["memory"]["id"]) for h in got["memories"]]
    return {
        "id": question.id,
        "category": question.category,
        "question": question.text,
        "answer": question.answer,
        "evidence": list(question.evidence),
        "ranked": ranked,
        "ms": ms,
    }


def measure(seeds: Sequence[int], limit_questions: int | None = None) -> dict[str, Any]:
    """Build a store, keep every turn of the conversations made from ``seeds``, ask their questions."""
    conversations = list(C.conversations(seeds))
    embedder.embed_one("warm the model up")  # its load is not the ingest's cost
    answers: list[dict[str, Any]] = []
    ingest_s = 0.0
    turns_kept = 0
    with tempfile.TemporaryDirectory() as directory:
        init_store(Path(directory) / "eval")
        with Brain.open(Path(directory) / "eval") as brain:
            maps = {}
            for conversation in conversations:
                start = time.perf_counter()
                maps[conversation.name] = ingest(brain, conversation)
                ingest_s += time.perf_counter() - start
                turns_kept += len(maps[conversation.name])
            brain.call("memory.recall", {"query": "warm the recall path up", "limit": 1})
            for conversation in conversations:
                for question in conversation.questions[:limit_questions]:
                    answers.append(ask(brain, conversation, question, maps[conversation.name]))
            by_turn = {t.id: t for c in conversations for t in c.turns}
    return {
        "split": C.split_of(seeds[0]),
        "seeds": list(seeds),
        "conversations": len(conversations),
        "sessions": sum(len(c.sessions) for c in conversations),
        "turns": turns_kept,
        "ingest_s": round(ingest_s, 1),
        "remember_per_s": round(turns_kept / ingest_s, 1) if ingest_s else 0.0,
        "figures": summarise(answers),
        "answers": answers,
        "by_turn": by_turn,
    }


# -- the report ------------------------------------------------------------------------------------------------


def table(report: dict[str, Any]) -> str:
    head = f"{'category':<12} {'questions':>9} {'R@1':>6} {'R@5':>6} {'R@10':>6} {'MRR':>6} {'p50 ms':>7} {'p99 ms':>7}"
    lines = [
        f"split {report['split']} (seeds {', '.join(map(str, report['seeds']))}): {report['conversations']} "
        f"conversations, {report['sessions']} sessions, {report['turns']} turns",
        f"ingest: {report['turns']} memory.remember in {report['ingest_s']} s = {report['remember_per_s']} turns/s",
        head,
        "-" * len(head),
    ]
    for category, f in report["figures"].items():
        lines.append(
            f"{category:<12} {f['questions']:>9} {f['recall@1']:>6.3f} {f['recall@5']:>6.3f} {f['recall@10']:>6.3f} "
            f"{f['mrr']:>6.3f} {f['p50_ms']:>7.1f} {f['p99_ms']:>7.1f}"
        )
    return "\n".join(lines)


def misses(report: dict[str, Any], n: int) -> str:
    """Up to ``n`` questions per category whose evidence was not all in the top 5: the question, the evidence,
    and what recall put first."""
    by_turn = report["by_turn"]
    out = []
    for category in C.CATEGORIES:
        missed = [
            a for a in report["answers"] if a["category"] == category and recall_at(a["ranked"], a["evidence"], 5) < 1
        ]
        for a in missed[:n]:
            out.append(f"[{category}] {a['question']}  (answer: {a['answer']})")
            for e in a["evidence"]:
                rank = a["ranked"].index(e) + 1 if e in a["ranked"] else None
                out.append(f"    evidence (rank {rank or '-'}): {by_turn[e].stored()}")
            for i, id_ in enumerate(a["ranked"][:3], 1):
                text = by_turn[id_].stored() if id_ in by_turn else id_
                out.append(f"    recalled {i}: {text}")
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="the figures as JSON")
    parser.add_argument(
        "--held-out", action="store_true", help="measure the held-out split (report only: never tune on it)"
    )
    parser.add_argument("--conversations", type=int, help="only the first N conversations of the split")
    parser.add_argument("--seed", type=int, action="append", help="only this conversation (repeatable)")
    parser.add_argument("--limit-questions", type=int, help="only the first N questions of each conversation")
    parser.add_argument("--misses", type=int, default=0, help="show N missed questions per category (dev only)")
    args = parser.parse_args()
    seeds = list(args.seed) if args.seed else list(C.HELD_OUT if args.held_out else C.DEV)
    if any(C.split_of(s) == "held-out" for s in seeds) and not args.held_out:
        parser.error("held-out conversations (odd seeds) are measured only with --held-out, and never tuned on")
    if args.held_out and any(C.split_of(s) == "dev" for s in seeds):
        parser.error("--held-out measures held-out conversations only (odd seeds)")
    if args.held_out and args.misses:
        parser.error("no misses are shown from the held-out split: reading them is tuning on it")
    seeds = seeds[: args.conversations] if args.conversations else seeds
    report = measure(seeds, args.limit_questions)
    if args.json:
        keep = ("split", "seeds", "conversations", "sessions", "turns", "ingest_s", "remember_per_s", "figures")
        print(json.dumps({k: report[k] for k in keep}, indent=2))
    else:
        print(table(report))
    if args.misses:
        print()
        print(misses(report, args.misses))


if __name__ == "__main__":
    main()
