"""policy.check and the commit path share one judge (DOORS 9.3; docs/policy.md, "Enforcement"): check stages the
write it is asked about by the commit path's own steps, never committed, and answers the verdict the commit path
reaches on the same rows. On a real store: the cases that once disagreed, then a property over random rules and
random writes on the governed doors, each check followed by the write sent for real."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pytest
from helpers import new_store
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

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


# -- the property: check's verdict is the commit's ----------------------------------------------------------------

ROLES = ("editor", "intern")
SUBJECTS = ("*", CALLER, OTHER, "role:editor", "role:intern")
DOORS = ("add", "update", "memory.remember", "memory.*", "writeFile", "vfs", "add*")
TAGS = ("secret", "misc", "weather")
WHERES = (
    None,
    None,
    {"tags": "secret"},
    {"tags": {"contains": "misc"}},
    {"kind": "fact"},
    {"kind": "preference"},
    {"color": "red"},
    {"type": "person"},
    {"contentType": "text/markdown"},
    {"size": {"gt": 40}},
)
TEXTS = ("the vault code is 1234", "The vault code is 1234.", "the sky is blue", "I like green tea")


def _where(where: dict[str, Any] | None) -> dict[str, Any]:
    return {} if where is None else {"where": where}


rules = st.lists(
    st.one_of(
        st.fixed_dictionaries(
            {
                "tier": st.just(2),
                "by": st.sampled_from((CALLER, CALLER, OTHER)),
                "doors": st.lists(st.sampled_from(DOORS), min_size=1, max_size=3, unique=True),
                "where": st.sampled_from(WHERES),
            }
        ),
        st.fixed_dictionaries(
            {
                "tier": st.just(1),
                "subject": st.lists(st.sampled_from(SUBJECTS), min_size=1, max_size=2, unique=True),
                "except": st.sampled_from(((), (CALLER,), ("role:intern",))),
                "doors": st.lists(st.sampled_from(DOORS), min_size=1, max_size=3, unique=True),
                "where": st.sampled_from(WHERES),
                "ratified": st.sampled_from((True, True, False)),
            }
        ),
    ),
    min_size=1,
    max_size=4,
)
tags = st.lists(st.sampled_from(TAGS), max_size=2, unique=True)
metadata = st.fixed_dictionaries(
    {"tags": tags}, optional={"kind": st.sampled_from(("fact", "note")), "color": st.sampled_from(("red", "blue"))}
)
writes = st.one_of(
    st.tuples(
        st.just("add"),
        st.fixed_dictionaries(
            {"type": st.sampled_from(("thing", "person")), "metadata": metadata, "data": st.sampled_from(TEXTS)}
        ),
    ),
    st.tuples(
        st.just("update"),
        st.fixed_dictionaries({"id": st.sampled_from(("seed", "seed", "missing")), "metadata": metadata}),
    ),
    st.tuples(
        st.just("memory.remember"),
        st.fixed_dictionaries(
            {"text": st.sampled_from(TEXTS), "kind": st.sampled_from(("fact", "preference")), "tags": tags}
        ),
    ),
    st.tuples(
        st.just("writeFile"),
        st.fixed_dictionaries(
            {
                "path": st.sampled_from(("/notes/a.md", "/notes/a.txt", "/notes/seed.md", "/other/b.txt")),
                "content": st.sampled_from(("short", "a longer line of text that runs past forty bytes")),
                "createParents": st.booleans(),
            }
        ),
    ),
)
who = st.fixed_dictionaries(
    {
        "roles": st.sampled_from(((), ("editor",), ("intern",), ROLES)),
        "via": st.sampled_from((None, "service:ingest")),
    }
)


def _seed(brain: Brain) -> None:
    """Rows the writes can touch, made before any rule: a row to update, a kept secret to repeat, a file."""
    brain.call(
        "add",
        {"type": "thing", "id": "seed", "metadata": {"tags": ["misc"], "kind": "note", "color": "red"}},
        caller=SEEDER,
    )
    brain.call("memory.remember", {"text": TEXTS[0], "kind": "fact", "tags": ["secret"]}, caller=SEEDER)
    brain.call("writeFile", {"path": "/notes/seed.md", "content": "seed", "createParents": True}, caller=SEEDER)


def _enact(brain: Brain, rule: dict[str, Any], n: int) -> None:
    reason = f"rule {n}"
    if rule["tier"] == 2:
        brain.call(
            "policy.declare", {"doors": rule["doors"], "reason": reason, **_where(rule["where"])}, caller=rule["by"]
        )
        return
    proposal = {"subject": rule["subject"], "doors": rule["doors"], "reason": reason, **_where(rule["where"])}
    if rule["except"]:
        proposal["except"] = list(rule["except"])
    rid = brain.call("policy.propose", proposal, caller=OTHER)["id"]
    if rule["ratified"]:
        brain.call("policy.ratify", {"id": rid}, caller=OWNER)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rules, st.lists(writes, min_size=1, max_size=2), who)
def test_check_answers_what_the_write_then_meets(drawn_rules, drawn_writes, caller):
    """For any rules (tier 1 ratified or inert, tier 2 by the caller or another; subjects '*', principals and
    roles; exact doors, prefixes and vfs; a where or none) and any writes on add, update, memory.remember and
    writeFile: check's ``allowed`` is whether the same write, sent next, is stopped by GuardrailRefusedError,
    naming the same rules; a check commits nothing; a refused write lands nothing but the policy's record."""
    with tempfile.TemporaryDirectory() as folder:
        brain = Brain.open(new_store(Path(folder)), name="test")
        try:
            _seed(brain)
            for n, rule in enumerate(drawn_rules):
                _enact(brain, rule, n)
            for door, args in drawn_writes:
                head, disk = brain.head, brain.blobs.disk_bytes()
                verdict = check(brain, door, args, caller=CALLER, **caller)
                assert (brain.head, brain.blobs.disk_bytes()) == (head, disk)  # a check commits and stores nothing
                kind, answer = outcome(brain, door, args, caller=CALLER, **caller)
                event(f"{door}: {kind}")  # --hypothesis-show-statistics: how often each door met each end
                assert verdict["allowed"] == (kind != "stopped"), (door, args, verdict, kind, answer)
                if kind == "stopped":
                    assert answer.fields["rules"] == verdict["rules"]
                    assert landed_since(brain, head) == []
                elif kind == "own":
                    assert verdict["rules"] == [] and brain.head == head
        finally:
            brain.close()
