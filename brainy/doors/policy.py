"""Policy: guardrails on writes (door catalogue 9.3; the records are docs/policy.md).

A rule is a ``regulation`` row, subtype ``policy.rule``, keyed ``rule:<slug>``; the board (one
``state`` row, subtype ``policy.board``) lists every rule in the order it was made, the active
ones, whether the board is frozen, and how many refusals were audited; each audited refusal is an
``event`` row, subtype ``policy.refusal``, the ``n``-th at :func:`audit_id`.
Every row is ``internal``, committed, logged and replayed like any other, so the rules of a past
generation are that generation's rows.

The nine doors are ordinary door functions: six write rules (``declare``, ``propose``, ``retire``,
``ratify``, ``unlock``, ``freeze``) and three reads (``check``, ``audit``, ``rules``). The owner
triple of the three ruling doors is the gate's question (``brainy/host/dispatch.py``), asked before
any of this runs.

Enforcement (:func:`refusal`) runs in the commit path (``brainy/engine/commits.py``) for every
row-writing door outside ``policy.*``, after the door's rule has staged its ops and before the
frame is appended, so a ``where`` is tested against the rows the write would produce (for a
removal, the row as it was). ``policy.check`` stages the write it is asked about by the same
steps (``brainy/doors/staging.py``) and asks the same :func:`judge`, so it answers what the
commit does. The set of governed doors is derived from the contract: every write the registry
runs on the commit path (a ``write`` door carrying the ``W`` set), minus the policy layer. A
write that no rule stops costs one lookup, the board's.
"""

from __future__ import annotations

import re
import uuid
import weakref
from collections.abc import Callable, Iterable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Protocol

from brainy.contract import doors as D
from brainy.contract import refusals as R
from brainy.contract.limits import quote
from brainy.doors import staging
from brainy.doors.cursors import decode_cursor, encode_cursor
from brainy.doors.registry import READ, REGISTERED, WRITE, door
from brainy.doors.timetravel import _instant
from brainy.doors.writes import Context, _stamp
from brainy.index.snapshot import Snapshot
from brainy.index.where import Predicate, compile_where
from brainy.store import keys as K
from brainy.store import rows
from brainy.store.rows import invalid
from brainy.store.txn import Txn

RULE_TYPE, RULE_SUBTYPE = "regulation", "policy.rule"
BOARD_TYPE, BOARD_SUBTYPE = "state", "policy.board"
AUDIT_TYPE, AUDIT_SUBTYPE = "event", "policy.refusal"
#: The board's and the audit events' ids come from a namespace of their own (as aggregate definitions'
#: do), so no natural key a caller gives ``add`` can land on them.
POLICY_NAMESPACE = uuid.UUID("5d0c8f31-7a2e-5b94-9c61-2e8f4a7b3d10")
BOARD_ID = str(uuid.uuid5(POLICY_NAMESPACE, "board"))
SLUG_LENGTH = 48  # as accords' slugs (DOORS 9.1): lower-case, hyphenated, -2, -3, … on collision
MAX_LIST = 64  # subjects, exceptions and door patterns one rule may name
_SLUG_CUT = re.compile(r"[^a-z0-9]+")
_ROLE = re.compile(r"role:[a-z0-9._-]+")
_PRINCIPAL = re.compile(r"[a-z][a-z0-9_-]*:\S.*")
STATUSES = ("active", "proposed", "retired", "all")


# -- who is asking -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Actor:
    """Who a call is for (DOORS 0.4): the caller rows are attributed to, the service that asserted it
    (``via``), and the roles a ``role:<name>`` subject matches (asserted by a service only)."""

    caller: str | None
    via: str | None = None
    roles: tuple[str, ...] = ()


class Asking(Protocol):
    """Anything that says who a call is for: an :class:`Actor`, or the net layer's ``Principal``."""

    caller: str | None
    via: str | None
    roles: tuple[str, ...]


#: Who the read being answered is for. A read door's function sees a snapshot and its arguments, never
#: the credential; ``policy.check`` alone defaults to the request's caller, so the dispatcher binds it
#: around the reads registered ``asks`` (that one), and ``Brain.call`` in process around its reads (:class:`asking`).
_ASKING: ContextVar[Asking | None] = ContextVar("brainy_policy_asking", default=None)


def asked() -> Asking | None:
    """Who the read being answered is for, inside a read registered ``asks`` (bound by the road that called it:
    the dispatcher, or ``Brain.call``); None when nobody is bound (a read pinned by ``asOf``)."""
    return _ASKING.get()


class asking:
    """``with asking(who):`` binds ``who`` as who the reads run inside the block are for. A slotted class
    rather than a generator context manager: it wraps every read, and costs one ContextVar set."""

    __slots__ = ("who", "token")

    def __init__(self, who: Asking) -> None:
        self.who = who

    def __enter__(self) -> None:
        self.token = _ASKING.set(self.who)

    def __exit__(self, *exc: object) -> None:
        _ASKING.reset(self.token)


# -- the governed doors, derived from the contract ------------------------------------------------


def _governed() -> frozenset[str]:
    return frozenset(d.name for d in D.DOORS if d.kind == "write" and "W" in d.sets and d.layer != "policy")


GOVERNED = _governed()
_VFS_WRITES = frozenset(d.name for d in D.DOORS if d.name in GOVERNED and d.layer == "vfs")


def governs(door_name: str) -> bool:
    """Whether the guardrails are asked of a write through ``door_name``: every row-writing door outside
    ``policy.*``. Reads and mechanics never are."""
    return door_name in GOVERNED


def door_matches(pattern: str, door_name: str) -> bool:
    """A rule's door entry against a door name: exact, a trailing ``*`` for a prefix, ``vfs`` for every
    vfs write."""
    if pattern == "vfs":
        return door_name in _VFS_WRITES
    if pattern.endswith("*"):
        return door_name.startswith(pattern[:-1])
    return pattern == door_name


# -- rules as the enforcement reads them -----------------------------------------------------------


@dataclass(frozen=True)
class Rule:
    """One active rule, compiled once from its stored row."""

    id: str
    row_id: str
    tier: int
    reason: str
    subject: frozenset[str]
    except_: frozenset[str]
    doors: tuple[str, ...]
    on_entities: Predicate | None
    on_relations: Predicate | None

    @classmethod
    def of(cls, row: dict[str, Any]) -> Rule:
        m = row["metadata"]
        where = m.get("where")
        return cls(
            row["key"],
            row["id"],
            m["tier"],
            m["reason"],
            frozenset(m["subject"]),
            frozenset(m["except"]),
            tuple(m["doors"]),
            compile_where(where) if where is not None else None,
            compile_where(where, relation=True) if where is not None else None,
        )

    def names(self, door_name: str) -> bool:
        return any(door_matches(p, door_name) for p in self.doors)

    def binds(self, names: frozenset[str]) -> bool:
        """The rule binds a caller known by ``names`` (its id and ``role:<name>`` per asserted role): one of
        them in ``subject`` (or ``*``), none in ``except``."""
        if names & self.except_:
            return False
        return "*" in self.subject or bool(names & self.subject)

    def matches_rows(self, moved: list[tuple[str, dict[str, Any]]] | None) -> bool:
        """The ``where`` against the rows the write produces; None: the rows are not known, and a rule
        with a ``where`` may stop the write."""
        if self.on_entities is None or moved is None:
            return True
        return any(
            (self.on_entities if kind == "e" else self.on_relations).matches(row)  # type: ignore[union-attr]
            for kind, row in moved
        )

    def brief(self) -> dict[str, Any]:
        return {"id": self.id, "tier": self.tier, "reason": self.reason}


_COMPILED: dict[bytes, Rule] = {}  # a stored rule row -> its compiled rule; a changed row is another key


def _compiled(raw: bytes) -> Rule:
    rule = _COMPILED.get(raw)
    if rule is None:
        if len(_COMPILED) >= 4096:
            _COMPILED.clear()
        rule = _COMPILED[raw] = Rule.of(rows.unpack(raw))
    return rule


class RuleSet:
    """The active rules a board lists, compiled, with the ones naming each door found once per door."""

    def __init__(self, rules: list[Rule]) -> None:
        self.rules = rules
        self._bound: dict[tuple[str, frozenset[str]], list[Rule]] = {}

    def binding(self, door_name: str, names: frozenset[str]) -> list[Rule]:
        """The rules naming this door that bind a caller known by ``names``, found once per pair."""
        key = (door_name, names)
        found = self._bound.get(key)
        if found is None:
            if len(self._bound) >= 4096:
                self._bound.clear()
            found = self._bound[key] = [r for r in self.rules if r.names(door_name) and r.binds(names)]
        return found


#: Per writer (a Brain, held weakly): the board it last read and that board's rules. Every change to
#: what a rule enforces moves the board (the active list), or is a rule row removed, which the hits are
#: checked for; so a write that no rule stops costs the board's lookup and one comparison.
_SETS: weakref.WeakKeyDictionary[Any, tuple[bytes, RuleSet]] = weakref.WeakKeyDictionary()


def _rule_set(read: Any, board_raw: bytes, holder: Any) -> RuleSet:
    if holder is not None:
        cached = _SETS.get(holder)
        if cached is not None and cached[0] == board_raw:
            return cached[1]
    found = []
    for rid in rows.unpack(board_raw)["metadata"]["active"]:
        raw = read(K.entity_key(rid))
        if raw:
            found.append(_compiled(raw))
    rule_set = RuleSet(found)
    if holder is not None:
        _SETS[holder] = (board_raw, rule_set)
    return rule_set


def _moved(moves: Iterable[tuple[str, dict | None, dict | None]]) -> list[tuple[str, dict[str, Any]]]:
    """The rows a write produces; for a removal, the row as it was."""
    return [
        (kind, after if after is not None else before)
        for kind, before, after in moves  # type: ignore[misc]
        if (after or before) is not None
    ]


def stopping(
    read: Any,
    board_raw: bytes | None,
    door_name: str,
    actor: Actor,
    moved: Callable[[], list[tuple[str, dict[str, Any]]] | None],
    holder: Any = None,
) -> list[Rule]:
    """The active rules that stop a write through ``door_name`` by ``actor`` producing ``moved()`` (asked
    only of a rule that binds, so a write no rule binds never lists its rows), as
    ``read`` (a txn's ``committed`` or a snapshot's ``lookup``) sees the board ``board_raw``.

    A tier-1 rule binds its subjects; a tier-2 rule has its declarer as its one subject, so the one
    law covers both."""
    if board_raw is None or not governs(door_name):
        return []
    names = (
        frozenset((actor.caller, *(f"role:{r}" for r in actor.roles)))
        if actor.caller is not None
        else frozenset(f"role:{r}" for r in actor.roles)
    )
    return [
        rule
        for rule in _rule_set(read, board_raw, holder).binding(door_name, names)
        if rule.matches_rows(moved()) and read(K.entity_key(rule.row_id))
    ]


def judge(txn: Txn, door_name: str, roles: tuple[str, ...] = (), holder: Any = None) -> list[Rule]:
    """The one judge of a staged write: the active rules that stop the write ``door_name``'s rule staged on
    ``txn``, for ``txn``'s caller and service with ``roles``, by the rules committed before it. The commit
    path asks it (:func:`refusal`) of the commit's transaction; ``policy.check`` asks it of the same write
    rehearsed by the same steps (``brainy/doors/staging.py``), so the two cannot disagree.
    ``holder`` (the writing handle's write doors, brainy/engine/commits.py) keeps its compiled rules between
    writes."""
    if not governs(door_name):
        return []
    raw = txn.committed(K.entity_key(BOARD_ID))  # the rules in force when the write began
    if raw is None:
        return []
    actor = Actor(txn.caller, txn.via, roles)
    rows_of: list[list[tuple[str, dict[str, Any]]]] = []  # the staged rows, listed once if a rule binds

    def moved() -> list[tuple[str, dict[str, Any]]]:
        if not rows_of:
            rows_of.append(_moved(txn.moves))
        return rows_of[0]

    return stopping(txn.committed, raw, door_name, actor, moved, holder)


def refusal(txn: Txn, door_name: str, roles: tuple[str, ...] = (), holder: Any = None) -> R.Refusal | None:
    """The commit path's question, asked after ``door_name``'s rule staged its ops on ``txn`` and before
    anything is appended: GuardrailRefusedError when :func:`judge` finds an active rule that stops this
    write, else None."""
    hits = judge(txn, door_name, roles, holder)
    if not hits:
        return None
    return R.GuardrailRefusedError(
        f"{door_name} is stopped by {len(hits)} rule(s): " + "; ".join(f"{r.id} ({r.reason})" for r in hits),
        rules=[r.brief() for r in hits],
        caller=txn.caller,
        via=txn.via,
    )


class Audited(Exception):
    """Raised by the commit path once a refused write's audit event is appended and applied: the caller
    waits for ``seq`` to be durable (so ``policy.audit`` shows it), then raises ``refusal``."""

    def __init__(self, refusal: R.Refusal, seq: int, generation: int) -> None:
        super().__init__(refusal.message)
        self.refusal, self.seq, self.generation = refusal, seq, generation


def audit(txn: Txn, door_name: str, refused: R.Refusal, target: str | None) -> None:
    """Stage the audit event of a refused write on a fresh ``txn`` (its own commit, in the refused
    write's place): who, through which service, which door, which rules, and the row it aimed at
    (:func:`target_of` the refused write's staging)."""
    board = _board(txn)
    n = board["metadata"]["audits"] + 1
    board["metadata"]["audits"] = n
    event: dict[str, Any] = {
        "caller": txn.caller,
        "via": txn.via,
        "door": door_name,
        "rules": [r["id"] for r in refused.fields["rules"]],
    }
    if target is not None:
        event["target"] = target
    _put(txn, audit_id(n), None, AUDIT_TYPE, AUDIT_SUBTYPE, f"{door_name} refused", event)
    _put_board(txn, board)


def audit_id(n: int) -> str:
    """The id of the ``n``-th audited refusal (from 1)."""
    return str(uuid.uuid5(POLICY_NAMESPACE, f"refusal:{n}"))


def target_of(txn: Txn) -> str | None:
    """The row a refused write aimed at, for its audit event: the first existing row it touched, or the
    natural key of the first row it would have made. A minted id names nothing, so it is left out."""
    for _, before, after in txn.moves:
        if before is not None:
            return before["id"]
        if after is not None and after.get("key"):
            return after["key"]
    return None


# -- the rows --------------------------------------------------------------------------------------


def _put(
    txn: Txn,
    id_: str,
    key: str | None,
    kind: str,
    subtype: str,
    data: str,
    metadata: dict[str, Any],
) -> dict[str, Any]:
    before = txn.entity(id_)
    row: dict[str, Any] = {"id": id_}
    if key is not None:
        row["key"] = key
    row.update(
        type=kind,
        subtype=subtype,
        service=None,
        data=data,
        metadata=metadata,
        visibility="internal",
        confidence=None,
        weight=None,
        hasVector=False,
    )
    _stamp(txn, row, before)
    txn.put_entity(row)
    return row


def _board(read: Txn | Snapshot) -> dict[str, Any]:
    row = read.entity(BOARD_ID)
    if row is None or row.get("subtype") != BOARD_SUBTYPE:
        return {"metadata": {"frozen": False, "rules": [], "active": [], "audits": 0}}
    return row


def _put_board(txn: Txn, board: dict[str, Any]) -> None:
    _put(txn, BOARD_ID, None, BOARD_TYPE, BOARD_SUBTYPE, "the policy board", board["metadata"])


def _rule_row(read: Txn | Snapshot, text: Any, field: str = "id") -> dict[str, Any]:
    id_, _ = K.resolve(text, field)
    row = read.entity(id_)
    if row is None or row.get("subtype") != RULE_SUBTYPE:
        raise R.RecordNotFoundError(f"{field}: no policy rule {text!r}", id=str(text))
    return row


def _save_rule(txn: Txn, row: dict[str, Any]) -> dict[str, Any]:
    return _put(txn, row["id"], row["key"], RULE_TYPE, RULE_SUBTYPE, row["metadata"]["reason"], row["metadata"])


def _caller(txn: Txn) -> str:
    """A policy write is attributed to its caller; over a wire the dispatcher has refused a request with
    none (ServiceKeyCannotWriteError), so only an in-process call can arrive without one."""
    if txn.caller is None:
        raise invalid("caller", "missing", "a policy write is attributed to a caller: pass caller=")
    return txn.caller


def _slug(txn: Txn, reason: str) -> tuple[str, str]:
    """``(id, key)`` of a new rule: its slug from the reason, suffixed past every id already taken (by a
    rule, or by any row a caller keyed ``rule:…``)."""
    base = _SLUG_CUT.sub("-", reason.lower()).strip("-")[:SLUG_LENGTH].strip("-") or "rule"
    slug, n = base, 1
    while True:
        id_, key = K.resolve(f"rule:{slug}")
        if txn.entity(id_) is None:
            return id_, key  # type: ignore[return-value]
        n += 1
        slug = f"{base}-{n}"


def _strings(value: Any, field: str, check: Any, what: str) -> list[str]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not 1 <= len(value) <= MAX_LIST:
        raise invalid(field, "wrong-type", f"1 to {MAX_LIST} strings")
    for i, item in enumerate(value):
        if not isinstance(item, str) or not check(item):
            raise invalid(f"{field}[{i}]", "bad-value", f"{quote(item)} is not {what}")
    return list(dict.fromkeys(value))


def _door_pattern(pattern: str) -> bool:
    """A door entry names at least one governed door: a rule over reads or policy doors would bind nothing."""
    return any(door_matches(pattern, name) for name in GOVERNED)


def _subject(item: str) -> bool:
    return (
        item == "*"
        or bool(_ROLE.fullmatch(item))
        or (not item.startswith("role:") and bool(_PRINCIPAL.fullmatch(item)))
    )


def _reason(a: dict[str, Any]) -> str:
    reason = a["reason"]
    if not isinstance(reason, str) or not reason.strip() or len(reason) > 1000:
        raise invalid("reason", "bad-value", "1 to 1000 characters saying why")
    return reason.strip()


def _new_rule(
    txn: Txn, a: dict[str, Any], tier: int, subject: list[str], except_: list[str], by: dict[str, str], status: str
) -> dict[str, Any]:
    doors = _strings(a["doors"], "doors", _door_pattern, "a row-writing door outside policy.* (or a pattern of one)")
    where = a.get("where")
    if where is not None:
        compile_where(where)  # refuses a malformed tree by name before anything is staged
    reason = _reason(a)
    board = _board(txn)
    id_, key = _slug(txn, reason)
    meta: dict[str, Any] = {
        "tier": tier,
        "status": status,
        "subject": subject,
        "except": except_,
        "doors": doors,
        "reason": reason,
        "locked": False,
        **by,
    }
    if where is not None:
        meta["where"] = where
    row = _put(txn, id_, key, RULE_TYPE, RULE_SUBTYPE, reason, meta)
    board["metadata"]["rules"].append(row["id"])
    if status == "active":
        board["metadata"]["active"].append(row["id"])
    _put_board(txn, board)
    return {"id": key, "tier": tier, "status": status}


# -- the six writes --------------------------------------------------------------------------------


@door("policy.declare", WRITE)
def declare(txn: Txn, a: dict[str, Any], ctx: Context) -> dict[str, Any]:
    """A tier-2 rule: its subject is the caller, it binds only the caller, and it is in force at once."""
    caller = _caller(txn)
    return _new_rule(txn, a, 2, [caller], [], {"declaredBy": caller}, "active")


@door("policy.propose", WRITE)
def propose(txn: Txn, a: dict[str, Any], ctx: Context) -> dict[str, Any]:
    """A tier-1 proposal, inert until the owner ratifies it."""
    caller = _caller(txn)
    subject = _strings(a["subject"], "subject", _subject, "'*', a principal id or role:<name>")
    except_ = _strings(a["except"], "except", _subject, "a principal id or role:<name>") if a.get("except") else []
    return _new_rule(txn, a, 1, subject, except_, {"proposedBy": caller}, "proposed")


def _state(row: dict[str, Any], reason: str, message: str, **more: Any) -> R.Refusal:
    return R.RecordStateError(f"{row['key']}: {message}", state=row["metadata"]["status"], reason=reason, **more)


def _set_status(txn: Txn, row: dict[str, Any], status: str) -> None:
    board = _board(txn)
    meta = row["metadata"]
    active = board["metadata"]["active"]
    if status == "active" and row["id"] not in active:
        active.append(row["id"])
    elif status != "active" and row["id"] in active:
        active.remove(row["id"])
    meta["status"] = status
    _save_rule(txn, row)
    _put_board(txn, board)


@door("policy.retire", WRITE)
def retire(txn: Txn, a: dict[str, Any], ctx: Context) -> dict[str, Any]:
    """A caller's own tier-2 rule or own proposal retires at once; an active tier-1 rule gets a retirement
    proposal, which takes effect on ratify. A locked rule takes neither."""
    caller = _caller(txn)
    row = _rule_row(txn, a["id"])
    meta = row["metadata"]
    reason = _reason(a)
    if meta["status"] == "retired":
        raise _state(row, "already-retired", "the rule is already retired")
    if meta["tier"] == 2:
        if meta.get("declaredBy") != caller:
            raise _state(
                row, "not-declarer", f"a tier-2 rule is retired only by its declarer, {meta.get('declaredBy')}"
            )
    elif meta["status"] == "proposed":
        if meta.get("proposedBy") != caller:
            raise _state(row, "not-proposer", f"a proposal is withdrawn only by its proposer, {meta.get('proposedBy')}")
    else:
        if meta["locked"]:
            raise R.PolicyLockedError(
                f"{row['key']} is locked; the owner must policy.unlock it first",
                rule=row["key"],
                frozen=_board(txn)["metadata"]["frozen"],
            )
        if "retirement" in meta:
            raise _state(row, "retirement-pending", "a retirement is already proposed for this rule")
        meta["retirement"] = {"proposedBy": caller, "reason": reason, "at": txn.timestamp}
        _save_rule(txn, row)
        return {"id": row["key"], "status": "retirement-proposed"}
    meta["retiredBy"], meta["retiredReason"] = caller, reason
    _set_status(txn, row, "retired")
    return {"id": row["key"], "status": "retired"}


@door("policy.ratify", WRITE)
def ratify(txn: Txn, a: dict[str, Any], ctx: Context) -> dict[str, Any]:
    """The owner puts a proposal into effect (locked at once while the board is frozen), or a
    retirement proposal. Recorded under the caller, the token's ``sub``."""
    caller = _caller(txn)
    row = _rule_row(txn, a["id"])
    meta = row["metadata"]
    note = a.get("note")
    if note is not None and (not isinstance(note, str) or len(note) > 1000):
        raise invalid("note", "bad-value", "at most 1000 characters")
    if meta["tier"] == 1 and meta["status"] == "proposed":
        meta["ratifiedBy"] = caller
        meta["locked"] = _board(txn)["metadata"]["frozen"]
        if note is not None:
            meta["note"] = note
        _set_status(txn, row, "active")
        return {"id": row["key"], "status": "active", "ratifiedBy": caller}
    if meta["status"] == "active" and "retirement" in meta:
        if meta["locked"]:
            raise _state(row, "locked", "the rule was locked after its retirement was proposed; unlock it first")
        meta["retirement"]["ratifiedBy"] = caller
        if note is not None:
            meta["retirement"]["note"] = note
        _set_status(txn, row, "retired")
        return {"id": row["key"], "status": "retired", "ratifiedBy": caller}
    raise _state(row, "not-a-proposal", "neither a proposal nor a rule with a retirement proposed")


@door("policy.unlock", WRITE)
def unlock(txn: Txn, a: dict[str, Any], ctx: Context) -> dict[str, Any]:
    """The owner lifts one rule's lock, or (with no id) the freeze and every lock."""
    _caller(txn)
    board = _board(txn)
    if a.get("id") is not None:
        targets = [_rule_row(txn, a["id"])]
    else:
        board["metadata"]["frozen"] = False
        board["metadata"].pop("freeze", None)
        targets = [row for row in (txn.entity(rid) for rid in board["metadata"]["rules"]) if row is not None]
        _put_board(txn, board)
    unlocked = []
    for row in targets:
        if row["metadata"]["locked"]:
            row["metadata"]["locked"] = False
            _save_rule(txn, row)
            unlocked.append(row["key"])
    return {"unlocked": unlocked, "frozen": board["metadata"]["frozen"]}


@door("policy.freeze", WRITE)
def freeze(txn: Txn, a: dict[str, Any], ctx: Context) -> dict[str, Any]:
    """The owner locks every active tier-1 rule at once; rules ratified while frozen are locked too."""
    caller = _caller(txn)
    board = _board(txn)
    freeze_: dict[str, Any] = {"by": caller, "at": txn.timestamp}
    if a.get("reason") is not None:
        freeze_["reason"] = _reason(a)
    board["metadata"]["frozen"], board["metadata"]["freeze"] = True, freeze_
    locked = []
    for rid in board["metadata"]["active"]:
        row = txn.entity(rid)
        if row is not None and row["metadata"]["tier"] == 1:
            if not row["metadata"]["locked"]:
                row["metadata"]["locked"] = True
                _save_rule(txn, row)
            locked.append(row["key"])
    _put_board(txn, board)
    return {"frozen": True, "locked": locked}


# -- the three reads -------------------------------------------------------------------------------


def _answer(row: dict[str, Any]) -> dict[str, Any]:
    """A rule as DOORS 9.3 writes it."""
    m = row["metadata"]
    out: dict[str, Any] = {
        "id": row["key"],
        "tier": m["tier"],
        "status": m["status"],
        "subject": m["subject"],
        "except": m["except"],
        "doors": m["doors"],
    }
    if "where" in m:
        out["where"] = m["where"]
    out["reason"] = m["reason"]
    for name in ("declaredBy", "proposedBy", "ratifiedBy"):
        if name in m:
            out[name] = m[name]
    out["locked"] = m["locked"]
    if "retirement" in m:
        out["retirement"] = {k: m["retirement"][k] for k in ("proposedBy", "reason", "at")}
    out["createdAt"], out["generation"] = row["createdAt"], row["generation"]
    return out


def _limit(a: dict[str, Any], default: int) -> int:
    return rows.integer(a["limit"] if a.get("limit") is not None else default, "limit", 1, 1000)


def _page(snap: Snapshot, name: str, a: dict[str, Any]) -> tuple[Snapshot, int]:
    """The snapshot a page reads (a cursor's pinned generation) and where it starts."""
    if a.get("cursor") is None:
        return snap, 0
    generation, position = decode_cursor(a["cursor"], name, a)
    if not isinstance(position, int) or generation > snap.generation:
        raise R.CursorInvalidError("the cursor is malformed, or belongs to another door or query")
    return snap.at(generation), position


@door("policy.rules", READ)
def list_rules(snap: Snapshot, id_: Any, a: dict[str, Any]) -> dict[str, Any]:
    """The rules, in the order they were made, with whether the board is frozen."""
    status = a["status"] if a.get("status") is not None else "active"
    if status not in STATUSES:
        raise invalid("status", "bad-value", f"one of {list(STATUSES)}")
    tier, subject = a.get("tier"), a.get("subject")
    limit = _limit(a, 100)
    view, start = _page(snap, "policy.rules", a)
    board = _board(view)
    found: list[dict[str, Any]] = []
    ids = board["metadata"]["rules"]
    position = start
    while position < len(ids) and len(found) < limit:
        row = view.entity(ids[position])
        position += 1
        if row is None:
            continue
        m = row["metadata"]
        if (
            (status == "all" or m["status"] == status)
            and (tier is None or m["tier"] == tier)
            and (subject is None or subject in m["subject"])
        ):
            found.append(_answer(row))
    more = position < len(ids)
    return {
        "rules": found,
        "frozen": board["metadata"]["frozen"],
        "cursor": encode_cursor("policy.rules", a, view.generation, position) if more else None,
        "hasMore": more,
    }


def _since(value: Any) -> int | None:
    if value is None:
        return None
    try:  # timetravel's reader of an int-or-ISO instant, naming this field
        return _instant(value)
    except R.InvalidArgumentError:
        raise invalid(
            "since", "wrong-type", "an ISO-8601 instant with a zone, or milliseconds since the epoch"
        ) from None


@door("policy.audit", READ)
def list_audit(snap: Snapshot, id_: Any, a: dict[str, Any]) -> dict[str, Any]:
    """The refused writes, oldest first: who, through which service, which door and which rules."""
    since = _since(a.get("since"))
    limit = _limit(a, 50)
    view, start = _page(snap, "policy.audit", a)
    total = _board(view)["metadata"]["audits"]
    rule = a.get("rule")
    events: list[dict[str, Any]] = []
    n = max(start, 1)
    while n <= total and len(events) < limit:
        row = view.entity(audit_id(n))
        n += 1
        if row is None:
            continue
        m = row["metadata"]
        if (
            (since is None or row["createdAt"] >= since)
            and a.get("caller") in (None, m["caller"])
            and a.get("door") in (None, m["door"])
            and (rule is None or rule in m["rules"])
        ):
            event = {
                "id": row["id"],
                "at": row["createdAt"],
                "caller": m["caller"],
                "via": m["via"],
                "door": m["door"],
                "rules": m["rules"],
            }
            if "target" in m:
                event["target"] = m["target"]
            events.append(event)
    more = n <= total
    return {
        "events": events,
        "cursor": encode_cursor("policy.audit", a, view.generation, n) if more else None,
        "hasMore": more,
    }


@door("policy.check", READ, asks=True, threaded=True)  # its caller defaults to who is asking
def check(snap: Snapshot, id_: Any, a: dict[str, Any]) -> dict[str, Any]:
    """Whether the rules would stop a write, and which: the commit path's verdict on the same write.

    With ``args``, the write is staged over this snapshot by the commit path's own steps
    (``staging.rehearse``: prepared, its file content measured, its texts embedded, its rule run for the
    caller and service; never committed) and :func:`judge` answers, as it answers the commit. A write its
    own rule refuses never reaches the judge, for real or here: no rule stops it. ``id`` is then not
    consulted: the rows judged are the ones the write stages, the row it targets among them.

    Without ``args`` there is no write to stage: the rules binding the door and the caller are asked of
    ``id``'s row as it stands, or, with no ``id``, of rows unknown (a rule with a ``where`` may stop it)."""
    name = a["door"]
    target = D.BY_NAME.get(name)
    if target is None:
        raise invalid("door", "unknown-door", f"no door is named {quote(name)}")
    bound = _ASKING.get()
    if bound is not None and a.get("caller") in (None, bound.caller):
        actor = Actor(bound.caller, bound.via, tuple(bound.roles))
    else:
        actor = Actor(a.get("caller"))
    if actor.caller is None:
        raise invalid("caller", "missing", "name the caller to check for")
    board = snap.lookup(K.entity_key(BOARD_ID))
    if board is None or not governs(name):
        hits: list[Rule] = []
    elif a.get("args") is not None and name in REGISTERED:
        try:
            txn = staging.rehearse(snap, name, a["args"], actor.caller, actor.via)
        except R.Refusal:
            hits = []  # refused on its own terms before the guardrails are asked, as the commit would be
        else:
            hits = judge(txn, name, actor.roles)
    else:
        row = _standing(snap, a.get("id"))
        hits = stopping(snap.lookup, board, name, actor, lambda: row)
    return {"allowed": not hits, "caller": actor.caller, "rules": [r.brief() for r in hits]}


def _standing(snap: Snapshot, text: Any) -> list[tuple[str, dict[str, Any]]] | None:
    """``id``'s row as it stands, for a check with no write to stage; None (rows unknown) without one."""
    if text is None:
        return None
    row_id = K.resolve(text)[0]
    row = snap.entity(row_id)
    if row is not None:
        return [("e", row)]
    relation = snap.relation(row_id)
    return [("r", relation)] if relation is not None else None
