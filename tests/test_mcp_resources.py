"""MCP resource templates are declared once (brainy/contract/mcp_resources.py) and every other copy follows it.

Seed 000, "MCP" (every template names the door that reads it; a resource with no implementation is not
offered); DOORS.md 0.7; issue 10 ("MCP resource templates ... are declared once").
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import pytest

from brainy.auth.principal import Principal
from brainy.contract import doors as D
from brainy.contract import mcp_resources as MR
from brainy.contract.onboarding import mcp_instructions
from brainy.engine import init_store
from brainy.host.dispatch import Dispatcher
from brainy.host.pool import Pool
from brainy.net import mcp as M
from brainy.net.mcp import resources

ROOT = Path(__file__).resolve().parent.parent
DOORS_MD = ROOT.parent / "shared" / "DOORS.md"


def _table_after(text: str, heading: str) -> list[tuple[str, str]]:
    """The (template, door cell) rows of the first table after ``heading``."""
    lines = text[text.index(heading) :].splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("|"))
    end = next((i for i in range(start, len(lines)) if not lines[i].startswith("|")), len(lines))
    rows = (re.fullmatch(r"\| `(brainy://[^`]+)` \| (.+?) \|", line) for line in lines[start:end])
    return [row.groups() for row in rows if row]


def _declared() -> list[tuple[str, str]]:
    """The declaration as those tables write it: `door`, and ` on `<path>`` where a field is filled."""
    out = []
    for t in MR.RESOURCE_TEMPLATES:
        cell = f"`{t.door}`" + "".join(f" on `{text}`" for text in t.fills.values())
        out.append((t.template, cell))
    return out


@pytest.mark.skipif(not DOORS_MD.exists(), reason="the door catalogue ../shared/DOORS.md is not here")
def test_the_declaration_is_doors_md_0_7():
    """The one declaration lists DOORS.md 0.7's templates, in its order, each reading through its door."""
    assert _table_after(DOORS_MD.read_text("utf-8"), "### 0.7 MCP resources") == _declared()


def test_docs_mcp_lists_the_declaration():
    """docs/mcp.md's table of resources is the declaration, row for row."""
    assert _table_after((ROOT / "docs" / "mcp.md").read_text("utf-8"), "## Resources") == _declared()


def test_every_surface_takes_the_templates_from_the_one_declaration():
    """The package's RESOURCE_TEMPLATES is the declaration itself, and the instructions name every offered one."""
    assert M.RESOURCE_TEMPLATES is MR.RESOURCE_TEMPLATES
    text = mcp_instructions(["notes"])
    for t in MR.RESOURCE_TEMPLATES:
        assert (f"{t.template} ({t.door})" in text) == t.offered


@pytest.mark.parametrize(
    "template, complaint",
    [
        (MR.ResourceTemplate("brainy://{brain}/nothing", "nosuch", "n", "N", "d"), "not a door"),
        (MR.ResourceTemplate("brainy://{brain}/entities/{key}", "get", "n", "N", "d"), "{key} reaches no argument"),
        (MR.ResourceTemplate("brainy://{brain}/entities", "get", "n", "N", "d"), "requires 'id'"),
        (
            MR.ResourceTemplate("brainy://{brain}/files/{name}", "readFile", "n", "N", "d", {"colour": "{name}"}),
            "fills 'colour'",
        ),
        (MR.ResourceTemplate("https://{brain}/counts", "counts", "n", "N", "d"), "starts brainy://"),
    ],
)
def test_a_template_that_does_not_meet_its_door_fails_the_join(template, complaint):
    """The join runs both ways: a placeholder must reach an argument of the door, a filled field must be one of
    its document fields, and every argument the door requires (but brain) must be reached."""
    with pytest.raises(D.ContractError, match=re.escape(complaint)):
        MR.join_to_doors((template,))


def test_an_address_is_read_against_the_offered_templates_in_order():
    """An address fills the first offered template of its shape, each segment decoded once; a template whose
    door does not answer yet is not matched; anything else is not found."""
    template, values = resources.address("brainy://notes/entities/a%2Fb/history")
    assert (template.door, values) == ("history", {"brain": "notes", "id": "a/b"})
    assert resources.door_arguments(template, values) == ("notes", "a/b", {})
    template, values = resources.address("brainy://skills/counts")
    assert (template.door, values) == ("counts", {"brain": "skills"})
    skills = next(t for t in MR.RESOURCE_TEMPLATES if t.door == "readFile")
    assert resources.door_arguments(skills, {"path": "guide.md"}) == (None, None, {"path": "/skills/guide.md"})
    if not skills.offered:
        with pytest.raises(M.ProtocolError):
            resources.address("brainy://skills/guide.md")


def test_an_entitys_history_reads_through_the_history_door(tmp_path):
    """brainy://{brain}/entities/{id}/history answers the history door's own answer for that id."""
    init_store(tmp_path / "notes")
    pool = Pool({"notes": tmp_path / "notes"})
    try:
        server = M.McpServer(Dispatcher(pool))
        principal = Principal.static_key("person:reader@example.com", frozenset({"notes"}))
        session = M.Session("s", ("", "", None), state=M.State.READY)

        def ask(method: str, params: dict) -> dict:
            reply = server.handle(session, principal, M.Message("request", method, 1, params))
            return reply if isinstance(reply, dict) else asyncio.run(reply)  # a write waits for its fsync

        added = ask("tools/call", {"name": "brainy_add", "arguments": {"body": {"type": "person", "id": "ada"}}})
        assert added["result"]["isError"] is False, added
        history = ask("tools/call", {"name": "brainy_history", "arguments": {"id": "ada"}})["result"]
        read = ask("resources/read", {"uri": "brainy://notes/entities/ada/history"})
        assert "result" in read, read
        answer = json.loads(read["result"]["contents"][0]["text"])
        assert answer == history["structuredContent"] and len(answer["versions"]) == 1
    finally:
        pool.close_all()
