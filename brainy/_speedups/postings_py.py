"""Posting lists, pure-Python twin of ``postings.pyx``: intersection, union, difference, membership.

A *posting list* is a sorted, duplicate-free run of dense ints (the engine's row handles, never
negative) held as ``array.array('Q')``: unsigned 64-bit, 8 bytes an element. Every function takes
any C-contiguous one-dimensional buffer of unsigned 8-byte integers (format ``'Q'``, or ``'L'``
where a C long is 8 bytes), so an ``array('Q')``, a ``memoryview`` of one, or a read-only
``memoryview(bytes).cast('Q')`` all do; anything else is a ``TypeError``. Inputs are *trusted* to be
sorted and duplicate-free (checking would cost the linear pass galloping exists to avoid); on other
input the answers are unspecified but memory-safe. :func:`valid` checks one when that is wanted.

Every answer is a new ``array('Q')``, sorted and duplicate-free, never an input itself. Both twins
have the same names and give byte-identical answers (``tests/test_postings.py`` runs against both):

- ``intersect(a, b)``: the shorter list is searched for in the longer one by galloping
  (exponential then binary search, each search starting where the last ended) when the longer is
  more than :data:`GALLOP_RATIO` times the shorter; otherwise the two are merged linearly.
- ``intersect_many(lists)``: shortest first, stopping as soon as the answer is empty. At least one
  list is needed (the intersection of none is everything, which no array holds).
- ``union(a, b)``; ``union_many(lists)``: merged pairwise in rounds (1+2, 3+4, ... then again),
  which is O(N log k) for k lists holding N ints in all, like a heap, with sequential memory access
  and no per-element heap work. No lists is the empty list.
- ``difference(a, b)``: what ``a`` holds and ``b`` does not, galloping in ``b`` when it is skewed.
- ``contains(a, x)``: binary search; any integer ``x`` (a negative one, or one past 64 bits, is in
  no posting list).

This twin reaches the same answers with the tools pure Python has that run in C: ``bisect`` for
the galloping searches, ``set`` for the balanced merges.
"""

from __future__ import annotations

import operator
from array import array
from bisect import bisect_left
from collections.abc import Iterable
from typing import Any

__all__ = [
    "GALLOP_RATIO",
    "TYPECODE",
    "contains",
    "difference",
    "intersect",
    "intersect_many",
    "union",
    "union_many",
    "valid",
]

TYPECODE = "Q"
#: Gallop when the longer list is more than this many times the shorter one.
GALLOP_RATIO = 8
_FORMATS = ("Q", "L") if array("L").itemsize == 8 else ("Q",)
_U64_MAX = (1 << 64) - 1


def _view(obj: Any) -> memoryview:
    """The posting list ``obj`` as a memoryview of unsigned 64-bit ints, or TypeError (the same
    checks, in the same order, with the same message as postings.pyx's ``acquire``)."""
    try:
        view = memoryview(obj)
    except TypeError:
        view = None
    if view is None or view.ndim != 1 or view.itemsize != 8 or view.format not in _FORMATS or not view.c_contiguous:
        raise TypeError(
            f"a posting list is a C-contiguous one-dimensional buffer of unsigned 64-bit "
            f"ints (array('Q')), got {type(obj).__name__}"
        )
    return view


def _copy(view: memoryview) -> array:
    out = array(TYPECODE)
    out.frombytes(view.cast("B"))
    return out


def valid(a: Any) -> bool:
    """Whether ``a`` is sorted strictly ascending (so duplicate-free): a well-formed posting list."""
    view = _view(a)
    return all(view[i] < view[i + 1] for i in range(len(view) - 1))


def contains(a: Any, x: int) -> bool:
    """Whether the posting list ``a`` holds the integer ``x``."""
    view = _view(a)
    x = operator.index(x)
    if x < 0 or x > _U64_MAX:
        return False
    i = bisect_left(view, x)
    return i < len(view) and view[i] == x


def _skewed(short: int, long: int) -> bool:
    return long > GALLOP_RATIO * short


def _gallop_keep(short: memoryview, long: memoryview, common: bool) -> array:
    """The values of ``short`` that ``long`` holds (common) or does not, each looked up by a
    binary search starting where the last one ended (postings.pxd's gallop_keep)."""
    out = array(TYPECODE)
    n, j = len(long), 0
    for x in short:
        j = bisect_left(long, x, j)
        found = j < n and long[j] == x
        if found == common:
            out.append(x)
        j += found
    return out


def intersect(a: Any, b: Any) -> array:
    """The ints both posting lists hold."""
    va, vb = _view(a), _view(b)
    if len(va) > len(vb):
        va, vb = vb, va
    if not len(va):
        return array(TYPECODE)
    if _skewed(len(va), len(vb)):
        return _gallop_keep(va, vb, True)
    return array(TYPECODE, sorted(set(va).intersection(vb)))


def intersect_many(lists: Iterable[Any]) -> array:
    """The ints every posting list holds (at least one list)."""
    views = sorted((_view(x) for x in lists), key=len)
    if not views:
        raise ValueError("intersect_many needs at least one posting list")
    out = _copy(views[0])
    for view in views[1:]:
        if not out:
            break
        out = intersect(out, view)
    return out


def union(a: Any, b: Any) -> array:
    """The ints either posting list holds."""
    va, vb = _view(a), _view(b)
    return array(TYPECODE, sorted(set(va).union(vb)))


def union_many(lists: Iterable[Any]) -> array:
    """The ints any posting list holds (no lists: none)."""
    views = [_view(x) for x in lists]
    merged: set[int] = set()
    for view in views:
        merged.update(view)
    return array(TYPECODE, sorted(merged))


def difference(a: Any, b: Any) -> array:
    """The ints posting list ``a`` holds and ``b`` does not."""
    va, vb = _view(a), _view(b)
    if not len(va) or not len(vb):
        return _copy(va)
    if _skewed(len(va), len(vb)):
        return _gallop_keep(va, vb, False)
    drop = set(vb)
    return array(TYPECODE, (x for x in va if x not in drop))
