"""The vector index: every vectored entity's vector, searched by cosine, at one generation (its stamp).

A projection like the postings (``brainy/engine/projections.py``): moved by each durable commit's
entity changes, persisted stamped with the generation it covers, rebuilt from the rows when it cannot
be trusted. Its layout is the law in docs/store-format.md, "Vector index snapshots":

- **Slots.** Each vector sits, scaled to unit length, in one row of a float32 matrix. A slot is
  written once: an update takes a new slot and kills the old one, a removal kills its slot. Every hit
  is checked live and scored on the matrix, so a stale vector never answers.
- **The graph.** Slots below :attr:`VectorIndex.graphed` are also in an HNSW graph (faiss
  ``IndexHNSWFlat``, inner product, ids = slots). The slots above are the fresh tail, scanned
  exactly. :meth:`VectorIndex.catch_up` adds the tail to the graph in one batch, off the commit path.
- **Exact, or the graph.** A search is an exact scan while the index is small, when a filter keeps
  few rows, when the graph is busy catching up, and for a past generation (:meth:`VectorIndex.exact`);
  otherwise the graph answers (with a predicate for a large filter) and the tail is scanned beside it.
  A filtered graph search that cannot fill the page falls back to the exact scan.

The library and the thresholds were chosen by measurement on the project's box: ``perf/bench_vectors.py``
and the commit that chose them carry the figures.
"""

from __future__ import annotations

import struct
import threading
import zlib
from array import array
from typing import Any, Iterable

import faiss
import numpy as np

from brainy.engine import rows

DIMENSIONS = rows.DIMENSIONS
EXACT_BELOW = 4_096         # live vectors under which every search is an exact scan (about 0.2 ms)
EXACT_CANDIDATES = 4_096    # a filter keeping at most this many vectored rows is searched exactly
TAIL_MAX = 2_048            # fresh slots past which the graph is caught up
COMPACT_AFTER = 4_096       # dead slots (at least as many as the live ones) past which the slots are compacted
HNSW_M = 16                 # graph degree: recall against memory (faiss's own default is 32)
EF_CONSTRUCTION = 128
EF_SEARCH = 256             # recall@10 0.96 on clustered vectors at 100,000, 128 gives 0.88 (perf/bench_vectors.py)
PERSIST_AFTER = 16_384      # slots changed before a flush writes the index out again (a close always does)
NO_SLOT = -1


def unit(vector: Any) -> np.ndarray:
    """A vector (float32 bytes or numbers) as a unit-length float32 array; ValueError for a zero vector."""
    v = np.frombuffer(vector, dtype="<f4") if isinstance(vector, (bytes, bytearray, memoryview)) else \
        np.asarray(vector, dtype=np.float32)
    norm = float(np.linalg.norm(v))
    if not norm or not np.isfinite(norm):
        raise ValueError("a zero vector has no direction")
    return (v / norm).astype(np.float32)


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


class VectorIndex:
    def __init__(self, graph: bool = True) -> None:
        self.stamp = 0
        self.changed = 0                 # slots killed or written since the index was last persisted
        self.graphed = 0
        self._count = 0                  # slots written, dead ones included
        self._live = 0
        self._matrix = np.empty((1024, DIMENSIONS), np.float32)
        self._dense = np.full(1024, NO_SLOT, np.int64)   # slot -> dense int (NO_SLOT: dead)
        self._slot = np.full(1024, NO_SLOT, np.int64)    # dense int -> slot (NO_SLOT: no vector)
        self._graph: Any = None
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
        matrix = np.empty((capacity, DIMENSIONS), np.float32)
        matrix[:n] = self._matrix[live]
        dense = np.full(capacity, NO_SLOT, np.int64)
        dense[:n] = self._dense[live]
        self._slot[:] = NO_SLOT
        self._slot[dense[:n]] = np.arange(n)
        self._matrix, self._dense, self._count = matrix, dense, n
        self._graph, self.graphed, self._dead_in_graph, self._bitmap = None, 0, 0, None
        self.changed += 1

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

    def _write(self, dense: int, vector: bytes) -> None:
        if dense < len(self._slot) and self._slot[dense] != NO_SLOT:
            self._kill(dense)
        slot = self._count
        if slot == len(self._dense):
            self._matrix = np.concatenate([self._matrix, np.empty_like(self._matrix)])
            self._dense = np.concatenate([self._dense, np.full(len(self._dense), NO_SLOT, np.int64)])
        if dense >= len(self._slot):
            grown = np.full(max(dense + 1, 2 * len(self._slot)), NO_SLOT, np.int64)
            grown[:len(self._slot)] = self._slot
            self._slot = grown
        self._matrix[slot] = unit(vector)
        self._dense[slot] = dense
        self._slot[dense] = slot
        self._count += 1
        self._live += 1
        self.changed += 1

    def _kill(self, dense: int) -> None:
        if dense >= len(self._slot):
            return
        slot = int(self._slot[dense])
        if slot == NO_SLOT:
            return
        self._slot[dense] = NO_SLOT
        self._dense[slot] = NO_SLOT
        self._live -= 1
        self.changed += 1
        if slot < self.graphed:
            self._dead_in_graph += 1
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
        return self.graphed, self._matrix[self.graphed:self._count].copy()

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

    def catch_up(self) -> None:
        """Put the whole tail in the graph now, in one thread (tests, and a build with no brain lock to share)."""
        with self.graph_lock:
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
        return None if slot == NO_SLOT else self._matrix[slot].copy()

    def search(self, query: np.ndarray, k: int, allowed: array | None = None) -> tuple[np.ndarray, np.ndarray, str]:
        """The ``k`` entities closest to the unit vector ``query``: (scores, dense ints, how), best first;
        ``allowed`` (sorted dense ints), when given, is the only set a hit may come from. ``how`` is
        ``exact`` or ``graph``."""
        slots = None if allowed is None else self.slots_of(allowed)
        if slots is not None and len(slots) == self._live:
            slots = None  # the filter keeps every vectored row
        small = self._live <= EXACT_BELOW if slots is None else len(slots) <= EXACT_CANDIDATES
        if small or self._graph is None or self.graphed == 0 or not self.graph_lock.acquire(blocking=False):
            return (*self._exact(query, k, slots), "exact")
        try:
            found = self._graph_search(query, k, slots)
        finally:
            self.graph_lock.release()
        if found is None:  # the filtered walk could not fill the page: the exact scan can
            return (*self._exact(query, k, slots), "exact")
        return (*found, "graph")

    def exact(self, query: np.ndarray, k: int, allowed: array | None = None) -> tuple[np.ndarray, np.ndarray]:
        """The exact scan alone: every live vector (or the allowed ones) scored."""
        return self._exact(query, k, None if allowed is None else self.slots_of(allowed))

    def _exact(self, query: np.ndarray, k: int, slots: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        if slots is None:
            count = self._count
            scores = self._matrix[:count] @ query
            if self._live < count:
                scores[self._dense[:count] == NO_SLOT] = -np.inf
            picked = _top(scores, min(k, self._live))
            return scores[picked], self._dense[picked]
        scores = self._matrix[slots] @ query
        picked = _top(scores, k)
        return scores[picked], self._dense[slots[picked]]

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
        scores = self._matrix[candidates] @ query      # the same exact score an exact scan gives
        picked = _top(scores, k)
        return scores[picked], self._dense[candidates[picked]]

    def _live_bitmap(self) -> np.ndarray:
        if self._bitmap is None:
            self._bitmap = np.packbits(self._dense[:self.graphed] != NO_SLOT, bitorder="little")
        return self._bitmap

    # -- snapshots (docs/store-format.md, "Vector index snapshots") ----------------------------------

    def encode(self) -> bytes:
        """The index as its snapshot. The caller holds :attr:`graph_lock` and the brain's lock."""
        graph = faiss.serialize_index(self._graph).tobytes() if self._graph is not None and self.graphed else b""
        count = self._count
        header = _HEADER.pack(MAGIC, SNAPSHOT_FORMAT, self.stamp, DIMENSIONS, count,
                              self.graphed if graph else 0, len(graph))
        body = b"".join((header, self._dense[:count].astype("<i8").tobytes(),
                         self._matrix[:count].astype("<f4").tobytes(), graph))
        return body + _CRC.pack(zlib.crc32(body))

    @classmethod
    def decode(cls, data: bytes) -> "VectorIndex":
        """An index from its snapshot; ValueError when it does not check out (it is then rebuilt, never trusted)."""
        if len(data) < _HEADER.size + _CRC.size or zlib.crc32(data[:-4]) != _CRC.unpack_from(data, len(data) - 4)[0]:
            raise ValueError("checksum mismatch")
        magic, form, stamp, dims, count, graphed, graph_bytes = _HEADER.unpack_from(data)
        if magic != MAGIC or form != SNAPSHOT_FORMAT or dims != DIMENSIONS:
            raise ValueError(f"not a vector index snapshot of format {SNAPSHOT_FORMAT} at {DIMENSIONS} dimensions")
        at = _HEADER.size
        dense_end = at + 8 * count
        vectors_end = dense_end + 4 * DIMENSIONS * count
        if vectors_end + graph_bytes + _CRC.size != len(data) or graphed > count:
            raise ValueError("sizes do not add up")
        index = cls()
        capacity = max(1024, count)
        index._matrix = np.empty((capacity, DIMENSIONS), np.float32)
        index._matrix[:count] = np.frombuffer(data, "<f4", DIMENSIONS * count, dense_end).reshape(count, DIMENSIONS)
        index._dense = np.full(capacity, NO_SLOT, np.int64)
        index._dense[:count] = np.frombuffer(data, "<i8", count, at)
        live = index._dense[:count] != NO_SLOT
        top = int(index._dense[:count].max(initial=NO_SLOT))
        index._slot = np.full(max(1024, top + 1), NO_SLOT, np.int64)
        index._slot[index._dense[:count][live]] = np.flatnonzero(live)
        index._count, index._live, index.stamp = count, int(np.count_nonzero(live)), stamp
        if graph_bytes:
            graph = faiss.deserialize_index(np.frombuffer(data, np.uint8, graph_bytes, vectors_end).copy())
            if graph.ntotal != graphed:
                raise ValueError("the graph does not hold the slots the header names")
            index._graph = graph
            index.graph_grown(graphed)
        return index


MAGIC = b"BVX1"
SNAPSHOT_FORMAT = 1
_HEADER = struct.Struct("<4sIQIxxxxQQQ")
_CRC = struct.Struct("<I")
SUFFIX = ".vec"
