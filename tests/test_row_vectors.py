"""A row's vector under a key of its own (docs/store-format.md, "Rows and keys", "Frame payload"): a version of
a row costs what changed, and every read of a vector answers what it answered while the vector was in the row.

The format 1 store these tests read is tests/data/format1-store, written by the code of format 1 itself
(tools/format1_store.py says how): a table and a log tail whose rows hold their vectors inline.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import msgpack
import numpy as np
import pytest
from helpers import new_store

from brainy.contract import refusals as R
from brainy.engine import Brain
from brainy.index import encoded_rows as E
from brainy.store import keys as K
from brainy.store import log as log_
from brainy.store import rows
from brainy.store.directory import FOLDERS
from brainy.store.files import read_document

DIM = 384
FORMAT1 = Path(__file__).parent / "data" / "format1-store"


def vector(seed: int) -> list[float]:
    """A vector of float32 numbers (the stored bytes are the given ones), as tools/format1_store.py makes them."""
    return np.random.default_rng(seed).standard_normal(DIM).astype(np.float32).tolist()


def f32(numbers: Any) -> bytes:
    return np.asarray(numbers, np.float32).tobytes()


def got(brain: Brain, id_: str, generation: int | None = None) -> bytes | None:
    """The vector ``get`` answers for ``id_`` (at ``generation`` through asOf), in process and over the wire, which
    must agree: its float32 bytes, None when the answer holds none."""
    if generation is None:
        entity = brain.get(id_, includeVector=True)["entity"]
        snap = brain.at()
    else:
        read = {"door": "get", "id": id_, "args": {"includeVector": True}}
        entity = brain.asOf({"generation": generation, "read": read})["result"]["entity"]
        snap = brain.at(generation)
    wire = E.lookup(snap.for_wire(), K.entity_key(K.resolve(id_)[0]), True)
    if entity is None:
        assert wire is None
        return None
    assert entity["hasVector"] is ("vector" in entity)
    plain = f32(entity["vector"]) if "vector" in entity else None
    for document in (wire.document(), wire.msgpack_document()):
        assert (f32(document["vector"]) if "vector" in document else None) == plain
    return plain


def puts(path: Path) -> dict[int, list[dict[str, Any]]]:
    """Each generation's put ops as the log holds them."""
    return {f.generation: [op for op in f.ops if op["o"] == "put"] for f in log_.frames(path / "log", 0)}


def key_versions(brain: Brain, key: bytes) -> list[tuple[int, bytes]]:
    return brain.at().versions(key)


def every_version(brain: Brain) -> list[tuple[bytes, int, bytes]]:
    """Every version of every key the handle holds in its memtable."""
    return sorted(brain.sources.mem.entries())


def test_a_metadata_update_writes_the_row_and_no_vector_byte(tmp_path: Path) -> None:
    """A put whose row keeps its vector logs the row alone (no ``vec``, no vector inside it) and writes no
    version of the vector key; the vector read back, in process and on the wire, in the memtable and in a
    table after a reopen, is the one the row was added with."""
    path = new_store(tmp_path)
    with Brain.open(path, flush_bytes=1 << 30) as brain:
        added = brain.add({"type": "thing", "id": "a", "metadata": {"n": 0}, "vector": vector(1)})
        id_ = added["id"]
        g2 = brain.updateMany({"items": [{"id": "a", "metadata": {"n": 1}}]})["generation"]
        g3 = brain.update({"id": "a", "metadata": {"n": 2}})["generation"]
        ops = puts(path)
        (first,) = ops[added["generation"]]
        assert first["vec"] == f32(vector(1)) and "vector" not in rows.unpack(first["row"])
        for generation in (g2, g3):
            (op,) = ops[generation]
            row = rows.unpack(op["row"])
            assert "vec" not in op and "vector" not in row and row["hasVector"] is True
            assert len(op["row"]) < 300  # the row's own fields: a vector is 1,536 bytes
        vkey = K.vector_key(K.entity_key(id_))
        assert [g for g, _ in key_versions(brain, vkey)] == [added["generation"]]
        assert got(brain, "a") == f32(vector(1))
        assert brain.find({"vector": vector(1), "limit": 1})["results"][0]["id"] == id_
    with Brain.open(path) as brain:  # the clean close flushed: the row and its vector come from a table
        assert brain.get("a")["entity"]["metadata"] == {"n": 2}
        assert got(brain, "a") == f32(vector(1))
        assert [g for g, _ in key_versions(brain, vkey)] == [added["generation"]]
        hit = brain.similar({"to": "a", "includeSelf": True, "limit": 1})["results"][0]
        assert hit["id"] == id_ and hit["score"] == pytest.approx(1.0, abs=1e-5)


def test_history_and_as_of_read_the_vector_each_version_was_written_with(tmp_path: Path) -> None:
    """Every version history lists says it has a vector; asOf at each generation answers the vector of that
    time (the one before a change, the one after), by get, by export and by a semantic find of that
    generation's rows, whether the versions are in the memtable or in a table."""
    path = new_store(tmp_path)
    with Brain.open(path, flush_bytes=1 << 30) as brain:
        brain.add({"type": "thing", "id": "other", "vector": vector(9)})
        g1 = brain.add({"type": "thing", "id": "a", "vector": vector(1)})["generation"]
        g2 = brain.update({"id": "a", "metadata": {"n": 1}})["generation"]
        brain.flush()
        g3 = brain.update({"id": "a", "vector": vector(2)})["generation"]
        g4 = brain.update({"id": "a", "metadata": {"n": 2}})["generation"]
        history = brain.history("a")["versions"]
        assert [v["generation"] for v in history] == [g4, g3, g2, g1]
        assert all(v["entity"]["hasVector"] for v in history)
        want = {g1: vector(1), g2: vector(1), g3: vector(2), g4: vector(2)}
        for generation, v in want.items():
            assert got(brain, "a", generation) == f32(v)
            read = {"door": "export", "args": {"includeVectors": True, "limit": 10}}
            page = brain.asOf({"generation": generation, "read": read})["result"]["entities"]
            assert {e["key"]: f32(e["vector"]) for e in page}["a"] == f32(v)
            read = {"door": "find", "args": {"vector": vector(1), "limit": 1}}
            top = brain.asOf({"generation": generation, "read": read})["result"]["results"][0]
            assert (top["score"] == pytest.approx(1.0, abs=1e-5)) is (generation < g3)


def test_remove_then_add_again_leaves_no_vector_behind(tmp_path: Path) -> None:
    """A removal leaves a tombstone on the vector key; the id added again without a vector reads none, a vector
    given later is written again, an explicit null drops it (another tombstone), and each past generation
    still reads its own. An attach that replays the log holds every version the writer holds."""
    path = new_store(tmp_path)
    with Brain.open(path, flush_bytes=1 << 30) as brain:
        g1 = brain.add({"type": "thing", "id": "a", "vector": vector(1)})["generation"]
        vkey = K.vector_key(K.entity_key(K.resolve("a")[0]))
        g2 = brain.remove({"id": "a"})["generation"]
        g3 = brain.add({"type": "thing", "id": "a"})["generation"]
        assert got(brain, "a") is None and brain.get("a")["entity"]["hasVector"] is False
        g4 = brain.update({"id": "a", "vector": vector(3)})["generation"]
        assert puts(path)[g4][0]["vec"] == f32(vector(3))
        g5 = brain.update({"id": "a", "vector": None})["generation"]
        g6 = brain.remove({"id": "a"})["generation"]
        g7 = brain.add({"type": "thing", "id": "a", "vector": vector(7)})["generation"]
        assert key_versions(brain, vkey) == [
            (g7, f32(vector(7))),
            (g5, b""),
            (g4, f32(vector(3))),
            (g2, b""),
            (g1, f32(vector(1))),
        ]
        want = {g1: vector(1), g2: None, g3: None, g4: vector(3), g5: None, g6: None, g7: vector(7)}
        for generation, v in want.items():
            assert got(brain, "a", generation) == (None if v is None else f32(v)), generation
        hits = brain.find({"vector": vector(1), "limit": 5})["results"]
        assert all(h["score"] < 0.99 for h in hits)
        with Brain.attach(path) as replayed:
            assert every_version(replayed) == every_version(brain)
            assert got(replayed, "a") == f32(vector(7))


def test_a_relations_vector_is_kept_under_its_own_key_and_follows_its_endpoints(tmp_path: Path) -> None:
    """A relation without data holds the mean of its endpoints' vectors under ``w`` + id: an endpoint's metadata
    update leaves the relation unwritten; an endpoint's new vector puts the relation with the new mean; export
    answers each generation's; unrelate leaves a tombstone."""
    path = new_store(tmp_path)
    with Brain.open(path, flush_bytes=1 << 30) as brain:
        brain.add({"type": "thing", "id": "a", "vector": vector(1)})
        brain.add({"type": "thing", "id": "b", "vector": vector(2)})
        related = brain.relate({"from": "a", "to": "b", "type": "relatedTo"})
        rkey = K.relation_key(related["id"])
        wkey = K.vector_key(rkey)
        assert wkey[:1] == b"w"
        g_mean = related["generation"]
        brain.update({"id": "a", "metadata": {"n": 1}})
        assert len(key_versions(brain, rkey)) == 1 and len(key_versions(brain, wkey)) == 1
        g_moved = brain.update({"id": "a", "vector": vector(3)})["generation"]
        assert [g for g, _ in key_versions(brain, wkey)] == [g_moved, g_mean]
        means = {
            g_mean: rows.mean_vector(f32(vector(1)), f32(vector(2))),
            g_moved: rows.mean_vector(f32(vector(3)), f32(vector(2))),
        }
        for generation, mean in means.items():
            read = {"door": "export", "args": {"includeVectors": True, "include": ["relations"]}}
            (relation,) = brain.asOf({"generation": generation, "read": read})["result"]["relations"]
            assert relation["hasVector"] and f32(relation["vector"]) == mean
        g_gone = brain.unrelate({"id": related["id"]})["generation"]
        assert key_versions(brain, wkey)[0] == (g_gone, b"")


def test_a_vec_that_is_not_bin_is_refused_by_name() -> None:
    """A put whose ``vec`` is not bin is an unknown record, refused, never read around."""
    row = rows.pack({"id": K.uuid7(), "type": "thing", "hasVector": True, "denseInt": 1})
    payload = log_.encode_payload(1, 1, None, None, [{"k": "e", "o": "put", "row": row, "vec": [0.5] * DIM}])
    with pytest.raises(R.FactLogRefusedError) as refused:
        log_.Frame.decode(payload, "00000000000000000001.log")
    assert refused.value.reason == "unknown-record-type"
    good = log_.encode_payload(1, 1, None, None, [{"k": "e", "o": "put", "row": row, "vec": bytes(4 * DIM)}])
    assert log_.Frame.decode(good, "00000000000000000001.log").ops[0]["vec"] == bytes(4 * DIM)


# -- a format 1 store --------------------------------------------------------------------------------------------


def format1(tmp_path: Path) -> tuple[Path, dict[str, Any]]:
    """A copy of tests/data/format1-store (its empty folders made again) and the generation of each step."""
    path = tmp_path / "format1"
    shutil.copytree(FORMAT1, path, ignore=shutil.ignore_patterns("steps.json"))
    for folder in FOLDERS:
        (path / folder).mkdir(exist_ok=True)
    return path, json.loads((FORMAT1 / "steps.json").read_text())


def inline_rows(path: Path) -> int:
    """How many put ops of the log, and row versions of the tables, hold their vector inline."""
    from brainy.store.sstable import Table

    found = 0
    for frame in log_.frames(path / "log", 0):
        found += sum(1 for op in frame.ops if op["o"] == "put" and "vector" in rows.unpack(op["row"]))
    for table in (path / "sst").glob("*.sst"):
        opened = Table(table)
        try:
            for key, _, value in opened.scan(b"e", b"s"):
                found += bool(value) and key[:1] in b"er" and "vector" in msgpack.unpackb(value, raw=False)
        finally:
            opened.close()
    return found


def answers_as_format1_wrote_them(brain: Brain, steps: dict[str, Any]) -> None:
    """What the format 1 store answers: each row's vector at the head and at the flushed generation, the
    relation's mean, history, and a semantic find over the rows (the index built from them)."""
    flushed = steps["flushed"]
    assert got(brain, "alpha") == f32(vector(1)) and brain.get("alpha")["entity"]["metadata"] == {"n": 3}
    assert got(brain, "beta") == f32(vector(22)) and got(brain, "beta", flushed) == f32(vector(2))
    assert got(brain, "eta") == f32(vector(7)) and got(brain, "delta") == f32(vector(4))
    assert got(brain, "gamma") is None and got(brain, "gamma", flushed) is None
    then = brain.asOf({"generation": flushed, "read": {"door": "get", "id": "gamma"}})["result"]["entity"]
    assert then["hasVector"] is False
    assert got(brain, "alpha", steps["add alpha"]) == f32(vector(1))
    history = brain.history("alpha")["versions"]
    assert [v["generation"] for v in history] == [steps["alpha n=3"], steps["alpha n=2"], steps["add alpha"]]
    assert all(v["entity"]["hasVector"] for v in history)
    for generation, (a, b) in ((flushed, (1, 2)), (brain.head, (1, 22))):
        read = {"door": "export", "args": {"includeVectors": True, "include": ["relations"]}}
        (relation,) = brain.asOf({"generation": generation, "read": read})["result"]["relations"]
        assert relation["id"] == steps["relation"]
        assert f32(relation["vector"]) == rows.mean_vector(f32(vector(a)), f32(vector(b)))
    for seed, key in ((7, "eta"), (22, "beta"), (4, "delta")):
        top = brain.find({"vector": vector(seed), "limit": 1})["results"][0]
        assert top["entity"]["key"] == key and top["score"] == pytest.approx(1.0, abs=1e-5)
    read = {"door": "find", "args": {"vector": vector(2), "limit": 1}}
    top = brain.asOf({"generation": flushed, "read": read})["result"]["results"][0]
    assert top["entity"]["key"] == "beta" and top["score"] == pytest.approx(1.0, abs=1e-5)


def test_a_format_1_store_reads_as_it_was_written(tmp_path: Path) -> None:
    """An attach of a format 1 store (rows with inline vectors in its table and in its log's tail) answers every
    vector as format 1 did, writes nothing (IDENTITY stays format 1), and holds the tail it replayed split, as
    format 2 writes it."""
    path, steps = format1(tmp_path)
    assert read_document(path / "IDENTITY")["format"] == 1 and inline_rows(path) > 0
    before = {p: p.read_bytes() for p in path.rglob("*") if p.is_file()}
    with Brain.attach(path) as brain:
        answers_as_format1_wrote_them(brain, steps)
        replayed = every_version(brain)
        assert any(key[:1] == b"v" for key, _, _ in replayed)  # delta's vector, split out of its frame's row
        assert not any(value and key[:1] in b"er" and "vector" in rows.unpack(value) for key, _, value in replayed)
    assert {p: p.read_bytes() for p in path.rglob("*") if p.is_file()} == before


def test_a_writer_marks_a_format_1_store_and_splits_what_it_writes(tmp_path: Path) -> None:
    """A writer's open marks the store format 2 before it writes; its first put of a row stored inline logs the
    vector (its key held none), the next metadata update none; flushes, a compaction and reopens answer the
    same vectors at every generation, inline rows and split ones side by side in the tables."""
    path, steps = format1(tmp_path)
    with Brain.open(path, flush_bytes=1 << 30) as brain:
        assert read_document(path / "IDENTITY")["format"] == 2
        answers_as_format1_wrote_them(brain, steps)
        first = brain.update({"id": "eta", "metadata": {"n": 1}})["generation"]
        second = brain.update({"id": "eta", "metadata": {"n": 2}})["generation"]
        ops = puts(path)
        assert ops[first][0]["vec"] == f32(vector(7)) and "vec" not in ops[second][0]
        assert got(brain, "eta") == f32(vector(7)) and got(brain, "eta", steps["flushed"]) == f32(vector(7))
        brain.flush()
    with Brain.open(path) as brain:
        answers_as_format1_wrote_them(brain, steps)
        assert brain.compact()
        assert inline_rows(path) > 0  # a merge rewrites no value: the format 1 rows are still inline
    with Brain.open(path) as brain:
        answers_as_format1_wrote_them(brain, steps)
        assert got(brain, "eta") == f32(vector(7)) and brain.get("eta")["entity"]["metadata"] == {"n": 2}
