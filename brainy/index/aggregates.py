"""Aggregates: defineAggregate, removeAggregate, aggregates, aggregate, and find's aggregated shape
(door catalogue 5.1, 5.2, 4.4; the stored form is docs/store-format.md, "Aggregate definitions").

A definition is a ``system`` row (``measurement``, subtype ``engine.aggregate``) whose id derives
from its name, so definitions are committed, logged, replayed, read at past generations and
cleared like every other row; the aggregates of a generation are exactly its definition rows.

Their running state (:class:`Aggregates`: per definition, per group, the row count and each
metric's accumulator) is a projection kept by the :class:`AggregateFollower`, which follows the
commit path as the query projections' follower does: each commit's entity moves are recorded
when it is applied and applied once it is durable, so ``aggregate`` answers at the durable head
from the maintained state without reading rows. It is persisted at every flush (``index/<stamp>.agg``,
docs/store-format.md "Aggregate snapshots") and caught up from the replayed log tail on the next open. A read at a past generation builds the same
state from that generation's rows with the same code, so the two answers are equal exactly.

Exactness. Sums and sums of squares are kept as integers in units of 2**-1074 (every finite
double is a whole number of those), so adding and removing a value leaves no rounding behind;
they are rounded once, when answered. ``min`` and ``max`` keep a count of every value (and lazy
heaps over them), so removing the extreme finds the next one.

Choices the catalogue leaves open, made here (and in docs/store-format.md): a source counts the
``public`` and ``internal`` tiers, never ``system``; ``variance`` and ``stddev`` are the
population figures; ``count`` with a field counts the rows holding a non-null value; the other
ops read numbers only; a ``sum`` or ``variance`` past the largest double is left out of its group, as a metric of no
numbers is (``stddev``, its root, always fits). ``aggregate`` orders by ``count`` unless ``orderBy`` names a group key or
a metric, rows missing the key last, ties on the group key ascending.
"""

from __future__ import annotations

import heapq
import logging
import math
import re
import uuid
from collections.abc import Callable, Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

import msgpack

from brainy.contract import refusals as R
from brainy.index.where import ENTITY_FIELDS, UNADDRESSABLE, Predicate, compile_where, kind_of
from brainy.store import rows
from brainy.store.rows import invalid

AGGREGATE_NAMESPACE = uuid.UUID("0b7c4e2a-9d31-5f60-8a1e-3c5d7f9b2e41")
DEFINITION_TYPE, DEFINITION_SUBTYPE = "measurement", "engine.aggregate"
NAME = re.compile(r"[a-z0-9_-]{1,64}")
METRIC_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
OPS = ("count", "sum", "avg", "min", "max", "stddev", "variance")
WINDOWS = ("hour", "day", "week", "month", "quarter", "year")
SOURCE_KEYS = ("type", "subtype", "service", "where")
COUNTED_TIERS = frozenset(("public", "internal"))  # system rows (the definitions among them) never count
MAX_GROUP_BY = 8
# Paths whose first segment reads the row itself: where's reserved fields, and an entity's own numbers.
ROW_FIELDS = ENTITY_FIELDS | {"weight", "confidence"}
SCALE = 1074  # every finite double is a whole multiple of 2**-SCALE
HOUR, DAY = 3_600_000, 86_400_000
PACKED_CHANGES = 4_096  # numbers moved in or out of a snapshot's counts before they are decoded into a map
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

_MISSING: Any = object()

log = logging.getLogger("brainy.engine")


def definition_id(name: str) -> str:
    """The id of the row that holds the definition named ``name``."""
    return str(uuid.uuid5(AGGREGATE_NAMESPACE, name))


def is_definition_row(row: dict[str, Any]) -> bool:
    return row.get("subtype") == DEFINITION_SUBTYPE and row.get("visibility") == "system"


# -- values ---------------------------------------------------------------------------------------------


def _resolver(path: str) -> Callable[[dict[str, Any]], Any]:
    """A reader of one path on a row: a reserved field, or a dotted path into metadata."""
    segments = path.split(".")
    if len(segments) == 1:  # the common case, read without a loop: it runs for every row a commit moves
        (name,) = segments
        if name in ROW_FIELDS:
            return lambda row: row.get(name, _MISSING)

        def resolve_one(row: dict[str, Any]) -> Any:
            bag = row.get("metadata")
            return bag.get(name, _MISSING) if isinstance(bag, dict) else _MISSING

        return resolve_one
    node_of: Callable[[dict[str, Any]], Any]
    if segments[0] in ROW_FIELDS:
        head, segments = segments[0], segments[1:]
        node_of = lambda row: row.get(head, _MISSING)  # noqa: E731
    else:
        node_of = lambda row: row.get("metadata", _MISSING)  # noqa: E731

    def resolve(row: dict[str, Any]) -> Any:
        node = node_of(row)
        for segment in segments:
            if not isinstance(node, dict):
                return _MISSING
            node = node.get(segment, _MISSING)
        return node

    return resolve


def _token(value: Any) -> Any:
    """A hashable stand-in for a group key value, equal for equal values (1 and 1.0 alike, True and 1 not)."""
    kind = kind_of(value)
    if kind == "number":
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        return (kind, value)
    if kind == "array":
        return (kind, tuple(_token(v) for v in value))
    if kind == "object":
        return (kind, tuple(sorted((k, _token(v)) for k, v in value.items())))
    return (kind, value)


def _untoken(token: Any) -> Any:
    kind, value = token
    if kind == "array":
        return [_untoken(v) for v in value]
    if kind == "object":
        return {k: _untoken(v) for k, v in value}
    return value


def _instant(value: Any) -> int | None:
    """Milliseconds since the epoch from a number or an ISO-8601 string with a zone; None otherwise."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return math.floor(value)
    if isinstance(value, str):
        try:
            moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return None
        if moment.tzinfo is not None:
            return (moment - EPOCH) // timedelta(milliseconds=1)
    return None


def _bucket(value: Any, window: str) -> int | None:
    """The start (ms, UTC) of the hour, day, ISO week, month, quarter or year holding the instant."""
    ms = _instant(value)
    if ms is None:
        return None
    if window == "hour":
        return ms - ms % HOUR
    if window == "day":
        return ms - ms % DAY
    if window == "week":  # 1970-01-01 was a Thursday: Monday is three days before
        days = ms // DAY
        return (days - (days + 3) % 7) * DAY
    try:
        moment = EPOCH + timedelta(milliseconds=ms)
    except OverflowError:
        return None
    month = {"month": moment.month, "quarter": (moment.month - 1) // 3 * 3 + 1, "year": 1}[window]
    return (datetime(moment.year, month, 1, tzinfo=UTC) - EPOCH) // timedelta(milliseconds=1)


def _exact(x: int | float) -> int:
    """``x`` in units of 2**-SCALE: an integer, exactly."""
    numerator, denominator = x.as_integer_ratio()
    return numerator << (SCALE - denominator.bit_length() + 1)


def _rounded(numerator: int, denominator: int) -> int | float | None:
    """numerator / denominator, rounded once (int / int is correctly rounded); a whole sum stays an int while it
    is one the wire carries (64 bits), then is the nearest double; None beyond the largest double."""
    if numerator % denominator == 0:
        whole = numerator // denominator
        if -(1 << 63) <= whole < 1 << 64:
            return whole
    try:
        return numerator / denominator
    except OverflowError:
        return None


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


# -- definitions ----------------------------------------------------------------------------------------


def _path(value: Any, field: str) -> str:
    if not isinstance(value, str) or not value or not all(value.split(".")):
        raise invalid(field, "bad-path", "a field path is a non-empty dotted string")
    if value.split(".")[0] in UNADDRESSABLE:
        raise invalid(field, "reserved-field", f"{value!r} is not an addressable field")
    return value


def _text(value: Any, field: str) -> str:
    return rows.string(value, field)  # type: ignore[return-value]


class Definition:
    """A checked definition: its stored document and what counting needs, compiled once."""

    __slots__ = ("name", "doc", "types", "subtypes", "services", "where", "groups", "metrics", "fields")

    def __init__(self, a: dict[str, Any]) -> None:
        name = a.get("name")
        if not isinstance(name, str) or not NAME.fullmatch(name):
            raise invalid("name", "bad-name", "an aggregate name is 1 to 64 of [a-z0-9_-]")
        source = a.get("source")
        if not isinstance(source, dict):
            raise invalid("source", "wrong-type", "must be an object")
        unknown = sorted(set(source) - set(SOURCE_KEYS))
        if unknown:
            raise invalid(f"source.{unknown[0]}", "unknown-argument", f"a source takes {list(SOURCE_KEYS)}")
        self.name = name
        self.types = rows.listed(source.get("type"), "source.type", lambda v, f: rows.noun(v, f))
        self.subtypes = rows.listed(source.get("subtype"), "source.subtype", _text)
        self.services = rows.listed(source.get("service"), "source.service", _text)
        self.where: Predicate = compile_where(source.get("where"), name="source.where")
        group_by = a.get("groupBy")
        if not isinstance(group_by, list) or len(group_by) > MAX_GROUP_BY:
            raise invalid("groupBy", "wrong-type", f"an array of at most {MAX_GROUP_BY} paths or windows")
        self.groups: list[tuple[str, Callable[[dict[str, Any]], Any], str | None]] = []
        for i, entry in enumerate(group_by):
            at = f"groupBy[{i}]"
            window = None
            if isinstance(entry, dict):
                if set(entry) - {"field", "window"}:
                    raise invalid(at, "unknown-argument", "a window entry takes field and window")
                window = entry.get("window")
                if window not in WINDOWS:
                    raise invalid(f"{at}.window", "bad-operand", f"one of {list(WINDOWS)}")
                path = _path(entry.get("field"), f"{at}.field")
            else:
                path = _path(entry, at)
            for other, _, _ in self.groups:  # a key inside another would nest two values at one place
                if path == other or path.startswith(other + ".") or other.startswith(path + "."):
                    raise invalid(at, "duplicate-group", f"{path!r} overlaps the group key {other!r}")
            self.groups.append((path, _resolver(path), window))
        metrics = a.get("metrics")
        if not isinstance(metrics, dict):
            raise invalid("metrics", "wrong-type", "an object of metric name to {op, field}")
        heads = {path.split(".")[0] for path, _, _ in self.groups}
        # each metric reads one of the fields (None: count the rows); metrics on one field share its values
        self.metrics: list[tuple[str, str, int | None]] = []
        self.fields: list[tuple[str, Callable[[dict[str, Any]], Any], frozenset[str]]] = []
        places: dict[str, int] = {}
        for metric, spec in metrics.items():
            at = f"metrics.{metric}"
            if not METRIC_NAME.fullmatch(metric):
                raise invalid(at, "bad-name", "a metric name is 1 to 64 of [A-Za-z0-9_-]")
            if metric in rows.RESERVED_METADATA:
                raise invalid(at, "reserved-field", f"{metric!r} is a reserved field name")
            if metric in heads:
                raise invalid(at, "name-taken", f"{metric!r} is also a group key")
            if not isinstance(spec, dict) or set(spec) - {"op", "field"}:
                raise invalid(at, "wrong-type", "a metric is {op, field?}")
            op = spec.get("op")
            if op not in OPS:
                raise invalid(f"{at}.op", "bad-operand", f"one of {list(OPS)}")
            field = spec.get("field")
            if field is None and op != "count":
                raise invalid(f"{at}.field", "missing", f"{op} needs a field")
            place = None
            if field is not None:
                path = _path(field, f"{at}.field")
                place = places.setdefault(path, len(places))
                if place == len(self.fields):
                    self.fields.append((path, _resolver(path), frozenset()))
                self.fields[place] = (path, self.fields[place][1], self.fields[place][2] | {op})
            self.metrics.append((metric, op, place))
        self.doc = {
            "name": name,
            "source": {k: source[k] for k in SOURCE_KEYS if source.get(k) is not None},
            "groupBy": list(group_by),
            "metrics": {m: dict(s) for m, s in metrics.items()},
        }

    @classmethod
    def of_row(cls, row: dict[str, Any] | None) -> Definition | None:
        """The definition a row holds, or None (not a definition row, or one that does not check out)."""
        if row is None or not is_definition_row(row) or not isinstance(row.get("data"), dict):
            return None
        try:
            return cls(row["data"])
        except R.Refusal:
            return None

    def selects(self, row: dict[str, Any]) -> bool:
        return (
            row.get("visibility", "public") in COUNTED_TIERS
            and (self.types is None or row["type"] in self.types)
            and (self.subtypes is None or row.get("subtype") in self.subtypes)
            and (self.services is None or row.get("service") in self.services)
            and self.where.matches(row)
        )

    def group_of(self, row: dict[str, Any]) -> tuple[Any, ...]:
        key = []
        for _, resolve, window in self.groups:
            value = resolve(row)
            if value is _MISSING:
                value = None
            elif window is not None:
                value = _bucket(value, window)
            key.append(_token(value))
        return tuple(key)


# -- running state --------------------------------------------------------------------------------------

Key = tuple[int | float, bool]  # a number and whether it is a double: what min and max count
Packed = tuple[list[Any], list[Any], "bytes | memoryview"]  # a snapshot's counts: min entry, max entry, MessagePack


def _key(x: Any, f: bool) -> Key:
    return (float(x) if f else x, bool(f))


def _merged(blob: bytes | memoryview, adjustments: dict[Key, int]) -> dict[Key, int]:
    """A snapshot's counts (in value order) with the moves made since applied."""
    counts = {_key(x, f): c for x, f, c in msgpack.unpackb(blob)}
    for key, delta in adjustments.items():
        held = counts.get(key, 0) + delta
        if held:
            counts[key] = held
        else:
            del counts[key]
    return counts


class _Values:
    """One field's values within one group: what the ops reading it need to answer after any sequence of
    adds and removes (the present count; the numbers' count, exact sum and sum of squares; the count of
    each number for min and max, with lazy heaps over them).

    Read from a snapshot, the counts stay as it held them (``packed``: the min entry, the max entry and
    the MessagePack of every [number, isFloat, count] in value order), and ``counts`` holds only the moves
    made since (number -> net change): min and max are the packed ends or a number moved in, so neither a
    read nor a move decodes them, until a move empties a packed end (or the changes grow many)."""

    __slots__ = ("present", "n", "sum", "squares", "counts", "low", "high", "summed", "squared", "packed")

    def __init__(self, ops: frozenset[str]) -> None:
        self.present = self.n = self.sum = self.squares = 0
        self.summed = bool(ops & {"sum", "avg", "stddev", "variance"})
        self.squared = bool(ops & {"stddev", "variance"})
        self.counts: dict[Key, int] | None = {} if ops & {"min", "max"} else None
        self.low: list[Key] = []
        self.high: list[tuple[int | float, int]] = []
        self.packed: Packed | None = None

    def unpack(self) -> None:
        """The snapshot's counts, with the changes since, as the map and heaps a move keeps."""
        packed, self.packed = self.packed, None
        if packed is not None:
            assert self.counts is not None
            self.counts = _merged(packed[2], self.counts)
            self.low = sorted(self.counts)  # nearly in order already: the snapshot's order, a few moved in
            self.high = [(-x, -f) for x, f in reversed(self.low)]

    def held(self) -> tuple[list[Any], list[Any], bytes | memoryview, dict[Key, int]] | dict[Key, int] | None:
        """The counts as a snapshot copies them: the packed ones themselves (never changed) and a copy of the
        changes since, else a copy of the map."""
        if self.counts is None:
            return None
        return (*self.packed, self.counts.copy()) if self.packed is not None else self.counts.copy()

    def move(self, value: Any, sign: int) -> None:
        if value is None or value is _MISSING:
            return
        self.present += sign
        if not _number(value):
            return
        self.n += sign
        if self.summed:
            exact = _exact(value)
            self.sum += sign * exact
            if self.squared:
                self.squares += sign * exact * exact
        counts = self.counts
        if counts is not None:
            if isinstance(value, float):
                value += 0.0  # -0.0 and 0.0 are one value: answer it one way whatever came first
            key = (value, isinstance(value, float))
            held = counts.get(key, 0) + sign
            if held:
                counts[key] = held
            else:
                del counts[key]
            if self.packed is not None:
                if (
                    sign < 0
                    and any(_key(x, f) == key and c + held == 0 for x, f, c in self.packed[:2])
                    or len(counts) > PACKED_CHANGES
                ):
                    self.unpack()  # an end is gone: the next one is in the blob
                return
            if held == 1 and sign == 1:
                heapq.heappush(self.low, key)
                heapq.heappush(self.high, (-key[0], -key[1]))
            elif not held and len(self.low) > 2 * len(counts) + 16:  # stale entries outnumber live ones
                self.low = sorted(counts)
                self.high = sorted((-v, -f) for v, f in counts)

    def value(self, op: str) -> int | float | None:
        n = self.n
        if op == "count":
            return self.present
        if op == "sum":
            return _rounded(self.sum, 1 << SCALE)
        if n == 0:
            return None
        if op == "avg":
            return self.sum / (n << SCALE)
        if op in ("min", "max"):
            assert self.counts is not None
            if self.packed is not None:  # the packed end (still held: else it was unpacked) or a number moved in
                x, f, _ = self.packed[0 if op == "min" else 1]
                moved_in = [key for key, delta in self.counts.items() if delta > 0]
                return (min if op == "min" else max)([_key(x, f), *moved_in])[0]
            if op == "min":
                while self.counts.get(self.low[0], 0) == 0:
                    heapq.heappop(self.low)
                return self.low[0][0]
            while self.counts.get((-self.high[0][0], -self.high[0][1] == 1), 0) == 0:
                heapq.heappop(self.high)
            return -self.high[0][0]
        spread, scale = n * self.squares - self.sum * self.sum, (n * n) << (2 * SCALE)
        try:
            variance = spread / scale
        except OverflowError:  # past a double: left out; its root never is, and is the whole part's root
            return None if op == "variance" else float(math.isqrt(spread // scale))
        return variance if op == "variance" else math.sqrt(variance)


class _Group:
    __slots__ = ("count", "values")

    def __init__(self, definition: Definition) -> None:
        self.count = 0
        self.values = [_Values(ops) for _, _, ops in definition.fields]


class Aggregate:
    """One definition's groups over the rows it has been moved through."""

    __slots__ = ("definition", "groups", "answered")

    def __init__(self, definition: Definition, entities: Iterable[dict[str, Any]] = ()) -> None:
        self.definition = definition
        self.groups: dict[tuple[Any, ...], _Group] = {}
        self.answered: list[dict[str, Any]] | None = None  # rows() until the next move: reads repeat it
        for row in entities:
            self.move(None, row)

    def move(self, before: dict[str, Any] | None, after: dict[str, Any] | None) -> None:
        """Move the groups from an entity's old row to its new one (None: absent)."""
        d = self.definition
        if before is not None and d.selects(before):
            self._count(before, -1)
        if after is not None and d.selects(after):
            self._count(after, 1)

    def _count(self, row: dict[str, Any], sign: int) -> None:
        d = self.definition
        self.answered = None
        key = d.group_of(row)
        group = self.groups.get(key)
        if group is None:
            group = self.groups[key] = _Group(d)
        group.count += sign
        for values, (_, resolve, _) in zip(group.values, d.fields):
            values.move(resolve(row), sign)
        if group.count == 0:
            del self.groups[key]

    def rows(self) -> list[dict[str, Any]]:
        """Every group's AggregateRow, in group key order (kept until the next move: never change it)."""
        if self.answered is not None:
            return self.answered
        d = self.definition
        out = []
        for key in sorted(self.groups):
            group = self.groups[key]
            metrics = {}
            for name, op, place in d.metrics:
                value = group.count if place is None else group.values[place].value(op)
                if value is not None:
                    metrics[name] = value
            out.append(
                {
                    "groupKey": {path: _untoken(t) for (path, _, _), t in zip(d.groups, key)},
                    "metrics": metrics,
                    "count": group.count,
                }
            )
        self.answered = out
        return out


class Aggregates:
    """Every definition's running state at one generation, its ``stamp``."""

    def __init__(self, stamp: int) -> None:
        self.stamp = stamp
        self.built: dict[str, Aggregate] = {}
        self.pending: dict[str, Definition] = {}  # defined since the last read: built from the rows on need

    @classmethod
    def of(cls, entities: Callable[[], Iterable[dict[str, Any]]], stamp: int) -> Aggregates:
        state = cls(stamp)
        for row in entities():
            if row.get("subtype") == DEFINITION_SUBTYPE:
                d = Definition.of_row(row)
                if d is not None:
                    state.pending[d.name] = d
        state.settle(entities)
        return state

    def apply(self, moves: list[Move], generation: int) -> None:
        """One durable commit's moves (the entity ones followed): definitions come and go, every built aggregate
        follows the rows."""
        for kind, before, after in moves:
            if kind != "e":
                continue
            if before is not None and is_definition_row(before):
                name = (before.get("data") or {}).get("name")
                self.built.pop(name, None)
                self.pending.pop(name, None)
            defined = Definition.of_row(after)
            if defined is not None:
                self.built.pop(defined.name, None)
                self.pending[defined.name] = defined
            for aggregate in self.built.values():  # a system row is selected by none
                aggregate.move(before, after)
        self.stamp = generation

    def settle(self, entities: Callable[[], Iterable[dict[str, Any]]]) -> None:
        """Build the pending definitions from the rows at the stamp, in one pass."""
        if not self.pending:
            return
        fresh = {name: Aggregate(d) for name, d in self.pending.items()}
        for row in entities():
            for aggregate in fresh.values():
                aggregate.move(None, row)
        self.built.update(fresh)
        self.pending.clear()

    def definitions(self) -> list[dict[str, Any]]:
        found = {name: a.definition for name, a in self.built.items()} | self.pending
        return [found[name].doc for name in sorted(found)]


# a commit's move as the commit path records it (brainy/store/commit_path.py): "e" or "r", the row before, after;
# taken as it is, not as (before, after) pairs of the entity moves (a tuple a row, held until the commit is durable)
Move = tuple[str, dict[str, Any] | None, dict[str, Any] | None]
