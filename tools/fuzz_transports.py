"""Malformed inputs to a real ``brainy serve``, transport by transport: no crash, no 500, the server alive and
answering, its resident set flat.

    python tools/fuzz_transports.py [--count 10000] [--seed S] [--transport ws,grpc,...] [--batch 250]
                                    [--rss-bound-mib 20] [--dir DIR]

One server on loopback (h1 and h2 on one port, gRPC and HTTP/3 on their own, a keys file, a store it
initialised, a throwaway certificate for QUIC), and one ``brainy mcp`` over stdio on a second store. Each
transport is sent ``--count`` inputs drawn from ``random.Random(seed)``, structured mutations of valid messages
mixed with random bytes:

* ``ws``: the WebSocket session, frames (reserved opcodes and bits, unmasked, truncated and huge declared
  lengths, control frames too large or fragmented, stray continuations, close frames of every shape) and call
  frames (JSON that does not decode, invalid UTF-8, wrong field types, deep nesting, MessagePack in binary
  frames), a few mutated opening handshakes;
* ``grpc``: rpcs on a raw HTTP/2 connection (garbage protobuf, wrong compression flags and encodings, length
  prefixes that lie, unknown rpcs and methods, bad metadata), and some through grpcio itself;
* ``h3``: HTTP/3 over QUIC with aioquic (frame types not allowed where they come, lengths that lie, QPACK
  garbage, bad header fields, garbage bodies, bad unidirectional and control streams, resets, stray datagrams);
* ``mcp-http``: JSON-RPC at ``POST /mcp`` (malformed JSON, wrong ``jsonrpc``, wrong param types, deep nesting,
  huge ids, batches, bad session, version, media type and Origin headers);
* ``mcp-stdio``: the same messages, and raw bytes, as lines to ``brainy mcp``;
* ``sse``: the held change stream resumed with garbage ``Last-Event-ID`` (negative, huge, non-numeric,
  non-ASCII digits), ``since`` and ``limit``, over HTTP/1.1 and HTTP/2.

Inputs go in batches; after each one it checks that the server process is alive, that a valid request on that
transport still answers correctly, that no answer was a 500 (an ``InternalError``, a JSON-RPC -32603, gRPC
INTERNAL or UNKNOWN, an H3 or QUIC internal error), that the server logged no fault, and samples the process's
VmRSS. At the end it prints, per transport: the inputs sent, the answers by class, the refusals by name, the
connections the server closed, the 500s (zero), and the resident set (first batch, last, max). It exits 1 on
any fault, or when the resident set after the last batch is more than ``--rss-bound-mib`` over its level after
the first batch (the warm-up).

The seed fixes every input; inputs run a few at a time, so which connection carried which, and the order of
the answers, are the scheduler's. A fault prints its transport, its kind and the input's first bytes.

Run of 2026-12-05, ``--seed 20261205``, 10,000 inputs per transport in batches of 250, on 2 shared cores (the
resident set in MiB after the first batch, the last, and the most; the sse set includes the embedder, loaded
by the commits its resumes name):

    transport    sent  500s faults probes srv closed cli closed rss first/last/max MiB     s
    ws          10000     0      0     40       4543        656         82.0/84.3/84.3     7
    grpc        10000     0      0     40        281       1041         84.4/84.7/84.7    13
    h3          10000     0      0     40       5910        479         89.0/93.2/93.2   254
    mcp-http    10000     0      0     40        121          0         93.2/93.4/93.4     2
    mcp-stdio   10000     0      0     40          0          0         86.5/98.8/98.8     3
    sse         10000     0      0     40          7       1515      187.9/188.8/188.8    24

    ws: refused 4595, ok 4488, pong 326; closes 1002 ReservedBitError 1872, 1002 UnmaskedFrameError 635,
        1002 ControlFrameTooLargeError 618, 1009 FrameTooLargeError 594, 1002 442, 1000 177, 1007 160
    grpc: status 3 (BodyDecodeError) 5002, 0 1277, 12 961, 16 189; RST_STREAM 571; HTTP/1.1 400 764;
        GOAWAY COMPRESSION_ERROR 4 (a header block past SETTINGS_MAX_HEADER_LIST_SIZE)
    h3: 4xx 1283, 200 425, 501 36; CONNECTION_CLOSE 5910, among them H3_FRAME_ERROR 1507,
        H3_MESSAGE_ERROR 1505+, QPACK_DECOMPRESSION_FAILED 775, H3_FRAME_UNEXPECTED 775+,
        H3_STREAM_CREATION_ERROR 144+, QPACK_DECODER_STREAM_ERROR 126; 822 stray datagrams
    mcp-http: JSON-RPC -32600 4210, -32700 2640, -32602 1677, -32601 159; results 405, isError 338; HTTP 400 5583,
        405 504, 401 479, 403 464, 415 146, 404 64, 431 14
    mcp-stdio: JSON-RPC -32700 4585, -32600 2193, -32602 1745, -32601 163; results 1134, isError 334
    sse: 400 BadQueryParameterError 5295, MalformedRequestError 1376, InvalidArgumentError 924; 431 25;
        caught-up 1517; RST_STREAM 142; GOAWAY COMPRESSION_ERROR 7
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import collections
import contextlib
import json
import os
import random
import re
import shutil
import socket
import ssl
import struct
import sys
import tempfile
import time
import traceback
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
for _path in (ROOT, ROOT / "tests"):  # brainy, and the harness the wire tests start servers with
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

import grpc  # noqa: E402
import h2.config  # noqa: E402
import h2.connection  # noqa: E402
import h2.events  # noqa: E402
import h2.exceptions  # noqa: E402
import msgpack  # noqa: E402
from aioquic.asyncio.client import connect as quic_connect  # noqa: E402
from aioquic.asyncio.protocol import QuicConnectionProtocol  # noqa: E402
from aioquic.buffer import encode_uint_var  # noqa: E402
from aioquic.h3.connection import H3Connection  # noqa: E402
from aioquic.h3.events import DataReceived, HeadersReceived  # noqa: E402
from aioquic.quic.configuration import QuicConfiguration  # noqa: E402
from aioquic.quic.events import ConnectionTerminated, QuicEvent, StreamReset  # noqa: E402
from server import HOST, ServerProcess, free_port, start_server, write_keys  # noqa: E402
from test_serve_h3 import _free_udp_port, make_pki  # noqa: E402

from brainy.contract import doors as D  # noqa: E402
from brainy.engine import init_store  # noqa: E402

TRANSPORTS = ("ws", "grpc", "h3", "mcp-http", "mcp-stdio", "sse")
COUNT = 10_000  # inputs per transport
BATCH = 250  # inputs between two checks
RSS_BOUND_MIB = 20  # the resident set after the last batch, over its level after the first (the warm-up)
INPUT_SECONDS = 10.0  # one input's answers, or its connection's end
PROBE_SECONDS = 10.0  # the valid request after a batch
BATCH_SECONDS = 600.0  # one batch, whole
MCP_VERSION = "2025-06-18"
MAX_FRAME = 8 << 20  # the WebSocket frame limit (DOORS.md 11.1, FrameTooLargeError)

# What a 500 is on each transport's own terms.
INTERNAL = "InternalError"
JSONRPC_INTERNAL = -32603
GRPC_FAULTS = {2: "UNKNOWN", 13: "INTERNAL"}
QUIC_INTERNAL = {0x1: "INTERNAL_ERROR", 0x102: "H3_INTERNAL_ERROR"}
# What the server's log says when something went wrong that no answer showed.
LOG_FAULTS = ("Traceback", "internal error", "Exception in callback", "exception was never retrieved", " ERROR ")


class Fault(Exception):
    """A crash, a 500, a hang or a dropped answer: what this tool exists to find."""


# -- tallies -----------------------------------------------------------------------------------------------


@dataclass
class Tally:
    """What one transport's inputs met."""

    transport: str
    sent: int = 0
    answers: collections.Counter[str] = field(default_factory=collections.Counter)  # by class or status
    refusals: collections.Counter[str] = field(default_factory=collections.Counter)  # by refusal name
    server_closed: collections.Counter[str] = field(default_factory=collections.Counter)  # by how
    client_closed: int = 0  # connections this tool ended (a held stream read, an input left incomplete)
    internal: int = 0  # 500s: InternalError, -32603, gRPC INTERNAL/UNKNOWN, H3/QUIC internal errors
    faults: list[str] = field(default_factory=list)
    probes: int = 0  # valid requests answered correctly after a batch
    rss_kib: list[int] = field(default_factory=list)  # VmRSS after each batch
    logged: int = 0  # fault lines in the server's log while this transport ran
    seconds: float = 0.0

    def fault(self, what: str, data: bytes | str = b"") -> None:
        shown = data if isinstance(data, str) else data[:160].hex()
        if len(self.faults) < 200:
            self.faults.append(f"{what} | input {shown}")

    def refused(self, name: Any) -> None:
        self.refusals[str(name)] += 1
        if name == INTERNAL:
            self.internal += 1

    @property
    def failed(self) -> bool:
        return bool(self.faults) or self.internal > 0 or self.logged > 0


# -- the server --------------------------------------------------------------------------------------------


@dataclass
class Target:
    """The server under test (and where its gRPC and HTTP/3 listeners are), and what ``brainy mcp`` needs."""

    server: ServerProcess
    grpc_port: int
    h3_port: int
    directory: Path
    stdio_store: Path
    stdio_keys: Path
    _log_at: int = 0

    @property
    def key(self) -> str:
        return self.server.key

    @property
    def brain(self) -> str:
        return self.server.brain

    def alive(self) -> bool:
        return self.server.alive()

    def new_log_faults(self) -> list[str]:
        """The fault lines the server logged since the last call."""
        try:
            with open(self.server.log_path, "rb") as log:
                log.seek(self._log_at)
                text = log.read()
                self._log_at = log.tell()
        except OSError:
            return []
        return [line for line in text.decode(errors="replace").splitlines() if any(f in line for f in LOG_FAULTS)]


@contextlib.contextmanager
def serving(directory: Path) -> Iterator[Target]:
    """A ``brainy serve`` with an h1/h2 listener, a gRPC listener and an HTTP/3 one, on loopback."""
    pki = make_pki(directory / "tls")  # a throwaway CA's certificate; the client does not verify it (QUIC is
    # what is fuzzed here, not TLS)
    grpc_port, h3_port = free_port(), _free_udp_port()
    args = ("--listen", f"{HOST}:{grpc_port},grpc", "--listen", f"{HOST}:{h3_port},h3")
    args += ("--tls-cert", str(pki.cert), "--tls-key", str(pki.key))
    stdio_dir = directory / "stdio"
    stdio_dir.mkdir(parents=True, exist_ok=True)
    init_store(stdio_dir / "scratch")  # brainy mcp names the brain by its directory
    stdio_keys = write_keys(stdio_dir / "keys", "scratch")
    with start_server(directory / "served", extra_args=args) as server:
        yield Target(server, grpc_port, h3_port, directory, stdio_dir / "scratch", stdio_keys)


def rss_kib(pid: int) -> int:
    """VmRSS of ``pid`` in KiB (0 once it is gone)."""
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


# -- what malformed inputs are made of ---------------------------------------------------------------------

KEYS = (
    "type", "id", "data", "metadata", "where", "limit", "offset", "cursor", "query", "text", "path", "content",
    "vector", "subtype", "from", "to", "verb", "since", "generation", "fields", "ids", "items", "ops", "name",
    "mode", "k", "orderBy", "includeVector", "key", "op", "brain", "ref", "door", "body", "", "$eq", "__proto__",
)  # fmt: skip
EDGE_INTS = (0, -1, 1, 2**31 - 1, 2**31, 2**53 + 1, 2**63 - 1, 2**63, 2**64 - 1, -(2**63), -(2**63) - 1, 10**30)
EDGE_FLOATS = (0.0, -0.0, 1e308, -1e308, 5e-324, 0.5, 1e-7)
EDGE_STRINGS = (
    "", " ", "\x00", "\x7f", "é", "\U0001f4a5", "\u202e", "\r\n", "../../etc/passwd", "%00", "%zz", "null",
    "brainy://", "notes", "NOTES", "notes/../x", "*", "!", "\\", "\"", "a" * 300, "b" * 70_000, "\ufeff",
    "thing", "person", "relatedTo", "/", "/skills/x.md", "bk1.", "Bearer", "2025-06-18",
)  # fmt: skip
INVALID_UTF8 = (b"\xff", b"\xc3\x28", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xc0\xaf", b"\xe2\x82", b"\x80")
# Doors a fuzzed call may name: every door but those that would empty or close the store under the run
# (their refusals are the same code paths; their successes would only make later answers different).
UNSAFE = ("clear", "close", "remove", "removeMany", "unlink", "rmdir", "import", "snapshot", "repair")
DOORS = tuple(sorted(n for n in D.BY_NAME if n not in UNSAFE and not n.startswith(("host.", "policy."))))
READS = tuple(n for n in DOORS if D.BY_NAME[n].kind == "read")


class Maker:
    """Random values, documents and texts for malformed inputs, from one ``random.Random``."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def chance(self, p: float) -> bool:
        return self.rng.random() < p

    def pick(self, items: Any) -> Any:
        return items[self.rng.randrange(len(items))]

    def raw(self, low: int = 0, high: int = 200) -> bytes:
        return self.rng.randbytes(self.rng.randint(low, high))

    def string(self) -> str:
        roll = self.rng.random()
        if roll < 0.5:
            return self.pick(EDGE_STRINGS)
        if roll < 0.8:
            return "".join(
                chr(self.rng.choice((self.rng.randint(32, 126), self.rng.randint(0, 0x2FFF))))
                for _ in range(self.rng.randint(0, 20))
            )
        return f"fz-{self.rng.randint(0, 30)}"

    def value(self, depth: int = 0) -> Any:
        """Any JSON value, edges favoured, nested a little."""
        roll = self.rng.random()
        if roll < 0.08:
            return None
        if roll < 0.14:
            return self.chance(0.5)
        if roll < 0.30:
            return self.pick(EDGE_INTS) if self.chance(0.6) else self.rng.randint(-1000, 1000)
        if roll < 0.38:
            return self.pick(EDGE_FLOATS)
        if roll < 0.65 or depth >= 3:
            return self.string()
        if roll < 0.80:
            return [self.value(depth + 1) for _ in range(self.rng.randint(0, 4))]
        return self.document(depth + 1)

    def document(self, depth: int = 0) -> dict[str, Any]:
        return {
            self.pick(KEYS) if self.chance(0.85) else self.string(): self.value(depth)
            for _ in range(self.rng.randint(0, 5))
        }

    def body(self) -> Any:
        """A door's argument document, mostly an object, sometimes not."""
        if self.chance(0.1):
            return self.value()
        doc = self.document()
        if self.chance(0.3):
            doc.setdefault("type", self.pick(("thing", "person", "", 7, None, "no-such-type")))
            doc.setdefault("id", f"fz-{self.rng.randint(0, 20)}")
        return doc

    def nested(self, depth: int) -> str:
        """JSON text nested ``depth`` levels (built as text: no encoder writes past a few hundred)."""
        if self.chance(0.5):
            return "[" * depth + "1" + "]" * depth
        return '{"a":' * depth + "1" + "}" * depth

    def deep_depth(self) -> int:
        return self.pick((63, 64, 65, 66, 200, 255, 256, 300, 1023, 1024, 1025, 5000))

    def dumps(self, value: Any) -> bytes:
        try:
            return json.dumps(value, ensure_ascii=self.chance(0.5), allow_nan=True).encode("utf-8", "surrogatepass")
        except (ValueError, RecursionError):
            return b"{}"

    def packb(self, value: Any) -> bytes:
        """MessagePack of ``value``; an integer past 64 bits (MessagePack has none) is packed as its text."""
        try:
            return msgpack.packb(value, use_bin_type=self.chance(0.7))
        except (OverflowError, ValueError, TypeError):
            return msgpack.packb(json.loads(json.dumps(value), parse_int=str))

    def mutate_text(self, data: bytes) -> bytes:
        """One to three byte-level mutations of an encoded document."""
        out = bytearray(data)
        for _ in range(self.rng.randint(1, 3)):
            at = self.rng.randint(0, len(out))
            op = self.rng.randrange(12)
            if op == 0:
                del out[at:]  # truncated
            elif op == 1:
                out[at:at] = bytes([self.rng.randrange(256)])
            elif op == 2 and out:
                del out[min(at, len(out) - 1)]
            elif op == 3 and out:
                out[min(at, len(out) - 1)] = self.rng.randrange(256)
            elif op == 4:
                out[at:at] = self.pick(INVALID_UTF8)
            elif op == 5:
                out += self.pick((b"}", b" x", b"\x00", b"{}", b"\n{}", b"[", b" "))  # trailing bytes
            elif op == 6:
                out[0:0] = b"\xef\xbb\xbf"  # a byte order mark
            elif op == 7:
                k = self.deep_depth()
                out[:] = b"[" * k + bytes(out) + b"]" * k
            elif op == 8:
                out[at:at] = self.pick((b"1e400", b"NaN", b"-Infinity", b'"\\ud800"', b"99999999999999999999999"))
            elif op == 9:
                out += bytes(out)  # two documents
            elif op == 10:
                out[at:at] = bytes(self.rng.randrange(32))  # a control character
            else:
                out[:] = out.replace(b'"', b"'", 1)
        return bytes(out)


def _chunks(rng: random.Random, data: bytes) -> list[bytes]:
    """``data`` cut in one to four pieces (each sent on its own: the server's reads see the cuts)."""
    cuts = sorted(rng.randint(0, len(data)) for _ in range(rng.randint(0, 3)))
    pieces, at = [], 0
    for cut in [*cuts, len(data)]:
        pieces.append(data[at:cut])
        at = cut
    return [p for p in pieces if p] or [data]


def _deadline(seconds: float) -> float:
    return time.monotonic() + seconds


def _left(deadline: float) -> float:
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError
    return left


# -- HTTP/1.1 over asyncio streams -------------------------------------------------------------------------


@dataclass
class H1Answer:
    status: int
    headers: dict[str, str]
    body: bytes
    chunked: bool = False


async def read_head(reader: asyncio.StreamReader, deadline: float) -> tuple[int, dict[str, str]]:
    """The status and header fields of one HTTP/1.1 answer (1xx skipped, but for 101 Switching Protocols)."""
    while True:
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), _left(deadline))
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        headers: dict[str, str] = {}
        for line in lines[1:]:
            if line:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
        if status >= 200 or status == 101:
            return status, headers


async def read_answer(reader: asyncio.StreamReader, deadline: float, head: bool = False) -> H1Answer:
    """One whole answer with a length (every answer but a held stream's); ``head``: to a HEAD, so bodiless."""
    status, headers = await read_head(reader, deadline)
    if headers.get("transfer-encoding", "").lower() == "chunked":
        return H1Answer(status, headers, b"", chunked=True)
    length = 0 if head else int(headers.get("content-length", "0"))
    body = await asyncio.wait_for(reader.readexactly(length), _left(deadline)) if length else b""
    return H1Answer(status, headers, body)


async def read_chunk(reader: asyncio.StreamReader, deadline: float) -> bytes:
    """One chunk of a chunked body (b"" for the last)."""
    size_line = await asyncio.wait_for(reader.readuntil(b"\r\n"), _left(deadline))
    size = int(size_line.split(b";")[0].strip(), 16)
    data = await asyncio.wait_for(reader.readexactly(size + 2), _left(deadline))
    return data[:-2]


def h1_request(method: str, path: str, headers: list[tuple[str, str]], body: bytes | None = None) -> bytes:
    lines = [f"{method} {path} HTTP/1.1", f"Host: {HOST}"] + [f"{k}: {v}" for k, v in headers]
    if body is not None:
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1", "replace") + (body or b"")


def _doc(body: bytes) -> Any:
    try:
        return json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return None


def _refusal_name(doc: Any) -> str | None:
    if isinstance(doc, dict) and isinstance(doc.get("error"), dict):
        return doc["error"].get("name")
    return None


async def _close(writer: asyncio.StreamWriter) -> None:
    writer.close()
    with contextlib.suppress(Exception):
        await asyncio.wait_for(writer.wait_closed(), 2.0)


# -- HTTP/2 over asyncio streams (gRPC, and the change stream) ----------------------------------------------


@dataclass
class H2Result:
    """What came back on one stream."""

    headers: list[tuple[bytes, bytes]] = field(default_factory=list)
    trailers: list[tuple[bytes, bytes]] = field(default_factory=list)
    data: bytearray = field(default_factory=bytearray)
    reset: int | None = None
    ended: bool = False

    def field(self, name: bytes) -> bytes | None:
        for k, v in [*self.headers, *self.trailers]:
            if k == name:
                return v
        return None

    @property
    def status(self) -> int | None:
        value = self.field(b":status")
        return int(value) if value is not None and value.isdigit() else None


class H2Peer:
    """A client HTTP/2 connection that sends what it is told: outbound header checks are off, so a stream can
    carry fields the RFC forbids (what the server must refuse, not this client)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        config = h2.config.H2Configuration(
            client_side=True,
            header_encoding=None,
            validate_outbound_headers=False,
            normalize_outbound_headers=False,
            validate_inbound_headers=False,
        )
        self.conn = h2.connection.H2Connection(config)
        self.conn.initiate_connection()
        self.results: dict[int, H2Result] = {}
        self.terminated: int | None = None  # the GOAWAY's error code
        self.eof = False
        self.flush()

    @classmethod
    async def open(cls, port: int) -> H2Peer:
        """A connection past the server's SETTINGS (its windows known: a body may be sent whole)."""
        reader, writer = await asyncio.wait_for(asyncio.open_connection(HOST, port), INPUT_SECONDS)
        peer = cls(reader, writer)
        deadline = _deadline(INPUT_SECONDS)
        while peer.conn.remote_settings.initial_window_size == 65535 and peer.usable:
            await peer.pump(deadline)
        return peer

    @property
    def usable(self) -> bool:
        return not self.eof and self.terminated is None

    def flush(self) -> None:
        data = self.conn.data_to_send()
        if data:
            self.writer.write(data)

    def start(self, headers: list[tuple[bytes, bytes]], body: bytes | None, pieces: list[bytes] | None = None) -> int:
        """Open a stream: its HEADERS, then ``body`` as DATA (in ``pieces``, when given, one frame each)."""
        sid = self.conn.get_next_available_stream_id()
        self.results[sid] = H2Result()
        self.conn.send_headers(sid, headers, end_stream=not body)
        if body:
            if pieces is None:
                pieces = [body[at : at + 16384] for at in range(0, len(body), 16384)]
            for i, piece in enumerate(pieces):
                self.conn.send_data(sid, piece, end_stream=i == len(pieces) - 1)
        self.flush()
        return sid

    async def pump(self, deadline: float) -> None:
        data = await asyncio.wait_for(self.reader.read(1 << 16), _left(deadline))
        if not data:
            self.eof = True
            return
        for event in self.conn.receive_data(data):
            result = self.results.get(getattr(event, "stream_id", 0) or 0)
            if isinstance(event, h2.events.ResponseReceived) and result is not None:
                result.headers = list(event.headers)
            elif isinstance(event, h2.events.TrailersReceived) and result is not None:
                result.trailers = list(event.headers)
            elif isinstance(event, h2.events.DataReceived):
                if result is not None:
                    result.data += event.data
                self.conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
            elif isinstance(event, h2.events.StreamEnded) and result is not None:
                result.ended = True
            elif isinstance(event, h2.events.StreamReset) and result is not None:
                result.reset, result.ended = event.error_code, True
            elif isinstance(event, h2.events.ConnectionTerminated):
                self.terminated = int(event.error_code)
        self.flush()

    async def wait(self, sid: int, deadline: float, until: Callable[[H2Result], bool] | None = None) -> H2Result:
        result = self.results[sid]
        while not result.ended and not (until is not None and until(result)):
            if not self.usable:
                break
            await self.pump(deadline)
        return result

    def forget(self, sid: int) -> None:
        self.results.pop(sid, None)

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            self.conn.close_connection()
            self.flush()
        await _close(self.writer)


# -- a transport's fuzzing ---------------------------------------------------------------------------------


class Fuzzer:
    """One transport: ``make`` draws an input, ``send`` delivers it on a worker's connection and tallies what
    came back, ``probe`` sends one valid request and checks its answer. Workers run ``concurrency`` at once."""

    name = ""
    concurrency = 8

    def __init__(self, target: Target, tally: Tally) -> None:
        self.target = target
        self.tally = tally

    def make(self, m: Maker) -> Any:
        raise NotImplementedError

    async def start(self) -> None:
        """Before the first batch."""

    async def stop(self) -> None:
        """After the last batch."""

    async def worker(self, inputs: collections.deque[Any]) -> None:
        """Send inputs from ``inputs`` until it is empty."""
        raise NotImplementedError

    async def probe(self) -> None:
        """One valid request answered as it should be, or a Fault."""
        raise NotImplementedError

    def pid(self) -> int:
        """The process whose resident set is sampled."""
        return self.target.server.proc.pid

    async def batch(self, inputs: list[Any]) -> None:
        queue = collections.deque(inputs)
        await asyncio.gather(*(self.worker(queue) for _ in range(self.concurrency)))

    async def h2_worker(
        self,
        port: int,
        inputs: collections.deque[Any],
        aside: Callable[[Any], Awaitable[bool]],
        send: Callable[[H2Peer, Any], Awaitable[None]],
    ) -> None:
        """Send inputs from ``inputs`` with ``send`` on one HTTP/2 connection to ``port``, opened again whenever
        the server ended it; ``aside`` takes the inputs that go another way (True when it took one). An input
        unanswered by the deadline, or a connection the client library gives up on, is a fault."""
        peer: H2Peer | None = None
        try:
            while inputs:
                item = inputs.popleft()
                self.tally.sent += 1
                if await aside(item):
                    continue
                if peer is None or not peer.usable:
                    if peer is not None:
                        await peer.close()
                    peer = await H2Peer.open(port)
                try:
                    await send(peer, item)
                except TimeoutError:
                    self.tally.fault(f"{self.name}: {item.kind}: no answer within {INPUT_SECONDS} s", item.shown)
                except (h2.exceptions.ProtocolError, ConnectionError) as exc:
                    self.tally.fault(f"{self.name}: {item.kind}: the connection failed: {exc!r}", item.shown)
                else:
                    continue
                await peer.close()
                peer = None
        finally:
            if peer is not None:
                await peer.close()

    def unanswered(self, peer: H2Peer, item: Any) -> None:
        """A stream the server's end of the connection left unanswered. A GOAWAY names the connection error (RFC
        9113 5.4.1): COMPRESSION_ERROR for a header block past the SETTINGS_MAX_HEADER_LIST_SIZE the server
        announced, say. INTERNAL_ERROR, or an end with no GOAWAY at all, is the server's fault."""
        code = peer.terminated
        how = f"GOAWAY {H2_ERRORS.get(code, code)}" if code is not None else "eof"
        self.tally.server_closed[how] += 1
        if code is None or code == 0x2:
            self.tally.fault(f"{self.name}: {item.kind}: the connection ended unanswered ({how})", item.shown)


# -- WebSocket ---------------------------------------------------------------------------------------------

WS_TEXT, WS_BINARY, WS_CONT, WS_CLOSE, WS_PING, WS_PONG = 0x1, 0x2, 0x0, 0x8, 0x9, 0xA


def ws_frame(
    opcode: int,
    payload: bytes,
    *,
    fin: bool = True,
    rsv: int = 0,
    masked: bool = True,
    length: int | None = None,
    form: int | None = None,
    key: bytes | None = None,
) -> bytes:
    """A client frame; ``length`` declares another payload length than the payload's, ``form`` forces the
    7-bit, 16-bit or 64-bit length field (7, 16 or 64) whatever the length."""
    n = len(payload) if length is None else length
    b0 = (0x80 if fin else 0) | (rsv & 7) << 4 | (opcode & 0xF)
    bit = 0x80 if masked else 0
    form = form or (7 if n < 126 else 16 if n < 65536 else 64)
    if form == 7:
        head = bytes((b0, bit | (n & 0x7F)))
    elif form == 16:
        head = bytes((b0, bit | 126)) + struct.pack(">H", n & 0xFFFF)
    else:
        head = bytes((b0, bit | 127)) + struct.pack(">Q", n & (2**64 - 1))
    if not masked:
        return head + payload
    key = key if key is not None else os.urandom(4)
    masked_payload = bytes(b ^ key[i % 4] for i, b in enumerate(payload))
    return head + key + masked_payload


def ws_predict(data: bytes) -> str:
    """What the server does with ``data`` on an open session (RFC 6455 5.2 and DOORS.md 11.1, as brainy.net.ws
    reads a frame): "end" (a violation or a close frame), "wait" (a frame not all here), else "open"."""
    pos, size = 0, len(data)
    while pos < size:
        if size - pos < 2:
            return "wait"
        b0, b1 = data[pos], data[pos + 1]
        fin, rsv, opcode, masked, n = b0 >> 7, (b0 >> 4) & 7, b0 & 0xF, b1 >> 7, b1 & 0x7F
        head = 2
        if n == 126:
            if size - pos < 4:
                return "wait"
            n, head = struct.unpack_from(">H", data, pos + 2)[0], 4
        elif n == 127:
            if size - pos < 10:
                return "wait"
            n, head = struct.unpack_from(">Q", data, pos + 2)[0], 10
        head += 4 if masked else 0
        if size - pos < head:
            return "wait"
        if rsv or opcode not in (0, 1, 2, 8, 9, 10) or not masked:
            return "end"
        if opcode >= 8 and (n > 125 or not fin):
            return "end"
        if n > MAX_FRAME:
            return "end"
        if size - pos < head + n:
            return "wait"
        if opcode == WS_CLOSE:
            return "end"
        pos += head + n
    return "open"


def ws_close_code_valid(code: int) -> bool:
    """A code a close frame may carry (RFC 6455 7.4.1 and the IANA registry): 1000-1003, 1007-1014, 3000-4999;
    1005, 1006 and 1015 only ever name what happened locally."""
    return code in (1000, 1001, 1002, 1003) or 1007 <= code <= 1014 or 3000 <= code <= 4999


@dataclass
class WsInput:
    kind: str
    data: bytes  # frames on an open session, or a whole opening handshake (kind "handshake")
    pieces: list[bytes]


def ws_upgrade(key: str, extra: list[tuple[str, str]] | None = None, drop: str | None = None) -> bytes:
    nonce = base64.b64encode(os.urandom(16)).decode()
    headers = [
        ("Upgrade", "websocket"),
        ("Connection", "Upgrade"),
        ("Sec-WebSocket-Key", nonce),
        ("Sec-WebSocket-Version", "13"),
        ("Authorization", f"Bearer {key}"),
    ]
    headers = [(k, v) for k, v in headers if k != drop] + (extra or [])
    return h1_request("GET", "/v1/ws", headers)


class WsFuzzer(Fuzzer):
    name = "ws"

    # -- inputs

    def call(self, m: Maker) -> bytes:
        """A call frame's payload: a valid call, a field at a time made wrong, or its text mutated."""
        door = m.pick(READS) if m.chance(0.8) else m.pick(DOORS)
        doc: dict[str, Any] = {"ref": f"r{m.rng.randrange(10**6)}", "door": door, "brain": self.target.brain}
        if m.chance(0.5):
            doc["body"] = m.body()
        if m.chance(0.3):
            doc["id"] = f"fz-{m.rng.randint(0, 20)}"
        for _ in range(m.rng.randint(0, 3)):
            slot = m.pick(("ref", "door", "brain", "id", "body", "stray", "drop"))
            if slot == "stray":
                doc[m.string()] = m.value()
            elif slot == "drop" and doc:
                doc.pop(m.pick(list(doc)))
            else:
                doc[slot] = m.value()
        if m.chance(0.08):
            return b'{"ref":' + m.nested(m.deep_depth()).encode() + b',"door":"counts"}'
        if m.chance(0.08):
            return b'{"ref":"deep","door":"add","body":' + m.nested(m.deep_depth()).encode() + b"}"
        if m.chance(0.05):
            return m.dumps(m.value())  # not an object at all
        text = m.dumps(doc)
        return m.mutate_text(text) if m.chance(0.4) else text

    def make(self, m: Maker) -> WsInput:
        kind = m.pick(
            (
                "call", "call", "call", "msgpack", "opcode", "rsv", "unmasked", "control", "close", "fragment",
                "truncated", "huge", "random", "bitflip", "multi", "lengths", "handshake",
            )
        )  # fmt: skip
        data = self._frames(m, kind)
        return WsInput(kind, data, _chunks(m.rng, data))

    def _frames(self, m: Maker, kind: str) -> bytes:
        if kind == "call":
            return ws_frame(WS_TEXT, self.call(m))
        if kind == "msgpack":
            return ws_frame(WS_BINARY, m.packb({"ref": 1, "door": "counts", "body": m.body()}))
        if kind == "opcode":
            return ws_frame(m.pick((3, 4, 5, 6, 7, 0xB, 0xC, 0xD, 0xE, 0xF)), m.raw(0, 40))
        if kind == "rsv":
            return ws_frame(m.pick((WS_TEXT, WS_BINARY, WS_PING)), self.call(m)[:100], rsv=m.rng.randint(1, 7))
        if kind == "unmasked":
            return ws_frame(m.pick((WS_TEXT, WS_PING, WS_CLOSE)), self.call(m)[:100], masked=False)
        if kind == "control":
            opcode = m.pick((WS_PING, WS_PONG))
            n = m.pick((0, 1, 125, 126, 127, 1000))
            return ws_frame(opcode, m.rng.randbytes(n), fin=m.chance(0.8))
        if kind == "close":
            payload = m.pick(
                (
                    b"", b"\x03", struct.pack(">H", m.pick((0, 999, 1000, 1001, 1005, 1006, 1015, 2999, 4000, 65535))),
                    struct.pack(">H", 1000) + m.pick(INVALID_UTF8), struct.pack(">H", 1002) + b"r" * 123,
                )
            )  # fmt: skip
            return ws_frame(WS_CLOSE, payload)
        if kind == "fragment":
            first = m.pick((WS_TEXT, WS_BINARY, WS_CONT))
            frames = ws_frame(first, self.call(m)[:50], fin=False)
            for _ in range(m.rng.randint(0, 3)):
                frames += ws_frame(m.pick((WS_CONT, WS_CONT, WS_TEXT, WS_PING)), m.raw(0, 30), fin=m.chance(0.5))
            return frames
        if kind == "truncated":
            payload = self.call(m)
            declared = len(payload) + m.rng.randint(1, 2000)
            return ws_frame(WS_TEXT, payload, length=declared)[: m.rng.randint(1, 6 + len(payload))]
        if kind == "huge":
            declared = m.pick((MAX_FRAME + 1, 2**31, 2**32, 2**63 - 1, 2**63, 2**64 - 1))
            return ws_frame(
                m.pick((WS_TEXT, WS_BINARY, WS_CONT)), b"x" * m.rng.randint(0, 20), length=declared, form=64
            )
        if kind == "random":
            return m.raw(1, 300)
        if kind == "bitflip":
            frame = bytearray(ws_frame(WS_TEXT, self.call(m)))
            for _ in range(m.rng.randint(1, 4)):
                at = m.rng.randrange(min(len(frame), 14))
                frame[at] ^= 1 << m.rng.randrange(8)
            return bytes(frame)
        if kind == "multi":
            return b"".join(
                self._frames(m, m.pick(("call", "msgpack", "control", "fragment", "close")))
                for _ in range(m.rng.randint(2, 5))
            )
        if kind == "lengths":  # a length written in a longer form than it needs, or a zero-length text
            payload = self.call(m)
            return ws_frame(WS_TEXT, payload if m.chance(0.8) else b"", form=m.pick((16, 64)))
        return self._handshake(m)

    def _handshake(self, m: Maker) -> bytes:
        roll = m.rng.randrange(7)
        if roll == 0:
            return ws_upgrade(
                self.target.key,
                drop=m.pick(("Upgrade", "Connection", "Sec-WebSocket-Key", "Sec-WebSocket-Version", "Authorization")),
            )
        if roll == 1:
            return ws_upgrade(
                self.target.key,
                [("Sec-WebSocket-Version", m.pick(("8", "", "13, 8", "x")))],
                drop="Sec-WebSocket-Version",
            )
        if roll == 2:
            return ws_upgrade(
                self.target.key,
                [("Sec-WebSocket-Key", m.pick(("", "short", "!!!!", "a" * 200, "AAAAAAAAAAAAAAAAAAAAAA==")))],
                drop="Sec-WebSocket-Key",
            )
        if roll == 3:
            return ws_upgrade(m.string().replace("\r", "").replace("\n", ""))
        if roll == 4:
            return ws_upgrade(self.target.key).replace(b"GET ", m.pick((b"POST ", b"PUT ", b"GET  ")), 1)
        if roll == 5:
            return ws_upgrade(
                self.target.key,
                [
                    ("Sec-WebSocket-Extensions", "permessage-deflate"),
                    ("Sec-WebSocket-Protocol", m.string().replace("\r", "").replace("\n", "")),
                ],
            )
        return ws_upgrade(self.target.key).replace(
            b"/v1/ws", m.pick((b"/v1/ws/", b"/v1/WS", b"/v1/ws?x=%zz", b"/v1/brains/notes/counts"))
        )

    # -- delivery

    async def _open(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(HOST, self.target.server.port), INPUT_SECONDS)
        writer.write(ws_upgrade(self.target.key))
        status, _ = await read_head(reader, _deadline(INPUT_SECONDS))
        if status != 101:
            raise Fault(f"ws: the opening handshake was answered {status}")
        return reader, writer

    async def _read_frame(self, reader: asyncio.StreamReader, deadline: float) -> tuple[int, bytes] | None:
        """One server frame (unmasked), or None at the end of the stream."""
        try:
            head = await asyncio.wait_for(reader.readexactly(2), _left(deadline))
        except (asyncio.IncompleteReadError, ConnectionError):
            return None
        n = head[1] & 0x7F
        if n == 126:
            n = struct.unpack(">H", await asyncio.wait_for(reader.readexactly(2), _left(deadline)))[0]
        elif n == 127:
            n = struct.unpack(">Q", await asyncio.wait_for(reader.readexactly(8), _left(deadline)))[0]
        if head[1] & 0x80:
            raise Fault("ws: the server masked a frame")
        payload = await asyncio.wait_for(reader.readexactly(n), _left(deadline))
        return head[0] & 0xF, payload

    def _answered(self, payload: bytes, data: bytes) -> Any:
        doc = _doc(payload)
        if not isinstance(doc, dict) or "ok" not in doc:
            self.tally.fault("ws: an answer frame is not {ref, ok, ...}", data)
            return None
        if doc["ok"]:
            self.tally.answers["ok"] += 1
        else:
            self.tally.answers["refused"] += 1
            self.tally.refused(_refusal_name(doc))
            if _refusal_name(doc) == INTERNAL:
                self.tally.fault(f"ws: InternalError {doc['error'].get('message')}", data)
        return doc.get("ref")

    async def _until_end(self, reader: asyncio.StreamReader, data: bytes, deadline: float, probe: str | None) -> str:
        """Read the server's frames: answers tallied, until the probe's answer ("open"), a close frame then the
        end of the stream ("closed"), or the end of the stream alone ("eof")."""
        closed = False
        while True:
            frame = await self._read_frame(reader, deadline)
            if frame is None:
                return "closed" if closed else "eof"
            opcode, payload = frame
            if opcode == WS_TEXT:
                if self._answered(payload, data) == probe and probe is not None:
                    return "open"
            elif opcode == WS_CLOSE:
                code = struct.unpack(">H", payload[:2])[0] if len(payload) >= 2 else None
                reason = payload[2:].decode("utf-8", "replace")
                self.tally.server_closed[f"close {code}{' ' + reason if reason else ''}"] += 1
                if code is not None and not ws_close_code_valid(code):
                    self.tally.fault(
                        f"ws: the server closed with code {code}, which RFC 6455 7.4 keeps off the wire", data
                    )
                if reason:
                    self.tally.refused(reason)
                closed = True
            elif opcode == WS_PONG:
                self.tally.answers["pong"] += 1
            else:
                self.tally.fault(f"ws: the server sent opcode {opcode:#x}", data)

    async def worker(self, inputs: collections.deque[WsInput]) -> None:
        conn: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        n = 0
        try:
            while inputs:
                item = inputs.popleft()
                self.tally.sent += 1
                if item.kind == "handshake":
                    await self._handshake_input(item)
                    continue
                if conn is None:
                    conn = await self._open()
                reader, writer = conn
                expect = ws_predict(item.data)
                probe = f"probe-{id(self)}-{n}"
                n += 1
                try:
                    for piece in item.pieces:
                        writer.write(piece)
                        await writer.drain()
                    if expect == "open":
                        writer.write(ws_frame(WS_TEXT, json.dumps({"ref": probe, "door": "counts"}).encode()))
                    elif expect == "wait":
                        writer.write_eof()  # the frame will never be whole: the server must let go
                        self.tally.client_closed += 1
                    await writer.drain()
                    how = await self._until_end(
                        reader, item.data, _deadline(INPUT_SECONDS), probe if expect == "open" else None
                    )
                except TimeoutError:
                    self.tally.fault(
                        f"ws: {item.kind}: no answer within {INPUT_SECONDS} s (expected {expect})", item.data
                    )
                    how = "eof"
                except ConnectionError:
                    how = "eof"
                if how == "open":
                    continue
                if expect == "open":
                    self.tally.fault(
                        f"ws: {item.kind}: the session ended ({how}) on frames that do not end it", item.data
                    )
                elif expect == "end" and how != "closed":
                    self.tally.fault(f"ws: {item.kind}: the session ended without a close frame", item.data)
                await _close(conn[1])
                conn = None
        finally:
            if conn is not None:
                await _close(conn[1])

    async def _handshake_input(self, item: WsInput) -> None:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(HOST, self.target.server.port), INPUT_SECONDS)
        try:
            writer.write(item.data)
            deadline = _deadline(INPUT_SECONDS)
            answer = await read_answer(reader, deadline)
            self.tally.answers[f"handshake {answer.status}"] += 1
            if answer.status == 101:
                writer.write(ws_frame(WS_TEXT, b'{"ref":"p","door":"counts"}'))
                if await self._until_end(reader, item.data, deadline, "p") != "open":
                    self.tally.fault("ws: a granted upgrade did not answer a call", item.data)
            else:
                name = _refusal_name(_doc(answer.body))
                self.tally.refused(name)
                if answer.status >= 500:
                    self.tally.fault(f"ws: the handshake was answered {answer.status} {name}", item.data)
        except (TimeoutError, asyncio.IncompleteReadError, ConnectionError) as exc:
            self.tally.fault(f"ws: a handshake had no answer ({type(exc).__name__})", item.data)
        finally:
            await _close(writer)

    async def probe(self) -> None:
        reader, writer = await self._open()
        try:
            writer.write(
                ws_frame(WS_TEXT, json.dumps({"ref": "probe", "door": "counts", "brain": self.target.brain}).encode())
            )
            frame = await self._read_frame(reader, _deadline(PROBE_SECONDS))
            doc = _doc(frame[1]) if frame is not None else None
            if not (
                isinstance(doc, dict)
                and doc.get("ok")
                and doc.get("ref") == "probe"
                and "entities" in doc.get("result", {})
            ):
                raise Fault(f"ws: counts answered {doc!r}")
        finally:
            await _close(writer)


# -- gRPC --------------------------------------------------------------------------------------------------

SERVICE = f"/{D.GRPC_PACKAGE}.{D.GRPC_SERVICE}/"
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"  # RFC 9113 3.4
H2_ERRORS = {
    0x0: "NO_ERROR",
    0x1: "PROTOCOL_ERROR",
    0x2: "INTERNAL_ERROR",
    0x3: "FLOW_CONTROL_ERROR",
    0x6: "FRAME_SIZE_ERROR",
    0x9: "COMPRESSION_ERROR",
}
RPCS = tuple(sorted(D.grpc_service()))


def pb_varint(value: int) -> bytes:
    out = bytearray()
    value &= 2**64 - 1
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def pb_string(number: int, data: bytes) -> bytes:
    return pb_varint(number << 3 | 2) + pb_varint(len(data)) + data


def door_request(brain: str = "", id_: str = "", document: bytes = b"", sha256: str = "") -> bytes:
    """``brainy.v1.DoorRequest`` (docs/brainy.proto): four strings, absent when empty."""
    out = b""
    for number, value in ((1, brain.encode()), (2, id_.encode()), (3, document), (4, sha256.encode())):
        if value:
            out += pb_string(number, value)
    return out


def grpc_message(payload: bytes, flag: int = 0, length: int | None = None) -> bytes:
    return bytes((flag,)) + struct.pack(">I", (len(payload) if length is None else length) & 0xFFFFFFFF) + payload


def door_answer(data: bytes) -> tuple[str, Any] | None:
    """``(which, document)`` of a length-prefixed ``brainy.v1.DoorAnswer`` (field 1 document, 2 refusal)."""
    if len(data) < 6 or data[0] != 0:
        return None
    body = data[5:]
    key, at = body[0], 1
    size, shift = 0, 0
    while at < len(body):
        byte = body[at]
        at += 1
        size |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            break
    which = {0x0A: "document", 0x12: "refusal"}.get(key)
    return (which, _doc(body[at : at + size])) if which else None


@dataclass
class GrpcInput:
    kind: str
    headers: list[tuple[bytes, bytes]]
    body: bytes
    via_grpcio: bool = False
    rpc: str = "counts"
    pieces: list[bytes] | None = None  # the body's DATA frames, when it is cut

    @property
    def shown(self) -> bytes:
        return self.body

    metadata: list[tuple[str, str | bytes]] = field(default_factory=list)


class GrpcFuzzer(Fuzzer):
    name = "grpc"

    def __init__(self, target: Target, tally: Tally) -> None:
        super().__init__(target, tally)
        self.channel: grpc.Channel | None = None

    async def start(self) -> None:
        self.channel = grpc.insecure_channel(f"{HOST}:{self.target.grpc_port}")

    async def stop(self) -> None:
        if self.channel is not None:
            self.channel.close()

    # -- inputs

    def _protobuf(self, m: Maker) -> bytes:
        """A DoorRequest, valid or made wrong field by field, or protobuf-shaped garbage."""
        document = m.dumps(m.body())
        if m.chance(0.2):
            document = m.mutate_text(document)
        if m.chance(0.1):
            document = b'{"a":' + m.nested(m.deep_depth()).encode() + b"}"
        brain = self.target.brain if m.chance(0.7) else m.string()
        message = door_request(brain, m.string() if m.chance(0.3) else "", document if m.chance(0.8) else b"")
        roll = m.rng.randrange(10)
        if roll == 0:
            return m.raw(0, 100)
        if roll == 1:  # a string field with another wire type
            return message + pb_varint(m.rng.randint(1, 4) << 3 | m.pick((0, 1, 5))) + m.raw(0, 9)
        if roll == 2:  # unknown fields of every wire type, the groups and the reserved ones among them
            number = m.pick((5, 15, 16, 2**29 - 1, 0))
            return message + pb_varint(number << 3 | m.rng.randrange(8)) + m.raw(0, 12)
        if roll == 3:  # a varint that does not end, or runs past ten bytes
            return message + b"\x28" + b"\xff" * m.rng.randint(1, 12)
        if roll == 4:  # a length that runs past the message
            return message + pb_varint(1 << 3 | 2) + pb_varint(m.pick((1, 127, 128, 2**31, 2**64 - 1))) + b"ab"
        if roll == 5:  # a string that is not UTF-8
            return pb_string(m.rng.randint(1, 4), m.pick(INVALID_UTF8) + b"x")
        if roll == 6 and message:
            data = bytearray(message)
            data[m.rng.randrange(len(data))] = m.rng.randrange(256)
            return bytes(data)
        return message

    def make(self, m: Maker) -> GrpcInput:
        kind = m.pick(
            ("message", "message", "message", "prefix", "rpc", "metadata", "encoding", "split", "grpcio", "preface")
        )
        if kind == "preface":  # not HTTP/2 with prior knowledge at all: this listener speaks nothing else
            raw = m.pick(
                (
                    PREFACE[: m.rng.randint(1, len(PREFACE) - 1)] + m.raw(1, 40),
                    PREFACE + m.raw(1, 60),  # the preface, then frames that are garbage
                    h1_request("POST", SERVICE + "counts", [("Content-Type", "application/grpc")], b"\x00" * 5),
                    m.raw(1, 200),
                )
            )
            return GrpcInput(kind, [], raw)
        rpc = m.pick(RPCS) if m.chance(0.5) else m.pick(("counts", "get", "find", "add"))
        payload = self._protobuf(m)
        body = grpc_message(payload)
        path = (SERVICE + rpc).encode()
        method, content_type = b"POST", b"application/grpc"
        extra: list[tuple[bytes, bytes]] = []
        auth: list[tuple[bytes, bytes]] = [(b"authorization", f"Bearer {self.target.key}".encode())]
        if kind == "grpcio":
            # grpcio refuses to send a value with a byte outside printable ASCII or an edge of whitespace (its
            # own INTERNAL "Invalid metadata"): those go over the raw connection ("metadata" inputs)
            metadata: list[tuple[str, str | bytes]] = [("authorization", f"Bearer {self.target.key}")]
            if m.chance(0.5):
                metadata.append((m.pick(("x-fuzz", "grpc-x", "brain")), m.pick(("v", "Bearer x", "a b", "\x7e"))))
            if m.chance(0.2):
                metadata.append(("x-fuzz-bin", m.raw(0, 64)))  # grpcio sends it base64, as -bin metadata goes
            if m.chance(0.2):
                metadata[0] = (
                    "authorization",
                    m.pick(("Bearer", "Basic x", "Bearer bk1.x.y", "Bearer " + "k" * 5000)),
                )
            return GrpcInput(kind, [], payload, via_grpcio=True, rpc=rpc, metadata=metadata)
        if kind == "prefix":
            body = grpc_message(
                payload,
                flag=m.pick((0, 1, 2, 0x80, 0xFF)),
                length=m.pick((None, 0, len(payload) + 1, max(len(payload) - 1, 0), 2**32 - 1, 2**31)),
            )
            if m.chance(0.3):
                body = body[: m.rng.randint(0, 6)]
            if m.chance(0.2):
                body += grpc_message(payload)  # two messages on a unary rpc
        elif kind == "rpc":
            path = m.pick(
                (
                    (SERVICE + m.string()).encode("utf-8", "surrogatepass"), SERVICE.encode(), b"/", b"",
                    b"/brainy.v1.Brainy", b"/brainy.v1.Other/get", (SERVICE + rpc + "/x").encode(), b"*",
                    (SERVICE + rpc.upper()).encode(), b"/brainy.v1.Brainy/%2e%2e", m.raw(1, 40),
                )
            )  # fmt: skip
            method = m.pick((b"POST", b"GET", b"PUT", b"DELETE", b"HEAD", b"CONNECT", b"", b"post"))
        elif kind == "metadata":
            for _ in range(m.rng.randint(1, 6)):
                roll = m.rng.randrange(8)
                if roll == 0:
                    auth = [] if m.chance(0.5) else [(b"authorization", m.string().encode("utf-8", "surrogatepass"))]
                elif roll == 1:
                    extra.append(
                        (b"x-fuzz-bin", m.pick((b"!!!", b"=", b"YQ", b"\xff\xfe", base64.b64encode(m.raw(0, 30)))))
                    )
                elif roll == 2:
                    extra.append((b"grpc-timeout", m.pick((b"1S", b"x", b"99999999999H", b"-1m", b"", b"1n"))))
                elif roll == 3:
                    content_type = m.pick(
                        (
                            b"application/grpc+proto",
                            b"application/grpc+json",
                            b"application/json",
                            b"",
                            b"text/plain",
                            b"application/grpc; charset=\xff",
                        )
                    )
                elif roll == 4:
                    extra.append(
                        (
                            m.pick((b"X-Upper", b"con nection", b"te", b"connection", b"\x00", b"", b":bogus")),
                            m.raw(0, 10),
                        )
                    )
                elif roll == 5:
                    extra.append((b"x-big", b"v" * m.pick((100, 8000, 20000))))
                elif roll == 6:
                    extra += [(f"x-many-{i}".encode(), b"v") for i in range(m.rng.randint(10, 120))]
                else:
                    extra.append(
                        (
                            m.pick((b"x-fuzz", b"user-agent", b"grpc-message")),
                            m.pick((b"\r\n", b"\x00", b"\x7f", b"\xff", b" v ")),
                        )
                    )
        elif kind == "encoding":
            extra.append((b"grpc-encoding", m.pick((b"gzip", b"deflate", b"identity", b"snappy", b"", b"\xff"))))
            if m.chance(0.5):
                extra.append((b"grpc-accept-encoding", m.pick((b"gzip", b"x,,y", b""))))
            if m.chance(0.6):
                body = grpc_message(m.raw(0, 60), flag=1)
        headers = [(b":method", method), (b":scheme", b"http"), (b":path", path), (b":authority", b"127.0.0.1")]
        headers += [(b"content-type", content_type), (b"te", b"trailers"), *auth, *extra]
        if kind == "metadata" and m.chance(0.2):
            headers = [h for h in headers if h[0] != m.pick((b":method", b":path", b":scheme", b"te", b"content-type"))]
        if kind == "split":  # the body in several DATA frames, an empty one among them now and then
            pieces = [p[at : at + 16384] for p in _chunks(m.rng, body) for at in range(0, len(p), 16384)]
            pieces += [b""] if m.chance(0.3) else []
            return GrpcInput(kind, headers, body, rpc=rpc, pieces=pieces)
        return GrpcInput(kind, headers, body, rpc=rpc)

    # -- delivery

    def _judge(self, result: H2Result, item: GrpcInput) -> None:
        if result.reset is not None:
            self.tally.answers[f"RST_STREAM {result.reset}"] += 1
            return
        status = result.status
        grpc_status = result.field(b"grpc-status")
        self.tally.answers[f"{status} grpc-status {grpc_status.decode() if grpc_status else '-'}"] += 1
        if status is None or status >= 500:
            self.tally.internal += status is not None
            self.tally.fault(f"grpc: {item.kind}: HTTP status {status}", item.body)
        if grpc_status is not None and int(grpc_status) in GRPC_FAULTS:
            self.tally.internal += 1
            self.tally.fault(
                f"grpc: {item.kind}: {GRPC_FAULTS[int(grpc_status)]} {result.field(b'grpc-message')!r}", item.body
            )
        elif grpc_status is None and status == 200:
            self.tally.fault(f"grpc: {item.kind}: an answer without grpc-status", item.body)
        message = result.field(b"grpc-message")
        named = re.match(rb"([A-Za-z_]+):", message or b"")
        if named:  # "<refusal name>: <message>"; an rpc not served says so in words (UNIMPLEMENTED)
            self.tally.refused(named.group(1).decode())
        answer = door_answer(bytes(result.data))
        if answer is not None and answer[0] == "refusal":
            self.tally.refused(_refusal_name({"error": answer[1]}))
            if _refusal_name({"error": answer[1]}) == INTERNAL:
                self.tally.fault(f"grpc: {item.kind}: InternalError in the answer", item.body)

    def _grpcio(self, item: GrpcInput) -> None:
        assert self.channel is not None
        call = self.channel.unary_unary(SERVICE + item.rpc)
        try:
            answer = call(item.body, metadata=item.metadata, timeout=INPUT_SECONDS)
        except grpc.RpcError as error:
            code = error.code()  # type: ignore[attr-defined]
            self.tally.answers[f"grpcio {code.name}"] += 1
            details = error.details() or ""  # type: ignore[attr-defined]
            named = re.match(r"([A-Za-z_]+):", details)
            if named:
                self.tally.refused(named.group(1))
            if (
                code.value[0] in GRPC_FAULTS
                or code == grpc.StatusCode.UNAVAILABLE
                or code == grpc.StatusCode.DEADLINE_EXCEEDED
            ):
                self.tally.internal += code.value[0] in GRPC_FAULTS
                self.tally.fault(f"grpc: grpcio {code.name} {details}", item.body)
            return
        self.tally.answers["grpcio OK"] += 1
        decoded = door_answer(b"\x00" + struct.pack(">I", len(answer)) + answer)
        if decoded is not None and decoded[0] == "refusal":
            self.tally.refused(_refusal_name({"error": decoded[1]}))
            if _refusal_name({"error": decoded[1]}) == INTERNAL:
                self.tally.fault("grpc: grpcio: InternalError in the answer", item.body)

    async def _preface(self, item: GrpcInput) -> None:
        """Bytes that are not an HTTP/2 connection, on a connection of their own: an HTTP/1.1 refusal, a GOAWAY,
        or the end, within the deadline, once this side has said all it will (EOF)."""
        reader, writer = await asyncio.wait_for(asyncio.open_connection(HOST, self.target.grpc_port), INPUT_SECONDS)
        try:
            writer.write(item.body)
            writer.write_eof()
            self.tally.client_closed += 1
            data = await asyncio.wait_for(reader.read(), INPUT_SECONDS)
        except TimeoutError:
            self.tally.fault("grpc: preface: the server held a connection that is not HTTP/2", item.body)
            return
        except ConnectionError as exc:
            self.tally.fault(f"grpc: preface: the connection was reset ({exc!r})", item.body)
            return
        finally:
            await _close(writer)
        if data.startswith(b"HTTP/1.1 "):
            status = int(data.split()[1])
            self.tally.answers[f"HTTP/1.1 {status}"] += 1
            self.tally.refused(_refusal_name(_doc(data.partition(b"\r\n\r\n")[2])))
            if status >= 500:
                self.tally.fault(f"grpc: preface: HTTP/1.1 {status}", item.body)
        elif data:
            self.tally.server_closed["preface: frames, then the end (a GOAWAY)"] += 1
        else:
            self.tally.server_closed["preface: the end, no answer (not HTTP/2: RFC 9113 3.4)"] += 1

    async def _aside(self, item: GrpcInput) -> bool:
        if item.via_grpcio:
            await asyncio.to_thread(self._grpcio, item)
        elif item.kind == "preface":
            await self._preface(item)
        else:
            return False
        return True

    async def _send(self, peer: H2Peer, item: GrpcInput) -> None:
        sid = peer.start(item.headers, item.body, item.pieces)
        result = await peer.wait(sid, _deadline(INPUT_SECONDS))
        peer.forget(sid)
        if result.ended:
            self._judge(result, item)
        else:
            self.unanswered(peer, item)

    async def worker(self, inputs: collections.deque[GrpcInput]) -> None:
        await self.h2_worker(self.target.grpc_port, inputs, self._aside, self._send)

    async def probe(self) -> None:
        def call() -> bytes:
            assert self.channel is not None
            rpc = self.channel.unary_unary(SERVICE + "counts")
            answer: bytes = rpc(
                door_request(self.target.brain),
                metadata=[("authorization", f"Bearer {self.target.key}")],
                timeout=PROBE_SECONDS,
            )
            return answer

        try:
            answer = await asyncio.to_thread(call)
        except grpc.RpcError as error:
            raise Fault(f"grpc: counts failed: {error!r}") from None
        decoded = door_answer(b"\x00" + struct.pack(">I", len(answer)) + answer)
        if decoded is None or decoded[0] != "document" or "entities" not in decoded[1]:
            raise Fault(f"grpc: counts answered {decoded!r}")


# -- HTTP/3 ------------------------------------------------------------------------------------------------

H3_DATA, H3_HEADERS, H3_SETTINGS, H3_GOAWAY, H3_MAX_PUSH_ID, H3_CANCEL_PUSH, H3_PUSH_PROMISE = 0, 1, 4, 7, 0xD, 3, 5
H2_ONLY = (0x2, 0x6, 0x8, 0x9)  # PRIORITY, PING, WINDOW_UPDATE, CONTINUATION: reserved in HTTP/3 (RFC 9114 7.2.8)


def h3_frame(kind: int, payload: bytes, length: int | None = None) -> bytes:
    return encode_uint_var(kind) + encode_uint_var(len(payload) if length is None else length) + payload


@dataclass
class H3Result:
    headers: list[tuple[bytes, bytes]] = field(default_factory=list)
    data: bytearray = field(default_factory=bytearray)
    reset: int | None = None
    ended: bool = False

    @property
    def status(self) -> int | None:
        for k, v in self.headers:
            if k == b":status":
                return int(v)
        return None


class H3Client(QuicConnectionProtocol):
    """An aioquic HTTP/3 client that can also write any bytes on any stream."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.h3 = H3Connection(self._quic)
        self.results: dict[int, H3Result] = {}
        self.terminated: ConnectionTerminated | None = None
        self.client_error: str | None = None  # our own H3 layer refused what the server sent
        self.changed = asyncio.Event()

    def quic_event_received(self, event: QuicEvent) -> None:
        if isinstance(event, ConnectionTerminated):
            self.terminated = event
        elif isinstance(event, StreamReset) and event.stream_id in self.results:
            self.results[event.stream_id].reset = event.error_code
            self.results[event.stream_id].ended = True
        done_before = self.h3._is_done
        for h3_event in self.h3.handle_event(event):
            result = self.results.get(getattr(h3_event, "stream_id", -1))
            if result is None:
                continue
            if isinstance(h3_event, HeadersReceived):
                if not result.headers:
                    result.headers = list(h3_event.headers)
            elif isinstance(h3_event, DataReceived):
                result.data += h3_event.data
            if getattr(h3_event, "stream_ended", False):
                result.ended = True
        if self.h3._is_done and not done_before and self.terminated is None:
            self.client_error = "the client's HTTP/3 layer closed the connection over what the server sent"
        self.changed.set()

    def new_stream(self, unidirectional: bool = False) -> int:
        sid = self._quic.get_next_available_stream_id(is_unidirectional=unidirectional)
        self.results[sid] = H3Result()
        return sid

    def headers_block(self, sid: int, headers: list[tuple[bytes, bytes]]) -> bytes:
        """A HEADERS frame's payload for ``headers`` on ``sid`` (the QPACK encoder's updates sent on its stream)."""
        return self.h3._encode_headers(sid, headers)

    async def wait(self, until: Callable[[], bool], deadline: float) -> None:
        while not until() and self.terminated is None:
            self.changed.clear()
            await asyncio.wait_for(self.changed.wait(), _left(deadline))


@dataclass
class H3Input:
    kind: str
    action: Callable[[H3Client], int | None]  # writes the input; answers the stream whose answer counts, if any
    ends: bool = False  # leaves this client's own streams in a state it cannot go on from: reconnect after
    datagram: bytes | None = None
    shown: bytes = b""
    head: bool = False  # a HEAD request


class H3Fuzzer(Fuzzer):
    name = "h3"
    concurrency = 4

    def configuration(self) -> QuicConfiguration:
        configuration = QuicConfiguration(is_client=True, alpn_protocols=["h3"])
        configuration.verify_mode = ssl.CERT_NONE
        return configuration

    def request_headers(self, method: bytes = b"GET", path: str | None = None) -> list[tuple[bytes, bytes]]:
        return [
            (b":method", method),
            (b":scheme", b"https"),
            (b":authority", f"{HOST}:{self.target.h3_port}".encode()),
            (b":path", (path or f"/v1/brains/{self.target.brain}/counts").encode()),
            (b"authorization", f"Bearer {self.target.key}".encode()),
        ]

    # -- inputs

    def make(self, m: Maker) -> H3Input:
        kind = m.pick(
            (
                "body", "body", "headers", "headers", "frames", "frames", "truncated", "qpack", "uni", "control",
                "reset", "random", "datagram",
            )
        )  # fmt: skip
        return getattr(self, f"_make_{kind}")(m)

    def _make_body(self, m: Maker) -> H3Input:
        door = m.pick(DOORS)
        path = f"/v1/brains/{self.target.brain}/{door.replace('.', '/')}"
        msgpack_body = m.chance(0.3)
        body = m.packb(m.body()) if msgpack_body else m.dumps(m.body())
        body = m.mutate_text(body) if m.chance(0.5) else body
        headers = self.request_headers(b"POST", path)
        headers.append(
            (
                b"content-type",
                b"application/msgpack"
                if msgpack_body
                else m.pick((b"application/json", b"text/plain", b"application/x-www-form-urlencoded")),
            )
        )
        if m.chance(0.2):
            headers.append((b"content-length", str(len(body) + m.pick((-1, 1, 1000))).encode()))

        def act(c: H3Client) -> int:
            sid = c.new_stream()
            c.h3.send_headers(sid, headers)
            c.h3.send_data(sid, body, end_stream=True)
            return sid

        return H3Input("body", act, shown=body)

    def _make_headers(self, m: Maker) -> H3Input:
        headers = self.request_headers(m.pick((b"GET", b"POST", b"HEAD", b"OPTIONS", b"CONNECT", b"", b"get", b"G T")))
        for _ in range(m.rng.randint(1, 3)):
            roll = m.rng.randrange(9)
            if roll == 0 and headers:
                headers.pop(m.rng.randrange(len(headers)))
            elif roll == 1:
                headers.append((b"X-Upper", b"v"))
            elif roll == 2:
                headers.append((b":bogus", b"v"))
            elif roll == 3:
                headers.insert(0, (b"x-before", b"pseudo"))  # a regular field before the pseudo-headers
            elif roll == 4:
                headers.append(m.pick(((b":path", b"/again"), (b":method", b"GET"))))
            elif roll == 5:
                headers.append(
                    m.pick(
                        (
                            (b"connection", b"keep-alive"),
                            (b"transfer-encoding", b"chunked"),
                            (b"te", b"gzip"),
                            (b"upgrade", b"h2c"),
                        )
                    )
                )
            elif roll == 6:
                headers.append((b"x-v", m.pick((b"\r\n", b"\x00", b" lead", b"\xff", b"a" * 8_000))))
            elif roll == 7:
                headers = [
                    (
                        k,
                        m.pick((b"", b"relative", b"*", b"/v1/brains/notes/get/%zz", b"/%00", m.raw(1, 20)))
                        if k == b":path"
                        else v,
                    )
                    for k, v in headers
                ]
            else:
                headers.append((b"last-event-id", m.string()[:4000].encode("utf-8", "surrogatepass")))  # QPACK's limit

        def act(c: H3Client) -> int:
            sid = c.new_stream()
            c.h3.send_headers(sid, headers, end_stream=True)
            return sid

        head = any(k == b":method" and v == b"HEAD" for k, v in headers)
        return H3Input("headers", act, shown=repr(headers).encode()[:160], head=head)

    def _make_frames(self, m: Maker) -> H3Input:
        """Frames on a request stream that are not allowed there, or not in that order."""
        roll = m.rng.randrange(8)
        grease = 0x21 + 0x1F * m.rng.randint(0, 1000)

        def act(c: H3Client) -> int:
            sid = c.new_stream()
            block = h3_frame(H3_HEADERS, c.headers_block(sid, self.request_headers()))
            if roll == 0:
                data = h3_frame(H3_DATA, m.raw(0, 30)) + block
            elif roll == 1:
                data = block + h3_frame(m.pick(H2_ONLY), m.raw(0, 10))
            elif roll == 2:
                data = (
                    h3_frame(
                        m.pick((H3_SETTINGS, H3_GOAWAY, H3_MAX_PUSH_ID, H3_CANCEL_PUSH, H3_PUSH_PROMISE)),
                        encode_uint_var(m.rng.randint(0, 100)),
                    )
                    + block
                )
            elif roll == 3:
                data = h3_frame(grease, m.raw(0, 50)) + block + h3_frame(grease, m.raw(0, 50))  # unknown types: ignored
            elif roll == 4:
                data = block + h3_frame(H3_DATA, b"{}") + block + h3_frame(H3_DATA, b"x")  # DATA after trailers
            elif roll == 5:
                data = block + block + block
            elif roll == 6:
                data = h3_frame(H3_HEADERS, b"")
            else:
                data = block + h3_frame(H3_DATA, b"") * m.rng.randint(1, 50)
            c._quic.send_stream_data(sid, data, end_stream=True)
            return sid

        return H3Input(f"frames {roll}", act)

    def _make_truncated(self, m: Maker) -> H3Input:
        """A frame whose length runs past the end of its stream, or a varint cut short."""
        declared = m.pick((1, 100, 2**14, 2**30, 2**62 - 1))

        def act(c: H3Client) -> int:
            sid = c.new_stream()
            block = h3_frame(H3_HEADERS, c.headers_block(sid, self.request_headers()))
            if m.chance(0.5):
                data = block + h3_frame(m.pick((H3_DATA, H3_HEADERS)), b"xx", length=declared)
            else:
                data = block + m.pick((b"\x40", b"\x80\x00", b"\xc0\x00\x00", b"\x00\x80"))
            c._quic.send_stream_data(sid, data, end_stream=True)
            return sid

        return H3Input("truncated", act)

    def _make_qpack(self, m: Maker) -> H3Input:
        garbage = m.raw(1, 60) if m.chance(0.6) else b"\x00\x00" + m.raw(1, 30)

        def act(c: H3Client) -> int:
            sid = c.new_stream()
            c._quic.send_stream_data(sid, h3_frame(H3_HEADERS, garbage), end_stream=True)
            return sid

        return H3Input("qpack", act, shown=garbage)

    def _make_uni(self, m: Maker) -> H3Input:
        """A unidirectional stream of an unknown type (ignored), a second control stream, a push stream from a
        client, a second QPACK stream, or garbage on the QPACK streams this client already opened."""
        roll = m.rng.randrange(6)
        garbage = m.raw(1, 40)

        def act(c: H3Client) -> None:
            if roll == 4:
                c._quic.send_stream_data(c.h3._local_encoder_stream_id, garbage)
                return None
            if roll == 5:
                c._quic.send_stream_data(c.h3._local_decoder_stream_id, garbage)
                return None
            sid = c._quic.get_next_available_stream_id(is_unidirectional=True)
            kind = (0x21 + 0x1F * m.rng.randint(0, 100), 0x00, 0x01, m.pick((0x02, 0x03)))[roll]
            c._quic.send_stream_data(sid, encode_uint_var(kind) + garbage, end_stream=m.chance(0.5))
            return None

        return H3Input(f"uni {roll}", act, ends=roll >= 4, shown=garbage)

    def _make_control(self, m: Maker) -> H3Input:
        """Frames on this client's control stream: DATA or HEADERS there, a second SETTINGS, settings HTTP/2
        reserved, GOAWAY and MAX_PUSH_ID of every value, or garbage."""
        roll = m.rng.randrange(7)
        payload = m.raw(0, 30)

        def act(c: H3Client) -> None:
            if roll == 0:
                data = h3_frame(m.pick((H3_DATA, H3_HEADERS, H3_PUSH_PROMISE) + H2_ONLY), payload)
            elif roll == 1:
                data = h3_frame(H3_SETTINGS, b"")
            elif roll == 2:
                data = h3_frame(
                    H3_SETTINGS,
                    b"".join(
                        encode_uint_var(k) + encode_uint_var(m.rng.randint(0, 2**30))
                        for k in (m.pick((2, 3, 4, 5, 6, 7, 0x21)),)
                    ),
                    length=None,
                )
            elif roll == 3:
                data = h3_frame(H3_GOAWAY, encode_uint_var(m.pick((0, 1, 4, 2**62 - 1))))
            elif roll == 4:
                data = h3_frame(H3_MAX_PUSH_ID, encode_uint_var(m.rng.randint(0, 2**20)))
            elif roll == 5:
                data = h3_frame(0x21 + 0x1F * m.rng.randint(0, 10), payload)  # unknown: ignored
            else:
                data = payload
            c._quic.send_stream_data(c.h3._local_control_stream_id, data, end_stream=m.chance(0.1))

        return H3Input(f"control {roll}", act, ends=True, shown=payload)

    def _make_reset(self, m: Maker) -> H3Input:
        """A request begun and then reset (RESET_STREAM), or its answer refused (STOP_SENDING)."""
        stop = m.chance(0.4)
        code = m.pick((0x100, 0x10C, 0x102, 0, 2**62 - 1))
        headers = self.request_headers(b"POST", f"/v1/brains/{self.target.brain}/add")

        def act(c: H3Client) -> None:
            sid = c.new_stream()
            c.h3.send_headers(sid, headers, end_stream=stop)
            if stop:
                c._quic.stop_stream(sid, code)
            else:
                c._quic.send_stream_data(sid, h3_frame(H3_DATA, b'{"type":"thing"'), end_stream=False)
                c._quic.reset_stream(sid, code)
            return None

        return H3Input("reset", act)

    def _make_random(self, m: Maker) -> H3Input:
        garbage = m.raw(1, 200)

        def act(c: H3Client) -> int:
            sid = c.new_stream()
            c._quic.send_stream_data(sid, garbage, end_stream=True)
            return sid

        return H3Input("random", act, shown=garbage)

    def _make_datagram(self, m: Maker) -> H3Input:
        """A UDP datagram that is not QUIC, or a long header whose fields lie."""
        if m.chance(0.5):
            data = m.raw(1, 1300)
        else:
            data = (
                bytes((0xC0 | m.rng.randrange(64),))
                + struct.pack(">I", m.pick((1, 0, 0xFF00001D, 0x6B3343CF, m.rng.randrange(2**32))))
                + m.raw(0, 1200)
            )
        return H3Input("datagram", lambda c: None, datagram=data, shown=data)

    # -- delivery

    def _judge(self, result: H3Result, item: H3Input) -> None:
        if result.reset is not None:
            self.tally.answers[f"RESET_STREAM {result.reset:#x}"] += 1
            return
        status = result.status
        self.tally.answers[str(status)] += 1
        name = _refusal_name(_doc(bytes(result.data)))
        if name is not None:
            self.tally.refused(name)
        if status is not None and status >= 500 and status != 501:
            self.tally.internal += name == INTERNAL
            self.tally.fault(f"h3: {item.kind}: status {status} {name}", item.shown)

    async def _send(self, c: H3Client, item: H3Input) -> bool:
        """Write one input and a probe request after it; tally; False when the connection is done."""
        sid = item.action(c)
        if item.ends:
            # this client's own control or QPACK streams carry garbage now: a request after it may wait on
            # table state the garbage made up (a blocked stream, which is HTTP/3 working), so none is sent;
            # the server's answer is its CONNECTION_CLOSE, or nothing, and the next input takes a new connection
            c.transmit()
            with contextlib.suppress(TimeoutError):
                await c.wait(lambda: False, _deadline(0.3))
            self._closed(c, item)
            return False
        probe = c.new_stream()
        c.h3.send_headers(probe, self.request_headers(), end_stream=True)
        c.transmit()
        deadline = _deadline(INPUT_SECONDS)
        try:
            await c.wait(lambda: c.results[probe].ended, deadline)
            if sid is not None and c.terminated is None:
                with contextlib.suppress(TimeoutError):  # an input stream the server still waits on is let be
                    await c.wait(lambda: c.results[sid].ended, min(deadline, _deadline(0.5)))
        except TimeoutError:
            self.tally.fault(f"h3: {item.kind}: no answer to the request after it within {INPUT_SECONDS} s", item.shown)
            return False
        if sid is not None and c.results[sid].ended:
            self._judge(c.results.pop(sid), item)
        elif sid is not None and c.terminated is None:
            self.tally.answers[f"{item.kind}: unanswered"] += 1
        answer = c.results.pop(probe)
        if c.client_error is not None:
            if item.head:  # aioquic's client holds a HEAD answer's content-length to its (empty) body
                self.tally.answers["HEAD answered (aioquic's client then refuses its content-length)"] += 1
                return False
            self.tally.fault(f"h3: {item.kind}: {c.client_error}", item.shown)
        if self._closed(c, item):
            return False
        if answer.status != 200:
            self.tally.fault(f"h3: {item.kind}: the request after it was answered {answer.status}", item.shown)
        return not item.ends

    def _closed(self, c: H3Client, item: H3Input) -> bool:
        """True when the server closed the connection (its CONNECTION_CLOSE tallied)."""
        if c.terminated is None:
            return False
        code = c.terminated.error_code
        self.tally.server_closed[f"CONNECTION_CLOSE {code:#x} {c.terminated.reason_phrase[:60]}"] += 1
        if code in QUIC_INTERNAL:
            self.tally.internal += 1
            self.tally.fault(f"h3: {item.kind}: {QUIC_INTERNAL[code]} {c.terminated.reason_phrase}", item.shown)
        return True

    async def _connect(self, stack: contextlib.AsyncExitStack) -> H3Client:
        """A QUIC connection with the handshake done, within the deadline (aioquic's own wait has none)."""
        connecting = quic_connect(
            HOST, self.target.h3_port, configuration=self.configuration(), create_protocol=H3Client
        )
        client = await asyncio.wait_for(stack.enter_async_context(connecting), INPUT_SECONDS)
        assert isinstance(client, H3Client)
        return client

    async def worker(self, inputs: collections.deque[H3Input]) -> None:
        while inputs:
            async with contextlib.AsyncExitStack() as stack:
                client = await self._connect(stack)
                while inputs:
                    item = inputs.popleft()
                    self.tally.sent += 1
                    if item.datagram is not None:
                        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
                            udp.sendto(item.datagram, (HOST, self.target.h3_port))
                        self.tally.answers["datagram (no answer)"] += 1
                        continue
                    if not await self._send(client, item):
                        break
                if client.terminated is None:
                    self.tally.client_closed += 1
                    client.close()

    async def probe(self) -> None:
        async with contextlib.AsyncExitStack() as stack:
            client = await self._connect(stack)
            sid = client.new_stream()
            client.h3.send_headers(sid, self.request_headers(), end_stream=True)
            client.transmit()
            await client.wait(lambda: client.results[sid].ended, _deadline(PROBE_SECONDS))
            result = client.results[sid]
            doc = _doc(bytes(result.data))
            if result.status != 200 or not isinstance(doc, dict) or "entities" not in doc:
                raise Fault(f"h3: counts answered {result.status} {bytes(result.data)[:200]!r}")


# -- MCP: the messages, for both transports ----------------------------------------------------------------

# what a resource address may hold that no template expects: percent-escapes that decode to nothing (or to
# bytes that are no UTF-8), separators, dot segments, other schemes, a query, a fragment, and much of it
URI_GARBAGE = (
    "%", "%f", "%zz", "%ff", "%c0%80", "%00", "%2F", "..", "../..", "a/b/c", "?x=1", "#frag", "", " ", "\u00e9",
    "x" * 5000, "%" * 100, "brainy:", "http://x/y", "brainy:///counts", "//", "a%2Fb/history",
)  # fmt: skip


def tool_name(door: str) -> str:
    layer = D.BY_NAME[door].layer
    return f"brainy_{door}" if layer in ("engine", "vfs") else door.replace(".", "_")


def mcp_message(m: Maker, brain: str) -> bytes:
    """One JSON-RPC message, valid in shape and made wrong somewhere, or its text mutated, or not JSON-RPC."""
    roll = m.rng.randrange(14)
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": m.rng.randint(1, 10**6)}
    if roll <= 3:
        door = m.pick(READS) if m.chance(0.75) else m.pick(DOORS)
        arguments: dict[str, Any] = {}
        if m.chance(0.5):
            arguments["brain"] = brain if m.chance(0.7) else m.value()
        if m.chance(0.6):
            arguments["body"] = m.body()
        if m.chance(0.3):
            arguments["id"] = m.pick((f"fz-{m.rng.randint(0, 20)}", m.value()))
        if m.chance(0.2):
            arguments[m.string()] = m.value()
        params: Any = {
            "name": tool_name(door) if m.chance(0.85) else m.value(),
            "arguments": arguments if m.chance(0.9) else m.value(),
        }
        message |= {"method": "tools/call", "params": params}
    elif roll == 4:
        message |= {
            "method": "resources/read",
            "params": {
                "uri": m.pick(
                    (
                        f"brainy://{brain}/counts",
                        f"brainy://{brain}/entities/{m.string()}",
                        f"brainy://{brain}/entities/x/history",
                        "brainy://",
                        "brainy://skills/",
                        f"brainy://skills/{m.string()}",
                        f"brainy://{brain}/entities/{m.pick(URI_GARBAGE)}",
                        f"brainy://{m.pick(URI_GARBAGE)}/counts",
                        f"brainy://skills/{m.pick(URI_GARBAGE)}",
                        f"brainy://{brain}/entities/x/history/{m.pick(URI_GARBAGE)}",
                        m.pick(URI_GARBAGE),
                        m.string(),
                        m.value(),
                    )
                )
            },
        }
    elif roll == 5:
        message |= {
            "method": m.pick(
                (
                    "tools/list",
                    "resources/list",
                    "resources/templates/list",
                    "ping",
                    "initialize",
                    "completion/complete",
                    "logging/setLevel",
                    "prompts/list",
                )
            )
        }
        if m.chance(0.6):
            message["params"] = m.pick(
                ({"cursor": m.value()}, m.value(), {"protocolVersion": m.value(), "capabilities": m.value()})
            )
    elif roll == 6:  # an id that is no id, or one past every integer type
        message |= {
            "method": "ping",
            "id": m.pick((None, True, 1.5, [], {}, 2**64, -(2**63) - 1, 10**30, "x" * 10_000, m.value())),
        }
    elif roll == 7:
        message |= {"jsonrpc": m.pick(("1.0", "2", 2.0, None, "", "2.0 ", [])), "method": "ping"}
        if m.chance(0.3):
            del message["jsonrpc"]
    elif roll == 8:
        message |= {"method": m.pick((None, 1, "", [], {}, "x" * 5000, m.string())), "params": m.value()}
    elif roll == 9:  # a notification, or a response from the client
        message = m.pick(
            (
                {"jsonrpc": "2.0", "method": m.pick(("notifications/cancelled", "notifications/initialized", "notifications/x")), "params": m.value()},
                {"jsonrpc": "2.0", "id": m.value(), "result": m.value()},
                {"jsonrpc": "2.0", "id": m.value(), "error": m.value()},
                {"jsonrpc": "2.0", "id": 1, "result": {}, "error": {}},
            )
        )  # fmt: skip
    elif roll == 10:
        return m.dumps([{"jsonrpc": "2.0", "id": i, "method": "ping"} for i in range(m.rng.randint(0, 3))])  # a batch
    elif roll == 11:
        depth = m.deep_depth()
        where = m.pick(("id", "params", "name", "arguments", "body"))
        nested = m.nested(depth)
        if where == "id":
            return ('{"jsonrpc":"2.0","id":' + nested + ',"method":"ping"}').encode()
        if where == "params":
            return ('{"jsonrpc":"2.0","id":1,"method":"tools/list","params":' + nested + "}").encode()
        if where == "name":
            return ('{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":' + nested + "}}").encode()
        return (
            '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"brainy_add","arguments":{"body":{"type":"thing","metadata":'
            + nested
            + "}}}}"
        ).encode()
    elif roll == 12:
        return m.dumps(m.value())
    else:
        return m.raw(0, 120)
    text = m.dumps(message)
    return m.mutate_text(text) if m.chance(0.3) else text


def judge_reply(tally: Tally, reply: Any, shown: bytes, where: str) -> None:
    """Tally one JSON-RPC reply: its error code, or its tool result's refusal; a -32603 or an InternalError is a
    500."""
    if not isinstance(reply, dict) or reply.get("jsonrpc") != "2.0" or ("result" in reply) == ("error" in reply):
        tally.fault(f"{where}: a reply that is not one JSON-RPC response: {str(reply)[:200]}", shown)
        return
    error = reply.get("error")
    if isinstance(error, dict):
        code = error.get("code")
        tally.answers[f"error {code}"] += 1
        data = error.get("data")
        name = data.get("name") if isinstance(data, dict) else None
        if name is not None:
            tally.refused(name)
        if code == JSONRPC_INTERNAL or name == INTERNAL:
            tally.internal += name != INTERNAL  # an InternalError was counted by refused()
            tally.fault(f"{where}: {code} {error.get('message')}", shown)
        return
    result = reply["result"]
    if isinstance(result, dict) and result.get("isError"):
        tally.answers["result isError"] += 1
        content = result.get("structuredContent")
        name = _refusal_name(content)
        tally.refused(name)
        if name == INTERNAL:
            tally.fault(f"{where}: a tool answered InternalError", shown)
    else:
        tally.answers["result"] += 1


INITIALIZE = {"protocolVersion": MCP_VERSION, "capabilities": {}, "clientInfo": {"name": "fuzz", "version": "1"}}


# -- MCP over streamable HTTP ------------------------------------------------------------------------------


@dataclass
class McpInput:
    kind: str
    body: bytes
    method: str = "POST"
    headers: dict[str, str | None] = field(default_factory=dict)  # over the defaults; None drops one


class McpHttpFuzzer(Fuzzer):
    name = "mcp-http"

    def make(self, m: Maker) -> McpInput:
        body = mcp_message(m, self.target.brain)
        if m.chance(0.7):
            return McpInput("message", body)
        headers: dict[str, str | None] = {}
        method = "POST"
        for _ in range(m.rng.randint(1, 3)):
            roll = m.rng.randrange(9)
            if roll == 0:
                headers["MCP-Protocol-Version"] = m.pick(
                    ("2024-11-05", "2025-03-26", "", " 2025-06-18 ", "x" * 300, "2025-06-18, 2024-11-05")
                )
            elif roll == 1:
                headers["Mcp-Session-Id"] = m.pick(("", " ", "nope", "x" * 5000, "\x7f", None))  # type: ignore[arg-type]
            elif roll == 2:
                headers["Content-Type"] = m.pick(
                    (
                        "application/msgpack",
                        "text/plain",
                        "",
                        "application/json; charset=latin-1",
                        "application/vnd+json",
                        "multipart/form-data; boundary=x",
                        None,
                    )
                )  # type: ignore[arg-type]
            elif roll == 3:
                headers["Origin"] = m.pick(
                    (
                        "http://evil.example",
                        "http://[::1",
                        "http://[::1]:8080",
                        "null",
                        "http://%zz",
                        "file://",
                        "http://127.0.0.1:99999",
                        "https://localhost.",
                        "http://[fe80::1%25eth0]",
                        "http://" + "a" * 300,
                        "http://[",
                        "://",
                    )
                )
            elif roll == 4:
                headers["Authorization"] = m.pick(
                    ("", "Bearer", "Bearer ", "Basic eA==", "Bearer bk1.a.b", "Bearer " + "k" * 5000, None)
                )  # type: ignore[arg-type]
            elif roll == 5:
                method = m.pick(("GET", "DELETE", "PUT", "PATCH", "HEAD", "OPTIONS"))
            elif roll == 6:
                headers["Accept"] = m.pick(("text/html", "", "application/json", "*/*;q=x"))
            elif roll == 7:
                headers["Last-Event-ID"] = m.string().replace("\r", "").replace("\n", "")
            else:
                headers["Content-Encoding"] = m.pick(("gzip", "br", "x"))
        if method == "DELETE" and "Mcp-Session-Id" not in headers and m.chance(0.7):
            headers["Mcp-Session-Id"] = "not-a-session"  # the session this worker holds ends only now and then
        return McpInput("headers", body, method, headers)

    async def _connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter, str]:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(HOST, self.target.server.port), INPUT_SECONDS)
        body = json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": INITIALIZE}).encode()
        writer.write(h1_request("POST", "/mcp", self._headers({}, None), body))
        answer = await read_answer(reader, _deadline(INPUT_SECONDS))
        session = answer.headers.get("mcp-session-id")
        if answer.status != 200 or not session:
            raise Fault(f"mcp-http: initialize answered {answer.status} {answer.body[:200]!r}")
        note = json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}).encode()
        writer.write(h1_request("POST", "/mcp", self._headers({}, session), note))
        answer = await read_answer(reader, _deadline(INPUT_SECONDS))
        if answer.status != 202:
            raise Fault(f"mcp-http: notifications/initialized answered {answer.status}")
        return reader, writer, session

    def _headers(self, over: dict[str, str | None], session: str | None) -> list[tuple[str, str]]:
        headers: dict[str, str | None] = {
            "Authorization": f"Bearer {self.target.key}",
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
        }
        if session is not None:
            headers |= {"Mcp-Session-Id": session, "MCP-Protocol-Version": MCP_VERSION}
        headers |= over
        return [(k, v) for k, v in headers.items() if v is not None]

    def _judge(self, answer: H1Answer, item: McpInput) -> None:
        self.tally.answers[f"HTTP {answer.status}"] += 1
        doc = _doc(answer.body)
        if answer.status >= 500:
            self.tally.internal += 1
            self.tally.fault(f"mcp-http: {item.kind}: status {answer.status} {answer.body[:200]!r}", item.body)
            return
        if (answer.status in (202, 204) or item.method in ("HEAD", "DELETE")) and not answer.body:
            return  # accepted, a HEAD's head, or a session ended
        if answer.status == 200 or (isinstance(doc, dict) and doc.get("jsonrpc") == "2.0"):
            judge_reply(self.tally, doc, item.body, f"mcp-http {item.kind}")
        else:  # a refusal before MCP was reached (405, 401, a body the h1 layer refused)
            self.tally.refused(_refusal_name(doc))

    async def worker(self, inputs: collections.deque[McpInput]) -> None:
        conn: tuple[asyncio.StreamReader, asyncio.StreamWriter, str] | None = None
        try:
            while inputs:
                item = inputs.popleft()
                self.tally.sent += 1
                if conn is None:
                    conn = await self._connect()
                reader, writer, session = conn
                try:
                    writer.write(h1_request(item.method, "/mcp", self._headers(item.headers, session), item.body))
                    answer = await read_answer(reader, _deadline(INPUT_SECONDS), head=item.method == "HEAD")
                except TimeoutError:
                    self.tally.fault(f"mcp-http: {item.kind}: no answer within {INPUT_SECONDS} s", item.body)
                    await _close(writer)
                    conn = None
                    continue
                except (asyncio.IncompleteReadError, ConnectionError) as exc:
                    self.tally.fault(f"mcp-http: {item.kind}: the connection closed unanswered ({exc!r})", item.body)
                    await _close(writer)
                    conn = None
                    continue
                self._judge(answer, item)
                if answer.headers.get("connection", "").lower() == "close":
                    self.tally.server_closed["Connection: close"] += 1
                    await _close(writer)
                    conn = None
                elif item.method == "DELETE" and item.headers.get("Mcp-Session-Id", session) == session:
                    await _close(writer)  # the session ended: the next input opens another
                    conn = None
        finally:
            if conn is not None:
                await _close(conn[1])

    async def probe(self) -> None:
        reader, writer, session = await self._connect()
        try:
            body = json.dumps(
                {
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "tools/call",
                    "params": {"name": "brainy_counts", "arguments": {}},
                }
            ).encode()
            writer.write(h1_request("POST", "/mcp", self._headers({}, session), body))
            answer = await read_answer(reader, _deadline(PROBE_SECONDS))
            doc = _doc(answer.body)
            result = doc.get("result") if isinstance(doc, dict) else None
            if (
                answer.status != 200
                or not isinstance(result, dict)
                or result.get("isError")
                or "entities" not in result.get("structuredContent", {})
            ):
                raise Fault(f"mcp-http: brainy_counts answered {answer.status} {answer.body[:200]!r}")
        finally:
            await _close(writer)


# -- MCP over stdio ----------------------------------------------------------------------------------------


class McpStdioFuzzer(Fuzzer):
    name = "mcp-stdio"
    concurrency = 1
    GROUP = 16  # inputs written before their answers are read

    def __init__(self, target: Target, tally: Tally) -> None:
        super().__init__(target, tally)
        self.proc: asyncio.subprocess.Process | None = None
        self.lines: asyncio.Queue[bytes] = asyncio.Queue()
        self.reader_task: asyncio.Task[None] | None = None
        self.log_path = target.directory / "mcp-stdio.log"
        self._log_at = 0
        self._n = 0

    def make(self, m: Maker) -> bytes:
        roll = m.rng.random()
        if roll < 0.75:
            line = mcp_message(m, "scratch")
        elif roll < 0.85:
            line = m.raw(0, 300)
        elif roll < 0.9:
            line = m.pick((b"", b"\r", b"\r\n", b" \t ", b"\x00", b"\n\n\n", b"{\r\n}"))
        elif roll < 0.97:
            line = (
                b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"'
                + b"p" * m.pick((10_000, 100_000, 1_000_000))
                + b'"}}'
            )
        else:
            line = b'{"jsonrpc":"2.0","id":1,"method":"ping","params":' + m.nested(m.deep_depth()).encode() + b"}"
        return line

    async def start(self) -> None:
        env = dict(os.environ, BRAINY_KEY=self.target.key, PYTHONUNBUFFERED="1")
        self.log = open(self.log_path, "ab")  # noqa: SIM115 - held for the process's life
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "brainy.cli", "mcp", "--brain", str(self.target.stdio_store), "--keys", str(self.target.stdio_keys),
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=self.log, env=env, cwd=self.target.directory, limit=1 << 24,
        )  # fmt: skip
        self.reader_task = asyncio.create_task(self._read())
        replies = await self._exchange(
            [json.dumps({"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": INITIALIZE}).encode()],
            probe=False,
        )
        if not any(isinstance(r, dict) and r.get("id") == "init" and "result" in r for r in replies):
            raise Fault(f"mcp-stdio: initialize answered {replies!r}")
        assert self.proc.stdin is not None
        self.proc.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')

    async def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        while True:
            line = await self.proc.stdout.readline()
            await self.lines.put(line)
            if not line:
                return

    async def stop(self) -> None:
        if self.proc is not None:
            if self.proc.stdin is not None:
                self.proc.stdin.close()
            try:
                code = await asyncio.wait_for(self.proc.wait(), 30)
                if code != 0:
                    self.tally.fault(f"mcp-stdio: brainy mcp exited {code} at the end of its input")
            except TimeoutError:
                self.proc.kill()
                await self.proc.wait()
                self.tally.fault("mcp-stdio: brainy mcp did not exit at the end of its input")
        if self.reader_task is not None:
            self.reader_task.cancel()
        self.log.close()
        self.tally.logged += len(self.new_log_faults())

    def new_log_faults(self) -> list[str]:
        with open(self.log_path, "rb") as log:
            log.seek(self._log_at)
            text = log.read()
            self._log_at = log.tell()
        return [line for line in text.decode(errors="replace").splitlines() if any(f in line for f in LOG_FAULTS)]

    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    async def _exchange(self, lines: list[bytes], probe: bool = True) -> list[Any]:
        """Write ``lines``, each followed by a ping whose answer marks the end of its answers; the replies."""
        assert self.proc is not None and self.proc.stdin is not None
        last = None
        for line in lines:
            self._n += 1
            last = f"probe-{self._n}"
            self.proc.stdin.write(
                line + b"\n" + (b'{"jsonrpc":"2.0","id":"%s","method":"ping"}\n' % last.encode() if probe else b"")
            )
        await asyncio.wait_for(self.proc.stdin.drain(), INPUT_SECONDS * 3)
        replies: list[Any] = []
        deadline = _deadline(INPUT_SECONDS * 3)
        while True:
            raw = await asyncio.wait_for(self.lines.get(), _left(deadline))
            if not raw:
                raise Fault(f"mcp-stdio: brainy mcp closed its stdout (exit {self.proc.returncode})")
            if not raw.endswith(b"\n"):
                raise Fault(f"mcp-stdio: a reply line without its newline: {raw[:200]!r}")
            reply = _doc(raw)
            replies.append(reply)
            if not probe and isinstance(reply, dict) and reply.get("id") == "init":
                return replies
            if isinstance(reply, dict) and reply.get("id") == last:
                return replies

    async def worker(self, inputs: collections.deque[bytes]) -> None:
        while inputs:
            group = [inputs.popleft() for _ in range(min(self.GROUP, len(inputs)))]
            self.tally.sent += len(group)
            try:
                replies = await self._exchange(group)
            except TimeoutError:
                self.tally.fault(f"mcp-stdio: no answer to a group within {INPUT_SECONDS * 3} s", group[0])
                raise Fault("mcp-stdio: the process stopped answering") from None
            for reply in replies:
                if isinstance(reply, dict) and str(reply.get("id", "")).startswith("probe-"):
                    if reply.get("result") != {}:
                        self.tally.fault(f"mcp-stdio: a ping after an input answered {reply!r}", b"")
                    continue
                judge_reply(self.tally, reply, b"".join(group)[:160], "mcp-stdio")

    async def probe(self) -> None:
        if self.proc is None or self.proc.returncode is not None:
            raise Fault("mcp-stdio: brainy mcp is not running")
        line = json.dumps(
            {
                "jsonrpc": "2.0",
                "id": "counts",
                "method": "tools/call",
                "params": {"name": "brainy_counts", "arguments": {}},
            }
        ).encode()
        replies = await self._exchange([line])
        found = [r for r in replies if isinstance(r, dict) and r.get("id") == "counts"]
        result = found[0].get("result") if found else None
        if (
            not isinstance(result, dict)
            or result.get("isError")
            or "entities" not in result.get("structuredContent", {})
        ):
            raise Fault(f"mcp-stdio: brainy_counts answered {found!r}")


# -- the change stream's resume headers --------------------------------------------------------------------


@dataclass
class SseInput:
    kind: str
    headers: list[tuple[str, bytes]]  # the request's fields past Host and Authorization
    query: str
    h2: bool

    @property
    def shown(self) -> bytes:
        return repr(self).encode()


class SseFuzzer(Fuzzer):
    name = "sse"
    COMMITS = 6  # written before the first batch, so Last-Event-ID has generations to name

    def _value(self, m: Maker) -> bytes:
        roll = m.rng.randrange(12)
        g = m.rng.randint(0, self.COMMITS + 2)
        if roll == 0:
            return f"{g}.{m.rng.randint(0, 3)}".encode()  # valid, or past the head
        if roll == 1:
            return m.pick((b"-1", b"-1.0", b"3.-1", b"-0.0", b"- 1.0", b"0.-0"))
        if roll == 2:
            return m.pick(
                (
                    b"9" * 30 + b".0",
                    b"1." + b"9" * 30,
                    b"9" * 4300 + b".0",
                    b"9" * 5000 + b".0",
                    b"1." + b"9" * 5000,
                    b"18446744073709551616.0",
                    b"9223372036854775808.1",
                )
            )
        if roll == 3:
            return m.pick(
                (
                    b"",
                    b" ",
                    b"abc",
                    b"3.x",
                    b"3",
                    b"3.",
                    b".3",
                    b"3..0",
                    b"3.0.0",
                    b"0x10.0",
                    b"1e3.0",
                    b"+3.0",
                    b"3,0",
                    b"3.0 junk",
                )
            )
        if roll == 4:  # digits that are not ASCII: superscripts (Latin-1), fullwidth, Arabic-Indic, as UTF-8 or Latin-1
            return m.pick(
                ("\u00b2.0", "1.\u00b9", "\u00b3.\u00b2", "\uff13.\uff10", "\u0663.\u0660", "\u2460.0", "\u00bd.0")
            ).encode(m.pick(("utf-8", "latin-1")), "replace")
        if roll == 5:
            return m.pick((b"\t3.0 ", b"3 .0", b" 3.0", b"3.0\t", b"\x0b3.0", b"\xa03.0"))
        if roll == 6:
            return m.pick((b"\x00", b"\x7f", b"3.0\x00", b"\x01\x02", b"\r", b"\xff\xfe"))
        if roll == 7:
            return b"1.0" * m.pick((100, 5000, 21000))
        if roll == 8:
            return m.raw(1, 40)
        if roll == 9:
            return m.string().encode("utf-8", "surrogatepass")
        if roll == 10:
            return f"{2**63}.{2**63}".encode()
        return f"{g}.{m.pick((0, 1, 2, 2**31, 2**64))}".encode()

    def _query(self, m: Maker) -> str:
        parts = []
        for _ in range(m.rng.randint(0, 3)):
            name = m.pick(("since", "limit", "since", "x", "brain", "since[]", "%73ince"))
            value = m.pick(
                (
                    "0",
                    "1",
                    "-1",
                    "head",
                    "HEAD",
                    "1.5",
                    "1e3",
                    "",
                    "%zz",
                    "%00",
                    "9" * 30,
                    "9" * 5000,
                    str(2**63),
                    "%C0%80",
                    "x",
                    "0x1",
                    "\u00b2".encode().decode("latin-1"),
                    "true",
                    "null",
                )
            )
            parts.append(f"{name}={value}" if m.chance(0.9) else name)
        return "&".join(parts)

    def make(self, m: Maker) -> SseInput:
        headers: list[tuple[str, bytes]] = [("accept", b"text/event-stream")]
        kind = m.pick(("last-event-id", "last-event-id", "last-event-id", "query", "both", "accept", "twice"))
        if kind in ("last-event-id", "both", "twice"):
            headers.append((m.pick(("last-event-id", "Last-Event-ID", "LAST-EVENT-ID")), self._value(m)))
        if kind == "twice":
            headers.append(("last-event-id", self._value(m)))
        if kind == "accept":
            headers[0] = (
                "accept",
                m.pick(
                    (
                        b"text/event-stream;q=0",
                        b"*/*",
                        b"text/*",
                        b"",
                        b"application/json, text/event-stream",
                        b"text/event-stream; charset=\xff",
                    )
                ),
            )
            headers.append(("last-event-id", self._value(m)))
        query = self._query(m) if kind in ("query", "both") or m.chance(0.2) else ""
        return SseInput(kind, headers, query, h2=m.chance(0.25))

    async def start(self) -> None:
        """A few commits, so Last-Event-ID has generations to resume at, and this server holds the writer lease
        (the stream is held: it is read to its caught-up and then let go)."""
        reader, writer = await asyncio.wait_for(asyncio.open_connection(HOST, self.target.server.port), INPUT_SECONDS)
        try:
            for i in range(self.COMMITS):
                body = json.dumps({"type": "thing", "id": f"sse-{i}", "data": f"commit {i}"}).encode()
                headers = [("Authorization", f"Bearer {self.target.key}"), ("Content-Type", "application/json")]
                writer.write(h1_request("POST", f"/v1/brains/{self.target.brain}/add", headers, body))
                answer = await read_answer(reader, _deadline(INPUT_SECONDS))
                if answer.status != 200:
                    raise Fault(f"sse: add answered {answer.status} {answer.body[:200]!r}")
        finally:
            await _close(writer)

    def _path(self, query: str) -> str:
        return f"/v1/brains/{self.target.brain}/changes" + (f"?{query}" if query else "")

    @staticmethod
    def _events(data: bytes) -> tuple[bool, bool]:
        """(caught up, ended by an error event) of the stream's bytes so far."""
        return b"event: caught-up" in data, b"event: error" in data

    def _ended(self, data: bytes, item: SseInput) -> None:
        """A stream that ended: the refusal of its error event, if it has one, tallied."""
        if b"event: error\ndata: " in data:
            line = data.split(b"event: error\ndata: ", 1)[1].split(b"\n", 1)[0]
            name = _refusal_name(_doc(line))
            self.tally.refused(name)
            if name == INTERNAL:
                self.tally.fault("sse: the stream ended with InternalError", item.shown)

    def _judge_refusal(self, status: int | None, body: bytes, item: SseInput) -> None:
        self.tally.answers[f"{status}"] += 1
        name = _refusal_name(_doc(body))
        if name is not None:  # else the plain changes door's answer (no event stream was asked for)
            self.tally.refused(name)
        if status is None or status >= 500:
            self.tally.internal += name != INTERNAL and status is not None
            self.tally.fault(f"sse: {item.kind}: status {status} {body[:200]!r}", item.shown)

    async def _h1(self, item: SseInput) -> None:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(HOST, self.target.server.port), INPUT_SECONDS)
        try:
            head = f"GET {self._path(item.query)} HTTP/1.1\r\nHost: {HOST}\r\nAuthorization: Bearer {self.target.key}\r\n".encode()
            writer.write(head + b"".join(k.encode() + b": " + v + b"\r\n" for k, v in item.headers) + b"\r\n")
            deadline = _deadline(INPUT_SECONDS)
            answer = await read_answer(reader, deadline)
            if not answer.chunked:
                self._judge_refusal(answer.status, answer.body, item)
                return
            seen = bytearray()
            while True:
                chunk = await read_chunk(reader, deadline)
                seen += chunk
                caught_up, failed = self._events(bytes(seen))
                if not chunk or failed:
                    self.tally.answers[f"{answer.status} stream ended"] += 1
                    self._ended(bytes(seen), item)
                    return
                if caught_up:
                    self.tally.answers[f"{answer.status} caught-up"] += 1
                    self.tally.client_closed += 1  # a held stream: let go once caught up
                    return
        except TimeoutError:
            self.tally.fault(f"sse: {item.kind}: no answer within {INPUT_SECONDS} s", item.shown)
        except (asyncio.IncompleteReadError, ConnectionError) as exc:
            self.tally.fault(f"sse: {item.kind}: the connection closed mid-answer ({exc!r})", item.shown)
        finally:
            await _close(writer)

    async def _h2(self, peer: H2Peer, item: SseInput) -> None:
        headers = [
            (b":method", b"GET"),
            (b":scheme", b"http"),
            (b":path", self._path(item.query).encode()),
            (b":authority", HOST.encode()),
        ]
        headers += [(b"authorization", f"Bearer {self.target.key}".encode())] + [
            (k.lower().encode(), v) for k, v in item.headers
        ]
        sid = peer.start(headers, None)
        result = await peer.wait(sid, _deadline(INPUT_SECONDS), until=lambda r: any(self._events(bytes(r.data))))
        data = bytes(result.data)
        caught_up, failed = self._events(data)
        streamed = result.field(b"content-type") == b"text/event-stream; charset=utf-8"
        if result.reset is not None:
            self.tally.answers[f"RST_STREAM {result.reset}"] += 1
        elif streamed and (caught_up or failed or result.ended):
            self.tally.answers[f"{result.status} {'caught-up' if caught_up else 'stream ended'}"] += 1
            self._ended(data, item)
            if not result.ended:  # a held stream: let go once caught up
                peer.conn.reset_stream(sid)
                peer.flush()
                self.tally.client_closed += 1
        elif result.ended:
            self._judge_refusal(result.status, data, item)
        else:
            self.unanswered(peer, item)
        peer.forget(sid)

    async def _aside(self, item: SseInput) -> bool:
        if item.h2:
            return False
        await self._h1(item)
        return True

    async def worker(self, inputs: collections.deque[SseInput]) -> None:
        await self.h2_worker(self.target.server.port, inputs, self._aside, self._h2)

    async def probe(self) -> None:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(HOST, self.target.server.port), PROBE_SECONDS)
        try:
            headers = [
                ("Authorization", f"Bearer {self.target.key}"),
                ("Accept", "text/event-stream"),
                ("Last-Event-ID", "0.0"),  # from the start: the first frame is 1.0 whatever the run wrote
            ]
            writer.write(h1_request("GET", self._path(""), headers))
            deadline = _deadline(PROBE_SECONDS)
            answer = await read_answer(reader, deadline)
            seen = b""
            while answer.chunked and b"event: caught-up" not in seen:
                chunk = await read_chunk(reader, deadline)
                if not chunk:
                    break
                seen += chunk
            if (
                answer.status != 200
                or not seen.startswith(b"id: 1.0\nevent: change")
                or b"event: caught-up" not in seen
            ):
                raise Fault(f"sse: a resume at 0.0 answered {answer.status} {seen[:300]!r}")
        finally:
            await _close(writer)


FUZZERS: dict[str, type[Fuzzer]] = {
    "ws": WsFuzzer,
    "grpc": GrpcFuzzer,
    "h3": H3Fuzzer,
    "mcp-http": McpHttpFuzzer,
    "mcp-stdio": McpStdioFuzzer,
    "sse": SseFuzzer,
}


# -- the run -----------------------------------------------------------------------------------------------


async def fuzz_transport(
    target: Target,
    name: str,
    count: int,
    seed: int,
    batch: int = BATCH,
    rss_bound_mib: float = RSS_BOUND_MIB,
    report: Callable[[str], None] = lambda line: None,
) -> Tally:
    """Send ``count`` malformed inputs on transport ``name``, checking after every ``batch`` of them; the tally.
    A fault is recorded in the tally (a check that cannot go on ends the run early)."""
    tally = Tally(name)
    fuzzer = FUZZERS[name](target, tally)
    maker = Maker(random.Random(f"{seed}:{name}"))
    started = time.monotonic()
    target.new_log_faults()  # what was logged before this transport is not its
    await asyncio.wait_for(fuzzer.start(), BATCH_SECONDS)
    try:
        done = 0
        while done < count:
            inputs = [fuzzer.make(maker) for _ in range(min(batch, count - done))]
            batch_task = asyncio.ensure_future(fuzzer.batch(inputs))
            finished, _ = await asyncio.wait([batch_task], timeout=BATCH_SECONDS)
            if not finished:
                batch_task.cancel()
                tally.fault(f"{name}: a batch took over {BATCH_SECONDS} s")
                break
            error = batch_task.exception()
            if error is not None:  # a connection that could not be opened, a process gone: the run cannot go on
                tally.fault(f"{name}: the batch could not go on: {error!r}")
                traceback.print_exception(error)
                break
            done += len(inputs)
            if not await check(fuzzer, tally):
                break
            report(
                f"{name}: {done}/{count} sent, {tally.internal} 500s, {len(tally.faults)} faults, "
                f"rss {tally.rss_kib[-1] // 1024} MiB, {time.monotonic() - started:.0f} s"
            )
    finally:
        await fuzzer.stop()
        tally.seconds = time.monotonic() - started
    if len(tally.rss_kib) >= 2 and tally.rss_kib[-1] - tally.rss_kib[0] > rss_bound_mib * 1024:
        tally.fault(
            f"{name}: the resident set grew {(tally.rss_kib[-1] - tally.rss_kib[0]) / 1024:.1f} MiB over its first batch's level"
        )
    return tally


async def check(fuzzer: Fuzzer, tally: Tally) -> bool:
    """After a batch: the process alive, a valid request answered, the log clean, the resident set sampled.
    False when the server is gone (nothing more can be learnt)."""
    target = fuzzer.target
    if not target.alive():
        tally.fault(f"{tally.transport}: the server exited ({target.server.proc.returncode})")
        return False
    try:
        await asyncio.wait_for(fuzzer.probe(), PROBE_SECONDS * 2)
        tally.probes += 1
    except (Fault, TimeoutError, OSError, asyncio.IncompleteReadError) as exc:
        tally.fault(f"{tally.transport}: the valid request after the batch failed: {exc!r}")
    logged = target.new_log_faults()
    if isinstance(fuzzer, McpStdioFuzzer):
        logged += fuzzer.new_log_faults()
    tally.logged += len(logged)
    for line in logged[:5]:
        tally.fault(f"{tally.transport}: logged: {line[:300]}")
    tally.rss_kib.append(rss_kib(fuzzer.pid()))
    return target.alive()


def table(tallies: list[Tally]) -> str:
    """The totals, one block per transport."""
    lines = [
        f"{'transport':<10} {'sent':>6} {'500s':>5} {'faults':>6} {'probes':>6} {'srv closed':>10} "
        f"{'cli closed':>10} {'rss first/last/max MiB':>22} {'s':>5}"
    ]
    for t in tallies:
        rss = t.rss_kib or [0]
        mib = f"{rss[0] / 1024:.1f}/{rss[-1] / 1024:.1f}/{max(rss) / 1024:.1f}"
        lines.append(
            f"{t.transport:<10} {t.sent:>6} {t.internal:>5} {len(t.faults) + t.logged:>6} {t.probes:>6} "
            f"{sum(t.server_closed.values()):>10} {t.client_closed:>10} {mib:>22} {t.seconds:>5.0f}"
        )
    for t in tallies:
        lines.append(f"\n{t.transport}:")
        lines.append("  answers: " + ", ".join(f"{k} {v}" for k, v in t.answers.most_common()))
        lines.append("  refusals: " + ", ".join(f"{k} {v}" for k, v in t.refusals.most_common()))
        lines.append(
            "  closed by the server: " + (", ".join(f"{k} {v}" for k, v in t.server_closed.most_common(12)) or "none")
        )
        for fault in t.faults[:20]:
            lines.append(f"  FAULT {fault}")
    return "\n".join(lines)


async def run(target: Target, names: list[str], count: int, seed: int, batch: int, rss_bound_mib: float) -> list[Tally]:
    tallies = []
    for name in names:
        tallies.append(
            await fuzz_transport(target, name, count, seed, batch, rss_bound_mib, lambda line: print(line, flush=True))
        )
    return tallies


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--count", type=int, default=COUNT, help="inputs per transport")
    parser.add_argument("--seed", type=int, default=None, help="random when not given; printed either way")
    parser.add_argument(
        "--transport", default=",".join(TRANSPORTS), help=f"comma-separated, of {', '.join(TRANSPORTS)}"
    )
    parser.add_argument("--batch", type=int, default=BATCH, help="inputs between two checks")
    parser.add_argument("--rss-bound-mib", type=float, default=RSS_BOUND_MIB)
    parser.add_argument(
        "--dir", type=Path, default=None, help="where the stores, keys and logs go (default: a temporary directory)"
    )
    args = parser.parse_args(argv)
    names = [n.strip() for n in args.transport.split(",") if n.strip()]
    unknown = sorted(set(names) - set(TRANSPORTS))
    if unknown:
        parser.error(f"--transport: no transport {', '.join(unknown)} (there are {', '.join(TRANSPORTS)})")
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1 << 32)
    directory = args.dir or Path(tempfile.mkdtemp(prefix="brainy-fuzz-"))
    print(f"fuzz: seed {seed}, {args.count} inputs per transport ({', '.join(names)}), in {directory}", flush=True)
    with serving(directory) as target:
        tallies = asyncio.run(run(target, names, args.count, seed, args.batch, args.rss_bound_mib))
    print(table(tallies), flush=True)
    failed = [t.transport for t in tallies if t.failed]
    if failed:
        print(
            f"\nFAILED on {', '.join(failed)}: reproduce with --seed {seed} --transport {','.join(failed)}; the server's log is {directory}"
        )
        return 1
    if args.dir is None:
        shutil.rmtree(directory, ignore_errors=True)
    print(f"\nno crash, no 500, the server alive and answering, every resident set within {args.rss_bound_mib:g} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
