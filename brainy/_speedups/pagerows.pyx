# cython: language_level=3, boundscheck=False, wraparound=False
"""A page's rows out of the row cache and its plain hits, compiled: the twin of ``pagerows_py.py``.

``cached``: the cached answer of each key whose version is known at the read's generation without a
read (brainy/engine/encoded_rows.py, ``Resolved``: key -> (generation of the version, the highest read
generation it is known for)), each one found touched as most recently used; None for the others, whose
places are listed. The caller holds the cache's lock. One C loop: two dict probes and a touch a row.

``plain_hits``: a plain page's hits (no score, sources or passages), ``{"id", "score", "entity"}``. An
:class:`~brainy.contract.encoded.Encoded` entity's hit is made once and kept with it (a read-only
:class:`~brainy.contract.encoded.Hit`): a page read again builds no dicts. A plain document's hit (a call
in process) is a fresh dict.
"""

from cpython.dict cimport PyDict_GetItem, PyDict_SetItem
from cpython.list cimport PyList_GET_ITEM, PyList_GET_SIZE
from cpython.object cimport PyObject
from cpython.tuple cimport PyTuple_GET_ITEM

from brainy.contract.encoded import Encoded, Hit

__all__ = ["cached", "plain_hits"]

def cached(list keys, dict found, entries, at, serial, include_vector, include_data):
    """``(answers, missing)``: each key's cached answer (an entry's second item) or None, and the places of the Nones."""
    cdef Py_ssize_t i, n = PyList_GET_SIZE(keys)
    cdef PyObject *known
    cdef PyObject *entry
    cdef object key, gen, slot
    cdef list out = [None] * n
    cdef list missing = []
    cdef dict table = <dict>entries  # an OrderedDict is a dict: probed as one, touched through its own method
    touch = entries.move_to_end
    for i in range(n):
        key = <object>PyList_GET_ITEM(keys, i)
        known = PyDict_GetItem(found, key)
        if known is not NULL:
            gen = <object>PyTuple_GET_ITEM(<object>known, 0)
            if gen <= at <= <object>PyTuple_GET_ITEM(<object>known, 1):
                slot = (serial, key, gen, include_vector, include_data)
                entry = PyDict_GetItem(table, slot)
                if entry is not NULL:
                    touch(slot)
                    out[i] = <object>PyTuple_GET_ITEM(<object>entry, 1)
                    continue
        missing.append(i)
    return out, missing


def plain_hits(list ids, list entities):
    """Each id with its entity as a hit without a score."""
    cdef Py_ssize_t i, n = min(PyList_GET_SIZE(ids), PyList_GET_SIZE(entities))
    cdef list out = [None] * n
    cdef object id_, entity, hit
    cdef PyObject *kept
    for i in range(n):
        id_ = <object>PyList_GET_ITEM(ids, i)
        entity = <object>PyList_GET_ITEM(entities, i)
        if type(entity) is not Encoded:
            out[i] = {"id": id_, "score": None, "entity": entity}
            continue
        hit = entity.hit
        if hit is not None:
            kept = PyDict_GetItem(hit, "id")
            if kept is not NULL and (<object>kept is id_ or <object>kept == id_):
                out[i] = hit
                continue
        hit = Hit()
        PyDict_SetItem(hit, "id", id_)  # the dict's own store: a Hit refuses item assignment from Python
        PyDict_SetItem(hit, "score", None)
        PyDict_SetItem(hit, "entity", entity)
        entity.hit = hit
        out[i] = hit
    return out
