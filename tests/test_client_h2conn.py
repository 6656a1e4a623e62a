"""The client's HTTP/2 streams (brainy/client/h2conn.py) against an in-memory server (the h2 library's server side),
bytes pumped between them with no socket (STYLE 13); and the wire's plan and retry rules both protocols share
(brainy/client/wire.py). The same client against a real ``brainy serve`` is tests/test_client.py."""

from __future__ import annotations

from typing import Any

import h2.config
import h2.connection
import h2.errors
import h2.events
import h2.settings
import hyperframe.frame
import pytest

from brainy.client import h2conn, wire
from brainy.client.h2conn import H2Session, NotHttp2Error, ProtocolChoice
from brainy.contract import doors as D

GET = wire.Request("get", "GET", "/v1/brains/notes/get/a", b"", None, True)


class Peer:
    """An HTTP/2 server in memory (the h2 library), answering what :meth:`pump` hands it."""

    def __init__(self, settings: dict[int, int] | None = None) -> None:
        self.conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False, header_encoding=None))
        self.conn.initiate_connection()
        if settings:
            self.conn.update_settings(settings)
        self.requests: dict[int, dict[str, Any]] = {}

    def receive(self, data: bytes) -> list[h2.events.Event]:
        events = self.conn.receive_data(data)
        for event in events:
            if isinstance(event, h2.events.RequestReceived):
                self.requests[event.stream_id] = {"headers": dict(event.headers or []), "body": b"", "ended": False}
            elif isinstance(event, h2.events.DataReceived):
                self.requests[event.stream_id]["body"] += event.data
                self.conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
            elif isinstance(event, h2.events.StreamEnded):
                self.requests[event.stream_id]["ended"] = True
        return events

    def answer(self, stream_id: int, body: bytes, status: int = 200) -> None:
        fields = [(b":status", str(status).encode()), (b"content-type", b"application/json")]
        self.conn.send_headers(stream_id, [*fields, (b"content-length", str(len(body)).encode())])
        self.conn.send_data(stream_id, body, end_stream=True)


def pump(session: H2Session, peer: Peer, rounds: int = 8) -> list[Any]:
    """Move bytes both ways until neither side has any; the client's events."""
    events: list[Any] = []
    for _ in range(rounds):
        out = session.data_to_send()
        if out:
            peer.receive(out)
        back = peer.conn.data_to_send()
        if back:
            events += session.receive_data(back)
        if not out and not back:
            break
    return events


def opened(settings: dict[int, int] | None = None) -> tuple[H2Session, Peer]:
    session, peer = H2Session("example.test:8300", "http"), Peer(settings)
    pump(session, peer)
    assert session.heard
    return session, peer


def test_a_call_is_one_stream_with_the_pseudo_headers_and_the_wire_fields() -> None:
    """A call opens a stream whose HEADERS carry :method, :scheme, :authority, :path and wire.fields; its answer
    comes back whole, status, fields and body."""
    session, peer = opened()
    exchange = session.send(GET, wire.h2_fields(GET, "bky_k", wire.MSGPACK))
    pump(session, peer)
    (stream_id,) = peer.requests
    headers = peer.requests[stream_id]["headers"]
    assert headers[b":method"] == b"GET" and headers[b":path"] == b"/v1/brains/notes/get/a"
    assert headers[b":authority"] == b"example.test:8300" and headers[b":scheme"] == b"http"
    assert headers[b"authorization"] == b"Bearer bky_k" and headers[b"accept"] == wire.MSGPACK.encode()
    peer.answer(stream_id, b'{"entity": {"id": "a"}}')
    events = pump(session, peer)
    assert [type(e) for e in events] == [h2conn.ResponseEnded] and exchange.done and exchange.error is None
    assert exchange.response.status == 200 and wire.answer(exchange.response) == {"entity": {"id": "a"}}
    assert session.idle


def test_an_http1_answer_to_the_preface_is_not_http2() -> None:
    """The server's first bytes must be a SETTINGS frame: an HTTP/1.1 server's 400 to the preface is NotHttp2Error
    before any stream opened, and the session takes no calls."""
    session = H2Session("example.test", "http")
    session.data_to_send()
    with pytest.raises(NotHttp2Error, match="HTTP/1.1 400"):
        session.receive_data(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n")
    assert not session.accepting and not session.heard


def test_calls_past_the_servers_stream_limit_wait_their_turn_in_order() -> None:
    """With SETTINGS_MAX_CONCURRENT_STREAMS 2, five calls open two streams; each answer opens the next waiting one,
    and every call is answered."""
    session, peer = opened({h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS: 2})
    calls = [session.send(GET, wire.h2_fields(GET, None, wire.JSON)) for _ in range(5)]
    pump(session, peer)
    assert [c.sent for c in calls] == [True, True, False, False, False]
    answered = 0
    while answered < 5:
        open_ids = sorted(i for i, r in peer.requests.items() if r["ended"] and i not in _answered(peer))
        assert len(open_ids) <= 2
        peer.answer(open_ids[0], b"{}")
        peer.requests[open_ids[0]]["answered"] = True
        pump(session, peer)
        answered += 1
    assert all(c.done and c.response.status == 200 for c in calls)
    assert [c.stream_id for c in calls] == [1, 3, 5, 7, 9]


def _answered(peer: Peer) -> set[int]:
    return {i for i, r in peer.requests.items() if r.get("answered")}


def test_a_body_past_the_servers_windows_goes_as_they_open() -> None:
    """A 300 KB body against the default 64 KiB windows: what fits goes at once, the rest as the server's
    WINDOW_UPDATEs come; the server gets every byte, in order, and the stream ends with the last."""
    session, peer = opened()
    body = bytes(range(256)) * 1200
    post = wire.Request("addMany", "POST", "/v1/brains/notes/addMany", body, wire.MSGPACK, False)
    exchange = session.send(post, wire.h2_fields(post, None, wire.MSGPACK))
    first = session.data_to_send()
    assert 65535 <= len(first) < len(body)  # held to the window
    peer.receive(first)
    pump(session, peer, rounds=64)
    (stream_id,) = peer.requests
    assert peer.requests[stream_id]["body"] == body and peer.requests[stream_id]["ended"]
    peer.answer(stream_id, b'{"ids": []}')
    pump(session, peer)
    assert exchange.done and exchange.response.status == 200


def test_an_answer_past_our_windows_is_acknowledged_as_it_is_taken(monkeypatch: pytest.MonkeyPatch) -> None:
    """With our windows shrunk to 100 KB and 200 KB, a 1 MB answer still arrives whole: each DATA taken is
    acknowledged, so the server's windows reopen."""
    monkeypatch.setattr(h2conn, "STREAM_WINDOW", 100_000)
    monkeypatch.setattr(h2conn, "CONNECTION_WINDOW", 200_000)
    session, peer = opened()
    exchange = session.send(GET, wire.h2_fields(GET, None, wire.JSON))
    pump(session, peer)
    (stream_id,) = peer.requests
    body = b"x" * 1_000_000
    peer.conn.send_headers(stream_id, [(b":status", b"200"), (b"content-type", b"text/plain")])
    sent = 0
    for _ in range(200):
        room = min(peer.conn.local_flow_control_window(stream_id), peer.conn.max_outbound_frame_size)
        if room and sent < len(body):
            n = min(room, len(body) - sent)
            peer.conn.send_data(stream_id, body[sent : sent + n], end_stream=sent + n == len(body))
            sent += n
        pump(session, peer)
        if exchange.done:
            break
    assert exchange.done and exchange.response.body == body


def test_a_goaway_fails_the_streams_above_its_last_id_unprocessed_and_answers_the_rest() -> None:
    """GOAWAY (NO_ERROR, last stream 1) with streams 1 and 3 open: stream 3 fails wire.Unprocessed (safe to send
    again, whatever it was), stream 1 is still answered, and no new call is taken."""
    session, peer = opened()
    one = session.send(GET, wire.h2_fields(GET, None, wire.JSON))
    three = session.send(GET, wire.h2_fields(GET, None, wire.JSON))
    pump(session, peer)
    goaway = hyperframe.frame.GoAwayFrame(0)
    goaway.last_stream_id, goaway.error_code = 1, 0
    session.receive_data(goaway.serialize())  # brainy's polite close: GOAWAY, then the streams it kept answered
    assert three.done and isinstance(three.error, wire.Unprocessed)
    assert not one.done and not session.accepting
    with pytest.raises(wire.Unprocessed):
        session.send(GET, [])
    peer.answer(1, b"{}")
    pump(session, peer)
    assert one.done and one.error is None and one.response.status == 200


def test_a_reset_stream_fails_its_call_alone() -> None:
    """RST_STREAM on one call: that call fails (REFUSED_STREAM as Unprocessed, another code as StreamResetError),
    the other is answered."""
    session, peer = opened()
    refused, reset, fine = (session.send(GET, wire.h2_fields(GET, None, wire.JSON)) for _ in range(3))
    pump(session, peer)
    peer.conn.reset_stream(1, h2.errors.ErrorCodes.REFUSED_STREAM)
    peer.conn.reset_stream(3, h2.errors.ErrorCodes.INTERNAL_ERROR)
    peer.answer(5, b"{}")
    pump(session, peer)
    assert isinstance(refused.error, wire.Unprocessed)
    assert isinstance(reset.error, h2conn.StreamResetError) and "INTERNAL_ERROR" in str(reset.error)
    assert fine.error is None and fine.response.status == 200


def test_a_cancelled_call_resets_its_stream_and_the_connection_carries_on() -> None:
    """The caller's timeout cancels its call: RST_STREAM CANCEL on its stream; the next call is answered."""
    session, peer = opened()
    late = session.send(GET, wire.h2_fields(GET, None, wire.JSON))
    pump(session, peer)
    session.cancel(late)
    events = []
    out = session.data_to_send()
    events = peer.receive(out)
    assert any(isinstance(e, h2.events.StreamReset) and e.error_code == h2.errors.ErrorCodes.CANCEL for e in events)
    after = session.send(GET, wire.h2_fields(GET, None, wire.JSON))
    pump(session, peer)
    peer.answer(3, b"{}")
    pump(session, peer)
    assert after.done and after.response.status == 200 and session.idle


def test_a_held_stream_hands_its_body_out_as_it_comes_and_a_refused_one_whole() -> None:
    """A held call (the change feed) gets BodyReceived per DATA frame; one answered 404 keeps its body whole, for
    the refusal to be read from it."""
    session, peer = opened()
    feed = session.send(GET, wire.h2_fields(GET, None, wire.EVENT_STREAM), held=True)
    refused = session.send(GET, wire.h2_fields(GET, None, wire.EVENT_STREAM), held=True)
    pump(session, peer)
    peer.conn.send_headers(1, [(b":status", b"200"), (b"content-type", b"text/event-stream")])
    peer.conn.send_data(1, b"id: 1.0\nevent: change\ndata: {}\n\n")
    peer.conn.send_data(1, b": heartbeat\n\n")
    peer.answer(3, b'{"error": {"name": "EntityNotFoundError", "message": "no"}}', status=404)
    events = pump(session, peer)
    pieces = [e.data for e in events if isinstance(e, h2conn.BodyReceived)]
    assert pieces == [b"id: 1.0\nevent: change\ndata: {}\n\n", b": heartbeat\n\n"]
    assert not feed.done and refused.done and refused.response.status == 404
    with pytest.raises(Exception, match="no") as caught:
        wire.held_refused(refused.response)
    assert type(caught.value).__name__ == "EntityNotFoundError"


def test_the_connection_ending_fails_the_open_calls_and_the_waiting_ones_unprocessed() -> None:
    """The connection closes with a call open and one waiting past the stream limit: the open one fails
    ConnectionEndedError (it may have been acted on), the waiting one Unprocessed (it never left)."""
    session, peer = opened({h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS: 1})
    sent = session.send(GET, wire.h2_fields(GET, None, wire.JSON))
    waiting = session.send(GET, wire.h2_fields(GET, None, wire.JSON))
    pump(session, peer)
    session.connection_lost(ConnectionResetError("reset"))
    assert isinstance(sent.error, h2conn.ConnectionEndedError) and "reset" in str(sent.error)
    assert isinstance(waiting.error, wire.Unprocessed) and not waiting.sent


def test_the_protocol_choice_follows_the_http2_setting() -> None:
    """http2=None probes in cleartext and offers both by ALPN; True requires h2 (ALPN choosing http/1.1 raises);
    False never offers it."""
    default, required, never = ProtocolChoice(None), ProtocolChoice(True), ProtocolChoice(False)
    assert default.probing and default.alpn == ["h2", "http/1.1"]
    default.heard(False)
    assert not default.probing and default.spoken == "h1"
    assert required.spoken == "h2" and required.alpn == ["h2"]
    with pytest.raises(NotHttp2Error, match="ALPN chose http/1.1"):
        required.chosen_by_alpn("http/1.1")
    assert never.spoken == "h1" and never.alpn == ["http/1.1"] and never.chosen_by_alpn(None) == "h1"
    assert ProtocolChoice(None).chosen_by_alpn("h2") == "h2"


def test_a_split_batch_is_planned_as_runs_and_joined_as_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """wire.plan splits an addMany past BATCH_BYTES into requests whose items run on in order, and its join puts
    each failure at its index in the whole batch; a host door of one brain names the brain first."""
    monkeypatch.setattr(wire, "BATCH_BYTES", 1_000)
    items = [{"type": "document", "data": "x" * 300} for _ in range(9)]
    plan = wire.plan(D.BY_NAME["addMany"], "notes", (), {"items": items}, True)
    assert len(plan.requests) > 2 and sum(plan.offsets[1:2]) > 0
    answers = [
        {"ids": [f"{at + i}" for i in range(n)], "failed": [{"index": 0}], "generation": k}
        for k, (at, n) in enumerate(
            zip(plan.offsets, [b - a for a, b in zip(plan.offsets, [*plan.offsets[1:], 9], strict=True)], strict=True)
        )
    ]
    joined = plan.join(answers)
    assert joined["ids"] == [str(i) for i in range(9)]
    assert [f["index"] for f in joined["failed"]] == plan.offsets
    host = wire.plan(D.BY_NAME["host.provision"], None, ("scratch",), {}, True)
    assert host.requests[0].target.startswith("/v1/brains/scratch") or "scratch" in host.requests[0].target


def test_a_call_goes_again_only_when_sending_it_twice_is_harmless() -> None:
    """wire.again: a read, a request that never left, or one the server says it did not act on goes again while
    retries last; a write that was sent does not; a timeout never does, nor a server's not speaking HTTP/2."""
    read = GET
    write = wire.Request("add", "POST", "/v1/brains/notes/add", b"{}", wire.JSON, False)
    reset = ConnectionResetError("reset")
    assert wire.again(read, reset, True, 0, 3) and not wire.again(read, reset, True, 3, 3)
    assert not wire.again(write, reset, True, 0, 3)
    assert wire.again(write, reset, False, 0, 3)
    assert wire.again(write, wire.Unprocessed("GOAWAY"), True, 0, 3)
    assert not wire.again(read, TimeoutError(), False, 0, 3)
    assert not wire.again(read, NotHttp2Error(b"HTTP/1.1 400"), False, 0, 3)


def test_bytes_that_arrive_one_at_a_time_make_the_same_answers() -> None:
    """The server's bytes fed one at a time — a frame header split anywhere, a GOAWAY split too — make the same
    answers as fed whole: frames are followed across reads."""
    session, peer = opened()
    calls = [session.send(GET, wire.h2_fields(GET, None, wire.JSON)) for _ in range(3)]
    peer.receive(session.data_to_send())
    peer.answer(1, b'{"n": 1}')
    peer.answer(3, b'{"n": 3}' * 5000)
    goaway = hyperframe.frame.GoAwayFrame(0)
    goaway.last_stream_id, goaway.error_code = 3, 0
    data = peer.conn.data_to_send() + goaway.serialize()
    for i in range(len(data)):
        session.receive_data(data[i : i + 1])
    assert wire.answer(calls[0].response) == {"n": 1} and calls[1].response.body == b'{"n": 3}' * 5000
    assert isinstance(calls[2].error, wire.Unprocessed) and not session.accepting


def test_a_goaway_with_an_error_ends_the_connection() -> None:
    """GOAWAY with an error code (here PROTOCOL_ERROR) fails even the streams below its last id: nothing more
    comes on the connection (RFC 9113 5.4.1)."""
    session, peer = opened()
    call = session.send(GET, wire.h2_fields(GET, None, wire.JSON))
    pump(session, peer)
    goaway = hyperframe.frame.GoAwayFrame(0)
    goaway.last_stream_id, goaway.error_code = 1, 1
    session.receive_data(goaway.serialize())
    assert isinstance(call.error, h2conn.ConnectionEndedError) and "PROTOCOL_ERROR" in str(call.error)
    assert session.ended


def test_an_http1_answer_fails_the_calls_already_sent_as_not_http2() -> None:
    """With HTTP/2 required, calls go with the preface before the server's first bytes; an HTTP/1.1 answer then
    fails them with NotHttp2Error itself (not to be sent again: wire.again), once the glue reports it."""
    session = H2Session("example.test", "http")
    call = session.send(GET, wire.h2_fields(GET, None, wire.JSON))
    session.data_to_send()
    with pytest.raises(NotHttp2Error) as refused:
        session.receive_data(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n")
    events = session.connection_lost(refused.value)
    assert [e.exchange for e in events] == [call] and call.error is refused.value
    assert not wire.again(GET, refused.value, call.sent, 0, 3)
