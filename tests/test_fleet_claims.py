"""The fleet's membership and claims (``brainy/fleet/membership.py``, docs/fleet.md "The claim transaction")
against a real etcd, with :class:`Fleet` objects in this process: a claim is one transaction on the epoch, a
stale epoch is refused, the epoch outlives its owner, a name a live node holds is refused, and placement
weighs brains, then memory."""

import asyncio
import time

import pytest

from brainy.contract import refusals as R
from brainy.fleet import archived as A
from brainy.fleet import layout as L
from brainy.fleet.etcd import Etcd
from brainy.fleet.membership import Fleet, FleetJoinError
from brainy.fleet.placement import place


def run(coro, seconds: float = 30):
    return asyncio.run(asyncio.wait_for(coro, seconds))


def fleet(etcd_url: str, node: str, ttl: int = 2, **options) -> Fleet:
    return Fleet(Etcd([etcd_url]), node, f"http://127.0.0.1:1/{node}", ttl, **options)


def test_placement_is_fewest_brains_then_most_memory_then_name():
    """The new brain goes to the node with the fewest brains; among equals the most free memory; then the name."""
    nodes = [L.Node("a", "u", 100), L.Node("b", "u", 500), L.Node("c", "u", 500)]
    assert place(nodes, {"a": 0, "b": 1, "c": 1}).node == "a"
    assert place(nodes, {"a": 1, "b": 1, "c": 1}).node == "b"
    assert place(nodes, {"a": 1, "b": 2, "c": 1}).node == "c"
    assert place([], {}) is None


def test_a_fleet_ttl_below_two_seconds_is_refused():
    """``--fleet-ttl`` below 2 refuses: a renewal every third of it could not come back in time."""
    with pytest.raises(FleetJoinError):
        Fleet(Etcd(["http://127.0.0.1:1"]), "a", "http://127.0.0.1:2", ttl=1)


@pytest.mark.slow
def test_a_claim_at_a_stale_epoch_is_refused(etcd):
    """Two nodes claim one brain at epoch 0: one wins at epoch 1, the other is refused and told the holder.
    Once the winner's lease ends, its owner key goes but the epoch stays: a claim at the stale epoch 0 is
    refused, and one at 1 succeeds at epoch 2."""

    async def go():
        a, b = fleet(etcd.url, "a"), fleet(etcd.url, "b")
        await a.join()
        await b.join()
        try:
            first, second = await asyncio.gather(a.claim("notes", 0), b.claim("notes", 0))
            (winner, loser), (won, lost) = ((a, b), (first, second)) if first[0] else ((b, a), (second, first))
            assert won == (True, L.Owner(winner.node, 1), 1)
            assert lost == (False, L.Owner(winner.node, 1), 1)
            assert winner.owned == {"notes": 1} and loser.owned == {}
            await winner.leave()
            check = Etcd([etcd.url])
            try:
                assert await check.get(L.owner_key("notes")) is None  # gone with the lease
                assert (await check.get(L.epoch_key("notes"))).value == b"1"  # the epoch outlives its owner
            finally:
                check.close()
            assert await loser.claim("notes", 0) == (False, None, 1)
            assert await loser.claim("notes", 1) == (True, L.Owner(loser.node, 2), 2)
            with pytest.raises(R.BrainExistsError):
                await loser.claim_new("notes")  # a name the fleet placed once is taken for good
        finally:
            await a.leave()
            await b.leave()

    run(go())


@pytest.mark.slow
def test_a_name_a_live_node_holds_is_refused(etcd):
    """A second node joining under a live node's name waits one TTL for it to go, then is refused."""

    async def go():
        first = fleet(etcd.url, "same")
        await first.join()
        try:
            with pytest.raises(FleetJoinError, match="already has that name"):
                await fleet(etcd.url, "same").join()
        finally:
            await first.leave()

    run(go())


@pytest.mark.slow
def test_local_brains_are_claimed_and_the_view_counts_them(etcd):
    """At join a node claims each brain it has a copy of that no live node owns; a second node with a copy of
    the same brain does not claim it, and its view names the owner; the health block counts each node's."""

    async def go():
        a = fleet(etcd.url, "a", local=lambda: ["x", "y"])
        b = fleet(etcd.url, "b", local=lambda: ["y", "z"])
        await a.join()
        await b.join()
        try:
            assert a.owned == {"x": 1, "y": 1} and b.owned == {"z": 1}
            assert b.elsewhere("y") == L.Owner("a", 1) and b.elsewhere("z") is None
            await a.refresh()
            block = a.health()
            assert block["node"] == "a" and block["brains"] == {"x": 1, "y": 1}
            assert [(n["node"], n["brains"]) for n in block["nodes"]] == [("a", 2), ("b", 1)]
            assert (await b.place()).node == "b"
        finally:
            await a.leave()
            await b.leave()

    run(go())


@pytest.mark.slow
def test_a_lost_lease_is_replaced_and_the_brains_claimed_back(etcd):
    """A node whose lease was ended under it (as etcd does after a pause longer than the TTL) joins again on its
    next renewal and claims back its brains at the next epoch."""

    async def go():
        a = fleet(etcd.url, "a", local=lambda: ["x"])
        await a.join()
        try:
            old = a.lease
            await a.etcd.revoke(old)
            await a.renew()
            assert a.lease != old and a.owned == {"x": 2}
            assert a.owner("x") == L.Owner("a", 2)
        finally:
            await a.leave()

    run(go())


@pytest.mark.slow
def test_a_node_joined_without_claims_claims_once_started_and_renews_through_slow_arrivals(etcd):
    """``join(claim=False)`` (a server, before it listens) registers and claims nothing; :meth:`Fleet.start`
    claims. Arrivals that take longer than the TTL in all (a restore a brain) run side by side, and the lease,
    renewed from its grant, outlives them."""
    arrived: list[str] = []
    running = 0
    most = 0

    async def arrive(brain: str, epoch: int, how: str) -> None:
        nonlocal running, most
        running += 1
        most = max(most, running)
        await asyncio.sleep(1.5)  # the restore: with a TTL of 2 s, eight in a row would outlast the lease
        running -= 1
        arrived.append(brain)

    async def go():
        brains = [f"x{n}" for n in range(12)]
        a = fleet(etcd.url, "a", local=lambda: brains)
        a.arrive = arrive
        await a.join(claim=False)
        try:
            assert a.owned == {} and a._task is None
            a.start()
            deadline = asyncio.get_running_loop().time() + 20
            while len(a.owned) < len(brains):
                assert asyncio.get_running_loop().time() < deadline, a.owned
                await asyncio.sleep(0.1)
            assert sorted(arrived) == sorted(brains) and 1 < most <= 8
            lease = a.lease
            await a.renew()
            assert a.lease == lease  # never lapsed: the claims are this lease's
            assert a.owned == {b: 1 for b in brains}
        finally:
            await a.leave()

    run(go())


@pytest.mark.slow
def test_a_brain_a_request_waits_for_is_claimed_at_once_by_the_node_it_waits_at(etcd):
    """A dead owner's brain a request waits for (:meth:`Fleet.serving`) is claimed by the node the request waits
    at, at once, not when that node's loop next comes to it (here: not for an hour), and the request answers the
    new owner; a node that does not take over (no object store) claims nothing, and its request waits out the
    deadline and is refused BrainMovedError."""
    arrived: list[tuple[str, str, int]] = []

    def arriving_at(node: str):
        async def arrive(brain: str, epoch: int, how: str) -> None:
            await asyncio.sleep(0.2)  # the restore
            arrived.append((node, brain, epoch))

        return arrive

    async def go():
        a = fleet(etcd.url, "a", local=lambda: ["notes"])
        b = fleet(etcd.url, "b", refresh=3600.0)
        c = fleet(etcd.url, "c", refresh=3600.0)
        b.arrive, b.takes_over = arriving_at("b"), True
        turned, take_over = asyncio.Event(), b.take_over

        async def first_turn() -> None:
            await take_over()
            turned.set()

        b.take_over = first_turn  # type: ignore[method-assign]
        c.arrive = arriving_at("c")
        await a.join()
        await b.join()  # its loop's first turn: "notes" is a's
        await c.join()
        try:
            assert a.owned == {"notes": 1} and b.elsewhere("notes") == L.Owner("a", 1)
            await turned.wait()  # b's loop has had its first turn (a owned "notes"): its next is in an hour
            await a.leave()  # a dies: its owner key goes with its lease, the epoch stays
            with pytest.raises(R.BrainMovedError):
                await c.serving("notes", time.monotonic() + 1.0, fresh=True)
            assert arrived == [] and c.owned == {}
            began = time.monotonic()
            owner = await b.serving("notes", began + 10.0, fresh=True)
            assert owner == L.Owner("b", 2) and b.owned == {"notes": 2}
            assert time.monotonic() - began < 3.0, "claimed when the loop came to it, not at once"
            assert arrived == [("b", "notes", 2)]
            assert b._claiming == {} and b.wanted == {}
        finally:
            await b.leave()
            await c.leave()

    run(go())


@pytest.mark.slow
def test_an_archived_brain_is_claimed_only_by_the_claim_that_unarchives_it(etcd):
    """A brain archived fleet-wide with no owner: a claim (a failover's) is refused; the claim ``host.unarchive``
    makes wins and deletes the archived key in its one transaction, so no other claim could come between."""

    async def go():
        a, b = fleet(etcd.url, "a"), fleet(etcd.url, "b")
        await a.join()
        await b.join()
        check = Etcd([etcd.url])
        try:
            assert (await a.claim("shelf", 0))[0]
            await A.mark(check, "shelf", "a")
            await a.leave()  # its owner gone: the brain archived, at epoch 1, unowned
            assert await check.get(L.owner_key("shelf")) is None
            assert await b.claim("shelf", 1) == (False, None, 1)  # archived: no failover takes it
            assert await b.adopt("shelf", unarchive=True) == L.Owner("b", 2)
            assert b.owned == {"shelf": 2}
            assert await check.get(A.archived_key("shelf")) is None
        finally:
            await b.leave()
            check.close()

    run(go())
