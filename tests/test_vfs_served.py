"""The 17 vfs doors on the real server, over HTTP/1.1 (curl), HTTP/2 (the h2 library) and MCP (the official SDK).

On HTTP every vfs door is ``POST P/vfs`` with ``op`` (DOORS.md 0.2); on MCP each door is its own tool and ``op``
may be left out. One script runs every door on each transport under its own folder and the answers agree.
Then MCP's skills (seed 000, "MCP"; DOORS.md 0.7): a skill written a moment earlier is listed, titled from its
front matter, and read; and a new session's ``initialize.instructions`` is the store's
``/_brainy/mcp/instructions.md`` once it is written.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import random
from collections.abc import Awaitable, Callable
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from server import H2Client, ServerProcess, curl, start_server

TIMEOUT = 30.0
Call = Callable[[str, dict[str, Any]], Awaitable[dict[str, Any]]]
BINARY = random.Random(7).randbytes(300_000)


@pytest.fixture(scope="module")
def served(tmp_path_factory) -> ServerProcess:
    with start_server(tmp_path_factory.mktemp("vfs") / "served") as server:
        yield server


def _headers(server: ServerProcess) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {server.key}"), ("content-type", "application/json"))


def http_call(server: ServerProcess, http2: bool) -> Call:
    async def call(op: str, body: dict[str, Any]) -> dict[str, Any]:
        data = json.dumps({"op": op, **body}).encode()
        if http2:
            with H2Client(server.address) as client:
                answer = client.call("POST", server.path("vfs"), data, _headers(server))
        else:
            answer = curl(server, "POST", server.path("vfs"), data, headers=_headers(server))
        doc = answer.doc
        assert (answer.status == 200) == ("error" not in doc), (op, answer.status, doc)
        return doc

    return call


async def script(call: Call, root: str) -> dict[str, Any]:
    """Every vfs door once (and a refusal), under ``root``; answers what a transport must agree on."""
    seen: dict[str, Any] = {}
    text = "# Plan\nnaïve — 日本語\n"
    wrote = await call("writeFile", {"path": f"{root}/docs/plan.md", "content": text, "createParents": True})
    seen["wrote"] = (wrote["created"], wrote["hash"], wrote["size"], wrote["contentType"])
    binary = await call(
        "writeFile",
        {"path": f"{root}/docs/blob.bin", "content": base64.b64encode(BINARY).decode(), "encoding": "base64"},
    )
    seen["binary"] = binary["hash"]
    await call("appendFile", {"path": f"{root}/docs/plan.md", "content": "more\n"})
    read = await call("readFile", {"path": f"{root}/docs/plan.md"})
    seen["read"] = read["content"]
    back = await call("readFile", {"path": f"{root}/docs/blob.bin", "encoding": "base64"})
    seen["binary-back"] = base64.b64decode(back["content"]) == BINARY
    old = await call("readFile", {"path": f"{root}/docs/plan.md", "generation": wrote["generation"]})
    seen["old"] = old["content"]
    made = await call("mkdir", {"path": f"{root}/docs/sub/deeper", "parents": True})
    seen["mkdir"] = made["created"]
    await call("copy", {"path": f"{root}/docs/plan.md", "to": f"{root}/docs/sub/copy.md"})
    await call("rename", {"path": f"{root}/docs/sub/copy.md", "to": f"{root}/docs/sub/renamed.md"})
    await call("move", {"path": f"{root}/docs/sub/renamed.md", "to": f"{root}/docs/sub/deeper"})
    await call("setxattr", {"path": f"{root}/docs/plan.md", "name": "tag", "value": {"k": [1, 2]}})
    seen["getxattr"] = await call("getxattr", {"path": f"{root}/docs/plan.md", "name": "tag"})
    seen["listxattr"] = (await call("listxattr", {"path": f"{root}/docs/plan.md"}))["names"]
    seen["removexattr"] = (await call("removexattr", {"path": f"{root}/docs/plan.md", "name": "tag"}))["removed"]
    listing = await call("readdir", {"path": f"{root}/docs"})
    seen["readdir"] = [
        (n["path"][len(root) :], n["type"], n.get("content"), n.get("omitted")) for n in listing["nodes"]
    ]
    seen["stat"] = (await call("stat", {"path": f"{root}/docs/blob.bin"}))["node"]["size"]
    exists = await call("exists", {"path": f"{root}/docs/sub"})
    seen["exists"] = {k: v for k, v in exists.items() if k != "_meta"}
    history = await call("fileHistory", {"path": f"{root}/docs/plan.md"})
    seen["history"] = [v["op"] for v in history["versions"]]
    await call("unlink", {"path": f"{root}/docs/blob.bin"})
    removed = await call("rmdir", {"path": f"{root}/docs/sub", "recursive": True})
    seen["rmdir"] = removed["removed"]
    refused = await call("readFile", {"path": f"{root}/docs/blob.bin"})
    seen["refused"] = (refused["error"]["name"], refused["error"]["path"][len(root) :])
    invalid = await call("stat", {"path": f"{root}/docs/../x"})
    seen["invalid"] = (invalid["error"]["name"], invalid["error"]["reason"])
    return seen


def check(seen: dict[str, Any]) -> None:
    text = "# Plan\nnaïve — 日本語\n"
    assert seen["wrote"] == (
        True,
        "sha256:" + hashlib.sha256(text.encode()).hexdigest(),
        len(text.encode()),
        "text/markdown",
    )
    assert seen["binary"] == "sha256:" + hashlib.sha256(BINARY).hexdigest() and seen["binary-back"] is True
    assert seen["read"] == text + "more\n" and seen["old"] == text and seen["mkdir"] is True
    assert seen["getxattr"]["value"] == {"k": [1, 2]} and seen["getxattr"]["exists"] is True
    assert seen["listxattr"] == ["tag"] and seen["removexattr"] is True
    assert seen["readdir"] == [
        ("/docs/blob.bin", "file", None, "not-text"),
        ("/docs/plan.md", "file", text + "more\n", None),
        ("/docs/sub", "directory", None, None),
        ("/docs/sub/deeper", "directory", None, None),
        ("/docs/sub/deeper/renamed.md", "file", text + "more\n", None),
    ]
    assert seen["stat"] == len(BINARY) and seen["exists"] == {"exists": True, "type": "directory"}
    assert seen["history"] == ["xattr", "xattr", "append", "write"]
    assert seen["rmdir"] == 3 and seen["refused"] == ("FileNotFoundError", "/docs/blob.bin")
    assert seen["invalid"] == ("InvalidPathError", "dot-segment")


def test_every_vfs_door_over_http1(served):
    check(asyncio.run(asyncio.wait_for(script(http_call(served, False), "/h1"), TIMEOUT * 4)))


def test_every_vfs_door_over_http2(served):
    check(asyncio.run(asyncio.wait_for(script(http_call(served, True), "/h2"), TIMEOUT * 4)))


def mcp_client(served: ServerProcess) -> tuple[Client, httpx2.AsyncClient]:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {served.key}"}, timeout=TIMEOUT)
    return Client(streamable_http_client(f"{served.url}/mcp", http_client=http)), http


def test_every_vfs_door_over_mcp(served):
    async def talk() -> dict[str, Any]:
        client, http = mcp_client(served)
        async with http, client:

            async def call(op: str, body: dict[str, Any]) -> dict[str, Any]:
                # off HTTP op may be left out (every other call), or sent equal to the tool's door
                document = {"op": op, **body} if len(body) % 2 else body
                result = await client.call_tool(f"brainy_{op}", {"body": document})
                assert result.is_error == ("error" in result.structured_content)
                return result.structured_content

            seen = await script(call, "/mcp")
            wrong = await client.call_tool("brainy_stat", {"body": {"op": "readFile", "path": "/mcp"}})
            seen["wrong-op"] = wrong.structured_content["error"]
            return seen

    seen = asyncio.run(asyncio.wait_for(talk(), TIMEOUT * 4))
    check(seen)
    assert seen["wrong-op"]["name"] == "InvalidArgumentError" and seen["wrong-op"]["field"] == "op"


def test_a_write_is_refused_to_a_bare_service_key(served):
    headers = (("authorization", f"Bearer {served.service_key}"), ("content-type", "application/json"))
    answer = curl(
        served,
        "POST",
        served.path("vfs"),
        json.dumps({"op": "writeFile", "path": "/s.md", "content": "x"}).encode(),
        headers=headers,
    )
    assert answer.refusal in ("ServiceKeyCannotWriteError", "ForbiddenError")


SKILL = """---
title: Filing a receipt
description: How to file an expense receipt in the ledger
---
# Receipts

Photograph it, then file it.
"""


def test_mcp_lists_and_reads_a_skill_and_serves_the_stores_instructions(served):
    """A skill written a moment earlier over HTTP is listed (title and description from its front matter)
    and read through readFile; a new session's instructions are /_brainy/mcp/instructions.md once written."""

    async def session() -> tuple[str | None, list[Any], Any]:
        client, http = mcp_client(served)
        async with http, client:
            listed = (await client.list_resources()).resources
            skills = [r for r in listed if str(r.uri).startswith("brainy://skills/")]
            read = await client.read_resource("brainy://skills/finance%2Freceipts.md") if skills else None
            return client.instructions, skills, read

    write = http_call(served, False)
    before, skills_before, _ = asyncio.run(asyncio.wait_for(session(), TIMEOUT))
    assert before and "brainy is a knowledge store" in before  # the compact default
    asyncio.run(write("writeFile", {"path": "/skills/finance/receipts.md", "content": SKILL, "createParents": True}))
    _, skills, read = asyncio.run(asyncio.wait_for(session(), TIMEOUT))
    skill = next(s for s in skills if str(s.uri) == "brainy://skills/finance%2Freceipts.md")
    assert skill.title == "Filing a receipt"
    assert skill.description == "How to file an expense receipt in the ledger"
    assert skill.mime_type == "text/markdown"
    assert read.contents[0].text == SKILL and read.contents[0].mime_type == "text/markdown"
    own = "# This store\n\nUse brainy_readFile on /skills first; file receipts under /finance.\n"
    asyncio.run(write("writeFile", {"path": "/_brainy/mcp/instructions.md", "content": own, "createParents": True}))
    after, _, _ = asyncio.run(asyncio.wait_for(session(), TIMEOUT))
    assert after == own
