"""The writer lease and the read-only attach, with real processes and real files
(docs/store-format.md, "The writer lease", "Read-only attach").

A child process (``tests/procs/writer.py hold``) holds the writer lease and obeys commands from its
stdin; the test process plays the second claimant, the attacher, or the operator who forces.
"""

from __future__ import annotations

import json
import os
import queue
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from brainy.contract import refusals as R
from brainy.engine import Brain, init_store
from brainy.store.files import read_document

WRITER = Path(__file__).parent / "procs" / "writer.py"
LOCK = Path("locks") / "_writer.lock"
CLOSE = Path("locks") / "_writer.close"
HANDOFF = Path("locks") / "_writer.handoff"


class Holder:
    """``writer.py hold``: a child that holds the writer lease and answers one line per command."""

    def __init__(self, store: Path, *flags: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(WRITER), "hold", str(store), *flags],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            bufsize=1,
        )
        self.pid = self.proc.pid
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.err: list[str] = []
        self._pumps = [
            threading.Thread(target=self._pump, daemon=True),
            threading.Thread(target=self._pump_err, daemon=True),
        ]
        for t in self._pumps:
            t.start()
        word, ready = self.read()
        assert word == "READY", f"holder did not start: {word} {ready}; stderr: {''.join(self.err)}"
        self.ready: dict[str, Any] = json.loads(ready)

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def _pump_err(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.err.append(line)

    def read(self, timeout: float = 20.0) -> tuple[str, str]:
        try:
            line = self.lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"the holder said nothing for {timeout} s; stderr: {''.join(self.err)}") from None
        if line is None:
            raise AssertionError(f"the holder's output ended; stderr: {''.join(self.err)}")
        word, _, rest = line.partition(" ")
        return word, rest

    def ask(self, command: str) -> tuple[str, str]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        return self.read()

    def add(self, key: str) -> int:
        word, rest = self.ask(f"add {key}")
        assert word == "ACK", f"the holder's add of {key} answered {word} {rest}"
        return int(rest.split()[1])

    def stop(self, kill: bool = False) -> None:
        """End the child (SIGKILL, or ``exit`` on stdin) and reap it and its pipes."""
        if self.proc.poll() is None:
            if kill:
                os.kill(self.pid, signal.SIGKILL)
            else:
                try:
                    assert self.proc.stdin is not None
                    self.proc.stdin.write("exit\n")
                    self.proc.stdin.flush()
                except BrokenPipeError:
                    pass
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.kill(self.pid, signal.SIGKILL)
            self.proc.wait(timeout=20)
        for t in self._pumps:
            t.join(timeout=20)
        for pipe in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if pipe is not None:
                try:
                    pipe.close()
                except BrokenPipeError:
                    pass


def within(seconds: float, fn, *args: Any) -> Any:
    """``fn(*args)`` run on a worker thread: its answer, or its exception re-raised; an
    AssertionError (not a hung test) if it has not returned within ``seconds``."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["answer"] = fn(*args)
        except BaseException as exc:  # handed to the caller
            box["error"] = exc

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(seconds)
    assert not worker.is_alive(), f"{getattr(fn, '__name__', fn)} waited more than {seconds} s"
    if "error" in box:
        raise box["error"]
    return box["answer"]


@pytest.fixture
def store(tmp_path: Path) -> Path:
    root = tmp_path / "brain"
    init_store(root)
    return root


@pytest.fixture
def holders():
    """Spawn holders with ``holders(store, *flags)``; every one still running is killed at the end."""
    spawned: list[Holder] = []

    def spawn(root: Path, *flags: str) -> Holder:
        holder = Holder(root, *flags)
        spawned.append(holder)
        return holder

    yield spawn
    for holder in spawned:
        holder.stop(kill=True)


def snapshot(root: Path) -> dict[str, tuple[Any, ...]]:
    """Every file and directory under ``root``: kind, size, inode, mtime and ctime."""
    st = os.lstat(root)
    found: dict[str, tuple[Any, ...]] = {".": (True, st.st_size, st.st_ino, st.st_mtime_ns, st.st_ctime_ns)}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            st = os.lstat(path)
            found[str(path.relative_to(root))] = (path.is_dir(), st.st_size, st.st_ino, st.st_mtime_ns, st.st_ctime_ns)
    return found


# -- (a) one writer: a second claimant is a reader, and never waits ----------------------------------


@pytest.mark.slow
def test_second_claimant_is_a_reader_naming_the_holder_and_writes_refuse_at_once(store, holders) -> None:
    """Law: while another live process holds the writer lease, ``Brain.open`` answers at once with a
    reader whose writer block is ``BRAINY_WRITER_LOCKED`` naming the holder (pid, hostname,
    startedAt); every write door on that handle refuses with ``BRAINY_WRITER_LOCKED`` without
    waiting, and writes nothing; reads answer the holder's durable commits."""
    holder = holders(store)
    generation = holder.add("k1")

    brain = within(5.0, Brain.open, store)
    try:
        assert brain.role == "reader"
        block = brain.claim.writer_block()
        assert block == {
            "role": "reader",
            "refused": "BRAINY_WRITER_LOCKED",
            "holder": {
                "pid": holder.pid,
                "hostname": socket.gethostname(),
                "startedAt": holder.ready["block"]["startedAt"],
            },
        }
        assert brain.writer_block() == block
        assert any(w["code"] == "opened-read-only" for w in brain.warnings)
        assert brain.get("k1")["entity"]["key"] == "k1" and brain.head == generation

        for door, args in [
            ("add", {"type": "thing", "id": "k2"}),
            ("transact", {"ops": [{"door": "add", "args": {"type": "thing", "id": "k3"}}]}),
            ("relate", {"from": "k1", "to": "k1", "type": "relatedTo"}),
            ("remove", {"id": "k1"}),
        ]:
            with pytest.raises(R.BRAINY_WRITER_LOCKED) as refused:
                within(2.0, brain.write, door, args)
            assert refused.value.name == "BRAINY_WRITER_LOCKED"
            assert refused.value.to_wire()["holder"]["pid"] == holder.pid
    finally:
        brain.close()

    assert holder.add("k4") == generation + 1, "the reader's refused writes took a generation"
    holder.stop()
    after = Brain.attach(store)
    try:
        assert after.head == generation + 1
        assert [after.get(k)["entity"] is not None for k in ("k1", "k2", "k3", "k4")] == [True, False, False, True]
    finally:
        after.close()


# -- (b) an attach is frozen at its generation ------------------------------------------------------


@pytest.mark.slow
def test_attach_sees_nothing_committed_after_its_generation(store, holders) -> None:
    """Law: a read-only attach stays at the generation it resolved for its whole life: commits the
    writer makes afterwards (and the flushes and compaction that rewrite the tables under it) are
    invisible to it, while what it saw keeps reading the same; a new attach sees the new commits."""
    holder = holders(store)
    holder.add("k1")
    assert holder.ask("flush") == ("FLUSHED", "True")  # k1 now lives in a table
    seen = holder.add("k1b")  # k1b only in the log

    brain = Brain.attach(store)
    try:
        assert brain.head == seen
        before = brain.counts()
        assert before["entities"] == 2
        k1 = brain.get("k1")["entity"]

        g2 = holder.add("k2")
        assert holder.ask("flush") == ("FLUSHED", "True")
        holder.add("k3")
        assert holder.ask("flush") == ("FLUSHED", "True")
        assert holder.ask("compact") == ("COMPACTED", "True")  # the table k1 was read from is deleted
        assert g2 > seen

        assert brain.get("k2") == {"entity": None, "generation": seen}
        assert brain.get("k3")["entity"] is None
        assert brain.batchGet({"ids": ["k1", "k1b", "k2", "k3"]})["missing"] == ["k2", "k3"]
        assert brain.head == seen
        assert brain.get("k1")["entity"] == k1
        assert brain.get("k1b")["entity"]["generation"] == seen
        assert brain.counts() == before
        with pytest.raises(R.GenerationAheadError):
            brain.generation(g2)
    finally:
        brain.close()

    fresh = Brain.attach(store)
    try:
        assert fresh.head == g2 + 1
        assert fresh.get("k2")["entity"]["generation"] == g2
        assert fresh.counts()["entities"] == 4
    finally:
        fresh.close()


# -- (c) an attach writes nothing --------------------------------------------------------------------


def _filled_store(root: Path, holders) -> int:
    """A store with tables, a log tail past the MANIFEST and a torn frame at its end, left by a
    holder that exited without closing."""
    holder = holders(root)
    for i in range(5):
        holder.add(f"t{i}")
    assert holder.ask("flush") == ("FLUSHED", "True")
    for i in range(5, 8):
        holder.add(f"t{i}")
    word, rest = holder.ask("relate t0 t1")
    assert word == "ACK"
    head = int(rest.split()[1])
    holder.stop()  # exits without close: the last commits stay in the log only
    last = sorted((root / "log").iterdir())[-1]
    with open(last, "ab") as f:  # a frame that never landed: a header promising 100 bytes, 10 present
        f.write((100).to_bytes(4, "little") + b"\0\0\0\1" + b"x" * 10)
    return head


def _read_everything(brain: Brain, head: int) -> None:
    assert brain.head == head
    assert brain.get("t0")["entity"]["key"] == "t0"
    assert brain.get("t7")["entity"]["key"] == "t7"
    assert brain.get("nope")["entity"] is None
    assert brain.batchGet({"ids": [f"t{i}" for i in range(9)]})["missing"] == ["t8"]
    assert brain.counts()["entities"] == 8 and brain.counts()["relationships"] == 1
    for g in range(head + 1):
        brain.generation(g)
    assert any(w["code"] == "torn-tail" for w in brain.warnings)


@pytest.mark.slow
def test_attach_creates_changes_and_removes_nothing(store, holders) -> None:
    """Law: an attach and its reads take no lock and write nothing: every file and directory of the
    store (locks/ included) keeps its name, size, inode, mtime and ctime, a torn log tail is read
    around but not cut; on a store whose locks/ directory is gone the attach still serves, and does
    not create it."""
    head = _filled_store(store, holders)
    assert (store / LOCK).exists() and not (store / CLOSE).exists()  # a lease file whose holder is gone
    before = snapshot(store)
    time.sleep(0.02)  # so that any write would show in mtime even on a coarse clock

    brain = Brain.attach(store)
    try:
        _read_everything(brain, head)
    finally:
        brain.close()
    assert snapshot(store) == before

    shutil.rmtree(store / "locks")
    before = snapshot(store)
    brain = Brain.attach(store)
    try:
        _read_everything(brain, head)
    finally:
        brain.close()
    assert not (store / "locks").exists()
    assert snapshot(store) == before


@pytest.mark.slow
def test_attach_beside_a_live_writer_touches_no_lock(store, holders) -> None:
    """Law: an attach beside a live writer neither takes nor touches the lease: the lease file and the
    rest of locks/ are byte-for-byte and inode-for-inode what the holder left, and the holder's
    commits go on (its fence still holds)."""
    holder = holders(store)
    holder.add("k1")
    locks = store / "locks"
    before = {p.name: (p.read_bytes(), os.stat(p).st_ino, os.stat(p).st_mtime_ns) for p in locks.iterdir()}
    brain = Brain.attach(store)
    try:
        assert brain.role == "attach" and brain.get("k1")["entity"] is not None
        assert brain.writer_block() == {"role": "reader"}
    finally:
        brain.close()
    after = {p.name: (p.read_bytes(), os.stat(p).st_ino, os.stat(p).st_mtime_ns) for p in locks.iterdir()}
    assert after == before
    holder.add("k2")


# -- (d) the four claim paths --------------------------------------------------------------------------


def test_claim_fresh_on_a_new_store(store) -> None:
    """Law: the first claim of a new store (no lease file) is ``fresh`` and replays nothing."""
    assert not (store / LOCK).exists()
    brain = Brain.open(store)
    try:
        block = brain.writer_block()
        assert block["role"] == "writer" and block["claimPath"] == "fresh"
        assert block["pid"] == os.getpid() and block["hostname"] == socket.gethostname()
        assert brain.recovery == {"replayedGenerations": 0}
        assert brain.warnings == []
    finally:
        brain.close()


def test_claim_leftover_after_clean_close(store) -> None:
    """Law: a lease file whose fence equals the clean-close record's (the holder wrote its close
    record, then died before removing the lease file) is claimed ``leftover-after-clean-close``:
    not a crash, so no recovery warning; the claim consumes the close record."""
    brain = Brain.open(store)
    brain.add({"type": "thing", "id": "k1"})
    saved = (store / LOCK).read_bytes()
    answer = brain.close()
    assert answer["cleanCloseRecorded"] and answer["leaseReleased"]
    assert not (store / LOCK).exists()
    close = json.loads((store / CLOSE).read_bytes())
    assert close["fence"] == json.loads(saved)["fence"] and close["generation"] == 1
    (store / LOCK).write_bytes(saved)  # the lease file the holder never got to remove

    brain = Brain.open(store)
    try:
        assert brain.writer_block()["claimPath"] == "leftover-after-clean-close"
        assert not any(w["code"] == "recovered-after-crash" for w in brain.warnings)
        assert not (store / CLOSE).exists()
        assert json.loads((store / LOCK).read_bytes())["fence"] != close["fence"]
        assert brain.get("k1")["entity"] is not None
    finally:
        brain.close()

    brain = Brain.open(store)  # a clean close removes the lease file: the next claim is fresh
    try:
        assert brain.writer_block()["claimPath"] == "fresh"
    finally:
        brain.close()


@pytest.mark.slow
def test_claim_stale_after_crash_replays_the_log(store, holders) -> None:
    """Law: a lease file left by a holder killed with SIGKILL (no close record) is claimed
    ``stale-after-crash``; the claim replays every commit past the MANIFEST and says so."""
    holder = holders(store)
    for i in range(3):
        holder.add(f"k{i}")
    holder.stop(kill=True)
    assert holder.proc.returncode == -signal.SIGKILL
    assert json.loads((store / LOCK).read_bytes())["pid"] == holder.pid
    assert not (store / CLOSE).exists()

    brain = Brain.open(store)
    try:
        block = brain.writer_block()
        assert block["role"] == "writer" and block["claimPath"] == "stale-after-crash"
        assert brain.recovery == {"replayedGenerations": 3}
        assert any(w["code"] == "recovered-after-crash" for w in brain.warnings)
        assert brain.head == 3 and all(brain.get(f"k{i}")["entity"] is not None for i in range(3))
        assert json.loads((store / LOCK).read_bytes())["pid"] == os.getpid()
    finally:
        brain.close()


@pytest.mark.slow
def test_claim_forced_breaks_the_live_holders_fence(store, holders) -> None:
    """Law: ``Brain.open(force=True)`` takes the lease from a live holder (``forced``: a new lease
    file renamed over the live one); the old holder's next commit refuses with
    ``WriterFenceLostError`` and writes nothing, and its close neither records a clean close nor
    removes the new holder's lease file."""
    holder = holders(store)
    g1 = holder.add("k1")

    brain = Brain.open(store, force=True)
    try:
        block = brain.writer_block()
        assert block["role"] == "writer" and block["claimPath"] == "forced" and block["pid"] == os.getpid()
        record = json.loads((store / LOCK).read_bytes())
        assert record["pid"] == os.getpid() and not (store / HANDOFF).exists()
        assert brain.get("k1")["entity"] is not None and brain.head == g1

        assert holder.ask("add k-old") == ("REFUSED", "WriterFenceLostError -")
        assert holder.ask("add k-old2") == ("REFUSED", "WriterFenceLostError -")
        word, rest = holder.ask("close")
        assert word == "CLOSED" and json.loads(rest)["cleanCloseRecorded"] is False
        holder.stop()

        assert json.loads((store / LOCK).read_bytes()) == record
        assert not (store / CLOSE).exists()
        assert brain.add({"type": "thing", "id": "k2"})["generation"] == g1 + 1
        assert brain.get("k-old")["entity"] is None
    finally:
        brain.close()

    after = Brain.open(store)
    try:
        assert after.writer_block()["claimPath"] == "fresh"
        assert after.head == g1 + 1
        assert after.get("k-old")["entity"] is None and after.get("k-old2")["entity"] is None
        assert after.get("k2")["entity"] is not None
    finally:
        after.close()


# -- (e) the lease file --------------------------------------------------------------------------------


@pytest.mark.slow
def test_lease_file_is_512_bytes_of_json_naming_the_holder(store, holders) -> None:
    """Law: while held, ``locks/_writer.lock`` is exactly 512 bytes: a JSON object padded with spaces,
    with the holder's pid and hostname, startedAt, heartbeat, a 32-hex-digit fence new at every
    claim, and the store's id."""
    fences = []
    for _ in range(2):
        before = time.time_ns() // 1_000_000
        holder = holders(store)
        raw = (store / LOCK).read_bytes()
        assert len(raw) == 512
        text = raw.rstrip(b" ")
        assert raw[len(text) :] == b" " * (512 - len(text))
        record = json.loads(text)
        assert isinstance(record, dict)
        assert {"pid", "hostname", "startedAt", "heartbeat", "fence", "storeId"} <= set(record)
        assert record["pid"] == holder.pid
        assert record["hostname"] == socket.gethostname()
        assert before <= record["startedAt"] <= record["heartbeat"] <= time.time_ns() // 1_000_000
        assert record["startedAt"] == holder.ready["block"]["startedAt"]
        assert re.fullmatch(r"[0-9a-f]{32}", record["fence"])
        assert record["storeId"] == read_document(store / "IDENTITY")["storeId"]
        fences.append(record["fence"])
        word, rest = holder.ask("close")
        assert word == "CLOSED" and json.loads(rest)["cleanCloseRecorded"] is True
        holder.stop()
    assert fences[0] != fences[1]


@pytest.mark.slow
def test_lease_heartbeat_is_refreshed_while_held(store, holders) -> None:
    """Law: the holder refreshes the lease record's heartbeat every 5 s, in place (same file), leaving
    the rest of the record as it was."""
    holder = holders(store)
    first = json.loads((store / LOCK).read_bytes())
    inode = os.stat(store / LOCK).st_ino
    deadline = time.monotonic() + 8.0
    while True:
        now = json.loads((store / LOCK).read_bytes())
        if now["heartbeat"] > first["heartbeat"]:
            break
        assert time.monotonic() < deadline, "the heartbeat was not refreshed within 8 s"
        time.sleep(0.1)
    assert now["heartbeat"] - first["startedAt"] >= 4_500
    assert {k: v for k, v in now.items() if k != "heartbeat"} == {k: v for k, v in first.items() if k != "heartbeat"}
    assert len((store / LOCK).read_bytes()) == 512 and os.stat(store / LOCK).st_ino == inode
    holder.add("k1")


@pytest.mark.slow
def test_every_lease_a_process_holds_is_beaten_on_one_thread(tmp_path) -> None:
    """Law: a process holding many leases (a server keeps the lease of every brain it wrote to, evicted or not)
    refreshes each one's heartbeat every 5 s on one thread, not a thread a lease; a lease released or abandoned
    is beaten no more."""
    from brainy.store import lease as L

    held = []
    for i in range(20):
        claim, lease = L.claim(tmp_path / f"s{i}", f"store-{i}")
        assert claim.role == "writer" and lease is not None
        held.append(lease)
    assert [t.name for t in threading.enumerate()].count("brainy-lease-heartbeat") == 1
    started = [lease.record["heartbeat"] for lease in held]
    deadline = time.monotonic() + 8.0
    while True:
        now = [json.loads(lease.path.read_bytes())["heartbeat"] for lease in held]
        if all(n > s for n, s in zip(now, started)):
            break
        assert time.monotonic() < deadline, "not every heartbeat was refreshed within 8 s"
        time.sleep(0.1)
    assert all(n - s >= 4_500 for n, s in zip(now, started))
    assert held[0].release(0) and not held[0].beat()
    held[1].abandon()
    assert not held[1].beat()
    for lease in held[2:]:
        assert lease.release(0)


# -- (f) a handoff in flight ---------------------------------------------------------------------------


def test_attach_refuses_while_a_writer_handoff_is_in_flight(store) -> None:
    """Law: while ``locks/_writer.handoff`` exists, an attach refuses with ``StoreUnservableError``
    reason ``writer-handoff-in-flight`` (it never reads a lease changing hands); the next writer
    claim settles it (removes the file), and attach serves again."""
    brain = Brain.open(store)
    brain.add({"type": "thing", "id": "k1"})
    brain.close()
    (store / HANDOFF).touch()  # as a claimant killed between creating and removing it leaves it

    with pytest.raises(R.StoreUnservableError) as refused:
        Brain.attach(store)
    assert refused.value.reason == "writer-handoff-in-flight"
    assert refused.value.to_wire()["name"] == "StoreUnservableError"
    assert (store / HANDOFF).exists()

    brain = Brain.open(store)
    try:
        assert brain.role == "writer" and not (store / HANDOFF).exists()
    finally:
        brain.close()
    attached = Brain.attach(store)
    try:
        assert attached.get("k1")["entity"] is not None
    finally:
        attached.close()
