"""Benchmark: HTTP/2 frames and HPACK with each twin of h2frame, and one whole request through the connection.

    python perf/bench_h2frame.py --fast          # quick look
    python perf/bench_h2frame.py -o h2.json      # keep the figures (pyperf compare_to ...)

What is timed, per twin (``[cython|python]``):

- ``h2frame.decode_request``: an h2load-shaped GET's header block, the second on its connection (every
  field then indexed from the dynamic table but the path), decoded and read by ``request_head``.
- ``h2frame.decode_request_huffman``: the first such block, every literal Huffman-coded.
- ``h2frame.encode_answer``: a ``get`` door's answer fields (status, content-type, server-timing,
  content-length) encoded and framed as HEADERS.
- ``h2frame.data_frame``: a ~100-byte DATA frame; ``h2frame.parse_header``: one frame header read.
- ``h2.request_answer``: the whole sans-IO round of ``brainy.net.h2.H2Connection``: the GET's
  HEADERS frame in, the RequestReceived out, the answer (HEADERS + DATA) framed and taken, with the
  twin under it; ``h2.request_answer[h2-library]`` is the same round over the ``h2`` library alone.
"""

import h2.config
import h2.connection
import h2.events
import hpack
import pyperf

import brainy.net.h2 as h2mod
from brainy._speedups import load
from brainy.net.http import Response

REQUEST = [
    (b":method", b"GET"),
    (b":scheme", b"http"),
    (b":path", b"/v1/brains/main/get/row-7"),
    (b":authority", b"127.0.0.1"),
    (b"user-agent", b"h2load nghttp2/1.52.0"),
    (b"authorization", b"Bearer bky_" + b"m" * 32),
]
ANSWER = [
    (b":status", b"200"),
    (b"content-type", b"application/json"),
    (b"server-timing", b"door;dur=0.041"),
    (b"content-length", b"112"),
]
BODY = (
    b'{"id":"row-7","type":"thing","data":"row 7","metadata":{"i":7,"tags":["a","b"]},'
    b'"generation":4,"_meta":{"ms":0.041}}'
)


def blocks() -> tuple[bytes, bytes]:
    """The first and second header blocks of a connection sending REQUEST twice (nghttp2's indexing)."""
    encoder = hpack.Encoder()
    return encoder.encode(REQUEST, huffman=True), encoder.encode(REQUEST, huffman=True)


# the preface, empty SETTINGS, and the connection window opened all the way (a round of millions of answers
# must not wait on it)
PREFACE_AND_SETTINGS = (
    b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
    + bytes(3)
    + b"\x04"
    + bytes(5)
    + b"\x00\x00\x04\x08\x00"
    + bytes(4)
    + (0x7FFFFFFF - 65535).to_bytes(4, "big")
)


def requests(loops: int) -> list[bytes]:
    """``loops`` GETs on streams 1, 3, 5, ..., each a HEADERS frame ending its stream, their blocks from one
    hpack encoder (framed ahead, so only the server is timed; a client library would cap open streams)."""
    encoder = hpack.Encoder()
    out = []
    for stream in range(1, 2 * loops + 1, 2):
        block = encoder.encode(REQUEST, huffman=True)
        out.append(len(block).to_bytes(3, "big") + b"\x01\x05" + stream.to_bytes(4, "big") + block)
    return out


def decode(loops: int, twin, block: bytes) -> float:
    timer = pyperf.perf_counter
    started = timer()
    for _ in range(loops):
        decoder = twin.Decoder()
        twin.request_head(decoder.decode(block))
    return timer() - started


def round_trip(loops: int, twin) -> float:
    """``loops`` requests answered on one connection over ``twin``."""
    picked, h2mod.h2frame = h2mod.h2frame, twin  # the connection frames with this twin for the round
    try:
        server = h2mod.H2Connection(0.0)
        server.receive_data(PREFACE_AND_SETTINGS, 0.0)
        server.data_to_send()
        heads = requests(loops)
        answer = Response(200, ANSWER[1:3], BODY)
        timer = pyperf.perf_counter
        started = timer()
        for head in heads:
            for event in server.receive_data(head, 0.0):
                server.send_response(event.stream_id, answer)
            server.data_to_send()
        return timer() - started
    finally:
        h2mod.h2frame = picked


def round_trip_h2_library(loops: int) -> float:
    server = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False, header_encoding=None))
    server.initiate_connection()
    server.receive_data(PREFACE_AND_SETTINGS)
    server.data_to_send()
    heads = requests(loops)
    fields = [ANSWER[0], *ANSWER[1:3], (b"content-length", b"%d" % len(BODY))]
    timer = pyperf.perf_counter
    started = timer()
    for head in heads:
        for event in server.receive_data(head):
            if isinstance(event, h2.events.RequestReceived):
                server.send_headers(event.stream_id, fields)
                server.send_data(event.stream_id, BODY, end_stream=True)
        server.data_to_send()
    return timer() - started


def main():
    runner = pyperf.Runner()
    first, second = blocks()
    runner.metadata["h2frame_blocks"] = f"first {len(first)} bytes, second {len(second)} bytes"
    for which in ("cython", "python"):
        try:
            twin = load("h2frame", which)
        except ImportError:
            continue  # the compiled twin is not built here; the pure one still runs
        warm = twin.Decoder()
        warm.decode(first)
        runner.bench_func(f"h2frame.decode_request[{which}]", lambda t=twin, d=warm: t.request_head(d.decode(second)))
        runner.bench_time_func(f"h2frame.decode_request_huffman[{which}]", decode, twin, first)
        encoder = twin.Encoder()
        runner.bench_func(f"h2frame.encode_answer[{which}]", encoder.headers, 1, ANSWER, False, 16384)
        runner.bench_func(f"h2frame.data_frame[{which}]", twin.frame, 0, 1, 1, BODY)
        framed = twin.frame(1, 4, 1, second)
        runner.bench_func(f"h2frame.parse_header[{which}]", twin.parse_header, framed, 0)
        runner.bench_time_func(f"h2.request_answer[{which}]", round_trip, twin)
    runner.bench_time_func("h2.request_answer[h2-library]", round_trip_h2_library)


if __name__ == "__main__":
    main()
