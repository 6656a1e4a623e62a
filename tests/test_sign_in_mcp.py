"""The official MCP Python SDK's OAuth client against a real ``brainy serve --sign-in`` (seed 001, "Sign-in — this
door as its own issuer"; docs/sign-in.md "Connecting a hosted agent by its URL").

The client is given the server's ``/mcp`` URL and nothing else: it is refused 401, discovers the RFC 9728
document and this server's RFC 8414 metadata, registers itself (RFC 7591), sends the person to the
authorization URL (here: the pages' forms submitted over HTTP, the code read from a loopback mail
receiver), exchanges the code with its PKCE verifier, and lists and calls tools with the minted bk1
token. Then the refresh grant rotates, a replayed refresh token revokes its family, and a minted token
listed in the revoked list is refused by name.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx2
import pytest
from mcp import Client
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata, OAuthToken
from signin_rig import ALICE, ALICE_BRAIN, REDIRECT, SignInServer, payload, sign_in, start_sign_in

pytestmark = pytest.mark.slow

TIMEOUT = 60.0


class Memory:
    """The SDK's TokenStorage, in memory: what a hosted agent would keep for this connection."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


class Person:
    """The person at the browser: opens the authorization URL, submits the forms, hands back the redirect."""

    def __init__(self, server: SignInServer) -> None:
        self.server = server
        self.redirected: dict[str, str] = {}
        self.opened: list[str] = []

    async def redirect_handler(self, url: str) -> None:
        self.opened.append(url)
        with httpx2.Client(timeout=TIMEOUT) as browser:
            page = browser.get(url)
            assert page.status_code == 200, page.text
            answer = sign_in(browser, self.server, page, ALICE)
        assert answer.status_code in (302, 303), answer.text
        location = answer.headers["location"]
        assert location.startswith(REDIRECT)
        self.redirected = {k: v[0] for k, v in parse_qs(urlsplit(location).query).items()}

    async def callback_handler(self) -> AuthorizationCodeResult:
        return AuthorizationCodeResult(code=self.redirected["code"], state=self.redirected.get("state"))


@pytest.fixture(scope="module")
def served(tmp_path_factory) -> SignInServer:
    with start_sign_in(tmp_path_factory.mktemp("signin-mcp")) as server:
        yield server


def _connect(server: SignInServer, storage: Memory, person: Person) -> tuple[Client, httpx2.AsyncClient]:
    provider = OAuthClientProvider(
        server_url=f"{server.url}/mcp",
        client_metadata=OAuthClientMetadata(
            redirect_uris=[REDIRECT],
            client_name="brainy sign-in test",
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
            token_endpoint_auth_method="none",
        ),
        storage=storage,
        redirect_handler=person.redirect_handler,
        callback_handler=person.callback_handler,
    )
    http = httpx2.AsyncClient(auth=provider, timeout=TIMEOUT)
    return Client(streamable_http_client(f"{server.url}/mcp", http_client=http)), http


def _with_key(server: SignInServer, token: str) -> tuple[Client, httpx2.AsyncClient]:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=TIMEOUT)
    return Client(streamable_http_client(f"{server.url}/mcp", http_client=http)), http


async def _conversation(client: Client, http: httpx2.AsyncClient, id_: str = "ada") -> dict[str, Any]:
    try:
        async with client:
            tools = [t.name for t in (await client.list_tools()).tools]
            added = await client.call_tool(
                "brainy_add", {"body": {"type": "person", "id": id_, "data": f"{id_} Lovelace"}}
            )
            counts = await client.call_tool("brainy_counts", {})
            return {"tools": tools, "added": added.is_error, "counts": counts.structured_content}
    finally:
        await http.aclose()


def _run(coro: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coro, TIMEOUT))


def _refresh(server: SignInServer, client_id: str, refresh_token: str) -> httpx2.Response:
    return httpx2.post(
        f"{server.url}/auth/token",
        data={"grant_type": "refresh_token", "refresh_token": refresh_token, "client_id": client_id},
    )


def test_the_mcp_sdk_signs_in_by_url_alone_and_calls_tools_with_the_minted_token(served):
    storage, person = Memory(), Person(served)
    seen = _run(_conversation(*_connect(served, storage, person)))
    # discovery, registration and the authorization request all happened through the SDK
    assert storage.client is not None and storage.client.client_id.startswith("client_")
    (opened,) = person.opened
    asked = {k: v[0] for k, v in parse_qs(urlsplit(opened).query).items()}
    assert opened.startswith(f"{served.url}/auth/authorize?")
    assert asked["code_challenge_method"] == "S256" and asked["client_id"] == storage.client.client_id
    assert asked["resource"].rstrip("/") == served.url  # RFC 8707, from the RFC 9728 document
    assert asked["scope"] == "read write"  # the document's default: never the owner triple unasked
    assert "brainy_add" in seen["tools"] and "brainy_counts" in seen["tools"]
    assert seen["added"] is False and seen["counts"]["entities"] == 1 and seen["counts"]["brain"] == ALICE_BRAIN
    assert storage.tokens is not None
    claims = payload(storage.tokens.access_token)
    assert claims["sub"] == f"person:{ALICE}" and claims["brain"] == ALICE_BRAIN and claims["aud"] == served.url

    # the refresh grant rotates: a new pair, and the old refresh token is spent
    first = storage.tokens.refresh_token
    assert first is not None
    rotated = _refresh(served, storage.client.client_id, first)
    assert rotated.status_code == 200, rotated.text
    fresh = rotated.json()
    assert fresh["refresh_token"] != first and fresh["access_token"] != storage.tokens.access_token
    assert payload(fresh["access_token"])["jti"] != claims["jti"]
    again = _run(_conversation(*_with_key(served, fresh["access_token"]), "byron"))
    assert (
        again["added"] is False and again["counts"]["entities"] == 2
    )  # the minted token from the refresh writes to the same brain
    replayed = _refresh(served, storage.client.client_id, first)
    assert replayed.status_code == 400 and "already used" in replayed.json()["error_description"]
    # a replayed refresh token revokes its family: the newest one stops too
    family = _refresh(served, storage.client.client_id, fresh["refresh_token"])
    assert family.status_code == 400 and "family" in family.json()["error_description"]

    # a minted token in the revoked list is refused by name, as any issuer's is
    token = fresh["access_token"]
    jti, exp = payload(token)["jti"], payload(token)["exp"]
    fd = os.open(served.revoked, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        json.dump({"revoked": [{"jti": jti, "exp": exp}]}, out)
    deadline = time.monotonic() + 15.0  # the list is re-read on its mtime, checked at most every 5 s
    while True:
        refused = httpx2.get(
            f"{served.url}/v1/brains/{ALICE_BRAIN}/counts", headers={"Authorization": f"Bearer {token}"}
        )
        if refused.status_code != 200 or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert refused.status_code == 401 and refused.json()["error"]["name"] == "BRAINY_KEY_REVOKED"
    assert refused.json()["error"]["jti"] == jti


def test_the_owner_triple_only_when_asked_for(served):
    """Asked for by name, the registered account gets ``["read","write","owner"]`` and a ruling door lets it
    past the owner check; the same account's default token is refused there by name."""
    from signin_rig import open_sign_in, pkce, redirect_params, register_client

    client_id = register_client(served)
    tokens: dict[str, str] = {}
    for scope in ("read write owner", None):
        verifier, challenge = pkce()
        more = {"scope": scope} if scope else {}
        with httpx2.Client() as browser:
            code = redirect_params(
                sign_in(browser, served, open_sign_in(browser, served, client_id, challenge, **more))
            )
        answer = httpx2.post(
            f"{served.url}/auth/token",
            data={
                "grant_type": "authorization_code",
                "code": code["code"],
                "client_id": client_id,
                "redirect_uri": REDIRECT,
                "code_verifier": verifier,
            },
        )
        assert answer.status_code == 200, answer.text
        tokens[scope or "default"] = answer.json()["access_token"]
    assert payload(tokens["read write owner"])["scope"] == ["read", "write", "owner"]
    assert payload(tokens["default"])["scope"] == ["read", "write"]
    ratify = f"{served.url}/v1/brains/{ALICE_BRAIN}/policy/ratify"
    plain = httpx2.post(ratify, json={"id": "no-such-rule"}, headers={"Authorization": f"Bearer {tokens['default']}"})
    assert plain.status_code == 403 and plain.json()["error"]["name"] == "PolicyOwnerScopeRequiredError"
    owner = httpx2.post(
        ratify, json={"id": "no-such-rule"}, headers={"Authorization": f"Bearer {tokens['read write owner']}"}
    )
    assert owner.json()["error"]["name"] != "PolicyOwnerScopeRequiredError"  # past the ruling question
