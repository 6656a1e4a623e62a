# cython: language_level=3, boundscheck=False, wraparound=False
"""Compiled twin of ``memput`` (see memput_py.py for the law): one commit's keys put into the memtable's versions
in one C loop. A batch of a thousand vectored adds puts two thousand keys; the Python loop cost 0.55-1.0 us a
row of the main thread, most of it the interpreter's steps around a dict get and set.

A new key's ``(generation, value)`` tuple is left out of the cyclic collector's passes as it is made: it holds
an int and bytes, which the collector would find at its first pass and untrack then (the memtable holds every
one until the flush)."""

from cpython.bytes cimport PyBytes_GET_SIZE
from cpython.dict cimport PyDict_GetItem, PyDict_Next, PyDict_SetItem
from cpython.list cimport PyList_GET_ITEM, PyList_GET_SIZE
from cpython.object cimport PyObject
from cpython.tuple cimport PyTuple_GET_ITEM

cdef extern from "Python.h":
    void PyObject_GC_UnTrack(void *op)

__all__ = ["put_many", "versions_in", "with_version"]


def put_many(dict versions, object items, object generation):
    cdef list new = []
    cdef Py_ssize_t size = 0, pos = 0
    cdef PyObject *key
    cdef PyObject *value
    if type(items) is dict:  # a commit's staged keys: walked in place, no pair made a key
        while PyDict_Next(items, &pos, &key, &value):
            size += _put(versions, <object>key, <object>value, generation, new)
    else:
        for pair_key, pair_value in items:
            size += _put(versions, pair_key, pair_value, generation, new)
    return new, size


cdef inline Py_ssize_t _put(dict versions, object key, object value, object generation, list new) except -1:
    cdef PyObject *found = PyDict_GetItem(versions, key)
    cdef tuple version
    if found is NULL:
        new.append(key)
        version = (generation, value)
        if type(value) is bytes:
            PyObject_GC_UnTrack(<PyObject *>version)  # holds an int and bytes: never in a cycle
        PyDict_SetItem(versions, key, version)
    else:
        PyDict_SetItem(versions, key, with_version(<object>found, generation, value))
    if type(key) is bytes and type(value) is bytes:
        return PyBytes_GET_SIZE(key) + PyBytes_GET_SIZE(value) + 16
    return len(key) + len(value) + 16


def versions_in(list keys, dict versions):
    """A flush's entries in one C loop (the memtable's generator cost a flush 0.3 us an entry)."""
    cdef list entries = []
    cdef tuple version
    cdef list found
    cdef Py_ssize_t i
    for key in keys:
        held = versions[key]
        if type(held) is tuple:
            version = <tuple>held
            entries.append((key, <object>PyTuple_GET_ITEM(version, 0), <object>PyTuple_GET_ITEM(version, 1)))
        else:
            found = list(held)
            for i in range(PyList_GET_SIZE(found) - 1, -1, -1):
                gen, value = <object>PyList_GET_ITEM(found, i)
                entries.append((key, gen, value))
    return entries


cpdef object with_version(object versions, object generation, object value):
    """A key's versions with ``(generation, value)`` put."""
    cdef list held
    cdef Py_ssize_t n
    if type(versions) is tuple:
        if (<object>PyTuple_GET_ITEM(versions, 0)) == generation:
            return (generation, value)
        return [versions, (generation, value)]
    held = <list>versions
    n = PyList_GET_SIZE(held)
    if (<object>PyTuple_GET_ITEM(<object>PyList_GET_ITEM(held, n - 1), 0)) == generation:
        held[n - 1] = (generation, value)
    else:
        held.append((generation, value))
    return held
