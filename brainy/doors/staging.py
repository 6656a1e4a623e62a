"""A write staged as the commit path stages it: one sequence of steps, run for real by the commit path
(brainy/engine/commits.py) and rehearsed, never committed, by ``policy.check`` (DOORS 9.3).

A write is staged in four steps. Before the commit lock: its arguments completed by its door's
``prepares`` (:func:`prepare`), a file's content stored (``vfs.stage``), the texts it stores embedded in
one batch (:func:`embeddings`). Under the lock: its door's rule run on the commit's transaction
(:func:`run`). The guardrails then judge what the rule staged (``policy.judge``).

``policy.check`` asks the same judge of the same staging: :func:`rehearse` runs the four steps over a
read snapshot, with a brain face (:class:`Rehearsal`) whose blobs measure what a commit would store
without writing it, and answers the transaction nothing ever appends. Were the steps two copies, a
check would judge rows no commit produces (a caller missing from the rows, a file's content not staged,
a near-duplicate memory not found): so there is one copy, here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from brainy.contract import arguments
from brainy.contract import doors as D
from brainy.contract import refusals as R
from brainy.doors import registry, vfs
from brainy.doors.writes import Context, texts
from brainy.index import embedder
from brainy.index.snapshot import Snapshot
from brainy.store.blobs import Measuring
from brainy.store.clock import now_ms
from brainy.store.txn import Txn


def rule_of(door: str) -> Any:
    """The rule of write door ``door``: ``fn(txn, args, ctx) -> answer``; for a read whose answer asks for a
    stamp (``registry.Stamp``, the inbox's presence), the stamp's rule."""
    entry = registry.REGISTERED.get(door)
    if entry is not None and entry.runs == registry.READ and entry.stamp is not None:
        return entry.stamp.rule
    if entry is None or entry.runs != registry.WRITE:
        raise R.UnknownDoorError(f"{door!r} is not a write door", door=door)
    return entry.fn


def prepare(brain: Any, door: str, args: Any) -> tuple[Any, dict[str, Any] | None]:
    """A write's arguments completed by its door's ``prepares`` (registry.py), before the commit lock."""
    entry = registry.REGISTERED.get(door)
    if entry is None or entry.prepares is None:
        return args, None
    return entry.prepares(brain, arguments.check(D.BY_NAME[door], args))


def embeddings(door: str, args: Any, staged: vfs.PreparedFile | None = None) -> dict[str, bytes]:
    """The embeddings of the texts a write will store, made in one batch, as the rule's ``vectors``;
    none without a model (the rows are stored without vectors and the answers say "no-model")."""
    wanted = texts(door, args) + vfs.staged_texts(door, args, staged)
    if not wanted:
        return {}
    try:
        vectors, _ = embedder.embed_many(wanted)
    except R.EmbeddingModelMissingError:
        return {}
    return {text: vector.tobytes() for text, vector in zip(wanted, vectors)}


def run(
    txn: Txn,
    door: str,
    args: dict[str, Any],
    brain: Any,
    vectors: dict[str, bytes] | None,
    prepared: dict[str, Any] | None,
    staged: Any,
    since: Callable[[int], list[dict[str, Any]]] | None = None,
) -> dict[str, Any]:
    """Door ``door``'s rule on ``txn`` with checked ``args`` and what was made before the lock; ``brain`` is
    what the rule may read of its brain (``name``, ``at`` for its durable head, ``blobs``); ``since``, the rows
    of the commits applied above a generation (the commit path's; a check has none beyond its snapshot)."""
    ctx = Context(brain.name, vectors or {}, brain.at, prepared or {}, staged, brain.blobs, since)
    return rule_of(door)(txn, args, ctx)


class Rehearsal:
    """The brain a rehearsed write is staged against: the snapshot the check reads, standing for the durable
    head, and its blobs measuring what a commit would store (``BlobStore.measuring``), writing nothing."""

    def __init__(self, snap: Snapshot) -> None:
        self.view = snap.in_process()  # a rule that searches (remember's dedupe) reads rows, not wire bytes
        self.name = snap.brain
        self.blobs: Measuring = snap.blobs.measuring()

    def at(self, generation: int | None = None) -> Snapshot:
        return self.view if generation is None else self.view.at(generation)


def rehearse(snap: Snapshot, door: str, args: Any, caller: str | None, via: str | None) -> Txn:
    """Write door ``door`` with ``args``, for ``caller`` through ``via``, staged over ``snap`` by the commit
    path's own steps, in its order; answers the transaction, which nothing appends. Raises what the write
    itself would refuse before the guardrails are asked."""
    brain = Rehearsal(snap)
    args, prepared = prepare(brain, door, args)
    staged = vfs.stage(brain, door, args)
    vectors = embeddings(door, args, staged)
    # the generation and time the write would commit at; dense ints are numbered from 0, which no row's
    # judged fields hold (a where cannot address a dense int)
    txn = Txn(brain.view.lookup, brain.view.scan, 0, snap.generation + 1, now_ms(), caller, via)
    run(txn, door, arguments.check(D.BY_NAME[door], args), brain, vectors, prepared, staged)
    return txn
