"""Minted keys: verifying ``bk1.`` tokens against the issuers file and the revoked list.

A keys-file line is one secret every holder shares; an arriving agent carries its
own credential instead: a short-lived claim an ISSUER signed, which this server
verifies and never mints (seed 000, "Minted keys")::

    bk1.<base64url(payload JSON)>.<base64url(ed25519 signature over the payload bytes)>

The signature covers the exact bytes of the decoded payload segment, never a
re-serialised form. The payload's claims:

    iss    string, required   the issuer; a name in the issuers file
    sub    string, required   the subject: who the token is FOR, and the caller its writes carry
    brain  string, required   the one brain the token reaches
    scope  array, required    distinct words of "read", "write", "owner"
    iat    integer, required  issued at, Unix seconds
    exp    integer, required  expiry, Unix seconds; the token answers until exp, not at it
    kid    string, optional   which of the issuer's keys signed it
    jti    string, optional   the token's id, which the revoked list names

Other claims are ignored. A token is refused by the name of the first check it
fails, in this order (DOORS.md 11.2; each a 401):

1. ``BRAINY_KEY_MALFORMED``: not three segments, bad base64url, a payload that is
   not one JSON object (a repeated member included), a missing or mistyped claim,
   or a signature that is not 64 bytes.
2. ``BRAINY_KEY_UNKNOWN_ISSUER`` (``iss``): the issuers file has no line for it,
   or there is no issuers file.
3. ``BRAINY_KEY_BAD_SIGNATURE``: no candidate key verifies it. A ``kid`` that
   names one of the issuer's lines makes that line the only candidate; otherwise
   every key of the issuer is tried, so a fleet adds a key before retiring one.
4. ``BRAINY_KEY_REVOKED`` (``jti``): its jti is listed and still inside that
   entry's own exp. Asked only of a payload already proven the issuer's own.
5. ``BRAINY_KEY_EXPIRED`` (``exp``): now is at or past its exp.

Scope and brain are asked later, by the gate (``brainy.host.dispatch.gate``),
which is why a verified token becomes ``Principal.token(sub, brain, scope)``.

The issuers file (mode 0600, refused before it is read if the group or the world
may read or write it), one key per line, ``#`` comments::

    # <issuer-id>        ed25519:<public key>                 [kid]
    soulcraft-identity    ed25519:MCowBQYDK2VwAyEA…            2026-09

A public key is base64 of its SubjectPublicKeyInfo DER (``MCowBQYDK2VwAyEA…``, the
form keygen prints), or its raw 32 bytes as base64 or as 64 hex digits. A line
that does not parse, or a key that is not a legal ed25519 point, refuses the
whole file by line number. A missing file trusts no issuer.

The revoked list is ``{"revoked": [{"jti": "…", "exp": <Unix seconds>}]}``,
copied verbatim from the issuer's feed by the deployment; this server never
fetches it. It names no secret, so only a mode that lets the group or the world
WRITE it is refused (anyone who could write it could un-revoke a token). A
missing file revokes nothing.

Both files are re-read when their stat signature moves (mtime among it), checked
at most once every :data:`RELOAD_INTERVAL` seconds, by a request that needs them:
never per request, never a watcher. A file that fails at the start refuses the
start; once running, a failed reload is logged and the last good table kept. A
vanished issuers file trusts nobody again (the missing file's own meaning, and
the fail-closed one); a vanished revoked list keeps the last good list, because
dropping revocations because a copy step deleted before it wrote is the
fail-open choice. Place ``{"revoked": []}`` to clear it.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import os
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

from nacl.bindings import crypto_core_ed25519_is_valid_point
from nacl.exceptions import BadSignatureError
from nacl.signing import VerifyKey

from brainy.auth.keys import TOKEN_PREFIX, UNTERMINATED, Watch, _b64url, _fields, _fsync_dir, _write_all, read_placed
from brainy.auth.principal import Principal
from brainy.contract import refusals as R
from brainy.contract.limits import json_loads, quote

log = logging.getLogger("brainy.tokens")

# Seed 000, "The issuers file": "checked at most once every 5 seconds".
RELOAD_INTERVAL = 5.0
SCOPES = ("read", "write", "owner")
KEY_PREFIX = "ed25519:"
# The 12 bytes every Ed25519 SubjectPublicKeyInfo DER opens with (RFC 8410 section 4):
# SEQUENCE(42) { SEQUENCE(5) { OID 1.3.101.112 }, BIT STRING(33) { 0 unused bits, ... } }.
SPKI_PREFIX = bytes.fromhex("302a300506032b6570032100")
SIGNATURE_BYTES = 64
MAX_NAME_LENGTH = 256
ENV_ISSUERS = "BRAINY_SERVE_ISSUERS"
ISSUERS_NAME = "issuers"
REVOKED_NAME = "revoked.json"
_HEX_KEY = re.compile(r"[0-9a-fA-F]{64}")
_B64 = re.compile(r"[A-Za-z0-9+/_-]+={0,2}")


class TokenFileError(Exception):
    """The issuers file or the revoked list cannot be used; ``line`` is 1-based, or None for the whole file."""

    what = "token file"

    def __init__(self, path: str | os.PathLike[str], reason: str, line: int | None = None) -> None:
        self.path = os.fspath(path)
        self.reason = reason
        self.line = line
        where = self.path if line is None else f"{self.path}:{line}"
        super().__init__(f"{self.what} {where}: {reason}")


class IssuersFileError(TokenFileError):
    """The issuers file is too open, unreadable, or has a line that does not parse."""

    what = "issuers file"


class RevokedFileError(TokenFileError):
    """The revoked list is writable by others, unreadable, or not the seeds' JSON shape."""

    what = "revoked list"


# --- public keys -------------------------------------------------------------------------------


def public_key_bytes(text: str) -> bytes:
    """The raw 32 bytes of a public key in any form the issuers file takes; ValueError names what is wrong.

    The forms (seed 000, "The issuers file"): 64 hex digits; base64 (standard or
    url-safe, padding optional) of the raw 32 bytes; base64 of the 44-byte
    SubjectPublicKeyInfo DER. 64 hex digits are always read as hex: as base64
    they would be 48 bytes, which is neither form.
    """
    if _HEX_KEY.fullmatch(text):
        raw = bytes.fromhex(text)
    else:
        if not _B64.fullmatch(text):
            raise ValueError("the key is neither 64 hex digits nor base64")
        body = text.rstrip("=").replace("-", "+").replace("_", "/")
        try:
            decoded = base64.b64decode(body + "=" * (-len(body) % 4), validate=True)
        except binascii.Error:
            raise ValueError("the key's base64 does not decode") from None
        if len(decoded) == len(SPKI_PREFIX) + 32 and decoded.startswith(SPKI_PREFIX):
            raw = decoded[len(SPKI_PREFIX) :]
        elif len(decoded) == 32:
            raw = decoded
        else:
            raise ValueError(
                f"the key decodes to {len(decoded)} bytes: neither a raw ed25519 key (32) "
                f"nor its SubjectPublicKeyInfo DER (44, opening MCowBQYDK2VwAyEA)"
            )
    # Decompress the point, as serve's own library does (seed 001, "One divergence"): 32 bytes that
    # are not a legal point (or are one of small order, which verifies nothing) refuse the file now,
    # not as a BAD_SIGNATURE on every token later.
    if not crypto_core_ed25519_is_valid_point(raw):
        raise ValueError("the key is not a legal ed25519 point")
    return raw


def public_key_text(raw: bytes) -> str:
    """The DER form keygen prints: base64 of the SubjectPublicKeyInfo, ``MCowBQYDK2VwAyEA…``."""
    return base64.b64encode(SPKI_PREFIX + raw).decode("ascii")


# --- the issuers file --------------------------------------------------------------------------


@dataclass(frozen=True)
class IssuerKey:
    """One line of the issuers file."""

    issuer: str
    key: VerifyKey
    kid: str | None
    line: int


Issuers = dict[str, tuple[IssuerKey, ...]]


def _name_problem(what: str, name: str) -> str | None:
    if len(name) > MAX_NAME_LENGTH or not name.isprintable():
        return f"{what} is printable and at most {MAX_NAME_LENGTH} characters"
    return None


def parse_issuers(data: bytes | str, source: str | os.PathLike[str] = "<issuers>") -> Issuers:
    """The issuers file's table, issuer -> its keys in file order; IssuersFileError names the first bad line.

    One bad line refuses the whole file: a table missing the line its author
    meant to add would fail every token of that issuer with a misleading name.
    """
    text = data.decode("utf-8") if isinstance(data, bytes) else data
    table: dict[str, list[IssuerKey]] = {}
    kids: dict[tuple[str, str], int] = {}
    lines = text.split("\n")
    for number, line in enumerate(lines, start=1):
        fields = _fields(line)
        if not fields:
            continue
        if number == len(lines):
            raise IssuersFileError(source, UNTERMINATED, number)
        if len(fields) not in (2, 3):
            raise IssuersFileError(
                source,
                f"expected <issuer-id> ed25519:<public key> [kid], found "
                f"{len(fields)} field{'s' if len(fields) != 1 else ''}",
                number,
            )
        issuer, key, kid = fields[0], fields[1], (fields[2] if len(fields) == 3 else None)
        problem = _name_problem("field 1: an issuer id", issuer) or (
            _name_problem("field 3: a kid", kid) if kid is not None else None
        )
        if problem:
            raise IssuersFileError(source, problem, number)
        if not key.startswith(KEY_PREFIX):
            raise IssuersFileError(source, f"field 2 does not begin {KEY_PREFIX!r}", number)
        try:
            raw = public_key_bytes(key[len(KEY_PREFIX) :])
        except ValueError as exc:
            raise IssuersFileError(source, f"field 2: {exc}", number) from None
        if kid is not None:
            first = kids.setdefault((issuer, kid), number)
            if first != number:
                raise IssuersFileError(
                    source, f"issuer {issuer!r} names kid {kid!r} twice (first on line {first})", number
                )
        table.setdefault(issuer, []).append(IssuerKey(issuer, VerifyKey(raw), kid, number))
    return {issuer: tuple(keys) for issuer, keys in table.items()}


def _read_issuers(data: bytes, source: Path) -> Issuers:
    try:
        return parse_issuers(data, source)
    except UnicodeDecodeError:
        raise IssuersFileError(source, "not valid UTF-8") from None


# --- the revoked list --------------------------------------------------------------------------


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def parse_revoked(data: bytes | str, source: str | os.PathLike[str] = "<revoked>") -> dict[str, int]:
    """The revoked list, jti -> the revoked token's own exp; RevokedFileError says where it breaks.

    The shape is the seeds' exactly, ``{"revoked": [{"jti", "exp"}]}``; other
    members (of the document or of an entry) are the feed's and are ignored. A
    jti listed twice keeps the later exp.
    """
    try:
        document = json.loads(data)
    except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError alike
        raise RevokedFileError(source, f"not JSON: {exc}") from None
    if not isinstance(document, dict) or not isinstance(document.get("revoked"), list):
        raise RevokedFileError(source, 'expected {"revoked": [{"jti": "...", "exp": <unix seconds>}, ...]}')
    table: dict[str, int] = {}
    for index, entry in enumerate(document["revoked"]):
        where = f"$.revoked[{index}]"
        if not isinstance(entry, dict):
            raise RevokedFileError(source, f"{where} is not an object")
        jti, exp = entry.get("jti"), entry.get("exp")
        if not isinstance(jti, str) or not jti:
            raise RevokedFileError(source, f"{where}.jti is not a non-empty string")
        if not _is_int(exp):
            raise RevokedFileError(source, f"{where}.exp is not an integer (Unix seconds)")
        table[jti] = max(exp, table.get(jti, exp))
    return table


#: The exp a revocation of a static key carries: the last second of the year 9999. A static key has no
#: expiry of its own, and this is a real timestamp every parser reads (seed 001, "Revocation").
STATIC_KEY_EXP = 253402300799


def add_revocation(path: Path, jti: str, exp: int, held: Mapping[str, int] | None = None) -> bool:
    """List ``jti`` in the revoked file at ``path`` until ``exp``; False when it was listed already.

    The document is read and parsed first, keeps every member it had, and is replaced whole (written beside,
    fsynced, renamed), so a reader sees the old list or the new one, never half of one. ``held`` is the list
    the server holds in force (its last good read): when the file is missing it is written again from that,
    so a vanished list never takes the server's revocations with it; when the file does not parse (or is
    placed with a mode this server refuses) it is moved aside whole, never written over, and the new list
    is the held one with ``jti`` added: a revocation is never refused for a damaged list, and nothing the
    damaged file said is lost (its name is logged for the operator to read).
    """
    try:
        data, _ = read_placed(path, lambda reason: RevokedFileError(path, reason), 0o022)
        parse_revoked(data, path)
    except FileNotFoundError:
        document: dict[str, Any] = _document_of(held)
    except RevokedFileError as exc:
        aside = path.with_name(f"{path.name}.damaged-{time.time_ns()}")
        os.rename(path, aside)
        log.error("%s; moved aside to %s and written again from the list in force", exc, aside)
        document = _document_of(held)
    else:
        document = json.loads(data)
    if any(entry.get("jti") == jti for entry in document["revoked"]):
        return False
    document["revoked"].append({"jti": jti, "exp": exp})
    temp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0), 0o600)
    try:
        _write_all(fd, json.dumps(document, indent=1).encode("utf-8") + b"\n")
        os.fsync(fd)
    finally:
        os.close(fd)
    os.rename(temp, path)
    _fsync_dir(path.parent)
    return True


def _document_of(held: Mapping[str, int] | None) -> dict[str, Any]:
    return {"revoked": [{"jti": jti, "exp": exp} for jti, exp in (held or {}).items()]}


# --- a file re-read on its own change ----------------------------------------------------------

T = TypeVar("T")


class Placed(Generic[T]):
    """A file the host placed, its parsed value, and the reload law both token files keep.

    ``value`` is what the file said when last read well. :meth:`refresh` looks
    at the file at most once per :data:`RELOAD_INTERVAL` of its ``now``
    (monotonic seconds) and re-reads only if its stat signature moved.
    """

    def __init__(
        self,
        path: Path,
        parse: Callable[[bytes, Path], T],
        refuse: type[TokenFileError],
        mask: int,
        empty: T,
        keep_when_gone: bool,
    ) -> None:
        self.path = path
        self._parse = parse
        self._refuse = refuse
        self._mask = mask
        self._empty = empty
        self._keep_when_gone = keep_when_gone
        self.value: T = empty
        self.generation = 0
        """Moves whenever :attr:`value` is taken afresh (a load, a reload, a file gone empty): what a cache of an
        answer read from the value (the keys table's remembered principals) compares to know it still holds."""
        self.watch = Watch(path, RELOAD_INTERVAL, None)

    def _read(self) -> tuple[T, tuple[int, ...]]:
        data, signature = read_placed(self.path, lambda reason: self._refuse(self.path, reason), self._mask)
        return self._parse(data, self.path), signature

    def load(self, now: float | None = None) -> Placed[T]:
        """Read the file now, whatever the interval. The first read, at start: a missing file is its empty value;
        any other failure raises (the start refuses). A later one (a door that answers from the file as it stands)
        keeps the reload law: a file that fails to read, or a revoked list that vanished, leaves the last good
        value in force, never a file's damage read as "nothing revoked"."""
        if self.generation:
            self.watch.checked_at, self.watch.seen = None, (-1,)  # moved, whatever its signature: read it again
            self.refresh(now)
            return self
        self.watch.checked_at = time.monotonic() if now is None else now
        try:
            self.value, self.watch.seen = self._read()
        except FileNotFoundError:
            self.value, self.watch.seen = self._empty, None
        self.generation += 1
        return self

    def refresh(self, now: float | None = None) -> bool:
        """Re-read the file if it moved and the interval has passed; True when a new value was taken."""
        if not self.watch.moved(now):
            return False
        try:
            self.value, self.watch.seen = self._read()
        except FileNotFoundError:
            if self._keep_when_gone:
                log.error("%s %s is gone; keeping the last good one", self._refuse.what, self.path)
                return False
            log.warning("%s %s is gone; from now on it is empty", self._refuse.what, self.path)
            self.value = self._empty
            self.generation += 1
            return True
        except TokenFileError as exc:
            log.error("reload refused, keeping the last good %s: %s", self._refuse.what, exc)
            return False
        self.generation += 1
        log.info("%s %s reloaded", self._refuse.what, self.path)
        return True


# --- the token ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Claims:
    """A ``bk1.`` token's claims, with the exact payload bytes its signature covers."""

    iss: str
    sub: str
    brain: str
    scope: tuple[str, ...]
    iat: int
    exp: int
    kid: str | None
    jti: str | None
    payload: bytes
    signature: bytes


def _malformed(why: str) -> R.Refusal:
    return R.BRAINY_KEY_MALFORMED(f"the bk1 token does not parse: {why}")


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    # Two verifiers reading a repeated member differently would read one signed payload two ways.
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise ValueError(f"the payload repeats the member {quote(key)}")
        seen[key] = value
    return seen


def _string(payload: dict[str, Any], claim: str, required: bool = True) -> str | None:
    value = payload.get(claim)
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value:
        raise _malformed(f"the claim {claim!r} is {'missing or ' if required else ''}not a non-empty string")
    return value


def _integer(payload: dict[str, Any], claim: str) -> int:
    value = payload.get(claim)
    if not _is_int(value):
        raise _malformed(f"the claim {claim!r} is missing or not an integer (Unix seconds)")
    return int(value)


def _scope(payload: dict[str, Any]) -> tuple[str, ...]:
    value = payload.get("scope")
    if not isinstance(value, list) or not value:
        raise _malformed("the claim 'scope' is missing or not a non-empty array")
    for word in value:
        if word not in SCOPES:
            raise _malformed(f"the scope word {quote(word)} is none of {list(SCOPES)}")
    if len(set(value)) != len(value):
        raise _malformed("the scope names a word twice")
    return tuple(value)


def decode(token: str) -> Claims:
    """A token's claims, or BRAINY_KEY_MALFORMED naming the first thing that does not parse. Nothing is verified."""
    parts = token.split(".")
    if len(parts) != 3 or parts[0] + "." != TOKEN_PREFIX:
        raise _malformed("a bk1 token is bk1.<payload>.<signature>")
    try:
        payload_bytes = _b64url(parts[1])
        signature = _b64url(parts[2])
        payload = json_loads(payload_bytes, object_pairs_hook=_object)
    except (ValueError, binascii.Error) as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise _malformed(str(exc)) from None
    if not isinstance(payload, dict):
        raise _malformed("the payload is not a JSON object")
    if len(signature) != SIGNATURE_BYTES:
        raise _malformed(f"the signature is {len(signature)} bytes, not {SIGNATURE_BYTES}")
    return Claims(
        iss=str(_string(payload, "iss")),
        sub=str(_string(payload, "sub")),
        brain=str(_string(payload, "brain")),
        scope=_scope(payload),
        iat=_integer(payload, "iat"),
        exp=_integer(payload, "exp"),
        kid=_string(payload, "kid", required=False),
        jti=_string(payload, "jti", required=False),
        payload=payload_bytes,
        signature=signature,
    )


# --- the verifier ------------------------------------------------------------------------------


def default_issuers_path(keys_path: Path) -> Path:
    """``$BRAINY_SERVE_ISSUERS`` if set, else ``issuers`` beside the keys file."""
    named = os.environ.get(ENV_ISSUERS)
    return Path(named).expanduser() if named else keys_path.with_name(ISSUERS_NAME)


#: How many verified tokens a verifier remembers (each a few hundred bytes): the distinct callers of a busy box.
PROVEN_TOKENS = 4096


class TokenVerifier:
    """Verifies ``bk1.`` bearers against an issuers file and a revoked list; a KeyTable's ``token_verifier``.

    Build one with :meth:`open`; call it with a token to get its Principal or
    its named refusal.
    """

    def __init__(self, issuers: Placed[Issuers], revoked: Placed[dict[str, int]]) -> None:
        self.issuers = issuers
        self.revoked = revoked
        # Keys trusted beside the file: ``--sign-in``'s own keyring, merged once at start (:meth:`merge`), so
        # a token this door minted climbs the same ladder as any other issuer's (seed 001, "Sign-in").
        self.merged: Issuers = {}
        # token -> (the issuers table it verified against, its claims, its principal): a keep-alive caller's
        # signature is checked once per issuers table, not once per request (an ed25519 verify is ~50 us).
        # Revocation and expiry are still asked on every request; a reloaded table verifies afresh.
        self._proven: dict[str, tuple[Issuers, Claims, Principal]] = {}

    @classmethod
    def open(
        cls,
        issuers_path: str | os.PathLike[str],
        revoked_path: str | os.PathLike[str] | None = None,
        now: float | None = None,
    ) -> TokenVerifier:
        """Read both files or refuse to start (IssuersFileError, RevokedFileError).

        ``revoked_path`` defaults to ``revoked.json`` beside the issuers file.
        Missing files are not refusals: no issuer is trusted, no jti is revoked.
        """
        issuers_at = Path(issuers_path)
        revoked_at = Path(revoked_path) if revoked_path is not None else issuers_at.with_name(REVOKED_NAME)
        issuers = Placed(issuers_at, _read_issuers, IssuersFileError, 0o077, {}, keep_when_gone=False).load(now)
        revoked = Placed(revoked_at, parse_revoked, RevokedFileError, 0o022, {}, keep_when_gone=True).load(now)
        return cls(issuers, revoked)

    def merge(self, issuers: Issuers) -> None:
        """Trust ``issuers`` beside the issuers file for this process's life: the file still reloads on its
        mtime; these keys are never dropped by a reload (they change only at the next start)."""
        for name, keys in issuers.items():
            self.merged[name] = self.merged.get(name, ()) + tuple(keys)
        self._proven.clear()

    def counts(self) -> dict[str, int]:
        """How many issuer keys and revoked jtis are in force (for a health answer)."""
        held = sum(len(keys) for keys in self.issuers.value.values()) + sum(len(k) for k in self.merged.values())
        return {"issuers": held, "revoked": len(self.revoked.value)}

    def __call__(self, token: str) -> Principal:
        return self.verify(token)

    def verify(self, token: str, now: float | None = None, monotonic: float | None = None) -> Principal:
        """The Principal a token proves, or the refusal of the first check it fails (see the module's ladder).

        ``now`` is wall-clock Unix seconds (expiry and revocation); ``monotonic``
        drives the reload check. Both default to the process's clocks.
        """
        self.issuers.refresh(monotonic)
        self.revoked.refresh(monotonic)
        proven = self._proven.get(token)
        if proven is not None and proven[0] is self.issuers.value:
            _, claims, principal = proven
        else:
            claims, principal = self._prove(token)
        now = time.time() if now is None else now
        if claims.jti is not None:
            until = self.revoked.value.get(claims.jti)
            if until is not None and now < until:
                raise R.BRAINY_KEY_REVOKED(f"the token {claims.jti!r} is revoked", jti=claims.jti)
        if now >= claims.exp:
            raise R.BRAINY_KEY_EXPIRED(f"the token expired at {claims.exp} (Unix seconds)", exp=claims.exp)
        return principal

    def _prove(self, token: str) -> tuple[Claims, Principal]:
        """The ladder's first three rungs (it parses, its issuer is trusted, its signature verifies), remembered
        for this issuers table; at most :data:`PROVEN_TOKENS` are held, the oldest forgotten first."""
        claims = decode(token)
        keys = self.issuers.value.get(claims.iss, ()) + self.merged.get(claims.iss, ())
        if not keys:
            raise R.BRAINY_KEY_UNKNOWN_ISSUER(
                f"the token's issuer {claims.iss!r} is not in the issuers file {self.issuers.path}", iss=claims.iss
            )
        named = [k for k in keys if claims.kid is not None and k.kid == claims.kid]
        for candidate in named or keys:
            try:
                candidate.key.verify(claims.payload, claims.signature)
                break
            except BadSignatureError:
                continue
        else:
            against = f"the key {claims.kid!r}" if named else "any key"
            raise R.BRAINY_KEY_BAD_SIGNATURE(
                f"the signature does not verify against {against} of issuer {claims.iss!r}"
            )
        principal = Principal.token(claims.sub, claims.brain, frozenset(claims.scope))
        if len(self._proven) >= PROVEN_TOKENS:
            del self._proven[next(iter(self._proven))]
        self._proven[token] = (self.issuers.value, claims, principal)
        return claims, principal


__all__ = [
    "Claims",
    "ENV_ISSUERS",
    "STATIC_KEY_EXP",
    "add_revocation",
    "IssuerKey",
    "IssuersFileError",
    "KEY_PREFIX",
    "Placed",
    "RELOAD_INTERVAL",
    "REVOKED_NAME",
    "RevokedFileError",
    "SCOPES",
    "SPKI_PREFIX",
    "TokenFileError",
    "TokenVerifier",
    "decode",
    "default_issuers_path",
    "parse_issuers",
    "parse_revoked",
    "public_key_bytes",
    "public_key_text",
]
