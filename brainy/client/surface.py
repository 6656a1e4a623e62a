"""The client's door surface, read from the contract at import (never a hand list): each door by its bare name
(``b.add``, ``b.find``) or by ``call(door, ...)``, and the check of the server's contract against this one."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from brainy import errors
from brainy.contract import doors as D

#: the contract version this client was built for
CONTRACT_VERSION = D.CONTRACT.contract_version
#: the doors a brain handle names as methods: every door of a brain (the host's are the client's ``call``)
BRAIN_DOORS = frozenset(d.name for d in D.DOORS if "." not in d.name and d.layer != "host")


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
