"""Read-your-writes on the writer (DOORS 11, ``ProjectionBehindError``; brainy/index/follower.py): on the process
that holds the lease, every read door sees every write it has acknowledged, in the next request, never
``ProjectionBehindError``. A real ``brainy serve`` on loopback, a fresh brain, one keep-alive HTTP/1.1 connection;
each index is read straight after the write it must reflect: postings, words, vectors, graph, aggregates, memory.
"""

from __future__ import annotations

import asyncio
import json
import random
import threading
import time
from typing import Any

import numpy as np
import pytest
from helpers import new_store
from server import H1Client, ServerProcess, start_server

from brainy.auth.principal import Principal
from brainy.host.dispatch import Dispatcher, Outcome
from brainy.host.pool import Pool

BATCHES, ROWS = 5, 1_000  # past the size a served read builds inline: the index is built off the read path


@pytest.fixture(scope="module")
def served(tmp_path_factory) -> ServerProcess:
    with start_server(tmp_path_factory.mktemp("ryw") / "served") as server:
        yield server


def call(client: H1Client, server: ServerProcess, door: str, body: dict[str, Any], method: str = "POST") -> Any:
    headers = (("Authorization", f"Bearer {server.key}"), ("Content-Type", "application/json"))
    data = json.dumps(body).encode() if method == "POST" else None
    client.send(H1Client.request(method, server.path(door), data, headers))
    answer = client.read_answer()
    assert answer.status == 200, (door, answer.status, answer.refusal, answer.result())
    return answer.result()


def unit(rng: random.Random) -> list[float]:
    v = np.array([rng.gauss(0, 1) for _ in range(384)], dtype=np.float32)
    return (v / np.linalg.norm(v)).tolist()


@pytest.mark.slow
def test_every_index_answers_the_write_it_acknowledged_in_the_next_request(served):
    rng = random.Random(7)
    with H1Client(served.address) as client:
        call(
            client,
            served,
            "defineAggregate",
            {
                "name": "per_batch",
                "source": {"type": "product"},
                "groupBy": ["batch"],
                "metrics": {"n": {"op": "count"}},
            },
        )
        for batch in range(BATCHES):
            items = [
                {
                    "id": f"p{batch}-{i}",
                    "type": "product",
                    "data": f"item {i} of batch {batch} word{batch}x{i}",
                    "metadata": {"batch": batch, "i": i},
                    "vector": unit(rng),
                }
                for i in range(ROWS)
            ]
            ids = call(client, served, "addMany", {"items": items})["ids"]
            last = {**items[-1], "id": ids[-1]}
            # vectors: the row just written is its own nearest neighbour
            found = call(client, served, "find", {"vector": last["vector"], "limit": 10})
            assert found["results"][0]["id"] == last["id"], found.get("legs")
            # postings: every row of the batch, by its metadata
            counted = call(client, served, "find", {"where": {"batch": batch}, "limit": 1, "searchMode": "metadata"})
            assert counted["results"] and counted.get("total", ROWS) == ROWS
            # words: the batch's own word
            words = call(client, served, "find", {"query": f"word{batch}x{ROWS - 1}", "searchMode": "text"})
            assert [r["id"] for r in words["results"]][:1] == [last["id"]]
            # aggregates: the batch counted
            groups = call(client, served, "aggregate", {"name": "per_batch", "limit": 100})
            assert {r["groupKey"]["batch"]: r["count"] for r in groups["rows"]} == {b: ROWS for b in range(batch + 1)}
        # graph: a relation, walked in the next request
        call(client, served, "relate", {"from": "p0-0", "to": "p4-999", "type": "relatedTo"})
        walked = call(client, served, "traverse", {"from": "p0-0", "depth": 1})
        assert last["id"] in {n["id"] for n in walked["nodes"]}
        # memory: remembered, then recalled
        kept = call(client, served, "memory/remember", {"text": "The deploy key lives in the blue vault"})
        recalled = call(client, served, "memory/recall", {"query": "Where is the deploy key?"})
        assert recalled["memories"][0]["memory"]["id"] == kept["id"]


@pytest.mark.slow
def test_thirty_vector_finds_after_ingest_are_never_refused(tmp_path):
    """The measured case: a new brain, five addMany of 1,000 rows with vectors, then 30 finds at once after."""
    rng = random.Random(11)
    with start_server(tmp_path / "served") as server, H1Client(server.address) as client:
        for batch in range(BATCHES):
            items = [{"type": "concept", "data": f"r{batch}-{i}", "vector": unit(rng)} for i in range(ROWS)]
            call(client, server, "addMany", {"items": items})
        probe = unit(rng)
        for _ in range(30):
            assert len(call(client, server, "find", {"vector": probe, "limit": 10})["results"]) == 10


def test_a_served_write_is_answered_before_its_followers_move_and_the_reads_after_it_wait_for_them(tmp_path):
    """A served write is answered once its commit is durable, before the followers move up to it (held here at a
    gate on the way into their step, the real step behind it); a read door of that brain that comes meanwhile waits
    for them and then sees the write (without the wait it answered the head before the add: no row), as does a read
    in process; a read of another brain does not wait."""
    pool = Pool({"main": new_store(tmp_path), "other": new_store(tmp_path, "other")})
    brain = pool.resolve("main", for_write=True)  # admitted as the server admits it: served
    state = brain.state
    real, gate, held = state.state_lock, threading.Event(), threading.Event()

    class Gated:
        """The state lock as the commit path takes it (the followers hold the lock itself): the fsync worker's
        first taking waits at the gate."""

        def __enter__(self) -> None:
            if threading.current_thread().name.startswith("brainy-fsync") and not held.is_set():
                held.set()
                assert gate.wait(10)
            real.acquire()

        def __exit__(self, *exc: object) -> None:
            real.release()

    state.state_lock = Gated()
    dispatcher = Dispatcher(pool)
    person = Principal.static_key("person:ada")
    added = asyncio.run(dispatcher.dispatch(person, "add", "main", None, {"type": "thing", "id": "c"}))
    assert added.refusal is None and held.wait(10)  # answered; the followers held
    assert state.followed < state.acknowledged and not state.until_visible(0.01)
    reads: dict[str, Any] = {}

    def served_find() -> None:
        reads["served"] = dispatcher.call(person, "find", "main", None, {"where": {"type": "thing"}})

    def in_process_find() -> None:
        reads["in process"] = brain.find({"where": {"type": "thing"}})

    readers = [threading.Thread(target=served_find), threading.Thread(target=in_process_find)]
    for reader in readers:
        reader.start()
    other = dispatcher.call(person, "counts", "other", None, {})
    assert isinstance(other, Outcome) and other.answer is not None and other.answer["brain"] == "other"
    time.sleep(0.05)
    assert all(reader.is_alive() for reader in readers) and not reads
    gate.set()
    for reader in readers:
        reader.join(10)
    served = reads["served"]
    assert isinstance(served, Outcome) and served.refusal is None
    assert (
        [r["entity"]["key"] for r in served.answer["results"]]
        == ["c"]
        == [r["entity"]["key"] for r in reads["in process"]["results"]]
    )
    assert state.followed == state.acknowledged == brain.head == served.answer["generation"]
    state.state_lock = real
    pool.close_all()
