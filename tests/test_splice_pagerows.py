"""The pagerows speedup: a page's rows out of the row cache and its plain hits, both twins.

``cached`` answers a key from the cache only when its version is known at the read's generation (the
version's generation at or below it, the read at or below the highest generation it is known for), and
marks each one found used (moving nothing); the others are None, their places listed.
``plain_hits`` makes an encoded row's hit once and hands the same read-only hit to every page after,
until the id it shows differs; a plain document's hit (a call in process) is always a fresh dict.
"""

from __future__ import annotations

from collections import OrderedDict

import msgpack
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from brainy.auth.principal import Principal
from brainy.contract.encoded import Encoded, Hit, Hits
from brainy.engine import init_store
from brainy.host import dispatch as X
from brainy.host.pool import Pool
from brainy.index.encoded_rows import encode_row
from brainy.net import codecs


def _encoded(i: int):
    return encode_row(msgpack.packb({"id": f"id-{i}", "type": "document", "metadata": {"n": i}}))


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 30), st.one_of(st.none(), st.tuples(st.integers(0, 9), st.integers(0, 9))), st.booleans()
        ),
        max_size=25,
    ),
    st.integers(0, 9),
    st.booleans(),
)
def test_cached_answers_only_what_is_known_at_the_read_and_marks_it_used(pagerows_twins, rows, at, include_vector):
    """Both twins answer alike, mark used exactly the answers they hand out, and move no entry: the cache's
    sweep gives a marked entry its second chance (brainy/index/encoded_rows.py)."""
    compiled, pure = pagerows_twins
    found: dict[bytes, tuple[int, int]] = {}
    entries: OrderedDict = OrderedDict()
    keys = []
    for n, known, cached in rows:
        key = b"e" + n.to_bytes(2, "big")
        keys.append(key)
        if known is not None:
            gen, through = min(known), max(known)
            found[key] = (gen, through)
            if cached and (7, key, gen, include_vector, True) not in entries:
                entries[(7, key, gen, include_vector, True)] = (b"raw", _encoded(n), 1)
    expected = [
        entries[(7, k, found[k][0], include_vector, True)][1]
        if k in found and found[k][0] <= at <= found[k][1] and (7, k, found[k][0], include_vector, True) in entries
        else None
        for k in keys
    ]
    for twin in (compiled, pure):
        for _, made, _ in entries.values():
            made.used = False
        table = OrderedDict(entries)
        out, missing = twin.cached(keys, found, table, at, 7, include_vector, True)
        assert [a is b for a, b in zip(out, expected)] == [True] * len(keys)
        assert missing == [i for i, answer in enumerate(expected) if answer is None]
        assert list(table) == list(entries)  # nothing moved
        handed = {id(made) for made in expected if made is not None}
        assert all(made.used == (id(made) in handed) for _, made, _ in entries.values())


def test_an_encoded_rows_hit_is_made_once_and_shared_read_only(pagerows_twin):
    rows = [_encoded(i) for i in range(5)]
    ids = [f"id-{i}" for i in range(5)]
    first = pagerows_twin.plain_hits(ids, rows)
    assert first == [{"id": i, "score": None, "entity": row} for i, row in zip(ids, rows)]
    assert all(type(hit) is Hit for hit in first)
    again = pagerows_twin.plain_hits(ids, rows)
    assert all(a is b for a, b in zip(first, again))  # a page read again builds no dicts
    for mutate in (
        lambda h: h.__setitem__("score", 1.0),
        lambda h: h.update(id="x"),
        lambda h: h.pop("id"),
        lambda h: h.setdefault("passages", []),
        lambda h: h.clear(),
        lambda h: h.__delitem__("id"),
    ):
        with pytest.raises(TypeError):
            mutate(first[0])
    assert first[0] == {"id": "id-0", "score": None, "entity": rows[0]}
    other = pagerows_twin.plain_hits(["another"], rows[:1])  # never a hit showing another id
    assert other[0]["id"] == "another" and other[0]["entity"] is rows[0]


def test_a_plain_documents_hit_is_fresh_every_time(pagerows_twin):
    documents = [{"id": "a", "type": "document"}]
    first, second = pagerows_twin.plain_hits(["a"], documents), pagerows_twin.plain_hits(["a"], documents)
    assert first == second == [{"id": "a", "score": None, "entity": documents[0]}]
    assert type(first[0]) is dict and first[0] is not second[0]
    first[0]["passages"] = []  # a call in process owns its answer


def test_a_served_page_read_again_shows_the_same_hits_and_a_commit_shows_the_new_row(tmp_path):
    init_store(tmp_path / "main")
    pool = Pool({"main": tmp_path / "main"})
    try:
        brain = pool.resolve("main", for_write=True)
        brain.addMany({"items": [{"type": "thing", "id": f"t{i}", "metadata": {"n": i}} for i in range(40)]})
        dispatcher, who = X.Dispatcher(pool), Principal.static_key("person:test")

        def page() -> list:
            return dispatcher.run(who, "find", "main", None, {"limit": 40})["results"]

        first, again = page(), page()
        assert [a is b for a, b in zip(first, again)] == [True] * 40
        changed = first[3]["id"]
        brain.update({"id": changed, "metadata": {"n": -1}})
        after = page()
        shown = {hit["id"]: hit for hit in after}
        assert shown[changed]["entity"]["metadata"] == {"n": -1}
        assert all(shown[h["id"]] is h for h in first if h["id"] != changed)  # the others still shared
        packed = msgpack.unpackb(codecs.to_msgpack(X.Outcome("find", 0.1, answer={"results": after}).body()))
        assert {hit["id"]: hit["entity"]["metadata"]["n"] for hit in packed["results"]}[changed] == -1
        assert orjson.loads(codecs.to_json({"results": after}))["results"] == [
            {"id": h["id"], "score": None, "entity": h["entity"].document()} for h in after
        ]
    finally:
        pool.close_all()


IDS = st.one_of(st.text(max_size=40), st.sampled_from(["é" * 40, "x" * 300, 'quo"te\\', "\x00\x1f", "日本"]))
METADATA = st.dictionaries(
    st.text(max_size=8),
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(2**63), 2**63 - 1),
        st.floats(allow_nan=False, allow_infinity=False),
        st.text(max_size=30),
    ),
    max_size=6,
)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(IDS, METADATA, st.text(max_size=60)), max_size=30))
def test_a_page_of_hits_is_joined_byte_for_byte_as_the_plain_page_encodes(pagerows_twins, wirepack_twins, rows):
    """The law of the join: a page of shared hits (``Hits``) written as heads and rows' bytes, in JSON
    (``hits_json``, codecs.to_json) and MessagePack (both wirepack twins), is byte for byte the plain page
    (the same hits as fresh dicts of decoded documents) as orjson and msgpack write it."""
    encoded = [encode_row(msgpack.packb({"id": id_, "type": "thing", "metadata": m, "data": d})) for id_, m, d in rows]
    ids = [id_ for id_, _, _ in rows]
    plain = [{"id": id_, "score": None, "entity": orjson.loads(e.json)} for id_, e in zip(ids, encoded)]
    envelope = {"brain": "main", "generation": 3}
    want_json = orjson.dumps({"results": plain, **envelope})
    want_msgpack = msgpack.packb({"results": plain, **envelope}, use_bin_type=True)
    for pagerows in pagerows_twins:
        hits = pagerows.plain_hits(ids, encoded)
        assert type(hits) is Hits
        for twin in pagerows_twins:
            assert twin.hits_json(hits) == orjson.dumps(plain)
        assert codecs.to_json({"results": hits, **envelope}) == want_json
        for packer in wirepack_twins:
            assert packer.pack({"results": hits, **envelope}) == want_msgpack
        for e in encoded:
            e.hit = None  # the other twin makes its own hits


def test_a_page_of_hits_changed_after_it_was_made_is_written_as_it_now_stands(pagerows_twin, wirepack_twin):
    """Hits is a list: a reader that appends a plain hit or a hit of another id gets that list written,
    never the join of what the page held before (the join refuses what is not a shared hit of a row)."""
    rows = [_encoded(i) for i in range(3)]
    hits = pagerows_twin.plain_hits([f"id-{i}" for i in range(3)], rows)
    hits.append({"id": "extra", "score": 0.5, "entity": {"type": "x"}})
    assert pagerows_twin.hits_json(hits) is None and pagerows_twin.hits_json([1, 2]) is None
    plain = [{**h, "entity": h["entity"].document()} if isinstance(h["entity"], Encoded) else h for h in hits]
    assert orjson.loads(codecs.to_json({"results": hits})) == {"results": plain}
    assert msgpack.unpackb(wirepack_twin.pack({"results": hits})) == {"results": plain}
    assert pagerows_twin.plain_hits(["a"], [{"id": "a"}]).__class__ is list  # a call in process: plain dicts
