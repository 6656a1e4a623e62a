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
import struct
import threading
import time
import uuid
import weakref
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator

import msgpack
import orjson

from brainy.contract import arguments
from brainy.contract import doors as D
from brainy.contract import refusals as R
from brainy.store import keys as K
from brainy.store import rows
from brainy.store.crc import crc32
from brainy.store.files import write_durably
from brainy.index.projections import newest_snapshot, snapshot_name
from brainy.doors.registry import WRITE, door
from brainy.store.rows import invalid
from brainy.index.snapshot import Snapshot
from brainy.store.txn import Txn
from brainy.index.where import ENTITY_FIELDS, UNADDRESSABLE, Predicate, compile_where, kind_of
from brainy.doors.writes import Context, _stamp

if TYPE_CHECKING:
    from brainy.engine.brain import Brain

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
EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)

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
    return (datetime(moment.year, month, 1, tzinfo=timezone.utc) - EPOCH) // timedelta(milliseconds=1)


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
        self.doc = {"name": name, "source": {k: source[k] for k in SOURCE_KEYS if source.get(k) is not None},
                    "groupBy": list(group_by), "metrics": {m: dict(s) for m, s in metrics.items()}}

    @classmethod
    def of_row(cls, row: dict[str, Any] | None) -> "Definition | None":
        """The definition a row holds, or None (not a definition row, or one that does not check out)."""
        if row is None or not is_definition_row(row) or not isinstance(row.get("data"), dict):
            return None
        try:
            return cls(row["data"])
        except R.Refusal:
            return None

    def selects(self, row: dict[str, Any]) -> bool:
        return (row.get("visibility", "public") in COUNTED_TIERS
                and (self.types is None or row["type"] in self.types)
                and (self.subtypes is None or row.get("subtype") in self.subtypes)
                and (self.services is None or row.get("service") in self.services)
                and self.where.matches(row))

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


def _merged(blob: "bytes | memoryview", adjustments: dict[Key, int]) -> dict[Key, int]:
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

    def held(self) -> tuple[list[Any], list[Any], "bytes | memoryview", dict[Key, int]] | dict[Key, int] | None:
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
                if sign < 0 and any(_key(x, f) == key and c + held == 0 for x, f, c in self.packed[:2]) or \
                        len(counts) > PACKED_CHANGES:
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
            out.append({"groupKey": {path: _untoken(t) for (path, _, _), t in zip(d.groups, key)},
                        "metrics": metrics, "count": group.count})
        self.answered = out
        return out


class Aggregates:
    """Every definition's running state at one generation, its ``stamp``."""

    def __init__(self, stamp: int) -> None:
        self.stamp = stamp
        self.built: dict[str, Aggregate] = {}
        self.pending: dict[str, Definition] = {}  # defined since the last read: built from the rows on need

    @classmethod
    def of(cls, entities: Callable[[], Iterable[dict[str, Any]]], stamp: int) -> "Aggregates":
        state = cls(stamp)
        for row in entities():
            if row.get("subtype") == DEFINITION_SUBTYPE:
                d = Definition.of_row(row)
                if d is not None:
                    state.pending[d.name] = d
        state.settle(entities)
        return state

    def apply(self, moves: list[tuple[dict[str, Any] | None, dict[str, Any] | None]], generation: int) -> None:
        """One durable commit's entity moves: definitions come and go, every built aggregate follows the rows."""
        for before, after in moves:
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


Move = tuple[dict[str, Any] | None, dict[str, Any] | None]


# -- snapshots (docs/store-format.md, "Aggregate snapshots") ---------------------------------------------

MAGIC = b"brnyaggr"
SNAPSHOT_FORMAT = 1
SUFFIX = ".agg"
_FRAME = struct.Struct("<8sQQ")
_CRC = struct.Struct("<I")

# An aggregate's groups as the snapshot copies them under the lock: (key, count, [values]) with values
# (present, n, sum, squares, counts or None); the encode, the O(state) part, runs on the copy unlocked.
Frozen = tuple[dict[str, Any], list[tuple[tuple[Any, ...], int, list[tuple[int, int, int, int, Any]]]]]


def _frozen(aggregate: Aggregate) -> Frozen:
    return aggregate.definition.doc, [
        (key, group.count, [(v.present, v.n, v.sum, v.squares, v.held()) for v in group.values])
        for key, group in aggregate.groups.items()]


def encode_snapshot(stamp: int, built: list[Frozen], pending: list[dict[str, Any]]) -> bytes:
    """The state as its snapshot: a JSON head, the min/max counts as MessagePack blobs after it, checksummed."""
    blobs: list[bytes | memoryview] = []
    at = 0

    def packed(counts: Any) -> Any:
        nonlocal at
        if counts is None:
            return None
        if isinstance(counts, tuple):
            lo, hi, blob, changes = counts
            if changes:  # moves since the snapshot it came from: merged here, outside the lock
                counts = _merged(blob, changes)
        if isinstance(counts, dict):
            if not counts:
                return []
            ordered = [[v, f, c] for (v, f), c in sorted(counts.items())]
            lo, hi, blob = ordered[0], ordered[-1], msgpack.packb(ordered)
        blobs.append(blob)
        at += len(blob)
        return [lo, hi, at - len(blob), len(blob)]

    doc = {"format": SNAPSHOT_FORMAT, "stamp": stamp, "pending": pending, "aggregates": [
        {"definition": definition, "groups": [
            [[_untoken(t) for t in key], count,
             [[present, n, format(total, "x"), format(squares, "x"), packed(counts)]
              for present, n, total, squares, counts in values]]
            for key, count, values in groups]}
        for definition, groups in built]}
    head = orjson.dumps(doc)  # a row's integers fit in 64 bits and its floats are finite (rows.py): orjson takes them
    body = b"".join([_FRAME.pack(MAGIC, len(head), at), head, *blobs])
    return body + _CRC.pack(crc32(body))


def decode_snapshot(data: bytes) -> Aggregates:
    """The state a snapshot holds; ValueError when it does not check out (it is then rebuilt, never trusted)."""
    if len(data) < _FRAME.size + _CRC.size:
        raise ValueError("shorter than its frame")
    magic, head_size, blobs_size = _FRAME.unpack_from(data)
    if magic != MAGIC or _FRAME.size + head_size + blobs_size + _CRC.size != len(data):
        raise ValueError("not an aggregate snapshot, or torn")
    view = memoryview(data)
    if crc32(view[:-_CRC.size]) != _CRC.unpack_from(data, len(data) - _CRC.size)[0]:
        raise ValueError("checksum mismatch")
    blobs = view[_FRAME.size + head_size:len(data) - _CRC.size]
    try:
        doc = orjson.loads(view[_FRAME.size:_FRAME.size + head_size])
        if doc["format"] != SNAPSHOT_FORMAT:
            raise ValueError(f"format {doc['format']!r}, not {SNAPSHOT_FORMAT}")
        state = Aggregates(int(doc["stamp"]))
        for held in doc["aggregates"]:
            aggregate = Aggregate(Definition(held["definition"]))
            for values, count, fields in held["groups"]:
                group = _Group(aggregate.definition)
                group.count = count
                for v, (present, n, total, squares, counts) in zip(group.values, fields, strict=True):
                    v.present, v.n, v.sum, v.squares = present, n, int(total, 16), int(squares, 16)
                    if v.counts is not None and counts:  # [] is an empty map, already there
                        lo, hi, offset, size = counts
                        if not 0 <= offset <= offset + size <= len(blobs):
                            raise ValueError("counts outside the blobs")
                        v.packed = (lo, hi, blobs[offset:offset + size])
                        if _key(*lo[:2]) > _key(*hi[:2]) or lo[2] <= 0 or hi[2] <= 0:
                            raise ValueError("counts whose ends are not a min and a max")
                aggregate.groups[tuple(_token(value) for value in values)] = group
            state.built[aggregate.definition.name] = aggregate
        for definition in doc["pending"]:
            d = Definition(definition)
            state.pending[d.name] = d
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError, R.Refusal) as exc:
        raise ValueError(f"the body does not decode: {exc}") from None
    return state


class AggregateFollower:
    """Keeps :class:`Aggregates` at the brain's durable head, as the projection follower keeps the postings.

    :meth:`record` takes each commit's entity moves when it is applied (and each frame replayed on
    open); :meth:`advance` applies them, in generation order, once the commit is durable. The state
    is loaded on first need from the newest snapshot the moves this handle holds bring to the head,
    else built from the rows; :meth:`persist` writes it out at every flush and clean close.
    """

    def __init__(self, brain: "Brain", lock: threading.Lock) -> None:
        self._brain: "Brain" = weakref.proxy(brain)  # weakly, as the projection follower does (follower.py)
        self._lock = lock  # the brain's state lock: the durable head and this state move together
        self._state: Aggregates | None = None
        self._moves: dict[int, list[Move]] = {}
        # until the state is loaded, the moves above this are kept: they bring the newest snapshot (at the
        # flushed generation when the handle opened, then at what persist wrote) to the head
        self._reach: int | None = None
        self._since: dict[int, list[Move]] | None = None  # moves applied while a flush builds definitions
        self.built_from: str | None = None  # "rows" or "snapshot at G", once loaded

    @property
    def folder(self) -> Path:
        return self._brain.path / "index"

    def adopt(self, other: "AggregateFollower") -> None:
        """Take over the moves a read-only handle of the same store replayed above the flushed generation, and
        how far back they reach: the newest snapshot then loads and catches up here, where without them this
        handle would find a gap after it and build every definition from the rows again."""
        self._moves, self._reach = dict(other._moves), other._reach

    def record(self, generation: int, entity_moves: list[Move]) -> None:
        if self._reach is None:
            self._reach = self._brain.flushed
        self._moves[generation] = entity_moves

    def advance(self, durable: int) -> None:
        """The commit at ``durable`` is acknowledged. The caller holds the lock."""
        state = self._state
        if state is None:  # keep what the newest snapshot needs to reach the head
            reach = self._brain.flushed if self._reach is None else self._reach
            for g in [g for g in self._moves if g <= reach]:
                del self._moves[g]
            return
        for g in sorted(g for g in self._moves if g <= durable):
            moves = self._moves.pop(g)
            if g > state.stamp:
                state.apply(moves, g)
                if self._since is not None:
                    self._since[g] = moves

    @contextmanager
    def held(self) -> Iterator[Aggregates]:
        """The state at the durable head, every definition built, held still for the block."""
        brain = self._brain
        if self._state is None:
            self._load()
        with self._lock:
            state = self._state
            assert state is not None
            state.settle(lambda: brain.at(state.stamp).entities())
            yield state

    def _load(self) -> None:
        """Load the state from the newest reachable snapshot (or the rows) and publish it at the head. The
        O(store) part runs unlocked; the catch-up to the head and the publication take the lock."""
        brain = self._brain
        started, head = time.monotonic(), brain.head
        state, how = self._persisted(), "rows"
        if state is not None:
            how = f"snapshot at {state.stamp}"
        else:
            state = Aggregates.of(lambda: brain.at(head).entities(), head)
        with self._lock:
            if self._state is not None:  # another thread loaded it meanwhile
                return
            head = brain.head
            for g in sorted(g for g in self._moves if state.stamp < g <= head):
                state.apply(self._moves[g], g)
            state.stamp = max(state.stamp, head)
            self._moves = {g: m for g, m in self._moves.items() if g > head}
            self._state, self.built_from = state, how
        log.info("brain %s: aggregates at generation %d from %s in %.0f ms", brain.name, head, how,
                 (time.monotonic() - started) * 1000)

    def _persisted(self) -> Aggregates | None:
        """The newest snapshot, if the moves this handle holds bring it to the head; else None, and the
        warnings say why when there was one."""
        found = newest_snapshot(self.folder, SUFFIX) if self.folder.is_dir() else None
        if found is None:
            return None
        stamp, path = found
        brain = self._brain
        reach = brain.flushed if self._reach is None else min(self._reach, brain.flushed)
        why = None
        if not reach <= stamp <= brain.head:
            why = f"snapshot {path.name} is outside generations {reach}..{brain.head}"
        elif any(g not in self._moves for g in range(stamp + 1, brain.head + 1)):
            # every commit records its moves (an empty list too): a gap is a tail this handle did not replay
            why = f"snapshot {path.name}: this handle does not hold the moves after it"
        else:
            try:
                state = decode_snapshot(path.read_bytes())
                if state.stamp == stamp:
                    return state
                why = f"snapshot {path.name} holds generation {state.stamp}"
            except (OSError, ValueError) as exc:
                why = f"snapshot {path.name}: {exc}"
        brain.warnings.append({"code": "aggregates-rebuilt", "message": why})
        return None

    def persist(self) -> None:
        """Write the state out, stamped with the generation it covers (a flush, a clean close): loaded first
        if nothing has needed it since the open, the definitions no read has built yet built off the lock.
        The lock is held for a copy of the groups; the encode runs on the copy unlocked."""
        if self._state is None:
            found = newest_snapshot(self.folder, SUFFIX) if self.folder.is_dir() else None
            if found is not None and found[0] == self._brain.head:
                return  # nothing has needed the state since the snapshot at the head was written
            self._load()
        self._settle_off_lock()
        with self._lock:
            state = self._state
            assert state is not None
            stamp = state.stamp
            built = [_frozen(state.built[name]) for name in sorted(state.built)]
            pending = [state.pending[name].doc for name in sorted(state.pending)]
        folder, name = self.folder, snapshot_name(stamp, SUFFIX)
        if not (folder / name).exists():
            folder.mkdir(exist_ok=True)
            write_durably(folder / name, encode_snapshot(stamp, built, pending))
            for older in folder.glob("*" + SUFFIX):
                if older.name != name:
                    older.unlink(missing_ok=True)
        self._reach = stamp

    def _settle_off_lock(self) -> None:
        """Build the pending definitions from the rows at the state's stamp without holding the lock, then
        bring them to the head with the moves applied meanwhile."""
        brain = self._brain
        with self._lock:
            state = self._state
            assert state is not None
            if not state.pending:
                return
            fresh = Aggregates(state.stamp)
            fresh.pending = dict(state.pending)
            self._since = {}
        try:
            fresh.settle(lambda: brain.at(fresh.stamp).entities())
        except BaseException:
            with self._lock:
                self._since = None
            raise
        with self._lock:
            since, self._since = self._since or {}, None
            for g in sorted(since):
                fresh.apply(since[g], g)
            for name, aggregate in fresh.built.items():
                if state.pending.get(name) is aggregate.definition:  # still the definition no read has built
                    state.built[name] = aggregate
                    del state.pending[name]


# -- answering --------------------------------------------------------------------------------------------

def _not_found(name: Any) -> R.Refusal:
    return R.AggregateNotFoundError(f"no aggregate is defined under the name {name!r}", aggregate=name)


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


def page(d: Definition, every: list[dict[str, Any]], q: dict[str, Any],
         offset: int | None = None) -> tuple[list[dict[str, Any]], int, int]:
    """The AggregateQuery ``q`` over an aggregate's rows (:meth:`Aggregate.rows`, in group key order): the
    page of rows (copies), how many rows matched, the offset used."""
    from brainy.doors.query import _sorted  # find's order law: value order, missing last, ties on the key

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
    kept = [r for r in every
            if where.matches_all or where.matches(_where_view(r["groupKey"], r["metrics"], r["count"]))]

    def value_of(i: int) -> tuple[bool, Any]:
        r = kept[i]
        for place in (r["metrics"], r["groupKey"]):
            if order_by in place:
                return True, place[order_by]
        return (True, r["count"]) if order_by == "count" else (False, None)

    ordered = _sorted(list(range(len(kept))), value_of, int, order == "desc")  # kept is in key order
    found = [kept[i] for i in ordered[offset:offset + limit]]
    return [{"groupKey": dict(r["groupKey"]), "metrics": dict(r["metrics"]), "count": r["count"]}
            for r in found], len(kept), offset


# -- the doors --------------------------------------------------------------------------------------------

@door("defineAggregate", WRITE)
def define_aggregate(txn: Txn, a: dict[str, Any], ctx: Context) -> dict[str, Any]:
    """Store (or replace) a definition row; answers how many groups it holds once this commit lands."""
    d = Definition(a)
    id_ = definition_id(d.name)
    before = txn.entity(id_)
    if before is not None and not is_definition_row(before):
        raise invalid("name", "id-taken", f"the id {id_} this name derives is held by a row that is no aggregate")
    row: dict[str, Any] = {"id": id_, "type": DEFINITION_TYPE, "subtype": DEFINITION_SUBTYPE, "service": None,
                           "data": d.doc, "metadata": {}, "visibility": "system", "confidence": None,
                           "weight": None, "hasVector": False}
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
    from brainy.doors.cursors import encode_cursor

    spec = q.args["aggregate"]
    if isinstance(spec, str):
        spec = {"name": spec}
    if not isinstance(spec, dict):
        raise invalid("aggregate", "wrong-type", "an aggregate name or an AggregateQuery")
    spec = arguments.check(D.BY_NAME["aggregate"], spec, "aggregate.")
    if q.ranked:
        raise invalid("aggregate", "ranked-and-aggregated", "the aggregated shape takes no query or vector")
    d = _definition_at(view, spec["name"])
    found, total, offset = page(d, Aggregate(d, matching).rows(), spec,
                                q.offset if q.args.get("cursor") is not None else None)
    more = offset + len(found) < total
    return {"results": [], "brain": view.brain, "generation": view.generation, "total": total,
            "cursor": encode_cursor("find", q.fingerprint(), view.generation, offset + len(found)) if more else None,
            "hasMore": more, "legs": q.legs, "cost": cost, "rows": found}
