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

``post_row(row, dense, reserved, nullable, postings, columns, kind_of, ids, everyone, column_only)`` is a new
row's place in the projections but for its words (brainy/index/projections.py ``Projections._post``): its id
put in ``ids[dense]``, ``dense`` put in ``everyone`` (sorted distinct ints, as a posting), its leaves posted as
``post_leaves`` posts them, and for each name of ``column_only`` ``row[name]`` put in ``columns[name][dense]``
(set, not kept first). It answers whether the row may hold words: False only when its ``data`` is None and its
``metadata`` is None or a ``dict`` whose values are each an ``int``, ``float``, ``bool`` or None, exactly (the
caller then counts no words without looking for them).

``post_rows(rows, reserved, nullable, postings, columns, kind_of, ids, everyone, column_only, lengths)`` is
``post_row`` of each row of ``rows`` (a list of ``dict``) in order, each at its ``row["denseInt"]``, with
``lengths[dense] = 0`` for each row that cannot hold words; it answers the rows that may, in order. The compiled
twin looks up a reserved leaf's posting and column once for a run of rows that hold the same value there (an
``addMany``'s rows share their type, visibility and author), which changes none of what is left.
"""

from __future__ import annotations

import bisect
from array import array
from collections.abc import Callable
from typing import Any

__all__ = ["post_leaves", "post_row", "post_rows"]


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
    else:
        _insert(posting, dense)
    column = columns.get(path)
    if column is None:
        columns[path] = {dense: value}
    elif dense not in column:
        column[dense] = value


def _insert(posting: Any, dense: int) -> None:
    if not posting or posting[-1] < dense:  # new rows mint increasing ints: the common case appends
        posting.append(dense)
        return
    i = bisect.bisect_left(posting, dense)
    if i == len(posting) or posting[i] != dense:
        posting.insert(i, dense)


def post_row(
    row: dict[str, Any],
    dense: int,
    reserved: tuple[str, ...],
    nullable: tuple[str, ...],
    postings: dict[str, dict[tuple[str, Any], array[int]]],
    columns: dict[str, dict[int, Any]],
    kind_of: Callable[[Any], str],
    ids: dict[int, str],
    everyone: Any,
    column_only: tuple[str, ...],
) -> bool:
    """Put a new row in the projections but for its words; whether it may hold words (see the docstring)."""
    ids[dense] = row["id"]
    _insert(everyone, dense)
    post_leaves(row, dense, reserved, nullable, postings, columns, kind_of)
    for name in column_only:
        column = columns.get(name)
        if column is None:
            column = columns[name] = {}
        column[dense] = row[name]
    if row.get("data") is not None:
        return True
    metadata = row.get("metadata")
    if metadata is None:
        return False
    if type(metadata) is not dict:
        return True
    for value in metadata.values():
        kind = type(value)
        if kind is not int and kind is not float and kind is not bool and value is not None:
            return True
    return False


def post_rows(
    rows: list[dict[str, Any]],
    reserved: tuple[str, ...],
    nullable: tuple[str, ...],
    postings: dict[str, dict[tuple[str, Any], array[int]]],
    columns: dict[str, dict[int, Any]],
    kind_of: Callable[[Any], str],
    ids: dict[int, str],
    everyone: Any,
    column_only: tuple[str, ...],
    lengths: dict[int, int],
) -> list[dict[str, Any]]:
    """:func:`post_row` of each of ``rows`` at its dense int; the rows that may hold words (see the docstring)."""
    wordy = []
    for row in rows:
        dense = row["denseInt"]
        if post_row(row, dense, reserved, nullable, postings, columns, kind_of, ids, everyone, column_only):
            wordy.append(row)
        else:
            lengths[dense] = 0
    return wordy
