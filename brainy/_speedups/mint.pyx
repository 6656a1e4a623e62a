# cython: language_level=3, boundscheck=False, wraparound=False
"""Compiled twin of ``mint`` (see mint_py.py for the law): a new id's 16 bytes and its text in one C step.

An ``add`` without an id mints one; in Python that is a lock, the clock read through ``time``, an int built from the
random bytes and written out, and a hex text sliced into five (1.4 us, a twentieth of a served row of a MessagePack
``addMany``; here 0.12). The GIL is the lock: nothing between reading the state and moving it lets another thread
run (the refill of the random bytes calls ``os.urandom``, which may, so it happens before, and is checked again
after).
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from cpython.unicode cimport PyUnicode_New
from libc.stdint cimport uint8_t, uint64_t
from libc.string cimport memcpy

import os

__all__ = ["forget", "mint"]

cdef extern from *:
    """
    #include <Python.h>
    #include <time.h>
    #define brainy_ucs1(text) ((unsigned char *)PyUnicode_1BYTE_DATA(text))
    /* The Unix time in milliseconds: the clock time.time_ns() reads, without the call into Python. */
    static uint64_t brainy_now_ms(void) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
    }
    """
    unsigned char *brainy_ucs1(object text)
    uint64_t brainy_now_ms()

cdef enum:
    CHUNK = 8190  # 819 ids of 10 random bytes

cdef uint64_t _last = 0
cdef unsigned int _counter = 0
cdef bytes _random = b""
cdef Py_ssize_t _used = 0
cdef const char *HEX = b"0123456789abcdef"


def forget():
    global _random, _used
    _random, _used = b"", 0


os.register_at_fork(after_in_child=forget)  # a forked child must not hand out its parent's bytes again


def mint(now_ms=None):
    global _last, _counter, _random, _used
    cdef uint64_t now = brainy_now_ms() if now_ms is None else now_ms
    while _used + 10 > len(_random):  # os.urandom may let another thread in: the room is asked again after it
        _random, _used = os.urandom(CHUNK), 0
    # the id's random bytes and its place taken into locals before anything is made (nothing made here runs Python
    # code, which could let another thread in to move them)
    cdef uint8_t r[10]
    memcpy(r, PyBytes_AS_STRING(_random) + _used, 10)
    _used += 10
    cdef unsigned int seed = (r[0] << 3) | (r[1] >> 5)  # the top 11 of the 80 random bits
    if now > _last:
        _last, _counter = now, seed
    else:
        _counter += 1
        if _counter > 0xFFF:
            _last, _counter = _last + 1, seed
    cdef uint64_t ms = _last
    cdef unsigned int counter = _counter
    cdef bytes raw = PyBytes_FromStringAndSize(NULL, 16)
    cdef uint8_t *b = <uint8_t *>PyBytes_AS_STRING(raw)
    cdef int k
    for k in range(6):
        b[k] = (ms >> (40 - 8 * k)) & 0xFF
    b[6] = 0x70 | (counter >> 8)
    b[7] = counter & 0xFF
    b[8] = 0x80 | (r[2] & 0x3F)  # the variant, then the low 62 of the 80 random bits
    for k in range(9, 16):
        b[k] = r[k - 6]
    text = PyUnicode_New(36, 127)
    cdef unsigned char *t = brainy_ucs1(text)
    cdef int i = 0
    for k in range(16):
        if k == 4 or k == 6 or k == 8 or k == 10:
            t[i] = 45  # '-'
            i += 1
        t[i] = HEX[b[k] >> 4]
        t[i + 1] = HEX[b[k] & 0xF]
        i += 2
    return text, raw
