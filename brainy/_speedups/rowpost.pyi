# Types for the compiled row poster (rowpost.pyx); the pure twin rowpost_py.py has the same surface.
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
) -> None: ...
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
) -> bool: ...
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
) -> list[dict[str, Any]]: ...
