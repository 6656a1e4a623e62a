"""The commit path and the maintenance below the doors (brainy/store/commit_path.py, maintenance.py), standing
alone: a head, a real log and real tables in a fresh store directory, and a follower that writes down what it is
told. No brain handle, no door: a commit here is a transaction whose rows the test puts itself.

The laws: a commit is applied (the next commit reads it) when it is appended and durable only once its fsync is
waited for; the durable head never moves back; the log's frames replayed over the same MANIFEST give the head the
commits made; a flush makes what it takes durable before it writes its table, tells the followers before and after
the MANIFEST swap, and leaves a MANIFEST a fresh head stands on with the same rows.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import StandInShipper, new_store, tables

from brainy.store import keys as K
from brainy.store import log as log_
from brainy.store import rows
from brainy.store.blobs import BlobStore
from brainy.store.commit_path import CommitPath, Move
from brainy.store.counts import Ledger
from brainy.store.files import read_document
from brainy.store.head import HeadState
from brainy.store.maintenance import Maintenance
from brainy.store.sstable import Table
from brainy.store.txn import Txn


class Notebook:
    """A follower that keeps nothing but the calls it was given, in order (``Follows`` and ``Persists``)."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    def record(self, generation: int, moves: list[Move]) -> None:
        self.calls.append(("record", generation, [(kind, after and after["id"]) for kind, _, after in moves]))

    def advance(self, generation: int, flushed: int) -> None:
        self.calls.append(("advance", generation, flushed))

    def prepare_flush(self) -> None:
        self.calls.append(("prepare_flush",))

    def persist(self) -> None:
        self.calls.append(("persist",))

    def persist_flushed(self) -> None:
        self.calls.append(("persist_flushed",))


def standing(path: Path) -> HeadState:
    """A head standing on the store's MANIFEST, its tables open, nothing above them."""
    manifest = read_document(path / "MANIFEST")
    head = HeadState()
    head.stand_at(
        manifest,
        Ledger(read_document(path / manifest["ledger"])),
        tuple(Table(path / t["file"]) for t in manifest["tables"]),
    )
    return head


def uid(name: str) -> str:
    """The entity id the test calls ``name`` (an id is a UUID)."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"brainy-test:{name}"))


def put(txn: Txn, name: str, text: str) -> None:
    txn.put_entity({"id": uid(name), "type": "thing", "denseInt": txn.mint(), "data": text})


@pytest.fixture
def store(tmp_path: Path) -> Iterator[tuple[Path, HeadState, CommitPath, Notebook]]:
    path = new_store(tmp_path)
    head, notebook = standing(path), Notebook()
    commits = CommitPath(head, notebook, log_.LogWriter(path / "log", log_.scan(path / "log", head.flushed)))
    yield path, head, commits, notebook
    assert commits.log is not None
    commits.log.close()


def commit(commits: CommitPath, *ids: str, caller: str | None = "person:pat") -> tuple[int, int]:
    """One commit putting ``ids``, appended under the commit lock as the write doors do: (its seq, its generation)."""
    with commits.head.commit_lock:
        txn = commits.begin(caller, "test")
        for id_ in ids:
            put(txn, id_, f"row {id_}")
        seq, _ = commits.append(txn)
    return seq, txn.generation


def test_a_commit_is_read_by_the_next_at_once_and_durable_only_once_waited_for(store) -> None:
    """Appending applies a commit to the head (the memtable, the ledger, the next dense int, the followers' record)
    while the durable head stays; the wait moves the durable head, its ledger and the followers to it, then calls
    ``on_durable``."""
    _, head, commits, notebook = store
    woken: list[int] = []
    commits.on_durable.append(lambda: woken.append(head.durable))
    seq, generation = commit(commits, "a", "b")
    assert (generation, head.applied, head.durable, head.last_seq) == (1, 1, 0, seq)
    assert head.ledger.n["entities"] == 2 and head.durable_ledger.n["entities"] == 0 and head.next_dense == 3
    assert head.mem.get(K.entity_key(uid("a")), 1) is not None and head.mem.get(K.commit_key(1), 1) is not None
    assert notebook.calls == [("record", 1, [("e", uid("a")), ("e", uid("b"))])]
    with head.commit_lock:
        assert (
            commits.begin(None, None).entity(uid("b"))["data"] == "row b"
        )  # the next commit reads it, not yet durable
    commits.durable_at(seq, generation)
    assert (head.durable, head.durable_ledger.n["entities"], head.ledgers.copy()) == (1, 2, {})
    assert notebook.calls[1:] == [("advance", 1, 0)] and woken == [1]


def test_the_durable_head_never_moves_back(store) -> None:
    """A later commit's wait makes every commit before it durable: an earlier commit's wait after it returns
    leaving the head, the followers and ``on_durable`` as they were."""
    _, head, commits, notebook = store
    woken: list[int] = []
    commits.on_durable.append(lambda: woken.append(head.durable))
    first = commit(commits, "a")
    second = commit(commits, "b")
    commits.durable_at(*second)
    commits.durable_at(*first)
    assert head.durable == 2 and head.durable_ledger.n["entities"] == 2 and woken == [2]
    assert [c for c in notebook.calls if c[0] == "advance"] == [("advance", 2, 0)]


def test_commits_waiting_together_are_made_durable_by_the_newest_wait(store) -> None:
    """``durable_all`` (a served loop's writes that waited while the last call was on the fsync workers): the
    newest's wait makes every one durable, however the waits are listed; the followers and ``on_durable`` move once,
    to the newest."""
    _, head, commits, notebook = store
    woken: list[int] = []
    commits.on_durable.append(lambda: woken.append(head.durable))
    waits = [commit(commits, id_) for id_ in "abc"]
    assert commits.durable_all([waits[1], waits[2], waits[0]]) == [None, None, None]
    assert head.durable == 3 and head.durable_ledger.n["entities"] == 3 and woken == [3]
    assert [c for c in notebook.calls if c[0] == "advance"] == [("advance", 3, 0)]
    assert commits.log is not None and not commits.log.pending


def test_when_the_newest_wait_fails_each_other_commit_is_waited_for_alone(store) -> None:
    """A refusal of the newest commit's acknowledgement is its write's alone: the commits that waited with it are
    each waited for as they would have been alone (oldest first), and each hears its own answer."""
    _, head, commits, _ = store
    commits.shipping = shipper = StandInShipper(refused=3)
    waits = [commit(commits, id_) for id_ in "abc"]
    failures = commits.durable_all(waits)
    assert failures[:2] == [None, None] and isinstance(failures[2], RuntimeError)
    assert shipper.asked == [3, 1, 2] and head.durable == 2  # the refused one is not acknowledged


def test_a_rule_finds_the_rows_of_every_commit_above_the_durable_head(store) -> None:
    """``written_since`` answers the entity rows of the commits applied above a generation, oldest first, however
    far the durable head moved meanwhile: what a commit made durable is let go only by the next commit, under the
    commit lock a rule holds (memory.remember's dedupe compares them with what it searched at the durable head)."""
    _, head, commits, _ = store
    first, second = commit(commits, "a"), commit(commits, "b", "c")
    with head.commit_lock:
        durable = head.durable  # what a rule's read snapshot would stand at
        assert [r["id"] for r in commits.written_since(durable)] == [uid("a"), uid("b"), uid("c")]
        commits.durable_at(*second)  # another thread's fsync lands while the rule runs
        assert [r["id"] for r in commits.written_since(durable)] == [uid("a"), uid("b"), uid("c")]
        assert [r["id"] for r in commits.written_since(first[1])] == [uid("b"), uid("c")]
    commit(commits, "d")  # the next commit lets go of what is durable
    with head.commit_lock:
        assert [r["id"] for r in commits.written_since(0)] == [uid("d")]


def test_a_transaction_in_a_commits_place_keeps_its_generation_stamp_and_author(store) -> None:
    """``again`` (a refused write's audit event) is a fresh transaction at the same generation and timestamp, by
    the same caller through the same service, with nothing staged."""
    _, head, commits, _ = store
    with head.commit_lock:
        txn = commits.begin("person:pat", "svc")
        put(txn, "a", "staged")
        fresh = commits.again(txn)
    assert (fresh.generation, fresh.timestamp, fresh.caller, fresh.via) == (1, txn.timestamp, "person:pat", "svc")
    assert fresh.ops == [] and fresh.entity(uid("a")) is None


def test_a_commits_timestamp_never_goes_back(store) -> None:
    """A commit is stamped now, or with the last commit's timestamp if the clock is behind it."""
    _, head, commits, _ = store
    commit(commits, "a")
    head.last_ts = int(time.time() * 1000) + 60_000  # a clock that stepped back a minute since
    with head.commit_lock:
        assert commits.begin(None, None).timestamp == head.last_ts


def test_the_logs_frames_replayed_give_the_head_the_commits_made(store) -> None:
    """A second head on the same MANIFEST, replaying the frames the log holds through a commit path with no log,
    holds the same memtable, generation, dense int and counts; settled, all of it is durable."""
    path, head, commits, _ = store
    for ids in (("a", "b"), ("c",), ("d", "e", "f")):
        commits.durable_at(*commit(commits, *ids))
    again, notebook = standing(path), Notebook()
    replaying = CommitPath(again, notebook)
    for frame in log_.frames(path / "log", again.flushed):
        replaying.replay(frame)
    again.settle()
    assert list(again.mem.entries()) == list(head.mem.entries())
    assert (again.applied, again.durable, again.next_dense, again.last_ts) == (3, 3, head.next_dense, head.last_ts)
    assert again.durable_ledger.to_doc() == head.durable_ledger.to_doc()
    assert [c[:2] for c in notebook.calls] == [("record", 1), ("record", 2), ("record", 3)]


def test_a_flush_makes_its_commits_durable_then_swaps_a_manifest_a_fresh_head_stands_on(store) -> None:
    """A flush of an appended, not yet durable commit: the followers are told before it takes the memtable, the
    commit is made durable before its table is written, the snapshots go before the MANIFEST swap and the rest
    after; the head's tables and flushed generation move, and a fresh head on the new MANIFEST reads the rows from
    the table. A second flush, the memtable empty, writes nothing."""
    path, head, commits, notebook = store
    blobs = BlobStore(path / "blobs", writable=True)
    maintenance = Maintenance(path, head, commits, notebook, blobs, lambda: set())
    try:
        commit(commits, "a", "b")
        assert maintenance.flush()
        assert [c[0] for c in notebook.calls] == ["record", "prepare_flush", "advance", "persist", "persist_flushed"]
        assert (head.durable, head.flushed, len(head.mem), head.sources.frozen) == (1, 1, 0, ())
        assert len(head.sources.tables) == 1
        assert [p.name for p in tables(path)] == ["0000000001.sst"] and head.next_table == 2
        manifest = read_document(path / "MANIFEST")
        assert manifest == head.manifest and manifest["generation"] == 1 and manifest["nextDenseInt"] == 3
        fresh = standing(path)
        assert rows.unpack(fresh.sources.lookup(K.entity_key(uid("b")), 1))["data"] == "row b"
        assert fresh.ledger.n["entities"] == 2 and fresh.mem.bytes == 0
        assert not maintenance.flush() and len(notebook.calls) == 5
    finally:
        blobs.close()


def test_the_thread_flushes_once_a_commit_fills_the_memtable(store) -> None:
    """Told of a commit that leaves the memtable at ``flush_bytes``, the maintenance thread flushes it."""
    path, head, commits, notebook = store
    blobs = BlobStore(path / "blobs", writable=True)
    maintenance = Maintenance(path, head, commits, notebook, blobs, lambda: set(), flush_bytes=1)
    maintenance.start()
    try:
        with head.commit_lock:
            txn = commits.begin(None, None)
            put(txn, "a", "row a")
            commits.append(txn)
            maintenance.committed()
        deadline = time.monotonic() + 10
        while not head.sources.tables and time.monotonic() < deadline:
            time.sleep(0.01)
        assert head.flushed == 1 and maintenance.error is None
    finally:
        maintenance.stop()
        blobs.close()
