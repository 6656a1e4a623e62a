"""Opening a store reads its log in time linear in the log's size.

Counted in bytes, not timed: what the open read from disk, checksummed, decoded as MessagePack and
looked at for a zero-filled tail, against what the segment holds. Each byte is read and checked
once; only frames above the flushed generation are decoded; a zero-filled tail is looked at once.
"""

from __future__ import annotations

import struct

import msgpack
import pytest
from helpers import new_store, segments, tables

from brainy.contract import refusals as R
from brainy.engine import Brain
from brainy.store import log as log_

FRAMES = 20_000


def _commit_many(brain: Brain, n: int, start: int = 0) -> None:
    """``n`` single-row commits through the real commit path, fsynced 500 at a time (so the test is quick)."""
    seq = gen = 0
    for i in range(start, start + n):
        answer, seq = brain.writes.commit("add", {"type": "thing", "id": f"k{i}", "data": f"row {i}"}, None, None)
        gen = answer["generation"]
        if i % 500 == 0:
            brain.commits.durable_at(seq, gen)
    brain.commits.durable_at(seq, gen)


def _crash(brain: Brain) -> None:
    brain.maintenance.stop()
    brain.commits.log.close()
    brain._lease.abandon()  # as a kill leaves it: no flush, no close record


def _payloads(segment) -> list[tuple[int, int]]:
    """(generation, payload length) of every frame of a segment, read independently of the engine."""
    data = segment.read_bytes()
    pos, out = log_.HEADER_SIZE, []
    while pos + 8 <= len(data):
        length = struct.unpack_from("<I", data, pos)[0]
        if length == 0:
            break
        out.append((msgpack.unpackb(data[pos + 8 : pos + 8 + length])["g"], length))
        pos += 8 + length
    return out


def _big_crashed_store(tmp_path):
    """A store of 20,000 commits in one unsealed segment; the tables cover all but the last 3,000."""
    path = new_store(tmp_path)
    brain = Brain.open(path, flush_bytes=1 << 40)
    _commit_many(brain, FRAMES - 3000)
    brain.flush()
    _commit_many(brain, 3000, start=FRAMES - 3000)
    _crash(brain)
    return path


def test_open_reads_checks_and_decodes_each_byte_once(tmp_path):
    path = _big_crashed_store(tmp_path)
    (segment,) = segments(path)
    size = segment.stat().st_size
    frames = _payloads(segment)
    assert len(frames) == FRAMES
    brain = Brain.attach(path)
    try:
        flushed = brain.flushed
        assert flushed == FRAMES - 3000 and brain.head == FRAMES
        cost = brain.log_read
        # the flush's MANIFEST says where its generation's frame ends: only the frames above it are read
        above = [n for g, n in frames if g > flushed]
        assert cost.read == sum(log_.FRAME_HEADER_SIZE + n for n in above) < size
        assert cost.checked == sum(above)  # every payload read checksummed, once
        assert cost.decoded == sum(above)  # and each one replayed
        assert cost.zero_tested == 0
        assert brain.recovery == {"replayedGenerations": 3000}
        assert brain.get("k0")["entity"]["data"] == "row 0"
        assert brain.get(f"k{FRAMES - 1}")["entity"]["data"] == f"row {FRAMES - 1}"
        assert brain.counts()["entities"] == FRAMES
    finally:
        brain.close()


def test_a_zero_filled_tail_is_looked_at_once(tmp_path):
    """A preallocated tail of a megabyte after tens of thousands of frames: each zero byte looked at once."""
    path = _big_crashed_store(tmp_path)
    (segment,) = segments(path)
    with open(segment, "ab") as f:
        f.write(bytes(1 << 20))
    brain = Brain.attach(path)
    try:
        assert brain.head == FRAMES
        assert brain.log_read.zero_tested == 1 << 20
        assert any(w["code"] == "torn-tail" for w in brain.warnings)
    finally:
        brain.close()


def test_frames_the_tables_cover_are_checked_and_verify_decodes_them(tmp_path):
    """An open checks a frame the tables already cover (its checksum, its generation) without decoding it;
    verify decodes every frame, so a well-checksummed frame with an unknown op there is still refused."""
    path = new_store(tmp_path)
    brain = Brain.open(path)
    _commit_many(brain, 3)
    brain.close()  # flushed: the tables cover generations 1..3
    (segment,) = segments(path)
    data = segment.read_bytes()
    pos, parts = log_.HEADER_SIZE, [data[: log_.HEADER_SIZE]]
    while pos < len(data):
        length = struct.unpack_from("<I", data, pos)[0]
        frame = data[pos : pos + 8 + length]
        if msgpack.unpackb(frame[8:])["g"] == 2:
            frame = log_.encode_frame(log_.encode_payload(2, 1, None, None, [{"k": "z", "o": "put"}]))
        parts.append(frame)
        pos += 8 + length
    segment.write_bytes(b"".join(parts))
    brain = Brain.open(path)
    try:
        assert brain.head == 3 and brain.log_read.decoded == 0
        with pytest.raises(R.FactLogRefusedError) as exc:
            brain.verify()
        assert exc.value.reason == "unknown-record-type"
    finally:
        brain.close()


def test_a_writer_claimed_after_an_attach_reads_only_what_came_since(tmp_path):
    """The reader's memtable and place in the log seed the writer: the claim reads the 500 frames the
    crashed writer added after the attach, not the 20,000 before, and serves the same store as a fresh open."""
    path = new_store(tmp_path)
    first = Brain.open(path, flush_bytes=1 << 40)
    _commit_many(first, FRAMES)
    reader = Brain.attach(path)
    assert reader.head == FRAMES
    _commit_many(first, 500, start=FRAMES)
    _crash(first)
    (segment,) = segments(path)
    added = sum(n for g, n in _payloads(segment) if g > FRAMES)
    writer = Brain.open(path, reader=reader)
    try:
        assert writer.role == "writer" and writer.head == FRAMES + 500
        assert writer.log_read.read == added + 8 * 500
        assert writer.log_read.decoded == added
        assert writer.recovery == {"replayedGenerations": FRAMES + 500}
        assert reader.head == FRAMES and reader.get(f"k{FRAMES}")["entity"] is None  # the reader stays put
        reader.close()
        writer.add({"type": "thing", "id": "after-claim"})
        counts = writer.counts()
        assert counts["entities"] == FRAMES + 501
        got = [writer.get(f"k{i}")["entity"]["data"] for i in (0, FRAMES - 1, FRAMES, FRAMES + 499)]
        assert got == ["row 0", f"row {FRAMES - 1}", f"row {FRAMES}", f"row {FRAMES + 499}"]
    finally:
        writer.close()
    fresh = Brain.attach(path)
    try:
        assert fresh.head == FRAMES + 501 and fresh.counts() == counts
        assert fresh.get("after-claim")["entity"]["generation"] == FRAMES + 501
    finally:
        fresh.close()


def test_a_reader_whose_tables_moved_on_lends_nothing(tmp_path):
    """When the writer flushed after the attach, the tables the reader read from are not the store's: the
    claim reads the log from the new flushed generation, as a fresh open does."""
    path = new_store(tmp_path)
    first = Brain.open(path, flush_bytes=1 << 40)
    _commit_many(first, 300)
    reader = Brain.attach(path)
    _commit_many(first, 200, start=300)
    first.close()  # flushes: the MANIFEST now covers all 500
    writer = Brain.open(path, reader=reader)
    try:
        assert writer.head == 500 and writer.recovery == {"replayedGenerations": 0}
        assert writer.counts()["entities"] == 500
        assert writer.log_read.decoded == 0  # every frame is in the tables: checked, none decoded
    finally:
        writer.close()
        reader.close()


def test_a_torn_tail_seen_by_the_reader_is_cut_by_the_writer_it_seeds(tmp_path):
    """A reader that stopped before a torn tail hands its place to the writer, which cuts the tail away."""
    path = new_store(tmp_path)
    first = Brain.open(path)
    _commit_many(first, 40)
    _crash(first)
    (segment,) = segments(path)
    whole = segment.stat().st_size
    with open(segment, "ab") as f:
        f.write(log_.encode_frame(b"\x85\xa1g" + b"x" * 40)[:30])  # a frame cut short
    reader = Brain.attach(path)
    assert reader.head == 40 and any(w["code"] == "torn-tail" for w in reader.warnings)
    writer = Brain.open(path, reader=reader)
    try:
        assert segment.stat().st_size == whole
        writer.add({"type": "thing", "id": "next"})
        assert writer.head == 41
    finally:
        writer.close()
        reader.close()
    assert Brain.attach(path).get("next")["entity"]["generation"] == 41


def test_the_pool_claims_the_writer_from_the_reader_it_holds(tmp_path):
    """A read opens an attach; the first write then claims the writer from it, reading no frame again."""
    from brainy.host.pool import Pool

    path = new_store(tmp_path)
    first = Brain.open(path, flush_bytes=1 << 40)
    _commit_many(first, 2000)
    _crash(first)
    pool = Pool({"main": path})
    try:
        reader = pool.resolve("main", for_write=False)
        assert reader.role != "writer" and reader.log_read.decoded > 0
        writer = pool.resolve("main", for_write=True)
        assert writer.role == "writer" and writer.head == 2000
        assert writer.log_read.read == 0 and writer.log_read.decoded == 0
        writer.add({"type": "thing", "id": "written"})
        assert pool.resolve("main", for_write=False) is writer
    finally:
        pool.close_all()
    assert Brain.attach(path).get("written")["entity"]["generation"] == 2001


_TAIL_THEN_KILL = r"""
import json, os, signal, sys
from brainy.engine import Brain
brain = Brain.open(sys.argv[1], flush_bytes=1 << 40)
brain.addMany({"items": [{"type": "thing", "id": f"new{i}", "metadata": {"n": i}} for i in range(30)]})
for i in range(0, 120, 7):
    brain.update({"id": f"r{i}", "metadata": {"n": -i}})  # rows in every table
brain.remove({"id": "r3"})
brain.remove({"id": "new4"})
brain.add({"type": "thing", "id": "r3", "metadata": {"again": True}})
brain.relate({"from": "r1", "to": "new1", "type": "relatedTo"})
state = {r["id"]: r for r in brain.find({"limit": 1000, "orderBy": "id"})["results"]}
json.dump({"head": brain.head, "rows": {i: r["entity"] for i, r in state.items()}, "counts": brain.counts({}),
           "seven": sorted(r["id"] for r in brain.find({"where": {"n": {"in": [7, 14, -14]}}})["results"])},
          open(sys.argv[2], "w"))
os.kill(os.getpid(), signal.SIGKILL)
"""


def _killed_after(script: str, store, tmp_path) -> dict:
    """Run ``script`` (it writes, dumps what it saw as JSON, then SIGKILLs itself) in a real process; its dump."""
    import json
    import os
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", script, str(store), str(tmp_path / "state.json")],
        env={**os.environ, "BRAINY_EMBED_MODEL_DIR": "/nonexistent-model-dir"},
        timeout=120,
    )
    assert done.returncode == -9
    return json.loads((tmp_path / "state.json").read_text())


@pytest.mark.slow
def test_a_tail_replayed_over_many_tables_reads_as_the_writer_left_it(tmp_path):
    """Commits after the last flush over a store of several tables (adds, changes to rows in each table, removes,
    a key re-added, a relation), then SIGKILL: the attach's replay, which looks each frame's rows up only in the
    tables whose bloom may hold them, reads every row and the counts as the writer had them."""
    store = new_store(tmp_path)
    with Brain.open(store) as brain:
        for batch in range(4):
            brain.addMany(
                {
                    "items": [
                        {"type": "thing", "id": f"r{i}", "metadata": {"n": i}}
                        for i in range(30 * batch, 30 * batch + 30)
                    ]
                }
            )
            brain.flush()
    assert len(tables(store)) >= 4
    left = _killed_after(_TAIL_THEN_KILL, store, tmp_path)
    with Brain.attach(store) as brain:
        assert brain.head == left["head"] and brain.recovery["replayedGenerations"] > 20
        got = {r["id"]: r["entity"] for r in brain.find({"limit": 1000, "orderBy": "id"})["results"]}
        assert got == left["rows"] and len(got) == 149
        assert brain.counts({}) == left["counts"]  # the ledger moved from each row's before, found in its table
        assert (
            sorted(r["id"] for r in brain.find({"where": {"n": {"in": [7, 14, -14]}}})["results"])
            == left["seven"]
            == sorted(brain.get(i)["entity"]["id"] for i in ("new7", "new14", "r14"))
        )
        assert [r["to"] for r in brain.related({"from": "r1"})["relations"]] == [brain.get("new1")["entity"]["id"]]


_FRESH_THEN_KILL = r"""
import json, os, signal, sys
from brainy.engine import Brain
brain = Brain.open(sys.argv[1], flush_bytes=1 << 40)
brain.addMany({"items": [{"type": "thing", "id": f"fresh{i}", "metadata": {"n": i}} for i in range(40)]})
for i in range(0, 40, 3):
    brain.update({"id": f"fresh{i}", "metadata": {"n": 100 + i}})  # a row of the tail changed: its dense int kept
# one commit removes a flushed row, then adds its id anew (a dense int above the flushed ones, the table's row live)
brain.transact({"ops": [{"door": "remove", "args": {"id": "old5"}},
                        {"door": "add", "args": {"type": "thing", "id": "old5", "metadata": {"reborn": 1}}}]})
brain.remove({"id": "old6"})
brain.add({"type": "thing", "id": "old6", "metadata": {"reborn": 2}})  # re-added over its tombstone in the tail
brain.remove({"id": "fresh1"})
brain.update({"id": "old7", "metadata": {"n": -7}})
ids = [f"old{i}" for i in range(10)] + [f"fresh{i}" for i in range(40)]
json.dump({"head": brain.head, "counts": brain.counts({}),
           "rows": {i: brain.get(i)["entity"] for i in ids if i != "fresh1"},
           "history": {i: brain.history(i) for i in ("old5", "old6", "old7", "fresh0", "fresh3")}},
          open(sys.argv[2], "w"))
os.kill(os.getpid(), signal.SIGKILL)
"""


@pytest.mark.slow
@pytest.mark.parametrize("flushes", [1, 3])
def test_a_tail_of_rows_minted_after_the_flush_replays_as_the_writer_left_it(tmp_path, flushes):
    """A tail whose rows carry dense ints minted after the flush (looked up in the memtable alone, no table's
    bloom asked), beside a commit that removes a flushed row and adds its id anew, a key re-added over its
    tombstone and flushed rows changed, then SIGKILL: the attach reads every row, the counts and each row's
    history as the writer had them, over one table and over several."""
    store = new_store(tmp_path)
    with Brain.open(store) as brain:
        for batch in range(flushes):
            brain.addMany(
                {
                    "items": [
                        {"type": "thing", "id": f"old{i}", "metadata": {"n": i}}
                        for i in range(batch * 10 // flushes, (batch + 1) * 10 // flushes)
                    ]
                }
            )
            brain.flush()
    assert len(tables(store)) >= flushes
    left = _killed_after(_FRESH_THEN_KILL, store, tmp_path)
    with Brain.attach(store) as brain:
        assert brain.head == left["head"] and brain.recovery["replayedGenerations"] > 15
        assert {i: brain.get(i)["entity"] for i in left["rows"]} == left["rows"]
        assert brain.counts({}) == left["counts"] and left["counts"]["entities"] == 49
        assert {i: brain.history(i) for i in left["history"]} == left["history"]
        assert brain.get("fresh1")["entity"] is None


def test_a_tail_of_new_rows_reads_no_table_to_replay(tmp_path):
    """600 rows added after the flush over three small tables (whose blooms pass a key falsely one time in a
    few dozen): the attach replays them without reading any table's block index or any data block, and
    reads them back."""
    store = new_store(tmp_path)
    brain = Brain.open(store, flush_bytes=1 << 40)
    for batch in range(3):
        brain.addMany({"items": [{"type": "thing", "id": f"old{batch}.{i}"} for i in range(10)]})
        brain.flush()
    for start in range(0, 600, 100):
        brain.addMany({"items": [{"type": "thing", "id": f"new{i}"} for i in range(start, start + 100)]})
    _crash(brain)
    with Brain.attach(store) as attached:
        assert attached.recovery["replayedGenerations"] == 6
        opened = attached.sources.tables
        assert len(opened) == 3 and all(t._bounds is None and not t._cache for t in opened)
        assert attached.counts({})["entities"] == 630 and attached.get("new599")["entity"]["key"] == "new599"
