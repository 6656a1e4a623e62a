"""Benchmark: the host's operating doors on one 20,000-row store: a generation's file set, a backup copy, an
import, and a key minted into a 1,000-line keys file.

    python perf/bench_host.py --fast            # quick look
    python perf/bench_host.py -o host.json      # keep the figures (pyperf compare_to ...)

The manager builds the store once (20,000 ``concept`` rows in commits of 1,000, flushed, then 2,000 more
left in the log) with the model turned off (``BRAINY_EMBED_MODEL_DIR`` at an empty folder), so what is
timed is the host's own work, never inference. What is timed:

- ``snapshot.listing``: the ``snapshot`` door's work on the writer: the file set frozen (the log made
  durable under the maintenance and commit locks, every file opened) and each file's sha256.
- ``persist.copy``: ``host.persist``'s run: the set frozen, copied into an empty folder with every file
  and folder fsynced, and the copy attached to check its generation.
- ``import.jsonl[1000]``: one ``import`` of 1,000 JSON lines (one commit, fsync included).
- ``keys.mint[1000 lines]``: one ``host.mintKey``: the file read and parsed with the new line, the line
  appended and fsynced, the table re-read.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pyperf

from brainy.auth.keys import KeyTable
from brainy.engine import Brain, init_store


def _pass_root(cmd: list[str], args: Any) -> None:
    cmd.extend(["--root", args.root])


def build(store: Path, keys: Path) -> None:
    init_store(store)
    with Brain.open(store) as brain:
        for start in range(0, 22_000, 1_000):
            brain.write(
                "addMany",
                {"items": [{"type": "concept", "data": f"row {i} of the bench"} for i in range(start, start + 1_000)]},
                caller="person:bench",
            )
            if start == 19_000:
                brain.flush()
    lines = "".join(f"bky_bench_key_{i:08d}_abcdefgh  person:p{i}@example.com  store\n" for i in range(1_000))
    fd = os.open(keys, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(lines)


def main() -> None:
    runner = pyperf.Runner(add_cmdline_args=_pass_root)
    runner.argparser.add_argument("--root", help="a directory for the store and the keys file")
    args = runner.parse_args()
    runner.metadata["description"] = "the host's operating doors on a 20,000-row store"
    if not args.worker:
        owned = args.root is None
        args.root = args.root or tempfile.mkdtemp(prefix="brainy-bench-host-")
        if owned:
            atexit.register(shutil.rmtree, args.root, True)
    ROOT = Path(args.root)
    STORE, KEYS = ROOT / "store", ROOT / "keys"
    os.environ["BRAINY_EMBED_MODEL_DIR"] = str(ROOT / "no-model")  # the host's work, never inference
    if not args.worker and not STORE.exists():
        build(STORE, KEYS)
    if not args.worker:  # the manager only spawns workers: it must not hold the writer lease they need
        runner.bench_func("snapshot.listing", lambda: None)
        runner.bench_func("persist.copy", lambda: None)
        runner.bench_func("import.jsonl[1000]", lambda: None)
        runner.bench_func("keys.mint[1000 lines]", lambda: None)
        return
    brain = Brain.open(STORE)
    atexit.register(brain.close)
    copies = iter(range(1 << 30))

    def listing() -> None:
        with brain.hold_files() as files:
            files.listing()

    def persist() -> None:
        target = ROOT / f"copy-{os.getpid()}-{next(copies)}"
        target.mkdir()
        with brain.hold_files() as files:
            files.copy_to(target)
        Brain.attach(target).close()
        shutil.rmtree(target)

    content = "\n".join(json.dumps({"type": "concept", "data": f"imported {i}"}) for i in range(1_000))
    keys = KeyTable.open(KEYS)

    runner.bench_func("snapshot.listing", listing)
    runner.bench_func("persist.copy", persist)
    runner.bench_func(
        "import.jsonl[1000]",
        lambda: brain.write("import", {"format": "jsonl", "content": content}, caller="person:bench"),
    )
    runner.bench_func("keys.mint[1000 lines]", lambda: keys.mint("person:new@example.com", ["store"]))


if __name__ == "__main__":
    main()
