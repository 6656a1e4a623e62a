# cython: language_level=3, boundscheck=False, wraparound=False
"""Compiled twin of ``rowpost`` (see rowpost_py.py for the law): a row's leaves posted in one C walk.

A durable commit's rows are posted on the fsync worker, and a flush folds them into the chain's delta again:
nine leaves a row, each a where kind, a posting insert and a column entry, cost 8.6 µs a row in Python. Here
the kinds of the common exact types are answered without a call, and a posting's last int is read in place
(new rows mint increasing ints, so an insert is nearly always an append). An append grows the array in place
when no buffer of it is held, as its own append would; else, and for an insert, the array's own methods change
it, which refuse to move a buffer a reader holds. A new posting is a clone of an empty array, not the
constructor reading a tuple (a row with one unique leaf, 2.3 -> 1.5 us).
"""

from cpython cimport array
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

__all__ = ["post_leaves", "post_row"]

cdef type ARRAY = _array.array
cdef array.array _TEMPLATE = _array.array("Q")


def post_leaves(dict row, object dense, tuple reserved, tuple nullable, dict postings, dict columns,
                object kind_of):
    cdef uint64_t d = dense
    for name in reserved:
        if name in row:
            _post(name, row[name], dense, d, postings, columns, kind_of)
        elif name in nullable:
            _post(name, None, dense, d, postings, columns, kind_of)
    _walk(row.get("metadata") or {}, "", dense, d, postings, columns, kind_of)


def post_row(dict row, object dense, tuple reserved, tuple nullable, dict postings, dict columns, object kind_of,
             dict ids, object everyone, tuple column_only):
    cdef uint64_t d = dense
    cdef type kind
    ids[dense] = row["id"]
    _insert(everyone, dense, d)
    post_leaves(row, dense, reserved, nullable, postings, columns, kind_of)
    for name in column_only:
        column = columns.get(name)
        if column is None:
            column = {}
            columns[name] = column
        column[dense] = row[name]
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
    elif dense not in column:
        column[dense] = value
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
