"""The wire, spoken to a real ``brainy serve`` process over loopback sockets (DESIGN.md "The wire";
DOORS.md 0.2, 0.3, 5.1, 5.2, 6, 11.1).

Clients: curl over HTTP/1.1 and with ``--http2-prior-knowledge``, a raw HTTP/1.1 socket, and the
h2 library as a client over a plain socket (see ``tests/server.py``). Every door of the store
release is called on every transport in both encodings and must answer the same documents; every
answer and every refusal carries ``Server-Timing: brainy;dur=<ms>`` equal to ``_meta.ms``.
"""

from __future__ import annotations

import asyncio
import json
import re
import socket
import time
from array import array
from typing import Any

import h2.settings
import msgpack
import numpy as np
import pytest
from server import Answer, H1Client, H2Client, ServerProcess, curl, encode_body, media, start_server, write_keys

from brainy.engine import init_store

TRANSPORTS = ("h1-json", "h1-msgpack", "h2-json", "h2-msgpack", "h2-curl")
MAX_BODY = 64 << 20
MAX_HEADER = 64 << 10


class Wire:
    """One transport to one server: ``call(method, path, doc)`` with the person key (or the service key)."""

    def __init__(self, server: ServerProcess, transport: str) -> None:
        self.server = server
        self.transport = transport
        self.encoding = "msgpack" if transport.endswith("msgpack") else "json"
        self.h2 = H2Client(server.address) if transport in ("h2-json", "h2-msgpack") else None

    def __enter__(self) -> Wire:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.h2 is not None:
            self.h2.close()

    def raw(
        self,
        method: str,
        path: str,
        body: bytes | None = None,
        content_type: str | None = None,
        *,
        service: bool = False,
        key: str | None = None,
        headers: tuple[tuple[str, str], ...] = (),
    ) -> Answer:
        """One request with a body sent exactly as given (with the person key, the service key, or ``key``)."""
        key = key or (self.server.service_key if service else self.server.key)
        fields: tuple[tuple[str, str], ...] = (("authorization", f"Bearer {key}"),)
        if content_type is not None:
            fields += (("content-type", content_type),)
        if self.encoding == "msgpack":
            fields += (("accept", "application/msgpack"),)
        fields += headers
        if self.h2 is not None:
            answer = self.h2.call(method, path, body, fields)
        else:
            answer = curl(self.server, method, path, body, headers=fields, http2=self.transport == "h2-curl")
        if method != "HEAD":
            assert answer.content_type == media(self.encoding), (self.transport, answer)
        return answer

    def call(self, method: str, path: str, doc: Any = None, *, service: bool = False) -> Answer:
        """One door call, the document encoded in this transport's encoding."""
        if doc is None:
            return self.raw(method, path, None, service=service)
        return self.raw(method, path, encode_body(doc, self.encoding), media(self.encoding), service=service)


# -- every door, every transport ---------------------------------------------------------------------

# (step, method, door path, document, service key?, status, refusal name)
SCENARIO: list[tuple[str, str, str, Any, bool, int, str | None]] = [
    ("init", "POST", "open", None, True, 200, None),
    ("health", "GET", "health", None, True, 200, None),
    ("add", "POST", "add", {"type": "person", "id": "alice", "data": "hello", "metadata": {"n": 1}}, False, 200, None),
    ("add again", "POST", "add", {"type": "person", "id": "alice"}, False, 409, "EntityExistsError"),
    (
        "addMany",
        "POST",
        "addMany",
        {"items": [{"type": "person", "id": n, "data": f"I am {n}", "weight": 0.25} for n in ("bob", "carol", "dave")]},
        False,
        200,
        None,
    ),
    ("get", "GET", "get/alice", None, False, 200, None),
    ("get absent", "GET", "get/nobody", None, False, 200, None),
    ("update", "POST", "update", {"id": "alice", "metadata": {"n": 2, "tags": ["a", "b"]}}, False, 200, None),
    ("update absent", "POST", "update", {"id": "nobody", "data": "x"}, False, 404, "EntityNotFoundError"),
    (
        "updateMany",
        "POST",
        "updateMany",
        {"items": [{"id": "bob", "metadata": {"m": 1}}, {"id": "carol", "data": "changed"}]},
        False,
        200,
        None,
    ),
    ("relate", "POST", "relate", {"from": "alice", "to": "bob", "type": "knows", "id": "r1"}, False, 200, None),
    ("relate minted", "POST", "relate", {"from": "alice", "to": "carol", "type": "relatedTo"}, False, 200, None),
    (
        "relateMany",
        "POST",
        "relateMany",
        {
            "items": [
                {"from": "bob", "to": "carol", "type": "relatedTo"},
                {"from": "carol", "to": "dave", "type": "relatedTo"},
            ]
        },
        False,
        200,
        None,
    ),
    (
        "updateRelation",
        "POST",
        "updateRelation",
        {"id": "r1", "weight": 0.5, "metadata": {"since": 2020}},
        False,
        200,
        None,
    ),
    ("unrelate", "POST", "unrelate", {"from": "bob", "to": "carol", "type": "relatedTo"}, False, 200, None),
    (
        "transact",
        "POST",
        "transact",
        {
            "ops": [
                {"door": "add", "args": {"type": "person", "id": "erin", "data": "new"}},
                {"door": "relate", "args": {"from": "erin", "to": "alice", "type": "relatedTo", "id": "r2"}},
                {"door": "update", "args": {"id": "alice", "data": "hello again"}},
            ]
        },
        False,
        200,
        None,
    ),
    (
        "transact aborted",
        "POST",
        "transact",
        {"ops": [{"door": "add", "args": {"type": "person", "id": "alice"}}]},
        False,
        409,
        "TransactionAbortedError",
    ),
    ("batchGet", "POST", "batchGet", {"ids": ["alice", "bob", "nobody", "erin"]}, False, 200, None),
    ("counts", "GET", "counts", None, False, 200, None),
    ("generation 1", "GET", "generation/1", None, False, 200, None),
    ("generation 8", "GET", "generation/8", None, False, 200, None),
    ("generation ahead", "GET", "generation/99", None, False, 400, "GenerationAheadError"),
    ("remove", "POST", "remove", {"id": "dave"}, False, 200, None),
    ("removeMany", "POST", "removeMany", {"ids": ["carol"]}, False, 200, None),
    ("get removed", "GET", "get/dave", None, False, 200, None),
    ("clear refused", "POST", "clear", {"confirm": "wrong"}, False, 400, "InvalidArgumentError"),
    ("clear", "POST", "clear", {"confirm": "notes"}, False, 200, None),
    ("counts after clear", "GET", "counts", None, False, 200, None),
    ("close", "POST", "close", None, True, 200, None),
    ("get after close", "GET", "get/alice?includeData=false", None, False, 200, None),
]

# Fields that legitimately differ between two servers running the same calls.
VOLATILE = frozenset(
    ("timestamp", "createdAt", "updatedAt", "lastUpdated", "startedAt", "heartbeat", "pid", "digest", "uptimeMs")
)
UUID7 = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[0-9a-f]{4}-[0-9a-f]{12}")


def normalise(doc: Any, minted: dict[str, str]) -> Any:
    """A document with volatile fields blanked and minted (UUIDv7) ids named by first appearance."""
    if isinstance(doc, dict):
        return {k: ("<volatile>" if k in VOLATILE and v is not None else normalise(v, minted)) for k, v in doc.items()}
    if isinstance(doc, list):
        return [normalise(v, minted) for v in doc]
    if isinstance(doc, str) and UUID7.fullmatch(doc):
        return minted.setdefault(doc, f"<minted {len(minted)}>")
    return doc


def run_scenario(wire: Wire) -> list[tuple[str, int, Any]]:
    """Call every step on ``wire``; check status, refusal name and timing; answer the normalised transcript."""
    transcript, minted = [], {}
    for step, method, door, doc, service, status, refusal in SCENARIO:
        answer = wire.call(method, wire.server.path(door), doc, service=service)
        where = f"{wire.transport} {step}: {answer!r}"
        assert answer.status == status, where
        assert answer.refusal == refusal, where
        result = answer.result()  # also: _meta.ms equals the server-timing duration
        transcript.append((step, answer.status, normalise(result, minted)))
    return transcript


def check_scenario_content(transcript: list[tuple[str, int, Any]]) -> None:
    """What the scenario's answers say, independent of the transport."""
    steps = {step: doc for step, _, doc in transcript}
    assert steps["init"]["writer"]["role"] == "writer"
    assert steps["health"]["verdict"] == "pass"
    assert steps["add"]["key"] == "alice" and steps["add"]["generation"] == 1
    assert steps["get"]["entity"]["key"] == "alice" and steps["get"]["entity"]["metadata"] == {"n": 1}
    assert steps["get absent"]["entity"] is None
    assert steps["batchGet"]["missing"] == ["nobody"]
    assert [e and e["key"] for e in steps["batchGet"]["entities"]] == ["alice", "bob", None, "erin"]
    assert steps["batchGet"]["entities"][0]["data"] == "hello again"
    assert steps["batchGet"]["entities"][0]["metadata"] == {"n": 2, "tags": ["a", "b"]}
    assert steps["counts"]["entities"] == 5 and steps["counts"]["relationships"] == 4
    assert steps["generation 8"]["generation"] == 8
    assert steps["remove"]["removedRelations"] == 1
    assert steps["counts after clear"]["entities"] == 0
    assert steps["close"]["closed"] is True and steps["close"]["leaseReleased"] is True
    assert steps["get after close"]["entity"] is None


def test_every_door_answers_alike_on_every_transport(tmp_path):
    """Every door of the store release (the writes, get, batchGet, counts, generation, and the mechanics
    init, health and close with the service key) answers over HTTP/1.1 and HTTP/2, in JSON and in
    MessagePack, with the same statuses, the same refusal names and the same documents (volatile
    timestamps and minted ids aside); every answer and refusal carries Server-Timing equal to _meta.ms."""
    transcripts = {}
    for transport in TRANSPORTS:
        with start_server(tmp_path / transport) as server, Wire(server, transport) as wire:
            transcripts[transport] = run_scenario(wire)
            assert server.alive()
    check_scenario_content(transcripts["h1-json"])
    reference = transcripts["h1-json"]
    for transport, transcript in transcripts.items():
        for (step, status, doc), (_, want_status, want) in zip(transcript, reference):
            assert (status, doc) == (want_status, want), f"{transport} differs from h1-json at {step!r}"


def test_the_same_read_is_the_same_document_on_every_transport(server):
    """One state, read over HTTP/1.1 JSON, HTTP/1.1 MessagePack, HTTP/2 (library and curl) in both
    encodings: get (with and without its vector), batchGet, counts, generation and health answer
    byte-for-byte equal documents once decoded (only _meta.ms differs). A vector travels as float32s in
    MessagePack (5 bytes a number) and as each float32's shortest decimal in JSON (DOORS.md 0.3): the two
    decode to the same float32s, which are the ones stored."""
    vector = [((i * 37) % 101) / 101.0 - 0.5 for i in range(384)]
    with Wire(server, "h1-json") as setup:
        assert (
            setup.call(
                "POST",
                server.path("add"),
                {
                    "type": "thing",
                    "id": "v",
                    "data": {"nested": [1, 2.5, None]},
                    "vector": vector,
                    "metadata": {"f": 0.1},
                },
            ).status
            == 200
        )
        assert (
            setup.call(
                "POST",
                server.path("addMany"),
                {
                    "items": [
                        {"type": "document", "id": f"d{i}", "data": "ü" * i, "metadata": {"i": i, "big": 2**40}}
                        for i in range(5)
                    ]
                },
            ).status
            == 200
        )
        assert setup.call("POST", server.path("relate"), {"from": "d0", "to": "d1", "type": "references"}).status == 200
    reads = [
        ("GET", "get/v?includeVector=true", None, False),
        ("GET", "get/d3", None, False),
        ("GET", "get/d3?includeData=false", None, False),
        ("POST", "batchGet", {"ids": ["d0", "v", "zz", "d4"]}, False),
        ("GET", "counts", None, False),
        ("GET", "generation/2", None, False),
        ("GET", "generation/0", None, False),
        ("GET", "health", None, True),
    ]
    seen: dict[str, list[Any]] = {}
    for transport in TRANSPORTS:
        with Wire(server, transport) as wire:
            seen[transport] = []
            for method, door, doc, service in reads:
                answer = wire.call(method, server.path(door), doc, service=service)
                assert answer.status == 200, (transport, door, answer)
                seen[transport].append(answer.result())
    stored = array("f", vector).tolist()
    for transport, docs in seen.items():
        got_vector = docs[0]["entity"].pop("vector")
        assert array("f", got_vector).tolist() == stored, transport
        if transport.endswith("msgpack"):
            assert got_vector == stored  # float32 on the wire decodes to the float32 itself
        else:
            assert all(repr(x) == str(np.float32(x)) for x in got_vector)  # the shortest decimals
        for (method, door, _, _), got, want in zip(reads, docs, seen["h1-json"]):
            assert got == want, f"{transport} {method} {door} differs from h1-json"


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_server_doors_answer_on_every_transport(server, transport):
    """The server's own doors answer on every transport and encoding with Server-Timing: /v1/health
    and /v1/brains (with a credential), /contract.json (the same documents as over HTTP/1.1
    JSON, uptime aside; _meta.ms equal to the header), /llms.txt and /agent (plain text and Markdown,
    the header alone)."""
    with Wire(server, transport) as wire, Wire(server, "h1-json") as reference:
        for path in ("/v1/health", "/v1/brains", "/contract.json"):
            answer = wire.call("GET", path)
            assert answer.status == 200, (path, answer)
            want = reference.call("GET", path).result()
            assert normalise(answer.result(), {}) == normalise(want, {}), path
        assert [b["name"] for b in wire.call("GET", "/v1/brains").result()["brains"]] == ["notes"]
        assert wire.call("GET", "/v1/health", service=True).result()["status"] == "ok"
        for path, kind in (("/llms.txt", "text/plain"), ("/agent", "text/markdown")):
            text = (
                wire.h2.call("GET", path)
                if wire.h2 is not None
                else curl(server, "GET", path, http2=transport == "h2-curl")
            )
            assert text.status == 200 and text.content_type == kind and text.body, path
            assert text.timing >= 0


# -- refusals by name and status ---------------------------------------------------------------------


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_refusals_travel_by_name_and_status(server, transport):
    """Each request-level refusal answers its class's status and name, with its fields, on every
    transport and in both encodings, and carries Server-Timing equal to _meta.ms: UnknownDoorError 404,
    MethodNotAllowedError 405 with Allow, BodyDecodeError 400 (JSON declared as MessagePack, trailing
    bytes, invalid UTF-8, truncated MessagePack), UnsupportedMediaTypeError 415, InvalidArgumentError
    400, EntityNotFoundError 404, EntityExistsError 409, FleetNotConfiguredError 503."""
    p = server.path
    with Wire(server, transport) as wire:
        assert wire.call("POST", p("add"), {"type": "person", "id": "alice"}).status == 200

        def refused(answer: Answer, status: int, name: str) -> dict[str, Any]:
            assert (answer.status, answer.refusal) == (status, name), answer
            error = answer.result()["error"]
            assert isinstance(error["message"], str) and error["message"]
            return error

        refused(wire.call("GET", p("nosuchdoor")), 404, "UnknownDoorError")
        refused(wire.call("GET", "/v2/elsewhere"), 404, "UnknownDoorError")
        refused(wire.call("POST", p("get/alice/extra")), 404, "UnknownDoorError")

        answer = wire.call("PUT", p("add"), {"type": "person"})
        assert refused(answer, 405, "MethodNotAllowedError")["allowed"] == ["POST"]
        assert answer.headers["allow"] == "POST"
        answer = wire.call("POST", p("counts"), {})
        assert refused(answer, 405, "MethodNotAllowedError")["allowed"] == ["GET"]
        assert answer.headers["allow"] == "GET"
        answer = wire.call("GET", p("add"))
        assert answer.headers["allow"] == "POST" and answer.status == 405

        as_msgpack = wire.raw("POST", p("add"), b'{"type": "person", "id": "x"}', "application/msgpack")
        assert refused(as_msgpack, 400, "BodyDecodeError")["encoding"] == "msgpack"
        trailing = wire.raw("POST", p("add"), b'{"type": "person"} {}', "application/json")
        assert refused(trailing, 400, "BodyDecodeError")["encoding"] == "json"
        trailing = wire.raw("POST", p("add"), msgpack.packb({"type": "person"}) + b"\x00", "application/msgpack")
        assert refused(trailing, 400, "BodyDecodeError")["encoding"] == "msgpack"
        bad_utf8 = wire.raw("POST", p("add"), b'{"type": "person", "data": "\xff\xfe"}', "application/json")
        assert refused(bad_utf8, 400, "BodyDecodeError")["encoding"] == "json"
        bad_utf8 = wire.raw("POST", p("add"), b"\x81\xa4type\xa2\xff\xfe", "application/msgpack")
        assert refused(bad_utf8, 400, "BodyDecodeError")["encoding"] == "msgpack"
        truncated = wire.raw(
            "POST", p("add"), msgpack.packb({"type": "person", "data": "x" * 50})[:-10], "application/msgpack"
        )
        refused(truncated, 400, "BodyDecodeError")

        answer = wire.raw("POST", p("add"), b"type=person", "text/plain")
        assert refused(answer, 415, "UnsupportedMediaTypeError")["contentType"] == "text/plain"

        assert refused(wire.call("POST", p("add"), {"data": "no type"}), 400, "InvalidArgumentError")["field"]
        refused(wire.call("POST", p("add"), [1, 2]), 400, "InvalidArgumentError")
        refused(wire.call("GET", p("get/alice?includeData=maybe")), 400, "InvalidArgumentError")
        refused(wire.call("GET", p("counts?unknown=1")), 400, "InvalidArgumentError")
        refused(wire.call("POST", p("update"), {"id": "ghost", "data": "x"}), 404, "EntityNotFoundError")
        refused(wire.call("POST", p("add"), {"type": "person", "id": "alice"}), 409, "EntityExistsError")
        # host.move on a server without --fleet (it was the last door not landed, until the fleet issue)
        moving = wire.raw("POST", p("move"), b'{"node": "elsewhere"}', "application/json", service=True)
        refused(moving, 503, "FleetNotConfiguredError")
        error = refused(wire.call("GET", p("accords/read/r1")), 404, "RecordNotFoundError")
        assert error["id"] == "r1" and "thread:r1" in error["probed"]
        stranger = wire.raw("GET", p("counts"), key="not-a-key-of-this-server")
        refused(stranger, 401, "UnauthenticatedError")
    assert server.alive()


def test_a_declared_body_over_the_limit_is_refused_413_before_it_is_read(server):
    """A Content-Length over 64 MiB is refused PayloadTooLargeError 413 (with its limit) as soon as the
    headers arrive, without waiting for a byte of the body, and the connection closes."""
    head = H1Client.request(
        "POST",
        server.path("add"),
        None,
        (
            ("Authorization", f"Bearer {server.key}"),
            ("Content-Type", "application/json"),
            ("Content-Length", str(MAX_BODY + 1)),
        ),
    )
    with H1Client(server.address, timeout=5) as client:
        client.send(head + b'{"type": ')  # a few bytes of the body, never the rest
        answer = client.read_answer()
        assert (answer.status, answer.refusal) == (413, "PayloadTooLargeError")
        assert answer.result()["error"]["limit"] == MAX_BODY
        assert answer.headers.get("connection") == "close"
        assert client.closed_by_peer(5)
    with H1Client(server.address) as client:  # a body exactly at the limit is not refused by its header
        client.send(
            H1Client.request(
                "POST",
                server.path("add"),
                None,
                (("Authorization", f"Bearer {server.key}"), ("Content-Length", str(MAX_BODY))),
            )
        )
        assert not client.closed_by_peer(0.3)
    assert curl(server, "GET", "/contract.json").status == 200


def test_an_h2_body_over_the_limit_is_refused_413_and_the_connection_serves_on(server):
    """Over HTTP/2 a request body over 64 MiB is refused PayloadTooLargeError 413 (naming the limit) on
    its stream, without being decoded; the connection stays usable for the next stream."""
    auth = (("authorization", f"Bearer {server.key}"),)
    with H2Client(server.address, timeout=30) as client:
        answer = client.call(
            "POST", server.path("add"), b" " * (MAX_BODY + 1), auth + (("content-type", "application/json"),)
        )
        assert (answer.status, answer.refusal) == (413, "PayloadTooLargeError")
        assert answer.result()["error"]["limit"] == MAX_BODY
        assert client.call("GET", server.path("counts"), None, auth).status == 200


@pytest.mark.parametrize("shape", ["one-header", "many-headers", "long-target"])
def test_a_header_block_over_64_kib_is_refused_431(server, shape):
    """A request whose header block (request target and fields) is over 64 KiB is refused
    HeaderTooLargeError 431, naming the limit, and the connection closes; one just under the limit is
    answered."""
    auth = ("Authorization", f"Bearer {server.key}")
    if shape == "one-header":
        big = H1Client.request("GET", server.path("counts"), None, (auth, ("X-Big", "a" * (MAX_HEADER + 1))))
    elif shape == "many-headers":
        big = H1Client.request(
            "GET", server.path("counts"), None, (auth, *((f"X-H{i}", "v" * 200) for i in range(MAX_HEADER // 200 + 10)))
        )
    else:
        big = H1Client.request("GET", server.path("get/") + "a" * (MAX_HEADER + 1), None, (auth,))
    with H1Client(server.address, timeout=5) as client:
        client.send(big)
        answer = client.read_answer()
        assert (answer.status, answer.refusal) == (431, "HeaderTooLargeError")
        assert answer.result()["error"]["limit"] == MAX_HEADER
        assert client.closed_by_peer(5)
    with H1Client(server.address, timeout=5) as client:
        client.send(H1Client.request("GET", server.path("counts"), None, (auth, ("X-Big", "a" * (MAX_HEADER - 2048)))))
        assert client.read_answer().status == 200


def test_an_h2_header_list_over_the_limit_ends_the_connection_and_the_server_answers_after(server):
    """Over HTTP/2 a header list over the advertised SETTINGS_MAX_HEADER_LIST_SIZE (64 KiB) is refused:
    the connection ends (GOAWAY, closed) and nothing else is harmed; the next connection is answered."""
    with H2Client(server.address, timeout=5) as client:
        client.pump_once(1)  # the server's SETTINGS
        assert client.conn.remote_settings.max_header_list_size == MAX_HEADER
        stream = client.start(
            "GET",
            server.path("counts"),
            None,
            (("authorization", f"Bearer {server.key}"), ("x-big", "a" * (MAX_HEADER + 1))),
        )
        deadline = time.monotonic() + 5
        while not client.eof and time.monotonic() < deadline:
            client.pump_once(0.5)
        assert client.terminated is not None and client.eof, "the connection did not end"
        assert stream not in client.heads, "the oversized header list was answered"
    with H2Client(server.address) as client:
        assert (
            client.call("GET", server.path("counts"), None, (("authorization", f"Bearer {server.key}"),)).status == 200
        )


# -- HTTP/1.1 mechanics ------------------------------------------------------------------------------


def _auth(server: ServerProcess) -> tuple[tuple[str, str], ...]:
    return (("Authorization", f"Bearer {server.key}"),)


def test_h1_keep_alive_answers_many_requests_on_one_connection(server):
    """Requests on one HTTP/1.1 connection are answered one after another without closing it;
    ``Connection: close`` is honoured (answered with connection: close, then closed), and so is
    HTTP/1.0 without keep-alive."""
    with H1Client(server.address) as client:
        for i in range(5):
            body = json.dumps({"type": "thing", "id": f"k{i}"}).encode()
            client.send(
                H1Client.request(
                    "POST", server.path("add"), body, _auth(server) + (("Content-Type", "application/json"),)
                )
            )
            answer = client.read_answer()
            assert answer.status == 200 and answer.result()["generation"] == i + 1
            assert "connection" not in answer.headers
        client.send(H1Client.request("GET", server.path("counts"), None, _auth(server) + (("Connection", "close"),)))
        answer = client.read_answer()
        assert answer.status == 200 and answer.result()["entities"] == 5
        assert answer.headers["connection"] == "close"
        assert client.closed_by_peer(5)
    with H1Client(server.address) as client:
        client.send(b"GET /contract.json HTTP/1.0\r\n\r\n")
        assert client.read_answer().status == 200
        assert client.closed_by_peer(5)


def _head_length(get: Answer, head: Answer) -> int:
    """The length the GET's body would have had with the HEAD's own ``_meta.ms`` (the one part that differs)."""
    return len(get.body) - len(json.dumps(get.doc["_meta"]["ms"])) + len(json.dumps(head.timing))


def test_h1_pipelined_requests_are_answered_in_order(server):
    """Requests written in one send (writes with bodies, reads, a refusal, a HEAD) are answered in the
    order they were sent, each with its own document."""
    auth = _auth(server) + (("Content-Type", "application/json"),)
    burst = b"".join(
        H1Client.request(
            "POST",
            server.path("add"),
            json.dumps({"type": "thing", "id": f"p{i}", "metadata": {"i": i}}).encode(),
            auth,
        )
        for i in range(10)
    )
    burst += b"".join(H1Client.request("GET", server.path(f"get/p{i}"), None, auth) for i in reversed(range(10)))
    burst += H1Client.request("GET", server.path("nosuchdoor"), None, auth)
    burst += H1Client.request("HEAD", server.path("counts"), None, auth)
    burst += H1Client.request("GET", server.path("counts"), None, auth)
    with H1Client(server.address) as client:
        client.send(burst)
        for i in range(10):
            answer = client.read_answer()
            assert answer.status == 200 and answer.result()["generation"] == i + 1
        for i in reversed(range(10)):
            answer = client.read_answer()
            assert answer.result()["entity"]["metadata"] == {"i": i}
        assert client.read_answer().refusal == "UnknownDoorError"
        head = client.read_answer(head=True)
        assert head.status == 200 and head.body == b""
        counts = client.read_answer()
        assert counts.result()["entities"] == 10
        assert int(head.headers["content-length"]) == _head_length(counts, head)


def test_h1_chunked_request_bodies_are_read_whole(server):
    """A chunked request body (one-byte chunks, chunk extensions, a trailer) is reassembled and decoded
    as the whole document, on a connection that stays usable; curl's chunked upload works too, in
    JSON and MessagePack."""
    doc = json.dumps({"type": "thing", "id": "chunky", "data": "x" * 300, "metadata": {"a": [1, 2, 3]}}).encode()
    chunks = [doc[:1], doc[1:2], doc[2:50], doc[50:]]
    body = b"".join(b"%x;ext=1\r\n%s\r\n" % (len(c), c) for c in chunks) + b"0\r\nX-Trailer: yes\r\n\r\n"
    head = (
        "POST %s HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\n"
        "Transfer-Encoding: chunked\r\n\r\n" % (server.path("add"), server.key)
    ).encode()
    with H1Client(server.address) as client:
        client.send(head)
        client.send(body[:7])
        time.sleep(0.05)
        client.send(body[7:])
        assert client.read_answer().status == 200
        client.send(H1Client.request("GET", server.path("get/chunky"), None, _auth(server)))
        entity = client.read_answer().result()["entity"]
        assert entity["data"] == "x" * 300 and entity["metadata"] == {"a": [1, 2, 3]}
    for encoding in ("json", "msgpack"):
        answer = curl(
            server,
            "POST",
            server.path("add"),
            encode_body({"type": "thing", "id": f"c-{encoding}"}, encoding),
            headers=(
                ("Authorization", f"Bearer {server.key}"),
                ("Content-Type", media(encoding)),
                ("Transfer-Encoding", "chunked"),
            ),
        )
        assert answer.status == 200, answer
    answer = curl(server, "GET", server.path("counts"), headers=(("Authorization", f"Bearer {server.key}"),))
    assert answer.result()["entities"] == 3


def test_head_answers_headers_without_a_body(server):
    """HEAD of a GET door answers the GET's status and headers (content-length of the GET's body,
    Server-Timing) and no body, over HTTP/1.1 (raw and curl) and HTTP/2."""
    get = curl(server, "GET", server.path("counts"), headers=(("Authorization", f"Bearer {server.key}"),))
    head = curl(server, "HEAD", server.path("counts"), headers=(("Authorization", f"Bearer {server.key}"),))
    assert head.status == 200 and head.body == b""
    assert int(head.headers["content-length"]) == _head_length(get, head)
    assert head.headers["content-type"] == "application/json"
    assert re.fullmatch(r"brainy;dur=\d+\.\d{3}", head.headers["server-timing"])
    with H2Client(server.address) as client:
        answer = client.call("HEAD", server.path("counts"), None, (("authorization", f"Bearer {server.key}"),))
        assert answer.status == 200 and answer.body == b""
        assert int(answer.headers["content-length"]) == _head_length(get, answer)
        refused = client.call("HEAD", server.path("nosuchdoor"), None, (("authorization", f"Bearer {server.key}"),))
        assert refused.status == 404 and refused.body == b""


# -- HTTP/2 mechanics --------------------------------------------------------------------------------


def _fill(server: ServerProcess, n: int, size: int) -> None:
    items = [{"type": "document", "id": f"row{i}", "data": f"{i:05d}" + "z" * size} for i in range(n)]
    answer = curl(
        server,
        "POST",
        server.path("addMany"),
        json.dumps({"items": items}).encode(),
        headers=(("Authorization", f"Bearer {server.key}"), ("Content-Type", "application/json")),
    )
    assert answer.status == 200, answer


def test_h2_fifty_concurrent_streams_on_one_connection(server):
    """Fifty requests opened together on one HTTP/2 connection (all sent before any answer is read)
    are all answered, each on its own stream with its own document."""
    _fill(server, 25, 10)
    auth = (("authorization", f"Bearer {server.key}"),)
    with H2Client(server.address) as client:
        streams = {}
        for i in range(50):
            if i % 2:
                streams[client.start("GET", server.path(f"get/row{i // 2}"), None, auth, flush=False)] = i // 2
            else:
                body = json.dumps({"ids": [f"row{i // 2}", "nope"]}).encode()
                streams[
                    client.start(
                        "POST",
                        server.path("batchGet"),
                        body,
                        auth + (("content-type", "application/json"),),
                        flush=False,
                    )
                ] = i // 2
        assert client.conn.open_outbound_streams == 50
        client.flush()  # all fifty requests leave in one write
        client.wait(list(streams))
        for stream, row in streams.items():
            answer = client.answer(stream)
            assert answer.status == 200, answer
            doc = answer.result()
            entity = doc["entity"] if "entity" in doc else doc["entities"][0]
            assert entity["key"] == f"row{row}"


@pytest.mark.parametrize("what", ["contract", "batchGet"])
def test_h2_answers_larger_than_the_initial_window_arrive_whole(server, what):
    """An HTTP/2 answer larger than the default 65,535-byte flow-control window (the ~120 KB contract,
    a batchGet of big rows) arrives whole and equal to the HTTP/1.1 answer, as the client opens the
    window."""
    if what == "contract":
        method, path, body, headers = "GET", "/contract.json", None, ()
    else:
        _fill(server, 40, 8000)
        method, path = "POST", server.path("batchGet")
        body = json.dumps({"ids": [f"row{i}" for i in range(40)]}).encode()
        headers = (("authorization", f"Bearer {server.key}"), ("content-type", "application/json"))
    h1 = curl(server, method, path, body, headers=headers)
    assert h1.status == 200 and len(h1.body) > 65535 + 16384  # more than a window and a frame
    with H2Client(server.address) as client:
        answer = client.call(method, path, body, headers)
    assert answer.status == 200
    assert int(answer.headers["content-length"]) == len(answer.body) > 65535 + 16384
    assert answer.result() == h1.result()
    if what == "contract":
        assert curl(server, "GET", "/contract.json", http2=True).result() == h1.result()


def test_h2_large_answers_on_many_streams_at_once_arrive_whole(server):
    """Eight batchGet answers of ~300 KB each, asked together on one connection whose windows let every
    one out in one pass (their DATA frames framed as views of each body and written at once), each
    arrive whole on its own stream, equal to the HTTP/1.1 answer."""
    _fill(server, 40, 8000)
    auth = (("authorization", f"Bearer {server.key}"), ("content-type", "application/json"))
    bodies = [json.dumps({"ids": [f"row{(i + k) % 40}" for k in range(40)]}).encode() for i in range(8)]
    expected = [curl(server, "POST", server.path("batchGet"), body, headers=auth) for body in bodies]
    assert all(len(h1.body) > 4 * 65536 for h1 in expected)
    window = (1 << 31) - 1
    with H2Client(server.address, settings={h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: window}) as client:
        client.conn.increment_flow_control_window(window - 65535)
        _settled(client, window)
        streams = [client.start("POST", server.path("batchGet"), body, auth, flush=False) for body in bodies]
        client.flush()
        client.wait(streams)
        for stream, h1 in zip(streams, expected):
            answer = client.answer(stream)
            assert answer.status == 200 and int(answer.headers["content-length"]) == len(answer.body)
            assert _without_meta(answer.body) == _without_meta(h1.body)


def _without_meta(body: bytes | bytearray) -> Any:
    doc = json.loads(body)
    doc.pop("_meta")
    return doc


def _received(client: H2Client, streams: list[int], expect: int, quiet: float = 0.3, limit: float = 5.0) -> int:
    """Pump until ``expect`` DATA bytes have arrived on ``streams`` (bounded by ``limit``), then for
    ``quiet`` seconds more, to see whether anything beyond arrives; answer the bytes received."""
    total = lambda: sum(len(client.bodies.get(s, b"")) for s in streams)  # noqa: E731
    deadline = time.monotonic() + limit
    while total() < expect and time.monotonic() < deadline:
        client.pump_once(max(0.01, deadline - time.monotonic()))
    quiet_until = time.monotonic() + quiet
    while time.monotonic() < quiet_until and client.pump_once(max(0.01, quiet_until - time.monotonic())):
        pass
    return total()


def _settled(client: H2Client, window: int) -> None:
    """Pump until the server has acknowledged our SETTINGS_INITIAL_WINDOW_SIZE of ``window`` (bounded)."""
    deadline = time.monotonic() + 5
    while client.conn.local_settings.initial_window_size != window:
        assert time.monotonic() < deadline, "the server did not acknowledge our SETTINGS"
        client.pump_once(0.2)


def test_h2_flow_control_windows_are_respected(server):
    """The server never sends more DATA than the client's windows allow: with a 4 KiB stream window
    and no WINDOW_UPDATE it sends exactly 4 KiB and waits; a WINDOW_UPDATE of 1000 lets exactly 1000
    more through; the answer then completes whole as the window opens. (The h2 client raises on any
    overrun.)"""
    whole = curl(server, "GET", "/contract.json").result()
    window = 4096
    with H2Client(
        server.address, auto_ack=False, settings={h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: window}
    ) as client:
        _settled(client, window)
        stream = client.start("GET", "/contract.json")
        assert _received(client, [stream], window) == window
        client.ack(stream, 1000)
        assert _received(client, [stream], window + 1000) == window + 1000
        deadline = time.monotonic() + 10
        while stream not in client.ended:
            assert time.monotonic() < deadline, "the answer did not complete as the window opened"
            client.ack(stream)
            client.pump_once(1)
        assert _without_meta(client.bodies[stream]) == whole


def test_h2_connection_window_is_shared_by_streams(server):
    """The connection-level window bounds all streams together: two large answers with roomy stream
    windows send exactly 65,535 bytes in total until the client opens the connection window, then both
    complete whole."""
    whole = curl(server, "GET", "/contract.json").result()
    with H2Client(
        server.address, auto_ack=False, settings={h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 1 << 20}
    ) as client:
        _settled(client, 1 << 20)
        streams = [client.start("GET", "/contract.json"), client.start("GET", "/contract.json")]
        assert _received(client, streams, 65535) == 65535
        deadline = time.monotonic() + 10
        while not set(streams) <= client.ended:
            assert time.monotonic() < deadline, "the answers did not complete as the window opened"
            for s in streams:
                client.ack(s)
            client.pump_once(1)
        assert all(_without_meta(client.bodies[s]) == whole for s in streams)


def test_h2_a_larger_initial_window_in_settings_unblocks_a_waiting_answer(server):
    """A SETTINGS frame raising SETTINGS_INITIAL_WINDOW_SIZE grows every open stream's window
    (RFC 9113 6.9.2), so an answer stalled on a small window resumes without any WINDOW_UPDATE, up to
    exactly the new window."""
    whole = curl(server, "GET", "/contract.json").result()
    with H2Client(
        server.address, auto_ack=False, settings={h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 1024}
    ) as client:
        _settled(client, 1024)
        stream = client.start("GET", "/contract.json")
        assert _received(client, [stream], 1024) == 1024
        client.conn.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 60000})
        client.flush()
        assert _received(client, [stream], 60000) == 60000
        client.conn.increment_flow_control_window(1 << 20)  # the connection window, then the rest
        client.conn.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 1 << 20})
        client.flush()
        client.wait([stream], timeout=10)
        assert _without_meta(client.bodies[stream]) == whole


def test_h2_request_bodies_larger_than_a_frame_and_a_window(server):
    """A request body over the 16 KiB frame size and over the 65,535-byte initial window is sent as
    the server opens its window (it acknowledges what it consumed) and is decoded whole."""
    data = "w" * 200_000
    with H2Client(server.address) as client:
        answer = client.call(
            "POST",
            server.path("add"),
            json.dumps({"type": "thing", "id": "wide", "data": data}).encode(),
            (("authorization", f"Bearer {server.key}"), ("content-type", "application/json")),
        )
        assert answer.status == 200, answer
        got = client.call("GET", server.path("get/wide"), None, (("authorization", f"Bearer {server.key}"),))
        assert got.result()["entity"]["data"] == data


def test_h1_and_h2_share_one_port(server):
    """One listener answers HTTP/1.1 and HTTP/2 with prior knowledge, told apart by the preface; curl
    reports the protocol it spoke."""
    for http2 in (False, True):
        answer = curl(
            server, "GET", server.path("counts"), headers=(("Authorization", f"Bearer {server.key}"),), http2=http2
        )
        assert answer.status == 200 and answer.result()["brain"] == "notes"


# -- TCP_NODELAY -------------------------------------------------------------------------------------


def test_tcp_nodelay_is_set_on_every_accepted_socket(tmp_path):
    """Every connection the server accepts has TCP_NODELAY set on its socket, whatever it speaks
    (HTTP/1.1, HTTP/2, nothing yet): read off the server's own accepted sockets, in process on uvloop."""
    import uvloop

    from brainy.auth.keys import KeyTable
    from brainy.host.pool import Pool
    from brainy.net.app import App
    from brainy.net.preface import H2_PREFACE
    from brainy.net.server import Listen, Server

    init_store(tmp_path / "notes")
    keys = write_keys(tmp_path / "keys", "notes")

    async def main() -> list[int]:
        app = App(Pool({"notes": tmp_path / "notes"}), KeyTable.open(str(keys)), "2026-01-01T00:00:00Z")
        server = Server(app, [Listen("127.0.0.1", 0)])
        await server.start()
        host, port = server.addresses[0]
        clients = []
        try:
            for first in (b"GET /contract.json HTTP/1.1\r\nHost: t\r\n\r\n", H2_PREFACE, b""):
                reader, writer = await asyncio.open_connection(host, port)
                clients.append(writer)
                writer.write(first)
                if first:
                    assert await asyncio.wait_for(reader.read(1), 5)  # answered: the protocol is chosen
            for _ in range(500):
                if len(server.connections) == len(clients):
                    break
                await asyncio.sleep(0.01)
            assert len(server.connections) == len(clients)
            return [
                conn.transport.get_extra_info("socket").getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
                for conn in server.connections
            ]
        finally:
            for writer in clients:
                writer.close()
                await writer.wait_closed()
            await server.stop(drain_seconds=1.0)

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        values = runner.run(main())
    assert len(values) == 3 and all(v != 0 for v in values), values


def test_an_h1_body_over_many_reads_is_read_into_itself_and_the_request_behind_it_after(server):
    """A 4 MiB addMany body sent in pieces with pauses between (each read of it goes straight into the body:
    brainy/net/glue/tcp.py, ``_BodyReads``), its last piece in one send with a read behind it, over one
    connection: the write holds every row, the read is answered after it, and the connection serves on."""
    auth = _auth(server) + (("Content-Type", "application/json"),)
    items = [{"type": "thing", "id": f"big{i}", "data": "x" * 4000} for i in range(1000)]
    body = json.dumps({"items": items}).encode()
    assert len(body) > 4_000_000
    wire = H1Client.request("POST", server.path("addMany"), body, auth)
    cut = len(wire) - 100_000
    with H1Client(server.address) as client:
        for at in range(0, cut, 700_000):
            client.send(wire[at : min(at + 700_000, cut)])
            time.sleep(0.02)  # the server reads what came, and waits for more
        client.send(wire[cut:] + H1Client.request("GET", server.path("get/big999"), None, auth))
        answer = client.read_answer()
        assert answer.status == 200 and len(answer.result()["ids"]) == 1000
        got = client.read_answer()
        assert got.status == 200 and got.result()["entity"]["data"] == "x" * 4000
        client.send(H1Client.request("GET", server.path("counts"), None, auth))
        assert client.read_answer().result()["entities"] >= 1000
