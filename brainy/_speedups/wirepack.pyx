# cython: language_level=3, boundscheck=False, wraparound=False
"""MessagePack of an answer with its encoded pieces spliced in, compiled: the twin of ``wirepack_py.py``.

One walk of the document writing straight into one growing buffer: an
:class:`~brainy.contract.encoded.Encoded` row's MessagePack bytes copied as they are, a
:class:`~brainy.contract.vectors.Vector` as its float32 array, everything else as
``msgpack.packb(use_bin_type=True, strict_types=True)`` writes it (the smallest form of each integer,
string, array and map header; floats as float64; a subclass of list, tuple or dict as its base). No
placeholders, no callback per row, no split and join: a 1,000-row page is one pass.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.dict cimport PyDict_GetItem, PyDict_Next, PyDict_Size
from cpython.mem cimport PyMem_Free, PyMem_Malloc, PyMem_Realloc
from cpython.object cimport PyObject
from libc.stdint cimport int64_t, uint8_t, uint64_t
from libc.string cimport memcpy

from brainy.contract.encoded import Encoded, Hit, Hits
from brainy.contract.vectors import Vector

__all__ = ["pack"]

cdef extern from "Python.h":
    const char *PyUnicode_AsUTF8AndSize(object text, Py_ssize_t *size) except NULL

# msgpack's own bound on nesting (its packer's recursion limit), refused the same way
cdef int NEST_LIMIT = 1024


cdef class _Buffer:
    cdef char *data
    cdef Py_ssize_t length, capacity

    def __cinit__(self):
        self.capacity = 4096
        self.length = 0
        self.data = <char *>PyMem_Malloc(self.capacity)
        if self.data == NULL:
            raise MemoryError()

    def __dealloc__(self):
        PyMem_Free(self.data)

    cdef int reserve(self, Py_ssize_t more) except -1:
        cdef Py_ssize_t want = self.length + more
        cdef char *grown
        if want <= self.capacity:
            return 0
        while self.capacity < want:
            self.capacity *= 2
        grown = <char *>PyMem_Realloc(self.data, self.capacity)
        if grown == NULL:
            raise MemoryError()
        self.data = grown
        return 0

    cdef inline int write(self, const char *src, Py_ssize_t n) except -1:
        self.reserve(n)
        memcpy(self.data + self.length, src, n)
        self.length += n
        return 0

    cdef inline int byte(self, uint8_t b) except -1:
        self.reserve(1)
        self.data[self.length] = <char>b
        self.length += 1
        return 0

    cdef int head(self, uint8_t code, uint64_t value, int width) except -1:
        """``code`` then ``value`` big-endian in ``width`` bytes."""
        cdef int i
        self.reserve(1 + width)
        self.data[self.length] = <char>code
        for i in range(width):
            self.data[self.length + 1 + i] = <char>((value >> (8 * (width - 1 - i))) & 0xFF)
        self.length += 1 + width
        return 0

    cdef int sized(self, Py_ssize_t n, uint8_t fix, Py_ssize_t fix_below, uint8_t code8, uint8_t code16,
                   uint8_t code32) except -1:
        """A length header: the fix form below ``fix_below``, then 8 (when there is one), 16 and 32 bits."""
        if n < fix_below:
            return self.byte(fix | <uint8_t>n)
        if code8 and n < 0x100:
            return self.head(code8, n, 1)
        if n < 0x10000:
            return self.head(code16, n, 2)
        if n <= 0xFFFFFFFF:
            return self.head(code32, n, 4)
        raise ValueError("a string, array or map is too long for MessagePack")


cdef int _int(_Buffer out, object value) except -1:
    cdef int64_t signed
    cdef uint64_t unsigned
    if value >= 0:
        unsigned = value
        if unsigned < 0x80:
            return out.byte(<uint8_t>unsigned)
        if unsigned < 0x100:
            return out.head(0xCC, unsigned, 1)
        if unsigned < 0x10000:
            return out.head(0xCD, unsigned, 2)
        if unsigned <= 0xFFFFFFFF:
            return out.head(0xCE, unsigned, 4)
        return out.head(0xCF, unsigned, 8)
    signed = value
    if signed >= -32:
        return out.byte(<uint8_t>(signed & 0xFF))
    if signed >= -0x80:
        return out.head(0xD0, <uint64_t>signed, 1)
    if signed >= -0x8000:
        return out.head(0xD1, <uint64_t>signed, 2)
    if signed >= -0x80000000:
        return out.head(0xD2, <uint64_t>signed, 4)
    return out.head(0xD3, <uint64_t>signed, 8)


cdef int _float(_Buffer out, double value) except -1:
    cdef uint64_t bits
    memcpy(&bits, &value, 8)
    return out.head(0xCB, bits, 8)


cdef int _raw(_Buffer out, bytes data) except -1:
    return out.write(PyBytes_AS_STRING(data), PyBytes_GET_SIZE(data))


cdef int _pack(_Buffer out, object value, int depth) except -1:
    cdef type kind = type(value)
    cdef Py_ssize_t n
    cdef const char *text
    if depth > NEST_LIMIT:
        raise ValueError("recursion limit exceeded.")
    if kind is Encoded:
        return _raw(out, value.msgpack)
    if kind is str:
        text = PyUnicode_AsUTF8AndSize(value, &n)
        out.sized(n, 0xA0, 32, 0xD9, 0xDA, 0xDB)
        return out.write(text, n)
    if value is None:
        return out.byte(0xC0)
    if value is True:
        return out.byte(0xC3)
    if value is False:
        return out.byte(0xC2)
    if kind is int:
        if not -0x8000000000000000 <= value <= 0xFFFFFFFFFFFFFFFF:
            raise TypeError("cannot pack int")  # msgpack hands such an int to ``default``, which refuses it
        return _int(out, value)
    if kind is float:
        return _float(out, value)
    if kind is dict:
        return _map(out, value, depth)
    if kind is Hit:
        return _hit(out, value, depth)
    if kind is list or kind is tuple or kind is Hits:
        return _array(out, value, depth)
    if kind is bytes or kind is bytearray or kind is memoryview:
        if kind is not bytes:
            value = bytes(value)
        out.sized(PyBytes_GET_SIZE(value), 0, 0, 0xC4, 0xC5, 0xC6)
        return _raw(out, value)
    if isinstance(value, Vector):
        return _raw(out, value.float32_msgpack())
    if isinstance(value, (list, tuple)):
        return _array(out, list(value), depth)
    if isinstance(value, dict):  # read through dict's own items, as dict(value) would copy them
        return _map(out, value, depth)
    raise TypeError(f"cannot pack {kind.__name__}")


cdef int _map(_Buffer out, object value, int depth) except -1:
    """A dict or a subclass (a page's shared hit): read through dict's own storage, in insertion order."""
    cdef Py_ssize_t pos = 0
    cdef PyObject *key
    cdef PyObject *item
    out.sized(PyDict_Size(value), 0x80, 16, 0, 0xDE, 0xDF)
    while PyDict_Next(value, &pos, &key, &item):
        _pack(out, <object>key, depth + 1)
        _pack(out, <object>item, depth + 1)
    return 0


cdef int _hit(_Buffer out, object hit, int depth) except -1:
    """A page's shared hit: its MessagePack head then its entity's bytes, when it holds an encoded row and its
    head (brainy/contract/encoded.py, ``plain_hit``); else the dict it is."""
    cdef PyObject *entity = PyDict_GetItem(hit, "entity")
    head = getattr(hit, "msgpack_head", None)
    if entity is NULL or type(<object>entity) is not Encoded or type(head) is not bytes or PyDict_Size(hit) != 3:
        return _map(out, hit, depth)
    _raw(out, head)
    return _raw(out, (<object>entity).msgpack)


cdef int _array(_Buffer out, object value, int depth) except -1:
    out.sized(len(value), 0x90, 16, 0, 0xDC, 0xDD)
    for item in value:
        _pack(out, item, depth + 1)
    return 0


def pack(document):
    """The MessagePack bytes of ``document``, its encoded rows and vectors spliced in."""
    cdef _Buffer out = _Buffer()
    _pack(out, document, 0)
    return PyBytes_FromStringAndSize(out.data, out.length)
