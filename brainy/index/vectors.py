"""The vector index: every vectored entity's vector, searched by cosine, at one generation (its stamp).

A projection like the postings (``brainy/index/projections.py``): moved by each durable commit's
entity changes, persisted stamped with the generation it covers, rebuilt from the rows when it cannot
be trusted. Its layout is the law in docs/store-format.md, "Vector index snapshots":

- **Slots.** Each vector sits, scaled to unit length, in one row of a float32 matrix (:class:`Slots`). A
  slot is written once: an update takes a new slot and kills the old one, a removal kills its slot. Every
  hit is checked live and scored on the matrix, so a stale vector never answers. The slots a snapshot
  held are read in place from its mapped files (each chunk checked the first time a read touches it);
  the slots written since live in an owned, growable part.
- **The graph.** Slots below :attr:`VectorIndex.graphed` are also in an HNSW graph (faiss
  ``IndexHNSWFlat``, inner product, ids = slots). The slots above are the fresh tail, scanned
  exactly. :meth:`VectorIndex.catch_up` adds the tail to the graph in one batch, off the commit path.
- **Snapshots.** A base (the whole index, graph included) and deltas appended at each flush (the slots
  written and killed since the link before), a new base once the deltas pass a quarter of it
  (:meth:`VectorIndex.freeze`, :func:`write_link`, :func:`read_chain`).
- **Exact, or the graph.** A search is an exact scan while the index is small, when a filter keeps
  few rows, when the graph is busy catching up, and for a past generation (:meth:`VectorIndex.exact`);
  otherwise the graph answers (with a predicate for a large filter) and the tail is scanned beside it.
  A filtered graph search that cannot fill the page falls back to the exact scan.

The library and the thresholds were chosen by measurement on the project's box: ``perf/bench_vectors.py``
and the commit that chose them carry the figures.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import struct
import threading
from array import array
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

import crc32c
import faiss
import numpy as np

from brainy._speedups import picks, vecpack
from brainy.store import rows
from brainy.store.crc import crc32, crc32c_joined
from brainy.store.files import write_durably
from brainy.index.projections import newest_snapshot, snapshot_name
from brainy.store.workers import LongLived

DIMENSIONS = rows.DIMENSIONS
EXACT_BELOW = 4_096         # live vectors under which every search is an exact scan (about 0.2 ms)
EXACT_CANDIDATES = 4_096    # a filter keeping at most this many vectored rows is searched exactly
TAIL_MAX = 2_048            # fresh slots past which the graph is caught up
COMPACT_AFTER = 4_096       # dead slots (at least as many as the live ones) past which the slots are compacted
HNSW_M = 16                 # graph degree: recall against memory (faiss's own default is 32)
EF_CONSTRUCTION = 128
EF_SEARCH = 256             # recall@10 0.96 on clustered vectors at 100,000, 128 gives 0.88 (perf/bench_vectors.py)
BASE_AFTER = 4              # a new base once the deltas since it hold more than 1/BASE_AFTER of its slots
BASE_AFTER_MIN = 1_024      # ... and at least this many (a small base is cheap to write again anyway)
MAX_DELTAS = 64             # ... or once this many deltas follow it (each is a file the next open reads)
SERIALISE_WAIT_SECONDS = 0.5  # how long a search waits for a flush serialising the graph, at most
NO_SLOT = -1
CHUNK_SLOTS = 256           # slots per checksummed chunk of a base's vectors (384 KiB: checked, then scored, in cache)
SPLIT_UNCHECKED = 64        # unchecked chunks from which a scan shares them with the scan helper thread
QUERY_STEPS = 32_767        # a query rounded to int16 steps for the quantised scan (384 x 127 x 32,767 fits int32)
CODE_MAX = 127              # a quantised cell's range: -127..127
SCORE_SLACK = 1e-4          # float32 rounding of the approximate and the exact scores, with room to spare
QUANTISED_SCAN = picks.get("vecpack") == "cython"  # the pure twin's int8 product is slower than the float32 scan


class Damaged(ValueError):
    """A chunk of a mapped vectors section failed its checksum: no byte of it is used, and the index it
    belongs to is not trusted (the follower rebuilds it from the rows)."""


class _Mapped:
    """One snapshot file's vectors section, read in place: a read-only view of the mapped file, and the
    checksum of each chunk of ``chunk`` slots (None: the section was checked whole when it was read)."""

    def __init__(self, name: str, rows: np.ndarray, crcs: np.ndarray | None, chunk: int,
                 source: tuple[mmap.mmap, int] | None = None) -> None:
        self.name, self.rows, self.crcs, self.chunk = name, rows, crcs, chunk
        self._source = source  # the mapped file the rows lie in, and where they start in it
        self.quantised: _Codes | None = None  # the base's quantised copy of these rows, if it has one
        self._unchecked = 0 if crcs is None else len(crcs)
        self._checked = None if crcs is None else np.zeros(len(crcs), bool)
        self._tally = threading.Lock()  # a read and the graph's thread may check one chunk at once

    what = "vectors"
    shared = True  # a first scan shares its chunks with the scan helper thread

    @property
    def checked(self) -> bool:
        return self._unchecked == 0

    def _score(self, lo: int, hi: int, query: Any, out: np.ndarray) -> None:
        """Score slots ``lo`` to ``hi`` - 1 into ``out`` (as long as they are)."""
        np.matmul(self.rows[lo:hi], query, out=out)

    def chunk_scores(self, c: int, query: np.ndarray) -> np.ndarray:
        """Chunk ``c``'s scores, checked first: the product the scan makes of it, so the same bits."""
        self.check(c)
        lo = c * self.chunk
        scores = np.empty(len(self.rows[lo:lo + self.chunk]), np.float32)
        self._score(lo, lo + self.chunk, query, scores)
        return scores

    def will_need(self, chunks: list[int]) -> None:
        """Ask the kernel for the pages of these chunks not checked yet, all at once, before a read checks them one
        by one: a base with a copy is mapped without read-ahead, and a fault on a page not in memory read around
        it as far as the disk's read-ahead, one chunk after another (247 ms for the 28 chunks of a first search
        at a million slots with the file evicted)."""
        if self._source is None or self._checked is None:
            return
        mapped, at = self._source
        size = self.chunk * self.rows.strides[0]
        end = at + self.rows.nbytes
        for c in chunks:
            if not self._checked[c]:
                lo = at + c * size
                start = lo - lo % mmap.PAGESIZE
                mapped.madvise(mmap.MADV_WILLNEED, start, min(lo + size, end) - start)

    def check(self, c: int) -> None:
        """Check chunk ``c`` unless a read has already; Damaged if it fails."""
        if self._checked is not None and not self._checked[c]:
            self._check_one(c, self.chunk)

    def check_all(self, reverse: bool = False) -> None:
        """Every chunk; ``reverse`` (the graph's thread) from the end, so a first scan running from the start
        and the thread meet in the middle rather than checking the same chunks twice."""
        if self._checked is not None and self._unchecked:
            order = range(len(self._checked) - 1, -1, -1) if reverse else range(len(self._checked))
            for c in order:
                if not self._checked[c]:
                    self._check_one(c, self.chunk)

    def check_whole(self) -> None:
        """Every chunk in one pass: the section's CRC-32C, the interpreter lock let go for all of it (so the reads
        of another thread go on meanwhile), against the chunk checksums joined end to end. All are marked checked
        when the two agree; when they do not, none is, and the reads check chunk by chunk and name the one that
        fails."""
        if self._checked is None or not self._unchecked:
            return
        assert self.crcs is not None
        size = self.chunk * self.rows.strides[0]
        whole = memoryview(self.rows).cast("B")
        last = len(whole) - size * (len(self.crcs) - 1)
        if crc32c.crc32c(whole, gil_release_mode=1) == crc32c_joined(self.crcs, size, last):
            with self._tally:
                self._checked[:] = True
                self._unchecked = 0

    def _check_one(self, c: int, size: int) -> None:
        assert self._checked is not None and self.crcs is not None
        part = self.rows[c * size:(c + 1) * size]
        if crc32c.crc32c(memoryview(part).cast("B")) != int(self.crcs[c]):
            raise Damaged(f"{self.name}: {self.what} chunk {c} (slots {c * size}..): checksum mismatch")
        with self._tally:
            if not self._checked[c]:
                self._checked[c] = True
                self._unchecked -= 1

    def scores(self, query: np.ndarray, out: np.ndarray) -> None:
        """``rows @ query`` into ``out``, each unchecked chunk checked just before it is scored (in cache). With
        at least ``SPLIT_UNCHECKED`` chunks unchecked (the first scan after an open) the chunks are shared with
        the scan helper thread, each half checked and scored on its own core; Damaged if either half fails."""
        if self._unchecked == 0:
            self._score(0, len(self.rows), query, out)
            return
        assert self._checked is not None
        chunks = len(self._checked)
        if self._unchecked < SPLIT_UNCHECKED or not self.shared:
            self._check_and_score(query, out, 0, chunks)
            return
        half = chunks // 2
        other = _scan_helper().submit(self._check_and_score, query, out, half, chunks)
        try:
            self._check_and_score(query, out, 0, half)
        finally:
            failed = other.exception()  # waited for either way: nothing writes into out once this returns
        if failed is not None:
            raise failed

    def _check_and_score(self, query: np.ndarray, out: np.ndarray, first: int, end: int) -> None:
        """Chunks ``first`` to ``end`` - 1: each checked unless a read has already, then scored into ``out``."""
        assert self._checked is not None
        size, checked = self.chunk, self._checked
        for c in range(first, end):
            lo = c * size
            if not checked[c]:
                self._check_one(c, size)
            self._score(lo, lo + size, query, out[lo:lo + size])


class _Codes(_Mapped):
    """A base's quantised copy, read in place: its codes (int8 rows) checked a chunk at a time like the float32
    rows, and scored into each slot's upper bound by :func:`vecpack.code_bounds`; its scales, checked at the open."""

    what = "quantised codes"
    # on one thread: the two halves on two cores took 88-132 ms against 76-85 ms on one for the 3,710 chunks of a
    # million slots (the box's memory, not its cores, bounds this scan)
    shared = False

    def __init__(self, name: str, codes: np.ndarray, scales: np.ndarray, crcs: np.ndarray, chunk: int) -> None:
        super().__init__(name, codes, crcs, chunk)
        self.scales = scales

    def _score(self, lo: int, hi: int, query: Any, out: np.ndarray) -> None:
        steps, step, per_scale, constant = query
        vecpack.code_bounds(self.rows[lo:hi], steps, self.scales[lo:hi], step, per_scale, constant, out)

    def upper_bounds(self, query: np.ndarray, out: np.ndarray) -> None:
        """A bound each slot's float32 score against the unit vector ``query`` does not pass, into ``out``: its
        approximate score plus how far that may lie from it (docs/store-format.md, "Vector index snapshots")."""
        step = float(np.abs(query).max()) / QUERY_STEPS
        steps = np.rint(query.astype(np.float64) / step).astype(np.int16)
        cells = self.rows.shape[1]
        per_scale = float(np.abs(query).sum()) / 2 + step * cells / 4
        self.scores((steps, step, per_scale, step * np.sqrt(cells) / 2 + SCORE_SLACK), out)


# The first scan after an open checks every chunk it scores: half of them on this long-lived thread (one per
# process, not one per search), the other half on the searching thread. crc32c and the matmul release the
# interpreter lock, so the halves run on two cores: 132-136 ms against 231 ms on one for the 3,907 chunks of
# a million slots (perf, measured on the project's box).
_scan_helper = LongLived(1, "brainy-vectors-scan")


class Slots:
    """The slot matrix: the slots of the snapshot files an index was read from, read in place (read-only
    views of the mapped files, each chunk checked the first time it is read), then the slots written after
    them, in an owned part that grows by doubling. Reads go through here, so a mapped byte is never used
    unchecked; the mappings live as long as the views do (the index, or a loader or frozen base holding it)."""

    def __init__(self, owned: np.ndarray | None = None) -> None:
        self._parts: list[_Mapped] = []
        self._starts: list[int] = []   # the first slot of each mapped part
        self._mapped = 0               # slots in mapped parts; the owned part's slot 0 is this slot
        self.owned = np.empty((1024, DIMENSIONS), np.float32) if owned is None else owned
        self._owned = 0 if owned is None else len(owned)

    def __len__(self) -> int:
        return self._mapped + self._owned

    def heap_bytes(self) -> int:
        """The bytes of the owned slots filled so far (the part doubles ahead of them, untouched); mapped slots
        are file pages, which the arbiter counts from ``/proc/self/smaps``."""
        return self._owned * self.owned.shape[1] * self.owned.itemsize

    @property
    def checked(self) -> bool:
        """Every mapped chunk checked (the graph may score any slot)."""
        return all(part.checked for part in self._parts)

    def map(self, name: str, rows: np.ndarray, crcs: np.ndarray | None = None, chunk: int = CHUNK_SLOTS,
            source: tuple[mmap.mmap, int] | None = None) -> None:
        """Take a snapshot file's vectors section in place as the next slots (before any slot is owned); ``source``:
        the mapped file they lie in and where they start in it."""
        assert self._owned == 0, "mapped slots come before owned ones"
        if len(rows):
            self._parts.append(_Mapped(name, rows, crcs, chunk, source))
            self._starts.append(self._mapped)
            self._mapped += len(rows)

    def append(self, vector: np.ndarray) -> None:
        self._room(self._owned + 1)
        self.owned[self._owned] = vector
        self._owned += 1

    def extend(self, vectors: np.ndarray) -> None:
        self._room(self._owned + len(vectors))
        self.owned[self._owned:self._owned + len(vectors)] = vectors
        self._owned += len(vectors)

    def _room(self, rows: int) -> None:
        if rows > len(self.owned):
            grown = np.empty((max(1024, rows, 2 * len(self.owned)), DIMENSIONS), np.float32)
            grown[:self._owned] = self.owned[:self._owned]
            self.owned = grown

    def check_all(self, reverse: bool = False) -> None:
        """Check every mapped chunk no read has checked yet; Damaged if one fails."""
        for part in reversed(self._parts) if reverse else self._parts:
            part.check_all(reverse)

    def row(self, slot: int) -> np.ndarray:
        """A copy of one slot's vector."""
        return self.gather(np.array([slot], np.int64))[0]

    def gather(self, slots: np.ndarray) -> np.ndarray:
        """The vectors of these slots (a new array), the chunks they fall in checked first."""
        slots = np.asarray(slots, np.int64)
        if not self._parts:
            return self.owned[slots - self._mapped] if self._mapped else self.owned[slots]
        out = np.empty((len(slots), DIMENSIONS), np.float32)
        owned = slots >= self._mapped
        if owned.any():
            out[owned] = self.owned[slots[owned] - self._mapped]
        for start, part in zip(self._starts, self._parts):
            inside = (slots >= start) & (slots < start + len(part.rows))
            if not inside.any():
                continue
            at = slots[inside] - start
            if not part.checked:
                for c in np.unique(at // part.chunk).tolist():
                    part.check(c)
            out[inside] = part.rows[at]
        return out

    def copy(self, start: int, end: int) -> np.ndarray:
        """The vectors of slots ``start`` to ``end`` - 1 (a new array), checked."""
        if start >= self._mapped:
            return self.owned[start - self._mapped:end - self._mapped].copy()
        return self.gather(np.arange(start, end))

    def scores(self, query: np.ndarray) -> np.ndarray:
        """Every slot's score against ``query`` (dead ones included), each mapped chunk checked as it is read."""
        out = np.empty(len(self), np.float32)
        for start, part in zip(self._starts, self._parts):
            part.scores(query, out[start:start + len(part.rows)])
        if self._owned:
            np.matmul(self.owned[:self._owned], query, out=out[self._mapped:])
        return out

    @property
    def base(self) -> "_Mapped | None":
        """The first mapped part: a base's slots, when the index was read from a chain."""
        return self._parts[0] if self._parts else None

    @property
    def quantised(self) -> bool:
        """A mapped part has a quantised copy (:meth:`approximate` reads it)."""
        return any(part.quantised is not None for part in self._parts)

    def upper_bounds(self, query: np.ndarray) -> np.ndarray:
        """For every slot (dead ones included) a bound its score against ``query`` does not pass: from the codes
        where a part has a quantised copy, elsewhere the score itself."""
        upper = np.empty(len(self), np.float32)
        for start, part in zip(self._starts, self._parts):
            end = start + len(part.rows)
            if part.quantised is None:
                part.scores(query, upper[start:end])
            else:
                part.quantised.upper_bounds(query, upper[start:end])
        if self._owned:
            np.matmul(self.owned[:self._owned], query, out=upper[self._mapped:])
        return upper

    def exact_scores(self, slots: np.ndarray, query: np.ndarray, upper: np.ndarray) -> np.ndarray:
        """The exact scores of these slots, ``upper`` from :meth:`upper_bounds`: where a part has a quantised copy
        each chunk they fall in is checked and scored whole (the bits the full scan gives), elsewhere the scores
        are ``upper``'s, exact already."""
        out = upper[slots]
        for start, part in zip(self._starts, self._parts):
            if part.quantised is None:
                continue
            inside = np.flatnonzero((slots >= start) & (slots < start + len(part.rows)))
            if not len(inside):
                continue
            at = slots[inside] - start
            chunks, which = np.unique(at // part.chunk, return_inverse=True)
            part.will_need(chunks.tolist())
            for i, c in enumerate(chunks.tolist()):
                mine = which == i
                out[inside[mine]] = part.chunk_scores(c, query)[at[mine] - c * part.chunk]
        return out

    def contiguous(self, end: int) -> list[np.ndarray]:
        """Slots 0 to ``end`` - 1 as arrays in order, every mapped chunk checked (a new base must never carry
        bytes no checksum vouched for: it would give them a checksum of its own)."""
        self.check_all()
        parts = [part.rows for part in self._parts]
        if end > self._mapped:
            parts.append(self.owned[:end - self._mapped])  # rows below the count are never written again
        return parts


def unit(vector: Any) -> np.ndarray:
    """A vector (float32 bytes or numbers) as a unit-length float32 array; ValueError for a zero vector."""
    v = np.frombuffer(vector, dtype="<f4") if isinstance(vector, (bytes, bytearray, memoryview)) else \
        np.asarray(vector, dtype=np.float32)
    norm = float(np.linalg.norm(v))
    if not norm or not np.isfinite(norm):
        raise ValueError("a zero vector has no direction")
    return (v / norm).astype(np.float32)


def _units(vectors: list[Any]) -> np.ndarray | None:
    """:func:`unit` of each vector, as the rows of one matrix (the same bits as one at a time: each row's norm is
    taken alone and divides it in float32); None when one is a zero vector."""
    if all(isinstance(v, bytes) and len(v) == 4 * DIMENSIONS for v in vectors):
        rows = np.frombuffer(b"".join(vectors), "<f4").reshape(len(vectors), DIMENSIONS)
    else:
        rows = np.array([np.frombuffer(v, "<f4") if isinstance(v, (bytes, bytearray, memoryview)) else
                         np.asarray(v, np.float32) for v in vectors], np.float32).reshape(len(vectors), DIMENSIONS)
    norms = np.array([float(np.linalg.norm(row)) for row in rows], np.float32)
    if not (np.isfinite(norms).all() and norms.all()):
        return None
    return (rows / norms[:, None]).astype(np.float32, copy=False)


def _top(scores: np.ndarray, k: int) -> np.ndarray:
    """Positions of the ``k`` best scores, best first, every score tied with the k-th kept (the caller breaks
    ties on id, so which of a tie makes the cut must not depend on the order of the scan)."""
    if k <= 0:
        return np.arange(0)
    if len(scores) > k:
        kth = np.partition(scores, len(scores) - k)[len(scores) - k]
        picked = np.flatnonzero(scores >= kth)
    else:
        picked = np.arange(len(scores))
    return picked[np.argsort(-scores[picked], kind="stable")]


SELECT_RUN = 256  # slots whose largest bound :func:`_largest` reads as one


def _largest(values: np.ndarray, k: int) -> np.ndarray:
    """Positions of ``k`` of the largest values (which of a tie at the k-th is not said). Each run of
    ``SELECT_RUN`` values is read for its largest first: the k-th largest of those is passed by at least k values,
    so only the values at or above it are selected among (at a million slots, 2-3 ms against a selection over
    every value's 17-20 ms)."""
    if k <= 0 or k >= len(values):
        return np.arange(min(max(k, 0), len(values)))
    whole = len(values) - len(values) % SELECT_RUN
    if whole < 4 * k * SELECT_RUN:
        return np.argpartition(values, len(values) - k)[len(values) - k:]
    runs = values[:whole].reshape(-1, SELECT_RUN).max(axis=1)
    if whole < len(values):
        runs = np.append(runs, values[whole:].max())
    floor = np.partition(runs, len(runs) - k)[len(runs) - k]
    above = np.flatnonzero(values >= floor)  # k or more: every run counted reaches the floor
    return above[np.argpartition(values[above], len(above) - k)[len(above) - k:]] if len(above) > k else above


class VectorIndex:
    def __init__(self, graph: bool = True) -> None:
        self.stamp = 0
        self.link: Link | None = None    # the last snapshot link written or read (None: the next is a base)
        self._killed: list[int] = []      # slots below link.count killed since that link
        self._epoch = 0                   # compactions so far: a graph serialised for a base must be of its slots
        self._serialising = False         # the graph lock is held to serialise the graph: a search waits for it
        self.graphed = 0
        self._count = 0                  # slots written, dead ones included
        self._live = 0
        self._slots = Slots()
        self._dense = np.full(1024, NO_SLOT, np.int64)   # slot -> dense int (NO_SLOT: dead)
        self._slot = np.full(1024, NO_SLOT, np.int64)    # dense int -> slot (NO_SLOT: no vector)
        self._graph: Any = None
        self._graph_part: GraphPart | None = None  # a snapshot's graph, not yet checked nor deserialised
        self._loaded_graph: Any = None             # that graph deserialised, not yet published
        self._uses_graph = graph
        self._dead_in_graph = 0
        self._bitmap: np.ndarray | None = None   # live slots of the graph, kept until a slot dies
        self.graph_lock = threading.Lock()       # held by whoever writes or serialises the graph

    @classmethod
    def build(cls, entities: Iterable[dict[str, Any]], stamp: int, graph: bool = True) -> "VectorIndex":
        """From the rows. The graph is left to :meth:`catch_up`: until then every search is exact."""
        built = cls(graph)
        for row in sorted((r for r in entities if r.get("vector")), key=lambda r: r["denseInt"]):
            built._write(row["denseInt"], row["vector"])
        built.stamp = stamp
        return built

    def __len__(self) -> int:
        return self._live

    @property
    def wasteful(self) -> bool:
        """More dead slots than live ones (and enough to be worth a new graph): time to :meth:`compact`."""
        dead = self._count - self._live
        return dead >= COMPACT_AFTER and dead >= self._live

    def compact(self) -> None:
        """Drop the dead slots: the live vectors renumbered in slot order, and the graph started again (it is
        rebuilt as the fresh tail; meanwhile searches scan exactly). The caller holds :attr:`graph_lock` and
        the brain's lock."""
        live = np.flatnonzero(self._dense[:self._count] != NO_SLOT)
        n = len(live)
        capacity = max(1024, 2 * n)
        slots = Slots(self._slots.gather(live))  # one owned matrix: the mapped files are let go
        dense = np.full(capacity, NO_SLOT, np.int64)
        dense[:n] = self._dense[live]
        self._slot[:] = NO_SLOT
        self._slot[dense[:n]] = np.arange(n)
        self._slots, self._dense, self._count = slots, dense, n
        self._graph, self.graphed, self._dead_in_graph, self._bitmap = None, 0, 0, None
        self._graph_part = None
        self.link, self._killed = None, []  # the slots are renumbered: a delta cannot say it
        self._epoch += 1

    @property
    def graph_waiting(self) -> bool:
        """A snapshot's graph is read but not yet checked and deserialised (:meth:`take_graph`)."""
        return self._graph_part is not None

    @property
    def pending(self) -> int:
        """Slots the graph does not hold yet."""
        return self._count - self.graphed if self._uses_graph else 0

    # -- following the commits -------------------------------------------------------------------------

    def apply(self, before: dict[str, Any] | None, after: dict[str, Any] | None) -> None:
        """Move the index from an entity's old row to its new one (None: absent)."""
        old = before.get("vector") if before is not None else None
        new = after.get("vector") if after is not None else None
        if old is not None and new is not None and old == new and before["denseInt"] == after["denseInt"]:
            return  # a change to anything but the vector keeps its slot
        if old is not None:
            self._kill(before["denseInt"])
        if new is not None:
            self._write(after["denseInt"], new)

    def apply_all(self, moves: Iterable[tuple[dict[str, Any] | None, dict[str, Any] | None]]) -> None:
        """:meth:`apply` for each move in order, in one batch: the same slots, the same vectors bit for bit, the
        same slots killed in the same order. The vectors are scaled and stored together (a replayed tail's 1,400
        moves one at a time took 16 ms of the first read after a crash at a million rows); which slot each write
        takes and which ones die is decided first, from the moves alone."""
        moves = list(moves)
        writes: list[int] = []            # the dense int of each write, in order (NO_SLOT once killed again)
        raw: list[bytes] = []             # its vector as the row holds it
        written: dict[int, int] = {}      # dense int -> its write in this batch that is still alive
        dying: list[int] = []             # dense ints whose slot from before the batch dies, in order
        gone: set[int] = set()

        def kill(dense: int) -> None:
            at = written.pop(dense, None)
            if at is not None:
                writes[at] = NO_SLOT
            elif dense not in gone:
                gone.add(dense)
                dying.append(dense)

        for before, after in moves:
            old = before.get("vector") if before is not None else None
            new = after.get("vector") if after is not None else None
            if old is not None and new is not None and old == new and before["denseInt"] == after["denseInt"]:
                continue
            if old is not None:
                kill(before["denseInt"])
            if new is not None:
                kill(after["denseInt"])
                written[after["denseInt"]] = len(writes)
                writes.append(after["denseInt"])
                raw.append(new)
        vectors = _units(raw)
        if vectors is None:  # a zero vector: one at a time, to fail where the moves one at a time would
            for before, after in moves:
                self.apply(before, after)
            return
        self._kill_many(dying)
        if writes:
            self._append_many(np.array(writes, np.int64), vectors)

    def _write(self, dense: int, vector: bytes) -> None:
        if dense < len(self._slot) and self._slot[dense] != NO_SLOT:
            self._kill(dense)
        self._append(dense, unit(vector))

    def _append(self, dense: int, vector: np.ndarray) -> None:
        """Take the next slot for ``dense`` (NO_SLOT: a slot dead already, as a delta may hold one)."""
        slot = self._count
        self._room(slot + 1, dense)
        if dense != NO_SLOT:
            self._slot[dense] = slot
            self._live += 1
        self._slots.append(vector)
        self._dense[slot] = dense
        self._count += 1

    def _room(self, slots: int, dense: int) -> None:
        """Grow the dense ints to hold ``slots`` slots (doubling) and the slot map to hold dense int ``dense``
        (the vectors grow in :class:`Slots`)."""
        if slots > len(self._dense):  # past the count a dense int is written before it is read: nothing to fill
            grown = np.empty(len(self._dense) + max(1024, slots - len(self._dense), len(self._dense)), np.int64)
            grown[:self._count] = self._dense[:self._count]
            self._dense = grown
        if dense >= len(self._slot):
            self._slot = _grown_slot_map(self._slot, max(dense + 1, 2 * len(self._slot)))

    def _append_many(self, dense_ints: np.ndarray, vectors: np.ndarray, mapped: str | None = None) -> None:
        """:meth:`_append` for a delta's slots in one go (a Python loop over 20,000 slots took 0.4 s of an open);
        ``mapped`` (the delta's file name): its vectors are taken in place, not copied."""
        alive_at = np.flatnonzero(dense_ints != NO_SLOT)
        alive = dense_ints[alive_at]
        _, last = np.unique(alive[::-1], return_index=True)
        if len(last) < len(alive):  # one entity twice in one delta: the later slot wins, the earlier is dead
            keep = np.zeros(len(alive), bool)
            keep[len(alive) - 1 - last] = True
            dense_ints = dense_ints.copy()
            dense_ints[alive_at[~keep]] = NO_SLOT
            alive = alive[keep]
        held = alive[alive < len(self._slot)]
        for dense in held[self._slot[held] != NO_SLOT].tolist():
            self._kill(dense)  # never two live slots for one entity, whatever a delta says
        start, end = self._count, self._count + len(dense_ints)
        self._room(end, int(alive.max(initial=NO_SLOT)))
        if mapped is not None:
            self._slots.map(mapped, vectors)
        else:
            self._slots.extend(vectors)
        self._dense[start:end] = dense_ints
        slots = np.arange(start, end)
        self._slot[dense_ints[dense_ints != NO_SLOT]] = slots[dense_ints != NO_SLOT]
        self._live += len(alive)
        self._count = end

    def _kill(self, dense: int) -> None:
        if dense >= len(self._slot):
            return
        slot = int(self._slot[dense])
        if slot == NO_SLOT:
            return
        self._slot[dense] = NO_SLOT
        self._dense[slot] = NO_SLOT
        self._live -= 1
        if self.link is not None and slot < self.link.count:
            self._killed.append(slot)
        if slot < self.graphed:
            self._dead_in_graph += 1
            self._bitmap = None

    def _kill_many(self, dense_ints: list[int]) -> None:
        """:meth:`_kill` for each of these dense ints (each once), in order."""
        dense = np.array(dense_ints, np.int64)
        dense = dense[dense < len(self._slot)]
        slots = self._slot[dense]
        dense, slots = dense[slots != NO_SLOT], slots[slots != NO_SLOT]
        if not len(dense):
            return
        self._slot[dense] = NO_SLOT
        self._dense[slots] = NO_SLOT
        self._live -= len(dense)
        if self.link is not None:
            self._killed.extend(slots[slots < self.link.count].tolist())
        in_graph = int(np.count_nonzero(slots < self.graphed))
        if in_graph:
            self._dead_in_graph += in_graph
            self._bitmap = None

    def rows_caught_up(self, entities: Iterable[dict[str, Any]], stamp: int) -> None:
        """Bring an older index to ``stamp`` from that generation's rows: a row written after the index's
        stamp replaces its slot, and a live slot no row holds dies."""
        held: set[int] = set()
        for row in entities:
            dense = row["denseInt"]
            held.add(dense)
            if row["generation"] > self.stamp:
                self._kill(dense)
                if row.get("vector"):
                    self._write(dense, row["vector"])
        for dense in self._dense[:self._count]:
            if dense != NO_SLOT and int(dense) not in held:
                self._kill(int(dense))
        self.stamp = stamp

    # -- the graph -------------------------------------------------------------------------------------

    def tail(self) -> tuple[int, np.ndarray]:
        """Where the graph stops and a copy of the vectors past it (read under the brain's lock)."""
        return self.graphed, self._slots.copy(self.graphed, self._count)

    def grow_graph(self, start: int, vectors: np.ndarray) -> None:
        """Add the slots from ``start`` to the graph; the caller holds :attr:`graph_lock` (not the brain's)."""
        if self._graph is None:
            self._graph = faiss.IndexHNSWFlat(DIMENSIONS, HNSW_M, faiss.METRIC_INNER_PRODUCT)
            self._graph.hnsw.efConstruction = EF_CONSTRUCTION
        assert self._graph.ntotal == start, "the graph's ids are the slots, in order"
        if len(vectors):
            self._graph.add(vectors)

    def graph_grown(self, upto: int) -> None:
        """The graph holds slots below ``upto`` now (under the brain's lock)."""
        self._dead_in_graph = int(np.count_nonzero(self._dense[:upto] == NO_SLOT))
        self.graphed = upto
        self._bitmap = None

    def take_graph(self) -> str | None:
        """Check the slots no read has checked yet, then check and deserialise the graph a snapshot held, if one
        is still pending; the caller holds :attr:`graph_lock` (not the brain's: this is the part of an open that
        takes seconds). Why the graph was not used, if it was not (it is then built again from the slots, which
        were checked); Damaged when a chunk of the slots fails its checksum (nothing of the index is trusted)."""
        self._slots.check_all(reverse=True)  # the graph scores any slot: it never takes over before all are checked
        part, self._graph_part = self._graph_part, None
        if part is None:
            return None
        try:
            graph = part.load()
        except ValueError as exc:
            return f"graph section: {exc}; the graph is built again from the slots"
        self._loaded_graph = graph
        return None

    def graph_taken(self) -> None:
        """Publish the graph :meth:`take_graph` loaded (under the brain's lock): it takes over from the exact scan."""
        graph, self._loaded_graph = self._loaded_graph, None
        if graph is not None and self._graph is None and self.graphed == 0:
            self._graph = graph
            self.graph_grown(graph.ntotal)

    def catch_up(self) -> None:
        """Put the whole tail in the graph now, in one thread (tests, and a build with no brain lock to share)."""
        with self.graph_lock:
            self.take_graph()
            self.graph_taken()
            if self.wasteful:
                self.compact()
            start, vectors = self.tail()
            self.grow_graph(start, vectors)
            self.graph_grown(start + len(vectors))

    # -- searching -------------------------------------------------------------------------------------

    def slots_of(self, dense_ints: array | np.ndarray) -> np.ndarray:
        """The live slots of these entities (those with a vector), in the order given."""
        wanted = np.frombuffer(dense_ints, dtype=np.uint64).astype(np.int64) if isinstance(dense_ints, array) \
            else np.asarray(dense_ints, dtype=np.int64)
        wanted = wanted[wanted < len(self._slot)]
        slots = self._slot[wanted]
        return slots[slots != NO_SLOT]

    def vector_of(self, dense: int) -> np.ndarray | None:
        """The unit vector an entity holds here, or None."""
        slot = int(self._slot[dense]) if dense < len(self._slot) else NO_SLOT
        return None if slot == NO_SLOT else self._slots.row(slot)

    def search(self, query: np.ndarray, k: int, allowed: array | None = None) -> tuple[np.ndarray, np.ndarray, str]:
        """The ``k`` entities closest to the unit vector ``query``: (scores, dense ints, how), best first;
        ``allowed`` (sorted dense ints), when given, is the only set a hit may come from. ``how`` is
        ``exact`` or ``graph``."""
        slots = None if allowed is None else self.slots_of(allowed)
        if slots is not None and len(slots) == self._live:
            slots = None  # the filter keeps every vectored row
        small = self._live <= EXACT_BELOW if slots is None else len(slots) <= EXACT_CANDIDATES
        if small or self._graph is None or self.graphed == 0 or not self._graph_taken():
            return (*self._exact(query, k, slots), "exact")
        try:
            found = self._graph_search(query, k, slots)
        finally:
            self.graph_lock.release()
        if found is None:  # the filtered walk could not fill the page: the exact scan can
            return (*self._exact(query, k, slots), "exact")
        return (*found, "graph")

    def _graph_taken(self) -> bool:
        """Take the graph lock for a search: at once, or after a flush's serialisation of the graph (milliseconds);
        never while a catch-up holds it (seconds: the search scans exactly instead)."""
        return self.graph_lock.acquire(blocking=False) or \
            (self._serialising and self.graph_lock.acquire(timeout=SERIALISE_WAIT_SECONDS))

    def exact(self, query: np.ndarray, k: int, allowed: array | None = None) -> tuple[np.ndarray, np.ndarray]:
        """The exact scan alone: every live vector (or the allowed ones) scored."""
        return self._exact(query, k, None if allowed is None else self.slots_of(allowed))

    def _exact(self, query: np.ndarray, k: int, slots: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        if slots is None and QUANTISED_SCAN and self._live and self._slots.quantised:
            return self._bounded(query, min(k, self._live))
        if slots is None:
            count = self._count
            scores = self._slots.scores(query)
            if self._live < count:
                scores[self._dense[:count] == NO_SLOT] = -np.inf
            picked = _top(scores, min(k, self._live))
            return scores[picked], self._dense[picked]
        scores = self._slots.gather(slots) @ query
        picked = _top(scores, k)
        return scores[picked], self._dense[slots[picked]]

    def _bounded(self, query: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """The exact scan's answer from the quantised copy: every live slot scored approximately, and exactly only
        those that could reach the k-th best exact score (docs/store-format.md, "Vector index snapshots")."""
        if k <= 0:
            return np.empty(0, np.float32), np.empty(0, np.int64)
        count = self._count
        upper = self._slots.upper_bounds(query)
        if self._live < count:
            upper[self._dense[:count] == NO_SLOT] = -np.inf
        best = _largest(upper, k)  # k live slots: the dead are at -inf
        floor = self._slots.exact_scores(best, query, upper).min()  # k slots score at least this
        candidates = np.flatnonzero(upper >= floor)  # every other slot scores below k others
        scores = self._slots.exact_scores(candidates, query, upper)
        picked = _top(scores, k)
        return scores[picked], self._dense[candidates[picked]]

    def _graph_search(self, query: np.ndarray, k: int, slots: np.ndarray | None) -> tuple[np.ndarray, np.ndarray] | None:
        graphed, count = self.graphed, self._count
        params = faiss.SearchParametersHNSW()
        params.efSearch = max(EF_SEARCH, 2 * k)
        if slots is not None:
            inside = slots[slots < graphed]
            mask = np.zeros(graphed, bool)
            mask[inside] = True
            bitmap = np.packbits(mask, bitorder="little")
            params.efSearch *= 2
            tail = slots[slots >= graphed]
        else:
            bitmap = self._live_bitmap() if self._dead_in_graph else None
            tail = np.arange(graphed, count)
            tail = tail[self._dense[graphed:count] != NO_SLOT]
        if bitmap is not None:
            selector = faiss.IDSelectorBitmap(graphed, faiss.swig_ptr(bitmap))
            params.sel = selector
        _, found = self._graph.search(query[None, :], k, params=params)
        found = found[0]
        found = found[(found >= 0) & (found < graphed)]
        found = found[self._dense[found] != NO_SLOT]   # a slot that died is never an answer
        if slots is not None and len(found) < min(k, len(inside)):
            return None
        candidates = np.concatenate([found, tail]) if len(tail) else found
        scores = self._slots.gather(candidates) @ query  # the same exact score an exact scan gives
        picked = _top(scores, k)
        return scores[picked], self._dense[candidates[picked]]

    def _live_bitmap(self) -> np.ndarray:
        if self._bitmap is None:
            self._bitmap = np.packbits(self._dense[:self.graphed] != NO_SLOT, bitorder="little")
        return self._bitmap

    # -- snapshots (docs/store-format.md, "Vector index snapshots") ----------------------------------

    def encode(self) -> bytes:
        """The index as a base snapshot. The caller holds :attr:`graph_lock` and the brain's lock."""
        frozen = self.freeze(base=True)
        self.graph_for(frozen)
        return frozen.encode()

    def next_link(self) -> str | None:
        """What the next snapshot link must be: "base", "delta", or None when nothing changed since the last."""
        link = self.link
        if link is None:
            return "base"
        if link.stamp == self.stamp:
            return None
        since = link.since_base + (self._count - link.count) + len(self._killed)
        small = since <= max(BASE_AFTER_MIN, link.base_slots // BASE_AFTER)
        return "delta" if small and link.deltas < MAX_DELTAS else "base"

    def freeze(self, base: bool) -> "Frozen":
        """The next snapshot link, copied, and recorded as written: a base, or a delta of what changed since the
        last link. The caller holds the brain's lock (and :attr:`graph_lock` for a base: its graph is
        serialised by :meth:`Frozen.encode`)."""
        link, count = self.link, self._count
        if link is not None and not base:
            since = link.since_base + (count - link.count) + len(self._killed)
            frozen = Frozen(self.stamp, link.base, link.stamp, link.count, self._dense[link.count:count].copy(),
                            self._slots.copy(link.count, count), np.asarray(self._killed, np.int64))
            self.link, self._killed = Link(link.base, self.stamp, count, link.base_slots, since, link.deltas + 1), []
            return frozen
        # the slots below the count are never written again: references, not a copy (checked when encoded)
        frozen = Frozen(self.stamp, self.stamp, self.stamp, 0, self._dense[:count].copy(), self._slots, None,
                        epoch=self._epoch)
        self.link, self._killed = Link(self.stamp, self.stamp, count, count, 0, 0), []
        return frozen

    def graph_for(self, frozen: "Frozen") -> None:
        """Serialise the graph into a frozen base, if it is of the base's slots (no compaction since, and no slot
        past the base's in it); else the base goes without one and the next open builds the graph again. The
        caller holds :attr:`graph_lock` only: a commit and a read never wait on this."""
        graph, part = self._graph, self._graph_part
        if graph is None and part is not None and self._epoch == frozen.epoch and 0 < part.graphed <= len(frozen.dense):
            try:  # still as it was read: its bytes, once checked, are the serialisation
                frozen.graph, frozen.graphed = part.checked(), part.graphed
            except ValueError:
                pass  # the base goes without it; the catch-up says why it was not used
            return
        if graph is not None and self._epoch == frozen.epoch and 0 < graph.ntotal <= len(frozen.dense):
            self._serialising = True
            try:
                frozen.graph, frozen.graphed = faiss.serialize_index(graph).tobytes(), graph.ntotal
            finally:
                self._serialising = False

    def apply_delta(self, data: bytes | mmap.mmap, name: str | None = None, checked: bool = False) -> None:
        """Append one delta to the index read so far; ValueError when it does not check out or does not follow.
        ``name`` (the file's, when ``data`` is it mapped): its vectors are read in place, not copied. ``checked``:
        its checksum was found good on these very bytes already (mapped and checked ahead, :func:`check_ahead`)."""
        view = memoryview(data)
        if len(view) < _DELTA.size + _CRC.size:
            raise ValueError("sizes do not add up")
        magic, form, stamp, base, previous, dims, first, written, killed = _DELTA.unpack_from(view)
        if magic != DELTA_MAGIC or form not in (1, DELTA_FORMAT) or dims != DIMENSIONS:
            raise ValueError(f"not a vector index delta of format 1 or {DELTA_FORMAT} at {DIMENSIONS} dimensions")
        crc = crc32 if form == 1 else crc32c.crc32c
        if not checked and crc(view[:-4]) != _CRC.unpack_from(view, len(view) - 4)[0]:
            raise ValueError("checksum mismatch")
        link = self.link
        if link is None or base != link.base or previous != link.stamp or first != self._count or stamp <= previous:
            raise ValueError("it does not follow the chain read so far")
        at = _DELTA.size
        dense_at = at + 8 * killed
        vectors_at = dense_at + 8 * written
        if vectors_at + 4 * DIMENSIONS * written + _CRC.size != len(view):
            raise ValueError("sizes do not add up")
        kills = np.frombuffer(view, "<i8", killed, at)
        dense_ints = np.frombuffer(view, "<i8", written, dense_at)
        if len(kills) and not (0 <= kills.min() and kills.max() < first) or \
                len(dense_ints) and dense_ints.min() < NO_SLOT:
            raise ValueError("a slot or dense int out of range")  # checked before anything is applied
        for slot in kills.tolist():
            dense = int(self._dense[slot])
            if dense != NO_SLOT:
                self._kill(dense)
        vectors = np.frombuffer(view, "<f4", DIMENSIONS * written, vectors_at).reshape(written, DIMENSIONS)
        self._append_many(dense_ints, vectors, mapped=name)
        self.stamp = stamp
        self.link = Link(base, stamp, self._count, link.base_slots, link.since_base + written + killed, link.deltas + 1)
        self._killed = []

    @classmethod
    def decode(cls, data: bytes | mmap.mmap, graph_later: bool = False, room: int = 0,
               name: str = "base", dense_ints: int = 0, prepared: "Prepared | None" = None) -> "VectorIndex":
        """An index from its base snapshot (bytes, or the file mapped); ValueError when it does not check out (it is
        then rebuilt, never trusted). The vectors are read in place (``name``: the file's, for the warnings):
        format 3's header and dense ints are checked here and each vectors chunk when a read first touches it;
        a format 1 or 2 base's slots are checked whole here. The graph is checked and deserialised here too
        unless ``graph_later``: it is then left for :meth:`take_graph`, off the read path, and searches scan
        exactly meanwhile (a format 1 base's graph is checked with its slots). ``room``: the slots the deltas
        and the log's tail will add (their dense ints are reserved for); ``dense_ints``: the dense ints minted so
        far (the slot map holds them all from the start). ``prepared``: the dense ints and slot map
        :func:`check_ahead` made of these very bytes, used when they have that room."""
        view = memoryview(data)
        if len(view) < _HEADER.size + _CRC.size:
            raise ValueError("sizes do not add up")
        magic, form, stamp, dims, count, graphed, graph_bytes = _HEADER.unpack_from(view)
        if magic != MAGIC or form not in (1, 2, SNAPSHOT_FORMAT) or dims != DIMENSIONS:
            raise ValueError(f"not a vector index snapshot of format 1 to {SNAPSHOT_FORMAT} at {DIMENSIONS} dimensions")
        if prepared is not None and (prepared.data is not data or
                                     (prepared.stamp, prepared.count) != (stamp, count)):
            prepared = None  # made of other bytes
        if form == SNAPSHOT_FORMAT:
            layout = _layout(view, count, graph_bytes) if prepared is None else prepared.layout
            dense_at, vectors_at, crcs, chunk, graph_crc = layout
            crc = crc32c.crc32c
        else:
            dense_at, vectors_at, crcs, chunk = _HEADER.size, _HEADER.size + 8 * count, None, CHUNK_SLOTS
            trailer = _CRC.size if form == 1 else _CRCS.size
            if vectors_at + 4 * DIMENSIONS * count + graph_bytes + trailer != len(view):
                raise ValueError("sizes do not add up")
            if form == 1:
                checked = crc32(view[:-4]) == _CRC.unpack_from(view, len(view) - 4)[0]
                graph_crc = None  # checked with the rest
            else:
                slots_crc, graph_crc = _CRCS.unpack_from(view, len(view) - _CRCS.size)
                checked = crc32(view[:vectors_at + 4 * DIMENSIONS * count]) == slots_crc and \
                    (graph_bytes or graph_crc == 0)
            if not checked:
                raise ValueError("checksum mismatch")
            crc = crc32
        if graphed > count:
            raise ValueError("sizes do not add up")
        index = cls()
        if prepared is not None and prepared.fits(room, dense_ints):
            index._dense, index._slot, live = prepared.dense, prepared.slot, prepared.live
        else:
            index._dense, index._slot, live, _ = _slot_arrays(view, count, dense_at, room, dense_ints)
        index._slots.map(name, np.frombuffer(view, "<f4", DIMENSIONS * count, vectors_at).reshape(count, DIMENSIONS),
                         crcs, chunk, (data, vectors_at) if isinstance(data, mmap.mmap) else None)
        index._count, index._live, index.stamp = count, live, stamp
        index.link = Link(stamp, stamp, count, count, 0, 0)
        if graph_bytes:
            index._graph_part = GraphPart(data, vectors_at + 4 * DIMENSIONS * count, graph_bytes, graphed,
                                          graph_crc, crc)
            if not graph_later:
                why = index.take_graph()
                index.graph_taken()
                if index._graph is None:
                    raise ValueError(why or "the graph section does not check out")
        return index


def _grown_slot_map(slot: np.ndarray, size: int) -> np.ndarray:
    """The slot map (dense int -> slot) at ``size`` entries: the old entries copied, only the new ones filled."""
    grown = np.empty(size, np.int64)
    grown[:len(slot)] = slot
    grown[len(slot):] = NO_SLOT
    return grown


def _slot_arrays(view: memoryview, count: int, dense_at: int, room: int,
                 dense_ints: int) -> tuple[np.ndarray, np.ndarray, int, int]:
    """A base's dense ints (owned, with ``room`` past its count) and its slot map (dense int -> slot, room for
    ``room`` more and for ``dense_ints``): ``(dense, slot map, live slots, largest dense int)``; ValueError when a
    dense int is out of range."""
    dense = np.empty(max(1024, count + room), np.int64)  # past the count: written before it is read
    dense[:count] = np.frombuffer(view, "<i8", count, dense_at)
    if count and dense[:count].min() < NO_SLOT:
        raise ValueError("a dense int out of range")
    live = dense[:count] != NO_SLOT
    top = int(dense[:count].max(initial=NO_SLOT))
    # room for the dense ints the deltas mint (new entities take the next ones): grown once, here, not by them
    slot = np.full(max(1024, top + 1 + room, dense_ints), NO_SLOT, np.int64)
    slot[dense[:count][live]] = np.flatnonzero(live)
    return dense, slot, int(np.count_nonzero(live)), top


@dataclass
class Prepared:
    """A format 3 base read ahead (:func:`check_ahead`): its file mapped, its header and dense section checked
    (``layout``, as :func:`_layout` answers it) and the arrays :func:`_slot_arrays` makes of it, with room."""
    data: mmap.mmap
    stamp: int
    count: int
    layout: tuple[int, int, np.ndarray, int, int]
    dense: np.ndarray
    slot: np.ndarray
    live: int
    top: int

    def fits(self, room: int, dense_ints: int) -> bool:
        """Whether the arrays have the room a decode for ``room`` and ``dense_ints`` would give them, or more."""
        return len(self.dense) >= max(1024, self.count + room) and \
            len(self.slot) >= max(1024, self.top + 1 + room, dense_ints)


def _layout(view: memoryview, count: int, graph_bytes: int) -> tuple[int, int, np.ndarray, int, int]:
    """Where a format 3 base's sections are, its header and dense section checked: (dense at, vectors at, the
    chunks' checksums, slots a chunk, graphCrc); ValueError when they do not check out."""
    if len(view) < _HEADER3.size + _CRC.size:
        raise ValueError("sizes do not add up")
    *_, chunk, header_crc = _HEADER3.unpack_from(view)
    if crc32c.crc32c(view[:_HEADER3.size - 4]) != header_crc or chunk == 0:
        raise ValueError("header checksum mismatch")
    chunks = -(-count // chunk)
    dense_at = _HEADER3.size
    crcs_at = dense_at + 8 * count
    dense_crc_at = crcs_at + 4 * chunks
    vectors_at = _aligned(dense_crc_at + _CRC.size)
    if vectors_at + 4 * DIMENSIONS * count + graph_bytes + _CRC.size != len(view):
        raise ValueError("sizes do not add up")
    if crc32c.crc32c(view[dense_at:dense_crc_at]) != _CRC.unpack_from(view, dense_crc_at)[0]:
        raise ValueError("dense section checksum mismatch")
    graph_crc = _CRC.unpack_from(view, len(view) - _CRC.size)[0]
    if not graph_bytes and graph_crc != 0:
        raise ValueError("checksum mismatch")
    return dense_at, vectors_at, np.frombuffer(view, "<u4", chunks, crcs_at), chunk, graph_crc


def _aligned(at: int) -> int:
    """The vectors section starts on a 64-byte boundary of the file (a cache line: whole rows per line)."""
    return -(-at // 64) * 64


@dataclass
class GraphPart:
    """A base's graph section, as read: checked (format 2 and 3) and deserialised only when the graph is wanted."""

    data: bytes | mmap.mmap
    at: int
    size: int
    graphed: int
    crc: int | None  # the base's graphCrc; None: format 1, checked whole with the slots
    crc_of: Any = crc32  # how graphCrc is computed: zlib's crc32 (format 2) or crc32c (format 3)

    def _view(self) -> memoryview:
        part = memoryview(self.data)[self.at:self.at + self.size]
        if self.crc is not None and self.crc_of(part) != self.crc:
            raise ValueError("checksum mismatch")
        return part

    def checked(self) -> bytes:
        return bytes(self._view())

    def load(self) -> Any:
        # read in place: faiss copies what it deserialises, so no copy of the section is made first
        graph = faiss.deserialize_index(np.frombuffer(self._view(), np.uint8))
        if graph.ntotal != self.graphed:
            raise ValueError("the graph does not hold the slots the header names")
        return graph


MAGIC = b"BVX1"
DELTA_MAGIC = b"BVD1"
SNAPSHOT_FORMAT = 3   # a base's: crc32c of its header, of its dense ints, of each chunk of vectors, of its graph
DELTA_FORMAT = 2      # a delta's: crc32c of it all (format 1: zlib's crc32, still read)
_HEADER = struct.Struct("<4sIQIxxxxQQQ")
_HEADER3 = struct.Struct("<4sIQIxxxxQQQII")  # format 3: chunkSlots and headerCrc after format 2's header
_DELTA = struct.Struct("<4sIQQQIxxxxQQQ")
_CRC = struct.Struct("<I")
_CRCS = struct.Struct("<II")  # a format 2 base's slotsCrc and graphCrc
QUANTISED_MAGIC = b"BVQ1"
QUANTISED_FORMAT = 1
_QUANTISED = struct.Struct("<4sIQIxxxxQII")  # a quantised copy's header, headerCrc last
SUFFIX = ".vec"
DELTA_SUFFIX = ".vecd"
QUANTISED_SUFFIX = ".vecq"
QUANTISE_ROWS = 65_536      # slots quantised at a time when a copy is written (float64 work space: 200 MB)


@dataclass(frozen=True)
class Link:
    """Where the snapshot chain of an index stands: its base's stamp, the last link's stamp and slot count, the
    base's slots, the slots the deltas since the base wrote and killed, and how many deltas there are."""

    base: int
    stamp: int
    count: int
    base_slots: int
    since_base: int
    deltas: int


@dataclass
class Frozen:
    """One link copied under the brain's lock (:meth:`VectorIndex.freeze`), encoded without it. A base has
    ``killed`` None and the index's :class:`Slots` by reference (the slots below its count are never written
    again), and its ``graph`` serialised by :meth:`VectorIndex.graph_for` under the index's graph lock; a delta
    has its vectors copied."""

    stamp: int
    base: int
    previous: int
    first: int
    dense: np.ndarray
    vectors: Any  # Slots (a base) or np.ndarray (a delta)
    killed: np.ndarray | None
    epoch: int = 0
    graph: bytes = b""
    graphed: int = 0

    @property
    def is_base(self) -> bool:
        return self.killed is None

    def encode(self) -> bytes:
        """The link's file (Damaged when a base's mapped slots fail a check: it is then not written)."""
        written = len(self.dense)
        if self.killed is None:
            vectors = b"".join(part.astype("<f4", copy=False).tobytes()
                               for part in self.vectors.contiguous(written))
            view, row = memoryview(vectors), 4 * DIMENSIONS
            chunks = np.array([crc32c.crc32c(view[at:at + CHUNK_SLOTS * row])
                               for at in range(0, len(vectors), CHUNK_SLOTS * row)], "<u4")
            head = _HEADER3.pack(MAGIC, SNAPSHOT_FORMAT, self.stamp, DIMENSIONS, written, self.graphed,
                                 len(self.graph), CHUNK_SLOTS, 0)[:-4]
            dense = self.dense.astype("<i8").tobytes() + chunks.tobytes()
            front = b"".join((head, _CRC.pack(crc32c.crc32c(head)), dense, _CRC.pack(crc32c.crc32c(dense))))
            pad = bytes(_aligned(len(front)) - len(front))
            return b"".join((front, pad, vectors, self.graph, _CRC.pack(crc32c.crc32c(self.graph))))
        header = _DELTA.pack(DELTA_MAGIC, DELTA_FORMAT, self.stamp, self.base, self.previous, DIMENSIONS,
                             self.first, written, len(self.killed))
        body = b"".join((header, self.killed.astype("<i8").tobytes(), self.dense.astype("<i8").tobytes(),
                         self.vectors.astype("<f4").tobytes()))
        return body + _CRC.pack(crc32c.crc32c(body))


def write_link(folder: Path, frozen: Frozen, data: bytes) -> None:
    """Write one link; a base then its quantised copy, and removes every older base, delta and copy."""
    folder.mkdir(exist_ok=True)
    name = snapshot_name(frozen.stamp, SUFFIX if frozen.is_base else DELTA_SUFFIX)
    write_durably(folder / name, data)
    if frozen.is_base:
        copy = snapshot_name(frozen.stamp, QUANTISED_SUFFIX)
        write_durably(folder / copy, encode_quantised(frozen.stamp, frozen.vectors.contiguous(len(frozen.dense))))
        for older in [p for suffix in (SUFFIX, DELTA_SUFFIX, QUANTISED_SUFFIX) for p in folder.glob("*" + suffix)]:
            if older.name not in (name, copy):
                older.unlink(missing_ok=True)


def quantise(vectors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Unit vectors as int8 codes and one float32 scale each: ``scale = max |x| / 127``, ``code = round(x / scale)``,
    so no cell lies more than half a scale from its code times the scale."""
    scales = (np.abs(vectors).max(axis=1) / CODE_MAX).astype(np.float32)
    wide = np.where(scales > 0, scales, 1).astype(np.float64)
    codes = np.clip(np.rint(vectors / wide[:, None]), -CODE_MAX, CODE_MAX).astype(np.int8)
    return codes, scales


def encode_quantised(stamp: int, parts: list[np.ndarray]) -> bytes:
    """A base's quantised copy (docs/store-format.md, "Vector index snapshots") of its slots, given in order."""
    codes, scales = [], []
    for part in parts:
        for at in range(0, len(part), QUANTISE_ROWS):
            c, s = quantise(part[at:at + QUANTISE_ROWS])
            codes.append(c.tobytes())
            scales.append(s.astype("<f4").tobytes())
    body = b"".join(codes)
    slots = len(body) // DIMENSIONS
    view, size = memoryview(body), CHUNK_SLOTS * DIMENSIONS
    crcs = np.array([crc32c.crc32c(view[at:at + size]) for at in range(0, len(body), size)], "<u4")
    head = _QUANTISED.pack(QUANTISED_MAGIC, QUANTISED_FORMAT, stamp, DIMENSIONS, slots, CHUNK_SLOTS, 0)[:-4]
    front = b"".join(scales) + crcs.tobytes()
    start = b"".join((head, _CRC.pack(crc32c.crc32c(head)), front, _CRC.pack(crc32c.crc32c(front))))
    return b"".join((start, bytes(_aligned(len(start)) - len(start)), body))


def decode_quantised(data: bytes | mmap.mmap, name: str, stamp: int, slots: int) -> _Codes:
    """A base's quantised copy read in place, its header and front checked; ValueError when they do not check out
    or it is not the copy of the base of ``stamp`` and ``slots``."""
    view = memoryview(data)
    if len(view) < _QUANTISED.size:
        raise ValueError("sizes do not add up")
    magic, form, of, dims, count, chunk, header_crc = _QUANTISED.unpack_from(view)
    if magic != QUANTISED_MAGIC or form != QUANTISED_FORMAT or dims != DIMENSIONS:
        raise ValueError(f"not a quantised copy of format {QUANTISED_FORMAT} at {DIMENSIONS} dimensions")
    if crc32c.crc32c(view[:_QUANTISED.size - 4]) != header_crc or chunk == 0:
        raise ValueError("header checksum mismatch")
    if of != stamp or count != slots:
        raise ValueError(f"it copies a base of generation {of} and {count} slots")
    chunks = -(-count // chunk)
    crcs_at = _QUANTISED.size + 4 * count
    front_crc_at = crcs_at + 4 * chunks
    codes_at = _aligned(front_crc_at + _CRC.size)
    if codes_at + DIMENSIONS * count != len(view):
        raise ValueError("sizes do not add up")
    if crc32c.crc32c(view[_QUANTISED.size:front_crc_at]) != _CRC.unpack_from(view, front_crc_at)[0]:
        raise ValueError("front checksum mismatch")
    return _Codes(name, np.frombuffer(view, np.int8, DIMENSIONS * count, codes_at).reshape(count, DIMENSIONS),
                  np.frombuffer(view, "<f4", count, _QUANTISED.size), np.frombuffer(view, "<u4", chunks, crcs_at),
                  chunk)


@dataclass
class Ahead:
    """What an open reads and checks off the read path, on the ahead helper's thread, begun when a handle opens, by
    file name: a large base's dense ints and slot map (:class:`Prepared`), its quantised copy (mapped, its header
    and front checked, its codes checked whole, :meth:`_Mapped.check_whole`: the generation it copies and the
    copy), and the deltas after the base (each mapped, its checksum found good). A result of None: not read."""
    checks: "dict[str, Future[Any]]"

    def take(self, path: Path) -> Any:
        """What was read ahead of the file at ``path`` (waited for if under way), or None: the read reads it itself
        (a check not yet begun is called off, so the two threads share the work)."""
        checking = self.checks.pop(path.name, None)
        if checking is None or checking.cancel():
            return None
        return checking.result()

    def cancel(self) -> None:
        """Call off the checks not begun; one under way ends on its own, and its map goes with it."""
        for checking in self.checks.values():
            checking.cancel()


AHEAD_SLOTS = 65_536  # a base this large is read ahead, its copy checked (below it, the scan's checks take < 5 ms)
AHEAD_DELTA_BYTES = AHEAD_SLOTS * DIMENSIONS  # deltas this large in all are checked ahead (each a whole-file pass)
AHEAD_ROOM = 65_536  # the slots and dense ints a base read ahead has room for past its deltas and the MANIFEST's
# one thread for every handle of the process: a check is one GIL-free pass at the memory's pace
_ahead_helper = LongLived(1, "brainy-vectors-ahead")


def check_ahead(folder: Path, dense_ints: int = 0, opened: threading.Event | None = None) -> Ahead | None:
    """Begin reading the newest base's dense ints and checking its quantised copy, if the base is large, and the
    deltas after it, if they are, so that the read of the index and the first scan after an open find them done:
    at a million slots the base's two arrays (16 MB, 17 ms in a new process, mostly faulting their pages in), the
    copy's 364 MB (50-70 ms) and 95 MB of deltas after a crash (13-19 ms), overlapped with the open's replay of the
    log instead. ``dense_ints``: the MANIFEST's next dense int. None when there is nothing to do ahead.

    ``opened``, set once the open has read what it reads itself: when the files are not in the page cache, the
    reading ahead waits for it (at most ``OPEN_WAIT_SECONDS``). Then the disk, not the memory, is what the two
    threads share, and a first door that is not a vector search (a ``get`` after a crash, at a million rows:
    195-330 ms while 450 MB were read beside the open) waits for no byte of the index."""
    found = newest_snapshot(folder, SUFFIX) if folder.is_dir() else None
    if found is None:
        return None
    stamp, base = found
    copy = folder / snapshot_name(stamp, QUANTISED_SUFFIX)
    try:
        # a small base has small deltas too (a new base is written once they pass a quarter of it): a small
        # store's open lists and reads nothing more
        if base.stat().st_size < AHEAD_SLOTS * 4 * DIMENSIONS:
            return None
        copied = copy.is_file()
        copy_large = copied and copy.stat().st_size >= AHEAD_SLOTS * DIMENSIONS
        deltas = [p for _, p in _deltas(folder, stamp)]
        sized = sum(p.stat().st_size for p in deltas) >= AHEAD_DELTA_BYTES
    except OSError:
        return None
    # the copy first, the largest: an open with no log to replay reads the base and the deltas itself while this
    # thread checks the copy, and one with a long replay finds all of it done
    helper, checks = _ahead_helper(), {}
    if opened is not None and not _cached(copy if copy_large else base):
        helper.submit(opened.wait, OPEN_WAIT_SECONDS)  # the helper's jobs run in turn: every one after this
    if copy_large:
        checks[copy.name] = helper.submit(_checked_ahead, copy)
    room = sum(_written(p) for p in deltas) + AHEAD_ROOM
    checks[base.name] = helper.submit(_prepared, base, copied, room, dense_ints + AHEAD_ROOM)
    if sized:
        checks.update((p.name, helper.submit(_checked_delta, p)) for p in deltas)
    return Ahead(checks)


OPEN_WAIT_SECONDS = 2.0  # the most the reading ahead of cold files waits for the open's own reads


def _cached(path: Path) -> bool:
    """Whether the first, middle and last bytes of ``path`` are in the page cache (a read that would wait for the
    disk is refused, ``RWF_NOWAIT``); True where that cannot be asked, so the reading ahead begins at once."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return True
    try:
        size, probe = os.fstat(fd).st_size, bytearray(1)
        for at in (0, size // 2, max(0, size - 1)):
            os.preadv(fd, [probe], at, os.RWF_NOWAIT)
    except BlockingIOError:
        return False
    except (OSError, AttributeError, ValueError):  # no RWF_NOWAIT here (an older kernel, another system)
        return True
    finally:
        os.close(fd)
    return True


def _prepared(path: Path, copied: bool, room: int, dense_ints: int) -> Prepared | None:
    """A format 3 base mapped as :func:`read_chain` maps it, its header and dense section checked and its arrays
    made (numpy lets the interpreter lock go while it fills them); None when it is not one or does not check
    out (the read then reads it itself, and says why)."""
    try:
        mapped = _mapped(path, ahead=not copied)
        view = memoryview(mapped)
        magic, form, stamp, dims, count, _, graph_bytes = _HEADER.unpack_from(view)
        if magic != MAGIC or form != SNAPSHOT_FORMAT or dims != DIMENSIONS:
            return None
        layout = _layout(view, count, graph_bytes)
        dense, slot, live, top = _slot_arrays(view, count, layout[0], room, dense_ints)
    except (OSError, ValueError, struct.error):
        return None
    return Prepared(mapped, stamp, count, layout, dense, slot, live, top)


def _checked_ahead(path: Path) -> tuple[int, _Codes] | None:
    try:
        mapped = _mapped(path)
        header = _QUANTISED.unpack_from(mapped)
        of, count = header[2], header[4]
        codes = decode_quantised(mapped, path.name, of, count)
    except (OSError, ValueError, struct.error):
        return None  # the read of the index takes it up again, and says why
    codes.check_whole()
    return of, codes


def _checked_delta(path: Path) -> mmap.mmap | None:
    """A delta of this format mapped, its checksum computed with the interpreter lock let go; None when it does not
    check out (its read then checks it again and says why) or is of format 1."""
    try:
        mapped = _mapped(path)
    except (OSError, ValueError):
        return None
    view = memoryview(mapped)
    if len(view) < _DELTA.size + _CRC.size or _DELTA.unpack_from(view)[1] != DELTA_FORMAT:
        return None
    if crc32c.crc32c(view[:-4], gil_release_mode=1) != _CRC.unpack_from(view, len(view) - 4)[0]:
        return None
    return mapped


def _deltas(folder: Path, stamp: int, head: int | None = None) -> list[tuple[int, Path]]:
    """The deltas after the base of ``stamp`` (up to ``head``), by stamp."""
    cut = len(DELTA_SUFFIX)
    return [(at, p) for at, p in sorted((int(p.name[:-cut]), p) for p in folder.glob("*" + DELTA_SUFFIX)
                                        if p.name[:-cut].isdigit()) if stamp < at and (head is None or at <= head)]


def _read_quantised(folder: Path, index: VectorIndex, ahead: Ahead | None = None) -> None:
    """Give the base an index was just read from its quantised copy, if it has one that checks out. One that does
    not is let be: it only ever speeds the scan, which then reads the float32 slots (no rebuild is owed).
    ``ahead``: the copy's check begun at the open, waited for when it is under way (it reads the pages this
    read would) and taken if it copies this base; one not yet begun is called off."""
    path = folder / snapshot_name(index.stamp, QUANTISED_SUFFIX)
    base = index._slots.base
    if base is None or not path.is_file():
        return
    read = ahead.take(path) if ahead is not None else None
    if read is not None and read[0] == index.stamp and len(read[1].rows) == len(base.rows):
        base.quantised = read[1]
        return
    with contextlib.suppress(OSError, ValueError):
        base.quantised = decode_quantised(_mapped(path), path.name, index.stamp, len(base.rows))


def read_chain(folder: Path, head: int, graph_later: bool = False, tail: int = 0,
               dense_ints: int = 0, ahead: Ahead | None = None) -> tuple[VectorIndex | None, list[str]]:
    """The index the newest base and its deltas (up to ``head``) hold, and why any part was not used. A base that
    does not check out gives None; a delta that does not ends the chain at the link before it. The files are
    mapped, not read, and their vectors read in place; with ``graph_later`` the base's graph section is left
    for :meth:`VectorIndex.take_graph`. ``tail`` (the slots the moves after the chain may write) and ``dense_ints``
    (the dense ints minted at the head) size the index's arrays once, here: grown by the tail's first moves, they
    were copied and filled again (16 MB each at a million slots, 20-130 ms of the first read after a crash).
    ``ahead``: the base's quantised copy as :func:`check_ahead` began checking it."""
    found = newest_snapshot(folder, SUFFIX) if folder.is_dir() else None
    if found is None:
        return None, []
    stamp, path = found
    if stamp > head:
        return None, [f"snapshot {path.name} is above the head {head}"]
    deltas = _deltas(folder, stamp, head)
    copied = (folder / snapshot_name(stamp, QUANTISED_SUFFIX)).is_file()
    try:
        room = sum(_written(p) for _, p in deltas) + tail
        prepared = ahead.take(path) if ahead is not None else None
        index = VectorIndex.decode(prepared.data if prepared else _mapped(path, ahead=not copied), graph_later,
                                   room=room, name=path.name, dense_ints=dense_ints, prepared=prepared)
    except (OSError, ValueError) as exc:
        return None, [f"snapshot {path.name}: {exc}"]
    if index.stamp != stamp:
        return None, [f"snapshot {path.name} holds generation {index.stamp}"]
    _read_quantised(folder, index, ahead)
    for _, delta in deltas:
        try:
            checked = ahead.take(delta) if ahead is not None else None
            index.apply_delta(checked or _mapped(delta), delta.name, checked=checked is not None)
        except (OSError, ValueError) as exc:
            # the chain stands at the last link that checked out; later deltas cannot follow it
            return index, [f"delta {delta.name}: {exc}; the index stands at generation {index.stamp}"]
    return index, []


def _mapped(path: Path, ahead: bool = True) -> mmap.mmap:
    """A snapshot file mapped read-only. Not populated: its pages are touched as the reads check them (at
    1,000,000 vectors, populating the 1.5 GB map took longer than the first search), and read ahead unless
    ``ahead`` is False (a base with a quantised copy: its first scan reads a few dozen chunks of it, which
    must not queue behind the whole file; the graph's thread later reads it in order)."""
    with open(path, "rb") as f:
        mapped = mmap.mmap(f.fileno(), 0, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ)
    if ahead and hasattr(mapped, "madvise"):
        mapped.madvise(mmap.MADV_WILLNEED)
    return mapped


def _written(path: Path) -> int:
    """The slots a delta says it writes (its header only; the whole delta is checked when it is applied)."""
    try:
        with open(path, "rb") as f:
            header, size = f.read(_DELTA.size), path.stat().st_size
    except OSError:
        return 0
    if len(header) < _DELTA.size:
        return 0
    return min(_DELTA.unpack(header)[7], size // (8 + 4 * DIMENSIONS))  # a damaged header claims no more than fits
