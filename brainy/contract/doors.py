"""The door table: ``api-contract.json``'s doors, validated at import, and every surface derived from them.

DESIGN.md, "The door table is a law": the contract lists every door once, and the
HTTP route table, the WebSocket door set, the MCP tool list, the gRPC service (and
``docs/brainy.proto``) and ``/contract.json`` are derived from it here, never
hand-listed. Everything in this module is pure: no IO except reading the contract
at import, no clock (``contract_envelope`` is handed its build stamp).

A malformed contract stops the import with a ``ContractError`` (a ``RuntimeError``)
naming the entry's index, its name and what is wrong, so a bad edit to the JSON can
never serve a half-right table. ``validate(doc)`` is the same check as a function, so
a test can feed it a broken copy.

Names on each transport follow DOORS.md 0.1:

=========== ================== ==================== ============== ================
layer       contract name      MCP tool             WebSocket door gRPC rpc
=========== ================== ==================== ============== ================
engine, vfs ``find``           ``brainy_find``      ``find``       ``find``
profiles    ``accords.read``   ``accords_read``     ``accords.read`` ``accords_read``
host        ``host.persist``   ``host_persist``     ``host.persist`` ``host_persist``
=========== ================== ==================== ============== ================

The 17 vfs doors share one HTTP route, ``POST /v1/brains/{brain}/vfs``, and the body
field ``op`` names the door (DOORS.md 0.2, 8). ``route_table()`` represents that as a
single ``Route`` whose ``door`` is ``None``, whose ``selector`` is ``"op"`` and whose
``choices`` map each ``op`` value to its door, so every (method, path) pair appears
exactly once and the dispatcher keys its router by it without special cases.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any, NamedTuple

from brainy.contract import types as T

#: The contract this process serves: the shipped one, or ``BRAINY_CONTRACT`` naming a copy — how a door
#: under development is served before its entry lands (its function must be registered, or the import
#: fails by name: see ``brainy.doors.registry``).
CONTRACT_PATH = Path(os.environ.get("BRAINY_CONTRACT") or Path(__file__).with_name("api-contract.json"))

#: Door layers in contract order; ``/contract.json`` lists them in this order, then ``server``.
LAYERS = ("engine", "vfs", "accords", "memory", "policy", "host")
SERVER_LAYER = "server"
ENVELOPE_LAYERS = (*LAYERS, SERVER_LAYER)
#: Layers whose contract names are bare (DOORS.md 0.1); the rest are ``layer.name``.
BARE_LAYERS = ("engine", "vfs")
KINDS = ("read", "write")
ACCESS = ("principal", "service")
#: Who may call a server door (DOORS.md 10.2): no credential, any credential, a principal.
SERVER_WHO = ("anyone", "credential", "principal")
METHODS = ("GET", "POST", "DELETE")
LOCATIONS = ("path", "query", "body")
#: Owner rungs (DOORS.md 0.4): ``owner`` is the loose form (owner triple or asserted
#: owner), ``ownerTriple`` the strict form only the three ruling doors ask for.
RUNGS = ("owner", "ownerTriple")
DISPOSITIONS = ("native", "notYetNative", "inProcessOnly")
#: Every brain-scoped path starts here (DOORS.md 0.2, ``P``).
BRAIN_PREFIX = "/v1/brains/{brain}"
#: The one route every vfs door shares, and the body field that picks the door.
VFS_ROUTE = ("POST", BRAIN_PREFIX + "/vfs")
VFS_SELECTOR = "op"
#: The set every contract door carries (DOORS.md 0.6).
COMMON_SET = "C"

_DOOR_FIELDS = frozenset(
    {
        "name",
        "layer",
        "kind",
        "access",
        "signature",
        "summary",
        "when",
        "http",
        "params",
        "sets",
        "refusals",
        "disposition",
    }
)
_DOOR_OPTIONAL = frozenset({"destructive", "rung", "pinnable"})
_SERVER_FIELDS = frozenset(
    {"name", "layer", "who", "summary", "when", "answer", "http", "sets", "refusals", "disposition"}
)
_PARAM_FIELDS = frozenset({"name", "type", "required", "in"})
_PARAM_OPTIONAL = frozenset({"default"})
_TOP_FIELDS = frozenset({"contractVersion", "refusalSets", "doors", "serverDoors", "refusals"})
_SET_FIELDS = frozenset({"appliesTo", "names"})
_SET_OPTIONAL = frozenset({"notOnLayers"})
_RELEASE = re.compile(r"^\d+\.\d+\.\d+$")
_BARE_NAME = re.compile(r"^[a-z][A-Za-z0-9]*$")
_PARAM_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9]*$")
_PLACEHOLDER = re.compile(r"\{([A-Za-z0-9]+)\}")
#: What a refusal's wire document already holds: its class and its text (DOORS.md 11,
#: ``{"error": {name, message, ...fields}}``). A field by either name would overwrite it.
REFUSAL_OWN_KEYS = ("name", "message")


class ContractError(RuntimeError):
    """``api-contract.json`` breaks the shape this module requires; the message says where."""


# --------------------------------------------------------------------------- records


# The reserved words of the languages a consumer generates stubs for from docs/brainy.proto (Python, Go,
# Java, C#, C++, JavaScript/TypeScript), lowercase, as a door name could spell one. An rpc named by one is
# a stub that does not compile (grpc_tools' Python stubs emit ``def import(...)``), so such a door's rpc
# takes a trailing ``_`` (``import_``): PEP 8's spelling, and protoc's own C++ generator's. Every rpc
# keeps that spelling across releases: it is the wire method name, /brainy.v1.Brainy/import_.
GRPC_RESERVED = frozenset(
    """
abstract and as assert async await base bool break byte case catch char checked class const continue
debugger decimal def default defer del delete do double elif else enum event except explicit export
extends extern false final finally fixed float for foreach from func function global go goto if
implements implicit import in instanceof int interface internal is lambda let lock long map namespace
native new nonlocal not null object operator or out override package params pass private protected
public raise range readonly ref return sbyte sealed select short sizeof static string struct super
switch synchronized this throw throws transient true try type typeof uint ulong unchecked unsafe ushort
using var virtual void volatile while with yield
""".split()
)


@dataclass(frozen=True)
class Param:
    """One argument a door takes: its name, its type as DOORS.md writes it, where it travels."""

    name: str
    type: str
    required: bool
    location: str  # "path" | "query" | "body" ("in" in the JSON; ``in`` is a Python keyword)
    default: Any = None  # what an optional argument left out means (None: the door says it in prose)

    @property
    def tree(self) -> T.Node:
        """The type as data (``brainy/contract/types.py``), parsed once when the contract loaded."""
        return T.parse(self.type)

    def to_entry(self) -> dict[str, Any]:
        """The contract's JSON form of this parameter."""
        entry = {"name": self.name, "type": self.type, "required": self.required, "in": self.location}
        if self.default is not None:
            entry["default"] = self.default
        return entry


@dataclass(frozen=True)
class Door:
    """One contract door, exactly as ``api-contract.json`` states it."""

    name: str
    layer: str
    kind: str
    access: str
    signature: str
    summary: str
    when: str
    method: str
    path: str
    params: tuple[Param, ...]
    sets: tuple[str, ...]
    refusals: tuple[str, ...]
    disposition: str  # "native" | "notYetNative" | "inProcessOnly"
    release: str | None = None  # for notYetNative
    instead: str | None = None  # for inProcessOnly
    destructive: bool = False
    rung: str | None = None
    pinnable: bool = False  # a read asOf may run at a past generation (DOORS.md 6)

    @property
    def short(self) -> str:
        """The name without its layer qualifier (``accords.read`` -> ``read``)."""
        return self.name.rpartition(".")[2]

    @property
    def native(self) -> bool:
        """True when the door answers today."""
        return self.disposition == "native"

    @property
    def mcp_tool(self) -> str:
        """The MCP tool name (DOORS.md 0.1)."""
        if self.layer in BARE_LAYERS:
            return "brainy_" + self.name
        return self.name.replace(".", "_")

    @property
    def grpc_rpc(self) -> str:
        """The gRPC rpc name: the contract name with ``.`` replaced by ``_``, and a trailing ``_`` on a name a
        consumer's stub generator would emit as a reserved word (:data:`GRPC_RESERVED`)."""
        rpc = self.name.replace(".", "_")
        return rpc + "_" if rpc in GRPC_RESERVED else rpc

    @property
    def ws_door(self) -> str:
        """The WebSocket frame's ``door`` value: the contract name."""
        return self.name

    @property
    def path_params(self) -> tuple[Param, ...]:
        """Parameters carried in the HTTP path (``brain``, ``id``, ``sha256``)."""
        return tuple(p for p in self.params if p.location == "path")

    @property
    def document_params(self) -> tuple[Param, ...]:
        """Parameters of the argument document: query fields on GET, body fields otherwise."""
        return tuple(p for p in self.params if p.location != "path")

    @property
    def refusal_today(self) -> str | None:
        """The refusal the door gives on every call today, or None when it is native."""
        if self.disposition == "notYetNative":
            return "NotYetNativeError"
        if self.disposition == "inProcessOnly":
            return "InProcessOnlyError"
        return None

    def disposition_entry(self) -> dict[str, Any]:
        """The contract's JSON form of the disposition."""
        if self.disposition == "notYetNative":
            return {"notYetNative": {"release": self.release}}
        if self.disposition == "inProcessOnly":
            return {"inProcessOnly": {"instead": self.instead}}
        return {"native": True}

    def to_entry(self) -> dict[str, Any]:
        """The contract's JSON form of this door; equal to the entry it was loaded from."""
        entry: dict[str, Any] = {
            "name": self.name,
            "layer": self.layer,
            "kind": self.kind,
            "access": self.access,
        }
        if self.rung is not None:
            entry["rung"] = self.rung
        if self.destructive:
            entry["destructive"] = True
        if self.pinnable:
            entry["pinnable"] = True
        entry.update(
            {
                "signature": self.signature,
                "summary": self.summary,
                "when": self.when,
                "http": {"method": self.method, "path": self.path},
                "params": [p.to_entry() for p in self.params],
                "sets": list(self.sets),
                "refusals": list(self.refusals),
                "disposition": self.disposition_entry(),
            }
        )
        return entry


@dataclass(frozen=True)
class ServerDoor:
    """One of the server's own doors (DOORS.md 10.2): not a brain door, no MCP/gRPC/WS binding."""

    name: str
    who: str
    summary: str
    when: str
    answer: str
    method: str
    path: str
    accept: str | None
    sets: tuple[str, ...]
    refusals: tuple[str, ...]
    disposition: str
    release: str | None = None
    instead: str | None = None
    #: The door whose route this server door shares, told apart by ``accept``: the door's answer held open
    #: (the changes door as a live stream). Not a field of the contract's entry: it is where the route is.
    holds: str | None = None

    layer = SERVER_LAYER

    def to_entry(self) -> dict[str, Any]:
        """The contract's JSON form of this server door."""
        http: dict[str, Any] = {"method": self.method, "path": self.path}
        if self.accept is not None:
            http["accept"] = self.accept
        if self.disposition == "notYetNative":
            disposition: dict[str, Any] = {"notYetNative": {"release": self.release}}
        elif self.disposition == "inProcessOnly":
            disposition = {"inProcessOnly": {"instead": self.instead}}
        else:
            disposition = {"native": True}
        return {
            "name": self.name,
            "layer": SERVER_LAYER,
            "who": self.who,
            "summary": self.summary,
            "when": self.when,
            "answer": self.answer,
            "http": http,
            "sets": list(self.sets),
            "refusals": list(self.refusals),
            "disposition": disposition,
        }


@dataclass(frozen=True)
class RefusalSet:
    """A named set of refusals a door inherits (DOORS.md 0.6: ``C``, ``W``; 10.2: ``A``)."""

    key: str
    applies_to: str
    names: tuple[str, ...]
    not_on_layers: Mapping[str, tuple[str, ...]]

    def names_for(self, layer: str) -> tuple[str, ...]:
        """The set's names as a door of ``layer`` inherits them."""
        return tuple(n for n in self.names if layer not in self.not_on_layers.get(n, ()))

    def to_entry(self) -> dict[str, Any]:
        """The contract's JSON form of this set."""
        entry: dict[str, Any] = {"appliesTo": self.applies_to, "names": list(self.names)}
        if self.not_on_layers:
            entry["notOnLayers"] = {k: list(v) for k, v in self.not_on_layers.items()}
        return entry


class Contract(NamedTuple):
    """The whole validated contract."""

    contract_version: str
    doors: tuple[Door, ...]
    server_doors: tuple[ServerDoor, ...]
    refusal_sets: Mapping[str, RefusalSet]
    refusals: tuple[Mapping[str, Any], ...]


class Route(NamedTuple):
    """One HTTP route: a (method, path template) pair and the door it reaches.

    A plain route has ``door`` set, ``selector`` None and no ``choices``. The shared
    vfs route has ``door`` None, ``selector`` ``"op"`` and ``choices`` mapping each
    ``op`` value to its door name.
    """

    method: str
    path: str
    door: str | None
    selector: str | None = None
    choices: Mapping[str, str] = MappingProxyType({})


# --------------------------------------------------------------------------- validation


def _fail(where: str, what: str) -> ContractError:
    return ContractError(f"api-contract.json: {where}: {what}")


def _str(value: Any, where: str, field: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise _fail(where, f"{field} must be a non-empty string, not {value!r}")
    return value


def _keys(
    entry: Mapping[str, Any], where: str, required: frozenset[str], optional: frozenset[str] = frozenset()
) -> None:
    missing = sorted(required - entry.keys())
    if missing:
        raise _fail(where, f"missing field(s) {missing}")
    unknown = sorted(entry.keys() - required - optional)
    if unknown:
        raise _fail(where, f"unknown field(s) {unknown}")


def _disposition(value: Any, where: str) -> tuple[str, str | None, str | None]:
    """Check a disposition is exactly one of the three forms; answer (form, release, instead)."""
    if not isinstance(value, dict) or len(value) != 1:
        raise _fail(where, f"disposition must be exactly one of {list(DISPOSITIONS)}, not {value!r}")
    ((form, body),) = value.items()
    if form == "native":
        if body is not True:
            raise _fail(where, f'disposition must be {{"native": true}}, not {value!r}')
        return form, None, None
    if form == "notYetNative":
        if (
            not isinstance(body, dict)
            or set(body) != {"release"}
            or not isinstance(body["release"], str)
            or not _RELEASE.match(body["release"])
        ):
            raise _fail(where, f'disposition must be {{"notYetNative": {{"release": "X.Y.Z"}}}}, not {value!r}')
        return form, body["release"], None
    if form == "inProcessOnly":
        if (
            not isinstance(body, dict)
            or set(body) != {"instead"}
            or not isinstance(body["instead"], str)
            or not body["instead"].strip()
        ):
            raise _fail(where, f'disposition must be {{"inProcessOnly": {{"instead": "..."}}}}, not {value!r}')
        return form, None, body["instead"]
    raise _fail(where, f"disposition must be exactly one of {list(DISPOSITIONS)}, not {value!r}")


def _name_list(value: Any, where: str, field: str, known: Iterable[str], what: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise _fail(where, f"{field} must be a list of names, not {value!r}")
    known = set(known)
    for name in value:
        if name not in known:
            raise _fail(where, f"{field} names {name!r}, which is not {what}")
    if len(set(value)) != len(value):
        raise _fail(where, f"{field} lists a name twice: {value!r}")
    return tuple(value)


def _refusal_table(table: Any) -> tuple[Mapping[str, Any], ...]:
    if not isinstance(table, list):
        raise _fail("refusals", "must be a list")
    seen: set[str] = set()
    out = []
    for index, entry in enumerate(table):
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            raise _fail(f"refusals[{index}]", "has no name")
        where = f"refusals[{index}] {entry['name']!r}"
        if entry["name"] in seen:
            raise _fail(where, "is listed twice")
        seen.add(entry["name"])
        fields = [f for key in ("fields", "optional") for f in _field_names(entry.get(key, []), where, key)]
        if len(set(fields)) != len(fields):
            raise _fail(where, f"fields and optional name a field twice: {fields}")
        out.append(MappingProxyType(dict(entry)))
    return tuple(out)


def _field_names(value: Any, where: str, key: str) -> list[str]:
    """A refusal's ``fields`` or ``optional``: plain names, none of them the refusal's own keys."""
    if not isinstance(value, list) or not all(isinstance(f, str) and _PARAM_NAME.match(f) for f in value):
        raise _fail(where, f"{key} must be a list of field names, not {value!r}")
    for f in value:
        if f in REFUSAL_OWN_KEYS:
            raise _fail(
                where,
                f"field {f!r} collides with the refusal's own {f!r} on the wire "
                "(DOORS.md 11); name the field for what it holds",
            )
    return value


def _refusal_sets(value: Any, refusal_names: set[str]) -> Mapping[str, RefusalSet]:
    if not isinstance(value, dict):
        raise _fail("refusalSets", "must be an object")
    out: dict[str, RefusalSet] = {}
    for key, entry in value.items():
        where = f"refusalSets[{key!r}]"
        if not isinstance(entry, dict):
            raise _fail(where, "must be an object")
        _keys(entry, where, _SET_FIELDS, _SET_OPTIONAL)
        names = _name_list(entry["names"], where, "names", refusal_names, "in the refusals table")
        not_on = entry.get("notOnLayers", {})
        if not isinstance(not_on, dict):
            raise _fail(where, "notOnLayers must be an object")
        for name, layers in not_on.items():
            if name not in names:
                raise _fail(where, f"notOnLayers names {name!r}, which is not in the set")
            _name_list(layers, where, f"notOnLayers[{name!r}]", LAYERS, "a layer")
        out[key] = RefusalSet(
            key=key,
            applies_to=_str(entry["appliesTo"], where, "appliesTo"),
            names=names,
            not_on_layers=MappingProxyType({k: tuple(v) for k, v in not_on.items()}),
        )
    if COMMON_SET not in out:
        raise _fail("refusalSets", f"has no {COMMON_SET!r} set")
    return MappingProxyType(out)


def _params(value: Any, where: str, method: str, path: str) -> tuple[Param, ...]:
    if not isinstance(value, list):
        raise _fail(where, "params must be a list")
    params = []
    for index, entry in enumerate(value):
        pwhere = f"{where} params[{index}]"
        if not isinstance(entry, dict):
            raise _fail(pwhere, "must be an object")
        _keys(entry, pwhere, _PARAM_FIELDS, _PARAM_OPTIONAL)
        name = _str(entry["name"], pwhere, "name")
        if not _PARAM_NAME.match(name):
            raise _fail(pwhere, f"name {name!r} is not a plain identifier")
        if not isinstance(entry["required"], bool):
            raise _fail(pwhere, f"required must be true or false, not {entry['required']!r}")
        if entry["in"] not in LOCATIONS:
            raise _fail(pwhere, f"in must be one of {list(LOCATIONS)}, not {entry['in']!r}")
        kind = _str(entry["type"], pwhere, "type")
        try:
            T.parse(kind)  # parsed once here; Param.tree answers the cached tree
        except T.NotationError as exc:
            raise _fail(pwhere, f"{name!r}: {exc}") from None
        if "default" in entry and (entry["required"] or entry["default"] is None):
            raise _fail(pwhere, "only an optional argument has a default, and it is not null")
        params.append(Param(name, kind, entry["required"], entry["in"], entry.get("default")))
    names = [p.name for p in params]
    if len(set(names)) != len(names):
        raise _fail(where, f"params name an argument twice: {names}")
    placeholders = _PLACEHOLDER.findall(path)
    path_names = [p.name for p in params if p.location == "path"]
    if sorted(placeholders) != sorted(path_names):
        raise _fail(where, f"path placeholders {placeholders} do not match path params {path_names}")
    for p in params:
        if p.location == "path" and not p.required:
            raise _fail(where, f"path param {p.name!r} must be required")
        if method == "GET" and p.location == "body":
            raise _fail(where, f"a GET door takes no body, but {p.name!r} is in the body")
        if method == "GET" and p.location == "query" and not T.is_scalar(p.tree):
            raise _fail(where, f"query param {p.name!r} has non-scalar type {p.type!r} (DOORS.md 0.2)")
        if method != "GET" and p.location == "query":
            raise _fail(where, f"a {method} door takes its arguments in the body, but {p.name!r} is in the query")
        if method == "DELETE" and p.location == "body":
            raise _fail(where, f"a DELETE door takes no body, but {p.name!r} is in the body")
    return tuple(params)


def _http(value: Any, where: str, methods: Sequence[str], prefix: str) -> tuple[str, str, dict[str, Any]]:
    if not isinstance(value, dict):
        raise _fail(where, f"http must be an object, not {value!r}")
    method, path = value.get("method"), value.get("path")
    if not isinstance(method, str) or method not in methods:
        raise _fail(where, f"http method must be one of {list(methods)}, not {method!r}")
    if not isinstance(path, str) or not path.startswith(prefix):
        raise _fail(where, f"http path must start with {prefix!r}, not {path!r}")
    return method, path, value


def _door(index: int, entry: Any, refusal_names: set[str], sets: Mapping[str, RefusalSet]) -> Door:
    where = f"doors[{index}]"
    if not isinstance(entry, dict):
        raise _fail(where, "must be an object")
    if isinstance(entry.get("name"), str):
        where = f"doors[{index}] {entry['name']!r}"
    _keys(entry, where, _DOOR_FIELDS, _DOOR_OPTIONAL)
    layer, kind, access = entry["layer"], entry["kind"], entry["access"]
    if layer not in LAYERS:
        raise _fail(where, f"unknown layer {layer!r} (one of {list(LAYERS)})")
    if kind not in KINDS:
        raise _fail(where, f"unknown kind {kind!r} (one of {list(KINDS)})")
    if access not in ACCESS:
        raise _fail(where, f"unknown access {access!r} (one of {list(ACCESS)})")
    name = _str(entry["name"], where, "name")
    pattern = _BARE_NAME if layer in BARE_LAYERS else re.compile(rf"^{layer}\.[a-z][A-Za-z0-9]*$")
    if not pattern.match(name):
        form = "a bare camelCase name" if layer in BARE_LAYERS else f"{layer}.<camelCase>"
        raise _fail(where, f"name must be {form} for layer {layer!r}")
    # DOORS.md 0.4: the service key opens mechanics and host doors and no others;
    # 10.3: every host door is access: service.
    if access == "service" and layer not in ("engine", "host"):
        raise _fail(where, f"access service is only for engine mechanics and host doors, not layer {layer!r}")
    if layer == "host" and access != "service":
        raise _fail(where, "host doors are access: service")
    http = entry["http"]
    method, path, _ = _http(http, where, METHODS, "/v1/")
    if set(http) != {"method", "path"}:
        raise _fail(where, f"http must hold exactly method and path, not {sorted(http)}")
    if layer != "host" and not path.startswith(BRAIN_PREFIX + "/"):
        raise _fail(where, f"http path must start with {BRAIN_PREFIX + '/'!r}")
    if layer == "vfs" and (method, path) != VFS_ROUTE:
        raise _fail(where, f"every vfs door is {' '.join(VFS_ROUTE)} (DOORS.md 0.2)")
    params = _params(entry["params"], where, method, path)
    door_sets = _name_list(entry["sets"], where, "sets", sets, "a refusal set")
    if COMMON_SET not in door_sets:
        raise _fail(where, f"sets must include {COMMON_SET!r} (every door)")
    if "W" in door_sets and kind != "write":
        raise _fail(where, "set 'W' is for row-writing doors, and this door is a read")
    refusals = _name_list(entry["refusals"], where, "refusals", refusal_names, "in the refusals table")
    inherited = {n for key in door_sets for n in sets[key].names_for(layer)}
    doubled = sorted(inherited.intersection(refusals))
    if doubled:
        raise _fail(where, f"refusals repeat names its sets already give: {doubled}")
    form, release, instead = _disposition(entry["disposition"], where)
    destructive = entry.get("destructive", False)
    if not isinstance(destructive, bool):
        raise _fail(where, f"destructive must be true or false, not {destructive!r}")
    if destructive and kind != "write":
        raise _fail(where, "only a write door can be destructive")
    rung = entry.get("rung")
    if rung is not None and rung not in RUNGS:
        raise _fail(where, f"unknown rung {rung!r} (one of {list(RUNGS)})")
    pinnable = entry.get("pinnable", False)
    if pinnable is not True and "pinnable" in entry:
        raise _fail(where, f"pinnable is written only as true, not {pinnable!r}")
    if pinnable and (kind != "read" or form == "inProcessOnly" or access == "service"):
        raise _fail(where, "only a principal's read door that answers a document can be pinned by asOf")
    return Door(
        name=name,
        layer=layer,
        kind=kind,
        access=access,
        signature=_str(entry["signature"], where, "signature"),
        summary=_str(entry["summary"], where, "summary"),
        when=_str(entry["when"], where, "when"),
        method=method,
        path=path,
        params=params,
        sets=door_sets,
        refusals=refusals,
        disposition=form,
        release=release,
        instead=instead,
        destructive=destructive,
        rung=rung,
        pinnable=pinnable,
    )


def _server_door(index: int, entry: Any, refusal_names: set[str], sets: Mapping[str, RefusalSet]) -> ServerDoor:
    where = f"serverDoors[{index}]"
    if not isinstance(entry, dict):
        raise _fail(where, "must be an object")
    if isinstance(entry.get("name"), str):
        where = f"serverDoors[{index}] {entry['name']!r}"
    _keys(entry, where, _SERVER_FIELDS)
    name = _str(entry["name"], where, "name")
    if not re.match(r"^server\.[a-z][A-Za-z0-9]*$", name):
        raise _fail(where, "name must be server.<camelCase>")
    if entry["layer"] != SERVER_LAYER:
        raise _fail(where, f"layer must be {SERVER_LAYER!r}, not {entry['layer']!r}")
    if entry["who"] not in SERVER_WHO:
        raise _fail(where, f"unknown who {entry['who']!r} (one of {list(SERVER_WHO)})")
    method, path, http = _http(entry["http"], where, ("GET", "POST"), "/")
    if not set(http) <= {"method", "path", "accept"}:
        raise _fail(where, f"http must hold method, path and optionally accept, not {sorted(http)}")
    form, release, instead = _disposition(entry["disposition"], where)
    return ServerDoor(
        name=name,
        who=entry["who"],
        summary=_str(entry["summary"], where, "summary"),
        when=_str(entry["when"], where, "when"),
        answer=_str(entry["answer"], where, "answer"),
        method=method,
        path=path,
        accept=http.get("accept"),
        sets=_name_list(entry["sets"], where, "sets", sets, "a refusal set"),
        refusals=_name_list(entry["refusals"], where, "refusals", refusal_names, "in the refusals table"),
        disposition=form,
        release=release,
        instead=instead,
    )


def load(doc: Any) -> Contract:
    """Validate a parsed ``api-contract.json`` and answer the whole contract.

    Raises ``ContractError`` naming the entry (``doors[12] 'add'``) and what is wrong.
    """
    if not isinstance(doc, dict):
        raise _fail("top level", "must be an object")
    _keys(doc, "top level", _TOP_FIELDS)
    version = _str(doc["contractVersion"], "top level", "contractVersion")
    if not _RELEASE.match(version):
        raise _fail("top level", f"contractVersion must be X.Y.Z, not {version!r}")
    refusals = _refusal_table(doc["refusals"])
    refusal_names = {r["name"] for r in refusals}
    sets = _refusal_sets(doc["refusalSets"], refusal_names)
    if not isinstance(doc["doors"], list):
        raise _fail("doors", "must be a list")
    if not isinstance(doc["serverDoors"], list):
        raise _fail("serverDoors", "must be a list")

    doors: list[Door] = []
    seen: dict[str, int] = {}
    derived: dict[str, str] = {}
    routes: dict[tuple[str, str], str] = {}
    for index, entry in enumerate(doc["doors"]):
        door = _door(index, entry, refusal_names, sets)
        where = f"doors[{index}] {door.name!r}"
        if door.name in seen:
            raise _fail(where, f"duplicate name (first at doors[{seen[door.name]}])")
        seen[door.name] = index
        for surface, value in (("MCP tool", door.mcp_tool), ("gRPC rpc", door.grpc_rpc)):
            key = f"{surface} {value}"
            if key in derived:
                raise _fail(where, f"{surface} name {value!r} collides with door {derived[key]!r}")
            derived[key] = door.name
        if door.layer != "vfs":
            route = (door.method, door.path)
            if route == VFS_ROUTE or route in routes:
                other = routes.get(route, "the vfs doors")
                raise _fail(where, f"route {door.method} {door.path} is already {other!r}'s")
            routes[route] = door.name
        doors.append(door)

    server: list[ServerDoor] = []
    for index, entry in enumerate(doc["serverDoors"]):
        sdoor = _server_door(index, entry, refusal_names, sets)
        where = f"serverDoors[{index}] {sdoor.name!r}"
        if sdoor.name in seen:
            raise _fail(where, "duplicate name")
        seen[sdoor.name] = index
        route = (sdoor.method, sdoor.path)
        # A server door may share a door's route only when content negotiation tells
        # them apart (the SSE stream on GET P/changes, DOORS.md 10.2).
        if (route in routes or route == VFS_ROUTE) and sdoor.accept is None:
            raise _fail(where, f"route {sdoor.method} {sdoor.path} is already a door's, and no accept tells them apart")
        if any((s.method, s.path, s.accept) == (*route, sdoor.accept) for s in server):
            raise _fail(where, f"route {sdoor.method} {sdoor.path} is listed twice")
        server.append(replace(sdoor, holds=routes[route]) if route in routes else sdoor)

    return Contract(version, tuple(doors), tuple(server), sets, refusals)


def validate(doc: Any) -> tuple[Door, ...]:
    """Validate a parsed ``api-contract.json``; answer its doors or raise ``ContractError``."""
    return load(doc).doors


def read_contract(path: Path = CONTRACT_PATH) -> Any:
    """Parse the contract file, turning an unreadable file into ``ContractError``."""
    try:
        return json.loads(path.read_text("utf-8"))
    except (OSError, ValueError) as exc:
        raise ContractError(f"api-contract.json: unreadable: {exc}") from exc


CONTRACT: Contract = load(read_contract())
DOORS: tuple[Door, ...] = CONTRACT.doors
BY_NAME: Mapping[str, Door] = MappingProxyType({d.name: d for d in DOORS})
SERVER_DOORS: tuple[ServerDoor, ...] = CONTRACT.server_doors
REFUSAL_SETS: Mapping[str, RefusalSet] = CONTRACT.refusal_sets


# --------------------------------------------------------------------------- derivations


def all_refusals(door: Door, sets: Mapping[str, RefusalSet] = REFUSAL_SETS) -> tuple[str, ...]:
    """Every refusal a door can give: its sets' names, then its own, then its disposition's."""
    out: list[str] = []
    for key in door.sets:
        out.extend(n for n in sets[key].names_for(door.layer) if n not in out)
    out.extend(n for n in door.refusals if n not in out)
    if door.refusal_today is not None and door.refusal_today not in out:
        out.append(door.refusal_today)
    return tuple(out)


def route_table(doors: Sequence[Door] = DOORS) -> tuple[Route, ...]:
    """The HTTP route table: one ``Route`` per (method, path), in contract order.

    The vfs doors are one route selected by ``op``; it stands where the first vfs
    door stands.
    """
    routes: list[Route] = []
    vfs: dict[str, str] = {}
    for door in doors:
        if door.layer == "vfs":
            if not vfs:
                routes.append(Route(VFS_ROUTE[0], VFS_ROUTE[1], None, VFS_SELECTOR, MappingProxyType(vfs)))
            vfs[door.name] = door.name
        else:
            routes.append(Route(door.method, door.path, door.name))
    return tuple(routes)


def ws_doors(doors: Sequence[Door] = DOORS) -> frozenset[str]:
    """The WebSocket door set: the ``door`` values a frame may name."""
    return frozenset(d.ws_door for d in doors)


#: The owner rung a door asks beyond a principal key (DOORS.md 0.4), as its tool description says it.
_RUNG_LINES = MappingProxyType(
    {
        "owner": "Owner only: an owner triple, or an asserted owner.",
        "ownerTriple": "Owner only: the owner triple on a minted token.",
    }
)


def mcp_description(door: Door) -> str:
    """A door's MCP tool description (seed 000, "MCP"), one line each, in this order.

    The contract's summary; its one ``when`` line; the signature, verbatim; what the
    door asks beyond a principal key; and, while it does not answer, the refusal it
    gives (an agent reads the refusal before it writes the call). Nothing is said
    twice: a summary says what its ``when`` line does not (``api-contract.md``), and no
    line carries a label, since each line's place says what it is. Every token here is
    paid by every agent shown the tool (``docs/mcp.md``, "What an agent pays").
    """
    lines = [door.summary, door.when, door.signature]
    if door.access == "service":
        lines.append("Service key only.")
    if door.rung is not None:
        lines.append(_RUNG_LINES[door.rung])
    if door.disposition == "notYetNative":
        lines.append(f"NotYetNativeError until {door.release}.")
    elif door.disposition == "inProcessOnly":
        lines.append(f"InProcessOnlyError; instead: {door.instead}.")
    return "\n".join(lines)


def mcp_annotations(door: Door) -> dict[str, Any]:
    """A door's MCP tool annotations, each left out where it equals the specification's default.

    2025-06-18 defaults a tool to readOnlyHint false and, for a tool that is not
    read-only, destructiveHint true: a read says readOnlyHint, a write says
    destructiveHint only when it is false, and a destructive write says nothing.
    """
    if door.kind == "read":
        return {"readOnlyHint": True}
    return {} if door.destructive else {"destructiveHint": False}


def mcp_input_schema(door: Door, single_brain: bool = False) -> dict[str, Any]:
    """The MCP ``inputSchema`` of a door (DOORS.md 0.2: path params beside the document).

    Generated from the binding, and no further (seed 000, "MCP"): the path parameters
    are required strings (``brain`` may be left out when the key reaches exactly one
    brain, ``single_brain``), and a door that takes an argument document takes it whole
    as ``body``, an object, required when the document has a required field. The body's
    fields are not spelled out: the contract carries signatures, not schemas, and the
    signature travels verbatim in the tool's description. It is also where the tokens
    go (an agent pays for every tool it is shown): spelling every field out tripled the
    size of ``tools/list``. Exact but lean: ``additionalProperties`` is false (an
    argument the tool does not take is refused), and no keyword stands at its default
    (no empty ``required``). Doors off the brain path (``/v1/keys``) have no ``brain``;
    ``op`` is not listed for vfs doors: off HTTP the tool names the door.
    """
    properties: dict[str, Any] = {}
    required: list[str] = []
    for p in door.path_params:
        properties[p.name] = {"type": "string"}
        if p.name != "brain" or not single_brain:
            required.append(p.name)
    document = door.document_params
    if document:
        properties["body"] = {"type": "object"}
        if any(p.required for p in document):
            required.append("body")
    schema: dict[str, Any] = {"type": "object", "properties": properties, "additionalProperties": False}
    if required:
        schema["required"] = required
    return schema


def mcp_tools(single_brain: bool = False, doors: Sequence[Door] = DOORS) -> list[dict[str, Any]]:
    """The MCP tool list: one tool per door, in contract order, so every answer is the same bytes.

    No ``title``: it would be the name again in words, paid for by every agent, and
    2025-06-18 has a client show the name when there is none.
    """
    tools = []
    for door in doors:
        tool: dict[str, Any] = {
            "name": door.mcp_tool,
            "description": mcp_description(door),
            "inputSchema": mcp_input_schema(door, single_brain),
        }
        annotations = mcp_annotations(door)
        if annotations:
            tool["annotations"] = annotations
        tools.append(tool)
    return tools


GRPC_PACKAGE = "brainy.v1"
GRPC_SERVICE = "Brainy"


def grpc_service(doors: Sequence[Door] = DOORS) -> Mapping[str, str]:
    """The gRPC service ``brainy.v1.Brainy``: rpc name -> door name, in contract order."""
    return MappingProxyType({d.grpc_rpc: d.name for d in doors})


_PROTO_HEAD = """\
// Generated from brainy/contract/api-contract.json by tools/gen_contract.py.
// Do not edit; regenerate with `python tools/gen_contract.py`.
//
// One unary rpc per contract door, named by the door (DOORS.md 0.1: the contract
// name with "." replaced by "_"). A name that is a reserved word in a language
// stubs are generated for (Python, Go, Java, C#, C++, JavaScript) takes a trailing
// "_": the doors import and export are the rpcs import_ and export_, and stay so.
// Every rpc takes the same request and gives the
// same answer: the door's argument document and its answer travel as JSON text,
// so api-contract.json, not this file, is the schema of each door.
//
// A refusal is carried in the answer, never as a gRPC status. Statuses are kept for
// the transport's own failures: UNAUTHENTICATED for no credential and the
// identity-time token refusals (the message names which), INVALID_ARGUMENT for a
// message the server cannot read, UNIMPLEMENTED for an rpc not in this service.
// Every answer carries the dispatcher's measured milliseconds as the response
// metadata brainy-ms.
syntax = "proto3";

package {package};

// One door call. brain, id and sha256 are the door's path parameters; each is
// empty when the door has none. brain may be left out when the key reaches exactly
// one brain.
message DoorRequest {{
  string brain = 1;     // the {{brain}} path parameter
  string id = 2;        // the {{id}} path parameter of by-id doors
  string document = 3;  // the argument document as JSON text; empty means {{}}
  string sha256 = 4;    // the {{sha256}} path parameter (host.revokeKey)
}}

// A door's answer: exactly one of document and refusal.
message DoorAnswer {{
  oneof outcome {{
    string document = 1;  // the answer object as JSON text
    string refusal = 2;   // the refusal {{"name", "message", ...fields}} as JSON text
  }}
}}

service {service} {{
"""


def proto_text(doors: Sequence[Door] = DOORS) -> str:
    """The text of ``docs/brainy.proto``."""
    out = [_PROTO_HEAD.format(package=GRPC_PACKAGE, service=GRPC_SERVICE)]
    for i, door in enumerate(doors):
        if i:
            out.append("\n")
        when = " ".join(door.when.split())
        out.append(f"  // {door.name}: {when}\n")
        if door.disposition == "notYetNative":
            out.append(f"  // Refuses today: NotYetNativeError (arrives in {door.release}).\n")
        elif door.disposition == "inProcessOnly":
            out.append("  // Refuses on every transport: InProcessOnlyError.\n")
        out.append(f"  rpc {door.grpc_rpc} (DoorRequest) returns (DoorAnswer);\n")
    out.append("}\n")
    return "".join(out)


def _bindings(door: Door) -> dict[str, Any]:
    return {"mcp": {"tool": door.mcp_tool}, "grpc": {"rpc": door.grpc_rpc}, "ws": {"door": door.ws_door}}


def contract_envelope(version: str, built_at: str, contract: Contract = CONTRACT) -> dict[str, Any]:
    """The ``/contract.json`` document (DESIGN.md): every door with its bindings, every refusal."""
    layers = []
    for layer in LAYERS:
        layers.append(
            {
                "name": layer,
                "doors": [{**d.to_entry(), **_bindings(d)} for d in contract.doors if d.layer == layer],
            }
        )
    layers.append({"name": SERVER_LAYER, "doors": [s.to_entry() for s in contract.server_doors]})
    refusals = []
    for entry in contract.refusals:
        row: dict[str, Any] = {
            "name": entry["name"],
            "status": entry.get("status"),
            "meaning": entry.get("meaning", ""),
            "fields": list(entry.get("fields", ())),
            "optional": list(entry.get("optional", ())),
        }
        if entry.get("ws") is not None:
            row["ws"] = dict(entry["ws"])
        refusals.append(row)
    return {
        "service": "brainy",
        "version": version,
        "builtAt": built_at,
        "contractVersion": contract.contract_version,
        "layers": layers,
        "refusalSets": {k: s.to_entry() for k, s in contract.refusal_sets.items()},
        "refusals": refusals,
    }


def envelope_text(version: str, built_at: str, contract: Contract = CONTRACT) -> str:
    """``contract_envelope`` rendered as the committed ``docs/contract.json`` is written."""
    return json.dumps(contract_envelope(version, built_at, contract), indent=1, ensure_ascii=False) + "\n"
