"""The projection follower: keeps the query projections at the brain's durable head.

It follows the commit path. Each commit (and each frame replayed on open) hands it the entity
and relation moves it made (:meth:`record`); when a commit becomes durable the follower applies the moves up
to it, in generation order (:meth:`advance`), so a query never sees a commit that was not
acknowledged. The projections are built on first need (an open pays nothing until the first
query): from the newest persisted snapshot when the moves this handle holds can bring it to the
head, else from the rows; :attr:`built_from` says which. At each flush and clean close they are
persisted, stamped with the generation they cover.

A projection the query doors read (postings, words, order columns today; the vector index next)
lives behind this one interface: :meth:`held` for a consistent read, :meth:`record` and
:meth:`advance` to follow the commits.
"""

from __future__ import annotations

import logging
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

from brainy.engine.files import write_durably
from brainy.engine.projections import (Projections, decode_snapshot, encode_snapshot, newest_snapshot,
                                        snapshot_name)

if TYPE_CHECKING:
    from brainy.engine.brain import Brain

log = logging.getLogger("brainy.engine")

Move = tuple[str, dict[str, Any] | None, dict[str, Any] | None]  # ("e" or "r", before, after)


def _apply(proj: Projections, moves: list[Move]) -> None:
    for kind, before, after in moves:
        if kind == "e":
            proj.apply(before, after)
        else:
            proj.apply_relation(before, after)


class ProjectionFollower:
    def __init__(self, brain: "Brain", lock: threading.Lock) -> None:
        self._brain = brain
        self._lock = lock  # the brain's state lock: the durable head and the projections move together
        self._proj: Projections | None = None
        self._moves: dict[int, list[Move]] = {}
        self.built_from: str | None = None  # "rows" or "snapshot at G", once built
        self.census: tuple[int, dict[str, Any]] | None = None  # the counts door's answer at one generation

    @property
    def folder(self) -> Path:
        return self._brain.path / "index"

    def adopt(self, moves: dict[int, list[Move]]) -> None:
        """Take over the moves another handle of the same store recorded above the flushed generation."""
        self._moves = dict(moves)

    def moves(self) -> dict[int, list[Move]]:
        return self._moves

    def record(self, generation: int, moves: list[Move]) -> None:
        """The entity and relation moves of one commit, applied once it is durable."""
        self._moves[generation] = moves

    def advance(self, durable: int, flushed: int) -> None:
        """The commit at ``durable`` is acknowledged: move the projections up to it. The caller holds the lock."""
        proj = self._proj
        if proj is not None:
            for g in sorted(g for g in self._moves if g <= durable):
                moves = self._moves.pop(g)
                if g > proj.stamp:
                    _apply(proj, moves)
                    proj.stamp = g
        else:  # not built yet: keep what a snapshot at or after the flushed generation needs
            for g in [g for g in self._moves if g <= flushed]:
                del self._moves[g]

    @contextmanager
    def held(self) -> Iterator[Projections]:
        """The projections at the durable head, built on first need, held still for the block."""
        with self._lock:
            if self._proj is None:
                self._build()
            assert self._proj is not None
            yield self._proj

    def _build(self) -> None:
        brain = self._brain
        started, head = time.monotonic(), brain.head
        proj, how = self._persisted(), "rows"
        if proj is not None:
            how = f"snapshot at {proj.stamp}"
            for g in sorted(g for g in self._moves if proj.stamp < g <= head):
                _apply(proj, self._moves[g])
            proj.stamp = head
        else:
            proj = Projections.build(brain.at(head).entities(), head)
        self._proj = proj
        self._moves = {g: m for g, m in self._moves.items() if g > head}
        self.built_from = how
        log.info("brain %s: projections at generation %d from %s (%d rows) in %.0f ms", brain.name, head,
                 how, len(proj.all), (time.monotonic() - started) * 1000)

    def _persisted(self) -> Projections | None:
        """The newest persisted snapshot, if the moves this handle holds can bring it to the head.

        One the log tail cannot reach (older than the flushed generation, or newer than this handle's
        head) or that does not check out is left alone: the projections are rebuilt from the rows and the
        warnings say why.
        """
        found = newest_snapshot(self.folder) if self.folder.is_dir() else None
        if found is None:
            return None
        stamp, path = found
        brain = self._brain
        if not brain.flushed <= stamp <= brain.head:
            brain.warnings.append({"code": "projections-rebuilt", "message":
                                   f"snapshot {path.name} is outside generations {brain.flushed}..{brain.head}"})
            return None
        try:
            proj = decode_snapshot(path.read_bytes())
        except (OSError, ValueError) as exc:
            brain.warnings.append({"code": "projections-rebuilt", "message": f"snapshot {path.name}: {exc}"})
            return None
        return proj if proj.stamp == stamp else None

    def persist(self) -> None:
        """Write the projections out, stamped with the generation they cover; older snapshots go."""
        with self._lock:
            if self._proj is None:
                return
            stamp, data = self._proj.stamp, encode_snapshot(self._proj)
        folder = self.folder
        if (folder / snapshot_name(stamp)).exists():
            return
        folder.mkdir(exist_ok=True)
        write_durably(folder / snapshot_name(stamp), data)
        for older in folder.glob("*.proj"):
            if older.name != snapshot_name(stamp):
                older.unlink(missing_ok=True)
