"""The id minter (brainy/_speedups/mint*): UUIDv7s in minting order, a 12-bit counter within a millisecond
(RFC 9562 6.2, method 1), both twins held to the same law."""

from __future__ import annotations

import os
import threading
import uuid


def _fields(raw: bytes) -> tuple[int, int, int]:
    """(unix_ts_ms, counter, the 62 random bits) of an id."""
    value = int.from_bytes(raw, "big")
    return value >> 80, (value >> 64) & 0xFFF, value & ((1 << 62) - 1)


def test_an_id_is_a_version_7_uuid_whose_text_is_its_bytes(mint_twin):
    for _ in range(500):
        text, raw = mint_twin.mint()
        parsed = uuid.UUID(text)
        assert str(parsed) == text and parsed.bytes == raw
        assert parsed.version == 7 and parsed.variant == uuid.RFC_4122


def test_ids_of_one_millisecond_count_up_from_a_random_start_and_keep_the_millisecond(mint_twin):
    """Within a millisecond the counter counts up one an id from a start below 2,048, the millisecond field stays
    the clock's (it ran ahead one millisecond an id before), and the random bits differ."""
    now = 4_000_000_000_000
    minted = [mint_twin.mint(now)[1] for _ in range(1_000)]
    fields = [_fields(raw) for raw in minted]
    assert {ms for ms, _, _ in fields} == {now}
    first = fields[0][1]
    assert first < 2048 and [c for _, c, _ in fields] == list(range(first, first + 1_000))
    assert len({r for _, _, r in fields}) == 1_000
    later = _fields(mint_twin.mint(now + 5)[1])
    assert later[0] == now + 5 and later[1] < 2048  # a new millisecond starts a new counter


def test_a_millisecond_past_its_counter_and_a_clock_that_steps_back_still_mint_in_order(mint_twin):
    """Past 4,096 ids in one millisecond the next id takes the following one; a clock read earlier than the last
    id's millisecond counts on from it: every id sorts after those minted before it."""
    now = 4_100_000_000_000
    minted = [mint_twin.mint(now)[1] for _ in range(5_000)]
    minted += [mint_twin.mint(now - 1_000)[1] for _ in range(100)]  # the clock stepped back
    assert minted == sorted(minted) and len(set(minted)) == len(minted)
    assert {_fields(raw)[0] for raw in minted} <= {now, now + 1, now + 2}
    assert _fields(minted[-1])[0] > now  # the counter ran out: the millisecond moved on once


def test_ids_minted_from_many_threads_are_all_distinct(mint_twin):
    out: list[list[bytes]] = [[] for _ in range(8)]

    def run(i: int) -> None:
        out[i] = [mint_twin.mint()[1] for _ in range(2_000)]

    threads = [threading.Thread(target=run, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    every = [raw for chunk in out for raw in chunk]
    assert len(set(every)) == len(every) == 16_000
    assert all(chunk == sorted(chunk) for chunk in out)  # each thread's ids in its own minting order


def test_a_forked_child_mints_from_random_bytes_of_its_own(mint_twin):
    """A child forked after its parent fetched random bytes ahead mints from new ones: the two never agree."""
    now = 4_200_000_000_000
    mint_twin.mint(now)  # the parent holds bytes ahead
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child
        os.close(read)
        os.write(write, b"".join(mint_twin.mint(now + 10)[1] for _ in range(50)))
        os._exit(0)
    os.close(write)
    child = b""
    while chunk := os.read(read, 4096):
        child += chunk
    os.close(read)
    os.waitpid(pid, 0)
    parent = b"".join(mint_twin.mint(now + 10)[1] for _ in range(50))
    randoms = {_fields(child[i : i + 16])[2] for i in range(0, len(child), 16)}
    assert len(child) == 800 and not randoms & {_fields(parent[i : i + 16])[2] for i in range(0, 800, 16)}
