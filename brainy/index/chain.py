"""The projection snapshot chain: a base and at most one delta after it (docs/store-format.md, "The chain").

A flush used to encode the whole projections again (at 1,000,000 entities about 15 s of CPU each time, and
the first flush after an open decoded the snapshot whole before that). A flush now writes a **delta**: the
projections of the rows the commits since the base touched (:class:`Delta`, which the writer keeps and
moves with each flush), in the base's own format 3, with the dense ints they mask and the base's rows they
void. It costs what changed since the base; a new base is written only when the delta passes
``REBASE_FRACTION`` of the base's bytes, or when no chain is reachable.

A read lays the delta over the base the way :class:`~brainy.index.overlaid.Overlaid` lays a log tail over a
snapshot (:class:`Layered`, both files mapped and read in place), and a full load (:func:`load`) unposts
the voided rows from the base and merges the delta's projections in: both answer as projections built from
the rows at the delta's stamp.
"""

from __future__ import annotations

import mmap
import os
from array import array
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgpack

from brainy.index.overlaid import Overlaid
from brainy.index.projections import (
    MAGIC,
    SNAPSHOT_FORMAT,
    TYPECODE,
    InPlace,
    Projections,
    decode_snapshot,
    encode_snapshot,
    head_check,
    newest_snapshot,
    packed,
    snapshot_name,
    unpacked,
    words,
)
from brainy.store.directory import store_id_of
from brainy.store.files import write_durably

BASE_SUFFIX = ".proj"
DELTA_SUFFIX = ".projd"
# A delta past this share of its base's bytes makes the next flush write a base. A cumulative delta is written
# whole at every flush, so its cost grows with it; a base costs the store. A quarter keeps both bounded: over a
# run of flushes each touching d bytes of a base of B, the bytes written per flush stay under about B/8 + 4d.
REBASE_FRACTION = 0.25


def stored(row: dict[str, Any]) -> dict[str, Any]:
    """A row as a delta keeps it: without its vector, which no projection reads (the vector index has its own)."""
    return {k: v for k, v in row.items() if k != "vector"} if "vector" in row else row


@dataclass(frozen=True)
class Found:
    """The newest chain in an index folder: its base and, when one extends it, its delta (stamp, path each)."""

    base: tuple[int, Path]
    delta: tuple[int, Path] | None
    store_id: str | None = None  # IDENTITY's, beside the folder: every link's head must name it (or none)

    @property
    def stamp(self) -> int:
        """The generation the chain covers."""
        return (self.delta or self.base)[0]


def newest(folder: Path) -> Found | None:
    """The newest base and the newest delta after it, if any (whether the delta names this base is checked when
    it is read: a delta that does not is refused there, and the chain is then not trusted)."""
    if not folder.is_dir():
        return None
    base = newest_snapshot(folder, BASE_SUFFIX)
    if base is None:
        return None
    delta = newest_snapshot(folder, DELTA_SUFFIX)
    return Found(base, delta if delta is not None and delta[0] > base[0] else None, store_id_of(folder.parent))


def owned(folder: Path) -> dict[str, Any]:
    """The head member that names the store a link is written in (docs/store-format.md, "Projection snapshots")."""
    store_id = store_id_of(folder.parent)
    return {} if store_id is None else {"storeId": store_id}


def _owned(snap: InPlace, store_id: str | None) -> InPlace:
    """``snap`` when its head names this store, or names none (a link written before heads named their store);
    ValueError when it names another: a file copied in from another store under the same name is not trusted."""
    named = snap.head.get("storeId")
    if named is not None and store_id is not None and named != store_id:
        raise ValueError(f"the snapshot at {snap.stamp} is another store's (storeId {named})")
    return snap


def _tied(delta: InPlace, base: InPlace) -> None:
    head = delta.head
    if "masked" not in delta._sections or "voided" not in delta._sections:
        raise ValueError("a delta without its masked and voided sections")
    if head.get("base") != base.stamp or head.get("baseCheck") != base.check:
        raise ValueError(f"the delta at {delta.stamp} names base {head.get('base')}, not the base at {base.stamp}")


def _mapped(path: Path) -> InPlace:
    """A snapshot file mapped for reading in place, without the kernel's read-around: every read of it asks
    for exactly the pages it checks (``InPlace``), and a first touch of a cold page otherwise read 8 MB around
    it (this disk's read-ahead), then ran on ahead of the checks (50-100 MB of a 444 MB file read from disk by
    a first find at a million rows, which needs 8). The full load reads the file, not the mapping."""
    with open(path, "rb") as f:
        data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    data.madvise(mmap.MADV_RANDOM)
    return InPlace(data)


def mapped(found: Found) -> InPlace | Layered:
    """The chain read in place: the base mapped, and the delta mapped and laid over it. ValueError (or OSError)
    when a file does not check out or the delta does not name the base."""
    base = _owned(_mapped(found.base[1]), found.store_id)
    if found.delta is None:
        return base
    delta = _owned(_mapped(found.delta[1]), found.store_id)
    _tied(delta, base)
    return Layered(base, delta)


def load(found: Found) -> Projections:
    """The chain decoded whole: the base's projections less the voided rows, with the delta's merged in."""
    data = found.base[1].read_bytes()
    if data.startswith(MAGIC):  # format 1 (one MessagePack map, before heads) has no head to name a store
        _owned(InPlace(data), found.store_id)
    proj = decode_snapshot(data)
    if found.delta is not None:
        delta = _owned(InPlace(found.delta[1].read_bytes()), found.store_id)
        _tied(delta, InPlace(data))
        try:
            for row in unpacked(delta.section("voided")):
                proj.unpost(row)
            proj.merge(delta.load())
        except (KeyError, TypeError, IndexError, UnicodeDecodeError, msgpack.UnpackException) as exc:
            raise ValueError(f"delta does not decode: {exc}") from None
        proj.stamp = delta.stamp
    return proj


class Layered(Overlaid):
    """A delta read in place laid over its base read in place: the reads :class:`Projections` answers.

    The delta's rows answer for every dense int it masks, the base for the rest, exactly as an overlay's
    touched rows do (this is an overlay whose touched rows were projected and written by a flush); a log
    tail after the delta's stamp is laid over this in turn (``Overlaid(Layered(...))``)."""

    def __init__(self, base: InPlace, delta: InPlace) -> None:
        super().__init__(base)
        self.stamp = delta.stamp
        self.sealed = delta
        self._masked = delta.ints("masked")
        self.rows = set(self._masked.tolist())  # type: ignore[assignment]  (only ``in`` and ``len`` are asked)
        self._ids = delta.ids  # type: ignore[assignment]
        self._live = delta.all  # type: ignore[assignment]
        self._voided_count, self._voided_length = int(delta.head["voidedCount"]), int(delta.head["voidedLength"])

    def moved(self, commits: list[list[tuple[str, Any, Any]]], stamp: int) -> Overlaid:
        return Overlaid(self).moved(commits, stamp)

    def apply(self, before: dict[str, Any] | None, after: dict[str, Any] | None) -> None:
        raise TypeError("a delta read in place never moves: a tail is laid over it")

    def live(self) -> Any:
        return self._live

    def masked(self) -> array:
        return self._masked

    def path(self, path: str) -> tuple[Any, Any]:
        sealed = self.sealed
        return sealed.postings.get(path) or {}, sealed.columns.get(path) or {}

    def paths(self) -> set[str]:
        return set(self.sealed.postings)

    def delta(self) -> Any:
        return self.sealed

    def __len__(self) -> int:
        return len(self.base) - self._voided_count + len(self.sealed)

    @property
    def total_length(self) -> int:
        return self.base.total_length - self._voided_length + self.sealed.total_length


class Delta:
    """The writer's delta: the projections of the rows the commits after the base touched, moved by each flush's
    commits and written whole as the chain's next link."""

    def __init__(
        self, base: int, base_check: int, base_bytes: int, store_id: str | None = None, base_rows: int = 0
    ) -> None:
        self.base, self.base_check, self.base_bytes = base, base_check, base_bytes
        self.base_rows = base_rows  # the rows the base holds (0: not known), for :meth:`past_its_share`
        self.store_id = store_id
        self.stamp = base
        self.proj = Projections()  # the touched rows that are live, projected
        self.masked: set[int] = set()
        self.voided: dict[int, dict[str, Any]] = {}  # the base's own row of each masked int the base holds
        self.voided_length = 0

    @classmethod
    def read(cls, found: Found) -> Delta:
        """The delta the newest chain ends with (an empty one at its base's stamp when it has none)."""
        base_path = found.base[1]
        base = _owned(_mapped(base_path), found.store_id)
        if base.format != SNAPSHOT_FORMAT:  # an older format's base is written again, as format 3, by the next flush
            raise ValueError(f"the base at {found.base[0]} is of format {base.format}")
        check = base.check
        out = cls(found.base[0], check, base_path.stat().st_size, found.store_id, len(base))
        if found.delta is None:
            return out
        snap = _owned(InPlace(found.delta[1].read_bytes()), found.store_id)
        if snap.head.get("base") != out.base or snap.head.get("baseCheck") != check:
            raise ValueError(f"the delta at {snap.stamp} does not name the base at {out.base}")
        out.stamp, out.proj = snap.stamp, snap.load()
        out.masked = set(snap.ints("masked").tolist())
        out.voided = {row["denseInt"]: row for row in unpacked(snap.section("voided"))}
        out.voided_length = int(snap.head["voidedLength"])
        return out

    def apply(self, before: dict[str, Any] | None, after: dict[str, Any] | None) -> None:
        """One entity move after the delta's stamp (None: absent). A dense int's first move voids the base's row."""
        held = None
        if before is not None:
            dense = before["denseInt"]
            if dense in self.masked:
                held = stored(before)  # the delta's own row: it holds every later move of the int
            else:
                self.masked.add(dense)
                self.voided[dense] = stored(before)
                self.voided_length += len(words(before))
        if after is not None:
            self.masked.add(after["denseInt"])
        self.proj.apply(held, stored(after) if after is not None else None)

    def apply_all(self, commits: list[list[tuple[str, Any, Any]]]) -> None:
        """:meth:`apply` of each entity move of these commits, in order, a run of new rows (an ``addMany``'s) posted
        by one call of the projections' batch step (brainy/_speedups/rowpost), not a call a row: a flush folding in
        a burst's rows a move at a time took 10 us a row. A new row is posted as it is, not as :func:`stored` keeps
        it: the projections keep its values, never the row, and its vector is no value of theirs."""
        run: list[tuple[str, None, dict[str, Any]]] = []
        for moves in commits:
            for _, before, after in moves:
                if before is None and after is not None:
                    self.masked.add(after["denseInt"])
                    run.append(("e", None, after))
                    continue
                if run:
                    self.proj.apply_moves(run)
                    run = []
                self.apply(before, after)
        if run:
            self.proj.apply_moves(run)

    def encode(self) -> bytes:
        head = {
            "base": self.base,
            "baseCheck": self.base_check,
            "voidedCount": len(self.voided),
            "voidedLength": self.voided_length,
            **({} if self.store_id is None else {"storeId": self.store_id}),
        }
        self.proj.stamp = self.stamp
        return encode_snapshot(
            self.proj,
            head,
            [("masked", array(TYPECODE, sorted(self.masked)).tobytes()), ("voided", packed(self.voided.values()))],
        )

    def due_a_base(self, size: int) -> bool:
        """Whether a delta of ``size`` bytes is past its share of the base: the next link is then a base."""
        return size > REBASE_FRACTION * self.base_bytes

    def past_its_share(self, moves: list[list[Any]]) -> bool:
        """Whether the delta is sure to be past its share once ``moves`` (each commit's entity moves) are folded in,
        before they are: it would then hold, at the least, its rows and those the moves add less those they
        remove, and that is twice the rows its share of the base holds (a delta's rows are the base's, byte for
        byte). Folding in a burst's rows only to find a base due took a quarter of its flushes' projections."""
        if not self.base_rows:
            return False
        held = len(self.proj)
        for commit in moves:
            for _, before, after in commit:
                held += (after is not None) - (before is not None)
        return held > 2 * REBASE_FRACTION * self.base_rows


def write_delta(folder: Path, stamp: int, data: bytes) -> None:
    """The chain's next delta, durable before the one it replaces goes."""
    name = snapshot_name(stamp, DELTA_SUFFIX)
    write_durably(folder / name, data)
    for older in folder.glob("*" + DELTA_SUFFIX):
        if older.name != name:
            older.unlink(missing_ok=True)


def write_base(folder: Path, stamp: int, data: bytes, replace: bool = False, rows: int = 0) -> Delta:
    """A new base, durable before every older link goes (the older deltas name older bases); the empty delta after
    it. A base already there at the stamp is kept, and named by its own check (the same projections may encode to
    other bytes: their maps' order follows their history), unless ``replace`` (the writer found the chain
    damaged): then it is written whole over it."""
    path = folder / snapshot_name(stamp, BASE_SUFFIX)
    folder.mkdir(exist_ok=True)
    if path.exists() and not replace:
        with open(path, "rb") as f:
            check, size = head_check(f.read(16)), os.fstat(f.fileno()).st_size
    else:
        write_durably(path, data)
        check, size = head_check(data), len(data)
    for older in [*folder.glob("*" + BASE_SUFFIX), *folder.glob("*" + DELTA_SUFFIX)]:
        if older != path:
            older.unlink(missing_ok=True)
    return Delta(stamp, check, size, store_id_of(folder.parent), rows)
