"""The engine mechanics on one open brain (DOORS 5.3): diagnostics, repair, snapshot, warm and stats.

What a brain can say about itself: its files, its projections and its lease. What the process knows
about it (its residency) is added by the door that answers (``brainy.host.mechanics``). Every file is
named relative to the store, and a message that quoted a file by its host path is scrubbed to the
store-relative name: no absolute host path is ever part of an answer.

A projection is *built* once a read needed it; the followers then hold it at the durable head
(``brainy/index/follower.py``), so only an unbuilt one can be behind, by the distance between its
newest persisted snapshot and the head.
"""

from __future__ import annotations

import time
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Protocol

from brainy import __version__
from brainy.contract import refusals as R
from brainy.doors.writes import MAX_BATCH
from brainy.index import embedder
from brainy.index.follower import ProjectionFollower, VectorFollower
from brainy.index.projections import newest_snapshot
from brainy.index.snapshot import Snapshot, Sources
from brainy.store import horizons as H
from brainy.store import log as log_
from brainy.store.backup import FileSet
from brainy.store.blobs import BlobStore
from brainy.store.counts import Ledger
from brainy.store.maintenance import Maintenance
from brainy.store.rows import DIMENSIONS


class Brain(Protocol):
    """What the mechanics read of one open brain: its files and tables, its followers, its lease, and the
    writes a repair makes. The brain handle (``brainy/engine/brain.py``) is one."""

    name: str
    path: Path
    role: str
    warnings: list[dict[str, str]]
    follower: ProjectionFollower
    vector_follower: VectorFollower
    maintenance: Maintenance

    @property
    def head(self) -> int: ...

    @property
    def durable_ledger(self) -> Ledger: ...

    @property
    def sources(self) -> Sources: ...

    @property
    def manifest(self) -> dict[str, Any]: ...

    def at(self, generation: int | None = None) -> Snapshot: ...

    def verify(self) -> Any: ...

    def writer_block(self) -> dict[str, Any] | None: ...

    def write(self, door: str, args: Any) -> Any: ...

    def hold_files(self) -> AbstractContextManager[FileSet]: ...


# warm's projection names, and the follower that holds each: metadata postings, the words index, the
# relation postings and the id map are all parts of one projection set
WARMABLE = {
    "metadata": "projections",
    "words": "projections",
    "graph": "projections",
    "idmap": "projections",
    "vectors": "vectors",
}


def scrub(brain: Brain, text: str) -> str:
    """``text`` with the store's host path taken out, so a file is named as the store names it."""
    return text.replace(str(brain.path) + "/", "").replace(str(brain.path), ".")


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def _followers(brain: Brain) -> list[ProjectionFollower]:
    return [brain.follower, brain.vector_follower]


def _projection(brain: Brain, follower: ProjectionFollower) -> dict[str, Any]:
    links = (
        [n for n in (newest_snapshot(follower.folder, x) for x in follower.suffixes) if n]
        if follower.folder.is_dir()
        else []
    )
    found = max(links) if links else None  # the newest link of its chain may be a delta
    # every link on disk: a chain's older links are removed once a newer one is durable, so these are its chain
    persisted = sum(_size(p) for x in follower.suffixes for p in follower.folder.glob("*" + x)) if links else 0
    if follower.built_from is not None:  # built: followed to the durable head
        return {"name": follower.name, "stamp": brain.head, "behind": 0, "bytes": persisted}
    stamp = 0 if found is None else found[0]
    return {"name": follower.name, "stamp": stamp, "behind": max(0, brain.head - stamp), "bytes": persisted}


def _folder_bytes(brain: Brain, folder: str, suffix: str) -> tuple[int, int]:
    where = brain.path / folder
    if not where.is_dir():
        return 0, 0
    sizes = [p.stat().st_size for p in where.iterdir() if p.name.endswith(suffix)]
    return len(sizes), sum(sizes)


# What an open handle holds beside its rows, per unit, measured (tracemalloc and VmRSS over 50 handles of 200
# entities each): the shell of one open store (tables' footers, blooms and indexes, the ledger, the MANIFEST,
# the followers), one entity in the query projections (id map, postings, order columns, words), one decoded
# table block in a table's cache.
HANDLE_BYTES = 60_000
PROJECTION_ROW_BYTES = 1_500
CACHED_BLOCK_BYTES = 2 * 4096


def memtable_bytes(brain: Brain) -> int:
    """What the brain's memtables hold (the mapped tables are the kernel's pages, counted apart)."""
    sources = brain.sources
    return sources.mem.bytes + sum(m.bytes for m in sources.frozen)


def footprint(brain: Brain) -> int:
    """What an open brain holds in this process's heap, by its own counters: its memtables, its tables'
    decoded block caches, its projections, its vector index's filled owned rows, and the handle itself. Its mapped
    files' resident pages are not here: the arbiter reads those from ``/proc/self/smaps`` when it ranks."""
    held = HANDLE_BYTES + memtable_bytes(brain)
    held += sum(table.cached_blocks for table in brain.sources.tables) * CACHED_BLOCK_BYTES
    proj = brain.follower.kept
    if proj is not None:
        held += len(proj) * PROJECTION_ROW_BYTES
    index = brain.vector_follower.kept
    if index is not None:  # its owned slots; a snapshot's slots read in place are mapped pages
        held += index.heap_bytes()
    return held


def diagnostics(brain: Brain, deep: bool) -> dict[str, Any]:
    """Files, projections and lease of one brain, and the problems found; ``deep`` checks every checksum."""
    segments = log_.segments(brain.path / "log")
    tables = brain.manifest["tables"]
    sources = brain.sources
    problems = [{"code": w["code"], "detail": scrub(brain, w["message"])} for w in brain.warnings]
    if deep:
        try:
            brain.verify()
        except R.Refusal as refusal:
            problems.append({"code": refusal.name, "detail": scrub(brain, refusal.message)})
    _, pack_bytes = _folder_bytes(brain, "blobs", ".pack")
    contents = chunks = 0
    if (brain.path / "blobs").is_dir():
        store = BlobStore(brain.path / "blobs", writable=False)
        try:
            contents, chunks = store.records()
        finally:
            store.close()
    return {
        "brain": brain.name,
        "version": __version__,
        "generation": brain.head,
        "log": {
            "segments": len(segments),
            "bytes": sum(_size(p) for _, p in segments),
            "head": brain.head,
            "oldestRetained": H.log_from(brain.manifest),
        },
        "horizons": _horizons(brain),
        "sstables": {"count": len(tables), "bytes": sum(int(t["size"]) for t in tables), "levels": 1 if tables else 0},
        "memtable": {"rows": len(sources.mem) + sum(len(m) for m in sources.frozen), "bytes": memtable_bytes(brain)},
        "projections": [_projection(brain, f) for f in _followers(brain)],
        "blobs": {"count": contents, "bytes": pack_bytes, "chunks": chunks},
        "lease": brain.writer_block(),
        "problems": problems,
    }


def snapshot(brain: Brain) -> dict[str, Any]:
    """The exact file set of the durable generation (``brainy.store.backup``), with sizes and checksums."""
    with brain.hold_files() as files:
        return {
            "brain": brain.name,
            "generation": files.generation,
            "createdAt": files.created_at,
            "files": files.listing(),
        }


def warm(brain: Brain, names: list[str] | None) -> dict[str, Any]:
    """Build the named projections now (default: all), so the first read pays nothing; what each cost."""
    asked = list(dict.fromkeys(names if names is not None else WARMABLE))
    unknown = [name for name in asked if name not in WARMABLE]
    if unknown:
        raise R.InvalidArgumentError(
            f"projections: {unknown} are none of {list(WARMABLE)}", field="projections", reason="out-of-range"
        )
    followers = {f.name: f for f in _followers(brain)}
    warmed = []
    for name in asked:
        follower = followers[WARMABLE[name]]
        started = time.perf_counter()
        with follower.held() as held:
            rows = len(held)
        ms = round((time.perf_counter() - started) * 1000, 3)
        size = rows * DIMENSIONS * 4 if follower is brain.vector_follower else _projection(brain, follower)["bytes"]
        warmed.append({"projection": name, "bytes": size, "ms": ms})
    return {"brain": brain.name, "warmed": warmed}


def repair(brain: Brain, names: list[str] | None, embed_missing: bool, dry_run: bool) -> dict[str, Any]:
    """With ``embed_missing``, embed every entity with text and no vector, in batches of one commit each; then
    rebuild the projections that are behind (or those named), persisting each. A writer's door."""
    followers = {f.name: f for f in _followers(brain)}
    unknown = sorted(set(names or ()) - set(followers))
    if unknown:
        raise R.InvalidArgumentError(
            f"projections: {unknown} are none of {sorted(followers)}", field="projections", reason="out-of-range"
        )
    embedded = 0
    if embed_missing:  # first: the projections below then follow its commits to the head
        snap = brain.at()
        missing = [
            {"id": row["id"], "data": row["data"]}
            for row in snap.entities()
            if not row.get("hasVector") and embedder.text_of(row.get("data")) is not None
        ]
        if missing and not dry_run:
            embedder.embed_many([embedder.text_of(missing[0]["data"]) or ""])  # EmbeddingModelMissingError first
            for start in range(0, len(missing), MAX_BATCH):
                brain.write("updateMany", {"items": missing[start : start + MAX_BATCH]})
        embedded = len(missing)
    repaired = []
    for name, follower in followers.items():
        state = _projection(brain, follower)
        if (names is None and state["behind"] == 0) or (names is not None and name not in names):
            continue
        if not dry_run:
            with follower.held():  # holding a projection brings it to the head (built or caught up)
                pass
            follower.persist()
        repaired.append({"projection": name, "fromStamp": state["stamp"], "toStamp": brain.head})
    return {
        "brain": brain.name,
        "repaired": repaired,
        "embedded": embedded,
        "quarantined": [],
        "generation": brain.head,
    }


def stats(brain: Brain) -> dict[str, Any]:
    """Sizes by part, row counts and the embedder's state (the door adds the residency)."""
    ledger = brain.durable_ledger.to_doc()
    tables = brain.manifest["tables"]
    _, pack_bytes = _folder_bytes(brain, "blobs", ".pack")
    _, index_bytes = _folder_bytes(brain, "index", "")
    return {
        "brain": brain.name,
        "generation": brain.head,
        "rows": {
            "entities": ledger["entitiesAllTiers"],
            "relations": ledger["relationshipsAllTiers"],
            "files": ledger["byTypeAllTiers"].get("file", 0),
        },
        "bytes": {
            "log": sum(_size(p) for _, p in log_.segments(brain.path / "log")),
            "sstables": sum(int(t["size"]) for t in tables),
            "projections": index_bytes,
            "blobs": pack_bytes,
        },
        "embedder": {"loaded": embedder.loaded(), "model": embedder.MODEL, "dimensions": DIMENSIONS},
        "horizons": _horizons(brain),
    }


def _horizons(brain: Brain) -> dict[str, Any]:
    """Each horizon, where it stands and what its maintenance let go since the open (docs/store-format.md)."""
    writer = brain.role == "writer"
    upkeep = brain.maintenance
    return {
        **H.report(brain.manifest, upkeep.horizons if writer else None),
        "droppedVersions": upkeep.dropped,
        "trimmedSegments": upkeep.trimmed,
    }
