"""The fleet's keys in etcd and their values, as docs/fleet.md "What etcd holds" specifies them.

``brainy/nodes/<node>``   {"node", "url", "freeBytes", "joinedAt"}   under the node's lease
``brainy/owners/<brain>`` {"node", "epoch"}                          under the owner's lease
``brainy/epochs/<brain>`` decimal epoch                              no lease: it outlives every owner

An epoch is stored as its decimal digits, not JSON, so the claim transaction compares it byte for byte.
"""

from __future__ import annotations

from dataclasses import dataclass

import orjson

ROOT = b"brainy/"
NODES = ROOT + b"nodes/"
OWNERS = ROOT + b"owners/"
EPOCHS = ROOT + b"epochs/"


class LayoutError(ValueError):
    """A fleet key's value is not what docs/fleet.md says it is (written by something that is not brainy)."""


@dataclass(frozen=True, slots=True)
class Node:
    """A live node, as its registration says."""

    node: str
    url: str
    free_bytes: int = 0
    joined_at: int = 0


@dataclass(frozen=True, slots=True)
class Owner:
    """Who serves a brain now, and at which epoch."""

    node: str
    epoch: int


def node_key(node: str) -> bytes:
    return NODES + node.encode()


def owner_key(brain: str) -> bytes:
    return OWNERS + brain.encode()


def epoch_key(brain: str) -> bytes:
    return EPOCHS + brain.encode()


def name_of(key: bytes, prefix: bytes) -> str:
    """The node or brain name a key under ``prefix`` is for."""
    return key[len(prefix) :].decode()


def node_value(node: Node) -> bytes:
    return orjson.dumps({"node": node.node, "url": node.url, "freeBytes": node.free_bytes, "joinedAt": node.joined_at})


def read_node(value: bytes) -> Node:
    try:
        doc = orjson.loads(value)
        return Node(str(doc["node"]), str(doc["url"]), int(doc.get("freeBytes", 0)), int(doc.get("joinedAt", 0)))
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        raise LayoutError(f"a node's registration is not {{node, url, freeBytes, joinedAt}}: {exc}") from None


def owner_value(owner: Owner) -> bytes:
    return orjson.dumps({"node": owner.node, "epoch": owner.epoch})


def read_owner(value: bytes) -> Owner:
    try:
        doc = orjson.loads(value)
        return Owner(str(doc["node"]), int(doc["epoch"]))
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        raise LayoutError(f"a brain's owner is not {{node, epoch}}: {exc}") from None


def epoch_value(epoch: int) -> bytes:
    return str(epoch).encode()


def read_epoch(value: bytes) -> int:
    if not value.isdigit():
        raise LayoutError(f"an epoch is decimal digits, not {value[:40]!r}")
    return int(value)
