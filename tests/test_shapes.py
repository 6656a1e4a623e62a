"""find's ranked shapes (DOORS.md 4.1): purpose, rerank and passages, against exact oracles.

The oracles are written here from the laws in brainy/doors/shapes.py's docstring: numpy cosine over
the rows' stored vectors, the proximity formula by brute force over every window, the fusion formula.
"""

from __future__ import annotations

import itertools
import re

import numpy as np
import pytest
from helpers import new_store

from brainy.contract import refusals as R
from brainy.doors import shapes as SH
from brainy.engine import Brain
from brainy.index import embedder

DIM = 384
WORD = re.compile(r"[^\W_]+")


def _unit(v) -> np.ndarray:
    v = np.asarray(v, dtype=np.float32)
    return v / np.linalg.norm(v)


def _vector_of(row) -> np.ndarray:
    return _unit(np.frombuffer(row["vector"], "<f4"))


@pytest.fixture()
def brain(tmp_path):
    rng = np.random.default_rng(7)
    words = ["alpha", "beta", "gamma", "delta", "omega", "kappa", "sigma", "zeta"]
    b = Brain.open(new_store(tmp_path))
    items = []
    for i in range(120):
        text = " ".join(rng.choice(words, size=int(rng.integers(3, 30))))
        items.append(
            {"type": "document", "id": f"d{i}", "data": text, "vector": _unit(rng.standard_normal(DIM)).tolist()}
        )
    items.append({"type": "document", "id": "bare", "data": "alpha beta gamma"})  # no vector
    b.addMany({"items": items})
    yield b
    b.close()


def _rrf(legs: dict[str, dict[str, float]], k: int = 60) -> dict[str, float]:
    fused: dict[str, float] = {}
    for scores in legs.values():
        for rank, id_ in enumerate(sorted(scores, key=lambda i: (-scores[i], i)), 1):
            fused[id_] = fused.get(id_, 0.0) + 1 / (k + rank)
    return fused


def test_purpose_is_a_second_semantic_signal_fused_by_rank(brain):
    """purpose: each hit's exact cosine to the embedded purpose is one more ranked leg of the rrf fusion."""
    query = "alpha gamma"
    answer = brain.find(
        {"query": query, "searchMode": "text", "purpose": "a note about greek letters", "limit": 1000, "explain": True}
    )
    rows = {r["id"]: r for r in brain.at(None).entities(vectors=True)}
    text = {h["id"]: h["explanation"]["text"] for h in answer["results"]}
    purpose_vector = embedder.embed_one("a note about greek letters")[0]
    purpose = {i: float(_vector_of(rows[i]) @ purpose_vector) for i in text if rows[i].get("vector")}
    want = _rrf({"text": text, "purpose": purpose})
    order = sorted(want, key=lambda i: (-want[i], i))
    assert [h["id"] for h in answer["results"]] == order
    for hit in answer["results"]:
        assert hit["score"] == pytest.approx(want[hit["id"]])
        if hit["id"] in purpose:
            assert hit["explanation"]["purpose"] == pytest.approx(purpose[hit["id"]], abs=1e-5)
        else:
            assert "purpose" not in hit["explanation"]  # the row without a vector has no purpose score
    assert any(s["stage"] == "purpose" for s in answer["stages"])


def test_purpose_shares_alpha_with_the_semantic_leg_in_weighted_fusion(brain):
    """weighted: each leg normalised to 0-1 over its hits, the purpose leg mixed with the semantic leg's share."""
    by_key = {r["key"]: r for r in brain.at(None).entities(vectors=True)}
    anchor = _vector_of(by_key["d3"])
    answer = brain.find(
        {
            "vector": anchor.tolist(),
            "purpose": "omega",
            "limit": 20,
            "explain": True,
            "fusion": {"strategy": "weighted"},
            "hybridAlpha": 0.3,
        }
    )
    vectored = [r for r in by_key.values() if r.get("vector")]
    semantic = {r["id"]: float(_vector_of(r) @ anchor) for r in vectored}
    leg = sorted(semantic, key=lambda i: (-semantic[i], i))[:21]  # a page of 20, and one more to know there is more
    purpose_vector = embedder.embed_one("omega")[0]
    purpose = {i: float(_vector_of(next(r for r in vectored if r["id"] == i)) @ purpose_vector) for i in leg}

    def normal(scores):
        lo, hi = min(scores.values()), max(scores.values())
        return {i: (s - lo) / (hi - lo) for i, s in scores.items()}

    n_semantic, n_purpose = normal({i: semantic[i] for i in leg}), normal(purpose)
    want = {i: 0.3 * n_semantic[i] + 0.3 * n_purpose[i] for i in leg}
    assert [h["id"] for h in answer["results"]] == sorted(want, key=lambda i: (-want[i], i))[:20]
    for hit in answer["results"]:
        assert hit["score"] == pytest.approx(want[hit["id"]], abs=1e-5)


def _proximity_oracle(wanted: list[str], words: list[str]) -> float:
    present = {w for w in words if w in wanted}
    if not present:
        return 0.0
    best = min(
        j - i + 1
        for i, j in itertools.combinations_with_replacement(range(len(words)), 2)
        if present <= set(words[i : j + 1])
    )
    return (len(present) / len(wanted)) * (len(present) / best)


def test_proximity_matches_the_brute_force_window():
    rng = np.random.default_rng(3)
    vocabulary = ["a", "b", "c", "d", "e"]
    for _ in range(300):
        words = list(rng.choice(vocabulary, size=int(rng.integers(0, 14))))
        wanted = list(dict.fromkeys(rng.choice(vocabulary, size=int(rng.integers(1, 4)))))
        assert SH.proximity(wanted, words) == pytest.approx(_proximity_oracle(wanted, words))


def test_rerank_reorders_the_first_limit_times_four_exactly(brain):
    """rerank: the first limit × 4 fused hits re-scored alpha × exact cosine + (1 − alpha) × proximity, put in
    that order; the rest keep the fused order; the row without a vector scores cosine 0."""
    rows = {r["id"]: r for r in brain.at(None).entities(vectors=True)}
    vector = _vector_of(next(r for r in rows.values() if r["key"] == "d10"))
    base = {"query": "beta delta", "vector": vector.tolist(), "searchMode": "hybrid", "limit": 5, "explain": True}
    # the window is the first 50 × 4 of the fused order, read off an unreranked page that long
    full = [h["id"] for h in brain.find({**base, "limit": 1000})["results"]][:200]
    exact = {}
    for i in full:
        cosine = float(_vector_of(rows[i]) @ vector) if rows[i].get("vector") else 0.0
        near = _proximity_oracle(["beta", "delta"], [w.lower() for w in WORD.findall(rows[i]["data"])])
        exact[i] = 0.5 * cosine + 0.5 * near
    want = sorted(full, key=lambda i: (-exact[i], i))[:50]
    reranked = brain.find({**base, "rerank": True, "limit": 50})
    assert [h["id"] for h in reranked["results"]] == want
    for hit in reranked["results"]:
        assert hit["score"] == pytest.approx(exact[hit["id"]], abs=1e-5)
        assert hit["explanation"]["rerank"]["score"] == hit["score"]
    # a page of 5 re-scores the first 20 fused hits only; the 21st onwards keep the fused order
    small = brain.find({**base, "rerank": True, "limit": 5})
    first20 = full[:20]
    assert [h["id"] for h in small["results"]] == sorted(first20, key=lambda i: (-exact[i], i))[:5]
    assert any(s["stage"] == "rerank" for s in small["stages"])


def test_rerank_of_a_text_only_find_is_proximity(brain):
    answer = brain.find({"query": "alpha zeta", "searchMode": "text", "rerank": True, "limit": 3})
    rows = {r["id"]: r for r in brain.at(None).entities(vectors=True)}
    for hit in answer["results"]:
        assert hit["score"] == pytest.approx(
            _proximity_oracle(["alpha", "zeta"], [w.lower() for w in WORD.findall(rows[hit["id"]]["data"])])
        )


def test_passages_are_the_best_windows_holding_the_query_words(tmp_path):
    b = Brain.open(new_store(tmp_path))
    try:
        filler = "lorem ipsum dolor sit amet " * 30
        text = filler + "the harbour pilot boards at dawn " + filler + "pilot " + filler
        b.add({"type": "document", "id": "long", "data": text})
        b.add({"type": "document", "id": "obj", "data": {"title": "Harbour", "body": "a pilot"}})
        answer = b.find({"query": "harbour pilot", "searchMode": "text", "passages": {"max": 2, "size": 80}})
        by_id = {h["entity"]["key"]: h for h in answer["results"]}
        first, second = by_id["long"]["passages"]
        assert first["score"] == 1.0 and "harbour pilot" in first["text"]
        assert second["score"] == 0.5 and "pilot" in second["text"]
        for p in (first, second):
            assert text[p["start"] : p["end"]] == p["text"] and len(p["text"]) <= 80
        assert first["end"] <= second["start"] or second["end"] <= first["start"]
        # an object's strings joined by newlines; offsets count in that text
        (only,) = by_id["obj"]["passages"]
        assert only == {"text": "Harbour\na pilot", "start": 0, "end": 15, "score": 1.0}
        default = b.find({"query": "pilot", "searchMode": "text", "passages": True})
        assert all(len(h["passages"]) <= 3 for h in default["results"])
    finally:
        b.close()


def test_the_shapes_at_a_past_generation_agree_with_the_head(brain):
    """A find pinned at a past generation reads rows instead of the live indexes: the same shapes, the same answer."""
    rows = {r["key"]: r for r in brain.at(None).entities(vectors=True)}
    q = {
        "query": "gamma",
        "vector": _vector_of(rows["d1"]).tolist(),
        "searchMode": "hybrid",
        "purpose": "kappa",
        "rerank": True,
        "passages": True,
        "limit": 10,
    }
    generation = brain.head
    head = brain.find(q)
    brain.add({"type": "document", "id": "later", "data": "gamma gamma", "vector": _unit(np.ones(DIM)).tolist()})
    past = brain.asOf({"generation": generation, "read": {"door": "find", "args": q}})["result"]
    assert [h["id"] for h in past["results"]] == [h["id"] for h in head["results"]]
    assert [h["passages"] for h in past["results"]] == [h["passages"] for h in head["results"]]
    assert np.allclose([h["score"] for h in past["results"]], [h["score"] for h in head["results"]], atol=1e-5)


@pytest.mark.parametrize(
    "query, field",
    [
        ({"purpose": "x"}, "purpose"),  # no ranked leg
        ({"rerank": True, "where": {"type": "document"}}, "rerank"),
        ({"query": "alpha", "searchMode": "text", "rerank": True, "orderBy": "id"}, "rerank"),
        ({"vector": [1.0] * DIM, "passages": True}, "passages"),  # no words to find windows of
        ({"query": "alpha", "passages": {"max": 0}}, "passages.max"),
        ({"query": "alpha", "passages": {"size": 10}}, "passages.size"),
        ({"query": "alpha", "passages": {"window": 3}}, "passages"),
        ({"query": "alpha", "purpose": "  "}, "purpose"),
        ({"aggregate": "count", "query": "alpha", "rerank": True}, "rerank"),
    ],
)
def test_each_shape_refuses_by_name_what_it_cannot_work_on(brain, query, field):
    with pytest.raises(R.InvalidArgumentError) as refused:
        brain.find(query)
    assert refused.value.fields["field"] == field


@pytest.mark.parametrize("http2", [False, True], ids=["h1", "h2"])
def test_the_shapes_answer_over_the_wire(server, http2):
    """purpose (embedded off the event loop), rerank and passages on a served find; a refusal by name."""
    import json

    from server import curl

    auth = (("authorization", f"Bearer {server.key}"), ("content-type", "application/json"))

    def post(door: str, body: dict) -> object:
        return curl(server, "POST", server.path(door), json.dumps(body).encode(), headers=auth, http2=http2)

    assert post("add", {"type": "document", "data": "The harbour pilot boards every ship at dawn."}).status == 200
    assert post("add", {"type": "document", "data": "Pilots of the harbour retire at sixty."}).status == 200
    found = post(
        "find", {"query": "harbour pilot", "purpose": "shipping", "rerank": True, "passages": True, "explain": True}
    ).result()
    assert len(found["results"]) == 2
    for hit in found["results"]:
        assert {"purpose", "rerank", "fused"} <= set(hit["explanation"])
        assert hit["passages"] and hit["passages"][0]["text"] in hit["entity"]["data"]
    refused = post("find", {"purpose": "shipping"})
    assert (refused.status, refused.refusal, refused.doc["error"]["field"]) == (400, "InvalidArgumentError", "purpose")
