"""A view: the store as it stood at one generation. Every read door answers from one.

A view is a number, not a copy: the memtable and the tables keep every version
tagged by the generation that wrote it, so reading at ``generation`` means
taking, for each key, the newest version at or below it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterator

from brainy.contract import refusals as R
from brainy.engine import keys as K
from brainy.engine import rows
from brainy.engine.counts import Ledger

if TYPE_CHECKING:
    from brainy.engine.brain import Brain

MAX_BATCH_GET = 1000
SHAPE = {"dimensions": rows.DIMENSIONS, "metric": "cosine", "model": "all-MiniLM-L6-v2"}


class View:
    def __init__(self, brain: "Brain", generation: int) -> None:
        self.brain = brain
        self.generation = generation

    # -- keys ------------------------------------------------------------------------------------

    def lookup(self, key: bytes) -> bytes | None:
        return self.brain._lookup(key, self.generation)

    def scan(self, start: bytes, stop: bytes | None) -> Iterator[tuple[bytes, bytes]]:
        return self.brain._scan(start, stop, self.generation)

    def entity(self, id_: str) -> dict[str, Any] | None:
        raw = self.lookup(K.entity_key(id_))
        return rows.unpack(raw) if raw else None

    def relation(self, id_: str) -> dict[str, Any] | None:
        raw = self.lookup(K.relation_key(id_))
        return rows.unpack(raw) if raw else None

    def entities(self) -> Iterator[dict[str, Any]]:
        """Every entity row, in id order."""
        for _, raw in self.scan(K.ENTITY, b"f"):
            yield rows.unpack(raw)

    def relations(self) -> Iterator[dict[str, Any]]:
        """Every relation row, in id order."""
        for _, raw in self.scan(K.RELATION, b"s"):
            yield rows.unpack(raw)

    def commit(self, generation: int) -> dict[str, Any]:
        """The commit record of ``generation`` (at or below this view's)."""
        raw = self.lookup(K.commit_key(generation))
        if raw is None:  # every commit writes its record; a gap is damage, not an empty answer
            raise R.FactLogRefusedError(f"generation {generation} has no commit record", reason="missing-segment")
        return rows.unpack(raw)

    # -- the read doors ------------------------------------------------------------------------

    def get(self, id: str, includeVector: bool = False, includeData: bool = True) -> dict[str, Any]:
        """``{entity | None, generation}``: one entity by id or natural key."""
        id_, _ = K.resolve(id)
        row = self.entity(id_)
        entity = rows.public_view(row, includeVector, includeData) if row else None
        return {"entity": entity, "generation": self.generation}

    def batchGet(self, args: dict[str, Any]) -> dict[str, Any]:
        """``{entities, missing, generation}``: up to 1,000 entities in the order asked."""
        a = rows.check_args(args, frozenset(("ids", "includeVector", "includeData")))
        ids = rows.need(a, "ids")
        if not isinstance(ids, list) or not 1 <= len(ids) <= MAX_BATCH_GET:
            raise rows.invalid("ids", "out-of-range", f"an array of 1 to {MAX_BATCH_GET} ids")
        include_vector = rows.boolean(a.get("includeVector", False), "includeVector")
        include_data = rows.boolean(a.get("includeData", True), "includeData")
        entities, missing = [], []
        for i, text in enumerate(ids):
            id_, _ = K.resolve(text, f"ids[{i}]")
            row = self.entity(id_)
            if row is not None:
                entities.append(rows.public_view(row, include_vector, include_data))
            else:
                entities.append(None)
                missing.append(text)
        return {"entities": entities, "missing": missing, "generation": self.generation}

    def ledger(self) -> Ledger:
        """The counts as of this view: the brain's own ledger at its head, else counted from the rows."""
        if self.generation == self.brain.head:
            return self.brain._ledger_durable
        ledger = Ledger()
        for row in self.entities():
            ledger.move("e", None, row)
        for row in self.relations():
            ledger.move("r", None, row)
        ledger.generation = self.generation
        ledger.last_updated = self.commit(self.generation)["timestamp"] if self.generation else 0
        return ledger

    def counts(self) -> dict[str, Any]:
        """The census: totals by type and relation type, public and across every tier.

        A generation's census never changes, so the head's is built once per generation.
        """
        cached = self.brain._counts_cache
        if cached is not None and cached[0] == self.generation:
            return dict(cached[1])
        ledger = self.ledger()
        answer: dict[str, Any] = {"brain": self.brain.name}
        answer.update(ledger.answer())
        answer.update(shape=dict(SHAPE), lastUpdated=ledger.last_updated, allCountsSuspect=False)
        if self.generation == self.brain.head:
            self.brain._counts_cache = (self.generation, answer)
        return dict(answer)
