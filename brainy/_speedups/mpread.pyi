# Types for the compiled MessagePack reader (mpread.pyx); the pure twin mpread_py.py has the same surface.
__all__ = ["unpack"]

from typing import Any

def unpack(body: bytes | bytearray | memoryview, holes: list[tuple[int, int, Any]], limit: int) -> Any: ...
