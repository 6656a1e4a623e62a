"""Process-wide thread pools, each made on first use and kept for the life of the process, and the priority of
the threads that work behind the requests.

Long-lived rather than a thread per job: a fresh thread per build left the allocator's per-thread arenas
fragmented (9 to 32 KB of resident memory kept per admission, measured over 500 admissions), against none
for builds on one thread.
"""

from __future__ import annotations

import contextlib
import os
import threading
from concurrent.futures import ThreadPoolExecutor


class LongLived:
    """``pool()`` is the one pool of ``workers`` threads named ``name``, made by the first call."""

    def __init__(self, workers: int, name: str) -> None:
        self._workers, self._name = workers, name
        self._pool: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()

    def __call__(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self._workers, thread_name_prefix=self._name)
            return self._pool


def behind_the_requests(nice: int, idle: bool = False) -> None:
    """Run the calling thread at ``nice`` (never above the priority it runs at now): work no request waits for
    yields the core to the ones that do, as a database's background flushes and compactions do. ``idle``: behind
    the flush too (Linux's SCHED_IDLE, weighted below nice 19), for work nothing waits for at all. Not Linux, or
    not allowed: it stays as it is."""
    try:
        me = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, me, max(nice, os.getpriority(os.PRIO_PROCESS, me)))
        if idle:
            os.sched_setscheduler(me, os.SCHED_IDLE, os.sched_param(0))
    except (AttributeError, OSError):
        pass


def level_with_the_flush(native_id: int) -> None:
    """Take the thread ``native_id`` out of SCHED_IDLE (``behind_the_requests(idle=True)``), its nice kept: for work
    something has come to wait for after all (a close waiting for the lock it holds), which below every nice level
    could wait for as long as the core stays busy. Not Linux, not allowed, or the thread gone: nothing changes."""
    with contextlib.suppress(AttributeError, OSError):
        os.sched_setscheduler(native_id, os.SCHED_OTHER, os.sched_param(0))
