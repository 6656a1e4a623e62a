"""Concurrency laws: commits share fsyncs, reads never wait on one, and an event loop is never blocked by one."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time

import pytest
from helpers import StandInShipper, new_store
from server import H1Client, start_server

from brainy.engine import Brain


@pytest.fixture
def counted_fsync(monkeypatch):
    """Wrap os.fdatasync to count calls and optionally slow them down (the real call still runs)."""
    real = os.fdatasync
    state = {"calls": 0, "delay": 0.0}

    def fdatasync(fd):
        state["calls"] += 1
        if state["delay"]:
            time.sleep(state["delay"])
        real(fd)

    monkeypatch.setattr(os, "fdatasync", fdatasync)
    return state


def test_concurrent_commits_share_fsyncs(tmp_path, counted_fsync):
    """Eight threads committing at once are acknowledged with fewer fsyncs than commits (group commit)."""
    brain = Brain.open(new_store(tmp_path))
    counted_fsync["delay"] = 0.002
    per_thread, threads = 25, 8

    def work(t):
        for i in range(per_thread):
            brain.add({"type": "thing", "id": f"t{t}-{i}"})

    pool = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
    for th in pool:
        th.start()
    for th in pool:
        th.join()
    total = per_thread * threads
    assert brain.head == total
    assert counted_fsync["calls"] < total / 2, counted_fsync
    assert all(brain.get(f"t{t}-{i}")["entity"] for t in range(threads) for i in range(per_thread))
    brain.close()


def test_reads_do_not_wait_for_a_commits_fsync(tmp_path, counted_fsync):
    """While a commit waits on a slow fsync, a read answers at once, without the unacknowledged row."""
    brain = Brain.open(new_store(tmp_path))
    brain.add({"type": "thing", "id": "before"})
    counted_fsync["delay"] = 0.5
    writer = threading.Thread(target=brain.add, args=({"type": "thing", "id": "pending"},))
    writer.start()
    time.sleep(0.05)
    started = time.monotonic()
    got = brain.get("pending")
    assert time.monotonic() - started < 0.2
    assert got["entity"] is None and got["generation"] == 1
    assert brain.counts()["entities"] == 1
    writer.join()
    assert brain.get("pending")["entity"] is not None and brain.head == 2
    counted_fsync["delay"] = 0
    brain.close()


def test_awrite_never_blocks_the_event_loop(tmp_path, counted_fsync):
    """awrite waits for its fsync off the loop: a ticker on the same loop keeps ticking through slow fsyncs."""
    brain = Brain.open(new_store(tmp_path))
    counted_fsync["delay"] = 0.1

    async def main():
        ticks = []
        stop = asyncio.Event()

        async def ticker():
            while not stop.is_set():
                ticks.append(time.monotonic())
                await asyncio.sleep(0.01)

        task = asyncio.create_task(ticker())
        answers = await asyncio.gather(*(brain.awrite("add", {"type": "thing", "id": f"a{i}"}) for i in range(5)))
        stop.set()
        await task
        return ticks, answers

    ticks, answers = asyncio.run(main())
    gaps = [b - a for a, b in zip(ticks, ticks[1:])]
    assert max(gaps) < 0.08, max(gaps)
    assert sorted(a["generation"] for a in answers) == [1, 2, 3, 4, 5]
    assert brain.head == 5
    counted_fsync["delay"] = 0
    brain.close()


def durable_waits(brain: Brain, monkeypatch) -> list[int]:
    """The generations of the durable waits ``brain``'s commit path is asked for from now on (the real wait runs)."""
    real = brain.commits.durable_at
    calls: list[int] = []

    def durable_at(seq, generation, acknowledge=None):
        calls.append(generation)
        real(seq, generation, acknowledge)

    monkeypatch.setattr(brain.commits, "durable_at", durable_at)
    return calls


def test_awrites_waiting_together_go_to_the_fsync_workers_as_one_call(tmp_path, counted_fsync, monkeypatch):
    """The writes of one loop that commit while a durable wait is on the fsync workers wait together and go as the
    next call, not one call each: 20 adds at once over a 0.1 s fsync are acknowledged by two or three waits there,
    each answer once its own commit is durable. A write cancelled while it waits leaves the others answered and its
    commit made durable all the same."""
    brain = Brain.open(new_store(tmp_path))
    calls = durable_waits(brain, monkeypatch)
    counted_fsync["delay"] = 0.1

    async def main():
        tasks = [asyncio.create_task(brain.awrite("add", {"type": "thing", "id": f"a{i}"})) for i in range(20)]
        await asyncio.sleep(0.03)  # every one committed, the first's wait on a worker, the others waiting here
        tasks[7].cancel()
        return await asyncio.gather(*tasks, return_exceptions=True)

    answers = asyncio.run(main())
    assert isinstance(answers[7], asyncio.CancelledError)
    del answers[7]
    assert sorted(a["generation"] for a in answers) == [g for g in range(1, 21) if g != 8]
    assert len(calls) <= 3 and calls[-1] == 20, calls
    assert brain.head == 20 and brain.get("a7")["entity"] is not None  # the cancelled write's commit is durable
    counted_fsync["delay"] = 0
    brain.close()


def test_a_shipped_brains_writes_that_come_together_wait_as_one_group(tmp_path, monkeypatch):
    """With a shipper every durable wait is a round trip to the store, so the first write of a burst does not go
    alone: the writes the loop runs in the same pass commit first and go with it, one wait for all 20."""
    brain = Brain.open(new_store(tmp_path))
    brain.commits.shipping = shipper = StandInShipper()
    calls = durable_waits(brain, monkeypatch)

    async def main():
        return await asyncio.gather(*(brain.awrite("add", {"type": "thing", "id": f"s{i}"}) for i in range(20)))

    answers = asyncio.run(main())
    assert sorted(a["generation"] for a in answers) == list(range(1, 21))
    assert calls == [20] and shipper.asked == [20]
    brain.commits.shipping = None
    brain.close()


def test_a_served_brain_killed_under_concurrent_writes_keeps_every_write_it_acknowledged(tmp_path):
    """The crash law through the served road, where a loop's writes wait to be durable as groups: 16 connections
    add entities as fast as they are answered, the server is SIGKILLed among them, and the store opened afterwards
    holds every entity whose add was answered 200, at or before the generation its answer named."""
    acknowledged: dict[str, int] = {}
    stop = threading.Event()

    def writer(server, w: int) -> None:
        with H1Client(server.address) as client:
            for i in range(10_000):  # bounded: the kill ends it long before
                if stop.is_set():
                    return
                id_ = f"w{w}-{i}"
                body = f'{{"type": "thing", "id": "{id_}"}}'.encode()
                headers = (("authorization", f"Bearer {server.key}"), ("content-type", "application/json"))
                try:
                    client.send(H1Client.request("POST", server.path("add"), body, headers))
                    answer = client.read_answer()
                except (ConnectionError, OSError, AssertionError):
                    return  # the server died with this add in flight: not acknowledged
                assert answer.status == 200, answer
                acknowledged[id_] = answer.doc["generation"]

    with start_server(tmp_path) as server:
        threads = [threading.Thread(target=writer, args=(server, w)) for w in range(16)]
        for thread in threads:
            thread.start()
        deadline = time.monotonic() + 30
        while len(acknowledged) < 400 and time.monotonic() < deadline:
            time.sleep(0.01)
        os.kill(server.proc.pid, signal.SIGKILL)
        server.proc.wait()
        stop.set()
        for thread in threads:
            thread.join()
    assert len(acknowledged) >= 400
    brain = Brain.open(server.store)
    try:
        for id_, generation in acknowledged.items():
            assert brain.get(id_)["entity"] is not None, id_
            then = brain.asOf({"generation": generation, "read": {"door": "get", "id": id_}})
            assert then["result"]["entity"] is not None, (id_, generation)
    finally:
        brain.close()
