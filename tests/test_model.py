"""The engine against a model: random write sequences, flushes, compactions and reopens, checked read by read.

A plain in-memory model (entities by id with their natural key, relations by id with their
``(from, to, type, subtype)`` identity) is run beside a real store. Every write door goes to
both; the model says what the door should answer (or which refusal it should raise) from the
door catalogue (DOORS.md 1.1, 1.2, 5.2), and after every step every read the engine offers must
agree with the model: ``get`` and ``batchGet`` of every key, ``counts()``, the relation rows and
the adjacency and identity keys derived from them, and ``head``. Flushes, compactions and a
close-and-reopen are steps like any other, and the store flushes and compacts on its own too
(a small ``flush_bytes`` and ``compact_at``), so every read is also exercised across the
memtable, frozen memtables and tables.
"""

from __future__ import annotations

import copy
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgpack
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from brainy.contract import refusals as R
from brainy.engine import Brain, init_store
from brainy.store import keys as K
from brainy.store.taxonomy import NOUN_TYPES

FLUSH_BYTES = 2048  # a few commits fill it, so the maintenance thread flushes on its own
COMPACT_AT = 3  # and compacts on its own

KEYS = [f"k{i}" for i in range(6)]
IDS = {key: K.resolve(key)[0] for key in KEYS}


def ident(key: str) -> str:
    """The entity id a natural key names (UUIDv5)."""
    return IDS[key] if key in IDS else K.resolve(key)[0]


NOUNS = ["thing", "person", "concept"]
VERBS = ["relatedTo", "likes"]
SUBTYPES = [None, "s1"]
BAD_TYPE = "notAType"


def vector(seed: int) -> list[float]:
    """A 384-number vector whose values survive float32 exactly."""
    return [float(seed)] * 383 + [0.5]


# -- strategies for door arguments ----------------------------------------------------------------

keys = st.sampled_from(KEYS)
values = st.one_of(st.integers(-3, 3), st.sampled_from(["a", "b"]), st.booleans())
metadata = st.dictionaries(st.sampled_from(["x", "y", "z"]), values, max_size=3)
patches = st.dictionaries(st.sampled_from(["x", "y", "z"]), st.one_of(st.none(), values), max_size=3)
visibilities = st.sampled_from([None, "public", "internal"])  # None: leave the argument out
vectors = st.one_of(st.none(), st.integers(1, 4).map(vector))


@st.composite
def add_args(draw, key: st.SearchStrategy[str] = keys) -> dict[str, Any]:
    a: dict[str, Any] = {"type": draw(st.sampled_from(NOUNS)), "id": draw(key)}
    if draw(st.booleans()):
        a["metadata"] = draw(metadata)
    vis = draw(visibilities)
    if vis is not None:
        a["visibility"] = vis
    vec = draw(vectors)
    if vec is not None:
        a["vector"] = vec
    if draw(st.integers(0, 3)) == 0:
        a["upsert"] = True
    return a


@st.composite
def update_args(draw, key: st.SearchStrategy[str] = keys) -> dict[str, Any]:
    a: dict[str, Any] = {"id": draw(key)}
    merge = draw(st.sampled_from([None, True, False]))
    if merge is not None:
        a["merge"] = merge
    if draw(st.booleans()):
        a["metadata"] = draw(patches if merge is not False else metadata)
    if draw(st.integers(0, 3)) == 0:
        a["type"] = draw(st.sampled_from(NOUNS))
    vis = draw(visibilities)
    if vis is not None:
        a["visibility"] = vis
    choice = draw(st.integers(0, 3))
    if choice == 1:
        a["vector"] = vector(draw(st.integers(1, 4)))
    elif choice == 2:
        a["vector"] = None  # an explicit null drops the vector
    return a


@st.composite
def relate_args(draw, key: st.SearchStrategy[str] = keys) -> dict[str, Any]:
    a: dict[str, Any] = {"from": draw(key), "to": draw(key), "type": draw(st.sampled_from(VERBS))}
    sub = draw(st.sampled_from(SUBTYPES))
    if sub is not None:
        a["subtype"] = sub
    if draw(st.booleans()):
        a["metadata"] = draw(metadata)
    vis = draw(visibilities)
    if vis is not None:
        a["visibility"] = vis
    if draw(st.integers(0, 4)) == 0:
        a["bidirectional"] = True
    return a


@st.composite
def unrelate_by_identity_args(draw, key: st.SearchStrategy[str] = keys) -> dict[str, Any]:
    a: dict[str, Any] = {"from": draw(key), "to": draw(key), "type": draw(st.sampled_from(VERBS))}
    sub = draw(st.sampled_from(SUBTYPES))
    if sub is not None:
        a["subtype"] = sub
    return a


# -- the model ------------------------------------------------------------------------------------


class Refused(Exception):
    """What the model says the engine must refuse with."""

    def __init__(self, name: str, index: int | None = None, inner: str | None = None) -> None:
        super().__init__(name)
        self.name, self.index, self.inner = name, index, inner


PENDING = "pending:"


class Model:
    """Rows as the door catalogue defines them, kept in plain dicts.

    ``generation`` is the commit in the making while a door runs; ``denseInt``, ``createdAt`` and
    relation ids the engine mints are learnt from the engine's answers and reads, then held fixed.
    """

    def __init__(self) -> None:
        self.entities: dict[str, dict[str, Any]] = {}  # id -> row
        self.relations: dict[str, dict[str, Any]] = {}  # id (or pending id) -> row
        self.head = 0
        self.generation = 1
        self._pending = 0
        self.bound: dict[str, str] = {}  # pending id -> the id the engine minted

    def copy(self) -> Model:
        return copy.deepcopy(self)

    # the doors ---------------------------------------------------------------------------------

    def add(self, a: dict[str, Any]) -> dict[str, Any]:
        if a["type"] not in NOUN_TYPES:
            raise Refused("InvalidArgumentError")
        eid = ident(a["id"])
        before = self.entities.get(eid)
        if before is not None and not a.get("upsert", False):
            raise Refused("EntityExistsError")
        self.entities[eid] = {
            "key": a["id"],
            "type": a["type"],
            "metadata": dict(a.get("metadata") or {}),
            "visibility": a.get("visibility", "public"),
            "vector": a.get("vector"),
            "generation": self.generation,
            "updatedAt": None,
            "denseInt": before["denseInt"] if before else None,
            "createdAt": before["createdAt"] if before else None,
        }
        return {"id": eid, "key": a["id"]}

    def _entity(self, key: str, name: str = "EntityNotFoundError") -> dict[str, Any]:
        row = self.entities.get(ident(key))
        if row is None:
            raise Refused(name)
        return row

    @staticmethod
    def _merge(old: dict[str, Any], patch: dict[str, Any], merge: bool) -> dict[str, Any]:
        if not merge:
            return dict(patch)  # false replaces the whole bag
        out = dict(old)
        for k, v in patch.items():  # a top-level merge where a key set to null is deleted
            if v is None:
                out.pop(k, None)
            else:
                out[k] = v
        return out

    def update(self, a: dict[str, Any]) -> dict[str, Any]:
        row = self._entity(a["id"])
        if "metadata" in a:
            row["metadata"] = self._merge(row["metadata"], a["metadata"], a.get("merge", True))
        if "type" in a:
            row["type"] = a["type"]
        if "visibility" in a:
            row["visibility"] = a["visibility"]
        moved = "vector" in a and a["vector"] != row["vector"]
        if "vector" in a:
            row["vector"] = a["vector"]
        row["generation"], row["updatedAt"] = self.generation, None
        if moved:  # a relation holding its endpoints' mean follows the new vector in the same commit
            for r in self.relations.values():
                if ident(a["id"]) in (r["from"], r["to"]):
                    before = r.get("mean")
                    self._relation_vector(r)
                    if r.get("mean") != before:
                        r["generation"], r["updatedAt"] = self.generation, None
        return {"id": ident(a["id"])}

    def remove(self, a: dict[str, Any]) -> dict[str, Any]:
        self._entity(a["id"])
        eid = ident(a["id"])
        touching = [rid for rid, r in self.relations.items() if eid in (r["from"], r["to"])]
        for rid in touching:
            del self.relations[rid]
        del self.entities[eid]
        return {"id": eid, "removedRelations": len(touching)}

    def identity(self, from_id: str, to_id: str, verb: str, sub: str | None) -> str | None:
        for rid, r in self.relations.items():
            if (r["from"], r["to"], r["type"], r["subtype"]) == (from_id, to_id, verb, sub):
                return rid
        return None

    def _relation_vector(self, row: dict[str, Any]) -> None:
        """The mean of the endpoints' vectors when both have one (the model never gives relation data)."""
        a, b = self.entities.get(row["from"]), self.entities.get(row["to"])
        row["hasVector"] = bool(a and b and a["vector"] is not None and b["vector"] is not None)
        # the mean itself, as the engine stores it: only an update re-derives it (an upserting add does not)
        row["mean"] = [(x + y) / 2 for x, y in zip(a["vector"], b["vector"])] if row["hasVector"] else None

    def _put_relation(self, from_id: str, to_id: str, verb: str, sub: str | None, a: dict[str, Any]) -> dict[str, Any]:
        rid = self.identity(from_id, to_id, verb, sub)
        existed = rid is not None
        if existed:
            row = self.relations[rid]
        else:
            self._pending += 1
            rid = f"{PENDING}{self._pending}"
            row = self.relations[rid] = {
                "from": from_id,
                "to": to_id,
                "type": verb,
                "subtype": sub,
                "metadata": {},
                "visibility": "public",
                "denseInt": None,
                "createdAt": None,
            }
        if "metadata" in a:
            row["metadata"] = dict(a["metadata"])
        if "visibility" in a:
            row["visibility"] = a["visibility"]
        self._relation_vector(row)
        row["generation"], row["updatedAt"] = self.generation, None
        return {"id": rid, "existed": existed}

    def relate(self, a: dict[str, Any]) -> dict[str, Any]:
        self._entity(a["from"])
        self._entity(a["to"])
        f, t = ident(a["from"]), ident(a["to"])
        answer = self._put_relation(f, t, a.get("type", "relatedTo"), a.get("subtype"), a)
        if a.get("bidirectional") and f != t:
            answer["reverseId"] = self._put_relation(t, f, a.get("type", "relatedTo"), a.get("subtype"), a)["id"]
        return answer

    def update_relation(self, a: dict[str, Any]) -> dict[str, Any]:
        row = self.relations.get(a["id"])
        if row is None:
            raise Refused("RelationNotFoundError")
        if "subtype" in a:
            other = self.identity(row["from"], row["to"], row["type"], a["subtype"])
            if other is not None and other != a["id"]:
                raise Refused("InvalidArgumentError")  # identity-taken
            row["subtype"] = a["subtype"]
        if "metadata" in a:
            row["metadata"] = self._merge(row["metadata"], a["metadata"], a.get("merge", True))
        self._relation_vector(row)
        row["generation"], row["updatedAt"] = self.generation, None
        return {"id": a["id"]}

    def unrelate(self, a: dict[str, Any]) -> dict[str, Any]:
        if "id" in a:
            rid = a["id"] if a["id"] in self.relations else None
        else:
            rid = self.identity(ident(a["from"]), ident(a["to"]), a["type"], a.get("subtype"))
        if rid is None:
            raise Refused("RelationNotFoundError")
        del self.relations[rid]
        return {"removed": 1, "ids": [rid]}

    def clear(self, a: dict[str, Any], name: str) -> dict[str, Any]:
        if a["confirm"] != name:
            raise Refused("InvalidArgumentError")
        answer = {"removedEntities": len(self.entities), "removedRelations": len(self.relations)}
        self.entities.clear()
        self.relations.clear()
        return answer

    TX = {
        "add": add,
        "update": update,
        "remove": remove,
        "relate": relate,
        "updateRelation": update_relation,
        "unrelate": unrelate,
    }

    # after the commit -------------------------------------------------------------------------

    def bind(self, mine: Any, theirs: Any) -> None:
        """Learn the ids the engine minted for the model's pending relations; check the rest of the answer."""
        if isinstance(mine, list):  # transact: each op's own answer
            assert len(theirs["receipt"]["results"]) == len(mine)
            for one, other in zip(mine, theirs["receipt"]["results"]):
                self.bind(one, other)
            return
        for field in ("id", "reverseId"):
            assert (field in mine) == (field in theirs), (field, mine, theirs)
            if field in mine:
                self._same(mine[field], theirs[field])
        if "ids" in mine:
            assert len(theirs["ids"]) == len(mine["ids"]), (mine, theirs)
            for one, other in zip(mine["ids"], theirs["ids"]):
                self._same(one, other)
        for field in ("existed", "removedRelations", "removed", "key", "removedEntities"):
            if field in mine:
                assert theirs[field] == mine[field], (field, mine, theirs)

    def _same(self, value: str, real: str) -> None:
        if not value.startswith(PENDING):
            assert real == value, (value, real)
        elif value in self.bound:
            assert real == self.bound[value], (value, real, self.bound[value])
        else:
            self.bound[value] = real
            if value in self.relations:
                self.relations[real] = self.relations.pop(value)

    def stamp(self, generation: int, timestamp: int) -> None:
        for row in list(self.entities.values()) + list(self.relations.values()):
            if row["generation"] == generation:
                row["updatedAt"] = timestamp
                if row["createdAt"] is None:
                    row["createdAt"] = timestamp

    # what reads must answer ---------------------------------------------------------------------

    def counts(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "entities": 0,
            "entitiesAllTiers": 0,
            "relationships": 0,
            "relationshipsAllTiers": 0,
            "vectoredEntities": 0,
            "byType": {},
            "byTypeAllTiers": {},
            "byRelationType": {},
            "byRelationTypeAllTiers": {},
        }

        def bump(table: str, key: str) -> None:
            out[table][key] = out[table].get(key, 0) + 1

        for e in self.entities.values():
            out["entitiesAllTiers"] += 1
            bump("byTypeAllTiers", e["type"])
            if e["visibility"] == "public":
                out["entities"] += 1
                bump("byType", e["type"])
            if e["vector"] is not None:
                out["vectoredEntities"] += 1
        for r in self.relations.values():
            out["relationshipsAllTiers"] += 1
            bump("byRelationTypeAllTiers", r["type"])
            if r["visibility"] == "public":
                out["relationships"] += 1
                bump("byRelationType", r["type"])
        return out

    def view(self) -> tuple[dict[str, tuple], dict[str, tuple]]:
        """What a read at this generation must see, for the history check."""
        ents = {
            eid: (e["type"], e["metadata"], e["visibility"], e["vector"] is not None, e["generation"])
            for eid, e in self.entities.items()
        }
        rels = {
            rid: (r["from"], r["to"], r["type"], r["subtype"], r["visibility"], r["metadata"], r["generation"])
            for rid, r in self.relations.items()
        }
        return copy.deepcopy(ents), copy.deepcopy(rels)


# -- reading the store's rows directly ---------------------------------------------------------------


def relation_rows(brain: Brain, generation: int) -> dict[str, dict[str, Any]]:
    """Every live relation row at ``generation``, by id, straight from the ``r`` keys."""
    out = {}
    for key, value in brain.at(generation).scan(K.RELATION, b"s"):
        row = msgpack.unpackb(value, raw=False)
        assert K.id_of(key) == row["id"]
        out[row["id"]] = row
    return out


def entity_view(brain: Brain, generation: int) -> dict[str, tuple]:
    out = {}
    for key, value in brain.at(generation).scan(K.ENTITY, b"f"):
        e = msgpack.unpackb(value, raw=False)
        out[K.id_of(key)] = (e["type"], e["metadata"], e["visibility"], e["hasVector"], e["generation"])
    return out


# -- the machine ----------------------------------------------------------------------------------


class BrainMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="brainy-model-"))
        self.path = self.dir / "brain"
        init_store(self.path)
        self.brain = self._open()
        self.model = Model()
        self.seen_dense: set[int] = set()
        self.history: dict[int, tuple[dict, dict]] = {0: ({}, {})}

    def _open(self) -> Brain:
        brain = Brain.open(self.path, flush_bytes=FLUSH_BYTES, compact_at=COMPACT_AT)
        assert brain.role == "writer"
        return brain

    def teardown(self) -> None:
        try:
            self.brain.close()
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)

    # one write to both ----------------------------------------------------------------------------

    def _write(
        self, door: str, args: Any, simulate: Callable[[Model], Any], commits: Callable[[Any], bool] = lambda _: True
    ) -> dict[str, Any] | None:
        """Run ``simulate`` on a copy of the model and ``door`` on the store; they must agree.

        A refusal writes nothing and leaves ``head`` where it was; a commit moves it by exactly one.
        """
        before = self.brain.head
        assert before == self.model.head
        trial = self.model.copy()
        trial.generation = before + 1
        expected: Refused | None = None
        mine = None
        try:
            mine = simulate(trial)
        except Refused as exc:
            expected = exc
        try:
            answer = self.brain.write(door, copy.deepcopy(args))
        except R.Refusal as exc:
            assert expected is not None, f"{door} refused {exc!r}; the model accepts it: {args!r}"
            assert exc.name == expected.name, (exc.name, expected.name, exc)
            if expected.index is not None:
                assert exc.fields["index"] == expected.index, (exc.fields, expected.index)
                assert exc.fields["error"]["name"] == expected.inner, (exc.fields, expected.inner)
            assert self.brain.head == before, "a refused write moved the head"
            event(f"{door}: refused {exc.name}" + (f" ({expected.inner})" if expected.inner else ""))
            return None
        assert expected is None, f"{door} answered {answer!r}; the model refuses {expected.name}: {args!r}"
        if not commits(mine):
            assert answer["generation"] == before == self.brain.head, "a write with nothing to commit moved the head"
            event(f"{door}: nothing to commit")
            return answer
        assert answer["generation"] == before + 1 == self.brain.head, (answer["generation"], before)
        trial.head = before + 1
        self.model = trial
        event(f"{door}: committed")
        trial.bind(mine, answer)
        trial.stamp(before + 1, answer["timestamp"])
        self.history[before + 1] = trial.view()
        return answer

    # entity doors ---------------------------------------------------------------------------------

    def _keys(self, present: bool) -> st.SearchStrategy[str]:
        """Any key, but three times as likely one that is (or is not) present, so most writes land."""
        pool = [k for k in KEYS if (IDS[k] in self.model.entities) == present]
        return st.sampled_from(pool * 3 + KEYS)

    @rule(data=st.data())
    def add(self, data: st.DataObject) -> None:
        """add stores a new row; an existing key refuses EntityExistsError unless upsert replaces it."""
        a = data.draw(add_args(self._keys(present=False)))
        self._write("add", a, lambda m: m.add(a))

    @rule(key=keys, data=st.data())
    def add_existing(self, key: str, data: st.DataObject) -> None:
        """add of a key that is present refuses EntityExistsError and changes nothing."""
        if IDS[key] not in self.model.entities:
            self._write("add", {"type": "thing", "id": key}, lambda m: m.add({"type": "thing", "id": key}))
        a = data.draw(add_args())
        a["id"] = key
        a.pop("upsert", None)
        assert self._write("add", a, lambda m: m.add(a)) is None

    @rule(data=st.data())
    def upsert(self, data: st.DataObject) -> None:
        """add with upsert replaces a present row whole (keeping its denseInt and createdAt) or adds it."""
        a = data.draw(add_args(self._keys(present=True)))
        a["upsert"] = True
        self._write("add", a, lambda m: m.add(a))

    @rule(data=st.data())
    def update(self, data: st.DataObject) -> None:
        """update merges metadata (a null deletes the key) or replaces the bag; an absent row refuses."""
        a = data.draw(update_args(self._keys(present=True)))
        self._write("update", a, lambda m: m.update(a))

    @rule(data=st.data())
    def remove(self, data: st.DataObject) -> None:
        """remove deletes the row and every relation touching it, in one commit."""
        key = data.draw(self._keys(present=True))
        self._write("remove", {"id": key}, lambda m: m.remove({"id": key}))

    # relation doors -------------------------------------------------------------------------------

    @rule(data=st.data())
    def relate(self, data: st.DataObject) -> None:
        """relate adds a relation, or updates in place the one with the same (from, to, type, subtype)."""
        a = data.draw(relate_args(self._keys(present=True)))
        self._write("relate", a, lambda m: m.relate(a))

    @precondition(lambda self: self.model.relations)
    @rule(data=st.data())
    def relate_again(self, data: st.DataObject) -> None:
        """relate of an identity that exists answers existed and the same id, adding no row."""
        rid = data.draw(st.sampled_from(sorted(self.model.relations)))
        r = self.model.relations[rid]
        key = {e: self.model.entities[e]["key"] for e in (r["from"], r["to"])}
        a: dict[str, Any] = {
            "from": key[r["from"]],
            "to": key[r["to"]],
            "type": r["type"],
            "metadata": data.draw(metadata),
        }
        if r["subtype"] is not None:
            a["subtype"] = r["subtype"]
        answer = self._write("relate", a, lambda m: m.relate(a))
        assert answer is not None and answer["existed"] is True and answer["id"] == rid

    @rule(data=st.data())
    def unrelate_by_id(self, data: st.DataObject) -> None:
        """unrelate by id removes that relation; an id that names none refuses RelationNotFoundError."""
        known = sorted(self.model.relations)
        rid = data.draw(st.sampled_from(known) if known and data.draw(st.integers(0, 4)) else st.just(K.uuid7()))
        self._write("unrelate", {"id": rid}, lambda m: m.unrelate({"id": rid}))

    @rule(data=st.data())
    def unrelate_by_identity(self, data: st.DataObject) -> None:
        """unrelate by (from, to, type, subtype) removes the relation holding that identity."""
        a = data.draw(unrelate_by_identity_args(self._keys(present=True)))
        self._write("unrelate", a, lambda m: m.unrelate(a))

    @precondition(lambda self: self.model.relations)
    @rule(data=st.data())
    def update_relation(self, data: st.DataObject) -> None:
        """updateRelation changes metadata or subtype; a subtype another relation holds refuses."""
        a = {"id": data.draw(st.sampled_from(sorted(self.model.relations)))}
        if data.draw(st.booleans()):
            a["metadata"] = data.draw(patches)
        if data.draw(st.booleans()):
            a["subtype"] = data.draw(st.sampled_from(SUBTYPES))
        self._write("updateRelation", a, lambda m: m.update_relation(a))

    # batches ----------------------------------------------------------------------------------------

    @rule(data=st.data(), bad_at=st.one_of(st.none(), st.integers(0, 4)), keep_going=st.booleans())
    def add_many(self, data: st.DataObject, bad_at: int | None, keep_going: bool) -> None:
        """addMany is one commit. Without continueOnError the first bad item refuses it all with
        TransactionAbortedError {index}; with it, bad items are listed in failed and the rest commit."""
        items = data.draw(st.lists(add_args(self._keys(present=False)), min_size=1, max_size=4))
        if bad_at is not None:
            items.insert(min(bad_at, len(items)), {"type": BAD_TYPE, "id": KEYS[0]})

        def simulate(m: Model) -> dict[str, Any]:
            failed, ids = [], []
            for i, item in enumerate(items):
                saved = m.copy()
                try:
                    ids.append(m.add(item)["id"])
                except Refused as exc:
                    m.__dict__.update(saved.__dict__)  # the item's savepoint is rolled back
                    if not keep_going:
                        raise Refused("TransactionAbortedError", index=i, inner=exc.name) from None
                    failed.append((i, exc.name))
            return {"ids": ids, "failed": failed}

        holder: dict[str, Any] = {}

        def run(m: Model) -> dict[str, Any]:
            holder["mine"] = simulate(m)
            return holder["mine"]

        answer = self._write(
            "addMany", {"items": items, "continueOnError": keep_going}, run, commits=lambda mine: bool(mine["ids"])
        )
        if answer is not None:
            assert [(f["index"], f["error"]["name"]) for f in answer["failed"]] == holder["mine"]["failed"]

    # transactions -------------------------------------------------------------------------------------

    def _tx_op(self, data: st.DataObject) -> dict[str, Any]:
        door = data.draw(
            st.sampled_from(["add", "add", "update", "remove", "relate", "relate", "unrelate", "updateRelation"])
        )
        present, absent = self._keys(present=True), self._keys(present=False)
        if door == "add":
            args = data.draw(add_args(absent))
        elif door == "update":
            args = data.draw(update_args(present))
        elif door == "remove":
            args = {"id": data.draw(present)}
        elif door == "relate":
            args = data.draw(relate_args(present))
        else:
            known = sorted(r for r in self.model.relations)
            if door == "unrelate" and (not known or data.draw(st.booleans())):
                args = data.draw(unrelate_by_identity_args(present))
            else:
                args = {"id": data.draw(st.sampled_from(known)) if known else K.uuid7()}
                if door == "updateRelation":
                    args["metadata"] = data.draw(patches)
        return {"door": door, "args": args}

    def _transact(self, ops: list[dict[str, Any]]) -> dict[str, Any] | None:
        def simulate(m: Model) -> list[Any]:
            results = []
            for i, op in enumerate(ops):
                door = Model.TX.get(op["door"])
                try:
                    if door is None:
                        raise Refused("InvalidArgumentError")
                    results.append(door(m, op["args"]))
                except Refused as exc:
                    raise Refused("TransactionAbortedError", index=i, inner=exc.name) from None
            return results

        answer = self._write("transact", {"ops": ops}, simulate)
        if answer is not None:
            assert answer["receipt"]["ops"] == len(ops)
            assert len(answer["receipt"]["digest"]) == 64
        return answer

    @rule(data=st.data(), n=st.integers(1, 5))
    def transact(self, data: st.DataObject, n: int) -> None:
        """transact runs its ops in order, each seeing the ones before, as one generation or not at all."""
        self._transact([self._tx_op(data) for _ in range(n)])

    @rule(data=st.data(), n=st.integers(1, 4), bad=st.sampled_from(["type", "door", "missing"]))
    def transact_with_bad_op(self, data: st.DataObject, n: int, bad: str) -> None:
        """A bad op in the middle of a transact refuses the whole call: nothing is written."""
        ops = [self._tx_op(data) for _ in range(n)]
        bad_op = {
            "type": {"door": "add", "args": {"type": BAD_TYPE, "id": KEYS[1]}},
            "door": {"door": "frobnicate", "args": {}},
            "missing": {"door": "update", "args": {"id": "never-added"}},
        }[bad]
        ops.insert(data.draw(st.integers(1, len(ops))), bad_op)
        assert self._transact(ops) is None

    # clear ----------------------------------------------------------------------------------------------

    @rule(right=st.booleans())
    def clear(self, right: bool) -> None:
        """clear with the brain's name removes every row in one commit; another name refuses."""
        a = {"confirm": self.brain.name if right else self.brain.name + "-not"}
        self._write(
            "clear",
            a,
            lambda m: m.clear(a, self.brain.name),
            commits=lambda mine: bool(mine["removedEntities"] or mine["removedRelations"]),
        )

    # storage mechanics ----------------------------------------------------------------------------------

    @rule()
    def flush(self) -> None:
        """A flush moves the memtable into a table; no read changes."""
        self.brain.flush()

    @rule()
    def compact(self) -> None:
        """A compaction merges the tables into one, keeping every version; no read changes."""
        self.brain.compact()

    @rule()
    def reopen(self) -> None:
        """A clean close and reopen replays to the same head, with the same rows and counts."""
        closed = self.brain.close()
        assert closed["cleanCloseRecorded"] and closed["leaseReleased"]
        self.brain = self._open()
        assert self.brain.head == self.model.head

    @rule()
    def attach(self) -> None:
        """A read-only attach beside the writer sees the writer's head and the same rows."""
        reader = Brain.attach(self.path)
        try:
            assert reader.head == self.brain.head
            assert entity_view(reader, reader.head) == entity_view(self.brain, self.brain.head)
            assert relation_rows(reader, reader.head) == relation_rows(self.brain, self.brain.head)
            assert reader.counts()["generation"] == reader.head
        finally:
            reader.close()

    @rule(data=st.data())
    def read_the_past(self, data: st.DataObject) -> None:
        """A read pinned at a past generation sees the rows exactly as that commit left them."""
        g = data.draw(st.integers(0, self.model.head))
        ents, rels = self.history[g]
        assert self.brain.generation(g)["generation"] == g
        assert entity_view(self.brain, g) == ents, g
        for key in KEYS:  # a point read too, which walks a table's blocks rather than scanning them
            raw = self.brain.at(g).lookup(K.entity_key(IDS[key]))
            e = msgpack.unpackb(raw, raw=False) if raw else None
            assert (e and (e["type"], e["metadata"], e["visibility"], e["hasVector"], e["generation"])) == ents.get(
                IDS[key]
            ), (g, key)
        got = {
            rid: (r["from"], r["to"], r["type"], r.get("subtype"), r["visibility"], r["metadata"], r["generation"])
            for rid, r in relation_rows(self.brain, g).items()
        }
        assert got == rels, g

    # invariants: every read agrees with the model ---------------------------------------------------------

    @invariant()
    def head_is_the_models(self) -> None:
        """head is the number of committed writes; the background job has not failed."""
        assert self.brain.head == self.model.head
        assert self.brain.maintenance.error is None
        event(f"tables at some step: {min(len(self.brain.sources.tables), 3)}")
        if self.model.head >= 30:
            event("30+ commits")

    @invariant()
    def gets_agree(self) -> None:
        """get and batchGet of every key say present/absent, type, metadata, visibility and vector
        as the model does; generation is the commit that wrote the row, denseInt and createdAt never change,
        and a new row's denseInt was never used before."""
        batch = self.brain.batchGet({"ids": KEYS, "includeVector": True})
        assert batch["generation"] == self.model.head
        for key, via_batch in zip(KEYS, batch["entities"]):
            got = self.brain.get(key, includeVector=True)
            assert got["generation"] == self.model.head
            e = got["entity"]
            assert e == via_batch
            want = self.model.entities.get(IDS[key])
            if want is None:
                assert e is None, (key, e)
                assert key in batch["missing"]
                continue
            assert e is not None, key
            assert (e["id"], e["key"], e["type"], e["metadata"], e["visibility"]) == (
                IDS[key],
                key,
                want["type"],
                want["metadata"],
                want["visibility"],
            ), (e, want)
            assert e["hasVector"] is (want["vector"] is not None)
            assert e.get("vector") == want["vector"]
            assert e["generation"] == want["generation"]
            assert (e["createdAt"], e["updatedAt"]) == (want["createdAt"], want["updatedAt"])
            self._dense(want, e)

    def _dense(self, want: dict[str, Any], row: dict[str, Any]) -> None:
        if want["denseInt"] is None:
            assert row["denseInt"] not in self.seen_dense, f"denseInt {row['denseInt']} reused"
            self.seen_dense.add(row["denseInt"])
            want["denseInt"] = row["denseInt"]
        assert row["denseInt"] == want["denseInt"], "a row's denseInt changed"

    @invariant()
    def relations_agree(self) -> None:
        """The relation rows are the model's, and the adjacency and identity keys are exactly the ones
        those rows derive (one relation per (from, to, type, subtype))."""
        head = self.brain.head
        got = relation_rows(self.brain, head)
        assert set(got) == set(self.model.relations), (sorted(got), sorted(self.model.relations))
        adjacency: set[tuple[bytes, int]] = set()
        identity: dict[bytes, str] = {}
        for rid, want in self.model.relations.items():
            r = got[rid]
            assert (r["from"], r["to"], r["type"], r.get("subtype"), r["visibility"], r["metadata"]) == (
                want["from"],
                want["to"],
                want["type"],
                want["subtype"],
                want["visibility"],
                want["metadata"],
            ), (r, want)
            assert r["hasVector"] is want["hasVector"]
            assert r["generation"] == want["generation"]
            assert (r["createdAt"], r["updatedAt"]) == (want["createdAt"], want["updatedAt"])
            self._dense(want, r)
            if r["from"] == r["to"]:
                adjacency.add((K.adjacency_key(r["from"], rid), K.OUT | K.IN))
            else:
                adjacency.add((K.adjacency_key(r["from"], rid), K.OUT))
                adjacency.add((K.adjacency_key(r["to"], rid), K.IN))
            identity[K.identity_key(r["from"], r["to"], r["type"], r.get("subtype"))] = rid
        assert {(k, msgpack.unpackb(v)) for k, v in self.brain.at(head).scan(K.ADJACENCY, b"b")} == adjacency
        assert {k: msgpack.unpackb(v) for k, v in self.brain.at(head).scan(K.IDENTITY, b"r")} == identity
        assert set(entity_view(self.brain, head)) == set(self.model.entities)

    @invariant()
    def counts_agree(self) -> None:
        """counts() is the census of the model's rows, public and across every tier."""
        got = self.brain.counts()
        want = self.model.counts()
        assert got["generation"] == self.model.head
        assert {k: got[k] for k in want} == want, (got, want)


BrainMachine.TestCase.settings = settings(
    max_examples=120,
    stateful_step_count=60,
    deadline=None,  # 200 took 44-68 s of the 10-minute suite
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)


class TestModel(BrainMachine.TestCase):
    """Random write sequences, interleaved with flush, compact and reopen: every read agrees with the model."""
