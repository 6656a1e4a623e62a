"""A projection snapshot read in place, with the commits after its stamp laid over it.

After a crash (or an attach past a writer's unflushed commits) the newest snapshot is behind the head:
its stamp is the flushed generation and the open replayed the log tail above it. Until the background
build lands, a read is answered from :class:`Overlaid`: the snapshot read in place
(``projections.InPlace``, mapped, each section decoded when a read first needs it) for every entity
the tail did not touch, and a small :class:`~brainy.index.projections.Projections` of the rows the
tail touched (added, changed, deleted) for the rest. A dense int the tail touched is *masked*: none of
the snapshot's entries for it is used, so a changed value, a deleted row and a moved key read exactly
as a full build from the rows reads them. What the overlay costs is the tail's, never the store's.

An overlay is never moved once a read may hold it, so a read holds no lock on it (as on the
snapshot in place): a read after another commit takes a copy moved by that commit's entity moves
(:meth:`Overlaid.moved`), at the cost of the tail. The graph is not laid over: a walk builds it from
the overlay and the rows of the overlay's stamp, as it does from built projections. The answers are
those of ``Projections`` built from the rows at its stamp (tests/test_cold_start.py checks every
read surface against a full build).
"""

from __future__ import annotations

import bisect
from array import array
from collections.abc import Iterator, Mapping
from typing import Any

from brainy._speedups import postings as P
from brainy.index.projections import (
    COLUMN_ONLY,
    TYPECODE,
    Adjacency,
    InPlace,
    Posted,
    Projections,
    leaves,
    path_values,
    value_key,
    word_arrays,
    words,
)

_EMPTY = array(TYPECODE)


class Overlaid:
    """The reads :class:`Projections` answers, from a snapshot in place and the rows the tail touched.

    The touched rows are projected lazily, a path at a time: a read that names three paths pays for three
    paths of a few thousand rows, never for every leaf and word of them. The word postings of the touched
    rows (a text query's) are projected whole, on the first read that needs them."""

    def __init__(self, base: InPlace) -> None:
        self.base = base
        self.stamp = base.stamp
        self.rows: dict[int, dict[str, Any] | None] = {}  # every dense int the tail touched: its row now (None: gone)
        self._ids: dict[int, str] = {}
        self._voided: list[dict[str, Any]] = []  # the snapshot's rows the tail voided, as the snapshot holds them
        self._paths: dict[str, tuple[dict[tuple[str, Any], array], dict[int, Any]]] = {}
        self._delta: Projections | None = None  # the touched rows' words and lengths, for a text query
        self._voided_length: int | None = None
        self._masked: array | None = None
        self._live: list[int] | None = None
        self._all: array | None = None
        self._terms: dict[str, dict[int, int]] = {}
        self.graph: Adjacency | None = None
        self.ids = _Ids(self)
        self.postings = _Postings(self)
        self.columns = _Columns(self)
        self.terms = _Terms(self)
        self.lengths = _Lengths(self)

    # -- moving --------------------------------------------------------------------------------------

    def moved(self, commits: list[list[tuple[str, Any, Any]]], stamp: int) -> Overlaid:
        """A copy moved by the entity moves of each commit above this stamp, in order, up to ``stamp``: a read
        holding this one keeps reading it unchanged (the copy costs the tail, never the store)."""
        out = Overlaid(self.base)
        out.rows, out._ids, out._voided = dict(self.rows), dict(self._ids), list(self._voided)
        for moves in commits:
            for kind, before, after in moves:
                if kind == "e":
                    out.apply(before, after)
        out.stamp = stamp
        return out

    def apply(self, before: dict[str, Any] | None, after: dict[str, Any] | None) -> None:
        """Move the overlay from an entity's old row to its new one (None: absent); only while no read holds it."""
        for row, now in ((before, None), (after, after)):
            if row is None:
                continue
            dense = row["denseInt"]
            if dense not in self.rows and now is None:
                # the first move of a dense int: its before row is the snapshot's (an add has none)
                self._voided.append(row)
                self._voided_length = None
            self.rows[dense] = now
            self._ids[dense] = row["id"]  # the id map keeps a removed row's entry, as the projections' does
        self._paths.clear()
        self._terms.clear()
        self._delta = self._masked = self._all = self._live = None

    # -- the touched rows, projected ---------------------------------------------------------------------

    def live(self) -> list[int]:
        """The touched dense ints that hold a row now, sorted."""
        if self._live is None:
            self._live = sorted(d for d, row in self.rows.items() if row is not None)
        return self._live

    def masked(self) -> array:
        """Every dense int the tail touched, sorted: none of the snapshot's entries for them is used."""
        if self._masked is None:
            self._masked = array(TYPECODE, sorted(self.rows))
        return self._masked

    def path(self, path: str) -> tuple[dict[tuple[str, Any], array], dict[int, Any]]:
        """The touched rows' postings and order column of one path (each row's values of that path alone)."""
        found = self._paths.get(path)
        if found is None:
            postings: dict[tuple[str, Any], array] = {}
            column: dict[int, Any] = {}
            rows = self.rows
            for dense in self.live():
                seen: set[tuple[str, Any]] = set()
                for value in path_values(rows[dense], path):  # type: ignore[arg-type]
                    key = value_key(value)
                    if key not in seen:
                        seen.add(key)
                        postings.setdefault(key, array(TYPECODE)).append(dense)
                        column.setdefault(dense, value)  # the first, as Projections._post keeps it
            if path in COLUMN_ONLY:  # these columns hold the row's own field, whatever a leaf of that name holds
                column = {dense: rows[dense][path] for dense in self.live()}  # type: ignore[index]
            found = self._paths[path] = (postings, column)
        return found

    def paths(self) -> set[str]:
        """Every path a touched row posts (an iteration over every path's postings needs them)."""
        return {path for dense in self.live() for path, _ in leaves(self.rows[dense])}  # type: ignore[arg-type]

    def delta(self) -> Projections:
        """The touched rows projected whole (their words and document lengths)."""
        if self._delta is None:
            self._delta = Projections()
            for dense in self.live():
                self._delta.apply(None, self.rows[dense])
        return self._delta

    # -- reading ---------------------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self.base) - len(self._voided) + len(self.live())

    @property
    def total_length(self) -> int:
        if self._voided_length is None:
            self._voided_length = sum(len(words(row)) for row in self._voided)
        return self.base.total_length - self._voided_length + self.delta().total_length

    @property
    def all(self) -> array:
        if self._all is None:
            self._all = self.merged(self.base.all, array(TYPECODE, self.live()))
        return self._all

    def posting(self, path: str, value: Any) -> array:
        return self.postings.get(path, {}).get(value_key(value), _EMPTY)

    def id_keys(self) -> None:
        """None: an overlay keeps no id keys (it serves until the full load lands), and a ranked find looks up the
        ids it compares instead."""
        return None

    def word_postings(self, word: str) -> tuple[Any, Any] | None:
        """One word's postings as arrays (``projections.word_arrays``, made for each query), None when none holds it."""
        tfs = self.terms.get(word)
        return word_arrays(tfs) if tfs else None

    def word_lengths(self) -> Mapping[int, int]:
        """The word counts (the mapping: an overlay makes no array of them)."""
        return self.lengths

    def _unmasked(self, base: Any) -> Any:
        """A snapshot posting less the mask: the posting itself (read-only, as every posting a read gets) when no
        masked int falls in its range, as after a tail of adds, whose dense ints are past every snapshot's."""
        masked = self.masked()
        lo = bisect.bisect_left(masked, base[0])
        if lo == len(masked) or masked[lo] > base[-1]:
            return base
        return P.difference(base, masked)

    def merged(self, base: Any, delta: Any) -> array:
        """A snapshot posting less the mask, with the touched rows' posting of the same value."""
        kept = self._unmasked(base) if base is not None and len(base) else _EMPTY
        if delta is None or not len(delta):
            return kept
        return P.union(kept, delta) if len(kept) else array(TYPECODE, delta)


class _Ids(Mapping[int, str]):
    """The id map: the delta's entries, then the snapshot's (an entry is never removed, nor changed)."""

    def __init__(self, over: Overlaid) -> None:
        self._over = over

    def __getitem__(self, dense: int) -> str:
        found = self._over._ids.get(dense)
        return found if found is not None else self._over.base.ids[dense]

    def __iter__(self) -> Iterator[int]:
        touched = self._over._ids
        yield from touched
        yield from (d for d in self._over.base.ids if d not in touched)

    def __len__(self) -> int:
        return sum(1 for _ in self)


class _Postings(Mapping[str, "_Values"]):
    def __init__(self, over: Overlaid) -> None:
        self._over = over

    def __getitem__(self, path: str) -> _Values:
        over = self._over
        base, delta = over.base.postings.get(path), over.path(path)[0]
        if base is None and not delta:
            raise KeyError(path)
        return _Values(over, base, delta)

    def __iter__(self) -> Iterator[str]:
        touched = self._over.paths()
        yield from touched
        yield from (p for p in self._over.base.postings if p not in touched)

    def __len__(self) -> int:
        return sum(1 for _ in self)


class _Values(Mapping[tuple[str, Any], array]):
    """One path's postings: each value's snapshot posting less the mask, with the delta's."""

    def __init__(
        self, over: Overlaid, base: Mapping[tuple[str, Any], array] | None, delta: Mapping[tuple[str, Any], array]
    ) -> None:
        self._over, self._base, self._delta = over, base, delta

    def __getitem__(self, key: tuple[str, Any]) -> array:
        base = self._base.get(key) if self._base is not None else None
        delta = self._delta.get(key)
        if base is None and delta is None:
            raise KeyError(key)
        merged = self._over.merged(base, delta)
        if not merged:  # every holder moved off the value: a full build holds no posting for it
            raise KeyError(key)
        return merged

    def _held(self, key: tuple[str, Any]) -> bool:
        """Whether a snapshot value still has a holder: sure without reading its posting when it has more
        holders than the mask has dense ints."""
        base = self._base
        assert base is not None
        count = base.count(key) if isinstance(base, Posted) else len(base[key])
        return count > len(self._over.rows) or bool(self._over.merged(base[key], None))

    def __iter__(self) -> Iterator[tuple[str, Any]]:
        yield from self._delta
        if self._base is not None:
            yield from (k for k in self._base if k not in self._delta and self._held(k))

    def __len__(self) -> int:
        return sum(1 for _ in self)


class _Columns(Mapping[str, "_Column"]):
    def __init__(self, over: Overlaid) -> None:
        self._over = over

    def __getitem__(self, path: str) -> _Column:
        over = self._over
        base, delta = over.base.columns.get(path), over.path(path)[1]
        if base is None and not delta:
            raise KeyError(path)
        return _Column(over.rows, base or {}, delta)

    def __iter__(self) -> Iterator[str]:
        over = self._over
        touched = over.paths() | (set(COLUMN_ONLY) if over.live() else set())
        yield from touched
        yield from (p for p in over.base.columns if p not in touched)

    def __len__(self) -> int:
        return sum(1 for _ in self)


class _Column(Mapping[int, Any]):
    """One order column: a masked dense int's value from the delta (absent there: absent), else the snapshot's."""

    def __init__(self, mask: Mapping[int, Any], base: Mapping[int, Any], delta: Mapping[int, Any]) -> None:
        self._mask, self._base, self._delta = mask, base, delta

    def __getitem__(self, dense: int) -> Any:
        return self._delta[dense] if dense in self._mask else self._base[dense]

    def __iter__(self) -> Iterator[int]:
        yield from self._delta
        yield from (d for d in self._base if d not in self._mask)

    def __len__(self) -> int:
        return len(self._delta) + len(self._base) - sum(1 for d in self._mask if d in self._base)

    def __bool__(self) -> bool:  # a read asks it before it asks a value (``columns.get(path) or {}``)
        return bool(self._delta) or len(self._base) > len(self._mask) or len(self) > 0


class _Terms(Mapping[str, dict[int, int]]):
    """Word postings (dense int to term frequency), each word's merged the first time a read asks for it."""

    def __init__(self, over: Overlaid) -> None:
        self._over = over

    def __getitem__(self, word: str) -> dict[int, int]:
        over = self._over
        found = over._terms.get(word)
        if found is None:
            mask, base = over.rows, over.base.terms.get(word) or {}
            found = {d: tf for d, tf in base.items() if d not in mask}
            found.update(over.delta().terms.get(word) or {})
            if not found:
                raise KeyError(word)
            over._terms[word] = found
        return found

    def __iter__(self) -> Iterator[str]:
        delta = self._over.delta().terms
        yield from delta
        yield from (w for w in self._over.base.terms if w not in delta and w in self)

    def __contains__(self, word: object) -> bool:
        try:
            self[word]  # type: ignore[index]
        except KeyError:
            return False
        return True

    def __len__(self) -> int:
        return sum(1 for _ in self)


class _Lengths(Mapping[int, int]):
    """Document lengths, one a live entity."""

    def __init__(self, over: Overlaid) -> None:
        self._over = over

    def __getitem__(self, dense: int) -> int:
        over = self._over
        return over.delta().lengths[dense] if dense in over.rows else over.base.lengths[dense]

    def __iter__(self) -> Iterator[int]:
        over = self._over
        yield from over.delta().lengths
        yield from (d for d in over.base.lengths if d not in over.rows)

    def __len__(self) -> int:
        return len(self._over)
