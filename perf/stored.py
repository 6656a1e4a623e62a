"""The ``--store`` option the in-process benches share: a store built once and handed to every worker.

    runner = stored.runner()            # a pyperf Runner that passes --store on to its workers
    runner.argparser.add_argument(...)  # the bench's own options
    args = runner.parse_args()
    if not args.worker:
        root, missing = stored.root(args, "brainy-bench-x-")
        if missing: build(root / "store")

Without ``--store`` the master makes a temporary directory, removed at exit; with it, the store is
kept afterwards and built only when the directory holds none, so a large store is paid for once.
"""

from __future__ import annotations

import argparse
import atexit
import shutil
import tempfile
from pathlib import Path

import pyperf


def _pass_store(cmd: list[str], args: argparse.Namespace) -> None:
    cmd.extend(["--store", args.store])


def runner() -> pyperf.Runner:
    made = pyperf.Runner(add_cmdline_args=_pass_store)
    made.argparser.add_argument(
        "--store",
        help="a directory for the store (built there if it holds none; "
        "kept afterwards); default: a temp dir, removed at exit",
    )
    return made


def root(args: argparse.Namespace, prefix: str) -> tuple[Path, bool]:
    """In the master: the ``--store`` directory (set on ``args`` for the workers) and whether its store
    (``<root>/store``) must still be built."""
    if args.store is None:
        made = Path(tempfile.mkdtemp(prefix=prefix))
        atexit.register(shutil.rmtree, made, True)
        args.store = str(made)
    where = Path(args.store)
    where.mkdir(parents=True, exist_ok=True)
    return where, not (where / "store" / "MANIFEST").exists()
