"""SSTable data block, pure-Python twin of ``sstblock.pyx`` (docs/store-format.md, "Data block").

::

    block    := contents   crc: u32 (crc32 of contents)
    contents := entry* restart: u32 * num_restarts   num_restarts: u32
    entry    := shared: varint       bytes of the key shared with the previous entry's key
                unshared: varint     bytes of the key that follow
                generation: varint   the version's generation
                value_len: varint    0 for a tombstone
                key_delta[unshared]  value[value_len]

Every ``restart_interval``-th entry (the first included) stores its whole key and is listed in
``restart``. All integers are little-endian. Both twins have the same names, raise the same
errors for the same damage (checked in the same order) and produce byte-identical encodings.
"""

from __future__ import annotations

import hashlib
import operator
import struct
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
_U64_MAX = (1 << 64) - 1
_U32_MAX = (1 << 32) - 1
_U32 = struct.Struct("<I")
_CRC_SIZE = 4
_NUM_RESTARTS_SIZE = 4


def crc32(data) -> int:
    """The crc32 (zlib's, as an unsigned int) of a bytes-like object."""
    return _crc32(data)


def _varint(out: bytearray, v: int) -> None:
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)


def _shared_prefix(a: bytes, b: bytes) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def _check_entries(keys, gens, values, restart_interval):
    # sstblock.pyx checks the same things in the same order with the same messages.
    keys, gens, values = list(keys), list(gens), list(values)
    n = len(keys)
    if n != len(gens) or n != len(values):
        raise ValueError(f"keys, gens and values differ in length: {n}, {len(gens)}, {len(values)}")
    if n == 0:
        raise ValueError("a data block holds at least one entry")
    interval = operator.index(restart_interval)
    if interval < 1:
        raise ValueError(f"restart_interval must be at least 1, got {interval}")
    for i in range(n):
        key, value = keys[i], values[i]
        if not isinstance(key, bytes):
            raise TypeError(f"keys[{i}] must be bytes, got {type(key).__name__}")
        if not isinstance(value, bytes):
            raise TypeError(f"values[{i}] must be bytes, got {type(value).__name__}")
        gen = operator.index(gens[i])
        if not 0 <= gen <= _U64_MAX:
            raise ValueError(f"gens[{i}] is outside 0..2**64-1: {gen}")
        gens[i] = gen
        if i and (key < keys[i - 1] or (key == keys[i - 1] and gen >= gens[i - 1])):
            raise ValueError(f"entry {i} is out of order: keys ascend, and generations descend within a key")
    return keys, gens, values, min(interval, n)


def encode_block(keys, gens, values, restart_interval: int = RESTART_INTERVAL) -> bytes:
    """Encode parallel lists of versions as one data block: ``contents + crc32(contents)``.

    ``keys`` ascend, and within one key ``gens`` descend; an empty value is a tombstone.
    """
    keys, gens, values, interval = _check_entries(keys, gens, values, restart_interval)
    out = bytearray()
    restarts = []
    prev = b""
    for i in range(len(keys)):
        key, value = keys[i], values[i]
        if i % interval == 0:
            restarts.append(len(out))
            shared = 0
        else:
            shared = _shared_prefix(prev, key)
        _varint(out, shared)
        _varint(out, len(key) - shared)
        _varint(out, gens[i])
        _varint(out, len(value))
        out += key[shared:]
        out += value
        prev = key
    size = len(out) + 4 * len(restarts) + _NUM_RESTARTS_SIZE
    if size > _U32_MAX:
        raise ValueError(f"a data block's contents must fit u32 offsets, got {size} bytes")
    out += struct.pack(f"<{len(restarts)}I", *restarts)
    out += _U32.pack(len(restarts))
    out += _U32.pack(_crc32(out))
    return bytes(out)


def write_entries(entries, write, block_bytes: int, restart_interval: int = RESTART_INTERVAL):
    """A table's data blocks for ``entries`` (``(key, generation, value)``, sorted as :func:`encode_block` wants
    them across blocks too), each block cut once its entries reach ``block_bytes`` (a key's and a value's length
    and 8 an entry) and passed to ``write`` as it is made. Answers ``(index, bloom_keys, count, min_gen, max_gen,
    end)``: ``[last_key, offset, size]`` of each block (its size without the crc), each distinct key once in
    order, the entries, the least and greatest generation (0 and 0 for none), and the bytes written."""
    index: list[list] = []
    bloom_keys: list[bytes] = []
    keys: list[bytes] = []
    gens: list[int] = []
    values: list[bytes] = []
    count = pending = offset = 0
    min_gen, max_gen = None, 0
    last_key = None
    for key, gen, value in entries:
        if key != last_key:
            bloom_keys.append(key)
            last_key = key
        keys.append(key)
        gens.append(gen)
        values.append(value)
        pending += len(key) + len(value) + 8
        count += 1
        min_gen = gen if min_gen is None or gen < min_gen else min_gen
        max_gen = max(max_gen, gen)
        if pending >= block_bytes:
            offset += _cut(keys, gens, values, restart_interval, write, index, offset)
            keys, gens, values, pending = [], [], [], 0
    if keys:
        offset += _cut(keys, gens, values, restart_interval, write, index, offset)
    return index, bloom_keys, count, min_gen or 0, max_gen, offset


def _cut(keys, gens, values, restart_interval, write, index, offset) -> int:
    block = encode_block(keys, gens, values, restart_interval)
    write(block)
    index.append([keys[-1], offset, len(block) - _CRC_SIZE])
    return len(block)


def _read_varint(data: bytes, pos: int, limit: int, at: int):
    result = 0
    shift = 0
    while True:
        if pos >= limit:
            raise BlockCorruptError("entry runs past restarts", at)
        b = data[pos]
        pos += 1
        if shift == 63 and b > 1:  # the tenth byte may carry only bit 63
            raise BlockCorruptError("bad varint", at)
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7


def decode_block(buf, offset: int, size: int) -> tuple[list[bytes], list[int], list[bytes]]:
    """Decode the block whose contents are ``buf[offset:offset+size]``, crc following.

    Returns ``(keys, gens, values)``, three parallel lists. The crc is checked first; any damage
    raises :class:`BlockCorruptError` and nothing is returned.
    """
    offset = operator.index(offset)
    size = operator.index(size)
    if offset < 0 or size < 0:
        raise ValueError(f"offset and size must not be negative, got {offset}, {size}")
    with memoryview(buf) as whole, whole.cast("B") as view:
        if offset + size + _CRC_SIZE > view.nbytes:
            raise BlockCorruptError("truncated block read")
        data = view[offset : offset + size].tobytes()  # one copy: the bytes checked are the bytes read
        (stored,) = _U32.unpack(view[offset + size : offset + size + _CRC_SIZE])
    if _crc32(data) != stored:
        raise BlockCorruptError("block checksum mismatch")
    if size < _NUM_RESTARTS_SIZE:
        raise BlockCorruptError("block too short")
    (num_restarts,) = _U32.unpack_from(data, size - _NUM_RESTARTS_SIZE)
    if num_restarts == 0 or num_restarts > (size - _NUM_RESTARTS_SIZE) // 4:
        raise BlockCorruptError("bad restart count")
    limit = size - _NUM_RESTARTS_SIZE - 4 * num_restarts
    restarts = struct.unpack_from(f"<{num_restarts}I", data, limit)

    keys: list[bytes] = []
    gens: list[int] = []
    values: list[bytes] = []
    prev = b""
    prev_gen = 0
    ri = 0
    pos = 0
    while pos < limit:
        at = pos
        restart = False
        if ri < num_restarts:
            r = restarts[ri]
            if r == pos:
                restart = True
                ri += 1
            elif r < pos or pos == 0:
                raise BlockCorruptError("bad restart offset", at)
        # Four varints; most are one byte, so that case is read inline.
        b = data[pos]
        if b < 0x80:
            shared, pos = b, pos + 1
        else:
            shared, pos = _read_varint(data, pos, limit, at)
        b = data[pos] if pos < limit else 0x80
        if b < 0x80:
            unshared, pos = b, pos + 1
        else:
            unshared, pos = _read_varint(data, pos, limit, at)
        gen, pos = _read_varint(data, pos, limit, at)
        b = data[pos] if pos < limit else 0x80
        if b < 0x80:
            value_len, pos = b, pos + 1
        else:
            value_len, pos = _read_varint(data, pos, limit, at)
        if (restart and shared) or shared > len(prev):
            raise BlockCorruptError("bad shared length", at)
        end = pos + unshared
        if end > limit:
            raise BlockCorruptError("entry runs past restarts", at)
        key = prev[:shared] + data[pos:end]
        pos = end + value_len
        if pos > limit:
            raise BlockCorruptError("entry runs past restarts", at)
        if keys and (key < prev or (key == prev and gen >= prev_gen)):
            raise BlockCorruptError("keys out of order", at)
        keys.append(key)
        gens.append(gen)
        values.append(data[end:pos])
        prev = key
        prev_gen = gen
    if ri != num_restarts:
        raise BlockCorruptError("bad restart offset", limit)
    return keys, gens, values


def bloom_holds(contents: bytes, key: bytes) -> bool:
    """Whether a table's bloom block (``k: u32`` then the bits; docs/store-format.md, "Bloom block") may hold
    ``key``: False means the key is certainly not in the table."""
    probes = struct.unpack_from("<I", contents, 0)[0]
    m = (len(contents) - 4) * 8
    h = int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "little")
    h1, h2 = h & 0xFFFFFFFF, h >> 32
    for i in range(probes):
        b = (h1 + i * h2) % m
        if not contents[4 + (b >> 3)] & (1 << (b & 7)):
            return False
    return True


_BLOOM_CHUNK = 1 << 16  # keys whose probes are set in one array operation (7 probes of 8 bytes: 3.5 MiB)


def build_bloom(keys: list[bytes], bits_per_key: int, probes: int) -> bytes:
    """The bloom block's contents for ``keys`` (docs/store-format.md, "Bloom block"): ``probes`` as a u32, then
    ``m`` bits (``bits_per_key`` a key, at least 64, rounded up to a byte), probe ``i`` of a key setting bit
    ``(h1 + i * h2) mod m`` (the key's BLAKE2b digest of 8 bytes read little-endian: h1 its low half, h2 its
    high), bit ``b`` being bit ``b & 7`` of byte ``b >> 3``. The probes are set a chunk of keys at a time in
    arrays."""
    import numpy as np  # the vector index's dependency

    m = max(64, len(keys) * bits_per_key)
    m = (m + 7) // 8 * 8
    flags = np.zeros(m, dtype=bool)
    steps = np.arange(probes, dtype=np.uint64)[None, :]
    for start in range(0, len(keys), _BLOOM_CHUNK):
        digests = b"".join(hashlib.blake2b(key, digest_size=8).digest() for key in keys[start : start + _BLOOM_CHUNK])
        h = np.frombuffer(digests, dtype="<u8")[:, None]
        flags[((h & np.uint64(0xFFFFFFFF)) + steps * (h >> np.uint64(32))) % np.uint64(m)] = True
    return _U32.pack(probes) + np.packbits(flags, bitorder="little").tobytes()


# --- the index block (docs/store-format.md, "Index block") ---------------------------------------
# A MessagePack map {"blocks": [[last_key (bin), offset, size], ...], "minGen", "maxGen", "entries"}, read
# byte by byte into a list of last keys and two arrays, accepting and refusing exactly what the compiled twin
# does (the other fields: ints, nil or bools; a block's offset and size: unsigned ints; its key: bin).


class _Reader:
    def __init__(self, data: memoryview) -> None:
        self.data, self.at = data, 0

    def byte(self) -> int:
        self.need(1)
        self.at += 1
        return self.data[self.at - 1]

    def need(self, n: int) -> None:
        if n > len(self.data) - self.at:
            raise ValueError("index block does not decode: it ends early")

    def uint_be(self, width: int) -> int:
        self.need(width)
        self.at += width
        return int.from_bytes(self.data[self.at - width : self.at], "big")

    def length(self, fix: tuple[int, int] | None, w8: int | None, w16: int, w32: int, what: str) -> int:
        t = self.byte()
        if fix is not None and t & ~fix[1] & 0xFF == fix[0]:
            return t & fix[1]
        if w8 is not None and t == w8:
            return self.uint_be(1)
        if t == w16:
            return self.uint_be(2)
        if t == w32:
            return self.uint_be(4)
        raise ValueError(f"index block does not decode: {what} expected")

    def unsigned(self) -> int:
        t = self.byte()
        if t < 0x80:
            return t
        if 0xCC <= t <= 0xCF:
            return self.uint_be(1 << (t - 0xCC))
        raise ValueError("index block does not decode: an offset or size is not an unsigned int")

    def skip_scalar(self) -> None:
        t = self.byte()
        if t < 0x80 or t >= 0xE0 or t in (0xC0, 0xC2, 0xC3):
            return
        if 0xCC <= t <= 0xCF:
            self.uint_be(1 << (t - 0xCC))
        elif 0xD0 <= t <= 0xD3:
            self.uint_be(1 << (t - 0xD0))
        elif 0xA0 <= t <= 0xBF or 0xD9 <= t <= 0xDB:  # a string: the storeId
            n = (t & 0x1F) if t <= 0xBF else self.uint_be(1 << (t - 0xD9))
            self.need(n)
            self.at += n
        else:
            raise ValueError("index block does not decode: a field is not an int or a string")


def read_index(contents) -> tuple[array, array, array]:
    """The block index of a table, read in place: (key bounds, offsets, sizes), one each per data block in file
    order; a block's last key is ``contents[bounds[2 * i]:bounds[2 * i + 1]]`` (no bytes object a block:
    :func:`bisect_index` compares them where they lie). ValueError when the contents are not such a map."""
    r = _Reader(memoryview(contents).cast("B"))
    bounds = offsets = sizes = None
    for _ in range(r.length((0x80, 0x0F), None, 0xDE, 0xDF, "a map")):
        name_len = r.length((0xA0, 0x1F), 0xD9, 0xDA, 0xDB, "a field name")
        r.need(name_len)
        try:
            name = bytes(r.data[r.at : r.at + name_len]).decode()
        except UnicodeDecodeError:
            raise ValueError("index block does not decode: a field name is not UTF-8") from None
        r.at += name_len
        if name != "blocks":
            r.skip_scalar()
            continue
        n = r.length((0x90, 0x0F), None, 0xDC, 0xDD, "the blocks array")
        bounds, offsets, sizes = array("Q", bytes(16 * n)), array("Q", bytes(8 * n)), array("Q", bytes(8 * n))
        for i in range(n):
            if r.length((0x90, 0x0F), None, 0xDC, 0xDD, "a block's row") != 3:
                raise ValueError("index block does not decode: a block's row is not [last key, offset, size]")
            klen = r.length(None, 0xC4, 0xC5, 0xC6, "a last key (bin)")
            r.need(klen)
            bounds[2 * i], bounds[2 * i + 1] = r.at, r.at + klen
            r.at += klen
            offsets[i] = r.unsigned()
            sizes[i] = r.unsigned()
    if r.at != len(r.data):
        raise ValueError("index block does not decode: bytes after the map")
    if bounds is None:
        raise ValueError("index block does not decode: no blocks")
    return bounds, offsets, sizes


def bisect_index(contents, bounds, key: bytes) -> int:
    """``bisect.bisect_left`` over the last keys :func:`read_index` found in ``contents``: the first block whose
    last key is at or after ``key``."""
    data = memoryview(contents).cast("B")
    lo, hi = 0, len(bounds) // 2
    if hi and bounds[2 * hi - 1] > len(data):
        raise ValueError("the key bounds lie past the index")
    while lo < hi:
        mid = (lo + hi) // 2
        if bytes(data[bounds[2 * mid] : bounds[2 * mid + 1]]) < key:
            lo = mid + 1
        else:
            hi = mid
    return lo
