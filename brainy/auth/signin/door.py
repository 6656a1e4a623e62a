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
from brainy.auth.signin.records import Records
from brainy.auth.signin.register import Register
from brainy.auth.tokens import Issuers

log = logging.getLogger("brainy.sign_in")

METADATA_PATH = "/.well-known/oauth-authorization-server"
COOKIE = "brainy_sign_in"
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
        f"default-src 'none'; style-src '{pages.STYLE_HASH}'; form-action {targets}; "
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

    def _page(self, status: int, html: str, held: Pending | None = None, cookie: str | None = None) -> Reply:
        headers = [*_PAGE_HEADERS, ("content-security-policy", _csp(held.redirect_uri if held else None))]
        if cookie is not None:
            secure = "; Secure" if self.secure else ""
            headers.append(
                ("set-cookie", f"{COOKIE}={cookie}; Path=/auth/; HttpOnly; SameSite=Strict; Max-Age=1800{secure}")
            )
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
        return self._page(200, pages.email_page(self.door_id, held.id), held, cookie=nonce)

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
            page = pages.email_page(self.door_id, held.id, refusal.error, refusal.description)
            return self._page(refusal.status, page, held)
        return self._mail(held, email, code)

    async def _mail(self, held: Pending, email: str, code: str) -> Reply:
        try:
            await self.mailer.send(email, code, int(held.code_expires - self.clock() + 59) // 60)
        except MailFailed as failed:
            self.server.drop_code(held)
            log.warning("sign-in code not sent: %s", failed)
            message = f"We could not send your code: {failed}. Nothing was sent; try again later."
            return self._page(502, pages.email_page(self.door_id, held.id, "mail_failed", message), held)
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
        log.info("sign-in: person:%s signed in", held.email)
        headers_out = [("location", location), ("cache-control", "no-store"), ("referrer-policy", "no-referrer")]
        return Reply(303, headers_out, b"")


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
}
