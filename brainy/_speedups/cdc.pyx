# cython: language_level=3
"""Content-defined chunking (docs/store-format.md, "Blobs"), compiled: the twin of ``cdc_py.py``.

The same gear table (taken from the pure twin, so the two can never disagree on it), the same
cuts; the byte loop runs in C over the caller's buffer without a copy.
"""

from libc.stdint cimport uint8_t, uint64_t

from brainy._speedups import cdc_py as _pure

MIN_SIZE = _pure.MIN_SIZE
AVG_SIZE = _pure.AVG_SIZE
MAX_SIZE = _pure.MAX_SIZE
MASK_S = _pure.MASK_S
MASK_L = _pure.MASK_L
GEAR = _pure.GEAR

cdef uint64_t _gear[256]
for _i in range(256):
    _gear[_i] = GEAR[_i]
cdef Py_ssize_t _MIN = MIN_SIZE, _AVG = AVG_SIZE, _MAX = MAX_SIZE
cdef uint64_t _MASK_S = MASK_S, _MASK_L = MASK_L

cdef Py_ssize_t _cut(const uint8_t[::1] view, Py_ssize_t start) noexcept nogil:
    cdef Py_ssize_t n = view.shape[0]
    cdef Py_ssize_t end, normal, i
    cdef uint64_t fp = 0
    if n - start <= _MIN:
        return n
    end = n if n < start + _MAX else start + _MAX
    normal = end if end < start + _AVG else start + _AVG
    i = start + _MIN
    while i < normal:
        fp = (fp << 1) + _gear[view[i]]
        i += 1
        if not (fp & _MASK_S):
            return i
    while i < end:
        fp = (fp << 1) + _gear[view[i]]
        i += 1
        if not (fp & _MASK_L):
            return i
    return end


def cut(data, Py_ssize_t start=0):
    """The end of the chunk that starts at ``start``."""
    cdef const uint8_t[::1] view = memoryview(data).cast("B")
    return _cut(view, start)


def cuts(data, Py_ssize_t start=0):
    """The end offset of every chunk of ``data[start:]``, in order."""
    cdef const uint8_t[::1] view = memoryview(data).cast("B")
    cdef Py_ssize_t n = view.shape[0]
    out = []
    while start < n:
        with nogil:
            start = _cut(view, start)
        out.append(start)
    return out
