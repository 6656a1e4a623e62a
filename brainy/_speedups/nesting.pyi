# Types for the compiled nesting walk (nesting.pyx); the pure twin nesting_py.py has the same surface.
from typing import Any

__all__ = ["MAX_LIMIT", "too_deep"]

MAX_LIMIT: int

def too_deep(value: Any, limit: int) -> list[Any] | None: ...
