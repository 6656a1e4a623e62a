"""Ranked legs of find, pure-Python twin of ``ranking.pyx``: BM25 over word postings, and the first n of a ranked list.

find's text leg scores every entity holding a query word; a fusion ranks each leg by score with ties on id; the
page is the first ``offset + limit`` of an order. At 100,000 rows with a word in 8% of them that is 8,000 hits a
word, and doing it with a dict a hit and a full sort took most of a hybrid find's time (issue 35). Here:

- ``bm25(postings, idfs, lengths, average, allowed, k1, b)``: for each word, in order, its postings (``(dense ints
  ascending, term frequencies)``, u64 and u32 arrays: brainy/index/projections.py's ``word_arrays``) scored
  ``idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * length / average))``, the length read from ``lengths`` (an array
  indexed by dense int, or a mapping; 0 past the array or when absent), only the dense ints the sorted posting list
  ``allowed`` holds (None: all); a dense int's score is the sum of its words' contributions in word order. Answers
  ``(dense, scores, runs)``: the dense ints ascending (u64 array), their scores (f64 array), and each word's dense
  ints ascending (what ``textMatches`` says of a hit). The doubles are the ones the same expression gives in Python.
- ``first(dense, scores, n, hi, lo)``: the positions of the first ``n`` entries in rank order, in that order. Rank
  order is the highest score first, ties on the id key ``(hi[d], lo[d])`` ascending (``hi`` and ``lo`` are u64
  arrays indexed by dense int: brainy/index/projections.py's ``IdKeys``), then on position.
- ``ranks(dense, scores, which, hi, lo)``: the 1-based ranks in that order of the entries at positions ``which``.

Scores are finite (a NaN's place is unspecified). Both twins give the same answers (``tests/test_ranking.py``).
This one sorts with numpy (``lexsort``) where the compiled one keeps a bounded heap.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

__all__ = ["bm25", "first", "ranks"]


def _term_run(
    word: tuple[Any, Any], idf: float, lengths: Any, average: float, allowed: Any, k1: float, b: float
) -> tuple[np.ndarray, np.ndarray]:
    dense_in, tf_in = word
    dense_all = np.ascontiguousarray(dense_in, dtype=np.uint64)
    tf_all = np.ascontiguousarray(tf_in, dtype=np.uint32)
    if len(tf_all) != len(dense_all):
        raise ValueError("a word's postings need a term frequency a dense int")
    in_array = isinstance(lengths, np.ndarray)
    by_dense = np.ascontiguousarray(lengths, dtype=np.uint32) if in_array else None
    dense: list[int] = []
    score: list[float] = []
    for d, tf in zip(dense_all.tolist(), tf_all.tolist()):
        if allowed is not None and not _holds(allowed, d):
            continue
        if by_dense is not None:
            length = int(by_dense[d]) if d < len(by_dense) else 0
        else:
            length = lengths.get(d, 0)
        dense.append(d)
        # query.py's expression, term for term (the compiled twin's term_score)
        score.append(idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * length / average)))
    return np.array(dense, dtype=np.uint64), np.array(score, dtype=np.float64)


def _holds(allowed: np.ndarray, d: int) -> bool:
    i = int(np.searchsorted(allowed, np.uint64(d)))
    return i < len(allowed) and int(allowed[i]) == d


def bm25(
    postings: Sequence[tuple[Any, Any]],
    idfs: Sequence[float],
    lengths: np.ndarray | Mapping[int, int],
    average: float,
    allowed: Any = None,
    k1: float = 1.2,
    b: float = 0.75,
) -> tuple[np.ndarray, np.ndarray, list[np.ndarray]]:
    """BM25 scores of every entity holding one of the words: (dense ints ascending, scores, each word's dense ints)."""
    if len(idfs) != len(postings):
        raise ValueError("bm25 needs one idf a word")
    gate = (
        None if allowed is None else np.frombuffer(allowed, dtype=np.uint64) if len(allowed) else np.empty(0, np.uint64)
    )
    summed: dict[int, float] = {}
    runs = []
    for word, idf in zip(postings, idfs):
        run_dense, run_score = _term_run(word, float(idf), lengths, average, gate, k1, b)
        runs.append(run_dense)
        for d, s in zip(run_dense.tolist(), run_score.tolist()):
            summed[d] = summed[d] + s if d in summed else s
    dense = np.array(sorted(summed), dtype=np.uint64)
    return dense, np.array([summed[d] for d in dense.tolist()], dtype=np.float64), runs


def _checked(dense: Any, scores: Any, hi: Any, lo: Any, name: str) -> tuple[np.ndarray, ...]:
    d = np.ascontiguousarray(dense, dtype=np.uint64)
    s = np.ascontiguousarray(scores, dtype=np.float64)
    h, lw = np.ascontiguousarray(hi, dtype=np.uint64), np.ascontiguousarray(lo, dtype=np.uint64)
    if len(s) != len(d) or len(h) != len(lw):
        raise ValueError(f"{name} needs a score an entry and a low key a high key")
    return d, s, h, lw


def _order(d: np.ndarray, s: np.ndarray, h: np.ndarray, lw: np.ndarray) -> np.ndarray:
    """Every position in rank order."""
    if len(d) and int(d.max()) >= len(h):
        bad = int(d[d >= len(h)][0])
        raise IndexError(f"dense int {bad} has no id key (the keys hold {len(h)})")
    at = d.astype(np.intp)
    # lexsort: the last key is the primary one; -s is exact, and 0.0 and -0.0 tie as the compiled twin's == has them
    return np.lexsort((np.arange(len(d)), lw[at], h[at], -s))


def first(dense: Any, scores: Any, n: int, hi: Any, lo: Any) -> np.ndarray:
    """The positions of the first ``n`` entries in rank order (the highest score first, ties on the id key ``(hi[d],
    lo[d])`` ascending, then on position), in that order."""
    d, s, h, lw = _checked(dense, scores, hi, lo, "first")
    if n < 0:
        raise ValueError("first needs n >= 0")
    if min(n, len(d)) == 0:
        return np.empty(0, dtype=np.intp)
    return _order(d, s, h, lw)[:n].astype(np.intp)


def ranks(dense: Any, scores: Any, which: Any, hi: Any, lo: Any) -> np.ndarray:
    """The 1-based ranks, in :func:`first`'s order over every entry, of the entries at positions ``which``."""
    d, s, h, lw = _checked(dense, scores, hi, lo, "ranks")
    w = np.ascontiguousarray(which, dtype=np.intp)
    for i in w.tolist():
        if not 0 <= i < len(d):
            raise IndexError(f"ranks: position {i} is not an entry's (there are {len(d)})")
    if not len(w):
        return np.empty(0, dtype=np.int64)
    rank = np.empty(len(d), dtype=np.int64)
    rank[_order(d, s, h, lw)] = np.arange(1, len(d) + 1)
    return rank[w]
