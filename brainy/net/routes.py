"""HTTP routing, generated from the contract: a path and method to a door, its path parameters and its query.

Sans-IO and pure: ``match(method, raw_path, accept)`` answers a :class:`Match` or raises
``UnknownDoorError`` / ``MethodNotAllowedError``. Each path segment is
percent-decoded exactly once, so an id holding ``/`` travels as ``%2F``; a
brain segment that decodes to a ``/`` is refused, never resolved.

A server door may share a door's route when the request's ``Accept`` tells them apart
(the SSE stream on ``GET P/changes``, DOORS.md 10.2): the door's match carries the media
types that pick the server door instead, and ``match`` negotiates.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple
from urllib.parse import parse_qsl, unquote

from brainy.contract import doors as D
from brainy.contract import refusals as R
from brainy.net import codecs


class ServerRoute(NamedTuple):
    """A server door's route: on its own (``accept`` None), or beside a door's, picked by ``Accept``."""

    method: str
    path: str
    name: str
    accept: str | None = None


@dataclass
class Match:
    door: str | None  # the contract door, or None for a server door
    server: str | None = None  # the server door's name
    params: dict[str, str] = field(default_factory=dict)
    selector: str | None = None  # the body field that picks the door on a shared route (vfs: "op")
    choices: Mapping[str, str] | None = None
    negotiated: Mapping[str, str] | None = None  # Accept media type -> the server door it picks instead


@dataclass
class _Node:
    literal: dict[str, _Node] = field(default_factory=dict)
    variable: tuple[str, _Node] | None = None
    routes: dict[str, Match] = field(default_factory=dict)


def _segments(path: str) -> list[str]:
    return path.strip("/").split("/") if path.strip("/") else []


def _negotiate(offers: Mapping[str, str], accept: str | None) -> str | None:
    """The server door ``accept`` picks over the door on the same route, or None for the door.

    The first media range naming one of ``offers`` picks its server door; one naming what the
    door answers in (JSON, MessagePack, ``*/*``, ``application/*``) keeps the door, as
    ``codecs.wants_msgpack`` reads the header in order.
    """
    for part in (accept or "").split(","):
        kind = codecs.media_type(part)
        if kind in offers:
            return offers[kind]
        if kind in (codecs.JSON, "*/*", "application/*") or codecs.wants_msgpack(kind):
            return None
    return None


class Router:
    def __init__(self, routes: tuple[D.Route, ...] = (), server: Iterable[ServerRoute] = ()):
        self._root = _Node()
        for route in routes or D.route_table():
            self._add(
                route.method,
                route.path,
                Match(route.door, None, selector=route.selector, choices=route.choices or None),
            )
        for method, path, name, accept in server:
            if accept is None:
                self._add(method, path, Match(None, name))
            else:
                self._offer(method, path, accept, name)

    def _offer(self, method: str, template: str, accept: str, name: str) -> None:
        """Let ``accept`` pick the server door ``name`` on the door route (method, template)."""
        node = self._root
        for seg in _segments(template):
            child = node.literal.get(seg)
            if child is None and node.variable is not None and seg == "{" + node.variable[0] + "}":
                child = node.variable[1]
            if child is None:
                raise RuntimeError(f"server door {name}: no door route {method} {template} to share")
            node = child
        door = node.routes.get(method)
        if door is None or door.server is not None:
            raise RuntimeError(f"server door {name}: no door route {method} {template} to share")
        door.negotiated = {**(door.negotiated or {}), accept: name}

    def _add(self, method: str, template: str, match: Match) -> None:
        node = self._root
        for seg in _segments(template):
            if seg.startswith("{") and seg.endswith("}"):
                name = seg[1:-1]
                if node.variable is None:
                    node.variable = (name, _Node())
                elif node.variable[0] != name:
                    raise RuntimeError(f"route {template}: {{{name}}} clashes with {{{node.variable[0]}}}")
                node = node.variable[1]
            else:
                node = node.literal.setdefault(seg, _Node())
        if method in node.routes:
            raise RuntimeError(f"route {method} {template} is listed twice")
        node.routes[method] = match

    def match(self, method: str, path: str, accept: str | None = None) -> Match:
        """The route for a request path (without its query string) and its ``Accept`` header."""
        node = self._root
        params: dict[str, str] = {}
        for raw in _segments(path):
            child = node.literal.get(raw)
            if child is not None:
                node = child
                continue
            if node.variable is None:
                raise R.UnknownDoorError(f"no door at {path}", path=path)
            name, node = node.variable
            params[name] = unquote(raw, errors="strict") if "%" in raw else raw
        if not node.routes:
            raise R.UnknownDoorError(f"no door at {path}", path=path)
        found = node.routes.get(method) or (node.routes.get("GET") if method == "HEAD" else None)
        if found is None:
            allowed = sorted(node.routes)
            raise R.MethodNotAllowedError(f"{path} takes {', '.join(allowed)}", allowed=allowed)
        if found.negotiated and accept:
            server = _negotiate(found.negotiated, accept)
            if server is not None:
                return Match(None, server, params)
        if not params:
            return found
        return Match(found.door, found.server, params, found.selector, found.choices, found.negotiated)


_TRUE, _FALSE = ("true", "1"), ("false", "0")


def query_document(door: D.Door | None, query: str) -> dict[str, Any]:
    """A GET door's argument document from its query string, typed by the door's declared params."""
    if not query:
        return {}
    try:
        pairs = parse_qsl(query, keep_blank_values=True, strict_parsing=True, errors="strict")
    except (ValueError, UnicodeDecodeError):
        raise R.InvalidArgumentError("the query string does not parse", field="query", reason="malformed") from None
    declared = {p.name: p.type for p in door.document_params} if door else {}
    document: dict[str, Any] = {}
    for name, value in pairs:
        if name in document:
            raise R.InvalidArgumentError(f"{name}: given twice", field=name, reason="repeated")
        kind = declared.get(name, "string")
        if kind == "boolean":
            if value not in _TRUE + _FALSE:
                raise R.InvalidArgumentError(f"{name}: must be true or false", field=name, reason="wrong-type")
            document[name] = value in _TRUE
        elif kind.startswith("int") or kind == "number":
            try:
                document[name] = int(value) if kind.startswith("int") else float(value)
            except ValueError:
                if "|" in kind and value in ("head",):  # e.g. since: int | "head"
                    document[name] = value
                elif door is not None and "BadQueryParameterError" in door.refusals:  # the feed's law (DOORS.md 6)
                    raise R.BadQueryParameterError(f"{name}: must be a whole number", param=name) from None
                else:
                    raise R.InvalidArgumentError(f"{name}: must be a number", field=name, reason="wrong-type") from None
        else:
            document[name] = value
    return document
