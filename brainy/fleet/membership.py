"""One node's membership of the fleet: its registration under a lease, its claims, and its view of the others.

docs/fleet.md is the law this follows. A :class:`Fleet` joins (a lease, then its ``nodes/`` key, created only
if no live node has the name), then keeps three things true while it runs (:meth:`Fleet.run`):

- its lease is renewed every third of its TTL, and its registration rewritten with its free memory then;
  a lease found expired (a pause longer than the TTL, etcd restarted) is replaced by a new one, the node
  registers again and claims back, at its own last epoch, each brain it owned: one another node claimed
  meanwhile is let go;
- its view of the fleet (every live node, every brain's owner) is read again every ``refresh`` seconds;
- every brain this node has a copy of (the host's names) and no live node owns is claimed, unless it is archived
  fleet-wide (brainy/fleet/archived.py).

A claim is one etcd transaction (:meth:`Fleet.claim`): compare the brain's epoch and that it has no live
owner, put the epoch plus one and the owner under this node's lease. Never a read then a write.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

from brainy.contract import refusals as R
from brainy.fleet import archived as A
from brainy.fleet import etcd as E
from brainy.fleet import layout as L
from brainy.fleet.placement import place

log = logging.getLogger("brainy.fleet")

DEFAULT_TTL = 10
MIN_TTL = 2  # seconds: a renewal every third of it must still come back in time
REFRESH_SECONDS = 1.0
# host.move: the named node stages the brain (its newest snapshot and the log after it, written beside its brains)
# within this, before any write is held, or the move is refused: a brain it cannot stage in that time is not moved.
# A large brain over a slow store needs more (``--move-stage-seconds``)
STAGE_SECONDS = 20.0
CLAIM_TRIES = 3  # a claim's compare can lose to another node's claim; read again and try at most this often
ARRIVAL_BACKOFF = (1.0, 60.0)  # seconds: a brain that could not arrive is tried again after 1 s, doubling to 60
HANDOVER_POLL = 0.1  # seconds: how often a request waiting out a hand-over reads the fleet again (Fleet.serving)
# claims at once whose arrival (a restore from the object store, a second or more each) runs in parallel: a dead
# owner's hundred brains are not restored one after another while their requests wait
ARRIVALS = 8
MAX_MARGIN = 1.0  # seconds: a write is acknowledged only this long (or a quarter of the TTL) before the lease can end

#: How a brain came to be claimed, for :attr:`Fleet.arrive`: a new brain (``host.provision``: no store yet), one
#: no live node owned (a local copy, or a dead owner's brain: restored from the object store after epoch 1), or
#: one this node held before its lease lapsed and claimed back at its own epoch (its open copy is current).
NEW, ADOPTED, BACK = "new", "adopted", "back"

Arrival = Callable[[str, int, str], Awaitable[None]]


class FleetJoinError(ValueError):
    """This node cannot join the fleet (its name is held by a live node, or etcd does not answer): the start is
    refused (a ValueError, as every other refused start flag)."""


class Fleet:
    """This node in the fleet: ``node`` reachable at ``url``, its keys under a lease of ``ttl`` seconds.

    ``free_bytes`` answers the memory placement weighs (MemAvailable); ``local`` the brains this node has a
    copy of. Both are handed in by the host, which this floor does not know."""

    def __init__(
        self,
        client: E.Etcd,
        node: str,
        url: str,
        ttl: int = DEFAULT_TTL,
        free_bytes: Callable[[], int] = lambda: 0,
        local: Callable[[], list[str]] = list,
        refresh: float = REFRESH_SECONDS,
        stage_seconds: float = STAGE_SECONDS,
    ) -> None:
        if ttl < MIN_TTL:
            raise FleetJoinError(f"--fleet-ttl {ttl}: at least {MIN_TTL} seconds")
        self.etcd = client
        self.node = node
        self.url = url
        self.ttl = ttl
        self.free_bytes = free_bytes
        self.local = local
        self.refresh_seconds = refresh
        self.stage_seconds = stage_seconds  # host.move (--move-stage-seconds): the named node stages within this
        self.lease = 0
        self.joined_at = int(time.time() * 1000)
        self.owned: dict[str, int] = {}  # the brains this node serves, with the epoch it claimed each at
        self.nodes: dict[str, L.Node] = {}  # the view: the live nodes
        self.owners: dict[str, L.Owner] = {}  # the view: each placed brain's owner
        # the view: the brains archived fleet-wide, each with its archivedAt (never claimed unowned)
        self.archived: dict[str, int] = {}
        self._task: asyncio.Task[None] | None = None
        self._renewal: asyncio.Future[None] | None = None
        # the view: each placed brain's epoch (a brain with one and no live owner is claimed by a node that
        # takes over; one this node does not own is never served from its copy, brainy/host/dispatch.py)
        self.epochs: dict[str, int] = {}
        # the brains requests wait for through a hand-over (:meth:`serving`), with how many wait: claimed first
        self.wanted: Counter[str] = Counter()
        self._claiming: dict[str, asyncio.Future[Any]] = {}  # the claims of wanted brains under way (:meth:`_want`)
        self._refreshing: asyncio.Future[None] | None = None  # the view's read under way for waiting requests
        self._refreshed_at = 0.0
        # until when (time.monotonic()) this node may acknowledge a write: a keep-alive etcd answered was sent at
        # t, so etcd cannot expire the lease before t + TTL; less a margin, for the answer still on its way
        self.safe_until = 0.0
        self.margin = min(MAX_MARGIN, ttl / 4)
        # with --object-store: what a claim must do before the brain is served (restore it, open and ship it);
        # the brains it is doing it for, with their epoch, are refused meanwhile (docs/fleet.md "Failover")
        self.arrive: Arrival | None = None
        self.arriving: dict[str, int] = {}
        self.takes_over = False  # --object-store: claim the placed brains no live node owns, not only local ones
        # brains whose arrival failed: (when to try again, the wait after that); each failed claim burns an epoch
        self._backoff: dict[str, tuple[float, float]] = {}
        # host.move: the brains this node is handing to another (brainy/host/moving.py), each with the event set
        # when the hand-over has ended once its writes are held (None before: the new owner is still staging it);
        # the dispatcher holds a new write of such a brain back until then
        self.handing: dict[str, asyncio.Event | None] = {}

    # -- joining and leaving ------------------------------------------------------------------------

    def _registration(self) -> bytes:
        return L.node_value(L.Node(self.node, self.url, self.free_bytes(), self.joined_at))

    async def join(self, claim: bool = True) -> None:
        """Register under a new lease; a name a live node holds is waited out for one TTL (a restarted node's
        old lease running out), then refused. Then the renewals and the first view; with ``claim``, the first
        claims and the loop (:meth:`start`). A server joins with ``claim`` False and starts once it listens: a
        brain it claimed would otherwise be forwarded to an address that refuses connections until then."""
        try:
            await self._register()
            # renewed from now on: the first claims restore brains, seconds each, longer than a short TTL
            self._renewal = asyncio.ensure_future(self._renewing())
            await self.refresh()
            if claim:
                await self.adopt_local()
        except E.EtcdUnavailableError as exc:
            await self._stop_renewing()
            self.etcd.close()
            raise FleetJoinError(f"--fleet: {exc}") from None
        except FleetJoinError:
            await self._stop_renewing()
            self.etcd.close()
            raise
        if claim:
            self.start()

    def start(self) -> None:
        """Begin the loop (:meth:`run`), its first turn at once."""
        if self._task is None:
            self._task = asyncio.create_task(self.run(), name="brainy-fleet")

    async def _register(self) -> None:
        sent = time.monotonic()
        lease = await self.etcd.grant(self.ttl)
        key = L.node_key(self.node)
        deadline = time.monotonic() + self.ttl + 1
        while True:
            created, _ = await self.etcd.txn([E.version_is(key, 0)], [E.put_op(key, self._registration(), lease)])
            if created:
                break
            if time.monotonic() > deadline:
                await self._revoke(lease)
                raise FleetJoinError(f"--node {self.node}: a live node of the fleet already has that name")
            await asyncio.sleep(0.25)
            sent = time.monotonic()
            if await self.etcd.keepalive(lease) <= 0:  # the wait may outlast a short TTL: keep the new lease
                lease = await self.etcd.grant(self.ttl)
        self.lease = lease
        self.safe_until = sent + self.ttl - self.margin
        log.info("joined the fleet as %s (%s), lease %x, ttl %d s", self.node, self.url, lease, self.ttl)

    async def leave(self) -> None:
        """Stop renewing and end the lease: this node's registration and its owner keys go with it."""
        await _cancel(self._task)
        self._task = None
        for claiming in list(self._claiming.values()):
            await _cancel(claiming)
        await self._stop_renewing()
        if self.lease:
            await self._revoke(self.lease)
            self.lease = 0
        self.owned.clear()
        self.etcd.close()

    async def _stop_renewing(self) -> None:
        await _cancel(self._renewal)
        self._renewal = None

    async def _revoke(self, lease: int) -> None:
        try:
            await self.etcd.revoke(lease)
        except E.EtcdUnavailableError as exc:  # already expired, or etcd away: it expires by itself
            log.warning("fleet: lease %x was not revoked (it expires by itself): %s", lease, exc)

    # -- the loop ------------------------------------------------------------------------------------

    async def run(self) -> None:
        """Re-read the view and claim unowned local brains (and, with ``takes_over``, a dead owner's) every
        ``refresh`` seconds until cancelled, the lease renewed beside it on the task :meth:`join` started; a failing
        etcd is logged and tried again on the next turn."""
        while True:
            try:
                await self.refresh()
                await self.adopt_local()
                if self.takes_over:
                    await self.take_over()
            except (E.EtcdUnavailableError, L.LayoutError) as exc:
                log.warning("fleet: %s", exc)
            await asyncio.sleep(self.refresh_seconds)

    async def _renewing(self) -> None:
        """Renew every third of the TTL, whatever the claims are doing: a failover's restore of a dead owner's
        brain takes seconds, and in one loop with the claims the lease ran out during it (the node then claimed
        its own brain again at the next epoch)."""
        while True:
            await asyncio.sleep(self.ttl / 3)
            try:
                await self.renew()
            except (E.EtcdUnavailableError, L.LayoutError) as exc:
                log.warning("fleet: %s", exc)

    async def renew(self) -> None:
        """Keep the lease alive and the registration fresh; a lease already expired is replaced."""
        sent = time.monotonic()
        left = await self.etcd.keepalive(self.lease)
        if left > 0:
            self.safe_until = sent + left - self.margin
            await self.etcd.put(L.node_key(self.node), self._registration(), self.lease)
            return
        log.warning(
            "fleet: lease %x had expired; joining again and claiming back %d brains", self.lease, len(self.owned)
        )
        held, self.owned = self.owned, {}
        await self._register()
        for brain, epoch in held.items():
            claimed, holder, _ = await self.claim(brain, epoch, BACK)  # compare: still the epoch it put
            if not claimed:
                log.warning("fleet: brain %s was claimed by %s meanwhile; let go", brain, holder)

    async def refresh(self) -> None:
        """Read the view again: every live node and every placed brain's owner."""
        nodes = {}
        for kv in await self.etcd.prefix(L.NODES):
            found = L.read_node(kv.value)
            nodes[found.node] = found
        owners = {L.name_of(kv.key, L.OWNERS): L.read_owner(kv.value) for kv in await self.etcd.prefix(L.OWNERS)}
        self.epochs = {L.name_of(kv.key, L.EPOCHS): L.read_epoch(kv.value) for kv in await self.etcd.prefix(L.EPOCHS)}
        self.archived = await A.every(self.etcd)
        for brain, owner in list(owners.items()):
            if owner.node == self.node and brain not in self.owned and brain not in self.arriving:
                # read before this node let the brain go (host.move): looked up afresh when asked, never served
                del owners[brain]
        for brain in list(self.owned):
            if brain in owners and owners[brain].node != self.node:  # another node claimed it: never serve it
                log.warning("fleet: brain %s is now %s's at epoch %d", brain, owners[brain].node, owners[brain].epoch)
                del self.owned[brain]
        self.nodes, self.owners = nodes, owners

    async def adopt_local(self) -> None:
        """Claim each brain this node has a copy of that no live node owns."""
        await self._each(
            {
                brain: functools.partial(self.adopt, brain)
                for brain in self.local()
                if brain not in self.archived
                and brain not in self.owned
                and brain not in self.owners
                and not self.waiting(brain)
            }
        )

    async def _each(self, claims: dict[str, Callable[[], Awaitable[object]]]) -> None:
        """Run each brain's claim, :data:`ARRIVALS` at a time, a brain a request waits for (:attr:`wanted`)
        before the others; the first failure is raised once all have ended."""
        left = dict(claims)

        async def worker() -> None:
            while left:
                brain = next((b for b in self.wanted if b in left), None) or next(iter(left))
                claim = left.pop(brain)
                if brain not in self.arriving and brain not in self.owned:  # else claimed meanwhile (:meth:`_want`)
                    await claim()

        results = await asyncio.gather(*(worker() for _ in range(min(ARRIVALS, len(left)))), return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException):
                raise result

    def waiting(self, brain: str) -> bool:
        """Whether ``brain`` failed to arrive here lately and is not to be claimed again yet."""
        held = self._backoff.get(brain)
        return held is not None and time.monotonic() < held[0]

    async def take_over(self) -> None:
        """Claim each brain the fleet has placed (it has an epoch) that no live node owns: a dead owner's brains
        (docs/fleet.md "Failover"). Of several nodes trying, the claim transaction lets one win."""
        claims: dict[str, Callable[[], Awaitable[object]]] = {}
        for brain, epoch in self.epochs.items():  # as the refresh before it read them
            if self.waiting(brain) or brain in self.archived:
                continue
            if brain not in self.owners and brain not in self.owned and brain not in self.arriving:
                claims[brain] = functools.partial(self.claim, brain, epoch)
        await self._each(claims)

    # -- claims --------------------------------------------------------------------------------------

    async def claim(
        self, brain: str, epoch: int, how: str = ADOPTED, owner_was: bytes | None = None, unarchive: bool = False
    ) -> tuple[bool, L.Owner | None, int]:
        """Claim ``brain`` at ``epoch``, the one read from ``epochs/<brain>`` (0: never placed): one
        transaction. Answers whether it was claimed, the owner after it, and the brain's epoch after it.
        ``owner_was``: the brain is handed over (``host.move``, brainy/fleet/move.py), claimed only while its owner
        key is still exactly that value, the old owner's word that it stopped writing; else it must have no owner.
        An archived brain is claimed by no one, but with ``unarchive`` (``host.unarchive`` of one no live node
        owns): then the claim deletes its archived key in the same transaction.

        With :attr:`arrive` set, the brain is served only once it has arrived (``how`` says how it came); one
        that cannot arrive is let go (its owner key deleted while still this node's), and the claim answers
        False with no holder."""
        ekey, okey = L.epoch_key(brain), L.owner_key(brain)
        claimed_at = epoch + 1
        mine = L.Owner(self.node, claimed_at)
        compare = [
            E.version_is(ekey, 0) if epoch == 0 else E.value_is(ekey, L.epoch_value(epoch)),
            E.version_is(okey, 0) if owner_was is None else E.value_is(okey, owner_was),
        ]
        success = [E.put_op(ekey, L.epoch_value(claimed_at)), E.put_op(okey, L.owner_value(mine), self.lease)]
        if unarchive:
            success.append(A.unmark_op(brain))
        else:
            compare.append(A.absent(brain))  # an archived brain is claimed by no one (brainy/fleet/archived.py)
        claimed, read = await self.etcd.txn(compare, success, [E.range_op(ekey), E.range_op(okey)])
        if claimed and self.arrive is not None:
            self.arriving[brain] = claimed_at
            try:
                await self.arrive(brain, claimed_at, how)
            except Exception as exc:
                wait = self._backoff.get(brain, (0.0, ARRIVAL_BACKOFF[0] / 2))[1] * 2
                wait = min(ARRIVAL_BACKOFF[1], max(ARRIVAL_BACKOFF[0], wait))
                self._backoff[brain] = (time.monotonic() + wait, wait)
                log.error(
                    "fleet: brain %s did not arrive at epoch %d; let go, tried again in %.0f s: %s",
                    brain,
                    claimed_at,
                    wait,
                    exc,
                )
                await self.let_go(brain, mine)
                return False, None, claimed_at
            finally:
                self.arriving.pop(brain, None)
        if claimed:
            self._backoff.pop(brain, None)
            self.owned[brain] = claimed_at
            self.owners[brain] = mine
            log.info("fleet: claimed brain %s at epoch %d", brain, claimed_at)
            return True, mine, claimed_at
        current = L.read_epoch(read[0][0].value) if read and read[0] else 0
        holder = L.read_owner(read[1][0].value) if len(read) > 1 and read[1] else None
        if holder is not None:
            self.owners[brain] = holder
        return False, holder, current

    async def adopt(self, brain: str, unarchive: bool = False) -> L.Owner | None:
        """Claim ``brain`` at its current epoch if no live node owns it: the owner after (this node, another
        that won, or None when the epoch kept moving). ``unarchive``: it is archived fleet-wide, and the claim
        serves it again in the same transaction."""
        for _ in range(CLAIM_TRIES):
            found = await self.etcd.get(L.epoch_key(brain))
            claimed, holder, _ = await self.claim(brain, L.read_epoch(found.value) if found else 0, unarchive=unarchive)
            if claimed or holder is not None or self.waiting(brain):  # won, lost, or won and could not arrive
                return holder
        return None

    async def claim_new(self, brain: str) -> int:
        """Claim a brain the fleet has never placed (``host.provision``): its epoch, 1; a name the fleet has
        placed before, live or not, is BrainExistsError."""
        claimed, holder, epoch = await self.claim(brain, 0, NEW)
        if not claimed:
            where = f" (node {holder.node} owns it)" if holder is not None else f" (at epoch {epoch})"
            raise R.BrainExistsError(f"the fleet has already placed a brain named {brain!r}{where}", brain=brain)
        return 1

    async def let_go(self, brain: str, mine: L.Owner) -> None:
        """Delete ``brain``'s owner key if it is still ``mine`` (one transaction), so another claim may follow."""
        self.owned.pop(brain, None)
        if self.owners.get(brain) == mine:
            del self.owners[brain]
        okey = L.owner_key(brain)
        try:
            await self.etcd.txn([E.value_is(okey, L.owner_value(mine))], [E.delete_op(okey)])
        except E.EtcdUnavailableError as exc:  # it ends with this node's lease all the same
            log.warning("fleet: the claim of %s was not let go (it ends with the lease): %s", brain, exc)

    def fence(self, brain: str, epoch: int) -> None:
        """Return when this node may acknowledge a write of ``brain`` at ``epoch`` now: it owns the brain at that
        epoch, and its lease cannot have expired (docs/fleet.md "Fencing"); else BrainMovedError."""
        if self.owned.get(brain) != epoch:
            owner = self.owners.get(brain)
            node, at = (owner.node, owner.epoch) if owner is not None else (self.node, epoch)
            raise R.BrainMovedError(
                f"brain {brain!r} is no longer this node's at epoch {epoch} (node {node!r}, epoch {at})",
                brain=brain,
                node=node,
                epoch=at,
            )
        if time.monotonic() >= self.safe_until:
            raise R.BrainMovedError(
                f"node {self.node!r} could not renew its lease in time: it acknowledges no write of {brain!r} "
                "until it has",
                brain=brain,
                node=self.node,
                epoch=epoch,
            )

    def release(self, brain: str) -> None:
        """Forget a claim this node made and could not follow through (its store was not created)."""
        self.owned.pop(brain, None)

    # -- questions the host and the edge ask -------------------------------------------------------------

    def owner(self, brain: str) -> L.Owner | None:
        """Who serves ``brain`` now, as this node knows it: itself first, then the view."""
        epoch = self.owned.get(brain)
        if epoch is not None:
            return L.Owner(self.node, epoch)
        return self.owners.get(brain)

    def elsewhere(self, brain: str) -> L.Owner | None:
        """The owner of ``brain`` when it is another node than this one (None: serve it here)."""
        owner = self.owner(brain)
        return owner if owner is not None and owner.node != self.node else None

    async def lookup(self, brain: str) -> L.Owner | None:
        """The owner of ``brain`` read from etcd now (the view updated with it)."""
        if brain in self.owned:
            return self.owner(brain)
        found = await self.etcd.get(L.owner_key(brain))
        if found is None:
            self.owners.pop(brain, None)
            return None
        owner = L.read_owner(found.value)
        if owner.node != self.node:  # one naming this node that it does not hold is an earlier run's: not kept
            self.owners[brain] = owner
        return owner

    async def serving(self, brain: str, deadline: float, fresh: bool = False) -> L.Owner | None:
        """The owner that serves ``brain``, waited for until ``deadline`` (time.monotonic()) while a hand-over is
        under way (docs/fleet.md "A request during a hand-over"): the brain arriving here (being restored), placed
        (it has an epoch) with no live owner (its owner's lease ended, no node has claimed it yet), or owned by a
        node not registered (its lease ending). None: the fleet has never placed it (a copy only this node has), or
        it is archived with no owner (no node claims it: ``host.unarchive`` here claims it back).
        Past the deadline, BrainMovedError naming the last owner known. Unless ``fresh`` (the owner it answered
        last did not serve), a live owner in the view is answered without asking etcd: the common case."""
        last = self.owner(brain)
        if not fresh and last is not None and brain not in self.arriving and self._reachable(brain, last):
            return last
        self.wanted[brain] += 1  # a brain this node is about to claim is claimed before the others
        try:
            while True:
                if brain not in self.arriving:
                    owner = await self.lookup(brain)
                    if owner is not None:
                        last = owner
                        if self._reachable(brain, owner):
                            return owner
                    elif brain in self.archived:  # no node will claim it: its doors answer here (archived, unarchive)
                        return None
                    else:
                        placed = await self.etcd.get(L.epoch_key(brain))
                        if placed is None:
                            return None
                        self._want(brain, L.read_epoch(placed.value))
                if time.monotonic() >= deadline:
                    node, epoch = (last.node, last.epoch) if last is not None else ("", self.arriving.get(brain, 0))
                    raise R.BrainMovedError(
                        f"brain {brain!r} has no node serving it yet (a hand-over is under way); ask again",
                        brain=brain,
                        node=node,
                        epoch=epoch,
                    )
                await asyncio.sleep(min(HANDOVER_POLL, max(0.0, deadline - time.monotonic())))
                if brain not in self.arriving:
                    await self.refresh_shared()
        finally:
            self.wanted[brain] -= 1
            if self.wanted[brain] <= 0:
                del self.wanted[brain]

    def _want(self, brain: str, epoch: int) -> None:
        """Claim ``brain`` (placed at ``epoch``, no live owner) now, beside the claims under way, for a request
        waiting for it. The loop claims a dead owner's brains :data:`ARRIVALS` at a time a node, each node in the
        same order: a 167-brain node's last ones were claimed 13-20 s after its lease ended, and the requests
        waiting for them ran out of time (perf/bench_chaos.py). Only by a node that takes over (its restores take
        seconds; a node without an object store adopts a local copy on its loop's next turn, a second at most, with
        no listing of its brains on every poll of the wait), once started, and :data:`ARRIVALS` of these at once."""
        if (
            not self.takes_over
            or brain in self._claiming
            or len(self._claiming) >= ARRIVALS
            or self._task is None
            or self.waiting(brain)
        ):
            return
        claiming = asyncio.ensure_future(self.claim(brain, epoch))
        self._claiming[brain] = claiming
        claiming.add_done_callback(functools.partial(self._wanted_claimed, brain))

    def _wanted_claimed(self, brain: str, claiming: asyncio.Future[Any]) -> None:
        self._claiming.pop(brain, None)
        if not claiming.cancelled() and claiming.exception() is not None:  # etcd away: the loop tries again
            log.warning("fleet: the claim of wanted brain %s failed: %s", brain, claiming.exception())

    async def refresh_shared(self) -> None:
        """:meth:`refresh`, once for every request waiting out a hand-over: one that began meanwhile is waited
        for, and one that ended less than :data:`HANDOVER_POLL` ago is enough."""
        if self._refreshing is None:
            if time.monotonic() - self._refreshed_at < HANDOVER_POLL:
                return
            self._refreshing = asyncio.ensure_future(self.refresh())
            self._refreshing.add_done_callback(self._refreshed)
        await asyncio.shield(self._refreshing)

    def _refreshed(self, done: asyncio.Future[None]) -> None:
        self._refreshing = None
        if not done.cancelled() and done.exception() is None:
            self._refreshed_at = time.monotonic()

    def _reachable(self, brain: str, owner: L.Owner) -> bool:
        """Whether ``owner`` serves ``brain`` now: a live node of the view, or this node at the epoch it holds
        (an owner key naming this node at another epoch is an earlier run's, before a restart: its lease ends)."""
        if owner.node == self.node:
            return self.owned.get(brain) == owner.epoch
        return self.url_of(owner.node) is not None

    def url_of(self, node: str) -> str | None:
        found = self.nodes.get(node)
        return found.url if found is not None else None

    def live(self, node: str) -> bool:
        return node == self.node or node in self.nodes

    async def place(self) -> L.Node:
        """The node a new brain goes to (docs/fleet.md "Placement"), from a view read now."""
        await self.refresh()
        counts = Counter(owner.node for owner in self.owners.values())
        chosen = place(self.nodes.values(), counts)
        return chosen if chosen is not None else L.Node(self.node, self.url, self.free_bytes(), self.joined_at)

    def health(self) -> dict[str, Any]:
        """The ``fleet`` block of ``/v1/health``."""
        counts = Counter(owner.node for owner in self.owners.values())
        for brain in self.owned:
            if self.owners.get(brain, L.Owner("", 0)).node != self.node:
                counts[self.node] += 1  # claimed since the view was read
        return {
            "node": self.node,
            "brains": dict(sorted(self.owned.items())),
            "nodes": [
                {"node": n.node, "url": n.url, "brains": counts.get(n.node, 0)}
                for n in sorted(self.nodes.values(), key=lambda n: n.node)
            ],
        }


async def _cancel(task: asyncio.Future[None] | None) -> None:
    """Cancel ``task`` (if any) and wait for it to end."""
    if task is not None:
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            pass
