"""The fleet edge's spliced road (brainy/_speedups/splice*), run against both twins.

Every test takes ``splice_twin``: once with the compiled road, once with the pure one. The road is handed a fleet
view, the app's remembered routes, kept connections and the classes it makes, all plain objects here; the real
edge builds it from its own (brainy/net/edge.py), and the fleet's real-process tests (test_fleet_transports.py and
the rest) send proxied gets down it over loopback.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import pytest

from brainy._speedups import h1frame
from brainy.contract import refusals as R
from brainy.fleet.layout import Node, Owner
from brainy.fleet.proxy import FORWARDED, HOP_BY_HOP, WRITE
from brainy.net.h1 import H1Connection, RequestReceived
from brainy.net.http import Passed, Request

ADDRESS = ("127.0.0.1", 7001)
FIELD = b"brainy-node: b\r\n"
ANSWER = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}"
MOVED = R.BrainMovedError.status


class Refused(Exception):
    pass


@dataclass
class Match:
    door: str | None
    server: str | None = None
    params: dict[str, str] = field(default_factory=dict)


@dataclass
class View:
    owned: dict[str, int] = field(default_factory=dict)
    arriving: dict[str, int] = field(default_factory=dict)
    owners: dict[str, Owner] = field(default_factory=lambda: {"far": Owner("b", 1)})
    nodes: dict[str, Node] = field(default_factory=lambda: {"b": Node("b", "http://127.0.0.1:7001")})


class Peer:
    """A kept connection: what the road sends on it, and whether it was closed."""

    def __init__(self, idle_since: float | None = None) -> None:
        self.closed = False
        self.idle_since = time.monotonic() if idle_since is None else idle_since
        self.sent: list[tuple[bytes, float, Any]] = []

    def send_spliced(self, data: bytes, timeout: float, spliced: Any) -> None:
        self.sent.append((data, timeout, spliced))

    def close(self) -> None:
        self.closed = True


class Raw:
    def __init__(self, data: bytes, head: int, status: int, keep: bool) -> None:
        self.data, self.head, self.status, self.keep = data, head, status, keep


class Road:
    """One road of a twin with everything it is handed kept to look at."""

    def __init__(self, twin: Any, routes: dict[Any, Any] | None = None, passes: bool = True) -> None:
        self.view = View()
        self.routes = {} if routes is None else routes
        self.routed: list[tuple[str, str, str | None]] = []
        self.checked: list[tuple[Any, Any, str]] = []
        self.passes = passes
        self.idle: dict[tuple[str, int], list[Peer]] = {}
        self.owners: dict[str, Any] = {}
        self.fields: dict[str, bytes] = {}
        self.off: list[tuple[Any, Any]] = []
        self.taken: list[tuple[str, int]] = []
        self.road = twin.Road(
            self.view,
            self.routes,
            self.route,
            frozenset({"host.provision"}),
            Refused,
            self.check,
            lambda: "w-1",
            FORWARDED,
            WRITE,
            self.owners,
            self.owner_of,
            self.fields,
            self.field_of,
            h1frame.frame_request,
            HOP_BY_HOP,
            ((FORWARDED, "a"),),
            self.idle,
            30.0,
            2,
            self.idle_peer,
            60.0,
            Passed,
            Raw,
            MOVED,
            lambda spliced, got: self.off.append((spliced, got)),
            h1frame.parse_head,
            Request,
            RequestReceived,
        )

    def route(self, method: str, path: str, accept: str | None) -> Match:
        self.routed.append((method, path, accept))
        parts = path.split("/")
        if len(parts) < 5 or parts[4] not in ("get", "add", "provision"):
            raise Refused(path)
        door = {"get": "get", "add": "add", "provision": "host.provision"}[parts[4]]
        return Match(door, params={"brain": parts[3]})

    def check(self, request: Request, match: Any, brain: str) -> bool:
        self.checked.append((request, match, brain))
        return self.passes

    def owner_of(self, url: str) -> tuple[tuple[str, int], str]:
        self.owners[url] = (ADDRESS, "127.0.0.1:7001")
        return self.owners[url]

    def field_of(self, node: str) -> bytes:
        self.fields[node] = f"brainy-node: {node}\r\n".encode()
        return self.fields[node]

    def idle_peer(self, address: tuple[str, int]) -> Peer | None:
        self.taken.append(address)
        kept = self.idle.get(address)
        while kept:
            peer = kept.pop()
            if not peer.closed and time.monotonic() - peer.idle_since <= 30.0:
                return peer
        return None

    def kept(self, *peers: Peer) -> None:
        self.idle[ADDRESS] = list(peers)


def get(path: str = "/v1/brains/far/get/ada", method: str = "GET", **headers: str) -> Request:
    fields = {"host": "edge", "accept": "*/*", "authorization": "Bearer k", **headers}
    return Request(method, path, "", fields, b"")


def test_a_get_for_a_brain_a_live_node_serves_goes_on_a_kept_connection_and_its_answer_comes_back(splice_twin):
    road = Road(splice_twin)
    peer = Peer()
    road.kept(peer)
    delivered: list[Any] = []
    request = get()
    assert road.road.splice(request, delivered.append) is True
    [(data, timeout, spliced)] = peer.sent
    assert data == h1frame.frame_request(
        "GET", "/v1/brains/far/get/ada", "127.0.0.1:7001", request.headers, HOP_BY_HOP, ((FORWARDED, "a"),), b""
    )
    assert b"brainy-forwarded: a\r\n" in data and b"host: 127.0.0.1:7001\r\n" in data and b"host: edge" not in data
    assert timeout == 60.0 and road.idle[ADDRESS] == []  # taken from the kept ones while the request is out
    assert road.checked == [(request, Match("get", params={"brain": "far"}), "far")]  # the edge's check, once
    assert (spliced.request, spliced.brain, spliced.field, spliced.address) == (request, "far", FIELD, ADDRESS)
    before = peer.idle_since
    spliced.landed(ANSWER, h1frame.answer_head(ANSWER, 1 << 16))
    [passed] = delivered
    assert type(passed) is Passed and (passed.data, passed.head, passed.added) == (ANSWER, len(ANSWER) - 2, FIELD)
    assert road.idle[ADDRESS] == [peer] and peer.idle_since >= before and not peer.closed
    assert road.off == []


def test_a_remembered_route_is_read_first_and_the_router_asked_only_for_another(splice_twin):
    remembered = Match("get", params={"brain": "far"})
    road = Road(splice_twin, routes={("GET", "/v1/brains/far/get/ada", "*/*"): remembered})
    road.kept(Peer(), Peer())
    assert road.road.splice(get(), lambda _: None)
    assert road.routed == [] and road.checked[0][1] is remembered
    assert road.road.splice(get("/v1/brains/far/get/bob"), lambda _: None)
    assert road.routed == [("GET", "/v1/brains/far/get/bob", "*/*")]


@pytest.mark.parametrize(
    ("why", "request_", "change"),
    [
        ("a HEAD (answered with no body: the app's road)", get(method="HEAD"), None),
        ("not a brain's path", get("/v1/health"), None),
        ("forwarded here by another node", get(**{FORWARDED: "c"}), None),
        ("no route", get("/v1/brains/far/nothing/ada"), None),
        ("a door that places a brain", get("/v1/brains/far/provision/x", method="POST"), None),
        ("a brain this node serves", get(), lambda r: r.view.owned.update(far=1)),
        ("a brain this node is taking over", get(), lambda r: r.view.arriving.update(far=1)),
        ("a caller the edge refuses", get(), lambda r: setattr(r, "passes", False)),
        ("a brain no node owns in the view", get(), lambda r: r.view.owners.clear()),
        ("an owner not among the live nodes", get(), lambda r: r.view.nodes.clear()),
        ("no kept connection", get(), lambda r: r.idle.clear()),
        ("only a closed kept connection", get(), lambda r: setattr(r.idle[ADDRESS][0], "closed", True)),
        ("only a stale kept connection", get(), lambda r: setattr(r.idle[ADDRESS][0], "idle_since", 0.0)),
    ],
)
def test_what_is_not_the_roads_is_left_to_the_app_with_nothing_sent(splice_twin, why, request_, change):
    road = Road(splice_twin)
    peer = Peer()
    road.kept(peer)
    if change is not None:
        change(road)
    assert road.road.splice(request_, lambda _: pytest.fail("delivered")) is False, why
    assert peer.sent == [], why
    assert road.off == [], why


def test_a_stale_newest_kept_connection_is_passed_over_for_an_older_live_one(splice_twin):
    road = Road(splice_twin)
    live, stale = Peer(), Peer(idle_since=0.0)
    road.kept(live, stale)
    assert road.road.splice(get(), lambda _: None)
    assert road.taken == [ADDRESS] and len(live.sent) == 1 and stale.sent == [] and road.idle[ADDRESS] == []


def test_a_write_goes_with_an_id_and_keeps_one_it_came_with(splice_twin):
    road = Road(splice_twin)
    first, second, third = Peer(), Peer(), Peer()
    road.kept(first)
    minted = get("/v1/brains/far/add/x", method="POST")
    assert road.road.splice(minted, lambda _: None)
    assert minted.headers[WRITE] == "w-1" and b"brainy-write: w-1\r\n" in first.sent[0][0]
    road.kept(second)
    own = get("/v1/brains/far/add/x", method="POST", **{WRITE: "mine"})
    assert road.road.splice(own, lambda _: None)
    assert own.headers[WRITE] == "mine" and b"brainy-write: mine\r\n" in second.sent[0][0]
    road.kept(third)
    read = get()
    assert road.road.splice(read, lambda _: None)
    assert WRITE not in read.headers and b"brainy-write" not in third.sent[0][0]


def test_an_answer_that_says_the_brain_moved_goes_to_the_slower_road_as_it_came(splice_twin):
    road = Road(splice_twin)
    peer = Peer()
    road.kept(peer)
    delivered: list[Any] = []
    assert road.road.splice(get(), delivered.append)
    [(_, _, spliced)] = peer.sent
    body = b'{"error":{"name":"BrainMovedError","brain":"far","node":"c","epoch":2}}'
    moved = b"HTTP/1.1 %d Moved\r\ncontent-length: %d\r\n\r\n%s" % (MOVED, len(body), body)
    spliced.landed(moved, h1frame.answer_head(moved, 1 << 16))
    [(off, got)] = road.off
    assert off is spliced and type(got) is Raw and (got.data, got.status, got.keep) == (moved, MOVED, True)
    assert delivered == [] and road.idle[ADDRESS] == []  # the slower road keeps the connection, not this one


def test_an_answer_of_that_status_that_is_not_a_move_is_passed_on(splice_twin):
    road = Road(splice_twin)
    peer = Peer()
    road.kept(peer)
    delivered: list[Any] = []
    assert road.road.splice(get(), delivered.append)
    conflict = b"HTTP/1.1 %d Conflict\r\ncontent-length: 2\r\n\r\n{}" % MOVED
    peer.sent[0][2].landed(conflict, h1frame.answer_head(conflict, 1 << 16))
    assert [passed.data for passed in delivered] == [conflict] and road.off == []


def test_a_connection_that_may_not_be_kept_is_closed_and_the_answer_still_passed_on(splice_twin):
    road = Road(splice_twin)
    closing, full = Peer(), Peer()
    road.kept(closing)
    delivered: list[Any] = []
    assert road.road.splice(get(), delivered.append)
    answer = ANSWER.replace(b"\r\n\r\n", b"\r\nconnection: close\r\n\r\n")
    closing.sent[0][2].landed(answer, h1frame.answer_head(answer, 1 << 16))
    assert closing.closed and road.idle[ADDRESS] == [] and [p.data for p in delivered] == [answer]
    road.kept(full)
    assert road.road.splice(get(), delivered.append)
    road.kept(Peer(), Peer())  # as many kept as a peer may have (2 here): one more is closed, not kept
    full.sent[0][2].landed(ANSWER, h1frame.answer_head(ANSWER, 1 << 16))
    assert full.closed and len(road.idle[ADDRESS]) == 2 and len(delivered) == 2


def test_any_other_outcome_goes_to_the_slower_road(splice_twin):
    road = Road(splice_twin)
    peer = Peer()
    road.kept(peer)
    assert road.road.splice(get(), lambda _: pytest.fail("delivered"))
    spliced = peer.sent[0][2]
    error = TimeoutError()
    spliced(error)
    assert road.off == [(spliced, error)]
    assert spliced.began <= time.monotonic()


RAW_GET = b"GET /v1/brains/far/get/ada HTTP/1.1\r\nhost: edge\r\naccept: */*\r\nauthorization: Bearer k\r\n\r\n"


def test_take_reads_one_plain_get_as_the_connection_would_and_sends_it_on(splice_twin):
    """``Road.take``: the glue's first look at a read. The event is the one ``receive_data`` makes of the same bytes,
    and the connection's books (answers owed, the deadlines' clocks) are left as its own read leaves them."""
    road = Road(splice_twin)
    peer = Peer()
    road.kept(peer)
    taken, read = H1Connection(1.0), H1Connection(1.0)
    delivered: list[Any] = []
    event = road.road.take(taken, RAW_GET, 5.0, delivered.append)
    [expected] = read.receive_data(RAW_GET, 5.0)
    assert type(event) is RequestReceived and event == expected
    assert type(event.request) is Request and event.request == expected.request
    assert taken._owed == read._owed == 1 and not taken.mid_request and not taken._events
    assert vars(taken._deadlines) == vars(read._deadlines)
    assert taken.next_deadline() == read.next_deadline() is None  # an answer is owed: no deadline runs
    [(data, _, spliced)] = peer.sent
    assert spliced.request is event.request and b"brainy-forwarded: a\r\n" in data
    spliced.landed(ANSWER, h1frame.answer_head(ANSWER, 1 << 16))
    assert [p.data for p in delivered] == [ANSWER]


@pytest.mark.parametrize(
    ("why", "data", "change"),
    [
        ("a write", RAW_GET.replace(b"GET ", b"POST ", 1), None),
        ("not a brain's path", RAW_GET.replace(b"/v1/brains/far/get/ada", b"/v1/health"), None),
        ("a brain this node serves", RAW_GET, lambda r, c: r.view.owned.update(far=1)),
        ("a percent-encoded name", RAW_GET.replace(b"/far/", b"/f%61r/"), None),
        ("a path ending at the name", RAW_GET.replace(b"/far/get/ada", b"/far"), None),
        ("a head not all here", RAW_GET[:-2], None),
        ("two requests", RAW_GET * 2, None),
        ("a body", RAW_GET.replace(b"\r\n\r\n", b"\r\ncontent-length: 2\r\n\r\n{}"), None),
        ("a connection that closes after it", RAW_GET.replace(b"\r\n\r\n", b"\r\nconnection: close\r\n\r\n"), None),
        ("HTTP/1.0", RAW_GET.replace(b"HTTP/1.1", b"HTTP/1.0"), None),
        ("a connection mid-request", RAW_GET, lambda r, c: setattr(c, "mid_request", True)),
        ("a failed connection", RAW_GET, lambda r, c: setattr(c, "_failed", True)),
        ("no kept connection (the road declines)", RAW_GET, lambda r, c: r.idle.clear()),
    ],
)
def test_take_leaves_anything_else_unread_and_the_connection_as_it_was(splice_twin, why, data, change):
    road = Road(splice_twin)
    peer = Peer()
    road.kept(peer)
    conn = H1Connection(1.0)
    if change is not None:
        change(road, conn)
    before = (conn._owed, dict(vars(conn._deadlines)), conn.mid_request, conn._failed)
    assert road.road.take(conn, data, 5.0, lambda _: pytest.fail("delivered")) is None, why
    assert (conn._owed, dict(vars(conn._deadlines)), conn.mid_request, conn._failed) == before, why
    assert peer.sent == [], why
