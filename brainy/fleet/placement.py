"""Where a new brain goes (docs/fleet.md "Placement"): the live node with the fewest brains, then the most free
memory, then the first name, so the choice is the same whichever node makes it from the same view."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from brainy.fleet.layout import Node


def place(nodes: Iterable[Node], brains: Mapping[str, int]) -> Node | None:
    """The node a new brain goes to, given each node's count of owned brains; None when no node is live."""
    return min(nodes, key=lambda n: (brains.get(n.node, 0), -n.free_bytes, n.node), default=None)
