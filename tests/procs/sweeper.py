"""Rewrites files in a store under a one-second history horizon, compacting and sweeping the blob packs as it
goes, until killed (tests/test_horizons.py: a SIGKILL mid-sweep loses no referenced content).

    sweeper.py STORE SEED DIE_AT NTH

Each acknowledged write prints ``ACK <path> <content seed> <size> <generation>``: the content is
``random.Random(content seed).randbytes(size)``. Every sweep step the blob store names at DEBUG prints
``MARK <step>``; at the NTH step that starts with DIE_AT the process SIGKILLs itself right there.
"""

from __future__ import annotations

import base64
import logging
import os
import random
import signal
import sys
import time
from pathlib import Path

from brainy.engine import Brain
from brainy.store import horizons as H

store, seed, die_at, nth = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3], int(sys.argv[4])


class Marks(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        step = record.getMessage()
        print(f"MARK {step}", flush=True)
        if step.startswith(die_at):
            self.count += 1
            if self.count == nth:
                os.kill(os.getpid(), signal.SIGKILL)


marks = logging.getLogger("brainy.store.blobs")
marks.addHandler(Marks())
marks.setLevel(logging.DEBUG)
brain = Brain.open(store, compact_at=1000, horizons=H.Horizons.of(history="1s"))
rng = random.Random(seed)
for n in range(10_000):  # bounded; the parent kills it long before
    path = f"/f{rng.randrange(4)}.bin"
    content_seed = seed * 1_000_000 + n
    size = rng.choice((30_000, 90_000, 200_000))
    content = base64.b64encode(random.Random(content_seed).randbytes(size)).decode()
    answer = brain.writeFile({"path": path, "content": content, "encoding": "base64"}, caller="person:sweeper")
    print(f"ACK {path} {content_seed} {size} {answer['generation']}", flush=True)
    if n % 6 == 5:
        brain.flush()
        time.sleep(0.2)
        if brain.compact():
            brain.sweep_blobs(garbage_share=0.3)
