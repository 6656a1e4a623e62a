"""A read snapshot: the store as one read sees it. Every read door answers from one.

A snapshot is a generation and the sources as they stood when it was taken (the live memtable,
the frozen ones, the tables), not a copy: every version is tagged with the generation that wrote
it, so reading at ``generation`` takes, for each key, the newest version at or below it. A flush
or compaction that swaps the sources afterwards leaves a snapshot reading what it took: a frozen
memtable stays whole, and an unlinked table's open map keeps serving.

``asOf`` is the same door run on an older snapshot (:meth:`Snapshot.at`). The projections the
query doors plan from are reached through :meth:`Snapshot.projections`, which holds them still for
the block that reads them; they stand at the durable head, or are built from the rows of a past
generation.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any, Protocol, TypeVar

from brainy.contract import refusals as R
from brainy.index.aggregates import Aggregates
from brainy.index.projections import Projections
from brainy.index.vectors import VectorIndex
from brainy.store import horizons as H
from brainy.store import keys as K
from brainy.store import log as log_
from brainy.store import rows
from brainy.store.blobs import BlobStore
from brainy.store.counts import Ledger
from brainy.store.sources import Sources

T_co = TypeVar("T_co", covariant=True)

SHAPE = {"dimensions": rows.DIMENSIONS, "metric": "cosine", "model": "all-MiniLM-L6-v2"}


class Holds(Protocol[T_co]):
    """A follower as a read sees it: what it keeps, held still for a block."""

    def held(self) -> AbstractContextManager[T_co]: ...


class HoldsProjections(Holds[Projections], Protocol):
    census: tuple[int, dict[str, Any]] | None  # the counts door's answer at one generation, kept for the next


class Followed(Protocol):
    """What a follower reads of the brain whose index it keeps (``brainy/index/follower.py``,
    ``aggregate_follower.py``): where it lives, how far its generations reach, and snapshots of its rows.
    The brain handle (``brainy/engine/brain.py``) is one; nothing below it imports it."""

    name: str
    path: Path
    warnings: list[dict[str, str]]

    @property
    def head(self) -> int: ...

    @property
    def flushed(self) -> int: ...

    @property
    def durable_ledger(self) -> Ledger: ...

    @property
    def next_dense(self) -> int: ...

    def at(self, generation: int | None = None) -> Snapshot: ...


class ReadStore(Followed, Protocol):
    """What a read snapshot reads of its brain: the followers' state at the durable head, the blobs, and the
    handle's serial (a row answer's cache key, ``brainy/index/encoded_rows.py``)."""

    serial: int
    blobs: BlobStore
    follower: HoldsProjections
    aggregate_follower: Holds[Aggregates]
    vector_follower: Holds[VectorIndex]

    @property
    def created_at(self) -> int: ...

    @property
    def manifest(self) -> dict[str, Any]: ...


class Snapshot:
    __slots__ = ("_store", "_sources", "generation", "wire", "serial")

    def __init__(self, store: ReadStore, sources: Sources, generation: int) -> None:
        self._store = store
        self._sources = sources
        self.generation = generation
        self.serial: int = store.serial  # the brain handle's serial, unique in the process (a row answer's key)
        # a transport's read: its page doors hand rows out as encoded bytes (brainy/index/encoded_rows.py)
        self.wire = False

    def for_wire(self) -> Snapshot:
        """This snapshot for a transport's call: rows of its answers come encoded, for the codecs to splice."""
        return self._with_wire(True)

    def in_process(self) -> Snapshot:
        """This snapshot with rows handed out as plain documents (a door reading another's answer)."""
        return self._with_wire(False)

    def _with_wire(self, wire: bool) -> Snapshot:
        if self.wire == wire:
            return self
        snap = Snapshot(self._store, self._sources, self.generation)
        snap.wire = wire
        return snap

    # -- what it stands at -----------------------------------------------------------------------

    @property
    def brain(self) -> str:
        """The brain's name, as answers carry it."""
        return self._store.name

    @property
    def head(self) -> int:
        """The store's durable head now (a snapshot's own generation may be older)."""
        return self._store.head

    @property
    def at_head(self) -> bool:
        return self.generation == self._store.head

    @property
    def blobs(self) -> Any:
        """The store's file content (``brainy/store/blobs.py``): every read of it verified."""
        return self._store.blobs

    @property
    def created_at(self) -> int:
        return self._store.created_at

    @property
    def oldest_retained(self) -> int:
        """The oldest generation time travel reads (docs/store-format.md, "Horizons")."""
        return H.history_from(self._store.manifest)

    def at(self, generation: int) -> Snapshot:
        """The same store at another generation, at or below the head (handing rows out as this one does)."""
        return self._store.at(generation)._with_wire(self.wire)

    @property
    def sources(self) -> Sources:
        """What this snapshot reads: a flush or compaction swaps in new sources, and these keep their tables
        and frozen memtables unchanged; their live memtable only gains versions above the durable head."""
        return self._sources

    # -- keys and rows ---------------------------------------------------------------------------

    def lookup(self, key: bytes) -> bytes | None:
        return self._sources.lookup(key, self.generation)

    def scan(self, start: bytes, stop: bytes | None) -> Iterator[tuple[bytes, bytes]]:
        return self._sources.scan(start, stop, self.generation)

    def versions(self, key: bytes) -> list[tuple[int, bytes]]:
        return self._sources.versions(key, self.generation)

    def every_version(self, start: bytes, stop: bytes | None) -> Iterator[tuple[bytes, int, bytes]]:
        """(key, generation, value) of every version at or below the generation of every key in the range,
        source by source (a key's versions may come from several; a tombstone's value is empty)."""
        for source in self._sources:
            for key, gen, value in source.scan(start, stop):
                if gen <= self.generation:
                    yield key, gen, value

    def version(self, key: bytes) -> tuple[int, bytes] | None:
        """``(the generation that wrote it, its stored bytes)`` of ``key`` as this snapshot reads it."""
        return self._sources.version(key, self.generation)

    def scan_versions(self, start: bytes, stop: bytes | None) -> Iterator[tuple[bytes, int, bytes]]:
        """(key, the generation that wrote it, value) of each key's newest live version in the range, in key
        order (:meth:`every_version` gives them all)."""
        return self._sources.scan_versions(start, stop, self.generation)

    def entity(self, id_: str) -> dict[str, Any] | None:
        raw = self.lookup(K.entity_key(id_))
        return rows.unpack(raw) if raw else None

    def relation(self, id_: str) -> dict[str, Any] | None:
        raw = self.lookup(K.relation_key(id_))
        return rows.unpack(raw) if raw else None

    def vector(self, row: dict[str, Any]) -> bytes | None:
        """The vector of ``row`` (an entity or relation row this snapshot read) as it reads it
        (:func:`brainy.store.rows.vector_of`); None when it has none."""
        return rows.vector_of(row, self._split_of(row))

    def whole(self, row: dict[str, Any]) -> dict[str, Any]:
        """``row`` (decoded for the caller alone) with its vector in it, when it has one."""
        return rows.whole(row, self._split_of(row))

    def _split_of(self, row: dict[str, Any]) -> Callable[[], bytes | None]:
        """The read of ``row``'s vector key at this snapshot's generation (a relation row has ``from``)."""
        key = K.relation_key(row["id"]) if "from" in row else K.entity_key(row["id"])
        return lambda: self.lookup(K.vector_key(key))

    def entities(self, vectors: bool = False) -> Iterator[dict[str, Any]]:
        """Every entity row, in id order; with ``vectors``, whole (each one's vector in it), the vectors read
        by one pass over the vector keys beside the pass over the rows, not a point read each."""
        found = self.scan(K.ENTITY, b"f")
        if not vectors:
            for _, raw in found:
                yield rows.unpack(raw)
            return
        split = self.scan(K.ENTITY_VECTOR, K.prefix_end(K.ENTITY_VECTOR))
        pending = next(split, None)
        for key, raw in found:
            id_ = key[1:]
            while pending is not None and pending[0][1:] < id_:
                pending = next(split, None)
            held = pending[1] if pending is not None and pending[0][1:] == id_ else None
            yield rows.whole(rows.unpack(raw), lambda held=held: held)

    def relations(self) -> Iterator[dict[str, Any]]:
        """Every relation row, in id order."""
        for _, raw in self.scan(K.RELATION, b"s"):
            yield rows.unpack(raw)

    def commit(self, generation: int) -> dict[str, Any]:
        """The commit record of ``generation`` (at or below this snapshot's)."""
        raw = self.lookup(K.commit_key(generation))
        if raw is None:  # every commit writes its record; a gap is damage, not an empty answer
            raise R.FactLogRefusedError(f"generation {generation} has no commit record", reason="missing-segment")
        return rows.unpack(raw)

    def timestamp(self, generation: int) -> int:
        """When ``generation`` was committed (the store's creation for generation 0)."""
        return self.created_at if generation == 0 else self.commit(generation)["timestamp"]

    def frames(self, after: int) -> Iterator[log_.Frame]:
        """The fact log's frames above ``after``, read lazily (the change feed and diff stop at their end)."""
        return H.frames(self._store.path, after, self._store.manifest)

    # -- derived state ---------------------------------------------------------------------------

    def projections(self) -> AbstractContextManager[Projections]:
        """The query projections, held still for the block: at the durable head for a head snapshot (their
        ``stamp`` says which generation they cover), built from this generation's rows for a past one. (The
        follower's own hold, not one wrapped in another: a layer of generator is microseconds on a find.)"""
        if self.at_head:
            return self._store.follower.held()
        return nullcontext(Projections.build(self.entities(), self.generation))

    def aggregates(self) -> AbstractContextManager[Aggregates]:
        """The maintained aggregates at the durable head, held still for the block: a head snapshot's only (a past
        one computes its aggregates from its rows, brainy/index/aggregates.py), which the caller tells by
        :attr:`at_head` first. Not asked again here: a commit may have moved the head since, and the state held
        then answers at its own stamp, as the projections and the vectors of a head snapshot do."""
        return self._store.aggregate_follower.held()

    def vectors(self) -> AbstractContextManager[VectorIndex]:
        """The vector index, held still for the block: at the durable head for a head snapshot (searched by
        its graph or exactly), built from this generation's rows for a past one (searched exactly)."""
        if self.at_head:
            return self._store.vector_follower.held()
        return nullcontext(VectorIndex.build(self.entities(vectors=True), self.generation, graph=False))

    def ledger(self) -> Ledger:
        """The counts as of this snapshot: the brain's own ledger at its head, else counted from the rows."""
        if self.at_head:
            return self._store.durable_ledger
        ledger = Ledger()
        for row in self.entities():
            ledger.move("e", None, row)
        for row in self.relations():
            ledger.move("r", None, row)
        ledger.generation = self.generation
        ledger.last_updated = self.commit(self.generation)["timestamp"] if self.generation else 0
        return ledger

    def census(self) -> dict[str, Any]:
        """The census the counts door answers. A generation's census never changes, so the head's is kept
        by the follower and built once per generation."""
        follower = self._store.follower
        cached = follower.census
        if cached is not None and cached[0] == self.generation:
            return dict(cached[1])
        ledger = self.ledger()
        answer: dict[str, Any] = {"brain": self.brain}
        answer.update(ledger.answer())
        answer.update(shape=dict(SHAPE), lastUpdated=ledger.last_updated, allCountsSuspect=False)
        if self.at_head:
            follower.census = (self.generation, answer)
        return dict(answer)
