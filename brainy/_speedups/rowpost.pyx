# cython: language_level=3, boundscheck=False, wraparound=False
"""Compiled twin of ``rowpost`` (see rowpost_py.py for the law): a row's leaves posted in one C walk.

A durable commit's rows are posted on the fsync worker, and a flush folds them into the chain's delta again:
nine leaves a row, each a where kind, a posting insert and a column entry, cost 8.6 µs a row in Python. Here
the kinds of the common exact types are answered without a call, and a posting's last int is read in place
(new rows mint increasing ints, so an insert is nearly always an append). An append grows the array in place
when no buffer of it is held, as its own append would; else, and for an insert, the array's own methods change
it, which refuse to move a buffer a reader holds. A new posting is a clone of an empty array, not the
constructor reading a tuple (a row with one unique leaf, 2.3 -> 1.5 us).

``post_rows`` posts a commit's new rows in one call, and keeps each reserved leaf's last value with the posting
and column it went to: a row holding the same value there (an ``addMany``'s rows share their type, visibility,
author and nulls) appends to that posting and sets its column with no key made, hashed or looked up, which the
dicts would answer alike (a posting or a column, once made, stays the same object: posting only adds to them).
Projections.apply_moves of the ingest benchmark's batches, in process: 3.4 -> 1.5 us a row (with the interpreted
call a row it replaces).
"""

from cpython cimport array
from cpython.dict cimport PyDict_GetItemWithError, PyDict_SetDefault
from cpython.object cimport PyObject
from libc.stdint cimport uint64_t

cdef extern from *:
    """
    /* How many buffers of the array are held (the field its own methods check before they move the buffer); a
       macro, as the array's struct is declared after this block */
    #define brainy_exports(a) (((arrayobject *)(a))->ob_exports)
    """
    int brainy_exports(object a)

import array as _array
import bisect

__all__ = ["post_leaves", "post_row", "post_rows"]

cdef type ARRAY = _array.array
cdef array.array _TEMPLATE = _array.array("Q")
cdef object _UNSEEN = object()  # post_rows's last value of a reserved name no row has held yet


def post_leaves(dict row, object dense, tuple reserved, tuple nullable, dict postings, dict columns,
                object kind_of):
    _leaves(row, dense, dense, reserved, _nulls(reserved, nullable), postings, columns, kind_of, None)


def post_row(dict row, object dense, tuple reserved, tuple nullable, dict postings, dict columns, object kind_of,
             dict ids, object everyone, tuple column_only):
    return _row(row, dense, dense, reserved, _nulls(reserved, nullable), postings, columns, kind_of, ids, everyone,
                column_only, None)


def post_rows(list rows, tuple reserved, tuple nullable, dict postings, dict columns, object kind_of, dict ids,
              object everyone, tuple column_only, dict lengths):
    cdef list wordy = []
    # each reserved name's last value, its posting and its column, then each order column
    cdef list seen = [_UNSEEN] * (3 * len(reserved)) + [None] * len(column_only)
    cdef dict row
    cdef uint64_t nulls = _nulls(reserved, nullable)
    for row in rows:
        dense = row["denseInt"]
        if _row(row, dense, dense, reserved, nulls, postings, columns, kind_of, ids, everyone, column_only, seen):
            wordy.append(row)
        else:
            lengths[dense] = 0
    return wordy


cdef uint64_t _nulls(tuple reserved, tuple nullable) except? 0:
    """Which of the reserved names read as null when absent, a bit each (the test a row's absent name took)."""
    cdef uint64_t nulls = 0
    cdef Py_ssize_t j
    if len(reserved) > 64:
        raise ValueError("at most 64 reserved names are posted")
    for j in range(len(reserved)):
        if reserved[j] in nullable:
            nulls |= (<uint64_t>1) << j
    return nulls


cdef bint _row(dict row, object dense, uint64_t d, tuple reserved, uint64_t nulls, dict postings, dict columns,
               object kind_of, dict ids, object everyone, tuple column_only, list seen) except -1:
    """post_row's steps (``seen``: post_rows's reserved leaves and order columns, else None); whether the row may
    hold words."""
    cdef type kind
    ids[dense] = row["id"]
    _insert(everyone, dense, d)
    _leaves(row, dense, d, reserved, nulls, postings, columns, kind_of, seen)
    cdef Py_ssize_t j, at = 3 * len(reserved)
    for j in range(len(column_only)):
        name = column_only[j]
        column = None if seen is None else seen[at + j]
        if column is None:
            column = columns.get(name)
            if column is None:
                column = {}
                columns[name] = column
            if seen is not None:
                seen[at + j] = column
        (<dict>column)[dense] = row[name]
    if row.get("data") is not None:
        return True
    metadata = row.get("metadata")
    if metadata is None:
        return False
    if type(metadata) is not dict:
        return True
    for value in (<dict>metadata).values():
        kind = type(value)
        if kind is not int and kind is not float and kind is not bool and value is not None:
            return True
    return False


cdef int _leaves(dict row, object dense, uint64_t d, tuple reserved, uint64_t nulls, dict postings, dict columns,
                 object kind_of, list seen) except -1:
    """post_leaves's steps; ``seen`` (post_rows's: each reserved name's last value, posting and column) or None."""
    cdef Py_ssize_t j
    cdef PyObject *held
    for j in range(len(reserved)):
        name = reserved[j]
        held = PyDict_GetItemWithError(row, name)  # one lookup, not a test and a read (a str key: no error)
        if held != NULL:
            value = <object>held
        elif (nulls >> j) & 1:
            value = None
        else:
            continue
        if seen is None:
            _post(name, value, dense, d, postings, columns, kind_of)
            continue
        last = seen[3 * j]
        if last is value or (type(value) is str and type(last) is str and <str>value == <str>last):
            _insert(seen[3 * j + 1], dense, d)
            PyDict_SetDefault(seen[3 * j + 2], dense, value)
        else:
            _post(name, value, dense, d, postings, columns, kind_of)
            seen[3 * j] = value
            seen[3 * j + 1] = postings[name][(_kind(value, kind_of), value)]
            seen[3 * j + 2] = columns[name]
    _walk(row.get("metadata") or {}, "", dense, d, postings, columns, kind_of)
    return 0


cdef int _walk(object node, str prefix, object dense, uint64_t d, dict postings, dict columns,
               object kind_of) except -1:
    for key, value in node.items():
        path = prefix + key
        if isinstance(value, dict):
            _walk(value, path + ".", dense, d, postings, columns, kind_of)
        elif isinstance(value, list):
            for element in value:
                if not isinstance(element, (dict, list)):
                    _post(path, element, dense, d, postings, columns, kind_of)
        else:
            _post(path, value, dense, d, postings, columns, kind_of)
    return 0


cdef inline object _kind(object value, object kind_of):
    cdef type t = type(value)
    if value is None:
        return "null"
    if t is bool:
        return "boolean"
    if t is int or t is float:
        return "number"
    if t is str:
        return "string"
    return kind_of(value)


cdef int _post(object path, object value, object dense, uint64_t d, dict postings, dict columns,
               object kind_of) except -1:
    cdef dict values, column  # typed: their lookups are the dict's own calls, not method calls by name
    key = (_kind(value, kind_of), value)
    values = postings.get(path)
    if values is None:
        values = {}
        postings[path] = values
    posting = values.get(key)
    if posting is None:
        values[key] = _one(d)
    else:
        _insert(posting, dense, d)
    column = columns.get(path)
    if column is None:
        columns[path] = {dense: value}
    else:
        PyDict_SetDefault(column, dense, value)  # the first kept: one lookup, not a test and a put
    return 0


cdef array.array _one(uint64_t d):
    """A new posting holding ``d``: a clone of an empty one, not the array constructor reading a tuple."""
    cdef array.array a = array.clone(_TEMPLATE, 1, False)
    (<uint64_t*>a.data.as_voidptr)[0] = d
    return a


cdef int _insert(object posting, object dense, uint64_t d) except -1:
    cdef array.array a
    cdef Py_ssize_t n, lo, hi, mid
    cdef const uint64_t* data
    if type(posting) is ARRAY and (<array.array>posting).ob_descr.typecode == b"Q":
        a = <array.array>posting
        n = a.ob_size
        data = <const uint64_t*>a.data.as_voidptr
        if n == 0 or data[n - 1] < d:
            if brainy_exports(a) == 0:  # no buffer held: grown in place, as append grows it, without its call
                array.resize_smart(a, n + 1)
                (<uint64_t*>a.data.as_voidptr)[n] = d
            else:
                a.append(dense)  # which refuses, as it should
            return 0
        lo, hi = 0, n
        while lo < hi:
            mid = (lo + hi) // 2
            if data[mid] < d:
                lo = mid + 1
            else:
                hi = mid
        if lo == n or data[lo] != d:
            a.insert(lo, dense)
        return 0
    if not posting or posting[len(posting) - 1] < dense:  # any other sequence: the pure twin's steps
        posting.append(dense)
        return 0
    i = bisect.bisect_left(posting, dense)
    if i == len(posting) or posting[i] != dense:
        posting.insert(i, dense)
    return 0
