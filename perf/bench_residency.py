"""Benchmark: a served pool's resident set against the arbiter's budget, across a sweep of many brains.

    python perf/bench_residency.py                          # 1,000 brains, a budget for 50, 3 passes
    python perf/bench_residency.py --brains 200 --hold 20 --passes 2 --stores DIR

The script lays out ``--brains`` stores under one directory (each ``--rows`` documents in one commit, every third
with an explicit 384-number vector; no model: ``BRAINY_EMBED_MODEL_DIR`` names an empty directory), once, and
copies them afresh for each server so every run starts from the same stores. Then:

1. **Sizing.** A probe ``brainy serve --brains-dir`` with an unbounded budget answers the sweep's doors on
   ``--hold`` brains and settles; what the arbiter charges then (``heldBytes`` of ``GET /v1/health``: VmRSS less
   the baseline at start) is the budget, so about ``--hold`` brains fit it.
2. **The sweep.** A fresh server with ``BRAINY_POOL_BUDGET_BYTES`` at that figure; one keep-alive HTTP/1.1
   connection sends, for every brain in turn and ``--passes`` times over: a ``get``, a ``find`` by ``where``, a
   ``find`` by vector and an ``add`` with a vector. After every ``--batch`` brains it samples the server's
   ``/proc/PID/status`` (VmRSS, RssAnon, RssFile) and ``/v1/health``'s pool block.

It prints a curve (the samples, thinned) and the summary: the budget, the peak and the steady share (the median of
the last pass's samples) of what the arbiter charges (VmRSS less the baseline) over the budget, the anonymous and
file-backed parts at the peak, the brains resident at the end and the evictions; then it closes every resident brain
with the close door and prints what the process still holds (what it keeps whatever it serves, and what the
allocator kept of what the brains freed). ``--budget`` skips the probe (the same figure for two runs to compare);
``--env NAME=VALUE`` reaches the servers (``MALLOC_ARENA_MAX=2``, ``PYTHONPATH`` of another tree); ``--log`` keeps
the sweep server's log. Loopback only; every loop is bounded by its count, every wait by a deadline.

Measured on a shared 2-core box: 1,000 brains of 300 rows (100 with vectors), 3 passes (12,000 doors), the budget
64.6 MiB for both runs (``--budget 67747840``: what 50 brains held on 9362913's probe; 58.2 MiB on the new code's),
held = VmRSS less the baseline at start (78.9 MiB):

    ================  =========  ===========  ======================  ==================
    code              peak held  steady held  resident (at the end)   every brain closed
    ================  =========  ===========  ======================  ==================
    9362913 (before)  1,513%     1,186%       573, rising all along   948% (612 MiB)
    71f033f (after)   105%       99%          27 to 50 (27)           72% (46 MiB)
    ================  =========  ===========  ======================  ==================

Before, the arbiter closed one writer at a time, each close a flush with its fsyncs (30-190 ms), while the sweep
admitted a brain every 1-5 ms; a closed brain read through the wire stayed a reference cycle until a full
collection; and every lease kept for an evicted writer had its own heartbeat thread (~21 KB each). After: at the
peak, 96 MiB anonymous and 51 MiB file-backed; with every brain closed, 86 and 40. Tried at the servers' start and not
kept, each within the noise of the row above (2 passes): ``MALLOC_ARENA_MAX=2`` peak 107-108%, every brain closed
86%; ``MALLOC_MMAP_THRESHOLD_=131072`` 104%, 83%; ``PYTHONMALLOC=malloc`` 105%, 89% (the same runs with neither:
104-105%, 83-86%, before the close door gave pages back). With every brain closed, what stays is mostly Python's
small-object arenas, each pinned by a few live objects (59 arenas, 36 MiB in use, 21 MiB free in them), and the
imports and caches the first doors load.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import numpy as np  # noqa: E402

from brainy.engine import Brain, init_store  # noqa: E402

HOST = "127.0.0.1"
PERSON = "bky_residency_bench_person_0001"
OPERATOR = "bks_residency_bench_operator_01"
DIMENSIONS = 384
START_SECONDS = 30.0
REQUEST_SECONDS = 30.0
SETTLE_SECONDS = 3.0  # after the probe's doors: the admissions' background builds land within this
BEHIND_RETRIES = 200  # a find right after admission may refuse ProjectionBehindError (503) while its build runs


# -- the stores ----------------------------------------------------------------------------------------------


def unit_vector(rng: np.random.Generator) -> list[float]:
    v = rng.standard_normal(DIMENSIONS).astype(np.float32)
    v /= np.linalg.norm(v)
    return [float(x) for x in v]


@contextmanager
def no_model() -> Iterator[None]:
    """No embedding model while the stores are written (rows without a vector stay so), wherever this runs: the
    embedder resolves its model per value of ``BRAINY_EMBED_MODEL_DIR``, so the variable is set for the block
    only (a test importing this leaves its process's environment as it found it)."""
    before = os.environ.get("BRAINY_EMBED_MODEL_DIR")
    os.environ["BRAINY_EMBED_MODEL_DIR"] = "/nonexistent-model-dir"
    try:
        yield
    finally:
        if before is None:
            del os.environ["BRAINY_EMBED_MODEL_DIR"]
        else:
            os.environ["BRAINY_EMBED_MODEL_DIR"] = before


def lay_out(root: Path, brains: int, rows: int) -> None:
    """``brains`` stores under ``root`` (kept: a store already there is left as it is), written directly."""
    root.mkdir(parents=True, exist_ok=True)
    for i in range(brains):
        path = root / f"b{i:04d}"
        if (path / "MANIFEST").exists():
            continue
        rng = np.random.default_rng(i)
        init_store(path)
        items = []
        for j in range(rows):
            item: dict[str, Any] = {
                "type": "document",
                "id": f"r{j}",
                "data": f"note {i} {j} word{j % 13} topic{j % 7}",
                "metadata": {"n": j, "kind": "abc"[j % 3]},
            }
            if j % 3 == 0:
                item["vector"] = unit_vector(rng)
            items.append(item)
        with no_model(), Brain.open(path) as brain:
            brain.addMany({"items": items})


def fresh_copy(template: Path, into: Path, brains: int) -> Path:
    """The first ``brains`` stores of ``template``, copied, so a sweep's writes never reach the next run's."""
    if into.exists():
        shutil.rmtree(into)
    into.mkdir(parents=True)
    for i in range(brains):
        shutil.copytree(template / f"b{i:04d}", into / f"b{i:04d}")
    return into


def place_keys(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(f"{PERSON}  person:bench  *\n{OPERATOR}  service:operator  !\n")


# -- the server ----------------------------------------------------------------------------------------------


class Server:
    """One ``python -m brainy.cli serve`` child on a loopback port the kernel picks; stderr pumped into a list."""

    def __init__(self, brains_dir: Path, keys: Path, work: Path, budget: int, extra_env: dict[str, str]) -> None:
        env = {k: v for k, v in os.environ.items() if k not in ("BRAINY_KEYS", "BRAINY_SERVE_ISSUERS")}
        (work / "nomodel").mkdir(parents=True, exist_ok=True)
        env.update(
            {
                "XDG_CONFIG_HOME": str(work / "xdg"),
                "BRAINY_EMBED_MODEL_DIR": str(work / "nomodel"),  # an empty directory: no model runs
                "BRAINY_POOL_BUDGET_BYTES": str(budget),
                "PYTHONPATH": str(HERE.parent) + os.pathsep + env.get("PYTHONPATH", ""),
            }
        )
        env.update(extra_env)
        args = ["serve", "--listen", f"{HOST}:0", "--brains-dir", str(brains_dir), "--keys", str(keys)]
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "brainy.cli", *args],
            cwd=work,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.err: list[str] = []
        self._pump = threading.Thread(target=self._read, daemon=True)
        self._pump.start()
        self.port = self._wait_port()
        self.conn = http.client.HTTPConnection(HOST, self.port, timeout=REQUEST_SECONDS)

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.err.append(line)

    def _wait_port(self) -> int:
        deadline = time.monotonic() + START_SECONDS
        while time.monotonic() < deadline:
            found = re.search(r"listening on 127\.0\.0\.1:(\d+)", "".join(self.err))
            if found:
                return int(found[1])
            if self.proc.poll() is not None:
                break
            time.sleep(0.02)
        raise SystemExit(f"the server did not start; stderr:\n{''.join(self.err)[-3000:]}")

    def request(self, method: str, path: str, key: str, body: Any = None) -> tuple[int, dict[str, Any]]:
        """One exchange on the kept-alive connection (reconnecting once if the server closed it)."""
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Authorization": f"Bearer {key}"}
        if data is not None:
            headers["Content-Type"] = "application/json"
        for attempt in range(2):
            try:
                self.conn.request(method, path, body=data, headers=headers)
                response = self.conn.getresponse()
                raw = response.read()
                return response.status, json.loads(raw) if raw else {}
            except (http.client.HTTPException, ConnectionError):
                self.conn.close()
                if attempt:
                    raise
        raise AssertionError("unreachable")

    def status(self) -> dict[str, int]:
        """VmRSS, RssAnon, RssFile and RssShmem of the server, in bytes."""
        out = {}
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            name, _, rest = line.partition(":")
            if name in ("VmRSS", "RssAnon", "RssFile", "RssShmem"):
                out[name] = int(rest.split()[0]) * 1024
        return out

    def pool(self) -> dict[str, Any]:
        status, doc = self.request("GET", "/v1/health", OPERATOR)
        assert status == 200, doc
        return doc["pool"]

    def evictions(self) -> int:
        return sum(" evicted (" in line for line in list(self.err))

    def stop(self) -> int:
        self.conn.close()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait(10)
        finally:
            self._pump.join(5)
            if self.proc.stderr is not None:
                self.proc.stderr.close()


# -- the sweep -----------------------------------------------------------------------------------------------


@dataclass
class Sample:
    doors: int
    held: int  # VmRSS less the arbiter's baseline: what it charges
    rss: int
    anon: int
    file: int
    resident: int
    arbiter_held: int  # heldBytes as /v1/health reports it (the arbiter's own figure)
    pass_: int


@dataclass
class Result:
    budget: int
    baseline: int
    samples: list[Sample] = field(default_factory=list)
    doors: int = 0
    behind: int = 0  # finds refused ProjectionBehindError and asked again
    evictions: int = 0
    seconds: float = 0.0
    closed: Sample | None = None  # once every brain was closed after the sweep

    @property
    def peak(self) -> Sample:
        return max(self.samples, key=lambda s: s.held)

    def steady(self) -> float:
        """The median share over the last pass's samples."""
        last = max(s.pass_ for s in self.samples)
        return statistics.median(s.held for s in self.samples if s.pass_ == last) / self.budget


def brain_doors(server: Server, name: str, stamp: str, rows: int, rng: np.random.Generator) -> tuple[int, int]:
    """The sweep's four doors on one brain; answers (doors answered, finds asked again)."""
    base = f"/v1/brains/{name}"
    status, doc = server.request("GET", f"{base}/get/r{int(rng.integers(rows))}", PERSON)
    assert status == 200, (name, status, doc)
    again = 0
    for query in (
        {"where": {"kind": "abc"[int(rng.integers(3))]}, "limit": 10},
        {"vector": unit_vector(rng), "searchMode": "vector", "limit": 5},
    ):
        for _ in range(BEHIND_RETRIES):
            status, doc = server.request("POST", f"{base}/find", PERSON, query)
            if status != 503:
                break
            assert doc["error"]["name"] == "ProjectionBehindError", doc
            again += 1
            time.sleep(0.01)
        assert status == 200, (name, status, doc)
    item = {"type": "document", "id": stamp, "data": f"sweep {stamp}", "vector": unit_vector(rng)}
    status, doc = server.request("POST", f"{base}/add", PERSON, item)
    assert status == 200, (name, status, doc)
    return 4, again


def sample(server: Server, baseline: int, doors: int, pass_: int) -> Sample:
    st = server.status()
    pool = server.pool()
    return Sample(
        doors, st["VmRSS"] - baseline, st["VmRSS"], st["RssAnon"], st["RssFile"], len(pool["resident"]),
        pool["heldBytes"], pass_,
    )  # fmt: skip


def probe_budget(brains_dir: Path, keys: Path, work: Path, hold: int, rows: int, extra_env: dict[str, str]) -> int:
    """What the arbiter charges once ``hold`` brains have answered the sweep's doors and settled."""
    server = Server(brains_dir, keys, work, 1 << 40, extra_env)
    try:
        rng = np.random.default_rng(7)
        for i in range(hold):
            brain_doors(server, f"b{i:04d}", f"probe{i}", rows, rng)
        time.sleep(SETTLE_SECONDS)
        pool = server.pool()
        assert len(pool["resident"]) == hold, pool["resident"]
        return int(pool["heldBytes"])
    finally:
        server.stop()


def sweep(
    brains_dir: Path,
    keys: Path,
    work: Path,
    budget: int,
    brains: int,
    passes: int,
    batch: int,
    rows: int,
    extra_env: dict[str, str],
    log_to: Path | None = None,
) -> Result:
    server = Server(brains_dir, keys, work, budget, extra_env)
    try:
        first = server.pool()
        result = Result(budget, int(first["derivation"]["baselineBytes"]))
        assert first["budgetBytes"] == budget, first
        rng = np.random.default_rng(11)
        started = time.perf_counter()
        for p in range(passes):
            for i in range(brains):
                doors, again = brain_doors(server, f"b{i:04d}", f"s{p}-{i}", rows, rng)
                result.doors += doors
                result.behind += again
                if (i + 1) % batch == 0 or i == brains - 1:
                    result.samples.append(sample(server, result.baseline, result.doors, p))
        result.seconds = time.perf_counter() - started
        time.sleep(SETTLE_SECONDS)  # the arbiter's last passes
        result.samples.append(sample(server, result.baseline, result.doors, passes - 1))
        result.evictions = server.evictions()
        # every brain closed (the close door): what stays is what the process keeps whatever it serves, and
        # what the allocator kept of what the brains freed
        for name in server.pool()["resident"]:
            status, doc = server.request("POST", f"/v1/brains/{name}/close", OPERATOR)
            assert status == 200, (name, status, doc)
        time.sleep(SETTLE_SECONDS)
        result.closed = sample(server, result.baseline, result.doors, passes)
    except AssertionError:
        faults = [line for line in server.err if " ERROR " in line or line.startswith((" ", "Traceback"))]
        print("".join(faults[-60:]), file=sys.stderr)
        raise
    finally:
        code = server.stop()
        if log_to is not None:
            log_to.write_text("".join(server.err))
    assert code == 0, f"the server exited {code}; stderr:\n{''.join(server.err)[-3000:]}"
    return result


def report(result: Result, curve_lines: int = 24) -> None:
    mib = 1 << 20
    b = result.budget
    print(f"  budget {b / mib:.1f} MiB, baseline (VmRSS at start) {result.baseline / mib:.1f} MiB")
    print("  doors   held%   VmRSS MiB  RssAnon  RssFile  resident")
    step = max(1, len(result.samples) // curve_lines)
    shown = result.samples[::step]
    if shown[-1] is not result.samples[-1]:
        shown.append(result.samples[-1])
    for s in shown:
        print(
            f"  {s.doors:6d}  {s.held / b:5.0%}  {s.rss / mib:9.1f}  {s.anon / mib:7.1f}  {s.file / mib:7.1f}  "
            f"{s.resident:8d}"
        )
    peak = result.peak
    print(
        f"  peak held {peak.held / b:.0%} of the budget at door {peak.doors} (anon {peak.anon / mib:.1f} MiB, "
        f"file {peak.file / mib:.1f} MiB); steady (median of the last pass) {result.steady():.0%}; "
        f"{result.samples[-1].resident} resident at the end; {result.evictions} evictions; "
        f"{result.doors} doors in {result.seconds:.0f} s ({result.behind} finds asked again)",
        flush=True,
    )
    if result.closed is not None:
        c = result.closed
        print(
            f"  every brain closed: held {c.held / b:.0%} of the budget ({c.held / mib:.1f} MiB; anon "
            f"{c.anon / mib:.1f} MiB, file {c.file / mib:.1f} MiB)",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--brains", type=int, default=1000)
    parser.add_argument("--hold", type=int, default=50, help="the budget, in brains")
    parser.add_argument("--passes", type=int, default=3)
    parser.add_argument("--batch", type=int, default=25, help="brains between two samples")
    parser.add_argument("--rows", type=int, default=300)
    parser.add_argument("--stores", help="where the template stores are laid out (once; kept)")
    parser.add_argument("--budget", type=int, help="the budget in bytes, instead of probing --hold brains")
    parser.add_argument("--log", help="write the sweep's server log (stderr) here")
    parser.add_argument("--env", action="append", default=[], metavar="NAME=VALUE", help="for the servers")
    args = parser.parse_args()
    extra_env = dict(e.split("=", 1) for e in args.env)
    work = Path(tempfile.mkdtemp(prefix="brainy-bench-residency-"))
    try:
        template = Path(args.stores) if args.stores else work / "template"
        started = time.perf_counter()
        lay_out(template, args.brains, args.rows)
        print(f"  {args.brains} brains of {args.rows} rows laid out in {time.perf_counter() - started:.1f} s")
        keys = work / "keys"
        place_keys(keys)
        budget = args.budget
        if budget is None:
            budget = probe_budget(
                fresh_copy(template, work / "brains", args.hold), keys, work, args.hold, args.rows, extra_env
            )
            print(f"  {args.hold} brains held {budget:,} bytes: the budget", flush=True)
        brains_dir = fresh_copy(template, work / "brains", args.brains)
        log = Path(args.log) if args.log else None
        report(sweep(brains_dir, keys, work, budget, args.brains, args.passes, args.batch, args.rows, extra_env, log))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
