"""Benchmark: vectors on their way out, through the whole sans-IO h1 request path (no socket), in process.

    python perf/bench_vector_out.py --fast                       # quick look
    BRAINY_ROW_CACHE_BYTES=0 python perf/bench_vector_out.py     # every answer encoded afresh (no row cache)
    python perf/bench_vector_out.py -o out.json                  # keep the figures (pyperf compare_to ...)

A store of 1,000 rows, each with a 384-number vector (unit Gaussian float32s, given), built once (``--store``).
Timed, each the bytes of one keep-alive request fed to :class:`~brainy.net.h1.H1Connection`, handed to
:meth:`App.handle <brainy.net.app.App.handle>` and its answer framed, as ``perf/bench_h1get.py`` times ``get``:

- ``get.vector[json]``, ``get.vector[msgpack]``: ``GET .../get/row-<i>?includeVector=true`` (Accept JSON, or
  MessagePack), ``i`` cycling over the rows;
- ``export.vectors[json]``: ``POST .../export {"includeVectors": true, "limit": 100}``, a page of 100 rows.

A row's answer is encoded once per version and kept (brainy/index/encoded_rows.py): with the cache on, a cycle
past the first reads encoded answers; ``BRAINY_ROW_CACHE_BYTES=0`` makes every answer pay for its encoding,
each vector's shortest decimals (DOORS.md 0.3) among it.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_h1get  # noqa: E402  (the app as brainy serve builds it)
import measure  # noqa: E402  (the key)
import stored  # noqa: E402  (the shared --store option)

from brainy.net.h1 import H1Connection  # noqa: E402

ROWS = 1_000


def build(root: Path) -> None:
    from brainy.engine import Brain, init_store

    path = root / "store"
    init_store(path)
    brain = Brain.open(path)
    x = np.random.default_rng(35).standard_normal((ROWS, 384), dtype=np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    brain.addMany({"items": [{"type": "thing", "id": f"row-{i}", "vector": x[i].tolist()} for i in range(ROWS)]})
    brain.close()


def _get(i: int, accept: str) -> bytes:
    return (
        f"GET /v1/brains/main/get/row-{i}?includeVector=true HTTP/1.1\r\nhost: 127.0.0.1\r\naccept: {accept}\r\n"
        f"authorization: Bearer {measure.KEY}\r\n\r\n"
    ).encode()


def _export() -> bytes:
    body = b'{"includeVectors": true, "limit": 100}'
    return (
        f"POST /v1/brains/main/export HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n"
        f"authorization: Bearer {measure.KEY}\r\ncontent-length: {len(body)}\r\n\r\n"
    ).encode() + body


def main() -> None:
    runner = stored.runner()
    args = runner.parse_args()
    if not args.worker:
        root, missing = stored.root(args, "brainy-bench-vector-out-")
        if missing:
            build(root)
    app = bench_h1get.serving(Path(args.store))
    conn = H1Connection()

    def one(request: bytes) -> bytes:
        for event in conn.receive_data(request, 0.0):
            conn.send_response(app.handle(event.request), event.keep_alive)
        return conn.data_to_send()

    for request in (_get(0, "application/json"), _get(0, "application/msgpack"), _export()):
        assert one(request).startswith(b"HTTP/1.1 200 "), request

    def cycling(accept: str):
        requests = [_get(i, accept) for i in range(ROWS)]

        def run(loops: int) -> float:
            timer = bench_h1get.pyperf.perf_counter
            started = timer()
            for k in range(loops):
                one(requests[k % ROWS])
            return timer() - started

        return run

    export = _export()
    runner.bench_time_func("get.vector[json]", cycling("application/json"))
    runner.bench_time_func("get.vector[msgpack]", cycling("application/msgpack"))
    runner.bench_func("export.vectors[json]", one, export)


if __name__ == "__main__":
    main()
