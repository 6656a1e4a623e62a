"""Named refusals: one root, one class per refusal name in ``api-contract.json``.

The classes are made at import from the contract's ``refusals`` table, as the door
table validated it (``brainy/contract/doors.py``: names unique, fields plain names and
never ``name`` or ``message``, which every refusal's wire document already holds), so
the table is the only place a refusal's name, HTTP status and fields are written.
A refusal is raised where a rule breaks and turned into a wire answer at one
boundary (the dispatcher); every transport carries it as
``{"error": {"name", "message", ...fields}}``.

Several names (``FileNotFoundError``, ``FileExistsError``, ``NotADirectoryError``,
``IsADirectoryError``) shadow Python builtins, so callers import this module
(``from brainy.contract import refusals as R``) rather than its names.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from brainy.contract.doors import CONTRACT


class Refusal(Exception):
    """The root of every named refusal.

    ``fields`` are the class's wire fields (section 11 of the door catalogue);
    an unknown field is a programming error and raises ``TypeError`` at once.
    """

    name: ClassVar[str] = "Refusal"
    status: ClassVar[int | None] = None
    required: ClassVar[tuple[str, ...]] = ()
    optional: ClassVar[tuple[str, ...]] = ()
    meaning: ClassVar[str] = ""
    ws: ClassVar[dict[str, Any] | None] = None

    def __init__(self, message: str | None = None, **fields: Any) -> None:
        allowed = set(self.required) | set(self.optional)
        unknown = set(fields) - allowed
        if unknown:
            raise TypeError(f"{self.name} has no field(s) {sorted(unknown)}")
        missing = [f for f in self.required if f not in fields]
        if missing:
            raise TypeError(f"{self.name} needs field(s) {missing}")
        self.message = message or self.meaning
        self.fields = fields
        super().__init__(self.message)

    def to_wire(self) -> dict[str, Any]:
        """The refusal document: ``{"name", "message", ...fields}``."""
        body: dict[str, Any] = {"name": self.name, "message": self.message}
        for key, value in self.fields.items():
            body[key] = value.to_wire() if isinstance(value, Refusal) else value
        return body

    def __getattr__(self, item: str) -> Any:
        fields = self.__dict__.get("fields", {})
        if item in fields:
            return fields[item]
        raise AttributeError(item)

    def __repr__(self) -> str:
        inner = ", ".join(f"{k}={v!r}" for k, v in self.fields.items())
        return f"{self.name}({inner})"


REGISTRY: dict[str, type[Refusal]] = {}


def _define(entry: Mapping[str, Any]) -> type[Refusal]:
    name = entry["name"]
    if name in REGISTRY:
        raise RuntimeError(f"api-contract.json: refusal {name!r} is listed twice")
    cls = type(
        name,
        (Refusal,),
        {
            "name": name,
            "status": entry.get("status"),
            "required": tuple(entry.get("fields", ())),
            "optional": tuple(entry.get("optional", ())),
            "meaning": entry.get("meaning", ""),
            "ws": entry.get("ws"),
            "__module__": __name__,
            "__doc__": entry.get("meaning", ""),
        },
    )
    REGISTRY[name] = cls
    return cls


def _load() -> None:
    # A broken contract has already stopped the import of the door table, naming the entry.
    for entry in CONTRACT.refusals:
        globals()[entry["name"]] = _define(entry)


_load()


def by_name(name: str) -> type[Refusal]:
    """The refusal class registered under ``name``."""
    return REGISTRY[name]
