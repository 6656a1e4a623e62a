"""Time travel and the change feed (door catalogue 6): every generation stays readable as it stood."""

from __future__ import annotations

import random

import pytest
from helpers import new_store

from brainy.contract import refusals as R
from brainy.engine import Brain


@pytest.fixture
def brain(tmp_path):
    b = Brain.open(new_store(tmp_path), name="tt", flush_bytes=4096, compact_at=3)
    yield b
    b.close()


def _everything(brain, generation=None):
    """A whole export, at the head or pinned by asOf, without the answer's own generation."""
    if generation is None:
        page = brain.export({"limit": 10000})
    else:
        page = brain.asOf({"generation": generation, "read": {"door": "export", "args": {"limit": 10000}}})["result"]
    return page["entities"], page["relations"]


def test_as_of_answers_what_the_store_answered_then(tmp_path):
    """asOf(g) returns exactly what the store answered when g was its head, across flushes, compactions
    and a reopen: get, counts and a whole export."""
    path = new_store(tmp_path)
    brain = Brain.open(path, flush_bytes=2048, compact_at=3)
    rnd = random.Random(11)
    seen = {0: (brain.counts(), _everything(brain))}
    for step in range(60):
        key = f"k{rnd.randrange(12)}"
        present = brain.get(key)["entity"] is not None
        roll = rnd.random()
        if not present or roll < 0.3:
            brain.add(
                {
                    "type": rnd.choice(["thing", "person"]),
                    "id": key,
                    "metadata": {"n": step},
                    "upsert": True,
                    "visibility": rnd.choice(["public", "internal"]),
                }
            )
        elif roll < 0.6:
            brain.update({"id": key, "metadata": {"n": step, "tags": [f"t{step % 3}"]}})
        elif roll < 0.8:
            other = f"k{rnd.randrange(12)}"
            if brain.get(other)["entity"] is not None:
                brain.relate({"from": key, "to": other, "type": "relatedTo", "weight": 0.5})
            else:
                brain.remove({"id": key})
        else:
            brain.remove({"id": key})
        seen[brain.head] = (brain.counts(), _everything(brain))
    brain.close()
    brain = Brain.open(path)
    for generation, (counts, everything) in seen.items():
        pinned = brain.asOf({"generation": generation, "read": {"door": "counts"}})
        assert pinned["generation"] == generation
        got = pinned["result"]
        assert {k: got[k] for k in counts if k != "lastUpdated"} == {
            k: counts[k] for k in counts if k != "lastUpdated"
        }, generation
        assert _everything(brain, generation) == everything, generation
    brain.close()


def test_as_of_by_instant_and_its_refusals(brain):
    """at resolves to the last generation committed at or before the instant; a generation past the head
    is GenerationAheadError; a read asOf cannot pin refuses by name; a door not landed yet says when."""
    brain.add({"type": "thing", "id": "a"})
    first = brain.now()
    brain.add({"type": "thing", "id": "b"})
    assert brain.asOf({"at": first["timestamp"]})["generation"] in (1, 2)
    assert brain.asOf({"at": 0})["generation"] == 0
    assert brain.asOf({"at": "2999-01-01T00:00:00Z"})["generation"] == 2
    assert brain.asOf({"generation": 1, "read": {"door": "get", "id": "b"}})["result"]["entity"] is None
    with pytest.raises(R.GenerationAheadError):
        brain.asOf({"generation": 3})
    with pytest.raises(R.InvalidArgumentError):
        brain.asOf({"generation": 1, "at": 0})
    with pytest.raises(R.InvalidArgumentError) as exc:
        brain.asOf({"generation": 1, "read": {"door": "changes"}})
    assert exc.value.reason == "not-pinnable"
    # readFile is native and pinnable: asOf reads a file as it stood
    brain.writeFile({"path": "/a", "content": "one"})
    pinned = brain.now()["generation"]
    brain.writeFile({"path": "/a", "content": "two"})
    read = brain.asOf({"generation": pinned, "read": {"door": "readFile", "args": {"path": "/a"}}})
    assert read["result"]["content"] == "one"
    with pytest.raises(R.FileNotFoundError):
        brain.asOf({"generation": 1, "read": {"door": "readFile", "args": {"path": "/a"}}})


def test_history_lists_every_version_newest_first(brain):
    """history lists each version with its generation, op and author, newest first, and pages by cursor."""
    brain.add({"type": "thing", "id": "h", "metadata": {"v": 0}}, caller="person:ada")
    for v in range(1, 6):
        brain.update({"id": "h", "metadata": {"v": v}}, caller="person:bob")
    brain.flush()
    brain.remove({"id": "h"})
    out = brain.history("h")
    ops = [(x["generation"], x["op"]) for x in out["versions"]]
    assert ops == [(7, "delete")] + [(g, "update") for g in range(6, 0, -1)]
    assert out["versions"][-1]["author"] == "person:ada" and out["versions"][-1]["entity"]["metadata"] == {"v": 0}
    page = brain.history("h", {"limit": 3})
    assert len(page["versions"]) == 3 and page["hasMore"]
    rest = brain.history("h", {"limit": 10, "cursor": page["cursor"]})
    assert [x["generation"] for x in page["versions"] + rest["versions"]] == [7, 6, 5, 4, 3, 2, 1]
    assert brain.history("never-written")["versions"] == []
    with pytest.raises(R.CursorInvalidError):
        brain.history("other", {"cursor": page["cursor"]})
    with pytest.raises(R.CursorInvalidError):
        brain.history("h", {"cursor": "not-a-cursor"})


def test_diff_compares_states_not_paths(brain):
    """diff lists added, changed and removed rows between two states; a row written and removed between
    them does not appear; detail full carries before and after; kinds narrows; pages by cursor."""
    brain.add({"type": "thing", "id": "keep"})
    brain.add({"type": "thing", "id": "change"})
    brain.add({"type": "thing", "id": "drop"})
    base = brain.head
    brain.update({"id": "change", "data": "new"})
    brain.remove({"id": "drop"})
    brain.add({"type": "thing", "id": "fresh"})
    brain.add({"type": "thing", "id": "ghost"})
    brain.remove({"id": "ghost"})
    brain.relate({"from": "keep", "to": "fresh", "type": "precedes"})
    out = brain.diff({"from": base})
    by_change = {c["change"]: c for c in out["changes"] if c["kind"] == "entity"}
    assert set(by_change) == {"added", "changed", "removed"} and len(out["changes"]) == 4
    assert [c["kind"] for c in out["changes"]].count("relation") == 1
    full = brain.diff({"from": base, "kinds": ["entity"], "detail": "full"})
    changed = next(c for c in full["changes"] if c["change"] == "changed")
    assert changed["before"]["data"] is None and changed["after"]["data"] == "new"
    page = brain.diff({"from": base, "limit": 2})
    rest = brain.diff({"from": base, "limit": 2, "cursor": page["cursor"]})
    assert page["hasMore"] and len(page["changes"] + rest["changes"]) == 4
    assert brain.diff({"from": base, "to": base})["changes"] == []
    with pytest.raises(R.GenerationAheadError):
        brain.diff({"from": brain.head + 1})


def test_changes_walks_commits_whole(brain):
    """changes answers one frame per op under its commit's generation, never splits a commit across pages,
    carries the post-commit view (with the endpoints' tags on a relation), and deletes are body-less."""
    brain.add({"type": "person", "id": "a", "metadata": {"tags": ["team:alpha"]}})
    brain.add({"type": "person", "id": "b", "metadata": {"tags": ["team:beta"]}})
    brain.transact(
        {
            "ops": [
                {"door": "relate", "args": {"from": "a", "to": "b", "type": "knows"}},
                {"door": "update", "args": {"id": "a", "data": "x"}},
                {"door": "add", "args": {"type": "thing", "id": "c"}},
            ]
        }
    )
    brain.remove({"id": "c"})
    first = brain.changes({"since": 0, "limit": 2})
    assert [f["generation"] for f in first["frames"]] == [1, 2] and first["cursor"] == 2 and first["hasMore"]
    second = brain.changes({"since": first["cursor"], "limit": 1})  # a 3-op commit still comes whole
    assert [(f["generation"], f["index"]) for f in second["frames"]] == [(3, 0), (3, 1), (3, 2)]
    relation = second["frames"][0]
    assert relation["kind"] == "relation" and relation["op"] == "update"
    assert relation["relation"]["fromTags"] == ["team:alpha"] and relation["relation"]["toTags"] == ["team:beta"]
    last = brain.changes({"since": second["cursor"]})
    assert last["frames"] == [
        {"generation": 4, "index": 0, "kind": "entity", "op": "delete", "id": brain.history("c")["id"]}
    ]
    assert not last["hasMore"] and last["cursor"] == 4 == last["head"]
    assert brain.changes({"since": "head"})["frames"] == []
    for bad in ({"since": 5}, {"limit": 0}, {"limit": -1}, {"since": -1}):
        with pytest.raises(R.BadQueryParameterError):
            brain.changes(bad)


def test_export_pages_one_pinned_generation(brain):
    """export pages entities then relations; its cursor pins the first page's generation, so rows written
    meanwhile are not in later pages; type and visibility narrow the entities."""
    for i in range(7):
        brain.add(
            {"type": "thing" if i % 2 else "person", "id": f"e{i}", "visibility": "internal" if i == 6 else "public"}
        )
    brain.relate({"from": "e0", "to": "e1", "type": "knows"})
    brain.relate({"from": "e1", "to": "e2", "type": "knows"})
    first = brain.export({"limit": 4})
    pinned = first["generation"]
    brain.add({"type": "thing", "id": "late"})
    rows_seen = first["entities"] + first["relations"]
    cursor = first["cursor"]
    while cursor:
        page = brain.export({"limit": 4, "cursor": cursor})
        assert page["generation"] == pinned
        rows_seen += page["entities"] + page["relations"]
        cursor = page["cursor"]
    assert len(rows_seen) == 9 and all(r.get("key") != "late" for r in rows_seen)
    people = brain.export({"type": "person", "include": ["entities"]})
    assert {e["key"] for e in people["entities"]} == {"e0", "e2", "e4", "e6"} and people["relations"] == []
    public = brain.export({"visibility": "public", "include": ["entities"]})
    assert "e6" not in {e["key"] for e in public["entities"]}


def test_time_travel_doors_over_http(server):
    """The time-travel doors reach the wire through the contract: history by GET with query parameters,
    changes by GET (a limit that is not a whole number is BadQueryParameterError), asOf and diff by POST."""
    import json

    from server import PERSON_KEY, curl

    auth = (("Authorization", f"Bearer {PERSON_KEY}"), ("Content-Type", "application/json"))

    def call(method, door, body=None):
        data = json.dumps(body).encode() if body is not None else None
        return curl(server, method, server.path(door), data, headers=auth)

    assert call("POST", "add", {"type": "thing", "id": "x", "metadata": {"v": 1}}).status == 200
    assert call("POST", "update", {"id": "x", "metadata": {"v": 2}}).status == 200
    versions = call("GET", "history/x?limit=1").result()
    assert [v["generation"] for v in versions["versions"]] == [2] and versions["hasMore"]
    feed = call("GET", "changes?since=0&limit=5").result()
    assert [f["generation"] for f in feed["frames"]] == [1, 2] and feed["cursor"] == 2
    for bad in ("changes?limit=1.5", "changes?limit=0", "changes?since=9"):
        assert call("GET", bad).refusal == "BadQueryParameterError", bad
    pinned = call("POST", "asOf", {"generation": 1, "read": {"door": "get", "id": "x"}}).result()
    assert pinned["result"]["entity"]["metadata"] == {"v": 1}
    assert call("POST", "diff", {"from": 1}).result()["changes"][0]["change"] == "changed"
    assert call("GET", "now").result()["generation"] == 2


def test_as_of_pins_explain_and_fields_at_the_past_generation(brain):
    """explain and fields are engine reads the catalogue lets asOf pin: they answer as the store stood then."""
    brain.add({"type": "thing", "id": "a", "metadata": {"colour": "red"}})
    brain.add({"type": "thing", "id": "b", "metadata": {"colour": "red", "size": 3}})
    then = brain.asOf({"generation": 1, "read": {"door": "fields", "args": {"values": 5}}})["result"]
    assert [(f["path"], f["count"]) for f in then["fields"]] == [("colour", 1)] and then["generation"] == 1
    now = brain.fields({"values": 5})
    assert [(f["path"], f["count"]) for f in now["fields"]] == [("colour", 2), ("size", 1)]
    plan = brain.asOf({"generation": 1, "read": {"door": "explain", "args": {"type": "thing"}}})["result"]
    assert plan["generation"] == 1 and plan["legs"][0]["estimatedCandidates"] == 1
    assert brain.explain({"type": "thing"})["legs"][0]["estimatedCandidates"] == 2
