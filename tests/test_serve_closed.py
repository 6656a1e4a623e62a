"""A closed connection is freed as it closes, by reference counting, not left as cyclic garbage for the collector.

Each connection opened and closed used to leave its protocol object, its session glue, its sans-IO
connection and the parser or HPACK tables behind as a cycle (21 objects an h1 connection, 36 an h2), so
a load opening 64 connections a sweep pushed the collector into more passes, whose pauses land in every
other connection's p99. Over real sockets to a real server in process, the collector held off: once the
server has seen the close, none of the connection's objects is alive.
"""

from __future__ import annotations

import asyncio
import gc

import h2.config
import h2.connection
import h2.events
from test_serve_deadlines import GET, _run

from brainy.net.glue.tcp import HttpProtocol
from brainy.net.h1 import H1Connection
from brainy.net.h2 import H2Connection

KINDS = (HttpProtocol, H1Connection, H2Connection)


def _alive() -> list[object]:
    return [o for o in gc.get_objects() if isinstance(o, KINDS)]


async def _until_freed(limit: float = 3.0) -> list[object]:
    """The connections' objects still alive, once none is or ``limit`` seconds have passed."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + limit
    while _alive() and loop.time() < deadline:
        await asyncio.sleep(0.02)
    return _alive()


async def _h1_once(host: str, port: int) -> None:
    reader, writer = await asyncio.open_connection(host, port)
    writer.write(GET)
    head = await reader.readuntil(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 ")
    writer.close()
    await writer.wait_closed()


async def _h2_once(host: str, port: int) -> None:
    reader, writer = await asyncio.open_connection(host, port)
    client = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
    client.initiate_connection()
    client.send_headers(
        1, [(":method", "GET"), (":scheme", "http"), (":authority", "t"), (":path", "/contract.json")], end_stream=True
    )
    writer.write(client.data_to_send())
    ended = False
    while not ended:
        data = await asyncio.wait_for(reader.read(65536), 5)
        assert data, "the server closed before answering"
        for event in client.receive_data(data):
            if isinstance(event, h2.events.DataReceived):  # the contract is over the first window: grant more
                client.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
            ended = ended or isinstance(event, h2.events.StreamEnded)
        writer.write(client.data_to_send())
    writer.close()
    await writer.wait_closed()


def test_closed_connections_are_freed_without_the_collector(tmp_path):
    """Three h1 and three h2 connections, each answered once and closed by the client: with the collector off,
    no protocol object, h1 or h2 connection of theirs is left alive once the server has seen them close."""

    async def scenario(host, port):
        gc.collect()
        assert _alive() == []  # the server holds no connection before the first
        gc.disable()
        try:
            for once in (_h1_once, _h2_once) * 3:
                await once(host, port)
            return await _until_freed()
        finally:
            gc.enable()

    assert _run(tmp_path, scenario) == []
