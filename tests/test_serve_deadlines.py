"""Connection deadlines: an idle connection is closed, and so is a request that trickles in too slowly.

The laws are tested on the sans-IO protocol objects with a fake clock (``now`` is a number the test
moves; nothing sleeps): the preface reader, h1 and h2 each report ``next_deadline()`` and answer
``timer_fired(now)``. One real-socket check per deadline then shows the glue drives them: a real server
in process on uvloop, with limits of a fraction of a second.
"""

from __future__ import annotations

import asyncio
import time

import h2.config
import h2.connection
import uvloop
from server import write_keys

from brainy.auth.keys import KeyTable
from brainy.engine import init_store
from brainy.host.pool import Pool
from brainy.net.app import App
from brainy.net.deadlines import DeadlinePassed
from brainy.net.h1 import H1Connection, ProtocolFailed, RequestReceived
from brainy.net.h2 import H2Connection
from brainy.net.http import Passed, Response
from brainy.net.preface import H2_PREFACE, PrefaceReader
from brainy.net.server import Listen, Server

IDLE, REQUEST = 75.0, 30.0
GET = b"GET /contract.json HTTP/1.1\r\nHost: t\r\n\r\n"
OK = Response(200, [(b"content-type", b"application/json")], b"{}")


def _h1(now: float = 0.0) -> H1Connection:
    return H1Connection(now, idle_seconds=IDLE, request_seconds=REQUEST)


# -- h1, on a fake clock ----------------------------------------------------------------------------


def test_h1_an_idle_keep_alive_connection_is_closed_after_the_idle_limit():
    """After its answer, a keep-alive connection that sends nothing is closed IDLE seconds after its last
    bytes, and not a moment before."""
    conn = _h1()
    [event] = conn.receive_data(GET, 1.0)
    assert isinstance(event, RequestReceived)
    conn.send_response(OK, keep_alive=True)
    assert conn.next_deadline() == 1.0 + IDLE
    assert conn.timer_fired(1.0 + IDLE - 0.001) is None
    assert conn.timer_fired(1.0 + IDLE) == DeadlinePassed("idle", IDLE)


def test_h1_an_answer_that_waited_restarts_the_idle_clock():
    """An answer written later than its request came (a write's fsync, a forwarded request) leaves the connection
    the whole idle limit from the moment it was written, not what is left of it since the request's last bytes;
    with another request still owed, nothing runs."""
    conn = _h1()
    conn.receive_data(GET + GET, 1.0)
    conn.send_response(OK, keep_alive=True)
    conn.answered_at(50.0)  # one still owed: no deadline, and the clock not moved by it
    assert conn.next_deadline() is None
    conn.send_response(OK, keep_alive=True)
    conn.answered_at(100.0)
    assert conn.next_deadline() == 100.0 + IDLE
    assert conn.timer_fired(100.0 + IDLE - 0.001) is None
    assert conn.timer_fired(100.0 + IDLE) == DeadlinePassed("idle", IDLE)


def test_h1_each_request_restarts_the_idle_clock():
    """A connection that keeps asking is never idle: each request's bytes move the deadline on."""
    conn = _h1()
    for now in (10.0, 80.0, 150.0):
        assert conn.timer_fired(now) is None
        conn.receive_data(GET, now)
        conn.send_response(OK, keep_alive=True)
        assert conn.next_deadline() == now + IDLE


def test_h1_a_trickled_request_is_cut_off_even_while_bytes_arrive():
    """A request sent a byte a second (slowloris) is closed REQUEST seconds after its first byte, though
    every byte lands well inside the idle limit."""
    conn = _h1()
    trickle = GET[:-4] + b"\r\nX-Slow: " + b"a" * 100
    now = 0.0
    for byte in trickle[:40]:
        now += 1.0
        assert conn.receive_data(bytes([byte]), now) == []
        assert conn.next_deadline() == 1.0 + REQUEST  # the request began with the first byte, at 1.0
        if now < 1.0 + REQUEST:
            assert conn.timer_fired(now) is None
        else:
            assert conn.timer_fired(now) == DeadlinePassed("request", REQUEST)
            break
    assert now == 1.0 + REQUEST


def test_h1_the_request_clock_starts_at_each_new_request():
    """The request deadline runs from the first byte of the request now arriving, not from the
    connection's first: a second request begun late has its own REQUEST seconds."""
    conn = _h1()
    conn.receive_data(GET, 1.0)
    conn.send_response(OK, keep_alive=True)
    conn.receive_data(b"GET /contract", 50.0)
    assert conn.next_deadline() == 50.0 + REQUEST
    conn.receive_data(b".json HTTP/1.1\r\n", 60.0)
    assert conn.next_deadline() == 50.0 + REQUEST
    assert conn.timer_fired(50.0 + REQUEST) == DeadlinePassed("request", REQUEST)


def test_h1_a_busy_connection_is_not_closed():
    """While a request is owed its answer (a write waiting on its fsync, say), no deadline runs, however
    long it takes: ``next_deadline()`` is None and the timer passes nothing. With two pipelined requests,
    answering one leaves the connection busy; answering both sets the clock running again."""
    conn = _h1()
    events = conn.receive_data(GET + GET, 1.0)
    assert len(events) == 2
    assert conn.next_deadline() is None
    assert conn.timer_fired(1.0 + IDLE + REQUEST + 1000) is None
    conn.send_response(OK, keep_alive=True)
    assert conn.next_deadline() is None and conn.timer_fired(5000.0) is None
    conn.send_response(OK, keep_alive=True)
    assert conn.next_deadline() is not None


def test_h1_a_refused_request_is_owed_its_refusal_and_then_no_deadline_runs():
    """A request that breaks a rule is answered with its refusal and the connection closed by the glue:
    from the failure on, nothing more is read and no deadline is reported."""
    conn = _h1()
    [failed] = conn.receive_data(b"NOT HTTP\r\n\r\n", 1.0)
    assert isinstance(failed, ProtocolFailed)
    assert conn.next_deadline() is None
    conn.send_response(OK, keep_alive=False)
    assert conn.next_deadline() is None
    assert conn.receive_data(GET, 2.0) == []


# -- before the protocol is known, and h2 -----------------------------------------------------------


def test_a_connection_that_never_speaks_is_closed_after_the_request_limit():
    """From the accept, a connection that sends nothing is held to the request deadline."""
    reader = PrefaceReader(0.0, IDLE, REQUEST)
    assert reader.next_deadline() == REQUEST
    assert reader.timer_fired(REQUEST - 0.001) is None
    assert reader.timer_fired(REQUEST) == DeadlinePassed("request", REQUEST)


def test_the_preface_reader_waits_while_the_bytes_could_be_either_protocol():
    """A prefix of the HTTP/2 preface decides nothing; the whole preface chooses h2, a departure from it
    chooses h1, and every byte read is handed on."""
    reader = PrefaceReader(0.0, IDLE, REQUEST)
    assert reader.receive_data(H2_PREFACE[:10], 1.0) is None
    assert reader.next_deadline() == 1.0 + REQUEST
    chosen = reader.receive_data(H2_PREFACE[10:] + b"rest", 2.0)
    assert chosen is not None and (chosen.protocol, chosen.data) == ("h2", H2_PREFACE + b"rest")
    h1 = PrefaceReader(0.0, IDLE, REQUEST).receive_data(b"GET / HTTP/1.1\r\n", 1.0)
    assert h1 is not None and (h1.protocol, h1.data) == ("h1", b"GET / HTTP/1.1\r\n")


def test_h2_is_closed_when_idle_and_never_while_a_stream_is_open():
    """An HTTP/2 connection with no stream open is closed IDLE seconds after its last bytes; with a stream
    open (its answer not yet sent) no deadline runs."""
    server = H2Connection(0.0, idle_seconds=IDLE)
    client = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
    client.initiate_connection()
    server.receive_data(client.data_to_send(), 1.0)
    client.receive_data(server.data_to_send())
    server.receive_data(client.data_to_send(), 1.0)  # the ACK of our SETTINGS: its deadline stops
    assert server.next_deadline() == 1.0 + IDLE
    client.send_headers(
        1, [(":method", "GET"), (":path", "/"), (":scheme", "http"), (":authority", "t")], end_stream=True
    )
    [event] = server.receive_data(client.data_to_send(), 2.0)
    assert server.next_deadline() is None and server.timer_fired(10_000.0) is None
    server.send_response(event.stream_id, OK)
    assert server.next_deadline() == 2.0 + IDLE
    assert server.timer_fired(2.0 + IDLE) == DeadlinePassed("idle", IDLE)
    assert server.ended


def test_h2_an_answer_that_waited_restarts_the_idle_clock():
    """As h1's: a stream answered at 100.0, its request come at 2.0, leaves the connection the whole idle limit
    from 100.0 once no stream is open."""
    server = H2Connection(0.0, idle_seconds=IDLE)
    client = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
    client.initiate_connection()
    server.receive_data(client.data_to_send(), 1.0)
    client.receive_data(server.data_to_send())
    server.receive_data(client.data_to_send(), 1.0)
    client.send_headers(
        1, [(":method", "GET"), (":path", "/"), (":scheme", "http"), (":authority", "t")], end_stream=True
    )
    [event] = server.receive_data(client.data_to_send(), 2.0)
    server.send_response(event.stream_id, OK)
    server.answered_at(100.0)
    assert server.next_deadline() == 100.0 + IDLE
    assert server.timer_fired(2.0 + IDLE) is None and not server.ended
    assert server.timer_fired(100.0 + IDLE) == DeadlinePassed("idle", IDLE)


def test_h2_settings_unacknowledged_end_the_connection_with_settings_timeout():
    """RFC 9113 6.5.3: a peer that never acknowledges our SETTINGS is given SETTINGS_ACK_SECONDS, open
    stream or not, then GOAWAY SETTINGS_TIMEOUT; an acknowledged SETTINGS leaves the idle deadline alone,
    and the idle close says GOAWAY NO_ERROR (6.8)."""
    from brainy.net.h2 import SETTINGS_ACK_SECONDS

    server = H2Connection(0.0, idle_seconds=IDLE)
    server.data_to_send()
    settings = b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"  # the client's empty SETTINGS, its ACK of ours never sent
    headers = b"\x00\x00\x06\x01\x05\x00\x00\x00\x01\x82\x86\x84\x41\x01t"  # GET / on stream 1
    [event] = server.receive_data(H2_PREFACE + settings + headers, 1.0)
    server.data_to_send()
    assert server.next_deadline() == SETTINGS_ACK_SECONDS  # a stream is open: only this deadline runs
    assert server.timer_fired(SETTINGS_ACK_SECONDS - 0.001) is None and not server.ended
    assert server.timer_fired(SETTINGS_ACK_SECONDS) == DeadlinePassed("settings", SETTINGS_ACK_SECONDS)
    out = server.data_to_send()
    assert server.ended and out[3] == 0x7 and out[-4:] == (0x4).to_bytes(4, "big")  # GOAWAY SETTINGS_TIMEOUT

    acked = H2Connection(0.0, idle_seconds=IDLE)
    acked.receive_data(H2_PREFACE + settings + b"\x00\x00\x00\x04\x01\x00\x00\x00\x00", 1.0)
    acked.data_to_send()
    assert acked.next_deadline() == 1.0 + IDLE
    assert acked.timer_fired(1.0 + IDLE) == DeadlinePassed("idle", IDLE)
    out = acked.data_to_send()
    assert acked.ended and out[3] == 0x7 and out[-4:] == bytes(4)  # GOAWAY NO_ERROR


# -- the glue drives them: one real socket per deadline ---------------------------------------------


def _run(tmp_path, scenario, idle_seconds=0.6, request_seconds=0.4):
    init_store(tmp_path / "notes")
    keys = write_keys(tmp_path / "keys", "notes")

    async def main():
        app = App(Pool({"notes": tmp_path / "notes"}), KeyTable.open(str(keys)), "2026-01-01T00:00:00Z")
        server = Server(app, [Listen("127.0.0.1", 0)])
        server.idle_seconds, server.request_seconds = idle_seconds, request_seconds
        await server.start()
        try:
            return await scenario(*server.addresses[0])
        finally:
            await server.stop(drain_seconds=1.0)

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(main())


async def _closed_after(reader: asyncio.StreamReader, limit: float) -> float:
    """Seconds until the server closes the connection, failing past ``limit``. A close reads as EOF, or as a
    reset when a byte the client sent was still in flight as the server closed (the kernel answers it RST)."""
    started = time.monotonic()
    try:
        while await asyncio.wait_for(reader.read(65536), limit):
            pass
    except ConnectionResetError:
        pass
    return time.monotonic() - started


async def _trickled(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> float:
    """Send a request a byte every 50 ms until the server closes the connection; the seconds that took."""
    started = time.monotonic()
    for byte in GET[:-4] + b"\r\nX-Slow: " + b"a" * 200:
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


def test_an_idle_keep_alive_connection_is_closed(tmp_path):
    """Over a socket: a keep-alive connection that sends nothing more after its answer is closed after the
    idle limit."""

    async def scenario(host, port):
        reader, writer = await asyncio.open_connection(host, port)
        writer.write(GET)
        waited = await _closed_after(reader, 5)
        writer.close()
        return waited

    assert 0.3 < _run(tmp_path, scenario) < 3


def test_an_idle_h2_connection_is_told_goaway_before_the_close(tmp_path):
    """Over a socket: an HTTP/2 connection idle past the limit reads the server's GOAWAY NO_ERROR, written
    by the glue before it closes (RFC 9113 6.8), then EOF."""

    async def scenario(host, port):
        reader, writer = await asyncio.open_connection(host, port)
        client = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
        client.initiate_connection()
        writer.write(client.data_to_send())
        events = []
        started = time.monotonic()
        while data := await asyncio.wait_for(reader.read(65536), 5):
            events += client.receive_data(data)
            writer.write(client.data_to_send())  # our SETTINGS ACK
        writer.close()
        return events, time.monotonic() - started

    events, waited = _run(tmp_path, scenario)
    [goaway] = [e for e in events if type(e).__name__ == "ConnectionTerminated"]
    assert goaway.error_code == 0 and 0.5 <= waited < 3.0


def test_the_request_limit_closes_a_silent_connection_and_a_trickling_one(tmp_path):
    """Over sockets, at once: a connection that never speaks, and one that sends a request a byte every
    50 ms (inside the idle limit), are both closed once the request limit has passed."""

    async def silent(host, port):
        reader, writer = await asyncio.open_connection(host, port)
        waited = await _closed_after(reader, 5)
        writer.close()
        return waited

    async def trickling(host, port):
        reader, writer = await asyncio.open_connection(host, port)
        return await _trickled(reader, writer)

    async def both(host, port):
        return await asyncio.gather(silent(host, port), trickling(host, port))

    waited_silent, waited_trickling = _run(tmp_path, both)
    assert waited_silent < 3 and waited_trickling < 3


def test_a_request_trickled_after_an_answer_is_cut_off_at_the_request_limit_not_the_idle_one(tmp_path):
    """Over a socket: a keep-alive connection answered once holds its timer at the idle deadline (3 s here);
    a second request then trickled a byte every 50 ms is cut off once the request limit (0.4 s) has passed,
    well before that timer: the glue asks for the deadline again when a read starts a request's clock."""

    async def scenario(host, port):
        reader, writer = await asyncio.open_connection(host, port)
        writer.write(GET)
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
        assert head.startswith(b"HTTP/1.1 200")
        length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
        await reader.readexactly(length)
        await asyncio.sleep(0.6)  # past the accept's request deadline: the one timer is at the idle one now
        return await _trickled(reader, writer)

    assert 0.3 < _run(tmp_path, scenario, idle_seconds=3.0, request_seconds=0.4) < 1.5


def test_a_spliced_answers_connection_keeps_its_idle_limit_whether_its_timer_went_or_not(tmp_path):
    """Over a socket, a request another node answers (the glue's spliced road, here an answer held back in
    process): no deadline runs while it is owed, even past the idle limit, and once its answer is written the
    connection has the whole idle limit again, from then. Whether the connection's timer went while the answer
    was owed (it came after the limit) or is still set (it came at once), the connection is closed about the
    limit after the answer, never left open with no timer (``HttpProtocol.answered``) and never closed under a
    client about to send its next request."""
    answer = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}"
    head = answer.index(b"\r\n\r\n") + 4
    init_store(tmp_path / "notes")
    keys = write_keys(tmp_path / "keys", "notes")

    framed = Response(200, [(b"content-type", b"application/json"), (b"brainy-node", b"n2")], b"{}")

    async def main(delay: float, passed: bool) -> tuple[bytes, float]:
        loop = asyncio.get_running_loop()
        app = App(Pool({"notes": tmp_path / "notes"}), KeyTable.open(str(keys)), "2026-01-01T00:00:00Z")

        def splice(request, deliver) -> bool:  # the owner's bytes passed on, or an answer the glue frames
            loop.call_later(delay, deliver, Passed(answer, head, b"brainy-node: n2\r\n") if passed else framed)
            return True

        app.splice = splice
        server = Server(app, [Listen("127.0.0.1", 0)])
        server.idle_seconds, server.request_seconds = 0.6, 0.4
        await server.start()
        try:
            reader, writer = await asyncio.open_connection(*server.addresses[0])
            writer.write(b"GET /v1/brains/notes/get/a HTTP/1.1\r\nhost: t\r\n\r\n")
            got = await asyncio.wait_for(reader.readuntil(b"{}"), 5)
            waited = await _closed_after(reader, 5)
            writer.close()
            return got, waited
        finally:
            await server.stop(drain_seconds=1.0)

    # after the limit (the timer went meanwhile), and at once (it is still set); passed on, and framed here
    for delay, passed in ((1.2, True), (0.0, True), (1.2, False)):
        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            got, waited = runner.run(main(delay, passed))
        assert got.startswith(b"HTTP/1.1 200 OK\r\n") and b"brainy-node: n2\r\n" in got
        assert 0.3 < waited < 3, (delay, passed, waited)
