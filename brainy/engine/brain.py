"""The brain handle: one store directory opened as its writer, or attached read-only.

This module opens and closes a store (the lease, the MANIFEST, the tables, the
log replayed past the flushed generation) and answers the doors in process. The
handle owns its parts and hands each the others it works with: the head they
share (brainy/store/head.py), the commit path below the doors
(brainy/store/commit_path.py) and the write doors on it (``commits.py``), the
writer's flush, compaction and sweep (brainy/store/maintenance.py), the
followers (brainy/index/follower.py, behind ``followers.py``); a read runs on a
read snapshot (brainy/index/snapshot.py).
"""

from __future__ import annotations

import itertools
import logging
import os
import threading
import weakref
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from brainy.contract import doors as D
from brainy.contract import refusals as R

# each door family registers its doors when imported
from brainy.doors import (  # noqa: F401  # noqa: F401
    accords,
    aggregates,
    calling,
    importer,
    memory,
    models,
    policy,
    query,
    reads,
    registry,
    similar,
    timetravel,
    traverse,
    vfs,
    writes,
)
from brainy.engine.commits import Writes
from brainy.engine.followers import Followers
from brainy.index import encoded_rows
from brainy.index.aggregate_follower import AggregateFollower
from brainy.index.follower import ACK_WAIT_SECONDS, ProjectionFollower, VectorFollower
from brainy.index.snapshot import Snapshot
from brainy.store import horizons as H
from brainy.store import keys as K
from brainy.store import lease as L
from brainy.store import log as log_
from brainy.store.backup import FileSet, take
from brainy.store.blobs import BlobStore, Swept
from brainy.store.commit_path import CommitPath
from brainy.store.counts import Ledger
from brainy.store.directory import FORMAT, mark_format, read_identity
from brainy.store.files import DocumentUnreadable, read_document
from brainy.store.head import HeadState
from brainy.store.maintenance import COMPACT_AT, FLUSH_BYTES, Maintenance
from brainy.store.sources import Sources
from brainy.store.sstable import Probed, Table

log = logging.getLogger("brainy.engine")
# one serial per handle in the process: what an answer cached per row version is keyed by beside the
# row's key and generation (brainy/index/encoded_rows.py), since two stores may share both
_SERIALS = itertools.count(1)
# the ops of a replayed tail's frames probed together (Brain._replay_probed): their rows held decoded at once,
# a bounded number of them, however long the tail
PROBE_AHEAD_OPS = 8192
# An eviction (close with keep_lease) leaves an unflushed tail smaller than this in the log, already durable, for
# the readmission to replay: 1,000 one-row commits (1.9 MB of memtable) replay in 63 ms, 100 in 3 ms, while the
# flush and its fsyncs cost 30-190 ms a close (measured), which kept the arbiter's serial closes behind a sweep's
# admissions (780 of 1,000 brains resident under a budget for 50, perf/bench_residency.py).
EVICT_TAIL_BYTES = 1 << 20


def _referenced(brain: Brain) -> Callable[[], set[str]]:
    """What a blob sweep of ``brain`` keeps: the blobs its files name at the durable head (``brain`` a weak proxy,
    so the maintenance holding this does not hold the brain)."""
    return lambda: vfs.addresses(brain.at())


def _missing(root: Path, exc: FileNotFoundError) -> R.Refusal:
    """A file the MANIFEST names is not there: the store cannot be served as it stands (a table is named)."""
    gone = Path(exc.filename or "")
    try:
        named = str(gone.relative_to(root))
    except ValueError:
        named = gone.name
    reason = "torn-sstable" if named.startswith("sst/") else "unreadable-generation-stamp"
    return R.StoreUnservableError(f"{named}, which the MANIFEST names, is missing", reason=reason, file=named)


class Brain:
    """A store directory, open. Use :meth:`open` (the writer, or a reader if the lease is held) or
    :meth:`attach` (read-only, frozen at the generation it resolved).

    Every native door of the contract is a method: ``brain.find({...})``, ``brain.get(id,
    includeData=False)``, ``brain.add({...}, caller=...)``. Each is the door's registered function,
    its arguments checked against the contract as every transport's are (:meth:`call`).
    """

    def __init__(self, path: Path, name: str) -> None:
        self.path = path
        self.name = name
        self.serial = next(_SERIALS)
        self.role = "attach"
        self.claim: L.Claim | None = None
        self.warnings: list[dict[str, str]] = []
        self.recovery: dict[str, Any] | None = None
        self._lease: L.Lease | None = None
        self.kept_lease: tuple[L.Claim, L.Lease] | None = None  # what an eviction's close kept
        self._closed = False
        # what the commit path and the maintenance share, and its locks: the followers move under its state lock
        self.state = HeadState()
        self.follower = ProjectionFollower(self, self.state.state_lock)
        # not ``aggregates``: that is a door's name, and every door's name is a method here
        self.aggregate_follower = AggregateFollower(self, self.state.state_lock)
        self.vector_follower = VectorFollower(self, self.state.state_lock)
        self._log_position: log_.Position | None = None  # where the open's read of the log stopped
        self.log_read: log_.Scan | None = None  # what that read cost
        # file content (docs/store-format.md, "Blobs"): read-only until the writer's open claims the lease
        self.blobs = BlobStore(path / "blobs", writable=False)
        followers = self.followers = Followers(self.follower, self.vector_follower, self.aggregate_follower)
        self.commits = CommitPath(self.state, followers)  # the log is the writer's, once its open has read it
        self.maintenance = Maintenance(
            path, self.state, self.commits, followers, self.blobs, _referenced(weakref.proxy(self))
        )
        self.writes = Writes(self, self.commits, self.maintenance)

    # -- opening ---------------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        *,
        force: bool = False,
        name: str | None = None,
        flush_bytes: int = FLUSH_BYTES,
        compact_at: int = COMPACT_AT,
        segment_bytes: int = log_.SEGMENT_ROTATE_BYTES,
        horizons: H.Horizons | None = None,
        reader: Brain | None = None,
        lease: tuple[L.Claim, L.Lease] | None = None,
    ) -> Brain:
        """Open a store read-write, claiming its writer lease.

        When another live process holds the lease, the answer is a read-only
        attach whose ``claim`` says ``BRAINY_WRITER_LOCKED`` and names the
        holder; it never waits. ``force`` takes the lease from a live holder.
        ``reader``, an attach of the same store this process already holds,
        lends what it has read (its memtable, its place in the log) so the open
        reads only what was committed since, unless a flush moved the tables on.
        ``horizons`` (default: a 7-day feed retention, every generation kept) bound the log and the old
        versions this writer keeps (docs/store-format.md, "Horizons").
        ``lease``, what :meth:`close` kept (``keep_lease``), reopens as the writer
        it was without claiming again: an eviction does not end the writer role.
        """
        root = Path(path)
        identity = read_identity(root)
        claim, lease = lease or L.claim(root / "locks", identity["storeId"], force=force)
        if lease is None:
            brain = cls._attach(root, name, reader)
            brain.role, brain.claim = "reader", claim
            brain.warnings.append(
                {"code": "opened-read-only", "message": f"another process holds the writer lease: {claim.holder}"}
            )
            return brain
        try:
            mark_format(root, identity)
        except BaseException:
            lease.abandon()
            raise
        brain = cls(root, name or root.resolve().name)
        brain.role, brain.claim, brain._lease = "writer", claim, lease
        brain.blobs.writable = True
        brain.maintenance.flush_bytes, brain.maintenance.compact_at = flush_bytes, compact_at
        brain.maintenance.horizons = horizons or H.Horizons()
        try:
            brain._load(writer=True, segment_bytes=segment_bytes, reader=reader)
        except BaseException:
            lease.abandon()
            raise
        if claim.claim_path == "stale-after-crash":
            brain.warnings.append(
                {
                    "code": "recovered-after-crash",
                    "message": f"the last writer left no close record; replayed "
                    f"{brain.recovery['replayedGenerations']} generation(s) from the log",
                }
            )
            brain.maintenance.flush_due = brain.recovery["replayedGenerations"] > 0
            brain.maintenance.sweep_due = True
        brain.maintenance.start()
        return brain

    @classmethod
    def attach(cls, path: str | os.PathLike[str], *, name: str | None = None) -> Brain:
        """Open a store read-only: no lock, nothing created or written, no background job.

        Frozen at the generation it resolved; it refuses by name (never repairs)
        a store it cannot serve exactly as it stands.
        """
        root = Path(path)
        read_identity(root)
        return cls._attach(root, name)

    @classmethod
    def _attach(cls, root: Path, name: str | None, reader: Brain | None = None) -> Brain:
        if L.handoff_in_flight(root / "locks"):
            raise R.StoreUnservableError(
                "a writer handoff is in flight; attach again once it settles", reason="writer-handoff-in-flight"
            )
        brain = cls(root, name or root.resolve().name)
        for attempt in range(8):  # a flush or compaction may swap the MANIFEST meanwhile
            try:
                brain._load(writer=False, reader=reader)
                return brain
            except FileNotFoundError as exc:
                if attempt == 7:  # the MANIFEST stood still: a file it names is gone, not swapped
                    raise _missing(root, exc) from None
        raise AssertionError("unreachable")

    def _load(self, writer: bool, segment_bytes: int = log_.SEGMENT_ROTATE_BYTES, reader: Brain | None = None) -> None:
        root = self.path
        identity = read_identity(root)
        self.created_at = int(identity["createdAt"])
        try:
            manifest = read_document(root / "MANIFEST")
            if manifest.get("storeId") != identity["storeId"]:  # whole, but another store's
                raise DocumentUnreadable(root / "MANIFEST", f"it is store {manifest.get('storeId')!r}'s")
            try:
                ledger = Ledger(read_document(root / manifest["ledger"]))
            except DocumentUnreadable as exc:
                # a flush swapped the MANIFEST (and removed the ledger it named) since we read it:
                # not damage, so an attach reads the MANIFEST again, as it does for a swapped table
                if not writer and exc.reason == "missing" and read_document(root / "MANIFEST") != manifest:
                    raise FileNotFoundError(exc.path) from None
                raise
            flushed = int(manifest["generation"])
            if manifest.get("format") != FORMAT or ledger.generation != flushed:
                raise DocumentUnreadable(root / "MANIFEST", "format or ledger generation does not match")
        except (DocumentUnreadable, KeyError, TypeError, ValueError) as exc:
            raise R.StoreUnservableError(
                f"the store's generation stamp does not read: {exc}", reason="unreadable-generation-stamp"
            ) from None
        if writer:
            self._remove_orphans(manifest)
        # on another thread, while the tables open and the log replays (after, if the files are cold)
        opened = threading.Event()
        self.vector_follower.check_ahead(int(manifest["nextDenseInt"]), opened)
        try:
            self._load_rows(root, manifest, ledger, flushed, writer, segment_bytes, reader)
        except FileNotFoundError as exc:
            if not writer:
                raise  # an attach reads the MANIFEST again: a compaction may have swapped it
            raise _missing(root, exc) from None
        finally:
            opened.set()

    def _load_rows(
        self,
        root: Path,
        manifest: dict[str, Any],
        ledger: Ledger,
        flushed: int,
        writer: bool,
        segment_bytes: int,
        reader: Brain | None,
    ) -> None:
        """The open past its MANIFEST: the tables, the log's tail replayed over them, the writer's log."""
        tables = tuple(Table(root / t["file"], manifest["storeId"]) for t in manifest["tables"])
        state = self.state
        state.stand_at(manifest, ledger, tables)
        resume = None
        if reader is not None and reader._lends_to(self, manifest):
            # the reader's memtable holds every frame it replayed above the same flushed generation; it
            # never writes again, and its own reads stay at its generation, below whatever lands here
            state.adopt(reader.state)
            resume = reader._log_position
            self.follower.adopt(reader.follower.moves())
            self.vector_follower.adopt(reader.vector_follower.moves())
            self.aggregate_follower.adopt(reader.aggregate_follower)
            self.commits.answered = reader.commits.answered  # the write ids of the frames it replayed
        at = manifest.get("logAt")
        if isinstance(at, dict) and int(at["segment"]) < H.log_from(manifest):
            at = None  # that segment held nothing past the flushed generation, and the feed retention deleted it
        if resume is None and isinstance(at, dict):  # the flush said where its generation's frame ends
            resume = log_.Position(int(at["segment"]), int(at["offset"]), flushed)
        found = log_.Scan()
        replay, sources = self.commits.replay, state.sources
        try:
            if tables:  # the rows looked up only in the tables that may hold them, asked for together
                self._replay_probed(
                    log_.frames(root / "log", flushed, found, resume=resume),
                    Probed(sources, int(manifest["nextDenseInt"])),
                )
            else:
                for frame in log_.frames(root / "log", flushed, found, resume=resume):
                    replay(frame)  # streamed: the decoded frames are never all held at once
        finally:
            state.sources = sources
        state.settle()
        self._log_position = found.position
        self.log_read = found
        self.recovery = {"replayedGenerations": state.applied - flushed}
        if found.torn_bytes:
            self.warnings.append(
                {
                    "code": "torn-tail",
                    "message": f"{found.torn_bytes} byte(s) of a commit that never landed were "
                    f"{'dropped' if writer else 'ignored'} at the end of the log",
                }
            )
        if writer:
            self.commits.log = log_.LogWriter(root / "log", found, segment_bytes)

    def _replay_probed(self, frames: Iterable[log_.Frame], probed: Probed) -> None:
        """Replay ``frames`` with their rows looked up through ``probed`` (sstable.Probed), the frames taken in
        runs of up to :data:`PROBE_AHEAD_OPS` ops, each run's keys probed together: the blocks every lookup of
        the run reads first are asked of the kernel at once. A frame at a time asked for a frame's few dozen
        blocks and waited for each read (a cold tail of 14 frames at a million rows: 1,044 blocks, 150 ms)."""
        self.state.sources = probed  # type: ignore[assignment]  (a replay asks lookup and scan only)
        run: list[log_.Frame] = []
        ops = 0
        for frame in frames:
            run.append(frame)
            ops += len(frame.ops)
            if ops >= PROBE_AHEAD_OPS:
                self._replay_run(run, probed)
                run, ops = [], 0
        if run:
            self._replay_run(run, probed)

    def _replay_run(self, run: list[log_.Frame], probed: Probed) -> None:
        # each op's row key and its vector key (a put reads whether the vector changed, a removal whether to drop
        # it), each with the op's row: a new row's vector key is as new as its row (docs/store-format.md)
        probed.probe(
            [
                looked
                for frame in run
                for key, row in frame.written()
                for looked in ((key, row), (K.vector_key(key), row))
            ]
        )
        for frame in run:
            self.commits.replay(frame)

    def served(self) -> None:
        """This handle now answers a server's doors (the pool's admission): its followers build off the read
        path, from now, and hold their builds back until the first door has answered (:meth:`first_door_done`);
        its writes are answered once durable, before the followers move up to them (``Writes.answer_first``)."""
        self.follower.background = self.vector_follower.background = True
        self.writes.answer_first = True
        self.follower.door_ends_first_read = self.vector_follower.door_ends_first_read = True
        self.follower.warm()
        self.vector_follower.admitted()

    @property
    def fence_holds(self) -> bool:
        """Whether this handle is the writer and its lease's fence still holds (no other process took it)."""
        return self._lease is not None and self._lease.fence_holds()

    @property
    def lease(self) -> L.Lease | None:
        """The writer lease this handle holds; None for a read-only attach."""
        return self._lease

    def first_door_done(self) -> None:
        """The first door on this handle has answered (the server's pool says so, for a handle whose followers'
        ``door_ends_first_read`` it set): the builds held back for it may start."""
        self.follower.first_door_done()
        self.vector_follower.first_door_done()

    def _lends_to(self, other: Brain, manifest: dict[str, Any]) -> bool:
        """Whether this read-only handle's state can seed ``other``'s open of the same store: it read the
        log from the same flushed tables, and nothing has closed it."""
        return (
            self.role != "writer"
            and not self._closed
            and self.path == other.path
            and self.state.manifest == manifest
            and self._log_position is not None
        )

    def _remove_orphans(self, manifest: dict[str, Any]) -> None:
        """Files a crash left behind mid-flush: temp files and tables no MANIFEST names."""
        live = {t["file"] for t in manifest["tables"]} | {manifest["ledger"]}
        for folder in ("sst", "ledger"):
            for path in (self.path / folder).iterdir():
                if f"{folder}/{path.name}" not in live:
                    path.unlink()
        (self.path / "MANIFEST.tmp").unlink(missing_ok=True)

    # -- reading ---------------------------------------------------------------------------

    @property
    def projections_from(self) -> str | None:
        """How the query projections were built: "rows" or "snapshot at G" (None until first needed)."""
        return self.follower.built_from

    @property
    def flushed(self) -> int:
        """The generation the tables cover."""
        return self.state.flushed

    @property
    def durable_ledger(self) -> Ledger:
        """The counts ledger at the durable head."""
        return self.state.durable_ledger

    def hold_files(self) -> FileSet:
        """The file set of the durable generation, held open (``brainy/store/backup.py``): what the ``snapshot``
        door lists and ``host.persist`` copies. A writer first makes every appended frame durable, so the log's
        whole length is the generation's; a reader holds the log up to where its read stopped."""
        self._check_open()
        state = self.state
        if self.role == "writer":
            assert self.commits.log is not None
            with self.maintenance.lock, state.commit_lock:
                self.commits.log.sync_all()
                return take(self.path, state.applied, state.manifest, None)
        return take(self.path, self.head, state.manifest, self._log_position)

    @property
    def sources(self) -> Sources:
        """What a read consults now: the live memtable, the frozen ones, the tables (the mechanics count them)."""
        return self.state.sources

    @property
    def manifest(self) -> dict[str, Any]:
        """The MANIFEST this handle read or last wrote: its tables and ledger."""
        return self.state.manifest

    @property
    def next_dense(self) -> int:
        """The next dense int a new entity will take (the vector follower reads it when it reads a chain)."""
        return self.state.next_dense

    def _check_open(self) -> None:
        if self._closed:
            raise R.ShuttingDownError(f"brain {self.name!r} is closed")

    @property
    def head(self) -> int:
        """The durable generation: what reads see (a served write is answered a follower step before it moves
        here; :meth:`until_visible` waits for that step)."""
        return self.state.durable

    def at(self, generation: int | None = None) -> Snapshot:
        """The read snapshot at ``generation`` (default: the durable head, what reads see). (Not named
        ``snapshot``: that is a mechanics door's name, and every door's name is a method here.)"""
        self._check_open()
        state = self.state
        if generation is not None and generation < state.history_from:
            # its versions may be gone: a read below the horizon is refused, never answered from what is left
            raise H.compacted(generation, state.history_from, "generation")
        return Snapshot(self, state.sources, state.durable if generation is None else generation)

    #: :meth:`wire_head`'s (sources, durable generation, snapshot), remade once either moves.
    _wire_head: tuple[Sources, int, Snapshot] | None = None

    def until_visible(self) -> None:
        """Return once every commit acknowledged to its writer is what reads see: read-your-writes for a write
        answered before its followers moved. Bounded: followers that have not moved in twice ``ACK_WAIT_SECONDS``
        (their step waits up to that for a build it started, ``CommitPath.durable_at``) are a fault, said so, never
        read past. At once when nothing acknowledged waits (every read but those few: ``HeadState.until_visible``)."""
        state = self.state
        if not state.until_visible(2 * ACK_WAIT_SECONDS):
            raise R.InternalError(
                f"brain {self.name!r}: the followers did not reach acknowledged generation {state.acknowledged} "
                f"(at {state.followed}) in {2 * ACK_WAIT_SECONDS:.0f} s",
                ref="visible",
            )

    def wire_head(self) -> Snapshot:
        """``at().for_wire()``, one object while the durable head and the sources stand: every transport read
        at the head shares it (a snapshot holds nothing a read changes), instead of two made per request. (A
        served read door has waited for every acknowledged write first: brainy/host/dispatch.py, ``run``.)"""
        held = self._wire_head
        if held is None or held[0] is not self.state.sources or held[1] != self.state.durable or self._closed:
            snap = self.at().for_wire()  # a closed handle refuses here
            self._wire_head = (snap.sources, snap.generation, snap)
            return snap
        return held[2]

    # -- writing ---------------------------------------------------------------------------------

    def write(
        self,
        door: str,
        args: Any = None,
        *,
        caller: str | None = None,
        via: str | None = None,
        roles: tuple[str, ...] = (),
        write: str | None = None,
    ) -> dict:
        """Run the write door ``door``; returns once the commit is durable (``commits.Writes.write``)."""
        return self.writes.write(door, args, caller=caller, via=via, roles=roles, write=write)

    async def awrite(
        self,
        door: str,
        args: Any = None,
        *,
        caller: str | None = None,
        via: str | None = None,
        roles: tuple[str, ...] = (),
        write: str | None = None,
    ) -> dict:
        """:meth:`write` for an event loop: the embedding and the fsync are awaited on worker threads,
        never on the loop (``commits.Writes.awrite``)."""
        return await self.writes.awrite(door, args, caller=caller, via=via, roles=roles, write=write)

    def check_writable(self) -> None:
        """Refuse unless this handle may write now: open, the writer, its maintenance sound, its lease fenced."""
        self._check_open()
        if self.role != "writer":
            holder = self.claim.holder if self.claim and self.claim.holder else {}
            raise R.BRAINY_WRITER_LOCKED(
                "this handle is read-only"
                + (
                    f"; the writer lease is held by {holder}"
                    if holder
                    else " (a read-only attach); open the store with Brain.open to write"
                ),
                holder=holder,
            )
        if self.maintenance.error is not None:
            raise R.InternalError(f"background flush failed: {self.maintenance.error}", ref="maintenance")
        assert self._lease is not None
        self._lease.check_fence()

    @property
    def on_durable(self) -> list[Callable[[], None]]:
        """Called, from whichever thread made it durable, when the durable head moves: the wakeup of the held
        change feeds (brainy/doors/feed.py), which then read the log; never needed for correctness."""
        return self.commits.on_durable

    def flush(self) -> bool:
        """Write the memtable out as a table now. Answers whether there was anything to write."""
        return self.maintenance.flush()

    def compact(self, tiered: bool = False) -> bool:
        """Merge every table into one, keeping every version the history horizon keeps; ``tiered``: only the newest run
        (``maintenance.compact_run``). Answers whether it merged anything."""
        return self.maintenance.compact(tiered)

    def sweep_blobs(self, garbage_share: float = 0.5) -> Swept | None:
        """Collect the blob records no file row of any retained generation names, nor a write in flight
        (``Maintenance.sweep_blobs``). The answer is kept as :attr:`swept`."""
        return self.maintenance.sweep_blobs(garbage_share)

    @property
    def swept(self) -> Swept | None:
        """What the last blob sweep did."""
        return self.maintenance.swept

    # -- the doors, in process -----------------------------------------------------------------

    def call(
        self,
        door: str,
        *positional: Any,
        caller: str | None = None,
        via: str | None = None,
        roles: tuple[str, ...] = (),
        **options: Any,
    ) -> Any:
        """Run one native door in process: ``call("get", id, {...})`` or ``call("find", {...})``; keyword
        options join the argument document. The same argument check as every transport, then the
        door's registered function (a write returns once its commit is durable)."""
        entry = registry.REGISTERED.get(door)
        if door not in D.BY_NAME or entry is None or entry.runs == registry.HOST:
            raise R.UnknownDoorError(f"{door!r} is not a door a brain answers in process", door=door)
        checked = calling.CHECKED[door]
        if len(positional) > 1 + checked.takes_id:
            raise TypeError(f"{door}() takes {'an id and ' if checked.takes_id else ''}one argument document")
        id_ = positional[0] if checked.takes_id and positional else None
        document = positional[checked.takes_id] if len(positional) > checked.takes_id else None
        if options:
            document = {**(document or {}), **options}
        document = checked.document(id_, document)
        if entry.runs == registry.WRITE:
            return self.write(door, document, caller=caller, via=via, roles=roles)
        if entry.runs == registry.MODEL:  # answered by the model, in the caller's thread
            return entry.fn(document)
        self.until_visible()  # a served write answered before its followers moved (as a served read waits)
        answer = calling.read(entry, self.at(), id_, document, policy.Actor(caller, via, roles))
        if entry.stamp is not None:  # in process the host writes for its caller, when it holds the lease
            args = calling.stamp_wanted(
                entry, answer, lambda: None if self.role == "writer" else calling.LEASE_NOT_HELD
            )
            if args is not None:
                try:
                    receipt = self.write(door, args, caller=caller, via=via, roles=roles)
                except R.Refusal as refused:
                    return calling.stamped(entry, answer, None, refused)
                return calling.stamped(entry, answer, receipt, None)
        return answer

    def __getattr__(self, name: str) -> Callable[..., Any]:
        entry = registry.REGISTERED.get(name)
        if entry is not None and entry.runs != registry.HOST and name in D.BY_NAME:
            door = lambda *positional, **options: self.call(name, *positional, **options)  # noqa: E731
            door.__name__ = door.__qualname__ = name
            door.__doc__ = D.BY_NAME[name].summary
            return door
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def verify(self) -> dict[str, Any]:
        """Check every checksum the store has: every table block and every log frame.

        Refuses by name at the first damage; answers what it checked.
        """
        self._check_open()
        tables = self.state.sources.tables
        for table in tables:
            table.verify()
        last = log_.verify(self.path / "log", H.log_from(self.state.manifest) - 1)
        return {"tables": len(tables), "logGeneration": last}

    # -- closing -----------------------------------------------------------------------------

    def writer_block(self) -> dict[str, Any]:
        if self.claim is None:
            return {"role": "reader"}
        return self.claim.writer_block()

    def close(self, keep_lease: bool = False) -> dict[str, Any]:
        """Flush, record a clean close, release the lease. Idempotent. ``keep_lease`` (an eviction): close
        everything but the lease, which :attr:`kept_lease` hands to the next :meth:`open`; the memtable is
        flushed only once it holds :data:`EVICT_TAIL_BYTES`, a smaller tail being the next open's to replay."""
        if self._closed:
            return {"brain": self.name, "closed": True, "leaseReleased": False, "cleanCloseRecorded": False}
        recorded = released = False
        if self.role == "writer":
            self.maintenance.stop()
            failed = self.maintenance.error
            sources = self.state.sources
            small_tail = keep_lease and sources.mem.bytes + sum(m.bytes for m in sources.frozen) < EVICT_TAIL_BYTES
            if failed is None and not small_tail and self._lease is not None and self._lease.fence_holds():
                try:
                    if not self.flush():
                        self.follower.persist(build=True)
                        self.aggregate_follower.persist()
                    self.vector_follower.persist()
                except R.Refusal as exc:  # its last commit's acknowledgement refused (a shipper's): no clean close,
                    failed = exc  # and the next open replays the log, which holds it
            assert self.commits.log is not None and self._lease is not None
            self.commits.log.close()
            if failed is None and keep_lease:
                assert self.claim is not None
                self.kept_lease = (self.claim, self._lease)
            elif failed is None:
                recorded = self._lease.release(self.state.applied)
                released = True
            else:
                self._lease.abandon()
        self.follower.settle()  # a background build reads the tables about to close
        self.vector_follower.settle()
        self.vector_follower.release()  # the snapshot files its index reads in place
        self._closed = True
        # the head snapshot refers to this handle: kept, it would make the closed handle a cycle that only a
        # full collection frees, with every table, memtable and projection it held
        self._wire_head = None
        encoded_rows.CACHE.forget(self.serial)
        self.blobs.close()
        self.writes.shutdown()
        for table in self.state.sources.tables:
            try:
                table.close()
            except BufferError:
                pass
        return {"brain": self.name, "closed": True, "leaseReleased": released, "cleanCloseRecorded": recorded}

    def __enter__(self) -> Brain:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
