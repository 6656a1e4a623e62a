"""A fleet of real ``brainy serve`` nodes on loopback against one real etcd (docs/fleet.md): registration,
placement of provisioned brains, any node answering any brain over HTTP/1.1 and HTTP/2 with ``brainy-node``
naming the owner, the health block, refusals by the contract's names, and a killed node's registration gone
after its TTL."""

import json
import shutil
import socket
import subprocess
import sys

import pytest
from etcd import start_etcd
from fleet import TTL, call, health, start_fleet, wait_until
from server import HOST, PERSON_KEY, SERVICE_KEY

from brainy.engine import init_store
from brainy.fleet import layout as L

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def fleet3(tmp_path_factory):
    """Three nodes, a, b and c, of one fleet on one etcd, for the tests that leave them all running."""
    root = tmp_path_factory.mktemp("fleet3")
    with start_etcd(root / "etcd") as etcd, start_fleet(root, etcd.url, ("a", "b", "c")) as nodes:
        yield {node.name: node for node in nodes}


def provision(node, brain):
    answer = call(node, "POST", f"/v1/brains/{brain}/provision", b"{}", key=SERVICE_KEY)
    assert answer.status == 200, answer
    return answer.result()


@pytest.fixture(scope="module")
def placed(fleet3):
    """Three brains provisioned through node a: placement puts one on each node."""
    return {brain: provision(fleet3["a"], brain)["node"] for brain in ("p0", "p1", "p2")}


def test_every_node_registers_and_health_lists_them(fleet3):
    """Each node's health answer (service key) has a fleet block naming itself and every live node with its URL."""
    every = [(n, fleet3[n].url) for n in ("a", "b", "c")]
    for name, node in fleet3.items():
        assert health(node)["fleet"]["node"] == name

        def listed(node=node):
            return [(n["node"], n["url"]) for n in health(node)["fleet"]["nodes"]] == every

        wait_until(listed, 5, f"node {name}'s view lists every node")  # a view is read again every second


def test_provision_places_one_brain_on_each_node(fleet3, placed):
    """host.provision sent to one node places each new brain on the node with the fewest brains: three brains,
    three nodes, one each; the answer names the node; each owner's health lists its brain at epoch 1."""
    assert sorted(placed.values()) == ["a", "b", "c"]
    for brain, name in placed.items():
        assert health(fleet3[name])["fleet"]["brains"] == {brain: 1}
        assert [n for n, node in fleet3.items() if (node.brains_dir / brain).is_dir()] == [name]

    def counted():
        return {n["node"]: n["brains"] for n in health(fleet3["a"])["fleet"]["nodes"]} == {"a": 1, "b": 1, "c": 1}

    wait_until(counted, 5, "node a's view counts one brain on each node")


def test_a_name_placed_once_is_taken_fleet_wide(fleet3, placed):
    """Provisioning a name the fleet has placed, through any node, is BrainExistsError."""
    for node in fleet3.values():
        answer = call(node, "POST", "/v1/brains/p0/provision", b"{}", key=SERVICE_KEY)
        assert (answer.status, answer.refusal) == (409, "BrainExistsError"), answer


@pytest.mark.parametrize("http2", [False, True], ids=["h1", "h2"])
def test_any_node_answers_any_brain(fleet3, placed, http2):
    """An add and a get sent to nodes that do not own the brain are answered by its owner, and every such answer
    carries ``brainy-node: <owner>``; the owner answering directly adds no such field."""
    brain = f"p{1 if http2 else 0}"
    owner = placed[brain]
    others = [name for name in fleet3 if name != owner]
    added = call(
        fleet3[others[0]],
        "POST",
        f"/v1/brains/{brain}/add",
        json.dumps({"type": "person", "id": "ada", "metadata": {"via": others[0]}}).encode(),
        http2=http2,
    )
    assert added.status == 200, added
    assert added.headers.get("brainy-node") == owner
    got = call(fleet3[others[1]], "GET", f"/v1/brains/{brain}/get/ada", http2=http2)
    assert got.status == 200 and got.headers.get("brainy-node") == owner
    assert got.result()["entity"]["metadata"] == {"via": others[0]}
    direct = call(fleet3[owner], "GET", f"/v1/brains/{brain}/get/ada", http2=http2)
    assert direct.status == 200 and "brainy-node" not in direct.headers
    assert direct.result()["entity"]["id"] == got.result()["entity"]["id"]


def test_the_brain_list_is_the_fleets_at_any_node(fleet3, placed):
    """``GET /v1/brains`` at any node lists every placed brain once, each naming the node that serves it, whatever
    the brains folder of the node asked holds: a copy of a brain another node owns is never listed as its."""
    owner = placed["p0"]
    elsewhere = next(name for name in fleet3 if name != owner)
    init_store(fleet3[elsewhere].brains_dir / "p0")  # a stale copy, as a node restarted after a failover keeps
    try:
        for name, node in fleet3.items():
            answer = call(node, "GET", "/v1/brains", key=SERVICE_KEY)
            assert answer.status == 200, answer
            listed = {entry["name"]: entry for entry in answer.doc["brains"]}
            assert {b: e["node"] for b, e in listed.items() if b in placed} == placed, name
            assert len(answer.doc["brains"]) == len(listed)
            assert all(entry["archived"] is False for entry in listed.values())
        # every other node's own list was read, none filled in from the view alone (which says so in the log)
        assert not [name for name, node in fleet3.items() if "did not answer" in node.log()]
        # asked as another node asks (forwarded), a node lists only what it serves
        forwarded = call(fleet3[elsewhere], "GET", "/v1/brains", key=SERVICE_KEY, headers=(("brainy-forwarded", "x"),))
        assert [e["node"] for e in forwarded.doc["brains"]] == [elsewhere] * len(forwarded.doc["brains"])
        assert "p0" not in {e["name"] for e in forwarded.doc["brains"]}
    finally:
        shutil.rmtree(fleet3[elsewhere].brains_dir / "p0")


def test_a_head_request_is_answered_through_the_edge(fleet3, placed):
    """HEAD on a brain owned elsewhere is answered by the owner, without a body, as a HEAD answered here is."""
    owner = placed["p0"]
    edge = next(node for name, node in fleet3.items() if name != owner)
    answer = call(edge, "HEAD", "/v1/brains/p0/counts")
    assert answer.status == 200 and answer.headers.get("brainy-node") == owner and answer.body == b""


def test_pipelined_requests_through_the_edge_are_answered_in_order(fleet3, placed):
    """Requests sent back to back on one connection to a node that does not own their brain, a HEAD and a refused
    one among them, are each forwarded and answered in the order they came, each naming the owner; a request for
    a brain the node owns, queued behind them, is answered by the node itself."""
    owner = placed["p2"]
    edge_name = next(name for name in fleet3 if name != owner)
    edge = fleet3[edge_name]
    mine = next(brain for brain, node in placed.items() if node == edge_name)
    ids = []
    for brain, id_ in (("p2", "pipe"), (mine, "local")):
        added = call(edge, "POST", f"/v1/brains/{brain}/add", json.dumps({"type": "thing", "id": id_}).encode())
        assert added.status == 200, added
        ids.append(added.result()["id"])
    asked = [
        ("GET", "/v1/brains/p2/get/pipe", b""),
        ("POST", "/v1/brains/p2/find", b'{"limit": -1}'),
        ("HEAD", "/v1/brains/p2/counts", b""),
        ("GET", "/v1/brains/p2/get/pipe", b""),
        ("GET", f"/v1/brains/{mine}/get/local", b""),
    ]
    data = b"".join(
        f"{method} {target} HTTP/1.1\r\nhost: t\r\nauthorization: Bearer {PERSON_KEY}\r\n".encode()
        + (b"content-type: application/json\r\ncontent-length: %d\r\n" % len(body) if body else b"")
        + b"\r\n"
        + body
        for method, target, body in asked
    )
    with socket.create_connection((HOST, edge.port), timeout=30) as sock:
        sock.sendall(data)  # one write: the node reads them all at once, and queues the ones behind a forward
        stream = sock.makefile("rb")
        answers = []
        for method, _, _ in asked:
            status = int(stream.readline().split()[1])
            headers = {}
            while (line := stream.readline()) != b"\r\n":
                name, _, value = line.decode().partition(":")
                headers[name.strip().lower()] = value.strip()
            length = int(headers.get("content-length", 0))
            answers.append((status, headers.get("brainy-node"), stream.read(length) if method != "HEAD" else b""))
    assert [(status, node) for status, node, _ in answers] == [
        (200, owner),
        (400, owner),
        (200, owner),
        (200, owner),
        (200, None),
    ]
    assert json.loads(answers[0][2])["entity"]["id"] == json.loads(answers[3][2])["entity"]["id"] == ids[0]
    assert json.loads(answers[1][2])["error"]["name"] == "InvalidArgumentError"
    assert json.loads(answers[4][2])["entity"]["id"] == ids[1]


def _read_answer(stream, head: bool = False) -> tuple[int, list[tuple[str, str]], bytes]:
    status = int(stream.readline().split()[1])
    fields = []
    while (line := stream.readline()) != b"\r\n":
        name, _, value = line.decode().partition(":")
        fields.append((name.strip().lower(), value.strip()))
    length = int(dict(fields).get("content-length", 0))
    return status, fields, stream.read(length) if not head else b""


def test_requests_one_after_another_are_passed_on_as_the_owner_answered_them(fleet3, placed):
    """On one kept-alive connection to a node that does not own the brain, each request after the first goes to the
    owner on a kept connection and its answer comes back as the owner framed it (Edge.splice: its fields in its
    order, ``brainy-node`` after them), the connection kept: a write, a get, a refused find, a HEAD (framed by
    the edge: a HEAD's answer has no body to pass on), a get again."""
    owner = placed["p1"]
    edge = next(node for name, node in fleet3.items() if name != owner)
    asked = [
        ("GET", "/v1/brains/p1/counts", b""),  # the first: the owner's connection is made for it
        ("POST", "/v1/brains/p1/add", json.dumps({"type": "thing", "id": "spliced"}).encode()),
        ("GET", "/v1/brains/p1/get/spliced", b""),
        ("POST", "/v1/brains/p1/find", b'{"limit": -1}'),
        ("HEAD", "/v1/brains/p1/get/spliced", b""),
        ("GET", "/v1/brains/p1/get/spliced", b""),
    ]
    answers = []
    with socket.create_connection((HOST, edge.port), timeout=30) as sock:
        stream = sock.makefile("rb")
        for method, target, body in asked:
            sock.sendall(
                f"{method} {target} HTTP/1.1\r\nhost: t\r\nauthorization: Bearer {PERSON_KEY}\r\n".encode()
                + (b"content-type: application/json\r\ncontent-length: %d\r\n" % len(body) if body else b"")
                + b"\r\n"
                + body
            )
            answers.append(_read_answer(stream, method == "HEAD"))
    assert [status for status, _, _ in answers] == [200, 200, 200, 400, 200, 200]
    for _, fields, _ in answers:
        assert [value for name, value in fields if name == "brainy-node"] == [owner]
        assert "connection" not in dict(fields)  # kept alive: the next request came on it
    for _, fields, _ in answers[1:4] + answers[5:]:  # passed on as it came: the owner's fields, the node last
        names = [name for name, _ in fields]
        assert names.index("content-length") < names.index("brainy-node") == len(names) - 1
    added = json.loads(answers[1][2])["id"]
    assert json.loads(answers[2][2])["entity"]["id"] == json.loads(answers[5][2])["entity"]["id"] == added
    assert json.loads(answers[3][2])["error"]["name"] == "InvalidArgumentError"


def test_the_key_is_checked_at_the_edge(fleet3, placed):
    """A request with a key nobody holds is refused by the node it reached, never forwarded."""
    owner = placed["p0"]
    edge = next(node for name, node in fleet3.items() if name != owner)
    answer = call(edge, "GET", "/v1/brains/p0/get/ada", key="bky_nobody_holds_this_key_0123456789")
    assert (answer.status, answer.refusal) == (401, "UnauthenticatedError")
    assert "brainy-node" not in answer.headers


def test_host_move_names_a_live_node(fleet3, placed):
    """With --fleet, host.move to a node the fleet has no live node of is NodeUnknownError; to the owner itself it
    answers no change (from equals node); to another live node of a fleet without --object-store it is
    FleetNotConfiguredError (nothing off the machine to restore from). The hand-over: tests/test_fleet_move.py."""
    unknown = call(fleet3["a"], "POST", "/v1/brains/p0/move", b'{"node": "zz"}', key=SERVICE_KEY)
    assert (unknown.status, unknown.refusal) == (404, "NodeUnknownError") and unknown.doc["error"]["node"] == "zz"
    owner = placed["p0"]
    same = call(fleet3["a"], "POST", "/v1/brains/p0/move", json.dumps({"node": owner}).encode(), key=SERVICE_KEY)
    assert same.status == 200, same
    answer = same.result()
    assert {k: v for k, v in answer.items() if k != "generation"} == {
        "brain": "p0",
        "from": owner,
        "node": owner,
        "epoch": 1,
    }
    assert isinstance(answer["generation"], int) and answer["generation"] >= 0
    other = next(n for n in ("a", "b", "c") if n != owner)
    live = call(fleet3["a"], "POST", "/v1/brains/p0/move", json.dumps({"node": other}).encode(), key=SERVICE_KEY)
    assert (live.status, live.refusal) == (503, "FleetNotConfiguredError")


def test_a_killed_nodes_registration_vanishes_after_its_ttl(tmp_path, etcd):
    """kill -9 a node: its lease is renewed no more, and within the TTL (plus a renewal and a view refresh) its
    registration and its brains' owner keys are gone from etcd and from the other node's health; the brain's
    epoch stays."""
    import asyncio

    from brainy.fleet.etcd import Etcd

    with start_fleet(tmp_path, etcd.url, ("a", "b")) as (a, b):
        provision(b, "kept")
        owner = next(node for node in (a, b) if "kept" in health(node)["fleet"]["brains"])
        survivor = a if owner is b else b

        def both():
            return [n["node"] for n in health(survivor)["fleet"]["nodes"]] == ["a", "b"]

        wait_until(both, 5, "the survivor's view lists both nodes")
        owner.kill()

        def gone():
            return [n["node"] for n in health(survivor)["fleet"]["nodes"]] == [survivor.name]

        wait_until(gone, TTL + 4, f"node {owner.name}'s registration expired")

        async def keys():
            client = Etcd([etcd.url])
            try:
                return (
                    await client.get(L.node_key(owner.name)),
                    await client.get(L.owner_key("kept")),
                    await client.get(L.epoch_key("kept")),
                )
            finally:
                client.close()

        node_key, owner_key, epoch_key = asyncio.run(keys())
        assert node_key is None and owner_key is None and epoch_key.value == b"1"


def test_without_fleet_nothing_of_it_shows(server):
    """A server started without --fleet has no fleet block in its health, and host.move refuses
    FleetNotConfiguredError."""
    doc = call(server, "GET", "/v1/health", key=server.service_key).doc
    assert "fleet" not in doc
    moved = call(server, "POST", server.path("move"), b'{"node": "b"}', key=server.service_key)
    assert (moved.status, moved.refusal) == (503, "FleetNotConfiguredError")


@pytest.mark.parametrize(
    "flags, says",
    [
        (["--node", "a"], "--node is a fleet's flag"),
        (["--fleet", "http://127.0.0.1:1"], "needs --node NAME and --advertise URL"),
        (["--fleet", "http://127.0.0.1:1", "--node", "a", "--advertise", "h3://x"], "advertised as http"),
        (
            ["--fleet", "http://127.0.0.1:1", "--node", "a", "--advertise", "http://127.0.0.1:2", "--fleet-ttl", "1"],
            "at least 2",
        ),
        (
            ["--fleet", "http://127.0.0.1:1", "--node", "a", "--advertise", "http://127.0.0.1:2"]
            + ["--move-stage-seconds", "0"],
            "--move-stage-seconds 0.0: more than 0",
        ),
        (
            ["--fleet", "http://127.0.0.1:1", "--node", "a", "--advertise", "http://127.0.0.1:2"],
            "no etcd endpoint answered",
        ),
    ],
)
def test_a_fleet_flag_missing_or_wrong_refuses_the_start(tmp_path, flags, says):
    """The fleet's flags are checked at the start, and an etcd that does not answer refuses it: exit 2, saying why."""
    (tmp_path / "brains").mkdir()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "brainy.cli",
            "serve",
            "--brains-dir",
            str(tmp_path / "brains"),
            "--keys",
            str(tmp_path / "keys"),
            "--listen",
            "127.0.0.1:0",
            *flags,
        ],
        capture_output=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 2, done
    assert says in done.stderr.decode(), done.stderr.decode()[-2000:]
