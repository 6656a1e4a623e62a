"""The blocking client: its calls over one HTTP/2 connection whose streams every thread shares, or a small pool of
keep-alive HTTP/1.1 connections, whichever the server speaks (``h2conn.ProtocolChoice``); a timeout on every call,
retries for what is safe to send twice. What a call means is ``wire.py``'s and HTTP/2's streams are
``h2conn.py``'s; this moves their bytes on sockets."""

from __future__ import annotations

import math
import queue
import select
import socket
import ssl
import threading
import time
import warnings
from collections.abc import Iterator
from typing import Any

from brainy.client import wire
from brainy.client.h2conn import (
    BodyReceived,
    ConnectionEndedError,
    H2Session,
    NotHttp2Error,
    ProtocolChoice,
    ResponseEnded,
)
from brainy.client.surface import DEFAULT_URL, DoorMethods, Endpoint, door_of, endpoint, version_skew

__all__ = ["DEFAULT_URL", "Client", "RemoteBrain"]


def _connect(server: Endpoint, context: ssl.SSLContext | None, timeout: float) -> socket.socket:
    sock = socket.create_connection((server.host, server.port), timeout=timeout)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    if context is None:
        return sock
    try:
        return context.wrap_socket(sock, server_hostname=server.host)
    except BaseException:
        sock.close()
        raise


def _readable(sock: socket.socket, seconds: float | None) -> bool:
    """Whether ``sock`` has bytes to read within ``seconds`` (None: however long it takes)."""
    if isinstance(sock, ssl.SSLSocket) and sock.pending():
        return True  # a TLS record already decrypted: the socket itself may have nothing more
    if hasattr(select, "poll"):
        poller = select.poll()
        poller.register(sock, select.POLLIN)
        return bool(poller.poll(None if seconds is None else math.ceil(max(0.0, seconds) * 1000)))
    return bool(select.select([sock], [], [], seconds)[0])


def _left(deadline: float) -> float:
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError("the call's timeout passed")
    return left


class _H1:
    """One keep-alive HTTP/1.1 connection: one call at a time."""

    def __init__(self, sock: socket.socket, server: Endpoint) -> None:
        self.sock = sock
        self.server = server

    def exchange(self, request: wire.Request, key: str | None, accept: str, deadline: float) -> wire.Response:
        data = wire.head(request, self.server.authority, key, accept)
        self.sock.settimeout(_left(deadline))
        if len(request.body) < 65536:
            self.sock.sendall(data + request.body)
        else:
            self.sock.sendall(data)
            self.sock.sendall(request.body)
        reader = wire.Reader()
        while not reader.done:
            self.sock.settimeout(_left(deadline))
            chunk = self.sock.recv(1 << 16)
            if not chunk:
                reader.eof()
                break
            reader.feed(chunk)
        return reader.response

    def stream(self, request: wire.Request, key: str | None, extra: dict[str, str]) -> Iterator[bytes]:
        """A held stream's body as it comes, until it ends; a refusal raises by name."""
        self.sock.settimeout(None)
        self.sock.sendall(wire.head(request, self.server.authority, key, wire.EVENT_STREAM, extra))
        reader = wire.Reader(held=True)
        while not reader.done:
            got = self.sock.recv(1 << 16)
            if not got:
                raise ConnectionError("the held stream's connection closed")
            reader.feed(got)
            yield from reader.take()
        if reader.response.status != 200:
            wire.held_refused(reader.response)

    def stale(self) -> bool:
        """An idle connection the server has closed (or spoken on unasked): reading says so before a call is
        sent on it, so a write is not lost to a connection that was already gone."""
        try:
            if not _readable(self.sock, 0):
                return False
            self.sock.settimeout(0)
            self.sock.recv(1)  # the close (b""), or bytes no call asked for: either way, not for a call
            return True
        except (BlockingIOError, ssl.SSLWantReadError):
            return False  # TLS's own records (a session ticket), no data: still good
        except (OSError, ValueError):
            return True

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass


class _H2:
    """One HTTP/2 connection, every thread's calls as its streams. A thread frames its call and writes it, then
    waits; one waiting thread at a time reads and feeds what arrives to the session, which completes any thread's
    call, then wakes them all. Every use of the socket holds the lock (a TLS socket is not to be read and written
    at once); the wait for bytes to read does not."""

    def __init__(self, sock: socket.socket, server: Endpoint) -> None:
        self.sock = sock
        self.session = H2Session(server.authority, server.scheme)
        self._lock = threading.Condition()
        self._reading = False

    def hear(self, deadline: float) -> None:
        """Write the preface and wait for the server's first frame (:class:`NotHttp2Error` when it is not
        HTTP/2's SETTINGS; ``ConnectionEndedError`` when it closed without a byte)."""
        with self._lock:
            self._flush(deadline)
            while not self.session.heard:
                self._read(deadline)
                if self.session.ended:
                    raise ConnectionEndedError("the server closed the connection on the HTTP/2 preface")

    def exchange(self, request: wire.Request, key: str | None, accept: str, deadline: float) -> wire.Response:
        with self._lock:
            exchange = self.session.send(request, wire.h2_fields(request, key, accept))
            try:
                self._flush(deadline)
                while not exchange.done:
                    if self._reading:
                        self._lock.wait(_left(deadline))
                    else:
                        self._read(deadline)
            except TimeoutError:
                self.session.cancel(exchange)
                self._flush(time.monotonic() + 1.0, quiet=True)
                raise
            if not self.session.accepting and self.session.idle:
                self._shut()  # its last call, after a GOAWAY: the client's next call opened another
        if exchange.error is not None:
            raise exchange.error
        return exchange.response

    def stream(self, request: wire.Request, key: str | None, extra: dict[str, str]) -> Iterator[bytes]:
        """A held stream's body as it comes (this connection carries nothing else); a refusal raises by name."""
        deadline = float("inf")
        with self._lock:
            exchange = self.session.send(request, wire.h2_fields(request, key, wire.EVENT_STREAM, extra), held=True)
            self._flush(deadline)
        while True:
            with self._lock:
                events = self._read(deadline)
            for event in events:
                if type(event) is BodyReceived:
                    yield event.data
                elif type(event) is ResponseEnded and exchange.response.status != 200:
                    wire.held_refused(exchange.response)
            if exchange.error is not None:
                raise exchange.error
            if exchange.done:
                return

    def usable(self) -> bool:
        """The connection takes new calls: what has arrived while it was idle (a GOAWAY, the close) is read
        first."""
        with self._lock:
            if not self._reading and not self.session.ended:
                try:
                    if _readable(self.sock, 0):
                        self._read(time.monotonic() + 1.0)
                except (OSError, ValueError):
                    self.session.connection_lost()
            return self.session.accepting

    def close(self) -> None:
        with self._lock:
            self._shut()

    def _shut(self) -> None:
        if not self.session.ended:
            self.session.close()
            self._flush(time.monotonic() + 1.0, quiet=True)
        try:
            self.sock.close()
        except OSError:
            pass

    # -- the socket, lock held --------------------------------------------------------------------------

    def _flush(self, deadline: float, quiet: bool = False) -> None:
        data = self.session.data_to_send()
        if not data:
            return
        try:
            self.sock.settimeout(max(0.001, deadline - time.monotonic()) if deadline != float("inf") else None)
            self.sock.sendall(data)
        except OSError as exc:
            # a frame written in part leaves the connection unusable: every call on it fails, and goes again if
            # it may (wire.again)
            self.session.connection_lost(exc)
            if not quiet:
                raise

    def _read(self, deadline: float) -> list[Any]:
        """Wait (lock released) for bytes, read them, feed them to the session; the session's events."""
        self._reading = True
        try:
            self._lock.release()
            try:
                ready = _readable(self.sock, None if deadline == float("inf") else _left(deadline))
            finally:
                self._lock.acquire()
            if not ready:
                raise TimeoutError("the call's timeout passed")
            try:
                self.sock.settimeout(0)  # it is readable: take what is there, never wait under the lock
                data = self.sock.recv(1 << 20)
            except (BlockingIOError, ssl.SSLWantReadError):
                return []  # a TLS record not whole yet, or one that carried no data
            except OSError as exc:
                return self.session.connection_lost(exc)
            if not data:
                return self.session.connection_lost()
            try:
                events = self.session.receive_data(data)
            except NotHttp2Error as exc:  # every call on it fails so, and the connection is of no use
                self.session.connection_lost(exc)
                self.sock.close()
                raise
            self._flush(deadline if deadline != float("inf") else time.monotonic() + 30.0, quiet=True)
            if self.session.ended:
                self.sock.close()
            return events
        finally:
            self._reading = False
            self._lock.notify_all()


class Client(DoorMethods):
    """A brainy server, called from blocking code.

    ``url`` and ``key`` default to ``$BRAINY_URL`` (else ``http://127.0.0.1:8300``) and ``$BRAINY_KEY``.
    ``timeout`` (seconds) bounds every call, ``retries`` how often a call safe to repeat (a read; any call that
    never reached the server) is tried again after a transport failure, with backoff. Answers come as
    MessagePack (``json=True``: JSON). ``http2``: None speaks HTTP/2 where the server offers it, True only
    HTTP/2, False only HTTP/1.1 (docs/client.md, "Connect"); ``tls``: the context of an ``https`` URL (default:
    the system's trust). ``pool``: the HTTP/1.1 connections kept idle. ``client.brain(name)`` has the embedded
    ``Brain``'s door surface; host doors are called on the client (``client.call("host.provision", "notes")``)."""

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
        self.timeout, self.retries, self.msgpack = timeout, retries, not json
        self._choice = ProtocolChoice(http2)
        self._tls = self._server.tls_context(tls, self._choice.alpn)
        self._idle: queue.LifoQueue[_H1] = queue.LifoQueue(pool)
        self._h2: _H2 | None = None  # the one HTTP/2 connection, once the server is known to speak it
        self._opening = threading.Lock()
        self._checked = False
        self._lock = threading.Lock()
        self.server_contract: dict[str, Any] | None = None

    @property
    def http_version(self) -> str | None:
        """``"h2"`` or ``"h1"`` once the server has been reached (None before)."""
        return self._choice.spoken

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
        plan = wire.plan(door_of(name, self.server_contract), brain, positional, options, self.msgpack)
        return plan.join([wire.answer(self._send(request, timeout)) for request in plan.requests])

    def _get(self, target: str, key: bool = True) -> Any:
        request = wire.Request(target, "GET", target, b"", None, True)
        return wire.answer(self._send(request, None, key))

    def _send(self, request: wire.Request, timeout: float | None, key: bool = True) -> wire.Response:
        timeout = self.timeout if timeout is None else timeout
        accept = wire.accepts(self.msgpack)
        attempt = 0
        while True:
            deadline = time.monotonic() + timeout
            sent = False
            connection: _H1 | _H2 | None = None
            try:
                connection = self._take(deadline)
                sent = True
                response = connection.exchange(request, self.key if key else None, accept, deadline)
            except (OSError, ValueError) as exc:
                if isinstance(connection, _H1):
                    connection.close()
                if wire.again(request, exc, sent, attempt, self.retries):
                    attempt += 1
                    time.sleep(wire.backoff(attempt))
                    continue
                raise wire.failure(request, exc, self.url) from exc
            if isinstance(connection, _H1):
                self._give(connection, response.keep)
            return response

    def _take(self, deadline: float) -> _H1 | _H2:
        """The connection for a call: the HTTP/2 one (opened when there is none that takes calls), else an idle
        HTTP/1.1 one that is still open, else a new one."""
        if self._choice.spoken != "h1":
            shared = self._h2
            if shared is not None and shared.usable():
                return shared
            with self._opening:
                if self._h2 is not shared and self._h2 is not None and self._h2.usable():
                    return self._h2  # another thread opened it meanwhile
                opened = self._open(deadline)
                if isinstance(opened, _H2):
                    old, self._h2 = self._h2, opened
                    if old is not None and old.session.idle:
                        old.close()  # one with calls still open is shut by the last of them
                return opened
        while True:
            try:
                idle = self._idle.get_nowait()
            except queue.Empty:
                break
            if not idle.stale():
                return idle
            idle.close()
        opened = self._open(deadline)
        if isinstance(opened, _H2):  # an https server's ALPN may choose either on any connection
            self._h2 = opened
        return opened

    def _open(self, deadline: float) -> _H1 | _H2:
        """A new connection in the protocol the server speaks, learning it on the first (ProtocolChoice)."""
        sock = _connect(self._server, self._tls, _left(deadline))
        choice = self._choice
        spoken = choice.chosen_by_alpn(sock.selected_alpn_protocol()) if self._tls is not None else choice.spoken
        if spoken == "h1":
            return _H1(sock, self._server)
        connection = _H2(sock, self._server)
        if not choice.probing:
            return connection
        try:
            connection.hear(deadline)
        except (NotHttp2Error, ConnectionEndedError):
            connection.close()
            choice.heard(False)
            return _H1(_connect(self._server, self._tls, _left(deadline)), self._server)
        except BaseException:  # the call's timeout (the server accepted, and says nothing): nothing learnt
            connection.close()
            raise
        choice.heard(True)
        return connection

    def _give(self, connection: _H1, keep: bool) -> None:
        if not keep:
            connection.close()
            return
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

    def _changes(self, brain: str, since: int | str | None) -> Iterator[dict[str, Any]]:
        """Each change frame after ``since``, as the held stream sends them, resuming at a commit boundary when the
        connection drops or the stream ends; ends when the iterator is closed. The feed has a connection of its
        own, in the protocol the client speaks: it is read for as long as the iterator lives, and on the shared
        HTTP/2 connection it would hold the other calls' reads behind its own."""
        self._check_version()
        feed = wire.Feed(brain, since)
        attempt = 0
        while True:
            request, extra = feed.request()
            connection: _H1 | _H2 | None = None
            try:
                connection = self._open(time.monotonic() + self.timeout)
                for chunk in connection.stream(request, self.key, extra):
                    frames = feed.receive(chunk)
                    if frames:
                        attempt = 0  # the feed moved: a drop after this starts its retries afresh
                    yield from frames
            except (OSError, ValueError) as exc:
                if attempt >= self.retries:
                    raise wire.failure(request, exc, self.url) from exc
                attempt += 1
                time.sleep(wire.backoff(attempt))
            finally:
                if connection is not None:
                    connection.close()

    # -- closing -----------------------------------------------------------------------------------

    def close(self) -> None:
        shared, self._h2 = self._h2, None
        if shared is not None:
            shared.close()
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
        return self.client._changes(self.name, since)
