"""A writer's maintenance: flushing the memtable to a table, compacting the tables, the MANIFEST swap, and
sweeping the blob records no file row names (docs/store-format.md, "The sweep").

One background thread per writer wakes when the memtable is full or the tables are many, and
flushes or compacts; after a crash recovery it flushes once at once, so the replayed tail is not
replayed again by the next open. A table never holds a commit the log might lose: the flush waits for the
fsync of the last commit it takes. Compaction merges every table into one and keeps every
version, so every generation stays readable. Either step ends in one atomic MANIFEST swap, and
open maps of replaced tables keep serving the readers that hold them.
"""

from __future__ import annotations

import heapq
import logging
import threading
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, Protocol

from brainy.contract import refusals as R
from brainy.store.blobs import BlobStore, Swept
from brainy.store.commit_path import CommitPath
from brainy.store.counts import Ledger
from brainy.store.directory import FORMAT, ledger_name
from brainy.store.files import write_document
from brainy.store.head import HeadState
from brainy.store.memtable import Memtable
from brainy.store.sources import Sources
from brainy.store.sstable import Table, write_table

FLUSH_BYTES = 8 << 20
COMPACT_AT = 5  # compact (the newest run of tables, compact_run) once there are this many
SWEEP_AT = 64 << 20  # sweep the blob packs once refused writes have stored this much (and after a crash)

# each step of a flush and a compaction is named at DEBUG as it is reached, so a crash test in another process can
# kill the writer between two named steps (tests/procs/writer.py prints them); nothing is said at INFO
log = logging.getLogger(__name__)


class Persists(Protocol):
    """What keeps snapshots of an index beside the tables, as a flush sees it (the brain's followers, behind
    brainy/engine/followers.py)."""

    def prepare_flush(self) -> None:
        """Before a flush takes a memtable that holds rows, outside the commit lock."""

    def persist(self) -> None:
        """The snapshots stamped at or above the generation the flush is about to make the flushed one, written
        before the MANIFEST swap."""

    def persist_flushed(self) -> None:
        """What is written once the swap made the flush's generation the flushed one."""


class Maintenance:
    """The flush, compaction and blob sweep of the store at ``path``, over its ``head``: ``commits`` waited on
    (a table never holds a commit the log might lose), ``followers`` persisted at each flush, ``blobs`` swept
    keeping what ``referenced`` names (called when the sweep needs it). ``flush_bytes`` and ``compact_at`` are
    when the thread flushes and compacts.

    Every handle has one: only a writer's runs the thread (:meth:`start`), and only a writer's has a log to
    flush past."""

    def __init__(
        self,
        path: Path,
        head: HeadState,
        commits: CommitPath,
        followers: Persists,
        blobs: BlobStore,
        referenced: Callable[[], Iterable[str]],
        flush_bytes: int = FLUSH_BYTES,
        compact_at: int = COMPACT_AT,
    ) -> None:
        self.path = path
        self.head = head
        self.commits = commits
        self.followers = followers
        self.blobs = blobs
        self.referenced = referenced
        self.flush_bytes = flush_bytes
        self.compact_at = compact_at
        self.lock = threading.Lock()  # one flush, compaction or sweep at a time
        self.error: BaseException | None = None  # what stopped the thread: writes refuse from then on, naming it
        self.flush_due = False  # a recovery replayed a tail: the thread flushes it at once
        self.sweep_due = False  # a crash may have left blobs no commit references: the thread sweeps
        self.swept: Swept | None = None  # what the last blob sweep did
        self._wake = threading.Event()
        self._stopping = False
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Run the thread; it goes to work at once when a flush or a sweep is due."""
        self._thread = threading.Thread(target=self._maintain, name="brainy-maintenance", daemon=True)
        self._thread.start()
        if self.flush_due or self.sweep_due:
            self._wake.set()

    def stop(self) -> None:
        """Stop the thread (if it runs) and wait for it: what it is doing ends first."""
        if self._thread is not None:
            self._stopping = True
            self._wake.set()
            self._thread.join()

    def committed(self) -> None:
        """A commit was applied (the caller holds the commit lock): wake the thread once the memtable is full."""
        if self.head.mem.bytes >= self.flush_bytes:
            self._wake.set()

    def _maintain(self) -> None:
        while not self._stopping:
            self._wake.wait(1.0)
            self._wake.clear()
            if self._stopping:
                return
            try:
                if self.head.mem.bytes >= self.flush_bytes or self.flush_due:
                    self.flush_due = False
                    self.flush()
                if len(self.head.sources.tables) >= self.compact_at:
                    self.compact(tiered=True)
                if self.sweep_due or self.blobs.orphaned >= SWEEP_AT:
                    self.sweep_due = False
                    self.sweep_blobs()
            except BaseException as exc:  # writes refuse from now on, naming this
                self.error = exc
                return

    def flush(self) -> bool:
        """Write the memtable out as a table now. Answers whether there was anything to write."""
        head = self.head
        with self.lock:
            if len(head.mem):
                self.followers.prepare_flush()
            with head.commit_lock:
                mem = head.mem
                if not len(mem):
                    return False
                generation, seq = head.applied, head.last_seq
                ledger, next_dense, timestamp = head.ledger.copy(), head.next_dense, head.last_ts
                assert self.commits.log is not None
                at = self.commits.log.position()  # where generation's frame ends: the next open reads from there
                head.mem = Memtable()
                s = head.sources
                head.sources = Sources(head.mem, (mem,) + s.frozen, s.tables)
            log.debug("flush froze generation %d", generation)
            if seq:
                self.commits.durable_at(seq, generation)  # a table never holds a commit the log might lose
            number = head.next_table
            head.next_table += 1
            entry = write_table(self.path / "sst" / f"{number:010d}.sst", mem.entries())
            entry["file"] = f"sst/{number:010d}.sst"
            table = Table(self.path / entry["file"])
            log.debug("flush wrote %s", entry["file"])
            tables = [entry] + list(head.manifest["tables"])
            # the snapshots go first, stamped at or above the generation this flush makes the flushed one: a
            # crash before the swap leaves them within the replayed tail's reach, where written after it, a
            # crash between the two left the last ones behind the flushed generation and the next open
            # rebuilt them from the rows
            self.followers.persist()
            self._write_manifest(
                generation, timestamp, next_dense, ledger, tables, {"segment": at.first, "offset": at.offset}
            )
            log.debug("flush swapped the manifest")
            with head.commit_lock:
                s = head.sources
                head.sources = Sources(s.mem, tuple(m for m in s.frozen if m is not mem), (table,) + s.tables)
            self.followers.persist_flushed()
            log.debug("flush done")
            return True

    def compact(self, tiered: bool = False) -> bool:
        """Merge every table into one, keeping every version; ``tiered`` (the maintenance thread's): only the newest
        run :func:`compact_run` picks. Answers whether it merged anything."""
        head = self.head
        with self.lock:
            every = head.sources.tables
            old = every[: compact_run([t.size for t in every])] if tiered else every
            if len(old) < 2:
                return False
            log.debug("compact merges %d tables", len(old))
            number = head.next_table
            head.next_table += 1
            name = f"sst/{number:010d}.sst"
            entry = write_table(self.path / name, _merge(old))
            entry["file"] = name
            table = Table(self.path / name)
            log.debug("compact wrote %s", name)
            manifest = head.manifest
            self._write_manifest(
                manifest["generation"],
                manifest["timestamp"],
                manifest["nextDenseInt"],
                None,
                [entry] + manifest["tables"][len(old) :],
                manifest.get("logAt"),
            )
            with head.commit_lock:
                s = head.sources
                head.sources = Sources(s.mem, s.frozen, (table,) + s.tables[len(old) :])
            log.debug("compact swapped the manifest")
            for t in old:  # open maps keep serving readers that still hold them
                (t.path).unlink()
            log.debug("compact done")
            return True

    def sweep_blobs(self, garbage_share: float = 0.5) -> Swept | None:
        """Collect the blob records no file row of any retained generation names, nor a write in flight
        (``BlobStore.sweep``; ``garbage_share``: how much of a pack must be garbage for it to be rewritten).
        None when a referenced recipe does not read: a sweep that cannot tell which chunks a file needs
        collects nothing (the read of that file names the damage). The answer is kept as ``swept``."""
        with self.lock:
            try:
                self.swept = self.blobs.sweep(self.referenced, garbage_share)
            except R.BlobCorruptError:
                self.swept = None
            return self.swept

    def _write_manifest(
        self,
        generation: int,
        timestamp: int,
        next_dense: int,
        ledger: Ledger | None,
        tables: list[dict[str, Any]],
        log_at: dict[str, int] | None,
    ) -> None:
        head = self.head
        old = head.manifest
        ledger_file = old["ledger"]
        if ledger is not None and generation != old["generation"]:
            ledger_file = ledger_name(generation)
            write_document(self.path / ledger_file, ledger.to_doc())
        manifest = {
            "format": FORMAT,
            "storeId": old["storeId"],
            "generation": generation,
            "timestamp": timestamp,
            "nextTable": head.next_table,
            "nextDenseInt": next_dense,
            "ledger": ledger_file,
            "tables": tables,
        }
        if log_at is not None:
            manifest["logAt"] = log_at
        write_document(self.path / "MANIFEST", manifest)
        head.flushed_to(manifest)
        if ledger_file != old["ledger"]:
            (self.path / old["ledger"]).unlink(missing_ok=True)


def compact_run(sizes: list[int]) -> int:
    """How many of the newest tables (``sizes`` newest first) a tiered compaction merges: the newest, then each
    older one while it is no larger than all those before it together. Merging every table rewrote the whole store
    each time a few small flushes had piled up (at 1,000,000 entities 430 MB every fourth flush); so a byte is
    rewritten only when its table at least doubles, O(log(store / flush)) times in all, and the table count stays
    about log2 of that ratio."""
    run, held = 1, sizes[0] if sizes else 0
    while run < len(sizes) and sizes[run] <= held:
        held += sizes[run]
        run += 1
    return run


def _merge(tables: tuple[Table, ...]) -> Iterator[tuple[bytes, int, bytes]]:
    """Every version of every table, key ascending then generation descending.

    Tables cover disjoint generation ranges, newest first, so for one key the
    newer table's versions all come before the older table's.
    """
    streams = [
        ((key, rank, -gen, gen, value) for key, gen, value in t.scan(b"", None)) for rank, t in enumerate(tables)
    ]
    for key, _, _, gen, value in heapq.merge(*streams):
        yield key, gen, value
