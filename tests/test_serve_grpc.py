"""gRPC (seed 000, Transports 3; DOORS.md 0.1), spoken to a real ``brainy serve --listen HOST:PORT,grpc``
by grpcio's own client through stubs that stock ``grpc_tools.protoc`` generates from the committed
``docs/brainy.proto`` at test time.

Every rpc of the service is called; a door's refusal is the answer's ``refusal`` with status OK; only
the transport's own failures are statuses (UNAUTHENTICATED naming which token refusal, INVALID_ARGUMENT
for a message that does not read, UNIMPLEMENTED for an rpc not in the service); every answer carries
``brainy-ms``; the store scenario answers over gRPC the same documents it answers over HTTP/1.1.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from server import ServerProcess, free_port, start_server, write_keys
from test_serve_protocol import SCENARIO, Wire, check_scenario_content, normalise, run_scenario
from test_serve_tokens import IDP, STRANGER, issuers, place, revoked, token

from brainy.contract import doors as D
from brainy.contract import refusals as R
from brainy.engine import init_store
from brainy.net.routes import Router, query_document

PROTO = Path(__file__).resolve().parent.parent / "docs" / "brainy.proto"
TIMEOUT = 10.0


@pytest.fixture(scope="module")
def stubs(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """``brainy_pb2`` and ``brainy_pb2_grpc`` as stock grpc_tools.protoc writes them from docs/brainy.proto."""
    out = tmp_path_factory.mktemp("stubs")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "grpc_tools.protoc",
            f"-I{PROTO.parent}",
            f"--python_out={out}",
            f"--grpc_python_out={out}",
            str(PROTO),
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )
    sys.path.insert(0, str(out))
    try:
        pb2 = importlib.import_module("brainy_pb2")
        pb2_grpc = importlib.import_module("brainy_pb2_grpc")  # a SyntaxError here was `rpc import`
    finally:
        sys.path.remove(str(out))
    return pb2, pb2_grpc


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, int]]:
    """A server with an h1/h2 listener and a gRPC one; issuers idp (k1) trusted and jti ``gone`` revoked."""
    directory = tmp_path_factory.mktemp("grpc")
    place(directory / "issuers", issuers(("idp", IDP, "k1")))
    place(directory / "revoked.json", revoked("gone"))
    port = free_port()
    with start_server(directory, extra_args=("--listen", f"127.0.0.1:{port},grpc")) as server:
        yield server, port


class Rpc:
    """The generated stub over one channel, with a key: ``call(rpc, brain, id, document)``."""

    def __init__(self, stubs: Any, port: int) -> None:
        self.pb2, pb2_grpc = stubs
        self.channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        self.stub = pb2_grpc.BrainyStub(self.channel)

    def call(
        self,
        rpc: str,
        key: str | None,
        brain: str = "",
        id_: str = "",
        document: Any = None,
        raw_document: str | None = None,
    ) -> tuple[str, dict[str, Any], float]:
        """(``document`` or ``refusal``, its JSON, the brainy-ms metadata) of one call with status OK."""
        request = self.pb2.DoorRequest(
            brain=brain,
            id=id_,
            document=raw_document if raw_document is not None else json.dumps(document) if document is not None else "",
        )
        metadata = (("authorization", f"Bearer {key}"),) if key else ()
        answer, call = getattr(self.stub, rpc).with_call(request, metadata=metadata, timeout=TIMEOUT)
        which = answer.WhichOneof("outcome")
        ms = dict(call.initial_metadata())["brainy-ms"]
        return which, json.loads(getattr(answer, which)), float(ms)

    def status(self, rpc: str, key: str | None, **kwargs: Any) -> grpc.RpcError:
        with pytest.raises(grpc.RpcError) as caught:
            self.call(rpc, key, **kwargs)
        return caught.value

    def close(self) -> None:
        self.channel.close()


@pytest.fixture
def rpc(stubs: Any, served: tuple[ServerProcess, int]) -> Iterator[Rpc]:
    client = Rpc(stubs, served[1])
    yield client
    client.close()


def test_the_generated_service_is_the_contract_service(stubs: Any) -> None:
    """The proto compiles with stock protoc, its Python imports, and service brainy.v1.Brainy declares one
    unary rpc per door, in contract order, each spelled as the contract's bindings say (import_, export_)."""
    pb2, pb2_grpc = stubs
    service = pb2.DESCRIPTOR.services_by_name["Brainy"]
    assert service.full_name == "brainy.v1.Brainy"
    assert [m.name for m in service.methods] == list(D.grpc_service())
    assert all(not m.client_streaming and not m.server_streaming for m in service.methods)
    assert hasattr(pb2_grpc.BrainyStub, "__init__") and hasattr(pb2_grpc.BrainyServicer, "import_")


def test_every_rpc_answers_or_refuses_in_the_answer(served: tuple[ServerProcess, int], rpc: Rpc) -> None:
    """Every rpc of the service, called with an empty document through the generated stub: status OK, an
    answer carrying a non-empty document or a registered refusal by name (NotYetNativeError with its
    release, InProcessOnlyError with what to call instead), and brainy-ms in the response metadata."""
    server, _ = served
    names = D.grpc_service()
    for name, door_name in names.items():
        door = D.BY_NAME[door_name]
        key = server.service_key if door.access == "service" else server.key
        which, doc, ms = rpc.call(name, key, brain=server.brain, id_="a")
        assert ms >= 0, name
        if which == "document":
            assert doc, name  # never an empty success
            continue
        assert type(R.REGISTRY[doc["name"]]) is type, (name, doc)
        if door.disposition == "notYetNative" and door.rung != "ownerTriple":
            assert doc == {
                "name": "NotYetNativeError",
                "message": doc["message"],
                "door": door.name,
                "release": door.release,
            }, name
        if door.disposition == "inProcessOnly":
            assert doc["name"] == "InProcessOnlyError" and doc["instead"] == door.instead, name


def _grpc_transcript(rpc: Rpc, server: ServerProcess) -> list[tuple[str, str | None, Any]]:
    """SCENARIO (tests/test_serve_protocol.py) over gRPC: each step's HTTP route read by brainy's own router
    into its door, id and document, then called as that door's rpc."""
    router, rpcs = Router(), {door: rpc_name for rpc_name, door in D.grpc_service().items()}
    transcript, minted = [], {}
    for step, method, door_path, doc, service, _status, refusal in SCENARIO:
        path, _, query = server.path(door_path).partition("?")
        match = router.match(method, path)
        assert match.door is not None, step
        document = doc if doc is not None else query_document(D.BY_NAME[match.door], query) or None
        which, answer, _ = rpc.call(
            rpcs[match.door],
            server.service_key if service else server.key,
            brain=server.brain,
            id_=match.params.get("id", ""),
            document=document,
        )
        assert (answer["name"] if which == "refusal" else None) == refusal, (step, answer)
        # HTTP carries a refusal as {"error": ...}; gRPC as the answer's refusal field
        transcript.append((step, refusal, normalise({"error": answer} if which == "refusal" else answer, minted)))
    return transcript


def test_the_scenario_answers_over_grpc_as_over_http(tmp_path: Path, stubs: Any) -> None:
    """Every store door of the scenario (writes, reads, generation, the mechanics with the service key) answers
    over gRPC the same documents and the same refusals, by name, as over HTTP/1.1 (volatile fields and minted
    ids aside): one dispatcher, two framings."""
    with start_server(tmp_path / "h1") as server, Wire(server, "h1-json") as wire:
        reference = [(step, refusal, doc) for (step, _s, doc), (*_, refusal) in zip(run_scenario(wire), SCENARIO)]
    port = free_port()
    with start_server(tmp_path / "grpc", extra_args=("--listen", f"127.0.0.1:{port},grpc")) as server:
        client = Rpc(stubs, port)
        try:
            transcript = _grpc_transcript(client, server)
        finally:
            client.close()
    check_scenario_content([(step, 200, doc) for step, _r, doc in transcript])
    for got, want in zip(transcript, reference):
        assert got == want, f"gRPC differs from h1-json at {got[0]!r}"


def test_identity_failures_are_unauthenticated_naming_which(served: tuple[ServerProcess, int], rpc: Rpc) -> None:
    """No credential, an unknown key, and each of the five identity-time token refusals are the status
    UNAUTHENTICATED, the message naming the refusal; the gate's refusals after identity (a token's scope,
    its brain) are answers with status OK, as every door's refusal is."""
    server, _ = served
    past = int(time.time()) - 10
    cases = [
        (None, "UnauthenticatedError"),
        ("bky_nobody_has_this_key_000000", "UnauthenticatedError"),
        (token(brain=server.brain)[:-3], "BRAINY_KEY_MALFORMED"),
        (token(iss="nobody", brain=server.brain), "BRAINY_KEY_UNKNOWN_ISSUER"),
        (token(STRANGER, brain=server.brain), "BRAINY_KEY_BAD_SIGNATURE"),
        (token(jti="gone", brain=server.brain), "BRAINY_KEY_REVOKED"),
        (token(exp=past, brain=server.brain), "BRAINY_KEY_EXPIRED"),
    ]
    for key, name in cases:
        error = rpc.status("counts", key, brain=server.brain)
        assert error.code() == grpc.StatusCode.UNAUTHENTICATED, (name, error)
        assert error.details().startswith(f"{name}: "), (name, error.details())
        assert float(dict(error.trailing_metadata())["brainy-ms"]) >= 0
    assert rpc.call("counts", token(scope=["read"], brain=server.brain), brain=server.brain)[0] == "document"
    which, doc, _ = rpc.call(
        "add", token(scope=["read"], brain=server.brain), brain=server.brain, document={"type": "thing", "id": "x"}
    )
    assert (which, doc["name"], doc["scope"]) == ("refusal", "BRAINY_KEY_SCOPE", ["read"])
    which, doc, _ = rpc.call("counts", token(brain="elsewhere"), brain=server.brain)
    assert (which, doc["name"]) == ("refusal", "BRAINY_KEY_BRAIN")


def test_unreadable_messages_and_unknown_rpcs_are_statuses(served: tuple[ServerProcess, int], rpc: Rpc) -> None:
    """A request message that does not read (a truncated field, a string field sent as a varint) and a
    document that is not JSON are INVALID_ARGUMENT naming BodyDecodeError; an rpc the service does not declare
    is UNIMPLEMENTED; an empty brain reaches the one brain of a one-brain key."""
    server, _ = served
    for message in (b"\x0a\x20short", b"\x08\x01"):
        raw = rpc.channel.unary_unary("/brainy.v1.Brainy/get")
        with pytest.raises(grpc.RpcError) as caught:
            raw(message, metadata=(("authorization", f"Bearer {server.key}"),), timeout=TIMEOUT)
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT, message
        assert caught.value.details().startswith("BodyDecodeError: the request message does not read")
    error = rpc.status("find", server.key, brain=server.brain, raw_document="{not json")
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT and error.details().startswith("BodyDecodeError: ")
    unknown = rpc.channel.unary_unary("/brainy.v1.Brainy/import")  # the door's name, not its rpc's
    with pytest.raises(grpc.RpcError) as caught:
        unknown(b"", metadata=(("authorization", f"Bearer {server.key}"),), timeout=TIMEOUT)
    assert caught.value.code() == grpc.StatusCode.UNIMPLEMENTED
    which, doc, _ = rpc.call("counts", server.key)  # no brain named: the key reaches exactly one
    assert which == "document" and doc["entities"] == 0


def test_tcp_nodelay_is_set_on_grpc_sockets(tmp_path: Path) -> None:
    """A gRPC listener's accepted sockets carry TCP_NODELAY (seed 000, Measured: the 40 ms delayed-ACK stall
    h2 and gRPC answers had without it), read off the server's own accepted sockets, in process on uvloop."""
    import uvloop

    from brainy.auth.keys import KeyTable
    from brainy.host.pool import Pool
    from brainy.net.app import App
    from brainy.net.h2 import PREFACE
    from brainy.net.server import Listen, Server

    init_store(tmp_path / "notes")
    keys = write_keys(tmp_path / "keys", "notes")

    async def main() -> list[int]:
        app = App(Pool({"notes": tmp_path / "notes"}), KeyTable.open(str(keys)), "2026-01-01T00:00:00Z")
        server = Server(app, [Listen("127.0.0.1", 0, ("grpc",))])
        await server.start()
        host, port = server.addresses[0]
        reader, writer = await asyncio.open_connection(host, port)
        try:
            writer.write(PREFACE + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00")  # the preface, an empty SETTINGS
            assert await asyncio.wait_for(reader.read(1), 5)  # the server's SETTINGS: the protocol is chosen
            return [
                conn.transport.get_extra_info("socket").getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
                for conn in server.connections
            ]
        finally:
            writer.close()
            await writer.wait_closed()
            await server.stop(drain_seconds=1.0)

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        flags = runner.run(main())
    assert flags and all(flags), flags


def test_the_message_forms_agree_with_protobuf_itself(stubs: Any) -> None:
    """brainy.net.grpc reads every DoorRequest the protobuf library writes (short and multi-byte lengths,
    non-ASCII, absent fields, an unknown field skipped) and writes DoorAnswers it reads back; a prefix that
    lies, a compressed flag, trailing bytes or a mistyped field are MessageUnreadable, never half-read."""
    from brainy.net import grpc as G

    pb2, _ = stubs

    def framed(message: bytes, flag: int = 0) -> bytes:
        return bytes([flag]) + len(message).to_bytes(4, "big") + message

    cases = (("", "", "", ""), ("notes", "a", "{}", ""), ("b" * 200, "é" * 70, "{" * 20000, "f" * 64))
    for brain, id_, document, sha in cases:
        wire = pb2.DoorRequest(brain=brain, id=id_, document=document, sha256=sha).SerializeToString()
        want = G.DoorRequest(brain, id_, document, sha)
        assert G.read_request(framed(wire)) == want
        assert G.read_request(framed(wire + b"\x28\x96\x01" + b"\x3a\x02hi")) == want  # fields 5 and 7: skipped
    for document in (b"{}", b'{"k":"' + b"v" * 300 + b'"}'):
        assert pb2.DoorAnswer.FromString(G.answer_message(document=document)[5:]).document == document.decode()
        assert pb2.DoorAnswer.FromString(G.answer_message(refusal=document)[5:]).refusal == document.decode()
    good = pb2.DoorRequest(brain="notes").SerializeToString()
    for bad in (
        framed(good)[:-1],
        framed(good) + b"\x00",
        framed(good, flag=1),
        b"\x00\x00",
        framed(b"\x0a\x05ab"),
        framed(b"\x08\x01"),
        framed(b"\x0a\x02\xff\xfe"),
        framed(b"\x0b"),
    ):
        with pytest.raises(G.MessageUnreadable):
            G.read_request(bad)
