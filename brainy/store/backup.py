"""One generation's file set, held still: what the ``snapshot`` door lists and ``host.persist`` copies.

A store's files are immutable or append-only (docs/store-format.md): tables and ledgers are written
once; the MANIFEST and IDENTITY are replaced whole, never edited; log segments and blob packs only
grow. So one generation is the MANIFEST of the flushed tables, the ledger and tables it names, and a
prefix of every log segment and blob pack: copy exactly those bytes and the copy reopens at that
generation (the open replays the log prefix past the MANIFEST's generation).

:func:`freeze` takes the set while the files stand still (a writer's maintenance lock keeps a flush
or a compaction from swapping the MANIFEST or unlinking a table; its commit lock keeps the log where
it is while the appended frames are made durable) and opens every file then, so the set stays whole
afterwards: a table a later compaction unlinks is still read through its descriptor. Names are
relative to the store; no absolute host path is ever part of the set.

The projection snapshot (``index/``) is derived and replaced as the projections move, so it is not
part of a generation's set: a copy builds its projections from its rows.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

from brainy.contract import refusals as R
from brainy.store import log as log_
from brainy.store.directory import FOLDERS
from brainy.store.files import fsync_dir, read_document, write_all

CHUNK = 1 << 20


@dataclass
class Held:
    """One file of the set: its name in the store, its open descriptor, and how many of its bytes belong."""

    name: str
    fd: int
    size: int

    def chunks(self) -> Iterator[bytes]:
        offset = 0
        while offset < self.size:
            data = os.pread(self.fd, min(CHUNK, self.size - offset), offset)
            if not data:
                raise R.StoreUnservableError(
                    f"{self.name} is shorter than the {self.size} bytes it held", reason="torn-sstable"
                )
            offset += len(data)
            yield data

    def checksum(self) -> str:
        digest = hashlib.sha256()
        for data in self.chunks():
            digest.update(data)
        return "sha256:" + digest.hexdigest()


@dataclass
class FileSet:
    """A generation's files, open; :meth:`close` gives the descriptors back (a ``with`` block does)."""

    generation: int
    created_at: int  # when the set was taken, ms
    files: list[Held] = field(default_factory=list)

    @property
    def bytes(self) -> int:
        return sum(f.size for f in self.files)

    def listing(self) -> list[dict[str, object]]:
        """The ``snapshot`` door's ``files``: ``{name, size, checksum}`` each, in name order."""
        return [{"name": f.name, "size": f.size, "checksum": f.checksum()} for f in self.files]

    def copy_to(self, target: Path) -> None:
        """Write the set into the empty directory ``target`` as a store: every file, then the empty folders
        a store has, each file and folder fsynced, IDENTITY last (a folder without it is no store)."""
        for folder in FOLDERS:
            (target / folder).mkdir(exist_ok=True)
        ordered = sorted(self.files, key=lambda f: f.name == "IDENTITY")
        for held in ordered:
            path = target / held.name
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o644)
            try:
                for data in held.chunks():
                    write_all(fd, data)
                os.fsync(fd)
            finally:
                os.close(fd)
        for folder in {str(Path(f.name).parent) for f in self.files} | set(FOLDERS):
            fsync_dir(target / folder)
        fsync_dir(target)

    def close(self) -> None:
        for held in self.files:
            try:
                os.close(held.fd)
            except OSError:
                pass
        self.files = []

    def __enter__(self) -> FileSet:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _open(root: Path, name: str, size: int | None = None) -> Held:
    fd = os.open(root / name, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    return Held(name, fd, os.fstat(fd).st_size if size is None else size)


def take(root: Path, generation: int, manifest: dict[str, object], position: log_.Position | None) -> FileSet:
    """The file set of the store at ``root`` as of ``generation``: its identity, its ``manifest`` (which must
    still be the one on disk) with the tables and ledger it names, the log up to ``position`` (all of it when
    None) and the blob packs, each held open. The brain handle calls this with its own state held still
    (``Brain.hold_files``)."""
    taken = FileSet(generation, time.time_ns() // 1_000_000)
    try:
        on_disk = read_document(root / "MANIFEST")
        if on_disk != manifest:  # only a reader can meet this: a writer elsewhere flushed since it attached
            raise R.StoreUnservableError(
                "the store's MANIFEST moved since this handle read it; ask again", reason="writer-handoff-in-flight"
            )
        names = ["IDENTITY", "MANIFEST", str(manifest["ledger"])]
        names += [str(t["file"]) for t in cast("list[dict[str, object]]", manifest["tables"])]
        for name in names:
            taken.files.append(_open(root, name))
        for first, path in log_.segments(root / "log"):
            if position is not None and first > position.first:
                break  # a reader's generation ends inside the segment its read stopped in
            size = position.offset if position is not None and first == position.first else None
            taken.files.append(_open(root, f"log/{path.name}", size))
        blobs = root / "blobs"
        if blobs.is_dir():
            for path in sorted(blobs.iterdir()):
                if path.name.endswith(".pack"):
                    taken.files.append(_open(root, f"blobs/{path.name}"))
    except BaseException:
        taken.close()
        raise
    taken.files.sort(key=lambda f: f.name)
    return taken
