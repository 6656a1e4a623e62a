"""A request stream the client stops (STOP_SENDING, RFC 9114 4.1.1; RFC 9000 3.5) is never answered, and no
answer is written to it: the sans-IO :class:`~brainy.net.h3.H3Connection` over aioquic's own QUIC connections,
client and server, talking in memory (datagrams handed across, the clock a number; STYLE 13).

The fuzzer's case: HEADERS with FIN and STOP_SENDING in one packet. aioquic resets the stream's sending part
while it reads the datagram, before the request's event is handed out, and a write to it then raises; the
answer to that request once went out into aioquic and raised out of the event loop's datagram callback.
"""

from __future__ import annotations

from pathlib import Path

from aioquic.h3.connection import H3Connection as ClientH3
from test_quic_shim import ADDR, _connecting, _pump

from brainy.net.h2 import H2Event, RequestReceived, StreamReset
from brainy.net.h3 import H3Connection
from brainy.net.http import Response

REQUEST = [(b":method", b"GET"), (b":scheme", b"https"), (b":authority", b"localhost"), (b":path", b"/v1/health")]
ANSWER = Response(200, [(b"content-type", b"application/json")], b"{}")


class Pair:
    """A client (aioquic's HTTP/3) and a server (brainy's H3Connection over aioquic's QUIC), connected."""

    def __init__(self, directory: Path) -> None:
        self.client, self.server = _connecting(directory)
        self.client_h3 = ClientH3(self.client)
        self.h3 = H3Connection(self.server)
        self.now = _pump(self.client, self.server, 0.0)

    def move(self) -> list[H2Event]:
        """Hand datagrams across both ways until quiet, the clock moving on (for the pacer). As the glue does,
        the QUIC events of each datagram the server reads go to the H3Connection before the next datagram is
        read; the request events it answers, all told."""
        out: list[H2Event] = []
        for _ in range(50):
            self.now += 0.01
            moved = 0
            for data, _ in self.client.datagrams_to_send(self.now):
                self.server.receive_datagram(data, ADDR, self.now)
                while (event := self.server.next_event()) is not None:
                    out += self.h3.quic_event_received(event)
                moved += 1
            for data, _ in self.server.datagrams_to_send(self.now):
                self.client.receive_datagram(data, ADDR, self.now)
                moved += 1
            if not moved:
                return out
        raise AssertionError("the in-memory connection never went quiet")


def test_a_request_stopped_in_the_packet_that_carries_it_is_not_run(tmp_path: Path) -> None:
    """Law: HEADERS with FIN and STOP_SENDING for the same stream in one packet hand out no request (none can be
    answered); a request on another stream of the connection is handed out and answered as ever."""
    pair = Pair(tmp_path)
    pair.move()
    stopped = pair.client.get_next_available_stream_id()
    pair.client_h3.send_headers(stopped, REQUEST, end_stream=True)
    pair.client.stop_stream(stopped, 0x10C)  # H3_REQUEST_CANCELLED
    events = pair.move()
    assert not [e for e in events if isinstance(e, RequestReceived)], events
    pair.h3.send_response(stopped, ANSWER)  # a late answer (there is none to give): takes nothing, raises nothing
    other = pair.client.get_next_available_stream_id()
    pair.client_h3.send_headers(other, REQUEST, end_stream=True)
    events = pair.move()
    assert [(type(e), e.stream_id) for e in events] == [(RequestReceived, other)]
    pair.h3.send_response(other, ANSWER)
    assert pair.server.datagrams_to_send(pair.now + 0.05)


def test_a_request_stopped_after_it_was_handed_out_is_let_go(tmp_path: Path) -> None:
    """Law: a STOP_SENDING for a request already handed out (its answer still being made, a write's fsync) is a
    StreamReset for the glue to let the answer go; the answer, if it still comes, is not written."""
    pair = Pair(tmp_path)
    pair.move()
    sid = pair.client.get_next_available_stream_id()
    pair.client_h3.send_headers(sid, REQUEST, end_stream=True)
    assert [type(e) for e in pair.move()] == [RequestReceived]
    pair.client.stop_stream(sid, 0x10C)
    assert [(type(e), e.stream_id) for e in pair.move()] == [(StreamReset, sid)]
    pair.h3.send_response(sid, ANSWER)  # takes nothing, raises nothing
    assert not pair.h3.busy
