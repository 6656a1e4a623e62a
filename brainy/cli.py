"""The ``brainy`` command: the starter, ``init``, and the commands later releases fill in.

Argument and environment resolution only; the work is done by ``brainy.engine``.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Sequence

from brainy import __version__
from brainy.contract import refusals as R

STARTER_STORE = "./brain"

# Commands whose implementation has not landed: each refuses by name with its release.
NOT_YET = {"serve": "0.2.0", "mcp": "0.4.0", "issuer": "0.5.0", "token": "0.5.0"}


def _refuse(refusal: R.Refusal) -> int:
    print(f"brainy: {refusal.name}: {refusal.message}", file=sys.stderr)
    print(json.dumps({"error": refusal.to_wire()}), file=sys.stderr)
    return 2


def _init(path: str) -> int:
    from brainy.engine import StoreExistsError, init_store

    try:
        identity = init_store(path)
    except StoreExistsError as exc:
        print(f"brainy init: refused: {exc}; nothing was written", file=sys.stderr)
        return 2
    print(f"brainy: created store {identity['storeId']} at {path}")
    return 0


def _starter() -> int:
    """Open ./brain read-write; serving it arrives with the server (release 0.2.0)."""
    from brainy.engine import Brain

    try:
        brain = Brain.open(STARTER_STORE, name="brain")
    except R.Refusal as refusal:
        return _refuse(refusal)
    try:
        counts = brain.counts()
        print(json.dumps({"brain": brain.name, "generation": brain.head, "writer": brain.writer_block(),
                          "entities": counts["entities"], "relationships": counts["relationships"],
                          "warnings": brain.warnings}, indent=2))
    finally:
        brain.close()
    return _refuse(R.NotYetNativeError("the store opened and closed cleanly; serving it over HTTP and MCP "
                                       "arrives in 0.2.0", door="serve", release="0.2.0"))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="brainy", description="brainy: a knowledge store for agents.")
    parser.add_argument("--version", action="version", version=f"brainy {__version__}")
    sub = parser.add_subparsers(dest="command")
    p_init = sub.add_parser("init", help="create a new store (the only command that makes one)")
    p_init.add_argument("path")
    for name in NOT_YET:
        sub.add_parser(name, help=f"arrives in {NOT_YET[name]}").add_argument("rest", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    if args.command is None:
        return _starter()
    if args.command == "init":
        return _init(args.path)
    return _refuse(R.NotYetNativeError(f"`brainy {args.command}` arrives in {NOT_YET[args.command]}",
                                       door=args.command, release=NOT_YET[args.command]))


if __name__ == "__main__":
    sys.exit(main())
