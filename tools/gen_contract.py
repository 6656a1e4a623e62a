#!/usr/bin/env python3
"""Regenerate the committed contract artifacts from the door table.

Writes ``docs/contract.json`` (the ``/contract.json`` document with ``builtAt`` fixed
to a placeholder, so the committed copy only changes when the contract does),
``docs/brainy.proto``, both derived by ``brainy.contract.doors``, and ``docs/openapi.json``
(the ``/openapi.json`` document exactly as served, derived by ``brainy.contract.openapi``),
all from ``brainy/contract/api-contract.json``.

    python tools/gen_contract.py          # rewrite the files
    python tools/gen_contract.py --check  # exit 1, naming the stale files, if any differs
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from brainy import __version__  # noqa: E402
from brainy.contract import doors, openapi  # noqa: E402

#: builtAt of the committed copy; the served document carries the real build stamp.
BUILT_AT_PLACEHOLDER = "1970-01-01T00:00:00Z"
CONTRACT_JSON = ROOT / "docs" / "contract.json"
PROTO = ROOT / "docs" / "brainy.proto"
OPENAPI_JSON = ROOT / "docs" / "openapi.json"


def render() -> dict[Path, str]:
    """Each generated file's path and its fresh text."""
    return {
        CONTRACT_JSON: doors.envelope_text(__version__, BUILT_AT_PLACEHOLDER),
        PROTO: doors.proto_text(),
        OPENAPI_JSON: openapi.text(__version__),
    }


def main(argv: list[str] | None = None) -> int:
    """Write (or, with --check, compare) the generated files."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare instead of writing")
    args = parser.parse_args(argv)
    stale = []
    for path, text in render().items():
        current = path.read_text("utf-8") if path.exists() else None
        if current == text:
            continue
        if args.check:
            stale.append(path.relative_to(ROOT).as_posix())
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, "utf-8")
            print(f"wrote {path.relative_to(ROOT).as_posix()}")
    if stale:
        print("stale, regenerate with `python tools/gen_contract.py`: " + ", ".join(stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
