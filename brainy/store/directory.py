"""Making a store, and knowing one when we see it (docs/store-format.md)."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from brainy.contract import refusals as R
from brainy.store import keys as K
from brainy.store import log as log_
from brainy.store.counts import Ledger
from brainy.store.files import DocumentUnreadable, fsync_dir, read_document, write_document

FORMAT = 1  # the MANIFEST's layout
# the store's (IDENTITY's): 2 keeps a row's vector under a key of its own, 1 kept it inside the row (a format 1
# store is read as it stands; a writer's open marks it 2 before it writes, so an older brainy refuses it)
STORE_FORMAT = 2
FOLDERS = ("log", "sst", "ledger", "locks", "index")


def ledger_name(generation: int) -> str:
    return f"ledger/{generation:020d}.counts"


def not_a_store(path: Path) -> R.Refusal:
    return R.StoreNotFoundError(
        f"{path} holds no brainy store; create one with `brainy init {path}`", cure=f"brainy init {path}"
    )


def store_id_of(root: Path) -> str | None:
    """The storeId in ``root``'s IDENTITY, which the snapshot files written in it carry in their heads, so that
    one copied in from another store is never trusted; None when IDENTITY does not read (then the store's open
    refuses by name, and no snapshot is read)."""
    try:
        found = read_document(root / "IDENTITY").get("storeId")
    except (OSError, DocumentUnreadable):
        return None
    return found if isinstance(found, str) else None


def read_identity(root: Path) -> dict[str, Any]:
    """The store's IDENTITY, or a named refusal: no store here, or one from a newer brainy."""
    if not (root / "IDENTITY").exists():
        raise not_a_store(root)
    try:
        identity = read_document(root / "IDENTITY")
    except DocumentUnreadable as exc:
        raise R.StoreUnservableError(
            f"IDENTITY does not read: {exc.reason}", reason="unreadable-generation-stamp"
        ) from None
    if not isinstance(identity.get("format"), int) or identity["format"] > STORE_FORMAT:
        raise R.StoreUnservableError(
            f"the store has format {identity.get('format')}; this brainy reads up to {STORE_FORMAT}",
            reason="newer-record-profile",
        )
    return identity


def mark_format(root: Path, identity: dict[str, Any]) -> dict[str, Any]:
    """The writer's open, once it holds the lease: a store of an older format is marked with this one (IDENTITY
    replaced whole, nothing else changed) before anything is written in this one's layout, so an older brainy
    refuses it by name rather than take a row whose vector is under its own key for a row without one."""
    if identity["format"] >= STORE_FORMAT:
        return identity
    marked = {**identity, "format": STORE_FORMAT}
    write_document(root / "IDENTITY", marked)
    return marked


class StoreExistsError(Exception):
    """``brainy init`` on a path that is already a store, or a directory that is not empty."""


def init_store(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Write a new, empty store at ``path``: the only way a store comes to exist.

    Refuses an existing store or a non-empty directory; overwrites nothing.
    """
    root = Path(path)
    if root.exists():
        if not root.is_dir():
            raise StoreExistsError(f"{root} exists and is not a directory")
        if (root / "IDENTITY").exists():
            raise StoreExistsError(f"{root} is already a brainy store")
        if any(root.iterdir()):
            raise StoreExistsError(f"{root} is not empty; brainy init writes only into a new or empty directory")
    else:
        root.mkdir(parents=True)
        fsync_dir(root.parent)
    identity = {
        "format": STORE_FORMAT,
        "product": "brainy",
        "storeId": K.uuid7(),
        "createdAt": time.time_ns() // 1_000_000,
    }
    for folder in FOLDERS:
        (root / folder).mkdir()
    with open(root / "log" / log_.segment_name(1), "wb") as f:
        f.write(log_.encode_header())
        f.flush()
        os.fsync(f.fileno())
    write_document(root / ledger_name(0), Ledger().to_doc())
    write_document(
        root / "MANIFEST",
        {
            "format": FORMAT,
            "storeId": identity["storeId"],
            "generation": 0,
            "timestamp": 0,
            "nextTable": 1,
            "nextDenseInt": 1,
            "ledger": ledger_name(0),
            "tables": [],
        },
    )
    for folder in FOLDERS:
        fsync_dir(root / folder)
    # IDENTITY last: a directory without it is not a store, so a crash mid-init leaves no half store
    write_document(root / "IDENTITY", identity)
    return identity
