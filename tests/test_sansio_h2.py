"""The HTTP/2 protocol object, sans-IO (``brainy.net.h2``): pumped against a real client, the h2 library's
client-side ``H2Connection``, in memory, with no socket, no loop and no sleep (STYLE 13).

What the server framed is read back by the client library, or, where that library cannot follow (it
reads nothing after a GOAWAY), frame by frame with hyperframe.
"""

from __future__ import annotations

import random
from typing import Any

import h2.config
import h2.connection
import h2.errors
import h2.events
import h2.settings
from hyperframe.frame import DataFrame, Frame, GoAwayFrame, HeadersFrame

from brainy.net.h2 import MAX_CONCURRENT_STREAMS, PREFACE, H2Connection, RequestReceived, RequestRefused, StreamReset
from brainy.net.http import MAX_HEADER_BYTES, Response, refusal_response

INITIAL_WINDOW = 65535  # RFC 9113 6.9.2: every window starts here until SETTINGS says otherwise


class Pair:
    """One server connection and one client connection, with the bytes between them moved by hand."""

    def __init__(self, settings: dict[int, int] | None = None, **server_options: Any) -> None:
        self.server = H2Connection(0.0, **server_options)
        self.client = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
        self.client.initiate_connection()
        if settings:
            self.client.update_settings(settings)
        self.events: list[Any] = []  # the server's events
        self.client_events: list[Any] = []  # the client's
        self.pump()

    def pump(self, now: float = 0.0) -> list[Any]:
        """Move bytes both ways until neither side has anything to say; answer the server's new events."""
        new: list[Any] = []
        while True:
            up = self.client.data_to_send()
            if up:
                new += self.server.receive_data(up, now)
            down = self.server.data_to_send()
            if down:
                self.client_events += self.client.receive_data(down)
            if not up and not down:
                self.events += new
                return new

    def request(
        self, method: str, path: str, body: bytes = b"", headers: tuple[tuple[str, str], ...] = (), end: bool = True
    ) -> int:
        """Open a stream with a request (its body in one DATA frame); ``end=False`` leaves it open for more."""
        stream = self.client.get_next_available_stream_id()
        fields = [(":method", method), (":path", path), (":scheme", "http"), (":authority", "t"), *headers]
        self.client.send_headers(stream, fields, end_stream=end and not body)
        if body:
            self.client.send_data(stream, body, end_stream=end)
        return stream

    def received(self, stream: int) -> bytes:
        """The DATA bytes the client has read on ``stream``."""
        return b"".join(
            e.data for e in self.client_events if isinstance(e, h2.events.DataReceived) and e.stream_id == stream
        )

    def response(self, stream: int) -> tuple[int, dict[str, str]]:
        [head] = [e for e in self.client_events if isinstance(e, h2.events.ResponseReceived) and e.stream_id == stream]
        fields = dict(head.headers)
        return int(fields.pop(":status")), fields

    def ended(self, stream: int) -> bool:
        return any(isinstance(e, h2.events.StreamEnded) and e.stream_id == stream for e in self.client_events)


def frames(data: bytes) -> list[Frame]:
    """The frames in ``data``, in order."""
    out = []
    view = memoryview(data)
    while view:
        frame, length = Frame.parse_frame_header(view[:9])
        frame.parse_body(view[9 : 9 + length])
        out.append(frame)
        view = view[9 + length :]
    return out


def test_a_request_is_handed_out_whole_once_its_stream_ends():
    """HEADERS then DATA frames (over one frame's size) are one RequestReceived when the stream ends, with
    the method, the path split from its query, the plain headers by lowercase name, and the body whole."""
    pair = Pair()
    body = b"x" * 40_000  # three DATA frames at the 16 KiB default frame size
    stream = pair.request("POST", "/v1/brains/b/add?dry=1", headers=(("content-type", "application/json"),), end=False)
    for at in range(0, len(body), 16384):
        pair.client.send_data(stream, body[at : at + 16384])
        assert pair.pump() == []  # nothing is handed out before the stream ends
    pair.client.end_stream(stream)
    [event] = pair.pump()
    assert isinstance(event, RequestReceived) and event.stream_id == stream
    request = event.request
    assert (request.method, request.path, request.query) == ("POST", "/v1/brains/b/add", "dry=1")
    assert request.headers == {"content-type": "application/json"}
    assert request.body == body


def test_a_request_body_larger_than_the_window_arrives_as_the_server_acknowledges_it():
    """The server acknowledges request bytes as it reads them, so a body over the 65,535-byte initial window
    keeps flowing: the client's window never stays shut."""
    pair = Pair()
    body = b"y" * 200_000
    stream = pair.request("POST", "/b", headers=(("content-type", "application/octet-stream"),), end=False)
    sent = 0
    while sent < len(body):
        window = min(pair.client.local_flow_control_window(stream), pair.client.max_outbound_frame_size)
        assert window > 0, f"the server left the client's window shut after {sent} bytes"
        chunk = body[sent : sent + window]
        sent += len(chunk)
        pair.client.send_data(stream, chunk, end_stream=sent == len(body))
        pair.pump()
    [event] = pair.events
    assert event.request.body == body


def test_settings_advertise_the_stream_and_header_limits():
    """The server's SETTINGS cap concurrent streams (a resource defence) and the header list (64 KiB)."""
    pair = Pair()
    assert pair.client.remote_settings.max_concurrent_streams == MAX_CONCURRENT_STREAMS
    assert pair.client.remote_settings.max_header_list_size == MAX_HEADER_BYTES


def test_an_answer_is_sent_only_as_far_as_the_stream_window_allows():
    """With a 1,000-byte stream window, a 5,000-byte answer sends exactly 1,000 DATA bytes and waits; a
    WINDOW_UPDATE of 1,500 lets exactly 1,500 more through; a larger one lets the rest through, with
    END_STREAM, and the stream is done."""
    pair = Pair(settings={h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 1000})
    stream = pair.request("GET", "/big")
    pair.pump()
    body = bytes(range(250)) * 20
    pair.server.send_response(stream, Response(200, [(b"content-type", b"application/octet-stream")], body))
    pair.pump()
    assert pair.response(stream) == (200, {"content-type": "application/octet-stream", "content-length": "5000"})
    assert len(pair.received(stream)) == 1000 and not pair.ended(stream)
    assert pair.server.sending
    pair.pump()
    assert len(pair.received(stream)) == 1000, "DATA went out with no window to carry it"
    pair.client.increment_flow_control_window(1500, stream_id=stream)
    pair.pump()
    assert len(pair.received(stream)) == 2500 and not pair.ended(stream)
    pair.client.increment_flow_control_window(10_000, stream_id=stream)
    pair.pump()
    assert pair.received(stream) == body and pair.ended(stream)
    assert not pair.server.sending


def test_the_connection_window_bounds_every_stream_together():
    """Two answers with roomy stream windows send 65,535 bytes in all (the connection's window) until the
    client opens the connection window; then both complete whole."""
    pair = Pair(settings={h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 1 << 20})
    streams = [pair.request("GET", "/a"), pair.request("GET", "/b")]
    pair.pump()
    body = b"z" * 50_000
    for stream in streams:
        pair.server.send_response(stream, Response(200, [], body))
    pair.pump()
    assert sum(len(pair.received(s)) for s in streams) == INITIAL_WINDOW
    pair.client.increment_flow_control_window(1 << 20)
    pair.pump()
    assert all(pair.received(s) == body and pair.ended(s) for s in streams)


def test_a_larger_initial_window_in_settings_unblocks_a_waiting_answer():
    """A SETTINGS frame raising SETTINGS_INITIAL_WINDOW_SIZE grows every open stream's window (RFC 9113
    6.9.2): the answer stalled at 1,024 bytes resumes, with no WINDOW_UPDATE, up to exactly the new size."""
    pair = Pair(settings={h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 1024})
    stream = pair.request("GET", "/big")
    pair.pump()
    pair.server.send_response(stream, Response(200, [], b"w" * 30_000))
    pair.pump()
    assert len(pair.received(stream)) == 1024
    pair.client.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 20_000})
    pair.pump()
    assert len(pair.received(stream)) == 20_000 and not pair.ended(stream)


def test_head_states_the_length_and_sends_no_body():
    """The answer to HEAD carries the length its GET would have, and ends with its HEADERS."""
    pair = Pair()
    stream = pair.request("HEAD", "/counts")
    pair.pump()
    pair.server.send_response(stream, Response(200, [(b"content-type", b"application/json")], b'{"n":1}'))
    pair.pump()
    assert pair.response(stream) == (200, {"content-type": "application/json", "content-length": "7"})
    assert pair.received(stream) == b"" and pair.ended(stream)


def test_a_body_over_the_limit_is_refused_on_its_stream_and_the_connection_serves_on():
    """A body over ``max_body`` is dropped as it arrives and the stream is handed out as RequestRefused
    (413) once it ends; the next stream on the connection is served."""
    pair = Pair(max_body=100)
    big = pair.request("POST", "/b", b"a" * 101)
    [refused] = pair.pump()
    assert isinstance(refused, RequestRefused) and refused.stream_id == big
    assert refused.refusal.name == "PayloadTooLargeError" and refused.refusal.status == 413
    pair.server.send_response(big, refusal_response(refused.refusal))
    small = pair.request("POST", "/b", b"a" * 100)
    [received] = pair.pump()
    assert isinstance(received, RequestReceived) and received.request.body == b"a" * 100
    assert pair.response(big)[0] == 413 and b"PayloadTooLargeError" in pair.received(big)
    assert small != big


def test_a_reset_stream_is_reported_and_takes_no_answer():
    """The peer resetting a stream whose request was handed out is a StreamReset (the glue cancels its
    work); an answer given afterwards sends nothing."""
    pair = Pair()
    stream = pair.request("GET", "/slow")
    pair.pump()
    pair.client.reset_stream(stream, h2.errors.ErrorCodes.CANCEL)
    assert pair.pump() == [StreamReset(stream)]
    pair.server.send_response(stream, Response(200, [], b"late"))
    assert pair.server.data_to_send() == b""
    assert pair.server.next_deadline() is not None  # no stream open: the idle deadline runs again


def test_a_frame_header_over_the_frame_size_ends_the_connection_before_its_body_arrives():
    """Nine bytes announcing a 16 MiB frame are enough: GOAWAY FRAME_SIZE_ERROR (RFC 9113 4.2), and the
    connection is over, without waiting for the frame."""
    pair = Pair()
    header = ((1 << 24) - 1).to_bytes(3, "big") + bytes([0x0, 0x0]) + (1).to_bytes(4, "big")
    assert pair.server.receive_data(header, 0.0) == []
    assert pair.server.ended
    [goaway] = frames(pair.server.data_to_send())
    assert isinstance(goaway, GoAwayFrame) and goaway.error_code == h2.errors.ErrorCodes.FRAME_SIZE_ERROR
    assert pair.server.receive_data(b"x" * 100, 0.0) == [] and pair.server.data_to_send() == b""


def test_a_protocol_violation_ends_the_connection_with_goaway():
    """A client stream id that is even is a PROTOCOL_ERROR: GOAWAY naming it, then ``ended``."""
    server = H2Connection(0.0)
    server.data_to_send()
    client = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
    client.initiate_connection()
    server.receive_data(client.data_to_send(), 0.0)
    headers = HeadersFrame(2, flags=["END_HEADERS", "END_STREAM"])
    headers.data = client.encoder.encode([(":method", "GET"), (":path", "/"), (":scheme", "http"), (":authority", "t")])
    assert server.receive_data(headers.serialize(), 0.0) == []
    assert server.ended
    goaway = [f for f in frames(server.data_to_send()) if isinstance(f, GoAwayFrame)]
    assert [f.error_code for f in goaway] == [h2.errors.ErrorCodes.PROTOCOL_ERROR]


def test_the_preface_must_lead():
    """Bytes that depart from the 24-byte preface end the connection at once, with no GOAWAY: the peer is
    not speaking HTTP/2 (RFC 9113 3.4 lets the GOAWAY be left out). (Over a socket the preface reader
    gives such bytes to HTTP/1.1 before they reach here.)"""
    server = H2Connection(0.0)
    server.data_to_send()
    assert server.receive_data(PREFACE[:18] + b"XX\r\n\r\n" + bytes(9), 0.0) == []
    assert server.ended and server.data_to_send() == b""


def test_a_polite_close_says_goaway_first_answers_the_streams_in_hand_then_ends():
    """``close()`` with a stream in hand: GOAWAY (NO_ERROR, naming that stream as the last) goes out at
    once; the stream is still answered after it; a stream the peer opens past it is refused
    (REFUSED_STREAM, safe to retry); once the last answer is out the final GOAWAY follows and the
    connection has ended."""
    pair = Pair()
    stream = pair.request("GET", "/slow")
    pair.pump()
    pair.server.close()
    assert not pair.server.ended
    first = frames(pair.server.data_to_send())
    assert [(type(f), f.last_stream_id, f.error_code) for f in first] == [(GoAwayFrame, stream, 0)]
    late = stream + 2
    pair.client.send_headers(
        late, [(":method", "GET"), (":path", "/late"), (":scheme", "http"), (":authority", "t")], end_stream=True
    )
    assert pair.server.receive_data(pair.client.data_to_send(), 0.0) == []
    refused = frames(pair.server.data_to_send())
    assert [(f.stream_id, f.error_code) for f in refused] == [(late, h2.errors.ErrorCodes.REFUSED_STREAM)]
    pair.server.send_response(stream, Response(200, [], b"answered"))
    assert pair.server.ended
    after = frames(pair.server.data_to_send())
    assert [type(f) for f in after] == [HeadersFrame, DataFrame, GoAwayFrame]
    assert after[1].data == b"answered" and "END_STREAM" in after[1].flags
    assert (after[2].last_stream_id, after[2].error_code) == (stream, 0)


def test_a_polite_close_with_nothing_open_ends_at_once():
    """With no stream open, ``close()`` is one GOAWAY and the end."""
    pair = Pair()
    pair.server.close()
    assert pair.server.ended
    [goaway] = frames(pair.server.data_to_send())
    assert isinstance(goaway, GoAwayFrame) and goaway.error_code == 0


def test_the_peer_saying_goaway_ends_the_connection():
    """A client's GOAWAY ends the connection: nothing it sent with it is handed out."""
    pair = Pair()
    pair.request("GET", "/a")
    pair.client.close_connection()
    assert pair.pump() == [] and pair.server.ended


def test_requests_arrive_whole_however_their_bytes_are_cut_into_reads():
    """A frame kept from one read is made whole by the next (its head cut or not, the frame spanning many reads),
    and the bodies, kept as views of the reads until they are joined, read back byte for byte, two streams'
    DATA interleaved, whatever the reads' sizes."""
    rng = random.Random(5)
    bodies = [rng.randbytes(50_000), rng.randbytes(70_001)]
    for cut in (1, 5, 8, 9, 10, 100, 16_393, 20_000, 0):
        pair = Pair()
        streams = [pair.request("POST", f"/b{i}", end=False) for i in range(2)]
        for at in range(0, 70_001, 16_384):
            for stream, body in zip(streams, bodies, strict=True):
                if at < len(body):
                    pair.client.send_data(stream, body[at : at + 16_384], end_stream=at + 16_384 >= len(body))
        data = pair.client.data_to_send()
        events = []
        at = 0
        while at < len(data):
            size = cut or rng.randint(1, 40_000)
            events += pair.server.receive_data(data[at : at + size], 0.0)
            at += size
        got = {e.stream_id: e.request.body for e in events if isinstance(e, RequestReceived)}
        assert got == dict(zip(streams, bodies, strict=True)), f"reads of {cut or 'random'} bytes"
