"""brainy.client against a real ``brainy serve`` on loopback: the door surface joined to the contract both ways,
one test body passing against the embedded ``Brain`` and a remote one, refusals as brainy.errors' classes with
their fields, batches split by bytes, the held change feed resuming across a cut connection with no frame lost
or handed out twice, the version check, timeouts and transport failures."""

from __future__ import annotations

import asyncio
import socket
import threading
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from server import ServerProcess, start_server

from brainy import errors
from brainy.client import AsyncClient, Client, surface, wire
from brainy.contract import doors as D
from brainy.engine import Brain, init_store


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with start_server(tmp_path_factory.mktemp("client") / "served") as server:
        yield server


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


def exercise(b: Any) -> list[Any]:
    """One body for the embedded Brain and a remote one: what it answers, less what differs by nature (ids,
    times)."""
    seen: list[Any] = []
    added = b.add({"type": "document", "data": "the first note", "metadata": {"n": 1}, "vector": [0.5] * 384})
    seen.append(sorted(added))
    got = b.get(added["id"], includeVector=True)["entity"]
    seen.append((got["data"], got["metadata"], [round(x, 6) for x in got["vector"][:3]]))
    b.update({"id": added["id"], "metadata": {"n": 2}})
    seen.append(b.get(added["id"])["entity"]["metadata"])
    many = b.addMany({"items": [{"type": "document", "data": f"note {i}", "metadata": {"n": i}} for i in range(5)]})
    seen.append((len(many["ids"]), many["failed"]))
    seen.append(b.find({"where": {"n": {"gte": 2}}, "limit": 10})["results"].__len__())
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


def test_one_body_passes_against_the_embedded_brain_and_a_remote_one(tmp_path: Path, served: ServerProcess) -> None:
    store = tmp_path / "embedded"
    init_store(store)
    with Brain.open(store) as brain:
        embedded = exercise(brain)
    with Client(url(served), served.key) as client:
        remote = exercise(client.brain(served.brain))
    assert remote == embedded
    assert ("EntityNotFoundError", 404, "nobody") in remote


def test_the_async_client_answers_as_the_blocking_one(served: ServerProcess) -> None:
    async def go() -> tuple[Any, Any]:
        async with AsyncClient(url(served), served.key) as client:
            b = client.brain(served.brain)
            added = await b.add({"type": "document", "data": "async note"})
            got = await b.get(added["id"])
            with pytest.raises(errors.EntityNotFoundError) as refused:
                await b.call("update", {"id": "nobody", "metadata": {}})
            return got["entity"]["data"], refused.value.fields

    assert asyncio.run(go()) == ("async note", {"id": "nobody"})


def test_a_batch_past_its_bytes_goes_as_several_requests_and_answers_as_one(
    served: ServerProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(wire, "BATCH_BYTES", 2_000)
    items = [{"type": "document", "data": f"batch row {i} " + "x" * 200} for i in range(40)]
    assert len(wire.split("addMany", {"items": items}, True)) > 3
    with Client(url(served), served.key) as client:
        answer = client.brain(served.brain).addMany({"items": items})
        assert len(answer["ids"]) == 40 and len(set(answer["generations"])) > 3
        got = client.brain(served.brain).batchGet({"ids": answer["ids"]})
        assert [e["data"] for e in got["entities"]] == [i["data"] for i in items]


class Cutter:
    """A loopback TCP relay to the server whose connections the test cuts at will."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.open: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                inner, _ = self.listener.accept()
            except OSError:
                return
            outer = socket.create_connection(self.target)
            self.open += [inner, outer]
            for a, b in ((inner, outer), (outer, inner)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(a: socket.socket, b: socket.socket) -> None:
        try:
            while data := a.recv(65536):
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


def test_the_change_feed_resumes_across_a_cut_connection_with_no_frame_lost_or_repeated(served: ServerProcess) -> None:
    with Client(url(served), served.key) as client:
        b = client.brain(served.brain)
        start = b.now()["generation"]
        for i in range(6):  # commits of two and three ops: a cut may land inside one
            b.addMany({"items": [{"type": "document", "data": f"feed {i} {j}"} for j in range(2 + i % 2)]})
        want = [(f["generation"], f["index"]) for f in b.changes(page={"since": start, "limit": 1000})["frames"]]
    cutter = Cutter(served.address)
    with Client(f"http://127.0.0.1:{cutter.port}", served.key) as client:
        got = []
        feed = client.brain(served.brain).changes(since=start)
        for frame in feed:
            got.append((frame["generation"], frame["index"]))
            if len(got) in (3, 8):
                cutter.cut()
            if len(got) == len(want):
                break
        feed.close()
    cutter.close()
    assert got == want


def test_the_first_call_warns_once_when_the_server_speaks_another_contract(
    served: ServerProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(surface, "CONTRACT_VERSION", "0.0.1")
    with Client(url(served), served.key) as client, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        client.brain(served.brain).now()
        client.brain(served.brain).now()
    skew = [w for w in caught if "contract 0.0.1" in str(w.message)]
    assert len(skew) == 1 and D.CONTRACT.contract_version in str(skew[0].message)


def test_a_door_the_server_lacks_refuses_by_name_and_transport_failures_are_one_class(served: ServerProcess) -> None:
    with Client(url(served), served.key) as client:
        with pytest.raises(errors.UnknownDoorError):
            client.call("no.suchDoor")
    idle = socket.create_server(("127.0.0.1", 0))  # accepts, never answers
    try:
        with Client(f"http://127.0.0.1:{idle.getsockname()[1]}", "k", timeout=0.5) as client:
            with pytest.raises(errors.TransportError) as failed:
                client.health()
            assert isinstance(failed.value.cause, TimeoutError)
    finally:
        idle.close()
    with socket.create_server(("127.0.0.1", 0)) as gone:
        port = gone.getsockname()[1]
    with Client(f"http://127.0.0.1:{port}", "k", retries=1) as client:
        with pytest.raises(errors.TransportError) as refused:
            client.health()
        assert isinstance(refused.value.cause, ConnectionRefusedError)


@pytest.mark.slow
def test_every_door_answers_or_refuses_by_name_through_the_client(tmp_path: Path) -> None:
    """Every door of the contract, called once with no arguments through the blocking and the async client (a
    brain's doors on a handle, the host's on the client, naming a brain of their own): a non-empty answer, or a
    refusal raised as its own class of brainy.errors — never a transport failure, never anything else; the two
    clients alike, door by door."""
    blocking, concurrent = _every_door(tmp_path / "b", "blocking"), _every_door(tmp_path / "a", "async")
    assert blocking == concurrent
    assert set(blocking) == {d.name for d in D.DOORS}
    assert sum(v == "answer" for v in blocking.values()) >= 25, blocking
    assert blocking["host.move"] == "NotYetNativeError" and blocking["get"] == "answer"


def _every_door(folder: Path, form: str) -> dict[str, str]:
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
                client = clients.setdefault(key, Client(url(server), key))
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
                    client = clients.setdefault(key, AsyncClient(url(server), key))
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
