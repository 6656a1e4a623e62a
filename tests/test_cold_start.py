"""Projection snapshots (docs/store-format.md, "Projection snapshots"): format 3 read whole and in place (each
page checked when first touched, a posting found by its value, an order column's value by its dense int), a
damaged page or a torn file never trusted, formats 2 and 1 still read. Real stores, real files."""

from __future__ import annotations

import itertools
import os
import struct
import threading
import zlib
from array import array
from pathlib import Path

import msgpack
import pytest

from brainy.contract import refusals as R
from brainy.engine import Brain, init_store
from brainy.index import follower as F
from brainy.index.projections import (
    PAGE_BYTES,
    InPlace,
    Projections,
    column_values,
    decode_snapshot,
    encode_snapshot,
    leaves,
    newest_snapshot,
    path_values,
)
from tests.test_arbiter import _held_lock


def _store(path: Path) -> Path:
    init_store(path)
    with Brain.open(path) as brain:
        brain.addMany(
            {
                "items": [
                    {
                        "type": "document",
                        "id": f"d{i}",
                        "data": f"the note {i} of {i % 7}",
                        "metadata": {"team": f"t{i % 5}", "score": i / 2, "tags": [f"x{i % 3}"]},
                    }
                    for i in range(300)
                ]
            }
        )
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
        ("dense", dense.tobytes()),
        ("idOffsets", offsets.tobytes()),
        ("idText", b"".join(texts)),
        ("all", proj.all.tobytes()),
        (
            "lengths",
            msgpack.packb([array("Q", proj.lengths.keys()).tobytes(), array("I", proj.lengths.values()).tobytes()]),
        ),
        (
            "terms",
            msgpack.packb(
                [
                    [w, array("Q", tfs.keys()).tobytes(), array("I", tfs.values()).tobytes()]
                    for w, tfs in proj.terms.items()
                ]
            ),
        ),
        *(
            (
                f"postings/{path}",
                msgpack.packb([[kind, value, posting.tobytes()] for (kind, value), posting in values.items()]),
            )
            for path, values in proj.postings.items()
        ),
        *(
            (
                f"columns/{path}",
                msgpack.packb([array("Q", column.keys()).tobytes(), msgpack.packb(list(column.values()))]),
            )
            for path, column in proj.columns.items()
        ),
    ]
    table, at = {}, 0
    for name, body in sections:
        table[name] = [at, len(body), zlib.crc32(body)]
        at += len(body)
    head = msgpack.packb({"format": 2, "stamp": proj.stamp, "totalLength": proj.total_length, "sections": table})
    return b"".join(
        [b"brnyproj", struct.pack("<II", len(head), zlib.crc32(head)), head, *(body for _, body in sections)]
    )


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
            brain.addMany(
                {
                    "items": [
                        {
                            "type": "thing",
                            "id": f"r{batch}-{i:03d}",
                            "data": f"row {batch} {i}",
                            "metadata": {
                                "batch": batch,
                                "odd": i % 2 == 1,
                                "rank": i % 40,
                                **({"label": f"l{i % 9}"} if i % 4 else {}),
                            },
                        }
                        for i in range(500)
                    ]
                }
            )
    queries = [
        {"where": {"odd": True}, "orderBy": "metadata.rank", "limit": 25},
        {"where": {"batch": 1}, "orderBy": "metadata.label", "order": "desc", "limit": 40, "offset": 90},
        {"type": "thing", "orderBy": "createdAt", "order": "desc", "limit": 7},
        {"where": {"batch": 2, "odd": False}, "orderBy": "id", "limit": 5},
    ]
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
        assert got["total"] == want["total"] and [r["entity"]["id"] for r in got["results"]] == [
            r["entity"]["id"] for r in want["results"]
        ]
    assert answers[0]["total"] == 750 and len(answers[1]["results"]) == 40


def test_a_format_1_snapshot_is_still_read(tmp_path: Path) -> None:
    """A snapshot of format 1, laid out as docs/store-format.md describes it, loads to the same projections."""
    want = _built(_store(tmp_path / "s"))
    dense = array("Q", sorted(want.ids))
    body = msgpack.packb(
        {
            "format": 1,
            "stamp": want.stamp,
            "totalLength": want.total_length,
            "dense": dense.tobytes(),
            "ids": [want.ids[d] for d in dense],
            "all": want.all.tobytes(),
            "postings": [
                [path, kind, value, posting.tobytes()]
                for path, values in want.postings.items()
                for (kind, value), posting in values.items()
            ],
            "columns": [
                [path, array("Q", column.keys()).tobytes(), list(column.values())]
                for path, column in want.columns.items()
            ],
            "terms": [
                [word, array("Q", tfs.keys()).tobytes(), array("I", tfs.values()).tobytes()]
                for word, tfs in want.terms.items()
            ],
            "lengths": [array("Q", want.lengths.keys()).tobytes(), array("I", want.lengths.values()).tobytes()],
        },
        use_bin_type=True,
    )
    _same(decode_snapshot(body + zlib.crc32(body).to_bytes(4, "little")), want)


# -- a snapshot behind the head, with the tail laid over it (brainy/index/overlaid.py) ----------------------


def _row(i: int, **extra: object) -> dict[str, object]:
    return {
        "type": "document" if i % 3 else "thing",
        "id": f"d{i}",
        "data": f"note {i} about {i % 7} things",
        "subtype": "memo" if i % 50 == 0 else None,
        "metadata": {
            "team": f"t{i % 5}",
            "score": i / 2,
            "tags": [f"x{i % 3}", i % 4],
            "deep": {"n": i % 6},
            # one path reached twice (a dotted key and a nested one)
            "a.b": i % 2,
            "a": {"b": i % 3, "c": [{"x": 1}, i]},
        },
        **extra,
    }


def test_a_rows_values_of_one_path_are_the_leaves_of_that_path() -> None:
    row = {
        "id": "x",
        "type": "thing",
        "key": "k",
        "createdAt": 1,
        "metadata": {"a.b": 1, "a": {"b": [2, {"no": 1}, 1], "c": {"d": None}}, "type": "meta", "t": [True, 1, [3]]},
    }
    paths = {path for path, _ in leaves(row)} | {"nowhere", "a", "a.c"}
    for path in paths:
        assert path_values(row, path) == [v for p, v in leaves(row) if p == path], path


def _same_reads(got: object, want: Projections) -> None:
    """Every read surface of the projections, as a full build from the rows at the same generation holds it
    (the id map compared on the live rows: an entry outlives its row, and only a live row's id is ever read)."""
    assert got.stamp == want.stamp and len(got) == len(want)  # type: ignore[attr-defined, arg-type]
    assert got.total_length == want.total_length and got.all == want.all  # type: ignore[attr-defined]
    assert {d: got.ids[d] for d in want.all} == {d: want.ids[d] for d in want.all}  # type: ignore[attr-defined]
    assert {p: dict(v) for p, v in got.postings.items() if len(v)} == {
        p: dict(v) for p, v in want.postings.items() if v
    }  # type: ignore[attr-defined]
    for path, values in want.postings.items():
        for key, posting in values.items():
            assert got.posting(path, key[1]) == posting  # type: ignore[attr-defined]
    assert {p: dict(c) for p, c in got.columns.items() if len(c)} == {p: c for p, c in want.columns.items() if c}  # type: ignore[attr-defined]
    assert dict(got.terms) == want.terms and dict(got.lengths) == want.lengths  # type: ignore[attr-defined]


def _overlaid(brain: Brain) -> object:
    over = brain.follower._overlaid()
    assert over is not None and over.stamp == brain.head
    return over


def test_an_overlaid_snapshot_answers_as_a_full_build(tmp_path: Path) -> None:
    """A snapshot at the flushed generation, with commits after it laid over it (adds, changes, deletes, a key
    moving to a new dense int, a row re-added, a field dropped, a subtype gained), answers every read as
    the projections built from the rows do, at every step, and moves with each commit as it becomes durable."""
    store = tmp_path / "s"
    init_store(store)
    with Brain.open(store) as brain:
        brain.addMany({"items": [_row(i) for i in range(400)]})
    steps = [
        lambda b: b.addMany({"items": [_row(i) for i in range(400, 460)]}),
        lambda b: b.update({"id": "d3", "metadata": {"team": "t9", "score": None}}),
        lambda b: b.update({"id": "d4", "data": "entirely other words", "metadata": {"z": 1}, "merge": False}),
        lambda b: b.remove({"id": "d5"}),
        lambda b: b.remove({"id": "d401"}),  # added by the tail, then removed by it
        lambda b: b.add({"type": "thing", "id": "d5", "metadata": {"team": "t0"}}),  # the key, at a new dense int
        lambda b: b.update({"id": "d6", "subtype": "memo"}),
        lambda b: b.addMany({"items": [_row(i, upsert=True, visibility="internal") for i in range(10, 30)]}),
        lambda b: b.remove({"id": "d10"}),
    ]
    with Brain.open(store, flush_bytes=1 << 40) as brain:
        stamp, held = brain.head, []
        for step in steps:
            step(brain)
            over = _overlaid(brain)
            assert over.base.stamp == stamp  # the snapshot at the flushed generation, never rebuilt
            assert all(over is not earlier for earlier, _ in held)  # a read may hold those: moved in a copy
            want = Projections.build(brain.at().entities(), brain.head)
            _same_reads(over, want)
            held.append((over, want))
        for earlier, want in held:  # each still reads as the rows of its own generation
            _same_reads(earlier, want)
        assert brain.follower._overlay is over and brain.follower._proj is None
        # a read that builds (this handle is not served) lands the full build, and the overlay goes
        brain.find({"limit": 1})
        assert brain.follower._overlay is None and brain.projections_from == f"snapshot at {stamp}"


_CRASHING_WRITER = r"""
import os, signal, sys
from brainy.engine import Brain
brain = Brain.open(sys.argv[1], flush_bytes=1 << 40)
part = sys.argv[2]
if part == "first":
    brain.addMany({"items": [{"type": "document", "id": f"n{i}", "data": f"fresh words {i % 4}",
                              "metadata": {"team": f"t{i % 3}", "score": 1000 + i}} for i in range(40)]})
    brain.update({"id": "d3", "metadata": {"team": "t9"}})
    brain.remove({"id": "d5"})
else:
    brain.update({"id": "n1", "data": "changed again", "metadata": {"score": -1}})
    brain.remove({"id": "n2"})
    brain.add({"type": "thing", "id": "d5", "metadata": {"team": "t1"}})  # the key, at a new dense int
    brain.addMany({"items": [{"type": "document", "id": f"d{i}", "upsert": True, "data": "upserted",
                              "metadata": {"team": "t2", "score": -i}} for i in range(20, 40)]})
os.kill(os.getpid(), signal.SIGKILL)
"""


def _crash_after(store: Path, part: str) -> None:
    import subprocess
    import sys

    env = {**os.environ, "BRAINY_EMBED_MODEL_DIR": "/nonexistent-model-dir"}  # no model: rows stored unembedded
    done = subprocess.run([sys.executable, "-c", _CRASHING_WRITER, str(store), part], env=env, timeout=120)
    assert done.returncode == -9


def _crashed_twice(store: Path) -> Path:
    """A store of 1,200 flushed rows, then two writers SIGKILLed in turn after durable, unflushed commits."""
    init_store(store)
    with Brain.open(store) as brain:
        brain.addMany({"items": [_row(i) for i in range(1200)]})
    _crash_after(store, "first")
    _crash_after(store, "second")
    return store


@pytest.mark.slow
def test_a_replayed_tail_probed_in_runs_reads_as_one_probed_a_frame_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The frames of a crashed writer's tail (updates and removals of flushed rows, a removed key added again at a
    new dense int, upserts) are replayed in runs whose keys are probed together: whatever the run's bound, the
    attach holds the same rows and counts as one probed a frame at a time, and probes once a run."""
    from brainy.engine import brain as B
    from brainy.store.sstable import Probed

    store = _crashed_twice(tmp_path / "s")
    probes: list[int] = []
    real_probe = Probed.probe
    monkeypatch.setattr(Probed, "probe", lambda self, written: probes.append(len(written)) or real_probe(self, written))
    seen = []
    for bound in (1, 3, B.PROBE_AHEAD_OPS):
        monkeypatch.setattr(B, "PROBE_AHEAD_OPS", bound)
        probes.clear()
        with Brain.attach(store) as brain:
            assert brain.recovery["replayedGenerations"] > 2
            seen.append(([dict(row) for row in brain.at().entities()], brain.durable_ledger.n, list(probes)))
    (one, counts, per_frame), (threes, counts3, _), (whole, counts_all, runs) = seen
    assert threes == whole == one and counts3 == counts_all == counts
    assert len(per_frame) > 2 and runs == [sum(per_frame)]  # every frame's keys, in one run
    by_key = {row["key"]: row for row in whole}
    assert by_key["d3"]["metadata"]["team"] == "t9" and by_key["d5"]["type"] == "thing" and "n2" not in by_key


@pytest.mark.slow
def test_a_served_find_after_a_crash_answers_from_the_overlaid_snapshot(tmp_path: Path) -> None:
    """Two writers SIGKILLed in turn, each after commits that were durable but never flushed (the second one
    recovered the first's tail on open): a served attach answers its first finds from the snapshot read in
    place with the replayed tail laid over it, before its build can land, exactly as a full build answers them;
    the overlay equals the projections built from the rows."""
    store = _crashed_twice(tmp_path / "s")
    queries = [
        {"type": "document", "where": {"team": "t2"}, "limit": 15},
        {"where": {"team": "t9"}, "limit": 5},
        {"where": {"team": {"in": ["t0", "t1"]}}, "orderBy": "metadata.score", "order": "desc", "limit": 30},
        {"type": "thing", "orderBy": "createdAt", "order": "desc", "limit": 10, "offset": 3},
        {"query": "fresh words upserted", "searchMode": "text", "limit": 20},
        {"where": {"deep.n": 2}, "orderBy": "id", "limit": 50, "offset": 100},
    ]
    with Brain.attach(store) as built:  # not served: built in the read, from the snapshot and the tail
        expected = [built.find(q) for q in queries]
        assert built.recovery["replayedGenerations"] > 0
    gate = threading.Event()
    held = [F._builders().submit(gate.wait, 60) for _ in range(2)]  # the build cannot start: it queues behind
    brain = Brain.attach(store)
    try:
        brain.follower.background = brain.vector_follower.background = True  # as the pool serves it
        answers = [brain.find(q) for q in queries]
        over = brain.follower._overlay
        assert brain.follower.built_from is None and over is not None and over.stamp == brain.head
        assert over.base.stamp < brain.head  # the snapshot is behind: the tail is laid over it
        _same_reads(over, Projections.build(brain.at().entities(), brain.head))
    finally:
        gate.set()
        [h.result() for h in held]
        brain.close()
    for got, want in zip(answers, expected):
        assert got.get("total") == want.get("total") and got["generation"] == want["generation"]
        assert [(r["entity"]["id"], r["score"]) for r in got["results"]] == [
            (r["entity"]["id"], r["score"]) for r in want["results"]
        ]
    assert answers[1]["total"] == 1 and answers[0]["total"] > 0


def _crashed_after_a_flush(store: Path) -> tuple[Path, tuple[int, Path]]:
    """A store of 1,200 rows flushed, then a writer SIGKILLed after its first unflushed commit: its newest
    projection snapshot (stamp, path) is behind the head."""
    init_store(store)
    with Brain.open(store) as brain:
        brain.addMany({"items": [_row(i) for i in range(1200)]})
    _crash_after(store, "first")
    found = newest_snapshot(store / "index")
    assert found is not None
    return store, found


@pytest.mark.slow
def test_a_damaged_snapshot_behind_the_head_is_refused_then_rebuilt(tmp_path: Path) -> None:
    """A served read that meets a damaged page of the snapshot under the overlay (after a crash) refuses by
    name; the snapshot is not read in place again and the build, from the rows, answers the next read."""
    store, found = _crashed_after_a_flush(tmp_path / "s")
    data = bytearray(found[1].read_bytes())
    in_place = InPlace(bytes(data))
    data[in_place._base + in_place._sections["postingInts/team"][0] + 8] ^= 0xFF
    found[1].write_bytes(bytes(data))
    with Brain.attach(store) as built:
        want = len(Projections.build(built.at().entities(), built.head).posting("team", "t1"))
    gate = threading.Event()
    held = [F._builders().submit(gate.wait, 60) for _ in range(2)]
    brain = Brain.attach(store)
    try:
        brain.follower.background = True
        assert brain.head > in_place.stamp
        with pytest.raises(R.ProjectionBehindError, match="damaged"):
            brain.find({"where": {"team": "t1"}, "limit": 100})
        assert brain.follower._overlay is None and brain.follower._in_place is None
    finally:
        gate.set()
        [h.result() for h in held]
    brain.follower.settle()
    assert brain.find({"where": {"team": "t1"}, "limit": 1000})["total"] == want
    assert brain.projections_from == "rows" and "projections-rebuilt" in [w["code"] for w in brain.warnings]
    brain.close()


def test_pages_of_an_ordered_find_over_tied_values_follow_the_whole_order(tmp_path: Path) -> None:
    """A page orders by id only the tied runs it reaches; page after page (by offset and by cursor), in both
    directions, they read as the one long answer does."""
    store = _store(tmp_path / "s")
    with Brain.attach(store) as brain:
        for order in ("asc", "desc"):
            query = {"orderBy": "metadata.team", "order": order}
            whole = [r["id"] for r in brain.find({**query, "limit": 1000})["results"]]
            by_offset = [
                r["id"]
                for at in range(0, len(whole), 7)
                for r in brain.find({**query, "limit": 7, "offset": at})["results"]
            ]
            by_cursor, cursor = [], None
            while True:
                page = brain.find({**query, "limit": 11, **({"cursor": cursor} if cursor else {})})
                by_cursor += [r["id"] for r in page["results"]]
                cursor = page["cursor"]
                if cursor is None:
                    break
            assert by_offset == by_cursor == whole and len(whole) == 299


@pytest.mark.slow
def test_an_overlaid_snapshot_of_format_2_answers_as_a_full_build(tmp_path: Path) -> None:
    """The tail of a crash laid over a snapshot of format 2 (its postings and columns decoded whole) reads as the
    projections built from the rows do."""
    store, found = _crashed_after_a_flush(tmp_path / "s")
    with Brain.attach(store) as brain:
        found[1].write_bytes(_format_2(Projections.build(brain.at(found[0]).entities(), found[0])))
    with Brain.attach(store) as brain:
        over = _overlaid(brain)
        assert over.base.format == 2 and over.base.stamp < brain.head
        _same_reads(over, Projections.build(brain.at().entities(), brain.head))


def test_a_served_build_waits_for_the_first_read_in_place(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Warmed at admission, the build does not start beside the first read in place (FIRST_READ_GRACE_SECONDS,
    lengthened here so that a slow machine cannot reach its end first): the read is answered from the snapshot
    alone, and the build starts as soon as it is."""
    import time

    store = tmp_path / "s"
    init_store(store)
    with Brain.open(store) as brain:
        brain.addMany({"items": [_row(i) for i in range(1200)]})
    monkeypatch.setattr(F, "FIRST_READ_GRACE_SECONDS", 20.0)
    # The build, once started, is held at its door until the read's answer has been looked at: a build of
    # 1,200 rows can otherwise land between the answer and the look.
    started, release, build = [], threading.Event(), F.ProjectionFollower._build

    def gated(self: F.ProjectionFollower) -> None:
        started.append(time.monotonic())
        release.wait(15)
        build(self)

    monkeypatch.setattr(F.ProjectionFollower, "_build", gated)
    with Brain.attach(store) as brain:
        brain.follower.background = True
        brain.follower.warm()  # as the pool admits it
        time.sleep(0.3)
        assert not started  # held back, though a build of 1,200 rows takes less
        assert brain.find({"where": {"team": "t1"}, "limit": 5})["total"] == 240
        answered = time.monotonic()
        assert brain.follower.built_from is None  # answered in place, the build not waited for
        release.set()
        assert brain.follower._built.wait(15) and started and started[0] - answered < 15
        assert brain.projections_from is not None


def test_a_pool_served_build_waits_for_the_first_door_not_its_hold_of_the_projections(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A handle the pool serves holds its build back until its first door has answered (the pool's ``left``),
    not only until the door lets go of the projections: a find then still reads its page's rows, and a build
    beside them took the disk and the interpreter lock they need. Then it starts at once."""
    import time

    from brainy.host.pool import Pool

    store = tmp_path / "s"
    init_store(store)
    with Brain.open(store) as brain:
        brain.addMany({"items": [_row(i) for i in range(1200)]})
    monkeypatch.setattr(F, "FIRST_READ_GRACE_SECONDS", 20.0)
    pool = Pool({"main": store})
    try:
        entry = pool.enter("main")
        brain = pool.held(entry, False)
        assert brain.find({"where": {"team": "t1"}, "limit": 5})["total"] == 240  # the projections let go
        assert brain.follower.built_from is None and not brain.follower._built.wait(0.3)  # the door goes on
        pool.left(entry)
        answered = time.monotonic()
        assert brain.follower._built.wait(15) and time.monotonic() - answered < 15
        entry = pool.enter("main")
        pool.held(entry, False).find({"limit": 1})
        pool.left(entry)  # a later door tells nobody again
        assert not entry.unanswered
    finally:
        pool.close_all()


@pytest.mark.slow
def test_a_flush_and_a_read_after_a_crash_share_one_build(tmp_path: Path) -> None:
    """When the chain cannot take a delta (here its base is of format 2, which a flush writes again as format 3),
    the recovery flush builds the projections on its own thread, registered as the build in flight: the first
    served read's warm-up waits for that build instead of decoding the snapshot a second time beside it."""
    import time

    store, found = _crashed_after_a_flush(tmp_path / "s")
    found[1].write_bytes(_format_2(decode_snapshot(found[1].read_bytes())))
    brain = Brain.attach(store)
    try:
        follower = brain.follower
        follower.background = True
        decoded: list[float] = []
        real = follower._persisted

        def slow_persisted() -> object:  # a spy: counts the decodes and widens the window a second could open
            decoded.append(time.monotonic())
            time.sleep(0.3)
            return real()

        follower._persisted = slow_persisted  # type: ignore[method-assign]
        flush = threading.Thread(target=follower.prepare_flush)  # as the flush after recovery calls it
        flush.start()
        while not decoded:
            time.sleep(0.005)
        follower.warm()  # what the pool's admission and a served read's first miss do
        assert brain.find({"where": {"team": "t1"}, "limit": 5})["total"] > 0
        flush.join(30)
        follower.settle()
        assert len(decoded) == 1 and follower.built_from is not None and follower.built_from.startswith("snapshot")
    finally:
        brain.close()


_KILLED_AT_THE_SWAP = """
import os, signal, sys
from brainy.engine import Brain
from brainy.store.maintenance import Maintenance
brain = Brain.open(sys.argv[1], flush_bytes=1 << 30)
brain.defineAggregate({"name": "teams", "source": {}, "groupBy": ["team"], "metrics": {"n": {"op": "count"}}},
                      caller="person:pat")
brain.addMany({"items": [{"type": "document", "id": f"d{i}", "metadata": {"team": f"t{i % 3}"}}
                         for i in range(1200)]})
assert brain.flush()
brain.addMany({"items": [{"type": "document", "id": f"e{i}", "metadata": {"team": "t9"}} for i in range(50)]})
swap = Maintenance._write_manifest

def swap_then_die(self, *args):  # the real swap, then the power cut before anything else of the flush
    swap(self, *args)
    os.kill(os.getpid(), signal.SIGKILL)

Maintenance._write_manifest = swap_then_die
brain.flush()
"""


@pytest.mark.slow
def test_a_crash_just_after_the_manifest_swap_leaves_snapshots_the_next_open_reaches(tmp_path: Path) -> None:
    """A real writer SIGKILLed right after a flush swapped the MANIFEST: the projection and aggregate snapshots
    were written before the swap, so the next open loads both from them (caught up with the tail), never
    from the rows."""
    import subprocess
    import sys

    store = tmp_path / "s"
    init_store(store)
    env = {**os.environ, "BRAINY_EMBED_MODEL_DIR": "/nonexistent-model-dir"}
    done = subprocess.run([sys.executable, "-c", _KILLED_AT_THE_SWAP, str(store)], env=env, timeout=120)
    assert done.returncode == -9
    with Brain.attach(store) as brain:
        assert brain.flushed == brain.head  # the swap landed: the 50 rows are in the tables
        assert brain.find({"where": {"team": "t9"}, "limit": 100})["total"] == 50
        rows = {r["groupKey"]["team"]: r["count"] for r in brain.aggregate({"name": "teams"})["rows"]}
        assert rows == {"t0": 400, "t1": 400, "t2": 400, "t9": 50}
        assert brain.projections_from == f"snapshot at {brain.head}"
        assert brain.aggregate_follower.built_from == f"snapshot at {brain.head}"
        assert not [w for w in brain.warnings if w["code"].endswith("-rebuilt")]
