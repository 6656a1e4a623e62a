"""The proxy's floor: a bare uvloop relay that passes bytes between a client and one upstream, nothing parsed.

    python perf/floor_relay.py PORT UPSTREAM_PORT

Each accepted connection gets its own connection to ``127.0.0.1:UPSTREAM_PORT``; whatever either side sends is
written to the other as it arrives (TCP_NODELAY both ways). No request is read, routed or checked: what a hop
costs in this stack before any of the work a fleet's edge must do (perf/bench_proxy.py ``--floor``).
"""

import asyncio
import socket
import sys

import uvloop


def _nodelay(transport: asyncio.BaseTransport) -> None:
    sock = transport.get_extra_info("socket")
    if sock is not None:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


class Upstream(asyncio.Protocol):
    def __init__(self, client: "Client") -> None:
        self.client = client

    def connection_made(self, transport):
        _nodelay(transport)

    def data_received(self, data):
        self.client.transport.write(data)

    def connection_lost(self, exc):
        self.client.transport.close()


class Client(asyncio.Protocol):
    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.upstream = None
        self.early: list[bytes] = []

    def connection_made(self, transport):
        self.transport = transport
        _nodelay(transport)
        asyncio.ensure_future(self._connect())

    async def _connect(self):
        upstream, _ = await asyncio.get_running_loop().create_connection(
            lambda: Upstream(self), "127.0.0.1", self.upstream_port
        )
        self.upstream = upstream
        for data in self.early:
            upstream.write(data)
        self.early = []

    def data_received(self, data):
        if self.upstream is None:
            self.early.append(data)
        else:
            self.upstream.write(data)

    def connection_lost(self, exc):
        if self.upstream is not None:
            self.upstream.close()


async def main(port: int, upstream_port: int) -> None:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: Client(upstream_port), "127.0.0.1", port)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    uvloop.run(main(int(sys.argv[1]), int(sys.argv[2])))
