"""Benchmark: what the policy guardrails add to a write (docs/policy.md, "Enforcement").

    python perf/bench_policy.py --fast            # quick look
    python perf/bench_policy.py -o policy.json    # keep the figures (pyperf compare_to ...)

Each worker makes its own stores before anything is timed: one with no rule (no board row), one with
20 active tier-1 rules over ``add`` whose subjects are other callers, and one with 20 that bind the
caller but whose ``where`` (``{"tier": "gold"}``) the written row does not match. A transaction
staging one ``add`` of a 3-field row is built once per store.

What is timed:

- ``refusal[...]``: ``policy.refusal`` on the staged transaction: the question the commit path asks
  under the commit lock, after the rule and before the append (one board lookup; then the active
  rules, compiled and sorted by door once per board the writer reads, asked ``binds`` and ``where``).
- ``commit.add[...]``: a durable ``add`` through ``Brain.write``, fsync included, for scale.
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pyperf

from brainy.doors import policy, writes
from brainy.engine import Brain, init_store

CALLER = "person:bench"
RULES = 20
ROW = {"type": "thing", "metadata": {"tier": "silver", "n": 1, "tag": "x"}}

_cache: dict[str, Any] = {}


def _store(kind: str) -> Brain:
    if kind not in _cache:
        root = Path(tempfile.mkdtemp(prefix="brainy-bench-policy-"))
        atexit.register(shutil.rmtree, root, True)
        init_store(root / "s")
        brain = Brain.open(root / "s", name="bench")
        atexit.register(brain.close)
        for i in range(RULES if kind != "none" else 0):
            subject = f"person:other{i}" if kind == "others" else CALLER
            extra = {"where": {"tier": "gold"}} if kind == "where" else {}
            rid = brain.call(
                "policy.propose",
                {"subject": subject, "doors": ["add"], "reason": f"rule {i}", **extra},
                caller="person:owner",
            )["id"]
            brain.call("policy.ratify", {"id": rid}, caller="person:owner")
        _cache[kind] = brain
    return _cache[kind]


def _staged(brain: Brain) -> Any:
    txn = brain.commits.txn(brain.head + 1, 0, CALLER, None)
    writes.add(txn, {**ROW, "visibility": "public", "upsert": False}, writes.Context("bench"))
    return txn


def bench_refusal(loops: int, kind: str) -> float:
    brain = _store(kind)
    txn = _staged(brain)
    refusal = policy.refusal
    started = pyperf.perf_counter()
    for _ in range(loops):
        refusal(txn, "add", (), brain)  # as the commit path asks it: the brain keeps its compiled rules
    return pyperf.perf_counter() - started


def bench_commit(loops: int, kind: str) -> float:
    brain = _store(kind)
    started = pyperf.perf_counter()
    for _ in range(loops):
        brain.write("add", ROW, caller=CALLER)
    return pyperf.perf_counter() - started


def main() -> None:
    runner = pyperf.Runner()
    for kind, label in (
        ("none", "no rule"),
        ("others", f"{RULES} rules, other subjects"),
        ("where", f"{RULES} rules, where not matching"),
    ):
        runner.bench_time_func(f"refusal[{label}]", bench_refusal, kind)
    for kind, label in (("none", "no rule"), ("where", f"{RULES} rules, where not matching")):
        runner.bench_time_func(f"commit.add[{label}]", bench_commit, kind)


if __name__ == "__main__":
    main()
