"""A write sent twice is answered once (docs/fleet.md "A write sent twice").

In process: a write door run with an id commits once; the same id from the same caller is answered what it was,
after a reopen too (its frame replayed), and another caller's or another id's write is its own. With real nodes:
an edge whose forwarded write loses its answer on the way back (a relay cuts the owner's connection once the owner
has answered, so the owner acted on it) sends it again with the same id, and the client gets one answer and the
brain holds the write once; without the id the same cut would have been an InternalError."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import grpc
import msgpack
import pytest
from fleet import call, place_on, start_node, stop_nodes, write_fleet_keys
from helpers import new_store, segments
from server import HOST, PERSON_KEY, free_port
from test_damage import frame_starts, refused_by_both
from test_serve_grpc import stubs  # noqa: F401  (the module's fixture: stubs generated from docs/brainy.proto)

from brainy.contract import refusals as R
from brainy.engine import Brain
from brainy.fleet.proxy import WRITE
from brainy.store import answered as A
from brainy.store import log as L

CALLER = "person:ada"


def _count(brain: Brain, kind: str) -> int:
    return brain.counts()["byType"].get(kind, 0)


def test_a_write_sent_again_with_its_id_is_answered_as_it_was_and_committed_once(tmp_path: Path) -> None:
    path = new_store(tmp_path)
    with Brain.open(path) as brain:
        first = brain.write("add", {"type": "document"}, caller=CALLER, write="w-1")
        head = brain.head
        again = brain.write("add", {"type": "document"}, caller=CALLER, write="w-1")
        assert again == first and brain.head == head and _count(brain, "document") == 1
        other = brain.write("add", {"type": "document"}, caller=CALLER, write="w-2")
        assert other["id"] != first["id"] and _count(brain, "document") == 2
        # another caller's write with the same id is that caller's own
        theirs = brain.write("add", {"type": "document"}, caller="person:bob", write="w-1")
        assert theirs["id"] != first["id"] and _count(brain, "document") == 3
        plain = brain.write("add", {"type": "document"}, caller=CALLER)
        assert plain["id"] not in (first["id"], other["id"])


def test_a_writer_killed_after_a_write_answers_its_id_again_from_the_replayed_frame(tmp_path: Path) -> None:
    """A real writer process commits writes with ids and is SIGKILLed before any flush: the reopen replays their
    frames, and the same ids are answered what they were, with nothing committed again."""
    path = new_store(tmp_path)
    script = (
        "import json, os, signal, sys\n"
        "from brainy.engine import Brain\n"
        "brain = Brain.open(sys.argv[1], flush_bytes=1 << 30)\n"
        f"answers = [brain.write('add', {{'type': 'document'}}, caller={CALLER!r}, write=f'w-{{n}}') for n in range(3)]\n"
        "print(json.dumps([answers, brain.head]), flush=True)\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    done = subprocess.run([sys.executable, "-c", script, str(path)], capture_output=True, text=True, timeout=120)
    assert done.returncode == -signal.SIGKILL, done.stderr
    answers, head = json.loads(done.stdout)
    with Brain.open(path, flush_bytes=1 << 30) as brain:
        assert brain.head == head
        for n, answer in enumerate(answers):
            assert brain.write("add", {"type": "document"}, caller=CALLER, write=f"w-{n}") == answer
        assert brain.head == head and _count(brain, "document") == 3


def test_a_refused_or_empty_write_is_not_remembered(tmp_path: Path) -> None:
    """A batch whose every item is refused commits nothing: sent again, it is run again (and refused again)."""
    path = new_store(tmp_path)
    with Brain.open(path) as brain:
        items = {"items": [{"type": "note"}], "continueOnError": True}
        first = brain.write("addMany", items, caller=CALLER, write="w-3")
        assert first["ids"] == [] and len(first["failed"]) == 1
        assert len(brain.commits.answered) == 0
        assert brain.write("addMany", items, caller=CALLER, write="w-3")["failed"] == first["failed"]


def test_a_frame_with_a_write_id_decodes_and_peeks_as_any_other() -> None:
    write = ("w-9", msgpack.packb({"id": "x", "generation": 7}))
    payload = L.encode_payload(7, 1_700_000_000_000, CALLER, None, [], write)
    assert payload[:3] == b"\x86\xa1g" and L.peek_generation(payload, 0, len(payload)) == 7
    frame = L.Frame.decode(payload, "0001")
    assert frame.generation == 7 and frame.write == write
    plain = L.encode_payload(8, 1_700_000_000_000, None, None, [])
    assert plain[:3] == b"\x85\xa1g" and L.Frame.decode(plain, "0001").write is None
    bad = msgpack.packb({"g": 9, "t": 1, "a": None, "v": None, "ops": [], "w": ["w", "not bin"]})
    with pytest.raises(Exception, match="unknown-record-type"):
        L.Frame.decode(bad, "0001")


def test_a_damaged_length_before_frames_with_write_ids_refuses_and_cuts_nothing(tmp_path: Path) -> None:
    """The frames after a damaged length are found by their opening bytes, a six-key map's too: the log is refused
    as damaged (``checksum-mismatch``), never taken for a torn tail and cut."""
    path = new_store(tmp_path)
    brain = Brain.open(path)
    for n in range(5):
        brain.write("add", {"type": "document"}, caller=CALLER, write=f"w-{n}")
    brain._lease.abandon()  # as if killed: no flush, no close record
    brain.commits.log.close()
    (seg,) = segments(path)
    data = bytearray(seg.read_bytes())
    at = frame_starts(seg)[2]
    assert data[at + L.FRAME_HEADER_SIZE : at + L.FRAME_HEADER_SIZE + 3] == b"\x86\xa1g"
    data[at + 3] ^= 0x40  # the length's top byte: a gibibyte past the end
    seg.write_bytes(bytes(data))
    refused_by_both(path, R.FactLogRefusedError, "checksum-mismatch")
    assert seg.read_bytes() == bytes(data)


def test_the_remembered_answers_are_let_go_after_their_time(monkeypatch) -> None:
    monkeypatch.setattr(A, "KEEP_SECONDS", 0.2)
    held = A.Answered()
    held.remember(("old", msgpack.packb(1)), None, 1)
    time.sleep(0.25)
    held.remember(("new", msgpack.packb(2)), None, 2)
    assert held.recall("old", None) is None and held.recall("new", None) == (2, 2) and len(held) == 1


def test_the_remembered_answers_are_bounded_oldest_first(monkeypatch) -> None:
    monkeypatch.setattr(A, "MAX_IDS", 3)
    monkeypatch.setattr(A, "MAX_BYTES", 100)
    held = A.Answered()
    for n in range(5):
        held.remember((f"w{n}", msgpack.packb({"n": n})), None, n)
    assert len(held) == 3 and held.recall("w1", None) is None and held.recall("w4", None) == ({"n": 4}, 4)
    held.remember(("big", msgpack.packb("x" * 96)), None, 9)  # 98 bytes: the older ones go, oldest first
    assert held.recall("big", None) == ("x" * 96, 9) and len(held) == 1


class CuttingRelay:
    """A TCP relay on loopback to a node (``upstream``, set once the node is up) that, while ``cuts`` is above
    zero, closes both connections instead of passing on the answer to a POST: the node has answered it, so it
    acted on it, and the sender never hears. Every other byte is passed as it comes."""

    def __init__(self) -> None:
        self.port = free_port()
        self.upstream = 0
        self.cuts = 0
        self.cut = 0
        self._server = socket.create_server((HOST, self.port))
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        upstream = socket.create_connection((HOST, self.upstream))
        posted = threading.Event()

        def up() -> None:
            while data := _recv(client):
                if data.startswith(b"POST "):
                    posted.set()
                upstream.sendall(data)
            upstream.close()

        threading.Thread(target=up, daemon=True).start()
        while data := _recv(upstream):
            if posted.is_set() and self.cuts > 0:
                self.cuts -= 1
                self.cut += 1
                break
            posted.clear()
            client.sendall(data)
        for sock in (client, upstream):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()

    def close(self) -> None:
        self._server.close()


def _recv(sock: socket.socket) -> bytes:
    try:
        return sock.recv(65536)
    except OSError:
        return b""


@pytest.mark.slow
def test_a_forwarded_write_whose_answer_is_lost_is_sent_again_and_answered_once(
    tmp_path: Path,
    etcd,
    stubs,  # noqa: F811
) -> None:
    """Node b is reached through a relay that loses the answers to forwarded writes after b gave them: node a
    sends each again with its id, the client gets its one answer (over HTTP/1.1 and over gRPC, whose door calls
    the edge makes as HTTP requests), and b holds each write once."""
    pb2, pb2_grpc = stubs
    keys = write_fleet_keys(tmp_path / "keys")
    relay = CuttingRelay()
    grpc_port = free_port()
    a = b = None
    try:
        a = start_node(tmp_path, "a", etcd.url, keys, extra=("--listen", f"{HOST}:{grpc_port},grpc"))
        b = start_node(tmp_path, "b", etcd.url, keys, extra=("--advertise", f"http://{HOST}:{relay.port}"))
        relay.upstream = b.port
        brain = place_on(a, b, "wi", 6)
        relay.cuts = 2
        added = call(a, "POST", f"/v1/brains/{brain}/add", json.dumps({"type": "document", "id": "n1"}).encode())
        assert added.status == 200, added
        many = json.dumps({"items": [{"type": "document"} for _ in range(3)]}).encode()
        batch = call(a, "POST", f"/v1/brains/{brain}/addMany", many)
        assert batch.status == 200, batch
        assert relay.cut == 2  # both answers were lost once, and each write was sent again
        assert dict(batch.headers).get("brainy-node") == "b"
        relay.cuts = 1
        with grpc.insecure_channel(f"{HOST}:{grpc_port}") as channel:
            answer = pb2_grpc.BrainyStub(channel).add(
                pb2.DoorRequest(brain=brain, document=json.dumps({"type": "document"})),
                metadata=(("authorization", f"Bearer {PERSON_KEY}"),),
                timeout=30,
            )
        assert answer.WhichOneof("outcome") == "document", answer
        over_grpc = json.loads(answer.document)["id"]
        assert relay.cut == 3
        listed = call(b, "POST", f"/v1/brains/{brain}/find", json.dumps({"type": "document", "limit": 100}).encode())
        ids = sorted(hit["entity"]["id"] for hit in listed.result()["results"])
        assert ids == sorted([added.result()["id"], *batch.result()["ids"], over_grpc])  # each once
        assert f"{WRITE}" not in added.body.decode()  # the header is the hop's, not the answer's
    finally:
        stop_nodes(a, b)
        relay.close()
