"""The root of every named refusal, the registry, and ``by_name``.

The classes themselves are ``brainy/contract/refusals.py``, written out from the contract's
``refusals`` table by ``tools/gen_contract.py``, one ``class XError(Refusal)`` per entry, so the
table stays the only place a refusal's name, HTTP status and fields are written while editors,
linters and type checkers see every class. Each class registers itself as it is created
(``Refusal.__init_subclass__``): its name is its class name, and a name defined twice stops the
import. Import the classes from ``refusals`` (``from brainy.contract import refusals as R``),
which also gives ``R.Refusal``, ``R.REGISTRY`` and ``R.by_name``; this module is its base. A class's
``meaning`` (its default message) is its docstring (:func:`meaning_of`), so the generated module
writes it once; a class states ``meaning`` apart only where its docstring cannot say it exactly.

A refusal is raised where a rule breaks and turned into a wire answer at one boundary (the
dispatcher); every transport carries it as ``{"error": {"name", "message", ...fields}}``.
"""

from __future__ import annotations

import inspect
from typing import Any, ClassVar


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

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Register the new class under its own name; a name already registered is refused. A class with a
        docstring and no ``meaning`` of its own means what its docstring says; one with neither keeps its
        parent's."""
        super().__init_subclass__(**kwargs)
        name = cls.__name__
        if name in REGISTRY:
            raise RuntimeError(f"refusal {name!r} is defined twice: {REGISTRY[name].__module__} already has it")
        cls.name = name
        doc = cls.__dict__.get("__doc__")
        if doc and "meaning" not in cls.__dict__:
            cls.meaning = meaning_of(doc)
        REGISTRY[name] = cls

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


#: Every refusal class by name, in the order the classes were made (the contract's order).
REGISTRY: dict[str, type[Refusal]] = {}


def by_name(name: str) -> type[Refusal]:
    """The refusal class registered under ``name``."""
    return REGISTRY[name]


def meaning_of(doc: str | None) -> str:
    """The meaning a refusal's docstring says: its lines joined by single spaces, with the space the generator
    puts between a quote at either end and the docstring's own quotes dropped (tools/gen_contract.py wraps the
    meaning into the docstring; it states ``meaning`` apart wherever this does not give it back exactly)."""
    return " ".join(inspect.cleandoc(doc).split("\n")).strip() if doc else ""
