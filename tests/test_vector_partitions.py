"""A large base's partitioned copy (docs/store-format.md, "Vector index snapshots"): written beside the base as
documented, read in place, searched while the graph does not serve with its recall measured against the exact
scan; a damaged, truncated, stale or missing copy never used (the search answers from the slots), warned of
when damaged or stale, and written again by the next flush; the list scan the same with either twin."""

from __future__ import annotations

import struct
import threading
from array import array
from pathlib import Path

import crc32c
import numpy as np
import pytest
from helpers import flip
from test_vector_snapshots import chain, check_near, graphed_store, written_again
from test_vectors import DIM, _clustered

from brainy._speedups import load
from brainy.engine import Brain
from brainy.index import vector_format as F
from brainy.index import vector_matrix as M
from brainy.index import vector_partitions as P
from brainy.index import vectors as V
from brainy.index.vector_format import store_tag, write_link
from brainy.index.vectors import VectorIndex, read_chain

TWINS = [load("vecpack", "cython"), load("vecpack", "python")]


@pytest.fixture(autouse=True)
def small_copies(monkeypatch) -> None:
    """Copies for small bases: every base of 1,000 live slots or more has one, of lists of about 100 slots, and a
    search probes 8 of them at least (a sixteenth of 128, where a million slots' copy is probed a 64th: the small
    sets here are less clustered); an index of 1,000 live vectors is past the exact scan's size."""
    monkeypatch.setattr(P, "PARTITION_SLOTS", 1_000)
    monkeypatch.setattr(V, "EXACT_BELOW", 1_000)
    monkeypatch.setattr(P, "LIST_TARGET", 100)
    monkeypatch.setattr(P, "MIN_PROBES", 8)
    # each copy's measure of its own recall with queries near its slots: these small sets' tight clusters of ten,
    # split over 32 lists, are found by a light noise's queries (1.00) and not all by the documented one's (0.84)
    monkeypatch.setattr(P, "RECALL_NOISE", 0.1 / np.sqrt(DIM))


def copy_of(base: Path) -> Path:
    return base.with_suffix(".vecp")


def partitioned_layout(copy: Path) -> dict:
    """The sections of a partitioned copy, read from its bytes as the docs lay them out."""
    data = copy.read_bytes()
    magic, form, stamp, dims, slots, lists, store, recall, header_crc = struct.unpack_from("<4sIQI4xQI16sfI", data)
    assert (magic, form, dims) == (b"BVP1", 2, DIM)
    bounds_at = 60 + 4 * DIM * lists
    crcs_at = bounds_at + 8 * (lists + 1)
    lists_at = -(-(crcs_at + 4 * lists + 4) // 64) * 64
    bounds = np.frombuffer(data, "<u8", lists + 1, bounds_at).astype(np.int64)
    sizes = -(-np.diff(bounds) * (8 + DIM) // 64) * 64
    return {
        "data": data,
        "stamp": stamp,
        "slots": slots,
        "lists": lists,
        "header_crc": header_crc,
        "store": store,
        "recall": recall,
        "centroids": np.frombuffer(data, "<f4", DIM * lists, 60).reshape(lists, DIM),
        "bounds": bounds,
        "crcs": np.frombuffer(data, "<u4", lists, crcs_at),
        "crcs_at": crcs_at,
        "lists_at": lists_at,
        "starts": lists_at + np.concatenate(([0], np.cumsum(sizes))),
    }


def test_the_copy_is_as_documented_and_written_with_every_large_base(tmp_path: Path) -> None:
    """The flush that writes a base of enough live slots writes its partitioned copy, named by the base's stamp:
    header, unit centroids, bounds, list checksums and the lists as docs/store-format.md says, every live slot in
    the list of its best centroid with its scale and codes as the quantised copy has them; a new base removes
    the older copy and writes its own."""
    path, queries, base = graphed_store(tmp_path, 41, n=3_000)
    at = partitioned_layout(copy_of(base))
    data, lists, bounds = at["data"], at["lists"], at["bounds"]
    assert at["stamp"] == int(base.stem) and at["slots"] == 3_000 and lists == 32  # 3,000 / 100: 32 nearest
    assert at["header_crc"] == crc32c.crc32c(data[:56]) and at["store"] == store_tag(path)
    assert struct.unpack_from("<I", data, at["crcs_at"] + 4 * lists)[0] == crc32c.crc32c(
        data[60 : at["crcs_at"] + 4 * lists]
    )
    assert not any(data[at["crcs_at"] + 4 * lists + 4 : at["lists_at"]])  # the pad
    assert len(data) == at["starts"][-1]
    assert np.allclose(np.linalg.norm(at["centroids"], axis=1), 1, atol=1e-5)
    assert bounds[0] == 0 and bounds[-1] == 3_000 and (np.diff(bounds) >= 0).all()
    index, _ = read_chain(path / "index", 10**9)
    x = index._slots.copy(0, 3_000)
    codes_all, scales_all = F.quantise(x)
    seen = []
    for lst in range(lists):
        start, m = int(at["starts"][lst]), int(bounds[lst + 1] - bounds[lst])
        assert at["crcs"][lst] == crc32c.crc32c(data[start : int(at["starts"][lst + 1])])
        slots = np.frombuffer(data, "<u4", m, start).astype(np.int64)
        assert (np.diff(slots) > 0).all()  # ascending
        assert np.array_equal(np.frombuffer(data, "<f4", m, start + 4 * m), scales_all[slots])
        assert np.array_equal(np.frombuffer(data, np.int8, m * DIM, start + 8 * m).reshape(m, DIM), codes_all[slots])
        best = (x[slots] @ at["centroids"].T).max(axis=1)
        assert np.allclose(x[slots] @ at["centroids"][lst], best, atol=1e-5)  # its list's centroid is its best
        seen.extend(slots.tolist())
    assert sorted(seen) == list(range(3_000))
    newer = written_again(path, queries)
    assert sorted(p.name for p in (path / "index").glob("*.vecp")) == [copy_of(newer).name]
    assert partitioned_layout(copy_of(newer))["slots"] == 3_001


def test_a_small_base_has_no_copy(tmp_path: Path, monkeypatch) -> None:
    """Below ``PARTITION_SLOTS`` live slots a base has no partitioned copy, and none is owed."""
    monkeypatch.setattr(P, "PARTITION_SLOTS", 10_000)
    path, _, base = graphed_store(tmp_path, 42, n=2_000)
    assert not copy_of(base).exists()
    index, _ = read_chain(path / "index", 10**9, graph_later=True)
    assert index._partitions is None and not index.partition_owed


def indexed(folder: Path, x: np.ndarray, dead: np.ndarray) -> VectorIndex:
    """A base of ``x`` (the slots ``dead`` killed before it) with both copies, read back: the graph not taken."""
    index = VectorIndex(graph=False)
    index.apply_all((None, {"denseInt": i, "vector": x[i].tobytes()}) for i in range(len(x)))
    index.apply_all(({"denseInt": i, "vector": x[i].tobytes()}, None) for i in dead.tolist())
    index.stamp = 1
    frozen = index.freeze(base=True)
    write_link(folder, frozen, frozen.encode())
    assert P.write_partitioned(folder, 1, len(x), frozen.vectors.contiguous(len(x)), frozen.dense)
    read, why = read_chain(folder, 10**9, graph_later=True)
    assert read is not None and not why and read._partitions is not None
    return read


def exact_top(x: np.ndarray, alive: np.ndarray, q: np.ndarray, k: int = 10) -> np.ndarray:
    scores = np.where(alive, x @ q, -np.inf)
    return np.argsort(-scores, kind="stable")[:k]


def test_recall_against_the_exact_oracle_is_measured_and_the_scores_are_exact(tmp_path: Path, monkeypatch) -> None:
    """12,000 clustered vectors (60 centres, the bench's spread), 5% dead before the base, 3% killed after it and 400
    written after it (in no list): over 100 queries (a stored vector plus noise, as perf/bench_vectors.py asks) the
    partitioned search's recall@10 against the exact scan is measured and at least 0.95, no dead slot answers, each
    score is the slot's exact float32 score, and a vector written after the base is found. Either twin's list
    scan gives the same pages."""
    rng = np.random.default_rng(43)
    x = _clustered(rng, 12_400, 60)
    n = 12_000
    dead = np.flatnonzero(rng.random(n) < 0.05)
    index = indexed(tmp_path, x[:n], dead)
    late = np.flatnonzero(rng.random(n) < 0.03)
    index.apply_all(({"denseInt": i, "vector": x[i].tobytes()}, None) for i in late.tolist())
    index.apply_all((None, {"denseInt": i, "vector": x[i].tobytes()}) for i in range(n, 12_400))
    alive = np.ones(12_400, bool)
    alive[dead] = alive[late] = False
    assert len(index._partitions) == 128 and P.probes_for(128) == 8
    queries = [M.unit(x[i] + 0.1 * rng.standard_normal(DIM).astype(np.float32)) for i in rng.integers(0, 12_400, 100)]
    pages = {}
    for name, twin in zip(("cython", "python"), TWINS):
        monkeypatch.setattr(P, "vecpack", twin)
        found = 0
        pages[name] = []
        for q in queries:
            scores, dense, how = index.search(q, 10)
            assert how == "partitioned" and len(dense) == 10
            assert alive[dense].all()
            assert np.allclose(scores, x[dense] @ q, atol=1e-6)
            assert (np.diff(scores) <= 0).all()
            found += len(set(dense.tolist()) & set(exact_top(x, alive, q).tolist()))
            pages[name].append(dense.tolist())
        recall = found / (10 * len(queries))
        assert recall >= 0.95, f"{name}: recall@10 {recall:.3f}"
        assert index.search(M.unit(x[12_300]), 1)[1].tolist() == [12_300]
    assert pages["cython"] == pages["python"]


def probed_by(copy: Path, q: np.ndarray) -> int:
    """The list whose centroid scores best against ``q``: the first a search probes."""
    at = partitioned_layout(copy)
    return int(np.argmax(at["centroids"] @ q))


def test_a_damaged_list_is_never_used_and_the_next_flush_writes_the_copy_again(tmp_path: Path) -> None:
    """One byte flipped in the list a query probes first: the open checks out, and the search that probes it answers
    exactly from the slots, never from the list; the copy is dropped and owed, and a warning names the list.
    Through a brain the find answers as the rows do; the next flush writes the copy again though nothing changed,
    and the reopened index searches it."""
    path, queries, base = graphed_store(tmp_path, 44, n=3_000)
    copy = copy_of(base)
    lst = probed_by(copy, queries[0])
    at = partitioned_layout(copy)
    flip(copy, int(at["starts"][lst]) + 4 * int(at["bounds"][lst + 1] - at["bounds"][lst]) + 3)  # a scale
    index, why = read_chain(path / "index", 10**9, graph_later=True)
    assert index is not None and not why and index._partitions is not None
    scores, dense, how = index.search(queries[0], 10)
    want_scores, want_dense = index.exact(queries[0], 10)
    assert how == "exact" and dense.tolist() == want_dense.tolist() and np.allclose(scores, want_scores)
    assert index._partitions is None and index.partition_owed
    assert any(f"list {lst}: checksum mismatch" in note for note in index.notes())
    with Brain.open(path) as brain:
        check_near(brain, queries)
        assert any(w["code"] == "vectors-rebuilt" and f"list {lst}:" in w["message"] for w in brain.warnings)
        brain.flush()
    assert partitioned_layout(copy)["crcs"][lst] == crc32c.crc32c(
        copy.read_bytes()[int(at["starts"][lst]) : int(at["starts"][lst + 1])]
    )
    index, _ = read_chain(path / "index", 10**9, graph_later=True)
    assert index._partitions is not None and not index.partition_owed
    assert index.search(queries[0], 10)[2] == "partitioned"


@pytest.mark.parametrize("where", ["header", "centroids", "truncated", "longer", "stamp", "slots", "store", "gone"])
def test_a_copy_that_does_not_check_out_is_never_used_and_is_owed(tmp_path: Path, where: str) -> None:
    """A damaged header or centroids, a file cut short or grown, a copy of another base or store (a stale stamp, other
    slots, its header checksum good) or none at all: the copy is not used, the search answers exactly from the
    slots, a brain's find answers as the rows do, and the next flush writes the copy again (a missing copy, as
    every store written before copies has, is not warned of)."""
    path, queries, base = graphed_store(tmp_path, 45, n=3_000)
    copy = copy_of(base)
    data = bytearray(copy.read_bytes())
    if where == "header":
        flip(copy, 20)
    elif where == "centroids":
        flip(copy, 60 + 4 * DIM * 3 + 1)
    elif where == "truncated":
        copy.write_bytes(bytes(data[:-1]))
    elif where == "longer":
        copy.write_bytes(bytes(data) + b"\0" * 64)
    elif where in ("stamp", "slots", "store"):
        at, value = {"stamp": (8, int(base.stem) - 1), "slots": (24, 2_999), "store": (36, 7)}[where]
        data[at : at + 8] = struct.pack("<Q", value)  # the store: another store's storeTag
        data[56:60] = struct.pack("<I", crc32c.crc32c(bytes(data[:56])))
        copy.write_bytes(bytes(data))
    else:
        copy.unlink()
    index, why = read_chain(path / "index", 10**9, graph_later=True)
    assert index is not None and not why and index._partitions is None and index.partition_owed
    notes = index.notes()
    assert (notes == []) if where == "gone" else (len(notes) == 1 and copy.name in notes[0])
    scores, dense, how = index.search(queries[0], 10)
    assert how == "exact" and dense.tolist() == index.exact(queries[0], 10)[1].tolist()
    with Brain.open(path) as brain:
        check_near(brain, queries)
        brain.flush()
    index, why = read_chain(path / "index", 10**9, graph_later=True)
    assert index._partitions is not None and not index.partition_owed
    assert index.search(queries[0], 10)[2] == "partitioned"


def test_a_brain_answers_its_first_searches_from_the_copy_and_then_from_the_graph(tmp_path: Path) -> None:
    """Reopened, a brain's first vector finds are the partitioned search's (``explain`` says so) and answer as the
    rows do; once the graph is in, the graph answers the same pages. With a partitioned copy the open does not
    check the quantised copy ahead."""
    path, queries, base = graphed_store(tmp_path, 46, n=3_000)
    ahead = F.check_ahead(path / "index")
    assert ahead is None or base.with_suffix(".vecq").name not in ahead.checks
    with Brain.open(path) as brain:
        answer = brain.find({"vector": queries[0].tolist(), "limit": 10, "explain": True})
        assert any(s["stage"] == "semantic (partitioned)" for s in answer["stages"])
        check_near(brain, queries)
        brain.vector_follower.catch_up()
        answer = brain.find({"vector": queries[0].tolist(), "limit": 10, "explain": True})
        assert any(s["stage"] == "semantic (graph)" for s in answer["stages"])
        check_near(brain, queries)


def test_the_documented_constants(monkeypatch) -> None:
    """The module's own sizes, as docs/store-format.md gives them: 70,000 live slots in 128 lists, a million in
    2,048; a million's search probes 32 lists and scores 40 slots exactly for a top 10."""
    monkeypatch.undo()
    assert (P.PARTITION_SLOTS, P.LIST_TARGET, P.MIN_LISTS, P.MAX_LISTS) == (65_536, 512, 16, 8_192)
    assert (P.RECALL_QUERIES, P.RECALL_NOISE, P.RECALL_K, P.RECALL_LEAST) == (64, 0.1, 10, 0.95)
    assert P.lists_for(70_000) == 128 and P.lists_for(1_000_000) == 2_048 and P.lists_for(10**8) == 8_192
    assert P.probes_for(2_048) == 32 and P.probes_for(128) == 16 and P.probes_for(16) == 16
    assert P.rescored_for(10) == 40 and P.rescored_for(1) == 32


def test_past_partitions_first_the_copy_answers_before_the_graph_while_few_slots_follow_the_base(
    tmp_path: Path, monkeypatch
) -> None:
    """An index of ``PARTITIONS_FIRST`` live slots or more, its graph in: an unfiltered search answers from the
    partitioned copy while at most ``TAIL_MAX`` slots lie past the base, and from the graph once more do; a filtered
    one is never the copy's. Both answer as the exact scan does on these clusters."""
    monkeypatch.setattr(V, "PARTITIONS_FIRST", 2_000)
    monkeypatch.setattr(V, "TAIL_MAX", 100)
    monkeypatch.setattr(P, "MIN_PROBES", 16)  # half the lists: a recall the copy measures well past 0.95 here
    rng = np.random.default_rng(47)
    x = _clustered(rng, 3_400, 60)
    index = indexed(tmp_path, x[:3_000], np.array([], np.int64))
    assert index._partitions is not None and index._partitions.recall >= P.RECALL_LEAST
    index.catch_up()
    q = M.unit(x[5] + 0.1 * rng.standard_normal(DIM).astype(np.float32))
    want = exact_top(x[:3_000], np.ones(3_000, bool), q).tolist()
    scores, dense, how = index.search(q, 10)
    assert how == "partitioned" and dense.tolist() == want
    allowed = array("Q", range(0, 3_000, 2))
    assert index.search(q, 10, allowed)[2] != "partitioned"
    index.apply_all((None, {"denseInt": i, "vector": x[i].tobytes()}) for i in range(3_000, 3_100))
    assert index.search(q, 10)[2] == "partitioned"  # 100 past the base: scored exactly beside the lists
    index.apply_all((None, {"denseInt": i, "vector": x[i].tobytes()}) for i in range(3_100, 3_400))
    index.catch_up()
    scores, dense, how = index.search(q, 10)
    assert how == "graph" and dense.tolist() == exact_top(x, np.ones(3_400, bool), q).tolist()


def test_the_graph_searches_with_the_efsearch_of_its_size() -> None:
    """``ef_search``: the first row of ``EF_SEARCH`` whose size the graph does not pass (the last has none)."""
    assert [V.ef_search(n) for n in (0, 32_768, 32_769, 131_072, 131_073, 10**7)] == [128, 128, 256, 256, 2_048, 2_048]


def test_a_copy_measures_its_own_recall_and_answers_only_at_0_95_or_more(tmp_path: Path, monkeypatch) -> None:
    """The recall each copy measures when it is written is the share of the exact top 10 its search finds for
    queries near its slots (computed here again, from the same queries, with the exact oracle); clustered
    vectors measure 0.95 or more and the copy answers, uniformly random ones measure far less and it never
    answers: the exact scan does, with the graph out, and the graph, with it in."""
    monkeypatch.setattr(P, "MIN_PROBES", 16)
    monkeypatch.setattr(P, "RECALL_NOISE", 0.1)  # the documented measure
    monkeypatch.setattr(V, "PARTITIONS_FIRST", 2_000)
    rng = np.random.default_rng(8)
    random = rng.standard_normal((3_000, DIM)).astype(np.float32)
    random /= np.linalg.norm(random, axis=1, keepdims=True)
    for name, x in (("clustered", _clustered(rng, 3_000, 60)), ("random", random)):
        index = indexed(tmp_path / name, x, np.array([], np.int64))
        measured = index._partitions.recall
        picks = np.random.default_rng(P.RECALL_SEED)
        chosen = np.sort(picks.choice(np.arange(3_000), P.RECALL_QUERIES, replace=False))
        noise = picks.standard_normal((len(chosen), DIM)).astype(np.float32) * P.RECALL_NOISE
        found = 0
        for q in x[chosen] + noise:
            q = q / np.linalg.norm(q)
            want = exact_top(x, np.ones(3_000, bool), q)
            got = index._partitions.candidates(q, 10, index._dense)
            top = got[np.argsort(-(x[got] @ q), kind="stable")[:10]]
            found += len(set(top.tolist()) & set(want.tolist()))
        assert abs(measured - found / (10 * len(chosen))) <= 0.02, (name, measured, found)
        q = M.unit(x[7] + 0.05 * rng.standard_normal(DIM).astype(np.float32))
        if name == "clustered":
            assert measured >= P.RECALL_LEAST and index.search(q, 10)[2] == "partitioned"
        else:
            assert measured < P.RECALL_LEAST and index.search(q, 10)[2] == "exact"
            index.catch_up()
            assert index.search(q, 10)[2] == "graph"


def test_a_served_handle_writes_the_copy_behind_its_flush_and_its_close_waits_for_it(
    tmp_path: Path, monkeypatch
) -> None:
    """A served handle's flush that writes a new base returns before its partitioned copy is written: the copy is
    written on a thread of its own (the searches answer meanwhile, the older base's copy among them: no slot is
    renumbered), then taken by the index; the handle's close waits for one being written."""
    path, queries, _ = graphed_store(tmp_path, 48, n=3_000)
    gate, entered = threading.Event(), threading.Event()
    write = P.write_partitioned

    def held_write(*args, **kwargs):  # the real write, begun once the test lets it
        entered.set()
        assert gate.wait(60)
        return write(*args, **kwargs)

    monkeypatch.setattr(P, "write_partitioned", held_write)
    brain = Brain.open(path, flush_bytes=1 << 30)
    try:
        brain.follower.background = brain.vector_follower.background = True
        new = written_base(brain, queries)
        assert entered.wait(30)  # the flush returned with the copy's write waiting on its thread
        assert not new.with_suffix(".vecp").exists()
        with brain.at().vectors() as held:
            assert held.partition_owed and held._partitions.slots == 3_000  # the older base's copy, meanwhile
        check_near(brain, queries)  # answered meanwhile
        closing = threading.Thread(target=brain.close)
        closing.start()
        closing.join(0.5)
        assert closing.is_alive()  # the close waits for the copy
        gate.set()
        closing.join(60)
        assert not closing.is_alive()
    finally:
        gate.set()
        brain.close()
    assert new.with_suffix(".vecp").exists() and P.read_partitioned(path / "index", int(new.stem), 3_001)[0]
    with Brain.open(path) as again:
        answer = again.find({"vector": queries[0].tolist(), "limit": 10, "explain": True})
        assert any(s["stage"] == "semantic (partitioned)" for s in answer["stages"])


def written_base(brain: Brain, queries: list[np.ndarray]) -> Path:
    """One more vector added to an open brain and a new base written by its flush: that base's path."""
    brain.add({"type": "thing", "id": "new", "vector": queries[0].tolist()})
    with brain.at().vectors() as held:
        held.link = None  # the next flush writes a base
    brain.flush()
    (base,) = [n for n in chain(brain.path) if n.endswith(".vec")]
    return brain.path / "index" / base
