"""The asyncio client: :class:`AsyncClient` and :class:`AsyncBrain` have the blocking client's surface, each call
awaited. Its calls go as the streams of one HTTP/2 connection, as many at once as the caller awaits, or over a
small pool of keep-alive HTTP/1.1 connections, whichever the server speaks (``h2conn.ProtocolChoice``). What a call
means is ``wire.py``'s and HTTP/2's streams are ``h2conn.py``'s; this moves their bytes on asyncio streams."""

from __future__ import annotations

import asyncio
import ssl
import warnings
from collections.abc import AsyncIterator, Callable
from typing import Any

from brainy.client import wire
from brainy.client.h2conn import (
    BodyReceived,
    ConnectionEndedError,
    Exchange,
    H2Event,
    H2Session,
    NotHttp2Error,
    ProtocolChoice,
)
from brainy.client.surface import BRAIN_DOORS, DEFAULT_URL, Endpoint, door_of, endpoint, version_skew
from brainy.contract import doors as D

__all__ = ["DEFAULT_URL", "AsyncBrain", "AsyncClient"]

_Streams = tuple[asyncio.StreamReader, asyncio.StreamWriter]


class _H1:
    """One keep-alive HTTP/1.1 connection: one call at a time."""

    def __init__(self, streams: _Streams, server: Endpoint) -> None:
        self.reader, self.writer = streams
        self.server = server

    async def exchange(self, request: wire.Request, key: str | None, accept: str) -> wire.Response:
        self.writer.write(wire.head(request, self.server.authority, key, accept) + request.body)
        await self.writer.drain()
        parsed = wire.Reader()
        while not parsed.done:
            chunk = await self.reader.read(1 << 16)
            if not chunk:
                parsed.eof()
                break
            parsed.feed(chunk)
        return parsed.response

    async def stream(self, request: wire.Request, key: str | None, extra: dict[str, str]) -> AsyncIterator[bytes]:
        """A held stream's body as it comes, until it ends; a refusal raises by name."""
        self.writer.write(wire.head(request, self.server.authority, key, wire.EVENT_STREAM, extra))
        parsed = wire.Reader(held=True)
        while not parsed.done:
            got = await self.reader.read(1 << 16)
            if not got:
                raise ConnectionError("the held stream's connection closed")
            parsed.feed(got)
            for chunk in parsed.take():
                yield chunk
        if parsed.response.status != 200:
            wire.held_refused(parsed.response)

    def stale(self) -> bool:
        """An idle connection the server has closed (or spoken on unasked): the loop has read it already."""
        return self.reader.at_eof() or self.reader.exception() is not None

    def close(self) -> None:
        self.writer.close()

    async def aclose(self) -> None:
        self.close()
        await _closed(self.writer)


async def _closed(writer: asyncio.StreamWriter) -> None:
    """Wait, briefly, for a closed connection to be gone: a TLS one says close_notify first, and a loop ended
    before that leaves its socket open."""
    try:
        async with asyncio.timeout(1.0):
            await writer.wait_closed()
    except (OSError, TimeoutError, ssl.SSLError):
        pass


class _H2:
    """One HTTP/2 connection: every call a stream, awaited on its own future; one task reads the connection and
    feeds the session, which completes the calls."""

    def __init__(self, streams: _Streams, server: Endpoint) -> None:
        self.reader, self.writer = streams
        self.session = H2Session(server.authority, server.scheme)
        loop = asyncio.get_running_loop()
        self._heard: asyncio.Future[None] = loop.create_future()
        self._waiting: dict[Exchange, asyncio.Future[None]] = {}
        self._held: dict[Exchange, asyncio.Queue[bytes | None]] = {}
        self._flush()
        self._task = loop.create_task(self._read())

    async def hear(self) -> None:
        """Wait for the server's first frame (:class:`NotHttp2Error` when it is not HTTP/2's SETTINGS;
        ``ConnectionEndedError`` when it closed without a byte)."""
        await asyncio.shield(self._heard)

    async def exchange(self, request: wire.Request, key: str | None, accept: str) -> wire.Response:
        exchange = self.session.send(request, wire.h2_fields(request, key, accept))
        done = self._waiting[exchange] = asyncio.get_running_loop().create_future()
        self._flush()
        try:
            await self.writer.drain()
            await done
        except asyncio.CancelledError:  # the call's timeout: its stream is reset, the connection carries on
            self.session.cancel(exchange)
            self._flush()
            raise
        finally:
            del self._waiting[exchange]
        if exchange.error is not None:
            raise exchange.error
        return exchange.response

    async def stream(self, request: wire.Request, key: str | None, extra: dict[str, str]) -> AsyncIterator[bytes]:
        """A held stream's body as it comes, until it ends; a refusal raises by name."""
        fields = wire.h2_fields(request, key, wire.EVENT_STREAM, extra)
        exchange = self.session.send(request, fields, held=True)
        chunks = self._held[exchange] = asyncio.Queue()
        self._flush()
        try:
            while (chunk := await chunks.get()) is not None:
                yield chunk
        finally:
            del self._held[exchange]
            self.session.cancel(exchange)
        if exchange.error is not None:
            raise exchange.error
        if exchange.response.status != 200:
            wire.held_refused(exchange.response)

    def close(self) -> None:
        if not self.session.ended:
            self.session.close()
            self._flush()
        self.writer.close()
        self._task.cancel()

    async def aclose(self) -> None:
        self.close()
        await _closed(self.writer)

    def _flush(self) -> None:
        data = self.session.data_to_send()
        if data and not self.writer.is_closing():
            self.writer.write(data)

    async def _read(self) -> None:
        """Read until the connection ends, handing each event to the call it completes."""
        session = self.session
        try:
            while not session.ended:
                try:
                    data = await self.reader.read(1 << 20)
                except OSError as exc:
                    self._hand(session.connection_lost(exc))
                    break
                self._hand(session.connection_lost() if not data else session.receive_data(data))
                if session.heard and not self._heard.done():
                    self._heard.set_result(None)
                self._flush()
                if not session.accepting and session.idle:
                    break  # a GOAWAY answered all it kept: the client's next call opens another connection
        except NotHttp2Error as exc:  # every call on it fails so, and the connection is of no use
            self._heard.set_exception(exc)
            self._hand(session.connection_lost(exc))
        finally:
            if not self._heard.done():
                self._heard.set_exception(ConnectionEndedError("the server closed the connection on the preface"))
            self._heard.exception()  # retrieved: a probe that nobody awaited any more is not an error to log
            self._hand(session.connection_lost())
            self.writer.close()

    def _hand(self, events: list[H2Event]) -> None:
        for event in events:
            exchange = event.exchange
            if type(event) is BodyReceived:
                self._held[exchange].put_nowait(event.data)
            elif exchange.done:
                done = self._waiting.get(exchange)
                if done is not None and not done.done():
                    done.set_result(None)
                held = self._held.get(exchange)
                if held is not None:
                    held.put_nowait(None)


class AsyncClient:
    """:class:`brainy.client.Client`, for asyncio: ``async with AsyncClient(url, key) as client`` and ``await`` on
    every door (``await client.brain("notes").get(id)``); ``async for frame in brain.changes()``. Concurrent calls
    share one HTTP/2 connection's streams where the server speaks HTTP/2."""

    def __init__(
        self,
        url: str | None = None,
        key: str | None = None,
        *,
        timeout: float = 30.0,
        retries: int = 3,
        json: bool = False,
        pool: int = 4,
        http2: bool | None = None,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self._server = endpoint(url, key)
        self.url, self.key = self._server.url, self._server.key
        self.timeout, self.retries, self.msgpack, self._pool = timeout, retries, not json, pool
        self._choice = ProtocolChoice(http2)
        self._tls = self._server.tls_context(tls, self._choice.alpn)
        self._idle: list[_H1] = []
        self._h2: _H2 | None = None  # the one HTTP/2 connection, once the server is known to speak it
        self._opening: asyncio.Lock | None = None  # made in the loop that first needs it
        self._checked: asyncio.Lock | None = None
        self.server_contract: dict[str, Any] | None = None

    @property
    def http_version(self) -> str | None:
        """``"h2"`` or ``"h1"`` once the server has been reached (None before)."""
        return self._choice.spoken

    async def call(self, door: str, *positional: Any, timeout: float | None = None, **options: Any) -> Any:
        return await self._call(None, door, positional, options, timeout)

    def brain(self, name: str) -> AsyncBrain:
        return AsyncBrain(self, name)

    async def health(self) -> Any:
        return wire.answer(await self._send(wire.Request("health", "GET", "/v1/health", b"", None, True), None))

    async def brains(self) -> list[dict[str, Any]]:
        request = wire.Request("brains", "GET", "/v1/brains", b"", None, True)
        return list(wire.answer(await self._send(request, None)).get("brains", []))

    async def contract(self) -> Any:
        request = wire.Request("contract", "GET", "/contract.json", b"", None, True)
        return wire.answer(await self._send(request, None, key=False))

    async def _call(
        self, brain: str | None, name: str, positional: tuple[Any, ...], options: dict[str, Any], timeout: float | None
    ) -> Any:
        await self._check_version()
        plan = wire.plan(door_of(name, self.server_contract), brain, positional, options, self.msgpack)
        return plan.join([wire.answer(await self._send(request, timeout)) for request in plan.requests])

    async def _send(self, request: wire.Request, timeout: float | None, key: bool = True) -> wire.Response:
        timeout = self.timeout if timeout is None else timeout
        accept = wire.accepts(self.msgpack)
        attempt = 0
        while True:
            connection: _H1 | _H2 | None = None
            sent = False
            try:
                async with asyncio.timeout(timeout):
                    connection = await self._take()
                    sent = True
                    response = await connection.exchange(request, self.key if key else None, accept)
            except (OSError, ValueError, TimeoutError) as exc:
                if isinstance(connection, _H1):
                    connection.close()
                if wire.again(request, exc, sent, attempt, self.retries):
                    attempt += 1
                    await asyncio.sleep(wire.backoff(attempt))
                    continue
                raise wire.failure(request, exc, self.url) from exc
            if isinstance(connection, _H1):
                if response.keep and len(self._idle) < self._pool:
                    self._idle.append(connection)
                else:
                    connection.close()
            return response

    async def _take(self) -> _H1 | _H2:
        """The connection for a call: the HTTP/2 one (opened when there is none that takes calls), else an idle
        HTTP/1.1 one that is still open, else a new one."""
        if self._choice.spoken != "h1":
            if self._h2 is not None and self._h2.session.accepting:
                return self._h2
            if self._opening is None:
                self._opening = asyncio.Lock()
            async with self._opening:  # concurrent first calls wait for one connection, not one each
                if self._h2 is not None and self._h2.session.accepting:
                    return self._h2
                opened = await self._open()
                if isinstance(opened, _H2):
                    old, self._h2 = self._h2, opened
                    if old is not None and old.session.idle:
                        old.close()  # one with calls still open ends when its reader sees them answered
                return opened
        while self._idle:
            idle = self._idle.pop()
            if not idle.stale():
                return idle
            idle.close()
        return await self._open()

    async def _open(self) -> _H1 | _H2:
        """A new connection in the protocol the server speaks, learning it on the first (ProtocolChoice)."""
        server, choice = self._server, self._choice
        streams = await asyncio.open_connection(
            server.host, server.port, ssl=self._tls, server_hostname=server.host if self._tls else None
        )
        if self._tls is not None:
            selected = streams[1].get_extra_info("ssl_object").selected_alpn_protocol()
            spoken = choice.chosen_by_alpn(selected)
        else:
            spoken = choice.spoken
        if spoken == "h1":
            return _H1(streams, server)
        connection = _H2(streams, server)
        if not choice.probing:
            return connection
        try:
            await connection.hear()
        except (NotHttp2Error, ConnectionEndedError):
            connection.close()
            choice.heard(False)
            return await self._open()
        except BaseException:
            connection.close()
            raise
        choice.heard(True)
        return connection

    async def _check_version(self) -> None:
        if self.server_contract is not None:
            return
        if self._checked is None:
            self._checked = asyncio.Lock()
        async with self._checked:
            if self.server_contract is None:
                self.server_contract = await self.contract()
                skew = version_skew(self.server_contract)
                if skew:
                    warnings.warn(skew, stacklevel=4)

    async def _changes(self, brain: str, since: int | str | None) -> AsyncIterator[dict[str, Any]]:
        """The held change feed (:meth:`brainy.client.Client.changes`'s rule, and its own connection: a cut one
        costs the feed alone)."""
        await self._check_version()
        feed = wire.Feed(brain, since)
        attempt = 0
        while True:
            request, extra = feed.request()
            connection: _H1 | _H2 | None = None
            try:
                async with asyncio.timeout(self.timeout):
                    connection = await self._open()
                async for chunk in connection.stream(request, self.key, extra):
                    frames = feed.receive(chunk)
                    if frames:
                        attempt = 0  # the feed moved: a drop after this starts its retries afresh
                    for frame in frames:
                        yield frame
            except (OSError, ValueError, TimeoutError) as exc:
                if attempt >= self.retries:
                    raise wire.failure(request, exc, self.url) from exc
                attempt += 1
                await asyncio.sleep(wire.backoff(attempt))
            finally:
                if connection is not None:
                    await connection.aclose()

    async def close(self) -> None:
        shared, self._h2 = self._h2, None
        if shared is not None:
            await shared.aclose()
        while self._idle:
            await self._idle.pop().aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


class AsyncBrain:
    """One brain of a server, each door awaited: ``await b.add({...})``, ``await b.call("memory.recall", {...})``."""

    def __init__(self, client: AsyncClient, name: str) -> None:
        self.client = client
        self.name = name

    async def call(self, door: str, *positional: Any, timeout: float | None = None, **options: Any) -> Any:
        return await self.client._call(self.name, door, positional, options, timeout)

    def changes(self, since: int | str | None = None) -> AsyncIterator[dict[str, Any]]:
        return self.client._changes(self.name, since)

    def __getattr__(self, name: str) -> Callable[..., Any]:
        if name in BRAIN_DOORS:

            async def door(*positional: Any, **options: Any) -> Any:
                return await self.call(name, *positional, **options)

            door.__name__ = door.__qualname__ = name
            door.__doc__ = D.BY_NAME[name].summary
            return door
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
