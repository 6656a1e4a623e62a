"""Projection snapshots (docs/store-format.md, "Projection snapshots"): format 2 read whole and in place, a
damaged section never trusted, a format 1 snapshot still read. Real stores, real files."""

from __future__ import annotations

import zlib
from array import array
from pathlib import Path

import msgpack

from brainy.engine import Brain, init_store
from brainy.engine.projections import InPlace, Projections, decode_snapshot, encode_snapshot, newest_snapshot


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


def test_format_2_reads_back_whole_and_in_place(tmp_path: Path) -> None:
    want = _built(_store(tmp_path / "s"))
    data = encode_snapshot(want)
    assert data.startswith(b"brnyproj")
    _same(decode_snapshot(data), want)
    in_place = InPlace(data)
    assert len(in_place) == len(want) == 299
    assert in_place.posting("team", "t3") == want.posting("team", "t3")
    assert in_place.ids[max(want.ids)] == want.ids[max(want.ids)]
    _same(in_place, want)
    empty = encode_snapshot(Projections())
    assert len(InPlace(empty)) == 0 and dict(InPlace(empty).ids) == {} and decode_snapshot(empty).ids == {}


def test_a_damaged_section_is_never_trusted(tmp_path: Path) -> None:
    """A flipped byte in one section refuses that section (and the whole load); a store whose snapshot is damaged
    rebuilds its projections from the rows and says so."""
    store = _store(tmp_path / "s")
    found = newest_snapshot(store / "index")
    assert found is not None
    data = bytearray(found[1].read_bytes())
    data[-3] ^= 0xFF  # inside the last section
    in_place = InPlace(bytes(data))  # the head still checks out
    try:
        dict(in_place.columns)
        raise AssertionError("a damaged section was read")
    except ValueError as exc:
        assert "checksum mismatch" in str(exc)
    found[1].write_bytes(bytes(data))
    with Brain.attach(store) as brain:
        assert len(brain.find({"where": {"team": "t1"}, "limit": 100})["results"]) == 60
        assert brain.projections_from == "rows"
        assert [w["code"] for w in brain.warnings] == ["projections-rebuilt"]


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
