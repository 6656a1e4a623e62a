"""policy.check and the commit path share one judge (DOORS 9.3; docs/policy.md, "Enforcement"): check stages the
write it is asked about by the commit path's own steps, never committed, and answers the verdict the commit path
reaches on the same rows. On a real store: the cases that once disagreed, each check followed by the write sent
for real."""

from __future__ import annotations

from typing import Any

import pytest
from helpers import new_store

from brainy.contract import refusals as R
from brainy.engine import Brain

CALLER, OTHER, OWNER, SEEDER = "agent:careful", "person:bob", "person:owner", "person:seed"
POLICY_ROWS = {"policy.refusal", "policy.board"}  # what a refused write commits in its place


@pytest.fixture
def brain(tmp_path):
    b = Brain.open(new_store(tmp_path), name="test")
    yield b
    b.close()


def check(brain: Brain, door: str, args: dict[str, Any], **who: Any) -> dict[str, Any]:
    return brain.call("policy.check", {"door": door, "args": args}, **who)


def outcome(brain: Brain, door: str, args: dict[str, Any], **who: Any) -> tuple[str, Any]:
    """The write sent for real: ("committed", answer), ("stopped", the guardrail refusal) or ("own", its own
    refusal)."""
    try:
        return "committed", brain.call(door, args, **who)
    except R.GuardrailRefusedError as exc:
        return "stopped", exc
    except R.Refusal as exc:
        return "own", exc


def landed_since(brain: Brain, generation: int) -> list[dict[str, Any]]:
    """Every row moved since ``generation`` that is not the policy's own bookkeeping of a refusal."""
    frames = brain.call("changes", {"since": generation, "limit": 1000})["frames"]
    return [f for f in frames if not (f["kind"] == "entity" and (f.get("entity") or {}).get("subtype") in POLICY_ROWS)]


def test_check_allows_a_remember_its_tag_rule_does_not_match(brain):
    """The case measured by a user: one tier-2 rule on memory.remember whose where matches one tag. A remember
    without that tag is allowed by check and committed for real; one with it is stopped by both. (check once
    staged the remember with no caller, the rule refused it, and a where-rule over rows unknown said "stop".)"""
    rule = brain.call(
        "policy.declare",
        {"doors": ["memory.remember"], "where": {"tags": "secret"}, "reason": "no secrets"},
        caller=CALLER,
    )["id"]
    plain = {"text": "the sky is blue today", "kind": "fact", "tags": ["weather"]}
    assert check(brain, "memory.remember", plain, caller=CALLER) == {"allowed": True, "caller": CALLER, "rules": []}
    assert outcome(brain, "memory.remember", plain, caller=CALLER)[0] == "committed"
    secret = {"text": "the vault code is 1234", "kind": "fact", "tags": ["secret"]}
    verdict = check(brain, "memory.remember", secret, caller=CALLER)
    assert verdict == {"allowed": False, "caller": CALLER, "rules": [{"id": rule, "tier": 2, "reason": "no secrets"}]}
    kind, exc = outcome(brain, "memory.remember", secret, caller=CALLER)
    assert kind == "stopped" and exc.fields["rules"] == verdict["rules"]


def test_check_judges_a_remember_that_would_reinforce_a_tagged_memory(brain):
    """A remember that repeats a kept memory reinforces that memory, whose tags it then carries: the rows judged
    are the reinforced memory's, found by the same dedupe the commit runs, so an untagged repeat of a secret is
    stopped by check and by the commit alike."""
    brain.call("memory.remember", {"text": "the vault code is 1234", "tags": ["secret"]}, caller=SEEDER)
    brain.call("policy.declare", {"doors": ["memory.*"], "where": {"tags": "secret"}, "reason": "no"}, caller=CALLER)
    repeat = {"text": "The vault code is 1234.", "tags": ["misc"]}
    assert check(brain, "memory.remember", repeat, caller=CALLER)["allowed"] is False
    assert outcome(brain, "memory.remember", repeat, caller=CALLER)[0] == "stopped"
    other = {"text": "the garden gate is green", "tags": ["misc"]}
    assert check(brain, "memory.remember", other, caller=CALLER)["allowed"] is True
    assert outcome(brain, "memory.remember", other, caller=CALLER)[0] == "committed"


def test_check_stages_a_file_write_without_storing_it(brain):
    """A file write is staged as the commit stages it (its content measured, its rows made) so a where on the
    file's row is judged; the check commits nothing and stores no content."""
    brain.call(
        "policy.declare",
        {"doors": ["vfs"], "where": {"contentType": "text/markdown"}, "reason": "no md"},
        caller=CALLER,
    )
    head, disk = brain.head, brain.blobs.disk_bytes()
    markdown = {"path": "/notes/plan.md", "content": "# a plan\n" * 100, "createParents": True}
    text = {**markdown, "path": "/notes/plan.txt"}
    assert check(brain, "writeFile", markdown, caller=CALLER)["allowed"] is False
    assert check(brain, "writeFile", text, caller=CALLER)["allowed"] is True
    assert (brain.head, brain.blobs.disk_bytes()) == (head, disk)
    assert outcome(brain, "writeFile", markdown, caller=CALLER)[0] == "stopped"
    assert outcome(brain, "writeFile", text, caller=CALLER)[0] == "committed"


def test_a_write_refused_on_its_own_terms_is_not_stopped_by_the_rules(brain):
    """The commit path asks the rules only of a write its rule staged; one that refuses on its own terms (an
    update of no row) is refused by that, so check answers that no rule stops it, and nothing lands."""
    brain.call("policy.declare", {"doors": ["update"], "reason": "I never edit"}, caller=CALLER)
    missing = {"id": "nothing-here", "data": "x"}
    assert check(brain, "update", missing, caller=CALLER) == {"allowed": True, "caller": CALLER, "rules": []}
    head = brain.head
    kind, exc = outcome(brain, "update", missing, caller=CALLER)
    assert kind == "own" and isinstance(exc, R.EntityNotFoundError) and brain.head == head
    brain.call("add", {"type": "thing", "id": "t"}, caller=SEEDER)
    assert check(brain, "update", {"id": "t", "data": "x"}, caller=CALLER)["allowed"] is False
