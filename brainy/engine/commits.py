"""A writer's commit path: validate, append, apply, and wait for the shared fsync.

Writes are serialised by one commit lock: a commit runs its door's rule against every commit
applied before it, appends its frame, applies its keys to the memtable and only then waits
(outside the lock) for the fsync it shares with whoever else is waiting. The texts a commit stores
are embedded before it takes the lock, in one batch (off the event loop for :meth:`awrite`), so
the lock is never held during inference. Reads take the durable
generation once and read at it, so they never wait on an fsync and never see a commit that is
not yet durable; the projection follower moves when a commit becomes durable.
"""

from __future__ import annotations

import asyncio
import hashlib
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from brainy.contract import arguments
from brainy.contract import doors as D
from brainy.contract import refusals as R
from brainy.store import keys as K
from brainy.store import log as log_
from brainy.store.clock import now_ms
from brainy.index import embedder
from brainy.doors import policy, registry, vfs
from brainy.store import rows
from brainy.store.txn import Txn
from brainy.doors.writes import Context, texts


def _rule(door: str) -> Any:
    entry = registry.REGISTERED.get(door)
    if entry is None or entry.runs != registry.WRITE:
        raise R.UnknownDoorError(f"{door!r} is not a write door", door=door)
    return entry.fn


def embeddings(door: str, args: Any, staged: "vfs.PreparedFile | None" = None) -> dict[str, bytes]:
    """The embeddings of the texts a write will store, made in one batch, as the rule's ``vectors``;
    none without a model (the rows are stored without vectors and the answers say "no-model")."""
    wanted = texts(door, args) + vfs.staged_texts(door, args, staged)
    if not wanted:
        return {}
    try:
        vectors, _ = embedder.embed_many(wanted)
    except R.EmbeddingModelMissingError:
        return {}
    return {text: vector.tobytes() for text, vector in zip(wanted, vectors)}


def _prepared(brain: Any, door: str, args: Any) -> tuple[Any, dict[str, Any] | None]:
    """A write's arguments completed by its door's ``prepares`` (registry.py), before the commit lock."""
    entry = registry.REGISTERED.get(door)
    if entry is None or entry.prepares is None:
        return args, None
    return entry.prepares(brain, arguments.check(D.BY_NAME[door], args))


class CommitPath:
    """The commit half of a :class:`~brainy.engine.brain.Brain`."""

    def _txn(self, generation: int, timestamp: int, caller: str | None, via: str | None) -> Txn:
        applied, sources = self._applied, self._sources
        return Txn(lambda key: sources.lookup(key, applied), lambda a, b: sources.scan(a, b, applied),
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
        self.follower.record(generation, txn.moves)
        self.vector_follower.record(generation, txn.moves)
        self.aggregate_follower.record(generation, [(b, a) for kind, b, a in txn.moves if kind == "e"])

    def _replay(self, frame: log_.Frame) -> None:
        txn = self._txn(frame.generation, frame.timestamp, frame.author, frame.via)
        txn.replay(frame.ops, [row for _, row in frame.written()])
        self._apply(txn, frame.generation, frame.timestamp)

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

    def _commit(self, door: str, args: Any, caller: str | None, via: str | None,
                vectors: dict[str, bytes] | None = None, roles: tuple[str, ...] = (),
                prepared: dict[str, Any] | None = None, staged: Any = None,
                ) -> tuple[dict[str, Any], int]:
        """Validate, append and apply one commit; answers (answer, log sequence or 0 if nothing was written).
        ``vectors`` are the embeddings of the texts the rule stores (:func:`embeddings`), ``prepared`` what
        its door's ``prepares`` made, ``staged`` a file's content already durable in the blob packs
        (``vfs.stage``): all of it before the commit lock.

        The guardrails (DOORS 9.3) are asked after the rule staged its ops and before anything is
        appended: a refused write is dropped, its audit event committed in its place, and
        :class:`~brainy.doors.policy.Audited` raised for the caller to wait on before it refuses."""
        rule = _rule(door)
        args = arguments.check(D.BY_NAME[door], args)
        with self._commit_lock:
            self._writable()
            generation = self._applied + 1
            timestamp = max(now_ms(), self._last_ts)
            txn = self._txn(generation, timestamp, caller, via)
            answer = rule(txn, args, Context(self.name, vectors or {}, self.at, prepared or {}, staged, self.blobs))
            refused = policy.refusal(txn, door, roles, self)
            if refused is not None:
                target = policy.target_of(txn)
                txn = self._txn(generation, timestamp, caller, via)
                policy.audit(txn, door, refused, target)
            if not txn.ops:  # every item of a batch refused: nothing to commit
                answer.update(generation=self._applied, timestamp=self._last_ts)
                return answer, 0
            payload = log_.encode_payload(generation, timestamp, caller, via, txn.ops)
            assert self._log is not None
            seq = self._log.append(generation, payload)
            self._apply(txn, generation, timestamp)
            self._ledgers[generation] = self._ledger.copy()
            self._last_seq = seq
            if "receipt" in answer:
                answer["receipt"]["digest"] = hashlib.sha256(payload).hexdigest()
            if self._mem.bytes >= self._flush_bytes:
                self._wake.set()
        if refused is not None:
            raise policy.Audited(refused, seq, generation)
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
                self.follower.advance(generation, self._flushed)
                self.aggregate_follower.advance(generation)
                self.vector_follower.advance(generation, self._flushed)
            else:
                return
        for wake in tuple(self.on_durable):
            wake()

    def write(self, door: str, args: Any = None, *, caller: str | None = None,
              via: str | None = None, roles: tuple[str, ...] = ()) -> dict:
        """Run the write door ``door``; returns once the commit is durable. ``roles`` are the caller's
        asserted roles, which a policy rule's ``role:<name>`` subject matches. A file's content is stored
        and fsynced first, outside the commit lock, so a crash never leaves a row naming missing bytes."""
        args, prepared = _prepared(self, door, args)
        if door in vfs.STAGERS:
            self._writable()
        with self.blobs.writing() as writing:  # a blob sweep keeps what this write stores until it is durable
            staged = vfs.stage(self, door, args, writing)
            try:
                answer, seq = self._commit(door, args, caller, via, embeddings(door, args, staged), roles, prepared,
                                           staged)
            except policy.Audited as audited:  # the refusal answers once its audit event is durable
                self._durable_at(audited.seq, audited.generation)
                raise audited.refusal from None
            if seq:
                self._durable_at(seq, answer["generation"])
        return answer

    def _workers(self) -> ThreadPoolExecutor:
        """The fsync (and file staging) workers, never the event loop."""
        if self._pool is None:
            self._pool = ThreadPoolExecutor(4, thread_name_prefix="brainy-fsync")
        return self._pool

    async def awrite(self, door: str, args: Any = None, *, caller: str | None = None,
                     via: str | None = None, roles: tuple[str, ...] = ()) -> dict:
        """:meth:`write` for an event loop: the embedding and the fsync are awaited on worker threads,
        never on the loop."""
        entry = registry.REGISTERED.get(door)
        prepared = None
        if entry is not None and entry.prepares is not None:  # it may wait on a language provider: a thread
            args, prepared = await asyncio.to_thread(_prepared, self, door, args)
        staged = None
        with self.blobs.writing() as writing:  # a blob sweep keeps what this write stores until it is durable
            if door in vfs.STAGERS:  # chunking, hashing and the pack's fsync, on a worker thread
                self._writable()
                staged = await asyncio.get_running_loop().run_in_executor(self._workers(), vfs.stage, self, door,
                                                                          args, writing)
            wanted = texts(door, args) or vfs.staged_texts(door, args, staged)
            vectors = await embedder.run(embeddings, door, args, staged) if wanted else None
            try:
                answer, seq = self._commit(door, args, caller, via, vectors, roles, prepared, staged)
            except policy.Audited as audited:
                await self._adurable_at(audited.seq, audited.generation)
                raise audited.refusal from None
            if seq:
                await self._adurable_at(seq, answer["generation"])
        return answer

    async def _adurable_at(self, seq: int, generation: int) -> None:
        """:meth:`_durable_at` on the fsync workers, never on the loop."""
        await asyncio.get_running_loop().run_in_executor(self._workers(), self._durable_at, seq, generation)
