"""The aggregate follower and its snapshots: the running state of every aggregate (``brainy/index/aggregates.py``)
kept at the brain's durable head, persisted at every flush as ``index/<stamp>.agg`` (docs/store-format.md,
"Aggregate snapshots") and caught up from the replayed log tail on the next open.
"""

from __future__ import annotations

import struct
import threading
import time
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import msgpack
import orjson

from brainy.contract import refusals as R
from brainy.index.aggregates import (
    Aggregate,
    Aggregates,
    Definition,
    Move,
    _Group,
    _key,
    _merged,
    _token,
    _untoken,
    log,
)
from brainy.index.projections import newest_snapshot, snapshot_name
from brainy.index.snapshot import Followed
from brainy.store.crc import crc32
from brainy.store.directory import store_id_of
from brainy.store.files import write_durably
from brainy.store.pending import Pending

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
        for key, group in aggregate.groups.items()
    ]


def encode_snapshot(
    stamp: int, built: list[Frozen], pending: list[dict[str, Any]], store_id: str | None = None
) -> bytes:
    """The state as its snapshot: a JSON head (naming the store it is written in), the min/max counts as
    MessagePack blobs after it, checksummed."""
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

    doc = {
        "format": SNAPSHOT_FORMAT,
        "stamp": stamp,
        "pending": pending,
        "aggregates": [
            {
                "definition": definition,
                "groups": [
                    [
                        [_untoken(t) for t in key],
                        count,
                        [
                            [present, n, format(total, "x"), format(squares, "x"), packed(counts)]
                            for present, n, total, squares, counts in values
                        ],
                    ]
                    for key, count, values in groups
                ],
            }
            for definition, groups in built
        ],
    }
    if store_id is not None:
        doc["storeId"] = store_id
    head = orjson.dumps(doc)  # a row's integers fit in 64 bits and its floats are finite (rows.py): orjson takes them
    body = b"".join([_FRAME.pack(MAGIC, len(head), at), head, *blobs])
    return body + _CRC.pack(crc32(body))


def decode_snapshot(data: bytes, store_id: str | None = None) -> Aggregates:
    """The state a snapshot holds; ValueError when it does not check out, or names a store other than
    ``store_id`` (a file copied in from another store): it is then rebuilt, never trusted."""
    if len(data) < _FRAME.size + _CRC.size:
        raise ValueError("shorter than its frame")
    magic, head_size, blobs_size = _FRAME.unpack_from(data)
    if magic != MAGIC or _FRAME.size + head_size + blobs_size + _CRC.size != len(data):
        raise ValueError("not an aggregate snapshot, or torn")
    view = memoryview(data)
    if crc32(view[: -_CRC.size]) != _CRC.unpack_from(data, len(data) - _CRC.size)[0]:
        raise ValueError("checksum mismatch")
    blobs = view[_FRAME.size + head_size : len(data) - _CRC.size]
    try:
        doc = orjson.loads(view[_FRAME.size : _FRAME.size + head_size])
        if doc["format"] != SNAPSHOT_FORMAT:
            raise ValueError(f"format {doc['format']!r}, not {SNAPSHOT_FORMAT}")
        if store_id is not None and doc.get("storeId", store_id) != store_id:
            raise ValueError(f"another store's (storeId {doc['storeId']})")
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
                        v.packed = (lo, hi, blobs[offset : offset + size])
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


EMPTY_STORE = "the moves since the empty store"  # built_from when no row was read


class AggregateFollower:
    """Keeps :class:`Aggregates` at the brain's durable head, as the projection follower keeps the postings.

    :meth:`record` takes each commit's entity moves when it is applied (and each frame replayed on
    open); :meth:`advance` applies them, in generation order, once the commit is durable. The state
    is loaded on first need from the newest snapshot the moves this handle holds bring to the head,
    else built from the rows; :meth:`persist` writes it out at every flush and clean close.
    """

    def __init__(self, brain: Followed, lock: threading.Lock) -> None:
        self._brain: Followed = weakref.proxy(brain)  # weakly, as the projection follower does (follower.py)
        self._lock = lock  # the brain's state lock: the durable head and this state move together
        self._state: Aggregates | None = None
        # put by the commits (under the commit lock), taken once durable (under the state lock): as the projection
        # follower's, behind a lock of their own (brainy/store/pending.py says why)
        self._moves: Pending[list[Move]] = Pending()
        # until the state is loaded, the moves above this are kept: they bring the newest snapshot (at the
        # flushed generation when the handle opened, then at what persist wrote) to the head
        self._reach: int | None = None
        self._since: dict[int, list[Move]] | None = None  # moves applied while a flush builds definitions
        self.built_from: str | None = None  # "rows", "snapshot at G" or EMPTY_STORE, once loaded

    @property
    def folder(self) -> Path:
        return self._brain.path / "index"

    def adopt(self, other: AggregateFollower) -> None:
        """Take over the moves a read-only handle of the same store replayed above the flushed generation, and
        how far back they reach: the newest snapshot then loads and catches up here, where without them this
        handle would find a gap after it and build every definition from the rows again."""
        self._moves, self._reach = Pending(other._moves.copy()), other._reach

    def record(self, generation: int, moves: list[Move]) -> None:
        if self._reach is None:
            self._reach = self._brain.flushed
        self._moves.put(generation, moves)

    def advance(self, durable: int) -> None:
        """The commit at ``durable`` is acknowledged. The caller holds the lock."""
        state = self._state
        if state is None:  # keep what the newest snapshot needs to reach the head
            reach = self._brain.flushed if self._reach is None else self._reach
            self._moves.drop(reach)
            return
        for g, moves in self._moves.take(durable):
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
        elif self._reach == 0:
            # the moves held reach back to the empty store (nothing flushed when they began): they are every row
            # there is, so the state is theirs, not a read of every row (a fresh store's first flush read back all
            # it had ingested, a sixth of the maintenance thread's time in a burst of adds)
            state, how = Aggregates(0), EMPTY_STORE
        else:
            state = Aggregates.of(lambda: brain.at(head).entities(), head)
        with self._lock:
            if self._state is not None:  # another thread loaded it meanwhile
                return
            head = brain.head
            for g, moves in self._moves.take(head):  # taken, never replaced: a commit puts its moves meanwhile
                if g > state.stamp:
                    state.apply(moves, g)
            state.stamp = max(state.stamp, head)
            self._state, self.built_from = state, how
        log.info(
            "brain %s: aggregates at generation %d from %s in %.0f ms",
            brain.name,
            head,
            how,
            (time.monotonic() - started) * 1000,
        )

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
        elif not self._moves.reaches(stamp, brain.head):
            # every commit records its moves (an empty list too): a gap is a tail this handle did not replay
            why = f"snapshot {path.name}: this handle does not hold the moves after it"
        else:
            try:
                state = decode_snapshot(path.read_bytes(), store_id_of(brain.path))
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
        # one already at the stamp is kept only when it is the one this state was read from (it checked out);
        # a state built from the rows at a damaged one's stamp writes it whole again
        if not (folder / name).exists() or self.built_from != f"snapshot at {stamp}":
            folder.mkdir(exist_ok=True)
            write_durably(folder / name, encode_snapshot(stamp, built, pending, store_id_of(self._brain.path)))
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
