"""brainy's own HTTP/2 framing and HPACK (``brainy._speedups.h2frame``, both twins) and the connection over it.

HPACK is held to the ``hpack`` library both ways (its encoder's blocks decoded here, ours decoded there:
random header lists, Huffman on and off, tables small enough to evict) and to RFC 7541's own examples;
the twins must agree byte for byte. The connection (``brainy.net.h2``, run over each twin in turn) is
driven by the ``h2`` library as the client, in memory, through h2spec-style cases: what it must answer,
what it must refuse, and how.
"""

from __future__ import annotations

import h2.errors
import h2.events
import h2.settings
import hpack
import pytest
from hyperframe.frame import GoAwayFrame, RstStreamFrame
from hypothesis import given, settings
from hypothesis import strategies as st
from test_sansio_h2 import Pair, frames

import brainy.net.h2 as h2mod
from brainy._speedups.errors import HeaderListTooLarge, HpackError, RequestMalformed
from brainy.net.h2 import CONNECTION_WINDOW, STREAM_WINDOW, H2Connection, RequestReceived, StreamReset
from brainy.net.http import Response

TWINS = settings(deadline=None, max_examples=150)

names = st.sampled_from(
    [
        b"content-type",
        b"x-a",
        b"x-b",
        b"accept",
        b"cookie",
        b"authorization",
        b"etag",
        b"content-length",
        b"server-timing",
        b"x-trace-id",
        b"server",
    ]
) | st.binary(min_size=1, max_size=12).map(lambda raw: bytes(b % 26 + 97 for b in raw))
header_lists = st.lists(st.lists(st.tuples(names, st.binary(max_size=40)), max_size=8), min_size=1, max_size=12)


@pytest.fixture
def twin(h2frame_twin, monkeypatch):
    """The connection frames with the twin under test."""
    monkeypatch.setattr(h2mod, "h2frame", h2frame_twin)
    return h2frame_twin


def raw(kind: int, flags: int, stream_id: int, payload: bytes) -> bytes:
    """A frame laid out by hand from RFC 9113 4.1, so neither twin is checked against itself."""
    return len(payload).to_bytes(3, "big") + bytes((kind, flags)) + stream_id.to_bytes(4, "big") + payload


GET = b"\x82\x86\x84\x41\x01t"  # :method GET, :scheme http, :path /, :authority t (RFC 7541 static table)


def goaway_codes(data: bytes) -> list[int]:
    return [f.error_code for f in frames(data) if isinstance(f, GoAwayFrame)]


def resets(data: bytes) -> list[tuple[int, int]]:
    return [(f.stream_id, f.error_code) for f in frames(data) if isinstance(f, RstStreamFrame)]


def settled() -> tuple[H2Connection, bytes]:
    """A server past the preface and the client's (empty) SETTINGS, its own frames taken."""
    server = H2Connection(0.0)
    server.receive_data(h2mod.PREFACE + raw(0x4, 0, 0, b""), 0.0)
    return server, server.data_to_send()


# -- HPACK against RFC 7541 and the hpack library ----------------------------------------------------


def test_rfc7541_c4_requests_with_huffman(h2frame_twin):
    """Appendix C.4: three requests on one connection, Huffman-coded, decoded to the RFC's lists, and our
    encoder writes the RFC's very bytes (each field indexed or added as the RFC's encoder does)."""
    blocks = [
        "828684418cf1e3c2e5f23a6ba0ab90f4ff",
        "828684be5886a8eb10649cbf",
        "828785bf408825a849e95ba97d7f8925a849e95bb8e8b4bf",
    ]
    lists = [
        [(b":method", b"GET"), (b":scheme", b"http"), (b":path", b"/"), (b":authority", b"www.example.com")],
        [
            (b":method", b"GET"),
            (b":scheme", b"http"),
            (b":path", b"/"),
            (b":authority", b"www.example.com"),
            (b"cache-control", b"no-cache"),
        ],
        [
            (b":method", b"GET"),
            (b":scheme", b"https"),
            (b":path", b"/index.html"),
            (b":authority", b"www.example.com"),
            (b"custom-key", b"custom-value"),
        ],
    ]
    decoder, encoder = h2frame_twin.Decoder(), h2frame_twin.Encoder()
    for block, fields in zip(blocks, lists):
        assert decoder.decode(bytes.fromhex(block)) == fields
        assert encoder.encode(fields).hex() == block
    assert decoder.table_size == encoder.table_size == 164


@TWINS
@given(lists=header_lists, huffman=st.booleans(), table=st.sampled_from([0, 64, 256, 4096]))
def test_hpack_round_trips_against_the_hpack_library_both_ways(h2frame_twins, lists, huffman, table):
    """Blocks the hpack library encodes decode here to its lists, and ours decode there to ours, block after
    block on one table (evicting when it is small); the twins' blocks are the same bytes."""
    compiled, pure = h2frame_twins
    ours = [compiled.Encoder(), pure.Encoder()]
    theirs_decoder = hpack.Decoder()
    theirs_encoder = hpack.Encoder()
    for encoder in ours:
        encoder.huffman = huffman
        encoder.set_max_table_size(table)
    theirs_decoder.max_allowed_table_size = 4096
    theirs_encoder.header_table_size = table
    decoders = [compiled.Decoder(), pure.Decoder()]
    for fields in lists:
        block, twin_block = (encoder.encode(fields) for encoder in ours)
        assert block == twin_block
        assert theirs_decoder.decode(block, raw=True) == fields
        theirs = theirs_encoder.encode(fields, huffman=huffman)
        assert decoders[0].decode(theirs) == decoders[1].decode(theirs) == fields


@TWINS
@given(data=st.binary(max_size=300))
def test_huffman_round_trips_and_the_twins_agree(h2frame_twins, data):
    compiled, pure = h2frame_twins
    encoded = compiled.huffman_encode(data)
    assert encoded == pure.huffman_encode(data)
    assert compiled.huffman_decode(encoded) == pure.huffman_decode(encoded) == data
    assert (
        hpack.huffman.HuffmanEncoder(
            hpack.huffman_constants.REQUEST_CODES, hpack.huffman_constants.REQUEST_CODES_LENGTH
        ).encode(data)
        == encoded
    )


def test_huffman_refuses_eos_and_bad_padding(h2frame_twin):
    """RFC 7541 5.2: EOS inside a string, or padding longer than seven bits or not all ones, is an error."""
    eos = (0x3FFFFFFF << 2 | 0x3).to_bytes(4, "big")  # EOS's 30 bits then two padding ones
    for bad in (eos, b"\xff", b"\x00"):  # eight ones of padding; a '0' code with zero padding
        with pytest.raises(HpackError):
            h2frame_twin.huffman_decode(bad)


@pytest.mark.parametrize(
    "block, why",
    [
        (b"\x80", "index 0"),
        (b"\xbf\x7f", "an index in neither table"),
        (b"\x3f\xe2\x1f", "a table size update over the 4,096 allowed"),
        (b"\x82\x20", "a table size update after a field"),
        (b"\x40\x05ab", "a name running past the block"),
        (b"\x82\xff\xff\xff\xff\xff\xff", "an integer too long"),
    ],
)
def test_blocks_that_do_not_decode(h2frame_twin, block, why):
    with pytest.raises(HpackError):
        h2frame_twin.Decoder().decode(block)


def test_an_hpack_bomb_is_refused_before_it_is_held(h2frame_twin):
    """A small block naming one big dynamic entry over and over decodes to more than the header-list limit:
    refused at the limit, not expanded whole."""
    decoder = h2frame_twin.Decoder(4096, 16384)
    block = b"\x40\x01x" + bytes([0x7F, 0x80 + (3000 - 127) % 128, (3000 - 127) // 128]) + b"a" * 3000
    block += b"\xbe" * 10_000  # index 62, the 3 KB entry, ten thousand times: 30 MB from 10 KB
    with pytest.raises(HeaderListTooLarge):
        decoder.decode(block)


def test_table_size_updates_are_written_then_honoured(h2frame_twins):
    """The peer's smaller SETTINGS_HEADER_TABLE_SIZE: the encoder says so first in its next block (the
    smallest, then the last, RFC 7541 4.2) and the hpack library follows it."""
    compiled, pure = h2frame_twins
    for twin in (compiled, pure):
        encoder, decoder = twin.Encoder(), hpack.Decoder()
        decoder.decode(encoder.encode([(b"x-a", b"1" * 100)]), raw=True)
        encoder.set_max_table_size(0)
        encoder.set_max_table_size(256)
        block = encoder.encode([(b"x-a", b"1" * 100)])
        assert block[:1] == b"\x20" and block[1:3] == b"\x3f\xe1"  # size 0, then size 256
        assert decoder.decode(block, raw=True) == [(b"x-a", b"1" * 100)]
        assert decoder.header_table_size == 256


# -- frames and request heads ---------------------------------------------------------------------


@TWINS
@given(
    kind=st.integers(0, 255),
    flags=st.integers(0, 255),
    stream=st.integers(0, (1 << 31) - 1),
    payload=st.binary(max_size=100),
)
def test_frames_are_laid_out_as_rfc9113_says(h2frame_twins, kind, flags, stream, payload):
    compiled, pure = h2frame_twins
    framed = raw(kind, flags, stream, payload)
    assert (
        compiled.frame(kind, flags, stream, payload) == pure.frame(kind, flags, stream, memoryview(payload)) == framed
    )
    reserved = bytearray(framed)
    reserved[5] |= 0x80  # the reserved bit is ignored on receipt
    for twin in (compiled, pure):
        assert twin.parse_header(b"zz" + bytes(reserved), 2) == (len(payload), kind, flags, stream)
        assert twin.parse_header(framed[:8]) is None


def test_a_request_head(h2frame_twin):
    fields = [
        (b":method", b"POST"),
        (b":scheme", b"http"),
        (b":path", b"/v1/x?dry=1"),
        (b":authority", b"t"),
        (b"content-type", b"application/json"),
        (b"content-length", b"12"),
        (b"te", b"trailers"),
    ]
    assert h2frame_twin.request_head(fields) == (
        "POST",
        "/v1/x",
        "dry=1",
        {"content-type": "application/json", "content-length": "12", "te": "trailers"},
        12,
    )


@pytest.mark.parametrize(
    "fields",
    [
        [(b":path", b"/"), (b":scheme", b"http")],  # no :method
        [(b":method", b"GET"), (b":scheme", b"http")],  # no :path
        [(b":method", b"GET"), (b":method", b"GET"), (b":scheme", b"http"), (b":path", b"/")],  # twice
        [(b":method", b"GET"), (b":status", b"200"), (b":scheme", b"http"), (b":path", b"/")],  # a response's
        [(b":method", b"GET"), (b":scheme", b"http"), (b"x", b"1"), (b":path", b"/")],  # after a field
        [(b":method", b"GET"), (b":scheme", b"http"), (b":path", b"/"), (b"X-Up", b"1")],  # uppercase
        [(b":method", b"GET"), (b":scheme", b"http"), (b":path", b"/"), (b"connection", b"close")],
        [(b":method", b"GET"), (b":scheme", b"http"), (b":path", b"/"), (b"te", b"gzip")],
        [(b":method", b"GET"), (b":scheme", b"http"), (b":path", b"/"), (b"x", b"a\r\nb")],
        [(b":method", b"GET"), (b":scheme", b"http"), (b":path", b"/"), (b"content-length", b"1e3")],
        [
            (b":method", b"GET"),
            (b":scheme", b"http"),
            (b":path", b"/"),
            (b"content-length", b"1"),
            (b"content-length", b"2"),
        ],
    ],
)
def test_malformed_request_heads(h2frame_twin, fields):
    with pytest.raises(RequestMalformed):
        h2frame_twin.request_head(fields)


# -- the connection, h2spec-style, over each twin --------------------------------------------------


def test_our_windows_are_open_wide_from_the_start(twin):
    """SETTINGS_INITIAL_WINDOW_SIZE and a connection WINDOW_UPDATE right after it: a 3 MiB request body
    flows with no wait for the server to acknowledge anything (RFC 9113 6.9)."""
    pair = Pair()
    assert pair.client.remote_settings.initial_window_size == STREAM_WINDOW
    assert pair.client.outbound_flow_control_window == CONNECTION_WINDOW
    stream = pair.request("POST", "/b", headers=(("content-type", "application/octet-stream"),), end=False)
    body = b"q" * (3 << 20)
    sent = 0
    while sent < len(body):  # the client sends all it may before reading anything back
        window = min(pair.client.local_flow_control_window(stream), pair.client.max_outbound_frame_size)
        if not window:
            pair.pump()
            continue
        pair.client.send_data(stream, body[sent : sent + window], end_stream=sent + window >= len(body))
        sent += window
        if sent < STREAM_WINDOW:
            assert pair.client.local_flow_control_window(stream) > 0
    pair.pump()
    [event] = pair.events
    assert isinstance(event, RequestReceived) and event.request.body == body


def test_a_large_answer_goes_out_in_one_pass_when_the_peer_allows(twin):
    """A 4 MiB answer to a peer with a 16 MiB window goes out whole in one data_to_send(): no round trip
    per 16 KiB, every frame within the peer's frame size."""
    pair = Pair(settings={h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 16 << 20})
    pair.client.increment_flow_control_window(16 << 20)
    stream = pair.request("GET", "/big")
    pair.pump()
    body = bytes(range(256)) * (1 << 14)
    pair.server.send_response(stream, Response(200, [], body))
    sent = pair.server.data_to_send()
    data = [f for f in frames(sent) if f.type == 0x0]
    assert b"".join(f.data for f in data) == body and all(len(f.data) <= 16384 for f in data)
    pair.client_events += pair.client.receive_data(sent)
    assert pair.received(stream) == body and pair.ended(stream)


def test_settings_are_acknowledged_and_honoured(twin):
    """The client's SETTINGS get an ACK; a larger SETTINGS_MAX_FRAME_SIZE lets DATA frames grow to it."""
    pair = Pair(
        settings={h2.settings.SettingCodes.MAX_FRAME_SIZE: 65536, h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 1 << 20}
    )
    assert any(isinstance(e, h2.events.SettingsAcknowledged) for e in pair.client_events)
    stream = pair.request("GET", "/big")
    pair.pump()
    pair.server.send_response(stream, Response(200, [], b"m" * 60000))
    data = [f for f in frames(pair.server.data_to_send()) if f.type == 0x0]
    assert [len(f.data) for f in data] == [60000]


def test_ping_is_answered_with_its_payload(twin):
    pair = Pair()
    pair.client.ping(b"brainy!!")
    pair.pump()
    [ack] = [e for e in pair.client_events if isinstance(e, h2.events.PingAckReceived)]
    assert ack.ping_data == b"brainy!!"


def test_unknown_frame_types_and_priority_are_ignored(twin):
    """An extension frame (type 0xfa) and PRIORITY frames change nothing: the request beside them is served."""
    server, _ = settled()
    events = server.receive_data(
        raw(0xFA, 0xFF, 1, b"whatever")
        + raw(0x2, 0, 3, b"\x00\x00\x00\x00\x10")
        + raw(0x1, 0x25, 1, b"\x00\x00\x00\x03\x10" + GET),
        0.0,
    )
    assert [type(e) for e in events] == [RequestReceived] and not server.ended
    server.send_response(1, Response(200, [], b"ok"))
    assert goaway_codes(server.data_to_send()) == []


def test_headers_continued_in_continuation_frames(twin):
    """A header block split over HEADERS and two CONTINUATION frames is one request."""
    server, _ = settled()
    block = GET + b"\x40\x03x-a\x05hello"
    [event] = server.receive_data(
        raw(0x1, 0x1, 1, block[:3]) + raw(0x9, 0, 1, block[3:8]) + raw(0x9, 0x4, 1, block[8:]), 0.0
    )
    assert (event.request.method, event.request.path, event.request.headers) == ("GET", "/", {"x-a": "hello"})


@pytest.mark.parametrize("between", [raw(0x6, 0, 0, bytes(8)), raw(0x9, 0x4, 3, b"\x82"), raw(0x1, 0x5, 3, GET)])
def test_a_frame_between_headers_and_continuation_is_a_connection_error(twin, between):
    """RFC 9113 6.10: after HEADERS without END_HEADERS only CONTINUATION on that stream may come."""
    server, _ = settled()
    assert server.receive_data(raw(0x1, 0x1, 1, GET[:2]) + between, 0.0) == []
    assert server.ended and goaway_codes(server.data_to_send()) == [h2.errors.ErrorCodes.PROTOCOL_ERROR]


def test_data_past_the_stream_window_resets_that_stream(twin):
    """A peer overrunning one stream's window (RFC 9113 6.9.1), sending past the 1 MiB it was told before
    reading the grant that follows: RST_STREAM FLOW_CONTROL_ERROR on it; the connection serves on."""
    server, _ = settled()
    chunk = b"x" * 16384
    up_to = raw(0x1, 0x4, 1, b"\x83\x86\x84\x41\x01t") + b"".join(
        raw(0x0, 0, 1, chunk) for _ in range(STREAM_WINDOW // 16384)
    )
    server.receive_data(up_to, 0.0)  # the whole window, exactly: no error, and a grant of it all again
    granted = [f for f in frames(server.data_to_send()) if f.type == 0x8 and f.stream_id == 1]
    assert [f.window_increment for f in granted] == [STREAM_WINDOW]
    server.receive_data(b"".join(raw(0x0, 0, 1, chunk) for _ in range(STREAM_WINDOW // 16384 + 1)), 0.0)
    assert resets(server.data_to_send()) == [(1, h2.errors.ErrorCodes.FLOW_CONTROL_ERROR)]
    [event] = server.receive_data(raw(0x1, 0x5, 3, GET), 0.0)
    assert event.stream_id == 3 and not server.ended


def test_data_past_the_connection_window_is_a_connection_error(twin):
    """Streams that each stay in their window but together overrun the connection's: GOAWAY
    FLOW_CONTROL_ERROR."""
    server, _ = settled()
    chunk = b"x" * 16384
    data = b""
    for stream in range(1, 2 * (CONNECTION_WINDOW // STREAM_WINDOW) + 4, 2):
        data += raw(0x1, 0x4, stream, b"\x83\x86\x84\x41\x01t")
        data += b"".join(raw(0x0, 0, stream, chunk) for _ in range(STREAM_WINDOW // 16384))
    assert server.receive_data(data, 0.0) == []  # no WINDOW_UPDATE read in between: the peer ignored ours
    assert server.ended
    assert goaway_codes(server.data_to_send()) == [h2.errors.ErrorCodes.FLOW_CONTROL_ERROR]


def test_a_window_grown_past_2_31_is_an_error(twin):
    server, _ = settled()
    assert server.receive_data(raw(0x8, 0, 0, (0x7FFFFFFF).to_bytes(4, "big")), 0.0) == []
    assert server.ended and goaway_codes(server.data_to_send()) == [h2.errors.ErrorCodes.FLOW_CONTROL_ERROR]


def test_an_hpack_table_size_over_ours_is_a_compression_error(twin):
    """A block resizing the dynamic table past our 4,096 bytes: GOAWAY COMPRESSION_ERROR."""
    server, _ = settled()
    assert server.receive_data(raw(0x1, 0x5, 1, b"\x3f\xe1\xff\x03" + GET), 0.0) == []
    assert server.ended and goaway_codes(server.data_to_send()) == [h2.errors.ErrorCodes.COMPRESSION_ERROR]


def test_a_header_list_over_the_limit_ends_the_connection(twin):
    """A block expanding past SETTINGS_MAX_HEADER_LIST_SIZE, or CONTINUATION frames piling up past it,
    is refused before it is held whole."""
    server, _ = settled()
    bomb = GET + b"\x40\x01x\x7f\x81\x0f" + b"a" * 2000 + b"\xbe" * 1000  # 2 KB entry named 1,000 times
    assert server.receive_data(raw(0x1, 0x5, 1, bomb), 0.0) == [] and server.ended
    assert goaway_codes(server.data_to_send()) == [h2.errors.ErrorCodes.COMPRESSION_ERROR]
    server, _ = settled()
    flood = raw(0x1, 0x1, 1, GET) + b"".join(raw(0x9, 0, 1, b"\x00" * 16384) for _ in range(5))
    assert server.receive_data(flood, 0.0) == [] and server.ended


def test_streams_past_the_concurrency_limit_are_refused(twin):
    """With two streams allowed, a third opened while both wait is RST_STREAM REFUSED_STREAM (safe to
    retry); once one is answered a new one is served."""
    pair = Pair(max_concurrent_streams=2)
    first, _second = pair.request("GET", "/a"), pair.request("GET", "/b")
    assert len(pair.pump()) == 2
    server = pair.server
    third = 5
    assert server.receive_data(raw(0x1, 0x5, third, GET), 0.0) == []  # the client library would not send it
    assert resets(server.data_to_send()) == [(third, h2.errors.ErrorCodes.REFUSED_STREAM)]
    server.send_response(first, Response(200, [], b"a"))
    server.data_to_send()
    [event] = server.receive_data(raw(0x1, 0x5, 7, GET), 0.0)
    assert event.stream_id == 7 and not server.ended


def test_a_malformed_request_resets_its_stream_alone(twin):
    """An uppercase field name (RFC 9113 8.2.1) resets that stream with PROTOCOL_ERROR; the next is served."""
    server, _ = settled()
    assert server.receive_data(raw(0x1, 0x5, 1, GET + b"\x00\x03X-A\x01v"), 0.0) == []
    assert resets(server.data_to_send()) == [(1, h2.errors.ErrorCodes.PROTOCOL_ERROR)]
    [event] = server.receive_data(raw(0x1, 0x5, 3, GET), 0.0)
    assert event.stream_id == 3


def test_headers_on_a_stream_awaiting_its_answer_resets_that_stream(twin):
    """RFC 9113 5.1, half-closed (remote): a second HEADERS on a stream whose request is whole and not yet
    answered is a stream error STREAM_CLOSED (RST_STREAM, the handed-out request reset), not a GOAWAY;
    the connection serves the next stream."""
    server, _ = settled()
    [event] = server.receive_data(raw(0x1, 0x5, 1, GET), 0.0)
    assert isinstance(event, RequestReceived)
    assert server.receive_data(raw(0x1, 0x5, 1, GET), 0.0) == [StreamReset(1)]
    assert resets(server.data_to_send()) == [(1, h2.errors.ErrorCodes.STREAM_CLOSED)] and not server.ended
    server.send_response(1, Response(200, [], b"late"))  # the reset stream takes nothing
    assert server.data_to_send() == b""
    [event] = server.receive_data(raw(0x1, 0x5, 3, GET), 0.0)
    assert event.stream_id == 3 and not server.ended


def test_headers_on_a_closed_stream_reset_it_and_still_feed_the_hpack_table(twin):
    """RFC 9113 5.1, closed: HEADERS on a stream already answered is RST_STREAM STREAM_CLOSED, the
    connection going on; its block is decoded all the same (RFC 9113 4.3: the dynamic table follows
    every block), so the next request may name the field it added."""
    server, _ = settled()
    server.receive_data(raw(0x1, 0x5, 1, GET), 0.0)
    server.send_response(1, Response(200, [], b"one"))
    server.data_to_send()
    added = b"\x40\x06x-late\x03yes"  # a literal with incremental indexing (GET's :authority is one too)
    assert server.receive_data(raw(0x1, 0x5, 1, GET + added), 0.0) == []
    out = server.data_to_send()
    assert resets(out) == [(1, h2.errors.ErrorCodes.STREAM_CLOSED)] and goaway_codes(out) == []
    # indexed, dynamic entry 63: GET's own :authority has just become 62, x-late is the one before it
    [event] = server.receive_data(raw(0x1, 0x5, 3, GET + b"\xbf"), 0.0)
    assert event.stream_id == 3 and event.request.headers["x-late"] == "yes"


def test_headers_reopening_a_skipped_stream_id_is_a_connection_error(twin):
    """RFC 9113 5.1.1: a new stream's id is above every id the peer used; HEADERS on an id it skipped
    (stream 3 after stream 5 opened) is a connection error PROTOCOL_ERROR; an even id is one too."""
    server, _ = settled()
    [event] = server.receive_data(raw(0x1, 0x5, 5, GET), 0.0)
    assert event.stream_id == 5
    assert server.receive_data(raw(0x1, 0x5, 3, GET), 0.0) == []
    assert server.ended and goaway_codes(server.data_to_send()) == [h2.errors.ErrorCodes.PROTOCOL_ERROR]
    server, _ = settled()
    assert server.receive_data(raw(0x1, 0x5, 2, GET), 0.0) == []
    assert server.ended and goaway_codes(server.data_to_send()) == [h2.errors.ErrorCodes.PROTOCOL_ERROR]


def test_a_body_unlike_its_content_length_resets_the_stream(twin):
    server, _ = settled()
    server.receive_data(raw(0x1, 0x4, 1, b"\x83\x86\x84\x41\x01t\x5c\x015"), 0.0)  # content-length: 5
    assert server.receive_data(raw(0x0, 0x1, 1, b"abc"), 0.0) == []
    assert resets(server.data_to_send()) == [(1, h2.errors.ErrorCodes.PROTOCOL_ERROR)]


def test_padding_is_stripped_and_counted(twin):
    """Padded DATA and HEADERS (RFC 9113 6.1, 6.2): the padding is not the body; padding as long as the
    frame is a PROTOCOL_ERROR."""
    server, _ = settled()
    server.receive_data(raw(0x1, 0x4 | 0x8, 1, b"\x02\x83\x86\x84\x41\x01t\x00\x00"), 0.0)
    [event] = server.receive_data(raw(0x0, 0x1 | 0x8, 1, b"\x03body\x00\x00\x00"), 0.0)
    assert event.request.body == b"body"
    assert server.receive_data(raw(0x0, 0x8, 3, b"\x05abc"), 0.0) == []
    assert server.ended and goaway_codes(server.data_to_send()) == [h2.errors.ErrorCodes.PROTOCOL_ERROR]


def test_the_first_frame_must_be_settings(twin):
    server = H2Connection(0.0)
    server.data_to_send()
    assert server.receive_data(h2mod.PREFACE + raw(0x6, 0, 0, bytes(8)), 0.0) == []
    assert server.ended and goaway_codes(server.data_to_send()) == [h2.errors.ErrorCodes.PROTOCOL_ERROR]


def test_the_preface_may_arrive_a_byte_at_a_time(twin):
    server = H2Connection(0.0)
    server.data_to_send()
    wire = h2mod.PREFACE + raw(0x4, 0, 0, b"") + raw(0x1, 0x5, 1, GET)
    events = [e for byte in wire for e in server.receive_data(bytes([byte]), 0.0)]
    assert [e.stream_id for e in events] == [1]


def test_trailers_end_an_answer_and_a_request(twin):
    """gRPC's shape: an answer's body then its trailers (grpc-status) ending the stream; a request's
    trailers end the request."""
    pair = Pair()
    stream = pair.request("POST", "/svc/get", body=b"\x00\x00\x00\x00\x00", end=False)
    pair.client.send_headers(stream, [("x-trailer", "1")], end_stream=True)
    [event] = pair.pump()
    assert event.request.body == b"\x00" * 5
    pair.server.send_response(
        stream, Response(200, [(b"content-type", b"application/grpc")], b"\x00" * 5, [(b"grpc-status", b"0")])
    )
    pair.pump()
    [trailers] = [e for e in pair.client_events if isinstance(e, h2.events.TrailersReceived)]
    assert trailers.headers == [("grpc-status", "0")] and pair.ended(stream)


def test_the_twins_frame_a_conversation_byte_for_byte(h2frame_twins, monkeypatch):
    """The same client bytes into a connection over each twin: the same bytes out, frame for frame."""
    outputs = []
    for twin in h2frame_twins:
        monkeypatch.setattr(h2mod, "h2frame", twin)
        pair = Pair(settings={h2.settings.SettingCodes.HEADER_TABLE_SIZE: 512})
        wire = [pair.server.data_to_send()]
        for i in range(20):
            stream = pair.request("GET", f"/v1/brains/b/get/row-{i}", headers=(("accept", "application/json"),))
            pair.server.receive_data(pair.client.data_to_send(), 0.0)
            pair.server.send_response(
                stream, Response(200, [(b"content-type", b"application/json"), (b"x-row", b"%d" % (i % 7))], b"{}" * i)
            )
            out = pair.server.data_to_send()
            pair.client.receive_data(out)
            wire.append(out)
        outputs.append(wire)
    assert outputs[0] == outputs[1]


# -- a unary call: HEADERS, then its one DATA with END_STREAM, in one read -----------------------------

GRPC = [
    (":method", "POST"),
    (":scheme", "http"),
    (":path", "/brainy.v1.Brainy/Get"),
    (":authority", "t"),
    ("content-type", "application/grpc"),
    ("te", "trailers"),
]


def unary_calls(cases: list[tuple[list[tuple[str, str]], int, int, bytes]]) -> list[list[bytes]]:
    """Each case ``(fields, DATA flags, DATA stream (0: the call's own), DATA payload)`` as its two frames, on
    streams 1, 3, 5, ..., the blocks from one HPACK encoder (so the dynamic table carries across calls)."""
    encoder = hpack.Encoder()
    calls = []
    for i, (fields, flags, on, payload) in enumerate(cases):
        stream = 2 * i + 1
        calls.append([raw(0x1, 0x4, stream, encoder.encode(fields)), raw(0x0, flags, on or stream, payload)])
    return calls


def conversation(reads: list[bytes], **options) -> tuple[list[tuple], bytes]:
    """A settled server fed ``reads`` one at a time, every request answered as it comes: what it handed out
    (comparable) and every byte it framed."""
    server = H2Connection(0.0, **options)
    wire = [server.data_to_send()]
    server.receive_data(h2mod.PREFACE + raw(0x4, 0, 0, b""), 0.0)
    seen = []
    for data in reads:
        for event in server.receive_data(data, 0.0):
            if isinstance(event, RequestReceived):
                seen.append(("request", event.stream_id, event.request))
                server.send_response(
                    event.stream_id,
                    Response(200, [(b"content-type", b"application/grpc")], b"\x00" * 5, [(b"grpc-status", b"0")]),
                )
            else:
                seen.append(
                    (type(event).__name__, event.stream_id, getattr(getattr(event, "refusal", None), "name", None))
                )
        wire.append(server.data_to_send())
    return seen, b"".join(wire)


UNARY_CASES = {
    "plain": [(GRPC, 0x1, 0, b"\x00\x00\x00\x00\x03abc")] * 3,
    "empty-body": [(GRPC, 0x1, 0, b"")],
    "stated-length": [(GRPC + [("content-length", "3")], 0x1, 0, b"abc")],
    "wrong-length": [(GRPC + [("content-length", "5")], 0x1, 0, b"abc"), (GRPC, 0x1, 0, b"ok")],
    "over-max-body": [(GRPC, 0x1, 0, b"x" * 65), (GRPC, 0x1, 0, b"fits")],
    "padded": [(GRPC, 0x1 | 0x8, 0, b"\x02abc\x00\x00")],
    "not-ended": [(GRPC, 0x0, 0, b"abc")],
    "other-stream": [(GRPC, 0x1, 0, b"a"), (GRPC, 0x1, 1, b"b")],
    "malformed": [
        ([(":method", "POST"), (":scheme", "http"), (":authority", "t")], 0x1, 0, b"abc"),
        (GRPC, 0x1, 0, b"after"),
    ],
    "frame-size": [(GRPC, 0x1, 0, b"x" * 16385)],
}


@pytest.mark.parametrize("case", sorted(UNARY_CASES))
def test_a_unary_call_in_one_read_is_read_as_its_frames_one_by_one(twin, case):
    """HEADERS then its DATA with END_STREAM in one read (a unary gRPC call) is handed out exactly as the two
    frames read one at a time are: the same events, the same bytes out (resets, refusals, window updates),
    and the HPACK table the same after it, for the plain call and for every shape that is not."""
    calls = unary_calls(UNARY_CASES[case])
    one_read = conversation([b"".join(call) for call in calls], max_body=64)
    by_frame = conversation([frame for call in calls for frame in call], max_body=64)
    assert one_read == by_frame


def test_a_plain_unary_call_takes_the_short_path(twin):
    """A unary call whose two frames came in one read is handed out from them at once, with its body, its
    stream kept as one answering (nothing more may arrive on it)."""
    server, _ = settled()
    [call] = unary_calls([(GRPC, 0x1, 0, b"\x00\x00\x00\x00\x02hi")])
    [event] = server.receive_data(b"".join(call), 0.0)
    assert event.request.method == "POST" and event.request.path == "/brainy.v1.Brainy/Get"
    assert event.request.body == b"\x00\x00\x00\x00\x02hi" and event.request.headers["te"] == "trailers"
    assert server._streams[1] is h2mod.ANSWERING
    # half-closed (remote): more DATA resets it, STREAM_CLOSED, and the request handed out is withdrawn
    assert server.receive_data(raw(0x0, 0x1, 1, b"late"), 0.0) == [StreamReset(1)]
    assert resets(server.data_to_send()) == [(1, h2.errors.ErrorCodes.STREAM_CLOSED)]


def test_unary_calls_past_half_the_connection_window_are_topped_up_as_frame_by_frame(twin):
    """The DATA a short path takes counts against the connection's window: calls past half of it get the same
    WINDOW_UPDATE, at the same point, as the frames read one at a time."""
    count = CONNECTION_WINDOW // 2 // 16384 + 2
    calls = unary_calls([(GRPC, 0x1, 0, b"y" * 16384)] * count)
    one_read = conversation([b"".join(call) for call in calls])
    assert one_read == conversation([frame for call in calls for frame in call])
    updates = [f for f in frames(one_read[1]) if type(f).__name__ == "WindowUpdateFrame" and f.stream_id == 0]
    assert len(updates) == 2  # the one after our SETTINGS, then the top-up
