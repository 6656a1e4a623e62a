"""gRPC on grpcio's own server, for perf/measure.py: the floor, and brainy's service as the alternative.

    python perf/grpcio_server.py floor PORT
    python perf/grpcio_server.py brainy PORT STORE KEYS

``floor`` is a bare grpcio unary server (grpc.aio, a generic handler, no
serializers) answering a fixed 30-byte message on any rpc: the cost of
grpcio's own server, its HTTP/2 and the socket, beside which brainy's gRPC
row is judged. ``brainy`` serves the same ``brainy.v1.Brainy`` service
(``brainy.net.grpc_service``, the same dispatcher and pool) on grpcio's
server instead of brainy's own HTTP/2 layer: the other candidate the server
was chosen between by measurement (the commit that chose it has the figures).
"""

from __future__ import annotations

import asyncio
import sys
from datetime import UTC, datetime
from pathlib import Path

import grpc

FLOOR = b"\x0a\x1c" + b'{"ok":true,"floor":"28 b"}  '  # DoorAnswer.document, 30 bytes in all
assert len(FLOOR) == 30


class _Floor(grpc.GenericRpcHandler):
    def service(self, details):
        return grpc.unary_unary_rpc_method_handler(self._answer)

    @staticmethod
    async def _answer(request: bytes, context) -> bytes:
        return FLOOR


class _Brainy(grpc.GenericRpcHandler):
    """Every rpc to :class:`~brainy.net.grpc_service.GrpcService`, its Response unwrapped into grpcio's terms."""

    def __init__(self, store: Path, keys: Path) -> None:
        from brainy.auth.keys import KeyTable
        from brainy.host.pool import Pool
        from brainy.net.app import App
        from brainy.net.grpc_service import GrpcService

        app = App(Pool({"main": store}), KeyTable.open(str(keys)), datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"))
        self.service_ = GrpcService(app)

    def service(self, details):
        path = details.method

        async def answer(request: bytes, context) -> bytes:  # a coroutine function: grpc.aio awaits it on the loop
            return await self._answer(path, request, context)

        return grpc.unary_unary_rpc_method_handler(answer)

    async def _answer(self, path: str, request: bytes, context) -> bytes:
        from brainy.net.http import Request, Response

        headers = {k: v for k, v in context.invocation_metadata() if isinstance(v, str)}
        body = b"\x00" + len(request).to_bytes(4, "big") + request
        response = self.service_.handle(Request("POST", path, "", headers, body))
        if not isinstance(response, Response):
            response = await response
        fields = {k.decode(): v.decode() for k, v in response.headers}
        # brainy-ms as trailing metadata: set with the status, no extra operation on the call (an
        # initial-metadata send would be one more trip through grpcio's core per call)
        context.set_trailing_metadata((("brainy-ms", fields["brainy-ms"]),))
        if "grpc-status" in fields:
            await context.abort(
                grpc.StatusCode(next(c for c in grpc.StatusCode if c.value[0] == int(fields["grpc-status"]))),
                fields.get("grpc-message", ""),
            )
        return response.body[5:]


async def main(mode: str, port: int, *rest: str) -> None:
    server = grpc.aio.server()
    server.add_generic_rpc_handlers([_Floor() if mode == "floor" else _Brainy(Path(rest[0]), Path(rest[1]))])
    server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    await server.wait_for_termination()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2]), *sys.argv[3:]))
