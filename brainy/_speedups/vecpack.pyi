# Types for the compiled vector packer (vecpack.pyx); the pure twin vecpack_py.py has the same surface.
from typing import Any

__all__ = ["pack"]

def pack(value: Any, dimensions: int) -> bytes: ...
