"""The crash law, with real processes and real files: a crash never loses an acknowledged write and
never leaves part of an unacknowledged commit (docs/store-format.md, "The fact log", "Why this
design").

A writer process (``tests/procs/writer.py crash``) commits transactions of 1-8 entities (some with
relations) on a store tuned so that flushes, compactions and log segment rotations all happen
while it runs; the test kills it with SIGKILL at a random moment, reopens the store and checks
every acknowledgement it printed against what the store answers (``tests/crashlaw.py``, shared
with tests/test_kill_loop.py and tools/kill_loop.py, which run several writer threads at once).
Rounds accumulate on one store.

The run's seed is printed in every assertion message; rerun a failure with
``BRAINY_CRASH_SEED=<seed> pytest tests/test_crash.py``.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest
from crashlaw import Rounds, run_rounds

SEED = int(os.environ.get("BRAINY_CRASH_SEED") or random.SystemRandom().randrange(1 << 32))


@pytest.mark.slow
def test_sigkill_mid_run_loses_no_acknowledged_write_and_leaves_no_partial_commit(tmp_path: Path) -> None:
    """Law: across 50 SIGKILLs of a writer in the middle of committing (flushes, compactions and
    log rotations in flight), every acknowledged transaction is wholly present after the reopen,
    no transaction is partly present, the head counts exactly the commits present (so at least the
    acknowledged ones), each generation records the commit the writer made at it, the counts ledger
    equals the rows present, and each reopen reports ``stale-after-crash`` having replayed exactly
    the log past the MANIFEST. Every round settles the commits it touched (crashlaw.settle: each acknowledged one
    read back, each in doubt whole or absent, every generation's counts, the ledger); every fifth round and the
    last export the whole store against the whole model (an export each round was two thirds of the test's time,
    and rows lost or changed by a round stay so: the next whole check finds them)."""
    rounds = run_rounds(Rounds(tmp_path / "brain", tmp_path / "work", SEED, full_every=5), ["run"] * 50)
    ctx = f"seed={SEED}"
    assert rounds.model.acked >= 50, f"{ctx}: only {rounds.model.acked} commits were acknowledged in 50 rounds"
    assert len(os.listdir(tmp_path / "brain" / "log")) > 1, f"{ctx}: the log never rotated"


@pytest.mark.slow
def test_sigkill_at_start_or_during_close_keeps_the_crash_law(tmp_path: Path) -> None:
    """Law: a SIGKILL right after the writer starts (before, inside or just after its claim) or
    anywhere inside ``close()`` loses no acknowledged write and leaves no partial commit; the
    reopen names how the last writer went (a finished close leaves a fresh claim)."""
    rng = random.Random(SEED ^ 0x5EED)
    modes = [rng.choice(["start", "close"]) for _ in range(16)]
    run_rounds(Rounds(tmp_path / "brain", tmp_path / "work", SEED ^ 0xC105E), modes)
