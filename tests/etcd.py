"""A real etcd for the fleet tests: one member on loopback ports with its own data directory.

:func:`start_etcd` runs the ``etcd`` binary (Debian's ``etcd-server``, put on the machine by
``tools/test-services``, which the README's test command runs first) on two free loopback ports, the client's
and the peer's, with ``--data-dir`` in the test's temporary directory, waits (bounded) until ``GET /health``
says it is healthy, and kills it on the way out. A binary that is missing skips the test on a developer's
machine and fails it under CI (``CI=true``): the fleet's tests never pass by not running.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import signal
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from server import HOST, free_port

START_SECONDS = 20.0  # healthy within this, or the start fails
STOP_SECONDS = 10.0
START_ATTEMPTS = 3  # a free port can be taken between our close and etcd's bind


@dataclass
class Etcd:
    """One running etcd member: its client URL and its process."""

    url: str
    data_dir: Path
    log_path: Path
    proc: subprocess.Popen[bytes]

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""


def etcd_binary() -> str:
    """The ``etcd`` on PATH; without one, the fleet tests fail (never skip): the README's test command installs it."""
    found = shutil.which("etcd")
    if found is None:
        pytest.fail("etcd is not on PATH: run tools/test-services (it installs Debian's etcd-server)")
    return found


def healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=1.0) as answer:
            return json.loads(answer.read()).get("health") == "true"
    except (OSError, ValueError):
        return False


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGKILL)  # nothing of a test's etcd is kept: no clean stop is owed
    proc.wait(timeout=STOP_SECONDS)


@contextlib.contextmanager
def start_etcd(directory: Path) -> Iterator[Etcd]:
    """An etcd member on loopback with its data under ``directory``; killed on the way out."""
    binary = etcd_binary()
    directory.mkdir(parents=True, exist_ok=True)
    log_path = directory / "etcd.log"
    running: Etcd | None = None
    for attempt in range(START_ATTEMPTS):
        client, peer = free_port(), free_port()
        url, peer_url = f"http://{HOST}:{client}", f"http://{HOST}:{peer}"
        data_dir = directory / f"data-{attempt}"
        with open(log_path, "ab") as log:
            proc = subprocess.Popen(
                [
                    binary,
                    "--name",
                    "test",
                    "--data-dir",
                    str(data_dir),
                    "--listen-client-urls",
                    url,
                    "--advertise-client-urls",
                    url,
                    "--listen-peer-urls",
                    peer_url,
                    "--initial-advertise-peer-urls",
                    peer_url,
                    "--initial-cluster",
                    f"test={peer_url}",
                    "--log-level",
                    "warn",
                ],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + START_SECONDS
        while time.monotonic() < deadline and proc.poll() is None and not healthy(url):
            time.sleep(0.05)
        if proc.poll() is None and healthy(url):
            running = Etcd(url, data_dir, log_path, proc)
            break
        _stop(proc)
    if running is None:
        tail = log_path.read_text(errors="replace")[-4000:] if log_path.exists() else ""
        raise RuntimeError(f"etcd did not become healthy in {START_ATTEMPTS} attempts; its log ends:\n{tail}")
    try:
        yield running
    finally:
        _stop(running.proc)
