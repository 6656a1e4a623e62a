"""The query doors (door catalogue 4, 5.1): find and related agree with a brute-force scan of the same rows."""

from __future__ import annotations

import random

import pytest
from helpers import new_store
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from brainy.contract import refusals as R
from brainy.engine import Brain
from brainy.index.where import compile_where

TYPES = ["person", "thing", "concept"]
COLORS = ["red", "green", "blue"]


def _row_args(rnd: random.Random, i: int) -> dict:
    meta = {"n": rnd.randrange(5), "color": rnd.choice(COLORS)}
    if rnd.random() < 0.5:
        meta["tags"] = rnd.sample(["a", "b", "c", "d"], rnd.randrange(0, 3))
    if rnd.random() < 0.3:
        meta["spec"] = {"size": rnd.choice([1, 2.5, "big"])}
    if rnd.random() < 0.2:
        meta["n"] = rnd.choice([None, True, "3"])
    return {
        "type": rnd.choice(TYPES),
        "id": f"r{i}",
        "metadata": meta,
        "visibility": "internal" if rnd.random() < 0.15 else "public",
        "data": f"word{rnd.randrange(6)} word{rnd.randrange(6)} common",
    }


WHERES = st.sampled_from(
    [
        None,
        {"color": "red"},
        {"color": {"in": ["red", "blue"]}},
        {"n": {"gte": 2}},
        {"tags": "a"},
        {"tags": {"hasAll": ["a", "b"]}},
        {"spec.size": {"exists": True}},
        {"n": None},
        {"anyOf": [{"color": "green"}, {"n": 0}]},
        {"not": {"color": "red"}},
        {"color": "red", "n": {"lt": 3}},
        {"tags": {"size": 0}},
        {"n": {"kind": "string"}},
        {"color": {"startsWith": "b"}},
        {"spec.size": 2.5},
    ]
)
ORDERS = st.sampled_from([None, "n", "color", "createdAt", "spec.size", "id"])


def _expected(brain: Brain, query: dict) -> list[dict]:
    """The brute force: every row of the head through the same where evaluator, in the door's order."""
    where = compile_where(query.get("where"))
    tiers = query.get("visibility", "public")
    tiers = ["public", "internal", "system"] if tiers == "all" else [tiers]
    kinds = query.get("type")
    rows = [
        r
        for r in brain.at().entities()
        if (kinds is None or r["type"] in ([kinds] if isinstance(kinds, str) else kinds))
        and r.get("visibility", "public") in tiers
        and where.matches(r)
    ]
    rows.sort(key=lambda r: r["denseInt"])
    order_by = query.get("orderBy")
    if order_by:
        from brainy.doors.query import _column_value
        from brainy.index.where import sort_by_value as _sorted

        by_dense = {r["denseInt"]: r for r in rows}
        dense = _sorted(
            list(by_dense),
            lambda d: _column_value(by_dense[d], order_by),
            lambda d: by_dense[d]["id"],
            query.get("order") == "desc",
        )
        rows = [by_dense[d] for d in dense]
    return rows


def _all_pages(brain: Brain, query: dict, limit: int) -> tuple[list[str], int]:
    answer = brain.find({**query, "limit": limit})
    ids = [h["id"] for h in answer["results"]]
    total = answer["total"]
    while answer["cursor"]:
        answer = brain.find({**query, "limit": limit, "cursor": answer["cursor"]})
        ids += [h["id"] for h in answer["results"]]
    return ids, total


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    seed=st.integers(0, 10_000),
    queries=st.lists(
        st.tuples(
            WHERES,
            ORDERS,
            st.booleans(),
            st.sampled_from([None, "person", ["thing", "concept"]]),
            st.sampled_from(["public", "all"]),
        ),
        min_size=3,
        max_size=6,
    ),
)
def test_find_agrees_with_a_brute_force_scan(tmp_path_factory, seed, queries):
    """find with random where trees, types, tiers and orders answers exactly the brute-force scan's rows in
    the door's order (store order, or the key's order with missing last and ties on id), with the exact
    total, across writes, flushes, compactions and a reopen."""
    path = new_store(tmp_path_factory.mktemp("q"))
    rnd = random.Random(seed)
    brain = Brain.open(path, flush_bytes=4096, compact_at=3)
    try:
        for i in range(60):
            brain.add(_row_args(rnd, i))
        for step in range(4):
            for _ in range(10):
                i = rnd.randrange(70)
                if rnd.random() < 0.3 and brain.get(f"r{i}")["entity"]:
                    brain.remove({"id": f"r{i}"})
                else:
                    brain.add({**_row_args(rnd, i), "upsert": True})
            if step == 1:
                brain.flush()
                brain.compact()
            if step == 2:
                brain.close()
                brain = Brain.open(path, flush_bytes=4096, compact_at=3)
            for where, order_by, desc, kinds, tier in queries:
                query: dict = {"visibility": tier}
                if where is not None:
                    query["where"] = where
                if order_by is not None:
                    query["orderBy"] = order_by
                    query["order"] = "desc" if desc else "asc"
                if kinds is not None:
                    query["type"] = kinds
                want = [r["id"] for r in _expected(brain, query)]
                got, total = _all_pages(brain, query, limit=7)
                assert got == want and total == len(want), (query, step)
    finally:
        brain.close()


@pytest.fixture
def brain(tmp_path):
    b = Brain.open(new_store(tmp_path), name="q")
    yield b
    b.close()


def test_related_agrees_with_a_brute_force_edge_scan(brain):
    """related: {node} both directions, {from} outgoing, {to} incoming, narrowed by type, paged by relation
    id ascending; the same edges as scanning every relation."""
    rnd = random.Random(3)
    for i in range(12):
        brain.add({"type": "thing", "id": f"n{i}"})
    for _ in range(40):
        a, b = rnd.randrange(12), rnd.randrange(12)
        brain.relate(
            {"from": f"n{a}", "to": f"n{b}", "type": rnd.choice(["knows", "likes"]), "subtype": rnd.choice([None, "x"])}
        )
    every = sorted(brain.related({"limit": 1000})["relations"], key=lambda r: r["id"])
    assert [r["id"] for r in every] == sorted(r["id"] for r in every)
    node = brain.get("n3")["entity"]["id"]
    for anchor, keep in (
        ("node", lambda r: node in (r["from"], r["to"])),
        ("from", lambda r: r["from"] == node),
        ("to", lambda r: r["to"] == node),
    ):
        want = [r["id"] for r in every if keep(r)]
        pages, cursor = [], None
        while True:
            args = {anchor: "n3", "limit": 3, **({"cursor": cursor} if cursor else {})}
            answer = brain.related(args)
            pages += [r["id"] for r in answer["relations"]]
            cursor = answer["cursor"]
            if not cursor:
                break
        assert pages == want, anchor
        typed = brain.related({anchor: "n3", "type": "knows", "limit": 1000})["relations"]
        assert [r["id"] for r in typed] == [r["id"] for r in every if keep(r) and r["type"] == "knows"]
    # total is given only when the adjacency alone knows it: an anchor and no narrowing, every tier
    assert brain.related({"node": "n3", "limit": 1, "visibility": "all"})["total"] == sum(
        1 for r in every if node in (r["from"], r["to"])
    )
    assert "total" not in brain.related({"node": "n3", "type": "knows"})
    with pytest.raises(R.EntityNotFoundError):
        brain.related({"node": "nobody"})
    with pytest.raises(R.InvalidArgumentError):
        brain.related({"node": "n1", "from": "n2"})
    far = brain.related({"from": "n3", "includeEntities": True, "limit": 1000})
    assert set(far["entities"]) == {r["to"] for r in far["relations"] if r["to"] != node}


def test_the_text_leg_ranks_by_bm25_and_says_what_it_left_out(brain, tmp_path, monkeypatch):
    """A query runs the text leg (BM25 over word postings): the rarer and denser match ranks first; on a box
    without the model, auto mode leaves the semantic leg out loudly and an explicit semantic mode refuses by
    name; no total."""
    brain.add({"type": "document", "id": "d1", "data": "the cat sat on the cat mat"})
    brain.add({"type": "document", "id": "d2", "data": "a dog and a cat"})
    brain.add({"type": "document", "id": "d3", "data": "only dogs here"})
    answer = brain.find({"query": "cat", "searchMode": "text"})
    assert [h["entity"]["key"] for h in answer["results"]] == ["d1", "d2"]
    assert answer["results"][0]["score"] > answer["results"][1]["score"] and answer["results"][0]["textMatches"]
    assert "total" not in answer
    (tmp_path / "no-model").mkdir()
    monkeypatch.setenv("BRAINY_EMBED_MODEL_DIR", str(tmp_path / "no-model"))
    auto = brain.find({"query": "cat"})
    assert [h["entity"]["key"] for h in auto["results"]] == ["d1", "d2"] and auto["legs"]["semantic"]["served"] is False
    with pytest.raises(R.EmbeddingModelMissingError):
        brain.find({"query": "cat", "searchMode": "semantic"})
    with pytest.raises(R.InvalidArgumentError):
        brain.find({"where": {"x": {"nearly": 1}}})
    metadata_only = brain.find({"type": "document"})
    assert metadata_only["total"] == 3 and metadata_only["results"][0]["score"] is None


def test_find_pinned_by_as_of_and_by_cursor(brain):
    """asOf runs find on the rows of that generation; a cursor keeps paging the generation it pinned."""
    for i in range(6):
        brain.add({"type": "thing", "id": f"t{i}", "metadata": {"k": "v"}})
    first = brain.find({"where": {"k": "v"}, "limit": 4})
    brain.remove({"id": "t5"})
    brain.add({"type": "thing", "id": "t9", "metadata": {"k": "v"}})
    second = brain.find({"where": {"k": "v"}, "limit": 4, "cursor": first["cursor"]})
    assert second["generation"] == first["generation"]
    assert [h["entity"]["key"] for h in first["results"] + second["results"]] == [f"t{i}" for i in range(6)]
    then = brain.asOf({"generation": first["generation"], "read": {"door": "find", "args": {"where": {"k": "v"}}}})
    assert then["result"]["total"] == 6
    assert brain.find({"where": {"k": "v"}})["total"] == 6  # t5 gone, t9 new


def test_explain_and_fields_describe_without_running(brain, tmp_path, monkeypatch):
    """explain answers the legs, indexes and estimated candidates without fetching rows; fields lists the
    metadata paths with counts, kinds, distinct values and the top values."""
    brain.add({"type": "person", "id": "p1", "metadata": {"team": "a", "age": 30}})
    brain.add({"type": "person", "id": "p2", "metadata": {"team": "b", "age": "old"}})
    brain.add({"type": "thing", "id": "t1", "metadata": {"team": "a"}})
    plan = brain.explain({"type": "person", "where": {"team": "a"}, "orderBy": "age"})
    assert plan["legs"][0] == {
        "leg": "metadata",
        "servable": True,
        "index": "metadata postings (type, visibility, team)",
        "estimatedCandidates": 1,
    }
    assert plan["order"] == "key" and plan["legs"][-1]["leg"] == "order"
    assert brain.explain({"vector": [0.1] * 384})["legs"][1] == {
        "leg": "semantic",
        "servable": True,
        "index": "vector index (cosine)",
    }
    assert {"leg": "semantic", "servable": True, "index": "vector index (cosine)"} in brain.explain(
        {"query": "x", "searchMode": "semantic"}
    )["legs"]
    (tmp_path / "no-model").mkdir()
    with monkeypatch.context() as patch:  # a box without the model: the plan says the query would refuse
        patch.setenv("BRAINY_EMBED_MODEL_DIR", str(tmp_path / "no-model"))
        assert (
            brain.explain({"query": "x", "searchMode": "semantic"})["wouldRefuse"]["name"]
            == "EmbeddingModelMissingError"
        )
    listing = {f["path"]: f for f in brain.fields({"values": 2})["fields"]}
    assert listing["team"]["count"] == 3 and listing["team"]["distinct"] == 2
    assert listing["team"]["top"][0] == {"value": "a", "count": 2}
    assert listing["age"]["kinds"] == ["number", "string"]
    assert {f["path"] for f in brain.fields({"type": "thing"})["fields"]} == {"team"}


def _find_all(brain, where):
    return [h["id"] for h in brain.find({"where": where, "limit": 1000, "visibility": "all"})["results"]]


def test_projections_persist_with_their_stamp_and_catch_up_from_the_log(tmp_path):
    """A close writes a projection snapshot stamped with its generation; the next open loads it instead of
    rebuilding; a snapshot behind the head is caught up from the log's moves; a damaged one is rebuilt from
    the rows and the warnings say so. Every route answers what the rows say."""
    path = new_store(tmp_path)
    brain = Brain.open(path)
    for i in range(30):
        brain.add({"type": "thing", "id": f"s{i}", "metadata": {"m": i % 4}})
    assert len(_find_all(brain, {"m": 1})) == 8  # builds the projections
    brain.close()
    snapshots = sorted((path / "index").glob("*.proj"))
    assert [p.name for p in snapshots] == [f"{30:020d}.proj"]

    brain = Brain.open(path)
    assert len(_find_all(brain, {"m": 1})) == 8 and brain.projections_from == "snapshot at 30"
    brain.update({"id": "s1", "metadata": {"m": 2}})
    brain._lease.abandon()  # a crash: the snapshot stays at 30, the log holds generation 31
    brain.commits.log.close()

    brain = Brain.open(path)
    assert len(_find_all(brain, {"m": 1})) == 7 and brain.projections_from == "snapshot at 30"
    expected = sorted(r["id"] for r in brain.at().entities() if r["metadata"]["m"] == 2)
    assert sorted(_find_all(brain, {"m": 2})) == expected
    brain.close()

    snapshot = sorted((path / "index").glob("*.proj"))[-1]
    data = bytearray(snapshot.read_bytes())
    data[len(data) // 2] ^= 0xFF
    snapshot.write_bytes(bytes(data))
    brain = Brain.attach(path)
    assert sorted(_find_all(brain, {"m": 2})) == expected and brain.projections_from == "rows"
    assert any(w["code"] == "projections-rebuilt" for w in brain.warnings)
    assert snapshot.read_bytes() == bytes(data)  # an attach rebuilds in memory and writes nothing


def test_a_ranked_find_on_public_rows_alone_reads_no_tier_posting_and_still_keeps_tiers(tmp_path):
    """While the ledger counts only public rows, a find asking for public ones reads no tier posting (every row
    passes); the first internal row ends that, and a past generation
    (no ledger at its stamp) reads the posting as before: the same answers every way."""
    # (tests/test_cold_start.py checks the overlay after a crash against a full build, tiers mixed)
    import numpy as np

    store = new_store(tmp_path)
    rnd = np.random.default_rng(3)
    vectors = rnd.standard_normal((40, 384)).astype(np.float32)
    query = {"vector": vectors[0].tolist(), "limit": 100}
    with Brain.open(store) as brain:
        ids = brain.addMany({"items": [{"type": "thing", "vector": v.tolist()} for v in vectors]})["ids"]
        first = brain.head
        assert {e["id"] for e in brain.find(query)["results"]} == set(ids)
        brain.update({"id": ids[3], "visibility": "internal"})
        public = brain.find(query)
        assert {e["id"] for e in public["results"]} == set(ids) - {ids[3]}
        everything = brain.find({**query, "visibility": "all"})
        assert {e["id"] for e in everything["results"]} == set(ids)
        past = brain.asOf({"generation": first, "read": {"door": "find", "args": query}})["result"]
        assert {e["id"] for e in past["results"]} == set(ids)
