"""The object store client's connection against a store that keeps connections alive, as S3 does (moto's server,
which the shipping tests use, closes every connection after one answer, so they never reuse one): a real HTTP/1.1
server on loopback (the standard library's, ``protocol_version`` 1.1) holding objects in a dict, counting the
connections it accepts, and able to close a kept one while it is idle, as a store does to connections left idle.

The client's law (brainy/fleet/objectstore.py): one kept-alive connection per calling thread, reused from call to
call; a kept connection the store closed is tried again on a new one, the call answered as if nothing happened;
``reading`` streams a 200's body (chunked too) and answers None for a 404 and the store's error code otherwise.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from brainy.fleet.objectstore import Credentials, Location, ObjectExistsError, ObjectStore, ObjectStoreError

BUCKET = "wire-bucket"


class _Store(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.objects: dict[str, bytes] = {}
        self.accepted = 0
        self.close_next = False  # close the connection after the next answer without saying so (an idle close)
        self.chunked: set[str] = set()  # objects answered with Transfer-Encoding: chunked

    def process_request(self, request, client_address) -> None:
        self.accepted += 1
        super().process_request(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Store

    def log_message(self, *args) -> None:
        """Quiet: the tests read the store's dict, not its log."""

    def _answer(self, status: int, body: bytes = b"", chunked: bool = False) -> None:
        self.send_response(status)
        if chunked:
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for at in range(0, len(body), 1000):
                piece = body[at : at + 1000]
                self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            self.wfile.write(b"0\r\n\r\n")
        else:
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        if self.server.close_next:
            self.server.close_next = False
            self.close_connection = True  # no Connection: close said: the client finds out on its next call

    def _key(self) -> str:
        assert self.headers["authorization"].startswith("AWS4-HMAC-SHA256 Credential=wire/")
        return self.path.split("?", 1)[0]

    def do_PUT(self) -> None:
        key = self._key()
        body = self.rfile.read(int(self.headers.get("content-length") or 0))
        if key == f"/{BUCKET}":
            self._answer(200)
        elif self.headers.get("if-none-match") == "*" and key in self.server.objects:
            self._answer(412, b"<Error><Code>PreconditionFailed</Code></Error>")
        else:
            self.server.objects[key] = body
            self._answer(200)

    def do_GET(self) -> None:
        key = self._key()
        if key.endswith("/denied"):
            self._answer(403, b"<Error><Code>AccessDenied</Code></Error>")
        elif key in self.server.objects:
            self._answer(200, self.server.objects[key], chunked=key in self.server.chunked)
        else:
            self._answer(404, b"<Error><Code>NoSuchKey</Code></Error>")


@pytest.fixture
def served() -> Iterator[tuple[_Store, ObjectStore]]:
    server = _Store()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    host, port = server.server_address[:2]
    store = ObjectStore(
        Location.parse(f"s3://{BUCKET}"), Credentials(f"http://{host}:{port}", "us-east-1", "wire", "s")
    )
    try:
        yield server, store
    finally:
        store.close()
        server.shutdown()
        server.server_close()


def test_calls_reuse_one_kept_connection(served):
    """Puts and gets one after another on one thread go over the connection the first made."""
    server, store = served
    store.create_bucket()
    for i in range(5):
        store.put_new(f"o{i}", b"x" * i)
    assert [store.get(f"o{i}") for i in range(5)] == [b"x" * i for i in range(5)]
    assert store.get("absent") is None
    with pytest.raises(ObjectExistsError):
        store.put_new("o1", b"again")
    assert server.accepted == 1


def test_a_kept_connection_the_store_closed_is_tried_again_on_a_new_one(served):
    """The store closes the kept connection after an answer (as one left idle is closed): the next call, sent on it,
    finds it closed, is sent again on a new connection and answers as usual."""
    server, store = served
    store.put_new("a", b"1")
    server.close_next = True
    assert store.get("a") == b"1"  # answered; the store closes the connection behind it
    store.put_new("b", b"2")  # sent on the closed one first
    assert store.get("b") == b"2"
    assert server.accepted == 2


def test_reading_streams_a_body_and_names_what_is_not_there(served):
    """``reading`` hands a 200's body out in pieces of at most n bytes (a chunked one too), answers None for a
    404, and refuses with the store's error code otherwise."""
    server, store = served
    data = bytes(range(256)) * 40
    store.put_new("big", data)
    server.chunked.add(f"/{BUCKET}/big")
    with store.reading("big") as read:
        assert read is not None
        got, pieces = b"", []
        while piece := read(777):
            assert len(piece) <= 777
            pieces.append(piece)
            got += piece
    assert got == data and len(pieces) > 1
    with store.reading("absent") as read:
        assert read is None
    with pytest.raises(ObjectStoreError, match="403 AccessDenied"), store.reading("denied"):
        pass
