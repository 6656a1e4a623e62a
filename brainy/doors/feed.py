"""The held change feed's reader: a store's fact log read forward, a drain at a time, as change frames.

Seed 001, "The change feed": the stream's correctness is a property of the LOG,
not of a listener, so every frame a held stream sends is read here from the log
files, from where the last drain stopped (a :class:`~brainy.store.log.Position`),
whichever handle of the brain this process holds at the moment of the drain:

* the writer's handle: frames up to its durable head (a frame appended and not
  yet fsynced waits for the next drain), each built on the snapshot at its own
  generation, exactly as the ``changes`` door builds them;
* a read-only attach (another process writes): every whole frame the writer has
  appended. An incomplete frame at the end is a frame that has not landed yet,
  read by a later drain, never damage. The attach is frozen at the generation it
  resolved, so the endpoint tags a relation frame carries at commit time are
  kept here for the entities written past that generation (:class:`_Tags`).

Damage is refused by name as the log reader refuses it (``FactLogRefusedError``),
and a store without a log is ``NoFactLogError``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from brainy.contract import refusals as R
from brainy.doors.timetravel import change_frame
from brainy.index.snapshot import Snapshot
from brainy.store import horizons as H
from brainy.store import log as log_
from brainy.store import rows

Commit = list[dict[str, Any]]  # one commit's change frames, in op order


class Brain(Protocol):
    """What a feed reads of the brain it follows: its name, its role (a writer's log is its own to read to
    the end) and its durable head, and snapshots of its rows."""

    name: str
    role: str

    @property
    def head(self) -> int: ...

    @property
    def manifest(self) -> dict[str, Any]: ...

    def at(self, generation: int | None = None) -> Snapshot: ...


class _Tags:
    """The view a relation frame reads its endpoints' tags from, past a frozen attach's generation: the
    tags of every entity written since (None: deleted), else the attach's own head snapshot."""

    def __init__(self, brain: Brain, written: dict[str, list[Any] | None]) -> None:
        self._brain = brain
        self._written = written

    def entity(self, id_: str) -> dict[str, Any] | None:
        if id_ in self._written:
            tags = self._written[id_]
            return None if tags is None else {"metadata": {"tags": tags}}
        return self._brain.at().entity(id_)


class LogTail:
    """The commits after ``cursor``, read from ``store``'s log a drain at a time (:meth:`drain`)."""

    def __init__(self, store: Path, cursor: int) -> None:
        self.dir = Path(store) / "log"
        self.cursor = cursor  # the last generation handed out
        self._read_to: int | None = None  # the last generation read from the log
        self._position: log_.Position | None = None
        self._pending: list[log_.Frame] = []  # read, not yet handed out (past the writer's durable head)
        self._written: dict[str, list[Any] | None] = {}  # entity tags past the handle's head (an attach)
        self._written_to = 0  # the generation _written covers

    def landed(self, brain: Brain) -> int:
        """Read what the log gained since the last read; answer the head this tail can serve for ``brain``'s
        handle: its durable head for the writer, the last whole frame for an attach."""
        if not self.dir.is_dir():
            raise R.NoFactLogError(f"brain {brain.name!r} has no fact log to read changes from")
        if self._read_to is None:  # an attach rebuilds the tags written past its head: read from there
            self._read_to = self.cursor if brain.role == "writer" else min(self.cursor, brain.head)
        found = log_.Scan()
        for frame in H.frames(self.dir.parent, self._read_to, brain.manifest, tail=found, resume=self._position):
            self._pending.append(frame)
        self._position = found.position or self._position
        self._read_to = max(self._read_to, found.last_generation)
        return brain.head if brain.role == "writer" else max(brain.head, self._read_to)

    def drain(self, brain: Brain, limit: int | None = None) -> tuple[list[Commit], bool]:
        """The commits landed after the cursor, whole, in order: ``(commits, more)``. ``limit`` is the frame
        count past which no new commit is started (a larger commit still comes whole); ``more`` says
        commits were left for the next drain."""
        head = self.landed(brain)
        if self._written and brain.head >= self._written_to:
            self._written.clear()  # the handle now sees every generation those tags were kept for
        out: list[Commit] = []
        count, taken = 0, 0
        for frame in self._pending:
            generation = frame.generation
            if generation > head or (limit is not None and out and count >= limit):
                break
            taken += 1
            if brain.head < generation:
                self._keep_tags(frame)
            if generation <= self.cursor:
                continue  # read only to keep the tags an attach cannot see
            view: Any = brain.at(generation) if generation <= brain.head else _Tags(brain, self._written)
            commit = [change_frame(view, generation, i, op) for i, op in enumerate(frame.ops)]
            out.append(commit)
            count += len(commit)
            self.cursor = generation
        del self._pending[:taken]
        return out, bool(self._pending and self._pending[0].generation <= head)

    def _keep_tags(self, frame: log_.Frame) -> None:
        for op in frame.ops:
            if op["k"] != "e":
                continue
            if op["o"] == "del":
                self._written[op["id"]] = None
            else:
                row = rows.unpack(op["row"])
                tags = row.get("metadata", {}).get("tags", [])
                self._written[row["id"]] = list(tags) if isinstance(tags, list) else []
        self._written_to = frame.generation


#: The arguments of the changes door a held feed takes: where to start and the page (the rest are a page's).
HELD_ARGUMENTS = frozenset({"since", "limit"})


def _since(value: Any, head: int, param: str) -> int:
    if value == "head":
        return head
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise R.BadQueryParameterError(f"{param}: a generation, or head", param=param, head=head)
    if value > head:
        raise R.BadQueryParameterError(f"{param}: {value} is past the head {head}", param=param, head=head)
    return value


#: An event id as the stream writes it: two runs of ASCII digits. Not ``str.isdigit``, which takes ``²`` and
#: ``١`` (a Latin-1 header can carry the first), nor runs ``int`` refuses to read (past 4,300 digits): a
#: generation or an index is at most 2^64, 20 digits.
_EVENT_ID = re.compile(r"([0-9]{1,20})\.([0-9]{1,20})")


def resume_cursor(last_event_id: str | None, since: Any, head: int, ops_of: Callable[[int], int | None]) -> int:
    """The generation the stream starts after, always a commit boundary.

    ``Last-Event-ID: g.i`` wins over ``since`` (the stream itself delivered that frame): it resumes after
    commit ``g`` when ``i`` was its last op (``ops_of(g)`` counts them), else at ``g - 1``, so a commit
    cut mid-way comes again whole (at-least-once, dedup on the pair). ``since`` past ``head`` refuses."""
    if last_event_id is not None and last_event_id.strip():
        found = _EVENT_ID.fullmatch(last_event_id.strip())
        if found is None:
            raise R.BadQueryParameterError(
                "Last-Event-ID: <generation>.<index>, as the stream sent it", param="Last-Event-ID", head=head
            )
        g, i = int(found[1]), int(found[2])
        _since(g, head, "Last-Event-ID")
        return g if g == 0 or ops_of(g) == i + 1 else g - 1
    return _since(since, head, "since")


def check_limit(limit: Any) -> int | None:
    """The page's frame count, None for a held stream with no limit; refuses what is not a positive integer."""
    if limit is None:
        return None
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise R.BadQueryParameterError("limit: a positive whole number", param="limit")
    return limit
