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
import time
from pathlib import Path

from brainy.fleet import objects as O
from brainy.fleet.objectstore import ObjectStore
from brainy.store import log as log_
from brainy.store.directory import FOLDERS
from brainy.store.files import fsync_dir, write_all

log = logging.getLogger("brainy.fleet.restore")


class RestoreError(Exception):
    """The object store holds no history this brain can be rebuilt from (no snapshot, or damage)."""


def _write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o644)
    try:
        write_all(fd, data)
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


def restore(store: ObjectStore, brain: str, epoch: int, brains_dir: Path) -> int:
    """Rebuild ``brain`` (claimed at ``epoch``) under ``brains_dir`` from the object store; answers the generation
    it was rebuilt at. A local copy is set aside, never deleted."""
    started = time.monotonic()
    try:
        listing = O.read_listing(brain, store.list(O.brain_prefix(brain)))
        bases = {}
        for marked, name in listing.markers.items():
            if marked < epoch:
                data = store.get(name)
                if data is not None:
                    bases[marked] = int(O.read_marker(data)["base"])
        plan = O.plan(listing, bases, epoch)
        if plan.snapshot is None:
            raise RestoreError(f"brain {brain}: the object store holds no snapshot of it that is history")
        snap_data = store.get(plan.snapshot.name)
        if snap_data is None:
            raise RestoreError(f"brain {brain}: snapshot {plan.snapshot.name} is listed but not there")
        index, files = O.decode_snapshot(snap_data)
        frames: list[bytes] = []
        at = plan.snapshot.generation
        for segment, upto in plan.segments:
            data = store.get(segment.name)
            if data is None:
                break  # listed, then gone: the history ends before it
            for generation, payload in O.decode_segment(data, segment.first, segment.last):
                if at < generation <= upto:
                    frames.append(log_.encode_frame(payload))
                    at = generation
    except O.ShippedDamageError as exc:
        raise RestoreError(f"brain {brain}: {exc}") from None
    target = brains_dir / brain
    staging = _aside(target, f".arriving-{brain}-e{epoch}")
    staging.mkdir()
    for folder in FOLDERS:
        (staging / folder).mkdir(exist_ok=True)
    # the frames after the snapshot follow its last log segment, which ends with the snapshot's generation's frame
    # (a snapshot's log is cut at a whole frame): the log reads on across them as it was written
    logs = sorted(name for name, _ in files if name.startswith("log/") and name.endswith(".log"))
    tail = b"".join(frames)
    for name, data in sorted(files, key=lambda f: f[0] == "IDENTITY"):  # IDENTITY last: without it, no store
        _write(staging / name, data + tail if logs and name == logs[-1] else data)
    if tail and not logs:
        first = plan.snapshot.generation + 1
        _write(staging / "log" / log_.segment_name(first), log_.encode_header() + tail)
    for folder in {str(Path(n).parent) for n, _ in files} | set(FOLDERS):
        fsync_dir(staging / folder)
    fsync_dir(staging)
    if os.path.lexists(target):
        stale = _aside(target, f".stale-{brain}-e{epoch}")
        os.rename(target, stale)
        log.warning("brain %s: the local copy is stale (epoch %d restored); set aside as %s", brain, epoch, stale.name)
    os.rename(staging, target)
    fsync_dir(brains_dir)
    log.info(
        "brain %s restored at epoch %d: snapshot %d (epoch %d) and %d shipped frames, generation %d, in %.2f s",
        brain,
        epoch,
        plan.snapshot.generation,
        plan.snapshot.epoch,
        len(frames),
        at,
        time.monotonic() - started,
    )
    return at
