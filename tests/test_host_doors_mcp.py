"""The host doors over MCP (DOORS.md 0.1: ``host_mintKey``, ``host_revokeKey``): the same doors, the same gate.

A key minted through ``tools/call`` answers the very next call; revoked by its ``sha256`` path parameter
(which travels as a tool argument beside ``body``), the next call with it is refused.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_mcp_session import INIT, SERVICE_KEY, Http, opened

from brainy.auth.keys import KeyTable
from brainy.auth.tokens import TokenVerifier
from brainy.engine import init_store
from brainy.host.pool import Pool
from brainy.net.app import App


@pytest.fixture
def app(tmp_path: Path) -> App:
    init_store(tmp_path / "notes")
    keys = tmp_path / "keys"
    keys.write_text(f"{SERVICE_KEY}  service:operator  !\n")
    keys.chmod(0o600)
    verifier = TokenVerifier.open(tmp_path / "issuers")
    pool = Pool({"notes": tmp_path / "notes"})
    yield App(pool, KeyTable.open(keys, token_verifier=verifier, revoked=verifier.revoked), "1970-01-01T00:00:00Z")
    pool.close_all()


def test_a_key_minted_over_mcp_answers_the_next_call_and_a_revocation_cuts_it_off(app):
    operator = opened(app, SERVICE_KEY)
    minted = operator.call("host_mintKey", {"body": {"principal": "person:mcp@example.com", "brains": ["notes"]}})
    result = minted["result"]
    assert result["isError"] is False, result
    key, sha = result["structuredContent"]["key"], result["structuredContent"]["sha256"]
    person = opened(app, key)
    assert person.call("brainy_counts")["result"]["structuredContent"]["entities"] == 0
    revoked = operator.call("host_revokeKey", {"sha256": sha})["result"]["structuredContent"]
    assert revoked["revoked"] is True and revoked["known"] is True
    refused = Http(app, key).post({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT})
    assert refused.status == 401 and b"UnauthenticatedError" in refused.body
    listed = operator.call("host_listKeys")["result"]["structuredContent"]["keys"]
    assert [(k["sha256"], k["revoked"]) for k in listed] == [(sha, True)]
