"""What the object store holds for a brain, as docs/fleet.md "Object layout" specifies it, and which of it is the
brain's history (the restore's choice, sans-IO: names and markers in, a plan out).

    brains/<brain>/epochs/<epoch:10>.json                          {"brain", "node", "epoch", "base", "at"}
    brains/<brain>/log/<first:20>-<last:20>-<epoch:10>.seg          a fact-log segment: header frame+
    brains/<brain>/snapshots/<generation:20>-<epoch:10>.snap        magic version index_length index file*

A frame shipped at epoch ``e`` is history when ``base(e) < generation <= base(next)``, ``next`` the first epoch
above ``e`` with a marker: each generation has one valid epoch, and a fenced owner's late segments are never
history (docs/fleet.md "Fencing").
"""

from __future__ import annotations

import hashlib
import io
import struct
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson

from brainy.store import log as log_
from brainy.store.crc import crc32

BRAINS = "brains/"
SNAPSHOT_MAGIC = b"brainysn"
SNAPSHOT_VERSION = 1
_snapshot_header = struct.Struct("<8sII")  # magic, version, index_length: 8 + 4 + 4
_frame_header = struct.Struct("<II")
# a segment's bound (docs/fleet.md "Segment format"): at most this many frames and bytes of them (one frame more
# when a single frame is larger), so a put is bounded, and the segment after a snapshot at g starts above
# g - SEGMENT_FRAMES (a restore lists from there)
SEGMENT_FRAMES = 4096
SEGMENT_BYTES = 64 << 20


class ShippedDamageError(ValueError):
    """An object of the store is not what docs/fleet.md says it is (a short lowercase reason)."""


def brain_prefix(brain: str) -> str:
    return f"{BRAINS}{brain}/"


def marker_name(brain: str, epoch: int) -> str:
    return f"{BRAINS}{brain}/epochs/{epoch:010d}.json"


def segment_name(brain: str, first: int, last: int, epoch: int) -> str:
    return f"{BRAINS}{brain}/log/{first:020d}-{last:020d}-{epoch:010d}.seg"


def segment_start(brain: str, generation: int) -> str:
    """The name every segment whose ``first`` is above ``generation`` sorts after (S3's ``start-after``)."""
    return f"{BRAINS}{brain}/log/{generation:020d}-~"


def snapshot_name(brain: str, generation: int, epoch: int) -> str:
    return f"{BRAINS}{brain}/snapshots/{generation:020d}-{epoch:010d}.snap"


@dataclass(frozen=True, slots=True, order=True)
class Segment:
    first: int
    last: int
    epoch: int
    name: str = field(compare=False)


@dataclass(frozen=True, slots=True, order=True)
class SnapshotObject:
    generation: int
    epoch: int
    name: str = field(compare=False)


@dataclass
class Listing:
    """A brain's objects, read apart from their names (names that are none of these are left out)."""

    markers: dict[int, str] = field(default_factory=dict)  # epoch -> object name
    segments: list[Segment] = field(default_factory=list)
    snapshots: list[SnapshotObject] = field(default_factory=list)


def _digits(text: str, width: int) -> int | None:
    return int(text) if len(text) == width and text.isdigit() else None


def read_listing(brain: str, names: Iterable[str]) -> Listing:
    """The markers, segments and snapshots among ``names`` (as the store lists them below its prefix)."""
    base = brain_prefix(brain)
    out = Listing()
    for name in names:
        if not name.startswith(base):
            continue
        kind, _, rest = name[len(base) :].partition("/")
        if kind == "epochs" and rest.endswith(".json"):
            epoch = _digits(rest[:-5], 10)
            if epoch is not None:
                out.markers[epoch] = name
        elif kind == "log" and rest.endswith(".seg"):
            parts = rest[:-4].split("-")
            if len(parts) == 3:
                first, last, epoch = _digits(parts[0], 20), _digits(parts[1], 20), _digits(parts[2], 10)
                if first is not None and last is not None and epoch is not None and first <= last:
                    out.segments.append(Segment(first, last, epoch, name))
        elif kind == "snapshots" and rest.endswith(".snap"):
            parts = rest[:-5].split("-")
            if len(parts) == 2:
                generation, epoch = _digits(parts[0], 20), _digits(parts[1], 10)
                if generation is not None and epoch is not None:
                    out.snapshots.append(SnapshotObject(generation, epoch, name))
    out.segments.sort()
    out.snapshots.sort()
    return out


# -- the marker ----------------------------------------------------------------------------------------------


def marker_value(brain: str, node: str, epoch: int, base: int, at: int) -> bytes:
    return orjson.dumps({"brain": brain, "node": node, "epoch": epoch, "base": base, "at": at})


def read_marker(data: bytes) -> dict[str, Any]:
    try:
        doc = orjson.loads(data)
        if not isinstance(doc.get("epoch"), int) or not isinstance(doc.get("base"), int):
            raise TypeError("epoch and base are integers")
        return doc
    except (orjson.JSONDecodeError, TypeError, AttributeError) as exc:
        raise ShippedDamageError(f"bad marker: {exc}") from None


# -- the segment ---------------------------------------------------------------------------------------------


def encode_segment(frames: list[tuple[int, bytes]]) -> bytes:
    """A segment of ``frames`` ((generation, encoded frame), consecutive): the log's header, then the frames."""
    return log_.encode_header() + b"".join(frame for _, frame in frames)


def decode_segment(data: bytes, first: int, last: int) -> Iterator[tuple[int, bytes]]:
    """(generation, payload) of every frame of a segment named ``first``-``last``, each checked: the header, each
    frame's checksum, the generations consecutive from ``first`` to ``last`` and nothing after."""
    if len(data) < log_.HEADER_SIZE or data[: log_.HEADER_SIZE] != log_.encode_header():
        raise ShippedDamageError("bad segment header")
    pos, expected = log_.HEADER_SIZE, first
    view = memoryview(data)
    while pos < len(data):
        if len(data) - pos < _frame_header.size:
            raise ShippedDamageError(f"frame header cut short at offset {pos}")
        length, crc = _frame_header.unpack_from(data, pos)
        body = pos + _frame_header.size
        if body + length > len(data) or crc32(view[body : body + length]) != crc:
            raise ShippedDamageError(f"frame checksum mismatch at offset {pos}")
        generation = log_.peek_generation(data, body, body + length)
        if generation is None:
            generation = log_.Frame.decode(view[body : body + length], "shipped").generation
        if generation != expected or generation > last:
            raise ShippedDamageError(f"frame at offset {pos} has generation {generation}, expected {expected}")
        yield generation, bytes(view[body : body + length])
        expected += 1
        pos = body + length
    if expected != last + 1:
        raise ShippedDamageError(f"segment ends at generation {expected - 1}, its name says {last}")


# -- the snapshot --------------------------------------------------------------------------------------------


def snapshot_head(index: dict[str, Any], listed: list[tuple[str, int, str]]) -> bytes:
    """A snapshot object's bytes before its files: ``index`` with its ``files`` (name, size, sha256 hex each)."""
    index = dict(index)
    index["files"] = [{"name": n, "size": size, "sha256": digest} for n, size, digest in listed]
    body = orjson.dumps(index)
    return _snapshot_header.pack(SNAPSHOT_MAGIC, SNAPSHOT_VERSION, len(body)) + body


def encode_snapshot(index: dict[str, Any], files: list[tuple[str, bytes]]) -> bytes:
    """A snapshot object: ``index`` (its ``files`` filled in here from ``files``, in order), then the bytes."""
    listed = [(n, len(d), hashlib.sha256(d).hexdigest()) for n, d in files]
    return b"".join([snapshot_head(index, listed), *(d for _, d in files)])


class SnapshotReader:
    """A snapshot object read as it arrives from ``read(n)`` (at most ``n`` bytes, ``b""`` at its end): the
    :attr:`index` at once, then each file's bytes in chunks (:meth:`files`), each file's digest checked at its
    end, and nothing after the last. Damage is ShippedDamageError."""

    CHUNK = 1 << 20

    def __init__(self, read: Callable[[int], bytes]) -> None:
        self._read = read
        magic, version, length = _snapshot_header.unpack(self._exactly(_snapshot_header.size, "snapshot header"))
        if magic != SNAPSHOT_MAGIC or version != SNAPSHOT_VERSION:
            raise ShippedDamageError("bad snapshot header")
        try:
            self.index: dict[str, Any] = orjson.loads(self._exactly(length, "snapshot index"))
            self.listed = [(str(f["name"]), int(f["size"]), str(f["sha256"])) for f in self.index["files"]]
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
            raise ShippedDamageError(f"bad snapshot index: {exc}") from None
        for name, size, _ in self.listed:
            if name.startswith("/") or ".." in name.split("/") or size < 0:
                raise ShippedDamageError(f"snapshot file name {name!r} leaves the store")

    def _exactly(self, n: int, what: str) -> bytes:
        parts = []
        while n > 0:
            got = self._read(n)
            if not got:
                raise ShippedDamageError(f"{what} cut short")
            parts.append(got)
            n -= len(got)
        return b"".join(parts)

    def files(self) -> Iterator[tuple[str, Iterator[bytes]]]:
        """Each file's name and its bytes in chunks, in the index's order; each chunk iterator must be used up
        before the next file is asked for."""
        for name, size, digest in self.listed:
            yield name, self._file(name, size, digest)
        if self._read(1):
            raise ShippedDamageError("bytes after the snapshot's last file")

    def _file(self, name: str, size: int, digest: str) -> Iterator[bytes]:
        hashed = hashlib.sha256()
        left = size
        while left > 0:
            chunk = self._exactly(min(self.CHUNK, left), f"snapshot file {name}")
            hashed.update(chunk)
            left -= len(chunk)
            yield chunk
        if hashed.hexdigest() != digest:
            raise ShippedDamageError(f"snapshot file {name} does not check")


def decode_snapshot(data: bytes) -> tuple[dict[str, Any], list[tuple[str, bytes]]]:
    """The index and every file (relative name, bytes) of a snapshot object held whole, each digest checked."""
    reader = SnapshotReader(io.BytesIO(data).read)
    return reader.index, [(name, b"".join(chunks)) for name, chunks in reader.files()]


# -- the history -------------------------------------------------------------------------------------------


@dataclass
class History:
    """Each epoch's valid range of generations, from the markers: ``(base, bound]`` (bound None: open)."""

    bases: dict[int, int]

    def bound(self, epoch: int) -> int | None:
        later = [e for e in self.bases if e > epoch]
        return self.bases[min(later)] if later else None

    def valid(self, epoch: int, generation: int) -> bool:
        """Whether a frame (or a snapshot's last generation) at ``generation`` shipped at ``epoch`` is history."""
        base = self.bases.get(epoch)
        if base is None:
            return False
        bound = self.bound(epoch)
        return base <= generation and (bound is None or generation <= bound)

    def epoch_of(self, generation: int) -> int | None:
        """The one epoch whose frames at ``generation`` are history (None: no marker covers it)."""
        for epoch in sorted(self.bases, reverse=True):
            if self.valid(epoch, generation) and generation > self.bases[epoch]:
                return epoch
        return None


@dataclass
class Plan:
    """What a restore reads: one snapshot (or none), then segments, each used up to ``upto``."""

    snapshot: SnapshotObject | None
    segments: list[tuple[Segment, int]]  # (segment, last generation of it that is history)

    @property
    def head(self) -> int:
        if self.segments:
            return self.segments[-1][1]
        return self.snapshot.generation if self.snapshot is not None else 0


def plan(listing: Listing, bases: dict[int, int], below: int) -> Plan:
    """The restore of a brain claimed at epoch ``below``: the newest snapshot that is history, then, generation
    by generation, the segment of that generation's valid epoch, until one is missing. ``bases`` are the
    markers' (epochs at or above ``below`` are not read: none can have been written before the claim)."""
    history = History({e: b for e, b in bases.items() if e < below})
    snapshots = [s for s in listing.snapshots if s.epoch < below and history.valid(s.epoch, s.generation)]
    chosen = max(snapshots, default=None)
    at = chosen.generation if chosen is not None else 0
    by_epoch: dict[int, list[Segment]] = {}
    for seg in listing.segments:
        if seg.epoch < below:
            by_epoch.setdefault(seg.epoch, []).append(seg)
    used: list[tuple[Segment, int]] = []
    for _ in range(len(listing.segments) + 1):  # each turn uses one segment, or stops
        epoch = history.epoch_of(at + 1)
        if epoch is None:
            break
        found = next((s for s in by_epoch.get(epoch, ()) if s.first <= at + 1 <= s.last), None)
        if found is None:
            break
        bound = history.bound(epoch)
        upto = found.last if bound is None else min(found.last, bound)
        used.append((found, upto))
        at = upto
    return Plan(chosen, used)
