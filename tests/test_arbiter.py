"""The residency arbiter (seed 001, "The pool, and the arbiter under it"; seed 000, "The writer model, and
the pool"; DOORS.md 10.2): the budget derived from a control-group tree, eviction order and the in-flight
exclusion, a door never losing its brain, the writer lease kept across an eviction, SIGTERM closing every
brain cleanly, and the first door after a SIGKILL answering every acknowledged write.

Server tests run a real ``brainy serve`` on a loopback port (``launch``); the derivation reads real files
laid out as ``/proc`` and ``/sys/fs/cgroup`` are; the in-flight test drives a real pool over real stores.
"""

from __future__ import annotations

import gc
import json
import signal
import threading
import time
import weakref
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from launch import (
    HOST,
    Served,
    launch,  # noqa: F401  (a pytest fixture, used by name)
    place_keys,
    wait_until,
)

from brainy.contract import refusals as R
from brainy.engine import Brain, init_store
from brainy.engine import brain as brain_module
from brainy.host import arbiter as A
from brainy.host.pool import Pool
from brainy.index import chain
from brainy.store.files import read_document

PERSON = "bky_arbiter_person_every_brain1"
OPERATOR = "bks_arbiter_operator_service_k1"
LINES = [f"{PERSON}  person:pat  *", f"{OPERATOR}  service:operator  !"]
NO_MODEL = {"BRAINY_EMBED_MODEL_DIR": "/nonexistent-model-dir"}  # rows stored without vectors: no model runs
GIB = 1 << 30


# --- the budget, derived from a control-group tree ---------------------------------------------------------


def fake_proc(
    root: Path,
    cgroup: str,
    total_kb: int | None = 8 * (1 << 20),
    available_kb: int | None = None,
    rss_kb: int = 100_000,
) -> Path:
    proc = root / "proc"
    (proc / "self").mkdir(parents=True)
    (proc / "self" / "cgroup").write_text(cgroup)
    (proc / "self" / "status").write_text(f"Name:\tbrainy\nVmRSS:\t{rss_kb} kB\n")
    lines = []
    if total_kb is not None:
        lines.append(f"MemTotal:       {total_kb} kB")
    if available_kb is not None:
        lines.append(f"MemAvailable:   {available_kb} kB")
    if lines:
        (proc / "meminfo").write_text("\n".join(lines) + "\n")
    return proc


def limit_file(path: Path, value: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(value + "\n")


def test_the_smallest_limit_on_the_group_or_any_above_it_wins_v2(tmp_path: Path) -> None:
    """cgroup v2: the process's own group says max, its parent 2 GiB, the grandparent 4 GiB: the budget is
    4/5 of (2 GiB less the baseline), named ``cgroup2:/system.slice``."""
    fs = tmp_path / "cgroup"
    limit_file(fs / "system.slice" / "brainy.service" / "memory.max", "max")
    limit_file(fs / "system.slice" / "memory.max", str(2 * GIB))
    limit_file(fs / "memory.max", str(4 * GIB))
    proc = fake_proc(tmp_path, "0::/system.slice/brainy.service\n", available_kb=6 * (1 << 20))
    budget = A.derive(proc, fs, environ={})
    baseline = 100_000 * 1024
    room = 2 * GIB - baseline
    assert (budget.limit_bytes, budget.limit_source) == (2 * GIB, "cgroup2:/system.slice")
    assert budget.baseline_bytes == baseline and budget.available_bytes == 6 * GIB
    assert budget.budget_bytes == room - room // 5 and not budget.floored and not budget.overridden


def test_a_v1_memory_hierarchy_is_read_and_no_limit_is_none(tmp_path: Path) -> None:
    """cgroup v1: ``memory.limit_in_bytes`` on the memory hierarchy; the kernel's page-rounded 2**63 "no limit"
    above it is no limit. MemAvailable caps the room when it is the smaller."""
    fs = tmp_path / "cgroup"
    limit_file(fs / "memory" / "docker" / "abc" / "memory.limit_in_bytes", str(GIB))
    limit_file(fs / "memory" / "docker" / "memory.limit_in_bytes", "9223372036854771712")
    proc = fake_proc(tmp_path, "12:cpu,cpuacct:/docker/abc\n7:memory:/docker/abc\n", available_kb=512 * 1024, rss_kb=0)
    budget = A.derive(proc, fs, environ={})
    assert (budget.limit_bytes, budget.limit_source) == (GIB, "cgroup1:/docker/abc")
    room = 512 << 20
    assert budget.budget_bytes == room - room // 5


def test_no_group_limit_falls_back_to_total_memory(tmp_path: Path) -> None:
    fs = tmp_path / "cgroup"
    limit_file(fs / "memory.max", "max")
    proc = fake_proc(tmp_path, "0::/\n", total_kb=16 * (1 << 20), available_kb=None, rss_kb=0)
    budget = A.derive(proc, fs, environ={})
    assert (budget.limit_bytes, budget.limit_source) == (16 * GIB, "meminfo:MemTotal")
    assert budget.budget_bytes == 16 * GIB - 16 * GIB // 5


def test_nothing_published_is_floored_and_an_override_replaces_the_derived_figure(tmp_path: Path) -> None:
    proc = fake_proc(tmp_path, "", total_kb=None)
    floored = A.derive(proc, tmp_path / "nothing", environ={})
    assert floored.floored and floored.budget_bytes == A.FLOOR_BYTES and floored.limit_source == "none"
    tiny = A.derive(fake_proc(tmp_path / "t", "", total_kb=1024, rss_kb=0), tmp_path / "nothing", environ={})
    assert tiny.floored and tiny.budget_bytes == A.FLOOR_BYTES  # a derived figure below the floor is floored
    given = A.derive(proc, tmp_path / "nothing", environ={A.OVERRIDE: "12345"})
    assert given.overridden and given.budget_bytes == 12345


# --- eviction order and the in-flight exclusion (a real pool over real stores) -----------------------------


def test_eviction_ranks_the_idle_first_and_never_closes_a_brain_with_a_door_in_flight(tmp_path: Path) -> None:
    """Under a budget nothing fits in, a pass closes brains until one is left: never the one a door is in
    flight on (here ``a``, touched first, so the most idle), and among the rest the most idle first. A writer
    evicted keeps its lease; its next door readmits it with its rows."""
    for name in "abcd":
        init_store(tmp_path / name)
    pool = Pool(brains_dir=tmp_path, budget=A.Budget(1, "test", None, None, 0, overridden=True))
    try:
        pool.arbiter.stop()  # every pass is this test's own
        for name in "abcd":
            entered = pool.enter(name)
            pool.resolve(name, True).write("add", {"type": "thing", "id": f"{name}1"}, caller="person:pat")
            pool.left(entered)
            time.sleep(0.05)
        entered = pool.enter("a")  # a door in flight on the most idle brain
        assert pool.arbiter.rebalance() == ["b", "c", "d"]
        assert [e.name for e in pool.resident_entries()] == ["a"]
        assert pool.report()["writerBrains"] == ["a", "b", "c", "d"]
        assert (tmp_path / "b" / "locks" / "_writer.lock").exists()  # the lease outlives the residency
        assert not (tmp_path / "b" / "locks" / "_writer.close").exists()
        pool.left(entered)
        entered = pool.enter("b")
        assert pool.resolve("b", False).get("b1")["entity"]["key"] == "b1"
        assert pool.resolve("b", False).role == "writer"
        pool.left(entered)
    finally:
        pool.close_all()
    for name in "abcd":
        assert (tmp_path / name / "locks" / "_writer.close").exists(), name
        assert not (tmp_path / name / "locks" / "_writer.lock").exists(), name


def test_the_only_open_brain_is_never_closed_for_budget(tmp_path: Path) -> None:
    init_store(tmp_path / "solo")
    pool = Pool(brains_dir=tmp_path, budget=A.Budget(1, "test", None, None, 0, overridden=True))
    try:
        pool.arbiter.stop()
        entered = pool.enter("solo")
        pool.resolve("solo", False)
        pool.left(entered)
        assert pool.arbiter.rebalance() == [] and pool.arbiter.rebalance() == []
        assert [e.name for e in pool.resident_entries()] == ["solo"]
        assert pool.report()["overBudgetAdmissions"] == 1  # once per episode, not once per pass
    finally:
        pool.close_all()


def test_a_pass_over_budget_closes_down_to_the_low_water_mark(tmp_path: Path, monkeypatch: Any) -> None:
    """Hysteresis: a pass that must close closes until the brains hold LOW_WATER of the budget, not just under
    it, so the next admission (and the memory a background build borrows) does not put it over again at once.
    Ten brains holding 110 each against a budget of 1,000: the budget alone would close one, the mark closes
    two (990 is over 900; 880 is not)."""
    names = [f"b{i}" for i in range(10)]
    for name in names:
        init_store(tmp_path / name)
    pool = Pool(brains_dir=tmp_path, budget=A.Budget(1000, "test", None, None, 0, overridden=True))
    try:
        pool.arbiter.stop()
        for name in names:
            entered = pool.enter(name)
            pool.resolve(name, False)
            pool.left(entered)
        proc = fake_proc(tmp_path / "fake", "0::/\n", rss_kb=0)
        (proc / "self" / "status").write_text("Name:\tbrainy\nVmRSS:\t1100 kB\n")
        pool.arbiter.proc, pool.arbiter.budget = proc, A.Budget(1000 * 1024, "test", None, None, 0, overridden=True)
        monkeypatch.setattr(pool.arbiter, "shares", lambda entries: {e.name: 100 * 1024 for e in entries})
        assert A.LOW_WATER == 0.9
        assert len(pool.arbiter.rebalance()) == 2
        assert len(pool.resident_entries()) == 8
    finally:
        pool.close_all()


def test_an_evicted_brain_is_freed_at_once_with_all_it_held(tmp_path: Path) -> None:
    """An eviction frees the brain by reference counting as the pool drops it, not at the next full
    collection (its followers refer to it weakly; its head snapshot, which a transport's read shares, is dropped
    at close): with the collector off, nothing of a reader's or a writer's handle outlives its eviction, and the
    allocator is asked to give the pages back."""
    for name in ("r", "w"):
        init_store(tmp_path / name)
        with Brain.open(tmp_path / name) as brain:
            brain.addMany({"items": [{"type": "document", "id": f"n{i}", "data": f"note {i}"} for i in range(50)]})
    pool = Pool(brains_dir=tmp_path, budget=A.Budget(1 << 40, "test", None, None, 0, overridden=True))
    gc.disable()
    try:
        pool.arbiter.stop()
        handles = []
        for name, for_write in (("r", False), ("w", True)):
            entered = pool.enter(name)
            brain = pool.resolve(name, for_write)
            assert len(brain.find({"where": {"type": "document"}, "limit": 60})["results"]) == 50  # projections built
            assert brain.wire_head().generation == brain.head  # as every served read holds it
            pool.left(entered)
            handles.append(weakref.ref(brain))
            del brain
        for entry in pool.resident_entries():
            assert pool.evict(entry, "test")
        assert [h() for h in handles] == [None, None]
        assert A.give_back() == (A._TRIM is not None)
        entered = pool.enter("w")  # the writer readmits with its kept lease and its rows
        assert pool.resolve("w", False).get("n49")["entity"]["key"] == "n49"
        pool.left(entered)
    finally:
        gc.enable()
        pool.close_all()


def test_an_eviction_leaves_a_small_tail_for_the_readmission_and_flushes_a_large_one(
    tmp_path: Path, monkeypatch: Any
) -> None:
    """An evicted writer whose memtable holds less than EVICT_TAIL_BYTES is closed without a flush (its tail is in
    the log, durable already), so the arbiter's closes cost no fsyncs; its readmission replays that tail and
    answers its rows. A memtable holding that much is flushed by the eviction, as a close flushes."""
    init_store(tmp_path / "w")
    pool = Pool(brains_dir=tmp_path, budget=A.Budget(1 << 40, "test", None, None, 0, overridden=True))
    try:
        pool.arbiter.stop()
        entered = pool.enter("w")
        pool.resolve("w", True).write("add", {"type": "thing", "id": "w1"}, caller="person:pat")
        pool.left(entered)
        [entry] = pool.resident_entries()
        assert pool.evict(entry, "test")
        assert read_document(tmp_path / "w" / "MANIFEST")["generation"] == 0  # nothing flushed
        entered = pool.enter("w")
        readmitted = pool.resolve("w", False)
        assert readmitted.recovery == {"replayedGenerations": 1} and readmitted.get("w1")["entity"]["key"] == "w1"
        del readmitted
        pool.left(entered)
        monkeypatch.setattr(brain_module, "EVICT_TAIL_BYTES", 1)
        assert pool.evict(entry, "test")
        assert read_document(tmp_path / "w" / "MANIFEST")["generation"] == 1
        entered = pool.enter("w")
        assert pool.resolve("w", False).recovery == {"replayedGenerations": 0}
        pool.left(entered)
    finally:
        pool.close_all()


# --- the served pool ---------------------------------------------------------------------------------------


@pytest.fixture
def keys(tmp_path: Path) -> Path:
    path = tmp_path / "cfg" / "keys"
    place_keys(path, LINES)
    return path


def health_pool(server: Served) -> dict[str, Any]:
    status, doc, _, _ = server.request("GET", "/v1/health", OPERATOR)
    assert status == 200, doc
    return doc["pool"]


def brains_dir(tmp_path: Path, names: list[str]) -> Path:
    root = tmp_path / "brains"
    root.mkdir()
    for name in names:
        init_store(root / name)
    return root


@pytest.mark.slow
def test_health_reports_the_budget_and_the_sweep_evicts_without_losing_a_door(
    tmp_path: Path, keys: Path, launch: Callable[..., Served]
) -> None:
    """A budget of one byte (the override) over twelve brains: concurrent writes and reads on all of them
    are every one answered (a door never loses its brain), the arbiter keeps evicting, every acknowledged
    write reads back, and ``/v1/health`` carries DOORS 10.2's pool block with the override named."""
    names = [f"w{i:02d}" for i in range(12)]
    root = brains_dir(tmp_path, names)
    server = launch(
        "serve",
        "--listen",
        f"{HOST}:0",
        "--brains-dir",
        str(root),
        "--keys",
        str(keys),
        env={A.OVERRIDE: "1", **NO_MODEL},
    )

    def work(i: int) -> list[tuple[str, str]]:
        written = []
        for round_ in range(4):
            name = names[(i + round_ * 5) % len(names)]
            id_ = f"t{i}-{round_}"
            status, doc, _, _ = server.request(
                "POST", f"/v1/brains/{name}/add", PERSON, {"type": "thing", "id": id_, "data": f"sweep {i}"}
            )
            assert status == 200, doc
            written.append((name, id_))
            status, doc, _, _ = server.request("GET", f"/v1/brains/{name}/get/{id_}", PERSON)
            assert status == 200 and doc["entity"]["key"] == id_, doc
        return written

    with ThreadPoolExecutor(6) as threads:
        written = [w for part in threads.map(work, range(12)) for w in part]
    assert wait_until(lambda: len(health_pool(server)["resident"]) <= 1, 10.0) is not None
    for name, id_ in written:  # readmission answers every acknowledged write
        status, doc, _, _ = server.request("GET", f"/v1/brains/{name}/get/{id_}", PERSON)
        assert status == 200 and doc["entity"]["key"] == id_, (name, id_, doc)
    pool = health_pool(server)
    assert set(pool) >= {
        "budgetBytes",
        "derivation",
        "floored",
        "overridden",
        "heldBytes",
        "knownBrains",
        "resident",
        "writers",
        "writerBrains",
        "overBudgetAdmissions",
    }
    assert set(pool["derivation"]) == {"limitSource", "limitBytes", "availableBytes", "rssBytes", "baselineBytes"}
    assert pool["budgetBytes"] == 1 and pool["overridden"] and pool["knownBrains"] == 12
    assert pool["writers"] == 12 and pool["writerBrains"] == names  # the writer role outlives a residency
    assert pool["heldBytes"] == max(0, pool["derivation"]["rssBytes"] - pool["derivation"]["baselineBytes"])
    assert "evicted" in server.stderr() and "replaces the derived" in server.stderr()
    status, doc, _, _ = server.request("GET", "/v1/brains", OPERATOR)
    assert status == 200 and all(b["writer"] for b in doc["brains"]) and len(doc["brains"]) == 12
    assert server.stop() == 0
    for name in names:  # SIGTERM: every brain, resident or evicted, closed cleanly
        assert (root / name / "locks" / "_writer.close").exists(), name
        assert not (root / name / "locks" / "_writer.lock").exists(), name


class _StreamServer:
    """What the change-stream tests' SSE reader asks of a server, for one brain of a pool server."""

    def __init__(self, server: Served, brain: str) -> None:
        self.address, self.key, self.brain = (HOST, server.port), PERSON, brain

    def path(self, door: str) -> str:
        return f"/v1/brains/{self.brain}/{door}"


@pytest.mark.slow
def test_a_held_change_stream_never_loses_its_brain_to_an_eviction(
    tmp_path: Path, keys: Path, launch: Callable[..., Served]
) -> None:
    """A budget of one byte over three brains: while a held change stream follows ``a``, writes to ``b`` and
    ``c`` evict ``a`` again and again, and writes to ``a`` readmit it. The stream looks its brain up at
    every drain, so it carries every commit of ``a``, in order, none lost or repeated, across the evictions."""
    from test_change_stream import SseReader  # the raw-socket SSE reader of the change-stream tests

    root = brains_dir(tmp_path, ["a", "b", "c"])
    server = launch(
        "serve",
        "--listen",
        f"{HOST}:0",
        "--brains-dir",
        str(root),
        "--keys",
        str(keys),
        env={A.OVERRIDE: "1", **NO_MODEL},
    )
    status, doc, _, _ = server.request("POST", "/v1/brains/a/add", PERSON, {"type": "thing", "id": "a0"})
    assert status == 200, doc
    a0 = doc["id"]
    reader = SseReader(_StreamServer(server, "a"), "?since=0")
    try:
        assert reader.status == 200
        first, caught = reader.events(2)
        assert first["data"]["id"] == a0 and caught["event"] == "caught-up"
        for i in range(1, 9):
            for other in ("b", "c"):  # the arbiter closes a (idle, no door in flight) for these
                status, doc, _, _ = server.request(
                    "POST", f"/v1/brains/{other}/add", PERSON, {"type": "thing", "id": f"{other}{i}"}
                )
                assert status == 200, doc
            assert wait_until(lambda: "a" not in health_pool(server)["resident"], 10.0) is not None
            status, doc, _, _ = server.request("POST", "/v1/brains/a/add", PERSON, {"type": "thing", "id": f"a{i}"})
            assert status == 200, doc
            frame = reader.events(1, timeout=15.0)[0]
            while frame.get("event") != "change":  # a heartbeat may come between two frames
                frame = reader.events(1, timeout=15.0)[0]
            assert frame["data"]["id"] == doc["id"], frame
            assert frame["id"] == f"{doc['generation']}.0"
    finally:
        reader.close()
    assert server.stderr().count("brain a evicted") >= 8
    assert server.stop() == 0


@pytest.mark.slow
def test_sigterm_with_fifty_open_brains_closes_every_one_cleanly(
    tmp_path: Path, keys: Path, launch: Callable[..., Served]
) -> None:
    names = [f"s{i:02d}" for i in range(50)]
    root = brains_dir(tmp_path, names)
    server = launch("serve", "--listen", f"{HOST}:0", "--brains-dir", str(root), "--keys", str(keys), env=NO_MODEL)
    for name in names:
        status, doc, _, _ = server.request("POST", f"/v1/brains/{name}/add", PERSON, {"type": "thing", "id": "x"})
        assert status == 200, doc
    assert len(health_pool(server)["resident"]) == 50
    assert server.stop() == 0
    for name in names:
        close = json.loads((root / name / "locks" / "_writer.close").read_text())
        assert close["generation"] == 1, (name, close)
        assert not (root / name / "locks" / "_writer.lock").exists(), name
        with Brain.attach(root / name) as brain:  # flushed: nothing is left in the log to replay
            assert brain.flushed == brain.head == 1 and brain.get("x")["entity"]["key"] == "x"


@pytest.mark.slow
def test_a_thousand_names_open_nothing_at_start(tmp_path: Path, keys: Path, launch: Callable[..., Served]) -> None:
    """``--brains-dir`` with 1,000 brains: the names are known at once and none is opened until asked for."""
    root = tmp_path / "brains"
    root.mkdir()
    for i in range(1000):
        if i != 500:
            (root / f"b{i:04d}").mkdir()  # names only: nothing here reads inside them until asked
    init_store(root / "b0500")
    server = launch("serve", "--listen", f"{HOST}:0", "--brains-dir", str(root), "--keys", str(keys), env=NO_MODEL)
    pool = health_pool(server)
    assert pool["knownBrains"] == 1000 and pool["resident"] == []
    status, doc, _, _ = server.request("GET", "/v1/brains/b0500/counts", PERSON)
    assert status == 200, doc
    assert health_pool(server)["resident"] == ["b0500"]


# --- the first door after a SIGKILL -------------------------------------------------------------------------


@pytest.mark.slow
def test_the_first_doors_after_a_sigkill_answer_every_acknowledged_write(
    tmp_path: Path, keys: Path, launch: Callable[..., Served]
) -> None:
    """Writes acknowledged, then SIGKILL (no flush, no close record): after a restart the first read answers
    the rows, a find answers them or refuses ``ProjectionBehindError`` (503, with its stamp and the committed
    generation) while the projections build off the read path, and the recovery is flushed at once, so the
    next open replays nothing and finds a snapshot at the head."""
    root = brains_dir(tmp_path, ["k"])
    args = ["serve", "--listen", f"{HOST}:0", "--brains-dir", str(root), "--keys", str(keys)]
    first = launch(*args, env=NO_MODEL)
    ids = []
    for batch in range(10):
        items = [{"type": "thing", "id": f"r{batch}-{i}", "data": f"kill word{i % 7}"} for i in range(50)]
        status, doc, _, _ = first.request("POST", "/v1/brains/k/addMany", PERSON, {"items": items})
        assert status == 200, doc
        ids += [item["id"] for item in items]
    first.proc.send_signal(signal.SIGKILL)
    first.proc.wait(10)
    first.close_pipes()
    assert (root / "k" / "locks" / "_writer.lock").exists() and not (root / "k" / "locks" / "_writer.close").exists()

    second = launch(*args, env=NO_MODEL)
    status, doc, _, _ = second.request("GET", f"/v1/brains/k/get/{ids[-1]}", PERSON)
    assert status == 200 and doc["entity"]["key"] == ids[-1], doc

    def found() -> dict[str, Any] | None:
        status, doc, _, _ = second.request(
            "POST", "/v1/brains/k/find", PERSON, {"where": {"type": "thing"}, "limit": 1000}
        )
        if status == 503:
            error = doc["error"]
            assert error["name"] == "ProjectionBehindError" and error["projection"] == "projections", error
            assert error["committed"] >= error["stamp"], error
            return None
        assert status == 200, doc
        return doc

    answers: list[dict[str, Any]] = []
    assert wait_until(lambda: bool(answers.append(found()) or answers[-1]), 20.0) is not None
    assert sorted(hit["entity"]["key"] for hit in answers[-1]["results"]) == sorted(ids)
    status, doc, _, _ = second.request("POST", "/v1/brains/k/add", PERSON, {"type": "thing", "id": "after"})
    assert status == 200, doc  # the first write claims the lease: stale-after-crash, recovered
    store = root / "k"
    # the recovery is flushed by the maintenance thread at once: the tables reach the replayed head
    assert wait_until(lambda: read_document(store / "MANIFEST")["generation"] >= 10, 20.0) is not None
    assert second.stop() == 0
    with Brain.attach(store) as brain:
        assert brain.recovery == {"replayedGenerations": 0} and brain.head == 11
        # the chain reaches the head: a base at 11, or a base at 10 (written by the recovery's flush when the
        # projections were built before it) and a delta at 11 (the close's)
        found = chain.newest(store / "index")
        assert found is not None and found.stamp == 11, found
        assert sorted(
            h["entity"]["key"] for h in brain.find({"where": {"type": "thing"}, "limit": 1000})["results"]
        ) == sorted(ids + ["after"])


def test_every_flush_leaves_a_snapshot_the_next_open_catches_up_from(tmp_path: Path) -> None:
    """A writer that never answered a query still persists its projections at each flush, built from the last
    snapshot and the moves since (never the rows), so the next open's first find starts from a snapshot."""
    store = tmp_path / "s"
    init_store(store)
    with Brain.open(store) as brain:
        brain.addMany({"items": [{"type": "thing", "id": f"a{i}"} for i in range(20)]})
        assert brain.flush()
        assert [p.name for p in (store / "index").glob("*.proj")] == [f"{1:020d}.proj"]
    with Brain.open(store) as brain:
        brain.addMany({"items": [{"type": "thing", "id": f"b{i}"} for i in range(20)]})
        assert brain.flush()
        assert brain.projections_from == "snapshot at 1"
    with Brain.attach(store) as brain:
        assert brain.recovery == {"replayedGenerations": 0}
        assert len(brain.find({"where": {"type": "thing"}, "limit": 100})["results"]) == 40
        assert brain.projections_from == "snapshot at 2"


def _held_lock(brain: Brain) -> tuple[threading.Event, threading.Thread]:
    """A thread holding ``brain``'s state lock (as a long commit would) until the event it answers is set."""
    holding, release = threading.Event(), threading.Event()

    def hold() -> None:
        with brain.state.state_lock:
            holding.set()
            release.wait(30)

    holder = threading.Thread(target=hold)
    holder.start()
    assert holding.wait(10)
    return release, holder


def _big_store(store: Path) -> None:
    init_store(store)
    with Brain.open(store) as brain:
        for batch in range(3):
            brain.addMany(
                {
                    "items": [
                        {
                            "type": "thing",
                            "id": f"r{batch}-{i}",
                            "data": f"row {batch} {i}",
                            "metadata": {"batch": batch, "odd": i % 2 == 1},
                        }
                        for i in range(500)
                    ]
                }
            )


def test_a_served_read_answers_from_the_snapshot_read_in_place(tmp_path: Path) -> None:
    """A served handle over more rows than a read may build itself, whose newest snapshot is at the head,
    answers its first finds from that snapshot read in place (each section checked and decoded when a read
    first needs it), even while its build cannot publish (a thread holds the state lock); the answers are
    the built projections' own, and the build lands after."""
    store = tmp_path / "big"
    _big_store(store)
    queries = [
        {"where": {"type": "thing"}, "limit": 10},
        {"where": {"batch": 2, "odd": True}, "limit": 5, "orderBy": "id", "order": "desc"},
        {"query": "row 1 7", "limit": 3},
    ]
    with Brain.attach(store) as built:
        expected = [built.find(q) for q in queries]
    brain = Brain.attach(store)
    release, holder = _held_lock(brain)
    try:
        brain.follower.background = brain.vector_follower.background = True  # as the pool serves it
        started = time.monotonic()
        answers = [brain.find(q) for q in queries]
        assert time.monotonic() - started < 5.0
        assert brain.follower.built_from is None  # answered before the build could publish
    finally:
        release.set()
        holder.join()
    try:
        for got, want in zip(answers, expected):
            assert got.get("total") == want.get("total") and [r["entity"]["id"] for r in got["results"]] == [
                r["entity"]["id"] for r in want["results"]
            ]
        assert len(answers[2]["results"]) == 3
        assert answers[0]["total"] == 1500 and answers[1]["total"] == 250
        assert wait_until(lambda: brain.follower._built.is_set(), 20.0) is not None
        assert brain.projections_from == "snapshot at 3"
        assert brain.find(queries[1])["total"] == 250
    finally:
        brain.close()


def test_a_served_read_refuses_rather_than_build_inside_it(tmp_path: Path) -> None:
    """A served handle whose snapshot is behind its head (here an attach past a writer's unflushed commit)
    answers from that snapshot with the commits after it laid over it, even while its build cannot publish
    (brainy/index/overlaid.py); one with no snapshot to read has nothing to answer from: while its build
    cannot publish, a find refuses ``ProjectionBehindError`` with the stamp the build starts from and the
    committed generation, and answers once the build lands."""
    store = tmp_path / "big"
    _big_store(store)
    writer = Brain.open(store, flush_bytes=1 << 40)
    writer.addMany({"items": [{"type": "thing", "id": f"t{i}"} for i in range(10)]})
    behind = Brain.attach(store)
    release, holder = _held_lock(behind)
    try:
        behind.follower.background = True
        assert behind.find({"where": {"type": "thing"}, "limit": 10})["total"] == 1510
        assert behind.follower.built_from is None  # answered before the build could publish
    finally:
        release.set()
        holder.join()
        behind.close()
    for snapshot in (store / "index").glob("*.proj"):
        snapshot.unlink()
    brain = Brain.attach(store)
    release, holder = _held_lock(brain)
    try:
        brain.follower.background = True
        with pytest.raises(R.ProjectionBehindError) as refused:
            brain.find({"where": {"type": "thing"}, "limit": 10})
        assert refused.value.status == 503
        wire = refused.value.to_wire()
        assert wire["projection"] == "projections" and wire["stamp"] == 0 and wire["committed"] == 4
    finally:
        release.set()
        holder.join()
    try:
        assert wait_until(lambda: brain.follower._built.is_set(), 20.0) is not None
        assert brain.find({"where": {"type": "thing"}, "limit": 10})["total"] == 1510
    finally:
        brain.close()
        writer.close()
