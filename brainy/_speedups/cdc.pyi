# Types for the compiled chunker (cdc.pyx); the pure twin cdc_py.py has the same surface.
from typing import Final

from typing_extensions import Buffer

__all__ = ["AVG_SIZE", "GEAR", "MASK_L", "MASK_S", "MAX_SIZE", "MIN_SIZE", "cut", "cuts"]

MIN_SIZE: Final[int]
AVG_SIZE: Final[int]
MAX_SIZE: Final[int]
MASK_S: Final[int]
MASK_L: Final[int]
GEAR: Final[tuple[int, ...]]

def cut(data: Buffer, start: int = 0) -> int: ...
def cuts(data: Buffer, start: int = 0) -> list[int]: ...
