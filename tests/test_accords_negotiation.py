"""A worked negotiation over the official MCP SDK (DOORS 9.1; docs/accords.md, "A worked negotiation").

Two agents, the scout and the critic, and an owner, each with its own minted token and its own MCP session to a
real ``brainy serve``: the scout files a thread, the two post rounds, record an action and a decision, vote,
post an update and escalate; the owner sets the mandate and decides; the thread and the action are resolved.
On the way every rule's refusal is reached once, each an ``isError`` tool result naming its class: A1
(a second live mandate, on a board damaged before the server started), A2 (a round removed through the engine),
A3 (an agent deciding), A4 (a turn on a closed record), the sequence conflict, a bare id matching two records
and one matching none; the presence stamp of R16 is written. Every read's cost is checked against the rows it
read, and ``/contract.json`` lists the thirteen accords doors native.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from server import ServerProcess, curl, start_server, trusted_issuer
from test_accords import OWNER, plant

from brainy.auth import issuer
from brainy.contract import doors as D
from brainy.doors.accords.ids import KINDS
from brainy.engine import init_store
from brainy.engine.brain import Brain

pytestmark = pytest.mark.slow

SCOUT, CRITIC = "agent:scout", "agent:critic"
TIMEOUT = 60.0


class Agent:
    """One participant's MCP session: ``ok`` a tool that must answer, ``refused`` one that must refuse by name."""

    def __init__(self, client: Client) -> None:
        self.client = client

    async def ok(self, tool: str, **arguments: Any) -> dict[str, Any]:
        result = await self.client.call_tool(tool, arguments)
        assert result.is_error is False, (tool, result.structured_content)
        return result.structured_content

    async def refused(self, tool: str, name: str, **arguments: Any) -> dict[str, Any]:
        result = await self.client.call_tool(tool, arguments)
        assert result.is_error is True, (tool, result.structured_content)
        error = result.structured_content["error"]
        assert error["name"] == name, (tool, error)
        assert json.loads(result.content[0].text) == result.structured_content
        return error


async def negotiate(server: ServerProcess, tokens: dict[str, str]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    async with contextlib.AsyncExitStack() as stack:
        agents = {}
        for who, token in tokens.items():
            http = await stack.enter_async_context(
                httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=TIMEOUT)
            )
            client = await stack.enter_async_context(
                Client(streamable_http_client(f"{server.url}/mcp", http_client=http))
            )
            agents[who] = Agent(client)
        scout, critic, owner, archivist = agents[SCOUT], agents[CRITIC], agents[OWNER], agents["archive"]

        listed = await scout.client.list_tools()
        seen["tools"] = {t.name: t.description for t in listed.tools if t.name.startswith("accords_")}

        # the scout opens the thread; the critic finds it in its inbox and takes its turn
        filed = await scout.ok(
            "accords_file",
            body={
                "title": "Ship the draft",
                "text": "I propose we ship on Friday.",
                "participants": [CRITIC],
                "lab": "north",
            },
        )
        seen["filed"] = filed
        seen["critic inbox"] = await critic.ok("accords_inbox")
        seen["round 2"] = await critic.ok(
            "accords_postRound", body={"parent": "ACC-1", "text": "Friday is tight; Monday?", "expectSeq": 2}
        )
        seen["seq conflict"] = await scout.refused(
            "accords_postRound", "RecordStateError", body={"parent": "ACC-1", "text": "Friday!", "expectSeq": 2}
        )
        seen["delta"] = await scout.ok("accords_timeline", id="ACC-1", body={"afterSeq": 1})
        await scout.ok("accords_postRound", body={"parent": "ACC-1", "text": "Monday, then.", "expectSeq": 3})

        # an action for the critic, a decision for the owner, votes, progress, and a question escalated
        seen["action"] = await scout.ok(
            "accords_record",
            body={
                "kind": "action",
                "title": "Write the summary",
                "thread": "ACC-1",
                "assignee": CRITIC,
                "due": "2026-03-02",
            },
        )
        seen["decision"] = await critic.ok(
            "accords_record",
            body={"kind": "decision", "title": "Print or web?", "thread": "ACC-1", "options": ["print", "web"]},
        )
        seen["vote"] = await critic.ok("accords_vote", body={"on": "ACC-1", "value": "yes"})
        await scout.ok("accords_vote", body={"on": "print-or-web", "value": "yes", "note": "web is cheaper"})
        await critic.ok(
            "accords_postUpdate", body={"about": "write-the-summary", "text": "outline done", "state": "on-track"}
        )
        seen["escalated"] = await critic.ok(
            "accords_escalate",
            body={"id": "ACC-1", "question": "Who pays for the print run?", "options": ["us", "them"]},
        )
        seen["owner inbox"] = await owner.ok("accords_inbox")

        # the owner's word, and only the owner's
        seen["agent decides"] = await scout.refused(
            "accords_decide", "OwnerRungRequiredError", body={"id": "print-or-web", "choice": "web"}
        )
        seen["mandate"] = await owner.ok("accords_decide", body={"mandate": "Ship small, ship often."})
        seen["decided"] = await owner.ok(
            "accords_decide", body={"id": "print-or-web", "choice": "web", "note": "cheaper"}
        )
        await owner.ok("accords_decide", body={"id": "who-pays-for-the-print-run", "choice": "us"})
        seen["late vote"] = await critic.refused(
            "accords_vote", "RecordStateError", body={"on": "print-or-web", "value": "no"}
        )

        # done: the action, then the thread; a closed thread takes no more turns
        await critic.ok("accords_resolve", body={"id": "write-the-summary", "outcome": "Summary sent."})
        seen["resolved"] = await scout.ok(
            "accords_resolve", body={"id": "ACC-1", "outcome": "Shipping Monday, on the web."}
        )
        seen["closed"] = await critic.refused(
            "accords_postRound", "RecordStateError", body={"parent": "ACC-1", "text": "wait"}
        )

        # the reads: the whole story, the dashboard, search's exact-id law, one read for every kind
        seen["timeline"] = await critic.ok("accords_timeline", id="ACC-1")
        seen["dashboard"] = await owner.ok("accords_dashboard", body={"lab": "north"})
        seen["search"] = await critic.ok("accords_search", body={"query": "what did we settle on ACC-1"})
        seen["read"] = await critic.ok("accords_read", id="write-the-summary")
        await critic.ok("accords_record", body={"kind": "decision", "title": "Write the summary"})
        seen["ambiguous"] = await critic.refused("accords_read", "RecordAmbiguousError", id="write-the-summary")
        seen["missing"] = await critic.refused("accords_read", "RecordNotFoundError", id="ACC-99")

        # the damage the rules refuse rather than answer around: a round removed, two live mandates
        await owner.ok("brainy_remove", body={"id": "round:thread:ACC-1:2"})
        seen["gap"] = await scout.refused("accords_timeline", "TimelineCorruptError", id="ACC-1")
        seen["two mandates"] = await archivist.refused("accords_inbox", "MandateAmbiguousError")
    return seen


@pytest.fixture
def served(tmp_path) -> Any:
    """``notes`` for the negotiation, and ``archive``, a board another writer left with two live mandates."""
    directory = tmp_path / "served"
    signer = trusted_issuer(directory)
    archive = tmp_path / "archive"
    init_store(archive)
    with Brain.open(archive) as damaged:
        for n in (1, 2):
            plant(damaged, f"mandate:{n}", "mandate", f"mandate {n}", {"text": f"mandate {n}", "status": "live"})
    with start_server(directory, extra_args=("--brain", f"archive={archive}")) as server:
        tokens = {
            who: issuer.mint(signer, server.brain, who, scope, 600)[0]
            for who, scope in (
                (SCOUT, ("read", "write")),
                (CRITIC, ("read", "write")),
                (OWNER, ("read", "write", "owner")),
            )
        }
        tokens["archive"] = issuer.mint(signer, "archive", SCOUT, ("read", "write"), 600)[0]
        yield server, tokens


def _cost_of_segments(answer: dict[str, Any], *lists: str) -> int:
    """The rows an answer made of find segments read: one per record it carries (no segment here clips)."""
    return sum(len(answer[name]) for name in lists)


def test_a_negotiation_between_two_agents_and_an_owner_over_mcp(served):
    """The whole protocol over the official SDK: each write attributed to its token's subject, each read in
    protocol order, every rule's refusal reached once as an isError result, the cost counters equal to the rows
    each read carries (the parent and the rounds a delta had not seen; one row for one read), and the contract
    listing all thirteen accords doors native, 108 of its 109 doors landed."""
    server, tokens = served
    seen = asyncio.run(asyncio.wait_for(negotiate(server, tokens), TIMEOUT * 3))

    assert sorted(seen["tools"]) == sorted(d.mcp_tool for d in D.DOORS if d.layer == "accords")
    assert not any("NotYetNativeError" in (text or "") for text in seen["tools"].values())
    assert (seen["filed"]["id"], seen["filed"]["round"]) == ("thread:ACC-1", "round:thread:ACC-1:1")

    inbox = seen["critic inbox"]
    assert [r["id"] for r in inbox["liveThreads"]] == ["thread:ACC-1"] and inbox["mandate"] is None
    assert inbox["presenceStamped"]["stamped"] is True  # the scout's file claimed the lease: this process writes
    assert inbox["cost"]["rowsRead"] == _cost_of_segments(inbox, "decisionsAwaiting", "openActions", "liveThreads")

    assert seen["round 2"]["seq"] == 2
    assert seen["seq conflict"] == {**seen["seq conflict"], "reason": "seq-conflict", "expected": 2, "actual": 3}
    delta = seen["delta"]
    assert [(e["seq"], e["author"]) for e in delta["entries"]] == [(2, CRITIC)] and delta["lastSeq"] == 2
    assert delta["cost"]["rowsRead"] == 1 + len(delta["entries"])  # the parent and the one round not yet seen

    assert seen["action"]["id"] == "action:write-the-summary" and seen["decision"]["id"] == "decision:print-or-web"
    assert seen["vote"]["id"] == "vote:thread:ACC-1:agent:critic"
    assert seen["escalated"] == {
        **seen["escalated"],
        "escalation": "escalation:thread:ACC-1:1",
        "decision": "decision:who-pays-for-the-print-run",
    }
    owner_inbox = seen["owner inbox"]
    assert [r["id"] for r in owner_inbox["decisionsAwaiting"]] == [
        "decision:print-or-web",
        "decision:who-pays-for-the-print-run",
    ]

    assert seen["agent decides"]["door"] == "accords.decide"  # rule A3
    assert (seen["mandate"]["id"], seen["mandate"]["status"]) == ("mandate:1", "live")
    assert seen["decided"]["status"] == "decided"
    assert seen["late vote"] == {**seen["late vote"], "state": "decided", "reason": "closed"}  # rule A4
    assert seen["resolved"] == {**seen["resolved"], "status": "resolved", "round": "round:thread:ACC-1:4"}
    assert seen["closed"] == {**seen["closed"], "state": "resolved", "reason": "closed"}

    story = seen["timeline"]
    assert [(e["seq"], e["author"]) for e in story["entries"]] == [(1, SCOUT), (2, CRITIC), (3, SCOUT), (4, SCOUT)]
    assert story["entries"][-1]["text"] == "Shipping Monday, on the web."  # the outcome is the closing round
    # the parent, the count's last round, and each round before it by id
    assert story["cost"]["rowsRead"] == 1 + len(story["entries"])

    dashboard = seen["dashboard"]
    assert dashboard["mandate"]["text"] == "Ship small, ship often."
    assert dashboard["totals"]["threads"] == {"open": 0, "resolved": 1, "abandoned": 0}
    assert dashboard["totals"]["actions"] == {"open": 0, "done": 1, "abandoned": 0}
    assert dashboard["totals"]["decisions"] == {"awaiting": 0, "decided": 2}
    assert dashboard["cost"]["rowsRead"] == 1 + _cost_of_segments(
        dashboard, "threads", "actions", "decisions", "participants"
    )

    search = seen["search"]
    first = search["hits"][0]
    assert (first["id"], first["kind"]) == ("thread:ACC-1", "thread")
    ceiling = 1 + search["semantic"]["served"]
    assert first["score"] == ceiling + 1 and all(h["score"] <= ceiling for h in search["hits"][1:])

    assert seen["read"]["record"]["assignee"] == CRITIC and seen["read"]["cost"]["rowsRead"] == 1
    assert seen["ambiguous"]["ids"] == ["action:write-the-summary", "decision:write-the-summary"]
    assert seen["missing"] == {**seen["missing"], "id": "ACC-99", "probed": [f"{k}:ACC-99" for k in KINDS]}
    assert seen["gap"] == {**seen["gap"], "expected": 4, "found": 3}  # rule A2
    assert seen["two mandates"]["ids"] == ["mandate:1", "mandate:2"]  # rule A1

    contract = curl(server, "GET", "/contract.json").doc
    layers = {layer["name"]: layer["doors"] for layer in contract["layers"]}
    assert [d["disposition"] for d in layers["accords"]] == [{"native": True}] * 13
    every = [d for name in D.LAYERS for d in layers[name]]
    assert len(every) == 109
    assert [d["name"] for d in every if "notYetNative" in d["disposition"]] == []
