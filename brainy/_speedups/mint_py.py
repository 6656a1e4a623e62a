"""Pure twin of ``mint``: new entity ids, UUIDv7s (RFC 9562) in minting order.

``mint(now_ms=None) -> (text, raw)``: a new id's canonical text (as ``str(uuid.UUID(bytes=raw))`` writes it) and
its 16 bytes. ``now_ms`` is the Unix time in milliseconds to mint at (None: the clock's; tests pass one).

The layout (RFC 9562 5.7, with 6.2's method 1): ``unix_ts_ms`` (48 bits) | version 7 (4) | a counter (12, the
``rand_a`` field) | variant 0b10 (2) | 62 random bits. The first id of a millisecond starts the counter at 11
random bits (the 12th clear: 2,048 more ids fit in the millisecond); each later id of the same millisecond counts
up one. When the counter runs out, or the clock reads a millisecond earlier than the last id's, the id takes the
last id's millisecond (plus one when the counter ran out) and counts on. So every id this process mints sorts
after every one it minted before, and the millisecond field runs ahead of the clock only past 2,048 ids in one
millisecond.

The random bytes come from ``os.urandom``, fetched 8 KiB ahead (10 bytes an id, never handed out twice);
``forget()`` drops them (a forked child must not hand out its parent's). Safe to call from any thread.
"""

from __future__ import annotations

import os
import threading
import time

__all__ = ["forget", "mint"]

_CHUNK = 8190  # 819 ids of 10 random bytes
_SEED_SHIFT = 80 - 11  # a millisecond's first counter: the top 11 of an id's 80 random bits
_VARIANT = 0b10 << 62
_RAND_B = (1 << 62) - 1

_lock = threading.Lock()
_last = 0  # the millisecond of the last id minted
_counter = 0  # and its counter
_random = b""
_used = 0


def forget() -> None:
    global _lock, _random, _used
    # in a forked child only this thread runs: a lock another thread of the parent held is made new, not waited on
    _lock, _random, _used = threading.Lock(), b"", 0


os.register_at_fork(after_in_child=forget)  # a forked child must not hand out its parent's bytes again


def mint(now_ms: int | None = None) -> tuple[str, bytes]:
    global _last, _counter, _random, _used
    now = time.time_ns() // 1_000_000 if now_ms is None else now_ms
    with _lock:
        if _used + 10 > len(_random):
            _random, _used = os.urandom(_CHUNK), 0
        bits = int.from_bytes(_random[_used : _used + 10], "big")
        _used += 10
        if now > _last:
            _last, _counter = now, bits >> _SEED_SHIFT
        else:
            _counter += 1
            if _counter > 0xFFF:
                _last, _counter = _last + 1, bits >> _SEED_SHIFT
        ms, counter = _last, _counter
    raw = ((ms << 80) | ((0x7000 | counter) << 64) | _VARIANT | (bits & _RAND_B)).to_bytes(16, "big")
    h = raw.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}", raw
