"""Pure twin of ``rowpost``: a row's leaves posted into the projections' postings and columns.

``post_leaves(row, dense, reserved, nullable, postings, columns, kind_of)`` walks ``row`` as
brainy/index/projections.py ``leaves`` does (each name of ``reserved`` the row holds, in order; a name of
``nullable`` it does not hold as None; then every leaf of its ``metadata``: an object's keys joined by dots, a
list's elements that are neither a list nor an object, under the list's path) and for each ``(path, value)``:

- puts ``dense`` in ``postings[path][(kind_of(value), value)]``, an ``array('Q')`` of sorted distinct ints (made
  when missing; an int already there stays once);
- puts ``value`` in ``columns[path][dense]`` unless that holds one already (a path yielded twice keeps its first).

``kind_of`` is brainy/index/where.py's; the compiled twin answers the exact types ``None``, ``bool``, ``int``,
``float`` and ``str`` itself, with the same kinds. ``dense`` is a dense int, an int from 0 to 2**64 - 1 (the
compiled twin reads it as a u64 first and refuses any other: OverflowError, TypeError). Errors are what the same
steps raise in Python (a ``metadata`` that is no object, a key that is no string).
"""

from __future__ import annotations

import bisect
from array import array
from collections.abc import Callable
from typing import Any

__all__ = ["post_leaves"]


def post_leaves(
    row: dict[str, Any],
    dense: int,
    reserved: tuple[str, ...],
    nullable: tuple[str, ...],
    postings: dict[str, dict[tuple[str, Any], array[int]]],
    columns: dict[str, dict[int, Any]],
    kind_of: Callable[[Any], str],
) -> None:
    """Post ``dense`` under every leaf of ``row`` (see the module's docstring)."""
    for name in reserved:
        if name in row:
            _post(name, row[name], dense, postings, columns, kind_of)
        elif name in nullable:
            _post(name, None, dense, postings, columns, kind_of)
    _walk(row.get("metadata") or {}, "", dense, postings, columns, kind_of)


def _walk(
    node: Any,
    prefix: str,
    dense: int,
    postings: dict[str, dict[tuple[str, Any], array[int]]],
    columns: dict[str, dict[int, Any]],
    kind_of: Callable[[Any], str],
) -> None:
    for key, value in node.items():
        path = prefix + key
        if isinstance(value, dict):
            _walk(value, path + ".", dense, postings, columns, kind_of)
        elif isinstance(value, list):
            for element in value:
                if not isinstance(element, (dict, list)):
                    _post(path, element, dense, postings, columns, kind_of)
        else:
            _post(path, value, dense, postings, columns, kind_of)


def _post(
    path: str,
    value: Any,
    dense: int,
    postings: dict[str, dict[tuple[str, Any], array[int]]],
    columns: dict[str, dict[int, Any]],
    kind_of: Callable[[Any], str],
) -> None:
    key = (kind_of(value), value)
    values = postings.get(path)
    if values is None:
        values = postings[path] = {}
    posting = values.get(key)
    if posting is None:
        values[key] = array("Q", (dense,))
    elif not posting or posting[-1] < dense:  # new rows mint increasing ints: the common case appends
        posting.append(dense)
    else:
        i = bisect.bisect_left(posting, dense)
        if i == len(posting) or posting[i] != dense:
            posting.insert(i, dense)
    column = columns.get(path)
    if column is None:
        columns[path] = {dense: value}
    elif dense not in column:
        column[dense] = value
