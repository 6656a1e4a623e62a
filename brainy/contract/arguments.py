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
# The exact types each scalar type takes without asking its test (a subclass of one asks it): the common case of
# a batch's thousand items, each checked, costs a type lookup a scalar, not a call.
_PASSING: dict[str, frozenset[type]] = {
    "string": frozenset((type(None), str)),
    "int": frozenset((int,)),
    "boolean": frozenset((bool,)),
}


class Declared:
    """One door's document arguments, prepared once: names, required names, and scalar type tests."""

    __slots__ = ("names", "allowed", "required", "defaults", "scalars", "as_parameter", "passing")

    def __init__(self, door: Door) -> None:
        params = door.document_params
        self.names = frozenset(p.name for p in params)
        self.allowed = sorted(self.names)
        self.required = tuple(p.name for p in params if p.required)
        self.defaults = tuple((p.name, p.default) for p in params if p.default is not None)
        self.scalars = tuple((p.name, *_SCALARS[p.type]) for p in params if p.type in _SCALARS)
        self.passing = tuple(_PASSING[p.type] for p in params if p.type in _SCALARS)  # beside scalars, in order
        # the change feed names an unusable parameter BadQueryParameterError (DOORS.md 6), its own refusal
        self.as_parameter = "BadQueryParameterError" in door.refusals

    def check(self, document: Any, where: str = "", fill: bool = True) -> dict[str, Any]:
        """:func:`check` against this door's declaration; without ``fill`` the document itself, its defaults left
        out (for a rule that reads them with :meth:`default`: a batch's items are not each copied)."""
        if document is None:
            document = {}
        if not isinstance(document, dict):
            raise _refuse(where or "args", "wrong-type", "the arguments must be an object")
        if not self.names.issuperset(document):
            unknown = sorted(set(document) - self.names)[0]
            raise _refuse(
                f"{where}{unknown}", "unknown-argument", f"not an argument of this door (takes {self.allowed})"
            )
        for name in self.required:
            if document.get(name) is None:
                raise _refuse(where + name, "missing", "required")
        for (name, test, message), passing in zip(self.scalars, self.passing):
            if name in document:
                value = document[name]
                if type(value) not in passing and not test(value):
                    if self.as_parameter:
                        raise R.BadQueryParameterError(f"{where}{name}: {message}", param=where + name)
                    raise _refuse(where + name, "wrong-type", message)
        if not fill:
            return document
        out = None
        for name, value in self.defaults:
            if name not in document:
                if out is None:
                    out = dict(document)
                out[name] = list(value) if isinstance(value, list) else value
        return document if out is None else out

    def default(self, name: str) -> Any:
        """The declared default of the argument ``name`` (None when it has none); a list is a new one each time."""
        for known, value in self.defaults:
            if known == name:
                return list(value) if isinstance(value, list) else value
        return None


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
    return declared(door).check(document, where)
