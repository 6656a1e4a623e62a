"""Benchmark: write throughput of one brain with its commits shipped (``--ship sync`` / ``async``) against local
only, at 16 concurrent writers (docs/fleet.md "--ship sync and --ship async"; issue 36's target: sync at least
half of local-only).

    python perf/bench_ship.py                       # starts moto_server (moto[server]) on a loopback port
    python perf/bench_ship.py --writers 16 --seconds 5
    python perf/bench_ship.py --rounds 4            # the modes' order reversed every other round: a fair ratio

Each mode gets a fresh brain; ``writers`` threads each commit ``add`` (a small entity) for ``seconds``, one
write at a time, as a served brain's fsync workers do. Printed: commits per second, and for the shipping modes
the uploads made (a sync upload carries every commit durable when it starts: group commit). moto runs in a
process of its own, so its cost is not on this process's GIL; it is slower than S3 per put in CPU, faster in
latency (loopback).

Measured (2 shared cores, another job's test suite on them; runs vary by a third), sync as a share of local-only,
before and after an upload takes the frames still in their local fsync too (their fsync and the upload
overlap), four interleaved rounds each: before 41%, 28%, 36%, 38% (mean 36%); after 56%, 41%, 49%, 43% (mean
47%). An upload to moto on loopback takes about 5 ms, a group about 8 commits. On a quiet box afterwards, five
runs: 51%, 51%, 46%, 47%, 48% (mean 49%); with two uploads in flight (``PIPELINE = 2``) 38% and 41%, its groups
of 4.7 commits.

Then an upload that lands waits for the writers it released (brainy/fleet/shipping.py ``GROUP_WAIT_MAX``): with
16 writers the groups were two cohorts taking turns, 7.8-8.0 commits a segment. Three runs each on a quiet box,
before: 50.1%, 50.4%, 49.8% of local-only (2,055, 2,057, 2,012 commits/s; 7.9 a segment); after: 54.5%, 54.7%,
54.9% (2,324, 2,149, 2,275 commits/s; 13.8-14.0 a segment). moto's CPU went from 0.56 to 0.38 cores (fewer puts).

Then a write about to wait for its local fsync starts the upload itself once its group has formed
(``Shipper.early``), so the upload and the fsync overlap. Six interleaved runs of each tree (load average 1.2-1.7):
before 54.0, 49.9, 47.8, 54.5, 51.3, 48.9% (mean 51.1%); after 57.4, 52.8, 53.7, 54.6, 50.0, 54.4% (mean 53.8%),
14.1-14.8 commits a segment either way. With one writer, 228 and 221 against 236 and 225 commits/s: its upload
(about 4 ms to moto, a new connection each) is most of a commit, and the fsync it overlaps is 0.4 ms. An upload
alone to moto takes 2.6 ms (p50); the rest of a 16-writer round is the writers' commits and moto's CPU on the same
two cores.

Session 31: ``--rounds`` runs the modes again with their order reversed every other round, each round's brains
fresh and named apart. Local-only ran first in every run before, and the later modes of a run go faster than its
first (local-only 2,035 -> 2,770 commits/s over four rounds of one run): run first, local-only was the slower side
of the ratio. Three runs of the old order that day: 50.5%, 50.7%, 54.7%; four rounds reversed every other one:
48.3%, 48.6%, 43.7%, 46.1% (median 47.2%), 14.0-14.3 commits a segment.

Session 32: with the object store's calls framed in one piece and read by httptools (0.4 ms of CPU a put
against 0.6), four rounds: 54.1, 48.1, 49.6, 44.3% (median 48.8%). A round here is the group's commits (about
5 ms of the GIL for 14) then the upload (about 6 ms to moto beside them), in turn. perf/bench_ship_served.py
measures the same through a served node, where a write costs the node about three times a commit here: sync
59.0% and 60.4% of local-only (medians of four rounds).
"""

from __future__ import annotations

import argparse
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from brainy.engine import Brain, init_store  # noqa: E402
from brainy.fleet import objects as O  # noqa: E402
from brainy.fleet.objectstore import ObjectStore  # noqa: E402
from brainy.fleet.shipping import ASYNC, SYNC, Courier, Shipper  # noqa: E402


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(mode: str, store: ObjectStore | None, root: Path, writers: int, seconds: float, round_: int = 0) -> float:
    """Commits a second of one mode on a fresh brain (printed with its uploads)."""
    path = root / f"{mode}-{round_}"
    init_store(path)
    done = [0] * writers
    with Brain.open(path, name="bench") as brain:
        shipper = courier = None
        if store is not None:
            name = f"bench-{mode}-{round_}"  # a brain of its own each round: a name reused would find its segments
            shipper = Shipper(store, name, 1, brain.head, lambda: None, SYNC if mode == SYNC else ASYNC)
            brain.commits.shipping = shipper
            if mode == ASYNC:
                courier = Courier(1.0)
                courier.add(shipper)
        stop = time.monotonic() + seconds

        def writer(w: int) -> None:
            i = 0
            while time.monotonic() < stop:
                brain.write("add", {"type": "thing", "id": f"w{w}-{i}"}, caller="person:bench")
                i += 1
            done[w] = i

        threads = [threading.Thread(target=writer, args=(w,)) for w in range(writers)]
        started = time.monotonic()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        elapsed = time.monotonic() - started
        if courier is not None:
            courier.stop()
        total = sum(done)
        line = f"{mode:6s} {total / elapsed:8.0f} commits/s  ({total} in {elapsed:.1f} s)"
        if shipper is not None:
            line += f"  uploads {shipper.uploads} ({total / max(shipper.uploads, 1):.1f} commits each)"
        print(line, flush=True)
        return total / elapsed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--writers", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=1, help="rounds, the modes' order reversed every other one")
    args = parser.parse_args()
    binary = shutil.which("moto_server") or str(Path(sys.executable).parent / "moto_server")
    port = _free_port()
    proc = subprocess.Popen(
        [binary, "-H", "127.0.0.1", "-p", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        for _ in range(100):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/moto-api/", timeout=0.5)
                break
            except OSError:
                time.sleep(0.1)
        env = {
            "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}",
            "AWS_ACCESS_KEY_ID": "bench",
            "AWS_SECRET_ACCESS_KEY": "bench",
            "AWS_DEFAULT_REGION": "us-east-1",
        }
        store = ObjectStore.from_url("s3://brainy-bench-ship", env)
        store.create_bucket()
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            print(f"{args.writers} writers, {args.seconds:.0f} s each")
            ratios = []
            for r in range(args.rounds):
                rates = {}
                for mode in ("local", SYNC, ASYNC) if r % 2 == 0 else (ASYNC, SYNC, "local"):
                    rates[mode] = run(mode, None if mode == "local" else store, root, args.writers, args.seconds, r)
                ratios.append(rates[SYNC] / rates["local"])
            print(
                "sync / local by round:",
                ", ".join(f"{x:.1%}" for x in ratios),
                f"(median {statistics.median(ratios):.1%})",
            )
        name = "bench-sync-0"
        print(f"segments stored ({name}): {len(O.read_listing(name, store.list(O.brain_prefix(name))).segments)}")
    finally:
        proc.terminate()
        proc.wait(timeout=10)


if __name__ == "__main__":
    main()
