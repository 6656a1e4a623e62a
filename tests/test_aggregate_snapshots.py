"""Aggregate snapshots (docs/store-format.md, "Aggregate snapshots"): the running state persisted at every flush
and clean close, caught up from the replayed log tail after a reopen or a SIGKILL, and answering exactly as
the oracle over the rows (tests/test_aggregates.py) does; a damaged, torn or unreachable snapshot is refused
and the state rebuilt from the rows.
"""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import new_store
from test_aggregates import CALLER, DEFINITIONS, _define_all, _write, check_all

from brainy.engine import Brain
from brainy.index.aggregate_follower import EMPTY_STORE, SUFFIX, decode_snapshot


def snapshots(path: Path) -> list[Path]:
    return sorted((path / "index").glob("*" + SUFFIX))


def fill(path: Path, seed: int, before: int = 60, after: int = 0) -> None:
    """Definitions, writes, a flush (the snapshot), then ``after`` writes left in the log tail; closed cleanly."""
    rng, live = random.Random(seed), []
    with Brain.open(path, flush_bytes=1 << 30) as brain:
        for _ in range(before):
            _write(brain, rng, live)
        _define_all(brain)
        for _ in range(before):
            _write(brain, rng, live)
        assert brain.flush()
        for _ in range(after):
            _write(brain, rng, live)


def test_a_flush_persists_the_state_and_a_reopen_reads_it_exactly(tmp_path: Path) -> None:
    """Definitions no read has built are built at the flush; the reopen loads them from the snapshot, never the
    rows, and every answer equals the oracle; writes after the reopen keep it exact."""
    path = new_store(tmp_path)
    fill(path, 3)
    (only,) = snapshots(path)
    with Brain.open(path) as brain:
        assert int(only.name[: -len(SUFFIX)]) == brain.head == brain.flushed
        assert decode_snapshot(only.read_bytes()).pending == {}  # the flush built them
        check_all(brain)
        assert brain.aggregate_follower.built_from == f"snapshot at {brain.head}"
        rng, live = random.Random(4), []
        for _ in range(30):
            _write(brain, rng, live)
        check_all(brain)


def test_a_clean_close_with_a_tail_is_caught_up_from_the_snapshot(tmp_path: Path) -> None:
    """A close flushes the tail and persists the state at the head, which the next open loads as it stands."""
    path = new_store(tmp_path)
    fill(path, 5, before=50, after=40)  # the tail after the flush: in the log only, the close flushes it
    (closed,) = snapshots(path)
    with Brain.open(path) as brain:
        assert closed.name == f"{brain.head:020d}{SUFFIX}"
        check_all(brain)
        assert brain.aggregate_follower.built_from == f"snapshot at {brain.head}"


def crashed_writer(path: Path, flushed: bool = True) -> tuple[int, int]:
    """A real writer process defines the aggregates, flushes (the snapshot: unless not ``flushed``), commits a tail
    and is SIGKILLed: the flushed generation and the head it reached."""
    script = (
        "import os, random, signal, sys\n"
        "sys.path.insert(0, sys.argv[2])\n"
        "from brainy.engine import Brain\n"
        "from test_aggregates import _define_all, _write\n"
        "brain = Brain.open(sys.argv[1], flush_bytes=1 << 30)\n"
        f"rng, live = random.Random({7 if flushed else 14}), []\n"
        "for _ in range(40): _write(brain, rng, live)\n"
        "_define_all(brain)\n"
        + ("brain.aggregate({'name': 'sales'})\n" if flushed else "")
        + "for _ in range(40): _write(brain, rng, live)\n"
        + ("brain.flush()\nfor _ in range(60): _write(brain, rng, live)\n" if flushed else "")
        + "print(brain.flushed, brain.head, flush=True)\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(path), str(Path(__file__).parent)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == -signal.SIGKILL, done.stderr
    flushed_at, head = map(int, done.stdout.split())
    return flushed_at, head


@pytest.mark.slow
def test_after_a_sigkill_the_state_is_caught_up_from_the_snapshot_and_the_tail(tmp_path: Path) -> None:
    """A real writer process flushes (the snapshot), commits a tail and is SIGKILLed; the reopen answers every
    aggregate exactly from the snapshot and the replayed tail, and its recovery flush writes a new snapshot
    the next open starts from."""
    path = new_store(tmp_path)
    flushed, head = crashed_writer(path)
    assert [p.name for p in snapshots(path)] == [f"{flushed:020d}{SUFFIX}"]
    with Brain.open(path) as brain:
        assert any(w["code"] == "recovered-after-crash" for w in brain.warnings)
        assert brain.head == head
        check_all(brain)
        assert brain.aggregate_follower.built_from == f"snapshot at {flushed}"
        deadline = time.monotonic() + 30
        while brain.flushed != head and time.monotonic() < deadline:  # the recovery flush, on its own thread
            time.sleep(0.02)
        assert brain.flushed == head
    assert [p.name for p in snapshots(path)] == [f"{head:020d}{SUFFIX}"]
    with Brain.open(path) as brain:
        check_all(brain)
        assert brain.aggregate_follower.built_from == f"snapshot at {head}"


@pytest.mark.slow
def test_a_writer_claimed_from_a_reader_catches_up_from_the_snapshot_with_the_reader_moves(tmp_path: Path) -> None:
    """The pool's claim: a reader attached after a crash replayed the tail; the writer opened from it reads only
    the log written since, and takes over the tail's aggregate moves with the rest, so its aggregates load
    from the snapshot, never from the rows."""
    path = new_store(tmp_path)
    flushed, head = crashed_writer(path)
    reader = Brain.attach(path)
    try:
        assert reader.head == head
        writer = Brain.open(path, reader=reader)
    finally:
        reader.close()
    with writer:
        assert writer.role == "writer" and writer.head == head
        check_all(writer)
        assert writer.aggregate_follower.built_from == f"snapshot at {flushed}"
        assert not [w for w in writer.warnings if w["code"] == "aggregates-rebuilt"]


@pytest.mark.parametrize("damage", ["flipped", "torn", "empty", "foreign"])
def test_a_damaged_or_torn_snapshot_is_refused_and_rebuilt(tmp_path: Path, damage: str) -> None:
    path = new_store(tmp_path)
    fill(path, 8)
    (snap,) = snapshots(path)
    data = bytearray(snap.read_bytes())
    if damage == "flipped":
        data[len(data) // 2] ^= 0x20
    elif damage == "torn":
        data = data[: len(data) - 9]
    elif damage == "empty":
        data = bytearray()
    else:
        data[:8] = b"brnyproj"
    snap.write_bytes(bytes(data))
    with Brain.open(path) as brain:
        check_all(brain)
        assert brain.aggregate_follower.built_from == "rows"
        assert [w for w in brain.warnings if w["code"] == "aggregates-rebuilt"]
        rng, live = random.Random(9), []
        for _ in range(10):
            _write(brain, rng, live)
        brain.flush()
    with Brain.open(path) as brain:  # the flush wrote a good one again
        check_all(brain)
        assert brain.aggregate_follower.built_from.startswith("snapshot at")


def test_a_snapshot_the_tail_cannot_reach_is_refused(tmp_path: Path) -> None:
    """An older snapshot put back after later flushes (its frames are in the tables now, not the tail the open
    replays) is refused: the state is rebuilt from the rows, never caught up from what is not there."""
    path = new_store(tmp_path)
    fill(path, 10, before=30)
    (old,) = snapshots(path)
    kept = old.read_bytes()
    rng, live = random.Random(11), []
    with Brain.open(path) as brain:
        for _ in range(30):
            _write(brain, rng, live)
    for snap in snapshots(path):
        snap.unlink()
    old.write_bytes(kept)
    with Brain.open(path) as brain:
        check_all(brain)
        assert brain.aggregate_follower.built_from == "rows"
        assert any("outside generations" in w["message"] for w in brain.warnings if w["code"] == "aggregates-rebuilt")


def test_a_store_without_a_snapshot_is_built_from_rows_and_its_first_flush_writes_one(tmp_path: Path) -> None:
    """Stores written before aggregate snapshots hold none: the rows answer, and the next flush writes one."""
    path = new_store(tmp_path)
    fill(path, 12)
    for snap in snapshots(path):
        snap.unlink()
    with Brain.open(path, flush_bytes=1 << 30) as brain:
        check_all(brain)
        assert brain.aggregate_follower.built_from == "rows"
        assert not [w for w in brain.warnings if w["code"] == "aggregates-rebuilt"]  # nothing was refused
        brain.add({"type": "product", "metadata": {"cat": "a", "price": 1}}, caller=CALLER)
        brain.flush()
        assert len(snapshots(path)) == 1
    with Brain.open(path) as brain:
        check_all(brain)
        assert brain.aggregate_follower.built_from.startswith("snapshot at")


def test_a_fresh_store_builds_its_state_from_the_moves_it_holds_and_reads_no_row(tmp_path: Path) -> None:
    """Nothing flushed yet: the moves the handle holds reach back to the empty store, so they make the state (no
    row is read for it), which answers as the oracle over the rows does, through the first flush and a reopen."""
    path = new_store(tmp_path)
    rng, live = random.Random(13), []
    with Brain.open(path, flush_bytes=1 << 30) as brain:
        assert brain.flushed == 0
        for _ in range(40):
            _write(brain, rng, live)
        _define_all(brain)
        for _ in range(40):
            _write(brain, rng, live)
        check_all(brain)
        assert brain.aggregate_follower.built_from == EMPTY_STORE
        assert brain.flush()
        for _ in range(20):
            _write(brain, rng, live)
        check_all(brain)
    with Brain.open(path) as brain:
        check_all(brain)
        assert brain.aggregate_follower.built_from == f"snapshot at {brain.head}"


@pytest.mark.slow
def test_a_store_killed_before_its_first_flush_builds_its_state_from_the_replayed_moves(tmp_path: Path) -> None:
    """A real writer commits and is SIGKILLed before anything is flushed: the reopen replays every frame since the
    empty store, and those moves alone make a state that answers as the oracle does."""
    path = new_store(tmp_path)
    flushed, head = crashed_writer(path, flushed=False)
    assert flushed == 0 and not snapshots(path)
    with Brain.open(path, flush_bytes=1 << 30) as brain:
        assert brain.head == head
        check_all(brain)
        assert brain.aggregate_follower.built_from == EMPTY_STORE


def test_the_widest_integers_and_exact_sums_round_trip(tmp_path: Path) -> None:
    """Group keys and extremes at both ends of the 64-bit range a row holds, and exact sums far wider than 64
    bits (kept in units of 2**-1074), answer the same after a reopen from the snapshot."""
    path = new_store(tmp_path)
    wide = {
        "name": "wide",
        "source": {"type": "product"},
        "groupBy": ["cat"],
        "metrics": {
            "lo": {"op": "min", "field": "price"},
            "hi": {"op": "max", "field": "price"},
            "total": {"op": "sum", "field": "price"},
            "sd": {"op": "stddev", "field": "price"},
        },
    }
    with Brain.open(path) as brain:
        brain.defineAggregate(wide, caller=CALLER)
        for cat, price in (
            (2**64 - 1, -(2**63)),
            (2**64 - 1, 5e-324),
            (2**64 - 1, 1e150),
            ("x", 1.0),
            ("x", 1),
            ("x", -0.0),
            (-(2**63), 2**64 - 1),
        ):
            brain.add({"type": "product", "metadata": {"cat": cat, "price": price}}, caller=CALLER)
        before = brain.aggregate({"name": "wide"})
    with Brain.open(path) as brain:
        after = brain.aggregate({"name": "wide"})
        assert brain.aggregate_follower.built_from.startswith("snapshot at")
    assert repr(after) == repr(before)
    assert DEFINITIONS  # the shared workload is the other tests' oracle


def test_min_and_max_read_from_a_snapshot_follow_every_move(tmp_path: Path) -> None:
    """After a reopen the counts stay packed: a new extreme moved in answers at once, removing a packed end
    answers the next one, and a flush with changes pending writes them merged; every step equals the oracle."""
    path = new_store(tmp_path)
    with Brain.open(path) as brain:
        _define_all(brain)
        ids = {
            p: brain.add({"type": "product", "metadata": {"cat": "a", "price": p}}, caller=CALLER)["id"]
            for p in (5, 1, 9, 1.5, 7)
        }
        twin = brain.add({"type": "product", "metadata": {"cat": "a", "price": 9}}, caller=CALLER)["id"]
    steps = [
        lambda b: b.add({"type": "product", "metadata": {"cat": "a", "price": 0.5}}, caller=CALLER),
        lambda b: b.add({"type": "product", "metadata": {"cat": "a", "price": 12}}, caller=CALLER),
        lambda b: b.remove({"id": ids[1]}, caller=CALLER),
        lambda b: b.remove({"id": ids[9]}, caller=CALLER),
        lambda b: b.update({"id": twin, "metadata": {"price": 2}}, caller=CALLER),
    ]
    for step in steps:  # each from a fresh reopen of the snapshot, so each meets packed counts
        with Brain.open(path, flush_bytes=1 << 30) as brain:
            check_all(brain)
            assert brain.aggregate_follower.built_from.startswith("snapshot at")
            step(brain)
            check_all(brain)
            brain.flush()
    with Brain.open(path) as brain:
        check_all(brain)
