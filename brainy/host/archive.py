"""The archive register: which brains are out of service, kept beside the stores and never inside one.

Seed 001, "Provisioning — the service key's own doors": archiving closes a brain and writes a marker;
the store is untouched, and unarchiving serves the same rows again. The marker lives OUTSIDE the
store, because a store's directory belongs to the engine::

    <brains-dir>/.archived/<name>.json      {"brain": "<name>", "archivedAt": <ms since the epoch>}

A name beginning with ``.`` is not a legal brain name, so the register is never listed as a brain.
Written whole under a temporary name and renamed into place (a reader sees no marker or a whole one);
a marker that does not read still archives its brain (``archivedAt`` 0): an unreadable marker is no
reason to serve a brain someone took out of service.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from brainy.store.files import fsync_dir, write_durably

REGISTER = ".archived"


def marker(brains_dir: Path, name: str) -> Path:
    return brains_dir / REGISTER / f"{name}.json"


def archived_at(brains_dir: Path, name: str) -> int | None:
    """When ``name`` was archived (ms), or None when it is in service."""
    try:
        data = marker(brains_dir, name).read_bytes()
    except FileNotFoundError:
        return None
    try:
        at = json.loads(data).get("archivedAt")
    except (ValueError, AttributeError):
        return 0
    return at if isinstance(at, int) and not isinstance(at, bool) else 0


def mark(brains_dir: Path, name: str, at: int | None = None) -> tuple[int, bool]:
    """Archive ``name`` (``at``: when, the fleet's register's time; else now): (archivedAt, whether this call wrote
    the marker). An archived brain keeps its marker."""
    already = archived_at(brains_dir, name)
    if already is not None:
        return already, False
    (brains_dir / REGISTER).mkdir(exist_ok=True)
    at = at if at is not None else time.time_ns() // 1_000_000
    write_durably(marker(brains_dir, name), json.dumps({"brain": name, "archivedAt": at}).encode() + b"\n")
    return at, True


def unmark(brains_dir: Path, name: str) -> bool:
    """Serve ``name`` again: remove its marker (the register's own file; the store is never touched)."""
    try:
        marker(brains_dir, name).unlink()
    except FileNotFoundError:
        return False
    fsync_dir(brains_dir / REGISTER)
    return True
