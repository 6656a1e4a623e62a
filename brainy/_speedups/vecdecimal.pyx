# cython: language_level=3, boundscheck=False, wraparound=False
"""Compiled twin of ``vecdecimal`` (see vecdecimal_py.py for the law): each float32's shortest decimal in C.

The pure twin asks numpy to print every number (Dragon4 over big integers) and Python to read each string back:
0.7 ms a 384-vector, paid by every vector that leaves the server. Here the digits come from exact integer
arithmetic: a float32 ``m * 2**e`` with ``-90 <= e <= 0`` and a full significand (every value from about 1e-20
to 16,777,215, so every number an embedding holds) has its value and the two ends of the interval of decimals
that read back as it written as integers over ``2**(2 - e)``; scaled by a power of ten those fit in 128 bits, so
"is there a multiple of ``10**t`` in the interval" is two multiplications and two shifts. The largest such ``t``
gives the fewest digits, and of its two candidates (the value rounded down and up at ``t``) the nearer one that
lies in the interval is taken, a tie going to the even digit: numpy's rule (Dragon4's ``low``/``high`` test,
the interval's ends included when the significand is even, as a reader rounding half to even reads them).

Every other float32 (subnormals, values past 2**24, below 2**-67) takes a plain path: for each length from one
digit, ``snprintf("%.*e")`` gives the nearest decimal of that length, ``strtof`` says whether it reads back, and
when it does not, its neighbour on the value's other side is tried; the first length that reads back wins.

The decimal ``digits * 10**t`` becomes the nearest double in one correctly rounded operation when ``|t| <= 22``
(``digits`` has at most ten digits, so it and ``10**|t|`` are exact doubles), else through ``strtod``.
"""

from cpython.float cimport PyFloat_FromDouble
from cpython.list cimport PyList_New
from cpython.ref cimport Py_INCREF
from libc.stdint cimport uint32_t, uint64_t

__all__ = ["shortest"]

cdef extern from "Python.h":
    void PyList_SET_ITEM(object, Py_ssize_t, object)

cdef extern from *:
    """
    #include <stdint.h>
    #include <stdio.h>
    #include <stdlib.h>
    #include <string.h>
    #include <math.h>

    typedef unsigned __int128 brainy_u128;

    static const double BRAINY_POW10[23] = {
        1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
        1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

    static brainy_u128 BRAINY_POW10_128[39];  /* 10^0 .. 10^38, filled at import */

    static void brainy_vecdecimal_init(void) {
        BRAINY_POW10_128[0] = 1;
        for (int i = 1; i < 39; i++) BRAINY_POW10_128[i] = BRAINY_POW10_128[i - 1] * 10;
    }

    #define brainy_pow10_128(n) (BRAINY_POW10_128[(n)])

    /* The double nearest digits * 10^t. */
    static double brainy_decimal_double(uint64_t digits, int t) {
        char buf[48];
        if (t >= 0 && t <= 22) return (double)digits * BRAINY_POW10[t];
        if (t < 0 && t >= -22) return (double)digits / BRAINY_POW10[-t];
        snprintf(buf, sizeof buf, "%llue%d", (unsigned long long)digits, t);
        return strtod(buf, NULL);
    }

    /* floor(n * 10^-t / 2^s) and whether that division is exact, for n < 2^27, -30 <= t <= 9, s <= 92. */
    static brainy_u128 brainy_scaled(uint64_t n, int t, int s, int *exact) {
        brainy_u128 a, b;
        if (t <= 0) {
            a = (brainy_u128)n * brainy_pow10_128(-t);
            *exact = (a & ((((brainy_u128)1) << s) - 1)) == 0;
            return a >> s;
        }
        b = brainy_pow10_128(t) << s;
        a = (brainy_u128)n;
        *exact = (a % b) == 0;
        return a / b;
    }

    /* The multiples of 10^t that lie in [lo, hi] / 2^s (ends included when inclusive): c_lo to c_hi, times 10^t
       (none when c_lo > c_hi). */
    static void brainy_fitting(uint64_t lo, uint64_t hi, int inclusive, int t, int s, brainy_u128 *c_lo,
                               brainy_u128 *c_hi) {
        int exact_lo, exact_hi;
        *c_lo = brainy_scaled(lo, t, s, &exact_lo);
        *c_hi = brainy_scaled(hi, t, s, &exact_hi);
        if (!(exact_lo && inclusive)) *c_lo += 1;
        if (exact_hi && !inclusive) {
            if (*c_hi == 0) *c_lo = 1;  /* none */
            else *c_hi -= 1;
        }
    }

    /* The fast path: m * 2^e with 2^23 <= m < 2^24 and -90 <= e <= 0, m at a binade's start having a lower
       neighbour half as far (unequal). Sets digits and t, the shortest nearest decimal digits * 10^t. */
    static void brainy_shortest_exact(uint32_t m, int e, int unequal, uint64_t *digits_out, int *t_out) {
        int s = 2 - e;
        uint64_t v = 4 * (uint64_t)m, lo = v - (unequal ? 1 : 2), hi = v + 2;
        int inclusive = (m & 1) == 0;
        /* floor(log10(value)) is k or k + 1: log2(value) lies in [e + 23, e + 24) */
        int k = (int)floor((double)(e + 23) * 0.30102999566398119521);
        int t = k - 8;  /* nine digits always read back */
        brainy_u128 c_lo, c_hi, next_lo, next_hi;
        brainy_fitting(lo, hi, inclusive, t, s, &c_lo, &c_hi);
        for (;;) {  /* the largest t with a multiple of 10^t in the interval: the fewest digits */
            brainy_fitting(lo, hi, inclusive, t + 1, s, &next_lo, &next_hi);
            if (next_lo > next_hi) break;
            t += 1;
            c_lo = next_lo;
            c_hi = next_hi;
        }
        int exact_v;
        brainy_u128 down = brainy_scaled(v, t, s, &exact_v);
        brainy_u128 pick;
        if (exact_v) {
            pick = down;  /* the value itself */
        } else {
            int down_ok = down >= c_lo, up_ok = down + 1 <= c_hi;
            if (down_ok && up_ok) {
                /* the nearer: twice the remainder against the divisor, a tie to the even digit */
                brainy_u128 twice, whole;
                if (t <= 0) {
                    brainy_u128 a = (brainy_u128)v * brainy_pow10_128(-t);
                    twice = (a & ((((brainy_u128)1) << s) - 1)) << 1;
                    whole = ((brainy_u128)1) << s;
                } else {
                    whole = brainy_pow10_128(t) << s;
                    twice = ((brainy_u128)v % whole) << 1;
                }
                if (twice < whole) pick = down;
                else if (twice > whole) pick = down + 1;
                else pick = (down & 1) == 0 ? down : down + 1;
            } else {
                pick = down_ok ? down : down + 1;
            }
        }
        *digits_out = (uint64_t)pick;
        *t_out = t;
    }

    /* Parse "d.ddde[+-]xx" of p digits into digits and the exponent of its last digit. */
    static void brainy_parse_e(const char *s, int p, uint64_t *digits, int *t) {
        uint64_t d = 0;
        const char *c = s;
        for (; *c && *c != 'e'; c++)
            if (*c >= '0' && *c <= '9') d = d * 10 + (uint64_t)(*c - '0');
        *digits = d;
        *t = atoi(c + 1) - (p - 1);
    }

    static int brainy_reads_back(uint64_t digits, int t, float f) {
        char buf[48];
        snprintf(buf, sizeof buf, "%llue%d", (unsigned long long)digits, t);
        return strtof(buf, NULL) == f;
    }

    /* The plain path, for any positive finite float32 f. */
    static void brainy_shortest_plain(float f, uint64_t *digits_out, int *t_out) {
        char buf[48];
        uint64_t digits, other, top;
        int t, p, other_t;
        for (p = 1; p <= 9; p++) {
            snprintf(buf, sizeof buf, "%.*e", p - 1, (double)f);
            brainy_parse_e(buf, p, &digits, &t);
            if (strtof(buf, NULL) == f) {
                *digits_out = digits;
                *t_out = t;
                return;
            }
            /* the nearest p-digit decimal does not read back: try its neighbour on the value's other side
               (a binade's start has a nearer edge below than above, so the farther candidate may fit) */
            other_t = t;
            if (strtod(buf, NULL) > (double)f) {
                top = 1;
                for (int i = 1; i < p; i++) top *= 10;
                if (digits == top) {  /* 10^x: the p-digit decimals below it are ten times closer */
                    other = top * 10 - 1;
                    other_t = t - 1;
                } else {
                    other = digits - 1;
                }
            } else {
                other = digits + 1;
            }
            if (brainy_reads_back(other, other_t, f)) {
                *digits_out = other;
                *t_out = other_t;
                return;
            }
        }
        /* not reached: nine digits always read back */
        snprintf(buf, sizeof buf, "%.8e", (double)f);
        brainy_parse_e(buf, 9, digits_out, t_out);
    }

    /* The double nearest the shortest decimal of the float32 with these bits (numpy's str of it, read back). */
    static double brainy_float32_shortest(uint32_t bits) {
        uint32_t raw = bits & 0x7FFFFFu;
        int biased = (int)((bits >> 23) & 0xFF);
        int negative = (bits >> 31) != 0;
        float f;
        double out;
        uint64_t digits;
        int t;
        if (biased == 0xFF) {
            if (raw) return NAN;
            return negative ? -INFINITY : INFINITY;
        }
        if (biased == 0 && raw == 0) return negative ? -0.0 : 0.0;
        if (biased != 0) {
            uint32_t m = raw | 0x800000u;
            int e = biased - 150;
            if (e >= -90 && e <= 0) {
                brainy_shortest_exact(m, e, raw == 0 && biased > 1, &digits, &t);
                out = brainy_decimal_double(digits, t);
                return negative ? -out : out;
            }
        }
        uint32_t positive = bits & 0x7FFFFFFFu;
        memcpy(&f, &positive, 4);
        brainy_shortest_plain(f, &digits, &t);
        out = brainy_decimal_double(digits, t);
        return negative ? -out : out;
    }
    """
    double brainy_float32_shortest(uint32_t bits) nogil
    void brainy_vecdecimal_init() nogil

brainy_vecdecimal_init()


def shortest(const unsigned char[::1] blob):
    cdef Py_ssize_t size = blob.shape[0]
    if size % 4:
        raise ValueError("buffer size must be a multiple of element size")
    cdef Py_ssize_t n = size // 4, i
    cdef list out = PyList_New(n)
    cdef uint32_t bits
    cdef object number
    for i in range(n):
        bits = (<uint32_t>blob[4 * i]) | (<uint32_t>blob[4 * i + 1] << 8) | (<uint32_t>blob[4 * i + 2] << 16) | (
            <uint32_t>blob[4 * i + 3] << 24)  # little-endian whatever the host's order
        number = PyFloat_FromDouble(brainy_float32_shortest(bits))
        Py_INCREF(number)  # PyList_SET_ITEM steals a reference
        PyList_SET_ITEM(out, i, number)
    return out
