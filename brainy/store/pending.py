"""What the commit path hands on a generation at a time, held until the durable head takes it.

A commit is applied under the head's commit lock and made durable later, under the state lock, by whichever
thread's fsync landed (brainy/store/head.py). What it leaves for that moment (its ledger, the moves each
follower applies once it is durable) is written by the committing thread and read, taken and dropped by
another: the one moving the durable head, the maintenance thread writing a snapshot, a read building an index.
Neither lock excludes the other, so these are held here, behind a lock of their own, held for a dict operation
and never while another lock is taken: a thread moving the durable head never waits on a commit, nor a commit
on it. Iterating a bare dict instead let a commit's insert land mid-loop ("dictionary changed size during
iteration", answered as an internal error), and replacing it by a filtered copy lost a move inserted meanwhile.

The commit path puts generations in increasing order (each commit's is the one after the last), so what is
taken or dropped is the front, found by counting up from the lowest generation held rather than by a scan.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Generic, TypeVar

T = TypeVar("T")


class Pending(Generic[T]):
    """A value per generation, each put once, taken or dropped from the lowest up."""

    def __init__(self, held: Mapping[int, T] | None = None) -> None:
        self._lock = threading.Lock()
        self._held: dict[int, T] = dict(held or {})
        self._low = min(self._held, default=0)  # no generation below this is held

    def __len__(self) -> int:
        with self._lock:
            return len(self._held)

    def __contains__(self, generation: object) -> bool:
        with self._lock:
            return generation in self._held

    def put(self, generation: int, value: T) -> None:
        with self._lock:
            if not self._held or generation < self._low:
                self._low = generation
            self._held[generation] = value

    def get(self, generation: int) -> T | None:
        with self._lock:
            return self._held.get(generation)

    def take(self, upto: int) -> list[tuple[int, T]]:
        """Remove every generation at or below ``upto``; answers them with their values, in generation order."""
        with self._lock:
            return [(g, self._held.pop(g)) for g in self._front(upto)]

    def drop(self, upto: int) -> None:
        """Remove every generation at or below ``upto``."""
        with self._lock:
            for g in self._front(upto):
                del self._held[g]

    def _front(self, upto: int) -> list[int]:
        """The generations held at or below ``upto``, in order; the caller holds the lock."""
        if not self._held or upto < self._low:
            return []
        front = self._between(self._low - 1, upto)
        self._low = upto + 1
        return front

    def _between(self, low: int, high: int) -> list[int]:
        """The generations held from ``low`` + 1 to ``high``, in order; the caller holds the lock."""
        held = self._held
        if high - low <= 2 * len(held):  # generations come one after another: count up from the lowest
            return [g for g in range(low + 1, high + 1) if g in held]
        return sorted(g for g in held if low < g <= high)  # a sparse or far-reaching range: the keys are fewer

    def between(self, low: int, high: int) -> list[T] | None:
        """The values of generations ``low`` + 1 to ``high``, in order; None when one of them is not held."""
        with self._lock:
            held = self._held
            if any(g not in held for g in range(low + 1, high + 1)):
                return None
            return [held[g] for g in range(low + 1, high + 1)]

    def span(self, low: int, high: int) -> list[T]:
        """The values of the generations held from ``low`` + 1 to ``high``, in order (a follower looking at each
        commit's moves once: usually one generation, never a copy of all that is held)."""
        with self._lock:
            return [self._held[g] for g in self._between(low, high)]

    def above(self, low: int) -> list[T]:
        """The values of the generations held above ``low``, in generation order."""
        with self._lock:
            return [value for g, value in sorted(self._held.items()) if g > low]

    def reaches(self, low: int, high: int) -> bool:
        """Whether every generation from ``low`` + 1 to ``high`` is held."""
        with self._lock:
            return all(g in self._held for g in range(low + 1, high + 1))

    def copy(self) -> dict[int, T]:
        """What is held now, as a dict of its own."""
        with self._lock:
            return dict(self._held)

    def values(self) -> list[T]:
        """The values held now, in the order they were put."""
        with self._lock:
            return list(self._held.values())
