"""SIGKILL a brainy writer with several writer threads in flight, over and over, and read back every
acknowledged write after each kill (the issue "faults at scale"; docs/store-format.md, "The fact log").

    python tools/kill_loop.py [--rounds 1000] [--writers 4] [--seed S] [--store DIR] [--full-every 25]

Each round spawns ``tests/procs/writer.py crash --doors mixed``: one process holding the writer lease, its
threads committing at once through one handle with add, addMany, transact, update, relate, remove, writeFile
and memory.remember (no model: BRAINY_EMBED_MODEL_DIR names an empty directory), on a store tuned so flushes,
compactions and log rotations come every few hundred milliseconds. The round kills it with SIGKILL: at a
random moment of the run (or of the start, or of close()), or right after the maintenance thread named a step
of a flush or a compaction (froze the memtable, wrote the table, swapped the MANIFEST). Then it reopens the
store and checks it against a model of everything the writers printed (tests/crashlaw.py, as
tests/test_crash.py does): every acknowledged commit wholly present at its generation, each commit in doubt
wholly present or wholly absent, the head counting exactly the commits present, each generation recording its
commit, the rows of the round and the counts ledger as the model says; every ``--full-every`` rounds and at
the end, an export of the whole store equal to the whole model. The rounds accumulate on one store.

It exits 1 on the first lost acknowledged write, partial commit or other disagreement, printing the seed and
the round. The seed fixes each round's mode and what the writers commit; the kill's moment is the clock's, so
a rerun with the seed replays the same kind of round, not the same instant.

Run of 2026-xx-xx (2 cores): see the commit that recorded it.
"""

from __future__ import annotations

import argparse
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
for _path in (ROOT, ROOT / "tests"):  # brainy, and the harness the crash tests use
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

import crashlaw as C  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=1000)
    parser.add_argument("--writers", type=int, default=4)
    parser.add_argument("--seed", type=int, default=None, help="random when not given; printed either way")
    parser.add_argument("--store", type=Path, default=None, help="a new directory (default: a temporary one)")
    parser.add_argument("--full-every", type=int, default=25, help="export the whole store every this many rounds")
    parser.add_argument("--feed-retention", help="the writers' --feed-retention (0B: the log trimmed at every flush)")
    args = parser.parse_args(argv)
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1 << 32)
    scratch = Path(tempfile.mkdtemp(prefix="brainy-kill-loop-"))
    store = args.store or scratch / "store"
    if store.exists() and any(store.iterdir()):
        parser.error(f"--store {store}: not empty; the model starts from a new store")
    if store.exists():
        store.rmdir()
    rounds = C.Rounds(
        store,
        scratch / "work",
        seed,
        writers=args.writers,
        doors="mixed",
        full_every=args.full_every,
        feed_retention=args.feed_retention,
    )
    plan = C.modes(random.Random(seed ^ 0x4B11), args.rounds)
    print(f"kill loop: seed {seed}, {args.rounds} rounds, {args.writers} writers, store {store}", flush=True)
    started = time.monotonic()
    i, mode = 0, ""
    try:
        for i, mode in enumerate(plan):
            t0 = time.monotonic()
            acked = rounds.model.acked
            seen = rounds.round(mode, f"seed={seed} round={i} mode={mode}")
            m = rounds.model
            print(
                f"round {i + 1}/{args.rounds} {mode:<7} killed in {seen.inside or '-':<13}"
                f" acked {m.acked} (+{m.acked - acked}), in doubt landed"
                f" {m.landed_in_doubt} lost {m.lost_in_doubt}, kills mid-flush {rounds.mid_flush}"
                f" mid-compaction {rounds.mid_compaction}, head {m.head}, {time.monotonic() - t0:.1f} s",
                flush=True,
            )
        rounds.final(f"seed={seed} final")
    except Exception as exc:  # an assertion of the harness, or an error of the engine: both end the loop
        print(f"\nFAILED at seed={seed} round={i} mode={mode}: {exc!r}", flush=True)
        print(f"reproduce: python tools/kill_loop.py --seed {seed} --writers {args.writers} --rounds {i + 1}")
        print(f"the store is kept at {store}", flush=True)
        return 1
    m = rounds.model
    print(
        f"\n{rounds.done} rounds in {time.monotonic() - started:.0f} s, seed {seed}, {args.writers} writers:"
        f" {m.acked} acknowledged commits read back after their kill, lost 0; {m.landed_in_doubt + m.lost_in_doubt}"
        f" commits in doubt ({m.landed_in_doubt} landed whole, {m.lost_in_doubt} absent whole), partial 0;"
        f" kills mid-flush {rounds.mid_flush}, mid-compaction {rounds.mid_compaction}"
        f" ({', '.join(f'{k} {n}' for k, n in sorted(rounds.inside.items()))});"
        f" aimed kills whose step did not come {dict(rounds.missed) or 0};"
        f" head {m.head}; {rounds.full_rows} rows compared in whole-store exports",
        flush=True,
    )
    print("acknowledged by door: " + ", ".join(f"{door} {n}" for door, n in m.by_door.most_common()), flush=True)
    shutil.rmtree(scratch, ignore_errors=True)  # the work files, and the store unless --store named it
    return 0


if __name__ == "__main__":
    sys.exit(main())
