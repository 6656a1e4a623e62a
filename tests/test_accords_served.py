"""The accords board served by a real ``brainy serve`` (DOORS 9.1, 0.4, 10.2; seed 000, "The accords reads"):
one negotiation carried by every transport in turn, the owner rung at the gate with every kind of credential,
and the presence stamp (rule R16) as a served process holds, or does not hold, the brain's lease.

h1 and h2 (curl; h2 with prior knowledge), HTTP/3 (aioquic's client), gRPC (the stub protoc writes from
docs/brainy.proto), WebSocket (the ``websockets`` client) and the change feed, JSON and SSE. Only loopback
addresses; every wait is bounded. The MCP road is tests/test_accords_negotiation.py's.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
import test_serve_grpc
import websockets
from aioquic.asyncio.client import connect
from server import HOST, ServerProcess, curl, free_port, start_server, trusted_issuer
from test_serve_h3 import H3Client, Pki, _free_udp_port, client_configuration, make_pki

from brainy.auth import issuer

pytestmark = pytest.mark.slow

SCOUT, CRITIC, OWNER = "agent:scout", "agent:critic", "person:owner@example.com"
ORDERS_KEY = "bky_accords_tests_orders_service_012"  # service:orders *: may assert a caller, and an owner
TIMEOUT = 20.0
JSON = (("content-type", "application/json"),)

stubs = test_serve_grpc.stubs  # the generated gRPC stub, built once for this module too


class Board:
    """One served board and its credentials: the scout's and the critic's read/write tokens, the owner's triple."""

    def __init__(self, server: ServerProcess, grpc_port: int, udp: int, pki: Pki) -> None:
        self.server, self.grpc_port, self.udp, self.pki = server, grpc_port, udp, pki
        signer = server.extra["signer"]
        self.tokens = {
            who: issuer.mint(signer, server.brain, who, scope, 600)[0]
            for who, scope in (
                (SCOUT, ("read", "write")),
                (CRITIC, ("read", "write")),
                (OWNER, ("read", "write", "owner")),
                ("agent:reader", ("read",)),
            )
        }

    def auth(self, who: str) -> tuple[tuple[str, str], ...]:
        return (("authorization", f"Bearer {self.tokens.get(who, who)}"),)

    def h1(self, who: str, method: str, door: str, body: Any = None, **more: Any) -> tuple[int, dict[str, Any]]:
        data = json.dumps(body).encode() if body is not None else None
        headers = self.auth(who) + (JSON if data is not None else ()) + tuple(more.get("headers", ()))
        answer = curl(self.server, method, self.server.path(door), data, headers=headers, http2=more.get("h2", False))
        return answer.status, answer.doc


@pytest.fixture(scope="module")
def board(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Board]:
    """h1/h2 on tests/server.py's port, gRPC and HTTP/3 beside it; an issuer the tokens come from; a service key
    that may assert a caller."""
    directory = tmp_path_factory.mktemp("accords") / "served"
    signer = trusted_issuer(directory)
    pki = make_pki(tmp_path_factory.mktemp("pki"))
    grpc_port, udp = free_port(), _free_udp_port()
    listen = ("--listen", f"{HOST}:{grpc_port},grpc", "--listen", f"{HOST}:{udp},h3")
    tls = ("--tls-cert", str(pki.cert), "--tls-key", str(pki.key))
    with start_server(directory, extra_args=listen + tls) as server:
        with open(server.keys_path, "a") as keys:
            keys.write(f"{ORDERS_KEY}  service:orders  *\n")
        time.sleep(0.3)  # the keys file is re-read when its mtime moves, at most every 0.25 s
        server.extra["signer"] = signer
        yield Board(server, grpc_port, udp, pki)


async def _h3(board: Board, who: str, path: str) -> Any:
    async with connect(
        HOST, board.udp, configuration=client_configuration(board.pki, ["h3"]), create_protocol=H3Client
    ) as client:
        assert isinstance(client, H3Client)
        return await client.request("GET", board.server.path(path), board.tokens[who])


async def _ws(board: Board, who: str, frames: list[dict[str, Any]]) -> list[dict[str, Any]]:
    url = f"ws://{board.server.host}:{board.server.port}/v1/ws"
    async with websockets.connect(url, additional_headers=dict(board.auth(who))) as session:
        answers = []
        for frame in frames:  # one at a time: each waits for the commit before it
            await session.send(json.dumps(frame))
            answers.append(json.loads(await asyncio.wait_for(session.recv(), TIMEOUT)))
        return answers


def test_one_negotiation_over_every_transport(board: Board, stubs: Any) -> None:
    """The scout files over h1, the critic answers over h2, the scout reads the delta over HTTP/3, the critic
    records an action and reads it over gRPC, the scout votes and reads its inbox over WebSocket, and the change
    feed (a JSON page and the SSE stream) carries every accords row: one dispatcher, six framings, and every
    answer's cost."""
    status, filed = board.h1(
        SCOUT, "POST", "accords/file", {"title": "Ship the draft", "text": "Friday.", "participants": [CRITIC]}
    )
    assert status == 200 and filed["id"] == "thread:ACC-1", filed
    status, turned = board.h1(CRITIC, "POST", "accords/postRound", {"parent": "ACC-1", "text": "Monday?"}, h2=True)
    assert status == 200 and turned["seq"] == 2, turned
    h3 = asyncio.run(asyncio.wait_for(_h3(board, SCOUT, "accords/timeline/ACC-1?afterSeq=1"), 30))
    assert h3.status == 200, h3
    assert [(e["seq"], e["author"]) for e in h3.doc["entries"]] == [(2, CRITIC)]
    assert h3.doc["cost"]["rowsRead"] == 1 + len(h3.doc["entries"])  # the parent, and the round it had not seen
    rpc = test_serve_grpc.Rpc(stubs, board.grpc_port)
    try:
        which, recorded, _ = rpc.call(
            "accords_record",
            board.tokens[CRITIC],
            brain=board.server.brain,
            document={"kind": "action", "title": "Write the summary", "thread": "ACC-1"},
        )
        assert which == "document" and recorded["id"] == "action:write-the-summary", recorded
        which, read, _ = rpc.call(
            "accords_read", board.tokens[CRITIC], brain=board.server.brain, id_="write-the-summary"
        )
        assert which == "document" and read["record"]["assignee"] == CRITIC and read["cost"]["rowsRead"] == 1
        which, refused, _ = rpc.call("accords_read", board.tokens[CRITIC], brain=board.server.brain, id_="nothing")
        assert which == "refusal" and refused["name"] == "RecordNotFoundError" and len(refused["probed"]) == 9
    finally:
        rpc.close()
    voted, inbox = asyncio.run(
        asyncio.wait_for(
            _ws(
                board,
                SCOUT,
                [
                    {"ref": 1, "door": "accords.vote", "body": {"on": "ACC-1", "value": "yes"}},
                    {"ref": 2, "door": "accords.inbox", "body": {}},
                ],
            ),
            30,
        )
    )
    assert voted["ok"] and voted["result"]["id"] == "vote:thread:ACC-1:agent:scout", voted
    assert inbox["ok"] and [r["id"] for r in inbox["result"]["liveThreads"]] == ["thread:ACC-1"], inbox
    assert inbox["result"]["presenceStamped"]["stamped"] is True  # the writes claimed the lease: this process holds it
    status, page = board.h1(SCOUT, "GET", "changes?since=0")
    assert status == 200, page
    subtypes = {f["entity"]["subtype"] for f in page["frames"] if f["kind"] == "entity"}
    assert {"accords.thread", "accords.round", "accords.action", "accords.vote", "accords.participant"} <= subtypes
    stream = curl(
        board.server,
        "GET",
        board.server.path("changes?since=0&limit=3"),
        headers=board.auth(SCOUT) + (("accept", "text/event-stream"),),
    )
    assert stream.status == 200 and b'"subtype":"accords.' in stream.body and b"event: caught-up" in stream.body
    as_json = board.h1(CRITIC, "GET", "accords/read/ACC-1")[1]
    as_msgpack = curl(
        board.server,
        "GET",
        board.server.path("accords/read/ACC-1"),
        headers=board.auth(CRITIC) + (("accept", "application/msgpack"),),
    )
    assert as_msgpack.content_type == "application/msgpack" and as_msgpack.doc["record"] == as_json["record"]


def test_decide_asks_the_owner_rung_at_the_gate(board: Board) -> None:
    """Rule A3: accords.decide needs the loose owner rung: a person's key, a read/write token and a service key
    asserting a caller without the owner are OwnerRungRequiredError 403 and nothing is committed; the owner
    triple decides, and so does a service asserting X-Brainy-Owner: true, recorded under the asserted caller."""
    mandate = {"mandate": "Ship small, ship often."}
    short = {
        "person key": (board.server.key, ()),
        "read/write token": (board.tokens[SCOUT], ()),
        "asserted caller": (ORDERS_KEY, (("x-brainy-caller", "person:bob"),)),
    }
    for what, (key, headers) in short.items():
        status, doc = board.h1(key, "POST", "accords/decide", mandate, headers=headers)
        assert (status, doc["error"]["name"], doc["error"]["door"]) == (
            403,
            "OwnerRungRequiredError",
            "accords.decide",
        ), what
    status, doc = board.h1(OWNER, "POST", "accords/decide", mandate)
    assert status == 200 and doc["status"] == "live", doc
    asserted = (("x-brainy-caller", "person:bob"), ("x-brainy-owner", "true"))
    status, doc = board.h1(ORDERS_KEY, "POST", "accords/decide", {"mandate": "One voice."}, headers=asserted)
    assert status == 200 and doc["superseded"] == ["mandate:1"], doc
    record = board.h1(SCOUT, "GET", f"accords/read/{doc['id']}")[1]["record"]
    assert record["decidedBy"] == "person:bob" and record["status"] == "live"


def test_the_presence_stamp_follows_the_lease_and_the_credential(tmp_path) -> None:
    """Rule R16 served: a fresh brain is attached for reads and nobody holds its lease here, so the inbox is whole
    and says lease-not-held; once a write claims the lease, a participant's own inbox stamps its lastReadAt; a
    read-only token's says credential-read-only, another's inbox not-own-inbox; none of them is refused."""
    signer = trusted_issuer(tmp_path / "served")
    with start_server(tmp_path / "served") as server:
        reader = issuer.mint(signer, server.brain, CRITIC, ("read",), 600)[0]
        writer = issuer.mint(signer, server.brain, CRITIC, ("read", "write"), 600)[0]

        def inbox(key: str, query: str = "") -> dict[str, Any]:
            answer = curl(
                server, "GET", server.path(f"accords/inbox{query}"), headers=(("authorization", f"Bearer {key}"),)
            )
            assert answer.status == 200, answer
            return answer.doc

        assert inbox(writer)["presenceStamped"] == {"stamped": False, "reason": "lease-not-held"}
        filed = curl(
            server,
            "POST",
            server.path("accords/file"),
            json.dumps({"title": "t", "text": "x"}).encode(),
            headers=(("authorization", f"Bearer {writer}"),) + JSON,
        )
        assert filed.status == 200, filed
        stamped = inbox(writer)["presenceStamped"]
        assert stamped["stamped"] is True
        record = curl(
            server,
            "GET",
            server.path(f"accords/read/participant:{CRITIC}"),
            headers=(("authorization", f"Bearer {writer}"),),
        ).doc["record"]
        assert record["lastReadAt"] == stamped["at"]
        assert inbox(reader)["presenceStamped"] == {"stamped": False, "reason": "credential-read-only"}
        other = inbox(server.key, f"?participant={CRITIC}")
        assert other["presenceStamped"] == {"stamped": False, "reason": "not-own-inbox"}
        assert [r["id"] for r in other["liveThreads"]] == ["thread:ACC-1"]
