"""Writes from many threads at once: never an internal error, and every acknowledged write readable after.

A commit puts its moves for the followers under the commit lock; the thread whose fsync made it durable takes
them under the state lock; the maintenance thread reads them to write a snapshot, and a read builds an index from
them. Iterating them bare answered a commit now and then with ``500 InternalError`` ("dictionary changed size
during iteration"), and replacing them with a filtered copy could lose a commit's moves (brainy/store/pending.py).
Here eight writers run every write door that moves an index (add, addMany, update, updateMany with vectors,
relate, relateMany, remove, memory.remember, writeFile) against rows with vectors, relations and the metadata an
aggregate reads, beside readers that build and read the indexes, on a brain whose small memtable flushes
meanwhile. The interpreter switches threads every microsecond for the run (every 5 ms by default), so the
interleavings a loaded server meets now and then happen within a bounded run. Every exception but a named refusal fails, and so
does an internal error; then get, find by vector, traverse, the aggregate, memory.read and readFile must show each
writer's acknowledged writes, live and again after a reopen.

Served: two HTTP connections to a real ``brainy serve`` send updateMany at once, beside a third that searches by
vector; no answer is a 500, and the last vector each row was given is the one stored.
"""

from __future__ import annotations

import json
import random
import sys
import threading
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers import new_store
from server import H1Client, start_server

from brainy.contract import refusals as R
from brainy.engine import Brain

DIM = 384
WRITERS = 8
OPS = 27  # each writer's commits: every door three times
READERS = 2
ME = "person:writer@example.com"
OWNERS = {
    "name": "owners",
    "source": {"type": "thing"},
    "groupBy": ["owner"],
    "metrics": {"n": {"op": "count"}, "total": {"op": "sum", "field": "n"}},
}
DOORS = ("add", "addMany", "update", "updateMany", "relate", "relateMany", "remove", "memory.remember", "writeFile")
PROCS = Path(__file__).parent / "procs"


@pytest.fixture
def tight_switch():
    """Threads switch every microsecond for the test, not every 5 ms: races show within a bounded run."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        yield
    finally:
        sys.setswitchinterval(before)


@dataclass
class Writer:
    """One writer's acknowledged writes: what the brain must show once they are all in. Each writer touches only
    rows it made, so its writes alone say what they must read as."""

    number: int
    rows: dict[str, tuple[str, list[float], int]] = field(default_factory=dict)  # key -> (id, vector, n)
    gone: dict[str, tuple[str, list[float]]] = field(default_factory=dict)  # removed key -> (id, last vector)
    relations: set[tuple[str, str, str]] = field(default_factory=set)  # (from key, to key, type)
    memories: dict[str, str] = field(default_factory=dict)  # id -> text
    files: dict[str, str] = field(default_factory=dict)  # path -> content
    refused: list[str] = field(default_factory=list)  # named refusals (allowed, not acknowledged)
    acknowledged: int = 0

    @property
    def owner(self) -> str:
        return f"w{self.number}"


def _vector(rng: np.random.Generator) -> list[float]:
    return rng.standard_normal(DIM).astype(np.float32).tolist()


def _write(brain: Brain, w: Writer, door: str, step: int, rng: random.Random, vectors: np.random.Generator) -> None:
    """One commit of ``door`` by writer ``w``; its model is moved only once the write is acknowledged."""
    live = sorted(w.rows)
    if door in ("add", "addMany") or len(live) < 3:
        keys = [f"{w.owner}-{step}-{i}" for i in range(1 if door == "add" else 3)]
        items = [
            {
                "type": "thing",
                "id": k,
                "vector": _vector(vectors),
                "metadata": {"owner": w.owner, "n": rng.randint(0, 99)},
            }
            for k in keys
        ]
        if door == "add":
            ids = [brain.add(items[0], caller=ME)["id"]]
        else:
            ids = brain.addMany({"items": items}, caller=ME)["ids"]
        for item, id_ in zip(items, ids, strict=True):
            w.rows[item["id"]] = (id_, item["vector"], item["metadata"]["n"])
    elif door in ("update", "updateMany"):
        keys = rng.sample(live, 1 if door == "update" else 3)
        items = [
            {"id": k, "vector": _vector(vectors), "metadata": {"owner": w.owner, "n": rng.randint(0, 99)}} for k in keys
        ]
        if door == "update":
            brain.update(items[0], caller=ME)
        else:
            brain.updateMany({"items": items}, caller=ME)
        for item in items:
            w.rows[item["id"]] = (w.rows[item["id"]][0], item["vector"], item["metadata"]["n"])
    elif door in ("relate", "relateMany"):
        verb = "knows" if door == "relate" else "likes"
        pairs = [tuple(rng.sample(live, 2)) for _ in range(1 if door == "relate" else 3)]
        items = [{"from": a, "to": b, "type": verb} for a, b in pairs]
        if door == "relate":
            brain.relate(items[0], caller=ME)
        else:
            brain.relateMany({"items": items}, caller=ME)
        w.relations.update((a, b, verb) for a, b in pairs)
    elif door == "remove":
        key = rng.choice(live)
        brain.remove({"id": key}, caller=ME)
        id_, vector, _ = w.rows.pop(key)
        w.gone[key] = (id_, vector)
        w.relations = {r for r in w.relations if key not in r[:2]}
    elif door == "memory.remember":
        text = f"{w.owner} noted on step {step} that the {rng.choice(['red', 'blue', 'green'])} door sticks"
        answer = brain.call("memory.remember", {"text": text, "dedupe": False}, caller=ME)
        w.memories[answer["id"]] = text
    else:
        path, content = f"/{w.owner}/step-{step}.txt", f"{w.owner} wrote this on step {step}: {rng.random()}"
        brain.writeFile({"path": path, "content": content, "createParents": True}, caller=ME)
        w.files[path] = content


def _guarded(errors: list[str], w: Writer | None, run: Any) -> None:
    """Run one door: a named refusal is allowed (it is not acknowledged), an internal error or any other
    exception is recorded as a failure."""
    try:
        run()
        if w is not None:
            w.acknowledged += 1
    except R.InternalError:
        errors.append(traceback.format_exc())
    except R.Refusal as refusal:
        if w is not None:
            w.refused.append(type(refusal).__name__)
    except Exception:
        errors.append(traceback.format_exc())


def _read(brain: Brain, writers: list[Writer], rng: random.Random, vectors: np.random.Generator) -> None:
    """One read that builds (the first time) and reads an index the writers are moving."""
    roll = rng.randrange(4)
    if roll == 0:
        brain.find({"vector": _vector(vectors), "limit": 5})
    elif roll == 1:
        brain.aggregate({"name": "owners", "limit": 100})
    elif roll == 2:
        w = rng.choice(writers)
        held = dict(w.rows)  # the writer's own thread moves it: a copy
        if held:
            brain.traverse({"from": [rng.choice(sorted(held))], "depth": 2, "direction": "both", "limit": 100})
    else:
        brain.call("memory.recall", {"query": "which door sticks?", "limit": 3})


def _check(brain: Brain, writers: list[Writer]) -> None:
    """Every writer's acknowledged writes, read through each index they moved."""
    expected_groups = {}
    for w in writers:
        expected_groups[w.owner] = (len(w.rows), sum(n for _, _, n in w.rows.values()))
        for key, (id_, vector, n) in w.rows.items():
            got = brain.get(key, {"includeVector": True})["entity"]
            assert got is not None, f"{key} was acknowledged but is missing"
            assert (got["id"], got["metadata"]) == (id_, {"owner": w.owner, "n": n})
            assert np.array_equal(np.asarray(got["vector"], np.float32), np.asarray(vector, np.float32)), key
            hit = brain.find({"vector": vector, "limit": 1, "type": "thing"})["results"][0]
            assert hit["id"] == id_ and hit["score"] > 0.999, (key, hit["id"], hit["score"])
            traversed = brain.traverse(
                {"from": [key], "depth": 1, "direction": "out", "includeEntities": False, "limit": 1000}
            )
            near = {node["id"] for node in traversed["nodes"] if node["depth"] == 1}
            assert near == {w.rows[b][0] for a, b, _ in w.relations if a == key}, key
        for key, (id_, vector) in w.gone.items():
            assert brain.get(key)["entity"] is None, f"{key} was removed but reads"
            hits = brain.find({"vector": vector, "limit": 3})["results"]
            assert id_ not in [h["id"] for h in hits], f"{key} was removed but its vector still finds it"
        for id_, text in w.memories.items():
            assert brain.call("memory.read", {"id": id_})["memory"]["text"] == text
        for path, content in w.files.items():
            assert brain.readFile({"path": path})["content"] == content
    rows = brain.aggregate({"name": "owners", "limit": 1000})["rows"]
    got_groups = {r["groupKey"]["owner"]: (r["metrics"]["n"], r["metrics"]["total"]) for r in rows}
    assert got_groups == {o: g for o, g in expected_groups.items() if g[0]}


@pytest.mark.slow
def test_every_write_door_from_eight_threads_is_never_an_internal_error(tmp_path, tight_switch):
    """8 writers × every index-moving door, 2 readers building and reading the indexes, a memtable small enough
    to flush several times meanwhile: no exception but a named refusal, no internal error, and every
    acknowledged write shows through get, find by vector, traverse, the aggregate, memory.read and readFile,
    live and after a reopen (the snapshots the flushes wrote carry every commit's moves)."""
    path = new_store(tmp_path)
    brain = Brain.open(path, flush_bytes=96 << 10)
    brain.defineAggregate(OWNERS, caller=ME)
    writers = [Writer(t) for t in range(WRITERS)]
    errors: list[str] = []
    start, done = threading.Barrier(WRITERS + READERS), threading.Event()

    def write(w: Writer) -> None:
        rng, vectors = random.Random(w.number), np.random.default_rng(w.number)
        doors = [d for d in DOORS for _ in range(OPS // len(DOORS))]
        rng.shuffle(doors)
        start.wait()
        for step, door in enumerate(doors):
            _guarded(errors, w, lambda: _write(brain, w, door, step, rng, vectors))  # noqa: B023 (run at once)

    def read(number: int) -> None:
        rng, vectors = random.Random(100 + number), np.random.default_rng(100 + number)
        start.wait()
        while not done.is_set():
            _guarded(errors, None, lambda: _read(brain, writers, rng, vectors))

    threads = [threading.Thread(target=write, args=(w,)) for w in writers]
    readers = [threading.Thread(target=read, args=(n,)) for n in range(READERS)]
    for thread in threads + readers:
        thread.start()
    for thread in threads:
        thread.join(120)
    done.set()
    for thread in readers:
        thread.join(60)
    assert not any(thread.is_alive() for thread in threads + readers), "a writer or reader never finished"
    assert not errors, f"{len(errors)} failures; the first:\n{errors[0]}"
    # named refusals are allowed, but a run that was mostly refused would prove nothing
    assert sum(w.acknowledged for w in writers) >= 0.9 * WRITERS * OPS, [w.refused for w in writers]
    flushed = brain.state.flushed
    _check(brain, writers)
    brain.close()
    assert flushed > 0, "the memtable never flushed during the run: the snapshots were not exercised"
    with Brain.open(path) as reopened:
        _check(reopened, writers)


@pytest.mark.slow
def test_served_updatemany_from_two_connections_is_never_a_500(tmp_path):
    """Two HTTP/1.1 connections send updateMany with new vectors at once, beside a third searching by vector, to
    a ``brainy serve`` whose threads switch every microsecond (tests/procs/tight_switch.py): every update answers 200,
    no search answers 500 (one may be refused by name while the index builds), and each row then holds the last
    vector its connection sent."""
    rounds, rows = 300, 12
    with start_server(tmp_path / "served", command=(str(PROCS / "tight_switch.py"),)) as server:
        auth = (("Authorization", f"Bearer {server.key}"), ("Content-Type", "application/json"))
        rng = np.random.default_rng(7)
        keys = [[f"c{c}-{i}" for i in range(rows)] for c in range(2)]
        last: dict[str, list[float]] = {}

        def post(client: H1Client, door: str, doc: dict[str, Any]) -> Any:
            client.send(H1Client.request("POST", server.path(door), json.dumps(doc).encode(), auth))
            return client.read_answer(timeout=30)

        with H1Client(server.address) as client:
            items = [{"type": "thing", "id": k, "vector": _vector(rng)} for ks in keys for k in ks]
            answer = post(client, "addMany", {"items": items})
            assert answer.status == 200, answer.body[:500]
            last.update((item["id"], item["vector"]) for item in items)

        statuses: list[list[int]] = [[], [], []]
        bodies: list[bytes] = []
        start, done = threading.Barrier(3), threading.Event()

        def update(c: int) -> None:
            local = np.random.default_rng(c)
            with H1Client(server.address) as client:
                start.wait()
                for _ in range(rounds):
                    chosen = local.choice(rows, 3, replace=False)
                    items = [{"id": keys[c][i], "vector": _vector(local)} for i in chosen]
                    answer = post(client, "updateMany", {"items": items})
                    statuses[c].append(answer.status)
                    if answer.status == 200:
                        last.update((item["id"], item["vector"]) for item in items)
                    else:
                        bodies.append(answer.body[:500])

        def search() -> None:
            local = np.random.default_rng(9)
            with H1Client(server.address) as client:
                start.wait()
                while not done.is_set():
                    answer = post(client, "find", {"vector": _vector(local), "limit": 3})
                    statuses[2].append(answer.status)
                    if answer.status == 500 or answer.status >= 400 and answer.refusal == "InternalError":
                        bodies.append(answer.body[:500])

        writers = [threading.Thread(target=update, args=(c,)) for c in range(2)]
        searcher = threading.Thread(target=search)
        for thread in writers + [searcher]:
            thread.start()
        for thread in writers:
            thread.join(120)
        done.set()
        searcher.join(60)
        assert statuses[0] == statuses[1] == [200] * rounds, bodies[:3]
        assert not bodies and statuses[2], bodies[:3]
        assert server.alive()
        with H1Client(server.address) as client:
            for key, vector in last.items():
                client.send(H1Client.request("GET", server.path(f"get/{key}") + "?includeVector=true", None, auth[:1]))
                got = client.read_answer().result()["entity"]
                assert np.array_equal(np.asarray(got["vector"], np.float32), np.asarray(vector, np.float32)), key
