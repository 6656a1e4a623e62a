"""HTTP/1.1 response framing (RFC 9112 sections 4, 6, 7.1), run against both twins of h1frame.

Every test taking ``h1frame_twin`` runs once with the compiled twin and once with the pure one;
tests taking ``h1frame_twins`` compare the two directly. Answers are checked three ways: as exact
bytes for chosen cases, as byte-identical between the twins on generated ones, and by parsing them
back with httptools (llhttp), the parser the server itself reads HTTP/1.1 with.
"""

import os
import subprocess
import sys

import httptools
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from brainy._speedups import load

TWINS = settings(deadline=None, max_examples=300)


@pytest.fixture(scope="module")
def h1frame_twins():
    """Both twins at once, ``(cython, python)``; a missing compiled twin skips (fails under CI)."""
    twins = []
    for which in ("cython", "python"):
        try:
            twins.append(load("h1frame", which))
        except ImportError as exc:
            if os.environ.get("CI") == "true":
                pytest.fail(f"CI must test the compiled twin of h1frame: {exc}")
            pytest.skip(f"compiled h1frame is not built: {exc}")
    return tuple(twins)


# --- exact bytes ------------------------------------------------------------------------------

JSON = (b"content-type", b"application/json")

EXACT = [
    (
        (200, [JSON], b'{"ok":true}', True),
        b'HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 11\r\n\r\n{"ok":true}',
    ),
    (
        (404, [JSON, (b"x-request-id", b"r-1")], b"{}", False),
        b"HTTP/1.1 404 Not Found\r\ncontent-type: application/json\r\nx-request-id: r-1\r\n"
        b"content-length: 2\r\nconnection: close\r\n\r\n{}",
    ),
    ((200, [], b"", True), b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n"),
    (
        (201, [(b"Location", b"/v1/brains/main/e/a")], b"x" * 10, True),
        b"HTTP/1.1 201 Created\r\nLocation: /v1/brains/main/e/a\r\ncontent-length: 10\r\n\r\n" + b"x" * 10,
    ),
    (
        (200, [(b"x-a", b"a \tb"), (b"x-a", b"")], b"z", True),  # repeated names, inner whitespace, empty value
        b"HTTP/1.1 200 OK\r\nx-a: a \tb\r\nx-a: \r\ncontent-length: 1\r\n\r\nz",
    ),
    ((599, [], b"", True), b"HTTP/1.1 599 \r\ncontent-length: 0\r\n\r\n"),
    ((999, [], b"!", False), b"HTTP/1.1 999 \r\ncontent-length: 1\r\nconnection: close\r\n\r\n!"),
    ((204, [], b"", True), b"HTTP/1.1 204 No Content\r\n\r\n"),
    (
        (304, [(b"etag", b'"g42"')], b"", False),
        b'HTTP/1.1 304 Not Modified\r\netag: "g42"\r\nconnection: close\r\n\r\n',
    ),
    ((100, [], b"", True), b"HTTP/1.1 100 Continue\r\n\r\n"),
    (
        (503, [(b"retry-after", b"2")], b"\x00\r\n\xff", False),  # the body is anything at all
        b"HTTP/1.1 503 Service Unavailable\r\nretry-after: 2\r\ncontent-length: 4\r\n"
        b"connection: close\r\n\r\n\x00\r\n\xff",
    ),
]


@pytest.mark.parametrize("args, expected", EXACT, ids=[str(a[0]) + "-" + str(i) for i, (a, _) in enumerate(EXACT)])
def test_frame_response_exact_bytes(h1frame_twin, args, expected):
    """A response is the status line, the headers in the caller's order, content-length (not for
    1xx, 204, 304), connection: close only when not keep-alive, a blank line and the body."""
    assert h1frame_twin.frame_response(*args) == expected


def test_head_states_the_length_and_omits_the_body(h1frame_twin):
    """A HEAD answer is the GET answer without its body: content-length still states the body's
    length (RFC 9110 section 9.3.2)."""
    body = b"y" * 1234
    headers = [(b"etag", b'"g42"'), JSON]
    got = h1frame_twin.frame_response(200, headers, body, True, head=True)
    assert got == b'HTTP/1.1 200 OK\r\netag: "g42"\r\ncontent-type: application/json\r\ncontent-length: 1234\r\n\r\n'
    for keep_alive in (True, False):
        whole = h1frame_twin.frame_response(200, headers, body, keep_alive)
        assert h1frame_twin.frame_response(200, headers, body, keep_alive, head=True) == whole[: -len(body)]
        assert h1frame_twin.frame_response(200, headers, body, keep_alive, True) == whole[: -len(body)]
    assert h1frame_twin.frame_response(204, [], b"", True, head=True) == b"HTTP/1.1 204 No Content\r\n\r\n"


REQUIRED_REASONS = {
    200: b"OK",
    201: b"Created",
    204: b"No Content",
    400: b"Bad Request",
    401: b"Unauthorized",
    403: b"Forbidden",
    404: b"Not Found",
    405: b"Method Not Allowed",
    409: b"Conflict",
    410: b"Gone",
    412: b"Precondition Failed",
    413: b"Content Too Large",
    415: b"Unsupported Media Type",
    422: b"Unprocessable Content",
    423: b"Locked",
    426: b"Upgrade Required",
    431: b"Request Header Fields Too Large",
    500: b"Internal Server Error",
    501: b"Not Implemented",
    503: b"Service Unavailable",
}


@pytest.mark.parametrize("status", sorted(REQUIRED_REASONS))
def test_status_lines_carry_the_standard_reason(h1frame_twin, status):
    """Each status brainy answers with carries its RFC 9110 reason phrase."""
    got = (
        h1frame_twin.frame_chunked_head(status, [], True)
        if status != 204
        else h1frame_twin.frame_response(status, [], b"", True)
    )
    assert got.startswith(b"HTTP/1.1 %d %s\r\n" % (status, REQUIRED_REASONS[status]))


def test_reason_table(h1frame_twins):
    """Both twins share one reason table; it covers every status a contract refusal carries;
    every phrase is a valid reason-phrase (RFC 9112 section 4); an unregistered status has an
    empty reason after its SP."""
    from brainy.contract.refusals import REGISTRY

    cython, python = h1frame_twins
    assert cython.REASONS is python.REASONS
    assert cython.__all__ == python.__all__
    for status, phrase in python.REASONS.items():
        assert 100 <= status <= 999 and phrase and all(b == 9 or 0x20 <= b != 0x7F for b in phrase)
    assert {r.status for r in REGISTRY.values() if r.status} <= set(python.REASONS)
    for status in range(100, 1000):
        line = python.REASONS.get(status, b"")
        assert cython.frame_response(status, [], b"", True).startswith(b"HTTP/1.1 %d %s\r\n" % (status, line))


# --- refusals ---------------------------------------------------------------------------------

SPLITTERS = [b"\r", b"\n", b"\r\n", b"\r\n\r\n"]


def inject(clean, splitter, where):
    return {"start": splitter + clean, "middle": clean[:2] + splitter + clean[2:], "end": clean + splitter}[where]


@pytest.mark.parametrize("splitter", SPLITTERS, ids=repr)
@pytest.mark.parametrize("where", ["start", "middle", "end"])
@pytest.mark.parametrize("field", ["name", "value"])
def test_cr_and_lf_are_refused(h1frame_twin, splitter, where, field):
    """CR or LF anywhere in a header name or value is a ValueError from every framing call, so
    no caller can split a response (inject a header or a second response)."""
    name, value = b"x-evil", b"ok\tthen"
    if field == "name":
        name = inject(name, splitter, where)
    else:
        value = inject(value, splitter + b"set-cookie: a=b", where)
    headers = [JSON, (name, value)]
    with pytest.raises(ValueError, match=r"headers\[1\]"):
        h1frame_twin.frame_response(200, headers, b"{}", True)
    with pytest.raises(ValueError, match=r"headers\[1\]"):
        h1frame_twin.frame_response(200, headers, b"{}", False, head=True)
    with pytest.raises(ValueError, match=r"headers\[1\]"):
        h1frame_twin.frame_chunked_head(200, headers, True)


@pytest.mark.parametrize(
    "header, why",
    [
        ((b"", b"v"), "is not a token"),
        ((b"x y", b"v"), "is not a token"),
        ((b"x:y", b"v"), "is not a token"),
        ((b"x\x00", b"v"), "is not a token"),
        ((b"caf\xc3\xa9", b"v"), "is not a token"),
        ((b"x", b"a\x00b"), "holds CR, LF, NUL or another control byte"),
        ((b"x", b"a\x7fb"), "holds CR, LF, NUL or another control byte"),
        ((b"x", b"a\x0bb"), "holds CR, LF, NUL or another control byte"),
        ((b"x", b" v"), "begins or ends with whitespace"),
        ((b"x", b"v\t"), "begins or ends with whitespace"),
        ((b"x", b" "), "begins or ends with whitespace"),
        ((b"content-length", b"5"), "is set by the framing"),
        ((b"Content-Length", b"5"), "is set by the framing"),
        ((b"TRANSFER-encoding", b"chunked"), "is set by the framing"),
    ],
)
def test_malformed_headers_are_refused(h1frame_twin, header, why):
    """A name must be an RFC 9110 token and a value a field-value (no control bytes but HTAB,
    no whitespace at either end); content-length and transfer-encoding belong to the framing,
    since a second, different length would split the response too."""
    for call in (
        lambda h: h1frame_twin.frame_response(200, h, b"", True),
        lambda h: h1frame_twin.frame_chunked_head(200, h, True),
    ):
        with pytest.raises(ValueError, match=why):
            call([header])


@pytest.mark.parametrize("status", [99, 0, -200, 1000, 2**70, True])
def test_status_outside_three_digits_is_refused(h1frame_twin, status):
    """A status outside 100..999 is a ValueError (RFC 9112 section 4: three digits)."""
    with pytest.raises(ValueError, match="status must be 100..999"):
        h1frame_twin.frame_response(status, [], b"", True)
    with pytest.raises(ValueError, match="status must be 100..999"):
        h1frame_twin.frame_chunked_head(status, [], True)


@pytest.mark.parametrize(
    "args, message",
    [
        (("200", [], b"", True), "cannot be interpreted as an integer"),
        ((200.0, [], b"", True), "cannot be interpreted as an integer"),
        ((200, [[b"a", b"b"]], b"", True), r"headers\[0\] must be a \(name, value\) tuple, got list"),
        ((200, [(b"a",)], b"", True), r"headers\[0\] must be a \(name, value\) pair, got 1 items"),
        ((200, [(b"a", b"b", b"c")], b"", True), r"must be a \(name, value\) pair, got 3 items"),
        ((200, [("a", b"b")], b"", True), r"headers\[0\] name must be bytes, got str"),
        ((200, [(b"a", bytearray(b"b"))], b"", True), r"headers\[0\] value must be bytes, got bytearray"),
        ((200, 7, b"", True), "not iterable"),
        ((200, [], "{}", True), "body must be bytes, got str"),
        ((200, [], memoryview(b"{}"), True), "body must be bytes, got memoryview"),
    ],
)
def test_wrong_types_are_type_errors(h1frame_twin, args, message):
    """Only an int status, (bytes, bytes) tuples and a bytes body are framed; anything else is a
    TypeError saying which argument."""
    with pytest.raises(TypeError, match=message):
        h1frame_twin.frame_response(*args)


@pytest.mark.parametrize("status", [100, 101, 103, 204, 304])
def test_no_content_statuses(h1frame_twin, status):
    """1xx, 204 and 304 carry no content (RFC 9110 section 8.6): no content-length, a non-empty
    body is refused, and there is no chunked head for them."""
    got = h1frame_twin.frame_response(status, [(b"x-a", b"1")], b"", False)
    assert got == b"HTTP/1.1 %d %s\r\nx-a: 1\r\nconnection: close\r\n\r\n" % (
        status,
        h1frame_twin.REASONS.get(status, b""),
    )
    with pytest.raises(ValueError, match=f"a {status} response has no body, got 3 bytes"):
        h1frame_twin.frame_response(status, [], b"abc", True)
    with pytest.raises(ValueError, match=f"a {status} response has no body"):
        h1frame_twin.frame_response(status, [], b"abc", True, head=True)
    with pytest.raises(ValueError, match=f"a {status} response has no body to send in chunks"):
        h1frame_twin.frame_chunked_head(status, [], True)


def test_headers_may_be_any_iterable_and_are_left_alone(h1frame_twin):
    """Headers may come as a list, a tuple or a generator, with the same answer; the caller's
    list is not changed."""
    headers = [JSON, (b"x-b", b"2")]
    expected = h1frame_twin.frame_response(200, headers, b"{}", True)
    assert h1frame_twin.frame_response(200, tuple(headers), b"{}", True) == expected
    assert h1frame_twin.frame_response(200, (h for h in headers), b"{}", True) == expected
    assert headers == [JSON, (b"x-b", b"2")]


# --- chunks -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "size, prefix", [(1, b"1"), (10, b"a"), (15, b"f"), (16, b"10"), (255, b"ff"), (4096, b"1000"), (70000, b"11170")]
)
def test_chunk_exact_bytes(h1frame_twin, size, prefix):
    """A chunk is its size in lowercase hex, CRLF, the data, CRLF (RFC 9112 section 7.1)."""
    data = bytes(range(256)) * (size // 256) + bytes(range(size % 256))
    assert h1frame_twin.frame_chunk(data) == prefix + b"\r\n" + data + b"\r\n"


def test_last_chunk_and_chunked_head(h1frame_twin):
    """An empty chunk is the last chunk 0 CRLF CRLF; a chunked head has transfer-encoding:
    chunked where a whole response has content-length; chunk data must be bytes."""
    assert h1frame_twin.frame_chunk(b"") == b"0\r\n\r\n" == h1frame_twin.LAST_CHUNK
    sse = (b"content-type", b"text/event-stream")
    assert h1frame_twin.frame_chunked_head(200, [sse], True) == (
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
    )
    assert h1frame_twin.frame_chunked_head(200, [sse], False) == (
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n"
    )
    with pytest.raises(TypeError, match="data must be bytes, got bytearray"):
        h1frame_twin.frame_chunk(bytearray(b"x"))


# --- parsing back -----------------------------------------------------------------------------


class Parsed:
    """httptools callbacks collecting each message of a response stream."""

    def __init__(self):
        self.parser = httptools.HttpResponseParser(self)
        self.messages = []
        self.headers = []
        self.body = b""

    def on_message_begin(self):
        self.headers, self.body, self.keep_alive = [], b"", None

    def on_header(self, name, value):
        self.headers.append((name, value))

    def on_headers_complete(self):
        self.keep_alive = self.parser.should_keep_alive()

    def on_body(self, body):
        self.body += body

    def on_message_complete(self):
        self.messages.append((self.parser.get_status_code(), self.headers, self.body, self.keep_alive))


def parse(data):
    parsed = Parsed()
    parsed.parser.feed_data(data)
    return parsed


TCHARS = "!#$%&'*+-.^_`|~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
# Names that steer a parser's framing or connection handling; generated headers leave them out,
# so the parse reflects the framing under test and nothing else.
STEERING = {b"content-length", b"transfer-encoding", b"connection", b"upgrade", b"keep-alive", b"proxy-connection"}
names = st.text(TCHARS, min_size=1, max_size=24).map(str.encode).filter(lambda n: n.lower() not in STEERING)
values = st.from_regex(
    rb"(?:[\x21-\x7e\x80-\xff](?:[\t\x20-\x7e\x80-\xff]{0,40}[\x21-\x7e\x80-\xff])?)?", fullmatch=True
)
headers_st = st.lists(st.tuples(names, values), max_size=8)
statuses = st.one_of(st.sampled_from(sorted(REQUIRED_REASONS) + [100, 304]), st.integers(100, 999))


def no_content(status):
    return status < 200 or status in (204, 304)


@st.composite
def responses(draw, statuses=statuses):
    """Valid frame_response arguments: (status, headers, body, keep_alive, head)."""
    status = draw(statuses)
    body = b"" if no_content(status) else draw(st.one_of(st.binary(max_size=64), st.binary(min_size=30, max_size=2100)))
    return status, draw(headers_st), body, draw(st.booleans()), draw(st.booleans())


@TWINS
@given(args=responses())
def test_twins_agree_on_valid_inputs(h1frame_twins, args):
    """On any valid input both twins return byte-identical responses, chunked heads and chunks."""
    cython, python = h1frame_twins
    status, headers, body, keep_alive, head = args
    assert cython.frame_response(*args) == python.frame_response(*args)
    if not no_content(status):
        assert cython.frame_chunked_head(status, headers, keep_alive) == python.frame_chunked_head(
            status, headers, keep_alive
        )
    assert cython.frame_chunk(body) == python.frame_chunk(body)


def outcome(call):
    try:
        return call()
    except (TypeError, ValueError) as exc:
        return type(exc), str(exc)


# Bytes that matter to the checks, mixed with ordinary ones.
awkward_bytes = st.lists(st.sampled_from(b"aZ09-:; \t\r\n\x00\x7f\x80\xffcC"), max_size=10).map(bytes)
awkward = st.one_of(
    awkward_bytes,
    st.sampled_from([b"content-length", b"Transfer-Encoding", b"CONTENT-LENGTH", b"content-lengt"]),
    st.sampled_from(["str", bytearray(b"x"), None]),
)


@TWINS
@given(
    status=st.one_of(st.integers(50, 1050), st.sampled_from([2**70, -1, "200", 200.5])),
    headers=st.lists(st.one_of(st.tuples(awkward, awkward), st.tuples(awkward), st.just([b"a", b"b"])), max_size=4),
    body=st.one_of(st.binary(max_size=8), st.just("text")),
    keep_alive=st.booleans(),
    head=st.booleans(),
)
def test_twins_agree_on_any_input(h1frame_twins, status, headers, body, keep_alive, head):
    """On any input, valid or not, both twins give the same bytes or refuse with the same error
    type and message; whatever is accepted holds no CR or LF outside the status line, the
    framing lines and the body."""
    cython, python = h1frame_twins
    got = [outcome(lambda: twin.frame_response(status, headers, body, keep_alive, head)) for twin in h1frame_twins]
    assert got[0] == got[1]
    assert outcome(lambda: cython.frame_chunked_head(status, headers, keep_alive)) == outcome(
        lambda: python.frame_chunked_head(status, headers, keep_alive)
    )
    if isinstance(got[0], bytes):
        head_part = got[0][: len(got[0]) - (0 if head else len(body))]
        lines = head_part.split(b"\r\n")
        assert lines[-2:] == [b"", b""] and b"\r" not in b"".join(lines) and b"\n" not in b"".join(lines)
        assert len(lines) == 1 + len(headers) + (not no_content(status)) + (not keep_alive) + 2


@TWINS
@given(args=responses(statuses=statuses.filter(lambda s: s != 101)))
def test_responses_parse_back(h1frame_twin, args):
    """A framed response parses back with httptools to the same status, the same headers in the
    same order (then content-length when there is content, connection: close when not keep-alive),
    the same body and the same keep-alive; back to back on a kept-alive connection, two responses
    parse as two. (101 is left out: llhttp stops there for the protocol switch.)"""
    status, headers, body, keep_alive, head = args
    data = h1frame_twin.frame_response(status, headers, body, keep_alive)
    expected_headers = list(headers)
    if not no_content(status):
        expected_headers.append((b"content-length", b"%d" % len(body)))
    if not keep_alive:
        expected_headers.append((b"connection", b"close"))
    message = (status, expected_headers, body, keep_alive)
    assert parse(data).messages == [message]
    if keep_alive:
        assert parse(data + data).messages == [message, message]
    if head and not no_content(status):
        # llhttp cannot be told a response answers HEAD, so it waits for the stated body: check
        # the head is complete and nothing of the body was sent.
        parsed = parse(h1frame_twin.frame_response(status, headers, body, keep_alive, head=True))
        assert (parsed.headers, parsed.body, parsed.keep_alive) == (expected_headers, b"", keep_alive)
        assert parsed.messages == ([message] if not body else [])


@TWINS
@given(
    status=st.integers(200, 999).filter(lambda s: not no_content(s)),
    headers=headers_st,
    chunks=st.lists(st.binary(min_size=1, max_size=600), max_size=6),
    keep_alive=st.booleans(),
)
def test_chunked_round_trip(h1frame_twin, status, headers, chunks, keep_alive):
    """A chunked head, its chunks and the last chunk parse back as one response whose body is
    the chunks joined, with transfer-encoding: chunked among its headers."""
    data = h1frame_twin.frame_chunked_head(status, headers, keep_alive)
    data += b"".join(h1frame_twin.frame_chunk(c) for c in chunks) + h1frame_twin.frame_chunk(b"")
    expected_headers = list(headers) + [(b"transfer-encoding", b"chunked")]
    if not keep_alive:
        expected_headers.append((b"connection", b"close"))
    assert parse(data).messages == [(status, expected_headers, b"".join(chunks), keep_alive)]


def test_chunks_arrive_as_framed_when_fed_piecewise(h1frame_twin):
    """Fed to the parser a byte at a time, a chunked stream still yields exactly its data: the
    framing does not rely on a read landing on a chunk boundary."""
    chunks = [b'data: {"generation": 41}\n\n', b"x" * 300, b"\r\n0\r\n\r\n"]  # data that looks like framing
    data = h1frame_twin.frame_chunked_head(200, [(b"content-type", b"text/event-stream")], True)
    data += b"".join(h1frame_twin.frame_chunk(c) for c in chunks) + h1frame_twin.frame_chunk(b"")
    parsed = Parsed()
    for i in range(len(data)):
        parsed.parser.feed_data(data[i : i + 1])
    assert [m[2] for m in parsed.messages] == [b"".join(chunks)]


# --- the facade -------------------------------------------------------------------------------


def test_facade_offers_h1frame():
    """``from brainy._speedups import h1frame`` is the twin the facade picked (the compiled one
    unless BRAINY_SPEEDUPS=python or it is not built; under CI it must be the compiled one), and
    load() reaches both twins without moving the pick."""
    from brainy import _speedups
    from brainy._speedups import h1frame

    mode = os.environ.get("BRAINY_SPEEDUPS") or "auto"
    try:
        load("h1frame", "cython")
        built = True
    except ImportError:
        built = False
    if mode == "python":
        expected = "python"
    elif mode == "cython" or os.environ.get("CI") == "true":
        expected = "cython"
    else:
        expected = "cython" if built else "python"
    assert _speedups.picks["h1frame"] == expected
    assert h1frame is load("h1frame", expected) is _speedups.h1frame
    assert load("h1frame", "python").__name__ == "brainy._speedups.h1frame_py"
    assert _speedups.h1frame is h1frame


@pytest.mark.parametrize("value", ["python", "cython"])
def test_facade_pick_follows_the_environment(value):
    """BRAINY_SPEEDUPS=python gives the pure twin of h1frame, =cython the compiled one (or an
    ImportError that says it is not built)."""
    env = dict(os.environ, BRAINY_SPEEDUPS=value)
    code = "import brainy._speedups as s; print(s.picks['h1frame'], s.h1frame.__name__)"
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    try:
        load("h1frame", "cython")
        built = True
    except ImportError:
        built = False
    if value == "cython" and not built:
        assert "is not built" in proc.stderr
        return
    assert proc.returncode == 0, proc.stderr
    suffix = "_py" if value == "python" else ""
    assert proc.stdout.split() == [value, f"brainy._speedups.h1frame{suffix}"]


def test_a_body_filled_in_place_is_taken_once_as_bytes(h1frame_twin):
    """``Filling``: written through its rooms, taken once as the bytes written; after that neither a room nor a
    second taking is given, and an empty body is never filled in place."""
    filling = h1frame_twin.Filling(6)
    filling.room(0)[:2] = b"ab"
    filling.room(2)[:] = b"cdef"
    assert len(filling.room(6)) == 0
    body = filling.take()
    assert type(body) is bytes and body == b"abcdef" and hash(body) == hash(b"abcdef")
    for again in (filling.take, lambda: filling.room(0)):
        with pytest.raises(BufferError, match="the body was taken"):
            again()
    with pytest.raises(ValueError, match="at least one byte"):
        h1frame_twin.Filling(0)
