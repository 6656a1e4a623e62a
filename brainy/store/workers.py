"""Process-wide thread pools, each made on first use and kept for the life of the process, and the priority of
the threads that work behind the requests.

Long-lived rather than a thread per job: a fresh thread per build left the allocator's per-thread arenas
fragmented (9 to 32 KB of resident memory kept per admission, measured over 500 admissions), against none
for builds on one thread.
"""

from __future__ import annotations

import contextlib
import ctypes
import itertools
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path


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


_TEAM = "brainy-idle-"  # the kernel's name (15 bytes at most) of an idle thread and the threads it starts
_teams = itertools.count()


def behind_the_requests(nice: int, idle: bool = False) -> None:
    """Run the calling thread at ``nice`` (never above the priority it runs at now): work no request waits for
    yields the core to the ones that do, as a database's background flushes and compactions do. ``idle``: behind
    the flush too (Linux's SCHED_IDLE, weighted below nice 19), for work nothing waits for at all; the thread gets a
    kernel name of its own, which the threads it starts (faiss's OpenMP team, for a graph add or a k-means) inherit
    with its scheduling, so that :func:`waited_for` finds them. Not Linux, or not allowed: it stays as it is."""
    try:
        me = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, me, max(nice, os.getpriority(os.PRIO_PROCESS, me)))
        if idle:
            with contextlib.suppress(AttributeError, OSError):  # unnamed, only a wait cannot find its team
                _name_me(f"{_TEAM}{next(_teams) % 1000}")
            os.sched_setscheduler(me, os.SCHED_IDLE, os.sched_param(0))
    except (AttributeError, OSError):
        pass


def waited_for(native_id: int) -> None:
    """Something has come to wait for the thread ``native_id`` (a close waiting for the lock it holds, a caller of
    the same work): it and the threads it started leave SCHED_IDLE and take the caller's nice where the process may
    raise a nice (root), or keep their own. Below every nice level, they could wait for as long as the cores stay
    busy; and an OpenMP team left behind holds its master at every barrier. Not Linux, not allowed, or the thread
    gone: nothing changes."""
    mine = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    for tid in _team_of(native_id):
        with contextlib.suppress(AttributeError, OSError):
            os.sched_setscheduler(tid, os.SCHED_OTHER, os.sched_param(0))
        with contextlib.suppress(OSError):
            if os.getpriority(os.PRIO_PROCESS, tid) > mine:  # raised only, never lowered
                os.setpriority(os.PRIO_PROCESS, tid, mine)


def _team_of(native_id: int) -> list[int]:
    """The thread and every thread of the process that carries its idle name (none other has it)."""
    try:
        name = Path(f"/proc/self/task/{native_id}/comm").read_bytes()
    except OSError:
        return [native_id]
    if not name.startswith(_TEAM.encode()):
        return [native_id]
    team = []
    for task in os.listdir("/proc/self/task"):
        with contextlib.suppress(OSError):
            if Path(f"/proc/self/task/{task}/comm").read_bytes() == name:
                team.append(int(task))
    return team or [native_id]


def _name_me(name: str) -> None:
    """Set the calling thread's name in the kernel (prctl PR_SET_NAME), which ``pthread_create`` copies."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(15, name.encode()[:15], 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NAME)")
