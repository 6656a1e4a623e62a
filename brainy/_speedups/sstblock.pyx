# SSTable data block, compiled twin of sstblock_py.py (docs/store-format.md, "Data block").
#
#   block    := contents   crc: u32 (crc32 of contents)
#   contents := entry* restart: u32 * num_restarts   num_restarts: u32
#   entry    := shared: varint  unshared: varint  generation: varint  value_len: varint
#               key_delta[unshared]  value[value_len]
#
# Same names, same errors in the same order, byte-identical encodings as the pure twin; the
# suite in tests/test_sstblock.py runs against both.

from cpython.buffer cimport PyBUF_READ, PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.memoryview cimport PyMemoryView_FromMemory
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.number cimport PyNumber_Index
from libc.stdint cimport uint32_t, uint64_t
from libc.string cimport memcmp, memcpy

from array import array
from hashlib import blake2b

from isal.isal_zlib import crc32 as _crc32

from brainy._speedups.errors import BlockCorruptError

__all__ = ["encode_block", "decode_block", "read_index", "bisect_index", "crc32", "bloom_holds", "RESTART_INTERVAL"]

RESTART_INTERVAL = 16  # "Every 16th entry is a restart point"

cdef object U64_MAX = (1 << 64) - 1
cdef object U32_MAX = (1 << 32) - 1


cdef uint32_t crc32_of(const unsigned char* p, Py_ssize_t n) except? 0:
    # ISA-L's crc32 (brainy/store/crc.py) through its Python entry: a block is 4 KiB or more, so the call's
    # 0.1 us is small beside zlib's 3 us for the same bytes in C
    return _crc32(PyMemoryView_FromMemory(<char*>p, n, PyBUF_READ))


cdef int corrupt(str reason, object at) except -1:
    raise BlockCorruptError(reason, at)


cdef int varint_failed(int status, Py_ssize_t at) except -1:
    if status == VARINT_OVERLONG:
        raise BlockCorruptError("bad varint", at)
    raise BlockCorruptError("entry runs past restarts", at)


def crc32(data):
    """The crc32 (zlib's, as an unsigned int) of a bytes-like object."""
    return _crc32(data)


def encode_block(keys, gens, values, restart_interval=RESTART_INTERVAL):
    """Encode parallel lists of versions as one data block: ``contents + crc32(contents)``."""
    # Checks, order and messages as sstblock_py._check_entries.
    cdef list ks = list(keys), gs = list(gens), vs = list(values)
    cdef Py_ssize_t n = len(ks), i, interval, shared, klen, vlen, prev_len = 0
    cdef Py_ssize_t total = 0, num_restarts
    cdef const unsigned char* kp
    cdef const unsigned char* prev = NULL
    cdef unsigned char* out
    cdef unsigned char* p
    cdef unsigned char* restarts
    cdef uint64_t gen
    cdef bytes key, value, block
    if n != len(gs) or n != len(vs):
        raise ValueError(f"keys, gens and values differ in length: {n}, {len(gs)}, {len(vs)}")
    if n == 0:
        raise ValueError("a data block holds at least one entry")
    ri = PyNumber_Index(restart_interval)
    if ri < 1:
        raise ValueError(f"restart_interval must be at least 1, got {ri}")
    interval = min(ri, n)
    for i in range(n):
        key_obj, value_obj = ks[i], vs[i]
        if not isinstance(key_obj, bytes):
            raise TypeError(f"keys[{i}] must be bytes, got {type(key_obj).__name__}")
        if not isinstance(value_obj, bytes):
            raise TypeError(f"values[{i}] must be bytes, got {type(value_obj).__name__}")
        g = PyNumber_Index(gs[i])
        if not 0 <= g <= U64_MAX:
            raise ValueError(f"gens[{i}] is outside 0..2**64-1: {g}")
        gs[i] = g
        if i and (key_obj < ks[i - 1] or (key_obj == ks[i - 1] and g >= gs[i - 1])):
            raise ValueError(f"entry {i} is out of order: keys ascend, and generations descend within a key")

    # Pass 1: size the block, so pass 2 writes straight into the result.
    for i in range(n):
        key = <bytes>ks[i]
        kp = <const unsigned char*>PyBytes_AS_STRING(key)
        klen = PyBytes_GET_SIZE(key)
        vlen = PyBytes_GET_SIZE(<bytes>vs[i])
        shared = 0 if i % interval == 0 else shared_prefix(prev, prev_len, kp, klen)
        total += (varint_len(<uint64_t>shared) + varint_len(<uint64_t>(klen - shared))
                  + varint_len(<uint64_t>gs[i]) + varint_len(<uint64_t>vlen) + klen - shared + vlen)
        prev, prev_len = kp, klen
    num_restarts = (n + interval - 1) // interval
    total += 4 * num_restarts + NUM_RESTARTS_SIZE
    if total > U32_MAX:
        raise ValueError(f"a data block's contents must fit u32 offsets, got {total} bytes")

    # Pass 2: entries, then the restart array, num_restarts and the crc.
    block = PyBytes_FromStringAndSize(NULL, total + CRC_SIZE)
    out = <unsigned char*>PyBytes_AS_STRING(block)
    p = out
    restarts = out + total - NUM_RESTARTS_SIZE - 4 * num_restarts
    prev, prev_len = NULL, 0
    for i in range(n):
        key = <bytes>ks[i]
        value = <bytes>vs[i]
        kp = <const unsigned char*>PyBytes_AS_STRING(key)
        klen = PyBytes_GET_SIZE(key)
        vlen = PyBytes_GET_SIZE(value)
        if i % interval == 0:
            write_u32le(restarts + 4 * (i // interval), <uint32_t>(p - out))
            shared = 0
        else:
            shared = shared_prefix(prev, prev_len, kp, klen)
        gen = gs[i]
        p = write_varint(p, <uint64_t>shared)
        p = write_varint(p, <uint64_t>(klen - shared))
        p = write_varint(p, gen)
        p = write_varint(p, <uint64_t>vlen)
        memcpy(p, kp + shared, klen - shared)
        p += klen - shared
        memcpy(p, PyBytes_AS_STRING(value), vlen)
        p += vlen
        prev, prev_len = kp, klen
    write_u32le(out + total - NUM_RESTARTS_SIZE, <uint32_t>num_restarts)
    write_u32le(out + total, crc32_of(out, total))
    return block


def decode_block(buf, offset, size):
    """Decode the block whose contents are ``buf[offset:offset+size]``, crc following."""
    cdef Py_buffer view
    offset = PyNumber_Index(offset)
    size = PyNumber_Index(size)
    if offset < 0 or size < 0:
        raise ValueError(f"offset and size must not be negative, got {offset}, {size}")
    PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE)
    try:
        # Python ints here, so a huge offset or size is a short buffer, not an overflow.
        if offset + size + CRC_SIZE > view.len:
            raise BlockCorruptError("truncated block read")
        return decode_from(<const unsigned char*>view.buf + <Py_ssize_t>offset, <Py_ssize_t>size)
    finally:
        PyBuffer_Release(&view)


cdef tuple decode_from(const unsigned char* data, Py_ssize_t size):
    # data[0:size] is contents, data[size:size+4] its crc; the caller has checked both are there.
    cdef const unsigned char* p = data
    cdef const unsigned char* limit
    cdef const unsigned char* restarts
    cdef const unsigned char* prev = NULL
    cdef unsigned char* kp
    cdef Py_ssize_t pos, prev_len = 0, klen, common
    cdef uint32_t num_restarts, ri = 0, r
    cdef uint64_t shared = 0, unshared = 0, gen = 0, value_len = 0, prev_gen = 0
    cdef int status, restart, c
    cdef list keys = [], gens = [], values = []
    cdef bytes key, value

    if crc32_of(data, size) != read_u32le(data + size):
        corrupt("block checksum mismatch", None)
    if size < NUM_RESTARTS_SIZE:
        corrupt("block too short", None)
    num_restarts = read_u32le(data + size - NUM_RESTARTS_SIZE)
    if num_restarts == 0 or num_restarts > <uint64_t>((size - NUM_RESTARTS_SIZE) // 4):
        corrupt("bad restart count", None)
    limit = data + size - NUM_RESTARTS_SIZE - 4 * <Py_ssize_t>num_restarts
    restarts = limit

    while p < limit:
        pos = p - data
        restart = 0
        if ri < num_restarts:
            r = read_u32le(restarts + 4 * ri)
            if r == <uint64_t>pos:
                restart = 1
                ri += 1
            elif r < <uint64_t>pos or pos == 0:
                corrupt("bad restart offset", pos)
        status = read_varint(&p, limit, &shared)
        if status != VARINT_OK:
            varint_failed(status, pos)
        status = read_varint(&p, limit, &unshared)
        if status != VARINT_OK:
            varint_failed(status, pos)
        status = read_varint(&p, limit, &gen)
        if status != VARINT_OK:
            varint_failed(status, pos)
        status = read_varint(&p, limit, &value_len)
        if status != VARINT_OK:
            varint_failed(status, pos)
        if (restart and shared != 0) or shared > <uint64_t>prev_len:
            corrupt("bad shared length", pos)
        if unshared > <uint64_t>(limit - p):
            corrupt("entry runs past restarts", pos)
        klen = <Py_ssize_t>(shared + unshared)
        key = PyBytes_FromStringAndSize(NULL, klen)
        kp = <unsigned char*>PyBytes_AS_STRING(key)
        if shared:
            memcpy(kp, prev, <size_t>shared)
        memcpy(kp + shared, p, <size_t>unshared)
        p += unshared
        if value_len > <uint64_t>(limit - p):
            corrupt("entry runs past restarts", pos)
        value = PyBytes_FromStringAndSize(<const char*>p, <Py_ssize_t>value_len)
        p += value_len
        if prev != NULL:
            # The first `shared` bytes are equal by construction; compare the rest.
            common = klen if klen < prev_len else prev_len
            c = memcmp(kp + shared, prev + shared, <size_t>(common - <Py_ssize_t>shared))
            if c < 0 or (c == 0 and (klen < prev_len or (klen == prev_len and gen >= prev_gen))):
                corrupt("keys out of order", pos)
        keys.append(key)
        gens.append(gen)
        values.append(value)
        prev, prev_len, prev_gen = kp, klen, gen
    if ri != num_restarts:
        corrupt("bad restart offset", limit - data)
    return keys, gens, values


def bloom_holds(const unsigned char[::1] contents, bytes key):
    """Whether a table's bloom block may hold ``key`` (see sstblock_py.bloom_holds): the probes in C, the hash
    still hashlib's BLAKE2b."""
    cdef Py_ssize_t n = contents.shape[0]
    if n < 4:
        raise ValueError("a bloom block holds at least its probe count")
    cdef uint32_t probes = contents[0] | (contents[1] << 8) | (contents[2] << 16) | (<uint32_t>contents[3] << 24)
    cdef uint64_t m = (n - 4) * 8
    if m == 0:
        raise ZeroDivisionError("a bloom block with no bits")
    cdef bytes digest = blake2b(key, digest_size=8).digest()
    cdef const unsigned char* d = <const unsigned char*>PyBytes_AS_STRING(digest)
    cdef uint64_t h = 0
    cdef int j
    for j in range(8):
        h |= (<uint64_t>d[j]) << (8 * j)
    cdef uint64_t h1 = h & 0xFFFFFFFF, h2 = h >> 32, b
    cdef uint32_t i
    for i in range(probes):
        b = (h1 + i * h2) % m
        if not contents[4 + (b >> 3)] & (1 << (b & 7)):
            return False
    return True


# --- the index block (docs/store-format.md, "Index block") ---------------------------------------
# A MessagePack map {"blocks": [[last_key (bin), offset, size], ...], "minGen", "maxGen", "entries"}, read
# in place into three arrays: where each last key lies, and each block's offset and size; no object per block
# (326,686 at 1.8 GB: 74 ms through msgpack, then 28-100 ms for a bytes object a key), the same answers as
# sstblock_py.read_index. The common row is read inline (the general reader's calls cost 50 ns a row).

cdef class _Reader:
    cdef const unsigned char* p
    cdef Py_ssize_t at, size

    cdef int need(self, Py_ssize_t n) except -1:
        if n > self.size - self.at:
            raise ValueError("index block does not decode: it ends early")
        return 0

    cdef uint64_t uint_be(self, int width) except? 0xFFFFFFFFFFFFFFFF:
        cdef uint64_t v = 0
        cdef int i
        self.need(width)
        for i in range(width):
            v = (v << 8) | self.p[self.at + i]
        self.at += width
        return v

    cdef Py_ssize_t length(self, unsigned char fix_base, unsigned char fix_mask, unsigned char w8,
                           unsigned char w16, unsigned char w32, str what) except -1:
        """The length a str/bin/array/map header says (fix_mask 0: no fix form)."""
        cdef unsigned char t
        self.need(1)
        t = self.p[self.at]
        self.at += 1
        if fix_mask and (t & ~fix_mask) == fix_base:
            return t & fix_mask
        if w8 and t == w8:
            return <Py_ssize_t>self.uint_be(1)
        if t == w16:
            return <Py_ssize_t>self.uint_be(2)
        if t == w32:
            return <Py_ssize_t>self.uint_be(4)
        raise ValueError(f"index block does not decode: {what} expected")

    cdef uint64_t unsigned(self) except? 0xFFFFFFFFFFFFFFFF:
        cdef unsigned char t
        self.need(1)
        t = self.p[self.at]
        self.at += 1
        if t < 0x80:
            return t
        if 0xcc <= t <= 0xcf:
            return self.uint_be(1 << (t - 0xcc))
        raise ValueError("index block does not decode: an offset or size is not an unsigned int")

    cdef int skip_scalar(self) except -1:
        """Pass over a field other than the blocks: an int, nil, a bool or a string (the storeId)."""
        cdef unsigned char t
        cdef Py_ssize_t n
        self.need(1)
        t = self.p[self.at]
        self.at += 1
        if t < 0x80 or t >= 0xe0 or t in (0xc0, 0xc2, 0xc3):
            return 0
        if 0xcc <= t <= 0xcf:
            self.uint_be(1 << (t - 0xcc))
            return 0
        if 0xd0 <= t <= 0xd3:
            self.uint_be(1 << (t - 0xd0))
            return 0
        if 0xa0 <= t <= 0xbf or 0xd9 <= t <= 0xdb:
            n = (t & 0x1f) if t <= 0xbf else <Py_ssize_t>self.uint_be(1 << (t - 0xd9))
            self.need(n)
            self.at += n
            return 0
        raise ValueError("index block does not decode: a field is not an int or a string")


def read_index(contents):
    """The block index of a table, read in place: (key bounds, offsets, sizes), one each per data block in file
    order; a block's last key is ``contents[bounds[2 * i]:bounds[2 * i + 1]]`` (no bytes object a block:
    :func:`bisect_index` compares them where they lie). ValueError when the contents are not such a map."""
    cdef Py_buffer view
    cdef _Reader r = _Reader()
    cdef Py_ssize_t fields, n, i, klen, name_len
    cdef object bounds = None, offsets = None, sizes = None
    cdef unsigned long long[::1] bound_of, at_of, size_of
    PyObject_GetBuffer(contents, &view, PyBUF_SIMPLE)
    try:
        r.p, r.at, r.size = <const unsigned char*>view.buf, 0, view.len
        fields = r.length(0x80, 0x0f, 0, 0xde, 0xdf, "a map")
        for _ in range(fields):
            name_len = r.length(0xa0, 0x1f, 0xd9, 0xda, 0xdb, "a field name")
            r.need(name_len)
            name = PyBytes_FromStringAndSize(<const char*>r.p + r.at, name_len).decode()
            r.at += name_len
            if name != "blocks":
                r.skip_scalar()
                continue
            n = r.length(0x90, 0x0f, 0, 0xdc, 0xdd, "the blocks array")
            bounds, offsets, sizes = _uints(2 * n), _uints(n), _uints(n)
            bound_of, at_of, size_of = bounds, offsets, sizes
            for i in range(n):
                if _row_inline(r, &bound_of[2 * i], &at_of[i], &size_of[i]):
                    continue
                if r.length(0x90, 0x0f, 0, 0xdc, 0xdd, "a block's row") != 3:
                    raise ValueError("index block does not decode: a block's row is not [last key, offset, size]")
                klen = r.length(0, 0, 0xc4, 0xc5, 0xc6, "a last key (bin)")
                r.need(klen)
                bound_of[2 * i], bound_of[2 * i + 1] = r.at, r.at + klen
                r.at += klen
                at_of[i] = r.unsigned()
                size_of[i] = r.unsigned()
        if r.at != r.size:
            raise ValueError("index block does not decode: bytes after the map")
        if bounds is None:
            raise ValueError("index block does not decode: no blocks")
    except UnicodeDecodeError:
        raise ValueError("index block does not decode: a field name is not UTF-8") from None
    finally:
        PyBuffer_Release(&view)
    return bounds, offsets, sizes


cdef inline Py_ssize_t _uint_at(const unsigned char* p, Py_ssize_t at, Py_ssize_t end,
                                unsigned long long* v) noexcept:
    """The unsigned int msgpack writes at ``at`` (fix, or 8 to 64 bits) into ``v``: where it ends, or -1."""
    cdef unsigned char t
    cdef int width, k
    cdef unsigned long long x = 0
    if at >= end:
        return -1
    t = p[at]
    if t < 0x80:
        v[0] = t
        return at + 1
    if t < 0xcc or t > 0xcf:
        return -1
    width = 1 << (t - 0xcc)
    if width > end - at - 1:
        return -1
    for k in range(width):
        x = (x << 8) | p[at + 1 + k]
    v[0] = x
    return at + 1 + width


cdef inline bint _row_inline(_Reader r, unsigned long long* bound, unsigned long long* offset,
                             unsigned long long* size) noexcept:
    """The common row, [last key (bin 8), offset, size] (0x93 0xc4 ...), read without the general reader's calls;
    False, nothing consumed, for any other bytes, which the general reader then reads or refuses."""
    cdef const unsigned char* p = r.p
    cdef Py_ssize_t at = r.at, end = r.size, klen
    if end - at < 3 or p[at] != 0x93 or p[at + 1] != 0xc4:
        return False
    klen = p[at + 2]
    if klen > end - at - 3:
        return False
    at = _uint_at(p, at + 3 + klen, end, offset)
    if at < 0:
        return False
    at = _uint_at(p, at, end, size)
    if at < 0:
        return False
    bound[0], bound[1] = r.at + 3, r.at + 3 + klen
    r.at = at
    return True


def bisect_index(const unsigned char[::1] contents, const unsigned long long[::1] bounds, bytes key):
    """``bisect.bisect_left`` over the last keys :func:`read_index` found in ``contents`` (the bounds as it
    found them): the first block whose last key is at or after ``key``."""
    cdef Py_ssize_t lo = 0, hi = bounds.shape[0] // 2, mid, start, klen, n = PyBytes_GET_SIZE(key)
    cdef const unsigned char* k = <const unsigned char*>PyBytes_AS_STRING(key)
    cdef int c
    if hi and bounds[2 * hi - 1] > <unsigned long long>contents.shape[0]:
        raise ValueError("the key bounds lie past the index")
    while lo < hi:
        mid = (lo + hi) // 2
        start = bounds[2 * mid]
        klen = bounds[2 * mid + 1] - start
        c = memcmp(&contents[start], k, klen if klen < n else n) if klen and n else 0
        if c < 0 or (c == 0 and klen < n):
            lo = mid + 1
        else:
            hi = mid
    return lo


cdef object _uints(Py_ssize_t n):
    return array("Q", bytes(8 * n))
