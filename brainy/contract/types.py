"""The contract's type notation as data: each param's ``type`` string parsed once into an immutable tree.

DOORS.md writes every argument's type in a small TypeScript-like notation, and
``api-contract.json`` carries it verbatim in each param's ``type``. This module reads
that notation and gives the tree two uses:

* ``schema(t)``: the JSON Schema (2020-12, the dialect OpenAPI 3.1 uses) of the type;
* ``check(t, value)``: whether a decoded JSON (or MessagePack) value conforms, at the
  level the notation states; ``None``, or a :class:`Mismatch` saying where and why.

The grammar, as the contract and the signatures write it::

    type    := ["|"] postfix ("|" postfix)*              a union; a leading "|" is allowed
    postfix := primary ("[]" | "[" INT "]")*             a list, or a list of exactly INT items
    primary := "(" type ")"                              grouping: ("a" | "b")[]
             | "(" members ")" "=>" type                 a function: a live callback
             | "{" members "}"                           an object shape
             | "[" type "]"                              DOORS.md's "a list of T" in answers
             | STRING | NUMBER | "true" | "false" | "null"    a literal
             | NAME ["<" type ("," type)* ">"]           a primitive or a named type
    members := (member ("," | ";"))* [member]
    member  := NAME ["?"] [":" type]                     a key; a bare key's value is not stated
             | "[" NAME [":" type] "]" ":" type          an index signature: any key, values T

Primitives (``PRIMITIVES``): ``string``, ``int`` (a whole number), ``number`` (finite),
``boolean``, ``object`` (any JSON object), ``any``, and ``void`` (a callback's result).
``null`` is the literal null. Every other name is a *named type* the notation does not
define (``Where``, ``FindQuery``, ``AddArgs``, ...): DOORS.md defines it in prose, so its
schema is permissive with a description naming it, and ``check`` lets any value through,
leaving the door's own code to check deeper. Three named types are known to be strings
(``STRING_NAMES``: the taxonomy's ``NounType`` and ``VerbType``, DOORS.md 2.1 and 2.2, and
the visibility ``tier``, 2.4); their members are the door's to check, so a wrong noun keeps
the door's own ``unknown-type`` refusal.

Object shapes are closed: a key the shape does not list is ``unknown-argument``, as the
doors' own argument checks refuse (``rows.check_args``). A key without a ``?`` is
required. A function type has no value on any wire, so nothing conforms to it.

Pure: no IO, no clock. ``parse`` is cached per string, so a param's tree is built once
(the door table parses every param at import) and shared.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from functools import cache
from typing import Any, NamedTuple

#: The notation's primitive names and the JSON Schema each one is.
PRIMITIVES: dict[str, dict[str, Any]] = {
    "string": {"type": "string"},
    "int": {"type": "integer"},
    "number": {"type": "number"},
    "boolean": {"type": "boolean"},
    "object": {"type": "object"},
    "any": {},
    # No JSON value is a callback's missing result; only a function type's result says void.
    "void": {"not": {}},
}

#: Named types whose values are strings (DOORS.md 0.2: "the taxonomy names are strings").
STRING_NAMES: dict[str, str] = {
    "NounType": "one of the taxonomy's noun types (DOORS.md 2.1)",
    "VerbType": "one of the taxonomy's verb types (DOORS.md 2.2)",
    "tier": "a visibility tier, public, internal or system (DOORS.md 2.4)",
}

#: Why ``check`` refused. ``wrong-type``: the value is another JSON kind; ``not-one-of``: the
#: right kind but none of the literals; ``bad-length``: a fixed-length list of another length;
#: ``missing``: a required key is absent; ``unknown-argument``: a closed shape has no such key.
REASONS = ("wrong-type", "not-one-of", "bad-length", "missing", "unknown-argument")


class NotationError(ValueError):
    """A type string that does not parse; the message says at which character and what was expected."""


# --------------------------------------------------------------------------- the tree


@dataclass(frozen=True, slots=True)
class Prim:
    """A primitive: ``string``, ``int``, ``number``, ``boolean``, ``object``, ``any``, ``void``."""

    name: str

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True, slots=True)
class Lit:
    """A literal: a string, a whole number, a number, ``true``, ``false`` or ``null`` (``None``)."""

    value: str | int | float | bool | None

    def __str__(self) -> str:
        if isinstance(self.value, str):
            return '"' + self.value + '"'
        if self.value is None:
            return "null"
        if isinstance(self.value, bool):
            return "true" if self.value else "false"
        return repr(self.value)


@dataclass(frozen=True, slots=True)
class Named:
    """A named type the notation does not define (``Where``, ``Promise<T>``): DOORS.md's prose does."""

    name: str
    args: tuple[Node, ...] = ()

    def __str__(self) -> str:
        if not self.args:
            return self.name
        return f"{self.name}<{', '.join(str(a) for a in self.args)}>"


@dataclass(frozen=True, slots=True)
class Array:
    """A list of ``item``s; ``length`` fixes how many (``number[384]``)."""

    item: Node
    length: int | None = None

    def __str__(self) -> str:
        inner = str(self.item)
        if isinstance(self.item, (Union, Func)):
            inner = f"({inner})"
        return f"{inner}[{'' if self.length is None else self.length}]"


@dataclass(frozen=True, slots=True)
class Union:
    """Any one of ``options`` (at least two)."""

    options: tuple[Node, ...]

    def __str__(self) -> str:
        return " | ".join(f"({o})" if isinstance(o, Func) else str(o) for o in self.options)


@dataclass(frozen=True, slots=True)
class Field:
    """One key of a shape (or a function's parameter); ``type`` None is a bare key, its value unstated."""

    name: str
    type: Node | None
    optional: bool = False

    def __str__(self) -> str:
        mark = "?" if self.optional else ""
        return f"{self.name}{mark}" if self.type is None else f"{self.name}{mark}: {self.type}"


@dataclass(frozen=True, slots=True)
class Shape:
    """An object with the keys ``fields`` and no others, or, with ``rest``, any further key valued ``rest``."""

    fields: tuple[Field, ...]
    rest: Node | None = None
    # The key set, computed once: check() asks it of every object it meets.
    names: frozenset[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "names", frozenset(f.name for f in self.fields))

    def __str__(self) -> str:
        parts = [str(f) for f in self.fields]
        if self.rest is not None:
            parts.append(f"[key: string]: {self.rest}")
        return "{" + ", ".join(parts) + "}"


@dataclass(frozen=True, slots=True)
class Func:
    """A function (``(e: ChangeFrame) => void``): a live in-process object that no wire carries."""

    params: tuple[Field, ...]
    result: Node

    def __str__(self) -> str:
        return f"({', '.join(str(p) for p in self.params)}) => {self.result}"


#: Any node of the tree.
Node = Prim | Lit | Named | Array | Union | Shape | Func


# --------------------------------------------------------------------------- parsing

_TOKEN = re.compile(
    r"""
    \s*(?:
      (?P<string>"[^"]*")
    | (?P<number>-?\d+(?:\.\d+)?)
    | (?P<name>[A-Za-z_][A-Za-z0-9_]*)
    | (?P<punct>=>|[|\[\](){}<>,;:?])
    )""",
    re.VERBOSE,
)
_KEYWORDS = {"true": True, "false": False, "null": None}


class _Parser:
    """Recursive descent over the tokens of one type string."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens: list[tuple[str, str, int]] = []  # (kind, text, offset)
        pos = 0
        while True:
            m = _TOKEN.match(text, pos)
            if m is None:  # every token is non-empty: the end, or a character no token starts with
                rest = text[pos:]
                if rest.strip():
                    offset = pos + len(rest) - len(rest.lstrip())
                    raise self._error(offset, f"unexpected character {text[offset]!r}")
                break
            kind = m.lastgroup or "punct"
            self.tokens.append((kind, m.group(kind), m.start(kind)))
            pos = m.end()
        self.i = 0

    def _error(self, offset: int, what: str) -> NotationError:
        return NotationError(f"type {self.text!r}: at character {offset}: {what}")

    def _peek(self, ahead: int = 0) -> tuple[str, str, int]:
        j = self.i + ahead
        return self.tokens[j] if j < len(self.tokens) else ("end", "", len(self.text))

    def _is(self, text: str, ahead: int = 0) -> bool:
        kind, value, _ = self._peek(ahead)
        return kind == "punct" and value == text

    def _expected(self, what: str) -> NotationError:
        """An error at the current token: ``what`` was expected, and this was found instead."""
        kind, value, offset = self._peek()
        return self._error(offset, f"expected {what}, found " + ("the end" if kind == "end" else repr(value)))

    def _take(self, text: str) -> None:
        if not self._is(text):
            raise self._expected(repr(text))
        self.i += 1

    def whole(self) -> Node:
        node = self.type()
        if self._peek()[0] != "end":
            raise self._expected("the end of the type")
        return node

    def type(self) -> Node:
        if self._is("|"):
            self.i += 1
        options: list[Node] = []
        while True:
            option = self.postfix()
            # ("a" | "b") | "c" is one union of three: a union never holds a union.
            options.extend(option.options if isinstance(option, Union) else (option,))
            if not self._is("|"):
                break
            self.i += 1
        return options[0] if len(options) == 1 else Union(tuple(options))

    def postfix(self) -> Node:
        node = self.primary()
        while self._is("["):
            kind, value, offset = self._peek(1)
            if kind == "punct" and value == "]":
                self.i += 2
                node = Array(node)
            elif kind == "number" and value.isdigit() and self._is("]", 2):
                self.i += 3
                node = Array(node, int(value))
            else:
                self.i += 1
                raise self._expected("']' or a length")
        return node

    def primary(self) -> Node:
        kind, value, offset = self._peek()
        if kind == "punct":
            if value == "(":
                return self._function() if self._is("=>", self._closing(")") - self.i + 1) else self._group()
            if value == "{":
                self.i += 1
                fields, rest = self._members("}")
                self._take("}")
                return Shape(fields, rest)
            if value == "[":
                self.i += 1
                item = self.type()
                self._take("]")
                return Array(item)
        if kind == "string":
            self.i += 1
            return Lit(value[1:-1])
        if kind == "number":
            self.i += 1
            return Lit(float(value) if "." in value else int(value))
        if kind == "name":
            self.i += 1
            if value in _KEYWORDS:
                return Lit(_KEYWORDS[value])
            if value in PRIMITIVES:
                return Prim(value)
            args: list[Node] = []
            if self._is("<"):
                self.i += 1
                args.append(self.type())
                while self._is(","):
                    self.i += 1
                    args.append(self.type())
                self._take(">")
            return Named(value, tuple(args))
        raise self._expected("a type")

    def _closing(self, close: str) -> int:
        """The index of the token closing the bracket at the current token."""
        depth = 0
        for j in range(self.i, len(self.tokens)):
            kind, value, _ = self.tokens[j]
            if kind == "punct" and value in "([{<":
                depth += 1
            elif kind == "punct" and value in ")]}>":
                depth -= 1
                if depth == 0:
                    return j
        raise self._error(self.tokens[self.i][2], f"this bracket is never closed by {close!r}")

    def _group(self) -> Node:
        self._take("(")
        node = self.type()
        self._take(")")
        return node

    def _function(self) -> Node:
        self._take("(")
        params, rest = self._members(")")
        if rest is not None:
            raise self._expected("a parameter, not an index signature")
        self._take(")")
        self._take("=>")
        return Func(params, self.type())

    def _members(self, close: str) -> tuple[tuple[Field, ...], Node | None]:
        fields: list[Field] = []
        rest: Node | None = None
        while not self._is(close):
            kind, value, offset = self._peek()
            if self._is("["):  # an index signature: [key: string]: T
                self.i += 1
                if self._peek()[0] != "name":
                    raise self._expected("the index signature's key name")
                self.i += 1
                if self._is(":"):
                    self.i += 1
                    self.type()  # the key's type: keys are strings on every wire
                self._take("]")
                self._take(":")
                if rest is not None:
                    raise self._error(offset, "a second index signature")
                rest = self.type()
            elif kind == "name":
                self.i += 1
                optional = self._is("?")
                if optional:
                    self.i += 1
                node: Node | None = None
                if self._is(":"):
                    self.i += 1
                    node = self.type()
                if any(f.name == value for f in fields):
                    raise self._error(offset, f"the key {value!r} is listed twice")
                fields.append(Field(value, node, optional))
            else:
                raise self._expected("a key")
            if self._is(",") or self._is(";"):
                self.i += 1
            elif not self._is(close):
                raise self._expected(f"',' or {close!r}")
        return tuple(fields), rest


def parse(text: str) -> Node:
    """The tree of one type string; raises :class:`NotationError` saying where it does not parse.

    Cached per string: every param of the same type shares one tree.
    """
    if not isinstance(text, str):
        raise NotationError(f"a type is a string, not {text!r}")
    return _parse(text)


@cache
def _parse(text: str) -> Node:
    return _Parser(text).whole()


_SIGNATURE = re.compile(r"(?P<name>[A-Za-z_][A-Za-z0-9_]*)\((?P<args>.*)\): (?P<answer>.+)", re.DOTALL)


def parse_signature(text: str) -> tuple[str, Func]:
    """A door's signature (``find(query: FindQuery): Promise<FindAnswer>``) as its name and a function type.

    The arguments are the function's parameters and the answer its result, ``Promise``
    and all; raises :class:`NotationError` when the signature does not parse.
    """
    m = _SIGNATURE.fullmatch(text) if isinstance(text, str) else None
    if m is None:
        raise NotationError(f"signature {text!r}: not name(arguments): answer")
    tree = parse(f"({m['args']}) => {m['answer']}")
    assert isinstance(tree, Func)  # "(...) => T" parses as nothing else
    return m["name"], tree


# --------------------------------------------------------------------------- JSON Schema


def _named_description(node: Named) -> str:
    if node.name in STRING_NAMES:
        return f"{node.name}: {STRING_NAMES[node.name]}; the door checks which."
    return (
        f"{node}: a type DOORS.md defines in prose, not in the contract's notation; any value passes "
        "this schema and the door checks it."
    )


def schema(t: Node) -> dict[str, Any]:
    """The JSON Schema (2020-12, as OpenAPI 3.1 uses it) of a type.

    It states exactly what ``check`` does, with one difference JSON cannot express: JSON
    Schema's ``integer`` also matches ``1.0``, which JSON's data model holds equal to ``1``
    and which ``check`` refuses, as the doors do.
    """
    if isinstance(t, Prim):
        return dict(PRIMITIVES[t.name])
    if isinstance(t, Lit):
        return {"const": t.value}
    if isinstance(t, Named):
        if t.name in STRING_NAMES:
            return {"type": "string", "description": _named_description(t)}
        return {"description": _named_description(t)}
    if isinstance(t, Array):
        out: dict[str, Any] = {"type": "array", "items": schema(t.item)}
        if t.length is not None:
            out["minItems"] = out["maxItems"] = t.length
        return out
    if isinstance(t, Union):
        literals = [o.value for o in t.options if isinstance(o, Lit)]
        if len(literals) == len(t.options) and len({_kind(v) for v in literals}) == 1:
            # A union of literals of one kind reads best (and types a query parameter) as an enum.
            kind = _kind(literals[0])
            base = {
                "string": {"type": "string"},
                "integer": {"type": "integer"},
                "number": {"type": "number"},
                "boolean": {"type": "boolean"},
                "null": {"type": "null"},
            }[kind]
            return {**base, "enum": literals}
        return {"anyOf": [schema(o) for o in t.options]}
    if isinstance(t, Shape):
        out = {"type": "object"}
        if t.fields:
            out["properties"] = {f.name: {} if f.type is None else schema(f.type) for f in t.fields}
        required = [f.name for f in t.fields if not f.optional]
        if required:
            out["required"] = required
        out["additionalProperties"] = False if t.rest is None else schema(t.rest)
        return out
    if isinstance(t, Func):
        return {"not": {}, "description": f"{t}: a live callback, which no wire carries."}
    raise TypeError(f"not a type node: {t!r}")


# --------------------------------------------------------------------------- checking


class Mismatch(NamedTuple):
    """Where a value fails its type, why, and what was expected there.

    ``path`` is relative to the checked value: ``""`` for the value itself, ``".key"`` and
    ``"[3]"`` below it (``items[3].type`` once the caller prefixes the param's name).
    ``reason`` is one of ``REASONS``; ``expected`` is the notation the value missed.
    """

    path: str
    reason: str
    expected: str


def _kind(value: Any) -> str:
    """The JSON kind of a decoded value: string, integer, number, boolean, null, array, object, or other."""
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if value is None:
        return "null"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return "other"


def _finite(value: Any) -> bool:
    return isinstance(value, int) or math.isfinite(value)


#: Whether a value is of a primitive, by the value's JSON kind (int is a whole number, never a bool).
_PRIM_KINDS: dict[str, frozenset[str]] = {
    "string": frozenset({"string"}),
    "int": frozenset({"integer"}),
    "number": frozenset({"integer", "number"}),
    "boolean": frozenset({"boolean"}),
    "object": frozenset({"object"}),
    "void": frozenset(),
}

#: The exact Python types the decoders give for a primitive's values, for lists checked in one pass.
_EXACT: dict[str, frozenset[type]] = {
    "string": frozenset({str}),
    "int": frozenset({int}),
    "number": frozenset({int, float}),
    "boolean": frozenset({bool}),
    "object": frozenset({dict}),
}


def _all_of(name: str, values: list[Any]) -> bool:
    """True when every value is surely of the primitive ``name``: a vector's 384 numbers in one pass.

    False means "walk the list", not "a mismatch": the walk finds which item misses, if any.
    """
    exact = _EXACT.get(name)
    if exact is None or not set(map(type, values)) <= exact:
        return False
    if name != "number":
        return True
    try:
        return all(map(math.isfinite, values))
    except OverflowError:  # an int past a float's range is finite all the same; the walk says so
        return False


# A miss is (path parts innermost-last, reason, node); the path string is built only on failure.
_Miss = tuple[list[str], str, Any]


def _matches_kind(t: Node, kind: str) -> bool:
    """True when ``t`` admits some value of JSON kind ``kind`` (to pick a union's most telling miss)."""
    if isinstance(t, Prim):
        return t.name == "any" or kind in _PRIM_KINDS[t.name]
    if isinstance(t, Lit):
        return _kind(t.value) == kind or (kind == "number" and _kind(t.value) == "integer")
    if isinstance(t, Named):
        return kind == "string" if t.name in STRING_NAMES else True
    if isinstance(t, Array):
        return kind == "array"
    if isinstance(t, Shape):
        return kind == "object"
    if isinstance(t, Union):
        return any(_matches_kind(o, kind) for o in t.options)
    return False


def _miss(t: Node, value: Any) -> _Miss | None:
    if isinstance(t, Prim):
        if t.name == "any":
            return None
        kind = _kind(value)
        if kind in _PRIM_KINDS[t.name] and (t.name != "number" or _finite(value)):
            return None
        return [], "wrong-type", t
    if isinstance(t, Lit):
        if _kind(value) == _kind(t.value) and value == t.value:
            return None
        return [], ("not-one-of" if _matches_kind(t, _kind(value)) else "wrong-type"), t
    if isinstance(t, Named):
        if t.name in STRING_NAMES and not isinstance(value, str):
            return [], "wrong-type", t
        return None
    if isinstance(t, Array):
        if not isinstance(value, list):
            return [], "wrong-type", t
        if t.length is not None and len(value) != t.length:
            return [], "bad-length", t
        if isinstance(t.item, Prim) and _all_of(t.item.name, value):
            return None
        for i, item in enumerate(value):
            inner = _miss(t.item, item)
            if inner is not None:
                inner[0].append(f"[{i}]")
                return inner
        return None
    if isinstance(t, Union):
        return _union_miss(t, value)
    if isinstance(t, Shape):
        return _shape_miss(t, value)
    return [], "wrong-type", t  # a Func: nothing on a wire is a live callback


def _union_miss(t: Union, value: Any) -> _Miss | None:
    misses = []
    for option in t.options:
        inner = _miss(option, value)
        if inner is None:
            return None
        misses.append((option, inner))
    kind = _kind(value)
    near = [m for o, m in misses if _matches_kind(o, kind)]
    if not near:
        return [], "wrong-type", t
    if all(not m[0] for m in near):  # no option got below the value itself: say it of the union
        reasons = {m[1] for m in near}
        return [], reasons.pop() if len(reasons) == 1 else "not-one-of", t
    return max(near, key=lambda m: len(m[0]))  # the option the value went deepest into


def _shape_miss(t: Shape, value: Any) -> _Miss | None:
    if not isinstance(value, dict):
        return [], "wrong-type", t
    if t.rest is None and not t.names.issuperset(value):
        # Unknown keys first, the first in sorted order, as the doors' argument checks report them
        # (rows.check_args).
        unknown = min((k for k in value if k not in t.names), key=str)
        return [f".{unknown}"], "unknown-argument", t
    for f in t.fields:
        if f.name not in value:
            if not f.optional:
                return [f".{f.name}"], "missing", f.type if f.type is not None else Prim("any")
            continue
        if f.type is not None:
            inner = _miss(f.type, value[f.name])
            if inner is not None:
                inner[0].append(f".{f.name}")
                return inner
    if t.rest is not None:
        for key, item in value.items():
            if key not in t.names:
                inner = _miss(t.rest, item)
                if inner is not None:
                    inner[0].append(f".{key}")
                    return inner
    return None


def check(t: Node, value: Any) -> Mismatch | None:
    """``None`` when ``value`` conforms to ``t`` at the level the notation states, else a :class:`Mismatch`.

    Named types the notation does not define accept any value (the door checks deeper);
    ``NounType``, ``VerbType`` and ``tier`` accept any string.
    """
    found = _miss(t, value)
    if found is None:
        return None
    parts, reason, node = found
    return Mismatch("".join(reversed(parts)), reason, str(node))


def is_scalar(t: Node) -> bool:
    """True when every value of ``t`` is a scalar a query string can carry (DOORS.md 0.2).

    Scalars are strings, whole numbers, numbers and booleans: the primitives, the non-null
    literals, the string-valued named types, and unions of those.
    """
    if isinstance(t, Union):
        return all(is_scalar(o) for o in t.options)
    if isinstance(t, Prim):
        return t.name in ("string", "int", "number", "boolean")
    if isinstance(t, Lit):
        return t.value is not None
    if isinstance(t, Named):
        return t.name in STRING_NAMES and not t.args
    return False
