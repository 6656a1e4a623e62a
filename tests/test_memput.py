"""A commit's keys put into the memtable's versions (brainy/_speedups/memput*): both twins leave the same versions,
answer the same new keys and size, for new keys, a key put twice in one commit, and keys of earlier commits."""

from __future__ import annotations

import gc
import random

from brainy.store.memtable import Memtable


def _commits(seed: int) -> list[list[tuple[bytes, bytes]]]:
    """Commits over a small key space: new keys, keys of earlier commits, a key put twice in one commit."""
    rng = random.Random(seed)
    keys = [b"k%03d" % i for i in range(40)]
    return [
        [(rng.choice(keys), rng.randbytes(rng.randrange(0, 30))) for _ in range(rng.randrange(1, 25))]
        for _ in range(30)
    ]


def test_both_twins_put_the_same_versions(memput_twins):
    compiled, pure = memput_twins
    for seed in range(20):
        got = []
        for twin in (compiled, pure):
            versions: dict = {}
            answers = [
                twin.put_many(versions, commit, generation) for generation, commit in enumerate(_commits(seed), 1)
            ]
            got.append((versions, answers))
        assert got[0] == got[1]


def test_a_dict_of_keys_is_put_as_its_items_are(memput_twins):
    """A commit's staged keys are handed over as their dict: the same versions and answers as its items."""
    for twin in memput_twins:
        for seed in range(5):
            by_items: dict = {}
            by_dict: dict = {}
            for generation, commit in enumerate(_commits(seed), 1):
                staged = dict(commit)
                assert twin.put_many(by_dict, staged, generation) == twin.put_many(
                    by_items, list(staged.items()), generation
                )
            assert by_dict == by_items and list(by_dict) == list(by_items)


def test_a_keys_versions_are_one_tuple_then_a_list_in_generation_order(memput_twin):
    versions: dict = {}
    new, size = memput_twin.put_many(versions, [(b"a", b"1"), (b"b", b"22"), (b"a", b"3")], 5)
    assert new == [b"a", b"b"] and size == (1 + 1 + 16) + (1 + 2 + 16) + (1 + 1 + 16)
    assert versions == {b"a": (5, b"3"), b"b": (5, b"22")}  # a later op of the same commit replaces its version
    new, _ = memput_twin.put_many(versions, [(b"a", b"4")], 6)
    assert new == [] and versions[b"a"] == [(5, b"3"), (6, b"4")]
    memput_twin.put_many(versions, [(b"a", b"5"), (b"a", b"6")], 7)
    assert versions[b"a"] == [(5, b"3"), (6, b"4"), (7, b"6")]


def test_the_compiled_twins_new_versions_are_left_out_of_the_collectors_passes(memput_twins):
    compiled, _ = memput_twins
    versions: dict = {}
    compiled.put_many(versions, [(b"a", b"1"), (b"b", b"2")], 1)
    assert not any(gc.is_tracked(version) for version in versions.values())


def test_the_memtable_reads_back_what_a_commit_put():
    table = Memtable()
    table.put_many([(b"b", b"1"), (b"a", b"2")], 1)
    table.put_many([(b"a", b"3"), (b"c", b"4")], 2)
    assert table.get(b"a", 1) == (1, b"2") and table.get(b"a", 2) == (2, b"3") and table.get(b"c", 1) is None
    assert list(table.entries()) == [(b"a", 2, b"3"), (b"a", 1, b"2"), (b"b", 1, b"1"), (b"c", 2, b"4")]
    assert len(table) == 3 and table.max_generation == 2


def test_a_flushs_entries_are_the_memtables_scan(memput_twin):
    """versions_in lists every version of the keys given, in their order, a key's newest first: what the memtable's
    scan yields, for keys of one version and of several, the memtable's own entries() too."""
    for seed in range(10):
        mem = Memtable()
        for generation, commit in enumerate(_commits(seed), 1):
            mem.put_many(commit, generation)
        scanned = list(mem.scan(b"", None))
        keys = sorted(mem._versions)
        assert memput_twin.versions_in(keys, mem._versions) == scanned == mem.entries()
        assert any(isinstance(v, list) for v in mem._versions.values())  # keys of several versions were listed
