"""The pool and the writer lease against a REAL ``brainy serve`` process on a free loopback port.

Seed 000, "The writer model, and the pool" and "The writer lease, and which doors move it"; DOORS.md 5.3
(init, close, health), 10.2 (``/v1/health``, ``/v1/brains``) and 11.4. Nothing opens at start, a read
never claims, the first write claims, a live holder elsewhere is named and never waited for, and close
gives the lease back with its record on disk. Every test starts its own server and stops it with SIGTERM;
every wait is bounded, and only loopback addresses are used.
"""

from __future__ import annotations

import json
import queue
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from launch import (
    HOST,
    START_SECONDS,
    STOP_SECONDS,
    Served,
    launch,  # noqa: F401  (a pytest fixture, used by name)
    place_keys,
)

from brainy.engine import init_store

# --- the keys, the stores, a lease holder -----------------------------------------------------------------

PERSON = "bky_pool_person_every_brain_01"  # person:pat, every brain (*)
ORDERS = "bky_pool_orders_service_star_01"  # service:orders, every brain (*): writes with an asserted caller
OPERATOR = "bks_pool_operator_service_key1"  # service:operator, the ! key (init, close, health)
LINES = [f"{PERSON}  person:pat  *", f"{ORDERS}  service:orders  *", f"{OPERATOR}  service:operator  !"]
BOB = {"X-Brainy-Caller": "person:bob"}


def lock_of(store: Path) -> Path:
    return store / "locks" / "_writer.lock"


def close_of(store: Path) -> Path:
    return store / "locks" / "_writer.close"


def lease_record(store: Path) -> dict[str, Any]:
    return json.loads(lock_of(store).read_bytes().rstrip(b" \x00"))


@pytest.fixture
def keys(tmp_path: Path) -> Path:
    path = tmp_path / "cfg" / "keys"
    place_keys(path, LINES)
    return path


@pytest.fixture
def store(tmp_path: Path) -> Path:
    path = tmp_path / "b1"
    init_store(path)
    return path


@pytest.fixture
def server(store: Path, keys: Path, launch: Callable[..., Served]) -> Served:
    """A server naming one brain, b1, with ``--brain`` and ``--keys``."""
    return launch("serve", "--listen", f"{HOST}:0", "--brain", f"b1={store}", "--keys", str(keys))


HOLDER = r"""
import json, os, sys
from brainy.engine import Brain
brain = Brain.open(sys.argv[1])
print(json.dumps({"role": brain.role, "pid": os.getpid(), "writer": brain.writer_block()}), flush=True)
sys.stdin.readline()
print(json.dumps(brain.close()), flush=True)
"""


class Holder:
    """A second process that opens the store read-write with ``Brain.open`` and holds it until told."""

    def __init__(self, store: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", HOLDER, str(store)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        self._pump = threading.Thread(target=self._read, daemon=True)
        self._pump.start()
        self.opened = json.loads(self.line())
        assert self.opened["role"] == "writer", self.opened

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def line(self, timeout: float = START_SECONDS) -> str:
        try:
            line = self.lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"the holder said nothing for {timeout} s") from None
        if line is None:
            raise AssertionError(f"the holder ended: {self.proc.stderr.read() if self.proc.stderr else ''}")
        return line

    @property
    def pid(self) -> int:
        return self.proc.pid

    def release(self) -> dict[str, Any]:
        """Close the brain (record the clean close, release the lease) and end the process."""
        assert self.proc.stdin is not None
        self.proc.stdin.write("close\n")
        self.proc.stdin.flush()
        closed = json.loads(self.line())
        self.end()
        return closed

    def end(self) -> None:
        for stream in (self.proc.stdin,):
            if stream is not None and not stream.closed:
                stream.close()
        try:
            self.proc.wait(STOP_SECONDS)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(STOP_SECONDS)
        self._pump.join(5.0)
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()


@pytest.fixture
def holder(store: Path) -> Iterator[Callable[[], Holder]]:
    made: list[Holder] = []

    def go() -> Holder:
        made.append(Holder(store))
        return made[-1]

    yield go
    for h in made:
        if h.proc.returncode is None:
            h.end()


def pool_of(server: Served) -> dict[str, Any]:
    status, doc, _, _ = server.request("GET", "/v1/health", OPERATOR)
    assert status == 200, doc
    return doc["pool"]


def names(doc: dict[str, Any]) -> list[str]:
    """The brain names of a ``GET /v1/brains`` answer (entries are names, or objects carrying ``name``)."""
    return [b if isinstance(b, str) else b["name"] for b in doc["brains"]]


def add(server: Served, id_: str, brain: str = "b1") -> tuple[int, dict[str, Any]]:
    status, doc, _, _ = server.request("POST", f"/v1/brains/{brain}/add", PERSON, {"type": "thing", "id": id_})
    return status, doc


# --- 3. the pool and the lease ----------------------------------------------------------------------------


def test_nothing_opens_at_start_and_a_read_never_claims(server: Served, store: Path) -> None:
    """A server holding a brain's name opens nothing at start, and a read door attaches read-only: after
    ``GET counts`` and ``GET get`` there is still no ``_writer.lock``, and the pool reports no writer."""
    assert not lock_of(store).exists()
    assert pool_of(server)["writers"] == 0
    status, doc, _, _ = server.request("GET", "/v1/brains/b1/counts", PERSON)
    assert status == 200 and doc["generation"] == 0, doc
    assert server.request("GET", "/v1/brains/b1/get/nobody", PERSON)[0] == 200
    assert not lock_of(store).exists(), "a read claimed the writer lease"
    pool = pool_of(server)
    assert pool["writers"] == 0 and pool["writerBrains"] == [], pool


def test_the_first_write_claims_the_lease(server: Served, store: Path) -> None:
    """The first write door claims the writer lease: ``_writer.lock`` appears naming the server's pid, and
    ``GET /v1/health`` reports pool writers 1, writerBrains [b1]; the write is readable at once."""
    server.request("GET", "/v1/brains/b1/counts", PERSON)  # a read attach first: the write must still claim
    status, doc = add(server, "first")
    assert status == 200 and doc["generation"] == 1, doc
    assert lock_of(store).exists()
    assert lease_record(store)["pid"] == server.pid
    pool = pool_of(server)
    assert pool["writers"] == 1 and pool["writerBrains"] == ["b1"], pool
    assert server.request("GET", "/v1/brains/b1/counts", PERSON)[1]["entities"] == 1


def test_open_answers_the_writer_block(server: Served, store: Path) -> None:
    """``POST /v1/brains/b1/open`` with the service key takes the lease and answers the writer block: role
    writer, the server's own pid, its hostname, startedAt, heartbeat, claimPath fresh; asked again, it
    answers the same lease."""
    before = int(time.time() * 1000)
    status, doc, _, _ = server.request("POST", "/v1/brains/b1/open", OPERATOR)
    assert status == 200, doc
    assert doc["brain"] == "b1" and doc["generation"] == 0
    writer = doc["writer"]
    assert writer["role"] == "writer" and writer["claimPath"] == "fresh", writer
    assert writer["pid"] == server.pid
    assert writer["hostname"] == socket.gethostname()
    assert before - 5000 <= writer["startedAt"] <= writer["heartbeat"] <= int(time.time() * 1000) + 5000
    assert "refused" not in writer and "holder" not in writer
    assert not any(w["code"] == "opened-read-only" for w in doc["warnings"])
    assert lease_record(store)["pid"] == server.pid
    again = server.request("POST", "/v1/brains/b1/open", OPERATOR)[1]
    assert again["writer"]["role"] == "writer" and again["writer"]["startedAt"] == writer["startedAt"], again
    assert pool_of(server)["writerBrains"] == ["b1"]


def test_a_live_holder_elsewhere_is_named_and_never_waited_for(
    server: Served, store: Path, holder: Callable[[], Holder]
) -> None:
    """With another process holding the lease, a write through the server answers 409
    BRAINY_WRITER_LOCKED naming the holder's pid, promptly (it never queues behind the holder); ``POST
    /open`` answers role reader, refused BRAINY_WRITER_LOCKED, the holder, and an opened-read-only
    warning; reads are still served. Once the holder closes, the next write claims the lease."""
    other = holder()
    started = time.monotonic()
    status, doc = add(server, "blocked")
    took = time.monotonic() - started
    assert status == 409, doc
    assert doc["error"]["name"] == "BRAINY_WRITER_LOCKED"
    assert doc["error"]["holder"]["pid"] == other.pid
    assert took < 2.0, f"the refused write took {took:.2f} s"

    started = time.monotonic()
    status, doc, _, _ = server.request("POST", "/v1/brains/b1/open", OPERATOR)
    assert time.monotonic() - started < 2.0
    assert status == 200, doc
    writer = doc["writer"]
    assert writer["role"] == "reader" and writer["refused"] == "BRAINY_WRITER_LOCKED", writer
    assert writer["holder"]["pid"] == other.pid and writer["holder"]["hostname"] == socket.gethostname()
    assert "opened-read-only" in [w["code"] for w in doc["warnings"]], doc
    assert lease_record(store)["pid"] == other.pid, "the server disturbed the holder's lease"

    assert server.request("GET", "/v1/brains/b1/counts", PERSON)[0] == 200  # still served for reads
    health = server.request("GET", "/v1/brains/b1/health", OPERATOR)[1]
    lease = {c["name"]: c for c in health["checks"]}["writer-lease"]
    assert lease["status"] == "warn", health
    assert pool_of(server)["writers"] == 0

    assert other.release()["cleanCloseRecorded"] is True
    health = server.request("GET", "/v1/brains/b1/health", OPERATOR)[1]
    assert {c["name"]: c for c in health["checks"]}["writer-lease"]["status"] == "pass", health
    status, doc = add(server, "after")
    assert status == 200, doc
    assert lease_record(store)["pid"] == server.pid
    assert pool_of(server)["writerBrains"] == ["b1"]


def test_health_names_a_holder_even_before_the_pool_opened_the_brain(
    server: Served, store: Path, holder: Callable[[], Holder]
) -> None:
    """The per-brain health door's writer-lease check is warn when another live process holds the lease,
    even when it is the first door to reach the brain (a read attach of its own knows no holder)."""
    holder()
    status, health, _, _ = server.request("GET", "/v1/brains/b1/health", OPERATOR)
    assert status == 200, health
    lease = {c["name"]: c for c in health["checks"]}["writer-lease"]
    assert lease["status"] == "warn", health
    assert not lock_of(store).exists() or lease_record(store)["pid"] != server.pid


def test_close_gives_the_lease_back_with_a_record(server: Served, store: Path) -> None:
    """``POST /v1/brains/b1/close`` answers closed, leaseReleased, cleanCloseRecorded; on disk
    ``locks/_writer.close`` exists and ``_writer.lock`` is gone; the pool holds no writer; a read after
    it reopens read-only and still claims nothing."""
    assert add(server, "kept")[0] == 200
    status, doc, _, _ = server.request("POST", "/v1/brains/b1/close", OPERATOR)
    assert status == 200, doc
    assert doc["brain"] == "b1" and doc["closed"] is True, doc
    assert doc["leaseReleased"] is True and doc["cleanCloseRecorded"] is True, doc
    assert close_of(store).exists() and not lock_of(store).exists()
    assert json.loads(close_of(store).read_bytes())["pid"] == server.pid
    assert pool_of(server)["writers"] == 0
    status, doc, _, _ = server.request("GET", "/v1/brains/b1/counts", PERSON)
    assert status == 200 and doc["entities"] == 1, doc
    assert not lock_of(store).exists()
    # the next write claims again, and its claim finds no lease left over: the close was clean, not a crash
    assert add(server, "again")[0] == 200
    assert lease_record(store)["pid"] == server.pid
    writer = server.request("POST", "/v1/brains/b1/open", OPERATOR)[1]["writer"]
    assert writer["role"] == "writer" and writer["claimPath"] == "fresh", writer


def test_access_and_reach_come_before_the_pool(server: Served, store: Path) -> None:
    """``POST /open`` and ``/close`` with a principal key answer 403 access-class and touch nothing; a ``*``
    key on a brain this server does not serve answers 404 NoSuchBrainError naming it."""
    for door in ("open", "close"):
        status, doc, _, _ = server.request("POST", f"/v1/brains/b1/{door}", PERSON)
        assert status == 403 and doc["error"]["reason"] == "access-class", doc
    assert not lock_of(store).exists() and not close_of(store).exists()
    status, doc, _, _ = server.request("GET", "/v1/brains/nosuch/counts", PERSON)
    assert status == 404, doc
    assert doc["error"]["name"] == "NoSuchBrainError" and doc["error"]["brain"] == "nosuch"


def test_brains_dir_serves_every_legal_subdirectory_and_nothing_outside(
    tmp_path: Path, keys: Path, launch: Callable[..., Served]
) -> None:
    """``--brains-dir`` serves every legal subdirectory by its name; a dot-directory, a plain file and a
    symlink are not brains; ``..``, ``%2F`` and a dot-name in the path answer BrainNameInvalidError 400
    or UnknownDoorError 404, and nothing outside the directory is ever resolved or opened."""
    root = tmp_path / "brains"
    for name in ("alpha", "beta", "gamma-2", ".hidden"):
        init_store(root / name)
    (root / "notes.txt").write_text("not a brain\n")
    outside = tmp_path / "outside"
    init_store(outside)
    (root / "linked").symlink_to(outside, target_is_directory=True)
    server = launch("serve", "--listen", f"{HOST}:0", "--brains-dir", str(root), "--keys", str(keys))

    for key in (OPERATOR, PERSON):
        status, doc, _, _ = server.request("GET", "/v1/brains", key)
        assert status == 200, doc
        assert names(doc) == ["alpha", "beta", "gamma-2"], doc
    for name in ("alpha", "beta", "gamma-2"):
        status, doc, _, _ = server.request("GET", f"/v1/brains/{name}/counts", PERSON)
        assert status == 200 and doc["brain"] == name, doc
    assert add(server, "row", "beta")[0] == 200
    assert lock_of(root / "beta").exists() and not lock_of(root / "alpha").exists()

    escapes = [
        "/v1/brains/../counts",
        "/v1/brains/%2E%2E/counts",
        "/v1/brains/..%2Foutside/counts",
        "/v1/brains/alpha%2F..%2F..%2Foutside/counts",
        "/v1/brains/.hidden/counts",
        "/v1/brains/%2Ehidden/counts",
        "/v1/brains/./counts",
        "/v1/brains/alpha/../outside/counts",
        "/v1/brains/alpha/..%2F..%2Foutside/counts",
    ]
    for path in escapes:
        status, doc, _, _ = server.request("GET", path, PERSON)
        assert (status, doc["error"]["name"]) in ((400, "BrainNameInvalidError"), (404, "UnknownDoorError")), (
            path,
            status,
            doc,
        )
    for path, body in (
        ("/v1/brains/..%2Foutside/add", {"type": "thing", "id": "x"}),
        ("/v1/brains/.hidden/add", {"type": "thing", "id": "x"}),
    ):
        status, doc, _, _ = server.request("POST", path, PERSON, body)
        assert status == 400 and doc["error"]["name"] == "BrainNameInvalidError", (path, doc)
    status, doc, _, _ = server.request("GET", "/v1/brains/linked/counts", PERSON)
    assert status == 404 and doc["error"]["name"] == "NoSuchBrainError", doc
    status, doc, _, _ = server.request("GET", "/v1/brains/nosuch/counts", PERSON)
    assert status == 404 and doc["error"]["name"] == "NoSuchBrainError", doc
    for untouched in (outside, root / ".hidden"):
        assert not lock_of(untouched).exists() and not close_of(untouched).exists()
    assert server.stop() == 0
    for untouched in (outside, root / ".hidden", root / "alpha"):
        assert not lock_of(untouched).exists() and not close_of(untouched).exists(), untouched
    assert close_of(root / "beta").exists() and not lock_of(root / "beta").exists()


def test_a_brain_added_to_the_brains_dir_while_running_is_served(
    tmp_path: Path, keys: Path, launch: Callable[..., Served]
) -> None:
    """The brains dir is read when asked, not once at start: a store initialised under it while the
    server runs is listed and answers, and nothing opened it before it was asked for."""
    root = tmp_path / "brains"
    init_store(root / "alpha")
    server = launch("serve", "--listen", f"{HOST}:0", "--brains-dir", str(root), "--keys", str(keys))
    assert names(server.request("GET", "/v1/brains", PERSON)[1]) == ["alpha"]
    init_store(root / "late")
    assert names(server.request("GET", "/v1/brains", PERSON)[1]) == ["alpha", "late"]
    status, doc, _, _ = server.request("GET", "/v1/brains/late/counts", PERSON)
    assert status == 200 and doc["brain"] == "late", doc


def test_a_claimed_writer_inherits_the_readers_commit_listeners(tmp_path):
    """A held change stream opened while the pool held only a reader listens on that reader: the writer the
    first write claims takes the listener over, so the commit wakes the stream instead of its 2-second tick."""
    from brainy.host.pool import Pool

    init_store(tmp_path / "b")
    pool = Pool({"b": tmp_path / "b"})
    try:
        reader = pool.resolve("b", False)
        assert reader.role == "attach"
        woken: list[int] = []
        reader.on_durable.append(lambda: woken.append(1))
        writer = pool.resolve("b", True)
        assert writer is not reader and writer.role == "writer"
        writer.add({"type": "thing", "id": "k"})
        assert woken == [1]
    finally:
        pool.close_all()
