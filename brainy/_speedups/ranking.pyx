# Ranked legs of find, compiled twin of ranking_py.py: BM25 over word postings, and the first n of a ranked
# list in score order with ties on id, without sorting the list.
#
# bm25    one pass a word over its postings (arrays: dense ints ascending, term frequencies): each hit's length
#         read from an array indexed by dense int (or a mapping), its contribution computed with the expression
#         and the operation order of the Python it replaced (so the same doubles), then the words' runs merged
#         one after another, summed in word order
# first   a bounded heap of n over one pass: an entry is compared by score, and by its id key only on a tie
# ranks   the entries asked about sorted, then one pass placing every entry among them by binary search (an
#         entry's id key read once, and only when its score ties one of theirs)
#
# Same names, same errors, the same answers as the pure twin; tests/test_ranking.py runs against both.

cimport cython
from cpython.dict cimport PyDict_GetItemWithError
from cpython.long cimport PyLong_AsLong, PyLong_FromUnsignedLongLong
from cpython.object cimport PyObject
from libc.stdint cimport int64_t, uint32_t, uint64_t

from brainy._speedups.postings cimport lower_bound  # inline: no import of postings at run time

import numpy as np

__all__ = ["bm25", "first", "ranks"]


cdef class Allowed:
    # A sorted posting list asked about in mostly ascending order: each search starts where the last ended.
    cdef const uint64_t* items
    cdef Py_ssize_t n, at
    cdef uint64_t last
    cdef object keep  # the array the items point into

    def __cinit__(self, object posting):
        items = np.frombuffer(posting, dtype=np.uint64) if len(posting) else EMPTY
        cdef const uint64_t[::1] view = items
        self.keep = items
        self.n = len(posting)
        self.items = &view[0]
        self.at = 0
        self.last = 0

    cdef inline bint holds(self, uint64_t x) noexcept:
        if x < self.last:
            self.at = 0
        self.last = x
        self.at = lower_bound(self.items, self.at, self.n, x)
        return self.at < self.n and self.items[self.at] == x


EMPTY = np.zeros(1, dtype=np.uint64)


@cython.cdivision(True)  # the divisors are positive: average is never 0, tf at least 1
cdef inline double term_score(double idf, double tf, double length, double average, double k1, double b) noexcept nogil:
    # query.py's expression, term for term: idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * length / average))
    return idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * length / average))


cdef tuple term_run(object word, double idf, object lengths, double average, Allowed allowed, double k1, double b):
    # One word's hits (those ``allowed`` holds), in its postings' order (dense ints ascending), and their scores.
    cdef object dense_in, tf_in
    dense_in, tf_in = word
    cdef const uint64_t[::1] dense = np.ascontiguousarray(dense_in, dtype=np.uint64)
    cdef const uint32_t[::1] tf = np.ascontiguousarray(tf_in, dtype=np.uint32)
    cdef Py_ssize_t n = dense.shape[0], i, k = 0, nl = 0
    if tf.shape[0] != n:
        raise ValueError("a word's postings need a term frequency a dense int")
    cdef const uint32_t[::1] by_dense
    cdef bint in_array = isinstance(lengths, np.ndarray)
    if in_array:
        by_dense = np.ascontiguousarray(lengths, dtype=np.uint32)
        nl = by_dense.shape[0]
    dense_out = np.empty(n, dtype=np.uint64)
    score_out = np.empty(n, dtype=np.float64)
    cdef uint64_t[::1] od = dense_out
    cdef double[::1] os = score_out
    cdef uint64_t d
    cdef long length
    for i in range(n):
        d = dense[i]
        if allowed is not None and not allowed.holds(d):
            continue
        if in_array:
            length = by_dense[d] if d < <uint64_t>nl else 0
        else:
            length = length_of(lengths, d)
        od[k] = d
        os[k] = term_score(idf, <double>tf[i], <double>length, average, k1, b)
        k += 1
    return dense_out[:k], score_out[:k]


cdef long length_of(object lengths, uint64_t d) except? -1:
    # A word count out of a mapping (0 when absent), as ``lengths.get(d, 0)``.
    cdef PyObject* found
    key = PyLong_FromUnsignedLongLong(d)
    if type(lengths) is dict:
        found = PyDict_GetItemWithError(lengths, key)
        if found == NULL:
            return 0
        return PyLong_AsLong(<object>found)
    return PyLong_AsLong(lengths.get(key, 0))


cdef tuple merge_add(object a_dense, object a_score, object b_dense, object b_score):
    # Two runs' union, ascending; a dense int both hold gets a's score plus b's (a holds the earlier words).
    cdef const uint64_t[::1] ad = a_dense
    cdef const double[::1] ascore = a_score
    cdef const uint64_t[::1] bd = b_dense
    cdef const double[::1] bscore = b_score
    cdef Py_ssize_t na = ad.shape[0], nb = bd.shape[0], i = 0, j = 0, k = 0
    dense_out = np.empty(na + nb, dtype=np.uint64)
    score_out = np.empty(na + nb, dtype=np.float64)
    cdef uint64_t[::1] od = dense_out
    cdef double[::1] os = score_out
    with nogil:
        while i < na and j < nb:
            if ad[i] < bd[j]:
                od[k] = ad[i]
                os[k] = ascore[i]
                i += 1
            elif bd[j] < ad[i]:
                od[k] = bd[j]
                os[k] = bscore[j]
                j += 1
            else:
                od[k] = ad[i]
                os[k] = ascore[i] + bscore[j]
                i += 1
                j += 1
            k += 1
        while i < na:
            od[k] = ad[i]
            os[k] = ascore[i]
            i += 1
            k += 1
        while j < nb:
            od[k] = bd[j]
            os[k] = bscore[j]
            j += 1
            k += 1
    return dense_out[:k], score_out[:k]


def bm25(postings, idfs, lengths, double average, allowed=None, double k1=1.2, double b=0.75):
    """BM25 scores of every entity holding one of the words: (dense ints ascending, scores, each word's dense ints).

    ``postings``: a word's postings each, ``(dense ints ascending, term frequencies)`` (u64, u32 arrays), ``idfs``
    their idfs; ``lengths``: each entity's word count, an array indexed by dense int or a mapping (0 past the array,
    or absent); ``allowed``: a sorted posting list of the only entities that may score (None: every one). A score is
    the sum, in word order, of ``idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * length / average))``."""
    cdef Py_ssize_t t, n = len(postings)
    if len(idfs) != n:
        raise ValueError("bm25 needs one idf a word")
    cdef Allowed gate = Allowed(allowed) if allowed is not None else None
    runs = []
    dense = np.empty(0, dtype=np.uint64)
    scores = np.empty(0, dtype=np.float64)
    for t in range(n):
        run_dense, run_score = term_run(postings[t], float(idfs[t]), lengths, average, gate, k1, b)
        runs.append(run_dense)
        if t == 0:
            dense, scores = run_dense, run_score
        else:
            dense, scores = merge_add(dense, scores, run_dense, run_score)
    return dense, scores, runs


cdef inline bint before(Py_ssize_t i, Py_ssize_t j, const double* s, const uint64_t* d, const uint64_t* hi,
                        const uint64_t* lo) noexcept nogil:
    # Whether entry i comes before entry j: the higher score, then the smaller id key (hi, lo), then the index.
    cdef uint64_t a, c
    if s[i] != s[j]:
        return s[i] > s[j]
    a = d[i]
    c = d[j]
    if hi[a] != hi[c]:
        return hi[a] < hi[c]
    if lo[a] != lo[c]:
        return lo[a] < lo[c]
    return i < j


cdef inline void sift_down(Py_ssize_t* heap, Py_ssize_t size, Py_ssize_t at, const double* s, const uint64_t* d,
                           const uint64_t* hi, const uint64_t* lo) noexcept nogil:
    # The heap's root is its last entry in rank order: a parent never comes before a child.
    cdef Py_ssize_t child, x = heap[at]
    while True:
        child = 2 * at + 1
        if child >= size:
            break
        if child + 1 < size and before(heap[child], heap[child + 1], s, d, hi, lo):
            child += 1
        if not before(x, heap[child], s, d, hi, lo):
            break
        heap[at] = heap[child]
        at = child
    heap[at] = x


cdef int check_keys(const uint64_t[::1] dense, Py_ssize_t keys) except -1:
    cdef Py_ssize_t i
    for i in range(dense.shape[0]):
        if dense[i] >= <uint64_t>keys:
            raise IndexError(f"dense int {dense[i]} has no id key (the keys hold {keys})")
    return 0


def first(dense, scores, Py_ssize_t n, hi, lo):
    """The positions of the first ``n`` entries in rank order (the highest score first, ties on the id key ``(hi[d],
    lo[d])`` ascending, then on position), in that order: ``dense`` (u64) and ``scores`` (f64), one each an entry;
    ``hi`` and ``lo`` (u64) indexed by dense int."""
    cdef const uint64_t[::1] d = np.ascontiguousarray(dense, dtype=np.uint64)
    cdef const double[::1] s = np.ascontiguousarray(scores, dtype=np.float64)
    cdef const uint64_t[::1] h = np.ascontiguousarray(hi, dtype=np.uint64)
    cdef const uint64_t[::1] l = np.ascontiguousarray(lo, dtype=np.uint64)
    cdef Py_ssize_t m = d.shape[0], k, size = 0, i, at, parent, x
    if s.shape[0] != m or h.shape[0] != l.shape[0]:
        raise ValueError("first needs a score an entry and a low key a high key")
    if n < 0:
        raise ValueError("first needs n >= 0")
    k = min(n, m)
    out = np.empty(k, dtype=np.intp)
    if k == 0:
        return out
    check_keys(d, h.shape[0])
    cdef Py_ssize_t[::1] heap = out
    cdef Py_ssize_t* hp = &heap[0]
    cdef const double* sp = &s[0]
    cdef const uint64_t* dp = &d[0]
    cdef const uint64_t* hip = &h[0]
    cdef const uint64_t* lop = &l[0]
    with nogil:
        for i in range(m):
            if size < k:  # sift up
                at = size
                size += 1
                while at > 0:
                    parent = (at - 1) >> 1
                    if not before(hp[parent], i, sp, dp, hip, lop):
                        break
                    hp[at] = hp[parent]
                    at = parent
                hp[at] = i
            elif before(i, hp[0], sp, dp, hip, lop):
                hp[0] = i
                sift_down(hp, size, 0, sp, dp, hip, lop)
        while size > 1:  # the last in order leaves the root for the end, one by one
            size -= 1
            x = hp[0]
            hp[0] = hp[size]
            sift_down(hp, size, 0, sp, dp, hip, lop)
            hp[size] = x
    return out


def ranks(dense, scores, which, hi, lo):
    """The 1-based ranks, in :func:`first`'s order over every entry, of the entries at positions ``which``."""
    cdef const uint64_t[::1] d = np.ascontiguousarray(dense, dtype=np.uint64)
    cdef const double[::1] s = np.ascontiguousarray(scores, dtype=np.float64)
    cdef const uint64_t[::1] h = np.ascontiguousarray(hi, dtype=np.uint64)
    cdef const uint64_t[::1] l = np.ascontiguousarray(lo, dtype=np.uint64)
    cdef const Py_ssize_t[::1] w = np.ascontiguousarray(which, dtype=np.intp)
    cdef Py_ssize_t m = d.shape[0], q = w.shape[0], i, j, a, lo_, hi_, mid, x, p
    if s.shape[0] != m or h.shape[0] != l.shape[0]:
        raise ValueError("ranks needs a score an entry and a low key a high key")
    for i in range(q):
        if not 0 <= w[i] < m:
            raise IndexError(f"ranks: position {w[i]} is not an entry's (there are {m})")
    out = np.empty(q, dtype=np.int64)
    if q == 0:
        return out
    check_keys(d, h.shape[0])
    sorted_ = np.empty(q, dtype=np.intp)  # positions into which, in rank order
    ahead_ = np.zeros(q + 1, dtype=np.int64)  # how many entries come before sorted[p] but not sorted[p - 1]
    keys_ = np.empty((4, q), dtype=np.uint64)  # the asked-about entries' score bits, keys and positions, in order
    cdef Py_ssize_t[::1] order = sorted_
    cdef int64_t[::1] ahead = ahead_
    cdef int64_t[::1] got = out
    cdef uint64_t[:, ::1] k = keys_
    cdef const double* sp = &s[0]
    cdef const uint64_t* dp = &d[0]
    cdef const uint64_t* hip = &h[0]
    cdef const uint64_t* lop = &l[0]
    cdef int64_t total = 0
    cdef double sa, top, bottom
    cdef uint64_t ha, la
    cdef bint keyed, comes
    with nogil:
        for i in range(q):  # insertion sort of the few asked about
            x = i
            j = i
            while j > 0 and before(w[x], w[order[j - 1]], sp, dp, hip, lop):
                order[j] = order[j - 1]
                j -= 1
            order[j] = x
        for i in range(q):
            p = w[order[i]]
            k[0, i] = hip[dp[p]]
            k[1, i] = lop[dp[p]]
            k[2, i] = p
        top = sp[w[order[0]]]
        bottom = sp[w[order[q - 1]]]
        for a in range(m):
            # the first asked-about entry that ``a`` comes before: every later one it comes before too
            sa = sp[a]
            if sa > top:
                ahead[0] += 1
                continue
            if sa < bottom:
                continue
            keyed = False
            lo_, hi_ = 0, q
            while lo_ < hi_:
                mid = lo_ + ((hi_ - lo_) >> 1)
                p = w[order[mid]]
                if sa != sp[p]:
                    comes = sa > sp[p]
                else:
                    if not keyed:
                        ha, la, keyed = hip[dp[a]], lop[dp[a]], True
                    if ha != k[0, mid]:
                        comes = ha < k[0, mid]
                    elif la != k[1, mid]:
                        comes = la < k[1, mid]
                    else:
                        comes = <uint64_t>a < k[2, mid]
                if comes:
                    hi_ = mid
                else:
                    lo_ = mid + 1
            ahead[lo_] += 1
        for i in range(q):
            total += ahead[i]
            got[order[i]] = total + 1
    return out
