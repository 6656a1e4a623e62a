"""memory.write served (DOORS 9.2; seed 001 "The reading-door callback"): a real ``brainy serve --reading-door``
and a real receiver on loopback. An owner-rung write gets the receiver's link and the receiver the seeds' body;
a caller short of the rung, or a receiver that fails, gets ``doorUrl: null`` with its reason and the write stands;
a guardrail stops the write before either part lands. Only loopback addresses; every wait is bounded."""

from __future__ import annotations

import http.client
import json
import time
from typing import Any
from urllib.parse import quote

import pytest
from server import PERSON, PERSON_KEY, SERVICE_KEY, Receiver, ServerProcess, start_server, trusted_issuer

from brainy.auth import issuer

TIMEOUT = 20.0
OWNER_SUB = "person:owner@example.com"
NOTE = {
    "content": "# Idea\n\nBrew the tea at 80 degrees, never boiling.\n",
    "summary": "how to brew green tea",
    "tags": ["idea", "tea"],
}


@pytest.fixture(scope="module")
def receiver() -> Any:
    r = Receiver()
    yield r
    r.close()


@pytest.fixture(scope="module")
def served(tmp_path_factory, receiver) -> Any:
    """One server naming the receiver as its reading door, with an issuers file whose tokens the tests mint."""
    directory = tmp_path_factory.mktemp("mwrite") / "served"
    signer = trusted_issuer(directory)
    with start_server(directory, extra_args=("--reading-door", receiver.url)) as server:
        server.extra["signer"] = signer
        yield server


@pytest.fixture(autouse=True)
def fresh(receiver):
    receiver.mode = "ok"
    receiver.seen.clear()


def token(server: ServerProcess, *scope: str, sub: str = OWNER_SUB) -> str:
    return issuer.mint(server.extra["signer"], server.brain, sub, scope, 600)[0]


def call(server: ServerProcess, method: str, door_path: str, key: str, body: Any = None) -> tuple[int, Any]:
    """One HTTP/1.1 exchange on a fresh loopback connection: (status, document)."""
    connection = http.client.HTTPConnection(server.host, server.port, timeout=TIMEOUT)
    try:
        headers = {"Authorization": f"Bearer {key}"}
        data = None
        if body is not None:
            data, headers["Content-Type"] = json.dumps(body).encode(), "application/json"
        connection.request(method, server.path(door_path), data, headers)
        response = connection.getresponse()
        return response.status, json.loads(response.read())
    finally:
        connection.close()


def write(server: ServerProcess, key: str, path: str, **more: Any) -> tuple[int, Any]:
    return call(server, "POST", "memory/write", key, {"path": path, **NOTE, **more})


def note_at(server: ServerProcess, path: str) -> tuple[int, Any]:
    return call(server, "GET", f"memory/read?path={quote(path)}", PERSON_KEY)


def test_an_owner_write_gets_the_receivers_link(served, receiver):
    """The owner triple: the write commits, then the receiver is asked once, with the server's service key and the
    seeds' body (the path, the token's own sub, summary, tags, the stored content type); its link is the answer's."""
    status, got = write(served, token(served, "read", "write", "owner"), "/ideas/tea.md")
    assert status == 200, got
    assert got["doorUrl"] == "https://door.example/d/1" and "doorUrlReason" not in got
    ((headers, body),) = receiver.seen
    assert headers["authorization"] == f"Bearer {SERVICE_KEY}"
    assert body == {
        "vfsPath": "/ideas/tea.md",
        "owner": OWNER_SUB,
        "summary": NOTE["summary"],
        "tags": NOTE["tags"],
        "contentType": "text/markdown",
    }
    status, read = note_at(served, "/ideas/tea.md")
    assert status == 200 and read["memory"]["id"] == got["id"] and read["memory"]["generation"] == got["generation"]
    status, file = call(served, "POST", "vfs", PERSON_KEY, {"op": "readFile", "path": "/ideas/tea.md"})
    assert (status, file["content"], file["generation"]) == (200, NOTE["content"], got["generation"])


@pytest.mark.parametrize("who", ["person key", "read-write token"])
def test_without_the_owner_rung_the_write_stands_and_nothing_is_asked(served, receiver, who):
    """A static person key, or a token without ``owner``: doorUrl null, reason not-owner, the receiver hears
    nothing, and the file and its note are there."""
    key = PERSON_KEY if who == "person key" else token(served, "read", "write", sub="agent:anima")
    path = f"/plain/{who.replace(' ', '-')}.md"
    status, got = write(served, key, path)
    assert status == 200, got
    assert (got["doorUrl"], got["doorUrlReason"]) == (None, "not-owner")
    assert receiver.seen == []
    status, read = note_at(served, path)
    assert status == 200 and read["memory"]["author"] == (PERSON if who == "person key" else "agent:anima")


def test_a_failing_receiver_is_a_mint_failure_never_a_write_failure(served, receiver):
    """The receiver answers 500: the write answers 200 with doorUrl null and the mint failure named; the rows
    it wrote stand."""
    receiver.mode = "500"
    status, got = write(served, token(served, "read", "write", "owner"), "/ideas/down.md")
    assert status == 200, got
    assert got["doorUrl"] is None and got["doorUrlReason"] == "mint-failed: the receiver answered 500"
    assert len(receiver.seen) == 1
    assert note_at(served, "/ideas/down.md")[1]["memory"]["id"] == got["id"]


def test_a_guardrail_stops_memory_write_over_http(served, receiver):
    """An agent that declared a rule on memory.write is refused GuardrailRefusedError 403 naming the rule: no file,
    no note, no mint; the audit lists the refusal."""
    agent = token(served, "read", "write", sub="agent:careful")
    status, rule = call(served, "POST", "policy/declare", agent, {"doors": ["memory.write"], "reason": "read only"})
    assert status == 200, rule
    status, got = write(served, agent, "/careful/note.md")
    assert status == 403 and got["error"]["name"] == "GuardrailRefusedError", got
    assert got["error"]["rules"] == [{"id": rule["id"], "tier": 2, "reason": "read only"}]
    assert got["error"]["caller"] == "agent:careful"
    assert receiver.seen == []
    status, there = call(served, "POST", "vfs", PERSON_KEY, {"op": "exists", "path": "/careful/note.md"})
    assert (status, there) == (200, {**there, "exists": False})
    assert note_at(served, "/careful/note.md")[1]["error"]["name"] == "RecordNotFoundError"
    deadline = time.monotonic() + TIMEOUT
    events: list[Any] = []
    while time.monotonic() < deadline and not events:
        events = [e for e in call(served, "GET", "policy/audit", agent)[1]["events"] if e["door"] == "memory.write"]
    assert [e["caller"] for e in events] == ["agent:careful"]
