"""The reading-door callback (seed 001, "The reading-door callback"; DOORS 9.2 memory.write): the mint against a
real receiver on loopback, every mint failure named and never raised, the owner rung, and the start-up refusal."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from server import HOST, SERVICE_KEY, Receiver, free_port, start_server

from brainy.auth import reading_door as RD
from brainy.auth.principal import OWNER_TRIPLE, Principal
from brainy.engine import init_store

SCOPE_RW = frozenset({"read", "write"})


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.close()


OWNER = Principal.token("person:you@example.com", "notes", OWNER_TRIPLE)


def mint(door: RD.ReadingDoor | None, principal: Principal = OWNER) -> dict[str, Any]:
    return asyncio.run(
        RD.door_url(door, principal, "/notes/idea.md", "a one-line gist", ["idea", "note"], "text/markdown")
    )


def test_the_mint_posts_the_seeds_body_with_the_service_key(receiver):
    """One POST to the URL (its query kept), JSON, ``Authorization: Bearer`` the service key; the body names the
    path, the calling credential's own id, the summary, tags and content type; the answer's doorUrl is passed on."""
    door = RD.ReadingDoor(receiver.url, lambda: SERVICE_KEY)
    assert mint(door) == {"doorUrl": "https://door.example/d/1"}
    ((headers, body),) = receiver.seen
    assert headers["authorization"] == f"Bearer {SERVICE_KEY}"
    assert headers["content-type"] == "application/json"
    assert body == {
        "vfsPath": "/notes/idea.md",
        "owner": "person:you@example.com",
        "summary": "a one-line gist",
        "tags": ["idea", "note"],
        "contentType": "text/markdown",
    }


def test_an_asserted_owner_mints_for_the_asserted_person(receiver):
    """A service asserting ``X-Brainy-Owner: true`` holds the loose owner rung; the owner is the person it
    speaks for, never the service."""
    asserted = Principal("service:orders", "service", caller="person:bob", via="service:orders", owner=True)
    assert mint(RD.ReadingDoor(receiver.url, lambda: SERVICE_KEY), asserted)["doorUrl"]
    assert receiver.seen[0][1]["owner"] == "person:bob"


@pytest.mark.parametrize(
    "principal",
    [
        Principal.token("agent:anima", "notes", SCOPE_RW),
        Principal.static_key("person:you@example.com"),
        Principal("service:orders", "service", caller="person:bob", via="service:orders", owner=False),
    ],
    ids=["read-write token", "static person key", "asserted non-owner"],
)
def test_without_the_owner_rung_nothing_is_sent(receiver, principal):
    """A caller short of the owner rung gets doorUrl null, reason not-owner, and the receiver hears nothing."""
    assert mint(RD.ReadingDoor(receiver.url, lambda: SERVICE_KEY), principal) == {
        "doorUrl": None,
        "doorUrlReason": "not-owner",
    }
    assert receiver.seen == []


def test_no_receiver_configured():
    """Without --reading-door: doorUrl null, reason not-configured."""
    assert mint(None) == {"doorUrl": None, "doorUrlReason": "not-configured"}


@pytest.mark.parametrize(
    "mode, says",
    [
        ("500", "answered 500"),
        ("nourl", "no doorUrl string"),
        ("notjson", "not JSON"),
        ("slow", "did not answer within 0.3 s"),
    ],
)
def test_every_bad_answer_is_a_mint_failure_never_a_raise(receiver, mode, says):
    """A non-2xx status, an answer without a doorUrl string, a non-JSON answer and a timeout are each a named
    mint failure in the answer; nothing raises."""
    receiver.mode = mode
    started = time.monotonic()
    answer = mint(RD.ReadingDoor(receiver.url, lambda: SERVICE_KEY, timeout=0.3))
    assert answer["doorUrl"] is None and answer["doorUrlReason"].startswith("mint-failed: ")
    assert says in answer["doorUrlReason"], answer
    assert time.monotonic() - started < 0.9  # the timeout bounds the whole exchange


def test_an_unreachable_receiver_and_a_missing_key_are_mint_failures():
    """Nothing listening, or no service key left in the keys file at mint time: named mint failures."""
    closed = f"http://{HOST}:{free_port()}/mint"
    assert "unreachable" in mint(RD.ReadingDoor(closed, lambda: SERVICE_KEY))["doorUrlReason"]
    assert mint(RD.ReadingDoor(closed, lambda: None))["doorUrlReason"] == "mint-failed: no service key in the keys file"


def test_the_timeout_is_five_seconds():
    """The seed's READING_DOOR_MINT_TIMEOUT_MS: 5 s, the default of every receiver."""
    assert RD.MINT_TIMEOUT == 5.0
    assert RD.configure("http://127.0.0.1:1/x", lambda: SERVICE_KEY).timeout == 5.0


def test_configure_checks_the_url_and_the_service_key():
    """No flag: no receiver. A URL that is not http(s) with a host, or no service-key line: refused."""
    assert RD.configure(None, lambda: None) is None
    for bad in ("ftp://x/y", "door.example/mint", "http:///nohost"):
        with pytest.raises(RD.ReadingDoorConfigError):
            RD.configure(bad, lambda: SERVICE_KEY)
    with pytest.raises(RD.ReadingDoorConfigError, match="no service-key line"):
        RD.configure("http://127.0.0.1:1/x", lambda: None)


@pytest.mark.slow
def test_serve_refuses_to_start_with_a_reading_door_and_no_service_key(tmp_path: Path):
    """``brainy serve --reading-door URL`` with a keys file holding no ``!`` line exits 2 before it binds, saying
    why; with the line (tests/server.py writes one) it starts."""
    init_store(tmp_path / "notes")
    keys = tmp_path / "keys"
    keys.write_text("bky_reading_door_person_0123456789  person:you@example.com  notes\n")
    keys.chmod(0o600)
    port = free_port()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "brainy.cli",
            "serve",
            "--listen",
            f"{HOST}:{port}",
            "--brain",
            f"notes={tmp_path / 'notes'}",
            "--keys",
            str(keys),
            "--reading-door",
            "http://127.0.0.1:1/mint",
        ],
        capture_output=True,
        text=True,
        timeout=30,
        stdin=subprocess.DEVNULL,
        cwd=tmp_path,
    )
    assert done.returncode == 2, done.stderr
    assert "refused to start" in done.stderr and "no service-key line" in done.stderr
    with start_server(tmp_path / "with", extra_args=("--reading-door", "http://127.0.0.1:1/mint")) as server:
        assert server.alive()
        assert "reading door: http://127.0.0.1:1/mint" in server.log()
