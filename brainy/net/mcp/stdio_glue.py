"""``brainy mcp``: MCP over stdio, the thin IO glue around :mod:`brainy.net.mcp.stdio` and the server.

The process runs AS one principal: the key or ``bk1.`` token in ``$BRAINY_KEY``, read
from the environment and never from an argument (an argument is visible to every
process on the machine), checked by the same keys file, issuers file and revoked list
``brainy serve`` reads (:func:`brainy.net.serve.open_keys`) and the same gate, and
checked again on every message, so a key whose line is removed stops answering within
a second, as over HTTP (seed 000, "MCP"; seed 001, "Revocation").

Nothing but JSON-RPC goes to stdout (2025-06-18 "stdio"). The frames go to a private
copy of the standard output taken at start, and file descriptor 1 is then pointed at
stderr, so a stray ``print`` or a library's write lands in the log, never in the
protocol. Logs go to stderr.

One session per process: it begins with the process and ends at the end of the input
(or SIGTERM/SIGINT), when every answer owed has been written and the brain is closed.

Back-pressure: a client that pipelines writes faster than they commit must not grow this
process's memory without bound (each owed answer is a task holding its message). While
:data:`MAX_PENDING` answers are owed, stdin is read no further, so the pipe fills and the
client's writes wait; reading resumes once half of them are written.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from brainy.auth.keys import KeyTable
from brainy.auth.principal import Principal
from brainy.contract import refusals as R
from brainy.host.dispatch import Dispatcher, Outcome
from brainy.host.pool import Pool
from brainy.net.mcp.jsonrpc import (
    NO_REPLY,
    Message,
    ProtocolError,
    error_reply,
    parse_message,
    refusal_error,
    request_id,
)
from brainy.net.mcp.lifecycle import Input, Session
from brainy.net.mcp.server import McpServer, finish
from brainy.net.mcp.stdio import LineReceived, StdioFraming

log = logging.getLogger("brainy.mcp")

KEY_VARIABLE = "BRAINY_KEY"
READ_CHUNK = 1 << 16
MAX_PENDING = 64  # answers owed (writes waiting on their commit) before stdin is read no further


class StdioRefused(Exception):
    """``brainy mcp`` cannot start: the refusal, for the command to print to stderr."""

    def __init__(self, refusal: R.Refusal) -> None:
        super().__init__(refusal.message)
        self.refusal = refusal


def brain_name(path: Path) -> str:
    """The name the keys file knows a store by: its directory's name (``./brain`` is ``brain``)."""
    return path.resolve().name


class StdioServer:
    """One stdio session: feed it input bytes, and it writes whole answer lines through ``write``.

    The sans-IO parts are :class:`StdioFraming` and :class:`McpServer`; this class only
    orders them: lines in, one :meth:`McpServer.exchange` per message under the
    dispatcher's clock, answers out as soon as each is ready (a write's answer may
    follow a later read's: JSON-RPC answers carry their request's id).
    """

    def __init__(
        self, server: McpServer, authenticate: Callable[[], Principal], write: Callable[[bytes], None]
    ) -> None:
        self.server = server
        self.authenticate = authenticate
        self.write = write
        self.framing = StdioFraming()
        self.session = Session("stdio", ("", "", None))
        self.pending: set[asyncio.Task[None]] = set()
        # set while stdin may be read: cleared at MAX_PENDING answers owed, set again at half (the reader
        # thread waits on it before each read)
        self.room = threading.Event()
        self.room.set()

    def receive(self, data: bytes) -> None:
        for event in self.framing.receive_data(data):
            if isinstance(event, LineReceived):
                self._message(event.document)
            else:
                self.framing.send(error_reply(event.id, refusal_error(event.refusal)))
        self._flush()

    def _message(self, document: Any) -> None:
        try:
            message = parse_message(document)
        except ProtocolError as exc:
            self.framing.send(error_reply(request_id(document), exc.error()))
            return
        outcome = self.server.exchange(self.session, self.authenticate, message)
        if isinstance(outcome, Outcome):
            self._answer(outcome, message)
            return
        task = asyncio.get_running_loop().create_task(self._later(outcome, message))
        self.pending.add(task)
        task.add_done_callback(self._answered)
        if len(self.pending) >= MAX_PENDING:
            self.room.clear()

    def _answered(self, task: asyncio.Task[None]) -> None:
        self.pending.discard(task)
        if len(self.pending) <= MAX_PENDING // 2:
            self.room.set()

    async def _later(self, pending: Awaitable[Outcome], message: Message) -> None:
        self._answer(await pending, message)
        self._flush()

    def _answer(self, outcome: Outcome, message: Message) -> None:
        reply = finish(outcome, message)
        if reply is not NO_REPLY:
            self.framing.send(reply)

    def _flush(self) -> None:
        data = self.framing.data_to_send()
        if data:
            self.write(data)

    async def drain(self) -> None:
        """Wait for every answer still owed (a write's fsync), then end the session."""
        while self.pending:
            await asyncio.gather(*list(self.pending), return_exceptions=True)
        _, self.session.state = self.session.lookup(Input.CLOSE)


def _protocol_stdout() -> Callable[[bytes], None]:
    """Keep fd 1 for the protocol alone: frames go to a private copy; fd 1 (and sys.stdout) become stderr."""
    sys.stdout.flush()
    frames = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr

    def write(data: bytes) -> None:
        view = memoryview(data)
        while view:
            written = os.write(frames, view)
            view = view[written:]

    return write


def _reader(
    loop: asyncio.AbstractEventLoop, feed: Callable[[bytes | None], None], room: threading.Event, fd: int = 0
) -> None:
    """Read stdin (``fd``) in a thread (it may be a pipe, a file or a terminal) and hand each chunk to the loop;
    wait for ``room`` before each read (the session's back-pressure)."""
    try:
        while True:
            room.wait()
            chunk = os.read(fd, READ_CHUNK)
            loop.call_soon_threadsafe(feed, chunk or None)
            if not chunk:
                return
    except OSError as exc:
        log.error("stdin: %s", exc)
        loop.call_soon_threadsafe(feed, None)
    except RuntimeError:  # the loop closed (SIGTERM): nothing more to hand over
        return


def open_stdio(brain: Path, keys_path: str | None, environ: dict[str, str]) -> tuple[Pool, KeyTable, str]:
    """The pool, the keys and the bearer a ``brainy mcp`` runs with; StdioRefused when it cannot start."""
    from brainy.store.directory import read_identity

    key = environ.get(KEY_VARIABLE, "").strip()
    if not key:
        raise StdioRefused(
            R.UnauthenticatedError(
                f"${KEY_VARIABLE} holds no key: brainy mcp runs as the principal whose key or bk1. token is in it"
            )
        )
    read_identity(brain)  # StoreNotFoundError names `brainy init` for an absent store
    name = brain_name(brain)
    from brainy.net.serve import open_keys  # the keys file and the bk1 verifier, exactly as serve reads them

    keys = open_keys(keys_path, mint_if_missing=False)  # KeysFileError / TokenFileError: refused to start
    bearer = f"Bearer {key}"
    keys.authenticate(bearer)  # the same refusals as HTTP, before a single message is read
    return Pool({name: brain}), keys, bearer


def run(pool: Pool, keys: KeyTable, bearer: str) -> int:
    """Serve one session over stdin/stdout until the input ends or a signal; close the brain; 0."""
    write = _protocol_stdout()
    dispatcher = Dispatcher(pool, keys=keys)
    server = McpServer(dispatcher)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        stdio = StdioServer(server, lambda: dispatcher.credential({"authorization": bearer}), write)
        done = asyncio.Event()

        def feed(chunk: bytes | None) -> None:
            if chunk is None:
                done.set()
            elif not done.is_set():
                stdio.receive(chunk)

        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, done.set)
        threading.Thread(target=_reader, args=(loop, feed, stdio.room), name="brainy-mcp-stdin", daemon=True).start()
        log.info("MCP over stdio: serving %s", ", ".join(pool.known()))
        await done.wait()
        await stdio.drain()

    try:
        import uvloop

        uvloop.run(main())
    except ImportError:  # pragma: no cover - uvloop is a dependency
        asyncio.run(main())
    for answer in pool.close_all():
        log.info(
            "closed brain %s (lease released: %s, clean close recorded: %s)",
            answer["brain"],
            answer["leaseReleased"],
            answer["cleanCloseRecorded"],
        )
    return 0


def main(brain: str, keys_path: str | None) -> int:
    """``brainy mcp [--brain PATH] [--keys FILE]``: 0 after a session, 2 when it cannot start."""
    from brainy.auth.keys import KeysFileError
    from brainy.auth.tokens import TokenFileError

    logging.basicConfig(
        stream=sys.stderr, level=logging.INFO, format="%(asctime)s brainy %(levelname)s %(name)s: %(message)s"
    )
    try:
        pool, keys, bearer = open_stdio(Path(brain), keys_path, dict(os.environ))
    except (StdioRefused, R.Refusal) as exc:
        refusal = exc.refusal if isinstance(exc, StdioRefused) else exc
        print(f"brainy mcp: {refusal.name}: {refusal.message}", file=sys.stderr)
        return 2
    except (KeysFileError, TokenFileError) as exc:
        print(f"brainy mcp: refused to start: {exc}", file=sys.stderr)
        return 2
    return run(pool, keys, bearer)
