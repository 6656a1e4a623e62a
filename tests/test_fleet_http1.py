"""The fleet's HTTP/1.1 connections to its peers (``brainy/fleet/http1.py``): a request written on a kept
connection whose peer goes away before answering is never sent again by the pool for a proxied request (the
peer may have acted on it), and is sent once more for etcd's calls (``resend``)."""

import asyncio
import contextlib
import socket

import pytest

from brainy.client.wire import Response
from brainy.fleet.http1 import Connections, NotConnectedError, PeerUnreachableError, Raw, request_bytes


class _Peer(asyncio.Protocol):
    """Answers a connection's first request 200 (kept alive) and drops it on the second, as a killed peer does;
    counts the requests it was sent."""

    seen = 0

    def connection_made(self, transport):
        self.transport = transport
        self.requests = 0

    def data_received(self, data):
        type(self).seen += data.count(b"HTTP/1.1\r\n")
        self.requests += 1
        if self.requests == 1:
            self.transport.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
        else:
            self.transport.abort()


def _exchange_twice(resend: bool):
    async def go():
        _Peer.seen = 0
        server = await asyncio.get_running_loop().create_server(_Peer, "127.0.0.1", 0)
        address = server.sockets[0].getsockname()[:2]
        connections = Connections(5.0, resend=resend)
        data = request_bytes("POST", "/v1/brains/x/add", "peer", [], b"{}")
        try:
            first = await connections.exchange(address, data)
            assert first.status == 200
            try:
                second = await connections.exchange(address, data)
            except PeerUnreachableError as exc:
                return _Peer.seen, exc
            return _Peer.seen, second
        finally:
            connections.close()
            server.close()
            await server.wait_closed()

    return asyncio.run(asyncio.wait_for(go(), 10))


def test_a_request_on_a_kept_connection_whose_peer_goes_is_not_sent_again():
    seen, outcome = _exchange_twice(resend=False)
    assert isinstance(outcome, PeerUnreachableError) and not isinstance(outcome, NotConnectedError)
    assert outcome.sent  # the edge sends a read again, never a write
    assert seen == 2


def test_with_resend_it_is_sent_once_more_on_a_new_connection():
    seen, outcome = _exchange_twice(resend=True)
    assert not isinstance(outcome, BaseException) and outcome.status == 200  # a new connection's first request
    assert seen == 3


@pytest.mark.parametrize("resend", [False, True])
def test_a_peer_that_is_not_there_is_not_connected(resend):
    async def go():
        connections = Connections(2.0, resend=resend)
        with socket_bound() as port:
            with pytest.raises(NotConnectedError) as refused:
                await connections.exchange(("127.0.0.1", port), request_bytes("GET", "/", "peer", [], b""))
        assert not refused.value.sent

    asyncio.run(go())


@contextlib.contextmanager
def socket_bound():
    """A loopback port nothing listens on (bound, not listening: connections to it are refused)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        yield s.getsockname()[1]


class _Slow(asyncio.Protocol):
    """Answers each request with its own body and fields, except the one whose target is /late, answered only
    after the caller's timeout has passed."""

    def connection_made(self, transport):
        self.transport = transport

    def data_received(self, data):
        target = data.split(b" ", 2)[1]
        answer = b"HTTP/1.1 200 OK\r\nx-target: " + target + b"\r\ncontent-length: " + str(len(target)).encode()
        answer += b"\r\n\r\n" + target
        if target == b"/late":
            asyncio.get_running_loop().call_later(0.6, self._late, answer)
        elif target == b"/soon":  # within the caller's timeout, though past an earlier request's deadline
            asyncio.get_running_loop().call_later(0.2, self._late, answer)
        else:
            self.transport.write(answer)

    def _late(self, answer):
        if not self.transport.is_closing():
            self.transport.write(answer)


def test_a_kept_connection_reads_its_answers_one_after_another_and_one_not_answered_in_time_closes_it():
    """One connection carries many exchanges, each answer read whole with its own fields (the connection's one
    parser, fields as they came); an answer not come within the timeout is PeerUnreachableError, sent, and its
    connection is never used again, so the late answer is never read as the next request's."""

    async def go():
        server = await asyncio.get_running_loop().create_server(_Slow, "127.0.0.1", 0)
        address = server.sockets[0].getsockname()[:2]
        connections = Connections(0.3)
        try:
            for n in range(5):
                target = f"/n{n}"
                got = await connections.exchange(address, request_bytes("GET", target, "peer", [], b""))
                assert got.status == 200 and got.body == target.encode()
                assert (b"x-target", target.encode()) in got.fields
            kept = connections.idle[address]
            assert len(kept) == 1  # all five on one connection
            # the connection's one timer, set at the first request's deadline, fails no later request before its own
            await asyncio.sleep(0.2)
            got = await connections.exchange(address, request_bytes("GET", "/soon", "peer", [], b""))
            assert got.body == b"/soon" and len(connections.idle[address]) == 1
            with pytest.raises(PeerUnreachableError) as late:
                await connections.exchange(address, request_bytes("GET", "/late", "peer", [], b""))
            assert late.value.sent and not connections.idle[address]
            await asyncio.sleep(0.5)  # the late answer arrives at a connection already closed
            got = await connections.exchange(address, request_bytes("GET", "/after", "peer", [], b""))
            assert got.body == b"/after"
        finally:
            connections.close()
            server.close()
            await server.wait_closed()

    asyncio.run(asyncio.wait_for(go(), 10))


def test_send_kept_sends_only_on_a_kept_connection_and_says_what_came_as_exchange_would():
    """The edge's quick road (``Connections.send_kept``): nothing sent, False, with no idle connection; on a kept
    one, the answer (the connection kept again), or for a peer that went mid-request PeerUnreachableError, sent,
    and for one that did not answer in time the same, its connection closed either way."""

    async def go():
        loop = asyncio.get_running_loop()
        _Peer.seen = 0
        dropping = await loop.create_server(_Peer, "127.0.0.1", 0)
        slow = await loop.create_server(_Slow, "127.0.0.1", 0)
        connections = Connections(0.3)

        async def send_kept(address, target):
            landed = loop.create_future()
            sent = connections.send_kept(address, request_bytes("GET", target, "peer", [], b""), landed.set_result)
            return (await landed) if sent else None

        try:
            for server in (dropping, slow):
                address = server.sockets[0].getsockname()[:2]
                assert await send_kept(address, "/none-kept") is None
                assert (await connections.exchange(address, request_bytes("GET", "/", "peer", [], b""))).status == 200
            seen = _Peer.seen
            address = dropping.sockets[0].getsockname()[:2]
            gone = await send_kept(address, "/second")  # the dropping peer's second request: it goes away
            assert isinstance(gone, PeerUnreachableError) and gone.sent
            assert _Peer.seen == seen + 1 and not connections.idle[address]

            address = slow.sockets[0].getsockname()[:2]
            for n in range(3):
                got = await send_kept(address, f"/k{n}")
                assert got.status == 200 and got.body == f"/k{n}".encode()
                assert len(connections.idle[address]) == 1  # kept again for the next
            late = await send_kept(address, "/late")
            assert isinstance(late, PeerUnreachableError) and late.sent and "no answer" in str(late)
            assert not connections.idle[address]
            assert await send_kept(address, "/after") is None  # the late one's connection was never kept
        finally:
            connections.close()
            for server in (dropping, slow):
                server.close()
                await server.wait_closed()

    asyncio.run(asyncio.wait_for(go(), 10))


class _Shapes(asyncio.Protocol):
    """Answers each request by its target: ``/plain`` whole in one write, ``/pieces`` a long body in pieces a
    moment apart, ``/chunked`` chunked (not the plain shape), ``/close`` saying ``connection: close``."""

    def connection_made(self, transport):
        self.transport = transport

    def data_received(self, data):
        target = data.split(b" ", 2)[1]
        loop = asyncio.get_running_loop()
        if target == b"/plain":
            self.transport.write(b"HTTP/1.1 404 Not Found\r\nx-a: 1\r\ncontent-length: 5\r\n\r\nnope!")
        elif target == b"/pieces":
            body = bytes(range(256)) * 1024
            answer = b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n" % len(body) + body
            for n, at in enumerate(range(0, len(answer), 40_000)):
                loop.call_later(0.01 * n, self.transport.write, answer[at : at + 40_000])
        elif target == b"/chunked":
            self.transport.write(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n")
        else:
            self.transport.write(b"HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-length: 2\r\n\r\nok")


def test_an_answer_read_as_its_bytes_comes_whole_as_it_came_and_any_other_shape_as_httptools_reads_it():
    """``send_kept(..., raw=True)`` (the edge's spliced road): a plain answer comes as its bytes (``Raw``: head,
    status, whether the connection may be kept), whole however it was cut; a chunked one as a ``Response`` read by
    httptools; one saying ``connection: close`` is not kept."""

    async def go():
        loop = asyncio.get_running_loop()
        server = await loop.create_server(_Shapes, "127.0.0.1", 0)
        address = server.sockets[0].getsockname()[:2]
        connections = Connections(5.0)

        async def raw(target):
            landed = loop.create_future()
            assert connections.send_kept(
                address, request_bytes("GET", target, "peer", [], b""), landed.set_result, True
            )
            return await landed

        try:
            assert (await connections.exchange(address, request_bytes("GET", "/plain", "peer", [], b""))).status == 404
            plain = await raw("/plain")
            assert isinstance(plain, Raw) and (plain.status, plain.keep) == (404, True)
            assert plain.data[: plain.head] == b"HTTP/1.1 404 Not Found\r\nx-a: 1\r\ncontent-length: 5\r\n\r\n"
            assert plain.data[plain.head :] == b"nope!"
            pieces = await raw("/pieces")
            assert isinstance(pieces, Raw) and pieces.data[pieces.head :] == bytes(range(256)) * 1024
            chunked = await raw("/chunked")
            assert isinstance(chunked, Response) and (chunked.status, chunked.body) == (200, b"abc")
            assert len(connections.idle[address]) == 1  # each answer whole: the connection kept for the next
            closing = await raw("/close")
            assert isinstance(closing, Raw) and closing.keep is False and not connections.idle[address]
        finally:
            connections.close()
            server.close()
            await server.wait_closed()

    asyncio.run(asyncio.wait_for(go(), 10))
