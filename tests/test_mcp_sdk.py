"""MCP spoken by the official MCP Python SDK client (the ``mcp`` package) to real processes: ``brainy mcp`` over
stdio, ``brainy serve`` over streamable HTTP at /mcp, and the starter's snippet as a client would paste it.

Seed 000, "MCP" and "The starter"; seed 001, "Which brain a call reaches"; DOORS.md 0.7, 10.2, 11.1; MCP
2025-06-18. The SDK connects the way it connects to any server (``mode="auto"``: it probes a later revision's
``server/discover`` first, is refused, and falls back to ``initialize``), so these tests also show brainy
answers a newer client. Only loopback addresses; every wait is bounded.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import select
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from server import ServerProcess, start_server, write_keys

from brainy.contract import doors as D
from brainy.engine import init_store

TIMEOUT = 20.0
BOTH_KEY = "bky_mcp_sdk_tests_both_brains_01234567"
# a principal's door that refuses by its disposition whatever it is sent (every door a principal reaches that was
# not yet native has landed; an in-process-only door refuses InProcessOnlyError, naming what to call instead)
PENDING = next(
    d
    for d in D.DOORS
    if not d.native and d.access == "principal" and d.rung is None and not any(p.required for p in d.document_params)
)


def run(coro: Any) -> Any:
    """Run one client conversation, bounded."""
    return asyncio.run(asyncio.wait_for(coro, TIMEOUT))


def tool_dicts(tools: list[Any]) -> list[dict[str, Any]]:
    """The SDK's Tool models as the JSON the server sent."""
    return [t.model_dump(by_alias=True, exclude_none=True, mode="json") for t in tools]


@pytest.fixture(scope="module")
def served(tmp_path_factory) -> ServerProcess:
    """One ``brainy serve`` with two brains, ``notes`` and ``other``; its person key reaches ``notes``, and a
    second key (added to the keys file while it runs) reaches both."""
    directory = tmp_path_factory.mktemp("mcp") / "served"
    directory.mkdir()
    init_store(directory / "other")
    with start_server(directory, extra_args=("--brain", f"other={directory / 'other'}")) as server:
        with open(server.keys_path, "a") as keys:
            keys.write(f"{BOTH_KEY}  person:both@example.com  notes other\n")
        time.sleep(0.3)  # the keys file is re-read when its mtime moves, at most every 0.25 s
        yield server


def http_client(server: ServerProcess, key: str) -> tuple[Client, httpx2.AsyncClient]:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=TIMEOUT)
    return Client(streamable_http_client(f"{server.url}/mcp", http_client=http)), http


@pytest.fixture
def stdio_store(tmp_path) -> tuple[Path, Path, str]:
    """A fresh store ``notes`` and a keys file with a person key reaching it (and the service key)."""
    init_store(tmp_path / "notes")
    keys = write_keys(tmp_path / "keys", "notes")
    return tmp_path / "notes", keys, "bky_protocol_tests_person_0123456789"


def stdio_params(store: Path, keys: Path, key: str | None) -> StdioServerParameters:
    env = {"PYTHONPATH": os.environ.get("PYTHONPATH", "")}
    if key is not None:
        env["BRAINY_KEY"] = key
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "brainy.cli", "mcp", "--brain", str(store), "--keys", str(keys)],
        env=env,
        cwd=str(store.parent),
    )


async def conversation(client: Client, brain_argument: dict[str, str]) -> dict[str, Any]:
    """The same conversation on any transport: list, call, refuse, read. Answers what it saw."""
    seen: dict[str, Any] = {
        "version": client.protocol_version,
        "server": client.server_info.name,
        "instructions": client.instructions,
    }
    seen["tools"] = tool_dicts((await client.list_tools()).tools)
    added = await client.call_tool(
        "brainy_add", {**brain_argument, "body": {"type": "person", "id": "ada", "data": "Ada Lovelace"}}
    )
    seen["added"] = (added.is_error, added.structured_content)
    got = await client.call_tool("brainy_get", {**brain_argument, "id": "ada"})
    seen["got"] = (got.is_error, got.structured_content, json.loads(got.content[0].text), got.meta)
    counts = await client.call_tool("brainy_counts", brain_argument)
    seen["counts"] = counts.structured_content
    refused = await client.call_tool(PENDING.mcp_tool, brain_argument)
    seen["refused"] = (refused.is_error, refused.structured_content, json.loads(refused.content[0].text))
    forbidden = await client.call_tool("brainy_stats", brain_argument)
    seen["forbidden"] = (forbidden.is_error, forbidden.structured_content)
    brain = brain_argument.get("brain", "notes")
    census = await client.read_resource(f"brainy://{brain}/counts")
    seen["census"] = json.loads(census.contents[0].text)
    entity = await client.read_resource(f"brainy://{brain}/entities/ada")
    seen["entity"] = json.loads(entity.contents[0].text)
    seen["templates"] = [t.uri_template for t in (await client.list_resource_templates()).resource_templates]
    seen["resources"] = [r.uri for r in (await client.list_resources()).resources]
    try:
        await client.call_tool("brainy_nosuch", {})
    except MCPError as exc:
        seen["unknown"] = exc.error.code
    return seen


def check(seen: dict[str, Any], single: bool) -> None:
    """What every transport must have answered (the laws the tests' docstrings state)."""
    assert seen["version"] == "2025-06-18" and seen["server"] == "brainy"
    assert seen["instructions"] and len(seen["instructions"]) < 4000
    assert seen["tools"] == D.mcp_tools(single_brain=single)  # the contract, door for door
    assert [t["name"] for t in seen["tools"]] == [d.mcp_tool for d in D.DOORS]
    is_error, answer = seen["added"]
    assert is_error is False and answer["generation"] >= 1 and answer["key"] == "ada"
    is_error, answer, text, meta = seen["got"]
    assert is_error is False and answer["entity"]["data"] == "Ada Lovelace" and text == answer
    assert meta["ms"] >= 0
    assert seen["counts"]["entities"] >= 1
    is_error, refusal, text = seen["refused"]
    assert is_error is True and text == refusal
    said = {"release": PENDING.release} if PENDING.disposition == "notYetNative" else {"instead": PENDING.instead}
    assert refusal["error"] == {
        "name": PENDING.refusal_today,
        "message": refusal["error"]["message"],
        "door": PENDING.name,
        **said,
    }
    is_error, refusal = seen["forbidden"]
    assert is_error is True and refusal["error"]["name"] == "ForbiddenError"
    assert refusal["error"]["reason"] == "access-class"
    assert seen["census"]["entities"] == seen["counts"]["entities"]
    assert seen["entity"]["entity"]["key"] == "ada"
    assert "brainy://{brain}/counts" in seen["templates"] and "brainy://{brain}/entities/{id}" in seen["templates"]
    assert seen["unknown"] == -32602


# -- stdio ----------------------------------------------------------------------------------------------


def test_the_sdk_over_stdio(stdio_store):
    """Over stdio (``brainy mcp --brain PATH --keys FILE`` as the principal in $BRAINY_KEY): initialize answers
    2025-06-18; tools/list equals the contract door for door (brain optional: the key reaches one brain);
    add, get and counts answer (text and structuredContent, _meta.ms); a door not landed and a service-key
    door refuse as isError results naming the class; the census and the entity read as resources; an unknown
    tool is a protocol error."""
    store, keys, key = stdio_store

    async def talk() -> dict[str, Any]:
        async with Client(stdio_params(store, keys, key)) as client:
            return await conversation(client, {})

    seen = run(talk())
    check(seen, single=True)
    assert seen["resources"] == ["brainy://notes/counts"]
    assert "one brain, `notes`" in seen["instructions"]


def test_a_bk1_token_in_brainy_key_runs_stdio_as_its_subject(stdio_store):
    """$BRAINY_KEY may hold a minted bk1 token, verified against the issuers file beside the keys file exactly
    as serve verifies it: a read-scoped token for notes reads (brain left out: a token reaches one brain),
    and a write comes back as a BRAINY_KEY_SCOPE isError result naming the door."""
    store, keys, _ = stdio_store
    cwd = store.parent

    def brainy(*args: str) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "brainy.cli", *args],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
            stdin=subprocess.DEVNULL,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    line = brainy("issuer", "keygen", "--issuer", "example", "--out", str(cwd / "example.key"))
    issuers = cwd / "issuers"  # the default place: beside the keys file
    issuers.write_text(line)
    issuers.chmod(0o600)
    token = brainy(
        "token",
        "mint",
        "--issuer-key",
        str(cwd / "example.key"),
        "--sub",
        "agent:reader",
        "--scope",
        "read",
        "--ttl",
        "600",
        "--brain",
        "notes",
    ).strip()
    assert token.startswith("bk1.")

    async def talk() -> tuple[Any, Any]:
        async with Client(stdio_params(store, keys, token)) as client:
            counts = await client.call_tool("brainy_counts", {})
            write = await client.call_tool("brainy_add", {"body": {"type": "thing"}})
            return counts, write

    counts, write = run(talk())
    assert counts.is_error is False and counts.structured_content["brain"] == "notes"
    assert write.is_error is True
    assert write.structured_content["error"]["name"] == "BRAINY_KEY_SCOPE"
    assert write.structured_content["error"]["door"] == "add"


def test_brainy_mcp_refuses_to_start_without_a_key_it_knows(stdio_store, tmp_path):
    """No $BRAINY_KEY, a key the keys file does not hold, or an absent store: ``brainy mcp`` exits 2 before
    reading a message, names the refusal on stderr, and writes nothing to stdout."""
    store, keys, key = stdio_store
    for env_key, brain, name in (
        (None, store, "UnauthenticatedError"),
        ("bky_nobody_placed_this_key_000000", store, "UnauthenticatedError"),
        (key, tmp_path / "absent", "StoreNotFoundError"),
    ):
        env = {k: v for k, v in os.environ.items() if k != "BRAINY_KEY"}
        if env_key is not None:
            env["BRAINY_KEY"] = env_key
        done = subprocess.run(
            [sys.executable, "-m", "brainy.cli", "mcp", "--brain", str(brain), "--keys", str(keys)],
            input=b"",
            capture_output=True,
            env=env,
            timeout=TIMEOUT,
        )
        assert done.returncode == 2, done
        assert done.stdout == b""
        assert name in done.stderr.decode(), done.stderr


def test_stdout_of_brainy_mcp_carries_only_json_rpc_frames(stdio_store):
    """Whatever comes in (garbage, a batch, an oversized-free stream of lifecycle messages, calls that answer,
    refuse and write, a notification) every line brainy mcp writes to stdout is one JSON-RPC response, one per
    request, and nothing else; its log (the lease claimed, the brain closed) goes to stderr; it exits 0 at
    the end of its input."""
    store, keys, key = stdio_store
    lines = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {}},
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "tools/call",
            "params": {"name": "brainy_add", "arguments": {"body": {"type": "thing", "id": "t1"}}},
        },
        {"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": PENDING.mcp_tool, "arguments": {}}},
        "not json at all",
        [{"jsonrpc": "2.0", "id": 5, "method": "ping"}],
        {"jsonrpc": "2.0", "id": 6, "method": "resources/read", "params": {"uri": "brainy://notes/counts"}},
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 99}},
        {"jsonrpc": "2.0", "id": 7, "method": "no/such/method"},
    ]
    data = b"".join((line.encode() if isinstance(line, str) else json.dumps(line).encode()) + b"\n" for line in lines)
    env = dict(os.environ, BRAINY_KEY=key)
    done = subprocess.run(
        [sys.executable, "-m", "brainy.cli", "mcp", "--brain", str(store), "--keys", str(keys)],
        input=data,
        capture_output=True,
        env=env,
        timeout=TIMEOUT,
    )
    assert done.returncode == 0, done.stderr.decode()
    out = done.stdout.decode()
    assert out.endswith("\n")
    replies = [json.loads(line) for line in out.splitlines()]
    for reply in replies:
        assert reply["jsonrpc"] == "2.0" and ("result" in reply) != ("error" in reply), reply
        assert set(reply) == {"jsonrpc", "id", "result"} or set(reply) == {"jsonrpc", "id", "error"}, reply
    ids = sorted(r["id"] for r in replies if r["id"] is not None)
    assert ids == [1, 2, 3, 4, 6, 7]
    assert sum(r["id"] is None for r in replies) == 2  # the garbage line and the batch, answered under null
    err = done.stderr.decode()
    assert "writer lease claimed" in err and "closed brain notes" in err


def test_a_stray_print_cannot_reach_the_protocol_stream():
    """brainy mcp points file descriptor 1 (and sys.stdout) at stderr once it holds a private copy for its
    frames: a print, or a library writing to fd 1, lands in the log and the protocol stream stays clean."""
    code = (
        "import os\nfrom brainy.net.mcp.stdio_glue import _protocol_stdout\nwrite = _protocol_stdout()\n"
        'print(\'a stray print\')\nos.write(1, b\'a stray write\\n\')\nwrite(b\'{"jsonrpc":"2.0","id":1,"result":{}}\\n\')\n'
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=TIMEOUT)
    assert done.returncode == 0, done.stderr
    assert done.stdout == b'{"jsonrpc":"2.0","id":1,"result":{}}\n'
    assert b"a stray print" in done.stderr and b"a stray write" in done.stderr


# -- streamable HTTP ------------------------------------------------------------------------------------


def test_the_sdk_over_streamable_http(served):
    """Over streamable HTTP at /mcp with the person key (reaching notes of the two brains served): the same
    conversation as over stdio answers the same way, on the same dispatcher."""

    async def talk() -> dict[str, Any]:
        client, http = http_client(served, served.key)
        async with http, client:
            return await conversation(client, {})

    seen = run(talk())
    check(seen, single=True)
    assert seen["resources"] == ["brainy://notes/counts"]


def test_a_key_reaching_two_brains_needs_brain(served):
    """Over HTTP, a key reaching both brains is shown tools whose schema requires brain; a call naming none is a
    protocol error (INVALID_PARAMS); naming either brain reaches it; resources/list is empty for it."""

    async def talk() -> dict[str, Any]:
        client, http = http_client(served, BOTH_KEY)
        async with http, client:
            seen = await conversation(client, {"brain": "other"})
            try:
                await client.call_tool("brainy_counts", {})
            except MCPError as exc:
                seen["unnamed"] = (exc.error.code, exc.error.data)
            seen["notes"] = (await client.call_tool("brainy_counts", {"brain": "notes"})).structured_content
            return seen

    seen = run(talk())
    check(seen, single=False)
    assert seen["resources"] == []
    assert seen["unnamed"] == (-32602, {"brains": ["notes", "other"]})
    assert seen["counts"]["brain"] == "other" and seen["notes"]["brain"] == "notes"
    assert all(
        "brain" in t["inputSchema"]["required"] for t in seen["tools"] if "brain" in t["inputSchema"]["properties"]
    )


def test_a_wrong_protocol_version_is_refused_by_name_over_http(served):
    """A client that sends MCP-Protocol-Version other than 2025-06-18 (here 2025-03-26, after a good
    initialize) is answered 400 ProtocolVersionError with supported: "2025-06-18"; the credential is checked
    first, with the same 401 every door gives."""
    headers = {
        "Authorization": f"Bearer {served.key}",
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
    }
    with httpx2.Client(timeout=TIMEOUT) as http:
        opened = http.post(
            f"{served.url}/mcp",
            headers=headers,
            json={
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {},
                    "clientInfo": {"name": "t", "version": "0"},
                },
            },
        )
        assert opened.status_code == 200
        session = opened.headers["mcp-session-id"]
        refused = http.post(
            f"{served.url}/mcp",
            json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
            headers={**headers, "Mcp-Session-Id": session, "MCP-Protocol-Version": "2025-03-26"},
        )
        assert refused.status_code == 400
        assert refused.json()["error"]["data"] == {
            "name": "ProtocolVersionError",
            "supported": "2025-06-18",
            "message": refused.json()["error"]["data"]["message"],
        }
        assert re.fullmatch(r"brainy;dur=\d+\.\d{3}", refused.headers["server-timing"])
        unauthenticated = http.post(
            f"{served.url}/mcp",
            json={"jsonrpc": "2.0", "id": 3, "method": "ping"},
            headers={"Content-Type": "application/json", "MCP-Protocol-Version": "x"},
        )
        assert unauthenticated.status_code == 401
        assert unauthenticated.headers["www-authenticate"] == 'Bearer realm="brainy"'
        assert unauthenticated.json()["error"]["data"]["name"] == "UnauthenticatedError"
        door = http.get(f"{served.url}/v1/brains/notes/counts", headers={"Authorization": "Bearer nope-nope-nope"})
        assert door.status_code == 401
        assert door.json()["error"]["message"] == unauthenticated.json()["error"]["data"]["message"]


def test_mcp_answers_over_h2_too(served):
    """Streamable HTTP is not an HTTP/1.1 feature: /mcp answers on the listener's HTTP/2 (prior knowledge)."""
    from server import H2Client

    body = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {}},
        }
    ).encode()
    with H2Client(served.address) as h2:
        answer = h2.call(
            "POST", "/mcp", body, (("authorization", f"Bearer {served.key}"), ("content-type", "application/json"))
        )
    assert answer.status == 200 and answer.headers["mcp-session-id"]
    assert json.loads(answer.body)["result"]["protocolVersion"] == "2025-06-18"


# -- the starter ----------------------------------------------------------------------------------------


def test_the_starter_snippet_works_pasted_into_a_client(tmp_path):
    """``brainy`` (the starter) prints an MCP client configuration; an SDK client configured from exactly that
    snippet (its url and its headers) connects over streamable HTTP and calls a door."""
    cwd = tmp_path / "work"
    cwd.mkdir()
    init_store(cwd / "brain")
    env = dict(os.environ, BRAINY_KEYS=str(cwd / "keys"), PYTHONUNBUFFERED="1")
    proc = subprocess.Popen(
        [sys.executable, "-m", "brainy.cli"],
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    try:
        text, deadline = "", time.monotonic() + TIMEOUT
        while not re.search(r"^}\s*$", text, re.M):
            assert time.monotonic() < deadline and proc.poll() is None, text
            ready, _, _ = select.select([proc.stdout], [], [], 0.2)
            if ready:
                text += os.read(proc.stdout.fileno(), 65536).decode()
        snippet = json.loads(text[text.index("{") : text.rindex("}") + 1])
        config = snippet["mcpServers"]["brainy"]
        assert config["type"] == "http" and config["url"].endswith("/mcp")

        async def talk() -> dict[str, Any]:
            http = httpx2.AsyncClient(headers=config["headers"], timeout=TIMEOUT)
            async with http, Client(streamable_http_client(config["url"], http_client=http)) as client:
                return (await client.call_tool("brainy_counts", {})).structured_content

        assert run(talk())["brain"] == "brain"
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=TIMEOUT)
        proc.stdout.close()
    assert code == 0
