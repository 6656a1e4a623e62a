"""memory.context (DOORS 9.2): one Markdown block within a token budget, from the recent turns of a
conversation (``timeline``), what recall ranks (``recall``), or the strongest memories (``browse``)."""

from __future__ import annotations

from typing import Any

from brainy.doors.memory import records as M
from brainy.doors.memory.browse import strongest
from brainy.doors.memory.recall import _int, _query_text, _scope, estimate, narrowing, rank
from brainy.doors.memory.timeline import recent_turns
from brainy.doors.registry import door
from brainy.index.snapshot import Snapshot


@door("memory.context", embeds=_query_text)
def context(view: Snapshot, id_: Any, a: dict[str, Any]) -> dict[str, Any]:
    """One Markdown block within the budget: recent turns, then facts and preferences, then summaries; each
    section's lines in rank order, and whatever does not fit left out (``truncated``)."""
    budget = _int(a["budgetTokens"], "budgetTokens", 1, 1_000_000)
    recent = _int(a["recentTurns"], "recentTurns", 0, 1000)
    kinds = M.kinds(a.get("kinds"))
    turns = recent_turns(view, a["conversation"], recent) if a.get("conversation") is not None else []
    text = a.get("query")
    if text is None and turns:
        text = turns[-1]["text"]
    sections: list[tuple[str, list[tuple[dict[str, Any], str]]]] = []
    if turns:
        sections.append(("Recent turns", [(t, f"- **{t['role']}** (#{t['seq']}): {t['text']}") for t in turns]))
    if text is not None and text.strip():
        hits, _ = rank(view, text, narrowing([k for k in kinds if k != "turn"], _scope(a)), 20)
        memories = [h["memory"] for h in hits]
    else:  # nothing to ask: the strongest memories
        memories = strongest(view, [k for k in kinds if k != "turn"], _scope(a), 20)
    known = [
        (m, f"- {m['text']}" + (f" _({m['kind']})_" if m["kind"] == "preference" else ""))
        for m in memories
        if m["kind"] in ("fact", "preference", "note")
    ]
    summaries = [(m, f"- {m['text']}") for m in memories if m["kind"] == "abstract"]
    if known:
        sections.append(("Facts and preferences", known))
    if summaries:
        sections.append(("Summaries", summaries))
    out: list[str] = []
    used: list[dict[str, str]] = []
    truncated = False
    for title, lines in sections:
        heading = f"## {title}\n"
        if estimate("".join(out) + heading + lines[0][1] + "\n") > budget:
            truncated = True
            continue
        out.append(heading)
        for memory, line in lines:
            if estimate("".join(out) + line + "\n") > budget:
                truncated = True
                break
            out.append(line + "\n")
            used.append({"id": memory["id"], "kind": memory["kind"]})
        out.append("\n")
    block = "".join(out).rstrip("\n") + ("\n" if out else "")
    return {"context": block, "used": used, "tokensEstimated": estimate(block), "truncated": truncated}
