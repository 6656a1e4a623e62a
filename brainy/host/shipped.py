"""A fleet node's brains shipped to object storage: the glue between the pool's writers, the fleet's claims and
the shippers (docs/fleet.md "Shipping to object storage", "Fencing", "Failover").

- Each writer the pool opens (``Pool.on_writer``) gets its brain's shipper before it serves a door: the one of
  the epoch this node owns it at, made on the first open at that epoch, after the epoch's marker (``base``: the
  generation it opened at) and, when the store holds no snapshot of the brain yet, a base snapshot. A writer of
  a brain this node does not own gets a gate that refuses every commit (``BrainMovedError``).
- Each claim (``Fleet.arrive``) makes the brain ready before it is served: a brain no live node owned is
  restored from the object store (``brainy.fleet.restore``) unless this is its first placement, and opened.
- ``host.persist`` on a node without ``--snapshots-dir`` uploads a snapshot (``Backups.remote``).
- A checkpoint thread uploads a snapshot of each brain whose shipped log has grown long since its last one
  (``Shipper.due``), so a failover restores a bounded tail.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Protocol

from brainy.contract import refusals as R
from brainy.engine import Brain
from brainy.fleet import objects as O
from brainy.fleet.membership import ADOPTED, ARRIVALS, BACK, Fleet
from brainy.fleet.objectstore import DELETES, ObjectExistsError, ObjectStore, ObjectStoreError
from brainy.fleet.restore import Staged, remember_marker, restore, stage
from brainy.fleet.shipping import ASYNC, DEFAULT_INTERVAL, SYNC, WAIT_SECONDS, Courier, Shipper
from brainy.store.backup import FileSet

log = logging.getLogger("brainy.shipped")

CHECKPOINT_POLL = 5.0  # seconds: the checkpoint thread looks at every shipper this often, woken sooner when one is due
HOLD_DRAIN_SECONDS = 5.0  # the commits begun before a move's hold are acknowledged within this (their tail is stored)


class Pool(Protocol):
    """What shipping uses of the pool (brainy/host/pool.py), which imports the doors this module's users are."""

    on_writer: Callable[[str, Brain], None] | None

    @property
    def brains_dir(self) -> Path | None: ...

    def open_writer(self, name: str) -> Brain | None: ...

    def resolve(self, name: str, for_write: bool) -> Brain: ...

    async def retire(self, name: str, drain_seconds: float = 10.0) -> dict[str, Any] | None: ...


class Unowned:
    """The gate of a writer whose brain this node does not own: every commit is refused before it is appended."""

    def __init__(self, fleet: Fleet, brain: str) -> None:
        self.fleet = fleet
        self.brain = brain

    def check(self) -> None:
        self.fleet.fence(self.brain, -1)

    def appended(self, generation: int, frame: bytes) -> None:  # never reached: check refused first
        pass

    def early(self, generation: int) -> None:  # never reached: check refused first
        pass

    def acknowledge(self, generation: int) -> None:
        self.fleet.fence(self.brain, -1)


def snapshot_parts(
    files: FileSet, brain: str, epoch: int, node: str, name: str | None, shipped: int | None = None
) -> tuple[int, Iterator[bytes]]:
    """``files`` (held open by the caller until the parts are used up) as a snapshot object (docs/fleet.md
    "Snapshot format"): its size, and its bytes in chunks, never whole in memory (each file is read twice: once
    for its digest, which the index before it holds). ``shipped``: the shipper's stored generation read before
    the files were held (every segment after the snapshot starts above it)."""
    listed = []
    for held in files.files:
        digest = hashlib.sha256()
        for chunk in held.chunks():
            digest.update(chunk)
        listed.append((held.name, held.size, digest.hexdigest()))
    index: dict[str, Any] = {
        "brain": brain,
        "epoch": epoch,
        "generation": files.generation,
        "node": node,
        "name": name,
        "createdAt": files.created_at,
    }
    if shipped is not None:
        index["shipped"] = shipped
    head = O.snapshot_head(index, listed)

    def parts() -> Iterator[bytes]:
        yield head
        for held in files.files:
            yield from held.chunks()

    return len(head) + files.bytes, parts()


def snapshot_bytes(
    files: FileSet, brain: str, epoch: int, node: str, name: str | None, shipped: int | None = None
) -> bytes:
    """:func:`snapshot_parts` whole, ``files`` closed after (a small brain's, or a test's)."""
    with files:
        return b"".join(snapshot_parts(files, brain, epoch, node, name, shipped)[1])


class Shipping:
    """This node's shipping: ``store`` the object store, ``mode`` sync or async (every ``interval`` seconds)."""

    def __init__(
        self, store: ObjectStore, fleet: Fleet, pool: Pool, mode: str = SYNC, interval: float = DEFAULT_INTERVAL
    ) -> None:
        if mode not in (SYNC, ASYNC):
            raise ValueError(f"--ship {mode!r}: sync or async")
        self.store = store
        self.fleet = fleet
        self.pool = pool
        self.mode = mode
        self.courier = Courier(interval) if mode == ASYNC else None
        self._shippers: dict[str, Shipper] = {}
        self._lock = threading.Lock()
        # the arrivals' own threads, one for each claim that may run at once (the loop's and those of wanted
        # brains, brainy/fleet/membership.py): a restore waits on the object store for seconds, and in the loop's
        # default pool (six threads on two cores) a brain a request waited for was restored, then opened, behind
        # the other claims' restores (perf/bench_chaos.py)
        self._arrivals = ThreadPoolExecutor(2 * ARRIVALS, thread_name_prefix="brainy-arrive")
        self._staged: dict[str, Staged] = {}  # host.move: brains staged here before their hand-over (:meth:`prepare`)
        # checkpoints (docs/fleet.md "Checkpoints"): a thread stores the snapshot a shipper says is due
        self._due = threading.Event()
        self._stopping = threading.Event()
        self._checkpoints: threading.Thread | None = None
        self._snapshotted: set[str] = set()  # brains the store is known to hold a snapshot of
        fleet.arrive = self.arrive
        fleet.takes_over = True
        pool.on_writer = self.on_writer

    # -- writers -------------------------------------------------------------------------------------------------

    def on_writer(self, brain: str, handle: Brain) -> None:
        """Give a writer just opened (or open, when this node claimed its brain back at a new epoch) its brain's
        shipper, or the gate of a brain not this node's."""
        epoch = self.fleet.owned.get(brain) or self.fleet.arriving.get(brain)
        if epoch is None:
            handle.commits.shipping = Unowned(self.fleet, brain)
            return
        with self._lock:
            held = self._shippers.get(brain)
        if held is not None and held.epoch == epoch:
            handle.commits.shipping = held  # a writer opened again at the same epoch (an eviction): frames go on
            return
        commits = handle.commits
        # under the commit lock no commit slips between the epoch's base and its shipper: every frame up to the
        # base is made durable and shipped at the earlier epoch (this node's, claimed back with its copy open),
        # every later one at this. An earlier epoch's shipper of a copy since set aside (restored) ships nothing.
        with commits.head.commit_lock:
            assert commits.log is not None
            commits.log.sync_all()
            base = commits.head.applied
            if held is not None and commits.shipping is held:  # the same copy, claimed back: its frames go first
                held.settle(base)
            base = self._mark(brain, epoch, base)
            shipper = Shipper(self.store, brain, epoch, base, lambda: self.fleet.fence(brain, epoch), self.mode)
            shipper.on_due = self._due.set
            commits.shipping = shipper
        with self._lock:
            self._shippers[brain] = shipper
            if self._checkpoints is None:
                self._checkpoints = threading.Thread(target=self._checkpointing, name="brainy-checkpoint", daemon=True)
                self._checkpoints.start()
        if self.courier is not None:
            self.courier.add(shipper)
        if brain not in self._snapshotted and not self._has_snapshot(brain):  # the first: before it serves a door
            self._put_snapshot(brain, epoch, handle.hold_files(), None, base)  # nothing stored yet above base
        log.info("brain %s ships at epoch %d from generation %d (%s)", brain, epoch, base, self.mode)

    def _has_snapshot(self, brain: str) -> bool:
        """Whether the store holds a snapshot of ``brain`` (one listing, unless known already: once it holds one it
        always does, a collection deleting only snapshots older than the checkpoint it follows)."""
        if brain in self._snapshotted:
            return True
        if self.store.list(f"{O.brain_prefix(brain)}snapshots/"):
            self._snapshotted.add(brain)
        return brain in self._snapshotted

    def _mark(self, brain: str, epoch: int, base: int) -> int:
        """Store the epoch's marker (docs/fleet.md "Object layout"); answers its base."""
        marker = O.marker_value(brain, self.fleet.node, epoch, base, int(time.time() * 1000))
        try:
            self.store.put_new(O.marker_name(brain, epoch), marker)
            remember_marker(self.store, O.marker_name(brain, epoch), base)
            return base
        except ObjectExistsError:
            found = O.read_marker(self.store.get(O.marker_name(brain, epoch)) or b"")
            if found.get("node") != self.fleet.node:  # an epoch is one claim's: never another node's
                raise R.BrainMovedError(
                    f"epoch {epoch} of brain {brain!r} is node {found.get('node')!r}'s",
                    brain=brain,
                    node=str(found.get("node")),
                    epoch=epoch,
                ) from None
            return int(found["base"])

    def _put_snapshot(
        self, brain: str, epoch: int, files: FileSet, name: str | None, shipped: int | None = None
    ) -> tuple[int, int]:
        count, size, generation = len(files.files), files.bytes, files.generation
        with self._lock:
            shipper = self._shippers.get(brain)
        tail = (shipper.tail, shipper.tail_bytes) if shipper is not None and shipper.epoch == epoch else None
        with files:
            stored, parts = snapshot_parts(files, brain, epoch, self.fleet.node, name, shipped)
            try:
                self.store.put_new_stream(O.snapshot_name(brain, generation, epoch), stored, parts)
            except ObjectExistsError:  # this epoch's snapshot of this generation is stored: the same files
                log.info("snapshot of %s at generation %d (epoch %d) was stored already", brain, generation, epoch)
        self._snapshotted.add(brain)
        if shipper is not None and tail is not None:
            shipper.checkpointed(stored, *tail)
        return count, size

    def _checkpointing(self) -> None:
        """The checkpoint thread: each brain whose shipper says its next snapshot is due gets one, so a restore
        never fetches more than about :data:`TAIL_SEGMENTS` segments after the newest snapshot."""
        while not self._stopping.is_set():
            self._due.wait(CHECKPOINT_POLL)
            self._due.clear()
            with self._lock:
                due = [s for s in self._shippers.values() if s.due()]
            for shipper in due:
                if self._stopping.is_set():
                    return
                try:
                    generation = self.snapshot(shipper.brain, shipper.epoch)
                    deleted = self._collect(shipper, generation)
                    log.info(
                        "brain %s: checkpoint at generation %d (epoch %d) stored, %d objects it covers deleted",
                        shipper.brain,
                        generation,
                        shipper.epoch,
                        deleted,
                    )
                except (R.Refusal, ObjectStoreError, OSError) as exc:  # no longer ours, or the store away: next turn
                    log.warning(
                        "brain %s: the checkpoint was not stored, or not collected after: %s", shipper.brain, exc
                    )

    def _collect(self, shipper: Shipper, generation: int) -> int:
        """Delete what the checkpoint at ``generation`` makes unnecessary (docs/fleet.md "When things are
        shipped"): the segments of this epoch or an earlier one ending at or below it, and the earlier snapshots
        without a name, a thousand a call. The fence is asked before each call (BrainMovedError ends it). Answers
        how many."""
        brain, epoch = shipper.brain, shipper.epoch
        prefix = O.brain_prefix(brain)
        listing = O.read_listing(brain, self.store.list(f"{prefix}snapshots/") + self.store.list(f"{prefix}log/"))
        doomed = [s.name for s in listing.segments if s.epoch <= epoch and s.last <= generation]
        doomed += [
            s.name
            for s in listing.snapshots
            if s.generation < generation and s.epoch <= epoch and not self._named(s.name)
        ]
        for first in range(0, len(doomed), DELETES):
            shipper.fence()
            self.store.delete(doomed[first : first + DELETES])
        return len(doomed)

    def _named(self, name: str) -> bool:
        """Whether the snapshot ``name`` was given a name (``host.persist``: kept); one that cannot be read is
        kept too. Only its head is read."""
        try:
            with self.store.reading(name) as read:
                return read is not None and O.SnapshotReader(read).index.get("name") is not None
        except O.ShippedDamageError:
            return True

    def persist(self, brain: str, name: str, files: FileSet) -> tuple[int, int]:
        """``host.persist`` to the object store: the snapshot of ``files`` at the epoch this node owns it at."""
        epoch = self.fleet.owned.get(brain)
        if epoch is None:
            files.close()
            owner = self.fleet.owners.get(brain)
            raise R.BrainMovedError(
                f"brain {brain!r} is not this node's to persist",
                brain=brain,
                node=owner.node if owner else self.fleet.node,
                epoch=owner.epoch if owner else 0,
            )
        return self._put_snapshot(brain, epoch, files, name)

    # -- a planned move (host.move, brainy/host/moving.py) ---------------------------------------------------------

    def snapshot(self, brain: str, epoch: int) -> int:
        """Store a snapshot of ``brain`` now (blocking), while writes still flow: its generation. The node it is
        moved to stages it before the hold, and restores only the short log after it during the hold."""
        shipped = self._shipper(brain, epoch).stored  # read before the files are held: a bound below them
        files = self.pool.resolve(brain, True).hold_files()
        generation = files.generation
        self._put_snapshot(brain, epoch, files, None, shipped)
        return generation

    def _shipper(self, brain: str, epoch: int) -> Shipper:
        with self._lock:
            shipper = self._shippers.get(brain)
        if shipper is None or shipper.epoch != epoch:
            raise R.BrainMovedError(
                f"brain {brain!r} is not shipped from this node at epoch {epoch}", brain=brain, node="", epoch=epoch
            )
        return shipper

    def hold(self, brain: str, epoch: int) -> tuple[int, float]:
        """Stop ``brain``'s commits and ship its tail (blocking): answers the last generation, every commit up to
        which is stored and acknowledged, and when the hold began (``time.monotonic()``)."""
        handle = self.pool.resolve(brain, True)
        shipper = self._shipper(brain, epoch)
        commits = handle.commits
        try:
            # under the commit lock no commit is between its begin and its append: every later begin is refused in the
            # shipper's check, so ``applied`` is the last commit of this epoch
            with commits.head.commit_lock:
                shipper.hold()
                began = time.monotonic()
                assert commits.log is not None
                commits.log.sync_all()
                last = commits.head.applied
            shipper.settle(last)
            # the commits up to it were begun before the hold: their acknowledgements (stored now) land first
            deadline = time.monotonic() + HOLD_DRAIN_SECONDS
            while commits.head.durable < last and time.monotonic() < deadline:
                time.sleep(0.002)
        except BaseException:
            shipper.release()
            raise
        return last, began

    def resume(self, brain: str) -> None:
        """The hand-over did not happen: the held commits go on."""
        with self._lock:
            shipper = self._shippers.get(brain)
        if shipper is not None:
            shipper.release()

    def handed(self, brain: str, moved: R.Refusal) -> None:
        """The brain is another node's now: the held commits (and every later one here) are refused ``moved``, and
        its shipper is let go."""
        with self._lock:
            shipper = self._shippers.pop(brain, None)
        if shipper is not None:
            shipper.release(moved)
            if self.courier is not None:
                self.courier.remove(brain)

    async def prepare(self, brain: str, epoch: int) -> int:
        """Stage ``brain`` here for its claim at ``epoch`` (host.move, before the owner's hold): the generation it is
        staged at. A staging left by an earlier move that did not happen is removed first (never a brain: a
        dot-name, and never served)."""
        if self.pool.brains_dir is None:
            raise R.BrainsDirNotConfiguredError("a brain restored from the object store needs --brains-dir")
        loop = asyncio.get_running_loop()
        old = self._staged.pop(brain, None)
        if old is not None:
            await loop.run_in_executor(None, shutil.rmtree, old.path, True)
        staged = await loop.run_in_executor(None, stage, self.store, brain, epoch, self.pool.brains_dir)
        self._staged[brain] = staged
        return staged.generation

    # -- claims --------------------------------------------------------------------------------------------------

    async def arrive(self, brain: str, epoch: int, how: str) -> None:
        """Make ``brain``, just claimed at ``epoch``, ready to serve (``Fleet.arrive``)."""
        loop, threads = asyncio.get_running_loop(), self._arrivals
        if how == BACK:
            open_writer = self.pool.open_writer(brain)
            if open_writer is not None:  # the copy it serves is current: ship on at the new epoch
                await loop.run_in_executor(threads, self.on_writer, brain, open_writer)
            return
        if how != ADOPTED:
            return  # a new brain: host.provision creates it, then opens it (:meth:`provisioned`)
        local = self.pool.brains_dir is not None and (self.pool.brains_dir / brain).is_dir()
        # no snapshot shipped means no segment either (a writer's first open stores its snapshot before it serves):
        # a local copy is then the brain's whole history (a fleet that ran without --object-store, or a first open
        # cut short), and it is kept
        shipped = await loop.run_in_executor(threads, self._has_snapshot, brain)
        if epoch > 1 and (shipped or not local):
            if self.pool.brains_dir is None:
                raise R.BrainsDirNotConfiguredError("a brain restored from the object store needs --brains-dir")
            await self.pool.retire(brain)  # a stale copy open here (a reader) is closed before it is set aside
            staged = self._staged.pop(brain, None)
            await loop.run_in_executor(threads, restore, self.store, brain, epoch, self.pool.brains_dir, staged)
        await loop.run_in_executor(threads, self.pool.resolve, brain, True)

    async def provisioned(self, brain: str) -> None:
        """A brain ``host.provision`` just created here: opened, so its marker and base snapshot are stored."""
        await asyncio.get_running_loop().run_in_executor(None, self.pool.resolve, brain, True)

    def health(self) -> dict[str, Any]:
        """Each owned brain's shipping, for ``/v1/health``'s ``fleet`` block (docs/fleet.md "/v1/health")."""
        with self._lock:
            shippers = dict(self._shippers)
        owned = self.fleet.owned
        return {name: s.state() for name, s in sorted(shippers.items()) if owned.get(name) == s.epoch}

    def stop(self) -> None:
        """The stop sequence, after the last write: what ``async`` has durable is shipped once more."""
        self._stopping.set()
        self._due.set()
        if self._checkpoints is not None:
            self._checkpoints.join(timeout=WAIT_SECONDS)
        if self.courier is not None:
            self.courier.stop()
        self._arrivals.shutdown(wait=False)  # a claim after this fails to arrive and is let go: another node takes it
