"""The vector index: every vectored entity's vector, searched by cosine, at one generation (its stamp).

A projection like the postings (``brainy/index/projections.py``): moved by each durable commit's
entity changes, persisted stamped with the generation it covers, rebuilt from the rows when it cannot
be trusted. Its layout is the law in docs/store-format.md, "Vector index snapshots":

- **Slots.** Each vector sits, scaled to unit length, in one row of a float32 matrix (:class:`Slots`, in
  ``brainy/index/vector_matrix.py`` with its scoring). A slot is written once: an update takes a new slot
  and kills the old one, a removal kills its slot. Every hit is checked live and scored on the matrix, so a
  stale vector never answers. The slots a snapshot held are read in place from its mapped files (each
  chunk checked the first time a read touches it); the slots written since live in an owned, growable part.
- **The graph.** Slots below :attr:`VectorIndex.graphed` are also in an HNSW graph (faiss
  ``IndexHNSWSQ`` over float16 copies, inner product, ids = slots; a snapshot's older ``IndexHNSWFlat`` is
  taken with its links and its copies halved). It only picks candidates, which the slots score. The slots
  above are the fresh tail, scanned exactly. :meth:`VectorIndex.catch_up` adds the tail to the graph in one
  batch, off the commit path.
- **Snapshots.** A base (the whole index, graph included) and deltas appended at each flush (the slots
  written and killed since the link before), a new base once the deltas pass a quarter of it
  (:meth:`VectorIndex.freeze`, :meth:`VectorIndex.decode`, :func:`read_chain`; the files' layouts, their
  writing and their reading ahead are in ``brainy/index/vector_format.py``).
- **Exact, the graph, or the partitions.** A search is an exact scan while the index is small, when a filter
  keeps few rows, and for a past generation (:meth:`VectorIndex.exact`); otherwise the graph answers (with a
  predicate for a large filter) and the tail is scanned beside it. A filtered graph search that cannot fill
  the page falls back to the exact scan. While the graph does not serve (not yet taken from the snapshot, or
  busy catching up) an unfiltered search of a large base answers from its partitioned copy
  (``brainy/index/vector_partitions.py``): what a first search after an open reads from a cold disk. Past
  ``PARTITIONS_FIRST`` live slots, with few written since the base, the copy answers first even when the graph
  serves (on the bench's vectors it is the faster of the two at the recall wanted).

The library and the thresholds were chosen by measurement on the project's box: ``perf/bench_vectors.py``
and the commit that chose them carry the figures.
"""

from __future__ import annotations

import contextlib
import mmap
import operator
import threading
from array import array
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import crc32c
import faiss
import numpy as np

from brainy._speedups import picks
from brainy.index.projections import newest_snapshot, snapshot_name
from brainy.index.vector_format import (
    _CRC,
    _CRCS,
    _DELTA,
    _DELTA_STORE,
    _HEADER,
    _HEADER4,
    DELTA_FORMAT,
    DELTA_MAGIC,
    MAGIC,
    QUANTISED_SUFFIX,
    SNAPSHOT_FORMAT,
    SUFFIX,
    Ahead,
    Frozen,
    GraphPart,
    Link,
    Owed,
    Prepared,
    _deltas,
    _layout,
    _mapped,
    _slot_arrays,
    _written,
    decode_quantised,
    owned,
    store_tag,
)
from brainy.index.vector_matrix import CHUNK_SLOTS, DIMENSIONS, NO_SLOT, Slots, _largest, _scaled, _top, unit
from brainy.index.vector_partitions import RECALL_LEAST, PartitionDamaged, Partitions, read_partitioned, wanted
from brainy.store.crc import crc32

EXACT_BELOW = 4_096  # live vectors under which every search is an exact scan (about 0.2 ms)
EXACT_CANDIDATES = 4_096  # a filter keeping at most this many vectored rows is searched exactly
TAIL_MAX = 2_048  # fresh slots past which the graph is caught up
COMPACT_AFTER = 4_096  # dead slots (at least as many as the live ones) past which the slots are compacted
HNSW_M = 16  # graph degree: recall against memory (faiss's own default is 32)
EF_CONSTRUCTION = 128
# efSearch by the slots in the graph: the graph's recall at one efSearch falls as it grows. On clustered vectors
# (perf/bench_vectors.py's, queries 0.1 off a stored vector) recall@10 was 0.987 at 20,000 with 128 (0.969 with
# 96, 0.999 with 256, which took twice as long); 0.964 at 100,000 with 256 (0.88 with 128); at 1,000,000 0.777
# with 512 (1.6 ms), 0.926 with 1,024 (3.1 ms), 0.986 with 2,048 (6.5 ms), where hnswlib took 4.5 ms for 0.963
# and usearch 11.2 ms for 0.962 (perf/compare_vector_libraries.py, one run). Those were walks over float32 copies;
# over float16 ones (the graph since) recall@10 held: 0.986 at 20,000 with 128, 0.969 at 100,000 with 256 (0.964
# before), each walk 18-19% faster at the same efSearch, its build 10-18% faster (one core, the same vectors)
EF_SEARCH = ((32_768, 128), (131_072, 256), (None, 2_048))  # (graphed up to, efSearch), the first that fits
# From this many live slots an unfiltered search answers from the base's partitioned copy even when the graph
# serves, while few live slots lie past the base (at most TAIL_MAX: the copy's search scores them exactly): at
# 1,000,000 clustered vectors its recall@10 was 1.000 in 0.81 ms, where the graph took 6.5 ms for 0.986 with
# efSearch 2,048 (perf/compare_vector_libraries.py, the same run)
PARTITIONS_FIRST = 262_144
BASE_AFTER = 4  # a new base once the deltas since it hold more than 1/BASE_AFTER of its slots
BASE_AFTER_MIN = 1_024  # ... and at least this many (a small base is cheap to write again anyway)
MAX_DELTAS = 64  # ... or once this many deltas follow it (each is a file the next open reads)
_BEFORE = operator.itemgetter(0)  # a move's row before
SERIALISE_WAIT_SECONDS = 0.5  # how long a search waits for a flush serialising the graph, at most
QUANTISED_SCAN = picks.get("vecpack") == "cython"  # the pure twin's int8 product is slower than the float32 scan


class VectorIndex:
    def __init__(self, graph: bool = True) -> None:
        self.stamp = 0
        self.link: Link | None = None  # the last snapshot link written or read (None: the next is a base)
        self._killed: list[int] = []  # slots below link.count killed since that link
        self._epoch = 0  # compactions so far: a graph serialised for a base must be of its slots
        self._serialising = False  # the graph lock is held to serialise the graph: a search waits for it
        self.graphed = 0
        self._base_graphed = 0  # the slots the newest base's graph holds (next_link)
        self._count = 0  # slots written, dead ones included
        self._live = 0
        self._slots = Slots()
        self._dense = np.full(1024, NO_SLOT, np.int64)  # slot -> dense int (NO_SLOT: dead)
        self._slot = np.full(1024, NO_SLOT, np.int64)  # dense int -> slot (NO_SLOT: no vector)
        self._graph: Any = None
        self._graph_part: GraphPart | None = None  # a snapshot's graph, not yet checked nor deserialised
        self._loaded_graph: Any = None  # that graph deserialised, not yet published
        self._uses_graph = graph
        self._dead_in_graph = 0
        self._bitmap: np.ndarray | None = None  # live slots of the graph, kept until a slot dies
        self._params: Any = None  # the search parameters of an unfiltered graph search, made once per efSearch
        # that search's answer buffers (distances, labels), made once per k: searches hold the graph lock
        self._answers: tuple[np.ndarray, np.ndarray] | None = None
        self._partitions: Partitions | None = None  # the base's partitioned copy, when it has one that checks out
        self.partition_owed = False  # the base's partitioned copy is missing, stale or damaged: a flush writes it
        self.quantised_owed = False  # the same for its quantised copy
        self._notes: list[str] = []  # what the follower is to warn of (a damaged copy)
        self.graph_lock = threading.Lock()  # held by whoever writes or serialises the graph

    def heap_bytes(self) -> int:
        """What this index's owned slot rows hold in the heap (slots read in place from a snapshot are mapped
        pages, not counted)."""
        return self._slots.heap_bytes()

    @classmethod
    def build(cls, entities: Iterable[dict[str, Any]], stamp: int, graph: bool = True) -> VectorIndex:
        """From the rows, whole (each vector in its row: ``Snapshot.entities(vectors=True)``). The graph is left to
        :meth:`catch_up`: until then every search is exact."""
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
        live = np.flatnonzero(self._dense[: self._count] != NO_SLOT)
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
        self._partitions = None  # of the slots as they were numbered; the next base has its own copy
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
        """Move the index from an entity's old row to its new one (None: absent), both whole, as a commit's moves
        carry them (brainy/store/txn.py)."""
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
        if not any(map(_BEFORE, moves)) and self._apply_new(moves):  # a row is never an empty dict: none before
            return
        writes: list[int] = []  # the dense int of each write, in order (NO_SLOT once killed again)
        raw: list[bytes] = []  # its vector as the row holds it
        written: dict[int, int] = {}  # dense int -> its write in this batch that is still alive
        dying: list[int] = []  # dense ints whose slot from before the batch dies, in order
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
        scaled = _scaled(raw)
        if scaled is None:  # a zero vector: one at a time, to fail where the moves one at a time would
            for before, after in moves:
                self.apply(before, after)
            return
        self._kill_many(dying)
        if writes:
            self._append_many(np.array(writes, np.int64), *scaled)

    def _apply_new(self, moves: list[tuple[None, dict[str, Any] | None]]) -> bool:
        """apply_all's moves when none has a row before (an ``addMany``'s): the slot each takes and the ones that
        die decided by array operations (an entity written twice: its earlier slot dead, in _append_many), not a
        Python step a move. False, having changed nothing, when a vector is zero (apply_all then fails where the
        moves one at a time would)."""
        new = [after for _, after in moves if after is not None and after.get("vector") is not None]
        scaled = _scaled([after["vector"] for after in new])
        if scaled is None:
            return False
        writes = [after["denseInt"] for after in new]
        self._kill_many(list(dict.fromkeys(writes)))
        if writes:
            self._append_many(np.array(writes, np.int64), *scaled)
        return True

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
            grown[: self._count] = self._dense[: self._count]
            self._dense = grown
        if dense >= len(self._slot):
            self._slot = _grown_slot_map(self._slot, max(dense + 1, 2 * len(self._slot)))

    def _append_many(
        self, dense_ints: np.ndarray, vectors: np.ndarray, norms: np.ndarray | None = None, mapped: str | None = None
    ) -> None:
        """:meth:`_append` for a delta's slots in one go (a Python loop over 20,000 slots took 0.4 s of an open);
        ``norms``: the vectors' lengths, each divided by its own as it is written (:meth:`Slots.extend`);
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
            self._slots.extend(vectors, norms)
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
        """Bring an older index to ``stamp`` from that generation's rows (whole, as :meth:`build` takes them): a row
        written after the index's stamp replaces its slot, and a live slot no row holds dies."""
        held: set[int] = set()
        for row in entities:
            dense = row["denseInt"]
            held.add(dense)
            if row["generation"] > self.stamp:
                self._kill(dense)
                if row.get("vector"):
                    self._write(dense, row["vector"])
        for dense in self._dense[: self._count]:
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
            self._graph = _new_graph()
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
        self._loaded_graph = _halved(graph)
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
        wanted = (
            np.frombuffer(dense_ints, dtype=np.uint64).astype(np.int64)
            if isinstance(dense_ints, array)
            else np.asarray(dense_ints, dtype=np.int64)
        )
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
        ``exact``, ``graph`` or ``partitioned`` (the base's partitioned copy, while the graph does not serve)."""
        slots = None if allowed is None else self.slots_of(allowed)
        if slots is not None and len(slots) == self._live:
            slots = None  # the filter keeps every vectored row
        small = self._live <= EXACT_BELOW if slots is None else len(slots) <= EXACT_CANDIDATES
        if small:
            return (*self._exact(query, k, slots), "exact")
        if slots is None and self._partitions_first():
            found = self._partitioned(query, k)
            if found is not None:
                return (*found, "partitioned")
        if self._graph is None or self.graphed == 0 or not self._graph_taken():
            found = self._partitioned(query, k) if slots is None else None
            if found is not None:
                return (*found, "partitioned")
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
        return self.graph_lock.acquire(blocking=False) or (
            self._serialising and self.graph_lock.acquire(timeout=SERIALISE_WAIT_SECONDS)
        )

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

    def _partitions_first(self) -> bool:
        """Whether the base's partitioned copy answers an unfiltered search before the graph is asked
        (``PARTITIONS_FIRST``)."""
        partitions = self._partitions
        return partitions is not None and self._live >= PARTITIONS_FIRST and self._count - partitions.slots <= TAIL_MAX

    def _partitioned(self, query: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray] | None:
        """The top ``k`` from the base's partitioned copy (docs/store-format.md, "Vector index snapshots"): the
        slots of the best approximate scores in the probed lists and every live slot past the base, scored
        exactly on their float32 rows. None when there is no copy, when its measured recall is under
        ``RECALL_LEAST``, when a probed list is damaged (the copy is then dropped, and owed), or when too few live
        slots came out: the exact scan answers."""
        partitions = self._partitions
        if partitions is None or k <= 0 or not partitions.recall >= RECALL_LEAST:
            return None  # a copy whose own search measured a poorer recall never answers (NaN: neither)
        try:
            candidates = partitions.candidates(query, k, self._dense)
        except PartitionDamaged as exc:
            self._partitions, self.partition_owed = None, True
            self._notes.append(f"{exc}; searches answer without the partitioned copy until a flush writes it again")
            return None
        count = self._count
        if count > partitions.slots:  # the deltas' and the tail's slots are in no list
            tail = np.arange(partitions.slots, count)
            candidates = np.concatenate([candidates, tail[self._dense[partitions.slots : count] != NO_SLOT]])
        if len(candidates) < min(k, self._live):
            return None
        scores = self._slots.gather(candidates) @ query  # the same exact score an exact scan gives
        picked = _top(scores, k)
        return scores[picked], self._dense[candidates[picked]]

    def owed_copies(self) -> Owed | None:
        """What writing the base's owed copies takes (under the brain's lock): which are owed, the base's stamp, its
        slots, the slot matrix (the rows below its count are never written again) and a copy of its dense ints as
        they are now (a slot killed since is left out of the partitioned copy's lists). None when none is owed."""
        link = self.link
        if not (self.partition_owed or self.quantised_owed) or link is None:
            return None
        dense = self._dense[: link.base_slots].copy()
        return Owed(link.base, link.base_slots, self._slots, dense, self.quantised_owed, self.partition_owed)

    def quantised_written(self, stamp: int, codes: Any) -> None:
        """The quantised copy of the base of ``stamp`` was written and read back (``codes``, a ``_Codes``): the
        scans read it from now on, if the base is still this index's (no compaction since)."""
        base = self._slots.base
        if self.link is not None and self.link.base == stamp:
            self.quantised_owed = False
            if base is not None and len(base.rows) == len(codes.rows):
                base.quantised = codes

    def partition_written(self, stamp: int, partitions: Partitions | None) -> None:
        """The partitioned copy of the base of ``stamp`` was written (``partitions``, read back) or that base needs
        none (None). Taken for the searches while the graph does not serve, if the base is still this index's
        (no compaction has renumbered the slots since: it would have dropped the link)."""
        if self.link is not None and self.link.base == stamp:
            self.partition_owed = False
            if partitions is not None:
                self._partitions = partitions

    @property
    def noted(self) -> bool:
        """Something went wrong with the partitioned copy since :meth:`notes` was last asked."""
        return bool(self._notes)

    def notes(self) -> list[str]:
        """What went wrong with the partitioned copy since last asked (the follower warns of it)."""
        notes, self._notes = self._notes, []
        return notes

    def _graph_search(
        self, query: np.ndarray, k: int, slots: np.ndarray | None
    ) -> tuple[np.ndarray, np.ndarray] | None:
        graphed, count = self.graphed, self._count
        ef = max(ef_search(graphed), 2 * k)
        if slots is None and not self._dead_in_graph and k > 0:  # the common search: no selector, parameters made once
            params = self._params
            if params is None or params.efSearch != ef:
                params = self._params = faiss.SearchParametersHNSW()
                params.efSearch = ef
            # faiss's own call, not its Python wrapper (which checks and copies the query: 20 us of 150 at 20,000)
            if query.dtype != np.float32 or not query.flags.c_contiguous:  # (a unit vector is both: no call)
                query = np.ascontiguousarray(query, np.float32)
            answers = self._answers
            if answers is None or len(answers[1]) != k:
                answers = self._answers = (np.empty(k, np.float32), np.empty(k, np.int64))
            distances, labels = answers
            self._graph.search_c(1, faiss.swig_ptr(query), k, faiss.swig_ptr(distances), faiss.swig_ptr(labels), params)
            # read as a list: a served find's every numpy call is microseconds, its caches cold from the graph's walk
            hits = [label for label in labels.tolist() if 0 <= label < graphed]  # -1: past the last hit
            if count > graphed:
                hits += self._live_tail(graphed, count).tolist()
            scores = self._slots.gather(hits) @ query  # the same exact score an exact scan gives
            picked = _top(scores, k)
            return scores[picked], self._dense[[hits[at] for at in picked.tolist()]]
        params = faiss.SearchParametersHNSW()
        params.efSearch = ef
        if slots is not None:
            inside = slots[slots < graphed]
            mask = np.zeros(graphed, bool)
            mask[inside] = True
            bitmap = np.packbits(mask, bitorder="little")
            params.efSearch *= 2
            tail = slots[slots >= graphed]
        else:
            bitmap = self._live_bitmap()
            tail = self._live_tail(graphed, count)
        selector = faiss.IDSelectorBitmap(graphed, faiss.swig_ptr(bitmap))  # kept alive until the search is done
        params.sel = selector
        _, found = self._graph.search(query[None, :], k, params=params)
        found = found[0]
        found = found[(found >= 0) & (found < graphed)]
        found = found[self._dense[found] != NO_SLOT]  # a slot that died is never an answer
        if slots is not None and len(found) < min(k, len(inside)):
            return None
        candidates = np.concatenate([found, tail]) if len(tail) else found
        scores = self._slots.gather(candidates) @ query  # the same exact score an exact scan gives
        picked = _top(scores, k)
        return scores[picked], self._dense[candidates[picked]]

    def _live_tail(self, graphed: int, count: int) -> np.ndarray:
        """The live slots past the graph."""
        tail = np.arange(graphed, count)
        return tail[self._dense[graphed:count] != NO_SLOT]

    def _live_bitmap(self) -> np.ndarray:
        if self._bitmap is None:
            self._bitmap = np.packbits(self._dense[: self.graphed] != NO_SLOT, bitorder="little")
        return self._bitmap

    # -- snapshots (docs/store-format.md, "Vector index snapshots") ----------------------------------

    def encode(self) -> bytes:
        """The index as a base snapshot. The caller holds :attr:`graph_lock` and the brain's lock."""
        frozen = self.freeze(base=True)
        self.graph_for(frozen)
        return frozen.encode()

    def next_link(self, graph_free: bool = True) -> str | None:
        """What the next snapshot link must be: "base", "delta", or None when nothing changed since the last.
        ``graph_free``: whether the writer holds the graph lock, so a base could carry the graph; without it, a
        graph grown past the base's is no reason for a base (the next link written with the lock takes it)."""
        link = self.link
        if link is None:
            return "base"
        grown = self.graphed - self._base_graphed
        if graph_free and grown > max(BASE_AFTER_MIN, link.base_slots // BASE_AFTER):
            # the graph holds that many slots more than the base's: a base keeps them, where deltas would leave
            # every later open to insert them again (125-330 us a vector, at low priority: a minute at 20,000 on a
            # busy core, the searches exact meanwhile); also when nothing was written since
            return "base"
        if link.stamp == self.stamp:
            return None
        since = link.since_base + (self._count - link.count) + len(self._killed)
        small = since <= max(BASE_AFTER_MIN, link.base_slots // BASE_AFTER)
        return "delta" if small and link.deltas < MAX_DELTAS else "base"

    def freeze(self, base: bool) -> Frozen:
        """The next snapshot link, copied, and recorded as written: a base, or a delta of what changed since the
        last link. The caller holds the brain's lock (and :attr:`graph_lock` for a base: its graph is
        serialised by :meth:`Frozen.encode`)."""
        link, count = self.link, self._count
        if link is not None and not base:
            since = link.since_base + (count - link.count) + len(self._killed)
            frozen = Frozen(
                self.stamp,
                link.base,
                link.stamp,
                link.count,
                self._dense[link.count : count].copy(),
                self._slots.copy(link.count, count),
                np.asarray(self._killed, np.int64),
            )
            self.link, self._killed = Link(link.base, self.stamp, count, link.base_slots, since, link.deltas + 1), []
            return frozen
        # the slots below the count are never written again: references, not a copy (checked when encoded)
        self._base_graphed = 0  # what its graph holds: none until graph_for serialises one into it
        frozen = Frozen(
            self.stamp, self.stamp, self.stamp, 0, self._dense[:count].copy(), self._slots, None, epoch=self._epoch
        )
        if link is not None:  # the base before is of these slots' first ones (a compaction sets no link)
            frozen.prior = (link.base, link.base_slots)
        self.link, self._killed = Link(self.stamp, self.stamp, count, count, 0, 0), []
        # its partitioned copy is written after it (on a thread of its own for a served handle): owed until then, so
        # that one not written is asked for again; the older base's copy answers meanwhile (no slot is renumbered)
        self.partition_owed = True
        self.quantised_owed = False  # written with the base
        return frozen

    def graph_for(self, frozen: Frozen) -> None:
        """Serialise the graph into a frozen base, if it is of the base's slots (no compaction since, and no slot
        past the base's in it); else the base goes without one and the next open builds the graph again. The
        caller holds :attr:`graph_lock` only: a commit and a read never wait on this."""
        graph, part = self._graph, self._graph_part
        if graph is None and part is not None and self._epoch == frozen.epoch and 0 < part.graphed <= len(frozen.dense):
            try:  # still as it was read: its bytes, once checked, are the serialisation
                frozen.graph, frozen.graphed = part.checked(), part.graphed
            except ValueError:
                pass  # the base goes without it; the catch-up says why it was not used
            self._base_graphed = frozen.graphed
            return
        if graph is not None and self._epoch == frozen.epoch and 0 < graph.ntotal <= len(frozen.dense):
            self._serialising = True
            try:
                frozen.graph, frozen.graphed = faiss.serialize_index(graph).tobytes(), graph.ntotal
            finally:
                self._serialising = False
            self._base_graphed = frozen.graphed

    def apply_delta(
        self, data: bytes | mmap.mmap, name: str | None = None, checked: bool = False, store: bytes | None = None
    ) -> None:
        """Append one delta to the index read so far; ValueError when it does not check out, is another store's
        than ``store`` (:func:`store_tag`) or does not follow. ``name`` (the file's, when ``data`` is it mapped): its
        vectors are read in place, not copied. ``checked``: its checksum was found good on these very bytes
        already (mapped and checked ahead, :func:`check_ahead`)."""
        view = memoryview(data)
        if len(view) < _DELTA.size + _DELTA_STORE.size + _CRC.size:
            raise ValueError("sizes do not add up")
        magic, form, stamp, base, previous, dims, first, written, killed = _DELTA.unpack_from(view)
        if magic != DELTA_MAGIC or form not in (1, 2, DELTA_FORMAT) or dims != DIMENSIONS:
            raise ValueError(f"not a vector index delta of format 1 to {DELTA_FORMAT} at {DIMENSIONS} dimensions")
        crc = crc32 if form == 1 else crc32c.crc32c
        if not checked and crc(view[:-4]) != _CRC.unpack_from(view, len(view) - 4)[0]:
            raise ValueError("checksum mismatch")
        at = _DELTA.size
        if form == DELTA_FORMAT:
            owned(_DELTA_STORE.unpack_from(view, at)[0], store)
            at += _DELTA_STORE.size
        link = self.link
        if link is None or base != link.base or previous != link.stamp or first != self._count or stamp <= previous:
            raise ValueError("it does not follow the chain read so far")
        dense_at = at + 8 * killed
        vectors_at = dense_at + 8 * written
        if vectors_at + 4 * DIMENSIONS * written + _CRC.size != len(view):
            raise ValueError("sizes do not add up")
        kills = np.frombuffer(view, "<i8", killed, at)
        dense_ints = np.frombuffer(view, "<i8", written, dense_at)
        if (
            len(kills)
            and not (0 <= kills.min() and kills.max() < first)
            or len(dense_ints)
            and dense_ints.min() < NO_SLOT
        ):
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
    def decode(
        cls,
        data: bytes | mmap.mmap,
        graph_later: bool = False,
        room: int = 0,
        name: str = "base",
        dense_ints: int = 0,
        prepared: Prepared | None = None,
        store: bytes | None = None,
    ) -> VectorIndex:
        """An index from its base snapshot (bytes, or the file mapped); ValueError when it does not check out (it is
        then rebuilt, never trusted). The vectors are read in place (``name``: the file's, for the warnings):
        format 3 and 4's header and dense ints are checked here and each vectors chunk when a read first touches it;
        a format 1 or 2 base's slots are checked whole here. The graph is checked and deserialised here too
        unless ``graph_later``: it is then left for :meth:`take_graph`, off the read path, and searches scan
        exactly meanwhile (a format 1 base's graph is checked with its slots). ``room``: the slots the deltas
        and the log's tail will add (their dense ints are reserved for); ``dense_ints``: the dense ints minted so
        far (the slot map holds them all from the start). ``prepared``: the dense ints and slot map
        :func:`check_ahead` made of these very bytes, used when they have that room. ``store``: this store's
        :func:`store_tag`; a format 4 base that names another is not trusted."""
        view = memoryview(data)
        if len(view) < _HEADER.size + _CRC.size:
            raise ValueError("sizes do not add up")
        magic, form, stamp, dims, count, graphed, graph_bytes = _HEADER.unpack_from(view)
        if magic != MAGIC or form not in (1, 2, 3, SNAPSHOT_FORMAT) or dims != DIMENSIONS:
            raise ValueError(f"not a vector index snapshot of format 1 to {SNAPSHOT_FORMAT} at {DIMENSIONS} dimensions")
        if prepared is not None and (prepared.data is not data or (prepared.stamp, prepared.count) != (stamp, count)):
            prepared = None  # made of other bytes
        if form >= 3:
            layout = _layout(view, count, graph_bytes) if prepared is None else prepared.layout
            if form == SNAPSHOT_FORMAT:  # its header checked by the layout: a flipped byte is damage, not a store
                owned(_HEADER4.unpack_from(view)[8], store)
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
                checked = crc32(view[: vectors_at + 4 * DIMENSIONS * count]) == slots_crc and (
                    graph_bytes or graph_crc == 0
                )
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
        index._slots.map(
            name,
            np.frombuffer(view, "<f4", DIMENSIONS * count, vectors_at).reshape(count, DIMENSIONS),
            crcs,
            chunk,
            (data, vectors_at) if isinstance(data, mmap.mmap) else None,
        )
        index._count, index._live, index.stamp = count, live, stamp
        index.link = Link(stamp, stamp, count, count, 0, 0)
        index._base_graphed = graphed if graph_bytes else 0
        if graph_bytes:
            index._graph_part = GraphPart(
                data, vectors_at + 4 * DIMENSIONS * count, graph_bytes, graphed, graph_crc, crc
            )
            if not graph_later:
                why = index.take_graph()
                index.graph_taken()
                if index._graph is None:
                    raise ValueError(why or "the graph section does not check out")
        return index


def _new_graph() -> Any:
    """An empty graph. Over float16 copies: a walk reads half the bytes (its ~500 distances a query are
    memory-bound), and every hit is scored on the slots anyway. Served top-10 at 20,000: 350 -> 301 us of CPU a
    request, recall@10 0.987 both."""
    graph = faiss.IndexHNSWSQ(DIMENSIONS, faiss.ScalarQuantizer.QT_fp16, HNSW_M, faiss.METRIC_INNER_PRODUCT)
    graph.hnsw.efConstruction = EF_CONSTRUCTION
    return graph


def _halved(graph: Any) -> Any:
    """A snapshot's graph over float32 copies (faiss IndexHNSWFlat, as bases written before hold) as the same graph
    over float16 copies: its links kept, its copies encoded again (96 ms at 100,000 slots), so a store written
    before walks as a new one does without its graph built again; the next base holds it so. Any other graph as
    it is."""
    if not isinstance(graph, faiss.IndexHNSWFlat):
        return graph
    halved = _new_graph()
    halved.hnsw = graph.hnsw  # faiss's HNSW struct, copied whole on assignment: the links, levels, entry point
    flat = faiss.downcast_index(graph.storage)
    faiss.downcast_index(halved.storage).add(
        faiss.rev_swig_ptr(flat.get_xb(), graph.ntotal * DIMENSIONS).reshape(graph.ntotal, DIMENSIONS)
    )
    halved.ntotal = graph.ntotal
    return halved


def ef_search(graphed: int) -> int:
    """The graph's efSearch for a graph of ``graphed`` slots (``EF_SEARCH``)."""
    for upto, ef in EF_SEARCH:
        if upto is None or graphed <= upto:
            return ef
    return EF_SEARCH[-1][1]


def _grown_slot_map(slot: np.ndarray, size: int) -> np.ndarray:
    """The slot map (dense int -> slot) at ``size`` entries: the old entries copied, only the new ones filled."""
    grown = np.empty(size, np.int64)
    grown[: len(slot)] = slot
    grown[len(slot) :] = NO_SLOT
    return grown


def _read_quantised(folder: Path, index: VectorIndex, store: bytes | None, ahead: Ahead | None = None) -> None:
    """Give the base an index was just read from its quantised copy, if it has one that checks out. One that is
    missing, stale, another store's or does not check out is owed (the next flush writes it again from the base's
    slots), and, but for a missing one, warned of: the scans read the float32 slots meanwhile, the same answers,
    only slower (no rebuild). ``ahead``: the copy's check begun at the open, waited for when it is under way (it
    reads the pages this read would) and taken if it copies this base; one not yet begun is called off."""
    path = folder / snapshot_name(index.stamp, QUANTISED_SUFFIX)
    base = index._slots.base
    if base is None:
        return
    if not path.is_file():
        index.quantised_owed = True
        return
    read = ahead.take(path) if ahead is not None else None
    if read is not None and read[0] == index.stamp and len(read[2].rows) == len(base.rows):
        with contextlib.suppress(ValueError):
            owned(read[1], store)
            base.quantised = read[2]
            return
    try:
        base.quantised = decode_quantised(_mapped(path), path.name, index.stamp, len(base.rows), store)
    except (OSError, ValueError) as exc:
        index.quantised_owed = True
        index._notes.append(f"{path.name}: {exc}; scans read the float32 slots until a flush writes it again")


def _read_partitioned(folder: Path, index: VectorIndex, store: bytes | None) -> None:
    """Give the base an index was just read from its partitioned copy, if it is large enough to have one and it
    checks out. One that is missing, stale or does not check out is owed (the next flush writes it); a base
    written before partitioned copies simply has none yet, so only a stale or damaged one is warned of."""
    base = index._slots.base
    if base is None:
        return
    count = len(base.rows)
    if not wanted(count, index._dense[:count]):
        return
    index._partitions, why = read_partitioned(folder, index.stamp, count, store)
    if index._partitions is None:
        index.partition_owed = True
        if why is not None and not why.endswith("is missing"):
            index._notes.append(f"{why}; searches answer without it until a flush writes it again")


def read_chain(
    folder: Path, head: int, graph_later: bool = False, tail: int = 0, dense_ints: int = 0, ahead: Ahead | None = None
) -> tuple[VectorIndex | None, list[str]]:
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
    store = store_tag(folder.parent)
    try:
        room = sum(_written(p) for _, p in deltas) + tail
        prepared = ahead.take(path) if ahead is not None else None
        index = VectorIndex.decode(
            prepared.data if prepared else _mapped(path, ahead=not copied),
            graph_later,
            room=room,
            name=path.name,
            dense_ints=dense_ints,
            prepared=prepared,
            store=store,
        )
    except (OSError, ValueError) as exc:
        return None, [f"snapshot {path.name}: {exc}"]
    if index.stamp != stamp:
        return None, [f"snapshot {path.name} holds generation {index.stamp}"]
    _read_quantised(folder, index, store, ahead)
    _read_partitioned(folder, index, store)
    for _, delta in deltas:
        try:
            checked = ahead.take(delta) if ahead is not None else None
            index.apply_delta(checked or _mapped(delta), delta.name, checked=checked is not None, store=store)
        except (OSError, ValueError) as exc:
            # the chain stands at the last link that checked out; later deltas cannot follow it
            return index, [f"delta {delta.name}: {exc}; the index stands at generation {index.stamp}"]
    return index, []
