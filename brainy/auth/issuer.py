"""The reference issuer: ``brainy issuer keygen`` and ``brainy token mint`` (seed 000, "The operator commands").

The server verifies ``bk1.`` tokens and mints none; these two commands are a
self-hoster's own issuer, or a test rig. An identity service mints its keypairs
and tokens the same way and never by shelling out to this binary, so the format
is all that is shared: see ``brainy.auth.tokens`` and ``docs/keys.md``.

The private key file keygen writes (mode 0600, never printed) is PKCS#8 PEM with
the issuer id and kid above it, so ``openssl pkey`` and any PEM reader can load
the key, and mint reads the issuer and kid from the same file::

    # brainy issuer key: the PRIVATE key of issuer 'example'. Keep it at mode 0600; never share it.
    issuer: example
    kid: 2026-09
    -----BEGIN PRIVATE KEY-----
    MC4CAQAwBQYDK2VwBCIEI…
    -----END PRIVATE KEY-----
"""

from __future__ import annotations

import argparse
import base64
import binascii
import json
import os
import re
import secrets
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from nacl.signing import SigningKey

from brainy.auth.keys import BRAIN_NAME, TOKEN_PREFIX, read_placed
from brainy.auth.tokens import KEY_PREFIX, MAX_NAME_LENGTH, SCOPES, public_key_text

# The 16 bytes every Ed25519 PKCS#8 private key DER opens with (RFC 8410 section 7):
# SEQUENCE(46) { INTEGER 0, SEQUENCE(5) { OID 1.3.101.112 }, OCTET STRING(34) { OCTET STRING(32) seed } }.
PKCS8_PREFIX = bytes.fromhex("302e020100300506032b657004220420")
PEM_BEGIN = "-----BEGIN PRIVATE KEY-----"
PEM_END = "-----END PRIVATE KEY-----"
# The three scopes mint will sign: the owner triple is whole or not at all (seed 000, "The owner scope").
MINTABLE = {("read",), ("read", "write"), ("read", "write", "owner")}
_ID = re.compile(r"[^\s#][^\s]*")


class IssuerError(Exception):
    """A keygen or mint that cannot proceed; the message says why and never holds key material."""


@dataclass(frozen=True)
class IssuerKeyFile:
    """A private key file keygen wrote: whose key it is, and the key."""

    issuer: str
    kid: str | None
    key: SigningKey

    def line(self) -> str:
        """The issuers-file line for this key's public half, in the DER form."""
        public = public_key_text(bytes(self.key.verify_key))
        return f"{self.issuer}  {KEY_PREFIX}{public}" + (f"  {self.kid}" if self.kid else "")


def _check_id(what: str, value: str) -> str:
    if not _ID.fullmatch(value) or len(value) > MAX_NAME_LENGTH or not value.isprintable():
        raise IssuerError(
            f"{what} {value!r}: one field of at most {MAX_NAME_LENGTH} printable characters, "
            "no spaces, not starting with #"
        )
    return value


def _key_file_text(issuer: str, kid: str | None, key: SigningKey) -> str:
    der = base64.b64encode(PKCS8_PREFIX + bytes(key)).decode("ascii")
    head = [
        f"# brainy issuer key: the PRIVATE key of issuer {issuer!r}. Keep it at mode 0600; never share it.",
        f"issuer: {issuer}",
    ] + ([f"kid: {kid}"] if kid else [])
    return "\n".join(head + [PEM_BEGIN, der, PEM_END, ""])


def keygen(issuer: str, out: str | os.PathLike[str], kid: str | None = None) -> IssuerKeyFile:
    """Generate a keypair and write the private key to ``out`` at mode 0600; an existing file is never replaced.

    The file is created 0600 by ``os.open`` (never chmod-ed after), so there is no
    moment at which the key is readable by anyone else.
    """
    made = IssuerKeyFile(_check_id("--issuer", issuer), _check_id("--kid", kid) if kid else None, SigningKey.generate())
    data = _key_file_text(made.issuer, made.kid, made.key).encode("ascii")
    try:
        fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o600)
    except FileExistsError:
        raise IssuerError(f"{os.fspath(out)} already exists; a private key is never overwritten") from None
    except OSError as exc:
        raise IssuerError(f"cannot create {os.fspath(out)}: {exc.strerror}") from None
    with os.fdopen(fd, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    return made


def read_key_file(path: str | os.PathLike[str]) -> IssuerKeyFile:
    """A key file keygen wrote, refused (IssuerError) if the group or the world may read or write it."""
    where = Path(path)
    try:
        data, _ = read_placed(where, lambda reason: IssuerError(f"issuer key {where}: {reason}"))
    except FileNotFoundError:
        raise IssuerError(f"issuer key {where}: no such file") from None
    fields: dict[str, str] = {}
    pem: list[str] | None = None
    for line in data.decode("ascii", "replace").splitlines():
        line = line.strip()
        if pem is not None:
            if line == PEM_END:
                break
            pem.append(line)
        elif line == PEM_BEGIN:
            pem = []
        elif line and not line.startswith("#"):
            name, colon, value = line.partition(":")
            if colon:
                fields[name.strip()] = value.strip()
    try:
        der = base64.b64decode("".join(pem or []), validate=True)
    except binascii.Error:
        der = b""
    if len(der) != len(PKCS8_PREFIX) + 32 or not der.startswith(PKCS8_PREFIX):
        raise IssuerError(f"issuer key {where}: no ed25519 PKCS#8 PRIVATE KEY block")
    if not fields.get("issuer"):
        raise IssuerError(f"issuer key {where}: no 'issuer:' line")
    kid = fields.get("kid") or None
    return IssuerKeyFile(
        _check_id("issuer", fields["issuer"]),
        _check_id("kid", kid) if kid else None,
        SigningKey(der[len(PKCS8_PREFIX) :]),
    )


def parse_scope(text: str) -> tuple[str, ...]:
    """``read``, ``read,write`` or ``read,write,owner`` (any order) as the scope array, in that order."""
    words = [w.strip() for w in text.split(",")]
    chosen = tuple(w for w in SCOPES if w in words)
    if len(words) != len(set(words)) or set(words) != set(chosen) or chosen not in MINTABLE:
        raise IssuerError(f"--scope {text!r}: one of read, read,write or read,write,owner")
    return chosen


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def mint(
    key: IssuerKeyFile,
    brain: str,
    sub: str,
    scope: tuple[str, ...],
    ttl: int,
    now: int | None = None,
    jti: str | None = None,
    audience: str | None = None,
) -> tuple[str, dict[str, Any]]:
    """A signed ``bk1.`` token and its payload: issued now, expiring ``ttl`` seconds later, with a fresh jti.
    ``audience`` (the sign-in's RFC 8707 resource) travels as ``aud``, a claim verification ignores."""
    if not BRAIN_NAME.fullmatch(brain):
        raise IssuerError(f"--brain {brain!r} is not a legal brain name")
    if not sub or len(sub) > MAX_NAME_LENGTH or not sub.isprintable():
        raise IssuerError(f"--sub: printable and 1 to {MAX_NAME_LENGTH} characters")
    if ttl <= 0:
        raise IssuerError("--ttl: a positive number of seconds")
    issued = int(time.time()) if now is None else now
    payload: dict[str, Any] = {
        "iss": key.issuer,
        "sub": sub,
        "brain": brain,
        "scope": list(scope),
        "iat": issued,
        "exp": issued + ttl,
    }
    if key.kid:
        payload["kid"] = key.kid
    payload["jti"] = jti or secrets.token_hex(16)
    if audience is not None:
        payload["aud"] = audience
    body = json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    signature = key.key.sign(body).signature
    return f"{TOKEN_PREFIX}{_b64url(body)}.{_b64url(signature)}", payload


# --- the commands ------------------------------------------------------------------------------


def add_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``issuer keygen`` and ``token mint`` on the ``brainy`` command's subparsers."""
    p_issuer = sub.add_parser("issuer", help="the reference issuer's keypair")
    keygen_p = p_issuer.add_subparsers(dest="issuer_command", required=True).add_parser(
        "keygen", help="write a private key (mode 0600, never printed); print its issuers-file line"
    )
    keygen_p.add_argument("--issuer", required=True, metavar="ID", help="the issuer id (the iss claim)")
    keygen_p.add_argument("--out", required=True, metavar="FILE", help="where the private key goes; never replaced")
    keygen_p.add_argument("--kid", metavar="KID", help="a key id, for rotation")
    p_token = sub.add_parser("token", help="mint bk1 tokens with an issuer key")
    mint_p = p_token.add_subparsers(dest="token_command", required=True).add_parser(
        "mint", help="print a signed bk1 token"
    )
    mint_p.add_argument("--issuer-key", required=True, metavar="FILE", help="a key file `issuer keygen` wrote")
    mint_p.add_argument("--brain", required=True, metavar="B")
    mint_p.add_argument("--sub", required=True, metavar="S", help="the subject, e.g. agent:anima")
    mint_p.add_argument("--scope", required=True, metavar="read[,write[,owner]]")
    mint_p.add_argument("--ttl", required=True, type=int, metavar="SECONDS")


def run(args: argparse.Namespace) -> int:
    """Run ``issuer keygen`` or ``token mint``: the line or the token on stdout, narration on stderr."""
    try:
        if args.command == "issuer":
            made = keygen(args.issuer, args.out, args.kid)
            print(f"brainy: private key written to {args.out} at mode 0600; never printed.", file=sys.stderr)
            print("brainy: append this line to the issuers file:", file=sys.stderr)
            print(made.line(), flush=True)
            return 0
        token, payload = mint(read_key_file(args.issuer_key), args.brain, args.sub, parse_scope(args.scope), args.ttl)
    except IssuerError as exc:
        print(f"brainy {args.command}: refused: {exc}", file=sys.stderr)
        return 2
    expires = datetime.fromtimestamp(payload["exp"], UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    print(
        f"brainy: token jti {payload['jti']} for {payload['sub']} on {payload['brain']}, scope "
        f"{','.join(payload['scope'])}, expires {expires} (exp {payload['exp']})",
        file=sys.stderr,
    )
    print(token, flush=True)
    return 0


__all__ = ["IssuerError", "IssuerKeyFile", "add_commands", "keygen", "mint", "parse_scope", "read_key_file", "run"]
