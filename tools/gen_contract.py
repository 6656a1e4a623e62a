#!/usr/bin/env python3
"""Regenerate the committed contract artifacts from the door table.

Writes ``docs/contract.json`` (the ``/contract.json`` document with ``builtAt`` fixed
to a placeholder, so the committed copy only changes when the contract does),
``docs/brainy.proto``, both derived by ``brainy.contract.doors``, ``docs/openapi.json``
(the ``/openapi.json`` document exactly as served, derived by ``brainy.contract.openapi``),
and ``brainy/contract/refusals.py`` (one ``class XError(Refusal)`` per entry of the
``refusals`` table, written here as asyncpg's ``tools/generate_exceptions.py`` writes its
exception classes, so editors and type checkers see every refusal), all from
``brainy/contract/api-contract.json``. The refusal module is rendered from the validated
table alone; nothing here imports it, so a stale or broken copy is always rewritten.

    python tools/gen_contract.py          # rewrite the files
    python tools/gen_contract.py --check  # exit 1, naming the stale files, if any differs
"""

from __future__ import annotations

import argparse
import ast
import builtins
import re
import sys
import textwrap
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from brainy import __version__  # noqa: E402
from brainy.contract import doors, openapi  # noqa: E402
from brainy.contract._refusal_base import meaning_of  # noqa: E402

#: builtAt of the committed copy; the served document carries the real build stamp.
BUILT_AT_PLACEHOLDER = "1970-01-01T00:00:00Z"
CONTRACT_JSON = ROOT / "docs" / "contract.json"
PROTO = ROOT / "docs" / "brainy.proto"
OPENAPI_JSON = ROOT / "docs" / "openapi.json"
REFUSALS_PY = ROOT / "brainy" / "contract" / "refusals.py"


def render() -> dict[Path, str]:
    """Each generated file's path and its fresh text."""
    return {
        CONTRACT_JSON: doors.envelope_text(__version__, BUILT_AT_PLACEHOLDER),
        PROTO: doors.proto_text(),
        OPENAPI_JSON: openapi.text(__version__),
        REFUSALS_PY: refusals_text(doors.CONTRACT.refusals),
    }


# --------------------------------------------------------------------------- brainy/contract/refusals.py

#: The generated module's line limit (the repository's), and its class bodies' indent.
LINE = 120
_INDENT = "    "

_REFUSALS_HEAD = '''\
# Generated from brainy/contract/api-contract.json by tools/gen_contract.py: do not edit.
# Change the contract's "refusals" table, then regenerate with `python tools/gen_contract.py`.
"""Named refusals: one class per entry of ``api-contract.json``'s ``refusals`` table, in its order.

Each class carries its entry: ``status`` (the HTTP status; ``None`` for the WebSocket frame classes and
the startup-only refusal), ``required`` and ``optional`` (the wire fields), ``meaning`` (the default
message: its docstring, which the root reads it from, so it is written once) and, where the entry has one,
``ws`` (the WebSocket frame or close code). The root ``Refusal``, ``REGISTRY`` and ``by_name`` are
``brainy/contract/_refusal_base.py``, where each class registers itself under its name as it is made.

{shadowing}
"""

{typing}from brainy.contract._refusal_base import REGISTRY, Refusal, by_name
'''

#: What the root module gives, exported again beside the classes.
_ROOT_NAMES = ("REGISTRY", "Refusal", "by_name")


def refusals_text(refusals: Iterable[Mapping[str, Any]]) -> str:
    """``brainy/contract/refusals.py`` for the (validated) ``refusals`` table: a class statement per entry."""
    entries = list(refusals)
    names = [entry["name"] for entry in entries]
    if len(set(names)) != len(names):  # the door table's loader refuses this first; say so here too
        raise ValueError(f"refusals listed twice: {sorted({n for n in names if names.count(n) > 1})}")
    shadowing = [name for name in names if hasattr(builtins, name)]
    if shadowing:
        listed = ", ".join(f"``{name}``" for name in shadowing)
        note = (
            f"Several names ({listed}) shadow Python builtins, so callers import this module "
            "(``from brainy.contract import refusals as R``) rather than its names."
        )
    else:
        note = "Callers import this module (``from brainy.contract import refusals as R``) rather than its names."
    typing = "from typing import Any, ClassVar\n\n" if any(e.get("ws") is not None for e in entries) else ""
    head = _REFUSALS_HEAD.format(shadowing=textwrap.fill(note, LINE, break_on_hyphens=False), typing=typing)
    parts = [head]
    group = None
    for entry in entries:
        block = _refusal_class(entry)
        if entry.get("group") is not None and entry.get("group") != group:
            group = entry["group"]
            block = f"# {group}\n" + block
        parts.append(block)
    exported = sorted([*_ROOT_NAMES, *names], key=_dunder_all_order)
    parts.append("\n".join(["__all__ = [", *(f"{_INDENT}{_literal(n)}," for n in exported), "]"]) + "\n")
    return "\n\n".join(parts)


def _dunder_all_order(name: str) -> tuple[int, list[Any]]:
    """``__all__``'s order as ``ruff`` keeps it (RUF022): CONSTANTS, then Classes, then the rest, each natural."""
    kind = 0 if name.isupper() else 1 if name[:1].isupper() else 2
    return kind, [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", name)]


def _refusal_class(entry: Mapping[str, Any]) -> str:
    """One refusal's ``class`` statement; the root's ``__init_subclass__`` sets ``name`` and registers it, and
    reads ``meaning`` from the docstring, so ``meaning`` is written apart only when the docstring cannot give
    it back exactly (wrapping makes one space of a tab, a newline or a run of spaces)."""
    meaning = entry.get("meaning", "")
    lines = [f"class {entry['name']}(Refusal):"]
    docstring = _docstring(meaning) if meaning else None
    if docstring is not None:
        lines += [docstring, ""]
    lines.append(_assign("status", entry.get("status")))
    lines.append(_assign("required", tuple(entry.get("fields", ()))))
    lines.append(_assign("optional", tuple(entry.get("optional", ()))))
    if meaning_of(None if docstring is None else ast.literal_eval(docstring.strip())) != meaning:
        lines.append(_assign("meaning", meaning))
    if entry.get("ws") is not None:  # annotated as the root annotates it: a dict in a class body is a ClassVar
        lines.append(_assign("ws: ClassVar[dict[str, Any] | None]", entry["ws"]))
    return "\n".join(lines) + "\n"


def _docstring(text: str) -> str:
    """``text`` as a class docstring, wrapped to the line limit, written as ``ruff format`` leaves it."""
    body = "\n".join(textwrap.wrap(text, LINE - len(_INDENT) - 6, break_long_words=False, break_on_hyphens=False))
    body = body.replace("\\", "\\\\").replace('"""', '\\"\\"\\"')
    if body.startswith('"'):
        body = " " + body
    if body.endswith('"'):
        body = body + " "
    return _INDENT + '"""' + body.replace("\n", "\n" + _INDENT) + '"""'


def _assign(name: str, value: Any) -> str:
    """``name = value`` in a class body; a string too long for one line is split at spaces in parentheses."""
    line = f"{_INDENT}{name} = {_literal(value)}"
    if len(line) <= LINE:
        return line
    inner = _INDENT * 2
    if isinstance(value, str):
        items = [inner + _literal(chunk) for chunk in _chunks(value, LINE - len(inner))]
    elif isinstance(value, tuple):
        items = [inner + _literal(item) + "," for item in value]
    else:
        raise TypeError(f"{name} = {value!r} does not fit in {LINE} characters, and only a str or tuple is split")
    return "\n".join([f"{_INDENT}{name} = (", *items, f"{_INDENT})"])


def _chunks(text: str, width: int) -> list[str]:
    """``text`` cut after spaces into pieces whose literals fit ``width``; joined, they are ``text`` again."""
    out: list[str] = []
    piece = ""
    for word in re.split(r"(?<= )", text):
        if piece and len(_literal(piece + word)) > width:
            out.append(piece)
            piece = word
        else:
            piece += word
    out.append(piece)
    return out


def _literal(value: Any) -> str:
    """A Python literal for a contract value, in the repository's style (double quotes, as ``ruff format``)."""
    if value is None or isinstance(value, (bool, int)):
        return repr(value)
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, (list, tuple)):
        items = [_literal(item) for item in value]
        if isinstance(value, tuple) and len(items) == 1:
            return f"({items[0]},)"
        inner = ", ".join(items)
        return f"({inner})" if isinstance(value, tuple) else f"[{inner}]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_literal(k)}: {_literal(v)}" for k, v in value.items()) + "}"
    raise ValueError(f"no literal for {value!r}")


_ESCAPES = {"\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _string(text: str) -> str:
    """Double quotes, unless single ones escape fewer characters (``ruff format``'s choice)."""
    quote = "'" if text.count('"') > text.count("'") else '"'
    out = []
    for ch in text:
        if ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif ch == quote:
            out.append("\\" + ch)
        elif ord(ch) < 0x20 or ch == "\x7f":
            out.append(f"\\x{ord(ch):02x}")
        else:
            out.append(ch)
    return quote + "".join(out) + quote


def main(argv: list[str] | None = None) -> int:
    """Write (or, with --check, compare) the generated files."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare instead of writing")
    args = parser.parse_args(argv)
    stale = []
    for path, text in render().items():
        current = path.read_text("utf-8") if path.exists() else None
        if current == text:
            continue
        if args.check:
            stale.append(path.relative_to(ROOT).as_posix())
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, "utf-8")
            print(f"wrote {path.relative_to(ROOT).as_posix()}")
    if stale:
        print("stale, regenerate with `python tools/gen_contract.py`: " + ", ".join(stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
