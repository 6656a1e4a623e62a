"""vfs paths (DOORS.md 8, "Paths"): absolute, ``/``-separated, normalised, bounded; refused by name otherwise.

A path is taken as given or refused, never rewritten: a caller who sent ``/a/../b`` meant something,
and guessing what would be a quiet wrong answer. ``/`` always exists.
"""

from __future__ import annotations

from typing import Any

from brainy.contract import refusals as R
from brainy.contract.limits import quote

ROOT = "/"
MAX_PATH_BYTES = 4096
MAX_SEGMENT_BYTES = 255


def _refuse(path: str, reason: str, why: str) -> R.Refusal:
    return R.InvalidPathError(f"path {quote(path)}: {why}", path=path, reason=reason)


def check(value: Any, field: str = "path") -> str:
    """``value`` as a path, or InvalidPathError naming why (InvalidArgumentError when it is not a string)."""
    if not isinstance(value, str):
        raise R.InvalidArgumentError(f"{field}: must be a string", field=field, reason="wrong-type")
    if not value.startswith("/"):
        raise _refuse(value, "not-absolute", "a path starts with /")
    if len(value.encode("utf-8", "surrogatepass")) > MAX_PATH_BYTES:
        raise _refuse(value, "too-long", f"at most {MAX_PATH_BYTES} bytes in all")
    if value == ROOT:
        return value
    if value.endswith("/"):
        raise _refuse(value, "trailing-slash", "no trailing /")
    for segment in value[1:].split("/"):
        if segment == "":
            raise _refuse(value, "empty-segment", "no //")
        if segment in (".", ".."):
            raise _refuse(value, "dot-segment", "no . or .. segments")
        if len(segment.encode("utf-8", "surrogatepass")) > MAX_SEGMENT_BYTES:
            raise _refuse(value, "segment-too-long", f"at most {MAX_SEGMENT_BYTES} bytes per segment")
        if any(ord(c) < 0x20 or ord(c) == 0x7F for c in segment):
            raise _refuse(value, "control-character", "no control characters")
        if any(0xD800 <= ord(c) <= 0xDFFF for c in segment):
            raise _refuse(value, "not-utf-8", "a path is UTF-8 text")
    return value


def parent(path: str) -> str | None:
    """The parent directory's path (None for the root)."""
    if path == ROOT:
        return None
    head = path.rsplit("/", 1)[0]
    return head or ROOT


def name(path: str) -> str:
    """The last segment (``/`` for the root)."""
    return ROOT if path == ROOT else path.rsplit("/", 1)[1]


def join(directory: str, segment: str) -> str:
    return directory + segment if directory == ROOT else f"{directory}/{segment}"


def subtree_prefix(path: str) -> str:
    """What every path strictly under ``path`` starts with."""
    return path if path == ROOT else path + "/"


def is_within(path: str, ancestor: str) -> bool:
    """Whether ``path`` is ``ancestor`` or under it."""
    return path == ancestor or path.startswith(subtree_prefix(ancestor))


def rebase(path: str, old: str, new: str) -> str:
    """``path`` (at or under ``old``) moved to stand at or under ``new``."""
    return new if path == old else join(new, path[len(subtree_prefix(old)) :])


def ancestors(path: str) -> list[str]:
    """Every directory above ``path``, the root first."""
    out: list[str] = []
    up = parent(path)
    while up is not None:
        out.append(up)
        up = parent(up)
    return out[::-1]
