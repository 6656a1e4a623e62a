# Types for the compiled vector packer (vecpack.pyx); the pure twin vecpack_py.py has the same surface.
from typing import Any

__all__ = ["code_bounds", "pack", "quantise"]

def pack(value: Any, dimensions: int) -> bytes: ...
def code_bounds(
    codes: Any, query: Any, scales: Any, step: float, per_scale: float, constant: float, out: Any
) -> None: ...
def quantise(vectors: Any, codes: Any, scales: Any) -> None: ...
