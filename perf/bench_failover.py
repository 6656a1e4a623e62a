"""Benchmark: a fleet's two hand-overs, timed on real processes (docs/fleet.md "Planned move", "Failover"; issue 36's
targets: a planned move leaves writes unavailable at most 1 s and loses nothing; a killed owner's brains answer
reads and writes again on another node within TTL + 5 s).

    python perf/bench_failover.py                     # TTL 2 s, 5 moves, then one kill
    python perf/bench_failover.py --ttl 10 --moves 10 --writers 8

Starts moto_server (moto[server]) and etcd (Debian's etcd-server) on loopback ports, and three ``brainy serve
--fleet --object-store --ship sync`` nodes, each in its own directory. One brain is provisioned; ``writers`` threads
write to it through every node in turn (a refused write is sent again, as a client would), for the whole run.

- **Planned move**: ``host.move`` to each other node in turn, ``moves`` times, sent to the third node. For each:
  the door's time, and the longest time no writer had a write acknowledged around it (the write-unavailable
  window as a client sees it).
- **Failover**: the owner is SIGKILLed; printed is how long until a read, then a write, of the brain answer 200
  through a survivor, against TTL + 5 s.

At the end every acknowledged write is read back (batchGet) from the brain's last owner: "lost" must be 0.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HOST = "127.0.0.1"
PERSON_KEY = "bky_bench_failover_person_0123456789abcdefghijkl"
SERVICE_KEY = "bks_bench_failover_service_0123456789"
BRAIN = "bench"


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def request(port: int, method: str, path: str, body: dict | None = None, key: str = PERSON_KEY, timeout: float = 10):
    """(status, document, headers); (0, None, {}) when nothing answered."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(f"http://{HOST}:{port}{path}", data=data, method=method)
    req.add_header("authorization", f"Bearer {key}")
    req.add_header("content-type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as answer:
            return answer.status, _doc(answer.read()), dict(answer.headers)
    except urllib.error.HTTPError as exc:
        return exc.code, _doc(exc.read()), dict(exc.headers)
    except OSError:
        return 0, None, {}


def _doc(body: bytes):
    try:
        return json.loads(body or b"null")
    except ValueError:  # moto's own pages are HTML
        return None


def wait_for(check, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            raise SystemExit(f"not within {seconds} s: {what}")
        time.sleep(0.05)


class Fleet:
    """etcd, moto and three nodes under ``root``."""

    def __init__(self, root: Path, ttl: int) -> None:
        self.root, self.ttl = root, ttl
        self.procs: list[subprocess.Popen[bytes]] = []
        self.ports: dict[str, int] = {}
        self.nodes: dict[str, subprocess.Popen[bytes]] = {}

    def start(self) -> None:
        etcd = shutil.which("etcd") or "/usr/bin/etcd"
        client, peer = free_port(), free_port()
        self.etcd_url = f"http://{HOST}:{client}"
        self._spawn(
            [
                etcd,
                *("--name", "bench", "--data-dir", str(self.root / "etcd")),
                *("--listen-client-urls", self.etcd_url, "--advertise-client-urls", self.etcd_url),
                *(
                    "--listen-peer-urls",
                    f"http://{HOST}:{peer}",
                    "--initial-advertise-peer-urls",
                    f"http://{HOST}:{peer}",
                ),
                *("--initial-cluster", f"bench=http://{HOST}:{peer}"),
            ],
            self.root / "etcd.log",
        )
        moto = shutil.which("moto_server") or str(Path(sys.executable).parent / "moto_server")
        moto_port = free_port()
        self._spawn([moto, "-H", HOST, "-p", str(moto_port)], self.root / "moto.log")
        self.env = dict(
            os.environ,
            AWS_ENDPOINT_URL=f"http://{HOST}:{moto_port}",
            AWS_ACCESS_KEY_ID="bench",
            AWS_SECRET_ACCESS_KEY="bench",
            AWS_DEFAULT_REGION="us-east-1",
            PYTHONPATH=str(ROOT),
        )
        wait_for(lambda: request(moto_port, "GET", "/moto-api/")[0] == 200, 20, "moto answers")
        keys = self.root / "keys"
        keys.write_text(f"{PERSON_KEY}  person:bench  *\n{SERVICE_KEY}  service:operator  !\n")
        keys.chmod(0o600)
        for name in ("a", "b", "c"):
            self.start_node(name)

    def start_node(self, name: str) -> None:
        home = self.root / name
        (home / "brains").mkdir(parents=True, exist_ok=True)
        port = free_port()
        self.ports[name] = port
        self.nodes[name] = self._spawn(
            [
                sys.executable,
                *("-m", "brainy.cli", "serve", "--listen", f"{HOST}:{port}"),
                *("--brains-dir", str(home / "brains"), "--keys", str(self.root / "keys")),
                *("--fleet", self.etcd_url, "--node", name, "--advertise", f"http://{HOST}:{port}"),
                *("--fleet-ttl", str(self.ttl), "--object-store", "s3://brainy-bench-failover", "--ship", "sync"),
            ],
            home / "serve.log",
            cwd=home,
        )
        wait_for(lambda: request(port, "GET", "/contract.json")[0] == 200, 30, f"node {name} answers")

    def _spawn(self, args: list[str], log: Path, cwd: Path | None = None) -> subprocess.Popen[bytes]:
        with open(log, "ab") as out:
            proc = subprocess.Popen(
                args,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=cwd,
                env=getattr(self, "env", None),
            )
        self.procs.append(proc)
        return proc

    def stop(self) -> None:
        for proc in reversed(self.procs):
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    proc.kill()

    def owner(self) -> str:
        for name, port in self.ports.items():
            if self.nodes[name].poll() is None:
                status, doc, _ = request(port, "GET", "/v1/health", key=SERVICE_KEY)
                if status == 200 and BRAIN in doc["fleet"]["brains"]:
                    return name
        return ""


class Writers:
    """``count`` threads writing through every live node in turn; each acknowledgement's time and id."""

    def __init__(self, fleet: Fleet, count: int) -> None:
        self.fleet = fleet
        self.acked: list[tuple[float, str]] = []
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._run, args=(w,), daemon=True) for w in range(count)]

    def _run(self, w: int) -> None:
        i = 0
        while not self.stop.is_set():
            id_ = f"w{w}-{i}"
            for attempt in range(200):
                live = [p for n, p in self.fleet.ports.items() if self.fleet.nodes[n].poll() is None]
                port = live[(i + attempt) % len(live)]
                status, doc, _ = request(port, "POST", f"/v1/brains/{BRAIN}/add", {"type": "thing", "id": id_})
                if status == 200:
                    with self.lock:
                        self.acked.append((time.monotonic(), id_))
                    break
                if doc and doc.get("error", {}).get("name") == "EntityExistsError":
                    break  # an earlier try landed after all
                if self.stop.is_set():
                    return
                time.sleep(0.01)
            i += 1

    def gap(self, start: float, end: float) -> float:
        """The longest time between two acknowledgements (any writer's) from ``start - 1`` to ``end + 1``."""
        with self.lock:
            times = sorted(at for at, _ in self.acked if start - 1 <= at <= end + 1)
        return max((b - a for a, b in zip(times, times[1:])), default=float("inf"))


def fleet_arguments() -> argparse.ArgumentParser:
    """The flags every fleet benchmark takes: ``--ttl`` and ``--keep``."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--ttl", type=int, default=2)
    parser.add_argument("--keep", type=Path, help="run in this (new) folder and keep the nodes' logs there")
    return parser


@contextlib.contextmanager
def running(args: argparse.Namespace) -> Iterator[Fleet]:
    """A started fleet in a temporary folder (``--keep``: that one, kept), stopped at the end."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) if args.keep is None else args.keep
        root.mkdir(parents=True, exist_ok=True)
        fleet = Fleet(root, args.ttl)
        try:
            fleet.start()
            yield fleet
        finally:
            fleet.stop()


def main() -> None:
    parser = fleet_arguments()
    parser.add_argument("--moves", type=int, default=5)
    parser.add_argument("--writers", type=int, default=6)
    args = parser.parse_args()
    with running(args) as fleet:
        status, doc, _ = request(fleet.ports["a"], "POST", f"/v1/brains/{BRAIN}/provision", {}, key=SERVICE_KEY)
        assert status == 200, doc
        writers = Writers(fleet, args.writers)
        for t in writers.threads:
            t.start()
        wait_for(lambda: len(writers.acked) >= 50, 30, "writes acknowledged")
        print(f"3 nodes, --fleet-ttl {args.ttl}, --ship sync, {args.writers} writers through every node")
        windows = []
        for m in range(args.moves):
            owner = fleet.owner()
            to, via = [n for n in ("a", "b", "c") if n != owner]
            if m % 2:
                to, via = via, to
            asked = time.monotonic()
            status, doc, _ = request(fleet.ports[via], "POST", f"/v1/brains/{BRAIN}/move", {"node": to}, SERVICE_KEY)
            answered = time.monotonic()
            assert status == 200, doc
            time.sleep(1.2)  # writes flow again: the window is measured over a second past the answer
            window = writers.gap(asked, answered)
            windows.append(window)
            print(
                f"move {owner} -> {to} (sent to {via}): door {answered - asked:.3f} s, "
                f"no write acknowledged for at most {window:.3f} s, generation {doc['generation']}"
            )
        print(f"planned move: worst window {max(windows):.3f} s (target 1 s)")

        owner = fleet.owner()
        survivor = next(n for n in ("a", "b", "c") if n != owner)
        port = fleet.ports[survivor]
        fleet.nodes[owner].send_signal(signal.SIGKILL)
        fleet.nodes[owner].wait(timeout=10)
        killed = time.monotonic()
        last_id = writers.acked[-1][1]
        wait_for(lambda: request(port, "GET", f"/v1/brains/{BRAIN}/get/{last_id}")[0] == 200, 60, "read again")
        read_at = time.monotonic() - killed
        wait_for(
            lambda: (
                request(port, "POST", f"/v1/brains/{BRAIN}/add", {"type": "thing", "id": f"k{time.time_ns()}"})[0]
                == 200
            ),
            60,
            "written again",
        )
        write_at = time.monotonic() - killed
        print(
            f"failover after SIGKILL of {owner}: reads again in {read_at:.2f} s, writes in {write_at:.2f} s "
            f"(target TTL + 5 = {args.ttl + 5} s)"
        )
        time.sleep(1.0)
        writers.stop.set()
        for t in writers.threads:
            t.join(30)
        ids = [id_ for _, id_ in writers.acked]
        lost = []
        for start in range(0, len(ids), 500):
            status, doc, _ = request(port, "POST", f"/v1/brains/{BRAIN}/batchGet", {"ids": ids[start : start + 500]})
            assert status == 200, doc
            lost += doc["missing"]
        print(f"{len(ids)} writes acknowledged, {len(lost)} lost")


if __name__ == "__main__":
    main()
