"""The vector index's slot matrix and its scoring: every slot's unit vector, read and scored in place.

Each vector sits, scaled to unit length, in one row of a float32 matrix (:class:`Slots`). A slot is written
once: an update takes a new slot and kills the old one, a removal kills its slot (the index in
``brainy/index/vectors.py`` decides which). The slots a snapshot held are read in place from its mapped files
(each chunk checked the first time a read touches it, :class:`Damaged` if it fails); the slots written since
live in an owned, growable part. A base's quantised copy (:class:`_Codes`) bounds each slot's score so that
an exact scan scores exactly only the slots that could make the page (docs/store-format.md, "Vector index
snapshots"). The selection helpers at the end pick a page from the scores.

The index (``vectors.py``) and the snapshot format (``vector_format.py``) both stand on this module; it
knows neither.
"""

from __future__ import annotations

import math
import mmap
import threading
from typing import Any

import crc32c
import numpy as np

from brainy._speedups import vecpack
from brainy.store import rows
from brainy.store.crc import crc32c_joined
from brainy.store.workers import LongLived

try:  # einsum's own C loop, without the Python wrapper's parse of its options (half of a query vector's 3.5 us)
    from numpy._core.multiarray import c_einsum as _einsum
except ImportError:  # numpy 1.x keeps it elsewhere; its public einsum calls the same loop
    _einsum = np.einsum

DIMENSIONS = rows.DIMENSIONS
NO_SLOT = -1  # a dead slot's dense int, and the slot of a dense int with none (the index and the format)
CHUNK_SLOTS = 256  # slots per checksummed chunk of a base's vectors (384 KiB: checked, then scored, in cache)
SPLIT_UNCHECKED = 64  # unchecked chunks from which a scan shares them with the scan helper thread
QUERY_STEPS = 32_767  # a query rounded to int16 steps for the quantised scan (384 x 127 x 32,767 fits int32)
CODE_MAX = 127  # a quantised cell's range: -127..127
SCORE_SLACK = 1e-4  # float32 rounding of the approximate and the exact scores, with room to spare
ROW_BYTES = DIMENSIONS * 4
# Linux's MADV_POPULATE_WRITE (5.14): a range's pages made present and writable by one call. Python's mmap has no
# name for it; a kernel without it refuses (EINVAL) and the pages are faulted in as they are written, as before.
POPULATE_WRITE = 23


_populating = hasattr(mmap.mmap, "madvise")


def _populate(area: mmap.mmap, start: int, size: int) -> None:
    """Make the pages of ``area`` from byte ``start`` for ``size`` bytes present before they are written: one call
    for a commit's slots, not a fault for each page (about half the cost a page on a VM whose first touch of a
    page is dear). A kernel without the call is not asked again."""
    global _populating
    if not _populating or size <= 0:
        return
    page = start - start % mmap.PAGESIZE
    try:
        area.madvise(POPULATE_WRITE, page, min(start + size, len(area)) - page)
    except OSError:
        _populating = False


class Damaged(ValueError):
    """A chunk of a mapped vectors section failed its checksum: no byte of it is used, and the index it
    belongs to is not trusted (the follower rebuilds it from the rows)."""


class _Mapped:
    """One snapshot file's vectors section, read in place: a read-only view of the mapped file, and the
    checksum of each chunk of ``chunk`` slots (None: the section was checked whole when it was read)."""

    def __init__(
        self,
        name: str,
        rows: np.ndarray,
        crcs: np.ndarray | None,
        chunk: int,
        source: tuple[mmap.mmap, int] | None = None,
        heap: bool = False,
    ) -> None:
        self.name, self.rows, self.crcs, self.chunk = name, rows, crcs, chunk
        self._source = source  # the mapped file the rows lie in, and where they start in it
        self.heap = heap  # slots written here, in memory of the process's own, not a file's (Slots._seal)
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
        scores = np.empty(len(self.rows[lo : lo + self.chunk]), np.float32)
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
        part = self.rows[c * size : (c + 1) * size]
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
            # the last chunk on its own, as :meth:`chunk_scores` scores it: a lone row is a dot product to numpy,
            # not its matrix product's row, and their sums round differently
            whole = len(self.rows) - len(self.rows) % self.chunk
            self._score(0, whole, query, out[:whole])
            if whole < len(self.rows):
                self._score(whole, len(self.rows), query, out[whole:])
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
            self._score(lo, lo + size, query, out[lo : lo + size])


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
    them, in owned parts. Reads go through here, so a mapped byte is never used unchecked; the mappings live
    as long as the views do (the index, or a loader or frozen base holding it).

    The owned part being filled is never copied into a larger one: once full it stays where it is, as a part of
    its own after the mapped ones (``heap``), and the next, as large as every slot so far, takes the rows after
    it. Doubling by copying cost a commit the copy of every owned slot and the faults of twice their memory at
    each doubling, on the path its answer waits on: 58 ms at 16,384 slots, 225 ms at 65,536 (Slots.extend of
    1,000 rows at a time; every other extend 0.17 ms)."""

    def __init__(self, owned: np.ndarray | None = None) -> None:
        self._parts: list[_Mapped] = []
        self._starts: list[int] = []  # the first slot of each mapped part
        self._mapped = 0  # slots in mapped parts; the owned part's slot 0 is this slot
        self._area: mmap.mmap | None = None  # the anonymous mapping the owned part lies in (_fresh_part)
        self.owned = self._fresh_part(1024) if owned is None else owned
        self._owned = 0 if owned is None else len(owned)

    def __len__(self) -> int:
        return self._mapped + self._owned

    def heap_bytes(self) -> int:
        """The bytes of the owned slots filled so far (the part being filled is allocated ahead of them,
        untouched); mapped slots are file pages, which the arbiter counts from ``/proc/self/smaps``."""
        sealed = sum(part.rows.nbytes for part in self._parts if part.heap)
        return sealed + self._owned * self.owned.shape[1] * self.owned.itemsize

    @property
    def checked(self) -> bool:
        """Every mapped chunk checked (the graph may score any slot)."""
        return all(part.checked for part in self._parts)

    def map(
        self,
        name: str,
        rows: np.ndarray,
        crcs: np.ndarray | None = None,
        chunk: int = CHUNK_SLOTS,
        source: tuple[mmap.mmap, int] | None = None,
    ) -> None:
        """Take a snapshot file's vectors section in place as the next slots (before any slot is owned); ``source``:
        the mapped file they lie in and where they start in it."""
        assert self._owned == 0 and not any(part.heap for part in self._parts), "mapped slots come before owned ones"
        if len(rows):
            self._parts.append(_Mapped(name, rows, crcs, chunk, source))
            self._starts.append(self._mapped)
            self._mapped += len(rows)

    def append(self, vector: np.ndarray) -> None:
        if self._owned == len(self.owned):
            self._seal(1)
        self.owned[self._owned] = vector
        self._owned += 1

    def extend(self, vectors: np.ndarray, norms: np.ndarray | None = None) -> None:
        """Take ``vectors`` as the next slots; with ``norms`` (:func:`_scaled`'s), each divided by its length as it
        is written: a commit's units made in the slots, not in a matrix of their own copied in after (its fresh
        megabytes faulted in on the fsync worker each commit, then copied)."""
        at = 0
        while at < len(vectors):
            if self._owned == len(self.owned):
                self._seal(len(vectors) - at)
            take = min(len(self.owned) - self._owned, len(vectors) - at)
            if self._area is not None:
                _populate(self._area, self._owned * ROW_BYTES, take * ROW_BYTES)
            into = self.owned[self._owned : self._owned + take]
            if norms is None:
                into[:] = vectors[at : at + take]
            else:
                np.divide(vectors[at : at + take], norms[at : at + take, None], out=into)
            self._owned += take
            at += take

    def _seal(self, more: int) -> None:
        """The owned part is full: it stays as it is, the last part, and a new one takes the next rows (at least
        ``more``, and as many as every slot so far)."""
        if self._owned:
            self._parts.append(_Mapped("owned slots", self.owned[: self._owned], None, CHUNK_SLOTS, heap=True))
            self._starts.append(self._mapped)
            self._mapped += self._owned
            self._owned = 0
        self.owned = self._fresh_part(max(1024, more, self._mapped))

    def _fresh_part(self, slots: int) -> np.ndarray:
        """An owned part of ``slots`` untouched slots, in an anonymous mapping of its own kept from huge pages.

        Its pages are first touched on the fsync worker, on the path a write's answer waits on. numpy asks for huge
        pages for an array this large, and a huge page the kernel must first compact memory for cost that worker
        4.3 us a slot in one fresh process of five (0.4-1.2 in the others; Slots.extend of 60 commits of 1,000);
        small pages, each commit's populated by one call (:func:`_populate`), cost 0.76-1.06 in all five."""
        area = mmap.mmap(-1, slots * ROW_BYTES, flags=mmap.MAP_PRIVATE)
        if hasattr(mmap, "MADV_NOHUGEPAGE"):
            area.madvise(mmap.MADV_NOHUGEPAGE)
        self._area = area
        return np.frombuffer(area, np.float32).reshape(slots, DIMENSIONS)

    def check_all(self, reverse: bool = False) -> None:
        """Check every mapped chunk no read has checked yet; Damaged if one fails."""
        for part in reversed(self._parts) if reverse else self._parts:
            part.check_all(reverse)

    def row(self, slot: int) -> np.ndarray:
        """A copy of one slot's vector."""
        return self.gather(np.array([slot], np.int64))[0]

    def gather(self, slots: np.ndarray | list[int]) -> np.ndarray:
        """The vectors of these slots (a new array), the chunks they fall in checked first."""
        if not self._owned and len(self._parts) == 1 and self._parts[0].checked:
            return self._parts[0].rows[slots]  # one checked base, nothing since: one take, not the masks (8 us)
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
                chunks = _distinct(at // part.chunk)
                part.will_need(chunks)  # asked for together: a cold chunk at a time waited for the disk each time
                for c in chunks:
                    part.check(c)
            out[inside] = part.rows[at]
        return out

    def copy(self, start: int, end: int) -> np.ndarray:
        """The vectors of slots ``start`` to ``end`` - 1 (a new array), checked."""
        if start >= self._mapped:
            return self.owned[start - self._mapped : end - self._mapped].copy()
        return self.gather(np.arange(start, end))

    def scores(self, query: np.ndarray) -> np.ndarray:
        """Every slot's score against ``query`` (dead ones included), each mapped chunk checked as it is read."""
        out = np.empty(len(self), np.float32)
        for start, part in zip(self._starts, self._parts):
            part.scores(query, out[start : start + len(part.rows)])
        if self._owned:
            np.matmul(self.owned[: self._owned], query, out=out[self._mapped :])
        return out

    @property
    def base(self) -> _Mapped | None:
        """The first mapped part: a base's slots, when the index was read from a chain."""
        return self._parts[0] if self._parts and not self._parts[0].heap else None

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
            np.matmul(self.owned[: self._owned], query, out=upper[self._mapped :])
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
        parts, at = [], 0
        for part in self._parts:  # the base's copies ask for the base's slots alone: the deltas' are mapped too
            if at >= end:
                return parts
            parts.append(part.rows[: end - at])
            at += len(parts[-1])
        if end > self._mapped:
            parts.append(self.owned[: end - self._mapped])  # rows below the count are never written again
        return parts


def _distinct(values: np.ndarray) -> list[int]:
    """The distinct values, ascending: ``np.unique``'s answer without its first call's import of numpy.ma (numpy 2
    asks whether the array is masked), which a cold process's first search paid (tens of ms)."""
    ordered = np.sort(values)
    return ordered[np.concatenate(([True], ordered[1:] != ordered[:-1]))].tolist() if len(ordered) else []


def unit(vector: Any) -> np.ndarray:
    """A vector (float32 bytes or numbers) as a unit-length float32 array; ValueError for a zero vector."""
    if isinstance(vector, (bytes, bytearray, memoryview)):
        v = np.frombuffer(vector, dtype="<f4")
    elif isinstance(vector, list):
        try:  # a query's numbers: packed in one compiled pass (the same float32 bits), not 384 numpy scalars
            v = np.frombuffer(vecpack.pack(vector, len(vector)), dtype="<f4")  # 31 -> 7 us
        except ValueError:  # not plain finite numbers, or all zero: as before, below
            v = np.asarray(vector, dtype=np.float32)
    else:
        v = np.asarray(vector, dtype=np.float32)
    row = v.reshape(1, -1)
    # _norms' length, its float32 root taken by math (a double's root rounded to float32 is the float32 root: 53 bits
    # hold twice 24 and two more), not by a ufunc call on a one-number array
    norm = float(np.float32(math.sqrt(float(_einsum("ij,ij->i", row, row)[0]))))
    if not norm or not math.isfinite(norm):
        raise ValueError("a zero vector has no direction")
    # float32 by float32: the norm is a float32's value, and a Python float never widens a float32 array (numpy 1.x's
    # value-based casting, NEP 50 since), so no copy after (each numpy call is microseconds on a served find's path)
    return v / norm if v.dtype == np.float32 else (v / norm).astype(np.float32)


def _norms(rows: np.ndarray) -> np.ndarray:
    """Each float32 row's length in float32: one einsum over the matrix, whose sum for a row does not depend on the
    rows beside it, so a vector made a unit alone (:func:`unit`, the same einsum on its one row) and in a commit's
    batch (:func:`_scaled`) has the same bits. (A dot a row, np.linalg.norm's way, cost 1.1 us a row of a durable
    ingest's fsync worker.)"""
    return np.sqrt(_einsum("ij,ij->i", rows, rows))


def _scaled(vectors: list[Any]) -> tuple[np.ndarray, np.ndarray] | None:
    """The vectors as the float32 rows of one matrix and each row's length, which :meth:`Slots.extend` divides them
    by as it writes them into the slots: each a :func:`unit`'s bits (each row's norm taken alone, the division in
    float32); None when one is a zero vector."""
    if set(map(type, vectors)) == {bytes} and set(map(len, vectors)) == {4 * DIMENSIONS}:  # no Python step a vector
        rows = np.frombuffer(b"".join(vectors), "<f4").reshape(len(vectors), DIMENSIONS)
    else:
        rows = np.array(
            [
                np.frombuffer(v, "<f4") if isinstance(v, (bytes, bytearray, memoryview)) else np.asarray(v, np.float32)
                for v in vectors
            ],
            np.float32,
        ).reshape(len(vectors), DIMENSIONS)
    norms = _norms(rows)
    if not (np.isfinite(norms).all() and norms.all()):
        return None
    return rows, norms


def _top(scores: np.ndarray, k: int) -> np.ndarray:
    """Positions of the ``k`` best scores, best first, every score tied with the k-th kept (the caller breaks
    ties on id, so which of a tie makes the cut must not depend on the order of the scan)."""
    if k <= 0:
        return np.arange(0)
    if len(scores) <= k:
        return np.argsort(-scores, kind="stable")
    kth = np.partition(scores, len(scores) - k)[len(scores) - k]
    picked = np.flatnonzero(scores >= kth)
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
        return np.argpartition(values, len(values) - k)[len(values) - k :]
    runs = values[:whole].reshape(-1, SELECT_RUN).max(axis=1)
    if whole < len(values):
        runs = np.append(runs, values[whole:].max())
    floor = np.partition(runs, len(runs) - k)[len(runs) - k]
    above = np.flatnonzero(values >= floor)  # k or more: every run counted reaches the floor
    return above[np.argpartition(values[above], len(above) - k)[len(above) - k :]] if len(above) > k else above
