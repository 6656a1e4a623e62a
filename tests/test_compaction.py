"""Tiered compaction (docs/store-format.md, "Tables"): the maintenance thread merges the newest run of tables, the
newest then each older one no larger than all those before it, so a large table is not rewritten because a few
small flushes piled up; every version survives; an explicit compact merges every table into one."""

from __future__ import annotations

import math
import time
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from brainy.engine import Brain, init_store
from brainy.store.maintenance import compact_run


def test_the_run_is_the_newest_tables_each_no_larger_than_those_before_it() -> None:
    assert compact_run([]) == 1 and compact_run([7]) == 1
    assert compact_run([1, 1, 1, 1, 1000]) == 4  # the small flushes merge; the big table stays
    assert compact_run([1, 2, 4, 8, 1000]) == 1  # each older one larger than all newer: nothing to merge yet
    assert compact_run([1, 1, 2, 4, 8, 1000]) == 5  # one more flush and they fold together
    assert compact_run([5, 5, 10, 20, 40]) == 5


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 64), min_size=20, max_size=300))
def test_flushes_of_any_sizes_rewrite_each_byte_a_logarithmic_number_of_times(flushes: list[int]) -> None:
    """Simulated: tables (newest first) after each flush, compacted as the maintenance thread does once there are
    five; the table count stays near log2 of the total over the smallest flush, and each byte is rewritten at most
    about as many times."""
    tables: list[int] = []  # sizes, newest first
    rewritten = 0
    for size in flushes:
        tables.insert(0, size)
        while len(tables) >= 5:
            run = compact_run(tables)
            if run < 2:
                break
            rewritten += sum(tables[:run])
            tables[:run] = [sum(tables[:run])]
    total = sum(flushes)
    bound = math.log2(total) + 2
    assert len(tables) <= max(5, bound + 1)
    assert rewritten <= total * bound


def _keys(brain: Brain) -> dict[str, object]:
    return {row["key"]: row["metadata"] for row in brain.at().entities()}


def test_small_flushes_never_rewrite_the_large_table_and_every_version_survives(tmp_path: Path) -> None:
    """A store of one large table, then many small flushes compacted by the maintenance thread: the large table is
    the same file throughout, the table count stays bounded, every key and every past generation reads as
    written; an explicit compact then merges all into one, and the answers are the same."""
    store = tmp_path / "s"
    init_store(store)
    with Brain.open(store, flush_bytes=1 << 40) as brain:
        brain.addMany(
            {"items": [{"type": "thing", "id": f"k{i}", "data": "x" * 200, "metadata": {"n": i}} for i in range(3000)]}
        )
        assert brain.flush()
        big = brain.manifest["tables"][0]["file"]
    pasts: dict[int, dict[str, object]] = {}
    with Brain.open(store, flush_bytes=2048, compact_at=5) as brain:  # the maintenance thread flushes and compacts
        numbered = brain.state.next_table

        def merged() -> bool:  # a table number spent on a merge: more made since than are held besides the large one
            # read between flushes: one in flight has spent its number and not yet installed its table
            with brain.maintenance.lock:
                return brain.state.next_table - numbered > len(brain.manifest["tables"]) - 1

        # a tiered merge waits for a flush at least as large as the one before it, and how large each flush is
        # depends on when the thread wakes: write on (bounded) until one merge has been seen
        rounds = 0
        while rounds < 40 or (not merged() and rounds < 2000):
            brain.update({"id": f"k{rounds}", "metadata": {"n": -rounds}})
            brain.add({"type": "thing", "id": f"new{rounds}", "metadata": {"round": rounds}})
            if rounds % 10 == 9 and rounds < 100:
                pasts[brain.head] = {row["key"]: row["metadata"] for row in brain.at(brain.head).entities()}
            rounds += 1
        deadline = time.monotonic() + 30
        while len(brain.sources.frozen) or len(brain.state.mem) > 2048:  # let the last flushes land
            assert time.monotonic() < deadline
            time.sleep(0.01)
        files = [t["file"] for t in brain.manifest["tables"]]
        assert files[-1] == big and 2 <= len(files) <= 8, files
        assert merged()
        for generation, want in pasts.items():
            assert {row["key"]: row["metadata"] for row in brain.at(generation).entities()} == want
        now = _keys(brain)
        last = rounds - 1
        assert now["k3"] == {"n": -3} and now[f"new{last}"] == {"round": last} and len(now) == 3000 + rounds
        assert brain.compact()
        assert len(brain.manifest["tables"]) == 1 and _keys(brain) == now
        for generation, want in pasts.items():
            assert {row["key"]: row["metadata"] for row in brain.at(generation).entities()} == want
    with Brain.attach(store) as brain:
        assert _keys(brain) == now
