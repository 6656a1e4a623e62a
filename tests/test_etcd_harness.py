"""The fleet tests' etcd (``tests/etcd.py``): a real member on loopback that takes a write and reads it back
over its v3 JSON gateway, and is gone once the test is over."""

import base64
import json
import urllib.request

import pytest


def _post(url: str, path: str, doc: dict) -> dict:
    request = urllib.request.Request(f"{url}{path}", json.dumps(doc).encode(), {"content-type": "application/json"})
    with urllib.request.urlopen(request, timeout=5) as answer:
        return json.loads(answer.read())


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


@pytest.mark.slow
def test_etcd_member_takes_a_write_and_reads_it_back(etcd):
    """A put through the v3 gateway is read back whole by a range of the same key."""
    _post(etcd.url, "/v3/kv/put", {"key": _b64("k"), "value": _b64("v")})
    found = _post(etcd.url, "/v3/kv/range", {"key": _b64("k")})
    assert [base64.b64decode(kv["value"]) for kv in found["kvs"]] == [b"v"]


@pytest.mark.slow
def test_etcd_member_is_killed_at_teardown(tmp_path):
    """The harness kills its member on the way out: nothing is left listening."""
    from etcd import healthy, start_etcd

    with start_etcd(tmp_path / "etcd") as running:
        assert healthy(running.url)
    assert running.proc.poll() is not None
    assert not healthy(running.url)
