"""accords.search: records of any kind by words, by meaning, or by protocol id (DOORS 9.1; seed 000, "The accords
reads": "an exact id cannot be outranked").

The query runs three legs over the records the narrowings keep (kinds, status, a participant through
``involves``, a lab through ``provenance.lab``: postings, in the query):

- **ids**: every token of the query that may be a protocol id, bare or prefixed, probed under every prefix in
  one batch of point reads (``ids.query_ids``, ``ids.probes``); a record found there is an exact hit;
- **words**: find's own text leg (BM25 over the word postings), its scores divided by the best, so a word
  score is at most 1;
- **meaning**: find's own semantic leg, the cosine (floored at 0, so at most 1), when the model and the
  vector index serve it; otherwise ``semantic: {served: false, reason}`` says why, and the words answer alone.

A hit's score is its word score plus its meaning score, so no hit of the words and meaning legs scores above
the number of legs served (the *ceiling*: 1, or 2 with meaning). An exact hit scores ``ceiling + 1``: it ranks
first by arithmetic, not by a sort that happens to hold. Ties break on the protocol id. With no query there are
no scores and no re-sort: one find with no order key, the records in the store's order.

A cursor pins the generation of its first page and the query. Each ranked leg hands the fusion its best
:data:`DEPTH` hits whatever the page, so every page fuses the same lists and a ranked search pages within
them (at most ``2 × DEPTH`` hits past the exact ones); the rows it reads are bounded by them.
"""

from __future__ import annotations

from typing import Any

from brainy.contract import refusals as R
from brainy.contract.limits import quote
from brainy.doors.accords import ids
from brainy.doors.accords import model as M
from brainy.doors.accords.views import Reading, Segment, narrowing
from brainy.doors.cursors import decode_cursor, encode_cursor
from brainy.doors.registry import door
from brainy.index.snapshot import Snapshot
from brainy.index.where import compile_where
from brainy.store import rows
from brainy.store.rows import invalid

# the hits each ranked leg hands the fusion, whatever the page: every page of a query fuses the same lists, and a
# search reads at most this many rows a leg (each hit is a row read, its record answered)
DEPTH = 100
#: What leaves the meaning leg out of a search, said in the answer rather than refused (DOORS 12.2, 9).
UNSERVED = (R.EmbeddingModelMissingError, R.ProjectionBehindError, R.IndexNotAttachedError)
NARROWINGS = ("query", "kinds", "status", "participant", "lab")


def _query_text(a: dict[str, Any]) -> list[str]:
    """What a search embeds: its query, warmed off the event loop before the read (registry ``embeds``)."""
    text = a.get("query")
    return [text] if isinstance(text, str) and text.strip() else []


def _kinds(value: Any) -> tuple[str, ...]:
    if value is None:
        return ids.KINDS
    if not isinstance(value, list) or not value:
        raise invalid("kinds", "wrong-type", "a non-empty list of accords kinds")
    for i, kind in enumerate(value):
        if kind not in ids.KINDS:
            raise invalid(
                f"kinds[{i}]", "bad-operand", f"{quote(kind)} is not an accords kind ({', '.join(ids.KINDS)})"
            )
    return tuple(dict.fromkeys(value))


def _string(a: dict[str, Any], name: str) -> str | None:
    return rows.string(a[name], name) if a.get(name) is not None else None


def _hit(row: dict[str, Any], score: float | None) -> dict[str, Any]:
    record = M.record(row)
    return {"id": record["id"], "kind": record["kind"], "score": score, "record": record}


def exact(reading: Reading, query: str, narrowed: dict[str, Any]) -> list[dict[str, Any]]:
    """The records the query names by protocol id, in the order it names them, that the narrowings keep: every
    probe of every id-like token in one batch."""
    keys = list(dict.fromkeys(key for token in ids.query_ids(query) for key in ids.probes(token)))
    kept = compile_where(narrowed.get("where"))
    subtypes = set(narrowed["subtype"])
    found: dict[str, dict[str, Any]] = {}
    for row in reading.batch(keys):
        if row is not None and row.get("subtype") in subtypes and kept.matches(row):
            found.setdefault(row["id"], row)
    return list(found.values())


def _meaning(reading: Reading, narrowed: dict[str, Any], query: str) -> tuple[Segment | None, dict[str, Any]]:
    try:
        return reading.segment(narrowed, DEPTH, query=query, searchMode="semantic"), {"served": True}
    except UNSERVED as unserved:
        return None, {"served": False, "reason": f"{unserved.name}: {unserved.message}"}


def ranked(reading: Reading, query: str, narrowed: dict[str, Any]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Every hit of the three legs, best first, and the meaning leg's report."""
    named = exact(reading, query, narrowed)
    words = reading.segment(narrowed, DEPTH, query=query, searchMode="text")
    meaning, semantic = _meaning(reading, narrowed, query)
    ceiling = 1 + (meaning is not None)
    best = max(words.scores.values(), default=0.0)
    scores: dict[str, float] = {}
    found: dict[str, dict[str, Any]] = {}
    for segment, part in ((words, lambda s: s / best if best > 0 else 0.0), (meaning, lambda s: max(s, 0.0))):
        if segment is None:
            continue
        for row in segment.rows:
            key = M.key_of(row)
            found[key] = row
            scores[key] = scores.get(key, 0.0) + part(segment.scores.get(key, 0.0))
    first = {M.key_of(row) for row in named}
    rest = sorted((k for k in found if k not in first), key=lambda k: (-scores[k], k))
    hits = [_hit(row, float(ceiling + 1)) for row in named]
    hits.extend(_hit(found[k], scores[k]) for k in rest)
    return hits, semantic


@door("accords.search", embeds=_query_text)
def search(view: Snapshot, id_: Any, a: dict[str, Any]) -> dict[str, Any]:
    query = _string(a, "query")
    if query is not None and not query.strip():
        raise invalid("query", "empty", "leave the query out to list records in store order")
    kinds = _kinds(a.get("kinds"))
    narrowed = narrowing(kinds, _string(a, "status"), _string(a, "participant"), _string(a, "lab"))
    limit = rows.integer(a["limit"] if a.get("limit") is not None else 20, "limit", 1, 1000)
    fingerprint = {name: a.get(name) for name in NARROWINGS}
    offset = 0
    if a.get("cursor") is not None:
        generation, offset = decode_cursor(a["cursor"], "accords.search", fingerprint)
        if not isinstance(offset, int) or offset < 0 or generation > view.head:
            raise R.CursorInvalidError("the cursor is malformed, or belongs to another door or query")
        if generation != view.generation:
            view = view.at(generation)
    reading = Reading(view, "accords.search")
    if query is None:  # store order: one find with no order key, nothing re-sorted
        found = reading.segment(narrowed, limit, offset=offset)
        hits = [_hit(row, None) for row in found.rows]
        more = found.more
        text: dict[str, Any] = {"served": False}
        semantic: dict[str, Any] = {"served": False, "reason": "no query to search by"}
    else:
        every, semantic = ranked(reading, query, narrowed)
        hits = every[offset : offset + limit]
        more = offset + limit < len(every)
        text = {"served": True}
    generation = reading.generation if reading.generation is not None else view.generation
    return {
        "hits": hits,
        "text": text,
        "semantic": semantic,
        "cursor": encode_cursor("accords.search", fingerprint, generation, offset + limit) if more else None,
        "hasMore": more,
        "cost": reading.cost.answer(),
    }
