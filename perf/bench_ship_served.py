"""Benchmark: a served brain's write throughput with ``--ship sync`` / ``async`` against local only, at 16 concurrent
writers over HTTP/1.1 (issue 36's target: sync at least half of local-only; perf/bench_ship.py measures the same in
process, the engine's commits alone).

    python perf/bench_ship_served.py                     # 3 rounds of 5 s a mode
    python perf/bench_ship_served.py --rounds 4 --seconds 8 --writers 16

Each mode of each round starts its own etcd and one ``brainy serve --fleet`` node (``--fleet-ttl 10``; local-only
is the same node without ``--object-store``, so the fleet's fence is in both), provisions a brain on it, writes 50
entities to warm it, then loads it with h2load: ``--writers`` connections, one ``add`` in flight on each (a
``{"type": "thing"}`` with no id, a new entity each time), for ``--seconds``. The node runs on core 0 (every
thread); h2load, etcd and moto (in this process, ``ThreadedMotoServer``) on core 1, as a store off the box would
be. The modes' order is reversed every other round (a run's later cells go faster than its first). Printed: each
mode's writes a second, and sync and async as a share of local-only by round, with the median.
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "perf"))
sys.path.insert(0, str(ROOT / "tests"))  # the tests' real-process helpers: etcd, moto, a fleet's nodes

from etcd import start_etcd  # noqa: E402
from fleet import call, start_node, write_fleet_keys  # noqa: E402
from measure import H2LOAD, cpu_seconds, h1_writes, pin_process, split_cores  # noqa: E402
from objectstore import start_moto  # noqa: E402
from server import PERSON_KEY, SERVICE_KEY, _stop  # noqa: E402

MODES = ("local", "sync", "async")
BRAIN = "ship"


def run(mode: str, root: Path, keys: Path, body: Path, args: argparse.Namespace, cores: tuple) -> float:
    server, client = cores
    extra: tuple[str, ...] = ()
    if mode != "local":
        extra = ("--object-store", f"s3://brainy-bench-ship/{root.name}", "--ship", mode)
    with start_etcd(root / "etcd") as etcd:
        node = start_node(root, f"n{mode}", etcd.url, keys, ttl=10, extra=extra)
        try:
            pin_process(node.proc.pid, server)
            placed = call(node, "POST", f"/v1/brains/{BRAIN}/provision", b"{}", key=SERVICE_KEY)
            assert placed.status == 200, placed
            add = body.read_bytes()
            for _ in range(50):
                assert call(node, "POST", f"/v1/brains/{BRAIN}/add", add).status == 200
            before = cpu_seconds(node.proc.pid)
            started = time.monotonic()
            rate = h1_writes(
                f"http://127.0.0.1:{node.port}/v1/brains/{BRAIN}/add",
                body,
                PERSON_KEY,
                args.writers,
                args.seconds,
                client,
            )
            busy = (cpu_seconds(node.proc.pid) - before) / (time.monotonic() - started)
        finally:
            _stop(node.proc)
    print(f"  {mode:6s} {rate:8.0f} writes/s   node CPU {busy:4.0%} of a core", flush=True)
    return rate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--writers", type=int, default=16)
    parser.add_argument("--seconds", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3, help="rounds, the modes' order reversed every other one")
    args = parser.parse_args()
    if H2LOAD is None:
        raise SystemExit("h2load is not installed (Debian: nghttp2-client)")
    cores = split_cores()
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # moto's server logs every request
    if cores[1]:
        os.sched_setaffinity(0, cores[1])  # moto's thread, etcd and h2load: off the node's core
    with tempfile.TemporaryDirectory(prefix="bench-ship-served-") as tmp, start_moto() as moto:
        os.environ.update(moto.env)  # the nodes' object store
        root = Path(tmp)
        keys = write_fleet_keys(root / "keys")
        body = root / "add.json"
        body.write_bytes(b'{"type": "thing", "metadata": {"by": "bench"}}')
        print(
            f"{args.writers} writers over HTTP/1.1, {args.seconds:.0f} s a mode; node on {cores[0]}, load on {cores[1]}"
        )
        shares: dict[str, list[float]] = {"sync": [], "async": []}
        for r in range(args.rounds):
            print(f"round {r + 1}")
            rates = {
                mode: run(mode, root / f"{mode}-{r}", keys, body, args, cores)
                for mode in (MODES if r % 2 == 0 else MODES[::-1])
            }
            for mode in shares:
                shares[mode].append(rates[mode] / rates["local"])
        for mode, values in shares.items():
            print(
                f"{mode} / local by round:",
                ", ".join(f"{x:.1%}" for x in values),
                f"(median {statistics.median(values):.1%})",
            )


if __name__ == "__main__":
    main()
