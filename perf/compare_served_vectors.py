"""Vector top-10 over HTTP/1.1: `brainy serve` beside Chroma's server, the same rows and queries, one run.

    python perf/compare_served_vectors.py [--rows 20000] [--requests 4000] [--rounds 3] [--stores DIR]
                                          [--no-chroma] [--chroma-ef 100,256] [--profile]

The rows are perf/bench_vectors.py's ``clustered`` set (unit vectors around n/200 centres, noise 0.35), each
with ``data`` of four words and ``metadata`` {p, m}; the queries are its 200 (a stored vector plus noise
0.1). brainy's store is built once with ``addMany`` of 1,000 and its graph caught up and snapshotted
(``--stores DIR`` keeps it across runs); Chroma's collection gets the same vectors, documents and metadatas
(cosine space, HNSW M 16, efConstruction 128, each ``--chroma-ef`` as efSearch; its default is 100).

Each server runs pinned to core 0 and is loaded from core 1 by h2load (``--h1``, one request in flight per
connection): brainy's ``POST /v1/brains/main/find {"vector": q, "limit": 10}`` (its default answer: each
hit's entity with data and metadata, no vector) and Chroma's ``POST .../collections/{id}/query
{"query_embeddings": [q], "n_results": 10, "include": ["documents", "metadatas", "distances"]}`` (its
default include). h2load sends one body per run: each cell cycles through ``--bodies`` query bodies, the
requests split among them, the latencies pooled. A cell is swept ``--rounds`` times, brainy and Chroma
interleaved, and the quietest round (lowest p50; highest rate at c=64) is shown.

recall@10 is measured over HTTP for every one of the 200 queries against the exact top-10 (numpy, float32)
of the same rows. ``--profile`` also times, in the serving process's way but in this process, the parts of
one brainy request: the JSON body's decode, the index search, the door around it, the answer's encoding.

Measured on the project's box, 20,000 rows, 3 rounds, a quiet box (no other work running), chromadb 1.5.9:

    cell            c   p50 µs   req/s   CPU µs/req   recall@10
    brainy          1      408    2370       379       0.987
    chroma ef100    1    1094      883      1105       0.948
    brainy         64   21266    2822       344
    chroma ef100   64   69388      897      1094

    brainy/chroma: c=1 p50 0.37x; c=64 req/s 3.15x, CPU a request 0.31x

On the box of session 38 (another machine: the same tree, 5c7ba12, took 495 us of CPU a request at c=64, not
344; Chroma's took as before), at its start and after its find-path commits, 3 rounds a run, 20,000 rows:

    tree                 c=1 p50 us   c=64 req/s   CPU us a request (c=64)   against Chroma's c=64 rate
    359f698 (start)      577-673      1,783-1,958   495-544                   2.15x (its one run with Chroma)
    753b6fa              489, 522     2,742, 2,557  354, 379                  3.11x, 2.99x (882, 854 req/s)

Session 39, the same box, the graph walking float16 copies of the slots (6a3c069) beside the tree before
(46720a2), each tree its own store, 3 rounds a run:

    tree      c=1 p50 us      c=64 req/s            CPU us a request (c=64)   against Chroma's c=64 rate
    46720a2   411             2,776                 350                       3.02x (918 req/s)
    6a3c069   371, 393, 383   3,220, 3,323, 3,256   301, 292, 298             3.51x, 3.90x, 3.72x (918, 853, 875)

Where session 38's 150 us a request went: the vector's numbers packed by the body's walk, not made Python floats
(find is in VECTORS_AT); the cursor binding the unit's bytes, not 384 printed numbers; fewer numpy calls a
search (each several us with the caches cold from the graph's walk); the semantic leg alone paged without the
fusion's arrays; the holds of the index and projections by a class, not generators.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import bench_vectors as BV  # noqa: E402
import measure as M  # noqa: E402

CHROMA_INCLUDE = ["documents", "metadatas", "distances"]


def build_brainy(folder: Path, n: int) -> Path:
    """The clustered store of ``n`` rows, its graph caught up and snapshotted (built once into ``folder``)."""
    from brainy.engine import Brain

    path = folder / f"clustered-{n}"
    if not (path / "MANIFEST").exists():
        shutil.rmtree(path, ignore_errors=True)
        x = BV.vectors(n, "clustered")
        took = BV.ingest(path, x)
        print(f"brainy: ingested {n:,} rows in {took:.1f} s", flush=True)
        brain = Brain.open(path)
        brain.find({"vector": x[0].tolist()})
        brain.vector_follower.catch_up()
        brain.close()
    return path


def load_chroma(port: int, x: np.ndarray, ef: int) -> str:
    """A collection of ``x`` with the bench's documents and metadatas, efSearch ``ef``: its id."""
    import random

    import chromadb

    client = chromadb.HttpClient(host="127.0.0.1", port=port)
    name = f"bench_ef{ef}"
    try:
        client.delete_collection(name)
    except Exception:  # noqa: BLE001 - absent the first time
        pass
    coll = client.create_collection(
        name,
        configuration={"hnsw": {"space": "cosine", "ef_construction": 128, "ef_search": ef, "max_neighbors": 16}},
    )
    rnd = random.Random(BV.SEED)
    started = time.perf_counter()
    for s in range(0, len(x), BV.BATCH):
        rows = BV.items(x, s, min(s + BV.BATCH, len(x)), rnd)
        coll.add(
            ids=[str(i) for i in range(s, s + len(rows))],
            embeddings=x[s : s + len(rows)],
            documents=[r["data"] for r in rows],
            metadatas=[r["metadata"] for r in rows],
        )
    print(f"chroma ef{ef}: added {len(x):,} rows in {time.perf_counter() - started:.1f} s", flush=True)
    return str(coll.id)


def exact_top(x: np.ndarray, q: np.ndarray, k: int = 10) -> set[int]:
    s = x @ q
    return set(np.argpartition(-s, k)[:k].tolist())


def post(conn: http.client.HTTPConnection, path: str, body: bytes, headers: dict[str, str]) -> bytes:
    conn.request("POST", path, body, headers)
    answer = conn.getresponse()
    data = answer.read()
    if answer.status != 200:
        raise SystemExit(f"{path}: {answer.status} {data[:300]!r}")
    return data


def brainy_body(q: np.ndarray) -> bytes:
    return json.dumps({"vector": q.tolist(), "limit": 10}).encode()


def chroma_body(q: np.ndarray) -> bytes:
    return json.dumps({"query_embeddings": [q.tolist()], "n_results": 10, "include": CHROMA_INCLUDE}).encode()


def recall_brainy(port: int, x: np.ndarray, qs: np.ndarray) -> tuple[float, int]:
    """recall@10 of brainy's top-10 over the queries against the exact top-10, and the last answer's size."""
    conn = http.client.HTTPConnection("127.0.0.1", port)
    headers = {"authorization": f"Bearer {M.KEY}", "content-type": "application/json"}
    got, size = 0, 0
    for q in qs:
        data = post(conn, "/v1/brains/main/find", brainy_body(q), headers)
        size = len(data)
        found = {hit["entity"]["denseInt"] - 1 for hit in json.loads(data)["results"]}  # row i is dense int i + 1
        got += len(found & exact_top(x, q))
    conn.close()
    return got / (10 * len(qs)), size


def chroma_path(coll: str) -> str:
    return f"/api/v2/tenants/default_tenant/databases/default_database/collections/{coll}/query"


def recall_chroma(port: int, coll: str, x: np.ndarray, qs: np.ndarray) -> tuple[float, int]:
    conn = http.client.HTTPConnection("127.0.0.1", port)
    got, size = 0, 0
    for q in qs:
        data = post(conn, chroma_path(coll), chroma_body(q), {"content-type": "application/json"})
        size = len(data)
        found = {int(i) for i in json.loads(data)["ids"][0]}
        got += len(found & exact_top(x, q))
    conn.close()
    return got / (10 * len(qs)), size


def h2load_run(url: str, headers: list[str], body: bytes, c: int, n: int, cores: set[int] | None, tmp: Path):
    """One h2load run: (the steady requests' milliseconds, their count, the seconds they span). Above one
    connection the connect round (the first request of each connection, the ``c`` earliest) is left out, and
    the rate is the rest over the time from the first of them starting to the last ending: h2load's own figure
    counts the connects (64 of them in a run of a few thousand requests moved it by a fifth)."""
    log = tmp / "h2load.log"
    log.unlink(missing_ok=True)  # h2load appends
    (tmp / "body").write_bytes(body)
    argv = [*M.pinned(cores), M.H2LOAD, "--h1", "-c", str(c), "-n", str(n), "-m", "1", "--log-file", str(log)]
    for header in headers:
        argv += ["-H", header]
    done = subprocess.run([*argv, "-d", str(tmp / "body"), url], capture_output=True, text=True, timeout=600)
    rows = [line.split("\t") for line in log.read_text().splitlines() if line] if log.exists() else []
    if done.returncode != 0 or not rows or any(not r[1].startswith("2") for r in rows):
        raise SystemExit(f"h2load failed on {url}: {done.stdout}{done.stderr}")
    steady = sorted(rows, key=lambda r: int(r[0]))[c if c > 1 else 0 :]
    start = int(steady[0][0])
    end = max(int(r[0]) + int(r[2]) for r in steady)
    return [int(r[2]) / 1000 for r in steady], len(steady), (end - start) / 1e6


def sweep(
    url: str, headers: list[str], bodies: list[bytes], c: int, total: int, cores: set[int] | None, tmp: Path, pid: int
) -> tuple[float, float, float]:
    """(p50 µs, req/s, the server's CPU µs a request) of ``total`` requests split among ``bodies``, ``c``
    connections (the CPU: every thread of the serving process, connects included)."""
    latencies: list[float] = []
    seconds, count, sent = 0.0, 0, 0
    per = max(4 * c, total // len(bodies))
    cpu = M.cpu_seconds(pid)
    for body in bodies:
        lat, n, took = h2load_run(url, headers, body, c, per, cores, tmp)
        latencies += lat
        count += n
        seconds += took
        sent += per
    cpu = M.cpu_seconds(pid) - cpu
    latencies.sort()
    return 1000 * M.nearest_rank(latencies, 50), count / seconds, 1e6 * cpu / sent


def profile(store: Path, qs: np.ndarray) -> None:
    """The parts of one brainy top-10 find, timed in this process (p50 over the 200 queries, a few times)."""
    import orjson

    from brainy.engine import Brain
    from brainy.net import codecs

    brain = Brain.attach(store)
    bodies = [brainy_body(q) for q in qs]
    brain.find(json.loads(bodies[0]))
    for _ in range(200):  # the graph is taken off the first read's path: wait for it
        with brain.at().vectors() as ix:
            if ix._graph is not None:
                break
        time.sleep(0.05)
        brain.find(json.loads(bodies[0]))

    def p50(fn) -> float:
        best = []
        for _ in range(3):
            ts = []
            for i in range(len(qs)):
                t = time.perf_counter()
                fn(i)
                ts.append(time.perf_counter() - t)
            best.append(np.median(ts))
        return 1e6 * min(best)

    docs = [orjson.loads(b) for b in bodies]
    answers = [brain.find(dict(d)) for d in docs]
    with brain.at().vectors() as ix:
        print(f"  index.search (k 10, {ix.search(qs[0], 10)[2]}): {p50(lambda i: ix.search(qs[i], 10)):7.1f} µs")
    decode = codecs.decode
    print(
        f"  body decode ({len(bodies[0]):,} B):        {p50(lambda i: decode(bodies[i], 'application/json')):7.1f} µs"
    )
    print(f"  find door (in process):             {p50(lambda i: brain.find(dict(docs[i]))):7.1f} µs")

    def enc(answer):
        return codecs.encode(answer, False)[0]

    size = len(enc(answers[0]))
    print(f"  answer encode (JSON, {size:,} B):     {p50(lambda i: enc(answers[i])):7.1f} µs")
    brain.close()


def serve(cores: set[int] | None, port: int, store: Path, keys: Path, tree: Path | None) -> subprocess.Popen:
    """`brainy serve` of ``store`` on ``port`` pinned to ``cores``, from this tree or from ``tree``."""
    env = dict(os.environ)
    if tree is not None:
        env["PYTHONPATH"] = str(tree)
    argv = ["serve", "--listen", f"127.0.0.1:{port}", "--brain", f"main={store}", "--keys", str(keys)]
    return subprocess.Popen(
        [*M.pinned(cores), sys.executable, "-m", "brainy.cli", *argv],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
        cwd=store.parent,  # `-m` puts the working directory first on sys.path: it must not hold a brainy
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--requests", type=int, default=4_000, help="requests per cell and round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--bodies", type=int, default=4, help="query bodies each cell cycles through")
    parser.add_argument("--stores", help="build brainy's store once into DIR and reuse it")
    parser.add_argument("--no-chroma", action="store_true")
    parser.add_argument("--chroma-ef", default="100", help="Chroma efSearch values, comma-separated")
    parser.add_argument("--concurrency", default="1,64")
    parser.add_argument("--profile", action="store_true", help="also time the parts of a brainy request")
    parser.add_argument(
        "--before",
        metavar="TREE",
        help="also serve from an earlier brainy source tree (its compiled speedups built in place), on a store "
        "it builds itself: its row follows brainy's in every round",
    )
    args = parser.parse_args()
    server_cores, load_cores = M.split_cores()
    if M.H2LOAD is None:
        raise SystemExit("h2load not found (Debian: nghttp2-client)")
    x = BV.vectors(args.rows, "clustered")
    qs = BV.queries(x)
    folder = Path(args.stores) if args.stores else Path(tempfile.mkdtemp(prefix="brainy-served-vectors-"))
    folder.mkdir(parents=True, exist_ok=True)
    store = build_brainy(folder, args.rows)
    if args.profile:
        profile(store, qs)
    tmp = Path(tempfile.mkdtemp(prefix="served-vectors-run-"))
    keys = tmp / "keys"
    keys.write_text(f"{M.KEY} person:measure *\n")
    keys.chmod(0o600)
    port, chroma_port = M.free_port(), M.free_port()
    procs = [serve(server_cores, port, store, keys, None)]
    before_port = M.free_port()
    if args.before:
        before = Path(args.before).resolve()
        script = "import sys; sys.path.insert(0, sys.argv[1]); import compare_served_vectors as C; C.build_brainy("
        script += "__import__('pathlib').Path(sys.argv[2]), int(sys.argv[3]))"
        subprocess.run(
            [sys.executable, "-c", script, str(HERE), str(folder / "before"), str(args.rows)],
            env={**os.environ, "PYTHONPATH": str(before)},
            check=True,
            cwd=tmp,
        )
        procs.append(serve(server_cores, before_port, folder / "before" / f"clustered-{args.rows}", keys, before))
    chroma = shutil.which("chroma", path=str(Path(sys.executable).parent) + os.pathsep + os.environ["PATH"])
    use_chroma = not args.no_chroma and chroma is not None
    if use_chroma:
        import chromadb

        print(f"chromadb {chromadb.__version__} (`chroma run`, Rust server)")
        procs.append(
            subprocess.Popen(
                [*M.pinned(server_cores), chroma, "run", "--path", str(tmp / "chroma"), "--port", str(chroma_port)],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        )
    if load_cores:
        os.sched_setaffinity(0, load_cores)
    try:
        M.wait_ready(port, 60)
        cells: list[tuple[str, str, list[str], list[bytes], int]] = []
        auth = [f"authorization: Bearer {M.KEY}", "content-type: application/json"]
        picked = np.linspace(0, len(qs) - 1, args.bodies).astype(int)
        brainy_url = f"http://127.0.0.1:{port}/v1/brains/main/find"
        # the first reads load the index and its graph (off the read path): answered before anything is timed
        r, size = recall_brainy(port, x, qs)
        time.sleep(2)
        r, size = recall_brainy(port, x, qs)
        print(f"brainy: recall@10 {r:.3f}, answer {size:,} B")
        cells.append(("brainy", brainy_url, auth, [brainy_body(qs[i]) for i in picked], procs[0].pid))
        if args.before:
            M.wait_ready(before_port, 60)
            recall_brainy(before_port, x, qs)
            time.sleep(2)
            r, size = recall_brainy(before_port, x, qs)
            print(f"brainy before: recall@10 {r:.3f}, answer {size:,} B")
            url = brainy_url.replace(f":{port}/", f":{before_port}/")
            cells.append(("brainy before", url, auth, cells[0][3], procs[1].pid))
        if use_chroma:
            M.wait_ready(chroma_port, 60)
            for ef in [int(e) for e in args.chroma_ef.split(",")]:
                coll = load_chroma(chroma_port, x, ef)
                recall_chroma(port=chroma_port, coll=coll, x=x, qs=qs[:10])
                r, size = recall_chroma(chroma_port, coll, x, qs)
                print(f"chroma ef{ef}: recall@10 {r:.3f}, answer {size:,} B")
                url = f"http://127.0.0.1:{chroma_port}{chroma_path(coll)}"
                bodies = [chroma_body(qs[i]) for i in picked]
                cells.append((f"chroma ef{ef}", url, ["content-type: application/json"], bodies, procs[-1].pid))
        results: dict[tuple[str, int], list[tuple[float, float, float]]] = {}
        for _ in range(args.rounds):
            for c in [int(v) for v in args.concurrency.split(",")]:
                total = args.requests if c == 1 else 2 * args.requests
                for name, url, headers, bodies, pid in cells:
                    run = sweep(url, headers, bodies, c, total, load_cores, tmp, pid)
                    results.setdefault((name, c), []).append(run)
        print(
            f"\n{'cell':<16} {'c':>3} {'p50 µs':>8} {'req/s':>8} {'CPU µs/req':>11}   (quietest of {args.rounds} rounds)"
        )
        best = {
            key: (min(p for p, _, _ in runs), max(r for _, r, _ in runs), min(u for _, _, u in runs))
            for key, runs in results.items()
        }
        for (name, c), (p50, rate, cpu) in best.items():
            print(f"{name:<16} {c:>3} {p50:>8.0f} {rate:>8.0f} {cpu:>11.0f}")
        for c in [int(v) for v in args.concurrency.split(",")]:
            mine = best[("brainy", c)]
            for name, *_ in cells[1:]:
                theirs = best[(name, c)]
                print(
                    f"c={c}: brainy/{name}: p50 {mine[0] / theirs[0]:.2f}x, req/s {mine[1] / theirs[1]:.2f}x, "
                    f"CPU a request {mine[2] / theirs[2]:.2f}x"
                )
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                p.kill()
        shutil.rmtree(tmp, ignore_errors=True)
        if not args.stores:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
