"""The fleet's one outbound HTTP/1.1: a request's bytes, a response read by httptools, kept-alive connections.

The fleet speaks to two kinds of peer, and both over HTTP/1.1: etcd's v3 JSON gateway (``brainy.fleet.etcd``)
and another node of the fleet, the owner of a brain a request named (``brainy.fleet.proxy``). The framing is
here once, split as the house splits a protocol (STYLE 1): :func:`request_bytes` and the response reader
(``brainy.client.wire.Reader``, the client's own: one reader for every HTTP/1.1 answer brainy reads) are sans-IO;
:class:`Connections` is the thin asyncio part, a few idle kept-alive sockets per peer address, and
:class:`Stream` one held answer followed as it arrives.

A response is read whole (both peers answer documents, never streams worth following here); etcd answers its
streaming calls (a lease's keep-alive) chunked, and httptools reads that as any other body. A proxied request's
answer may be read as its bytes instead (:meth:`_Peer.send_raw`, ``h1frame.answer_head``: the edge passes a plain
answer on as it came), anything but one plain answer with a length then read by httptools as any other.
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Callable
from typing import cast

from brainy._speedups import h1frame, splice
from brainy.client.wire import Reader, Response

#: Idle connections kept per peer address: the fleet's calls to one peer are few at a time (the renewal
#: loop, the placement reads, the proxied requests of a moment).
IDLE_PER_PEER = 8
READ_CHUNK = 1 << 16
MAX_ANSWER_HEAD = 1 << 16  # an answer read as bytes whose head is longer is read by httptools
#: A kept connection idle longer than this is closed, never reused: well inside the idle deadline a brainy node
#: closes connections at (75 s, brainy/net/deadlines.py), so a peer's idle close never races a request sent
#: on it: a kept connection that fails under a request means its peer went away, maybe after acting on it.
KEEP_SECONDS = 30.0
#: What is called with a request's answer, or with the error that stopped it.
Done = Callable[[Response | Exception], None]
#: The same for an answer that may come as its bytes (:meth:`_Peer.send_raw`).
Landed = Callable[["Response | Raw | Exception"], None]


class PeerUnreachableError(OSError):
    """A peer could not be reached, or closed or garbled its answer before it was whole. ``sent`` says whether
    the request may have reached it: one never sent (no connection) is safe to send again elsewhere."""

    sent = True


class NotConnectedError(PeerUnreachableError):
    """No connection to the peer could be made: the request was never sent."""

    sent = False


_NONE: frozenset[str] = frozenset()


def request_bytes(method: str, target: str, authority: str, headers: list[tuple[str, str]], body: bytes) -> bytes:
    """One request's bytes: the request line, ``Host``, the given fields, ``Content-Length``, the body (framed as a
    proxied request is, ``h1frame.frame_request``, with its fields all given)."""
    return h1frame.frame_request(method, target, authority, {}, _NONE, tuple(headers), body)


class Raw:
    """An answer read as its bytes (:meth:`_Peer.send_raw`, ``h1frame.answer_head``): ``data`` the whole answer as
    it came, ``head`` where its body starts, ``status`` its code, ``keep`` whether the connection may carry the
    next request."""

    __slots__ = ("data", "head", "status", "keep")

    def __init__(self, data: bytes, head: int, status: int, keep: bool) -> None:
        self.data = data
        self.head = head
        self.status = status
        self.keep = keep


class Stream:
    """A response whose body is followed as it arrives, on a connection of its own (the held change stream relayed
    from a brain's owner, docs/fleet.md): :meth:`open` reads its head, :meth:`next` each piece of body after it
    (httptools undoes the chunking), ``b""`` once it is whole or the peer went."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.parsed = Reader(held=True)
        self.response = self.parsed.response

    @classmethod
    async def open(cls, address: tuple[str, int], data: bytes, timeout: float) -> Stream:
        """``data`` sent on a new connection to ``address``, and the answer's head read within ``timeout``."""
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_connection(*address), timeout)
        except (OSError, TimeoutError) as exc:
            raise NotConnectedError(f"{address[0]}:{address[1]}: {exc or 'timed out'}") from None
        stream = cls(reader, writer)
        try:
            writer.write(data)
            async with asyncio.timeout(timeout):
                while not stream.response.status:
                    if not await stream._read():
                        raise PeerUnreachableError(f"{address[0]}:{address[1]} closed the connection before answering")
        except TimeoutError:
            stream.close()
            raise PeerUnreachableError(f"{address[0]}:{address[1]}: no answer in {timeout} s") from None
        except BaseException:
            stream.close()
            raise
        return stream

    async def _read(self) -> bool:
        chunk = await self.reader.read(READ_CHUNK)
        if not chunk:
            return False
        feed(self.parsed, chunk)
        return True

    async def next(self) -> bytes:
        """The body that arrived since the last call, waiting for some; ``b""`` at its end."""
        while True:
            chunks = self.parsed.take()
            if chunks:
                return b"".join(chunks)
            if self.parsed.done or not await self._read():
                return b""

    async def whole(self) -> bytes:
        """The body of an answer that is not a stream (a refusal), read to its end."""
        while not self.parsed.done and await self._read():
            pass
        return self.response.body

    def close(self) -> None:
        self.writer.close()


def feed(parsed: Reader, data: bytes) -> None:
    """``data`` fed to ``parsed``; an answer that is not HTTP/1.1 is PeerUnreachableError."""
    try:
        parsed.feed(data)
    except ValueError as exc:
        raise PeerUnreachableError(str(exc)) from None


class _Peer(asyncio.Protocol):
    """One kept-alive connection to a peer, one request at a time: the answer's bytes go straight from the loop
    into a reader, and the whole answer to the request's callback (no stream buffers, no task, no drain). The
    connection's one reader (one httptools parser) reads its answers one after another, their fields only as
    they came: nothing the fleet reads of an answer needs them decoded."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.closed = False
        self._reader = Reader(lookup=False)
        self._parsed: Reader | None = None
        self._done: Landed | None = None
        # one timer for the connection, not one a request (a request's timer cost the proxied path 2.2 us of CPU to
        # set and cancel): set at a request's deadline when none is set, and when it fires it fails the request in
        # flight if that one's deadline has passed, else is set again at it
        self._timer: asyncio.TimerHandle | None = None
        self._deadline = 0.0
        # an answer read as bytes (send_raw): its pieces so far, () while none came
        self._raw: list[bytes] | tuple[()] | None = None
        self._raw_size = 0  # their bytes
        self.idle_since = 0.0  # kept idle (Connections) since then, on the monotonic clock
        self._raw_need = 0  # the bytes the answer is known to need at least: read again only once they came

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        # kept: asyncio.get_running_loop() checks the process id, a getpid system call on every proxied request
        self._loop = asyncio.get_running_loop()
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # a request is one write; never wait

    def data_received(self, data: bytes) -> None:
        pieces = self._raw
        if pieces is not None:
            if pieces:  # the answer's first bytes came before
                pieces.append(data)
                self._raw_size += len(data)
                if self._raw_size < self._raw_need:
                    return  # a long body still coming: not joined and read again each piece
                whole = b"".join(pieces)
            else:
                whole = data
            framed = h1frame.answer_head(whole, MAX_ANSWER_HEAD)
            if type(framed) is tuple:  # the whole plain answer (nearly always in one piece)
                self._raw = self._parsed = None
                done, self._done = self._done, None
                if type(done) is _SPLICED:  # the edge's spliced road (send_spliced): its own call, no Raw made
                    done.landed(whole, framed)
                elif done is not None:
                    done(Raw(whole, framed[0], framed[1], framed[2]))
                return
            if framed is not None:  # the bytes it still needs at least
                self._raw, self._raw_size = [whole], len(whole)
                self._raw_need = self._raw_size + framed
                return
            self._raw = None
            data = whole  # not the plain shape: httptools reads all of it
            self._reader.again()
        parsed = self._parsed
        if parsed is None:  # bytes nobody asked for: the connection cannot be trusted with another request
            self.close()
            return
        try:
            feed(parsed, data)
        except PeerUnreachableError as exc:
            self._fail(exc)
            self.close()
            return
        if parsed.done:
            self._parsed, done, self._done = None, self._done, None
            if done is not None:
                done(parsed.response)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._fail(PeerUnreachableError("the peer closed the connection mid-answer"))

    def _stop_timer(self) -> None:
        timer, self._timer = self._timer, None
        if timer is not None:
            timer.cancel()

    def _fail(self, exc: Exception) -> None:
        self._stop_timer()
        self._raw = None
        done, self._done, self._parsed = self._done, None, None
        if done is not None:
            done(exc)

    def send(self, data: bytes, timeout: float, done: Done) -> None:
        """Send ``data``; ``done`` is called, from the loop, with the answer, or with TimeoutError once ``timeout``
        seconds pass without it (the caller then closes the connection: an answer arriving late must not be read
        as the next request's), or with the error that ended the connection. A timer on the loop, not
        ``asyncio.timeout``: no task to find and no context to enter on the proxied path."""
        reader = self._reader
        reader.again()
        self._parsed = reader
        self._raw = None
        self._write(data, timeout, cast(Landed, done))  # (never a Raw: no answer is read as its bytes)

    def send_raw(self, data: bytes, timeout: float, done: Landed) -> None:
        """:meth:`send`, the answer handed to ``done`` as its bytes (:class:`Raw`) when it frames plainly
        (``h1frame.answer_head``), else read by httptools as :meth:`send` reads it."""
        self._parsed = self._reader  # made ready for an answer only if one comes that it must read
        self._raw = ()
        self._write(data, timeout, done)

    def send_spliced(self, data: bytes, timeout: float, spliced: splice.Spliced) -> None:
        """:meth:`send_raw` for the edge's spliced road (``brainy._speedups.splice``): a plain answer goes to
        ``spliced.landed`` as its bytes and ``h1frame.answer_head``'s reading of them; anything else (an answer
        httptools read, the error that stopped it) to ``spliced(got)``. The road took this connection from the kept
        ones and keeps it again (:meth:`Connections.landed`)."""
        self._parsed = self._reader
        self._raw = ()
        loop = self._loop  # _write's, inline: the proxied get's road
        assert self.transport is not None and loop is not None
        self._done = spliced
        self._deadline = loop.time() + timeout
        if self._timer is None:
            self._timer = loop.call_at(self._deadline, self._expire)
        self.transport.write(data)

    def _write(self, data: bytes, timeout: float, done: Landed) -> None:
        loop = self._loop
        assert self.transport is not None and loop is not None
        self._done = done
        self._deadline = loop.time() + timeout
        if self._timer is None:
            self._timer = loop.call_at(self._deadline, self._expire)
        self.transport.write(data)

    def _expire(self) -> None:
        self._timer = None
        if self._done is None:  # answered: the next request sets it again
            return
        loop = self._loop
        assert loop is not None  # (set with the connection, before any request)
        if loop.time() < self._deadline:  # set for an earlier request: this one's deadline is later
            self._timer = loop.call_at(self._deadline, self._expire)
            return
        self._fail(TimeoutError())

    def exchange(self, data: bytes, timeout: float) -> asyncio.Future[Response]:
        """:meth:`send`, its answer a future's result (or exception)."""
        waiter: asyncio.Future[Response] = asyncio.get_running_loop().create_future()

        def done(got: Response | Exception) -> None:
            if waiter.done():
                return
            if isinstance(got, Response):
                waiter.set_result(got)
            else:
                waiter.set_exception(got)

        self.send(data, timeout, done)
        return waiter

    def close(self) -> None:
        self.closed = True
        self._stop_timer()
        if self.transport is not None:
            self.transport.close()


class Connections:
    """Kept-alive connections to peers by ``(host, port)``: :meth:`exchange` sends one request and reads its
    response, on an idle connection when one is kept, else on a new one."""

    def __init__(self, timeout: float, resend: bool = False) -> None:
        self.timeout = timeout
        # etcd's calls keep the older rule: a kept connection that fails (an etcd restarted while it was idle) is
        # tried once more on a new one
        self.resend = resend
        # idle kept connections by address, the newest last (the edge's spliced road takes them here too)
        self.idle: dict[tuple[str, int], list[_Peer]] = {}

    async def exchange(self, address: tuple[str, int], data: bytes) -> Response:
        """``data`` sent to ``address`` and the response read whole, within the timeout, on a kept connection its
        peer has not closed, else a new one. A kept connection that fails after the write raises
        PeerUnreachableError (``sent``), unless ``resend``: then the request is sent once more on a new one."""
        while (peer := self.idle_peer(address)) is not None:
            try:
                return await self._exchange(address, peer, data)
            except (PeerUnreachableError, ConnectionError) as exc:
                if isinstance(exc, _NoAnswer):
                    raise  # it was sent and not answered in time: never sent twice
                if not self.resend:
                    # written to a connection its peer had not closed when it was taken: the peer may have read it
                    # and acted before it went (killed mid-request); a proxied read is sent again by the edge, a
                    # write is not (brainy/net/edge.py)
                    raise PeerUnreachableError(f"{address[0]}:{address[1]}: {exc}") from None
                peer.close()  # ``resend``: a new connection below
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(self.timeout):
                _, peer = await loop.create_connection(_Peer, *address)
        except (OSError, TimeoutError) as exc:
            raise NotConnectedError(f"{address[0]}:{address[1]}: {exc or 'timed out'}") from None
        return await self._exchange(address, peer, data)

    async def _exchange(self, address: tuple[str, int], peer: _Peer, data: bytes) -> Response:
        try:
            response = await peer.exchange(data, self.timeout)
        except TimeoutError:
            peer.close()
            raise self._no_answer(address) from None
        except BaseException:
            peer.close()
            raise
        self._kept(address, peer, response)
        return response

    def send_kept(self, address: tuple[str, int], data: bytes, done: Landed, raw: bool = False) -> bool:
        """:meth:`exchange` without a coroutine, on a kept connection only (the proxied path's common case): False,
        nothing sent, when none is idle; else ``done`` is called from the loop with the answer (with ``raw``, a
        plain one as its bytes, :class:`Raw`) or with the PeerUnreachableError (sent) that :meth:`exchange` would
        raise."""
        kept = self.idle.get(address)
        if kept and not kept[-1].closed and time.monotonic() - kept[-1].idle_since <= KEEP_SECONDS:
            peer = kept.pop()  # (the common case of idle_peer, inline)
        else:
            found = self.idle_peer(address)
            if found is None:
                return False
            peer = found

        def landed(got: Response | Raw | Exception) -> None:
            done(self.landed(address, peer, got))

        if raw:
            peer.send_raw(data, self.timeout, landed)
        else:
            peer.send(data, self.timeout, landed)
        return True

    def landed(
        self, address: tuple[str, int], peer: _Peer, got: Response | Raw | Exception
    ) -> Response | Raw | Exception:
        """What came of a request sent on ``peer``, a connection to ``address`` taken from the kept ones: the answer
        (the connection kept again when it may be), or, the connection closed, the error as :meth:`exchange` would
        raise it (PeerUnreachableError, sent)."""
        if isinstance(got, (Response, Raw)):
            self._kept(address, peer, got)
            return got
        peer.close()
        if isinstance(got, TimeoutError):
            return self._no_answer(address)
        if not isinstance(got, PeerUnreachableError):
            return PeerUnreachableError(f"{address[0]}:{address[1]}: {got}")
        return got

    def idle_peer(self, address: tuple[str, int]) -> _Peer | None:
        """A kept connection to ``address`` its peer has not closed and not idle too long, taken out of the idle
        ones; None when there is none."""
        kept = self.idle.get(address)
        while kept:
            peer = kept.pop()
            if not peer.closed and time.monotonic() - peer.idle_since <= KEEP_SECONDS:
                return peer
            peer.close()
        return None

    def _kept(self, address: tuple[str, int], peer: _Peer, response: Response | Raw) -> None:
        """``peer``, answered with ``response``, kept idle for the next request when it may be."""
        if response.keep:
            kept = self.idle.get(address)
            if kept is None:
                kept = self.idle[address] = []
            if len(kept) < IDLE_PER_PEER:
                peer.idle_since = time.monotonic()
                kept.append(peer)
                return
        peer.close()

    def _no_answer(self, address: tuple[str, int]) -> _NoAnswer:
        return _NoAnswer(f"{address[0]}:{address[1]}: no answer in {self.timeout} s")

    def close(self) -> None:
        for kept in self.idle.values():
            for peer in kept:
                peer.close()
        self.idle.clear()


_SPLICED = splice.Spliced


class _NoAnswer(PeerUnreachableError):
    """A request was sent and no answer came within the timeout."""
