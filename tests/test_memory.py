"""The memory profile on a real store with the real embedder (DOORS 9.2, 11.8, 11.9; docs/memory.md).

Every memory refusal of 9.2 and 11.9, dedupe and consolidation at their thresholds on real embeddings, recall's
ranking and ``why``, the timeline's A2 rule, context's budget, and abstract through the language seam to a
local stub provider on loopback.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

import numpy as np
import pytest

from brainy.contract import refusals as R
from brainy.doors import language
from brainy.engine import init_store
from brainy.engine.brain import Brain
from brainy.index import embedder

ME = "person:agent@example.com"
WRITES = {
    "memory.remember": {"text": "x"},
    "memory.turn": {"conversation": "c", "role": "user", "text": "hi"},
    "memory.abstract": {"members": ["x"], "text": "s"},
    "memory.cite": {"id": "x", "evidence": "y"},
    "memory.reinforce": {"id": "x"},
    "memory.retire": {"id": "x", "reason": "r"},
    "memory.consolidate": {},
    "memory.write": {"path": "/notes/x.md", "content": "x"},
}


@pytest.fixture
def brain(tmp_path) -> Iterator[Brain]:
    init_store(tmp_path / "mem")
    with Brain.open(tmp_path / "mem") as b:
        yield b


def remember(b: Brain, text: str, **more: Any) -> dict[str, Any]:
    return b.call("memory.remember", {"text": text, **more}, caller=ME)


def cosine(a: str, b: str) -> float:
    va, vb = embedder.embed_many([a, b])[0]
    return float(np.dot(va, vb))


def recalled(b: Brain, query: str, **more: Any) -> list[str]:
    return [h["memory"]["text"] for h in b.call("memory.recall", {"query": query, **more})["memories"]]


# -- who writes ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("door", sorted(WRITES))
def test_a_memory_write_with_no_caller_is_refused(brain, door):
    """11.2: a memory write that reaches the profile with no caller bound refuses MemoryHostCannotWriteError."""
    with pytest.raises(R.MemoryHostCannotWriteError) as refused:
        brain.call(door, WRITES[door])
    assert refused.value.fields == {"missing": "caller"}
    assert brain.head == 0


def test_rows_are_internal_memory_entities_attributed_to_the_caller(brain):
    """9: a memory is an internal entity of subtype memory.<kind>, its author the caller; a plain find misses it."""
    got = remember(brain, "Alice prefers green tea")
    row = brain.get(got["id"])["entity"]
    assert (row["type"], row["subtype"], row["visibility"], row["createdBy"]) == (
        "proposition",
        "memory.fact",
        "internal",
        ME,
    )
    assert brain.find({"query": "green tea"})["results"] == []
    assert [h["id"] for h in brain.find({"query": "green tea", "visibility": "all"})["results"]] == [got["id"]]


# -- remember's dedupe -----------------------------------------------------------------------------------------


def test_dedupe_reinforces_at_cosine_095_in_the_same_kind_and_scope(brain):
    """9.2: cosine ≥ 0.95 with an active memory of the same kind and scope reinforces it (deduplicated)."""
    first, near, other = "Alice prefers green tea", "Alice prefers green tea.", "Alice prefers black coffee"
    assert cosine(first, near) >= 0.95 > cosine(first, other)
    kept = remember(brain, first)
    again = remember(brain, near)
    assert again["id"] == kept["id"] and again["deduplicated"] is True
    assert brain.call("memory.read", {"id": kept["id"]})["memory"]["strength"] == pytest.approx(0.6)
    assert remember(brain, other)["deduplicated"] is False
    assert remember(brain, near, kind="preference")["deduplicated"] is False  # another kind
    assert remember(brain, near, scope="user:alice")["deduplicated"] is False  # another scope
    assert remember(brain, near, dedupe=False)["deduplicated"] is False  # asked not to
    assert brain.call("memory.stats")["byKind"]["fact"] == 4


def test_a_retired_memory_is_not_a_duplicate(brain):
    """Dedupe reinforces an active memory only: once retired, the same text is a new memory."""
    kept = remember(brain, "Bob drives a blue Volvo")
    brain.call("memory.retire", {"id": kept["id"], "reason": "sold it"}, caller=ME)
    assert remember(brain, "Bob drives a blue Volvo")["deduplicated"] is False


# -- recall ----------------------------------------------------------------------------------------------------

FACTS = [
    "Alice prefers green tea to coffee",
    "Alice's daughter starts school in September",
    "Alice works night shifts as a nurse",
    "Alice is allergic to penicillin",
    "Bob drives a blue Volvo estate",
]


def test_recall_puts_the_answer_first_for_a_paraphrase(brain):
    """9.2: a question naming the subject and paraphrasing the rest finds the memory that answers, first, with
    each leg's part in ``why``; stop words and the shared name do not outvote meaning."""
    ids = {text: remember(brain, text)["id"] for text in FACTS}
    for question, want in [
        ("What does Alice like to drink?", FACTS[0]),
        ("When does Alice's kid begin classes?", FACTS[1]),
        ("What is Alice's job?", FACTS[2]),
        ("Which medication must Alice avoid?", FACTS[3]),
        ("What car does Bob have?", FACTS[4]),
    ]:
        answer = brain.call("memory.recall", {"query": question})
        top = answer["memories"][0]
        assert top["memory"]["id"] == ids[want], question
        assert top["why"]["strength"] == 0.5 and top["why"]["semantic"] > 0
        parts = ("semantic", "text", "speaker", "form")
        assert top["score"] == pytest.approx(sum(top["why"].get(p, 0) for p in parts) * 0.75)
        assert answer["text"] == {"served": True}
        assert answer["semantic"] == {"served": True, "model": {"name": "all-MiniLM-L6-v2", "runs": "int8-dynamic"}}
        assert answer["speakers"] == {"named": []}  # FACTS name people in what was said, never as a speaker


def test_recall_weighs_strength_and_drops_the_retired(brain):
    """score × (0.5 + 0.5 × strength); a retired memory leaves recall unless includeRetired."""
    weak = remember(brain, "The office closes at 6 pm on Fridays", strength=0.0)["id"]
    strong = remember(brain, "The office closes at 5 pm on Fridays", strength=1.0, dedupe=False)["id"]
    hits = brain.call("memory.recall", {"query": "When does the office shut on Friday?"})["memories"]
    assert [h["memory"]["id"] for h in hits] == [strong, weak]
    brain.call("memory.retire", {"id": strong, "reason": "hours changed", "supersededBy": weak}, caller=ME)
    assert [h["memory"]["id"] for h in brain.call("memory.recall", {"query": "office Friday"})["memories"]] == [weak]
    both = brain.call("memory.recall", {"query": "office Friday", "includeRetired": True})["memories"]
    assert {h["memory"]["id"] for h in both} == {strong, weak}


def test_recall_narrows_by_scope_kind_and_tags_and_reports_recency(brain):
    """scope, kinds and tags narrow; recencyHalfLifeDays adds the recency factor to score and why; minScore cuts."""
    a = remember(brain, "Prefers dark mode in every editor", kind="preference", scope="user:alice", tags=["ui"])["id"]
    b = remember(brain, "Prefers dark mode in every editor", kind="preference", scope="user:bob")["id"]
    c = remember(brain, "Dark mode was shipped in release 4", tags=["ui"])["id"]

    def ids(**more):
        return [h["memory"]["id"] for h in brain.call("memory.recall", {"query": "dark mode", **more})["memories"]]

    assert ids(scope="user:alice") == [a]
    assert set(ids(kinds=["preference"])) == {a, b}
    assert set(ids(tags=["ui"])) == {a, c}
    hit = brain.call("memory.recall", {"query": "dark mode", "recencyHalfLifeDays": 30})["memories"][0]
    assert 0.99 < hit["why"]["recency"] <= 1.0
    assert ids(minScore=10.0) == []
    with pytest.raises(R.InvalidArgumentError):
        brain.call("memory.recall", {"query": "dark mode", "kinds": ["opinion"]})


# -- turns and the timeline ------------------------------------------------------------------------------------


def test_turns_are_contiguous_and_read_after_a_seq(brain):
    """9.2: seq 1..n with no gap; turns reads the transcript, or only what came after the last seq seen."""
    said = [
        ("user", "I want to plan a trip to Lisbon"),
        ("assistant", "When would you like to go?"),
        ("user", "In May, for a week"),
        ("assistant", "Great, I will look at flights"),
    ]
    seqs = [
        brain.call("memory.turn", {"conversation": "trip", "role": r, "text": t}, caller=ME)["seq"] for r, t in said
    ]
    assert seqs == [1, 2, 3, 4]
    after = brain.call("memory.turns", "trip", {"afterSeq": 2})
    assert [(t["seq"], t["role"], t["text"]) for t in after["turns"]] == [(3, *said[2]), (4, *said[3])]
    assert after["lastSeq"] == 4 and after["hasMore"] is False
    page = brain.call("memory.turns", "trip", {"limit": 3})
    assert page["lastSeq"] == 3 and page["hasMore"] is True
    assert brain.call("memory.turns", "trip", {"afterSeq": 4})["turns"] == []
    assert brain.call("memory.stats")["conversations"] == 1


def test_a_gap_in_a_timeline_refuses(brain):
    """Rule A2: a turn removed through the engine leaves a gap, and turns refuses TimelineCorruptError."""
    ids = [
        brain.call("memory.turn", {"conversation": "c", "role": "user", "text": f"message {i}"}, caller=ME)["id"]
        for i in range(3)
    ]
    brain.remove({"id": ids[1]}, caller=ME)
    with pytest.raises(R.TimelineCorruptError) as refused:
        brain.call("memory.turns", "c", {"afterSeq": 2})
    assert refused.value.fields == {"expected": 3, "found": 2}
    assert "turn 2 is missing" in refused.value.message


def test_turns_of_an_unknown_conversation_and_a_bad_role(brain):
    """RecordNotFoundError for a conversation never turned; a role outside the four is InvalidArgumentError."""
    with pytest.raises(R.RecordNotFoundError):
        brain.call("memory.turns", "nobody", {})
    with pytest.raises(R.InvalidArgumentError):
        brain.call("memory.turn", {"conversation": "c", "role": "narrator", "text": "x"}, caller=ME)


# -- context ---------------------------------------------------------------------------------------------------


def test_context_assembles_markdown_within_the_budget(brain):
    """9.2: recent turns, then facts and preferences, then summaries, within budgetTokens (⌈chars / 4⌉)."""
    for text in FACTS:
        remember(brain, text)
    for role, text in [("user", "Alice asked what to bring to the party"), ("assistant", "Maybe a drink she likes")]:
        brain.call("memory.turn", {"conversation": "party", "role": role, "text": text}, caller=ME)
    full = brain.call("memory.context", {"conversation": "party", "query": "What does Alice like to drink?"})
    block = full["context"]
    assert block.index("## Recent turns") < block.index("## Facts and preferences")
    assert block.splitlines()[block.splitlines().index("## Facts and preferences") + 1] == f"- {FACTS[0]}"
    assert full["tokensEstimated"] == -(-len(block) // 4) <= 800 and full["truncated"] is False
    assert [u["kind"] for u in full["used"]][:3] == ["turn", "turn", "fact"]
    tight = brain.call("memory.context", {"conversation": "party", "budgetTokens": 40})
    assert tight["truncated"] is True and tight["tokensEstimated"] <= 40
    assert tight["context"].startswith("## Recent turns")


# -- abstract and the language seam ----------------------------------------------------------------------------


def test_abstract_written_by_the_caller_describes_its_members(brain):
    """abstract with text: generatedBy caller, one describes relation per member; unknown members refuse."""
    ids = [remember(brain, text)["id"] for text in FACTS[:3]]
    got = brain.call("memory.abstract", {"members": ids, "text": "Alice: tea, school in September, nurse"}, caller=ME)
    assert (got["members"], got["generatedBy"]) == (3, "caller")
    described = brain.related({"from": got["id"], "type": "describes", "visibility": "all"})["relations"]
    assert sorted(r["to"] for r in described) == sorted(ids)
    with pytest.raises(R.RecordNotFoundError):
        brain.call("memory.abstract", {"members": [ids[0], "no-such-memory"], "text": "x"}, caller=ME)


class _Stub(BaseHTTPRequestHandler):
    """A local model server speaking Ollama's /api/generate: it answers with the prompt's last line."""

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        _Stub.seen.append((self.path, body))
        answer = json.dumps({"response": "Summary: " + body["prompt"].splitlines()[-1]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args: Any) -> None:
        pass

    seen: list[Any] = []


@pytest.fixture
def stub_provider() -> Iterator[str]:
    server = HTTPServer(("127.0.0.1", 0), _Stub)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    _Stub.seen.clear()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_abstract_without_text_asks_the_configured_provider(brain, stub_provider):
    """Without text the provider resolved at start writes the summary (generatedBy provider)."""
    language.configure(
        {"BRAINY_LANGUAGE_PROVIDER": "ollama", "BRAINY_LANGUAGE_URL": stub_provider, "BRAINY_LANGUAGE_MODEL": "stub"}
    )
    try:
        for role, text in [("user", "book a table for two"), ("assistant", "done, 8 pm at Tasca")]:
            brain.call("memory.turn", {"conversation": "dinner", "role": role, "text": text}, caller=ME)
        got = brain.call("memory.abstract", {"conversation": "dinner", "fromSeq": 1, "toSeq": 2}, caller=ME)
    finally:
        language.configure({})
    assert (got["members"], got["generatedBy"]) == (2, "provider")
    assert brain.get(got["id"])["entity"]["data"] == "Summary: assistant: done, 8 pm at Tasca"
    assert _Stub.seen[0][0] == "/api/generate" and _Stub.seen[0][1]["model"] == "stub"


def test_abstract_without_text_or_provider_refuses_naming_what_was_looked_for(brain):
    """11.8: no provider configured → LanguageProviderUnavailableError, which names the variables looked for."""
    language.configure({"BRAINY_LANGUAGE_PROVIDER": "none"})
    try:
        member = remember(brain, FACTS[0])["id"]
        with pytest.raises(R.LanguageProviderUnavailableError) as refused:
            brain.call("memory.abstract", {"members": [member]}, caller=ME)
    finally:
        language.configure({})
    assert "BRAINY_LANGUAGE_PROVIDER" in refused.value.message and "ANTHROPIC_API_KEY" in refused.value.message
    assert brain.head == 1


@pytest.mark.parametrize(
    "env, expect",
    [
        ({}, None),
        ({"BRAINY_LANGUAGE_PROVIDER": "none", "OPENAI_API_KEY": "k"}, None),
        ({"OPENAI_API_KEY": "k"}, ("openai", "OPENAI_API_KEY")),
        ({"ANTHROPIC_API_KEY": "k"}, ("anthropic", "ANTHROPIC_API_KEY")),
        (
            {"BRAINY_LANGUAGE_PROVIDER": "anthropic", "ANTHROPIC_API_KEY": "k", "OPENAI_API_KEY": "k"},
            ("anthropic", "BRAINY_LANGUAGE_PROVIDER"),
        ),
        (
            {"BRAINY_LANGUAGE_PROVIDER": "ollama", "BRAINY_LANGUAGE_URL": "http://127.0.0.1:9"},
            ("ollama", "BRAINY_LANGUAGE_PROVIDER"),
        ),
    ],
)
def test_the_provider_precedence(env, expect):
    """Seed 000 Sovereignty: BRAINY_LANGUAGE_PROVIDER, then exactly one vendor key, then a local server, then none."""
    got = language.resolve(env)
    assert (got.name, got.chosen_by) == expect if expect else got is None


@pytest.mark.parametrize(
    "env, says",
    [
        ({"OPENAI_API_KEY": "a", "ANTHROPIC_API_KEY": "b"}, "choose one"),
        ({"BRAINY_LANGUAGE_PROVIDER": "gpt"}, "expected one of"),
        ({"BRAINY_LANGUAGE_PROVIDER": "openai"}, "needs OPENAI_API_KEY"),
        ({"BRAINY_LANGUAGE_PROVIDER": "ollama", "BRAINY_LANGUAGE_URL": "ftp://x"}, r"not an http\(s\) URL"),
        ({"OPENAI_API_KEY": "a", "BRAINY_OUTBOUND_ALLOW": "127.0.0.1"}, "outside the outbound gate"),
    ],
)
def test_misconfigurations_are_refused(env, says):
    """A misconfiguration is a LanguageConfigError (the server refuses to start on it)."""
    with pytest.raises(language.LanguageConfigError, match=says):
        language.resolve(env)


def test_a_local_model_server_on_its_port_is_found():
    """Step 3: with no choice and no vendor key, a server listening on 127.0.0.1:11434 is the provider."""
    import socket

    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 11434))
    listener.listen()
    try:
        got = language.resolve({})
    finally:
        listener.close()
    assert (got.name, got.url) == ("ollama", "http://127.0.0.1:11434")


# -- cite, reinforce, retire -------------------------------------------------------------------------------------


def test_cite_links_evidence_and_strengthens_once(brain):
    """cite adds a references relation (memory.cite) and 0.05 of strength; the same evidence again counts once."""
    memory = remember(brain, FACTS[0])["id"]
    brain.add({"type": "document", "id": "chat-2026-05-01", "data": "Alice: I only drink green tea"}, caller=ME)
    got = brain.call("memory.cite", {"id": memory, "evidence": "chat-2026-05-01", "note": "she said so"}, caller=ME)
    assert (got["citations"], got["strength"]) == (1, pytest.approx(0.55))
    again = brain.call("memory.cite", {"id": memory, "evidence": "chat-2026-05-01"}, caller=ME)
    assert again["relationId"] == got["relationId"] and again["citations"] == 1
    read = brain.call("memory.read", {"id": memory})
    assert read["citations"] == [
        {"relationId": got["relationId"], "evidence": "chat-2026-05-01", "note": "she said so"}
    ]
    with pytest.raises(R.EntityNotFoundError):
        brain.call("memory.cite", {"id": memory, "evidence": "no-such-entity"}, caller=ME)
    with pytest.raises(R.RecordNotFoundError):
        brain.call("memory.cite", {"id": "no-such-memory", "evidence": "chat-2026-05-01"}, caller=ME)
    with pytest.raises(R.FileNotFoundError):  # a path names a file (tests/test_memory_write.py cites one)
        brain.call("memory.cite", {"id": memory, "evidence": "/notes/alice.md"}, caller=ME)


def test_reinforce_caps_at_one_and_refuses_the_retired(brain):
    """reinforce adds amount (0.1 by default), capped at 1; a retired memory is RecordStateError."""
    memory = remember(brain, FACTS[1], strength=0.85)["id"]
    assert brain.call("memory.reinforce", {"id": memory}, caller=ME)["strength"] == pytest.approx(0.95)
    assert brain.call("memory.reinforce", {"id": memory, "amount": 0.5}, caller=ME)["strength"] == 1.0
    brain.call("memory.retire", {"id": memory, "reason": "moved schools"}, caller=ME)
    with pytest.raises(R.RecordStateError) as refused:
        brain.call("memory.reinforce", {"id": memory}, caller=ME)
    assert refused.value.fields["state"] == "retired"
    with pytest.raises(R.RecordNotFoundError):
        brain.call("memory.reinforce", {"id": "nope"}, caller=ME)


def test_retire_with_a_successor_supersedes_and_deletes_nothing(brain):
    """retire sets status retired (the row stays), supersededBy adds supersedes new → old; twice is refused."""
    old = remember(brain, "Bob lives in Leeds")["id"]
    new = remember(brain, "Bob lives in York")["id"]
    assert (
        brain.call("memory.retire", {"id": old, "reason": "moved", "supersededBy": new}, caller=ME)["status"]
        == "retired"
    )
    record = brain.call("memory.read", {"id": old})["memory"]
    assert (record["status"], record["supersededBy"], record["retiredReason"]) == ("retired", new, "moved")
    assert brain.call("memory.read", {"id": new})["supersedes"] == [old]
    with pytest.raises(R.RecordStateError):
        brain.call("memory.retire", {"id": old, "reason": "again"}, caller=ME)
    with pytest.raises(R.RecordNotFoundError):
        brain.call("memory.retire", {"id": new, "reason": "x", "supersededBy": "nope"}, caller=ME)
    assert brain.call("memory.stats")["byStatus"] == {"active": 1, "retired": 1}


# -- consolidate -------------------------------------------------------------------------------------------------


def test_consolidate_groups_by_meaning_keeps_the_strongest_and_a_dry_run_commits_nothing(brain):
    """Near-duplicates at cosine ≥ threshold merge into the strongest (taking the top strength); the rest are
    retired with supersededBy. A dry run answers the same groups and commits nothing."""
    texts = ["Alice is allergic to penicillin", "Alice has a penicillin allergy", "Alice is allergic to cats"]
    assert cosine(texts[0], texts[1]) >= 0.92 > cosine(texts[0], texts[2])
    assert cosine(texts[0], texts[1]) < 0.96
    weak = remember(brain, texts[0], strength=0.9, dedupe=False)["id"]
    strong = remember(brain, texts[1], strength=0.4, dedupe=False)["id"]
    brain.call("memory.reinforce", {"id": strong, "amount": 0.6}, caller=ME)  # now 1.0, the strongest
    remember(brain, texts[2])
    head = brain.head
    assert brain.call("memory.consolidate", {"threshold": 0.96}, caller=ME)["groups"] == []
    assert brain.head == head
    dry = brain.call("memory.consolidate", {"dryRun": True}, caller=ME)
    assert dry["examined"] == 3 and dry["groups"] == [{"kept": strong, "retired": [weak]}]
    assert brain.head == head
    done = brain.call("memory.consolidate", {}, caller=ME)
    assert done["groups"] == dry["groups"] and done["generation"] == head + 1
    assert brain.call("memory.read", {"id": weak})["memory"]["supersededBy"] == strong
    assert brain.call("memory.stats")["lastConsolidatedAt"] == done["timestamp"]
    assert brain.call("memory.consolidate", {}, caller=ME)["groups"] == []  # nothing left to merge: no commit
    assert brain.head == head + 1


def test_consolidate_without_a_model_refuses(brain, tmp_path, monkeypatch):
    """11.8: grouping by meaning needs the model: EmbeddingModelMissingError naming where it looked."""
    monkeypatch.setenv(embedder.OVERRIDE, str(tmp_path / "empty"))
    with pytest.raises(R.EmbeddingModelMissingError) as refused:
        brain.call("memory.consolidate", {}, caller=ME)
    assert refused.value.fields["searched"] == [str(tmp_path / "empty")]


def test_without_a_model_dedupe_is_the_same_normalised_text(brain, tmp_path, monkeypatch):
    """9.2: with no model, remember dedupes on the same normalised text, and recall serves its words alone."""
    monkeypatch.setenv(embedder.OVERRIDE, str(tmp_path / "empty"))
    kept = remember(brain, "Max the dog eats kibble")
    assert remember(brain, "max the DOG eats kibble!")["id"] == kept["id"]
    assert remember(brain, "Max the dog eats kibble twice")["deduplicated"] is False
    answer = brain.call("memory.recall", {"query": "what does Max eat? kibble"})
    assert answer["semantic"]["served"] is False and "EmbeddingModelMissingError" in answer["semantic"]["reason"]
    assert answer["memories"][0]["why"].keys() == {"text", "strength"}


# -- read and list -----------------------------------------------------------------------------------------------


def test_read_and_list(brain):
    """read takes exactly one of id and path; list is newest first and pages with its own cursor."""
    ids = [remember(brain, text)["id"] for text in FACTS]
    with pytest.raises(R.InvalidArgumentError):
        brain.call("memory.read", {})
    with pytest.raises(R.InvalidArgumentError):
        brain.call("memory.read", {"id": ids[0], "path": "/a.md"})
    with pytest.raises(R.RecordNotFoundError):
        brain.call("memory.read", {"path": "/notes/none.md"})
    brain.add({"type": "thing", "id": "plain"}, caller=ME)
    with pytest.raises(R.RecordNotFoundError):  # a row that is not a memory is no record
        brain.call("memory.read", {"id": "plain"})
    first = brain.call("memory.list", {"limit": 3})
    assert [m["id"] for m in first["memories"]] == ids[::-1][:3] and first["hasMore"] is True
    rest = brain.call("memory.list", {"limit": 3, "cursor": first["cursor"]})
    assert [m["id"] for m in rest["memories"]] == ids[::-1][3:] and rest["hasMore"] is False
    with pytest.raises(R.CursorInvalidError):
        brain.call("memory.list", {"limit": 3, "kind": "fact", "cursor": first["cursor"]})
