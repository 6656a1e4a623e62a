"""How the accords reads read, and what it costs them (DOORS 9.1 "Reads"; seed 000, "The accords reads").

Every read is made of *segments*: one find over the board's rows (find's own metadata leg, narrowed by the
postings: the kinds' subtypes, a status, a participant through ``involves``, a lab through
``provenance.lab``; ordered by an order column; clipped at its limit, with the count before the clip), or one
batch of point reads by protocol id (an id is its row's key, so a record by id is arithmetic, no index).
:class:`Reading` runs them on one snapshot and keeps their :class:`Cost`, the answer's ``cost``:

- ``segments``: how many ran;
- ``candidates``: how many rows their postings matched (a find's own count), or how many ids a batch probed;
- ``rowsRead``: how many rows were read, a find's (the rows of its page, and any its ``where`` had to read)
  plus each point read that found a row.

At the head a segment reads its postings and the rows of its page and nothing else; at a past generation
(``asOf``) find reads every row of that generation, and the counters say so.
"""

from __future__ import annotations

from typing import Any

from brainy.contract import arguments
from brainy.contract import doors as D
from brainy.doors.accords import ids
from brainy.doors.accords import model as M
from brainy.doors.query import Query, run_find
from brainy.index.snapshot import Snapshot


class Cost:
    """What a read cost: segments run, candidates their postings matched (or ids probed), rows read."""

    __slots__ = ("segments", "candidates", "rows_read")

    def __init__(self) -> None:
        self.segments = self.candidates = self.rows_read = 0

    def add(self, cost: dict[str, int]) -> None:
        """A find's own ``cost``."""
        self.segments += cost["segments"]
        self.candidates += cost["candidates"]
        self.rows_read += cost["rowsRead"]

    def answer(self) -> dict[str, int]:
        return {"segments": self.segments, "candidates": self.candidates, "rowsRead": self.rows_read}


class Segment:
    """One find's page of records: the rows (as find answers them), the count before the clip, the hits' scores,
    and the generation it read (at the head, the projections' stamp)."""

    __slots__ = ("rows", "total", "scores", "generation", "more")

    def __init__(self, answer: dict[str, Any]) -> None:
        self.rows: list[dict[str, Any]] = [hit["entity"] for hit in answer["results"]]
        self.scores: dict[str, float] = {
            hit["entity"]["key"]: hit["score"] for hit in answer["results"] if hit["score"] is not None
        }
        self.total: int | None = answer.get("total")
        self.generation: int = answer["generation"]
        self.more: bool = answer["hasMore"]


def narrowing(
    kinds: tuple[str, ...] | list[str],
    status: str | None = None,
    involves: str | None = None,
    lab: str | None = None,
    **where: Any,
) -> dict[str, Any]:
    """The find arguments that keep only the records asked for, every condition a posting: the kinds'
    subtypes, and a ``status``, a principal the record ``involves``, a ``lab`` (``provenance.lab``, a nested
    key, so the lens is in the query and not a filter after the fetch), and any other equalities."""
    conditions = dict(where)
    if status is not None:
        conditions["status"] = status
    if involves is not None:
        conditions["involves"] = involves
    if lab is not None:
        conditions["provenance.lab"] = lab
    document: dict[str, Any] = {"subtype": [M.subtype(k) for k in kinds], "visibility": "internal"}
    if conditions:
        document["where"] = conditions
    return document


class Reading:
    """One accords read on ``view``: its segments run, its point reads made, and what they cost."""

    def __init__(self, view: Snapshot, door: str) -> None:
        # a read's rows as documents, whatever the transport: the records are built from them
        self.view = view.in_process()
        self.door = door
        self.cost = Cost()
        # the generation the first segment read (at the head, the projections' stamp): what a cursor pins
        self.generation: int | None = None

    def segment(
        self,
        narrowed: dict[str, Any],
        limit: int,
        order_by: str | None = None,
        order: str = "asc",
        offset: int = 0,
        **search: Any,
    ) -> Segment:
        """One find over the narrowed records: metadata only unless ``search`` says otherwise (``query`` with a
        ``searchMode``), ordered by ``order_by`` (an order column, so no row is read to order), at most
        ``limit`` from ``offset``."""
        document = {"searchMode": "metadata", **narrowed, **search, "limit": limit, "offset": offset}
        if order_by is not None:
            document.update(orderBy=order_by, order=order)
        answer = run_find(Query(arguments.check(D.BY_NAME["find"], document), door=self.door), self.view)
        self.cost.add(answer["cost"])
        if self.generation is None:
            self.generation = answer["generation"]
        return Segment(answer)

    def entity(self, id_: str) -> dict[str, Any] | None:
        """One point read, counted when it finds a row."""
        row = self.view.entity(id_)
        if row is not None:
            self.cost.rows_read += 1
        return row

    def batch(self, keys: list[str]) -> list[dict[str, Any] | None]:
        """One segment of point reads by protocol id, every one made."""
        self.cost.segments += 1
        self.cost.candidates += len(keys)
        return [self.entity(ids.row_id(key)) for key in keys]

    def record(self, text: Any, kinds: tuple[str, ...] = ids.KINDS, field: str = "id") -> dict[str, Any]:
        """The record ``text`` names (``model.resolve``), its probes one segment of this read."""
        probed: list[str] = []

        def counted(id_: str) -> dict[str, Any] | None:
            probed.append(id_)
            return self.entity(id_)

        try:
            return M.resolve(counted, text, kinds, field)
        finally:
            self.cost.segments += 1
            self.cost.candidates += len(probed)

    def at(self, generation: int) -> None:
        """Read on at ``generation`` (a segment's: what the projections stood at), costs kept."""
        if generation != self.view.generation:
            self.view = self.view.at(generation)
