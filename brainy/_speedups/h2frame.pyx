# cython: language_level=3
# HTTP/2 frames (RFC 9113 4.1) and HPACK (RFC 7541), compiled twin of h2frame_py.py.
#
#   frame   := length: u24  type: u8  flags: u8  R: 1 bit  stream_id: u31  payload[length]
#
# Same names, same answers, byte for byte, as the pure twin; tests/test_h2frame.py runs both and
# compares them. The fixed tables (static table, Huffman codes, the nibble decoding machine) come
# from h2frame_tables.py, shared with the pure twin, copied into C arrays at import. Header blocks
# are read through a char pointer and written into one growing C buffer, then made bytes once.

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from libc.stdint cimport uint8_t, uint32_t, uint64_t
from libc.stdlib cimport free, malloc, realloc
from libc.string cimport memcpy

from brainy._speedups.errors import HeaderListTooLarge, HpackError, RequestMalformed
from brainy._speedups.h2frame_tables import (ACCEPT, CONNECTION_SPECIFIC, EMIT, FAIL, HUFFMAN, REQUEST_PSEUDO, SECRET, STATIC,
                                            UNINDEXED, huffman_states)

__all__ = ["Decoder", "Encoder", "frame", "huffman_decode", "huffman_encode", "parse_header", "request_head"]

DEF ENTRY_OVERHEAD = 32
DEF DEFAULT_TABLE_SIZE = 4096
DEF HEADERS = 0x1
DEF CONTINUATION = 0x9
DEF END_STREAM = 0x1
DEF END_HEADERS = 0x4

cdef uint32_t _states[4096]
cdef uint32_t _codes[257]
cdef uint8_t _lengths[257]
cdef int _EMIT = EMIT, _FAIL = FAIL, _ACCEPT = ACCEPT

for _i, _entry in enumerate(huffman_states()):
    _states[_i] = _entry
for _i, (_code, _bits) in enumerate(HUFFMAN):
    _codes[_i] = _code
    _lengths[_i] = _bits

cdef tuple _STATIC = STATIC
cdef dict _FULL = {field: i + 1 for i, field in reversed(list(enumerate(STATIC)))}
cdef dict _NAMES = {name: i + 1 for i, (name, _) in reversed(list(enumerate(STATIC)))}
cdef frozenset _UNINDEXED = UNINDEXED
cdef frozenset _SECRET = SECRET
cdef frozenset _REQUEST_PSEUDO = REQUEST_PSEUDO
cdef frozenset _CONNECTION_SPECIFIC = CONNECTION_SPECIFIC


cdef inline bytes _as_bytes(object data):
    return data if type(data) is bytes else bytes(data)


def parse_header(data, Py_ssize_t at=0):
    """``(length, type, flags, stream_id)`` of the frame whose nine-byte header starts at ``data[at]``,
    or None while fewer than nine bytes are there. The reserved bit is dropped (RFC 9113 4.1)."""
    cdef bytes raw = _as_bytes(data)
    cdef const uint8_t* p
    if PyBytes_GET_SIZE(raw) - at < 9 or at < 0:
        return None
    p = <const uint8_t*>PyBytes_AS_STRING(raw) + at
    return ((<uint32_t>p[0] << 16) | (<uint32_t>p[1] << 8) | p[2], p[3], p[4],
            ((<uint32_t>p[5] & 0x7F) << 24) | (<uint32_t>p[6] << 16) | (<uint32_t>p[7] << 8) | p[8])


cdef bytes _frame(int type, int flags, uint32_t stream_id, const uint8_t* payload, Py_ssize_t n):
    cdef bytes out = PyBytes_FromStringAndSize(NULL, 9 + n)
    cdef uint8_t* d = <uint8_t*>PyBytes_AS_STRING(out)
    d[0] = <uint8_t>(n >> 16)
    d[1] = <uint8_t>(n >> 8)
    d[2] = <uint8_t>n
    d[3] = <uint8_t>type
    d[4] = <uint8_t>flags
    d[5] = <uint8_t>(stream_id >> 24)
    d[6] = <uint8_t>(stream_id >> 16)
    d[7] = <uint8_t>(stream_id >> 8)
    d[8] = <uint8_t>stream_id
    if n:
        memcpy(d + 9, payload, n)
    return out


def frame(int kind, int flags, uint32_t stream_id, payload=b""):
    """One frame: its nine-byte header, then ``payload``."""
    cdef const uint8_t[::1] view
    if type(payload) is bytes:
        return _frame(kind, flags, stream_id, <const uint8_t*>PyBytes_AS_STRING(payload),
                      PyBytes_GET_SIZE(payload))
    view = memoryview(payload).cast("B")
    if view.shape[0] == 0:
        return _frame(kind, flags, stream_id, NULL, 0)
    return _frame(kind, flags, stream_id, &view[0], view.shape[0])


def request_head(fields):
    """``(method, path, query, headers, content_length)`` of a request's decoded header fields: the
    pseudo-headers read, ``:path`` split at its ``?``, the regular fields by name (latin-1; the last of a
    repeated name), ``content_length`` -1 when none is stated. Fields that make the request malformed
    (RFC 9113 8.1.1, 8.2, 8.3.1) raise :class:`RequestMalformed`."""
    cdef bytes name, value
    cdef bytes method, path
    cdef dict headers = {}, pseudo = {}
    cdef const uint8_t* p
    cdef Py_ssize_t i, n
    cdef long long length = -1
    cdef uint8_t c
    for name, value in fields:
        p = <const uint8_t*>PyBytes_AS_STRING(value)
        n = PyBytes_GET_SIZE(value)
        for i in range(n):
            c = p[i]
            if c == 13 or c == 10 or c == 0:
                raise RequestMalformed(f"{name!r} holds CR, LF or NUL")
        p = <const uint8_t*>PyBytes_AS_STRING(name)
        n = PyBytes_GET_SIZE(name)
        if n and p[0] == 58:  # ':'
            if headers:
                raise RequestMalformed(f"{name!r} after a regular field")
            if name not in _REQUEST_PSEUDO:
                raise RequestMalformed(f"{name!r} is not a request pseudo-header")
            if name in pseudo:
                raise RequestMalformed(f"{name!r} twice")
            pseudo[name] = value
            continue
        if not n:
            raise RequestMalformed(f"{name!r} is not a lowercase name")
        for i in range(n):
            if 65 <= p[i] <= 90:
                raise RequestMalformed(f"{name!r} is not a lowercase name")
        if name in _CONNECTION_SPECIFIC or (name == b"te" and value != b"trailers"):
            raise RequestMalformed(f"{name!r} is connection-specific")
        if name == b"content-length":
            if not value.isdigit() or len(value) > 18 or (length >= 0 and int(value) != length):
                raise RequestMalformed("content-length is not one decimal length")
            length = int(value)
        headers[name.decode("latin-1")] = value.decode("latin-1")
    method = pseudo.get(b":method")
    if method is None:
        raise RequestMalformed("no :method")
    path = pseudo.get(b":path")
    if method != b"CONNECT" and (not pseudo.get(b":scheme") or not path):
        raise RequestMalformed("no :scheme or no :path")
    text = (path or b"/").decode("latin-1")
    at = text.find("?")
    if at < 0:
        return method.decode("latin-1"), text, "", headers, length
    return method.decode("latin-1"), text[:at], text[at + 1:], headers, length


# -- a growing output buffer -----------------------------------------------------------------------

cdef struct Buf:
    uint8_t* data
    Py_ssize_t size
    Py_ssize_t cap


cdef int _grow(Buf* b, Py_ssize_t more) except -1:
    cdef Py_ssize_t cap
    cdef uint8_t* data
    if b.size + more <= b.cap:
        return 0
    cap = max(b.cap * 2, b.size + more, 256)
    data = <uint8_t*>realloc(b.data, cap)
    if data == NULL:
        raise MemoryError()
    b.data = data
    b.cap = cap
    return 0


cdef inline int _put(Buf* b, uint8_t byte) except -1:
    if b.size >= b.cap:
        _grow(b, 1)
    b.data[b.size] = byte
    b.size += 1
    return 0


cdef int _put_integer(Buf* b, uint64_t value, int prefix, uint8_t first) except -1:
    cdef uint64_t limit = (1 << prefix) - 1
    if value < limit:
        return _put(b, first | <uint8_t>value)
    _put(b, first | <uint8_t>limit)
    value -= limit
    while value >= 0x80:
        _put(b, <uint8_t>(value & 0x7F | 0x80))
        value >>= 7
    return _put(b, <uint8_t>value)


cdef Py_ssize_t _huffman_length(const uint8_t* s, Py_ssize_t n):
    cdef uint64_t bits = 0
    cdef Py_ssize_t i
    for i in range(n):
        bits += _lengths[s[i]]
    return <Py_ssize_t>((bits + 7) // 8)


cdef int _put_huffman(Buf* b, const uint8_t* s, Py_ssize_t n) except -1:
    cdef uint64_t acc = 0
    cdef int bits = 0
    cdef Py_ssize_t i
    cdef uint8_t byte
    _grow(b, _huffman_length(s, n))
    for i in range(n):
        byte = s[i]
        acc = (acc << _lengths[byte]) | _codes[byte]
        bits += _lengths[byte]
        while bits >= 8:
            bits -= 8
            b.data[b.size] = <uint8_t>(acc >> bits)
            b.size += 1
    if bits:
        b.data[b.size] = <uint8_t>((acc << (8 - bits)) | ((1 << (8 - bits)) - 1))
        b.size += 1
    return 0


cdef int _put_string(Buf* b, bytes value, bint huffman) except -1:
    cdef const uint8_t* s = <const uint8_t*>PyBytes_AS_STRING(value)
    cdef Py_ssize_t n = PyBytes_GET_SIZE(value), size
    if huffman and n:
        size = _huffman_length(s, n)
        if size < n:
            _put_integer(b, size, 7, 0x80)
            return _put_huffman(b, s, n)
    _put_integer(b, n, 7, 0)
    _grow(b, n)
    memcpy(b.data + b.size, s, n)
    b.size += n
    return 0


# -- Huffman (RFC 7541 5.2, Appendix B) ------------------------------------------------------------

cdef bytes _huffman_decode(const uint8_t* s, Py_ssize_t n):
    cdef bytes out = PyBytes_FromStringAndSize(NULL, n * 2)  # a code is at least 5 bits: at most 8/5 n octets
    cdef uint8_t* d = <uint8_t*>PyBytes_AS_STRING(out)
    cdef Py_ssize_t i, made = 0
    cdef uint32_t state = 0, entry, flags = _ACCEPT
    cdef uint8_t nibble
    for i in range(2 * n):  # a nibble at a time, the high one first
        nibble = (s[i >> 1] >> 4) if not i & 1 else (s[i >> 1] & 0xF)
        entry = _states[state << 4 | nibble]
        flags = entry >> 16
        if flags & _FAIL:
            raise HpackError("a Huffman string contains EOS")
        if flags & _EMIT:
            d[made] = <uint8_t>(entry >> 8)
            made += 1
        state = entry & 0xFF
    if not flags & _ACCEPT:
        raise HpackError("a Huffman string ends in padding that is not EOS's prefix")
    return out[:made]


def huffman_decode(data):
    """The octets ``data`` Huffman-encodes, or HpackError (EOS inside, or padding that is not EOS's prefix)."""
    cdef bytes raw = _as_bytes(data)
    return _huffman_decode(<const uint8_t*>PyBytes_AS_STRING(raw), PyBytes_GET_SIZE(raw))


def huffman_encode(data):
    """``data`` Huffman-encoded, padded to a whole octet with EOS's prefix (all ones)."""
    cdef bytes raw = _as_bytes(data)
    cdef Buf b
    b.data, b.size, b.cap = NULL, 0, 0
    try:
        _put_huffman(&b, <const uint8_t*>PyBytes_AS_STRING(raw), PyBytes_GET_SIZE(raw))
        return PyBytes_FromStringAndSize(<char*>b.data, b.size) if b.size else b""
    finally:
        free(b.data)


# -- integers and strings (RFC 7541 5.1, 5.2) ------------------------------------------------------

cdef Py_ssize_t _integer(const uint8_t* s, Py_ssize_t at, Py_ssize_t end, int prefix, uint64_t* value) except -1:
    cdef uint64_t limit = (1 << prefix) - 1
    cdef int shift = 0
    cdef uint8_t byte
    value[0] = s[at] & limit
    at += 1
    if value[0] < limit:
        return at
    while True:
        if at >= end:
            raise HpackError("an integer runs past the header block")
        if shift > 28:
            raise HpackError("an integer is longer than any header block could need")
        byte = s[at]
        at += 1
        value[0] += <uint64_t>(byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return at


cdef bytes _string(const uint8_t* s, Py_ssize_t* at, Py_ssize_t end):
    """The string literal at ``at[0]``; ``at[0]`` moves past it."""
    cdef uint64_t length
    cdef bint huffman
    cdef Py_ssize_t start
    if at[0] >= end:
        raise HpackError("a string literal runs past the header block")
    huffman = s[at[0]] & 0x80
    start = _integer(s, at[0], end, 7, &length)
    if length > <uint64_t>(end - start):
        raise HpackError("a string literal runs past the header block")
    at[0] = start + <Py_ssize_t>length
    if huffman:
        return _huffman_decode(s + start, <Py_ssize_t>length)
    return PyBytes_FromStringAndSize(<const char*>(s + start), <Py_ssize_t>length)


# -- the dynamic table (RFC 7541 2.3.2, 4) ---------------------------------------------------------

cdef class _Table:
    """The dynamic table: newest entry at index 62, the oldest evicted first once over ``max_size``."""

    cdef public list entries   # oldest first
    cdef public Py_ssize_t size, max_size, evicted

    def __init__(self, Py_ssize_t max_size):
        self.entries = []
        self.size = 0
        self.max_size = max_size
        self.evicted = 0

    cdef tuple field(self, uint64_t index):
        cdef Py_ssize_t at
        if 1 <= index <= 61:
            return <tuple>_STATIC[index - 1]
        at = <Py_ssize_t>len(self.entries) - 1 - <Py_ssize_t>(index - 62)
        if index < 1 or at < 0:
            raise HpackError(f"index {index} is in neither table")
        return <tuple>self.entries[at]

    cdef void add(self, bytes name, bytes value):
        self.entries.append((name, value))
        self.size += len(name) + len(value) + ENTRY_OVERHEAD
        self.evict()

    cdef void resize(self, Py_ssize_t max_size):
        self.max_size = max_size
        self.evict()

    cdef void evict(self):
        cdef tuple oldest
        while self.size > self.max_size:
            oldest = self.entries.pop(0)
            self.size -= len(<bytes>oldest[0]) + len(<bytes>oldest[1]) + ENTRY_OVERHEAD
            self.evicted += 1


cdef class Decoder:
    """The peer's header blocks, in order, into fields ``[(name, value), ...]`` (bytes, as sent).

    ``max_table_size`` is our SETTINGS_HEADER_TABLE_SIZE, the most a table-size update may ask for;
    ``max_header_list_size`` our SETTINGS_MAX_HEADER_LIST_SIZE."""

    cdef _Table _table
    cdef public Py_ssize_t max_table_size, max_header_list_size

    def __init__(self, Py_ssize_t max_table_size=DEFAULT_TABLE_SIZE, Py_ssize_t max_header_list_size=1 << 16):
        self._table = _Table(max_table_size)
        self.max_table_size = max_table_size
        self.max_header_list_size = max_header_list_size

    @property
    def table_size(self):
        """The bytes the dynamic table holds now (RFC 7541 4.1)."""
        return self._table.size

    def decode(self, block):
        cdef bytes data = _as_bytes(block)
        cdef const uint8_t* s = <const uint8_t*>PyBytes_AS_STRING(data)
        cdef Py_ssize_t at = 0, end = PyBytes_GET_SIZE(data), listed = 0
        cdef uint64_t index
        cdef uint8_t byte
        cdef bint first = True
        cdef object name, value
        cdef tuple field
        cdef list fields = []
        cdef _Table table = self._table
        while at < end:
            byte = s[at]
            if byte & 0x80:                      # indexed field
                at = _integer(s, at, end, 7, &index)
                if index == 0:
                    raise HpackError("index 0 names no field")
                field = table.field(index)
                name, value = field[0], field[1]
            elif byte & 0x40:                    # literal with incremental indexing
                at = _integer(s, at, end, 6, &index)
                if index == 0:
                    name = _string(s, &at, end)
                else:
                    name = table.field(index)[0]
                value = _string(s, &at, end)
                table.add(name, value)
            elif byte & 0x20:                    # dynamic table size update: only before the first field
                at = _integer(s, at, end, 5, &index)
                if not first:
                    raise HpackError("a table size update after a field")
                if index > <uint64_t>self.max_table_size:
                    raise HpackError(f"a table size update to {index}, over the {self.max_table_size} allowed")
                table.resize(<Py_ssize_t>index)
                continue
            else:                                # literal without indexing, or never indexed
                at = _integer(s, at, end, 4, &index)
                if index == 0:
                    name = _string(s, &at, end)
                else:
                    name = table.field(index)[0]
                value = _string(s, &at, end)
            first = False
            listed += len(<bytes>name) + len(<bytes>value) + ENTRY_OVERHEAD
            if listed > self.max_header_list_size:
                raise HeaderListTooLarge(f"the header list is over {self.max_header_list_size} bytes")
            fields.append((name, value))
        return fields


cdef class Encoder:
    """Our header lists, in order, into header blocks and their frames, for a peer whose dynamic table
    is at most ``max_table_size`` (its SETTINGS_HEADER_TABLE_SIZE; 4,096 until it says otherwise)."""

    cdef _Table _table
    cdef dict _where, _named
    cdef list _updates
    cdef public bint huffman

    def __init__(self, Py_ssize_t max_table_size=DEFAULT_TABLE_SIZE):
        self._table = _Table(min(max_table_size, DEFAULT_TABLE_SIZE))
        self._where = {}
        self._named = {}
        self._updates = []
        self.huffman = True

    @property
    def table_size(self):
        return self._table.size

    def set_max_table_size(self, Py_ssize_t size):
        """The peer's SETTINGS_HEADER_TABLE_SIZE changed: use at most that (and never over 4,096), and say
        so at the start of the next block (RFC 7541 4.2: the smallest size first when it shrank twice)."""
        size = min(size, DEFAULT_TABLE_SIZE)
        smallest = min(self._updates[0], size) if self._updates else size
        self._updates = [smallest, size] if smallest != size else [size]
        self._table.resize(size)

    cdef int _encode(self, Buf* b, fields) except -1:
        cdef _Table table = self._table
        cdef Py_ssize_t size
        cdef object index, number
        cdef Py_ssize_t name_index
        cdef bint indexing, secret
        cdef bytes name, value
        for size in self._updates:
            _put_integer(b, size, 5, 0x20)
        self._updates = []
        for name, value in fields:
            if name in _UNINDEXED and value:
                # a value that changes with every answer (the timing, the length): never in either table whole, so
                # its name's index and the literal, without the lookups of the whole field (the same bytes)
                name_index = _NAMES.get(name, 0)
                _put_integer(b, name_index, 4, 0)
                if not name_index:
                    _put_string(b, name, self.huffman)
                _put_string(b, value, self.huffman)
                continue
            field = (name, value)
            index = _FULL.get(field)
            if index is None:
                number = self._where.get(field)
                if number is not None and <Py_ssize_t>number >= table.evicted:
                    index = 62 + len(table.entries) - 1 - (<Py_ssize_t>number - table.evicted)
            if index is not None:
                _put_integer(b, <Py_ssize_t>index, 7, 0x80)
                continue
            name_index = _NAMES.get(name, 0)
            if not name_index:
                number = self._named.get(name)
                if number is not None and <Py_ssize_t>number >= table.evicted:
                    name_index = 62 + len(table.entries) - 1 - (<Py_ssize_t>number - table.evicted)
            secret = name in _SECRET
            indexing = not secret and name not in _UNINDEXED and \
                len(name) + len(value) + ENTRY_OVERHEAD <= table.max_size // 2
            if indexing:
                _put_integer(b, name_index, 6, 0x40)
            else:
                _put_integer(b, name_index, 4, 0x10 if secret else 0)
            if not name_index:
                _put_string(b, name, self.huffman)
            _put_string(b, value, self.huffman)
            if indexing:
                self._where[field] = self._named[name] = table.evicted + len(table.entries)
                table.add(name, value)
        if len(self._where) > 2 * len(table.entries) + 64:
            # drop the lookups of evicted entries, so a peer's stream of distinct values cannot grow them
            self._where = {f: table.evicted + i for i, f in enumerate(table.entries)}
            self._named = {f[0]: table.evicted + i for i, f in enumerate(table.entries)}
        return 0

    def encode(self, fields):
        cdef Buf b
        b.data, b.size, b.cap = NULL, 0, 0
        try:
            self._encode(&b, fields)
            return PyBytes_FromStringAndSize(<char*>b.data, b.size) if b.size else b""
        finally:
            free(b.data)

    def headers(self, uint32_t stream_id, fields, bint end_stream, Py_ssize_t max_frame_size):
        """``fields`` as one HEADERS frame (END_STREAM when ``end_stream``), continued in CONTINUATION
        frames when the block is over ``max_frame_size`` (the peer's SETTINGS_MAX_FRAME_SIZE)."""
        cdef Buf b
        cdef Py_ssize_t at, n
        cdef list out
        b.data, b.size, b.cap = NULL, 0, 0
        try:
            self._encode(&b, fields)
            if b.size <= max_frame_size:
                return _frame(HEADERS, END_HEADERS | (END_STREAM if end_stream else 0), stream_id, b.data, b.size)
            out = [_frame(HEADERS, END_STREAM if end_stream else 0, stream_id, b.data, max_frame_size)]
            at = max_frame_size
            while at < b.size:
                n = min(max_frame_size, b.size - at)
                out.append(_frame(CONTINUATION, END_HEADERS if at + n >= b.size else 0, stream_id, b.data + at, n))
                at += n
            return b"".join(out)
        finally:
            free(b.data)
