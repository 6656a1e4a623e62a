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
from libc.string cimport memcmp, memcpy, memset

from array import array

from isal.isal_zlib import crc32 as _crc32

from brainy._speedups.errors import BlockCorruptError

__all__ = [
    "encode_block",
    "decode_block",
    "read_index",
    "bisect_index",
    "crc32",
    "bloom_holds",
    "build_bloom",
    "write_entries",
    "RESTART_INTERVAL",
]

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


def write_entries(entries, write, Py_ssize_t block_bytes, restart_interval=RESTART_INTERVAL):
    """A table's data blocks for ``entries``, each written as it is cut (see sstblock_py.write_entries): the
    entries' loop in C, each block encoded by encode_block."""
    cdef list index = [], bloom_keys = [], keys = [], gens = [], values = []
    cdef Py_ssize_t count = 0, pending = 0, offset = 0
    cdef object min_gen = None, max_gen = 0, last_key = None
    cdef bytes block
    for key, gen, value in entries:
        if type(key) is not bytes or type(last_key) is not bytes or (
            PyBytes_GET_SIZE(<bytes>key) != PyBytes_GET_SIZE(<bytes>last_key)
            or memcmp(PyBytes_AS_STRING(<bytes>key), PyBytes_AS_STRING(<bytes>last_key), PyBytes_GET_SIZE(<bytes>key))
        ):
            if key != last_key:
                bloom_keys.append(key)
                last_key = key
        keys.append(key)
        gens.append(gen)
        values.append(value)
        pending += len(key) + len(value) + 8
        count += 1
        if min_gen is None or gen < min_gen:
            min_gen = gen
        if gen > max_gen:
            max_gen = gen
        if pending >= block_bytes:
            block = encode_block(keys, gens, values, restart_interval)
            write(block)
            index.append([keys[len(keys) - 1], offset, PyBytes_GET_SIZE(block) - CRC_SIZE])
            offset += PyBytes_GET_SIZE(block)
            keys, gens, values, pending = [], [], [], 0
    if keys:
        block = encode_block(keys, gens, values, restart_interval)
        write(block)
        index.append([keys[len(keys) - 1], offset, PyBytes_GET_SIZE(block) - CRC_SIZE])
        offset += PyBytes_GET_SIZE(block)
    return index, bloom_keys, count, min_gen or 0, max_gen, offset


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


# BLAKE2b (RFC 7693) with an 8-byte digest and no key, the bloom's hash: hashlib's answer, without an object and a
# digest call a key (0.5 us of a flush's 1.2 us a vectored row went there). tests/test_sstblock.py holds it to
# hashlib over every length across a block's edges.
cdef extern from *:
    """
    #include <stdint.h>
    #include <string.h>
    static const uint64_t brainy_b2b_iv[8] = {
        0x6A09E667F3BCC908ULL, 0xBB67AE8584CAA73BULL, 0x3C6EF372FE94F82BULL, 0xA54FF53A5F1D36F1ULL,
        0x510E527FADE682D1ULL, 0x9B05688C2B3E6C1FULL, 0x1F83D9ABFB41BD6BULL, 0x5BE0CD19137E2179ULL};
    static const uint8_t brainy_b2b_sigma[12][16] = {
        {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}, {14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3},
        {11, 8, 12, 0, 5, 2, 15, 13, 10, 14, 3, 6, 7, 1, 9, 4}, {7, 9, 3, 1, 13, 12, 11, 14, 2, 6, 5, 10, 4, 0, 15, 8},
        {9, 0, 5, 7, 2, 4, 10, 15, 14, 1, 11, 12, 6, 8, 3, 13}, {2, 12, 6, 10, 0, 11, 8, 3, 4, 13, 7, 5, 15, 14, 1, 9},
        {12, 5, 1, 15, 14, 13, 4, 10, 0, 7, 6, 3, 9, 2, 8, 11}, {13, 11, 7, 14, 12, 1, 3, 9, 5, 0, 15, 4, 8, 6, 2, 10},
        {6, 15, 14, 9, 11, 3, 0, 8, 12, 2, 13, 7, 1, 4, 10, 5}, {10, 2, 8, 4, 7, 6, 1, 5, 15, 11, 9, 14, 3, 12, 13, 0},
        {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}, {14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3}};
    #define BRAINY_ROTR64(x, n) (((x) >> (n)) | ((x) << (64 - (n))))
    #define BRAINY_B2B_G(a, b, c, d, x, y) do { \
        v[a] = v[a] + v[b] + (x); v[d] = BRAINY_ROTR64(v[d] ^ v[a], 32); \
        v[c] = v[c] + v[d]; v[b] = BRAINY_ROTR64(v[b] ^ v[c], 24); \
        v[a] = v[a] + v[b] + (y); v[d] = BRAINY_ROTR64(v[d] ^ v[a], 16); \
        v[c] = v[c] + v[d]; v[b] = BRAINY_ROTR64(v[b] ^ v[c], 63); } while (0)
    static void brainy_b2b_compress(uint64_t h[8], const uint8_t block[128], uint64_t t, int last) {
        uint64_t v[16], m[16];
        int i;
        for (i = 0; i < 8; i++) { v[i] = h[i]; v[i + 8] = brainy_b2b_iv[i]; }
        v[12] ^= t;  /* the counter's high word stays 0: a key is never 2**64 bytes */
        if (last) v[14] = ~v[14];
        for (i = 0; i < 16; i++) {
            const uint8_t *p = block + 8 * i;
            m[i] = (uint64_t)p[0] | ((uint64_t)p[1] << 8) | ((uint64_t)p[2] << 16) | ((uint64_t)p[3] << 24)
                 | ((uint64_t)p[4] << 32) | ((uint64_t)p[5] << 40) | ((uint64_t)p[6] << 48) | ((uint64_t)p[7] << 56);
        }
        for (i = 0; i < 12; i++) {
            const uint8_t *s = brainy_b2b_sigma[i];
            BRAINY_B2B_G(0, 4, 8, 12, m[s[0]], m[s[1]]);
            BRAINY_B2B_G(1, 5, 9, 13, m[s[2]], m[s[3]]);
            BRAINY_B2B_G(2, 6, 10, 14, m[s[4]], m[s[5]]);
            BRAINY_B2B_G(3, 7, 11, 15, m[s[6]], m[s[7]]);
            BRAINY_B2B_G(0, 5, 10, 15, m[s[8]], m[s[9]]);
            BRAINY_B2B_G(1, 6, 11, 12, m[s[10]], m[s[11]]);
            BRAINY_B2B_G(2, 7, 8, 13, m[s[12]], m[s[13]]);
            BRAINY_B2B_G(3, 4, 9, 14, m[s[14]], m[s[15]]);
        }
        for (i = 0; i < 8; i++) h[i] ^= v[i] ^ v[i + 8];
    }
    /* the digest's 8 bytes read little-endian: the first word of the state */
    static uint64_t brainy_blake2b64(const uint8_t *data, size_t n) {
        uint64_t h[8];
        uint8_t block[128];
        size_t done = 0;
        memcpy(h, brainy_b2b_iv, sizeof h);
        h[0] ^= 0x01010000ULL ^ 8;  /* digest length 8, no key, fanout and depth 1 */
        while (n - done > 128) {
            brainy_b2b_compress(h, data + done, done + 128, 0);
            done += 128;
        }
        memset(block, 0, sizeof block);
        memcpy(block, data + done, n - done);
        brainy_b2b_compress(h, block, n, 1);
        return h[0];
    }
    """
    uint64_t brainy_blake2b64(const unsigned char* data, size_t n) nogil


def bloom_holds(const unsigned char[::1] contents, bytes key):
    """Whether a table's bloom block may hold ``key`` (see sstblock_py.bloom_holds): the probes and the hash in C."""
    cdef Py_ssize_t n = contents.shape[0]
    if n < 4:
        raise ValueError("a bloom block holds at least its probe count")
    cdef uint32_t probes = contents[0] | (contents[1] << 8) | (contents[2] << 16) | (<uint32_t>contents[3] << 24)
    cdef uint64_t m = (n - 4) * 8
    if m == 0:
        raise ZeroDivisionError("a bloom block with no bits")
    cdef uint64_t h = brainy_blake2b64(<const unsigned char*>PyBytes_AS_STRING(key), PyBytes_GET_SIZE(key))
    cdef uint64_t h1 = h & 0xFFFFFFFF, h2 = h >> 32, b
    cdef uint32_t i
    for i in range(probes):
        b = (h1 + i * h2) % m
        if not contents[4 + (b >> 3)] & (1 << (b & 7)):
            return False
    return True


def build_bloom(list keys, Py_ssize_t bits_per_key, uint32_t probes):
    """A bloom block's contents for ``keys`` (see sstblock_py.build_bloom): each key hashed and probed in C."""
    cdef Py_ssize_t m = max(64, len(keys) * bits_per_key)
    m = (m + 7) // 8 * 8
    cdef bytes out = PyBytes_FromStringAndSize(NULL, 4 + m // 8)
    cdef unsigned char* bits = <unsigned char*>PyBytes_AS_STRING(out)
    cdef uint64_t h, h1, h2, b, mm = m
    cdef uint32_t i
    cdef bytes key
    bits[0], bits[1], bits[2], bits[3] = probes & 0xFF, (probes >> 8) & 0xFF, (probes >> 16) & 0xFF, probes >> 24
    bits += 4
    memset(bits, 0, m // 8)
    for key in keys:
        h = brainy_blake2b64(<const unsigned char*>PyBytes_AS_STRING(key), PyBytes_GET_SIZE(key))
        h1, h2 = h & 0xFFFFFFFF, h >> 32
        for i in range(probes):
            b = (h1 + i * h2) % mm
            bits[b >> 3] |= 1 << (b & 7)
    return out


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
