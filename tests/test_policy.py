"""Policy (DOORS 9.3, 11.9; docs/policy.md) in process: the rule lifecycle, enforcement on every engine write,
the audit, the listings and the check, on a real store."""

from __future__ import annotations

import pytest
from helpers import new_store

from brainy.contract import doors as D
from brainy.contract import refusals as R
from brainy.doors import policy
from brainy.engine import Brain
from brainy.store import keys as K

ALICE, BOB, OWNER = "person:alice", "person:bob", "person:owner"


@pytest.fixture
def brain(tmp_path):
    b = Brain.open(new_store(tmp_path), name="test")
    yield b
    b.close()


def refused(call, cls, **fields):
    """Run ``call``, expect ``cls``, and check the refusal's fields."""
    with pytest.raises(cls) as exc:
        call()
    for key, value in fields.items():
        assert exc.value.fields[key] == value, (key, exc.value.fields)
    return exc.value


def declare(brain, caller, doors, reason="no", **more):
    return brain.call("policy.declare", {"doors": doors, "reason": reason, **more}, caller=caller)


def enact(brain, subject, doors, reason="house rule", **more):
    """A tier-1 rule proposed by alice and ratified by the owner."""
    rid = brain.call("policy.propose", {"subject": subject, "doors": doors, "reason": reason, **more}, caller=ALICE)[
        "id"
    ]
    brain.call("policy.ratify", {"id": rid}, caller=OWNER)
    return rid


def test_the_governed_doors_are_derived_from_the_contract():
    """Every row-writing door (kind write with the W set) outside policy.* is governed; no read, mechanic, host
    or policy door is."""
    expected = {d.name for d in D.DOORS if d.kind == "write" and "W" in d.sets and d.layer != "policy"}
    assert policy.GOVERNED == expected
    assert {"add", "transact", "defineAggregate", "writeFile", "memory.write", "accords.file"} <= expected
    assert not any(
        policy.governs(d.name) for d in D.DOORS if d.kind == "read" or d.access == "service" or d.layer == "policy"
    )


def test_a_declared_rule_binds_its_declarer_at_once_and_no_one_else(brain):
    """Tier 2: in force immediately, its subject is the caller, it binds only the caller."""
    answer = declare(brain, ALICE, ["remove"], "I never delete")
    assert answer["id"] == "rule:i-never-delete" and answer["tier"] == 2 and answer["status"] == "active"
    brain.call("add", {"type": "thing", "id": "a"}, caller=ALICE)
    brain.call("add", {"type": "thing", "id": "b"}, caller=BOB)
    head = brain.head
    exc = refused(
        lambda: brain.call("remove", {"id": "a"}, caller=ALICE), R.GuardrailRefusedError, caller=ALICE, via=None
    )
    assert exc.fields["rules"] == [{"id": "rule:i-never-delete", "tier": 2, "reason": "I never delete"}]
    assert exc.status == 403
    assert brain.get("a")["entity"]["id"]  # not removed
    assert brain.head == head + 1  # the audit event, committed in the refused write's place
    assert brain.call("remove", {"id": "b"}, caller=BOB)["removedRelations"] == 0
    rules = brain.call("policy.rules", {})["rules"]
    assert [(r["id"], r["subject"], r["declaredBy"]) for r in rules] == [("rule:i-never-delete", [ALICE], ALICE)]


@pytest.mark.parametrize(
    "door, args, setup",
    [
        ("add", {"type": "thing"}, None),
        ("addMany", {"items": [{"type": "thing"}]}, None),
        ("update", {"id": "t", "metadata": {"x": 1}}, "entity"),
        ("updateMany", {"items": [{"id": "t", "metadata": {"x": 1}}]}, "entity"),
        ("remove", {"id": "t"}, "entity"),
        ("removeMany", {"ids": ["t"]}, "entity"),
        ("relate", {"from": "t", "to": "u", "type": "relatedTo"}, "entity"),
        ("relateMany", {"items": [{"from": "t", "to": "u", "type": "relatedTo"}]}, "entity"),
        ("updateRelation", {"id": "r", "weight": 0.5}, "relation"),
        ("unrelate", {"id": "r"}, "relation"),
        ("transact", {"ops": [{"door": "add", "args": {"type": "thing"}}]}, None),
        ("clear", {"confirm": "test"}, "entity"),
        (
            "defineAggregate",
            {"name": "n", "source": {"type": "thing"}, "groupBy": ["k"], "metrics": {"n": {"op": "count"}}},
            None,
        ),
        ("removeAggregate", {"name": "n"}, "aggregate"),
    ],
)
def test_every_engine_write_is_governed(brain, door, args, setup):
    """A tier-1 rule over a door stops that door for its subject, whatever the door: nothing it staged lands,
    and the audit names the door."""
    if setup in ("entity", "relation"):
        brain.call("add", {"type": "thing", "id": "t"}, caller=BOB)
        brain.call("add", {"type": "thing", "id": "u"}, caller=BOB)
    if setup == "relation":
        brain.call("relate", {"from": "t", "to": "u", "type": "relatedTo", "id": "r"}, caller=BOB)
    if setup == "aggregate":
        brain.call(
            "defineAggregate",
            {"name": "n", "source": {"type": "thing"}, "groupBy": ["k"], "metrics": {"n": {"op": "count"}}},
            caller=BOB,
        )
    rid = enact(brain, BOB, [door])
    before = brain.call("counts", {})
    refused(lambda: brain.call(door, args, caller=BOB), R.GuardrailRefusedError, caller=BOB)
    after = brain.call("counts", {})
    assert (after["entities"], after["relationships"], after["byType"]) == (
        before["entities"],
        before["relationships"],
        before["byType"],
    )
    events = brain.call("policy.audit", {})["events"]
    assert [(e["door"], e["caller"], e["rules"]) for e in events] == [(door, BOB, [rid])]
    brain.call(door, args, caller=ALICE)  # not a subject: the write lands


def test_a_write_cannot_lift_the_rules_that_govern_it(brain):
    """The rules in force are those committed before the write: a clear or a remove that would take the rule
    rows with it is judged by them, and refused."""
    rid = enact(brain, BOB, ["clear", "remove"], "keep everything")
    refused(lambda: brain.call("clear", {"confirm": "test"}, caller=BOB), R.GuardrailRefusedError)
    refused(lambda: brain.call("remove", {"id": rid}, caller=BOB), R.GuardrailRefusedError)
    assert [r["id"] for r in brain.call("policy.rules", {})["rules"]] == [rid]


def test_patterns_roles_and_exceptions(brain):
    """A trailing * matches a prefix; '*' binds everyone but ``except``; a role:<name> subject matches only the
    caller's asserted roles."""
    enact(brain, "*", ["add*"], "no adding", **{"except": [OWNER, "role:admin"]})
    enact(brain, "role:intern", ["update"], "interns do not edit")
    refused(lambda: brain.call("addMany", {"items": [{"type": "thing"}]}, caller=BOB), R.GuardrailRefusedError)
    refused(lambda: brain.call("add", {"type": "thing"}, caller=BOB), R.GuardrailRefusedError)
    brain.call("add", {"type": "thing", "id": "o"}, caller=OWNER)
    brain.call("add", {"type": "thing"}, caller=BOB, via="service:ingest", roles=("admin",))
    brain.call("update", {"id": "o", "data": "x"}, caller=BOB)  # no intern role asserted
    exc = refused(
        lambda: brain.call("update", {"id": "o", "data": "y"}, caller=BOB, via="service:ingest", roles=("intern",)),
        R.GuardrailRefusedError,
        via="service:ingest",
    )
    assert [r["reason"] for r in exc.fields["rules"]] == ["interns do not edit"]


def test_where_is_tested_against_the_row_the_write_would_produce(brain):
    """An add or update is judged by the row it would write; a removal by the row as it was."""
    enact(brain, BOB, ["add", "update", "remove"], "no secrets", where={"secret": True})
    brain.call("add", {"type": "thing", "id": "open", "metadata": {"secret": False}}, caller=BOB)
    refused(
        lambda: brain.call("add", {"type": "thing", "metadata": {"secret": True}}, caller=BOB), R.GuardrailRefusedError
    )
    refused(
        lambda: brain.call("update", {"id": "open", "metadata": {"secret": True}}, caller=BOB), R.GuardrailRefusedError
    )
    brain.call("add", {"type": "thing", "id": "hidden", "metadata": {"secret": True}}, caller=ALICE)
    refused(lambda: brain.call("remove", {"id": "hidden"}, caller=BOB), R.GuardrailRefusedError)
    assert brain.call("remove", {"id": "open"}, caller=BOB)["id"]
    audit = brain.call("policy.audit", {})["events"]
    # the minted id of a refused add names nothing; an update or removal names the row it aimed at
    assert [e.get("target") for e in audit] == [None, K.resolve("open")[0], K.resolve("hidden")[0]]


def test_reads_and_policy_doors_are_never_governed(brain):
    """A rule naming every door stops writes only: reads answer, and policy doors still work for its subject."""
    enact(brain, BOB, ["*"], "bob is read-only")
    brain.call("add", {"type": "thing", "id": "x"}, caller=ALICE)
    assert brain.call("get", "x")["entity"]["key"] == "x"
    assert brain.call("find", {"query": "x"}, caller=BOB) is not None
    assert declare(brain, BOB, ["update"], "and no updates")["status"] == "active"
    refused(lambda: brain.call("add", {"type": "thing"}, caller=BOB), R.GuardrailRefusedError)


def test_retiring_own_rules_others_rules_and_proposals(brain):
    """Own tier-2 and own proposals retire at once; another's tier-2 is not-declarer, another's proposal
    not-proposer; a retired rule is already-retired; an unknown id is RecordNotFoundError."""
    mine = declare(brain, ALICE, ["remove"], "mine")["id"]
    refused(
        lambda: brain.call("policy.retire", {"id": mine, "reason": "x"}, caller=BOB),
        R.RecordStateError,
        state="active",
        reason="not-declarer",
    )
    assert brain.call("policy.retire", {"id": mine, "reason": "done"}, caller=ALICE)["status"] == "retired"
    refused(
        lambda: brain.call("policy.retire", {"id": mine, "reason": "x"}, caller=ALICE),
        R.RecordStateError,
        state="retired",
        reason="already-retired",
    )
    proposal = brain.call("policy.propose", {"subject": [BOB], "doors": ["add"], "reason": "p"}, caller=ALICE)["id"]
    refused(
        lambda: brain.call("policy.retire", {"id": proposal, "reason": "x"}, caller=BOB),
        R.RecordStateError,
        reason="not-proposer",
    )
    assert brain.call("policy.retire", {"id": proposal, "reason": "no"}, caller=ALICE)["status"] == "retired"
    e = refused(
        lambda: brain.call("policy.retire", {"id": "rule:nothing", "reason": "x"}, caller=ALICE),
        R.RecordNotFoundError,
        id="rule:nothing",
    )
    assert e.status == 404
    brain.call("add", {"type": "thing", "id": "plain"}, caller=ALICE)
    refused(lambda: brain.call("policy.retire", {"id": "plain", "reason": "x"}, caller=ALICE), R.RecordNotFoundError)
    refused(lambda: brain.call("policy.ratify", {"id": "rule:nothing"}, caller=OWNER), R.RecordNotFoundError)
    refused(lambda: brain.call("policy.unlock", {"id": "rule:nothing"}, caller=OWNER), R.RecordNotFoundError)
    assert {r["id"]: r["status"] for r in brain.call("policy.rules", {"status": "retired"})["rules"]} == {
        mine: "retired",
        proposal: "retired",
    }


def test_retirement_proposals_take_effect_on_ratify(brain):
    """retire on an active tier-1 rule files a retirement proposal (still active); ratify retires it; a second
    proposal while one is pending, or ratifying an active rule with none, is RecordStateError."""
    rid = enact(brain, BOB, ["add"])
    assert (
        brain.call("policy.retire", {"id": rid, "reason": "too strict"}, caller=BOB)["status"] == "retirement-proposed"
    )
    refused(lambda: brain.call("add", {"type": "thing"}, caller=BOB), R.GuardrailRefusedError)  # still in force
    refused(
        lambda: brain.call("policy.retire", {"id": rid, "reason": "again"}, caller=BOB),
        R.RecordStateError,
        reason="retirement-pending",
    )
    (rule,) = brain.call("policy.rules", {})["rules"]
    assert rule["retirement"]["proposedBy"] == BOB and rule["retirement"]["reason"] == "too strict"
    done = brain.call("policy.ratify", {"id": rid, "note": "ok"}, caller=OWNER)
    assert done["status"] == "retired" and done["ratifiedBy"] == OWNER
    brain.call("add", {"type": "thing"}, caller=BOB)
    refused(
        lambda: brain.call("policy.ratify", {"id": rid}, caller=OWNER),
        R.RecordStateError,
        state="retired",
        reason="not-a-proposal",
    )
    active = enact(brain, BOB, ["update"], "another")
    refused(
        lambda: brain.call("policy.ratify", {"id": active}, caller=OWNER),
        R.RecordStateError,
        state="active",
        reason="not-a-proposal",
    )
    tier2 = declare(brain, ALICE, ["add"])["id"]
    refused(
        lambda: brain.call("policy.ratify", {"id": tier2}, caller=OWNER), R.RecordStateError, reason="not-a-proposal"
    )


def test_a_proposal_is_inert_until_ratified(brain):
    """propose makes nothing active: the write lands until the owner ratifies, then refuses; ratifiedBy is the
    ratifying caller."""
    rid = brain.call("policy.propose", {"subject": BOB, "doors": ["add"], "reason": "wait"}, caller=ALICE)
    assert rid["tier"] == 1 and rid["status"] == "proposed"
    brain.call("add", {"type": "thing"}, caller=BOB)
    assert brain.call("policy.check", {"door": "add"}, caller=BOB)["allowed"] is True
    ratified = brain.call("policy.ratify", {"id": rid["id"]}, caller=OWNER)
    assert ratified == {**ratified, "id": rid["id"], "status": "active", "ratifiedBy": OWNER}
    refused(lambda: brain.call("add", {"type": "thing"}, caller=BOB), R.GuardrailRefusedError)


def test_freeze_locks_and_unlock_lifts(brain):
    """freeze locks every active tier-1 rule (and any ratified while frozen); a locked rule takes no retirement
    (PolicyLockedError, 423, naming the rule and the freeze); unlock with an id lifts one lock, without one the
    freeze and every lock."""
    a = enact(brain, BOB, ["add"], "a")
    mine = declare(brain, BOB, ["update"], "own")["id"]
    frozen = brain.call("policy.freeze", {"reason": "audit week"}, caller=OWNER)
    assert frozen["frozen"] is True and frozen["locked"] == [a]
    b = enact(brain, BOB, ["remove"], "b")
    listed = brain.call("policy.rules", {"tier": 1})
    assert listed["frozen"] is True and {r["id"]: r["locked"] for r in listed["rules"]} == {a: True, b: True}
    exc = refused(
        lambda: brain.call("policy.retire", {"id": a, "reason": "x"}, caller=BOB),
        R.PolicyLockedError,
        rule=a,
        frozen=True,
    )
    assert exc.status == 423
    assert brain.call("policy.retire", {"id": mine, "reason": "mine"}, caller=BOB)["status"] == "retired"
    one = brain.call("policy.unlock", {"id": a}, caller=OWNER)
    assert one["unlocked"] == [a] and one["frozen"] is True
    assert brain.call("policy.retire", {"id": a, "reason": "x"}, caller=BOB)["status"] == "retirement-proposed"
    refused(lambda: brain.call("policy.retire", {"id": b, "reason": "x"}, caller=BOB), R.PolicyLockedError)
    every = brain.call("policy.unlock", {}, caller=OWNER)
    assert every["unlocked"] == [b] and every["frozen"] is False
    assert brain.call("policy.rules", {})["frozen"] is False


def test_a_retirement_proposed_before_a_freeze_waits_for_the_unlock(brain):
    """A rule locked after its retirement was proposed is not retired by ratify until unlocked."""
    rid = enact(brain, BOB, ["add"])
    brain.call("policy.retire", {"id": rid, "reason": "x"}, caller=BOB)
    brain.call("policy.freeze", {}, caller=OWNER)
    refused(lambda: brain.call("policy.ratify", {"id": rid}, caller=OWNER), R.RecordStateError, reason="locked")
    brain.call("policy.unlock", {}, caller=OWNER)
    assert brain.call("policy.ratify", {"id": rid}, caller=OWNER)["status"] == "retired"


@pytest.mark.parametrize(
    "door, args, field",
    [
        ("policy.declare", {"doors": ["get"], "reason": "r"}, "doors[0]"),
        ("policy.declare", {"doors": ["policy.retire"], "reason": "r"}, "doors[0]"),
        ("policy.declare", {"doors": ["nosuch*"], "reason": "r"}, "doors[0]"),
        ("policy.declare", {"doors": [], "reason": "r"}, "doors"),
        ("policy.declare", {"doors": ["add"], "reason": "  "}, "reason"),
        ("policy.declare", {"doors": ["add"], "reason": "r", "where": {"x": {"nosuchop": 1}}}, "where"),
        ("policy.propose", {"subject": "bob", "doors": ["add"], "reason": "r"}, "subject[0]"),
        ("policy.propose", {"subject": "role:", "doors": ["add"], "reason": "r"}, "subject[0]"),
        ("policy.propose", {"subject": "*", "except": ["*x"], "doors": ["add"], "reason": "r"}, "except[0]"),
        ("policy.rules", {"status": "gone"}, "status"),
        ("policy.check", {"door": "nosuch"}, "door"),
        ("policy.audit", {"since": "yesterday"}, "since"),
    ],
)
def test_malformed_policy_arguments_refuse_by_name(brain, door, args, field):
    """A rule that could bind nothing, a subject that is no principal, a bad where, status or instant:
    InvalidArgumentError naming the field, and nothing committed."""
    head = brain.head
    exc = refused(lambda: brain.call(door, args, caller=ALICE), R.InvalidArgumentError)
    assert exc.fields["field"].startswith(field), exc.fields
    assert brain.head == head


def test_a_policy_write_needs_a_caller(brain):
    """In process no credential stands behind a call: a policy write without caller= refuses."""
    refused(
        lambda: brain.call("policy.declare", {"doors": ["add"], "reason": "r"}), R.InvalidArgumentError, field="caller"
    )


def test_check_answers_as_enforcement_would(brain):
    """check stages the write as the commit path does (nothing commits), tests ``id``'s row as it stands,
    defaults to the caller bound on the call, and reports a where-rule with nothing to test as one that may
    stop the write."""
    rid = enact(brain, BOB, ["add", "remove"], "no people", where={"type": "person"})
    brain.call("add", {"type": "person", "id": "p"}, caller=ALICE)
    brain.call("add", {"type": "thing", "id": "t"}, caller=ALICE)
    head = brain.head
    stop = brain.call("policy.check", {"door": "add", "args": {"type": "person"}}, caller=BOB)
    assert stop == {"allowed": False, "caller": BOB, "rules": [{"id": rid, "tier": 1, "reason": "no people"}]}
    assert brain.call("policy.check", {"door": "add", "args": {"type": "thing"}}, caller=BOB)["allowed"] is True
    assert brain.call("policy.check", {"door": "remove", "id": "p"}, caller=BOB)["allowed"] is False
    assert brain.call("policy.check", {"door": "remove", "id": "t"}, caller=BOB)["allowed"] is True
    assert brain.call("policy.check", {"door": "remove"}, caller=BOB)["allowed"] is False  # may stop
    assert brain.call("policy.check", {"door": "add", "args": {"type": "person"}, "caller": ALICE}, caller=BOB) == {
        "allowed": True,
        "caller": ALICE,
        "rules": [],
    }
    assert brain.call("policy.check", {"door": "get"}, caller=BOB)["allowed"] is True  # reads are never governed
    refused(lambda: brain.call("policy.check", {"door": "add"}), R.InvalidArgumentError, field="caller")
    assert brain.head == head


def test_audit_filters_and_pages(brain):
    """audit answers the refused writes oldest first, filtered by caller, door, rule and since, paged by a
    cursor pinned to its first page's generation."""
    a = enact(brain, "*", ["add"], "no adds")
    b = declare(brain, BOB, ["update"], "bob no updates")["id"]
    for caller in (ALICE, BOB, ALICE):
        refused(
            lambda: brain.call("add", {"type": "thing"}, caller=caller, via="service:ingest"), R.GuardrailRefusedError
        )
    everything = brain.call("policy.audit", {})
    assert [(e["caller"], e["door"], e["via"]) for e in everything["events"]] == [
        (ALICE, "add", "service:ingest"),
        (BOB, "add", "service:ingest"),
        (ALICE, "add", "service:ingest"),
    ]
    assert everything["hasMore"] is False and everything["cursor"] is None
    assert len(brain.call("policy.audit", {"caller": ALICE})["events"]) == 2
    assert brain.call("policy.audit", {"rule": b})["events"] == []
    assert len(brain.call("policy.audit", {"rule": a, "door": "add"})["events"]) == 3
    later = everything["events"][1]["at"]
    assert all(e["at"] >= later for e in brain.call("policy.audit", {"since": later})["events"])
    first = brain.call("policy.audit", {"limit": 2})
    assert first["hasMore"] is True and len(first["events"]) == 2
    rest = brain.call("policy.audit", {"limit": 2, "cursor": first["cursor"]})
    assert [e["id"] for e in first["events"] + rest["events"]] == [e["id"] for e in everything["events"]]
    refused(lambda: brain.call("policy.audit", {"cursor": first["cursor"], "caller": BOB}), R.CursorInvalidError)
    refused(lambda: brain.call("policy.rules", {"cursor": first["cursor"]}), R.CursorInvalidError)


def test_rules_list_filters_and_pages(brain):
    """rules lists in making order, filtered by status (active by default), tier and subject, and pages."""
    ids = [declare(brain, ALICE, ["add"], f"rule {i}")["id"] for i in range(5)]
    proposal = brain.call("policy.propose", {"subject": [BOB], "doors": ["add"], "reason": "p"}, caller=ALICE)["id"]
    assert [r["id"] for r in brain.call("policy.rules", {})["rules"]] == ids
    assert [r["id"] for r in brain.call("policy.rules", {"status": "proposed"})["rules"]] == [proposal]
    assert [r["id"] for r in brain.call("policy.rules", {"status": "all", "tier": 1})["rules"]] == [proposal]
    assert [r["id"] for r in brain.call("policy.rules", {"status": "all", "subject": BOB})["rules"]] == [proposal]
    page = brain.call("policy.rules", {"limit": 2})
    seen = [r["id"] for r in page["rules"]]
    while page["hasMore"]:
        page = brain.call("policy.rules", {"limit": 2, "cursor": page["cursor"]})
        seen += [r["id"] for r in page["rules"]]
    assert seen == ids
    rule = brain.call("policy.rules", {"limit": 1})["rules"][0]
    assert set(rule) == {
        "id",
        "tier",
        "status",
        "subject",
        "except",
        "doors",
        "reason",
        "declaredBy",
        "locked",
        "createdAt",
        "generation",
    }


def test_rules_and_audit_survive_a_reopen_and_time_travel(tmp_path):
    """Rules are rows: replayed on open, and readable at a past generation through asOf."""
    path = new_store(tmp_path)
    with Brain.open(path, name="test") as brain:
        rid = enact(brain, BOB, ["add"])
        at = brain.head
        refused(lambda: brain.call("add", {"type": "thing"}, caller=BOB), R.GuardrailRefusedError)
        brain.call("policy.retire", {"id": rid, "reason": "x"}, caller=BOB)
        brain.call("policy.ratify", {"id": rid}, caller=OWNER)
    with Brain.open(path, name="test") as brain:
        assert brain.call("policy.rules", {})["rules"] == []
        assert len(brain.call("policy.audit", {})["events"]) == 1
        past = brain.call("asOf", {"generation": at, "read": {"door": "policy.rules"}})["result"]
        assert [r["id"] for r in past["rules"]] == [rid]
        brain.call("add", {"type": "thing"}, caller=BOB)


def test_rule_rows_are_internal_and_keep_their_keys_away_from_callers(brain):
    """Profile rows are internal (find shows them only when asked); a caller's own row keyed rule:<slug> is
    never overwritten: the new rule takes the next slug."""
    brain.call("add", {"type": "thing", "id": "rule:careful"}, caller=ALICE)
    rid = declare(brain, ALICE, ["add"], "careful")["id"]
    assert rid == "rule:careful-2"
    assert brain.get("rule:careful")["entity"]["type"] == "thing"
    assert brain.call("find", {"where": {"subtype": "policy.rule"}})["results"] == []
    hidden = brain.call("find", {"where": {"subtype": "policy.rule"}, "visibility": "all"})
    assert [r["entity"]["key"] for r in hidden["results"]] == [rid]
    assert hidden["results"][0]["entity"]["visibility"] == "internal"


def test_engine_doors_cannot_change_a_rule_row(brain):
    """DOORS 2.3: update, and add with upsert, refuse a row a layer wrote (reserved-subtype), so no ordinary
    write rewrites a rule; remove may still remove it, and a removed rule binds no one."""
    rid = enact(brain, BOB, ["addMany"], "no batches")
    for door, args in (
        ("update", {"id": rid, "metadata": {"doors": []}}),
        ("add", {"type": "thing", "id": rid, "upsert": True}),
    ):
        refused(
            lambda: brain.call(door, args, caller=ALICE), R.InvalidArgumentError, field="id", reason="reserved-subtype"
        )
    assert brain.call("policy.rules", {})["rules"][0]["doors"] == ["addMany"]
    brain.call("remove", {"id": rid}, caller=ALICE)
    brain.call("addMany", {"items": [{"type": "thing"}]}, caller=BOB)


@pytest.mark.parametrize(
    "door, args, setup",
    [
        ("writeFile", {"path": "/notes/a.txt", "content": "hello", "createParents": True}, None),
        ("appendFile", {"path": "/f.txt", "content": " more"}, "file"),
        ("mkdir", {"path": "/d"}, None),
        ("rmdir", {"path": "/d"}, "dir"),
        ("unlink", {"path": "/f.txt"}, "file"),
        ("rename", {"path": "/f.txt", "to": "/g.txt"}, "file"),
        ("move", {"path": "/f.txt", "to": "/d/f.txt"}, "file"),
        ("copy", {"path": "/f.txt", "to": "/h.txt"}, "file"),
        ("setxattr", {"path": "/f.txt", "name": "colour", "value": "red"}, "file"),
        ("removexattr", {"path": "/f.txt", "name": "mood"}, "xattr"),
    ],
)
def test_every_vfs_write_is_governed(brain, door, args, setup):
    """The file doors are row-writing doors like any other: a rule over one stops it for its subject, no file
    or directory row moves, and the audit names the door."""
    if setup in ("file", "xattr"):
        brain.call("writeFile", {"path": "/f.txt", "content": "text"}, caller=BOB)
        brain.call("mkdir", {"path": "/d"}, caller=BOB)
    if setup == "xattr":
        brain.call("setxattr", {"path": "/f.txt", "name": "mood", "value": "calm"}, caller=BOB)
    if setup == "dir":
        brain.call("mkdir", {"path": "/d"}, caller=BOB)

    def files() -> dict[str, int]:
        return {
            r["id"]: r["generation"] for r in brain.at().entities() if str(r.get("subtype") or "").startswith("vfs.")
        }

    rid = enact(brain, BOB, [door])
    before = files()
    refused(lambda: brain.call(door, args, caller=BOB), R.GuardrailRefusedError, caller=BOB)
    assert files() == before
    events = brain.call("policy.audit", {})["events"]
    assert [(e["door"], e["caller"], e["rules"]) for e in events] == [(door, BOB, [rid])]
    brain.call(door, args, caller=ALICE)  # not a subject: the write lands
    assert files() != before
