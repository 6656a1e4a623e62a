"""memory.recall and memory.context: what the agent knows about something, ranked (DOORS 9.2).

Both legs are find's own (``brainy/doors/query.py``): the meaning leg is find's semantic leg, the word leg
find's BM25 over the word postings, each narrowed first by the metadata postings to the memories asked for
(kind, scope, status, tags). Only the fusion is recall's:

    score = relevance × (0.5 + 0.5 × strength) × recency
    relevance = cosine + TEXT_WEIGHT × (bm25 / the best bm25 among the candidates) + SPEAKER_WEIGHT × named + form
    recency = 0.5 ** (age in days / recencyHalfLifeDays), only when asked; age from ``createdAt`` to now

``named`` is 1 for a memory whose speaker (lifted from its text, ``said.py``) the query names. A memory that
names its speaker is embedded without the name, so the meaning leg ranks what was said; the speaker is then a
separate part, large enough that the named person's memories come first and the meaning leg orders them.
``form`` takes ASKS_WEIGHT off a memory that asks a question and BRIEF_WEIGHT off one that says little.

The word leg never counts a stop word (a question's "what", "does", "to"), and its part is small next to
the meaning leg's: it breaks ties and lifts an exact name, it never outvotes meaning. A plain RRF over ranks
fails exactly where memory lives, several memories sharing the question's subject (DOORS 9.2 gives the
reference figures); ``perf/eval_recall.py`` measures the candidates on such a set and chose this one.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from brainy.contract import arguments
from brainy.contract import doors as D
from brainy.contract import refusals as R
from brainy.doors.memory import records as M
from brainy.doors.memory.said import SPEAKER, body, named
from brainy.doors.query import Query, run_find
from brainy.doors.registry import door
from brainy.index import embedder
from brainy.index.projections import WORD
from brainy.index.snapshot import Snapshot
from brainy.index.vector_matrix import unit
from brainy.store.clock import now_ms
from brainy.store.rows import invalid

TEXT_WEIGHT = 0.1  # chosen by perf/eval_recall.py; the measurement is in its commit message
SPEAKER_WEIGHT = 0.5  # above any cosine gap between two memories: chosen on perf/eval_conversations.py's dev split
# What a line's form says before its meaning: a question asked is seldom what answers one, and a line of fewer
# than BRIEF content words says little ("Ha, classic.", "How's the neighbourhood?"). Chosen on the same dev split.
ASKS_WEIGHT, BRIEF_WEIGHT, BRIEF = 0.1, 0.05, 4
LEG_DEPTH = 20  # hits each leg hands the fusion, at least (2 × limit when that is more): each is a row read
DAY_MS = 86_400_000
ANY = object()  # a scope left out: every scope

# Words a question is made of that say nothing about what it asks: never a word match (DOORS 9.2).
STOP_WORDS = frozenset(
    """
a about above after again against all am an and any are as at be because been before being below between
both but by can could did do does doing done down during each few for from further had has have having he
her here hers herself him himself his how i if in into is it its itself just know like me more most my
myself no nor not now of off on once only or other our ours ourselves out over own same she should so some
such than that the their theirs them themselves then there these they this those through to too under until
up us very was we were what when where which while who whom whose why will with would you your yours
yourself yourselves s t don doesn didn isn wasn aren tell remember recall anything something thing things
""".split()
)


def content_words(text: str) -> list[str]:
    """The words of ``text`` the word leg may match: lower-cased alphanumeric runs, stop words left out."""
    return [w for w in dict.fromkeys(WORD.findall(text.lower())) if w not in STOP_WORDS]


@dataclass(frozen=True)
class Fusion:
    """How the legs' scores become one relevance: ``semantic`` × cosine + ``text`` × max-normalised BM25, or
    with ``rrf`` set, Σ 1 / (rrf + rank) over the legs (the plain RRF recall must not ship; kept to measure)."""

    semantic: float = 1.0
    text: float = TEXT_WEIGHT
    rrf: int | None = None
    stop_words: bool = True  # leave stop words out of the word leg
    speaker: float = SPEAKER_WEIGHT
    asks: float = ASKS_WEIGHT
    brief: float = BRIEF_WEIGHT

    def form(self, text: str) -> float:
        """The part a memory's form takes off its relevance: it asks, or it says little (0 or less)."""
        said_ = body(text).rstrip()
        out = -self.asks if said_.endswith("?") else 0.0
        if self.brief and len(content_words(said_)) < BRIEF:
            out -= self.brief
        return out

    def relevance(
        self, cosine: dict[str, float], words: dict[str, float], favoured: frozenset[str] = frozenset()
    ) -> dict[str, tuple[float, dict[str, float]]]:
        """Each candidate's relevance and each leg's part of it; ``favoured`` are the memories whose speaker the
        query names."""
        out: dict[str, tuple[float, dict[str, float]]] = {}
        if self.rrf is not None:
            ranks = {
                leg: {i: r for r, i in enumerate(sorted(s, key=lambda i: (-s[i], i)), 1)}
                for leg, s in (("semantic", cosine if self.semantic else {}), ("text", words if self.text else {}))
            }
            for i in set(ranks["semantic"]) | set(ranks["text"]):
                parts = {leg: 1 / (self.rrf + r[i]) for leg, r in ranks.items() if i in r}
                out[i] = (sum(parts.values()), parts)
            return out
        best = max(words.values(), default=0.0)
        for i in set(cosine) | set(words):
            parts: dict[str, float] = {}
            if self.semantic and i in cosine:
                parts["semantic"] = self.semantic * max(cosine[i], 0.0)
            if self.text and best > 0 and words.get(i):
                parts["text"] = self.text * words[i] / best
            if self.speaker and i in favoured:
                parts["speaker"] = self.speaker
            out[i] = (sum(parts.values()), parts)
        return out


SHIPPED = Fusion()
MEANING_ONLY = Fusion(text=0.0)
WORDS_ONLY = Fusion(semantic=0.0, text=1.0)


def narrowing(
    kinds: Iterable[str], scope: Any = ANY, tags: list[str] | None = None, include_retired: bool = False
) -> dict[str, Any]:
    """The find arguments that keep only the memories asked for (the metadata leg, from the postings)."""
    where: dict[str, Any] = {}
    if not include_retired:
        where["status"] = "active"
    if scope is not ANY:
        where["scope"] = scope
    if tags:
        where["tags"] = {"hasAll": tags}
    document: dict[str, Any] = {"subtype": [M.subtype(k) for k in kinds], "visibility": "internal"}
    if where:
        document["where"] = where
    return document


def leg(view: Snapshot, narrowed: dict[str, Any], limit: int, **search: Any) -> dict[str, tuple[float, dict]]:
    """One ranked leg of find over the narrowed memories: id -> (score, row as find answers it)."""
    # not door "find": a leg is never paged, so no cursor is minted (its digest would hash the query vector)
    q = Query(arguments.check(D.BY_NAME["find"], {**narrowed, **search, "limit": limit}), door="memory.recall")
    # in_process: the leg reads inside each hit's entity, so it takes rows as documents, not encoded bytes
    return {hit["id"]: (hit["score"], hit["entity"]) for hit in run_find(q, view.in_process())["results"]}


def _with(narrowed: dict[str, Any], field: str, condition: Any) -> dict[str, Any]:
    """``narrowed`` narrowed again: ``field`` must also meet ``condition``."""
    return {**narrowed, "where": {**narrowed.get("where", {}), field: condition}}


def _speaker(row: dict[str, Any]) -> str | None:
    return (row.get("metadata") or {}).get(SPEAKER)


def _cosines(view: Snapshot, rows_: list[dict[str, Any]], query: np.ndarray) -> dict[str, float]:
    """The cosine of each row's vector with the query: from the vector index at the head (no row read), from
    the rows at a past generation (whose index would be built from every row)."""
    if not rows_:
        return {}
    if view.at_head:
        with view.vectors() as index:
            if index.stamp == view.generation:
                vectors = {r["id"]: index.vector_of(r["denseInt"]) for r in rows_}
                return {i: float(np.dot(v, query)) if v is not None else 0.0 for i, v in vectors.items()}
    stored = {r["id"]: _stored_vector(view, r["id"]) for r in rows_}
    return {i: float(np.dot(unit(v), query)) if v else 0.0 for i, v in stored.items()}


def _stored_vector(view: Snapshot, id_: str) -> bytes | None:
    row = view.entity(id_)
    return None if row is None else view.vector(row)


def rank(
    view: Snapshot,
    text: str,
    narrowed: dict[str, Any],
    limit: int,
    fusion: Fusion = SHIPPED,
    half_life_days: float | None = None,
    min_score: float | None = None,
    now: int | None = None,
) -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]]]:
    """The recalled memories, best first ({memory, score, why}), and what served them: the meaning leg's report
    (its model and the form it runs in, or why it did not serve) and the speakers the query named.

    Each leg runs twice when the query could name a speaker: over every memory asked for, and over the
    memories of the speakers it names (a metadata narrowing), so the named person's memories are candidates
    however many others there are. A name that is a speaker's is no word match: the speaker part counts it."""
    depth = max(LEG_DEPTH, 2 * limit)
    found: dict[str, dict[str, Any]] = {}
    words: dict[str, float] = {}
    cosine: dict[str, float] = {}
    runs = named(text)
    by_speaker = _with(narrowed, SPEAKER, {"in": runs}) if fusion.speaker and runs else None
    narrowings = [narrowed] if by_speaker is None else [narrowed, by_speaker]
    semantic: dict[str, Any] = {"served": True}
    vector = None
    if fusion.semantic:
        try:
            vector = embedder.embed_one(text)[0]
        except R.EmbeddingModelMissingError as missing:
            semantic = {"served": False, "reason": f"EmbeddingModelMissingError: {missing.message}"}
            if not fusion.rrf:  # words alone, said so
                fusion = Fusion(semantic=0.0, text=1.0, stop_words=fusion.stop_words, speaker=fusion.speaker)
        else:
            semantic["model"] = {"name": embedder.MODEL, "runs": embedder.shared().model.variant}
            for narrowing_ in narrowings:
                for id_, (score, row) in leg(
                    view, narrowing_, depth, vector=vector.tolist(), searchMode="vector"
                ).items():
                    cosine[id_], found[id_] = score, row
    else:
        semantic = {"served": False, "reason": "the fusion measured runs no meaning leg"}
    spoken = {_speaker(row) for row in found.values()} & set(runs)
    names = {w for name in spoken for w in name.split()}
    query_words = content_words(text) if fusion.stop_words else list(dict.fromkeys(WORD.findall(text.lower())))
    query_words = [w for w in query_words if w not in names]
    if fusion.text and query_words:
        for narrowing_ in narrowings:
            for id_, (score, row) in leg(
                view, narrowing_, depth, query=" ".join(query_words), searchMode="text"
            ).items():
                words[id_], found[id_] = score, row
    if vector is not None and not fusion.rrf:  # a word hit the meaning leg did not reach is scored by its own vector
        cosine.update(_cosines(view, [found[i] for i in words.keys() - cosine.keys()], vector))
    favoured = frozenset(i for i, row in found.items() if _speaker(row) in runs)
    hits = []
    for id_, (relevance, parts) in fusion.relevance(cosine, words, favoured).items():
        row = found[id_]
        record = M.record(row)
        why: dict[str, float] = dict(parts)
        form = fusion.form(record["text"]) if not fusion.rrf else 0.0
        if form:
            why["form"] = form
            relevance += form
        why["strength"] = record["strength"]
        score = relevance * (0.5 + 0.5 * record["strength"])
        if half_life_days is not None:
            age_days = max(0, (now or 0) - row["createdAt"]) / DAY_MS
            why["recency"] = 0.5 ** (age_days / half_life_days)
            score *= why["recency"]
        if min_score is not None and score < min_score:
            continue
        hits.append({"memory": record, "score": score, "why": why})
    hits.sort(key=lambda h: (-h["score"], h["memory"]["id"]))
    named_ = {_speaker(found[i]) for i in favoured}
    return hits[:limit], {"semantic": semantic, "speakers": {"named": sorted(n for n in named_ if n is not None)}}


def _query_text(a: dict[str, Any]) -> list[str]:
    text = a.get("query")
    return [text] if isinstance(text, str) and text.strip() else []


def _scope(a: dict[str, Any]) -> Any:
    return a["scope"] if a.get("scope") is not None else ANY


@door("memory.recall", embeds=_query_text)
def recall(view: Snapshot, id_: Any, a: dict[str, Any]) -> dict[str, Any]:
    text = M.text(a.get("query"), "query")
    limit = _int(a["limit"], "limit", 1, 100)
    half_life = a.get("recencyHalfLifeDays")
    if half_life is not None and (isinstance(half_life, bool) or not isinstance(half_life, int | float)):
        raise invalid("recencyHalfLifeDays", "wrong-type", "must be a number")
    if half_life is not None and not half_life > 0:
        raise invalid("recencyHalfLifeDays", "out-of-range", "must be more than 0")
    narrowed = narrowing(M.kinds(a.get("kinds")), _scope(a), M.tags(a.get("tags")), a["includeRetired"])
    hits, served = rank(view, text, narrowed, limit, SHIPPED, half_life, a.get("minScore"), now_ms())
    return {"memories": hits, "text": {"served": True}, **served}


def _int(value: Any, field: str, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise invalid(field, "out-of-range", f"an integer from {lo} to {hi}")
    return value


# -- context ------------------------------------------------------------------------------------------------


def estimate(text: str) -> int:
    """Tokens as DOORS 9.2 estimates them: ⌈characters / 4⌉."""
    return math.ceil(len(text) / 4)
