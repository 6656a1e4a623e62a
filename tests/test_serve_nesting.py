"""A document nested past the limit is refused at every decoder, by name, and the connection goes on answering.

Real clients against one real ``brainy serve`` on loopback (h1 and h2 on one port, gRPC and HTTP/3 on their
own). On each transport: a document whose arrays and objects nest one level past ``MAX_NESTING`` (64;
brainy/contract/limits.py) is ``BodyDecodeError`` naming the limit, in that transport's own form (HTTP 400;
a WebSocket ``ok: false`` frame echoing the ref; gRPC ``INVALID_ARGUMENT``); so is one past the parsers' own
limits (1,024 levels); and on the same connection (the same session or channel) a document exactly at the
limit reaches its door (whose own rule, 32 levels for stored metadata, answers it), and an ordinary call
answers.

A fault a fuzzer found is here by name: a WebSocket call whose ``ref`` is nested a few hundred levels (once
the dropped connection: the ref decoded, and its answer could not be written).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import grpc
import msgpack
import pytest
import websockets
from aioquic.asyncio.client import connect
from server import HOST, H1Client, H2Client, ServerProcess, free_port, start_server
from test_serve_grpc import Rpc
from test_serve_grpc import stubs as stubs  # a fixture: protoc's stubs of docs/brainy.proto
from test_serve_h3 import H3Client, Pki, _free_udp_port, client_configuration, make_pki

from brainy.contract.limits import MAX_NESTING

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
