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
# host.move: a named node stages a test's brain (a few entities) well within this; a stopped one is waited for this long
STAGE_SECONDS = 6.0


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
        stop_nodes(*nodes)


def stop_nodes(*nodes: Node | None) -> None:
    """SIGTERM each node still running (none, or one already killed, is left be), waiting for each (bounded).
    A stopped (SIGSTOP) node is continued first, so it can hear the signal."""
    for node in nodes:
        if node is not None and node.proc.poll() is None:
            node.proc.send_signal(signal.SIGCONT)
            _stop(node.proc)


@contextlib.contextmanager
def shipping_nodes(
    directory: Path, etcd_url: str, bucket: str, names: tuple[str, ...] = ("a", "b", "c")
) -> Iterator[dict[str, Node]]:
    """``names`` nodes shipping to ``s3://bucket/<directory's name>`` (``--ship sync``; the object store is the
    environment's: the ``cluster`` fixture), each started in turn; all stopped on the way out."""
    keys = write_fleet_keys(directory / "keys")
    extra = ("--object-store", f"s3://{bucket}/{directory.name}", "--ship", "sync")
    extra += ("--move-stage-seconds", str(STAGE_SECONDS))
    started: dict[str, Node] = {}
    try:
        for name in names:
            started[name] = start_node(directory, name, etcd_url, keys, TTL, extra)
        yield started
    finally:
        stop_nodes(*started.values())


def place_on(edge: Node, owner: Node, prefix: str, tries: int) -> str:
    """A brain provisioned through ``edge`` that placement put on ``owner`` (placement alternates between empty
    nodes: one of ``tries`` lands there), holding one entity, ``ada``, written at its owner."""
    wait_until(lambda: len(health(edge)["fleet"]["nodes"]) >= 2, 5, f"node {edge.name} sees node {owner.name}")
    held = _brains_of(edge, owner.name)
    for n in range(tries):
        placed = call(edge, "POST", f"/v1/brains/{prefix}{n}/provision", b"{}", key=SERVICE_KEY).doc
        if placed["node"] == owner.name:
            added = call(owner, "POST", f"/v1/brains/{placed['brain']}/add", b'{"type": "person", "id": "ada"}')
            assert added.status == 200, added
            # the edge's view names the owner before a test asks it to (a WebSocket session's head names it
            # from the view alone; a request not yet in the view is asked of etcd, and answered the same)
            wait_until(
                lambda: _brains_of(edge, owner.name) > held, 5, f"node {edge.name} sees the brain on {owner.name}"
            )
            return str(placed["brain"])
    raise AssertionError(f"no brain was placed on node {owner.name}")


def _brains_of(edge: Node, node: str) -> int:
    """How many brains ``edge``'s view places on ``node`` (its /v1/health fleet block)."""
    return next((n["brains"] for n in health(edge)["fleet"]["nodes"] if n["node"] == node), 0)


def sse_events(lines: Iterator[str], until: str, limit: int = 400) -> list[dict[str, str]]:
    """The events of an SSE stream up to and including the first named ``until`` (at most ``limit`` lines)."""
    events: list[dict[str, str]] = []
    current: dict[str, str] = {}
    for _, line in zip(range(limit), lines, strict=False):
        if not line:
            if current:
                events.append(current)
                if current.get("event") == until:
                    return events
            current = {}
        elif not line.startswith(":"):
            name, _, value = line.partition(": ")
            current[name] = value
    raise AssertionError(f"no {until!r} event within {limit} lines: {events}")


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
