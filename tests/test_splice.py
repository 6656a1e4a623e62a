"""Pages spliced from bytes (brainy/index/encoded_rows.py, brainy/net/codecs.py): a transport's answer, its
rows encoded once per version and spliced into the envelope, is document for document the answer built
the old way (each row decoded, ``rows.public_view``, the whole answer encoded), in JSON and in
MessagePack, at the head and at a past generation, and never stale across a commit, a flush or a
compaction.

"The old way" is rebuilt here independently of the cache: every row of an answer is read again with
``Snapshot.entity`` / ``versions`` and passed through ``rows.public_view``, then the answer is encoded
whole by the codecs, as before rows came encoded.
"""

from __future__ import annotations

import asyncio
import math
import random
import tempfile
from pathlib import Path
from typing import Any

import msgpack
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from brainy.auth.principal import Principal
from brainy.contract import arguments
from brainy.contract import doors as D
from brainy.contract.encoded import Encoded
from brainy.doors import registry
from brainy.engine import Brain, init_store
from brainy.host import dispatch as X
from brainy.host.pool import Pool
from brainy.index import encoded_rows
from brainy.net import codecs
from brainy.store import keys as K
from brainy.store import rows

WHO = Principal.static_key("person:splice")
RESERVED = rows.RESERVED_METADATA

# every JSON type, unicode included; integers and floats within what a row stores (64-bit, finite)
scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(1 << 63), (1 << 64) - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=12,
)
metadata = st.dictionaries(st.text(min_size=1, max_size=8).filter(lambda k: k not in RESERVED), json_values, max_size=5)
vectors = st.lists(st.floats(-1, 1, allow_nan=False, width=32), min_size=384, max_size=384).filter(
    lambda v: any(x != 0 for x in v)
)
content = st.none() | st.text(max_size=40) | st.dictionaries(st.text(max_size=6), json_values, max_size=3)


@st.composite
def entity(draw: Any, name: str) -> dict[str, Any]:
    item: dict[str, Any] = {
        "type": draw(st.sampled_from(["document", "person", "task", "thing"])),
        "id": name,
        "metadata": draw(metadata),
    }
    data = draw(content)
    if data is not None:
        item["data"] = data
    if draw(st.booleans()):
        item["vector"] = draw(vectors)
    if draw(st.booleans()):
        item["visibility"] = draw(st.sampled_from(["public", "internal"]))
    return item


# one round of writes: adds (new names), updates and removes of what exists
rounds = st.lists(
    st.tuples(st.sampled_from(["add", "add", "update", "remove"]), st.integers(0, 12)), min_size=1, max_size=12
)


def call(snap: Any, door: str, id_: Any = None, **document: Any) -> Any:
    """The door's registered function on ``snap``, its arguments checked as every transport's are."""
    return registry.REGISTERED[door].fn(snap, id_, arguments.check(D.BY_NAME[door], document))


def old_row(snap: Any, entity_id: str, include_vector: bool, include_data: bool) -> Any:
    row = snap.entity(entity_id)
    return None if row is None else rows.public_view(snap.whole(row), include_vector, include_data)


def old_way(
    door: str, answer: dict[str, Any], snap: Any, include_vector: bool = False, include_data: bool = True
) -> dict[str, Any]:
    """The same answer with every row rebuilt as before: decoded whole, then ``rows.public_view``."""
    out = orjson.loads(codecs.to_json(answer))  # a plain copy, its rows replaced below
    if door == "get":
        out["entity"] = (
            old_row(snap, K.resolve(answer_id(answer["entity"]))[0], include_vector, include_data)
            if answer["entity"] is not None
            else None
        )
    elif door == "batchGet":
        out["entities"] = [
            None if e is None else old_row(snap, answer_id(e), include_vector, include_data) for e in answer["entities"]
        ]
    elif door == "find":
        for hit in out["results"]:
            hit["entity"] = old_row(snap, hit["id"], include_vector, include_data)
    elif door == "export":
        out["entities"] = [old_row(snap, answer_id(e), include_vector, True) for e in answer["entities"]]
    elif door == "related":
        out["relations"] = [rows.public_view(snap.relation(r["id"])) for r in out["relations"]]
        out["entities"] = {i: old_row(snap, i, False, True) for i in out.get("entities", {})}
    elif door == "history":
        versions = dict(snap.versions(K.entity_key(answer["id"])))
        for entry in out["versions"]:
            raw = versions[entry["generation"]]
            entry.pop("entity", None)
            if raw:
                entry["entity"] = rows.public_view(rows.unpack(raw))
    return out


def answer_id(entity: Any) -> str:
    return (entity.document() if isinstance(entity, Encoded) else entity)["id"]


def assert_same(
    door: str, snap: Any, answer: dict[str, Any], include_vector: bool = False, include_data: bool = True
) -> None:
    """The spliced answer equals the old way's, document for document, in both encodings."""
    expected = old_way(door, answer, snap.in_process(), include_vector, include_data)
    as_before = orjson.loads(codecs.to_json(expected))
    assert orjson.loads(codecs.to_json(answer)) == as_before
    # MessagePack: the old way's vectors leave as float32s too, so rebuild them as the wire Vector
    expected_mp = (
        old_way(door, answer, snap.in_process(), include_vector, include_data)
        if not include_vector
        else _with_vectors(door, answer, snap.in_process(), include_data)
    )
    assert msgpack.unpackb(codecs.to_msgpack(answer), raw=False) == msgpack.unpackb(
        codecs.to_msgpack(expected_mp), raw=False
    )


def _with_vectors(door: str, answer: dict[str, Any], snap: Any, include_data: bool) -> dict[str, Any]:
    """old_way, but its rows' vectors kept as :class:`~brainy.contract.vectors.Vector` (not a JSON copy)."""
    plain = old_way(door, answer, snap, False, include_data)
    if door == "get" and plain["entity"] is not None:
        plain["entity"] = old_row(snap, plain["entity"]["id"], True, include_data)
    if door == "batchGet":
        plain["entities"] = [
            None if e is None else old_row(snap, e["id"], True, include_data) for e in plain["entities"]
        ]
    if door == "find":
        for hit in plain["results"]:
            hit["entity"] = old_row(snap, hit["id"], True, include_data)
    if door == "export":
        plain["entities"] = [old_row(snap, e["id"], True, True) for e in plain["entities"]]
    return plain


def check_every_page(brain: Brain, snap: Any, names: list[str]) -> None:
    """Every spliced door's answer at ``snap`` against the old way's."""
    wire = snap.for_wire()
    for include_vector, include_data in ((False, True), (True, True), (False, False), (True, False)):
        options = {"includeVector": include_vector, "includeData": include_data}
        for name in names:
            assert_same("get", wire, call(wire, "get", name, **options), include_vector, include_data)
        assert_same("batchGet", wire, call(wire, "batchGet", ids=names, **options), include_vector, include_data)
        assert_same(
            "find", wire, call(wire, "find", limit=1000, visibility="all", **options), include_vector, include_data
        )
    for include_vectors in (False, True):
        page = call(wire, "export", includeVectors=include_vectors, include=["entities"])
        assert_same("export", wire, page, include_vectors)
    for name in names:
        assert_same("history", wire, call(wire, "history", name))
    assert_same("related", wire, call(wire, "related", includeEntities=True))
    for name in names:
        if snap.entity(K.resolve(name)[0]) is not None:
            assert_same("related", wire, call(wire, "related", node=name, includeEntities=True))


@pytest.fixture
def brain(tmp_path):
    init_store(tmp_path / "s")
    handle = Brain.open(tmp_path / "s")
    yield handle
    handle.close()


def apply(brain: Brain, data: Any, plan: list[tuple[str, int]], live: set[str]) -> None:
    for op, n in plan:
        name = f"n{n}"
        if op == "add" and name not in live:
            brain.add(data.draw(entity(name)))
            live.add(name)
        elif op == "update" and name in live:
            item = data.draw(entity(name))
            item.pop("type")
            brain.update(item)
        elif op == "remove" and name in live:
            brain.remove({"id": name})
            live.discard(name)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data(), first=rounds, second=rounds)
def test_spliced_pages_equal_the_old_way_at_the_head_and_in_the_past(data, first, second):
    """Random rows (metadata of every JSON type, unicode, with and without vectors, updated, removed): every
    spliced page equals the old way's, in both encodings, at the head, at a past generation, and right after
    commits that changed rows the cache already holds (a flush between the two rounds: new sources)."""
    with tempfile.TemporaryDirectory() as directory:
        init_store(Path(directory) / "s")
        brain = Brain.open(Path(directory) / "s")
        try:
            _two_rounds(brain, data, first, second)
        finally:
            brain.close()


def _two_rounds(brain: Brain, data: Any, first: list[tuple[str, int]], second: list[tuple[str, int]]) -> None:
    live: set[str] = set()
    names = [f"n{n}" for n in range(13)]
    apply(brain, data, first, live)
    ends = sorted(live)
    for a, b in zip(ends, ends[1:]):  # relations, answered by related, their far ends with them
        brain.relate({"from": a, "to": b, "type": "relatedTo", "metadata": data.draw(metadata)})
    past = brain.head
    check_every_page(brain, brain.at(), names)
    if data.draw(st.booleans()):
        brain.flush()
    apply(brain, data, [("update", int(name[1:])) for name in sorted(live)] + second, live)
    check_every_page(brain, brain.at(), names)  # the rows cached above, every one changed since, some removed
    check_every_page(brain, brain.at(past), names)  # that generation's versions, not the head's


def test_a_cached_row_is_never_served_after_a_commit_changes_it(brain):
    """The law: nothing cached across a commit serves a stale row. A row answered (and cached) over the wire,
    then updated, then removed, then added again answers each time as it now stands; a flush and a
    compaction between (new sources) change nothing; the past generation still answers its own version."""
    wire = lambda: brain.at().for_wire()  # noqa: E731
    brain.add({"type": "person", "id": "ada", "metadata": {"n": 1}, "vector": [0.5] * 384})
    first = brain.head

    def got(**options: Any) -> Any:
        return orjson.loads(codecs.to_json(call(wire(), "get", "ada", **options)))["entity"]

    assert got()["metadata"] == {"n": 1} and got()["metadata"] == {"n": 1}  # the second from the cache
    for n in range(2, 6):
        brain.update({"id": "ada", "metadata": {"n": n}})
        assert got()["metadata"] == {"n": n}
        page = orjson.loads(codecs.to_json(call(wire(), "find", limit=10)))
        assert [h["entity"]["metadata"] for h in page["results"]] == [{"n": n}]
        if n == 3:
            brain.flush()
        if n == 4:
            brain.compact()
    brain.remove({"id": "ada"})
    assert got() is None
    assert orjson.loads(codecs.to_json(call(wire(), "find", limit=10)))["results"] == []
    brain.add({"type": "person", "id": "ada", "metadata": {"again": True}})
    assert got()["metadata"] == {"again": True} and got(includeVector=True).get("vector") is None
    old = orjson.loads(codecs.to_json(call(brain.at(first).for_wire(), "get", "ada", includeVector=True)))
    assert old["entity"]["metadata"] == {"n": 1} and len(old["entity"]["vector"]) == 384


def test_two_brains_with_the_same_ids_never_answer_for_each_other(tmp_path):
    """The cache is one per process: two stores holding the same natural key at the same generation (same id,
    same generation) each answer their own row."""
    handles = []
    for name in ("one", "two"):
        init_store(tmp_path / name)
        handles.append(Brain.open(tmp_path / name))
    try:
        for handle, word in zip(handles, ("first", "second")):
            handle.add({"type": "person", "id": "ada", "data": word})
        for _ in range(2):
            answers = [
                orjson.loads(codecs.to_json(call(h.at().for_wire(), "get", "ada")))["entity"]["data"] for h in handles
            ]
            assert answers == ["first", "second"]
    finally:
        for handle in handles:
            handle.close()


def test_a_get_without_its_vector_never_decodes_it(brain, monkeypatch):
    """A get that does not answer the vector neither decodes the stored row whole nor builds the vector: the
    map's entries are skipped, and only the answered ones decoded."""
    brain.add({"type": "person", "id": "ada", "data": "x", "vector": [0.25] * 384})
    encoded_rows.CACHE.clear()
    decoded: list[int] = []
    real = msgpack.unpackb

    def watched(data: Any, *args: Any, **kwargs: Any) -> Any:
        decoded.append(len(data))
        return real(data, *args, **kwargs)

    monkeypatch.setattr(encoded_rows.msgpack, "unpackb", watched)
    monkeypatch.setattr(rows, "unpack", lambda raw: pytest.fail("the whole row was decoded"))
    for snap in (brain.at().for_wire(), brain.at()):
        answer = call(snap, "get", "ada")
        document = answer["entity"].document() if isinstance(answer["entity"], Encoded) else answer["entity"]
        assert document["data"] == "x" and "vector" not in document
    assert decoded and max(decoded) < 1536  # what was decoded never held the vector's 1,536 bytes


def test_the_cache_keeps_to_its_byte_budget():
    """Bounded: entries leave least recently used first once their bytes pass the budget."""
    cache = encoded_rows.RowCache(20_000)
    rnd = random.Random(7)
    made = []
    for i in range(200):
        raw = rows.pack({"id": f"{i}", "type": "thing", "data": "w" * rnd.randint(10, 400), "generation": i})
        made.append(cache.encoded((1, b"e%d" % i, i, False, True), raw))
        assert cache.bytes <= cache.budget
    assert 0 < len(cache) < 200
    assert cache.cached((1, b"e199", 199, False, True)) is made[-1]  # the newest stays
    assert cache.cached((1, b"e0", 0, False, True)) is None  # the oldest left


def test_an_entry_read_since_the_sweep_passed_it_outlives_the_unread():
    """The second chance: of the oldest entries, the one read (a page hit marks it) stays while newer unread
    ones leave; the entry just made never makes room for itself."""

    def raw(i: int) -> bytes:
        return rows.pack({"id": f"{i}", "type": "thing", "data": "w" * 300, "generation": i})

    one = max(encoded_rows.encode_row(raw(i)).size + len(raw(i)) + encoded_rows.ENTRY_OVERHEAD for i in range(11))
    cache = encoded_rows.RowCache(one * 10 + one // 2)  # room for ten
    slots = [(1, b"e%d" % i, i, False, True) for i in range(10)]
    for i, slot in enumerate(slots):
        cache.encoded(slot, raw(i))
    assert len(cache) == 10
    kept = cache.cached(slots[0])  # the oldest, read
    newest = (1, b"e10", 10, False, True)
    assert cache.encoded(newest, raw(10)) is not None
    assert cache.cached(slots[0]) is kept and cache.cached(newest) is not None
    assert cache.cached(slots[1]) is None  # the oldest unread left in its place
    assert cache.bytes <= cache.budget


def test_a_cached_answer_holds_its_own_size_not_the_encoder_buffer():
    """What the cache counts is what it holds: 1,000 small rows' answers take about their counted bytes, where
    orjson's own bytes would keep its ~4 KiB working buffer each (4 MB for these)."""
    import tracemalloc

    raws = [rows.pack({"id": f"r{i}", "type": "thing", "data": f"note {i}", "generation": i}) for i in range(1000)]
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        made = [encoded_rows.encode_row(raw) for raw in raws]
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    counted = sum(m.size for m in made)
    assert held < 3 * counted + 1000 * 400, (held, counted)


def test_a_closed_handle_leaves_nothing_in_the_cache(tmp_path):
    """A handle's close drops its answers: no later read can name its serial, so they would only hold memory."""
    init_store(tmp_path / "b")
    handle = Brain.open(tmp_path / "b")
    handle.addMany({"items": [{"type": "thing", "id": f"t{i}", "data": f"w {i}"} for i in range(20)]})
    for i in range(20):
        codecs.to_json(call(handle.at().for_wire(), "get", f"t{i}"))
    mine = [slot for slot in list(encoded_rows.CACHE._entries) if slot[0] == handle.serial]
    assert len(mine) == 20
    before = encoded_rows.CACHE.bytes
    handle.close()
    assert not [slot for slot in list(encoded_rows.CACHE._entries) if slot[0] == handle.serial]
    assert encoded_rows.CACHE.bytes < before and handle.serial not in encoded_rows.CACHE._by_serial


def test_the_dispatcher_hands_rows_out_encoded_and_a_call_in_process_plain(tmp_path):
    """What each asker gets: a transport's call (the dispatcher) answers rows as Encoded bytes, which the
    codecs splice; ``Brain.call`` in process answers plain documents, equal to the decoded bytes."""
    init_store(tmp_path / "main")
    pool = Pool({"main": tmp_path / "main"})
    try:
        brain = pool.resolve("main", for_write=True)
        brain.addMany(
            {"items": [{"type": "thing", "id": f"t{i}", "metadata": {"i": i, "é": [i, None]}} for i in range(30)]}
        )
        dispatcher = X.Dispatcher(pool)
        served = asyncio.run(dispatcher.dispatch(WHO, "find", "main", None, {"limit": 30}))
        assert all(isinstance(h["entity"], Encoded) for h in served.answer["results"])
        plain = brain.find({"limit": 30})
        assert all(type(h["entity"]) is dict for h in plain["results"])
        body = orjson.loads(codecs.to_json(served.body()))
        assert [h["entity"] for h in body["results"]] == [h["entity"] for h in plain["results"]]
        packed = msgpack.unpackb(codecs.to_msgpack(served.body()), raw=False)
        assert [h["entity"] for h in packed["results"]] == [h["entity"] for h in plain["results"]]
        assert not math.isnan(body["_meta"]["ms"])
    finally:
        pool.close_all()
