"""The accords board on a real store, in process (DOORS 9.1, 11.9; seed 000, "The accords reads";
docs/accords.md).

The nine kinds as rows, their ids (thread numbers, slugs, bare ids probed under every prefix), the eight writes
and every rule: A1 (one live mandate, superseded in the same commit, a second one refused by name), A2 (a gap
refuses), A4 (closed records take no turns), R16 (the presence stamp, written only by a writer for its own
caller), the caller law, the guardrails; the five reads in protocol order, with the lab lens in the query, the
exact-id law of search and its semantic half, and each answer's cost checked against the rows actually read.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest

from brainy.contract import refusals as R
from brainy.doors import query
from brainy.doors.accords import ids
from brainy.doors.accords import model as M
from brainy.doors.writes import _stamp
from brainy.engine import init_store
from brainy.engine.brain import Brain
from brainy.index import embedder
from brainy.index.snapshot import Snapshot

SCOUT, CRITIC, OWNER = "agent:scout", "agent:critic", "person:owner@example.com"
WRITES = {
    "accords.file": {"title": "t", "text": "x"},
    "accords.postRound": {"parent": "ACC-1", "text": "x"},
    "accords.postUpdate": {"about": "ACC-1", "text": "x"},
    "accords.record": {"kind": "action", "title": "t"},
    "accords.decide": {"mandate": "m"},
    "accords.vote": {"on": "ACC-1", "value": "yes"},
    "accords.resolve": {"id": "ACC-1", "outcome": "o"},
    "accords.escalate": {"id": "ACC-1", "question": "q"},
}


@pytest.fixture
def brain(tmp_path) -> Iterator[Brain]:
    init_store(tmp_path / "board")
    with Brain.open(tmp_path / "board") as b:
        yield b


def call(b: Brain, door: str, *args: Any, who: str | None = SCOUT) -> dict[str, Any]:
    return b.call(f"accords.{door}", *args, caller=who)


def refused(cls: type[R.Refusal], fn: Any, *args: Any, **kwargs: Any) -> R.Refusal:
    with pytest.raises(cls) as caught:
        fn(*args, **kwargs)
    return caught.value


def negotiation(b: Brain) -> None:
    """Two agents and an owner: a thread of three rounds, an action, a decision, votes, an escalation."""
    call(b, "file", {"title": "Ship the draft", "text": "We ship Friday.", "participants": [CRITIC], "lab": "north"})
    call(b, "postRound", {"parent": "ACC-1", "text": "Friday is tight: Monday?"}, who=CRITIC)
    call(b, "postRound", {"parent": "thread:ACC-1", "text": "Monday it is."})
    call(b, "record", {"kind": "action", "title": "Write the summary", "thread": "ACC-1", "assignee": CRITIC})
    call(b, "record", {"kind": "decision", "title": "Print or web?", "thread": "ACC-1", "options": ["print", "web"]})


def plant(b: Brain, key: str, kind: str, data: str, fields: dict[str, Any]) -> None:
    """A record written past every door, through the commit path itself: the damage another writer could leave
    (a second live mandate), which no accords door makes."""
    with b.commits.head.commit_lock:
        txn = b.commits.begin(OWNER, None)
        row = {
            "id": ids.row_id(key),
            "key": key,
            "type": M.noun_of(kind),
            "subtype": M.subtype(kind),
            "service": None,
            "data": data,
            "metadata": {"kind": kind, **fields},
            "visibility": "internal",
            "confidence": None,
            "weight": None,
            "hasVector": False,
        }
        _stamp(txn, row, None)
        txn.put_entity(row)
        seq, _ = b.commits.append(txn)
    b.commits.durable_at(seq, txn.generation)


class Rows:
    """How many rows a read physically fetched: find's row reads (the encoded rows it looks up, through the module
    ``brainy/doors/query.py`` reads them by) and every point read a snapshot made that found a row."""

    def __init__(self) -> None:
        self.read = 0


@contextlib.contextmanager
def counting(monkeypatch: pytest.MonkeyPatch) -> Iterator[Rows]:
    counted = Rows()
    real = query.E

    class Counted:
        def __getattr__(self, name: str) -> Any:
            return getattr(real, name)

        def lookup_many(self, view: Any, keys: list[bytes], *more: Any) -> list[Any]:
            counted.read += len(keys)
            return real.lookup_many(view, keys, *more)

        def version(self, view: Any, key: bytes) -> Any:
            found = real.version(view, key)
            counted.read += found is not None
            return found

    entity = Snapshot.entity

    def point(self: Snapshot, id_: str) -> Any:
        row = entity(self, id_)
        counted.read += row is not None
        return row

    with monkeypatch.context() as m:
        m.setattr(query, "E", Counted())
        m.setattr(Snapshot, "entity", point)
        yield counted


# -- who writes -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("door", sorted(WRITES))
def test_an_accords_write_with_no_caller_is_refused(brain, door):
    """11.2: an accords write that reaches the profile with no caller bound is AccordsHostCannotWriteError
    {missing: caller}, and nothing is committed."""
    head = brain.head
    error = refused(R.AccordsHostCannotWriteError, brain.call, door, WRITES[door])
    assert error.fields == {"missing": "caller"} and brain.head == head


def test_records_are_internal_rows_keyed_by_their_protocol_ids(brain):
    """9.1: a thread is thread:ACC-<n> counting up per board, a process row of subtype accords.thread, internal
    (a plain find does not see it, find visibility all does), attributed to its caller; its text is round 1; the
    caller's first write makes its participant row (a person's a person, an agent's an agent)."""
    first = call(brain, "file", {"title": "One", "text": "the first"})
    second = call(brain, "file", {"title": "Two", "text": "the second"}, who=OWNER)
    assert (first["id"], first["round"]) == ("thread:ACC-1", "round:thread:ACC-1:1")
    assert second["id"] == "thread:ACC-2"
    row = brain.get("thread:ACC-1")["entity"]
    assert (row["type"], row["subtype"], row["visibility"], row["key"]) == (
        "process",
        "accords.thread",
        "internal",
        "thread:ACC-1",
    )
    assert row["createdBy"] == SCOUT and row["metadata"]["participants"] == [SCOUT]
    assert brain.find({})["results"] == []
    assert len(brain.find({"visibility": "all", "subtype": "accords.round"})["results"]) == 2
    assert brain.get("participant:agent:scout")["entity"]["type"] == "agent"
    assert brain.get(f"participant:{OWNER}")["entity"]["type"] == "person"
    round_one = call(brain, "read", "round:thread:ACC-1:1")["record"]
    assert round_one == {**round_one, "kind": "round", "seq": 1, "text": "the first", "parent": "thread:ACC-1"}


def test_thread_numbers_and_slugs_skip_ids_already_taken(brain):
    """9.1: a natural key an engine add took first is never overwritten: the thread number and the slug skip it;
    a slug is lower-case, hyphenated, at most 48 characters with -2, -3 added on collision within its kind."""
    brain.add({"type": "thing", "id": "thread:ACC-1"}, caller=SCOUT)
    assert call(brain, "file", {"title": "t", "text": "x"})["id"] == "thread:ACC-2"
    title = "  Ship THE draft -- before Friday's review, with every figure checked twice!  "
    first = call(brain, "record", {"kind": "action", "title": title})["id"]
    again = call(brain, "record", {"kind": "action", "title": title})["id"]
    assert first == "action:ship-the-draft-before-friday-s-review-with-every"
    assert len(first.partition(":")[2]) <= 48 and again.partition(":")[2].endswith("-2")
    assert len(again.partition(":")[2]) <= 48
    assert call(brain, "record", {"kind": "decision", "title": title})["id"] == first.replace("action:", "decision:")


def test_a_round_id_an_engine_row_holds_is_refused_not_overwritten(brain):
    """A round's id is fixed by its parent and seq: when an engine row took it first, postRound refuses by name
    (id-taken) and the engine row stands."""
    call(brain, "file", {"title": "t", "text": "x"})
    brain.add({"type": "thing", "id": "round:thread:ACC-1:2", "data": "mine"}, caller=SCOUT)
    error = refused(R.InvalidArgumentError, call, brain, "postRound", {"parent": "ACC-1", "text": "y"})
    assert error.fields["reason"] == "id-taken"
    assert brain.get("round:thread:ACC-1:2")["entity"]["data"] == "mine"


# -- read --------------------------------------------------------------------------------------------------------


def test_read_takes_a_prefixed_or_a_bare_id_for_every_kind(brain):
    """One read for all nine kinds: a prefixed id is read as it is; a bare one is probed under every prefix in one
    batch; one hit answers, several refuse RecordAmbiguousError naming them, none RecordNotFoundError naming every
    probe."""
    negotiation(brain)
    call(brain, "vote", {"on": "ACC-1", "value": "yes"}, who=CRITIC)
    call(brain, "postUpdate", {"about": "write-the-summary", "text": "half done", "state": "on-track"}, who=CRITIC)
    call(brain, "escalate", {"id": "ACC-1", "question": "Budget?"}, who=CRITIC)
    call(brain, "decide", {"mandate": "Ship small."}, who=OWNER)
    expected = {
        "thread:ACC-1": "thread",
        "ACC-1": "thread",
        "round:thread:ACC-1:2": "round",
        "write-the-summary": "action",
        "decision:print-or-web": "decision",
        "vote:thread:ACC-1:agent:critic": "vote",
        "update:action:write-the-summary:1": "update",
        "escalation:thread:ACC-1:1": "escalation",
        "mandate:1": "mandate",
        "agent:critic": "participant",
    }
    for text, kind in expected.items():
        answer = call(brain, "read", text)
        assert answer["record"]["kind"] == kind, text
        assert answer["cost"] == {"segments": 1, "candidates": len(ids.probes(text)), "rowsRead": 1}, text
    call(brain, "record", {"kind": "decision", "title": "Write the summary"})
    ambiguous = refused(R.RecordAmbiguousError, call, brain, "read", "write-the-summary")
    assert ambiguous.fields == {"ids": ["action:write-the-summary", "decision:write-the-summary"]}
    missing = refused(R.RecordNotFoundError, call, brain, "read", "nothing-here")
    assert missing.fields == {"id": "nothing-here", "probed": [f"{k}:nothing-here" for k in ids.KINDS]}
    assert refused(R.RecordNotFoundError, call, brain, "read", "thread:ACC-9").fields["probed"] == ["thread:ACC-9"]
    brain.add({"type": "thing", "id": "thread:ACC-9"}, caller=SCOUT)  # a row, but no accords record
    refused(R.RecordNotFoundError, call, brain, "read", "ACC-9")


# -- timeline (rule A2) -----------------------------------------------------------------------------------------


def test_timeline_reads_only_what_came_after_and_says_what_it_cost(brain, monkeypatch):
    """A thread's rounds and an action's log are one door; afterSeq is a clause: a reader that saw two of five
    rounds reads the parent, the count's last round and the two it has not seen, and the counters say so."""
    negotiation(brain)
    call(brain, "postRound", {"parent": "ACC-1", "text": "Four."}, who=CRITIC)
    call(brain, "postRound", {"parent": "ACC-1", "text": "Five."})
    whole = call(brain, "timeline", "ACC-1")
    assert [e["seq"] for e in whole["entries"]] == [1, 2, 3, 4, 5] and whole["lastSeq"] == 5
    assert whole["kind"] == "thread" and whole["hasMore"] is False
    with counting(monkeypatch) as rows:
        later = call(brain, "timeline", "ACC-1", {"afterSeq": 3})
    assert [e["text"] for e in later["entries"]] == ["Four.", "Five."] and later["lastSeq"] == 5
    assert later["cost"] == {"segments": 2, "candidates": 2 + 5, "rowsRead": 3} and rows.read == 3
    page = call(brain, "timeline", "thread:ACC-1", {"afterSeq": 1, "limit": 2})
    assert [e["seq"] for e in page["entries"]] == [2, 3] and page["hasMore"] is True and page["lastSeq"] == 3
    assert call(brain, "timeline", "ACC-1", {"afterSeq": 5})["entries"] == []
    call(brain, "postRound", {"parent": "write-the-summary", "text": "outline done"}, who=CRITIC)
    log = call(brain, "timeline", "write-the-summary")
    assert log["kind"] == "action" and [e["text"] for e in log["entries"]] == ["outline done"]
    refused(R.RecordNotFoundError, call, brain, "timeline", "print-or-web")  # a decision has no timeline


def test_a_gap_in_a_timeline_refuses_by_name(brain):
    """Rule A2: a round removed through the engine leaves a gap, and the timeline refuses TimelineCorruptError
    {expected, found} naming the missing position, even for a reader past the gap."""
    negotiation(brain)
    brain.remove({"id": "round:thread:ACC-1:2"}, caller=SCOUT)
    error = refused(R.TimelineCorruptError, call, brain, "timeline", "ACC-1", {"afterSeq": 2})
    assert error.fields == {"expected": 3, "found": 2} and "round 2 is missing" in error.message


# -- writes and rules A1, A4 ---------------------------------------------------------------------------------


def test_post_round_joins_the_thread_and_refuses_a_moved_sequence(brain):
    """A round takes the next seq and its author joins the thread; expectSeq that no longer holds refuses
    RecordStateError {reason: seq-conflict, expected, actual}."""
    negotiation(brain)
    third = call(brain, "postRound", {"parent": "ACC-1", "text": "Four.", "expectSeq": 4}, who=OWNER)
    assert third == {**third, "id": "round:thread:ACC-1:4", "seq": 4}
    assert OWNER in call(brain, "read", "ACC-1")["record"]["participants"]
    error = refused(R.RecordStateError, call, brain, "postRound", {"parent": "ACC-1", "text": "x", "expectSeq": 4})
    assert error.fields == {"state": "open", "reason": "seq-conflict", "expected": 4, "actual": 5}
    refused(R.RecordNotFoundError, call, brain, "postRound", {"parent": "ACC-404", "text": "x"})


def test_closed_records_take_no_turns(brain):
    """Rule A4: a resolved thread takes no round, update, vote, escalation or second resolve; a done action no
    log entry; a decided decision no vote and no second decision: RecordStateError {state, reason: closed}."""
    negotiation(brain)
    closed = call(brain, "resolve", {"id": "ACC-1", "outcome": "Shipping Monday."})
    assert closed == {**closed, "id": "thread:ACC-1", "status": "resolved", "round": "round:thread:ACC-1:4"}
    for door, args in (
        ("postRound", {"parent": "ACC-1", "text": "x"}),
        ("postUpdate", {"about": "ACC-1", "text": "x"}),
        ("vote", {"on": "ACC-1", "value": "no"}),
        ("escalate", {"id": "ACC-1", "question": "q"}),
        ("resolve", {"id": "ACC-1", "outcome": "again"}),
    ):
        error = refused(R.RecordStateError, call, brain, door, args)
        assert error.fields == {"state": "resolved", "reason": "closed", "expected": "open", "actual": "resolved"}
    assert call(brain, "resolve", {"id": "write-the-summary", "outcome": "sent"})["status"] == "done"
    assert (
        refused(R.RecordStateError, call, brain, "postRound", {"parent": "write-the-summary", "text": "x"}).fields[
            "state"
        ]
        == "done"
    )
    call(brain, "decide", {"id": "print-or-web", "choice": "web"}, who=OWNER)
    assert (
        refused(R.RecordStateError, call, brain, "vote", {"on": "print-or-web", "value": "yes"}).fields["state"]
        == "decided"
    )
    refused(R.RecordStateError, call, brain, "decide", {"id": "print-or-web", "choice": "print"}, who=OWNER)
    # a record is no turn: an action may still be recorded on a closed thread
    assert call(brain, "record", {"kind": "action", "title": "Archive it", "thread": "ACC-1"})["id"]


def test_votes_resolve_and_escalate(brain):
    """One vote per participant and target (again replaces it); resolve defaults by kind and refuses a status of
    the other kind; escalate opens a decision awaiting the owner, referencing the target."""
    negotiation(brain)
    assert call(brain, "vote", {"on": "ACC-1", "value": "yes"}, who=CRITIC)["replaced"] is False
    again = call(brain, "vote", {"on": "thread:ACC-1", "value": "no", "note": "too soon"}, who=CRITIC)
    assert again == {**again, "id": "vote:thread:ACC-1:agent:critic", "replaced": True}
    vote = call(brain, "read", again["id"])["record"]
    assert vote == {**vote, "value": "no", "note": "too soon", "parent": "thread:ACC-1", "author": CRITIC}
    up = call(brain, "escalate", {"id": "ACC-1", "question": "Which printer?", "options": ["a", "b"]}, who=CRITIC)
    assert up == {**up, "escalation": "escalation:thread:ACC-1:1", "decision": "decision:which-printer"}
    decision = call(brain, "read", "which-printer")["record"]
    assert decision == {**decision, "status": "awaiting", "options": ["a", "b"], "parent": "thread:ACC-1"}
    assert decision["lab"] == "north"  # the decision inherits its subject's provenance
    assert call(brain, "read", up["escalation"])["record"]["decision"] == "decision:which-printer"
    bad = refused(R.InvalidArgumentError, call, brain, "resolve", {"id": "ACC-1", "outcome": "o", "status": "done"})
    assert bad.fields["field"] == "status"
    assert call(brain, "resolve", {"id": "ACC-1", "outcome": "dropped", "status": "abandoned"})["status"] == "abandoned"
    for args in (
        {"kind": "decision", "title": "t", "assignee": SCOUT},
        {"kind": "action", "title": "t", "options": ["a"]},
        {"kind": "action", "title": "t", "due": "next week"},
    ):
        refused(R.InvalidArgumentError, call, brain, "record", args)
    refused(R.RecordNotFoundError, call, brain, "record", {"kind": "action", "title": "t", "thread": "ACC-77"})


def test_one_live_mandate(brain):
    """Rule A1: decide with mandate supersedes the live one in the same commit (supersedes relation, one
    generation); a second live mandate left by damage makes the reads that need it refuse MandateAmbiguousError
    naming both, and the owner's next decide supersedes every live one."""
    call(brain, "decide", {"mandate": "Ship small."}, who=OWNER)
    head = brain.head
    second = call(brain, "decide", {"mandate": "Ship small, ship often.", "note": "after review"}, who=OWNER)
    assert (second["id"], second["status"], second["superseded"]) == ("mandate:2", "live", ["mandate:1"])
    assert second["generation"] == head + 1 and brain.head == head + 1
    old = call(brain, "read", "mandate:1")["record"]
    assert old["status"] == "superseded"
    edges = brain.related({"from": "mandate:2", "visibility": "all"})["relations"]
    assert [(e["type"], e["to"]) for e in edges] == [("supersedes", ids.row_id("mandate:1"))]
    plant(brain, "mandate:9", "mandate", "a stray", {"text": "a stray", "status": "live", "author": OWNER})
    for door in ("inbox", "dashboard"):
        error = refused(R.MandateAmbiguousError, call, brain, door, {})
        assert error.fields == {"ids": ["mandate:2", "mandate:9"]}, door
    repaired = call(brain, "decide", {"mandate": "One voice."}, who=OWNER)
    assert sorted(repaired["superseded"]) == ["mandate:2", "mandate:9"]
    assert call(brain, "inbox", {})["mandate"]["text"] == "One voice."


def test_decide_takes_one_form_and_an_offered_choice(brain):
    """decide sends exactly one of id with choice, or mandate; a choice outside the decision's options refuses."""
    negotiation(brain)
    for args in ({}, {"id": "print-or-web", "mandate": "m"}, {"mandate": "m", "choice": "web"}):
        refused(R.InvalidArgumentError, call, brain, "decide", args, who=OWNER)
    refused(R.InvalidArgumentError, call, brain, "decide", {"id": "print-or-web", "choice": "radio"}, who=OWNER)
    done = call(brain, "decide", {"id": "print-or-web", "choice": "web", "note": "cheaper"}, who=OWNER)
    assert (done["id"], done["status"]) == ("decision:print-or-web", "decided")
    record = call(brain, "read", "print-or-web")["record"]
    assert record == {**record, "status": "decided", "choice": "web", "decidedBy": OWNER, "note": "cheaper"}


def test_a_guardrail_governs_accords_writes_like_any_other(brain):
    """9.3: the commit path asks the guardrails of every accords write: a rule the critic declares on
    accords.postRound stops its rounds (GuardrailRefusedError, audited, nothing written) and nobody else's, and
    policy.check answers what the write then meets."""
    negotiation(brain)
    rule = brain.call("policy.declare", {"doors": ["accords.postRound"], "reason": "critic listens"}, caller=CRITIC)
    args = {"parent": "ACC-1", "text": "one more thing"}
    check = brain.call("policy.check", {"door": "accords.postRound", "args": args}, caller=CRITIC)
    assert check["allowed"] is False and check["rules"][0]["id"] == rule["id"]
    error = refused(R.GuardrailRefusedError, call, brain, "postRound", args, who=CRITIC)
    assert error.fields["caller"] == CRITIC
    assert call(brain, "timeline", "ACC-1")["lastSeq"] == 3
    assert call(brain, "postRound", args)["seq"] == 4
    assert [e["door"] for e in brain.call("policy.audit", {})["events"]] == ["accords.postRound"]


def test_accords_commits_are_in_the_change_feed(brain):
    """Every accords write is an ordinary commit: the change feed carries its rows as update frames."""
    call(brain, "file", {"title": "t", "text": "x"})
    frames = brain.changes({"since": 0})["frames"]
    subtypes = {f["entity"]["subtype"] for f in frames if f["kind"] == "entity"}
    assert {"accords.thread", "accords.round", "accords.participant", "accords.board"} <= subtypes


# -- inbox and the presence stamp (rule R16) ----------------------------------------------------------------------


def test_inbox_answers_in_protocol_order_clipped_with_totals(brain, monkeypatch):
    """The mandate, the decisions awaiting the owner, the participant's open actions, its live threads, in that
    order; each clipped at limit with the count before the clip; the cost is the rows actually read."""
    negotiation(brain)
    call(brain, "decide", {"mandate": "Ship small."}, who=OWNER)
    call(brain, "record", {"kind": "action", "title": "Check figures", "assignee": CRITIC})
    call(brain, "record", {"kind": "decision", "title": "Font?"})
    call(brain, "file", {"title": "Second", "text": "x"}, who=CRITIC)
    with counting(monkeypatch) as rows:
        inbox = brain.call("accords.inbox", {"limit": 1}, caller=CRITIC)
    assert list(inbox)[:7] == [
        "board",
        "participant",
        "mandate",
        "decisionsAwaiting",
        "openActions",
        "liveThreads",
        "totals",
    ]
    assert inbox["participant"] == CRITIC and inbox["mandate"]["id"] == "mandate:1"
    assert [r["id"] for r in inbox["decisionsAwaiting"]] == ["decision:print-or-web"]  # oldest waiting first
    assert [r["id"] for r in inbox["openActions"]] == ["action:write-the-summary"]
    assert [r["id"] for r in inbox["liveThreads"]] == ["thread:ACC-2"]  # most recently active first
    assert inbox["totals"] == {"decisionsAwaiting": 2, "openActions": 2, "liveThreads": 2}
    assert inbox["cost"] == {"segments": 4, "candidates": 1 + 2 + 2 + 2, "rowsRead": 4} and rows.read == 4
    mine = brain.call("accords.inbox", {}, caller=SCOUT)
    assert mine["openActions"] == [] and [r["id"] for r in mine["liveThreads"]] == ["thread:ACC-1"]


def test_reading_your_own_inbox_stamps_your_presence(brain, tmp_path):
    """Rule R16: the writer stamps participant.lastReadAt when a participant reads its own inbox; someone else's
    inbox, a call with no caller, and a read-only attach (another process holds the lease) stamp nothing and
    say why, and the read is whole either way."""
    negotiation(brain)
    head = brain.head
    inbox = brain.call("accords.inbox", {}, caller=CRITIC)
    stamped = inbox["presenceStamped"]
    assert stamped["stamped"] is True and brain.head == head + 1
    assert call(brain, "read", "participant:agent:critic")["record"]["lastReadAt"] == stamped["at"]
    other = brain.call("accords.inbox", {"participant": CRITIC}, caller=SCOUT)
    assert other["presenceStamped"] == {"stamped": False, "reason": "not-own-inbox"}
    anyone = brain.call("accords.inbox", {"participant": CRITIC})
    assert anyone["presenceStamped"] == {"stamped": False, "reason": "no-caller"}
    refused(R.InvalidArgumentError, brain.call, "accords.inbox", {})  # no caller and no participant
    newcomer = brain.call("accords.inbox", {}, caller="agent:newcomer")
    assert newcomer["presenceStamped"]["stamped"] is True  # its first act on the board: its participant row
    assert brain.head == head + 2
    with Brain.attach(brain.path) as reader:
        seen = reader.call("accords.inbox", {}, caller=CRITIC)
    assert seen["presenceStamped"] == {"stamped": False, "reason": "lease-not-held"}
    assert seen["liveThreads"] == inbox["liveThreads"] and brain.head == head + 2
    pinned = brain.asOf({"generation": head, "read": {"door": "accords.inbox", "args": {"participant": CRITIC}}})
    assert pinned["result"]["presenceStamped"] == {"stamped": False, "reason": "past-generation"}


# -- dashboard -------------------------------------------------------------------------------------------------


def test_dashboard_lab_lens_is_in_the_query(brain, monkeypatch):
    """The whole board with totals by status; lab keeps the records whose provenance.lab is it, as a condition
    of every query: the candidates the postings match are the lab's, never the board's filtered after."""
    negotiation(brain)  # lab north: one thread, its action and its decision
    call(brain, "file", {"title": "Elsewhere", "text": "x", "provenance": {"lab": "south", "run": 7}}, who=CRITIC)
    call(brain, "record", {"kind": "action", "title": "Loose end"})
    whole = call(brain, "dashboard", {})
    assert [r["id"] for r in whole["threads"]] == ["thread:ACC-2", "thread:ACC-1"]
    assert whole["totals"] == {
        "threads": {"open": 2, "resolved": 0, "abandoned": 0},
        "actions": {"open": 2, "done": 0, "abandoned": 0},
        "decisions": {"awaiting": 1, "decided": 0},
        "participants": 2,
    }
    with counting(monkeypatch) as rows:
        north = call(brain, "dashboard", {"lab": "north"})
    assert [r["id"] for r in north["threads"]] == ["thread:ACC-1"]
    assert [r["id"] for r in north["actions"]] == ["action:write-the-summary"]
    assert north["totals"]["threads"]["open"] == 1 and north["totals"]["actions"]["open"] == 1
    # segments: the mandate, three lists, the participants, the census; candidates: 0 + 1 + 1 + 1 + 2 + 3
    assert north["cost"] == {"segments": 6, "candidates": 8, "rowsRead": 5} and rows.read == 5
    south = call(brain, "dashboard", {"lab": "south"})
    assert [r["provenance"] for r in south["threads"]] == [{"lab": "south", "run": 7}] and south["actions"] == []


# -- search ------------------------------------------------------------------------------------------------------


def test_an_exact_id_cannot_be_outranked(brain, monkeypatch):
    """A query naming a protocol id, bare or prefixed, returns that record first whatever its kind: its score is
    one above the most the word and meaning legs can reach together (2 with the model), by arithmetic."""
    negotiation(brain)
    words = "summary summary summary write the summary"
    call(brain, "postRound", {"parent": "ACC-1", "text": words}, who=CRITIC)
    with counting(monkeypatch) as rows:
        found = call(brain, "search", {"query": "write the summary ACC-1"})
    assert found["semantic"] == {"served": True} and found["text"] == {"served": True}
    first, *rest = found["hits"]
    assert (first["id"], first["kind"], first["score"]) == ("thread:ACC-1", "thread", 3.0)
    assert rest and all(h["score"] <= 2.0 for h in rest) and found["hits"][1]["id"] != "thread:ACC-1"
    assert found["cost"]["rowsRead"] == rows.read
    assert found["cost"]["segments"] == 3  # the id probes, the words, the meaning
    prefixed = call(brain, "search", {"query": "what about round:thread:ACC-1:2?"})["hits"][0]
    assert (prefixed["id"], prefixed["score"]) == ("round:thread:ACC-1:2", 3.0)
    narrowed = call(brain, "search", {"query": "ACC-1 summary", "kinds": ["action"]})["hits"]
    assert [h["kind"] for h in narrowed] == ["action"]  # the narrowings keep an exact hit out too


def test_search_without_the_model_serves_its_words_and_says_so(brain, tmp_path, monkeypatch):
    """The semantic half, unserved, is said in the answer with its reason; the exact-id score is then 2, one
    above the word leg alone; the words still rank."""
    negotiation(brain)
    monkeypatch.setenv(embedder.OVERRIDE, str(tmp_path / "no-model"))
    found = call(brain, "search", {"query": "summary ACC-1"})
    assert found["semantic"]["served"] is False and "EmbeddingModelMissingError" in found["semantic"]["reason"]
    assert found["hits"][0]["score"] == 2.0 and found["hits"][1]["id"] == "action:write-the-summary"
    assert found["hits"][1]["score"] == 1.0  # the best word score is 1


def test_search_with_no_query_is_store_order_and_pages(brain, monkeypatch):
    """No query: no scores and no re-sort, the records in store order; a cursor pages on at the pinned
    generation and refuses another query's; participant and status narrow through the postings."""
    negotiation(brain)
    with counting(monkeypatch) as rows:
        page = call(brain, "search", {"kinds": ["round", "thread"], "limit": 2})
    assert [h["id"] for h in page["hits"]] == ["thread:ACC-1", "round:thread:ACC-1:1"]
    assert all(h["score"] is None for h in page["hits"]) and page["hasMore"] is True
    assert page["semantic"]["served"] is False and page["text"] == {"served": False}
    assert page["cost"] == {"segments": 1, "candidates": 4, "rowsRead": 2} and rows.read == 2
    call(brain, "postRound", {"parent": "ACC-1", "text": "later"})  # after the first page: not in this walk
    rest = call(brain, "search", {"kinds": ["round", "thread"], "limit": 2, "cursor": page["cursor"]})
    assert [h["id"] for h in rest["hits"]] == ["round:thread:ACC-1:2", "round:thread:ACC-1:3"]
    assert rest["hasMore"] is False
    refused(R.CursorInvalidError, call, brain, "search", {"kinds": ["thread"], "cursor": page["cursor"]})
    mine = call(brain, "search", {"participant": CRITIC, "status": "open"})
    assert {h["id"] for h in mine["hits"]} == {"thread:ACC-1", "action:write-the-summary"}
    refused(R.InvalidArgumentError, call, brain, "search", {"kinds": ["memo"]})


def test_a_ranked_search_pages_the_same_fused_list(brain):
    """With a query, a cursor pages on through the one fused list its first page ranked: the pages together are
    the whole answer, in its order, each hit once."""
    negotiation(brain)
    whole = call(brain, "search", {"query": "ACC-1 summary draft", "limit": 50})
    assert whole["hasMore"] is False and len(whole["hits"]) > 3
    pages, cursor = [], None
    while True:
        page = call(
            brain, "search", {"query": "ACC-1 summary draft", "limit": 2, **({"cursor": cursor} if cursor else {})}
        )
        pages.extend(h["id"] for h in page["hits"])
        cursor = page["cursor"]
        if not page["hasMore"]:
            break
    assert pages == [h["id"] for h in whole["hits"]]
