"""The counts ledger: entities, relationships and vectors, by type, public and across every tier.

It moves in the commit that changes the rows (the same apply that writes the
rows moves it), and is persisted as ``ledger/<generation>.counts`` at each flush.
"""

from __future__ import annotations

from collections import Counter
from operator import itemgetter
from typing import Any

FIELDS = ("entities", "entitiesAllTiers", "relationships", "relationshipsAllTiers", "vectoredEntities")
MAPS = ("byType", "byTypeAllTiers", "byRelationType", "byRelationTypeAllTiers")
_GROUP = itemgetter("type", "visibility", "hasVector")  # what a new entity's counts turn on


class Ledger:
    def __init__(self, doc: dict[str, Any] | None = None) -> None:
        doc = doc or {}
        self.generation: int = doc.get("generation", 0)
        self.last_updated: int = doc.get("lastUpdated", 0)
        self.n: dict[str, int] = {f: int(doc.get(f, 0)) for f in FIELDS}
        self.maps: dict[str, dict[str, int]] = {m: dict(doc.get(m, {})) for m in MAPS}

    def copy(self) -> Ledger:
        """A copy sharing nothing that moves: its numbers and maps copied (ints and strings, shared as they are).
        Every commit takes one; copy.deepcopy's walk of the same took 27 us a commit."""
        other = Ledger.__new__(Ledger)
        other.generation, other.last_updated = self.generation, self.last_updated
        other.n = dict(self.n)
        other.maps = {name: dict(table) for name, table in self.maps.items()}
        return other

    def _bump(self, name: str, key: str, delta: int) -> None:
        table = self.maps[name]
        value = table.get(key, 0) + delta
        if value:
            table[key] = value
        else:
            table.pop(key, None)

    def _entity(self, row: dict[str, Any], sign: int) -> None:
        public = row.get("visibility", "public") == "public"
        self.n["entitiesAllTiers"] += sign
        self._bump("byTypeAllTiers", row["type"], sign)
        if public:
            self.n["entities"] += sign
            self._bump("byType", row["type"], sign)
        if row.get("hasVector"):
            self.n["vectoredEntities"] += sign

    def _relation(self, row: dict[str, Any], sign: int) -> None:
        public = row.get("visibility", "public") == "public"
        self.n["relationshipsAllTiers"] += sign
        self._bump("byRelationTypeAllTiers", row["type"], sign)
        if public:
            self.n["relationships"] += sign
            self._bump("byRelationType", row["type"], sign)

    def move(self, kind: str, before: dict[str, Any] | None, after: dict[str, Any] | None) -> None:
        count = self._entity if kind == "e" else self._relation
        if before is not None:
            count(before, -1)
        if after is not None:
            count(after, +1)

    def move_all(self, moves: list[tuple[str, dict[str, Any] | None, dict[str, Any] | None]]) -> None:
        """:meth:`move` of each of a commit's moves: its new entities counted by their (type, tier, vector) first,
        each such group moved once (a batch of a thousand adds is a few groups, not a thousand moves). The new rows
        are picked and grouped by compiled steps (a list's filter, an itemgetter, Counter's count), not a Python step
        each with its lookups and its key's tuple (an addMany's thousand: 0.39 -> 0.19 us a row)."""
        added = [after for kind, before, after in moves if before is None and kind == "e" and after is not None]
        if len(added) < len(moves):
            for kind, before, after in moves:
                if before is not None or kind != "e" or after is None:
                    self.move(kind, before, after)
        try:
            groups = Counter(map(_GROUP, added))
        except KeyError:  # a row that leaves its visibility or hasVector unsaid: each read as _entity reads it
            groups = Counter((row["type"], row.get("visibility", "public"), row.get("hasVector")) for row in added)
        n = self.n
        for (kind, visibility, vectored), count in groups.items():
            n["entitiesAllTiers"] += count
            self._bump("byTypeAllTiers", kind, count)
            if visibility == "public":
                n["entities"] += count
                self._bump("byType", kind, count)
            if vectored:
                n["vectoredEntities"] += count

    def to_doc(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"generation": self.generation, "lastUpdated": self.last_updated}
        doc.update(self.n)
        doc.update({m: dict(v) for m, v in self.maps.items()})
        return doc

    def answer(self) -> dict[str, Any]:
        """The numbers part of the ``counts`` door's answer."""
        doc = self.to_doc()
        doc.pop("lastUpdated")
        top = sorted(self.maps["byType"].items(), key=lambda kv: (-kv[1], kv[0]))[:10]
        doc["topTypes"] = [{"type": t, "count": c} for t, c in top]
        return doc
