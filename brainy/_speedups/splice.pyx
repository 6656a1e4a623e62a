# cython: language_level=3, boundscheck=False, wraparound=False
"""The fleet edge's spliced road over HTTP/1.1, compiled: the twin of ``splice_py.py``, whose docstring says what
the road does; this one does the same with the road's state in C fields and its steps in C, so a proxied request
runs no interpreted code between the glue's call and the kept connection's write, nor between the owner's answer
and the glue's ``deliver``."""

from cpython.dict cimport PyDict_GetItem
from cpython.list cimport PyList_GET_SIZE
from cpython.object cimport PyObject

from time import monotonic

__all__ = ["Road", "Spliced"]

cdef str BRAINS = "/v1/brains/"
cdef bytes GET_BRAINS = b"GET /v1/brains/"
cdef bytes MOVED_NAME = b"BrainMovedError"


cdef class Road:
    """One edge's spliced road (``splice_py.Road``: the same arguments, read the same way)."""

    cdef readonly object fleet
    cdef dict routes
    cdef object route
    cdef frozenset placed
    cdef object refusal
    cdef object passes
    cdef object write_id
    cdef str forwarded
    cdef str write
    cdef dict owners
    cdef object owner_of
    cdef dict fields
    cdef object field_of
    cdef object frame
    cdef frozenset drop
    cdef tuple extra
    cdef dict idle
    cdef double keep_seconds
    cdef Py_ssize_t idle_per_peer
    cdef object idle_peer
    cdef double timeout
    cdef object passed
    cdef object raw
    cdef long moved
    cdef object off_road
    cdef object parse_head
    cdef object request
    cdef object received

    def __init__(self, fleet, dict routes, route, frozenset placed, refusal, passes, write_id, str forwarded,
                 str write, dict owners, owner_of, dict fields, field_of, frame, frozenset drop, tuple extra,
                 dict idle, double keep_seconds, Py_ssize_t idle_per_peer, idle_peer, double timeout, passed, raw,
                 long moved, off_road, parse_head, request, received):
        self.fleet = fleet
        self.routes = routes
        self.route = route
        self.placed = placed
        self.refusal = refusal
        self.passes = passes
        self.write_id = write_id
        self.forwarded = forwarded
        self.write = write
        self.owners = owners
        self.owner_of = owner_of
        self.fields = fields
        self.field_of = field_of
        self.frame = frame
        self.drop = drop
        self.extra = extra
        self.idle = idle
        self.keep_seconds = keep_seconds
        self.idle_per_peer = idle_per_peer
        self.idle_peer = idle_peer
        self.timeout = timeout
        self.passed = passed
        self.raw = raw
        self.moved = moved
        self.off_road = off_road
        self.parse_head = parse_head
        self.request = request
        self.received = received

    def take(self, conn, bytes data, double now, deliver):
        if not data.startswith(GET_BRAINS):
            return None
        cdef Py_ssize_t stop = data.find(b"/", 15)
        if stop < 0:
            return None
        name = data[15:stop]
        if b" " in name or b"%" in name or name.decode("latin-1") in self.fleet.owned:
            return None
        if conn._failed or conn.mid_request:
            return None
        head = self.parse_head(data, 0, conn._max_header)
        if head is None:
            return None
        method, path, query, headers, keep_alive, length, body_at = head
        if length or body_at != len(data) or not keep_alive:
            return None
        request = self.request.__new__(self.request)  # its slots set here: no interpreted __init__
        request.method = method
        request.path = path
        request.query = query
        request.headers = headers
        request.body = b""
        if not self.splice(request, deliver):
            return None
        deadlines = conn._deadlines
        deadlines.last_data = now
        deadlines.request_began = now
        conn._owed += 1
        received = self.received.__new__(self.received)
        received.request = request
        received.keep_alive = True
        return received

    cpdef object splice(self, request, deliver):
        cdef str method = request.method
        cdef str path = request.path
        if method == "HEAD" or not path.startswith(BRAINS):
            return False
        cdef dict headers = request.headers
        if self.forwarded in headers:
            return False
        accept = headers.get("accept")
        cdef PyObject* remembered = PyDict_GetItem(self.routes, (method, path, accept))
        if remembered is not NULL:
            match = <object>remembered
        else:
            try:
                match = self.route(method, path, accept)
            except self.refusal:
                return False
        brain = match.params.get("brain")
        if brain is None or match.server is not None or match.door in self.placed:
            return False
        fleet = self.fleet
        if brain in fleet.arriving or brain in fleet.owned or not self.passes(request, match, brain):
            return False
        owner = fleet.owners.get(brain)
        if owner is None:
            return False
        node = owner.node
        found = fleet.nodes.get(node)
        if found is None:
            return False
        url = found.url
        cdef PyObject* known_at = PyDict_GetItem(self.owners, url)
        known = <object>known_at if known_at is not NULL else self.owner_of(url)
        address, authority = known
        if method != "GET" and self.write not in headers:
            headers[self.write] = self.write_id()
        cdef PyObject* field_at = PyDict_GetItem(self.fields, node)
        field = <object>field_at if field_at is not NULL else self.field_of(node)
        query = request.query
        data = self.frame(method, f"{path}?{query}" if query else path, authority, headers, self.drop, self.extra,
                          request.body)
        cdef PyObject* kept_at = PyDict_GetItem(self.idle, address)
        if kept_at is NULL:
            return False
        cdef list kept = <list>kept_at
        if PyList_GET_SIZE(kept) == 0:
            return False
        peer = kept[PyList_GET_SIZE(kept) - 1]
        if not peer.closed and monotonic() - peer.idle_since <= self.keep_seconds:
            kept.pop()
        else:
            peer = self.idle_peer(address)
            if peer is None:
                return False
        cdef Spliced spliced = Spliced.__new__(Spliced)
        spliced.road = self
        spliced.peer = peer
        spliced.address = address
        spliced.request = request
        spliced.brain = brain
        spliced.field = field
        spliced.deliver = deliver
        spliced.began = monotonic()
        peer.send_spliced(data, self.timeout, spliced)
        return True


cdef class Spliced:
    """One request on the road (``splice_py.Spliced``)."""

    cdef readonly Road road
    cdef readonly object peer
    cdef readonly object address
    cdef readonly object request
    cdef readonly object brain
    cdef readonly object field
    cdef readonly object deliver
    cdef readonly double began

    def __init__(self, Road road, peer, address, request, brain, field, deliver):
        self.road = road
        self.peer = peer
        self.address = address
        self.request = request
        self.brain = brain
        self.field = field
        self.deliver = deliver
        self.began = monotonic()

    def landed(self, bytes whole, tuple framed):
        cdef Py_ssize_t head = framed[0]
        cdef long status = framed[1]
        keep = framed[2]
        cdef Road road = self.road
        if status == road.moved and MOVED_NAME in whole[head:]:
            self(road.raw(whole, head, status, keep))
            return
        peer = self.peer
        cdef PyObject* kept_at = PyDict_GetItem(road.idle, self.address)
        cdef list kept
        if kept_at is NULL:
            kept = []
            road.idle[self.address] = kept
        else:
            kept = <list>kept_at
        if keep and PyList_GET_SIZE(kept) < road.idle_per_peer:
            peer.idle_since = monotonic()
            kept.append(peer)
        else:
            peer.close()
        passed = road.passed.__new__(road.passed)  # its slots set here: no interpreted __init__
        passed.data = whole
        passed.head = head
        passed.added = self.field
        self.deliver(passed)

    def __call__(self, got):
        self.road.off_road(self, got)
