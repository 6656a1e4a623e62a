"""One commit in the making: an overlay of user keys over the store, and the ops it logs.

The four low-level ops (entity put/delete, relation put/delete) are the only
way rows change. A live commit reaches them through the write doors; replay
reaches them straight from a log frame. Both derive the same adjacency,
identity and vector keys and move the counts ledger the same way, so a
replayed store equals the one that was acknowledged.

A commit works on whole rows: :meth:`Txn.entity` and :meth:`Txn.relation` answer a row with its vector in
it, and the puts take one so. The store keeps the vector apart, under the row's vector key
(docs/store-format.md, "Rows and keys"), written only when it changes: a put splits the row, and logs the
vector (the op's ``vec``) only then.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Iterator
from typing import Any, cast

from brainy._speedups import addrow, mint
from brainy.store import keys as K
from brainy.store import rows
from brainy.store.answered import Written

_KIND = operator.itemgetter("k")

Reader = Callable[[bytes], "bytes | None"]
Scanner = Callable[[bytes, "bytes | None"], Iterator[tuple[bytes, bytes]]]

_MISSING = object()


class Txn:
    def __init__(
        self,
        read: Reader,
        scan: Scanner,
        next_dense: int,
        generation: int,
        timestamp: int,
        caller: str | None = None,
        via: str | None = None,
    ) -> None:
        self._read = read
        self._scan = scan
        self.overlay: dict[bytes, bytes] = {}  # an empty value is a tombstone
        # what the store answered, kept: it reads one generation, so an answer never changes, and a put reads again
        # what its door read (the row, then its vector key to tell whether the vector changed)
        self._reads: dict[bytes, bytes | None] = {}
        self.ops: list[dict[str, Any]] = []
        self.moves: list[tuple[str, dict | None, dict | None]] = []
        self.next_dense = next_dense
        self.generation = generation
        self.timestamp = timestamp
        self.caller = caller
        self.via = via
        self._undo: list[tuple[bytes, object]] = []
        # a write sent with an id: (id, its answer's MessagePack), logged in the frame (brainy/store/answered.py)
        self.write: Written | None = None

    # -- reading through the overlay -------------------------------------------------------

    def get(self, key: bytes) -> bytes | None:
        value = self.overlay.get(key)
        if value is None:
            reads = self._reads
            if key in reads:
                value = reads[key]
            else:
                value = reads[key] = self._read(key)
        return value or None

    def committed(self, key: bytes) -> bytes | None:
        """``key`` as the store held it before this commit, under no staged op (what was in force when the
        write began: the policy guardrails read their rules so, and a write cannot lift them by removing them)."""
        return self._read(key) or None

    def entity(self, id_: str) -> dict[str, Any] | None:
        """The entity as this commit stands, whole (its vector in it)."""
        return self._whole(K.entity_key(id_))

    def relation(self, id_: str) -> dict[str, Any] | None:
        """The relation as this commit stands, whole (its vector in it)."""
        return self._whole(K.relation_key(id_))

    def _whole(self, key: bytes) -> dict[str, Any] | None:
        raw = self.get(key)
        if not raw:
            return None
        return rows.whole(rows.unpack(raw), lambda: self.get(K.vector_key(key)))

    def scan(self, start: bytes, stop: bytes | None) -> list[bytes]:
        """Live keys in ``[start, stop)``, the overlay over the store."""
        found = {key for key, _ in self._scan(start, stop)}
        for key, value in self.overlay.items():
            if key >= start and (stop is None or key < stop):
                if value:
                    found.add(key)
                else:
                    found.discard(key)
        return sorted(found)

    def touching(self, entity_id: str) -> list[str]:
        """Ids of the relations touching an entity, ascending."""
        prefix = K.adjacency_prefix(entity_id)
        return [K.relation_id_of_adjacency(k) for k in self.scan(prefix, K.prefix_end(prefix))]

    def relation_by_identity(self, from_id: str, to_id: str, verb: str, subtype: str | None) -> str | None:
        raw = self.get(K.identity_key(from_id, to_id, verb, subtype))
        return rows.unpack(raw) if raw else None

    # -- savepoints, so one failed item of a batch leaves the rest ---------------------------

    def savepoint(self) -> tuple[int, int, int, int]:
        return len(self._undo), len(self.ops), len(self.moves), self.next_dense

    def rollback(self, point: tuple[int, int, int, int]) -> None:
        undo_len, ops_len, moves_len, self.next_dense = point
        while len(self._undo) > undo_len:
            key, previous = self._undo.pop()
            if previous is _MISSING:
                del self.overlay[key]
            else:
                self.overlay[key] = previous  # type: ignore[assignment]
        del self.ops[ops_len:]
        del self.moves[moves_len:]

    def _set(self, key: bytes, value: bytes) -> None:
        self._undo.append((key, self.overlay.get(key, _MISSING)))
        self.overlay[key] = value

    # -- the four ops ----------------------------------------------------------------------

    def mint(self) -> int:
        value = self.next_dense
        self.next_dense += 1
        return value

    def put_entity(self, row: dict[str, Any], raw: bytes | None = None, minted: bytes | None = None) -> None:
        """Put a whole entity row; ``raw``, when the caller has it (a replay), is the row as stored. ``minted``: the
        row's key, when its id was minted for it in this commit (:func:`brainy.store.keys.mint_entity`), so that
        no row holds it and nothing is read for it: an ``add`` without an id, a batch's thousand rows without a
        thousand lookups through every table."""
        if minted is not None and raw is not None:
            self._put_minted(row, raw, minted)
            return
        key = minted or K.entity_key(row["id"])
        before = None if minted else self._whole(key)
        self._put("e", key, row, raw, before is None)
        self._repost(before, row)
        self.moves.append(("e", before, row))

    def add_minted(self, items: list[Any], start: int, rule: tuple[Any, ...], ids: list[str]) -> int:
        """Stage the plain adds of ``items`` from ``start`` on, each a new row whose id is minted here: what the
        ``add`` rule and :meth:`put_entity` with ``minted`` do, in one walk (brainy/_speedups/addrow*, whose
        docstring says what is plain and what ``rule`` holds). Their ids go to ``ids``; answers the index of the
        first item that is not plain (``len(items)``: none), left for the rule itself."""
        end, self.next_dense = addrow.add_minted(
            items,
            start,
            (
                self.overlay,
                self._undo,
                self.ops,
                self.moves,
                self.generation,
                self.timestamp,
                self.caller,
                self.next_dense,
            ),
            (*rule, _MISSING, mint.mint, K.ENTITY, K.ENTITY_VECTOR),
            ids,
        )
        return end

    def _put_minted(self, row: dict[str, Any], raw: bytes, key: bytes) -> None:
        """:meth:`put_entity` of a row whose id this commit minted, as stored (``raw``): what :meth:`_put` and
        :meth:`_repost` do for a new row, without their steps for what may already be there (no key of the row is
        staged or stored: nothing to undo to, no vector to compare; a batch of a thousand adds takes this path a
        thousand times)."""
        undo, overlay = self._undo, self.overlay
        undo.append((key, _MISSING))
        overlay[key] = raw
        op: dict[str, Any] = {"k": "e", "o": "put", "row": raw}
        vector = row.get("vector")
        if vector is not None:
            vkey = K.ENTITY_VECTOR + key[1:]
            undo.append((vkey, _MISSING))
            overlay[vkey] = vector
            op["vec"] = vector
        self.ops.append(op)
        if row.get("subtype") in VFS_SUBTYPES:
            self._repost(None, row)
        self.moves.append(("e", None, row))

    def delete_entity(self, id_: str) -> None:
        key = K.entity_key(id_)
        before = self._whole(key)
        self._delete(key)
        self._repost(before, None)
        self.ops.append({"k": "e", "o": "del", "id": id_})
        self.moves.append(("e", before, None))

    def put_relation(self, row: dict[str, Any], raw: bytes | None = None) -> None:
        """Put a whole relation row; ``raw`` as for :meth:`put_entity`."""
        key = K.relation_key(row["id"])
        before = self._whole(key)
        if before is not None:
            self._unindex(before)
        self._index(row)
        self._put("r", key, row, raw, before is None)
        self.moves.append(("r", before, row))

    def delete_relation(self, id_: str) -> None:
        key = K.relation_key(id_)
        before = self._whole(key)
        if before is not None:
            self._unindex(before)
        self._delete(key)
        self.ops.append({"k": "r", "o": "del", "id": id_})
        self.moves.append(("r", before, None))

    def _put(self, kind: str, key: bytes, row: dict[str, Any], raw: bytes | None, new: bool = False) -> None:
        """Stage a whole row's put: the row without its vector, and the vector key only when it does not hold the
        row's vector already (a new vector, a vector gone, a format 1 row's first put since), which is also the
        one put whose op carries the vector (``vec``): a put that changes only the rest costs only the rest.
        ``new``: the row key holds no row, so its vector key holds no vector either (a vector key is written and
        removed only with its row) and is not read through every table."""
        held, vector = row, row.get("vector")
        if raw is None:
            held, vector = rows.stored(row)
            raw = rows.pack(held)
        if held.get("hasVector") != row.get("hasVector"):
            row["hasVector"] = held["hasVector"]  # the moves carry what the store holds
        self._set(key, raw)
        op: dict[str, Any] = {"k": kind, "o": "put", "row": raw}
        vkey = K.vector_key(key)
        if vector != (None if new else self.get(vkey)):
            self._set(vkey, b"" if vector is None else vector)
            if vector is not None:
                op["vec"] = vector
        self.ops.append(op)

    def _delete(self, key: bytes) -> None:
        """Stage a row's removal: a tombstone on the row, and on its vector key when that holds a vector."""
        self._set(key, b"")
        vkey = K.vector_key(key)
        if self.get(vkey) is not None:
            self._set(vkey, b"")

    def _repost(self, before: dict[str, Any] | None, after: dict[str, Any] | None) -> None:
        """Keep the path posting (``p`` keys) of a vfs node: derived from its rows, as ``a`` and ``q`` are."""
        old, new = _vfs_path(before), _vfs_path(after)
        if old is not None and old != new:
            self._set(K.path_key(old), b"")
        if new is not None and (new != old or not self.get(K.path_key(new))):
            assert after is not None
            self._set(K.path_key(new), rows.pack(after["id"]))

    def _index(self, row: dict[str, Any]) -> None:
        rid, a, b = row["id"], row["from"], row["to"]
        if a == b:
            self._set(K.adjacency_key(a, rid), rows.pack(K.OUT | K.IN))
        else:
            self._set(K.adjacency_key(a, rid), rows.pack(K.OUT))
            self._set(K.adjacency_key(b, rid), rows.pack(K.IN))
        self._set(K.identity_key(a, b, row["type"], row.get("subtype")), rows.pack(rid))

    def _unindex(self, row: dict[str, Any]) -> None:
        rid, a, b = row["id"], row["from"], row["to"]
        self._set(K.adjacency_key(a, rid), b"")
        self._set(K.adjacency_key(b, rid), b"")
        self._set(K.identity_key(a, b, row["type"], row.get("subtype")), b"")

    def replay(self, ops: list[dict[str, Any]], decoded: list[dict[str, Any] | None] | None = None) -> None:
        """Apply the ops of a logged frame; ``decoded`` (if given) holds each put's row already unpacked.

        Each put's row is made whole as its commit had it: the vector the op carries (``vec``), else, when the
        row says it has one, the one its vector key holds. A format 1 frame's row holds its vector inline: it
        is stored split, as a put of today's stores it (docs/store-format.md, "Frame payload")."""
        for i, op in enumerate(ops):
            if op["o"] == "put":
                logged: bytes = op["row"]
                # a None in ``decoded`` stands for a delete's row: a put's is there
                row = rows.unpack(logged) if decoded is None else cast("dict[str, Any]", decoded[i])
                raw: bytes | None = logged
                self.next_dense = max(self.next_dense, row["denseInt"] + 1)
                key = (K.entity_key if op["k"] == "e" else K.relation_key)(row["id"])
                vec = op.get("vec")
                if "vector" in row:  # a format 1 frame: split as it is stored
                    row, raw = dict(row), None
                elif vec is not None:
                    row = {**row, "vector": vec}
                elif row.get("hasVector"):
                    row = rows.whole(dict(row), functools.partial(self.get, K.vector_key(key)))
                (self.put_entity if op["k"] == "e" else self.put_relation)(row, raw)
            else:
                (self.delete_entity if op["k"] == "e" else self.delete_relation)(op["id"])

    @property
    def counts(self) -> tuple[int, int]:
        """(entity ops, relation ops) of this commit."""
        e = list(map(_KIND, self.ops)).count("e")  # no Python step an op: an addMany's thousand
        return e, len(self.ops) - e


VFS_SUBTYPES = ("vfs.file", "vfs.directory")


def _vfs_path(row: dict[str, Any] | None) -> str | None:
    """The path a vfs node's row stands at (None for any other row)."""
    if row is None or row.get("subtype") not in VFS_SUBTYPES:
        return None
    path = (row.get("metadata") or {}).get("path")
    return path if isinstance(path, str) else None
