"""The memory doors that write: remember, abstract, cite, reinforce, retire, consolidate (DOORS 9.2; write is
``notes``).

Each is a commit rule ``(txn, args, ctx)`` (brainy/doors/writes.py): it checks everything before its first op
and writes rows laid out as docs/memory.md says. Nothing is ever deleted: retiring flips ``status``. Every
memory write is attributed to its caller; one that reaches the profile with none (in-process, no caller
bound) is refused ``MemoryHostCannotWriteError``. The texts a rule stores are embedded before the commit lock
(the door's ``embeds``); a rule never runs the model.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from brainy.contract import arguments
from brainy.contract import doors as D
from brainy.contract import refusals as R
from brainy.doors import language, vfs
from brainy.doors.memory import records as M
from brainy.doors.memory.recall import ANY, leg, narrowing
from brainy.doors.memory.said import SPEAKER, said
from brainy.doors.registry import WRITE, door
from brainy.doors.writes import Context, _put_relation, _stamp
from brainy.index import embedder
from brainy.index.projections import WORD
from brainy.index.vector_matrix import unit
from brainy.store import keys as K
from brainy.store import rows
from brainy.store.rows import invalid
from brainy.store.txn import Txn

DEDUPE = 0.95  # cosine at which a new memory is the one already held (DOORS 9.2)
INTERNAL = {"visibility": "internal"}


def caller(txn: Txn) -> str:
    """The caller a memory write is attributed to (DOORS 0.4)."""
    if txn.caller is None:
        raise R.MemoryHostCannotWriteError("a memory write needs a caller, and none is bound", missing="caller")
    return txn.caller


def put(txn: Txn, row: dict[str, Any], before: dict[str, Any] | None) -> dict[str, Any]:
    _stamp(txn, row, before)
    txn.put_entity(row)
    return row


def new_row(
    txn: Txn, ctx: Context, kind: str, text: str, fields: dict[str, Any], id_: str | None = None, key: str | None = None
) -> dict[str, Any]:
    """A memory entity of ``kind`` holding ``text``, its record fields in metadata, embedded when a model was.
    A fact, preference or turn that names its speaker is embedded without the name, kept as ``speaker``."""
    meta = {"kind": kind, "scope": None, "tags": [], "strength": M.DEFAULT_STRENGTH, "status": "active", "citations": 0}
    meta.update(fields)
    row: dict[str, Any] = {"id": id_ or K.uuid7()}
    if key is not None:
        row["key"] = key
    embedded = text
    if kind in M.SAID:
        lifted = said(text)
        embedded = lifted.body
        if lifted.speaker is not None:
            meta[SPEAKER] = lifted.speaker
    vector = ctx.vector_of(embedded)
    row.update(
        type=M.NOUN[kind],
        subtype=M.subtype(kind),
        service=None,
        data=text,
        metadata=meta,
        visibility="internal",
        confidence=None,
        weight=None,
        hasVector=vector is not None,
    )
    if vector is not None:
        row["vector"] = vector
    return row


def changed(row: dict[str, Any], **fields: Any) -> dict[str, Any]:
    """A copy of a memory row with record fields set (None removes one)."""
    out = dict(row)
    meta = dict(row.get("metadata") or {})
    for name, value in fields.items():
        if value is None:
            meta.pop(name, None)
        else:
            meta[name] = value
    out["metadata"] = meta
    return out


def relate(
    txn: Txn, ctx: Context, source: str, target: str, verb: str, sub: str, metadata: dict[str, Any] | None = None
) -> dict[str, Any]:
    fields: dict[str, Any] = dict(INTERNAL)
    if metadata:
        fields["metadata"] = metadata
    return _put_relation(txn, source, target, verb, sub, fields, None, ctx)


def stored_text(a: dict[str, Any]) -> list[str]:
    """The text a memory write stores, read from its arguments: what is embedded before the commit lock."""
    text = a.get("text")
    return [text] if isinstance(text, str) and text.strip() else []


def said_text(a: dict[str, Any]) -> list[str]:
    """What a remember or a turn embeds before the commit lock: what was said, its speaker lifted."""
    return [said(text).body for text in stored_text(a)]


def _scope(value: Any) -> str | None:
    return rows.string(value, "scope", nullable=True)


def _meta(m: dict[str, Any], name: str, default: Any = None) -> Any:
    return (m.get("metadata") or {}).get(name, default)


def _raise(row: dict[str, Any], amount: float) -> float:
    return round(min(1.0, float(_meta(row, "strength", 0.0)) + amount), 6)


# -- remember -------------------------------------------------------------------------------------------------


def normalised(text: str) -> str:
    """What "the same text" means without a model (DOORS 9.2): the same words, case and punctuation aside."""
    return " ".join(WORD.findall(text.lower()))


def duplicate(
    txn: Txn, ctx: Context, text: str, vector: bytes | None, kind: str, scope: str | None, speaker: str | None
) -> dict[str, Any] | None:
    """The active memory of this kind, scope and speaker that ``text`` repeats: cosine ≥ 0.95 (what was said,
    the speaker lifted), or with no model the same normalised text. Searched at the durable head, then among
    the rows of the commits applied above it, and confirmed on the commit's own rows.

    The search alone missed a memory a concurrent remember had just committed: this rule runs under the commit
    lock, but that commit, applied before it, waits for its fsync outside the lock and is not durable yet, so
    both added the text. Those commits are few (the ones sharing an fsync) and their rows are held by the commit
    path (``ctx.since``), so they are compared here directly, with the vector the caller made before the lock."""
    if ctx.view is None:
        return None
    view = ctx.view()
    narrowed = narrowing([kind], scope)
    words = normalised(text)
    if vector is not None:
        hits = leg(
            view, narrowed, 5, vector=np.frombuffer(vector, "<f4").tolist(), searchMode="vector", threshold=DEDUPE
        )
        same = list(hits)
    else:
        hits = leg(view, narrowed, 20, query=words, searchMode="text") if words else {}
        same = [id_ for id_, (_, row) in hits.items() if normalised(row.get("data") or "") == words]
    for id_ in same:
        row = txn.entity(id_)
        if row is not None and _repeats(row, kind, scope, speaker):
            return row
    if ctx.since is None:
        return None
    query = unit(vector) if vector is not None else None
    for written in ctx.since(view.generation):
        row = txn.entity(written["id"])  # its version now: a later commit may have changed or retired it
        if row is None or not _repeats(row, kind, scope, speaker):
            continue
        if query is not None:
            if row.get("vector") and float(unit(row["vector"]) @ query) >= DEDUPE:
                return row
        elif words and normalised(row.get("data") or "") == words:
            return row
    return None


def _repeats(row: dict[str, Any], kind: str, scope: str | None, speaker: str | None) -> bool:
    """Whether ``row`` is an active memory of this kind, scope and speaker (one a new memory may repeat)."""
    return (
        M.active(row) and _meta(row, "kind") == kind and _meta(row, "scope") == scope and _meta(row, SPEAKER) == speaker
    )


def _reinforcement() -> float:
    """memory.reinforce's default amount, read from the contract: what a repeated memory is reinforced by."""
    return arguments.check(D.BY_NAME["memory.reinforce"], {"id": "-"})["amount"]


@door("memory.remember", WRITE, embeds=said_text)
def remember(txn: Txn, a: dict[str, Any], ctx: Context) -> dict[str, Any]:
    caller(txn)
    text = M.text(a.get("text"))
    kind = a["kind"]
    if kind not in ("fact", "preference"):
        raise invalid("kind", "bad-operand", "remember keeps a fact or a preference")
    scope = _scope(a.get("scope"))
    fields: dict[str, Any] = {"scope": scope, "tags": M.tags(a.get("tags")), "strength": M.strength(a["strength"])}
    if a.get("source") is not None:
        fields["source"] = rows.string(a["source"], "source")
    if a.get("metadata") is not None:
        if not isinstance(a["metadata"], dict):
            raise invalid("metadata", "wrong-type", "must be an object")
        fields["extra"] = rows.content(a["metadata"], "metadata")
    lifted = said(text)
    vector = ctx.vector_of(lifted.body)
    if a["dedupe"]:
        held = duplicate(txn, ctx, text, vector, kind, scope, lifted.speaker)
        if held is not None:
            tags = list(dict.fromkeys([*_meta(held, "tags", []), *fields["tags"]]))
            put(txn, changed(held, strength=_raise(held, _reinforcement()), tags=tags), held)
            return {"id": held["id"], "deduplicated": True}
    row = put(txn, new_row(txn, ctx, kind, text, fields), None)
    return {"id": row["id"], "deduplicated": False}


# -- abstract -------------------------------------------------------------------------------------------------


def members_of(read: Any, a: dict[str, Any]) -> tuple[list[dict[str, Any]], str | None]:
    """The rows an abstract summarises (``members``, or a stretch of ``conversation``) and the conversation."""
    if (a.get("members") is None) == (a.get("conversation") is None):
        raise invalid(
            "members",
            "ambiguous" if a.get("members") is not None else "missing",
            "give members, or conversation (with fromSeq and toSeq)",
        )
    if a.get("members") is not None:
        if a.get("fromSeq") is not None or a.get("toSeq") is not None:
            raise invalid("fromSeq", "bad-operand", "fromSeq and toSeq go with conversation")
        if not isinstance(a["members"], list):
            raise invalid("members", "wrong-type", "a list of memory ids")
        if not a["members"]:
            raise invalid("members", "bad-operand", "an abstract summarises at least one memory")
        found = {}
        for i, member in enumerate(a["members"]):
            row = M.lookup(read, member, f"members[{i}]")
            found[row["id"]] = row
        return list(found.values()), None
    name = rows.string(a["conversation"], "conversation")
    conversation = read.entity(M.conversation_id(name))
    if conversation is None or M.kind_of(conversation) != "conversation":
        raise R.RecordNotFoundError(f"conversation: no conversation {name!r}", id=name)
    last = int(_meta(conversation, "lastSeq", 0))
    lo = rows.integer(a["fromSeq"], "fromSeq", 1) if a.get("fromSeq") is not None else 1
    hi = rows.integer(a["toSeq"], "toSeq", lo) if a.get("toSeq") is not None else last
    if hi > last or lo > hi:
        raise invalid("toSeq", "out-of-range", f"the conversation's turns are 1 to {last}")
    turns = []
    for seq in range(lo, hi + 1):
        row = read.entity(M.turn_id(name, seq))
        if row is None:
            raise R.RecordNotFoundError(f"conversation {name!r} has no turn {seq}", id=f"conversation:{name}#{seq}")
        turns.append(row)
    return turns, name


def _written_by_provider(brain: Any, a: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Before the commit lock: an abstract given no ``text`` has its summary written by the language provider
    resolved at start (brainy/doors/language.py), from the members as they stand at the durable head."""
    if a.get("text") is not None:
        return a, {}
    members, conversation = members_of(brain.at(), a)
    lines = [
        f"{(m.get('metadata') or {}).get('role', '')}: {m.get('data')}" if conversation else str(m.get("data"))
        for m in members
    ]
    summary = language.provider().summarise(lines, a.get("title"))
    return {**a, "text": summary}, {"generatedBy": "provider"}


@door("memory.abstract", WRITE, embeds=stored_text, prepares=_written_by_provider)
def abstract(txn: Txn, a: dict[str, Any], ctx: Context) -> dict[str, Any]:
    caller(txn)
    members, conversation = members_of(txn, a)
    text = M.text(a.get("text"))
    scopes = {_meta(m, "scope") for m in members}
    fields: dict[str, Any] = {
        "tags": M.tags(a.get("tags")),
        "members": [m["id"] for m in members],
        "generatedBy": ctx.prepared.get("generatedBy", "caller"),
        "scope": scopes.pop() if len(scopes) == 1 else None,
    }
    if a.get("title") is not None:
        fields["title"] = rows.string(a["title"], "title")
    if conversation is not None:
        fields["conversation"] = conversation
    row = put(txn, new_row(txn, ctx, "abstract", text, fields), None)
    for member in members:
        relate(txn, ctx, row["id"], member["id"], "describes", M.DESCRIBES)
    return {"id": row["id"], "members": len(members), "generatedBy": fields["generatedBy"]}


# -- cite, reinforce, retire ----------------------------------------------------------------------------------


@door("memory.cite", WRITE)
def cite(txn: Txn, a: dict[str, Any], ctx: Context) -> dict[str, Any]:
    caller(txn)
    row = M.lookup(txn, a.get("id"))
    evidence = rows.string(a.get("evidence"), "evidence")
    note = rows.string(a.get("note"), "note", nullable=True)
    if evidence.startswith("/"):  # a VFS path: the file (or directory) standing there now
        target = vfs.node(txn, evidence, "evidence")
        if target is None:
            raise R.FileNotFoundError(f"evidence: no file at {evidence}", path=evidence)
    else:
        target = txn.entity(K.resolve(evidence, "evidence")[0])
        if target is None:
            raise R.EntityNotFoundError(f"evidence: no entity {evidence!r}", id=evidence)
    cited = relate(txn, ctx, row["id"], target["id"], "references", M.CITE, {"note": note} if note else None)
    after = row
    if not cited["existed"]:  # citing the same evidence again updates that citation, and counts once
        after = put(
            txn, changed(row, citations=int(_meta(row, "citations", 0)) + 1, strength=_raise(row, M.CITE_GAIN)), row
        )
    return {
        "id": row["id"],
        "relationId": cited["id"],
        "citations": int(_meta(after, "citations", 0)),
        "strength": float(_meta(after, "strength", 0.0)),
    }


def _active(row: dict[str, Any], door_: str) -> None:
    if not M.active(row):
        raise R.RecordStateError(
            f"{door_}: memory {row['id']} is retired",
            state="retired",
            reason="retired",
            expected="active",
            actual="retired",
        )


@door("memory.reinforce", WRITE)
def reinforce(txn: Txn, a: dict[str, Any], ctx: Context) -> dict[str, Any]:
    caller(txn)
    row = M.lookup(txn, a.get("id"))
    amount = rows.unit_number(a["amount"], "amount")
    if not amount:
        raise invalid("amount", "out-of-range", "must be more than 0 and at most 1")
    _active(row, "memory.reinforce")
    after = put(txn, changed(row, strength=_raise(row, amount)), row)
    return {"id": row["id"], "strength": _meta(after, "strength")}


def retire_row(txn: Txn, ctx: Context, row: dict[str, Any], reason: str, successor: dict[str, Any] | None) -> None:
    put(
        txn,
        changed(row, status="retired", retiredReason=reason, supersededBy=successor["id"] if successor else None),
        row,
    )
    if successor is not None:
        relate(txn, ctx, successor["id"], row["id"], "supersedes", M.SUPERSEDE)


@door("memory.retire", WRITE)
def retire(txn: Txn, a: dict[str, Any], ctx: Context) -> dict[str, Any]:
    caller(txn)
    row = M.lookup(txn, a.get("id"))
    reason = M.text(a.get("reason"), "reason")
    successor = M.lookup(txn, a["supersededBy"], "supersededBy") if a.get("supersededBy") is not None else None
    if successor is not None and successor["id"] == row["id"]:
        raise invalid("supersededBy", "bad-operand", "a memory cannot supersede itself")
    _active(row, "memory.retire")
    retire_row(txn, ctx, row, reason, successor)
    return {"id": row["id"], "status": "retired"}


# -- consolidate ----------------------------------------------------------------------------------------------


def groups(memories: list[dict[str, Any]], threshold: float) -> list[list[dict[str, Any]]]:
    """Near-duplicates by meaning, within one kind, scope and speaker: each group led by its strongest memory (newest on
    ties), which takes every other memory at cosine ≥ ``threshold`` to it that no stronger leader took."""
    order = sorted(memories, key=lambda r: (-float(_meta(r, "strength", 0.0)), -r["createdAt"], r["id"]))
    matrix = np.stack([unit(r["vector"]) for r in order]) if order else np.empty((0, rows.DIMENSIONS))
    similar = matrix @ matrix.T
    taken = [False] * len(order)
    found = []
    for i, lead in enumerate(order):
        if taken[i]:
            continue
        taken[i] = True
        group = [lead]
        for j in range(i + 1, len(order)):
            if (
                not taken[j]
                and similar[i, j] >= threshold
                and _meta(order[j], "kind") == _meta(lead, "kind")
                and _meta(order[j], "scope") == _meta(lead, "scope")
                and _meta(order[j], SPEAKER) == _meta(lead, SPEAKER)
            ):
                taken[j] = True
                group.append(order[j])
        if len(group) > 1:
            found.append(group)
    return found


@door("memory.consolidate", WRITE)
def consolidate(txn: Txn, a: dict[str, Any], ctx: Context) -> dict[str, Any]:
    caller(txn)
    kinds = M.kinds(a["kinds"])
    threshold = rows.unit_number(a["threshold"], "threshold")
    limit = rows.integer(a["limit"], "limit", 1, 1000)
    scope = _scope(a.get("scope"))
    embedder.resolve()  # grouping by meaning needs the model's vectors: EmbeddingModelMissingError without it
    assert ctx.view is not None
    narrowed = narrowing(kinds, scope if a.get("scope") is not None else ANY)
    examined = leg(ctx.view(), narrowed, limit, searchMode="metadata")
    memories = [
        row for row in (txn.entity(id_) for id_ in examined) if row is not None and M.active(row) and row.get("vector")
    ]
    found = groups(memories, threshold)
    answer: dict[str, Any] = {
        "examined": len(examined),
        "groups": [{"kept": g[0]["id"], "retired": [r["id"] for r in g[1:]]} for g in found],
    }
    if a["dryRun"]:
        return answer
    for group in found:
        kept = group[0]
        top = max(float(_meta(r, "strength", 0.0)) for r in group)
        put(txn, changed(kept, strength=top, consolidatedAt=txn.timestamp), kept)
        for other in group[1:]:
            retire_row(txn, ctx, other, "consolidated", kept)
    return answer
