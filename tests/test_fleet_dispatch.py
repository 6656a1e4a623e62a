"""In a fleet the dispatcher never serves a brain another node owns (docs/fleet.md): the one road every
transport takes (gRPC, WebSocket and MCP calls through ``run``, the held change stream through ``hold``)
refuses ``BrainMovedError {brain, node, epoch}`` naming the owner, before the door runs; a brain this node
owns, or one the fleet has not placed, is served as without a fleet."""

import asyncio

import pytest
from helpers import new_store

from brainy.auth.principal import Principal
from brainy.contract import refusals as R
from brainy.fleet.layout import Owner
from brainy.host import dispatch as X
from brainy.host.pool import Pool

PERSON = Principal.static_key("person:ada")
SERVICE = Principal.static_key("service:ops", service_key=True)


class Placed:
    """A fleet's answers, without etcd: ``owners`` is who serves each placed brain; this node is ``here``."""

    node = "here"

    def __init__(self, owners):
        self.owners = owners
        self.owned = {brain: owner.epoch for brain, owner in owners.items() if owner.node == self.node}
        self.epochs = {brain: owner.epoch for brain, owner in owners.items()}  # every placed brain's
        self.arriving = {}  # claimed here, being restored (docs/fleet.md "Failover")
        self.archived = {}  # archived fleet-wide: brain -> archivedAt (brainy/fleet/archived.py)

    def elsewhere(self, brain):
        owner = self.owners.get(brain)
        return owner if owner is not None and owner.node != self.node else None

    def live(self, node):
        return node in ("here", "there")


@pytest.fixture
def dispatcher(tmp_path):
    pool = Pool({"mine": new_store(tmp_path / "mine"), "theirs": new_store(tmp_path / "theirs")})
    pool.resolve("theirs", for_write=True).add({"type": "person", "id": "a"})
    owners = {"mine": Owner("here", 3), "theirs": Owner("there", 2)}
    yield X.Dispatcher(pool, fleet=Placed(owners))
    pool.close_all()


def call(dispatcher, principal, door, brain, id=None, document=None):
    return asyncio.run(dispatcher.dispatch(principal, door, brain, id, document))


def test_a_brain_owned_elsewhere_is_refused_by_name(dispatcher):
    """A read of a brain another node owns is BrainMovedError naming that node and its epoch, not this node's
    copy of it."""
    outcome = call(dispatcher, PERSON, "get", "theirs", "a")
    assert outcome.refusal is not None and outcome.refusal.name == "BrainMovedError"
    assert outcome.refusal.fields == {"brain": "theirs", "node": "there", "epoch": 2}


def test_a_brain_arriving_here_is_refused_until_it_has_arrived(dispatcher):
    """A brain this node has claimed and is still restoring is served from no copy: BrainMovedError names this
    node at the new epoch (ask again), then, arrived, it is served."""
    dispatcher.fleet.arriving["mine"] = 4
    outcome = call(dispatcher, PERSON, "counts", "mine")
    assert outcome.refusal is not None and outcome.refusal.fields == {"brain": "mine", "node": "here", "epoch": 4}
    del dispatcher.fleet.arriving["mine"]
    assert call(dispatcher, PERSON, "counts", "mine").ok


def test_a_brain_owned_here_or_unplaced_is_served(dispatcher):
    """A brain this node owns is served; so is one the fleet has not placed (it answers as without a fleet)."""
    assert call(dispatcher, PERSON, "counts", "mine").ok
    assert call(dispatcher, PERSON, "get", "nowhere", "a").refusal.name == "NoSuchBrainError"


def test_a_placed_brain_no_live_node_serves_is_not_served_from_the_copy_here(dispatcher):
    """A brain the fleet has placed whose owner is not known to be live (its lease ending: an earlier run of this
    very node, restarted) is refused BrainMovedError, never answered from this node's copy, which may be stale."""
    fleet = dispatcher.fleet
    del fleet.owners["mine"], fleet.owned["mine"]
    fleet.epochs["mine"] = 4
    outcome = call(dispatcher, PERSON, "counts", "mine")
    assert outcome.refusal is not None and outcome.refusal.fields == {"brain": "mine", "node": "", "epoch": 4}
    fleet.owned["mine"] = 5  # claimed again
    assert call(dispatcher, PERSON, "counts", "mine").ok


def test_the_held_change_stream_is_refused_too(dispatcher):
    """The changes door held open (SSE) meets the same refusal before its first catch-up read."""
    with pytest.raises(R.BrainMovedError):
        dispatcher.hold(PERSON, "changes", "theirs", {})


def test_the_gate_comes_first(dispatcher):
    """The gate's refusal comes before the fleet's: a key that does not reach the brain learns nothing of where
    it is."""
    outsider = Principal.static_key("person:eve", brains=frozenset({"mine"}))
    assert call(dispatcher, outsider, "get", "theirs", "a").refusal.name == "ForbiddenError"


def test_host_move_without_a_fleet_is_refused_by_name(dispatcher):
    """host.move on a server whose host has no fleet (started without --fleet) is FleetNotConfiguredError, whatever
    it names; its hand-over itself is tests/test_fleet_move.py's, with real nodes."""
    assert call(dispatcher, SERVICE, "host.move", "mine", document={"node": "zz"}).refusal.name == (
        "FleetNotConfiguredError"
    )


def test_a_brain_archived_fleet_wide_with_no_live_owner_is_refused_archived(dispatcher):
    """A brain archived fleet-wide whose owner is gone is claimed by no node: every node answers it archived (with
    the register's archivedAt), never as a brain it has not heard of nor as one moved; with a live owner the
    owner answers, so this node refuses it moved as before."""
    fleet = dispatcher.fleet
    fleet.archived["gone"] = 1_234
    outcome = call(dispatcher, PERSON, "counts", "gone")
    assert outcome.refusal is not None and outcome.refusal.name == "BrainArchivedError", outcome
    assert outcome.refusal.fields == {"brain": "gone", "archivedAt": 1_234}
    fleet.archived["theirs"] = 1_234
    outcome = call(dispatcher, PERSON, "counts", "theirs")
    assert outcome.refusal is not None and outcome.refusal.name == "BrainMovedError", outcome
