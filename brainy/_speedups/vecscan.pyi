# Types for the compiled vector walk of a MessagePack body (vecscan.pyx); the pure twin vecscan_py.py has the same surface.
__all__ = ["json_vectors", "msgpack_vectors", "place"]

from typing import Any

def msgpack_vectors(
    body: bytes | bytearray | memoryview, items: bool
) -> tuple[bytes, list[tuple[int, bytes]]] | None: ...
def json_vectors(body: bytes | bytearray | memoryview, items: bool) -> tuple[bytes, list[tuple[int, bytes]]] | None: ...
def place(document: Any, found: list[tuple[int, bytes]]) -> None: ...
