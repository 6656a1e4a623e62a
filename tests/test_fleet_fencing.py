"""Fencing with real processes on loopback (docs/fleet.md "Fencing"): ``brainy serve`` nodes with
``--object-store``, one etcd, one moto server.

- An owner that cannot renew its lease (etcd stopped with SIGSTOP) stops acknowledging writes before the lease
  can expire: they are refused ``BrainMovedError``; once etcd answers again it claims its brain back and writes.
- A restarted old owner never serves its stale copy as the writer: when it claims the brain again (no live node
  owns it), it restores the shipped history and sets its own copy aside."""

import json
import signal
import time

import pytest
from etcd import start_etcd
from fleet import TTL, call, health, start_node, wait_until, write_fleet_keys
from objectstore import start_moto
from server import SERVICE_KEY

pytestmark = pytest.mark.slow

BRAIN = "fenced"
EXTRA = ("--object-store", "s3://brainy-fencing/t", "--ship", "sync")


def add(node, id_):
    body = json.dumps({"type": "thing", "id": id_}).encode()
    try:
        return call(node, "POST", f"/v1/brains/{BRAIN}/add", body)
    except AssertionError:  # curl could not reach the node
        return None


def present(node, id_):
    try:
        return call(node, "GET", f"/v1/brains/{BRAIN}/get/{id_}").status == 200
    except AssertionError:
        return False


@pytest.fixture
def cluster(tmp_path, monkeypatch):
    with start_moto() as moto, start_etcd(tmp_path / "etcd") as etcd:
        for name, value in moto.env.items():
            monkeypatch.setenv(name, value)
        yield etcd


def test_an_owner_that_cannot_renew_stops_acknowledging_before_its_lease_can_expire(tmp_path, cluster):
    """etcd stopped: within the TTL the owner refuses writes BrainMovedError (its safe time ended a margin before
    the lease could); etcd resumed: it acknowledges writes again, and what it acknowledged before is there."""
    keys = write_fleet_keys(tmp_path / "keys")
    node = start_node(tmp_path, "a", cluster.url, keys, TTL, EXTRA)
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
        node.proc.terminate()
        node.proc.wait(timeout=15)


def test_a_restarted_old_owner_restores_the_shipped_history_and_sets_its_copy_aside(tmp_path, cluster):
    """a owns the brain and is killed; b takes it over (epoch 2) and writes x2; b is killed; a restarts with its
    copy that lacks x2, claims the brain at epoch 3 and serves the shipped history (x1 and x2), its own copy set
    aside as .stale-<brain>-e3."""
    keys = write_fleet_keys(tmp_path / "keys")
    a = start_node(tmp_path, "a", cluster.url, keys, TTL, EXTRA)
    b = start_node(tmp_path, "b", cluster.url, keys, TTL, EXTRA)
    try:
        assert call(a, "POST", f"/v1/brains/{BRAIN}/provision", b"{}", key=SERVICE_KEY).result()["node"] == "a"
        assert add(a, "x1").status == 200
        a.kill()
        wait_until(lambda: present(b, "x1"), TTL + 5, "b serves the brain")
        assert add(b, "x2").status == 200  # a's copy never saw this write
        b.kill()
        a = start_node(tmp_path, "a", cluster.url, keys, TTL, EXTRA)  # its copy is stale: x2 is not in it
        wait_until(lambda: BRAIN in health(a)["fleet"]["brains"], TTL + 8, "a claims the brain again")
        assert health(a)["fleet"]["brains"][BRAIN] == 3
        assert present(a, "x1") and present(a, "x2")
        assert (a.brains_dir / f".stale-{BRAIN}-e3").is_dir()  # set aside, not deleted, not served
        assert add(a, "x3").status == 200
    finally:
        for node in (a, b):
            if node.proc.poll() is None:
                node.proc.terminate()
                node.proc.wait(timeout=15)
