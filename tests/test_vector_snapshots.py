"""The vector index's snapshot chain (docs/store-format.md, "Vector index snapshots"): a base and the deltas every
flush appends, compacted into a new base; read back exactly after a clean reopen and after a SIGKILL with a
tail (real processes); a damaged delta ends the chain and the rows bring the index up; a base-only store
(written before deltas) still reads.
"""

from __future__ import annotations

import signal
import struct
import subprocess
import sys
import threading
import time
import zlib
from array import array
from pathlib import Path

import crc32c
import faiss
import numpy as np
import pytest
from helpers import flip, new_store
from test_vectors import DIM, _assert_same, _clustered, graph_in, live_vectors, oracle

from brainy.contract import refusals as R
from brainy.doors.mechanics import footprint
from brainy.engine import Brain
from brainy.index import vector_format as F
from brainy.index import vector_matrix as M
from brainy.index.vectors import VectorIndex, read_chain

DELTA = "\n".join(
    (
        "import sys",
        "import numpy as np",
        "from brainy.engine import Brain",
        "",
        "def fill(brain, rng, first, n):",
        "    x = rng.standard_normal((n, 384)).astype(np.float32)",
        "    brain.addMany({'items': [{'type': 'thing', 'id': f'v{first + i}', 'vector': x[i].tolist(),",
        "                              'metadata': {'g': (first + i) % 7}} for i in range(n)]})",
        "",
    )
)


def add_range(brain: Brain, x: np.ndarray, start: int, stop: int) -> None:
    brain.addMany(
        {
            "items": [
                {"type": "thing", "id": f"v{i}", "vector": x[i].tolist(), "metadata": {"g": i % 7}}
                for i in range(start, stop)
            ]
        }
    )


def opened(tmp_path: Path, seed: int, n: int, first: int) -> tuple[Path, np.random.Generator, np.ndarray, Brain]:
    """A writer that never flushes by itself over ``first`` of ``n`` clustered vectors, its index built."""
    path = new_store(tmp_path)
    rng = np.random.default_rng(seed)
    x = _clustered(rng, n, 12)
    brain = Brain.open(path, flush_bytes=1 << 30)
    add_range(brain, x, 0, first)
    brain.find({"vector": x[0].tolist()})
    return path, rng, x, brain


def chain(path: Path) -> list[str]:
    """The chain's files, base and deltas (a base's quantised copy, ``.vecq``, is beside it, not in it)."""
    return sorted(p.name for suffix in ("*.vec", "*.vecd") for p in (path / "index").glob(suffix))


def check(brain: Brain, rng: np.random.Generator, queries: int = 6) -> None:
    """Unfiltered and filtered semantic finds equal the oracle over the head's rows."""
    for _ in range(queries):
        q = rng.standard_normal(DIM).astype(np.float32)
        _assert_same(brain.find({"vector": q.tolist(), "limit": 10}), oracle(brain, q, 10))
        keep = lambda row: row["metadata"].get("g") == 3  # noqa: E731
        _assert_same(brain.find({"vector": q.tolist(), "limit": 10, "where": {"g": 3}}), oracle(brain, q, 10, keep))


def index_state(brain: Brain) -> tuple[int, int, dict[int, bytes]]:
    """An index as what it answers from: its stamp, its live count, each live entity's unit vector."""
    with brain.at().vectors() as index:
        return index_of(index)


def index_of(index: VectorIndex) -> tuple[int, int, dict[int, bytes]]:
    return index.stamp, len(index), live_vectors(index)


def test_a_delta_is_as_documented_and_follows_its_base():
    """The header's fields in place, 80 bytes (the storeTag last); killed slots, written dense ints (-1 for one
    dead already) and the vectors after it; applied to its base it gives the index it was frozen from. Formats 2
    and 1, which name no store, are still read."""
    index = VectorIndex()
    rng = np.random.default_rng(1)
    vectors = rng.standard_normal((6, DIM)).astype(np.float32)
    for dense in range(3):
        index.apply(None, {"denseInt": dense, "vector": vectors[dense].tobytes()})
    index.stamp = 2
    base = index.freeze(base=True)
    index.graph_for(base)
    base_bytes = base.encode()
    index.apply({"denseInt": 1, "vector": vectors[1].tobytes()}, None)  # slot 1 killed
    index.apply(None, {"denseInt": 7, "vector": vectors[3].tobytes()})  # slot 3
    index.apply(None, {"denseInt": 8, "vector": vectors[4].tobytes()})  # slot 4 ...
    index.apply({"denseInt": 8, "vector": vectors[4].tobytes()}, {"denseInt": 8, "vector": vectors[5].tobytes()})
    index.stamp = 5
    assert index.next_link() == "delta"
    delta = index.freeze(base=False)
    data = delta.encode()
    assert len(data) == 80 + 8 * 1 + 8 * 3 + 4 * DIM * 3 + 4 and data[:4] == b"BVD1"
    assert F._DELTA.unpack_from(data)[1:] == (3, 5, 2, 2, DIM, 3, 3, 1) and data[64:80] == F.NO_STORE
    assert struct.unpack_from("<I", data, len(data) - 4)[0] == crc32c.crc32c(data[:-4])
    assert np.frombuffer(data, "<i8", 1, 80).tolist() == [1]
    assert np.frombuffer(data, "<i8", 3, 88).tolist() == [7, -1, 8]  # ... killed by the update: dead already
    back = VectorIndex.decode(base_bytes)
    back.apply_delta(data)
    assert back.stamp == 5 and len(back) == len(index) == 4
    for dense in (0, 2, 7, 8):
        assert back.vector_of(dense).tobytes() == index.vector_of(dense).tobytes()
    assert back.vector_of(1) is None
    with pytest.raises(ValueError, match="does not follow"):
        back.apply_delta(data)  # its previous link is 2, the chain stands at 5
    assert index.next_link() is None  # nothing changed since
    two = data[:4] + struct.pack("<I", 2) + data[8:64] + data[80:-4]  # format 2: no storeTag
    two += struct.pack("<I", crc32c.crc32c(two))
    older = VectorIndex.decode(base_bytes)
    older.apply_delta(two)
    assert index_of(older) == index_of(back)
    old = two[:4] + struct.pack("<I", 1) + two[8:-4]  # format 1, as stores written before format 2 hold
    old += struct.pack("<I", zlib.crc32(old))
    older = VectorIndex.decode(base_bytes)
    older.apply_delta(old)
    assert index_of(older) == index_of(back)
    with pytest.raises(ValueError, match="checksum"):
        VectorIndex.decode(base_bytes).apply_delta(old[:-4] + struct.pack("<I", crc32c.crc32c(old[:-4])))


def test_every_flush_appends_a_delta_and_a_reopen_reads_the_chain_exactly(tmp_path: Path) -> None:
    """Each flush writes a small delta (never the whole matrix again); the deltas past a quarter of the base
    compact into a new base that removes the old chain; every reopen answers from the chain as the rows do."""
    path, rng, x, brain = opened(tmp_path, 2, 2400, 2000)
    with brain:
        brain.vector_follower.catch_up()
        brain.flush()
        base = chain(path)
        assert base == [f"{brain.head:020d}.vec"]
        for round_ in range(3):
            add_range(brain, x, 2000 + 100 * round_, 2100 + 100 * round_)
            for i in range(round_, 300, 3):
                brain.update({"id": f"v{i}", "vector": (-x[i]).tolist()})
            brain.remove({"id": f"v{1000 + round_}"})
            brain.flush()
            assert len(chain(path)) == 2 + round_ and chain(path)[-1] == f"{brain.head:020d}.vecd"
            size = (path / "index" / chain(path)[-1]).stat().st_size
            assert size < 300 * 4 * DIM  # the slots written since, not the matrix
        before = index_state(brain)
        check(brain, rng)
    with Brain.open(path) as brain:
        assert index_state(brain) == before
        assert brain.vector_follower.built_from == f"snapshot at {brain.head}"
        check(brain, rng)
        graph_in(brain)
        with brain.at().vectors() as index:  # the base's graph, loaded off the read path, then the tail put in it
            assert 0 < index.graphed == index._graph.ntotal and not index.graph_waiting
        assert not [w for w in brain.warnings if w["code"] == "vectors-rebuilt"]
        for round_ in range(4):  # past a quarter of the base's 2,000 slots, and 1,024: a new base
            for i in range(300):
                brain.update({"id": f"v{i}", "vector": x[(i + round_ + 1) % 2400].tolist()})
            brain.flush()
        assert chain(path)[0] != base[0] and chain(path)[0].endswith(".vec")
        assert len([n for n in chain(path) if n.endswith(".vec")]) == 1
        after = index_state(brain)
    with Brain.open(path) as brain:
        assert index_state(brain) == after
        check(brain, rng)


@pytest.mark.slow
def test_after_a_sigkill_the_index_is_caught_up_from_the_chain_and_the_tail(tmp_path: Path) -> None:
    """A real writer flushes a base and a delta, commits a tail of vector writes, updates and removes, and is
    SIGKILLed; the reopen reads the chain at the flushed generation and the replayed tail brings it to the
    head, never the rows; its recovery flush appends a delta at the head the next open reads."""
    path = new_store(tmp_path)
    script = DELTA + "\n".join(
        (
            "brain = Brain.open(sys.argv[1], flush_bytes=1 << 30)",
            "rng = np.random.default_rng(3)",
            "fill(brain, rng, 0, 1500)",
            "brain.find({'vector': [1.0] * 384})",
            "brain.flush()",
            "fill(brain, rng, 1500, 200)",
            "for i in range(0, 100, 2): brain.update({'id': f'v{i}', 'vector': [float(i % 5 + 1)] + [0.5] * 383})",
            "brain.flush()",
            "fill(brain, rng, 1700, 150)",
            "for i in range(1, 100, 2): brain.update({'id': f'v{i}', 'metadata': {'g': 3}})",
            "for i in range(100, 140): brain.remove({'id': f'v{i}'})",
            "for i in range(1500, 1520): brain.update({'id': f'v{i}', 'vector': [0.25] * 384})",
            "print(brain.flushed, brain.head, flush=True)",
            "import os, signal",
            "os.kill(os.getpid(), signal.SIGKILL)",
            "",
        )
    )
    done = subprocess.run([sys.executable, "-c", script, str(path)], capture_output=True, text=True, timeout=300)
    assert done.returncode == -signal.SIGKILL, done.stderr
    flushed, head = map(int, done.stdout.split())
    assert chain(path)[-1] == f"{flushed:020d}.vecd"
    rng = np.random.default_rng(4)
    with Brain.open(path, flush_bytes=1 << 30) as brain:
        assert any(w["code"] == "recovered-after-crash" for w in brain.warnings)
        check(brain, rng)
        assert brain.vector_follower.built_from == f"snapshot at {flushed}"
        # the tail's moves, taken in one batch, hold every acknowledged vector as an index built from the rows does
        assert index_state(brain)[1:] == index_of(VectorIndex.build(brain.at().entities(vectors=True), brain.head))[1:]
        deadline = time.monotonic() + 60
        while brain.flushed != head and time.monotonic() < deadline:  # the recovery flush, on its own thread
            time.sleep(0.02)
        assert brain.flushed == head
        before = index_state(brain)
    assert chain(path)[-1] == f"{head:020d}.vecd"
    with Brain.open(path) as brain:
        assert index_state(brain) == before
        assert brain.vector_follower.built_from == f"snapshot at {head}"
        check(brain, rng)


def based_and_two_deltas(tmp_path: Path, seed: int) -> tuple[Path, np.random.Generator, tuple[int, int, dict]]:
    """A store whose chain is a base of 300 vectors and two deltas (50 written and one updated each), closed; and
    the index's state at the close."""
    path, rng, x, brain = opened(tmp_path, seed, 400, 300)
    with brain:
        brain.flush()
        for start in (300, 350):
            add_range(brain, x, start, start + 50)
            brain.update({"id": f"v{start - 1}", "vector": x[0].tolist()})
            brain.flush()
        return path, rng, index_state(brain)


def test_a_damaged_delta_ends_the_chain_and_the_rows_bring_the_index_up(tmp_path: Path) -> None:
    path, rng, before = based_and_two_deltas(tmp_path, 5)
    first_delta = chain(path)[1]
    flip(path / "index" / first_delta, 80)
    index, why = read_chain(path / "index", 10**9)
    assert index is not None and index.stamp == int(chain(path)[0][:-4]) and "checksum" in why[0]
    with Brain.open(path) as brain:
        check(brain, rng)
        assert any(w["code"] == "vectors-rebuilt" and first_delta in w["message"] for w in brain.warnings)
        assert index_state(brain)[1:] == before[1:]
    for name in chain(path):
        if name.endswith(".vec"):
            flip(path / "index" / name, 60)
    with Brain.open(path) as brain:  # a damaged base: nothing of the chain is used
        check(brain, rng)
        assert brain.vector_follower.built_from == "rows"


@pytest.mark.parametrize("damaged", [False, True])
def test_deltas_checked_ahead_are_taken_and_a_damaged_one_still_ends_the_chain(
    tmp_path: Path, monkeypatch, damaged: bool
) -> None:
    """Deltas checked ahead (any base and deltas count as large here): each is mapped and its checksum found good on the
    ahead thread, and the chain's read takes those maps unchecked again and reads what a plain read does. A delta
    with a flipped byte is not taken: the read checks it itself and ends the chain before it, naming it."""
    monkeypatch.setattr(F, "AHEAD_SLOTS", 1)
    monkeypatch.setattr(F, "AHEAD_DELTA_BYTES", 1)
    path, rng, _ = based_and_two_deltas(tmp_path, 9)
    deltas = [name for name in chain(path) if name.endswith(".vecd")]
    assert len(deltas) == 2
    if damaged:
        flip(path / "index" / deltas[0], 80)
    plain, plain_why = read_chain(path / "index", 10**9)
    ahead = F.check_ahead(path / "index")
    assert ahead is not None and set(deltas) <= set(ahead.checks)
    checked = [ahead.checks[name].result() is not None for name in deltas]
    assert checked == [not damaged, True]
    taken: list[bool] = []
    apply_delta = VectorIndex.apply_delta
    monkeypatch.setattr(
        VectorIndex,
        "apply_delta",
        lambda self, data, name=None, checked=False, store=None: (
            taken.append(checked),
            apply_delta(self, data, name, checked, store),
        )[1],
    )
    index, why = read_chain(path / "index", 10**9, ahead=ahead)
    assert index is not None and plain is not None and index_of(index) == index_of(plain) and why == plain_why
    assert taken == ([False] if damaged else [True, True])  # after the damaged one, none is read
    if damaged:
        assert deltas[0] in why[0] and "checksum" in why[0]
    with Brain.open(path) as brain:
        assert brain.vector_follower._ahead is not None
        check(brain, rng)
        if damaged:
            assert any(w["code"] == "vectors-rebuilt" and deltas[0] in w["message"] for w in brain.warnings)
        else:
            assert brain.vector_follower.built_from == f"snapshot at {int(deltas[-1][:-5])}"
        assert brain.vector_follower._ahead is None


def test_a_small_store_is_not_read_ahead(tmp_path: Path, monkeypatch) -> None:
    """Below AHEAD_SLOTS a base and its deltas are left to the read (they are small: a new base is written once the
    deltas pass a quarter of it), whatever the deltas' threshold."""
    monkeypatch.setattr(F, "AHEAD_DELTA_BYTES", 1)
    path, _, _ = based_and_two_deltas(tmp_path, 11)
    assert F.check_ahead(path / "index") is None
    monkeypatch.setattr(F, "AHEAD_SLOTS", 1)
    assert F.check_ahead(path / "index") is not None


def test_a_base_read_ahead_gives_the_arrays_a_decode_makes_and_is_used_only_where_it_fits(tmp_path: Path) -> None:
    """The dense ints and slot map made ahead of a base (with room) are taken by a decode of those very bytes
    that wants no more room than they have, and it reads what a plain decode does; a decode wanting more room,
    or of other bytes, makes its own."""
    path, rng, x, brain = opened(tmp_path, 13, 300, 300)
    with brain:
        for i in range(0, 300, 9):
            brain.update({"id": f"v{i}", "vector": x[(i + 1) % 300].tolist()})  # dead slots in the base
        brain.compact()
        brain.flush()
    base = next(p for p in (path / "index").glob("*.vec"))
    prepared = F._prepared(base, False, 40, 500)
    assert prepared is not None
    plain = index_of(VectorIndex.decode(base.read_bytes(), room=40, dense_ints=500))
    taken = VectorIndex.decode(prepared.data, room=40, dense_ints=500, prepared=prepared)
    assert taken._slot is prepared.slot and taken._dense is prepared.dense and index_of(taken) == plain
    wider = VectorIndex.decode(prepared.data, room=4000, dense_ints=500, prepared=prepared)
    assert wider._slot is not prepared.slot and len(wider._slot) >= 4000 and index_of(wider) == plain
    other = VectorIndex.decode(base.read_bytes(), room=40, dense_ints=500, prepared=prepared)
    assert other._slot is not prepared.slot and index_of(other) == plain
    assert np.array_equal(taken._slot[: len(other._slot)], other._slot)
    flip(base, 200)  # in the dense section: not prepared, and the decode says why
    assert F._prepared(base, False, 40, 500) is None
    with pytest.raises(ValueError, match="dense section"):
        VectorIndex.decode(base.read_bytes())


def test_a_store_without_vectors_persists_an_empty_index_without_reading_a_row(tmp_path: Path) -> None:
    """The ledger counts no vectored entity: the flush's index is empty, built without a scan, and its chain
    is a tiny base and tiny deltas."""
    path = new_store(tmp_path)
    with Brain.open(path, flush_bytes=1 << 30) as brain:
        brain.addMany({"items": [{"type": "thing", "id": f"t{i}", "metadata": {"n": i}} for i in range(50)]})
        brain.flush()
        assert brain.vector_follower.built_from == "rows"
        brain.add({"type": "thing", "id": "t-last"})
        brain.flush()
        assert [(path / "index" / n).stat().st_size for n in chain(path)] == [132, 84]
    with Brain.open(path) as brain:
        with brain.at().vectors() as index:
            assert len(index) == 0
        assert brain.vector_follower.built_from == f"snapshot at {brain.head}"


def graphed_store(tmp_path: Path, seed: int, n: int = 6_000) -> tuple[Path, list[np.ndarray], Path]:
    """A store of ``n`` vectors in tight clusters of ten (past the exact-only size, and a graph walk finds a
    cluster whole, so the graph's page and the exact one agree), its graph caught up, flushed into a base with
    the graph, closed cleanly; queries near some clusters; and that base's path."""
    path = new_store(tmp_path)
    rng = np.random.default_rng(seed)
    centers = rng.standard_normal((n // 10, DIM)).astype(np.float32)
    x = np.repeat(centers, 10, axis=0) + 0.05 * rng.standard_normal((n, DIM)).astype(np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    with Brain.open(path, flush_bytes=1 << 30) as brain:
        add_range(brain, x, 0, n)
        brain.find({"vector": x[0].tolist()})
        brain.vector_follower.catch_up()
        brain.flush()
    (base,) = [n for n in chain(path) if n.endswith(".vec")]
    queries = [M.unit(centers[c] + 0.05 * rng.standard_normal(DIM)) for c in rng.integers(0, n // 10, 5)]
    return path, queries, path / "index" / base


def written_again(path: Path, queries: list[np.ndarray]) -> Path:
    """One more vector added and a new base written by a flush (the link dropped, so the flush writes a base, not a
    delta): that base's path. The brain is still open when it is answered (it closes after)."""
    with Brain.open(path) as brain:
        brain.add({"type": "thing", "id": "new", "vector": queries[0].tolist()})
        with brain.at().vectors() as held:
            held.link = None  # the next flush writes a base
        brain.flush()
        (newer,) = (path / "index").glob("*.vec")
    return newer


def without_copy(base: Path) -> None:
    """A base without its quantised copy, as every store written before copies holds: the exact scan reads the
    float32 slots, every chunk of them."""
    base.with_suffix(".vecq").unlink()


def check_near(brain: Brain, queries: list[np.ndarray]) -> None:
    for q in queries:
        _assert_same(brain.find({"vector": q.tolist(), "limit": 10}), oracle(brain, q, 10))


def test_the_first_search_after_a_reopen_scans_exactly_and_the_graph_then_gives_the_same_hits(tmp_path: Path) -> None:
    """The base's slots are checked and answer at once by the exact scan (what exact() does); its graph is
    checked and loaded off the read path, and then answers the same pages."""
    path, queries, base = graphed_store(tmp_path, 11)
    index, why = read_chain(path / "index", 10**9, graph_later=True)
    assert index is not None and not why and index.graph_waiting and index.graphed == 0
    first = [index.search(q, 10) for q in queries]
    assert all(how == "exact" for _, _, how in first)
    for (scores, dense, _), q in zip(first, queries):
        want_scores, want_dense = index.exact(q, 10)
        assert dense.tolist() == want_dense.tolist() and np.allclose(scores, want_scores)
    index.catch_up()
    assert not index.graph_waiting and index.graphed == index._graph.ntotal == 6_000
    for (scores, dense, _), q in zip(first, queries):
        s2, d2, how = index.search(q, 10)
        assert how == "graph" and d2.tolist() == dense.tolist() and np.allclose(s2, scores)
    with Brain.open(path) as brain:  # the same through a brain: exact first, the graph once it is in
        check_near(brain, queries)
        assert brain.vector_follower.built_from == f"snapshot at {brain.head}"
        graph_in(brain)
        with brain.at().vectors() as held:
            assert held.graphed == 6_000 and not held.graph_waiting
        check_near(brain, queries)
        assert not [w for w in brain.warnings if w["code"] == "vectors-rebuilt"]


def layout(base: Path) -> dict[str, int]:
    """Where a format 4 base's sections start (docs/store-format.md, "Vector index snapshots"), from its header."""
    data = base.read_bytes()
    assert struct.unpack_from("<I", data, 4)[0] == 4
    count, graphed, graph_bytes, chunk = struct.unpack_from("<QQQI", data, 24)
    vectors = -(-(72 + 8 * count + 4 * -(-count // chunk) + 4) // 64) * 64
    return {
        "count": count,
        "chunk": chunk,
        "vectors": vectors,
        "graph": vectors + 4 * DIM * count,
        "graphBytes": graph_bytes,
    }


def test_a_damaged_graph_is_built_again_from_the_checked_slots(tmp_path: Path) -> None:
    """A damaged graph section: the slots still answer, the graph is built again from them, the warnings say so."""
    path, queries, base = graphed_store(tmp_path, 12)
    at = layout(base)
    flip(base, at["graph"] + at["graphBytes"] // 2)
    index, why = read_chain(path / "index", 10**9, graph_later=True)
    assert index is not None and not why  # the slots check out; the graph is checked when it is loaded
    assert "graph section: checksum mismatch" in index.take_graph() and index._graph is None
    with Brain.open(path) as brain:
        check_near(brain, queries)
        graph_in(brain)
        assert brain.vector_follower.built_from == f"snapshot at {brain.head}"
        assert any(w["code"] == "vectors-rebuilt" and "graph section" in w["message"] for w in brain.warnings)
        with brain.at().vectors() as held:
            assert held.graphed == 6_000  # built again from the slots
        check_near(brain, queries)


def test_a_damaged_header_or_dense_section_is_refused_at_the_open(tmp_path: Path) -> None:
    """The header and the dense ints are checked before anything is read in place: damaged, nothing of the base is
    trusted and the rows rebuild the index, which answers the first search."""
    for at, what in ((30, "header checksum"), (56 + 8 * 3_000, "dense section checksum")):
        path, queries, base = graphed_store(tmp_path / str(at), 13)
        flip(base, at)
        index, why = read_chain(path / "index", 10**9, graph_later=True)
        assert index is None and what in why[0]
        with Brain.open(path) as brain:
            check_near(brain, queries)
            assert brain.vector_follower.built_from == "rows"
            assert any(w["code"] == "vectors-rebuilt" and what in w["message"] for w in brain.warnings)


def damaged_base(where: Path, seed: int, slot: int, byte: int, chunk: int) -> tuple[Path, np.ndarray]:
    """A graphed store whose base (without its quantised copy) has one byte of slot ``slot``'s vector flipped: the
    chain still opens (its header and dense ints check out), and the search that meets chunk ``chunk`` raises."""
    path, queries, base = graphed_store(where, seed)
    without_copy(base)
    flip(base, layout(base)["vectors"] + 4 * DIM * slot + byte)
    index, why = read_chain(path / "index", 10**9, graph_later=True)
    assert index is not None and not why
    with pytest.raises(M.Damaged, match=f"chunk {chunk} "):
        index.search(queries[0], 10)
    return path, queries


def refused_then_rebuilt(brain: Brain, queries: np.ndarray, chunk: int, served: bool) -> None:
    """The first find meets damaged chunk ``chunk``: it refuses by name, the warning names the chunk, and the index
    rebuilt from the rows then answers (served: on its own thread, the reads refusing meanwhile)."""
    with pytest.raises(R.ProjectionBehindError, match="damaged"):
        brain.find({"vector": queries[0].tolist(), "limit": 10})
    assert any(w["code"] == "vectors-rebuilt" and f"chunk {chunk} " in w["message"] for w in brain.warnings)
    deadline = time.monotonic() + 60
    while True:
        try:
            check_near(brain, queries)
            break
        except R.ProjectionBehindError:  # served: the rebuild runs on its own thread
            assert served and time.monotonic() < deadline
            time.sleep(0.05)
    assert brain.vector_follower.built_from == "rows"
    graph_in(brain)


def test_a_damaged_vectors_chunk_is_never_answered_from_and_the_rows_rebuild_the_index(tmp_path: Path) -> None:
    """One byte flipped in the middle of the vectors section: the open checks out (header, dense ints), the read
    that meets the chunk refuses by name, never answering from it, and the next read answers from the rows: in
    process (rebuilt inside it) and served (rebuilt in the background, the reads refusing meanwhile). A damaged
    chunk no read touched is found by the graph's thread, before the graph could score it."""
    for served in (False, True):
        path, queries = damaged_base(tmp_path / str(served), 14, 3_000, 17, 11)  # slot 3,000: mid-file
        with Brain.open(path) as brain:
            brain.follower.background = brain.vector_follower.background = served
            refused_then_rebuilt(brain, queries, 11, served)
        with Brain.open(path) as brain:  # the close wrote a new base, from the rows
            check_near(brain, queries)
            assert brain.vector_follower.built_from == f"snapshot at {brain.head}"
    path, queries, base = graphed_store(tmp_path / "untouched", 15)
    flip(base, layout(base)["vectors"] + 4 * DIM * 5_990)  # the last chunk
    index, why = read_chain(path / "index", 10**9, graph_later=True)
    allowed = array("Q", range(10))
    scores, dense, how = index.search(queries[0], 3, allowed=allowed)  # reads chunk 0 only
    assert how == "exact" and len(dense) == 3 and set(dense.tolist()) <= set(range(10))
    assert dense.tolist() == index.exact(queries[0], 3, allowed)[1].tolist()
    with pytest.raises(M.Damaged, match="chunk 23 "):
        index.take_graph()
    assert index._graph is None


def as_format_3(data: bytes) -> bytes:
    """A format 4 base written as format 3 (as stores written before format 4 hold): its 56-byte header names no
    store; the rest as it was, the pad before the vectors made for the shorter header."""
    head = struct.unpack_from("<4sIQIxxxxQQQI16sI", data)
    count, chunk, graph_bytes = head[4], head[7], head[6]
    front_end = 72 + 8 * count + 4 * -(-count // chunk) + 4
    vectors_at = len(data) - 4 - graph_bytes - 4 * DIM * count
    header = struct.pack("<4sIQIxxxxQQQI", head[0], 3, *head[2:8])
    front = header + struct.pack("<I", crc32c.crc32c(header)) + data[72:front_end]
    return front + bytes(-(-len(front) // 64) * 64 - len(front)) + data[vectors_at:]


def as_format_2(data: bytes) -> bytes:
    """A format 4 base written as format 2 (as stores written before format 3 hold): its 48-byte header, dense
    ints, vectors and graph, then zlib's crc32 of header, dense ints and vectors, and of the graph."""
    magic, _, stamp, dims, count, graphed, graph_bytes = struct.unpack_from("<4sIQIxxxxQQQ", data)
    vectors_at = len(data) - 4 - graph_bytes - 4 * DIM * count
    slots = (
        struct.pack("<4sIQIxxxxQQQ", magic, 2, stamp, dims, count, graphed, graph_bytes)
        + data[72 : 72 + 8 * count]
        + data[vectors_at : vectors_at + 4 * DIM * count]
    )
    graph = data[vectors_at + 4 * DIM * count : -4]
    return slots + graph + struct.pack("<II", zlib.crc32(slots), zlib.crc32(graph))


def as_format_1(data: bytes) -> bytes:
    """A format 2 base written as format 1: the same header (format 1) and body, one crc32 over both."""
    body = data[:4] + struct.pack("<I", 1) + data[8:-8]
    return body + struct.pack("<I", zlib.crc32(body))


def with_graph(data: bytes, graph: bytes) -> bytes:
    """A format 4 base with ``graph`` as its graph section (graphBytes, headerCrc and graphCrc made again)."""
    start = len(data) - 4 - struct.unpack_from("<Q", data, 40)[0]
    header = bytearray(data[:68])
    struct.pack_into("<Q", header, 40, len(graph))
    crc = struct.pack("<I", crc32c.crc32c(bytes(header)))
    return bytes(header) + crc + data[72:start] + graph + struct.pack("<I", crc32c.crc32c(graph))


def test_the_graph_walks_float16_copies_and_an_older_float32_graph_is_taken_with_its_links(tmp_path: Path) -> None:
    """A graph is built over float16 copies of the slots; a base whose graph holds float32 copies (faiss
    IndexHNSWFlat, as bases written before hold) is taken as the same graph over float16 copies, its links kept,
    then searched and grown, and the next base holds it so; a graph section that is not an inner-product HNSW index
    of 384 dimensions is not used: the graph is built again from the slots."""
    path, queries, base = graphed_store(tmp_path, 17)
    index, why = read_chain(path / "index", 10**9, graph_later=True)
    assert index is not None and not why and index.take_graph() is None
    index.graph_taken()
    assert isinstance(index._graph, faiss.IndexHNSWSQ) and index._graph.ntotal == 6_000
    assert faiss.downcast_index(index._graph.storage).sq.qtype == faiss.ScalarQuantizer.QT_fp16
    data = base.read_bytes()
    at = layout(base)
    slots = np.frombuffer(data[at["vectors"] : at["graph"]], "<f4").reshape(-1, DIM)
    older = faiss.IndexHNSWFlat(DIM, 16, faiss.METRIC_INNER_PRODUCT)
    older.add(slots)
    base.write_bytes(with_graph(data, faiss.serialize_index(older).tobytes()))
    links = faiss.vector_to_array(older.hnsw.neighbors)
    rng = np.random.default_rng(17)
    with Brain.open(path, flush_bytes=1 << 30) as brain:
        check_near(brain, queries)
        graph_in(brain)
        with brain.at().vectors() as held:
            graph = held._graph
            assert isinstance(graph, faiss.IndexHNSWSQ) and held.graphed == graph.ntotal == 6_000
            assert faiss.downcast_index(graph.storage).sq.qtype == faiss.ScalarQuantizer.QT_fp16
            assert np.array_equal(faiss.vector_to_array(graph.hnsw.neighbors), links)
            assert graph.hnsw.entry_point == older.hnsw.entry_point
            copies = graph.reconstruct_n(0, 6_000)
            assert (np.abs(copies - slots) <= np.abs(slots) * 2**-10 + 2**-24).all()  # float16's precision
            assert not np.array_equal(copies, slots)
        check_near(brain, queries)
        more = rng.standard_normal((50, DIM)).astype(np.float32)
        brain.addMany({"items": [{"type": "thing", "id": f"w{i}", "vector": v.tolist()} for i, v in enumerate(more)]})
        brain.vector_follower.catch_up()
        with brain.at().vectors() as held:
            assert held._graph is graph and held.graphed == graph.ntotal == 6_050
        check_near(brain, [M.unit(v) for v in more[:3]] + queries)
        assert not [w for w in brain.warnings if w["code"] == "vectors-rebuilt"]
        with brain.at().vectors() as held:  # a new base (as a compaction's would be) holds the halved graph
            held.link = None
        brain.add({"type": "thing", "id": "new", "vector": queries[0].tolist()})
        brain.flush()
    (now,) = [n for n in chain(path) if n.endswith(".vec")]
    written = (path / "index" / now).read_bytes()
    graph_bytes = struct.unpack_from("<Q", written, 40)[0]
    kept = faiss.deserialize_index(np.frombuffer(written, np.uint8, graph_bytes, len(written) - 4 - graph_bytes))
    assert isinstance(kept, faiss.IndexHNSWSQ) and kept.ntotal == 6_050
    for other in (faiss.IndexFlatIP(DIM), faiss.IndexHNSWFlat(DIM, 16), faiss.IndexHNSWFlat(64, 16)):
        other.add(slots if other.d == DIM else np.ascontiguousarray(slots[:, :64]))
        store = path / "index" / now
        store.write_bytes(with_graph(store.read_bytes(), faiss.serialize_index(other).tobytes()))
        index, why = read_chain(path / "index", 10**9, graph_later=True)
        assert index is not None and not why
        assert "not an inner-product HNSW index of 384 dimensions" in index.take_graph() and index._loaded_graph is None


def test_format_1_2_and_3_bases_are_still_read(tmp_path: Path) -> None:
    """A base written before format 4 is read: format 3 (no store named) as format 4 is; format 2 (zlib crc32s of
    the slots and of the graph) and format 1 (one over all) checked whole at the open, then read in place the same
    way: the first search scans exactly, the graph loads off the read path; a damaged one is refused at the open;
    the next base is format 4."""
    for form in (3, 2, 1):
        path, queries, base = graphed_store(tmp_path / str(form), 16)
        before = index_of(VectorIndex.decode(base.read_bytes()))
        old = as_format_3(base.read_bytes()) if form == 3 else as_format_2(base.read_bytes())
        if form == 1:
            old = as_format_1(old)
        base.write_bytes(old)
        index, why = read_chain(path / "index", 10**9, graph_later=True)
        assert index is not None and not why and index.graph_waiting and index_of(index) == before
        assert index.take_graph() is None
        count = struct.unpack_from("<Q", old, 24)[0]
        for at in (48 + 8 * count + 4 * DIM * 100, len(old) - 10):  # a vector; a byte of the graph (format 1)
            if form == 3:
                continue  # format 3's chunks are checked as a read touches them (test_a_damaged_chunk...)
            if form == 2 and at == len(old) - 10:
                continue  # format 2's graph has a checksum of its own, checked when the graph is loaded
            with pytest.raises(ValueError, match="checksum"):
                VectorIndex.decode(old[:at] + bytes([old[at] ^ 1]) + old[at + 1 :])
        with Brain.open(path, flush_bytes=1 << 30) as brain:
            check_near(brain, queries)
            assert brain.vector_follower.built_from == f"snapshot at {brain.head}"
            graph_in(brain)
            with brain.at().vectors() as held:
                assert held.graphed == 6_000
            check_near(brain, queries)
            assert not [w for w in brain.warnings if w["code"] == "vectors-rebuilt"]
            with brain.at().vectors() as held:  # a new base (as a compaction's would be) is written as format 4
                held.link = None
            brain.add({"type": "thing", "id": "new", "vector": queries[0].tolist()})
            brain.flush()
        (newer,) = [n for n in chain(path) if n.endswith(".vec")]
        assert struct.unpack_from("<I", (path / "index" / newer).read_bytes(), 4)[0] == 4


def test_a_writer_appends_after_reading_in_place_and_a_reopen_answers_the_same(tmp_path: Path) -> None:
    """The base's slots stay a read-only view of the mapped file; the slots written after it (new vectors,
    updates) live in the owned part; a flush appends a delta, and the reopen reads the base and the delta in
    place and answers as the rows do. A compaction after an in-place open makes one owned matrix."""
    path, queries, base = graphed_store(tmp_path, 17)
    rng = np.random.default_rng(17)
    x = rng.standard_normal((500, DIM)).astype(np.float32)
    with Brain.open(path, flush_bytes=1 << 30) as brain:
        check_near(brain, queries)
        with brain.at().vectors() as held:
            assert [len(part.rows) for part in held._slots._parts] == [6_000]
            assert not held._slots._parts[0].rows.flags.writeable  # the mapped file, never copied
            assert held._slots.heap_bytes() == 0  # what the arbiter's counters charge: mapped pages are smaps'
        mapped_only = footprint(brain)
        brain.addMany({"items": [{"type": "thing", "id": f"n{i}", "vector": x[i].tolist()} for i in range(300)]})
        for i in range(0, 6_000, 50):
            brain.update({"id": f"v{i}", "vector": x[300 + i // 50].tolist()})
        with brain.at().vectors() as held:
            assert held._slots.heap_bytes() == 420 * DIM * 4
        assert footprint(brain) - mapped_only >= 420 * DIM * 4
        check_near(brain, queries)
        brain.flush()
        assert chain(path)[-1].endswith(".vecd")
        before = index_state(brain)
    with Brain.open(path, flush_bytes=1 << 30) as brain:
        assert index_state(brain) == before
        check_near(brain, queries)
        with brain.at().vectors() as held:  # the base and the delta, both read in place
            assert [len(part.rows) for part in held._slots._parts] == [6_000, 300 + 120]
        graph_in(brain)
        rows_ = [r for r in brain.at().entities(vectors=True) if r.get("vector")]
        for r in rows_:  # every vector moved a little (its cluster kept): the dead slots outnumber the live
            moved = np.frombuffer(r["vector"], "<f4") + 0.001 * rng.standard_normal(DIM).astype(np.float32)
            brain.update({"id": r["id"], "vector": moved.tolist()})
        deadline = time.monotonic() + 120
        while True:
            check_near(brain, queries)
            # the catch-up that compacts, called here (as a close waits for one): the reads start it on a thread
            # of its own at the lowest priority, which on a loaded box (CI's other worker at its slowest tests)
            # once had no compaction in 120 s of this loop
            brain.vector_follower.catch_up()
            with brain.at().vectors() as held:
                if all(part.heap for part in held._slots._parts):
                    break
            assert time.monotonic() < deadline, "no compaction"
        with brain.at().vectors() as held:
            # owned slots only: the mapped files let go. An update the fsync worker applied after the compaction
            # may have filled the compacted matrix and sealed it as a part of its own (CI once met it: a loop that
            # waited for no part at all never ended)
            assert all(part.heap for part in held._slots._parts) and held._slots.owned.flags.writeable
            assert held._count < 6_300 + 1_000
        check_near(brain, queries)
        after = index_state(brain)
    with Brain.open(path) as brain:
        assert index_state(brain) == after
        check_near(brain, queries)


def test_a_served_first_search_answers_from_the_mapped_slots_while_the_graph_loads(tmp_path: Path) -> None:
    """As the server's pool serves a handle: the first find is the exact answer from the slots read in place,
    the graph loads on its own thread and then gives the same pages."""
    path, queries, base = graphed_store(tmp_path, 18)
    with Brain.open(path) as brain:
        brain.follower.background = brain.vector_follower.background = True
        want = [oracle(brain, q, 10) for q in queries]  # from the rows
        first = [brain.find({"vector": q.tolist(), "limit": 10}) for q in queries]
        assert brain.vector_follower.built_from == f"snapshot at {brain.head}"
        for answer, exact in zip(first, want):
            _assert_same(answer, exact)
        graph_in(brain)
        with brain.at().vectors() as held:
            assert held.graphed == 6_000 and held._slots.checked
        for q, exact, answer in zip(queries, want, first):  # the graph's pages: the same hits
            again = brain.find({"vector": q.tolist(), "limit": 10})
            _assert_same(again, exact)
            assert [h["id"] for h in again["results"]] == [h["id"] for h in answer["results"]]


def test_a_first_scan_split_on_two_threads_answers_what_one_thread_does(tmp_path: Path, monkeypatch) -> None:
    """The first scan after an open shares the unchecked chunks with the scan helper thread (here from two on: the
    store has 24): every score, and so every page, is the one a scan on one thread gives, and every chunk is
    counted checked once."""
    path, queries, base = graphed_store(tmp_path, 19)
    without_copy(base)
    alone, _ = read_chain(path / "index", 10**9, graph_later=True)
    monkeypatch.setattr(M, "SPLIT_UNCHECKED", 10**9)
    want = [alone.search(q, 10) for q in queries]
    want_scores = alone._slots.scores(queries[0])
    monkeypatch.setattr(M, "SPLIT_UNCHECKED", 2)
    for q, (scores, dense, how) in zip(queries, want):
        split, _ = read_chain(path / "index", 10**9, graph_later=True)
        (part,) = split._slots._parts
        assert part._unchecked == len(part.crcs) == 24
        got_scores, got_dense, got_how = split.search(q, 10)
        assert got_how == how == "exact" and got_dense.tolist() == dense.tolist()
        assert got_scores.tolist() == scores.tolist()
        assert part._unchecked == 0 and part._checked.all() and split._slots.checked
    split, _ = read_chain(path / "index", 10**9, graph_later=True)
    assert split._slots.scores(queries[0]).tolist() == want_scores.tolist()


def test_a_damaged_chunk_in_the_helpers_half_is_refused_and_the_rows_rebuild_the_index(
    tmp_path: Path, monkeypatch
) -> None:
    """A byte flipped in chunk 19 of 24, in the half the scan helper thread checks: the search raises Damaged and
    answers nothing; served, the find refuses by name and the rows rebuild the index, which then answers."""
    monkeypatch.setattr(M, "SPLIT_UNCHECKED", 2)
    path, queries = damaged_base(tmp_path, 20, 5_000, 3, 19)
    with Brain.open(path) as brain:
        brain.follower.background = brain.vector_follower.background = True
        refused_then_rebuilt(brain, queries, 19, served=True)


def test_the_graph_is_taken_only_once_the_first_search_has_answered(tmp_path: Path) -> None:
    """Served, the first read of the index runs with no graph thread beside it: while it is held the snapshot's
    graph still waits and no catch-up runs; once it has answered the catch-up takes the graph. A commit before
    that read starts nothing either."""
    path, queries, base = graphed_store(tmp_path, 21)
    with Brain.open(path) as brain:
        brain.follower.background = brain.vector_follower.background = True
        brain.add({"type": "thing", "id": "early", "vector": queries[0].tolist()})
        assert not brain.vector_follower._catching_up
        with brain.at().vectors() as held:
            scores, dense, how = held.search(queries[1], 10)
            assert how == "exact" and held.graph_waiting and held.graphed == 0
            assert not brain.vector_follower._catching_up
        graph_in(brain)
        with brain.at().vectors() as held:
            assert not held.graph_waiting and held.graphed == 6_001
        check_near(brain, queries)


def test_the_chain_is_read_with_room_for_the_tail_and_the_dense_ints_minted(tmp_path: Path) -> None:
    """The moves after the chain fill the arrays the read sized for them: no copy of the slot map or the dense
    ints grown by the first moves of a replayed tail."""
    path, rng, x, brain = opened(tmp_path, 9, 300, 200)
    with brain:
        brain.flush()
        head = brain.head
    assert chain(path)
    index, why = read_chain(path / "index", head, tail=100, dense_ints=5_000)
    assert why == [] and len(index) == 200 and len(index._slot) >= 5_000
    slot_map, dense_ints = index._slot, index._dense
    index.apply_all((None, {"denseInt": 4_000 + i, "vector": v.tobytes()}) for i, v in enumerate(x[200:]))
    assert index._slot is slot_map and index._dense is dense_ints and len(index) == 300
    assert index.vector_of(4_099).tobytes() == M.unit(x[299].tobytes()).tobytes()


def test_a_graph_grown_well_past_its_base_is_kept_by_a_new_base_even_with_nothing_written(tmp_path: Path) -> None:
    """A base flushed before its graph was built holds no graph; once the graph holds more than a quarter of the
    base's slots (and 1,024) past what the base's graph held, the next persist writes a new base with the graph,
    also when nothing was written since (a close), so the next open takes the graph instead of inserting every
    slot again. A graph that grew less leaves the chain as it was."""
    path = new_store(tmp_path)
    x = _clustered(np.random.default_rng(61), 6_000, 30)
    with Brain.open(path, flush_bytes=1 << 30) as brain:
        add_range(brain, x, 0, 6_000)
        brain.flush()  # a base before any graph
        (first,) = [n for n in chain(path) if n.endswith(".vec")]
        assert struct.unpack_from("<Q", (path / "index" / first).read_bytes(), 32)[0] == 0  # graphed
        brain.find({"vector": x[0].tolist()})
        brain.vector_follower.catch_up()
        with brain.at().vectors() as held:
            assert held.graphed == 6_000 and held.next_link() == "base"
    (kept,) = [n for n in chain(path) if n.endswith(".vec")]
    assert struct.unpack_from("<Q", (path / "index" / kept).read_bytes(), 32)[0] == 6_000
    index, why = read_chain(path / "index", 10**9, graph_later=True)
    assert index is not None and not why and index.graph_waiting  # taken from the file, not built again
    assert index.take_graph() is None
    index.graph_taken()
    assert index.graphed == 6_000 and index.next_link() is None
    with Brain.open(path, flush_bytes=1 << 30) as brain:  # a little more: a delta, the base kept
        brain.addMany({"items": [{"type": "thing", "id": f"w{i}", "vector": x[i].tolist()} for i in range(100)]})
        brain.find({"vector": x[0].tolist()})
        brain.vector_follower.catch_up()
        brain.flush()
    assert [n for n in chain(path) if n.endswith(".vec")] == [kept]


def test_a_closed_handle_leaves_no_catch_up_reading_its_files(tmp_path: Path) -> None:
    """A tail past TAIL_MAX starts the catch-up before any read, which waits for that read; the close ends it
    before it reads a snapshot file: once closed, the handle's files are another's to replace (or the user's to
    damage), and a map of a file cut short under a reader kills the process."""
    path, queries, base = graphed_store(tmp_path, 23)
    x = _clustered(np.random.default_rng(24), 8_100, 30)
    brain = Brain.open(path, flush_bytes=1 << 30)
    brain.vector_follower.background = True
    brain.vector_follower._build()  # the index in memory, its graph waiting for the first read
    add_range(brain, x, 6_000, 8_100)  # past the store's 6,000
    index = brain.vector_follower._proj
    assert index is not None and brain.vector_follower._catching_up  # the catch-up waits for the first read
    brain.close()
    base.write_bytes(b"")  # cut short: were it read now, the process would die of it
    for _ in range(100):
        if not brain.vector_follower._catching_up:
            break
        time.sleep(0.05)
    assert not brain.vector_follower._catching_up and index.graphed == 0  # it ended without taking the graph
    with Brain.attach(path) as reader:
        assert len(reader.find({"vector": queries[0].tolist(), "limit": 5})["results"]) == 5


def test_a_flush_never_waits_for_a_catch_up_holding_the_graph(tmp_path: Path) -> None:
    """A catch-up holds the graph lock while it inserts the tail, at the lowest priority: a flush waiting for it let
    the memtable grow for as long. With the lock held elsewhere, a flush writes a base that is due without its
    graph, and a delta where a base would be due only because the graph grew; a close-style persist, with the lock
    free, then writes the base with the graph."""
    path = new_store(tmp_path)
    x = _clustered(np.random.default_rng(67), 3_100, 30)

    def graphed(name: str) -> int:
        return struct.unpack_from("<Q", (path / "index" / name).read_bytes(), 32)[0]

    def flush_beside_a_catch_up(brain: Brain, index: VectorIndex) -> None:
        with index.graph_lock:  # as the catch-up holds it
            flushing = threading.Thread(target=brain.flush)
            flushing.start()
            flushing.join(30)
            assert not flushing.is_alive(), "the flush waited for the graph lock"

    with Brain.open(path, flush_bytes=1 << 30) as brain:
        add_range(brain, x, 0, 3_000)
        brain.find({"vector": x[0].tolist()})
        brain.vector_follower.catch_up()
        # the catch-up the find started on its own thread, ended too: at the lowest priority on a loaded box it
        # once ran only after the next rows came, and put them in the graph before the base below was written
        graph_in(brain)
        with brain.at().vectors() as index:
            assert index.graphed == 3_000
        flush_beside_a_catch_up(brain, index)  # the first link: a base is due, written without the graph
        (base,) = chain(path)
        assert base.endswith(".vec") and graphed(base) == 0
        with brain.at().vectors() as held:
            assert held.next_link() == "base"  # the graph is past the base's by all 3,000 slots
        add_range(brain, x, 3_000, 3_100)
        flush_beside_a_catch_up(brain, index)  # due a base only for the graph: a delta
        assert chain(path)[0] == base and chain(path)[1].endswith(".vecd")
        brain.vector_follower.persist()  # the lock free: the base with its graph
        (kept,) = chain(path)
        assert kept.endswith(".vec") and kept != base
    # the graph's 3,000, and the 100 rows after them too when a catch-up took them first (one that runs at persist
    # is waited for: a fresh clone once found 3,100 here, its catch-up started beside the second flush)
    assert graphed(kept) in (3_000, 3_100)
    with Brain.open(path) as brain:
        check(brain, np.random.default_rng(68))


def test_a_bases_chunk_checks_span_the_slots_parts(tmp_path: Path) -> None:
    """A base is written from its slots' parts as they lie (mapped links, then owned rows): every chunk's check is
    the crc32c of those bytes laid end to end, also for a chunk that two parts share."""
    rng = np.random.default_rng(71)
    joined = rng.standard_normal((1_000, DIM), dtype=np.float32)
    parts = [F._bytes_of(joined[a:b]) for a, b in ((0, 100), (100, 357), (357, 1_000))]
    size = F.CHUNK_SLOTS * 4 * DIM
    whole = joined.tobytes()
    expected = [crc32c.crc32c(whole[at : at + size]) for at in range(0, len(whole), size)]
    assert F._chunk_checks(parts, size).tolist() == expected
    index = VectorIndex()
    index.apply_all((None, {"denseInt": i, "vector": v.tobytes()}) for i, v in enumerate(joined))
    index.stamp = 5
    frozen = index.freeze(base=True)
    F.write_link(tmp_path, frozen, frozen.parts())
    back, why = read_chain(tmp_path, 5)
    assert why == [] and back is not None and len(back) == 1_000
    for dense in (0, 356, 357, 999):
        assert back.vector_of(dense).tobytes() == M.unit(joined[dense].tobytes()).tobytes()


@pytest.mark.parametrize("damaged", [False, True])
def test_a_bases_quantised_copy_takes_the_prior_copys_checked_chunks(tmp_path: Path, monkeypatch, damaged) -> None:
    """A base written after another (no compaction between: its slots start with the other's) takes the codes,
    scales and checks of the prior quantised copy's whole chunks as they are, and works out only the rest: the copy
    is byte for byte the one worked out whole. A prior chunk that fails its check, and every one after it, is
    worked out again from the float32 rows: a damaged byte is never carried into the new copy."""
    folder = tmp_path / "vectors"
    rng = np.random.default_rng(7)
    first_slots, more = 3 * M.CHUNK_SLOTS + 17, 600
    vectors = rng.standard_normal((first_slots + more, DIM)).astype(np.float32)
    index = VectorIndex()
    index.apply_all((None, {"denseInt": d, "vector": vectors[d].tobytes()}) for d in range(first_slots))
    index.stamp = 3
    first = index.freeze(base=True)
    assert first.prior is None
    F.write_link(folder, first, first.parts())
    prior = folder / F.snapshot_name(3, F.QUANTISED_SUFFIX)
    if damaged:
        codes_at = len(prior.read_bytes()) - first_slots * DIM
        flip(prior, codes_at + M.CHUNK_SLOTS * DIM + 11)  # the second chunk's codes
    index.apply_all((None, {"denseInt": d, "vector": vectors[d].tobytes()}) for d in range(first_slots, len(vectors)))
    index.apply({"denseInt": 5, "vector": vectors[5].tobytes()}, None)  # a slot killed stays a slot of the base
    index.stamp = 9
    second = index.freeze(base=True)
    assert second.prior == (3, first_slots)
    whole = F.encode_quantised(9, second.vectors.contiguous(len(second.dense)))
    worked: list[int] = []
    quantise = F.quantise
    monkeypatch.setattr(F, "quantise", lambda rows: worked.append(len(rows)) or quantise(rows))
    F.write_link(folder, second, second.parts())
    assert (folder / F.snapshot_name(9, F.QUANTISED_SUFFIX)).read_bytes() == whole
    taken = (1 if damaged else 3) * M.CHUNK_SLOTS
    assert sum(worked) == len(vectors) - taken
    assert not prior.exists()  # the older copy goes once the new one is written


def test_a_flush_leaves_a_large_base_to_its_own_thread_and_the_next_flushes_go_on(tmp_path: Path, monkeypatch) -> None:
    """A flush that freezes a large base (here every base: the bound lowered) leaves its writing to
    a thread of its own, held here as a slow disk holds it: the flushes after it write their tables meanwhile and
    skip their links, so the chain on disk never has a delta after a base not yet written; once the base is down
    the next flush appends a delta after it, and a close (which waits for a base still being written) and a
    reopen read the index from the chain at the head, as the rows have it."""
    from brainy.index import follower as FO

    monkeypatch.setattr(FO, "BASE_BEHIND_SLOTS", 1)
    held, writing = threading.Event(), threading.Event()
    write_link = F.write_link

    def slow_disk(folder, frozen, data) -> None:
        if frozen.is_base:
            writing.set()
            assert held.wait(30)
        write_link(folder, frozen, data)

    monkeypatch.setattr(F, "write_link", slow_disk)
    path, rng, x, brain = opened(tmp_path, 5, 1000, 400)
    with brain:
        brain.flush()
        assert writing.wait(10) and brain.vector_follower._basing is not None
        base = brain.head
        tables = len(brain.sources.tables)
        for start in (400, 500, 600):
            add_range(brain, x, start, start + 100)
            began = time.monotonic()
            brain.flush()
            assert time.monotonic() - began < 10  # not behind the held base
        assert len(brain.sources.tables) == tables + 3
        assert chain(path) == []  # nothing yet: the base is still held, and no delta went ahead of it
        held.set()
        brain.vector_follower._wait_for_base()
        assert chain(path) == [f"{base:020d}.vec"]
        add_range(brain, x, 700, 800)
        brain.flush()
        assert chain(path) == [f"{base:020d}.vec", f"{brain.head:020d}.vecd"]
        held.clear()
        writing.clear()
        for i in range(800):  # past a quarter of the base: the next link is a base, held again
            brain.update({"id": f"v{i}", "vector": x[999 - i % 200].tolist()})
        brain.flush()
        assert writing.wait(10)
        add_range(brain, x, 800, 900)
        threading.Timer(0.5, held.set).start()
    # the close waited for the held base and wrote its own link after it
    assert chain(path)[-1] == f"{brain.head:020d}.vecd" and chain(path)[0].endswith(".vec") and len(chain(path)) == 2
    with Brain.open(path) as brain:
        check(brain, rng)
        assert brain.vector_follower.built_from == f"snapshot at {brain.head}"
        assert index_state(brain)[1:] == index_of(VectorIndex.build(brain.at().entities(vectors=True), brain.head))[1:]


def test_a_built_index_a_read_finds_damaged_is_refused_by_name_and_rebuilt(tmp_path: Path, monkeypatch) -> None:
    """The hold of an index already built (follower._HeldBuilt): a chunk a search finds damaged inside it is
    refused as ProjectionBehindError naming the damage, the warning says so, the lock is let go, and the next read
    answers from an index rebuilt from the rows; a refusal of another kind passes through untouched."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((300, DIM), dtype=np.float32)
    with Brain.open(new_store(tmp_path)) as brain:
        ids = brain.addMany({"items": [{"type": "thing", "vector": v.tolist()} for v in x]})["ids"]
        assert brain.find({"vector": x[5].tolist(), "limit": 1})["results"][0]["id"] == ids[5]
        built = brain.vector_follower.kept
        assert built is not None

        def damaged(*_args, **_kwargs):
            raise M.Damaged("chunk 0 of the test's slots failed its check")

        with monkeypatch.context() as m:
            m.setattr(built, "search", damaged)
            with pytest.raises(R.ProjectionBehindError, match="damaged"):
                brain.find({"vector": x[5].tolist(), "limit": 1})
        assert any(w["code"] == "vectors-rebuilt" and "chunk 0 of the test" in w["message"] for w in brain.warnings)
        assert brain.vector_follower.kept is not built
        assert brain.find({"vector": x[7].tolist(), "limit": 1})["results"][0]["id"] == ids[7]
        with monkeypatch.context() as m:
            rebuilt = brain.vector_follower.kept
            refused = R.InvalidArgumentError("vector: the test's", field="vector", reason="bad-operand")
            m.setattr(rebuilt, "search", lambda *a, **k: (_ for _ in ()).throw(refused))
            with pytest.raises(R.InvalidArgumentError):
                brain.find({"vector": x[7].tolist(), "limit": 1})
        assert brain.vector_follower.kept is rebuilt
        assert brain.find({"vector": x[9].tolist(), "limit": 1})["results"][0]["id"] == ids[9]
