# Declarations for h1frame.pyx, HTTP/1.1 response framing (RFC 9112 sections 4, 6, 7.1).
# The hot helpers are inline here and never raise; the raising paths live out of line in the .pyx.

from libc.string cimport memcpy


cdef enum:
    STATUS_MIN = 100
    STATUS_MAX = 999          # three digits (RFC 9112 section 4)
    # Sizes of the fixed pieces, as the sums of their parts.
    CRLF_SIZE = 2
    SEP_SIZE = 2              # ": " between a header's name and value
    CONTENT_LENGTH_SIZE = 16  # "content-length: " (then digits and CRLF)
    CHUNKED_SIZE = 28         # "transfer-encoding: chunked" CRLF
    CLOSE_SIZE = 19           # "connection: close" CRLF
    LAST_CHUNK_SIZE = 5       # "0" CRLF CRLF
    REQUEST_HOST_SIZE = 17    # " HTTP/1.1" CRLF "host: ", after a forwarded request's target


cdef enum:
    # Bits of the byte classes (h1frame.pyx, CLASSES).
    TCHAR = 1                 # token character, RFC 9110 section 5.6.2
    FIELD = 2                 # field-vchar, SP or HTAB, RFC 9110 section 5.5
    WSP = 4                   # SP or HTAB
    TARGET = 8                # a request target's byte (origin form: RFC 3986 pchar, "/", "?", "%")


cdef inline bint all_of(const unsigned char* p, Py_ssize_t n, const unsigned char* classes,
                        unsigned char bit) noexcept nogil:
    cdef Py_ssize_t i
    for i in range(n):
        if not classes[p[i]] & bit:
            return False
    return True


cdef inline Py_ssize_t dec_len(size_t v) noexcept nogil:
    cdef Py_ssize_t n = 1
    while v >= 10:
        v //= 10
        n += 1
    return n


cdef inline char* write_dec(char* p, size_t v, Py_ssize_t n) noexcept nogil:
    # n is dec_len(v): digits are written from the right.
    cdef char* q = p + n
    while True:
        q -= 1
        q[0] = <char>(48 + v % 10)
        v //= 10
        if v == 0:
            break
    return p + n


cdef inline Py_ssize_t hex_len(size_t v) noexcept nogil:
    cdef Py_ssize_t n = 1
    while v >= 16:
        v >>= 4
        n += 1
    return n


cdef inline char* write_hex(char* p, size_t v, Py_ssize_t n) noexcept nogil:
    # n is hex_len(v); lowercase digits, as "%x" writes them.
    cdef char* q = p + n
    while True:
        q -= 1
        q[0] = b"0123456789abcdef"[v & 15]
        v >>= 4
        if v == 0:
            break
    return p + n


cdef inline char* put(char* p, const char* src, Py_ssize_t n) noexcept nogil:
    memcpy(p, src, <size_t>n)
    return p + n


cdef inline char* crlf(char* p) noexcept nogil:
    p[0] = 13
    p[1] = 10
    return p + 2


cdef inline bint lower_eq(const unsigned char* p, const char* lower, Py_ssize_t n) noexcept nogil:
    # p is a token (checked), so OR-ing 0x20 folds exactly its ASCII letters and nothing else.
    cdef Py_ssize_t i
    for i in range(n):
        if (p[i] | 0x20) != <unsigned char>lower[i]:
            return False
    return True


cdef enum:
    # What follows the caller's headers.
    FRAMING_NONE = 0          # a no-content status: neither length nor chunks
    FRAMING_LENGTH = 1        # content-length
    FRAMING_CHUNKED = 2       # transfer-encoding: chunked


cdef Py_ssize_t check_status(object status) except -1
cdef Py_ssize_t headers_size(list headers) except -1
cdef int refuse_header(Py_ssize_t i, object item) except -1
cdef bytes assemble(Py_ssize_t status, list headers, Py_ssize_t headers_len, int framing,
                    Py_ssize_t body_len, bint keep_alive, bytes body)
