# Declarations for postings.pyx, sorted posting lists of dense ints (uint64, array('Q')).
# The hot helpers are inline here, never raise and run without the GIL; the raising paths (buffer
# checks) and the Python-facing functions live out of line in the .pyx.

from libc.stdint cimport uint64_t
from libc.string cimport memcpy


cdef enum:
    GALLOP_RATIO_C = 8     # gallop when the longer list is more than 8 times the shorter
    ITEM_SIZE = 8          # bytes of one posting: a uint64


cdef enum:
    # What combine() (postings.pyx) makes of two lists.
    OP_INTERSECT = 0
    OP_UNION = 1
    OP_DIFFERENCE = 2


cdef inline void copy_items(uint64_t* dst, const uint64_t* src, Py_ssize_t n) noexcept nogil:
    # memcpy of n postings; an empty array's buffer may be NULL, which memcpy must not see.
    if n > 0:
        memcpy(dst, src, n * ITEM_SIZE)


cdef inline bint skewed(Py_ssize_t shorter, Py_ssize_t longer) noexcept nogil:
    return longer > GALLOP_RATIO_C * shorter


cdef inline Py_ssize_t lower_bound(const uint64_t* a, Py_ssize_t lo, Py_ssize_t hi,
                                   uint64_t x) noexcept nogil:
    # The first index in [lo, hi) whose value is >= x, or hi.
    cdef Py_ssize_t mid
    while lo < hi:
        mid = lo + ((hi - lo) >> 1)
        if a[mid] < x:
            lo = mid + 1
        else:
            hi = mid
    return lo


cdef inline Py_ssize_t gallop(const uint64_t* a, Py_ssize_t lo, Py_ssize_t n, uint64_t x) noexcept nogil:
    # The first index in [lo, n) whose value is >= x, or n: probe lo+1, lo+2, lo+4, ... until a
    # value reaches x, then binary search the last step. Cost O(log d) for a distance d, so a run
    # of searches for ascending x across the list costs O(m log(n/m)) in all.
    cdef Py_ssize_t step = 1, hi
    if lo >= n or a[lo] >= x:
        return lo
    while True:                  # invariant: a[lo] < x
        hi = lo + step
        if hi >= n:
            hi = n
            break
        if a[hi] >= x:
            break
        lo = hi
        step <<= 1
    return lower_bound(a, lo + 1, hi, x)


cdef inline Py_ssize_t merge_keep(const uint64_t* a, Py_ssize_t na, const uint64_t* b, Py_ssize_t nb,
                                  uint64_t* out, bint common) noexcept nogil:
    # Branch-free merge keeping a's values that b holds (common, for intersect) or does not (for
    # difference): always write a's head, keep the write only when it counts. k <= i, so the write
    # stays inside out[0 : na]. Called with a constant ``common``, which the compiler folds.
    cdef Py_ssize_t i = 0, j = 0, k = 0
    cdef uint64_t x, y
    while i < na and j < nb:
        x = a[i]
        y = b[j]
        out[k] = x
        k += (x == y) if common else (x < y)
        i += x <= y
        j += y <= x
    if not common:
        copy_items(out + k, a + i, na - i)
        k += na - i
    return k


cdef inline Py_ssize_t gallop_keep(const uint64_t* small, Py_ssize_t ns, const uint64_t* big,
                                   Py_ssize_t nb, uint64_t* out, bint common) noexcept nogil:
    # Look each value of the short list up in the long one, each search starting where the last
    # ended; keep the values found (common) or the ones not found.
    cdef Py_ssize_t i, j = 0, k = 0
    cdef uint64_t x
    for i in range(ns):
        x = small[i]
        j = gallop(big, j, nb, x)
        if j < nb and big[j] == x:
            j += 1
            if common:
                out[k] = x
                k += 1
        elif not common:
            out[k] = x
            k += 1
        elif j == nb:  # nothing left in the long list to find
            break
    return k


cdef inline Py_ssize_t merge_union(const uint64_t* a, Py_ssize_t na, const uint64_t* b,
                                   Py_ssize_t nb, uint64_t* out) noexcept nogil:
    # out holds na + nb; each step writes the smaller head and moves past every head equal to it.
    cdef Py_ssize_t i = 0, j = 0, k = 0
    cdef uint64_t x, y
    while i < na and j < nb:
        x = a[i]
        y = b[j]
        out[k] = x if x <= y else y
        k += 1
        i += x <= y
        j += y <= x
    copy_items(out + k, a + i, na - i)
    k += na - i
    copy_items(out + k, b + j, nb - j)
    return k + nb - j


cdef inline Py_ssize_t copy_runs(const uint64_t* big, Py_ssize_t nb, const uint64_t* small,
                                 Py_ssize_t ns, uint64_t* out, bint insert) noexcept nogil:
    # The long list copied whole run by run between the short list's values, which are inserted
    # (union) or left out where the long list holds them (long minus short).
    cdef Py_ssize_t i, j = 0, p, k = 0
    cdef uint64_t x
    for i in range(ns):
        x = small[i]
        p = gallop(big, j, nb, x)
        copy_items(out + k, big + j, p - j)
        k += p - j
        j = p
        if insert:
            out[k] = x
            k += 1
        if j < nb and big[j] == x:
            j += 1
    copy_items(out + k, big + j, nb - j)
    return k + nb - j


cdef int acquire(object obj, Py_buffer* view) except -1
cdef object combine(object a, object b, int op)
