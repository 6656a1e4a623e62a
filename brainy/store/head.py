"""A handle's head: the MANIFEST it stands on, the commits applied above it, and how far of them is durable.

The commit path (``commit_path.py``) moves it a commit at a time, applying each commit's keys to the memtable and
its moves to the counts ledger, then the durable generation once the commit's fsync lands; the writer's
maintenance (``maintenance.py``) swaps its memtable and sources at a flush or compaction and its MANIFEST at the
swap. Reads take the durable generation and the sources from it, and never wait on a commit.

Two locks guard it. ``commit_lock`` serialises the commits, and the maintenance's swaps of the memtable and the
sources against them. ``state_lock`` is the durable head's: the durable generation and ledger move under it,
together with what the followers keep at that generation (they are handed the same lock). Where both are held,
the commit lock is taken first. What a commit leaves for the moment it becomes durable (its ledger here, each
follower's moves) is put under the commit lock and taken under the state lock, so it is held in a
:class:`~brainy.store.pending.Pending`, which has a lock of its own.
"""

from __future__ import annotations

import threading
from typing import Any

from brainy.store.counts import Ledger
from brainy.store.memtable import Memtable
from brainy.store.pending import Pending
from brainy.store.sources import Sources
from brainy.store.sstable import Table


class HeadState:
    """The state one handle's commit path and maintenance share, and its two locks.

    Empty until :meth:`stand_at` puts it on a MANIFEST (the open does, before it replays the log's tail)."""

    def __init__(self) -> None:
        self.commit_lock = threading.RLock()
        self.state_lock = threading.RLock()  # re-entrant: a read holds the postings and the vectors at once
        self.manifest: dict[str, Any] = {}  # the MANIFEST this handle read or last wrote
        self.history_from = 0  # its historyFrom: the oldest generation a read may stand at
        self.flushed = 0  # the generation the tables cover: the MANIFEST's
        self.next_table = 0  # the number the next table file takes
        self.mem = Memtable()  # the live memtable: every version applied since the last flush took it
        self.sources = Sources(self.mem, (), ())
        self.applied = 0  # the last generation applied to the memtable (durable or not)
        self.ledger = Ledger()  # the counts at ``applied``
        self.next_dense = 0  # the dense int the next new entity takes
        self.last_ts = 0  # the last commit's timestamp: a commit's is never below it
        self.last_seq = 0  # the log sequence of the last commit appended (0: none since the open)
        self.durable = 0  # the durable generation: what reads see
        self.durable_ledger = Ledger()  # the counts at ``durable``
        # the last generation acknowledged to its writer: a served write is answered once durable, before the
        # followers move up to it (commit_path.py, ``durable_at``); a read at the head waits until ``followed``, the
        # generation the followers last finished moving to, reaches it (:meth:`until_visible`): read-your-writes
        self.acknowledged = 0
        self.followed = 0
        self._followed = threading.Condition(threading.Lock())  # notified each time ``followed`` moves
        # the ledger as each applied, not yet durable generation left it: the durable one once that generation is
        # (put by a commit, taken by whoever makes it durable: pending.py says why it has a lock of its own)
        self.ledgers: Pending[Ledger] = Pending()

    def stand_at(self, manifest: dict[str, Any], ledger: Ledger, tables: tuple[Table, ...]) -> None:
        """Stand on ``manifest``: its flushed generation with ``ledger`` (its counts) and ``tables`` (its tables,
        open), an empty memtable above them."""
        flushed = int(manifest["generation"])
        self.manifest = manifest
        self.history_from = int(manifest.get("historyFrom", 0))  # docs/store-format.md, "Horizons"
        self.next_table = int(manifest["nextTable"])
        self.flushed = self.applied = flushed
        self.last_ts = int(manifest.get("timestamp", 0))
        self.next_dense = int(manifest["nextDenseInt"])
        self.mem = Memtable()
        self.sources = Sources(self.mem, (), tables)
        self.ledger = ledger

    def adopt(self, other: HeadState) -> None:
        """Take over what ``other``, a head standing on the same MANIFEST, applied above it: its memtable (the
        other never writes again) and a copy of its ledger, its generation, dense int and timestamp."""
        self.mem, self.ledger = other.mem, other.ledger.copy()
        self.next_dense, self.applied, self.last_ts = other.next_dense, other.applied, other.last_ts
        self.sources = Sources(self.mem, (), self.sources.tables)

    def settle(self) -> None:
        """Everything applied is durable (the open's replay of frames the log holds): the durable head is the
        applied one."""
        self.durable = self.applied
        self.durable_ledger = self.ledger.copy()

    def until_visible(self, seconds: float) -> bool:
        """Wait, at most ``seconds``, until every acknowledged commit is what reads see (the followers moved up to
        it); answers whether it is. At once, without a lock, when nothing acknowledged waits for its followers."""
        if self.followed >= self.acknowledged:
            return True
        with self._followed:
            return self._followed.wait_for(lambda: self.followed >= self.acknowledged, seconds)

    def acknowledge(self, generation: int) -> None:
        """The commit at ``generation`` is about to be answered before its followers move: reads wait for them."""
        with self._followed:
            self.acknowledged = max(self.acknowledged, generation)

    def followed_to(self, generation: int) -> None:
        """The followers have moved up to ``generation`` (or given up on it, failing): the reads waiting look again."""
        with self._followed:
            self.followed = max(self.followed, generation)
            self._followed.notify_all()

    def flushed_to(self, manifest: dict[str, Any]) -> None:
        """A flush or compaction swapped the MANIFEST: the tables now cover its generation."""
        self.manifest = manifest
        self.flushed = int(manifest["generation"])
        self.history_from = int(manifest.get("historyFrom", 0))
