"""Benchmark: one h1 ``get`` through the whole sans-IO request path, no socket.

    python perf/bench_h1get.py --fast          # quick look
    python perf/bench_h1get.py -o get.json     # keep the figures (pyperf compare_to ...)
    python perf/bench_h1get.py --count 2500 --store DIR   # no timing: h1.served 300 + 2,500 times, for callgrind

``--count N`` runs the ``h1.served`` path (below) 300 times, then N times, and exits: under ``valgrind
--tool=callgrind`` the difference of two counts (N=2500 less N=500, over 2,000) is the instructions one
request costs, whatever else the machine does (``PYTHONHASHSEED=0 OPENBLAS_NUM_THREADS=1``; the store in DIR
is built on the first run, so both counts read the same one).

What is timed: the bytes of one keep-alive ``GET /v1/brains/main/get/row-7`` (the headers h2load
sends, a static key's bearer) fed to :class:`~brainy.net.h1.H1Connection`, the request handed to
:meth:`App.handle <brainy.net.app.App.handle>` (route, credential, gate, the door on a 2,000-row
store, the encoding), its answer framed and handed over: everything the server does per request
but the event loop and the two syscalls. ``h1.parse`` times the parse alone, ``h1.answer`` the
app and the framing alone. ``h1.served`` is ``h1.get`` through the connection's glue too (the accepted
connection's :class:`~brainy.net.glue.tcp.HttpProtocol` and the h1 glue, on a transport that only keeps what
is written): everything but the event loop's own callback and the two syscalls. ``h2.served`` is the same
``get`` over HTTP/2 through the same connection object and the h2 glue (h2load's HEADERS frames, one hpack
encoder's blocks, framed ahead), each request followed by one pass of the event loop, since the h2 glue
writes at the end of the pass: the loop's pass is timed too.
"""

import argparse
import os
import sys
from pathlib import Path

import pyperf

sys.path.insert(0, str(Path(__file__).resolve().parent))
import asyncio  # noqa: E402

import bench_h2frame  # noqa: E402  (its h2load-shaped GET frames)
import measure  # noqa: E402  (the same store and key as the end-to-end sweep)
import stored  # noqa: E402  (perf/stored.py: the shared --store option)
import uvloop  # noqa: E402

from brainy.host.pool import Pool  # noqa: E402
from brainy.net.app import App  # noqa: E402
from brainy.net.glue.tcp import HttpProtocol  # noqa: E402
from brainy.net.h1 import H1Connection  # noqa: E402
from brainy.net.serve import open_keys  # noqa: E402
from brainy.net.server import Server  # noqa: E402

REQUEST = (
    b"GET /v1/brains/main/get/row-7 HTTP/1.1\r\nhost: 127.0.0.1:8080\r\nuser-agent: h2load nghttp2/1.52.0\r\n"
    b"accept: */*\r\nauthorization: Bearer " + measure.KEY.encode() + b"\r\n\r\n"
)


def serving(root: Path) -> App:
    """The app on ``root``'s store with one static key, as ``brainy serve`` builds it: the keys table opened by
    :func:`~brainy.net.serve.open_keys`, so with the token verifier and the revoked list (beside the keys
    file; absent, so empty, unless a run placed one) that every request's credential check asks."""
    keys = root / "keys"
    if not keys.exists():
        fd = os.open(keys, os.O_WRONLY | os.O_CREAT, 0o600)
        os.write(fd, f"{measure.KEY} person:measure *\n".encode())
        os.close(fd)
    return App(Pool({"main": root / "store"}), open_keys(str(keys), mint_if_missing=False), "1970-01-01T00:00:00Z")


class Written:
    """A transport that keeps what is written (a loopback socket's part of the path is not timed here)."""

    def __init__(self) -> None:
        self.written: list[bytes] = []

    def get_extra_info(self, name: str, default: object = None) -> object:
        return default  # no socket: TCP_NODELAY is not set

    def write(self, data: bytes) -> None:
        self.written.append(data)

    def close(self) -> None:
        pass

    def is_closing(self) -> bool:
        return False


def accepted(app: App) -> tuple[HttpProtocol, Written]:
    """One accepted connection of a server with ``app``, as the event loop makes it."""
    transport = Written()
    loop = uvloop.new_event_loop()

    async def made() -> HttpProtocol:
        protocol = HttpProtocol(app, Server(app, []), ("h1", "h2"))
        protocol.connection_made(transport)  # type: ignore[arg-type]
        return protocol

    return loop.run_until_complete(made()), transport


def served_h2(loops: int, app: App) -> float:
    """``loops`` h2 ``get``s on one accepted connection, each read answered and its answer written in one pass
    of the event loop (the glue writes when the pass ends)."""
    transport = Written()
    loop = uvloop.new_event_loop()
    heads = bench_h2frame.requests(loops + 1)

    async def run() -> float:
        protocol = HttpProtocol(app, Server(app, []), ("h1", "h2"))
        protocol.connection_made(transport)  # type: ignore[arg-type]
        protocol.data_received(bench_h2frame.PREFACE_AND_SETTINGS + SETTINGS_ACK + heads[0])
        await asyncio.sleep(0)
        assert b"\x00\x01\x00\x00\x00\x01" in b"".join(transport.written)  # stream 1's answer DATA
        transport.written.clear()
        timer = pyperf.perf_counter
        started = timer()
        for head in heads[1:]:
            protocol.data_received(head)
            await asyncio.sleep(0)
            transport.written.clear()
        return timer() - started

    try:
        return loop.run_until_complete(run())
    finally:
        loop.close()


SETTINGS_ACK = bytes(3) + b"\x04\x01" + bytes(4)


def count(requests: int, store: str) -> None:
    """``h1.served`` 300 times, then ``requests`` times, untimed (``--count``: for an instruction count)."""
    root = Path(store)
    if not (root / "store" / "MANIFEST").exists():
        root.mkdir(parents=True, exist_ok=True)
        measure.build_store(root, 2000)
    protocol, transport = accepted(serving(root))
    protocol.data_received(REQUEST)
    assert transport.written[-1].startswith(b"HTTP/1.1 200 ")
    for _ in range(300 + requests):
        protocol.data_received(REQUEST)
        transport.written.clear()


def main() -> None:
    if "--count" in sys.argv:
        parser = argparse.ArgumentParser()
        parser.add_argument("--count", type=int, required=True)
        parser.add_argument("--store", required=True)
        args = parser.parse_args()
        count(args.count, args.store)
        return
    runner = stored.runner()
    args = runner.parse_args()
    if not args.worker:
        root, missing = stored.root(args, "brainy-bench-h1get-")
        if missing:
            measure.build_store(root, 2000)
    app = serving(Path(args.store))
    conn = H1Connection()
    [event] = conn.receive_data(REQUEST, 0.0)
    conn.send_response(app.handle(event.request), True)
    assert conn.data_to_send().startswith(b"HTTP/1.1 200 ")

    def whole() -> None:
        for event in conn.receive_data(REQUEST, 0.0):
            conn.send_response(app.handle(event.request), event.keep_alive)
        conn.data_to_send()

    def parse() -> None:
        conn.receive_data(REQUEST, 0.0)
        conn._owed = 0

    def answer() -> None:
        conn.send_response(app.handle(event.request), True)
        conn.data_to_send()

    protocol, transport = accepted(app)
    protocol.data_received(REQUEST)
    assert transport.written[-1].startswith(b"HTTP/1.1 200 ")

    def served() -> None:
        protocol.data_received(REQUEST)
        transport.written.clear()

    runner.bench_func("h1.get", whole)
    runner.bench_func("h1.served", served)
    runner.bench_time_func("h2.served", served_h2, app)
    runner.bench_func("h1.parse", parse)
    runner.bench_func("h1.answer", answer)


if __name__ == "__main__":
    main()
