"""HTTP/3 enters the same edge as HTTP/1.1 and HTTP/2 (brainy/net/edge.py): a request over h3 to a node that does
not own the brain is answered by the owner, with ``brainy-node`` naming it (docs/fleet.md)."""

from __future__ import annotations

import asyncio
import json

import pytest
from aioquic.asyncio.client import connect
from etcd import start_etcd
from fleet import call, health, start_node, wait_until, write_fleet_keys
from server import HOST, PERSON_KEY, SERVICE_KEY, _stop
from test_serve_h3 import H3Client, _free_udp_port, client_configuration, make_pki

pytestmark = pytest.mark.slow


def test_h3_is_forwarded_to_the_owner(tmp_path):
    """A brain placed on node b is read over h3 through node a: the owner's answer, ``brainy-node: b``."""
    pki = make_pki(tmp_path / "pki")
    udp = _free_udp_port()
    keys = write_fleet_keys(tmp_path / "keys")
    with start_etcd(tmp_path / "etcd") as etcd:
        h3 = ("--listen", f"{HOST}:{udp},h3", "--tls-cert", str(pki.cert), "--tls-key", str(pki.key))
        a = start_node(tmp_path, "a", etcd.url, keys, extra=h3)
        b = start_node(tmp_path, "b", etcd.url, keys)
        try:
            wait_until(lambda: len(health(a)["fleet"]["nodes"]) == 2, 5, "node a sees node b")
            on_b = None
            for n in range(2):  # placement alternates between the two empty nodes: one of two lands on b
                placed = call(a, "POST", f"/v1/brains/h{n}/provision", b"{}", key=SERVICE_KEY).doc
                if placed["node"] == "b":
                    on_b = placed["brain"]
                    break
            assert on_b is not None, "no brain was placed on node b"
            added = call(b, "POST", f"/v1/brains/{on_b}/add", json.dumps({"type": "person", "id": "ada"}).encode())
            assert added.status == 200, added

            async def main():
                configuration = client_configuration(pki, ["h3"])
                async with connect(HOST, udp, configuration=configuration, create_protocol=H3Client) as client:
                    return await client.request("GET", f"/v1/brains/{on_b}/get/ada", PERSON_KEY)

            got = asyncio.run(asyncio.wait_for(main(), 30))
            assert got.status == 200 and got.headers.get("brainy-node") == "b"
            assert got.doc["entity"]["key"] == "ada"
        finally:
            _stop(a.proc)
            _stop(b.proc)
