"""Passkeys (WebAuthn): after a first sign-in a person may register one, and sign in with it next time.

The ceremonies' cryptography is the ``webauthn`` package's (duo-labs' py_webauthn, maintained, with
the attestation formats and COSE algorithms a browser may use); this module only decides what is
asked and what is kept. The relying party is ``--public-url``'s host (``rp_id``), named
``--door-id``; the origin is the public URL's. Credentials are discoverable (``residentKey:
required``), so signing in asks for no email first: the authenticator offers the passkey, and its
credential id finds the account. Each passkey is an identity-store record ``passkey:<credential
id>`` holding its public key and sign count, never a secret.
"""

from __future__ import annotations

import base64
import json
import secrets
from dataclasses import dataclass
from typing import Any

from webauthn import (
    generate_authentication_options,
    generate_registration_options,
    options_to_json,
    verify_authentication_response,
    verify_registration_response,
)
from webauthn.helpers.exceptions import WebAuthnException
from webauthn.helpers.structs import (
    AuthenticatorSelectionCriteria,
    PublicKeyCredentialDescriptor,
    ResidentKeyRequirement,
    UserVerificationRequirement,
)

from brainy.auth.signin.oauth import OAuthError
from brainy.auth.signin.records import Records


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _credential(text: str | None) -> dict[str, Any]:
    try:
        document = json.loads(text or "")
    except ValueError:
        document = None
    if not isinstance(document, dict) or not isinstance(document.get("rawId"), str):
        raise OAuthError("passkey_refused", "the browser sent no passkey credential")
    return document


@dataclass(frozen=True)
class Passkeys:
    records: Records
    rp_id: str
    rp_name: str
    origin: str

    def registration_options(self, account: str) -> tuple[str, bytes]:
        """The creation options for a new passkey of ``account`` (JSON for the page), and their challenge."""
        held = self.records.get(f"account:{account}") or {}
        handle = held.get("userHandle")
        if handle is None:
            handle = _b64(secrets.token_bytes(32))
            self.records.put(f"account:{account}", {**held, "userHandle": handle})
        existing = [PublicKeyCredentialDescriptor(id=_unb64(c)) for c in held.get("passkeys", [])]
        options = generate_registration_options(
            rp_id=self.rp_id,
            rp_name=self.rp_name,
            user_id=_unb64(handle),
            user_name=account.partition(":")[2] or account,
            authenticator_selection=AuthenticatorSelectionCriteria(
                resident_key=ResidentKeyRequirement.REQUIRED, user_verification=UserVerificationRequirement.PREFERRED
            ),
            exclude_credentials=existing,
        )
        return options_to_json(options), options.challenge

    def register(self, account: str, credential_text: str | None, challenge: bytes, now: float) -> str:
        """Verify a new passkey and keep it for ``account``; answers its credential id."""
        credential = _credential(credential_text)
        try:
            verified = verify_registration_response(
                credential=credential,
                expected_challenge=challenge,
                expected_rp_id=self.rp_id,
                expected_origin=self.origin,
            )
        except WebAuthnException as exc:
            raise OAuthError("passkey_refused", f"the passkey did not verify: {exc}") from None
        credential_id = _b64(verified.credential_id)
        self.records.put(
            f"passkey:{credential_id}",
            {
                "account": account,
                "publicKey": _b64(verified.credential_public_key),
                "signCount": verified.sign_count,
                "created": int(now),
            },
        )
        held = self.records.get(f"account:{account}") or {}
        self.records.put(f"account:{account}", {**held, "passkeys": [*held.get("passkeys", []), credential_id]})
        return credential_id

    def authentication_options(self) -> tuple[str, bytes]:
        """Request options for a discoverable passkey (no account named), and their challenge."""
        options = generate_authentication_options(
            rp_id=self.rp_id, user_verification=UserVerificationRequirement.PREFERRED
        )
        return options_to_json(options), options.challenge

    def authenticate(self, credential_text: str | None, challenge: bytes) -> str:
        """The account whose passkey signed ``challenge``; its sign count moves on."""
        credential = _credential(credential_text)
        key = f"passkey:{credential['rawId']}"
        held = self.records.get(key)
        if held is None:
            raise OAuthError("passkey_refused", "this passkey is not registered here")
        try:
            verified = verify_authentication_response(
                credential=credential,
                expected_challenge=challenge,
                expected_rp_id=self.rp_id,
                expected_origin=self.origin,
                credential_public_key=_unb64(held["publicKey"]),
                credential_current_sign_count=held["signCount"],
            )
        except WebAuthnException as exc:
            raise OAuthError("passkey_refused", f"the passkey did not verify: {exc}") from None
        self.records.put(key, {**held, "signCount": verified.new_sign_count})
        return str(held["account"])
