"""/agent and /llms.txt are generated from the door table: every door once, and the ways in named."""

from __future__ import annotations

import re

from brainy.contract import doors as D
from brainy.contract.onboarding import agent_document, llms_txt


def test_llms_txt_lists_every_door_exactly_once():
    """Each contract door has one line in /llms.txt, and no line names a door outside the contract."""
    text = llms_txt("0.1.0", "http://127.0.0.1:8300")
    named = re.findall(r"^- `([^`]+)` \(", text, re.M)
    assert sorted(named) == sorted(d.name for d in D.DOORS)
    assert "http://127.0.0.1:8300/contract.json" in text and "/mcp" in text
    assert "find` (read, POST /v1/brains/{brain}/find; arrives in 0.3.0)" in text


def test_agent_document_points_at_the_contract_and_mcp():
    """/agent names the contract door, the MCP endpoint and protocol, and how to authenticate."""
    doc = agent_document("0.1.0", "http://h")
    assert doc["contract"] == "http://h/contract.json"
    assert doc["mcp"] == {"url": "http://h/mcp", "transport": "streamable-http", "protocolVersion": "2025-06-18"}
    assert doc["auth"]["scheme"] == "Bearer"
    assert [d["name"] for d in doc["doors"]] == [d.name for d in D.DOORS]
    assert {d["today"] for d in doc["doors"] if d["name"] in ("get", "add")} == {"answers"}
