"""Identity discovery against a REAL ``brainy serve``: ``--auth-server`` and ``--sign-in`` (seed 001, "Sign-in —
this door as its own issuer" and "Minted keys"; DOORS.md 10.2, 11.10).

With ``--auth-server URL`` the server publishes its RFC 9728 protected-resource document naming that
authorization server, and every 401 (on a door and on ``POST /mcp``) carries ``resource_metadata`` in its
``WWW-Authenticate`` challenge, so an MCP client that was refused learns where to get a token. Without it
the document is no route. ``--sign-in`` with a module that will not import refuses to start by name, and
the two flags together refuse by name (the sign-in itself: tests/test_sign_in*.py).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from server import BRAIN, SERVICE_KEY, curl, start_server

pytestmark = pytest.mark.slow

ISSUER = "https://id.example.com"
DOCUMENT = "/.well-known/oauth-protected-resource"


def test_the_protected_resource_document_names_the_auth_server_and_every_401_points_at_it(tmp_path):
    with start_server(tmp_path, extra_args=("--auth-server", ISSUER)) as server:
        answer = curl(server, "GET", DOCUMENT)
        assert answer.status == 200, answer
        assert answer.result() == {
            "resource": server.url,
            "authorization_servers": [ISSUER],
            "bearer_methods_supported": ["header"],
        }
        challenge = f'Bearer realm="brainy", resource_metadata="{server.url}{DOCUMENT}"'
        refused = curl(server, "GET", f"/v1/brains/{BRAIN}/counts")
        assert refused.status == 401 and refused.headers["www-authenticate"] == challenge
        wrong = curl(
            server, "GET", f"/v1/brains/{BRAIN}/counts", headers=(("Authorization", "Bearer bky_wrong_key_0000000000"),)
        )
        assert wrong.status == 401 and wrong.headers["www-authenticate"] == challenge
        mcp = curl(
            server,
            "POST",
            "/mcp",
            json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"}).encode(),
            headers=(("Content-Type", "application/json"), ("Accept", "application/json, text/event-stream")),
        )
        assert mcp.status == 401 and mcp.headers["www-authenticate"] == challenge
        assert curl(server, "GET", "/v1/health", headers=(("Authorization", f"Bearer {SERVICE_KEY}"),)).status == 200


def test_without_an_auth_server_the_document_is_no_route(tmp_path):
    with start_server(tmp_path) as server:
        answer = curl(server, "GET", DOCUMENT)
        assert answer.status == 404 and answer.refusal == "UnknownDoorError"
        refused = curl(server, "GET", f"/v1/brains/{BRAIN}/counts")
        assert refused.status == 401 and refused.headers["www-authenticate"] == 'Bearer realm="brainy"'


@pytest.mark.parametrize(
    "flags, name",
    [
        (("--sign-in", "some-module"), "SignInModuleUnavailableError"),
        (("--sign-in", "--auth-server", ISSUER), "InvalidArgumentError"),
        (("--auth-server", "not a url"), "InvalidArgumentError"),
    ],
)
def test_sign_in_and_its_conflicts_refuse_to_start_by_name(tmp_path, flags, name):
    keys = tmp_path / "keys"
    keys.write_text(f"{SERVICE_KEY}  service:operator  !\n")
    keys.chmod(0o600)
    done = subprocess.run(
        [sys.executable, "-m", "brainy.cli", "serve", "--listen", "127.0.0.1:0", "--keys", str(keys), *flags],
        capture_output=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 2, done
    assert f"brainy: {name}:".encode() in done.stderr, done.stderr
    if "--auth-server" in flags and "--sign-in" in flags:
        assert b"mutually exclusive" in done.stderr
