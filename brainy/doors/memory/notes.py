"""memory.write (DOORS 9.2): a longer note kept as a VFS file and remembered as a ``note`` memory, in ONE commit.

The file's bytes are stored and fsynced before the commit, outside the lock (``vfs.prepare_written``, registered
as this door's stager, so the commit path runs it as it does for writeFile); the rule then puts the file's row
(``vfs.put_file``, its missing parents made) and the note memory that ``references`` it (subtype
``memory.file``) in the same transaction: one generation holds both, or neither is written. The file's text is
embedded by the commit path as any staged file's is; the note's own text is its ``summary`` when given, else the
file's text, else its path.

A note keeps its file's path (``metadata.path``, which ``memory.explain`` and a ``where`` on ``path`` read): a
rename or move of the file, or of a directory above it, puts the note anew with the new path in the same commit.

A path holds one note: writing it again writes a new version of the file and of the note that references it
(same id, strength and citations kept), and makes that note active again, since the write asks for it to be
remembered. The answer's ``doorUrl`` is the reading door's, which only the server can ask (brainy/net/
reading_door.py); in process there is none, so the rule answers ``null`` with ``not-configured``.
"""

from __future__ import annotations

from typing import Any

from brainy.doors import paths as P
from brainy.doors import vfs
from brainy.doors.memory import records as M
from brainy.doors.memory.keeping import caller, new_row, put, relate
from brainy.doors.registry import WRITE, door
from brainy.doors.writes import Context
from brainy.store import rows
from brainy.store.txn import Txn

FILE_OF = "memory.file"  # the note -> file relation's subtype (docs/memory.md)
NOT_CONFIGURED = {"doorUrl": None, "doorUrlReason": "not-configured"}

vfs.stager("memory.write")(vfs.prepare_written)


def note_texts(a: dict[str, Any]) -> list[str]:
    """What the rule embeds beyond the file's own text (which the commit path embeds from the staged content):
    the summary; or, for content that is likely not text (base64, or a media type that is not text), the path
    the note falls back to. A guess wrong either way costs one short embedding, or a note with no vector."""
    summary = a.get("summary")
    if isinstance(summary, str) and summary.strip():
        return [summary]
    binary = a.get("encoding") == "base64" or (
        isinstance(a.get("contentType"), str) and not vfs.is_text_type(a["contentType"])
    )
    return [a["path"]] if binary and isinstance(a.get("path"), str) else []


def _note_of(txn: Txn, file_id: str) -> dict[str, Any] | None:
    """The note memory that references file ``file_id``, read from the file's relations in this commit."""
    for rid in txn.touching(file_id):
        relation = txn.relation(rid)
        if (
            relation is not None
            and relation["to"] == file_id
            and relation["type"] == "references"
            and relation.get("subtype") == FILE_OF
        ):
            row = txn.entity(relation["from"])
            if row is not None and M.kind_of(row) == "note":
                return row
    return None


@vfs.on_move
def _note_follows_its_file(txn: Txn, ctx: Context, moved: dict[str, Any]) -> None:
    """The note of a file that moved takes the file's new path (nothing for a directory, or a file with no note)."""
    if moved.get("subtype") != vfs.FILE:
        return
    note = _note_of(txn, moved["id"])
    path = moved["metadata"]["path"]
    if note is None or (note.get("metadata") or {}).get("path") == path:
        return
    put(txn, {**note, "metadata": {**note["metadata"], "path": path}}, note)


@door("memory.write", WRITE, embeds=note_texts, links=True)
def write(txn: Txn, a: dict[str, Any], ctx: Context) -> dict[str, Any]:
    caller(txn)
    prepared = vfs.staged(ctx, P.check(a["path"]))
    summary = rows.string(a.get("summary"), "summary", nullable=True)
    fields: dict[str, Any] = {
        "scope": rows.string(a.get("scope"), "scope", nullable=True),
        "tags": M.tags(a.get("tags")),
    }
    file = vfs.put_file(txn, ctx, prepared, create_parents=True)  # refuses as writeFile does, before any op
    text = summary if summary and summary.strip() else prepared.text or prepared.path
    fields.update(path=file["path"], contentType=file["contentType"])
    held = _note_of(txn, file["entityId"])
    if held is None:
        note = put(txn, new_row(txn, ctx, "note", text, fields), None)
        relate(txn, ctx, note["id"], file["entityId"], "references", FILE_OF)
    else:
        meta = held.get("metadata") or {}
        fresh = new_row(
            txn,
            ctx,
            "note",
            text,
            {**fields, "strength": meta.get("strength", M.DEFAULT_STRENGTH), "citations": meta.get("citations", 0)},
            id_=held["id"],
        )
        note = put(txn, fresh, held)  # its record fields anew: active, no retirement
    return {
        "id": note["id"],
        "path": file["path"],
        "entityId": file["entityId"],
        "contentType": file["contentType"],
        "hash": file["hash"],
        "size": file["size"],
        **NOT_CONFIGURED,
    }
