"""The backup door's ground: the snapshots root (``--snapshots-dir``), a run's target, and the runs.

Seed 001, "The backup door": ``host.persist`` takes a snapshot NAME, never a path (a caller-named path
would be a write-anywhere primitive on this host's disk), and writes ``<root>/<brain>/<name>``.

* The flag is optional and never defaulted. Absent, the door refuses SnapshotRootNotConfiguredError
  and every other door serves.
* The host never creates the root, and never deletes anything under it: a failed run leaves what it
  wrote, for the operator to look at.
* A root equal to, inside or containing the brains directory refuses to start
  (SnapshotRootUnusableError); the door repeats the check on real paths, since a symlink can move
  after the start.
* Before a run is registered, in this order: the name is one legal segment; the root is usable;
  neither the brain's folder nor the target is a symlink; the target holds no file. Each is a
  synchronous refusal, never a failed run.
* Nothing about the root's absolute path reaches the wire: refusal text shows ``<snapshots-dir>``,
  and the whole text goes to this host's log.

A run copies one consistent generation (``brainy.store.backup.freeze``: taken when the run is
registered, so its ``generation`` is known at once), then attaches the copy read-only and checks it
opens at that generation before it is ``done``.

Runs outlive the process: each state a run reaches (``queued``, ``running``, then ``done`` or
``failed``) is appended, as its ``persistStatus`` entry on one JSON line, to ``<root>/<brain>/.runs.jsonl``
(``RECORDS``; a leading dot, so no snapshot name can be it) and flushed to disk. The file is only ever
appended to, as nothing under the root is ever deleted or rewritten. After a restart ``persistStatus``
answers each name's last line; a run whose last line is ``queued`` or ``running`` was cut off by the
stop and answers ``failed`` with ``ShuttingDownError`` (what it wrote is left in place, and its target,
no longer empty, refuses a new run of that name). A torn last line is skipped.
"""

from __future__ import annotations

import json
import logging
import os
import re
import stat
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from brainy.contract import refusals as R
from brainy.store.backup import FileSet

log = logging.getLogger("brainy.backups")

SCRUBBED = "<snapshots-dir>"
RECORDS = ".runs.jsonl"  # beside a brain's snapshots: every state its runs reached, one JSON line each
# one legal segment, the brain-name law: no "/", no NUL, not starting with ".", at most 64 characters
SEGMENT = re.compile(r"[^/.\x00][^/\x00]{0,63}")


def _overlaps(a: Path, b: Path) -> bool:
    """Whether real paths ``a`` and ``b`` are equal or one holds the other."""
    return a == b or a in b.parents or b in a.parents


def unusable(root: Path, brains_dir: Path | None) -> str | None:
    """Why ``root`` cannot be the snapshots root, on real paths, or None when it can."""
    real = Path(os.path.realpath(root))
    if not real.is_dir():
        return "is not a directory (the host never creates it)"
    if brains_dir is not None and _overlaps(real, Path(os.path.realpath(brains_dir))):
        return "is the brains directory, or is inside it, or contains it"
    return None


def check_start(root: Path, brains_dir: Path | None) -> None:
    """The start's check: a root that overlaps the brains directory refuses the start by name. (A root that is
    not there yet is left to the door: the host never creates it, and an operator may mount it later.)"""
    if brains_dir is not None and _overlaps(Path(os.path.realpath(root)), Path(os.path.realpath(brains_dir))):
        raise R.SnapshotRootUnusableError(
            f"--snapshots-dir {root} is the brains directory {brains_dir}, or is inside it, or contains it"
        )


def _lstat(path: Path) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except FileNotFoundError:
        return None


@dataclass
class Run:
    brain: str
    name: str
    generation: int
    started_at: int
    state: str = "queued"
    finished_at: int | None = None
    files: int | None = None
    bytes: int | None = None
    error: R.Refusal | dict[str, Any] | None = None  # a refusal, or the wire form a record kept of one
    thread: threading.Thread | None = field(default=None, repr=False)

    def to_wire(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name,
            "state": self.state,
            "startedAt": self.started_at,
            "generation": self.generation,
        }
        if self.finished_at is not None:
            out["finishedAt"] = self.finished_at
        if self.files is not None:
            out["files"], out["bytes"] = self.files, self.bytes
        if self.error is not None:
            out["error"] = self.error.to_wire() if isinstance(self.error, R.Refusal) else self.error
        return out

    @classmethod
    def recorded(cls, brain: str, line: dict[str, Any]) -> Run:
        """A run from its last record, written by an earlier process: one it left in flight was cut off."""
        run = cls(
            brain,
            line["name"],
            int(line["generation"]),
            int(line["startedAt"]),
            state=line["state"],
            finished_at=line.get("finishedAt"),
            files=line.get("files"),
            bytes=line.get("bytes"),
            error=line.get("error"),
        )
        if run.state in ("queued", "running"):
            run.state = "failed"
            run.error = R.ShuttingDownError(
                "the server stopped before this run finished; what it wrote is left in place"
            ).to_wire()
        return run


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class Backups:
    """The snapshots root, if configured, and every run this process registered."""

    def __init__(self, root: Path | None, brains_dir: Path | None) -> None:
        self.root = root
        self.brains_dir = brains_dir
        self._runs: dict[tuple[str, str], Run] = {}
        self._read: set[str] = set()  # the brains whose records this process has read
        self._lock = threading.Lock()
        # a fleet node with --object-store and no --snapshots-dir: a run uploads the snapshot instead (brain, name,
        # files) -> (files, bytes) (brainy/host/shipped.py; docs/fleet.md "When things are shipped")
        self.remote: Callable[[str, str, FileSet], tuple[int, int]] | None = None

    def configured(self) -> Path:
        if self.root is None and self.remote is not None:
            return Path()  # runs go to the object store: there is no root to check
        if self.root is None:
            raise R.SnapshotRootNotConfiguredError("this server was started without --snapshots-dir")
        return self.root

    def _refuse(self, refusal: R.Refusal, detail: str) -> R.Refusal:
        log.warning("persist refused: %s: %s", refusal.name, detail)  # the whole text, real paths and all
        return refusal

    def target(self, brain: str, name: Any) -> Path:
        """Every check of the seeds, in order, then the target directory, made (empty) and ready for a run."""
        root = self.configured()
        if not isinstance(name, str) or not SEGMENT.fullmatch(name):
            raise R.SnapshotNameInvalidError(
                f"{name!r} is not one legal path segment (no '/', not starting with '.', at most 64 characters)",
                snapshot=str(name),
            )
        why = unusable(root, self.brains_dir)
        if why is not None:
            raise self._refuse(R.SnapshotRootUnusableError(f"{SCRUBBED} {why}"), f"{root} {why}")
        folder, target = root / brain, root / brain / name
        shown = f"{SCRUBBED}/{brain}/{name}"
        for path, what in ((folder, f"{SCRUBBED}/{brain}"), (target, shown)):
            st = _lstat(path)
            if st is not None and stat.S_ISLNK(st.st_mode):
                raise self._refuse(R.SnapshotTargetUnsafeError(f"{what} is a symlink"), f"{path} is a symlink")
            if st is not None and not stat.S_ISDIR(st.st_mode):
                raise self._refuse(
                    R.SnapshotTargetNotEmptyError(f"{what} is a file, not a folder"), f"{path} is not a directory"
                )
        self._recall(brain)
        with self._lock:
            held = self._runs.get((brain, name))
            if held is not None and held.state in ("queued", "running"):
                raise R.SnapshotTargetNotEmptyError(f"{shown} is the target of a run in flight")
        if _lstat(target) is not None and any(target.iterdir()):
            raise self._refuse(R.SnapshotTargetNotEmptyError(f"{shown} already holds files"), f"{target} is not empty")
        folder.mkdir(exist_ok=True)
        target.mkdir(exist_ok=True)
        return target

    def start(self, brain: str, name: str, target: Path, files: FileSet) -> Run:
        """Register a run copying ``files`` into ``target`` and start it on a thread of its own."""
        run = Run(brain, name, files.generation, _now_ms())
        run.thread = threading.Thread(
            target=self._copy, args=(run, target, files), name=f"brainy-persist-{brain}", daemon=True
        )
        with self._lock:
            self._runs[(brain, name)] = run
        self._record(run)
        run.thread.start()
        return run

    def start_remote(self, brain: str, name: Any, files: FileSet) -> Run:
        """Register a run uploading ``files`` to the object store (:attr:`remote`) and start it on its own thread.
        The name is checked as a directory run's is; the runs are this process's (no records file)."""
        assert self.remote is not None
        if not isinstance(name, str) or not SEGMENT.fullmatch(name):
            files.close()
            raise R.SnapshotNameInvalidError(
                f"{name!r} is not one legal path segment (no '/', not starting with '.', at most 64 characters)",
                snapshot=str(name),
            )
        with self._lock:
            held = self._runs.get((brain, name))
            if held is not None:
                files.close()
                raise R.SnapshotTargetNotEmptyError(f"a run named {name!r} of {brain!r} exists already")
            run = Run(brain, name, files.generation, _now_ms())
            self._runs[(brain, name)] = run
        run.thread = threading.Thread(
            target=self._upload, args=(run, files), name=f"brainy-persist-{brain}", daemon=True
        )
        run.thread.start()
        return run

    def _upload(self, run: Run, files: FileSet) -> None:
        assert self.remote is not None
        run.state = "running"
        try:
            count, size = self.remote(run.brain, run.name, files)
            run.files, run.bytes, run.finished_at = count, size, _now_ms()
            run.state = "done"
            log.info(
                "persist %s/%s: generation %d, %d files, %d bytes, to the object store",
                run.brain,
                run.name,
                run.generation,
                count,
                size,
            )
        except Exception as exc:  # a failed run carries its refusal
            log.error("persist %s/%s failed: %s", run.brain, run.name, exc, exc_info=exc)
            run.error = (
                exc if isinstance(exc, R.Refusal) else R.InternalError(str(exc), ref=f"persist:{run.brain}/{run.name}")
            )
            run.finished_at = _now_ms()
            run.state = "failed"
        finally:
            files.close()

    def _records(self, brain: str) -> Path | None:
        """``<root>/<brain>/.runs.jsonl``, unless the brain's folder is not a plain directory (never followed)."""
        if self.root is None:
            return None
        st = _lstat(self.root / brain)
        return self.root / brain / RECORDS if st is not None and stat.S_ISDIR(st.st_mode) else None

    def _record(self, run: Run) -> None:
        """Append the state ``run`` reached to its brain's records, durably. A record that cannot be written is
        narrated and the run goes on: the copy, not its record, is the backup."""
        path = self._records(run.brain)
        if path is None:
            return
        line = json.dumps(run.to_wire(), separators=(",", ":")).encode() + b"\n"
        try:
            fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o644)
            try:
                size = os.fstat(fd).st_size
                if size and os.pread(fd, 1, size - 1) != b"\n":  # a torn line: ours starts a line of its own
                    line = b"\n" + line
                os.write(fd, line)
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as exc:
            log.error("persist %s/%s: its %s state was not recorded: %s", run.brain, run.name, run.state, exc)

    def _recall(self, brain: str) -> None:
        """Read ``brain``'s records once: the runs an earlier process registered, each at its last state."""
        with self._lock:
            if brain in self._read:
                return
            self._read.add(brain)
        path = self._records(brain)
        last: dict[str, dict[str, Any]] = {}
        try:
            with open(path, "rb") as f:  # type: ignore[arg-type]
                for raw in f:
                    try:
                        line = json.loads(raw)
                        last[line["name"]] = line
                    except (ValueError, TypeError, KeyError):
                        continue  # a torn last line: the append a stop cut short
        except (OSError, TypeError):
            return
        with self._lock:
            for name, line in last.items():
                if (brain, name) not in self._runs:
                    try:
                        self._runs[(brain, name)] = Run.recorded(brain, line)
                    except (KeyError, TypeError, ValueError):
                        log.warning("persist %s/%s: its record does not read; left out", brain, name)

    def _copy(self, run: Run, target: Path, files: FileSet) -> None:
        from brainy.engine import Brain  # the copy is checked by opening it as a store

        run.state = "running"
        self._record(run)
        try:
            with files:
                files.copy_to(target)
                count, size = len(files.files), files.bytes
            with Brain.attach(target, name=run.brain) as copy:
                if copy.head != run.generation:
                    raise R.StoreUnservableError(
                        f"the copy opens at generation {copy.head}, not {run.generation}",
                        reason="unreadable-generation-stamp",
                    )
            # finishedAt before the state: a poll on another thread never sees a finished run without its time
            run.files, run.bytes, run.finished_at = count, size, _now_ms()
            run.state = "done"
            log.info(
                "persist %s/%s: generation %d, %d files, %d bytes, into %s",
                run.brain,
                run.name,
                run.generation,
                count,
                size,
                target,
            )
        except Exception as exc:  # a failed run carries its refusal; nothing it wrote is removed
            text = str(exc)
            log.error("persist %s/%s failed: %s", run.brain, run.name, text, exc_info=exc)
            scrubbed = text.replace(str(self.root), SCRUBBED) if self.root is not None else text
            run.error = (
                exc
                if isinstance(exc, R.Refusal) and str(self.root) not in text
                else R.InternalError(scrubbed, ref=f"persist:{run.brain}/{run.name}")
            )
            run.finished_at = _now_ms()
            run.state = "failed"
        finally:
            self._record(run)

    def runs(self, brain: str, name: str | None = None) -> list[Run]:
        """The runs of ``brain`` (one, when named), oldest first; a name no run has is SnapshotRunNotFoundError."""
        self.configured()
        self._recall(brain)
        with self._lock:
            found = [r for (b, _), r in self._runs.items() if b == brain and (name is None or r.name == name)]
        if name is not None and not found:
            raise R.SnapshotRunNotFoundError(f"no backup run of {brain!r} is named {name!r}", snapshot=name)
        return sorted(found, key=lambda r: r.started_at)

    def wait(self, timeout: float = 30.0) -> None:
        """Let every run in flight finish (the stop sequence), bounded."""
        deadline = time.monotonic() + timeout
        for run in list(self._runs.values()):
            if run.thread is not None:
                run.thread.join(max(0.0, deadline - time.monotonic()))
