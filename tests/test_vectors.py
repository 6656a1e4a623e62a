"""The vector index and find's semantic leg (DOORS.md 4, 5.1 similar): against an exact brute-force oracle.

The oracle is numpy cosine over every live row of the generation read, ordered by score then id.
"""

from __future__ import annotations

import random
import struct
import time

import crc32c
import numpy as np
import pytest
from helpers import flip, new_store

from brainy.contract import refusals as R
from brainy.engine import Brain
from brainy.index import embedder
from brainy.index import vector_format as F
from brainy.index import vector_matrix as M
from brainy.index import vectors as V
from brainy.index.vector_matrix import unit
from brainy.index.vectors import VectorIndex
from brainy.store.workers import waited_for

DIM = 384


def _unit(v) -> np.ndarray:
    v = np.asarray(v, dtype=np.float32)
    return v / np.linalg.norm(v)


def _clustered(rng: np.random.Generator, n: int, clusters: int) -> np.ndarray:
    centers = rng.standard_normal((clusters, DIM)).astype(np.float32)
    x = centers[rng.integers(0, clusters, n)] + 0.35 * rng.standard_normal((n, DIM)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def oracle(
    brain: Brain, vector, k: int, keep=lambda row: True, generation: int | None = None, tiers=("public",)
) -> list[tuple[str, float]]:
    """The exact answer: every live, vectored, allowed row of the generation, cosine, score then id."""
    q = _unit(vector)
    scored = [
        (r["id"], float(_unit(np.frombuffer(r["vector"], "<f4")) @ q))
        for r in brain.at(generation).entities(vectors=True)
        if r.get("vector") and r.get("visibility", "public") in tiers and keep(r)
    ]
    scored.sort(key=lambda t: (-t[1], t[0]))
    return scored[:k]


def graph_in(brain: Brain) -> None:
    """Wait for the graph's background catch-up (a snapshot's graph loaded, the tail put in) to finish; the wait
    lifts it (``waited_for``), as a close's does."""
    deadline = time.monotonic() + 60
    while brain.vector_follower._catching_up:
        assert time.monotonic() < deadline, "the graph's catch-up never finished"
        catching = brain.vector_follower._catching_thread
        if catching is not None:
            waited_for(catching)
        time.sleep(0.01)


def _assert_same(answer: dict, want: list[tuple[str, float]]) -> None:
    got = [(h["id"], h["score"]) for h in answer["results"]]
    assert [g[0] for g in got] == [w[0] for w in want]
    assert np.allclose([g[1] for g in got], [w[1] for w in want], atol=1e-5)


def _seeded(tmp_path, seed: int, n: int, clusters: int) -> tuple[Brain, np.ndarray]:
    """A writer over n clustered vectored rows (``_item``), and the vectors."""
    rng, rnd = np.random.default_rng(seed), random.Random(seed)
    x = _clustered(rng, n, clusters)
    brain = Brain.open(new_store(tmp_path))
    brain.addMany({"items": [_item(i, x[i], rnd) for i in range(n)]})
    return brain, x


def _item(i: int, vector: np.ndarray, rnd: random.Random) -> dict:
    return {
        "type": "thing",
        "id": f"v{i}",
        "vector": vector.tolist(),
        "data": f"note {i} " + rnd.choice(["apple pie", "pear tart", "plum jam", "fig roll"]),
        "metadata": {"g": i % 100, "h": i % 10},
        "visibility": "internal" if i % 17 == 0 else "public",
    }


def test_semantic_find_is_the_exact_answer_across_writes_flushes_compactions_and_a_reopen(tmp_path):
    """find(vector) top-k, with and without a where, equals the oracle after adds, vector updates, vector
    drops, metadata-only updates, removes, a flush, a compaction and a reopen; asOf a past generation
    searches that generation's rows; no removed or replaced vector ever answers."""
    path = new_store(tmp_path)
    rng, rnd = np.random.default_rng(3), random.Random(3)
    x = _clustered(rng, 700, 12)
    brain = Brain.open(path, flush_bytes=64 << 10, compact_at=3)
    try:
        brain.addMany({"items": [_item(i, x[i], rnd) for i in range(600)]})
        queries = [x[rnd.randrange(700)] + 0.05 * rng.standard_normal(DIM).astype(np.float32) for _ in range(6)]
        past_answers = {}
        for step in range(5):
            for _ in range(40):
                i = rnd.randrange(700)
                exists = brain.get(f"v{i}")["entity"] is not None
                roll = rnd.random()
                if exists and roll < 0.25:
                    brain.remove({"id": f"v{i}"})
                elif exists and roll < 0.45:
                    brain.update({"id": f"v{i}", "vector": (-x[i]).tolist()})  # the old one must never answer
                elif exists and roll < 0.55:
                    brain.update({"id": f"v{i}", "vector": None})
                elif exists and roll < 0.7:
                    brain.update({"id": f"v{i}", "metadata": {"g": 7, "h": 1}})
                else:
                    brain.add({**_item(i, x[i], rnd), "upsert": True})
            if step == 1:
                brain.flush()
            if step == 2:
                brain.compact()
            if step == 3:
                brain.close()
                brain = Brain.open(path, flush_bytes=64 << 10, compact_at=3)
            head = brain.at().generation
            for q in queries:
                _assert_same(brain.find({"vector": q.tolist(), "limit": 10}), oracle(brain, q, 10))
                _assert_same(
                    brain.find({"vector": q.tolist(), "limit": 5, "where": {"h": 1}}),
                    oracle(brain, q, 5, lambda r: r["metadata"].get("h") == 1),
                )
                _assert_same(
                    brain.find({"vector": q.tolist(), "limit": 5, "where": {"g": {"gte": 90}}, "visibility": "all"}),
                    oracle(
                        brain, q, 5, lambda r: r["metadata"].get("g", -1) >= 90, tiers=("public", "internal", "system")
                    ),
                )
            past_answers[head] = [oracle(brain, q, 8) for q in queries]
        for generation, wants in past_answers.items():
            for q, want in zip(queries, wants):
                then = brain.asOf(
                    {"generation": generation, "read": {"door": "find", "args": {"vector": q.tolist(), "limit": 8}}}
                )
                _assert_same(then["result"], want)
    finally:
        brain.close()


def test_the_graph_answers_live_vectors_only_and_filters_stay_exact(tmp_path):
    """With the graph caught up, a search reads it (stages say so), an updated or removed row's old vector
    never answers, a filter keeping 1% or 0.1% of the rows is answered exactly, and recall@10 against the
    oracle on a seeded clustered set stays above a floor well below the benchmark's."""
    path = new_store(tmp_path)
    rng, _rnd = np.random.default_rng(11), random.Random(11)
    n = 6000
    x = _clustered(rng, n, 60)
    brain = Brain.open(path)
    try:
        for start in range(0, n, 2000):
            brain.addMany(
                {
                    "items": [
                        {
                            "type": "thing",
                            "id": f"c{i}",
                            "vector": x[i].tolist(),
                            "metadata": {"p": i % 100, "m": i % 1000},
                        }
                        for i in range(start, start + 2000)
                    ]
                }
            )
        brain.find({"vector": x[0].tolist()})  # builds the index (all tail, exact)
        graph_in(brain)  # the catch-up that find started, done (else it could hold the graph lock below)
        brain.vector_follower.catch_up()
        with brain.at().vectors() as index:
            assert index.graphed == n and index.pending == 0
        queries = [x[i] + 0.05 * rng.standard_normal(DIM).astype(np.float32) for i in rng.integers(0, n, 40)]
        hits = 0
        for q in queries:
            answer = brain.find({"vector": q.tolist(), "limit": 10, "explain": True})
            assert any(s["stage"] == "semantic (graph)" for s in answer["stages"])
            want = {w[0] for w in oracle(brain, q, 10)}
            hits += len(want & {h["id"] for h in answer["results"]})
        assert hits / (10 * len(queries)) >= 0.8
        # a vector replaced or removed answers no more, though the graph still links its slot
        target = x[123]
        assert brain.find({"vector": target.tolist(), "limit": 1})["results"][0]["entity"]["key"] == "c123"
        brain.update({"id": "c123", "vector": (-target).tolist()})
        brain.remove({"id": "c124"})
        for answer in (
            brain.find({"vector": target.tolist(), "limit": 50}),
            brain.find({"vector": x[124].tolist(), "limit": 50}),
        ):
            assert not {"c123", "c124"} & {h["entity"]["key"] for h in answer["results"]}
        for where, keep in (
            ({"p": 7}, lambda r: r["metadata"]["p"] == 7),  # 1%
            ({"m": 7}, lambda r: r["metadata"]["m"] == 7),  # 0.1%
            ({"m": {"lt": 6}}, lambda r: r["metadata"]["m"] < 6),
        ):  # a residual where
            for q in queries[:5]:
                _assert_same(
                    brain.find({"vector": q.tolist(), "limit": 10, "where": where}), oracle(brain, q, 10, keep)
                )
        # a large filter walks the graph with a predicate, and its hits stay inside the filter
        wide = brain.find(
            {"vector": queries[0].tolist(), "limit": 10, "where": {"p": {"in": list(range(90))}}, "explain": True}
        )
        assert all(h["entity"]["metadata"]["p"] < 90 for h in wide["results"]) and len(wide["results"]) == 10
    finally:
        brain.close()


def test_dead_slots_are_compacted_once_they_outnumber_the_live(tmp_path):
    """Every vector replaced twice: the dead slots outnumber the live, the follower's catch-up drops them and
    builds the graph again, and the answers stay the oracle's before, during and after."""
    path = new_store(tmp_path)
    rng = np.random.default_rng(12)
    n = 2500
    brain = Brain.open(path)
    try:
        for round_ in range(3):
            x = _clustered(rng, n, 25)
            brain.addMany(
                {"items": [{"type": "thing", "id": f"c{i}", "vector": x[i].tolist()} for i in range(n)]}
            ) if round_ == 0 else brain.transact(
                {"ops": [{"door": "update", "args": {"id": f"c{i}", "vector": x[i].tolist()}} for i in range(n)]}
            )
            if round_ == 0:
                brain.find({"vector": x[0].tolist()})  # the index exists from here on and follows the commits
                brain.vector_follower.catch_up()
                with brain.at().vectors() as index:
                    # the catch-ups the next commits start wait on the graph's lock: the dead slots stay, whenever
                    # those threads run, until the test has seen them
                    graph_lock = index.graph_lock
                graph_lock.acquire()
        try:
            with brain.at().vectors() as index:
                assert index.wasteful and len(index) == n
                before = [index.search(q, 10)[1].tolist() for q in x[:20]]
        finally:
            graph_lock.release()
        brain.vector_follower.catch_up()  # what the follower's thread runs
        with brain.at().vectors() as index:
            assert not index.wasteful and index.pending == 0 and index.graphed == n and len(index) == n
            assert sorted(index.slots_of(np.arange(2 * n)).tolist()) == list(range(n))  # renumbered, none dead
            after = [index.search(q, 10)[1].tolist() for q in x[:20]]
        hits = sum(len(set(a) & set(b)) for a, b in zip(before, after))
        assert hits / 200 >= 0.8  # before: exact over the tail; after: the new graph
        for q in x[:5]:
            _assert_same(
                brain.find({"vector": q.tolist(), "limit": 10, "where": {"type": "thing"}}), oracle(brain, q, 10)
            )
        brain.close()
        brain = Brain.open(path)  # the compacted index persisted at the close, read back
        brain.find({"vector": x[0].tolist()})
        graph_in(brain)  # its graph loaded off the read path
        with brain.at().vectors() as index:
            assert len(index) == n and index.graphed == n and not index.wasteful
        assert V.COMPACT_AFTER <= 2 * n
    finally:
        brain.close()


def test_the_vector_index_persists_stamped_and_is_rebuilt_when_it_cannot_be_trusted(tmp_path):
    """A close writes index/<stamp>.vec; the next open answers from it (graph included); a base behind the
    flushed generation (no delta after it) is caught up from the rows; a damaged one is rebuilt from the rows,
    with a warning."""
    path = new_store(tmp_path)
    rng = np.random.default_rng(5)
    x = _clustered(rng, 300, 5)
    brain = Brain.open(path)
    brain.addMany({"items": [{"type": "thing", "id": f"p{i}", "vector": x[i].tolist()} for i in range(300)]})
    q = x[9]
    want = oracle(brain, q, 10)
    _assert_same(brain.find({"vector": q.tolist()}), want)
    brain.vector_follower.catch_up()
    brain.close()
    snapshots = sorted(p.name for p in (path / "index").glob("*.vec"))
    assert snapshots == [f"{1:020d}.vec"]

    brain = Brain.open(path)
    _assert_same(brain.find({"vector": q.tolist()}), want)
    assert brain.vector_follower.built_from == "snapshot at 1"
    graph_in(brain)  # the snapshot's graph is loaded off the read path
    with brain.at().vectors() as index:
        assert index.graphed == 300
    # rows written after the snapshot, flushed past it, then a crash: the snapshot is older than the tables
    brain.update({"id": "p9", "vector": (-q).tolist()})
    brain.remove({"id": "p10"})
    brain.flush()
    brain._lease.abandon()
    brain.commits.log.close()
    # the flush wrote a delta onto the base (tests/test_vector_snapshots.py); without it, as a store written
    # before deltas holds, the base is behind the flushed generation
    assert sorted(p.name for p in (path / "index").glob("*.vec*")) == [
        f"{1:020d}.vec",
        f"{1:020d}.vecq",
        f"{3:020d}.vecd",
    ]  # the base's copy too
    (path / "index" / f"{3:020d}.vecd").unlink()
    brain = Brain.open(path)
    want = oracle(brain, q, 10)
    assert "p9" not in {w[0] for w in want}
    _assert_same(brain.find({"vector": q.tolist()}), want)
    assert brain.vector_follower.built_from == "snapshot at 1"
    brain.close()

    snapshot = sorted((path / "index").glob("*.vec"))[-1]
    slots = struct.unpack_from("<Q", snapshot.read_bytes(), 24)[0]
    flip(snapshot, 48 + 8 * slots + 10)  # in the vectors section: nothing of the base is trusted
    data = snapshot.read_bytes()
    brain = Brain.attach(path)
    _assert_same(brain.find({"vector": q.tolist()}), want)
    assert brain.vector_follower.built_from == "rows"
    assert any(w["code"] == "vectors-rebuilt" for w in brain.warnings)
    assert snapshot.read_bytes() == data


def test_the_snapshot_format_is_as_documented():
    """docs/store-format.md "Vector index snapshots": the worked example's size, its fields in place."""
    index = VectorIndex()
    vec = np.zeros(DIM, np.float32)
    vec[0] = 2.0
    for dense in (0, 2, 5):
        index.apply(None, {"denseInt": dense, "vector": vec.tobytes()})
    vec2 = vec.copy()
    vec2[1] = 1.0
    index.apply({"denseInt": 2, "vector": vec.tobytes()}, {"denseInt": 2, "vector": vec2.tobytes()})
    index.stamp = 4
    data = index.encode()
    assert len(data) == 6276 and data[:4] == b"BVX1" and data[4:8] == (4).to_bytes(4, "little")
    # chunkSlots, storeTag (none: encoded outside a store), headerCrc
    assert struct.unpack_from("<I16sI", data, 48) == (256, bytes(16), crc32c.crc32c(data[:68]))
    assert np.frombuffer(data, "<i8", 4, 72).tolist() == [0, -1, 5, 2]
    assert struct.unpack_from("<I", data, 104)[0] == crc32c.crc32c(data[128 : 128 + 4 * 1536])  # the one chunk
    assert struct.unpack_from("<I", data, 108)[0] == crc32c.crc32c(data[72:108])  # denseCrc
    assert data[112:128] == bytes(16) and struct.unpack_from("<I", data, 6272)[0] == 0  # pad, graphCrc (no graph)
    back = VectorIndex.decode(data)
    assert back.stamp == 4 and len(back) == 3 and back.vector_of(2)[1] == pytest.approx(1 / np.sqrt(5))
    for at in (
        20,
        60,
        76,
        106,
        len(data) - 1,
    ):  # the header, its storeTag, a dense int, the chunk's checksum, the graph's
        with pytest.raises(ValueError):
            VectorIndex.decode(data[:at] + bytes([data[at] ^ 1]) + data[at + 1 :])
    read = VectorIndex.decode(data[:200] + bytes([data[200] ^ 1]) + data[201:])  # a vector: read in place, and
    for read_it in (lambda: read.search(unit(vec2), 2), lambda: read.vector_of(2)):  # refused when read
        with pytest.raises(M.Damaged):
            read_it()


def test_hybrid_fuses_the_text_and_semantic_legs(tmp_path):
    """query + vector runs both legs: rrf scores Σ w/(k + rank) over the legs, weighted mixes normalised scores
    by hybridAlpha; matchSource says which legs found each hit, textMatches the words, explanation the leg
    scores, stages the steps; order is score then id; ranked cursors page without repeats."""
    brain, x = _seeded(tmp_path, 8, 200, 4)
    try:
        q = x[3]
        answer = brain.find({"query": "apple", "vector": q.tolist(), "limit": 20, "explain": True})
        text = brain.find({"query": "apple", "searchMode": "text", "limit": 1000})["results"]
        semantic = brain.find({"vector": q.tolist(), "limit": 1000})["results"]
        text_rank = {h["id"]: r for r, h in enumerate(text, 1)}
        sem_rank = {h["id"]: r for r, h in enumerate(semantic[:100], 1)}
        for hit in answer["results"]:
            want = sum(1 / (60 + ranks[hit["id"]]) for ranks in (text_rank, sem_rank) if hit["id"] in ranks)
            assert hit["score"] == pytest.approx(want)
            assert hit["matchSource"] == (
                "both"
                if hit["id"] in text_rank and hit["id"] in sem_rank
                else "text"
                if hit["id"] in text_rank
                else "semantic"
            )
            assert set(hit["explanation"]) >= {"fused"}
            assert hit["textMatches"] == (["apple"] if hit["id"] in text_rank else [])
        scores = [(-h["score"], h["id"]) for h in answer["results"]]
        assert scores == sorted(scores)
        assert [s["stage"] for s in answer["stages"]][-2:] == ["fusion (rrf)", "page"]
        weighted = brain.find(
            {
                "query": "apple",
                "vector": q.tolist(),
                "hybridAlpha": 1.0,
                "limit": 5,
                "fusion": {"strategy": "weighted"},
                "searchMode": "hybrid",
            }
        )
        assert weighted["results"][0]["id"] == semantic[0]["id"] and weighted["results"][0]["score"] == 1.0
        weighted_rrf = brain.find(
            {"query": "apple", "vector": q.tolist(), "limit": 5, "fusion": {"weights": {"text": 0}}}
        )
        assert [h["id"] for h in weighted_rrf["results"]] == [h["id"] for h in semantic[:5]]
        pages, cursor = [], None
        while True:
            page = brain.find(
                {"query": "apple", "vector": q.tolist(), "limit": 7, **({"cursor": cursor} if cursor else {})}
            )
            pages += [h["id"] for h in page["results"]]
            cursor = page["cursor"]
            if not cursor or len(pages) > 60:
                break
        full = brain.find({"query": "apple", "vector": q.tolist(), "limit": 1000})["results"]
        assert pages == [h["id"] for h in full][: len(pages)] and len(pages) == len(set(pages))
    finally:
        brain.close()


def test_similar_and_near_rank_by_the_anchor_and_refuse_by_name(tmp_path):
    """similar(to) ranks every other vectored row by cosine to the anchor (includeSelf adds it back);
    similar(vector) and find(near) the same; the refusals of DOORS 4.4 and 5.1 similar are reached."""
    brain, _ = _seeded(tmp_path, 2, 120, 3)
    try:
        brain.add({"type": "thing", "id": "bare"})  # no data, no vector: nothing to embed
        anchor = brain.get("v5", includeVector=True)["entity"]
        want = [w for w in oracle(brain, anchor["vector"], 11) if w[0] != anchor["id"]][:10]
        _assert_same(brain.similar({"to": "v5"}), want)
        assert brain.similar({"to": "v5", "includeSelf": True})["results"][0]["id"] == anchor["id"]
        _assert_same(brain.similar({"vector": anchor["vector"], "limit": 11}), oracle(brain, anchor["vector"], 11))
        near = brain.find({"near": {"id": "v5"}, "limit": 11})
        _assert_same(near, [w for w in oracle(brain, anchor["vector"], 11) if w[1] >= 0])
        floor = brain.find({"near": {"id": "v5", "threshold": 0.5}, "limit": 100})
        assert floor["results"] and all(h["score"] >= 0.5 for h in floor["results"])
        assert len(floor["results"]) == len([w for w in oracle(brain, anchor["vector"], 200) if w[1] >= 0.5])
        thr = brain.find({"vector": anchor["vector"], "threshold": 0.6, "limit": 100})
        assert len(thr["results"]) == len([w for w in oracle(brain, anchor["vector"], 200) if w[1] >= 0.6])

        with pytest.raises(R.DimensionMismatchError) as exc:
            brain.find({"vector": [0.1] * 383})
        assert exc.value.fields == {"expected": 384, "got": 383}
        with pytest.raises(R.DimensionMismatchError):
            brain.similar({"vector": [0.1] * 385})
        with pytest.raises(R.EntityNotFoundError):
            brain.find({"near": {"id": "nobody"}})
        with pytest.raises(R.EntityNotFoundError):
            brain.similar({"to": "nobody"})
        with pytest.raises(R.InvalidArgumentError) as exc:
            brain.similar({"to": "bare"})
        assert exc.value.fields["reason"] == "no-vector"
        by_text = brain.similar({"text": "pie"})  # the query text embedded by the model on the box
        _assert_same(by_text, oracle(brain, embedder.embed_one("pie")[0].tolist(), 10))
        for mode in ("semantic", "vector", "hybrid"):
            assert brain.find({"query": "pie", "searchMode": mode})["legs"]["semantic"] == {"served": True}
        with pytest.MonkeyPatch.context() as patch:  # a box without the model
            empty = tmp_path / "no-model"
            empty.mkdir()
            patch.setenv(embedder.OVERRIDE, str(empty))
            with pytest.raises(R.EmbeddingModelMissingError) as exc:
                brain.similar({"text": "pie"})
            assert exc.value.fields["searched"] == [str(empty)]
            for mode in ("semantic", "vector", "hybrid"):
                with pytest.raises(R.EmbeddingModelMissingError):
                    brain.find({"query": "pie", "searchMode": mode})
            auto = brain.find({"query": "pie"})
            assert (
                auto["legs"]["semantic"]["served"] is False
                and "EmbeddingModelMissingError" in auto["legs"]["semantic"]["reason"]
                and auto["legs"]["text"] == {"served": True}
            )
        hybrid = brain.find({"query": "pie", "vector": anchor["vector"], "searchMode": "hybrid"})
        assert hybrid["legs"]["semantic"] == {"served": True} and hybrid["legs"]["text"] == {"served": True}
        for bad in ({"to": "v5", "text": "x"}, {}):
            with pytest.raises(R.InvalidArgumentError):
                brain.similar(bad)
        for bad in (
            {"searchMode": "metadata", "vector": anchor["vector"]},
            {"searchMode": "semantic"},
            {"searchMode": "hybrid", "vector": anchor["vector"]},
            {"threshold": 0.5},
            {"vector": [0.0] * 384},
            {"fusion": {"strategy": "max"}},
            {"hybridAlpha": 2},
            {"near": {"id": "v5", "far": 1}},
        ):
            with pytest.raises(R.InvalidArgumentError):
                brain.find(bad)
        for shape in ({"purpose": "x"}, {"rerank": True}):  # the ranked shapes work on the leg's hits
            assert brain.find({"vector": anchor["vector"], **shape})["results"]
    finally:
        brain.close()


def test_owned_slots_are_never_copied_to_grow_and_read_the_same_across_their_parts(tmp_path) -> None:
    """A full owned part stays where it is and the next takes the rows after it (no commit pays a copy of every
    slot): the parts hold the rows in order, a batch that crosses a part's end is split over two, and every read
    (gather, copy, scores, the exact search, a base written from them and read back) answers as one matrix would."""
    rng = np.random.default_rng(73)
    x = rng.standard_normal((5_000, DIM), dtype=np.float32)
    slots = M.Slots()
    first = slots.owned
    slots.extend(x[:1_000])
    slots.extend(x[1_000:1_500])  # 24 rows fill the first part, 476 start the second
    for v in x[1_500:1_600]:
        slots.append(v)
    slots.extend(x[1_600:])
    assert len(slots) == 5_000 and slots._parts[0].rows.ctypes.data == first.ctypes.data  # the first part, in place
    # each new part as large as the rows to come or every slot so far: 1,024, then 1,024, then the last 2,952
    assert [len(p.rows) for p in slots._parts] == [1_024, 1_024] and slots._owned == len(slots.owned) == 2_952
    assert all(p.heap for p in slots._parts) and slots.base is None
    assert slots.heap_bytes() == 5_000 * DIM * 4
    picked = rng.choice(5_000, 300, replace=False)
    assert (slots.gather(picked) == x[picked]).all()
    assert (slots.copy(1_000, 3_000) == x[1_000:3_000]).all()
    q = unit(rng.standard_normal(DIM).astype(np.float32))
    assert np.allclose(slots.scores(q), x @ q, atol=1e-5)
    assert (np.concatenate(slots.contiguous(4_500)) == x[:4_500]).all()

    index = VectorIndex()
    for lo, hi in ((0, 3_000), (3_000, 5_000)):  # two commits: two full parts, the last rows in a third
        index.apply_all((None, {"denseInt": i, "vector": x[i].tobytes()}) for i in range(lo, hi))
    assert [len(p.rows) for p in index._slots._parts] == [1_024, 1_976] and index._slots._owned == 2_000
    units = np.stack([unit(v) for v in x])
    scores, dense, how = index.search(q, 10)
    assert how == "exact" and dense.tolist() == np.argsort(-(units @ q), kind="stable")[:10].tolist()
    index.stamp = 9
    frozen = index.freeze(base=True)
    F.write_link(tmp_path, frozen, frozen.parts())
    back, why = V.read_chain(tmp_path, 9)
    assert why == [] and back is not None and len(back) == 5_000
    assert (back._slots.gather(np.arange(5_000)) == units).all()


def live_vectors(index: VectorIndex) -> dict[int, bytes]:
    """Each live entity's unit vector in ``index``, by dense int."""
    return {int(d): index.vector_of(int(d)).tobytes() for d in index._dense[: index._count] if d != M.NO_SLOT}


def _live(brain: Brain) -> dict[int, bytes]:
    """:func:`live_vectors` of the head's index."""
    with brain.at().vectors() as index:
        return live_vectors(index)


def test_a_served_brain_admitted_with_no_vector_starts_its_index_from_its_first_vectored_commit(tmp_path) -> None:
    """Admitted holding no vectored entity, a served handle's first vectored commit starts the index from nothing
    and its moves (no build reading the rows back, none for the write to wait on); the index answers as one built
    from the rows does. A handle admitted with a vector, or whose held moves a flush dropped before its first
    vectored commit (a flush builds the index first: empty), goes on as before."""
    rng = np.random.default_rng(31)
    x = rng.standard_normal((300, DIM)).astype(np.float32)
    items = [{"type": "thing", "id": f"v{i}", "vector": x[i].tolist()} for i in range(300)]
    path = new_store(tmp_path, "a")
    with Brain.open(path) as brain:
        brain.add({"type": "thing", "id": "plain"})
        brain.served()
        brain.add({"type": "thing", "id": "plain2"})
        assert brain.vector_follower.kept is None and not brain.vector_follower.building  # no vector: no index
        brain.addMany({"items": items[:200]})
        index = brain.vector_follower.kept
        assert index is not None and len(index) == 200 and not brain.vector_follower.building
        brain.update({"id": "v3", "vector": x[250].tolist()})
        brain.remove({"id": "v4"})
        brain.addMany({"items": items[200:250]})
        for q in x[:20:4]:
            _assert_same(brain.find({"vector": q.tolist(), "limit": 5}), oracle(brain, q, 5))
        served = _live(brain)
        assert len(served) == 249
    with Brain.open(path) as brain:  # the index again, from what the close left (its snapshot, or the rows)
        assert _live(brain) == served
    with Brain.open(new_store(tmp_path, "b")) as brain:  # a vector before the admission: built as before
        brain.add(items[0])
        brain.served()
        assert brain.vector_follower._empty_at is None
        brain.addMany({"items": items[1:50]})
        brain.vector_follower.until_built(60)
        assert len(_live(brain)) == 50
    with Brain.open(new_store(tmp_path, "c")) as brain:  # a flush before the first vectored commit
        brain.served()
        brain.add({"type": "thing", "id": "plain"})
        brain.flush()
        brain.add({"type": "thing", "id": "plain2"})
        brain.addMany({"items": items[:50]})
        brain.vector_follower.until_built(60)
        assert brain.vector_follower._empty_at is None and len(_live(brain)) == 50
        for q in x[:10:3]:
            _assert_same(brain.find({"vector": q.tolist(), "limit": 5}), oracle(brain, q, 5))
