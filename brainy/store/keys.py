"""Ids, natural keys, and the user keys rows are stored under (docs/store-format.md, "Rows and keys")."""

from __future__ import annotations

import functools
import struct
import uuid

from brainy._speedups import mint
from brainy.contract import refusals as R

NATURAL_KEY_NAMESPACE = uuid.UUID("6f2c9a7e-5b1d-4c3a-9e8f-b7a1d2c3e4f5")
MAX_NATURAL_KEY = 256

ENTITY = b"e"
RELATION = b"r"
ADJACENCY = b"a"
IDENTITY = b"q"
COMMIT = b"g"
PATH = b"p"
ENTITY_VECTOR = b"v"
RELATION_VECTOR = b"w"

# adjacency values: which way the relation points from the keyed entity
OUT, IN = 1, 2


def uuid7() -> str:
    """A time-ordered UUIDv7 (RFC 9562): 48 bits of ms, a 12-bit counter, then 62 random bits, minted in order
    (brainy/_speedups/mint_py.py says how)."""
    return mint.mint()[0]


def mint_entity() -> tuple[str, bytes]:
    """A new entity's id (:func:`uuid7`) and its row key, in one step: a writer that mints an id has its row key
    without parsing the id's text back (and without filling :func:`entity_key`'s cache with ids read once)."""
    text, raw = mint.mint()
    return text, ENTITY + raw


def _parse_uuid(text: str) -> uuid.UUID | None:
    if len(text) != 36 or text.count("-") != 4:
        return None
    try:
        return uuid.UUID(text)
    except ValueError:
        return None


def check_natural_key(key: str, field: str = "id") -> None:
    if not 1 <= len(key) <= MAX_NATURAL_KEY:
        raise R.InvalidArgumentError(
            f"{field}: a natural key is 1 to {MAX_NATURAL_KEY} characters", field=field, reason="bad-natural-key"
        )
    if any(ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0 for c in key):
        raise R.InvalidArgumentError(
            f"{field}: a natural key may not hold control characters", field=field, reason="bad-natural-key"
        )


def resolve(text: object, field: str = "id") -> tuple[str, str | None]:
    """``(id, key)`` for an id or natural key; ``key`` is None for a UUID."""
    if not isinstance(text, str):
        raise R.InvalidArgumentError(f"{field} must be a string", field=field, reason="wrong-type")
    try:
        return _resolved(text)
    except R.InvalidArgumentError:
        check_natural_key(text, field)  # the same refusal, naming this field
        raise


@functools.lru_cache(maxsize=1 << 16)  # hot ids are read again and again; UUIDv5 costs a SHA-1
def _resolved(text: str) -> tuple[str, str | None]:
    parsed = _parse_uuid(text)
    if parsed is not None:
        return str(parsed), None
    check_natural_key(text)
    return str(uuid.uuid5(NATURAL_KEY_NAMESPACE, text)), text


@functools.lru_cache(maxsize=1 << 16)
def entity_key(id_: str) -> bytes:
    return ENTITY + uuid.UUID(id_).bytes


def relation_key(id_: str) -> bytes:
    return RELATION + uuid.UUID(id_).bytes


def vector_key(row_key: bytes) -> bytes:
    """The key a row's vector is kept under, from the row's own (``e``/``r`` + id): ``v``/``w`` + the same id
    (docs/store-format.md, "Rows and keys")."""
    return (ENTITY_VECTOR if row_key[:1] == ENTITY else RELATION_VECTOR) + row_key[1:]


def adjacency_key(entity_id: str, relation_id: str) -> bytes:
    return ADJACENCY + uuid.UUID(entity_id).bytes + uuid.UUID(relation_id).bytes


def adjacency_prefix(entity_id: str) -> bytes:
    return ADJACENCY + uuid.UUID(entity_id).bytes


def relation_id_of_adjacency(key: bytes) -> str:
    return str(uuid.UUID(bytes=key[17:33]))


def identity_key(from_id: str, to_id: str, verb: str, subtype: str | None) -> bytes:
    return (
        IDENTITY
        + uuid.UUID(from_id).bytes
        + uuid.UUID(to_id).bytes
        + verb.encode("utf-8")
        + b"\x00"
        + (subtype or "").encode("utf-8")
    )


def path_key(path: str) -> bytes:
    """The path posting's key of a vfs node (docs/store-format.md, "Files")."""
    return PATH + path.encode("utf-8")


def path_of_key(key: bytes) -> str:
    return key[1:].decode("utf-8")


def commit_key(generation: int) -> bytes:
    return COMMIT + struct.pack(">Q", generation)


def id_of(key: bytes) -> str:
    """The id in an ``e`` or ``r`` user key."""
    return str(uuid.UUID(bytes=key[1:17]))


def prefix_end(prefix: bytes) -> bytes | None:
    """The smallest key greater than every key starting with ``prefix`` (None: no such key)."""
    p = bytearray(prefix)
    while p and p[-1] == 0xFF:
        p.pop()
    if not p:
        return None
    p[-1] += 1
    return bytes(p)
