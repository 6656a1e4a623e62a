"""A document nested past the limit is refused at every decoder, by name, and the connection goes on answering.

Real clients against one real ``brainy serve`` on loopback (h1 and h2 on one port, gRPC and HTTP/3 on their
own), and ``brainy mcp`` over stdio. On each transport: a document whose arrays and objects nest one level
past ``MAX_NESTING`` (64; brainy/contract/limits.py) is ``BodyDecodeError`` naming the limit, in that
transport's own form (HTTP 400; a WebSocket ``ok: false`` frame echoing the ref; a JSON-RPC error with the
request's id, -32700; gRPC ``INVALID_ARGUMENT``); so is one past the parsers' own limits (1,024 levels); and
on the same connection (the same session, channel or process) a document exactly at the limit reaches its
door (whose own rule, 32 levels for stored metadata, answers it), and an ordinary call answers.

The two faults a fuzzer found are here by name: an MCP ``tools/call`` naming a deeply nested value as its tool
(once a 500: a RecursionError while the message quoted it) and a WebSocket call whose ``ref`` is nested a few
hundred levels (once the dropped connection: the ref decoded, and its answer could not be written).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import msgpack
import pytest
import websockets
from aioquic.asyncio.client import connect
from server import HOST, H1Client, H2Client, ServerProcess, free_port, start_server, write_keys
from test_serve_grpc import Rpc
from test_serve_grpc import stubs as stubs  # a fixture: protoc's stubs of docs/brainy.proto
from test_serve_h3 import H3Client, Pki, _free_udp_port, client_configuration, make_pki

from brainy.contract.limits import MAX_NESTING
from brainy.engine import init_store

pytestmark = pytest.mark.slow

TIMEOUT = 20.0
WORDS = f"nest deeper than the {MAX_NESTING} levels brainy reads"
PAST_THE_PARSERS = 2_000  # orjson and msgpack stop at 1,024 levels themselves


def nested(depth: int, leaf: Any = 1) -> Any:
    """``depth`` objects one inside the other (built without recursion)."""
    value = leaf
    for _ in range(depth):
        value = {"a": value}
    return value


def deep_text(depth: int) -> str:
    """JSON text of ``nested(depth)``, written without an encoder (none writes past a few hundred levels)."""
    return '{"a":' * depth + "1" + "}" * depth


def add_document(level: int, id_: str) -> dict[str, Any]:
    """An ``add`` argument document whose deepest point is at ``level`` (the document itself is level 1)."""
    return {"type": "thing", "id": id_, "metadata": nested(level - 1)}


def add_text(level: int, id_: str) -> str:
    return f'{{"type":"thing","id":"{id_}","metadata":{deep_text(level - 1)}}}'


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, pki: Pki) -> Iterator[tuple[ServerProcess, int, int]]:
    """One server: h1/h2 on its TCP port, gRPC on a second TCP port, HTTP/3 on a UDP port."""
    grpc_port, udp = free_port(), _free_udp_port()
    args = ("--listen", f"{HOST}:{grpc_port},grpc", "--listen", f"{HOST}:{udp},h3")
    args += ("--tls-cert", str(pki.cert), "--tls-key", str(pki.key))
    with start_server(tmp_path_factory.mktemp("nesting"), extra_args=args) as server:
        yield server, grpc_port, udp


def _decode_refusal(doc: dict[str, Any], encoding: str) -> None:
    error = doc["error"]
    assert error["name"] == "BodyDecodeError" and WORDS in error["message"], error
    assert error["encoding"] == encoding, error


# -- HTTP/1.1, HTTP/2, HTTP/3: the body --------------------------------------------------------------------

JSON = (("content-type", "application/json"),)
MSGPACK = (("content-type", "application/msgpack"), ("accept", "application/msgpack"))


def _http_steps(tag: str) -> list[tuple[str, str, bytes, tuple[tuple[str, str], ...]]]:
    """(method, door, body, headers) of each request, in the order one connection sends them."""
    return [
        ("POST", "add", add_text(MAX_NESTING + 1, f"{tag}-past").encode(), JSON),
        ("POST", "add", msgpack.packb(add_document(MAX_NESTING + 1, f"{tag}-past")), MSGPACK),
        ("POST", "add", add_text(PAST_THE_PARSERS, f"{tag}-far").encode(), JSON),
        ("POST", "add", b"\x81\xa1a" * PAST_THE_PARSERS + b"\x01", MSGPACK),
        ("POST", "add", add_text(MAX_NESTING, f"{tag}-at").encode(), JSON),
        ("POST", "add", json.dumps(add_document(20, f"{tag}-kept")).encode(), JSON),
        ("GET", f"get/{tag}-kept", b"", ()),
    ]


def _check_http(tag: str, answers: list[tuple[int, Any]]) -> None:
    (s1, past), (s2, past_mp), (s3, far), (s4, far_mp), (s5, at), (s6, kept), (s7, got) = answers
    assert s1 == s2 == s3 == s4 == 400
    _decode_refusal(past, "json")
    assert "$.metadata.a.a" in past["error"]["message"]  # where it goes too deep
    _decode_refusal(past_mp, "msgpack")
    _decode_refusal(far, "json")
    _decode_refusal(far_mp, "msgpack")
    # exactly at the limit the decoder lets it through: the door answers by its own rule (stored metadata
    # nests at most 32 levels), not BodyDecodeError
    assert s5 == 400 and at["error"]["name"] == "InvalidArgumentError" and at["error"]["reason"] == "too-deep", at
    assert s6 == 200 and kept["generation"] >= 1, kept
    assert s7 == 200 and got["entity"]["metadata"] == nested(19), got


def _h1_h2(client: H1Client | H2Client, server: ServerProcess, tag: str) -> list[tuple[int, Any]]:
    answers = []
    for method, door, body, headers in _http_steps(tag):
        headers = (("authorization", f"Bearer {server.key}"), *headers)
        if isinstance(client, H1Client):
            client.send(client.request(method, server.path(door), body if method == "POST" else None, headers))
            answer = client.read_answer()
        else:
            answer = client.call(method, server.path(door), body or None, headers)
        answers.append((answer.status, answer.doc))
    return answers


@pytest.mark.parametrize("protocol", ["h1", "h2"])
def test_http_bodies_past_the_limit_are_refused_and_the_connection_goes_on(
    served: tuple[ServerProcess, int, int], protocol: str
) -> None:
    """Over HTTP/1.1 keep-alive and HTTP/2, on one connection: a JSON and a MessagePack body one level past the
    limit, and each 2,000 levels deep, are 400 BodyDecodeError naming the limit (the JSON one says where);
    a body exactly at the limit reaches the door; then an ordinary add and get answer."""
    server = served[0]
    client = H1Client(server.address) if protocol == "h1" else H2Client(server.address)
    with client:
        answers = _h1_h2(client, server, protocol)
    _check_http(protocol, answers)


def test_h3_bodies_past_the_limit_are_refused_and_the_connection_goes_on(
    served: tuple[ServerProcess, int, int], pki: Pki
) -> None:
    """The same requests over HTTP/3, on one QUIC connection, answer the same."""
    server, _, udp = served

    async def main() -> list[tuple[int, Any]]:
        configuration = client_configuration(pki, ["h3"])
        async with connect(HOST, udp, configuration=configuration, create_protocol=H3Client) as client:
            assert isinstance(client, H3Client)
            answers = []
            for method, door, body, headers in _http_steps("h3"):
                answer = await client.request(method, server.path(door), server.key, body, headers)
                answers.append((answer.status, answer.doc))
            assert client.terminated is None
            return answers

    _check_http("h3", asyncio.run(asyncio.wait_for(main(), TIMEOUT)))


# -- the WebSocket session -------------------------------------------------------------------------------


def test_ws_frames_past_the_limit_are_answered_and_the_session_goes_on(served: tuple[ServerProcess, int, int]) -> None:
    """On one session: a body one level past the limit is an ok: false BodyDecodeError echoing the call's ref;
    a ref nested 300 levels (it decodes, and could not be written back) is the same refusal under a null ref,
    as is a frame past the parser's own limit; a ref exactly at the limit is echoed whole with the door's
    answer; a body at the limit reaches its door; and an ordinary call answers after all of them."""
    server = served[0]
    frames = [
        json.dumps({"ref": "past", "door": "add", "body": add_document(MAX_NESTING + 1, "ws-past")}),
        '{"ref":' + deep_text(300) + ',"door":"counts"}',
        '{"ref":"far","door":"add","body":' + add_text(PAST_THE_PARSERS, "ws-far") + "}",
        json.dumps({"ref": nested(MAX_NESTING), "door": "counts"}),
        json.dumps({"ref": "at", "door": "add", "body": add_document(MAX_NESTING, "ws-at")}),
        json.dumps({"ref": "after", "door": "counts"}),
    ]

    async def run() -> list[dict[str, Any]]:
        url = f"ws://{server.host}:{server.port}/v1/ws"
        async with websockets.connect(url, additional_headers={"Authorization": f"Bearer {server.key}"}) as c:
            answers = []
            for frame in frames:  # one at a time: each answer is read before the next call is sent
                await c.send(frame)
                answers.append(json.loads(await asyncio.wait_for(c.recv(), TIMEOUT)))
            return answers

    past, deep_ref, far, ref_at, body_at, after = asyncio.run(run())
    assert (past["ref"], past["ok"]) == ("past", False)
    _decode_refusal(past, "json")
    assert "$.body.metadata.a" in past["error"]["message"]
    assert (deep_ref["ref"], deep_ref["ok"]) == (None, False)
    _decode_refusal(deep_ref, "json")
    assert "$.ref" in deep_ref["error"]["message"]
    assert (far["ref"], far["ok"]) == (None, False)  # the parser stopped: no ref was read
    _decode_refusal(far, "json")
    assert ref_at["ok"] and ref_at["ref"] == nested(MAX_NESTING) and "entities" in ref_at["result"], ref_at
    assert body_at["ref"] == "at" and body_at["error"]["name"] == "InvalidArgumentError", body_at
    assert after["ok"] and after["ref"] == "after", after


# -- MCP over streamable HTTP ------------------------------------------------------------------------------


def _rpc(id_: Any, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if id_ is not None:
        message["id"] = id_
    if params is not None:
        message["params"] = params
    return message


def _tool_call_text(id_: int, name_text: str, arguments_text: str = "{}") -> str:
    return f'{{"jsonrpc":"2.0","id":{id_},"method":"tools/call","params":{{"name":{name_text},"arguments":{arguments_text}}}}}'


INIT = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "nesting-test", "version": "1"}}


def _mcp_lines() -> list[str]:
    """The JSON-RPC messages both MCP transports are sent, in order, after initialize."""
    return [
        # the fuzzer's case: a tool named by a value nested 1,000 levels (the parser reads it; quoting it in
        # "Unknown tool" ran out of recursion, a 500)
        _tool_call_text(2, deep_text(1000)),
        # past the parser's own limit: no id can be read
        _tool_call_text(3, deep_text(PAST_THE_PARSERS)),
        # a nested name within the limit: an unknown tool, its name quoted short
        _tool_call_text(4, deep_text(40)),
        # a body one level past the limit, and one exactly at it
        _tool_call_text(5, '"brainy_add"', '{"body":' + add_text(MAX_NESTING + 1, "mcp-past") + "}"),
        _tool_call_text(6, '"brainy_add"', '{"body":' + add_text(MAX_NESTING, "mcp-at") + "}"),
        # an id nested past the limit is no id to echo
        '{"jsonrpc":"2.0","id":' + deep_text(300) + ',"method":"ping"}',
        json.dumps(_rpc(7, "tools/call", {"name": "brainy_counts", "arguments": {}})),
    ]


def _check_mcp(replies: dict[Any, list[dict[str, Any]]]) -> None:
    for id_ in (2, 5):
        error = replies[id_][0]["error"]
        assert error["code"] == -32700 and error["data"]["name"] == "BodyDecodeError", error
        assert WORDS in error["message"], error
    assert "$.params.name.a" in replies[2][0]["error"]["message"]
    assert "$.params.arguments.body.metadata.a" in replies[5][0]["error"]["message"]
    nulls = replies[None]
    assert len(nulls) == 2 and all(r["error"]["data"]["name"] == "BodyDecodeError" for r in nulls), nulls
    unknown = replies[4][0]["error"]
    assert unknown["code"] == -32602 and unknown["message"].startswith("Unknown tool: {'a': {'a': {'a': {"), unknown
    assert len(unknown["message"]) <= 140, unknown
    at = replies[6][0]["result"]  # the door's own refusal, a tool result
    assert at["isError"] and at["structuredContent"]["error"]["name"] == "InvalidArgumentError", at
    counts = replies[7][0]["result"]
    assert not counts["isError"] and "entities" in counts["structuredContent"], counts


def test_mcp_over_http_refuses_by_name_and_the_session_goes_on(served: tuple[ServerProcess, int, int]) -> None:
    """/mcp on one keep-alive connection and one session: each message past the limit is 400 with a JSON-RPC
    parse error (-32700) carrying BodyDecodeError and the request's own id (null when the id itself is too
    deep, or was never read); a nested tool name within the limit is an unknown tool quoted short (not a
    500); a body at the limit reaches its door; then tools/call answers."""
    server = served[0]
    replies: dict[Any, list[dict[str, Any]]] = {}
    with H1Client(server.address) as client:

        def post(text: str, session: str | None = None) -> tuple[int, dict[str, str], bytes]:
            headers = [("authorization", f"Bearer {server.key}"), ("content-type", "application/json")]
            headers.append(("accept", "application/json, text/event-stream"))
            if session is not None:
                headers += [("mcp-session-id", session), ("mcp-protocol-version", "2025-06-18")]
            client.send(client.request("POST", "/mcp", text.encode(), tuple(headers)))
            answer = client.read_answer()
            return answer.status, answer.headers, answer.body

        status, headers, _ = post(json.dumps(_rpc(1, "initialize", INIT)))
        assert status == 200
        session = headers["mcp-session-id"]
        assert post(json.dumps(_rpc(None, "notifications/initialized")), session)[0] == 202
        statuses = []
        for line in _mcp_lines():
            status, _, body = post(line, session)
            statuses.append(status)
            reply = json.loads(body)
            replies.setdefault(reply["id"], []).append(reply)
    assert statuses == [400, 400, 200, 400, 200, 400, 200], statuses
    _check_mcp(replies)


# -- MCP over stdio ----------------------------------------------------------------------------------------


def test_mcp_over_stdio_refuses_by_name_and_the_process_goes_on(tmp_path: Path) -> None:
    """``brainy mcp`` fed the same lines in one session answers each in JSON-RPC's own form, as over HTTP, keeps
    answering after every one of them, and exits 0 at the end of its input."""
    init_store(tmp_path / "notes")
    keys = write_keys(tmp_path / "keys", "notes")
    lines = [json.dumps(_rpc(1, "initialize", INIT)), json.dumps(_rpc(None, "notifications/initialized"))]
    data = "\n".join(lines + _mcp_lines()).encode() + b"\n"
    done = subprocess.run(
        [sys.executable, "-m", "brainy.cli", "mcp", "--brain", str(tmp_path / "notes"), "--keys", str(keys)],
        input=data,
        capture_output=True,
        env=dict(os.environ, BRAINY_KEY="bky_protocol_tests_person_0123456789"),
        timeout=60,
    )
    assert done.returncode == 0, done.stderr.decode()
    replies: dict[Any, list[dict[str, Any]]] = {}
    for line in done.stdout.decode().splitlines():
        reply = json.loads(line)
        replies.setdefault(reply["id"], []).append(reply)
    assert sorted(replies, key=str) == sorted([1, 2, 4, 5, 6, 7, None], key=str), replies.keys()
    _check_mcp(replies)
    assert "Traceback" not in done.stderr.decode()


# -- gRPC --------------------------------------------------------------------------------------------------


def test_grpc_documents_past_the_limit_are_invalid_argument_and_the_channel_goes_on(
    served: tuple[ServerProcess, int, int], stubs: Any
) -> None:
    """On one channel: a document one level past the limit, and one past the parser's own, are INVALID_ARGUMENT
    ``BodyDecodeError: …`` naming the limit; a document at the limit reaches its door (its refusal in the
    answer, status OK); then counts answers."""
    server, grpc_port, _ = served
    rpc = Rpc(stubs, grpc_port)
    try:
        for raw in (add_text(MAX_NESTING + 1, "grpc-past"), add_text(PAST_THE_PARSERS, "grpc-far")):
            error = rpc.status("add", server.key, raw_document=raw)
            assert error.code() == grpc.StatusCode.INVALID_ARGUMENT, error
            assert error.details().startswith("BodyDecodeError: ") and WORDS in error.details(), error.details()
        which, doc, _ = rpc.call("add", server.key, raw_document=add_text(MAX_NESTING, "grpc-at"))
        assert (which, doc["name"], doc["reason"]) == ("refusal", "InvalidArgumentError", "too-deep"), doc
        which, doc, _ = rpc.call("counts", server.key)
        assert which == "document" and "entities" in doc, doc
    finally:
        rpc.close()
