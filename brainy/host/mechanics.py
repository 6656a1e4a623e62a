"""The engine mechanics doors (DOORS 5.3) as the serving process answers them: the brain's own account
(``brainy.doors.mechanics``) plus what the pool knows of its residency.

Each is a HOST function ``fn(call)`` (the residency is the process's, not the store's). The ones that
read or write every file or row (``diagnostics`` with ``deep``, ``repair``, ``snapshot``, ``warm``) run
on the default executor, off the event loop; the others answer at once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from brainy.doors import mechanics as M
from brainy.doors.registry import HOST, door


def _off_loop(work: Callable[[], dict[str, Any]]) -> Awaitable[dict[str, Any]]:
    return asyncio.get_running_loop().run_in_executor(None, work)


def _with_residency(c: Any, answer: dict[str, Any]) -> dict[str, Any]:
    answer["residency"] = c.brains.residency(c.brain)
    return answer


@door("diagnostics", HOST)
def _diagnostics(c: Any) -> dict[str, Any] | Awaitable[dict[str, Any]]:
    brain, deep = c.brains.resolve(c.brain, False), c.document["deep"]
    if not deep:
        return _with_residency(c, M.diagnostics(brain, False))

    async def deeply() -> dict[str, Any]:
        return _with_residency(c, await _off_loop(lambda: M.diagnostics(brain, True)))

    return deeply()


@door("repair", HOST)
def _repair(c: Any) -> Awaitable[dict[str, Any]]:
    brain, a = c.brains.resolve(c.brain, True), c.document  # a writer's door: BRAINY_WRITER_LOCKED otherwise
    return _off_loop(lambda: M.repair(brain, a.get("projections"), a["embedMissing"], a["dryRun"]))


@door("snapshot", HOST)
def _snapshot(c: Any) -> Awaitable[dict[str, Any]]:
    brain = c.brains.resolve(c.brain, False)
    return _off_loop(lambda: M.snapshot(brain))


@door("warm", HOST)
def _warm(c: Any) -> Awaitable[dict[str, Any]]:
    brain = c.brains.resolve(c.brain, False)
    return _off_loop(lambda: M.warm(brain, c.document.get("projections")))


@door("stats", HOST)
def _stats(c: Any) -> dict[str, Any]:
    return _with_residency(c, M.stats(c.brains.resolve(c.brain, False)))
