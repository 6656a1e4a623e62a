"""``host.archive`` and ``host.unarchive`` fleet-wide, with real processes on loopback (docs/fleet.md "Archived brains
in a fleet"): three ``brainy serve`` nodes with ``--object-store`` and ``--ship sync``, one etcd, one moto server.
Sent to a node that does not own the brain, each acts on the owner; an archived brain whose owner is SIGKILLed is
claimed by no node (the archive lives in etcd, beside the owner keys); unarchived through a survivor, it is claimed
there, restored from the object store, and serves every row it had."""

import json
import time

import pytest
from fleet import TTL, call, health, shipping_nodes, wait_until
from server import SERVICE_KEY

pytestmark = pytest.mark.slow

BRAIN = "ar"


@pytest.fixture
def nodes(tmp_path, cluster):
    with shipping_nodes(tmp_path, cluster.url, "brainy-archive") as started:
        yield started


def door(node, name):
    return call(node, "POST", f"/v1/brains/{BRAIN}/{name}", b"{}", key=SERVICE_KEY)


def get(node, id_):
    return call(node, "GET", f"/v1/brains/{BRAIN}/get/{id_}")


def owners(nodes):
    return {name: BRAIN in health(node)["fleet"]["brains"] for name, node in nodes.items() if node.proc.poll() is None}


def test_archive_and_unarchive_act_on_the_owner_and_survive_its_death(nodes):
    provisioned = call(nodes["a"], "POST", f"/v1/brains/{BRAIN}/provision", b"{}", key=SERVICE_KEY)
    assert provisioned.status == 200, provisioned
    owner = provisioned.result()["node"]
    others = [name for name in ("a", "b", "c") if name != owner]
    for i in range(20):
        body = json.dumps({"type": "thing", "id": f"r{i}", "metadata": {"i": i}}).encode()
        assert call(nodes[others[i % 2]], "POST", f"/v1/brains/{BRAIN}/add", body).status == 200

    # sent to a node that does not own it: the owner archives it, and every node answers it archived
    archived = door(nodes[others[0]], "archive")
    assert archived.status == 200 and archived.result()["archived"] is True, archived
    for node in nodes.values():
        answer = get(node, "r1")
        assert answer.refusal == "BrainArchivedError", (node.name, answer)
    again = door(nodes[others[1]], "archive")  # already archived: the same archivedAt, no change
    assert again.status == 200 and again.result()["archivedAt"] == archived.result()["archivedAt"], again

    # unarchived through a non-owner: served again, by the same owner
    back = door(nodes[others[1]], "unarchive")
    assert back.status == 200 and back.result() == {"brain": BRAIN, "archived": False}, back
    answer = get(nodes[others[0]], "r1")
    assert answer.status == 200 and answer.headers.get("brainy-node") == owner, answer

    # archived, then its owner is killed: no survivor claims it, for longer than a failover takes
    assert door(nodes[others[0]], "archive").status == 200
    nodes[owner].kill()
    killed = time.monotonic()
    survivors = {name: nodes[name] for name in others}
    wait_until(lambda: BRAIN not in health(survivors[others[0]])["fleet"]["brains"], TTL + 5, "view updated")
    while time.monotonic() - killed < TTL + 5:  # a failover of an unarchived brain is served within TTL + 5 s
        assert owners(survivors) == {others[0]: False, others[1]: False}
        time.sleep(0.5)
    assert get(survivors[others[1]], "r1").refusal == "BrainArchivedError"  # answered by the node asked

    # unarchived through a survivor: claimed there (epoch 2), restored from the object store, every row served
    back = door(survivors[others[1]], "unarchive")
    assert back.status == 200 and back.result() == {"brain": BRAIN, "archived": False}, back
    assert health(survivors[others[1]])["fleet"]["brains"] == {BRAIN: 2}
    for i in range(20):
        answer = get(survivors[others[0]], f"r{i}")
        assert answer.status == 200 and answer.result()["entity"]["metadata"] == {"i": i}, answer
        assert answer.headers.get("brainy-node") == others[1]
