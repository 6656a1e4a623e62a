# Types for the compiled packer (wirepack.pyx); the pure twin wirepack_py.py has the same surface.
from typing import Any

__all__ = ["pack"]

def pack(document: Any) -> bytes: ...
