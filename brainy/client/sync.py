"""The blocking client: a small pool of keep-alive HTTP/1.1 connections, a timeout on every call, retries for
what is safe to send twice (brainy/client/wire.py says what a call means)."""

from __future__ import annotations

import os
import queue
import socket
import threading
import time
import warnings
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import orjson

from brainy import errors
from brainy.client import wire
from brainy.client.surface import DoorMethods, door_of, version_skew

DEFAULT_URL = "http://127.0.0.1:8300"


class _Connection:
    def __init__(self, host: str, port: int, timeout: float) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def exchange(self, data: bytes, body: bytes, timeout: float) -> wire.Response:
        deadline = time.monotonic() + timeout
        self.sock.settimeout(timeout)
        self.sock.sendall(data + body if len(body) < 65536 else data)
        if len(body) >= 65536:
            self.sock.sendall(body)
        reader = wire.Reader()
        while not reader.done:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("the call's timeout passed")
            self.sock.settimeout(left)
            chunk = self.sock.recv(1 << 16)
            if not chunk:
                reader.eof()
                break
            reader.feed(chunk)
        return reader.response

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass


class Client(DoorMethods):
    """A brainy server, called from blocking code.

    ``url`` and ``key`` default to ``$BRAINY_URL`` (else ``http://127.0.0.1:8300``) and ``$BRAINY_KEY``.
    ``timeout`` (seconds) bounds every call, ``retries`` how often a call safe to repeat (a read; any call that
    never reached the server) is tried again after a transport failure, with backoff. Answers come as
    MessagePack (``json=True``: JSON). ``client.brain(name)`` has the embedded ``Brain``'s door surface; host
    doors are called on the client (``client.call("host.provision", "notes")``)."""

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
        self._host, self._port = parts.hostname, parts.port or 80
        self._authority = parts.netloc
        self.timeout, self.retries, self.msgpack = timeout, retries, not json
        self._idle: queue.LifoQueue[_Connection] = queue.LifoQueue(pool)
        self._checked = False
        self._lock = threading.Lock()
        self.server_contract: dict[str, Any] | None = None

    # -- the door surface ------------------------------------------------------------------------

    def call(self, door: str, *positional: Any, timeout: float | None = None, **options: Any) -> Any:
        """A host door or a server door by its contract name; a brain's door goes through :meth:`brain`."""
        return self._call(None, door, positional, options, timeout)

    def brain(self, name: str) -> RemoteBrain:
        return RemoteBrain(self, name)

    def health(self) -> Any:
        return self._get("/v1/health")

    def brains(self) -> list[dict[str, Any]]:
        """The brains this key reaches, each ``{name, resident, writer}``."""
        return list(self._get("/v1/brains").get("brains", []))

    def contract(self) -> Any:
        return self._get("/contract.json", key=False)

    # -- the call ----------------------------------------------------------------------------------

    def _call(
        self, brain: str | None, name: str, positional: tuple[Any, ...], options: dict[str, Any], timeout: float | None
    ) -> Any:
        self._check_version()
        door = door_of(name, self.server_contract)
        if brain is None and any(p.name == "brain" for p in door.path_params) and positional:
            brain, positional = str(positional[0]), positional[1:]  # a host door of one brain names it first
        document = dict(options) if options else None
        if len(positional) > len([p for p in door.path_params if p.name != "brain"]):
            *positional_l, extra = positional
            positional = tuple(positional_l)
            document = {**(extra or {}), **(document or {})}
        answers, offsets, at = [], [], 0
        for part in wire.split(door.name, document, self.msgpack):
            request = wire.request(door, brain, positional, part, self.msgpack)
            answers.append(wire.answer(self._send(request, timeout)))
            offsets.append(at)
            at += len((part or {}).get("items", []))
        return wire.join(answers, offsets)

    def _get(self, target: str, key: bool = True) -> Any:
        request = wire.Request(target, "GET", target, b"", None, True)
        return wire.answer(self._send(request, None, key))

    def _send(self, request: wire.Request, timeout: float | None, key: bool = True) -> wire.Response:
        timeout = self.timeout if timeout is None else timeout
        data = wire.head(request, self._authority, self.key if key else None, self.msgpack)
        attempt = 0
        while True:
            sent = False
            connection: _Connection | None = None
            try:
                connection = self._take(timeout)
                sent = True
                response = connection.exchange(data, request.body, timeout)
            except (OSError, ValueError) as exc:
                if connection is not None:
                    connection.close()
                if attempt < self.retries and (request.safe or not sent) and not isinstance(exc, TimeoutError):
                    attempt += 1
                    time.sleep(min(2.0, 0.05 * 2**attempt))
                    continue
                what = "timed out" if isinstance(exc, TimeoutError) else f"failed: {exc}"
                raise errors.TransportError(
                    f"{request.method} {request.target} {what}", url=self.url, cause=exc
                ) from exc
            if response.keep:
                self._give(connection)
            else:
                connection.close()
            return response

    def _take(self, timeout: float) -> _Connection:
        try:
            return self._idle.get_nowait()
        except queue.Empty:
            return _Connection(self._host, self._port, timeout)

    def _give(self, connection: _Connection) -> None:
        try:
            self._idle.put_nowait(connection)
        except queue.Full:
            connection.close()

    def _check_version(self) -> None:
        """At the first call: read the server's contract, and warn once when its version is not this client's."""
        if self._checked:
            return
        with self._lock:
            if self._checked:
                return
            self.server_contract = self.contract()
            self._checked = True
        skew = version_skew(self.server_contract)
        if skew:
            warnings.warn(skew, stacklevel=4)

    # -- the held change feed ---------------------------------------------------------------------

    def _changes(self, brain: str, since: int | str | None, timeout: float | None) -> Iterator[dict[str, Any]]:
        """Each change frame after ``since``, as the held stream sends them, resuming at a commit boundary when the
        connection drops; ends when the iterator is closed."""
        self._check_version()
        last: tuple[int, int] | None = None
        attempt = 0
        while True:
            target = f"/v1/brains/{brain}/changes" + (f"?since={since}" if since is not None and last is None else "")
            extra = {"Accept-Encoding": "identity"}
            if last is not None:
                extra["Last-Event-ID"] = f"{last[0]}.{last[1]}"
            request = wire.Request("changes", "GET", target, b"", None, True)
            data = wire.head(request, self._authority, self.key, False, extra).replace(
                b"Accept: application/json", b"Accept: text/event-stream"
            )
            try:
                connection = _Connection(self._host, self._port, self.timeout)
            except OSError as exc:
                if attempt >= self.retries:
                    raise errors.TransportError(f"GET {target} failed: {exc}", url=self.url, cause=exc) from exc
                attempt += 1
                time.sleep(min(2.0, 0.05 * 2**attempt))
                continue
            try:
                for frame in _stream(connection, data, self.timeout):
                    attempt = 0
                    spot = (frame["generation"], frame["index"])
                    if last is not None and spot <= last:
                        continue  # the commit again, from its start (the resume rule): already handed out
                    last = spot
                    yield frame
            except (OSError, ValueError):
                if attempt >= self.retries:
                    raise
                attempt += 1
                time.sleep(min(2.0, 0.05 * 2**attempt))
            finally:
                connection.close()

    # -- closing -----------------------------------------------------------------------------------

    def close(self) -> None:
        while True:
            try:
                self._idle.get_nowait().close()
            except queue.Empty:
                return

    def __del__(self) -> None:  # a client dropped without close(): its idle connections go with it
        try:
            self.close()
        except Exception:  # noqa: S110  (at interpreter exit the queue may be gone already)
            pass

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _stream(connection: _Connection, data: bytes, timeout: float) -> Iterator[dict[str, Any]]:
    """The change frames of one held stream's connection; a refusal before or inside it raises by name."""
    sock = connection.sock
    sock.settimeout(None)
    sock.sendall(data)
    reader = wire.Reader()
    reader.events = []
    chunks: list[bytes] = reader.events

    def received() -> Iterator[bytes]:
        while True:
            while chunks:
                yield chunks.pop(0)
            if reader.done:
                return
            got = sock.recv(1 << 16)
            if not got:
                raise ConnectionError("the held stream's connection closed")
            reader.feed(got)
            if reader.response.status and reader.response.status != 200:
                reader.events = None  # a refusal's body: read it whole
                while not reader.done:
                    more = sock.recv(1 << 16)
                    if not more:
                        break
                    reader.feed(more)
                reader.response.body = b"".join(chunks) + reader.response.body
                wire.answer(reader.response)
                raise ValueError(f"the held stream answered {reader.response.status}")

    for _, event, payload in wire.events(received()):
        if event == "change":
            yield orjson.loads(payload)
        elif event == "error":
            raise errors.from_wire(orjson.loads(payload).get("error"))


class RemoteBrain(DoorMethods):
    """One brain of a server, with the embedded ``Brain``'s door surface: ``b.call(door, *positional, **options)``
    and each door by its bare name (``b.add({...})``, ``b.get(id)``, ``b.find({...})``)."""

    def __init__(self, client: Client, name: str) -> None:
        self.client = client
        self.name = name

    def call(self, door: str, *positional: Any, timeout: float | None = None, **options: Any) -> Any:
        return self.client._call(self.name, door, positional, options, timeout)

    def changes(self, since: int | str | None = None, *, page: dict[str, Any] | None = None) -> Any:
        """The held change feed as an iterator of change frames (resuming by itself); ``page`` (the door's own
        arguments, e.g. ``{"since": 0, "limit": 100}``) calls the ``changes`` door for one page instead."""
        if page is not None:
            return self.call("changes", page)
        return self.client._changes(self.name, since, None)
