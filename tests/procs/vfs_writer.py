"""Writes large files through the writeFile door until killed, printing each answer once the door returned.

    python vfs_writer.py STORE ROUND

Each line is ``<path> <hash> <seed>``; the content is ``tests/test_vfs.py``'s ``vfs_writer_content(seed)``
(1, 3 or 6 MiB of seeded random bytes), so the test rebuilds it and compares what survives a SIGKILL.
"""

import base64
import random
import sys
from pathlib import Path

from brainy.engine import Brain

store, round_ = Path(sys.argv[1]), int(sys.argv[2])
brain = Brain.open(store)
n = 0
while True:
    seed = round_ * 1_000_000 + n
    rng = random.Random(seed)
    data = rng.randbytes(rng.choice((1 << 20, 3 << 20, 6 << 20)))
    path = f"/crash/{round_}/{n}.bin"
    answer = brain.writeFile(
        {"path": path, "content": base64.b64encode(data).decode(), "encoding": "base64", "createParents": True},
        caller="person:crash@example.com",
    )
    print(path, answer["hash"], seed, flush=True)
    n += 1
