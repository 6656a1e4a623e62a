"""GET /v1/ws served for real (DOORS.md 10.2, seed 001 "The WebSocket session"), spoken to by an independent RFC
6455 client (``websockets``) and by raw sockets where the client would refuse to misbehave.

Seed 000 "Measured": the WebSocket that answered nothing (a handshake that succeeded, then silence). So every
test here waits for real answers on a real socket from a real ``brainy serve``.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import socket
import struct
import time

import pytest
import websockets
from test_wsframe import client_frame

pytestmark = pytest.mark.slow


def _url(server) -> str:
    return f"ws://{server.host}:{server.port}/v1/ws"


def _auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def test_calls_pipeline_and_answer_as_each_completes(server):
    """Calls sent back to back are answered as each completes, each echoing its ref: a write that waits for
    its fsync is overtaken by a read sent after it. A brain may be left out for a one-brain key; a door's
    refusal is an ok: false frame naming its class; meta.ms is the dispatcher's clock."""

    async def run():
        async with websockets.connect(_url(server), additional_headers=_auth(server.key)) as c:
            await c.send(
                json.dumps(
                    {
                        "ref": "w",
                        "door": "add",
                        "body": {"type": "document", "data": "hello", "metadata": {"tags": ["t:1"]}},
                    }
                )
            )
            for ref in range(8):
                await c.send(json.dumps({"ref": ref, "door": "counts", "brain": server.brain}))
            await c.send(json.dumps({"ref": "bad", "door": "get"}))
            answers = [json.loads(await c.recv()) for _ in range(10)]
            return answers

    answers = asyncio.run(run())
    order = [a["ref"] for a in answers]
    assert sorted(map(str, order)) == sorted(map(str, ["w", *range(8), "bad"]))
    assert order.index("w") > order.index(0), order  # the write completed after the read sent behind it
    by_ref = {a["ref"]: a for a in answers}
    assert by_ref["w"]["ok"] and by_ref["w"]["door"] == "add" and by_ref["w"]["result"]["generation"] == 1
    assert by_ref[0]["ok"] and by_ref[0]["result"]["brain"] == server.brain
    assert by_ref["bad"]["ok"] is False and by_ref["bad"]["error"]["name"] == "InvalidArgumentError"
    assert all(isinstance(a["meta"]["ms"], float) for a in answers)


def test_frame_refusals_and_ping(server):
    """A binary frame is BinaryFrameError, a call that is not a frame document InvalidArgumentError or
    BodyDecodeError, an unknown door UnknownDoorError (a bare profile name among them, while its qualified
    name reaches the door): the session stays open through all of them and a ping is answered with a pong."""

    async def run():
        async with websockets.connect(_url(server), additional_headers=_auth(server.key)) as c:
            await c.send(b"\x00\x01")
            binary = json.loads(await c.recv())
            await c.send("{not json")
            undecodable = json.loads(await c.recv())
            await c.send(json.dumps({"ref": 3, "door": "noSuchDoor"}))
            unknown = json.loads(await c.recv())
            await c.send(json.dumps({"ref": 4, "door": "counts", "extra": 1}))
            stray = json.loads(await c.recv())
            await c.send(json.dumps({"ref": 5, "door": "read", "id": "x"}))
            bare = json.loads(await c.recv())
            await c.send(json.dumps({"ref": 6, "door": "accords.read", "id": "x"}))
            qualified = json.loads(await c.recv())
            latency = await (await c.ping(b"hb"))
            return binary, undecodable, unknown, stray, bare, qualified, latency

    binary, undecodable, unknown, stray, bare, qualified, latency = asyncio.run(run())
    # a profile door is reached by its qualified name only: bare "read" is no door (DOORS.md 0.1)
    assert (bare["ref"], bare["error"]["name"]) == (5, "UnknownDoorError")
    assert qualified["ref"] == 6 and qualified["door"] == "accords.read"
    assert qualified["ok"] or qualified["error"]["name"] != "UnknownDoorError"
    assert binary["error"]["name"] == "BinaryFrameError" and binary["ok"] is False
    assert undecodable["error"]["name"] == "BodyDecodeError"
    assert (unknown["ref"], unknown["error"]["name"]) == (3, "UnknownDoorError")
    assert (stray["ref"], stray["error"]["name"]) == (4, "InvalidArgumentError")
    assert latency >= 0


def _raw_session(server, key: str | None = None) -> socket.socket:
    sock = socket.create_connection(server.address, timeout=10)
    nonce = base64.b64encode(os.urandom(16)).decode()
    sock.sendall(
        (
            f"GET /v1/ws HTTP/1.1\r\nHost: t\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            f"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: {nonce}\r\n"
            f"Authorization: Bearer {key or server.key}\r\n\r\n"
        ).encode()
    )
    head = b""
    while b"\r\n\r\n" not in head:
        head += sock.recv(1)
    assert head.startswith(b"HTTP/1.1 101 "), head
    return sock


def _read_close(sock: socket.socket) -> tuple[int, bytes]:
    data = b""
    while True:
        chunk = sock.recv(4096)
        if not chunk:
            break
        data += chunk
    assert data[0] == 0x88, data
    return struct.unpack(">H", data[2:4])[0], data[4 : 2 + data[1]]


VIOLATIONS = pytest.mark.parametrize(
    "frame, name, code",
    [
        (client_frame(1, b"{}", masked=False), b"UnmaskedFrameError", 1002),
        (client_frame(1, b"{}", rsv=2), b"ReservedBitError", 1002),
        (client_frame(1, b"", length=(8 << 20) + 1)[:14], b"FrameTooLargeError", 1009),
        (client_frame(9, b"x" * 126), b"ControlFrameTooLargeError", 1002),
    ],
    ids=["unmasked", "reserved-bit", "over-8MiB", "control-over-125"],
)


@VIOLATIONS
def test_violations_close_the_session_by_name(server, frame, name, code):
    """Each violation ends the session with RFC 6455's close code and the class name, then the socket closes."""
    with _raw_session(server) as sock:
        sock.sendall(frame)
        assert _read_close(sock) == (code, name)


@VIOLATIONS
def test_a_peer_still_sending_gets_the_close_frame_not_a_reset(server, frame, name, code):
    """Law: a peer whose bytes keep coming after its violation ended the session still reads the close frame,
    then the end of the stream. The server shuts its writing side and reads on, discarding, until the peer
    closes (RFC 6455 7.1.1); closing outright with bytes unread made the kernel answer them with a reset, which
    threw the close frame away before the peer read it (found by tools/fuzz_transports.py)."""
    with _raw_session(server) as sock:
        # 4 MiB behind the violation: the server reads a piece, ends the session, and more is still arriving
        sock.sendall(frame + b"\x00" * (4 << 20))
        assert _read_close(sock) == (code, name)


def test_the_close_handshake_reaches_a_peer_that_pipelined_past_its_close(server):
    """Law: a close frame followed, in the same write, by more frames is answered with the close frame echoing
    its code and then the end of the stream; the frames after the close are discarded, never a reset."""
    with _raw_session(server) as sock:
        sock.sendall(client_frame(8, struct.pack(">H", 1000)) + client_frame(1, b'{"ref":1,"door":"counts"}') * 50_000)
        assert _read_close(sock) == (1000, b"")


def test_fragmented_message_refuses_and_the_session_goes_on(server):
    """A fragmented message is FragmentedFrameError, its later fragment skipped; the next call is answered."""
    with _raw_session(server) as sock:
        _fragmented(sock)


def _fragmented(sock: socket.socket) -> None:
    sock.sendall(
        client_frame(1, b'{"ref":1,', fin=False)
        + client_frame(0, b'"door":"counts"}')
        + client_frame(1, b'{"ref":2,"door":"counts"}')
    )
    got = b""
    while got.count(b'"meta"') < 2:
        got += sock.recv(65536)
    frames = [json.loads(part[part.index(b"{") :]) for part in got.split(b"\x81")[1:]]
    assert frames[0]["error"]["name"] == "FragmentedFrameError" and frames[1]["ref"] == 2 and frames[1]["ok"]
    sock.sendall(client_frame(8, struct.pack(">H", 1000)))
    assert _read_close(sock) == (1000, b"")


def test_the_upgrade_is_refused_before_any_socket(server):
    """A bad credential is answered 401 and never 101: the websockets client sees an HTTP refusal. A bad
    Sec-WebSocket-Key is 400 MalformedRequestError, and the connection closes."""

    async def refused():
        with pytest.raises(websockets.InvalidStatus) as caught:
            async with websockets.connect(_url(server), additional_headers=_auth("bky_not_a_key_000000000000")):
                pass
        return caught.value.response

    response = asyncio.run(refused())
    assert response.status_code == 401 and b"UnauthenticatedError" in response.body
    with socket.create_connection(server.address, timeout=10) as sock:
        sock.sendall(
            (
                f"GET /v1/ws HTTP/1.1\r\nHost: t\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                f"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: short\r\n"
                f"Authorization: Bearer {server.key}\r\n\r\n"
            ).encode()
        )
        data = b""
        while chunk := sock.recv(4096):
            data += chunk
    assert data.startswith(b"HTTP/1.1 400 ") and b"MalformedRequestError" in data


def _rss(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        return next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmRSS:"))


def test_a_client_that_stops_reading_is_held_still(server):
    """Back-pressure: a client that sends calls and reads nothing stops being read (our sends stall, well
    before 64 MiB, whatever the kernel buffers hold), the server's memory does not grow with what was sent
    (each 40-byte call owes a 470-byte answer), and the server goes on answering others."""
    sock = _raw_session(server)
    sock.setblocking(False)
    batch = client_frame(1, json.dumps({"ref": 0, "door": "counts"}).encode()) * 1000
    before = _rss(server.proc.pid)
    sent, progress = 0, time.monotonic()
    while sent < 64 << 20 and time.monotonic() - progress < 2.0:
        try:
            sent += sock.send(batch)
            progress = time.monotonic()
        except BlockingIOError:
            time.sleep(0.01)
    grown = _rss(server.proc.pid) - before

    async def other():
        async with websockets.connect(_url(server), additional_headers=_auth(server.key)) as c:
            await c.send(json.dumps({"ref": 1, "door": "counts"}))
            return json.loads(await c.recv())

    try:
        assert sent < 64 << 20, "the server read 64 MiB from a client that reads nothing"
        assert grown < 100 << 20, f"the server grew {grown >> 20} MiB"
        assert asyncio.run(other())["ok"]
    finally:
        sock.close()
