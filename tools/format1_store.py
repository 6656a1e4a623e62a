"""Write tests/data/format1-store: a small store as brainy wrote it before format 2, rows with their vectors inline.

Format 1 (docs/store-format.md, IDENTITY) kept a row's vector inside the row, in the tables and in the log's
put ops. tests/test_row_vectors.py holds the store this writes to what format 2 answers for it, so it must be
written by the code of format 1 itself, not by today's, which splits every row it writes. Regenerate
(developer-only; nothing here runs at test time) from the last tree of format 1:

    git archive 72acddc | tar -x -C /tmp/brainy-format1
    BRAINY_SPEEDUPS=python PYTHONPATH=/tmp/brainy-format1 python tools/format1_store.py tests/data/format1-store

The store: ``alpha``, ``beta``, ``eta`` (each with a vector), ``gamma`` (none) and a relation ``alpha -> beta``
without data (the mean of its endpoints' vectors), an update of alpha's metadata, then a flush (all of it in
one table); then, left in the log above the flushed generation, ``delta`` (a vector), a new vector for beta
(the relation's follows), alpha's metadata again, and gamma removed. The generation set by each step is written
beside it, in ``steps.json``. The files are the generation's file set (``Brain.hold_files``): no lease, no
snapshot of the projections or of the vector index (a cache the open rebuilds).
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np

from brainy.engine import Brain, init_store


def vector(seed: int) -> list[float]:
    """The vector each test row is given: float32 numbers, so the stored bytes are the given ones."""
    return np.random.default_rng(seed).standard_normal(384).astype(np.float32).tolist()


def main(target: Path) -> None:
    steps: dict[str, int] = {}
    with tempfile.TemporaryDirectory() as made:
        root = Path(made) / "store"
        init_store(root)
        brain = Brain.open(root)
        for name, seed in (("alpha", 1), ("beta", 2), ("eta", 7)):
            steps[f"add {name}"] = brain.write("add", {"type": "thing", "id": name, "vector": vector(seed)})[
                "generation"
            ]
        steps["add gamma"] = brain.write("add", {"type": "thing", "id": "gamma", "metadata": {"n": 0}})["generation"]
        relate = brain.write("relate", {"from": "alpha", "to": "beta", "type": "relatedTo"})
        steps["relate"] = relate["generation"]
        steps["alpha n=2"] = brain.write("update", {"id": "alpha", "metadata": {"n": 2}})["generation"]
        brain.flush()
        steps["flushed"] = brain.flushed
        steps["add delta"] = brain.write("add", {"type": "thing", "id": "delta", "vector": vector(4)})["generation"]
        steps["beta vector"] = brain.write("update", {"id": "beta", "vector": vector(22)})["generation"]
        steps["alpha n=3"] = brain.write("update", {"id": "alpha", "metadata": {"n": 3}})["generation"]
        steps["remove gamma"] = brain.write("remove", {"id": "gamma"})["generation"]
        with brain.hold_files() as held:
            shutil.rmtree(target, ignore_errors=True)
            target.mkdir(parents=True)
            held.copy_to(target)
        brain.close()
    for folder in ("log", "sst", "ledger", "locks", "index"):
        (target / folder).mkdir(exist_ok=True)
    steps["relation"] = relate["id"]  # type: ignore[assignment]
    (target / "steps.json").write_text(json.dumps(steps, indent=1) + "\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
