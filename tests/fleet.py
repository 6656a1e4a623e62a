"""Real fleets for the tests: ``brainy serve --fleet`` nodes on loopback ports against one real etcd.

:func:`start_fleet` starts ``names`` nodes, each ``python -m brainy.cli serve`` with its own ``--brains-dir``,
one shared keys file (a fleet's nodes share their keys: docs/fleet.md), ``--fleet`` the test's etcd,
``--node NAME``, ``--advertise`` its own URL and a short ``--fleet-ttl``; it waits (bounded) until each answers
``GET /contract.json``, and stops them all with SIGTERM on the way out (one already killed is left be).
Every wait here is bounded.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from server import HOST, PERSON, PERSON_KEY, SERVICE_KEY, _answers, _stop, curl, free_port

START_SECONDS = 20.0
TTL = 2  # the fleet's lease in the tests: the shortest the server takes


@dataclass
class Node:
    """One running node of a test fleet."""

    name: str
    port: int
    brains_dir: Path
    log_path: Path
    proc: subprocess.Popen[bytes]

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def kill(self) -> None:
        """SIGKILL: no clean stop, no lease revoked; the fleet learns of it when the lease runs out."""
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=10)


def write_fleet_keys(path: Path) -> Path:
    """The fleet's one keys file at mode 0600: a person key reaching every brain, and a ``!`` service key."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(f"{PERSON_KEY}  {PERSON}  *\n{SERVICE_KEY}  service:operator  !\n")
    return path


def start_node(
    directory: Path, name: str, etcd_url: str, keys: Path, ttl: int = TTL, extra: tuple[str, ...] = ()
) -> Node:
    """One node, started and answering; its log beside its brains."""
    home = directory / name
    brains = home / "brains"
    brains.mkdir(parents=True, exist_ok=True)
    log_path = home / "serve.log"
    for _attempt in range(3):
        port = free_port()
        with open(log_path, "ab") as log:
            proc = subprocess.Popen(
                [
                    sys.executable,
                    *("-m", "brainy.cli", "serve", "--listen", f"{HOST}:{port}"),
                    *("--brains-dir", str(brains), "--keys", str(keys)),
                    *("--fleet", etcd_url, "--node", name, "--advertise", f"http://{HOST}:{port}"),
                    *("--fleet-ttl", str(ttl)),
                    *extra,
                ],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=dict(os.environ, PYTHONUNBUFFERED="1"),
                cwd=home,
            )
        deadline = time.monotonic() + START_SECONDS
        while time.monotonic() < deadline and proc.poll() is None and not _answers(HOST, port):
            time.sleep(0.05)
        if proc.poll() is None and _answers(HOST, port):
            return Node(name, port, brains, log_path, proc)
        _stop(proc)
    raise RuntimeError(f"node {name} did not start; its log ends:\n{log_path.read_text(errors='replace')[-4000:]}")


@contextlib.contextmanager
def start_fleet(directory: Path, etcd_url: str, names: tuple[str, ...] = ("a", "b")) -> Iterator[list[Node]]:
    """``names`` nodes of one fleet; all stopped on the way out."""
    keys = write_fleet_keys(directory / "keys")
    nodes: list[Node] = []
    try:
        for name in names:
            nodes.append(start_node(directory, name, etcd_url, keys))
        yield nodes
    finally:
        for node in nodes:
            _stop(node.proc)


def call(
    node: Node,
    method: str,
    path: str,
    body: bytes | None = None,
    key: str = PERSON_KEY,
    headers: tuple[tuple[str, str], ...] = (),
    http2: bool = False,
) -> Any:
    """One request to ``node`` with ``key`` (curl; HTTP/1.1, or HTTP/2 with prior knowledge)."""
    fields = (("authorization", f"Bearer {key}"), ("content-type", "application/json"), *headers)
    return curl(node, method, path, body, headers=fields, http2=http2)


def health(node: Node) -> dict[str, Any]:
    answer = call(node, "GET", "/v1/health", key=SERVICE_KEY)
    assert answer.status == 200, answer
    return answer.doc


def wait_until(condition: Callable[[], bool], seconds: float, what: str) -> None:
    """Poll ``condition`` until it holds, at most ``seconds``."""
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"not within {seconds} s: {what}"
        time.sleep(0.1)
