# HTTP/1.1 framing: answers, the plain request's head, a proxied request's two halves; compiled twin of
# h1frame_py.py (RFC 9112).
#
#   response     := status-line  header-line*  framing-line*  CRLF  body?
#   status-line  := "HTTP/1.1" SP status: 3DIGIT SP reason CRLF    reason from REASONS, else empty
#   header-line  := name: token ":" SP value: field-value CRLF     in the caller's order
#   framing-line := "content-length: " decimal CRLF | "transfer-encoding: chunked" CRLF
#                 | "connection: close" CRLF                       when not keep_alive
#   chunk        := size: lowercase hex  CRLF  data[size]  CRLF    size 0 is the last chunk
#
# Same names, same errors in the same order, byte-identical output as the pure twin; the suite in
# tests/test_h1frame.py runs against both. Each answer is one bytes object sized in a first pass
# over the headers (which also checks them) and filled with memcpy in a second; the status lines
# are built once, at import.
#
# parse_head reads the plain request's head (h1frame_py's grammar) in one pass over its bytes, and
# answers None wherever the pure twin does: the caller then hands the bytes to httptools.

from cpython.buffer cimport PyBuffer_FillInfo
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.unicode cimport (
    PyUnicode_1BYTE_DATA,
    PyUnicode_1BYTE_KIND,
    PyUnicode_DecodeLatin1,
    PyUnicode_GET_LENGTH,
    PyUnicode_KIND,
)
from libc.string cimport memcmp

cdef extern from "string.h":
    void* memmem(const void* haystack, size_t haystack_len, const void* needle, size_t needle_len)  # GNU, as Python.h asks for
from cpython.long cimport PyLong_AsLongAndOverflow
from cpython.number cimport PyNumber_Index
from cpython.tuple cimport PyTuple_GET_SIZE

# One table of reasons and one refusal path for headers, shared with the pure twin, so the two
# cannot drift on either.
from brainy._speedups.h1frame_py import LAST_CHUNK, REASONS
from brainy._speedups.h1frame_py import _check_header as py_check_header
from brainy._speedups.h1frame_py import frame_request as py_frame_request

from brainy._speedups.h1frame_py import MAX_CONTENT_LENGTH_DIGITS

__all__ = ["answer_head", "frame_request", "frame_response", "frame_chunk", "frame_chunked_head", "parse_head", "relay_answer",
           "REASONS", "LAST_CHUNK", "Filling"]

# Index status - STATUS_MIN: "HTTP/1.1 <status> <reason>\r\n", the reason empty when unregistered.
cdef list STATUS_LINES = [b"HTTP/1.1 %d %s\r\n" % (s, REASONS.get(s, b""))
                          for s in range(STATUS_MIN, STATUS_MAX + 1)]

# Byte classes for the header checks: TCHAR, FIELD and WSP bits (h1frame.pxd).
cdef unsigned char CLASSES[256]


cdef void fill_classes():
    cdef int c
    cdef bytes tchars = (b"!#$%&'*+-.^_`|~0123456789"
                         b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")
    for c in range(256):
        CLASSES[c] = 0
        if c == 9 or 0x20 <= c <= 0x7E or c >= 0x80:
            CLASSES[c] |= FIELD
        if c == 9 or c == 0x20:
            CLASSES[c] |= WSP
    for c in tchars:
        CLASSES[c] |= TCHAR
    for c in b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~!$&'()*+,;=:@/?%":
        CLASSES[c] |= TARGET


fill_classes()


# The field names nearly every request carries, handed out as these very strings: a plain request's head
# makes no string for them (the pure twin makes equal ones; only the objects differ).
cdef tuple KNOWN_NAMES = ("host", "user-agent", "accept", "authorization", "content-type", "content-length",
                          "connection", "accept-encoding", "accept-language", "x-brainy-caller", "origin",
                          "referer", "cookie", "te", "cache-control", "pragma")
cdef tuple KNOWN_RAW = tuple(name.encode("ascii") for name in KNOWN_NAMES)
cdef enum:
    NAME_BUFFER = 32  # names longer than this are decoded and lowered as the pure twin does


cdef object field_name(const unsigned char* q, Py_ssize_t n):
    # The lowercase name of the field at q[:n] (a token: ASCII), a known one without a new string.
    cdef unsigned char folded[NAME_BUFFER]
    cdef Py_ssize_t k
    cdef unsigned char c
    cdef bytes raw
    if n > NAME_BUFFER:
        return PyUnicode_DecodeLatin1(<const char*>q, n, NULL).lower()
    for k in range(n):
        c = q[k]
        folded[k] = c + 32 if 65 <= c <= 90 else c
    for k in range(PyTuple_GET_SIZE(KNOWN_RAW)):
        raw = <bytes>KNOWN_RAW[k]
        if PyBytes_GET_SIZE(raw) == n and memcmp(folded, PyBytes_AS_STRING(raw), n) == 0:
            return KNOWN_NAMES[k]
    return PyUnicode_DecodeLatin1(<const char*>folded, n, NULL)


cdef Py_ssize_t check_status(object status) except -1:
    cdef int overflow = 0
    cdef long v
    status = PyNumber_Index(status)
    v = PyLong_AsLongAndOverflow(status, &overflow)
    if overflow or v < STATUS_MIN or v > STATUS_MAX:
        raise ValueError(f"status must be 100..999, got {status}")
    return v


cdef int refuse_header(Py_ssize_t i, object item) except -1:
    # Out of line: the fast checks below found headers[i] wanting; the pure twin's check says why.
    py_check_header(i, item)
    raise AssertionError(f"h1frame: the compiled and pure header checks disagree on headers[{i}]")


cdef Py_ssize_t headers_size(list headers) except -1:
    # Checks each header as h1frame_py._check_header does and returns the bytes their lines take.
    cdef Py_ssize_t i, nlen, vlen, total = 0
    cdef const unsigned char* np
    cdef const unsigned char* vp
    cdef tuple pair
    for i in range(len(headers)):
        item = headers[i]
        if type(item) is not tuple or PyTuple_GET_SIZE(item) != 2:
            refuse_header(i, item)
        pair = <tuple>item
        name = pair[0]
        value = pair[1]
        if type(name) is not bytes or type(value) is not bytes:
            refuse_header(i, item)
        np = <const unsigned char*>PyBytes_AS_STRING(name)
        nlen = PyBytes_GET_SIZE(name)
        vp = <const unsigned char*>PyBytes_AS_STRING(value)
        vlen = PyBytes_GET_SIZE(value)
        if (nlen == 0 or not all_of(np, nlen, CLASSES, TCHAR)
                or (nlen == 14 and lower_eq(np, b"content-length", 14))
                or (nlen == 17 and lower_eq(np, b"transfer-encoding", 17))
                or not all_of(vp, vlen, CLASSES, FIELD)
                or (vlen and (CLASSES[vp[0]] & WSP or CLASSES[vp[vlen - 1]] & WSP))):
            refuse_header(i, item)
        total += nlen + SEP_SIZE + vlen + CRLF_SIZE
    return total


cdef bytes assemble(Py_ssize_t status, list headers, Py_ssize_t headers_len, int framing,
                    Py_ssize_t body_len, bint keep_alive, bytes body):
    # headers are checked (headers_size gave headers_len); body is None when left out (HEAD,
    # chunked head), body_len what content-length states.
    cdef bytes line = <bytes>STATUS_LINES[status - STATUS_MIN]
    cdef Py_ssize_t i, line_len = PyBytes_GET_SIZE(line), digits = 0, size
    cdef bytes out, name, value
    cdef tuple pair
    cdef char* p
    size = line_len + headers_len + CRLF_SIZE
    if framing == FRAMING_LENGTH:
        digits = dec_len(<size_t>body_len)
        size += CONTENT_LENGTH_SIZE + digits + CRLF_SIZE
    elif framing == FRAMING_CHUNKED:
        size += CHUNKED_SIZE
    if not keep_alive:
        size += CLOSE_SIZE
    if body is not None:
        size += PyBytes_GET_SIZE(body)

    out = PyBytes_FromStringAndSize(NULL, size)
    p = PyBytes_AS_STRING(out)
    p = put(p, PyBytes_AS_STRING(line), line_len)
    for i in range(len(headers)):
        pair = <tuple>headers[i]
        name = <bytes>pair[0]
        value = <bytes>pair[1]
        p = put(p, PyBytes_AS_STRING(name), PyBytes_GET_SIZE(name))
        p = put(p, b": ", SEP_SIZE)
        p = put(p, PyBytes_AS_STRING(value), PyBytes_GET_SIZE(value))
        p = crlf(p)
    if framing == FRAMING_LENGTH:
        p = put(p, b"content-length: ", CONTENT_LENGTH_SIZE)
        p = write_dec(p, <size_t>body_len, digits)
        p = crlf(p)
    elif framing == FRAMING_CHUNKED:
        p = put(p, b"transfer-encoding: chunked\r\n", CHUNKED_SIZE)
    if not keep_alive:
        p = put(p, b"connection: close\r\n", CLOSE_SIZE)
    p = crlf(p)
    if body is not None:
        p = put(p, PyBytes_AS_STRING(body), PyBytes_GET_SIZE(body))
    return out


cdef inline bint no_content(Py_ssize_t status) noexcept:
    # 1xx, 204 and 304 carry no content (RFC 9110 section 8.6, RFC 9112 section 6.3).
    return status < 200 or status == 204 or status == 304


def frame_response(status, headers, body, keep_alive, head=False):
    """One whole response: status line, headers in order, content-length, connection: close
    unless keep_alive, a blank line, then body (left out when head, its length still stated)."""
    # Checks, order and messages as h1frame_py.frame_response.
    cdef Py_ssize_t s = check_status(status)
    cdef list hs = list(headers)  # our own snapshot: nothing can change it between the passes
    cdef Py_ssize_t headers_len = headers_size(hs)
    cdef Py_ssize_t body_len
    cdef int framing = FRAMING_LENGTH
    cdef bint ka, hd
    if type(body) is not bytes:
        raise TypeError(f"body must be bytes, got {type(body).__name__}")
    body_len = PyBytes_GET_SIZE(body)
    if no_content(s):
        if body_len:
            raise ValueError(f"a {s} response has no body, got {body_len} bytes")
        framing = FRAMING_NONE
    ka = keep_alive
    hd = head
    return assemble(s, hs, headers_len, framing, body_len, ka, None if hd else <bytes>body)


def frame_chunked_head(status, headers, keep_alive):
    """The head of a response whose body follows as chunks: status line, headers in order,
    transfer-encoding: chunked, connection: close unless keep_alive, a blank line."""
    cdef Py_ssize_t s = check_status(status)
    cdef list hs = list(headers)
    cdef Py_ssize_t headers_len = headers_size(hs)
    if no_content(s):
        raise ValueError(f"a {s} response has no body to send in chunks")
    return assemble(s, hs, headers_len, FRAMING_CHUNKED, 0, keep_alive, None)


def frame_chunk(data):
    """One chunk of a chunked body: <size in hex>\\r\\n<data>\\r\\n; empty data is the last chunk."""
    cdef Py_ssize_t n, digits
    cdef bytes out
    cdef char* p
    if type(data) is not bytes:
        raise TypeError(f"data must be bytes, got {type(data).__name__}")
    n = PyBytes_GET_SIZE(data)
    if n == 0:
        return LAST_CHUNK
    digits = hex_len(<size_t>n)
    out = PyBytes_FromStringAndSize(NULL, digits + CRLF_SIZE + n + CRLF_SIZE)
    p = PyBytes_AS_STRING(out)
    p = write_hex(p, <size_t>n, digits)
    p = crlf(p)
    p = put(p, PyBytes_AS_STRING(data), n)
    crlf(p)
    return out


# -- the plain request's head ---------------------------------------------------------------------

cdef tuple METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")


cdef tuple METHOD_PREFIXES = tuple(m.encode() + b" " for m in METHODS)  # each with the SP after it


cdef Py_ssize_t method_of(const unsigned char* p, Py_ssize_t n):
    # The index in METHODS of the method the request line starts with (its SP included), else -1.
    cdef Py_ssize_t k, size
    cdef bytes prefix
    for k in range(len(METHOD_PREFIXES)):
        prefix = <bytes>METHOD_PREFIXES[k]
        size = PyBytes_GET_SIZE(prefix)
        if n >= size and memcmp(p, PyBytes_AS_STRING(prefix), size) == 0:
            return k
    return -1


cdef int connection_tokens(const unsigned char* p, Py_ssize_t n, bint* close, bint* keep) noexcept:
    # Reads a connection value's tokens; -1 when one is upgrade (the full parser's case).
    cdef Py_ssize_t i = 0, a, b
    while i <= n:
        a = i
        while i < n and p[i] != 44:  # ","
            i += 1
        b = i
        while a < b and (p[a] == 32 or p[a] == 9):
            a += 1
        while b > a and (p[b - 1] == 32 or p[b - 1] == 9):
            b -= 1
        if b - a == 5 and lower_eq(p + a, b"close", 5):
            close[0] = True
        elif b - a == 10 and lower_eq(p + a, b"keep-alive", 10):
            keep[0] = True
        elif b - a == 7 and lower_eq(p + a, b"upgrade", 7):
            return -1
        i += 1
    return 0


cdef int read_fields(const unsigned char* p, Py_ssize_t i, Py_ssize_t stop, dict headers, Py_ssize_t* length,
                     bint* close, bint* keep) except -2:
    # The field lines from i to stop (the last line's CRLF), as h1frame_py._fields reads them: length (-1: none),
    # close and keep set, each field put in headers when it is not None; -1 when they are not the plain shape.
    cdef Py_ssize_t name_at, name_end, value_at, value_end, digits_end, digits, m
    cdef unsigned char c
    cdef const unsigned char* q
    while i < stop:
        name_at = i
        while CLASSES[p[i]] & TCHAR:
            i += 1
        name_end = i
        if name_end == name_at or p[i] != 58:  # ":"
            return -1
        i += 1
        while p[i] == 32 or p[i] == 9:
            i += 1
        value_at = i
        while i < stop and CLASSES[p[i]] & FIELD:
            i += 1
        if i >= stop or p[i] != 13 or p[i + 1] != 10:
            return -1
        value_end = i  # trailing OWS kept, as llhttp keeps it
        i += 2
        q = p + name_at
        if name_end - name_at == 14 and lower_eq(q, b"content-length", 14):
            digits_end = value_end
            while digits_end > value_at and (p[digits_end - 1] == 32 or p[digits_end - 1] == 9):
                digits_end -= 1  # the length's digits only
            digits = digits_end - value_at
            if length[0] >= 0 or digits == 0 or digits > MAX_CONTENT_LENGTH_DIGITS:
                return -1
            length[0] = 0
            for m in range(value_at, digits_end):
                c = p[m]
                if c < 48 or c > 57:
                    return -1
                length[0] = length[0] * 10 + (c - 48)
        elif name_end - name_at == 10 and lower_eq(q, b"connection", 10):
            if connection_tokens(p + value_at, value_end - value_at, close, keep) < 0 or (close[0] and keep[0]):
                return -1
        elif (name_end - name_at == 17 and lower_eq(q, b"transfer-encoding", 17)) or \
                (name_end - name_at == 7 and lower_eq(q, b"upgrade", 7)):
            return -1
        if headers is not None:
            name = field_name(q, name_end - name_at)
            value = PyUnicode_DecodeLatin1(<const char*>p + value_at, value_end - value_at, NULL)
            known = headers.get(name)
            headers[name] = value if known is None else f"{known}, {value}"
    return 0


def parse_head(bytes data, Py_ssize_t start, Py_ssize_t max_head):
    """The head of the plain request at data[start:], or None (as h1frame_py.parse_head)."""
    cdef const unsigned char* p = <const unsigned char*>PyBytes_AS_STRING(data)
    cdef Py_ssize_t size = PyBytes_GET_SIZE(data)
    cdef Py_ssize_t span = (size if size - start < max_head else start + max_head) - start
    cdef const unsigned char* found
    cdef Py_ssize_t end = -1
    cdef Py_ssize_t i, m, target_at, query_at, target_end, stop
    cdef Py_ssize_t length = -1
    cdef bint close = False, keep = False, minor_one
    cdef dict headers
    # data.find(b"\r\n\r\n", start, start + max_head), without a method call
    if 0 <= start and span >= 4:
        found = <const unsigned char*>memmem(p + start, span, b"\r\n\r\n", 4)
        if found != NULL:
            end = found - p
    if end < 0:
        return None
    stop = end + 2  # the last field line's CRLF ends here
    m = method_of(p + start, end - start)
    if m < 0:
        return None
    method = METHODS[m]
    i = start + len(<str>method) + 1
    if p[i] != 47:  # "/": origin form only
        return None
    target_at = i
    query_at = -1
    while CLASSES[p[i]] & TARGET:
        if p[i] == 63 and query_at < 0:  # "?"
            query_at = i
        i += 1
    target_end = i
    if i + 10 > stop or memcmp(p + i, b" HTTP/1.", 8) != 0 or (p[i + 8] != 48 and p[i + 8] != 49) \
            or p[i + 9] != 13 or p[i + 10] != 10:
        return None
    minor_one = p[i + 8] == 49
    i += 11
    headers = {}
    if read_fields(p, i, stop, headers, &length, &close, &keep) < 0:
        return None
    if query_at < 0:
        path = PyUnicode_DecodeLatin1(<const char*>p + target_at, target_end - target_at, NULL)
        query = ""
    else:
        path = PyUnicode_DecodeLatin1(<const char*>p + target_at, query_at - target_at, NULL)
        query = PyUnicode_DecodeLatin1(<const char*>p + query_at + 1, target_end - query_at - 1, NULL)
    return (method, path, query, headers, (not close) if minor_one else keep, length if length > 0 else 0,
            end + 4)


def answer_head(bytes data, Py_ssize_t max_head):
    """The one plain answer data holds: (body_start, status, keep_alive), the bytes still to come, or None (as
    h1frame_py.answer_head)."""
    cdef const unsigned char* p = <const unsigned char*>PyBytes_AS_STRING(data)
    cdef Py_ssize_t size = PyBytes_GET_SIZE(data)
    cdef Py_ssize_t span = size if size < max_head else max_head
    cdef const unsigned char* found
    cdef Py_ssize_t end = -1, stop, i, whole
    cdef Py_ssize_t length = -1, status
    cdef bint close = False, keep = False
    if span >= 4:
        found = <const unsigned char*>memmem(p, span, b"\r\n\r\n", 4)
        if found != NULL:
            end = found - p
    if end < 0:
        return 1 if size < max_head else None
    stop = end + 2
    if end < 13 or memcmp(p, b"HTTP/1.1 ", 9) != 0 or p[12] != 32:
        return None
    status = 0
    for i in range(9, 12):
        if p[i] < 48 or p[i] > 57:
            return None
        status = status * 10 + (p[i] - 48)
    if status < 200 or status == 204 or status == 304:
        return None
    i = 13
    while i < stop and CLASSES[p[i]] & FIELD:  # the reason
        i += 1
    if i >= stop or p[i] != 13 or p[i + 1] != 10:
        return None
    i += 2
    if read_fields(p, i, stop, None, &length, &close, &keep) < 0:
        return None
    if length < 0:
        return None
    whole = end + 4 + length
    if size < whole:
        return whole - size
    if size > whole:
        return None
    return end + 4, status, not close


cdef inline Py_ssize_t line_end(const char* p, Py_ssize_t i, Py_ssize_t stop) noexcept:
    # Where the line starting at i ends, its CRLF included (stop when none is found before it).
    cdef const char* found = <const char*>memmem(p + i, stop - i, b"\r\n", 2)
    return (found - p) + 2 if found != NULL else stop


cdef inline bint connection_line(const char* p, Py_ssize_t i, Py_ssize_t end) noexcept:
    # Whether the field line from i to end is a connection field (its name in any case).
    return end - i >= 11 and p[i + 10] == 58 and lower_eq(<const unsigned char*>p + i, b"connection", 10)


def relay_answer(bytes data, Py_ssize_t head, bytes added, bytes more):
    """An answer passed on as it came, less its connection fields, plus added and more (as
    h1frame_py.relay_answer): sized in a first pass over its field lines, a connection line skipped in the copy."""
    cdef const char* p = PyBytes_AS_STRING(data)
    cdef Py_ssize_t size = PyBytes_GET_SIZE(data)
    cdef Py_ssize_t added_len = PyBytes_GET_SIZE(added), more_len = PyBytes_GET_SIZE(more)
    if head < 4 or head > size:
        raise ValueError("head is not where a body starts in data")
    cdef Py_ssize_t fields_end = head - 2  # the last field line's CRLF ends here
    cdef Py_ssize_t first = line_end(p, 0, fields_end)  # after the status line
    cdef Py_ssize_t dropped = 0, i = first, end
    while i < fields_end:
        end = line_end(p, i, fields_end)
        if connection_line(p, i, end):
            dropped += end - i
        i = end
    cdef bytes framed = PyBytes_FromStringAndSize(NULL, size - dropped + added_len + more_len)
    cdef char* q = PyBytes_AS_STRING(framed)
    if dropped == 0:
        q = put(q, p, fields_end)
    else:
        q = put(q, p, first)
        i = first
        while i < fields_end:
            end = line_end(p, i, fields_end)
            if not connection_line(p, i, end):
                q = put(q, p + i, end - i)
            i = end
    q = put(q, PyBytes_AS_STRING(added), added_len)
    q = put(q, PyBytes_AS_STRING(more), more_len)
    put(q, p + fields_end, size - fields_end)  # the blank line and the body
    return framed


cdef inline bint narrow(object text) noexcept:
    # A str whose characters are one byte each (latin-1): copied as its bytes, as encode("latin-1") gives them.
    return PyUnicode_KIND(text) == PyUnicode_1BYTE_KIND


cdef inline char* put_text(char* p, object text) noexcept:
    return put(p, <const char*>PyUnicode_1BYTE_DATA(text), PyUnicode_GET_LENGTH(text))


cdef Py_ssize_t keep_field(list kept, object name, object value) except -2:
    # The field kept for framing and the bytes its line takes; -1 when its text is past latin-1.
    if not (narrow(name) and narrow(value)):
        return -1
    kept.append(name)
    kept.append(value)
    return PyUnicode_GET_LENGTH(name) + PyUnicode_GET_LENGTH(value) + SEP_SIZE + CRLF_SIZE


def frame_request(str method, str target, str authority, dict headers, frozenset drop, tuple extra, bytes body):
    """A request forwarded as it came (as h1frame_py.frame_request): sized in a first pass over the fields (each
    kept one's name and value, latin-1 text), filled with memcpy in a second. Text past latin-1 goes the pure
    twin's way, which refuses it as encode does."""
    cdef Py_ssize_t size = len(body), body_len = size, grew
    cdef list kept = []
    cdef object name, value
    for text in (method, target, authority):
        if not narrow(text):
            return py_frame_request(method, target, authority, headers, drop, extra, body)
        size += PyUnicode_GET_LENGTH(text)
    for name, value in headers.items():  # (a dict's own loop: the compiled one)
        if name in drop or (<str>name).startswith(":"):
            continue
        grew = keep_field(kept, name, value)
        if grew < 0:
            return py_frame_request(method, target, authority, headers, drop, extra, body)
        size += grew
    for name, value in extra:
        grew = keep_field(kept, name, value)
        if grew < 0:
            return py_frame_request(method, target, authority, headers, drop, extra, body)
        size += grew
    cdef Py_ssize_t digits = dec_len(<size_t>body_len)
    size += 1 + REQUEST_HOST_SIZE + CRLF_SIZE + CONTENT_LENGTH_SIZE + digits + 2 * CRLF_SIZE
    cdef bytes framed = PyBytes_FromStringAndSize(NULL, size)
    cdef char* p = PyBytes_AS_STRING(framed)
    p = put_text(p, method)
    p[0] = 32
    p = put_text(p + 1, target)
    p = put(p, b" HTTP/1.1\r\nhost: ", REQUEST_HOST_SIZE)
    p = crlf(put_text(p, authority))
    cdef Py_ssize_t i
    for i in range(0, len(kept), 2):
        p = put_text(p, kept[i])
        p = put(p, b": ", SEP_SIZE)
        p = crlf(put_text(p, kept[i + 1]))
    p = put(p, b"content-length: ", CONTENT_LENGTH_SIZE)
    p = crlf(crlf(write_dec(p, <size_t>body_len, digits)))
    if body_len:
        put(p, PyBytes_AS_STRING(body), body_len)
    return framed


# A request body filled in place: the bytes object the request will carry, made at its final size and written
# by the socket's reads through the buffer this exports, then handed out by take(). Nothing else sees it before:
# it is not hashed, shared or exported read-only until then, and no view of it is made after (a read's view may
# still be held while the read's bytes are handed on: it writes no more).
cdef class Filling:
    cdef bytes body
    cdef Py_ssize_t size

    def __cinit__(self, Py_ssize_t size):
        if size <= 0:
            raise ValueError("a body filled in place has at least one byte")
        self.body = PyBytes_FromStringAndSize(NULL, size)
        self.size = size

    def __getbuffer__(self, Py_buffer* view, int flags):
        if self.body is None:
            raise BufferError("the body was taken")
        PyBuffer_FillInfo(view, self, PyBytes_AS_STRING(self.body), self.size, 0, flags)

    def room(self, Py_ssize_t at):
        """The writable bytes from ``at`` to the end."""
        return memoryview(self)[at:]

    def take(self):
        """The body, once: no view of it is made after."""
        if self.body is None:
            raise BufferError("the body was taken")
        body, self.body = self.body, None
        return body
