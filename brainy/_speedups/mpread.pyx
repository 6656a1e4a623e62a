# cython: language_level=3, boundscheck=False, wraparound=False
"""Compiled twin of ``mpread`` (see mpread_py.py for the law): a MessagePack body read to Python objects in one pass,
each hole's value taken where its span stands.

A short ASCII str (a key, a type name) is taken from a cache of 256 read before, each kept interned as msgpack
interns a key: an ``addMany`` body names the same four keys and the same type a row, and msgpack made each of them
a new str and looked it up in the interpreter's interned table (1,700 instructions a row of the 4,700 its read of
the ingest benchmark's body took). A container's length is checked against the bytes left before anything is made
for it, so a forged header cannot ask for a list of four billion members.
"""

from cpython.bytes cimport PyBytes_FromStringAndSize
from cpython.dict cimport PyDict_SetItem
from cpython.list cimport PyList_New, PyList_SET_ITEM
from cpython.ref cimport Py_INCREF
from libc.stdint cimport int8_t, int16_t, int32_t, int64_t, uint64_t

cdef extern from *:
    """
    /* The last short ASCII strs read, by a hash of their bytes: each held (one reference) and interned. */
    #define BRAINY_CACHED 256
    #define BRAINY_CACHE_LONGEST 32
    static PyObject *brainy_strs[BRAINY_CACHED];

    static PyObject *brainy_str(const char *p, Py_ssize_t n) {
        if (n > BRAINY_CACHE_LONGEST)
            return PyUnicode_DecodeUTF8(p, n, NULL);
        uint32_t h = 2166136261u ^ (uint32_t)n;
        for (Py_ssize_t i = 0; i < n; i++)
            h = (h ^ (unsigned char)p[i]) * 16777619u;
        h = (h ^ (h >> 16)) & (BRAINY_CACHED - 1);
        PyObject *held = brainy_strs[h];
        /* every str held is compact ASCII: equal bytes of equal length are the same text */
        if (held != NULL && PyUnicode_GET_LENGTH(held) == n && memcmp(PyUnicode_DATA(held), p, n) == 0) {
            Py_INCREF(held);
            return held;
        }
        PyObject *s = PyUnicode_DecodeUTF8(p, n, NULL);
        if (s == NULL || !PyUnicode_IS_COMPACT_ASCII(s))
            return s;
        PyUnicode_InternInPlace(&s);
        Py_INCREF(s);
        Py_XSETREF(brainy_strs[h], s);
        return s;
    }

    static inline uint64_t brainy_be(const unsigned char *p, int width) {
        uint64_t v = 0;
        for (int i = 0; i < width; i++)
            v = (v << 8) | p[i];
        return v;
    }

    static inline double brainy_f32(uint64_t bits) {
        uint32_t b = (uint32_t)bits;
        float f;
        memcpy(&f, &b, 4);
        return (double)f;
    }

    static inline double brainy_f64(uint64_t bits) {
        double d;
        memcpy(&d, &bits, 8);
        return d;
    }
    """
    object brainy_str(const char *p, Py_ssize_t n)
    uint64_t brainy_be(const unsigned char *p, int width) nogil
    double brainy_f32(uint64_t bits) nogil
    double brainy_f64(uint64_t bits) nogil
    dict _PyDict_NewPresized(Py_ssize_t minused)

__all__ = ["unpack"]


class _Unreadable(Exception):
    """Where the body stops being what this reader reads as msgpack does: ``unpack`` answers None."""


cdef class _Reader:
    cdef const unsigned char *b
    cdef Py_ssize_t n, at, hole_at, next
    cdef list holes
    cdef int limit

    cdef int hole(self) except -1:
        """Where the next hole starts (-1: none left)."""
        self.hole_at = (<tuple>self.holes[self.next])[0] if self.next < len(self.holes) else -1
        return 0

    cdef inline const unsigned char *take(self, Py_ssize_t k) except NULL:
        cdef const unsigned char *p = self.b + self.at
        if k > self.n - self.at:
            raise _Unreadable
        self.at += k
        return p

    cdef inline Py_ssize_t length(self, int width) except -1:
        return <Py_ssize_t>brainy_be(self.take(width), width)

    cdef object text(self, Py_ssize_t k):
        cdef const unsigned char *p = self.take(k)
        return brainy_str(<const char *>p, k)  # not UTF-8: UnicodeDecodeError, None at the top

    cdef object value(self, int depth):
        cdef unsigned char t
        cdef tuple found
        if self.at == self.hole_at:
            found = <tuple>self.holes[self.next]
            self.at = found[1]
            self.next += 1
            self.hole()
            return found[2]
        t = self.take(1)[0]
        if t <= 0x7F:
            return <long>t
        if t >= 0xE0:
            return <long>t - 0x100
        if t < 0x90:
            return self.map(t & 0x0F, depth)
        if t < 0xA0:
            return self.array(t & 0x0F, depth)
        if t < 0xC0:
            return self.text(t & 0x1F)
        if t == 0xC0:
            return None
        if t == 0xC2:
            return False
        if t == 0xC3:
            return True
        if t == 0xCA:
            return brainy_f32(brainy_be(self.take(4), 4))
        if t == 0xCB:
            return brainy_f64(brainy_be(self.take(8), 8))
        if t == 0xCC:
            return <long>self.take(1)[0]
        if t == 0xCD:
            return <long>brainy_be(self.take(2), 2)
        if t == 0xCE:
            return <long>brainy_be(self.take(4), 4)
        if t == 0xCF:
            return brainy_be(self.take(8), 8)
        if t == 0xD0:
            return <long>(<int8_t>self.take(1)[0])
        if t == 0xD1:
            return <long>(<int16_t>brainy_be(self.take(2), 2))
        if t == 0xD2:
            return <long>(<int32_t>brainy_be(self.take(4), 4))
        if t == 0xD3:
            return <int64_t>brainy_be(self.take(8), 8)
        if 0xD9 <= t <= 0xDB:  # str 8, 16, 32
            return self.text(self.length(1 << (t - 0xD9)))
        if 0xC4 <= t <= 0xC6:  # bin 8, 16, 32
            return self.bin(self.length(1 << (t - 0xC4)))
        if t == 0xDC or t == 0xDD:  # array 16, 32
            return self.array(self.length(2 << (t - 0xDC)), depth)
        if t == 0xDE or t == 0xDF:  # map 16, 32
            return self.map(self.length(2 << (t - 0xDE)), depth)
        raise _Unreadable  # 0xc1, and the ext types 0xc7-0xc9, 0xd4-0xd8

    cdef bytes bin(self, Py_ssize_t k):
        cdef const unsigned char *p = self.take(k)
        return PyBytes_FromStringAndSize(<const char *>p, k)

    cdef list array(self, Py_ssize_t count, int depth):
        cdef Py_ssize_t i
        if depth + 1 > self.limit or count > self.n - self.at:  # a member takes a byte at least
            raise _Unreadable
        cdef list out = PyList_New(count)
        for i in range(count):
            member = self.value(depth + 1)
            Py_INCREF(member)  # SET_ITEM steals the reference the list keeps
            PyList_SET_ITEM(out, i, member)
        return out

    cdef dict map(self, Py_ssize_t count, int depth):
        cdef Py_ssize_t i
        cdef unsigned char t
        if depth + 1 > self.limit or count > (self.n - self.at) // 2:  # a pair takes two bytes at least
            raise _Unreadable
        cdef dict out = _PyDict_NewPresized(count)
        for i in range(count):
            t = self.take(1)[0]
            if 0xA0 <= t <= 0xBF:
                key = self.text(t & 0x1F)
            elif 0xD9 <= t <= 0xDB:
                key = self.text(self.length(1 << (t - 0xD9)))
            elif 0xC4 <= t <= 0xC6:
                key = self.bin(self.length(1 << (t - 0xC4)))
            else:
                raise _Unreadable  # strict_map_key: a str or a bin (and never a hole: holes are values)
            PyDict_SetItem(out, key, self.value(depth + 1))
        return out


def unpack(const unsigned char[::1] body, list holes, int limit):
    cdef _Reader reader = _Reader()
    reader.n = body.shape[0]
    if reader.n == 0:
        return None
    reader.b = &body[0]
    reader.holes = holes
    reader.limit = limit
    reader.hole()
    try:
        document = reader.value(0)
    except (_Unreadable, UnicodeDecodeError):
        return None
    if reader.at != reader.n or reader.next != len(holes):
        return None
    return document
