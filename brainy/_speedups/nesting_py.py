"""How deep a decoded document nests: the pure twin of ``nesting.pyx``.

    level(scalar)    := 0
    level(container) := 1 + the largest level among its members (a dict's values; its keys are never walked)

A container is a list, a dict or a tuple (a decoder's arrays and maps, and what Python code builds).
:func:`too_deep` answers None for a value whose level is at most ``limit``; otherwise the path (dict keys
and list indexes, from the value down) to the first container, in document order, that sits at level
``limit + 1``. It is called on every decoded request, so the common answer (None) touches each member
once and builds nothing; the path is searched for only once a value is known to be too deep.

``limit`` is at most :data:`MAX_LIMIT`: the compiled twin recurses once a level, so the limit bounds its
stack, and no decoder brainy uses reads deeper than 1,024 levels anyway.
"""

from __future__ import annotations

from typing import Any

__all__ = ["MAX_LIMIT", "too_deep"]

MAX_LIMIT = 1024
_CONTAINERS = (list, dict, tuple)


def _check(limit: int) -> None:
    if not 0 <= limit <= MAX_LIMIT:
        raise ValueError(f"limit must be 0 to {MAX_LIMIT}, not {limit}")


def _deeper(value: Any, limit: int) -> bool:
    # Depth first, any order: only whether some container sits past the limit.
    stack = [(value, 1)]
    pop, push = stack.pop, stack.append
    while stack:
        container, level = pop()
        if level > limit:
            return True
        members = container.values() if isinstance(container, dict) else container
        for member in members:
            if isinstance(member, _CONTAINERS):
                push((member, level + 1))
    return False


def _first_path(value: Any, limit: int) -> list[Any]:
    # Pre-order, in document order (children pushed last first), as the compiled twin's recursion visits.
    stack: list[tuple[Any, int, tuple[Any, ...]]] = [(value, 1, ())]
    while stack:
        container, level, path = stack.pop()
        if level > limit:
            return list(path)
        pairs = container.items() if isinstance(container, dict) else enumerate(container)
        children = [(member, level + 1, (*path, key)) for key, member in pairs if isinstance(member, _CONTAINERS)]
        stack.extend(reversed(children))
    raise AssertionError("a value found too deep has a path")  # pragma: no cover


def too_deep(value: Any, limit: int) -> list[Any] | None:
    """None when ``value`` nests at most ``limit`` levels; else the path to the first container past them."""
    _check(limit)
    if not isinstance(value, _CONTAINERS) or not _deeper(value, limit):
        return None
    return _first_path(value, limit)
