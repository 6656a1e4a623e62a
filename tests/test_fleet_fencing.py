"""Fencing with real processes on loopback (docs/fleet.md "Fencing"): ``brainy serve`` nodes with
``--object-store``, one etcd, one moto server.

- An owner that cannot renew its lease (etcd stopped with SIGSTOP) stops acknowledging writes before the lease
  can expire: they are refused ``BrainMovedError``; once etcd answers again it claims its brain back and writes.
- A restarted old owner never serves its stale copy as the writer: when it claims the brain again (no live node
  owns it), it restores the shipped history and sets its own copy aside."""

import json
import signal
import subprocess
import time
from types import SimpleNamespace

import pytest
from etcd import start_etcd
from fleet import TTL, call, health, start_node, stop_nodes, wait_until, write_fleet_keys
from objectstore import start_moto
from server import PERSON_KEY, SERVICE_KEY, curl

pytestmark = pytest.mark.slow

BRAIN = "fenced"


def add(node, id_):
    body = json.dumps({"type": "thing", "id": id_}).encode()
    try:
        return call(node, "POST", f"/v1/brains/{BRAIN}/add", body)
    except AssertionError:  # curl could not reach the node
        return None


def present(node, id_, seconds=2.0):
    """Whether ``node`` answers the entity, asked with a short timeout: a request forwarded to a paused owner
    gets no answer, and a poll must not wait out the forward's own timeout."""
    fields = (("authorization", f"Bearer {PERSON_KEY}"),)
    try:
        return curl(node, "GET", f"/v1/brains/{BRAIN}/get/{id_}", headers=fields, timeout=seconds).status == 200
    except (AssertionError, subprocess.TimeoutExpired):
        return False


@pytest.fixture
def cluster(tmp_path, monkeypatch):
    """etcd, moto, and the environment a node's --object-store reads (each node inherits it). moto's objects
    live as long as the test process: each test's fleet has a prefix of its own, as each fleet must."""
    extra = ("--object-store", f"s3://brainy-fencing/{tmp_path.name}", "--ship", "sync")
    with start_moto() as moto, start_etcd(tmp_path / "etcd") as etcd:
        for name, value in moto.env.items():
            monkeypatch.setenv(name, value)
        yield SimpleNamespace(url=etcd.url, proc=etcd.proc, extra=extra)


def test_an_owner_that_cannot_renew_stops_acknowledging_before_its_lease_can_expire(tmp_path, cluster):
    """etcd stopped: within the TTL the owner refuses writes BrainMovedError (its safe time ended a margin before
    the lease could); etcd resumed: it acknowledges writes again, and what it acknowledged before is there."""
    keys = write_fleet_keys(tmp_path / "keys")
    node = start_node(tmp_path, "a", cluster.url, keys, TTL, cluster.extra)
    try:
        assert call(node, "POST", f"/v1/brains/{BRAIN}/provision", b"{}", key=SERVICE_KEY).status == 200
        assert add(node, "before").status == 200
        cluster.proc.send_signal(signal.SIGSTOP)  # etcd answers nothing: no renewal can land
        stopped = time.monotonic()
        try:
            refused = None
            for i in range(200):  # bounded: each write is quick, and the lease ends within TTL
                answer = add(node, f"during-{i}")
                if answer is not None and answer.status == 409:
                    refused = time.monotonic() - stopped
                    assert answer.doc["error"]["name"] == "BrainMovedError", answer.doc
                    break
                time.sleep(0.05)
            assert refused is not None and refused < TTL, f"still acknowledging {refused} s after etcd stopped"
        finally:
            cluster.proc.send_signal(signal.SIGCONT)
        # etcd back: the lease renewed (etcd's clock stopped with it), or expired and the node joined again and
        # claimed its brain back at its own epoch: either way it writes once more, nothing lost
        wait_until(lambda: (a := add(node, "after")) is not None and a.status == 200, 20, "writes acknowledged again")
        assert present(node, "before") and present(node, "after")
        assert health(node)["fleet"]["brains"][BRAIN] in (1, 2)
    finally:
        stop_nodes(node)


def test_a_restarted_old_owner_restores_the_shipped_history_and_sets_its_copy_aside(tmp_path, cluster):
    """a owns the brain and is killed; b takes it over (epoch 2) and writes x2; b is killed; a restarts with its
    copy that lacks x2, claims the brain at epoch 3 and serves the shipped history (x1 and x2), its own copy set
    aside as .stale-<brain>-e3."""
    keys = write_fleet_keys(tmp_path / "keys")
    a = start_node(tmp_path, "a", cluster.url, keys, TTL, cluster.extra)
    b = None
    try:
        # b joins once the brain is placed: placement would weigh free memory, a tie on brains
        assert call(a, "POST", f"/v1/brains/{BRAIN}/provision", b"{}", key=SERVICE_KEY).result()["node"] == "a"
        b = start_node(tmp_path, "b", cluster.url, keys, TTL, cluster.extra)
        assert add(a, "x1").status == 200
        a.kill()
        wait_until(lambda: present(b, "x1"), TTL + 5, "b serves the brain")
        assert add(b, "x2").status == 200  # a's copy never saw this write
        b.kill()
        a = start_node(tmp_path, "a", cluster.url, keys, TTL, cluster.extra)  # its copy is stale: x2 is not in it
        wait_until(lambda: BRAIN in health(a)["fleet"]["brains"], TTL + 8, "a claims the brain again")
        assert health(a)["fleet"]["brains"][BRAIN] == 3
        assert present(a, "x1") and present(a, "x2")
        assert (a.brains_dir / f".stale-{BRAIN}-e3").is_dir()  # set aside, not deleted, not served
        assert add(a, "x3").status == 200
    finally:
        stop_nodes(a, b)


def test_an_owner_paused_past_its_lease_claims_its_brain_back_and_its_history_stays_whole(tmp_path, cluster):
    """a alone owns the brain and is paused (SIGSTOP) past its TTL: etcd drops its lease. Resumed, it joins
    again and claims the brain back at epoch 2 with its open copy, shipping on from where epoch 1 stopped. Then b
    joins, a is killed, and b restores every write of both epochs."""
    keys = write_fleet_keys(tmp_path / "keys")
    a = start_node(tmp_path, "a", cluster.url, keys, TTL, cluster.extra)
    b = None
    try:
        assert call(a, "POST", f"/v1/brains/{BRAIN}/provision", b"{}", key=SERVICE_KEY).status == 200
        assert add(a, "one").status == 200
        a.proc.send_signal(signal.SIGSTOP)
        time.sleep(TTL + 2)
        a.proc.send_signal(signal.SIGCONT)
        wait_until(lambda: health(a)["fleet"]["brains"].get(BRAIN) == 2, 15, "a claims its brain back at epoch 2")
        assert add(a, "two").status == 200
        b = start_node(tmp_path, "b", cluster.url, keys, TTL, cluster.extra)
        a.kill()
        wait_until(lambda: present(b, "two"), TTL + 5, "b serves the brain")
        assert present(b, "one")
        assert health(b)["fleet"]["brains"][BRAIN] == 3
    finally:
        stop_nodes(a, b)


def test_a_partitioned_owner_is_fenced_and_loses_nothing_it_acknowledged(tmp_path, cluster):
    """a owns the brain and is paused (a partition: it hears nothing, renews nothing); b takes it over at epoch 2.
    Resumed, a acknowledges nothing as the writer: a write sent to it is answered by b, and every write a
    acknowledged before is at b. Then b is killed: a takes the brain over at epoch 3 from what was shipped."""
    keys = write_fleet_keys(tmp_path / "keys")
    a = start_node(tmp_path, "a", cluster.url, keys, TTL, cluster.extra)
    b = None
    try:
        # b joins once the brain is placed: placement would weigh free memory, a tie on brains
        assert call(a, "POST", f"/v1/brains/{BRAIN}/provision", b"{}", key=SERVICE_KEY).result()["node"] == "a"
        b = start_node(tmp_path, "b", cluster.url, keys, TTL, cluster.extra)
        acknowledged = [f"p{i}" for i in range(10) if add(a, f"p{i}").status == 200]
        a.proc.send_signal(signal.SIGSTOP)
        wait_until(lambda: present(b, acknowledged[-1]), TTL + 5, "b serves the brain")
        a.proc.send_signal(signal.SIGCONT)
        answer = None
        for _ in range(50):  # bounded: a's edge learns of b within a view refresh or on b's refusal
            answer = add(a, "after-partition")
            if answer is not None and answer.status == 200:
                break
            time.sleep(0.2)
        assert answer is not None and answer.status == 200 and answer.headers.get("brainy-node") == "b", answer
        wait_until(lambda: BRAIN not in health(a)["fleet"]["brains"], 10, "a let its claim go")
        assert all(present(b, id_) for id_ in acknowledged)
        assert health(b)["fleet"]["brains"][BRAIN] == 2
        # b killed: a takes the brain over again (epoch 3) from the shipped history, its own copy set aside
        b.kill()
        wait_until(lambda: present(a, "after-partition"), TTL + 5, "a serves the brain again")
        assert all(present(a, id_) for id_ in acknowledged)
        assert health(a)["fleet"]["brains"][BRAIN] == 3
        assert add(a, "back-at-a").status == 200
    finally:
        stop_nodes(a, b)
