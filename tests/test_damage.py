"""Every kind of file damage is refused by name or repaired, never read as wrong data (docs/damage.md).

Each test damages a real file the way a disk, a crash or a careless copy does (a flipped byte, a cut, zeros,
garbage, a missing file, a file of another version), then opens, reads or serves through the real Brain or a
real ``brainy serve``, and asserts the named refusal or the repair, and that nothing was answered from the
damaged bytes nor cut away with them. The classes proven in the test file of their own area are listed in
docs/damage.md beside these.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import random
import shutil
import struct
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers import fill, flip, new_store, segments, tables
from server import BRAIN, PERSON_KEY, SERVICE_KEY, TIMEOUT, Answer, ServerProcess, curl, start_server
from test_serve_h3 import make_pki
from test_tokens import KEY_A, KEY_B, NOW, claims, issuers_text, place, revoked_text, sign

from brainy.auth import tokens as T
from brainy.auth.keys import KeysFileError, KeyTable, fingerprint, parse_keys
from brainy.contract import refusals as R
from brainy.engine import Brain
from brainy.net import tls
from brainy.store import blobs as B
from brainy.store import lease as L
from brainy.store import log as log_
from brainy.store.files import read_document, write_document

ME = "person:damage@example.com"


def files_of(root: Path, skip: tuple[str, ...] = ("locks",)) -> dict[str, str]:
    """Every file under ``root`` but those under ``skip`` (an open claims the lease before it reads the store),
    relative name -> sha256 of its bytes: what a refusal must leave as it found it."""
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.relative_to(root).parts[0] not in skip
    }


def damage(path: Path, how: str, seed: int = 7) -> None:
    """Damage ``path`` in place: one byte flipped, cut to half, zero-filled, emptied, garbage of its length, or
    removed."""
    data = bytearray(path.read_bytes())
    if how == "flipped":
        data[len(data) // 3] ^= 0x01
    elif how == "cut":
        data = data[: len(data) // 2]
    elif how == "zeros":
        data = bytearray(len(data))
    elif how == "empty":
        data = bytearray()
    elif how == "garbage":
        data = bytearray(random.Random(seed).randbytes(len(data)))
    elif how == "missing":
        path.unlink()
        return
    else:
        raise AssertionError(how)
    path.write_bytes(bytes(data))


def crashed(tmp_path: Path, n: int, name: str = "brain", **opts: Any) -> Path:
    """A store holding ``n`` commits in its log only, left as a killed writer leaves it: no flush, no close."""
    path = new_store(tmp_path, name)
    brain = Brain.open(path, **opts)
    fill(brain, n)
    brain._lease.abandon()
    brain.commits.log.close()
    return path


def flushed(tmp_path: Path, name: str = "brain") -> Path:
    """A store with rows in a table and two more in the log, closed cleanly."""
    path = new_store(tmp_path, name)
    with Brain.open(path) as brain:
        fill(brain, 5)
        brain.flush()
        fill(brain, 2, "t")
    return path


def refused_by_both(path: Path, refusal: type[R.Refusal], reason: str | None = None) -> list[R.Refusal]:
    """Opening for writes and attaching read-only both refuse with ``refusal`` (and ``reason``)."""
    caught = []
    for opener in (Brain.open, Brain.attach):
        with pytest.raises(refusal) as exc:
            opener(path)
        if reason is not None:
            assert exc.value.reason == reason, (opener, exc.value)
        caught.append(exc.value)
    return caught


# -- 1. the documents with a checksum line ----------------------------------------------------------------


@pytest.mark.parametrize("how", ["flipped", "cut", "zeros", "empty", "garbage", "missing"])
@pytest.mark.parametrize("document", ["IDENTITY", "MANIFEST", "ledger"])
def test_a_damaged_checksummed_document_refuses_the_open_and_the_attach_by_name(
    tmp_path: Path, document: str, how: str
) -> None:
    """IDENTITY, MANIFEST and the counts ledger are read whole and checked against their crc32 line: flipped,
    cut, zeroed, emptied, garbled or missing, the store refuses to open and to attach, StoreUnservableError
    ``unreadable-generation-stamp`` (a directory without IDENTITY is no store: StoreNotFoundError), and not a
    byte of the store is written, cut or repaired on the way."""
    path = flushed(tmp_path)
    target = path / (read_document(path / "MANIFEST")["ledger"] if document == "ledger" else document)
    damage(target, how)
    before = files_of(path)
    if document == "IDENTITY" and how == "missing":
        refused_by_both(path, R.StoreNotFoundError)
    else:
        for refusal in refused_by_both(path, R.StoreUnservableError, "unreadable-generation-stamp"):
            assert (document if document != "ledger" else ".counts") in str(refusal)
    assert files_of(path) == before


@pytest.mark.parametrize("which", ["manifest-format", "ledger-generation"])
def test_a_checksummed_document_of_another_version_or_generation_refuses_by_name(tmp_path: Path, which: str) -> None:
    """A MANIFEST of another format, or a ledger (checksum whole) of another generation than the MANIFEST's, is not
    the stamp of this store as it stands: ``unreadable-generation-stamp``, never counts of another generation."""
    path = flushed(tmp_path)
    manifest = read_document(path / "MANIFEST")
    if which == "manifest-format":
        write_document(path / "MANIFEST", {**manifest, "format": 2})
    else:
        ledger = path / manifest["ledger"]
        write_document(ledger, {**read_document(ledger), "generation": manifest["generation"] - 1})
    refused_by_both(path, R.StoreUnservableError, "unreadable-generation-stamp")


# -- 2. the fact log ----------------------------------------------------------------------------------------


def frame_starts(segment: Path) -> list[int]:
    data = segment.read_bytes()
    pos, starts = log_.HEADER_SIZE, []
    while pos + log_.FRAME_HEADER_SIZE <= len(data):
        starts.append(pos)
        pos += log_.FRAME_HEADER_SIZE + struct.unpack_from("<I", data, pos)[0]
    return starts


@pytest.mark.parametrize("frame", ["first", "middle", "last", "off-by-one"])
def test_a_damaged_frame_length_in_the_last_segment_refuses_and_cuts_nothing(tmp_path: Path, frame: str) -> None:
    """A frame whose length field is damaged so that it runs past the end of the last segment looks like a commit
    cut short, yet the bytes after its header landed whole (its own payload to the end, or the frames after it):
    that is damage, ``checksum-mismatch``, never a torn tail dropped with the acknowledged commits behind it and
    cut away by the writer. A length off by one fails the frame's checksum the same way."""
    path = crashed(tmp_path, 5)
    seg = segments(path)[-1]
    starts = frame_starts(seg)
    assert len(starts) == 5
    at = {"first": starts[0], "middle": starts[2], "last": starts[-1], "off-by-one": starts[1]}[frame]
    data = bytearray(seg.read_bytes())
    if frame == "off-by-one":
        data[at] ^= 0x01  # the length's low bit
    else:
        data[at + 3] ^= 0x40  # the length's top byte: a gibibyte past the end
    seg.write_bytes(bytes(data))
    before = seg.read_bytes()
    refused_by_both(path, R.FactLogRefusedError, "checksum-mismatch")
    assert seg.read_bytes() == before  # nothing cut away


@pytest.mark.parametrize("how", ["header-flipped", "zeros", "sealed-header-flipped"])
def test_a_damaged_segment_header_refuses_by_name(tmp_path: Path, how: str) -> None:
    """A segment whose header does not check (its magic, version or crc damaged, or the whole segment zeroed) is
    refused: ``checksum-mismatch`` in the last segment, ``torn-sealed-segment`` in a sealed one."""
    path = crashed(tmp_path, 40, segment_bytes=2048)
    segs = segments(path)
    assert len(segs) >= 3
    target = segs[0] if how.startswith("sealed") else segs[-1]
    if how == "zeros":
        damage(target, "zeros")
    else:
        flip(target, 3)
    before = files_of(path)
    refused_by_both(
        path, R.FactLogRefusedError, "torn-sealed-segment" if how.startswith("sealed") else "checksum-mismatch"
    )
    assert files_of(path) == before


def test_a_renamed_segment_refuses_segment_order(tmp_path: Path) -> None:
    """A segment whose name is not the generation of its first frame (renamed, or another store's) is
    ``segment-order``: its frames are never read as the generations its name claims."""
    path = crashed(tmp_path, 40, segment_bytes=2048)
    segs = segments(path)
    middle = segs[1]
    first = int(middle.name[:-4])
    middle.rename(middle.with_name(log_.segment_name(first - 1)))
    refused_by_both(path, R.FactLogRefusedError, "segment-order")


def test_a_log_without_a_segment_refuses_missing_segment(tmp_path: Path) -> None:
    """A store whose ``log/`` holds no segment (every one removed) refuses ``missing-segment``, even when its
    tables hold every row: the log is the truth, and a store without one is not served as if it were whole."""
    path = flushed(tmp_path)
    for seg in segments(path):
        seg.unlink()
    refused_by_both(path, R.FactLogRefusedError, "missing-segment")


# -- 3. the tables ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("how", ["cut", "zeros", "garbage"])
def test_a_cut_zeroed_or_garbled_table_refuses_at_the_open(tmp_path: Path, how: str) -> None:
    """A table cut short, zero-filled or garbled fails its footer: the open and the attach refuse
    ``torn-sstable`` naming the file, and the table is never rewritten or read around."""
    path = flushed(tmp_path)
    table = tables(path)[0]
    damage(table, how)
    before = files_of(path)
    for refusal in refused_by_both(path, R.StoreUnservableError, "torn-sstable"):
        assert refusal.file == f"sst/{table.name}"
    assert files_of(path) == before


# -- 4. the derived snapshots ---------------------------------------------------------------------------------

AGGREGATE = {
    "name": "by_team",
    "source": {"type": "thing"},
    "groupBy": ["team"],
    "metrics": {"n": {"op": "count"}, "total": {"op": "sum", "field": "i"}},
}


def _vectors() -> np.ndarray:
    return np.random.default_rng(11).standard_normal((300, 384)).astype(np.float32)


@pytest.fixture(scope="module")
def snapshotted(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, tuple[Any, ...]]:
    """A store whose ``index/`` holds every kind of snapshot (projection base and delta, aggregate state, vector
    base, its quantised copy and deltas), closed cleanly, and what it answers, read with every snapshot whole."""
    path = new_store(tmp_path_factory.mktemp("snapshotted"))
    x = _vectors()

    def items(start: int, stop: int) -> dict[str, Any]:
        return {
            "items": [
                {
                    "type": "thing",
                    "id": f"v{i}",
                    "vector": x[i].tolist(),
                    "data": f"word{i % 5} row",
                    "metadata": {"team": f"t{i % 3}", "i": i},
                }
                for i in range(start, stop)
            ]
        }

    with Brain.open(path, flush_bytes=1 << 30) as brain:
        brain.defineAggregate(AGGREGATE, caller=ME)
        brain.addMany(items(0, 200))
        answers(brain)  # every projection built, so the flush persists it
        brain.flush()
        brain.addMany(items(200, 300))
        brain.remove({"id": "v3"})
        brain.flush()
        brain.update({"id": "v5", "metadata": {"team": "t9", "i": 5}})
    kinds = {p.suffix for p in (path / "index").iterdir()}
    assert kinds == {".proj", ".projd", ".agg", ".vec", ".vecq", ".vecd"}, kinds
    with Brain.open(path) as brain:
        want = answers(brain)
        assert not brain.warnings
    return path, want


def answers(brain: Brain) -> tuple[Any, ...]:
    """What the projections, the vector index and the aggregate state answer."""
    x = _vectors()
    return (
        [r["id"] for r in brain.find({"vector": x[7].tolist(), "limit": 10})["results"]],
        sorted(r["id"] for r in brain.find({"where": {"team": "t1"}, "limit": 1000})["results"]),
        [r["id"] for r in brain.find({"where": {"team": "t2"}, "orderBy": "i", "limit": 1000})["results"]],
        sorted(r["id"] for r in brain.find({"query": "word2", "limit": 1000})["results"]),
        brain.aggregate({"name": "by_team"})["rows"],
    )


@pytest.mark.parametrize("how", ["cut", "zeros", "garbage"])
@pytest.mark.parametrize(
    "suffix,warning",
    [
        (".proj", "projections-rebuilt"),
        (".projd", "projections-rebuilt"),
        (".agg", "aggregates-rebuilt"),
        (".vec", "vectors-rebuilt"),
        (".vecd", "vectors-rebuilt"),
        (".vecq", "vectors-rebuilt"),
    ],
)
def test_a_damaged_snapshot_of_any_kind_is_never_trusted_and_the_answers_are_the_rows(
    tmp_path: Path, snapshotted: tuple[Path, tuple[Any, ...]], suffix: str, warning: str | None, how: str
) -> None:
    """Every snapshot in ``index/`` is a cache of the rows: cut, zero-filled or garbled, it is not trusted and the
    state it held is built again from the rows (the warnings say which), so every read answers exactly what
    the whole snapshots answered. A quantised copy that does not check out is not used (the scan reads the float32
    slots; the warnings name it) and the next flush writes it again. Nothing is repaired in place by a read-only
    attach either."""
    template, want = snapshotted
    path = tmp_path / "brain"
    shutil.copytree(template, path)
    damage(sorted((path / "index").glob("*" + suffix))[-1], how)
    before = files_of(path)
    with Brain.attach(path) as attached:
        assert answers(attached) == want
        assert warning is None or warning in [w["code"] for w in attached.warnings]
    assert files_of(path) == before
    with Brain.open(path) as brain:
        assert answers(brain) == want
        assert warning is None or warning in [w["code"] for w in brain.warnings]
    with Brain.open(path) as brain:  # the close wrote whole snapshots again
        assert answers(brain) == want
        assert not [w for w in brain.warnings if w["code"].endswith("-rebuilt")]


# -- 5. the blob packs ---------------------------------------------------------------------------------------


def rand(n: int, seed: int) -> bytes:
    return random.Random(seed).randbytes(n)


def write_file(brain: Brain, path: str, data: bytes) -> dict[str, Any]:
    content = base64.b64encode(data).decode()
    return brain.writeFile({"path": path, "content": content, "encoding": "base64", "createParents": True}, caller=ME)


def read_file(brain: Brain, path: str) -> bytes:
    return base64.b64decode(brain.readFile({"path": path, "encoding": "base64"})["content"])


def records(pack: Path) -> list[tuple[int, bytes, int]]:
    """Every record of a pack: (offset, kind, payload length)."""
    data, pos, found = pack.read_bytes(), B.HEADER_SIZE, []
    while pos < len(data):
        kind, length, _, _ = B._record.unpack_from(data, pos)
        found.append((pos, kind, length))
        pos += B.RECORD_HEADER_SIZE + length
    return found


FILES = 4


def with_files(tmp_path: Path, crash: bool = False, seal_bytes: int = B.SEAL_BYTES) -> Path:
    """A store holding ``FILES`` files of 20,000 random bytes each (in one pack, unless ``seal_bytes`` seals them
    sooner), closed (or crashed)."""
    path = new_store(tmp_path)
    brain = Brain.open(path)
    brain.blobs.seal_bytes = seal_bytes
    for i in range(FILES):
        write_file(brain, f"/f{i}.bin", rand(20_000, i))
    if crash:
        brain._lease.abandon()
        brain.commits.log.close()
    else:
        brain.close()
    return path


@pytest.mark.parametrize("where", ["kind", "length", "last-length", "tail-garbage"])
def test_a_damaged_record_header_in_the_last_pack_refuses_and_cuts_nothing(tmp_path: Path, where: str) -> None:
    """In the last pack only a record cut short at the end never landed. A record of an unknown kind, a length
    that runs past records that landed whole (or past its own payload, whole to the end), or bytes at the end
    that are neither zeros nor the start of a record are damage: the pack refuses by name
    (StoreUnservableError ``torn-blob-pack``) for reads and writes of file content alike, and the writer never
    cuts it (which would destroy the content of files committed rows name). Rows still read and write."""
    path = with_files(tmp_path)
    (pack,) = sorted((path / "blobs").glob("*.pack"))
    found = records(pack)
    if where == "kind":
        flip(pack, found[1][0])
    elif where == "length":
        flip(pack, found[1][0] + 4)  # the length's top byte (after the kind byte)
    elif where == "last-length":
        flip(pack, found[-1][0] + 4)
    else:
        with open(pack, "ab") as f:
            f.write(b"\x01damage\x02")
    before = pack.read_bytes()
    with Brain.open(path) as brain:
        for i in range(FILES):
            with pytest.raises(R.StoreUnservableError) as exc:
                read_file(brain, f"/f{i}.bin")
            assert exc.value.reason == "torn-blob-pack" and pack.name in str(exc.value)
        with pytest.raises(R.StoreUnservableError):
            write_file(brain, "/new.bin", rand(5_000, 99))
        brain.add({"type": "thing", "id": "a row"})
        assert brain.get("a row")["entity"] is not None
        assert brain.stat({"path": "/f1.bin"})["node"]["size"] == 20_000  # the rows are not the packs
    assert pack.read_bytes() == before
    with Brain.attach(path) as attached, pytest.raises(R.StoreUnservableError):
        read_file(attached, "/f0.bin")


def test_a_damaged_pack_found_by_the_sweep_after_a_crash_leaves_writes_of_rows_working(tmp_path: Path) -> None:
    """The open after a crash sweeps the packs; a pack that does not index (here a sealed one cut short) makes that
    sweep collect nothing (the reads name the damage), rather than stopping the maintenance thread and with it
    every later write of a row."""
    path = with_files(tmp_path, crash=True, seal_bytes=30_000)
    packs = sorted((path / "blobs").glob("*.pack"))
    assert len(packs) >= 3
    os.truncate(packs[0], packs[0].stat().st_size - 100)
    with Brain.open(path) as brain:
        assert brain.claim.claim_path == "stale-after-crash"
        deadline = time.monotonic() + 30
        while brain.swept is None and brain.maintenance.error is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert brain.maintenance.error is None and brain.swept == B.Swept(0, 0, 0, 0)
        brain.add({"type": "thing", "id": "after"})
        with pytest.raises(R.StoreUnservableError):
            read_file(brain, "/f2.bin")
    with Brain.attach(path) as attached:
        assert attached.get("after")["entity"] is not None


@pytest.mark.parametrize("tail", ["zeros", "cut-header", "cut-payload"])
def test_a_zero_filled_or_cut_tail_of_the_last_pack_never_landed_and_is_cut_away(tmp_path: Path, tail: str) -> None:
    """Zeros from a record boundary to the end, or one record cut short there, is an append the writer died in:
    every file reads whole, and the next write cuts that tail away and lands after the last whole record."""
    path = with_files(tmp_path)
    (pack,) = sorted((path / "blobs").glob("*.pack"))
    whole = pack.stat().st_size
    record = B._record.pack(B.CHUNK, 9_000, hashlib.sha256(b"x").digest(), 0) + rand(3_000, 5)
    with open(pack, "ab") as f:
        f.write({"zeros": bytes(5_000), "cut-header": record[:20], "cut-payload": record}[tail])
    with Brain.open(path) as brain:
        for i in range(FILES):
            assert read_file(brain, f"/f{i}.bin") == rand(20_000, i)
        write_file(brain, "/new.bin", rand(7_000, 98))
        assert read_file(brain, "/new.bin") == rand(7_000, 98)
    assert records(pack)[-1][0] >= whole and pack.read_bytes()[whole : whole + 1] in (B.CHUNK, B.RECIPE)
    with Brain.attach(path) as attached:
        assert [read_file(attached, f"/f{i}.bin") for i in range(FILES)] == [rand(20_000, i) for i in range(FILES)]


@pytest.mark.parametrize("how", ["sealed-cut", "sealed-tail-garbage", "header"])
def test_a_sealed_pack_cut_short_or_a_bad_pack_header_refuses_by_name(tmp_path: Path, how: str) -> None:
    """Only the last pack may end in an append that never landed: a sealed pack cut short (mid-record or
    mid-header), or any pack whose header does not check, is ``torn-blob-pack``, and nothing of it is served."""
    folder = tmp_path / "blobs"
    store = B.BlobStore(folder, writable=True, seal_bytes=30_000)
    stored = [store.put(rand(20_000, i)) for i in range(4)]
    store.close()
    packs = sorted(folder.glob("*.pack"))
    assert len(packs) >= 3
    if how == "sealed-cut":
        os.truncate(packs[0], packs[0].stat().st_size - 100)
    elif how == "sealed-tail-garbage":
        os.truncate(packs[0], records(packs[0])[-1][0] + 20)  # a record header cut short, in a sealed pack
    else:
        flip(packs[-1], 2)
    reader = B.BlobStore(folder, writable=False)
    for s in stored:
        with pytest.raises(R.StoreUnservableError) as exc:
            reader.read_all(s.address)
        assert exc.value.reason == "torn-blob-pack"


@pytest.mark.parametrize("where", ["recipe", "chunk-key", "missing-pack"])
def test_a_damaged_recipe_or_key_or_a_missing_pack_is_blob_corrupt_and_never_served(tmp_path: Path, where: str) -> None:
    """A recipe whose payload fails its crc32, a chunk whose record names another key (so the content's own chunk
    is in no pack), or content whose pack is gone, is BlobCorruptError naming the address and the path: not a
    byte of it is served, and the other files still read."""
    path = with_files(tmp_path)
    (pack,) = sorted((path / "blobs").glob("*.pack"))
    recipes = [r for r in records(pack) if r[1] == B.RECIPE]
    if where == "recipe":
        flip(pack, recipes[1][0] + B.RECORD_HEADER_SIZE + 10)  # /f1.bin's recipe
    elif where == "chunk-key":
        first = [r for r in records(pack) if recipes[0][0] < r[0] < recipes[1][0]][0]  # /f1.bin's first chunk
        flip(pack, first[0] + 1 + 4 + 5)  # inside its key
    else:
        pack.unlink()
    with Brain.open(path) as brain:
        with pytest.raises(R.BlobCorruptError) as exc:
            read_file(brain, "/f1.bin")
        assert exc.value.path == "/f1.bin"
        assert exc.value.address == brain.stat({"path": "/f1.bin"})["node"]["hash"]
        if where != "missing-pack":
            assert read_file(brain, "/f0.bin") == rand(20_000, 0)


# -- 6. the lease files -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("how", ["zeros", "cut", "garbage", "fields"])
def test_a_damaged_lease_record_is_a_holder_gone_and_the_log_is_replayed(tmp_path: Path, how: str) -> None:
    """A lease file whose record does not read (zeros, cut, garbage, or a heartbeat or hostname of the wrong type)
    names no live holder once its lock is free: the claim is ``stale-after-crash`` and the open replays the log,
    never a crash of the open on the record's fields."""
    path = crashed(tmp_path, 3)
    lock = path / "locks" / L.LOCK
    if how == "fields":
        record = json.loads(lock.read_bytes())
        lock.write_bytes(json.dumps({**record, "hostname": ["x"], "heartbeat": "soon"}).encode().ljust(L.RECORD_SIZE))
    else:
        damage(lock, how)
    with Brain.open(path) as brain:
        assert brain.claim.claim_path == "stale-after-crash" and brain.head == 3
        assert "recovered-after-crash" in [w["code"] for w in brain.warnings]


def test_an_emptied_lease_file_is_a_fresh_claim_and_the_log_is_still_replayed(tmp_path: Path) -> None:
    """An empty lease file (a claim that died before its record landed, or a record emptied) names no holder: the
    claim is ``fresh``, and the open replays the log past the flushed generation as every open does, so every
    acknowledged commit is there (only the crash's own sweep of unreferenced blob records is not due)."""
    path = crashed(tmp_path, 3)
    damage(path / "locks" / L.LOCK, "empty")
    with Brain.open(path) as brain:
        assert brain.claim.claim_path == "fresh" and brain.head == 3
        assert [brain.get(f"k{i}")["entity"] is not None for i in range(3)] == [True] * 3


@pytest.mark.parametrize("how", ["zeros", "cut", "garbage", "empty"])
def test_a_damaged_close_record_is_read_as_a_crash_never_as_a_clean_close(tmp_path: Path, how: str) -> None:
    """A clean-close record that does not read cannot vouch for the close: the claim takes the crash path, replays
    the log and says so; every acknowledged row is there."""
    path = new_store(tmp_path)
    with Brain.open(path) as brain:
        fill(brain, 3)
        lock = (path / "locks" / L.LOCK).read_bytes()
    (path / "locks" / L.LOCK).write_bytes(lock)  # the lease file a close did not get to remove
    damage(path / "locks" / L.CLOSE, how)
    with Brain.open(path) as brain:
        assert brain.claim.claim_path == "stale-after-crash"
        assert [brain.get(f"k{i}")["entity"] is not None for i in range(3)] == [True] * 3


# -- 7. the files the server reads: keys, issuers, the revoked list, TLS -----------------------------------------

ADA = "bky_damage_tests_ada_0123456789"
BOB = "bky_damage_tests_bob_0123456789"


def keys_text() -> str:
    return f"# keys\n{ADA}  person:ada  b1\n{BOB}  person:bob  b1 b2\n"


def test_a_keys_or_issuers_file_cut_anywhere_never_reads_as_a_shorter_line() -> None:
    """Cut at every byte, the keys file and the issuers file either refuse (by line) or read as a prefix of their
    whole lines, each exactly as written: a cut inside the last brain name or kid is refused (the last line has
    no newline after it), never read as a shorter name that may be another brain's."""
    keys = f"# keys\n{ADA}  person:ada  b1\n{BOB}  person:bob  team teams\n".encode()
    whole = parse_keys(keys)
    issuers = issuers_text(("idp", KEY_A, "k1"), ("idp", KEY_B, "k12")).encode()
    whole_issuers = {(k.issuer, k.kid) for keys_ in T.parse_issuers(issuers).values() for k in keys_}
    for n in range(len(keys)):
        try:
            table = parse_keys(keys[:n])
        except KeysFileError:
            continue
        assert all(whole[key] == principal for key, principal in table.items()), n
    for n in range(len(issuers)):
        try:
            read = T.parse_issuers(issuers[:n])
        except T.IssuersFileError:
            continue
        assert {(k.issuer, k.kid) for keys_ in read.values() for k in keys_} <= whole_issuers, n


@pytest.mark.parametrize("how", ["zeros", "cut-in-a-key", "cut-in-a-principal", "garbage"])
def test_a_damaged_keys_file_refuses_the_start_and_a_reload_keeps_the_last_good_table(tmp_path: Path, how: str) -> None:
    """The keys file has no checksum, so every line is parsed whole: zeros, garbage, or a cut that leaves a line
    short of its fields refuses the start by line (KeysFileError) and, once running, is logged and the last
    good table kept; a key is never read from half a line."""
    path = place(tmp_path / "keys", keys_text())
    table = KeyTable.open(path)
    text = keys_text().encode()
    cut = {"cut-in-a-key": text.index(BOB.encode()) + 20, "cut-in-a-principal": text.index(b"person:bob") + 6}
    if how in cut:
        damaged = text[: cut[how]]
    elif how == "zeros":
        damaged = bytes(len(text))
    else:
        damaged = random.Random(3).randbytes(len(text))
    placed = tmp_path / "placed"
    placed.write_bytes(damaged)
    placed.chmod(0o600)
    with pytest.raises(KeysFileError) as exc:
        KeyTable.open(placed)
    assert exc.value.line is not None and ADA not in str(exc.value) and BOB not in str(exc.value)
    os.replace(placed, path)
    assert table.refresh(now=time.monotonic() + 10) is False  # refused: the last good table stays
    assert table.authenticate(f"Bearer {BOB}").id == "person:bob"


@pytest.mark.parametrize("how", ["zeros", "cut-in-a-key", "garbage"])
def test_a_damaged_issuers_file_refuses_the_start_and_a_reload_keeps_the_last_good_table(
    tmp_path: Path, how: str
) -> None:
    """An issuers file zeroed, garbled or cut inside a key refuses the start by line (IssuersFileError); once
    running, a damaged reload keeps the last good issuers, so a token is never judged against half a key."""
    issuers = place(tmp_path / "issuers", issuers_text(("idp", KEY_A, "k1")))
    verifier = T.TokenVerifier.open(issuers, tmp_path / "revoked.json", now=0.0)
    text = issuers.read_bytes()
    damaged = {
        "zeros": bytes(len(text)),
        "cut-in-a-key": text[: text.index(b"ed25519:") + 30],
        "garbage": random.Random(4).randbytes(len(text)),
    }[how]
    placed = place(tmp_path / "placed", "")
    placed.write_bytes(damaged)
    with pytest.raises(T.IssuersFileError):
        T.TokenVerifier.open(placed, tmp_path / "revoked.json")
    os.replace(placed, issuers)
    assert verifier.verify(sign(KEY_A, claims(kid="k1")), now=NOW, monotonic=10.0).id == "agent:anima"


@pytest.mark.parametrize("how", ["cut", "empty", "zeros", "garbage"])
def test_a_damaged_revoked_list_is_never_read_as_nothing_revoked(tmp_path: Path, how: str) -> None:
    """The revoked list is one JSON document, so a cut one does not parse: cut, emptied, zeroed or garbled, it
    refuses the start (RevokedFileError); once running, the last good list stays in force and a revoked
    token stays refused (BRAINY_KEY_REVOKED), as does a revoked static key (UnauthenticatedError), also when
    a door reads the list afresh (the keys listing)."""
    issuers = place(tmp_path / "issuers", issuers_text(("idp", KEY_A, "k1")))
    revoked = place(tmp_path / "revoked.json", revoked_text(("gone", NOW + 3600), (fingerprint(BOB), NOW + 3600)))
    verifier = T.TokenVerifier.open(issuers, revoked, now=0.0)
    keys = KeyTable.open(place(tmp_path / "keys", keys_text()), token_verifier=verifier, revoked=verifier.revoked)
    damage(revoked, how)
    with pytest.raises(T.RevokedFileError):
        T.TokenVerifier.open(issuers, revoked)
    token = sign(KEY_A, claims(kid="k1", jti="gone"))
    for at in (10.0, 20.0):
        with pytest.raises(R.BRAINY_KEY_REVOKED):
            verifier.verify(token, now=NOW, monotonic=at)
    verifier.revoked.load()  # a door's fresh read: the damage is logged, the last good list kept
    assert fingerprint(BOB) in verifier.revoked.value
    with pytest.raises(R.UnauthenticatedError):
        keys.authenticate(f"Bearer {BOB}", now=30.0)


def test_a_revoked_list_that_vanishes_keeps_its_revocations_also_for_a_fresh_read(tmp_path: Path) -> None:
    """A revoked list removed while running (a copy step that deletes before it writes) keeps the last good list,
    on the request path and when a door reads it afresh (``Placed.load`` once loaded): a revocation is never
    dropped by a missing file. (The first read, at start, takes a missing file as nothing revoked.)"""
    issuers = place(tmp_path / "issuers", issuers_text(("idp", KEY_A, "k1")))
    revoked = place(tmp_path / "revoked.json", revoked_text(("gone", NOW + 3600)))
    verifier = T.TokenVerifier.open(issuers, revoked, now=0.0)
    revoked.unlink()
    verifier.revoked.load()
    assert verifier.revoked.value == {"gone": NOW + 3600}
    with pytest.raises(R.BRAINY_KEY_REVOKED):
        verifier.verify(sign(KEY_A, claims(kid="k1", jti="gone")), now=NOW, monotonic=10.0)


@pytest.mark.parametrize("how", ["missing", "cut", "empty", "zeros", "garbage"])
def test_a_revocation_on_a_missing_or_damaged_list_keeps_every_revocation_in_force(tmp_path: Path, how: str) -> None:
    """``host.revokeKey`` over a revoked list that vanished or no longer parses: the new revocation is written
    beside every one the server held in force, so none is dropped; a damaged file is moved aside whole (never
    written over, its name logged), never refused, and the next start reads the new list."""
    issuers = place(tmp_path / "issuers", issuers_text(("idp", KEY_A, "k1")))
    revoked = place(tmp_path / "revoked.json", revoked_text(("gone", NOW + 3600), (fingerprint(BOB), NOW + 3600)))
    verifier = T.TokenVerifier.open(issuers, revoked, now=0.0)
    before = revoked.read_bytes()
    if how == "missing":
        revoked.unlink()
    else:
        damage(revoked, how)
    damaged = revoked.read_bytes() if how != "missing" else None
    assert T.add_revocation(revoked, fingerprint(ADA), T.STATIC_KEY_EXP, verifier.revoked.value)
    assert T.parse_revoked(revoked.read_bytes()) == {
        "gone": NOW + 3600,
        fingerprint(BOB): NOW + 3600,
        fingerprint(ADA): T.STATIC_KEY_EXP,
    }
    aside = sorted(tmp_path.glob("revoked.json.damaged-*"))
    if how == "missing":
        assert aside == []
    else:
        assert [p.read_bytes() for p in aside] == [damaged] and damaged != before
    assert not T.add_revocation(revoked, fingerprint(ADA), T.STATIC_KEY_EXP, verifier.revoked.value)
    restarted = T.TokenVerifier.open(issuers, revoked)
    assert set(restarted.revoked.value) == {"gone", fingerprint(BOB), fingerprint(ADA)}


@pytest.mark.parametrize("how", ["cut", "zeros", "empty"])
@pytest.mark.parametrize("which", ["cert", "key"])
def test_a_cut_or_zeroed_tls_file_refuses_the_start_by_name(tmp_path: Path, which: str, how: str) -> None:
    """The h3 listener's certificate and key are judged before anything is bound: cut short, zeroed or emptied,
    a file holds no whole PEM block, and the start is refused by the certificate refusal's own name."""
    pki = make_pki(tmp_path)
    damage(pki.cert if which == "cert" else pki.key, how)
    with pytest.raises(tls.CertificateError) as exc:
        tls.judge(str(pki.cert), str(pki.key), 1)
    want = tls.CertificateBlockMissingError if which == "cert" else tls.PrivateKeyBlockMissingError
    assert type(exc.value) is want


@pytest.mark.parametrize("which", ["cert", "key"])
def test_a_tls_file_with_a_flipped_byte_is_judged_by_name_or_loads(tmp_path: Path, which: str) -> None:
    """A byte flipped anywhere inside a PEM body (sampled positions, every bit pattern of a random byte): the judge
    refuses by a certificate refusal's own name, or accepts a pair the h3 listener's QUIC stack then loads;
    never a bare ValueError or UnsupportedAlgorithm from the parser."""
    from aioquic.quic.configuration import QuicConfiguration

    pki = make_pki(tmp_path)
    target = pki.cert if which == "cert" else pki.key
    good = target.read_bytes()
    body_from, body_to = good.index(b"-----\n") + 6, good.rindex(b"\n-----END")
    rng = random.Random(11)
    refused = accepted = 0
    for at in rng.sample(range(body_from, body_to), 120):
        damaged = bytearray(good)
        damaged[at] ^= 1 << rng.randrange(8)
        target.write_bytes(bytes(damaged))
        try:
            judged = tls.judge(str(pki.cert), str(pki.key), 1)
        except tls.CertificateError:
            refused += 1
            continue
        assert judged is not None
        QuicConfiguration(is_client=False).load_cert_chain(pki.cert, pki.key)
        accepted += 1
    assert refused > 0  # the damage is seen (a flip in a signed part may pass: the client's verification refuses)


# -- 8. over the wire ----------------------------------------------------------------------------------------


def call(server: ServerProcess, method: str, path: str, doc: Any = None, key: str = SERVICE_KEY) -> Answer:
    headers: tuple[tuple[str, str], ...] = (("Authorization", f"Bearer {key}"),)
    if doc is not None:
        headers += (("Content-Type", "application/json"),)
    body = json.dumps(doc).encode() if doc is not None else None
    return curl(server, method, path, body, headers=headers, timeout=TIMEOUT)


@pytest.mark.slow
def test_a_served_store_with_damage_answers_its_named_refusal_never_a_500_nor_its_rows(tmp_path: Path) -> None:
    """Over a real ``brainy serve --brains-dir``: a brain whose MANIFEST is damaged answers 409
    StoreUnservableError ``unreadable-generation-stamp`` and one whose log has a damaged frame length 409
    FactLogRefusedError, on every door, never a 500 and never rows; a damaged archive marker keeps its brain
    archived (423, ``archivedAt`` 0); a brain directory without IDENTITY is no store (404 StoreNotFoundError); a
    revoked key stays refused, and listed revoked, after the revoked list
    vanished; the healthy brain beside them answers throughout."""
    brains = tmp_path / "brains"
    damaged = {}
    for name in ("stamp", "frames", "shelved", "nameless"):
        store = crashed(brains, 3, name) if name == "frames" else flushed(brains, name)
        damaged[name] = store
    damage(damaged["stamp"] / "MANIFEST", "flipped")
    damage(damaged["nameless"] / "IDENTITY", "missing")
    seg = segments(damaged["frames"])[-1]
    flip(seg, frame_starts(seg)[0] + 3)
    (brains / ".archived").mkdir(parents=True)
    (brains / ".archived" / "shelved.json").write_bytes(b'{"brain": "shelved", "archiv')  # cut short
    with start_server(brains, extra_args=("--brains-dir", str(brains))) as server:
        (server.keys_path.parent / "keys").write_text(
            server.keys_path.read_text() + f"{ADA}  person:ada  *\n"
        )  # a placed line: the gate reloads it within a second
        server.keys_path.chmod(0o600)
        time.sleep(0.5)
        for name, refusal, reason in (
            ("stamp", "StoreUnservableError", "unreadable-generation-stamp"),
            ("frames", "FactLogRefusedError", "checksum-mismatch"),
        ):
            for method, door, doc in (("GET", "counts", None), ("POST", "add", {"type": "concept", "data": "x"})):
                answer = call(server, method, f"/v1/brains/{name}/{door}", doc, key=ADA)
                assert answer.status == 409 and answer.refusal == refusal, answer
                assert answer.doc["error"]["reason"] == reason
        answer = call(server, "GET", "/v1/brains/nameless/counts", key=ADA)
        assert answer.status == 404 and answer.refusal == "StoreNotFoundError", answer
        answer = call(server, "GET", "/v1/brains/shelved/counts", key=ADA)
        assert answer.status == 423 and answer.refusal == "BrainArchivedError", answer
        assert answer.doc["error"]["archivedAt"] == 0
        assert call(server, "GET", f"/v1/brains/{BRAIN}/counts", key=PERSON_KEY).status == 200

        assert call(server, "DELETE", f"/v1/keys/{fingerprint(ADA)}").status == 200
        assert call(server, "GET", f"/v1/brains/{BRAIN}/counts", key=ADA).status == 401
        (server.keys_path.parent / "revoked.json").unlink()
        listed = {k["sha256"]: k for k in call(server, "GET", "/v1/keys").doc["keys"]}
        assert listed[fingerprint(ADA)]["revoked"] is True
        time.sleep(T.RELOAD_INTERVAL + 0.5)
        answer = call(server, "GET", f"/v1/brains/{BRAIN}/counts", key=ADA)
        assert answer.status == 401 and answer.refusal == "UnauthenticatedError", answer
        for other, harm in (("1" * 64, None), ("2" * 64, "garbage")):  # revoking over a vanished, a damaged list
            if harm:
                damage(server.keys_path.parent / "revoked.json", harm)
            assert call(server, "DELETE", f"/v1/keys/{other}").status == 200
            listed = {k["sha256"]: k for k in call(server, "GET", "/v1/keys").doc["keys"]}
            assert listed[fingerprint(ADA)]["revoked"] is True
            answer = call(server, "GET", f"/v1/brains/{BRAIN}/counts", key=ADA)
            assert answer.status == 401 and answer.refusal == "UnauthenticatedError", answer
        assert {"1" * 64, "2" * 64, fingerprint(ADA)} <= set(
            T.parse_revoked((server.keys_path.parent / "revoked.json").read_bytes())
        )
    assert damaged["stamp"].joinpath("MANIFEST").exists() and seg.stat().st_size > log_.HEADER_SIZE


def test_another_stores_snapshots_and_tables_under_the_same_names_are_never_read_as_this_ones(tmp_path: Path) -> None:
    """Two stores with the same history of commits write snapshots and tables under the same names and stamps.
    Another store's projection chain and aggregate snapshot copied over this one's are not trusted (their heads
    name another storeId): both are rebuilt from this store's rows and answer its rows, never the other's; another
    store's table under the name the MANIFEST gives is refused ``torn-sstable`` (its footer is not the one the
    MANIFEST names)."""
    from brainy.engine import init_store

    counts = {"name": "bycat", "source": {"type": "product"}, "groupBy": ["cat"], "metrics": {"n": {"op": "count"}}}
    mine, other = tmp_path / "mine", tmp_path / "other"
    for store, cat in ((mine, "a"), (other, "b")):
        init_store(store)
        with Brain.open(store) as brain:
            brain.defineAggregate(counts, caller="person:tester")
            for _ in range(2):
                brain.add({"type": "product", "metadata": {"cat": cat}}, caller="person:tester")
            brain.find({"where": {"cat": cat}})
            brain.aggregate({"name": "bycat"})
            brain.flush()
    names = sorted(p.name for p in (mine / "index").iterdir() if p.suffix in (".proj", ".projd", ".agg"))
    assert names and names == sorted(
        p.name for p in (other / "index").iterdir() if p.suffix in (".proj", ".projd", ".agg")
    )
    for name in names:
        shutil.copyfile(other / "index" / name, mine / "index" / name)
    with Brain.open(mine) as brain:
        assert brain.find({"where": {"cat": "a"}})["total"] == 2
        assert brain.find({"where": {"cat": "b"}})["total"] == 0
        assert [(row["groupKey"], row["metrics"]["n"]) for row in brain.aggregate({"name": "bycat"})["rows"]] == [
            ({"cat": "a"}, 2)
        ]
    table = next((mine / "sst").iterdir())
    shutil.copyfile(other / "sst" / table.name, table)
    for opener in (Brain.open, Brain.attach):
        with pytest.raises(R.StoreUnservableError) as refused:
            opener(mine)
        assert refused.value.fields == {"reason": "torn-sstable", "file": f"sst/{table.name}"}


@pytest.mark.parametrize("suffix", [".vec", ".vecd", ".vecq", ".vecp"])
def test_another_stores_vector_snapshots_under_the_same_names_are_never_read_as_this_ones(
    tmp_path: Path, monkeypatch, suffix: str
) -> None:
    """Two stores with the same history of commits, each its own vectors, write vector snapshots under the same
    names and stamps. Another store's base, delta, quantised or partitioned copy copied over this one's names
    another storeTag: it is not trusted (the warnings say so), the vectors are this store's rows', and the next
    flush writes this store's own again."""
    from brainy.engine import init_store
    from brainy.index import vector_partitions as P

    monkeypatch.setattr(P, "PARTITION_SLOTS", 300)
    monkeypatch.setattr(P, "LIST_TARGET", 50)
    mine, other = tmp_path / "mine", tmp_path / "other"
    rng = np.random.default_rng(5)
    vectors = {store: rng.standard_normal((500, 384)).astype(np.float32) for store in (mine, other)}
    for store, x in vectors.items():
        init_store(store)
        with Brain.open(store, flush_bytes=1 << 30) as brain:
            brain.addMany({"items": [{"type": "thing", "id": f"v{i}", "vector": x[i].tolist()} for i in range(400)]})
            brain.find({"vector": x[0].tolist(), "limit": 1})
            brain.flush()
            brain.addMany(
                {"items": [{"type": "thing", "id": f"v{i}", "vector": x[i].tolist()} for i in range(400, 500)]}
            )
            brain.flush()
    names = sorted(p.name for p in (mine / "index").iterdir() if p.suffix == suffix)
    assert names and names == sorted(p.name for p in (other / "index").iterdir() if p.suffix == suffix)
    for name in names:
        assert (mine / "index" / name).read_bytes() != (other / "index" / name).read_bytes()
        shutil.copyfile(other / "index" / name, mine / "index" / name)
    x = vectors[mine]
    with Brain.open(mine) as brain:
        for i in (0, 250, 450):  # in the base and in the delta
            [hit] = brain.find({"vector": x[i].tolist(), "limit": 1})["results"]
            assert hit["entity"]["key"] == f"v{i}" and hit["score"] == pytest.approx(1, abs=1e-5)
        said = [w["message"] for w in brain.warnings if w["code"] == "vectors-rebuilt"]
        assert any("another store's" in m for m in said), said
    with Brain.open(mine) as brain:  # the close wrote this store's own
        [hit] = brain.find({"vector": x[7].tolist(), "limit": 1})["results"]
        assert hit["entity"]["key"] == "v7"
        assert not [w for w in brain.warnings if w["code"] == "vectors-rebuilt"]
    for name in (p.name for p in (mine / "index").iterdir() if p.suffix == suffix):
        assert (
            not (other / "index" / name).exists()
            or (mine / "index" / name).read_bytes() != (other / "index" / name).read_bytes()
        )


def test_another_stores_manifest_and_a_missing_table_refuse_by_name(tmp_path: Path) -> None:
    """A whole MANIFEST of another store is refused (its storeId is not IDENTITY's), never served; a table the
    MANIFEST names that is not there refuses ``torn-sstable`` naming it, for the writer and for an attach."""
    from brainy.contract import refusals as R
    from brainy.engine import Brain, init_store

    mine, other = tmp_path / "mine", tmp_path / "other"
    for store in (mine, other):
        init_store(store)
        with Brain.open(store) as brain:
            brain.add({"type": "document", "data": store.name})
            brain.flush()
    (mine / "MANIFEST").write_bytes((other / "MANIFEST").read_bytes())
    for opener in (Brain.open, Brain.attach):
        with pytest.raises(R.StoreUnservableError) as refused:
            opener(mine)
        assert refused.value.fields["reason"] == "unreadable-generation-stamp"
    table = next((other / "sst").iterdir())
    table.unlink()
    for opener in (Brain.open, Brain.attach):
        with pytest.raises(R.StoreUnservableError) as refused:
            opener(other)
        assert refused.value.fields == {"reason": "torn-sstable", "file": f"sst/{table.name}"}
