"""The crash law with four writers in flight: tools/kill_loop.py's rounds, a few dozen of them.

One writer process holds the lease while four threads commit through its handle at once, with add,
addMany, transact, update, relate, remove, writeFile and memory.remember (tests/procs/writer.py crash
--doors mixed); each round SIGKILLs it at a random moment, or at a step of a flush or a compaction
the maintenance thread names, then reopens the store and checks it against a model of every line the
writers printed (tests/crashlaw.py). tools/kill_loop.py runs the same rounds a thousand times over.

Rerun a failure with ``BRAINY_CRASH_SEED=<seed> pytest tests/test_kill_loop.py``.
"""

from __future__ import annotations

import os
import random
import struct
from pathlib import Path

import pytest
from crashlaw import Rounds, run_rounds

from brainy.store import log as log_
from brainy.store.files import read_document

SEED = int(os.environ.get("BRAINY_CRASH_SEED") or random.SystemRandom().randrange(1 << 32))


@pytest.mark.slow
def test_sigkill_with_four_writers_in_flight_loses_no_acknowledged_write(tmp_path: Path) -> None:
    """Law: across 30 SIGKILLs of a process whose four writer threads commit at once through every kind
    of write door, some landing at the maintenance thread's steps (the memtable frozen, the table written,
    the MANIFEST swapped, of a flush and of a compaction), with the log trimmed at every flush, every acknowledged commit is wholly present at
    the generation its answer named, each thread's one commit in doubt is wholly present or wholly absent,
    the head counts exactly the commits present, every generation records its commit, and the store
    exported whole equals the model."""
    rng = random.Random(SEED)
    plan = ["run"] * 12 + ["flush"] * 7 + ["compact"] * 7 + ["start"] * 2 + ["close"] * 2
    rng.shuffle(plan)
    rounds = run_rounds(
        Rounds(
            tmp_path / "brain", tmp_path / "work", SEED, writers=4, doors="mixed", full_every=10, feed_retention="0B"
        ),
        plan,
    )
    ctx = f"seed={SEED}"
    # the writers kept no sealed segment once flushed (docs/store-format.md, "Horizons"): trims ran under the kills
    assert int(read_document(tmp_path / "brain" / "MANIFEST").get("logFrom", 1)) > 1, ctx
    assert rounds.model.acked >= 30, f"{ctx}: only {rounds.model.acked} commits were acknowledged"
    assert set(rounds.model.by_door) == {
        "add", "addMany", "transact", "update", "relate", "remove", "writeFile", "memory.remember"
    }, f"{ctx}: {rounds.model.by_door}"  # fmt: skip
    assert rounds.mid_flush >= 1 and rounds.mid_compaction >= 1, f"{ctx}: {rounds.inside}"


def _frames(segment: Path) -> list[tuple[int, int]]:
    """(offset, generation) of each whole frame of a log segment, read by the layout docs/store-format.md gives:
    a 16-byte header, then frames of length u32, crc u32 and a payload that starts with its generation."""
    data = segment.read_bytes()
    out, at = [], log_.HEADER_SIZE
    while at + log_.FRAME_HEADER_SIZE <= len(data):
        (length,) = struct.unpack_from("<I", data, at)
        end = at + log_.FRAME_HEADER_SIZE + length
        if length == 0 or end > len(data):
            break
        generation = log_.peek_generation(data, at + log_.FRAME_HEADER_SIZE, end)
        assert generation is not None
        out.append((at, generation))
        at = end
    return out


@pytest.mark.slow
def test_the_check_names_an_acknowledged_commit_the_store_lost(tmp_path: Path) -> None:
    """The check can fail: after a kill, the last log segment cut back to just before the frame of an
    acknowledged commit the tables do not hold (as a lost write would leave it) is named LOST."""
    rounds = Rounds(tmp_path / "brain", tmp_path / "work", SEED, writers=4, doors="mixed")
    for i in range(10):  # bounded: a round whose acknowledged commits were all flushed cuts nothing
        ctx = f"seed={SEED} round={i}"
        seen = rounds.kill("run", ctx)
        flushed = int(read_document(rounds.store / "MANIFEST")["generation"])
        acked = max((op.generation for op in seen.ops if op.generation is not None), default=0)
        segment = sorted((rounds.store / "log").glob("*.log"))[-1]
        cut = [at for at, generation in _frames(segment) if generation == acked]
        if acked > flushed and cut:
            with open(segment, "r+b") as f:
                f.truncate(cut[0])
            with pytest.raises(AssertionError, match="LOST: seq"):
                rounds.reopen("run", seen, ctx)
            return
        rounds.reopen("run", seen, ctx)
    pytest.fail(f"seed={SEED}: no round left an acknowledged commit past the flushed generation to cut")
