"""A call's argument document checked against the door's declared arguments: one check for every transport.

The contract declares each door's arguments once (name, type, required or default). The dispatcher
runs :func:`check` on every call's document before the door's function, whichever transport carried
it, and the in-process API runs the same check; a batch door runs it on each item with the item's
place as the prefix (``items[3].``). The check is what the declaration states: no argument the door
does not take, every required one present and not null, and the scalar types (``string``, ``int``,
``boolean``) exact (a null string reads as left out; a null flag or count is refused). Deeper
shapes (a ``Where``, a literal union's members, a number's range) are the door's own to check,
with the refusals the door catalogue names for them.

Every refusal is ``InvalidArgumentError {field, reason}`` with the reasons ``unknown-argument``,
``missing`` and ``wrong-type``, except a type refused on a door whose own law names it
``BadQueryParameterError {param}`` (the change feed).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from brainy.contract import refusals as R
from brainy.contract.doors import Door

# A null string reads as the argument left out (a door's optional strings are nullable); a null flag or
# count is refused, as the door catalogue's types say.
_SCALARS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "string": (lambda v: v is None or isinstance(v, str), "must be a string"),
    "int": (lambda v: isinstance(v, int) and not isinstance(v, bool), "must be an integer"),
    "boolean": (lambda v: isinstance(v, bool), "must be true or false"),
}


class Declared:
    """One door's document arguments, prepared once: names, required names, and scalar type tests."""

    __slots__ = ("names", "allowed", "required", "defaults", "scalars", "as_parameter")

    def __init__(self, door: Door) -> None:
        params = door.document_params
        self.names = frozenset(p.name for p in params)
        self.allowed = sorted(self.names)
        self.required = tuple(p.name for p in params if p.required)
        self.defaults = tuple((p.name, p.default) for p in params if p.default is not None)
        self.scalars = tuple((p.name, *_SCALARS[p.type]) for p in params if p.type in _SCALARS)
        # the change feed names an unusable parameter BadQueryParameterError (DOORS.md 6), its own refusal
        self.as_parameter = "BadQueryParameterError" in door.refusals


_DECLARED: dict[str, Declared] = {}


def declared(door: Door) -> Declared:
    found = _DECLARED.get(door.name)
    if found is None:
        found = _DECLARED[door.name] = Declared(door)
    return found


def _refuse(field: str, reason: str, message: str) -> R.Refusal:
    return R.InvalidArgumentError(f"{field}: {message}", field=field, reason=reason)


def check(door: Door, document: Any, where: str = "") -> dict[str, Any]:
    """``document`` as the door takes it, or InvalidArgumentError. None reads as no arguments; an
    optional argument left out is given its declared default (a new document: the caller's is not
    touched), so a door's code reads its defaults from the contract, never from a literal of its own."""
    if document is None:
        document = {}
    if not isinstance(document, dict):
        raise _refuse(where or "args", "wrong-type", "the arguments must be an object")
    d = declared(door)
    if not d.names.issuperset(document):
        unknown = sorted(set(document) - d.names)[0]
        raise _refuse(f"{where}{unknown}", "unknown-argument", f"not an argument of this door (takes {d.allowed})")
    for name in d.required:
        if document.get(name) is None:
            raise _refuse(where + name, "missing", "required")
    for name, test, message in d.scalars:
        if name in document and not test(document[name]):
            if d.as_parameter:
                raise R.BadQueryParameterError(f"{where}{name}: {message}", param=where + name)
            raise _refuse(where + name, "wrong-type", message)
    absent = [(name, value) for name, value in d.defaults if name not in document]
    if absent:
        document = dict(document)
        for name, value in absent:
            document[name] = list(value) if isinstance(value, list) else value
    return document
