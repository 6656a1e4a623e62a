"""Benchmark: the embedder, and ingest with server-side embedding.

    python perf/bench_embed.py -p 2 -n 2 -w 0 -o embed.json   # what the figures below came from
    python perf/bench_embed.py --fast                         # quick look

Cells (in process, the model loaded before any clock starts):

- ``embed.one``: one sentence through the ``embed`` door's function (tokenize, run, pool, normalise).
- ``embedBatch[64]``: 64 distinct sentences through ``embedBatch``'s.
- ``ingest.embedded[20000]``: 20,000 distinct texts stored by ``addMany`` in commits of 500 items,
  each commit through ``awrite`` as the server runs it: the texts embedded in one batch on the
  embedder's threads, then the commit, durable (fsynced) before the next. Records/s = 20,000 / t.
- ``ingest.given-vectors[20000]``: the same rows in the same commits with their vectors given
  (made once by the master process and handed to the workers in a file), so no model runs: the
  commit path's share of the ingest above. commit fraction = this / ``ingest.embedded``.

Measured on the 2-core box shared with other work (load average about 3), ``-p 2 -n 2 -w 0``:
embed.one 4.19 ms +- 0.62; embedBatch[64] 343 ms +- 35 (5.4 ms a text, texts of 25 to 30 tokens);
ingest.embedded[20000] 81.5 s +- 0.7 (245 records/s, the model's own batched speed on one core);
ingest.given-vectors[20000] 1.49 s +- 0.06 (13,400 records/s): the commit is 1.8% of the ingest.
"""

from __future__ import annotations

import asyncio
import atexit
import os
import random
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np
import pyperf

from brainy.doors import models
from brainy.engine import Brain, init_store
from brainy.index import embedder

RECORDS = 20_000
PER_COMMIT = 500
BATCH = 64
VECTORS_ENV = "BRAINY_BENCH_EMBED_VECTORS"

_dir: Path | None = None
_open: list[Brain] = []
_cache: dict[str, object] = {}


def _cleanup() -> None:
    for brain in _open:
        brain.close()
    if _dir is not None:
        shutil.rmtree(_dir, ignore_errors=True)


def new_brain() -> Brain:
    global _dir
    if _dir is None:
        _dir = Path(tempfile.mkdtemp(prefix="brainy-bench-embed-"))
        atexit.register(_cleanup)
    path = _dir / f"b{len(_open)}"
    init_store(path)
    brain = Brain.open(path)
    _open.append(brain)
    return brain


def texts(n: int) -> list[str]:
    """Distinct sentences shaped like what agents store: a few clauses, 12 to 20 words."""
    rng = random.Random(11)
    who = ["Acme", "Globex", "Initech", "Umbrella", "Hooli", "Stark", "Wayne", "Wonka"]
    what = [
        "the quarterly report",
        "a signed contract",
        "the invoice",
        "a demo",
        "the migration plan",
        "new pricing",
        "the security review",
        "a status update",
    ]
    when = ["by Friday", "next Tuesday", "before the board meeting", "end of month", "this afternoon"]
    then = ["follow up with Dana", "loop in legal", "check the budget", "book a room", "send the draft"]
    return [
        f"Note {i}: {rng.choice(who)} wants {rng.choice(what)} {rng.choice(when)}; "
        f"{rng.choice(then)} and {rng.choice(then)}."
        for i in range(n)
    ]


def items(with_vectors: bool) -> list[list[dict]]:
    """The ingest's commits: RECORDS rows in commits of PER_COMMIT items."""
    data = texts(RECORDS)
    rows = [{"type": "document", "data": text} for text in data]
    if with_vectors:
        vectors = np.load(os.environ[VECTORS_ENV]) if os.environ.get(VECTORS_ENV) else embedder.embed_many(data)[0]
        for row, vector in zip(rows, vectors):
            row["vector"] = vector.tolist()
    return [rows[i : i + PER_COMMIT] for i in range(0, RECORDS, PER_COMMIT)]


def time_embed_one(loops: int) -> float:
    embed = models.embed
    doc = {"text": "what do I know about the customer's deadline?"}
    embed(doc)
    t0 = time.perf_counter()
    for _ in range(loops):
        embed(doc)
    return time.perf_counter() - t0


def time_embed_batch(loops: int) -> float:
    batch = models.embed_batch
    doc = {"texts": texts(BATCH)}
    batch(doc)
    t0 = time.perf_counter()
    for _ in range(loops):
        batch(doc)
    return time.perf_counter() - t0


def time_ingest(with_vectors: bool):
    def run(loops: int) -> float:
        commits = items(with_vectors)
        embedder.shared()  # the model's load is not the ingest's
        total = 0.0
        for _ in range(loops):
            brain = new_brain()

            async def ingest() -> None:
                for batch in commits:
                    await brain.awrite("addMany", {"items": batch}, caller="person:bench")

            t0 = time.perf_counter()
            asyncio.run(ingest())
            total += time.perf_counter() - t0
            assert brain.counts()["vectoredEntities"] == RECORDS
        return total

    return run


def shared_vectors() -> None:
    """The given-vectors cell's vectors, embedded once by the master and read by every worker."""
    if os.environ.get(VECTORS_ENV):
        return
    folder = Path(tempfile.mkdtemp(prefix="brainy-bench-vectors-"))
    atexit.register(shutil.rmtree, folder, True)
    path = folder / "vectors.npy"
    np.save(path, embedder.embed_many(texts(RECORDS))[0])
    os.environ[VECTORS_ENV] = str(path)


def main() -> None:
    runner = pyperf.Runner()
    args = runner.parse_args()
    runner.metadata["description"] = "brainy embedder: all-MiniLM-L6-v2 int8 on onnxruntime, and embedded ingest"
    runner.metadata["records"] = str(RECORDS)
    if not args.worker:
        shared_vectors()
    runner.args.inherit_environ = (runner.args.inherit_environ or []) + [VECTORS_ENV]
    runner.bench_time_func("embed.one", time_embed_one)
    runner.bench_time_func(f"embedBatch[{BATCH}]", time_embed_batch)
    runner.bench_time_func(f"ingest.embedded[{RECORDS}]", time_ingest(False))
    runner.bench_time_func(f"ingest.given-vectors[{RECORDS}]", time_ingest(True))


if __name__ == "__main__":
    main()
