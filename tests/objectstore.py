"""A real S3-compatible store for the fleet's shipping tests: moto's server (``moto[server]``, in the test extra)
on a loopback port, in a thread of the test process (``ThreadedMotoServer``).

:func:`start_moto` answers its endpoint and the environment a ``brainy serve --object-store`` child needs
(``AWS_ENDPOINT_URL``, keys, region); the server is stopped on the way out. A missing moto fails the tests (the
test extra installs it), never skips them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from server import HOST


@dataclass
class Moto:
    """One running moto server: its endpoint, and the environment that points a client at it."""

    endpoint: str
    env: dict[str, str]


@contextlib.contextmanager
def start_moto() -> Iterator[Moto]:
    try:
        from moto.server import ThreadedMotoServer
    except ImportError as exc:
        pytest.fail(f"moto[server] is not installed (pip install -e '.[test]'): {exc}")
    server = ThreadedMotoServer(ip_address=HOST, port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        endpoint = f"http://{host}:{port}"
        env = {
            "AWS_ENDPOINT_URL": endpoint,
            "AWS_ACCESS_KEY_ID": "brainy-test",
            "AWS_SECRET_ACCESS_KEY": "brainy-test-secret",
            "AWS_DEFAULT_REGION": "us-east-1",
        }
        yield Moto(endpoint, env)
    finally:
        server.stop()
