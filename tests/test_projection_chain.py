"""The projection snapshot chain (docs/store-format.md, "The chain: a base and one delta"): a flush writes a delta
of what changed since the base, not the store; the delta laid over its base, read in place or loaded whole,
answers as projections built from the rows; a new base once the delta passes its share; a crash, a stale delta or
a damaged one never trusted beyond what checks out. Real stores, real files, real processes where crashes matter."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import threading
import zlib
from collections.abc import Iterable
from pathlib import Path

import msgpack
import pytest

from brainy.contract import refusals as R
from brainy.doors import mechanics
from brainy.engine import Brain, init_store
from brainy.index import chain
from brainy.index import follower as F
from brainy.index.projections import InPlace, Projections, encode_snapshot
from tests.test_cold_start import _row, _same_reads


def _links(store: Path) -> tuple[list[int], list[int]]:
    """The stamps of the bases and of the deltas in the store's index folder."""
    folder = store / "index"
    return (
        sorted(int(p.name[: -len(chain.BASE_SUFFIX)]) for p in folder.glob("*" + chain.BASE_SUFFIX)),
        sorted(int(p.name[: -len(chain.DELTA_SUFFIX)]) for p in folder.glob("*" + chain.DELTA_SUFFIX)),
    )


def _based(store: Path, ids: Iterable[int]) -> int:
    """A new store holding the rows of ``ids``, flushed once: the stamp of its chain's base."""
    init_store(store)
    with Brain.open(store) as brain:
        brain.addMany({"items": [_row(i) for i in ids]})
        assert brain.flush()
    (base,), deltas = _links(store)
    assert deltas == []
    return base


def _built(brain: Brain) -> Projections:
    return Projections.build(brain.at().entities(), brain.head)


def _chain_reads_as_built(store: Path, brain: Brain) -> None:
    """The newest chain, read in place and loaded whole, answers as a build from the rows at its stamp."""
    found = chain.newest(store / "index")
    assert found is not None and found.stamp == brain.head
    want = _built(brain)
    _same_reads(chain.mapped(found), want)
    _same_reads(chain.load(found), want)


_STEPS = [
    lambda b: b.addMany({"items": [_row(i) for i in range(400, 440)]}),
    lambda b: b.update({"id": "d3", "metadata": {"team": "t9", "score": None}}),
    lambda b: b.update({"id": "d4", "data": "entirely other words", "metadata": {"z": 1}, "merge": False}),
    lambda b: b.remove({"id": "d5"}),
    lambda b: b.remove({"id": "d401"}),  # added after the base, then removed
    lambda b: b.add({"type": "thing", "id": "d5", "metadata": {"team": "t0"}}),  # the key, at a new dense int
    lambda b: b.update({"id": "d3", "data": "moved a second time", "metadata": {"team": "t1"}}),  # touched twice
    lambda b: b.addMany({"items": [_row(i, upsert=True, visibility="internal") for i in range(10, 30)]}),
    lambda b: b.remove({"id": "d10"}),
]


def test_each_flush_writes_a_delta_that_answers_as_a_full_build(tmp_path: Path) -> None:
    """After the first flush's base, every flush writes one delta at the head and removes the one before; the base
    stays. At every step the chain, read in place and loaded whole, answers as the rows do, and a writer reopened
    on it flushes again without ever building the projections."""
    store = tmp_path / "s"
    base = _based(store, range(400))
    with Brain.open(store) as brain:
        for step in _STEPS:
            step(brain)
            assert brain.flush()
            assert _links(store) == ([base], [brain.head])
            _chain_reads_as_built(store, brain)
    with Brain.open(store) as brain:  # a reopened writer: its flush reads the delta, never the store
        brain.update({"id": "d6", "subtype": "memo"})
        assert brain.flush()
        assert brain.follower.built_from is None and _links(store) == ([base], [brain.head])
        _chain_reads_as_built(store, brain)
        found = chain.newest(store / "index")
        assert found is not None and found.delta is not None
        entry = {p["name"]: p for p in mechanics.diagnostics(brain, deep=False)["projections"]}["projections"]
        assert (
            entry["stamp"] == found.stamp
            and entry["behind"] == 0
            and entry["bytes"] == found.base[1].stat().st_size + found.delta[1].stat().st_size
        )  # the whole chain
        assert brain.find({"where": {"team": "t9"}})["total"] == 0  # d3 moved on to t1
        assert brain.projections_from == f"snapshot at {brain.head}"  # the build, when a read needs it, is the chain


def test_a_delta_keeps_no_vector(tmp_path: Path) -> None:
    """The rows a delta voids are kept without their vectors (no projection reads one; the index has its own)."""
    store = tmp_path / "s"
    init_store(store)
    vector = [0.5] * 384
    with Brain.open(store) as brain:
        brain.addMany(
            {"items": [{"type": "thing", "id": f"v{i}", "vector": vector, "metadata": {"n": i}} for i in range(20)]}
        )
        assert brain.flush()
        brain.update({"id": "v1", "metadata": {"n": -1}})
        assert brain.flush()
        found = chain.newest(store / "index")
        assert found is not None and found.delta is not None
        from brainy.index.projections import unpacked

        voided = unpacked(InPlace(found.delta[1].read_bytes()).section("voided"))
        assert [row["metadata"] for row in voided] == [{"n": 1}] and "vector" not in voided[0]
        _chain_reads_as_built(store, brain)


def test_a_deltas_moves_folded_in_at_once_are_the_moves_one_at_a_time() -> None:
    """Delta.apply_all (a flush's fold, runs of new rows posted in one call) leaves the delta as Delta.apply of
    each move in turn: the same masked and voided ints, the same encoded link, for commits that add rows, change
    and remove rows of the base and of the delta, and add again between."""
    stamps = {"createdAt": 1_700_000_000_000, "updatedAt": 1_700_000_000_000, "visibility": "public"}
    base_rows = [dict(_row(i), denseInt=i, generation=1, vector=b"v" * 8, **stamps) for i in range(20)]
    added = [dict(_row(100 + i), denseInt=100 + i, generation=2, vector=b"w" * 8, **stamps) for i in range(30)]
    changed = dict(base_rows[4], metadata={"team": "t9"}, generation=3)
    again = dict(added[2], metadata={"team": "t8"}, generation=3)
    commits = [
        [("e", None, row) for row in added[:10]],
        [("e", base_rows[4], changed), ("e", None, added[10]), ("e", None, added[11]), ("e", base_rows[7], None)],
        [("e", added[2], again), ("e", None, added[12]), *[("e", None, row) for row in added[13:]]],
        [("e", again, None), ("e", changed, dict(changed, metadata={"team": "t7"}))],
    ]
    one, at_once = chain.Delta(1, 7, 1000, "s"), chain.Delta(1, 7, 1000, "s")
    for moves in commits:
        for _, before, after in moves:
            one.apply(before, after)
    at_once.apply_all(commits)
    assert one.masked == at_once.masked and one.voided == at_once.voided
    one.stamp = at_once.stamp = 4
    assert one.encode() == at_once.encode()


def test_random_commits_and_flushes_keep_the_chain_a_full_build(tmp_path: Path) -> None:
    """Random adds, changes, removals and re-adds of a few keys, flushed at random: the chain answers as the rows
    at every flush, across reopens of the writer."""
    store = tmp_path / "s"
    _based(store, range(200))
    rng = random.Random(17)
    for _ in range(3):
        with Brain.open(store, flush_bytes=1 << 40) as brain:
            for _ in range(12):
                for _ in range(rng.randint(1, 6)):
                    i = rng.randrange(240)
                    live = brain.get(f"d{i}").get("entity") is not None
                    choice = rng.random()
                    if live and choice < 0.3:
                        brain.remove({"id": f"d{i}"})
                    elif live:
                        brain.update(
                            {
                                "id": f"d{i}",
                                "data": f"words {rng.randrange(9)}",
                                "metadata": {"team": f"t{rng.randrange(7)}", "score": rng.random()},
                            }
                        )
                    else:
                        brain.add(_row(i, metadata={"team": f"t{rng.randrange(7)}", "n": i}))
                if rng.random() < 0.5:
                    assert brain.flush()
                    _chain_reads_as_built(store, brain)


def test_a_delta_past_its_share_makes_the_next_link_a_base(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Once the delta would pass its share of the base's bytes, the flush writes a base at the head, and the older
    base and every delta go."""
    monkeypatch.setattr(chain, "REBASE_FRACTION", 0.05)
    store = tmp_path / "s"
    first = _based(store, range(300))
    with Brain.open(store) as brain:
        brain.update({"id": "d1", "metadata": {"team": "t8"}})
        assert brain.flush()
        assert _links(store) == ([first], [brain.head])  # small: a delta
        brain.addMany({"items": [_row(i, upsert=True, metadata={"team": "tx"}) for i in range(100)]})
        assert brain.flush()
        assert _links(store) == ([brain.head], [])  # a third of the rows moved: a base
        _chain_reads_as_built(store, brain)


def test_a_burst_sure_to_pass_the_share_goes_straight_to_a_base(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A flush whose commits add more rows than twice the delta's share of the base holds writes the base without
    folding them into the delta first (never encoded to be thrown away); a few rows still make a delta, measured."""
    store = tmp_path / "s"
    first = _based(store, range(300))
    encoded = []
    real = chain.Delta.encode
    monkeypatch.setattr(chain.Delta, "encode", lambda delta: encoded.append(len(delta.proj)) or real(delta))
    with Brain.open(store) as brain:
        brain.addMany({"items": [_row(i) for i in range(300, 310)]})
        assert brain.flush()
        assert _links(store) == ([first], [brain.head]) and encoded == [10]  # ten rows: a delta
        brain.addMany({"items": [_row(i) for i in range(310, 500)]})  # 200 rows: past 2 x 0.25 x 300
        assert brain.flush()
        assert _links(store) == ([brain.head], []) and encoded == [10]  # a base, the delta never built
        _chain_reads_as_built(store, brain)


def test_a_served_read_answers_from_the_delta_in_place_and_the_tail_over_it(tmp_path: Path) -> None:
    """A served attach answers before its build lands: from the base and delta read in place while the chain is
    at the head, and with a log tail laid over them after a writer's unflushed commits, as a full build does."""
    store = tmp_path / "s"
    _based(store, [*range(400), *range(440, 1300)])  # more than a served read builds itself; the steps add 400..439
    with Brain.open(store) as brain:
        for step in _STEPS:
            step(brain)
        assert brain.flush()
    queries = [
        {"where": {"team": "t9"}, "limit": 5},
        {"where": {"team": "t1"}, "orderBy": "metadata.score", "order": "desc", "limit": 20},
        {"query": "moved second", "searchMode": "text", "limit": 10},
        {"type": "thing", "limit": 50},
    ]
    for tail in (False, True):
        if tail:  # commits a writer made durable and never flushed: it was SIGKILLed
            _killed(store, 'brain.update({"id": "d3", "metadata": {"team": "t9"}}); brain.remove({"id": "d20"})')
        with Brain.attach(store) as built:
            expected = [built.find(q) for q in queries]
            want = _built(built)
        gate = threading.Event()
        held = [F._builders().submit(gate.wait, 60) for _ in range(2)]
        brain = Brain.attach(store)
        try:
            brain.follower.background = brain.vector_follower.background = True
            answers = [brain.find(q) for q in queries]
            assert brain.follower.built_from is None
            over = brain.follower._overlay if tail else brain.follower._in_place
            assert isinstance(brain.follower._in_place, chain.Layered)
            _same_reads(over, want)
        finally:
            gate.set()
            [h.result() for h in held]
            brain.close()
        for got, wanted in zip(answers, expected):
            assert got.get("total") == wanted.get("total")
            assert [(r["entity"]["id"], r["score"]) for r in got["results"]] == [
                (r["entity"]["id"], r["score"]) for r in wanted["results"]
            ]


def test_a_delta_that_names_another_base_or_is_damaged_is_not_trusted(tmp_path: Path) -> None:
    """A delta whose base check does not match its base (a rebase that crashed before it removed it), or one with a
    damaged page, is never read: the projections are rebuilt from the rows, the warnings say why, the answers are
    the rows'."""
    store = tmp_path / "s"
    _based(store, range(1200))  # more than a served read builds itself
    with Brain.open(store) as brain:
        brain.update({"id": "d2", "metadata": {"team": "t9"}})
        assert brain.flush()
    found = chain.newest(store / "index")
    assert found is not None and found.delta is not None
    good = found.delta[1].read_bytes()
    snap = InPlace(good)
    stale = bytearray(good)
    # another base's check in the delta's head (the head's own crc made to match again)
    head_at, head_size = 16, int.from_bytes(good[8:12], "little")
    head = msgpack.unpackb(good[head_at : head_at + head_size], raw=False)
    head["baseCheck"] ^= 1
    new_head = msgpack.packb(head, use_bin_type=True)
    assert len(new_head) == head_size  # the same length: the sections stay where they are
    stale[head_at : head_at + head_size] = new_head
    stale[12:16] = zlib.crc32(new_head).to_bytes(4, "little")
    damaged = bytearray(good)
    damaged[snap._base + snap._sections["postingInts/team"][0] + 3] ^= 0xFF
    for bad in (bytes(stale), bytes(damaged)):
        found.delta[1].write_bytes(bad)
        with Brain.attach(store) as brain:
            assert brain.find({"where": {"team": "t9"}})["total"] == 1
            assert brain.projections_from == "rows"
            assert "projections-rebuilt" in [w["code"] for w in brain.warnings]
    # served: the delta is one page, checked when the chain is mapped, so it is never read in place; the first read
    # refuses by name (the build is held), then the rows answer
    found.delta[1].write_bytes(bytes(damaged))
    gate = threading.Event()
    held = [F._builders().submit(gate.wait, 60) for _ in range(2)]
    brain = Brain.attach(store)
    try:
        brain.follower.background = True
        with pytest.raises(R.ProjectionBehindError):
            brain.find({"where": {"team": "t9"}, "limit": 10})
    finally:
        gate.set()
        [h.result() for h in held]
    brain.follower.settle()
    assert brain.find({"where": {"team": "t9"}})["total"] == 1
    brain.close()


_KILLED = r"""
import os, signal, sys
from brainy.engine import Brain
brain = Brain.open(sys.argv[1], flush_bytes=1 << 40)
exec(sys.argv[2])
os.kill(os.getpid(), signal.SIGKILL)
"""

# rounds of commits under one prefix, every other one flushed, each acknowledged on stdout once it returned
_ROUNDS = """
prefix, rounds = sys.argv[3], int(sys.argv[4])
for r in range(rounds):
    brain.addMany({"items": [{"type": "document", "id": f"k{prefix}-{r}-{i}", "data": f"round {r} word{i % 3}",
                              "metadata": {"team": f"t{i % 4}", "round": f"{prefix}-{r}"}} for i in range(20)]})
    brain.update({"id": f"d{prefix}{r}", "metadata": {"team": "moved", "round": f"{prefix}-{r}"}})
    if r % 2 == 0:
        brain.flush()
    print(r, flush=True)
"""


def _killed(store: Path, code: str, *args: str) -> str:
    """Run ``code`` in a writer of its own on ``store``, then SIGKILL it; what it printed."""
    env = {**os.environ, "BRAINY_EMBED_MODEL_DIR": "/nonexistent-model-dir"}  # no model: rows stored unembedded
    done = subprocess.run(
        [sys.executable, "-c", _KILLED, str(store), code, *args], env=env, timeout=120, capture_output=True, text=True
    )
    assert done.returncode == -9, done.stderr
    return done.stdout


@pytest.mark.slow
def test_writers_killed_between_flushes_leave_a_chain_that_answers_every_acknowledged_write(tmp_path: Path) -> None:
    """Writers SIGKILLed in turn after rounds of commits, some flushed as deltas, some only in the log: each reopen
    finds every acknowledged write, its chain (and the tail over it) answers as the rows do, and the older base is
    still the chain's (no flush rewrote the store)."""
    store = tmp_path / "s"
    base = _based(store, range(3000))  # the rounds' deltas stay under a tenth of it
    moved = 0
    for kill in range(3):
        acknowledged = len(_killed(store, _ROUNDS, str(kill + 1), str(4 + kill)).split())
        assert acknowledged == 4 + kill
        moved += acknowledged
        with Brain.attach(store) as brain:
            _same_reads(brain.follower._overlaid(), _built(brain))  # before a find builds the projections
            assert brain.find({"where": {"round": f"{kill + 1}-{acknowledged - 1}"}, "limit": 100})["total"] == 21
            assert brain.find({"where": {"team": "moved"}, "limit": 100})["total"] == moved
        assert _links(store)[0] == [base]


def test_a_base_already_at_its_stamp_is_kept_and_named_by_its_own_check(tmp_path: Path) -> None:
    """Writing a base where one is already at that stamp keeps the file and names it by the file's own check (the
    same projections may encode to other bytes), so the deltas after it stay tied to the base on disk."""
    store = tmp_path / "s"
    base = _based(store, range(50))
    path = store / "index" / f"{base:020d}{chain.BASE_SUFFIX}"
    on_disk = path.read_bytes()
    other = Projections()
    other.stamp = base
    delta = chain.write_base(store / "index", base, encode_snapshot(other))
    assert path.read_bytes() == on_disk and delta.base_check == InPlace(on_disk).check
    assert (delta.base, delta.stamp, delta.base_bytes) == (base, base, len(on_disk))
