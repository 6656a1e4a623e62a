"""Any node answers any brain on the door-calling transports (docs/fleet.md "Any node answers any brain"): two
real ``brainy serve`` nodes on loopback, one real etcd; a brain placed on node b is called through node a over
gRPC (grpcio stubs from docs/brainy.proto), WebSocket (the ``websockets`` client) and MCP (the official SDK over
streamable HTTP). Each answer is the owner's, gRPC's and MCP's carry ``brainy-node: b``; the key is checked at
node a and again at node b, which is handed the caller's own credential."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import struct
import time
from collections.abc import Iterator
from typing import Any

import grpc
import httpx2
import pytest
import websockets
from etcd import start_etcd
from fleet import Node, call, place_on, sse_events, start_node, write_fleet_keys
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from server import HOST, PERSON, PERSON_KEY, SERVICE_KEY, H2Client, _stop, free_port
from test_serve_grpc import stubs  # noqa: F401  (the module's fixture: stubs generated from docs/brainy.proto)

pytestmark = pytest.mark.slow

TIMEOUT = 20.0
#: A person key only node a's keys file holds: node a lets it through, node b (the owner) refuses it.
EDGE_ONLY_KEY = "bky_fleet_transports_edge_only_0123456789"
ONE_BRAIN_KEY = "bky_fleet_transports_one_brain_"  # + the brain's number: a key reaching that brain alone


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Node, Node, int, str]]:
    """Nodes a (with a gRPC listener) and b, and a brain placed on b holding ``ada``: (a, b, a's gRPC port, brain)."""
    root = tmp_path_factory.mktemp("transports")
    keys = write_fleet_keys(root / "keys")
    with open(keys, "a") as out:  # one key per candidate brain, reaching it alone
        out.writelines(f"{ONE_BRAIN_KEY}{n}  {PERSON}  t{n}\n" for n in range(4))
    keys_a = root / "keys-a"
    fd = os.open(keys_a, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(keys.read_text() + f"{EDGE_ONLY_KEY}  {PERSON}  *\n")
    grpc_port = free_port()
    with start_etcd(root / "etcd") as etcd:
        a = start_node(root, "a", etcd.url, keys_a, extra=("--listen", f"{HOST}:{grpc_port},grpc"))
        b = start_node(root, "b", etcd.url, keys)
        try:
            on_b = place_on(a, b, "t", 4)
            yield a, b, grpc_port, on_b
        finally:
            _stop(a.proc)
            _stop(b.proc)


def grpc_call(stubs: Any, port: int, rpc: str, key: str, **fields: Any) -> tuple[str, dict[str, Any], dict[str, str]]:
    """(``document`` or ``refusal``, its JSON, the initial metadata) of one unary call."""
    pb2, pb2_grpc = stubs
    with grpc.insecure_channel(f"{HOST}:{port}") as channel:
        stub = pb2_grpc.BrainyStub(channel)
        request = pb2.DoorRequest(**fields)
        answer, done = getattr(stub, rpc).with_call(
            request, metadata=(("authorization", f"Bearer {key}"),), timeout=TIMEOUT
        )
    which = answer.WhichOneof("outcome")
    return which, json.loads(getattr(answer, which)), dict(done.initial_metadata())


def test_grpc_is_answered_by_the_owner(stubs, pair):  # noqa: F811
    """An rpc through node a for a brain on node b: b's answer (a write, then a read of it), with ``brainy-node: b``
    in the initial metadata; a refusal of b's travels in the answer, named, with the same field."""
    a, _, port, brain = pair
    doc = json.dumps({"type": "person", "id": "grace", "metadata": {"via": "grpc"}})
    which, added, meta = grpc_call(stubs, port, "add", PERSON_KEY, brain=brain, document=doc)
    assert which == "document" and added["generation"] >= 2 and meta.get("brainy-node") == "b", (which, added)
    which, got, meta = grpc_call(stubs, port, "get", PERSON_KEY, brain=brain, id="grace")
    assert which == "document" and got["entity"]["metadata"] == {"via": "grpc"}, got
    assert "_meta" not in got and meta.get("brainy-node") == "b" and "brainy-ms" in meta
    which, missing, meta = grpc_call(stubs, port, "find", PERSON_KEY, brain=brain, document='{"limit": "many"}')
    assert which == "refusal" and missing["name"] == "InvalidArgumentError" and meta.get("brainy-node") == "b", missing


def test_grpc_keys_are_checked_at_the_edge_and_at_the_owner(stubs, pair):  # noqa: F811
    """A key no node holds is UNAUTHENTICATED at node a, never forwarded; a key only node a holds passes a's gate
    and is refused by b, which proved the caller's own credential (its refusal, named by b)."""
    _, _, port, brain = pair
    with pytest.raises(grpc.RpcError) as caught:
        grpc_call(stubs, port, "get", "bky_nobody_holds_this_key_0123456789", brain=brain, id="ada")
    assert caught.value.code() == grpc.StatusCode.UNAUTHENTICATED
    which, refused, meta = grpc_call(stubs, port, "get", EDGE_ONLY_KEY, brain=brain, id="ada")
    assert which == "refusal" and refused["name"] == "UnauthenticatedError" and meta.get("brainy-node") == "b"


def test_websocket_calls_are_answered_by_the_owner(pair):
    """A WebSocket session on node a calling doors of a brain on node b: b's answers in the contract's envelope,
    a write then a read of it; a refusal of b's is the envelope's named error."""
    a, _, _, brain = pair

    async def session() -> list[dict[str, Any]]:
        url = f"ws://{HOST}:{a.port}/v1/ws"
        async with websockets.connect(url, additional_headers={"Authorization": f"Bearer {PERSON_KEY}"}) as ws:
            frames = [
                {"ref": 1, "door": "add", "brain": brain, "body": {"type": "person", "id": "hopper"}},
                {"ref": 2, "door": "get", "brain": brain, "id": "hopper"},
                {"ref": 3, "door": "find", "brain": brain, "body": {"limit": "many"}},
            ]
            answers = []
            for frame in frames:  # one at a time: the read follows the write's acknowledgement
                await ws.send(json.dumps(frame))
                answers.append(json.loads(await ws.recv()))
            return answers

    added, got, missing = asyncio.run(asyncio.wait_for(session(), TIMEOUT))
    assert added["ok"] and added["result"]["generation"] >= 2, added
    assert got["ok"] and got["result"]["entity"]["key"] == "hopper" and "ms" in got["meta"], got
    assert not missing["ok"] and missing["error"]["name"] == "InvalidArgumentError", missing


def test_a_one_brain_websocket_session_names_its_owner(pair):
    """A WebSocket session whose key reaches one brain, served by node b, opened at node a: the 101 answer says
    ``brainy-node: b`` (the envelope has no field for it), and a call naming no brain is b's answer."""
    a, _, _, brain = pair
    key = f"{ONE_BRAIN_KEY}{brain[1:]}"

    async def session() -> tuple[str | None, dict[str, Any]]:
        url = f"ws://{HOST}:{a.port}/v1/ws"
        async with websockets.connect(url, additional_headers={"Authorization": f"Bearer {key}"}) as ws:
            await ws.send(json.dumps({"ref": 1, "door": "get", "id": "ada"}))
            return ws.response.headers.get("brainy-node"), json.loads(await ws.recv())

    node, got = asyncio.run(asyncio.wait_for(session(), TIMEOUT))
    assert node == "b"
    assert got["ok"] and got["result"]["entity"]["key"] == "ada", got


def test_mcp_tool_calls_are_answered_by_the_owner(pair):
    """MCP over streamable HTTP on node a, ``tools/call`` naming a brain on node b: b's answer as the tool result,
    and the HTTP response head of that reply carries ``brainy-node: b``; a refusal of b's is ``isError``."""
    a, _, _, brain = pair
    seen: list[str | None] = []

    async def noted(response: Any) -> None:
        seen.append(response.headers.get("brainy-node"))

    async def session() -> tuple[Any, Any]:
        http = httpx2.AsyncClient(
            headers={"Authorization": f"Bearer {PERSON_KEY}"}, timeout=TIMEOUT, event_hooks={"response": [noted]}
        )
        async with http, Client(streamable_http_client(f"{a.url}/mcp", http_client=http)) as client:
            seen.clear()
            got = await client.call_tool("brainy_get", {"brain": brain, "id": "ada"})
            node = list(seen)
            missing = await client.call_tool("brainy_find", {"brain": brain, "body": {"limit": "many"}})
            seen.clear()
            read = await client.read_resource(f"brainy://{brain}/entities/ada")
            return (got, node), missing, (read, list(seen))

    (got, node), missing, (read, read_node) = asyncio.run(asyncio.wait_for(session(), TIMEOUT))
    assert not got.is_error and got.structured_content["entity"]["key"] == "ada", got
    assert "b" in node, node
    assert missing.is_error and missing.structured_content["error"]["name"] == "InvalidArgumentError", missing
    assert json.loads(read.contents[0].text)["entity"]["key"] == "ada" and "b" in read_node, (read, read_node)


def test_a_one_brain_key_calls_an_mcp_tool_naming_no_brain(pair):
    """MCP at node a with a key that reaches one brain, served by node b: a tool call that leaves ``brain`` out
    reaches that brain at b (the key's brain is taken from the key, not from a's own brains)."""
    a, _, _, brain = pair
    key = f"{ONE_BRAIN_KEY}{brain[1:]}"

    async def session() -> Any:
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=TIMEOUT)
        async with http, Client(streamable_http_client(f"{a.url}/mcp", http_client=http)) as client:
            return await client.call_tool("brainy_get", {"id": "ada"})

    got = asyncio.run(asyncio.wait_for(session(), TIMEOUT))
    assert not got.is_error and got.structured_content["entity"]["key"] == "ada", got


def test_the_change_stream_is_relayed_from_the_owner_and_resumes(pair):
    """``GET P/changes`` as an event stream through node a for a brain on node b: b's frames with b's event ids,
    ``brainy-node: b`` in the response head; a commit made on b while the stream is held arrives through a; a
    stream opened again at a with ``Last-Event-ID`` resumes after that id."""
    a, b, _, brain = pair
    auth = {"Authorization": f"Bearer {PERSON_KEY}", "Accept": "text/event-stream"}
    url = f"{a.url}/v1/brains/{brain}/changes"
    with httpx2.Client(timeout=TIMEOUT) as http, http.stream("GET", url, headers=auth) as stream:
        assert stream.status_code == 200 and stream.headers.get("brainy-node") == "b", stream.headers
        lines = stream.iter_lines()
        first = sse_events(lines, "caught-up")
        changes = [e for e in first if e.get("event") == "change"]
        assert changes and all("id" in e for e in changes), first
        added = call(b, "POST", f"/v1/brains/{brain}/add", json.dumps({"type": "person", "id": "liskov"}).encode())
        assert added.status == 200, added
        later = sse_events(lines, "change")
        assert json.loads(later[-1]["data"])["generation"] == added.doc["generation"], later
    resume = {**auth, "Last-Event-ID": changes[-1]["id"]}
    with httpx2.Client(timeout=TIMEOUT) as http, http.stream("GET", url, headers=resume) as stream:
        again = [e for e in sse_events(stream.iter_lines(), "caught-up") if e.get("event") == "change"]
    assert again and again[0]["id"] != changes[-1]["id"], again
    assert json.loads(again[-1]["data"])["generation"] == added.doc["generation"], again


def test_a_client_that_hangs_up_before_a_forwarded_answer_leaves_no_task_error(pair):
    """Clients that send a request for a brain on node b to node a and reset the connection at once: node a drops
    each owner's answer it has nowhere to write (no "Task exception was never retrieved" in its log) and goes on
    answering."""
    a, _, _, brain = pair
    request = f"GET /v1/brains/{brain}/get/ada HTTP/1.1\r\nhost: a\r\nauthorization: Bearer {PERSON_KEY}\r\n\r\n"
    for _ in range(50):
        with socket.create_connection((HOST, a.port), timeout=TIMEOUT) as sock:
            sock.sendall(request.encode())
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # close as a reset
    time.sleep(1.0)  # the owner's answers arrive after the resets
    got = call(a, "GET", f"/v1/brains/{brain}/get/ada")
    assert got.status == 200 and got.headers.get("brainy-node") == "b", got
    assert "Task exception was never retrieved" not in a.log()


def test_the_change_stream_is_relayed_over_http2(pair):
    """The held change stream asked of node a over HTTP/2 (prior knowledge) for a brain on node b: a stream
    answered 200 with ``brainy-node: b``, whose DATA are b's frames up to ``caught-up``, held open after it."""
    a, _, _, brain = pair
    with H2Client((HOST, a.port), timeout=TIMEOUT) as h2:
        stream = h2.start(
            "GET",
            f"/v1/brains/{brain}/changes",
            headers=(("authorization", f"Bearer {PERSON_KEY}"), ("accept", "text/event-stream")),
        )
        deadline = time.monotonic() + TIMEOUT
        while b"event: caught-up" not in h2.bodies[stream]:
            assert time.monotonic() < deadline and h2.pump_once(deadline - time.monotonic()), bytes(h2.bodies[stream])
        status, headers = h2.heads[stream]
        assert status == 200 and dict(headers).get("brainy-node") == "b", headers
        assert b"event: change" in h2.bodies[stream] and stream not in h2.ended


def test_grpc_provision_is_placed_fleet_wide(stubs, pair):  # noqa: F811
    """``host_provision`` over gRPC at node a is placed as over HTTP: brains provisioned there land on the node
    with the fewest brains, and one placed on node b is created by b, the answer naming b in ``node`` and in
    ``brainy-node``."""
    a, b, port, _ = pair
    landed = {}
    for n in range(4):
        which, placed, meta = grpc_call(stubs, port, "host_provision", SERVICE_KEY, brain=f"g{n}", document="{}")
        assert which == "document", placed
        landed[placed["brain"]] = (placed["node"], meta.get("brainy-node"))
    on_b = [brain for brain, (node, _) in landed.items() if node == "b"]
    assert on_b and all(landed[brain][1] == "b" for brain in on_b), landed
    assert all((b.brains_dir / brain).is_dir() and not (a.brains_dir / brain).is_dir() for brain in on_b)
