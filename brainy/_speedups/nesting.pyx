# cython: language_level=3, boundscheck=False, wraparound=False
"""How deep a decoded document nests, compiled: the twin of ``nesting_py.py`` (same names, same answers).

One C recursion a level over borrowed references, members told apart by their type's flags: a scalar
costs one load and one test, a container one call, and nothing is built. Only a value known to be too
deep is walked again, down the first member that is itself too deep, to name the path. ``limit`` bounds
the recursion, and is at most ``MAX_LIMIT``.
"""

from brainy._speedups.nesting_py import MAX_LIMIT, _check

__all__ = ["MAX_LIMIT", "too_deep"]

cdef extern from "Python.h":
    ctypedef struct PyObject
    ctypedef struct PyTypeObject:
        unsigned long tp_flags
    PyTypeObject *Py_TYPE(PyObject *o)
    unsigned long Py_TPFLAGS_LIST_SUBCLASS
    unsigned long Py_TPFLAGS_TUPLE_SUBCLASS
    unsigned long Py_TPFLAGS_DICT_SUBCLASS
    Py_ssize_t PyList_GET_SIZE(PyObject *o)
    PyObject *PyList_GET_ITEM(PyObject *o, Py_ssize_t i)
    Py_ssize_t PyTuple_GET_SIZE(PyObject *o)
    PyObject *PyTuple_GET_ITEM(PyObject *o, Py_ssize_t i)
    bint PyDict_Next(PyObject *d, Py_ssize_t *pos, PyObject **key, PyObject **value)

cdef unsigned long _CONTAINER = Py_TPFLAGS_LIST_SUBCLASS | Py_TPFLAGS_TUPLE_SUBCLASS | Py_TPFLAGS_DICT_SUBCLASS


cdef inline bint _container(PyObject *o) noexcept:
    return (Py_TYPE(o).tp_flags & _CONTAINER) != 0


cdef bint _past(PyObject *o, int room) noexcept:
    """Whether the container ``o`` nests more than ``room`` levels, its own included. Members are borrowed:
    nothing here runs Python code that could change them."""
    cdef unsigned long flags = Py_TYPE(o).tp_flags
    cdef Py_ssize_t i, n, pos = 0
    cdef PyObject *key
    cdef PyObject *member
    if room == 0:
        return True
    if flags & Py_TPFLAGS_DICT_SUBCLASS:
        while PyDict_Next(o, &pos, &key, &member):
            if _container(member) and _past(member, room - 1):
                return True
    elif flags & Py_TPFLAGS_LIST_SUBCLASS:
        n = PyList_GET_SIZE(o)
        for i in range(n):
            member = PyList_GET_ITEM(o, i)
            if _container(member) and _past(member, room - 1):
                return True
    else:
        n = PyTuple_GET_SIZE(o)
        for i in range(n):
            member = PyTuple_GET_ITEM(o, i)
            if _container(member) and _past(member, room - 1):
                return True
    return False


cdef list _path(object value, int room):
    """The path to the first container past ``room`` levels, in document order (``value`` is known to have one)."""
    cdef list path = []
    cdef object members
    while room:
        room -= 1
        members = value.items() if isinstance(value, dict) else enumerate(value)
        for key, member in members:
            if _container(<PyObject *>member) and _past(<PyObject *>member, room):
                path.append(key)
                value = member
                break
    return path


def too_deep(value, int limit):
    """None when ``value`` nests at most ``limit`` levels; else the path to the first container past them."""
    if not 0 <= limit <= MAX_LIMIT:
        _check(limit)
    if not _container(<PyObject *>value) or not _past(<PyObject *>value, limit):
        return None
    return _path(value, limit)
