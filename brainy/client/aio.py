"""The asyncio client: :class:`AsyncClient` and :class:`AsyncBrain` have the blocking client's surface, each call
awaited (brainy/client/wire.py says what a call means; this moves its bytes on asyncio streams)."""

from __future__ import annotations

import asyncio
import os
import warnings
from collections.abc import AsyncIterator, Callable
from typing import Any
from urllib.parse import urlsplit

import orjson

from brainy import errors
from brainy.client import wire
from brainy.client.surface import BRAIN_DOORS, door_of, version_skew
from brainy.client.sync import DEFAULT_URL
from brainy.contract import doors as D


class _Connection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    async def exchange(self, data: bytes, body: bytes) -> wire.Response:
        self.writer.write(data + body)
        await self.writer.drain()
        parsed = wire.Reader()
        while not parsed.done:
            chunk = await self.reader.read(1 << 16)
            if not chunk:
                parsed.eof()
                break
            parsed.feed(chunk)
        return parsed.response

    def close(self) -> None:
        self.writer.close()


class AsyncClient:
    """:class:`brainy.client.Client`, for asyncio: ``async with AsyncClient(url, key) as client`` and ``await`` on
    every door (``await client.brain("notes").get(id)``); ``async for frame in brain.changes()``."""

    def __init__(
        self,
        url: str | None = None,
        key: str | None = None,
        *,
        timeout: float = 30.0,
        retries: int = 3,
        json: bool = False,
        pool: int = 4,
    ) -> None:
        self.url = (url or os.environ.get("BRAINY_URL") or DEFAULT_URL).rstrip("/")
        self.key = key if key is not None else os.environ.get("BRAINY_KEY")
        parts = urlsplit(self.url)
        if parts.scheme != "http" or not parts.hostname:
            raise ValueError(f"url {self.url!r}: an http://host:port URL (TLS is served on h3 only)")
        self._host, self._port, self._authority = parts.hostname, parts.port or 80, parts.netloc
        self.timeout, self.retries, self.msgpack, self._pool = timeout, retries, not json, pool
        self._idle: list[_Connection] = []
        self._checked: asyncio.Lock | None = None
        self.server_contract: dict[str, Any] | None = None

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
        door = door_of(name, self.server_contract)
        if brain is None and any(p.name == "brain" for p in door.path_params) and positional:
            brain, positional = str(positional[0]), positional[1:]  # a host door of one brain names it first
        document = dict(options) if options else None
        if len(positional) > len([p for p in door.path_params if p.name != "brain"]):
            *head, extra = positional
            positional, document = tuple(head), {**(extra or {}), **(document or {})}
        answers, offsets, at = [], [], 0
        for part in wire.split(door.name, document, self.msgpack):
            request = wire.request(door, brain, positional, part, self.msgpack)
            answers.append(wire.answer(await self._send(request, timeout)))
            offsets.append(at)
            at += len((part or {}).get("items", []))
        return wire.join(answers, offsets)

    async def _send(self, request: wire.Request, timeout: float | None, key: bool = True) -> wire.Response:
        timeout = self.timeout if timeout is None else timeout
        data = wire.head(request, self._authority, self.key if key else None, self.msgpack)
        attempt = 0
        while True:
            connection: _Connection | None = None
            sent = False
            try:
                async with asyncio.timeout(timeout):
                    connection = (
                        self._idle.pop()
                        if self._idle
                        else _Connection(*await asyncio.open_connection(self._host, self._port))
                    )
                    sent = True
                    response = await connection.exchange(data, request.body)
            except (OSError, ValueError, TimeoutError) as exc:
                if connection is not None:
                    connection.close()
                if attempt < self.retries and (request.safe or not sent) and not isinstance(exc, TimeoutError):
                    attempt += 1
                    await asyncio.sleep(min(2.0, 0.05 * 2**attempt))
                    continue
                what = "timed out" if isinstance(exc, TimeoutError) else f"failed: {exc}"
                raise errors.TransportError(
                    f"{request.method} {request.target} {what}", url=self.url, cause=exc
                ) from exc
            if response.keep and len(self._idle) < self._pool:
                self._idle.append(connection)
            else:
                connection.close()
            return response

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
        await self._check_version()
        last: tuple[int, int] | None = None
        attempt = 0
        while True:
            target = f"/v1/brains/{brain}/changes" + (f"?since={since}" if since is not None and last is None else "")
            extra = {} if last is None else {"Last-Event-ID": f"{last[0]}.{last[1]}"}
            request = wire.Request("changes", "GET", target, b"", None, True)
            data = wire.head(request, self._authority, self.key, False, extra).replace(
                b"Accept: application/json", b"Accept: text/event-stream"
            )
            try:
                reader, writer = await asyncio.open_connection(self._host, self._port)
            except OSError as exc:
                if attempt >= self.retries:
                    raise errors.TransportError(f"GET {target} failed: {exc}", url=self.url, cause=exc) from exc
                attempt += 1
                await asyncio.sleep(min(2.0, 0.05 * 2**attempt))
                continue
            try:
                writer.write(data)
                parsed = wire.Reader()
                parsed.events = []
                buffer = b""
                while True:
                    got = await reader.read(1 << 16)
                    if not got:
                        raise ConnectionError("the held stream's connection closed")
                    parsed.feed(got)
                    if parsed.response.status and parsed.response.status != 200:
                        while not parsed.done and (more := await reader.read(1 << 16)):
                            parsed.feed(more)
                        parsed.response.body = b"".join(parsed.events or []) + parsed.response.body
                        wire.answer(parsed.response)
                        raise ValueError(f"the held stream answered {parsed.response.status}")
                    buffer += b"".join(parsed.events)
                    parsed.events.clear()
                    complete, _, buffer = buffer.rpartition(b"\n\n")
                    for _, event, payload in wire.events(iter([complete + b"\n\n"] if complete else [])):
                        if event == "error":
                            raise errors.from_wire(orjson.loads(payload).get("error"))
                        if event != "change":
                            continue
                        frame = orjson.loads(payload)
                        spot = (frame["generation"], frame["index"])
                        attempt = 0
                        if last is not None and spot <= last:
                            continue
                        last = spot
                        yield frame
                    if parsed.done:
                        return
            except (OSError, ValueError):
                if attempt >= self.retries:
                    raise
                attempt += 1
                await asyncio.sleep(min(2.0, 0.05 * 2**attempt))
            finally:
                writer.close()

    async def close(self) -> None:
        while self._idle:
            self._idle.pop().close()

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
