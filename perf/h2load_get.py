"""h2 `get` through h2load, server and load generator pinned to different cores, beside the floors.

    python perf/h2load_get.py [--rows N] [--server-cpu 0] [--client-cpu 1] [--also DIR]

Builds a store (perf/measure.py's), starts `brainy serve` on it pinned to one
core, the h1 floor (perf/floor_server.py: bare uvloop + httptools) and the
h2-library floor (perf/h2lib_floor.py: the `h2` library alone answering 30
bytes) on the same core one after the other, and runs nghttp2's `h2load`
pinned to the other: `-c 1 -n 5000` and `-c 64 -n 20000`, each request's
microseconds read from `--log-file` for the nearest-rank p50 and p99. The
load generator is C on its own core, so the figures are the server's.
``--also DIR`` serves the same store a second time from another source tree
(an export of an earlier commit, its compiled speedups copied in): before and
after in one run.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from measure import KEY, build_store, free_port, nearest_rank, wait_ready  # noqa: E402

RUNS = ((1, 5000), (64, 20000))


def h2load(cpu: int, url: str, connections: int, requests: int, log: Path, h1: bool = False) -> tuple[float, float, float]:
    """(p50 µs, p99 µs, req/s) of one h2load run."""
    command = ["taskset", "-c", str(cpu), "h2load", "-c", str(connections), "-n", str(requests),
               "-H", f"authorization: Bearer {KEY}", f"--log-file={log}", url]
    if h1:
        command.insert(4, "--h1")
    log.unlink(missing_ok=True)  # h2load appends to its log file: each run's figures are its own
    out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    rate = next(float(line.split()[3]) for line in out.splitlines() if line.startswith("finished in"))
    failed = next(line for line in out.splitlines() if line.startswith("requests:"))
    if " 0 failed" not in failed or " 0 errored" not in failed:
        raise SystemExit(f"h2load reports failures: {failed}")
    micros = sorted(int(line.split()[2]) for line in log.read_text().splitlines() if line.strip())
    return nearest_rank(micros, 50), nearest_rank(micros, 99), rate


def serve(command: list[str], cpu: int, port: int, tree: str | None) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=tree) if tree else None
    proc = subprocess.Popen(["taskset", "-c", str(cpu), *command], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env=env, cwd=tree)
    wait_ready(port, 60)
    return proc


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--server-cpu", type=int, default=0)
    parser.add_argument("--client-cpu", type=int, default=1)
    parser.add_argument("--path", default="/v1/brains/main/get/row-7")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds; the quietest is shown")
    parser.add_argument("--also", help="a source tree to serve brainy from as well (before, beside after)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        store = build_store(root, args.rows)
        keys = root / "keys"
        keys.touch(mode=0o600)  # a keys file others may read is refused
        keys.write_text(f"{KEY} person:measure *\n")

        def brainy(copy: str) -> list[str]:
            # each brainy server on its own copy of the store: two on one store would be a leader and a
            # follower, not two of the same server
            shutil.copytree(store, root / copy)
            return [sys.executable, "-m", "brainy.cli", "serve", "--brain", f"main={root / copy}", "--keys", str(keys),
                    "--listen"]

        servers = [  # (command, the source tree it runs from)
            ([sys.executable, str(HERE / "floor_server.py")], None),
            ([sys.executable, str(HERE / "h2lib_floor.py")], None),
            (brainy("now"), None),
        ] + ([(brainy("also"), args.also)] if args.also else [])
        cells = [  # (name, server, path, over HTTP/1.1)
            ("floor h1 (uvloop+httptools)", 0, "/", True),
            ("floor h2 (h2 library alone)", 1, "/", False),
            ("brainy h2 get", 2, args.path, False),
            ("brainy h1 get", 2, args.path, True),
        ] + ([("brainy h2 get (--also)", 3, args.path, False)] if args.also else [])
        procs, ports = [], []
        try:
            for command, tree in servers:
                ports.append(free_port())
                procs.append(serve(command + [f"127.0.0.1:{ports[-1]}" if command[-1] == "--listen" else str(ports[-1])],
                                   args.server_cpu, ports[-1], tree))
            best: dict[tuple[str, int], tuple[float, float, float]] = {}
            for _ in range(args.rounds):  # interleaved: every cell once a round, so a busy spell hits them all
                for name, server, path, h1 in cells:
                    for connections, requests in RUNS:
                        run = h2load(args.client_cpu, f"http://127.0.0.1:{ports[server]}{path}", connections,
                                     requests, root / "log", h1)
                        key = (name, connections)
                        best[key] = min(best.get(key, run), run)  # the quietest round's (lowest p50)
        finally:
            for proc in procs:
                proc.terminate()
                proc.wait(timeout=15)
        print(f"{'cell':<30}{'c':>4}{'n':>7}{'p50 µs':>9}{'p99 µs':>9}{'req/s':>9}")
        for connections, requests in RUNS:
            for name, *_ in cells:
                p50, p99, rate = best[(name, connections)]
                print(f"{name:<30}{connections:>4}{requests:>7}{p50:>9.0f}{p99:>9.0f}{rate:>9.0f}")


if __name__ == "__main__":
    main()
