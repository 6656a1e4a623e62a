"""The fleet's edge: the one place an HTTP request (h1, h2, h3) for a brain is kept here or forwarded to its owner.

docs/fleet.md "Any node answers any brain". :meth:`Edge.consider` answers None when this node answers the
request itself (the app's road, as without a fleet), or an awaitable of the owner's answer. In order:

1. A request that is not a brain's (``/v1/brains/{brain}/…``), or that was forwarded here by another node, is
   this node's: a forwarded request is never forwarded again (the dispatcher refuses ``BrainMovedError`` for
   a brain it no longer owns, and the edge that sent it reads the owner afresh and forwards once more).
2. The caller is checked here first: the credential and the gate, as a local call is. A request that fails
   them is left to the app, whose road refuses it by the same name it would without a fleet.
3. A door that creates a brain (``host_doors.FLEET_PLACED``: provisioning) is placed
   (``brainy.fleet.placement``) and forwarded to the chosen node, unless this node is the one chosen, or
   was named by the edge that placed it.
4. A brain another node owns is forwarded there, and the answer carries ``brainy-node: <owner>``. One this
   node does not place is looked up in etcd first. The held change stream is never forwarded: the app's
   road refuses it ``BrainMovedError`` naming the owner.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable, Callable

from brainy.contract import doors as D
from brainy.contract import refusals as R
from brainy.fleet.http1 import PeerUnreachableError
from brainy.fleet.layout import Owner
from brainy.fleet.membership import Fleet
from brainy.fleet.proxy import FORWARDED, NODE, PLACED, Forwarder
from brainy.host.dispatch import Dispatcher, gate
from brainy.host.host_doors import FLEET_PLACED
from brainy.net.http import Request, Response
from brainy.net.routes import Match

log = logging.getLogger("brainy.edge")

BRAINS = "/v1/brains/"


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
    ) -> None:
        self.fleet = fleet
        self.dispatcher = dispatcher
        self.route = route
        self.local = local
        self.refuse = refuse
        self.forwarder = Forwarder(fleet.node)

    def consider(self, request: Request) -> Awaitable[Response] | None:
        """None to answer ``request`` here; else an awaitable of the answer from the brain's owner."""
        if not request.path.startswith(BRAINS) or FORWARDED in request.headers:
            return None
        try:
            match = self.route(request.method, request.path, request.headers.get("accept"))
        except R.Refusal:
            return None  # no such route: the app refuses it as it would anyway
        brain = match.params.get("brain")
        if brain is None or match.server is not None:
            return None  # the held change stream: the dispatcher refuses a brain owned elsewhere
        if not self._passes(request, match, brain):
            return None
        if match.door in FLEET_PLACED:
            return None if PLACED in request.headers else self._place(request)
        owner = self.fleet.elsewhere(brain)
        if owner is not None:
            return self._forward(request, brain, owner)
        if self.fleet.owner(brain) is None:  # placed nowhere this node knows of: ask etcd
            return self._looked_up(request, brain)
        return None

    def _passes(self, request: Request, match: Match, brain: str) -> bool:
        """The caller's key and the gate, checked here before anything is forwarded (the owner checks them
        again). A shared route (vfs) is gated as its first door: the owner gates the door the body names."""
        name = match.door or next(iter((match.choices or {}).values()), None)
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

    async def _looked_up(self, request: Request, brain: str) -> Response:
        owner = await self.fleet.lookup(brain)
        if owner is None or owner.node == self.fleet.node:
            return await self._here(request)
        return await self._forward(request, brain, owner)

    async def _here(self, request: Request) -> Response:
        answered = self.local(request)
        return answered if isinstance(answered, Response) else await answered

    async def _forward(self, request: Request, brain: str, owner: Owner, again: bool = True) -> Response:
        url = self.fleet.url_of(owner.node)
        if url is None:
            await self.fleet.refresh()
            url = self.fleet.url_of(owner.node)
        if url is None:  # its owner key outlived its registration for a moment: the lease is ending
            return self.refuse(
                request,
                R.BrainMovedError(
                    f"brain {brain!r} is owned by node {owner.node!r}, which is leaving the fleet",
                    brain=brain,
                    node=owner.node,
                    epoch=owner.epoch,
                ),
            )
        answer = await self._send(request, owner.node, url)
        if again and answer.status == R.BrainMovedError.status and _refused_moved(answer):
            fresh = await self.fleet.lookup(brain)  # the owner moved on meanwhile: once more, to the new one
            if fresh is None or fresh.node == self.fleet.node:
                return await self._here(request)
            if fresh != owner:
                return await self._forward(request, brain, fresh, again=False)
        return answer

    async def _send(self, request: Request, node: str, url: str, placed: str | None = None) -> Response:
        target = request.path + (f"?{request.query}" if request.query else "")
        # HEAD goes on as GET: the answer to a HEAD has a length and no body, which no reader can tell from a
        # cut one; the glue here drops the body of a HEAD's answer, as it does for one answered locally
        method = "GET" if request.method == "HEAD" else request.method
        try:
            got = await self.forwarder.forward(url, method, target, request.headers, request.body, placed)
        except (PeerUnreachableError, ValueError) as exc:
            ref = str(uuid.uuid4())
            log.error("node %s at %s did not answer a forwarded request (ref %s): %s", node, url, ref, exc)
            return self.refuse(
                request, R.InternalError(f"the brain's node {node!r} did not answer; see the log under {ref}", ref=ref)
            )
        headers = [(name.encode("latin-1"), value.encode("latin-1")) for name, value in got.headers]
        headers.append((NODE.encode(), node.encode()))
        return Response(got.status, headers, got.body)

    def close(self) -> None:
        self.forwarder.close()


def _refused_moved(answer: Response) -> bool:
    """Whether an owner's answer is the ``BrainMovedError`` refusal (its body names the class, JSON or msgpack)."""
    return b"BrainMovedError" in answer.body
