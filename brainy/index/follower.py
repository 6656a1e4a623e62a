"""The projection follower: keeps the query projections at the brain's durable head.

It follows the commit path. Each commit (and each frame replayed on open) hands it the entity
and relation moves it made (:meth:`record`); when a commit becomes durable the follower applies the moves up
to it, in generation order (:meth:`advance`), so a query never sees a commit that was not
acknowledged. The projections are built on first need (an open pays nothing until the first
query): from the newest persisted snapshot when the moves this handle holds can bring it to the
head, else from the rows; :attr:`built_from` says which. At each flush and clean close they are
persisted as the next link of a chain (``chain.py``: a base, and a delta of what the commits since it touched,
which is what a flush writes unless a base is due), so the next open finds a snapshot the log tail it replays
can bring to the head, and a flush costs what changed, not the store.

A served handle (``background``, set by the server's pool) never builds inside a read: the build
runs on a thread of its own (:meth:`warm`, started at admission, which lets the first read in place
finish first, for up to ``FIRST_READ_GRACE_SECONDS``; for a pool's handle, the whole first door). A read that arrives before it is
done is answered from the newest snapshot read in place (``projections.InPlace``: mapped, each
section decoded when a read first needs it) while that snapshot's stamp is the head, as after a
clean close or a flush; when it is behind the head (a tail replayed after a crash) with the tail's
moves laid over it (``overlaid.Overlaid``: the rows the tail touched answer for themselves, the
snapshot for the rest); only when no snapshot is reachable does it wait ``READ_WAIT_SECONDS`` for
the build, then refuse with ``ProjectionBehindError`` naming the stamp the build starts from and
the committed generation (DOORS.md 11.4). Either way the first door on a brain answers in bounded time whatever its size. A
store of at most ``INLINE_ROWS`` rows is built inside the read: that is bounded too.

A projection the query doors read lives behind this one interface: :meth:`held` for a consistent
read, :meth:`record` and :meth:`advance` to follow the commits. :class:`ProjectionFollower` keeps the
postings, words and order columns; :class:`VectorFollower` the vector index, the same way, with its
own snapshot and the graph caught up off the commit path. Both take the brain's state lock (an
``RLock``), so a read holding both sees them at one generation.
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from collections.abc import Iterator
from concurrent.futures import Future
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

from brainy.contract import refusals as R
from brainy.index import chain
from brainy.index import vector_format as VF
from brainy.index import vector_matrix as VM
from brainy.index import vector_partitions as VP
from brainy.index import vectors as V
from brainy.index.overlaid import Overlaid
from brainy.index.projections import Damaged, InPlace, Projections, encode_snapshot, newest_snapshot, snapshot_name
from brainy.index.snapshot import Followed
from brainy.index.vectors import VectorIndex
from brainy.store.pending import Pending
from brainy.store.workers import LongLived, behind_the_requests, waited_for

log = logging.getLogger("brainy.engine")

Move = tuple[str, dict[str, Any] | None, dict[str, Any] | None]  # ("e" or "r", before, after)

READ_WAIT_SECONDS = 0.1  # how long a served read waits for a background build before it refuses (on the loop)
# How long a served write's answer waits, off the loop, for a build its commit started or found in flight: the
# rows a writer acknowledged are its own, so a read after the answer finds them built (DOORS 11:
# ProjectionBehindError is for a reader behind a writer in another process, or a cold open)
ACK_WAIT_SECONDS = 30.0
INLINE_ROWS = 1_000  # a served read builds a store this small itself (about 0.1 ms a row from the rows)
# How long a background build waits for the first read in place to finish before it starts. The build holds
# the interpreter lock most of the time and its allocations trigger full collections (up to 98 ms each at a
# million rows): started beside the first door, it made an ordered find at 1M take 245 ms instead of ~80, and
# a first vector find at 1M after a crash with a cold page cache (300-600 ms) 450-960 ms instead of 330-500.
FIRST_READ_GRACE_SECONDS = 1.0

# The graph's catch-up runs at this nice value (Linux: a thread's own, so the rest of the process keeps its own):
# HNSW insertion costs 100-1,700 us a vector on one core (perf/bench_ingest.py), far more than a commit of it,
# and at the default priority it took a third of the core a durable ingest ran on. Searches scan the tail
# exactly meanwhile, so the graph can wait for the core's idle time. At 10 it still took a tenth of a busy core
# (6 us of a MessagePack ingest's 34 a row); at 19, the lowest, about a sixtieth (perf/bench_ingest.py: 30.8k ->
# 37.1k rows a second beside the rest of that day's changes), and all of the core's idle time still. At 19 it
# still took half of what the flush (maintenance, at 19 too) could have had: over a 100,000-row burst the graph
# (150 us a row) and the partitioned copies (27) stood level with the flush (25), whose pace the writes wait for
# once the memtable is full. So both run behind the flush as well (SCHED_IDLE, ``behind_the_requests``): that
# burst went from 18.9-19.2k to 25.7-27.4k rows a second, the searches scanning exactly a while longer.
CATCH_UP_NICE = 19
# A flush that freezes a base this large leaves its writing to a thread of its own (the base's vectors, graph and
# quantised copy): at a million slots that is 3.2 GB and its fsync, and a flush that wrote it held the next flush
# back for as long, the writes filling the memtable to its bound meanwhile (perf/bench_vector_cold.py's 1M ingest,
# in process: a commit that waited the full 30 s, 288 s in all; with the base behind, 161-165 s and no wait).
BASE_BEHIND_SLOTS = VF.AHEAD_SLOTS

# Every background build of the process runs on these two long-lived threads (brainy/store/workers.py says
# why not a thread per build).
_builders = LongLived(2, "brainy-projections-build")


def _apply(proj: Projections, moves: list[Move]) -> None:
    proj.apply_moves(moves)


class ProjectionFollower:
    """Keeps the query projections (postings, words, order columns, the id map) at the durable head."""

    name = "projections"
    suffix = chain.BASE_SUFFIX
    suffixes: tuple[str, ...] = (suffix, chain.DELTA_SUFFIX)  # every suffix its snapshot files are written under
    keeps_delta = True  # whether the moves after the chain's stamp are kept for the next delta (chain.py)

    def __init__(self, brain: Followed, lock: threading.Lock) -> None:
        # weakly: the brain holds its followers, and a strong link back would make every closed brain a cycle
        # that only a full collection frees (with all it held), long after the pool dropped it
        self._brain: Followed = weakref.proxy(brain)
        self._lock = lock  # the brain's state lock: the durable head and the projections move together
        self._proj: Projections | None = None
        # each commit's moves, put as it is applied (under the commit lock) and taken once it is durable (under
        # the state lock): neither lock excludes the other, so they are held behind a lock of their own (pending.py)
        self._moves: Pending[list[Move]] = Pending()
        self.built_from: str | None = None  # "rows" or "snapshot at G", once built
        self.census: tuple[int, dict[str, Any]] | None = None  # the counts door's answer at one generation
        self.background = False  # a served handle: reads never build; warm() builds off the read path
        self._building: Future[None] | None = None
        self._guard = threading.Lock()  # the build in flight's bookkeeping: never the state lock a read would wait on
        self._built = threading.Event()
        self._build_floor: int | None = None  # the generation a build in flight starts at or above
        self._starts_at = 0  # the stamp that build starts from (the refusal names it)
        self._in_place: InPlace | chain.Layered | None = None  # the newest chain, mapped, read until the build lands
        self._overlay: Overlaid | None = None  # that snapshot with the moves after its stamp laid over it
        self._damaged = False  # the chain on disk is damaged: not read in place again, and its next link a base
        self._first_read = threading.Event()  # set once the first read in place is answered (or none can be)
        # set by the server's pool for a handle it serves: the first read ends with the first door, which the pool
        # reports (first_door_done), not as the door lets go of the projections (a find then reads its page's rows)
        self.door_ends_first_read = False
        # the chain's delta as this writer moves it (read from the newest delta at the first flush), and the entity
        # moves of every commit after its stamp: a flush folds them in and writes it as the chain's next link
        self._delta: chain.Delta | None = None
        self._unsaved: Pending[list[Move]] = Pending()  # put by the commits, dropped by a flush: as ``_moves``
        self._linking = threading.Lock()  # one link written at a time (a flush, a close, the repair door)

    @property
    def folder(self) -> Path:
        return self._brain.path / "index"

    def adopt(self, moves: dict[int, list[Move]]) -> None:
        """Take over the moves another handle of the same store recorded above the flushed generation."""
        self._moves = Pending(moves)
        if self.keeps_delta:
            self._unsaved = Pending({g: [m for m in ms if m[0] == "e"] for g, ms in moves.items()})

    def moves(self) -> dict[int, list[Move]]:
        """The moves held now, a copy (another handle adopts them)."""
        return self._moves.copy()

    def record(self, generation: int, moves: list[Move]) -> None:
        """The entity and relation moves of one commit, applied once it is durable."""
        self._moves.put(generation, moves)
        if self.keeps_delta:
            self._unsaved.put(generation, [m for m in moves if m[0] == "e"])

    def advance(self, durable: int, flushed: int) -> None:
        """The commit at ``durable`` is acknowledged: move the projections up to it. The caller holds the lock.
        Not built yet on a served handle, the build starts now: the write's answer waits for it (:meth:`until_built`),
        so the reads that follow find it built."""
        proj = self._proj
        if proj is None and self.background and self._building is None and self._wanted(durable):
            self.warm()
        if proj is not None:
            for g, moves in self._moves.take(durable):
                if g > proj.stamp:
                    self._apply_all(proj, [moves])  # a commit's moves in one batch where the index takes them so
                    proj.stamp = g
        else:  # not built yet: keep what a snapshot at or after the flushed generation (or a build in flight) needs
            floor = flushed if self._build_floor is None else min(flushed, self._build_floor)
            self._moves.drop(floor)

    def _wanted(self, durable: int) -> bool:
        """Whether the commits up to ``durable`` are ones a read of this projection would look for."""
        return True

    @property
    def kept(self) -> Any:
        """What this follower keeps built right now, without waiting or building (None: nothing yet): the
        projections, or a vector follower's index."""
        return self._proj

    def held(self) -> AbstractContextManager[Projections]:
        """The projections at the durable head, built on first need, held still for the block (built ones by
        :class:`_HeldBuilt`)."""
        return _HeldBuilt(self) if self._proj is not None else self._held()

    # a damage a block held under the lock may meet, which _refuse_damaged words (None: it passes as raised)
    refused_damage: type[Exception] | None = None

    def _after_read(self, held: Any) -> None:
        """What a read does once its block is done (a vector follower's: its warnings, the catch-up's start)."""

    def _refuse_damaged(self, held: Any, exc: Exception) -> None:
        """Word a damage a held block met (one of ``refused_damage``); with none named, it passes as raised."""
        raise exc

    @contextmanager
    def _held(self) -> Iterator[Projections]:
        if self._proj is None and self.background and self._brain.durable_ledger.n["entitiesAllTiers"] > INLINE_ROWS:
            in_place = self._read_in_place()
            if in_place is None:
                in_place = self._overlaid()  # immutable too, at the head: no lock to hold either
            if in_place is not None:  # immutable, and the head's own: no lock to hold
                self.warm()
                try:
                    with self._refusing_damage():
                        yield in_place  # type: ignore[misc]
                finally:
                    if not self.door_ends_first_read:
                        self._first_read.set()
                return
            self._await_background()
        with self._lock:
            if self._proj is None:
                self._build()
            assert self._proj is not None
            yield self._proj

    @contextmanager
    def _refusing_damage(self) -> Iterator[None]:
        """A read in place that met a damaged page refuses by name; the snapshot is never read in place again,
        and the build (already running) finds the damage too and builds from the rows, saying why."""
        try:
            yield
        except Damaged as exc:
            self._in_place, self._overlay, self._damaged = None, None, True
            raise self._behind(f"the {self.name} snapshot", "they are", exc) from None

    def _behind(self, what: str, rebuilt: str, exc: Exception) -> R.ProjectionBehindError:
        """The refusal of a read that met damage in ``what`` (nothing was answered from it): rebuilt from the rows."""
        brain = self._brain
        return R.ProjectionBehindError(
            f"{what} of brain {brain.name!r} is damaged ({exc}); {rebuilt} being rebuilt from the rows; retry shortly",
            projection=self.name,
            stamp=0,
            committed=brain.head,
        )

    def _read_in_place(self) -> InPlace | chain.Layered | None:
        """The newest chain read in place (its delta laid over its base), while its stamp is the head (nothing to
        catch up); else None. One the moves this handle holds can bring to the head is mapped too, for
        :meth:`_overlaid`."""
        head, found = self._brain.head, self._in_place
        if found is None and not self._damaged:
            newest = chain.newest(self.folder)
            if newest is None or not self._reachable(newest.stamp):
                return None
            try:
                found = chain.mapped(newest)
            except (OSError, ValueError):
                return None  # the build reads it again, and says why it could not
            self._in_place = found
        return found if found.stamp == head else None

    def _overlaid(self) -> Overlaid | None:
        """The newest snapshot read in place with the moves after its stamp laid over it, at the head, when
        the moves this handle holds reach from its stamp to the head; else None.

        Taken without the lock: an overlay is never moved once made (a read holds it still, at its stamp),
        and the moves above the flushed generation are kept, unchanged, until the build lands (it takes them:
        the overlay is then not needed), so a read after a commit lays the new moves over the last overlay, in a
        copy (what it costs is the tail's)."""
        head, over = self._brain.head, self._overlay
        if over is None:
            self._read_in_place()  # maps the newest snapshot, whatever its stamp
            base = self._in_place
            if base is None or not self._reachable(base.stamp):
                return None
            over = Overlaid(base)
        if over.stamp != head:
            tail = self._moves.between(over.stamp, head) if over.stamp < head else None
            if tail is None:
                return None  # the build landed meanwhile (it took the moves), or moved past this overlay
            over = over.moved(tail, head)
            if self._proj is not None:
                return None
            self._overlay = over
        return over

    def warm(self) -> None:
        """Build the projections on a thread of their own, unless they are built or being built."""
        with self._guard:
            if self._proj is not None or self._building is not None:
                return
            self._build_floor = self._brain.flushed
            self._building = _builders().submit(self._build_off_lock)

    @property
    def building(self) -> bool:
        """Whether a build is in flight with nothing built yet: what :meth:`until_built` waits for."""
        return self._proj is None and self._building is not None

    def until_built(self, seconds: float) -> None:
        """Wait, at most ``seconds``, for a build in flight (one a commit started, or the admission's): called off the
        event loop before a write answers, never holding the state lock the build publishes under."""
        if self.building:
            self._first_read.set()  # a write waits for it: the build starts now, not after a read's grace
            self._built.wait(seconds)

    def first_door_done(self) -> None:
        """The handle's first door has answered (the pool says so, for a handle whose ``door_ends_first_read``
        it set): the work held back for the first read may start."""
        self._first_read.set()

    def settle(self) -> None:
        """Wait for a background build in flight (a flush persists what it built, a close lets it finish)."""
        building = self._building
        if building is not None:
            self._first_read.set()  # whoever waits for the build wants it now
            building.result()  # _build_off_lock catches what a build raises

    def _await_background(self) -> None:
        self._first_read.set()  # nothing to read in place: this read waits for the build, so it starts now
        self.warm()
        if not self._built.wait(READ_WAIT_SECONDS):
            brain = self._brain
            raise R.ProjectionBehindError(
                f"the {self.name} of brain {brain.name!r} are being built (from generation {self._starts_at} "
                f"to {brain.head}); retry shortly",
                projection=self.name,
                stamp=self._starts_at,
                committed=brain.head,
            )

    def _build_off_lock(self) -> None:
        try:
            if self._brain.durable_ledger.n["entitiesAllTiers"] > INLINE_ROWS:  # else no read is in place to wait for
                self._first_read.wait(FIRST_READ_GRACE_SECONDS)
            self._build()
        except Exception:  # the next read (or flush) starts another; the log says why this one failed
            log.exception("brain %s: building the %s failed", self._brain.name, self.name)
        finally:
            with self._guard:
                self._building, self._build_floor = None, None

    def _build(self) -> None:
        """Build from the newest reachable snapshot (or the rows) and publish at the head. Unless the caller
        holds the lock (an in-process read), the O(store) part runs unlocked: the catch-up to the head and
        the publication take it."""
        brain = self._brain
        started, head = time.monotonic(), brain.head
        proj, how = self._persisted(), "rows"
        if proj is not None:
            how = f"snapshot at {proj.stamp}"
            self._starts_at = proj.stamp
            proj = self._caught_up(proj)
        else:
            proj = self._from_rows(head)
        with self._lock:
            if self._proj is not None:  # a read built it meanwhile: the moves ours needed are gone
                return
            head = brain.head
            # taken, never replaced by a filtered copy: a commit puts its moves meanwhile (it holds no state lock)
            self._apply_all(proj, [moves for g, moves in self._moves.take(head) if g > proj.stamp])
            proj.stamp = max(proj.stamp, head)
            self._proj = proj
            self.built_from = how
            self._in_place = self._overlay = None
            self._built.set()
        log.info(
            "brain %s: %s at generation %d from %s (%d rows) in %.0f ms",
            brain.name,
            self.name,
            head,
            how,
            len(proj),
            (time.monotonic() - started) * 1000,
        )

    def _apply_all(self, proj: Any, commits: list[list[Move]]) -> None:
        """The moves of these commits, in order (the vector index takes them in one batch)."""
        for moves in commits:
            _apply(proj, moves)

    def _caught_up(self, proj: Any) -> Any:
        """A persisted snapshot brought to the flushed generation, if it is older (only the vector index can be)."""
        return proj

    def _from_rows(self, head: int) -> Any:
        return Projections.build(self._brain.at(head).entities(), head)

    def _persisted(self) -> Projections | None:
        """The newest persisted chain decoded whole, if the moves this handle holds can bring it to the head.

        One the log tail cannot reach (older than the flushed generation, or newer than this handle's
        head) or that does not check out is left alone: the projections are rebuilt from the rows and the
        warnings say why.
        """
        found = chain.newest(self.folder)
        if found is None:
            return None
        name, brain = (found.delta or found.base)[1].name, self._brain
        if not self._reachable(found.stamp):
            brain.warnings.append(
                {
                    "code": f"{self.name}-rebuilt",
                    "message": f"snapshot {name} is outside generations {brain.flushed}..{brain.head}",
                }
            )
            return None
        try:
            proj = chain.load(found)
        except (OSError, ValueError) as exc:
            brain.warnings.append({"code": f"{self.name}-rebuilt", "message": f"snapshot {name}: {exc}"})
            self._damaged = True  # the next link is a base, written whole over the damaged chain
            return None
        return proj if proj.stamp == found.stamp else None

    def _reachable(self, stamp: int) -> bool:
        """Whether the moves this handle holds bring a snapshot at ``stamp`` to the head."""
        return self._brain.flushed <= stamp <= self._brain.head

    def persist(self, build: bool = False) -> None:
        """Write the chain's next link, stamped with the generation it covers: a delta of what the commits since
        the base touched, or a base when one is due (none reachable, or the delta past its share of the base).
        ``build`` (a flush, a close): build the projections first when a base is due and nothing has needed
        them yet, so the next open finds a snapshot.

        A base's lock is held only for a copy (commits wait on it to move the projections); the encode, the
        O(store) part, runs on the copy unlocked."""
        self.settle()
        with self._linking:
            if self._delta_written():
                return
            if self._proj is None:
                if not build:
                    return
                self._build_as_the_one_in_flight()
            with self._lock:
                if self._proj is None:
                    return
                frozen = self._proj.copy()
                self._unsaved.drop(frozen.stamp)
            self._delta = chain.write_base(
                self.folder,
                frozen.stamp,
                encode_snapshot(frozen, chain.owned(self.folder)),
                replace=self._damaged,
                rows=len(frozen),
            )

    def _delta_written(self) -> bool:
        """Fold the commits since the chain's stamp into its delta and write it; False when a base is due instead."""
        brain, delta = self._brain, self._delta
        if delta is None:
            found = chain.newest(self.folder)
            if found is not None and found.stamp == brain.head and self._reachable(found.stamp) and not self._damaged:
                return True  # the chain is at the head already: nothing to write
            delta = self._chain_delta(found)
            if delta is None:
                return False
        with self._lock:
            head = brain.head
            commits = self._unsaved.between(delta.stamp, head)
            if commits is None:
                self._delta = None  # every commit records its moves (an empty list too): a gap needs a base
                return False
        self._delta = None  # until it is written: a failure below leaves a base due, never a delta missing moves
        if not commits:
            self._delta = delta
            return True
        if delta.past_its_share(commits):
            return False
        delta.apply_all(commits)
        delta.stamp = head
        data = delta.encode()
        if delta.due_a_base(len(data)):
            return False
        chain.write_delta(self.folder, head, data)
        self._unsaved.drop(head)
        self._delta = delta
        return True

    def prepare_flush(self) -> None:
        """Before a flush moves the flushed generation on: make sure the chain can take its next link. Its
        delta is read (it costs what changed since the base) when the moves this handle holds reach the
        chain; else the projections are built now, while the last snapshot is still reachable from them."""
        self.settle()
        with self._linking:
            if self._proj is not None or self._delta is not None:
                return
            self._delta = self._chain_delta(chain.newest(self.folder))
            if self._delta is None:
                self._build_as_the_one_in_flight()  # it reads the chain again, and says why it could not

    def _chain_delta(self, found: chain.Found | None) -> chain.Delta | None:
        """The delta the newest chain ends with, when the moves this handle holds reach it and it reads; else None
        (none reachable, an older format's base, damage): the next link is then a base."""
        if found is None or self._damaged or not self._reachable(found.stamp):
            return None
        try:
            return chain.Delta.read(found)
        except (OSError, ValueError):
            return None

    def _build_as_the_one_in_flight(self) -> None:
        """Build here, on the caller's thread, registered as the build in flight: a read's :meth:`warm` meanwhile
        waits for this one rather than starting a second (after a crash the recovery flush and the first read
        would otherwise each decode the whole snapshot, and the read's door would wait on both for the GIL)."""
        with self._guard:
            mine = self._proj is None and self._building is None
            if mine:
                self._build_floor = self._brain.flushed
                self._building = Future()
        if not mine:
            self.settle()
            if self._proj is not None:
                return
            self._build()  # the one in flight failed (logged): once more here, raising what it raises
            return
        try:
            self._build()
        finally:
            with self._guard:
                building, self._building, self._build_floor = self._building, None, None
            assert isinstance(building, Future)
            building.set_result(None)


class VectorFollower(ProjectionFollower):
    """Keeps the vector index at the durable head, as :class:`ProjectionFollower` keeps the postings.

    A commit's moves cost a copy of each vector into the index; the graph, whose insertion is the
    expensive part, is caught up by a background thread once the tail passes ``TAIL_MAX``, holding
    the index's graph lock and the brain's lock only to read the tail and to publish the graph.
    """

    name = "vectors"
    suffix = VF.SUFFIX
    suffixes = (VF.SUFFIX, VF.DELTA_SUFFIX)  # a base and the deltas after it
    keeps_delta = False  # its chain's deltas are the index's own (vectors.py)

    def __init__(self, brain: Followed, lock: threading.RLock) -> None:
        super().__init__(brain, lock)
        self._catching_up = False
        self._catching_thread: int | None = None  # the catch-up's native thread id while one runs
        # held by the catch-up while it reads the snapshot files (the slots' check, the graph's load, the tail's
        # copy), and taken by the close (release) after it set _closing: a catch-up not yet reading them never does
        self._reading = threading.Lock()
        self._closing = False
        self._looked = 0  # the generation up to which commits were looked at for a vector (_wanted)
        self._ahead: VF.Ahead | None = None  # the chain's large files, read from the open on (vector_format.py)
        self._copying: threading.Thread | None = None  # a served handle's partitioned copy being written behind
        self._basing: threading.Thread | None = None  # a flush's large base being written behind
        self._empty_at: int | None = None  # a served handle's generation at which it held no vectored entity

    def check_ahead(self, dense_ints: int, opened: threading.Event | None = None) -> None:
        """At the open: begin reading the chain's large files on another thread while the log is replayed
        (``dense_ints``: the MANIFEST's next dense int; ``opened``: set once the open's own reads are done, which
        reading ahead of files not in the page cache waits for)."""
        self._drop_ahead()  # an open that read the MANIFEST again
        self._ahead = VF.check_ahead(self.folder, dense_ints, opened)

    def _drop_ahead(self) -> None:
        """Call off a check not begun; one under way ends on its own, and its map goes with it."""
        if self._ahead is not None:
            self._ahead.cancel()
            self._ahead = None

    def record(self, generation: int, moves: list[Move]) -> None:
        """Only entities carry the vectors the index holds (a relation's is not searched)."""
        super().record(generation, [m for m in moves if m[0] == "e"])

    def _read_in_place(self) -> None:
        return None  # the index's snapshot is one matrix: it is loaded whole, off the read path

    def _overlaid(self) -> None:
        return None

    def _from_rows(self, head: int) -> VectorIndex:
        self._drop_ahead()  # an index from the rows reads no copy
        with self._lock:  # a store whose ledger counts no vectored entity has an empty index: no row read
            if self._brain.durable_ledger.n["vectoredEntities"] == 0:
                empty = VectorIndex()
                empty.stamp = self._brain.head
                return empty
        return VectorIndex.build(self._brain.at(head).entities(vectors=True), head)

    def _persisted(self) -> VectorIndex | None:
        """The index the newest base and its deltas hold (docs/store-format.md, "Vector index snapshots"): its
        header and dense ints checked, its vectors read in place (each chunk checked as a read first touches
        it), its graph left to :meth:`catch_up` (searches scan exactly until it is in). None once a read found
        the chain damaged."""
        if self._damaged:
            return None
        brain = self._brain
        tail = sum(len(moves) for moves in self._moves.values())  # each move writes a slot at most
        ahead, self._ahead = self._ahead, None
        index, why = V.read_chain(
            self.folder, brain.head, graph_later=True, tail=tail, dense_ints=brain.next_dense, ahead=ahead
        )
        brain.warnings.extend({"code": "vectors-rebuilt", "message": m} for m in why)
        return index

    def _apply_all(self, proj: Any, commits: list[list[Move]]) -> None:
        proj.apply_all([(before, after) for moves in commits for _, before, after in moves])

    def _caught_up(self, index: VectorIndex) -> VectorIndex:
        brain = self._brain
        if not self._moves.reaches(index.stamp, brain.head):
            # the moves this handle holds start at the flushed generation: the rows bring an older index up
            index.rows_caught_up(brain.at(brain.head).entities(vectors=True), brain.head)
        return index

    def admitted(self) -> None:
        """The server's pool admits this handle. When the store holds no vectored entity, its index is empty at the
        head: the first vectored commits after it, while their moves are all held, start the index from nothing
        (:meth:`advance`) rather than a build behind them that reads their rows back (the first ``addMany`` of
        1,000 vectored rows to a new brain answered in 38-79 ms where the others took 15-28, waiting for that build)."""
        brain = self._brain
        with self._lock:
            ledger = brain.durable_ledger
            empty = ledger.n["vectoredEntities"] == 0 and ledger.generation == brain.head
            self._empty_at = brain.head if empty and self._proj is None else None

    def advance(self, durable: int, flushed: int) -> None:
        empty_at = self._empty_at
        if empty_at is not None and (self._proj is not None or self._building is not None):
            self._empty_at = empty_at = None  # built another way (a read's, a flush's): the moves go into that
        if empty_at is not None and self._wanted(durable):
            self._empty_at = None  # once: the moves after it are taken as they are applied
            if self._moves.reaches(empty_at, durable):  # none dropped since (a build from the rows would need them)
                index = VectorIndex()
                index.stamp = empty_at
                self._proj, self.built_from = index, "rows"
                self._built.set()
            else:
                self.warm()
        super().advance(durable, flushed)  # applies the moves after the stamp
        if self._proj is not None:
            self._maybe_catch_up(self._proj)

    def _wanted(self, durable: int) -> bool:
        """Only a commit that moved a vector starts the index's build: a brain written without one keeps no index
        in memory until a search asks for it."""
        looked, self._looked = self._looked, durable  # each commit's moves are looked at once
        if durable <= looked:
            return False
        return any(
            (before is not None and before.get("vector")) or (after is not None and after.get("vector"))
            for moves in self._moves.span(looked, durable)  # not a copy of every move held: they grow to the flush
            for _, before, after in moves
        )

    refused_damage = VM.Damaged

    @contextmanager
    def _held(self) -> Iterator[VectorIndex]:  # type: ignore[override]
        if (
            self._proj is None
            and self.background
            and self._chain_reachable()
            and self._lock.acquire(timeout=READ_WAIT_SECONDS)
        ):  # never longer on a lock another thread holds
            try:  # bounded: the header and dense ints are checked, the vectors read in place, the graph left
                if self._proj is None:  # to the catch-up
                    self._build()
            finally:
                self._lock.release()
        index = None
        try:
            with super()._held() as index:
                yield index
            self._after_read(index)
        except VM.Damaged as exc:  # a chunk of the mapped slots failed its check: nothing was answered from it
            self._refuse_damaged(index, exc)

    def _after_read(self, index: VectorIndex) -> None:
        if index.noted:
            self._brain.warnings.extend({"code": "vectors-rebuilt", "message": m} for m in index.notes())
        if not self.door_ends_first_read and not self._first_read.is_set():  # set once: setting it takes a lock
            self._first_read.set()
        self._maybe_catch_up(index)  # after the read: the graph's check and load never run beside a first search

    def _refuse_damaged(self, index: VectorIndex | None, exc: Exception) -> None:
        """A read met a chunk of the mapped slots that failed its check (nothing was answered from it): the index
        dropped, ProjectionBehindError raised."""
        self._discard(index, exc)
        raise self._behind("the vector index snapshot", "it is", exc) from None

    def _discard(self, index: VectorIndex | None, exc: Exception) -> None:
        """Drop an index whose mapped slots failed a check, never to read its snapshot chain again in this handle:
        the next build (started here for a served handle, else by the next read) is from the rows."""
        with self._lock:
            if index is not None and self._proj is index:
                self._proj, self.built_from = None, None
                self._built.clear()
            if not self._damaged:
                self._damaged = True
                self._brain.warnings.append(
                    {"code": "vectors-rebuilt", "message": f"{exc}; the index is rebuilt from the rows"}
                )
        if self.background:
            self.warm()

    def release(self) -> None:
        """At the handle's close: let the index and the snapshot files it reads in place go. A catch-up reading
        them is waited for (its check of the slots and load of the graph: seconds at a million slots), one not yet
        reading them never does; the graph it grows from copies is not waited for. Once closed, the handle reads
        none of the store's files, which are another handle's to replace, or the user's to copy or damage (a file
        cut short under a map of it kills the process). A partitioned copy being written behind is waited for too:
        the files of a closed handle are another handle's to write."""
        self._closing = True
        self._first_read.set()  # a catch-up waiting for the first read wakes, to end
        catching = self._catching_thread
        if catching is not None:
            waited_for(catching)
        with self._reading:  # a catch-up reading the files ends that first
            pass
        self._wait_for_base()
        copying = self._copying
        if copying is not None:
            if copying.native_id is not None:
                waited_for(copying.native_id)
            copying.join()
        with self._lock:
            self._proj = None
            self._drop_ahead()

    def _chain_reachable(self) -> bool:
        """Whether the newest link of the snapshot chain is one the moves this handle holds bring to the head
        (never once a read found it damaged)."""
        if self._damaged or not self.folder.is_dir():
            return False
        found = [f for f in (newest_snapshot(self.folder, s) for s in self.suffixes) if f is not None]
        return bool(found) and self._reachable(max(stamp for stamp, _ in found))

    def first_door_done(self) -> None:
        super().first_door_done()
        index = self._proj
        if index is not None:
            self._maybe_catch_up(index)  # a snapshot's graph waited for this

    def _maybe_catch_up(self, index: VectorIndex) -> None:
        """Start the catch-up when the tail is long, most slots are dead, or a snapshot's graph waits to be taken.
        Only the first read of the handle (once it has answered) starts the taking of a snapshot's graph: a commit
        before it does not (a tail past ``TAIL_MAX`` still does, and its thread waits for that read first)."""
        if self._catching_up:  # every read asks: once the thread under way ends, the next read asks again
            return
        waiting = index.graph_waiting and self._first_read.is_set()
        if index.pending >= V.TAIL_MAX or index.wasteful or waiting:
            with self._lock:  # two reads answered at once start one thread
                if self._catching_up:
                    return
                self._catching_up = True
            threading.Thread(target=self._catch_up_behind, name="brainy-vectors", daemon=True).start()

    def _catch_up_behind(self) -> None:
        """:meth:`catch_up` on its own thread, that thread behind the requests and the flush (``CATCH_UP_NICE``)."""
        self._catching_thread = threading.get_native_id()
        behind_the_requests(CATCH_UP_NICE, idle=True)
        try:
            self.catch_up()
        finally:
            self._catching_thread = None

    def catch_up(self) -> None:
        """Put the index's tail in its graph, after dropping its dead slots when most are dead (the graph is then
        built again, as one long tail); first, the graph a snapshot held is checked and deserialised. Searches
        meanwhile scan exactly; commits never wait on it. It starts once the handle's first read has answered
        (or after ``FIRST_READ_GRACE_SECONDS``): beside that read, its check of the slots and faiss's load of the
        graph (1.5 GB copied at a million slots) took the memory bandwidth and cores the read's first checked
        scan needs (it made the first search at 1M take 600-800 ms)."""
        index = self._proj
        catching = self._catching_thread
        if catching is not None and catching != threading.get_native_id():  # called beside the thread: waits for it
            waited_for(catching)
        try:
            if index is None:
                return
            self._first_read.wait(FIRST_READ_GRACE_SECONDS)
            with index.graph_lock:
                with self._reading:  # the snapshot files are read in here, never once the handle is closing
                    if self._closing:
                        return
                    why = index.take_graph()
                    with self._lock:
                        if self._closing:
                            return
                        index.graph_taken()
                        if why is not None:
                            self._brain.warnings.append({"code": "vectors-rebuilt", "message": why})
                        if index.wasteful:
                            index.compact()
                        start, vectors = index.tail()
                index.grow_graph(start, vectors)  # from copies: a close does not wait for it
                with self._lock:
                    index.graph_grown(start + len(vectors))
        except VM.Damaged as exc:  # a chunk no read had touched yet: the reads refuse from now on, until rebuilt
            self._discard(index, exc)
        finally:
            self._catching_up = False

    def persist(self, at_flush: bool = False) -> None:
        """Write the next link of the index's snapshot chain: a delta of the slots written and killed since the
        last (copied under the lock, encoded outside it), or a base when one is due (its dense ints copied under the
        lock, its graph serialised under the index's graph lock only). A flush loads the index first if nothing has needed it since the open.

        A flush (``at_flush``) never waits for the graph lock: a catch-up holds it while it inserts the tail, at the
        lowest priority, for seconds on a busy core, and a flush waiting behind it let the memtable and every row
        the followers hold grow for as long (a 100,000-row burst: 3.4 s, the whole burst in memory). With the lock
        held elsewhere, a base due only because the graph grew waits for a later link, and one due otherwise is
        written without the graph, the next base taking it. Any other persist (a close's) waits for the lock.

        A flush's base of ``BASE_BEHIND_SLOTS`` or more is written on a thread of its own (:meth:`_base_behind`);
        the flushes meanwhile write no link, and any other persist waits for it first."""
        self.settle()
        if self._basing is not None:
            if at_flush:
                return  # a base is written behind: the next flush after it writes this one's link
            self._wait_for_base()
        for _ in range(2):  # once more when the index was read from a damaged chain: from the rows, then
            if self._proj is None and at_flush:
                self._build()
            index = self._proj
            if index is None:
                return
            catching = self._catching_thread
            if not at_flush and catching is not None:  # a close waits for the catch-up
                waited_for(catching)
            graph_free = index.graph_lock.acquire(blocking=not at_flush)  # taken before the brain's, as a catch-up
            try:
                with self._lock:
                    kind = index.next_link(graph_free)
                    frozen = None if kind is None else index.freeze(base=kind == "base")
                    owed = None if kind == "base" else index.owed_copies()
                if frozen is not None and frozen.is_base and graph_free:
                    index.graph_for(frozen)
            finally:
                if graph_free:
                    index.graph_lock.release()
            store = VF.store_tag(self.folder.parent) or VF.NO_STORE
            if frozen is not None:
                frozen.store = store
                if at_flush and frozen.is_base and len(frozen.dense) >= BASE_BEHIND_SLOTS:
                    with self._lock:
                        self._basing = threading.Thread(
                            target=self._base_behind,
                            args=(index, frozen, store),
                            name="brainy-vectors-base",
                            daemon=True,
                        )
                        self._basing.start()
                    return
            try:
                self._write(index, frozen, owed, store)
            except VM.Damaged as exc:  # a chunk of the base failed its check: the index is not trusted
                self._discard(index, exc)
                self.settle()
                continue
            return

    def _write(self, index: VectorIndex, frozen: VF.Frozen | None, owed: VF.Owed | None, store: bytes) -> None:
        """Write a frozen link (a base never carries slots that failed their check), then the base's owed copies
        (a base's partitioned copy, from the same slots, after the base's own); Damaged when a chunk of the base
        fails its check."""
        if frozen is not None:
            VF.write_link(self.folder, frozen, frozen.parts())
            if frozen.is_base:
                owed = VF.Owed(frozen.stamp, len(frozen.dense), frozen.vectors, frozen.dense, False, True)
        if owed is not None:
            self._write_copies(index, owed, store)

    def _base_behind(self, index: VectorIndex, frozen: VF.Frozen, store: bytes) -> None:
        """:meth:`_write` of a large base on its own thread, behind the requests as the flush is: the flush that
        froze it goes on, and the ones after it skip their links until it is written (their rows are in the
        tables; a crash meanwhile leaves the chain behind the flushed generation, and the next open builds the
        index from the rows, as after a crash between a flush's swap and its link). What goes wrong is logged,
        and the next link is a whole base."""
        behind_the_requests(CATCH_UP_NICE)
        try:
            self._write(index, frozen, None, store)
        except VM.Damaged as exc:
            self._discard(index, exc)
        except Exception:  # noqa: BLE001 - a thread's failure is logged, never lost with it
            log.exception("brain %r: the vector base at %d was not written", self._brain.name, frozen.stamp)
            with self._lock:
                index.link = None  # the chain on disk ends before it: the next link is a base
        finally:
            with self._lock:
                self._basing = None

    def _wait_for_base(self) -> None:
        """Wait for a base written behind (a close's link follows it; a closed handle's files are the next's)."""
        basing = self._basing
        if basing is not None:
            if basing.native_id is not None:
                waited_for(basing.native_id)
            basing.join()

    def _write_copies(self, index: VectorIndex, owed: VF.Owed, store: bytes) -> None:
        """Write the base's owed copies (docs/store-format.md, "Vector index snapshots") from its slots, each
        chunk checked, read them back, and give them to the index; Damaged when a chunk fails its check."""
        parts = owed.vectors.contiguous(owed.slots)
        if owed.quantised:
            codes = VF.write_quantised(self.folder, owed.stamp, parts, store)
            with self._lock:
                index.quantised_written(owed.stamp, codes)
        if not owed.partitioned:
            return
        if not (self.background and VP.wanted(owed.slots, owed.dense)):
            self._write_partitioned(index, owed, parts, store)
            return
        # a served handle's flush does not wait for it: at a million slots its k-means, lists and write took 35-77 s,
        # every later flush waiting behind them (the searches answer from the graph or the exact scan meanwhile)
        with self._lock:
            if self._copying is not None:
                return  # one at a time: the copy stays owed, and the flush after this one's end asks again
            self._copying = threading.Thread(
                target=self._partition_behind, args=(index, owed, store), name="brainy-vectors-copy", daemon=True
            )
            self._copying.start()

    def _write_partitioned(self, index: VectorIndex, owed: VF.Owed, parts: list[Any], store: bytes) -> None:
        """Write the base's partitioned copy, read it back and give it to the index, if the base is still its."""
        written = VP.write_partitioned(self.folder, owed.stamp, owed.slots, parts, owed.dense, store)
        partitions = VP.read_partitioned(self.folder, owed.stamp, owed.slots, store)[0] if written else None
        with self._lock:
            index.partition_written(owed.stamp, partitions)
            current = self._proj is index and index.link is not None and index.link.base == owed.stamp
        if written and not current:  # a newer base (or a rebuild) came meanwhile and removed the older copies
            (self.folder / snapshot_name(owed.stamp, VF.PARTITIONED_SUFFIX)).unlink(missing_ok=True)

    def _partition_behind(self, index: VectorIndex, owed: VF.Owed, store: bytes) -> None:
        """:meth:`_write_partitioned` on its own thread, behind the requests and the flush; what goes wrong is
        logged and the copy stays owed (a damaged chunk of the base: the index is not trusted, as anywhere)."""
        behind_the_requests(CATCH_UP_NICE, idle=True)
        try:
            self._write_partitioned(index, owed, owed.vectors.contiguous(owed.slots), store)
        except VM.Damaged as exc:
            self._discard(index, exc)
        except Exception:  # noqa: BLE001 - a thread's failure is logged, never lost with it
            log.exception(
                "brain %r: the partitioned copy of the vector base at %d was not written", self._brain.name, owed.stamp
            )
        finally:
            with self._lock:
                self._copying = None


class _HeldBuilt:
    """:meth:`ProjectionFollower.held` of what is already built, as a class: the generators it replaces (for a vector
    follower, its hold around the projections') cost a served find microseconds for their frames. It is held under
    the follower's lock for the block, as those hold it, then the follower's ``_after_read`` runs; a damage the block
    meets (``refused_damage``) is refused by the follower's ``_refuse_damaged``, as they refuse it; what was dropped
    between the look and the lock is held their way (``_held``: built, or read in place)."""

    __slots__ = ("_follower", "_kept", "_other")

    def __init__(self, follower: ProjectionFollower) -> None:
        self._follower = follower
        self._kept: Any = None
        self._other: AbstractContextManager[Any] | None = None

    def __enter__(self) -> Any:
        follower = self._follower
        follower._lock.acquire()
        held = follower._proj
        if held is None:
            follower._lock.release()
            self._other = follower._held()
            return self._other.__enter__()
        self._kept = held
        return held

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: Any) -> bool | None:
        if self._other is not None:
            return self._other.__exit__(kind, exc, tb)
        follower, held = self._follower, self._kept
        follower._lock.release()
        damage = follower.refused_damage
        if kind is None:
            try:
                follower._after_read(held)
            except Exception as raised:
                if damage is None or not isinstance(raised, damage):
                    raise
                follower._refuse_damaged(held, raised)
        elif damage is not None and issubclass(kind, damage):
            assert isinstance(exc, Exception)
            follower._refuse_damaged(held, exc)
        return None
