"""The onboarding documents for an arriving agent: ``/agent`` (Markdown), ``/llms.txt`` (text) and MCP's
``initialize.instructions``.

They are prose around the contract, generated from the same door table, and
never a substitute for ``/contract.json`` (seed 000, "The contract door").
Pure functions: the caller hands in the version and the base URL, or the brains a key reaches.
"""

from __future__ import annotations

from collections.abc import Sequence

from brainy.contract import doors as D
from brainy.contract.mcp_resources import RESOURCE_TEMPLATES

MCP_PROTOCOL = "2025-06-18"

_GET_A_KEY = (
    "Ask the operator of this server for a key: a line of its keys file (a person, business or "
    "service key reaching named brains), or a bk1. token minted for one brain with a read or "
    "read,write scope. Send it as `Authorization: Bearer <key>` on every request."
)


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


_NO_REACH = "This key reaches no brain served here; every door on a brain refuses it."


def mcp_instructions(brains: Sequence[str]) -> str:
    """The compact default ``initialize.instructions``, for a key reaching ``brains``.

    The store's own ``/_brainy/mcp/instructions.md`` replaces it when that file exists
    (``brainy/net/mcp/server.py``, read through readFile); a key reaching several brains always gets
    this text, since no one store speaks for it (seed 001, "Which brain a call reaches").
    ``tests/test_mcp_cost.py`` holds it within 700 o200k_base tokens.
    """
    if len(brains) == 1:
        reach = f"This key reaches one brain, `{brains[0]}`: leave `brain` out, or name it."
    elif brains:
        named = ", ".join(f"`{b}`" for b in brains[:8]) + (", ..." if len(brains) > 8 else "")
        reach = (
            f"This key reaches {len(brains)} brains ({named}): name one in `brain` on every call; "
            "a call without it is refused."
        )
    else:
        reach = _NO_REACH
    # the shorter list: most doors answer now, so the ones that do not are named
    waiting = ", ".join(d.mcp_tool for d in D.DOORS if not d.native)
    resources = "; ".join(f"{t.template} ({t.door})" for t in RESOURCE_TEMPLATES if t.offered)
    return "\n\n".join(
        [
            "brainy is a knowledge store: entities and relations (and, later, files) in brains. Every "
            "commit is a numbered generation, and every write answers the generation it made.",
            reach,
            "Every door of the contract is a tool: brainy_<door> for engine and file doors, <layer>_<door> "
            "for the profiles (accords, memory, policy) and the host. A description gives the door's "
            "signature: send its argument document whole as `body`, and `id` beside it where the door "
            f"takes one. Every door answers today but these, which refuse by name (the description says which "
            f"refusal and when the door arrives): {waiting}.",
            'A refusal is a tool result with isError true and structuredContent {"error": {"name", '
            '"message", ...}}. Read the name before trying again: NotYetNativeError and '
            "InProcessOnlyError refuse every call; ForbiddenError and BRAINY_KEY_* concern the key; "
            "InvalidArgumentError names the field to fix.",
            "An id is a UUID or your own natural key (1 to 256 characters); every door that takes an id "
            "accepts either. Adding with a natural key is how to write idempotently.",
            f"Resources: {resources}.",
            "The whole contract, every door and every refusal: GET /contract.json on the HTTP server.",
        ]
    )
