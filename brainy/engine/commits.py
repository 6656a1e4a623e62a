"""A writer's commit path, door side: prepare, stage and embed before the lock, then run the door's rule and the
guardrails on the commit path's transaction, and wait for the shared fsync.

Writes are serialised by one commit lock (the head's, brainy/store/head.py): a commit runs its door's rule against
every commit applied before it, asks the guardrails, and hands what it staged to the commit path below the doors
(brainy/store/commit_path.py), which appends its frame and applies its keys; only then does it wait (outside the
lock) for the fsync it shares with whoever else is waiting. The texts a commit stores are embedded before it takes
the lock, in one batch (off the event loop for :meth:`Writes.awrite`), so the lock is never held during inference.
Reads take the durable generation once and read at it, so they never wait on an fsync and never see a commit that
is not yet durable; the followers move when a commit becomes durable.

The steps themselves (prepare, embed, run the rule) are brainy/doors/staging.py's, which ``policy.check`` rehearses
over a read snapshot and hands to the same judge, so a check answers what the commit would do.
"""

from __future__ import annotations

import asyncio
import hashlib
import threading
import weakref
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol

from brainy.contract import arguments
from brainy.contract import doors as D
from brainy.doors import policy, registry, staging, vfs
from brainy.doors.writes import texts
from brainy.index import embedder
from brainy.index.follower import ACK_WAIT_SECONDS
from brainy.index.snapshot import Snapshot
from brainy.store import answered
from brainy.store.blobs import BlobStore
from brainy.store.commit_path import CommitPath
from brainy.store.maintenance import Maintenance

# how long a served group's worker waits for the loop to write its answers before it moves the followers (a busy
# loop's turn comes later; the followers do not wait longer for it)
ANSWER_WAIT_SECONDS = 0.05


class Written(Protocol):
    """What the write path reads of the brain it writes: its name and blobs, snapshots at its durable head (a
    rule's view, a door's ``prepares``, a file's staging), and whether it may write now. The brain handle
    (``brain.py``) is one."""

    name: str
    blobs: BlobStore

    def at(self, generation: int | None = None) -> Snapshot: ...

    def check_writable(self) -> None: ...


class Writes:
    """The write doors of one brain, run on its ``commits`` path: ``brain`` asked what it is and whether it may
    write, ``maintenance`` told of each commit (it flushes a full memtable)."""

    def __init__(self, brain: Written, commits: CommitPath, maintenance: Maintenance) -> None:
        # weakly: the brain holds this, and a strong link back would make every closed brain a cycle that only a
        # full collection frees, as its followers' would (brainy/index/follower.py)
        self.brain: Written = weakref.proxy(brain)
        self.commits = commits
        self.maintenance = maintenance
        self._pool: ThreadPoolExecutor | None = None
        self._durability: _Durability | None = None  # the served writes waiting on the fsync workers
        # a served handle's (Brain.served): a write awaited on a loop is answered once durable, before the followers
        # move up to it, and the server's read doors wait for them instead (brainy/host/dispatch.py, ``run``)
        self.answer_first = False

    def commit(
        self,
        door: str,
        args: Any,
        caller: str | None,
        via: str | None,
        vectors: dict[str, bytes] | None = None,
        roles: tuple[str, ...] = (),
        prepared: dict[str, Any] | None = None,
        staged: Any = None,
        write: str | None = None,
    ) -> tuple[dict[str, Any], int]:
        """Validate, append and apply one commit; answers (answer, log sequence or 0 if nothing was written).
        ``vectors`` are the embeddings of the texts the rule stores (``staging.embeddings``), ``prepared`` what
        its door's ``prepares`` made, ``staged`` a file's content already durable in the blob packs
        (``vfs.stage``): all of it before the commit lock. ``write``: the id the write was sent with
        (``brainy-write``, docs/fleet.md "A write sent twice"): a write of the caller's with an id the commit path
        remembers is answered what it was, its commit's log sequence to wait for, and nothing is run.

        The guardrails (DOORS 9.3) are asked after the rule staged its ops and before anything is
        appended: a refused write is dropped, its audit event committed in its place, and
        :class:`~brainy.doors.policy.Audited` raised for the caller to wait on before it refuses."""
        staging.rule_of(door)  # an unknown door refuses before its arguments are read
        args = arguments.check(D.BY_NAME[door], args)
        brain, commits, head = self.brain, self.commits, self.commits.head
        with head.commit_lock:
            brain.check_writable()
            if write is not None:
                recalled = commits.answered.recall(write, caller)
                if recalled is not None:
                    return recalled
            txn = commits.begin(caller, via)
            answer = staging.run(txn, door, args, brain, vectors, prepared, staged, commits.written_since)
            refused = policy.refusal(txn, door, roles, self)
            if refused is not None:
                target = policy.target_of(txn)
                txn = commits.again(txn)
                policy.audit(txn, door, refused, target)
            if not txn.ops:  # every item of a batch refused: nothing to commit
                answer.update(generation=head.applied, timestamp=head.last_ts)
                return answer, 0
            if write is not None and refused is None and "receipt" not in answer:  # a receipt's digest is the frame's
                txn.write = answered.written(
                    write, {**answer, "generation": txn.generation, "timestamp": txn.timestamp}
                )
            seq, payload = commits.append(txn)
            if "receipt" in answer:
                answer["receipt"]["digest"] = hashlib.sha256(payload).hexdigest()
            self.maintenance.committed()
        if refused is not None:
            raise policy.Audited(refused, seq, txn.generation)
        answer.update(generation=txn.generation, timestamp=txn.timestamp)
        return answer, seq

    def write(
        self,
        door: str,
        args: Any = None,
        *,
        caller: str | None = None,
        via: str | None = None,
        roles: tuple[str, ...] = (),
        write: str | None = None,
    ) -> dict:
        """Run the write door ``door``; returns once the commit is durable. ``roles`` are the caller's
        asserted roles, which a policy rule's ``role:<name>`` subject matches; ``write`` the id it was sent with
        (:meth:`commit`). A file's content is stored and fsynced first, outside the commit lock, so a crash never
        leaves a row naming missing bytes."""
        brain = self.brain
        if self.maintenance.behind():  # as awrite: the condition's lock only when there is something to wait for
            self.maintenance.wait_for_room()
        args, prepared = staging.prepare(brain, door, args)
        if door in vfs.STAGERS:
            brain.check_writable()
        with brain.blobs.writing() as writing:  # a blob sweep keeps what this write stores until it is durable
            staged = vfs.stage(brain, door, args, writing)
            try:
                answer, seq = self.commit(
                    door, args, caller, via, staging.embeddings(door, args, staged), roles, prepared, staged, write
                )
            except policy.Audited as audited:  # the refusal answers once its audit event is durable
                self.commits.durable_at(audited.seq, audited.generation)
                raise audited.refusal from None
            if seq:
                self.commits.durable_at(seq, answer["generation"])
        return answer

    def _workers(self) -> ThreadPoolExecutor:
        """The fsync (and file staging) workers, never the event loop."""
        if self._pool is None:
            self._pool = ThreadPoolExecutor(4, thread_name_prefix="brainy-fsync")
        return self._pool

    def shutdown(self) -> None:
        """Stop the workers, once what they run has ended (the handle's close)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True)

    async def awrite(
        self,
        door: str,
        args: Any = None,
        *,
        caller: str | None = None,
        via: str | None = None,
        roles: tuple[str, ...] = (),
        write: str | None = None,
    ) -> dict:
        """:meth:`write` for an event loop: the embedding and the fsync are awaited on worker threads,
        never on the loop."""
        brain = self.brain
        if self.maintenance.behind():  # before this write holds anything the maintenance thread may wait on
            await asyncio.to_thread(self.maintenance.wait_for_room)
        entry = registry.REGISTERED.get(door)
        prepared = None
        if entry is not None and entry.prepares is not None:  # it may wait on a language provider: a thread
            args, prepared = await asyncio.to_thread(staging.prepare, brain, door, args)
        staged = None
        with brain.blobs.writing() as writing:  # a blob sweep keeps what this write stores until it is durable
            if door in vfs.STAGERS:  # chunking, hashing and the pack's fsync, on a worker thread
                brain.check_writable()
                staged = await asyncio.get_running_loop().run_in_executor(
                    self._workers(), vfs.stage, brain, door, args, writing
                )
            wanted = texts(door, args) or vfs.staged_texts(door, args, staged)
            vectors = await embedder.run(staging.embeddings, door, args, staged) if wanted else None
            try:
                answer, seq = self.commit(door, args, caller, via, vectors, roles, prepared, staged, write)
            except policy.Audited as audited:
                await self._adurable_at(audited.seq, audited.generation)
                raise audited.refusal from None
            if seq:
                await self._adurable_at(seq, answer["generation"])
                # served: read-your-writes, the builds this commit needs done first (a commit starts one in the
                # durable step just awaited, so one it needs is in flight by now)
                if brain.follower.background and brain.followers.building:
                    await asyncio.get_running_loop().run_in_executor(
                        self._workers(), brain.followers.until_built, ACK_WAIT_SECONDS
                    )
        return answer

    async def _adurable_at(self, seq: int, generation: int) -> None:
        """``CommitPath.durable_at`` on the fsync workers, never on the loop: with the other writes of this loop
        waiting meanwhile (:class:`_Durability`)."""
        loop = asyncio.get_running_loop()
        waits = self._durability
        if waits is None or waits.loop is not loop:
            if waits is not None and waits.busy:  # another loop's writes wait there now (tests run several loops)
                await loop.run_in_executor(self._workers(), self.commits.durable_at, seq, generation)
                return
            waits = self._durability = _Durability(loop, self._workers(), self.commits, self.answer_first)
        await waits.wait(seq, generation)


class _Durability:
    """The writes of one event loop waiting for their commits to be durable, handed to the fsync workers together:
    while one call there is in flight, the writes that commit meanwhile wait here, and go as the next call once it
    returns (``CommitPath.durable_all``: the newest's wait makes the others durable too). One trip to a worker and
    one wake of the loop for each group, not a worker's wake, the loop's wake, a future and a callback for each
    write: served single adds, 16 in flight, 2,500-2,700 -> 3,700-3,850 a second, a third less CPU a write. A
    shipped brain's group is gathered for one pass of the loop first (:meth:`wait`): ``--ship sync`` at 16
    writers, 900-1,080 -> 1,200-1,450 writes a second. With ``answer_first`` (a served handle) a group is answered
    from the worker once durable, and the call returns once the followers have moved up to it: the next group goes
    after that, so the followers are never more than one group behind the answers."""

    def __init__(
        self, loop: asyncio.AbstractEventLoop, pool: ThreadPoolExecutor, commits: CommitPath, answer_first: bool
    ) -> None:
        self.loop = loop
        self._pool = pool
        self._commits = commits
        self._answer_first = answer_first  # Writes.answer_first
        self._waiting: list[tuple[int, int, asyncio.Future[None]]] = []
        self.busy = False  # a call is on the workers, or one will go once the loop's ready callbacks have run

    def wait(self, seq: int, generation: int) -> asyncio.Future[None]:
        future = self.loop.create_future()
        self._waiting.append((seq, generation, future))
        if not self.busy:
            if self._commits.shipping is None:
                self._send()  # at once: the fsync starts while the loop reads the next requests
            else:
                # a shipped brain's wait is a round trip to the object store for the whole group: sent once the
                # callbacks the loop has ready now have run, the requests that came in the same read of the
                # sockets, which commit and join it (16 writers answered together come back together, where the
                # first of them went alone and the rest waited for its upload)
                self.busy = True
                self.loop.call_soon(self._send)
        return future

    def _send(self) -> None:
        group, self._waiting = self._waiting, []
        self.busy = False
        loop = self.loop
        newest = max(g for _, g, _ in group)

        def acknowledge() -> None:  # on the worker, once durable: answered while the followers move up to them
            answered = threading.Event()

            def answer() -> None:
                # noted on the loop as it answers: a read it meets before it has, waits for nothing it has not said
                self._commits.head.acknowledge(newest)
                self._answer(group, [None] * len(group))
                # set here, not after the writes' tasks have written their answers: a read the loop meets first
                # waits for the followers (brainy/host/dispatch.py), and they must not wait for it in turn
                answered.set()

            try:
                loop.call_soon_threadsafe(answer)
            except RuntimeError:  # the loop closed meanwhile: nothing waits there
                return
            # the followers' step holds the GIL: begun at once, it kept the loop from its answers for a switch
            # interval (5 ms) or until the step's end, whichever came first; begun once the loop has taken them,
            # the answers' short steps go out first
            answered.wait(ANSWER_WAIT_SECONDS)

        try:
            call = loop.run_in_executor(
                self._pool,
                self._commits.durable_all,
                [(s, g) for s, g, _ in group],
                acknowledge if self._answer_first else None,
            )
        except Exception as exc:  # noqa: BLE001  (the workers shut down: the brain closing) each write hears it
            self._answer(group, [exc] * len(group))
            return
        self.busy = True
        call.add_done_callback(lambda done: self._returned(group, done))

    def _returned(self, group: list[tuple[int, int, asyncio.Future[None]]], done: asyncio.Future[Any]) -> None:
        self.busy = False
        if done.cancelled():  # the loop's own shutdown: so are the writes
            for _, _, future in group:
                future.cancel()
        else:
            try:
                failures = done.result()
            except Exception as exc:  # noqa: BLE001  (as in _send) each write hears it
                failures = [exc] * len(group)
            self._answer(group, failures)
        if self._waiting:
            self._send()

    @staticmethod
    def _answer(group: list[tuple[int, int, asyncio.Future[None]]], failures: list[Exception | None]) -> None:
        for (_, _, future), failure in zip(group, failures):
            if future.done():  # its write was cancelled meanwhile (the connection went away)
                continue
            if failure is None:
                future.set_result(None)
            else:
                future.set_exception(failure)
