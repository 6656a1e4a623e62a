"""The write doors' rules: what each door checks and which ops it makes (door catalogue, 5.2).

Each door is a registered function ``(txn, args, ctx) -> answer`` that validates everything
it needs before its first op, so a refusal leaves the commit untouched; the commit path wraps
the answer with the commit's generation and timestamp. ``args`` arrive checked against the
door's declared arguments; a batch checks each item against its own door's declaration.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import msgpack

from brainy._speedups import vecpack
from brainy._speedups.errors import VectorRefused
from brainy.contract import arguments
from brainy.contract import doors as D
from brainy.contract import refusals as R
from brainy.contract.limits import quote
from brainy.doors.registry import REGISTERED, WRITE, door
from brainy.index.embedder import text_of
from brainy.store import keys as K
from brainy.store import rows
from brainy.store.rows import check_args, invalid, need
from brainy.store.txn import Txn

MAX_BATCH = 10_000


@dataclass
class Context:
    """What a rule may know beyond its arguments: the brain's name, and the embeddings of the texts it
    may store, computed before the commit lock was taken (see :func:`texts`)."""

    brain: str
    vectors: dict[str, bytes] = field(default_factory=dict)  # text -> its embedding, float32 bytes
    # the brain's read snapshot at its durable head, for a rule that searches what is there (memory.remember's
    # dedupe); what its door's ``prepares`` made before the lock (registry.py), e.g. a provider's summary
    view: Callable[[], Any] | None = None
    prepared: dict[str, Any] = field(default_factory=dict)
    # a file write's content, stored and durable before the lock (brainy/doors/vfs.py ``stage``)
    staged: Any = None
    blobs: Any = None  # the writer's blob store, for the rare write a rule must store under the lock
    # the entity rows of the commits applied above a generation (``CommitPath.written_since``): what a search of
    # ``view`` taken under this commit lock cannot see yet, because those commits are not durable
    since: Callable[[int], list[dict[str, Any]]] | None = None

    def vector_of(self, text: str) -> bytes | None:
        """The embedding of ``text``, or None when it was not made (no model). Never computed here: a
        rule runs under the commit lock, and inference never does."""
        return self.vectors.get(text)


# -- what a commit embeds -----------------------------------------------------------------------

_EMBEDS = {"add": "add", "update": "update", "relate": "relation", "updateRelation": "relation"}
_BATCHES = {"addMany": "add", "updateMany": "update", "relateMany": "relate"}


def _vectors_at() -> dict[str, str]:
    """Where each door that takes a given vector carries it: ``"vector"``, its argument (a write that stores it, or a
    read that searches by it), or ``"items"``, each item's (a batch of such a write). A transport packs a body's
    numbers there before decoding it (brainy/net/codecs.py ``decode``); the door checks them with
    :func:`brainy.store.rows.vector`."""
    takes = {
        name
        for name, entry in D.BY_NAME.items()
        if any(p.name == "vector" and p.type.startswith("number[") for p in entry.document_params)
    }
    return {name: "vector" for name in takes} | {batch: "items" for batch, one in _BATCHES.items() if one in takes}


VECTORS_AT = _vectors_at()


def texts(door: str, args: Any) -> list[str]:
    """The texts a write door's rule will ask the embedding of, read from its raw arguments, each once:
    an entity's ``data`` when no vector comes with it (add, update), a relation's ``data`` (relate,
    updateRelation), through batches and transactions. Malformed arguments are skipped here: the
    rule refuses them."""
    entry = REGISTERED.get(door)
    if entry is not None and entry.embeds is not None:  # a door that says what it stores (the profiles)
        return list(dict.fromkeys(entry.embeds(args))) if isinstance(args, dict) else []
    found: dict[str, None] = {}
    _texts(door, args, found)
    return list(found)


def _texts(door: Any, a: Any, found: dict[str, None]) -> None:
    if not isinstance(a, dict):
        return
    kind = _EMBEDS.get(door)
    if kind is not None:
        given = a.get("vector") is not None if kind == "add" else "vector" in a
        if "data" in a and not (kind != "relation" and given):
            text = text_of(a["data"])
            if text is not None:
                found[text] = None
    elif door in _BATCHES and isinstance(a.get("items"), list):
        one = _BATCHES[door]
        for item in a["items"]:
            if isinstance(item, dict) and "data" in item:  # a text is only ever an item's data
                _texts(one, item, found)
    elif door == "transact" and isinstance(a.get("ops"), list):
        for op in a["ops"]:
            if isinstance(op, dict):
                _texts(op.get("door"), op.get("args"), found)
    elif isinstance(door, str) and (entry := REGISTERED.get(door)) is not None and entry.embeds is not None:
        found.update(dict.fromkeys(entry.embeds(a)))  # a door built on these rules says what it stores (import)


def _stamp(txn: Txn, row: dict[str, Any], before: dict[str, Any] | None) -> None:
    row["generation"] = txn.generation
    row["updatedAt"] = txn.timestamp
    row["createdAt"] = before["createdAt"] if before else txn.timestamp
    row["denseInt"] = before["denseInt"] if before else txn.mint()
    if before and "createdBy" in before:
        row["createdBy"] = before["createdBy"]
    elif txn.caller is not None:
        row["createdBy"] = txn.caller
    if txn.caller is not None:
        row["updatedBy"] = txn.caller
    else:
        row.pop("updatedBy", None)


def _callers_row(row: dict[str, Any], field: str = "id") -> dict[str, Any]:
    """A row the engine doors may change: not one a layer wrote (DOORS 2.3: its reserved subtype says whose
    it is; a policy rule changed here would be a guardrail lifted by an ordinary update). Removing stays
    open to ``remove`` and ``clear``."""
    subtype = row.get("subtype") or ""
    if subtype.startswith(rows.RESERVED_SUBTYPE_PREFIXES):
        raise invalid(field, "reserved-subtype", f"{row['id']} is a {subtype} row; its own layer's doors change it")
    return row


def _existing_entity(txn: Txn, text: Any, field: str = "id") -> dict[str, Any]:
    id_, _ = K.resolve(text, field)
    row = txn.entity(id_)
    if row is None:
        raise R.EntityNotFoundError(f"{field}: no entity {text!r}", id=text)
    return row


def _precondition(args: dict[str, Any], row: dict[str, Any]) -> None:
    if args.get("ifGeneration") is not None:
        expected = rows.integer(args["ifGeneration"], "ifGeneration", 0)
        if row["generation"] != expected:
            raise R.PreconditionFailedError(
                f"the row is at generation {row['generation']}, not {expected}",
                expected=expected,
                actual=row["generation"],
            )


def _merge_metadata(old: dict[str, Any], patch: Any, merge: bool) -> dict[str, Any]:
    if patch is None:
        return {} if not merge else old
    if not isinstance(patch, dict):
        raise invalid("metadata", "wrong-type", "must be an object")
    if not merge:
        return rows.metadata(patch)
    merged = dict(old)
    for key, value in patch.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = value
    return rows.metadata(merged)


# -- entities -----------------------------------------------------------------------------------

Rule = Callable[[Txn, Any, Context], dict[str, Any]]


# what ``add`` reads when an argument is left out: the contract's defaults (a batch's items are checked without a
# copy of each with its defaults put in, brainy/contract/arguments.py ``Declared.check``)
_ADD_ARGS = arguments.declared(D.BY_NAME["add"])
_UPSERT, _VISIBILITY = _ADD_ARGS.default("upsert"), _ADD_ARGS.default("visibility")


_packers = threading.local()  # a Packer is no thread's to share: a rule runs in a commit, or in a rehearsal beside it


def _packer() -> msgpack.Packer:
    """This thread's Packer for rows (msgpack.packb makes one a call: half its cost for a row of add's)."""
    packer = getattr(_packers, "packer", None)
    if packer is None:
        packer = _packers.packer = msgpack.Packer(use_bin_type=True)
    return packer


def _pack_row(row: dict[str, Any]) -> bytes:
    """``rows.pack(row)``'s bytes from this thread's Packer."""
    return _packer().pack(row)


def _plain_adds() -> tuple[Any, ...]:
    """What :meth:`Txn.add_minted` takes from this rule: what it checks a plain add against, and how it packs one
    (the row by this thread's Packer: a batch runs in one thread)."""
    return (
        rows.NOUN_TYPES,
        rows.RESERVED_METADATA,
        _VISIBILITY,
        vecpack.pack,  # called with the length from here: no Python frame a row
        rows.DIMENSIONS,
        VectorRefused,
        _packer().pack,
    )


@door("add", WRITE)
def add(txn: Txn, a: dict[str, Any], ctx: Context) -> dict[str, Any]:
    kind = rows.noun(need(a, "type"))
    minted = None
    if a.get("id") is not None:
        id_, key = K.resolve(a["id"])
    else:
        id_, minted = K.mint_entity()
        key = None
    get = a.get
    data = rows.content(get("data"))
    # checked in this order (the first refusal is the one answered), the row's fields in this order (its bytes)
    sub = rows.subtype(get("subtype"))
    service = rows.string(get("service"), "service", nullable=True)
    meta = rows.metadata(get("metadata"))
    seen = rows.visibility(get("visibility", _VISIBILITY))
    confidence = rows.unit_number(get("confidence"), "confidence")
    weight = rows.unit_number(get("weight"), "weight")
    vector = rows.vector(a["vector"]) if get("vector") is not None else None
    embedded = False
    text = text_of(data) if vector is None else None
    if text is not None:
        vector = ctx.vector_of(text)
        embedded = vector is not None
    upsert = get("upsert", _UPSERT)
    row: dict[str, Any]
    if minted is not None:
        # an id minted here is new: a uuid7 past every one this process handed out, with 62 random bits no caller
        # guesses, so there is no row to read for it; the row is laid out whole, stamped as _stamp stamps a new one
        timestamp, caller = txn.timestamp, txn.caller
        row = {
            "id": id_,
            "type": kind,
            "subtype": sub,
            "service": service,
            "data": data,
            "metadata": meta,
            "visibility": seen,
            "confidence": confidence,
            "weight": weight,
            "hasVector": vector is not None,
            "generation": txn.generation,
            "updatedAt": timestamp,
            "createdAt": timestamp,
            "denseInt": txn.mint(),
        }
        if caller is not None:
            row["createdBy"] = caller
            row["updatedBy"] = caller
    else:
        row = {"id": id_, "key": key} if key is not None else {"id": id_}
        row.update(
            type=kind,
            subtype=sub,
            service=service,
            data=data,
            metadata=meta,
            visibility=seen,
            confidence=confidence,
            weight=weight,
            hasVector=vector is not None,
        )
        before = txn.entity(id_)
        if before is not None and not upsert:
            raise R.EntityExistsError(f"an entity {a.get('id')!r} already exists (pass upsert to replace it)", id=id_)
        if before is not None:
            _callers_row(before)
        _stamp(txn, row, before)
    # the row as stored is the whole row without its vector (rows.stored): packed before the vector goes in, so a
    # batch's rows are not each copied to leave it out
    raw = _pack_row(row)
    if vector is not None:
        row["vector"] = vector
    txn.put_entity(row, raw, minted=minted)
    answer: dict[str, Any] = {"id": id_, "key": key} if key is not None else {"id": id_}
    answer["embedded"] = embedded
    if vector is None:  # a row without a model is stored without a vector; repair embeds it later
        answer["reason"] = "no-data" if text is None else "no-model"
    return answer


@door("update", WRITE)
def update(txn: Txn, a: dict[str, Any], ctx: Context) -> dict[str, Any]:
    before = _callers_row(_existing_entity(txn, need(a, "id")))
    merge = a["merge"]
    changes: dict[str, Any] = {}
    if "data" in a:
        changes["data"] = rows.content(a["data"])
    if "metadata" in a:
        changes["metadata"] = _merge_metadata(before.get("metadata", {}), a["metadata"], merge)
    if "type" in a:
        changes["type"] = rows.noun(a["type"])
    if "subtype" in a:
        changes["subtype"] = rows.subtype(a["subtype"])
    if "service" in a:
        changes["service"] = rows.string(a["service"], "service", nullable=True)
    if "visibility" in a:
        changes["visibility"] = rows.visibility(a["visibility"])
    for name in ("confidence", "weight"):
        if name in a:
            changes[name] = rows.unit_number(a[name], name)
    vector = rows.vector(a["vector"]) if a.get("vector") is not None else None
    _precondition(a, before)
    row = dict(before)
    row.update(changes)
    embedded = False
    if vector is None and "vector" not in a and "data" in changes:
        # changed data re-embeds; without a model (or a text) the old vector would describe old data
        text = text_of(changes["data"])
        vector = ctx.vector_of(text) if text is not None else None
        embedded = vector is not None
        if vector is None:
            row.pop("vector", None)
            row["hasVector"] = False
    if vector is not None:
        row["vector"], row["hasVector"] = vector, True
    elif "vector" in a:  # an explicit null drops the vector
        row.pop("vector", None)
        row["hasVector"] = False
    _stamp(txn, row, before)
    txn.put_entity(row)
    if row.get("vector") != before.get("vector"):
        _endpoint_moved(txn, row["id"], ctx)
    return {"id": row["id"], "embedded": embedded}


@door("remove", WRITE)
def remove(txn: Txn, a: dict[str, Any], ctx: Context) -> dict[str, Any]:
    row = _existing_entity(txn, need(a, "id"))
    touching = txn.touching(row["id"])
    for rid in touching:
        txn.delete_relation(rid)
    txn.delete_entity(row["id"])
    return {"id": row["id"], "removedRelations": len(touching)}


# -- relations ----------------------------------------------------------------------------------


def _relation_vector(txn: Txn, row: dict[str, Any], before: dict[str, Any] | None, ctx: Context) -> None:
    """A relation's vector (DOORS 1.2): its data's embedding when it has data, else the mean of its
    endpoints' vectors when both have one. Unchanged data keeps the vector it already has."""
    text = text_of(row.get("data"))
    if text is not None and before is not None and before.get("data") == row.get("data") and before.get("vector"):
        return
    row.pop("vector", None)
    row["hasVector"] = False
    if text is not None:
        vector = ctx.vector_of(text)
        if vector is not None:
            row["vector"], row["hasVector"] = vector, True
        return
    a, b = txn.entity(row["from"]), txn.entity(row["to"])
    if a and b and a.get("vector") and b.get("vector"):
        mean = rows.mean_vector(a["vector"], b["vector"])
        if any(mean):  # opposite endpoints mean nothing, and a zero vector is never stored
            row["vector"], row["hasVector"] = mean, True


def _endpoint_moved(txn: Txn, entity_id: str, ctx: Context) -> None:
    """A relation without text of its own holds the mean of its endpoints' vectors: when an endpoint's
    vector changes (or goes), the relation's follows in the same commit, so it never describes the old one."""
    for rid in txn.touching(entity_id):
        before = txn.relation(rid)
        if before is None or text_of(before.get("data")) is not None:
            continue
        row = dict(before)
        _relation_vector(txn, row, before, ctx)
        if row.get("vector") != before.get("vector"):
            _stamp(txn, row, before)
            txn.put_relation(row)


@door("relate", WRITE)
def relate(txn: Txn, a: dict[str, Any], ctx: Context) -> dict[str, Any]:
    source = _existing_entity(txn, need(a, "from"), "from")
    target = _existing_entity(txn, need(a, "to"), "to")
    verb = rows.verb(a["type"])
    sub = rows.subtype(a.get("subtype"))
    fields: dict[str, Any] = {}
    if "weight" in a:
        fields["weight"] = rows.unit_number(a["weight"], "weight")
    if "confidence" in a:
        fields["confidence"] = rows.unit_number(a["confidence"], "confidence")
    if "metadata" in a:
        fields["metadata"] = rows.metadata(a["metadata"])
    if "data" in a:
        fields["data"] = rows.content(a["data"])
    if "service" in a:
        fields["service"] = rows.string(a["service"], "service", nullable=True)
    if "visibility" in a:
        fields["visibility"] = rows.visibility(a["visibility"])
    bidirectional = a["bidirectional"]
    given = K.resolve(a["id"])[0] if a.get("id") is not None else None
    answer = _put_relation(txn, source["id"], target["id"], verb, sub, fields, given, ctx)
    if bidirectional and source["id"] != target["id"]:
        answer["reverseId"] = _put_relation(txn, target["id"], source["id"], verb, sub, fields, None, ctx)["id"]
    return answer


def _put_relation(
    txn: Txn,
    from_id: str,
    to_id: str,
    verb: str,
    sub: str | None,
    fields: dict[str, Any],
    given: str | None,
    ctx: Context,
) -> dict[str, Any]:
    existing = txn.relation_by_identity(from_id, to_id, verb, sub)
    if existing is not None:
        if given is not None and given != existing:
            raise invalid(
                "id", "identity-taken", f"relation {existing} already joins these entities with this type and subtype"
            )
        before = txn.relation(existing)
        row = dict(before)
    else:
        rid = given or K.uuid7()
        if given is not None and txn.relation(rid) is not None:
            raise invalid("id", "id-taken", f"relation id {rid} is taken by another relation")
        before = None
        row = {
            "id": rid,
            "from": from_id,
            "to": to_id,
            "type": verb,
            "subtype": sub,
            "service": None,
            "weight": 1.0,
            "confidence": None,
            "metadata": {},
            "data": None,
            "visibility": "public",
        }
    row.update(fields)
    _relation_vector(txn, row, before, ctx)
    _stamp(txn, row, before)
    txn.put_relation(row)
    return {"id": row["id"], "existed": before is not None}


def _existing_relation(txn: Txn, text: Any) -> dict[str, Any]:
    rid, _ = K.resolve(text)
    row = txn.relation(rid)
    if row is None:
        raise R.RelationNotFoundError(f"no relation {text!r}", id=text)
    return row


@door("updateRelation", WRITE)
def update_relation(txn: Txn, a: dict[str, Any], ctx: Context) -> dict[str, Any]:
    before = _callers_row(_existing_relation(txn, need(a, "id")))
    merge = a["merge"]
    row = dict(before)
    for name in ("weight", "confidence"):
        if name in a:
            row[name] = rows.unit_number(a[name], name)
    if "metadata" in a:
        row["metadata"] = _merge_metadata(before.get("metadata", {}), a["metadata"], merge)
    if "data" in a:
        row["data"] = rows.content(a["data"])
    if "subtype" in a:
        row["subtype"] = rows.subtype(a["subtype"])
        other = txn.relation_by_identity(row["from"], row["to"], row["type"], row["subtype"])
        if other is not None and other != row["id"]:
            raise invalid(
                "subtype", "identity-taken", f"relation {other} already joins these entities with this type and subtype"
            )
    _precondition(a, before)
    _relation_vector(txn, row, before, ctx)
    _stamp(txn, row, before)
    txn.put_relation(row)
    return {"id": row["id"]}


@door("unrelate", WRITE)
def unrelate(txn: Txn, a: dict[str, Any], ctx: Context) -> dict[str, Any]:
    if a.get("id") is not None:
        if any(k in a for k in ("from", "to", "type", "subtype")):
            raise invalid("id", "ambiguous", "give an id, or from, to and type; not both")
        rid = _existing_relation(txn, a["id"])["id"]
    else:
        from_id = K.resolve(need(a, "from"), "from")[0]
        to_id = K.resolve(need(a, "to"), "to")[0]
        verb = rows.verb(need(a, "type"))
        sub = rows.subtype(a.get("subtype"))
        rid = txn.relation_by_identity(from_id, to_id, verb, sub)
        if rid is None:
            raise R.RelationNotFoundError(
                f"no {verb} relation from {a['from']!r} to {a['to']!r}",
                id=f"{a['from']}->{a['to']}:{verb}" + (f":{sub}" if sub else ""),
            )
    txn.delete_relation(rid)
    return {"removed": 1, "ids": [rid]}


# -- batches ------------------------------------------------------------------------------------


def _located(exc: R.Refusal, where: str) -> R.Refusal:
    """The same refusal with its field path placed inside the batch (``items[3].type``)."""
    if isinstance(exc, R.InvalidArgumentError):
        exc.fields["field"] = where + exc.fields["field"]
        exc.message = where + exc.message
    return exc


def _items(a: dict[str, Any], name: str = "items") -> list[Any]:
    items = need(a, name)
    if not isinstance(items, list):
        raise invalid(name, "wrong-type", "must be an array")
    if not 1 <= len(items) <= MAX_BATCH:
        raise invalid(name, "out-of-range", f"1 to {MAX_BATCH} entries")
    return items


def _nested(name: str, rule: Rule, txn: Txn, args: Any, ctx: Context) -> dict[str, Any]:
    """One door's rule run inside a batch or a transaction, its arguments checked as its own door's are."""
    return rule(txn, arguments.check(D.BY_NAME[name], args), ctx)


def _batch(name: str, rule: Rule, fill: bool = True, plain: Callable[[], tuple[Any, ...]] | None = None) -> Rule:
    """The batch door of ``name``: each item checked as ``name``'s arguments are (``fill``: with its defaults put
    in; without, the rule reads them itself) and run by ``rule``, a refused one rolled back to where it began.
    ``plain`` (add's): what :meth:`Txn.add_minted` takes, which stages the plain items in one walk between them."""

    def run(txn: Txn, a: dict[str, Any], ctx: Context) -> dict[str, Any]:
        items = _items(a)
        keep_going = a["continueOnError"]
        check = arguments.declared(D.BY_NAME[name]).check
        ids: list[str] = []
        failed: list[dict[str, Any]] = []
        walk = plain() if plain is not None else None
        i, n = 0, len(items)
        while i < n:
            if walk is not None:  # the plain items from here on, in one walk; the rule takes the item it stops at
                i = txn.add_minted(items, i, walk, ids)
                if i == n:
                    break
            point = txn.savepoint()
            try:
                ids.append(rule(txn, check(items[i], "", fill), ctx)["id"])
            except R.Refusal as exc:
                txn.rollback(point)
                exc = _located(exc, f"items[{i}].")
                if not keep_going:
                    raise R.TransactionAbortedError(
                        f"items[{i}] was refused ({exc.name}): nothing was written", index=i, error=exc.to_wire()
                    ) from exc
                failed.append({"index": i, "error": exc.to_wire()})
            i += 1
        return {"ids": ids, "failed": failed}

    run.__name__ = name + "Many"
    return door(name + "Many", WRITE)(run)


add_many = _batch("add", add, fill=False, plain=_plain_adds)  # add reads its defaults: its items are not each copied
update_many = _batch("update", update)
relate_many = _batch("relate", relate)


@door("removeMany", WRITE)
def remove_many(txn: Txn, a: dict[str, Any], ctx: Context) -> dict[str, Any]:
    keep_going = a["continueOnError"]
    if a.get("ids") is not None:
        if any(a.get(k) is not None for k in ("type", "where")):
            raise invalid("ids", "ambiguous", "give ids, or type/where with a limit; not both")
        targets: list[Any] = _items(a, "ids")
    else:
        if a.get("where") is not None:
            raise R.NotYetNativeError(
                "removeMany by where needs the where evaluator, which arrives in 0.3.0",
                door="removeMany",
                release="0.3.0",
            )
        if a.get("type") is None:
            raise invalid("ids", "missing", "give ids, or type with a limit")
        kind = rows.noun(a["type"])
        limit = rows.integer(need(a, "limit"), "limit", 1, MAX_BATCH)
        targets = [
            k for k in (K.id_of(key) for key in txn.scan(K.ENTITY, b"f")) if (txn.entity(k) or {}).get("type") == kind
        ]
        if len(targets) > limit:
            raise R.InvalidArgumentError(
                f"{len(targets)} entities match, more than the limit of {limit}: nothing was removed",
                field="limit",
                reason="over-limit",
                matched=len(targets),
            )
    removed: list[str] = []
    relations = 0
    failed: list[dict[str, Any]] = []
    for i, target in enumerate(targets):
        point = txn.savepoint()
        try:
            answer = remove(txn, {"id": target}, ctx)
        except R.Refusal as exc:
            txn.rollback(point)
            exc = _located(exc, f"ids[{i}].")
            if not keep_going:
                raise R.TransactionAbortedError(
                    f"ids[{i}] was refused ({exc.name}): nothing was written", index=i, error=exc.to_wire()
                ) from exc
            failed.append({"index": i, "error": exc.to_wire()})
        else:
            removed.append(answer["id"])
            relations += answer["removedRelations"]
    return {"removed": removed, "removedRelations": relations, "failed": failed}


TX_DOORS: dict[str, Rule] = {
    "add": add,
    "update": update,
    "remove": remove,
    "relate": relate,
    "updateRelation": update_relation,
    "unrelate": unrelate,
}


@door("transact", WRITE)
def transact(txn: Txn, a: dict[str, Any], ctx: Context) -> dict[str, Any]:
    ops = _items(a, "ops")
    results = []
    for i, op in enumerate(ops):
        try:
            spec = check_args(op, frozenset(("door", "args")), f"ops[{i}].")
            rule = TX_DOORS.get(need(spec, "door", f"ops[{i}]."))
            if rule is None:
                raise invalid(
                    f"ops[{i}].door", "unknown-door", f"{quote(spec['door'])} is not one of {sorted(TX_DOORS)}"
                )
            results.append(_nested(spec["door"], rule, txn, spec.get("args"), ctx))
        except R.Refusal as exc:
            if isinstance(exc, R.InvalidArgumentError) and not exc.fields["field"].startswith("ops["):
                exc = _located(exc, f"ops[{i}].args.")
            raise R.TransactionAbortedError(
                f"ops[{i}] was refused ({exc.name}): nothing was written", index=i, error=exc.to_wire()
            ) from exc
    return {"receipt": {"ops": len(ops), "results": results}}


@door("clear", WRITE)
def clear(txn: Txn, a: dict[str, Any], ctx: Context) -> dict[str, Any]:
    if need(a, "confirm") != ctx.brain:
        raise invalid("confirm", "confirm-mismatch", "must equal the brain's name")
    relations = [K.id_of(k) for k in txn.scan(K.RELATION, b"s")]
    entities = [K.id_of(k) for k in txn.scan(K.ENTITY, b"f")]
    for rid in relations:
        txn.delete_relation(rid)
    for eid in entities:
        txn.delete_entity(eid)
    return {"removedEntities": len(entities), "removedRelations": len(relations)}
