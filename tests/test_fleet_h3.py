"""HTTP/3 enters the same edge as HTTP/1.1 and HTTP/2 (brainy/net/edge.py): a request over h3 to a node that does
not own the brain is answered by the owner, with ``brainy-node`` naming it (docs/fleet.md)."""

from __future__ import annotations

import asyncio

import pytest
from aioquic.asyncio.client import connect
from etcd import start_etcd
from fleet import place_on, start_node, write_fleet_keys
from server import HOST, PERSON_KEY, _stop
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
            on_b = place_on(a, b, "h", 2)

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
