"""Connection deadlines: an idle connection is closed, and so is a request that trickles in too slowly."""

from __future__ import annotations

import asyncio
import time

import uvloop

from brainy.engine import init_store
from brainy.net.app import App
from brainy.net.keys import KeyTable
from brainy.net.pool import Pool
from brainy.net.server import Listen, Server

from server import write_keys


def _run(tmp_path, scenario):
    init_store(tmp_path / "notes")
    keys = write_keys(tmp_path / "keys", "notes")

    async def main():
        app = App(Pool({"notes": tmp_path / "notes"}), KeyTable.open(str(keys)), "2026-01-01T00:00:00Z")
        server = Server(app, [Listen("127.0.0.1", 0)])
        server.idle_seconds, server.request_seconds = 0.6, 0.4
        await server.start()
        try:
            return await scenario(*server.addresses[0])
        finally:
            await server.stop(drain_seconds=1.0)

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(main())


async def _closed_after(reader: asyncio.StreamReader, limit: float) -> float:
    """Seconds until the server closes the connection (reads EOF), failing past ``limit``."""
    started = time.monotonic()
    while await asyncio.wait_for(reader.read(65536), limit):
        pass
    return time.monotonic() - started


def test_an_idle_keep_alive_connection_is_closed(tmp_path):
    """A keep-alive connection that sends nothing more after its answer is closed after the idle limit."""
    async def scenario(host, port):
        reader, writer = await asyncio.open_connection(host, port)
        writer.write(b"GET /contract.json HTTP/1.1\r\nHost: t\r\n\r\n")
        waited = await _closed_after(reader, 5)
        writer.close()
        return waited

    assert 0.3 < _run(tmp_path, scenario) < 3


def test_a_trickled_request_is_cut_off_even_while_bytes_arrive(tmp_path):
    """A request sent a byte at a time (slowloris) is closed once it has taken longer than the request
    limit to arrive, even though bytes keep coming well inside the idle limit."""
    async def scenario(host, port):
        reader, writer = await asyncio.open_connection(host, port)
        started = time.monotonic()
        for byte in b"GET /contract.json HTTP/1.1\r\nHost: t\r\nX-Slow: " + b"a" * 200:
            if reader.at_eof() or writer.is_closing():
                break
            try:
                writer.write(bytes([byte]))
                await writer.drain()
            except ConnectionError:
                break
            await asyncio.sleep(0.05)
            if time.monotonic() - started > 4:
                raise AssertionError("the trickling request was never cut off")
        await _closed_after(reader, 5)
        writer.close()
        return time.monotonic() - started

    assert _run(tmp_path, scenario) < 3


def test_a_connection_that_never_speaks_is_closed(tmp_path):
    """A connection that sends nothing at all is closed after the request limit."""
    async def scenario(host, port):
        reader, writer = await asyncio.open_connection(host, port)
        waited = await _closed_after(reader, 5)
        writer.close()
        return waited

    assert _run(tmp_path, scenario) < 3
