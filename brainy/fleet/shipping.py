"""A brain's shipper: its commits' frames stored as segments in the object store, at its owner's epoch
(docs/fleet.md "When things are shipped", "--ship sync and --ship async", "Fencing").

The commit path (brainy/store/commit_path.py, ``Ships``) hands each frame over when it is appended (under the
commit lock, so in generation order), asks :meth:`Shipper.check` before a commit is begun and
:meth:`Shipper.acknowledge` once its frame is durable locally, before the write is acknowledged:

- ``sync``: :meth:`acknowledge` returns once a segment holding the frame is stored, and every frame below it.
  Whoever waits while fewer than ``PIPELINE`` uploads run uploads every frame appended and not yet handed to one,
  for everyone (group commit, as the log's fsync: ``LogWriter.wait``); a write about to wait for its local fsync
  starts that upload first when its group has formed (:meth:`Shipper.early`), so the two overlap. The frames of
  commits still in their local fsync go too, so their fsync and that upload overlap as well (a frame stored
  before it is durable here is one a crash may or may not keep, as any write not yet acknowledged). After an
  upload lands, the next waits briefly for the writers it released (``GROUP_WAIT_MAX``).
- ``async``: :meth:`acknowledge` returns at once; :class:`Courier`'s thread uploads every ``interval``.

Either way :meth:`acknowledge` ends with the fence (``fence``, the fleet's: this node still owns the brain at
this epoch, and its lease cannot have expired): a write is never acknowledged outside its owner's claim. A fence
that fails there, after the append, is InternalError (ref ``fleet-fenced``): the write may be kept or not.
Every call here blocks; they run on the brain's fsync workers and the courier's thread, never on the loop.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from brainy.contract import refusals as R
from brainy.fleet import objects as O
from brainy.fleet.objectstore import ObjectExistsError, ObjectStore, ObjectStoreError

log = logging.getLogger("brainy.fleet.shipping")

SYNC, ASYNC = "sync", "async"
MODES = (SYNC, ASYNC)
DEFAULT_INTERVAL = 1.0  # seconds; docs/fleet.md says why
WAIT_SECONDS = 30.0  # a sync write waits at most this for its segment (the store's tries end well before)
# uploads of one brain in flight at once. More than one is safe: a segment may land before the one below it, but
# ``stored`` (what is acknowledged) moves only over a gapless prefix, and a restore stops at the first missing
# generation. Measured (perf/bench_ship.py, 16 writers, moto on loopback, 2 cores): 1 in flight 1728 commits/s
# (6.9 a segment), 2: 1560 (4.3), 4: 1076 (2.7): more in flight splits the groups, and a put's cost is per put.
# Measured again once an upload took the frames still in their fsync too: 1 in flight 49% of local-only, 2: 40%;
# and once an upload waits for the writers the last one released (GROUP_WAIT_MAX): 1 in flight 55%.
PIPELINE = 1
# ``--ship sync``'s group commit: after an upload lands, the next one waits (at most the landed upload's own
# duration, and never more than GROUP_WAIT_MAX) for the writers it released to append their next commits: every
# frame left waiting then plus one frame a released writer. Uploading at once instead splits the writers into two
# cohorts that take turns, half of them in each segment (their commits appended while the other half's upload is
# in flight). One writer: its next frame is the one awaited, so nothing waits for nobody.
GROUP_WAIT_MAX = 0.010
# a brain's next snapshot (docs/fleet.md "Checkpoints") is due once this many segments were stored since its last
# one and they weigh at least 1/TAIL_SHARE of it: a restore then fetches at most that many segments after the
# snapshot (one call each; a restore's other calls are six), while a large brain written in small commits is not
# uploaded whole every few dozen of them. A checkpoint costs about five calls (its put, two listings, a read of
# the last one's head, one delete of what it covers): a sixth more calls in all, for a restore of at most 38
TAIL_SEGMENTS = 32
TAIL_SHARE = 16


class Shipper:
    """The frames of ``brain`` above ``base`` (its generation when its owner opened it), shipped at ``epoch``.

    ``fence()`` raises the refusal that ends this owner's acknowledgements (BrainMovedError) or returns."""

    def __init__(
        self,
        store: ObjectStore,
        brain: str,
        epoch: int,
        base: int,
        fence: Callable[[], None],
        mode: str = SYNC,
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"--ship {mode!r}: sync or async")
        self.store = store
        self.brain = brain
        self.epoch = epoch
        self.mode = mode
        self.fence = fence
        self._cond = threading.Condition()
        self._frames: list[tuple[int, bytes]] = []  # appended, not yet stored, in generation order
        self._durable = base  # the highest generation durable locally (every frame at or below it is)
        self._appended = base  # the highest generation appended to the local log
        self.stored = base  # the highest generation stored in a segment, with every one below it
        self._handed = base  # the highest generation handed to an upload
        self._inflight = 0
        self._landed: dict[int, int] = {}  # uploads that landed above a gap: first -> last generation
        self._retry: list[tuple[int, int]] = []  # ranges whose upload failed, uploaded again first
        self.error: BaseException | None = None  # the last upload's failure, until one succeeds
        self.uploads = 0
        # (deadline, frames): the next sync upload starts once this many frames wait to be handed, or at the
        # deadline (time.monotonic()); None: at once
        self._gathering: tuple[float, int] | None = None
        # host.move (docs/fleet.md "Planned move"): while held, a commit is refused before it begins (the dispatcher
        # holds new writes back before they get here; this is for one that slipped past it); once the brain is
        # handed over, every commit is refused with ``moved`` (BrainMovedError naming the new owner)
        self._held = False
        self._moved: R.Refusal | None = None
        # since when (time.monotonic()) a durable commit has waited to be stored: /v1/health's lag; None when none has
        self._behind_since: float | None = None
        # the segments stored since the brain's last snapshot, their bytes, and that snapshot's (0: not known);
        # ``on_due`` is called (under the lock: it only wakes a thread) when the next snapshot falls due
        self.tail = 0
        self.tail_bytes = 0
        self.snapshot_bytes = 0
        self.on_due: Callable[[], None] | None = None

    # -- the commit path's side (brainy/store/commit_path.py, Ships) --------------------------------------------

    def check(self) -> None:
        """Before a commit is begun: refuse it, with nothing appended, when this owner may not write. Never waits:
        a commit begins on the event loop's thread, under the commit lock."""
        with self._cond:
            moved, held = self._moved, self._held
        if moved is not None:  # a fresh refusal each time: one exception object is never raised in two threads
            raise type(moved)(moved.message, **moved.fields)
        if held:
            raise R.BrainMovedError(
                f"brain {self.brain!r} is being handed to another node; ask again",
                brain=self.brain,
                node="",
                epoch=self.epoch,
            )
        self.fence()

    def hold(self) -> None:
        """Stop commits from beginning (host.move): each is refused in :meth:`check` until :meth:`release`."""
        with self._cond:
            self._held = True

    def release(self, moved: R.Refusal | None = None) -> None:
        """End the hold: commits begin again, or, with ``moved``, every later one is refused by it."""
        with self._cond:
            self._held = False
            self._moved = moved
            self._cond.notify_all()

    def state(self) -> dict[str, int | str | None]:
        """What ``/v1/health`` says of this brain's shipping (docs/fleet.md "/v1/health")."""
        with self._cond:
            durable, stored, since, error = self._durable, self.stored, self._behind_since, self.error
        return {
            "mode": self.mode,
            "epoch": self.epoch,
            "shipped": stored,
            "durable": durable,
            "lag": max(0, durable - stored),
            "lagMs": 0 if since is None else int((time.monotonic() - since) * 1000),
            "uploads": self.uploads,
            "error": str(error) if error is not None else None,
        }

    def due(self) -> bool:
        """Whether the brain's next snapshot is due (:data:`TAIL_SEGMENTS`, :data:`TAIL_SHARE`)."""
        with self._cond:
            return self._due()

    def _due(self) -> bool:
        return self.tail >= TAIL_SEGMENTS and self.tail_bytes * TAIL_SHARE >= self.snapshot_bytes

    def checkpointed(self, size: int, tail: int, tail_bytes: int) -> None:
        """A snapshot of ``size`` bytes was stored, taken when ``tail`` segments (``tail_bytes``) were counted."""
        with self._cond:
            self.tail -= min(self.tail, tail)
            self.tail_bytes -= min(self.tail_bytes, tail_bytes)
            self.snapshot_bytes = size

    def appended(self, generation: int, frame: bytes) -> None:
        """The frame of the commit at ``generation`` was appended to the local log (not yet durable)."""
        with self._cond:
            self._frames.append((generation, frame))
            self._appended = generation
            gathering = self._gathering
            if gathering is not None and generation - self._handed >= gathering[1]:
                self._cond.notify_all()  # the group the next upload waits for is whole

    def acknowledge(self, generation: int) -> None:
        """The commit at ``generation`` is durable locally; return when it may be acknowledged (``sync``: once a
        segment holds it), else raise the refusal that says why not."""
        with self._cond:
            self._durable_at(generation)
        if self.mode == SYNC:
            self.ship(generation)
        try:
            self.fence()
        except R.BrainMovedError as exc:
            # appended, durable here and maybe shipped, so maybe kept: not "moved" (a request refused so was not
            # acted on, and is sent again to the new owner), but an outcome only a read can tell
            raise R.InternalError(
                f"brain {self.brain}: this node's claim ended while generation {generation} was being made, so it "
                f"may or may not be kept ({exc.message}); read it back to know",
                ref="fleet-fenced",
            ) from None

    def settle(self, generation: int) -> None:
        """Every frame up to ``generation`` is durable (the caller synced the log): ship them all, now (this
        node claimed the brain back at a later epoch, which starts after them)."""
        with self._cond:
            self._durable_at(generation)
        self.ship(generation)

    def _durable_at(self, generation: int) -> None:
        """Under the lock: every frame up to ``generation`` is durable here."""
        if generation > self._durable:
            self._durable = generation
            if self._behind_since is None and generation > self.stored:
                self._behind_since = time.monotonic()

    # -- uploads ------------------------------------------------------------------------------------------------

    def pending(self) -> bool:
        with self._cond:
            return self.stored < self._durable

    def ship(self, generation: int | None = None, wait: float = WAIT_SECONDS) -> None:
        """Return once every frame up to ``generation`` (None: every durable one) is stored, uploading what is
        durable when fewer than ``PIPELINE`` uploads run; raise InternalError (ref ``fleet-ship``) when the store
        does not take it. ``stored`` moves only over uploads that landed without a gap below them."""
        deadline = time.monotonic() + wait
        with self._cond:
            target = self._durable if generation is None else generation
            while self.stored < target:
                batch = self._take()
                if batch is None:
                    now = time.monotonic()
                    left = deadline - now
                    if left <= 0:
                        raise R.InternalError(
                            f"brain {self.brain}: generation {target} was not shipped within {wait:.0f} s",
                            ref="fleet-ship",
                        )
                    gathering = self._gathering
                    if gathering is not None and self._inflight < PIPELINE:
                        left = min(left, max(gathering[0] - now, 0.0))  # then it starts with whatever is there
                    self._cond.wait(left)
                    continue
                error = self._send(batch, gather=self.mode == SYNC and generation is not None)
                if error is not None:
                    raise R.InternalError(
                        f"brain {self.brain}: the object store did not store generations {batch[0][0]}-"
                        f"{batch[-1][0]}: {error}",
                        ref="fleet-ship",
                    ) from None

    def early(self, generation: int) -> None:
        """``sync``: before the local fsync of the commit at ``generation`` is waited for, start the next upload on
        this thread when none runs and its group has formed (:meth:`_take`), so that the upload and the fsync take
        their time together, not one after the other. Returns at once otherwise; a failed upload is left to
        :meth:`acknowledge`, which tries its range again and says why."""
        if self.mode != SYNC:
            return
        with self._cond:
            if self.stored >= generation:
                return
            batch = self._take()
            if batch is not None:
                self._send(batch, gather=True)

    def _send(self, batch: list[tuple[int, bytes]], gather: bool) -> ObjectStoreError | None:
        """Under the lock (let go meanwhile): upload ``batch`` and account for it; the store's error, if it failed
        (its range then goes again first). ``gather``: a landed upload has the next one wait for the writers it
        released (:data:`GROUP_WAIT_MAX`)."""
        first, last = batch[0][0], batch[-1][0]
        self._inflight += 1
        self._cond.release()
        error: ObjectStoreError | None = None
        size = 0
        began = time.monotonic()
        try:
            size = self._upload(batch)
        except ObjectStoreError as exc:
            error = exc
        finally:
            self._cond.acquire()
            self._inflight -= 1
        if error is None and gather:
            landed = time.monotonic()
            waiting = self._appended - self._handed
            self._gathering = (landed + min(landed - began, GROUP_WAIT_MAX), waiting + len(batch))
        if error is None:
            self._landed[first] = last
            while self.stored + 1 in self._landed:  # the stored prefix grows over what landed in order
                self.stored = self._landed.pop(self.stored + 1)
            if self.stored >= self._durable:
                self._behind_since = None
            self._frames = [(g, f) for g, f in self._frames if g > self.stored]
            self.error = None
            self.uploads += 1
            self.tail += 1
            self.tail_bytes += size
            if self.on_due is not None and self._due():
                self.on_due()
        else:
            self._retry.append((first, last))  # the same range again, under the same name
            self._retry.sort()
            self.error = error
        self._cond.notify_all()
        return error

    def _take(self) -> list[tuple[int, bytes]] | None:
        """The next upload's frames, under the lock: a range whose upload failed first, else the durable frames not
        yet handed to an upload, as many as one segment holds; None when ``PIPELINE`` uploads run or nothing is
        left to hand out."""
        if self._inflight >= PIPELINE:
            return None
        retry = bool(self._retry)
        if retry:
            first, last = self._retry.pop(0)  # bounded already: it was one upload's
        elif self._gathering is not None and (
            self._appended - self._handed < self._gathering[1] and time.monotonic() < self._gathering[0]
        ):
            return None  # the group is still forming
        elif self._handed < self._appended:
            first, last = self._handed + 1, self._appended
        else:
            return None
        batch: list[tuple[int, bytes]] = []
        size = 0
        for generation, frame in self._frames:
            if generation < first:
                continue
            if generation > last or (batch and (len(batch) == O.SEGMENT_FRAMES or size + len(frame) > O.SEGMENT_BYTES)):
                break  # the rest goes in the next segment (docs/fleet.md "Segment format": a segment's bound)
            batch.append((generation, frame))
            size += len(frame)
        if not batch or batch[0][0] != first or batch[-1][0] - first + 1 != len(batch):  # never: each frame is
            raise R.InternalError(  # handed over as appended
                f"brain {self.brain}: generations {first}-{last} were not all handed to its shipper", ref="fleet-ship"
            )
        if not retry:
            self._handed = batch[-1][0]
            self._gathering = None
        return batch

    def _upload(self, batch: list[tuple[int, bytes]]) -> int:
        """Store ``batch`` as one segment: its size."""
        first, last = batch[0][0], batch[-1][0]
        name = O.segment_name(self.brain, first, last, self.epoch)
        data = O.encode_segment(batch)
        try:
            self.store.put_new(name, data)
        except ObjectExistsError:
            # a name is only ever this epoch's owner's: an earlier try of this same put landed
            log.info("segment %s was stored by an earlier try", name)
        return len(data)


class Courier:
    """The ``--ship async`` thread: every ``interval`` seconds, each shipper's durable frames are uploaded."""

    def __init__(self, interval: float = DEFAULT_INTERVAL) -> None:
        if interval <= 0:
            raise ValueError(f"--ship-interval {interval}: more than 0 seconds")
        self.interval = interval
        self._shippers: dict[str, Shipper] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def add(self, shipper: Shipper) -> None:
        with self._lock:
            self._shippers[shipper.brain] = shipper
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="brainy-ship", daemon=True)
                self._thread.start()

    def remove(self, brain: str) -> None:
        with self._lock:
            self._shippers.pop(brain, None)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.turn()

    def turn(self) -> None:
        """Ship what each brain has durable now; a store that fails is logged and tried again next turn."""
        with self._lock:
            shippers = list(self._shippers.values())
        for shipper in shippers:
            if shipper.pending():
                try:
                    shipper.ship(wait=self.interval)
                except R.Refusal as exc:
                    log.warning("ship %s: %s", shipper.brain, exc)

    def stop(self) -> None:
        """Ship what is durable one last time, then end the thread (the stop sequence)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=WAIT_SECONDS)
        self.turn()
