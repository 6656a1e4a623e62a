"""How deep brainy reads an untrusted document, and how much of an untrusted value a message quotes back.

Every decoder of a request (a JSON or MessagePack body on HTTP/1.1, HTTP/2 and HTTP/3, a WebSocket call
frame, an MCP JSON-RPC message over HTTP or stdio, a gRPC request's document) refuses a document whose
arrays and objects nest deeper than :data:`MAX_NESTING`, by name, before any code walks it. Without the
limit a value the parsers accept could still break what follows them: orjson reads 1,024 levels but
writes only 255 (a WebSocket ``ref`` nested 300 deep decoded, and then its answer could not be
written), and CPython's ``repr`` of a value a few hundred levels deep runs out of recursion (an MCP
``tools/call`` naming such a value as its tool was answered with a fault). No document a door takes
needs more than a handful of levels; 64 leaves room for any real metadata.

The walk itself is the ``nesting`` speedup (``brainy/_speedups/nesting.pyx``, one C pass over the
containers); this module holds the limit and the words, so every floor above names them alike.

The few texts brainy still reads with the standard library's parser (a token's claims, a cursor, an import's
content, an outside service's answer) go through :func:`json_loads`: that parser recurses in C and gives out
with a RecursionError, which would fault the request instead of refusing it.
"""

from __future__ import annotations

import json
import re
import reprlib
from collections.abc import Sequence
from typing import Any

#: An argument document (the body of a door) may nest arrays and objects this many levels deep: the document
#: itself is level 1. A transport that wraps the document (a WebSocket frame, a JSON-RPC message) allows its
#: own wrapping on top, so the same document is accepted on every transport.
MAX_NESTING = 64

#: How many characters of a path a refusal names before it is cut (a too-deep path has 65 steps or more).
PATH_CHARS = 160
#: How many characters of an untrusted value a message quotes before it is cut.
QUOTE_CHARS = 120

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,31}")
_KEY_CHARS = 32


def _step(key: Any) -> str:
    if isinstance(key, int) and not isinstance(key, bool):
        return f"[{key}]"
    if isinstance(key, str) and _NAME.fullmatch(key):
        return f".{key}"
    if isinstance(key, str):
        text = key if len(key) <= _KEY_CHARS else key[:_KEY_CHARS] + "…"
        return "[" + '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"]'
    return f"[{quote(key)}]"


def where(path: Sequence[Any], chars: int = PATH_CHARS) -> str:
    """A path into a document in the ``$.ops[3].id`` form refusals use, cut to ``chars`` characters."""
    text = "$"
    for key in path:
        text += _step(key)
        if len(text) > chars:
            return text[:chars] + "…"
    return text


def too_deep(path: Sequence[Any], limit: int = MAX_NESTING) -> str:
    """The message of a document refused for its nesting: where it goes too deep, and the limit it broke."""
    return f"arrays and objects nest deeper than the {limit} levels brainy reads in a document (first at {where(path)})"


def _quoter() -> reprlib.Repr:
    quoter = reprlib.Repr()
    # reprlib stops at maxlevel and at these counts, so quoting walks a bounded part of any value.
    quoter.maxlevel = 3
    quoter.maxdict = quoter.maxlist = quoter.maxtuple = quoter.maxset = 6
    quoter.maxstring = quoter.maxother = 60
    quoter.maxlong = 40
    return quoter


_QUOTER = _quoter()


def quote(value: Any, chars: int = QUOTE_CHARS) -> str:
    """A short ``repr`` of an untrusted value for a message: three levels and a few members at most, cut to
    ``chars`` characters. Never recursion without bound, never a message as long as the value."""
    try:
        text = _QUOTER.repr(value)
    except (ValueError, RecursionError):  # an int past str()'s digit limit; a self-referencing value
        text = f"<{type(value).__name__}>"
    return text if len(text) <= chars else text[: chars - 1] + "…"


def brief(value: Any, chars: int = QUOTE_CHARS) -> str:
    """A name or a value for a message: a short string as it was given, anything else quoted by :func:`quote`."""
    return value if isinstance(value, str) and len(value) <= chars else quote(value, chars)


def json_loads(text: str | bytes, **options: Any) -> Any:
    """``json.loads`` of an untrusted text: a document nested past what the parser can recurse through is a
    ValueError, as every other text that does not read is (each caller already refuses those by its own
    name), never a RecursionError."""
    try:
        return json.loads(text, **options)
    except RecursionError:
        raise ValueError("arrays and objects nest too deep to read") from None
