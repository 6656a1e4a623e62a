# Types for the compiled shortest decimals of a float32 vector (vecdecimal.pyx); the pure twin vecdecimal_py.py has the same surface.
__all__ = ["shortest"]

def shortest(blob: bytes | bytearray | memoryview) -> list[float]: ...
