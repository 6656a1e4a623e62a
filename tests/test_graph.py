"""The graph walk (door catalogue 4.2, 5.1): traverse and find's ``connected`` agree with a plain
breadth-first search over ``snapshot.relations()``, on seeded random graphs with cycles and self-loops,
across relates, unrelates, removes, flushes and a reopen, at the head and pinned by asOf."""

from __future__ import annotations

import random

import pytest
from helpers import new_store

from brainy.contract import refusals as R
from brainy.engine import Brain, init_store

VERBS = ["relatedTo", "causes", "contains"]
TYPES = ["person", "thing"]


@pytest.fixture
def brain(tmp_path):
    b = Brain.open(new_store(tmp_path), name="g")
    yield b
    b.close()


def _oracle(
    snap, anchors: list[str], direction: str, verbs: list[str] | None, depth: int, anchors_count: bool = True
) -> dict[str, int]:
    """Entity id -> fewest hops within ``depth``, by brute force over every relation row. With
    ``anchors_count`` the anchors are at 0 (traverse); without, a node counts only once a walk of at least
    one hop reaches it (find's connected)."""
    edges: dict[str, list[tuple[str, str]]] = {}
    for r in snap.relations():
        if verbs is not None and r["type"] not in verbs:
            continue
        if direction in ("out", "both"):
            edges.setdefault(r["from"], []).append((r["id"], r["to"]))
        if direction in ("in", "both"):
            edges.setdefault(r["to"], []).append((r["id"], r["from"]))
    hops = {a: 0 for a in anchors} if anchors_count else {}
    frontier = list(anchors)
    for d in range(1, depth + 1):
        nxt = []
        for node in frontier:
            for _, far in edges.get(node, ()):
                if far not in hops:
                    hops[far] = d
                    nxt.append(far)
        frontier = nxt
    return hops


def _build(brain: Brain, rnd: random.Random, n: int, m: int) -> list[str]:
    ids = [brain.add({"type": rnd.choice(TYPES), "id": f"n{i}", "metadata": {"i": i}})["id"] for i in range(n)]
    for _ in range(m):
        a = rnd.choice(ids)
        b = a if rnd.random() < 0.08 else rnd.choice(ids)  # self-loops, and cycles from random pairs
        brain.relate({"from": a, "to": b, "type": rnd.choice(VERBS)})
    return ids


def _check_walks(brain: Brain, rnd: random.Random, generation: int | None = None, rounds: int = 12) -> None:
    snap = brain.at(generation)
    alive = [r["id"] for r in snap.entities()]
    relations = {r["id"]: r for r in snap.relations()}
    for _ in range(rounds):
        anchors = rnd.sample(alive, rnd.choice([1, 1, 2]))
        direction = rnd.choice(["out", "in", "both"])
        verbs = rnd.choice([None, ["causes"], ["relatedTo", "contains"]])
        depth = rnd.randrange(1, 7)
        args = {
            "from": anchors,
            "direction": direction,
            "depth": depth,
            "includeEntities": False,
            "includePaths": True,
            "limit": 10000,
        }
        if verbs is not None:
            args["via"] = verbs
        if generation is None:
            answer = brain.traverse(args)
        else:
            answer = brain.asOf({"generation": generation, "read": {"door": "traverse", "args": args}})["result"]
        expected = _oracle(snap, anchors, direction, verbs, depth)
        got = {node["id"]: node["depth"] for node in answer["nodes"]}
        assert got == expected and not answer["truncated"]
        assert [n["id"] for n in answer["nodes"]] == sorted(anchors) + sorted(
            (n for n in expected if expected[n]), key=lambda n: (expected[n], n)
        ) or len(anchors) > 1
        for node, path in zip(answer["nodes"], answer["paths"]):
            assert len(path) == node["depth"] + 1 and path[-1] == node["id"] and path[0] in anchors
            if node["via"] is None:
                continue
            rel = relations[node["via"]]  # the relation that reached it joins the last two steps of its path
            assert verbs is None or rel["type"] in verbs
            ends = {
                "out": [(rel["from"], rel["to"])],
                "in": [(rel["to"], rel["from"])],
                "both": [(rel["from"], rel["to"]), (rel["to"], rel["from"])],
            }[direction]
            assert (path[-2], path[-1]) in ends
        assert [r["id"] for r in answer["relations"]] == [n["via"] for n in answer["nodes"] if n["via"]]
        dfs = brain.traverse({**args, "strategy": "dfs"}) if generation is None else None
        if dfs is not None:
            assert {n["id"]: n["depth"] for n in dfs["nodes"]} == expected
        # find's connected: a filter on the candidates, every hop count 1..depth
        connected = {"node": anchors, "direction": direction, "depth": depth}
        if verbs is not None:
            connected["via"] = verbs
        kind = rnd.choice([None, "person"])
        query = {"connected": connected, "limit": 1000, "visibility": "all"}
        if kind:
            query["type"] = kind
        if generation is None:
            found = brain.find(query)
        else:
            found = brain.asOf({"generation": generation, "read": {"door": "find", "args": query}})["result"]
        reach = _oracle(snap, anchors, direction, verbs, depth, anchors_count=False)
        rows = {r["id"]: r for r in snap.entities()}
        want = sorted((rows[n] for n in reach if kind is None or rows[n]["type"] == kind), key=lambda r: r["denseInt"])
        assert [h["id"] for h in found["results"]] == [r["id"] for r in want]
        assert found["total"] == len(want) and found["legs"]["graph"] == {"served": True}
        assert all(h["matchSource"] == "graph" and h["score"] is None for h in found["results"])


def test_traverse_and_connected_agree_with_a_brute_force_bfs(tmp_path):
    """On a seeded random graph with cycles and self-loops, every traverse (bfs and dfs, each direction,
    via, depth 1-6) reaches exactly the oracle's nodes at its fewest hops, in (hops, id) order, each with a
    relation that joins it to the node before it on its path; find's connected keeps exactly the oracle's
    reachable entities. It stays so across relates, unrelates, entity removes, a flush and a reopen, and
    a walk pinned by asOf walks its own generation."""
    rnd = random.Random(11)
    path = new_store(tmp_path)
    brain = Brain.open(path)
    ids = _build(brain, rnd, 40, 120)
    _check_walks(brain, rnd)
    pinned = brain.at().generation
    for r in rnd.sample(list(brain.at().relations()), 25):
        brain.unrelate({"id": r["id"]})
    for victim in rnd.sample(ids, 4):
        brain.remove({"id": victim})
    _check_walks(brain, rnd)
    brain.flush()
    for _ in range(30):
        a, b = rnd.sample([r["id"] for r in brain.at().entities()], 2)
        brain.relate({"from": a, "to": b, "type": rnd.choice(VERBS)})
    _check_walks(brain, rnd)
    _check_walks(brain, rnd, generation=pinned)  # the graph as it stood before the removes
    brain.close()
    brain = Brain.open(path)
    _check_walks(brain, rnd)
    _check_walks(brain, rnd, generation=pinned)
    brain.close()


def test_traverse_limit_type_and_where_bound_the_walk(brain):
    """limit cuts the walk at that many nodes (anchors first, then by hops and id) and says truncated;
    type and where keep and expand only matching nodes; entities ride along by default."""
    for i in range(8):
        brain.add({"type": "person" if i % 2 else "thing", "id": f"c{i}", "metadata": {"i": i}})
    for i in range(7):  # a chain c0 -> c1 -> ... -> c7, and a cycle back to the start
        brain.relate({"from": f"c{i}", "to": f"c{i + 1}", "type": "precedes"})
    brain.relate({"from": "c7", "to": "c0", "type": "precedes"})
    full = brain.traverse({"from": "c0", "depth": 6})
    assert [n["depth"] for n in full["nodes"]] == list(range(7)) and not full["truncated"]
    assert full["nodes"][1]["entity"]["key"] == "c1"
    cut = brain.traverse({"from": "c0", "depth": 6, "limit": 3})
    assert [n["entity"]["key"] for n in cut["nodes"]] == ["c0", "c1", "c2"] and cut["truncated"]
    assert len(cut["relations"]) == 2
    # c1 is a person; only things are kept, so the walk stops at c0's out-edge to c1
    assert [n["entity"]["key"] for n in brain.traverse({"from": "c0", "type": "thing", "depth": 6})["nodes"]] == ["c0"]
    both = brain.traverse({"from": "c0", "direction": "both", "depth": 1, "where": {"i": {"gte": 1}}})
    assert sorted(n["entity"]["key"] for n in both["nodes"]) == ["c0", "c1", "c7"]
    assert brain.traverse({"from": "c0", "depth": 6, "strategy": "dfs", "limit": 2})["truncated"]


def test_graph_leg_ranks_by_one_over_hops_when_weighted(brain):
    """fusion.weights.graph > 0 turns the graph leg into a ranked signal of 1/hops: score descending, then
    id; mode graph runs the graph leg alone; explain names the graph leg."""
    for i in range(5):
        brain.add({"type": "thing", "id": f"w{i}"})
    brain.relate({"from": "w0", "to": "w1", "type": "causes"})
    brain.relate({"from": "w1", "to": "w2", "type": "causes"})
    brain.relate({"from": "w2", "to": "w3", "type": "causes"})
    ranked = brain.find(
        {
            "connected": {"from": "w0", "depth": 3},
            "searchMode": "graph",
            "fusion": {"weights": {"graph": 1}},
            "explain": True,
        }
    )
    assert [(h["entity"]["key"], h["score"]) for h in ranked["results"]] == [
        ("w1", 1.0),
        ("w2", 0.5),
        ("w3", pytest.approx(1 / 3)),
    ]
    assert "total" not in ranked and ranked["results"][0]["explanation"] == {"graph": 1.0, "fused": 1.0}
    into = brain.find({"connected": {"to": "w3", "depth": 2}})
    assert [h["entity"]["key"] for h in into["results"]] == ["w1", "w2"]
    both = brain.find({"connected": {"from": "w0", "to": "w3", "depth": 3}})  # on a walk from w0 and to w3
    assert [h["entity"]["key"] for h in both["results"]] == ["w1", "w2"]
    brain.update({"id": "w4", "data": "alpha"})  # unreachable from w0: the graph filter keeps it out
    brain.update({"id": "w2", "data": "alpha beta"})
    texty = brain.find({"query": "alpha", "searchMode": "text", "connected": {"from": "w0", "depth": 3}})
    assert [(h["entity"]["key"], h["matchSource"]) for h in texty["results"]] == [("w2", "text")]
    plan = brain.explain({"connected": {"node": "w0"}})
    assert {"leg": "graph", "servable": True, "index": "graph adjacency"} in plan["legs"]


def test_graph_refusals(brain):
    """A missing anchor is EntityNotFoundError (traverse and connected); depth outside 1-6, a limit over
    10,000, an unknown verb, mode graph without connected and a stray connected field are
    InvalidArgumentError; the graph signal fused with the text leg waits for the fusion of legs."""
    brain.add({"type": "thing", "id": "x"})
    with pytest.raises(R.EntityNotFoundError) as exc:
        brain.traverse({"from": ["x", "ghost"]})
    assert exc.value.id == "ghost"
    with pytest.raises(R.EntityNotFoundError):
        brain.find({"connected": {"node": "ghost"}})
    with pytest.raises(R.EntityNotFoundError):
        brain.asOf({"generation": 1, "read": {"door": "find", "args": {"connected": {"from": "ghost"}}}})
    for bad in (
        {"depth": 0},
        {"depth": 7},
        {"limit": 10001},
        {"via": "knowsNot"},
        {"direction": "up"},
        {"strategy": "best"},
    ):
        with pytest.raises(R.InvalidArgumentError):
            brain.traverse({"from": "x", **bad})
    for bad in (
        {"node": "x", "depth": 7},
        {"node": "x", "depth": 0},
        {"via": "causes"},
        {"node": "x", "hops": 2},
        {"from": "x", "direction": "in"},
    ):
        with pytest.raises(R.InvalidArgumentError):
            brain.find({"connected": bad})
    with pytest.raises(R.InvalidArgumentError) as exc:
        brain.find({"searchMode": "graph"})
    assert exc.value.field == "connected"


def test_a_weighted_graph_leg_is_fused_with_the_text_leg(tmp_path):
    """With fusion.weights.graph > 0 the graph leg is one more ranked leg (DOORS 4.2): a hit only the walk
    reaches and a hit only the words match both rank, each saying which leg found it."""
    path = tmp_path / "fused"
    init_store(path)
    brain = Brain.open(path)
    try:
        brain.add({"type": "person", "id": "anchor"})
        brain.add({"type": "person", "id": "near", "data": "nothing to see"})
        brain.add({"type": "person", "id": "far", "data": "a word or two"})
        brain.relate({"from": "anchor", "to": "near", "type": "knows"})
        answer = brain.find(
            {
                "query": "word",
                "searchMode": "text",
                "connected": {"node": "anchor"},
                "explain": True,
                "fusion": {"weights": {"graph": 1}},
            }
        )
        by_id = {hit["entity"]["key"]: hit for hit in answer["results"]}
        assert set(by_id) == {"near", "far"}
        assert by_id["near"]["matchSource"] == "graph" and by_id["near"]["explanation"]["graph"] == 1.0
        assert by_id["far"]["matchSource"] == "text" and "graph" not in by_id["far"]["explanation"]
        assert all(hit["score"] is not None for hit in answer["results"])
        filtered = brain.find({"query": "word", "searchMode": "text", "connected": {"node": "anchor"}})
        assert filtered["results"] == []  # without the weight the walk is a filter, and "far" is not reached
    finally:
        brain.close()
