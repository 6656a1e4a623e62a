"""The sign-in in a real browser: Debian's headless chromium driven by playwright against a real ``brainy serve
--sign-in`` (seed 001, "Sign-in — this door as its own issuer"; docs/sign-in.md).

A person signs in by email code, lands back on the client's redirect, adds a passkey through the browser's
virtual authenticator (CDP ``WebAuthn.addVirtualAuthenticator``), and signs in with that passkey next
time, no code mailed. The same pages with scripts off still sign in by code, the passkey form never
shown. A screenshot of each page is kept under the test's ``artifacts`` directory.

chromium is tools/test-services' (``/usr/bin/chromium``); playwright's own browser downloads are never used.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx2
import pytest
from playwright.sync_api import Browser, Page, sync_playwright
from server import HOST
from signin_rig import ALICE, ALICE_BRAIN, SignInServer, payload, pkce, start_sign_in

pytestmark = pytest.mark.slow

CHROMIUM = "/usr/bin/chromium"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    f"--host-resolver-rules=MAP localhost {HOST}",  # the public URL's host, for WebAuthn, is this loopback
]
WAIT_MS = 20_000


class Callback:
    """The client's redirect target on loopback: keeps each query it is sent, answers a small page."""

    def __init__(self) -> None:
        self.seen: list[dict[str, str]] = []
        callback = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (the stdlib's name)
                if urlsplit(self.path).path == "/callback":  # not the browser's /favicon.ico
                    callback.seen.append({k: v[0] for k, v in parse_qs(urlsplit(self.path).query).items()})
                body = b"<!doctype html><title>client</title><h1 id=back>Back at the client</h1>"
                self.send_response(200)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer((HOST, 0), Handler)
        self.url = f"http://{HOST}:{self.server.server_address[1]}/callback"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def served(tmp_path_factory) -> Iterator[SignInServer]:
    with start_sign_in(tmp_path_factory.mktemp("signin-browser"), public_host="localhost") as server:
        yield server


@pytest.fixture(scope="module")
def callback() -> Iterator[Callback]:
    made = Callback()
    yield made
    made.close()


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as driver:
        launched = driver.chromium.launch(executable_path=CHROMIUM, headless=True, args=FLAGS)
        yield launched
        launched.close()


@pytest.fixture
def artifacts(tmp_path) -> Path:
    where = tmp_path / "artifacts"
    where.mkdir()
    return where


def _client(served: SignInServer, callback: Callback) -> str:
    answer = httpx2.post(f"{served.url}/auth/register", json={"redirect_uris": [callback.url]})
    assert answer.status_code == 201, answer.text
    return str(answer.json()["client_id"])


def _authorize_url(served: SignInServer, callback: Callback, client_id: str, challenge: str) -> str:
    query = {
        "response_type": "code",
        "client_id": client_id,
        "redirect_uri": callback.url,
        "state": "browser-state",
        "code_challenge": challenge,
        "code_challenge_method": "S256",
    }
    return f"{served.url}/auth/authorize?{urlencode(query)}"


def _exchange(served: SignInServer, callback: Callback, client_id: str, verifier: str) -> dict[str, Any]:
    code = callback.seen[-1]
    assert code["state"] == "browser-state"
    answer = httpx2.post(
        f"{served.url}/auth/token",
        data={
            "grant_type": "authorization_code",
            "code": code["code"],
            "client_id": client_id,
            "redirect_uri": callback.url,
            "code_verifier": verifier,
        },
    )
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


def _shot(page: Page, artifacts: Path, name: str) -> None:
    page.screenshot(path=str(artifacts / f"{name}.png"), full_page=True)
    assert (artifacts / f"{name}.png").stat().st_size > 0


def _sign_in_by_code(page: Page, served: SignInServer, artifacts: Path, prefix: str) -> None:
    page.fill("#email", ALICE)
    _shot(page, artifacts, f"{prefix}1-email")
    page.click("#by-email button")
    page.wait_for_selector("#code", timeout=WAIT_MS)
    _shot(page, artifacts, f"{prefix}2-code")
    page.fill("#code", served.mail.code_for(ALICE))
    page.click("#by-code button")
    page.wait_for_selector("#back", timeout=WAIT_MS)
    _shot(page, artifacts, f"{prefix}3-back-at-the-client")


def test_sign_in_by_code_then_a_passkey_then_sign_in_by_passkey(served, callback, browser, artifacts):
    client_id = _client(served, callback)
    context = browser.new_context()
    page = context.new_page()
    cdp = context.new_cdp_session(page)
    cdp.send("WebAuthn.enable")
    authenticator = cdp.send(
        "WebAuthn.addVirtualAuthenticator",
        {
            "options": {
                "protocol": "ctap2",
                "transport": "internal",
                "hasResidentKey": True,
                "hasUserVerification": True,
                "isUserVerified": True,
                "automaticPresenceSimulation": True,
            }
        },
    )["authenticatorId"]
    errors: list[str] = []
    page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)

    # 1. the first sign-in, by email code
    verifier, challenge = pkce()
    page.goto(_authorize_url(served, callback, client_id, challenge))
    assert page.is_visible("#passkey button")  # the script ran under the page's CSP and found WebAuthn
    _sign_in_by_code(page, served, artifacts, "a")
    first = _exchange(served, callback, client_id, verifier)
    assert payload(first["access_token"])["sub"] == f"person:{ALICE}"

    # 2. the signed-in browser adds a passkey
    page.goto(f"{served.url}/auth/passkeys")
    page.wait_for_selector("#passkey button", state="visible", timeout=WAIT_MS)
    _shot(page, artifacts, "b1-passkeys")
    page.click("#passkey button")
    page.wait_for_selector("#added", timeout=WAIT_MS)
    _shot(page, artifacts, "b2-passkey-added")
    held = cdp.send("WebAuthn.getCredentials", {"authenticatorId": authenticator})["credentials"]
    assert len(held) == 1 and held[0]["isResidentCredential"] is True
    assert held[0]["rpId"] == "localhost"

    # 3. next time: the passkey, and no code is mailed
    mailed = len(served.mail.seen)
    verifier, challenge = pkce()
    page.goto(_authorize_url(served, callback, client_id, challenge))
    _shot(page, artifacts, "c1-sign-in-offers-the-passkey")
    page.click("#passkey button")
    page.wait_for_selector("#back", timeout=WAIT_MS)
    _shot(page, artifacts, "c2-back-at-the-client-by-passkey")
    assert len(served.mail.seen) == mailed
    second = _exchange(served, callback, client_id, verifier)
    claims = payload(second["access_token"])
    assert claims["sub"] == f"person:{ALICE}" and claims["brain"] == ALICE_BRAIN
    opened = httpx2.get(
        f"{served.url}/v1/brains/{ALICE_BRAIN}/counts", headers={"Authorization": f"Bearer {second['access_token']}"}
    )
    assert opened.status_code == 200
    assert (
        held[0]["signCount"]
        < cdp.send("WebAuthn.getCredentials", {"authenticatorId": authenticator})["credentials"][0]["signCount"]
    )
    assert not [e for e in errors if "Content Security Policy" in e], errors
    context.close()


def test_with_scripts_off_the_pages_still_sign_in_by_code(served, callback, browser, artifacts):
    client_id = _client(served, callback)
    context = browser.new_context(java_script_enabled=False)
    page = context.new_page()
    verifier, challenge = pkce()
    page.goto(_authorize_url(served, callback, client_id, challenge))
    assert not page.is_visible("#passkey button")  # no script: the passkey form stays hidden
    _sign_in_by_code(page, served, artifacts, "noscript-")
    assert payload(_exchange(served, callback, client_id, verifier)["access_token"])["brain"] == ALICE_BRAIN
    context.close()
