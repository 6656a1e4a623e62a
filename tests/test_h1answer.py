"""A proxied request's two halves in h1frame (brainy/net/edge.py's spliced road): ``answer_head`` reads the one
plain answer a buffer holds as httptools reads it, or says how much is still to come, or leaves it to httptools;
``frame_request`` frames a forwarded request that httptools reads back to the same fields. Both twins alike."""

from __future__ import annotations

import httptools
import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_h1frame import headers_st, no_content, parse, responses

from brainy.net.h1 import H1Connection, RequestReceived
from brainy.net.http import Passed

MAX = 1 << 16


@given(args=responses(), cut=st.integers(0, 3000), after=st.sampled_from([b"", b"H", b"HTTP/1.1 200 OK\r\n"]))
def test_a_plain_answer_is_read_as_httptools_reads_it(h1frame_twins, args, cut, after):
    """Whole: where its body starts, its status and keep-alive, as httptools reads them. Cut short: how many bytes
    are still to come at least (1 while the head is cut). With bytes after it, or with no body by its status
    (1xx, 204, 304): None, for httptools."""
    compiled, pure = h1frame_twins
    status, headers, body, keep_alive, _ = args
    data = compiled.frame_response(status, headers, body, keep_alive)
    whole = compiled.answer_head(data + after, MAX)
    assert whole == pure.answer_head(data + after, MAX)
    if no_content(status) or after:
        assert whole is None
        return
    ((got_status, _, got_body, got_keep),) = parse(data).messages
    assert whole == (len(data) - len(body), got_status, got_keep)
    assert data[whole[0] :] == got_body
    short = data[: min(cut, len(data) - 1)]
    need = compiled.answer_head(short, MAX)
    assert need == pure.answer_head(short, MAX)
    assert isinstance(need, int) and 1 <= need <= len(data) - len(short)
    if len(short) >= len(data) - len(body):  # the head is whole: exactly the body's rest
        assert need == len(data) - len(short)


def test_any_other_shape_is_left_to_httptools(h1frame_twins):
    shapes = [
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\n\r\n",  # no length: read to the close
        b"HTTP/1.0 200 OK\r\ncontent-length: 0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\ncontent-length: 1\r\ncontent-length: 1\r\n\r\nx",
        b"HTTP/1.1 200 OK\r\ncontent-length: +1\r\n\r\nx",
        b"HTTP/1.1 200 OK\r\ncontent-length: 1234567890123456789\r\n\r\nx",
        b"HTTP/1.1 200 OK\r\n folded: x\r\ncontent-length: 1\r\n\r\nx",
        b"HTTP/1.1 200 OK\r\nconnection: close, keep-alive\r\ncontent-length: 0\r\n\r\n",
        b"HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\ncontent-length: 0\r\n\r\n",
        b"HTTP/1.1 2000 OK\r\ncontent-length: 0\r\n\r\n",
        b"x" * MAX,  # no head within the bound
    ]
    for data in shapes:
        assert [twin.answer_head(data, MAX) for twin in h1frame_twins] == [None, None], data


class _Request:
    def __init__(self, data: bytes) -> None:
        self.fields: list[tuple[bytes, bytes]] = []
        self.body = b""
        self.done = False
        self.parser = httptools.HttpRequestParser(self)
        self.parser.feed_data(data)

    def on_header(self, name, value):
        self.fields.append((name.lower(), value))

    def on_body(self, body):
        self.body += body

    def on_message_complete(self):
        self.done = True


@given(headers=headers_st, body=st.binary(max_size=300), method=st.sampled_from(["GET", "POST", "PUT", "DELETE"]))
def test_a_forwarded_request_reads_back_as_its_fields(h1frame_twins, headers, body, method):
    """``frame_request``: the request line, host, the caller's fields but the dropped and pseudo ones, the extra
    ones, content-length, the body; httptools reads back exactly that, and both twins frame the same bytes."""
    compiled, pure = h1frame_twins
    fields = {name.decode("latin-1").lower(): value.decode("latin-1") for name, value in headers}
    fields[":path"] = "/x"
    fields["connection"] = "keep-alive"
    args = (method, "/v1/brains/b/get/a?x=1", "10.0.0.1:80", fields, frozenset({"connection"}), (("e", "f"),), body)
    data = compiled.frame_request(*args)
    assert data == pure.frame_request(*args)
    read = _Request(data)
    assert read.done and read.body == body and read.parser.get_method().decode() == method
    kept = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in fields.items() if k not in (":path", "connection")]
    assert read.fields == [(b"host", b"10.0.0.1:80"), *kept, (b"e", b"f"), (b"content-length", b"%d" % len(body))]


@pytest.mark.parametrize("where", ["target", "value", "extra"])
def test_a_forwarded_request_with_text_past_latin1_is_refused_by_both_twins(h1frame_twins, where):
    """``frame_request`` copies latin-1 text as its bytes; a character past it anywhere is the same
    UnicodeEncodeError from both twins (the compiled one's copy never writes it as some other byte)."""
    euro = "\u20ac"
    target = "/v1/brains/b/get/" + (euro if where == "target" else "a")
    headers = {"authorization": "Bearer k", "x-note": euro if where == "value" else "n"}
    extra = (("brainy-forwarded", euro if where == "extra" else "a"),)
    for twin in h1frame_twins:
        with pytest.raises(UnicodeEncodeError):
            twin.frame_request("GET", target, "10.0.0.1:80", headers, frozenset(), extra, b"")


@given(
    headers=headers_st,
    connection=st.lists(st.sampled_from([b"Connection", b"connection", b"CONNECTION"]), max_size=2),
    value=st.sampled_from([b"keep-alive", b"close", b"x-hop"]),
    body=st.binary(max_size=200),
    added=st.sampled_from([b"", b"brainy-node: n2\r\n"]),
    more=st.sampled_from([b"", b'alt-svc: h3=":9"\r\n']),
)
def test_an_answer_relayed_keeps_its_lines_but_connection_and_gains_the_lines_given(
    h1frame_twins, headers, connection, value, body, added, more
):
    """``relay_answer``: the owner's status line and fields in their order less every ``connection`` line (any
    case), then the added lines, the blank line, the body; both twins give the same bytes."""
    compiled, pure = h1frame_twins
    lines = [b"%s: %s\r\n" % (name, field) for name, field in headers]
    kept = list(lines)
    for n, name in enumerate(connection):  # spread among the others
        lines.insert(min(n * 2, len(lines)), b"%s: %s\r\n" % (name, value))
    data = b"HTTP/1.1 200 OK\r\n" + b"".join(lines) + b"content-length: %d\r\n\r\n" % len(body) + body
    head = data.index(b"\r\n\r\n") + 4
    framed = compiled.relay_answer(data, head, added, more)
    assert framed == pure.relay_answer(data, head, added, more)
    expected = b"HTTP/1.1 200 OK\r\n" + b"".join(kept) + b"content-length: %d\r\n" % len(body)
    assert framed == expected + added + more + b"\r\n" + body
    for twin in h1frame_twins:
        with pytest.raises(ValueError):
            twin.relay_answer(data, len(data) + 1, added, more)


def test_an_answer_passed_on_keeps_its_head_and_body_and_gains_the_fields_given():
    """``H1Connection.relay``: the owner's head and body as they came, its ``connection`` field left out (the
    client's connection stays open), the edge's fields and the listener's own (Alt-Svc) added, and the request
    it answers no longer owed (its deadlines run again)."""
    conn = H1Connection(advertise=[(b"alt-svc", b'h3=":9"')])
    [event] = conn.receive_data(b"GET /v1/brains/b/get/a HTTP/1.1\r\nhost: t\r\n\r\n", 0.0)
    assert isinstance(event, RequestReceived) and conn.next_deadline() is None  # owed its answer
    answer = (
        b"HTTP/1.1 404 Not Found\r\ncontent-type: application/json\r\nConnection: close\r\ncontent-length: 2\r\n\r\n{}"
    )
    framed = conn.relay(Passed(answer, answer.index(b"\r\n\r\n") + 4, b"brainy-node: n2\r\n"), 0.0)
    assert framed == (
        b"HTTP/1.1 404 Not Found\r\ncontent-type: application/json\r\ncontent-length: 2\r\n"
        b'brainy-node: n2\r\nalt-svc: h3=":9"\r\n\r\n{}'
    )
    assert conn.next_deadline() is not None
    [status, headers, body, keep] = parse(framed).messages[0]
    assert (status, body, keep) == (404, b"{}", True)
