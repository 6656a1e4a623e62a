"""This door's own keyring: the ed25519 key its sign-ins mint bk1 tokens with (seed 001, "Verification joins
the same ladder").

The private key lives beside the identity store, ``<brains-dir>/.identity.key``, in the file format
``brainy issuer keygen`` writes (mode 0600, never printed), made at the first start and read after, so a
token minted before a restart still verifies after it. Its public half is merged at start into the
issuers table every bk1 token is verified against: one ladder, the same claims and refusal names.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from brainy.auth.issuer import IssuerKeyFile, keygen, read_key_file
from brainy.auth.tokens import IssuerKey, Issuers

KEY_NAME = ".identity.key"


def load(path: Path, door_id: str) -> IssuerKeyFile:
    """The keyring at ``path``, made (issuer ``door_id``, a dated kid) when there is none. The file names its
    issuer; a changed ``--door-id`` refuses the start rather than mint under a name the key was not made
    for (re-keying is the operator's move: set the old file aside)."""
    if not path.exists():
        return keygen(door_id, path, kid=datetime.now(UTC).strftime("%Y-%m-%d"))
    held = read_key_file(path)
    if held.issuer != door_id:
        raise ValueError(
            f"{path} holds the key of issuer {held.issuer!r}, not --door-id {door_id!r}: "
            "move it aside to mint under the new id"
        )
    return held


def issuers(key: IssuerKeyFile) -> Issuers:
    """The issuers-table entry that trusts ``key``'s public half (merged into the verifier at start)."""
    return {key.issuer: (IssuerKey(key.issuer, key.key.verify_key, key.kid, 0),)}
