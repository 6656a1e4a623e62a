"""The eight accords writes (DOORS 9.1, "Writes"): file, postRound, postUpdate, record, decide, vote, resolve,
escalate; and the presence stamp the inbox asks for (rule R16).

Each is a commit rule ``(txn, args, ctx)`` (brainy/doors/writes.py): it checks everything before its first op,
then writes rows laid out as ``model.py`` says, in one commit, attributed to its caller (a write with none is
``AccordsHostCannotWriteError``). The commit path asks the policy guardrails of it like any other row-writing
door (an accords write is in ``policy.GOVERNED``, derived from the contract), so a rule naming ``accords.*``
stops it. A caller's first accords write also makes its ``participant`` row. The texts a rule stores are
embedded before the commit lock (each door's ``embeds``), so a record can be found by meaning.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Callable
from typing import Any

from brainy.contract import refusals as R
from brainy.doors.accords import ids
from brainy.doors.accords import model as M
from brainy.doors.accords.rules import caller, still_open
from brainy.doors.accords.views import Reading, narrowing
from brainy.doors.registry import WRITE, door
from brainy.doors.writes import Context, _put_relation, _stamp
from brainy.store import rows
from brainy.store.rows import invalid
from brainy.store.txn import Txn

MAX_LIST = 64  # participants or options one write may name
_PRINCIPAL = re.compile(r"[a-z][a-z0-9_-]*:\S.*")  # kind:name, as a caller is written (DOORS 0.4)


# -- arguments ------------------------------------------------------------------------------------------------


def _text(value: Any, field: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise invalid(field, "missing" if value is None else "empty", "must be a non-empty string")
    return value


def _principal(value: Any, field: str) -> str:
    if not isinstance(value, str) or not _PRINCIPAL.fullmatch(value):
        raise invalid(field, "bad-value", "a principal id, kind:name (person:ada, agent:scout)")
    return value


def _strings(value: Any, field: str, check: Callable[[Any, str], str]) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or len(value) > MAX_LIST:
        raise invalid(field, "wrong-type", f"a list of at most {MAX_LIST} strings")
    return list(dict.fromkeys(check(item, f"{field}[{i}]") for i, item in enumerate(value)))


def _due(value: Any) -> str | None:
    if value is None:
        return None
    try:
        datetime.datetime.fromisoformat(_text(value, "due"))
    except ValueError:
        raise invalid("due", "bad-value", "an ISO-8601 date or date and time, 2026-03-01") from None
    return str(value)


def _provenance(a: dict[str, Any]) -> dict[str, Any] | None:
    """A thread's provenance, its ``lab`` set from the ``lab`` argument (the key the dashboard's lens reads)."""
    given = a.get("provenance")
    if given is not None and not isinstance(given, dict):
        raise invalid("provenance", "wrong-type", "must be an object")
    provenance = dict(rows.content(given, "provenance") or {})
    lab = a.get("lab")
    if lab is not None:
        lab = _text(lab, "lab")
        if provenance.get("lab", lab) != lab:
            raise invalid("lab", "bad-operand", f"provenance.lab is {provenance['lab']!r}; give one lab")
        provenance["lab"] = lab
    if "lab" in provenance and not isinstance(provenance["lab"], str):
        raise invalid("provenance.lab", "wrong-type", "a lab is named by a string")
    return provenance or None


def _joined(title: str, text: str | None) -> str:
    """A record's stored text: its title, and its body after a blank line."""
    return title if not text else f"{title}\n\n{text}"


# -- rows -----------------------------------------------------------------------------------------------------


def _taken(txn: Txn) -> Callable[[str], bool]:
    return lambda key: txn.entity(ids.row_id(key)) is not None


def _put(txn: Txn, ctx: Context, kind: str, key: str, data: str, fields: dict[str, Any]) -> dict[str, Any]:
    """A new record of ``kind`` at ``key``: its fields in metadata (a None left out), ``data`` its text,
    embedded when the door's ``embeds`` named it and a model was there."""
    metadata = {"kind": kind, **{k: v for k, v in fields.items() if v is not None}}
    row: dict[str, Any] = {
        "id": ids.row_id(key),
        "key": key,
        "type": M.noun_of(kind, fields.get("principal")),
        "subtype": M.subtype(kind),
        "service": None,
        "data": data,
        "metadata": metadata,
        "visibility": "internal",
        "confidence": None,
        "weight": None,
    }
    vector = ctx.vector_of(data)
    row["hasVector"] = vector is not None
    if vector is not None:
        row["vector"] = vector
    before = txn.entity(row["id"])
    if before is not None and M.kind_of(before) != kind:  # a natural key an engine add took first is never overwritten
        raise invalid("id", "id-taken", f"{key!r} names a row that is no accords {kind}; the engine's remove frees it")
    _stamp(txn, row, before)
    txn.put_entity(row)
    return row


def _changed(txn: Txn, row: dict[str, Any], **fields: Any) -> dict[str, Any]:
    """``row`` again with record fields set (None removes one); its text and vector as they were."""
    after = dict(row)
    metadata = dict(row.get("metadata") or {})
    for name, value in fields.items():
        if value is None:
            metadata.pop(name, None)
        else:
            metadata[name] = value
    after["metadata"] = metadata
    _stamp(txn, after, row)
    txn.put_entity(after)
    return after


def _relate(txn: Txn, ctx: Context, source: dict[str, Any], target: dict[str, Any], verb: str) -> None:
    """``source`` ``verb`` ``target``, an internal relation whose subtype names the source's kind."""
    _put_relation(
        txn, source["id"], target["id"], verb, M.subtype(M.kind_of(source) or ""), {"visibility": "internal"}, None, ctx
    )


def _with(values: list[str], *more: str) -> list[str]:
    return list(dict.fromkeys([*values, *more]))


def _board(txn: Txn) -> dict[str, Any]:
    row = txn.entity(M.BOARD_ID)
    return dict(row["metadata"]) if row is not None else {"threads": 0, "mandates": 0, "mandate": None}


def _put_board(txn: Txn, board: dict[str, Any]) -> None:
    row: dict[str, Any] = {
        "id": M.BOARD_ID,
        "type": M.BOARD_TYPE,
        "subtype": M.BOARD_SUBTYPE,
        "service": None,
        "data": "the accords board",
        "metadata": board,
        "visibility": "internal",
        "confidence": None,
        "weight": None,
        "hasVector": False,
    }
    _stamp(txn, row, txn.entity(M.BOARD_ID))
    txn.put_entity(row)


def _participant(txn: Txn, ctx: Context, who: str) -> dict[str, Any]:
    """The caller's participant row, made by its first accords write."""
    key = ids.participant(who)
    row = txn.entity(ids.row_id(key))
    if row is None or M.kind_of(row) != "participant":
        row = _put(txn, ctx, "participant", key, who, {"principal": who, "involves": [who]})
    return row


def _begin(txn: Txn, ctx: Context) -> str:
    """Every accords write's first step: its caller, whose participant row it makes on the first."""
    who = caller(txn)
    _participant(txn, ctx, who)
    return who


def _record(txn: Txn, text: Any, kinds: tuple[str, ...], field: str) -> dict[str, Any]:
    return M.resolve(txn.entity, text, kinds, field)


def _under(
    txn: Txn,
    ctx: Context,
    who: str,
    parent: dict[str, Any],
    verb: str,
    kind: str,
    key: str,
    data: str,
    fields: dict[str, Any],
    **changes: Any,
) -> dict[str, Any]:
    """A record of ``kind`` at ``key`` that belongs to ``parent`` (its ``parent``, by ``who``, related to it by
    ``verb``), and ``parent`` changed by ``changes`` in the same commit (its counters)."""
    made = _put(txn, ctx, kind, key, data, {**fields, "author": who, "parent": M.key_of(parent), "involves": [who]})
    _relate(txn, ctx, made, parent, verb)
    if changes:
        _changed(txn, parent, **changes)
    return made


def _round(txn: Txn, ctx: Context, parent: dict[str, Any], who: str, text: str, **more: Any) -> dict[str, Any]:
    """The parent's next round (rule A2: ``lastSeq`` + 1), ``partOf`` it; its author joins the parent."""
    seq = int(M.meta(parent, "lastSeq", 0)) + 1
    changes: dict[str, Any] = {"lastSeq": seq, "involves": _with(M.meta(parent, "involves", []), who), **more}
    if M.kind_of(parent) == "thread":
        changes["participants"] = _with(M.meta(parent, "participants", []), who)
    key = ids.round_(M.key_of(parent), seq)
    return _under(txn, ctx, who, parent, "partOf", "round", key, text, {"seq": seq, "text": text}, **changes)


# -- what each door stores, for its embeds --------------------------------------------------------------------


def _said(*names: str) -> Callable[[dict[str, Any]], list[str]]:
    """The ``embeds`` of a door whose rows store these arguments as they are."""
    return lambda a: [a[n] for n in names if isinstance(a.get(n), str) and a[n].strip()]


def _recorded(a: dict[str, Any]) -> list[str]:
    title = a.get("title")
    text = a.get("text") if isinstance(a.get("text"), str) and a["text"].strip() else None
    return [_joined(title, text)] if isinstance(title, str) and title.strip() else []


def _voted(a: dict[str, Any]) -> list[str]:
    note = a.get("note")
    return [note] if isinstance(note, str) and note.strip() else []


# -- file, postRound, postUpdate ------------------------------------------------------------------------------


@door("accords.file", WRITE, embeds=_said("title", "text"))
def file(txn: Txn, a: dict[str, Any], ctx: Context) -> dict[str, Any]:
    """A new thread, ``thread:ACC-<n>`` (n counting up per board), with the caller's text as its round 1."""
    who = _begin(txn, ctx)
    title, text = _text(a["title"], "title"), _text(a["text"], "text")
    participants = _with([who], *_strings(a.get("participants"), "participants", _principal))
    provenance = _provenance(a)
    board = _board(txn)
    n, key = ids.next_free(int(board["threads"]) + 1, ids.thread, _taken(txn))
    board["threads"] = n
    _put_board(txn, board)
    thread = _put(
        txn,
        ctx,
        "thread",
        key,
        title,
        {
            "title": title,
            "status": "open",
            "participants": participants,
            "author": who,
            "involves": participants,
            "lastSeq": 0,
            "provenance": provenance,
            "lab": (provenance or {}).get("lab"),
        },
    )
    first = _round(txn, ctx, thread, who, text)
    return {"id": key, "round": first["key"]}


@door("accords.postRound", WRITE, embeds=_said("text"))
def post_round(txn: Txn, a: dict[str, Any], ctx: Context) -> dict[str, Any]:
    """The caller's turn in a thread, or an entry in an action's log; ``expectSeq`` is the seq the round must
    take, refused ``RecordStateError {reason: "seq-conflict"}`` when another round took it first."""
    who = _begin(txn, ctx)
    text = _text(a["text"], "text")
    parent = _record(txn, a["parent"], ids.PARENTS, "parent")
    still_open(parent, "accords.postRound")
    seq = int(M.meta(parent, "lastSeq", 0)) + 1
    expected = a.get("expectSeq")
    if expected is not None and rows.integer(expected, "expectSeq", 1) != seq:
        raise R.RecordStateError(
            f"{M.key_of(parent)}: this round would be {seq}, not {expected}; read the timeline after {seq - 1}",
            state=M.meta(parent, "status"),
            reason="seq-conflict",
            expected=expected,
            actual=seq,
        )
    return {"id": _round(txn, ctx, parent, who, text)["key"], "seq": seq}


@door("accords.postUpdate", WRITE, embeds=_said("text"))
def post_update(txn: Txn, a: dict[str, Any], ctx: Context) -> dict[str, Any]:
    """Progress on a thread or an action: ``update:<target>:<n>``, referencing it."""
    who = _begin(txn, ctx)
    text = _text(a["text"], "text")
    state = a.get("state")
    if state is not None and state not in M.UPDATE_STATES:
        raise invalid("state", "bad-operand", f"one of {', '.join(M.UPDATE_STATES)}")
    target = _record(txn, a["about"], ids.PARENTS, "about")
    still_open(target, "accords.postUpdate")
    n = int(M.meta(target, "updates", 0)) + 1
    key = ids.update(M.key_of(target), n)
    _under(txn, ctx, who, target, "references", "update", key, text, {"text": text, "state": state}, updates=n)
    return {"id": key}


# -- record, escalate ------------------------------------------------------------------------------------------


def _slugged(
    txn: Txn,
    ctx: Context,
    who: str,
    kind: str,
    title: str,
    text: str | None,
    subject: dict[str, Any] | None,
    verb: str,
    fields: dict[str, Any],
) -> dict[str, Any]:
    """A new ``<kind>:<slug>`` record titled ``title`` (its text after), on ``subject`` when given: its ``parent``,
    related to it by ``verb``, its provenance inherited, so the dashboard's lab lens keeps a lab's whole story."""
    provenance = M.meta(subject, "provenance") if subject is not None else None
    made = _put(
        txn,
        ctx,
        kind,
        ids.slug(title, kind, _taken(txn)),
        _joined(title, text),
        {
            "text": text,
            "author": who,
            "parent": M.key_of(subject) if subject is not None else None,
            "involves": [who],
            "provenance": provenance,
            "lab": (provenance or {}).get("lab"),
            **fields,
        },
    )
    if subject is not None:
        _relate(txn, ctx, made, subject, verb)
    return made


def _decision(
    txn: Txn,
    ctx: Context,
    who: str,
    question: str,
    text: str | None,
    options: list[str],
    subject: dict[str, Any] | None,
    escalation: str | None = None,
) -> dict[str, Any]:
    """A decision awaiting the owner's word, ``decision:<slug>``, referencing its subject."""
    fields = {"question": question, "options": options, "status": "awaiting", "escalation": escalation}
    return _slugged(txn, ctx, who, "decision", question, text, subject, "references", fields)


@door("accords.record", WRITE, embeds=_recorded)
def record(txn: Txn, a: dict[str, Any], ctx: Context) -> dict[str, Any]:
    """An action for a participant (``action:<slug>``, ``partOf`` its thread), or a decision the owner must
    make (``decision:<slug>``). Recording on a closed thread is allowed: it is a record, not a turn in it."""
    who = _begin(txn, ctx)
    kind = a["kind"]
    if kind not in ("action", "decision"):
        raise invalid("kind", "bad-operand", "action or decision")
    title = _text(a["title"], "title")
    text = _text(a["text"], "text") if a.get("text") is not None else None
    thread = _record(txn, a["thread"], ("thread",), "thread") if a.get("thread") is not None else None
    if kind == "decision":
        for name in ("assignee", "due"):
            if a.get(name) is not None:
                raise invalid(name, "bad-operand", f"{name} is for an action; a decision waits for the owner")
        options = _strings(a.get("options"), "options", _text)
        return {"id": _decision(txn, ctx, who, title, text, options, thread)["key"]}
    if a.get("options") is not None:
        raise invalid("options", "bad-operand", "options are for a decision")
    assignee = _principal(a["assignee"], "assignee") if a.get("assignee") is not None else who
    fields = {
        "title": title,
        "assignee": assignee,
        "status": "open",
        "due": _due(a.get("due")),
        "involves": _with([who], assignee),
        "lastSeq": 0,
    }
    return {"id": _slugged(txn, ctx, who, "action", title, text, thread, "partOf", fields)["key"]}


@door("accords.escalate", WRITE, embeds=_said("question"))
def escalate(txn: Txn, a: dict[str, Any], ctx: Context) -> dict[str, Any]:
    """A question about an open thread or action handed to the owner: ``escalation:<target>:<n>`` and the
    decision it opens, both referencing the target."""
    who = _begin(txn, ctx)
    question = _text(a["question"], "question")
    options = _strings(a.get("options"), "options", _text)
    target = _record(txn, a["id"], ids.PARENTS, "id")
    still_open(target, "accords.escalate")
    n = int(M.meta(target, "escalations", 0)) + 1
    key = ids.escalation(M.key_of(target), n)
    decision = _decision(txn, ctx, who, question, None, options, target, key)
    fields = {"question": question, "decision": decision["key"]}
    _under(txn, ctx, who, target, "references", "escalation", key, question, fields, escalations=n)
    return {"escalation": key, "decision": decision["key"]}


# -- decide, vote, resolve ------------------------------------------------------------------------------------


def _live_mandates(txn: Txn, ctx: Context) -> list[str]:
    """Every mandate live when this commit runs: the board's, the live ones the postings at the durable head
    hold, and any the commits applied above it made (not searchable there yet)."""
    pointer = _board(txn).get("mandate")
    found = dict.fromkeys([pointer] if pointer else [])
    if ctx.view is not None:
        view = ctx.view()
        for row in Reading(view, "accords.decide").segment(narrowing(("mandate",), status="live"), 1000).rows:
            found[M.key_of(row)] = None
        if ctx.since is not None:
            found.update(dict.fromkeys(M.key_of(r) for r in ctx.since(view.generation) if M.kind_of(r) == "mandate"))
    live = []
    for key in found:
        row = txn.entity(ids.row_id(key))  # as it stands now, under the commit lock
        if row is not None and M.kind_of(row) == "mandate" and M.meta(row, "status") == "live":
            live.append(key)
    return live


@door("accords.decide", WRITE, embeds=_said("mandate"))
def decide(txn: Txn, a: dict[str, Any], ctx: Context) -> dict[str, Any]:
    """The owner's word (the gate asked the owner rung, rule A3): a choice on a decision awaiting it, or the
    board's mandate, which supersedes every live one in this same commit (rule A1)."""
    who = _begin(txn, ctx)
    note = _text(a["note"], "note") if a.get("note") is not None else None
    if (a.get("id") is None) == (a.get("mandate") is None):
        raise invalid(
            "id",
            "ambiguous" if a.get("id") is not None else "missing",
            "give id with choice (answer a decision), or mandate (set the board's mandate)",
        )
    if a.get("mandate") is not None:
        if a.get("choice") is not None:
            raise invalid("choice", "bad-operand", "a choice answers a decision named by id, not a mandate")
        text = _text(a["mandate"], "mandate")
        board = _board(txn)
        n, key = ids.next_free(int(board["mandates"]) + 1, ids.mandate, _taken(txn))
        superseded = _live_mandates(txn, ctx)
        made = _put(
            txn,
            ctx,
            "mandate",
            key,
            text,
            {"text": text, "status": "live", "author": who, "decidedBy": who, "note": note, "involves": [who]},
        )
        for old in superseded:
            row = txn.entity(ids.row_id(old))
            assert row is not None
            _relate(txn, ctx, made, _changed(txn, row, status="superseded", supersededBy=key), "supersedes")
        board.update(mandates=n, mandate=key)
        _put_board(txn, board)
        return {"id": key, "status": "live", "superseded": superseded}
    decision = _record(txn, a["id"], ("decision",), "id")
    choice = _text(a.get("choice"), "choice")
    still_open(decision, "accords.decide")
    options = M.meta(decision, "options") or []
    if options and choice not in options:
        raise invalid("choice", "bad-operand", f"one of the decision's options: {', '.join(options)}")
    _changed(txn, decision, status="decided", choice=choice, decidedBy=who, note=note, decidedAt=txn.timestamp)
    return {"id": M.key_of(decision), "status": "decided"}


@door("accords.vote", WRITE, embeds=_voted)
def vote(txn: Txn, a: dict[str, Any], ctx: Context) -> dict[str, Any]:
    """The caller's one vote on a thread or a decision, ``vote:<target>:<caller>``; voting again replaces it."""
    who = _begin(txn, ctx)
    value = a["value"]
    if value not in M.VOTES:
        raise invalid("value", "bad-operand", f"one of {', '.join(M.VOTES)}")
    note = _text(a["note"], "note") if a.get("note") is not None else None
    target = _record(txn, a["on"], ("thread", "decision"), "on")
    still_open(target, "accords.vote")
    key = ids.vote(M.key_of(target), who)
    replaced = txn.entity(ids.row_id(key)) is not None
    _under(txn, ctx, who, target, "evaluates", "vote", key, note or value, {"value": value, "note": note})
    return {"id": key, "replaced": replaced}


@door("accords.resolve", WRITE, embeds=_said("outcome"))
def resolve(txn: Txn, a: dict[str, Any], ctx: Context) -> dict[str, Any]:
    """A thread or an action closed with its outcome, written as its closing round; ``status`` defaults to
    ``resolved`` for a thread and ``done`` for an action, and either may be ``abandoned``."""
    who = _begin(txn, ctx)
    outcome = _text(a["outcome"], "outcome")
    target = _record(txn, a["id"], ids.PARENTS, "id")
    kind = M.kind_of(target) or ""
    status = a.get("status") or ("resolved" if kind == "thread" else "done")
    closing = [s for s in M.STATUSES[kind] if s != M.OPEN[kind]]
    if status not in closing:
        raise invalid("status", "bad-operand", f"a {kind} closes {' or '.join(closing)}")
    still_open(target, "accords.resolve")
    closed = _round(txn, ctx, target, who, outcome, status=status, closedBy=who)
    return {"id": M.key_of(target), "status": status, "round": closed["key"]}


# -- the presence stamp ---------------------------------------------------------------------------------------


def present(txn: Txn, a: dict[str, Any], ctx: Context) -> dict[str, Any]:
    """Rule R16's write: the caller's ``participant.lastReadAt`` set to this commit's time (its row made if its
    first act on the board is reading it). Run by a road to the inbox door (``brainy/doors/calling.py``), only
    for the caller's own inbox."""
    who = caller(txn)
    if a.get("participant") != who:
        raise invalid("participant", "not-the-caller", "a participant stamps only its own presence")
    _changed(txn, _participant(txn, ctx, who), lastReadAt=txn.timestamp)
    return {"participant": who, "lastReadAt": txn.timestamp}
