"""Minted keys against a REAL ``brainy serve`` process on a free loopback port.

Seed 000, "Minted keys" through "A worked example"; seed 001, "Revocation" and "The caller on the call";
DOORS.md 0.4 and 11.2. Tokens are signed with the ``cryptography`` package, independently of the pynacl the
server verifies with. Every test starts its own server (``python -m brainy.cli serve --listen
127.0.0.1:0``), learns its port from the ``listening on`` line, and stops it with SIGTERM. Every wait is
bounded.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from launch import (
    HOST,
    REQUEST_SECONDS,
    KeptAlive,
    Served,
    free_port,
    launch,  # noqa: F401  (a pytest fixture, used by name)
    wait_until,
)

from brainy.auth.keys import fingerprint
from brainy.engine import init_store

RELOAD_SECONDS = 6.0  # the bound: 5 s of check window and a second of slack


# --- a real server (tests/launch.py) -----------------------------------------------------------------------


def ask(child: Served, *args: Any, **kwargs: Any) -> tuple[int, dict[str, Any]]:
    """One exchange with a server: (status, document)."""
    return child.request(*args, **kwargs)[:2]


def nothing_listens(port: int) -> bool:
    try:
        with socket.create_connection((HOST, port), timeout=2.0):
            return False
    except OSError:
        return True


# --- keys, issuers and tokens -----------------------------------------------------------------------------

ALICE = "bky_alice_reaches_b1_only_0001"  # person:alice, reaches b1
ORDERS = "bky_orders_service_every_brain1"  # service:orders, every brain: may assert a caller
OPERATOR = "bks_operator_service_key_00001"  # the ! key
KEY_LINES = [f"{ALICE} person:alice b1", f"{ORDERS} service:orders *", f"{OPERATOR} service:operator !"]

IDP = Ed25519PrivateKey.from_private_bytes(bytes(range(32)))  # issuer idp, kid k1
IDP_NEXT = Ed25519PrivateKey.from_private_bytes(bytes(range(5, 37)))  # issuer idp, kid k2, rotated in
SELF = Ed25519PrivateKey.from_private_bytes(bytes(range(1, 33)))  # issuer self, no kid
STRANGER = Ed25519PrivateKey.from_private_bytes(bytes(range(2, 34)))  # in no issuers file


def place(path: Path, text: str, mode: int = 0o600) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_name(path.name + ".placing")
    temp.write_text(text)
    os.chmod(temp, mode)
    os.replace(temp, path)
    return path


def der(private: Ed25519PrivateKey) -> str:
    return base64.b64encode(
        private.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    ).decode()


def issuers(*lines: tuple[str, Ed25519PrivateKey, str]) -> str:
    return "".join(f"{iss}  ed25519:{der(key)}  {kid}\n" for iss, key, kid in lines)


def revoked(*jtis: str) -> str:
    return json.dumps({"revoked": [{"jti": jti, "exp": int(time.time()) + 3600} for jti in jtis]})


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def token(key: Ed25519PrivateKey = IDP, **changes: Any) -> str:
    """A bk1 token signed by ``key``: issuer idp, kid k1, brain b1, scope read+write, an hour to live."""
    now = int(time.time())
    claims: dict[str, Any] = {
        "iss": "idp",
        "sub": "agent:anima",
        "brain": "b1",
        "scope": ["read", "write"],
        "iat": now,
        "exp": now + 3600,
        "kid": "k1",
    }
    claims.update(changes)
    body = json.dumps({k: v for k, v in claims.items() if v is not None}).encode()
    return f"bk1.{b64url(body)}.{b64url(key.sign(body))}"


@pytest.fixture
def stores(tmp_path: Path) -> dict[str, Path]:
    made = {}
    for name in ("b1", "b2"):
        made[name] = tmp_path / name
        init_store(made[name])
    return made


@pytest.fixture
def cfg(tmp_path: Path) -> Path:
    """A config folder: the keys file, an issuers file (idp k1, self) and a revoked list naming jti gone."""
    folder = tmp_path / "cfg"
    place(folder / "keys", "\n".join(KEY_LINES) + "\n")
    place(folder / "issuers", issuers(("idp", IDP, "k1"), ("self", SELF, "")))
    place(folder / "revoked.json", revoked("gone"))
    return folder


def serve_args(stores: dict[str, Path], *more: str) -> list[str]:
    return ["serve", "--listen", f"{HOST}:0", "--brain", f"b1={stores['b1']}", "--brain", f"b2={stores['b2']}", *more]


@pytest.fixture
def server(cfg: Path, stores: dict[str, Path], launch: Callable[..., Served]) -> Served:
    """A server for b1 and b2, the files above named by --keys, --issuers and --revoked."""
    return launch(
        *serve_args(
            stores,
            "--keys",
            str(cfg / "keys"),
            "--issuers",
            str(cfg / "issuers"),
            "--revoked",
            str(cfg / "revoked.json"),
        )
    )


# --- 1. accepted ------------------------------------------------------------------------------------------


def test_independently_signed_tokens_are_accepted_and_writes_carry_their_subject(server: Served) -> None:
    """Tokens signed by ``cryptography`` answer: a read token reads, a read/write token writes, and the commit
    names the token's sub as its author with no via; a kid-less issuer's token answers too."""
    status, doc = ask(server, "GET", "/v1/brains/b1/counts", token(scope=["read"]))
    assert status == 200 and doc["generation"] == 0, doc
    status, doc = ask(server, "POST", "/v1/brains/b1/add", token(), {"type": "thing", "id": "t1"})
    assert status == 200, doc
    status, commit = ask(server, "GET", f"/v1/brains/b1/generation/{doc['generation']}", token(scope=["read"]))
    assert status == 200 and commit["author"] == "agent:anima" and commit["via"] is None, commit
    status, doc = ask(server, "GET", "/v1/brains/b1/counts", token(SELF, iss="self", kid=None))
    assert status == 200 and doc["generation"] == 1, doc
    status, health = ask(server, "GET", "/v1/health", OPERATOR)
    assert status == 200 and health["auth"] == {"keys": 3, "issuers": 2, "revoked": 1}, health


# --- 2. every refusal -------------------------------------------------------------------------------------


def test_every_token_refusal_is_reached_over_http(server: Served) -> None:
    """Each check of the ladder and of the gate, by name, status and fields: MALFORMED, UNKNOWN_ISSUER,
    BAD_SIGNATURE, REVOKED, EXPIRED (401); BRAINY_KEY_SCOPE, BRAINY_KEY_BRAIN, PolicyOwnerScopeRequiredError
    and CallerAssertionRefusedError not-a-service (403). A token fails by name, never the flat
    UnauthenticatedError a static key gets."""
    past = int(time.time()) - 10
    cases = [
        ("GET", "counts", token()[:-3], None, {}, 401, {"name": "BRAINY_KEY_MALFORMED"}),
        ("GET", "counts", token(scope=["read", "root"]), None, {}, 401, {"name": "BRAINY_KEY_MALFORMED"}),
        ("GET", "counts", token(iss="nobody"), None, {}, 401, {"name": "BRAINY_KEY_UNKNOWN_ISSUER", "iss": "nobody"}),
        ("GET", "counts", token(STRANGER), None, {}, 401, {"name": "BRAINY_KEY_BAD_SIGNATURE"}),
        ("GET", "counts", token(jti="gone"), None, {}, 401, {"name": "BRAINY_KEY_REVOKED", "jti": "gone"}),
        ("GET", "counts", token(exp=past), None, {}, 401, {"name": "BRAINY_KEY_EXPIRED", "exp": past}),
        (
            "POST",
            "add",
            token(scope=["read"]),
            {"type": "thing", "id": "x"},
            {},
            403,
            {"name": "BRAINY_KEY_SCOPE", "door": "add", "scope": ["read"]},
        ),
        ("GET", "counts", token(brain="b2"), None, {}, 403, {"name": "BRAINY_KEY_BRAIN", "brain": "b1"}),
        (
            "POST",
            "policy/ratify",
            token(),
            {},
            {},
            403,
            {"name": "PolicyOwnerScopeRequiredError", "door": "policy.ratify"},
        ),
        (
            "GET",
            "counts",
            token(),
            None,
            {"X-Brainy-Caller": "person:bob"},
            403,
            {"name": "CallerAssertionRefusedError", "reason": "not-a-service"},
        ),
    ]
    for method, door, bearer, body, headers, status, expected in cases:
        got_status, doc = ask(server, method, f"/v1/brains/b1/{door}", bearer, body, headers)
        error = doc.get("error", {})
        assert got_status == status, (expected, got_status, doc)
        assert {k: error.get(k) for k in expected} == expected, (expected, doc)
    assert ask(server, "GET", "/v1/brains/b1/counts", token())[0] == 200  # the good token still answers


def test_the_ruling_doors_want_the_owner_triple(server: Served) -> None:
    """policy.ratify, policy.unlock and policy.freeze refuse PolicyOwnerScopeRequiredError (403, naming the
    door) for a read/write token, a read token, a person's static key and a service key asserting an owner;
    the owner triple passes the gate and the door itself answers (ratify wants an id; unlock and freeze act)."""
    owner = token(scope=["owner", "read", "write"])
    short = {
        "read,write token": (token(), {}),
        "read token": (token(scope=["read"]), {}),
        "static person key": (ALICE, {}),
        "asserted owner": (ORDERS, {"X-Brainy-Caller": "person:bob", "X-Brainy-Owner": "true"}),
    }
    for door in ("ratify", "unlock", "freeze"):
        for what, (bearer, headers) in short.items():
            status, doc = ask(server, "POST", f"/v1/brains/b1/policy/{door}", bearer, {}, headers)
            assert status == 403, (door, what, doc)
            assert doc["error"]["name"] == "PolicyOwnerScopeRequiredError", (door, what, doc)
            assert doc["error"]["door"] == f"policy.{door}"
    status, doc = ask(server, "POST", "/v1/brains/b1/policy/ratify", owner, {})
    assert status == 400 and doc["error"]["name"] == "InvalidArgumentError" and doc["error"]["field"] == "id", doc
    status, doc = ask(server, "POST", "/v1/brains/b1/policy/unlock", owner, {})
    assert status == 200 and doc["unlocked"] == [] and doc["frozen"] is False, doc
    status, doc = ask(server, "POST", "/v1/brains/b1/policy/freeze", owner, {})
    assert status == 200 and doc["frozen"] is True and doc["locked"] == [], doc


def test_without_an_issuers_file_no_issuer_is_trusted(
    tmp_path: Path, stores: dict[str, Path], launch: Callable[..., Served]
) -> None:
    """A server with no issuers file at its default place (``issuers`` beside the keys file) starts, says so,
    answers every bk1 token BRAINY_KEY_UNKNOWN_ISSUER naming its iss, and still answers static keys."""
    keys = place(tmp_path / "bare" / "keys", "\n".join(KEY_LINES) + "\n")
    child = launch(*serve_args(stores, "--keys", str(keys)))
    assert "absent: no issuer is trusted" in child.stderr()
    status, doc = ask(child, "GET", "/v1/brains/b1/counts", token())
    assert status == 401 and doc["error"]["name"] == "BRAINY_KEY_UNKNOWN_ISSUER" and doc["error"]["iss"] == "idp"
    assert ask(child, "GET", "/v1/brains/b1/counts", ALICE)[0] == 200


# --- 3. reload, no restart --------------------------------------------------------------------------------


def test_a_rotated_kid_and_a_revoked_jti_take_effect_within_six_seconds(
    cfg: Path, stores: dict[str, Path], launch: Callable[..., Served]
) -> None:
    """With the issuers file named by $BRAINY_SERVE_ISSUERS: a new kid's line added while running answers its
    tokens, and a jti added to the revoked list refuses its token, each within 6 s, in the same process.
    A later edit that breaks the issuers file is logged and the last good table kept."""
    child = launch(*serve_args(stores, "--keys", str(cfg / "keys")), env={"BRAINY_SERVE_ISSUERS": str(cfg / "issuers")})
    pid = child.proc.pid
    rotated, doomed = token(IDP_NEXT, kid="k2"), token(jti="doomed-1")
    assert ask(child, "GET", "/v1/brains/b1/counts", rotated)[1]["error"]["name"] == "BRAINY_KEY_BAD_SIGNATURE"
    assert ask(child, "GET", "/v1/brains/b1/counts", doomed)[0] == 200

    place(cfg / "issuers", issuers(("idp", IDP, "k1"), ("idp", IDP_NEXT, "k2"), ("self", SELF, "")))
    place(cfg / "revoked.json", revoked("gone", "doomed-1"))
    started = time.monotonic()
    took_rotation = wait_until(
        lambda: ask(child, "GET", "/v1/brains/b1/counts", rotated)[0] == 200,
        RELOAD_SECONDS - (time.monotonic() - started),
    )
    assert took_rotation is not None, "the rotated kid was not honoured within 6 s"

    def refused_as_revoked() -> bool:
        status, doc = ask(child, "GET", "/v1/brains/b1/counts", doomed)
        return status == 401 and doc["error"]["name"] == "BRAINY_KEY_REVOKED"

    assert wait_until(refused_as_revoked, RELOAD_SECONDS - (time.monotonic() - started)) is not None, (
        "the revoked jti still answered after 6 s"
    )
    assert child.proc.pid == pid and child.proc.poll() is None

    # The files are looked at by a request that presents a token (never by a watcher), so keep presenting one.
    place(cfg / "issuers", "idp ed25519:this-is-not-a-key k1\n")
    logged = re.compile(r"reload refused, keeping the last good issuers file: .*issuers:1: field 2")
    answers: list[int] = []

    def refusal_logged() -> bool:
        answers.append(ask(child, "GET", "/v1/brains/b1/counts", rotated)[0])
        return bool(logged.search(child.stderr()))

    assert wait_until(refusal_logged, RELOAD_SECONDS) is not None, child.stderr()
    assert set(answers) == {200} and ask(child, "GET", "/v1/brains/b1/counts", rotated)[0] == 200
    assert child.proc.poll() is None


def test_an_expired_token_and_a_listed_static_key_are_refused_on_their_own_keep_alive_connection(
    server: Served, cfg: Path
) -> None:
    """What a keep-alive connection's caller proved is asked again on every request: a token answered on its
    connection is BRAINY_KEY_EXPIRED on the first request after its exp, on that same connection; a static key
    answered on its connection is the flat 401 once a hand-edited revoked list naming its SHA-256 is read
    (within 6 s), polled on that same connection."""
    kept = KeptAlive(server.port)
    try:
        exp = int(time.time()) + 2
        brief = token(exp=exp)
        for _ in range(3):
            assert kept.request("GET", "/v1/brains/b1/counts", brief)[0] == 200
            assert kept.request("GET", "/v1/brains/b1/counts", ALICE)[0] == 200
        time.sleep(max(0.0, exp - time.time()) + 0.05)
        status, doc = kept.request("GET", "/v1/brains/b1/counts", brief)
        assert status == 401 and doc["error"]["name"] == "BRAINY_KEY_EXPIRED" and doc["error"]["exp"] == exp, doc

        place(
            cfg / "revoked.json",
            json.dumps(
                {
                    "revoked": [
                        {"jti": "gone", "exp": int(time.time()) + 3600},
                        {"jti": fingerprint(ALICE), "exp": int(time.time()) + 3600},
                    ]
                }
            ),
        )
        refused = wait_until(lambda: kept.request("GET", "/v1/brains/b1/counts", ALICE)[0] == 401, RELOAD_SECONDS)
        assert refused is not None, "the listed key still answered on its connection after 6 s"
        status, doc = kept.request("GET", "/v1/brains/b1/counts", ALICE)
        assert status == 401 and doc["error"]["name"] == "UnauthenticatedError", doc
        assert kept.request("GET", "/v1/brains/b1/counts", ORDERS)[0] == 200
    finally:
        kept.close()


# --- 4. refused starts ------------------------------------------------------------------------------------


REFUSED_STARTS = {
    "group-readable issuers file": (
        "issuers",
        None,
        0o640,
        r"issuers file {issuers}: mode 0640 lets the group or "
        r"the world read or write it; run: chmod 600 {issuers}",
    ),
    "corrupt key line": (
        "issuers",
        "idp ed25519:{bad}\n",
        0o600,
        r"issuers file {issuers}:2: field 2: the key is not a legal ed25519 point",
    ),
    "revoked list not JSON": ("revoked.json", "{revoked", 0o600, r"revoked list {revoked}: not JSON"),
}


@pytest.mark.parametrize("which,text,mode,message", list(REFUSED_STARTS.values()), ids=list(REFUSED_STARTS))
def test_a_bad_issuers_file_or_revoked_list_refuses_the_start_by_name(
    tmp_path: Path,
    cfg: Path,
    stores: dict[str, Path],
    launch: Callable[..., Served],
    which: str,
    text: str | None,
    mode: int,
    message: str,
) -> None:
    """A group-readable issuers file, an issuers line whose key is not a legal ed25519 point, and a revoked
    list that does not parse each refuse ``brainy serve`` before it listens: a non-zero exit, stderr naming
    the file (and line) and why, nothing on the port, and no keys file minted on the way."""
    bad = "ff" * 32  # y = 2^255 - 1 is not below the field prime: not a canonical point
    if text is not None:
        place(cfg / which, "# line 1\n" + text.format(bad=bad) if which == "issuers" else text, mode)
    else:
        os.chmod(cfg / which, mode)
    fresh_keys = tmp_path / "fresh" / "keys"  # absent: a start that got that far would mint it
    port = free_port()
    child = launch(
        "serve",
        "--listen",
        f"{HOST}:{port}",
        "--brain",
        f"b1={stores['b1']}",
        "--keys",
        str(fresh_keys),
        "--issuers",
        str(cfg / "issuers"),
        "--revoked",
        str(cfg / "revoked.json"),
        ready=False,
    )
    code = child.exit_code()
    assert code not in (None, 0), child.stderr()
    expected = message.format(issuers=re.escape(str(cfg / "issuers")), revoked=re.escape(str(cfg / "revoked.json")))
    assert re.search(r"brainy serve: refused to start: " + expected, child.stderr()), child.stderr()
    assert "listening on" not in child.stderr() and nothing_listens(port)
    assert not fresh_keys.exists()


# --- 5. the operator commands, end to end over curl -------------------------------------------------------


def brainy(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "brainy.cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=REQUEST_SECONDS,
        stdin=subprocess.DEVNULL,
    )


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
def test_mint_output_verifies_against_keygen_line_end_to_end_over_curl(
    tmp_path: Path, stores: dict[str, Path], launch: Callable[..., Served]
) -> None:
    """The worked example: ``brainy issuer keygen`` prints a line, which goes into ``issuers`` beside the keys
    file (the default place) at 0600; ``brainy token mint`` prints a token; ``curl`` with it reads the brain's
    counts. A token minted for another brain is refused BRAINY_KEY_BRAIN by the same curl."""
    keys = place(tmp_path / "kit" / "keys", "\n".join(KEY_LINES) + "\n")
    made = brainy("issuer", "keygen", "--issuer", "example", "--out", str(tmp_path / "example.key"), cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    place(tmp_path / "kit" / "issuers", made.stdout)
    child = launch(*serve_args(stores, "--keys", str(keys)))
    base = [
        "token",
        "mint",
        "--issuer-key",
        str(tmp_path / "example.key"),
        "--sub",
        "agent:anima",
        "--scope",
        "read",
        "--ttl",
        "600",
    ]
    for brain, status, name in (("b1", 200, None), ("b2", 403, "BRAINY_KEY_BRAIN")):
        minted = brainy(*base, "--brain", brain, cwd=tmp_path)
        assert minted.returncode == 0, minted.stderr
        bearer = minted.stdout.strip()
        assert bearer.startswith("bk1.") and "\n" not in bearer
        curl = subprocess.run(
            [
                "curl",
                "-sS",
                "--max-time",
                "10",
                "-w",
                "\n%{http_code}",
                "-H",
                f"Authorization: Bearer {bearer}",
                f"http://{HOST}:{child.port}/v1/brains/b1/counts",
            ],
            capture_output=True,
            text=True,
            timeout=REQUEST_SECONDS + 5,
        )
        assert curl.returncode == 0, curl.stderr
        body, code = curl.stdout.rsplit("\n", 1)
        doc = json.loads(body)
        assert int(code) == status, doc
        if name is None:
            assert doc["brain"] == "b1" and doc["generation"] == 0, doc
        else:
            assert doc["error"]["name"] == name, doc


def test_token_refusals_reach_mcp_over_http_by_name(server: Served) -> None:
    """POST /mcp meets the same ladder: a bad bk1 token is refused by the name of the check it failed (401,
    the refusal in the JSON-RPC error's data), and a good one initializes a session."""
    past = int(time.time()) - 10
    hello = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "tokens-test", "version": "1"},
        },
    }
    headers = {"MCP-Protocol-Version": "2025-06-18", "Accept": "application/json, text/event-stream"}
    for bearer, name in (
        (token()[:-3], "BRAINY_KEY_MALFORMED"),
        (token(iss="nobody"), "BRAINY_KEY_UNKNOWN_ISSUER"),
        (token(STRANGER), "BRAINY_KEY_BAD_SIGNATURE"),
        (token(jti="gone"), "BRAINY_KEY_REVOKED"),
        (token(exp=past), "BRAINY_KEY_EXPIRED"),
    ):
        status, doc = ask(server, "POST", "/mcp", bearer, hello, headers)
        assert status == 401 and doc["error"]["data"]["name"] == name, (name, status, doc)  # JSON-RPC error
    status, doc = ask(server, "POST", "/mcp", token(), hello, headers)
    assert status == 200 and doc["result"]["protocolVersion"] == "2025-06-18", doc


def test_token_refusals_reach_mcp_over_stdio_by_name(stores: dict[str, Path], cfg: Path) -> None:
    """`brainy mcp` runs as the credential in $BRAINY_KEY, checked by the same ladder: an expired, revoked or
    foreign-signed token refuses the start by the name of its check (exit 2, nothing on stdout)."""
    past = int(time.time()) - 10
    for bearer, name in (
        (token(exp=past), "BRAINY_KEY_EXPIRED"),
        (token(jti="gone"), "BRAINY_KEY_REVOKED"),
        (token(STRANGER), "BRAINY_KEY_BAD_SIGNATURE"),
    ):
        env = {**os.environ, "BRAINY_KEY": bearer}
        done = subprocess.run(
            [sys.executable, "-m", "brainy.cli", "mcp", "--brain", str(stores["b1"]), "--keys", str(cfg / "keys")],
            env=env,
            input=b"",
            capture_output=True,
            timeout=30,
        )
        assert done.returncode == 2 and done.stdout == b"", (name, done)
        assert name in done.stderr.decode(), (name, done.stderr)
