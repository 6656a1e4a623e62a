"""The write doors (door catalogue 5.2): what each writes, what each refuses, and that a refusal writes nothing."""

from __future__ import annotations

import pytest
from helpers import new_store

from brainy.contract import refusals as R
from brainy.engine import Brain

VEC = [0.5] * 384


@pytest.fixture
def brain(tmp_path):
    b = Brain.open(new_store(tmp_path), name="test")
    yield b
    b.close()


def refused(brain, cls, door, args, **fields):
    """Call a write door, expect the refusal, and check nothing was written."""
    head = brain.head
    with pytest.raises(cls) as exc:
        brain.write(door, args)
    for key, value in fields.items():
        assert exc.value.fields[key] == value, (key, exc.value.fields)
    assert brain.head == head
    return exc.value


def test_add_mints_a_uuid7_and_stamps_the_row(brain):
    """add mints a UUIDv7 id, sets timestamps, generation and a dense int, and embeds its data; with
    nothing to embed it says why (the no-model path: tests/test_embedder.py)."""
    a = brain.add({"type": "concept", "data": "hello", "metadata": {"tags": ["x"]}}, caller="person:ada")
    assert a["id"][14] == "7" and a["embedded"] is True and "reason" not in a
    e = brain.get(a["id"])["entity"]
    assert e["generation"] == a["generation"] == 1
    assert e["createdAt"] == e["updatedAt"] == a["timestamp"]
    assert e["createdBy"] == e["updatedBy"] == "person:ada"
    assert e["denseInt"] == 1 and e["hasVector"] is True and e["visibility"] == "public"
    assert "key" not in e
    b = brain.add({"type": "thing"})
    assert b["reason"] == "no-data" and brain.get(b["id"])["entity"]["denseInt"] == 2


def test_natural_key_maps_to_a_stable_id(brain):
    """A non-UUID id is a natural key: kept in key, the id is UUIDv5 of it, and either form reads the row."""
    a = brain.add({"type": "person", "id": "ada"})
    assert a["key"] == "ada"
    assert brain.get("ada")["entity"]["id"] == a["id"] == brain.get(a["id"])["entity"]["id"]
    uid = "0193a0a0-0000-7000-8000-000000000001"
    assert brain.add({"type": "thing", "id": uid.upper()})["id"] == uid


def test_get_remembers_an_ids_row_key_and_never_a_refusal_nor_a_row(brain):
    """get keeps what an id's text resolves to (its row key) and nothing else: a refused id is refused again
    and never kept, both spellings of a UUID read one row, and a write after a get is read by the next get."""
    from brainy.doors import reads

    a = brain.add({"type": "person", "id": "ada", "data": "first"})
    assert brain.get("ada")["entity"]["data"] == "first"
    assert brain.get(a["id"].upper())["entity"]["id"] == a["id"]
    for _ in range(2):
        with pytest.raises(R.InvalidArgumentError):
            brain.get("bad\x01id")
    assert "bad\x01id" not in reads._ROW_KEYS
    brain.update({"id": "ada", "data": "second"})
    assert brain.get("ada")["entity"]["data"] == "second"


def test_vectors_are_kept_as_float32(brain):
    """A vector of 384 numbers is stored and read back; other lengths and zero vectors refuse."""
    a = brain.add({"type": "thing", "vector": VEC})
    got = brain.get(a["id"], includeVector=True)["entity"]
    assert got["hasVector"] and got["vector"] == VEC
    assert "vector" not in brain.get(a["id"])["entity"]
    refused(brain, R.DimensionMismatchError, "add", {"type": "thing", "vector": [1.0] * 3}, expected=384, got=3)
    refused(brain, R.InvalidArgumentError, "add", {"type": "thing", "vector": [0.0] * 384}, reason="zero-vector")


@pytest.mark.parametrize(
    "args, field, reason",
    [
        ({}, "type", "missing"),
        ({"type": "wizard"}, "type", "unknown-type"),
        ({"type": "thing", "metadata": []}, "metadata", "wrong-type"),
        ({"type": "thing", "metadata": {"type": 1}}, "metadata.type", "reserved-field"),
        ({"type": "thing", "subtype": "vfs.file"}, "subtype", "reserved-subtype"),
        ({"type": "thing", "subtype": "Bad Subtype"}, "subtype", "bad-subtype"),
        ({"type": "thing", "visibility": "system"}, "visibility", "bad-visibility"),
        ({"type": "thing", "confidence": 2}, "confidence", "out-of-range"),
        ({"type": "thing", "weight": "heavy"}, "weight", "wrong-type"),
        ({"type": "thing", "id": "x" * 257}, "id", "bad-natural-key"),
        ({"type": "thing", "id": "a\nb"}, "id", "bad-natural-key"),
        ({"type": "thing", "colour": "red"}, "colour", "unknown-argument"),
        ({"type": "thing", "data": 5}, "data", "wrong-type"),
        ({"type": "thing", "metadata": {"x": float("nan")}}, "metadata.x", "wrong-type"),
    ],
)
def test_add_refuses_bad_input_by_name(brain, args, field, reason):
    """Missing fields, wrong types, reserved names: InvalidArgumentError with the field and a reason."""
    refused(brain, R.InvalidArgumentError, "add", args, field=field, reason=reason)


def test_add_existing_refuses_unless_upsert(brain):
    """add of an existing id is EntityExistsError; with upsert it replaces the row, keeping its identity."""
    first = brain.add({"type": "person", "id": "ada", "metadata": {"a": 1}})
    refused(brain, R.EntityExistsError, "add", {"type": "person", "id": "ada"}, id=first["id"])
    brain.add({"type": "agent", "id": "ada", "metadata": {"b": 2}, "upsert": True})
    e = brain.get("ada")["entity"]
    assert e["type"] == "agent" and e["metadata"] == {"b": 2}
    assert e["denseInt"] == 1 and e["createdAt"] == first["timestamp"] and e["generation"] == 2


def test_update_merges_replaces_and_checks_preconditions(brain):
    """update merges metadata (null deletes), replaces with merge false, and honours ifGeneration."""
    brain.add({"type": "thing", "id": "t", "metadata": {"a": 1, "b": 2}})
    brain.update({"id": "t", "metadata": {"b": None, "c": 3}, "subtype": "widget"})
    e = brain.get("t")["entity"]
    assert e["metadata"] == {"a": 1, "c": 3} and e["subtype"] == "widget" and e["generation"] == 2
    brain.update({"id": "t", "metadata": {"z": 0}, "merge": False, "subtype": None})
    e = brain.get("t")["entity"]
    assert e["metadata"] == {"z": 0} and e["subtype"] is None
    refused(
        brain, R.PreconditionFailedError, "update", {"id": "t", "data": "x", "ifGeneration": 1}, expected=1, actual=3
    )
    brain.update({"id": "t", "data": "x", "ifGeneration": 3})
    refused(brain, R.EntityNotFoundError, "update", {"id": "nobody", "data": "x"}, id="nobody")


def test_relate_requires_both_entities(brain):
    """A relation to an entity that does not exist is EntityNotFoundError, naming it; nothing is written."""
    brain.add({"type": "person", "id": "a"})
    refused(brain, R.EntityNotFoundError, "relate", {"from": "a", "to": "ghost", "type": "knows"}, id="ghost")
    refused(brain, R.EntityNotFoundError, "relate", {"from": "ghost", "to": "a", "type": "knows"}, id="ghost")
    refused(
        brain, R.InvalidArgumentError, "relate", {"from": "a", "to": "a", "type": "likesAlot"}, reason="unknown-type"
    )


def test_relate_same_identity_updates_in_place(brain):
    """(from, to, type, subtype) identifies a relation: relating it again updates it, answering existed."""
    brain.add({"type": "person", "id": "a", "vector": VEC})
    brain.add({"type": "person", "id": "b", "vector": [0.25] * 384})
    r1 = brain.relate({"from": "a", "to": "b", "type": "knows", "weight": 0.5})
    assert r1["existed"] is False
    r2 = brain.relate({"from": "a", "to": "b", "type": "knows", "weight": 0.9, "metadata": {"since": 2020}})
    assert r2 == {**r2, "id": r1["id"], "existed": True}
    r3 = brain.relate({"from": "a", "to": "b", "type": "knows", "subtype": "work"})
    assert r3["id"] != r1["id"]
    counts = brain.counts()
    assert counts["relationships"] == 2 and counts["byRelationType"] == {"knows": 2}
    rev = brain.relate({"from": "a", "to": "b", "type": "mentors", "bidirectional": True})
    assert rev["reverseId"] and brain.counts()["relationships"] == 4


def test_update_relation_and_unrelate(brain):
    """updateRelation changes weight/metadata/subtype; unrelate removes by id or by identity."""
    brain.add({"type": "person", "id": "a"})
    brain.add({"type": "person", "id": "b"})
    r = brain.relate({"from": "a", "to": "b", "type": "knows"})
    brain.updateRelation({"id": r["id"], "weight": 0.3, "metadata": {"x": 1}, "subtype": "old"})
    refused(brain, R.RelationNotFoundError, "updateRelation", {"id": "0193a0a0-0000-7000-8000-00000000000f"})
    gone = brain.unrelate({"from": "a", "to": "b", "type": "knows", "subtype": "old"})
    assert gone["removed"] == 1 and gone["ids"] == [r["id"]]
    refused(brain, R.RelationNotFoundError, "unrelate", {"id": r["id"]})
    assert brain.counts()["relationships"] == 0


def test_remove_takes_touching_relations_with_it(brain):
    """remove deletes the entity and every relation touching it, in one commit."""
    for k in "abc":
        brain.add({"type": "person", "id": k})
    brain.relate({"from": "a", "to": "b", "type": "knows"})
    brain.relate({"from": "c", "to": "a", "type": "knows"})
    brain.relate({"from": "b", "to": "c", "type": "knows"})
    brain.relate({"from": "a", "to": "a", "type": "knows"})
    out = brain.remove({"id": "a"})
    assert out["removedRelations"] == 3 and out["generation"] == 8
    assert brain.counts()["relationships"] == 1 and brain.get("a")["entity"] is None
    refused(brain, R.EntityNotFoundError, "remove", {"id": "a"})


def test_batches_are_one_commit_and_all_or_nothing_by_default(brain):
    """addMany is one generation; one bad item aborts the whole call, or is listed with continueOnError."""
    out = brain.addMany({"items": [{"type": "thing", "id": f"t{i}"} for i in range(5)]})
    assert out["generation"] == 1 and len(out["ids"]) == 5 and out["failed"] == []
    exc = refused(
        brain,
        R.TransactionAbortedError,
        "addMany",
        {"items": [{"type": "thing", "id": "n1"}, {"type": "thing", "id": "t0"}]},
        index=1,
    )
    assert exc.fields["error"]["name"] == "EntityExistsError"
    assert brain.get("n1")["entity"] is None
    out = brain.addMany({"items": [{"type": "thing", "id": "n1"}, {"type": "nope"}], "continueOnError": True})
    assert len(out["ids"]) == 1 and out["failed"][0]["index"] == 1
    assert out["failed"][0]["error"]["field"] == "items[1].type"
    out = brain.updateMany({"items": [{"id": "t0", "data": "x"}, {"id": "t1", "data": "y"}]})
    assert out["generation"] == 3
    brain.relateMany({"items": [{"from": "t0", "to": "t1", "type": "precedes"}]})
    out = brain.removeMany({"ids": ["t0", "t1"]})
    assert out["removed"] and out["removedRelations"] == 1
    exc = refused(brain, R.InvalidArgumentError, "removeMany", {"type": "thing", "limit": 1}, reason="over-limit")
    assert exc.fields["matched"] == 4
    assert len(brain.removeMany({"type": "thing", "limit": 10})["removed"]) == 4
    refused(brain, R.NotYetNativeError, "removeMany", {"where": {"a": 1}, "limit": 3}, release="0.3.0")
    refused(brain, R.InvalidArgumentError, "addMany", {"items": []}, reason="out-of-range")


def test_all_failed_batch_commits_nothing(brain):
    """When continueOnError leaves no item standing, no generation is spent."""
    out = brain.addMany({"items": [{"type": "nope"}], "continueOnError": True})
    assert out["ids"] == [] and out["generation"] == 0 and brain.head == 0


def test_transact_is_atomic_and_ops_see_each_other(brain):
    """transact lands every op in one generation, each seeing the ones before; a bad op writes nothing."""
    out = brain.transact(
        {
            "ops": [
                {"door": "add", "args": {"type": "person", "id": "p"}},
                {"door": "add", "args": {"type": "project", "id": "q"}},
                {"door": "relate", "args": {"from": "p", "to": "q", "type": "participatesIn"}},
                {"door": "update", "args": {"id": "p", "metadata": {"role": "lead"}}},
            ]
        }
    )
    assert out["generation"] == 1 and out["receipt"]["ops"] == 4
    assert len(out["receipt"]["results"]) == 4 and len(out["receipt"]["digest"]) == 64
    g = brain.generation(1)
    assert (g["ops"], g["entities"], g["relations"]) == (4, 3, 1)  # the update is a second put of p
    for bad, reason in (
        [{"door": "drop", "args": {}}, "unknown-door"],
        [{"args": {}}, "missing"],
        ["add", "wrong-type"],
    ):
        exc = refused(
            brain,
            R.TransactionAbortedError,
            "transact",
            {"ops": [{"door": "add", "args": {"type": "thing", "id": "z"}}, bad]},
            index=1,
        )
        assert exc.fields["error"]["reason"] == reason
    exc = refused(
        brain,
        R.TransactionAbortedError,
        "transact",
        {
            "ops": [
                {"door": "add", "args": {"type": "thing", "id": "z"}},
                {"door": "relate", "args": {"from": "z", "to": "nobody", "type": "relatedTo"}},
            ]
        },
        index=1,
    )
    assert exc.fields["error"]["name"] == "EntityNotFoundError"
    assert brain.get("z")["entity"] is None


def test_clear_needs_the_brains_name(brain):
    """clear empties every row in one commit, only when confirm names the brain."""
    brain.add({"type": "person", "id": "a"})
    brain.add({"type": "person", "id": "b"})
    brain.relate({"from": "a", "to": "b", "type": "knows"})
    refused(brain, R.InvalidArgumentError, "clear", {"confirm": "other"}, reason="confirm-mismatch")
    out = brain.clear({"confirm": "test"})
    assert out["removedEntities"] == 2 and out["removedRelations"] == 1 and out["generation"] == 4
    c = brain.counts()
    assert c["entities"] == c["relationships"] == 0 and c["byType"] == {}


def test_counts_follow_visibility_and_vectors(brain):
    """counts keeps public and all-tier figures apart, and counts vectored entities."""
    brain.add({"type": "person", "id": "a", "vector": VEC})
    brain.add({"type": "person", "id": "b", "visibility": "internal"})
    c = brain.counts()
    assert (c["entities"], c["entitiesAllTiers"], c["vectoredEntities"]) == (1, 2, 1)
    assert c["byType"] == {"person": 1} and c["byTypeAllTiers"] == {"person": 2}
    assert c["topTypes"] == [{"type": "person", "count": 1}] and c["generation"] == 2
    brain.update({"id": "b", "visibility": "public", "vector": VEC})
    c = brain.counts()
    assert (c["entities"], c["vectoredEntities"]) == (2, 2)


def test_batch_get_keeps_order_and_names_the_missing(brain):
    """batchGet answers in the order asked, null for absent rows, listing them in missing."""
    brain.add({"type": "thing", "id": "a"})
    out = brain.batchGet({"ids": ["a", "nope", "a"]})
    assert [e and e["key"] for e in out["entities"]] == ["a", None, "a"] and out["missing"] == ["nope"]
    with pytest.raises(R.InvalidArgumentError):
        brain.batchGet({"ids": []})


def test_generation_door_and_attribution(brain):
    """generation(n) tells what commit n was: time, ops, author and via; past the head it refuses."""
    brain.add({"type": "thing", "id": "a"}, caller="person:ada", via="service:gateway")
    g = brain.generation(1)
    assert g["author"] == "person:ada" and g["via"] == "service:gateway" and g["entities"] == 1
    assert brain.generation(0)["ops"] == 0
    with pytest.raises(R.GenerationAheadError):
        brain.generation(2)


def test_refusals_carry_their_wire_identity():
    """Every refusal class has its name and status from the contract; unknown fields are a programming error."""
    exc = R.EntityNotFoundError(id="x")
    assert exc.name == "EntityNotFoundError" and exc.status == 404
    assert exc.to_wire() == {"name": "EntityNotFoundError", "message": exc.message, "id": "x"}
    with pytest.raises(TypeError):
        R.EntityNotFoundError(colour="red")
    assert len(R.REGISTRY) == 89 + 2  # the catalogue's, and brainy's two transport refusals


def test_minted_ids_are_uuid7s_whose_bytes_are_their_row_keys():
    """mint_entity mints a version 7, RFC 9562 variant UUID in minting order, its text as uuid.UUID writes it and
    its row key the one entity_key gives that text."""
    import uuid

    from brainy.store import keys as K

    minted = [K.mint_entity() for _ in range(2_000)]
    assert [key for _, key in minted] == sorted(key for _, key in minted) and len(set(minted)) == len(minted)
    for text, key in minted[:200]:
        parsed = uuid.UUID(text)
        assert str(parsed) == text and K.entity_key(text) == key
        assert parsed.version == 7 and parsed.variant == uuid.RFC_4122
    assert K.uuid7() > minted[-1][0]


def test_an_add_without_an_id_reads_no_row_for_it(brain, monkeypatch):
    """An id the rule minted is new: a batch of adds without ids reads no row key, and each row reads back whole;
    an add with an id still reads its row (and refuses one that exists)."""
    from brainy.store import keys as K
    from brainy.store.txn import Txn

    read: list[bytes] = []
    real = Txn.get

    def counting(self, key):
        read.append(key)
        return real(self, key)

    monkeypatch.setattr(Txn, "get", counting)
    items = [{"type": "document", "vector": [0.5 + i] * 384, "metadata": {"n": i}} for i in range(5)]
    out = brain.write("addMany", {"items": items})
    assert len(out["ids"]) == 5 and out["failed"] == []
    assert not [k for k in read if k[:1] in (K.ENTITY, K.ENTITY_VECTOR)]
    for i, id_ in enumerate(out["ids"]):
        entity = brain.get(id_, includeVector=True)["entity"]
        assert entity["metadata"] == {"n": i} and entity["hasVector"] is True and len(entity["vector"]) == 384
    named = brain.add({"type": "thing", "id": "named"})
    assert K.entity_key(named["id"]) in read
    refused(brain, R.EntityExistsError, "add", {"type": "thing", "id": "named"})


def test_an_added_rows_stored_bytes_are_what_rows_pack_makes_of_it(brain):
    """add packs its row with a Packer of its thread's: the bytes stored are rows.pack's of the same row, field
    for field in the order add lays it out, minted or named, with and without an author, after a refused item."""
    from brainy.store import keys as K
    from brainy.store import rows

    items = [
        {"type": "document", "vector": [0.25] * 384, "metadata": {"n": 1, "f": 0.5, "s": "é", "l": [1, None]}},
        {"type": "nope"},
        {"type": "concept", "data": {"k": [True, 2]}, "subtype": "a.b", "confidence": 1},
    ]
    out = brain.write("addMany", {"items": items, "continueOnError": True}, caller="person:ada")
    named = brain.add({"type": "thing", "id": "named", "weight": 0.5})
    assert len(out["ids"]) == 2 and out["failed"][0]["index"] == 1
    for id_ in [*out["ids"], named["id"]]:
        raw = brain.at().lookup(K.entity_key(id_))
        assert raw == rows.pack(rows.unpack(raw))
        assert list(rows.unpack(raw))[:3] == (
            ["id", "key", "type"] if id_ == named["id"] else ["id", "type", "subtype"]
        )


def test_the_memtable_holds_what_a_model_of_its_versions_holds():
    """Memtable.put_many and put (a key written once holds its version as a tuple, again a list) against a dict
    of version lists: every version scanned in key order, newest first; get at every generation answers the newest
    version at or below it; a later put of a key in the same commit replaces its version; size and length agree."""
    import random

    from brainy.store.memtable import Memtable

    rng = random.Random(3)
    mem, model = Memtable(), {}
    size = 0
    for generation in range(1, 40):
        items = [(bytes(rng.randrange(4) for _ in range(3)), bytes([generation]) * rng.randrange(3)) for _ in range(9)]
        if generation % 2:
            mem.put_many(items, generation)
        else:
            for key, value in items:
                mem.put(key, generation, value)
        for key, value in items:
            versions = model.setdefault(key, [])
            if versions and versions[-1][0] == generation:
                versions[-1] = (generation, value)
            else:
                versions.append((generation, value))
            size += len(key) + len(value) + 16
    want = [(key, gen, value) for key in sorted(model) for gen, value in reversed(model[key])]
    assert list(mem.entries()) == want
    assert list(mem.scan(b"\x01", b"\x02\x02")) == [e for e in want if b"\x01" <= e[0] < b"\x02\x02"]
    for key, versions in model.items():
        for generation in range(0, 41):
            below = [v for v in versions if v[0] <= generation]
            assert mem.get(key, generation) == (below[-1] if below else None)
    assert mem.get(b"\xff", 40) is None
    assert (mem.bytes, mem.max_generation, len(mem)) == (size, 39, len(model))


def test_a_memtable_scan_between_puts_sees_every_key_put_before_it():
    """New keys wait to be sorted in until the next scan: a scan after any put, of one key or of a commit's, lists
    every version put so far, keys in order, each key's versions together and newest first."""
    from brainy.store.memtable import Memtable

    mem = Memtable()
    model: dict[bytes, list[int]] = {}
    for generation in range(1, 30):
        keys = [bytes([generation * 7 % 11, i]) for i in range(generation % 4)]
        if generation % 3:
            mem.put_many([(k, b"v") for k in keys], generation)
        else:
            for k in keys:
                mem.put(k, generation, b"v")
        for k in keys:
            model.setdefault(k, []).append(generation)
        want = [(k, g) for k in sorted(model) for g in reversed(model[k])]
        assert [(key, gen) for key, gen, _ in mem.scan(b"", None)] == want
