"""Projection snapshots (docs/store-format.md, "Projection snapshots"): format 3 read whole and in place (each
page checked when first touched, a posting found by its value, an order column's value by its dense int), a
damaged page or a torn file never trusted, formats 2 and 1 still read. Real stores, real files."""

from __future__ import annotations

import itertools
import struct
import zlib
from array import array
from pathlib import Path

import msgpack
import pytest

from brainy.engine import Brain, init_store
from brainy.engine.projections import (PAGE_BYTES, InPlace, Projections, column_values, decode_snapshot,
                                       encode_snapshot, newest_snapshot)
from tests.test_arbiter import _held_lock


def _store(path: Path) -> Path:
    init_store(path)
    with Brain.open(path) as brain:
        brain.addMany({"items": [{"type": "document", "id": f"d{i}", "data": f"the note {i} of {i % 7}",
                                  "metadata": {"team": f"t{i % 5}", "score": i / 2, "tags": [f"x{i % 3}"]}}
                                 for i in range(300)]})
        brain.remove({"id": brain.get("d7")["entity"]["id"]})  # a removed row: the id map keeps its entry
    return path


def _built(path: Path) -> Projections:
    with Brain.attach(path) as brain:
        return Projections.build(brain.at().entities(), brain.head)


def _same(got: object, want: Projections) -> None:
    assert got.stamp == want.stamp and got.total_length == want.total_length  # type: ignore[attr-defined]
    assert dict(got.ids) == want.ids and got.all == want.all  # type: ignore[attr-defined]
    assert {p: dict(v) for p, v in got.postings.items()} == want.postings  # type: ignore[attr-defined]
    assert dict(got.columns) == want.columns  # type: ignore[attr-defined]
    assert got.terms == want.terms and got.lengths == want.lengths  # type: ignore[attr-defined]


def test_format_3_reads_back_whole_and_in_place(tmp_path: Path) -> None:
    want = _built(_store(tmp_path / "s"))
    data = encode_snapshot(want)
    assert data.startswith(b"brnyproj")
    _same(decode_snapshot(data), want)
    in_place = InPlace(data)
    assert in_place.format == 3 and len(in_place) == len(want) == 299
    assert in_place.posting("team", "t3") == want.posting("team", "t3")
    assert in_place.posting("team", "t9") == array("Q")
    assert in_place.ids[max(want.ids)] == want.ids[max(want.ids)]
    some = [d for d in want.all if d % 3 == 0]
    assert column_values(in_place.columns["score"], some) == {d: want.columns["score"][d] for d in some}
    assert column_values(want.columns["score"], some[:5]) == {d: want.columns["score"][d] for d in some[:5]}
    _same(in_place, want)
    empty = encode_snapshot(Projections())
    assert len(InPlace(empty)) == 0 and dict(InPlace(empty).ids) == {} and decode_snapshot(empty).ids == {}


def _page_of(snap: InPlace, name: str, start: int = 0) -> int:
    return (snap._sections[name][0] + start) // PAGE_BYTES


def test_a_damaged_page_is_never_trusted(tmp_path: Path) -> None:
    """A flipped byte in one page refuses the reads that touch that page (and the whole load), while a read
    whose pages check out still answers; a store whose snapshot is damaged rebuilds from the rows and says so."""
    store = _store(tmp_path / "s")
    found = newest_snapshot(store / "index")
    assert found is not None
    data = bytearray(found[1].read_bytes())
    data[-3] ^= 0xFF  # inside the last page (the last section)
    in_place = InPlace(bytes(data))  # the head still checks out
    assert _page_of(in_place, "postingInts/team") < len(in_place._pages) - 1
    assert len(in_place.posting("team", "t1")) == 60  # its pages check out
    with pytest.raises(ValueError, match="checksum mismatch"):
        [dict(column) for column in in_place.columns.values()]
    with pytest.raises(ValueError, match="checksum mismatch"):
        decode_snapshot(bytes(data))
    found[1].write_bytes(bytes(data))
    with Brain.attach(store) as brain:
        assert len(brain.find({"where": {"team": "t1"}, "limit": 100})["results"]) == 60
        assert brain.projections_from == "rows"
        assert [w["code"] for w in brain.warnings] == ["projections-rebuilt"]


def test_a_torn_snapshot_is_never_trusted(tmp_path: Path) -> None:
    """A snapshot cut short (the page table no longer covers the body) refuses at once; the store rebuilds."""
    store = _store(tmp_path / "s")
    found = newest_snapshot(store / "index")
    assert found is not None
    data = found[1].read_bytes()
    for cut in (1, PAGE_BYTES, len(data) // 2):
        with pytest.raises(ValueError):
            InPlace(data[:-cut])
    found[1].write_bytes(data[:-1])
    with Brain.attach(store) as brain:
        assert len(brain.find({"where": {"team": "t1"}, "limit": 100})["results"]) == 60
        assert brain.projections_from == "rows"


def _format_2(proj: Projections) -> bytes:
    """A snapshot of format 2, laid out as docs/store-format.md describes it."""
    dense = array("Q", sorted(proj.ids))
    texts = [proj.ids[d].encode("utf-8") for d in dense]
    offsets = array("Q", [0, *itertools.accumulate(len(t) for t in texts)])
    sections = [
        ("dense", dense.tobytes()), ("idOffsets", offsets.tobytes()), ("idText", b"".join(texts)),
        ("all", proj.all.tobytes()),
        ("lengths", msgpack.packb([array("Q", proj.lengths.keys()).tobytes(),
                                   array("I", proj.lengths.values()).tobytes()])),
        ("terms", msgpack.packb([[w, array("Q", tfs.keys()).tobytes(), array("I", tfs.values()).tobytes()]
                                 for w, tfs in proj.terms.items()])),
        *((f"postings/{path}", msgpack.packb([[kind, value, posting.tobytes()]
                                              for (kind, value), posting in values.items()]))
          for path, values in proj.postings.items()),
        *((f"columns/{path}", msgpack.packb([array("Q", column.keys()).tobytes(),
                                             msgpack.packb(list(column.values()))]))
          for path, column in proj.columns.items()),
    ]
    table, at = {}, 0
    for name, body in sections:
        table[name] = [at, len(body), zlib.crc32(body)]
        at += len(body)
    head = msgpack.packb({"format": 2, "stamp": proj.stamp, "totalLength": proj.total_length, "sections": table})
    return b"".join([b"brnyproj", struct.pack("<II", len(head), zlib.crc32(head)), head,
                     *(body for _, body in sections)])


def test_a_format_2_snapshot_is_still_read_whole_and_in_place(tmp_path: Path) -> None:
    """Format 2 (a crc32 a section, postings and columns decoded whole) loads and answers in place as it did; a
    damaged section refuses; a store holding one answers from it, and its next flush writes format 3."""
    store = _store(tmp_path / "s")
    want = _built(store)
    data = _format_2(want)
    _same(decode_snapshot(data), want)
    in_place = InPlace(data)
    assert in_place.format == 2
    assert in_place.posting("team", "t3") == want.posting("team", "t3")
    assert in_place.ids[max(want.ids)] == want.ids[max(want.ids)]
    _same(in_place, want)
    damaged = bytearray(data)
    damaged[-3] ^= 0xFF
    with pytest.raises(ValueError, match="checksum mismatch"):
        [dict(column) for column in InPlace(bytes(damaged)).columns.values()]
    found = newest_snapshot(store / "index")
    assert found is not None and found[0] == want.stamp
    found[1].write_bytes(data)
    with Brain.open(store) as brain:
        assert len(brain.find({"where": {"team": "t1"}, "limit": 100})["results"]) == 60
        assert brain.projections_from == f"snapshot at {want.stamp}"
        brain.add({"type": "document", "id": "late", "metadata": {"team": "t1"}})
        brain.flush()
    found = newest_snapshot(store / "index")
    assert found is not None and InPlace(found[1].read_bytes()).format == 3


def test_a_served_ordered_find_reads_only_its_own_values_in_place(tmp_path: Path) -> None:
    """Over more rows than a served read builds itself, ordered finds with filters answer from the snapshot read
    in place (its build cannot publish: a thread holds the state lock) exactly as the built projections do:
    ties on the order value by id, rows missing the key last, both directions, a vfs subtype excluded."""
    store = tmp_path / "big"
    init_store(store)
    with Brain.open(store) as brain:
        for batch in range(3):
            brain.addMany({"items": [{"type": "thing", "id": f"r{batch}-{i:03d}", "data": f"row {batch} {i}",
                                      "metadata": {"batch": batch, "odd": i % 2 == 1, "rank": i % 40,
                                                   **({"label": f"l{i % 9}"} if i % 4 else {})}}
                                     for i in range(500)]})
    queries = [{"where": {"odd": True}, "orderBy": "metadata.rank", "limit": 25},
               {"where": {"batch": 1}, "orderBy": "metadata.label", "order": "desc", "limit": 40, "offset": 90},
               {"type": "thing", "orderBy": "createdAt", "order": "desc", "limit": 7},
               {"where": {"batch": 2, "odd": False}, "orderBy": "id", "limit": 5}]
    with Brain.attach(store) as built:
        expected = [built.find(q) for q in queries]
    brain = Brain.attach(store)
    brain.follower.background = brain.vector_follower.background = True  # as the pool serves it
    release, holder = _held_lock(brain)
    try:
        answers = [brain.find(q) for q in queries]
        in_place = brain.follower.built_from is None  # answered before the build could publish
    finally:
        release.set(), holder.join(), brain.close()
    assert in_place
    for got, want in zip(answers, expected):
        assert got["total"] == want["total"] and \
            [r["entity"]["id"] for r in got["results"]] == [r["entity"]["id"] for r in want["results"]]
    assert answers[0]["total"] == 750 and len(answers[1]["results"]) == 40


def test_a_format_1_snapshot_is_still_read(tmp_path: Path) -> None:
    """A snapshot of format 1, laid out as docs/store-format.md describes it, loads to the same projections."""
    want = _built(_store(tmp_path / "s"))
    dense = array("Q", sorted(want.ids))
    body = msgpack.packb({
        "format": 1, "stamp": want.stamp, "totalLength": want.total_length, "dense": dense.tobytes(),
        "ids": [want.ids[d] for d in dense], "all": want.all.tobytes(),
        "postings": [[path, kind, value, posting.tobytes()] for path, values in want.postings.items()
                     for (kind, value), posting in values.items()],
        "columns": [[path, array("Q", column.keys()).tobytes(), list(column.values())]
                    for path, column in want.columns.items()],
        "terms": [[word, array("Q", tfs.keys()).tobytes(), array("I", tfs.values()).tobytes()]
                  for word, tfs in want.terms.items()],
        "lengths": [array("Q", want.lengths.keys()).tobytes(), array("I", want.lengths.values()).tobytes()],
    }, use_bin_type=True)
    _same(decode_snapshot(body + zlib.crc32(body).to_bytes(4, "little")), want)
