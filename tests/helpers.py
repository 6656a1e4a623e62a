"""Shared helpers for the store tests: making stores and poking their files."""

from __future__ import annotations

from pathlib import Path

from brainy.engine import Brain, init_store


def new_store(tmp_path: Path, name: str = "brain") -> Path:
    path = tmp_path / name
    init_store(path)
    return path


def segments(path: Path) -> list[Path]:
    return sorted((path / "log").glob("*.log"))


def tables(path: Path) -> list[Path]:
    return sorted((path / "sst").glob("*.sst"))


def flip(path: Path, offset: int) -> None:
    """Flip every bit of one byte of a file in place: the file is never cut short, not even for an instant (a
    rewrite would be, under a map of it)."""
    if offset < 0:
        offset += path.stat().st_size
    with path.open("r+b") as f:
        f.seek(offset)
        byte = f.read(1)[0]
        f.seek(offset)
        f.write(bytes([byte ^ 0xFF]))


def fill(brain: Brain, n: int, prefix: str = "k") -> list[str]:
    keys = []
    for i in range(n):
        key = f"{prefix}{i}"
        brain.add({"type": "thing", "id": key, "data": f"row {i}", "metadata": {"i": i}})
        keys.append(key)
    return keys
