"""Puts blobs into a store's blobs/ folder until killed, printing each address once put() returned.

    python blob_writer.py FOLDER SEED

Each line is ``<address> <size> <seed>``: the content is ``random.Random(seed).randbytes(size)``, so
the test can rebuild it and compare what survives a SIGKILL byte for byte.
"""

import random
import sys
from pathlib import Path

from brainy.store.blobs import BlobStore

folder, seed = Path(sys.argv[1]), int(sys.argv[2])
store = BlobStore(folder, writable=True, seal_bytes=4 << 20)
rng = random.Random(seed)
n = 0
while True:
    size = rng.choice((0, 100, 9000, 70_000, 300_000, 1_500_000))
    content_seed = seed * 1_000_000 + n
    stored = store.put(random.Random(content_seed).randbytes(size))
    print(stored.address, size, content_seed, flush=True)
    n += 1
