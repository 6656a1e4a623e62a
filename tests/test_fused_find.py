"""Ranked find fused as arrays (brainy/doors/semantic.py ``Fusion.order``, brainy/doors/query.py) answers what the
dict a hit path answers: the same hits, in the same order, with the same scores, sources, words and explanations,
for every fusion (rrf with any k and weights, a weight of 0 included; weighted with any alpha), with ties, a
where's equalities (postings) and its rest (rows), offsets, cursors, rerank and passages.

Three models: ``Fusion.fuse`` and a sort of every hit on (-score, id) for the array fusion alone; the find with
``query.ARRAYS`` off (every hit a dict, the path graph and purpose legs still take) for the door; and the BM25
loop find ran before (a dict a hit, in Python) for the text leg's scores.
"""

from __future__ import annotations

import math
import random
import uuid

import numpy as np
import pytest
from helpers import new_store
from hypothesis import given, settings
from hypothesis import strategies as st

from brainy.doors import query as Q
from brainy.doors import semantic as S
from brainy.engine import Brain
from brainy.index.projections import IdKeys, Projections

QUICK = settings(deadline=None, max_examples=150)
DIM = 384
WORDS = ["apple", "pear", "plum", "fig", "kiwi", "lime"]


# -- the array fusion against Fusion.fuse and a full sort ------------------------------------------------------


@st.composite
def fused_case(draw):
    """Two to four legs over a shared pool of hits, scores from a few values (ties within and across legs), a
    fusion of either strategy with any k, weights (0 and a subnormal one among them) and alpha."""
    rnd = random.Random(draw(st.integers(0, 2**32)))
    pool = draw(st.sampled_from([3, 30, 300]))
    ids = {d: str(uuid.UUID(int=rnd.getrandbits(128))) for d in range(1, pool + 1)}
    names = ["text", "semantic", "graph", "purpose"][: draw(st.integers(1, 4))]
    legs = {}
    for name in names:
        size = rnd.choice([0, 1, pool // 3, pool])
        palette = [round(rnd.random(), 2) for _ in range(rnd.randint(1, 5))]
        legs[name] = {d: rnd.choice(palette) for d in rnd.sample(sorted(ids), size)}
    fusion = S.Fusion(strategy=draw(st.sampled_from(["rrf", "weighted"])), k=draw(st.sampled_from([1, 60, 1000])))
    weight = st.sampled_from([0.0, 0.5, 1.0, 2.0, 5e-324, 1e-310])
    fusion.weights = {"text": draw(weight), "semantic": draw(weight), "graph": draw(weight)}
    fusion.alpha = draw(st.sampled_from([0.0, 0.3, 0.5, 1.0]))
    return ids, legs, fusion


def _model(ids, legs, fusion):
    """The path this replaced: every hit's fused score (one leg: its own), every hit sorted on (-score, id)."""
    fused = fusion.fuse(legs, ids.__getitem__) if len(legs) > 1 else next(iter(legs.values()))
    return sorted(fused, key=lambda d: (-fused[d], ids[d])), fused


def _arrays(legs):
    return [S.Leg(name, list(scores), list(scores.values())) for name, scores in legs.items()]


@QUICK
@given(fused_case(), st.integers(0, 40), st.booleans())
def test_the_array_fusion_is_the_head_of_the_full_fusion(case, upto, compared):
    """Fusion.order(upto) is the first upto hits of Fusion.fuse's scores sorted on (-score, id), each with its
    fused score to the bit, and counts every hit; the id keys may be UUID halves or the hits' places in id order."""
    ids, legs, fusion = case
    order, fused = _model(ids, legs, fusion)
    keys = Q._ComparedKeys(ids, _arrays(legs)) if compared else IdKeys(ids)
    dense, scores, count = fusion.order(_arrays(legs), keys, upto)
    assert dense.tolist() == order[:upto]
    assert scores.tolist() == [fused[d] for d in order[:upto]]
    assert count == len(order)
    everything, _, _ = fusion.order(_arrays(legs), keys, None)
    assert everything.tolist() == order


@QUICK
@given(st.integers(0, 2**32), st.integers(0, 70), st.integers(0, 80), st.booleans())
def test_a_lone_leg_already_in_its_order_is_ordered_as_any_other(seed, size, upto, tie):
    """A lone leg whose scores already fall, as an index's top-k comes, orders as Fusion.fuse and a sort on (-score,
    id) do, through Fusion.order and through lone_order (a find's semantic leg alone), which answers it up to
    SHORT_LEG hits without a tie (a tie is broken on id: the arrays' order then)."""
    rnd = random.Random(seed)
    ids = {d: str(uuid.UUID(int=rnd.getrandbits(128))) for d in range(1, size + 1)}
    falling = sorted((rnd.random() for _ in ids), reverse=True)
    if tie and size > 2:
        falling[size // 2] = falling[size // 2 - 1]
    legs = {"semantic": dict(zip(rnd.sample(sorted(ids), size), falling))}
    order, fused = _model(ids, legs, S.Fusion())
    dense, scores, count = S.Fusion().order(_arrays(legs), IdKeys(ids), upto)
    assert dense.tolist() == order[:upto]
    assert scores.tolist() == [fused[d] for d in order[:upto]]
    assert count == len(order)
    lone = S.lone_order(legs["semantic"], upto)
    assert (lone is None) == (size > S.SHORT_LEG or (tie and size > 2))
    assert lone is None or lone == order[:upto]


@QUICK
@given(fused_case(), st.integers(0, 25), st.integers(0, 2**32))
def test_a_kept_mask_orders_the_kept_hits_alone(case, upto, seed):
    """With a mask of the hits that stay (the where's rest), the answer is the head of the full order filtered, the
    mask asked only about a prefix (and so the count known only when it reached every hit)."""
    ids, legs, fusion = case
    rnd = random.Random(seed)
    kept = {d for d in ids if rnd.random() < rnd.choice([0.05, 0.5, 1.0])}
    asked: list[int] = []

    def keep(dense):
        asked.extend(dense.tolist())
        return np.array([d in kept for d in dense.tolist()], dtype=bool)

    order, fused = _model(ids, legs, fusion)
    want = [d for d in order if d in kept]
    dense, scores, count = fusion.order(_arrays(legs), IdKeys(ids), upto, keep)
    assert dense.tolist() == want[:upto] and scores.tolist() == [fused[d] for d in want[:upto]]
    assert count is None or count == len(want)
    if count is None:
        assert len(set(asked)) < len(order)


# -- the door: arrays against a dict a hit ------------------------------------------------------------------------


def _unit(v):
    return (v / np.linalg.norm(v)).astype(np.float32)


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """A store of 240 rows with vectors and text from six words (BM25 ties everywhere), half under natural keys and
    half minted, some rows rewritten (their words' dicts out of order) and some removed, a flush in between."""
    rng, rnd = np.random.default_rng(11), random.Random(11)
    path = new_store(tmp_path_factory.mktemp("fused"))
    brain = Brain.open(path, flush_bytes=64 << 10)
    x = np.stack([_unit(rng.standard_normal(DIM)) for _ in range(240)])

    def item(i):
        it = {
            "type": rnd.choice(["thing", "document"]),
            "vector": x[i].tolist(),
            "data": " ".join(rnd.choices(WORDS, k=rnd.randint(1, 5))),
            "metadata": {"g": i % 3, "n": i % 7, "tag": rnd.choice(WORDS)},
        }
        if i % 2:
            it["id"] = f"row{i}"
        return it

    brain.addMany({"items": [item(i) for i in range(160)]})
    brain.flush()
    brain.addMany({"items": [item(i) for i in range(160, 240)]})
    for i in range(1, 80, 9):  # rewritten: new words, a new vector
        brain.add({**item(i), "id": f"row{i}", "upsert": True})
    for i in range(3, 80, 20):
        brain.remove({"id": f"row{i}"})
    yield brain, x, rng
    brain.close()


def _query(rng, rnd, x):
    q: dict = {"limit": rnd.choice([1, 3, 10, 25]), "includeData": rnd.random() < 0.3}
    mode = rnd.choice(["hybrid", "hybrid", "hybrid", "text", "vector"])
    if mode != "vector":
        q["query"] = " ".join(rnd.choices(WORDS + ["absent"], k=rnd.randint(1, 3)))
    if mode != "text":
        q["vector"] = _unit(x[rnd.randrange(len(x))] + 0.3 * rng.standard_normal(DIM)).tolist()
    if mode == "text":
        q["searchMode"] = "text"
    strategy = rnd.choice(["rrf", "weighted"])
    q["fusion"] = {"strategy": strategy, "k": rnd.choice([1, 60, 500])}
    if rnd.random() < 0.5:
        q["fusion"]["weights"] = {"text": rnd.choice([0, 0.5, 1, 3]), "semantic": rnd.choice([0, 1, 2])}
    if rnd.random() < 0.5:
        q["hybridAlpha"] = rnd.choice([0.0, 0.25, 1.0])
    q["where"] = rnd.choice([None, {"g": 1}, {"n": {"gte": 3}}, {"g": {"in": [0, 2]}, "n": {"lt": 5}}])
    if q["where"] is None:
        del q["where"]
    if rnd.random() < 0.3:
        q["type"] = "document"
    if rnd.random() < 0.4:
        q["offset"] = rnd.choice([1, 4, 30])
    if rnd.random() < 0.25:
        q["explain"] = True
    if mode != "text" and rnd.random() < 0.15:
        q["threshold"] = 0.05
    if mode != "vector" and rnd.random() < 0.15:
        q["rerank"] = True
    if mode != "vector" and rnd.random() < 0.15:
        q["passages"] = {"size": 40, "max": 2}
    return q


def _comparable(answer):
    """An answer without what differs by design: stage times, and rows read (the arrays read the prefix only)."""
    out = dict(answer)
    out["cost"] = {k: v for k, v in answer["cost"].items() if k != "rowsRead"}
    if "stages" in out:
        out["stages"] = [{k: v for k, v in s.items() if k != "ms"} for s in answer["stages"]]
    return out


def _both(brain, monkeypatch, q):
    got = brain.find(q)
    with monkeypatch.context() as m:
        m.setattr(Q, "ARRAYS", False)
        want = brain.find(q)
    return got, want


@pytest.mark.parametrize("keys", ["uuid halves", "looked up"])
def test_the_door_answers_as_the_dict_path(store, monkeypatch, keys):
    """Random hybrid, text and vector finds (either fusion, any k, weights and alpha, filters by postings and by
    rows, types, offsets, thresholds, explain, rerank, passages) answer exactly as with every hit a dict; with the
    projections' id keys, and with the ids looked up (projections that keep no keys)."""
    brain, x, rng = store
    if keys == "looked up":
        monkeypatch.setattr(Projections, "id_keys", lambda self: None)
    rnd = random.Random(5)
    for _ in range(60):
        q = _query(rng, rnd, x)
        got, want = _both(brain, monkeypatch, q)
        assert _comparable(got) == _comparable(want), q


def test_cursor_pages_walk_the_dict_paths_order(store, monkeypatch):
    """Paging a ranked find by cursor walks the very order the dict path gives in one page, without repeats."""
    brain, x, rng = store
    rnd = random.Random(9)
    for _ in range(6):
        q = {k: v for k, v in _query(rng, rnd, x).items() if k not in ("offset", "explain", "rerank", "limit")}
        with monkeypatch.context() as m:
            m.setattr(Q, "ARRAYS", False)
            whole = [h["id"] for h in brain.find({**q, "limit": 1000})["results"]]
        pages, answer = [], brain.find({**q, "limit": 7})
        while True:
            pages += [h["id"] for h in answer["results"]]
            if not answer["cursor"]:
                break
            answer = brain.find({**q, "limit": 7, "cursor": answer["cursor"]})
        assert pages == whole, q


def _old_bm25(proj, text, candidates):
    """The text leg before it was compiled (query.py's ``_bm25``): a dict a hit, in Python."""
    terms = list(dict.fromkeys(Q.WORD.findall(text.lower())))
    n = max(1, len(proj.lengths))
    average = (proj.total_length / n) or 1.0
    scores, matched = {}, {}
    for term in terms:
        postings = proj.terms.get(term)
        if not postings:
            continue
        idf = math.log(1 + (n - len(postings) + 0.5) / (len(postings) + 0.5))
        for dense, tf in postings.items():
            if candidates is not None and dense not in candidates:
                continue
            length = proj.lengths.get(dense, 0)
            scores[dense] = scores.get(dense, 0.0) + idf * tf * (Q.BM25_K1 + 1) / (
                tf + Q.BM25_K1 * (1 - Q.BM25_B + Q.BM25_B * length / average)
            )
            matched.setdefault(dense, []).append(term)
    return scores, matched


def test_the_text_leg_scores_as_the_python_loop_did(store):
    """A text find's every hit has the score, to the bit, and the words the Python BM25 loop gave it, in (-score,
    id) order; narrowed by a type, only that type's rows score (idf still over every row)."""
    brain, _, _ = store
    for text, narrow in (("apple", None), ("plum fig fig absent", None), ("kiwi lime pear", "document")):
        q = {"query": text, "searchMode": "text", "limit": 1000, **({"type": narrow} if narrow else {})}
        answer = brain.find(q)
        with brain.at().projections() as proj:
            allowed = set(proj.posting("type", narrow)) if narrow else None
            scores, matched = _old_bm25(proj, text, allowed)
            ids = dict(proj.ids)
        want = sorted(scores, key=lambda d: (-scores[d], ids[d]))
        assert [h["id"] for h in answer["results"]] == [ids[d] for d in want]
        assert [h["score"] for h in answer["results"]] == [scores[d] for d in want]
        assert [h["textMatches"] for h in answer["results"]] == [matched[d] for d in want]


def test_a_semantic_page_is_the_page_ranking_hit_makes(store, monkeypatch):
    """A vector find's page built in one pass (the semantic leg alone, nothing re-scored) holds, hit for hit and key
    for key in order, what Ranking.hit makes of each: random vector finds with thresholds, offsets, types and
    postings filters, and includeData."""
    brain, x, rng = store
    rnd = random.Random(13)
    made = Q.Ranking.__init__

    def by_hit(self, *args, **kwargs):
        made(self, *args, **kwargs)
        self.semantic_alone = False

    for _ in range(30):
        q = {"vector": _unit(x[rnd.randrange(len(x))] + 0.3 * rng.standard_normal(DIM)).tolist()}
        q["limit"] = rnd.choice([1, 3, 10, 25])
        q["includeData"] = rnd.random() < 0.3
        if rnd.random() < 0.4:
            q["offset"] = rnd.choice([1, 4, 30])
        if rnd.random() < 0.3:
            q["threshold"] = 0.05
        if rnd.random() < 0.3:
            q["type"] = "document"
        if rnd.random() < 0.3:
            q["where"] = {"g": 1}
        got = brain.find(q)
        with monkeypatch.context() as m:
            m.setattr(Q.Ranking, "__init__", by_hit)
            want = brain.find(q)
        assert [list(h) for h in got["results"]] == [list(h) for h in want["results"]]
        assert _comparable(got) == _comparable(want), q
