# cython: language_level=3, boundscheck=False, wraparound=False
"""Compiled twin of ``vecscan`` (see vecscan_py.py for the law): a write's vectors packed in one C walk of its body.

The decoders make a Python float of every number of a vector and the packer reads each back: about 15 us a
384-vector in MessagePack, 28 us in JSON (orjson reading 17 digits a number), a sixth and a quarter of a served
``addMany`` row. Here the walk skips everything but the vectors' places. A MessagePack vector's type bytes are
checked and its float32s swapped to little-endian (or its float64s rounded) straight into the bytes the store
keeps. A JSON number's digits are read into an integer and scaled by a power of ten in doubles, within three
roundings of the decimal; the float32 that decimal's nearest double rounds to is then certain unless a float32
midpoint lies within 2^-48 of it, and there (rarely) ``strtod`` reads the number exactly. What is left for the
decoder is the rest of the document, a nil or a null where each vector stood; or, from ``msgpack_holes``, where
each packed array stood in the body with its vector, for mpread to read the body once with each in place.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from libc.stdint cimport uint32_t, uint64_t
from libc.stdlib cimport free, realloc
from libc.string cimport memcmp, memcpy

from brainy.contract.vectors import Float32s

__all__ = ["json_vectors", "msgpack_holes", "msgpack_vectors", "place"]

cdef extern from *:
    """
    #include <math.h>
    #include <stdint.h>
    #include <stdlib.h>
    #include <string.h>

    typedef struct {
        const unsigned char *b;
        Py_ssize_t n;
    } brainy_mp;

    #define BRAINY_MAP 1
    #define BRAINY_ARRAY 2
    #define BRAINY_STR 3
    #define BRAINY_BYTES 4
    #define BRAINY_SCALAR 5

    static uint64_t brainy_be(const unsigned char *p, int width) {
        uint64_t v = 0;
        for (int k = 0; k < width; k++) v = (v << 8) | p[k];
        return v;
    }

    /* The value at i: its kind; *count (pairs, members or payload bytes) and *next (members or payload start, or
       the end of a scalar). -1 when malformed or truncated. */
    static int brainy_head(const brainy_mp *m, Py_ssize_t i, uint64_t *count, Py_ssize_t *next) {
        static const signed char fixed[256] = {
            [0xc0] = 1, [0xc2] = 1, [0xc3] = 1, [0xca] = 5, [0xcb] = 9, [0xcc] = 2, [0xcd] = 3, [0xce] = 5,
            [0xcf] = 9, [0xd0] = 2, [0xd1] = 3, [0xd2] = 5, [0xd3] = 9, [0xd4] = 3, [0xd5] = 4, [0xd6] = 6,
            [0xd7] = 10, [0xd8] = 18};
        if (i >= m->n) return -1;
        unsigned t = m->b[i];
        int width, extra = 0, kind;
        if (t <= 0x7f || t >= 0xe0) { *count = 0; *next = i + 1; return BRAINY_SCALAR; }
        if (t <= 0x8f) { *count = t & 0x0f; *next = i + 1; return BRAINY_MAP; }
        if (t <= 0x9f) { *count = t & 0x0f; *next = i + 1; return BRAINY_ARRAY; }
        if (t <= 0xbf) {
            *count = t & 0x1f; *next = i + 1;
            return (uint64_t)(m->n - *next) >= *count ? BRAINY_STR : -1;
        }
        if (fixed[t]) {
            *count = 0; *next = i + fixed[t];
            return *next <= m->n ? BRAINY_SCALAR : -1;
        }
        switch (t) {
            case 0xc4: width = 1; kind = BRAINY_BYTES; break;
            case 0xc5: width = 2; kind = BRAINY_BYTES; break;
            case 0xc6: width = 4; kind = BRAINY_BYTES; break;
            case 0xc7: width = 1; extra = 1; kind = BRAINY_BYTES; break;
            case 0xc8: width = 2; extra = 1; kind = BRAINY_BYTES; break;
            case 0xc9: width = 4; extra = 1; kind = BRAINY_BYTES; break;
            case 0xd9: width = 1; kind = BRAINY_STR; break;
            case 0xda: width = 2; kind = BRAINY_STR; break;
            case 0xdb: width = 4; kind = BRAINY_STR; break;
            case 0xdc: width = 2; kind = BRAINY_ARRAY; break;
            case 0xdd: width = 4; kind = BRAINY_ARRAY; break;
            case 0xde: width = 2; kind = BRAINY_MAP; break;
            case 0xdf: width = 4; kind = BRAINY_MAP; break;
            default: return -1;  /* 0xc1 */
        }
        if (m->n - i - 1 < width) return -1;
        *count = brainy_be(m->b + i + 1, width);
        *next = i + 1 + width + extra;
        if (kind == BRAINY_STR || kind == BRAINY_BYTES) {
            if (*next > m->n || (uint64_t)(m->n - *next) < *count) return -1;
        }
        return kind;
    }

    /* Where the value at i ends, or -1. */
    static Py_ssize_t brainy_skip(const brainy_mp *m, Py_ssize_t i) {
        uint64_t remaining = 1, count;
        Py_ssize_t next;
        while (remaining) {
            int kind = brainy_head(m, i, &count, &next);
            if (kind < 0) return -1;
            remaining -= 1;
            if (kind == BRAINY_MAP) remaining += 2 * count;
            else if (kind == BRAINY_ARRAY) remaining += count;
            else if (kind != BRAINY_SCALAR) next += (Py_ssize_t)count;
            if (remaining > (uint64_t)m->n) return -1;  /* each value takes a byte at least */
            i = next;
        }
        return i;
    }

    /* Whether the value at i is the string key (and where the key ends, in *end), or -1 when malformed. */
    static int brainy_key_is(const brainy_mp *m, Py_ssize_t i, const char *name, Py_ssize_t length, Py_ssize_t *end) {
        uint64_t count;
        Py_ssize_t next;
        int kind = brainy_head(m, i, &count, &next);
        if (kind < 0) return -1;
        if (kind == BRAINY_STR) {
            *end = next + (Py_ssize_t)count;
            return (Py_ssize_t)count == length && memcmp(m->b + next, name, length) == 0;
        }
        *end = brainy_skip(m, i);
        return *end < 0 ? -1 : 0;
    }

    /* The array at i when it starts with a float and has room for count >= 1 floats of that width: its count, its
       stride (5 or 9), where its members start; 0 otherwise. That every member is such a float, brainy_cells
       tells as it packs them. */
    static uint64_t brainy_floats(const brainy_mp *m, Py_ssize_t i, int *stride, Py_ssize_t *start) {
        uint64_t count;
        Py_ssize_t next;
        if (brainy_head(m, i, &count, &next) != BRAINY_ARRAY || count == 0 || next >= m->n) return 0;
        unsigned t = m->b[next];
        if (t != 0xca && t != 0xcb) return 0;
        *stride = t == 0xca ? 5 : 9;
        if ((uint64_t)(m->n - next) / (uint64_t)*stride < count) return 0;
        *start = next;
        return count;
    }

    #if defined(__x86_64__) && defined(__GNUC__)
    #include <immintrin.h>
    #define BRAINY_SSSE3 1
    /* The stride-5 floats three at a time, while a fourth follows (its type byte is the load's 16th, its cells the
       store's last 4, written again by the next step): each step one load, one shuffle reversing the three's
       payloads into 12 bytes, the three type bytes compared under a mask, where the loop below takes about ten
       instructions a float (callgrind, a served row's walk of its map: 5,655 -> 3,533 instructions). The floats
       done; *other set when a type byte differed from t. */
    __attribute__((target("ssse3")))
    static uint64_t brainy_cells5_ssse3(const unsigned char *p, uint64_t count, unsigned char t, unsigned char *out,
                                        unsigned char *other) {
        const __m128i order = _mm_setr_epi8(4, 3, 2, 1, 9, 8, 7, 6, 14, 13, 12, 11, -1, -1, -1, -1);
        const __m128i types = _mm_setr_epi8(-1, 0, 0, 0, 0, -1, 0, 0, 0, 0, -1, 0, 0, 0, 0, 0);
        const __m128i want = _mm_set1_epi8((char)t);
        __m128i differ = _mm_setzero_si128();
        uint64_t k = 0;
        for (; k + 4 <= count; k += 3, p += 15, out += 12) {
            __m128i v = _mm_loadu_si128((const __m128i *)p);
            differ = _mm_or_si128(differ, _mm_and_si128(_mm_xor_si128(v, want), types));
            _mm_storeu_si128((__m128i *)out, _mm_shuffle_epi8(v, order));
        }
        *other |= _mm_movemask_epi8(_mm_cmpeq_epi8(differ, _mm_setzero_si128())) != 0xffff;
        return k;
    }

    /* The same six at a time with AVX2, while two more follow (the second load's last byte is the 31st, the store's
       32 bytes end 8 past the six's cells, written again by the next step or the loops after): the two loads' three
       each reversed by one shuffle, packed together by one permute. */
    __attribute__((target("avx2")))
    static uint64_t brainy_cells5_avx2(const unsigned char *p, uint64_t count, unsigned char t, unsigned char *out,
                                       unsigned char *other) {
        const __m256i order = _mm256_setr_epi8(4, 3, 2, 1, 9, 8, 7, 6, 14, 13, 12, 11, -1, -1, -1, -1,
                                               4, 3, 2, 1, 9, 8, 7, 6, 14, 13, 12, 11, -1, -1, -1, -1);
        const __m256i types = _mm256_setr_epi8(-1, 0, 0, 0, 0, -1, 0, 0, 0, 0, -1, 0, 0, 0, 0, 0,
                                               -1, 0, 0, 0, 0, -1, 0, 0, 0, 0, -1, 0, 0, 0, 0, 0);
        const __m256i packed = _mm256_setr_epi32(0, 1, 2, 4, 5, 6, 3, 7);
        const __m256i want = _mm256_set1_epi8((char)t);
        __m256i differ = _mm256_setzero_si256();
        uint64_t k = 0;
        for (; k + 8 <= count; k += 6, p += 30, out += 24) {
            __m256i v = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)p)),
                                                _mm_loadu_si128((const __m128i *)(p + 15)), 1);
            differ = _mm256_or_si256(differ, _mm256_and_si256(_mm256_xor_si256(v, want), types));
            _mm256_storeu_si256((__m256i *)out, _mm256_permutevar8x32_epi32(_mm256_shuffle_epi8(v, order), packed));
        }
        *other |= _mm256_movemask_epi8(_mm256_cmpeq_epi8(differ, _mm256_setzero_si256())) != -1;
        return k;
    }
    #endif

    /* The floats brainy_floats found, packed into out as little-endian float32s: 1, or 0 when a member is not a
       float of the first one's width (out is then the caller's to drop). */
    static int brainy_cells(const unsigned char *p, uint64_t count, int stride, unsigned char *out) {
        unsigned char t = p[0], other = 0;
        if (stride == 5) {
            uint64_t k = 0;
    #ifdef BRAINY_SSSE3
            if (__builtin_cpu_supports("avx2")) {
                k = brainy_cells5_avx2(p, count, t, out, &other);
                p += 5 * k;
                out += 4 * k;
            }
            if (__builtin_cpu_supports("ssse3")) {
                uint64_t more = brainy_cells5_ssse3(p, count - k, t, out, &other);
                k += more;
                p += 5 * more;
                out += 4 * more;
            }
    #endif
            /* a float32's big-endian bytes reversed are its little-endian ones, whatever the host's order, and the
               type bytes checked on the way, without a branch (one pass where there were two, and four shifts each
               way: 1.32 -> 0.5 us a 384-vector) */
            for (; k < count; k++, p += 5, out += 4) {
                uint32_t word;
                other |= p[0] ^ t;
                memcpy(&word, p + 1, 4);  /* one load, one byte swap, one store: the same bytes reversed, on either */
                word = __builtin_bswap32(word);  /* host's order (3 instructions a float where the four bytes were 8) */
                memcpy(out, &word, 4);
            }
            return other == 0;
        }
        for (uint64_t k = 0; k < count; k++, p += stride, out += 4) {
            uint64_t wide = brainy_be(p + 1, 8);
            uint32_t bits;
            double d;
            float f;
            other |= p[0] ^ t;
            memcpy(&d, &wide, 8);
            f = (float)d;  /* to nearest, half to even: as the packer rounds a float */
            memcpy(&bits, &f, 4);
            out[0] = bits & 0xff; out[1] = (bits >> 8) & 0xff; out[2] = (bits >> 16) & 0xff; out[3] = bits >> 24;
        }
        return other == 0;
    }

    /* -- JSON ------------------------------------------------------------------------------------------------ */

    static const double BRAINY_TEN[23] = {
        1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
        1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
    /* the doubles nearest 10^-k: a multiplication by one is a third rounding, still far inside the margin below */
    static const double BRAINY_TENTH[23] = {
        1e0, 1e-1, 1e-2, 1e-3, 1e-4, 1e-5, 1e-6, 1e-7, 1e-8, 1e-9, 1e-10, 1e-11,
        1e-12, 1e-13, 1e-14, 1e-15, 1e-16, 1e-17, 1e-18, 1e-19, 1e-20, 1e-21, 1e-22};

    static Py_ssize_t brainy_ws(const brainy_mp *m, Py_ssize_t i) {
        while (i < m->n) {
            unsigned char c = m->b[i];
            if (c != ' ' && c != 9 && c != 10 && c != 13) break;
            i++;
        }
        return i;
    }

    /* The string at i (m->b[i] == '"'): where it ends, -1 if it does not; *escaped set when it holds a backslash. */
    static Py_ssize_t brainy_js_string(const brainy_mp *m, Py_ssize_t i, int *escaped) {
        i++;
        while (i < m->n) {
            unsigned char c = m->b[i];
            if (c == '"') return i + 1;
            if (c == 92) { *escaped = 1; i += 2; continue; }  /* a backslash */
            i++;
        }
        return -1;
    }

    /* Where the value at i ends (its brackets matched, strings skipped; the decoder checks the rest), or -1. */
    static Py_ssize_t brainy_js_skip(const brainy_mp *m, Py_ssize_t i) {
        int escaped = 0;
        Py_ssize_t depth = 0;
        if (i >= m->n) return -1;
        unsigned char c = m->b[i];
        if (c == '"') return brainy_js_string(m, i, &escaped);
        if (c != '{' && c != '[') {
            while (i < m->n) {
                c = m->b[i];
                if (c == ',' || c == '}' || c == ']' || c == ' ' || c == 9 || c == 10 || c == 13) break;
                i++;
            }
            return i;
        }
        while (i < m->n) {
            c = m->b[i];
            if (c == '"') {
                i = brainy_js_string(m, i, &escaped);
                if (i < 0) return -1;
                continue;
            }
            if (c == '{' || c == '[') depth++;
            else if (c == '}' || c == ']') {
                if (--depth == 0) return i + 1;
            }
            i++;
        }
        return -1;
    }

    static const uint64_t BRAINY_POW10[9] = {1ull, 10ull, 100ull, 1000ull, 10000ull, 100000ull, 1000000ull,
                                             10000000ull, 100000000ull};

    /* The float32 a positive double ``approx`` within three roundings (a relative 2^-51) of a decimal rounds to, in
       *bits: 1 when that is certain, which it is unless a float32 midpoint lies within 2^-48 of it (then 0, and
       the decimal is read exactly). Past the margin, the float32 is also the one the decimal's nearest double
       rounds to. */
    static inline int brainy_f32_certain(double approx, uint32_t *bits) {
        float f = (float)approx, next, previous;
        uint32_t u, above, below;
        memcpy(&u, &f, 4);
        if (!(u - 1 < 0x7F7FFFFFu)) return 0;  /* zero, a subnormal's underflow, or past float32's range */
        above = u + 1;
        below = u - 1;
        memcpy(&next, &above, 4);
        memcpy(&previous, &below, 4);
        double fd = f, mid_lo = (fd + (double)previous) * 0.5;
        double mid_hi = u == 0x7F7FFFFFu ? fd + (fd - (double)previous) * 0.5 : (fd + (double)next) * 0.5;
        double margin = approx * 0x1p-48;
        if (!(approx - mid_lo > margin && mid_hi - approx > margin)) return 0;
        *bits = u;
        return 1;
    }

    /* The run of ASCII digits that starts the eight bytes at p: its length (0-8), what it is worth in *value. One
       load and three multiplications in place of up to eight steps of a digit loop; the lanes are read in memory
       order, so only where a load is little-endian (elsewhere: 0, and the loop reads the digits). */
    static inline int brainy_digit_run(const unsigned char *p, uint64_t *value) {
    #if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
        uint64_t v, bad;
        int k;
        memcpy(&v, p, 8);
        /* a byte 0x30-0x39: neither adding 0x46 nor taking 0x30 away sets its top bit; the first byte that does is
           the run's end (a byte that borrows or carries into its neighbour has failed itself) */
        bad = ((v + 0x4646464646464646ull) | (v - 0x3030303030303030ull)) & 0x8080808080808080ull;
        k = bad ? __builtin_ctzll(bad) >> 3 : 8;
        v -= 0x3030303030303030ull;
        v = k ? v << (8 * (8 - k)) : 0;  /* the run in the top lanes, zeros below it: leading zeros */
        v = (v * 10) + (v >> 8);  /* pairs: each even byte holds two digits' value */
        v = (((v & 0x000000FF000000FFull) * (100 + (1000000ull << 32))) +
             (((v >> 16) & 0x000000FF000000FFull) * (1 + (10000ull << 32)))) >> 32;
        *value = v;
        return k;
    #else
        (void)p;
        *value = 0;
        return 0;
    #endif
    }

    /* brainy_js_number's common case, a vector's number as a client writes it ([-]d.ddd, up to 19 digits, a short
       exponent or none), in fewer steps: its digits read 24 at once, no branch on how many there are, and one
       rounding test for every count of them. 1 with *bits and *end as brainy_js_number sets them, bit for bit;
       0 when the number is of another shape, lies within 2^-48 of a float32 midpoint, or ends within 40 bytes of
       the body's end (every load here stays inside it): brainy_js_number then reads it. 14.8 ns a number of a
       float32 written as a double, where the general reading takes 25.7. */
    static inline int brainy_js_quick(const brainy_mp *m, Py_ssize_t i, uint32_t *bits, Py_ssize_t *end) {
        const unsigned char *b = m->b;
        int negative, k1, k2, k3;
        uint64_t w, v1, v2, v3;
        long q;
        if (m->n - i < 40) return 0;
        negative = b[i] == '-';
        i += negative;
        w = (uint64_t)b[i] - '0';
        if (w > 9 || b[i + 1] != '.') return 0;
        i += 2;
        k1 = brainy_digit_run(b + i, &v1);
        k2 = brainy_digit_run(b + i + 8, &v2);
        k3 = brainy_digit_run(b + i + 16, &v3);
        if (k1 < 8) { k2 = 0; v2 = 0; }
        if (k2 < 8) { k3 = 0; v3 = 0; }
        /* no digit after the point (refused by the decoder); more than 19 digits, which w may not hold */
        if (k1 == 0 || k3 == 8 || k1 + k2 + k3 > 18) return 0;
        w = ((w * BRAINY_POW10[k1] + v1) * BRAINY_POW10[k2] + v2) * BRAINY_POW10[k3] + v3;
        q = -(long)(k1 + k2 + k3);
        i += k1 + k2 + k3;
        if (b[i] == 'e' || b[i] == 'E') {
            int exp_negative = 0, e = 0, digits = 0;
            i++;
            if (b[i] == '+' || b[i] == '-') { exp_negative = b[i] == '-'; i++; }
            while (b[i] >= '0' && b[i] <= '9') {
                if (++digits > 3) return 0;
                e = e * 10 + (b[i] - '0');
                i++;
            }
            if (!digits) return 0;
            q += exp_negative ? -e : e;
        }
        if (w == 0) {
            *bits = negative ? 0x80000000u : 0;
            *end = i;
            return 1;
        }
        if (q < -22 || q > 22) return 0;
        {
            /* within three roundings of the decimal, two where w is exact: brainy_js_number's margin test, which it
               skips only for the exact w it divides in one rounding */
            uint32_t u;
            if (!brainy_f32_certain(q >= 0 ? (double)w * BRAINY_TEN[q] : (double)w * BRAINY_TENTH[-q], &u)) return 0;
            *bits = negative ? u | 0x80000000u : u;
        }
        *end = i;
        return 1;
    }

    /* The float32 a JSON number at i becomes through the decoder (a double correctly rounded, or an int) and the
       packer (to nearest, half to even): 1 with *bits and *end set, 0 when it is not a number brainy packs here
       (then the decoder reads the array as it always does). */
    static int brainy_js_number(const brainy_mp *m, Py_ssize_t i, uint32_t *bits, Py_ssize_t *end) {
        const unsigned char *b = m->b;
        Py_ssize_t n = m->n, start = i;
        int negative = 0, digits = 0, is_float = 0, exp_negative = 0;
        uint64_t w = 0;
        long q = 0, e = 0;
        double d;
        float f;
        if (brainy_js_quick(m, i, bits, end)) return 1;
        if (i < n && b[i] == '-') { negative = 1; i++; }
        if (i >= n) return 0;
        if (b[i] == '0') {
            i++;
            if (i < n && b[i] >= '0' && b[i] <= '9') return 0;  /* a leading zero: the decoder refuses it */
        } else if (b[i] >= '1' && b[i] <= '9') {
            while (i < n && b[i] >= '0' && b[i] <= '9') {
                if (++digits > 19) return 0;
                w = w * 10 + (b[i] - '0');
                i++;
            }
        } else {
            return 0;
        }
        if (i < n && b[i] == '.') {
            is_float = 1;
            i++;
            if (i >= n || b[i] < '0' || b[i] > '9') return 0;
            while (i < n && b[i] >= '0' && b[i] <= '9') {
                uint64_t eight;
                /* past the first significant digit every digit counts: eight at once while 19 still fit */
                if (w != 0 && digits <= 11 && n - i >= 8 && brainy_digit_run(b + i, &eight) == 8) {
                    w = w * 100000000u + eight;
                    digits += 8;
                    q -= 8;
                    i += 8;
                    continue;
                }
                if (w != 0 || b[i] != '0') {
                    if (++digits > 19) return 0;
                }
                w = w * 10 + (b[i] - '0');
                q -= 1;
                i++;
            }
        }
        if (i < n && (b[i] == 'e' || b[i] == 'E')) {
            is_float = 1;
            i++;
            if (i < n && (b[i] == '+' || b[i] == '-')) { exp_negative = b[i] == '-'; i++; }
            if (i >= n || b[i] < '0' || b[i] > '9') return 0;
            while (i < n && b[i] >= '0' && b[i] <= '9') {
                e = e * 10 + (b[i] - '0');
                if (e > 100000) return 0;
                i++;
            }
        }
        q += exp_negative ? -e : e;
        if (!is_float) {
            if (digits > 18) return 0;  /* an int the decoder might make a float of */
            f = (float)(double)w;  /* "-0" is the int 0: +0.0 */
            if (negative && w) f = -f;
        } else if (w == 0) {
            f = negative ? -0.0f : 0.0f;
        } else {
            int exact = 0;
            if (q >= -22 && q <= 22) {
                if (w <= ((uint64_t)1 << 53)) {
                    /* both exact doubles, one rounding: the correctly rounded double */
                    d = q >= 0 ? (double)w * BRAINY_TEN[q] : (double)w / BRAINY_TEN[-q];
                    exact = 1;
                } else {
                    uint32_t u;
                    if (brainy_f32_certain(q >= 0 ? (double)w * BRAINY_TEN[q] : (double)w * BRAINY_TENTH[-q], &u)) {
                        *bits = negative ? u | 0x80000000u : u;
                        *end = i;
                        return 1;
                    }
                }
            }
            if (!exact) {
                char text[72];
                Py_ssize_t length = i - start - negative;
                if (length >= (Py_ssize_t)sizeof text) return 0;
                memcpy(text, b + start + negative, length);
                text[length] = 0;
                d = strtod(text, NULL);  /* correctly rounded */
                if (!isfinite(d)) return 0;  /* the decoder refuses a number past a double's range */
            }
            f = (float)d;
            if (negative) f = -f;
        }
        memcpy(bits, &f, 4);
        *end = i;
        return 1;
    }
    """
    ctypedef struct brainy_mp:
        const unsigned char *b
        Py_ssize_t n
    int BRAINY_MAP
    int BRAINY_ARRAY
    int brainy_head(const brainy_mp *m, Py_ssize_t i, uint64_t *count, Py_ssize_t *next) nogil
    Py_ssize_t brainy_skip(const brainy_mp *m, Py_ssize_t i) nogil
    int brainy_key_is(const brainy_mp *m, Py_ssize_t i, const char *name, Py_ssize_t length, Py_ssize_t *end) nogil
    uint64_t brainy_floats(const brainy_mp *m, Py_ssize_t i, int *stride, Py_ssize_t *start) nogil
    int brainy_cells(const unsigned char *p, uint64_t count, int stride, unsigned char *out) nogil
    Py_ssize_t brainy_ws(const brainy_mp *m, Py_ssize_t i) nogil
    Py_ssize_t brainy_js_string(const brainy_mp *m, Py_ssize_t i, int *escaped) nogil
    Py_ssize_t brainy_js_skip(const brainy_mp *m, Py_ssize_t i) nogil
    int brainy_js_number(const brainy_mp *m, Py_ssize_t i, uint32_t *bits, Py_ssize_t *end) nogil


cdef extern from *:
    """
    /* A new instance of the class, its slots empty: what object.__new__ makes, without a call through Python. */
    static PyObject *brainy_alloc(PyObject *type) {
        return ((PyTypeObject *)type)->tp_alloc((PyTypeObject *)type, 0);
    }
    """
    object brainy_alloc(object type)


cdef inline object _float32s(bytes cells):
    """``Float32s(cells)``: its ``__init__`` sets its one slot, cells, and nothing else, so it is set here on what
    object.__new__ makes (tests/test_vecscan.py holds both twins' vectors alike in every way Float32s is read)."""
    vector = brainy_alloc(Float32s)
    vector.cells = cells
    return vector


cdef class _Walk:
    """A walk over one body: ``found`` the packed vectors (where, cells), ``spans`` where each stood."""

    cdef brainy_mp m
    cdef list found
    cdef list spans

    cdef void begin(self, const unsigned char[::1] body):
        self.m.b = &body[0]
        self.m.n = body.shape[0]
        self.found = []
        self.spans = []


cdef class _MsgpackWalk(_Walk):
    cdef bint holes  # msgpack_holes's walk: each found vector (start, stop, Float32s), no spans

    cdef Py_ssize_t vector_of_map(self, Py_ssize_t i, Py_ssize_t where) except -2:
        """Walk the map at i (any other value skipped), packing its "vector"; where it ends, -1 when malformed."""
        cdef uint64_t count, pair, floats
        cdef Py_ssize_t j, end, start
        cdef int kind, is_vector, stride
        cdef bint seen = False
        cdef bytes cells
        kind = brainy_head(&self.m, i, &count, &j)
        if kind < 0:
            return -1
        if kind != BRAINY_MAP:
            return brainy_skip(&self.m, i)
        for pair in range(count):
            is_vector = brainy_key_is(&self.m, j, b"vector", 6, &end)
            if is_vector < 0:
                return -1
            j = end
            if is_vector:
                if seen:
                    return -1  # the decoder keeps the last: not chosen here
                seen = True
                floats = brainy_floats(&self.m, j, &stride, &start)
                if floats:
                    cells = PyBytes_FromStringAndSize(NULL, <Py_ssize_t>floats * 4)
                    # a member of another kind: the array is skipped, for the decoder to read
                    if brainy_cells(self.m.b + start, floats, stride, <unsigned char *>PyBytes_AS_STRING(cells)):
                        end = start + <Py_ssize_t>floats * stride
                        if self.holes:
                            self.found.append((j, end, _float32s(cells)))
                        else:
                            self.found.append((where, cells))
                            self.spans.append((j, end))
                        j = end
                        continue
            j = brainy_skip(&self.m, j)
            if j < 0:
                return -1
        return j


def msgpack_vectors(const unsigned char[::1] body, bint items):
    cdef _MsgpackWalk walk = _msgpack_walk(body, items, False)
    if walk is None:
        return None
    return _rest(body, walk.spans, b"\xc0"), walk.found


def msgpack_holes(const unsigned char[::1] body, bint items):
    cdef _MsgpackWalk walk = _msgpack_walk(body, items, True)
    return None if walk is None else walk.found


cdef _MsgpackWalk _msgpack_walk(const unsigned char[::1] body, bint items, bint holes):
    """The walk of a body whose vectors it packs, or None (msgpack_vectors's None)."""
    cdef _MsgpackWalk walk = _MsgpackWalk()
    walk.holes = holes
    cdef Py_ssize_t n = body.shape[0], j, k, end
    cdef uint64_t count, pairs, pair, index
    cdef int kind, is_items
    cdef bint seen = False
    if n == 0:
        return None
    walk.begin(body)
    kind = brainy_head(&walk.m, 0, &pairs, &j)
    if kind != BRAINY_MAP:
        return None
    if not items:
        end = walk.vector_of_map(0, -1)
    else:
        for pair in range(pairs):
            is_items = brainy_key_is(&walk.m, j, b"items", 5, &end)
            if is_items < 0:
                return None
            j = end
            if not is_items:
                j = brainy_skip(&walk.m, j)
                if j < 0:
                    return None
                continue
            if seen:
                return None
            seen = True
            kind = brainy_head(&walk.m, j, &count, &k)
            if kind < 0:
                return None
            if kind != BRAINY_ARRAY:
                j = brainy_skip(&walk.m, j)
                if j < 0:
                    return None
                continue
            for index in range(count):
                k = walk.vector_of_map(k, <Py_ssize_t>index)
                if k < 0:
                    return None
            j = k
        end = j
    if end != n or not walk.found:
        return None
    return walk


cdef bytes _rest(const unsigned char[::1] body, list spans, bytes filler):
    """The body with ``filler`` (a nil, a null) in place of each packed array's span."""
    cdef Py_ssize_t n = body.shape[0], size = n, at = 0, start, stop, width = len(filler)
    for start, stop in spans:
        size -= stop - start - width
    cdef bytes rest = PyBytes_FromStringAndSize(NULL, size)
    cdef char *out = PyBytes_AS_STRING(rest)
    for start, stop in spans:
        memcpy(out, &body[0] + at, start - at)
        out += start - at
        memcpy(out, PyBytes_AS_STRING(filler), width)
        out += width
        at = stop
    memcpy(out, &body[0] + at, n - at)
    return rest


cdef class _JsonWalk(_Walk):
    """The JSON walk, the numbers of the vector being read in a growing buffer. A method answers where the value it
    walked ends, -1 when the walk gives up (None to the caller)."""

    cdef uint32_t *cells
    cdef Py_ssize_t room

    def __dealloc__(self):
        free(self.cells)

    cdef int key(self, Py_ssize_t i, const char *name, Py_ssize_t length, Py_ssize_t *end) except -2:
        """The object key at i: 1 if it is ``name``, 0 if another, -1 to give up (not a string, or escaped: the
        walk does not unescape, so it cannot tell which key it is)."""
        cdef int escaped = 0
        if i >= self.m.n or self.m.b[i] != 34:  # '"'
            return -1
        end[0] = brainy_js_string(&self.m, i, &escaped)
        if end[0] < 0 or escaped:
            return -1
        return end[0] - i - 2 == length and memcmp(self.m.b + i + 1, name, length) == 0

    cdef Py_ssize_t vector(self, Py_ssize_t i, Py_ssize_t where) except -2:
        """The value at i, a vector's: packed when it is an array of numbers brainy packs; where it ends."""
        cdef Py_ssize_t j, end, count = 0
        cdef uint32_t bits
        cdef void *grown
        if i >= self.m.n or self.m.b[i] != 91:  # '['
            return brainy_js_skip(&self.m, i)
        j = brainy_ws(&self.m, i + 1)
        while True:
            if not brainy_js_number(&self.m, j, &bits, &end):
                return brainy_js_skip(&self.m, i)  # not one of ours: the decoder reads it, and says what is wrong
            if count == self.room:
                grown = realloc(self.cells, (self.room * 2 + 512) * sizeof(uint32_t))
                if grown == NULL:
                    raise MemoryError()
                self.cells = <uint32_t *>grown
                self.room = self.room * 2 + 512
            self.cells[count] = bits
            count += 1
            j = brainy_ws(&self.m, end)
            if j < self.m.n and self.m.b[j] == 44:  # ','
                j = brainy_ws(&self.m, j + 1)
                continue
            if j < self.m.n and self.m.b[j] == 93:  # ']'
                break
            return brainy_js_skip(&self.m, i)
        cdef bytes packed = PyBytes_FromStringAndSize(NULL, count * 4)
        cdef unsigned char *out = <unsigned char *>PyBytes_AS_STRING(packed)
        cdef Py_ssize_t k
        for k in range(count):
            bits = self.cells[k]
            out[4 * k] = bits & 0xFF  # little-endian whatever the host's order
            out[4 * k + 1] = (bits >> 8) & 0xFF
            out[4 * k + 2] = (bits >> 16) & 0xFF
            out[4 * k + 3] = bits >> 24
        self.found.append((where, packed))
        self.spans.append((i, j + 1))
        return j + 1

    cdef Py_ssize_t pairs(self, Py_ssize_t i, const char *name, Py_ssize_t length, Py_ssize_t where) except -2:
        """The object at i (any other value skipped): its ``name`` member walked by :meth:`member`; where it ends."""
        cdef Py_ssize_t j, end
        cdef int is_name
        cdef bint seen = False, more
        if i >= self.m.n or self.m.b[i] != 123:  # '{'
            return brainy_js_skip(&self.m, i)
        j = brainy_ws(&self.m, i + 1)
        if j < self.m.n and self.m.b[j] == 125:  # '}'
            return j + 1
        while True:
            is_name = self.key(j, name, length, &end)
            if is_name < 0:
                return -1
            j = brainy_ws(&self.m, end)
            if j >= self.m.n or self.m.b[j] != 58:  # ':'
                return -1
            j = brainy_ws(&self.m, j + 1)
            if is_name:
                if seen:
                    return -1  # the decoder keeps the last: not chosen here
                seen = True
                j = self.member(j, where)
            else:
                j = brainy_js_skip(&self.m, j)
            if j < 0:
                return -1
            j = self.after(j, 125, &more)  # '}'
            if j < 0 or not more:
                return j

    cdef Py_ssize_t member(self, Py_ssize_t i, Py_ssize_t where) except -2:
        """The value of the key walked for: a vector (``where`` >= -1), or the items array (``where`` -2)."""
        cdef Py_ssize_t j, index = 0
        cdef bint more
        if where != -2:
            return self.vector(i, where)
        if i >= self.m.n or self.m.b[i] != 91:  # '['
            return brainy_js_skip(&self.m, i)
        j = brainy_ws(&self.m, i + 1)
        if j < self.m.n and self.m.b[j] == 93:  # ']'
            return j + 1
        while True:
            j = self.pairs(j, b"vector", 6, index)
            if j < 0:
                return -1
            index += 1
            j = self.after(j, 93, &more)  # ']'
            if j < 0 or not more:
                return j

    cdef Py_ssize_t after(self, Py_ssize_t j, unsigned char close, bint *more) except -2:
        """After a member ending at j: the next one's start (``more``), or the container's end (its ``close``)."""
        j = brainy_ws(&self.m, j)
        if j < self.m.n and self.m.b[j] == 44:  # ','
            more[0] = True
            return brainy_ws(&self.m, j + 1)
        more[0] = False
        return j + 1 if j < self.m.n and self.m.b[j] == close else -1


def json_vectors(const unsigned char[::1] body, bint items):
    cdef _JsonWalk walk = _JsonWalk()
    cdef Py_ssize_t n = body.shape[0], i, end
    if n == 0:
        return None
    walk.begin(body)
    i = brainy_ws(&walk.m, 0)
    if i >= n or body[i] != 123:  # '{'
        return None
    if items:
        end = walk.pairs(i, b"items", 5, -2)
    else:
        end = walk.pairs(i, b"vector", 6, -1)
    if end < 0 or brainy_ws(&walk.m, end) != n or not walk.found:
        return None
    return _rest(body, walk.spans, b"null"), walk.found


def place(object document, list found):
    cdef Py_ssize_t where
    cdef object items = None
    for where, cells in found:
        vector = _float32s(cells)
        if where < 0:
            document["vector"] = vector
        else:
            if items is None:
                items = document["items"]
            items[where]["vector"] = vector
