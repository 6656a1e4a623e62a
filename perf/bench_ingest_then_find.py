"""Measure: on a served writer, five ``addMany`` batches of 1,000 rows with vectors into a new brain, then 30
``find {vector, limit: 10}`` in the requests right after: how many answer ``503 ProjectionBehindError`` (the
read-your-writes law says none may: the rows are the writer's own).

    python perf/bench_ingest_then_find.py                        # this tree
    python perf/bench_ingest_then_find.py --tree /path/to/other  # another checkout, beside it in the run

Each tree serves a fresh store (``brainy serve`` from that tree, no model: the vectors are given) over one
keep-alive HTTP/1.1 connection; three runs per tree, the counts summed. Loopback only; bounded by its counts.

Measured (2 shared cores), this tree beside 9362913's parent, the tree before read-your-writes:

    before (9362913^)   14 of 90 finds answered 503 ProjectionBehindError
    after               0 of 90
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))
sys.path.insert(0, str(HERE.parent))

from server import H1Client, start_server  # noqa: E402


def unit(rng: random.Random) -> list[float]:
    v = [rng.gauss(0, 1) for _ in range(384)]
    n = sum(x * x for x in v) ** 0.5
    return [x / n for x in v]


def run(tree: Path, scratch: Path, seed: int) -> tuple[int, int]:
    rng = random.Random(seed)
    env = {"PYTHONPATH": str(tree), "BRAINY_EMBED_MODEL_DIR": str(scratch / "no-model")}
    (scratch / "no-model").mkdir(exist_ok=True)
    behind = asked = 0
    with (
        start_server(scratch / f"s{seed}-{abs(hash(str(tree)))}", env_extra=env) as server,
        H1Client(server.address) as client,
    ):
        headers = (("Authorization", f"Bearer {server.key}"), ("Content-Type", "application/json"))
        for batch in range(5):
            items = [{"id": f"p{batch}-{i}", "type": "product", "vector": unit(rng)} for i in range(1000)]
            client.send(
                H1Client.request("POST", server.path("addMany"), json.dumps({"items": items}).encode(), headers)
            )
            assert client.read_answer().status == 200
        for _ in range(30):
            body = json.dumps({"vector": unit(rng), "limit": 10}).encode()
            client.send(H1Client.request("POST", server.path("find"), body, headers))
            answer = client.read_answer()
            asked += 1
            behind += answer.status == 503
            assert answer.status in (200, 503), answer.status
    return behind, asked


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", action="append", default=[], help="another checkout to measure beside this one")
    args = parser.parse_args()
    trees = [HERE.parent, *(Path(t).resolve() for t in args.tree)]
    scratch = Path(tempfile.mkdtemp(prefix="brainy-ingest-find-"))
    totals = {str(t): [0, 0] for t in trees}
    for seed in range(3):
        for tree in trees:
            behind, asked = run(tree, scratch, seed)
            totals[str(tree)][0] += behind
            totals[str(tree)][1] += asked
    for tree, (behind, asked) in totals.items():
        print(f"{tree}: {behind} of {asked} finds answered 503 ProjectionBehindError")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
