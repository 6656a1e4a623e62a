"""Benchmark: one proxied HTTP/1.1 ``get`` through the edge's spliced road, no socket (docs/fleet.md).

    python perf/bench_edge_splice.py --store DIR             # timed: a microsecond figure, best of --rounds
    python perf/bench_edge_splice.py --store DIR --count N   # untimed: 300 + N gets, for callgrind

What runs: the bytes of a keep-alive ``GET /v1/brains/far/get/row-7`` fed to an accepted connection
(:class:`~brainy.net.glue.tcp.HttpProtocol`, the h1 glue, the edge's :meth:`~brainy.net.edge.Edge.splice`), the
forwarded request written to a kept connection to the owner (:class:`brainy.fleet.http1._Peer`, a transport that
keeps what is written), then the owner's answer (a real one, framed by brainy from ``main``'s store) fed to that
connection, and the relayed answer written to the client's transport. Everything the edge does per proxied get
but the event loop's own callbacks and the four syscalls: the figure perf/bench_proxy.py's ``--edge-only`` user
CPU moves with, without its noise. The fleet is a view with one other node, ``b``, owning ``far``.

The instructions a get: ``PYTHONHASHSEED=0 OPENBLAS_NUM_THREADS=1 valgrind --tool=callgrind`` of ``--count 2500``
less ``--count 500``, over 2,000. Measured (session 27): 100,016 at 36849d8, 72,916 at b67e97c (the framing of
both heads compiled, the closures and calls of the road cut); 10.0 -> 7.3 us a get, best of 7 rounds. Session 29:
74,783 (3bcd56f) -> 56,322 (the road compiled, brainy/_speedups/splice.pyx).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_h1get  # noqa: E402  (the served app, the transport that keeps what is written)
import measure  # noqa: E402
import uvloop  # noqa: E402

from brainy.fleet import http1  # noqa: E402
from brainy.fleet.layout import Node, Owner  # noqa: E402
from brainy.net.edge import Edge  # noqa: E402
from brainy.net.glue.tcp import HttpProtocol  # noqa: E402
from brainy.net.h1 import H1Connection  # noqa: E402
from brainy.net.server import Server  # noqa: E402

OWNER = ("127.0.0.1", 9)  # never connected to: the kept connection is handed its transport here
REQUEST = bench_h1get.REQUEST.replace(b"/main/", b"/far/")


class View:
    """The fleet as the edge reads it: this node ``a``; ``far`` owned by node ``b`` at :data:`OWNER`."""

    node = "a"
    ttl = 10
    owned: dict[str, int] = {}
    arriving: dict[str, int] = {}
    owners = {"far": Owner("b", 1)}
    nodes = {"b": Node("b", f"http://{OWNER[0]}:{OWNER[1]}", 0, 0.0)}

    def url_of(self, node: str) -> str | None:
        found = self.nodes.get(node)
        return found.url if found is not None else None

    def elsewhere(self, brain: str) -> Owner | None:
        return self.owners.get(brain)


def owner_answer(app) -> bytes:  # type: ignore[no-untyped-def]
    """The answer the owner gives: ``main``'s row-7 as this build's h1 connection frames it."""
    conn = H1Connection()
    [event] = conn.receive_data(bench_h1get.REQUEST, 0.0)
    return conn.respond(app.handle(event.request), True)


def setup(store: str):  # type: ignore[no-untyped-def]
    root = Path(store)
    if not (root / "store" / "MANIFEST").exists():
        root.mkdir(parents=True, exist_ok=True)
        measure.build_store(root, 2000)
    app = bench_h1get.serving(root)
    answer = owner_answer(app)
    app.edge = Edge(View(), app.dispatcher, app._route, app._handle, app.refusal_response, app._routes)  # type: ignore[arg-type]
    app.splice, app.take = app.edge.splice, app.edge.take
    loop = uvloop.new_event_loop()
    asyncio.set_event_loop(loop)
    client = bench_h1get.Written()
    upstream = bench_h1get.Written()
    peer = http1._Peer()

    async def made() -> HttpProtocol:
        protocol = HttpProtocol(app, Server(app, []), ("h1", "h2"))
        protocol.connection_made(client)  # type: ignore[arg-type]
        peer.connection_made(upstream)  # type: ignore[arg-type]
        return protocol

    protocol = loop.run_until_complete(made())
    app.edge.forwarder.connections._kept(OWNER, peer, http1.Raw(b"", 0, 200, True))
    return loop, protocol, peer, client, upstream, answer


def one(protocol, peer, client, upstream, answer) -> None:  # type: ignore[no-untyped-def]
    protocol.data_received(REQUEST)
    peer.data_received(answer)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--store", required=True)
    parser.add_argument("--count", type=int, default=0, help="untimed: 300 + N gets (for callgrind)")
    parser.add_argument("-n", type=int, default=20000, help="gets a round (default 20,000)")
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    loop, protocol, peer, client, upstream, answer = setup(args.store)

    async def run(n: int) -> float:
        client.written.clear()
        upstream.written.clear()
        began = time.perf_counter()
        for _ in range(n):
            protocol.data_received(REQUEST)
            peer.data_received(answer)
            client.written.clear()
            upstream.written.clear()
        return time.perf_counter() - began

    protocol.data_received(REQUEST)
    peer.data_received(answer)
    forwarded, relayed = upstream.written, client.written
    assert forwarded and b"brainy-forwarded: a\r\n" in forwarded[-1], forwarded
    assert relayed and relayed[-1].startswith(b"HTTP/1.1 200 ") and b"brainy-node: b\r\n" in relayed[-1], relayed
    if args.count:
        loop.run_until_complete(run(300))
        loop.run_until_complete(run(args.count))
        return
    times = [loop.run_until_complete(run(args.n)) / args.n * 1e6 for _ in range(args.rounds)]
    print(f"spliced proxied get, in process: best {min(times):.2f} us, median {sorted(times)[len(times) // 2]:.2f} us")


if __name__ == "__main__":
    main()
