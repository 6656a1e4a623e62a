"""The aggregate doors: defineAggregate, removeAggregate, aggregates, aggregate, and find's aggregated shape
(door catalogue 5.1, 5.2, 4.4). A definition is a row (``brainy/index/aggregates.py``); ``aggregate`` answers
at the durable head from the state the follower keeps (``brainy/index/aggregate_follower.py``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from brainy.contract import arguments
from brainy.contract import doors as D
from brainy.contract import refusals as R
from brainy.contract.limits import quote
from brainy.doors.registry import WRITE, door
from brainy.doors.writes import Context, _stamp
from brainy.index.aggregates import (
    DEFINITION_SUBTYPE,
    DEFINITION_TYPE,
    NAME,
    Aggregate,
    Definition,
    definition_id,
    is_definition_row,
)
from brainy.index.snapshot import Snapshot
from brainy.index.where import ENTITY_FIELDS, compile_where, sort_by_value
from brainy.store import keys as K
from brainy.store import rows
from brainy.store.rows import invalid
from brainy.store.txn import Txn

# -- answering --------------------------------------------------------------------------------------------


def _not_found(name: Any) -> R.Refusal:
    return R.AggregateNotFoundError(f"no aggregate is defined under the name {quote(name)}", aggregate=name)


def _definition_at(view: Snapshot, name: Any) -> Definition:
    d = Definition.of_row(view.entity(definition_id(name))) if isinstance(name, str) else None
    if d is None or d.name != name:
        raise _not_found(name)
    return d


def _where_view(group_key: dict[str, Any], metrics: dict[str, Any], count: int) -> dict[str, Any]:
    """An AggregateRow as a where sees it: group keys and metric names as paths, ``count`` beside them."""
    row: dict[str, Any] = {"metadata": {"count": count}}
    for path, value in group_key.items():
        segments = path.split(".")
        node = row if segments[0] in ENTITY_FIELDS else row["metadata"]
        for segment in segments[:-1]:
            node = node.setdefault(segment, {})
        node[segments[-1]] = value
    row["metadata"].update(metrics)
    return row


def page(
    d: Definition, every: list[dict[str, Any]], q: dict[str, Any], offset: int | None = None
) -> tuple[list[dict[str, Any]], int, int]:
    """The AggregateQuery ``q`` over an aggregate's rows (:meth:`Aggregate.rows`, in group key order): the
    page of rows (copies), how many rows matched, the offset used."""
    where = compile_where(q.get("where"))
    order = q["order"]
    if order not in ("asc", "desc"):
        raise invalid("order", "bad-operand", "asc or desc")
    limit = rows.integer(q["limit"], "limit", 1, 1000)
    offset = rows.integer(q["offset"] if offset is None else offset, "offset", 0, 10000)
    order_by = q.get("orderBy") or "count"
    keys = [path for path, _, _ in d.groups]
    if order_by != "count" and order_by not in keys and order_by not in {m for m, _, _ in d.metrics}:
        raise invalid("orderBy", "unknown-field", f"order by count, a group key {keys} or a metric")
    kept = [
        r for r in every if where.matches_all or where.matches(_where_view(r["groupKey"], r["metrics"], r["count"]))
    ]

    def value_of(i: int) -> tuple[bool, Any]:
        r = kept[i]
        for place in (r["metrics"], r["groupKey"]):
            if order_by in place:
                return True, place[order_by]
        return (True, r["count"]) if order_by == "count" else (False, None)

    ordered = sort_by_value(list(range(len(kept))), value_of, int, order == "desc")  # kept is in key order
    found = [kept[i] for i in ordered[offset : offset + limit]]
    return (
        [{"groupKey": dict(r["groupKey"]), "metrics": dict(r["metrics"]), "count": r["count"]} for r in found],
        len(kept),
        offset,
    )


# -- the doors --------------------------------------------------------------------------------------------


@door("defineAggregate", WRITE)
def define_aggregate(txn: Txn, a: dict[str, Any], ctx: Context) -> dict[str, Any]:
    """Store (or replace) a definition row; answers how many groups it holds once this commit lands."""
    d = Definition(a)
    id_ = definition_id(d.name)
    before = txn.entity(id_)
    if before is not None and not is_definition_row(before):
        raise invalid("name", "id-taken", f"the id {id_} this name derives is held by a row that is no aggregate")
    row: dict[str, Any] = {
        "id": id_,
        "type": DEFINITION_TYPE,
        "subtype": DEFINITION_SUBTYPE,
        "service": None,
        "data": d.doc,
        "metadata": {},
        "visibility": "system",
        "confidence": None,
        "weight": None,
        "hasVector": False,
    }
    _stamp(txn, row, before)
    txn.put_entity(row)
    counted = Aggregate(d, (rows.unpack(raw) for raw in (txn.get(k) for k in txn.scan(K.ENTITY, b"f")) if raw))
    return {"name": d.name, "replaced": before is not None, "groups": len(counted.groups)}


@door("removeAggregate", WRITE)
def remove_aggregate(txn: Txn, a: dict[str, Any], ctx: Context) -> dict[str, Any]:
    name = a["name"]
    id_ = definition_id(name) if NAME.fullmatch(name) else None
    if id_ is None or Definition.of_row(txn.entity(id_)) is None:
        raise _not_found(name)
    txn.delete_entity(id_)
    return {"name": name}


@door("aggregates")
def aggregates(snap: Snapshot, id_: Any, a: dict[str, Any]) -> dict[str, Any]:
    """Every definition as defineAggregate stored it, by name."""
    if snap.at_head:
        with snap.aggregates() as state:
            return {"aggregates": state.definitions()}
    found = [d for d in map(Definition.of_row, snap.entities()) if d is not None]
    return {"aggregates": [d.doc for d in sorted(found, key=lambda d: d.name)]}


@door("aggregate")
def aggregate(snap: Snapshot, id_: Any, a: dict[str, Any]) -> dict[str, Any]:
    """One aggregate's rows: at the head from the maintained state, at a past generation from its rows."""
    name = a["name"]
    if snap.at_head:
        with snap.aggregates() as state:
            held = state.built.get(name)
            if held is None:
                raise _not_found(name)
            generation, definition, every = state.stamp, held.definition, held.rows()
    else:
        definition = _definition_at(snap, name)
        every, generation = Aggregate(definition, snap.entities()).rows(), snap.generation
    found, total, _ = page(definition, every, a)  # outside the lock: the rows are never changed
    return {"name": name, "rows": found, "total": total, "generation": generation}


def find_shape(q: Any, view: Snapshot, matching: Iterable[dict[str, Any]], cost: dict[str, int]) -> dict[str, Any]:
    """find's aggregated shape (4.4): a defined aggregate's rows over the entities find's metadata leg
    selected (and the definition's source), ``results`` empty. ``aggregate`` is a name (the aggregate
    door's paging defaults) or an AggregateQuery; a cursor continues the same query at its generation."""
    spec = q.args["aggregate"]
    if isinstance(spec, str):
        spec = {"name": spec}
    if not isinstance(spec, dict):
        raise invalid("aggregate", "wrong-type", "an aggregate name or an AggregateQuery")
    spec = arguments.check(D.BY_NAME["aggregate"], spec, "aggregate.")
    if q.ranked:
        raise invalid("aggregate", "ranked-and-aggregated", "the aggregated shape takes no query or vector")
    d = _definition_at(view, spec["name"])
    found, total, offset = page(
        d, Aggregate(d, matching).rows(), spec, q.offset if q.args.get("cursor") is not None else None
    )
    more = offset + len(found) < total
    return {
        "results": [],
        "brain": view.brain,
        "generation": view.generation,
        "total": total,
        "cursor": q.cursor(view.generation, offset + len(found)) if more else None,
        "hasMore": more,
        "legs": q.legs,
        "cost": cost,
        "rows": found,
    }
