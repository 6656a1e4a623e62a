# cython: language_level=3, boundscheck=False, wraparound=False
"""Compiled twin of ``vecpack`` (see vecpack_py.py for the law): one pass over the items, no numpy.

An ingest of vectored rows spent a quarter of its time turning 384 Python floats into float32 bytes
through a type set and numpy (14 µs a vector); this is one loop in C. ``code_bounds`` is one loop too,
compiled for AVX2 beside the baseline and picked by the processor at load (GCC's ``target_clones``):
numpy has no int8 product, and converting the codes to float32 first cost more than the scan itself.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from cpython.float cimport PyFloat_AS_DOUBLE
from cpython.long cimport PyLong_AsDouble
from libc.math cimport isfinite
from libc.stdint cimport uint32_t
from libc.string cimport memcpy

from brainy._speedups.errors import VectorRefused
from brainy.contract.vectors import Float32s

__all__ = ["code_bounds", "pack", "quantise"]

cdef extern from *:
    """
    #include <math.h>
    #include <stdint.h>
    #include <string.h>
    /* Each row of int8 codes times an int16 query, exact in int32 (|code| <= 127, |query| <= 32767, rows of at
       most 516 cells), then its bound in double: scale * (step * dot + per_scale) + constant, stored as float.
       Written plainly: GCC vectorises the product at O3 (vpmovsxbw, vpmaddwd). */
    #if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
    __attribute__((target_clones("avx2", "default"), optimize("O3")))
    #endif
    static void brainy_code_bounds(const int8_t *codes, const int16_t *query, const float *scales, double step,
                                   double per_scale, double constant, float *out, Py_ssize_t rows,
                                   Py_ssize_t cells) {
        for (Py_ssize_t r = 0; r < rows; r++) {
            const int8_t *row = codes + r * cells;
            int32_t acc = 0;
            for (Py_ssize_t j = 0; j < cells; j++)
                acc += (int32_t)row[j] * (int32_t)query[j];
            double scaled = step * (double)acc;
            double spread = scaled + per_scale;
            double product = (double)scales[r] * spread;
            out[r] = (float)(product + constant);
        }
    }

    /* Little-endian float32 cells: 1 when one is an infinity or a NaN, else 2 when every one is zero (either
       sign), else 0. No branch in the loop, so GCC vectorises it at O3, eight cells a step with AVX2 (a served
       row's 384-vector: 1,099 -> 490 instructions, callgrind). */
    #if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
    __attribute__((target_clones("avx2", "default"), optimize("O3")))
    #elif defined(__GNUC__) && !defined(__clang__)
    __attribute__((optimize("O3")))
    #endif
    static int brainy_cells_check(const unsigned char *p, Py_ssize_t dimensions) {
        uint32_t special = 0, nonzero = 0;
        for (Py_ssize_t i = 0; i < dimensions; i++) {
    #if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
            uint32_t bits;
            memcpy(&bits, p + 4 * i, 4);
    #else
            uint32_t bits = (uint32_t)p[4 * i] | ((uint32_t)p[4 * i + 1] << 8) | ((uint32_t)p[4 * i + 2] << 16) |
                            ((uint32_t)p[4 * i + 3] << 24);
    #endif
            /* exponent all ones (an infinity or a NaN): adding one to the exponent field carries out of it */
            special |= ((bits & 0x7F800000u) + 0x00800000u) & 0x80000000u;
            nonzero |= bits & 0x7FFFFFFFu;
        }
        return special ? 1 : nonzero ? 0 : 2;
    }

    /* A base's quantised copy of float32 rows (vecpack_py.py says the law): the row's largest |x| over 127 in
       float32, then each cell divided by it in double, rounded to the nearest even (nearbyint: the default
       rounding mode) and clipped. A division, not a product by the inverse: that would differ in the last bit,
       and then in the code of a cell lying on a rounding edge. */
    #if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
    __attribute__((target_clones("avx2", "default"), optimize("O3")))
    #endif
    static void brainy_quantise(const float *vectors, signed char *codes, float *scales, Py_ssize_t rows,
                                Py_ssize_t cells) {
        for (Py_ssize_t r = 0; r < rows; r++) {
            const float *row = vectors + r * cells;
            signed char *out = codes + r * cells;
            float most = 0.0f;
            for (Py_ssize_t j = 0; j < cells; j++) {
                float a = fabsf(row[j]);
                most = a > most ? a : most;
            }
            float scale = most / 127.0f;
            scales[r] = scale;
            double wide = scale > 0.0f ? (double)scale : 1.0;
            for (Py_ssize_t j = 0; j < cells; j++) {
                double q = nearbyint((double)row[j] / wide);
                q = q > 127.0 ? 127.0 : q;
                q = q < -127.0 ? -127.0 : q;
                out[j] = (signed char)q;
            }
        }
    }
    """
    void brainy_code_bounds(const signed char *codes, const short *query, const float *scales, double step,
                            double per_scale, double constant, float *out, Py_ssize_t rows, Py_ssize_t cells) nogil
    int brainy_cells_check(const unsigned char *p, Py_ssize_t dimensions) nogil
    void brainy_quantise(const float *vectors, signed char *codes, float *scales, Py_ssize_t rows,
                         Py_ssize_t cells) nogil


def code_bounds(const signed char[:, ::1] codes, const short[::1] query, const float[::1] scales, double step,
                double per_scale, double constant, float[::1] out):
    if codes.shape[1] != query.shape[0] or out.shape[0] != codes.shape[0] or scales.shape[0] != codes.shape[0]:
        raise ValueError("codes, query, scales and out do not fit together")
    if codes.shape[1] > 516:
        raise ValueError("rows longer than 516 cells could overflow int32")
    if codes.shape[0] == 0:
        return
    with nogil:
        brainy_code_bounds(&codes[0, 0], &query[0], &scales[0], step, per_scale, constant, &out[0], codes.shape[0],
                           codes.shape[1])


def quantise(const float[:, ::1] vectors, signed char[:, ::1] codes, float[::1] scales):
    if codes.shape[0] != vectors.shape[0] or codes.shape[1] != vectors.shape[1] or scales.shape[0] != vectors.shape[0]:
        raise ValueError("vectors, codes and scales do not fit together")
    if vectors.shape[0] == 0:
        return
    with nogil:
        brainy_quantise(&vectors[0, 0], &codes[0, 0], &scales[0], vectors.shape[0], vectors.shape[1])


cdef extern from "Python.h":
    bint PyFloat_CheckExact(object)
    bint PyLong_CheckExact(object)


cdef bytes _packed(object value, Py_ssize_t dimensions):
    """A Float32s (a vector that came in packed): its own bytes, checked as the list of its numbers would be."""
    cdef bytes cells = value.cells
    if len(cells) != dimensions * 4:
        raise VectorRefused("length")
    cdef int found = brainy_cells_check(<const unsigned char *>PyBytes_AS_STRING(cells), dimensions)
    if found == 1:
        raise VectorRefused("not-a-number")
    if found == 2:
        raise VectorRefused("zero-vector")
    return cells


def pack(value, Py_ssize_t dimensions):
    if type(value) is Float32s:
        return _packed(value, dimensions)
    if not isinstance(value, (list, tuple)):
        raise VectorRefused("not-a-list")
    if len(value) != dimensions:
        raise VectorRefused("length")
    cdef bytes out = PyBytes_FromStringAndSize(NULL, dimensions * 4)
    cdef char *cells = PyBytes_AS_STRING(out)
    cdef Py_ssize_t i
    cdef double d
    cdef float f
    cdef uint32_t bits
    cdef bint nonzero = False
    cdef object item
    for i in range(dimensions):
        item = value[i]
        if PyFloat_CheckExact(item):
            d = PyFloat_AS_DOUBLE(item)
        elif PyLong_CheckExact(item):  # exactly int: a bool is not a number here
            try:
                d = PyLong_AsDouble(item)
            except OverflowError:
                raise VectorRefused("not-a-number") from None
        else:
            raise VectorRefused("not-a-number")
        if not isfinite(d):
            raise VectorRefused("not-a-number")
        f = <float>d
        if not isfinite(f):  # past float32's range
            raise VectorRefused("not-a-number")
        if f != 0.0:
            nonzero = True
        memcpy(&bits, &f, 4)
        cells[4 * i] = <char>(bits & 0xFF)  # little-endian whatever the host's order
        cells[4 * i + 1] = <char>((bits >> 8) & 0xFF)
        cells[4 * i + 2] = <char>((bits >> 16) & 0xFF)
        cells[4 * i + 3] = <char>(bits >> 24)
    if not nonzero:
        raise VectorRefused("zero-vector")
    return out
