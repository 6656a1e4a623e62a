"""A base's quantised copy (docs/store-format.md, "Vector index snapshots"): written beside every base, read in
place, each chunk of codes checked before it is scored; the exact scan's first pass over it, whose bound makes
the answer the plain float32 scan's to the bit; its damage refused like the float32 slots'; a base without it
scanned as before."""

from __future__ import annotations

import os
import struct
import tempfile
from pathlib import Path

import crc32c
import numpy as np
import pytest
from helpers import flip
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_vector_snapshots import check_near, graphed_store, refused_then_rebuilt, written_again
from test_vectors import DIM

from brainy._speedups import load
from brainy.engine import Brain
from brainy.index import vector_format as F
from brainy.index import vector_matrix as M
from brainy.index import vectors as V
from brainy.index.vector_format import store_tag, write_link
from brainy.index.vectors import VectorIndex, read_chain
from brainy.store.crc import crc32c_joined

TWINS = [load("vecpack", "cython"), load("vecpack", "python")]


def copy_of(base: Path) -> Path:
    return base.with_suffix(".vecq")


def quantised_layout(copy: Path) -> dict[str, int]:
    """Where a quantised copy's sections start, from its header."""
    data = copy.read_bytes()
    magic, form, stamp, dims, count, chunk, store, _ = struct.unpack_from("<4sIQIxxxxQI16sI", data)
    assert (magic, form, dims) == (b"BVQ1", 2, DIM)
    chunks = -(-count // chunk)
    return {
        "stamp": stamp,
        "count": count,
        "chunk": chunk,
        "store": store,
        "scales": 56,
        "crcs": 56 + 4 * count,
        "codes": -(-(56 + 4 * count + 4 * chunks + 4) // 64) * 64,
    }


def test_the_copy_is_as_documented_and_written_with_every_base(tmp_path: Path) -> None:
    """The flush that writes a base writes its copy, named by the base's stamp: the header, the scales, each
    chunk's crc32c and the codes as docs/store-format.md says; a new base removes the older copy."""
    path, queries, base = graphed_store(tmp_path, 31, n=600)
    copy = copy_of(base)
    data = copy.read_bytes()
    at = quantised_layout(copy)
    assert at["stamp"] == int(base.stem) and at["count"] == 600 and at["chunk"] == 256
    assert struct.unpack_from("<I", data, 52)[0] == crc32c.crc32c(data[:52])
    assert at["store"] == store_tag(path) and len(at["store"]) == 16 and at["store"] != bytes(16)
    assert len(data) == at["codes"] + DIM * 600
    front_crc_at = at["crcs"] + 4 * 3  # three chunks
    assert struct.unpack_from("<I", data, front_crc_at)[0] == crc32c.crc32c(data[56:front_crc_at])
    assert not any(data[front_crc_at + 4 : at["codes"]])  # the pad
    scales = np.frombuffer(data, "<f4", 600, at["scales"])
    codes = np.frombuffer(data, np.int8, 600 * DIM, at["codes"]).reshape(600, DIM)
    for c in range(3):
        assert struct.unpack_from("<I", data, at["crcs"] + 4 * c)[0] == crc32c.crc32c(
            codes[256 * c : 256 * (c + 1)].tobytes()
        )
    index, _ = read_chain(path / "index", 10**9)
    x = index._slots.copy(0, 600)
    assert np.abs(codes).max() == 127 and (np.abs(codes).max(axis=1) == 127).all()
    assert np.allclose(scales, np.abs(x).max(axis=1) / 127)
    assert (np.abs(x - scales[:, None] * codes) <= scales[:, None] / 2 * (1 + 1e-6)).all()
    newer = written_again(path, queries)
    assert sorted(p.name for p in (path / "index").glob("*.vecq")) == [copy_of(newer).name]
    assert quantised_layout(copy_of(newer))["count"] == 601


def test_the_twins_bound_codes_alike() -> None:
    """``code_bounds``: the exact int8 x int16 product (even at the extremes, 384 x 127 x 32,767, inside int32),
    then scale * (step * dot + per_scale) + constant in float64; both twins to the bit."""
    rng = np.random.default_rng(3)
    codes = rng.integers(-127, 128, (700, DIM), dtype=np.int8)
    query = rng.integers(-32767, 32768, DIM).astype(np.int16)
    scales = rng.random(700).astype(np.float32)
    codes[0], query[:] = 127, 32767
    dots = (codes.astype(np.int64) @ query.astype(np.int64)).astype(np.float64)
    want = (scales.astype(np.float64) * (1e-5 * dots + 0.25) + 0.5).astype(np.float32)
    for twin in TWINS:
        out = np.empty(700, np.float32)
        twin.code_bounds(codes, query, scales, 1e-5, 0.25, 0.5, out)
        assert out.tobytes() == want.tobytes()
        with pytest.raises(ValueError):
            twin.code_bounds(codes, query[:-1], scales, 1e-5, 0.25, 0.5, out)


def quantised_by_the_law(vectors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """docs/store-format.md's law, in numpy, cell by cell: scale = max |x| / 127 in float32, code = x / scale in
    float64 rounded half to even, clipped (a zero row: scale 0, codes 0)."""
    scales = (np.abs(vectors).max(axis=1, initial=0) / np.float32(127)).astype(np.float32)
    codes = np.zeros(vectors.shape, np.int8)
    for r, row in enumerate(vectors):
        if scales[r] > 0:
            codes[r] = [max(-127, min(127, round(float(x) / float(scales[r])))) for x in row]
    return codes, scales


@settings(max_examples=80, deadline=None)
@given(
    rows=st.lists(
        st.lists(st.floats(-2.0, 2.0, width=32, allow_subnormal=True), min_size=DIM, max_size=DIM),
        min_size=1,
        max_size=6,
    ),
    ties=st.integers(0, 5),
)
def test_the_twins_quantise_as_the_law_says(rows, ties) -> None:
    """``quantise``: both twins write the codes and scales the law gives, to the bit, on drawn rows with zero rows,
    subnormal cells and cells lying exactly half way between two codes (ties, rounded to the even one)."""
    vectors = np.array(rows, np.float32)
    if ties:  # a row whose cells are k + 0.5 steps of its scale: 127 * scale stays the row's largest
        k = np.arange(DIM) % (2 * ties) - ties
        vectors[0] = (k + 0.5).astype(np.float32) * np.float32(1 / 128)
        vectors[0, 0] = np.float32(127 / 128)
    want_codes, want_scales = quantised_by_the_law(vectors)
    for twin in TWINS:
        codes, scales = np.full(vectors.shape, 99, np.int8), np.full(len(vectors), 9.0, np.float32)
        twin.quantise(vectors, codes, scales)
        assert scales.tobytes() == want_scales.tobytes()
        assert codes.tobytes() == want_codes.tobytes()
        with pytest.raises(ValueError):
            twin.quantise(vectors, codes[:, :-1], scales)


def chain_pair(folder: Path) -> tuple[VectorIndex, VectorIndex]:
    """The chain read twice: once with its copy, once as a base without one (the plain float32 scan)."""
    quick, _ = read_chain(folder, 10**9, graph_later=True)
    plain, _ = read_chain(folder, 10**9, graph_later=True)
    assert quick._slots.quantised
    plain._slots.base.quantised = None
    return quick, plain


vectors_st = st.integers(1, 1_200)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    n=vectors_st,
    seed=st.integers(0, 2**32 - 1),
    clusters=st.integers(1, 40),
    spread=st.sampled_from([0, 1e-3, 0.05, 1]),
    dead=st.floats(0, 0.9),
    tail=st.integers(0, 300),
    late_dead=st.floats(0, 0.5),
    ks=st.lists(st.integers(1, 60), min_size=1, max_size=4),
    twin=st.sampled_from(TWINS),
)
def test_the_bounded_scan_answers_what_the_plain_scan_does(
    monkeypatch, n, seed, clusters, spread, dead, tail, late_dead, ks, twin
) -> None:
    """Random vectors (tight clusters, exact duplicates: ties), slots dead in the base and killed after it, a tail of
    owned slots, random k and queries (some a stored vector: a tie at the top): the ids and the scores, bit for bit,
    of the scan of every float32 row, with either twin's product."""
    monkeypatch.setattr(M, "vecpack", twin)
    monkeypatch.setattr(V, "QUANTISED_SCAN", True)
    rng = np.random.default_rng(seed)
    centers = rng.standard_normal((clusters, DIM)).astype(np.float32)
    x = centers[rng.integers(0, clusters, n + tail)] + spread * rng.standard_normal((n + tail, DIM)).astype(np.float32)
    index = VectorIndex(graph=False)
    for i in range(n):
        index.apply(None, {"denseInt": i, "vector": x[i].tobytes()})
    for i in np.flatnonzero(rng.random(n) < dead).tolist():
        index.apply({"denseInt": i, "vector": x[i].tobytes()}, None)
    index.stamp = 1
    frozen = index.freeze(base=True)
    with tempfile.TemporaryDirectory() as folder:
        write_link(Path(folder), frozen, frozen.encode())
        quick, plain = chain_pair(Path(folder))
    late = np.flatnonzero(rng.random(n) < late_dead).tolist()
    for held in (quick, plain):
        for i in range(n, n + tail):
            held.apply(None, {"denseInt": i, "vector": x[i].tobytes()})
        for i in late:
            held.apply({"denseInt": i, "vector": x[i].tobytes()}, None)
    queries = [
        M.unit(rng.standard_normal(DIM)),
        M.unit(x[rng.integers(0, n + tail)]),
        M.unit(centers[0] + 0.01 * rng.standard_normal(DIM)),
    ]
    for q in queries:
        for k in ks:
            got_scores, got_dense = quick.exact(q, k)
            want_scores, want_dense = plain.exact(q, k)
            assert got_dense.tolist() == want_dense.tolist()
            assert got_scores.tobytes() == want_scores.tobytes()


def test_a_first_search_reads_few_float32_chunks(tmp_path: Path) -> None:
    """Clustered unit vectors: the first search scores the codes of every chunk and the float32 rows of few, and
    answers as the rows do; the graph's thread still checks every float32 chunk before the graph takes over."""
    path, queries, base = graphed_store(tmp_path, 32, n=10_000)
    index, _ = read_chain(path / "index", 10**9, graph_later=True)
    part = index._slots.base
    chunks = len(part.crcs)
    quick = index.exact(queries[0], 10)
    assert part.quantised.checked and part._unchecked >= chunks - 4
    with Brain.open(path) as brain:
        check_near(brain, queries)
    plain, _ = read_chain(path / "index", 10**9, graph_later=True)
    plain._slots.base.quantised = None
    want = plain.exact(queries[0], 10)
    assert quick[1].tolist() == want[1].tolist() and quick[0].tobytes() == want[0].tobytes()
    index.take_graph()
    assert part._unchecked == 0


@pytest.mark.parametrize("served", [False, True])
def test_a_damaged_chunk_of_codes_is_never_used_and_the_rows_rebuild_the_index(tmp_path: Path, served: bool) -> None:
    """One byte flipped in chunk 5 of the codes: the open checks out, the search that meets it raises Damaged and
    answers nothing; through a brain the find refuses by name and the rows rebuild the index, which answers."""
    path, queries, base = graphed_store(tmp_path, 33)
    copy = copy_of(base)
    flip(copy, quantised_layout(copy)["codes"] + DIM * (5 * 256 + 7) + 11)
    index, why = read_chain(path / "index", 10**9, graph_later=True)
    assert index is not None and not why and index._slots.quantised
    with pytest.raises(M.Damaged, match="quantised codes chunk 5 "):
        index.search(queries[0], 10)
    with Brain.open(path) as brain:
        brain.follower.background = brain.vector_follower.background = served
        refused_then_rebuilt(brain, queries, 5, served)


@pytest.mark.parametrize("where", ["header", "scales", "stamp", "gone"])
def test_a_copy_that_does_not_check_out_is_not_used_and_the_next_flush_writes_it_again(
    tmp_path: Path, where: str
) -> None:
    """A damaged header or scales, a copy of another base, or none at all: the copy is not used, and the float32
    scan answers as the rows do; the warnings name it (a missing one is not warned of), and the next flush writes
    the copy again, which the next open reads."""
    path, queries, base = graphed_store(tmp_path, 34, n=1_000)
    copy = copy_of(base)
    if where == "header":
        flip(copy, 30)
    elif where == "scales":
        flip(copy, 56 + 4 * 500)
    elif where == "stamp":
        data = bytearray(copy.read_bytes())
        data[8:16] = struct.pack("<Q", int(base.stem) - 1)  # under the base's name, a copy of another base
        data[52:56] = struct.pack("<I", crc32c.crc32c(bytes(data[:52])))
        copy.write_bytes(bytes(data))
    else:
        copy.unlink()
    index, why = read_chain(path / "index", 10**9, graph_later=True)
    assert index is not None and not why and not index._slots.quantised and index.quantised_owed
    notes = index.notes()
    assert (notes == []) if where == "gone" else (len(notes) == 1 and copy.name in notes[0]), notes
    if where == "stamp":
        assert "the copy of a base of generation" in notes[0]
    with Brain.open(path) as brain:
        check_near(brain, queries)
        assert brain.vector_follower.built_from == f"snapshot at {brain.head}"
        said = [w["message"] for w in brain.warnings if w["code"] == "vectors-rebuilt"]
        assert (said == []) if where == "gone" else any(copy.name in m for m in said)
    index, why = read_chain(path / "index", 10**9, graph_later=True)
    assert index is not None and not why and index._slots.quantised and not index.quantised_owed
    assert index.notes() == [] and quantised_layout(copy)["stamp"] == int(base.stem)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 40_000), st.integers(0, 40), st.integers(0, 2**32 - 1), st.booleans(), st.booleans())
def test_the_largest_bounds_are_selected_as_a_selection_over_every_value_would(n, k, seed, ties, dead):
    """The bounded scan's k seed slots (``M._largest``, which reads each run's largest first) hold the k largest
    values, ties and dead slots (-inf) included, whatever the length against the run."""
    rng = np.random.default_rng(seed)
    values = rng.integers(0, 50, n).astype(np.float32) if ties else rng.standard_normal(n).astype(np.float32)
    if dead and n:
        values[rng.random(n) < 0.3] = -np.inf
    picked = M._largest(values, k)
    assert len(picked) == min(k, n) and len(set(picked.tolist())) == len(picked)
    assert np.array_equal(np.sort(values[picked]), np.sort(values)[n - len(picked) :])


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 3000), st.integers(1, 12), st.integers(1, 3000), st.integers(0, 2**32 - 1))
def test_chunk_checksums_joined_are_the_checksum_of_the_chunks_end_to_end(size, parts, last, seed):
    """crc.crc32c_joined: the CRC-32C of chunks laid end to end from each chunk's own, every chunk ``size`` bytes
    but the last; one wrong chunk checksum changes it."""
    rng = np.random.default_rng(seed)
    chunks = [rng.bytes(size) for _ in range(parts - 1)] + [rng.bytes(last)]
    crcs = [crc32c.crc32c(c) for c in chunks]
    assert crc32c_joined(crcs, size, last) == crc32c.crc32c(b"".join(chunks))
    crcs[rng.integers(0, parts)] ^= 1 << int(rng.integers(0, 32))
    assert crc32c_joined(crcs, size, last) != crc32c.crc32c(b"".join(chunks))


def _evicted(path: Path) -> None:
    """``path``'s pages dropped from the page cache (they are clean: written and fsynced)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def test_reading_ahead_of_cold_files_waits_for_the_open_and_of_cached_ones_does_not(
    tmp_path: Path, monkeypatch
) -> None:
    """With the copy out of the page cache, nothing is read ahead until the open says its own reads are done (the
    disk is what the two would share); with it cached, the reading ahead begins at once. Either way an open
    then finds the same checks done and answers as the rows do."""
    import gc
    import threading
    import time

    monkeypatch.setattr(F, "AHEAD_SLOTS", 1)
    path, queries, base = graphed_store(tmp_path, 35)
    copy = copy_of(base)
    copy.read_bytes()
    assert F._cached(copy)
    opened = threading.Event()
    ahead = F.check_ahead(path / "index", 0, opened)
    assert ahead is not None and ahead.checks[copy.name].result(10) is not None  # not waited for
    del ahead  # and its map of the copy: mapped pages stay in the cache
    deadline = time.monotonic() + 10
    while True:  # the pool's worker lets its finished work item (and the map the check answered) go a moment later
        gc.collect()
        _evicted(copy)
        if not F._cached(copy) or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert not F._cached(copy)
    opened = threading.Event()
    ahead = F.check_ahead(path / "index", 0, opened)
    assert ahead is not None
    time.sleep(0.3)
    assert not any(check.done() or check.running() for check in ahead.checks.values())  # held back
    opened.set()
    assert ahead.checks[copy.name].result(10) is not None and ahead.checks[base.name].result(10) is not None
    del ahead
    gc.collect()
    _evicted(copy)
    with Brain.open(path) as brain:  # the open sets its own event: its checks run once its reads are done
        brain.follower.background = brain.vector_follower.background = True
        assert brain.vector_follower._ahead.checks[copy.name].result(10) is not None
        check_near(brain, queries)


@pytest.mark.parametrize("damaged", [False, True])
def test_an_open_checks_a_large_copy_ahead_and_a_damaged_chunk_is_still_named(
    tmp_path: Path, monkeypatch, damaged: bool
) -> None:
    """A copy checked ahead (every copy counts as large here): the open begins it on its own thread, and the first
    search finds every chunk of codes checked and answers as the rows do. With one byte of chunk 5 flipped the
    whole pass disagrees, nothing is marked, and the search that meets chunk 5 refuses by name as before."""
    monkeypatch.setattr(F, "AHEAD_SLOTS", 1)
    path, queries, base = graphed_store(tmp_path, 35)
    copy = copy_of(base)
    if damaged:
        flip(copy, quantised_layout(copy)["codes"] + DIM * (5 * 256 + 7) + 11)
    ahead = F.check_ahead(path / "index")
    assert ahead is not None and sorted(ahead.checks) == sorted([base.name, copy.name])
    of, store, codes = ahead.checks[copy.name].result()
    assert of == int(base.stem) and store == store_tag(path) and codes.checked is not damaged
    with Brain.open(path) as brain:
        brain.follower.background = brain.vector_follower.background = True
        opened = brain.vector_follower._ahead
        assert opened is not None and sorted(opened.checks) == sorted([base.name, copy.name])
        checked, prepared = opened.checks[copy.name], opened.checks[base.name]
        if damaged:
            refused_then_rebuilt(brain, queries, 5, True)
            return
        # both done before the first search takes them (a check the helper had not begun when the search came is
        # called off and read by the search itself: on a loaded box that was the base's, once)
        checked.result(30), prepared.result(30)
        check_near(brain, queries)
        with brain.vector_follower.held() as index:
            assert index._slots.base.quantised is checked.result()[2]  # the copy the open checked, taken
            assert index._slot is prepared.result().slot  # and the base's arrays it made
        assert brain.vector_follower._ahead is None
