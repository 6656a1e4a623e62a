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


class StandInShipper:
    """A shipper as the commit path sees one (brainy/store/commit_path.py ``Ships``): it stands for a fleet node's
    ``--ship sync`` shipper, whose every durable wait is a round trip to the object store, and acknowledges every
    commit but ``refused`` (as a node's refuses one whose upload failed). ``asked``: the generations it was asked
    to acknowledge, in order."""

    def __init__(self, refused: int | None = None) -> None:
        self.refused = refused
        self.asked: list[int] = []

    def check(self) -> None:
        """Never fenced: only the acknowledgements are under test."""

    def appended(self, generation: int, frame: bytes) -> None:
        """Nothing is shipped: ``acknowledge`` answers from ``refused`` alone."""

    def early(self, generation: int) -> None:
        """No upload to start beside the fsync."""

    def acknowledge(self, generation: int) -> None:
        self.asked.append(generation)
        if generation == self.refused:
            raise RuntimeError(f"generation {generation} not stored")
