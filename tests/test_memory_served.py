"""The memory profile served: an agent's script over the official MCP SDK against a real ``brainy serve``, and
the language seam's misconfiguration refusing the server's start (DOORS 9.2; seed 000, "Sovereignty";
docs/language-providers.md). Only loopback addresses; every wait is bounded.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from server import HOST, ServerProcess, _answers, free_port, start_server, write_keys

from brainy.engine import init_store

TIMEOUT = 30.0

FACTS = {
    "Alice prefers green tea to coffee": "What does Alice like to drink?",
    "Alice's daughter starts school in September": "When does Alice's kid begin classes?",
    "Alice works night shifts as a nurse at St. Mary's": "What is Alice's job?",
    "Bob drives a blue 2015 Volvo estate": "What car does Bob have?",
    "Bob is training for the Berlin marathon": "What race is Bob preparing for?",
}


@pytest.fixture(scope="module")
def served(tmp_path_factory) -> ServerProcess:
    with start_server(tmp_path_factory.mktemp("memory") / "served") as server:
        yield server


async def _agent(server: ServerProcess) -> dict[str, Any]:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {server.key}"}, timeout=TIMEOUT)
    seen: dict[str, Any] = {}
    async with http, Client(streamable_http_client(f"{server.url}/mcp", http_client=http)) as client:

        async def call(tool: str, **arguments: Any) -> Any:
            result = await client.call_tool(tool, arguments)
            assert result.is_error is False, (tool, result.structured_content)
            return result.structured_content

        ids = {text: (await call("memory_remember", body={"text": text}))["id"] for text in FACTS}
        seen["first"] = {}
        for text, question in FACTS.items():
            hits = (await call("memory_recall", body={"query": question, "limit": 3}))["memories"]
            seen["first"][question] = (hits[0]["memory"]["id"] == ids[text], hits[0]["why"])
        conversation = [
            ("user", "Can you book a table for Friday?"),
            ("assistant", "Which restaurant?"),
            ("user", "Tasca do Chico, 8 pm, two people"),
            ("assistant", "Booked for two at 8 pm"),
        ]
        seen["seqs"] = [
            (await call("memory_turn", body={"conversation": "dinner", "role": r, "text": t}))["seq"]
            for r, t in conversation
        ]
        later = await call("memory_turns", id="dinner", body={"afterSeq": 2})
        seen["after"] = [(t["seq"], t["role"], t["text"]) for t in later["turns"]]
        seen["lastSeq"] = later["lastSeq"]
        car = "Bob drives a blue 2015 Volvo estate"
        await call("memory_retire", body={"id": ids[car], "reason": "Bob sold the Volvo"})
        hits = (await call("memory_recall", body={"query": FACTS[car]}))["memories"]
        seen["after_retire"] = [h["memory"]["id"] for h in hits]
        seen["car"] = ids[car]
        seen["author"] = (await call("memory_read", body={"id": ids[car]}))["memory"]["author"]
        missing = await client.call_tool("memory_reinforce", {"body": {"id": "no-such-memory"}})
        seen["missing"] = (missing.is_error, missing.structured_content)
        return seen


@pytest.mark.slow
def test_an_agent_remembers_recalls_follows_and_forgets_over_mcp(served):
    """Remember facts, recall each by a paraphrase sharing few words (the right memory first), turn a short
    conversation and read it back after a seq, retire a fact and see recall drop it; a refusal is a tool
    result flagged isError naming its class."""
    seen = asyncio.run(asyncio.wait_for(_agent(served), TIMEOUT))
    for question, (right, why) in seen["first"].items():
        assert right, question
        assert set(why) <= {"semantic", "text", "strength"} and why["semantic"] > 0
    assert seen["seqs"] == [1, 2, 3, 4]
    assert seen["after"] == [
        (3, "user", "Tasca do Chico, 8 pm, two people"),
        (4, "assistant", "Booked for two at 8 pm"),
    ]
    assert seen["lastSeq"] == 4
    assert seen["car"] not in seen["after_retire"]
    assert seen["author"] == served.principal
    is_error, content = seen["missing"]
    assert is_error is True and content["error"]["name"] == "RecordNotFoundError"


async def _note(server: ServerProcess) -> tuple[Any, Any]:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {server.key}"}, timeout=TIMEOUT)
    async with http, Client(streamable_http_client(f"{server.url}/mcp", http_client=http)) as client:
        wrote = await client.call_tool(
            "memory_write",
            {
                "body": {
                    "path": "/notes/dinner.md",
                    "summary": "the booking",
                    "content": "Tasca do Chico, Friday 8 pm, two people",
                }
            },
        )
        read = await client.call_tool("memory_read", {"body": {"path": "/notes/dinner.md"}})
        return wrote, read


def test_memory_write_over_mcp_without_a_reading_door(served):
    """memory_write as an MCP tool: the file and its note in one commit; with no --reading-door the answer says
    doorUrl null, not-configured, and the note reads back by its path."""
    wrote, read = asyncio.run(asyncio.wait_for(_note(served), TIMEOUT))
    assert wrote.is_error is False, wrote.structured_content
    got = wrote.structured_content
    assert (got["doorUrl"], got["doorUrlReason"], got["path"]) == (None, "not-configured", "/notes/dinner.md")
    memory = read.structured_content["memory"]
    assert (memory["id"], memory["kind"], memory["text"], memory["generation"]) == (
        got["id"],
        "note",
        "the booking",
        got["generation"],
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    "env, says",
    [
        ({"OPENAI_API_KEY": "sk-a", "ANTHROPIC_API_KEY": "sk-b"}, "choose one with BRAINY_LANGUAGE_PROVIDER"),
        ({"BRAINY_LANGUAGE_PROVIDER": "openai"}, "needs OPENAI_API_KEY"),
        ({"BRAINY_LANGUAGE_PROVIDER": "ollama", "BRAINY_OUTBOUND_ALLOW": "models.internal"}, "outbound gate"),
    ],
)
def test_a_misconfigured_language_provider_stops_the_server_before_it_binds(tmp_path, env, says):
    """A misconfiguration refuses the start: exit status 2, the reason on stderr, and the port never answers."""
    init_store(tmp_path / "notes")
    keys = write_keys(tmp_path / "keys", "notes")
    port = free_port()
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("BRAINY_LANGUAGE", "OPENAI_", "ANTHROPIC_"))}
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
        ],
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 2, done.stderr
    assert "refused to start" in done.stderr and says in done.stderr
    assert not _answers(HOST, port)
