"""The crash law, with real processes and real files: a crash never loses an acknowledged write and
never leaves part of an unacknowledged commit (docs/store-format.md, "The fact log", "Why this
design").

A writer process (``tests/procs/writer.py crash``) commits transactions of 1-8 entities (some with
relations) on a store tuned so that flushes, compactions and log segment rotations all happen
while it runs; the test kills it with SIGKILL at a random moment, reopens the store and checks
every acknowledgement it printed against what the store answers. Rounds accumulate on one store.

The run's seed is printed in every assertion message; rerun a failure with
``BRAINY_CRASH_SEED=<seed> pytest tests/test_crash.py``.
"""

from __future__ import annotations

import os
import queue
import random
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from brainy.contract import refusals as R
from brainy.engine import Brain, init_store
from brainy.store.files import read_document

WRITER = Path(__file__).parent / "procs" / "writer.py"
SEED = int(os.environ.get("BRAINY_CRASH_SEED") or random.SystemRandom().randrange(1 << 32))

FLUSH_BYTES = 16 << 10
COMPACT_AT = 3
SEGMENT_BYTES = 64 << 10
TUNING = dict(flush_bytes=FLUSH_BYTES, compact_at=COMPACT_AT, segment_bytes=SEGMENT_BYTES)
MAX_K = 8


class Child:
    """A spawned ``writer.py``: its stdout lines arrive on a queue as it prints them."""

    def __init__(self, *args: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(WRITER), *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            bufsize=1,
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.seen: list[str] = []
        self.err: list[str] = []
        self._pumps = [
            threading.Thread(target=self._pump, daemon=True),
            threading.Thread(target=self._pump_err, daemon=True),
        ]
        for t in self._pumps:
            t.start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            line = line.rstrip("\n")
            self.seen.append(line)
            self.lines.put(line)
        self.lines.put(None)

    def _pump_err(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.err.append(line)

    def expect(self, prefix: str, timeout: float = 20.0) -> str | None:
        """The first line starting with ``prefix``; None if the child's output ended first."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"no {prefix!r} line within {timeout} s; stderr: {''.join(self.err)}")
            try:
                line = self.lines.get(timeout=left)
            except queue.Empty:
                continue
            if line is None:
                return None
            if line.startswith(prefix):
                return line

    def kill(self) -> list[str]:
        """SIGKILL the child, reap it, and answer every line it printed."""
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=20)
        for t in self._pumps:
            t.join(timeout=20)
        for pipe in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if pipe is not None:
                try:
                    pipe.close()
                except BrokenPipeError:
                    pass
        return list(self.seen)


@dataclass
class Model:
    """Everything the writers ever printed, across rounds."""

    tried: dict[int, tuple[int, int]] = field(default_factory=dict)  # seq -> (K, R)
    acked: dict[int, int] = field(default_factory=dict)  # seq -> generation
    next_seq: int = 1
    checked_head: int = 0  # generation records checked


def absorb(model: Model, lines: list[str], ctx: str) -> dict[str, object]:
    """Fold one round's output into the model; answers what the round printed besides."""
    seen: dict[str, object] = {"ready": None, "closing": False, "closed": False, "acks": 0}
    last_try: int | None = None
    for line in lines:
        word, _, rest = line.partition(" ")
        parts = rest.split()
        if word == "READY":
            seen["ready"] = parts[0]
        elif word == "TRY":
            seq, k, r = map(int, parts)
            assert seq == model.next_seq, f"{ctx}: writer tried seq {seq}, expected {model.next_seq}"
            assert 1 <= k <= MAX_K and 0 <= r < k, f"{ctx}: {line}"
            model.tried[seq] = (k, r)
            model.next_seq = seq + 1
            last_try = seq
        elif word == "ACK":
            seq, k, gen = map(int, parts)
            assert seq == last_try and model.tried[seq][0] == k, f"{ctx}: ACK without its TRY: {line}"
            model.acked[seq] = gen
            seen["acks"] = int(seen["acks"]) + 1  # type: ignore[call-overload]
        elif word == "CLOSING":
            seen["closing"] = True
        elif word == "CLOSED":
            seen["closed"] = True
        else:
            raise AssertionError(f"{ctx}: the writer printed {line!r}")
    return seen


def verify(brain: Brain, model: Model, ctx: str, every_generation: bool = False) -> int:
    """Check the store against the model; answers the number of entities present."""
    keys = [f"c{seq}-{j}" for seq, (k, _) in sorted(model.tried.items()) for j in range(k)]
    keys += [f"c{model.next_seq}-{j}" for j in range(MAX_K)]  # never tried: must be absent
    found: dict[str, dict | None] = {}
    for i in range(0, len(keys), 1000):
        chunk = keys[i : i + 1000]
        answer = brain.batchGet({"ids": chunk, "includeData": False})
        found.update(zip(chunk, answer["entities"]))
    for j in range(MAX_K):
        assert found[f"c{model.next_seq}-{j}"] is None, f"{ctx}: an entity of a seq never tried is present"

    present: list[int] = []
    entities = relations = 0
    for seq, (k, r) in sorted(model.tried.items()):
        rows = [found[f"c{seq}-{j}"] for j in range(k)]
        here = [row for row in rows if row is not None]
        assert len(here) in (0, k), (
            f"{ctx}: seq {seq} is partial: {len(here)} of its {k} entities are present (acked: {seq in model.acked})"
        )
        if seq in model.acked:
            assert len(here) == k, f"{ctx}: acknowledged seq {seq} (generation {model.acked[seq]}) was lost"
        if not here:
            continue
        present.append(seq)
        generation = len(present)  # every generation is one of the writers' commits, in seq order
        for j, row in enumerate(rows):
            assert row is not None
            assert row["key"] == f"c{seq}-{j}" and row["type"] == "thing", f"{ctx}: {row}"
            assert row["metadata"] == {"seq": seq, "j": j, "of": k}, f"{ctx}: c{seq}-{j}: {row['metadata']}"
            assert row["generation"] == generation, (
                f"{ctx}: c{seq}-{j} is at generation {row['generation']}, expected {generation}"
            )
        if seq in model.acked:
            assert model.acked[seq] == generation, (
                f"{ctx}: seq {seq} was acknowledged at generation {model.acked[seq]} but reads at {generation}"
            )
        entities += k
        relations += r

    head = brain.head
    assert head >= len(model.acked), f"{ctx}: head {head} < {len(model.acked)} acknowledged commits"
    assert head == len(present), f"{ctx}: head {head}, but {len(present)} commits are present"
    counts = brain.counts()
    assert counts["entities"] == entities == counts["entitiesAllTiers"], (
        f"{ctx}: counts say {counts['entities']} entities, {entities} are present"
    )
    assert counts["relationships"] == relations, (
        f"{ctx}: counts say {counts['relationships']} relations, the present commits made {relations}"
    )
    assert counts["byType"] == ({"thing": entities} if entities else {}), f"{ctx}: {counts['byType']}"
    assert counts["byRelationType"] == ({"relatedTo": relations} if relations else {}), f"{ctx}"

    first = 1 if every_generation else model.checked_head + 1
    for g in range(first, head + 1):
        k, r = model.tried[present[g - 1]]
        record = brain.generation(g)
        assert (record["entities"], record["relations"], record["ops"]) == (k, r, k + r), (
            f"{ctx}: generation {g} records {record}, expected seq {present[g - 1]} ({k} entities, {r} relations)"
        )
    with pytest.raises(R.GenerationAheadError):
        brain.generation(head + 1)
    model.checked_head = head
    return entities


def crash_round(store: Path, model: Model, rng: random.Random, mode: str, ctx: str) -> dict[str, object]:
    """Spawn a writer, kill it at a random moment of phase ``mode``, reopen and verify the store."""
    args = [
        "crash",
        str(store),
        "--seed",
        str(rng.randrange(1 << 32)),
        "--first-seq",
        str(model.next_seq),
        "--flush-bytes",
        str(FLUSH_BYTES),
        "--compact-at",
        str(COMPACT_AT),
        "--segment-bytes",
        str(SEGMENT_BYTES),
    ]
    if mode == "close":
        args += ["--close-after", str(rng.randint(1, 120))]
    child = Child(*args)
    try:
        if mode == "run":  # mid-run: commits, flushes, compactions and rotations in flight
            assert child.expect("READY") is not None, f"{ctx}: writer died: {''.join(child.err)}"
            time.sleep(rng.uniform(0.05, 0.4))
        elif mode == "close":  # somewhere inside close(): flush, close record, lease removal
            assert child.expect("CLOSING") is not None, f"{ctx}: writer died: {''.join(child.err)}"
            time.sleep(rng.uniform(0.0, 0.015))
        else:  # right after start: before, during or just after the claim and the first commits
            time.sleep(rng.uniform(0.0, 0.25))
    finally:
        lines = child.kill()
    assert child.proc.returncode == -signal.SIGKILL, f"{ctx}: writer exited {child.proc.returncode}: {child.err}"
    seen = absorb(model, lines, ctx)
    if seen["ready"] is not None:
        assert seen["ready"] == "fresh", f"{ctx}: the writer claimed by {seen['ready']}, after a clean close"

    flushed = int(read_document(store / "MANIFEST")["generation"])
    attached = None
    try:
        attached = Brain.attach(store)
    except R.StoreUnservableError as exc:  # a claim killed between creating and removing the handoff
        assert mode == "start" and exc.reason == "writer-handoff-in-flight", f"{ctx}: {exc.to_wire()}"
    brain = Brain.open(store, **TUNING)
    try:
        assert brain.role == "writer", f"{ctx}: {brain.writer_block()}"
        claim = brain.writer_block()["claimPath"]
        if mode == "run":
            assert claim == "stale-after-crash", f"{ctx}: reopened by {claim}"
            assert any(w["code"] == "recovered-after-crash" for w in brain.warnings), f"{ctx}: {brain.warnings}"
        elif mode == "close":
            allowed = {"fresh"} if seen["closed"] else {"stale-after-crash", "leftover-after-clean-close", "fresh"}
            assert claim in allowed, f"{ctx}: reopened by {claim} (close finished: {seen['closed']})"
        else:
            allowed = {"stale-after-crash"} if seen["ready"] else {"stale-after-crash", "fresh"}
            assert claim in allowed, f"{ctx}: reopened by {claim} (writer ready: {seen['ready']})"
        assert brain.recovery == {"replayedGenerations": brain.head - flushed}, (
            f"{ctx}: recovery {brain.recovery}, MANIFEST at {flushed}, head {brain.head}"
        )
        entities = verify(brain, model, ctx)
        if attached is not None:  # a read-only attach of the crashed store answers the same
            assert attached.head == brain.head, f"{ctx}: attach at {attached.head}, reopen at {brain.head}"
            assert attached.counts()["entities"] == entities, f"{ctx}"
    finally:
        if attached is not None:
            attached.close()
        answer = brain.close()
    assert answer["cleanCloseRecorded"], f"{ctx}: {answer}"
    seen["claim"] = claim
    return seen


def run_rounds(tmp_path: Path, modes: list[str], seed: int) -> Model:
    store = tmp_path / "brain"
    init_store(store)
    rng = random.Random(seed)
    model = Model()
    print(f"BRAINY_CRASH_SEED={SEED}")  # shown with a failure's captured output
    for i, mode in enumerate(modes):
        ctx = f"seed={SEED} round={i} mode={mode}"
        try:
            crash_round(store, model, rng, mode, ctx)
        except AssertionError:
            raise
        except Exception as exc:  # a refusal or error from the engine: name the seed that found it
            raise AssertionError(f"{ctx}: {exc!r}") from exc
    brain = Brain.attach(store)
    try:
        verify(brain, model, f"seed={SEED} final", every_generation=True)
    finally:
        brain.close()
    return model


@pytest.mark.slow
def test_sigkill_mid_run_loses_no_acknowledged_write_and_leaves_no_partial_commit(tmp_path: Path) -> None:
    """Law: across 50 SIGKILLs of a writer in the middle of committing (flushes, compactions and
    log rotations in flight), every acknowledged transaction is wholly present after the reopen,
    no transaction is partly present, the head counts exactly the commits present (so at least the
    acknowledged ones), the counts ledger equals the rows present, and each reopen reports
    ``stale-after-crash`` having replayed exactly the log past the MANIFEST."""
    model = run_rounds(tmp_path, ["run"] * 50, SEED)
    ctx = f"seed={SEED}"
    assert len(model.acked) >= 50, f"{ctx}: only {len(model.acked)} commits were acknowledged in 50 rounds"
    assert len(os.listdir(tmp_path / "brain" / "log")) > 1, f"{ctx}: the log never rotated"


@pytest.mark.slow
def test_sigkill_at_start_or_during_close_keeps_the_crash_law(tmp_path: Path) -> None:
    """Law: a SIGKILL right after the writer starts (before, inside or just after its claim) or
    anywhere inside ``close()`` loses no acknowledged write and leaves no partial commit; the
    reopen names how the last writer went (a finished close leaves a fresh claim)."""
    rng = random.Random(SEED ^ 0x5EED)
    modes = [rng.choice(["start", "close"]) for _ in range(16)]
    run_rounds(tmp_path, modes, SEED ^ 0xC105E)
