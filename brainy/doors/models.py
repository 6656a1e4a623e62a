"""The doors the embedding model answers, not the store: ``embed``, ``embedBatch``, ``similarity`` (DOORS 7).

The path names a brain, for reach, but the store is not opened; the dispatcher runs these on the
embedder's threads (``brainy/index/embedder.py``, :func:`~brainy.index.embedder.run`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from brainy.contract import refusals as R
from brainy.doors.registry import MODEL as ANSWERED_BY_MODEL
from brainy.doors.registry import door
from brainy.index.embedder import MAX_BATCH, MODEL, embed_many, embed_one
from brainy.store.rows import DIMENSIONS, vector_out


@door("embed", ANSWERED_BY_MODEL)
def embed(a: dict[str, Any]) -> dict[str, Any]:
    vector, truncated = embed_one(a["text"])
    return {"vector": vector_out(vector.tobytes()), "dimensions": DIMENSIONS, "model": MODEL, "truncated": truncated}


@door("embedBatch", ANSWERED_BY_MODEL)
def embed_batch(a: dict[str, Any]) -> dict[str, Any]:
    texts = a["texts"]
    if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
        raise R.InvalidArgumentError("texts: a list of strings", field="texts", reason="wrong-type")
    if not 1 <= len(texts) <= MAX_BATCH:
        raise R.InvalidArgumentError(
            f"texts: 1 to {MAX_BATCH} texts, got {len(texts)}", field="texts", reason="out-of-range"
        )
    vectors, truncated = embed_many(texts)
    return {
        "vectors": [vector_out(v.tobytes()) for v in vectors],
        "dimensions": DIMENSIONS,
        "model": MODEL,
        "truncated": truncated,
    }


@door("similarity", ANSWERED_BY_MODEL)
def similarity(a: dict[str, Any]) -> dict[str, Any]:
    vectors, _ = embed_many([a["a"], a["b"]])
    cosine = float(np.dot(vectors[0].astype(np.float64), vectors[1].astype(np.float64)))
    return {"similarity": min(1.0, max(-1.0, cosine)), "model": MODEL}
