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
import threading
from typing import Any, Iterator

from brainy.contract import refusals as R
from brainy.store.blobs import Swept
from brainy.store.counts import Ledger
from brainy.store.files import write_document
from brainy.store.memtable import Memtable
from brainy.index.snapshot import Sources
from brainy.store.sstable import Table, write_table
from brainy.store.directory import FORMAT, ledger_name
from brainy.doors import vfs  # which blobs the files reference: what a sweep keeps

FLUSH_BYTES = 8 << 20
COMPACT_AT = 5          # compact (the newest run of tables, compact_run) once there are this many
SWEEP_AT = 64 << 20     # sweep the blob packs once refused writes have stored this much (and after a crash)


class Maintenance:
    """The flush and compaction half of a writer :class:`~brainy.engine.brain.Brain`."""

    def _start_maintenance(self) -> None:
        self._maint = threading.Thread(target=self._maintain, name="brainy-maintenance", daemon=True)
        self._maint.start()

    def _stop_maintenance(self) -> None:
        if self._maint is not None:
            self._stopping = True
            self._wake.set()
            self._maint.join()

    def _maintain(self) -> None:
        while not self._stopping:
            self._wake.wait(1.0)
            self._wake.clear()
            if self._stopping:
                return
            try:
                if self._mem.bytes >= self._flush_bytes or self._flush_due:
                    self._flush_due = False
                    self.flush()
                if len(self._sources.tables) >= self._compact_at:
                    self.compact(tiered=True)
                if self._sweep_due or self.blobs.orphaned >= SWEEP_AT:
                    self._sweep_due = False
                    self.sweep_blobs()
            except BaseException as exc:  # writes refuse from now on, naming this
                self._maint_error = exc
                return

    def flush(self) -> bool:
        """Write the memtable out as a table now. Answers whether there was anything to write."""
        with self._maint_lock:
            if len(self._mem):
                self.follower.prepare_flush()  # its delta read, or the projections built while the chain is reachable
            with self._commit_lock:
                mem = self._mem
                if not len(mem):
                    return False
                generation, seq = self._applied, self._last_seq
                ledger, next_dense, timestamp = self._ledger.copy(), self._next_dense, self._last_ts
                assert self._log is not None
                at = self._log.position()  # where generation's frame ends: the next open reads from there
                self._mem = Memtable()
                s = self._sources
                self._sources = Sources(self._mem, (mem,) + s.frozen, s.tables)
            assert self._log is not None
            if seq:
                self._durable_at(seq, generation)  # a table never holds a commit the log might lose
            number = self._next_table
            self._next_table += 1
            entry = write_table(self.path / "sst" / f"{number:010d}.sst", mem.entries())
            entry["file"] = f"sst/{number:010d}.sst"
            table = Table(self.path / entry["file"])
            tables = [entry] + list(self._manifest["tables"])
            # the snapshots go first, stamped at or above the generation this flush makes the flushed one: a
            # crash before the swap leaves them within the replayed tail's reach, where written after it, a
            # crash between the two left the last ones behind the flushed generation and the next open
            # rebuilt them from the rows
            self.follower.persist(build=True)
            self.aggregate_follower.persist()
            self._write_manifest(generation, timestamp, next_dense, ledger, tables,
                                 {"segment": at.first, "offset": at.offset})
            with self._commit_lock:
                s = self._sources
                self._sources = Sources(s.mem, tuple(m for m in s.frozen if m is not mem), (table,) + s.tables)
            self.vector_follower.persist(at_flush=True)
            return True

    def compact(self, tiered: bool = False) -> bool:
        """Merge every table into one, keeping every version; ``tiered`` (the maintenance thread's): only the newest
        run :func:`compact_run` picks. Answers whether it merged anything."""
        with self._maint_lock:
            every = self._sources.tables
            old = every[:compact_run([t.size for t in every])] if tiered else every
            if len(old) < 2:
                return False
            number = self._next_table
            self._next_table += 1
            name = f"sst/{number:010d}.sst"
            entry = write_table(self.path / name, _merge(old))
            entry["file"] = name
            table = Table(self.path / name)
            manifest = self._manifest
            self._write_manifest(manifest["generation"], manifest["timestamp"], manifest["nextDenseInt"],
                                 None, [entry] + manifest["tables"][len(old):], manifest.get("logAt"))
            with self._commit_lock:
                s = self._sources
                self._sources = Sources(s.mem, s.frozen, (table,) + s.tables[len(old):])
            for t in old:  # open maps keep serving readers that still hold them
                (t.path).unlink()
            return True

    def sweep_blobs(self, garbage_share: float = 0.5) -> Swept | None:
        """Collect the blob records no file row of any retained generation names, nor a write in flight
        (``BlobStore.sweep``; ``garbage_share``: how much of a pack must be garbage for it to be rewritten).
        None when a referenced recipe does not read: a sweep that cannot tell which chunks a file needs
        collects nothing (the read of that file names the damage). The answer is kept as ``swept``."""
        with self._maint_lock:
            try:
                self.swept = self.blobs.sweep(lambda: vfs.addresses(self.at()), garbage_share)
            except R.BlobCorruptError:
                self.swept = None
            return self.swept

    def _write_manifest(self, generation: int, timestamp: int, next_dense: int, ledger: Ledger | None,
                        tables: list[dict[str, Any]], log_at: dict[str, int] | None) -> None:
        old = self._manifest
        ledger_file = old["ledger"]
        if ledger is not None and generation != old["generation"]:
            ledger_file = ledger_name(generation)
            write_document(self.path / ledger_file, ledger.to_doc())
        manifest = {"format": FORMAT, "storeId": old["storeId"], "generation": generation, "timestamp": timestamp,
                    "nextTable": self._next_table, "nextDenseInt": next_dense, "ledger": ledger_file,
                    "tables": tables}
        if log_at is not None:
            manifest["logAt"] = log_at
        write_document(self.path / "MANIFEST", manifest)
        self._manifest = manifest
        self._flushed = generation
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
    streams = [((key, rank, -gen, gen, value) for key, gen, value in t.scan(b"", None))
               for rank, t in enumerate(tables)]
    for key, _, _, gen, value in heapq.merge(*streams):
        yield key, gen, value
