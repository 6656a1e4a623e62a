"""Shipping a brain's commits to an S3-compatible store (docs/fleet.md "Shipping to object storage"): a real
brain's commit path, a real moto server on loopback, our own S3 client; and the restore that rebuilds the brain
from what was shipped, with the epochs' markers keeping a fenced owner's late segments out of its history."""

import os
import socket
import subprocess
import sys
import threading
import time

import pytest
from etcd import start_etcd
from fleet import TTL, call, start_node, wait_until, write_fleet_keys
from helpers import new_store
from objectstore import start_moto
from server import SERVICE_KEY

from brainy.contract import refusals as R
from brainy.engine import Brain, init_store
from brainy.fleet import objects as O
from brainy.fleet import objectstore, shipping
from brainy.fleet import restore as restore_module
from brainy.fleet.etcd import Etcd
from brainy.fleet.membership import Fleet
from brainy.fleet.objectstore import Location, ObjectExistsError, ObjectStore
from brainy.fleet.restore import RestoreError, restore
from brainy.fleet.shipping import ASYNC, SYNC, Courier, Shipper
from brainy.host.pool import Pool
from brainy.host.shipped import Shipping, snapshot_bytes, snapshot_parts
from brainy.store import log as log_

BRAIN = "notes"


@pytest.fixture(scope="module")
def moto():
    with start_moto() as running:
        yield running


@pytest.fixture
def store(moto, request):
    prefix = request.node.name.replace("[", "-").replace("]", "")
    made = ObjectStore.from_url(f"s3://brainy-ship/{prefix}", moto.env)
    made.create_bucket()
    yield made
    made.close()


def open_brain(path):
    init_store(path)
    return Brain.open(path, name=BRAIN)


def start_shipping(store, brain, epoch=1, mode=SYNC, fence=lambda: None):
    """What a node does when it opens a writer at ``epoch`` (brainy/host/shipped.py): marker, base snapshot,
    shipper attached to the commit path."""
    base = brain.head
    store.put_new(O.marker_name(BRAIN, epoch), O.marker_value(BRAIN, "n", epoch, base, 0))
    if not store.list(f"{O.brain_prefix(BRAIN)}snapshots/"):
        store.put_new(O.snapshot_name(BRAIN, base, epoch), snapshot_bytes(brain.hold_files(), BRAIN, epoch, "n", None))
    shipper = Shipper(store, BRAIN, epoch, base, fence, mode)
    brain.commits.shipping = shipper
    return shipper


def add(brain, id_):
    return brain.write("add", {"type": "thing", "id": id_, "metadata": {"n": id_}}, caller="person:pat")


def found(brain, id_):
    try:
        return brain.get(id_)["entity"] is not None
    except R.EntityNotFoundError:
        return False


def test_a_conditional_put_never_replaces_an_object(store):
    """An object is written once: a second put of the name (If-None-Match: *) is refused and the first stays."""
    store.put_new("x/one", b"first")
    with pytest.raises(ObjectExistsError):
        store.put_new("x/one", b"second")
    assert store.get("x/one") == b"first"
    assert store.get("x/absent") is None
    assert store.list("x/") == ["x/one"]


def test_the_location_reads_bucket_and_prefix():
    assert Location.parse("s3://bucket") == Location("bucket", "")
    assert Location.parse("s3://bucket/a/b/") == Location("bucket", "a/b/")
    with pytest.raises(ValueError):
        Location.parse("http://bucket")


def test_sync_acknowledges_a_write_only_once_its_segment_is_stored(store, tmp_path):
    """--ship sync: when a write returns, a segment holding its generation is in the store, named with the brain,
    the epoch and the generation range, and its frames are the log's own."""
    with open_brain(tmp_path / "b") as brain:
        start_shipping(store, brain, epoch=3)
        for i in range(5):
            answer = add(brain, f"e{i}")
            listing = O.read_listing(BRAIN, store.list(O.brain_prefix(BRAIN)))
            assert max(s.last for s in listing.segments) == answer["generation"]
            assert {s.epoch for s in listing.segments} == {3}
        segs = O.read_listing(BRAIN, store.list(O.brain_prefix(BRAIN))).segments
        assert [(s.first, s.last) for s in segs] == [(g, g) for g in range(1, 6)]
        frames = list(O.decode_segment(store.get(segs[0].name), 1, 1))
        assert frames[0][0] == 1


def test_sync_stores_a_writes_segment_while_its_local_fsync_is_still_under_way(store, tmp_path, monkeypatch):
    """--ship sync: the upload of a write's frame starts before its local fsync is waited for (the two take their
    time together): here the fsync is held until the segment is in the store, and the write still returns, once
    both are done, with its generation durable and stored."""
    from brainy.store import log as log_module

    with open_brain(tmp_path / "b") as brain:
        shipper = start_shipping(store, brain)
        add(brain, "before")
        stored = threading.Event()
        put_new = store.put_new
        fdatasync = log_module.os.fdatasync

        def noted_put(name, data):
            put_new(name, data)
            if "/log/" in name:
                stored.set()

        early: list[bool] = []

        def held_fsync(fd):
            early.append(stored.wait(10))  # False: the upload waited for this fsync (held 10 s, then let go)
            fdatasync(fd)

        monkeypatch.setattr(store, "put_new", noted_put)
        monkeypatch.setattr(log_module.os, "fdatasync", held_fsync)
        answer = add(brain, "after")
        monkeypatch.undo()
        assert early and all(early), "the local fsync was waited for before the upload began"
        assert shipper.stored == answer["generation"] == brain.head
        assert found(brain, "after")


def test_sync_groups_concurrent_writers_into_fewer_uploads(store, tmp_path):
    """Concurrent writers share uploads (group commit): 16 threads writing 8 each make fewer segments than
    commits, and every commit is in exactly one segment, generations consecutive."""
    with open_brain(tmp_path / "b") as brain:
        shipper = start_shipping(store, brain)
        errors = []

        def writer(t):
            try:
                for i in range(8):
                    add(brain, f"t{t}-{i}")
            except Exception as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

        threads = [threading.Thread(target=writer, args=(t,)) for t in range(16)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert not errors
        segs = O.read_listing(BRAIN, store.list(O.brain_prefix(BRAIN))).segments
        covered = [g for s in segs for g in range(s.first, s.last + 1)]
        assert covered == list(range(1, brain.head + 1)) and brain.head == 128
        assert shipper.uploads == len(segs) < 128


def test_sync_waits_for_the_writers_an_upload_released_before_the_next(store, monkeypatch):
    """After an upload lands, the next one waits (at most the landed one's duration) for the frames of the writers
    it released: four frames shipped together, then a fifth waited on alone, is not uploaded alone but with the
    three appended while it waited. Uploading at once would halve the groups: two cohorts of writers taking turns
    (perf/bench_ship.py). The store here answers a put after a second, as a far one would."""
    monkeypatch.setattr(shipping, "GROUP_WAIT_MAX", 30.0)
    put_new = store.put_new

    def far(name, data):
        time.sleep(1.0)
        put_new(name, data)

    monkeypatch.setattr(store, "put_new", far)
    shipper = Shipper(store, BRAIN, 1, 0, lambda: None, SYNC)

    def append(generation):
        shipper.appended(generation, log_.encode_frame(log_.encode_payload(generation, 0, None, None, [])))

    for g in range(1, 5):
        append(g)
    shipper.settle(4)  # one upload of 1-4: it released four writers, none waits
    append(5)
    acknowledged = threading.Thread(target=shipper.acknowledge, args=(5,))
    acknowledged.start()
    time.sleep(0.2)
    for g in range(6, 9):
        append(g)
    acknowledged.join(30)
    segs = O.read_listing(BRAIN, store.list(O.brain_prefix(BRAIN))).segments
    assert [(s.first, s.last) for s in segs] == [(1, 4), (5, 8)]
    assert shipper.stored == 8


def test_async_acknowledges_at_once_and_ships_within_the_interval(store, tmp_path):
    """--ship async: a write returns before its segment exists; the courier stores it within the interval."""
    with open_brain(tmp_path / "b") as brain:
        shipper = start_shipping(store, brain, mode=ASYNC)
        courier = Courier(0.2)
        courier.add(shipper)
        try:
            generation = add(brain, "a")["generation"]
            assert shipper.stored < generation
            for _ in range(100):  # bounded: 100 x 0.05 s
                if shipper.stored >= generation:
                    break
                threading.Event().wait(0.05)
            assert shipper.stored == generation
        finally:
            courier.stop()


def test_a_fenced_owner_appends_nothing_and_acknowledges_nothing(store, tmp_path):
    """The fence is asked before a commit begins: a writer whose claim ended is refused BrainMovedError, and its
    log does not move."""
    fenced = threading.Event()

    def fence():
        if fenced.is_set():
            raise R.BrainMovedError("moved", brain=BRAIN, node="b", epoch=2)

    with open_brain(tmp_path / "b") as brain:
        start_shipping(store, brain, fence=fence)
        add(brain, "before")
        head = brain.head
        fenced.set()
        with pytest.raises(R.BrainMovedError) as refused:
            add(brain, "after")
        assert refused.value.to_wire()["node"] == "b"
        assert brain.head == head and brain.commits.head.applied == head


def test_a_fence_that_fails_after_the_append_says_the_write_may_be_kept(store, tmp_path):
    """The fence passes before the commit begins and fails before it is acknowledged (the claim ended while it
    was made durable and shipped): the write is refused InternalError (ref fleet-fenced), not BrainMovedError,
    which says a request was not acted on. Its segment is stored: a restore keeps it."""
    armed = threading.Event()
    calls = []

    def fence():
        calls.append(armed.is_set())
        if armed.is_set() and len(calls) % 2 == 0:  # the second ask of a commit: the one after its append
            raise R.BrainMovedError("moved", brain=BRAIN, node="b", epoch=2)

    with open_brain(tmp_path / "a" / BRAIN) as brain:
        shipper = start_shipping(store, brain, fence=fence)
        add(brain, "before")
        armed.set()
        with pytest.raises(R.InternalError) as refused:
            add(brain, "during")
        assert refused.value.to_wire()["ref"] == "fleet-fenced"
        assert shipper.stored == brain.commits.head.applied == 2
    brains = tmp_path / "b"
    brains.mkdir()
    assert restore(store, BRAIN, 2, brains) == 2
    with Brain.open(brains / BRAIN, name=BRAIN) as restored:
        assert found(restored, "during")


def test_a_checkpoint_falls_due_after_enough_segments_of_enough_weight(store, tmp_path, monkeypatch):
    """``Shipper.due``: once TAIL_SEGMENTS segments were stored since the last snapshot and they weigh at least
    1/TAIL_SHARE of it, the shipper wakes ``on_due``; a snapshot stored (``checkpointed``) starts the count
    again from the segments stored after it was taken. A restore then reads only what follows it."""
    monkeypatch.setattr(shipping, "TAIL_SEGMENTS", 4)
    woken = []
    with open_brain(tmp_path / "a" / BRAIN) as brain:
        shipper = start_shipping(store, brain)
        shipper.on_due = lambda: woken.append(shipper.tail)
        for i in range(3):
            add(brain, f"e{i}")
        assert not shipper.due() and woken == []
        add(brain, "e3")
        assert shipper.due() and woken == [4]
        files = brain.hold_files()
        data = snapshot_bytes(files, BRAIN, 1, "n", None)
        store.put_new(O.snapshot_name(BRAIN, files.generation, 1), data)
        shipper.checkpointed(len(data), 4, shipper.tail_bytes)
        assert not shipper.due() and shipper.tail == 0 and shipper.snapshot_bytes == len(data)
        for i in range(4, 8):
            add(brain, f"e{i}")
        assert shipper.tail == 4 and shipper.due()
        # four segments weighing less than a sixteenth of the last snapshot (a large brain): not due
        shipper.snapshot_bytes = shipper.tail_bytes * shipping.TAIL_SHARE + 1
        assert not shipper.due()
        shipper.snapshot_bytes -= 1
        assert shipper.due()
    brains = tmp_path / "b"
    brains.mkdir()
    assert restore(store, BRAIN, 2, brains) == 8
    with Brain.open(brains / BRAIN, name=BRAIN) as restored:
        assert found(restored, "e0") and found(restored, "e7")


def test_a_backlog_ships_in_bounded_segments(store, tmp_path, monkeypatch):
    """Durable frames waiting for one upload (--ship async between turns, or a store that was away) go in
    segments of at most SEGMENT_FRAMES frames, consecutive, in one ship() call; the restore reads them all."""
    monkeypatch.setattr(O, "SEGMENT_FRAMES", 3)
    with open_brain(tmp_path / "a" / BRAIN) as brain:
        shipper = start_shipping(store, brain, mode=ASYNC)
        for i in range(8):
            add(brain, f"e{i}")
        assert shipper.stored == 0
        shipper.ship()
        assert shipper.stored == 8 and shipper.uploads == 3
    segs = O.read_listing(BRAIN, store.list(O.brain_prefix(BRAIN))).segments
    assert [(s.first, s.last) for s in segs] == [(1, 3), (4, 6), (7, 8)]
    brains = tmp_path / "b"
    brains.mkdir()
    assert restore(store, BRAIN, 2, brains) == 8


def test_a_restore_lists_only_the_segments_after_its_snapshots_shipped_generation(store, tmp_path):
    """A snapshot that says ``shipped`` (a checkpoint: the stored generation read before its files were held)
    lets the restore list the segments after it only (start-after), not every segment ever shipped."""
    listed = []
    real_list = store.list

    def watched(prefix, start_after=""):
        listed.append((prefix, start_after))
        return real_list(prefix, start_after)

    with open_brain(tmp_path / "a" / BRAIN) as brain:
        shipper = start_shipping(store, brain)
        for i in range(6):
            add(brain, f"e{i}")
        shipped = shipper.stored
        files = brain.hold_files()
        data = snapshot_bytes(files, BRAIN, 1, "n", None, shipped)
        store.put_new(O.snapshot_name(BRAIN, files.generation, 1), data)
        for i in range(6, 9):
            add(brain, f"e{i}")
    store.list = watched
    brains = tmp_path / "b"
    brains.mkdir()
    assert restore(store, BRAIN, 2, brains) == 9
    logs = [start for prefix, start in listed if prefix.endswith("/log/")]
    assert logs == [O.segment_start(BRAIN, 6)]
    assert O.read_listing(BRAIN, real_list(O.brain_prefix(BRAIN) + "log/", logs[0])).segments[0].first == 7
    with Brain.open(brains / BRAIN, name=BRAIN) as restored:
        assert found(restored, "e0") and found(restored, "e8")


def test_a_large_snapshot_goes_up_in_parts_and_comes_back_as_it_streams(store, tmp_path, monkeypatch):
    """A snapshot over SINGLE_PUT is a multipart upload (never whole in memory), completed only if its name is
    free: a second upload under the name is ObjectExistsError and leaves the first. The restore reads it as it
    arrives, and a file that does not check leaves no staging folder behind."""
    monkeypatch.setattr(objectstore, "SINGLE_PUT", 1 << 20)
    monkeypatch.setattr(objectstore, "PART_BYTES", 5 << 20)  # S3's least part
    with open_brain(tmp_path / "a" / BRAIN) as brain:
        start_shipping(store, brain)
        for i in range(40):  # about 12 MB of rows the tables cannot shrink much
            brain.write(
                "add",
                {"type": "thing", "id": f"big{i}", "metadata": {"blob": os.urandom(150_000).hex()}},
                caller="person:pat",
            )
        brain.flush()
        files = brain.hold_files()
        name = O.snapshot_name(BRAIN, files.generation, 1)
        with files:
            size, parts = snapshot_parts(files, BRAIN, 1, "n", "big")
            assert size > 10 << 20
            store.put_new_stream(name, size, parts)
        again = brain.hold_files()
        with again:
            size2, parts2 = snapshot_parts(again, BRAIN, 1, "n", "again")
            with pytest.raises(ObjectExistsError):
                store.put_new_stream(name, size2, parts2)
    assert O.decode_snapshot(store.get(name))[0]["name"] == "big"  # the first upload's, whole
    brains = tmp_path / "b"
    brains.mkdir()
    assert restore(store, BRAIN, 2, brains) == 40
    with Brain.open(brains / BRAIN, name=BRAIN) as restored:
        assert len(restored.get("big39")["entity"]["metadata"]["blob"]) == 300_000


def test_a_snapshot_that_does_not_check_is_refused_and_leaves_nothing_staged(store, tmp_path):
    """A snapshot whose file bytes do not match its index is RestoreError (damage), found as it streams; the
    staging folder written so far is removed and the brain's place is untouched."""
    with open_brain(tmp_path / "a" / BRAIN) as brain:
        start_shipping(store, brain)
        add(brain, "e0")
        files = brain.hold_files()
        data = bytearray(snapshot_bytes(files, BRAIN, 1, "n", None))
    data[-1] ^= 0xFF  # the last file's last byte
    store.put_new(O.snapshot_name(BRAIN, 1, 1), bytes(data))
    brains = tmp_path / "b"
    brains.mkdir()
    with pytest.raises(RestoreError, match="does not check"):
        restore(store, BRAIN, 2, brains)
    assert list(brains.iterdir()) == []


def test_a_flush_whose_acknowledgement_is_refused_is_held_not_the_end_of_maintenance(store, moto, tmp_path):
    """--ship sync with the object store away: a write is refused InternalError (fleet-ship), and the flush of
    its memtable, refused too, is held (tried again on the thread's next turn), not the end of the brain's
    maintenance. With the store back the held flush writes its table and writes are acknowledged again. A close
    while a flush is held records no clean close; the next open replays the log."""
    with socket.socket() as unlistened:  # bound, not listening: every connection to it is refused
        unlistened.bind(("127.0.0.1", 0))
        away = ObjectStore.from_url(
            "s3://brainy-ship/away", {**moto.env, "AWS_ENDPOINT_URL": f"http://127.0.0.1:{unlistened.getsockname()[1]}"}
        )
        brain = open_brain(tmp_path / "a" / BRAIN)
        shipper = start_shipping(store, brain)
        add(brain, "e0")
        shipper.store = away
        with pytest.raises(R.InternalError):
            add(brain, "e1")
        assert brain.maintenance.flush(keep=True) is False and brain.maintenance.flush_due
        assert brain.maintenance.error is None and brain.flushed == 0
        shipper.store = store
        assert brain.maintenance.flush(keep=True) is True
        assert brain.flushed == 2 and found(brain, "e1")
        add(brain, "e2")  # acknowledged again
        shipper.store = away
        with pytest.raises(R.InternalError):
            add(brain, "e3")
        closed = brain.close()
    assert closed["closed"] and not closed["cleanCloseRecorded"]
    with Brain.open(tmp_path / "a" / BRAIN, name=BRAIN) as reopened:
        assert all(found(reopened, i) for i in ("e0", "e1", "e2", "e3"))  # e3 was durable here, never acknowledged


def node_shipping(store, tmp_path):
    """A node's shipping of one brain it owns at epoch 1: a real pool and Shipping, and a Fleet that is not
    joined (no etcd): it owns the brain, and its fence holds until the test says otherwise."""
    fleet = Fleet(Etcd(["http://127.0.0.1:1"]), "n", "http://127.0.0.1:2")
    fleet.owned[BRAIN] = 1
    fleet.safe_until = float("inf")
    pool = Pool({BRAIN: new_store(tmp_path, BRAIN)})
    shipping_ = Shipping(store, fleet, pool, SYNC)
    brain = pool.resolve(BRAIN, for_write=True)  # on_writer: the marker, the base snapshot, the shipper
    return fleet, pool, shipping_, brain


def test_a_checkpoint_deletes_what_it_covers_and_keeps_named_snapshots(store, tmp_path):
    """After a checkpoint at generation g the owner deletes the segments ending at or below g and the earlier
    snapshots without a name; a host.persist snapshot (named) is kept, and the brain restores whole from what is
    left. A fence that fails stops the deletes."""
    fleet, pool, shipping_, brain = node_shipping(store, tmp_path)
    try:
        for i in range(5):
            add(brain, f"e{i}")
        shipping_.persist(BRAIN, "kept", brain.hold_files())  # named, at generation 5
        for i in range(5, 9):
            add(brain, f"e{i}")
        generation = shipping_.snapshot(BRAIN, 1)
        assert generation == 9
        deleted = shipping_._collect(shipping_._shipper(BRAIN, 1), generation)
        listing = O.read_listing(BRAIN, store.list(O.brain_prefix(BRAIN)))
        assert listing.segments == [] and deleted == 9 + 1  # nine one-commit segments, the base snapshot
        assert [s.generation for s in listing.snapshots] == [5, 9]  # the named one, and the checkpoint
        for i in range(9, 12):
            add(brain, f"e{i}")
        fleet.owned.clear()  # another node claimed it: the fence fails before the first delete
        with pytest.raises(R.BrainMovedError):
            shipping_._collect(shipping_._shipper(BRAIN, 1), 12)
        assert len(O.read_listing(BRAIN, store.list(O.brain_prefix(BRAIN))).segments) == 3
    finally:
        pool.close_all()
        shipping_.stop()
    brains = tmp_path / "restored"
    brains.mkdir()
    assert restore(store, BRAIN, 2, brains) == 12
    with Brain.open(brains / BRAIN, name=BRAIN) as restored:
        assert all(found(restored, f"e{i}") for i in range(12))


def test_a_restore_that_finds_a_listed_segment_deleted_lists_again(store, tmp_path, monkeypatch):
    """A delete that lands between a restore's listing and its read (the owner's collection after a newer
    checkpoint) makes the restore list again, and restore from the checkpoint it then finds."""
    fleet, pool, shipping_, brain = node_shipping(store, tmp_path)
    real_fetch = restore_module._fetch
    landed = []

    def fetch_after_a_checkpoint(store_, names):
        if not landed:  # the owner checkpoints and collects after this restore listed
            landed.append(shipping_.snapshot(BRAIN, 1))
            shipping_._collect(shipping_._shipper(BRAIN, 1), landed[0])
        return real_fetch(store_, names)

    try:
        for i in range(6):
            add(brain, f"e{i}")
        monkeypatch.setattr(restore_module, "_fetch", fetch_after_a_checkpoint)
        brains = tmp_path / "restored"
        brains.mkdir()
        assert restore(store, BRAIN, 2, brains) == 6 and landed == [6]
    finally:
        pool.close_all()
        shipping_.stop()
    with Brain.open(brains / BRAIN, name=BRAIN) as restored:
        assert all(found(restored, f"e{i}") for i in range(6))


def test_restore_rebuilds_the_brain_from_its_snapshot_and_log(store, tmp_path):
    """A brain restored at epoch 2 from what epoch 1 shipped holds every acknowledged write, at the same
    generation; a local copy is set aside, never deleted."""
    with open_brain(tmp_path / "a" / BRAIN) as brain:
        start_shipping(store, brain)
        ids = [f"e{i}" for i in range(20)]
        for id_ in ids:
            add(brain, id_)
        head = brain.head
    brains = tmp_path / "b"
    (brains / BRAIN).mkdir(parents=True)
    (brains / BRAIN / "stale-file").write_text("old")
    assert restore(store, BRAIN, 2, brains) == head
    assert (brains / f".stale-{BRAIN}-e2" / "stale-file").read_text() == "old"
    with Brain.open(brains / BRAIN, name=BRAIN) as restored:
        assert restored.head == head
        for id_ in ids:
            assert restored.get(id_)["entity"]["metadata"] == {"n": id_}


def test_a_later_snapshot_is_restored_with_only_the_log_after_it(store, tmp_path):
    """host.persist's snapshot at generation g: a restore starts from it and replays only the frames after g."""
    with open_brain(tmp_path / "a" / BRAIN) as brain:
        start_shipping(store, brain)
        for i in range(5):
            add(brain, f"e{i}")
        files = brain.hold_files()
        store.put_new(O.snapshot_name(BRAIN, files.generation, 1), snapshot_bytes(files, BRAIN, 1, "n", "mid"))
        for i in range(5, 8):
            add(brain, f"e{i}")
    brains = tmp_path / "b"
    brains.mkdir()
    assert restore(store, BRAIN, 2, brains) == 8
    with Brain.open(brains / BRAIN, name=BRAIN) as restored:
        assert found(restored, "e7") and found(restored, "e2")


def test_a_fenced_owners_late_segments_are_not_history(store, tmp_path):
    """Epoch 1 ships generations 1-3, epoch 2 starts from 3 (its marker) and writes 4-5; epoch 1's late segment
    of generation 4 (shipped after it was fenced) is not history: a restore at epoch 3 has epoch 2's 4 and 5."""
    with open_brain(tmp_path / "a" / BRAIN) as one:
        start_shipping(store, one, epoch=1)
        for i in range(3):
            add(one, f"e{i}")
        brains = tmp_path / "b"
        brains.mkdir()
        restore(store, BRAIN, 2, brains)
        add(one, "late")  # epoch 1's owner, fenced by nothing here: its segment 4-4 lands late
    with Brain.open(brains / BRAIN, name=BRAIN) as two:
        start_shipping(store, two, epoch=2)
        add(two, "e3")
        add(two, "e4")
    listing = O.read_listing(BRAIN, store.list(O.brain_prefix(BRAIN)))
    assert sorted((s.first, s.epoch) for s in listing.segments if s.first == 4) == [(4, 1), (4, 2)]
    again = tmp_path / "c"
    again.mkdir()
    assert restore(store, BRAIN, 3, again) == 5
    with Brain.open(again / BRAIN, name=BRAIN) as three:
        assert not found(three, "late")
        assert found(three, "e3") and found(three, "e4")
    # a marker is read once a process: a second restore reads none of them, and restores the same
    read: list[str] = []
    get = store.get
    store.get = lambda name: read.append(name) or get(name)  # type: ignore[method-assign]
    once_more = tmp_path / "d"
    once_more.mkdir()
    assert restore(store, BRAIN, 3, once_more) == 5 and read and not [n for n in read if "/epochs/" in n]


def test_damage_in_a_segment_is_refused_by_name():
    """A segment whose frame does not check is refused (ShippedDamageError), never skipped."""
    data = bytearray(O.encode_segment([(1, b"\x05\x00\x00\x00\x00\x00\x00\x00hello")]))
    with pytest.raises(O.ShippedDamageError):
        list(O.decode_segment(bytes(data), 1, 1))


@pytest.mark.slow
def test_host_persist_without_snapshots_dir_uploads_a_snapshot_a_failover_restores(moto, tmp_path, monkeypatch):
    """A node with --object-store and no --snapshots-dir: host.persist's run uploads a snapshot named with the
    brain, the epoch and the generation; persistStatus answers it done. Its owner killed, the next owner restores
    from that snapshot and the log after it: every write is there."""
    prefix = f"persist-{tmp_path.name}"
    for name, value in moto.env.items():
        monkeypatch.setenv(name, value)
    extra = ("--object-store", f"s3://brainy-ship/{prefix}")
    store = ObjectStore.from_url(f"s3://brainy-ship/{prefix}", moto.env)
    with start_etcd(tmp_path / "etcd") as etcd:
        keys = write_fleet_keys(tmp_path / "keys")
        a = start_node(tmp_path, "a", etcd.url, keys, TTL, extra)
        b = None
        try:
            assert call(a, "POST", f"/v1/brains/{BRAIN}/provision", b"{}", key=SERVICE_KEY).status == 200
            for i in range(5):
                assert (
                    call(a, "POST", f"/v1/brains/{BRAIN}/add", f'{{"type":"thing","id":"s{i}"}}'.encode()).status == 200
                )
            started = call(a, "POST", f"/v1/brains/{BRAIN}/ceremonies/persist", b'{"name":"nightly"}', key=SERVICE_KEY)
            assert started.status == 200 and started.result()["run"]["generation"] == 5, started

            def done():
                status = call(a, "GET", f"/v1/brains/{BRAIN}/ceremonies/persist?name=nightly", key=SERVICE_KEY)
                return status.result()["runs"][0]["state"] == "done"

            wait_until(done, 10, "the persist run done")
            snapshots = O.read_listing(BRAIN, store.list(O.brain_prefix(BRAIN))).snapshots
            assert [(s.generation, s.epoch) for s in snapshots] == [(0, 1), (5, 1)]
            index, _ = O.decode_snapshot(store.get(snapshots[-1].name))
            assert index["name"] == "nightly" and index["node"] == "a"
            for i in range(5, 8):
                assert (
                    call(a, "POST", f"/v1/brains/{BRAIN}/add", f'{{"type":"thing","id":"s{i}"}}'.encode()).status == 200
                )
            b = start_node(tmp_path, "b", etcd.url, keys, TTL, extra)
            a.kill()

            def served():
                try:
                    return call(b, "GET", f"/v1/brains/{BRAIN}/get/s7").status == 200
                except AssertionError:
                    return False

            wait_until(served, TTL + 5, "b serves the brain")
            assert all(call(b, "GET", f"/v1/brains/{BRAIN}/get/s{i}").status == 200 for i in range(8))
            assert "snapshot 5 (epoch 1) and 3 shipped frames" in b.log()
        finally:
            for node in (a, b):
                if node is not None and node.proc.poll() is None:
                    node.proc.terminate()
                    node.proc.wait(timeout=15)


FLEET = ["--fleet", "http://127.0.0.1:1", "--node", "a", "--advertise", "http://127.0.0.1:2"]
KEYS = {"AWS_ACCESS_KEY_ID": "k", "AWS_SECRET_ACCESS_KEY": "s"}


@pytest.mark.parametrize(
    "flags, env, says",
    [
        (["--object-store", "s3://brainy-x"], KEYS, "give --fleet ETCD_URL too"),
        ([*FLEET, "--object-store", "http://brainy-x"], KEYS, "s3://BUCKET[/PREFIX]"),
        ([*FLEET, "--object-store", "s3://brainy-x"], {}, "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"),
        (
            [*FLEET, "--object-store", "s3://brainy-x"],
            {**KEYS, "AWS_ENDPOINT_URL": "http://127.0.0.1:1"},
            "the object store did not answer",
        ),
        ([*FLEET, "--object-store", "s3://brainy-x", "--ship", "later"], KEYS, "invalid choice"),
    ],
)
def test_an_object_store_flag_missing_or_wrong_refuses_the_start(tmp_path, flags, env, says):
    """--object-store is checked at the start, and a store that does not answer refuses it, saying why."""
    (tmp_path / "brains").mkdir()
    clean = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    done = subprocess.run(
        [sys.executable, "-m", "brainy.cli", "serve", "--brains-dir", str(tmp_path / "brains")]
        + ["--keys", str(tmp_path / "keys"), "--listen", "127.0.0.1:0", *flags],
        capture_output=True,
        timeout=60,
        env={**clean, **env},
        check=False,
    )
    assert done.returncode == 2, done
    assert says in done.stderr.decode(), done.stderr.decode()


def test_every_kept_connection_closes_with_the_store_and_an_ended_threads_at_the_next(store):
    """The store keeps a connection per calling thread. One kept for a thread that has ended is closed when the next
    is made, and ``close`` closes every thread's: none is left for the collector to find open (a ResourceWarning on
    whichever thread its pass ran). ``release`` closes the calling thread's only."""
    done = threading.Event()

    def open_one(out: list, hold: bool = False) -> None:
        out.append(store._connection())  # a socket open to the store, as a call leaves its connection kept alive
        if hold:
            done.wait(10)

    def is_open(sock) -> bool:
        return sock.fileno() != -1

    ended: list = []
    thread = threading.Thread(target=open_one, args=(ended,))
    thread.start()
    thread.join()
    assert is_open(ended[0])  # kept after its thread ended...
    live: list = []
    holding = threading.Thread(target=open_one, args=(live, True))
    holding.start()
    while not live:
        time.sleep(0.01)
    assert not is_open(ended[0])  # ...until the next one was made
    mine: list = []
    open_one(mine)
    store.release()
    assert not is_open(mine[0]) and is_open(live[0])  # the caller's only
    store.close()
    assert not is_open(live[0])  # every thread's, the living one's too
    done.set()
    holding.join()
