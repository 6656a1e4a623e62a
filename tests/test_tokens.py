"""Minted keys in process: the bk1 format, the issuers file, the revoked list, the ladder, and the reference issuer.

Seed 000, "Minted keys" through "The operator commands"; DOORS.md 11.2. Tokens here are signed with the
``cryptography`` package, an ed25519 implementation independent of the pynacl the server verifies with, so
a test passing is two implementations agreeing on the wire format, not one agreeing with itself.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import stat
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from nacl.bindings import crypto_core_ed25519_is_valid_point

from brainy import cli
from brainy.auth import issuer as I
from brainy.auth import tokens as T
from brainy.auth.keys import KeyTable
from brainy.auth.principal import Principal
from brainy.contract import refusals as R

NOW = 1_800_000_000  # wall-clock seconds every verification below is asked at


# --- an independent issuer --------------------------------------------------------------------------------


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def raw_public(private: Ed25519PrivateKey) -> bytes:
    return private.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def der_public(private: Ed25519PrivateKey) -> str:
    der = private.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return base64.b64encode(der).decode()


def claims(**changes: Any) -> dict[str, Any]:
    """A valid claim set for brain b1, issued a minute before NOW and good for an hour; None drops a claim."""
    doc: dict[str, Any] = {
        "iss": "idp",
        "sub": "agent:anima",
        "brain": "b1",
        "scope": ["read", "write"],
        "iat": NOW - 60,
        "exp": NOW + 3600,
    }
    doc.update(changes)
    return {k: v for k, v in doc.items() if v is not None}


def sign(private: Ed25519PrivateKey, payload: dict[str, Any] | bytes) -> str:
    body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    return f"bk1.{b64url(body)}.{b64url(private.sign(body))}"


KEY_A = Ed25519PrivateKey.from_private_bytes(bytes(range(32)))
KEY_B = Ed25519PrivateKey.from_private_bytes(bytes(range(1, 33)))
KEY_C = Ed25519PrivateKey.from_private_bytes(bytes(range(2, 34)))


def place(path: Path, text: str, mode: int = 0o600) -> Path:
    """Write ``text`` whole at ``path`` (temp file renamed over it) at ``mode``."""
    temp = path.with_name(path.name + ".placing")
    temp.write_text(text)
    os.chmod(temp, mode)
    os.replace(temp, path)
    return path


def issuers_text(*lines: tuple[str, Ed25519PrivateKey, str | None]) -> str:
    return "# test issuers\n" + "".join(f"{iss}  ed25519:{der_public(k)}  {kid or ''}\n" for iss, k, kid in lines)


def revoked_text(*entries: tuple[str, int]) -> str:
    return json.dumps({"revoked": [{"jti": jti, "exp": exp} for jti, exp in entries]})


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    """An issuers file (idp: KEY_A as kid k1; self: KEY_B, no kid) and a revoked list naming jti gone."""
    issuers = place(tmp_path / "issuers", issuers_text(("idp", KEY_A, "k1"), ("self", KEY_B, None)))
    revoked = place(tmp_path / "revoked.json", revoked_text(("gone", NOW + 3600)))
    return issuers, revoked


@pytest.fixture
def verifier(files: tuple[Path, Path]) -> T.TokenVerifier:
    return T.TokenVerifier.open(*files, now=0.0)


def refusal_of(verifier: T.TokenVerifier, token: str, now: float = NOW) -> R.Refusal:
    with pytest.raises(R.Refusal) as caught:
        verifier.verify(token, now=now, monotonic=0.0)
    return caught.value


# --- 1. verification ----------------------------------------------------------------------------------------


def test_a_token_from_an_independent_implementation_verifies_to_its_principal(verifier: T.TokenVerifier) -> None:
    """A token signed by ``cryptography``'s ed25519 verifies with pynacl, and becomes Principal.token(sub, brain,
    scope): its subject is its caller, it names one brain, and it carries its scope for the gate."""
    got = verifier.verify(sign(KEY_A, claims(kid="k1", jti="j1")), now=NOW, monotonic=0.0)
    assert got == Principal.token("agent:anima", "b1", frozenset({"read", "write"}))
    assert got.caller == "agent:anima" and got.kind == "token" and got.token_brain == "b1" and got.via is None
    owner = verifier.verify(sign(KEY_B, claims(iss="self", scope=["owner", "write", "read"])), now=NOW, monotonic=0.0)
    assert owner.owner_triple, "the owner triple in any order is the owner triple"


def test_the_signature_covers_the_exact_payload_bytes(verifier: T.TokenVerifier) -> None:
    """A payload with odd spacing and member order verifies as sent; the same claims re-serialised under the
    original signature do not: the verifier checks the bytes it was handed and nothing else."""
    odd = b'{ "exp" : %d, "scope":["read"],"brain":"b1" ,"sub":"s","iss":"idp","iat":%d }' % (NOW + 9, NOW)
    token = sign(KEY_A, odd)
    assert verifier.verify(token, now=NOW, monotonic=0.0).scope == frozenset({"read"})
    compact = json.dumps(json.loads(odd), separators=(",", ":")).encode()
    assert compact != odd
    forged = f"bk1.{b64url(compact)}.{token.split('.')[2]}"
    assert refusal_of(verifier, forged).name == "BRAINY_KEY_BAD_SIGNATURE"


def test_extra_claims_are_ignored_and_kid_and_jti_are_optional(verifier: T.TokenVerifier) -> None:
    """Claims beyond the eight (an entitlement, say) are ignored; a token with neither kid nor jti verifies."""
    got = verifier.verify(sign(KEY_A, claims(entitlement="expired", aud="x")), now=NOW, monotonic=0.0)
    assert got.id == "agent:anima"


MALFORMED = {
    "two segments": "bk1.eyJhIjoxfQ",
    "four segments": "bk1.eyJhIjoxfQ.AAAA.AAAA",
    "another prefix": "bk2." + sign(KEY_A, claims())[4:],
    "padding in a segment": "bk1.eyJhIjoxfQ==." + b64url(bytes(64)),
    "empty payload": "bk1.." + b64url(bytes(64)),
    "standard base64 alphabet": "bk1.+/+/." + b64url(bytes(64)),
    "payload not JSON": f"bk1.{b64url(b'not json')}.{b64url(bytes(64))}",
    "payload not UTF-8": f"bk1.{b64url(bytes([0xFF, 0xFE]))}.{b64url(bytes(64))}",
    "payload an array": sign(KEY_A, b"[1,2]"),
    "a repeated member": sign(
        KEY_A, b'{"iss":"idp","iss":"other","sub":"s","brain":"b1","scope":["read"],"iat":1,"exp":2}'
    ),
    "signature of 63 bytes": sign(KEY_A, claims())[:-2],
    "no iss": sign(KEY_A, claims(iss=None)),
    "empty iss": sign(KEY_A, claims(iss="")),
    "no sub": sign(KEY_A, claims(sub=None)),
    "sub a number": sign(KEY_A, claims(sub=7)),
    "no brain": sign(KEY_A, claims(brain=None)),
    "no scope": sign(KEY_A, claims(scope=None)),
    "scope a string": sign(KEY_A, claims(scope="read")),
    "scope empty": sign(KEY_A, claims(scope=[])),
    "scope with an unknown word": sign(KEY_A, claims(scope=["read", "admin"])),
    "scope naming a word twice": sign(KEY_A, claims(scope=["read", "read"])),
    "no iat": sign(KEY_A, claims(iat=None)),
    "exp a string": sign(KEY_A, claims(exp=str(NOW + 60))),
    "exp a boolean": sign(KEY_A, claims(exp=True)),
    "exp fractional": sign(KEY_A, claims(exp=NOW + 60.5)),
    "kid a number": sign(KEY_A, claims(kid=1)),
    "jti empty": sign(KEY_A, claims(jti="")),
}


@pytest.mark.parametrize("token", list(MALFORMED.values()), ids=list(MALFORMED))
def test_a_token_that_does_not_parse_is_malformed(verifier: T.TokenVerifier, token: str) -> None:
    """Wrong segments, bad base64url, a payload that is not one JSON object, a missing or mistyped claim, or a
    signature that is not 64 bytes: BRAINY_KEY_MALFORMED, 401, no fields."""
    refusal = refusal_of(verifier, token)
    assert refusal.name == "BRAINY_KEY_MALFORMED" and refusal.status == 401 and refusal.fields == {}, refusal


def test_the_ladder_answers_the_first_check_a_token_fails(tmp_path: Path, verifier: T.TokenVerifier) -> None:
    """The refusals come in the seeds' order: MALFORMED, UNKNOWN_ISSUER, BAD_SIGNATURE, REVOKED, EXPIRED. A
    token failing several checks is refused by the earliest, and each carries its own field."""
    late = NOW + 10_000  # past every exp below, inside the revoked entry's own exp
    place(verifier.revoked.path, revoked_text(("gone", late + 1)))
    verifier.revoked.refresh(10.0)
    cases = [
        # malformed AND unknown issuer AND expired
        (sign(KEY_C, claims(iss="nobody", scope="x", exp=NOW - 1)), "BRAINY_KEY_MALFORMED", {}),
        # unknown issuer AND bad signature AND revoked AND expired
        (sign(KEY_C, claims(iss="nobody", jti="gone")), "BRAINY_KEY_UNKNOWN_ISSUER", {"iss": "nobody"}),
        # bad signature AND revoked AND expired: revocation is asked only of a proven payload
        (sign(KEY_C, claims(jti="gone")), "BRAINY_KEY_BAD_SIGNATURE", {}),
        # revoked AND expired
        (sign(KEY_A, claims(jti="gone")), "BRAINY_KEY_REVOKED", {"jti": "gone"}),
        (sign(KEY_A, claims(jti="kept")), "BRAINY_KEY_EXPIRED", {"exp": NOW + 3600}),
    ]
    for token, name, fields in cases:
        refusal = refusal_of(verifier, token, now=late)
        assert (refusal.name, refusal.status, refusal.fields) == (name, 401, fields), refusal


def test_expiry_is_at_exp_not_after_it(verifier: T.TokenVerifier) -> None:
    """A token answers through exp - 1 and is BRAINY_KEY_EXPIRED from exp on."""
    token = sign(KEY_A, claims(exp=NOW + 5))
    assert verifier.verify(token, now=NOW + 4.999, monotonic=0.0).id == "agent:anima"
    assert refusal_of(verifier, token, now=NOW + 5).fields == {"exp": NOW + 5}


def test_a_kid_naming_a_line_is_checked_against_that_line_only(tmp_path: Path) -> None:
    """With two keys for one issuer, a token whose kid names a line verifies only against that line (signed by
    the other key: BAD_SIGNATURE); a token with no kid, or a kid no line names, is tried against every key."""
    place(tmp_path / "issuers", issuers_text(("idp", KEY_A, "k1"), ("idp", KEY_B, "k2")))
    verifier = T.TokenVerifier.open(tmp_path / "issuers", now=0.0)
    assert verifier.verify(sign(KEY_B, claims(kid="k2")), now=NOW, monotonic=0.0).id == "agent:anima"
    assert refusal_of(verifier, sign(KEY_B, claims(kid="k1"))).name == "BRAINY_KEY_BAD_SIGNATURE"
    for token in (sign(KEY_B, claims()), sign(KEY_B, claims(kid="k9")), sign(KEY_A, claims(kid="k9"))):
        assert verifier.verify(token, now=NOW, monotonic=0.0).id == "agent:anima"
    assert refusal_of(verifier, sign(KEY_C, claims(kid="k9"))).name == "BRAINY_KEY_BAD_SIGNATURE"


def test_a_revocation_past_its_own_exp_never_matches(tmp_path: Path, files: tuple[Path, Path]) -> None:
    """An entry matches only while now is before its own exp; a token without a jti is never revoked."""
    place(files[1], revoked_text(("stale", NOW - 1), ("live", NOW + 1)))
    verifier = T.TokenVerifier.open(*files, now=0.0)
    assert verifier.verify(sign(KEY_A, claims(jti="stale")), now=NOW, monotonic=0.0).id == "agent:anima"
    assert refusal_of(verifier, sign(KEY_A, claims(jti="live"))).name == "BRAINY_KEY_REVOKED"
    assert verifier.verify(sign(KEY_A, claims(jti="live")), now=NOW + 1, monotonic=0.0)
    assert verifier.verify(sign(KEY_A, claims()), now=NOW, monotonic=0.0)


def test_a_key_table_hands_bk1_bearers_to_its_verifier(tmp_path: Path, verifier: T.TokenVerifier) -> None:
    """KeyTable.authenticate routes ``Bearer bk1.…`` to the verifier: the token's principal, or its named
    refusal, never the flat UnauthenticatedError of a static key."""
    place(tmp_path / "keys", "bky_alice_reaches_b1_only_0001 person:alice b1\n")
    table = KeyTable.open(tmp_path / "keys", token_verifier=verifier)
    token = sign(KEY_A, claims(exp=4_000_000_000))
    assert table.authenticate(f"Bearer {token}").token_brain == "b1"
    with pytest.raises(R.Refusal) as caught:
        table.authenticate(f"Bearer {sign(KEY_C, claims())}")
    assert caught.value.name == "BRAINY_KEY_BAD_SIGNATURE"


# --- 2. the issuers file ------------------------------------------------------------------------------------


def test_every_public_key_form_reads_the_same_key() -> None:
    """The SubjectPublicKeyInfo DER in base64 (MCowBQYDK2VwAyEA…), the raw 32 bytes in base64 (padded or not,
    either alphabet) and in hex (either case) all read as the same key, and keygen's DER form round-trips."""
    raw = raw_public(KEY_A)
    forms = [
        der_public(KEY_A),
        base64.b64encode(raw).decode(),
        base64.b64encode(raw).decode().rstrip("="),
        base64.urlsafe_b64encode(raw).decode(),
        raw.hex(),
        raw.hex().upper(),
    ]
    assert forms[0].startswith("MCowBQYDK2VwAyEA")
    assert {T.public_key_bytes(form) for form in forms} == {raw}
    assert T.public_key_text(raw) == der_public(KEY_A)
    table = T.parse_issuers("".join(f"idp ed25519:{form} k{n}\n" for n, form in enumerate(forms)))
    assert [key.kid for key in table["idp"]] == [f"k{n}" for n in range(len(forms))]


def _not_a_point() -> bytes:
    """32 bytes that decompress to no ed25519 point (found by search, checked by libsodium)."""
    for n in range(256):
        candidate = bytes([n]) * 32
        if not crypto_core_ed25519_is_valid_point(candidate):
            return candidate
    raise AssertionError("no candidate found")  # pragma: no cover


BAD_LINES = {
    "one field": ("idp", "expected <issuer-id> ed25519:<public key> [kid], found 1 field"),
    "four fields": (f"idp ed25519:{der_public(KEY_A)} k1 extra", "found 4 fields"),
    "no ed25519: prefix": (f"idp {der_public(KEY_A)}", "field 2 does not begin 'ed25519:'"),
    "rsa key": ("idp ed25519:MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEA", "neither a raw ed25519 key"),
    "not base64": ("idp ed25519:not*base64", "neither 64 hex digits nor base64"),
    "31 bytes": (f"idp ed25519:{base64.b64encode(bytes(31)).decode()}", "decodes to 31 bytes"),
    "not a point": (f"idp ed25519:{_not_a_point().hex()}", "not a legal ed25519 point"),
    "a small-order point": ("idp ed25519:01" + "00" * 31, "not a legal ed25519 point"),
    "a kid twice": (
        f"idp ed25519:{der_public(KEY_A)} k1\nidp ed25519:{der_public(KEY_B)} k1",
        "names kid 'k1' twice (first on line 2)",
    ),
}


@pytest.mark.parametrize("line,reason", list(BAD_LINES.values()), ids=list(BAD_LINES))
def test_a_bad_line_refuses_the_whole_issuers_file_by_line(tmp_path: Path, line: str, reason: str) -> None:
    """Any line that does not parse (fields, prefix, form, length, an illegal or small-order point, a kid
    named twice for one issuer) refuses the file, naming the file, the line and why."""
    path = place(tmp_path / "issuers", f"# header\n{line}\n")
    with pytest.raises(T.IssuersFileError) as caught:
        T.TokenVerifier.open(path)
    last = 1 + line.count("\n") + 1
    assert caught.value.line == last and reason in caught.value.reason, caught.value
    assert str(caught.value).startswith(f"issuers file {path}:{last}: ")


def test_comments_blank_lines_and_several_keys_per_issuer(tmp_path: Path) -> None:
    """``#`` starts a comment anywhere, blank lines are skipped, and an issuer may hold several keys."""
    text = (
        f"\n# <issuer-id> ed25519:<key> [kid]\nidp ed25519:{der_public(KEY_A)}   # first\n\n"
        f"   idp\ted25519:{raw_public(KEY_B).hex()} 2026-09 # second\n"
    )
    table = T.parse_issuers(text)
    assert [(k.kid, k.line) for k in table["idp"]] == [(None, 3), ("2026-09", 5)]


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o620])
def test_an_issuers_file_others_may_read_or_write_is_refused_before_it_is_read(tmp_path: Path, mode: int) -> None:
    """Mode 0600 or refused: a group- or world-readable (or -writable) issuers file raises IssuersFileError
    naming ``chmod 600`` — even when its content would not parse, since it is not read."""
    path = place(tmp_path / "issuers", "this line would not parse\n", mode)
    with pytest.raises(T.IssuersFileError) as caught:
        T.TokenVerifier.open(path)
    assert f"mode {mode:04o}" in str(caught.value) and f"chmod 600 {path}" in str(caught.value)


def test_missing_files_trust_no_issuer_and_revoke_nothing(tmp_path: Path) -> None:
    """No issuers file is not a refusal: every bk1 token answers BRAINY_KEY_UNKNOWN_ISSUER naming its iss. No
    revoked list revokes nothing. The revoked list defaults to revoked.json beside the issuers file."""
    verifier = T.TokenVerifier.open(tmp_path / "nowhere" / "issuers", now=0.0)
    assert verifier.counts() == {"issuers": 0, "revoked": 0}
    assert verifier.revoked.path == tmp_path / "nowhere" / "revoked.json"
    refusal = refusal_of(verifier, sign(KEY_A, claims()))
    assert refusal.name == "BRAINY_KEY_UNKNOWN_ISSUER" and refusal.fields == {"iss": "idp"}


def test_the_default_issuers_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``$BRAINY_SERVE_ISSUERS`` when set, else ``issuers`` beside the keys file."""
    monkeypatch.delenv(T.ENV_ISSUERS, raising=False)
    assert T.default_issuers_path(tmp_path / "cfg" / "keys") == tmp_path / "cfg" / "issuers"
    monkeypatch.setenv(T.ENV_ISSUERS, str(tmp_path / "elsewhere"))
    assert T.default_issuers_path(tmp_path / "cfg" / "keys") == tmp_path / "elsewhere"


# --- 3. the revoked list ------------------------------------------------------------------------------------

BAD_REVOKED = {
    "not JSON": ("{revoked", "not JSON"),
    "no revoked member": ('{"jtis": []}', 'expected {"revoked"'),
    "revoked not an array": ('{"revoked": {}}', 'expected {"revoked"'),
    "an entry not an object": ('{"revoked": ["abc"]}', "$.revoked[0] is not an object"),
    "no jti": ('{"revoked": [{"jti": "a", "exp": 1}, {"exp": 1}]}', "$.revoked[1].jti"),
    "exp a string": ('{"revoked": [{"jti": "a", "exp": "1"}]}', "$.revoked[0].exp is not an integer"),
}


@pytest.mark.parametrize("text,reason", list(BAD_REVOKED.values()), ids=list(BAD_REVOKED))
def test_a_revoked_list_that_does_not_parse_refuses(tmp_path: Path, text: str, reason: str) -> None:
    """The seeds' shape exactly, ``{"revoked": [{"jti", "exp"}]}``; anything else is RevokedFileError saying
    where. Extra members are the feed's and are ignored."""
    path = place(tmp_path / "revoked.json", text)
    with pytest.raises(T.RevokedFileError) as caught:
        T.TokenVerifier.open(tmp_path / "issuers", path)
    assert reason in str(caught.value)
    assert T.parse_revoked('{"revoked": [{"jti": "a", "exp": 1, "why": "leak"}], "maxAge": 60}') == {"a": 1}


def test_a_revoked_list_names_no_secret_but_others_may_not_write_it(tmp_path: Path) -> None:
    """A world-readable revoked list is fine (it names no secret); one the group or the world may write is
    refused, since whoever could write it could un-revoke a token."""
    path = place(tmp_path / "revoked.json", revoked_text(("a", NOW)), 0o644)
    assert T.TokenVerifier.open(tmp_path / "issuers", path).counts()["revoked"] == 1
    os.chmod(path, 0o664)
    with pytest.raises(T.RevokedFileError) as caught:
        T.TokenVerifier.open(tmp_path / "issuers", path)
    assert f"chmod go-w {path}" in str(caught.value)


# --- 4. the reload law --------------------------------------------------------------------------------------


def test_files_are_rechecked_at_most_every_five_seconds(files: tuple[Path, Path]) -> None:
    """A changed issuers file or revoked list is not looked at within 5 s of the last check (never per
    request); the first check after that takes it, no restart."""
    verifier = T.TokenVerifier.open(*files, now=100.0)
    place(files[0], issuers_text(("idp", KEY_A, "k1"), ("idp", KEY_C, "k3")))
    place(files[1], revoked_text(("gone", NOW + 3600), ("j9", NOW + 3600)))
    rotated, revoked = sign(KEY_C, claims(kid="k3")), sign(KEY_A, claims(jti="j9"))
    for at in (100.0, 102.0, 104.99):
        with pytest.raises(R.BRAINY_KEY_BAD_SIGNATURE):
            verifier.verify(rotated, now=NOW, monotonic=at)
        assert verifier.verify(revoked, now=NOW, monotonic=at)
    assert verifier.verify(rotated, now=NOW, monotonic=105.0).id == "agent:anima"
    with pytest.raises(R.BRAINY_KEY_REVOKED):
        verifier.verify(revoked, now=NOW, monotonic=105.0)


def test_a_proven_token_is_asked_revocation_and_expiry_every_time_and_proven_again_after_a_reload(
    files: tuple[Path, Path],
) -> None:
    """A token's signature is verified once per issuers table (a keep-alive caller's next request skips it),
    yet a revocation, its exp, and an issuers file that dropped its key all stop it on the next check."""
    verifier = T.TokenVerifier.open(*files, now=100.0)
    token = sign(KEY_A, claims(kid="k1", jti="j7", exp=int(NOW) + 60))
    first = verifier.verify(token, now=NOW, monotonic=100.0)
    assert verifier._proven[token][2] is first
    assert verifier.verify(token, now=NOW, monotonic=101.0) is first  # answered from what was proven
    with pytest.raises(R.BRAINY_KEY_EXPIRED):
        verifier.verify(token, now=NOW + 60, monotonic=101.0)
    place(files[1], revoked_text(("j7", NOW + 3600)))
    with pytest.raises(R.BRAINY_KEY_REVOKED):
        verifier.verify(token, now=NOW, monotonic=106.0)
    place(files[1], revoked_text())
    place(files[0], issuers_text(("idp", KEY_C, "k3")))  # the key that signed it is gone
    with pytest.raises(R.BRAINY_KEY_BAD_SIGNATURE):
        verifier.verify(token, now=NOW, monotonic=112.0)


def test_a_verifier_remembers_at_most_its_bound_of_tokens(
    verifier: T.TokenVerifier, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(T, "PROVEN_TOKENS", 3)
    tokens = [sign(KEY_A, claims(jti=f"t{i}")) for i in range(5)]
    for token in tokens:
        verifier.verify(token, now=NOW, monotonic=0.0)
    assert list(verifier._proven) == tokens[2:]  # the oldest forgotten first


def test_a_bad_edit_is_logged_and_the_last_good_table_kept(
    files: tuple[Path, Path], caplog: pytest.LogCaptureFixture
) -> None:
    """Once running, an issuers file that stops parsing (or turns group-readable) and a revoked list that stops
    parsing are logged, once each, and the last good tables stay in force."""
    verifier = T.TokenVerifier.open(*files, now=0.0)
    good, revoked = sign(KEY_A, claims()), sign(KEY_A, claims(jti="gone"))
    place(files[0], f"idp ed25519:{_not_a_point().hex()}\n")
    place(files[1], "{not json")
    with caplog.at_level(logging.ERROR, logger="brainy.tokens"):
        for at in (5.0, 10.0, 15.0):
            assert verifier.verify(good, now=NOW, monotonic=at).id == "agent:anima"
            with pytest.raises(R.BRAINY_KEY_REVOKED):
                verifier.verify(revoked, now=NOW, monotonic=at)
        place(files[0], issuers_text(("idp", KEY_B, None)), mode=0o640)
        assert verifier.verify(good, now=NOW, monotonic=20.0).id == "agent:anima"
    messages = [r.getMessage() for r in caplog.records]
    assert sum("issuers file" in m and "not a legal ed25519 point" in m for m in messages) == 1, messages
    assert sum("revoked list" in m and "not JSON" in m for m in messages) == 1, messages
    assert sum("chmod 600" in m for m in messages) == 1, messages


def test_a_vanished_issuers_file_trusts_nobody_and_a_vanished_revoked_list_keeps_its_revocations(
    files: tuple[Path, Path],
) -> None:
    """Removing the issuers file while running means what a missing one means at start: no issuer trusted
    (the fail-closed reading). Removing the revoked list keeps the last good list: revocations are never
    dropped because a copy step deleted before it wrote."""
    verifier = T.TokenVerifier.open(*files, now=0.0)
    files[1].unlink()
    with pytest.raises(R.BRAINY_KEY_REVOKED):
        verifier.verify(sign(KEY_A, claims(jti="gone")), now=NOW, monotonic=5.0)
    files[0].unlink()
    with pytest.raises(R.BRAINY_KEY_UNKNOWN_ISSUER):
        verifier.verify(sign(KEY_A, claims()), now=NOW, monotonic=10.0)


# --- 5. the reference issuer --------------------------------------------------------------------------------


def test_keygen_writes_the_private_key_only_to_its_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``brainy issuer keygen`` writes the private key to --out at mode 0600 and prints only the issuers-file
    line (DER form, with the kid): the private key is on neither stdout nor stderr, and the file is a PKCS#8
    PEM an independent implementation loads, whose public half is the printed one."""
    out = tmp_path / "issuer.key"
    assert cli.main(["issuer", "keygen", "--issuer", "example", "--out", str(out), "--kid", "2026-09"]) == 0
    printed = capsys.readouterr()
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    line = printed.out.strip()
    assert line.split() == ["example", line.split()[1], "2026-09"] and "\n" not in line
    assert line.split()[1].startswith("ed25519:MCowBQYDK2VwAyEA")
    private = serialization.load_pem_private_key(out.read_bytes(), password=None)
    assert isinstance(private, Ed25519PrivateKey)
    assert line.split()[1] == f"ed25519:{der_public(private)}"
    seed = private.private_bytes(
        serialization.Encoding.Raw, serialization.PrivateFormat.Raw, serialization.NoEncryption()
    )
    pem_body = out.read_text().split("-----BEGIN PRIVATE KEY-----")[1].split("-----")[0].strip()
    for secret in (pem_body, seed.hex(), base64.b64encode(seed).decode(), b64url(seed), "PRIVATE KEY-----"):
        assert secret not in printed.out + printed.err
    assert f"written to {out} at mode 0600" in printed.err
    assert T.parse_issuers(line + "\n")["example"][0].kid == "2026-09"


def test_keygen_never_replaces_a_key(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """keygen onto an existing --out refuses (exit 2) and leaves the file byte for byte."""
    out = place(tmp_path / "issuer.key", "precious\n")
    assert cli.main(["issuer", "keygen", "--issuer", "x", "--out", str(out)]) == 2
    assert out.read_text() == "precious\n" and "never overwritten" in capsys.readouterr().err


def test_mint_prints_a_token_that_verifies_against_the_keygen_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``brainy token mint`` reads the issuer and kid from the key file and prints one bk1 token carrying a
    jti, exp = iat + ttl, and the scope in order; it verifies with the line keygen printed, and with an
    independent implementation holding only that line's public key."""
    out = tmp_path / "issuer.key"
    cli.main(["issuer", "keygen", "--issuer", "example", "--out", str(out), "--kid", "k7"])
    place(tmp_path / "issuers", capsys.readouterr().out)
    assert (
        cli.main(
            [
                "token",
                "mint",
                "--issuer-key",
                str(out),
                "--brain",
                "wnw",
                "--sub",
                "agent:anima",
                "--scope",
                "write,read",
                "--ttl",
                "600",
            ]
        )
        == 0
    )
    printed = capsys.readouterr()
    token = printed.out.strip()
    claims_ = T.decode(token)
    assert (claims_.iss, claims_.kid, claims_.sub, claims_.brain) == ("example", "k7", "agent:anima", "wnw")
    assert claims_.scope == ("read", "write") and claims_.exp == claims_.iat + 600 and len(claims_.jti or "") == 32
    assert f"jti {claims_.jti}" in printed.err
    got = T.TokenVerifier.open(tmp_path / "issuers").verify(token)
    assert got == Principal.token("agent:anima", "wnw", frozenset({"read", "write"}))
    public = serialization.load_der_public_key(
        base64.b64decode((tmp_path / "issuers").read_text().split()[1][len("ed25519:") :])
    )
    assert isinstance(public, Ed25519PublicKey)
    public.verify(claims_.signature, claims_.payload)  # raises if it does not verify


@pytest.mark.parametrize(
    "text,scope",
    [("read", ("read",)), ("read,write", ("read", "write")), ("owner,read,write", ("read", "write", "owner"))],
)
def test_mint_scopes(text: str, scope: tuple[str, ...]) -> None:
    """--scope is read, read,write or read,write,owner, in any order, written in that order."""
    assert I.parse_scope(text) == scope


@pytest.mark.parametrize("text", ["write", "read,owner", "owner", "read,read", "read,admin", ""])
def test_mint_refuses_other_scopes(text: str) -> None:
    """No narrower owner shape, no write without read, no unknown or repeated word."""
    with pytest.raises(I.IssuerError):
        I.parse_scope(text)


def test_mint_refuses_a_key_file_others_may_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A private key file the group may read is refused (exit 2) before it is read; so is a missing one, and
    bad --brain and --ttl values."""
    out = tmp_path / "issuer.key"
    cli.main(["issuer", "keygen", "--issuer", "x", "--out", str(out)])
    capsys.readouterr()
    base = ["token", "mint", "--issuer-key", str(out), "--sub", "s", "--scope", "read"]
    assert cli.main(base + ["--brain", "b1", "--ttl", "0"]) == 2
    assert cli.main(base + ["--brain", "../b", "--ttl", "60"]) == 2
    os.chmod(out, 0o640)
    assert cli.main(base + ["--brain", "b1", "--ttl", "60"]) == 2
    err = capsys.readouterr().err
    assert "--ttl" in err and "not a legal brain name" in err and f"chmod 600 {out}" in err
    assert (
        cli.main(
            [
                "token",
                "mint",
                "--issuer-key",
                str(tmp_path / "none"),
                "--brain",
                "b",
                "--sub",
                "s",
                "--scope",
                "read",
                "--ttl",
                "1",
            ]
        )
        == 2
    )
    assert "no such file" in capsys.readouterr().err
