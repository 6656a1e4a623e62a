"""The writer lease: one writer per store, claimed and fenced through ``locks/``.

A claim is a small table of cases (docs/store-format.md, "The writer lease"):

    lease file   lock taken   close record matches   ->  outcome
    absent       yes          -                          writer, fresh
    present      yes          yes                        writer, leftover-after-clean-close
    present      yes          no                         writer, stale-after-crash (recovery runs)
    any          no (live)    -                          reader, BRAINY_WRITER_LOCKED
    other host, heartbeat < 30 s                         reader, BRAINY_WRITER_LOCKED
    force                                                writer, forced (lease file replaced)
"""

from __future__ import annotations

import fcntl
import heapq
import itertools
import json
import os
import socket
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from brainy.contract import refusals as R
from brainy.store.clock import now_ms  # noqa: F401  (lease.now_ms: what the pool reads a heartbeat against)
from brainy.store.files import fsync_dir

RECORD_SIZE = 512
HEARTBEAT_SECONDS = 5.0
REMOTE_STALE_MS = 30_000

LOCK = "_writer.lock"
CLOSE = "_writer.close"
HANDOFF = "_writer.handoff"


def read_record(path: Path) -> dict[str, Any] | None:
    """The lease record at ``path``; None when absent or empty; ValueError when unreadable."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    if not raw.strip():
        return None
    record = json.loads(raw)
    if not isinstance(record, dict):
        raise ValueError("lease record is not an object")
    # a record whose fields do not read is as unreadable as one that is not JSON: a claim judges nothing by it
    heartbeat, hostname = record.get("heartbeat", 0), record.get("hostname")
    if not isinstance(heartbeat, int) or isinstance(heartbeat, bool) or not isinstance(hostname, (str, type(None))):
        raise ValueError("lease record's hostname or heartbeat does not read")
    return record


def holder_of(record: dict[str, Any]) -> dict[str, Any]:
    return {"pid": record.get("pid"), "hostname": record.get("hostname"), "startedAt": record.get("startedAt")}


@dataclass
class Claim:
    """How an open came by its role: the writer block of the init door."""

    role: str  # "writer" | "reader"
    claim_path: str | None = None  # fresh | leftover-after-clean-close | stale-after-crash | forced
    record: dict[str, Any] | None = None
    holder: dict[str, Any] | None = None

    def writer_block(self) -> dict[str, Any]:
        if self.role == "writer":
            assert self.record is not None
            return {
                "role": "writer",
                "pid": self.record["pid"],
                "hostname": self.record["hostname"],
                "startedAt": self.record["startedAt"],
                "heartbeat": self.record["heartbeat"],
                "claimPath": self.claim_path,
            }
        return {"role": "reader", "refused": "BRAINY_WRITER_LOCKED", "holder": self.holder}


class Lease:
    """A held writer lease: the locked file, its fence, and its heartbeat."""

    def __init__(self, locks: Path, fd: int, record: dict[str, Any]) -> None:
        self.locks = locks
        self._fd = fd
        self.record = record
        st = os.fstat(fd)
        self._identity = (st.st_dev, st.st_ino)
        self._named = os.fspath(locks / LOCK)  # what fence_holds stats before every write, joined once
        self._stopped = False
        self._beating = threading.Lock()  # a beat and the release or abandon that ends the lease never overlap
        _BEATS.add(self)

    @property
    def path(self) -> Path:
        return self.locks / LOCK

    def fence_holds(self) -> bool:
        """True while the lease path still names the file this process locked."""
        try:
            st = os.stat(self._named)
        except FileNotFoundError:
            return False
        return (st.st_dev, st.st_ino) == self._identity

    def check_fence(self) -> None:
        if not self.fence_holds():
            raise R.WriterFenceLostError("this process's writer lease was claimed away; it writes nothing more")

    def beat(self) -> bool:
        """Refresh the record's heartbeat in place (the process's heartbeat thread calls it every
        ``HEARTBEAT_SECONDS``). False once the lease ended, its fence broke or its file refused the write: it is
        not beaten again."""
        with self._beating:
            if self._stopped or not self.fence_holds():
                return False
            self.record["heartbeat"] = now_ms()
            try:
                _write_record(self._fd, self.record)
            except OSError:
                return False
            return True

    def _stop_beating(self) -> None:
        with self._beating:  # a beat in progress finishes before the file is closed under it
            self._stopped = True

    def release(self, generation: int) -> bool:
        """Record the clean close, remove the lease file, unlock. Answers whether the record was written."""
        self._stop_beating()
        recorded = False
        if self.fence_holds():
            close = {
                "pid": self.record["pid"],
                "hostname": self.record["hostname"],
                "closedAt": now_ms(),
                "generation": generation,
                "fence": self.record["fence"],
            }
            _write_file(self.locks / CLOSE, json.dumps(close).encode())
            recorded = True
            os.unlink(self.path)
            fsync_dir(self.locks)
        fcntl.flock(self._fd, fcntl.LOCK_UN)
        os.close(self._fd)
        return recorded

    def abandon(self) -> None:
        """Drop the lease as a crash would: no close record (tests and fatal paths)."""
        self._stop_beating()
        os.close(self._fd)


class _Heartbeats:
    """Every lease this process holds, beaten on one thread, each ``HEARTBEAT_SECONDS`` after its last beat.

    One thread, not one per lease: a server keeps the lease of every brain it wrote to, evicted or not, and a
    thread a lease cost its stack and state, about 21 KB of resident memory each (1,000 idle threads, measured):
    21 MB for a sweep that wrote to 1,000 brains, charged to a pool budgeted for 50 of them."""

    def __init__(self) -> None:
        self._due: list[tuple[float, int, Lease]] = []  # (when, order, lease): a heap, the next beat first
        self._order = itertools.count()  # ties broken by arrival, never by comparing leases
        self._wake = threading.Condition()
        self._thread: threading.Thread | None = None

    def add(self, lease: Lease) -> None:
        with self._wake:
            heapq.heappush(self._due, (time.monotonic() + HEARTBEAT_SECONDS, next(self._order), lease))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="brainy-lease-heartbeat", daemon=True)
                self._thread.start()
            self._wake.notify()

    def _run(self) -> None:
        while True:
            with self._wake:
                while not self._due or self._due[0][0] > time.monotonic():
                    # an ended lease leaves the heap at its due time, at most one interval later
                    self._wake.wait(self._due[0][0] - time.monotonic() if self._due else None)
                _, _, lease = heapq.heappop(self._due)
            if lease.beat():  # outside the condition: a beat's fsync never holds up a claim's add
                with self._wake:
                    heapq.heappush(self._due, (time.monotonic() + HEARTBEAT_SECONDS, next(self._order), lease))


_BEATS = _Heartbeats()


def _write_record(fd: int, record: dict[str, Any]) -> None:
    data = json.dumps(record, separators=(",", ":")).encode()
    if len(data) > RECORD_SIZE:
        raise ValueError("lease record too long")
    os.pwrite(fd, data.ljust(RECORD_SIZE), 0)
    os.fsync(fd)


def _write_file(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)


def _new_record(store_id: str) -> dict[str, Any]:
    t = now_ms()
    return {
        "pid": os.getpid(),
        "hostname": socket.gethostname(),
        "startedAt": t,
        "heartbeat": t,
        "fence": os.urandom(16).hex(),
        "storeId": store_id,
    }


def claim(locks: Path, store_id: str, force: bool = False) -> tuple[Claim, Lease | None]:
    """Claim the writer lease of the store whose ``locks/`` directory this is. Never waits."""
    locks.mkdir(exist_ok=True)
    path = locks / LOCK
    for _ in range(16):  # the lease file can be swapped under us; retry on the file the path names now
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            try:
                record = read_record(path) or {}
            except ValueError:
                record = {}
            if force:
                return _force(locks, store_id)
            return Claim("reader", holder=holder_of(record)), None
        st, now = os.fstat(fd), None
        try:
            now = os.stat(path)
        except FileNotFoundError:
            pass
        if now is None or (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino):
            os.close(fd)  # locked a file that was just removed or replaced
            continue
        try:
            previous = read_record(path)
        except ValueError:
            previous = {"fence": None}  # unreadable and unlocked: its holder is gone
        if (
            previous
            and previous.get("hostname") not in (None, socket.gethostname())
            and now_ms() - previous.get("heartbeat", 0) < REMOTE_STALE_MS
            and not force
        ):
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)
            return Claim("reader", holder=holder_of(previous)), None
        if force and previous:
            path_taken = "forced"
        elif previous is None:
            path_taken = "fresh"
        else:
            try:
                close = json.loads((locks / CLOSE).read_bytes())
            except (OSError, ValueError):
                close = None
            matched = isinstance(close, dict) and close.get("fence") == previous.get("fence") and previous.get("fence")
            path_taken = "leftover-after-clean-close" if matched else "stale-after-crash"
        record = _new_record(store_id)
        (locks / HANDOFF).touch()
        os.ftruncate(fd, 0)
        _write_record(fd, record)
        _discard(locks / CLOSE)
        _discard(locks / HANDOFF)
        fsync_dir(locks)
        return Claim("writer", path_taken, record), Lease(locks, fd, record)
    raise RuntimeError("the writer lease kept changing hands during the claim")


def _force(locks: Path, store_id: str) -> tuple[Claim, Lease]:
    """Replace a live holder's lease file with ours: its fence breaks at its next commit."""
    (locks / HANDOFF).touch()
    fsync_dir(locks)
    tmp = locks / (LOCK + ".forced")
    fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    record = _new_record(store_id)
    _write_record(fd, record)
    os.replace(tmp, locks / LOCK)
    _discard(locks / CLOSE)
    _discard(locks / HANDOFF)
    fsync_dir(locks)
    return Claim("writer", "forced", record), Lease(locks, fd, record)


def _discard(path: Path) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def handoff_in_flight(locks: Path) -> bool:
    return (locks / HANDOFF).exists()
