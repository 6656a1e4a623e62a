"""The fleet edge's spliced road over HTTP/1.1, pure Python: the twin of ``splice.pyx``.

A request for a brain another live node serves, asked on a client connection idle behind it, goes to that node on
a connection kept from an earlier request, and the owner's plain answer goes back as it came (docs/fleet.md "Any
node answers any brain"; brainy/net/edge.py ``Edge.splice``, whose road this is). Two halves, each one call:

- ``Road.splice(request, deliver)``: the request's route (remembered by the app), the brain's place in the fleet's
  view, the edge's check of the caller (``passes``), the forwarded head framed (``frame``: ``h1frame.frame_request``)
  and sent on a kept connection with a :class:`Spliced` to hear its answer. False, nothing sent, when the request
  is not that case: the glue then takes the app's road. ``Road.take(conn, data, now, deliver)`` is the same for the
  bytes of one whole plain GET on an idle connection, read as the connection would read them, in the same call.
- ``Spliced.landed(whole, framed)``: the owner's plain answer (``h1frame.answer_head``'s ``framed``), not one that
  says the brain moved: the connection kept again and ``deliver`` handed a ``Passed`` of the bytes. Called as
  ``spliced(got)`` with anything else (an answer read whole, one that says the brain moved, the error that stopped
  it), it hands that to the edge's slower road (``off_road(spliced, got)``), which decides as it would for a
  request sent any other way.

Nothing here is imported from above: the road is handed the edge's pieces (the fleet's view, the app's remembered
routes, the kept connections, the classes it makes) when it is built. The compiled twin spares the proxied request
the interpretation of some twenty calls on the edge, whose cost a second process on the same core multiplies by
flushing the caches between each request and its answer (perf/bench_edge_splice.py).
"""

from __future__ import annotations

import time
from typing import Any

__all__ = ["Road", "Spliced"]

BRAINS = "/v1/brains/"
_GET_BRAINS = b"GET /v1/brains/"
_MOVED_NAME = b"BrainMovedError"


class Road:
    """One edge's spliced road. Handed, once:

    ``fleet`` (read each request: ``owned``, ``arriving``, ``owners``, ``nodes``), ``routes`` (the app's remembered
    matches by ``(method, path, accept)``) and ``route`` (the router, for one not remembered), ``placed`` (the doors
    placement creates a brain for: never spliced), ``refusal`` (what ``route`` raises), ``passes(request, match,
    brain)`` (the edge's check of the caller), ``write_id()`` (a new write's id), ``forwarded`` (the request's field
    name of a forwarded request) and ``write`` (of a write's id), ``owners`` (an owner URL's ``(address,
    authority)``, by URL) and ``owner_of(url)`` (that, parsed and kept), ``fields`` (an owner's ``brainy-node``
    line, by node) and ``field_of(node)`` (that, made and kept), ``frame`` (``h1frame.frame_request``) with its
    ``drop`` and ``extra`` fields, ``idle`` (the kept connections by address, newest last), ``keep_seconds`` and
    ``idle_per_peer`` (how long one is kept idle, and how many), ``idle_peer(address)`` (a kept one taken when the
    newest is stale), ``timeout`` (a forwarded request's seconds), ``passed`` (the class of an answer passed on),
    ``raw`` (of one read as its bytes), ``moved`` (the status of a refusal that says the brain moved) and
    ``off_road(spliced, got)``; for :meth:`take`, ``parse_head`` (``h1frame.parse_head``) and the classes of a
    request and of its event (``brainy.net.http.Request``, ``brainy.net.h1.RequestReceived``)."""

    def __init__(
        self,
        fleet: Any,
        routes: dict[Any, Any],
        route: Any,
        placed: frozenset[str],
        refusal: type[BaseException],
        passes: Any,
        write_id: Any,
        forwarded: str,
        write: str,
        owners: dict[str, tuple[tuple[str, int], str]],
        owner_of: Any,
        fields: dict[str, bytes],
        field_of: Any,
        frame: Any,
        drop: frozenset[str],
        extra: tuple[tuple[str, str], ...],
        idle: dict[tuple[str, int], list[Any]],
        keep_seconds: float,
        idle_per_peer: int,
        idle_peer: Any,
        timeout: float,
        passed: type,
        raw: type,
        moved: int,
        off_road: Any,
        parse_head: Any,
        request: type,
        received: type,
    ) -> None:
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

    def take(self, conn: Any, data: bytes, now: float, deliver: Any) -> Any:
        """The bytes of one whole plain GET for a brain this node does not serve, arrived at ``now`` on an idle
        HTTP/1.1 connection (brainy/net/glue/h1.py): read as ``conn`` (a ``brainy.net.h1.H1Connection``) reads such
        a request, its books (the deadlines' clocks, the answers owed) kept as its own read keeps them, and sent on
        down the road (:meth:`splice`). Its ``RequestReceived``; None, nothing read and nothing changed, when the
        bytes are anything else or the request is not the road's (the glue reads them as ever)."""
        if not data.startswith(_GET_BRAINS):
            return None
        stop = data.find(b"/", 15)
        name = data[15:stop]
        if stop < 0 or b" " in name or b"%" in name or name.decode("latin-1") in self.fleet.owned:
            return None  # one this node serves goes the app's road unparsed; an odd name, the router's
        if conn._failed or conn.mid_request:
            return None
        head = self.parse_head(data, 0, conn._max_header)
        if head is None:
            return None
        method, path, query, headers, keep_alive, length, body_at = head
        if length or body_at != len(data) or not keep_alive:
            return None
        request = self.request(method, path, query, headers, b"")
        if not self.splice(request, deliver):
            return None
        deadlines = conn._deadlines  # what receive_data does for a request it reads between messages
        deadlines.last_data = now
        deadlines.request_began = now
        conn._owed += 1
        return self.received(request, True)

    def splice(self, request: Any, deliver: Any) -> bool:
        """Send ``request`` on down the road (True: ``deliver`` is called once, from the loop, with the answer to
        write), or False, nothing sent and nothing changed but a write's id, when it is not the road's."""
        method = request.method
        path = request.path
        if method == "HEAD" or not path.startswith(BRAINS):
            return False
        headers = request.headers
        if self.forwarded in headers:  # forwarded here by another node: this node's to answer, never forwarded
            return False
        accept = headers.get("accept")
        match = self.routes.get((method, path, accept))
        if match is None:
            try:
                match = self.route(method, path, accept)
            except self.refusal:
                return False  # no route: the app refuses it as it would anyway
        brain = match.params.get("brain")
        if brain is None or match.server is not None or match.door in self.placed:
            return False
        fleet = self.fleet
        arriving = fleet.arriving
        if brain in arriving or (brain in fleet.owned) or not self.passes(request, match, brain):
            return False  # taking it over, or held here: the app's road (the edge's consider) says what comes
        owner = fleet.owners.get(brain)
        if owner is None:
            return False
        found = fleet.nodes.get(owner.node)
        if found is None:
            return False
        known = self.owners.get(found.url)
        if known is None:
            known = self.owner_of(found.url)
        address, authority = known
        if method != "GET":  # a write goes with an id: sent again after its owner went away, it is answered once
            if self.write not in headers:
                headers[self.write] = self.write_id()
        field = self.fields.get(owner.node)
        if field is None:
            field = self.field_of(owner.node)
        query = request.query
        data = self.frame(
            method, f"{path}?{query}" if query else path, authority, headers, self.drop, self.extra, request.body
        )
        kept = self.idle.get(address)
        if not kept:
            return False
        peer = kept[-1]
        if not peer.closed and time.monotonic() - peer.idle_since <= self.keep_seconds:
            kept.pop()
        else:
            peer = self.idle_peer(address)
            if peer is None:
                return False
        peer.send_spliced(data, self.timeout, Spliced(self, peer, address, request, brain, field, deliver))
        return True


class Spliced:
    """One request on the road: what its answer is handed on with."""

    __slots__ = ("road", "peer", "address", "request", "brain", "field", "deliver", "began")

    def __init__(
        self, road: Road, peer: Any, address: tuple[str, int], request: Any, brain: str, field: bytes, deliver: Any
    ) -> None:
        self.road = road
        self.peer = peer
        self.address = address
        self.request = request
        self.brain = brain
        self.field = field  # b"brainy-node: <owner>\r\n"
        self.deliver = deliver
        self.began = time.monotonic()

    def landed(self, whole: bytes, framed: tuple[int, int, bool]) -> None:
        """The owner's answer, whole and plain (``h1frame.answer_head``'s ``(head, status, keep)``)."""
        head, status, keep = framed
        road = self.road
        if status == road.moved and _MOVED_NAME in whole[head:]:
            self(road.raw(whole, head, status, keep))  # the brain moved: asked again of its new owner
            return
        peer = self.peer
        kept = road.idle.get(self.address)
        if kept is None:
            kept = road.idle[self.address] = []
        if keep and len(kept) < road.idle_per_peer:
            peer.idle_since = time.monotonic()
            kept.append(peer)
        else:
            peer.close()
        self.deliver(road.passed(whole, head, self.field))

    def __call__(self, got: Any) -> None:
        """Any other outcome: the edge's slower road decides."""
        self.road.off_road(self, got)
