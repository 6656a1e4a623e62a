# Declarations for sstblock.pyx, the SSTable data block (docs/store-format.md, "Data block").
# The hot helpers are inline here and never raise; the raising paths live out of line in the .pyx.

from libc.stdint cimport uint32_t, uint64_t


cdef enum:
    CRC_SIZE = 4
    NUM_RESTARTS_SIZE = 4


cdef enum:
    VARINT_OK = 0
    VARINT_TRUNCATED = 1   # ran into the limit: "entry runs past restarts"
    VARINT_OVERLONG = 2    # more than 64 bits: "bad varint"


cdef inline int read_varint(const unsigned char** pp, const unsigned char* limit,
                            uint64_t* out) noexcept nogil:
    cdef const unsigned char* p = pp[0]
    cdef uint64_t result = 0
    cdef unsigned int shift = 0
    cdef unsigned char b
    if p < limit and p[0] < 0x80:  # most shared/unshared/value_len fields are one byte
        out[0] = p[0]
        pp[0] = p + 1
        return VARINT_OK
    while p < limit:
        b = p[0]
        p += 1
        if shift == 63 and b > 1:  # the tenth byte may carry only bit 63
            return VARINT_OVERLONG
        result |= <uint64_t>(b & 0x7F) << shift
        if b < 0x80:
            out[0] = result
            pp[0] = p
            return VARINT_OK
        shift += 7
    return VARINT_TRUNCATED


cdef inline unsigned char* write_varint(unsigned char* p, uint64_t v) noexcept nogil:
    while v >= 0x80:
        p[0] = <unsigned char>((v & 0x7F) | 0x80)
        p += 1
        v >>= 7
    p[0] = <unsigned char>v
    return p + 1


cdef inline Py_ssize_t varint_len(uint64_t v) noexcept nogil:
    cdef Py_ssize_t n = 1
    while v >= 0x80:
        v >>= 7
        n += 1
    return n


cdef inline uint32_t read_u32le(const unsigned char* p) noexcept nogil:
    return (<uint32_t>p[0] | (<uint32_t>p[1] << 8) | (<uint32_t>p[2] << 16)
            | (<uint32_t>p[3] << 24))


cdef inline void write_u32le(unsigned char* p, uint32_t v) noexcept nogil:
    p[0] = <unsigned char>v
    p[1] = <unsigned char>(v >> 8)
    p[2] = <unsigned char>(v >> 16)
    p[3] = <unsigned char>(v >> 24)


cdef inline Py_ssize_t shared_prefix(const unsigned char* a, Py_ssize_t alen,
                                     const unsigned char* b, Py_ssize_t blen) noexcept nogil:
    cdef Py_ssize_t n = alen if alen < blen else blen
    cdef Py_ssize_t i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


cdef uint32_t crc32_of(const unsigned char* p, Py_ssize_t n) except? 0
cdef int corrupt(str reason, object at) except -1
cdef int varint_failed(int status, Py_ssize_t at) except -1
cdef tuple decode_from(const unsigned char* data, Py_ssize_t size)
