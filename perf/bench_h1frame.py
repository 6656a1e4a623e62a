"""Benchmark: frame one typical HTTP/1.1 JSON answer with each twin of h1frame.

    python perf/bench_h1frame.py --fast          # quick look
    python perf/bench_h1frame.py -o h1.json      # keep the figures (pyperf compare_to ...)

What is timed, per twin:

- ``h1frame.frame_response[cython|python]``: a keep-alive 200 with four short headers and a
  ~100-byte JSON body, shaped like a ``get`` door's answer: the common case on the server's hot path.
- ``h1frame.frame_response_2k[cython|python]``: the same with a 2,000-byte body (a small page of
  results), where the body copy starts to count.
- ``h1frame.frame_chunk[cython|python]``: one ~100-byte SSE event as a chunk.
"""

import pyperf

from brainy._speedups import load

HEADERS = [
    (b"content-type", b"application/json"),
    (b"cache-control", b"no-store"),
    (b"x-brainy-generation", b"48213"),
    (b"x-brainy-ms", b"0.214"),
]
BODY = (
    b'{"id":"doc-004217","type":"document","generation":48213,'
    b'"data":"document 4217 about topic 46","metadata":{"n":4217}}'
)
BIG_BODY = (b'{"items":[' + b",".join([BODY] * 17) + b"]}")[:2000]
EVENT = b'event: change\ndata: {"generation": 48214, "op": "add", "id": "doc-004218"}\n\n'


def main():
    runner = pyperf.Runner()
    runner.metadata["h1frame_body"] = f"{len(BODY)} bytes, {len(HEADERS)} headers"
    for which in ("cython", "python"):
        try:
            twin = load("h1frame", which)
        except ImportError:
            continue  # the compiled twin is not built here; the pure one still runs
        runner.bench_func(f"h1frame.frame_response[{which}]", twin.frame_response, 200, HEADERS, BODY, True)
        runner.bench_func(f"h1frame.frame_response_2k[{which}]", twin.frame_response, 200, HEADERS, BIG_BODY, True)
        runner.bench_func(f"h1frame.frame_chunk[{which}]", twin.frame_chunk, EVENT)


if __name__ == "__main__":
    main()
