"""brainy's etcd client (``brainy/fleet/etcd.py``) against a real etcd 3.4: each call the fleet makes, the
transaction that compares and puts in one step, a lease's keys vanishing with it, and an endpoint that does
not answer passed over for the next."""

import asyncio

import pytest

from brainy.fleet import etcd as E
from brainy.fleet.http1 import Reader, request_bytes


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 30))


def test_prefix_end_is_the_prefix_with_its_last_byte_raised():
    """A range over a prefix ends at the prefix with its last byte below 0xff incremented (etcd's rule)."""
    assert E.prefix_end(b"brainy/nodes/") == b"brainy/nodes0"
    assert E.prefix_end(b"a\xff") == b"b"
    assert E.prefix_end(b"\xff\xff") == b"\0"


def test_a_chunked_answer_is_read_whole():
    """etcd answers a streaming call (a lease's keep-alive) chunked: the reader joins the chunks."""
    reader = Reader()
    reader.feed(b'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\n{"a\r\n')
    assert not reader.done
    reader.feed(b'3\r\n":1\r\n1\r\n}\r\n0\r\n\r\n')
    assert reader.done and reader.response.body == b'{"a":1}' and reader.response.keep


def test_a_request_carries_its_length():
    """Every request says its body's length, so a kept connection can carry the next one."""
    data = request_bytes("POST", "/v3/kv/put", "h:1", [("content-type", "application/json")], b"{}")
    assert data.startswith(b"POST /v3/kv/put HTTP/1.1\r\nhost: h:1\r\n") and b"content-length: 2\r\n\r\n{}" in data


@pytest.mark.slow
def test_put_get_prefix_delete(etcd):
    """A put is read back by get and by a prefix range (in key order); a delete removes it."""

    async def go():
        client = E.Etcd([etcd.url])
        try:
            await client.put(b"p/b", b"2")
            await client.put(b"p/a", b"1")
            await client.put(b"q", b"3")
            assert (await client.get(b"p/a")).value == b"1"
            assert [(kv.key, kv.value) for kv in await client.prefix(b"p/")] == [(b"p/a", b"1"), (b"p/b", b"2")]
            await client.delete(b"p/a")
            assert await client.get(b"p/a") is None
        finally:
            client.close()

    run(go())


@pytest.mark.slow
def test_txn_compares_then_puts_in_one_step(etcd):
    """A transaction whose compare holds runs its success branch; the same one again finds the key changed and
    runs its failure branch, reading the key as it now is."""

    async def go():
        client = E.Etcd([etcd.url])
        try:
            ok, _ = await client.txn([E.version_is(b"e", 0)], [E.put_op(b"e", b"1")], [E.range_op(b"e")])
            assert ok
            ok, read = await client.txn([E.version_is(b"e", 0)], [E.put_op(b"e", b"1")], [E.range_op(b"e")])
            assert not ok and read[0][0].value == b"1"
            ok, _ = await client.txn([E.value_is(b"e", b"1")], [E.put_op(b"e", b"2")])
            assert ok and (await client.get(b"e")).value == b"2"
        finally:
            client.close()

    run(go())


@pytest.mark.slow
def test_a_leases_keys_go_with_it(etcd):
    """A key put under a lease carries the lease; keep-alive renews it; revoked, its keys are gone and a
    keep-alive answers 0 seconds."""

    async def go():
        client = E.Etcd([etcd.url])
        try:
            lease = await client.grant(5)
            await client.put(b"held", b"x", lease)
            assert (await client.get(b"held")).lease == lease
            assert 0 < await client.keepalive(lease) <= 5
            await client.revoke(lease)
            assert await client.get(b"held") is None
            assert await client.keepalive(lease) == 0
        finally:
            client.close()

    run(go())


@pytest.mark.slow
def test_an_endpoint_that_does_not_answer_is_passed_over(etcd):
    """With a dead endpoint first, the call is answered by the next; with none alive it is EtcdUnavailableError."""
    from server import free_port

    dead = f"http://127.0.0.1:{free_port()}"

    async def go():
        client = E.Etcd([dead, etcd.url])
        try:
            await client.put(b"k", b"v")
            assert (await client.get(b"k")).value == b"v"
        finally:
            client.close()
        alone = E.Etcd([dead])
        try:
            with pytest.raises(E.EtcdUnavailableError):
                await alone.get(b"k")
        finally:
            alone.close()

    run(go())
