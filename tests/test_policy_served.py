"""Who writes, and the owner rung, on a real ``brainy serve`` (DOORS 0.4, 9.3, 11.2; seed 001 "Who a write is
attributed to", "The caller on the call"; seed 000 "The owner scope"): every kind of credential against the
ruling doors, the row-writing doors of every family, the guardrails with an asserted caller, and a guardrail
refusal read as an MCP tool result through the official SDK."""

from __future__ import annotations

import asyncio
import http.client
import json
import time
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from server import PERSON, PERSON_KEY, SERVICE_KEY, ServerProcess, start_server, trusted_issuer

from brainy.auth import issuer
from brainy.contract import doors as D

ORDERS_KEY = "bky_policy_tests_orders_service_0123"  # service:orders *: a service key that may assert a caller
BUSINESS_KEY = "bky_policy_tests_business_acme_01234"
BOB = {"X-Brainy-Caller": "person:bob"}
TIMEOUT = 20.0


@pytest.fixture(scope="module")
def served(tmp_path_factory) -> Any:
    """One server for ``notes``: the tests' person key, the ! key, a service:orders key, a business key, and an
    issuers file trusting one issuer, whose tokens the tests mint."""
    directory = tmp_path_factory.mktemp("policy") / "served"
    signer = trusted_issuer(directory)
    with start_server(directory) as server:
        with open(server.keys_path, "a") as keys:
            keys.write(f"{ORDERS_KEY}  service:orders  *\n{BUSINESS_KEY}  business:acme  notes\n")
        time.sleep(0.3)  # the keys file is re-read when its mtime moves, at most every 0.25 s
        server.extra["signer"] = signer
        yield server


def token(server: ServerProcess, *scope: str, sub: str = "person:owner@example.com") -> str:
    return issuer.mint(server.extra["signer"], server.brain, sub, scope, 600)[0]


def send(
    server: ServerProcess, method: str, path: str, key: str, body: Any = None, headers: dict[str, str] | None = None
) -> tuple[int, dict[str, Any]]:
    """One HTTP/1.1 exchange on a fresh loopback connection: (status, document)."""
    connection = http.client.HTTPConnection(server.host, server.port, timeout=TIMEOUT)
    try:
        sent = {"Authorization": f"Bearer {key}", **(headers or {})}
        data = None
        if method != "GET":
            data = json.dumps(body if body is not None else {}).encode()
            sent["Content-Type"] = "application/json"
        connection.request(method, path, data, sent)
        response = connection.getresponse()
        return response.status, json.loads(response.read())
    finally:
        connection.close()


def ask(
    server: ServerProcess,
    door: str,
    key: str,
    body: Any = None,
    headers: dict[str, str] | None = None,
    method: str = "POST",
) -> tuple[int, dict[str, Any]]:
    return send(server, method, server.path(door), key, body, headers)


def refusal(answer: tuple[int, dict[str, Any]], status: int, name: str) -> dict[str, Any]:
    got, doc = answer
    assert (got, doc.get("error", {}).get("name")) == (status, name), doc
    return doc["error"]


def test_the_ruling_doors_with_every_kind_of_credential(served):
    """Only the owner triple on a minted token opens ratify, unlock and freeze: a person's or a business's key, a
    read/write token, a service key bare or asserting an owner are PolicyOwnerScopeRequiredError; the ! key is
    a principal door's ForbiddenError access-class. The ratification is recorded under the token's sub."""
    owner = token(served, "read", "write", "owner")
    short = {
        "person key": (PERSON_KEY, None),
        "business key": (BUSINESS_KEY, None),
        "read/write token": (token(served, "read", "write"), None),
        "bare service key": (ORDERS_KEY, None),
        "asserted owner": (ORDERS_KEY, {**BOB, "X-Brainy-Owner": "true"}),
    }
    proposal = ask(
        served,
        "policy/propose",
        PERSON_KEY,
        {"subject": "person:nobody", "doors": ["add"], "reason": "ruled over the wire"},
    )[1]["id"]
    for door in ("ratify", "unlock", "freeze"):
        body = {"id": proposal}
        for what, (key, headers) in short.items():
            error = refusal(ask(served, f"policy/{door}", key, body, headers), 403, "PolicyOwnerScopeRequiredError")
            assert error["door"] == f"policy.{door}", what
        error = refusal(ask(served, f"policy/{door}", SERVICE_KEY, body), 403, "ForbiddenError")
        assert error["reason"] == "access-class"
    status, doc = ask(served, "policy/ratify", owner, {"id": proposal})
    assert status == 200 and doc["status"] == "active" and doc["ratifiedBy"] == "person:owner@example.com", doc
    status, doc = ask(served, "policy/freeze", owner, {"reason": "quiet week"})
    assert status == 200 and doc["locked"] == [proposal]
    error = refusal(ask(served, "policy/retire", PERSON_KEY, {"id": proposal, "reason": "x"}), 423, "PolicyLockedError")
    assert error == {**error, "rule": proposal, "frozen": True}
    status, doc = ask(served, "policy/unlock", owner, {})
    assert status == 200 and doc == {**doc, "unlocked": [proposal], "frozen": False}
    status, doc = ask(served, "policy/rules", token(served, "read"), method="GET")
    assert status == 200 and proposal in [r["id"] for r in doc["rules"]] and doc["frozen"] is False


def test_every_family_of_row_writing_door_wants_a_caller(served):
    """A bare service key is ServiceKeyCannotWriteError on every door the contract makes row-writing, engine,
    vfs and profile alike (before a door that has not landed says so; the three ruling doors ask for the owner
    triple first, in the gate, and accords.decide the owner rung); its reads answer."""
    writing = [d for d in D.DOORS if d.kind == "write" and "W" in d.sets and d.rung is None]
    assert {d.layer for d in writing} == {"engine", "vfs", "accords", "memory", "policy"}
    for door in writing:
        status, doc = send(
            served,
            door.method,
            door.path.replace("{brain}", served.brain),
            ORDERS_KEY,
            {"op": door.name} if door.layer == "vfs" else {},
        )
        assert (status, doc["error"]["name"]) == (403, "ServiceKeyCannotWriteError"), (door.name, doc)
        assert doc["error"]["door"] == door.name
    error = refusal(ask(served, "accords/decide", ORDERS_KEY, {"mandate": "m"}), 403, "OwnerRungRequiredError")
    assert error["door"] == "accords.decide"
    assert ask(served, "counts", ORDERS_KEY, method="GET")[0] == 200
    assert ask(served, "policy/rules", ORDERS_KEY, method="GET")[0] == 200


def test_each_credential_writes_as_its_own_caller(served):
    """A person's key writes as its kind:principal, a token as its sub, a service key as the caller it asserts
    (the commit naming the service as via); nobody else may assert, and an unreadable assertion is refused."""
    cases = {
        "person": (PERSON_KEY, None, PERSON, None),
        "token": (token(served, "read", "write", sub="agent:anima"), None, "agent:anima", None),
        "asserted": (ORDERS_KEY, BOB, "person:bob", "service:orders"),
    }
    for what, (key, headers, caller, via) in cases.items():
        status, doc = ask(served, "add", key, {"type": "thing", "id": f"by-{what}"}, headers)
        assert status == 200, doc
        row = ask(served, f"get/by-{what}", PERSON_KEY, method="GET")[1]["entity"]
        assert row["createdBy"] == caller, what
        commit = ask(served, f"generation/{doc['generation']}", PERSON_KEY, method="GET")[1]
        assert (commit["author"], commit["via"]) == (caller, via), what
    for key in (PERSON_KEY, BUSINESS_KEY, token(served, "read", "write")):
        error = refusal(ask(served, "add", key, {"type": "thing"}, BOB), 403, "CallerAssertionRefusedError")
        assert error["reason"] == "not-a-service"
        error = refusal(
            ask(served, "counts", key, headers={"X-Brainy-Roles": "a"}, method="GET"),
            403,
            "CallerAssertionRefusedError",
        )
    for headers in ({"X-Brainy-Caller": "bob"}, {**BOB, "X-Brainy-Owner": "maybe"}, {"X-Brainy-Owner": "true"}):
        error = refusal(ask(served, "add", ORDERS_KEY, {"type": "thing"}, headers), 403, "CallerAssertionRefusedError")
        assert error["reason"] == "malformed", headers


def test_a_guardrail_binds_the_asserted_person_and_names_the_service(served):
    """A rule bob declared through the service binds bob's later writes through it: GuardrailRefusedError 403
    with the rules, bob as the caller and the service as via; the audit records both; other callers write."""
    rule = {"doors": ["update"], "reason": "bob never edits"}
    status, declared = ask(served, "policy/declare", ORDERS_KEY, rule, BOB)
    assert status == 200 and declared["tier"] == 2, declared
    ask(served, "add", PERSON_KEY, {"type": "thing", "id": "shared"})
    error = refusal(ask(served, "update", ORDERS_KEY, {"id": "shared", "data": "x"}, BOB), 403, "GuardrailRefusedError")
    assert error["caller"] == "person:bob" and error["via"] == "service:orders"
    assert error["rules"] == [{"id": declared["id"], "tier": 2, "reason": "bob never edits"}]
    assert ask(served, "update", PERSON_KEY, {"id": "shared", "data": "y"})[0] == 200
    check = ask(served, "policy/check", ORDERS_KEY, {"door": "update"}, BOB)[1]
    assert check == {**check, "allowed": False, "caller": "person:bob"}
    events = ask(served, "policy/audit", PERSON_KEY, method="GET")[1]["events"]
    assert {(e["caller"], e["via"], e["door"]) for e in events} >= {("person:bob", "service:orders", "update")}


def test_check_over_the_wire_answers_what_the_write_then_meets(served):
    """policy/check stages the write it is asked about as the commit would, for the asserted caller through the
    service: with bob's rule on memory.remember whose where matches one tag, a remember without the tag is
    allowed and then committed, one with it is stopped by the check and by the write alike."""
    rule = {"doors": ["memory.remember"], "where": {"tags": "private"}, "reason": "bob keeps nothing private"}
    declared = ask(served, "policy/declare", ORDERS_KEY, rule, BOB)[1]
    plain = {"text": "the lunch order is soup", "tags": ["lunch"]}
    private = {"text": "the locker code is 4321", "tags": ["private"]}
    status, check = ask(served, "policy/check", ORDERS_KEY, {"door": "memory.remember", "args": plain}, BOB)
    assert status == 200 and check == {**check, "allowed": True, "caller": "person:bob", "rules": []}
    assert ask(served, "memory/remember", ORDERS_KEY, plain, BOB)[0] == 200
    stop = [{"id": declared["id"], "tier": 2, "reason": "bob keeps nothing private"}]
    status, check = ask(served, "policy/check", ORDERS_KEY, {"door": "memory.remember", "args": private}, BOB)
    assert status == 200 and check == {**check, "allowed": False, "caller": "person:bob", "rules": stop}
    error = refusal(ask(served, "memory/remember", ORDERS_KEY, private, BOB), 403, "GuardrailRefusedError")
    assert error["rules"] == stop and error["via"] == "service:orders"


def test_a_guardrail_refusal_is_a_readable_mcp_tool_result(served):
    """Over /mcp with the official SDK: an agent declares a rule for itself, its next write through the tool is
    an isError result whose structuredContent names GuardrailRefusedError with the rule and the caller, and the
    text block says the same; policy_audit lists it."""
    agent = token(served, "read", "write", sub="agent:careful")

    async def talk() -> tuple[Any, Any, Any, Any]:
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {agent}"}, timeout=TIMEOUT)
        async with http, Client(streamable_http_client(f"{served.url}/mcp", http_client=http)) as client:
            declared = await client.call_tool(
                "policy_declare", {"body": {"doors": ["add"], "reason": "I only read today"}}
            )
            stopped = await client.call_tool("brainy_add", {"body": {"type": "thing", "data": "a note"}})
            audit = await client.call_tool("policy_audit", {"body": {"caller": "agent:careful"}})
            check = await client.call_tool("policy_check", {"body": {"door": "add"}})
            return declared, stopped, audit, check

    declared, stopped, audit, check = asyncio.run(asyncio.wait_for(talk(), TIMEOUT))
    assert declared.is_error is False and declared.structured_content["status"] == "active"
    assert stopped.is_error is True
    error = stopped.structured_content["error"]
    assert error["name"] == "GuardrailRefusedError" and error["caller"] == "agent:careful" and error["via"] is None
    assert error["rules"] == [{"id": declared.structured_content["id"], "tier": 2, "reason": "I only read today"}]
    assert "I only read today" in stopped.content[0].text and "GuardrailRefusedError" in stopped.content[0].text
    assert [e["door"] for e in audit.structured_content["events"]] == ["add"]
    assert check.structured_content["allowed"] is False and check.structured_content["caller"] == "agent:careful"
