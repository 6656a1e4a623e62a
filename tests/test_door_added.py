"""Adding a door is one contract entry plus one registered function.

A copy of the contract gains the door ``echo``; ``tests/procs/door_added.py`` registers its one
function and runs the real ``brainy serve`` on the copy (``BRAINY_CONTRACT``). The door then answers
over HTTP/1.1 (curl), HTTP/2 (the h2 library) and MCP (the official SDK), through the same gate and
the same argument check as every door, with nothing else written for it.
"""

from __future__ import annotations

import asyncio
import copy
import json
from pathlib import Path

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from server import H2Client, curl, start_server

from brainy.contract import doors as D

PROCS = Path(__file__).parent / "procs"
ECHO = {
    "name": "echo",
    "layer": "engine",
    "kind": "read",
    "access": "principal",
    "pinnable": True,
    "signature": "echo(args: {text: string; times?: int}): Promise<{echoed: string}>",
    "summary": "Answers the text it is given, repeated.",
    "when": "Check a door added through one registration.",
    "http": {"method": "POST", "path": "/v1/brains/{brain}/echo"},
    "params": [
        {"name": "brain", "type": "string", "required": True, "in": "path"},
        {"name": "text", "type": "string", "required": True, "in": "body"},
        {"name": "times", "type": "int", "required": False, "in": "body", "default": 1},
    ],
    "sets": ["C"],
    "refusals": [],
    "disposition": {"native": True},
}


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    directory = tmp_path_factory.mktemp("door-added")
    contract = copy.deepcopy(D.read_contract())
    contract["doors"].append(ECHO)
    D.load(contract)  # the copy is a valid contract
    (directory / "contract.json").write_text(json.dumps(contract))
    with start_server(
        directory / "served",
        command=(str(PROCS / "door_added.py"),),
        env_extra={"BRAINY_CONTRACT": str(directory / "contract.json")},
    ) as server:
        yield server


def _post(server, body, http2=False):
    headers = (("authorization", f"Bearer {server.key}"), ("content-type", "application/json"))
    return curl(server, "POST", server.path("echo"), json.dumps(body).encode(), headers=headers, http2=http2)


def test_the_added_door_answers_over_h1_and_h2(served):
    h1 = _post(served, {"text": "hi", "times": 3})
    assert h1.status == 200 and h1.doc["echoed"] == "hihihi" and h1.doc["brain"] == "notes"
    with H2Client(served.address) as client:
        h2 = client.call(
            "POST",
            served.path("echo"),
            json.dumps({"text": "yo"}).encode(),
            (("authorization", f"Bearer {served.key}"), ("content-type", "application/json")),
        )
    assert h2.status == 200 and h2.doc["echoed"] == "yo" and "ms" in h2.doc["_meta"]


def test_the_added_door_is_checked_and_gated_like_every_door(served):
    missing = _post(served, {})
    assert (missing.status, missing.refusal) == (400, "InvalidArgumentError")
    assert missing.doc["error"]["field"] == "text" and missing.doc["error"]["reason"] == "missing"
    wrong = _post(served, {"text": "x", "times": "twice"})
    assert wrong.doc["error"]["field"] == "times" and wrong.doc["error"]["reason"] == "wrong-type"
    unknown = _post(served, {"text": "x", "loud": True})
    assert unknown.doc["error"]["reason"] == "unknown-argument"
    anonymous = curl(
        served, "POST", served.path("echo"), b'{"text": "x"}', headers=(("content-type", "application/json"),)
    )
    assert (anonymous.status, anonymous.refusal) == (401, "UnauthenticatedError")
    pinned = _post_path(served, "asOf", {"generation": 0, "read": {"door": "echo", "args": {"text": "then"}}})
    assert pinned.status == 200 and pinned.doc["result"] == {"echoed": "then", "brain": "notes", "generation": 0}


def _post_path(server, door, body):
    headers = (("authorization", f"Bearer {server.key}"), ("content-type", "application/json"))
    return curl(server, "POST", server.path(door), json.dumps(body).encode(), headers=headers)


def test_the_added_door_is_an_mcp_tool(served):
    async def talk():
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {served.key}"}, timeout=20.0)
        async with http, Client(streamable_http_client(f"{served.url}/mcp", http_client=http)) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            answer = await client.call_tool("brainy_echo", {"body": {"text": "mcp", "times": 2}})
            refused = await client.call_tool("brainy_echo", {"body": {"times": 2}})
            return tools, answer, refused

    tools, answer, refused = asyncio.run(asyncio.wait_for(talk(), 20.0))
    assert "brainy_echo" in tools and ECHO["signature"] in tools["brainy_echo"].description
    assert not answer.is_error and answer.structured_content["echoed"] == "mcpmcp"
    assert refused.is_error and refused.structured_content["error"]["reason"] == "missing"
