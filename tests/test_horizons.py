"""The horizons that bound a store's disk (docs/store-format.md, "Horizons"): the history horizon drops the
versions only older generations read, at compaction, and every read below it refuses by name; the feed
retention deletes sealed log segments whose commits are all in the tables, and the change feed refuses a
``since`` before them by name. Neither ever changes what a read at or above it answers."""

from __future__ import annotations

import base64
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from server import H1Client, start_server

from brainy.contract import refusals as R
from brainy.doors import mechanics
from brainy.doors.feed import LogTail
from brainy.engine import Brain, init_store
from brainy.host.pool import Pool
from brainy.store import horizons as H
from brainy.store import log as log_
from brainy.store.files import read_document

PROCS = Path(__file__).parent / "procs"


def _writer(store: Path, **horizons: str) -> Brain:
    return Brain.open(store, segment_bytes=2048, compact_at=1000, horizons=H.Horizons.of(**horizons))


def _commits(brain: Brain, n: int, start: int = 0) -> None:
    for i in range(start, start + n):
        brain.add({"type": "document", "id": f"k{i % 7}", "upsert": True, "data": f"row {i}", "metadata": {"i": i}})
        if i % 5 == 4:
            brain.remove({"id": f"k{(i + 3) % 7}"})


def _seen(brain: Brain, generation: int) -> Any:
    """What a read at ``generation`` answers: every row as it stood, and the commit's record."""
    at = brain.asOf({"generation": generation, "read": {"door": "export", "args": {"limit": 1000}}})
    rows = sorted((e["id"], e["metadata"]["i"]) for e in at["result"]["entities"])
    return rows, brain.generation(generation) if generation else None


def test_spans_read_as_written_and_anything_else_refuses_by_name() -> None:
    assert H.parse("30s", "x", sizes=False).ms == 30_000
    assert H.parse("7d", "x", sizes=True).ms == 7 * 86_400_000
    assert H.parse("2GiB", "x", sizes=True).bytes == 2 << 30
    for bad in ("", "7", "7 days", "-1d", "1.5h", "2GB"):
        with pytest.raises(R.InvalidArgumentError):
            H.parse(bad, "feedRetention", sizes=True)
    with pytest.raises(R.InvalidArgumentError, match="history"):
        H.parse("2GiB", "history", sizes=False)  # a history is a duration
    with pytest.raises(R.InvalidArgumentError, match="feedRetention"):
        Pool({}, horizons=("soon", None))  # the start refuses, before anything opens


def test_the_history_horizon_keeps_every_read_at_or_above_it_and_refuses_below(tmp_path: Path) -> None:
    """Law: after a compaction under the horizon, every generation from ``historyFrom`` on reads exactly as it
    did before; every one below refuses GenerationCompactedError naming ``historyFrom``; and the versions only
    those read are gone from the tables."""
    store = tmp_path / "s"
    init_store(store)
    with _writer(store, history="1s") as brain:
        _commits(brain, 40)
        brain.flush()
        old_head = brain.head
        time.sleep(1.2)  # the first 40 commits pass the horizon
        _commits(brain, 20, start=40)
        brain.flush()
        head = brain.head
        before = {g: _seen(brain, g) for g in range(head + 1)}
        history_before = brain.history("k3", limit=1000)["versions"]
        entries = sum(t["entries"] for t in brain.manifest["tables"])
        assert brain.compact()
        floor = brain.manifest["historyFrom"]
        assert floor == old_head and brain.now()["oldestRetained"] == floor
        assert sum(t["entries"] for t in brain.manifest["tables"]) < entries
        assert brain.maintenance.dropped > 0
        for g in range(floor, head + 1):
            assert _seen(brain, g) == before[g], g
        for g in range(floor):
            with pytest.raises(R.GenerationCompactedError) as refused:
                brain.asOf({"generation": g})
            assert refused.value.fields == {"generation": g, "oldestRetained": floor}
            with pytest.raises(R.GenerationCompactedError):
                brain.generation(g)
        with pytest.raises(R.GenerationCompactedError):
            brain.diff({"from": floor - 1})
        assert brain.diff({"from": floor, "limit": 1000})["changes"]
        with pytest.raises(R.GenerationCompactedError):  # an instant before the horizon
            brain.asOf({"at": brain.generation(floor)["timestamp"] - 1})
        assert brain.asOf({"at": brain.generation(floor)["timestamp"]})["generation"] >= floor
        history = brain.history("k3", limit=1000)
        assert history["truncatedAt"] == floor
        assert history["versions"] == [v for v in history_before if v["generation"] >= floor]
        with pytest.raises(R.GenerationCompactedError):
            brain.changes({"since": floor - 2})
    with Brain.open(store) as brain:  # the horizon is the store's, read back from its MANIFEST
        assert brain.now()["oldestRetained"] == floor
        assert _seen(brain, head) == before[head]


def test_a_removed_row_leaves_no_tombstone_once_the_oldest_table_is_merged(tmp_path: Path) -> None:
    store = tmp_path / "s"
    init_store(store)
    with _writer(store, history="1s") as brain:
        brain.add({"type": "document", "id": "gone", "data": "x"})
        brain.flush()
        brain.remove({"id": "gone"})
        brain.add({"type": "document", "id": "kept", "data": "y"})
        brain.flush()
        time.sleep(1.2)
        brain.add({"type": "document", "id": "later", "data": "z"})
        brain.flush()
        assert brain.compact()
        keys = [key for table in brain.sources.tables for key, _, _ in table.scan(b"e", b"f")]
        assert len(keys) == 2  # "kept" and "later", one version each: neither "gone" nor its tombstone
        assert brain.get("gone")["entity"] is None and brain.get("kept")["entity"] is not None


def test_the_feed_retention_deletes_sealed_segments_the_tables_hold_and_the_feed_refuses_before_them(
    tmp_path: Path,
) -> None:
    """Law: the trim deletes only sealed segments whose commits are all flushed, the MANIFEST naming the new
    ``logFrom`` first; ``changes`` from ``logFrom - 1`` answers as before, an older ``since`` refuses
    GenerationCompactedError naming that oldest ``since``; ``diff`` across the deleted frames compares the
    states; verify, a reopen and a reader attach all stand on the shorter log."""
    store = tmp_path / "s"
    init_store(store)
    with _writer(store, feed_retention="4KiB") as brain:
        _commits(brain, 120)
        before = brain.changes({"since": 0, "limit": 100_000})["frames"]
        diff_before = brain.diff({"from": 3, "limit": 1000})
        unflushed = brain.maintenance.trim_log()
        assert unflushed == 0  # nothing is in the tables yet: every segment is still the replay's
        brain.flush()
        segments = log_.segments(store / "log")
        assert brain.maintenance.trim_log() > 0
        left = log_.segments(store / "log")
        floor = read_document(store / "MANIFEST")["logFrom"]
        assert left[0][0] == floor and len(left) < len(segments)
        assert sum(p.stat().st_size for _, p in left[:-1]) >= 4096  # the size kept
        oldest = floor - 1
        assert brain.changes({"since": oldest, "limit": 100_000})["frames"] == [
            f for f in before if f["generation"] > oldest
        ]
        with pytest.raises(R.GenerationCompactedError) as refused:
            brain.changes({"since": oldest - 1})
        assert refused.value.fields == {"generation": oldest - 1, "oldestRetained": oldest}
        assert brain.diff({"from": 3, "limit": 1000})["changes"] == diff_before["changes"]
        assert brain.verify()["logGeneration"] == brain.head
        stats = mechanics.stats(brain)
        assert stats["horizons"]["logFrom"] == floor and stats["horizons"]["feedFrom"] == oldest
        assert stats["horizons"]["feedRetention"] == "4KiB" and stats["horizons"]["trimmedSegments"] > 0
        head = brain.head
    reader = Brain.attach(store)
    try:
        assert reader.head == head
        tail = LogTail(store, oldest - 1)
        with pytest.raises(R.GenerationCompactedError):
            tail.drain(reader)
        assert LogTail(store, oldest).drain(reader)[0]
    finally:
        reader.close()
    with Brain.open(store) as brain:
        assert brain.head == head and brain.changes({"since": oldest})["frames"]


def test_segments_a_crash_left_below_the_floor_are_skipped_and_deleted_next(tmp_path: Path) -> None:
    """The MANIFEST names ``logFrom`` before the segments go: a crash between leaves them, the reads skip
    them, and the next trim deletes them."""
    store = tmp_path / "s"
    init_store(store)
    kept = tmp_path / "kept"
    kept.mkdir()
    with _writer(store, feed_retention="4KiB") as brain:
        # the maintenance thread's own trim (its first wake, then once a minute) kept from falling between the
        # flush and this test's: on a loaded box it once came after the copy and left this one nothing to trim
        brain.maintenance._horizon_at = time.monotonic()
        _commits(brain, 120)
        brain.flush()
        for _, path in log_.segments(store / "log"):
            shutil.copy(path, kept / path.name)
        assert brain.maintenance.trim_log() > 0
        floor = brain.manifest["logFrom"]
    gone = [p for p in kept.iterdir() if not (store / "log" / p.name).exists()]
    for path in gone:  # as if the writer died between the MANIFEST swap and the unlinks
        shutil.copy(path, store / "log" / path.name)
    with _writer(store, feed_retention="4KiB") as brain:
        assert brain.verify()["logGeneration"] == brain.head
        with pytest.raises(R.GenerationCompactedError):
            brain.changes({"since": 0})
        brain.maintenance.trim_log()
        assert all(first >= floor for first, _ in log_.segments(store / "log"))


def test_the_history_horizon_lets_the_sweep_take_content_only_dropped_versions_named(tmp_path: Path) -> None:
    store = tmp_path / "s"
    init_store(store)
    with Brain.open(store, compact_at=1000, horizons=H.Horizons.of(history="1s")) as brain:
        for i in range(12):  # each version's content differs wholly: nothing is shared between them
            content = base64.b64encode(random.Random(i).randbytes(40_000)).decode()
            brain.writeFile({"path": "/a.bin", "content": content, "encoding": "base64"})
            brain.flush()
        packs = sum(p.stat().st_size for p in (store / "blobs").glob("*.pack"))
        time.sleep(1.2)
        last = random.Random(99).randbytes(40_000)
        brain.writeFile({"path": "/a.bin", "content": base64.b64encode(last).decode(), "encoding": "base64"})
        brain.flush()
        assert brain.compact() and brain.maintenance.sweep_due
        brain.sweep_blobs()
        after = sum(p.stat().st_size for p in (store / "blobs").glob("*.pack"))
        assert after < packs / 2
        assert base64.b64decode(brain.readFile({"path": "/a.bin", "encoding": "base64"})["content"]) == last


@pytest.mark.slow
@pytest.mark.parametrize("flags", [("--feed-retention", "a week"), ("--history", "2GiB")])
def test_a_horizon_the_server_cannot_read_refuses_its_start_by_name(tmp_path: Path, flags: tuple[str, str]) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "brainy.cli", "serve", "--listen", "127.0.0.1:0", "--keys", str(tmp_path / "k"), *flags],
        capture_output=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 2 and b"brainy: InvalidArgumentError:" in done.stderr, done


@pytest.mark.slow
def test_the_served_writer_keeps_the_horizons_its_flags_name(tmp_path: Path) -> None:
    extra = ("--feed-retention", "2GiB", "--history", "30d")
    with start_server(tmp_path / "served", extra_args=extra) as server, H1Client(server.address) as client:
        headers = (("Authorization", f"Bearer {server.key}"), ("Content-Type", "application/json"))
        client.send(H1Client.request("POST", server.path("add"), b'{"type": "document", "data": "x"}', headers))
        assert client.read_answer().status == 200
        operator = (("Authorization", f"Bearer {server.service_key}"),)
        client.send(H1Client.request("GET", server.path("stats"), None, operator))
        answer = client.read_answer()
        assert answer.status == 200, answer.refusal
        horizons = answer.result()["horizons"]
        assert horizons["feedRetention"] == "2GiB" and horizons["history"] == "30d"
        assert horizons["historyFrom"] == 0 and horizons["feedFrom"] == 0


@pytest.mark.slow
@pytest.mark.parametrize("die_at", ["sweep copied", "sweep removed", "sweep done"])
def test_a_sigkill_mid_sweep_loses_no_content_a_retained_version_names(tmp_path: Path, die_at: str) -> None:
    """Law: a writer rewriting files under a one-second history horizon, compacting and sweeping as it goes, is
    killed at a step of a sweep (the live records copied and fsynced; a swept pack unlinked; the sweep done);
    reopened, every file reads its last acknowledged content at the head, and every acknowledged version at or
    above ``historyFrom`` reads its own content at its generation, byte for byte."""
    store = tmp_path / "s"
    init_store(store)
    acks: list[tuple[str, int, int, int]] = []
    marks = 0
    for round_ in range(2):
        proc = subprocess.Popen(
            [sys.executable, str(PROCS / "sweeper.py"), str(store), str(round_ + 1), die_at, str(round_ + 1)],
            stdout=subprocess.PIPE,
            text=True,
            env=dict(os.environ, BRAINY_EMBED_MODEL_DIR=str(tmp_path / "no-model")),
        )
        assert proc.stdout is not None
        try:
            for line in proc.stdout:  # ends when the process dies; its own deadline is its loop's bound
                kind, *fields = line.split()
                if kind == "ACK" and line.endswith("\n"):
                    acks.append((fields[0], int(fields[1]), int(fields[2]), int(fields[3])))
                marks += kind == "MARK"
        finally:
            proc.wait(120)
            proc.stdout.close()
        assert proc.returncode == -signal.SIGKILL, (die_at, proc.returncode)
    assert marks and acks
    with Brain.open(store) as brain:
        floor = brain.manifest.get("historyFrom", 0)
        assert floor > 0  # versions were dropped and swept under the writer
        last: dict[str, tuple[int, int, int]] = {}
        for path, content_seed, size, generation in acks:
            want = random.Random(content_seed).randbytes(size)
            last[path] = (generation, content_seed, size)
            if generation >= floor:
                read = brain.readFile({"path": path, "encoding": "base64", "generation": generation})
                assert base64.b64decode(read["content"]) == want, (path, generation)
        for path, (_, content_seed, size) in last.items():
            read = brain.readFile({"path": path, "encoding": "base64"})
            assert base64.b64decode(read["content"]) == random.Random(content_seed).randbytes(size), path


def test_a_store_whose_flushed_frame_ended_a_deleted_segment_reopens(tmp_path: Path) -> None:
    """The MANIFEST's ``logAt`` may name a segment the trim deleted (its last frame was the flushed one): the open
    then reads from the segment after it."""
    store = tmp_path / "s"
    init_store(store)
    with _writer(store, feed_retention="0B") as brain:
        log = brain.commits.log
        for i in range(200):  # bounded: the segment fills within a few commits
            _commits(brain, 1, start=i)
            if log is not None and log._size >= log.rotate_bytes:  # the next commit opens a new segment
                brain.flush()
                _commits(brain, 1, start=i + 1000)
                brain.maintenance.trim_log()
                break
        assert brain.manifest["logAt"]["segment"] < brain.manifest["logFrom"]
        head = brain.head
        crashed = tmp_path / "crashed"  # the store as a kill here leaves it (a close would flush once more)
        shutil.copytree(store, crashed, ignore=shutil.ignore_patterns("locks"))
    with Brain.open(crashed) as brain:
        assert brain.head == head and brain.verify()["logGeneration"] == head
