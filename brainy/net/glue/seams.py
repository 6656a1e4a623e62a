"""What the glue is handed from above, as narrow Protocols: the glue imports neither the app nor the server.

STYLE 15: a lower floor is handed what it uses, never the object above it, not
even under ``TYPE_CHECKING``. The objects are the same as ever
(``brainy.net.server`` builds the glue over them); only their types are named
here, so nothing of this runs per request.

* :class:`Handler`: what a request is handed to (``brainy.net.app.App`` on an
  HTTP listener, ``brainy.net.grpc_service.GrpcService`` on a gRPC one);
* :class:`HttpHandler`: an HTTP/1.1 listener's handler (``App``), which also
  grants the ``/v1/ws`` upgrade and runs the WebSocket session's calls;
* :class:`Serving`: the server's count of requests in flight, which the glue
  keeps, and whether it is stopping (``brainy.net.server.Server``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

from brainy.auth.principal import Principal
from brainy.net.http import Passed, Request, Response

if TYPE_CHECKING:
    from brainy.host.dispatch import Dispatcher


class Handler(Protocol):
    """Answers a request: a :class:`Response` now (every read), or an awaitable of one (a door that waits)."""

    def handle(self, request: Request) -> Response | Awaitable[Response]: ...


class HttpHandler(Handler, Protocol):
    """An HTTP/1.1 listener's handler: it also judges an upgrade (the ``101`` answer and the caller, or a
    refusal and None), and its dispatcher runs the calls of the WebSocket session it granted."""

    dispatcher: Dispatcher
    calls: Dispatcher  # the dispatcher the session's door calls run on (in a fleet, one that calls the owner)
    # in a fleet, the edge's road for a request whose brain another node serves (brainy/net/edge.py Edge.splice)
    splice: Callable[[Request, Callable[[Response | Passed], None]], bool] | None
    # and its first look at a read: one whole plain GET another node answers, read and spliced in one call
    take: Callable[[Any, bytes, float, Callable[[Response | Passed], None]], Any] | None

    def upgrade(self, request: Request) -> tuple[Response, Principal | None]: ...


class Serving(Protocol):
    """The server the glue answers for: requests in flight (an answer that waits counts, until written) and
    whether it is stopping (every connection then closes once it has answered)."""

    in_flight: int
    stopping: bool
