"""A real ``brainy serve`` in its own process, on a free loopback port, for the wire tests.

:func:`start_server` makes a fresh store (``brainy.engine.init_store``), writes a keys file at mode
0600 holding one person key that reaches the brain and one ``!`` service key, picks a free port
(bind port 0, read it, close), starts ``python -m brainy.cli serve`` on it and waits, bounded, until
it answers ``GET /contract.json``. On the way out it sends SIGTERM and waits for the exit, bounded;
a server that will not stop is killed and the test fails.

Only loopback addresses are used. The server's stderr goes to ``serve.log`` beside the store; a
start that fails shows its tail.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import h2.config
import h2.connection
import h2.events
import msgpack

from brainy.auth import issuer
from brainy.engine import init_store

HOST = "127.0.0.1"
BRAIN = "notes"
PERSON = "person:tester@example.com"
PERSON_KEY = "bky_protocol_tests_person_0123456789"
SERVICE_KEY = "bks_protocol_tests_service_0123456789"
START_SECONDS = 20.0  # the server answers within this, or the start fails
STOP_SECONDS = 15.0  # SIGTERM to exit, or the stop fails
START_ATTEMPTS = 3  # a free port can be taken between our close and the server's bind


@dataclass
class ServerProcess:
    """One running ``brainy serve``: where it listens, what it serves, and the keys that reach it."""

    host: str
    port: int
    brain: str
    store: Path
    keys_path: Path
    log_path: Path
    proc: subprocess.Popen[bytes]
    key: str = PERSON_KEY
    service_key: str = SERVICE_KEY
    principal: str = PERSON
    extra: dict[str, object] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def address(self) -> tuple[str, int]:
        return self.host, self.port

    def path(self, door: str) -> str:
        """``/v1/brains/{brain}/<door>`` for this server's brain."""
        return f"/v1/brains/{self.brain}/{door}"

    def alive(self) -> bool:
        return self.proc.poll() is None

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""


def free_port(host: str = HOST) -> int:
    """A port nobody was listening on a moment ago: bind port 0, read it, close."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def write_keys(
    path: Path, brain: str, person_key: str = PERSON_KEY, service_key: str = SERVICE_KEY, principal: str = PERSON
) -> Path:
    """A keys file at mode 0600: one person key reaching ``brain``, one ``!`` service key."""
    text = f"# keys for the protocol tests\n{person_key}  {principal}  {brain}\n{service_key}  service:operator  !\n"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(text)
    os.chmod(path, 0o600)
    return path


def _answers(host: str, port: int) -> bool:
    """True when the server at ``host:port`` answers ``GET /contract.json`` with a status line."""
    try:
        with socket.create_connection((host, port), timeout=1.0) as sock:
            sock.sendall(b"GET /contract.json HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
            return sock.recv(16).startswith(b"HTTP/1.1 200")
    except OSError:
        return False


def _stop(proc: subprocess.Popen[bytes]) -> int | None:
    """SIGTERM, then wait (bounded); kill a server that will not stop. Answers the exit code, or None if killed."""
    if proc.poll() is not None:
        return proc.returncode
    proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(timeout=STOP_SECONDS)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=STOP_SECONDS)
        return None


def trusted_issuer(directory: Path) -> issuer.IssuerKeyFile:
    """A fresh token issuer's signing key in ``directory``, and the issuers file beside the keys file trusting it
    (the server reads it from there), so a test can mint bk1 tokens the server accepts."""
    directory.mkdir(parents=True, exist_ok=True)
    signer = issuer.keygen("owner-idp", directory / "idp.key")
    issuers = directory / "issuers"
    issuers.write_text(signer.line() + "\n")
    issuers.chmod(0o600)
    return signer


@contextlib.contextmanager
def start_server(
    directory: Path,
    brain: str = BRAIN,
    extra_args: tuple[str, ...] = (),
    command: tuple[str, ...] = ("-m", "brainy.cli"),
    env_extra: dict[str, str] | None = None,
) -> Iterator[ServerProcess]:
    """Serve a fresh store named ``brain`` from ``directory``; stop it (SIGTERM) on the way out.

    ``command`` is what ``python`` runs (the ``brainy`` command, or a script that wraps it)."""
    directory.mkdir(parents=True, exist_ok=True)
    store = directory / brain
    init_store(store)
    keys_path = write_keys(directory / "keys", brain)
    log_path = directory / "serve.log"
    env = dict(os.environ, PYTHONUNBUFFERED="1", **(env_extra or {}))
    server: ServerProcess | None = None
    for _attempt in range(START_ATTEMPTS):
        port = free_port()
        with open(log_path, "ab") as log:
            proc = subprocess.Popen(
                [
                    sys.executable,
                    *command,
                    "serve",
                    "--listen",
                    f"{HOST}:{port}",
                    "--brain",
                    f"{brain}={store}",
                    "--keys",
                    str(keys_path),
                    *extra_args,
                ],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=directory,
            )
        deadline = time.monotonic() + START_SECONDS
        while time.monotonic() < deadline and proc.poll() is None and not _answers(HOST, port):
            time.sleep(0.05)
        if proc.poll() is None and _answers(HOST, port):
            server = ServerProcess(HOST, port, brain, store, keys_path, log_path, proc)
            break
        _stop(proc)  # it exited (the port was taken?) or never answered: try another port
    if server is None:
        tail = log_path.read_text(errors="replace")[-4000:] if log_path.exists() else ""
        raise RuntimeError(f"brainy serve did not start in {START_ATTEMPTS} attempts; its log ends:\n{tail}")
    try:
        yield server
    finally:
        code = _stop(server.proc)
        if code is None:
            raise RuntimeError(f"brainy serve did not stop within {STOP_SECONDS} s of SIGTERM; killed")


# -- clients ------------------------------------------------------------------------------------------
#
# Three ways to speak to a server: curl (HTTP/1.1, or HTTP/2 with prior knowledge), a raw HTTP/1.1
# socket (pipelining, chunking, HEAD, malformed bytes), and the h2 library as a client over a plain
# socket (many streams, flow control). Each answers an :class:`Answer`. Every wait is bounded.

TIMEOUT = 10.0
_TIMING = re.compile(r"brainy;dur=(\d+\.\d{3})")


@dataclass
class Answer:
    """One HTTP answer, whatever carried it."""

    status: int
    headers: dict[str, str]
    body: bytes
    raw_headers: list[tuple[str, str]] = field(default_factory=list)

    @property
    def content_type(self) -> str:
        return self.headers.get("content-type", "").split(";")[0].strip()

    @property
    def doc(self) -> Any:
        """The body decoded by its content type (JSON or MessagePack)."""
        if self.content_type == "application/msgpack":
            return msgpack.unpackb(self.body, raw=False)
        if self.content_type == "application/json":
            return json.loads(self.body)
        raise AssertionError(f"not a document: {self.content_type!r} {self.body[:200]!r}")

    @property
    def refusal(self) -> str | None:
        doc = self.doc
        return doc["error"]["name"] if isinstance(doc, dict) and "error" in doc else None

    @property
    def timing(self) -> float:
        """The ``brainy;dur=<ms>`` of the Server-Timing header (asserting its shape)."""
        value = self.headers.get("server-timing", "")
        found = _TIMING.fullmatch(value)
        assert found, f"server-timing is {value!r}, not brainy;dur=<ms>"
        return float(found.group(1))

    def result(self) -> Any:
        """The document without ``_meta`` (after checking ``_meta.ms`` equals the Server-Timing duration)."""
        doc = dict(self.doc)
        meta = doc.pop("_meta")
        assert meta["ms"] == self.timing, f"_meta.ms {meta['ms']} != server-timing {self.timing}"
        return doc

    def __repr__(self) -> str:
        return f"Answer({self.status}, {self.headers}, {self.body[:300]!r})"


def _split_head(data: bytes) -> tuple[int, list[tuple[str, str]], bytes]:
    head, sep, rest = data.partition(b"\r\n\r\n")
    assert sep, f"no end of the header block in {data[:300]!r}"
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = []
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers.append((name.strip().lower(), value.strip()))
    return status, headers, rest


def _answer(status: int, headers: list[tuple[str, str]], body: bytes) -> Answer:
    return Answer(status, {k: v for k, v in headers}, body, headers)


def encode_body(doc: Any, encoding: str) -> bytes:
    return msgpack.packb(doc, use_bin_type=True) if encoding == "msgpack" else json.dumps(doc).encode()


def media(encoding: str) -> str:
    return "application/msgpack" if encoding == "msgpack" else "application/json"


def curl(
    server: ServerProcess,
    method: str,
    path: str,
    body: bytes | None = None,
    *,
    headers: tuple[tuple[str, str], ...] = (),
    http2: bool = False,
    timeout: float = TIMEOUT,
) -> Answer:
    """One request with curl: HTTP/1.1, or HTTP/2 with prior knowledge."""
    args = ["curl", "-sS", "-i", "--max-time", str(timeout), "-H", "Expect:"]
    args.append("--http2-prior-knowledge" if http2 else "--http1.1")
    if method == "HEAD":
        args.append("-I")
    elif method not in ("GET", "POST") or (method == "POST" and body is None):
        args += ["-X", method]
    for name, value in headers:
        args += ["-H", f"{name}: {value}"]
    if body is not None:
        args += ["--data-binary", "@-"]
    args.append(server.url + path)
    done = subprocess.run(args, input=body or b"", capture_output=True, timeout=timeout + 5)
    assert done.returncode == 0, f"curl {' '.join(args)} failed: {done.stderr.decode(errors='replace')}"
    out = done.stdout
    while True:  # skip any 1xx blocks
        status, hdrs, rest = _split_head(out)
        if status >= 200:
            return _answer(status, hdrs, rest)
        out = rest


class H1Client:
    """HTTP/1.1 over a raw loopback socket: write any bytes, read answers one at a time."""

    def __init__(self, address: tuple[str, int], timeout: float = TIMEOUT) -> None:
        self.sock = socket.create_connection(address, timeout=timeout)
        self.buffer = b""

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> H1Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    @staticmethod
    def request(
        method: str,
        path: str,
        body: bytes | None = None,
        headers: tuple[tuple[str, str], ...] = (),
        host: str = "127.0.0.1",
    ) -> bytes:
        lines = [f"{method} {path} HTTP/1.1", f"Host: {host}"] + [f"{k}: {v}" for k, v in headers]
        if body is not None:
            lines.append(f"Content-Length: {len(body)}")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + (body or b"")

    def _fill(self) -> bool:
        chunk = self.sock.recv(1 << 16)
        self.buffer += chunk
        return bool(chunk)

    def read_answer(self, head: bool = False, timeout: float = TIMEOUT) -> Answer:
        """The next answer on the connection (its body by content-length; none for HEAD), within ``timeout``."""
        deadline = time.monotonic() + timeout
        while b"\r\n\r\n" not in self.buffer:
            assert time.monotonic() < deadline, f"no answer in {timeout} s; read {self.buffer[:300]!r}"
            if not self._fill():
                raise ConnectionError(f"closed before an answer; read {self.buffer[:300]!r}")
        status, headers, self.buffer = _split_head(self.buffer)
        answer = _answer(status, headers, b"")
        length = 0 if head else int(answer.headers.get("content-length", "0"))
        while len(self.buffer) < length:
            assert time.monotonic() < deadline, f"the body did not arrive in {timeout} s"
            if not self._fill():
                raise ConnectionError("closed inside a body")
        answer.body, self.buffer = self.buffer[:length], self.buffer[length:]
        return answer

    def closed_by_peer(self, timeout: float = 3.0) -> bool:
        """True when the server ends the connection within ``timeout`` (bytes before the end are kept)."""
        self.sock.settimeout(timeout)
        deadline = time.monotonic() + timeout
        try:
            while time.monotonic() < deadline:
                if not self._fill():
                    return True
        except TimeoutError:
            return False
        except ConnectionResetError:
            return True
        return False


class H2Client:
    """The h2 library as a client, over a plain loopback socket, with prior knowledge.

    ``auto_ack`` acknowledges received data as it arrives (opening the window again); without it
    the test decides when the window opens, by :meth:`ack`.
    """

    def __init__(
        self,
        address: tuple[str, int],
        timeout: float = TIMEOUT,
        auto_ack: bool = True,
        settings: dict[int, int] | None = None,
    ) -> None:
        self.address = address
        self.timeout = timeout
        self.auto_ack = auto_ack
        self.sock = socket.create_connection(address, timeout=timeout)
        self.conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
        self.conn.initiate_connection()
        if settings:
            self.conn.update_settings(settings)
        self.flush()
        self.heads: dict[int, tuple[int, list[tuple[str, str]]]] = {}
        self.bodies: dict[int, bytearray] = {}
        self.ended: set[int] = set()
        self.reset: dict[int, int] = {}
        self.terminated: h2.events.ConnectionTerminated | None = None
        self.eof = False
        self.unacked: dict[int, int] = {}

    def __enter__(self) -> H2Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.sock.close()

    def flush(self) -> None:
        data = self.conn.data_to_send()
        if data:
            self.sock.sendall(data)

    def start(
        self,
        method: str,
        path: str,
        body: bytes | None = None,
        headers: tuple[tuple[str, str], ...] = (),
        flush: bool = True,
    ) -> int:
        """Open one stream for one request (its body as the windows allow); answer the stream id. With
        ``flush=False`` a body that fits the window stays queued until the next :meth:`flush`."""
        stream_id = self.conn.get_next_available_stream_id()
        fields = [
            (":method", method),
            (":path", path),
            (":scheme", "http"),
            (":authority", f"{self.address[0]}:{self.address[1]}"),
            *headers,
        ]
        if body is not None:
            fields.append(("content-length", str(len(body))))
        self.conn.send_headers(stream_id, fields, end_stream=not body)
        self.bodies[stream_id] = bytearray()
        view = memoryview(body or b"")
        deadline = time.monotonic() + self.timeout
        while view:
            window = min(self.conn.local_flow_control_window(stream_id), self.conn.max_outbound_frame_size)
            if window <= 0:
                assert time.monotonic() < deadline, "the server never opened its window for our body"
                self.flush()
                self.pump_once()
                continue
            chunk, view = view[:window], view[window:]
            self.conn.send_data(stream_id, chunk.tobytes(), end_stream=not view)
        if flush:
            self.flush()
        return stream_id

    def pump_once(self, timeout: float | None = None) -> bool:
        """Read once from the socket and feed it to the connection; False at EOF or on timeout."""
        self.sock.settimeout(self.timeout if timeout is None else timeout)
        try:
            data = self.sock.recv(1 << 16)
        except TimeoutError:
            return False
        except ConnectionResetError:
            data = b""
        if not data:
            self.eof = True
            return False
        for event in self.conn.receive_data(data):
            if isinstance(event, h2.events.ResponseReceived):
                self.heads[event.stream_id] = (int(dict(event.headers)[":status"]), list(event.headers))
            elif isinstance(event, h2.events.DataReceived):
                self.bodies.setdefault(event.stream_id, bytearray()).extend(event.data)
                if self.auto_ack:
                    self.conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
                else:
                    self.unacked[event.stream_id] = self.unacked.get(event.stream_id, 0) + event.flow_controlled_length
            elif isinstance(event, h2.events.StreamEnded):
                self.ended.add(event.stream_id)
            elif isinstance(event, h2.events.StreamReset):
                self.reset[event.stream_id] = event.error_code
                self.ended.add(event.stream_id)
            elif isinstance(event, h2.events.ConnectionTerminated):
                self.terminated = event
        self.flush()
        return True

    def ack(self, stream_id: int, n: int | None = None) -> None:
        """Open the stream's and the connection's windows by ``n`` (default: all the bytes received and not
        yet acknowledged on the stream), with explicit WINDOW_UPDATE frames sent at once. (The library's
        ``acknowledge_received_data`` batches small updates, so a test could not tell what it opened.)"""
        owed = self.unacked.get(stream_id, 0)
        n = owed if n is None else min(n, owed)
        if n:
            if stream_id not in self.ended:  # a closed stream has no window left to open
                self.conn.increment_flow_control_window(n, stream_id)
            self.conn.increment_flow_control_window(n)
            self.unacked[stream_id] = owed - n
            self.flush()

    def wait(self, stream_ids: list[int], timeout: float | None = None) -> None:
        """Pump until every stream in ``stream_ids`` has ended (bounded)."""
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        while not set(stream_ids) <= self.ended:
            left = deadline - time.monotonic()
            assert left > 0, f"streams {sorted(set(stream_ids) - self.ended)} did not end in time"
            if not self.pump_once(left) and self.eof:
                raise ConnectionError(f"the server closed the connection; terminated={self.terminated}")

    def answer(self, stream_id: int) -> Answer:
        status, headers = self.heads[stream_id]
        plain = [(k, v) for k, v in headers if not k.startswith(":")]
        return _answer(status, plain, bytes(self.bodies.get(stream_id, b"")))

    def call(
        self, method: str, path: str, body: bytes | None = None, headers: tuple[tuple[str, str], ...] = ()
    ) -> Answer:
        stream_id = self.start(method, path, body, headers)
        self.wait([stream_id])
        return self.answer(stream_id)


# -- a reading-door receiver --------------------------------------------------------------------------


class Receiver:
    """A real HTTP receiver on loopback: answers as ``mode`` says and keeps what it was sent."""

    def __init__(self) -> None:
        self.mode = "ok"
        self.seen: list[tuple[dict[str, str], Any]] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (the stdlib's name)
                length = int(self.headers.get("Content-Length", "0"))
                receiver.seen.append(
                    ({k.lower(): v for k, v in self.headers.items()}, json.loads(self.rfile.read(length)))
                )
                if receiver.mode == "slow":
                    time.sleep(1.0)
                status, body = {
                    "ok": (200, b'{"doorUrl": "https://door.example/d/1"}'),
                    "500": (500, b'{"error": "down"}'),
                    "nourl": (200, b'{"url": "x"}'),
                    "notjson": (200, b"<html>"),
                    "slow": (200, b'{"doorUrl": "late"}'),
                }[receiver.mode]
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer((HOST, 0), Handler)
        self.url = f"http://{HOST}:{self.server.server_address[1]}/mint?v=1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
