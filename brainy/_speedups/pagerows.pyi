# Types for the compiled page rows (pagerows.pyx); the pure twin pagerows_py.py has the same surface.
from collections import OrderedDict
from typing import Any

__all__ = ["cached", "hits_json", "plain_hits"]

def cached(
    keys: list[bytes],
    found: dict[bytes, tuple[int, int]],
    entries: OrderedDict,
    at: int,
    serial: int,
    include_vector: bool,
    include_data: bool,
) -> tuple[list[Any], list[int]]: ...
def plain_hits(ids: list[str], entities: list[Any]) -> list[dict[str, Any]]: ...
def hits_json(hits: list[Any]) -> bytes | None: ...
