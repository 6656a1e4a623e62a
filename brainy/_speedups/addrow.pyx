# cython: language_level=3, boundscheck=False, wraparound=False
"""A batch's adds of new rows, each id minted here, laid out and staged in one walk, compiled: the twin of
``addrow_py.py``, whose docstring is the law (what a plain add is, what is staged, what ``staged`` and ``plan``
hold). The same checks in the same order, the same row, key and op bytes: a batch of a thousand adds without
the rule's thousand calls through the argument check, the row checks, the savepoint and the put.

The row is packed here, not by ``pack_row``: its fields and their types are known once the item is plain, so
it is written straight as msgpack's Packer (``use_bin_type=True``) writes it: the smallest header of each
string and map, an int in the smallest form that holds it (msgpack's own choice: non-negative as unsigned,
negative as signed), a float as a float64, big-endian.

The same writer packs a projections snapshot's sections a slice at a time (``pack_column``, ``pack_postings``,
``pack_texts``: brainy/index/sections.py), each as msgpack packs it a value at a time, and a commit's log payload
(``Payloads``: its ops, an ``addMany``'s thousand dicts each of two names and two bytes, packed by msgpack's
Packer at 3,242 instructions a row, callgrind; what it does not take, by msgpack).
"""

from cpython cimport array
from cpython.buffer cimport PyBuffer_FillInfo
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.dict cimport PyDict_Copy, PyDict_Next, PyDict_SetItem, PyDict_Size
from cpython.float cimport PyFloat_AS_DOUBLE
from cpython.list cimport PyList_GET_ITEM, PyList_GET_SIZE
from cpython.long cimport PyLong_AsLongLongAndOverflow, PyLong_AsUnsignedLongLong
from cpython.mem cimport PyMem_Free, PyMem_Malloc, PyMem_Realloc
from cpython.object cimport PyObject
from libc.math cimport isfinite
from libc.stdint cimport int64_t, uint64_t
from libc.string cimport memcpy

cdef extern from "Python.h":
    const char *PyUnicode_AsUTF8AndSize(object text, Py_ssize_t *size) except NULL
    bint PyUnicode_IS_COMPACT_ASCII(object text)
    void *PyUnicode_DATA(object text)
    Py_ssize_t PyUnicode_GET_LENGTH(object text)
    void PyObject_GC_UnTrack(void *op)

import array as _array

import msgpack

__all__ = ["Payloads", "add_minted", "pack_column", "pack_postings", "pack_texts"]

cdef type _ARRAY = _array.array

cdef frozenset _ARGUMENTS = frozenset(("type", "vector", "data", "metadata"))
cdef object _INT_LOW = -(1 << 63)
cdef object _INT_END = 1 << 64


cdef inline bint _leaf(object value):
    cdef type kind = type(value)
    if kind is str or kind is bool or value is None:
        return True
    if kind is int:
        return _INT_LOW <= value < _INT_END
    return kind is float and isfinite(PyFloat_AS_DOUBLE(value))


cdef object _metadata(object value, frozenset reserved):
    """The row's metadata when it is plain (a new ``{}`` for None), else None."""
    cdef Py_ssize_t pos = 0
    cdef PyObject *key
    cdef PyObject *leaf
    if value is None:
        return {}
    if type(value) is not dict:
        return None
    while PyDict_Next(value, &pos, &key, &leaf):
        if type(<object>key) is not str or <object>key in reserved or not _leaf(<object>leaf):
            return None
    return value


cdef struct Out:
    char *data
    Py_ssize_t length, capacity


cdef int _open(Out *out) except -1:
    """An empty buffer of 1 KiB, grown as it fills (:func:`_room`); the caller frees ``out.data``."""
    out.capacity = 1024
    out.length = 0
    out.data = <char *>PyMem_Malloc(out.capacity)
    if out.data == NULL:
        raise MemoryError()
    return 0


cdef int _room(Out *out, Py_ssize_t more) except -1:
    cdef Py_ssize_t want = out.length + more
    cdef char *grown
    if want <= out.capacity:
        return 0
    while out.capacity < want:
        out.capacity *= 2
    grown = <char *>PyMem_Realloc(out.data, out.capacity)
    if grown == NULL:
        raise MemoryError()
    out.data = grown
    return 0


cdef inline int _byte(Out *out, unsigned char b) except -1:
    _room(out, 1)
    out.data[out.length] = <char>b
    out.length += 1
    return 0


cdef inline int _big(Out *out, unsigned char tag, uint64_t value, int size) except -1:
    """``tag`` then ``value``'s low ``size`` bytes, big-endian."""
    cdef int k
    _room(out, 1 + size)
    out.data[out.length] = <char>tag
    for k in range(size):
        out.data[out.length + 1 + k] = <char>((value >> (8 * (size - 1 - k))) & 0xFF)
    out.length += 1 + size
    return 0


cdef inline int _copy(Out *out, const char *source, Py_ssize_t size) except -1:
    _room(out, size)
    memcpy(out.data + out.length, source, size)
    out.length += size
    return 0


cdef int _str(Out *out, object text) except -1:
    cdef Py_ssize_t size
    cdef const char *utf8
    if PyUnicode_IS_COMPACT_ASCII(text):  # its own bytes are its UTF-8: no call to ask for them
        utf8 = <const char *>PyUnicode_DATA(text)
        size = PyUnicode_GET_LENGTH(text)
    else:
        utf8 = PyUnicode_AsUTF8AndSize(text, &size)
    if size < 32:
        _byte(out, 0xA0 | size)
    elif size < 256:
        _big(out, 0xD9, size, 1)
    elif size < 65536:
        _big(out, 0xDA, size, 2)
    else:
        _big(out, 0xDB, size, 4)
    return _copy(out, utf8, size)


cdef int _uint(Out *out, uint64_t u) except -1:
    """A non-negative int in the smallest form msgpack's Packer gives it."""
    if u < (1 << 7):
        return _byte(out, <unsigned char>u)
    if u < (1 << 8):
        return _big(out, 0xCC, u, 1)
    if u < (1 << 16):
        return _big(out, 0xCD, u, 2)
    if u < (1ULL << 32):
        return _big(out, 0xCE, u, 4)
    return _big(out, 0xCF, u, 8)


cdef int _head(Out *out, Py_ssize_t size, unsigned char fix, unsigned char wide) except -1:
    """A map's (``0x80``, ``0xDE``) or an array's (``0x90``, ``0xDC``) header: ``fix | size`` below 16, else the
    16-bit form ``wide``, else the 32-bit one after it."""
    if size < 16:
        return _byte(out, fix | size)
    if size < 65536:
        return _big(out, wide, size, 2)
    return _big(out, wide + 1, size, 4)


cdef inline int _map(Out *out, Py_ssize_t size) except -1:
    return _head(out, size, 0x80, 0xDE)


cdef int _int(Out *out, object value) except -1:
    cdef int overflow = 0
    cdef int64_t d = PyLong_AsLongLongAndOverflow(value, &overflow)
    if overflow > 0:  # past int64: a plain leaf's is below 2**64
        return _big(out, 0xCF, PyLong_AsUnsignedLongLong(value), 8)
    if d < -(1 << 5):
        if d < -(1 << 15):
            if d < -(1LL << 31):
                return _big(out, 0xD3, <uint64_t>d, 8)
            return _big(out, 0xD2, <uint64_t>d, 4)
        if d < -(1 << 7):
            return _big(out, 0xD1, <uint64_t>d, 2)
        return _big(out, 0xD0, <uint64_t>d, 1)
    if d < 0:
        return _byte(out, <unsigned char>(d & 0xFF))  # a negative fixint
    return _uint(out, <uint64_t>d)


cdef int _leaf_out(Out *out, object value) except -1:
    cdef double f
    cdef uint64_t bits
    cdef type kind = type(value)
    if value is None:
        return _byte(out, 0xC0)
    if kind is bool:
        return _byte(out, 0xC3 if value else 0xC2)
    if kind is str:
        return _str(out, value)
    if kind is int:
        return _int(out, value)
    f = PyFloat_AS_DOUBLE(value)
    memcpy(&bits, &f, 8)
    return _big(out, 0xCB, bits, 8)


# the row's field names as msgpack fixstrs, in the rule's order
cdef bytes _K_ID = b"\xa2id"
cdef bytes _K_TYPE = b"\xa4type"
cdef bytes _K_SUBTYPE_SERVICE = b"\xa7subtype\xc0\xa7service\xc0"
cdef bytes _K_DATA = b"\xa4data"
cdef bytes _K_METADATA = b"\xa8metadata"
cdef bytes _K_VISIBILITY = b"\xaavisibility"
cdef bytes _K_CONFIDENCE_WEIGHT_HAS = b"\xaaconfidence\xc0\xa6weight\xc0\xa9hasVector\xc3"
cdef bytes _K_GENERATION = b"\xaageneration"
cdef bytes _K_UPDATED_AT = b"\xa9updatedAt"
cdef bytes _K_CREATED_AT = b"\xa9createdAt"
cdef bytes _K_DENSE = b"\xa8denseInt"
cdef bytes _K_CREATED_BY = b"\xa9createdBy"
cdef bytes _K_UPDATED_BY = b"\xa9updatedBy"


cdef inline int _raw(Out *out, bytes piece) except -1:
    return _copy(out, PyBytes_AS_STRING(piece), PyBytes_GET_SIZE(piece))


cdef bytes _row_fixed(Out *out, object visibility, object generation, object timestamp):
    """The bytes every row of a walk holds from ``visibility`` to ``denseInt``'s name: packed once a walk, copied
    into each row (:func:`_pack_row`), as are its authors' fields (:func:`_row_authors`)."""
    out.length = 0
    _raw(out, _K_VISIBILITY)
    _str(out, visibility)
    _raw(out, _K_CONFIDENCE_WEIGHT_HAS)
    _raw(out, _K_GENERATION)
    _int(out, generation)
    _raw(out, _K_UPDATED_AT)
    _int(out, timestamp)
    _raw(out, _K_CREATED_AT)
    _int(out, timestamp)
    _raw(out, _K_DENSE)
    return PyBytes_FromStringAndSize(out.data, out.length)


cdef bytes _row_authors(Out *out, object caller):
    """A row's createdBy and updatedBy fields (none without a ``caller``)."""
    out.length = 0
    if caller is not None:
        _raw(out, _K_CREATED_BY)
        _str(out, caller)
        _raw(out, _K_UPDATED_BY)
        _str(out, caller)
    return PyBytes_FromStringAndSize(out.data, out.length)


cdef bytes _pack_row(Out *out, object text, object kind, object data, dict meta, long long dense, bytes fixed,
                     bytes authors):
    """The row as ``pack_row`` packs it (the field order of addrow_py's dict); ``fixed`` and ``authors`` are the
    walk's (:func:`_row_fixed`, :func:`_row_authors`)."""
    cdef Py_ssize_t pos = 0
    cdef PyObject *key
    cdef PyObject *leaf
    out.length = 0
    _map(out, 14 if PyBytes_GET_SIZE(authors) == 0 else 16)
    _raw(out, _K_ID)
    _str(out, text)
    _raw(out, _K_TYPE)
    _str(out, kind)
    _raw(out, _K_SUBTYPE_SERVICE)
    _raw(out, _K_DATA)
    _leaf_out(out, data)
    _raw(out, _K_METADATA)
    _map(out, PyDict_Size(meta))
    while PyDict_Next(meta, &pos, &key, &leaf):
        _str(out, <object>key)
        _leaf_out(out, <object>leaf)
    _raw(out, fixed)
    _uint(out, <uint64_t>dense)
    _raw(out, authors)
    return PyBytes_FromStringAndSize(out.data, out.length)


cdef bint _arguments_plain(dict item):
    cdef Py_ssize_t pos = 0
    cdef PyObject *key
    cdef PyObject *value
    while PyDict_Next(item, &pos, &key, &value):
        if <object>key not in _ARGUMENTS:
            return False
    return True


cdef inline bytes _joined(bytes head, bytes tail):
    """``head + tail`` without the buffer protocol's two requests and releases that ``+`` makes of bytes."""
    cdef Py_ssize_t h = PyBytes_GET_SIZE(head), t = PyBytes_GET_SIZE(tail)
    cdef bytes out = PyBytes_FromStringAndSize(NULL, h + t)
    memcpy(PyBytes_AS_STRING(out), PyBytes_AS_STRING(head), h)
    memcpy(PyBytes_AS_STRING(out) + h, PyBytes_AS_STRING(tail), t)
    return out


def add_minted(list items, Py_ssize_t start, tuple staged, tuple plan, list ids):
    cdef dict overlay
    cdef list undo, ops, moves
    cdef object generation, timestamp, caller, missing, mint, pack_vector, dimensions, refused, pack_row, visibility
    cdef frozenset nouns, reserved
    cdef bytes entity, vector_key
    cdef long long next_dense
    cdef Py_ssize_t i = start, n = PyList_GET_SIZE(items)
    cdef Out out
    overlay, undo, ops, moves, generation, timestamp, caller, next_dense = staged
    nouns, reserved, visibility, pack_vector, dimensions, refused, pack_row, missing, mint, entity, vector_key = plan
    _open(&out)
    try:
        i = _walk(items, i, n, overlay, undo, ops, moves, generation, timestamp, caller, &next_dense, nouns,
                  reserved, visibility, pack_vector, dimensions, refused, missing, mint, entity, vector_key, ids, &out)
    finally:
        PyMem_Free(out.data)
    return i, next_dense


cdef Py_ssize_t _walk(list items, Py_ssize_t i, Py_ssize_t n, dict overlay, list undo, list ops, list moves,
                      object generation, object timestamp, object caller, long long *dense_at, frozenset nouns,
                      frozenset reserved, object visibility, object pack_vector, object dimensions, object refused,
                      object missing, object mint, bytes entity, bytes vector_key, list ids, Out *out) except -1:
    cdef dict row, item_dict, op
    cdef bytes raw, stored, packed, key, vkey
    cdef long long next_dense = dense_at[0]
    cdef object item, kind, data, meta, vector, text, dense
    cdef tuple move
    # Every row of the walk holds its keys in this order and most of its values alike: each row is a copy of this
    # one (a copy of the keys' table, made by one memcpy) with its own six values put in place, not a new dict
    # filled a key at a time (its table grown, each key's slot looked up and filled: a third of the walk's dict
    # work). The same for the ops.
    cdef dict template = {
        "id": None,
        "type": None,
        "subtype": None,
        "service": None,
        "data": None,
        "metadata": None,
        "visibility": visibility,
        "confidence": None,
        "weight": None,
        "hasVector": True,
        "generation": generation,
        "updatedAt": timestamp,
        "createdAt": timestamp,
        "denseInt": None,
    }
    if caller is not None:
        template["createdBy"] = caller
        template["updatedBy"] = caller
    template["vector"] = None
    cdef dict op_template = {"k": "e", "o": "put", "row": None, "vec": None}
    cdef bytes fixed = _row_fixed(out, visibility, generation, timestamp)
    cdef bytes authors = _row_authors(out, caller)
    while i < n:
        item = <object>PyList_GET_ITEM(items, i)
        if type(item) is not dict:
            break
        item_dict = <dict>item
        if not _arguments_plain(item_dict):
            break
        kind = item_dict.get("type")
        if type(kind) is not str or kind not in nouns:
            break
        data = item_dict.get("data")
        if data is not None and type(data) is not str:
            break
        meta = _metadata(item_dict.get("metadata"), reserved)
        if meta is None:
            break
        vector = item_dict.get("vector")
        if vector is None:
            break
        try:
            packed = pack_vector(vector, dimensions)
        except refused:
            break
        text, raw = mint()
        dense = next_dense
        next_dense += 1
        row = PyDict_Copy(template)
        PyDict_SetItem(row, "id", text)
        PyDict_SetItem(row, "type", kind)
        PyDict_SetItem(row, "data", data)
        PyDict_SetItem(row, "metadata", meta)
        PyDict_SetItem(row, "denseInt", dense)
        PyDict_SetItem(row, "vector", packed)
        stored = _pack_row(out, text, kind, data, <dict>meta, next_dense - 1, fixed, authors)
        key = _joined(entity, raw)
        vkey = _joined(vector_key, raw)
        undo.append((key, missing))
        PyDict_SetItem(overlay, key, stored)
        undo.append((vkey, missing))
        PyDict_SetItem(overlay, vkey, packed)
        op = PyDict_Copy(op_template)
        PyDict_SetItem(op, "row", stored)
        PyDict_SetItem(op, "vec", packed)
        ops.append(op)
        move = ("e", None, row)
        # Kept until the next flush (the followers' moves, the commit's written rows): out of the cyclic
        # collector's passes, which would otherwise visit these two a row in every pass over the older
        # generations (a tenth of the main thread in a burst). Neither can be in a cycle: the row holds only
        # strings, numbers, bytes and a plain metadata dict of leaves, and a dict a container is put into later
        # is tracked again by that put. CPython leaves such a dict tracked (it holds a dict), never the tuple.
        PyObject_GC_UnTrack(<PyObject *>row)
        PyObject_GC_UnTrack(<PyObject *>move)
        moves.append(move)
        ids.append(text)
        i += 1
        dense_at[0] = next_dense
    return i


def pack_column(dict column, list keys, Py_ssize_t lo, Py_ssize_t hi, uint64_t base):
    """The values of ``column`` at ``keys[lo:hi]``, each packed as msgpack's Packer packs it, laid end to end, and
    the end of each one's bytes as native u64s counted from ``base``; None when a value is not a leaf this packs
    (nothing is packed then: the caller packs the column a value at a time)."""
    cdef Out out
    cdef Py_ssize_t i, n = hi - lo
    cdef bytes ends = PyBytes_FromStringAndSize(NULL, 8 * n)
    cdef uint64_t *end = <uint64_t *>PyBytes_AS_STRING(ends)
    cdef object value
    _open(&out)
    try:
        for i in range(n):
            value = column[<object>PyList_GET_ITEM(keys, lo + i)]
            if not _leaf(value) and type(value) is not float:  # a float any float: msgpack packs its bits
                return None
            _leaf_out(&out, value)
            end[i] = base + <uint64_t>out.length
        return ends, PyBytes_FromStringAndSize(out.data, out.length)
    finally:
        PyMem_Free(out.data)


def pack_postings(list items, Py_ssize_t lo, Py_ssize_t hi, uint64_t first):
    """Each ``((kind, value), posting)`` of ``items[lo:hi]`` as its snapshot directory entry ``[kind, value, first,
    count]`` packed as msgpack's Packer packs it, laid end to end, and its posting's u64s laid end to end; ``first``
    is where the slice's ints start. None when a kind is not a ``str``, a value not a leaf (a ``float`` any float) or
    a posting not an array of u64: nothing is packed then, the caller packs that path in Python."""
    cdef Out out, ints
    cdef Py_ssize_t i, count
    cdef object item, key, kind, value, posting
    _open(&out)
    try:
        _open(&ints)
        try:
            for i in range(lo, hi):
                item = <object>PyList_GET_ITEM(items, i)
                key, posting = item
                if type(key) is not tuple or len(<tuple>key) != 2:
                    return None
                kind, value = key
                if type(kind) is not str or (not _leaf(value) and type(value) is not float):
                    return None
                if type(posting) is not _ARRAY or (<array.array>posting).ob_descr.typecode != b"Q":
                    return None
                count = len(posting)
                _byte(&out, 0x94)
                _str(&out, kind)
                _leaf_out(&out, value)
                _uint(&out, first)
                _uint(&out, <uint64_t>count)
                _room(&ints, 8 * count)
                memcpy(ints.data + ints.length, (<array.array>posting).data.as_voidptr, 8 * count)
                ints.length += 8 * count
                first += <uint64_t>count
            return PyBytes_FromStringAndSize(out.data, out.length), PyBytes_FromStringAndSize(ints.data, ints.length)
        finally:
            PyMem_Free(ints.data)
    finally:
        PyMem_Free(out.data)


def pack_texts(dict texts, list keys, Py_ssize_t lo, Py_ssize_t hi, uint64_t base):
    """The UTF-8 of ``texts`` at ``keys[lo:hi]`` laid end to end, and the end of each as native u64s counted from
    ``base`` (a projections snapshot's id text and offsets); None when one is not a ``str``. A text that is not
    ASCII is encoded into bytes of its own: its UTF-8 is never kept on the ``str`` (the id map's live as long as the
    projections)."""
    cdef Out out
    cdef Py_ssize_t i, n = hi - lo, size
    cdef const char *utf8
    cdef bytes ends = PyBytes_FromStringAndSize(NULL, 8 * n)
    cdef uint64_t *end = <uint64_t *>PyBytes_AS_STRING(ends)
    cdef object text, encoded
    _open(&out)
    try:
        for i in range(n):
            text = texts[<object>PyList_GET_ITEM(keys, lo + i)]
            if type(text) is not str:
                return None
            if PyUnicode_IS_COMPACT_ASCII(text):
                utf8, size = <const char *>PyUnicode_DATA(text), PyUnicode_GET_LENGTH(text)
            else:
                encoded = (<str>text).encode("utf-8")
                utf8, size = PyBytes_AS_STRING(encoded), PyBytes_GET_SIZE(encoded)
            _room(&out, size)
            memcpy(out.data + out.length, utf8, size)
            out.length += size
            end[i] = base + <uint64_t>out.length
        return ends, PyBytes_FromStringAndSize(out.data, out.length)
    finally:
        PyMem_Free(out.data)


cdef int _bin(Out *out, bytes value) except -1:
    cdef Py_ssize_t size = PyBytes_GET_SIZE(value)
    cdef int width = 1 if size < 256 else 2 if size < 65536 else 4
    _big(out, 0xC4 + (width >> 1), size, width)  # bin 8, 16, 32
    return _copy(out, PyBytes_AS_STRING(value), size)


cdef object _PACKB = msgpack.packb


cdef int _value(Out *out, object value, int depth) except -1:
    """``value`` as msgpack's Packer (``use_bin_type=True``) packs it: a leaf, ``bytes``, and a ``dict`` or ``list``
    of them to a few levels written here, anything else (a tuple, a subclass, a deeper or a larger value) by
    msgpack itself, whose bytes and refusals are then the answer."""
    cdef type kind = type(value)
    cdef Py_ssize_t pos = 0, i, n
    cdef PyObject *key
    cdef PyObject *item
    if kind is bytes:
        return _bin(out, value)
    if kind is str or kind is bool or value is None or kind is float or (kind is int and _leaf(value)):
        return _leaf_out(out, value)
    if depth < 4 and kind is dict:
        _map(out, PyDict_Size(value))
        while PyDict_Next(value, &pos, &key, &item):
            _value(out, <object>key, depth + 1)
            _value(out, <object>item, depth + 1)
        return 0
    if depth < 4 and kind is list:
        n = PyList_GET_SIZE(value)
        _head(out, n, 0x90, 0xDC)
        for i in range(n):
            _value(out, <object>PyList_GET_ITEM(value, i), depth + 1)
        return 0
    return _raw(out, _PACKB(value, use_bin_type=True))


cdef class Payloads:
    """One thread's payloads, packed a commit at a time into the same memory (a commit's megabytes in new memory
    each time were its first touch's page faults: brainy/store/log.py ``encode_payload_here``)."""

    cdef Out out
    cdef Py_ssize_t exports

    def __cinit__(self):
        _open(&self.out)
        self.exports = 0

    def __dealloc__(self):
        PyMem_Free(self.out.data)

    def pack(self, object doc):
        if self.exports:
            raise BufferError("a view of the last payload is still held")
        self.out.length = 0
        _value(&self.out, doc, 0)
        return memoryview(self)

    def __getbuffer__(self, Py_buffer *view, int flags):
        PyBuffer_FillInfo(view, self, self.out.data, self.out.length, 1, flags)
        self.exports += 1

    def __releasebuffer__(self, Py_buffer *view):
        self.exports -= 1
