"""A real ``brainy serve`` process on a free loopback port, for the end-to-end server tests.

A test starts its own server (``python -m brainy.cli serve --listen 127.0.0.1:0``), learns the port the
kernel chose from the server's own ``listening on`` line, waits until ``GET /contract.json`` answers, and
stops it with SIGTERM. Every wait here is bounded.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

HOST = "127.0.0.1"
START_SECONDS = 20.0  # the server answers within this, or the start fails
STOP_SECONDS = 15.0  # a signal to exit, or the stop fails
REQUEST_SECONDS = 10.0  # one HTTP exchange


def place_keys(path: Path, lines: list[str], mode: int = 0o600) -> None:
    """Place a keys file whole (a temporary file renamed over the path), at ``mode``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_name(path.name + ".placing")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write("\n".join(lines) + "\n")
    os.chmod(temp, mode)
    os.replace(temp, path)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def refused(port: int, host: str = HOST) -> bool:
    """True when nothing accepts a TCP connection at host:port."""
    try:
        with socket.create_connection((host, port), timeout=2.0):
            return False
    except OSError:
        return True


class Served:
    """One ``python -m brainy.cli ARGS`` child: its stdout and stderr pumped into lists, line by line."""

    def __init__(self, args: list[str], cwd: Path, env: dict[str, str] | None = None) -> None:
        full = {k: v for k, v in os.environ.items() if k not in ("BRAINY_KEYS", "BRAINY_SERVE_ISSUERS")}
        full["XDG_CONFIG_HOME"] = str(cwd / "xdg")  # never the real ~/.config, whatever a test forgets
        full.update(env or {})
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "brainy.cli", *args],
            cwd=cwd,
            env=full,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.out: list[str] = []
        self.err: list[str] = []
        self.port = 0
        self._moved = threading.Condition()
        self._pumps = [
            threading.Thread(target=self._pump, args=(self.proc.stdout, self.out), daemon=True),
            threading.Thread(target=self._pump, args=(self.proc.stderr, self.err), daemon=True),
        ]
        for pump in self._pumps:
            pump.start()

    def _pump(self, stream: Any, into: list[str]) -> None:
        for line in stream:
            with self._moved:
                into.append(line)
                self._moved.notify_all()
        with self._moved:
            self._moved.notify_all()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def stderr(self) -> str:
        with self._moved:
            return "".join(self.err)

    def stdout(self) -> str:
        with self._moved:
            return "".join(self.out)

    def wait_for(self, pattern: str, stream: str = "err", timeout: float = START_SECONDS) -> re.Match[str]:
        """The first match of ``pattern`` in the child's stdout or stderr, waiting (bounded) for it."""
        lines = self.err if stream == "err" else self.out
        deadline = time.monotonic() + timeout
        with self._moved:
            while True:
                found = re.search(pattern, "".join(lines))
                if found:
                    return found
                left = deadline - time.monotonic()
                if left <= 0 or (self.proc.poll() is not None and not any(p.is_alive() for p in self._pumps)):
                    raise AssertionError(
                        f"no {pattern!r} on {stream} (exit {self.proc.poll()}); stderr:\n{''.join(self.err)[-3000:]}"
                    )
                self._moved.wait(min(left, 0.1))

    def ready(self) -> Served:
        """Wait (bounded) for the listening line, then until the port answers a request."""
        self.port = int(self.wait_for(r"listening on 127\.0\.0\.1:(\d+)")[1])
        deadline = time.monotonic() + START_SECONDS
        while True:
            try:
                if self.request("GET", "/contract.json", timeout=2.0)[0] == 200:
                    return self
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise AssertionError(f"port {self.port} never answered; stderr:\n{self.stderr()[-3000:]}")
            time.sleep(0.02)

    def request(
        self,
        method: str,
        path: str,
        key: str | None = None,
        body: Any = None,
        headers: dict[str, str] | None = None,
        timeout: float = REQUEST_SECONDS,
    ) -> tuple[int, dict[str, Any], bytes, dict[str, str]]:
        """One exchange on a fresh connection: (status, document, raw body, lowercased headers).

        ``path`` is sent exactly as given (no normalisation), so ``..`` and ``%2F`` reach the server.
        """
        sent = dict(headers or {})
        if key is not None:
            sent["Authorization"] = f"Bearer {key}"
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            sent["Content-Type"] = "application/json"
        conn = http.client.HTTPConnection(HOST, self.port, timeout=timeout)
        try:
            conn.request(method, path, body=data, headers=sent)
            response = conn.getresponse()
            raw = response.read()
            got = {k.lower(): v for k, v in response.getheaders()}
        finally:
            conn.close()
        document = json.loads(raw) if raw and got.get("content-type", "").startswith("application/json") else {}
        return response.status, document, raw, got

    def exit_code(self) -> int | None:
        """Wait (bounded) for a child that should refuse to start; its exit code, or None if it kept running."""
        try:
            code = self.proc.wait(START_SECONDS)
        except subprocess.TimeoutExpired:
            return None
        self.close_pipes()
        return code

    def stop(self, sig: int = signal.SIGTERM, timeout: float = STOP_SECONDS) -> int:
        """Send ``sig`` (if still running) and wait, bounded, for the exit; the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout)
            raise AssertionError(
                f"did not exit within {timeout} s of signal {sig}; stderr:\n{self.stderr()[-3000:]}"
            ) from None
        finally:
            self.close_pipes()
        return code

    def close_pipes(self) -> None:
        for pump in self._pumps:
            pump.join(5.0)
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()


@pytest.fixture
def launch(tmp_path: Path) -> Iterator[Callable[..., Served]]:
    """Start ``brainy ARGS`` children (in ``tmp_path`` unless told); any still running is SIGTERMed at teardown."""
    started: list[Served] = []

    def go(*args: str, env: dict[str, str] | None = None, ready: bool = True, cwd: Path | None = None) -> Served:
        child = Served(list(args), cwd or tmp_path, env)
        started.append(child)
        return child.ready() if ready else child

    yield go
    for child in started:
        if child.proc.returncode is None:
            child.stop()


def without_meta(raw: bytes) -> bytes:
    """A wire body with its ``_meta`` member cut out, byte for byte otherwise."""
    return re.sub(rb',?"_meta":\{[^{}]*\}', b"", raw)


def wait_until(check: Callable[[], bool], timeout: float, step: float = 0.02) -> float | None:
    """Seconds until ``check()`` first holds, polling; None if it never did within ``timeout``."""
    started = time.monotonic()
    while True:
        if check():
            return time.monotonic() - started
        if time.monotonic() - started > timeout:
            return None
        time.sleep(step)


class KeptAlive:
    """One keep-alive HTTP/1.1 connection to a server: every request on the same socket, which each request
    asserts (``http.client`` would otherwise reconnect silently after a close)."""

    def __init__(self, port: int, host: str = HOST, timeout: float = REQUEST_SECONDS) -> None:
        self.conn = http.client.HTTPConnection(host, port, timeout=timeout)
        self.conn.connect()
        self.sock = self.conn.sock

    def request(self, method: str, path: str, key: str | None = None) -> tuple[int, dict[str, Any]]:
        """One exchange on this connection: (status, document)."""
        self.conn.request(method, path, headers={"Authorization": f"Bearer {key}"} if key is not None else {})
        response = self.conn.getresponse()
        raw = response.read()
        assert not response.will_close, "the server closed the keep-alive connection"
        assert self.conn.sock is self.sock, "the request went out on another connection"
        return response.status, json.loads(raw) if raw else {}

    def close(self) -> None:
        self.conn.close()
