"""A brain rebuilt from the object store on the node that claimed it (docs/fleet.md "Failover", steps 1-3).

:func:`restore` lists the brain's objects, reads its markers, lets ``objects.plan`` choose the newest snapshot
that is history and the segments after it, and writes them as a store into ``.arriving-<brain>-e<epoch>`` beside
the brains: the snapshot's files, the frames after it appended to its last log segment, every file and folder
fsynced. Only then is a local copy set aside (``.stale-<brain>-e<epoch>``, never deleted) and the new one renamed
into place, so the brain's directory is always a whole store. The first open replays the frames.
"""

from __future__ import annotations

import logging
import os
import shutil
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from brainy.fleet import objects as O
from brainy.fleet.objectstore import ObjectStore
from brainy.store import log as log_
from brainy.store.directory import FOLDERS
from brainy.store.files import fsync_dir, write_all

log = logging.getLogger("brainy.fleet.restore")

FETCHES = 8  # segments fetched at once


class RestoreError(Exception):
    """The object store holds no history this brain can be rebuilt from (no snapshot, or damage)."""


class _Gone(Exception):
    """An object listed was not there when read."""


LISTINGS = 3  # a restore lists again at most this often when what it listed is deleted under it

# The base each epoch's marker names, by store and marker: a marker is written once (a conditional put) and never
# deleted, so a node reads each at most once, and not the ones it wrote (a brain that failed over k times was k
# gets of every restore of it). Bounded: past MARKERS_HELD the memory starts again.
_BASES: dict[tuple[str, str, str, str], int] = {}
MARKERS_HELD = 65_536


def _marker_key(store: ObjectStore, name: str) -> tuple[str, str, str, str]:
    return store.creds.endpoint, store.location.bucket, store.location.prefix, name


def remember_marker(store: ObjectStore, name: str, base: int) -> None:
    """The marker ``name`` in ``store`` names ``base`` (it was just written or read)."""
    if len(_BASES) >= MARKERS_HELD:
        _BASES.clear()
    _BASES[_marker_key(store, name)] = base


def marker_base(store: ObjectStore, name: str) -> int | None:
    """The base the marker ``name`` names, read once a process; None when it is not there."""
    base = _BASES.get(_marker_key(store, name))
    if base is None:
        data = store.get(name)
        if data is None:
            return None
        base = int(O.read_marker(data)["base"])
        remember_marker(store, name, base)
    return base


def _write(path: Path, chunks: Iterable[bytes], more: bytes = b"") -> None:
    """A new file of ``chunks`` then ``more``, fsynced."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o644)
    try:
        for chunk in chunks:
            write_all(fd, chunk)
        if more:
            write_all(fd, more)
        os.fsync(fd)
    finally:
        os.close(fd)


def _aside(path: Path, name: str) -> Path:
    """A free dot-name beside ``path`` starting with ``name`` (a dot-name is never a brain)."""
    candidate = path.parent / name
    for turn in range(1, 1000):
        if not os.path.lexists(candidate):
            return candidate
        candidate = path.parent / f"{name}.{turn}"
    raise RestoreError(f"no free name beside {path} for {name}")


@dataclass
class Staged:
    """A brain rebuilt into ``path`` (beside the brains, under a dot-name) and not yet renamed into place: from
    ``snapshot`` and the shipped frames up to ``generation``, appended to ``log`` (None: none yet)."""

    brain: str
    epoch: int
    path: Path
    snapshot: str
    generation: int
    log: Path | None
    taken: tuple[int, int] = (0, 0)  # the snapshot's generation and epoch
    frames: int = 0  # the shipped frames after the snapshot, appended
    shipped: int = 0  # every segment after the snapshot starts above this generation (0: not known)


def _choose(store: ObjectStore, brain: str, epoch: int) -> tuple[O.Listing, dict[int, int], O.SnapshotObject]:
    """Steps 1-2 of a restore of ``brain`` for ``epoch`` (docs/fleet.md "Failover"), up to the snapshot: the
    markers and snapshots listed (no segment yet), each marker's base, and the newest snapshot that is history."""
    prefix = O.brain_prefix(brain)
    listing = O.read_listing(brain, store.list(f"{prefix}epochs/") + store.list(f"{prefix}snapshots/"))
    bases = {}
    for marked, name in listing.markers.items():
        if marked < epoch:
            base = marker_base(store, name)
            if base is not None:
                bases[marked] = base
    chosen = O.plan(listing, bases, epoch).snapshot
    if chosen is None:
        raise RestoreError(f"brain {brain}: the object store holds no snapshot of it that is history")
    return listing, bases, chosen


def _plan(
    store: ObjectStore, brain: str, epoch: int, listing: O.Listing, bases: dict[int, int], shipped: int
) -> O.Plan:
    """The rest of step 2: the segments listed after ``shipped`` (every segment the snapshot's history goes on
    with starts above it; 0 lists them all), and the plan over them."""
    start = O.segment_start(brain, shipped) if shipped > 0 else ""
    listing.segments = O.read_listing(brain, store.list(f"{O.brain_prefix(brain)}log/", start)).segments
    return O.plan(listing, bases, epoch)


def _fetch(store: ObjectStore, names: list[str]) -> list[bytes | None]:
    """Each of ``names``' bytes (None: not there), :data:`FETCHES` gets at a time: a brain written without pause
    ships a segment every few commits, and one get after another is most of a failover's wait (a round trip each).
    Each thread takes every FETCHES-th name on one kept-alive connection, closed when it is done."""
    got: list[bytes | None] = [None] * len(names)

    def stride(first: int) -> None:
        try:
            for n in range(first, len(names), FETCHES):
                got[n] = store.get(names[n])
        finally:
            store.release()  # this thread's connection

    if len(names) <= 1:
        return [store.get(name) for name in names]
    with ThreadPoolExecutor(min(FETCHES, len(names))) as pool:
        for done in [pool.submit(stride, first) for first in range(min(FETCHES, len(names)))]:
            done.result()
    return got


def _frames(store: ObjectStore, plan: O.Plan, at: int) -> tuple[list[bytes], int]:
    """The log frames ``plan`` ships after generation ``at``, encoded, and the generation they end at."""
    frames: list[bytes] = []
    wanted = [(segment, upto) for segment, upto in plan.segments if segment.last > at]  # the rest is staged already
    for (segment, upto), data in zip(wanted, _fetch(store, [segment.name for segment, _ in wanted])):
        if data is None:  # listed, then gone: its owner deleted it under a newer checkpoint (docs/fleet.md)
            raise _Gone(segment.name)
        for generation, payload in O.decode_segment(data, segment.first, segment.last):
            if at < generation <= upto:
                frames.append(log_.encode_frame(payload))
                at = generation
    return frames, at


def stage(store: ObjectStore, brain: str, epoch: int, brains_dir: Path) -> Staged:
    """Rebuild ``brain`` for ``epoch`` into a staging folder beside the brains, every file and folder fsynced, and
    rename nothing: :func:`restore` finishes it (``host.move`` stages before its hold, so only the tail is fetched
    while writes wait). The snapshot is read as it arrives and written as it is read, never whole in memory. An
    object listed and gone by the time it is read (deleted under a newer checkpoint) means listing again."""
    gone: _Gone | None = None
    for _ in range(LISTINGS):
        try:
            return _stage(store, brain, epoch, brains_dir)
        except _Gone as exc:
            gone = exc
            log.info("brain %s: %s was deleted under a newer checkpoint; listing again", brain, exc)
    raise RestoreError(f"brain {brain}: {gone} was listed and gone {LISTINGS} times")


def _stage(store: ObjectStore, brain: str, epoch: int, brains_dir: Path) -> Staged:
    try:
        listing, bases, chosen = _choose(store, brain, epoch)
        with store.reading(chosen.name) as read:
            if read is None:
                raise _Gone(chosen.name)
            snapshot = O.SnapshotReader(read)
            shipped = snapshot.index.get("shipped")
            shipped = shipped if isinstance(shipped, int) else 0
            plan = _plan(store, brain, epoch, listing, bases, shipped)
            assert plan.snapshot is not None
            frames, at = _frames(store, plan, plan.snapshot.generation)
            staging = _aside(brains_dir / brain, f".arriving-{brain}-e{epoch}")
            staging.mkdir()
            try:
                last_log = _write_staged(staging, snapshot, b"".join(frames), plan.snapshot.generation)
            except BaseException:
                shutil.rmtree(staging, ignore_errors=True)  # only ever a staging copy
                raise
    except O.ShippedDamageError as exc:
        raise RestoreError(f"brain {brain}: {exc}") from None
    taken = (plan.snapshot.generation, plan.snapshot.epoch)
    return Staged(brain, epoch, staging, plan.snapshot.name, at, last_log, taken, len(frames), shipped)


def _write_staged(staging: Path, snapshot: O.SnapshotReader, tail: bytes, generation: int) -> Path | None:
    """The snapshot's files written into ``staging`` as they are read, ``tail`` (the frames after the snapshot)
    appended to its last log segment, IDENTITY last (a folder without it is no store), every file and folder
    fsynced: the staged log's last segment (None: none)."""
    for folder in FOLDERS:
        (staging / folder).mkdir(exist_ok=True)
    # the frames after the snapshot follow its last log segment, which ends with the snapshot's generation's frame
    # (a snapshot's log is cut at a whole frame): the log reads on across them as it was written
    names = [name for name, _, _ in snapshot.listed]
    logs = sorted(name for name in names if name.startswith("log/") and name.endswith(".log"))
    identity: bytes | None = None
    for name, chunks in snapshot.files():
        if name == "IDENTITY":
            identity = b"".join(chunks)
            continue
        _write(staging / name, chunks, tail if logs and name == logs[-1] else b"")
    if identity is not None:
        _write(staging / "IDENTITY", [identity])
    last_log = staging / logs[-1] if logs else None
    if tail and not logs:
        last_log = staging / "log" / log_.segment_name(generation + 1)
        _write(last_log, [log_.encode_header(), tail])
    for folder in {str(Path(n).parent) for n in names} | set(FOLDERS):
        fsync_dir(staging / folder)
    fsync_dir(staging)
    return last_log


def _catch_up(store: ObjectStore, staged: Staged) -> int:
    """Append to ``staged`` the frames shipped since it was staged, if its snapshot is still the one to restore:
    the generation it now ends at, or -1 when it is not (it is then set aside, and a whole restore follows)."""
    listing, bases, chosen = _choose(store, staged.brain, staged.epoch)
    if chosen.name != staged.snapshot:
        return -1
    plan = _plan(store, staged.brain, staged.epoch, listing, bases, staged.shipped)
    try:
        frames, at = _frames(store, plan, staged.generation)
    except _Gone:  # a newer checkpoint came meanwhile: the whole restore, from it
        return -1
    if frames:
        target = staged.log or staged.path / "log" / log_.segment_name(staged.generation + 1)
        if target.exists():
            fd = os.open(target, os.O_WRONLY | os.O_APPEND | getattr(os, "O_CLOEXEC", 0))
            try:
                write_all(fd, b"".join(frames))
                os.fsync(fd)
            finally:
                os.close(fd)
        else:
            _write(target, [log_.encode_header(), *frames])
        fsync_dir(target.parent)
        staged.frames += len(frames)
    staged.generation = at
    return at


def restore(store: ObjectStore, brain: str, epoch: int, brains_dir: Path, staged: Staged | None = None) -> int:
    """Rebuild ``brain`` (claimed at ``epoch``) under ``brains_dir`` from the object store; answers the generation
    it was rebuilt at. A local copy is set aside, never deleted. ``staged``: a :func:`stage` of it for ``epoch``,
    finished with the frames shipped since (or set aside, when a newer snapshot is to be restored instead)."""
    started = time.monotonic()
    at = -1
    if staged is not None and staged.brain == brain and staged.epoch == epoch:
        try:
            at = _catch_up(store, staged)
        except O.ShippedDamageError as exc:
            raise RestoreError(f"brain {brain}: {exc}") from None
    if at < 0:
        if staged is not None:  # staged for another epoch, or before a newer snapshot: only ever a staging copy
            shutil.rmtree(staged.path, ignore_errors=True)
        staged = stage(store, brain, epoch, brains_dir)
        at = staged.generation
    assert staged is not None
    target = brains_dir / brain
    if os.path.lexists(target):
        stale = _aside(target, f".stale-{brain}-e{epoch}")
        os.rename(target, stale)
        log.warning("brain %s: the local copy is stale (epoch %d restored); set aside as %s", brain, epoch, stale.name)
    os.rename(staged.path, target)
    fsync_dir(brains_dir)
    log.info(
        "brain %s restored at epoch %d: snapshot %d (epoch %d) and %d shipped frames, generation %d, in %.2f s",
        brain,
        epoch,
        staged.taken[0],
        staged.taken[1],
        staged.frames,
        at,
        time.monotonic() - started,
    )
    return at
