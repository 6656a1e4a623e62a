"""The horizons that bound a store's disk: how long the log keeps frames for the change feed, and how far
back time travel reads (docs/store-format.md, "Horizons").

A horizon is written as a duration (``30s``, ``15m``, ``12h``, ``7d``) or, for the feed retention, a size
(``512MiB``, ``2GiB``). The writer applies them: its maintenance moves ``logFrom`` and ``historyFrom`` in the
MANIFEST (brainy/store/maintenance.py); every reader refuses what lies below them by name.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from brainy.contract import refusals as R
from brainy.store import log as log_
from brainy.store.files import read_document

_UNITS_MS = {"s": 1_000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_UNITS_BYTES = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}
_SPAN = re.compile(r"(\d+)(s|m|h|d|B|KiB|MiB|GiB|TiB)")
DEFAULT_FEED_RETENTION = "7d"


@dataclass(frozen=True)
class Span:
    """A horizon: ``ms`` (a duration) or ``bytes`` (a size), exactly one of them; ``text`` as it was written."""

    text: str
    ms: int | None = None
    bytes: int | None = None


def parse(text: str, field: str, sizes: bool) -> Span:
    """``text`` as a :class:`Span`; ``sizes`` allows a size. Anything else refuses ``InvalidArgumentError``."""
    found = _SPAN.fullmatch(text.strip()) if isinstance(text, str) else None
    if found is None or (found.group(2) in _UNITS_BYTES and not sizes):
        form = "a duration such as 30s, 15m, 12h or 7d" + (", or a size such as 512MiB or 2GiB" if sizes else "")
        raise R.InvalidArgumentError(f"{field}: {text!r} is not {form}", field=field, reason="wrong-type")
    number, unit = int(found.group(1)), found.group(2)
    if unit in _UNITS_MS:
        return Span(text.strip(), ms=number * _UNITS_MS[unit])
    return Span(text.strip(), bytes=number * _UNITS_BYTES[unit])


@dataclass(frozen=True)
class Horizons:
    """What the writer keeps: the log's frames for ``feed`` (a duration or a size), and every generation for
    ``history`` (a duration; None keeps every generation readable)."""

    feed: Span = Span(DEFAULT_FEED_RETENTION, ms=7 * _UNITS_MS["d"])
    history: Span | None = None

    @classmethod
    def of(cls, feed_retention: str | None = None, history: str | None = None) -> Horizons:
        """From the flags' text (None: the default)."""
        return cls(
            parse(feed_retention, "feedRetention", sizes=True) if feed_retention is not None else cls.feed,
            parse(history, "history", sizes=False) if history is not None else None,
        )

    def describe(self) -> dict[str, Any]:
        return {"feedRetention": self.feed.text, "history": self.history.text if self.history else None}


def log_from(manifest: dict[str, Any]) -> int:
    """The first generation the store's log holds (1 when no segment was ever deleted)."""
    return int(manifest.get("logFrom", 1))


def history_from(manifest: dict[str, Any]) -> int:
    """The oldest generation time travel reads (0: every one)."""
    return int(manifest.get("historyFrom", 0))


def feed_floor(manifest: dict[str, Any]) -> int:
    """The oldest ``since`` the change feed resumes from: its next frame must be in the log and readable."""
    return max(log_from(manifest), history_from(manifest)) - 1


def report(manifest: dict[str, Any], kept: Horizons | None) -> dict[str, Any]:
    """Where each horizon stands, for ``stats`` and ``diagnostics``: the spans the writer keeps (``kept``; None
    for a handle that does not write) and what the MANIFEST says they hold."""
    return {
        **(kept.describe() if kept is not None else {"feedRetention": None, "history": None}),
        "logFrom": log_from(manifest),
        "historyFrom": history_from(manifest),
        "feedFrom": feed_floor(manifest),
    }


def compacted(generation: int, oldest: int, what: str) -> R.GenerationCompactedError:
    return R.GenerationCompactedError(
        f"{what} {generation} is older than the oldest generation retained, {oldest}",
        generation=generation,
        oldestRetained=oldest,
    )


def frames(store: Path, after: int, manifest: dict[str, Any], **read: Any) -> Iterator[log_.Frame]:
    """The log's frames above ``after`` for the change feed (``log_.frames``'s ``read`` arguments), refusing
    ``GenerationCompactedError`` when the feed no longer serves ``after`` by ``manifest`` (the handle's) or, for
    a segment gone under the reader, by the MANIFEST on disk now (the writer trimmed the log meanwhile)."""
    floor = feed_floor(manifest)
    if after < floor:
        raise compacted(after, floor, "since")
    try:
        yield from log_.frames(store / "log", after, **read)
    except (R.FactLogRefusedError, FileNotFoundError) as exc:
        if isinstance(exc, R.FactLogRefusedError) and exc.fields.get("reason") != "missing-segment":
            raise
        try:
            floor = feed_floor(read_document(store / "MANIFEST"))
        except (OSError, R.Refusal):
            floor = -1
        if after < floor:
            raise compacted(after, floor, "since") from None
        if isinstance(exc, FileNotFoundError):
            raise R.FactLogRefusedError(
                f"fact log refused (missing-segment): {Path(exc.filename or '').name}: gone while read",
                reason="missing-segment",
            ) from None
        raise
