"""brainy's own sign-in module: ``brainy serve --sign-in`` makes this server its own bk1 issuer (seed 001,
"Sign-in — this door as its own issuer"; docs/sign-in.md).

``--sign-in MODULE`` resolves MODULE by import and calls its ``create_sign_in(config)`` with a
:class:`SignInConfig`; the answer is a :class:`~brainy.auth.signin.door.SignIn` (or anything with its
``claims``, ``handle``, ``issuers`` and ``close``). This module is the default.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from brainy.auth.signin import keyring
from brainy.auth.signin.door import SignIn
from brainy.auth.signin.mail import Mailer
from brainy.auth.signin.records import Records
from brainy.auth.signin.register import Register


@dataclass(frozen=True)
class SignInConfig:
    """What the server settled at start: every path and URL checked before this is built."""

    public_url: str  # --public-url, no trailing slash: the issuer URL and the protected resource
    door_id: str  # --door-id: the iss claim and the page's title
    mail_url: str  # --sign-in-mail
    service_key: Callable[[], str | None]  # the keys file's ! line, asked at each mail
    accounts: Path  # --sign-in-accounts
    identity: Path  # <brains-dir>/.identity
    key: Path  # <brains-dir>/.identity.key


def create_sign_in(config: SignInConfig) -> SignIn:
    """Open the identity store and the keyring (made at the first start) and answer the door."""
    key = keyring.load(config.key, config.door_id)
    records = Records.open(config.identity)
    return SignIn(
        config.public_url,
        config.door_id,
        records,
        Register(config.accounts),
        Mailer(config.mail_url, config.service_key),
        key,
    )


__all__ = ["SignIn", "SignInConfig", "create_sign_in"]
