"""The fleet's edge: the one place an HTTP request (h1, h2, h3) for a brain is kept here or forwarded to its owner.

docs/fleet.md "Any node answers any brain". :meth:`Edge.consider` answers None when this node answers the
request itself (the app's road, as without a fleet), or an awaitable of the owner's answer. In order:

1. A request that is not a brain's (``/v1/brains/{brain}/…``), that was forwarded here by another node, or whose
   brain this node serves, is this node's (the app's road checks the caller, as without a fleet): a forwarded
   request is never forwarded again (the dispatcher refuses ``BrainMovedError`` for a brain it no longer owns,
   and the edge that sent it reads the owner afresh and forwards once more).
2. Any other is checked here first: the credential and the gate, as a local call is. A request that fails
   them is left to the app, whose road refuses it by the same name it would without a fleet.
3. A door that creates a brain (``host_doors.FLEET_PLACED``: provisioning) is placed
   (``brainy.fleet.placement``) and forwarded to the chosen node, unless this node is the one chosen, or
   was named by the edge that placed it.
4. A brain another node owns is forwarded there, and the answer carries ``brainy-node: <owner>``. One this
   node does not place is looked up in etcd first. The held change stream is relayed as it arrives, the
   owner's event ids kept, so a client resumes it with ``Last-Event-ID`` at any node. Over HTTP/1.1 the
   common case is spliced (:meth:`Edge.splice`): the owner's answer passed on as it came, no future between.
5. During a hand-over (the brain arriving here, or placed with no live owner, or its owner gone silent) the
   request waits, up to the fleet's TTL plus :data:`HANDOVER_EXTRA` seconds, for the node that serves it
   (``Fleet.serving``), and only past that is refused ``BrainMovedError``.

The other transports call doors rather than routes: :class:`EdgeDispatcher` is the dispatcher they are handed
in a fleet. Its principals carry the credential fields they were proven from (:class:`Carried`), and a door
call for a brain owned elsewhere goes to the owner as the door's HTTP request (the contract's one binding,
``brainy.client.wire.request``), with the caller's own credential: the owner checks it again. Its answer comes
back marked with the node that gave it (:class:`Proxied`, a refusal's ``answered_by``), for the transport to
say (gRPC metadata, MCP's response head).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

import orjson

from brainy._speedups import h1frame, splice
from brainy.auth.keys import CALLER_HEADER, OWNER_HEADER, ROLES_HEADER
from brainy.auth.principal import Principal
from brainy.client import wire
from brainy.contract import doors as D
from brainy.contract import refusals as R
from brainy.fleet import http1
from brainy.fleet.http1 import PeerUnreachableError
from brainy.fleet.layout import Owner
from brainy.fleet.membership import Fleet
from brainy.fleet.proxy import FORWARDED, HOP_BY_HOP, NODE, PLACED, WRITE, Forwarder, passed_on
from brainy.host.dispatch import PLANS, Answer, Dispatcher, gate
from brainy.host.host_doors import FLEET_PLACED
from brainy.host.pool import reaches
from brainy.net.h1 import H1Connection, RequestReceived
from brainy.net.http import Passed, Request, Response, StreamingResponse
from brainy.net.routes import Match

log = logging.getLogger("brainy.edge")

BRAINS = "/v1/brains/"
#: Seconds past the fleet's TTL a request waits for a brain's new owner: an owner's lease ends within the TTL,
#: and the claim and restore after it take a moment more (docs/fleet.md "Failover": TTL + 5 s).
HANDOVER_EXTRA = 5.0
RETRY_PAUSE = 0.1  # seconds between tries at an owner that did not answer or is still taking the brain over
#: The fields a credential is proven from (the dispatcher's ``credential``): the only ones a door call forwarded
#: off a non-HTTP transport carries to the owner, which proves them again.
CREDENTIAL = ("authorization", CALLER_HEADER, OWNER_HEADER, ROLES_HEADER)
_T = TypeVar("_T")
_NODE = NODE.encode()
_MOVED = R.BrainMovedError.status
FIELDS_HELD = 256  # owners' ``brainy-node`` lines an edge keeps made
HOLDS = {door.name: door.holds for door in D.SERVER_DOORS if door.holds}  # a held stream's server door -> its door


class Edge:
    """Where this node's HTTP requests for brains go, in a fleet.

    ``route`` is the app's router (remembered matches), ``local`` the app's own handling of a request,
    ``refuse`` the app's framing of a refusal: the edge answers in the app's shapes, never its own."""

    def __init__(
        self,
        fleet: Fleet,
        dispatcher: Dispatcher,
        route: Callable[[str, str, str | None], Match],
        local: Callable[[Request], Response | Awaitable[Response]],
        refuse: Callable[[Request, R.Refusal], Response],
        routes: dict[tuple[str, str, str | None], Match] | None = None,
    ) -> None:
        self.fleet = fleet
        self.dispatcher = dispatcher
        self.route = route
        self.local = local
        self.refuse = refuse
        self.forwarder = forwarder = Forwarder(fleet.node)
        self._fields: dict[str, bytes] = {}  # each owner's ``brainy-node`` line, made once
        connections = forwarder.connections
        #: The HTTP/1.1 glue's road for a request for a brain a live node serves, asked on a connection kept from
        #: an earlier request, the client's connection idle behind it: :meth:`consider` and :meth:`_quick` with no
        #: future, the owner's answer passed on as its bytes (``brainy._speedups.splice``, compiled: a proxied get's
        #: hop). ``splice(request, deliver)`` is False when it is not that case (the glue takes the app's road); else
        #: ``deliver`` is called once, from the loop, with the owner's answer as it came (:class:`Passed`,
        #: ``brainy-node`` to add), or, off that road (a hand-over, an owner gone, no answer), with the
        #: :class:`Response` to frame. ``routes`` is the app's remembered matches, which the road reads first.
        road = splice.Road(
            fleet,
            {} if routes is None else routes,
            route,
            FLEET_PLACED,
            R.Refusal,
            self._passes,
            _write_id,
            FORWARDED,
            WRITE,
            forwarder.owners,
            forwarder.owner,
            self._fields,
            self._field,
            h1frame.frame_request,
            HOP_BY_HOP,
            forwarder.forwarded,
            connections.idle,
            http1.KEEP_SECONDS,
            http1.IDLE_PER_PEER,
            connections.idle_peer,
            connections.timeout,
            Passed,
            http1.Raw,
            _MOVED,
            self._off_road,
            h1frame.parse_head,
            Request,
            RequestReceived,
        )
        self.splice: Callable[[Request, Callable[[Response | Passed], None]], bool] = road.splice
        #: The same road for the bytes of one whole plain GET on an idle HTTP/1.1 connection, read as its
        #: H1Connection would read them (``take(conn, data, now, deliver)``: the request's event, or None when they
        #: are anything else): the glue's first look at a read, so the proxied get is read in the same call.
        self.take: Callable[[H1Connection, bytes, float, Callable[[Response | Passed], None]], RequestReceived | None]
        self.take = road.take

    def consider(self, request: Request) -> Awaitable[Response] | None:
        """None to answer ``request`` here; else an awaitable of the answer from the brain's owner."""
        routed = self._routed(request)
        if routed is None:
            return None
        match, brain = routed
        placed = match.door in FLEET_PLACED
        settled = not placed and self.settled(brain)
        if settled and (match.server is not None or self.fleet.elsewhere(brain) is None):
            return None  # this node's: the app's road checks the caller, as without a fleet
        if not self._passes(request, match, brain):
            return None
        if match.server is not None:  # the held change stream: relayed from the owner as it arrives
            return self._owned(request, brain, self._relay)
        if placed:
            return None if PLACED in request.headers else self._place(request)
        if settled:  # held here, and the view names another owner: handed over a moment ago
            return self._owned(request, brain)
        quick = self._quick(request, brain)
        return quick if quick is not None else self._owned(request, brain)

    async def every_brain(self, principal: Principal, request: Request, here: list[dict[str, Any]]) -> dict[str, Any]:
        """``GET /v1/brains`` in a fleet (docs/fleet.md "GET /v1/brains in a fleet"): of ``here`` (this node's
        pool), the brains this node serves, each naming its node; asked by a client, not by another node, also
        every other live node's (asked in parallel with the caller's own credential), then the placed brains no
        node answered for (in a hand-over, or their node did not answer), from the view."""
        fleet = self.fleet
        served = [
            {**entry, "node": fleet.node}
            for entry in here
            if self.settled(entry["name"]) or entry["name"] not in fleet.epochs  # a copy the fleet never placed
        ]
        if FORWARDED in request.headers:
            return {"brains": served}
        headers = {**request.headers, "accept": "application/json"}  # parsed here, framed as the caller asked
        others = [(node, found.url) for node, found in sorted(fleet.nodes.items()) if node != fleet.node]
        answers = await asyncio.gather(
            *(self.forwarder.forward(url, "GET", request.path, headers, b"") for _, url in others),
            return_exceptions=True,
        )
        listed = {entry["name"]: entry for entry in served}
        for (node, _), answer in zip(others, answers):
            if isinstance(answer, http1.Response) and answer.status == 200:
                for entry in orjson.loads(answer.body).get("brains", []):
                    listed.setdefault(entry["name"], entry)
            else:
                log.warning(
                    "GET /v1/brains: node %s did not answer (%s); its brains are listed from the view",
                    node,
                    answer if isinstance(answer, BaseException) else answer.status,
                )
        for name in sorted(set(fleet.epochs) | set(fleet.archived)):
            if name not in listed and reaches(principal, name):
                owner = fleet.owners.get(name)
                listed[name] = {
                    "name": name,
                    "archived": name in fleet.archived,
                    "resident": False,
                    "writer": False,
                    "node": owner.node if owner is not None and fleet.live(owner.node) else None,
                }
        return {"brains": [listed[name] for name in sorted(listed)]}

    def session_node(self, principal: Principal) -> list[tuple[bytes, bytes]]:
        """``brainy-node`` for a WebSocket upgrade whose caller reaches one brain, owned by another node: a
        message's envelope has no field for it (DESIGN.md "The wire"), so the session's head says it."""
        brain = one_brain(self.dispatcher, principal)
        owner = self.fleet.elsewhere(brain) if brain is not None else None
        return [(NODE.encode(), owner.node.encode())] if owner is not None else []

    def _routed(self, request: Request) -> tuple[Match, str] | None:
        """The route of a request for a brain, and the brain; None when it is not one, was forwarded here by
        another node (never forwarded again), or has no route (the app refuses it as it would anyway)."""
        if not request.path.startswith(BRAINS) or FORWARDED in request.headers:
            return None
        try:
            match = self.route(request.method, request.path, request.headers.get("accept"))
        except R.Refusal:
            return None
        brain = match.params.get("brain")
        return None if brain is None else (match, brain)

    def settled(self, brain: str) -> bool:
        """Whether ``brain`` is this node's to serve now, as far as it knows without asking etcd."""
        return brain in self.fleet.owned and brain not in self.fleet.arriving

    def _passes(self, request: Request, match: Match, brain: str) -> bool:
        """The caller's key and the gate, checked here before anything is forwarded (the owner checks them
        again). A shared route (vfs) is gated as its first door: the owner gates the door the body names; the
        held change stream as the door it holds open (``changes``)."""
        name = match.door or next(iter((match.choices or {}).values()), None) or HOLDS.get(match.server or "")
        door = D.BY_NAME.get(name) if name is not None else None
        try:
            principal = self.dispatcher.credential(request.headers)
            if door is not None:
                gate(principal, door, brain)
        except R.Refusal:
            return False
        return True

    async def _place(self, request: Request) -> Response:
        chosen = await self.fleet.place()
        if chosen.node == self.fleet.node:
            return await self._here(request)
        return await self._send(request, chosen.node, chosen.url, placed=chosen.node)

    async def _here(self, request: Request) -> Response:
        answered = self.local(request)
        return answered if isinstance(answered, Response) else await answered

    def _quick(self, request: Request, brain: str) -> asyncio.Future[Response] | None:
        """:meth:`_owned`'s common case, with no task and no coroutine: a brain the view says a live node serves,
        asked on a connection kept from an earlier request. None when it is not that case (the caller takes
        :meth:`_owned`'s road). An answer that says the brain moved, or a kept connection that failed, goes on
        down that road from there, as :meth:`at_owner` would (a write keeps the id it was first sent with)."""
        answer: asyncio.Future[Response] = asyncio.get_running_loop().create_future()
        sent = self._at_kept_owner(request, brain, answer)
        if sent is None:
            return None
        answer.add_done_callback(sent.cancel)
        return answer

    def _at_kept_owner(self, request: Request, brain: str, answer: asyncio.Future[Response]) -> _Sent | None:
        """Send ``request`` to ``brain``'s owner on a kept connection (None when there is none, or no live owner the
        view names). Its answer, or that of :meth:`_owned`'s road when it went on down that, is ``answer``'s
        result."""
        fleet = self.fleet
        owner = fleet.owners.get(brain)
        if owner is None or brain in fleet.arriving:  # (one it owns and is not taking over is settled: not here)
            return None
        found = fleet.nodes.get(owner.node)  # (Fleet.url_of, inline: the one lookup on every forwarded request)
        if found is None:
            return None
        if request.method not in ("GET", "HEAD"):
            request.headers.setdefault(WRITE, _write_id())
        sent = _Sent(self, request, brain, self._field(owner.node), None, answer)
        method, target = _outbound(request)
        if not self.forwarder.forward_kept(found.url, method, target, request.headers, request.body, sent.landed):
            return None
        return sent

    def _field(self, node: str) -> bytes:
        """The ``brainy-node`` line of an answer ``node`` gave, made once."""
        field = self._fields.get(node)
        if field is None:
            if len(self._fields) >= FIELDS_HELD:
                self._fields.clear()
            field = self._fields[node] = b"%s: %s\r\n" % (_NODE, node.encode())
        return field

    def _off_road(self, spliced: splice.Spliced, got: http1.Response | http1.Raw | Exception) -> None:
        """A spliced request's outcome off the road's plain case (an answer read whole, one that says the brain
        moved, the error that stopped it): its connection kept or closed, and the answer weighed as one that came
        back on the quick road (:class:`_Sent`)."""
        got = self.forwarder.connections.landed(spliced.address, spliced.peer, got)
        sent = _Sent(self, spliced.request, spliced.brain, spliced.field, spliced.deliver, None)
        sent.began = spliced.began
        sent.landed(got)

    async def _owned(
        self, request: Request, brain: str, send: Callable[[Request, str, str], Awaitable[Response]] | None = None
    ) -> Response:
        """The answer of the node that serves ``brain`` (``send``: forwarded whole), waited for through a
        hand-over."""
        send = send or self._send
        safe = request.method in ("GET", "HEAD")
        if not safe:  # a write (or a door that may be one) goes with an id: sent again, it is answered once
            request.headers.setdefault(WRITE, _write_id())
        try:
            return await self.at_owner(
                brain,
                safe,
                lambda: self._here(request),
                lambda owner, url: send(request, owner.node, url),
                _moved,
                resend=not safe,
            )
        except (PeerUnreachableError, ValueError) as exc:
            return self._unanswered(request, exc)
        except R.Refusal as refusal:
            return self.refuse(request, refusal)

    async def at_owner(
        self,
        brain: str,
        safe: bool,
        here: Callable[[], Awaitable[_T]],
        send: Callable[[Owner, str], Awaitable[_T]],
        moved: Callable[[_T], bool],
        resend: bool = False,
    ) -> _T:
        """``here()`` when this node serves ``brain``, else ``send(owner, url)`` to the node that does, waited for
        up to the TTL plus :data:`HANDOVER_EXTRA` seconds while a hand-over is under way: an answer that says the
        brain moved (``moved``: the owner did not act on it) is asked again of the new owner, and so is a request
        the owner could not be reached for when it was never sent, or ``safe`` (a read) says sending it twice is
        harmless, or ``resend`` (a write sent with its id, which an owner answers once) says so. Past the bound,
        the last answer, or BrainMovedError / PeerUnreachableError."""
        deadline = time.monotonic() + self.fleet.ttl + HANDOVER_EXTRA
        fresh = False  # the view's owner first; etcd's once that one did not serve
        while True:
            owner = await self.fleet.serving(brain, deadline, fresh)
            fresh = True
            if owner is None or owner.node == self.fleet.node:
                answer = await here()
            else:
                url = self.fleet.url_of(owner.node)
                assert url is not None  # serving answers a remote owner only once its address is known
                try:
                    answer = await send(owner, url)
                except PeerUnreachableError as exc:
                    if (exc.sent and not (safe or resend)) or time.monotonic() >= deadline:
                        raise
                    log.debug("node %s did not answer for brain %s (%s); asking again", owner.node, brain, exc)
                    await asyncio.sleep(RETRY_PAUSE)
                    continue
            if not moved(answer) or time.monotonic() >= deadline:
                return answer
            await asyncio.sleep(RETRY_PAUSE)

    def _unanswered(self, request: Request, exc: Exception) -> Response:
        ref = str(uuid.uuid4())
        log.error("the owner did not answer a forwarded request (ref %s): %s", ref, exc)
        return self.refuse(
            request, R.InternalError(f"the brain's node did not answer; see the log under {ref}", ref=ref)
        )

    async def _send(self, request: Request, node: str, url: str, placed: str | None = None) -> Response:
        method, target = _outbound(request)
        if placed is not None:
            try:
                got = await self.forwarder.forward(url, method, target, request.headers, request.body, placed)
            except (PeerUnreachableError, ValueError) as exc:
                return self._unanswered(request, exc)
        else:
            got = await self.forwarder.forward(url, method, target, request.headers, request.body)
        headers = got.fields
        headers.append((_NODE, node.encode()))
        return Response(got.status, headers, got.body)

    async def _relay(self, request: Request, node: str, url: str) -> Response:
        """The owner's held change stream, relayed as it arrives (``brainy.net.glue.sse.RelayRunner``); its
        ``id:`` lines are the owner's, so a client that lost it resumes with ``Last-Event-ID`` at any node."""
        target = request.path + (f"?{request.query}" if request.query else "")
        stream = await self.forwarder.open_stream(url, target, request.headers)
        head = stream.response
        headers = head.fields
        headers.append((_NODE, node.encode()))
        if head.status != 200:  # a refusal: read whole, answered as any other
            try:
                body = await stream.whole()
            finally:
                stream.close()
            return Response(head.status, headers, body)
        return StreamingResponse(200, headers, b"", feed=stream)

    def close(self) -> None:
        self.forwarder.close()


def one_brain(dispatcher: Dispatcher, principal: Principal) -> str | None:
    """The brain a call that names none reaches (DOORS 0.2), in a fleet: a token's brain or a one-brain key's,
    wherever the fleet serves it (this node's pool lists only its own), else the dispatcher's rule."""
    named = _named_brain(principal)
    return named if named is not None else dispatcher.only_brain(principal)


def _named_brain(principal: Principal) -> str | None:
    if principal.token_brain is not None:
        return principal.token_brain
    if principal.brains is not None and len(principal.brains) == 1 and not principal.service_key:
        return next(iter(principal.brains))
    return None


def _moved(answer: Response | http1.Response) -> bool:
    """Whether an owner's answer is the ``BrainMovedError`` refusal (its body names the class, JSON or msgpack)."""
    return answer.status == R.BrainMovedError.status and b"BrainMovedError" in answer.body


def _moved_raw(answer: http1.Raw) -> bool:
    """:func:`_moved` of an answer read as its bytes."""
    return answer.status == R.BrainMovedError.status and b"BrainMovedError" in answer.data[answer.head :]


class _Sent:
    """A request sent on down the quick road: its owner's answer lands in :meth:`landed`, which hands it on
    (``deliver``'s, as it came, :class:`Passed`, with ``field``, the ``brainy-node`` line, to add; else ``answer``'s
    result), or sends the request on down the slower road (:meth:`Edge._owned`) when the answer says the brain
    moved or the owner failed, and hands on what that comes to. Cancelled when what it answers is gone."""

    __slots__ = ("cancelled", "slow", "edge", "request", "brain", "field", "deliver", "answer", "began")

    def __init__(
        self,
        edge: Edge,
        request: Request,
        brain: str,
        field: bytes,
        deliver: Callable[[Response | Passed], None] | None,
        answer: asyncio.Future[Response] | None,
    ) -> None:
        self.cancelled = False
        self.slow: asyncio.Task[Response] | None = None
        self.edge = edge
        self.request = request
        self.brain = brain
        self.field = field  # b"brainy-node: <owner>\r\n"
        self.deliver = deliver
        self.answer = answer
        self.began = time.monotonic()

    def landed(self, got: http1.Response | http1.Raw | Exception) -> None:
        if self.cancelled:  # the stream it answers was reset
            return
        if type(got) is http1.Raw and (got.status != _MOVED or not _moved_raw(got)):
            deliver = self.deliver  # (set: only the spliced road reads answers as their bytes)
            (deliver or self._finish)(Passed(got.data, got.head, self.field))
            return
        edge = self.edge
        past = time.monotonic() >= self.began + edge.fleet.ttl + HANDOVER_EXTRA
        if isinstance(got, http1.Raw):
            if past:  # moved, and no time is left to wait for the new owner: the answer as it came
                self._finish(Passed(got.data, got.head, self.field))
                return
        elif isinstance(got, http1.Response):
            if past or not _moved(got):
                got = passed_on(got)
                got.fields.append((_NODE, self.field[len(_NODE) + 2 : -2]))  # the owner, from its line
                self._finish(Response(got.status, got.fields, got.body))
                return
        elif past:
            self._finish(edge._unanswered(self.request, got))
            return
        slow = asyncio.get_running_loop().create_task(edge._owned(self.request, self.brain))  # moved, or failed
        slow.add_done_callback(self._fell_back)
        self.slow = slow

    def _finish(self, response: Response | Passed) -> None:
        if self.deliver is not None:
            self.deliver(response)
        elif self.answer is not None and not self.answer.done():  # done: cancelled, the stream it answers reset
            self.answer.set_result(response)  # type: ignore[arg-type]  # (never Passed: not read as its bytes)

    def _fell_back(self, slow: asyncio.Task[Response]) -> None:
        """What the slower road came to, handed on."""
        if self.deliver is None:
            if self.answer is not None:
                _settle(self.answer, slow)
            return
        error = asyncio.CancelledError() if slow.cancelled() else slow.exception()
        self.deliver(slow.result() if error is None else self.edge._unanswered(self.request, error))  # type: ignore[arg-type]

    def cancel(self, _: object = None) -> None:
        self.cancelled = True
        if self.slow is not None:
            self.slow.cancel()


def _write_id() -> str:
    """A forwarded write's id (docs/fleet.md "A write sent twice")."""
    return uuid.uuid4().hex


def _outbound(request: Request) -> tuple[str, str]:
    """The method and target a request is forwarded with. HEAD goes on as GET: the answer to a HEAD has a length
    and no body, which no reader can tell from a cut one; the glue drops the body of a HEAD's answer, as it does
    for one answered locally."""
    method = "GET" if request.method == "HEAD" else request.method
    return method, request.path + (f"?{request.query}" if request.query else "")


def _settle(answer: asyncio.Future[Response], slow: asyncio.Task[Response]) -> None:
    """``answer`` given what ``slow`` (the road it went on down) came to."""
    if answer.done():
        return
    if slow.cancelled():
        answer.cancel()
    elif slow.exception() is not None:
        answer.set_exception(slow.exception())  # type: ignore[arg-type]
    else:
        answer.set_result(slow.result())


# -- door calls: gRPC, WebSocket, MCP ---------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Carried(Principal):
    """A principal with the credential fields it was proven from: what a door call forwarded to the brain's
    owner carries, so the owner proves the caller's own credential again (never one the edge vouches for)."""

    fields: tuple[tuple[str, str], ...] = dataclasses.field(default=(), repr=False, compare=False)


class Proxied(dict):
    """A door's answer as the brain's owner gave it; ``answered_by`` names that node (``brainy-node``)."""

    answered_by = ""


class EdgeDispatcher(Dispatcher):
    """The dispatcher the door-calling transports (gRPC, WebSocket, MCP) are handed in a fleet: a door of a
    brain another node serves is called there (its HTTP binding, the caller's credential fields), and waits out
    a hand-over as an HTTP request does (:meth:`Edge.at_owner`). The HTTP road keeps the plain dispatcher: its
    requests are forwarded whole, before any door is called."""

    edge: Edge

    def credential(self, headers: Mapping[str, str]) -> Principal:
        principal = super().credential(headers)
        fields = tuple((name, headers[name]) for name in CREDENTIAL if name in headers)
        values = {f.name: getattr(principal, f.name) for f in dataclasses.fields(Principal)}
        return Carried(**values, fields=fields)

    def only_brain(self, principal: Principal) -> str | None:
        """The dispatcher's rule for a call that names no brain, with a token's or a one-brain key's brain
        taken wherever the fleet serves it (MCP asks this before its call)."""
        return one_brain(super(), principal)  # type: ignore[arg-type]

    def run(
        self, principal: Principal, name: str, brain: str | None, id_: Any, document: Any, write: str | None = None
    ) -> Answer:
        plan = PLANS.get(name) if isinstance(name, str) else None
        if plan is not None and name in FLEET_PLACED and type(brain) is str and isinstance(principal, Carried):
            gate(principal, plan.door, brain)  # the chosen node gates it again
            return self._placed(principal, plan.door, brain, id_, document)
        if plan is None or not plan.owned or not isinstance(principal, Carried):
            return super().run(principal, name, brain, id_, document, write)
        if brain is None:
            brain = self.only_brain(principal)
        if type(brain) is not str or self.edge.settled(brain):
            return super().run(principal, name, brain, id_, document, write)
        gate(principal, plan.door, brain)  # the edge's check; the owner makes its own
        return self._owned(principal, plan.door, brain, id_, document, write)

    async def _owned(
        self, principal: Carried, door: D.Door, brain: str, id_: Any, document: Any, write: str | None
    ) -> dict[str, Any]:
        safe = door.kind == "read"
        if not safe and write is None:  # sent again after its owner went away, answered once (docs/fleet.md)
            write = _write_id()
        answer = await self.edge.at_owner(
            brain,
            safe,
            lambda: self._here(principal, door.name, brain, id_, document, write),
            lambda owner, url: self._send(principal, door, brain, id_, document, owner, url, write=write),
            lambda got: isinstance(got, R.BrainMovedError),
            resend=not safe,
        )
        if isinstance(answer, R.Refusal):
            raise answer
        return answer

    async def _placed(self, principal: Carried, door: D.Door, brain: str, id_: Any, document: Any) -> dict[str, Any]:
        """A door that creates a brain (``host.provision``), placed as the HTTP edge places it: created here, or
        called at the node placement chose, which creates it without placing it again."""
        chosen = await self.fleet.place()  # type: ignore[union-attr]
        if chosen.node == self.fleet.node:  # type: ignore[union-attr]
            answer = super().run(principal, door.name, brain, id_, document)
            return answer if isinstance(answer, dict) else await answer  # type: ignore[misc]
        owner = Owner(chosen.node, 0)
        got = await self._send(principal, door, brain, id_, document, owner, chosen.url, placed=chosen.node)
        if isinstance(got, R.Refusal):
            raise got
        return got

    async def _here(
        self, principal: Principal, name: str, brain: str, id_: Any, document: Any, write: str | None = None
    ) -> Any:
        try:
            answer = super().run(principal, name, brain, id_, document, write)
            return answer if isinstance(answer, dict) else await answer  # type: ignore[misc]
        except R.BrainMovedError as moved:  # the claim went elsewhere meanwhile: asked again there
            return moved

    async def _send(
        self,
        principal: Carried,
        door: D.Door,
        brain: str,
        id_: Any,
        document: Any,
        owner: Owner,
        url: str,
        placed: str | None = None,
        write: str | None = None,
    ) -> Proxied | R.Refusal:
        """The door called at the owner at ``url``: its answer, or its refusal (returned, for at_owner to weigh)."""
        positional = (id_,) if id_ is not None and len(door.path_params) > 1 else ()
        if door.layer == "vfs" and isinstance(document, dict):
            document = {k: v for k, v in document.items() if k != D.VFS_SELECTOR}  # the request names the door
        try:
            call = wire.request(door, brain, positional, document, msgpack_body=False)
        except TypeError as exc:
            raise R.InvalidArgumentError(str(exc), reason="malformed") from None
        headers = dict(principal.fields)
        headers["accept"] = wire.JSON
        if call.content_type is not None:
            headers["content-type"] = call.content_type
        if write is not None:
            headers[WRITE] = write
        got = await self.edge.forwarder.forward(url, call.method, call.target, headers, call.body, placed)
        body = orjson.loads(got.body) if got.body else {}
        if not isinstance(body, dict):
            raise http1.PeerUnreachableError(f"node {owner.node} answered {door.name} with a non-object")
        if got.status == 200:
            body.pop("_meta", None)
            answer = Proxied(body)
            answer.answered_by = owner.node
            return answer
        error: dict[str, Any] = body["error"] if isinstance(body.get("error"), dict) else {}
        refusal = _refusal(error, got.status)
        refusal.answered_by = owner.node  # type: ignore[attr-defined]  # read where the answer is framed, by getattr
        return refusal


def _refusal(error: dict[str, Any], status: int) -> R.Refusal:
    """The owner's refusal document as the named class it names (an InternalError when it names none known)."""
    fields = {k: v for k, v in error.items() if k not in ("name", "message")}
    try:
        cls = R.by_name(str(error.get("name")))
        return cls(str(error.get("message", "")), **fields)
    except (KeyError, TypeError, ValueError):
        ref = str(uuid.uuid4())
        log.error("a forwarded door was refused %s with %r (ref %s)", status, error, ref)
        return R.InternalError(f"the brain's node refused the call unreadably; see the log under {ref}", ref=ref)
