"""A stored vector's shortest decimals (brainy/_speedups/vecdecimal*, DOORS.md 0.3): both twins give the same
doubles on every class of finite float32 (normals over the whole exponent range, binade starts and their
neighbours, subnormals, both zeros, decimal exponents past 22), each reads back as the same float32 bits, also
through JSON, and an exact oracle in fractions says each decimal is the shortest that does, and the nearest."""

from __future__ import annotations

import math
import struct
from fractions import Fraction

import numpy as np
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from brainy.contract.vectors import float32_msgpack
from brainy.store.rows import vector_out

FINITE_BITS = st.integers(0, 2**32 - 1).filter(lambda b: (b >> 23) & 0xFF != 0xFF)


def _bits(values: np.ndarray) -> bytes:
    return np.asarray(values, dtype="<u4").tobytes()


def _doubles(numbers: list[float]) -> np.ndarray:
    return np.array(numbers, dtype=np.float64).view(np.uint64)


def _classes(rng: np.random.Generator) -> np.ndarray:
    """Bit patterns of every finite class, both signs."""
    exponents = np.arange(255, dtype=np.uint32) << 23  # every biased exponent but inf/nan's
    starts = np.concatenate([exponents, exponents + 1, exponents + 2, exponents | 0x7FFFFF, exponents | 0x400000])
    starts = starts[(starts >> 23) < 255]
    subnormal = np.concatenate([np.arange(1, 4096, dtype=np.uint32), rng.integers(1, 0x800000, 4096).astype(np.uint32)])
    anywhere = rng.integers(0, 2**32, 100_000, dtype=np.uint64).astype(np.uint32)
    anywhere = anywhere[((anywhere >> 23) & 0xFF) != 0xFF]
    gaussian = rng.standard_normal(20_000).astype(np.float32)
    scaled = np.concatenate([gaussian, gaussian * 1e-3, gaussian * 1e-25, gaussian * 1e25, gaussian * np.float32(6e37)])
    positive = np.concatenate([starts, subnormal, np.zeros(1, np.uint32), scaled.view(np.uint32) & 0x7FFFFFFF])
    return np.concatenate([positive, positive | 0x80000000, anywhere])


def test_both_twins_agree_on_every_class_of_float32(vecdecimal_twins):
    compiled, pure = vecdecimal_twins
    blob = _bits(_classes(np.random.default_rng(35)))
    got, want = compiled.shortest(blob), pure.shortest(blob)
    assert len(got) == len(want) == len(blob) // 4
    assert all(type(x) is float for x in got)
    assert np.array_equal(_doubles(got), _doubles(want))  # bit for bit: -0.0 is not 0.0


@settings(max_examples=2000, deadline=None)
@given(st.lists(FINITE_BITS, min_size=1, max_size=16))
def test_both_twins_agree_on_hypothesis_bits(vecdecimal_twins, bits):
    compiled, pure = vecdecimal_twins
    blob = _bits(bits)
    assert np.array_equal(_doubles(compiled.shortest(blob)), _doubles(pure.shortest(blob)))


def test_each_reads_back_as_its_float32_also_through_json(vecdecimal_twin):
    """The double is the decimal a JSON encoder prints; a reader of that JSON rounding to float32 gets the bits."""
    bits = _classes(np.random.default_rng(7))
    numbers = vecdecimal_twin.shortest(_bits(bits))
    assert np.array_equal(np.array(numbers, dtype=np.float32).view(np.uint32), bits)
    parsed = orjson.loads(orjson.dumps(numbers))
    assert np.array_equal(np.array(parsed, dtype=np.float32).view(np.uint32), bits)
    assert np.array_equal(_doubles(parsed), _doubles(numbers))


def _interval(bits: int) -> tuple[Fraction, Fraction, Fraction, bool]:
    """A positive finite float32's value and the ends of the decimals a half-to-even reader reads as it."""
    raw, biased = bits & 0x7FFFFF, (bits >> 23) & 0xFF
    m, e = (raw, -149) if biased == 0 else (raw | 0x800000, biased - 150)
    value = Fraction(m) * Fraction(2) ** e
    half = Fraction(2) ** (e - 1)
    below = half / 2 if raw == 0 and biased > 1 else half  # a binade's start: the float below is twice as close
    return value, value - below, value + half, m % 2 == 0


def _reads_back(decimal: Fraction, bits: int) -> bool:
    value, lo, hi, even = _interval(bits)
    return lo < decimal < hi or (even and decimal in (lo, hi))


def _digits(number: float) -> tuple[int, int]:
    """(significand, exponent) of the shortest repr of ``number``: number == significand * 10**exponent."""
    mantissa, _, exponent = repr(abs(number)).partition("e")
    whole, _, fraction = mantissa.partition(".")
    fraction = fraction.rstrip("0")
    significand = int((whole + fraction).lstrip("0") or "0")
    shift = int(exponent or 0) - len(fraction)
    while significand and significand % 10 == 0:
        significand //= 10
        shift += 1
    return significand, shift


@settings(max_examples=3000, deadline=None)
@given(FINITE_BITS.filter(lambda b: b & 0x7FFFFFFF))
def test_the_decimal_is_the_shortest_and_the_nearest(vecdecimal_twin, bits):
    """The oracle, in exact fractions: the decimal reads back; no decimal one digit shorter does (of those, the
    two beside the value are the only ones that could); and of its own length, the other candidate beside the
    value is no nearer (a tie to the even last digit)."""
    bits &= 0x7FFFFFFF
    [number] = vecdecimal_twin.shortest(struct.pack("<I", bits))
    significand, exponent = _digits(number)
    decimal = Fraction(significand) * Fraction(10) ** exponent
    assert _reads_back(decimal, bits)
    value = _interval(bits)[0]
    step = Fraction(10) ** (exponent + 1)  # one digit fewer: multiples of ten times the last digit's unit
    down = math.floor(value / step) * step
    assert not _reads_back(down, bits) or down == 0
    assert not _reads_back(down + step, bits)
    unit = Fraction(10) ** exponent
    other = decimal + unit if decimal < value else decimal - unit
    if _reads_back(other, bits):
        assert abs(decimal - value) < abs(other - value) or (
            abs(decimal - value) == abs(other - value) and significand % 2 == 0
        )


def test_zeros_keep_their_sign_and_the_rest_is_what_numpy_says(vecdecimal_twin):
    out = vecdecimal_twin.shortest(struct.pack("<4f", 0.0, -0.0, 0.1, -2.5e-7))
    assert [math.copysign(1.0, x) for x in out[:2]] == [1.0, -1.0]
    assert out[2:] == [0.1, -2.5e-7]
    special = vecdecimal_twin.shortest(struct.pack("<3I", 0x7F800000, 0xFF800000, 0x7FC00000))
    assert special[:2] == [math.inf, -math.inf] and math.isnan(special[2])


def test_a_length_that_is_not_whole_float32s_is_refused(vecdecimal_twin):
    with pytest.raises(ValueError):
        vecdecimal_twin.shortest(b"\x00\x00\x80")
    assert vecdecimal_twin.shortest(b"") == []


def test_the_stored_vector_leaves_as_a_vector_whose_msgpack_is_its_bytes():
    """``vector_out`` (every way a stored vector leaves) and the row cache's float32 array from the bytes agree."""
    values = np.random.default_rng(3).standard_normal(384).astype("<f4")
    out = vector_out(values.tobytes())
    assert np.array_equal(np.array(out, dtype=np.float32), values)
    assert out.float32_msgpack() == float32_msgpack(values)
