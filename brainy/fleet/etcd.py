"""etcd's v3 API, spoken through its JSON gateway over HTTP/1.1: the calls the fleet makes, and no others.

Why the gateway and not a gRPC client (measured by ``perf/bench_etcd.py``, figures in the commit that chose
it): against a local etcd 3.4 this client's put, transaction and lease keep-alive cost what aetcd's
(grpc.aio) do, within noise, and less than etcd3gw's (requests, blocking); it needs nothing beyond what
brainy already installs (httptools, orjson), runs on the server's own uvloop with no second event loop or
poller thread, and the gateway is part of etcd itself (v3.3 onwards under ``/v3/``), so nothing here tracks a
third party's generated stubs or protobuf's releases. etcd3 (kragniz) has had no release since 2020 and
fails to import against protobuf 4 and later.

The gateway's JSON is protobuf's: keys and values are base64, 64-bit integers travel as decimal strings, and
a field at its default (false, 0, an empty list) is left out of an answer. Each method here reads an answer
that way. An endpoint that does not answer is passed over for the next one given (``--fleet A,B,C``); when
none answers the call raises :class:`EtcdUnavailableError`.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import orjson

from brainy.fleet.http1 import Connections, PeerUnreachableError, request_bytes

CALL_SECONDS = 5.0  # one gateway call; a keep-alive must come back well inside a lease's TTL


class EtcdUnavailableError(Exception):
    """No endpoint of the fleet's etcd answered a call (or it answered with an error the fleet cannot read)."""


@dataclass(frozen=True, slots=True)
class KeyValue:
    """One key as a range reads it: its value, the lease it is held under (0: none), and its revisions."""

    key: bytes
    value: bytes
    lease: int
    version: int
    mod_revision: int


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _kv(doc: dict[str, Any]) -> KeyValue:
    return KeyValue(
        base64.b64decode(doc.get("key", "")),
        base64.b64decode(doc.get("value", "")),
        int(doc.get("lease", 0)),
        int(doc.get("version", 0)),
        int(doc.get("mod_revision", 0)),
    )


def prefix_end(prefix: bytes) -> bytes:
    """The ``range_end`` that makes a range read every key starting with ``prefix`` (etcd's rule: the prefix
    with its last byte below 0xff incremented)."""
    end = bytearray(prefix)
    while end and end[-1] == 0xFF:
        end.pop()
    if not end:
        return b"\0"  # every key
    end[-1] += 1
    return bytes(end)


# The compares and requests of a transaction (etcd's Compare and RequestOp, as the gateway's JSON).


def version_is(key: bytes, version: int) -> dict[str, Any]:
    """Compare: the key's version (0: absent) equals ``version``."""
    return {"key": b64(key), "target": "VERSION", "result": "EQUAL", "version": str(version)}


def value_is(key: bytes, value: bytes) -> dict[str, Any]:
    """Compare: the key holds exactly ``value``."""
    return {"key": b64(key), "target": "VALUE", "result": "EQUAL", "value": b64(value)}


def put_op(key: bytes, value: bytes, lease: int = 0) -> dict[str, Any]:
    body: dict[str, Any] = {"key": b64(key), "value": b64(value)}
    if lease:
        body["lease"] = str(lease)
    return {"request_put": body}


def delete_op(key: bytes) -> dict[str, Any]:
    return {"request_delete_range": {"key": b64(key)}}


def range_op(key: bytes) -> dict[str, Any]:
    return {"request_range": {"key": b64(key)}}


class Etcd:
    """A client of one etcd cluster, by its client URLs (``http://host:port``, tried in order)."""

    def __init__(self, urls: list[str], timeout: float = CALL_SECONDS) -> None:
        if not urls:
            raise ValueError("name at least one etcd endpoint")
        self.endpoints: list[tuple[str, int]] = []
        for url in urls:
            parts = urlsplit(url if "://" in url else f"http://{url}")
            if parts.scheme != "http" or not parts.hostname or parts.path not in ("", "/"):
                raise ValueError(f"{url!r}: an etcd client URL, http://HOST:PORT")
            self.endpoints.append((parts.hostname, parts.port or 2379))
        self._connections = Connections(timeout, resend=True)
        self._first = 0  # the endpoint that answered last: asked first next time

    async def call(self, path: str, document: dict[str, Any]) -> dict[str, Any]:
        """One gateway call (``/v3/kv/put`` …): its answer, from the first endpoint that gives one."""
        body = orjson.dumps(document)
        failures = []
        for turn in range(len(self.endpoints)):
            index = (self._first + turn) % len(self.endpoints)
            host, port = self.endpoints[index]
            data = request_bytes("POST", path, f"{host}:{port}", [("content-type", "application/json")], body)
            try:
                response = await self._connections.exchange((host, port), data)
            except PeerUnreachableError as exc:
                failures.append(str(exc))
                continue
            self._first = index
            try:
                answer = orjson.loads(response.body)
            except orjson.JSONDecodeError:
                raise EtcdUnavailableError(f"etcd answered {path} with no JSON (status {response.status})") from None
            if response.status != 200:
                raise EtcdUnavailableError(f"etcd refused {path}: {answer.get('message') or answer.get('error')}")
            if "result" in answer and isinstance(answer["result"], dict):  # a streaming call's one message
                return answer["result"]
            if "error" in answer:
                raise EtcdUnavailableError(f"etcd refused {path}: {answer['error'].get('message')}")
            return answer
        raise EtcdUnavailableError(f"no etcd endpoint answered {path}: {'; '.join(failures)}")

    async def grant(self, ttl: int) -> int:
        """A new lease of ``ttl`` seconds: its id."""
        return int((await self.call("/v3/lease/grant", {"TTL": ttl}))["ID"])

    async def keepalive(self, lease: int) -> int:
        """Renew ``lease``: the seconds it now has, 0 when it has already expired (or was revoked)."""
        return int((await self.call("/v3/lease/keepalive", {"ID": str(lease)})).get("TTL", 0))

    async def revoke(self, lease: int) -> None:
        """End ``lease`` now: every key held under it is deleted with it."""
        await self.call("/v3/kv/lease/revoke", {"ID": str(lease)})

    async def put(self, key: bytes, value: bytes, lease: int = 0) -> None:
        await self.call("/v3/kv/put", put_op(key, value, lease)["request_put"])

    async def get(self, key: bytes) -> KeyValue | None:
        kvs = (await self.call("/v3/kv/range", {"key": b64(key)})).get("kvs", [])
        return _kv(kvs[0]) if kvs else None

    async def prefix(self, prefix: bytes) -> list[KeyValue]:
        """Every key starting with ``prefix``, in key order."""
        answer = await self.call("/v3/kv/range", {"key": b64(prefix), "range_end": b64(prefix_end(prefix))})
        return [_kv(kv) for kv in answer.get("kvs", [])]

    async def delete(self, key: bytes) -> None:
        await self.call("/v3/kv/deleterange", {"key": b64(key)})

    async def txn(
        self, compare: list[dict[str, Any]], success: list[dict[str, Any]], failure: Sequence[dict[str, Any]] = ()
    ) -> tuple[bool, list[list[KeyValue]]]:
        """One transaction: whether every compare held (and ``success`` ran, else ``failure``), and the keys
        each range request of the branch that ran read."""
        answer = await self.call("/v3/kv/txn", {"compare": compare, "success": success, "failure": list(failure)})
        read = [
            [_kv(kv) for kv in response["response_range"].get("kvs", [])]
            for response in answer.get("responses", [])
            if "response_range" in response
        ]
        return bool(answer.get("succeeded", False)), read

    def close(self) -> None:
        self._connections.close()
