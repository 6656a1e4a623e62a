"""The brain handle: one store directory opened as its writer, or attached read-only.

Writes are serialised by one commit lock: a commit validates against every
commit applied before it, appends its frame, applies its keys to the memtable
and only then waits (outside the lock) for the fsync it shares with whoever
else is waiting. Reads take the durable generation once and read at it, so
they never wait on an fsync and never see a commit that is not yet durable.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Iterator

from brainy.contract import refusals as R
from brainy.engine import keys as K
from brainy.engine import lease as L
from brainy.engine import log as log_
from brainy.engine import query, rows, timetravel, writes
from brainy.engine.counts import Ledger
from brainy.engine.files import DocumentUnreadable, read_document, write_document, write_durably
from brainy.engine.memtable import Memtable
from brainy.engine.sstable import Table, write_table
from brainy.engine.store import FORMAT, ledger_name, read_identity
from brainy.engine.projections import (Projections, decode_snapshot, encode_snapshot, newest_snapshot,
                                        snapshot_name)
from brainy.engine.txn import Txn
from brainy.engine.view import View

log = logging.getLogger("brainy.engine")

FLUSH_BYTES = 8 << 20
COMPACT_AT = 5          # merge every table into one once there are this many


def now_ms() -> int:
    return time.time_ns() // 1_000_000


class Sources:
    """What a read consults, newest first: the live memtable, frozen memtables, tables."""

    __slots__ = ("mem", "frozen", "tables")

    def __init__(self, mem: Memtable, frozen: tuple[Memtable, ...], tables: tuple[Table, ...]) -> None:
        self.mem, self.frozen, self.tables = mem, frozen, tables

    def __iter__(self) -> Iterator[Any]:
        yield self.mem
        yield from self.frozen
        yield from self.tables


class Brain:
    """A store directory, open. Use :meth:`open` (the writer, or a reader if the lease is held) or
    :meth:`attach` (read-only, frozen at the generation it resolved)."""

    def __init__(self, path: Path, name: str) -> None:
        self.path = path
        self.name = name
        self.role = "attach"
        self.claim: L.Claim | None = None
        self.warnings: list[dict[str, str]] = []
        self.recovery: dict[str, Any] | None = None
        self._lease: L.Lease | None = None
        self._log: log_.LogWriter | None = None
        self._commit_lock = threading.RLock()
        self._state_lock = threading.Lock()
        self._maint_lock = threading.Lock()
        self._closed = False
        self._stopping = False
        self._flush_bytes = FLUSH_BYTES
        self._compact_at = COMPACT_AT
        self._wake = threading.Event()
        self._maint: threading.Thread | None = None
        self._maint_error: BaseException | None = None
        self._pool: ThreadPoolExecutor | None = None
        self._ledgers: dict[int, Ledger] = {}
        self._proj: Projections | None = None
        self._counts_cache: tuple[int, dict[str, Any]] | None = None
        self.projections_from: str | None = None  # "rows" or "snapshot at G", once built
        self._proj_moves: dict[int, list[tuple[dict[str, Any] | None, dict[str, Any] | None]]] = {}
        self._last_seq = 0
        self._log_position: log_.Position | None = None  # where the open's read of the log stopped
        self.log_read: log_.Scan | None = None  # what that read cost

    # -- opening ---------------------------------------------------------------------------

    @classmethod
    def open(cls, path: str | os.PathLike[str], *, force: bool = False, name: str | None = None,
             flush_bytes: int = FLUSH_BYTES, compact_at: int = COMPACT_AT,
             segment_bytes: int = log_.SEGMENT_ROTATE_BYTES, reader: "Brain | None" = None) -> "Brain":
        """Open a store read-write, claiming its writer lease.

        When another live process holds the lease, the answer is a read-only
        attach whose ``claim`` says ``BRAINY_WRITER_LOCKED`` and names the
        holder; it never waits. ``force`` takes the lease from a live holder.
        ``reader``, an attach of the same store this process already holds,
        lends what it has read (its memtable, its place in the log) so the open
        reads only what was committed since, unless a flush moved the tables on.
        """
        root = Path(path)
        identity = read_identity(root)
        claim, lease = L.claim(root / "locks", identity["storeId"], force=force)
        if lease is None:
            brain = cls._attach(root, name, reader)
            brain.role, brain.claim = "reader", claim
            brain.warnings.append({"code": "opened-read-only",
                                   "message": f"another process holds the writer lease: {claim.holder}"})
            return brain
        brain = cls(root, name or root.resolve().name)
        brain.role, brain.claim, brain._lease = "writer", claim, lease
        brain._flush_bytes, brain._compact_at = flush_bytes, compact_at
        try:
            brain._load(writer=True, segment_bytes=segment_bytes, reader=reader)
        except BaseException:
            lease.abandon()
            raise
        if claim.claim_path == "stale-after-crash":
            brain.warnings.append({"code": "recovered-after-crash", "message":
                                   f"the last writer left no close record; replayed "
                                   f"{brain.recovery['replayedGenerations']} generation(s) from the log"})
        brain._maint = threading.Thread(target=brain._maintain, name="brainy-maintenance", daemon=True)
        brain._maint.start()
        return brain

    @classmethod
    def attach(cls, path: str | os.PathLike[str], *, name: str | None = None) -> "Brain":
        """Open a store read-only: no lock, nothing created or written, no background job.

        Frozen at the generation it resolved; it refuses by name (never repairs)
        a store it cannot serve exactly as it stands.
        """
        root = Path(path)
        read_identity(root)
        return cls._attach(root, name)

    @classmethod
    def _attach(cls, root: Path, name: str | None, reader: "Brain | None" = None) -> "Brain":
        if L.handoff_in_flight(root / "locks"):
            raise R.StoreUnservableError("a writer handoff is in flight; attach again once it settles",
                                         reason="writer-handoff-in-flight")
        brain = cls(root, name or root.resolve().name)
        for attempt in range(8):  # a flush or compaction may swap the MANIFEST meanwhile
            try:
                brain._load(writer=False, reader=reader)
                return brain
            except FileNotFoundError:
                if attempt == 7:
                    raise
        raise AssertionError("unreachable")

    def _load(self, writer: bool, segment_bytes: int = log_.SEGMENT_ROTATE_BYTES,
              reader: "Brain | None" = None) -> None:
        root = self.path
        self.created_at = int(read_identity(root)["createdAt"])
        try:
            manifest = read_document(root / "MANIFEST")
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
            raise R.StoreUnservableError(f"the store's generation stamp does not read: {exc}",
                                         reason="unreadable-generation-stamp") from None
        if writer:
            self._remove_orphans(manifest)
        tables = tuple(Table(root / t["file"]) for t in manifest["tables"])
        self._manifest = manifest
        self._next_table = int(manifest["nextTable"])
        self._flushed = flushed
        self._last_ts = int(manifest.get("timestamp", 0))
        mem = Memtable()
        self._next_dense = int(manifest["nextDenseInt"])
        self._applied = flushed
        resume = None
        if reader is not None and reader._lends_to(self, manifest):
            # the reader's memtable holds every frame it replayed above the same flushed generation; it
            # never writes again, and its own reads stay at its generation, below whatever lands here
            mem, ledger, resume = reader._mem, reader._ledger.copy(), reader._log_position
            self._next_dense, self._applied, self._last_ts = reader._next_dense, reader._applied, reader._last_ts
            self._proj_moves = dict(reader._proj_moves)
        self._mem = mem
        self._sources = Sources(mem, (), tables)
        self._ledger = ledger
        found = log_.Scan()
        replay = self._replay
        for frame in log_.frames(root / "log", flushed, found, resume=resume):
            replay(frame)  # streamed: the decoded frames are never all held at once
        self._durable = self._applied
        self._ledger_durable = self._ledger.copy()
        self._log_position = found.position
        self.log_read = found
        self.recovery = {"replayedGenerations": self._applied - flushed}
        if found.torn_bytes:
            self.warnings.append({"code": "torn-tail", "message":
                                  f"{found.torn_bytes} byte(s) of a commit that never landed were "
                                  f"{'dropped' if writer else 'ignored'} at the end of the log"})
        if writer:
            self._log = log_.LogWriter(root / "log", found, segment_bytes)

    def _lends_to(self, other: "Brain", manifest: dict[str, Any]) -> bool:
        """Whether this read-only handle's state can seed ``other``'s open of the same store: it read the
        log from the same flushed tables, and nothing has closed it."""
        return (self.role != "writer" and not self._closed and self.path == other.path
                and self._manifest == manifest and self._log_position is not None)

    def _remove_orphans(self, manifest: dict[str, Any]) -> None:
        """Files a crash left behind mid-flush: temp files and tables no MANIFEST names."""
        live = {t["file"] for t in manifest["tables"]} | {manifest["ledger"]}
        for folder in ("sst", "ledger"):
            for path in (self.path / folder).iterdir():
                if f"{folder}/{path.name}" not in live:
                    path.unlink()
        (self.path / "MANIFEST.tmp").unlink(missing_ok=True)

    def _replay(self, frame: log_.Frame) -> None:
        txn = self._txn(frame.generation, frame.timestamp, frame.author, frame.via)
        txn.replay(frame.ops)
        self._apply(txn, frame.generation, frame.timestamp)
        # kept so a projection snapshot older than the log tail can be caught up without a rebuild
        self._proj_moves[frame.generation] = [(b, a) for kind, b, a in txn.moves if kind == "e"]

    # -- reading ---------------------------------------------------------------------------

    def _lookup(self, key: bytes, generation: int) -> bytes | None:
        for source in self._sources:
            hit = source.get(key, generation)
            if hit is not None:
                return hit[1] or None
        return None

    def _scan(self, start: bytes, stop: bytes | None, generation: int) -> Iterator[tuple[bytes, bytes]]:
        decided: dict[bytes, bytes] = {}
        for source in self._sources:
            for key, gen, value in source.scan(start, stop):
                if gen <= generation and key not in decided:
                    decided[key] = value
        for key in sorted(decided):
            if decided[key]:
                yield key, decided[key]

    def projections(self) -> Projections:
        """The query projections at the durable head, built from the rows on first need.

        The caller holds ``_state_lock``: commits move the projections as they become durable.
        """
        if self._proj is None:
            started, head = time.monotonic(), self._durable
            proj, how = self._snapshot_at_or_after_flush(), "rows"
            if proj is not None:
                how = f"snapshot at {proj.stamp}"
                for g in sorted(g for g in self._proj_moves if proj.stamp < g <= head):
                    for before, after in self._proj_moves[g]:
                        proj.apply(before, after)
                proj.stamp = head
            else:
                proj = Projections.build(self.view(head).entities(), head)
            self._proj = proj
            self._proj_moves = {g: m for g, m in self._proj_moves.items() if g > head}
            self.projections_from = how
            log.info("brain %s: projections at generation %d from %s (%d rows) in %.0f ms", self.name, head,
                     how, len(proj.all), (time.monotonic() - started) * 1000)
        return self._proj

    def _snapshot_at_or_after_flush(self) -> Projections | None:
        """The newest projection snapshot, if the moves this handle holds can bring it to the head.

        One the log tail cannot reach (older than the flushed generation, or newer than this handle's
        head) or that does not check out is left alone: the projections are rebuilt from the rows and the
        warnings say why.
        """
        found = newest_snapshot(self.path / "index") if (self.path / "index").is_dir() else None
        if found is None:
            return None
        stamp, path = found
        if not self._flushed <= stamp <= self._durable:
            self.warnings.append({"code": "projections-rebuilt", "message":
                                  f"snapshot {path.name} is outside generations {self._flushed}..{self._durable}"})
            return None
        try:
            proj = decode_snapshot(path.read_bytes())
        except (OSError, ValueError) as exc:
            self.warnings.append({"code": "projections-rebuilt", "message": f"snapshot {path.name}: {exc}"})
            return None
        return proj if proj.stamp == stamp else None

    def _write_snapshot(self) -> None:
        """Persist the projections, stamped with the generation they cover; older snapshots go."""
        with self._state_lock:
            if self._proj is None:
                return
            stamp, data = self._proj.stamp, encode_snapshot(self._proj)
        folder = self.path / "index"
        if (folder / snapshot_name(stamp)).exists():
            return
        folder.mkdir(exist_ok=True)
        write_durably(folder / snapshot_name(stamp), data)
        for older in folder.glob("*.proj"):
            if older.name != snapshot_name(stamp):
                older.unlink(missing_ok=True)

    def _versions(self, key: bytes, generation: int) -> list[tuple[int, bytes]]:
        """Every version of ``key`` at or below ``generation``, newest first (a tombstone's value is empty)."""
        found: dict[int, bytes] = {}
        stop = key + b"\x00"
        for source in self._sources:
            for k, gen, value in source.scan(key, stop):
                if k == key and gen <= generation:
                    found.setdefault(gen, value)
        return sorted(found.items(), reverse=True)

    def _check_open(self) -> None:
        if self._closed:
            raise R.ShuttingDownError(f"brain {self.name!r} is closed")

    @property
    def head(self) -> int:
        """The durable generation: what reads see."""
        return self._durable

    def view(self, generation: int | None = None) -> View:
        """The store at ``generation`` (default: the durable head, what reads see)."""
        self._check_open()
        return View(self, self._durable if generation is None else generation)

    def get(self, id: str, includeVector: bool = False, includeData: bool = True) -> dict[str, Any]:
        """``{entity | None, generation}``: one entity by id or natural key."""
        return self.view().get(id, includeVector, includeData)

    def batchGet(self, args: dict[str, Any]) -> dict[str, Any]:
        """``{entities, missing, generation}``: up to 1,000 entities in the order asked."""
        return self.view().batchGet(args)

    def counts(self) -> dict[str, Any]:
        """The census: totals by type and relation type, public and across every tier."""
        return self.view().counts()

    def find(self, args: Any = None) -> dict[str, Any]:
        """Search or page entities by metadata and words (door catalogue 4)."""
        return query.find(self, args)

    def related(self, args: Any = None) -> dict[str, Any]:
        """The relations touching one entity (one hop), or every relation, by relation id ascending."""
        return query.related(self, args)

    def explain(self, args: Any = None) -> dict[str, Any]:
        """The plan find would run, without running it."""
        return query.explain(self, args)

    def fields(self, args: Any = None) -> dict[str, Any]:
        """Which metadata fields exist, and their common values."""
        return query.fields(self, args)

    def now(self) -> dict[str, Any]:
        """``{generation, timestamp, oldestRetained}``: the handle for asOf, diff and changes."""
        return timetravel.now(self)

    def history(self, id: str, args: dict[str, Any] | None = None) -> dict[str, Any]:
        """Every recorded version of one entity, newest first."""
        return timetravel.history(self, id, args)

    def asOf(self, args: dict[str, Any]) -> dict[str, Any]:
        """One read door run on the store as it stood at a past generation or instant."""
        return timetravel.as_of(self, args)

    def diff(self, args: dict[str, Any]) -> dict[str, Any]:
        """What changed between two generations, row by row."""
        return timetravel.diff(self, args)

    def export(self, args: dict[str, Any] | None = None) -> dict[str, Any]:
        """Every entity and relation of one pinned generation, a page at a time."""
        return timetravel.export(self, args)

    def changes(self, args: dict[str, Any] | None = None) -> dict[str, Any]:
        """The change log from a generation onward; a page never ends inside a commit."""
        return timetravel.changes(self, args)

    def generation(self, id: int) -> dict[str, Any]:
        """What one commit was: its time, its ops, who made it."""
        self._check_open()
        n = rows.integer(id, "id", 0)
        head = self._durable
        if n > head:
            raise R.GenerationAheadError(f"generation {n} is past the head {head}", generation=n, head=head)
        if n == 0:
            return {"generation": 0, "timestamp": self.created_at, "ops": 0, "entities": 0,
                    "relations": 0, "author": None, "via": None}
        return {"generation": n, **self.view(head).commit(n)}

    def verify(self) -> dict[str, Any]:
        """Check every checksum the store has: every table block and every log frame.

        Refuses by name at the first damage; answers what it checked.
        """
        self._check_open()
        tables = self._sources.tables
        for table in tables:
            table.verify()
        last = log_.verify(self.path / "log")
        return {"tables": len(tables), "logGeneration": last}

    # -- writing ---------------------------------------------------------------------------

    def _txn(self, generation: int, timestamp: int, caller: str | None, via: str | None) -> Txn:
        applied = self._applied
        return Txn(lambda key: self._lookup(key, applied), lambda a, b: self._scan(a, b, applied),
                   self._next_dense, generation, timestamp, caller, via)

    def _apply(self, txn: Txn, generation: int, timestamp: int) -> None:
        entities, relations = txn.counts
        txn.overlay[K.commit_key(generation)] = rows.pack({
            "timestamp": timestamp, "ops": len(txn.ops), "entities": entities, "relations": relations,
            "author": txn.caller, "via": txn.via})
        mem = self._mem
        for key, value in txn.overlay.items():
            mem.put(key, generation, value)
        ledger = self._ledger
        for kind, before, after in txn.moves:
            ledger.move(kind, before, after)
        ledger.generation, ledger.last_updated = generation, timestamp
        self._next_dense = txn.next_dense
        self._applied = generation
        self._last_ts = timestamp

    def _writable(self) -> None:
        self._check_open()
        if self.role != "writer":
            holder = self.claim.holder if self.claim and self.claim.holder else {}
            raise R.BRAINY_WRITER_LOCKED(
                "this handle is read-only" + (f"; the writer lease is held by {holder}" if holder else
                                              " (a read-only attach); open the store with Brain.open to write"),
                holder=holder)
        if self._maint_error is not None:
            raise R.InternalError(f"background flush failed: {self._maint_error}", ref="maintenance")
        assert self._lease is not None
        self._lease.check_fence()

    def _commit(self, door: str, args: Any, caller: str | None, via: str | None) -> tuple[dict[str, Any], int]:
        """Validate, append and apply one commit; answers (answer, log sequence or 0 if nothing was written)."""
        rule = writes.DOORS[door]
        with self._commit_lock:
            self._writable()
            generation = self._applied + 1
            timestamp = max(now_ms(), self._last_ts)
            txn = self._txn(generation, timestamp, caller, via)
            answer = rule(txn, args, writes.Context(self.name))
            if not txn.ops:  # every item of a batch refused: nothing to commit
                answer.update(generation=self._applied, timestamp=self._last_ts)
                return answer, 0
            payload = log_.encode_payload(generation, timestamp, caller, via, txn.ops)
            assert self._log is not None
            seq = self._log.append(generation, payload)
            self._apply(txn, generation, timestamp)
            self._ledgers[generation] = self._ledger.copy()
            self._proj_moves[generation] = [(b, a) for kind, b, a in txn.moves if kind == "e"]
            self._last_seq = seq
            if "receipt" in answer:
                answer["receipt"]["digest"] = hashlib.sha256(payload).hexdigest()
            if self._mem.bytes >= self._flush_bytes:
                self._wake.set()
        answer.update(generation=generation, timestamp=timestamp)
        return answer, seq

    def _durable_at(self, seq: int, generation: int) -> None:
        assert self._log is not None
        self._log.wait(seq)
        with self._state_lock:
            if generation > self._durable:
                self._durable = generation
                self._ledger_durable = self._ledgers[generation]
                for g in [g for g in self._ledgers if g <= generation]:
                    del self._ledgers[g]
                if self._proj is not None:
                    for g in sorted(g for g in self._proj_moves if g <= generation):
                        moves = self._proj_moves.pop(g)
                        if g > self._proj.stamp:
                            for before, after in moves:
                                self._proj.apply(before, after)
                            self._proj.stamp = g
                else:  # no projections yet: keep what a snapshot at or after the flushed generation needs
                    for g in [g for g in self._proj_moves if g <= self._flushed]:
                        del self._proj_moves[g]

    def write(self, door: str, args: Any = None, *, caller: str | None = None, via: str | None = None) -> dict:
        """Run the write door ``door``; returns once the commit is durable."""
        if door not in writes.DOORS:
            raise R.UnknownDoorError(f"{door!r} is not a write door", door=door)
        answer, seq = self._commit(door, args, caller, via)
        if seq:
            self._durable_at(seq, answer["generation"])
        return answer

    async def awrite(self, door: str, args: Any = None, *, caller: str | None = None,
                     via: str | None = None) -> dict:
        """:meth:`write` for an event loop: the fsync is awaited on a worker thread, never on the loop."""
        if door not in writes.DOORS:
            raise R.UnknownDoorError(f"{door!r} is not a write door", door=door)
        answer, seq = self._commit(door, args, caller, via)
        if seq:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(4, thread_name_prefix="brainy-fsync")
            await asyncio.get_running_loop().run_in_executor(self._pool, self._durable_at, seq,
                                                             answer["generation"])
        return answer

    def add(self, args: Any, **who: Any) -> dict:
        return self.write("add", args, **who)

    def addMany(self, args: Any, **who: Any) -> dict:
        return self.write("addMany", args, **who)

    def update(self, args: Any, **who: Any) -> dict:
        return self.write("update", args, **who)

    def updateMany(self, args: Any, **who: Any) -> dict:
        return self.write("updateMany", args, **who)

    def remove(self, args: Any, **who: Any) -> dict:
        return self.write("remove", args, **who)

    def removeMany(self, args: Any, **who: Any) -> dict:
        return self.write("removeMany", args, **who)

    def relate(self, args: Any, **who: Any) -> dict:
        return self.write("relate", args, **who)

    def relateMany(self, args: Any, **who: Any) -> dict:
        return self.write("relateMany", args, **who)

    def updateRelation(self, args: Any, **who: Any) -> dict:
        return self.write("updateRelation", args, **who)

    def unrelate(self, args: Any, **who: Any) -> dict:
        return self.write("unrelate", args, **who)

    def transact(self, args: Any, **who: Any) -> dict:
        return self.write("transact", args, **who)

    def clear(self, args: Any, **who: Any) -> dict:
        return self.write("clear", args, **who)

    # -- flush and compaction ----------------------------------------------------------------

    def _maintain(self) -> None:
        while not self._stopping:
            self._wake.wait(1.0)
            self._wake.clear()
            if self._stopping:
                return
            try:
                if self._mem.bytes >= self._flush_bytes:
                    self.flush()
                if len(self._sources.tables) >= self._compact_at:
                    self.compact()
            except BaseException as exc:  # writes refuse from now on, naming this
                self._maint_error = exc
                return

    def flush(self) -> bool:
        """Write the memtable out as a table now. Answers whether there was anything to write."""
        with self._maint_lock:
            with self._commit_lock:
                mem = self._mem
                if not len(mem):
                    return False
                generation, seq = self._applied, self._last_seq
                ledger, next_dense, timestamp = self._ledger.copy(), self._next_dense, self._last_ts
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
            self._write_manifest(generation, timestamp, next_dense, ledger, tables)
            with self._commit_lock:
                s = self._sources
                self._sources = Sources(s.mem, tuple(m for m in s.frozen if m is not mem), (table,) + s.tables)
            self._write_snapshot()
            return True

    def compact(self) -> bool:
        """Merge every table into one, keeping every version. Answers whether it merged anything."""
        with self._maint_lock:
            old = self._sources.tables
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
                                 None, [entry])
            with self._commit_lock:
                s = self._sources
                self._sources = Sources(s.mem, s.frozen, (table,))
            for t in old:  # open maps keep serving readers that still hold them
                (t.path).unlink()
            return True

    def _write_manifest(self, generation: int, timestamp: int, next_dense: int, ledger: Ledger | None,
                        tables: list[dict[str, Any]]) -> None:
        old = self._manifest
        ledger_file = old["ledger"]
        if ledger is not None and generation != old["generation"]:
            ledger_file = ledger_name(generation)
            write_document(self.path / ledger_file, ledger.to_doc())
        manifest = {"format": FORMAT, "storeId": old["storeId"], "generation": generation, "timestamp": timestamp,
                    "nextTable": self._next_table, "nextDenseInt": next_dense, "ledger": ledger_file,
                    "tables": tables}
        write_document(self.path / "MANIFEST", manifest)
        self._manifest = manifest
        self._flushed = generation
        if ledger_file != old["ledger"]:
            (self.path / old["ledger"]).unlink(missing_ok=True)

    # -- closing -----------------------------------------------------------------------------

    def writer_block(self) -> dict[str, Any]:
        if self.claim is None:
            return {"role": "reader"}
        return self.claim.writer_block()

    def close(self) -> dict[str, Any]:
        """Flush, record a clean close, release the lease. Idempotent."""
        if self._closed:
            return {"brain": self.name, "closed": True, "leaseReleased": False, "cleanCloseRecorded": False}
        recorded = released = False
        if self.role == "writer":
            if self._maint is not None:
                self._stopping = True
                self._wake.set()
                self._maint.join()
            failed = self._maint_error
            if failed is None and self._lease is not None and self._lease.fence_holds():
                if not self.flush():
                    self._write_snapshot()
            assert self._log is not None and self._lease is not None
            self._log.close()
            if failed is None:
                recorded = self._lease.release(self._applied)
                released = True
            else:
                self._lease.abandon()
        self._closed = True
        if self._pool is not None:
            self._pool.shutdown(wait=True)
        for table in self._sources.tables:
            try:
                table.close()
            except BufferError:
                pass
        return {"brain": self.name, "closed": True, "leaseReleased": released, "cleanCloseRecorded": recorded}

    def __enter__(self) -> "Brain":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _merge(tables: tuple[Table, ...]) -> Iterator[tuple[bytes, int, bytes]]:
    """Every version of every table, key ascending then generation descending.

    Tables cover disjoint generation ranges, newest first, so for one key the
    newer table's versions all come before the older table's.
    """
    import heapq

    streams = [((key, rank, -gen, gen, value) for key, gen, value in t.scan(b"", None))
               for rank, t in enumerate(tables)]
    for key, _, _, gen, value in heapq.merge(*streams):
        yield key, gen, value
