"""The ``brainy.v1.Brainy`` service: a gRPC request to the one dispatcher, and its Outcome to a gRPC answer.

What :class:`~brainy.net.app.App` is to an HTTP request, :class:`GrpcService`
is to an rpc: it is handed the :class:`~brainy.net.http.Request` the HTTP/2
connection read (``:path`` ``/brainy.v1.Brainy/<rpc>``, the metadata as
headers, the length-prefixed message as the body) and answers a
:class:`~brainy.net.http.Response` with trailers, now for a door that does not
wait or as an awaitable. The rpc table is the contract's
(``brainy.contract.doors.grpc_service``), so no rpc is listed here.

Inside the dispatcher's one clock: the credential, the message, the
document, then the gate and the door. A door's refusal is the answer's
``refusal`` with status OK; only the transport's own failures are
statuses (seed 000, Transports 3): UNAUTHENTICATED for no credential and for
the identity-time token refusals, its message naming which; INVALID_ARGUMENT
for a message or a document that does not read; UNIMPLEMENTED for an rpc
the service does not declare. Every answer carries ``brainy-ms``.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any

from brainy.contract import doors as D
from brainy.contract import refusals as R
from brainy.host.dispatch import Answer, Dispatcher, Outcome
from brainy.net import codecs
from brainy.net import grpc as G
from brainy.net.http import Request, Response

RPCS = D.grpc_service()  # rpc name -> door name
# The refusals an rpc answers as a status, not in its answer: who the caller is was not established.
IDENTITY = frozenset(
    {
        R.UnauthenticatedError.name,
        R.BRAINY_KEY_MALFORMED.name,
        R.BRAINY_KEY_UNKNOWN_ISSUER.name,
        R.BRAINY_KEY_BAD_SIGNATURE.name,
        R.BRAINY_KEY_REVOKED.name,
        R.BRAINY_KEY_EXPIRED.name,
    }
)
_JSON = "application/json"


class GrpcService:
    """The service over the one dispatcher; :meth:`handle` is what the HTTP/2 glue calls."""

    def __init__(self, dispatcher: Dispatcher) -> None:
        self.dispatcher = dispatcher

    def handle(self, request: Request) -> Response | Awaitable[Response]:
        """The answer to one rpc, now for a door that does not wait (every read), or an awaitable of it."""
        rpc = request.path[len(G.SERVICE_PATH) :] if request.path.startswith(G.SERVICE_PATH) else None
        door = RPCS.get(rpc) if rpc is not None and request.method == "POST" else None
        if door is None:
            return G.failed(
                G.UNIMPLEMENTED, f"{request.method} {request.path} is not an rpc of {D.GRPC_PACKAGE}.{D.GRPC_SERVICE}"
            )
        status: list[int] = []  # set when a failure met on the way in is the transport's, not the door's
        outcome = self.dispatcher.timed(door, self._call, request, door, status)
        if isinstance(outcome, Outcome):
            return self._respond(outcome, status)
        return self._respond_later(outcome, status)

    def _call(self, request: Request, door: str, status: list[int]) -> Answer:
        try:
            principal = self.dispatcher.credential(request.headers)
        except R.Refusal as refusal:
            if refusal.name in IDENTITY:
                status.append(G.UNAUTHENTICATED)
            raise
        try:
            message = G.read_request(request.body)
            document: Any = codecs.decode(message.document.encode(), _JSON) if message.document else None
        except G.MessageUnreadable as exc:
            status.append(G.INVALID_ARGUMENT)
            raise R.BodyDecodeError(f"the request message does not read: {exc.reason}", encoding="protobuf") from None
        except R.Refusal:
            status.append(G.INVALID_ARGUMENT)
            raise
        # a call that names no brain reaches the one brain of a one-brain key (the dispatcher's rule)
        return self.dispatcher.run(
            principal, door, message.brain or None, message.id or message.sha256 or None, document
        )

    async def _respond_later(self, pending: Awaitable[Outcome], status: list[int]) -> Response:
        return self._respond(await pending, status)

    @staticmethod
    def _respond(outcome: Outcome, status: list[int]) -> Response:
        refusal = outcome.refusal
        if refusal is None:
            assert outcome.answer is not None
            return _noted(
                G.answered(G.answer_message(document=codecs.to_json(outcome.answer)), outcome.ms), outcome.answer
            )
        if status:
            return G.failed(status[0], f"{refusal.name}: {refusal.message}", outcome.ms)
        return _noted(G.answered(G.answer_message(refusal=codecs.to_json(refusal.to_wire())), outcome.ms), refusal)


def _noted(response: Response, answer: Any) -> Response:
    """``response`` with ``brainy-node`` in its initial metadata when the brain's owner elsewhere gave ``answer``
    (docs/fleet.md "Any node answers any brain": ``answered_by``, set by brainy/net/edge.py)."""
    node = getattr(answer, "answered_by", "")
    if node:
        response.headers.append((b"brainy-node", node.encode()))
    return response
