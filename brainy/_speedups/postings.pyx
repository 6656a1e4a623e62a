# Posting lists, compiled twin of postings_py.py: sorted, duplicate-free dense ints as array('Q').
#
# intersect        gallop_keep (postings.pxd) when one list is over GALLOP_RATIO times the other,
#                  else merge_keep, a branch-free linear merge
# intersect_many   shortest first, stop once empty
# union            copy_runs of the long list around the short one when skewed, else merge_union
# union_many       pairwise in rounds: O(N log k)
# difference       gallop_keep when a is the short side, copy_runs when b is, else merge_keep
# contains         binary search
#
# Same names, same errors (checked in the same order), byte-identical answers as the pure twin;
# tests/test_postings.py runs against both. The loops run without the GIL.

from cpython cimport array
from cpython.buffer cimport (PyBUF_FULL_RO, PyBuffer_IsContiguous, PyBuffer_Release,
                             PyObject_GetBuffer)
from cpython.number cimport PyNumber_Index
from libc.stdint cimport uint64_t

import array as _array

__all__ = ["GALLOP_RATIO", "TYPECODE", "contains", "difference", "intersect", "intersect_many", "union",
           "union_many", "valid"]

TYPECODE = "Q"
GALLOP_RATIO = GALLOP_RATIO_C

cdef array.array TEMPLATE = _array.array(TYPECODE)
cdef object U64_MAX = (1 << 64) - 1
# 'L' is an unsigned long: a posting list too where that is 8 bytes (as postings_py._FORMATS).
cdef bint LONG_IS_8 = sizeof(unsigned long) == 8


cdef int acquire(object obj, Py_buffer* view) except -1:
    # The same request memoryview() makes, and postings_py._view's checks and message.
    cdef bint ok
    try:
        PyObject_GetBuffer(obj, view, PyBUF_FULL_RO)
    except TypeError:
        ok = False
    else:
        fmt = view.format if view.format != NULL else b"B"
        ok = (view.ndim == 1 and view.itemsize == ITEM_SIZE
              and (fmt == b"Q" or (LONG_IS_8 and fmt == b"L"))
              and PyBuffer_IsContiguous(view, c"C"))
        if not ok:
            PyBuffer_Release(view)
    if not ok:
        raise TypeError(f"a posting list is a C-contiguous one-dimensional buffer of unsigned 64-bit "
                        f"ints (array('Q')), got {type(obj).__name__}")
    return 0


cdef inline const uint64_t* items(Py_buffer* view) noexcept:
    return <const uint64_t*>view.buf


cdef inline Py_ssize_t length(Py_buffer* view) noexcept:
    return view.len // ITEM_SIZE


cdef array.array new_array(Py_ssize_t capacity):
    return array.clone(TEMPLATE, capacity, False)


cdef array.array finish(array.array out, Py_ssize_t n):
    array.resize(out, n)
    return out


cdef array.array copy_of(object obj):
    cdef Py_buffer view
    cdef Py_ssize_t n
    cdef array.array out
    acquire(obj, &view)
    try:
        n = length(&view)
        out = new_array(n)
        copy_items(<uint64_t*>out.data.as_voidptr, items(&view), n)
        return out
    finally:
        PyBuffer_Release(&view)


cdef list checked(object lists):
    # The lists as a list, each one checked before any work (as postings_py checks them all).
    cdef Py_buffer view
    cdef list out = list(lists)
    for obj in out:
        acquire(obj, &view)
        PyBuffer_Release(&view)
    return out


def valid(a):
    """Whether ``a`` is sorted strictly ascending (so duplicate-free): a well-formed posting list."""
    cdef Py_buffer va
    cdef Py_ssize_t i, n
    cdef const uint64_t* p
    cdef bint ok = True
    acquire(a, &va)
    try:
        p, n = items(&va), length(&va)
        with nogil:
            for i in range(n - 1):
                if p[i] >= p[i + 1]:
                    ok = False
                    break
    finally:
        PyBuffer_Release(&va)
    return ok


def contains(a, x):
    """Whether the posting list ``a`` holds the integer ``x``."""
    cdef Py_buffer va
    cdef Py_ssize_t i, n
    cdef uint64_t want
    acquire(a, &va)
    try:
        x = PyNumber_Index(x)
        if x < 0 or x > U64_MAX:
            return False
        want = x
        n = length(&va)
        i = lower_bound(items(&va), 0, n, want)
        return i < n and items(&va)[i] == want
    finally:
        PyBuffer_Release(&va)


cdef array.array combine_views(Py_buffer* va, Py_buffer* vb, int op):
    cdef Py_ssize_t na = length(va), nb = length(vb), k
    cdef const uint64_t* a = items(va)
    cdef const uint64_t* b = items(vb)
    if op != OP_DIFFERENCE and na > nb:  # intersect and union are symmetric: a is the shorter
        a, b, na, nb = b, a, nb, na
    cdef array.array out = new_array(na + nb if op == OP_UNION else na)
    cdef uint64_t* o = <uint64_t*>out.data.as_voidptr
    with nogil:
        if op == OP_INTERSECT:
            k = gallop_keep(a, na, b, nb, o, True) if skewed(na, nb) else merge_keep(a, na, b, nb, o, True)
        elif op == OP_UNION:
            k = copy_runs(b, nb, a, na, o, True) if skewed(na, nb) else merge_union(a, na, b, nb, o)
        elif skewed(na, nb):
            k = gallop_keep(a, na, b, nb, o, False)
        elif skewed(nb, na):
            k = copy_runs(a, na, b, nb, o, False)
        else:
            k = merge_keep(a, na, b, nb, o, False)
    return finish(out, k)


cdef object combine(object a, object b, int op):
    cdef Py_buffer va, vb
    acquire(a, &va)
    try:
        acquire(b, &vb)
        try:
            return combine_views(&va, &vb, op)
        finally:
            PyBuffer_Release(&vb)
    finally:
        PyBuffer_Release(&va)


def intersect(a, b):
    """The ints both posting lists hold."""
    return combine(a, b, OP_INTERSECT)


def union(a, b):
    """The ints either posting list holds."""
    return combine(a, b, OP_UNION)


def difference(a, b):
    """The ints posting list ``a`` holds and ``b`` does not."""
    return combine(a, b, OP_DIFFERENCE)


def intersect_many(lists):
    """The ints every posting list holds (at least one list)."""
    cdef list ordered = checked(lists)
    if not ordered:
        raise ValueError("intersect_many needs at least one posting list")
    ordered.sort(key=_len_of)
    out = copy_of(ordered[0])
    for obj in ordered[1:]:
        if not len(out):
            break
        out = combine(out, obj, OP_INTERSECT)
    return out


def _len_of(obj):
    # The number of postings in a buffer, for ordering lists shortest first.
    cdef Py_buffer view
    acquire(obj, &view)
    n = length(&view)
    PyBuffer_Release(&view)
    return n


def union_many(lists):
    """The ints any posting list holds (no lists: none)."""
    cdef list round_ = checked(lists)
    cdef list merged
    cdef Py_ssize_t i
    if not round_:
        return new_array(0)
    if len(round_) == 1:
        return copy_of(round_[0])
    while len(round_) > 1:  # 1+2, 3+4, ...; an odd one out waits for the next round
        merged = [union(round_[i], round_[i + 1]) for i in range(0, len(round_) - 1, 2)]
        if len(round_) % 2:
            merged.append(round_[len(round_) - 1])
        round_ = merged
    return round_[0]
