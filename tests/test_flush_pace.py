"""The flush's pace against the writes' (brainy/store/maintenance.py): the maintenance thread runs behind the
requests, and a memtable past eight flushes' worth while the flush is behind holds the next writes back."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from helpers import new_store

from brainy.engine import Brain
from brainy.store import maintenance as M

FLUSH = 64 << 10


def _filled(brain: Brain) -> int:
    """Write until the flush is behind (the test holds it back); answers the rows written."""
    n = 0
    for batch in range(200):  # 8 x 64 KiB of rows ~1 KB each: about 5 batches
        if brain.maintenance.behind():
            return n
        brain.addMany({"items": [{"type": "thing", "id": f"r{batch}-{i}", "data": "x" * 1_000} for i in range(100)]})
        n += 100
    raise AssertionError("the memtable never reached the stall mark")


def test_the_maintenance_thread_runs_behind_the_requests(tmp_path: Path) -> None:
    with Brain.open(new_store(tmp_path)) as brain:
        thread = brain.maintenance._thread
        assert thread is not None and thread.native_id is not None
        deadline = time.monotonic() + 10
        while os.getpriority(os.PRIO_PROCESS, thread.native_id) == os.getpriority(os.PRIO_PROCESS, 0):
            assert time.monotonic() < deadline, "the thread kept the process's priority"
            time.sleep(0.01)
        own = os.getpriority(os.PRIO_PROCESS, thread.native_id)
        assert own == max(M.MAINTENANCE_NICE, os.getpriority(os.PRIO_PROCESS, 0))
        assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) < own  # the caller's own is untouched


def test_a_write_waits_while_the_flush_is_behind_and_goes_on_once_it_takes_the_memtable(tmp_path: Path) -> None:
    """The test holds the flush back (its lock, as a long flush holds it): once the memtable holds eight flushes'
    worth, a write waits before it appends anything; the flush taking the memtable lets it go, and it lands."""
    with Brain.open(new_store(tmp_path), flush_bytes=FLUSH) as brain:
        assert brain.maintenance.stall_bytes == M.STALL_FLUSHES * FLUSH
        with brain.maintenance.lock:
            written = _filled(brain)
            head, held = brain.head, brain.maintenance.head.mem.bytes
            assert held >= brain.maintenance.stall_bytes
            late = threading.Thread(target=brain.add, args=({"type": "thing", "id": "late"},))
            late.start()
            late.join(1.0)
            assert late.is_alive(), "the write did not wait for the flush"
            assert brain.head == head and brain.maintenance.head.mem.bytes == held  # nothing appended meanwhile
        late.join(30)
        assert not late.is_alive(), "the write still waits after the flush took the memtable"
        assert brain.get("late")["entity"] is not None
        assert brain.get(f"r{written // 100 - 1}-99")["entity"] is not None
        assert brain.maintenance.head.mem.bytes < brain.maintenance.stall_bytes


def test_an_awrite_waits_off_the_loop(tmp_path: Path) -> None:
    """A write on the event loop waits on a worker thread: the loop keeps ticking while it waits."""
    with Brain.open(new_store(tmp_path), flush_bytes=FLUSH) as brain:
        lock = brain.maintenance.lock
        lock.acquire()
        try:
            _filled(brain)

            async def main() -> list[float]:
                ticks: list[float] = []
                writing = asyncio.create_task(brain.awrite("add", {"type": "thing", "id": "late"}))
                started = time.monotonic()
                while time.monotonic() - started < 0.5:
                    ticks.append(time.monotonic())
                    await asyncio.sleep(0.01)
                assert not writing.done(), "the write did not wait for the flush"
                lock.release()
                await asyncio.wait_for(writing, 30)
                return ticks

            ticks = asyncio.run(main())
        finally:
            if lock.locked():
                lock.release()
        assert max(b - a for a, b in zip(ticks, ticks[1:])) < 0.2
        assert brain.get("late")["entity"] is not None


def test_a_write_held_back_past_the_bound_goes_ahead(tmp_path: Path) -> None:
    with Brain.open(new_store(tmp_path), flush_bytes=FLUSH) as brain:
        with brain.maintenance.lock:
            _filled(brain)
            started = time.monotonic()
            brain.maintenance.wait_for_room(0.3)
            assert 0.3 <= time.monotonic() - started < 5
            assert brain.maintenance.behind()


def test_the_graphs_catch_up_and_the_partitioned_copy_run_behind_the_flush(tmp_path: Path, monkeypatch) -> None:
    """The vector graph's catch-up and the partitioned copy of a vector base run below every nice level, the
    flush's too (Linux's SCHED_IDLE): nothing waits for them, and at nice 19 beside the flush they took half the
    core the flush needed while the writes waited for it. The calling thread's own policy is untouched."""
    if not hasattr(os, "SCHED_IDLE"):
        pytest.skip("no SCHED_IDLE on this platform")
    from brainy.index import follower as F

    seen: dict[str, tuple[int, int]] = {}

    def policy(name: str) -> None:
        me = threading.get_native_id()
        seen[name] = (os.sched_getscheduler(me), os.getpriority(os.PRIO_PROCESS, me))

    owed = SimpleNamespace(stamp=0, slots=None, vectors=SimpleNamespace(contiguous=lambda slots: None))
    with Brain.open(new_store(tmp_path)) as brain:
        follower = brain.vector_follower
        monkeypatch.setattr(F.VectorFollower, "catch_up", lambda self: policy("catch-up"))
        monkeypatch.setattr(F.VectorFollower, "_write_partitioned", lambda self, *a: policy("copy"))
        for target, args in ((follower._catch_up_behind, ()), (follower._partition_behind, (None, owed, b""))):
            thread = threading.Thread(target=target, args=args)
            thread.start()
            thread.join(10)
    lowest = max(F.CATCH_UP_NICE, os.getpriority(os.PRIO_PROCESS, 0))
    assert seen == {"catch-up": (os.SCHED_IDLE, lowest), "copy": (os.SCHED_IDLE, lowest)}
    assert os.sched_getscheduler(threading.get_native_id()) == os.SCHED_OTHER


def test_a_close_waiting_for_the_graphs_catch_up_takes_it_out_of_sched_idle(tmp_path: Path, monkeypatch) -> None:
    """Below every nice level, a catch-up holding the graph's lock could keep a close (which waits for that lock
    to persist the graph) waiting as long as the core stays busy: the close lifts it out of SCHED_IDLE first
    (``waited_for``). Here the catch-up holds the lock until it sees that, at most 10 s."""
    if not hasattr(os, "SCHED_IDLE"):
        pytest.skip("no SCHED_IDLE on this platform")
    from brainy.index import follower as F

    seen: list[int] = []
    holding = threading.Event()
    with Brain.open(new_store(tmp_path)) as brain:
        vector = [1.0] + [0.0] * 383
        brain.add({"type": "thing", "id": "v", "vector": vector})
        brain.find({"vector": vector, "limit": 1})  # the index built
        follower = brain.vector_follower
        index = follower._proj
        assert index is not None

        def held_catch_up(self) -> None:
            with index.graph_lock:
                _until_out_of_sched_idle(seen, holding)

        monkeypatch.setattr(F.VectorFollower, "catch_up", held_catch_up)
        thread = threading.Thread(target=follower._catch_up_behind)
        thread.start()
        assert holding.wait(10)
        began = time.monotonic()
        follower.persist()  # a close's persist: it waits for the lock
        waited = time.monotonic() - began
        thread.join(10)
    assert seen == [os.SCHED_IDLE, os.SCHED_OTHER]
    assert waited < 5


def test_a_close_waiting_for_a_partitioned_copy_takes_it_out_of_sched_idle(tmp_path: Path, monkeypatch) -> None:
    """The close waits for a partitioned copy written behind (the files are the next handle's to write): it takes
    that thread out of SCHED_IDLE first. Here the copy runs until it sees that, at most 10 s."""
    if not hasattr(os, "SCHED_IDLE"):
        pytest.skip("no SCHED_IDLE on this platform")
    from brainy.index import follower as F

    seen: list[int] = []
    writing = threading.Event()

    def held_copy(self, *args) -> None:
        _until_out_of_sched_idle(seen, writing)

    owed = SimpleNamespace(stamp=0, slots=None, vectors=SimpleNamespace(contiguous=lambda slots: None))
    with Brain.open(new_store(tmp_path)) as brain:
        follower = brain.vector_follower
        monkeypatch.setattr(F.VectorFollower, "_write_partitioned", held_copy)
        follower._copying = threading.Thread(target=follower._partition_behind, args=(None, owed, b""))
        follower._copying.start()
        assert writing.wait(10)
        began = time.monotonic()
        follower.release()
        waited = time.monotonic() - began
    assert seen == [os.SCHED_IDLE, os.SCHED_OTHER]
    assert waited < 5


def _until_out_of_sched_idle(seen: list[int], started: threading.Event) -> None:
    """This thread's policy noted, ``started`` set, then waiting (at most 10 s) until another thread takes it out
    of SCHED_IDLE, its policy noted again."""
    me = threading.get_native_id()
    seen.append(os.sched_getscheduler(me))
    started.set()
    deadline = time.monotonic() + 10
    while os.sched_getscheduler(me) == os.SCHED_IDLE and time.monotonic() < deadline:
        time.sleep(0.01)
    seen.append(os.sched_getscheduler(me))


def test_a_wait_lifts_the_idle_threads_team_and_no_other() -> None:
    """An idle thread's OpenMP team (faiss's graph add, its k-means) inherits its SCHED_IDLE, and a wait that lifted
    only the thread left it at every barrier behind its workers (a compaction not done in 120 s beside the suite's
    other worker). ``waited_for`` lifts the thread and every thread it started, which carry its kernel name, to
    SCHED_OTHER at the waiter's nice where the process may raise a nice (root); another idle thread stays idle."""
    if not hasattr(os, "SCHED_IDLE"):
        pytest.skip("no SCHED_IDLE on this platform")
    import faiss
    import numpy as np

    from brainy.index import follower as F
    from brainy.store import workers as W

    ids: dict[str, int] = {}
    ready = {name: threading.Event() for name in ("team", "child", "other")}
    done = threading.Event()

    def child() -> None:
        ids["child"] = threading.get_native_id()
        ready["child"].set()
        done.wait(10)

    def team() -> None:
        W.behind_the_requests(F.CATCH_UP_NICE, idle=True)
        ids["team"] = threading.get_native_id()
        graph = faiss.IndexHNSWFlat(64, 16)
        graph.add(np.random.default_rng(5).standard_normal((2_000, 64)).astype(np.float32))  # its OpenMP pool
        started = threading.Thread(target=child)
        started.start()
        ready["team"].set()
        done.wait(10)
        started.join()

    def other() -> None:
        W.behind_the_requests(F.CATCH_UP_NICE, idle=True)
        ids["other"] = threading.get_native_id()
        ready["other"].set()
        done.wait(10)

    threads = [threading.Thread(target=team), threading.Thread(target=other)]
    for thread in threads:
        thread.start()
    try:
        assert all(event.wait(10) for event in ready.values())
        members = W._team_of(ids["team"])
        assert ids["child"] in members and ids["other"] not in members
        assert len(members) == 2 + (faiss.omp_get_max_threads() - 1)  # the thread, its child, its OpenMP workers
        assert {os.sched_getscheduler(tid) for tid in members} == {os.SCHED_IDLE}
        W.waited_for(ids["team"])
        mine = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
        nice = mine if os.geteuid() == 0 else max(F.CATCH_UP_NICE, mine)
        assert {(os.sched_getscheduler(tid), os.getpriority(os.PRIO_PROCESS, tid)) for tid in members} == {
            (os.SCHED_OTHER, nice)
        }
        assert os.sched_getscheduler(ids["other"]) == os.SCHED_IDLE
    finally:
        done.set()
        for thread in threads:
            thread.join(10)
