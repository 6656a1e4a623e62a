"""Entity and relation documents: validating arguments and building rows (door catalogue, section 1).

Every check raises a named refusal with the field it concerns, before
anything is written.
"""

from __future__ import annotations

import math
import re
from array import array
from collections.abc import Callable, Mapping
from typing import Any

import msgpack

from brainy._speedups import vecdecimal, vecpack
from brainy._speedups.errors import VectorRefused
from brainy.contract import refusals as R
from brainy.contract.limits import quote
from brainy.contract.vectors import Vector
from brainy.store.taxonomy import NOUN_TYPES, RESERVED_SUBTYPE_PREFIXES, VERB_TYPES

DIMENSIONS = 384
VISIBILITIES_SETTABLE = ("public", "internal")
SUBTYPE = re.compile(r"[a-z0-9._-]{1,64}")

ENTITY_FIELDS = frozenset(
    (
        "id",
        "key",
        "type",
        "subtype",
        "service",
        "data",
        "metadata",
        "hasVector",
        "vector",
        "visibility",
        "confidence",
        "weight",
        "createdAt",
        "updatedAt",
        "createdBy",
        "updatedBy",
        "generation",
        "denseInt",
    )
)
RELATION_FIELDS = ENTITY_FIELDS | {"from", "to"}
# Reserved field names a metadata bag may not reuse at its top level (section 1.1).
RESERVED_METADATA = ENTITY_FIELDS | {"from", "to"}


def invalid(field: str, reason: str, message: str) -> R.Refusal:
    return R.InvalidArgumentError(f"{field}: {message}", field=field, reason=reason)


def check_args(args: Any, allowed: frozenset[str], where: str = "") -> dict[str, Any]:
    if args is None:
        args = {}
    if not isinstance(args, dict):
        raise invalid(where or "args", "wrong-type", "the arguments must be an object")
    unknown = sorted(set(args) - allowed)
    if unknown:
        raise invalid(
            f"{where}{unknown[0]}", "unknown-argument", f"not an argument of this door (takes {sorted(allowed)})"
        )
    return args


def need(args: dict[str, Any], name: str, where: str = "") -> Any:
    if name not in args or args[name] is None:
        raise invalid(where + name, "missing", "required")
    return args[name]


def string(value: Any, field: str, nullable: bool = False) -> str | None:
    if value is None and nullable:
        return None
    if not isinstance(value, str):
        raise invalid(field, "wrong-type", "must be a string")
    return value


def boolean(value: Any, field: str) -> bool:
    if not isinstance(value, bool):
        raise invalid(field, "wrong-type", "must be true or false")
    return value


def integer(value: Any, field: str, lo: int | None = None, hi: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise invalid(field, "wrong-type", "must be an integer")
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        raise invalid(field, "out-of-range", f"must be between {lo} and {hi}")
    return value


def unit_number(value: Any, field: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise invalid(field, "wrong-type", "must be a number")
    if not 0 <= value <= 1:
        raise invalid(field, "out-of-range", "must be between 0 and 1")
    return float(value)


def listed(value: Any, field: str, check: Callable[[Any, str], Any]) -> list[Any] | None:
    """A ``T | T[]`` argument as a checked list (None when left out); an empty list is refused."""
    if value is None:
        return None
    items = value if isinstance(value, list) else [value]
    if not items:
        raise invalid(field, "bad-operand", "an empty list matches nothing; leave it out")
    return [check(item, field) for item in items]


def noun(value: Any, field: str = "type") -> str:
    if not isinstance(value, str) or value not in NOUN_TYPES:  # a string first: an object is unhashable
        raise invalid(field, "unknown-type", f"{quote(value)} is not a noun type (use 'custom' with a subtype)")
    return value


def verb(value: Any, field: str = "type") -> str:
    if not isinstance(value, str) or value not in VERB_TYPES:  # a string first: an object is unhashable
        raise invalid(field, "unknown-type", f"{quote(value)} is not a verb type")
    return value


def subtype(value: Any, field: str = "subtype") -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not SUBTYPE.fullmatch(value):
        raise invalid(field, "bad-subtype", "a subtype is 1 to 64 of [a-z0-9._-]")
    if value.startswith(RESERVED_SUBTYPE_PREFIXES):
        raise invalid(field, "reserved-subtype", f"the prefix of {value!r} belongs to a layer")
    return value


def visibility(value: Any, field: str = "visibility") -> str:
    if value not in VISIBILITIES_SETTABLE:
        raise invalid(field, "bad-visibility", "must be 'public' or 'internal'")
    return value


def metadata(value: Any, field: str = "metadata") -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise invalid(field, "wrong-type", "must be an object")
    for key in value:
        if not isinstance(key, str):
            raise invalid(field, "wrong-type", "keys must be strings")
        if key in RESERVED_METADATA:
            raise invalid(f"{field}.{key}", "reserved-field", f"{key!r} is a reserved field name")
    _check_storable(value, field)
    return value


def _plain(value: Any) -> bool:
    """A leaf that stores as it is: a str, a bool, None, a finite float or a 64-bit int, of exactly that type (a
    subclass asks :func:`_check_storable`)."""
    kind = type(value)
    if kind is str or kind is bool or value is None:
        return True
    if kind is int:
        return -(1 << 63) <= value < (1 << 64)
    return kind is float and math.isfinite(value)


def _check_storable(value: Any, field: str, depth: int = 0) -> None:
    if depth > 32:
        raise invalid(field, "too-deep", "nested more than 32 levels")
    # a plain leaf is passed over without its path (written for a container's members, a refusal, and a leaf past
    # the depth, which is refused as before)
    if isinstance(value, dict):
        for k, v in value.items():
            if not isinstance(k, str):
                raise invalid(field, "wrong-type", "object keys must be strings")
            if depth >= 32 or not _plain(v):
                _check_storable(v, f"{field}.{k}", depth + 1)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            if depth >= 32 or not _plain(v):
                _check_storable(v, f"{field}[{i}]", depth + 1)
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise invalid(field, "wrong-type", "numbers must be finite")
    elif isinstance(value, int) and not isinstance(value, bool):
        if not -(1 << 63) <= value < (1 << 64):
            raise invalid(field, "out-of-range", "integers must fit in 64 bits")
    elif value is not None and not isinstance(value, (str, bool)):
        raise invalid(field, "wrong-type", "not a JSON value")


def content(value: Any, field: str = "data") -> Any:
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, dict):
        _check_storable(value, field)
        return value
    raise invalid(field, "wrong-type", "must be a string or an object")


def vector(value: Any, field: str = "vector") -> bytes:
    """A 384-number vector as 1,536 bytes of float32; a zero vector is never stored."""
    try:
        return vecpack.pack(value, DIMENSIONS)
    except VectorRefused as refused:
        if refused.reason == "length":
            raise R.DimensionMismatchError(
                f"{field}: expected {DIMENSIONS} numbers, got {len(value)}", expected=DIMENSIONS, got=len(value)
            ) from None
        if refused.reason == "zero-vector":
            raise invalid(field, "zero-vector", "a zero vector means nothing and is never stored") from None
        if refused.reason == "not-a-list":
            raise invalid(field, "wrong-type", "must be an array of numbers") from None
        raise invalid(field, "wrong-type", "must be an array of finite numbers") from None


def vector_out(blob: bytes | bytearray | memoryview) -> Vector:
    """A stored vector (little-endian float32 bytes) as the wire carries it: each number the shortest decimal
    that reads back as its float32 (DOORS.md 0.3, ``brainy/contract/vectors.py``, ``brainy/_speedups/vecdecimal``)."""
    return Vector(vecdecimal.shortest(blob))


def mean_vector(a: bytes, b: bytes) -> bytes:
    va, vb = array("f", a), array("f", b)
    return array("f", [(x + y) / 2 for x, y in zip(va, vb)]).tobytes()


def vector_of(row: Mapping[str, Any], read_split: Callable[[], bytes | None]) -> bytes | None:
    """A stored row's vector: how every reader of one gets it (docs/store-format.md, "Rows and keys").

    A row version written by format 1 holds its vector inline, under ``vector``; a later one holds none and
    says ``hasVector``, its vector under its vector key, which ``read_split`` reads at the generation the row
    was read at (a vector key is written only with its row, so any generation from the row version's on reads
    the vector that version was written with)."""
    inline = row.get("vector")
    if inline is not None or not row.get("hasVector"):
        return inline
    return read_split()


def whole(row: dict[str, Any], read_split: Callable[[], bytes | None]) -> dict[str, Any]:
    """``row``, a stored row decoded for the caller alone, with its vector (:func:`vector_of`) put under
    ``vector`` when it has one: the row a write door works on and a commit's moves carry."""
    if "vector" not in row:
        vector = vector_of(row, read_split)
        if vector is not None:
            row["vector"] = vector
    return row


def stored(row: dict[str, Any]) -> tuple[dict[str, Any], bytes | None]:
    """A whole row as it is stored and its vector apart: the row without ``vector``, its ``hasVector`` saying
    whether there is one (so the row alone tells a replay whether the vector stays or goes)."""
    vector = row.get("vector")
    has = vector is not None
    if "vector" not in row and bool(row.get("hasVector")) == has:
        return row, None
    out = {k: v for k, v in row.items() if k != "vector"}
    if bool(out.get("hasVector")) != has:
        out["hasVector"] = has
    return out, vector


def pack(value: Any) -> bytes:
    return msgpack.packb(value, use_bin_type=True)


def unpack(data: bytes) -> Any:
    return msgpack.unpackb(data, raw=False)


def public_view(row: dict[str, Any], include_vector: bool = False, include_data: bool = True) -> dict[str, Any]:
    """The wire document of a row; with ``include_vector``, of a whole one (:func:`whole`: its vector in it)."""
    out = dict(row)
    blob = out.pop("vector", None)
    if include_vector and blob is not None:
        out["vector"] = vector_out(blob)
    if not include_data:
        out.pop("data", None)
    return out
