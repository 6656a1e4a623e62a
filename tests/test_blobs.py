"""Blobs (docs/store-format.md, "Blobs"): content-defined chunks, packs, dedup, verified reads, crashes.

The chunker's two twins give the same cuts; content round-trips byte for byte; a rewrite with a small
change stores few new bytes; every read is verified and damage refuses BlobCorruptError naming the
file; a torn pack tail is dropped; a reader sees what a live writer appends; a SIGKILL during writes
loses no content whose put() had returned.
"""

from __future__ import annotations

import hashlib
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from brainy.contract import refusals as R
from brainy.store import blobs as B

PROCS = Path(__file__).parent / "procs"


def rand(n: int, seed: int = 1) -> bytes:
    return random.Random(seed).randbytes(n)


# -- the chunker ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("size", [0, 1, 8191, 8192, 8193, 16384, 65536, 65537, 300_000])
def test_both_twins_cut_alike(cdc_twin, size):
    from brainy._speedups import load

    data = rand(size, size)
    assert cdc_twin.cuts(data) == load("cdc", "python").cuts(data)


def test_cuts_respect_the_sizes_and_cover_the_content(cdc_twin):
    data = rand(2_000_000, 7)
    ends = cdc_twin.cuts(data)
    sizes = [b - a for a, b in zip([0] + ends, ends)]
    assert ends[-1] == len(data) and sum(sizes) == len(data)
    assert all(cdc_twin.MIN_SIZE < s <= cdc_twin.MAX_SIZE for s in sizes[:-1])
    assert 12 << 10 < sum(sizes) / len(sizes) < 40 << 10  # around the average the format aims at


def test_a_cut_depends_only_on_the_bytes_since_the_last(cdc_twin):
    """Chunking restarted at any cut gives the same cuts after it (what an append relies on)."""
    data = rand(800_000, 3)
    ends = cdc_twin.cuts(data)
    for i in (0, 3, len(ends) // 2, len(ends) - 2):
        assert cdc_twin.cuts(data, ends[i]) == ends[i + 1 :]


def test_a_change_in_the_middle_moves_only_nearby_cuts(cdc_twin):
    data = bytearray(rand(1_000_000, 4))
    before = set(cdc_twin.cuts(bytes(data)))
    data[500_000:500_010] = b"0123456789"
    after = set(cdc_twin.cuts(bytes(data)))
    assert len(before ^ after) <= 6


# -- packs ---------------------------------------------------------------------------------------------


def test_content_round_trips_byte_for_byte(tmp_path):
    store = B.BlobStore(tmp_path / "blobs", writable=True)
    for n in (0, 1, 5000, 70_000, 3_000_000):
        data = rand(n, n)
        stored = store.put(data)
        assert stored.address == B.address(hashlib.sha256(data).digest()) and stored.size == n
        assert store.read_all(stored.address) == data and store.size(stored.address) == n
    store.close()
    reopened = B.BlobStore(tmp_path / "blobs", writable=False)
    assert reopened.read_all(B.address(hashlib.sha256(rand(70_000, 70_000)).digest())) == rand(70_000, 70_000)


def test_the_same_bytes_are_stored_once_and_a_small_edit_stores_little(tmp_path):
    store = B.BlobStore(tmp_path / "blobs", writable=True)
    data = bytearray(rand(20 << 20, 9))
    first = store.put(bytes(data))
    again = store.put(bytes(data))
    assert again.address == first.address and again.new_bytes == 0
    data[10 << 20 : (10 << 20) + 1024] = rand(1024, 10)
    edited = store.put(bytes(data))
    assert edited.address != first.address and edited.new_bytes < 256 << 10
    assert store.read_all(edited.address) == bytes(data)
    assert store.disk_bytes() < (20 << 20) + (256 << 10) + 4096


def test_an_append_shares_every_chunk_but_the_last(tmp_path):
    store = B.BlobStore(tmp_path / "blobs", writable=True)
    base = rand(1_000_000, 11)
    old = store.put(base)
    grown = store.append(old.address, b"and a little more")
    assert grown.address == B.address(hashlib.sha256(base + b"and a little more").digest())
    assert grown.new_bytes < (64 << 10) + 1024 and store.read_all(grown.address) == base + b"and a little more"
    empty = store.put(b"")
    assert store.append(empty.address, b"x").address == store.put(b"x").address


def test_a_measure_answers_what_a_put_or_append_would_and_writes_nothing(tmp_path):
    """``measuring()`` cuts and hashes as a put and an append do (same address, size, chunks and new bytes)
    without writing a byte, even on a read-only store: what a staged, never committed write names."""
    store = B.BlobStore(tmp_path / "blobs", writable=True)
    base = rand(300_000, 21)
    old = store.put(base)
    store.close()
    reader = B.BlobStore(tmp_path / "blobs", writable=False)
    disk = reader.disk_bytes()
    fresh, grown = rand(200_000, 22), b"and a little more"
    measured_put = reader.measuring().put(fresh)
    measured_append = reader.measuring().append(old.address, grown)
    assert reader.measuring().put(base).new_bytes == 0  # stored already: nothing would be new
    assert reader.disk_bytes() == disk and reader.records() == B.BlobStore(tmp_path / "blobs", False).records()
    writer = B.BlobStore(tmp_path / "blobs", writable=True)
    assert writer.put(fresh) == measured_put
    assert writer.append(old.address, grown) == measured_append


def test_a_flipped_byte_in_a_chunk_is_refused_by_name_and_never_served(tmp_path):
    store = B.BlobStore(tmp_path / "blobs", writable=True)
    data = rand(200_000, 12)
    stored = store.put(data)
    store.close()
    (pack,) = sorted((tmp_path / "blobs").glob("*.pack"))
    raw = bytearray(pack.read_bytes())
    raw[B.HEADER_SIZE + B.RECORD_HEADER_SIZE + 100] ^= 0xFF  # inside the first chunk's payload
    pack.write_bytes(bytes(raw))
    reader = B.BlobStore(tmp_path / "blobs", writable=False)
    with pytest.raises(R.BlobCorruptError) as exc:
        reader.read_all(stored.address, "/notes/a.bin")
    assert exc.value.fields == {"address": stored.address, "path": "/notes/a.bin"}
    served = []
    with pytest.raises(R.BlobCorruptError):
        for piece in reader.read(stored.address, "/notes/a.bin"):
            served.append(piece)
    assert served == []  # the first chunk is the damaged one: not a byte of it went out


def test_a_torn_record_at_the_end_is_dropped_and_cut_away(tmp_path):
    store = B.BlobStore(tmp_path / "blobs", writable=True)
    kept = store.put(rand(50_000, 13))
    store.close()
    (pack,) = sorted((tmp_path / "blobs").glob("*.pack"))
    whole = pack.stat().st_size
    with open(pack, "ab") as f:
        f.write(B._record.pack(B.CHUNK, 5000, b"\1" * 32, 0) + b"partial")
    reader = B.BlobStore(tmp_path / "blobs", writable=False)
    assert reader.read_all(kept.address) == rand(50_000, 13)
    writer = B.BlobStore(tmp_path / "blobs", writable=True)
    later = writer.put(rand(30_000, 14))
    assert pack.stat().st_size > whole and writer.read_all(later.address) == rand(30_000, 14)
    after = B.BlobStore(tmp_path / "blobs", writable=False)
    assert after.read_all(later.address) == rand(30_000, 14) and after.read_all(kept.address) == rand(50_000, 13)


def test_packs_seal_and_reads_cross_them(tmp_path):
    store = B.BlobStore(tmp_path / "blobs", writable=True, seal_bytes=1 << 20)
    contents = [rand(400_000, 20 + i) for i in range(8)]
    addresses = [store.put(c).address for c in contents]
    assert len(list((tmp_path / "blobs").glob("*.pack"))) >= 3
    reader = B.BlobStore(tmp_path / "blobs", writable=False)
    assert [reader.read_all(a) for a in addresses] == contents


def test_a_reader_sees_what_a_live_writer_appends(tmp_path):
    writer = B.BlobStore(tmp_path / "blobs", writable=True)
    first = writer.put(b"first")
    reader = B.BlobStore(tmp_path / "blobs", writable=False)
    assert reader.read_all(first.address) == b"first"
    second = writer.put(rand(100_000, 30))
    assert reader.read_all(second.address) == rand(100_000, 30)
    with pytest.raises(R.BRAINY_WRITER_LOCKED):
        reader.put(b"no")


def test_unreferenced_records_are_what_a_sweep_could_collect(tmp_path):
    store = B.BlobStore(tmp_path / "blobs", writable=True)
    keep = store.put(rand(100_000, 40))
    store.put(rand(100_000, 41))
    records, size = store.unreferenced([keep.address])
    assert records >= 2 and 100_000 <= size < 100_000 + 2000
    assert store.unreferenced([keep.address, B.address(hashlib.sha256(rand(100_000, 41)).digest())]) == (0, 0)


def test_the_sweep_collects_what_nothing_reaches_and_keeps_every_referenced_byte(tmp_path):
    """Garbage past half a pack rewrites it: the live records are copied (verified) to a fresh last pack and
    the old pack goes; a reader that indexed the old pack finds the copies; a pack with little garbage is
    left whole."""
    store = B.BlobStore(tmp_path / "blobs", writable=True, seal_bytes=400_000)
    kept = [store.put(rand(150_000, 50))]  # pack 1: 150 KB live ...
    lost = [store.put(rand(150_000, 60 + i)) for i in range(2)]  # ... 300 KB garbage, then it seals
    kept += [store.put(rand(200_000, 70)), store.put(rand(100_000, 71))]  # pack 2: live
    store.put(rand(40_000, 72))  # and a little garbage
    seeds = (50, 70, 71)
    live = [s.address for s in kept]
    reader = B.BlobStore(tmp_path / "blobs", writable=False)
    assert reader.read_all(kept[0].address) == rand(150_000, 50)  # indexed before the sweep
    before, garbage = store.disk_bytes(), store.unreferenced(live)
    swept = store.sweep(lambda: live)
    assert swept.packs == 1 and not (tmp_path / "blobs" / B.pack_name(1)).exists()
    assert swept.freed == before - store.disk_bytes() and swept.freed > 250_000
    assert 0 < store.unreferenced(live)[0] == garbage[0] - swept.records  # pack 2's bit of garbage stays
    for stored, seed in zip(kept, seeds):
        assert store.read_all(stored.address) == rand(stored.size, seed)
        assert reader.read_all(stored.address) == rand(stored.size, seed)  # re-indexed once pack 1 went
        assert B.BlobStore(tmp_path / "blobs", writable=False).read_all(stored.address) == rand(stored.size, seed)
    assert not store.contains(lost[0].address)  # (lost[1]'s recipe crossed into pack 2, which stays)
    with pytest.raises(R.BlobCorruptError):
        store.read_all(lost[0].address)
    assert store.put(rand(150_000, 60)).new_chunks > 0  # collected content stores anew
    store.close()
    reader.close()


def test_the_sweep_waits_for_a_write_in_flight_and_keeps_what_it_stored(tmp_path):
    """A write's content is stored before its commit names it: a sweep started in between waits for the write
    to end and only then reads what is referenced, so it never collects the content of a commit landing."""
    import threading

    store = B.BlobStore(tmp_path / "blobs", writable=True)
    committed: list[str] = []
    done: list[B.Swept] = []
    with store.writing():
        stored = store.put(rand(120_000, 80))
        sweeper = threading.Thread(target=lambda: done.append(store.sweep(lambda: list(committed), 0.01)))
        sweeper.start()
        sweeper.join(0.5)
        assert sweeper.is_alive()  # it waits for this write to end
        committed.append(stored.address)  # the commit lands before the write's span ends
    sweeper.join(10)
    assert done == [B.Swept(0, 0, 0, 0)] and store.read_all(stored.address) == rand(120_000, 80)
    assert store.sweep(lambda: [], garbage_share=0.01).records > 0  # once nothing names it, it goes
    store.close()


def test_a_write_refused_after_its_content_was_stored_counts_as_orphaned(tmp_path):
    store = B.BlobStore(tmp_path / "blobs", writable=True)
    with pytest.raises(RuntimeError):
        with store.writing() as writing:
            writing.stored(store.put(rand(90_000, 90)))
            raise RuntimeError("the commit refused")
    assert 90_000 <= store.orphaned < 92_000
    store.sweep(lambda: [])
    assert store.orphaned == 0
    store.close()


@pytest.mark.slow
def test_a_sigkill_during_writes_loses_no_content_that_was_put(tmp_path):
    """Five rounds: a writer process puts blobs (some crossing pack seals) and is killed at a random moment;
    every address it printed reads back byte for byte, and the next writer appends after the torn tail."""
    folder = tmp_path / "blobs"
    printed: list[tuple[str, int, int]] = []
    for round_ in range(5):
        proc = subprocess.Popen(
            [sys.executable, str(PROCS / "blob_writer.py"), str(folder), str(round_)], stdout=subprocess.PIPE, text=True
        )
        deadline = time.monotonic() + 20
        lines = 0
        while lines < 3 + round_ and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line.endswith("\n"):
                break
            address, size, seed = line.split()
            printed.append((address, int(size), int(seed)))
            lines += 1
        time.sleep(random.Random(round_).uniform(0, 0.05))
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        for line in proc.stdout:  # lines already written before the kill were put() answers too
            fields = line.split()
            if len(fields) == 3 and line.endswith("\n"):  # not a line the kill cut short
                printed.append((fields[0], int(fields[1]), int(fields[2])))
        proc.stdout.close()
        assert lines >= 3
        reader = B.BlobStore(folder, writable=False)
        for address, size, seed in printed:
            assert reader.read_all(address) == random.Random(seed).randbytes(size)
