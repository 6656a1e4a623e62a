"""The host provisioning doors (DOORS.md 10.3): everything a sign-up or an offboarding does, over the wire.

Seed 001, "Provisioning — the service key's own doors". Each wants the service key (the gate asks:
they are ``access: service``) and takes effect without a restart. Three laws:

1. Nothing is ever deleted. ``host.archive`` closes the brain and writes a marker beside the stores
   (``brainy.host.archive``); the store is untouched, and ``host.unarchive`` serves the same rows again.
2. The marker lives outside the store.
3. A key is shown exactly once: ``host.mintKey`` answers it, and no door reads one back; listings carry
   fingerprints (SHA-256), which are also what a key is revoked under.

Each door is a HOST function ``fn(call)`` (``brainy.doors.registry``). They never enter the pool's
door count (an archived brain is theirs to reach, and ``host.provision`` names a brain that is not
there yet); what the process holds for them is the :class:`Host` on the call.
"""

from __future__ import annotations

import re
import time
from collections.abc import Awaitable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from brainy.auth.keys import EVERY_BRAIN, SERVICE_REACH, KeyTable, fingerprint
from brainy.auth.tokens import STATIC_KEY_EXP, add_revocation
from brainy.contract import refusals as R
from brainy.doors.registry import HOST, door
from brainy.engine import Brain, init_store
from brainy.fleet import archived as fleet_archived
from brainy.fleet import layout as L
from brainy.fleet.membership import Fleet
from brainy.host import archive, moving
from brainy.host.backups import Backups
from brainy.host.shipped import Shipping

SHA256_HEX = re.compile(r"[0-9a-f]{64}")
MINTABLE_KINDS = ("person:", "business:", "service:")


@dataclass
class Host:
    """What the host doors act on: the brains directory (from the pool), the keys file, the backups."""

    keys: KeyTable
    backups: Backups = field(default_factory=lambda: Backups(None, None))
    fleet: Fleet | None = None  # --fleet: this node's membership (docs/fleet.md); None outside a fleet
    shipping: Shipping | None = None  # --object-store: the brains shipped off the node (docs/fleet.md)

    @property
    def revoked_path(self) -> Path:
        """Where revocations are written: the revoked list the keys table reads (seed 001: by default
        ``revoked.json`` beside the keys file)."""
        placed = self.keys.revoked
        return placed.path if placed is not None else self.keys.path.with_name("revoked.json")


def _brains_dir(c: Any) -> Path:
    found = c.brains.brains_dir
    if found is None:
        raise R.BrainsDirNotConfiguredError(
            f"{c.door.name} needs --brains-dir, and this server was started without one"
        )
    return Path(found)


@door("host.provision", HOST)
def _provision(c: Any) -> dict[str, Any] | Awaitable[dict[str, Any]]:
    """A new empty store at ``<brains-dir>/<brain>``, exactly as ``brainy init`` writes one. In a fleet the
    brain is claimed first (epoch 1; a name the fleet ever placed is BrainExistsError) and the answer names
    this node, where the edge placed it (docs/fleet.md "Placement")."""
    root = _brains_dir(c)
    _check_free(c, root)
    fleet: Fleet | None = c.host.fleet if c.host is not None else None
    if fleet is None:
        return _create(c, root)
    return _provision_claimed(c, root, fleet)


async def _provision_claimed(c: Any, root: Path, fleet: Fleet) -> dict[str, Any]:
    await fleet.claim_new(c.brain)
    answer = _create(c, root)
    shipping: Shipping | None = c.host.shipping
    if shipping is not None:  # opened at once: its epoch's marker and base snapshot are stored before it answers
        await shipping.provisioned(c.brain)
    answer["node"] = fleet.node
    return answer


def _check_free(c: Any, root: Path) -> None:
    try:
        c.brains.path_of(c.brain, archived_ok=True)
        taken = True
    except R.NoSuchBrainError:
        taken = False
    if taken or archive.archived_at(root, c.brain) is not None:
        raise R.BrainExistsError(f"a brain named {c.brain!r} already exists (archived names included)", brain=c.brain)


def _create(c: Any, root: Path) -> dict[str, Any]:
    target = root / c.brain
    try:
        target.mkdir()  # exclusive: two provisions of one name race here, and one of them loses by name
    except FileExistsError:
        raise R.BrainExistsError(f"{c.brain!r} is already taken under the brains directory", brain=c.brain) from None
    identity = init_store(target)
    return {"brain": c.brain, "created": True, "storeId": identity["storeId"], "generation": 0}


@door("host.archive", HOST)
async def _archive(c: Any) -> dict[str, Any]:
    """Mark the brain archived, then close it (its doors in flight finish first). An archived one answers as is.
    In a fleet the owner does it (a node that is not sends the door on to it), and the brain is archived in etcd
    first, so no node claims it should its owner die (docs/fleet.md "Archived brains in a fleet")."""
    root = _brains_dir(c)
    fleet: Fleet | None = c.host.fleet if c.host is not None else None
    at = None
    if fleet is not None:
        owner = await fleet.lookup(c.brain)
        if owner is not None and owner.node != fleet.node:
            return await moving.ask(c, fleet, owner.node, c.brain, "archive", {})
        if owner is None and not _local(c):  # placed, its owner gone: archived in etcd alone
            await _placed(fleet, c.brain)
            return {
                "brain": c.brain,
                "archived": True,
                "archivedAt": await fleet_archived.mark(fleet.etcd, c.brain, ""),
            }
        at = await fleet_archived.mark(fleet.etcd, c.brain, fleet.node)
    c.brains.path_of(c.brain, archived_ok=True)  # NoSuchBrainError for a name that is no brain
    at, wrote = archive.mark(root, c.brain, at)
    if wrote:
        await c.brains.retire(c.brain)
    return {"brain": c.brain, "archived": True, "archivedAt": at}


@door("host.unarchive", HOST)
async def _unarchive(c: Any) -> dict[str, Any]:
    """Serve the brain again. In a fleet the owner does it; an archived brain no live node owns (its owner died
    meanwhile) is claimed by the node that was asked, restored from the object store, and served there."""
    root = _brains_dir(c)
    fleet: Fleet | None = c.host.fleet if c.host is not None else None
    if fleet is None:
        c.brains.path_of(c.brain, archived_ok=True)
        archive.unmark(root, c.brain)
        return {"brain": c.brain, "archived": False}
    owner = await fleet.lookup(c.brain)
    if owner is not None and owner.node != fleet.node:
        return await moving.ask(c, fleet, owner.node, c.brain, "unarchive", {})
    if owner is None and not _local(c):
        await _placed(fleet, c.brain)
    archive.unmark(root, c.brain)
    if owner is None:
        # claimed here now (restored from the object store when it is not the local copy's), unarchived
        # fleet-wide in the claim's own transaction: unarchived first, another node's failover could take it
        fleet.archived.pop(c.brain, None)
        await fleet.adopt(c.brain, unarchive=True)
    else:
        await fleet_archived.unmark(fleet.etcd, c.brain)
        fleet.archived.pop(c.brain, None)
    return {"brain": c.brain, "archived": False}


def _local(c: Any) -> bool:
    """Whether this node has a copy of the brain (archived or not)."""
    try:
        c.brains.path_of(c.brain, archived_ok=True)
    except R.NoSuchBrainError:
        return False
    return True


async def _placed(fleet: Fleet, brain: str) -> None:
    """NoSuchBrainError unless the fleet has placed ``brain`` (it has an epoch)."""
    if await fleet.etcd.get(L.epoch_key(brain)) is None:
        raise R.NoSuchBrainError(f"the fleet has placed no brain named {brain!r}", brain=brain)


@door("host.mintKey", HOST)
def _mint_key(c: Any) -> dict[str, Any]:
    principal, brains = c.document["principal"], c.document["brains"]
    if not principal.startswith(MINTABLE_KINDS):
        raise R.InvalidArgumentError(
            "principal: must be person:…, business:… or service:…", field="principal", reason="out-of-range"
        )
    if brains == SERVICE_REACH or (isinstance(brains, list) and SERVICE_REACH in brains):
        raise R.InvalidArgumentError(
            "brains: the service key (!) is never minted over the wire", field="brains", reason="out-of-range"
        )
    if isinstance(brains, str) and brains != EVERY_BRAIN:
        raise R.InvalidArgumentError('brains: a list of brain names, or "*"', field="brains", reason="wrong-type")
    if isinstance(brains, list) and not brains:
        raise R.InvalidArgumentError("brains: name at least one brain", field="brains", reason="out-of-range")
    key = c.host.keys.mint(principal, brains)
    return {"key": key, "sha256": fingerprint(key), "principal": principal, "brains": brains}


def _listed_revoked(host: Host) -> dict[str, int]:
    placed = host.keys.revoked
    if placed is None:
        return {}
    placed.load()  # the list as it stands now, so a listing right after a revocation shows it
    return placed.value


@door("host.listKeys", HOST)
def _list_keys(c: Any) -> dict[str, Any]:
    """Every principal key's fingerprint, principal and reach. The service key is the operator's, placed by
    hand and never minted over the wire; it is not listed either."""
    c.host.keys.reload()
    revoked, now = _listed_revoked(c.host), time.time()
    keys = []
    for sha, principal in c.host.keys.entries():
        if principal.service_key:
            continue
        keys.append(
            {
                "sha256": sha,
                "principal": principal.id,
                "brains": EVERY_BRAIN if principal.brains is None else sorted(principal.brains),
                "revoked": sha in revoked and now < revoked[sha],
            }
        )
    return {"keys": keys}


@door("host.revokeKey", HOST)
def _revoke_key(c: Any) -> dict[str, Any]:
    """List a static key's SHA-256 in the revoked file, with the last second of 9999 as its exp; the very next
    request with that key is refused (the list is re-read before this answers)."""
    sha = c.id
    if not isinstance(sha, str) or not SHA256_HEX.fullmatch(sha):
        raise R.InvalidArgumentError(
            "sha256: 64 lowercase hex characters, the key's SHA-256", field="sha256", reason="malformed"
        )
    placed = c.host.keys.revoked
    add_revocation(c.host.revoked_path, sha, STATIC_KEY_EXP, placed.value if placed is not None else None)
    _listed_revoked(c.host)
    c.host.keys.reload()
    known = any(found == sha for found, _ in c.host.keys.entries())
    return {"sha256": sha, "revoked": True, "known": known, "exp": STATIC_KEY_EXP}


@door("host.persist", HOST)
def _persist(c: Any) -> dict[str, Any]:
    """Back the brain up to ``<root>/<brain>/<name>``: every check first, then a run of one generation."""
    backups: Backups = c.host.backups
    backups.configured()
    path = c.brains.path_of(c.brain, archived_ok=True)
    if backups.root is None and backups.remote is not None:  # --object-store, no --snapshots-dir
        run = backups.start_remote(c.brain, c.document["name"], c.brains.resolve(c.brain, False).hold_files())
        return {
            "brain": c.brain,
            "name": run.name,
            "run": {"state": run.state, "startedAt": run.started_at, "generation": run.generation},
        }
    target = backups.target(c.brain, c.document["name"])
    archived = c.brains.brains_dir is not None and archive.archived_at(Path(c.brains.brains_dir), c.brain) is not None
    if archived:  # an archived brain is closed: read it through an attach of its own, held only to take the set
        with Brain.attach(path, name=c.brain) as attached:
            files = attached.hold_files()
    else:
        files = c.brains.resolve(c.brain, False).hold_files()
    run = backups.start(c.brain, c.document["name"], target, files)
    return {
        "brain": c.brain,
        "name": run.name,
        "run": {"state": run.state, "startedAt": run.started_at, "generation": run.generation},
    }


@door("host.persistStatus", HOST)
def _persist_status(c: Any) -> dict[str, Any]:
    c.host.backups.configured()
    c.brains.path_of(c.brain, archived_ok=True)
    return {"runs": [r.to_wire() for r in c.host.backups.runs(c.brain, c.document.get("name"))]}


@door("host.move", HOST)
def _move(c: Any) -> Awaitable[dict[str, Any]]:
    """Hand the brain to another node of the fleet (brainy/host/moving.py says how)."""
    return moving.run(c)


#: The doors the fleet's edge places on a node before forwarding (docs/fleet.md "Placement"): they create a brain.
FLEET_PLACED = frozenset({"host.provision"})
#: Doors that name a brain the fleet has not placed yet, or that find its owner themselves and send themselves on
#: to it (brainy/host/moving.py ``ask``): never refused BrainMovedError for a brain another node owns.
FLEET_PLACES = frozenset({"host.provision", "host.move", "host.archive", "host.unarchive"})
