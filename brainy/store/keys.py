"""Ids, natural keys, and the user keys rows are stored under (docs/store-format.md, "Rows and keys")."""

from __future__ import annotations

import functools
import os
import struct
import threading
import time
import uuid

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

_uuid7_lock = threading.Lock()
_uuid7_last = 0
# Random bytes for ids, read from the OS 10 KiB at a time (a batch of a thousand rows cost a thousand getrandom
# calls): the same source, fetched ahead, 10 bytes an id; taken under the lock, so never handed out twice.
_RANDOM_CHUNK = 10 * 1024
_uuid7_random = b""
_uuid7_used = 0


def _forget_random() -> None:
    global _uuid7_random, _uuid7_used
    _uuid7_random, _uuid7_used = b"", 0


os.register_at_fork(after_in_child=_forget_random)  # a forked child must not hand out its parent's bytes again


def uuid7() -> str:
    """A time-ordered UUIDv7 (RFC 9562): 48 bits of ms, then random bits.

    Within one millisecond the timestamp field is advanced past the last one
    handed out, so ids minted by this process sort in minting order.
    """
    return uuid_text(uuid7_bytes())


def uuid7_bytes() -> bytes:
    """:func:`uuid7`'s 16 bytes: with them a writer that mints an id has its row key (:func:`minted_entity_key`)
    without parsing the id's text back (and without filling :func:`entity_key`'s cache with ids read once)."""
    global _uuid7_last, _uuid7_random, _uuid7_used
    with _uuid7_lock:
        ms = max(time.time_ns() // 1_000_000, _uuid7_last + 1)
        _uuid7_last = ms
        if _uuid7_used + 10 > len(_uuid7_random):
            _uuid7_random, _uuid7_used = os.urandom(_RANDOM_CHUNK), 0
        rand = _uuid7_random[_uuid7_used : _uuid7_used + 10]
        _uuid7_used += 10
    # unix_ts_ms (48) | ver 0b0111 (4) + rand_a (12) | var 0b10 (2) + rand_b (62)
    return ms.to_bytes(6, "big") + bytes((0x70 | (rand[0] & 0x0F), rand[1], 0x80 | (rand[2] & 0x3F))) + rand[3:]


def uuid_text(raw: bytes) -> str:
    """The canonical text of a UUID's 16 bytes, as ``str(uuid.UUID(bytes=raw))`` writes it."""
    h = raw.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


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


def minted_entity_key(raw: bytes) -> bytes:
    """The row key of the entity whose id is the UUID of these 16 bytes (:func:`uuid7_bytes`): what
    :func:`entity_key` answers for its text."""
    return ENTITY + raw


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
