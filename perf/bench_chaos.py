"""Benchmark: a fleet under load while its nodes are killed (docs/fleet.md "Failover"): three nodes, many brains,
a mixed load for a minute, one node SIGKILLed and started again every 15 seconds.

    python perf/bench_chaos.py                                  # 3 nodes, 300 brains, 60 s, a kill every 15 s
    python perf/bench_chaos.py --brains 30 --seconds 30 --keep /tmp/chaos   # smaller, logs kept

Starts moto_server and etcd on loopback ports and three ``brainy serve --fleet --object-store --ship sync`` nodes
(perf/bench_failover.py's ``Fleet``). ``--brains`` brains are provisioned through the nodes in turn, then
``--clients`` threads each send one request at a time, for ``--seconds``: an ``add`` with an id of its own (60%),
a ``get`` of an id acknowledged before (25%), a ``find`` (15%), each to a brain and a node picked at random. A client
whose node does not answer (it was killed under the request), or whose node answers that the owner it forwarded
the request to did not (``InternalError``: killed under it), sends the same request to another node; an ``add``
answered ``EntityExistsError`` on such a second try had landed, and counts as acknowledged.

Every ``--kill-every`` seconds the next node in turn (a, b, c, ...) is SIGKILLed and started again at once, in the
same folder under the same name: its brains fail over to the other two, and it comes back holding none of them.

Printed: the answers by status and refusal name (the target: every answer a 200 but those of a node killed under
the request; a hand-over is waited out inside the fleet, bounded by the TTL plus 5 s); the longest a request took;
and, once the load has stopped and every brain is served again, every acknowledged write read back through one
node (batchGet): "lost" must be 0.

Measured on the 2-core development machine (nothing else running), TTL 2 s, 16 clients, kills at 15, 30, 45 s:

    answers 200                                        11,890
    requests whose node was killed or down (resent)        69
    waits that ran out (BrainMovedError, ask again)        23
    forwarded writes whose owner was killed under them     14   (InternalError; resent by the client)
    writes acknowledged / lost                          7,269 / 0
    CPU seconds: etcd 11.5, moto 55.8, nodes 2.6-6.2 (since their last start)

Since a forwarded write carries an id and the edge sends it again to the next owner (docs/fleet.md "A write
sent twice"), the same run (session 19, quiet box) answers no InternalError:

    answers 200                                        11,002
    requests whose node was killed or down (resent)        45   (11 adds had landed: EntityExistsError)
    waits that ran out (BrainMovedError, ask again)        26
    writes acknowledged / lost                          6,724 / 0
    CPU seconds: etcd 11.8, moto 54.8, nodes 2.4-5.9 (since their last start)

A killed node's 99-175 brains are claimed by all three nodes (eight at a time each, the restarted one
included) and restored at about twelve a second in all: each restore is six calls to the store plus one get a
segment shipped since the last checkpoint, and moto's server, one Python process, is the busiest process of
the run. So the last of a kill's brains come back 9-20 s after it, and a request for one of them that waited
its TTL + 5 s is refused BrainMovedError (ask again).

Session 28 (load average 1.2-2): the same run gave 17 such refusals (and 16 in session 27). Every node walked a
dead owner's brains in the same order, eight claims at a time, and a brain a request waited for was claimed first
only once one of the node's eight ended: the last of a 167-brain node's were claimed 13-20 s after its lease
ended. Now the node a request waits at claims that brain at once (brainy/fleet/membership.py ``Fleet._want``):
5 and 6 refusals in two runs, each brain claimed about a second after the lease ended but served 2.3 s after its
restore, its first open queued behind the other claims' restores in the loop's default pool (six threads). With
the arrivals on threads of their own (brainy/host/shipped.py), two runs:

    answers 200                                         8,736        10,879
    requests whose node was killed or down (resent)        58            48   (9 and 6 adds had landed)
    waits that ran out (BrainMovedError, ask again)         1             0
    writes acknowledged / lost                          5,344 / 0     6,669 / 0
    longest request                                     7.00 s        6.72 s
    CPU seconds: etcd 8.3 and 7.6, moto 55.5 and 58.2, nodes 2.4-6.0 (since their last start)

The one refusal's request waited at a node restarting after its kill, which claims nothing until it listens.
"""

from __future__ import annotations

import collections
import os
import random
import signal
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_failover import PERSON_KEY, SERVICE_KEY, Fleet, fleet_arguments, request, running, wait_for  # noqa: E402

NODES = ("a", "b", "c")


class Load:
    """``clients`` threads of mixed requests over ``brains``, through whichever nodes are up."""

    def __init__(self, fleet: Fleet, brains: list[str], clients: int) -> None:
        self.fleet = fleet
        self.brains = brains
        self.lock = threading.Lock()
        self.acked: dict[str, list[str]] = collections.defaultdict(list)
        self.answers: collections.Counter[str] = collections.Counter()
        self.slowest: list[tuple[float, str]] = []  # (seconds, what) of the slowest requests
        self.examples: dict[str, str] = {}
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._run, args=(c,), daemon=True) for c in range(clients)]

    def _run(self, client: int) -> None:
        rng = random.Random(client)
        i = 0
        while not self.stop.is_set():
            brain = rng.choice(self.brains)
            roll = rng.random()
            if roll < 0.6:
                id_ = f"c{client}-{i}"
                i += 1
                self._send(rng, brain, "POST", f"/v1/brains/{brain}/add", {"type": "thing", "id": id_}, id_)
            elif roll < 0.85:
                with self.lock:
                    known = self.acked.get(brain)
                    id_ = rng.choice(known) if known else None
                if id_ is not None:
                    self._send(rng, brain, "GET", f"/v1/brains/{brain}/get/{id_}")
            else:
                self._send(rng, brain, "POST", f"/v1/brains/{brain}/find", {"where": {"type": "thing"}, "limit": 5})

    def _send(self, rng: random.Random, brain: str, method: str, path: str, body=None, id_: str | None = None) -> None:
        retried = False
        for _ in range(50):  # bounded: a client gives up on a request after 50 nodes did not answer it
            port = self.fleet.ports[rng.choice(NODES)]
            started = time.monotonic()
            status, doc, _ = request(port, method, path, body, PERSON_KEY, timeout=30)
            took = time.monotonic() - started
            if status == 0:  # the node is down, or was killed under the request: another node
                self._count("no answer (node down)")
                retried = True
                time.sleep(0.02)
                continue
            name = "200" if status == 200 else f"{status} {((doc or {}).get('error') or {}).get('name')}"
            if name == "500 InternalError" and "did not answer" in doc["error"]["message"]:
                # the owner was killed under the forwarded request: it may have landed, as when a client's own
                # connection to it is cut; an add with an id is sent again (EntityExistsError: it had landed)
                self._count("500 InternalError: the owner was killed under the forwarded request")
                if id_ is None:
                    return
                retried = True
                time.sleep(0.02)
                continue
            if id_ is not None and retried and name.endswith("EntityExistsError"):
                name = "200 (landed before the node died)"
            self._count(name, f"{method} {path} after {took:.2f} s: {doc}" if not name.startswith("200") else None)
            with self.lock:
                self.slowest.append((took, f"{method} {path} -> {name}"))
                self.slowest.sort(reverse=True)
                del self.slowest[5:]
                if id_ is not None and name.startswith("200"):
                    self.acked[brain].append(id_)
            return

    def _count(self, name: str, example: str | None = None) -> None:
        with self.lock:
            self.answers[name] += 1
            if example is not None:
                self.examples.setdefault(name, example[:300])


def main() -> None:
    parser = fleet_arguments()
    parser.add_argument("--brains", type=int, default=300)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--kill-every", type=float, default=15)
    parser.add_argument("--clients", type=int, default=16)
    args = parser.parse_args()
    with running(args) as fleet:
        brains = [f"b{n:03d}" for n in range(args.brains)]
        started = time.monotonic()

        def provision(n: int) -> None:
            port = fleet.ports[NODES[n % len(NODES)]]
            status, doc, _ = request(port, "POST", f"/v1/brains/{brains[n]}/provision", {}, SERVICE_KEY, 60)
            assert status == 200, (brains[n], status, doc)

        with ThreadPoolExecutor(8) as pool:
            list(pool.map(provision, range(len(brains))))
        placed = {n: held(fleet, n) for n in NODES}
        print(
            f"{len(brains)} brains provisioned in {time.monotonic() - started:.1f} s "
            f"({', '.join(f'{n}: {placed[n]}' for n in NODES)}); --fleet-ttl {args.ttl}, --ship sync"
        )
        load = Load(fleet, brains, args.clients)
        began = time.monotonic()
        for t in load.threads:
            t.start()
        kills = 0
        while time.monotonic() - began < args.seconds:
            at = began + (kills + 1) * args.kill_every
            if at >= began + args.seconds:
                time.sleep(max(0.0, began + args.seconds - time.monotonic()))
                break
            time.sleep(max(0.0, at - time.monotonic()))
            victim = NODES[kills % len(NODES)]
            owned = held(fleet, victim)
            fleet.nodes[victim].send_signal(signal.SIGKILL)
            fleet.nodes[victim].wait(timeout=10)
            print(f"{time.monotonic() - began:5.1f} s  SIGKILL {victim} (it served {owned} brains); started again")
            threading.Thread(target=fleet.start_node, args=(victim,), daemon=True).start()
            kills += 1
        load.stop.set()
        for t in load.threads:
            t.join(60)
        print(f"load stopped after {time.monotonic() - began:.1f} s, {kills} kills")
        port = fleet.ports["a"]
        wait_for(lambda: sum(held(fleet, n) for n in NODES) == len(brains), 120, "every brain served")
        print("answers:")
        for name, count in load.answers.most_common():
            print(f"  {count:7d}  {name}")
            if name in load.examples:
                print(f"           e.g. {load.examples[name]}")
        print("slowest requests: " + "; ".join(f"{s:.2f} s {what}" for s, what in load.slowest))
        acked = lost = 0
        for brain, ids in load.acked.items():
            for start in range(0, len(ids), 500):
                status, doc, _ = request(
                    port, "POST", f"/v1/brains/{brain}/batchGet", {"ids": ids[start : start + 500]}, timeout=60
                )
                assert status == 200, (brain, status, doc)
                acked += len(ids[start : start + 500])
                lost += len(doc["missing"])
                if doc["missing"]:
                    print(f"  {brain}: lost {doc['missing'][:10]}")
        print(f"{acked} writes acknowledged over {len(load.acked)} brains, {lost} lost")
        print("CPU seconds of the processes alive at the end: " + ", ".join(cpu(fleet)))


def cpu(fleet: Fleet) -> list[str]:
    """Each live process's CPU time (user + system) so far: etcd, moto, then the nodes (since their last start)."""
    ticks = os.sysconf("SC_CLK_TCK")
    names = {id(p): n for n, p in fleet.nodes.items()}
    out = []
    for n, proc in enumerate(fleet.procs):
        if proc.poll() is None:
            fields = Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
            name = names.get(id(proc), ("etcd", "moto")[n] if n < 2 else "?")
            out.append(f"{name} {(int(fields[11]) + int(fields[12])) / ticks:.1f}")
    return out


def held(fleet: Fleet, node: str) -> int:
    """How many brains ``node`` serves now (0 when it does not answer)."""
    status, doc, _ = request(fleet.ports[node], "GET", "/v1/health", key=SERVICE_KEY)
    return len(doc["fleet"]["brains"]) if status == 200 else 0


if __name__ == "__main__":
    main()
