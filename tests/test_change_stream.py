"""The held change stream, served for real and read by a raw-socket SSE reader (DOORS.md 10.2, 1.4; seed 001
"The change feed"; issue 15).
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import textwrap
import time
import urllib.request

import pytest

pytestmark = pytest.mark.slow


def _call(server, door: str, body: dict, key: str | None = None) -> dict:
    request = urllib.request.Request(
        server.url + server.path(door),
        data=json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {key or server.key}", "content-type": "application/json"},
    )
    return json.loads(urllib.request.urlopen(request, timeout=30).read())


class SseReader:
    """A raw-socket reader of one event stream: the head, then events ({id?, event, data} or a heartbeat)."""

    def __init__(self, server, query: str = "", headers: str = "") -> None:
        self.sock = socket.create_connection(server.address, timeout=10)
        self.sock.sendall(
            (
                f"GET {server.path('changes')}{query} HTTP/1.1\r\nHost: t\r\n"
                f"Accept: text/event-stream\r\nAuthorization: Bearer {server.key}\r\n{headers}\r\n"
            ).encode()
        )
        self.buf = b""
        while b"\r\n\r\n" not in self.buf:
            self.buf += self.sock.recv(65536)
        head, _, self.buf = self.buf.partition(b"\r\n\r\n")
        self.status = int(head.split(b" ")[1])
        self.head = head.decode()
        self.text = ""
        if self.status == 200:
            self._dechunk()

    def _fill(self, timeout: float) -> bool:
        self.sock.settimeout(timeout)
        try:
            data = self.sock.recv(65536)
        except TimeoutError:
            return False
        if not data:
            raise EOFError
        self.buf += data
        self._dechunk()
        return True

    def _dechunk(self) -> None:
        while b"\r\n" in self.buf:  # de-chunk: size line, data, CRLF
            size_line, _, rest = self.buf.partition(b"\r\n")
            size = int(size_line, 16)
            if len(rest) < size + 2:
                break
            self.text += rest[:size].decode()
            self.buf = rest[size + 2 :]

    def events(self, n: int, timeout: float = 10.0) -> list[dict]:
        deadline = time.monotonic() + timeout
        while self.text.count("\n\n") < n:
            left = deadline - time.monotonic()
            assert left > 0, f"only {self.text.count(chr(10) * 2)} of {n} events came: {self.text!r}"
            self._fill(left)
        out = []
        for _ in range(n):
            block, _, self.text = self.text.partition("\n\n")
            event: dict = {}
            for line in block.split("\n"):
                key, _, value = line.partition(": ")
                event[key] = json.loads(value) if key == "data" else value
            out.append(event)
        return out

    def close(self) -> None:
        self.sock.close()


def test_frames_caught_up_then_held(server):
    """Frames id <generation>.<index>, event change, then caught-up with cursor, hasMore, brain, liveTail and
    meta.ms; then held: a write arrives as its frame, a 4-op transact as 4 frames under one generation."""
    a = _call(server, "add", {"type": "document", "data": "a", "metadata": {"tags": ["x"]}})
    reader = SseReader(server, "?since=0")
    try:
        assert reader.status == 200 and "text/event-stream" in reader.head
        change, caught = reader.events(2)
        assert (change["id"], change["event"], change["data"]["op"], change["data"]["id"]) == (
            "1.0",
            "change",
            "update",
            a["id"],
        )
        assert change["data"]["entity"]["metadata"] == {"tags": ["x"]}
        assert caught["event"] == "caught-up"
        assert {k: caught["data"][k] for k in ("cursor", "hasMore", "brain")} == {
            "cursor": 1,
            "hasMore": False,
            "brain": server.brain,
        }
        assert caught["data"]["liveTail"]["held"] is True and caught["data"]["liveTail"]["pollMs"] == 2000
        assert isinstance(caught["data"]["meta"]["ms"], float)
        ops = [{"door": "add", "args": {"type": "document", "data": f"t{i}"}} for i in range(4)]
        done = _call(server, "transact", {"ops": ops})
        frames = reader.events(4)
        assert [f["id"] for f in frames] == [f"{done['generation']}.{i}" for i in range(4)]
        assert {f["data"]["generation"] for f in frames} == {done["generation"]}
    finally:
        reader.close()


def test_resume_lands_on_a_commit_boundary(server):
    """Last-Event-ID wins over since; one naming a commit's last op resumes after it, one inside a commit
    resumes at its start (the whole commit again); since past the head is 400 BadQueryParameterError with
    the head; a limit that is not a positive integer refuses; a limit never cuts a commit."""
    _call(server, "add", {"type": "document", "data": "one"})
    ops = [{"door": "add", "args": {"type": "document", "data": f"t{i}"}} for i in range(3)]
    _call(server, "transact", {"ops": ops})  # generation 2: 2.0, 2.1, 2.2
    _call(server, "add", {"type": "document", "data": "three"})
    for headers, query, first in [
        ("Last-Event-ID: 2.2\r\n", "?since=0", "3.0"),
        ("Last-Event-ID: 2.1\r\n", "?since=3", "2.0"),
        ("", "?since=1", "2.0"),
    ]:
        reader = SseReader(server, query, headers)
        try:
            assert reader.events(1)[0]["id"] == first, (headers, query)
        finally:
            reader.close()
    reader = SseReader(server, "?since=0&limit=2")
    try:
        events = reader.events(5)
        assert [e.get("id") for e in events] == ["1.0", "2.0", "2.1", "2.2", None]
        assert events[-1]["data"]["hasMore"] is True and events[-1]["data"]["liveTail"]["held"] is False
    finally:
        reader.close()
    for query, param in [("?since=9", "since"), ("?limit=0", "limit"), ("?limit=x", "limit")]:
        reader = SseReader(server, query)
        try:
            assert reader.status == 400, query
            body = json.loads(reader.buf[reader.buf.index(b"{") :])
            assert body["error"]["name"] == "BadQueryParameterError" and body["error"]["param"] == param
            if param == "since":
                assert body["error"]["head"] == 3
        finally:
            reader.close()


def test_a_last_event_id_of_other_digits_is_refused_by_name(server):
    """A Last-Event-ID in Latin-1 bytes whose characters are digits to str.isdigit but not to int (the
    superscript two, 0xB2), or of more digits than int reads (5,000), is 400 BadQueryParameterError naming the
    header; each was a 500 until a fuzzer sent it. The keep-alive connection then answers a valid resume."""
    _call(server, "add", {"type": "document", "data": "one"})
    head = f"GET {server.path('changes')} HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer {server.key}\r\n".encode()
    with socket.create_connection(server.address, timeout=10) as sock:
        for value in (b"\xb2.0", b"1.\xb9", b"9" * 5000 + b".0"):
            sock.sendall(head + b"Accept: text/event-stream\r\nLast-Event-ID: " + value + b"\r\n\r\n")
            data = b""
            while b"\r\n\r\n" not in data:
                data += sock.recv(65536)
            status_line, _, rest = data.partition(b"\r\n")
            length = int(rest.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
            body = data.partition(b"\r\n\r\n")[2]
            while len(body) < length:
                body += sock.recv(65536)
            assert status_line.split()[1] == b"400", (value[:20], data[:300])
            error = json.loads(body)["error"]
            assert (error["name"], error["param"], error["head"]) == ("BadQueryParameterError", "Last-Event-ID", 1)
    reader = SseReader(server, "", "Last-Event-ID: 0.0\r\n")
    try:
        assert reader.status == 200 and reader.events(1)[0]["id"] == "1.0"
    finally:
        reader.close()


def test_the_stream_survives_the_brain_closing(server):
    """Closing the brain under a live stream (a new handle, a lost listener) does not lose the next write: the
    log's 2-second drain delivers it."""
    reader = SseReader(server, "?since=0")
    try:
        reader.events(1)  # caught-up
        _call(server, "close", {}, key=server.service_key)
        written = _call(server, "add", {"type": "document", "data": "after close"})
        frame = reader.events(1, timeout=8)[0]
        assert frame["data"]["id"] == written["id"]
    finally:
        reader.close()


WRITER = textwrap.dedent("""
    import sys
    from brainy.engine import Brain
    brain = Brain.open(sys.argv[1])
    assert brain.role == "writer", brain.role
    print("ready", flush=True)
    for line in sys.stdin:
        a = brain.add({"type": "document", "data": line.strip(), "metadata": {"tags": [line.strip()]}})
        b = brain.add({"type": "document", "data": "other"})
        brain.relate({"from": a["id"], "to": b["id"], "type": "relatedTo"})
        print(a["id"], flush=True)
    brain.close()
""")


def test_a_reader_holds_its_stream_from_the_writers_log(server):
    """A brain this server only attaches (another process is its writer) holds its stream too, fed from the
    writer's log file on the tick, and says so in liveTail; a relation frame carries its endpoints' tags at
    commit time, though the attach never saw those entities."""
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(server.store)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert writer.stdout.readline().strip() == "ready"
        reader = SseReader(server, "?since=0")
        try:
            caught = reader.events(1)[0]
            assert caught["data"]["liveTail"]["held"] is True
            assert caught["data"]["liveTail"]["source"] == "log-file"
            writer.stdin.write("tag:a\n")
            writer.stdin.flush()
            added = writer.stdout.readline().strip()
            frames = reader.events(3, timeout=8)
            assert [f["data"]["kind"] for f in frames] == ["entity", "entity", "relation"]
            assert frames[0]["data"]["id"] == added
            assert frames[2]["data"]["relation"]["fromTags"] == ["tag:a"]
        finally:
            reader.close()
    finally:
        writer.stdin.close()
        writer.wait(timeout=20)
        writer.stdout.close()


def test_the_same_stream_over_h2(server):
    """Over HTTP/2 the stream is one h2 stream carrying the same events: the catch-up, caught-up, then a
    write's frame while held; resetting the stream ends it, and the connection answers the next request."""
    from server import H2Client

    _call(server, "add", {"type": "document", "data": "a"})
    with H2Client(server.address) as client:
        auth = (("authorization", f"Bearer {server.key}"),)
        stream = client.start(
            "GET", server.path("changes") + "?since=0", None, (("accept", "text/event-stream"), *auth)
        )

        def events_so_far() -> list[str]:
            return [b for b in bytes(client.bodies.get(stream, b"")).decode().split("\n\n") if b]

        deadline = time.monotonic() + 10
        while len(events_so_far()) < 2:
            assert time.monotonic() < deadline, events_so_far()
            client.pump_once(1)
        assert client.heads[stream][0] == 200
        first, caught = events_so_far()
        assert first.startswith("id: 1.0\nevent: change\n") and caught.startswith("event: caught-up\n")
        written = _call(server, "add", {"type": "document", "data": "b"})
        while len(events_so_far()) < 3:
            assert time.monotonic() < deadline, events_so_far()
            client.pump_once(1)
        assert written["id"] in events_so_far()[2] and stream not in client.ended
        client.conn.reset_stream(stream)
        client.flush()
        answer = client.call("GET", server.path("counts"), None, auth)
        assert answer.status == 200
