"""WebSocket framing (RFC 6455 5.2) and the sans-IO session (brainy/net/ws.py), against both twins of wsframe.

Every test taking ``wsframe_twin`` runs once with the compiled twin and once with the pure one; the
session tests swap the twin the session frames with. Frames are built here by hand from the RFC's
layout, so neither twin is checked against itself.
"""

from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from brainy.net import ws

TWINS = settings(deadline=None, max_examples=300)


def client_frame(
    opcode: int,
    payload: bytes,
    *,
    fin: bool = True,
    rsv: int = 0,
    masked: bool = True,
    key: bytes = b"\x37\xfa\x21\x3d",
    length: int | None = None,
) -> bytes:
    """A client frame laid out by hand from RFC 6455 5.2 (``length`` overrides the announced length)."""
    n = len(payload) if length is None else length
    b0 = (0x80 if fin else 0) | (rsv << 4) | opcode
    mask_bit = 0x80 if masked else 0
    if n < 126:
        head = bytes((b0, mask_bit | n))
    elif n < 65536:
        head = bytes((b0, mask_bit | 126)) + struct.pack(">H", n)
    else:
        head = bytes((b0, mask_bit | 127)) + struct.pack(">Q", n)
    if not masked:
        return head + payload
    body = bytes(b ^ key[i % 4] for i, b in enumerate(payload))
    return head + key + body


@pytest.fixture
def session(wsframe_twin, monkeypatch):
    """A fresh session framing with the twin under test."""
    monkeypatch.setattr(ws, "wsframe", wsframe_twin)
    return ws.WsConnection()


def test_the_rfc_examples(wsframe_twin):
    """RFC 6455 5.7: a masked "Hello" from a client unmasks to Hello; the server's unmasked "Hello" and its
    256-byte and 64 KiB binary frames are laid out as the RFC shows."""
    frame = bytes.fromhex("818537fa213d7f9f4d5158")
    assert wsframe_twin.parse_header(frame) == (1, 0, 1, 1, 5, 6)
    assert wsframe_twin.unmask(frame, 6, 5, frame[2:6]) == b"Hello"
    assert wsframe_twin.build(1, b"Hello") == bytes.fromhex("810548656c6c6f")
    assert wsframe_twin.build(2, bytes(256))[:4] == bytes.fromhex("827e0100")
    assert wsframe_twin.build(2, bytes(65536))[:10] == bytes.fromhex("827f0000000000010000")


@TWINS
@given(
    payload=st.binary(max_size=70000),
    key=st.binary(min_size=4, max_size=4),
    opcode=st.sampled_from([1, 2, 9]),
    cut=st.integers(0, 14),
)
def test_headers_payloads_and_incomplete_headers(wsframe_twin, payload, key, opcode, cut):
    """Any payload round-trips: its header decodes to its length (None while the header is cut short), and
    unmasking undoes the mask; a server frame's header decodes to the payload's length, unmasked."""
    frame = client_frame(opcode, payload, key=key)
    fin, rsv, op, masked, length, head = wsframe_twin.parse_header(frame)
    assert (fin, rsv, op, masked, length) == (1, 0, opcode, 1, len(payload))
    assert wsframe_twin.unmask(frame, head, length, frame[head - 4 : head]) == payload
    assert wsframe_twin.parse_header(frame[: min(cut, head - 1)]) is None
    built = wsframe_twin.build(opcode, payload)
    assert wsframe_twin.parse_header(built)[2:] == (opcode, 0, len(payload), len(built) - len(payload))


@TWINS
@given(data=st.binary(max_size=64), start=st.integers(0, 16))
def test_the_twins_agree_on_any_bytes(wsframe_twins, data, start):
    """On any bytes at any start, both twins read the same header (or the same None)."""
    compiled, pure = wsframe_twins
    assert compiled.parse_header(data, start) == pure.parse_header(data, start)


def test_calls_pings_and_close(session):
    """A text frame is one call; a ping is answered with a pong carrying its payload; a close is echoed with
    its code and ends the session, and nothing after it is read."""
    events = session.receive_data(client_frame(1, b'{"ref":1}') + client_frame(9, b"hb"))
    assert events == [ws.TextReceived(b'{"ref":1}')]
    assert session.data_to_send() == b"\x8a\x02hb"
    events = session.receive_data(client_frame(8, struct.pack(">H", 1000)) + client_frame(1, b"late"))
    assert events == [ws.SessionEnded(1000)] and session.ended
    assert session.data_to_send() == b"\x88\x02\x03\xe8"


def test_frames_split_anywhere(session):
    """A call delivered a byte at a time is one call, once."""
    frame = client_frame(1, b"x" * 300)
    events = []
    for i in range(len(frame)):
        events += session.receive_data(frame[i : i + 1])
    assert events == [ws.TextReceived(b"x" * 300)]


def test_binary_and_fragmented_frames_refuse_and_stay_open(session):
    """BinaryFrameError and FragmentedFrameError are answered with the session still open; a fragmented
    message's later fragments are skipped, never half-read, and the next call is answered."""
    events = session.receive_data(
        client_frame(2, b"\x00")
        + client_frame(1, b'{"a"', fin=False)
        + client_frame(0, b":1", fin=False)
        + client_frame(0, b"}")
        + client_frame(1, b"next")
    )
    assert [type(e).__name__ for e in events] == ["FrameRefused", "FrameRefused", "TextReceived"]
    assert [e.refusal.name for e in events[:2]] == ["BinaryFrameError", "FragmentedFrameError"]
    assert events[2].payload == b"next" and not session.ended


@pytest.mark.parametrize(
    "frame, name, code",
    [
        (client_frame(1, b"hi", masked=False), "UnmaskedFrameError", 1002),
        (client_frame(1, b"hi", rsv=4), "ReservedBitError", 1002),
        (client_frame(3, b"hi"), "ReservedBitError", 1002),
        (client_frame(1, b"", length=ws.MAX_FRAME + 1)[:14], "FrameTooLargeError", 1009),
        (client_frame(9, b"p" * 126), "ControlFrameTooLargeError", 1002),
        (client_frame(9, b"p", fin=False), "ControlFrameTooLargeError", 1002),
    ],
    ids=["unmasked", "reserved-bit", "reserved-opcode", "over-8MiB", "control-over-125", "control-fragmented"],
)
def test_violations_end_the_session_with_their_close_code(session, frame, name, code):
    """Each violation ends the session by name with RFC 6455's close code: a close frame carrying the code and
    the class name. An oversized frame is refused from its header alone, before its payload arrives."""
    events = session.receive_data(frame)
    assert events == [ws.SessionEnded(code, events[0].refusal)] and events[0].refusal.name == name
    assert session.data_to_send() == ws.wsframe.build(8, struct.pack(">H", code) + name.encode())
    assert session.ended and session.receive_data(client_frame(1, b"more")) == []


@pytest.mark.parametrize(
    "payload, answer",
    [
        (b"", 1000),
        (struct.pack(">H", 1000), 1000),
        (struct.pack(">H", 1001) + b"bye", 1001),
        (struct.pack(">H", 1011), 1011),
        (struct.pack(">H", 4000) + "\u00e9t\u00e9".encode(), 4000),
        (b"\x03", 1002),  # one byte: no code, half a code
        (struct.pack(">H", 0), 1002),
        (struct.pack(">H", 999), 1002),
        (struct.pack(">H", 1004), 1002),
        (struct.pack(">H", 1005), 1002),  # "no status": never on the wire
        (struct.pack(">H", 1006), 1002),  # "abnormal closure": never on the wire
        (struct.pack(">H", 1015), 1002),  # "TLS failure": never on the wire
        (struct.pack(">H", 2999), 1002),
        (struct.pack(">H", 5000), 1002),
        (struct.pack(">H", 65535), 1002),
        (struct.pack(">H", 1000) + b"\xff", 1007),  # a reason that is not UTF-8
    ],
)
def test_a_close_is_answered_with_a_code_the_wire_may_carry(session, payload, answer):
    """A peer's close frame is echoed with its code when RFC 6455 7.4 lets a close frame carry it, with 1000
    when it has none; one whose code no endpoint may send (1005, 1006, 1015, unassigned) or whose payload is a
    single byte is answered 1002, one whose reason is not UTF-8 1007. The echo once sent back whatever came,
    1006 and 65535 among them (found by tools/fuzz_transports.py)."""
    events = session.receive_data(client_frame(8, payload))
    assert events == [ws.SessionEnded(answer)] and session.ended
    assert session.data_to_send() == ws.wsframe.build(8, struct.pack(">H", answer))


def test_the_lifecycle_table_is_total():
    """Every (open or skipping state, input) pair has a row, each action is one the session performs, and
    every next state is a state."""
    actions = {"deliver", "refuse-binary", "refuse-fragmented", "pong", "ignore", "echo-close", "close"}
    for state in (ws.OPEN, ws.SKIPPING):
        for kind in ws.INPUTS:
            action, after = ws.LIFECYCLE[(state, kind)]
            assert action in actions and after in ws.STATES


_frames = st.one_of(
    st.builds(
        client_frame,
        st.sampled_from([0, 1, 2, 8, 9, 10]),
        st.binary(max_size=200),
        fin=st.booleans(),
        rsv=st.sampled_from([0, 0, 0, 1, 4]),
        masked=st.sampled_from([True, True, True, False]),
    ),
    st.binary(max_size=40),  # garbage
)


def _random_streams(twin, chunks, split):
    """Random, malformed and valid frames fed in arbitrary pieces never raise: every event is a call, a refusal by
    name or the end; after the end nothing more is read."""
    session = ws.WsConnection()
    ws_twin, ws.wsframe = ws.wsframe, twin
    try:
        data = b"".join(chunks)
        for i in range(0, len(data), split):
            for event in session.receive_data(data[i : i + split]):
                assert isinstance(event, (ws.TextReceived, ws.FrameRefused, ws.SessionEnded))
                if isinstance(event, ws.SessionEnded) and event.refusal is not None:
                    assert event.refusal.ws["close"] == event.code
            session.data_to_send()
    finally:
        ws.wsframe = ws_twin


_STREAMS = given(chunks=st.lists(_frames, max_size=6), split=st.integers(1, 64))


@pytest.mark.slow
@settings(deadline=None, max_examples=10_000, suppress_health_check=[HealthCheck.too_slow])
@_STREAMS
def test_ten_thousand_random_and_malformed_streams(wsframe_twins, chunks, split):
    """10,000 streams through the compiled twin, the parser a server runs (issue 15)."""
    _random_streams(wsframe_twins[0], chunks, split)


@settings(deadline=None, max_examples=2_000, suppress_health_check=[HealthCheck.too_slow])
@_STREAMS
def test_random_and_malformed_streams_through_the_pure_twin(wsframe_twins, chunks, split):
    """2,000 streams through the pure twin (a server without the compiled one): the stream is the same law, and
    most of a stream's time is hypothesis making it, not the twin reading it (10,000 took 28 s)."""
    _random_streams(wsframe_twins[1], chunks, split)


def test_the_handshake():
    """RFC 6455 4.2.2: the accept value of the RFC's sample key; a key that is not 16 base64 bytes, a
    version that is not 13 or a missing Upgrade refuses MalformedRequestError before any upgrade."""
    assert ws.accept_value("dGhlIHNhbXBsZSBub25jZQ==") == "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="
    good = {
        "upgrade": "websocket",
        "connection": "keep-alive, Upgrade",
        "sec-websocket-version": "13",
        "sec-websocket-key": "dGhlIHNhbXBsZSBub25jZQ==",
    }
    assert ws.check_handshake("GET", good) == "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="
    from brainy.contract import refusals as R

    for bad in (
        {"sec-websocket-key": "c2hvcnQ="},
        {"sec-websocket-version": "8"},
        {"upgrade": "h2c"},
        {"sec-websocket-key": "not base64!!"},
    ):
        with pytest.raises(R.MalformedRequestError):
            ws.check_handshake("GET", {**good, **bad})
