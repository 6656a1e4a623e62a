# Types for the compiled batch adds (addrow.pyx); the pure twin addrow_py.py has the same surface.
from typing import Any

__all__ = ["add_minted", "pack_column"]

def add_minted(
    items: list[Any], start: int, staged: tuple[Any, ...], plan: tuple[Any, ...], ids: list[str]
) -> tuple[int, int]: ...
def pack_column(column: dict[int, Any], keys: list[int], lo: int, hi: int, base: int) -> tuple[bytes, bytes] | None: ...
