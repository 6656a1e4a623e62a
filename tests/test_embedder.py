"""The embedder and the three doors it answers (DOORS 7), and embedding at write (DOORS 5.2, 1.2).

The model is the real one the package installs (all-MiniLM-L6-v2, int8 weights, on onnxruntime);
its vectors are held to float32 reference vectors made by ``tools/embed_reference.py`` from the
model's float32 weights, run by an independent numpy forward pass. The no-model path is the real
one too: ``BRAINY_EMBED_MODEL_DIR`` pointed at an empty directory.
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
from pathlib import Path

import msgpack
import numpy as np
import orjson
import pytest
from helpers import new_store
from server import curl, start_server

from brainy.auth.principal import Principal
from brainy.contract import refusals as R
from brainy.doors.writes import texts
from brainy.engine import Brain
from brainy.host import dispatch as X
from brainy.host.pool import Pool
from brainy.index import embedder, quantize
from brainy.net import codecs
from brainy.store.rows import vector_out

REFERENCE = Path(__file__).parent / "data" / "minilm_float32_reference.json"
PERSON = Principal.static_key("person:ada")
DEADLINE = "what do I know about the customer's deadline?"
ACME = "Acme wants the report by Friday"
UNRELATED = [
    "The cat sat on the mat.",
    "Bananas are rich in potassium.",
    "Photosynthesis needs light.",
    "The orchestra tuned before the concert.",
    "Kubernetes restarts failed pods.",
]
LONG = "She played the cello in the city orchestra for twenty years. " * 40  # about 500 tokens


@pytest.fixture
def brain(tmp_path):
    b = Brain.open(new_store(tmp_path), name="main")
    yield b
    b.close()


@pytest.fixture
def no_model(tmp_path, monkeypatch):
    """The embedder pointed at an empty directory: the process has no model."""
    empty = tmp_path / "no-model"
    empty.mkdir()
    monkeypatch.setenv(embedder.OVERRIDE, str(empty))
    return empty


def vector_of(brain, id_):
    return np.array(brain.get(id_, includeVector=True)["entity"]["vector"], dtype=np.float32)


# -- the model ----------------------------------------------------------------------------------------


def test_vectors_agree_with_the_float32_reference():
    """Every reference text embeds within cosine 0.985 of the float32 model's vector (the integer products
    cost about 0.01), and the texts past the 256-token window say they were truncated."""
    assert embedder.shared().model.variant == quantize.VARIANT, embedder.shared().model.reason
    reference = orjson.loads(REFERENCE.read_bytes())
    vectors, truncated = embedder.embed_many(reference["texts"])
    want = np.array(reference["vectors"], dtype=np.float32)
    cosines = (vectors * want).sum(axis=1)
    assert cosines.min() >= 0.985, dict(zip(reference["texts"], cosines.round(4)))
    assert truncated == [len(text.split()) > 200 for text in reference["texts"]]


def test_the_integer_model_is_derived_once_and_kept(tmp_path, monkeypatch):
    monkeypatch.setenv(quantize.CACHE, str(tmp_path / "cache"))
    source = embedder.resolve().model
    made = quantize.derived(source)
    assert made.variant == quantize.VARIANT and made.path.parent == tmp_path / "cache" / "models"
    kept = made.path.stat()
    again = quantize.derived(source)
    assert again.path == made.path and again.path.stat().st_mtime_ns == kept.st_mtime_ns  # read, not made again
    assert [p.name for p in (tmp_path / "cache" / "models").iterdir()] == [made.path.name]  # no work file left


def test_without_a_writable_cache_the_installed_model_runs_and_says_why(tmp_path, monkeypatch):
    blocked = tmp_path / "not-a-directory"
    blocked.write_text("")
    monkeypatch.setenv(quantize.CACHE, str(blocked))
    source = embedder.resolve().model
    runs = quantize.derived(source)
    assert runs.path == source and runs.variant == "as-installed"
    assert str(blocked) in runs.reason


def test_vectors_are_unit_float32_of_384():
    """A vector is 384 float32 numbers of length 1, never zero."""
    vector, truncated = embedder.embed_one(ACME)
    assert vector.shape == (384,) and vector.dtype == np.float32 and truncated is False
    assert abs(float(np.linalg.norm(vector)) - 1.0) < 1e-5


def test_meaning_decides_nearness():
    """The customer's-deadline question is nearer to "Acme wants the report by Friday" than to every
    unrelated sentence."""
    query, _ = embedder.embed_one(DEADLINE)
    vectors, _ = embedder.embed_many([ACME, *UNRELATED])
    scores = vectors @ query
    assert scores[0] == scores.max() and scores[0] > scores[1:].max() + 0.1, scores


def test_truncation_cuts_at_256_tokens():
    """Text past the window is cut: what follows the 256th token changes nothing, and truncated says so."""
    short, cut_short = embedder.embed_one("one two three")
    long_, cut_long = embedder.embed_one(LONG)
    longer, cut_longer = embedder.embed_one(LONG + " And then the hall burned down in a terrible fire.")
    assert (cut_short, cut_long, cut_longer) == (False, True, True)
    assert np.array_equal(long_, longer) and not np.array_equal(short, long_)


def test_a_batch_equals_its_texts_one_by_one():
    """Texts embedded together (of mixed lengths, padded and masked in chunks) get the vectors each
    gets alone."""
    rng = np.random.default_rng(7)
    words = (ACME + " " + " ".join(UNRELATED)).split()
    batch = [" ".join(rng.choice(words, size=int(n))) for n in rng.integers(1, 320, size=70)]
    vectors, truncated = embedder.embed_many(batch)
    for text, vector, cut in zip(batch, vectors, truncated):
        alone, alone_cut = embedder.embed_one(text)
        np.testing.assert_allclose(vector, alone, atol=1e-6)
        assert cut == alone_cut


def test_the_model_loads_once_per_process():
    """The embedder is resolved and loaded once: every call shares it, from any thread."""
    found = []
    threads = [threading.Thread(target=lambda: found.append(embedder.shared())) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len({id(e) for e in found}) == 1 and embedder.loaded()


def test_without_a_model_every_door_refuses_listing_where_it_looked(no_model, brain):
    """No model files: embed, embedBatch and similarity refuse EmbeddingModelMissingError, and searched
    lists every directory looked in; never a zero vector."""
    for door, args in (
        ("embed", {"text": ACME}),
        ("embedBatch", {"texts": [ACME]}),
        ("similarity", {"a": ACME, "b": DEADLINE}),
    ):
        with pytest.raises(R.EmbeddingModelMissingError) as exc:
            brain.call(door, args)
        assert exc.value.fields == {"searched": [str(no_model)]} and exc.value.status == 503
    with pytest.raises(R.EmbeddingModelMissingError):
        embedder.embed_one(ACME)


def test_the_default_search_names_the_installed_packages(monkeypatch):
    """Without the override, the embedder looks where the packages installed the model and its tokenizer."""
    monkeypatch.delenv(embedder.OVERRIDE, raising=False)
    files = embedder.resolve()
    dirs = embedder.search_dirs()
    assert files.model == dirs[0] / "model.onnx" and files.tokenizer == dirs[1] / "tokenizer.json"


# -- the doors ----------------------------------------------------------------------------------------


def test_the_doors_answer_in_process(brain):
    """embed, embedBatch and similarity answer as DOORS 7 says, as methods of a brain."""
    one = brain.embed({"text": ACME})
    assert set(one) == {"vector", "dimensions", "model", "truncated"}
    assert one["dimensions"] == 384 and one["model"] == "all-MiniLM-L6-v2" and one["truncated"] is False
    assert np.array_equal(np.array(one["vector"], dtype=np.float32), embedder.embed_one(ACME)[0])
    batch = brain.embedBatch({"texts": [ACME, LONG]})
    assert batch["truncated"] == [False, True] and len(batch["vectors"]) == 2
    assert batch["vectors"][0] == one["vector"] and batch["dimensions"] == 384
    near = brain.similarity({"a": DEADLINE, "b": ACME})["similarity"]
    far = brain.similarity({"a": DEADLINE, "b": UNRELATED[0]})["similarity"]
    assert -1 <= far < near <= 1 and brain.similarity({"a": ACME, "b": ACME})["similarity"] == pytest.approx(1.0)


@pytest.mark.parametrize("texts_", [[], ["x"] * 257])
def test_embed_batch_takes_1_to_256_texts(brain, texts_):
    """embedBatch refuses an empty list and one over 256 texts, by field."""
    with pytest.raises(R.InvalidArgumentError) as exc:
        brain.embedBatch({"texts": texts_})
    assert exc.value.fields["field"] == "texts" and exc.value.fields["reason"] == "out-of-range"


def test_the_doors_answer_through_the_dispatcher_without_opening_the_store(tmp_path):
    """Over the dispatcher the three doors answer from the model, and the brain they name is never opened."""
    pool = Pool({"main": new_store(tmp_path)})
    dispatcher = X.Dispatcher(pool)

    async def calls():
        return await asyncio.gather(
            dispatcher.dispatch(PERSON, "embed", "main", None, {"text": ACME}),
            dispatcher.dispatch(PERSON, "embedBatch", "main", None, {"texts": [ACME, DEADLINE]}),
            dispatcher.dispatch(PERSON, "similarity", "main", None, {"a": ACME, "b": DEADLINE}),
        )

    try:
        one, batch, sim = asyncio.run(calls())
        assert one.ok and batch.ok and sim.ok, [o.refusal and o.refusal.to_wire() for o in (one, batch, sim)]
        assert one.answer["vector"] == batch.answer["vectors"][0] and one.ms > 0
        assert sim.answer["similarity"] == pytest.approx(float(np.dot(*np.array(batch.answer["vectors"]))), abs=1e-6)
        assert pool._entries["main"].handle is None  # no attach, no lease: the store was not opened
        missing = asyncio.run(dispatcher.dispatch(PERSON, "embed", "elsewhere", None, {"text": ACME}))
        assert missing.refusal.name == "NoSuchBrainError"  # brain-scoped, for reach
    finally:
        pool.close_all()


def test_an_embed_runs_off_the_event_loop(tmp_path):
    """While a long embedBatch runs, the loop keeps answering: a door's inference never blocks it."""
    pool = Pool({"main": new_store(tmp_path)})
    dispatcher = X.Dispatcher(pool)
    embedder.shared()  # loaded before the clock starts

    async def race():
        long_batch = asyncio.ensure_future(
            dispatcher.dispatch(PERSON, "embedBatch", "main", None, {"texts": [LONG + str(i) for i in range(64)]})
        )
        await asyncio.sleep(0.01)
        ticks = 0
        while not long_batch.done():
            await asyncio.sleep(0.001)
            ticks += 1
        return ticks, (await long_batch)

    try:
        ticks, outcome = asyncio.run(race())
        assert outcome.ok and len(outcome.answer["vectors"]) == 64
        assert ticks >= 20, ticks  # the loop turned many times while the batch ran
    finally:
        pool.close_all()


def _post(server, door, doc, encoding="json", accept="json"):
    body = msgpack.packb(doc) if encoding == "msgpack" else json.dumps(doc).encode()
    return curl(
        server,
        "POST",
        server.path(door),
        body,
        headers=(
            ("Authorization", f"Bearer {server.key}"),
            ("Content-Type", f"application/{encoding}"),
            ("Accept", f"application/{accept}"),
        ),
    )


def _digits(text: bytes) -> bytes:
    """The significant digits of a decimal number's text: no sign, point, exponent or leading and trailing zeros."""
    mantissa = text.lower().lstrip(b"-").split(b"e")[0].replace(b".", b"")
    return mantissa.lstrip(b"0").rstrip(b"0") or b"0"


def test_the_doors_over_http_and_vectors_on_the_wire(tmp_path):
    """Over HTTP: embed answers float32 in MessagePack (5 bytes a number) and shortest float32
    decimals in JSON, the two decoding to the same float32s; embedBatch and similarity answer; a
    write with data is embedded at write, and health says the model loaded on first need."""
    with start_server(tmp_path / "served") as server:
        health = json.loads(
            curl(server, "GET", "/v1/health", headers=(("Authorization", f"Bearer {server.key}"),)).body
        )
        assert health["embedder"] == {"loaded": False, "model": "all-MiniLM-L6-v2"}  # not at start
        as_json = _post(server, "embed", {"text": ACME})
        as_msgpack = _post(server, "embed", {"text": ACME}, "msgpack", "msgpack")
        assert as_json.status == as_msgpack.status == 200
        j, m = as_json.result(), as_msgpack.result()
        assert np.array_equal(np.array(j["vector"], np.float32), np.array(m["vector"], np.float32))
        packed = msgpack.packb(m["vector"], use_single_float=True)
        assert packed in as_msgpack.body and len(packed) == 3 + 5 * 384  # array16 header, 0xca + 4 bytes each
        # each number the shortest decimal that reads back as its float32 (its digits numpy's unique ones; the
        # notation is the JSON encoder's: 3.1e-6 and 0.0000031 alike)
        texts = re.search(rb'"vector":\[([^\]]*)\]', as_json.body).group(1).split(b",")
        values = np.array(j["vector"], np.float32)
        assert len(texts) == len(values) == 384
        for text, value in zip(texts, values, strict=True):
            assert np.float32(float(text)) == value, text
            assert _digits(text) == _digits(np.format_float_scientific(value, unique=True).encode()), (text, value)
        assert (
            json.loads(curl(server, "GET", "/v1/health", headers=(("Authorization", f"Bearer {server.key}"),)).body)[
                "embedder"
            ]["loaded"]
            is True
        )
        batch = _post(server, "embedBatch", {"texts": [ACME, LONG]}).result()
        assert batch["truncated"] == [False, True] and batch["vectors"][0] == j["vector"]
        sim = _post(server, "similarity", {"a": DEADLINE, "b": ACME}).result()
        assert 0.1 < sim["similarity"] < 1 and sim["model"] == "all-MiniLM-L6-v2"
        added = _post(server, "add", {"type": "concept", "data": ACME}).result()
        assert added["embedded"] is True and "reason" not in added
        got = curl(
            server,
            "GET",
            server.path(f"get/{added['id']}") + "?includeVector=true",
            headers=(("Authorization", f"Bearer {server.key}"),),
        )
        assert json.loads(got.body)["entity"]["vector"] == j["vector"]


def test_over_http_without_a_model_the_doors_refuse_and_writes_say_no_model(tmp_path):
    """A server whose model directory is empty refuses the three doors 503 EmbeddingModelMissingError
    listing that directory, and still stores rows: embedded false, reason no-model, no vector."""
    empty = tmp_path / "empty"
    empty.mkdir()
    with start_server(tmp_path / "served", env_extra={embedder.OVERRIDE: str(empty)}) as server:
        for door, doc in (
            ("embed", {"text": ACME}),
            ("embedBatch", {"texts": [ACME]}),
            ("similarity", {"a": ACME, "b": ACME}),
        ):
            answer = _post(server, door, doc)
            assert answer.status == 503 and answer.refusal == "EmbeddingModelMissingError"
            assert answer.doc["error"]["searched"] == [str(empty)]
        added = _post(server, "add", {"type": "concept", "data": ACME}).result()
        assert added["embedded"] is False and added["reason"] == "no-model"
        got = curl(
            server, "GET", server.path(f"get/{added['id']}"), headers=(("Authorization", f"Bearer {server.key}"),)
        )
        assert json.loads(got.body)["entity"]["hasVector"] is False


# -- embedding at write -------------------------------------------------------------------------------


def test_an_added_row_gets_the_vector_embed_gives_its_text(brain):
    """add with data and no vector stores embed(data); an object's strings are embedded one per line."""
    a = brain.add({"type": "concept", "data": ACME})
    assert a["embedded"] is True and "reason" not in a
    assert np.array_equal(vector_of(brain, a["id"]), np.array(brain.embed({"text": ACME})["vector"], np.float32))
    b = brain.add({"type": "document", "data": {"title": "Q3", "body": ACME, "n": 3}})
    assert np.array_equal(vector_of(brain, b["id"]), embedder.embed_one("Q3\n" + ACME)[0])
    assert brain.counts()["vectoredEntities"] == 2


def test_a_given_vector_is_kept_and_nothing_to_embed_says_no_data(brain):
    """A vector given with the data is stored as given (nothing embedded); no data, or only
    whitespace, is reason no-data."""
    given = [0.25] * 384
    a = brain.add({"type": "concept", "data": ACME, "vector": given})
    assert (
        a["embedded"] is False
        and "reason" not in a
        and brain.get(a["id"], includeVector=True)["entity"]["vector"] == given
    )
    for data in (None, "   "):
        b = brain.add({"type": "thing", **({"data": data} if data is not None else {})})
        assert b["embedded"] is False and b["reason"] == "no-data"
        assert brain.get(b["id"])["entity"]["hasVector"] is False


def test_batches_and_transactions_embed_every_item(brain):
    """addMany, updateMany and transact embed each item's data in the commit's batch: each stored
    vector is the one its text gets alone."""
    many = brain.addMany(
        {
            "items": [{"type": "concept", "id": f"k{i}", "data": f"{ACME} number {i}"} for i in range(40)]
            + [{"type": "thing", "id": "bare"}]
        }
    )
    assert len(many["ids"]) == 41
    for i in range(0, 40, 7):
        np.testing.assert_allclose(vector_of(brain, f"k{i}"), embedder.embed_one(f"{ACME} number {i}")[0], atol=1e-6)
    assert brain.get("bare")["entity"]["hasVector"] is False
    brain.updateMany({"items": [{"id": "k1", "data": DEADLINE}, {"id": "k2", "metadata": {"x": 1}}]})
    np.testing.assert_allclose(vector_of(brain, "k1"), embedder.embed_one(DEADLINE)[0], atol=1e-6)
    np.testing.assert_allclose(vector_of(brain, "k2"), embedder.embed_one(f"{ACME} number 2")[0], atol=1e-6)
    brain.transact(
        {
            "ops": [
                {"door": "add", "args": {"type": "concept", "id": "t", "data": UNRELATED[0]}},
                {"door": "update", "args": {"id": "k3", "data": UNRELATED[1]}},
            ]
        }
    )
    np.testing.assert_allclose(vector_of(brain, "t"), embedder.embed_one(UNRELATED[0])[0], atol=1e-6)
    np.testing.assert_allclose(vector_of(brain, "k3"), embedder.embed_one(UNRELATED[1])[0], atol=1e-6)


def test_update_re_embeds_changed_data_unless_a_vector_is_given(brain):
    """Changing data re-embeds; a given vector wins; an explicit null vector drops it; other changes
    keep the vector."""
    brain.add({"type": "concept", "id": "a", "data": ACME})
    assert brain.update({"id": "a", "metadata": {"x": 1}})["embedded"] is False
    assert np.array_equal(vector_of(brain, "a"), embedder.embed_one(ACME)[0])
    assert brain.update({"id": "a", "data": DEADLINE})["embedded"] is True
    assert np.array_equal(vector_of(brain, "a"), embedder.embed_one(DEADLINE)[0])
    assert brain.update({"id": "a", "data": UNRELATED[0], "vector": [0.5] * 384})["embedded"] is False
    assert brain.get("a", includeVector=True)["entity"]["vector"] == [0.5] * 384
    brain.update({"id": "a", "data": UNRELATED[1], "vector": None})
    assert brain.get("a")["entity"]["hasVector"] is False


def test_relations_get_their_datas_embedding_or_their_endpoints_mean(brain):
    """DOORS 1.2: a relation with data carries its data's embedding; without data, the mean of its
    endpoints' vectors when both have one; none otherwise."""
    brain.add({"type": "person", "id": "a", "data": "Ada writes compilers"})
    brain.add({"type": "person", "id": "b", "data": "Bob tends bees"})
    brain.add({"type": "thing", "id": "c"})
    plain = brain.relate({"from": "a", "to": "b", "type": "knows"})
    said = brain.relate({"from": "a", "to": "b", "type": "worksWith", "data": ACME})
    bare = brain.relate({"from": "a", "to": "c", "type": "knows"})
    found = {r["id"]: r for r in _relations(brain)}
    mean = (vector_of(brain, "a") + vector_of(brain, "b")) / 2
    np.testing.assert_allclose(np.array(found[plain["id"]]["vector"], np.float32), mean, atol=1e-7)
    assert np.array_equal(np.array(found[said["id"]]["vector"], np.float32), embedder.embed_one(ACME)[0])
    assert found[bare["id"]]["hasVector"] is False
    brain.updateRelation({"id": said["id"], "data": DEADLINE})
    found = {r["id"]: r for r in _relations(brain)}
    assert np.array_equal(np.array(found[said["id"]]["vector"], np.float32), embedder.embed_one(DEADLINE)[0])
    # an endpoint's new vector moves the mean in the same commit; a relation with its own text keeps its own
    moved = brain.update({"id": "b", "data": UNRELATED[0]})
    found = {r["id"]: r for r in _relations(brain)}
    mean = (vector_of(brain, "a") + vector_of(brain, "b")) / 2
    np.testing.assert_allclose(np.array(found[plain["id"]]["vector"], np.float32), mean, atol=1e-7)
    assert found[plain["id"]]["generation"] == moved["generation"]
    assert np.array_equal(np.array(found[said["id"]]["vector"], np.float32), embedder.embed_one(DEADLINE)[0])
    brain.update({"id": "a", "vector": None})  # an endpoint without a vector: the mean goes
    found = {r["id"]: r for r in _relations(brain)}
    assert found[plain["id"]]["hasVector"] is False and "vector" not in found[plain["id"]]


def _relations(brain):
    """Every stored relation row with its vector, read straight from the brain's snapshot."""
    from brainy.store import keys as K
    from brainy.store import rows

    snap = brain.at()
    out = []
    for _key, raw in brain.sources.scan(K.RELATION, K.prefix_end(K.RELATION), snap.generation):
        out.append(rows.public_view(snap.whole(rows.unpack(raw)), include_vector=True))
    return out


def test_without_a_model_writes_succeed_and_say_no_model(no_model, brain):
    """No model: add stores the row without a vector (embedded false, reason no-model), update with
    data drops the stale vector, a relation with data gets none; a given vector is still kept."""
    a = brain.add({"type": "concept", "id": "a", "data": ACME})
    assert a["embedded"] is False and a["reason"] == "no-model"
    assert brain.get("a")["entity"]["hasVector"] is False
    brain.update({"id": "a", "vector": [0.5] * 384})
    assert brain.update({"id": "a", "data": DEADLINE})["embedded"] is False
    assert brain.get("a")["entity"]["hasVector"] is False
    b = brain.add({"type": "concept", "id": "b", "vector": [0.5] * 384})
    assert b["embedded"] is False and "reason" not in b
    brain.add({"type": "concept", "id": "c", "vector": [0.25] * 384})
    brain.relate({"from": "b", "to": "c", "type": "knows", "data": ACME})
    assert [r["hasVector"] for r in _relations(brain)] == [False]


def test_the_texts_a_commit_embeds_are_read_before_its_rule_runs():
    """The texts each write door will embed are found in its raw arguments (each once), so they are
    embedded before the commit lock: add/update data without a vector, relation data, through
    batches and transactions; nothing for a given vector or an explicit null one."""
    assert texts("add", {"type": "x", "data": "a"}) == ["a"]
    assert texts("add", {"type": "x", "data": "a", "vector": [1.0]}) == []
    assert texts("update", {"id": "x", "data": {"t": "b", "u": ["c"]}}) == ["b\nc"]
    assert texts("update", {"id": "x", "data": "b", "vector": None}) == []
    assert texts("relate", {"from": "a", "to": "b", "type": "knows", "data": "r"}) == ["r"]
    assert texts("updateRelation", {"id": "r", "data": "s"}) == ["s"]
    assert texts("addMany", {"items": [{"data": "a"}, {"data": "a"}, {"data": "b"}, 7]}) == ["a", "b"]
    assert texts("updateMany", {"items": [{"id": "x", "data": "u"}]}) == ["u"]
    assert texts("relateMany", {"items": [{"data": "v"}]}) == ["v"]
    assert texts(
        "transact", {"ops": [{"door": "add", "args": {"data": "w"}}, {"door": "relate", "args": {"data": "z"}}, "junk"]}
    ) == ["w", "z"]
    assert texts("remove", {"id": "x"}) == [] and texts("add", None) == []


def test_a_commit_never_holds_its_lock_while_embedding(brain, monkeypatch):
    """The embedding of a write happens before the commit lock is taken."""
    held = []
    real = embedder.embed_many

    def watching(batch):
        acquired = brain.state.commit_lock.acquire(blocking=False)
        if acquired:
            brain.state.commit_lock.release()
        held.append(not acquired or brain.state.commit_lock._is_owned())
        return real(batch)

    monkeypatch.setattr(embedder, "embed_many", watching)
    brain.add({"type": "concept", "data": ACME})
    asyncio.run(brain.awrite("add", {"type": "concept", "data": DEADLINE}))
    assert held == [False, False]


# -- the wire -----------------------------------------------------------------------------------------


def test_vectors_encode_as_float32_in_both_encodings():
    """codecs write a Vector as float32 in MessagePack and shortest float32 decimals in JSON, inside
    any document; documents without one encode as before."""
    values = np.array([0.1, 1 / 3, -2.5e-7, 123456.7] * 96, dtype=np.float32)
    doc = {"a": 1, "hits": [{"vector": vector_out(values.tobytes()), "score": 0.1}], "t": (1, 2)}
    packed = codecs.to_msgpack(doc)
    decoded = msgpack.unpackb(packed)
    assert np.array_equal(np.array(decoded["hits"][0]["vector"], np.float32), values)
    assert decoded["hits"][0]["score"] == 0.1 and decoded["t"] == [1, 2]
    assert (
        len(packed) == len(msgpack.packb({"a": 1, "hits": [{"vector": [], "score": 0.1}], "t": [1, 2]})) + 2 + 5 * 384
    )
    text = codecs.to_json(doc)
    assert b"[0.1,0.33333334,-2.5e-7,123456.7," in text
    assert np.array_equal(np.array(orjson.loads(text)["hits"][0]["vector"], np.float32), values)
    plain = {"x": [1.5, "y", {"z": None}]}
    assert codecs.to_msgpack(plain) == msgpack.packb(plain) and codecs.to_json(plain) == orjson.dumps(plain)


def test_a_find_served_embeds_its_query_off_the_event_loop(tmp_path, monkeypatch):
    """Through the dispatcher, a find, explain or similar with a query text has the model run on the
    embedder's threads before the read runs on the loop; the read then finds the text embedded (it does not
    run the model again), and a repeated query runs the model no more."""
    pool = Pool({"notes": new_store(tmp_path, "notes")})
    pool.resolve("notes", for_write=True).add({"type": "concept", "id": "acme", "data": ACME})
    calls: list[str] = []
    original = embedder.Embedder.embed

    def model(self, batch):
        calls.append(threading.current_thread().name)
        return original(self, batch)

    monkeypatch.setattr(embedder.Embedder, "embed", model)
    dispatcher = X.Dispatcher(pool)
    person = Principal.static_key("person:ada")
    question = "what do I know about the customer's deadline? (asked once)"

    def ask(door, document):
        return asyncio.run(dispatcher.dispatch(person, door, "notes", None, document))

    try:
        found = ask("find", {"query": question})
        assert found.ok and found.answer["legs"]["semantic"] == {"served": True}
        assert found.answer["results"][0]["entity"]["key"] == "acme"
        assert len(calls) == 1 and calls[0].startswith("brainy-embed")
        assert ask("explain", {"query": question}).ok and len(calls) == 1  # embedded lately: not run again
        assert ask("similar", {"text": "a report due on Friday, asked once"}).ok
        assert len(calls) == 2 and calls[1].startswith("brainy-embed")
    finally:
        pool.close_all()
