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

:meth:`Fusion.fuse` fuses legs held as dicts (a hit each); :meth:`Fusion.order` gives the first hits of the same
order from legs held as arrays (:class:`Leg`), without a Python object a hit: a text leg holds 8,000 hits at
100,000 rows with its word in 8% of them, and a page wants ten. Under rrf only the largest leg is ranked in part
(the hits the smaller legs hold, and its first ones), since a hit only it holds scores less the lower it ranks.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from brainy._speedups import ranking as RK
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


class Keys(Protocol):
    """Each dense int's id as two u64 that compare as the ids do (brainy/index/projections.py's ``IdKeys``)."""

    hi: np.ndarray
    lo: np.ndarray


@dataclass
class Leg:
    """A ranked leg as arrays: its hits' dense ints (u64, each once) and their scores (f64)."""

    name: str
    dense: np.ndarray
    scores: np.ndarray

    def __post_init__(self) -> None:  # one dtype each: numpy would make floats of u64 and i64 put together
        self.dense = np.ascontiguousarray(self.dense, dtype=np.uint64)
        self.scores = np.ascontiguousarray(self.scores, dtype=np.float64)

    def __len__(self) -> int:
        return len(self.dense)


class _Prefix:
    """The first hits of a fused order, any number of them, and how many hits the legs hold together."""

    def __init__(self, size: int, first: Callable[[int], tuple[np.ndarray, np.ndarray]]) -> None:
        self._size, self._first = size, first

    def __len__(self) -> int:
        return self._size

    def __call__(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        return self._first(n)


SHORT_LEG = 64  # a lone leg this short is looked at for an order already made (a page's top-k): the look costs
# less than the legs' arrays and the compiled first n (microseconds a numpy call on a served find), a longer's more


def lone_order(scores: dict[int, float], upto: int) -> list[int] | None:
    """What :meth:`Fusion.order` answers for a lone leg (its first ``upto`` hits) when the leg's scores already
    fall, each below the one before, in the dict's order, as an index's top-k comes (at most SHORT_LEG hits): the
    order on (-score, id) is then theirs, no id consulted. None when they do not."""
    falling = list(scores.values())
    if len(falling) > SHORT_LEG or not all(a > b for a, b in zip(falling, falling[1:])):
        return None
    return list(scores)[:upto]


def _sorted_dense(leg: Leg) -> tuple[np.ndarray, np.ndarray | None]:
    """A leg's dense ints ascending, and the permutation that sorted them (None: they were)."""
    if len(leg) < 2 or bool((leg.dense[1:] > leg.dense[:-1]).all()):
        return leg.dense, None
    perm = np.argsort(leg.dense, kind="stable")
    return leg.dense[perm], perm


def _positions(sorted_dense: np.ndarray, wanted: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Where each wanted dense int is in an ascending array, and whether it is there."""
    at = np.searchsorted(sorted_dense, wanted)
    if not len(sorted_dense):
        return at, np.zeros(len(wanted), dtype=bool)
    return at, (at < len(sorted_dense)) & (sorted_dense[np.minimum(at, len(sorted_dense) - 1)] == wanted)


@dataclass
class Fusion:
    strategy: str = "rrf"
    k: int = 60
    weights: dict[str, float] = field(default_factory=lambda: {"text": 1.0, "semantic": 1.0})
    alpha: float = 0.5

    @classmethod
    def of(cls, a: dict[str, Any]) -> Fusion:
        if a.get("fusion") is None and a.get("hybridAlpha") is None:
            return _DEFAULT_FUSION  # (a Fusion is never changed once made: a query without one shares it)
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

    def order(
        self, legs: list[Leg], keys: Keys, upto: int | None, keep: Callable[[np.ndarray], np.ndarray] | None = None
    ) -> tuple[np.ndarray, np.ndarray, int | None]:
        """The first ``upto`` hits (None: every one) of the order :meth:`Fusion.fuse` and a sort on (-score, id) give,
        and their scores (one leg: its own; more: fused), and how many hits there are.

        ``keep``, when given, is the mask of the hits that stay out of those asked about (the where's rest, read from
        rows): the order is then of the kept hits, asked about a prefix at a time, and the count is None unless every
        hit was asked about."""
        prefix = self._prefixes(legs, keys)
        total = len(prefix)
        want = total if upto is None else min(upto, total)
        if keep is None:
            dense, scores = prefix(want)
            return dense, scores, total
        asked = want
        while True:
            dense, scores = prefix(asked)
            kept = keep(dense)
            if int(kept.sum()) >= want or asked >= total:
                break
            asked = min(total, 4 * asked)
        count = int(kept.sum()) if asked >= total else None
        return dense[kept][:want], scores[kept][:want], count

    def _prefixes(self, legs: list[Leg], keys: Keys) -> _Prefix:
        hi, lo = keys.hi, keys.lo
        if len(legs) == 1:  # no fusion: the leg's own scores, in their order
            (leg,) = legs

            def alone(n: int) -> tuple[np.ndarray, np.ndarray]:
                at = RK.first(leg.dense, leg.scores, n, hi, lo)
                return leg.dense[at], leg.scores[at]

            return _Prefix(len(leg), alone)
        big = max(range(len(legs)), key=lambda i: len(legs[i]))
        b = legs[big]
        b_sorted, perm = _sorted_dense(b)
        small = [leg for i, leg in enumerate(legs) if i != big]
        others = np.unique(np.concatenate([leg.dense for leg in small])) if small else np.empty(0, np.uint64)
        at_b, in_b = _positions(b_sorted, others)
        alone_in_others = others[~in_b]
        size = len(b) + len(alone_in_others)
        if self.strategy == "weighted":
            # every hit's fused score is an array operation: the union in an array, the legs added in their order
            union = np.concatenate([b_sorted, alone_in_others])
            fused = np.zeros(len(union))
            for leg in legs:
                share = self.alpha if leg.name in ("semantic", "purpose") else 1 - self.alpha
                low, high = (float(leg.scores.min()), float(leg.scores.max())) if len(leg) else (0.0, 0.0)
                normal = (leg.scores - low) / (high - low) if high > low else np.ones(len(leg))
                if leg is b:
                    fused[: len(b)] += share * (normal if perm is None else normal[perm])
                else:
                    at, there = _positions(b_sorted, leg.dense)
                    fused[np.where(there, at, len(b) + np.searchsorted(alone_in_others, leg.dense))] += share * normal

            def weighted(n: int) -> tuple[np.ndarray, np.ndarray]:
                at = RK.first(union, fused, n, hi, lo)
                return union[at], fused[at]

            return _Prefix(size, weighted)
        # rrf: the smaller legs ranked whole, the largest only where it matters
        fused_others = np.zeros(len(others))
        b_which = at_b[in_b] if perm is None else perm[at_b[in_b]]  # the others' places in the largest leg
        b_ranks = RK.ranks(b.dense, b.scores, b_which, hi, lo)
        for leg in legs:
            weight = self.weights.get("semantic" if leg.name == "purpose" else leg.name, 1.0)
            if leg is b:
                fused_others[in_b] += weight / (self.k + b_ranks)
            else:
                rank = np.empty(len(leg), dtype=np.int64)
                rank[RK.first(leg.dense, leg.scores, len(leg), hi, lo)] = np.arange(1, len(leg) + 1)
                fused_others[np.searchsorted(others, leg.dense)] += weight / (self.k + rank)
        b_weight = self.weights.get("semantic" if b.name == "purpose" else b.name, 1.0)

        # a hit only the largest leg holds scores weight / (k + its rank): the earlier it ranks, the more, as long as
        # those scores are normal doubles (then consecutive ranks' differ), so the first n such hits are the only
        # ones that may reach the first n places; else (a weight of 0, or one so small its scores lose precision)
        # the largest leg is ranked whole
        strict = b_weight > 0 and b_weight / (self.k + len(b) + 1) >= sys.float_info.min

        def rrf(n: int) -> tuple[np.ndarray, np.ndarray]:
            if strict:
                at = RK.first(b.dense, b.scores, n + len(b_which), hi, lo)
                rank = np.arange(1, len(at) + 1)
                _, held = _positions(others, b.dense[at])
                alone_at, alone_score = b.dense[at[~held]][:n], (b_weight / (self.k + rank[~held]))[:n]
            else:
                rank = np.empty(len(b), dtype=np.int64)
                rank[RK.first(b.dense, b.scores, len(b), hi, lo)] = np.arange(1, len(b) + 1)
                free = np.ones(len(b), dtype=bool)
                free[b_which] = False
                alone, alone_scores = b.dense[free], b_weight / (self.k + rank[free])
                at = RK.first(alone, alone_scores, n, hi, lo)
                alone_at, alone_score = alone[at], alone_scores[at]
            union = np.concatenate([others, alone_at])
            fused = np.concatenate([fused_others, alone_score])
            at = RK.first(union, fused, n, hi, lo)
            return union[at], fused[at]

        return _Prefix(size, rrf)

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


_DEFAULT_FUSION = Fusion()  # rrf, k 60, both weights 1, alpha 0.5: a find that names none


def match_source(dense: int, text: dict[int, float] | None, semantic: dict[int, float] | None) -> str:
    in_text = text is not None and dense in text
    in_semantic = semantic is not None and dense in semantic
    return "both" if in_text and in_semantic else "semantic" if in_semantic else "text"
