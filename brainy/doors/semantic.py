"""find's semantic leg, its fusion with the text leg, and the ``similar`` door (DOORS.md 4.1, 4.2, 5.1).

The semantic leg ranks by cosine against one unit vector, which comes from ``vector`` (given), from
``near`` (that entity's stored vector, at the generation read) or from ``query`` (embedded by
:func:`query_vector`, the one place the embedder plugs in). It reads the vector index
(``brainy/index/vectors.py``) at the generation of the postings it is filtered by, or, for a past
generation, scans that generation's rows exactly.

Fusion (4.2): ``rrf`` scores a hit Σ weight / (k + rank) over the legs that ranked it (rank from 1);
``weighted`` normalises each leg's scores to 0–1 and mixes them, ``hybridAlpha`` for the semantic leg
and 1 − alpha for the text leg. ``purpose`` (brainy/doors/shapes.py) is a second semantic signal:
weighted as the semantic leg is, in either strategy. Every ranked answer is in score order, then id.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from brainy.contract import refusals as R
from brainy.index import embedder
from brainy.index.snapshot import Snapshot
from brainy.index.vector_matrix import unit
from brainy.store import keys as K
from brainy.store import rows

SEMANTIC_MODES = ("semantic", "vector", "hybrid")
HYBRID_DEPTH = 100  # the semantic leg's hits in a fusion: fixed, so each page of a cursor fuses the same lists
ORDERED_MAX = 1000  # ranked candidates an orderBy reorders (4.3)


def query_texts(a: dict[str, Any]) -> list[str]:
    """The texts a find, explain or similar will embed: its query (none when a vector or an anchor is given, or
    the mode runs no semantic leg) and its stated purpose; what the server embeds off the event loop before the
    read runs."""
    texts = []
    text = a.get("query", a.get("text"))
    if (
        a.get("vector") is None
        and a.get("near") is None
        and a.get("to") is None
        and isinstance(text, str)
        and a.get("searchMode", "auto") in ("auto",) + SEMANTIC_MODES
    ):
        texts.append(text)
    if isinstance(a.get("purpose"), str):
        texts.append(a["purpose"])
    return texts


def query_vector(text: str) -> np.ndarray:
    """The unit vector of a query text: the embedder's answer (``EmbeddingModelMissingError`` naming the
    directories looked in when the box has no model, DOORS.md 7; a zero vector is never an answer)."""
    return embedder.embed_one(text)[0]


@dataclass
class Source:
    """Where the semantic leg's vector comes from: ``vector`` (given or embedded) or ``near`` (an entity)."""

    kind: str
    vector: np.ndarray | None = None
    anchor: str | None = None  # the near entity, as given
    threshold: float | None = None


def _number(value: Any, field_: str, lo: float | None = None, hi: float | None = None) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not np.isfinite(value):
        raise R.InvalidArgumentError(f"{field_}: must be a number", field=field_, reason="wrong-type")
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        raise R.InvalidArgumentError(f"{field_}: must be between {lo} and {hi}", field=field_, reason="out-of-range")
    return float(value)


def given_vector(value: Any, field_: str = "vector") -> np.ndarray:
    """A vector argument as a unit vector: 384 finite numbers (else DimensionMismatchError), not all zero."""
    return unit(rows.vector(value, field_))


def plan(a: dict[str, Any], mode: str, text: str | None, legs: dict[str, dict[str, Any]]) -> Source | None:
    """The semantic leg of a FindQuery, or None when it does not run; the auto-mode law (4.2) applied:
    a leg that cannot run is left out loudly in ``auto`` (``legs.semantic``), refused in a named mode."""
    threshold = _number(a["threshold"], "threshold") if a.get("threshold") is not None else None
    source: Source | None = None
    if a.get("vector") is not None:
        source = Source("vector", vector=given_vector(a["vector"]))
    elif a.get("near") is not None:
        near = a["near"]
        if not isinstance(near, dict) or set(near) - {"id", "threshold"} or not isinstance(near.get("id"), str):
            raise R.InvalidArgumentError("near: {id: string, threshold?: number}", field="near", reason="wrong-type")
        floor = _number(near.get("threshold", 0), "near.threshold")
        source = Source("near", anchor=near["id"], threshold=floor)
    elif text is not None and mode in ("auto",) + SEMANTIC_MODES:
        try:
            source = Source("vector", vector=query_vector(text))
        except R.EmbeddingModelMissingError as refusal:
            if mode != "auto":
                raise
            legs["semantic"] = {"served": False, "reason": f"EmbeddingModelMissingError: {refusal.message}"}
            return None
    elif mode in SEMANTIC_MODES:
        raise R.InvalidArgumentError(
            f"searchMode {mode} needs query, vector or near", field="searchMode", reason="bad-operand"
        )
    if source is None:
        if threshold is not None:
            raise R.InvalidArgumentError(
                "threshold: only a semantic leg (query, vector or near) has one",
                field="threshold",
                reason="bad-operand",
            )
        return None
    if threshold is not None:
        source.threshold = threshold if source.threshold is None else max(threshold, source.threshold)
    legs["semantic"] = {"served": True}
    return source


def anchor_vector(view: Snapshot, source: Source) -> tuple[np.ndarray, int | None]:
    """The query vector of a planned leg and the anchor's dense int (``near``), read at ``view``'s generation."""
    if source.kind != "near":
        assert source.vector is not None
        return source.vector, None
    id_, _ = K.resolve(source.anchor, "near.id")
    row = view.entity(id_)
    if row is None:
        raise R.EntityNotFoundError(f"near.id: no entity {source.anchor!r}", id=source.anchor)
    vector = view.vector(row)
    if not vector:
        # nothing to be near: refused rather than answered from some other index (4.2)
        raise R.InvalidArgumentError(
            f"near.id: entity {source.anchor!r} has no vector", field="near.id", reason="no-vector"
        )
    return unit(vector), row["denseInt"]


# -- fusion ------------------------------------------------------------------------------------------


@dataclass
class Fusion:
    strategy: str = "rrf"
    k: int = 60
    weights: dict[str, float] = field(default_factory=lambda: {"text": 1.0, "semantic": 1.0})
    alpha: float = 0.5

    @classmethod
    def of(cls, a: dict[str, Any]) -> Fusion:
        fusion = cls()
        if a.get("hybridAlpha") is not None:
            fusion.alpha = _number(a["hybridAlpha"], "hybridAlpha", 0, 1)
        spec = a.get("fusion")
        if spec is None:
            return fusion
        if not isinstance(spec, dict) or set(spec) - {"strategy", "k", "weights"}:
            raise R.InvalidArgumentError("fusion: {strategy?, k?, weights?}", field="fusion", reason="wrong-type")
        fusion.strategy = spec.get("strategy", "rrf")
        if fusion.strategy not in ("rrf", "weighted"):
            raise R.InvalidArgumentError(
                "fusion.strategy: rrf or weighted", field="fusion.strategy", reason="bad-operand"
            )
        if "k" in spec:
            fusion.k = rows.integer(spec["k"], "fusion.k", 1)
        weights = spec.get("weights") or {}
        if not isinstance(weights, dict) or set(weights) - {"text", "semantic", "graph"}:
            raise R.InvalidArgumentError(
                "fusion.weights: {text?, semantic?, graph?}", field="fusion.weights", reason="wrong-type"
            )
        for name, value in weights.items():
            fusion.weights[name] = _number(value, f"fusion.weights.{name}", 0)
        return fusion

    def describe(self) -> dict[str, Any]:
        return {"strategy": self.strategy, "k": self.k, "weights": dict(self.weights)}

    def fuse(self, legs: dict[str, dict[int, float]], id_of: Any) -> dict[int, float]:
        """The fused score of every hit any leg ranked."""
        fused: dict[int, float] = {}
        for name, scores in legs.items():
            if name == "purpose":
                name = "semantic"  # a second semantic signal, weighted as the first
            if self.strategy == "rrf":
                weight = self.weights.get(name, 1.0)
                for rank, dense in enumerate(sorted(scores, key=lambda d: (-scores[d], id_of(d))), 1):
                    fused[dense] = fused.get(dense, 0.0) + weight / (self.k + rank)
            else:
                share = self.alpha if name == "semantic" else 1 - self.alpha
                lo, hi = (min(scores.values()), max(scores.values())) if scores else (0.0, 0.0)
                for dense, score in scores.items():
                    normal = (score - lo) / (hi - lo) if hi > lo else 1.0
                    fused[dense] = fused.get(dense, 0.0) + share * normal
        return fused


def match_source(dense: int, text: dict[int, float] | None, semantic: dict[int, float] | None) -> str:
    in_text = text is not None and dense in text
    in_semantic = semantic is not None and dense in semantic
    return "both" if in_text and in_semantic else "semantic" if in_semantic else "text"
