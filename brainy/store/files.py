"""Small, careful file operations the store is built from.

Every document the store replaces (IDENTITY, MANIFEST, a counts ledger) is
written whole to ``NAME.tmp``, fsynced, renamed over ``NAME`` and the directory
fsynced, so a reader sees the old file or the new one and never a mix
(docs/store-format.md, "Documents with a checksum line").
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from brainy.store.crc import crc32

Buffer = bytes | bytearray | memoryview


class DocumentUnreadable(Exception):
    """A checksummed document is missing its checksum line, fails it, or is not a JSON object."""

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"{path.name}: {reason}")
        self.path = path
        self.reason = reason


def fsync_dir(path: Path) -> None:
    """Make a directory's entries (a rename, a new file) durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_all(fd: int, data: Buffer) -> None:
    """Write every byte of ``data`` to ``fd`` (a write may take fewer than it is given)."""
    view = memoryview(data).cast("B")
    while view:
        view = view[os.write(fd, view) :]


def write_durably(path: Path, data: Buffer | Sequence[Buffer]) -> None:
    """Replace ``path`` with ``data`` atomically and durably: its bytes, or the bytes of each of its buffers in
    turn (a large file's parts written from where they lie, never joined into one copy first)."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        for part in [data] if isinstance(data, (bytes, bytearray, memoryview)) else data:
            write_all(fd, part)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    fsync_dir(path.parent)


def encode_document(body: dict[str, Any]) -> bytes:
    """A JSON object on one line, then ``crc32:<hex>`` of that line."""
    line = json.dumps(body, separators=(",", ":"), sort_keys=True).encode("utf-8")
    return line + b"\ncrc32:%08x\n" % crc32(line)


def decode_document(path: Path, data: bytes) -> dict[str, Any]:
    line, sep, rest = data.partition(b"\n")
    if not sep or not rest.startswith(b"crc32:"):
        raise DocumentUnreadable(path, "no checksum line")
    try:
        want = int(rest[6:14], 16)
    except ValueError:
        raise DocumentUnreadable(path, "bad checksum line") from None
    if crc32(line) != want or rest[14:].strip():
        raise DocumentUnreadable(path, "checksum mismatch")
    try:
        body = json.loads(line)
    except ValueError:
        raise DocumentUnreadable(path, "not JSON") from None
    if not isinstance(body, dict):
        raise DocumentUnreadable(path, "not a JSON object")
    return body


def write_document(path: Path, body: dict[str, Any]) -> None:
    write_durably(path, encode_document(body))


def read_document(path: Path) -> dict[str, Any]:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise DocumentUnreadable(path, "missing") from None
    return decode_document(path, data)
