# Types for the compiled ranked legs (ranking.pyx); the pure twin ranking_py.py has the same surface.
from collections.abc import Mapping, Sequence

import numpy as np
from typing_extensions import Buffer

__all__ = ["bm25", "first", "ranks"]

def bm25(
    postings: Sequence[tuple[np.ndarray, np.ndarray]],
    idfs: Sequence[float],
    lengths: np.ndarray | Mapping[int, int],
    average: float,
    allowed: Buffer | None = None,
    k1: float = 1.2,
    b: float = 0.75,
) -> tuple[np.ndarray, np.ndarray, list[np.ndarray]]: ...
def first(dense: np.ndarray, scores: np.ndarray, n: int, hi: np.ndarray, lo: np.ndarray) -> np.ndarray: ...
def ranks(dense: np.ndarray, scores: np.ndarray, which: np.ndarray, hi: np.ndarray, lo: np.ndarray) -> np.ndarray: ...
