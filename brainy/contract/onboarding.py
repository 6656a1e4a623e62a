"""The onboarding documents for an arriving agent: ``/agent`` (JSON) and ``/llms.txt`` (text).

They are prose around the contract, generated from the same door table, and
never a substitute for ``/contract.json`` (seed 000, "The contract door").
Pure functions: the caller hands in the version and the base URL.
"""

from __future__ import annotations

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


def agent_markdown(version: str, base_url: str = "") -> str:
    """The ``GET /agent`` answer (Markdown): how to get a key, where the contract is, how to connect over MCP."""
    lines = [
        f"# brainy {version}: a guide for an arriving agent",
        "",
        "brainy is a knowledge store: entities, relations and files in *brains*, every commit a numbered",
        "generation you can read as of the past.",
        "",
        "## 1. Get a key",
        "",
        _GET_A_KEY,
        "",
        "## 2. Read the contract",
        "",
        f"`GET {base_url}/contract.json` lists every door on every transport, with its arguments, its",
        "answer and every refusal it can give. It is the contract; this page is only a guide.",
        "",
        "## 3. Connect over MCP",
        "",
        f"Point an MCP client at `{base_url}/mcp` (streamable HTTP, protocol revision {MCP_PROTOCOL}) with",
        "the header `Authorization: Bearer <key>`. Every door is a tool.",
        "",
        "## 4. Or call doors over HTTP",
        "",
        f"Doors live under `{D.BRAIN_PREFIX}`: `GET .../get/{{id}}`, `POST .../add`, `GET .../counts`.",
        "Bodies are JSON, or MessagePack with `Content-Type: application/msgpack`.",
        "",
        "## Doors",
        "",
    ]
    lines += [f"- `{d.name}` ({d.kind}; {_today(d)}): {d.when}" for d in D.DOORS]
    return "\n".join(lines) + "\n"


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
