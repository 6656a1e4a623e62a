"""The dispatcher: every contract door resolves to an engine call or its named refusal, behind one gate."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest
from helpers import new_store

from brainy.auth.principal import Principal
from brainy.contract import doors as D
from brainy.contract import refusals as R
from brainy.host import dispatch as X
from brainy.host.pool import Pool

PERSON = Principal.static_key("person:ada")
SERVICE_KEY = Principal.static_key("service:ops", service_key=True)

# Arguments that make each native door answer on a store holding entities "a" and "b".
SAMPLES = {
    "get": ("a", {}),
    "batchGet": (None, {"ids": ["a", "b"]}),
    "counts": (None, {}),
    "generation": ("1", {}),
    "add": (None, {"type": "thing", "id": "c"}),
    "addMany": (None, {"items": [{"type": "thing", "id": "d"}]}),
    "update": (None, {"id": "a", "metadata": {"x": 1}}),
    "updateMany": (None, {"items": [{"id": "a", "data": "y"}]}),
    "relate": (None, {"from": "a", "to": "b", "type": "knows"}),
    "relateMany": (None, {"items": [{"from": "b", "to": "a", "type": "knows"}]}),
    "updateRelation": (None, {"id": "REL", "weight": 0.5}),
    "unrelate": (None, {"id": "REL"}),
    "transact": (None, {"ops": [{"door": "add", "args": {"type": "thing", "id": "e"}}]}),
    "remove": (None, {"id": "e"}),
    "removeMany": (None, {"ids": ["d"]}),
    "clear": (None, {"confirm": "main"}),
    "embed": (None, {"text": "a"}),
    "embedBatch": (None, {"texts": ["a", "b"]}),
    "similarity": (None, {"a": "a", "b": "b"}),
    "health": (None, {}),
    "init": (None, {}),
    "close": (None, {}),
}


@pytest.fixture
def served(tmp_path):
    pool = Pool({"main": new_store(tmp_path)})
    brain = pool.resolve("main", for_write=True)
    brain.add({"type": "person", "id": "a"})
    brain.add({"type": "person", "id": "b"})
    yield X.Dispatcher(pool), brain
    pool.close_all()


def run(dispatcher, principal, door, brain="main", id=None, document=None):
    return asyncio.run(dispatcher.dispatch(principal, door, brain, id, document))


def test_every_native_door_has_one_registered_function():
    """The door registry and the contract's native doors are the same set, in both directions."""
    assert set(X.REGISTERED) == {d.name for d in D.DOORS if d.native}
    assert set(X.TABLE) == {d.name for d in D.DOORS}


def test_the_registry_refuses_a_contract_it_does_not_match(monkeypatch):
    """A native door without a function, a function without a native door, and a function of the wrong
    shape each fail the join by name."""
    from brainy.doors import registry

    def join_with(doors, extra=None):
        monkeypatch.setattr(registry, "REGISTERED", dict(X.REGISTERED, **(extra or {})))
        with pytest.raises(RuntimeError) as exc:
            registry.join(doors)
        return str(exc.value)

    unregistered = dataclasses.replace(D.BY_NAME["host.move"], name="host.later")
    assert "without a function ['host.later']" in join_with(D.DOORS + (unregistered,))
    stray = registry.Registered("nobody", registry.READ, lambda *a: {})
    assert "not native doors ['nobody']" in join_with(D.DOORS, {"nobody": stray})
    as_read = registry.Registered("add", registry.READ, lambda *a: {})
    assert "wrong shape ['add']" in join_with(D.DOORS, {"add": as_read})


def test_every_door_answers_or_refuses_by_name(served):
    """Each of the 109 doors, called with an empty document, answers a non-empty object or a registered refusal."""
    dispatcher, _ = served
    for door in D.DOORS:
        who = SERVICE_KEY if door.access == "service" else PERSON
        outcome = run(dispatcher, who, door.name, id="a")
        if outcome.ok:
            assert outcome.answer, door.name  # never an empty success
        else:
            assert type(outcome.refusal) is R.REGISTRY[outcome.refusal.name], door.name
            if door.disposition == "notYetNative" and door.rung != "ownerTriple":
                assert outcome.refusal.fields == {"door": door.name, "release": door.release}
            if door.disposition == "inProcessOnly":
                assert outcome.refusal.name == "InProcessOnlyError" and outcome.refusal.fields["instead"]
        assert outcome.ms >= 0 and outcome.body()["_meta"]["ms"] == outcome.ms


def test_every_native_door_answers_through_the_dispatcher(served):
    """Every engine door of the store release reaches the engine through the dispatcher, with its ms."""
    dispatcher, brain = served
    rel = None
    for door, (id_, doc) in SAMPLES.items():
        if rel is not None:
            doc = {k: (rel if v == "REL" else v) for k, v in doc.items()}
        who = SERVICE_KEY if D.BY_NAME[door].access == "service" else PERSON
        outcome = run(dispatcher, who, door, id=id_, document=doc)
        assert outcome.ok, (door, outcome.refusal and outcome.refusal.to_wire())
        assert outcome.answer and outcome.ms > 0
        if door == "relate":
            rel = outcome.answer["id"]
        if D.BY_NAME[door].kind == "write" and door not in ("init", "close"):
            brain.until_visible()  # answered once durable, before the followers (and the head reads see) moved
            assert outcome.answer["generation"] == brain.head
    assert outcome.answer["cleanCloseRecorded"] and outcome.answer["leaseReleased"]  # close ran last
    reopened = dispatcher.brains.resolve("main", for_write=False)
    assert reopened is not brain and reopened.role == "attach"
    assert reopened.counts()["entities"] == 0  # clear ran before the mechanics
    assert reopened.generation(3)["author"] == "person:ada"


def test_gate_order_access_class_first(served):
    """A door of the other access class is refused before reach is asked or the brain looked up."""
    dispatcher, _ = served
    nowhere = Principal.static_key("person:eve", brains=frozenset({"other"}))
    out = run(dispatcher, nowhere, "health", brain="missing")
    assert out.refusal.name == "ForbiddenError" and out.refusal.reason == "access-class"
    out = run(dispatcher, SERVICE_KEY, "get", id="a")
    assert out.refusal.reason == "access-class"


def test_a_key_that_does_not_reach_learns_nothing_about_the_brain(served):
    """Reach is asked before the brain is resolved: an existing and a missing brain refuse alike."""
    dispatcher, _ = served
    nowhere = Principal.static_key("person:eve", brains=frozenset({"other"}))
    a = run(dispatcher, nowhere, "get", brain="main", id="a")
    b = run(dispatcher, nowhere, "get", brain="nosuch", id="a")
    assert a.refusal.to_wire() == b.refusal.to_wire() and a.refusal.reason == "reach"
    everywhere = Principal.static_key("person:ada")
    assert run(dispatcher, everywhere, "get", brain="nosuch", id="a").refusal.name == "NoSuchBrainError"


def test_token_reach_ruling_then_scope(served):
    """A token for another brain is BRAINY_KEY_BRAIN; a ruling door without the owner triple is
    PolicyOwnerScopeRequiredError before scope; a write without write scope is BRAINY_KEY_SCOPE."""
    dispatcher, _ = served
    reader = Principal.token("agent-1", "main", frozenset({"read"}))
    assert (
        run(dispatcher, Principal.token("x", "other", frozenset({"read"})), "get", id="a").refusal.name
        == "BRAINY_KEY_BRAIN"
    )
    assert run(dispatcher, reader, "policy.ratify").refusal.name == "PolicyOwnerScopeRequiredError"
    assert run(dispatcher, PERSON, "policy.ratify").refusal.name == "PolicyOwnerScopeRequiredError"
    out = run(dispatcher, reader, "add", document={"type": "thing"})
    assert out.refusal.name == "BRAINY_KEY_SCOPE" and out.refusal.scope == ["read"]
    assert run(dispatcher, reader, "accords.inbox").ok  # a read: scope passed, then the door
    # accords.decide asks the loose owner rung before the scope: a read token, a person's key, a read/write token
    for who in (reader, PERSON, Principal.token("w", "main", frozenset({"read", "write"}))):
        assert (
            run(dispatcher, who, "accords.decide", document={"mandate": "m"}).refusal.name == "OwnerRungRequiredError"
        )
    owner = Principal.token("o", "main", frozenset({"read", "write", "owner"}))
    # past the gate the door itself answers: its arguments, then its record
    assert run(dispatcher, owner, "policy.ratify").refusal.name == "InvalidArgumentError"
    assert run(dispatcher, owner, "policy.ratify", document={"id": "rule:none"}).refusal.name == "RecordNotFoundError"
    assert run(dispatcher, reader, "get", id="a").ok


def test_service_kind_keys_write_only_with_an_asserted_caller(served):
    """A service-kind key with no caller is refused row writes; with an asserted caller the write is attributed."""
    dispatcher, brain = served
    service = Principal.static_key("service:ingest")
    out = run(dispatcher, service, "add", document={"type": "thing"})
    assert out.refusal.name == "ServiceKeyCannotWriteError" and out.refusal.door == "add"
    assert run(dispatcher, service, "get", id="a").ok
    asserted = dataclasses.replace(service, caller="person:bob", via="service:ingest")
    out = run(dispatcher, asserted, "add", document={"type": "thing", "id": "z"})
    assert out.ok
    row = brain.get("z")["entity"]
    assert row["createdBy"] == "person:bob"
    assert brain.generation(out.answer["generation"])["via"] == "service:ingest"


def test_unknown_doors_and_bad_names_refuse_by_name(served):
    """An unknown door, an illegal brain name and a non-object document each have their refusal."""
    dispatcher, _ = served
    assert run(dispatcher, PERSON, "teleport").refusal.name == "UnknownDoorError"
    for bad in ("..", ".hidden", "a/b", "x" * 65):
        assert run(dispatcher, PERSON, "get", brain=bad, id="a").refusal.name == "BrainNameInvalidError"
    out = run(dispatcher, PERSON, "add", document=["not", "an", "object"])
    assert out.refusal.name == "InvalidArgumentError" and out.status == 400
    out = run(dispatcher, PERSON, "get", id="a", document={"includeVector": "yes"})
    assert out.refusal.name == "InvalidArgumentError"


def test_an_unexpected_fault_is_an_internal_error_with_a_ref(served, monkeypatch, caplog):
    """A fault inside a door answers InternalError carrying a ref that names the logged traceback."""
    dispatcher, _ = served
    from brainy.doors import registry

    monkeypatch.setitem(X.REGISTERED, "counts", registry.Registered("counts", registry.READ, lambda *a: 1 / 0))
    out = run(dispatcher, PERSON, "counts")
    assert out.refusal.name == "InternalError" and out.status == 500
    assert out.refusal.ref in caplog.text and "ZeroDivisionError" in caplog.text


def test_reads_at_the_head_share_one_snapshot_until_a_commit_moves_it(served):
    """A transport's reads at the head share one snapshot while the head stands (none made per request), and
    the first read after a commit stands at the new head: a row written is read, never the row before it."""
    dispatcher, brain = served
    first = brain.wire_head()
    assert first is brain.wire_head() and first.wire and first.generation == brain.head
    before = run(dispatcher, PERSON, "get", id="a")
    assert before.answer["entity"] is not None and before.answer["generation"] == first.generation
    brain.update({"id": "a", "data": "moved"})
    moved = brain.wire_head()
    assert moved is not first and moved.generation == brain.head == first.generation + 1
    after = run(dispatcher, PERSON, "get", id="a")
    assert after.answer["generation"] == moved.generation
    assert after.answer["entity"].msgpack_document()["data"] == "moved"


def test_a_door_in_flight_is_counted_on_the_entry_it_entered(served):
    """The dispatcher counts a door in flight on the pool entry it entered and leaves that same entry, so the
    arbiter never closes a brain under a door; none is counted once the answer is out."""
    dispatcher, _ = served
    entry = dispatcher.brains.enter("main")
    assert entry.in_flight == 1
    dispatcher.brains.left(entry)
    assert run(dispatcher, PERSON, "get", id="a").ok
    assert entry.in_flight == 0


def test_every_read_of_who_is_asking_is_registered_asks():
    """The dispatcher binds who is asking (policy.asking) only around the reads registered ``asks``: a read
    whose function reads the binding and is not registered so would find it unbound (None)."""
    from brainy.doors import registry

    readers = {
        name
        for name, entry in registry.REGISTERED.items()
        if entry.runs == registry.READ and "_ASKING" in entry.fn.__code__.co_names
    }
    readers |= {
        name
        for name, entry in registry.REGISTERED.items()
        if entry.runs == registry.READ and "asked" in entry.fn.__code__.co_names
    }
    assert readers == {name for name, entry in registry.REGISTERED.items() if entry.asks}
    assert readers == {"policy.check", "accords.inbox"}


def test_the_changes_door_is_held_open_past_the_same_gate_and_drained_through_the_pool(served):
    """Dispatcher.hold: the gate a call of the door meets, then the first catch-up; every later drain enters and
    leaves the brain in the pool as a door does, and follows its commits; only a door a server door holds open
    may be held, and only with the held feed's arguments."""
    dispatcher, brain = served
    held = dispatcher.hold(PERSON, "changes", "main", {"since": 0})
    assert [commit[0]["generation"] for commit in held.commits] == [1, 2]
    assert (held.cursor, held.more, held.source, held.limit) == (brain.head, False, "commits", None)
    woken: list[int] = []
    held.listen(lambda: woken.append(1))
    added = brain.add({"type": "person", "id": "c"})
    assert woken and [(frame["generation"], frame["id"]) for commit in held.drain() for frame in commit] == [
        (added["generation"], added["id"])
    ]
    assert dispatcher.brains._entries["main"].in_flight == 0
    held.close()
    brain.add({"type": "person", "id": "d"})
    assert len(woken) == 1  # closed: no longer listening
    with pytest.raises(R.ForbiddenError):
        dispatcher.hold(Principal.static_key("person:ada", frozenset({"other"})), "changes", "main", {})
    with pytest.raises(R.UnknownDoorError):
        dispatcher.hold(PERSON, "find", "main", {})
    with pytest.raises(R.BadQueryParameterError):
        dispatcher.hold(PERSON, "changes", "main", {"types": ["person"]})
    paged = dispatcher.hold(PERSON, "changes", "main", {"since": 0, "limit": 1})
    assert len(paged.commits) == 1 and paged.more and paged.limit == 1


def test_a_call_that_names_no_brain_reaches_the_one_brain_of_its_key(served, tmp_path):
    """DOORS 0.2, one rule on every transport (Pool.only_brain in Dispatcher.run): a key reaching exactly one
    brain here may leave it out; one reaching several is answered brain: required."""
    dispatcher, _ = served
    assert run(dispatcher, PERSON, "counts", brain=None).answer["entities"] == 2
    dispatcher.brains._named["second"] = new_store(tmp_path / "second")
    refused = run(dispatcher, PERSON, "counts", brain=None).refusal
    assert refused is not None and refused.fields == {"field": "brain", "reason": "missing"}
    one = Principal.static_key("person:ada", frozenset({"main"}))
    assert run(dispatcher, one, "counts", brain=None).answer["entities"] == 2
