"""The sign-in's authorization server without sockets (``brainy.auth.signin.oauth``): each step handed ``now``,
so a code's expiry, an authorization code's short life and the rate limits are shown at the instant
they bite, against a real identity store and a real register file.
"""

from __future__ import annotations

import base64
import hashlib
from urllib.parse import parse_qs, urlsplit

import pytest

from brainy.auth.signin.limits import Limit
from brainy.auth.signin.oauth import (
    CODE_MINUTES,
    GRANT_TTL,
    PENDING_TTL,
    AuthorizationServer,
    OAuthError,
    asked_scope,
    s256,
)
from brainy.auth.signin.records import Records
from brainy.auth.signin.register import Register

PUBLIC = "https://brains.example.com"
REDIRECT = "http://127.0.0.1:9/cb"
VERIFIER = "v" * 64
T0 = 1_800_000_000.0


@pytest.fixture
def server(tmp_path):
    register = tmp_path / "accounts"
    register.write_text("# who opens what\nperson:alice@example.com  alice\nbroken line with three\n")
    records = Records.open(tmp_path / ".identity")
    minted: list[tuple[str, str, tuple[str, ...], str]] = []

    def mint(sub, brain, scope, aud):
        minted.append((sub, brain, scope, aud))
        return f"bk1.token{len(minted)}", {"iat": 0, "exp": 3600, "jti": str(len(minted))}

    made = AuthorizationServer(PUBLIC, records, Register(register), mint)
    made.minted_for_test = minted  # what the minter was asked for, for the assertions
    yield made
    records.close()


def _request(server, **more):
    client = server.register_client({"redirect_uris": [REDIRECT]}, T0)
    form = {
        "client_id": [client["client_id"]],
        "redirect_uri": [REDIRECT],
        "response_type": ["code"],
        "state": ["xyz"],
        "code_challenge": [s256(VERIFIER)],
        "code_challenge_method": ["S256"],
        **{k: [v] for k, v in more.items()},
    }
    return client["client_id"], server.authorize(form, "browser", T0)


def _refused(error, call, *args):
    with pytest.raises(OAuthError) as refused:
        call(*args)
    assert refused.value.error == error, refused.value
    return refused.value


def test_s256_is_rfc_7636s_own_example():
    # RFC 7636 appendix B
    assert s256("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk") == "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
    assert base64.urlsafe_b64encode(hashlib.sha256(b"x").digest()).rstrip(b"=").decode() == s256("x")


def test_a_mailed_code_expires(server):
    _, held = _request(server)
    _, code = server.send_code(held, "Alice@Example.com", T0)
    assert held.email == "alice@example.com" and len(code) == 8 and code.isdigit()
    _refused("code_expired", server.check_code, held, code, T0 + CODE_MINUTES * 60)
    _refused("code_unknown", server.check_code, held, code, T0 + 1)  # an expired code is gone, not revived


def test_a_sign_in_left_open_too_long_expires(server):
    _, held = _request(server)
    assert server.find(held.id, "browser", T0 + PENDING_TTL - 1) is held
    _refused("request_unknown", server.find, held.id, "another browser", T0)
    _refused("request_expired", server.find, held.id, "browser", T0 + PENDING_TTL)


def test_an_authorization_code_lives_a_minute_and_once(server):
    client_id, held = _request(server)
    _, code = server.send_code(held, "alice@example.com", T0)
    location = server.check_code(held, code, T0 + 5)
    params = {k: v[0] for k, v in parse_qs(urlsplit(location).query).items()}
    assert location.startswith(REDIRECT + "?") and params["state"] == "xyz"
    form = {
        "grant_type": ["authorization_code"],
        "client_id": [client_id],
        "code": [params["code"]],
        "code_verifier": [VERIFIER],
    }
    late = _refused("invalid_grant", server.token, form, T0 + 5 + GRANT_TTL)
    assert "expired" in late.description
    reused = _refused("invalid_grant", server.token, form, T0 + 6)
    assert "already used" in reused.description


def test_the_exchange_mints_for_the_registered_store_with_the_resource_as_audience(server):
    client_id, held = _request(server, resource=PUBLIC + "/mcp/", scope="read")
    _, code = server.send_code(held, "alice@example.com", T0)
    params = parse_qs(urlsplit(server.check_code(held, code, T0)).query)
    form = {
        "grant_type": ["authorization_code"],
        "client_id": [client_id],
        "code": params["code"],
        "code_verifier": [VERIFIER],
        "resource": [PUBLIC + "/mcp"],
    }
    answer = server.token(form, T0 + 1)
    assert answer["scope"] == "read" and answer["access_token"] == "bk1.token1"
    (call,) = server.minted_for_test
    assert call == ("person:alice@example.com", "alice", ("read",), PUBLIC + "/mcp")
    # a refresh may narrow, never widen
    refresh = {"grant_type": ["refresh_token"], "client_id": [client_id], "refresh_token": [answer["refresh_token"]]}
    _refused("invalid_scope", server.token, {**refresh, "scope": ["read write"]}, T0 + 2)


def test_an_account_whose_line_was_removed_cannot_refresh(server, tmp_path):
    client_id, held = _request(server)
    _, code = server.send_code(held, "alice@example.com", T0)
    params = parse_qs(urlsplit(server.check_code(held, code, T0)).query)
    form = {
        "grant_type": ["authorization_code"],
        "client_id": [client_id],
        "code": params["code"],
        "code_verifier": [VERIFIER],
    }
    answer = server.token(form, T0 + 1)
    (tmp_path / "accounts").write_text("# nobody now\n")
    refresh = {"grant_type": ["refresh_token"], "client_id": [client_id], "refresh_token": [answer["refresh_token"]]}
    refused = _refused("sign_in_failed", server.token, refresh, T0 + 2)
    assert refused.status == 403


def test_scope_words():
    assert asked_scope(None) == ("read", "write")
    assert asked_scope("owner") == ("read", "write", "owner")
    assert asked_scope("write") == ("read", "write")
    assert asked_scope("read") == ("read",)
    _refused("invalid_scope", asked_scope, "read offline_access")


def test_a_limit_counts_per_key_per_window():
    limit = Limit(2, 60.0)
    assert [limit.allow("a", T0), limit.allow("a", T0 + 1), limit.allow("a", T0 + 2)] == [True, True, False]
    assert limit.allow("b", T0 + 2)
    assert limit.allow("a", T0 + 60)  # a new window
