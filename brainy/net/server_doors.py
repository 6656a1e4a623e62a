"""The server's own doors (DOORS.md 10.2): which the router reaches, and the rule each answers by.

Every server door the contract lists either answers or refuses by name, never quietly
absent (DESIGN.md, "The door table is a law"):

* a native one answers through its handler, a table the app builds and joins here
  (``join``) against the contract in both directions, as the door dispatcher joins its
  engine table (``brainy/host/dispatch.py``): a native server door without a handler, or a
  handler without a native server door, stops the import by name;
* a native one that is a transport of its own (``/mcp``, ``HANDED_OFF``) is handed its
  path before routing, since it frames its own replies;
* a not-yet-native one refuses ``NotYetNativeError {door, release}`` (``refusal_today``),
  after the credential its ``who`` asks for: the WebSocket door's credential is checked
  before any upgrade (DOORS.md 10.2);
* one DOORS.md 10.2 serves only when something is configured (``CONFIGURED_ONLY``: the
  RFC 9728 document needs an authorization server) is not routed without it, so the
  request meets the ``UnknownDoorError`` its contract entry lists (``brainy serve
  --auth-server URL`` configures the one there is).

One route is served beside the contract, not in it (``BEYOND_CONTRACT``): ``GET
/openapi.json``. DOORS.md 10.2 lists nine server doors and the contract transcribes them
(a test pins the two together), so the OpenAPI document has a server-door record of its
own (``brainy/contract/openapi.py``) and is routed and joined like the others.

Pure: tables and checks over the contract, no IO.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from types import MappingProxyType
from typing import Any

from brainy.contract import doors as D
from brainy.contract import refusals as R
from brainy.contract.openapi import OPENAPI_DOOR
from brainy.net.mcp import MCP_PATH
from brainy.net.routes import ServerRoute

#: Native server doors that are a transport of their own, and the path the app hands them
#: before routing: MCP frames its own JSON-RPC replies and keeps its own clock (brainy/net/mcp.py).
HANDED_OFF: Mapping[str, str] = MappingProxyType({"server.mcp": MCP_PATH})

#: Server doors DOORS.md 10.2 serves only when something is configured, and what.
CONFIGURED_ONLY: Mapping[str, str] = MappingProxyType({"server.oauthProtectedResource": "an authorization server"})

#: Server doors the server answers outside the contract, each in a server door's record.
BEYOND_CONTRACT: tuple[D.ServerDoor, ...] = (OPENAPI_DOOR,)
#: Every server door the server knows: the contract's, then those beyond it.
SERVER_DOORS: tuple[D.ServerDoor, ...] = (*D.SERVER_DOORS, *BEYOND_CONTRACT)
BY_NAME: Mapping[str, D.ServerDoor] = MappingProxyType({s.name: s for s in SERVER_DOORS})


def _check_tables() -> None:
    """The tables above name server doors the contract lists, in the form they say; else the import stops."""
    for name, path in HANDED_OFF.items():
        door = BY_NAME.get(name)
        if door is None or door.disposition != "native" or door.path != path:
            raise RuntimeError(
                f"server doors: {name} is handed {path}, but the contract has no native server door {name} there"
            )
    for name in CONFIGURED_ONLY:
        door = BY_NAME.get(name)
        if door is None or "UnknownDoorError" not in door.refusals:
            raise RuntimeError(
                f"server doors: {name} is served only when configured, so the contract must "
                "list it, refusing UnknownDoorError"
            )
    if len(BY_NAME) != len(SERVER_DOORS):
        raise RuntimeError("server doors: a server door beyond the contract takes a contract server door's name")
    for door in SERVER_DOORS:
        if door.disposition == "inProcessOnly":  # a server door is a wire door by definition
            raise RuntimeError(f"server doors: {door.name} is inProcessOnly, which no server door can be")


_check_tables()


def routes(configured: Collection[str] = ()) -> tuple[ServerRoute, ...]:
    """The server doors the router reaches, in contract order, then those beyond the contract.

    Handed-off doors are left out (the app hands their path over first), and so is a
    configured-only door unless its name is in ``configured``. A door with an ``accept``
    shares its door's route, picked by content negotiation.
    """
    return tuple(
        ServerRoute(s.method, s.path, s.name, s.accept)
        for s in SERVER_DOORS
        if s.name not in HANDED_OFF and (s.name not in CONFIGURED_ONLY or s.name in configured)
    )


def refusal_today(door: D.ServerDoor) -> R.Refusal:
    """What a server door that is not native refuses with: ``NotYetNativeError`` and its release."""
    return R.NotYetNativeError(f"{door.name} arrives in {door.release}", door=door.name, release=door.release)


Handler = Callable[..., Any]


def join(handlers: Mapping[str, Handler]) -> Mapping[str, Handler]:
    """``handlers`` (server door name -> handler), checked against the contract in both directions.

    Every native server door not handed off has a handler, and every handler is one; a
    disagreement stops the import, naming the doors on each side.
    """
    native = {s.name for s in SERVER_DOORS if s.disposition == "native"} - set(HANDED_OFF)
    missing = sorted(native - set(handlers))
    stray = sorted(set(handlers) - native)
    if missing or stray:
        raise RuntimeError(
            f"server-door handlers and contract disagree: native server doors without a handler "
            f"{missing}, handlers that are not native server doors {stray}"
        )
    return MappingProxyType(dict(handlers))
