"""``brainy`` with one door more: run with ``BRAINY_CONTRACT`` naming a contract copy that adds ``echo``.

This file is the whole of the door's code: one registered function. Everything else — its HTTP
route, its MCP tool, its argument check, the gate — comes from its contract entry.
"""

from __future__ import annotations

import sys
from typing import Any

from brainy.doors.registry import door


@door("echo")
def echo(snap: Any, id_: Any, args: dict[str, Any]) -> dict[str, Any]:
    return {"echoed": args["text"] * args.get("times", 1), "brain": snap.brain, "generation": snap.generation}


if __name__ == "__main__":
    from brainy.cli import main

    sys.exit(main(sys.argv[1:]))
