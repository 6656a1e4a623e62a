"""The vector index's partitioned copy: a large base's live slots in lists by their nearest centroid, each list's
slots, scales and int8 codes contiguous, so that a search from a cold disk reads the centroids and the lists it
probes, not the whole quantised copy. The law is docs/store-format.md, "Vector index snapshots":

- **Writing.** :func:`encode_partitioned` partitions a base's live slots (spherical k-means centres, each slot in
  the list of its best centroid) and lays the lists out; :func:`write_partitioned` writes the file beside the
  base (``<stamp>.vecp``) when the base is large enough to have one.
- **Reading.** :func:`decode_partitioned` maps the file, checks its header and front and that it partitions the
  base read (its stamp and slots); :class:`Partitions` reads the lists in place, each checked against its
  checksum the first time a search reads it (:class:`PartitionDamaged` if it fails: the copy is then dropped,
  never a reason to distrust the index).
- **Searching.** :meth:`Partitions.candidates` scores the centroids, probes the best lists and answers the
  slots whose approximate scores are best; the index (``brainy/index/vectors.py``) scores those exactly on
  its float32 rows.

This module stands on the slot matrix (``vector_matrix.py``) and the snapshot files' helpers
(``vector_format.py``); the index stands on it.
"""

from __future__ import annotations

import mmap
import struct
import threading
from pathlib import Path

import crc32c
import faiss
import numpy as np

from brainy._speedups import vecpack
from brainy.index.projections import snapshot_name
from brainy.index.vector_format import _CRC, NO_STORE, PARTITIONED_SUFFIX, _aligned, _mapped, copy_header, quantise
from brainy.index.vector_matrix import DIMENSIONS, NO_SLOT, QUERY_STEPS
from brainy.store.files import write_durably

PARTITIONED_MAGIC = b"BVP1"
PARTITIONED_FORMAT = 2  # format 1, which named no store, is not read: the next flush writes the copy again
_PARTITIONED = struct.Struct("<4sIQI4xQI16sfI")  # the header, storeTag, recall and headerCrc last: 60 bytes
ENTRY_BYTES = 4 + 4 + DIMENSIONS  # a slot in a list: its slot (u32), its scale (f32) and its codes (i8 each)
PARTITION_SLOTS = 65_536  # live slots from which a base has a partitioned copy (below, a full scan reads < 25 MB)
MAX_SLOT = 2**32 - 1  # a list's slots are u32: a larger base has no copy
LIST_TARGET = 512  # live slots a list holds on average: L is the power of two nearest E / 512 ...
MIN_LISTS, MAX_LISTS = 16, 8_192  # ... within these
KMEANS_ROUNDS = 10
KMEANS_SEED = 1_234
TRAIN_PER_LIST = 64  # slots the k-means trains on a list, at most (taken at even steps through the live ones)
ASSIGN_ROWS = 65_536  # slots given their list at a time when a copy is written
# lists a search probes, max(MIN_PROBES, L / PROBE_SHARE), and slots it scores exactly, max(RESCORED_PER_HIT * k,
# MIN_RESCORED): at 1,000,000 clustered vectors (2,048 lists; perf/bench_vector_cold.py's queries) recall@10 was
# 0.970 probing 4 lists, 0.985 with 8, 0.990 with 16 and 32, 0.995 with 64 and 1.000 with 128, the same whether 20,
# 40 or 80 slots were scored exactly; 32 lists are 6 MB to read from a cold disk, 40 rows at most 40 chunks (15 MB)
MIN_PROBES = 16
PROBE_SHARE = 64
MIN_RESCORED = 32
RESCORED_PER_HIT = 4
# The recall a copy's own search reaches is measured when it is written, on RECALL_QUERIES queries about its live
# slots (each a slot's unit vector plus Gaussian noise of RECALL_NOISE in each cell, made unit length again:
# perf/bench_vectors.py's queries, whose cosine to the slot is about 0.45) against the exact top RECALL_K of every
# live slot; below RECALL_LEAST the copy
# never answers (the exact scan or the graph does). A million of perf/bench_vectors.py's clustered vectors measured
# 1.00, a million uniformly random ones 0.10 (3,000: 0.47, 8 of 32 lists probed): with no neighbourhoods to find,
# no list holds what a query is near. The measure took 1.3-1.4 s at a million, the copy's build 38-48 s.
RECALL_QUERIES = 64
RECALL_NOISE = 0.1
RECALL_K = 10
RECALL_LEAST = 0.95
RECALL_SEED = 4_321
SCORE_ROUNDING = 1e-6  # how far two float32 sums of one unit product may differ (a few ulps of 1)


class PartitionDamaged(ValueError):
    """A list of a partitioned copy failed its checksum: no byte of it is used, and the copy is dropped (the
    search answers from the slots; the next flush writes the copy again)."""


def lists_for(entries: int) -> int:
    """L for a copy of ``entries`` live slots: the power of two nearest ``entries / LIST_TARGET``, within
    ``MIN_LISTS`` and ``MAX_LISTS``."""
    wanted = max(1.0, entries / LIST_TARGET)
    power = 1 << max(0, round(np.log2(wanted)))
    return int(min(MAX_LISTS, max(MIN_LISTS, power)))


def probes_for(lists: int) -> int:
    """P, the lists a search probes."""
    return min(lists, max(MIN_PROBES, lists // PROBE_SHARE))


def rescored_for(k: int) -> int:
    """R, the slots of the best approximate scores a search scores exactly."""
    return max(RESCORED_PER_HIT * k, MIN_RESCORED)


def wanted(slots: int, dense: np.ndarray) -> bool:
    """Whether a base of ``slots`` slots (``dense``, its dense ints, -1 for a dead slot) has a partitioned copy."""
    return slots <= MAX_SLOT and int(np.count_nonzero(dense != NO_SLOT)) >= PARTITION_SLOTS


def _rows(parts: list[np.ndarray], at: np.ndarray) -> np.ndarray:
    """The rows of the slots ``at`` (ascending) of a base given as its parts in order."""
    out = np.empty((len(at), DIMENSIONS), np.float32)
    start = 0
    for part in parts:
        inside = (at >= start) & (at < start + len(part))
        if inside.any():
            out[inside] = part[at[inside] - start]
        start += len(part)
    return out


def partition(parts: list[np.ndarray], dense: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(centroids, bounds, the live slots in list order) of a base given as its parts in order and its dense
    ints: the lists of docs/store-format.md, "Vector index snapshots"."""
    live = np.flatnonzero(dense != NO_SLOT)
    lists = lists_for(len(live))
    step = max(1, len(live) // (TRAIN_PER_LIST * lists))
    sample = _rows(parts, live[::step][: TRAIN_PER_LIST * lists])
    kmeans = faiss.Kmeans(DIMENSIONS, lists, niter=KMEANS_ROUNDS, spherical=True, seed=KMEANS_SEED)
    kmeans.cp.min_points_per_centroid = 1  # a small sample is what it is: no warning, no refusal
    kmeans.cp.max_points_per_centroid = TRAIN_PER_LIST
    kmeans.train(sample)
    centroids = np.ascontiguousarray(kmeans.centroids, np.float32)
    norms = np.linalg.norm(centroids, axis=1)
    centroids /= np.where(norms > 0, norms, 1)[:, None]
    nearest = faiss.IndexFlatIP(DIMENSIONS)
    nearest.add(centroids)
    assigned = np.empty(len(live), np.int64)
    for at in range(0, len(live), ASSIGN_ROWS):
        _, best = nearest.search(_rows(parts, live[at : at + ASSIGN_ROWS]), 1)
        assigned[at : at + ASSIGN_ROWS] = best[:, 0]
    order = np.argsort(assigned, kind="stable")  # by list, each list's slots ascending
    bounds = np.zeros(lists + 1, np.int64)
    np.cumsum(np.bincount(assigned, minlength=lists), out=bounds[1:])
    return centroids, bounds, live[order]


def _block_sizes(bounds: np.ndarray) -> np.ndarray:
    """Each list's block: ``ENTRY_BYTES`` a slot, rounded up to a multiple of 64."""
    return -(-np.diff(bounds) * ENTRY_BYTES // 64) * 64


def encode_partitioned(
    stamp: int, slots: int, parts: list[np.ndarray], dense: np.ndarray, store: bytes = NO_STORE
) -> bytearray:
    """A base's partitioned copy: the base of ``stamp``, ``slots`` slots given as its parts in order (unit rows)
    and its dense ints, in the store of ``store`` (its storeTag)."""
    centroids, bounds, members = partition(parts, dense)
    lists = len(centroids)
    sizes = _block_sizes(bounds)
    head = _PARTITIONED.pack(PARTITIONED_MAGIC, PARTITIONED_FORMAT, stamp, DIMENSIONS, slots, lists, store, 0, 0)[:-4]
    front_at = len(head) + _CRC.size
    crcs_at = front_at + 4 * DIMENSIONS * lists + 8 * (lists + 1)
    lists_at = _aligned(crcs_at + 4 * lists + _CRC.size)
    out = bytearray(lists_at + int(sizes.sum()))
    out[: len(head)] = head
    _CRC.pack_into(out, len(head), crc32c.crc32c(head))
    out[front_at : front_at + 4 * DIMENSIONS * lists] = centroids.astype("<f4").tobytes()
    out[front_at + 4 * DIMENSIONS * lists : crcs_at] = bounds.astype("<u8").tobytes()
    crcs = np.zeros(lists, "<u4")
    view = memoryview(out)
    at = lists_at
    for lst in range(lists):
        mine = members[bounds[lst] : bounds[lst + 1]]
        m = len(mine)
        if m:
            codes, scales = quantise(_rows(parts, mine))
            view[at : at + 4 * m] = mine.astype("<u4").tobytes()
            view[at + 4 * m : at + 8 * m] = scales.astype("<f4").tobytes()
            view[at + 8 * m : at + ENTRY_BYTES * m] = codes.tobytes()
        crcs[lst] = crc32c.crc32c(view[at : at + int(sizes[lst])])
        at += int(sizes[lst])
    out[crcs_at : crcs_at + 4 * lists] = crcs.tobytes()
    _CRC.pack_into(out, crcs_at + 4 * lists, crc32c.crc32c(view[front_at : crcs_at + 4 * lists]))
    recall = measured_recall(decode_partitioned(out, "measured", stamp, slots), parts, dense)
    head = _PARTITIONED.pack(PARTITIONED_MAGIC, PARTITIONED_FORMAT, stamp, DIMENSIONS, slots, lists, store, recall, 0)
    out[: len(head) - 4] = head[:-4]
    _CRC.pack_into(out, len(head) - 4, crc32c.crc32c(head[:-4]))
    return out


def measured_recall(partitions: Partitions, parts: list[np.ndarray], dense: np.ndarray) -> float:
    """The recall@``RECALL_K`` of the copy's search (its candidates, scored exactly) against the exact top of every
    live slot, over ``RECALL_QUERIES`` queries near live slots (docs/store-format.md, "Vector index snapshots")."""
    live = np.flatnonzero(dense != NO_SLOT)
    rng = np.random.default_rng(RECALL_SEED)
    picked = np.sort(rng.choice(live, min(RECALL_QUERIES, len(live)), replace=False))
    noise = rng.standard_normal((len(picked), DIMENSIONS)).astype(np.float32) * RECALL_NOISE
    queries = _rows(parts, picked) + noise
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    best = np.full((len(queries), RECALL_K), -np.inf, np.float32)  # the exact top, a block of slots at a time
    start = 0
    for part in parts:
        for at in range(0, len(part), ASSIGN_ROWS):
            scores = queries @ part[at : at + ASSIGN_ROWS].T
            scores[:, dense[start + at : start + at + len(scores[0])] == NO_SLOT] = -np.inf
            both = np.concatenate([best, scores], axis=1)
            best = -np.partition(-both, RECALL_K - 1, axis=1)[:, :RECALL_K]
        start += len(part)
    found = 0
    for q, floor in zip(queries, best.min(axis=1)):
        candidates = partitions.candidates(q, RECALL_K, dense)
        scores = np.sort(_rows(parts, np.sort(candidates)) @ q)[::-1][:RECALL_K]
        # ties at the floor count (any of them is a right answer), and so do scores a rounding under it: the exact
        # pass's matrix product and this one's vector product sum in other orders
        found += int(np.count_nonzero(scores >= floor - SCORE_ROUNDING))
    return found / (len(queries) * RECALL_K)


def write_partitioned(
    folder: Path, stamp: int, slots: int, parts: list[np.ndarray], dense: np.ndarray, store: bytes = NO_STORE
) -> bool:
    """Write the partitioned copy of the base of ``stamp`` (its ``slots`` slots as ``parts``, its dense ints) when
    the base is large enough to have one; whether it was written."""
    if not wanted(slots, dense):
        return False
    data = encode_partitioned(stamp, slots, parts, dense, store)
    write_durably(folder / snapshot_name(stamp, PARTITIONED_SUFFIX), data)
    return True


class Partitions:
    """A partitioned copy read in place: its centroids and bounds (checked at the open, with the list
    checksums), and its lists, each checked the first time a search reads it."""

    def __init__(
        self,
        name: str,
        data: mmap.mmap | bytes,
        centroids: np.ndarray,
        bounds: np.ndarray,
        crcs: np.ndarray,
        lists_at: int,
        slots: int,
        recall: float = 0.0,
    ) -> None:
        self.name, self._data, self.centroids, self.bounds, self.crcs = name, data, centroids, bounds, crcs
        self.slots = slots  # the base's slots: those past it are not in any list
        self.recall = (
            recall  # measured when the copy was written (measured_recall): below RECALL_LEAST it never answers
        )
        self._view = memoryview(data)
        self._starts = lists_at + np.concatenate(([0], np.cumsum(_block_sizes(bounds))))
        self._checked = np.zeros(len(centroids), bool)
        self._tally = threading.Lock()  # two reads may check one list at once

    def __len__(self) -> int:
        return len(self.centroids)

    def _block(self, lst: int) -> memoryview:
        return self._view[int(self._starts[lst]) : int(self._starts[lst + 1])]

    def _will_need(self, lists: list[int]) -> None:
        """Ask the kernel for the pages of these lists not checked yet, all at once, before the first is read (the
        copy is mapped without read-ahead: a fault at a time would read one list after another)."""
        if not isinstance(self._data, mmap.mmap):
            return
        for lst in lists:
            start, end = int(self._starts[lst]), int(self._starts[lst + 1])
            if end > start and not self._checked[lst]:
                page = start - start % mmap.PAGESIZE
                self._data.madvise(mmap.MADV_WILLNEED, page, end - page)

    def check(self, lst: int) -> None:
        """Check list ``lst`` unless a read has already; PartitionDamaged if it fails."""
        if self._checked[lst]:
            return
        if crc32c.crc32c(self._block(lst)) != int(self.crcs[lst]):
            raise PartitionDamaged(f"{self.name}: list {lst}: checksum mismatch")
        with self._tally:
            self._checked[lst] = True

    def candidates(self, query: np.ndarray, k: int, dense: np.ndarray) -> np.ndarray:
        """The live slots (``dense``: the index's dense ints, NO_SLOT for a dead slot) of the probed lists whose
        approximate scores against the unit vector ``query`` are the R best, in no order; PartitionDamaged when
        a probed list fails its check."""
        lists = len(self.centroids)
        probes = probes_for(lists)
        query = np.ascontiguousarray(query, np.float32)
        scores = np.empty(lists, np.float32)
        # faiss's one-thread product: numpy's BLAS split this 2,048 x 384 product over two threads, and on a busy
        # box their handing over took 0.3-5 ms where one thread takes 0.05
        faiss.fvec_inner_products_ny(
            faiss.swig_ptr(scores), faiss.swig_ptr(query), faiss.swig_ptr(self.centroids), DIMENSIONS, lists
        )
        probed = np.argpartition(scores, lists - probes)[lists - probes :] if probes < lists else np.arange(lists)
        probed = probed[np.diff(self.bounds)[probed] > 0].tolist()
        self._will_need(probed)
        step = float(np.abs(query).max()) / QUERY_STEPS
        steps = np.rint(query.astype(np.float64) / step).astype(np.int16)
        total = int(sum(int(self.bounds[lst + 1] - self.bounds[lst]) for lst in probed))
        approx = np.empty(total, np.float32)
        members = np.empty(total, np.int64)
        at = 0
        for lst in probed:
            self.check(lst)
            m = int(self.bounds[lst + 1] - self.bounds[lst])
            block = self._block(lst)
            codes = np.frombuffer(block, np.int8, DIMENSIONS * m, 8 * m).reshape(m, DIMENSIONS)
            scales = np.frombuffer(block, "<f4", m, 4 * m)
            # approximate scores only (no bound terms): the ranking that picks what is scored exactly
            vecpack.code_bounds(codes, steps, scales, step, 0.0, 0.0, approx[at : at + m])
            members[at : at + m] = np.frombuffer(block, "<u4", m)
            at += m
        if total and int(members.max()) >= self.slots:  # checked bytes, but not of this base's lists
            raise PartitionDamaged(f"{self.name}: a list names a slot past the base's {self.slots}")
        rescored = rescored_for(k)
        if total > 2 * rescored:  # the best twice over first: a slot's liveness is a read of the dense ints, at random
            best = np.argpartition(approx, total - 2 * rescored)[total - 2 * rescored :]
            live = best[dense[members[best]] != NO_SLOT]
            if len(live) >= rescored:  # else too many of the best died since the copy: every slot is asked below
                return members[live[np.argpartition(approx[live], len(live) - rescored)[len(live) - rescored :]]]
        alive = dense[members] != NO_SLOT
        members, approx = members[alive], approx[alive]
        if len(members) > rescored:
            members = members[np.argpartition(approx, len(approx) - rescored)[len(approx) - rescored :]]
        return members


def decode_partitioned(
    data: mmap.mmap | bytes | bytearray, name: str, stamp: int, slots: int, store: bytes | None = None
) -> Partitions:
    """A partitioned copy read in place, its header and front checked; ValueError when they do not check out, its
    size does not add up, or it is not the copy of the base of ``stamp`` and ``slots`` or is another store's."""
    view = memoryview(data)
    head = copy_header(view, _PARTITIONED, PARTITIONED_MAGIC, PARTITIONED_FORMAT, stamp, slots, store)
    count, lists, recall = head[4], head[5], head[7]
    front_at = _PARTITIONED.size
    bounds_at = front_at + 4 * DIMENSIONS * lists
    crcs_at = bounds_at + 8 * (lists + 1)
    lists_at = _front_end(lists)
    if len(view) < lists_at:
        raise ValueError("sizes do not add up")
    if crc32c.crc32c(view[front_at : crcs_at + 4 * lists]) != _CRC.unpack_from(view, crcs_at + 4 * lists)[0]:
        raise ValueError("front checksum mismatch")
    bounds = np.frombuffer(view, "<u8", lists + 1, bounds_at).astype(np.int64)
    if bounds[0] != 0 or (np.diff(bounds) < 0).any() or bounds[-1] > count:
        raise ValueError("bounds out of range")
    if lists_at + int(_block_sizes(bounds).sum()) != len(view):
        raise ValueError("sizes do not add up")
    return Partitions(
        name,
        data,
        np.frombuffer(view, "<f4", DIMENSIONS * lists, front_at).reshape(lists, DIMENSIONS),
        bounds,
        np.frombuffer(view, "<u4", lists, crcs_at),
        lists_at,
        count,
        recall,
    )


def read_partitioned(
    folder: Path, stamp: int, slots: int, store: bytes | None = None
) -> tuple[Partitions | None, str | None]:
    """The partitioned copy of the base of ``stamp`` and ``slots`` in ``folder``: (it, None), or (None, why not)
    when it is missing, stale or does not check out (it is then owed: the next flush writes it again)."""
    path = folder / snapshot_name(stamp, PARTITIONED_SUFFIX)
    if not path.is_file():
        return None, f"{path.name} is missing"
    try:
        data = _mapped(path, ahead=False)
        # no read-around on a fault (8 MB here): what a read needs it asks for, the front now, the probed lists later
        data.madvise(mmap.MADV_RANDOM)
        head = _PARTITIONED.unpack_from(data) if len(data) >= _PARTITIONED.size else None
        if head is not None:
            data.madvise(mmap.MADV_WILLNEED, 0, min(len(data), _front_end(head[5])))
        return decode_partitioned(data, path.name, stamp, slots, store), None
    except (OSError, ValueError) as exc:
        return None, f"{path.name}: {exc}"


def _front_end(lists: int) -> int:
    """Where the lists of a copy of ``lists`` lists begin: the header, centroids, bounds, list checksums, frontCrc
    and pad before them."""
    return _aligned(_PARTITIONED.size + 4 * DIMENSIONS * lists + 8 * (lists + 1) + 4 * lists + _CRC.size)
