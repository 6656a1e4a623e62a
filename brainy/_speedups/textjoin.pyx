# cython: language_level=3, boundscheck=False, wraparound=False
"""A file's text joined from consecutive pieces of its content, compiled: the twin of ``textjoin_py.py``.

Both joiners write straight into the answer's string, allocated once at its final size from the
content's: no list of pieces and no join (which copied the whole once more), each piece handled while
it is still in cache from its hash.

``Utf8Join``: while every piece is ASCII (most large text files), each is checked and copied into the
string. The first piece that is not ASCII hands the rest to the pure twin's joiner (whose decode
handles every character and names the offset where text stops), with the text so far as its first part.

``Base64Join``: each piece's whole groups of three encoded (pybase64, SIMD) and copied into the string.
Content longer than its hint hands the rest to the pure twin's joiner the same way.
"""

from libc.stdint cimport uint64_t
from libc.string cimport memcpy

import pybase64

from brainy._speedups import textjoin_py as _pure
from brainy._speedups.errors import TextStops

__all__ = ["Base64Join", "TextStops", "Utf8Join"]

cdef extern from "Python.h":
    object PyUnicode_New(Py_ssize_t size, Py_UCS4 maxchar)
    void *PyUnicode_DATA(object text)
    object PyUnicode_Substring(object text, Py_ssize_t start, Py_ssize_t end)
    char *PyBytes_AS_STRING(object data)
    Py_ssize_t PyBytes_GET_SIZE(object data)

sequence_length = _pure.sequence_length


cdef bint _ascii(const unsigned char *p, Py_ssize_t n) noexcept nogil:
    """No byte of p[0:n] has its high bit set (eight at a time; memcpy makes the loads unaligned-safe)."""
    cdef uint64_t acc = 0, word
    cdef Py_ssize_t i = 0
    while i + 32 <= n:
        memcpy(&word, p + i, 8); acc |= word
        memcpy(&word, p + i + 8, 8); acc |= word
        memcpy(&word, p + i + 16, 8); acc |= word
        memcpy(&word, p + i + 24, 8); acc |= word
        i += 32
    while i + 8 <= n:
        memcpy(&word, p + i, 8); acc |= word
        i += 8
    while i < n:
        acc |= p[i]
        i += 1
    return (acc & 0x8080808080808080ULL) == 0


cdef class Utf8Join:
    """Text assembled piece by piece; ``total`` is the content's size (the ASCII string is made that long)."""

    cdef object text   # the answer being filled while every piece was ASCII (None after)
    cdef object slow   # the pure twin's joiner once a piece was not
    cdef Py_ssize_t total, at

    def __init__(self, Py_ssize_t total=0):
        self.total, self.at, self.slow = total, 0, None
        self.text = PyUnicode_New(total, 127) if total > 0 else None

    def add(self, piece):
        cdef const unsigned char[::1] view
        cdef Py_ssize_t n
        if self.slow is not None:
            self.slow.add(piece)
            return
        view = memoryview(piece).cast("B")
        n = view.shape[0]
        if n == 0:
            return
        if self.text is not None and self.at + n <= self.total and _ascii(&view[0], n):
            memcpy(<char *>PyUnicode_DATA(self.text) + self.at, &view[0], n)
            self.at += n
            return
        parts = [PyUnicode_Substring(self.text, 0, self.at)] if self.at else []
        self.slow = _pure.Utf8Join(0, parts, self.at)
        self.text = None
        self.slow.add(piece)

    def finish(self):
        if self.slow is not None:
            return self.slow.finish()
        text, self.text = self.text, None
        if text is None:
            return ""
        return text if self.at == self.total else PyUnicode_Substring(text, 0, self.at)


cdef class Base64Join:
    """Base64 assembled piece by piece; ``total`` is the content's size (the string is made that long's base64)."""

    cdef object text   # the answer being filled (None once handed to the pure twin)
    cdef object slow
    cdef bytes carry
    cdef Py_ssize_t length, at

    def __init__(self, Py_ssize_t total=0):
        self.length, self.at, self.slow, self.carry = (total + 2) // 3 * 4, 0, None, b""
        self.text = PyUnicode_New(self.length, 127) if total > 0 else None

    cdef bint _put(self, encoded):
        cdef Py_ssize_t n = PyBytes_GET_SIZE(encoded)
        if self.text is None or self.at + n > self.length:
            return False
        memcpy(<char *>PyUnicode_DATA(self.text) + self.at, PyBytes_AS_STRING(encoded), n)
        self.at += n
        return True

    def add(self, piece):
        cdef Py_ssize_t cut, need
        if self.slow is not None:
            self.slow.add(piece)
            return
        view = memoryview(piece).cast("B")
        if self.carry:
            need = 3 - len(self.carry)
            group = self.carry + bytes(view[:need])
            view = view[need:]
            if len(group) < 3:
                self.carry = group
                return
            self.carry = b""
            if not self._put(pybase64.b64encode(group)):
                self._hand_over(group, view)
                return
        cut = len(view) // 3 * 3
        if cut and not self._put(pybase64.b64encode(view[:cut])):
            self._hand_over(b"", view)
            return
        self.carry = bytes(view[cut:])

    cdef _hand_over(self, bytes carry, rest):
        """Content longer than its hint: the pure joiner takes the text so far and goes on from ``rest``."""
        parts = [PyUnicode_Substring(self.text, 0, self.at)] if self.at else []
        self.slow, self.text = _pure.Base64Join(0, parts, carry), None
        self.slow.add(rest)

    def finish(self):
        if self.slow is None and self.carry and not self._put(pybase64.b64encode(self.carry)):
            self._hand_over(self.carry, b"")
        self.carry = b""
        if self.slow is not None:
            return self.slow.finish()
        text, self.text = self.text, None
        if text is None:
            return ""
        return text if self.at == self.length else PyUnicode_Substring(text, 0, self.at)
