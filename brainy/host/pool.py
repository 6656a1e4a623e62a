"""The pool: which names are brains, and the one handle this process holds for each.

Nothing opens at start; a door opens its brain on first need. A read takes
whatever handle is there, or a read-only attach; a read never claims the
writer lease. A write needs the writer: it claims the lease when no live
process holds it, and answers ``BRAINY_WRITER_LOCKED`` naming the holder when
one does, never waiting. ``init`` is the explicit claim; ``close`` gives the
lease back with a clean-close record and drops the handle.

Residency is the arbiter's (``brainy/host/arbiter.py``): it decides when a brain closes, and
:meth:`Pool.evict` closes it cleanly (flushed; a writer keeps its lease, the role outliving the
residency), never while a door is in flight; the next door readmits it. A served handle builds its
projections off the read path, starting at admission.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from brainy.contract import refusals as R
from brainy.doors.mechanics import footprint
from brainy.engine import Brain
from brainy.host import archive
from brainy.host.arbiter import Arbiter, Budget, Cadence, give_back
from brainy.host.dispatch import check_brain_name
from brainy.store import lease
from brainy.store.horizons import Horizons

log = logging.getLogger("brainy.pool")


@dataclass
class Entry:
    name: str
    path: Path
    handle: Brain | None = None
    in_flight: int = 0
    since: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock)
    cadence: Cadence = field(default_factory=Cadence)
    kept: tuple[lease.Claim, lease.Lease] | None = None  # the writer lease an eviction kept
    kept_generation: int = 0  # the generation the evicted writer closed at (its clean close names it)
    unanswered: bool = False  # the handle's first door has not yet answered (left tells its followers when it has)

    @property
    def writer(self) -> bool:
        return (self.handle is not None and self.handle.role == "writer") or self.kept is not None


def live_holder(store: Path) -> dict[str, Any] | None:
    """Another live process holding ``store``'s writer lease, judged from its record without touching the
    lock (health is a read: it must never take a lock a claimant could then find held). On this host the
    record's pid must be alive; on another, its heartbeat must be fresh (the lease's own remote rule)."""
    try:
        record = lease.read_record(store / "locks" / lease.LOCK)
    except (OSError, ValueError):
        return None
    if not record:
        return None
    if record.get("hostname") == socket.gethostname():
        pid = record.get("pid")
        if not isinstance(pid, int) or pid <= 0 or pid == os.getpid():
            return None
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except PermissionError:
            pass  # alive, and another user's
    elif not isinstance(record.get("heartbeat"), int) or lease.now_ms() - record["heartbeat"] >= lease.REMOTE_STALE_MS:
        return None
    return lease.holder_of(record)


def lease_of(entry: Entry) -> lease.Lease | None:
    """The writer lease ``entry`` holds, resident or kept across an eviction."""
    if entry.kept is not None:
        return entry.kept[1]
    return entry.handle.lease if entry.handle is not None else None


class Pool:
    def __init__(
        self,
        brains: dict[str, Path] | None = None,
        brains_dir: Path | None = None,
        open_options: dict[str, Any] | None = None,
        budget: Budget | None = None,
        horizons: tuple[str | None, str | None] = (None, None),
    ) -> None:
        """``horizons``: the feed retention and history horizon a writer opened here keeps, as the flags say
        them (None: the default); one it cannot read refuses ``InvalidArgumentError`` here, at the start."""
        self._named = {check_brain_name(name): Path(path) for name, path in (brains or {}).items()}
        self._dir = Path(brains_dir) if brains_dir else None
        self._entries: dict[str, Entry] = {}
        self._retiring: dict[str, Entry] = {}  # entries an archive is closing, until their doors finish
        self._lock = threading.Lock()
        self._options = {"horizons": Horizons.of(*horizons), **(open_options or {})}
        self.arbiter = Arbiter(self, budget)
        # called with each writer this pool opens, before it serves a door: a fleet node's shipping attaches its
        # shipper there (brainy/host/shipped.py); what it raises refuses the open, and the handle is closed
        self.on_writer: Callable[[str, Brain], None] | None = None

    # -- which names are brains -----------------------------------------------------------------

    @property
    def brains_dir(self) -> Path | None:
        return self._dir

    def path_of(self, name: str, archived_ok: bool = False) -> Path:
        """The store ``name`` resolves to; an archived brain refuses BrainArchivedError unless ``archived_ok``
        (never NoSuchBrainError: its rows are exactly where they were, seed 001 "Provisioning")."""
        check_brain_name(name)
        if self._dir is not None and not archived_ok:
            at = archive.archived_at(self._dir, name)
            if at is not None:
                raise R.BrainArchivedError(
                    f"brain {name!r} is archived; host.unarchive serves it again", brain=name, archivedAt=at
                )
        if name in self._named:
            return self._named[name]
        if self._dir is not None:
            candidate = self._dir / name
            if candidate.is_dir() and not candidate.is_symlink():
                return candidate
        raise R.NoSuchBrainError(f"no brain named {name!r} is served here", brain=name)

    def known(self) -> list[str]:
        names = set(self._named)
        if self._dir is not None and self._dir.is_dir():
            for child in self._dir.iterdir():
                try:
                    if child.is_dir() and not child.is_symlink():
                        names.add(check_brain_name(child.name))
                except R.Refusal:
                    continue  # dot-names and illegal segments are not brains
        return sorted(names)

    def _entry(self, name: str) -> Entry:
        entry = self._entries.get(name)  # the common case: no lock for a brain already known
        if entry is not None:
            return entry
        with self._lock:
            entry = self._entries.get(name)
            if entry is None:
                entry = Entry(name, self.path_of(name))
                self._entries[name] = entry
            return entry

    # -- handles --------------------------------------------------------------------------------

    def resolve(self, name: str, for_write: bool) -> Brain:
        """The handle a door on ``name`` uses; a write claims the lease if nobody live holds it."""
        return self.held(self._entry(name), for_write)

    def held(self, entry: Entry, for_write: bool) -> Brain:
        """:meth:`resolve` for the entry a door :meth:`enter` ed: the name is not looked up again."""
        with entry.lock:
            handle = entry.handle
            if handle is not None and (not for_write or handle.role == "writer"):
                return handle
            if entry.kept is not None:
                return self._readmit(entry)
            if not for_write:
                return self._admitted(entry, Brain.attach(entry.path, name=entry.name))
            return self._claim(entry, force=False)

    def _admitted(self, entry: Entry, handle: Brain) -> Brain:
        """``handle`` is now the entry's: it builds its projections off the read path, from now."""
        entry.unanswered = True
        handle.served()
        entry.handle, entry.since = handle, time.time()
        self.arbiter.start()
        self.arbiter.admitted()
        return handle

    def _readmit(self, entry: Entry) -> Brain:
        """Reopen an evicted writer with the lease its eviction kept: its flushed close left no tail to replay."""
        kept, entry.kept = entry.kept, None
        try:
            opened = Brain.open(entry.path, name=entry.name, lease=kept, **self._options)
        except BaseException:
            entry.kept = kept
            raise
        self._writer_opened(entry, opened)
        log.info(
            "brain %s readmitted as its writer (generation %d, %d replayed)",
            entry.name,
            opened.head,
            opened.recovery["replayedGenerations"] if opened.recovery else 0,
        )
        return self._admitted(entry, opened)

    def open_writer(self, name: str) -> Brain | None:
        """The writer handle open on ``name`` now, if there is one (nothing is opened)."""
        entry = self._entries.get(name)
        handle = entry.handle if entry is not None else None
        return handle if handle is not None and handle.role == "writer" else None

    def _writer_opened(self, entry: Entry, opened: Brain) -> None:
        """:attr:`on_writer` for a writer just opened, before it is admitted; a refusal closes it again."""
        if self.on_writer is None:
            return
        try:
            self.on_writer(entry.name, opened)
        except BaseException:
            opened.close()
            raise

    def resident_entries(self) -> list[Entry]:
        with self._lock:
            return [e for e in self._entries.values() if e.handle is not None]

    def evict(self, entry: Entry, why: str) -> bool:
        """Close ``entry``'s handle for the arbiter, unless a door is in flight on it: flushed, and a writer
        keeps its lease. Answers whether it closed. A door arriving meanwhile waits for the entry's lock and
        readmits."""
        with entry.lock:
            handle = entry.handle
            if handle is None or entry.in_flight:
                return False
            writer = handle.role == "writer"
            handle.close(keep_lease=writer)
            entry.handle = None
            if writer and handle.kept_lease is not None:
                entry.kept, entry.kept_generation = handle.kept_lease, handle.head
        log.info("brain %s evicted (%s)%s", entry.name, why, "; its writer lease is kept" if entry.kept else "")
        return True

    def _release_kept(self, entry: Entry) -> dict[str, Any] | None:
        """Give back the lease an eviction kept, with its clean-close record. The caller holds the entry's lock."""
        if entry.kept is None:
            return None
        (_, held), entry.kept = entry.kept, None
        recorded = held.release(entry.kept_generation)
        return {"brain": entry.name, "closed": True, "leaseReleased": True, "cleanCloseRecorded": recorded}

    def _claim(self, entry: Entry, force: bool) -> Brain:
        # a reader already open lends what it read, so the claim reads only the log written since
        reader = entry.handle if entry.handle is not None and entry.handle.role != "writer" else None
        opened = Brain.open(entry.path, name=entry.name, force=force, reader=reader, **self._options)
        if opened.role != "writer":
            holder = opened.claim.holder if opened.claim else {}
            if entry.handle is None:
                self._admitted(entry, opened)  # a reader serves reads; it holds nothing
            raise R.BRAINY_WRITER_LOCKED(
                f"another live process holds the writer lease of {entry.name!r}: {holder}", holder=holder
            )
        self._writer_opened(entry, opened)
        previous = entry.handle
        self._admitted(entry, opened)
        if previous is not None:
            # a held change stream listening on the reader is woken by the writer's first commit, not its tick
            opened.on_durable.extend(wake for wake in previous.on_durable if wake not in opened.on_durable)
            previous.close()
        log.info("brain %s: writer lease claimed (%s)", entry.name, opened.writer_block().get("claimPath"))
        return opened

    def init(self, name: str, force: bool = False) -> dict[str, Any]:
        """The init door: claim the lease explicitly, or report who holds it."""
        entry = self._entry(name)
        with entry.lock:
            if entry.kept is not None and entry.handle is None and not force:
                brain = self._readmit(entry)
            elif entry.handle is not None and entry.handle.role == "writer" and not force:
                brain = entry.handle
            else:
                try:
                    brain = self._claim(entry, force)
                except R.BRAINY_WRITER_LOCKED:
                    brain = Brain.open(entry.path, name=name)  # a reader: the answer names the holder
                    if entry.handle is None or entry.handle.role != "writer":
                        old, entry.handle = entry.handle, brain
                        if old is not None and old is not brain:
                            old.close()
        answer: dict[str, Any] = {
            "brain": name,
            "generation": brain.head,
            "writer": brain.writer_block(),
            "warnings": list(brain.warnings),
        }
        if brain.role == "writer" and brain.recovery and brain.writer_block().get("claimPath") == "stale-after-crash":
            answer["recovery"] = dict(brain.recovery)
        return answer

    async def close(self, name: str) -> dict[str, Any]:
        """The close door: wait for the other doors in flight, then close the handle (clean-close record,
        lease released). The close door's own call is one of the doors in flight, hence ``> 1``."""
        entry = self._entry(name)
        waited = max(0, entry.in_flight - 1)
        while entry.in_flight > 1:
            await asyncio.sleep(0.005)
        with entry.lock:
            handle, entry.handle = entry.handle, None
            kept = self._release_kept(entry) if handle is None else None
        if handle is None:
            answer = kept or {"brain": name, "closed": True, "leaseReleased": False, "cleanCloseRecorded": False}
            answer["waitedForDoors"] = waited
            return answer
        loop = asyncio.get_running_loop()
        answer = await loop.run_in_executor(None, handle.close)
        # the last reference: what the brain held is freed here, and handed back to the kernel as the arbiter
        # does after its own closes (else the allocator keeps it until the next eviction pass)
        del handle
        await loop.run_in_executor(None, give_back)
        answer["waitedForDoors"] = waited
        return answer

    def health(self, name: str) -> dict[str, Any]:
        """One brain's verdict, with the checks behind it."""
        entry = self._entry(name)
        handle = entry.handle or self.resolve(name, for_write=False)
        checks = []
        if handle.role == "writer":
            fence = handle.fence_holds
            checks.append(
                {
                    "name": "writer-lease",
                    "status": "pass" if fence else "fail",
                    "detail": "this process holds the lease" if fence else "this process's fence was lost",
                }
            )
            checks.append({"name": "write-doors", "status": "pass", "detail": "writes are answered here"})
        else:
            holder = live_holder(entry.path)  # a read attach knows no holder; the lease file does
            checks.append(
                {
                    "name": "writer-lease",
                    "status": "warn" if holder else "pass",
                    "detail": f"held by {holder}" if holder else "no live writer; a write here claims it",
                }
            )
            checks.append(
                {
                    "name": "write-doors",
                    "status": "warn" if holder else "pass",
                    "detail": "BRAINY_WRITER_LOCKED while the holder lives"
                    if holder
                    else "the first write claims the lease",
                }
            )
        torn = [w for w in handle.warnings if w["code"] == "torn-tail"]
        checks.append(
            {
                "name": "fact-log",
                "status": "warn" if torn else "pass",
                "detail": torn[0]["message"] if torn else f"whole through generation {handle.head}",
            }
        )
        checks.append({"name": "counts", "status": "pass", "detail": "the ledger moves in the commit"})
        worst = (
            "fail"
            if any(c["status"] == "fail" for c in checks)
            else ("warn" if any(c["status"] == "warn" for c in checks) else "pass")
        )
        return {"brain": name, "verdict": worst, "generation": handle.head, "checks": checks}

    def report(self) -> dict[str, Any]:
        """The pool block of ``GET /v1/health``."""
        with self._lock:
            entries = list(self._entries.values())
        resident = sorted(e.name for e in entries if e.handle is not None)
        writers = [e for e in entries if e.writer]
        fence_lost = any(not lease_of(e).fence_holds() for e in writers if lease_of(e) is not None)
        arbiter = self.arbiter.report()
        return {
            "budgetBytes": arbiter["budgetBytes"],
            "derivation": arbiter["derivation"],
            "floored": arbiter["floored"],
            "overridden": arbiter["overridden"],
            "heldBytes": arbiter["heldBytes"],
            "knownBrains": len(self.known()),
            "resident": resident,
            "writers": len(writers),
            "writerBrains": sorted(e.name for e in writers),
            "overBudgetAdmissions": arbiter["overBudgetAdmissions"],
            "fenceLost": fence_lost,
        }

    def reach(self, principal: Any) -> list[str]:
        """The names of the brains a credential reaches here (the service key reaches every name)."""
        return [b for b in self.known() if reaches(principal, b)]

    def only_brain(self, principal: Any) -> str | None:
        """The one rule for a call that names no brain (DOORS 0.2), on every transport: the brain a credential
        reaches here when it reaches exactly one, else None (and the door's ``brain: required``)."""
        named = principal.token_brain
        if named is None and principal.brains is not None and len(principal.brains) == 1 and not principal.service_key:
            named = next(iter(principal.brains))
        if named is not None and named in self._entries:  # a brain a door has reached: known, no listing per call
            return named
        names = self.reach(principal)
        return names[0] if len(names) == 1 else None

    def brains_for(self, principal: Any) -> list[dict[str, Any]]:
        """``GET /v1/brains``: the brains a credential reaches (the service key sees every name), with state."""
        names = self.reach(principal)
        out = []
        for name in names:
            entry = self._entries.get(name)
            archived = self._dir is not None and archive.archived_at(self._dir, name) is not None
            out.append(
                {
                    "name": name,
                    "archived": archived,
                    "resident": entry is not None and entry.handle is not None,
                    "writer": entry is not None and entry.writer,
                }
            )
        return out

    def residency(self, name: str) -> dict[str, Any]:
        """``name``'s residency block (DOORS 5.3, diagnostics and stats): whether a handle is open, since when
        (ms), what the brain counts it holds, and the doors in flight beside the one asking."""
        entry = self._entries.get(name)
        handle = entry.handle if entry is not None else None
        block: dict[str, Any] = {
            "resident": handle is not None,
            "footprintBytes": 0,
            "doorsInFlight": max(0, entry.in_flight - 1) if entry is not None else 0,
        }
        if handle is not None and entry is not None:
            block["since"], block["footprintBytes"] = int(entry.since * 1000), footprint(handle)
        return block

    def enter(self, name: str) -> Entry:
        """A door is in flight on ``name``: answers its entry, for :meth:`held` and :meth:`left`."""
        entry = self._entries.get(name) or self._entry(name)  # the common case without a call
        entry.in_flight += 1  # before the handle is resolved: the arbiter never closes it under this door
        cadence = entry.cadence  # Cadence.touch, inline: every door pays it
        now = time.monotonic()
        mean = cadence.mean
        cadence.mean = now - cadence.last if mean is None else 0.8 * mean + 0.2 * (now - cadence.last)
        cadence.last = now
        return entry

    def follow(self, name: str) -> Entry:
        """A held feed's drain is in flight on ``name``: counted as a door is, so the arbiter never closes the
        handle under the read, but no door arrived (the arbiter's cadence is the doors', and a stream's tick
        must not keep its brain resident). Ended by :meth:`left`."""
        entry = self._entries.get(name) or self._entry(name)
        entry.in_flight += 1
        return entry

    @staticmethod
    def left(entry: Entry) -> None:
        """The door that :meth:`enter` ed ``entry`` is done (its entry, even if an archive has since taken it
        out of the table). After the handle's first door, the builds its followers held back for it may start."""
        entry.in_flight -= 1
        if entry.unanswered:
            entry.unanswered = False
            handle = entry.handle
            if handle is not None:
                handle.first_door_done()

    async def retire(self, name: str, drain_seconds: float = 10.0) -> dict[str, Any] | None:
        """Close ``name`` and forget it (host.archive): the doors in flight finish first (bounded), then the
        handle closes cleanly; the next door on the name resolves it afresh. None when nothing was open."""
        with self._lock:
            entry = self._entries.pop(name, None)
            if entry is None:
                return None
            self._retiring[name] = entry
        try:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + drain_seconds
            while entry.in_flight > 0 and loop.time() < deadline:
                await asyncio.sleep(0.005)
            with entry.lock:
                handle, entry.handle = entry.handle, None
            if handle is None:
                return None
            answer: dict[str, Any] = await loop.run_in_executor(None, handle.close)
            del handle  # the last reference, as in close
            await loop.run_in_executor(None, give_back)
            return answer
        finally:
            self._retiring.pop(name, None)

    def close_all(self) -> list[dict[str, Any]]:
        """Close every handle (the stop sequence): each writer flushes, records its close, releases; a lease an
        eviction kept is released with its record too."""
        self.arbiter.stop()
        with self._lock:
            entries = list(self._entries.values())
        closed = []
        for entry in entries:
            with entry.lock:
                handle, entry.handle = entry.handle, None
                kept = self._release_kept(entry)
            if kept is not None:
                log.info(
                    "brain %s (evicted) closed: its kept lease released, clean close recorded %s",
                    entry.name,
                    kept["cleanCloseRecorded"],
                )
                closed.append(kept)
            if handle is not None:
                answer = handle.close()
                log.info(
                    "brain %s closed: lease released %s, clean close recorded %s",
                    entry.name,
                    answer["leaseReleased"],
                    answer["cleanCloseRecorded"],
                )
                closed.append(answer)
        return closed


def reaches(principal: Any, name: str) -> bool:
    """Whether a credential reaches the brain ``name``: a token its own brain, a key its named brains, the service
    key and a ``*`` key every one."""
    if principal.token_brain is not None:
        return name == principal.token_brain
    return principal.brains is None or principal.service_key or name in principal.brains
