"""A request forwarded to the node that owns its brain (docs/fleet.md "Any node answers any brain").

The edge node has already checked the caller's key; the request goes on as it came (method, target, body, the
caller's own fields, ``Authorization`` among them, so the owner checks the key again), plus
``brainy-forwarded: <edge>``, and the owner's answer comes back as it was sent, less the fields that belong to
one connection (its fields as read, bytes passed on, never decoded and encoded again). The field names of the
fleet's hops are here, once.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from brainy._speedups import h1frame
from brainy.fleet.http1 import Connections, Landed, Response, Stream

#: On a forwarded request: the node it was forwarded by. A node never forwards such a request again.
FORWARDED = "brainy-forwarded"
#: On a forwarded ``host.provision``: the node placement chose, which creates the brain without placing again.
PLACED = "brainy-placed"
#: On every proxied answer: the node that owns the brain and answered.
NODE = "brainy-node"
#: On every forwarded write: its id, so the write sent again after its owner went away is answered once
#: (docs/fleet.md "A write sent twice"). The edge mints it; a request that came with one keeps it.
WRITE = "brainy-write"

#: Fields of one connection or one hop (RFC 9110 7.6.1), never passed on; the length is framed anew.
HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-connection",
        "transfer-encoding",
        "te",
        "trailer",
        "upgrade",
        "host",
        "content-length",
        "http2-settings",
        FORWARDED,
        PLACED,
    }
)
_HOP_BY_HOP = frozenset(name.encode() for name in HOP_BY_HOP)  # as an answer's fields are read: bytes
FORWARD_SECONDS = 60.0  # one forwarded door: a long write or a large find page still fits
OWNERS_HELD = 256  # owners' parsed URLs a forwarder keeps (a fleet's nodes, a few at a time)


def owner_address(url: str) -> tuple[str, int]:
    """``(host, port)`` of a node's advertised ``http://HOST:PORT``."""
    parts = urlsplit(url)
    if parts.scheme != "http" or not parts.hostname:
        raise ValueError(f"{url!r}: a node is advertised as http://HOST:PORT")
    return parts.hostname, parts.port or 80


class Forwarder:
    """Forwards requests from this node (``node``) to owners, on kept-alive connections."""

    def __init__(self, node: str, timeout: float = FORWARD_SECONDS) -> None:
        self.node = node
        self.connections = Connections(timeout)
        self.forwarded = ((FORWARDED, node),)  # the field a request forwarded from here carries
        # each owner's address and authority, by its URL: a node's few URLs, parsed once (not per request)
        self.owners: dict[str, tuple[tuple[str, int], str]] = {}

    def owner(self, url: str) -> tuple[tuple[str, int], str]:
        """The ``(host, port)`` and authority of the node advertised at ``url``, kept for the next request."""
        known = self.owners.get(url)
        if known is None:
            host, port = owner_address(url)
            if len(self.owners) >= OWNERS_HELD:
                self.owners.clear()
            known = self.owners[url] = ((host, port), f"{host}:{port}")
        return known

    def _request(
        self, url: str, method: str, target: str, headers: dict[str, str], body: bytes, placed: str | None
    ) -> tuple[tuple[str, int], bytes]:
        address, authority = self.owner(url)
        extra = self.forwarded if placed is None else (*self.forwarded, (PLACED, placed))
        return address, h1frame.frame_request(method, target, authority, headers, HOP_BY_HOP, extra, body)

    async def open_stream(self, url: str, target: str, headers: dict[str, str]) -> Stream:
        """The owner at ``url``'s answer to a GET whose body is a stream (the held change stream), its head read;
        on a connection of its own, which the stream holds until it ends."""
        address, data = self._request(url, "GET", target, headers, b"", None)
        stream = await Stream.open(address, data, self.connections.timeout)
        stream.response.fields = [(name, value) for name, value in stream.response.fields if name not in _HOP_BY_HOP]
        return stream

    async def forward(
        self,
        url: str,
        method: str,
        target: str,
        headers: dict[str, str],
        body: bytes,
        placed: str | None = None,
    ) -> Response:
        """The owner at ``url``'s answer to the request; PeerUnreachableError when it gives none."""
        address, data = self._request(url, method, target, headers, body, placed)
        return passed_on(await self.connections.exchange(address, data))

    def forward_kept(
        self, url: str, method: str, target: str, headers: dict[str, str], body: bytes, done: Landed, raw: bool = False
    ) -> bool:
        """:meth:`forward` without a coroutine, on a connection kept from an earlier request (the common case of a
        busy edge): False, nothing sent, when none is idle; else ``done`` is called from the loop with the answer
        (with ``raw``, a plain one as its bytes, ``Raw``, its fields as the owner sent them) or with the
        PeerUnreachableError :meth:`forward` would raise. An answer read whole (a ``Response``) comes with every
        field the owner sent: :func:`passed_on` takes out those of its connection (one call less a request on the
        road where most answers come as their bytes)."""
        address, data = self._request(url, method, target, headers, body, None)
        return self.connections.send_kept(address, data, done, raw)

    def close(self) -> None:
        self.connections.close()


def passed_on(response: Response) -> Response:
    """An owner's answer with the fields of its connection taken out."""
    response.fields = [(name, value) for name, value in response.fields if name not in _HOP_BY_HOP]
    return response
