"""The sign-in over HTTP: the thin glue between a request and :class:`~brainy.auth.signin.oauth.AuthorizationServer`.

The server hands :meth:`SignIn.handle` every request whose path :meth:`SignIn.claims` (``/auth/*`` and
RFC 8414's ``/.well-known/oauth-authorization-server``) before any other route is asked, and frames the
:class:`Reply`. Every violation is turned into its answer here, once: a JSON ``{error,
error_description}`` on the OAuth endpoints, the page again with the refusal shown on the sign-in
pages. Nothing here logs a code, a token or a cookie: only the step and the account.
"""

from __future__ import annotations

import json
import logging
import secrets
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlsplit

from brainy.auth.issuer import IssuerKeyFile, mint
from brainy.auth.signin import keyring, pages
from brainy.auth.signin.mail import Mailer, MailFailed
from brainy.auth.signin.oauth import ACCESS_TTL, AuthorizationServer, OAuthError, Pending, digest
from brainy.auth.signin.passkeys import Passkeys
from brainy.auth.signin.records import Records
from brainy.auth.signin.register import Register
from brainy.auth.tokens import Issuers

log = logging.getLogger("brainy.sign_in")

METADATA_PATH = "/.well-known/oauth-authorization-server"
COOKIE = "brainy_sign_in"  # ties a sign-in in progress to the browser that opened it
SESSION = "brainy_session"  # a person signed in here: what opens the passkeys page
SESSION_TTL = 30 * 86400
ENROL_TTL = 300.0  # a passkey's creation options answer this long
MAX_FORM = 64 * 1024
# The pages' own safety: no script, no frame, no referrer, no cache (seed 001; the issue's "Limits").
_PAGE_HEADERS = [
    ("content-type", "text/html; charset=utf-8"),
    ("x-frame-options", "DENY"),
    ("referrer-policy", "no-referrer"),
    ("cache-control", "no-store"),
    ("x-content-type-options", "nosniff"),
]
_JSON_HEADERS = [("content-type", "application/json"), ("cache-control", "no-store"), ("pragma", "no-cache")]


@dataclass
class Reply:
    status: int
    headers: list[tuple[str, str]]
    body: bytes


def _csp(redirect_uri: str | None) -> str:
    """default-src 'none'; the one inline style by hash; forms post here, and the code form's 303 may land
    on the client's redirect origin (a browser holds a redirect after a POST to form-action too)."""
    targets = "'self'"
    if redirect_uri:
        parts = urlsplit(redirect_uri)
        targets += f" {parts.scheme}://{parts.netloc}"
    return (
        f"default-src 'none'; script-src 'self'; style-src '{pages.STYLE_HASH}'; form-action {targets}; "
        "frame-ancestors 'none'; base-uri 'none'"
    )


def _cookies(headers: Mapping[str, str]) -> dict[str, str]:
    found: dict[str, str] = {}
    for part in headers.get("cookie", "").split(";"):
        name, eq, value = part.strip().partition("=")
        if eq:
            found.setdefault(name, value)
    return found


def _form(body: bytes) -> dict[str, list[str]]:
    if len(body) > MAX_FORM:
        raise OAuthError("invalid_request", "the form is too large")
    try:
        return parse_qs(body.decode("utf-8"), keep_blank_values=True, strict_parsing=False)
    except UnicodeDecodeError:
        raise OAuthError("invalid_request", "the form is not UTF-8") from None


class SignIn:
    """A ``--sign-in`` door: the authorization server, its pages, its mailer and its keyring."""

    def __init__(
        self,
        public_url: str,
        door_id: str,
        records: Records,
        register: Register,
        mailer: Mailer,
        key: IssuerKeyFile,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.public_url = public_url
        self.door_id = door_id
        self.records = records
        self.mailer = mailer
        self.key = key
        self.clock = clock
        self.secure = public_url.startswith("https:")
        self.server = AuthorizationServer(public_url, records, register, self._mint)
        origin = urlsplit(public_url)
        self.passkeys = Passkeys(records, origin.hostname or "", door_id, f"{origin.scheme}://{origin.netloc}")
        self.enrolling: dict[str, tuple[bytes, float]] = {}  # digest(session) -> (challenge, expiry)

    def _mint(self, sub: str, brain: str, scope: tuple[str, ...], aud: str) -> tuple[str, dict[str, Any]]:
        token, payload = mint(self.key, brain, sub, scope, ACCESS_TTL, audience=aud)
        log.info("sign-in minted jti %s for %s on %s, scope %s", payload["jti"], sub, brain, ",".join(scope))
        return token, payload

    def issuers(self) -> Issuers:
        """This door's public key, for the verifier's issuers table (merged once, at start)."""
        return keyring.issuers(self.key)

    def claims(self, path: str) -> bool:
        return path.startswith("/auth/") or path == METADATA_PATH

    def close(self) -> None:
        self.records.close()

    # --- framing ------------------------------------------------------------------------------------

    @staticmethod
    def _json(status: int, document: Any) -> Reply:
        return Reply(status, list(_JSON_HEADERS), json.dumps(document).encode())

    def _cookie(self, name: str, value: str, seconds: int) -> tuple[str, str]:
        secure = "; Secure" if self.secure else ""
        return ("set-cookie", f"{name}={value}; Path=/auth/; HttpOnly; SameSite=Strict; Max-Age={seconds}{secure}")

    def _page(self, status: int, html: str, held: Pending | None = None, cookie: str | None = None) -> Reply:
        headers = [*_PAGE_HEADERS, ("content-security-policy", _csp(held.redirect_uri if held else None))]
        if cookie is not None:
            headers.append(self._cookie(COOKIE, cookie, 1800))
        return Reply(status, headers, html.encode())

    def _refused(self, refusal: OAuthError) -> Reply:
        return self._page(refusal.status, pages.refused_page(self.door_id, refusal.error, refusal.description))

    # --- routing -----------------------------------------------------------------------------------

    def handle(
        self, method: str, path: str, query: str, headers: Mapping[str, str], body: bytes
    ) -> Reply | Awaitable[Reply]:
        route = _ROUTES.get((method if method != "HEAD" else "GET", path))
        if route is None:
            allowed = sorted(m for m, p in _ROUTES if p == path)
            if allowed:
                return Reply(405, [*_JSON_HEADERS, ("allow", ", ".join(allowed))], b'{"error":"method_not_allowed"}')
            return self._json(404, {"error": "not_found", "error_description": f"no sign-in endpoint at {path}"})
        return route(self, query, headers, body)

    def _metadata(self, query: str, headers: Mapping[str, str], body: bytes) -> Reply:
        return self._json(200, self.server.metadata())

    def _register(self, query: str, headers: Mapping[str, str], body: bytes) -> Reply:
        try:
            try:
                document = json.loads(body)
            except ValueError:
                raise OAuthError("invalid_client_metadata", "the body is not JSON") from None
            return self._json(201, self.server.register_client(document, self.clock()))
        except OAuthError as refusal:
            return self._json(refusal.status, refusal.document())

    def _token(self, query: str, headers: Mapping[str, str], body: bytes) -> Reply:
        try:
            answer = self.server.token(_form(body), self.clock())
        except OAuthError as refusal:
            log.info("sign-in token refused: %s", refusal.error)
            return self._json(refusal.status, refusal.document())
        return self._json(200, answer)

    def _browser(self, headers: Mapping[str, str]) -> str:
        return digest(_cookies(headers).get(COOKIE, ""))

    def _authorize(self, query: str, headers: Mapping[str, str], body: bytes) -> Reply:
        nonce = _cookies(headers).get(COOKIE) or secrets.token_urlsafe(24)
        try:
            held = self.server.authorize(parse_qs(query, keep_blank_values=True), digest(nonce), self.clock())
        except OAuthError as refusal:
            return self._refused(refusal)
        options, held.passkey_challenge = self.passkeys.authentication_options()
        return self._page(200, pages.email_page(self.door_id, held.id, passkey=options), held, cookie=nonce)

    def _email(self, query: str, headers: Mapping[str, str], body: bytes) -> Reply | Awaitable[Reply]:
        now = self.clock()
        try:
            form = _form(body)
            held = self.server.find(_first(form, "request"), self._browser(headers), now)
        except OAuthError as refusal:
            return self._refused(refusal)
        try:
            email, code = self.server.send_code(held, _first(form, "email"), now)
        except OAuthError as refusal:
            return self._page(refusal.status, self._email_page(held, refusal.error, refusal.description), held)
        return self._mail(held, email, code)

    def _email_page(self, held: Pending, error: str | None = None, message: str | None = None) -> str:
        options, held.passkey_challenge = self.passkeys.authentication_options()
        return pages.email_page(self.door_id, held.id, error, message, passkey=options)

    async def _mail(self, held: Pending, email: str, code: str) -> Reply:
        try:
            await self.mailer.send(email, code, int(held.code_expires - self.clock() + 59) // 60)
        except MailFailed as failed:
            self.server.drop_code(held)
            log.warning("sign-in code not sent: %s", failed)
            message = f"We could not send your code: {failed}. Nothing was sent; try again later."
            return self._page(502, self._email_page(held, "mail_failed", message), held)
        return self._page(200, pages.code_page(self.door_id, held.id, email), held)

    def _code(self, query: str, headers: Mapping[str, str], body: bytes) -> Reply:
        now = self.clock()
        try:
            form = _form(body)
            held = self.server.find(_first(form, "request"), self._browser(headers), now)
        except OAuthError as refusal:
            return self._refused(refusal)
        try:
            location = self.server.check_code(held, _first(form, "code"), now)
        except OAuthError as refusal:
            if refusal.error == "sign_in_failed":
                log.info("sign-in refused: sign_in_failed (no register line)")
                return self._refused(refusal)
            page = pages.code_page(self.door_id, held.id, held.email or "", refusal.error, refusal.description)
            return self._page(refusal.status, page, held)
        log.info("sign-in: person:%s signed in by code", held.email)
        return self._signed_in(f"person:{held.email}", location)

    def _signed_in(self, account: str, location: str) -> Reply:
        """The redirect back to the client, and a session for this browser (what opens the passkeys page)."""
        session = secrets.token_urlsafe(32)
        self.records.put(f"session:{digest(session)}", {"account": account, "exp": int(self.clock()) + SESSION_TTL})
        headers = [
            ("location", location),
            ("cache-control", "no-store"),
            ("referrer-policy", "no-referrer"),
            self._cookie(SESSION, session, SESSION_TTL),
        ]
        return Reply(303, headers, b"")

    def _passkey(self, query: str, headers: Mapping[str, str], body: bytes) -> Reply:
        """The email page's passkey form: the credential the script wrote, checked against this sign-in's
        challenge; a passkey of a registered account signs in as the right code does."""
        now = self.clock()
        try:
            form = _form(body)
            held = self.server.find(_first(form, "request"), self._browser(headers), now)
        except OAuthError as refusal:
            return self._refused(refusal)
        try:
            if held.passkey_challenge is None:
                raise OAuthError("passkey_refused", "this sign-in offered no passkey challenge")
            challenge, held.passkey_challenge = held.passkey_challenge, None  # one answer per challenge
            account = self.passkeys.authenticate(_first(form, "credential"), challenge)
            location = self.server.finish(held, account, now)
        except OAuthError as refusal:
            if refusal.error == "sign_in_failed":
                return self._refused(refusal)
            return self._page(refusal.status, self._email_page(held, refusal.error, refusal.description), held)
        log.info("sign-in: %s signed in by passkey", account)
        return self._signed_in(account, location)

    def _session(self, headers: Mapping[str, str]) -> tuple[str, str]:
        """(digest of the session cookie, its account), or OAuthError: the passkeys page wants a sign-in."""
        key = digest(_cookies(headers).get(SESSION, ""))
        held = self.records.get(f"session:{key}")
        if held is None or self.clock() >= held["exp"]:
            raise OAuthError("signed_out", "sign in first (through any app), then come back to add a passkey", 401)
        return key, str(held["account"])

    def _passkeys_page(self, query: str, headers: Mapping[str, str], body: bytes) -> Reply:
        try:
            session, account = self._session(headers)
        except OAuthError as refusal:
            return self._refused(refusal)
        options, challenge = self.passkeys.registration_options(account)
        if len(self.enrolling) >= 10_000:
            self.enrolling = {k: v for k, v in self.enrolling.items() if v[1] > self.clock()}
        self.enrolling[session] = (challenge, self.clock() + ENROL_TTL)
        return self._page(200, pages.passkeys_page(self.door_id, account, options))

    def _add_passkey(self, query: str, headers: Mapping[str, str], body: bytes) -> Reply:
        try:
            session, account = self._session(headers)
            form = _form(body)
            challenge, until = self.enrolling.pop(session, (b"", 0.0))
            if self.clock() >= until:
                raise OAuthError("passkey_refused", "these passkey options expired; load the page again")
            self.passkeys.register(account, _first(form, "credential"), challenge, self.clock())
        except OAuthError as refusal:
            return self._refused(refusal)
        log.info("sign-in: %s added a passkey", account)
        return self._page(200, pages.passkeys_page(self.door_id, account, None))

    def _script(self, query: str, headers: Mapping[str, str], body: bytes) -> Reply:
        return Reply(
            200,
            [
                ("content-type", "text/javascript; charset=utf-8"),
                ("cache-control", "no-cache"),
                ("x-content-type-options", "nosniff"),
            ],
            pages.SCRIPT.encode(),
        )


def _first(form: Mapping[str, list[str]], name: str) -> str | None:
    values = form.get(name) or []
    return values[0] if values else None


_ROUTES: dict[tuple[str, str], Callable[..., Reply | Awaitable[Reply]]] = {
    ("GET", METADATA_PATH): SignIn._metadata,
    ("POST", "/auth/register"): SignIn._register,
    ("GET", "/auth/authorize"): SignIn._authorize,
    ("POST", pages.EMAIL_ACTION): SignIn._email,
    ("POST", pages.CODE_ACTION): SignIn._code,
    ("POST", "/auth/token"): SignIn._token,
    ("POST", pages.PASSKEY_ACTION): SignIn._passkey,
    ("GET", pages.PASSKEYS_PATH): SignIn._passkeys_page,
    ("POST", pages.PASSKEYS_PATH): SignIn._add_passkey,
    ("GET", pages.SCRIPT_PATH): SignIn._script,
}
