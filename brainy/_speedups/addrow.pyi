# Types for the compiled batch adds (addrow.pyx); the pure twin addrow_py.py has the same surface.
from typing import Any

__all__ = ["add_minted"]

def add_minted(
    items: list[Any], start: int, staged: tuple[Any, ...], plan: tuple[Any, ...], ids: list[str]
) -> tuple[int, int]: ...
