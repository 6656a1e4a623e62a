"""The onboarding documents for an arriving agent: ``/agent`` (JSON) and ``/llms.txt`` (text).

They are prose around the contract, generated from the same door table, and
never a substitute for ``/contract.json`` (seed 000, "The contract door").
Pure functions: the caller hands in the version and the base URL.
"""

from __future__ import annotations

from typing import Any

from brainy.contract import doors as D

MCP_PROTOCOL = "2025-06-18"

_GET_A_KEY = ("Ask the operator of this server for a key: a line of its keys file (a person, business or "
              "service key reaching named brains), or a bk1. token minted for one brain with a read or "
              "read,write scope. Send it as `Authorization: Bearer <key>` on every request.")


def _today(door: D.Door) -> str:
    if door.disposition == "notYetNative":
        return f"arrives in {door.release}"
    if door.disposition == "inProcessOnly":
        return f"in-process only; over a wire call {door.instead}"
    return "answers"


def agent_document(version: str, base_url: str = "") -> dict[str, Any]:
    """The ``GET /agent`` answer: how to get a key, where the contract is, how to connect over MCP."""
    return {
        "service": "brainy",
        "version": version,
        "contract": f"{base_url}/contract.json",
        "llmsTxt": f"{base_url}/llms.txt",
        "auth": {"scheme": "Bearer", "howToGetAKey": _GET_A_KEY},
        "mcp": {"url": f"{base_url}/mcp", "transport": "streamable-http", "protocolVersion": MCP_PROTOCOL},
        "http": {"brainPrefix": D.BRAIN_PREFIX, "encodings": ["application/json", "application/msgpack"]},
        "doors": [{"name": d.name, "layer": d.layer, "kind": d.kind, "when": d.when, "today": _today(d)}
                  for d in D.DOORS],
    }


def llms_txt(version: str, base_url: str = "") -> str:
    """The ``GET /llms.txt`` answer: one line per door, grouped by layer."""
    lines = [
        f"# brainy {version}",
        "",
        "> A knowledge store for AI agents: entities, relations and files in brains, every commit a "
        "generation. The contract of every door is at /contract.json; connect an MCP client to /mcp.",
        "",
        "## Connecting",
        "",
        f"- [Contract]({base_url}/contract.json): every door on every transport, every refusal",
        f"- [MCP]({base_url}/mcp): streamable HTTP, protocol revision {MCP_PROTOCOL}; every door is a tool",
        f"- [Agent]({base_url}/agent): this guide as JSON",
        f"- Keys: {_GET_A_KEY}",
    ]
    for layer in D.LAYERS:
        lines += ["", f"## {layer}", ""]
        for d in D.DOORS:
            if d.layer == layer:
                lines.append(f"- `{d.name}` ({d.kind}, {d.method} {d.path}; {_today(d)}): {d.when}")
    return "\n".join(lines) + "\n"
