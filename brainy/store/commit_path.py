"""The commit path below the doors: a commit's transaction begun at the head, its frame appended to the log, its
keys applied, and the durable head moved once the shared fsync lands.

What a commit stages is the doors' business (brainy/engine/commits.py runs a door's rule on :meth:`begin`'s
transaction, under the head's commit lock); what happens to it after is this module's, and the same for every
door. A commit's frame is appended (written, not yet durable) and its keys applied to the memtable at once, under
the commit lock, so the next commit reads it; reads take the durable generation, so none sees it before
:meth:`CommitPath.durable_at` has waited (outside the lock) for the fsync it shares with whoever else waits, and
moved the durable head and the followers up to it. An open replays the log's frames through the same
:meth:`CommitPath.replay`, so a replayed head equals the one that was acknowledged.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Protocol

from brainy.store import keys as K
from brainy.store import log as log_
from brainy.store import rows
from brainy.store.answered import Answered
from brainy.store.clock import now_ms
from brainy.store.head import HeadState
from brainy.store.pending import Pending
from brainy.store.txn import Txn

Move = tuple[str, dict[str, Any] | None, dict[str, Any] | None]  # ("e" or "r", row before, row after)

log = logging.getLogger(__name__)


class Follows(Protocol):
    """What keeps an index of the rows at the durable head, as the commit path sees it (the brain's followers,
    brainy/index/follower.py, behind brainy/engine/followers.py)."""

    def record(self, generation: int, moves: list[Move]) -> None:
        """The entity and relation moves of the commit at ``generation``, applied, not yet durable."""

    def advance(self, generation: int, flushed: int) -> None:
        """The commit at ``generation`` is durable (the tables cover ``flushed``); called under the state lock."""

    @property
    def building(self) -> bool:
        """Whether a build an advance started is in flight, one the reads after it would wait for."""

    def until_built(self) -> None:
        """Wait (bounded) for the builds in flight; never under the state lock, which they publish under."""


class Ships(Protocol):
    """What ships a writer's commits off the machine before they are acknowledged, as the commit path sees it (a
    fleet node's shipper, brainy/fleet/shipping.py): asked before a commit begins, handed each frame appended, and
    asked once a frame is durable here whether its commit may be acknowledged."""

    def check(self) -> None:
        """Refuse (raise) before anything is appended when this writer may not commit now."""

    def appended(self, generation: int, frame: bytes) -> None:
        """The encoded frame of the commit at ``generation`` was appended (not yet durable); under the commit lock."""

    def early(self, generation: int) -> None:
        """The commit at ``generation`` was appended and its local fsync is about to be waited for: a moment to ship
        beside it (never raises)."""

    def acknowledge(self, generation: int) -> None:
        """The commit at ``generation`` is durable locally: return once it may be acknowledged, else raise."""


class CommitPath:
    """One handle's commit path over its ``head``: ``followers`` told of every commit applied and of every move of
    the durable head, ``log`` appended to and waited on.

    A read-only handle's has no log (``log`` None): it only replays. A writer's open gives it the log once the
    replay has found where the log ends."""

    def __init__(self, head: HeadState, followers: Follows, log: log_.LogWriter | None = None) -> None:
        self.head = head
        self.followers = followers
        self.log = log
        # called, from whichever thread made it durable, when the durable head moves: the wakeup of the held
        # change feeds (brainy/doors/feed.py), which then read the log; never needed for correctness
        self.on_durable: list[Callable[[], None]] = []
        # the entity rows written by each commit appended above the durable generation (:meth:`written_since`): put
        # and dropped only under the commit lock, so a rule holding it finds every commit above what it searched
        self._written: Pending[list[dict[str, Any]]] = Pending()
        # a fleet node's shipper (docs/fleet.md "Shipping to object storage"): None outside a fleet's object store
        self.shipping: Ships | None = None
        # the answers of the last writes sent with an id, appended or replayed (docs/fleet.md "A write sent twice")
        self.answered = Answered()

    def txn(self, generation: int, timestamp: int, caller: str | None, via: str | None) -> Txn:
        """A transaction writing ``generation`` over every commit applied so far."""
        head = self.head
        applied, sources = head.applied, head.sources
        return Txn(
            lambda key: sources.lookup(key, applied),
            lambda a, b: sources.scan(a, b, applied),
            head.next_dense,
            generation,
            timestamp,
            caller,
            via,
        )

    def begin(self, caller: str | None, via: str | None) -> Txn:
        """The next commit's transaction: the generation after the applied one, stamped now (never before the last
        commit). The caller holds the commit lock until it has appended it or dropped it."""
        if self.shipping is not None:  # fenced: refused before anything is appended
            self.shipping.check()
        head = self.head
        return self.txn(head.applied + 1, max(now_ms(), head.last_ts), caller, via)

    def again(self, txn: Txn) -> Txn:
        """A fresh transaction in ``txn``'s place: its generation, timestamp, author and service, nothing staged
        (a refused write's audit event is committed so, in the refused write's place)."""
        return self.txn(txn.generation, txn.timestamp, txn.caller, txn.via)

    def append(self, txn: Txn) -> tuple[int, bytes | memoryview]:
        """Write ``txn``'s frame to the log (not yet durable) and apply it to the head; answers the frame's log
        sequence (what :meth:`durable_at` waits for) and its payload. The caller holds the commit lock."""
        generation, timestamp = txn.generation, txn.timestamp
        payload = log_.encode_payload_here(
            log_.payload_doc(generation, timestamp, txn.caller, txn.via, txn.ops, txn.write)
        )
        assert self.log is not None
        seq = self.log.append(generation, payload)
        if txn.write is not None:
            self.answered.remember(txn.write, txn.caller, seq)
        if self.shipping is not None:
            self.shipping.appended(generation, log_.encode_frame(payload))
        self.apply(txn)
        head = self.head
        head.ledgers.put(generation, head.ledger.copy())
        head.last_seq = seq
        # what is durable now is what a rule's search at the durable head sees; its rows are let go here, under the
        # commit lock, never while a rule holds it (a durable generation read stale only keeps more)
        self._written.drop(head.durable)
        self._written.put(generation, [after for kind, _, after in txn.moves if kind == "e" and after is not None])
        return seq, payload

    def written_since(self, generation: int) -> list[dict[str, Any]]:
        """The entity rows written by the commits applied above ``generation``, oldest commit first, as each wrote
        them (a later version may follow). The caller holds the commit lock and took ``generation`` as the durable
        one while holding it (a read snapshot at the durable head): every commit above it is then held here,
        applied and not yet searchable there (memory.remember's dedupe, brainy/doors/memory/keeping.py)."""
        return [row for rows in self._written.above(generation) for row in rows]

    def apply(self, txn: Txn) -> None:
        """Apply ``txn`` to the head: its keys and its commit row to the memtable, its moves to the ledger and the
        followers; the head's generation is then ``txn``'s."""
        generation, timestamp = txn.generation, txn.timestamp
        entities, relations = txn.counts
        txn.overlay[K.commit_key(generation)] = rows.pack(
            {
                "timestamp": timestamp,
                "ops": len(txn.ops),
                "entities": entities,
                "relations": relations,
                "author": txn.caller,
                "via": txn.via,
            }
        )
        head = self.head
        head.mem.put_many(txn.overlay, generation)
        ledger = head.ledger
        ledger.move_all(txn.moves)
        ledger.generation, ledger.last_updated = generation, timestamp
        head.next_dense = txn.next_dense
        head.applied = generation
        head.last_ts = timestamp
        self.followers.record(generation, txn.moves)

    def replay(self, frame: log_.Frame) -> None:
        """Apply a frame the log holds, as its commit was applied when it was made."""
        txn = self.txn(frame.generation, frame.timestamp, frame.author, frame.via)
        txn.replay(frame.ops, [row for _, row in frame.written()])
        self.apply(txn)
        if frame.write is not None:
            self.answered.remember(frame.write, frame.author, 0)

    def durable_all(
        self, waits: list[tuple[int, int]], acknowledge: Callable[[], None] | None = None
    ) -> list[Exception | None]:
        """:meth:`durable_at` for several commits' ``(seq, generation)`` waiting together, in one call: the newest's
        wait first, which makes every older one durable too (its fsync covers the frames before it; the head moves
        past them, their followers' moves with it), so the others return at once; only if it fails is each of them
        waited for as it would have been alone, so each hears its own answer. Answers each one's failure, None for
        each that is durable. ``acknowledge``: :meth:`durable_at`'s, called once all of them are durable."""
        failures: list[Exception | None] = [None] * len(waits)
        newest = max(range(len(waits)), key=lambda i: waits[i][0])
        try:
            self.durable_at(*waits[newest], acknowledge=acknowledge)
            return failures
        except Exception as exc:  # noqa: BLE001  (handed to its write, which raises it)
            failures[newest] = exc
        for i, (seq, generation) in enumerate(waits):
            if i != newest:
                try:
                    self.durable_at(seq, generation)
                except Exception as exc:  # noqa: BLE001  (as above)
                    failures[i] = exc
        return failures

    def durable_at(self, seq: int, generation: int, acknowledge: Callable[[], None] | None = None) -> None:
        """Return once the frame ``seq`` (the commit at ``generation``) is durable, the durable head moved up to it:
        its ledger the durable one and the followers advanced, under the state lock, then :attr:`on_durable`
        called. A head already at or past ``generation`` (a later commit's wait moved it) stays.

        ``acknowledge`` (a served loop's writes): called once the commit is durable (and shipped, below), before
        the followers move: the write is answered while they do, and a read at the head waits for them instead
        (it notes the generation it answers, ``HeadState.acknowledge``, before the answer goes; reads wait in
        ``HeadState.until_visible``). The followers' step is a quarter of a served 1,000-row ``addMany``'s path;
        answered first, it overlaps the next request's arrival and decode, where the core would idle.

        With a shipper, the head moves only once it says the commit may be acknowledged (``--ship sync``: stored
        off the machine; always: this owner still holds the brain), so no read sees a commit that a failover
        could lose, and a refusal it raises leaves the head where it was."""
        assert self.log is not None
        if self.shipping is not None and generation > self.head.durable:
            self.shipping.early(generation)  # --ship sync: its upload and the fsync below take their time together
        self.log.wait(seq)
        if self.shipping is not None and generation > self.head.durable:  # a head already past it was acknowledged
            self.shipping.acknowledge(generation)
        head = self.head
        if acknowledge is not None:
            acknowledge()
        with head.state_lock:
            if generation <= head.durable:
                return
            head.durable = generation
            # taken, not iterated: the next commit puts its ledger meanwhile, under the commit lock only
            head.durable_ledger = head.ledgers.take(generation)[-1][1]
            try:
                self.followers.advance(generation, head.flushed)
            except Exception:
                if acknowledge is not None:  # its writes were answered: what failed after is said here
                    log.exception("the followers failed to move up to generation %d, acknowledged", generation)
                head.followed_to(generation)  # the reads waiting for it go on to meet the failure
                raise
        if acknowledge is not None and self.followers.building:
            # a build the advance started (the first commit a served handle's followers see): the reads after the
            # answer wait for it, as the write itself did before it was answered first
            self.followers.until_built()
        head.followed_to(generation)
        for wake in tuple(self.on_durable):
            wake()
