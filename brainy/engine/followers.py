"""The brain's three followers as its commit path and its maintenance see them: one call each, fanned out.

The projection, vector and aggregate followers (brainy/index/follower.py, aggregate_follower.py) each keep an
index at the durable head and each take their moves and snapshots their own way; the commit path below the
doors (brainy/store/commit_path.py, ``Follows``) and the flush (brainy/store/maintenance.py, ``Persists``) know
only one follower and four calls. The order of the calls is the order the handle has always kept.
"""

from __future__ import annotations

from brainy.index.aggregate_follower import AggregateFollower
from brainy.index.follower import ACK_WAIT_SECONDS, ProjectionFollower, VectorFollower
from brainy.store.commit_path import Move


class Followers:
    """``projections``, ``vectors`` and ``aggregates`` behind one :class:`~brainy.store.commit_path.Follows` and
    :class:`~brainy.store.maintenance.Persists`."""

    def __init__(self, projections: ProjectionFollower, vectors: VectorFollower, aggregates: AggregateFollower) -> None:
        self.projections = projections
        self.vectors = vectors
        self.aggregates = aggregates

    def record(self, generation: int, moves: list[Move]) -> None:
        self.projections.record(generation, moves)
        self.vectors.record(generation, moves)
        self.aggregates.record(generation, moves)  # it follows the entity moves among them

    def advance(self, generation: int, flushed: int) -> None:
        self.projections.advance(generation, flushed)
        self.aggregates.advance(generation)
        self.vectors.advance(generation, flushed)

    @property
    def building(self) -> bool:
        """Whether :meth:`until_built` has a build to wait for (a write that finds none answers without the hop to
        a worker thread that waiting takes)."""
        return self.projections.building or self.vectors.building

    def until_built(self, seconds: float = ACK_WAIT_SECONDS) -> None:
        """Wait (off the loop, bounded) for the projection and vector builds in flight before a write answers."""
        self.projections.until_built(seconds)
        self.vectors.until_built(seconds)

    def prepare_flush(self) -> None:
        self.projections.prepare_flush()  # its delta read, or the projections built while the chain is reachable

    def persist(self) -> None:
        self.projections.persist(build=True)
        self.aggregates.persist()

    def persist_flushed(self) -> None:
        self.vectors.persist(at_flush=True)
