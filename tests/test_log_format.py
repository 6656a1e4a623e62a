"""The fact log's laws (docs/store-format.md, "Reading the log, and what a torn tail is").

A cut-short frame at the end of the last segment is a commit that had not
landed: it is dropped and the store opens. Damage anywhere else refuses by
name, with a short reason, and is never read around.
"""

from __future__ import annotations

import os
import struct

import pytest
from helpers import fill, flip, new_store, segments

from brainy.contract import refusals as R
from brainy.engine import Brain
from brainy.store import log as log_


def _store_with_frames(tmp_path, n=3, **opts):
    path = new_store(tmp_path)
    brain = Brain.open(path, **opts)
    fill(brain, n)
    brain._lease.abandon()  # as if killed: no flush, no close record
    brain.commits.log.close()
    return path


def test_header_and_frame_sizes_are_sums_of_their_parts():
    """The constants in code are the sums the spec writes out."""
    assert log_.HEADER_SIZE == 16 == len(log_.encode_header())
    assert log_.FRAME_HEADER_SIZE == 8
    assert len(log_.encode_frame(b"xyz")) == 8 + 3


@pytest.mark.parametrize("cut", [1, 4, 7, 8, 20])
def test_truncated_trailing_frame_is_not_landed(tmp_path, cut):
    """A last frame cut short anywhere (in its header or its payload) is dropped; earlier commits stay."""
    path = _store_with_frames(tmp_path, 3)
    seg = segments(path)[-1]
    size = seg.stat().st_size
    # find the start of the third frame
    data = seg.read_bytes()
    pos = log_.HEADER_SIZE
    starts = []
    while pos < len(data):
        starts.append(pos)
        pos += 8 + struct.unpack_from("<I", data, pos)[0]
    last = starts[-1]
    os.truncate(seg, min(size - 1, last + cut))
    brain = Brain.open(path)
    try:
        assert brain.head == 2
        assert brain.get("k1")["entity"] is not None
        assert brain.get("k2")["entity"] is None
        assert any(w["code"] == "torn-tail" for w in brain.warnings)
        assert seg.stat().st_size == last  # the writer cut the tail away
        brain.add({"type": "thing", "id": "after"})
        assert brain.head == 3
    finally:
        brain.close()
    reopened = Brain.open(path)
    assert reopened.get("after")["entity"]["generation"] == 3
    reopened.close()


def test_zero_filled_tail_is_not_landed(tmp_path):
    """Zero bytes from a frame boundary to the end (a preallocated or unwritten tail) never landed."""
    path = _store_with_frames(tmp_path, 2)
    seg = segments(path)[-1]
    with open(seg, "ab") as f:
        f.write(b"\0" * 100)
    brain = Brain.open(path)
    assert brain.head == 2
    brain.close()


def test_cut_segment_header_of_last_segment_is_an_empty_segment(tmp_path):
    """A last segment whose header is cut short holds nothing yet; the writer rewrites it."""
    path = _store_with_frames(tmp_path, 2)
    os.truncate(segments(path)[-1], 5)
    brain = Brain.open(path)
    assert brain.head == 0
    brain.add({"type": "thing", "id": "x"})
    brain.close()
    assert Brain.attach(path).head == 1


def test_checksum_mismatch_in_last_segment_refuses(tmp_path):
    """A whole frame whose checksum fails is damage, not a torn tail: checksum-mismatch."""
    path = _store_with_frames(tmp_path, 3)
    flip(segments(path)[-1], log_.HEADER_SIZE + 8 + 5)  # inside the first frame's payload
    with pytest.raises(R.FactLogRefusedError) as exc:
        Brain.open(path)
    assert exc.value.reason == "checksum-mismatch"


def test_flipped_byte_in_sealed_segment_refuses(tmp_path):
    """Any damage to a sealed segment refuses with torn-sealed-segment, even in its last frame."""
    path = _store_with_frames(tmp_path, 40, segment_bytes=2048)
    segs = segments(path)
    assert len(segs) >= 3
    sealed = segs[0]
    flip(sealed, sealed.stat().st_size - 3)
    with pytest.raises(R.FactLogRefusedError) as exc:
        Brain.open(path)
    assert exc.value.reason == "torn-sealed-segment"
    with pytest.raises(R.FactLogRefusedError):
        Brain.attach(path)


def test_truncated_sealed_segment_refuses(tmp_path):
    """A sealed segment cut short is damage: only the last segment may end mid-frame."""
    path = _store_with_frames(tmp_path, 40, segment_bytes=2048)
    sealed = segments(path)[1]
    os.truncate(sealed, sealed.stat().st_size - 10)
    with pytest.raises(R.FactLogRefusedError) as exc:
        Brain.open(path)
    assert exc.value.reason in ("torn-sealed-segment", "missing-segment")


def test_missing_segment_refuses(tmp_path):
    """A gap in the generations between segments refuses with missing-segment."""
    path = _store_with_frames(tmp_path, 40, segment_bytes=2048)
    segs = segments(path)
    segs[1].unlink()
    with pytest.raises(R.FactLogRefusedError) as exc:
        Brain.open(path)
    assert exc.value.reason == "missing-segment"


def test_frame_out_of_generation_order_refuses(tmp_path):
    """A frame whose generation is not one more than the one before refuses with frame-order."""
    path = _store_with_frames(tmp_path, 1)
    seg = segments(path)[-1]
    payload = log_.encode_payload(5, 1, None, None, [])
    with open(seg, "ab") as f:
        f.write(log_.encode_frame(payload))
    with pytest.raises(R.FactLogRefusedError) as exc:
        Brain.open(path)
    assert exc.value.reason == "frame-order"


def test_unknown_op_refuses(tmp_path):
    """A whole, checksummed frame carrying an op of an unknown kind refuses with unknown-record-type."""
    path = _store_with_frames(tmp_path, 1)
    payload = log_.encode_payload(2, 1, None, None, [{"k": "z", "o": "put"}])
    with open(segments(path)[-1], "ab") as f:
        f.write(log_.encode_frame(payload))
    with pytest.raises(R.FactLogRefusedError) as exc:
        Brain.open(path)
    assert exc.value.reason == "unknown-record-type"


def test_segment_version_refuses(tmp_path):
    """A segment header of another version refuses with segment-version."""
    path = new_store(tmp_path)
    seg = segments(path)[0]
    head = log_.MAGIC + struct.pack("<I", 2)
    import zlib

    seg.write_bytes(head + struct.pack("<I", zlib.crc32(head)))
    with pytest.raises(R.FactLogRefusedError) as exc:
        Brain.open(path)
    assert exc.value.reason == "segment-version"


def test_segments_rotate_and_replay_across_them(tmp_path):
    """Commits spread over several segments replay whole, in generation order."""
    path = new_store(tmp_path)
    brain = Brain.open(path, segment_bytes=1024)
    fill(brain, 30)
    brain._lease.abandon()
    brain.commits.log.close()
    assert len(segments(path)) > 2
    names = [int(p.name[:-4]) for p in segments(path)]
    assert names[0] == 1 and names == sorted(names)
    again = Brain.open(path)
    assert again.head == 30 and again.recovery == {"replayedGenerations": 30}
    assert again.writer_block()["claimPath"] == "stale-after-crash"
    assert all(again.get(f"k{i}")["entity"]["metadata"] == {"i": i} for i in range(30))
    again.close()


def test_a_frame_written_a_few_bytes_at_a_time_reads_back_whole(tmp_path, monkeypatch):
    """A frame's header and payload are written from where they lie, the header with the payload's first piece:
    however few bytes each write takes, the segment holds encode_frame's bytes, frame after frame."""
    path = new_store(tmp_path)
    brain = Brain.open(path)
    real_write = os.write
    monkeypatch.setattr(os, "write", lambda fd, data: real_write(fd, bytes(data)[:3]))
    monkeypatch.setattr(os, "writev", lambda fd, parts: real_write(fd, b"".join(bytes(p) for p in parts)[:5]))
    brain.add({"type": "thing", "id": "small"})
    brain.add({"type": "thing", "id": "big", "data": "x" * 70_000})  # past one write's 64 KiB
    monkeypatch.undo()
    brain.close()
    brain = Brain.open(path)
    try:
        assert brain.head == 2
        assert brain.get("big")["entity"]["data"] == "x" * 70_000
    finally:
        brain.close()


def test_a_large_frames_writeback_starts_as_it_is_written(tmp_path, monkeypatch):
    """A frame of 64 KiB or more asks the kernel to start writing it back at once (sync_file_range), over exactly
    its bytes, so its fsync finds little left to write; a small frame does not ask. The hint failing changes
    nothing: the frames are durable all the same."""
    if log_._start_writeback is None:
        pytest.skip("no sync_file_range on this platform")
    path = new_store(tmp_path)
    brain = Brain.open(path)
    asked = []
    monkeypatch.setattr(log_, "_start_writeback", lambda fd, at, size, flags: asked.append((at, size, flags)) or -1)
    segment = segments(path)[-1]
    before = segment.stat().st_size
    brain.add({"type": "thing", "id": "small"})
    middle = segment.stat().st_size
    brain.add({"type": "thing", "id": "big", "data": "x" * 70_000})
    after = segment.stat().st_size
    monkeypatch.undo()
    brain.close()
    assert before < middle < after
    assert asked == [(middle, after - middle, log_.SYNC_FILE_RANGE_WRITE)]
    brain = Brain.open(path)
    try:
        assert brain.head == 2 and brain.get("big")["entity"]["data"] == "x" * 70_000
    finally:
        brain.close()


def test_a_payload_packed_in_place_is_the_payloads_bytes_and_a_held_one_is_never_overwritten():
    """The commit path packs each payload into its thread's packer (no new bytes a commit): the same bytes as
    encode_payload, with and without a write's id. A view of the last payload still held when the thread packs the
    next (a traceback keeps one) is left as it was: the next goes to a packer of its own."""
    ops = [{"k": "e", "o": "put", "row": b"r" * 3000, "vec": b"v" * 1536}]
    first = log_.encode_payload_here(log_.payload_doc(7, 11, "alice", None, ops))
    assert bytes(first) == log_.encode_payload(7, 11, "alice", None, ops)
    kept = bytes(first)
    second = log_.encode_payload_here(log_.payload_doc(8, 12, None, "svc", ops * 40, ("w1", 3)))
    assert bytes(second) == log_.encode_payload(8, 12, None, "svc", ops * 40, ("w1", 3))
    assert bytes(first) == kept  # held across the next pack, never overwritten
    assert log_.peek_generation(bytes(second), 0, len(second)) == 8
    del first, second
    third = log_.encode_payload_here(log_.payload_doc(9, 13, None, None, []))
    assert bytes(third) == log_.encode_payload(9, 13, None, None, [])


def test_a_receipts_digest_is_the_sha256_of_the_frames_payload_as_written(tmp_path):
    """transact's receipt digest is taken from the payload packed in place, before the thread packs another: the
    digest of the last frame's payload bytes as the segment holds them."""
    import hashlib

    path = new_store(tmp_path)
    brain = Brain.open(path)
    try:
        for n in range(3):
            out = brain.transact(
                {"ops": [{"door": "add", "args": {"type": "thing", "id": f"t{n}", "data": "x" * 900}}]}
            )
            data = segments(path)[-1].read_bytes()
            at, payloads = log_._header.size, []
            while at < len(data):
                size, _ = log_._frame_header.unpack_from(data, at)
                payloads.append(data[at + 8 : at + 8 + size])
                at += 8 + size
            assert out["receipt"]["digest"] == hashlib.sha256(payloads[-1]).hexdigest()
    finally:
        brain.close()


def test_a_thread_lets_go_of_a_packer_grown_past_the_payload_it_keeps(monkeypatch):
    """A payload past PAYLOAD_KEPT is packed (and read back whole), and the thread's next payload goes to a new
    packer: one large commit does not keep its megabytes for every later one."""
    monkeypatch.setattr(log_, "PAYLOAD_KEPT", 64 << 10)
    big = [{"k": "e", "o": "put", "row": b"r" * 100_000}]
    first = log_.encode_payload_here(log_.payload_doc(1, 1, None, None, big))
    assert bytes(first) == log_.encode_payload(1, 1, None, None, big)
    packer = log_._packers.packer
    del first
    small = log_.encode_payload_here(log_.payload_doc(2, 2, None, None, []))
    assert log_._packers.packer is not packer and bytes(small) == log_.encode_payload(2, 2, None, None, [])
    again = log_._packers.packer
    del small
    log_.encode_payload_here(log_.payload_doc(3, 3, None, None, []))
    assert log_._packers.packer is again  # a small one's packer is kept
