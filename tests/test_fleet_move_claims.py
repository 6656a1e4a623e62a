"""A planned move's hand-over and the fleet's archive register in etcd (``brainy/fleet/move.py``,
``brainy/fleet/archived.py``, docs/fleet.md "Planned move", "Archived brains in a fleet") against a real etcd, with
:class:`Fleet` objects in this process: the named node claims only while the owner key holds the hand-over; a
hand-over taken back cannot be claimed; an archived brain is claimed by no one until it is unarchived."""

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pytest

from brainy.fleet import archived as A
from brainy.fleet import layout as L
from brainy.fleet import move
from brainy.fleet.etcd import Etcd
from brainy.fleet.membership import Fleet

pytestmark = pytest.mark.slow


def run(coro, seconds: float = 30):
    return asyncio.run(asyncio.wait_for(coro, seconds))


def fleet(etcd_url: str, node: str) -> Fleet:
    return Fleet(Etcd([etcd_url]), node, f"http://127.0.0.1:1/{node}", 2)


@contextlib.asynccontextmanager
async def pair(etcd_url: str) -> AsyncIterator[tuple[Fleet, Fleet]]:
    """Nodes a and b, joined; both have left on the way out (leaving twice is leaving once)."""
    a, b = fleet(etcd_url, "a"), fleet(etcd_url, "b")
    await a.join()
    await b.join()
    try:
        yield a, b
    finally:
        await a.leave()
        await b.leave()


def test_the_named_node_claims_only_while_the_hand_over_stands(etcd):
    """a owns the brain at epoch 1. b cannot claim it with a hand-over a never wrote; a writes the hand-over, and
    b's claim of it lands at epoch 2 under b's lease; a's take-back then finds b the owner, and a hand-over from a at
    epoch 1 can no longer be written."""

    async def go():
        async with pair(etcd.url) as (a, b):
            assert (await a.claim("notes", 0))[0]
            forged = move.Handing("a", 1, "b", 7)
            assert (await b.claim("notes", 1, owner_was=forged.value()))[0] is False
            assert await move.pending(b, "notes") is None
            handing = await move.hand(a, "notes", 1, "b", 7)
            assert handing == forged and await move.pending(b, "notes") == handing
            assert (await b.lookup("notes")) == L.Owner("a", 1)  # a reader still sees the owner it was
            claimed, holder, epoch = await b.claim("notes", 1, owner_was=handing.value())
            assert (claimed, holder, epoch) == (True, L.Owner("b", 2), 2) and b.owned == {"notes": 2}
            assert await move.take_back(a, "notes", handing) == L.Owner("b", 2)
            assert await move.hand(a, "notes", 1, "c", 8) is None

    run(go())


def test_a_hand_over_taken_back_cannot_be_claimed(etcd):
    """a writes the hand-over and takes it back (the named node did not answer): the owner key is a's at epoch 1
    again, and the named node's claim, arriving late, is refused."""

    async def go():
        async with pair(etcd.url) as (a, b):
            assert (await a.claim("notes", 0))[0]
            handing = await move.hand(a, "notes", 1, "b", 3)
            assert handing is not None
            assert await move.take_back(a, "notes", handing) is None
            assert (await b.lookup("notes")) == L.Owner("a", 1) and await move.pending(b, "notes") is None
            claimed, holder, epoch = await b.claim("notes", 1, owner_was=handing.value())
            assert (claimed, holder, epoch) == (False, L.Owner("a", 1), 1) and b.owned == {}

    run(go())


def test_an_archived_brain_is_claimed_by_no_one_until_unarchived(etcd):
    """A brain archived fleet-wide whose owner's lease ended is claimed by no node, however it tries (the claim
    compares the register key absent, and a node's view skips it); unarchived, the next claim lands at the next
    epoch. Archiving again keeps the first archivedAt."""

    async def go():
        async with pair(etcd.url) as (a, b):
            assert (await a.claim("notes", 0))[0]
            at = await A.mark(a.etcd, "notes", "a", 1234)
            assert at == 1234 and await A.mark(a.etcd, "notes", "a", 9999) == 1234
            await a.leave()
            await b.refresh()
            assert "notes" in b.archived and "notes" not in b.owners
            assert (await b.claim("notes", 1))[0] is False
            await b.take_over()
            assert b.owned == {}
            await A.unmark(b.etcd, "notes")
            await b.refresh()
            assert b.archived == {}
            assert await b.adopt("notes") == L.Owner("b", 2)

    run(go())
