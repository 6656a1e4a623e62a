"""The fact log: one checksummed MessagePack frame per commit, fsynced before acknowledgement.

Layout (docs/store-format.md, "The fact log"):

    segment := header frame*
    header  := magic[8] "brainylg"  version: u32 = 1  crc: u32      (HEADER_SIZE = 8 + 4 + 4)
    frame   := length: u32  crc: u32  payload[length]               (FRAME_HEADER_SIZE = 4 + 4)

A cut-short frame at the end of the last segment is a commit that had not
landed, and is dropped; damage anywhere else is refused by name.
"""

from __future__ import annotations

import ctypes
import os
import struct
import threading
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgpack

from brainy._speedups import addrow
from brainy.contract import refusals as R
from brainy.store.answered import Written
from brainy.store.crc import crc32
from brainy.store.files import fsync_dir

MAGIC = b"brainylg"
VERSION = 1
HEADER_SIZE = 8 + 4 + 4
FRAME_HEADER_SIZE = 4 + 4
SEGMENT_ROTATE_BYTES = 64 << 20
# A frame is written at most this much a call: a batch's frame of megabytes written whole cost three times the
# CPU of the same bytes in 64 KiB writes (ext4 on this box: 1.9 against 0.67 ms for a 1.7 MB frame, each
# followed by its fdatasync), on the one thread that runs every commit.
WRITE_BYTES = 64 << 10
# A frame of at least this many bytes has its writeback started as soon as it is written (Linux's
# sync_file_range, SYNC_FILE_RANGE_WRITE: it returns at once): the disk takes the frame while the commit applies
# its keys, and the fsync its acknowledgement waits for has little left to write. A 2 MB frame followed by 1.7 ms of
# other work: its fdatasync 0.83 ms without, 0.13 ms with (ext4 on this box). A small frame's fsync is short anyway.
WRITEBACK_BYTES = 64 << 10
SYNC_FILE_RANGE_WRITE = 2


def _writeback() -> Callable[[int, int, int, int], int] | None:
    """libc's sync_file_range, called with the interpreter lock let go; None where there is none (not Linux)."""
    try:
        call = ctypes.CDLL(None, use_errno=True).sync_file_range
    except (AttributeError, OSError):
        return None
    call.argtypes = [ctypes.c_int, ctypes.c_longlong, ctypes.c_longlong, ctypes.c_uint]
    call.restype = ctypes.c_int
    return call


_start_writeback = _writeback()

_header = struct.Struct("<8sII")
_frame_header = struct.Struct("<II")

OP_KINDS = frozenset(("e", "r"))
OP_NAMES = frozenset(("put", "del"))


def segment_name(first_generation: int) -> str:
    return f"{first_generation:020d}.log"


def encode_header() -> bytes:
    head = MAGIC + struct.pack("<I", VERSION)
    return head + struct.pack("<I", crc32(head))


def encode_frame(payload: bytes | memoryview) -> bytes:
    return _frame_header.pack(len(payload), crc32(payload)) + payload


@dataclass
class Frame:
    generation: int
    timestamp: int
    author: str | None
    via: str | None
    ops: list[dict[str, Any]]
    _written: list[tuple[bytes, dict[str, Any] | None]] | None = field(default=None, repr=False, compare=False)
    # a write sent with an id (docs/store-format.md "Frame payload", ``w``): (id, the answer's MessagePack)
    write: Written | None = field(default=None, compare=False)

    @classmethod
    def decode(cls, payload: bytes | memoryview, segment: str) -> Frame:
        try:
            doc = msgpack.unpackb(payload, raw=False)
        except Exception:
            raise _refuse("unknown-record-type", segment, "payload is not MessagePack") from None
        if (
            not isinstance(doc, dict)
            or not isinstance(doc.get("g"), int)
            or not isinstance(doc.get("t"), int)
            or not isinstance(doc.get("ops"), list)
        ):
            raise _refuse("unknown-record-type", segment, "payload is not a commit map")
        for op in doc["ops"]:
            if not isinstance(op, dict) or op.get("k") not in OP_KINDS or op.get("o") not in OP_NAMES:
                raise _refuse("unknown-record-type", segment, f"generation {doc['g']}: unknown op")
            if "vec" in op and not isinstance(op["vec"], bytes):  # a put's vector is bin, or absent
                raise _refuse("unknown-record-type", segment, f"generation {doc['g']}: a vec that is not bin")
        write = doc.get("w")
        if write is not None:
            if (
                not isinstance(write, list)
                or len(write) != 2
                or type(write[0]) is not str
                or type(write[1]) is not bytes
            ):
                raise _refuse("unknown-record-type", segment, f"generation {doc['g']}: a w that is not [id, bin]")
            write = (write[0], write[1])
        return cls(doc["g"], doc["t"], doc.get("a"), doc.get("v"), doc["ops"], write=write)

    def written(self) -> list[tuple[bytes, dict[str, Any] | None]]:
        """Each op's store key with the row it puts (None for a delete), each row decoded once for the whole
        replay (the bloom probe, the fresh-key test and the ops' apply all ask for it)."""
        from brainy.store import keys as K  # the log's format needs neither; only a replay asks this
        from brainy.store import rows

        if self._written is None:
            out = []
            for op in self.ops:
                row = None if op["o"] == "del" else rows.unpack(op["row"])
                id_ = op["id"] if row is None else row["id"]
                out.append((K.entity_key(id_) if op["k"] == "e" else K.relation_key(id_), row))
            self._written = out
        return self._written


def payload_doc(
    generation: int,
    timestamp: int,
    author: str | None,
    via: str | None,
    ops: list[dict[str, Any]],
    write: Written | None = None,
) -> dict[str, Any]:
    """A commit's frame payload as the document :func:`encode_payload` packs."""
    # "g" first: a reader that only needs the generation finds it in the payload's first bytes
    doc: dict[str, Any] = {"g": generation, "t": timestamp, "a": author, "v": via, "ops": ops}
    if write is not None:
        doc["w"] = list(write)
    return doc


def encode_payload(*fields: Any) -> bytes:
    """:func:`payload_doc` of ``fields`` as new bytes (the commit path packs it in place: :func:`encode_payload_here`)."""
    return msgpack.packb(payload_doc(*fields), use_bin_type=True)


_packers = threading.local()
PAYLOAD_KEPT = 16 << 20  # the largest payload whose packer a thread keeps for its next commit


def encode_payload_here(doc: dict[str, Any]) -> memoryview:
    """:func:`encode_payload`'s bytes in this thread's packer (``addrow.Payloads``), valid until the thread's next
    call (the commit path writes, hashes and ships them under the commit lock, then lets them go). A batch's
    megabytes packed into new bytes each commit were a copy and fresh memory each time: the heap, grown meanwhile
    by the rows the memtable keeps, seldom had the hole for them, and their first touch cost 0.57 page faults a row
    (1.6 us a row of the commit, served, against 0.55 now). A packer whose last payload was past
    :data:`PAYLOAD_KEPT` is let go, not kept as large for the thread's every later commit."""
    packer = getattr(_packers, "packer", None)
    try:
        if packer is None or _packers.size > PAYLOAD_KEPT:
            raise BufferError
        view = packer.pack(doc)
    except BufferError:  # first here, or a view of the last payload still held (a traceback's): a packer of its own
        packer = _packers.packer = addrow.Payloads()
        view = packer.pack(doc)
    _packers.size = len(view)
    return view


_G_PREFIXES = (b"\x85\xa1g", b"\x86\xa1g")  # a five- (six-, with "w") key map whose first key is "g"
_G_KEY = b"\xa1g"
_uint = {0xCC: struct.Struct(">B"), 0xCD: struct.Struct(">H"), 0xCE: struct.Struct(">I"), 0xCF: struct.Struct(">Q")}


def peek_generation(data: bytes, start: int, end: int) -> int | None:
    """The generation of the payload ``data[start:end]`` read from its first bytes, without decoding it;
    None when the payload is not laid out as ``encode_payload`` writes it (the caller decodes it whole)."""
    if end - start < 4 or data[start : start + 3] not in _G_PREFIXES:
        return None
    tag = data[start + 3]
    if tag < 0x80:
        return tag
    unpack = _uint.get(tag)
    if unpack is None or start + 4 + unpack.size > end:
        return None
    return unpack.unpack_from(data, start + 4)[0]


def _refuse(reason: str, segment: str, detail: str) -> Exception:
    return R.FactLogRefusedError(f"fact log refused ({reason}): log/{segment}: {detail}", reason=reason)


@dataclass(frozen=True)
class Position:
    """Where a read of the log stopped: after the last whole frame of the last segment read."""

    first: int  # the segment's first generation (its name)
    offset: int  # the byte after the last whole frame
    generation: int  # the last generation read (first - 1 if none)


@dataclass
class Scan:
    """What reading the log found: the frames past a generation, where the tail stands, and what the
    reading cost (bytes read from disk, checksummed, decoded, and looked at for a zero-filled tail)."""

    frames: list[Frame] = field(default_factory=list)
    last_generation: int = 0
    last_segment: Path | None = None
    good_end: int = 0  # offset in the last segment after its last whole frame
    torn_bytes: int = 0  # bytes past good_end that had not landed
    segments: int = 0
    read: int = 0
    checked: int = 0
    decoded: int = 0
    zero_tested: int = 0

    @property
    def position(self) -> Position | None:
        if self.last_segment is None:
            return None
        return Position(int(self.last_segment.name[:-4]), self.good_end, self.last_generation)


def segments(log_dir: Path) -> list[tuple[int, Path]]:
    """(first generation, path) of every segment, in generation order."""
    found = []
    for path in log_dir.iterdir():
        name = path.name
        if name.endswith(".log") and name[:-4].isdigit() and len(name) == 24:
            found.append((int(name[:-4]), path))
    found.sort()
    return found


def scan(log_dir: Path, after: int, resume: Position | None = None) -> Scan:
    """Read every frame with a generation above ``after``, checking the laws of the format.

    Sealed segments wholly at or below ``after`` are not read (``verify`` reads them); frames at or
    below ``after`` are checked (checksum, generation order) but not decoded. ``resume`` starts the
    read where an earlier scan of the same log stopped, so only what was appended since is read.
    """
    result = Scan()
    result.frames = list(frames(log_dir, after, result, resume=resume))
    return result


def frames(
    log_dir: Path, after: int, tail: Scan | None = None, *, resume: Position | None = None, decode_all: bool = False
) -> Iterator[Frame]:
    """The frames above ``after``, one at a time, in generation order; when the iteration runs to the
    end, ``tail`` says where the log stands. A consumer may stop early (``changes`` stops at its head)."""
    tail = Scan() if tail is None else tail
    segs = segments(log_dir)
    tail.segments = len(segs)
    if not segs:
        raise _refuse("missing-segment", "", "the log holds no segment")
    start = 0
    if resume is not None:
        after = max(after, resume.generation)
        found = [i for i, (first, _) in enumerate(segs) if first == resume.first]
        if not found:
            raise _refuse("missing-segment", segment_name(resume.first), "a segment read before is gone")
        start = found[0]
    else:
        for i, (first, _) in enumerate(segs):
            if first <= after + 1:
                start = i
    expected = segs[start][0]
    if resume is None and expected > after + 1:
        raise _refuse("missing-segment", segs[start][1].name, f"generation {after + 1} is in no segment")
    for i in range(start, len(segs)):
        first, path = segs[i]
        sealed = i < len(segs) - 1
        if first != expected:
            reason = "missing-segment" if first > expected else "segment-order"
            raise _refuse(reason, path.name, f"expected a segment starting at generation {expected}")
        at: tuple[int, int] | None = None
        if resume is not None and first == resume.first and resume.offset >= HEADER_SIZE:
            at = resume.offset, resume.generation
        last = yield from _read_segment(path, first, sealed, after, tail, at, decode_all)
        expected = last + 1
    tail.last_generation = expected - 1


_ZERO_CHUNK = bytes(1 << 16)


def _zero_tail(view: memoryview, pos: int, tail: Scan) -> bool:
    """Whether every byte from ``pos`` to the end is zero: looked at once, a bounded chunk at a time."""
    end = len(view)
    while pos < end:
        n = min(len(_ZERO_CHUNK), end - pos)
        tail.zero_tested += n
        if view[pos : pos + n] != _ZERO_CHUNK[:n]:
            return False
        pos += n
    return True


def _landed_past(data: bytes, body: int, crc: int) -> bool:
    """Whether a frame whose length runs past the end of the last segment (its payload from ``data[body]``, its
    checksum ``crc``) is followed by bytes that landed: its own payload whole to the end, or a whole frame after
    it. A torn append leaves a prefix of one frame and nothing whole after it, so either is a damaged length,
    which dropping as a torn tail would lose (the writer would cut away acknowledged commits)."""
    view = memoryview(data)
    if crc32(view[body:]) == crc:
        return True
    # a later frame's payload opens as encode_payload writes it: a map of five or six keys, its first "g"
    at = data.find(_G_KEY, body + FRAME_HEADER_SIZE + 1)
    while at != -1:
        start = at - 1
        if data[start : start + 3] in _G_PREFIXES:
            length, frame_crc = _frame_header.unpack_from(data, start - FRAME_HEADER_SIZE)
            if start + length <= len(data) and crc32(view[start : start + length]) == frame_crc:
                return True
        at = data.find(_G_KEY, at + 1)
    return False


def _read_segment(
    path: Path, first: int, sealed: bool, after: int, tail: Scan, at: tuple[int, int] | None, decode_all: bool
) -> Generator[Frame, None, int]:
    """Read one segment, yielding its frames above ``after``; answer the last generation it holds
    (first - 1 if none). ``at`` (offset, generation) starts the read past frames already read."""
    name = path.name
    if at is None:
        data = path.read_bytes()
        base, generation = 0, first - 1
    else:
        base, generation = at
        with open(path, "rb") as f:
            f.seek(base)
            data = f.read()
    tail.read += len(data)
    view = memoryview(data)
    end = base + len(data)  # offsets below are the segment's; data holds [base, end)
    if at is None:
        if len(data) < HEADER_SIZE:
            if sealed:
                raise _refuse("torn-sealed-segment", name, "header cut short")
            tail.last_segment, tail.good_end, tail.torn_bytes = path, 0, len(data)
            return generation
        magic, version, crc = _header.unpack_from(data, 0)
        if magic != MAGIC or crc32(view[:12]) != crc:
            raise _refuse("torn-sealed-segment" if sealed else "checksum-mismatch", name, "bad segment header")
        if version != VERSION:
            raise _refuse("segment-version", name, f"segment version {version}")
        pos = HEADER_SIZE
    else:
        pos = base
    unpack_header = _frame_header.unpack_from
    while pos < end:
        if end - pos < FRAME_HEADER_SIZE:
            if sealed:
                raise _refuse("torn-sealed-segment", name, f"frame header cut short at offset {pos}")
            break
        length, crc = unpack_header(data, pos - base)
        if length == 0 and not sealed and _zero_tail(view, pos - base, tail):
            break  # a zero-filled tail never landed
        body = pos - base + FRAME_HEADER_SIZE
        if pos + FRAME_HEADER_SIZE + length > end:
            if sealed:
                raise _refuse("torn-sealed-segment", name, f"frame cut short at offset {pos}")
            if _landed_past(data, body, crc):
                raise _refuse(
                    "checksum-mismatch", name, f"frame at offset {pos}: its length runs past bytes that landed whole"
                )
            break
        payload = view[body : body + length]
        tail.checked += length
        if length == 0 or crc32(payload) != crc:
            raise _refuse(
                "torn-sealed-segment" if sealed else "checksum-mismatch",
                name,
                f"frame checksum mismatch at offset {pos}",
            )
        peeked = None if decode_all else peek_generation(data, body, body + length)
        if peeked is not None and peeked <= after:
            frame_generation, frame = peeked, None
        else:
            tail.decoded += length
            frame = Frame.decode(payload, name)
            frame_generation = frame.generation
        if frame_generation != generation + 1:
            raise _refuse(
                "frame-order",
                name,
                f"frame at offset {pos} has generation {frame_generation}, expected {generation + 1}",
            )
        generation = frame_generation
        pos += FRAME_HEADER_SIZE + length
        if frame is not None and generation > after:
            yield frame
    if not sealed:
        tail.last_segment, tail.good_end, tail.torn_bytes = path, pos, end - pos
    return generation


def verify(log_dir: Path, after: int = 0) -> int:
    """Read every segment from the one holding ``after + 1`` (the log's first generation less one, once the feed
    retention deleted older segments) whole, checking and decoding every frame; answer the last generation."""
    tail = Scan()
    for _ in frames(log_dir, after, tail, decode_all=True):
        pass
    return tail.last_generation


class LogWriter:
    """Appends frames to the last segment and makes them durable with a shared fsync.

    ``append`` writes (no fsync) and answers a sequence number; ``wait(seq)``
    returns once that frame is durable. Whoever waits first while no fsync is
    running performs it for everyone written so far (group commit), so a commit
    never waits behind more than one fsync it did not need.
    """

    def __init__(self, log_dir: Path, found: Scan, rotate_bytes: int = SEGMENT_ROTATE_BYTES) -> None:
        self.dir = log_dir
        self.rotate_bytes = rotate_bytes
        self.next_generation = found.last_generation + 1
        if found.last_segment is None:
            self._open_segment(self.next_generation)
        else:
            path = found.last_segment
            self._first = int(path.name[:-4])
            fd = os.open(path, os.O_WRONLY)
            if found.torn_bytes or found.good_end < HEADER_SIZE:
                # the tail never landed: cut it away so new frames follow the last whole one
                if found.good_end < HEADER_SIZE:
                    os.ftruncate(fd, 0)
                    os.pwrite(fd, encode_header(), 0)
                    found.good_end = HEADER_SIZE
                else:
                    os.ftruncate(fd, found.good_end)
            # frames replayed on open may never have reached the disk (the last writer died before its
            # fsync): make them durable before anything, a flushed table above all, builds on them
            os.fsync(fd)
            self._fd = fd
            self._size = found.good_end
            os.lseek(fd, self._size, os.SEEK_SET)
        self._retired: list[int] = []
        self._cond = threading.Condition()
        self._written = 0
        self._synced = 0
        self._syncing = False
        self._failed: BaseException | None = None

    def _open_segment(self, first_generation: int) -> None:
        path = self.dir / segment_name(first_generation)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.write(fd, encode_header())
        os.fsync(fd)
        fsync_dir(self.dir)
        self._fd = fd
        self._size = HEADER_SIZE
        self._first = first_generation

    def position(self) -> Position:
        """Where the last frame appended ends (the caller serialises appends): a flush's MANIFEST ``logAt``."""
        return Position(self._first, self._size, self.next_generation - 1)

    def append(self, generation: int, payload: bytes | memoryview) -> int:
        """Write one frame (the caller serialises appends); answer its sequence number."""
        if self._failed is not None:
            raise self._failed
        if generation != self.next_generation:
            raise RuntimeError(f"append of generation {generation}, expected {self.next_generation}")
        if self._size >= self.rotate_bytes:
            self._rotate(generation)
        # the frame is its header and the payload, written from where they lie (encode_frame's bytes, without the
        # copy of a batch's megabytes that joining them made): the header goes with the payload's first piece
        head = _frame_header.pack(len(payload), crc32(payload))
        body = memoryview(payload)
        done, size = 0, len(head) + len(payload)
        try:
            while done < size:
                if done < len(head):
                    done += os.writev(self._fd, [head[done:], body[: WRITE_BYTES - len(head) + done]])
                else:
                    at = done - len(head)
                    done += os.write(self._fd, body[at : at + WRITE_BYTES])
        except OSError as exc:
            # take the partial frame back so the next one follows the last whole frame
            try:
                os.ftruncate(self._fd, self._size)
                os.lseek(self._fd, self._size, os.SEEK_SET)
            except OSError:
                self._failed = R.InternalError(f"the fact log could not be repaired after {exc}", ref="fact-log-append")
            raise R.InternalError(f"the fact log refused the append: {exc}", ref="fact-log-append") from exc
        if size >= WRITEBACK_BYTES and _start_writeback is not None:
            _start_writeback(self._fd, self._size, size, SYNC_FILE_RANGE_WRITE)  # a hint: its failure changes nothing
        self._size += size
        self.next_generation = generation + 1
        with self._cond:
            self._written += 1
            return self._written

    def _rotate(self, first_generation: int) -> None:
        old = self._fd
        os.fsync(old)  # seal: everything written so far is durable
        with self._cond:
            self._synced = self._written
            self._notify_locked()
        self._open_segment(first_generation)
        self._retired.append(old)  # closed later: a waiter may be fsyncing it right now

    def wait(self, seq: int) -> None:
        """Return once frame ``seq`` is durable; raise if the log failed to sync."""
        with self._cond:
            while self._synced < seq:
                if self._failed is not None:
                    raise self._failed
                if self._syncing:
                    self._cond.wait()
                    continue
                self._syncing = True
                target, fd = self._written, self._fd
                self._cond.release()
                error: BaseException | None = None
                try:
                    os.fdatasync(fd)
                except OSError as exc:
                    error = exc
                finally:
                    self._cond.acquire()
                self._syncing = False
                if error is not None:
                    self._failed = R.InternalError(f"the fact log could not be synced: {error}", ref="fact-log-sync")
                else:
                    self._synced = max(self._synced, target)
                self._notify_locked()
            if self._failed is not None and self._synced < seq:
                raise self._failed

    def _notify_locked(self) -> None:
        self._cond.notify_all()

    @property
    def pending(self) -> bool:
        with self._cond:
            return self._synced < self._written

    def sync_all(self) -> None:
        with self._cond:
            seq = self._written
        self.wait(seq)

    def close(self) -> None:
        self.sync_all()
        for fd in self._retired + [self._fd]:
            os.close(fd)
        self._retired = []
