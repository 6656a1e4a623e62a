"""Tables: versions sorted by key then generation, read at any generation; a torn table refuses by name."""

from __future__ import annotations

import random

import pytest
from helpers import fill, flip, new_store, tables

from brainy.contract import refusals as R
from brainy.engine import Brain
from brainy.store import sstable


def _entries(n_keys=300, seed=1):
    rnd = random.Random(seed)
    out = []
    for k in range(n_keys):
        key = b"e" + k.to_bytes(4, "big") + bytes(rnd.randrange(256) for _ in range(rnd.randrange(0, 20)))
        gens = sorted(rnd.sample(range(1, 1000), rnd.randrange(1, 6)), reverse=True)
        for g in gens:
            value = b"" if rnd.random() < 0.1 else bytes(rnd.randrange(256) for _ in range(rnd.randrange(1, 300)))
            out.append((key, g, value))
    out.sort(key=lambda e: (e[0], -e[1]))
    return out


def test_table_reads_agree_with_a_sorted_model(tmp_path):
    """get(key, G) answers the newest version at or below G, across block boundaries; scan is table order."""
    entries = _entries()
    path = tmp_path / "t.sst"
    meta = sstable.write_table(path, iter(entries))
    assert meta["entries"] == len(entries)
    table = sstable.Table(path)
    assert table._bounds is None and len(table._index()) // 2 > 10  # the index is decoded when first needed
    by_key: dict[bytes, list[tuple[int, bytes]]] = {}
    for key, gen, value in entries:
        by_key.setdefault(key, []).append((gen, value))
    rnd = random.Random(2)
    for key, versions in by_key.items():
        for probe in [0, 999, rnd.randrange(1, 1000)] + [g for g, _ in versions]:
            want = next(((g, v) for g, v in versions if g <= probe), None)
            assert table.get(key, probe) == want
        assert table.get(key + b"\x00missing", 999) is None
    assert list(table.scan(b"", None)) == entries
    start = entries[len(entries) // 2][0]
    assert list(table.scan(start, None)) == [e for e in entries if e[0] >= start]
    table.close()


def test_the_index_fields_read_from_its_end_are_those_of_the_whole_index(tmp_path):
    """A table's minGen, maxGen and entries, read from the end of its index block without passing over the
    blocks, are what the whole block says; an index laid out otherwise (its fields first, as another writer may
    order them) is read in order, to the same values; a block whose tail is not those three fields is not
    trusted to its tail."""
    import msgpack

    entries = _entries()
    path = tmp_path / "t.sst"
    meta = sstable.write_table(path, iter(entries))
    table = sstable.Table(path)
    whole = msgpack.unpackb(table._index_doc, raw=False)
    assert sstable._tail_fields(table._index_doc) == {k: whole[k] for k in ("minGen", "maxGen", "entries")}
    assert (table.min_gen, table.max_gen, table.entries) == (meta["minGen"], meta["maxGen"], meta["entries"])
    table.close()
    reordered = msgpack.packb(
        {"minGen": whole["minGen"], "maxGen": whole["maxGen"], "entries": whole["entries"], "blocks": whole["blocks"]},
        use_bin_type=True,
    )
    assert sstable._tail_fields(reordered) is None
    extra = msgpack.packb(
        {"blocks": whole["blocks"], "minGen": 1, "maxGen": 2, "entries": 3, "x": 4}, use_bin_type=True
    )
    assert sstable._tail_fields(extra) is None
    wrong = msgpack.packb({"blocks": whole["blocks"], "minGen": 1, "maxGen": "2", "entries": 3}, use_bin_type=True)
    assert sstable._tail_fields(wrong) is None


def test_a_prefetch_asks_for_the_block_a_lookup_reads_and_decodes_nothing(tmp_path):
    """Prefetching every key (the kernel reads the blocks ahead) leaves the table's answers as they were, and no
    block decoded until a lookup reads it; a key past the last block asks for nothing."""
    entries = _entries()
    path = tmp_path / "t.sst"
    sstable.write_table(path, iter(entries))
    table = sstable.Table(path)
    for key, _, _ in entries:
        table.prefetch(key)
    table.prefetch(b"\xff" * 8)
    assert not table._cache
    assert [table.get(key, gen) for key, gen, _ in entries] == [(gen, value) for _, gen, value in entries]
    table.prefetch(entries[0][0])  # decoded now: not asked again
    table.close()


def test_bloom_filter_has_no_false_negatives(tmp_path):
    """Every key in a table passes its bloom filter; most absent keys do not."""
    entries = _entries(500)
    path = tmp_path / "t.sst"
    sstable.write_table(path, iter(entries))
    table = sstable.Table(path)
    assert all(table.may_contain(k) for k, _, _ in entries)
    false_pos = sum(table.may_contain(b"absent-%d" % i) for i in range(2000))
    assert false_pos < 2000 * 0.05
    table.close()


def _flushed_store(tmp_path):
    path = new_store(tmp_path)
    brain = Brain.open(path)
    fill(brain, 200)
    brain.flush()
    brain.close()
    (table,) = tables(path)
    return path, table


def test_flipped_byte_in_a_data_block_refuses_when_read(tmp_path):
    """A data block whose checksum fails is never served: reading it refuses with torn-sstable, naming the file."""
    path, table = _flushed_store(tmp_path)
    flip(table, 100)
    brain = Brain.open(path)
    try:
        with pytest.raises(R.StoreUnservableError) as exc:
            for i in range(200):
                brain.get(f"k{i}")
        assert exc.value.reason == "torn-sstable"
        assert exc.value.fields["file"] == f"sst/{table.name}"
    finally:
        brain.close()


def test_every_flipped_byte_of_a_table_is_caught(tmp_path):
    """Whatever byte of a table is flipped, reads refuse by name or answer right, and verify refuses."""
    path, table = _flushed_store(tmp_path)
    original = table.read_bytes()
    rnd = random.Random(7)
    offsets = sorted(rnd.sample(range(len(original)), 25)) + [len(original) - 1, len(original) - 48]
    for offset in offsets:
        flip(table, offset)
        with pytest.raises(R.StoreUnservableError) as exc:
            brain = Brain.attach(path)
            for i in range(200):  # a row read either refuses or is right
                got = brain.get(f"k{i}")["entity"]
                assert got is not None and got["metadata"] == {"i": i}
            brain.verify()  # the blocks no read touched are checked here
        assert exc.value.reason == "torn-sstable", offset
        table.write_bytes(original)


def test_torn_footer_refuses_at_open(tmp_path):
    """A table cut short (its footer gone) refuses at open for the writer and for an attach."""
    path, table = _flushed_store(tmp_path)
    data = table.read_bytes()
    table.write_bytes(data[:-10])
    for opener in (Brain.open, Brain.attach):
        with pytest.raises(R.StoreUnservableError) as exc:
            opener(path)
        assert exc.value.reason == "torn-sstable"


def test_an_open_asks_for_its_footer_then_its_bloom_and_index_and_no_block(tmp_path, monkeypatch):
    """A table's open asks the kernel for exactly the pages it reads (a cold page touched unasked reads the
    device's read-ahead around it): the footer, then the bloom and index blocks before it; no data block."""
    asked: list[tuple[int, int]] = []
    real = sstable.Table._will_need
    monkeypatch.setattr(sstable.Table, "_will_need", lambda self, at, n: asked.append((at, n)) or real(self, at, n))
    path = tmp_path / "t.sst"
    sstable.write_table(path, iter(_entries()))
    table = sstable.Table(path)
    size = path.stat().st_size
    footer, tail = asked
    assert footer == (size - sstable.FOOTER_SIZE, sstable.FOOTER_SIZE - 4)  # and its last 4 bytes: the whole footer
    table._index()
    first_block_end = table._offsets[0] + table._sizes[0]
    assert tail[0] >= table._offsets[-1] + table._sizes[-1] + 4 > first_block_end  # after every data block
    assert tail[0] + tail[1] + 4 == size - sstable.FOOTER_SIZE  # up to the footer
    assert table.get(_entries()[0][0], 10**6) is not None and len(asked) == 3  # a lookup asks for its block
    table.close()


def test_blooms_probed_together_say_what_each_table_s_bloom_says(tmp_path):
    """Many keys against many tables at once: for each key, exactly the tables whose own bloom may hold it."""
    rnd = random.Random(5)
    made = []
    for t in range(6):
        path = tmp_path / f"{t}.sst"
        sstable.write_table(
            path,
            iter(
                sorted(
                    (b"e" + bytes(rnd.randrange(256) for _ in range(16)), 1, b"v") for _ in range(rnd.randrange(1, 400))
                )
            ),
        )
        made.append(sstable.Table(path))
    present = [key for table in made for key in table.block(0)[0][:5]]
    keys = present + [bytes(rnd.randrange(256) for _ in range(17)) for _ in range(3000)]
    holding = sstable.Blooms(made).holding(keys)
    assert all(holding[key] == [t for t in made if t.may_contain(key)] for key in keys)
    assert all(holding[key] for key in present) and sum(bool(holding[key]) for key in keys[len(present) :]) < 300
