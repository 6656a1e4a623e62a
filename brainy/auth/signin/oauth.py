"""The OAuth 2.1 authorization server a ``--sign-in`` door is, sans-IO: every step is handed ``now`` and the
form it was sent, and answers a document, a redirect URL, or an :class:`OAuthError` naming the check.

The steps (the glue in ``brainy.auth.signin.door`` carries them over HTTP):

1. ``register_client``: RFC 7591 dynamic registration. Public clients only (PKCE is their proof; no
   secret is issued), ``authorization_code`` and ``refresh_token``, redirect URIs https or loopback http.
2. ``authorize``: the authorization request (``response_type=code``, a registered ``client_id`` and
   ``redirect_uri``, ``state``, an ``S256`` ``code_challenge``, optional ``scope`` and RFC 8707
   ``resource``) becomes a :class:`Pending` sign-in held here, tied to the browser that opened it.
3. ``send_code`` / ``check_code``: the one-time code a person is mailed, compared in constant time,
   short-lived, a few attempts, rate-limited per email and per client. The right code for an account
   the register names answers the redirect to ``redirect_uri`` with ``code`` and ``state``; an account
   with no register line is refused ``sign_in_failed`` and no code is issued.
4. ``token``: the authorization-code grant (single use, short-lived, the PKCE verifier checked) and the
   refresh grant (refresh tokens rotate; a reused one revokes its whole family). Each mints a bk1 token
   from the door's keyring: reach = the register's store, scope = what was asked and the account may
   have, ``aud`` = the resource.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import ipaddress
import re
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode, urlsplit

from brainy.auth.signin.limits import Limit
from brainy.auth.signin.records import Records
from brainy.auth.signin.register import Register

ACCESS_TTL = 3600  # a minted bk1 token's life, seconds
REFRESH_TTL = 30 * 86400
GRANT_TTL = 60  # an authorization code's life: it is exchanged by the client at once
CODE_MINUTES = 10  # a mailed code's life (the mail's expiresInMinutes)
PENDING_TTL = 30 * 60  # how long a person has to finish a sign-in they started
CODE_ATTEMPTS = 5  # wrong codes before the code is burnt
CODE_DIGITS = 8
HELD = 10_000  # pending sign-ins and unexchanged codes held at most (each is small)
SCOPE_WORDS = ("read", "write", "owner")
DEFAULT_SCOPE = ("read", "write")  # the owner triple is never a default: it is asked for by name
_CHALLENGE = re.compile(r"[A-Za-z0-9_-]{43}")
_VERIFIER = re.compile(r"[A-Za-z0-9._~-]{43,128}")
_EMAIL = re.compile(r"[^@\s]{1,64}@[^@\s]{1,189}")


class OAuthError(Exception):
    """A refused step: ``error`` is the OAuth (or sign-in) error code, ``description`` names the check."""

    def __init__(self, error: str, description: str, status: int = 400) -> None:
        super().__init__(f"{error}: {description}")
        self.error = error
        self.description = description
        self.status = status

    def document(self) -> dict[str, str]:
        return {"error": self.error, "error_description": self.description}


@dataclass
class Pending:
    """A sign-in in progress: the client's authorization request, and the code mailed for it, if any."""

    id: str
    client_id: str
    redirect_uri: str
    state: str
    challenge: str
    scope: tuple[str, ...]
    resource: str
    browser: str  # SHA-256 of the browser's sign-in cookie: the request answers only the browser that opened it
    expires: float
    email: str | None = None
    code: str | None = None
    code_expires: float = 0.0
    attempts: int = 0
    passkey_challenge: bytes | None = None  # the WebAuthn challenge the page's passkey form answers


@dataclass
class Grant:
    """An authorization code, issued and not yet exchanged."""

    client_id: str
    redirect_uri: str
    challenge: str
    account: str
    brain: str
    scope: tuple[str, ...]
    resource: str
    expires: float


def digest(secret: str) -> str:
    """The SHA-256 a secret is held under: never the secret itself."""
    return hashlib.sha256(secret.encode()).hexdigest()


def s256(verifier: str) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(verifier.encode("ascii")).digest()).rstrip(b"=").decode("ascii")


def _redirect_ok(uri: str) -> bool:
    """https anywhere, http only to a loopback address (OAuth 2.1 section 8.4.2), no fragment."""
    try:
        parts = urlsplit(uri)
    except ValueError:
        return False
    if parts.fragment or not parts.hostname:
        return False
    if parts.scheme == "https":
        return True
    if parts.scheme != "http":
        return False
    if parts.hostname == "localhost":
        return True
    try:
        return ipaddress.ip_address(parts.hostname).is_loopback
    except ValueError:
        return False


def _one(form: Mapping[str, list[str]], name: str, required: bool = True) -> str | None:
    values = form.get(name) or []
    if len(values) > 1:
        raise OAuthError("invalid_request", f"{name}: given more than once")
    if not values or values[0] == "":
        if required:
            raise OAuthError("invalid_request", f"{name}: required")
        return None
    return values[0]


def asked_scope(text: str | None) -> tuple[str, ...]:
    """The scope words asked for as one of the three mintable arrays: ``owner`` is the whole triple,
    ``write`` carries ``read``. Absent: read and write, never the owner triple."""
    if text is None:
        return DEFAULT_SCOPE
    words = set(text.split())
    unknown = words - set(SCOPE_WORDS)
    if unknown:
        raise OAuthError("invalid_scope", f"scope {sorted(unknown)}: this door mints only {list(SCOPE_WORDS)}")
    if "owner" in words:
        return SCOPE_WORDS
    if "write" in words:
        return ("read", "write")
    return ("read",) if words else DEFAULT_SCOPE


@dataclass
class AuthorizationServer:
    public_url: str  # the issuer URL and the resource this door protects, no trailing slash
    records: Records
    register: Register
    mint: Callable[[str, str, tuple[str, ...], str], tuple[str, dict[str, Any]]]  # (sub, brain, scope, aud)
    code_limit: Limit = field(default_factory=lambda: Limit(5, 600.0))  # codes mailed per email / per client
    client_code_limit: Limit = field(default_factory=lambda: Limit(30, 600.0))
    token_limit: Limit = field(default_factory=lambda: Limit(60, 60.0))  # token requests per client
    register_limit: Limit = field(default_factory=lambda: Limit(30, 60.0))  # registrations, all callers
    pending: dict[str, Pending] = field(default_factory=dict)
    grants: dict[str, Grant] = field(default_factory=dict)  # digest(code) -> grant
    # digest(code) -> (its expiry, the refresh family it started): a replay is named "already used", not
    # unknown, and revokes what the first exchange issued (OAuth 2.1 section 4.1.3)
    spent: dict[str, tuple[float, str]] = field(default_factory=dict)

    # --- discovery ------------------------------------------------------------------------------

    def metadata(self) -> dict[str, Any]:
        """RFC 8414 authorization server metadata."""
        base = self.public_url
        return {
            "issuer": base,
            "authorization_endpoint": f"{base}/auth/authorize",
            "token_endpoint": f"{base}/auth/token",
            "registration_endpoint": f"{base}/auth/register",
            "response_types_supported": ["code"],
            "grant_types_supported": ["authorization_code", "refresh_token"],
            "code_challenge_methods_supported": ["S256"],
            "token_endpoint_auth_methods_supported": ["none"],
            "scopes_supported": list(SCOPE_WORDS),
        }

    # --- registration (RFC 7591) -------------------------------------------------------------------

    def register_client(self, document: Any, now: float) -> dict[str, Any]:
        if not self.register_limit.allow("*", now):
            raise OAuthError("rate_limited", "too many client registrations; try again in a minute", 429)
        if not isinstance(document, dict):
            raise OAuthError("invalid_client_metadata", "the registration is one JSON object")
        uris = document.get("redirect_uris")
        if not isinstance(uris, list) or not uris or len(uris) > 10:
            raise OAuthError("invalid_redirect_uri", "redirect_uris: one to ten URIs")
        for uri in uris:
            if not isinstance(uri, str) or len(uri) > 2000 or not _redirect_ok(uri):
                raise OAuthError("invalid_redirect_uri", f"{uri!r}: https, or http to a loopback address")
        method = document.get("token_endpoint_auth_method", "none")
        if method != "none":
            raise OAuthError("invalid_client_metadata", "token_endpoint_auth_method: only none (PKCE proves)")
        grants = document.get("grant_types", ["authorization_code", "refresh_token"])
        if not isinstance(grants, list) or not set(grants) <= {"authorization_code", "refresh_token"}:
            raise OAuthError("invalid_client_metadata", "grant_types: authorization_code and refresh_token only")
        responses = document.get("response_types", ["code"])
        if responses != ["code"]:
            raise OAuthError("invalid_client_metadata", "response_types: code only")
        name = document.get("client_name")
        name = name[:200] if isinstance(name, str) else None
        client_id = "client_" + secrets.token_urlsafe(18)
        record = {
            "client_id": client_id,
            "client_id_issued_at": int(now),
            "redirect_uris": uris,
            "token_endpoint_auth_method": "none",
            "grant_types": grants,
            "response_types": ["code"],
        }
        if name:
            record["client_name"] = name
        if isinstance(document.get("scope"), str):
            record["scope"] = " ".join(asked_scope(document["scope"]))
        self.records.put(f"client:{client_id}", record)
        return record

    def client(self, client_id: str | None) -> dict[str, Any]:
        record = self.records.get(f"client:{client_id}") if client_id else None
        if record is None:
            raise OAuthError("invalid_client", f"client_id {client_id!r} is not registered here", 401)
        return record

    # --- the authorization request -----------------------------------------------------------------

    def _resource(self, value: str | None) -> str:
        """RFC 8707: the resource must be this server (its origin, or its /mcp); answered without a slash."""
        if value is None:
            return self.public_url
        plain = value.rstrip("/")
        if plain not in (self.public_url, f"{self.public_url}/mcp"):
            raise OAuthError("invalid_target", f"resource {value!r} is not this server ({self.public_url})")
        return plain

    def _sweep(self, now: float) -> None:
        for table in (self.pending, self.grants):
            if len(table) >= HELD:
                for key in [k for k, v in table.items() if v.expires <= now]:
                    del table[key]
        if len(self.spent) >= HELD:
            self.spent = {k: v for k, v in self.spent.items() if v[0] > now}

    def authorize(self, form: Mapping[str, list[str]], browser: str, now: float) -> Pending:
        """The client's authorization request, checked whole, held as a sign-in awaiting its person."""
        client_id = _one(form, "client_id")
        client = self.client(client_id)
        redirect_uri = _one(form, "redirect_uri", required=False)
        if redirect_uri is None and len(client["redirect_uris"]) == 1:
            redirect_uri = client["redirect_uris"][0]
        if redirect_uri not in client["redirect_uris"]:
            raise OAuthError("invalid_request", "redirect_uri is not one this client registered")
        if _one(form, "response_type") != "code":
            raise OAuthError("unsupported_response_type", "response_type: code")
        state = _one(form, "state")
        if len(state or "") > 500:
            raise OAuthError("invalid_request", "state: at most 500 characters")
        if _one(form, "code_challenge_method") != "S256":
            raise OAuthError("invalid_request", "code_challenge_method: S256 (PKCE is required)")
        challenge = _one(form, "code_challenge")
        if not _CHALLENGE.fullmatch(challenge or ""):
            raise OAuthError("invalid_request", "code_challenge: 43 base64url characters (S256)")
        scope = asked_scope(_one(form, "scope", required=False))
        resource = self._resource(_one(form, "resource", required=False))
        self._sweep(now)
        if len(self.pending) >= HELD:
            raise OAuthError("temporarily_unavailable", "too many sign-ins in progress; try again shortly", 503)
        held = Pending(
            secrets.token_urlsafe(24),
            str(client_id),
            str(redirect_uri),
            str(state),
            str(challenge),
            scope,
            resource,
            browser,
            now + PENDING_TTL,
        )
        self.pending[held.id] = held
        return held

    def find(self, request_id: str | None, browser: str, now: float) -> Pending:
        """The sign-in a form names, only for the browser that opened it and only while it is open."""
        held = self.pending.get(request_id or "")
        if held is None or not hmac.compare_digest(held.browser, browser):
            raise OAuthError("request_unknown", "this sign-in is unknown, finished, or was opened in another browser")
        if now >= held.expires:
            del self.pending[held.id]
            raise OAuthError("request_expired", "this sign-in took too long; start again from the app")
        return held

    # --- the mailed code ------------------------------------------------------------------------

    def send_code(self, held: Pending, email_text: str | None, now: float) -> tuple[str, str]:
        """A fresh code for ``email`` on this sign-in: ``(email, code)`` for the glue to mail. Any code sent
        before for this sign-in stops answering."""
        email = (email_text or "").strip().lower()
        if not _EMAIL.fullmatch(email) or not email.isprintable():
            raise OAuthError("invalid_email", "that is not an email address")
        if not self.code_limit.allow(email, now) or not self.client_code_limit.allow(held.client_id, now):
            raise OAuthError("rate_limited", "too many codes were sent; wait a few minutes and try again", 429)
        code = "".join(secrets.choice("0123456789") for _ in range(CODE_DIGITS))
        held.email, held.code, held.code_expires, held.attempts = email, code, now + CODE_MINUTES * 60, 0
        return email, code

    def drop_code(self, held: Pending) -> None:
        """The code never reached the person (the mail sender refused): it must not answer either."""
        held.code = None

    def check_code(self, held: Pending, code_text: str | None, now: float) -> str:
        """The right code answers the redirect URL carrying an authorization code and ``state``; the sign-in
        is then finished, so the same code never answers twice."""
        if held.code is None or held.email is None:
            raise OAuthError("code_unknown", "no code is waiting for this sign-in; ask for a new one")
        if now >= held.code_expires:
            held.code = None
            raise OAuthError("code_expired", "that code has expired; ask for a new one")
        given = "".join((code_text or "").split())
        if not hmac.compare_digest(given.encode(), held.code.encode()):  # constant time: no prefix leaks
            held.attempts += 1
            if held.attempts >= CODE_ATTEMPTS:
                held.code = None
                raise OAuthError("code_burnt", "too many wrong codes; ask for a new one")
            raise OAuthError("wrong_code", "that code is not the one we sent")
        return self.finish(held, f"person:{held.email}", now)

    def finish(self, held: Pending, account: str, now: float) -> str:
        """A sign-in proven (by a code or a passkey): it is finished, so nothing answers for it twice, and
        for an account the register names it answers the redirect URL with an authorization code."""
        self.pending.pop(held.id, None)
        brain = self.register.store_for(account)
        if brain is None:
            raise OAuthError(
                "sign_in_failed", f"{account} has no brain on this server; its host must register one", 403
            )
        previous = self.records.get(f"account:{account}") or {"created": int(now)}
        self.records.put(f"account:{account}", {**previous, "lastSignIn": int(now)})
        code = secrets.token_urlsafe(32)
        self.grants[digest(code)] = Grant(
            held.client_id,
            held.redirect_uri,
            held.challenge,
            account,
            brain,
            held.scope,
            held.resource,
            now + GRANT_TTL,
        )
        joiner = "&" if urlsplit(held.redirect_uri).query else "?"
        return f"{held.redirect_uri}{joiner}{urlencode({'code': code, 'state': held.state})}"

    # --- the token endpoint -----------------------------------------------------------------------

    def token(self, form: Mapping[str, list[str]], now: float) -> dict[str, Any]:
        client_id = _one(form, "client_id")
        self.client(client_id)  # first: an unregistered id is refused before it takes a place in the limiter
        if not self.token_limit.allow(str(client_id), now):
            raise OAuthError("rate_limited", "too many token requests for this client; slow down", 429)
        grant_type = _one(form, "grant_type")
        if grant_type == "authorization_code":
            return self._exchange(form, str(client_id), now)
        if grant_type == "refresh_token":
            return self._refresh(form, str(client_id), now)
        raise OAuthError("unsupported_grant_type", "grant_type: authorization_code or refresh_token")

    def _exchange(self, form: Mapping[str, list[str]], client_id: str, now: float) -> dict[str, Any]:
        key = digest(str(_one(form, "code")))
        grant = self.grants.pop(key, None)
        if grant is None:
            if key in self.spent:
                self.records.put(f"family:{self.spent[key][1]}", {"revoked": int(now)})
                raise OAuthError("invalid_grant", "this authorization code was already used; what it issued is revoked")
            raise OAuthError("invalid_grant", "this authorization code is unknown")
        family = secrets.token_hex(8)
        self.spent[key] = (grant.expires, family)
        if now >= grant.expires:
            raise OAuthError("invalid_grant", "this authorization code has expired")
        if grant.client_id != client_id:
            raise OAuthError("invalid_grant", "this authorization code was issued to another client")
        if _one(form, "redirect_uri", required=False) not in (None, grant.redirect_uri):
            raise OAuthError("invalid_grant", "redirect_uri differs from the authorization request's")
        verifier = str(_one(form, "code_verifier"))
        if not _VERIFIER.fullmatch(verifier) or not hmac.compare_digest(s256(verifier), grant.challenge):
            raise OAuthError("invalid_grant", "code_verifier does not match the code_challenge (PKCE S256)")
        resource = _one(form, "resource", required=False)
        if resource is not None and self._resource(resource) != grant.resource:
            raise OAuthError("invalid_target", "resource differs from the authorization request's")
        self._still_registered(grant.account, grant.brain)
        return self._issue(client_id, grant.account, grant.brain, grant.scope, grant.resource, family, now)

    def _refresh(self, form: Mapping[str, list[str]], client_id: str, now: float) -> dict[str, Any]:
        key = f"refresh:{digest(str(_one(form, 'refresh_token')))}"
        record = self.records.get(key)
        if record is None or record["client_id"] != client_id:
            raise OAuthError("invalid_grant", "this refresh token is unknown")
        family = f"family:{record['family']}"
        if self.records.get(family) is not None:
            raise OAuthError("invalid_grant", "this refresh token's family was revoked (a used token was replayed)")
        if record["used"]:
            # a rotated token presented again: someone holds a copy, so every token of the family stops
            self.records.put(family, {"revoked": int(now)})
            raise OAuthError("invalid_grant", "this refresh token was already used; its family is now revoked")
        if now >= record["exp"]:
            raise OAuthError("invalid_grant", "this refresh token has expired")
        resource = _one(form, "resource", required=False)
        if resource is not None and self._resource(resource) != record["aud"]:
            raise OAuthError("invalid_target", "resource differs from the one this token was granted for")
        scope = tuple(record["scope"])
        narrowed = _one(form, "scope", required=False)
        if narrowed is not None:
            asked = asked_scope(narrowed)
            if not set(asked) <= set(scope):
                raise OAuthError("invalid_scope", "a refresh may narrow the scope, never widen it")
            scope = asked
        self._still_registered(record["account"], record["brain"])
        self.records.put(key, {**record, "used": True})
        return self._issue(client_id, record["account"], record["brain"], scope, record["aud"], record["family"], now)

    def _still_registered(self, account: str, brain: str) -> None:
        """The register is asked again at every mint: removing an account's line stops its refreshes."""
        if self.register.store_for(account) != brain:
            raise OAuthError("sign_in_failed", f"{account} no longer has {brain!r} in this server's register", 403)

    def _issue(
        self, client_id: str, account: str, brain: str, scope: tuple[str, ...], aud: str, family: str, now: float
    ) -> dict[str, Any]:
        token, payload = self.mint(account, brain, scope, aud)
        refresh = "bkr_" + secrets.token_urlsafe(32)
        self.records.put(
            f"refresh:{digest(refresh)}",
            {
                "client_id": client_id,
                "account": account,
                "brain": brain,
                "scope": list(scope),
                "aud": aud,
                "exp": int(now) + REFRESH_TTL,
                "family": family,
                "used": False,
            },
        )
        return {
            "access_token": token,
            "token_type": "Bearer",
            "expires_in": payload["exp"] - payload["iat"],
            "refresh_token": refresh,
            "scope": " ".join(scope),
        }
