"""find's ranked shapes: ``purpose``, ``rerank`` and ``passages`` (DOORS.md 4.1).

They work on the hits the ranked legs found, never on their own:

* ``purpose`` — the stated purpose is embedded, and each hit's exact cosine to it is one more ranked
  leg in the fusion, weighted as the semantic leg is (a hit without a vector gets no purpose score).
* ``rerank`` — the first ``limit × 4`` hits of the fused order are scored again, exactly: the full
  precision cosine of the hit's stored vector to the query vector (when a semantic leg ran) mixed with
  the word proximity of the query's words in the hit's text (when a text leg ran), ``hybridAlpha`` for
  the cosine and 1 − alpha for the proximity; those hits are put in that order, the rest keep theirs.
  Proximity is the share of the query's words the hit holds times how tightly they sit together: with
  ``m`` of the ``n`` words present inside a smallest window of ``w`` words, ``(m / n) × (m / w)``.
* ``passages`` — the best windows of about ``size`` characters of each hit's text (``data`` when it is a
  string, else the strings inside it joined by newlines, start and end counted in that text), scored by
  the share of the query's words they hold; windows never overlap, at most ``max`` per hit.

A shape with no ranked leg to work on, or on the aggregated shape, is refused by name, as is
``rerank`` with an ``orderBy`` (which replaces the score order it would refine).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from brainy.contract import refusals as R
from brainy.index.projections import WORD, strings_of
from brainy.store import rows

RERANK_FACTOR = 4
TEXT_CAP = 1 << 20  # characters of a hit's text read for its proximity and passages


@dataclass
class Passages:
    max: int = 3
    size: int = 240


@dataclass
class Shapes:
    """The ranked shapes a checked FindQuery asked for."""

    purpose: str | None = None
    rerank: bool = False
    passages: Passages | None = None

    @classmethod
    def of(cls, a: dict[str, Any]) -> Shapes:
        if a.get("purpose") is None and not a.get("rerank") and a.get("passages") in (None, False):
            return _NONE  # (Shapes are never changed once made: a query asking none shares them)
        shapes = cls(purpose=a.get("purpose"), rerank=bool(a.get("rerank")))
        if shapes.purpose is not None and (not isinstance(shapes.purpose, str) or not shapes.purpose.strip()):
            raise R.InvalidArgumentError("purpose: a non-empty string", field="purpose", reason="wrong-type")
        spec = a.get("passages")
        if spec is True:
            shapes.passages = Passages()
        elif isinstance(spec, dict):
            if set(spec) - {"max", "size"}:
                raise R.InvalidArgumentError("passages: true or {max?, size?}", field="passages", reason="wrong-type")
            shapes.passages = Passages(
                rows.integer(spec.get("max", 3), "passages.max", 1, 20),
                rows.integer(spec.get("size", 240), "passages.size", 40, 4000),
            )
        elif spec not in (None, False):
            raise R.InvalidArgumentError("passages: true or {max?, size?}", field="passages", reason="wrong-type")
        return shapes

    @property
    def any(self) -> bool:
        return self.purpose is not None or self.rerank or self.passages is not None

    def named(self) -> list[str]:
        return [
            name
            for name, on in (
                ("purpose", self.purpose is not None),
                ("rerank", self.rerank),
                ("passages", self.passages is not None),
            )
            if on
        ]

    def check(self, ranked: bool, aggregated: bool, ordered: bool, has_text: bool) -> None:
        """The shapes' own laws, once the legs are planned."""
        if not self.any:
            return
        first = self.named()[0]
        if aggregated:
            raise R.InvalidArgumentError(
                f"{first}: a ranked shape, not one of the aggregated shape", field=first, reason="bad-operand"
            )
        if not ranked:
            raise R.InvalidArgumentError(
                f"{first}: a ranked shape works on the hits of a ranked leg (query, vector or near)",
                field=first,
                reason="bad-operand",
            )
        if self.rerank and ordered:
            raise R.InvalidArgumentError(
                "rerank refines the score order, which orderBy replaces", field="rerank", reason="bad-operand"
            )
        if self.passages is not None and not has_text:
            raise R.InvalidArgumentError(
                "passages are the windows holding the query's words: give query", field="passages", reason="bad-operand"
            )


_NONE = Shapes()  # no purpose, no rerank, no passages: a find that asks none


def cosines(
    query: np.ndarray, dense_ints: Iterable[int], vector_of: Callable[[int], np.ndarray | None]
) -> dict[int, float]:
    """The exact cosine of each entity that holds a (unit) vector to the unit vector ``query``."""
    held = [(d, v) for d, v in ((d, vector_of(d)) for d in dense_ints) if v is not None]
    if not held:
        return {}
    scores = np.stack([v for _, v in held]) @ query
    return {d: float(s) for (d, _), s in zip(held, scores.tolist())}


def terms(text: str) -> list[str]:
    """The query's distinct words, in order."""
    return list(dict.fromkeys(WORD.findall(text.lower())))


def proximity(wanted: list[str], words: list[str]) -> float:
    """``(m / n) × (m / w)``: the share of the wanted words present, times how tightly they sit together."""
    if not wanted:
        return 0.0
    index = {term: i for i, term in enumerate(wanted)}
    present = {index[w] for w in words if w in index}
    m = len(present)
    if m == 0:
        return 0.0
    # the smallest window of words holding every present term once: two pointers over the word list
    seen: dict[int, int] = {}
    covered, left, best = 0, 0, len(words)
    for right, word in enumerate(words):
        term = index.get(word)
        if term is None:
            continue
        seen[term] = seen.get(term, 0) + 1
        if seen[term] == 1:
            covered += 1
        while covered == m:
            held = index.get(words[left])
            if held is not None:
                best = min(best, right - left + 1)
                seen[held] -= 1
                if seen[held] == 0:
                    covered -= 1
            left += 1
    return (m / len(wanted)) * (m / best)


def text_of(row: dict[str, Any]) -> str:
    """The text a hit's passages are cut from: ``data`` as a string, or the strings inside it joined by newlines."""
    data = row.get("data")
    if isinstance(data, str):
        return data[:TEXT_CAP]
    strings: list[str] = []
    strings_of(data, strings)
    return "\n".join(strings)[:TEXT_CAP]


def rerank(
    window: list[int],
    cosine: dict[int, float] | None,
    proximity_of: Callable[[int], float] | None,
    alpha: float,
    id_of: Callable[[int], str],
) -> dict[int, dict[str, Any]]:
    """The exact scores of the hits in ``window``: ``{score, cosine?, proximity?}`` each."""
    out: dict[int, dict[str, Any]] = {}
    for dense in window:
        parts: dict[str, Any] = {}
        if cosine is not None:
            parts["cosine"] = cosine.get(dense, 0.0)
        if proximity_of is not None:
            parts["proximity"] = proximity_of(dense)
        if cosine is not None and proximity_of is not None:
            parts["score"] = alpha * parts["cosine"] + (1 - alpha) * parts["proximity"]
        else:
            parts["score"] = parts.get("cosine", parts.get("proximity", 0.0))
        out[dense] = parts
    return out


def reorder(
    kept: list[int], limit: int, score_of: Callable[[list[int]], dict[int, dict[str, Any]]], id_of: Callable[[int], str]
) -> tuple[list[int], dict[int, dict[str, Any]]]:
    """The fused order with its first ``limit × 4`` hits put in their exact order; and those exact scores."""
    window = kept[: limit * RERANK_FACTOR]
    exact = score_of(window)
    window.sort(key=lambda d: (-exact[d]["score"], id_of(d)))
    return window + kept[len(window) :], exact


def passages(text: str, wanted: list[str], shape: Passages) -> list[dict[str, Any]]:
    """The best non-overlapping windows of ``text`` holding the wanted words: ``{text, start, end, score}``."""
    if not wanted or not text:
        return []
    index = set(wanted)
    tokens = [(m.start(), m.end(), m.group().lower()) for m in WORD.finditer(text)]
    hits = [i for i, (_, _, word) in enumerate(tokens) if word in index]
    if not hits:
        return []
    candidates: list[tuple[float, int, int, int]] = []
    lead = shape.size // 4
    for i in hits:
        # the window opens a quarter of its size before the word, on a word's first character
        first = i
        while first > 0 and tokens[i][0] - tokens[first - 1][0] <= lead:
            first -= 1
        start = tokens[first][0]
        last = first
        while last + 1 < len(tokens) and tokens[last + 1][1] - start <= shape.size:
            last += 1
        end = max(tokens[last][1], tokens[i][1])
        held = {tokens[j][2] for j in range(first, last + 1)} & index
        candidates.append((len(held) / len(wanted), start, end, i))
    candidates.sort(key=lambda c: (-c[0], c[1]))
    chosen: list[tuple[float, int, int, int]] = []
    for candidate in candidates:
        if all(candidate[2] <= s or candidate[1] >= e for _, s, e, _ in chosen):
            chosen.append(candidate)
            if len(chosen) == shape.max:
                break
    return [{"text": text[s:e], "start": s, "end": e, "score": score} for score, s, e, _ in chosen]
