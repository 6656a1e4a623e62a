# cython: language_level=3
# WebSocket framing (RFC 6455 section 5.2), compiled twin of wsframe_py.py.
#
#   frame   := b0  b1  extlen?  mask?  payload[length]
#   b0      := fin: 1 bit  rsv: 3 bits  opcode: 4 bits
#   b1      := masked: 1 bit  len7: 7 bits
#   extlen  := u16 big-endian when len7 = 126 | u64 big-endian when len7 = 127
#   mask    := 4 bytes, present when masked (every client frame, section 5.3)
#
# Same names, same answers as the pure twin; tests/test_wsframe.py runs against both. The unmask
# XORs eight bytes at a time with the key repeated to a word, then the tail byte by byte.

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from libc.stdint cimport uint8_t, uint32_t, uint64_t
from libc.string cimport memcpy

__all__ = ["build", "parse_header", "unmask"]


def parse_header(data, Py_ssize_t start=0):
    """``(fin, rsv, opcode, masked, length, header_size)`` of the frame at ``data[start:]``, or None
    while its header has not all arrived."""
    cdef const uint8_t[::1] view = memoryview(data).cast("B")
    cdef Py_ssize_t available = view.shape[0] - start
    cdef uint8_t b0, b1
    cdef uint64_t length
    cdef Py_ssize_t size = 2, i
    if available < 2:
        return None
    b0 = view[start]
    b1 = view[start + 1]
    length = b1 & 0x7F
    if length == 126:
        if available < 4:
            return None
        length = (<uint64_t>view[start + 2] << 8) | view[start + 3]
        size = 4
    elif length == 127:
        if available < 10:
            return None
        length = 0
        for i in range(8):
            length = (length << 8) | view[start + 2 + i]
        size = 10
    if b1 & 0x80:
        size += 4
    if available < size:
        return None
    return b0 >> 7, (b0 >> 4) & 7, b0 & 0x0F, b1 >> 7, length, size


def unmask(data, Py_ssize_t start, Py_ssize_t length, key):
    """``data[start:start + length]`` XORed with the 4-byte ``key``, repeating (section 5.3)."""
    cdef const uint8_t[::1] view = memoryview(data).cast("B")
    cdef const uint8_t[::1] k = memoryview(key).cast("B")
    cdef bytes out
    cdef uint8_t* dst
    cdef const uint8_t* src
    cdef uint32_t key32
    cdef uint64_t key64, word
    cdef Py_ssize_t i = 0
    if length == 0:
        return b""
    if start < 0 or length < 0 or start + length > view.shape[0] or k.shape[0] != 4:
        raise ValueError("unmask: the payload or the key is out of range")
    out = PyBytes_FromStringAndSize(NULL, length)
    dst = <uint8_t*>PyBytes_AS_STRING(out)
    src = &view[start]
    memcpy(&key32, &k[0], 4)
    key64 = (<uint64_t>key32 << 32) | key32
    with nogil:
        while i + 8 <= length:
            memcpy(&word, src + i, 8)
            word ^= key64
            memcpy(dst + i, &word, 8)
            i += 8
        while i < length:
            dst[i] = src[i] ^ k[i & 3]
            i += 1
    return out


def build(int opcode, payload):
    """One unfragmented, unmasked server frame of ``opcode`` carrying ``payload``."""
    cdef const uint8_t[::1] view = memoryview(payload).cast("B")
    cdef Py_ssize_t n = view.shape[0], head, i
    cdef bytes out
    cdef uint8_t* dst
    if n < 126:
        head = 2
    elif n < 65536:
        head = 4
    else:
        head = 10
    out = PyBytes_FromStringAndSize(NULL, head + n)
    dst = <uint8_t*>PyBytes_AS_STRING(out)
    dst[0] = 0x80 | (opcode & 0x0F)
    if head == 2:
        dst[1] = <uint8_t>n
    elif head == 4:
        dst[1] = 126
        dst[2] = <uint8_t>(n >> 8)
        dst[3] = <uint8_t>n
    else:
        dst[1] = 127
        for i in range(8):
            dst[2 + i] = <uint8_t>((<uint64_t>n) >> (56 - 8 * i))
    if n:
        memcpy(dst + head, &view[0], n)
    return out
