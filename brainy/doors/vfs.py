"""The virtual file system (DOORS.md 8): files and directories as rows, their bytes as verified blobs.

The layout is docs/store-format.md, "Files": a file is an entity ``file``/``vfs.file``, a directory a
``collection``/``vfs.directory``, each parent ``contains`` its children (subtype ``vfs``), and the
path posting (the ``p`` keys, kept by :class:`~brainy.store.txn.Txn` from the rows) answers every
lookup by path: one key read, or one key range for a subtree, never a walk of the relations.

A file's bytes are chunked and made durable in the blob packs (``brainy/store/blobs.py``) BEFORE
its commit: :func:`stage` runs on the commit path outside the commit lock (as the embedding does),
and the rule only puts the row naming the address. A crash between the two leaves unreferenced
chunks, never a row pointing at missing bytes. A profile that writes a file inside its own commit
does the same in two steps: :func:`prepare_file` before its commit, :func:`put_file` in its rule.

Reads run on a snapshot: its generation's path posting and rows, the blob packs for bytes, every
byte verified against its address before it is answered.
"""

from __future__ import annotations

import binascii
import codecs
import mimetypes
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pybase64

from brainy._speedups import textjoin
from brainy._speedups.errors import TextStops
from brainy.contract import arguments
from brainy.contract import doors as D
from brainy.contract import refusals as R
from brainy.doors import paths as P
from brainy.doors.cursors import decode_cursor, encode_cursor
from brainy.doors.registry import WRITE, door
from brainy.doors.timetravel import resolve_generation
from brainy.doors.writes import Context, _put_relation, _stamp
from brainy.index.snapshot import Snapshot
from brainy.store import keys as K
from brainy.store import rows
from brainy.store.blobs import BlobStore, Stored, Writing
from brainy.store.txn import Txn

FILE, DIRECTORY = "vfs.file", "vfs.directory"
RELATION_SUBTYPE = "vfs"
ROOT_ID = str(uuid.uuid5(K.NATURAL_KEY_NAMESPACE, "vfs:/"))
DATA_BYTES = 8 << 10  # a text file's data (embedded, word-indexed): its first 8 KiB
INLINE_MAX = 1 << 20  # readdir's inline cap, at most
MAX_HISTORY_PAGE = 1000
MAX_XATTR_NAME = 255
#: Metadata fields the layer owns; writeFile's extra ``metadata`` may not reuse them.
NODE_FIELDS = frozenset(("path", "name", "parent", "contentType", "size", "hash", "xattrs", "op"))
#: Media types outside text/* that are text.
TEXT_MEDIA = frozenset(
    (
        "application/json",
        "application/xml",
        "application/yaml",
        "application/toml",
        "application/javascript",
        "application/x-sh",
        "application/sql",
        "image/svg+xml",
    )
)
_EXTENSIONS = {
    ".md": "text/markdown",
    ".markdown": "text/markdown",
    ".yaml": "application/yaml",
    ".yml": "application/yaml",
    ".toml": "application/toml",
    ".json": "application/json",
    ".jsonl": "application/jsonl",
    ".py": "text/x-python",
    ".txt": "text/plain",
    ".csv": "text/csv",
    ".ts": "text/plain",
    ".rs": "text/plain",
    ".log": "text/plain",
}
OCTETS = "application/octet-stream"
#: Doors whose commit writes file content: door -> its step before the lock, ``fn(brain, checked args)``
#: answering the :class:`PreparedFile` its rule reads as ``ctx.staged`` (:func:`stager`).
STAGERS: dict[str, Callable[[Any, dict[str, Any]], PreparedFile]] = {}
#: What follows a node that moved (rename, move): ``fn(txn, ctx, row)`` with the node's row at its new path,
#: called in the same commit (:func:`on_move`): how a profile keeps a path it stored beside the node in step.
MOVE_FOLLOWERS: list[Callable[[Txn, Context, dict[str, Any]], None]] = []


# -- content ------------------------------------------------------------------------------------


def decode_content(content: Any, encoding: str, field: str = "content") -> bytes:
    """The bytes a ``content`` argument carries in ``encoding``."""
    if not isinstance(content, str):
        raise R.InvalidArgumentError(f"{field}: must be a string", field=field, reason="wrong-type")
    if encoding == "base64":
        # strict: every character in the alphabet, padding only at the end (pybase64: SIMD, a 100 MiB file in
        # a fifth of binascii's time)
        try:
            return pybase64.b64decode(content, validate=True)
        except (binascii.Error, ValueError):
            raise R.InvalidArgumentError(f"{field}: not valid base64", field=field, reason="bad-base64") from None
    try:
        return content.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: not text
        raise R.InvalidArgumentError(
            f"{field}: not valid UTF-8 text (send it as base64)", field=field, reason="not-utf-8"
        ) from None


def is_text_type(content_type: str | None) -> bool:
    if not content_type:
        return False
    base = content_type.split(";", 1)[0].strip()
    return (
        base.startswith("text/")
        or base in TEXT_MEDIA
        or base.endswith(("+json", "+xml"))
        or base == "application/jsonl"
    )


def _utf8(data: bytes) -> bool:
    """Whether ``data`` is UTF-8. The head is tried first: binary content fails there, before a refused
    decode of the whole (whose error would copy every byte into the exception)."""
    try:
        codecs.getincrementaldecoder("utf-8")().decode(data[:DATA_BYTES], final=False)
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def sniff(path: str, data: bytes, claimed: str | None, utf8: bool | None = None) -> str:
    """The media type stored on the row: the caller's claim, unless it calls bytes text that are not UTF-8;
    else by the extension; else text/plain for UTF-8 bytes without NUL, else octets. ``utf8`` is already
    known for content that arrived as text (the bytes were encoded from a string), so it is not decoded again."""
    if utf8 is None:
        utf8 = _utf8(data)
    if claimed is not None:
        kind = claimed.strip().lower()
        if not kind or "/" not in kind:
            raise R.InvalidArgumentError(
                "contentType: a media type is type/subtype", field="contentType", reason="bad-media-type"
            )
        return OCTETS if is_text_type(kind) and not utf8 else kind
    dot = P.name(path).rfind(".")
    ext = P.name(path)[dot:].lower() if dot > 0 else ""
    guessed = _EXTENSIONS.get(ext) or (mimetypes.guess_type("x" + ext)[0] if ext else None)
    if guessed:
        return OCTETS if is_text_type(guessed) and not utf8 else guessed
    if b"\0" not in data[:DATA_BYTES] and utf8:
        return "text/plain"
    return OCTETS


def text_prefix(data: bytes, content_type: str) -> str | None:
    """A text file's row data: its first 8 KiB, cut at a character boundary; None for a binary file."""
    if not is_text_type(content_type):
        return None
    head = data[:DATA_BYTES]
    for cut in range(4):  # a multi-byte character may straddle the cut
        try:
            text = head[: len(head) - cut].decode("utf-8")
        except UnicodeDecodeError:
            continue
        return text if text.strip() else None
    return None


@dataclass(frozen=True)
class PreparedFile:
    """A file's content made durable in the blob packs, ready for a commit to reference.

    ``text`` is the row's data (and the text embedded); ``base`` is the address an append extended
    (the rule checks the file still holds it); ``appended`` the bytes an append added."""

    path: str
    stored: Stored
    content_type: str
    text: str | None
    base: str | None = None
    appended: bytes | None = None


def prepare_file(
    brain: Any, path: str, data: bytes, content_type: str | None = None, utf8: bool | None = None
) -> PreparedFile:
    """Store ``data`` for a write of ``path`` (chunks fsynced on return). Run it outside the commit lock,
    before the commit whose rule calls :func:`put_file` with the answer. ``utf8``: whether the bytes are
    known to be UTF-8 (None: they are checked)."""
    path = P.check(path)
    kind = sniff(path, data, content_type, utf8)
    return PreparedFile(path, brain.blobs.put(data), kind, text_prefix(data, kind))


def _prepare_append(brain: Any, path: str, data: bytes) -> PreparedFile:
    row = _node(brain.at(), path)
    if row is None:
        return prepare_file(brain, path, data)
    if row["subtype"] != FILE:
        raise R.IsADirectoryError(f"{path} is a directory", path=path)
    meta = row["metadata"]
    blobs: BlobStore = brain.blobs
    stored = blobs.append(meta["hash"], data, path)
    text = row.get("data")
    if meta["size"] < DATA_BYTES and is_text_type(meta.get("contentType")):
        text = text_prefix(blobs.read_all(meta["hash"], path) + data[:DATA_BYTES], meta["contentType"])
    return PreparedFile(path, stored, meta.get("contentType") or OCTETS, text, meta["hash"], data)


def stager(
    door_name: str,
) -> Callable[[Callable[[Any, dict[str, Any]], PreparedFile]], Callable[[Any, dict[str, Any]], PreparedFile]]:
    """Register ``fn(brain, args) -> PreparedFile`` as the step before the lock of a door that writes a file
    in its commit (its rule then calls :func:`put_file` with ``ctx.staged``)."""

    def register(fn: Callable[[Any, dict[str, Any]], PreparedFile]) -> Callable[[Any, dict[str, Any]], PreparedFile]:
        STAGERS[door_name] = fn
        return fn

    return register


def on_move(fn: Callable[[Txn, Context, dict[str, Any]], None]) -> Callable[[Txn, Context, dict[str, Any]], None]:
    """Register ``fn(txn, ctx, row)`` to run for every node a rename or move relocates, in its commit."""
    MOVE_FOLLOWERS.append(fn)
    return fn


def stage(brain: Any, door_name: str, args: Any, writing: Writing | None = None) -> PreparedFile | None:
    """The commit path's step before the lock: a file's content stored and durable (None for a door that
    writes no file). Refuses what the content refuses before anything is written. ``writing`` is the write's
    span (``BlobStore.writing``), told what the content added."""
    step = STAGERS.get(door_name)
    prepared = None if step is None else step(brain, arguments.check(D.BY_NAME[door_name], args))
    if writing is not None and prepared is not None:
        writing.stored(prepared.stored)
    return prepared


@stager("writeFile")
def prepare_written(brain: Any, a: dict[str, Any]) -> PreparedFile:
    """The content of a write document (``path``, ``content``, ``encoding``, ``contentType``, as writeFile and
    memory.write take them) stored and durable."""
    return prepare_file(
        brain,
        P.check(a["path"]),
        decode_content(a["content"], a["encoding"]),
        a.get("contentType"),
        utf8=True if a["encoding"] == "utf-8" else None,
    )


@stager("appendFile")
def _stage_append(brain: Any, a: dict[str, Any]) -> PreparedFile:
    return _prepare_append(brain, P.check(a["path"]), decode_content(a["content"], a["encoding"]))


def staged_texts(door_name: str, args: Any, prepared: PreparedFile | None) -> list[str]:
    """The text a staged write embeds (none with ``embed: false``)."""
    if prepared is None or prepared.text is None:
        return []
    if isinstance(args, dict) and args.get("embed") is False:
        return []
    return [prepared.text]


# -- nodes, read through the path posting -------------------------------------------------------

View = "Txn | Snapshot"


def _get(view: Any, key: bytes) -> bytes | None:
    return view.get(key) if isinstance(view, Txn) else view.lookup(key)


def _node(view: Any, path: str) -> dict[str, Any] | None:
    """The row at ``path`` (one key read of the path posting), or None."""
    raw = _get(view, K.path_key(path))
    return view.entity(rows.unpack(raw)) if raw else None


def _under(view: Any, path: str) -> Iterator[tuple[str, str]]:
    """(path, id) of every node strictly under ``path``, in path order: one range of the path posting."""
    start = K.path_key(P.subtree_prefix(path))
    stop = K.prefix_end(start)
    if isinstance(view, Txn):
        found = ((key, view.get(key)) for key in view.scan(start, stop))
    else:
        found = view.scan(start, stop)
    for key, raw in found:
        if raw and key != K.path_key(P.ROOT):  # the root's own key is inside its range
            yield K.path_of_key(key), rows.unpack(raw)


def addresses(snap: Snapshot) -> set[str]:
    """Every blob address a file row names in any version at or below the snapshot's generation: what a read
    now or at any retained generation can ask for, so what no sweep may collect. The rows are found through
    every version of the path posting (each node that ever stood at a path), never a scan of all rows."""
    ids = {rows.unpack(raw) for _, _, raw in snap.every_version(K.PATH, K.prefix_end(K.PATH)) if raw}
    found: set[str] = set()
    for id_ in ids:
        for _, raw in snap.versions(K.entity_key(id_)):
            row = rows.unpack(raw) if raw else None
            if row is not None and row.get("subtype") == FILE and row["metadata"].get("hash"):
                found.add(row["metadata"]["hash"])
    return found


def node(view: Any, path: str, field: str = "path") -> dict[str, Any] | None:
    """The stored row at ``path`` (a Txn or a Snapshot), or None: how a profile names a file by its path."""
    return _node(view, P.check(path, field))


def _is_dir(row: dict[str, Any] | None) -> bool:
    return row is not None and row.get("subtype") == DIRECTORY


def _node_or_root(view: Any, path: str) -> dict[str, Any] | None:
    """``_node``, with the root standing as an empty directory before anything made its row."""
    row = _node(view, path)
    if row is None and path == P.ROOT:
        return _root_row(view)
    return row


def _root_row(view: Any) -> dict[str, Any]:
    created = view.created_at if isinstance(view, Snapshot) else 0
    return {
        "id": ROOT_ID,
        "type": "collection",
        "subtype": DIRECTORY,
        "createdAt": created,
        "updatedAt": created,
        "generation": 0,
        "metadata": {"path": P.ROOT, "name": P.ROOT, "parent": None, "size": 0, "xattrs": {}},
    }


def file_node(row: dict[str, Any]) -> dict[str, Any]:
    """A row as DOORS.md 8's FileNode."""
    meta = row["metadata"]
    node: dict[str, Any] = {"path": meta["path"], "name": meta["name"], "type": "directory" if _is_dir(row) else "file"}
    if meta.get("contentType"):
        node["contentType"] = meta["contentType"]
    node["size"] = meta.get("size", 0)
    if meta.get("hash"):
        node["hash"] = meta["hash"]
    node.update(
        createdAt=row["createdAt"], modifiedAt=row["updatedAt"], entityId=row["id"], generation=row["generation"]
    )
    if meta.get("xattrs"):
        node["xattrs"] = meta["xattrs"]
    return node


# -- building rows ------------------------------------------------------------------------------


def _extra(metadata: Any) -> dict[str, Any]:
    extra = rows.metadata(metadata)
    for key in extra:
        if key in NODE_FIELDS:
            raise R.InvalidArgumentError(
                f"metadata.{key}: {key!r} is a field the file system keeps",
                field=f"metadata.{key}",
                reason="reserved-field",
            )
    return extra


def _put_node(txn: Txn, ctx: Context, row: dict[str, Any], before: dict[str, Any] | None) -> None:
    _stamp(txn, row, before)
    txn.put_entity(row)


def _node_row(id_: str, directory: bool, path: str, meta: dict[str, Any], op: str) -> dict[str, Any]:
    metadata = {**meta, "path": path, "name": P.name(path), "parent": P.parent(path), "op": op}
    metadata.setdefault("xattrs", {})
    metadata.setdefault("size", 0)
    return {
        "id": id_,
        "type": "collection" if directory else "file",
        "subtype": DIRECTORY if directory else FILE,
        "service": None,
        "data": None,
        "metadata": metadata,
        "visibility": "public",
        "confidence": None,
        "weight": None,
        "hasVector": False,
    }


def _contain(txn: Txn, ctx: Context, parent_id: str, child_id: str) -> None:
    _put_relation(txn, parent_id, child_id, "contains", RELATION_SUBTYPE, {}, None, ctx)


def _uncontain(txn: Txn, parent_id: str, child_id: str) -> None:
    rid = txn.relation_by_identity(parent_id, child_id, "contains", RELATION_SUBTYPE)
    if rid is not None:
        txn.delete_relation(rid)


def _root(txn: Txn, ctx: Context) -> dict[str, Any]:
    row = _node(txn, P.ROOT)
    if row is None:
        row = _node_row(ROOT_ID, True, P.ROOT, {}, "mkdir")
        _put_node(txn, ctx, row, None)
    return row


def _make_dir(txn: Txn, ctx: Context, path: str, parent: dict[str, Any]) -> dict[str, Any]:
    row = _node_row(K.uuid7(), True, path, {}, "mkdir")
    _put_node(txn, ctx, row, None)
    _contain(txn, ctx, parent["id"], row["id"])
    return row


def _parent_dir(txn: Txn, ctx: Context, path: str, create: bool) -> dict[str, Any]:
    """The directory ``path`` goes in, made (with its missing ancestors) when ``create``.

    NotADirectoryError names a file standing where a directory is needed; FileNotFoundError the missing
    parent."""
    up = P.parent(path)
    assert up is not None
    if up == P.ROOT:
        return _root(txn, ctx)
    row = _node(txn, up)
    if row is not None:
        if not _is_dir(row):
            raise R.NotADirectoryError(f"{up} is a file", path=up)
        return row
    missing = [up]
    for above in reversed(P.ancestors(up)):  # nearest first: find the deepest node that exists
        found = _node(txn, above) if above != P.ROOT else _root_row(txn)
        if found is not None:
            if not _is_dir(found):
                raise R.NotADirectoryError(f"{above} is a file", path=above)
            break
        missing.append(above)
    if not create:
        raise R.FileNotFoundError(f"no directory {up} (pass createParents or parents to make it)", path=up)
    parent = _root(txn, ctx) if found["id"] == ROOT_ID else found
    for directory in reversed(missing):  # farthest first
        parent = _make_dir(txn, ctx, directory, parent)
    return parent


def put_file(
    txn: Txn,
    ctx: Context,
    prepared: PreparedFile,
    *,
    create_parents: bool = False,
    exclusive: bool = False,
    if_match: str | None = None,
    metadata: Any = None,
    embed: bool = True,
    op: str = "write",
) -> dict[str, Any]:
    """Stage a file write inside an existing transaction: the row (and its parents with
    ``create_parents``) naming content :func:`prepare_file` already made durable. Answers
    FileWriteAnswer's fields but the commit's generation and timestamp.

    The text to embed is ``prepared.text``: a caller's commit makes its embedding before the lock
    (``Context.vectors``); without it the row is stored without a vector."""
    path = prepared.path
    if path == P.ROOT:
        raise R.IsADirectoryError("/ is a directory", path=path)
    before = _node(txn, path)
    if _is_dir(before):
        raise R.IsADirectoryError(f"{path} is a directory", path=path)
    if before is not None and exclusive:
        raise R.FileExistsError(f"{path} exists (exclusive)", path=path)
    current = before["metadata"].get("hash") if before is not None else None
    if if_match is not None and current != if_match:
        raise R.PreconditionFailedError(f"{path} holds {current}, not {if_match}", expected=if_match, actual=current)
    parent = _parent_dir(txn, ctx, path, create_parents)
    if metadata is not None:
        extra = _extra(metadata)
    else:
        extra = {k: v for k, v in (before or {}).get("metadata", {}).items() if k not in NODE_FIELDS}
    stored = prepared.stored
    meta = {
        **extra,
        "contentType": prepared.content_type,
        "size": stored.size,
        "hash": stored.address,
        "xattrs": (before or {}).get("metadata", {}).get("xattrs", {}),
    }
    row = _node_row(before["id"] if before else K.uuid7(), False, path, meta, op)
    row["data"] = prepared.text
    vector = ctx.vector_of(prepared.text) if embed and prepared.text is not None else None
    if vector is not None:
        row["vector"], row["hasVector"] = vector, True
    _put_node(txn, ctx, row, before)
    if before is None:
        _contain(txn, ctx, parent["id"], row["id"])
    return {
        "path": path,
        "entityId": row["id"],
        "hash": stored.address,
        "size": stored.size,
        "contentType": prepared.content_type,
        "created": before is None,
    }


def staged(ctx: Context, path: str) -> PreparedFile:
    """The content the commit path staged for a write of ``path`` (``ctx.staged``)."""
    prepared = ctx.staged
    if not isinstance(prepared, PreparedFile) or prepared.path != path:
        raise R.InternalError("a file write reached its rule without its content staged", ref="vfs-stage")
    return prepared


# -- the write doors ------------------------------------------------------------------------------


@door("writeFile", WRITE)
def write_file(txn: Txn, a: dict[str, Any], ctx: Context) -> dict[str, Any]:
    prepared = staged(ctx, P.check(a["path"]))
    if_match = rows.string(a.get("ifMatch"), "ifMatch", nullable=True)
    return put_file(
        txn,
        ctx,
        prepared,
        create_parents=a["createParents"],
        exclusive=a["exclusive"],
        if_match=if_match,
        metadata=a.get("metadata"),
        embed=a["embed"],
    )


@door("appendFile", WRITE)
def append_file(txn: Txn, a: dict[str, Any], ctx: Context) -> dict[str, Any]:
    prepared = staged(ctx, P.check(a["path"]))
    before = _node(txn, prepared.path)
    current = before["metadata"].get("hash") if before is not None and not _is_dir(before) else None
    if current != prepared.base and prepared.appended is not None and ctx.blobs is not None and current:
        # another write landed between the staging and this commit: append to what is there now (under
        # the lock, so rare and correct rather than fast)
        stored = ctx.blobs.append(current, prepared.appended, prepared.path)
        prepared = PreparedFile(
            prepared.path,
            stored,
            before["metadata"].get("contentType") or OCTETS,
            before.get("data"),
            current,
            prepared.appended,
        )
    elif current != prepared.base and before is not None and not _is_dir(before):
        raise R.PreconditionFailedError(
            f"{prepared.path} changed while the append was staged", expected=prepared.base, actual=current
        )
    return put_file(
        txn,
        ctx,
        prepared,
        if_match=rows.string(a.get("ifMatch"), "ifMatch", nullable=True),
        op="append" if before is not None else "write",
    )


@door("mkdir", WRITE)
def mkdir(txn: Txn, a: dict[str, Any], ctx: Context) -> dict[str, Any]:
    path = P.check(a["path"])
    parents = a["parents"]
    before = _node_or_root(txn, path)
    if before is not None:
        if parents and _is_dir(before):
            return {"path": path, "entityId": before["id"], "created": False}
        raise R.FileExistsError(f"{path} exists", path=path)
    parent = _parent_dir(txn, ctx, path, parents)
    row = _make_dir(txn, ctx, path, parent)
    return {"path": path, "entityId": row["id"], "created": True}


def _remove_node(txn: Txn, id_: str) -> None:
    for rid in txn.touching(id_):
        txn.delete_relation(rid)
    txn.delete_entity(id_)


@door("rmdir", WRITE)
def rmdir(txn: Txn, a: dict[str, Any], ctx: Context) -> dict[str, Any]:
    path = P.check(a["path"])
    row = _node_or_root(txn, path)
    if row is None:
        raise R.FileNotFoundError(f"no {path}", path=path)
    if not _is_dir(row):
        raise R.NotADirectoryError(f"{path} is a file", path=path)
    inside = list(_under(txn, path))
    if inside and not a["recursive"]:
        raise R.DirectoryNotEmptyError(f"{path} holds {len(inside)} node(s) (pass recursive)", path=path)
    for _, id_ in reversed(inside):  # children before their parents
        _remove_node(txn, id_)
    removed = len(inside)
    if path != P.ROOT:  # the root always exists: emptying it is the most rmdir does to it
        _remove_node(txn, row["id"])
        removed += 1
    return {"path": path, "removed": removed}


@door("unlink", WRITE)
def unlink(txn: Txn, a: dict[str, Any], ctx: Context) -> dict[str, Any]:
    path = P.check(a["path"])
    row = _node_or_root(txn, path)
    if row is None:
        raise R.FileNotFoundError(f"no {path}", path=path)
    if _is_dir(row):
        raise R.IsADirectoryError(f"{path} is a directory (use rmdir)", path=path)
    _remove_node(txn, row["id"])
    return {"path": path}


def _source(txn: Txn, path: str) -> dict[str, Any]:
    if path == P.ROOT:
        raise R.InvalidPathError("/ cannot be moved or renamed", path=path, reason="root")
    row = _node(txn, path)
    if row is None:
        raise R.FileNotFoundError(f"no {path}", path=path)
    return row


def _not_into_itself(source: str, target: str) -> None:
    if P.is_within(target, source) and target != source:
        raise R.InvalidPathError(f"{source} cannot go inside itself ({target})", path=target, reason="into-itself")


def _relocate(txn: Txn, ctx: Context, row: dict[str, Any], target: str, op: str) -> None:
    """Move a node and everything under it to ``target``: every row re-put at its new path (the path
    posting follows the rows), and the node's ``contains`` moved to its new parent."""
    source = row["metadata"]["path"]
    inside = list(_under(txn, source))
    old_parent = _node_or_root(txn, P.parent(source) or P.ROOT)
    new_parent = _parent_dir(txn, ctx, target, False)
    for path, id_ in [(source, row["id"]), *inside]:
        before = txn.entity(id_)
        assert before is not None
        moved = dict(before)
        moved["metadata"] = {**before["metadata"], "path": P.rebase(path, source, target)}
        moved["metadata"].update(
            name=P.name(moved["metadata"]["path"]), parent=P.parent(moved["metadata"]["path"]), op=op
        )
        _put_node(txn, ctx, moved, before)
        for follow in MOVE_FOLLOWERS:
            follow(txn, ctx, moved)
    if old_parent is not None and old_parent["id"] != new_parent["id"]:
        _uncontain(txn, old_parent["id"], row["id"])
        _contain(txn, ctx, new_parent["id"], row["id"])


def _overwrite(txn: Txn, row: dict[str, Any], there: dict[str, Any] | None, target: str, overwrite: bool) -> None:
    """Clear the target of a move or copy: only a file replaced by a file, and only with ``overwrite``."""
    if there is None:
        return
    if not overwrite or _is_dir(there) or _is_dir(row):
        raise R.FileExistsError(f"{target} exists" + ("" if overwrite else " (pass overwrite)"), path=target)
    _remove_node(txn, there["id"])


@door("rename", WRITE)
def rename(txn: Txn, a: dict[str, Any], ctx: Context) -> dict[str, Any]:
    path, target = P.check(a["path"]), P.check(a["to"], "to")
    row = _source(txn, path)
    if _node_or_root(txn, target) is not None:
        raise R.FileExistsError(f"{target} exists", path=target)
    _not_into_itself(path, target)
    _relocate(txn, ctx, row, target, "rename")
    return {"path": target, "from": path}


@door("move", WRITE)
def move(txn: Txn, a: dict[str, Any], ctx: Context) -> dict[str, Any]:
    path, target = P.check(a["path"]), P.check(a["to"], "to")
    row = _source(txn, path)
    there = _node_or_root(txn, target)
    if _is_dir(there):  # into the directory
        target = P.join(target, P.name(path))
        there = _node(txn, target)
    _not_into_itself(path, target)
    if there is not None and there["id"] == row["id"]:
        raise R.FileExistsError(f"{target} is where {path} already is", path=target)
    _overwrite(txn, row, there, target, a["overwrite"])
    _relocate(txn, ctx, row, target, "move")
    return {"path": target, "from": path}


@door("copy", WRITE)
def copy(txn: Txn, a: dict[str, Any], ctx: Context) -> dict[str, Any]:
    """A copy is new rows naming the same blobs: no byte of content is written again."""
    path, target = P.check(a["path"]), P.check(a["to"], "to")
    row = _node_or_root(txn, path)
    if row is None:
        raise R.FileNotFoundError(f"no {path}", path=path)
    if _is_dir(row) and not a["recursive"]:
        raise R.IsADirectoryError(f"{path} is a directory (pass recursive)", path=path)
    _not_into_itself(path, target)
    _overwrite(txn, row, _node_or_root(txn, target), target, a["overwrite"])
    parent = _parent_dir(txn, ctx, target, False)
    made = {P.parent(target): parent}
    sources = [(path, row)] + [(p, txn.entity(i)) for p, i in _under(txn, path)]
    for old_path, old in sources:
        assert old is not None
        new_path = P.rebase(old_path, path, target)
        meta = {k: v for k, v in old["metadata"].items() if k not in ("path", "name", "parent", "op")}
        new = _node_row(K.uuid7(), _is_dir(old), new_path, meta, "copy")
        new["data"] = old.get("data")
        if old.get("vector") is not None:
            new["vector"], new["hasVector"] = old["vector"], True
        _put_node(txn, ctx, new, None)
        _contain(txn, ctx, made[P.parent(new_path)]["id"], new["id"])
        made[new_path] = new
    return {"path": target, "copied": len(sources)}


def _existing(txn: Txn, ctx: Context, path: str) -> dict[str, Any]:
    row = _node(txn, path)
    if row is None and path == P.ROOT:
        row = _root(txn, ctx)
    if row is None:
        raise R.FileNotFoundError(f"no {path}", path=path)
    return row


def _xattr_name(value: Any) -> str:
    name = rows.string(value, "name")
    assert name is not None
    if not 1 <= len(name.encode("utf-8", "surrogatepass")) <= MAX_XATTR_NAME:
        raise R.InvalidArgumentError(f"name: 1 to {MAX_XATTR_NAME} bytes", field="name", reason="out-of-range")
    return name


def _set_xattrs(txn: Txn, ctx: Context, row: dict[str, Any], xattrs: dict[str, Any]) -> None:
    changed = dict(row)
    changed["metadata"] = {**row["metadata"], "xattrs": xattrs, "op": "xattr"}
    _put_node(txn, ctx, changed, row)


@door("setxattr", WRITE)
def setxattr(txn: Txn, a: dict[str, Any], ctx: Context) -> dict[str, Any]:
    path, name = P.check(a["path"]), _xattr_name(a["name"])
    value = rows.metadata({"value": a["value"]}, "value")["value"]  # any JSON value, checked storable
    row = _existing(txn, ctx, path)
    _set_xattrs(txn, ctx, row, {**row["metadata"].get("xattrs", {}), name: value})
    return {"path": path, "name": name}


@door("removexattr", WRITE)
def removexattr(txn: Txn, a: dict[str, Any], ctx: Context) -> dict[str, Any]:
    path, name = P.check(a["path"]), _xattr_name(a["name"])
    row = _node_or_root(txn, path)
    if row is None:
        raise R.FileNotFoundError(f"no {path}", path=path)
    xattrs = dict(row["metadata"].get("xattrs", {}))
    removed = xattrs.pop(name, _ABSENT) is not _ABSENT
    if removed:
        _set_xattrs(txn, ctx, row, xattrs)
    return {"path": path, "name": name, "removed": removed}


_ABSENT = object()


# -- the read doors -------------------------------------------------------------------------------


def _must(view: Snapshot, path: str) -> dict[str, Any]:
    row = _node_or_root(view, path)
    if row is None:
        raise R.FileNotFoundError(f"no {path}", path=path)
    return row


def _text_stops(offset: int) -> R.Refusal:
    return R.TextDecodeError(
        f"the bytes are not UTF-8 from offset {offset}: read them as base64", offset=offset, cure="base64"
    )


def _text(data: bytes | memoryview, offset: int) -> str:
    """UTF-8, or TextDecodeError at the offset where text stops; never lossy."""
    try:
        return str(data, "utf-8")
    except UnicodeDecodeError as exc:
        raise _text_stops(offset + exc.start) from None


def _whole_text(blobs: BlobStore, address: str, size: int, path: str) -> str:
    """A whole file as UTF-8 text, verified: its pieces joined as they come (``textjoin``), never gathered
    into one buffer. Where text stops is only said once the address checked (damage is BlobCorruptError)."""
    join = textjoin.Utf8Join(size)
    for piece in blobs.pieces(address, path):
        join.add(piece)
    try:
        return join.finish()
    except TextStops as exc:
        raise _text_stops(exc.offset) from None


def _whole_base64(blobs: BlobStore, address: str, size: int, path: str) -> str:
    """A whole file as base64, verified: each piece encoded as it comes (``textjoin``)."""
    join = textjoin.Base64Join(size)
    for piece in blobs.pieces(address, path):
        join.add(piece)
    return join.finish()


@door("readFile")
def read_file(snap: Snapshot, id_: Any, a: dict[str, Any]) -> dict[str, Any]:
    path = P.check(a["path"])
    view = snap
    if a.get("generation") is not None:
        view = snap.at(resolve_generation(snap, {"generation": a["generation"]}))
    row = _must(view, path)
    if _is_dir(row):
        raise R.IsADirectoryError(f"{path} is a directory", path=path)
    meta = row["metadata"]
    offset = rows.integer(a["offset"], "offset", 0)
    ranged = offset != 0 or a.get("length") is not None
    encoding = a["encoding"]
    if ranged:
        data = view.blobs.read_all(meta["hash"], path)
        size = len(data)
        if offset > size:
            raise R.InvalidArgumentError(f"offset: past the end ({size} bytes)", field="offset", reason="out-of-range")
        length = rows.integer(a["length"], "length", 0) if a.get("length") is not None else size
        piece = memoryview(data)[offset : offset + length]
        content = _text(piece, offset) if encoding == "utf-8" else pybase64.b64encode_as_string(piece)
    else:  # the whole file: its pieces turned into the answer's text as they come
        size = meta["size"]
        content = (
            _whole_text(view.blobs, meta["hash"], size, path)
            if encoding == "utf-8"
            else _whole_base64(view.blobs, meta["hash"], size, path)
        )
    answer = {
        "path": path,
        "content": content,
        "encoding": encoding,
        "contentType": meta.get("contentType") or OCTETS,
        "size": size,
        "hash": meta["hash"],
        "generation": view.generation,
    }
    if ranged:
        answer["range"] = {"offset": offset, "length": len(piece)}
    return answer


@door("readdir")
def readdir(snap: Snapshot, id_: Any, a: dict[str, Any]) -> dict[str, Any]:
    path = P.check(a["path"])
    row = _must(snap, path)
    if not _is_dir(row):
        raise R.NotADirectoryError(f"{path} is a file", path=path)
    limit = rows.integer(a["inlineLimit"], "inlineLimit", 0, INLINE_MAX)
    nodes = []
    for child_path, id_ in _under(snap, path):
        if not a["recursive"] and P.parent(child_path) != path:
            continue
        child = snap.entity(id_)
        if child is None:
            continue
        node = file_node(child)
        if a["inline"] and node["type"] == "file":
            _inline(snap, child, node, limit)
        nodes.append(node)
    return {"path": path, "nodes": nodes, "generation": snap.generation}


def _inline(snap: Snapshot, row: dict[str, Any], node: dict[str, Any], limit: int) -> None:
    """A small text file's bytes, verified, as UTF-8; or why they are absent."""
    if not is_text_type(node.get("contentType")):
        node["omitted"] = "not-text"
    elif node["size"] > limit:
        node["omitted"] = "too-large"
    else:
        data = snap.blobs.read_all(node["hash"], node["path"])
        try:
            node["content"] = data.decode("utf-8")
        except UnicodeDecodeError:
            node["omitted"] = "not-text"


@door("stat")
def stat(snap: Snapshot, id_: Any, a: dict[str, Any]) -> dict[str, Any]:
    """The node's recorded type, media type and size: no blob is opened."""
    return {"node": file_node(_must(snap, P.check(a["path"])))}


@door("exists")
def exists(snap: Snapshot, id_: Any, a: dict[str, Any]) -> dict[str, Any]:
    row = _node_or_root(snap, P.check(a["path"]))
    if row is None:
        return {"exists": False}
    return {"exists": True, "type": "directory" if _is_dir(row) else "file"}


@door("getxattr")
def getxattr(snap: Snapshot, id_: Any, a: dict[str, Any]) -> dict[str, Any]:
    xattrs = _must(snap, P.check(a["path"]))["metadata"].get("xattrs", {})
    name = _xattr_name(a["name"])
    return {"value": xattrs.get(name), "exists": name in xattrs}


@door("listxattr")
def listxattr(snap: Snapshot, id_: Any, a: dict[str, Any]) -> dict[str, Any]:
    return {"names": sorted(_must(snap, P.check(a["path"]))["metadata"].get("xattrs", {}))}


@door("fileHistory")
def file_history(snap: Snapshot, id_: Any, a: dict[str, Any]) -> dict[str, Any]:
    """A path's versions, newest first: the ids its path posting named, and those rows' versions while they
    stood at the path (or left it)."""
    path = P.check(a["path"])
    limit = rows.integer(a["limit"], "limit", 1, MAX_HISTORY_PAGE)
    view, start = snap, 0
    if a.get("cursor") is not None:
        generation, start = decode_cursor(a["cursor"], "fileHistory", {"path": path})
        view = snap.at(min(generation, snap.generation))
    ids = {rows.unpack(raw) for _, raw in view.versions(K.path_key(path)) if raw}
    found: dict[int, dict[str, Any]] = {}
    for id_ in ids:
        before: dict[str, Any] | None = None
        for generation, raw in reversed(view.versions(K.entity_key(id_))):
            row = rows.unpack(raw) if raw else None
            here = row is not None and row["metadata"].get("path") == path
            was = before is not None and before["metadata"].get("path") == path
            if here or was:
                entry = _version(view, generation, row, before, here)
                if here or generation not in found:  # a node arriving outranks one leaving the same commit
                    found[generation] = entry
            before = row
    versions = [found[g] for g in sorted(found, reverse=True)]
    page = versions[start : start + limit]
    more = start + limit < len(versions)
    return {
        "path": path,
        "versions": page,
        "hasMore": more,
        "cursor": encode_cursor("fileHistory", {"path": path}, view.generation, start + limit) if more else None,
    }


def _version(
    view: Snapshot, generation: int, row: dict[str, Any] | None, before: dict[str, Any] | None, here: bool
) -> dict[str, Any]:
    """One entry of fileHistory: ``row`` is the node's version at ``generation`` (None: removed), ``here``
    whether it stands at the path (else it left it: moved away, or removed)."""
    commit = view.commit(generation)
    if row is not None:
        op = row["metadata"].get("op", "write")
    else:
        op = "rmdir" if _is_dir(before) else "unlink"
    entry: dict[str, Any] = {"generation": generation, "timestamp": commit["timestamp"], "op": op}
    if here and row is not None and not _is_dir(row):
        entry.update(size=row["metadata"]["size"], hash=row["metadata"]["hash"])
    entry["author"] = commit["author"]
    return entry
