"""Pages spliced from bytes, served: every transport answers the same documents.

A real ``brainy serve`` (an h1/h2 listener and a gRPC one) holds entities with vectors and metadata of
every JSON type. The same ``find`` page and ``get`` are asked over HTTP/1.1 and HTTP/2, in JSON and in
MessagePack, over MCP (the official SDK: the JSON text and structuredContent), the WebSocket and gRPC
(the document as JSON); each answers the rows the old way builds them, read from the same store by a
read-only attach in this process (``rows.public_view`` of each decoded row made whole), and again, the same,
once the cache holds them and after a commit changed one.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import httpx2
import msgpack
import numpy as np
import pytest
import websockets
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from server import H2Client, ServerProcess, curl, free_port, start_server
from test_serve_grpc import Rpc, stubs  # noqa: F401  (the stubs fixture, compiled from docs/brainy.proto)

from brainy.engine import Brain
from brainy.net import codecs
from brainy.store import rows

pytestmark = pytest.mark.slow

COUNT = 40
PAGE = {"limit": 100, "includeVector": True}


def items() -> list[dict[str, Any]]:
    vectors = np.random.default_rng(5).standard_normal((COUNT, 384)).astype("<f4")
    out = []
    for i in range(COUNT):
        item: dict[str, Any] = {
            "type": "document",
            "id": f"d{i}",
            "data": f"note {i} ✓ é 日本",
            "metadata": {
                "n": i,
                "x": i / 7,
                "ok": i % 2 == 0,
                "none": None,
                "tags": ["ü", str(i)],
                "deep": {"a": [1, {"b": "ç"}]},
                "big": (1 << 64) - 1 - i,
            },
        }
        if i % 3:
            item["vector"] = vectors[i].tolist()
        out.append(item)
    return out


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, int]]:
    directory = tmp_path_factory.mktemp("splice")
    port = free_port()
    with start_server(directory, extra_args=("--listen", f"127.0.0.1:{port},grpc")) as server:
        answer = post(server, "addMany", {"items": items()})
        assert answer.status == 200, answer.body[:300]
        yield server, port


def headers(server: ServerProcess, encoding: str) -> tuple[tuple[str, str], ...]:
    kind = codecs.MSGPACK if encoding == "msgpack" else codecs.JSON
    return (("authorization", f"Bearer {server.key}"), ("content-type", kind), ("accept", kind))


def post(server: ServerProcess, door: str, document: Any, encoding: str = "json", http2: bool = False) -> Any:
    body = msgpack.packb(document) if encoding == "msgpack" else json.dumps(document).encode()
    return curl(server, "POST", server.path(door), body, headers=headers(server, encoding), http2=http2)


def expected(server: ServerProcess) -> tuple[list[Any], list[Any]]:
    """The page's entities the old way, from the store itself: (as JSON decodes them, as MessagePack does)."""
    brain = Brain.attach(server.store)
    try:
        snap = brain.at()
        found = [rows.public_view(row, True) for row in snap.entities(vectors=True) if row["type"] == "document"]
    finally:
        brain.close()
    found.sort(key=lambda e: e["denseInt"])
    return (
        [json.loads(codecs.to_json(e)) for e in found],
        [msgpack.unpackb(codecs.to_msgpack(e), raw=False) for e in found],
    )


def entities(page: Any) -> list[Any]:
    return sorted((hit["entity"] for hit in page["results"]), key=lambda e: e["denseInt"])


def over_mcp(server: ServerProcess) -> tuple[Any, Any]:
    async def talk() -> Any:
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {server.key}"}, timeout=20.0)
        async with http, Client(streamable_http_client(f"{server.url}/mcp", http_client=http)) as client:
            return await client.call_tool("brainy_find", {"body": PAGE})

    answer = asyncio.run(asyncio.wait_for(talk(), 20.0))
    assert not answer.is_error
    return answer.structured_content, json.loads(answer.content[0].text)


def over_ws(server: ServerProcess) -> Any:
    async def talk() -> Any:
        url = f"ws://{server.host}:{server.port}/v1/ws"
        async with websockets.connect(
            url, additional_headers={"Authorization": f"Bearer {server.key}"}, max_size=1 << 24
        ) as c:
            await c.send(json.dumps({"ref": 1, "door": "find", "brain": server.brain, "body": PAGE}))
            return json.loads(await c.recv())

    frame = asyncio.run(asyncio.wait_for(talk(), 20.0))
    assert frame["ok"], frame
    return frame["result"]


def test_every_transport_answers_the_old_ways_page(served, stubs):  # noqa: F811
    """The find page (vectors included) and a get over h1 and h2 in both encodings, MCP, the WebSocket and
    gRPC each equal the rows the old way builds, twice (the second from the cache), and again after an
    update of one of them."""
    server, grpc_port = served
    rpc = Rpc(stubs, grpc_port)
    try:
        for round_ in range(3):
            if round_ == 2:
                assert post(server, "update", {"id": "d4", "metadata": {"changed": True}}).status == 200
            as_json, as_msgpack = expected(server)
            assert len(as_json) == COUNT
            pages = {}
            for encoding in ("json", "msgpack"):
                pages[f"h1 {encoding}"] = post(server, "find", PAGE, encoding).doc
                with H2Client(server.address) as client:
                    body = msgpack.packb(PAGE) if encoding == "msgpack" else json.dumps(PAGE).encode()
                    pages[f"h2 {encoding}"] = client.call(
                        "POST", server.path("find"), body, headers(server, encoding)
                    ).doc
                pages[f"h2-curl {encoding}"] = post(server, "find", PAGE, encoding, http2=True).doc
            pages["mcp structured"], pages["mcp text"] = over_mcp(server)
            pages["ws"] = over_ws(server)
            which, pages["grpc"], _ = rpc.call("find", server.key, brain=server.brain, document=PAGE)
            assert which == "document"
            for name, page in pages.items():
                want = as_msgpack if name.endswith("msgpack") else as_json
                assert entities(page) == want, (round_, name)
            if round_ == 2:
                assert next(e for e in as_json if e["key"] == "d4")["metadata"]["changed"] is True
            for encoding, want in (("json", as_json), ("msgpack", as_msgpack)):
                for i in (1, 3, 4):  # with a vector, without one, the one updated
                    got = curl(
                        server,
                        "GET",
                        server.path(f"get/d{i}?includeVector=true"),
                        headers=headers(server, encoding)[::2],
                    ).doc["entity"]
                    assert got == next(e for e in want if e["key"] == f"d{i}"), (round_, encoding, i)
    finally:
        rpc.close()
