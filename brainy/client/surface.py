"""The client's door surface, read from the contract at import (never a hand list): each door by its bare name
(``b.add``, ``b.find``) or by ``call(door, ...)``, the check of the server's contract against this one, and the
server a client is opened on (:func:`endpoint`: its URL and key, or the environment's)."""

from __future__ import annotations

import os
import ssl
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from brainy import errors
from brainy.contract import doors as D

#: where a client goes when neither its ``url`` nor ``$BRAINY_URL`` says
DEFAULT_URL = "http://127.0.0.1:8300"
#: the contract version this client was built for
CONTRACT_VERSION = D.CONTRACT.contract_version
#: the doors a brain handle names as methods: every door of a brain (the host's are the client's ``call``)
BRAIN_DOORS = frozenset(d.name for d in D.DOORS if "." not in d.name and d.layer != "host")


@dataclass(frozen=True)
class Endpoint:
    """The server a client calls: ``url`` as given (no trailing slash), where to connect, the ``authority`` its
    requests name (``Host``, HTTP/2's ``:authority``), whether the connection is TLS, and the key (None: none)."""

    url: str
    scheme: str
    host: str
    port: int
    authority: str
    key: str | None

    @property
    def tls(self) -> bool:
        return self.scheme == "https"

    def tls_context(self, given: ssl.SSLContext | None, alpn: list[str]) -> ssl.SSLContext | None:
        """The TLS context of an ``https`` endpoint (None for ``http``): ``given``, else the system's trust,
        verifying; offering ``alpn``."""
        if not self.tls:
            return None
        context = given if given is not None else ssl.create_default_context()
        context.set_alpn_protocols(alpn)
        return context


def endpoint(url: str | None, key: str | None) -> Endpoint:
    """The server of ``Client(url, key)``: ``url``, else ``$BRAINY_URL``, else :data:`DEFAULT_URL`; ``key``, else
    ``$BRAINY_KEY``. An ``http://`` or ``https://`` URL with a host; anything else is a ``ValueError``."""
    url = (url or os.environ.get("BRAINY_URL") or DEFAULT_URL).rstrip("/")
    key = key if key is not None else os.environ.get("BRAINY_KEY")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"url {url!r}: an http://host:port or https://host:port URL")
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return Endpoint(url, parts.scheme, parts.hostname, port, parts.netloc.rpartition("@")[2], key)


def door_of(name: str, server: dict[str, Any] | None) -> D.Door:
    """The door ``name``, refused ``UnknownDoorError`` when this contract or the server's has no such door."""
    door = D.BY_NAME.get(name)
    if door is not None and server is not None:
        names = {d.get("name") for d in server.get("doors", [])}
        if names and name not in names:
            door = None
    if door is None:
        raise errors.UnknownDoorError(f"{name!r} is not a door of this server's contract", door=name)
    return door


def version_skew(server: dict[str, Any] | None) -> str | None:
    """What to warn of when the server's contract version is not this client's (None: they agree)."""
    theirs = (server or {}).get("contractVersion")
    if theirs and theirs != CONTRACT_VERSION:
        return f"brainy client built for contract {CONTRACT_VERSION}, the server speaks {theirs}"
    return None


class DoorMethods:
    """Each door of a brain as a method of the same name, calling ``self.call``."""

    def call(self, door: str, *positional: Any, **options: Any) -> Any:
        raise NotImplementedError

    def __getattr__(self, name: str) -> Callable[..., Any]:
        if name in BRAIN_DOORS:
            door = lambda *positional, **options: self.call(name, *positional, **options)  # noqa: E731
            door.__name__ = door.__qualname__ = name
            door.__doc__ = D.BY_NAME[name].summary
            return door
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
