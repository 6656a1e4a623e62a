"""A planned move's hand-over in etcd (``host.move``, docs/fleet.md "Planned move").

A brain's owner key goes through three values, each written by one transaction that compares the one before::

    {"node": "A", "epoch": e}                            A serves the brain and takes writes
    {"node": "A", "epoch": e, "to": "B", "generation": g} A stopped taking writes and shipped every commit up to g
    {"node": "B", "epoch": e + 1}                        B claimed it (``Fleet.claim`` with ``owner_was``)

The middle value is A's word that nothing past ``g`` will be acknowledged at epoch ``e``: B claims only while the
key still holds exactly it, so a claim can never overtake writes A still takes. Every reader of the key sees A as
the owner until B has claimed (``layout.read_owner`` reads the node and the epoch, nothing more), and the key stays
under A's lease meanwhile: an A that dies mid-move lets the brain fail over as always. Should B not claim, A puts
the first value back (:func:`take_back`, again a compare) and takes writes again.
"""

from __future__ import annotations

from dataclasses import dataclass

import orjson

from brainy.fleet import etcd as E
from brainy.fleet import layout as L
from brainy.fleet.membership import Fleet


@dataclass(frozen=True, slots=True)
class Handing:
    """An owner key's middle value: ``node`` at ``epoch`` hands the brain to ``to``, shipped up to ``generation``."""

    node: str
    epoch: int
    to: str
    generation: int

    def value(self) -> bytes:
        return orjson.dumps({"node": self.node, "epoch": self.epoch, "to": self.to, "generation": self.generation})


def read_handing(value: bytes) -> Handing | None:
    """The hand-over an owner key's value says is under way, or None (a plain owner, or not brainy's)."""
    try:
        doc = orjson.loads(value)
        if not isinstance(doc, dict) or "to" not in doc:
            return None
        return Handing(str(doc["node"]), int(doc["epoch"]), str(doc["to"]), int(doc["generation"]))
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
        return None


async def hand(fleet: Fleet, brain: str, epoch: int, to: str, generation: int) -> Handing | None:
    """Write the middle value, if ``fleet``'s node still owns ``brain`` at ``epoch``: the hand-over, or None when
    it does not (the compare failed: another node claimed it meanwhile)."""
    handing = Handing(fleet.node, epoch, to, generation)
    okey, ekey = L.owner_key(brain), L.epoch_key(brain)
    compare = [E.value_is(okey, L.owner_value(L.Owner(fleet.node, epoch))), E.value_is(ekey, L.epoch_value(epoch))]
    done, _ = await fleet.etcd.txn(compare, [E.put_op(okey, handing.value(), fleet.lease)])
    return handing if done else None


async def pending(fleet: Fleet, brain: str) -> Handing | None:
    """The hand-over of ``brain`` under way now, read from etcd (None: none)."""
    found = await fleet.etcd.get(L.owner_key(brain))
    return read_handing(found.value) if found is not None else None


async def take_back(fleet: Fleet, brain: str, handing: Handing) -> L.Owner | None:
    """Put the first value back, if the key still holds ``handing`` (its claim did not happen): None then; else the
    owner the key names now (the claim did happen, or the lease ended and another node took the brain)."""
    okey = L.owner_key(brain)
    mine = L.owner_value(L.Owner(handing.node, handing.epoch))
    back, read = await fleet.etcd.txn(
        [E.value_is(okey, handing.value())], [E.put_op(okey, mine, fleet.lease)], [E.range_op(okey)]
    )
    if back:
        return None
    return L.read_owner(read[0][0].value) if read and read[0] else L.Owner("", 0)
