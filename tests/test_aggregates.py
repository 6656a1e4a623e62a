"""Aggregates (DOORS.md 5.1, 5.2, 4.4): defineAggregate, removeAggregate, aggregates, aggregate and find's
aggregated shape, against a brute-force oracle that recomputes every aggregate from the snapshot's rows.

The oracle is written apart from brainy/index/aggregates.py: exact sums by Fraction, windows by
datetime.replace, extremes by min/max over the values. The maintained answer must equal it exactly
(the same JSON, so 1 and 1.0 are told apart) across adds, updates that move rows between groups,
removes, flushes, compactions, a reopen, and asOf at past generations.
"""

from __future__ import annotations

import json
import math
import random
import sys
from datetime import UTC, datetime, timedelta
from fractions import Fraction
from typing import Any

import pytest
from helpers import new_store
from server import curl

from brainy.contract import refusals as R
from brainy.engine import Brain
from brainy.index.where import compile_where

CALLER = "person:tester"
UTC = UTC

SALES = {
    "name": "sales",
    "source": {"type": "product"},
    "groupBy": ["cat"],
    "metrics": {
        "n": {"op": "count"},
        "priced": {"op": "count", "field": "price"},
        "total": {"op": "sum", "field": "price"},
        "mean": {"op": "avg", "field": "price"},
        "lo": {"op": "min", "field": "price"},
        "hi": {"op": "max", "field": "price"},
        "sd": {"op": "stddev", "field": "price"},
        "var": {"op": "variance", "field": "qty"},
    },
}
DAILY = {
    "name": "daily",
    "source": {"type": ["product", "event"], "where": {"qty": {"gte": 2}}},
    "groupBy": [{"field": "when", "window": "day"}, "cat"],
    "metrics": {"qty": {"op": "sum", "field": "qty"}, "first": {"op": "min", "field": "when"}},
}
WEEKS = {
    "name": "weeks",
    "source": {},
    "groupBy": [{"field": "when", "window": "week"}, "specs.tier"],
    "metrics": {"hi": {"op": "max", "field": "qty"}},
}
MONTHS = {
    "name": "months",
    "source": {"subtype": "sale"},
    "groupBy": [{"field": "when", "window": "month"}, {"field": "createdAt", "window": "year"}],
    "metrics": {"v": {"op": "variance", "field": "price"}},
}
QUARTERS = {
    "name": "quarters",
    "source": {"service": "shop"},
    "groupBy": [{"field": "when", "window": "quarter"}],
    "metrics": {"n": {"op": "count", "field": "cat"}},
}
HOURS = {
    "name": "hours",
    "source": {"where": {"cat": {"in": ["a", "b"]}}},
    "groupBy": [{"field": "when", "window": "hour"}],
    "metrics": {"s": {"op": "sum", "field": "price"}},
}
DEFINITIONS = (SALES, DAILY, WEEKS, MONTHS, QUARTERS, HOURS)


# -- the oracle ------------------------------------------------------------------------------------------


def _read(row: dict[str, Any], path: str) -> Any:
    head, *rest = path.split(".")
    if head in ("createdAt", "updatedAt", "type", "subtype", "service", "visibility", "weight", "generation"):
        node: Any = row.get(head, None)
        parts = rest
    else:
        node, parts = row.get("metadata", {}), path.split(".")
    for part in parts:
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def _ms(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return math.floor(value)
    try:  # Python 3.11 reads a trailing Z itself
        moment = datetime.fromisoformat(value) if isinstance(value, str) else None
    except ValueError:
        moment = None
    return None if moment is None or moment.tzinfo is None else round(moment.timestamp() * 1000)


def _window(value: Any, window: str) -> int | None:
    ms = _ms(value)
    if ms is None:
        return None
    moment = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(milliseconds=ms)
    start = moment.replace(minute=0, second=0, microsecond=0)
    if window != "hour":
        start = start.replace(hour=0)
    if window == "week":
        start -= timedelta(days=start.weekday())
    if window in ("month", "quarter", "year"):
        start = start.replace(day=1)
    if window == "quarter":
        start = start.replace(month=(start.month - 1) // 3 * 3 + 1)
    if window == "year":
        start = start.replace(month=1)
    return int(start.timestamp()) * 1000


def _plain(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _numeric(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def oracle(definition: dict[str, Any], entities: list[dict[str, Any]]) -> dict[str, Any]:
    """canonical group key JSON -> {groupKey, metrics, count}, recomputed from the rows."""
    source = definition["source"]
    where = compile_where(source.get("where"))

    def listed(v: Any) -> list[Any] | None:
        return None if v is None else v if isinstance(v, list) else [v]

    types, subtypes, services = (listed(source.get(k)) for k in ("type", "subtype", "service"))
    groups: dict[str, list[dict[str, Any]]] = {}
    keys: dict[str, dict[str, Any]] = {}
    for row in entities:
        if row.get("visibility", "public") == "system":
            continue
        if types and row["type"] not in types or subtypes and row.get("subtype") not in subtypes:
            continue
        if services and row.get("service") not in services or not where.matches(row):
            continue
        key = {}
        for entry in definition["groupBy"]:
            if isinstance(entry, dict):
                key[entry["field"]] = _window(_read(row, entry["field"]), entry["window"])
            else:
                key[entry] = _plain(_read(row, entry))
        canonical = json.dumps(key, sort_keys=True)
        groups.setdefault(canonical, []).append(row)
        keys[canonical] = key
    out = {}
    for canonical, members in groups.items():
        metrics: dict[str, Any] = {}
        for name, spec in definition["metrics"].items():
            if spec["op"] == "count":
                metrics[name] = (
                    len(members)
                    if "field" not in spec
                    else sum(1 for r in members if _read(r, spec["field"]) is not None)
                )
                continue
            values = [v for v in (_read(r, spec["field"]) for r in members) if _numeric(v)]
            if spec["op"] == "sum":
                total = sum((Fraction(v) for v in values), Fraction(0))
                if total.denominator == 1 and -(1 << 63) <= total < 1 << 64:
                    metrics[name] = int(total)
                elif abs(total) <= Fraction(sys.float_info.max):
                    metrics[name] = float(total)
            elif not values:
                continue
            elif spec["op"] == "avg":
                metrics[name] = float(sum(map(Fraction, values)) / len(values))
            elif spec["op"] in ("min", "max"):
                keyed = [(v + 0.0 if isinstance(v, float) else v, isinstance(v, float)) for v in values]
                metrics[name] = (min if spec["op"] == "min" else max)(keyed)[0]
            else:
                mean = sum(map(Fraction, values)) / len(values)
                exact = sum((Fraction(v) - mean) ** 2 for v in values) / len(values)
                if exact <= Fraction(sys.float_info.max):
                    metrics[name] = float(exact) if spec["op"] == "variance" else math.sqrt(float(exact))
                elif spec["op"] == "stddev":  # past a double: only its root is answered
                    metrics[name] = float(math.isqrt(int(exact)))
        out[canonical] = {"groupKey": keys[canonical], "metrics": metrics, "count": len(members)}
    return out


def answered(rows: list[dict[str, Any]]) -> dict[str, Any]:
    return {json.dumps(r["groupKey"], sort_keys=True): r for r in rows}


def check_all(brain: Brain, generation: int | None = None) -> None:
    """Every defined aggregate equals the oracle over the rows of ``generation`` (default: the head)."""
    view = brain.at(generation)
    entities = list(view.entities())
    for definition in DEFINITIONS:
        if generation is None:
            got = brain.aggregate({"name": definition["name"], "limit": 1000})
        else:
            got = brain.asOf(
                {
                    "generation": generation,
                    "read": {"door": "aggregate", "args": {"name": definition["name"], "limit": 1000}},
                }
            )["result"]
        expected = oracle(definition, entities)
        assert got["generation"] == view.generation
        assert got["total"] == len(expected)
        assert json.dumps(answered(got["rows"]), sort_keys=True) == json.dumps(expected, sort_keys=True), definition[
            "name"
        ]


# -- a random workload -------------------------------------------------------------------------------------

BASE = 1_795_000_000_000


def _metadata(rng: random.Random) -> dict[str, Any]:
    meta: dict[str, Any] = {}
    if rng.random() < 0.9:
        meta["cat"] = rng.choice(["a", "b", "c", 1, 1.0, True, None])
    price = rng.choice([rng.randint(-5, 50), round(rng.uniform(-10, 100), 3), 0.1, 0.2, 0.3, 1e16, -0.0, "n/a", False])
    if rng.random() < 0.85:
        meta["price"] = price
    meta["qty"] = rng.randint(0, 6)
    when = BASE + rng.randint(-90, 90) * 86_400_000 + rng.randint(0, 86_399_999)
    meta["when"] = rng.choice([when, when + 0.5, datetime.fromtimestamp(when / 1000, UTC).isoformat(), "soon"])
    if rng.random() < 0.5:
        meta["specs"] = {"tier": rng.choice(["gold", "tin", 3])}
    return meta


def _write(brain: Brain, rng: random.Random, live: list[str]) -> None:
    roll = rng.random()
    if roll < 0.5 or len(live) < 5:
        args: dict[str, Any] = {
            "type": rng.choice(["product", "product", "event", "thing"]),
            "metadata": _metadata(rng),
            "visibility": rng.choice(["public", "public", "internal"]),
        }
        if rng.random() < 0.3:
            args["subtype"] = "sale"
        if rng.random() < 0.3:
            args["service"] = "shop"
        live.append(brain.add(args, caller=CALLER)["id"])
    elif roll < 0.85:  # moves rows between groups, and in and out of sources
        target = rng.choice(live)
        patch: dict[str, Any] = {
            "id": target,
            "metadata": _metadata(rng)
            if rng.random() < 0.5
            else {"cat": rng.choice(["a", "b", "c"]), "price": rng.randint(0, 9)},
        }
        if rng.random() < 0.2:
            patch["type"] = rng.choice(["product", "event", "thing"])
        brain.update(patch, caller=CALLER)
    else:
        brain.remove({"id": live.pop(rng.randrange(len(live)))}, caller=CALLER)


def _define_all(brain: Brain) -> None:
    for definition in DEFINITIONS:
        brain.defineAggregate(definition, caller=CALLER)


def test_maintained_aggregates_equal_the_oracle_through_writes_flushes_compaction_and_a_reopen(tmp_path):
    """Every aggregate, maintained commit by commit, equals the oracle at the head after each step, and asOf
    at past generations (computed from that generation's rows) equals the oracle over those rows."""
    path = new_store(tmp_path)
    rng = random.Random(11)
    live: list[str] = []
    checkpoints: list[int] = []
    brain = Brain.open(path, flush_bytes=1 << 30)
    try:
        for _ in range(40):  # rows before any definition: each definition is built from the rows once
            _write(brain, rng, live)
        _define_all(brain)
        check_all(brain)
        for step in range(240):
            _write(brain, rng, live)
            if step % 20 == 0:
                check_all(brain)
                checkpoints.append(brain.head)
            if step % 60 == 30:
                assert brain.flush()
            if step == 200:
                brain.flush()
                assert brain.compact()
        check_all(brain)
        for generation in checkpoints[::3]:
            check_all(brain, generation)
    finally:
        brain.close()
    with Brain.open(path) as reopened:  # the state is rebuilt from the rows
        check_all(reopened)
        for _ in range(30):
            _write(reopened, rng, live)
        check_all(reopened)
        check_all(reopened, checkpoints[-1])


def test_the_state_is_maintained_not_rebuilt(tmp_path):
    """After the first aggregate read, commits move the one held state forward (its stamp follows the
    durable head); no read rebuilds it."""
    with Brain.open(new_store(tmp_path)) as brain:
        brain.defineAggregate(SALES, caller=CALLER)
        brain.aggregate({"name": "sales"})
        with brain.at().aggregates() as state:
            first = state
        for i in range(5):
            brain.add({"type": "product", "metadata": {"cat": "a", "price": i}}, caller=CALLER)
            with brain.at().aggregates() as state:
                assert state is first and state.stamp == brain.head
        assert brain.aggregate({"name": "sales"})["rows"][0]["metrics"]["total"] == 10


def test_min_and_max_survive_removing_the_extreme(tmp_path):
    """min and max keep every value's count: removing the extreme answers the next one, and removing every
    copy of a duplicated extreme only then moves it."""
    with Brain.open(new_store(tmp_path)) as brain:
        brain.defineAggregate(SALES, caller=CALLER)
        ids = {
            p: brain.add({"type": "product", "metadata": {"cat": "a", "price": p}}, caller=CALLER)["id"]
            for p in (5, 1, 9)
        }
        twin = brain.add({"type": "product", "metadata": {"cat": "a", "price": 9}}, caller=CALLER)["id"]

        def extremes() -> tuple[Any, Any]:
            metrics = brain.aggregate({"name": "sales"})["rows"][0]["metrics"]
            return metrics["lo"], metrics["hi"]

        assert extremes() == (1, 9)
        brain.remove({"id": ids[1]}, caller=CALLER)
        brain.remove({"id": ids[9]}, caller=CALLER)
        assert extremes() == (5, 9)
        brain.update({"id": twin, "metadata": {"price": 2}}, caller=CALLER)
        assert extremes() == (2, 5)


def test_metrics_past_the_wire_numbers_are_answered_or_left_out_never_a_fault(tmp_path):
    """A whole sum past 64 bits is the nearest double; a sum or variance past the largest double is left out of
    its group; stddev, the root, is always answered; every answer encodes in JSON and MessagePack."""
    from brainy.net import codecs

    big = sys.float_info.max
    groups = {"ints": [1 << 62] * 8, "spread": [1e300, -1e300], "huge": [big, big], "fine": [1.5, 2.5]}
    definition = {
        "name": "wide",
        "source": {},
        "groupBy": ["g"],
        "metrics": {op: {"op": op, "field": "v"} for op in ("sum", "avg", "variance", "stddev")},
    }
    with Brain.open(new_store(tmp_path)) as brain:
        brain.defineAggregate(definition, caller=CALLER)
        for g, values in groups.items():
            for v in values:
                brain.add({"type": "thing", "metadata": {"g": g, "v": v}}, caller=CALLER)
        answer = brain.aggregate({"name": "wide"})
        got = {r["groupKey"]["g"]: r["metrics"] for r in answer["rows"]}
        assert got["ints"] == {"sum": float(1 << 65), "avg": float(1 << 62), "variance": 0.0, "stddev": 0.0}
        assert isinstance(got["ints"]["sum"], float)
        assert got["spread"] == {"sum": 0, "avg": 0.0, "stddev": 1e300}  # variance 1e600: left out
        assert got["huge"] == {"avg": big, "variance": 0.0, "stddev": 0.0}  # sum 2 x max: left out
        assert got["fine"] == {"sum": 4.0, "avg": 2.0, "variance": 0.25, "stddev": 0.5}
        assert answered(answer["rows"]) == oracle(definition, list(brain.at().entities()))
        assert json.loads(codecs.to_json(answer))["rows"] == answer["rows"]
        assert codecs.to_msgpack(answer)


# -- the doors -----------------------------------------------------------------------------------------------


def test_define_answers_groups_and_replaced_and_is_stored_as_a_system_row(tmp_path):
    """defineAggregate answers {name, replaced, groups} and stores a system row (measurement,
    engine.aggregate) that find shows only with visibility system; a second define replaces it in place."""
    with Brain.open(new_store(tmp_path)) as brain:
        for cat in ("a", "b", "b"):
            brain.add({"type": "product", "metadata": {"cat": cat, "price": 1}}, caller=CALLER)
        first = brain.defineAggregate(SALES, caller=CALLER)
        assert (first["name"], first["replaced"], first["groups"]) == ("sales", False, 2)
        assert first["generation"] == brain.head and "timestamp" in first
        again = brain.defineAggregate({**SALES, "groupBy": []}, caller=CALLER)
        assert (again["replaced"], again["groups"]) == (True, 1)
        assert brain.aggregate({"name": "sales"})["rows"] == [
            {
                "groupKey": {},
                "metrics": {"n": 3, "priced": 3, "total": 3, "mean": 1.0, "lo": 1, "hi": 1, "sd": 0.0},
                "count": 3,
            }
        ]  # var reads qty, which no row holds: left out
        assert brain.aggregates()["aggregates"] == [{**SALES, "groupBy": []}]
        assert brain.find({})["total"] == 3
        stored = brain.find({"visibility": "system"})["results"]
        assert [(h["entity"]["type"], h["entity"]["subtype"], h["entity"]["visibility"]) for h in stored] == [
            ("measurement", "engine.aggregate", "system")
        ]
        assert stored[0]["entity"]["data"] == {**SALES, "groupBy": []}
        assert brain.counts()["entities"] == 3 and brain.counts()["entitiesAllTiers"] == 4


def test_remove_aggregate_and_clear_drop_definitions_and_time_travel_keeps_them(tmp_path):
    """removeAggregate deletes the definition row; aggregates lists what each generation held; clear removes
    definitions with every other row."""
    with Brain.open(new_store(tmp_path)) as brain:
        brain.add({"type": "product", "metadata": {"cat": "a", "price": 2}}, caller=CALLER)
        brain.defineAggregate(SALES, caller=CALLER)
        defined = brain.defineAggregate(DAILY, caller=CALLER)["generation"]
        assert [d["name"] for d in brain.aggregates()["aggregates"]] == ["daily", "sales"]
        removed = brain.removeAggregate({"name": "sales"}, caller=CALLER)
        assert removed["name"] == "sales" and removed["generation"] == defined + 1
        assert [d["name"] for d in brain.aggregates()["aggregates"]] == ["daily"]
        past = brain.asOf({"generation": defined, "read": {"door": "aggregates"}})["result"]
        assert [d["name"] for d in past["aggregates"]] == ["daily", "sales"]
        then = brain.asOf({"generation": defined, "read": {"door": "aggregate", "args": {"name": "sales"}}})
        assert then["result"]["rows"][0]["metrics"]["total"] == 2
        brain.clear({"confirm": brain.name}, caller=CALLER)
        assert brain.aggregates()["aggregates"] == []


def test_aggregate_where_order_and_paging(tmp_path):
    """aggregate filters on group keys, metric names and count, orders by count (desc) or a named key with
    rows missing it last, and pages by limit and offset; total counts the rows the where kept."""
    with Brain.open(new_store(tmp_path)) as brain:
        for cat, prices in (("a", [1, 2, 3]), ("b", [10]), ("c", ["x", "y"]), ("d", [4, 4])):
            for p in prices:
                brain.add({"type": "product", "metadata": {"cat": cat, "price": p}}, caller=CALLER)
        brain.defineAggregate(SALES, caller=CALLER)

        def cats(**args: Any) -> list[str]:
            return [r["groupKey"]["cat"] for r in brain.aggregate({"name": "sales", **args})["rows"]]

        assert cats() == ["a", "c", "d", "b"]  # count desc, ties on the group key
        assert cats(order="asc") == ["b", "c", "d", "a"]
        assert cats(orderBy="total") == ["b", "d", "a", "c"]
        assert cats(orderBy="mean", order="asc") == ["a", "d", "b", "c"]  # c has no mean: last either way
        assert cats(orderBy="cat", order="asc", limit=2, offset=1) == ["b", "c"]
        assert cats(where={"total": {"gte": 6}}) == ["a", "d", "b"]
        assert cats(where={"count": 2, "cat": {"ne": "c"}}) == ["d"]
        answer = brain.aggregate({"name": "sales", "where": {"count": {"gt": 1}}, "limit": 1})
        assert answer["total"] == 3 and len(answer["rows"]) == 1


def test_find_aggregated_shape_applies_finds_metadata_filters(tmp_path):
    """find with aggregate answers results empty and rows: the aggregate over the entities find's metadata
    leg selects (type, where, visibility, ...), equal to the oracle over those rows, at the head and pinned."""
    with Brain.open(new_store(tmp_path)) as brain:
        rng = random.Random(5)
        live: list[str] = []
        for _ in range(80):
            _write(brain, rng, live)
        _define_all(brain)
        pinned = brain.head
        for _ in range(20):
            _write(brain, rng, live)
        filters = (
            {},
            {"where": {"qty": {"gt": 2}}},
            {"visibility": "all"},
            {"type": "event"},
            {"visibility": "internal", "where": {"cat": "a"}},
            {"service": "shop", "subtype": ["sale"]},
        )
        for generation in (None, pinned):
            view = brain.at(generation)
            for extra in filters:
                q = compile_where(extra.get("where"))
                tiers = extra.get("visibility", "public")
                tiers = ["public", "internal", "system"] if tiers == "all" else [tiers]
                selected = [
                    r
                    for r in view.entities()
                    if r.get("visibility", "public") in tiers
                    and q.matches(r)
                    and r["type"] == extra.get("type", r["type"])
                    and r.get("service") == extra.get("service", r.get("service"))
                    and r.get("subtype") in extra.get("subtype", [r.get("subtype")])
                ]
                for definition in (SALES, DAILY, WEEKS):
                    query = {"aggregate": {"name": definition["name"], "limit": 1000}, **extra}
                    if generation is None:
                        got = brain.find(query)
                    else:
                        got = brain.asOf({"generation": generation, "read": {"door": "find", "args": query}})["result"]
                    assert got["results"] == [] and got["generation"] == view.generation
                    expected = oracle(definition, selected)
                    assert got["total"] == len(expected)
                    assert json.dumps(answered(got["rows"]), sort_keys=True) == json.dumps(expected, sort_keys=True)
        by_name = brain.find({"aggregate": "sales"})
        assert by_name["rows"] == brain.find({"aggregate": {"name": "sales"}})["rows"]


def test_find_aggregated_shape_pages_with_a_cursor(tmp_path):
    """The aggregated shape pages: hasMore and a cursor that continues the same rows at the same generation."""
    with Brain.open(new_store(tmp_path)) as brain:
        for i in range(7):
            brain.add({"type": "product", "metadata": {"cat": f"c{i}", "price": i}}, caller=CALLER)
        brain.defineAggregate(SALES, caller=CALLER)
        query = {"aggregate": {"name": "sales", "limit": 3, "orderBy": "total", "order": "asc"}}
        first = brain.find(query)
        assert first["hasMore"] and [r["groupKey"]["cat"] for r in first["rows"]] == ["c0", "c1", "c2"]
        brain.add({"type": "product", "metadata": {"cat": "c0", "price": 100}}, caller=CALLER)
        second = brain.find({**query, "cursor": first["cursor"]})
        assert second["generation"] == first["generation"]
        assert [r["groupKey"]["cat"] for r in second["rows"]] == ["c3", "c4", "c5"]
        third = brain.find({**query, "cursor": second["cursor"]})
        assert [r["groupKey"]["cat"] for r in third["rows"]] == ["c6"] and not third["hasMore"]
        assert third["cursor"] is None


# -- refusals ------------------------------------------------------------------------------------------------


def _refused(call: Any, name: str, **fields: Any) -> R.Refusal:
    with pytest.raises(R.Refusal) as caught:
        call()
    assert caught.value.name == name, caught.value
    for key, value in fields.items():
        assert caught.value.fields[key] == value, caught.value.fields
    return caught.value


def test_aggregate_not_found_is_refused_by_every_door_that_names_one(tmp_path):
    """AggregateNotFoundError {aggregate} (DOORS.md 11.5): aggregate, removeAggregate and find's aggregate on an
    unknown name, on a removed one, and at a generation before it was defined."""
    with Brain.open(new_store(tmp_path)) as brain:
        brain.add({"type": "product", "metadata": {"cat": "a"}}, caller=CALLER)
        before = brain.head
        for door in (
            lambda: brain.aggregate({"name": "sales"}),
            lambda: brain.removeAggregate({"name": "sales"}, caller=CALLER),
            lambda: brain.removeAggregate({"name": "Not A Name"}, caller=CALLER),
            lambda: brain.find({"aggregate": "sales"}),
            lambda: brain.find({"aggregate": {"name": "sales"}}),
        ):
            _refused(door, "AggregateNotFoundError")
        refusal = _refused(lambda: brain.aggregate({"name": "weekly"}), "AggregateNotFoundError", aggregate="weekly")
        assert refusal.to_wire()["aggregate"] == "weekly" and refusal.status == 404
        brain.defineAggregate(SALES, caller=CALLER)
        _refused(
            lambda: brain.asOf({"generation": before, "read": {"door": "aggregate", "args": {"name": "sales"}}}),
            "AggregateNotFoundError",
            aggregate="sales",
        )
        _refused(
            lambda: brain.asOf({"generation": before, "read": {"door": "find", "args": {"aggregate": "sales"}}}),
            "AggregateNotFoundError",
            aggregate="sales",
        )
        brain.removeAggregate({"name": "sales"}, caller=CALLER)
        _refused(lambda: brain.aggregate({"name": "sales"}), "AggregateNotFoundError", aggregate="sales")


BAD_DEFINITIONS = [
    ({"name": "Sales"}, "name", "bad-name"),
    ({"name": "x" * 65}, "name", "bad-name"),
    ({"source": "product"}, "source", "wrong-type"),
    ({"source": {"types": "product"}}, "source.types", "unknown-argument"),
    ({"source": {"type": "gadget"}}, "source.type", "unknown-type"),
    ({"source": {"where": {"price": {"bogus": 1}}}}, "source.where.price", "unknown-operator"),
    ({"groupBy": "cat"}, "groupBy", "wrong-type"),
    ({"groupBy": ["a.", "b"]}, "groupBy[0]", "bad-path"),
    ({"groupBy": ["data"]}, "groupBy[0]", "reserved-field"),
    ({"groupBy": [{"field": "when", "window": "minute"}]}, "groupBy[0].window", "bad-operand"),
    ({"groupBy": ["cat", "cat.sub"]}, "groupBy[1]", "duplicate-group"),
    ({"metrics": []}, "metrics", "wrong-type"),
    ({"metrics": {"total": {"op": "median", "field": "price"}}}, "metrics.total.op", "bad-operand"),
    ({"metrics": {"total": {"op": "sum"}}}, "metrics.total.field", "missing"),
    ({"metrics": {"cat": {"op": "count"}}}, "metrics.cat", "name-taken"),
    ({"metrics": {"type": {"op": "count"}}}, "metrics.type", "reserved-field"),
    ({"metrics": {"a.b": {"op": "count"}}}, "metrics.a.b", "bad-name"),
]


@pytest.mark.parametrize("change,field,reason", BAD_DEFINITIONS, ids=[b[2] + ":" + b[1] for b in BAD_DEFINITIONS])
def test_a_bad_definition_is_refused_by_field_and_writes_nothing(tmp_path, change, field, reason):
    """defineAggregate checks the whole definition before its first op: InvalidArgumentError {field, reason},
    and the generation does not move."""
    with Brain.open(new_store(tmp_path)) as brain:
        _refused(
            lambda: brain.defineAggregate({**SALES, **change}, caller=CALLER),
            "InvalidArgumentError",
            field=field,
            reason=reason,
        )
        assert brain.head == 0


def test_bad_aggregate_queries_are_refused_by_field(tmp_path):
    """aggregate and find's aggregated shape check their query: the where, order, orderBy, limit; find's
    aggregated shape takes no ranked leg; a missing name is refused by the contract's check."""
    with Brain.open(new_store(tmp_path)) as brain:
        brain.defineAggregate(SALES, caller=CALLER)
        for args, field, reason in (
            ({"where": {"total": {"nope": 1}}}, "where.total", "unknown-operator"),
            ({"order": "up"}, "order", "bad-operand"),
            ({"orderBy": "price"}, "orderBy", "unknown-field"),
            ({"limit": 0}, "limit", "out-of-range"),
            ({"offset": -1}, "offset", "out-of-range"),
        ):
            _refused(
                lambda: brain.aggregate({"name": "sales", **args}), "InvalidArgumentError", field=field, reason=reason
            )
        _refused(lambda: brain.aggregate({}), "InvalidArgumentError", field="name", reason="missing")
        _refused(
            lambda: brain.find({"aggregate": {"name": "sales", "size": 3}}),
            "InvalidArgumentError",
            field="aggregate.size",
            reason="unknown-argument",
        )
        _refused(lambda: brain.find({"aggregate": 7}), "InvalidArgumentError", field="aggregate", reason="wrong-type")
        _refused(
            lambda: brain.find({"aggregate": "sales", "query": "words"}),
            "InvalidArgumentError",
            field="aggregate",
            reason="ranked-and-aggregated",
        )


def test_a_definition_name_cannot_take_a_callers_row(tmp_path):
    """A definition's id derives from its name in a namespace of its own; a row a caller put at that id is
    never overwritten (InvalidArgumentError {field: name, reason: id-taken})."""
    from brainy.index.aggregates import definition_id

    with Brain.open(new_store(tmp_path)) as brain:
        brain.add({"type": "thing", "id": definition_id("sales")}, caller=CALLER)
        _refused(
            lambda: brain.defineAggregate(SALES, caller=CALLER), "InvalidArgumentError", field="name", reason="id-taken"
        )
        _refused(
            lambda: brain.removeAggregate({"name": "sales"}, caller=CALLER), "AggregateNotFoundError", aggregate="sales"
        )


def test_the_four_doors_answer_over_http(server):
    """The doors are native on the wire: define, read, list, find's shape and remove over HTTP/1.1, and the
    refusal body carries AggregateNotFoundError {aggregate} with 404."""
    auth = (("authorization", f"Bearer {server.key}"), ("content-type", "application/json"))

    def post(door: str, body: dict[str, Any]) -> Any:
        return curl(server, "POST", server.path(door), json.dumps(body).encode(), headers=auth)

    assert post("add", {"type": "product", "metadata": {"cat": "a", "price": 2.5}}).status == 200
    defined = post("defineAggregate", SALES)
    assert defined.status == 200 and defined.doc["groups"] == 1
    rows = post("aggregate", {"name": "sales"}).result()["rows"]
    assert rows[0]["metrics"]["total"] == 2.5 and rows[0]["count"] == 1
    listed = curl(server, "GET", server.path("aggregates"), headers=auth[:1]).result()
    assert listed == {"aggregates": [SALES]}
    assert post("find", {"aggregate": "sales"}).result()["rows"] == rows
    assert post("removeAggregate", {"name": "sales"}).status == 200
    missing = post("aggregate", {"name": "sales"})
    assert (missing.status, missing.refusal, missing.doc["error"]["aggregate"]) == (
        404,
        "AggregateNotFoundError",
        "sales",
    )
