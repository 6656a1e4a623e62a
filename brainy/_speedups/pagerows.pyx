# cython: language_level=3, boundscheck=False, wraparound=False
"""A page's rows out of the row cache and its plain hits, compiled: the twin of ``pagerows_py.py``.

``cached``: the cached answer of each key whose version is known at the read's generation without a
read (brainy/index/encoded_rows.py, ``Resolved``: key -> (generation of the version, the highest read
generation it is known for)), each one found marked used (``Encoded.used``: the cache's sweep gives it a
second chance, brainy/index/encoded_rows.py); None for the others, whose places are listed. The caller holds
the cache's lock. One C loop: two dict probes and a mark a row (moving each entry to the end of the
OrderedDict cost more than the probes).

``plain_hits``: a plain page's hits (no score, sources or passages), ``{"id", "score", "entity"}``. An
:class:`~brainy.contract.encoded.Encoded` entity's hit is made once and kept with it (a read-only
:class:`~brainy.contract.encoded.Hit`): a page read again builds no dicts. A plain document's hit (a call
in process) is a fresh dict. A page of encoded rows only is a :class:`~brainy.contract.encoded.Hits`.

``hits_json``: such a page's JSON array, one join of its hits' heads and rows' bytes (what orjson writes
for the same hits, without a call back a row).
"""

from cpython.dict cimport PyDict_GetItem, PyDict_SetItem
from cpython.list cimport PyList_GET_ITEM, PyList_GET_SIZE
from cpython.long cimport PyLong_AsLongLong
from cpython.object cimport PyObject
from cpython.tuple cimport PyTuple_GET_ITEM

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from libc.string cimport memcpy

from brainy.contract.encoded import Encoded, Hit, Hits, plain_hit

__all__ = ["cached", "hits_json", "plain_hits"]

def cached(list keys, dict found, entries, at, serial, include_vector, include_data):
    """``(answers, missing)``: each key's cached answer (an entry's second item) or None, and the places of the Nones."""
    cdef Py_ssize_t i, n = PyList_GET_SIZE(keys)
    cdef PyObject *known
    cdef PyObject *entry
    cdef object key, gen, slot, made
    cdef list out = [None] * n
    cdef list missing = []
    cdef dict table = <dict>entries  # an OrderedDict is a dict: probed as one
    cdef long long read_at = at  # generations are machine integers: compared in C, not as objects
    for i in range(n):
        key = <object>PyList_GET_ITEM(keys, i)
        known = PyDict_GetItem(found, key)
        if known is not NULL:
            gen = <object>PyTuple_GET_ITEM(<object>known, 0)
            if PyLong_AsLongLong(gen) <= read_at <= PyLong_AsLongLong(<object>PyTuple_GET_ITEM(<object>known, 1)):
                slot = (serial, key, gen, include_vector, include_data)
                entry = PyDict_GetItem(table, slot)
                if entry is not NULL:
                    made = <object>PyTuple_GET_ITEM(<object>entry, 1)
                    made.used = True
                    out[i] = made
                    continue
        missing.append(i)
    return out, missing


def plain_hits(list ids, list entities):
    """Each id with its entity as a hit without a score: a :class:`~brainy.contract.encoded.Hits` when every
    entity is encoded, else a list."""
    cdef Py_ssize_t i, n = min(PyList_GET_SIZE(ids), PyList_GET_SIZE(entities))
    cdef list out
    cdef object id_, entity, hit
    cdef PyObject *kept
    cdef bint every_encoded = True
    out = [None] * n
    for i in range(n):
        id_ = <object>PyList_GET_ITEM(ids, i)
        entity = <object>PyList_GET_ITEM(entities, i)
        if type(entity) is not Encoded:
            out[i] = {"id": id_, "score": None, "entity": entity}
            every_encoded = False
            continue
        hit = entity.hit
        if hit is not None:
            kept = PyDict_GetItem(hit, "id")
            if kept is not NULL and (<object>kept is id_ or <object>kept == id_):
                out[i] = hit
                continue
        hit = entity.hit = plain_hit(id_, entity)
        out[i] = hit
    return Hits(out) if every_encoded else out


def hits_json(hits_):
    """The JSON array of a page's hits, each its JSON head, its entity's JSON and ``}``; None when one of them
    is not a :class:`~brainy.contract.encoded.Hit` of an encoded row with its head (the caller encodes the
    list as it is)."""
    if not isinstance(hits_, list):
        return None
    cdef list hits = <list>hits_
    cdef Py_ssize_t i, n = PyList_GET_SIZE(hits), size = 2, at = 1
    cdef PyObject *entity
    cdef object hit, head, body
    cdef list parts = [None] * (2 * n)
    cdef bytes out
    cdef char *dst
    for i in range(n):
        hit = <object>PyList_GET_ITEM(hits, i)
        if type(hit) is not Hit:
            return None
        entity = PyDict_GetItem(hit, "entity")
        if entity is NULL or type(<object>entity) is not Encoded:
            return None
        try:
            head = hit.json_head
        except AttributeError:
            return None
        body = (<object>entity).json
        if type(head) is not bytes or type(body) is not bytes:
            return None
        parts[2 * i] = head
        parts[2 * i + 1] = body
        size += PyBytes_GET_SIZE(head) + PyBytes_GET_SIZE(body) + 2  # its closing brace, a comma
    if n:
        size -= 1
    out = PyBytes_FromStringAndSize(NULL, size)
    dst = PyBytes_AS_STRING(out)
    dst[0] = 91  # [
    for i in range(2 * n):
        head = <object>PyList_GET_ITEM(parts, i)
        if i and not i & 1:
            dst[at] = 44  # ,
            at += 1
        memcpy(dst + at, PyBytes_AS_STRING(head), PyBytes_GET_SIZE(head))
        at += PyBytes_GET_SIZE(head)
        if i & 1:
            dst[at] = 125  # }
            at += 1
    dst[at] = 93  # ]
    return out
