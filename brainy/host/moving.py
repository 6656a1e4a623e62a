"""``host.move {node}``: a brain handed to another node of the fleet, nothing lost (docs/fleet.md "Planned move").

The door may reach any node (the HTTP edge forwards it to the owner; another transport lands wherever it was sent),
and does one of three things there:

- on the **owner**: it stores a snapshot and asks the named node to stage it (writes still flow), then holds the
  brain's new writes (they wait in the dispatcher), ships the tail up to the last commit ``g``, writes the
  hand-over into the owner key (brainy/fleet/move.py), and asks the named node to claim. Once it has, the held
  writes are refused ``BrainMovedError`` naming the new owner (a proxying node sends them on there), and the brain
  is closed here. Should the claim not happen, the owner key is put back and the held writes go on;
- on the **named node**, asked by the owner (``X-Brainy-Caller: node:<owner>``) with no hand-over under way: it
  stages the brain (the newest snapshot and the shipped log after it, written beside its brains, not served);
  asked once the owner key says it is handing the brain here: it claims the brain at the next epoch, only while the
  key still holds the hand-over (one compare-and-put), finishes the staged copy with the frames shipped since,
  renames it into place, and answers once it serves it;
- on **any other node**: it sends the door on to the owner.

Node to node, the door travels as HTTP with this node's service key (the keys file's ``!`` line; a fleet's nodes
share their keys file, docs/fleet.md) and the fleet's forwarded mark, so no edge forwards it again.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import orjson

from brainy.auth.keys import CALLER_HEADER
from brainy.contract import refusals as R
from brainy.fleet import move
from brainy.fleet.etcd import EtcdUnavailableError
from brainy.fleet.http1 import PeerUnreachableError
from brainy.fleet.layout import Owner
from brainy.fleet.membership import ADOPTED, Fleet
from brainy.fleet.proxy import FORWARD_SECONDS, Forwarder

log = logging.getLogger("brainy.move")

# the named node claims, restores and opens the brain within this, or the hand-over is taken back: the writes are
# held meanwhile, and a move that cannot keep them under a second or so is better not made
CLAIM_SECONDS = 5.0
TAKE_BACK_TRIES = 4  # a hand-over that did not happen is put back within about 5 s of etcd answering again
#: The caller an owner asserts when it asks the named node to claim (``X-Brainy-Caller: node:<owner>``).
CALLER_KIND = "node:"


def answer(brain: str, source: str, node: str, epoch: int, generation: int) -> dict[str, Any]:
    return {"brain": brain, "from": source, "node": node, "epoch": epoch, "generation": generation}


async def run(c: Any) -> dict[str, Any]:
    """The door: ``c`` is the host door's call (brainy/host/host_doors.py)."""
    fleet: Fleet | None = c.host.fleet if c.host is not None else None
    if fleet is None:
        raise R.FleetNotConfiguredError("host.move hands a brain to another node of --fleet; this server has none")
    brain, to = c.brain, c.document["node"]
    if not fleet.live(to):
        await fleet.refresh()
        if not fleet.live(to):
            raise R.NodeUnknownError(f"no live node of the fleet is named {to!r}", node=to)
    owner = await fleet.lookup(brain)
    if owner is None:
        raise R.NoSuchBrainError(f"the fleet has placed no brain named {brain!r}", brain=brain)
    if owner.node == fleet.node and brain in fleet.owned:
        if to == fleet.node:
            return answer(brain, fleet.node, fleet.node, owner.epoch, _shipped(c, brain))
        return await _hand_over(c, fleet, brain, owner.epoch, to)
    handing = await move.pending(fleet, brain)
    if handing is not None and handing.to == fleet.node and handing.node == owner.node:
        return await _claim(c, fleet, brain, handing)
    if c.principal.caller == CALLER_KIND + owner.node and to == fleet.node:
        # the owner, before its hold, or a request of its to claim that arrives after it took the hand-over back
        # (it waited no longer): staged here, never sent back to it as a new move
        return await _prepare(c, fleet, brain, owner)
    return await ask(c, fleet, owner.node, brain, "move", {"node": to})


def _shipped(c: Any, brain: str) -> int:
    shipping = c.host.shipping
    if shipping is None:
        return c.brains.resolve(brain, False).head
    return shipping.health().get(brain, {}).get("shipped", 0)


async def _hand_over(c: Any, fleet: Fleet, brain: str, epoch: int, to: str) -> dict[str, Any]:
    shipping = c.host.shipping
    if shipping is None:  # nothing off the machine to restore from: the named node could not serve it
        raise R.FleetNotConfiguredError("host.move ships the brain through the object store: start with --object-store")
    if brain in fleet.handing:  # one hand-over at a time: a second would hold and ship what the first hands over
        raise R.BrainMovedError(
            f"brain {brain!r} is being handed over by node {fleet.node!r}; ask again",
            brain=brain,
            node=fleet.node,
            epoch=epoch,
        )
    loop = asyncio.get_running_loop()
    fleet.handing[brain] = None  # a move under way; writes flow while the named node stages the brain
    ended = asyncio.Event()
    try:
        await loop.run_in_executor(None, shipping.snapshot, brain, epoch)
        # staged there (within --move-stage-seconds), or refused
        await ask(c, fleet, to, brain, "move", {"node": to}, fleet.stage_seconds, claim=True)
        fleet.handing[brain] = ended  # new writes wait in the dispatcher from here on
        return await _handing(c, fleet, shipping, brain, epoch, to, loop)
    finally:
        del fleet.handing[brain]
        ended.set()


async def _handing(
    c: Any, fleet: Fleet, shipping: Any, brain: str, epoch: int, to: str, loop: asyncio.AbstractEventLoop
) -> dict[str, Any]:
    generation, held = await loop.run_in_executor(None, shipping.hold, brain, epoch)
    try:
        handing = await move.hand(fleet, brain, epoch, to, generation)
    except BaseException:
        shipping.resume(brain)
        raise
    if handing is None:  # the owner key is not this node's at this epoch any more: nothing to hand over
        shipping.resume(brain)
        now = await fleet.lookup(brain)
        raise R.BrainMovedError(
            f"brain {brain!r} is no longer node {fleet.node!r}'s at epoch {epoch}",
            brain=brain,
            node=now.node if now is not None else "",
            epoch=now.epoch if now is not None else epoch,
        )
    try:
        got = await ask(c, fleet, to, brain, "move", {"node": to}, CLAIM_SECONDS, claim=True)
        new = Owner(to, int(got["epoch"]))
    except (R.Refusal, OSError, ValueError, KeyError) as exc:
        now = await _take_back(c, fleet, brain, handing)
        if now is None:  # put back: this node serves on
            shipping.resume(brain)
            log.warning(
                "brain %s was not handed to %s (writes held %.3f s): %s", brain, to, time.monotonic() - held, exc
            )
            raise
        if now.node != to:  # the lease ended meanwhile: the brain is failing over, not this node's to serve
            _gone(c, fleet, brain, now)
            raise
        new = now  # the claim happened and its answer was lost on the way back
    _gone(c, fleet, brain, new)
    window = time.monotonic() - held
    await c.brains.retire(brain)
    log.info(
        "brain %s handed to %s at epoch %d, generation %d: writes held %.3f s", brain, to, new.epoch, generation, window
    )
    return answer(brain, fleet.node, to, new.epoch, generation)


async def _take_back(c: Any, fleet: Fleet, brain: str, handing: move.Handing) -> Owner | None:
    """:func:`move.take_back`, tried again while etcd does not answer (bounded); still unanswered, the brain is let
    go here (its writes refused) rather than served without knowing whether the named node claimed it."""
    for turn in range(TAKE_BACK_TRIES):
        try:
            return await move.take_back(fleet, brain, handing)
        except EtcdUnavailableError as exc:
            log.warning("brain %s: the hand-over could not be taken back yet: %s", brain, exc)
            await asyncio.sleep(0.5 * (turn + 1))
    log.error("brain %s: etcd did not answer; let go here, its owner key ends with this node's lease", brain)
    return Owner("", handing.epoch)


def _gone(c: Any, fleet: Fleet, brain: str, new: Owner) -> None:
    """``brain`` is ``new``'s (``new.node`` empty: no node's yet): the view says so, and the commits held here are
    refused naming it."""
    fleet.owned.pop(brain, None)
    if new.node:
        fleet.owners[brain] = new
    else:
        fleet.owners.pop(brain, None)
    c.host.shipping.handed(
        brain,
        R.BrainMovedError(
            f"brain {brain!r} was moved to node {new.node!r} (epoch {new.epoch})",
            brain=brain,
            node=new.node,
            epoch=new.epoch,
        ),
    )


async def _prepare(c: Any, fleet: Fleet, brain: str, owner: Owner) -> dict[str, Any]:
    """The named node's part before the hold: stage the brain for the epoch it will claim it at."""
    if c.host.shipping is None:
        raise R.FleetNotConfiguredError(f"node {fleet.node!r} has no --object-store: it cannot restore a brain")
    staged = await c.host.shipping.prepare(brain, owner.epoch + 1)
    return answer(brain, owner.node, fleet.node, owner.epoch, staged)


async def _claim(c: Any, fleet: Fleet, brain: str, handing: move.Handing) -> dict[str, Any]:
    """The named node's part: claim at the next epoch while the hand-over stands, restore, serve."""
    if c.host.shipping is None:  # claimed without a restore, it would serve whatever copy it has
        raise R.FleetNotConfiguredError(
            f"node {fleet.node!r} has no --object-store: it cannot restore a brain handed to it"
        )
    claimed, holder, epoch = await fleet.claim(brain, handing.epoch, ADOPTED, owner_was=handing.value())
    if not claimed:
        raise R.BrainMovedError(
            f"brain {brain!r} was not claimed by node {fleet.node!r}",
            brain=brain,
            node=holder.node if holder is not None else "",
            epoch=holder.epoch if holder is not None else epoch,
        )
    return answer(brain, handing.node, fleet.node, epoch, handing.generation)


async def ask(
    c: Any,
    fleet: Fleet,
    node: str,
    brain: str,
    door: str,
    body: dict[str, Any],
    timeout: float = FORWARD_SECONDS,
    claim: bool = False,
) -> dict[str, Any]:
    """``POST /v1/brains/{brain}/{door}`` as ``node`` answers it, with this node's service key: its answer, or its
    refusal raised here (the host doors a node sends on to a brain's owner: move, archive, unarchive)."""
    url = fleet.url_of(node)
    if url is None:
        await fleet.refresh()
        url = fleet.url_of(node)
    if url is None:
        raise R.NodeUnknownError(f"no live node of the fleet is named {node!r}", node=node)
    key = c.host.keys.service_key()
    if key is None:
        raise R.FleetNotConfiguredError(f"host.{door} travels between nodes with the keys file's service key (!)")
    headers = {"authorization": f"Bearer {key}", "content-type": "application/json", "accept": "application/json"}
    if claim:  # the owner asking the named node to claim: said as the caller the service key asserts
        headers[CALLER_HEADER] = CALLER_KIND + fleet.node
    forwarder = Forwarder(fleet.node, timeout)
    try:
        got = await forwarder.forward(url, "POST", f"/v1/brains/{brain}/{door}", headers, orjson.dumps(body))
    except PeerUnreachableError as exc:
        raise R.InternalError(f"node {node!r} did not answer host.{door}: {exc}", ref="fleet-move") from None
    finally:
        forwarder.close()
    doc = orjson.loads(got.body)
    if got.status == 200:
        return {k: v for k, v in doc.items() if k != "_meta"}
    error = doc.get("error", {}) if isinstance(doc, dict) else {}
    try:
        cls = R.by_name(str(error.get("name")))
        fields = {k: v for k, v in error.items() if k not in ("name", "message")}
        refusal = cls(str(error.get("message", "")), **fields)
    except (KeyError, TypeError):
        refusal = R.InternalError(f"node {node!r} answered host.{door} {got.status}", ref="fleet-move")
    raise refusal
