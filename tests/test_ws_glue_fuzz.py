"""The WebSocket session end to end in memory: the real app, pool and dispatcher behind the real glue
(``brainy.net.glue.tcp`` -> ``h1`` -> the upgrade -> ``ws``), a peer's socket as an in-memory transport
(STYLE 13: drive glue through a mock transport; nothing of ours is replaced).

Issue 15: 10,000 random and malformed frame streams without a crash or a leaked task.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import types

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_wsframe import client_frame

from brainy.auth.keys import KeyTable
from brainy.engine import init_store
from brainy.host.pool import Pool
from brainy.net.app import App
from brainy.net.deadlines import LINGER_SECONDS, Lingering
from brainy.net.glue.tcp import HttpProtocol
from brainy.net.server import Server

KEY = "bky_ws_glue_fuzz_person_key_01234567"


class MemoryTransport(asyncio.Transport):
    """The server's side of a socket, in memory: what was written, whether it closed or paused."""

    def __init__(self) -> None:
        super().__init__()
        self.out = bytearray()
        self.closed = False
        self.eof = False  # the writing side is shut (a half-close): the peer still sends, and is read
        self.paused = False

    def write(self, data) -> None:
        assert not self.eof and not self.closed, "a write after the writing side was shut"
        self.out += data

    def can_write_eof(self) -> bool:
        return True

    def write_eof(self) -> None:
        self.eof = True

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.closed = self.aborted = True

    def is_closing(self) -> bool:
        return self.closed

    def pause_reading(self) -> None:
        self.paused = True

    def resume_reading(self) -> None:
        self.paused = False

    def get_extra_info(self, name, default=None):
        return default

    def get_write_buffer_size(self) -> int:
        return 0


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """One app over a fresh brain ``notes`` and its loop, shared by every example."""
    root = tmp_path_factory.mktemp("wsfuzz")
    init_store(root / "notes")
    keys = root / "keys"
    keys.write_text(f"{KEY}  person:one@example.com  notes\n")
    keys.chmod(0o600)
    pool = Pool({"notes": root / "notes"})
    loop = asyncio.new_event_loop()
    faults: list[dict] = []
    loop.set_exception_handler(lambda loop, context: faults.append(context))  # a callback's exception, kept
    app = App(pool, KeyTable.open(keys), "1970-01-01T00:00:00Z")
    server = Server(app, [])
    yield loop, app, server
    pool.close_all()
    loop.close()
    assert not faults, faults[:3]  # nothing raised out of a callback the loop ran (the glue's flush among them)


def _upgrade() -> bytes:
    nonce = base64.b64encode(os.urandom(16)).decode()
    return (
        f"GET /v1/ws HTTP/1.1\r\nHost: t\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        f"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: {nonce}\r\nAuthorization: Bearer {KEY}\r\n\r\n"
    ).encode()


async def _session(app: App, server: Server, chunks: list[bytes], split: int) -> MemoryTransport:
    protocol = HttpProtocol(app, server, ("h1", "h2"))
    transport = MemoryTransport()
    protocol.connection_made(transport)
    protocol.data_received(_upgrade())
    assert transport.out.startswith(b"HTTP/1.1 101 "), bytes(transport.out[:200])
    data = b"".join(chunks)
    for i in range(0, len(data), split):
        if transport.closed:
            break
        protocol.data_received(data[i : i + split])
        await asyncio.sleep(0)
    await asyncio.sleep(0)
    protocol.connection_lost(None)
    pending = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    if pending:
        await asyncio.wait(pending, timeout=10)
    leaked = [t for t in asyncio.all_tasks() if t is not asyncio.current_task() and not t.done()]
    assert not leaked, leaked
    return transport


_calls = st.sampled_from(
    [
        json.dumps({"ref": 1, "door": "counts"}).encode(),
        json.dumps({"ref": 2, "door": "get", "id": "x"}).encode(),
        json.dumps({"ref": 3, "door": "add", "body": {"type": "document"}}).encode(),
        json.dumps({"ref": 4, "door": "nope"}).encode(),
        b"[]",
        b"{",
        "\u00e9".encode("latin-1"),
    ]
)
_frames = st.one_of(
    st.builds(client_frame, st.just(1), _calls),
    st.builds(
        client_frame,
        st.sampled_from([0, 1, 2, 3, 8, 9, 10, 11]),
        st.binary(max_size=130),
        fin=st.booleans(),
        rsv=st.sampled_from([0, 0, 0, 2]),
        masked=st.sampled_from([True, True, False]),
    ),
    st.binary(max_size=24),
)


@pytest.mark.slow
@settings(
    deadline=None,
    max_examples=10_000,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(chunks=st.lists(_frames, max_size=6), split=st.integers(1, 80))
def test_ten_thousand_random_sessions_leave_no_task_behind(served, chunks, split):
    """Random, malformed and valid frames through the whole glue, in arbitrary pieces: nothing raises, every
    call a valid frame made is answered or cancelled with the connection, and no task outlives it."""
    loop, app, server = served
    loop.run_until_complete(_session(app, server, chunks, split))
    assert server.in_flight == 0


def test_an_ended_session_half_closes_and_lets_go_at_its_deadline(served):
    """The end through the glue: a violation's close frame is written, then the writing side is shut (not the
    connection: bytes still arriving are read and discarded, so the peer gets the close frame, not a reset);
    the connection's timer is at the linger deadline, LINGER_SECONDS on, and when it fires the connection is
    aborted."""
    loop, app, server = served

    async def run() -> MemoryTransport:
        protocol = HttpProtocol(app, server, ("h1", "h2"))
        transport = MemoryTransport()
        protocol.connection_made(transport)
        protocol.data_received(_upgrade())
        protocol.data_received(client_frame(1, b"{}", rsv=4))
        await asyncio.sleep(0)
        assert transport.out.endswith(b"\x88\x12\x03\xeaReservedBitError") and transport.eof, transport.out[-40:]
        assert not transport.closed and not transport.paused
        protocol.data_received(b"\x00" * 100_000)  # read and discarded
        await asyncio.sleep(0)
        assert isinstance(protocol._timed, Lingering) and protocol._timed.seconds == LINGER_SECONDS
        assert protocol._timer is not None and protocol._timer_at == protocol._timed.next_deadline()
        protocol._timer.cancel()
        due = protocol._timer_at
        real = protocol._loop
        protocol._loop = types.SimpleNamespace(time=lambda: due, call_at=real.call_at)  # CLOSE_SECONDS on
        protocol._fired()  # as the timer would: the peer never closed its side
        assert transport.closed and transport.aborted
        protocol.connection_lost(None)
        return transport

    loop.run_until_complete(run())


def test_a_counts_call_is_answered_through_the_glue(served):
    """The in-memory harness answers like the served session: one call, one text frame echoing its ref."""
    loop, app, server = served
    transport = loop.run_until_complete(_session(app, server, [client_frame(1, b'{"ref":9,"door":"counts"}')], 999))
    answer = transport.out[transport.out.index(b"\r\n\r\n") + 4 :]
    assert answer[0] == 0x81 and b'"ref":9' in answer and b'"ok":true' in answer
