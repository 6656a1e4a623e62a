"""Wall-clock milliseconds: the unit of every timestamp the store writes (commits, lease heartbeats) and the
memory doors' decay reads."""

from __future__ import annotations

import time


def now_ms() -> int:
    """Milliseconds since the epoch, now."""
    return time.time_ns() // 1_000_000
