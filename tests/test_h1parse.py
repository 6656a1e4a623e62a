"""The plain request's head (``h1frame.parse_head``), run against both twins and checked against httptools.

What the fast parse reads, llhttp must read the same: for every head it accepts (chosen cases and
generated ones), httptools parses the same bytes to the same method, path, query, headers,
keep-alive and body. What it declines (None) goes to httptools in ``H1Connection``, so a decline is
never wrong, only slower; the chosen hard cases must be declined. The twins agree on everything,
generated inputs with damaged bytes included.
"""

import httptools
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from brainy.net import h1 as h1_module
from brainy.net.h1 import H1Connection, ProtocolFailed, RequestReceived

TWINS = settings(deadline=None, max_examples=400)
MAX = 64 << 10


class Parsed:
    """httptools' reading of one request: what H1Connection would build from it."""

    def __init__(self, data: bytes) -> None:
        self.url = b""
        self.headers: dict[str, str] = {}
        self.body = b""
        self.done = False
        self.parser = httptools.HttpRequestParser(self)
        self.parser.feed_data(data)

    def on_url(self, url):
        self.url += url

    def on_header(self, name, value):
        key, text = name.lower().decode("latin-1"), value.decode("latin-1")
        self.headers[key] = f"{self.headers[key]}, {text}" if key in self.headers else text

    def on_body(self, body):
        self.body += body

    def on_message_complete(self):
        self.done = True
        self.keep_alive = self.parser.should_keep_alive()
        self.method = self.parser.get_method().decode()


def agrees_with_httptools(twin, data: bytes) -> None:
    got = twin.parse_head(data, 0, MAX)
    assert got is not None
    method, path, query, headers, keep_alive, length, body_at = got
    if body_at + length > len(data):  # the body is still to come: the connection waits for it
        assert not Parsed(data).done
        return
    ref = Parsed(data[: body_at + length])  # what follows is the next request's
    assert ref.done
    path_ref, _, query_ref = ref.url.partition(b"?")
    assert (method, path, query, headers, keep_alive) == (
        ref.method,
        path_ref.decode("latin-1"),
        query_ref.decode("latin-1"),
        ref.headers,
        ref.keep_alive,
    )
    assert data[body_at : body_at + length] == ref.body


AUTH = b"authorization: Bearer bky_mmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmm\r\n"
READ = [
    b"GET /v1/brains/main/get/row-7 HTTP/1.1\r\nhost: 127.0.0.1:8080\r\nuser-agent: h2load\r\naccept: */*\r\n"
    + AUTH
    + b"\r\n",
    b"GET / HTTP/1.1\r\n\r\n",
    b"GET /?a=1&b=%20?c HTTP/1.1\r\nHost:x\r\n\r\n",  # a second ? belongs to the query
    b"HEAD /x HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
    b"GET /x HTTP/1.0\r\n\r\n",  # 1.0 closes unless asked
    b"GET /x HTTP/1.1\r\nConnection: Close\r\n\r\n",
    b"GET /x HTTP/1.1\r\nConnection: foo, close \r\n\r\n",
    b"GET /x HTTP/1.1\r\nX-A: a\r\nx-a:  b \t\r\nX-B:\r\nX-C: \xe9t\xe9\r\n\r\n",  # repeated, OWS, empty, obs-text
    b'POST /v1/brains/main/find HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: 11\r\n\r\n{"limit":1}',
    b"DELETE /v1/brains/main/e/a HTTP/1.1\r\ncontent-length: 0\r\n\r\n",
    b"OPTIONS /x HTTP/1.1\r\n\r\n",
    b"PATCH /x HTTP/1.1\r\nContent-Length: 007\r\n\r\nabcdefg",
]


@pytest.mark.parametrize("data", READ)
def test_what_it_reads_httptools_reads_the_same(h1frame_twin, data):
    agrees_with_httptools(h1frame_twin, data)


DECLINED = [
    b"GET /x HTTP/1.1\r\nHost: a\r\n",  # not whole yet
    b"GET /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    b"GET /x HTTP/1.1\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n",
    b"GET /x HTTP/1.1\r\nUpgrade: h2c\r\n\r\n",
    b"POST /x HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\nx",
    b"POST /x HTTP/1.1\r\nContent-Length: -1\r\n\r\n",
    b"POST /x HTTP/1.1\r\nContent-Length: 1234567890123456789\r\n\r\n",
    b"POST /x HTTP/1.1\r\nContent-Length: \r\n\r\n",
    b"GET /x HTTP/1.1\r\nConnection: close, keep-alive\r\n\r\n",
    b"GET http://a/x HTTP/1.1\r\n\r\n",  # absolute form
    b"GET * HTTP/1.1\r\n\r\n",
    b"BREW /x HTTP/1.1\r\n\r\n",
    b"get /x HTTP/1.1\r\n\r\n",
    b"GET /x HTTP/2.0\r\n\r\n",
    b"GET  /x HTTP/1.1\r\n\r\n",
    b"GET /x y HTTP/1.1\r\n\r\n",
    b'GET /x"<> HTTP/1.1\r\n\r\n',
    b"GET /x HTTP/1.1\r\nX : a\r\n\r\n",  # space before the colon
    b"GET /x HTTP/1.1\r\nX: a\r\n b\r\n\r\n",  # obs-fold
    b"GET /x HTTP/1.1\r\nX: a\x00b\r\n\r\n",
    b"GET /x HTTP/1.1\r\nX: a\nY: b\r\n\r\n",  # a bare LF
    b"GET /x HTTP/1.1\r\n: a\r\n\r\n",
    b"\r\nGET /x HTTP/1.1\r\n\r\n",  # a leading empty line
]


@pytest.mark.parametrize("data", DECLINED)
def test_hard_cases_are_declined(h1frame_twin, data):
    assert h1frame_twin.parse_head(data, 0, MAX) is None


def test_a_head_over_the_limit_is_declined(h1frame_twin):
    data = READ[0]
    assert h1frame_twin.parse_head(data, 0, len(data)) is not None
    assert h1frame_twin.parse_head(data, 0, len(data) - 1) is None


def test_start_reads_the_next_pipelined_request(h1frame_twin):
    first, second = READ[8], READ[0]
    data = first + second
    got = h1frame_twin.parse_head(data, 0, MAX)
    after = got[6] + got[5]
    assert after == len(first)
    assert h1frame_twin.parse_head(data, after, MAX)[1] == "/v1/brains/main/get/row-7"


def test_the_head_limit_counts_from_start(h1frame_twin):
    """The blank line is looked for in ``data[start:start + max_head]`` only (the compiled twin's memmem as
    the pure twin's bytes.find): a head of the limit's size is read, one byte over is declined, and a start
    past the bytes finds nothing, whatever request precedes it."""
    first, second = READ[8], READ[0]
    data = first + second
    at, twin = len(first), h1frame_twin
    assert twin.parse_head(data, at, len(second))[1] == "/v1/brains/main/get/row-7"
    assert twin.parse_head(data, at, len(second) - 1) is None
    assert twin.parse_head(data, at, 3) is None and twin.parse_head(data, at, 0) is None
    assert twin.parse_head(data, len(data), MAX) is None and twin.parse_head(data, len(data) + 9, MAX) is None
    assert twin.parse_head(data[:-1], at, MAX) is None  # the blank line not all here


# --- generated heads ------------------------------------------------------------------------------

TCHARS = "!#$%&'*+-.^_`|~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
# the compiled twin hands the names most requests carry out without decoding them, and folds other names
# up to 32 bytes in place: generated names cross that length, and the known ones come in any case
names = st.one_of(
    st.text(TCHARS, min_size=1, max_size=40),
    st.sampled_from(
        [
            "Host",
            "Accept",
            "Connection",
            "content-length",
            "X-Brainy-Caller",
            "AUTHORIZATION",
            "User-Agent",
            "accept-Encoding",
            "TE",
            "t",
            "Hosts",
            "X-A-Field-Name-Of-Exactly-32-Byt",
            "X-A-Field-Name-Of-Exactly-33-Byte",
        ]
    ),
)
values = st.one_of(
    st.binary(max_size=20).map(lambda b: bytes(c for c in b if c == 9 or 0x20 <= c != 0x7F)),
    st.sampled_from([b"close", b"keep-alive", b" Keep-Alive , x", b"12", b"0"]),
)
targets = st.text("abcXYZ019-._~!$&'()*+,;=:@/?%", max_size=30).map(lambda t: "/" + t)


@st.composite
def heads(draw):
    method = draw(st.sampled_from(["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]))
    version = draw(st.sampled_from([b"1.1", b"1.0"]))
    fields = draw(st.lists(st.tuples(names, values), max_size=6))
    body = draw(st.binary(max_size=8))
    lines = [b"%s %s HTTP/%s\r\n" % (method.encode(), draw(targets).encode(), version)]
    lines += [b"%s:%s%s\r\n" % (n.encode(), draw(st.sampled_from([b"", b" ", b" \t"])), v) for n, v in fields]
    if not any(n.lower() == "content-length" for n, _ in fields) and body:
        lines.append(b"content-length: %d\r\n" % len(body))
    return b"".join(lines) + b"\r\n" + body


@TWINS
@given(heads())
def test_generated_heads_read_as_httptools_reads_them(h1frame_twins, data):
    compiled, pure = h1frame_twins
    got = pure.parse_head(data, 0, MAX)
    assert compiled.parse_head(data, 0, MAX) == got
    if got is not None:
        agrees_with_httptools(pure, data)


@TWINS
@given(heads(), st.integers(0, 200), st.binary(min_size=1, max_size=3))
def test_twins_agree_on_damaged_heads(h1frame_twins, data, at, junk):
    compiled, pure = h1frame_twins
    at %= len(data)
    damaged = data[:at] + junk + data[at + 1 :]
    assert compiled.parse_head(damaged, 0, MAX) == pure.parse_head(damaged, 0, MAX)
    if pure.parse_head(damaged, 0, MAX) is not None:
        agrees_with_httptools(pure, damaged)


# --- the connection: the fast parse and httptools take turns ---------------------------------------


def events_of(chunks):
    conn = H1Connection()
    out = []
    for chunk in chunks:
        out += conn.receive_data(chunk, 0.0)
    return out


def requests_of(events):
    return [
        (e.request.method, e.request.path, e.request.query, e.request.headers, e.request.body, e.keep_alive)
        for e in events
        if isinstance(e, RequestReceived)
    ]


@settings(deadline=None, max_examples=200)
@given(
    st.lists(
        st.sampled_from(READ[:3] + READ[7:12] + [DECLINED[1], DECLINED[2].replace(b"Upgrade", b"X")]),
        min_size=1,
        max_size=6,
    ),
    st.lists(st.integers(1, 300), max_size=8),
)
def test_a_pipelined_stream_cut_anywhere_reads_as_whole(stream, cuts):
    """However the bytes of keep-alive requests arrive (whole, split inside a head or a body, several in
    one read), the same requests come out in the same order, whichever parser read each."""
    data = b"".join(stream)
    whole = requests_of(events_of([data]))
    assert len(whole) == len(stream)
    chunks, at = [], 0
    for cut in cuts:
        chunks.append(data[at : at + cut])
        at += cut
    chunks.append(data[at:])
    assert requests_of(events_of([c for c in chunks if c])) == whole


def test_limits_still_refuse_on_the_fast_path():
    conn = H1Connection(max_header_bytes=100, max_body=4)
    [event] = conn.receive_data(b"GET /x HTTP/1.1\r\nX: " + b"a" * 200 + b"\r\n\r\n", 0.0)
    assert isinstance(event, ProtocolFailed) and event.refusal.name == "HeaderTooLargeError"
    conn = H1Connection(max_body=4)
    [event] = conn.receive_data(b"POST /x HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello", 0.0)
    assert isinstance(event, ProtocolFailed) and event.refusal.name == "PayloadTooLargeError"


def test_nothing_is_read_after_a_request_that_closes():
    events = events_of([READ[5] + READ[0]])
    assert requests_of(events)[0][5] is False
    assert len(requests_of(events)) == 1


def test_a_body_that_arrives_over_many_reads_is_read_whole_as_it_came():
    """A plain request's body past its first read is taken as the reads bring it, httptools never started: the
    request deadline runs while it arrives, the body comes out whole, a request pipelined behind it in the last
    read is read too, and after one that closes nothing more is."""
    body = bytes(range(256)) * 4096  # 1 MiB
    for close, after in ((b"", READ[0]), (b"Connection: close\r\n", READ[1])):
        head = b"POST /v1/brains/main/addMany HTTP/1.1\r\n%sContent-Length: %d\r\n\r\n" % (close, len(body))
        data = head + body + after
        conn = H1Connection()
        events = []
        for at in range(0, len(data), 65_536):
            events += conn.receive_data(data[at : at + 65_536], 0.0)
            assert conn.mid_request == (at + 65_536 < len(head) + len(body))
        assert conn._parser is None and events[0].request.body == body
        assert requests_of(events) == requests_of(events_of([data]))
        assert len(events) == (1 if close else 2)


def test_reads_go_straight_into_an_arriving_body_and_the_request_after_it_is_read_as_usual(h1frame_twin, monkeypatch):
    """While a plain request's body arrives, the connection offers the rest of it as the room the next read goes
    into (exactly its bytes), and takes a read put there as it takes a read handed to it: the body comes out
    whole as bytes, the room is gone once it has, and the request after it is read from the next read as usual.
    Both twins of the body's filling."""
    monkeypatch.setattr(h1_module, "h1frame", h1frame_twin)
    body = bytes(range(256)) * 1024  # 256 KiB
    head = b"POST /v1/brains/main/addMany HTTP/1.1\r\nContent-Length: %d\r\n\r\n" % len(body)
    conn = H1Connection()
    assert conn.body_room() is None
    assert conn.receive_data(head + body[:1000], 0.0) == [] and conn.mid_request
    at = 1000
    for step in (65_536, 100_000, 1):
        room = conn.body_room()
        assert room is not None and len(room) == len(body) - at and not room.readonly
        room[:step] = body[at : at + step]
        del room
        assert conn.body_received(step, 1.0) == [] and conn.mid_request
        at += step
    room = conn.body_room()
    room[:] = body[at:]
    events = conn.body_received(len(body) - at, 2.0)
    assert [type(e.request.body) for e in events] == [bytes] and events[0].request.body == body
    assert not conn.mid_request and conn.body_room() is None
    assert requests_of(conn.receive_data(READ[0], 3.0)) == requests_of(events_of([READ[0]]))
    assert requests_of(events)[0][:2] == ("POST", "/v1/brains/main/addMany")
