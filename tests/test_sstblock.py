"""The SSTable data block (docs/store-format.md, "Data block"), run against both twins.

Every test taking ``sstblock_twin`` runs once with the compiled twin and once with the pure one;
tests taking ``sstblock_twins`` compare the two directly.
"""

import bisect
import mmap
import os
import pickle
import struct
import subprocess
import sys
import zlib
from array import array

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from brainy._speedups import load
from brainy._speedups.errors import REASONS, BlockCorruptError

U64_MAX = 2**64 - 1
QUICK = settings(deadline=None, max_examples=60)


# --- a model of the layout, written from the doc rather than from either twin -----------------


def varint(n):
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def u32(n):
    return struct.pack("<I", n)


def seal(contents):
    """A block around arbitrary contents: the crc is right, whatever the contents say."""
    return contents + u32(zlib.crc32(contents))


def entry(shared, unshared, gen, value_len, key_delta=b"", value=b""):
    return varint(shared) + varint(unshared) + varint(gen) + varint(value_len) + key_delta + value


def block_parts(block):
    """(entries bytes, restart offsets) of a well-formed block."""
    contents = block[:-4]
    (num,) = struct.unpack_from("<I", contents, len(contents) - 4)
    limit = len(contents) - 4 - 4 * num
    return contents[:limit], list(struct.unpack_from(f"<{num}I", contents, limit))


# --- strategies -------------------------------------------------------------------------------

PREFIXES = [b"", b"e" + b"\x11" * 16, b"a" + b"\x22" * 32, b"q" + b"x" * 200]

keys_st = st.one_of(
    st.binary(max_size=40),
    st.tuples(st.sampled_from(PREFIXES), st.binary(max_size=6)).map(lambda t: t[0] + t[1]),
)
gens_st = st.one_of(st.integers(0, 300), st.integers(0, U64_MAX), st.sampled_from([0, 2**63, U64_MAX]))
values_st = st.one_of(st.just(b""), st.binary(max_size=200))


@st.composite
def versions(draw, min_size=1, max_size=60):
    """Three parallel lists in table order: keys ascending, generations descending per key."""
    rows = draw(
        st.lists(
            st.tuples(keys_st, gens_st, values_st),
            min_size=min_size,
            max_size=max_size,
            unique_by=lambda r: (r[0], r[1]),
        )
    )
    rows.sort(key=lambda r: (r[0], -r[1]))
    return [r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows]


intervals_st = st.one_of(st.sampled_from([1, 16]), st.integers(1, 70))


def decode_all(twin, block):
    return twin.decode_block(block, 0, len(block) - 4)


# --- encoding ---------------------------------------------------------------------------------


def test_layout_matches_the_doc(sstblock_twin):
    """A block is entries (shared, unshared, generation, value_len varints, key delta, value),
    then the u32 LE restart offsets, num_restarts and crc32(contents), byte for byte."""
    keys, gens, values = [b"ab", b"abc", b"b"], [7, 300, 0], [b"V", b"", b"xy"]
    contents = (
        bytes.fromhex("00 02 07 01")
        + b"ab"
        + b"V"  # offset 0, a restart: whole key
        + bytes.fromhex("02 01 ac02 00")
        + b"c"  # offset 7: shares "ab"; 300 = ac 02
        + bytes.fromhex("00 01 00 02")
        + b"b"
        + b"xy"  # offset 13, a restart (interval 2)
        + u32(0)
        + u32(13)
        + u32(2)
    )
    assert sstblock_twin.encode_block(keys, gens, values, restart_interval=2) == seal(contents)


def test_default_restart_interval_is_16(sstblock_twin):
    """Without restart_interval, every 16th entry is a restart point, as the doc says."""
    keys = [b"k%03d" % i for i in range(40)]
    block = sstblock_twin.encode_block(keys, [1] * 40, [b"v"] * 40)
    assert block == sstblock_twin.encode_block(keys, [1] * 40, [b"v"] * 40, 16)
    assert len(block_parts(block)[1]) == 3
    assert sstblock_twin.RESTART_INTERVAL == 16


@pytest.mark.parametrize("interval", [1, 16])
def test_restart_points(sstblock_twin, interval):
    """Entry i is a restart point when i % interval == 0: its offset is listed, in order, and it
    stores its whole key (shared = 0); the first entry is always one."""
    keys = [b"user/%04d" % i for i in range(50)]
    block = sstblock_twin.encode_block(keys, list(range(50)), [b"x" * 7] * 50, restart_interval=interval)
    entries, restarts = block_parts(block)
    assert len(restarts) == -(-50 // interval)
    assert restarts[0] == 0 and restarts == sorted(set(restarts))
    assert all(entries[r] == 0 for r in restarts)  # shared = 0 is the one-byte varint 0x00
    if interval == 1:
        # No entry shares anything: each is 4 one-byte varints, the 9-byte key and the value.
        assert len(entries) == 50 * (4 + 9 + 7)
    assert decode_all(sstblock_twin, block) == (keys, list(range(50)), [b"x" * 7] * 50)


def test_long_shared_prefixes_are_stored_once_per_restart(sstblock_twin):
    """Keys sharing a long prefix store it only at restart points; the rest carry their delta."""
    prefix = b"q" + b"p" * 500
    keys = [prefix + bytes([i]) for i in range(32)]
    block = sstblock_twin.encode_block(keys, [9] * 32, [b"v"] * 32, restart_interval=16)
    assert len(block) < 3 * len(prefix) + 32 * 12
    assert decode_all(sstblock_twin, block) == (keys, [9] * 32, [b"v"] * 32)


def test_tombstones_round_trip_as_empty_values(sstblock_twin):
    """An empty value (a tombstone) is value_len 0 and decodes as b"", beside live versions."""
    keys, gens, values = [b"e1", b"e1", b"e1", b"e2"], [9, 5, 1, 3], [b"", b"live", b"", b""]
    block = sstblock_twin.encode_block(keys, gens, values)
    assert decode_all(sstblock_twin, block) == (keys, gens, values)


def test_generation_extremes(sstblock_twin):
    """Generations are unsigned 64-bit varints: 0, 2**63 and 2**64-1 come back unchanged."""
    keys, gens, values = [b"a", b"a", b"a", b"b"], [U64_MAX, 2**63, 0, 127], [b"1", b"2", b"3", b"4"]
    assert decode_all(sstblock_twin, sstblock_twin.encode_block(keys, gens, values)) == (keys, gens, values)


@pytest.mark.parametrize(
    "args, error",
    [
        (([b"a"], [1, 2], [b"x"]), ValueError),  # lengths differ
        (([], [], []), ValueError),  # a block holds at least one entry
        (([b"b", b"a"], [1, 1], [b"x", b"y"]), ValueError),  # keys descend
        (([b"a", b"a"], [1, 2], [b"x", b"y"]), ValueError),  # generations ascend within a key
        (([b"a", b"a"], [2, 2], [b"x", b"y"]), ValueError),  # the same version twice
        (([b"a"], [-1], [b"x"]), ValueError),  # generation below 0
        (([b"a"], [2**64], [b"x"]), ValueError),  # generation past u64
        (([b"a"], [1.0], [b"x"]), TypeError),  # generation not an integer
        ((["a"], [1], [b"x"]), TypeError),  # key not bytes
        (([b"a"], [1], [bytearray(b"x")]), TypeError),  # value not bytes
        (([b"a"], [1], [b"x"], 0), ValueError),  # restart interval below 1
    ],
)
def test_encode_refuses_bad_input_alike(sstblock_twins, args, error):
    """Input the caller promised not to give is refused, with the same error and message from
    both twins, never encoded into a block a reader would call torn."""
    messages = set()
    for twin in sstblock_twins:
        with pytest.raises(error) as info:
            twin.encode_block(*args)
        assert type(info.value) is error
        messages.add(str(info.value))
    assert len(messages) == 1


# --- round trips and twin equality ------------------------------------------------------------


@QUICK
@given(rows=versions(), interval=intervals_st)
def test_round_trip(sstblock_twin, rows, interval):
    """decode(encode(rows)) == rows for any rows in table order, at any restart interval."""
    block = sstblock_twin.encode_block(*rows, restart_interval=interval)
    assert decode_all(sstblock_twin, block) == rows


@QUICK
@given(rows=versions(), interval=intervals_st)
def test_twins_encode_byte_identically(sstblock_twins, rows, interval):
    """Both twins write the same bytes for the same rows, so each reads the other's blocks."""
    cython, python = sstblock_twins
    block = cython.encode_block(*rows, restart_interval=interval)
    assert python.encode_block(*rows, restart_interval=interval) == block
    assert python.decode_block(block, 0, len(block) - 4) == rows
    assert cython.decode_block(block, 0, len(block) - 4) == rows


def test_crc32_is_zlibs(sstblock_twin):
    """crc32 is zlib's crc32 over any bytes-like object."""
    for data in (b"", b"abc", bytearray(b"x" * 5000), memoryview(b"hello world")[3:]):
        assert sstblock_twin.crc32(data) == zlib.crc32(data)


def test_the_engines_crc32_is_zlibs():
    """brainy/store/crc.py's crc32 (ISA-L's) gives zlib's values at every length around its folding widths,
    continued from a running value as zlib's is, over a mapped file's view as over bytes."""
    import mmap
    import random

    from brainy.store.crc import crc32

    rnd = random.Random(7)
    for n in [*range(0, 300), 4095, 4096, 4097, 65536 + 13, 1 << 20]:
        data = rnd.randbytes(n)
        assert crc32(data) == zlib.crc32(data)
        assert crc32(data[n // 2 :], crc32(data[: n // 2])) == zlib.crc32(data)
    with mmap.mmap(-1, 1 << 16) as mapped:
        mapped[:] = rnd.randbytes(1 << 16)
        view = memoryview(mapped)[5:60000]
        assert crc32(view) == zlib.crc32(view)
        view.release()


# --- damage -----------------------------------------------------------------------------------


def fixed_block(twin):
    keys = [b"e" + bytes([i]) * 16 for i in range(20)]
    return twin.encode_block(keys, [3] * 20, [b"value-%d" % i for i in range(20)], restart_interval=4)


def test_every_flipped_byte_is_a_checksum_mismatch(sstblock_twin):
    """Flipping any byte of a block, the crc included, is refused as a checksum mismatch:
    decoding never answers with wrong rows."""
    block = fixed_block(sstblock_twin)
    for i in range(len(block)):
        for mask in (0x01, 0x80, 0xFF):
            damaged = bytearray(block)
            damaged[i] ^= mask
            with pytest.raises(BlockCorruptError) as info:
                sstblock_twin.decode_block(damaged, 0, len(block) - 4)
            assert info.value.reason == "block checksum mismatch"


@QUICK
@given(rows=versions(max_size=20), data=st.data())
def test_random_damage_is_refused(sstblock_twin, rows, data):
    """Any one damaged byte in any block is refused with BlockCorruptError."""
    block = bytearray(sstblock_twin.encode_block(*rows))
    i = data.draw(st.integers(0, len(block) - 1))
    block[i] ^= data.draw(st.integers(1, 255))
    with pytest.raises(BlockCorruptError):
        sstblock_twin.decode_block(block, 0, len(block) - 4)


def test_truncated_block(sstblock_twin):
    """A buffer that ends before contents + crc is a truncated read; a size that cuts the
    contents short is a checksum mismatch. Neither returns rows."""
    block = fixed_block(sstblock_twin)
    size = len(block) - 4
    for cut in range(len(block)):
        with pytest.raises(BlockCorruptError) as info:
            sstblock_twin.decode_block(block[:cut], 0, size)
        assert info.value.reason == "truncated block read"
        assert info.value.at is None
    for short in range(size):
        with pytest.raises(BlockCorruptError) as info:
            sstblock_twin.decode_block(block, 0, short)
        assert info.value.reason == "block checksum mismatch"


ONE = entry(0, 1, 5, 1, b"a", b"x")  # a well-formed first entry at offset 0

MALFORMED = [
    # (contents, reason, at): the crc is right, the structure is not
    (b"", "block too short", None),
    (b"\x01\x00", "block too short", None),
    (ONE + u32(0), "bad restart count", None),
    (ONE + u32(0) + u32(3), "bad restart count", None),
    (u32(1), "bad restart count", None),
    (ONE + u32(1) + u32(1), "bad restart offset", 0),  # first entry not a restart
    (u32(0) + u32(1), "bad restart offset", 0),  # a restart but no entry
    (ONE + u32(0) + u32(99) + u32(2), "bad restart offset", 6),  # restart past the entries
    (ONE + ONE + u32(0) + u32(3) + u32(2), "bad restart offset", 6),  # restart inside an entry
    (ONE + entry(0, 1, 4, 1, b"b", b"y") + u32(0) + u32(0) + u32(2), "bad restart offset", 6),
    (b"\x80" * 9 + b"\x02" + b"\x01\x01\x01ax" + u32(0) + u32(1), "bad varint", 0),
    (b"\x00\x01\x01" + u32(0) + u32(1), "entry runs past restarts", 0),  # value_len missing
    (b"\x00\x81" + u32(0) + u32(1), "entry runs past restarts", 0),  # varint cut by the limit
    (entry(0, 9, 1, 0, b"a") + u32(0) + u32(1), "entry runs past restarts", 0),
    (entry(0, 1, 1, 9, b"a", b"x") + u32(0) + u32(1), "entry runs past restarts", 0),
    (entry(0, 1, 1, 2**64 - 1, b"a") + u32(0) + u32(1), "entry runs past restarts", 0),
    (entry(1, 1, 1, 1, b"a", b"x") + u32(0) + u32(1), "bad shared length", 0),  # shares at a restart
    (ONE + entry(2, 0, 1, 1, b"", b"x") + u32(0) + u32(1), "bad shared length", 6),  # prev is 1 byte
    (ONE + entry(1, 0, 5, 1, b"", b"x") + u32(0) + u32(1), "keys out of order", 6),  # same version
    (ONE + entry(1, 0, 6, 1, b"", b"x") + u32(0) + u32(1), "keys out of order", 6),  # gen ascends
    (entry(0, 2, 1, 0, b"ab") + entry(1, 0, 1, 0) + u32(0) + u32(1), "keys out of order", 6),
    (ONE + entry(0, 1, 1, 0, b"0") + u32(0) + u32(1), "keys out of order", 6),
]


@pytest.mark.parametrize("contents, reason, at", MALFORMED, ids=[f"{m[1]}-{i}" for i, m in enumerate(MALFORMED)])
def test_malformed_contents_are_named(sstblock_twin, contents, reason, at):
    """A block whose crc is right but whose contents break the grammar is refused with the
    reason the doc gives (torn table) and the offset of the entry at fault."""
    with pytest.raises(BlockCorruptError) as info:
        sstblock_twin.decode_block(seal(contents), 0, len(contents))
    assert (info.value.reason, info.value.at) == (reason, at)
    assert info.value.reason in REASONS


def test_well_formed_control(sstblock_twin):
    """The pieces the malformed cases are built from decode when put together correctly."""
    contents = ONE + entry(1, 1, 4, 0, b"b") + entry(0, 1, 1, 1, b"b", b"z") + u32(0) + u32(11) + u32(2)
    assert sstblock_twin.decode_block(seal(contents), 0, len(contents)) == (
        [b"a", b"ab", b"b"],
        [5, 4, 1],
        [b"x", b"", b"z"],
    )


@settings(deadline=None, max_examples=300)
@given(body=st.binary(max_size=60), restarts=st.lists(st.integers(0, 70), max_size=4))
def test_twins_agree_on_any_contents(sstblock_twins, body, restarts):
    """On contents with a valid crc but arbitrary bytes, both twins return the same rows or
    raise the same reason at the same offset; rows returned are in table order."""
    contents = body + b"".join(u32(r) for r in restarts) + u32(len(restarts))
    block = seal(contents)
    outcomes = []
    for twin in sstblock_twins:
        try:
            outcomes.append(twin.decode_block(block, 0, len(contents)))
        except BlockCorruptError as exc:
            assert exc.reason in REASONS
            outcomes.append((exc.reason, exc.at))
    assert outcomes[0] == outcomes[1]
    if len(outcomes[0]) == 3:
        keys, gens, _ = outcomes[0]
        order = [(k, -g) for k, g in zip(keys, gens)]
        assert order == sorted(set(order))


def outcome(twin, block, size):
    try:
        return twin.decode_block(block, 0, size)
    except BlockCorruptError as exc:
        assert exc.reason in REASONS
        return exc.reason, exc.at


@settings(deadline=None, max_examples=200)
@given(rows=versions(max_size=20), interval=intervals_st, data=st.data())
def test_twins_agree_on_resealed_damage(sstblock_twins, rows, interval, data):
    """Damage a real block's contents (bytes changed, cut or inserted) and give it a fresh crc:
    the structural checks deep inside it fire alike in both twins, same reason, same offset."""
    cython, python = sstblock_twins
    contents = bytearray(cython.encode_block(*rows, restart_interval=interval)[:-4])
    for _ in range(data.draw(st.integers(1, 3))):
        i = data.draw(st.integers(0, len(contents) - 1))
        action = data.draw(st.sampled_from(["set", "cut", "insert"]))
        if action == "set":
            contents[i] = data.draw(st.integers(0, 255))
        elif action == "cut":
            del contents[i]
        else:
            contents.insert(i, data.draw(st.integers(0, 255)))
        if not contents:
            break
    block = seal(bytes(contents))
    assert outcome(cython, block, len(contents)) == outcome(python, block, len(contents))


def test_block_corrupt_error(sstblock_twin):
    """BlockCorruptError is a ValueError naming its reason, and survives pickling whole."""
    with pytest.raises(ValueError) as info:
        sstblock_twin.decode_block(seal(u32(0)), 0, 4)
    err = info.value
    assert isinstance(err, BlockCorruptError)
    assert str(err) == "torn data block: bad restart count"
    again = pickle.loads(pickle.dumps(err))
    assert (again.reason, again.at, str(again)) == (err.reason, err.at, str(err))
    assert str(BlockCorruptError("bad varint", 12)) == "torn data block: bad varint (entry at byte 12)"


@pytest.mark.parametrize("offset, size, error", [(-1, 4, ValueError), (0, -1, ValueError), (0.0, 4, TypeError)])
def test_bad_arguments_are_not_corruption(sstblock_twin, offset, size, error):
    """A negative or non-integer offset or size is the caller's mistake, not a torn block."""
    with pytest.raises(error) as info:
        sstblock_twin.decode_block(b"\x00" * 64, offset, size)
    assert not isinstance(info.value, BlockCorruptError)


# --- where blocks are read from ---------------------------------------------------------------


def table_of_blocks(twin):
    """A fake table: junk, three blocks back to back, junk; with each block's (offset, size, rows)."""
    out = bytearray(b"\xee" * 37)
    placed = []
    for b in range(3):
        keys = [b"k%d-%02d" % (b, i) for i in range(30)]
        rows = (keys, list(range(30, 0, -1)), [b"v" * i for i in range(30)])
        block = twin.encode_block(*rows)
        placed.append((len(out), len(block) - 4, rows))
        out += block
    out += b"\xee" * 11
    return bytes(out), placed


def test_blocks_at_an_offset_in_any_buffer(sstblock_twin):
    """A block is read at its offset inside a larger bytes, bytearray or memoryview."""
    table, placed = table_of_blocks(sstblock_twin)
    for buf in (table, bytearray(table), memoryview(table), memoryview(bytearray(table))):
        for offset, size, rows in placed:
            assert sstblock_twin.decode_block(buf, offset, size) == rows


def test_blocks_from_an_mmap(sstblock_twin, tmp_path):
    """A block is read in place from a read-only mmap of the table file, and the map can be
    closed afterwards: decoding holds no export of the buffer, even after a refusal."""
    table, placed = table_of_blocks(sstblock_twin)
    path = tmp_path / "1.sst"
    path.write_bytes(table)
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        for offset, size, rows in placed:
            assert sstblock_twin.decode_block(m, offset, size) == rows
        with pytest.raises(BlockCorruptError):
            sstblock_twin.decode_block(m, placed[0][0] + 1, placed[0][1])
        with pytest.raises(BlockCorruptError):
            sstblock_twin.decode_block(m, len(table) - 3, 0)
    assert m.closed


def test_decoding_releases_the_buffer(sstblock_twin):
    """After a decode, good or refused, the bytearray it read can be resized again."""
    table, placed = table_of_blocks(sstblock_twin)
    buf = bytearray(table)
    offset, size, rows = placed[1]
    assert sstblock_twin.decode_block(buf, offset, size) == rows
    for bad_offset in (offset + 1, len(buf)):
        with pytest.raises(BlockCorruptError):
            sstblock_twin.decode_block(buf, bad_offset, size)
    buf += b"more"  # BufferError if an export were still held
    assert len(buf) == len(table) + 4


# --- the facade -------------------------------------------------------------------------------


def compiled_builds():
    try:
        load("sstblock", "cython")
    except ImportError:
        return False
    return True


def facade_in_subprocess(value):
    """Import the facade in a fresh interpreter with BRAINY_SPEEDUPS=value (None: unset)."""
    env = {k: v for k, v in os.environ.items() if k != "BRAINY_SPEEDUPS"}
    if value is not None:
        env["BRAINY_SPEEDUPS"] = value
    code = (
        "import brainy._speedups as s; print(s.picks['sstblock'], s.sstblock.__name__); "
        "s.load('sstblock', 'python')\n"
        "try: s.load('sstblock', 'cython')\nexcept ImportError: pass\n"
        "print(s.sstblock.__name__)"
    )
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("value", [None, "", "auto", "python", "cython"])
def test_facade_picks_once(value):
    """BRAINY_SPEEDUPS picks a twin at import: python the pure one; auto (or unset or empty) the
    compiled one when it loads, else the pure one; cython the compiled one or an ImportError
    that says so. load() of the other twin leaves the pick in place."""
    proc = facade_in_subprocess(value)
    built = compiled_builds()
    if value == "cython" and not built:
        assert proc.returncode != 0
        assert "ImportError: brainy: the compiled speedup brainy._speedups.sstblock is not built" in proc.stderr
        return
    assert proc.returncode == 0, proc.stderr
    which = "python" if value == "python" or not built else "cython"
    name = "brainy._speedups.sstblock" + ("_py" if which == "python" else "")
    assert proc.stdout.split("\n")[:2] == [f"{which} {name}", name]


@pytest.mark.parametrize("value", ["pure", "Cython", "0", " auto"])
def test_facade_refuses_unknown_values(value):
    """Any other BRAINY_SPEEDUPS is a ValueError naming the allowed values."""
    proc = facade_in_subprocess(value)
    assert proc.returncode != 0
    assert "ValueError: BRAINY_SPEEDUPS must be one of auto, cython, python; got" in proc.stderr


def test_load_refuses_unknown_names():
    """load() knows only the speedups setup.py builds and only the two twins."""
    with pytest.raises(ValueError):
        load("nosuch", "python")
    with pytest.raises(ValueError):
        load("sstblock", "auto")


def test_what_is_under_test_is_what_the_environment_claims():
    """The facade's pick matches BRAINY_SPEEDUPS; under CI (CI=true) auto must find the
    compiled twin, so CI never passes on the pure twin alone."""
    from brainy import _speedups

    mode = os.environ.get("BRAINY_SPEEDUPS") or "auto"
    if mode == "python":
        expected = "python"
    elif mode == "cython" or os.environ.get("CI") == "true":
        expected = "cython"
    else:
        expected = "cython" if compiled_builds() else "python"
    assert _speedups.picks["sstblock"] == expected
    assert _speedups.sstblock is load("sstblock", expected)


# -- the bloom block's probes (docs/store-format.md, "Bloom block") ---------------------------------


def _bloom_oracle(keys: list[bytes], m: int, probes: int) -> bytes:
    """The bloom block as the format describes it, written out here from the doc's words."""
    import hashlib

    bits = bytearray(m // 8)
    for key in keys:
        h = int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "little")
        for i in range(probes):
            b = ((h & 0xFFFFFFFF) + i * (h >> 32)) % m
            bits[b >> 3] |= 1 << (b & 7)
    return probes.to_bytes(4, "little") + bytes(bits)


@settings(max_examples=200, deadline=None)
@given(
    keys=st.lists(st.binary(max_size=24), max_size=60, unique=True),
    probes=st.integers(1, 9),
    others=st.lists(st.binary(max_size=24), max_size=40),
    bytes_=st.integers(1, 64),
)
def test_bloom_holds_every_key_and_the_twins_agree_on_the_rest(sstblock_twins, keys, probes, others, bytes_):
    compiled, pure = sstblock_twins
    contents = _bloom_oracle(keys, bytes_ * 8, probes)
    for key in keys:
        assert compiled.bloom_holds(contents, key) and pure.bloom_holds(contents, key)
    for key in others:
        assert compiled.bloom_holds(contents, key) == pure.bloom_holds(contents, key)


def test_an_empty_bloom_holds_nothing(sstblock_twin):
    contents = _bloom_oracle([], 64, 7)
    assert not any(sstblock_twin.bloom_holds(contents, bytes([i])) for i in range(50))


@pytest.mark.parametrize("n", [0, 1, 7, 1000, 70_000])
def test_build_bloom_is_the_bloom_the_doc_describes(sstblock_twin, n):
    """build_bloom (the compiled twin hashes with its own BLAKE2b, the pure one with hashlib's, in arrays a chunk of
    keys at a time) writes the block the format describes: for no key, a few, and more than a chunk of keys, of
    every length from 0 to 300 bytes (over the hash's 128-byte blocks, and exactly on their edges)."""
    import random

    rng = random.Random(n)
    keys = [rng.randbytes(length % 301) for length in range(n)]
    m = (max(64, n * 10) + 7) // 8 * 8
    assert sstblock_twin.build_bloom(keys, 10, 7) == _bloom_oracle(keys, m, 7)


@settings(max_examples=300, deadline=None)
@given(key=st.one_of(st.binary(max_size=300), st.sampled_from([bytes(127), bytes(128), bytes(129), bytes(256)])))
def test_a_key_of_any_length_is_hashed_as_hashlib_hashes_it(sstblock_twin, key):
    """A key past one hash block is probed where hashlib's BLAKE2b puts it: a one-key bloom holds it, and the
    compiled and pure twins build the same one."""
    contents = sstblock_twin.build_bloom([key], 10, 7)
    assert contents == _bloom_oracle([key], 64, 7) and sstblock_twin.bloom_holds(contents, key)


# -- the index block (docs/store-format.md, "Index block") ---------------------------------------------


def _index_doc(rows, extra=None):
    import msgpack

    doc = {"blocks": [list(r) for r in rows], "minGen": 1, "maxGen": 9, "entries": len(rows)}
    doc.update(extra or {})
    return msgpack.packb(doc, use_bin_type=True)


def _last_keys(twin, data):
    """The last keys, offsets and sizes ``read_index`` finds, the keys cut out where it says they lie."""
    bounds, offsets, sizes = twin.read_index(data)
    return [bytes(data[bounds[2 * i] : bounds[2 * i + 1]]) for i in range(len(bounds) // 2)], offsets, sizes


@settings(max_examples=200, deadline=None)
@given(
    rows=st.lists(st.tuples(st.binary(max_size=300), st.integers(0, U64_MAX), st.integers(0, U64_MAX)), max_size=80),
    gens=st.tuples(st.integers(-(2**63), U64_MAX), st.integers(-(2**63), U64_MAX)),
)
def test_the_index_reads_as_msgpack_reads_it_in_both_twins(sstblock_twins, rows, gens):
    """Every width of key, offset and size msgpack writes (fix, 8, 16, 32, 64 bits), any other field an int."""
    import msgpack

    data = _index_doc(rows, {"minGen": gens[0], "maxGen": gens[1]})
    want = [b[0] for b in msgpack.unpackb(data, raw=False)["blocks"]]
    for twin in sstblock_twins:
        keys, offsets, sizes = _last_keys(twin, data)
        assert keys == want == [r[0] for r in rows]
        assert list(offsets) == [r[1] for r in rows] and list(sizes) == [r[2] for r in rows]


@settings(max_examples=300, deadline=None)
@given(keys=st.lists(st.binary(max_size=12), max_size=60), probes=st.lists(st.binary(max_size=13), max_size=20))
def test_the_index_is_searched_in_place_as_bisect_searches_its_keys_in_both_twins(sstblock_twins, keys, probes):
    """Short and long keys, prefixes of each other, the empty key, probes before, between, on and after them."""
    keys = sorted(keys)
    data = _index_doc([(k, i, 1) for i, k in enumerate(keys)])
    for twin in sstblock_twins:
        bounds, _, _ = twin.read_index(data)
        for probe in [*probes, *keys, *(k + b"\x00" for k in keys), *(k[:-1] for k in keys)]:
            assert twin.bisect_index(data, bounds, probe) == bisect.bisect_left(keys, probe)


def test_bounds_past_the_index_are_refused_in_both_twins(sstblock_twins):
    data = _index_doc([(b"a", 1, 2), (b"b", 3, 4)])
    for twin in sstblock_twins:
        bounds, _, _ = twin.read_index(data)
        with pytest.raises(ValueError, match="past the index"):
            twin.bisect_index(data[: bounds[-1] - 1], bounds, b"b")


@settings(max_examples=300, deadline=None)
@given(
    rows=st.lists(
        st.tuples(st.binary(max_size=40), st.integers(0, 2**40), st.integers(0, 5000)), min_size=1, max_size=20
    ),
    cut=st.integers(0, 10_000),
    at=st.integers(0, 10_000),
    bit=st.integers(0, 7),
)
def test_a_damaged_or_truncated_index_is_refused_or_read_alike_by_both_twins(sstblock_twins, rows, cut, at, bit):
    compiled, pure = sstblock_twins
    data = _index_doc(rows)
    flipped = bytearray(data)
    flipped[at % len(data)] ^= 1 << bit
    for damaged, refused in ((data[: cut % len(data)], True), (bytes(flipped), False), (data + b"\x00", True)):
        answers = []
        for twin in (compiled, pure):
            try:
                answers.append(twin.read_index(damaged))
            except ValueError as exc:
                answers.append(str(exc))
        assert answers[0] == answers[1]
        if refused:  # a flipped bit may still leave a well-formed index (another key, offset or size)
            assert isinstance(answers[0], str) and "does not decode" in answers[0]


def test_index_edge_cases_in_both_twins(sstblock_twin):
    import msgpack

    assert sstblock_twin.read_index(_index_doc([])) == (array("Q"), array("Q"), array("Q"))
    many = [(i.to_bytes(3, "big"), i, i % 7) for i in range(70_000)]  # array32, map's other fields after
    keys, offsets, sizes = _last_keys(sstblock_twin, _index_doc(many))
    assert keys == [r[0] for r in many] and list(offsets) == list(range(70_000))
    refused = [
        msgpack.packb({"minGen": 1}),  # no blocks
        msgpack.packb({"blocks": [["k", 1, 2]]}, use_bin_type=True),  # a str key
        msgpack.packb({"blocks": [[b"k", -1, 2]]}, use_bin_type=True),  # a negative offset
        msgpack.packb({"blocks": [[b"k", 1]]}, use_bin_type=True),  # a short row
        msgpack.packb({"blocks": [[b"k", 1, 2]], "minGen": 1.5}, use_bin_type=True),  # a float field
        msgpack.packb([1, 2]),  # not a map
        b"",
    ]
    for data in refused:
        with pytest.raises(ValueError, match="index block does not decode"):
            sstblock_twin.read_index(data)
    twice = msgpack.packb({"blocks": [[b"a", 1, 2]], "x": None, "y": True}, use_bin_type=True)
    assert _last_keys(sstblock_twin, twice) == ([b"a"], array("Q", [1]), array("Q", [2]))
    for store_id in ("", "s", "0193a8c2-7f00-7000-8000-000000000000", "x" * 300, "y" * 70_000):  # fix, 8, 16, 32
        owned = {"blocks": [[b"a", 1, 2]], "storeId": store_id, "minGen": 1, "maxGen": 2, "entries": 1}
        data = msgpack.packb(owned, use_bin_type=True)
        assert _last_keys(sstblock_twin, data) == ([b"a"], array("Q", [1]), array("Q", [2]))
        with pytest.raises(ValueError, match="index block does not decode"):
            sstblock_twin.read_index(data[: data.index(b"\xa7storeId") + 9 + min(len(store_id), 3)])


# -- a table's data blocks, cut as entries come (brainy/store/sstable.py write_table) -------------------------


@settings(max_examples=200, deadline=None)
@given(
    versions=st.dictionaries(
        st.binary(min_size=0, max_size=12),
        st.lists(st.tuples(st.integers(0, 2**64 - 1), st.binary(max_size=40)), min_size=1, max_size=3),
        max_size=60,
    ),
    block_bytes=st.integers(1, 300),
    interval=st.integers(1, 5),
)
def test_write_entries_cuts_the_blocks_the_pure_twin_cuts(sstblock_twins, versions, block_bytes, interval):
    """Both twins cut the same blocks at the same entries, write them in order, and answer the same index (each
    block's last key, offset and size), distinct keys, count and generation bounds; the blocks decode to the
    entries."""
    entries = [
        (key, gen, value)
        for key in sorted(versions)
        for gen, value in sorted({g: v for g, v in versions[key]}.items(), reverse=True)
    ]
    answers = []
    for twin in sstblock_twins:
        written: list[bytes] = []
        answers.append((twin.write_entries(iter(entries), written.append, block_bytes, interval), written))
    (compiled, blocks), (pure, pure_blocks) = answers
    assert compiled == pure and blocks == pure_blocks
    index, keys, count, low, high, end = compiled
    assert keys == sorted(versions) and count == len(entries) and end == sum(map(len, blocks))
    assert (low, high) == ((min(e[1] for e in entries), max(e[1] for e in entries)) if entries else (0, 0))
    data = b"".join(blocks)
    decoded = [e for _, at, size in index for e in zip(*sstblock_twins[1].decode_block(data, at, size))]
    assert decoded == entries and [block[0] for block in index] == [blocks_last(b) for b in blocks]


def blocks_last(block: bytes) -> bytes:
    keys, _, _ = load("sstblock", "python").decode_block(block, 0, len(block) - 4)
    return keys[-1]


@pytest.mark.parametrize(
    "entries",
    [
        [(b"b", 1, b"x"), (b"a", 1, b"y")],  # keys out of order
        [(b"a", 1, b"x"), (b"a", 2, b"y")],  # generations rising within a key
        [("a", 1, b"x")],  # a key that is no bytes
        [(b"a", -1, b"x")],  # a generation below 0
    ],
)
def test_write_entries_refuses_what_encode_block_refuses(sstblock_twins, entries):
    """Entries a block cannot hold raise the same error from either twin, with the same message."""
    raised = []
    for twin in sstblock_twins:
        with pytest.raises((ValueError, TypeError)) as caught:
            twin.write_entries(iter(entries), lambda block: None, 4096)
        raised.append((type(caught.value), str(caught.value)))
    assert raised[0] == raised[1]
