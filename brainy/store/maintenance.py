"""A writer's maintenance: flushing the memtable to a table, compacting the tables, the MANIFEST swap, and
sweeping the blob records no file row names (docs/store-format.md, "The sweep").

One background thread per writer wakes when the memtable is full or the tables are many, and
flushes or compacts; after a crash recovery it flushes once at once, so the replayed tail is not
replayed again by the next open. A table never holds a commit the log might lose: the flush waits for the
fsync of the last commit it takes. Compaction merges tables and keeps every version a read at or above
the history horizon needs; the sealed log segments the feed retention lets go are deleted
(docs/store-format.md, "Horizons"). Each step ends in one atomic MANIFEST swap, and open maps of
replaced tables keep serving the readers that hold them.
"""

from __future__ import annotations

import heapq
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from brainy.contract import refusals as R
from brainy.store import horizons as H
from brainy.store import keys as K
from brainy.store import log as log_
from brainy.store import rows
from brainy.store.blobs import BlobStore, Swept
from brainy.store.commit_path import CommitPath
from brainy.store.counts import Ledger
from brainy.store.directory import FORMAT, ledger_name
from brainy.store.files import write_document
from brainy.store.head import HeadState
from brainy.store.memtable import Memtable
from brainy.store.sources import Sources
from brainy.store.sstable import Table, write_table
from brainy.store.workers import behind_the_requests

FLUSH_BYTES = 8 << 20
# The thread runs at this nice value (its own, brainy/store/workers.py): no request waits for a flush, so a burst of
# writes keeps the core and the flush takes the time between. At 10 it still held the core past a request's wakeup
# often enough to cost the served ingest over one connection (perf/bench_ingest.py, five rounds each: msgpack
# median 47.5k -> 49.0k rows a second, h2 x4 48.2k -> 51.6k); at 19, the lowest, it shares the idle time with the
# vector graph's catch-up. A memtable past STALL_FLUSHES flushes' worth while the flush is behind holds the next
# commits back (:meth:`Maintenance.wait_for_room`), so the memory a long burst holds levels off at the pace the
# flush keeps, and a core the requests keep busy frees itself for the flush; a commit waits at most
# STALL_WAIT_SECONDS, then goes ahead (logged).
MAINTENANCE_NICE = 19
STALL_FLUSHES = 8
STALL_WAIT_SECONDS = 30.0
COMPACT_AT = 5  # compact (the newest run of tables, compact_run) once there are this many
SWEEP_AT = 64 << 20  # sweep the blob packs once refused writes have stored this much (and after a crash)
HORIZON_EVERY_SECONDS = 60.0  # how often a quiet writer looks whether the feed retention passed a segment

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


@dataclass
class _Frozen:
    """A memtable a flush froze, and the head as it stood then: what its table and MANIFEST record."""

    mem: Memtable
    generation: int
    seq: int
    ledger: Ledger
    next_dense: int
    timestamp: int
    at: log_.Position  # where generation's frame ends in the log


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
        horizons: H.Horizons | None = None,
    ) -> None:
        self.path = path
        self.head = head
        self.commits = commits
        self.followers = followers
        self.blobs = blobs
        self.referenced = referenced
        self.flush_bytes = flush_bytes
        self.compact_at = compact_at
        self.horizons = horizons or H.Horizons()
        self.lock = threading.Lock()  # one flush, compaction or sweep at a time
        self.error: BaseException | None = None  # what stopped the thread: writes refuse from then on, naming it
        self.flush_due = False  # a recovery replayed a tail: the thread flushes it at once
        self.sweep_due = False  # a crash may have left blobs no commit references: the thread sweeps
        self.swept: Swept | None = None  # what the last blob sweep did
        self.dropped = 0  # versions the compactions dropped under the history horizon, since the open
        self.trimmed = 0  # log segments deleted under the feed retention, since the open
        self._horizon_at = 0.0  # when the thread last trimmed the log (time.monotonic)
        # a flush frozen whose last commit's acknowledgement was refused: written by the next flush (:meth:`flush`)
        self._held: _Frozen | None = None
        self._wake = threading.Event()
        self._room = threading.Condition()  # notified when a flush takes the memtable, and when the thread ends
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
            self._make_room()

    def committed(self) -> None:
        """A commit was applied (the caller holds the commit lock): wake the thread once the memtable is full."""
        if self.head.mem.bytes >= self.flush_bytes:
            self._wake.set()

    @property
    def stall_bytes(self) -> int:
        """The memtable's size past which the next commit waits for the flush."""
        return STALL_FLUSHES * self.flush_bytes

    def behind(self) -> bool:
        """Whether the next commit waits for the flush (:meth:`wait_for_room`): the memtable holds ``stall_bytes``
        and the thread is there to flush it."""
        return (
            self.head.mem.bytes >= self.stall_bytes
            and self._thread is not None
            and not self._stopping
            and self.error is None
        )

    def wait_for_room(self, seconds: float = STALL_WAIT_SECONDS) -> None:
        """Before a commit, holding no lock of the store: wait while the flush is :meth:`behind`, at most
        ``seconds`` (then the commit goes ahead: a write is held back, never refused, for the flush's pace)."""
        deadline = time.monotonic() + seconds
        with self._room:
            while self.behind():
                left = deadline - time.monotonic()
                if left <= 0:
                    log.warning(
                        "a commit waited %.0f s for the flush (memtable %d bytes) and goes ahead",
                        seconds,
                        self.head.mem.bytes,
                    )
                    return
                self._room.wait(left)

    def _make_room(self) -> None:
        with self._room:
            self._room.notify_all()

    def _maintain(self) -> None:
        behind_the_requests(MAINTENANCE_NICE)
        try:
            self._maintaining()
        finally:
            self._make_room()  # whatever ended the thread, no commit waits for it

    def _maintaining(self) -> None:
        while not self._stopping:
            self._wake.wait(1.0)
            self._wake.clear()
            if self._stopping:
                return
            try:
                flushed = False
                if self.head.mem.bytes >= self.flush_bytes or self.flush_due:
                    self.flush_due = False
                    flushed = self.flush(keep=True)
                if len(self.head.sources.tables) >= self.compact_at:
                    self.compact(tiered=True)
                if flushed or time.monotonic() - self._horizon_at >= HORIZON_EVERY_SECONDS:
                    self.trim_log()
                if self.sweep_due or self.blobs.orphaned >= SWEEP_AT:
                    self.sweep_due = False
                    self.sweep_blobs()
            except BaseException as exc:  # writes refuse from now on, naming this
                self.error = exc
                return

    def flush(self, keep: bool = False) -> bool:
        """Write the memtable out as a table now. Answers whether there was anything to write.

        The table waits for its last commit to be acknowledged (durable, and with a shipper shipped: a table
        never holds a commit the log, or a failover, might lose). When that acknowledgement is refused (the
        object store away under ``--ship sync``), the frozen memtable is held, still read, and the next flush
        writes it before freezing another: with ``keep`` (the maintenance thread's) this one answers False and
        is tried again; without, the refusal is raised."""
        head = self.head
        with self.lock:
            if self._held is None:
                if len(head.mem):
                    self.followers.prepare_flush()
                with head.commit_lock:
                    mem = head.mem
                    if not len(mem):
                        return False
                    assert self.commits.log is not None
                    self._held = _Frozen(
                        mem,
                        head.applied,
                        head.last_seq,
                        head.ledger.copy(),
                        head.next_dense,
                        head.last_ts,
                        self.commits.log.position(),  # where generation's frame ends: the next open reads on there
                    )
                    head.mem = Memtable()
                    s = head.sources
                    head.sources = Sources(head.mem, (mem,) + s.frozen, s.tables)
                self._make_room()
                log.debug("flush froze generation %d", self._held.generation)
            held = self._held
            mem, generation, seq = held.mem, held.generation, held.seq
            ledger, next_dense, timestamp, at = held.ledger, held.next_dense, held.timestamp, held.at
            if seq:
                try:
                    self.commits.durable_at(seq, generation)
                except R.Refusal as exc:
                    if not keep:
                        raise
                    log.warning(
                        "the flush of generation %d waits for its acknowledgement, refused: %s", generation, exc
                    )
                    self.flush_due = True  # the thread tries again on its next turn
                    return False
            self._held = None
            number = head.next_table
            head.next_table += 1
            store_id = head.manifest["storeId"]
            entry = write_table(self.path / "sst" / f"{number:010d}.sst", mem.entries(), store_id)
            entry["file"] = f"sst/{number:010d}.sst"
            table = Table(self.path / entry["file"], store_id)
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
        """Merge every table into one, keeping every version the history horizon keeps (docs/store-format.md,
        "Horizons"); ``tiered`` (the maintenance thread's): only the newest run :func:`compact_run` picks. Answers
        whether it merged anything."""
        head = self.head
        with self.lock:
            every = head.sources.tables
            old = every[: compact_run([t.size for t in every])] if tiered else every
            if len(old) < 2:
                return False
            manifest = head.manifest
            floor = self.history_floor()
            log.debug("compact merges %d tables", len(old))
            number = head.next_table
            head.next_table += 1
            name = f"sst/{number:010d}.sst"
            kept = Kept(floor, bottom=len(old) == len(every))
            entry = write_table(self.path / name, kept.versions(_merge(old)), manifest["storeId"])
            entry["file"] = name
            table = Table(self.path / name, manifest["storeId"])
            log.debug("compact wrote %s", name)
            self._write_manifest(
                manifest["generation"],
                manifest["timestamp"],
                manifest["nextDenseInt"],
                None,
                [entry] + manifest["tables"][len(old) :],
                manifest.get("logAt"),
                historyFrom=floor,
            )
            if kept.dropped:
                self.dropped += kept.dropped
                self.sweep_due = True  # the content only the dropped file versions named may go too
                log.info("compaction dropped %d versions older than generation %d", kept.dropped, floor)
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

    # -- horizons --------------------------------------------------------------------------------

    def _committed_at(self, generation: int) -> int:
        """When ``generation`` (at or below the flushed one) was committed, from its commit record."""
        raw = self.head.sources.lookup(K.commit_key(generation), generation)
        if raw is None:  # every commit writes its record; a gap is damage
            raise R.FactLogRefusedError(f"generation {generation} has no commit record", reason="missing-segment")
        return int(rows.unpack(raw)["timestamp"])

    def history_floor(self) -> int:
        """Where ``historyFrom`` stands after this compaction: the last generation committed at or before now less
        the history horizon, never past the flushed generation, never back (the MANIFEST's when no horizon)."""
        manifest = self.head.manifest
        floor = H.history_from(manifest)
        span = self.horizons.history
        if span is None or span.ms is None:
            return floor
        cutoff = int(time.time() * 1000) - span.ms
        lo, hi = floor, int(manifest["generation"])  # commit times never go down: bisect the last one <= cutoff
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self._committed_at(mid) <= cutoff:
                lo = mid
            else:
                hi = mid - 1
        return lo

    def trim_log(self) -> int:
        """Delete the oldest sealed log segments the feed retention and the history horizon let go (their every
        commit in the tables): the MANIFEST names the new ``logFrom`` first, then they are unlinked. Answers how
        many went."""
        with self.lock:
            self._horizon_at = time.monotonic()
            manifest = self.head.manifest
            segments = log_.segments(self.path / "log")
            floor, flushed = H.log_from(manifest), int(manifest["generation"])
            gone = [path for first, path in segments if first < floor]  # a crash left them after the swap
            span, history = self.horizons.feed, H.history_from(manifest)
            cutoff = int(time.time() * 1000) - span.ms if span.ms is not None else None
            sealed = [(first, path, path.stat().st_size) for first, path in segments[:-1] if first >= floor]
            kept_bytes = sum(size for _, _, size in sealed)
            new_floor = floor
            for i, (_, path, size) in enumerate(sealed):
                last = (sealed[i + 1][0] if i + 1 < len(sealed) else segments[-1][0]) - 1
                if last > flushed:
                    break
                if last >= history:
                    if cutoff is not None and self._committed_at(last) > cutoff:
                        break
                    if span.bytes is not None and kept_bytes - size < span.bytes:
                        break
                gone.append(path)
                kept_bytes -= size
                new_floor = last + 1
            if new_floor != floor:
                self._write_manifest(
                    flushed,
                    manifest["timestamp"],
                    manifest["nextDenseInt"],
                    None,
                    manifest["tables"],
                    manifest.get("logAt"),
                    logFrom=new_floor,
                )
            for path in gone:
                path.unlink(missing_ok=True)
            if gone:
                fd = os.open(self.path / "log", os.O_RDONLY)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
                self.trimmed += len(gone)
                log.info("log trimmed: %d segment(s), the log now holds generation %d on", len(gone), new_floor)
            return len(gone)

    def _write_manifest(
        self,
        generation: int,
        timestamp: int,
        next_dense: int,
        ledger: Ledger | None,
        tables: list[dict[str, Any]],
        log_at: dict[str, int] | None,
        **horizons: int,
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
        for field in ("logFrom", "historyFrom"):  # they only move forward (docs/store-format.md, "Horizons")
            value = max(int(old.get(field, 0)), horizons.get(field, 0))
            if value:
                manifest[field] = value
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


class Kept:
    """What a compaction keeps of the merged versions under the history horizon ``floor`` (docs/store-format.md,
    "Horizons"): every version above it; of each key, the newest version at or below it, the key as it stood
    there, unless that is a tombstone and the merge holds the oldest table (``bottom``: nothing older remains);
    and no commit record below it. ``dropped`` counts the rest."""

    def __init__(self, floor: int, bottom: bool) -> None:
        self.floor = floor
        self.bottom = bottom
        self.dropped = 0

    def versions(self, merged: Iterator[tuple[bytes, int, bytes]]) -> Iterator[tuple[bytes, int, bytes]]:
        floor, bottom = self.floor, self.bottom
        if floor <= 0:
            yield from merged
            return
        last: bytes | None = None
        stood = False  # the key's version at the floor was met (versions come newest first)
        for key, gen, value in merged:
            if key != last:
                last, stood = key, False
            if gen > floor:
                yield key, gen, value
                continue
            if stood or (gen < floor and key[:1] == K.COMMIT) or (not value and bottom):
                stood = True
                self.dropped += 1
                continue
            stood = True
            yield key, gen, value


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
