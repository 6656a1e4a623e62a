"""``brainy serve --sign-in`` as its own issuer, driven over real HTTP against a real process (seed 001, "Sign-in —
this door as its own issuer", "Minted keys", "Revocation"; docs/sign-in.md).

A person signs in by submitting the pages' forms (no scripts), with the code a loopback mail receiver
was sent. Every refusal the issue names is reached: an unregistered account, a wrong, reused or
burnt code, a bad PKCE verifier, a reused authorization code, a mail sender answering 500; and the
pages' own safety headers. The MCP SDK's OAuth client flow is in tests/test_sign_in_mcp.py.
"""

from __future__ import annotations

import httpx2
import pytest
from server import SERVICE_KEY
from signin_rig import (
    ALICE,
    ALICE_BRAIN,
    REDIRECT,
    SignInServer,
    forms,
    open_sign_in,
    payload,
    pkce,
    redirect_params,
    register_client,
    sign_in,
    start_sign_in,
    submit,
)

pytestmark = pytest.mark.slow

BOB = "bob@example.com"  # no register line


@pytest.fixture(scope="module")
def served(tmp_path_factory) -> SignInServer:
    with start_sign_in(tmp_path_factory.mktemp("signin")) as server:
        yield server


def _exchange(server: SignInServer, client_id: str, code: str, verifier: str, **more: str) -> httpx2.Response:
    form = {
        "grant_type": "authorization_code",
        "code": code,
        "client_id": client_id,
        "redirect_uri": REDIRECT,
        "code_verifier": verifier,
        **more,
    }
    return httpx2.post(f"{server.url}/auth/token", data=form)


def test_discovery_names_this_server_as_its_own_authorization_server(served):
    metadata = httpx2.get(f"{served.url}/.well-known/oauth-authorization-server").json()
    assert metadata["issuer"] == served.url
    assert metadata["authorization_endpoint"] == f"{served.url}/auth/authorize"
    assert metadata["token_endpoint"] == f"{served.url}/auth/token"
    assert metadata["registration_endpoint"] == f"{served.url}/auth/register"
    assert metadata["code_challenge_methods_supported"] == ["S256"]
    assert metadata["grant_types_supported"] == ["authorization_code", "refresh_token"]
    resource = httpx2.get(f"{served.url}/.well-known/oauth-protected-resource").json()
    assert resource["resource"] == served.url and resource["authorization_servers"] == [served.url]
    refused = httpx2.get(f"{served.url}/v1/brains/{ALICE_BRAIN}/counts")
    assert refused.status_code == 401
    assert (
        f'resource_metadata="{served.url}/.well-known/oauth-protected-resource"' in refused.headers["www-authenticate"]
    )


def test_a_full_sign_in_mints_a_bk1_token_for_the_registered_store(served):
    client_id = register_client(served)
    verifier, challenge = pkce()
    with httpx2.Client() as http:
        page = open_sign_in(http, served, client_id, challenge)
        sent_before = len(served.mail.seen)
        answer = sign_in(http, served, page)
    headers, mailed = served.mail.seen[sent_before]
    assert headers["authorization"] == f"Bearer {SERVICE_KEY}"  # the keys file's ! line
    assert set(mailed) == {"email", "code", "expiresInMinutes"} and mailed["email"] == ALICE
    assert isinstance(mailed["expiresInMinutes"], int) and 0 < mailed["expiresInMinutes"] <= 10
    params = redirect_params(answer)
    assert params["state"] == "st-123"
    tokens = _exchange(served, client_id, params["code"], verifier)
    assert tokens.status_code == 200, tokens.text
    assert tokens.headers["cache-control"] == "no-store"
    document = tokens.json()
    assert document["token_type"] == "Bearer" and document["scope"] == "read write"
    claims = payload(document["access_token"])
    assert claims["iss"] == "127.0.0.1" and claims["sub"] == f"person:{ALICE}" and claims["brain"] == ALICE_BRAIN
    assert claims["scope"] == ["read", "write"] and claims["aud"] == served.url
    opened = httpx2.get(
        f"{served.url}/v1/brains/{ALICE_BRAIN}/counts",
        headers={"Authorization": f"Bearer {document['access_token']}"},
    )
    assert opened.status_code == 200 and opened.json()["brain"] == ALICE_BRAIN
    other = httpx2.get(
        f"{served.url}/v1/brains/notes/counts", headers={"Authorization": f"Bearer {document['access_token']}"}
    )
    assert other.status_code in (403, 404)
    # nothing replayable reached the log: no code, no token, no refresh token
    log = served.log_path.read_text()
    for secret in (mailed["code"], params["code"], document["access_token"], document["refresh_token"]):
        assert secret not in log


def test_the_authorization_code_is_single_use_and_checks_the_pkce_verifier(served):
    client_id = register_client(served)
    verifier, challenge = pkce()
    with httpx2.Client() as http:
        code = redirect_params(sign_in(http, served, open_sign_in(http, served, client_id, challenge)))["code"]
    wrong_verifier, _ = pkce()
    bad = _exchange(served, client_id, code, wrong_verifier)
    assert bad.status_code == 400 and bad.json()["error"] == "invalid_grant"
    assert "PKCE" in bad.json()["error_description"]
    # the failed exchange spent the code: the right verifier now meets "already used"
    again = _exchange(served, client_id, code, verifier)
    assert again.status_code == 400 and again.json()["error"] == "invalid_grant"
    assert "already used" in again.json()["error_description"]
    with httpx2.Client() as http:
        code = redirect_params(sign_in(http, served, open_sign_in(http, served, client_id, challenge)))["code"]
    first = _exchange(served, client_id, code, verifier)
    assert first.status_code == 200
    reused = _exchange(served, client_id, code, verifier)
    assert reused.status_code == 400 and "already used" in reused.json()["error_description"]
    # a replayed code revokes what its first exchange issued: that refresh token stops
    refresh = httpx2.post(
        f"{served.url}/auth/token",
        data={"grant_type": "refresh_token", "refresh_token": first.json()["refresh_token"], "client_id": client_id},
    )
    assert refresh.status_code == 400 and "revoked" in refresh.json()["error_description"]


def test_an_account_without_a_register_line_is_refused_sign_in_failed(served):
    client_id = register_client(served)
    _, challenge = pkce()
    with httpx2.Client() as http:
        page = open_sign_in(http, served, client_id, challenge)
        code_page = submit(http, page, "email", BOB)
        assert code_page.status_code == 200  # a code is sent either way: the page does not tell who is registered
        answer = submit(http, code_page, "code", served.mail.code_for(BOB))
    assert answer.status_code == 403 and "location" not in answer.headers
    assert forms(answer.text).refusal == "sign_in_failed"


def test_a_wrong_code_then_the_right_one_then_the_same_again(served):
    client_id = register_client(served)
    _, challenge = pkce()
    with httpx2.Client() as http:
        page = open_sign_in(http, served, client_id, challenge)
        code_page = submit(http, page, "email", ALICE)
        right = served.mail.code_for(ALICE)
        wrong = submit(http, code_page, "code", "00000000" if right != "00000000" else "11111111")
        assert wrong.status_code == 400 and forms(wrong.text).refusal == "wrong_code"
        answer = submit(http, wrong, "code", right)
        redirect_params(answer)
        reused = submit(http, wrong, "code", right)  # the sign-in finished: its code answers no more
    assert reused.status_code == 400 and forms(reused.text).refusal == "request_unknown"


def test_too_many_wrong_codes_burn_the_code(served):
    client_id = register_client(served)
    _, challenge = pkce()
    with httpx2.Client() as http:
        code_page = submit(http, open_sign_in(http, served, client_id, challenge), "email", "carol@example.com")
        right = served.mail.code_for("carol@example.com")
        wrong = "00000000" if right != "00000000" else "11111111"
        answers = [submit(http, code_page, "code", wrong) for _ in range(5)]
        assert [forms(a.text).refusal for a in answers] == ["wrong_code"] * 4 + ["code_burnt"]
        late = submit(http, code_page, "code", right)
    assert late.status_code == 400 and forms(late.text).refusal == "code_unknown"


def test_a_sign_in_answers_only_the_browser_that_opened_it(served):
    client_id = register_client(served)
    _, challenge = pkce()
    with httpx2.Client() as http:
        page = open_sign_in(http, served, client_id, challenge)
    with httpx2.Client() as stranger:  # no cookie: the request id alone opens nothing
        answer = submit(stranger, page, "email", ALICE)
    assert answer.status_code == 400 and forms(answer.text).refusal == "request_unknown"


def test_a_mail_sender_answering_500_refuses_the_sign_in_loudly(served):
    client_id = register_client(served)
    _, challenge = pkce()
    with httpx2.Client() as http:
        page = open_sign_in(http, served, client_id, challenge)
        served.mail.mode = "500"
        try:
            failed = submit(http, page, "email", "dave@example.com")
        finally:
            served.mail.mode = "ok"
        assert failed.status_code == 502 and forms(failed.text).refusal == "mail_failed"
        assert "answered 500" in failed.text
        # the code that did reach the receiver (and was refused) never signs anyone in
        tried = http.post(
            f"{served.url}/auth/sign-in/code",
            data={
                "request": forms(page.text).forms[0]["inputs"]["request"],
                "code": served.mail.code_for("dave@example.com"),
            },
        )
    assert tried.status_code == 400 and forms(tried.text).refusal == "code_unknown"


def test_codes_are_rate_limited_per_email(served):
    client_id = register_client(served)
    _, challenge = pkce()
    with httpx2.Client() as http:
        page = open_sign_in(http, served, client_id, challenge)
        statuses = [submit(http, page, "email", "erin@example.com").status_code for _ in range(6)]
    assert statuses == [200] * 5 + [429]


def test_the_pages_are_locked_down(served):
    client_id = register_client(served)
    _, challenge = pkce()
    with httpx2.Client() as http:
        page = open_sign_in(http, served, client_id, challenge)
    csp = page.headers["content-security-policy"]
    assert "default-src 'none'" in csp and "frame-ancestors 'none'" in csp and "script-src 'self';" in csp
    assert "unsafe-inline" not in csp and "unsafe-eval" not in csp
    assert page.headers["x-frame-options"] == "DENY"
    cookie = page.headers["set-cookie"]
    assert "SameSite=Strict" in cookie and "HttpOnly" in cookie
    passkey, by_email = forms(page.text).forms
    assert by_email["method"] == "post" and by_email["action"] == "/auth/sign-in/email"
    assert set(by_email["inputs"]) == {"request", "email"}
    # the passkey form is hidden until the page's one script (script-src 'self') finds WebAuthn
    assert passkey["action"] == "/auth/sign-in/passkey" and set(passkey["inputs"]) == {"request", "credential"}
    assert "<form id=passkey" in page.text and " hidden>" in page.text
    script = httpx2.get(f"{served.url}/auth/sign-in.js")
    assert script.status_code == 200 and script.headers["content-type"].startswith("text/javascript")


@pytest.mark.parametrize(
    "change, error",
    [
        ({"client_id": "client_unknown"}, "invalid_client"),
        ({"redirect_uri": "http://127.0.0.1:9/elsewhere"}, "invalid_request"),
        ({"code_challenge_method": "plain"}, "invalid_request"),
        ({"resource": "https://another.example/mcp"}, "invalid_target"),
        ({"scope": "read admin"}, "invalid_scope"),
    ],
)
def test_a_bad_authorization_request_is_refused_on_the_page(served, change, error):
    client_id = register_client(served)
    _, challenge = pkce()
    params = {
        "response_type": "code",
        "client_id": client_id,
        "redirect_uri": REDIRECT,
        "state": "s",
        "code_challenge": challenge,
        "code_challenge_method": "S256",
        **change,
    }
    answer = httpx2.get(f"{served.url}/auth/authorize", params=params)
    assert answer.status_code in (400, 401) and forms(answer.text).refusal == error
    assert "location" not in answer.headers


def test_registration_takes_public_clients_with_safe_redirects_only(served):
    plain_http = httpx2.post(f"{served.url}/auth/register", json={"redirect_uris": ["http://example.com/cb"]})
    assert plain_http.status_code == 400 and plain_http.json()["error"] == "invalid_redirect_uri"
    secret = httpx2.post(
        f"{served.url}/auth/register",
        json={"redirect_uris": [REDIRECT], "token_endpoint_auth_method": "client_secret_basic"},
    )
    assert secret.status_code == 400 and secret.json()["error"] == "invalid_client_metadata"


def test_a_missing_register_is_no_refusal_to_start_and_recognises_nobody(tmp_path):
    with start_sign_in(tmp_path, register=None) as server:
        assert not server.register.exists()
        client_id = register_client(server)
        _, challenge = pkce()
        with httpx2.Client() as http:
            answer = sign_in(http, server, open_sign_in(http, server, client_id, challenge))
        assert answer.status_code == 403 and forms(answer.text).refusal == "sign_in_failed"
        # the register placed while it runs is read at the next sign-in: no restart
        server.register.write_text(f"person:{ALICE}  {ALICE_BRAIN}\n")
        with httpx2.Client() as http:
            redirect_params(sign_in(http, server, open_sign_in(http, server, client_id, challenge)))
