"""Auth against a REAL ``brainy serve`` process on a free loopback port: the gate's ladder and the keys file.

Seed 001, "Keys, reach and access" and "Revocation"; DOORS.md 0.4 and 11.2. Every test starts its own
server (``python -m brainy.cli serve --listen 127.0.0.1:0``), learns the port the kernel chose from the
server's own ``listening on`` line, waits until ``GET /contract.json`` answers, and stops it with SIGTERM.
Every wait here is bounded.
"""

from __future__ import annotations

import re
import stat
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from launch import (
    HOST,
    START_SECONDS,
    KeptAlive,
    Served,
    free_port,
    launch,  # noqa: F401  (a pytest fixture, used by name)
    place_keys,
    refused,
    wait_until,
    without_meta,
)

from brainy.auth.keys import CHECK_INTERVAL, fingerprint, parse_keys
from brainy.engine import init_store

# --- the keys this file places ----------------------------------------------------------------------------

ALICE = "bky_alice_reaches_b1_only_0001"  # person:alice, reaches b1
ACME = "bky_acme_business_reaches_b1_01"  # business:acme, reaches b1
ORDERS = "bky_orders_service_every_brain1"  # service:orders, every brain (*): may assert a caller
OPERATOR = "bks_operator_service_key_00001"  # service:operator, the ! key
SPARE = "bky_spare_key_to_be_removed_001"  # person:spare, reaches b1; some tests remove its line
LINES = [
    "# test keys",
    f"{ALICE}   person:alice      b1",
    f"{ACME}    business:acme     b1",
    f"{ORDERS}  service:orders    *",
    f"{OPERATOR} service:operator !",
    f"{SPARE}   person:spare      b1   # removed by some tests",
]


@pytest.fixture
def stores(tmp_path: Path) -> dict[str, Path]:
    """Two stores, b1 and b2."""
    made = {}
    for name in ("b1", "b2"):
        made[name] = tmp_path / name
        init_store(made[name])
    return made


@pytest.fixture
def server(tmp_path: Path, stores: dict[str, Path], launch: Callable[..., Served]) -> Served:
    """A server for b1 and b2 with the keys above, placed at 0600 and named by ``BRAINY_KEYS``."""
    keys = tmp_path / "cfg" / "keys"
    place_keys(keys, LINES)
    return launch(
        "serve",
        "--listen",
        f"{HOST}:0",
        "--brain",
        f"b1={stores['b1']}",
        "--brain",
        f"b2={stores['b2']}",
        env={"BRAINY_KEYS": str(keys)},
    )


# --- 1. the ladder ----------------------------------------------------------------------------------------


def test_every_static_key_failure_is_one_flat_401(server: Served, tmp_path: Path) -> None:
    """No header, another scheme, a wrong key, a malformed header and a removed key's line all answer 401
    UnauthenticatedError with byte-identical bodies (``_meta`` aside): the difference would be a probe."""
    assert server.request("GET", "/v1/brains/b1/counts", SPARE)[0] == 200
    place_keys(tmp_path / "cfg" / "keys", [line for line in LINES if SPARE not in line])
    gone = wait_until(lambda: server.request("GET", "/v1/brains/b1/counts", SPARE)[0] == 401, timeout=5.0)
    assert gone is not None, "the removed key still answers"

    path = "/v1/brains/b1/counts"
    attempts = {
        "no header": {},
        "basic scheme": {"Authorization": "Basic YWxpY2U6c2VjcmV0"},
        "token scheme": {"Authorization": f"Token {ALICE}"},
        "wrong key": {"Authorization": "Bearer bky_nobody_has_this_key_000"},
        "bearer, no credential": {"Authorization": "Bearer"},
        "bearer, two credentials": {"Authorization": f"Bearer {ALICE} {ALICE}"},
        "empty header": {"Authorization": ""},
        "removed key": {"Authorization": f"Bearer {SPARE}"},
    }
    bodies = {}
    for what, headers in attempts.items():
        status, doc, raw, got = server.request("GET", path, headers=headers)
        assert status == 401, (what, status, doc)
        assert doc["error"]["name"] == "UnauthenticatedError", what
        assert got.get("www-authenticate", "").lower().startswith("bearer"), what
        bodies[what] = without_meta(raw)
    assert len(set(bodies.values())) == 1, bodies
    # the same flat refusal on a brain that does not exist: authentication is asked before anything else
    assert without_meta(server.request("GET", "/v1/brains/nosuch/counts")[2]) == bodies["no header"]


def test_reach_refusal_says_nothing_about_whether_the_brain_exists(server: Served) -> None:
    """A key that does not reach the brain answers 403 ForbiddenError reason reach, byte-identical whether
    the brain exists (b2) or not (nosuch), on a read and on a write."""
    refusals = []
    for brain in ("b2", "nosuch"):
        for method, door, body in (("GET", "counts", None), ("POST", "add", {"type": "thing", "id": "x"})):
            status, doc, raw, _ = server.request(method, f"/v1/brains/{brain}/{door}", ALICE, body)
            assert status == 403, (brain, door, doc)
            assert doc["error"]["name"] == "ForbiddenError" and doc["error"]["reason"] == "reach", doc
            assert brain not in doc["error"]["message"]
            refusals.append(without_meta(raw))
    assert refusals[0] == refusals[2] and refusals[1] == refusals[3], refusals
    assert server.request("GET", "/v1/brains/b1/counts", ALICE)[0] == 200  # the key does reach b1


@pytest.mark.parametrize("brain", ["b1", "nosuch"])
def test_other_access_class_is_refused_before_the_brain_is_touched(
    server: Served, stores: dict[str, Path], brain: str
) -> None:
    """The service key on a principal door (``get``) and a person key on a service door (``POST /open``)
    answer 403 ForbiddenError reason access-class, never 404, whether or not the brain exists; the person's
    open claims nothing."""
    status, doc, _, _ = server.request("GET", f"/v1/brains/{brain}/get/x1", OPERATOR)
    assert status == 403 and doc["error"]["name"] == "ForbiddenError", doc
    assert doc["error"]["reason"] == "access-class"
    for key in (ALICE, ORDERS):  # a principal key of any kind: the door wants the ! key alone
        status, doc, _, _ = server.request("POST", f"/v1/brains/{brain}/open", key)
        assert status == 403 and doc["error"]["name"] == "ForbiddenError", doc
        assert doc["error"]["reason"] == "access-class"
    assert not (stores["b1"] / "locks" / "_writer.lock").exists(), "a refused open claimed the lease"


def test_bare_service_key_cannot_write_but_asserting_a_person_attributes_the_row(server: Served) -> None:
    """A service-kind static key with no asserted caller is refused ServiceKeyCannotWriteError (403) and
    nothing commits; with ``X-Brainy-Caller: person:bob`` the write lands, and ``GET /generation/{n}``
    names author person:bob via service:orders, as do the row's createdBy/updatedBy."""
    status, doc, _, _ = server.request("POST", "/v1/brains/b1/add", ORDERS, {"type": "thing", "id": "x1"})
    assert status == 403, doc
    assert doc["error"]["name"] == "ServiceKeyCannotWriteError" and doc["error"]["door"] == "add"
    assert server.request("GET", "/v1/brains/b1/counts", ORDERS)[1]["generation"] == 0  # nothing committed

    bob = {"X-Brainy-Caller": "person:bob"}
    status, doc, _, _ = server.request("POST", "/v1/brains/b1/add", ORDERS, {"type": "thing", "id": "x1"}, bob)
    assert status == 200, doc
    n = doc["generation"]
    status, commit, _, _ = server.request("GET", f"/v1/brains/b1/generation/{n}", ORDERS)
    assert status == 200, commit
    assert commit["author"] == "person:bob" and commit["via"] == "service:orders", commit
    status, row, _, _ = server.request("GET", "/v1/brains/b1/get/x1", ALICE)
    assert status == 200 and row["entity"]["createdBy"] == "person:bob", row
    assert row["entity"]["updatedBy"] == "person:bob"

    # a person key's own writes are its own: author person:alice, no via
    status, doc, _, _ = server.request("POST", "/v1/brains/b1/add", ALICE, {"type": "thing", "id": "x2"})
    assert status == 200, doc
    commit = server.request("GET", f"/v1/brains/b1/generation/{doc['generation']}", ALICE)[1]
    assert commit["author"] == "person:alice" and commit["via"] is None, commit


@pytest.mark.parametrize("key", [ALICE, ACME], ids=["person", "business"])
def test_a_non_service_key_asserting_a_caller_is_refused_by_name(server: Served, key: str) -> None:
    """A person's or a business's key carrying X-Brainy-Caller is refused CallerAssertionRefusedError 403
    reason not-a-service, on a read and on a write, never ignored: nothing commits."""
    bob = {"X-Brainy-Caller": "person:bob"}
    for method, door, body in (("GET", "counts", None), ("POST", "add", {"type": "thing", "id": "y1"})):
        status, doc, _, _ = server.request(method, f"/v1/brains/b1/{door}", key, body, bob)
        assert status == 403, doc
        assert doc["error"]["name"] == "CallerAssertionRefusedError", doc
        assert doc["error"]["reason"] == "not-a-service"
    assert server.request("GET", "/v1/brains/b1/counts", key)[1]["generation"] == 0


def test_health_pool_detail_is_the_service_keys(server: Served) -> None:
    """``GET /v1/health`` answers any credential, but the pool detail (which names brains, writers among
    them) is for the service key alone: a principal key reaching b1 learns nothing of b2 from it."""
    assert server.request("GET", "/v1/health")[0] == 401
    server.request(
        "POST", "/v1/brains/b2/add", ORDERS, {"type": "thing", "id": "z"}, {"X-Brainy-Caller": "person:bob"}
    )  # b2 now has a writer
    status, doc, raw, _ = server.request("GET", "/v1/health", ALICE)
    assert status == 200, doc
    assert "pool" not in doc and "auth" not in doc and b"b2" not in raw, doc
    assert doc["status"] == "ok" and doc["uptimeMs"] >= 0 and doc["embedder"]["loaded"] is False
    assert [entry["protocols"] for entry in doc["listeners"]] == [["h1", "h2"]]
    status, doc, _, _ = server.request("GET", "/v1/health", OPERATOR)
    assert status == 200 and doc["pool"]["writerBrains"] == ["b2"] and doc["pool"]["writers"] == 1, doc
    assert "b2" in doc["pool"]["resident"] and doc["pool"]["knownBrains"] >= 2 and doc["auth"]["keys"] >= 3
    listing = server.request("GET", "/v1/brains", OPERATOR)[1]["brains"]
    assert {"name": "b2", "archived": False, "resident": True, "writer": True} in listing


# --- 2. the keys file -------------------------------------------------------------------------------------


def test_a_keys_file_others_can_read_refuses_the_start(
    tmp_path: Path, stores: dict[str, Path], launch: Callable[..., Served]
) -> None:
    """A keys file the group or the world may read (0644) refuses ``brainy serve`` before it listens: it
    exits non-zero naming ``chmod 600``, and nothing answers on the port it was given."""
    keys = tmp_path / "cfg" / "keys"
    place_keys(keys, LINES, mode=0o644)
    port = free_port()
    child = launch(
        "serve", "--listen", f"{HOST}:{port}", "--brain", f"b1={stores['b1']}", "--keys", str(keys), ready=False
    )
    try:
        code = child.proc.wait(START_SECONDS)
    except subprocess.TimeoutExpired:
        code = None  # still running: the teardown stops it; the assertion below fails the test
    else:
        child.close_pipes()
    assert code not in (None, 0)
    assert f"chmod 600 {keys}" in child.stderr(), child.stderr()
    assert ALICE not in child.stderr() + child.stdout(), "a refusal quoted a key"
    assert "listening on" not in child.stderr()
    assert refused(port)


def test_a_line_added_while_running_answers_within_a_second(server: Served, tmp_path: Path) -> None:
    """The keys file is re-read when it changes: a line added while the server runs answers within ~1 s,
    no restart."""
    newcomer = "bky_newcomer_added_later_00001"
    assert server.request("GET", "/v1/brains/b1/counts", newcomer)[0] == 401
    place_keys(tmp_path / "cfg" / "keys", LINES + [f"{newcomer}  person:newcomer  b1"])
    took = wait_until(lambda: server.request("GET", "/v1/brains/b1/counts", newcomer)[0] == 200, timeout=5.0)
    assert took is not None, "the added key never answered"
    assert took < 1.0, f"the added key took {took:.2f} s to answer"
    assert server.request("GET", "/v1/brains/b1/counts", ALICE)[0] == 200  # the others still do


def test_a_removed_line_stops_answering_within_a_second(server: Served, tmp_path: Path) -> None:
    """Revocation without a restart: remove a key's line and that key answers 401 within a second, while
    every other key keeps answering."""
    assert server.request("GET", "/v1/brains/b1/counts", SPARE)[0] == 200
    place_keys(tmp_path / "cfg" / "keys", [line for line in LINES if SPARE not in line])
    took = wait_until(lambda: server.request("GET", "/v1/brains/b1/counts", SPARE)[0] == 401, timeout=5.0)
    assert took is not None, "the removed key kept answering"
    assert took < 1.0, f"the removed key took {took:.2f} s to stop answering"
    assert server.request("GET", "/v1/brains/b1/counts", ALICE)[0] == 200


def test_a_revoked_key_is_refused_on_the_next_request_of_its_own_connection(server: Served) -> None:
    """The keys table remembers a keep-alive caller's proven key, and a revocation ends that at once:
    ``DELETE /v1/keys/{sha256}`` on another connection, and the very next request on the caller's connection,
    already open and already answered with that key, is the flat 401; the connection's other keys answer."""
    kept = KeptAlive(server.port)
    try:
        for _ in range(3):  # answered, and remembered, on this connection
            assert kept.request("GET", "/v1/brains/b1/counts", SPARE)[0] == 200
        status, doc, _, _ = server.request("DELETE", f"/v1/keys/{fingerprint(SPARE)}", OPERATOR)
        assert status == 200 and doc["revoked"] is True and doc["known"] is True, doc
        status, doc = kept.request("GET", "/v1/brains/b1/counts", SPARE)
        assert status == 401 and doc["error"]["name"] == "UnauthenticatedError", doc
        assert kept.request("GET", "/v1/brains/b1/counts", SPARE)[0] == 401  # and stays refused
        assert kept.request("GET", "/v1/brains/b1/counts", ALICE)[0] == 200
    finally:
        kept.close()


def test_a_removed_line_is_refused_on_its_own_keep_alive_connection(server: Served, tmp_path: Path) -> None:
    """A key's line removed from the file while its caller's connection is open and answered: once the
    file's next check is due (CHECK_INTERVAL), the next request on that same connection is the flat 401,
    within a second; a minted key answers on the very next request of an open connection."""
    kept = KeptAlive(server.port)
    try:
        for _ in range(3):
            assert kept.request("GET", "/v1/brains/b1/counts", SPARE)[0] == 200
        place_keys(tmp_path / "cfg" / "keys", [line for line in LINES if SPARE not in line])
        time.sleep(CHECK_INTERVAL + 0.05)  # the file's next check is due
        status, doc = kept.request("GET", "/v1/brains/b1/counts", SPARE)
        assert status == 401 and doc["error"]["name"] == "UnauthenticatedError", doc
        assert kept.request("GET", "/v1/brains/b1/counts", ALICE)[0] == 200

        status, doc, _, _ = server.request(
            "POST", "/v1/keys", OPERATOR, body={"principal": "person:fresh", "brains": ["b1"]}
        )
        assert status == 200, doc
        assert kept.request("GET", "/v1/brains/b1/counts", doc["key"])[0] == 200
        assert kept.request("GET", "/v1/brains/b1/counts", SPARE)[0] == 401
    finally:
        kept.close()


def test_a_reload_that_would_open_the_file_keeps_the_last_good_table(server: Served, tmp_path: Path) -> None:
    """A keys file changed to a mode others can read is refused on reload: the last good table stays
    (the new line is not taken, the old ones still answer), and the refusal is logged naming chmod 600."""
    keys = tmp_path / "cfg" / "keys"
    newcomer = "bky_newcomer_in_a_0644_file_01"
    place_keys(keys, LINES + [f"{newcomer}  person:newcomer  b1"], mode=0o644)

    def refused_logged() -> bool:
        server.request("GET", "/v1/brains/b1/counts", ALICE)  # a request is what makes the server look
        return "reload refused" in server.stderr()

    assert wait_until(refused_logged, timeout=5.0, step=0.05) is not None, server.stderr()
    assert re.search(r"reload refused.*chmod 600", server.stderr())
    assert server.request("GET", "/v1/brains/b1/counts", newcomer)[0] == 401
    assert server.request("GET", "/v1/brains/b1/counts", ALICE)[0] == 200


def test_first_start_mints_one_key_once(tmp_path: Path, stores: dict[str, Path], launch: Callable[..., Served]) -> None:
    """With no keys file, the first start mints exactly one key, writes it at mode 0600 (in a directory
    only the owner may enter), prints it once on stdout and never on stderr, and that key works."""
    keys = tmp_path / "fresh" / "cfg" / "keys"
    server = launch("serve", "--listen", f"{HOST}:0", "--brain", f"b1={stores['b1']}", "--keys", str(keys))
    table = parse_keys(keys.read_bytes())
    assert len(table) == 1
    ((key, principal),) = table.items()
    assert principal.id == "person:local" and principal.brains is None and not principal.service_key
    assert stat.S_IMODE(keys.stat().st_mode) == 0o600
    assert stat.S_IMODE(keys.parent.stat().st_mode) == 0o700
    assert server.stdout().count(key) == 1, server.stdout()
    assert key not in server.stderr()
    status, doc, _, _ = server.request("GET", "/v1/brains/b1/counts", key)
    assert status == 200 and doc["brain"] == "b1", doc
    assert server.stop() == 0
    # a second start finds the file and mints nothing
    again = launch("serve", "--listen", f"{HOST}:0", "--brain", f"b1={stores['b1']}", "--keys", str(keys))
    assert parse_keys(keys.read_bytes()) == table
    assert "minted" not in again.stdout() and key not in again.stdout()
