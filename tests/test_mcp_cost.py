"""What MCP costs an agent, measured as agents pay it: o200k_base tokens of what the server sends.

Issue 10: the whole ``tools/list`` answer, all 109 tools, stays within 12,000 tokens and no tool within it
over 200; ``initialize.instructions`` stays within 700 (seed 000, "MCP": "a compact default measured against
a 700-token budget"). The count is the o200k_base BPE (the encoding of OpenAI's current models) from the
``quicktok`` package, which ships the vocabulary in its wheel, fetches nothing and gives tiktoken's ids. What
is measured is the bytes an HTTP reply carries (the JSON-RPC envelope included), so the figure moves with
every byte the server sends and with nothing else. ``docs/mcp.md`` ("What an agent pays") explains the
figures these tests print.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
import quicktok

from brainy.auth.principal import Principal
from brainy.contract import doors as D
from brainy.engine import init_store
from brainy.host.dispatch import Dispatcher
from brainy.host.pool import Pool
from brainy.net import mcp as M

LIST_BUDGET = 12_000
TOOL_BUDGET = 200
INSTRUCTIONS_BUDGET = 700
O200K = quicktok.get_encoding("o200k_base")
INIT = {"protocolVersion": M.PROTOCOL_VERSION, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}


def tokens(text: str | bytes) -> int:
    """o200k_base tokens of ``text``, special-token strings read as ordinary text (tiktoken's encode_ordinary)."""
    return len(O200K.encode_ordinary(text.decode() if isinstance(text, bytes) else text))


class Served:
    """Streamable HTTP in memory for a key reaching ``brains``: initialize, then any request; the reply bytes."""

    def __init__(self, pool: Pool, brains: list[str]) -> None:
        principal = Principal.static_key("person:agent@example.com", frozenset(brains))
        self.http = M.StreamableHttp(M.McpServer(Dispatcher(pool)), lambda h: principal)
        opened = self.http.handle(
            "POST", {}, orjson.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": INIT}), 0.0
        )
        assert opened.status == 200, opened
        self.instructions = orjson.loads(opened.body)["result"]["instructions"]
        self.session = dict(opened.headers)[b"mcp-session-id"].decode()

    def body(self, method: str, id_: int = 1) -> bytes:
        reply = self.http.handle(
            "POST", {"mcp-session-id": self.session}, orjson.dumps({"jsonrpc": "2.0", "id": id_, "method": method}), 1.0
        )
        assert reply.status == 200, reply
        return reply.body


@pytest.fixture(scope="module")
def served(tmp_path_factory) -> dict[str, Served]:
    """The same server seen by a key reaching one brain, two brains, and none."""
    root: Path = tmp_path_factory.mktemp("cost")
    for name in ("notes", "other"):
        init_store(root / name)
    pool = Pool({"notes": root / "notes", "other": root / "other"})
    yield {
        "one brain": Served(pool, ["notes"]),
        "two brains": Served(pool, ["notes", "other"]),
        "no brain": Served(pool, []),
    }
    pool.close_all()


def _tools(body: bytes) -> list[dict[str, Any]]:
    return orjson.loads(body)["result"]["tools"]


def test_the_o200k_count_is_tiktokens():
    """The counter is o200k_base itself: tiktoken's ids for a known text, from the vocabulary in the wheel."""
    assert O200K.name == "o200k_base"
    assert O200K.encode_ordinary("hello world") == [24912, 2375]


def test_the_whole_tools_list_stays_within_12000_tokens_and_each_tool_within_200(served, capsys):
    """tools/list, all 109 tools in the answer an HTTP reply carries, is at most 12,000 o200k tokens for a key
    reaching one brain and for one reaching several; no tool in it is over 200. The figures are printed."""
    lines = []
    for reach in ("two brains", "one brain"):
        body = served[reach].body("tools/list")
        tools = _tools(body)
        assert len(tools) == len(D.DOORS)
        whole = tokens(body)
        largest = max(tools, key=lambda t: tokens(orjson.dumps(t)))
        most = tokens(orjson.dumps(largest))
        lines.append(
            f"tools/list for a key reaching {reach}: {whole} o200k tokens for {len(tools)} tools "
            f"(largest: {largest['name']}, {most}; mean {whole / len(tools):.0f})"
        )
        assert whole <= LIST_BUDGET, lines[-1]
        assert most <= TOOL_BUDGET, lines[-1]
    with capsys.disabled():
        print("\n" + "\n".join(lines))


def test_the_instructions_stay_within_700_tokens(served, capsys):
    """initialize.instructions, as served to a key reaching one brain, several and none, is at most 700 o200k
    tokens, as is the default for a key reaching twenty brains (the longest list it names). Printed."""
    texts = {reach: s.instructions for reach, s in served.items()}
    texts["twenty brains"] = M.instructions([f"brain-{i}" for i in range(20)])
    counts = {reach: tokens(text) for reach, text in texts.items()}
    with capsys.disabled():
        print(
            "\ninitialize.instructions, o200k tokens: "
            + ", ".join(f"{reach} {count}" for reach, count in counts.items())
        )
    assert max(counts.values()) <= INSTRUCTIONS_BUDGET, counts


def test_the_tools_list_is_compact_and_the_same_bytes_every_time(served):
    """The answer carries no whitespace outside its strings, lists the tools in contract order, and is the same
    bytes on every call, so a client may cache it."""
    body = served["two brains"].body("tools/list", 7)
    assert orjson.dumps(orjson.loads(body)) == body
    assert [t["name"] for t in _tools(body)] == [d.mcp_tool for d in D.DOORS]
    assert served["two brains"].body("tools/list", 7) == body


def test_no_tool_states_what_the_specification_already_defaults(served):
    """Annotations equal to 2025-06-18's defaults (readOnlyHint false, destructiveHint true) are left out, and an
    input schema carries no keyword at its default (an empty required list, a true additionalProperties)."""
    for tool in _tools(served["two brains"].body("tools/list")):
        assert tool.get("annotations") != {}
        annotations = tool.get("annotations", {})
        assert annotations.get("readOnlyHint", True) is True and annotations.get("destructiveHint", False) is False
        schema = tool["inputSchema"]
        assert schema.get("required", ["-"]) != [] and schema["additionalProperties"] is False
