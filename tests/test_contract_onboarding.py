"""/agent and /llms.txt are generated from the door table: every door once, and the ways in named."""

from __future__ import annotations

import re

from brainy.contract import doors as D
from brainy.contract.onboarding import agent_markdown, llms_txt


def test_llms_txt_lists_every_door_exactly_once():
    """Each contract door has one line in /llms.txt, and no line names a door outside the contract."""
    text = llms_txt("0.1.0", "http://127.0.0.1:8300")
    named = re.findall(r"^- `([^`]+)` \(", text, re.M)
    assert sorted(named) == sorted(d.name for d in D.DOORS)
    assert "http://127.0.0.1:8300/contract.json" in text and "/mcp" in text
    assert "import` (write, POST /v1/brains/{brain}/import; answers)" in text
    assert "accords.read` (read, GET /v1/brains/{brain}/accords/read/{id}; answers)" in text
    assert "host.move` (write, POST /v1/brains/{brain}/move; answers)" in text


def test_agent_guide_points_at_the_contract_and_mcp():
    """/agent (Markdown) names the contract door, the MCP endpoint and protocol, how to authenticate, and
    every door once."""
    text = agent_markdown("0.1.0", "http://h")
    assert "`GET http://h/contract.json`" in text and "`http://h/mcp`" in text and "2025-06-18" in text
    assert "Authorization: Bearer <key>" in text
    named = re.findall(r"^- `([^`]+)` \(", text, re.M)
    assert named == [d.name for d in D.DOORS]
    assert "- `get` (read; answers)" in text and "- `accords.read` (read; answers)" in text
    assert "- `host.move` (write; answers)" in text
