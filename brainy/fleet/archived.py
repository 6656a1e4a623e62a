"""The fleet's archive register in etcd: which brains are out of service, whichever node serves them (docs/fleet.md
"Archived brains in a fleet").

``brainy/archived/<brain>``  {"brain", "archivedAt", "node"}  no lease: it outlives every owner

A node's own register (``<brains-dir>/.archived/``, brainy/host/archive.py) says what that node's copy is; this key
says it for the fleet, so that a node that never held the brain honours it too: no node claims an archived brain
that no live node owns (the claim transaction compares that the key is absent, brainy/fleet/membership.py), so a
failover leaves an archived brain unowned until ``host.unarchive``. Written only by the archive doors.
"""

from __future__ import annotations

import time

import orjson

from brainy.fleet import etcd as E
from brainy.fleet import layout as L

ARCHIVED = L.ROOT + b"archived/"


def archived_key(brain: str) -> bytes:
    return ARCHIVED + brain.encode()


def absent(brain: str) -> dict[str, object]:
    """The compare a claim makes: ``brain`` is not archived fleet-wide."""
    return E.version_is(archived_key(brain), 0)


def unmark_op(brain: str) -> dict[str, object]:
    """The op that serves ``brain`` again fleet-wide, in a claim's transaction (``host.unarchive`` of a brain no
    live node owns: claimed and unarchived at once, so no other node's failover claims it between the two)."""
    return E.delete_op(archived_key(brain))


def read_at(value: bytes) -> int:
    """``archivedAt`` of a register value (0 when it does not read: still archived, as brainy/host/archive.py)."""
    try:
        at = orjson.loads(value).get("archivedAt")
    except (orjson.JSONDecodeError, AttributeError):
        return 0
    return at if isinstance(at, int) and not isinstance(at, bool) else 0


async def mark(client: E.Etcd, brain: str, node: str, at: int | None = None) -> int:
    """Archive ``brain`` fleet-wide (kept as it is when already archived): its ``archivedAt``."""
    key = archived_key(brain)
    at = at if at is not None else time.time_ns() // 1_000_000
    value = orjson.dumps({"brain": brain, "archivedAt": at, "node": node})
    done, read = await client.txn([E.version_is(key, 0)], [E.put_op(key, value)], [E.range_op(key)])
    if done or not read or not read[0]:
        return at
    return read_at(read[0][0].value)


async def unmark(client: E.Etcd, brain: str) -> None:
    """Serve ``brain`` again fleet-wide: its key deleted (nothing when it had none)."""
    await client.delete(archived_key(brain))


async def every(client: E.Etcd) -> dict[str, int]:
    """The brains archived fleet-wide, each with its ``archivedAt``."""
    return {L.name_of(kv.key, ARCHIVED): read_at(kv.value) for kv in await client.prefix(ARCHIVED)}
