"""A projections snapshot's bytes do not depend on which twin packs its sections (brainy/index/sections.py, its ids
and postings packed a slice a compiled call by brainy/_speedups/addrow): the same projections encode to the same
bytes with either, with the slices smaller than the paths, and with a path whose values the compiled packer
leaves to msgpack; and they read back as the projections they were."""

from __future__ import annotations

import msgpack
import pytest

from brainy._speedups import load
from brainy.index import projections as PJ
from brainy.index import sections
from brainy.index.projections import Projections, decode_snapshot, encode_snapshot


def _projections() -> Projections:
    proj = Projections()
    rows = []
    for i in range(300):
        rows.append(
            {
                "id": f"ïd-{i}" if i % 7 == 0 else f"id-{i:04d}",
                "type": "document" if i % 2 else "note",
                "visibility": "public",
                "hasVector": i % 3 == 0,
                "generation": 1 + i // 100,
                "createdAt": 1_700_000_000_000 + i,
                "updatedAt": 1_700_000_000_000 + i,
                "denseInt": i,
                "data": "words about ünïcode" if i % 5 == 0 else None,
                "metadata": {"n": i, "score": i / 7, "tag": ["a", "b"][i % 2], "flag": i % 4 == 0, "none": None},
            }
        )
    proj.apply_moves([("e", None, row) for row in rows])
    proj.apply_moves([("e", rows[3], dict(rows[3], metadata={"n": -5, "nested": {"deep": 1 << 40}}))])
    proj.stamp = 4
    return proj


@pytest.mark.parametrize("slice_size", [sections.COLUMN_SLICE, 7])
def test_either_twin_and_any_slice_encode_the_same_bytes(monkeypatch, slice_size):
    proj = _projections()
    encoded = {}
    for which in ("cython", "python"):
        monkeypatch.setattr(sections, "addrow", load("addrow", which))
        monkeypatch.setattr(sections, "COLUMN_SLICE", slice_size)
        encoded[which] = encode_snapshot(proj)
    assert encoded["cython"] == encoded["python"]
    back = decode_snapshot(encoded["cython"])
    assert back.ids == proj.ids and back.columns == proj.columns
    assert {p: {k: list(v) for k, v in vs.items()} for p, vs in back.postings.items()} == {
        p: {k: list(v) for k, v in vs.items()} for p, vs in proj.postings.items()
    }


def test_a_path_holding_a_value_no_twin_packs_is_packed_by_msgpack_alike():
    """A value the compiled packer does not take (here a pair, which msgpack packs as an array) leaves its path's
    directory and ints to msgpack, laid out as the compiled path lays out every other: the directory a Packer
    writes whole, the ints end to end."""
    values = {("string", "a"): PJ.array(PJ.TYPECODE, [1, 4]), ("pair", (1, 2)): PJ.array(PJ.TYPECODE, [2])}
    directory, ints = sections.posting_sections(values)
    assert directory == msgpack.packb([["string", "a", 0, 2], ["pair", [1, 2], 2, 1]], use_bin_type=True)
    assert ints == PJ.array(PJ.TYPECODE, [1, 4, 2]).tobytes()


def test_a_snapshots_column_sections_are_its_values_packed_one_at_a_time(monkeypatch) -> None:
    """A column's sections (its values end to end, each one's offsets) are what packing each value alone gives,
    in slices of leaves packed by one compiled call each, and for a column holding a value that is not a plain
    leaf (here bytes), a value at a time."""
    monkeypatch.setattr(sections, "COLUMN_SLICE", 5)
    for column in ({d: [f"v{d}", d * 1_000, d / 3, None, d % 2 == 0][d % 5] for d in range(23)}, {1: "a", 4: b"b"}):
        keys = sorted(column)
        one = [msgpack.packb(column[k], use_bin_type=True) for k in keys]
        offsets, values = sections.column_sections(column, keys)
        assert values == b"".join(one)
        assert offsets == sections.offsets_of(one)
