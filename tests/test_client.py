"""brainy.client against a real ``brainy serve`` on loopback: the door surface joined to the contract both ways,
one test body passing against the embedded ``Brain`` and a remote one, refusals as brainy.errors' classes with
their fields, batches split by bytes, the held change feed resuming across a cut connection with no frame lost
or handed out twice, the version check, timeouts and transport failures — each over HTTP/1.1 and HTTP/2 (the
``http2`` fixture). Then the protocol itself, seen on the wire through a relay: HTTP/2 by default where the
server speaks it, every call of a client on one connection, concurrent async calls as its streams, large bodies
through its flow control, HTTP/1.1 where the server speaks nothing else, ALPN over TLS. The HTTP/2 streams alone,
against an in-memory server, are tests/test_client_h2conn.py."""

from __future__ import annotations

import asyncio
import functools
import json
import random
import socket
import ssl
import threading
import warnings
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from server import ServerProcess, free_port, start_server
from test_serve_h3 import make_pki

from brainy import errors
from brainy.client import AsyncClient, Client, h2conn, surface, wire
from brainy.contract import doors as D
from brainy.engine import Brain, init_store

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"  # RFC 9113 3.4: a prior-knowledge client's first bytes
SETTINGS = 0x4  # the type of the frame a server that speaks HTTP/2 sends first


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with start_server(tmp_path_factory.mktemp("client") / "served") as server:
        yield server


@pytest.fixture(params=[False, True], ids=["h1", "h2"])
def http2(request: pytest.FixtureRequest) -> bool:
    """The protocol a test's clients speak: each test so marked runs over HTTP/1.1 and over HTTP/2."""
    return bool(request.param)


def url(server: ServerProcess) -> str:
    return f"http://{server.address[0]}:{server.address[1]}"


def test_the_surface_is_the_contract_both_ways() -> None:
    """Every door of a brain is a method of both handles and builds the request the contract states; the client
    names no door the contract does not have."""
    for door in D.DOORS:
        if door.layer == "host" or "." in door.name:
            continue
        assert door.name in surface.BRAIN_DOORS
        positional = tuple(f"p-{p.name}" for p in door.path_params if p.name != "brain")
        request = wire.request(door, "notes", positional, {}, True)
        assert request.method == door.method
        path = request.target.split("?")[0]
        want = door.path.replace("{brain}", "notes")
        for p in door.path_params:
            want = want.replace("{" + p.name + "}", f"p-{p.name}")
        assert path == want, door.name
        assert request.safe == (door.kind == "read")
    assert surface.BRAIN_DOORS <= set(D.BY_NAME)
    client = Client("http://127.0.0.1:9")
    with pytest.raises(AttributeError):
        _ = client.brain("notes").notADoor


def exercise(b: Any, n: str = "n") -> list[Any]:
    """One body for the embedded Brain and a remote one: what it answers, less what differs by nature (ids,
    times). ``n`` names the metadata field its rows count by, so runs on one brain do not count each other's."""
    seen: list[Any] = []
    added = b.add({"type": "document", "data": "the first note", "metadata": {n: 1}, "vector": [0.5] * 384})
    seen.append(sorted(added))
    got = b.get(added["id"], includeVector=True)["entity"]
    seen.append((got["data"], got["metadata"], [round(x, 6) for x in got["vector"][:3]]))
    b.update({"id": added["id"], "metadata": {n: 2}})
    seen.append(b.get(added["id"])["entity"]["metadata"])
    many = b.addMany({"items": [{"type": "document", "data": f"note {i}", "metadata": {n: i}} for i in range(5)]})
    seen.append((len(many["ids"]), many["failed"]))
    seen.append(b.find({"where": {n: {"gte": 2}}, "limit": 10})["results"].__len__())
    seen.append(
        b.asOf({"generation": added["generation"], "read": {"door": "get", "id": added["id"]}})["result"]["entity"][
            "metadata"
        ]
    )
    try:
        b.update({"id": "nobody", "metadata": {}})
    except errors.EntityNotFoundError as refused:
        seen.append((refused.name, refused.status, refused.id))
    try:
        b.find({"limit": 0})
    except errors.InvalidArgumentError as refused:
        seen.append((refused.name, refused.field))
    return seen


def test_one_body_passes_against_the_embedded_brain_and_a_remote_one(
    tmp_path: Path, served: ServerProcess, http2: bool
) -> None:
    store = tmp_path / "embedded"
    init_store(store)
    n = "n2" if http2 else "n1"
    with Brain.open(store) as brain:
        embedded = exercise(brain, n)
    with Client(url(served), served.key, http2=http2) as client:
        remote = exercise(client.brain(served.brain), n)
        assert client.http_version == ("h2" if http2 else "h1")
    assert remote == embedded
    assert ("EntityNotFoundError", 404, "nobody") in remote


def test_the_async_client_answers_as_the_blocking_one(served: ServerProcess, http2: bool) -> None:
    async def go() -> tuple[Any, Any]:
        async with AsyncClient(url(served), served.key, http2=http2) as client:
            b = client.brain(served.brain)
            added = await b.add({"type": "document", "data": "async note"})
            got = await b.get(added["id"])
            with pytest.raises(errors.EntityNotFoundError) as refused:
                await b.call("update", {"id": "nobody", "metadata": {}})
            return got["entity"]["data"], refused.value.fields

    assert asyncio.run(go()) == ("async note", {"id": "nobody"})


def test_a_batch_past_its_bytes_goes_as_several_requests_and_answers_as_one(
    served: ServerProcess, monkeypatch: pytest.MonkeyPatch, http2: bool
) -> None:
    monkeypatch.setattr(wire, "BATCH_BYTES", 2_000)
    items = [{"type": "document", "data": f"batch row {i} " + "x" * 200} for i in range(40)]
    assert len(wire.split("addMany", {"items": items}, True)) > 3
    with Client(url(served), served.key, http2=http2) as client:
        answer = client.brain(served.brain).addMany({"items": items})
        assert len(answer["ids"]) == 40 and len(set(answer["generations"])) > 3
        got = client.brain(served.brain).batchGet({"ids": answer["ids"]})
        assert [e["data"] for e in got["entities"]] == [i["data"] for i in items]


class Cutter:
    """A loopback TCP relay to the server whose connections the test cuts at will, and which shows what it
    carried: how many connections, and the first bytes each way of each (``asked``: the client's; ``answered``:
    the server's)."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.open: list[socket.socket] = []
        self.asked: list[bytes] = []
        self.answered: list[bytes] = []
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _accept(self) -> None:
        while True:
            try:
                inner, _ = self.listener.accept()
            except OSError:
                return
            outer = socket.create_connection(self.target)
            self.open += [inner, outer]
            self.asked.append(b"")
            self.answered.append(b"")
            at = len(self.asked) - 1
            for a, b, seen in ((inner, outer, self.asked), (outer, inner, self.answered)):
                threading.Thread(target=self._pipe, args=(a, b, seen, at), daemon=True).start()

    @staticmethod
    def _pipe(a: socket.socket, b: socket.socket, seen: list[bytes], at: int) -> None:
        try:
            while data := a.recv(65536):
                if len(seen[at]) < 64:
                    seen[at] += data[: 64 - len(seen[at])]
                b.sendall(data)
        except OSError:
            pass
        finally:
            for s in (a, b):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
            a.close()  # each socket is read by one pipe: that pipe closes it

    def cut(self) -> None:
        for s in self.open:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self.open.clear()

    def close(self) -> None:
        self.cut()
        self.listener.close()


def test_the_change_feed_resumes_across_a_cut_connection_with_no_frame_lost_or_repeated(
    served: ServerProcess, http2: bool
) -> None:
    """The feed is cut twice; the commits of the second batch are written only after the first cut, so they can
    reach the client only over a connection the feed opened again (the relay sees the feed ask more than once),
    and the frames read equal the store's frames since ``since``: none lost, none repeated."""
    sizes = [2 + i % 2 for i in range(6)]  # commits of two and three ops: a cut may land inside one
    with Client(url(served), served.key) as writer:
        b = writer.brain(served.brain)
        start = b.now()["generation"]

        def batch(tag: str) -> None:
            for i, size in enumerate(sizes):
                b.addMany({"items": [{"type": "document", "data": f"feed {tag} {i} {j}"} for j in range(size)]})

        batch("before")
        cutter = Cutter(served.address)
        with Client(cutter.url, served.key, http2=http2) as client:
            got = []
            feed = client.brain(served.brain).changes(since=start)
            for frame in feed:
                got.append((frame["generation"], frame["index"]))
                if len(got) in (3, 8):
                    cutter.cut()
                if len(got) == 3:
                    batch("after")
                if len(got) == 2 * sum(sizes):
                    break
            feed.close()
        cutter.close()
        want = [(f["generation"], f["index"]) for f in b.changes(page={"since": start, "limit": 1000})["frames"]]
    assert got == want and len(want) == 2 * sum(sizes)
    feeds = [first for first in cutter.asked if b"/changes" in first or first.startswith(PREFACE)]
    assert len(cutter.asked) >= 3  # the calls' connection, the feed's, and the feed's again after a cut
    assert all(first.startswith(PREFACE) == http2 for first in feeds)  # and spoke the client's protocol each time


def test_the_first_call_warns_once_when_the_server_speaks_another_contract(
    served: ServerProcess, monkeypatch: pytest.MonkeyPatch, http2: bool
) -> None:
    monkeypatch.setattr(surface, "CONTRACT_VERSION", "0.0.1")
    with Client(url(served), served.key, http2=http2) as client, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        client.brain(served.brain).now()
        client.brain(served.brain).now()
    skew = [w for w in caught if "contract 0.0.1" in str(w.message)]
    assert len(skew) == 1 and D.CONTRACT.contract_version in str(skew[0].message)


def test_a_door_the_server_lacks_refuses_by_name_and_transport_failures_are_one_class(
    served: ServerProcess, http2: bool
) -> None:
    with Client(url(served), served.key, http2=http2) as client:
        with pytest.raises(errors.UnknownDoorError):
            client.call("no.suchDoor")
    idle = socket.create_server(("127.0.0.1", 0))  # accepts, never answers
    try:
        with Client(f"http://127.0.0.1:{idle.getsockname()[1]}", "k", timeout=0.5, http2=http2) as client:
            with pytest.raises(errors.TransportError) as failed:
                client.health()
            assert isinstance(failed.value.cause, TimeoutError)

        async def idle_async() -> None:
            async with AsyncClient(f"http://127.0.0.1:{idle.getsockname()[1]}", "k", timeout=0.5) as aclient:
                with pytest.raises(errors.TransportError) as failed:
                    await aclient.health()
                assert isinstance(failed.value.cause, TimeoutError)

        asyncio.run(idle_async())
    finally:
        idle.close()
    with socket.create_server(("127.0.0.1", 0)) as gone:
        port = gone.getsockname()[1]
    with Client(f"http://127.0.0.1:{port}", "k", retries=1, http2=http2) as client:
        with pytest.raises(errors.TransportError) as refused:
            client.health()
        assert isinstance(refused.value.cause, ConnectionRefusedError)


def test_the_default_speaks_http2_to_brainy_and_every_thread_shares_one_connection(served: ServerProcess) -> None:
    """With no ``http2`` given, a client of ``brainy serve`` opens with the HTTP/2 preface and is answered with
    SETTINGS; 400 calls from 8 threads at once then travel as the streams of that one connection (the relay saw
    one), every answer the right one."""
    cutter = Cutter(served.address)
    with Client(cutter.url, served.key) as client:
        b = client.brain(served.brain)
        added = [b.add({"type": "document", "data": f"thread note {i}"})["id"] for i in range(8)]

        def read(i: int) -> str:
            return str(b.get(added[i % 8])["entity"]["data"])

        with ThreadPoolExecutor(8) as pool:
            got = list(pool.map(read, range(400)))
        assert got == [f"thread note {i % 8}" for i in range(400)]
        assert client.http_version == "h2"
    cutter.close()
    assert len(cutter.asked) == 1 and cutter.asked[0].startswith(PREFACE)
    assert cutter.answered[0][3] == SETTINGS


def test_concurrent_async_calls_are_the_streams_of_one_http2_connection(served: ServerProcess) -> None:
    """300 calls awaited at once by one AsyncClient — reads and writes — go as the streams of one connection (the
    relay saw one, opened with the preface), and each call gets its own answer."""
    cutter = Cutter(served.address)

    async def go() -> list[Any]:
        async with AsyncClient(cutter.url, served.key) as client:
            b = client.brain(served.brain)
            added = await asyncio.gather(*(b.add({"type": "document", "data": f"async {i}"}) for i in range(100)))
            got = await asyncio.gather(*(b.get(a["id"]) for a in added for _ in range(2)))
            assert client.http_version == "h2"
            return [g["entity"]["data"] for g in got]

    assert asyncio.run(go()) == [f"async {i}" for i in range(100) for _ in range(2)]
    cutter.close()
    assert len(cutter.asked) == 1 and cutter.asked[0].startswith(PREFACE)


def test_large_bodies_cross_http2_flow_control_both_ways(
    served: ServerProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An addMany of 2,000 rows with vectors (5 MB of MessagePack: five times the server's stream window) goes out
    as the server's windows open; a thousand of them with their vectors as JSON (over 4 MB) come back through our windows shrunk to
    256 KB, acknowledged as it is read. HTTP/2 answers exactly what HTTP/1.1 does."""
    monkeypatch.setattr(h2conn, "STREAM_WINDOW", 256 << 10)
    monkeypatch.setattr(h2conn, "CONNECTION_WINDOW", 512 << 10)
    rng = random.Random(34)
    items = [
        {"type": "document", "data": f"large {i} " + "y" * 1000, "vector": [rng.uniform(-1, 1) for _ in range(384)]}
        for i in range(2000)
    ]
    assert len(wire.encode({"items": items}, True)[0]) > 5_000_000
    with (
        Client(url(served), served.key, http2=True, timeout=120) as h2,
        Client(url(served), served.key, http2=False, json=True, timeout=120) as h1,
    ):
        added = h2.brain(served.brain).addMany({"items": items})
        assert len(added["ids"]) == 2000 and added["failed"] == []
        page = {"ids": added["ids"][:1000], "includeVector": True}  # batchGet's most
        over_h1 = h1.brain(served.brain).batchGet(page)
        h2_json = Client(url(served), served.key, http2=True, json=True, timeout=120)
        over_h2 = h2_json.brain(served.brain).batchGet(page)
        h2_json.close()
    assert len(json.dumps(over_h2)) > 4_000_000
    assert over_h2 == over_h1
    assert [e["data"] for e in over_h2["entities"]] == [i["data"] for i in items[:1000]]


def test_a_refusal_and_a_timeout_over_http2_are_what_they_are_over_http1(served: ServerProcess, http2: bool) -> None:
    """A refusal raises its class with its fields; a call whose timeout passes raises TransportError with a
    TimeoutError cause and is not sent again; the client's next call is answered (over HTTP/2, on the same
    connection: only the late call's stream was reset)."""
    cutter = Cutter(served.address)
    with Client(cutter.url, served.key, http2=http2) as client:
        b = client.brain(served.brain)
        with pytest.raises(errors.EntityNotFoundError) as refused:
            b.update({"id": "nobody", "metadata": {}})
        assert refused.value.status == 404 and refused.value.id == "nobody"
        with pytest.raises(errors.TransportError) as late:
            b.find({"query": "anything at all", "limit": 50}, timeout=0.000_01)
        assert isinstance(late.value.cause, TimeoutError) and "timed out" in str(late.value)
        assert b.now()["generation"] >= 0
    cutter.close()
    assert len(cutter.asked) == (1 if http2 else 2)  # HTTP/1.1 closes a connection whose answer it gave up on


def test_a_server_that_speaks_only_http1_is_spoken_to_in_http1_by_default(tmp_path: Path) -> None:
    """By default a client learns, on its first connection, that a server does not speak HTTP/2 — brainy's
    HTTP/1.1-only listener answers the preface 400, a plain HTTP/1.1 server 505 — and speaks HTTP/1.1 to it from
    then on: calls and the change feed (blocking and async) work. An HTTP/2-only listener is spoken to in HTTP/2, feed included.
    ``http2=True`` against the HTTP/1.1-only listener is a TransportError saying the server does not speak it."""
    h1_port, h2_port = free_port(), free_port()
    listens = ("--listen", f"127.0.0.1:{h1_port},h1", "--listen", f"127.0.0.1:{h2_port},h2")
    with start_server(tmp_path / "listeners", extra_args=listens) as server:
        for port, spoken in ((h1_port, "h1"), (h2_port, "h2")):
            with Client(f"http://127.0.0.1:{port}", server.key) as client:
                b = client.brain(server.brain)
                start = b.now()["generation"]
                added = b.add({"type": "document", "data": f"over {spoken}"})
                feed = b.changes(since=start)
                assert any(frame["id"] == added["id"] for frame in feed)
                feed.close()
                assert client.http_version == spoken

            async def follow(port: int = port) -> tuple[str | None, bool]:
                async with AsyncClient(f"http://127.0.0.1:{port}", server.key) as aclient:
                    ab = aclient.brain(server.brain)
                    start = (await ab.now())["generation"]
                    added = await ab.add({"type": "document", "data": "followed"})
                    feed = ab.changes(since=start)
                    seen = False
                    async for frame in feed:
                        if frame["id"] == added["id"]:
                            seen = True
                            break
                    await feed.aclose()
                    return aclient.http_version, seen

            assert asyncio.run(follow()) == (spoken, True)
        with Client(f"http://127.0.0.1:{h1_port}", server.key, http2=True) as strict:
            with pytest.raises(errors.TransportError) as refused:
                strict.health()
            assert isinstance(refused.value.cause, h2conn.NotHttp2Error) and "HTTP/1.1 400" in str(refused.value)
    # a plain HTTP/1.1 server (the standard library's file server, as an old server or a proxy would be): it answers
    # the preface 505 Invalid HTTP version, then serves /v1/health from a folder (as text: it names no JSON type)
    (tmp_path / "plain" / "v1").mkdir(parents=True)
    (tmp_path / "plain" / "v1" / "health").write_text('{"status": "ok"}')
    handler = functools.partial(SimpleHTTPRequestHandler, directory=str(tmp_path / "plain"))
    plain = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=plain.serve_forever, daemon=True).start()
    try:
        with Client(f"http://127.0.0.1:{plain.server_address[1]}", "k") as client:
            assert client.health() == '{"status": "ok"}'
            assert client.http_version == "h1"
    finally:
        plain.shutdown()
        plain.server_close()


class TlsEdge:
    """A TLS edge in front of the server, as a host terminates TLS for brainy (brainy/net/tls.py: h1 and h2 are
    cleartext here): it offers ``alpn``, records what each handshake chose, and relays the bytes to the server's
    port, which tells HTTP/2 from HTTP/1.1 by the preface. Its own event loop runs in a thread."""

    def __init__(self, target: tuple[str, int], cert: Path, key: Path, alpn: list[str]) -> None:
        self.target = target
        self.chosen: list[str | None] = []
        self.writers: list[asyncio.StreamWriter] = []
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert, key)
        context.set_alpn_protocols(alpn)
        self.loop = asyncio.new_event_loop()
        self.server = self.loop.run_until_complete(asyncio.start_server(self._relay, "127.0.0.1", 0, ssl=context))
        self.port = self.server.sockets[0].getsockname()[1]
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.chosen.append(writer.get_extra_info("ssl_object").selected_alpn_protocol())
        up_reader, up_writer = await asyncio.open_connection(*self.target)
        self.writers += [writer, up_writer]

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            try:
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            except (OSError, ssl.SSLError):
                pass
            finally:
                dst.close()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    async def _shut(self) -> None:
        self.server.close()
        for writer in self.writers:
            writer.close()
        for writer in self.writers:
            try:
                await writer.wait_closed()
            except (OSError, ssl.SSLError):
                pass
        await self.server.wait_closed()

    def close(self) -> None:
        asyncio.run_coroutine_threadsafe(self._shut(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


def test_over_tls_the_protocol_is_what_alpn_chose(served: ServerProcess, tmp_path: Path) -> None:
    """Against an ``https`` URL the client offers ALPN h2 and http/1.1 and speaks what the edge chose: h2 from an
    edge that offers it, http/1.1 from one that does not, http/1.1 when ``http2=False``; calls answer alike."""
    pki = make_pki(tmp_path / "pki")
    trust = ssl.create_default_context(cafile=str(pki.ca))
    for offered, http2, spoken in (
        (["h2", "http/1.1"], None, "h2"),
        (["http/1.1"], None, "h1"),
        (["h2", "http/1.1"], False, "h1"),
    ):
        edge = TlsEdge(served.address, pki.cert, pki.key, offered)
        try:
            for make in ("blocking", "async"):
                tls = ssl.create_default_context(cafile=str(pki.ca))
                target = f"https://127.0.0.1:{edge.port}"
                if make == "blocking":
                    with Client(target, served.key, http2=http2, tls=tls) as client:
                        assert client.brain(served.brain).now()["generation"] >= 0
                        assert client.http_version == spoken
                else:

                    async def go(target: str = target, tls: ssl.SSLContext = tls) -> str | None:
                        async with AsyncClient(target, served.key, http2=http2, tls=tls) as aclient:
                            await aclient.brain(served.brain).now()
                            return aclient.http_version

                    assert asyncio.run(go()) == spoken
            assert set(edge.chosen) == {"h2" if spoken == "h2" else "http/1.1"}
        finally:
            edge.close()
    with Client("https://127.0.0.1:9", served.key, tls=trust, retries=0) as nowhere:
        with pytest.raises(errors.TransportError):
            nowhere.health()


@pytest.mark.slow
def test_every_door_answers_or_refuses_by_name_through_the_client(tmp_path: Path) -> None:
    """Every door of the contract, called once with no arguments through the blocking and the async client (a
    brain's doors on a handle, the host's on the client, naming a brain of their own): a non-empty answer, or a
    refusal raised as its own class of brainy.errors — never a transport failure, never anything else; the two
    clients alike, door by door."""
    blocking, concurrent = _every_door(tmp_path / "b", "blocking"), _every_door(tmp_path / "a", "async")
    assert blocking == concurrent
    assert _every_door(tmp_path / "h1", "blocking", http2=False) == blocking  # the default spoke HTTP/2
    assert set(blocking) == {d.name for d in D.DOORS}
    assert sum(v == "answer" for v in blocking.values()) >= 25, blocking
    assert blocking["host.move"] == "InvalidArgumentError" and blocking["get"] == "answer"  # no node named


def _every_door(folder: Path, form: str, http2: bool | None = None) -> dict[str, str]:
    answered: dict[str, str] = {}
    with start_server(folder) as server:
        calls = []
        for door in D.DOORS:
            key = server.service_key if door.access == "service" else server.key
            ids = tuple("a" for p in door.path_params if p.name not in ("brain",))
            if door.layer == "host":
                brain = () if not any(p.name == "brain" for p in door.path_params) else ("scratch",)
                calls.append((door.name, key, None, brain + ids))
            else:
                calls.append((door.name, key, server.brain, ids))

        def record(name: str, outcome: Any) -> None:
            if isinstance(outcome, errors.Refusal):
                assert type(outcome) in errors.REGISTRY.values(), (name, outcome)
                answered[name] = outcome.name
            else:
                assert isinstance(outcome, dict) and outcome, (name, outcome)
                answered[name] = "answer"

        if form == "blocking":
            clients: dict[str, Client] = {}
            for name, key, brain, positional in calls:
                client = clients.setdefault(key, Client(url(server), key, http2=http2))
                try:
                    record(
                        name, client.brain(brain).call(name, *positional) if brain else client.call(name, *positional)
                    )
                except errors.Refusal as refused:
                    record(name, refused)
            for client in clients.values():
                client.close()
        else:

            async def go() -> None:
                clients: dict[str, AsyncClient] = {}
                for name, key, brain, positional in calls:
                    client = clients.setdefault(key, AsyncClient(url(server), key, http2=http2))
                    try:
                        handle = client.brain(brain) if brain else client
                        record(name, await handle.call(name, *positional))
                    except errors.Refusal as refused:
                        record(name, refused)
                for client in clients.values():
                    await client.close()

            asyncio.run(go())
    return answered


def test_the_committed_stubs_are_what_the_contract_writes() -> None:
    """brainy/client/sync.pyi and aio.pyi name every door of a brain (tools/gen_client_stubs.py); mypy checks
    tests/typing/client_usage.py against them in tests/test_types.py."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parent.parent
    done = subprocess.run(
        [sys.executable, str(root / "tools" / "gen_client_stubs.py"), "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    text = (root / "brainy" / "client" / "sync.pyi").read_text()
    assert all(f"def {name}(" in text for name in surface.BRAIN_DOORS if name not in ("import",))
