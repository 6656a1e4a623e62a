# Types for the compiled vector walk of a MessagePack body (vecscan.pyx); the pure twin vecscan_py.py has the same surface.
__all__ = ["msgpack_vectors"]

def msgpack_vectors(
    body: bytes | bytearray | memoryview, items: bool
) -> tuple[bytes, list[tuple[int, bytes]]] | None: ...
