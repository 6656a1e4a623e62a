"""Protocol ids: how an accords record is named (DOORS 9.1, "Model"; docs/accords.md, "Ids").

A record's id is its natural key, and the key opens with its kind: ``thread:ACC-7``, ``action:ship-the-draft``,
``round:thread:ACC-7:3``. The row's engine id is the key's UUIDv5 (``brainy/store/keys.py``), so finding a
record by its protocol id is arithmetic: one point read, no index. A *bare* id (``ACC-7``, ``ship-the-draft``)
leaves its kind out; :func:`probes` names every prefixed form it may stand for, and the reads look all of them
up in one batch.

Slugs are made from a title as DOORS 9.1 says: lower-case, hyphenated, at most 48 characters, ``-2``, ``-3``, …
added when the id is taken. Thread numbers count up per board, from the board row's counter
(``model.BOARD_ID``). Both skip an id any row already holds: a natural key an engine ``add`` took first is
never overwritten.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from brainy.contract import refusals as R
from brainy.store import keys as K
from brainy.store.rows import invalid

#: The nine kinds, in the order DOORS 9.1 lists them: a bare id is probed under each, in this order.
KINDS = ("mandate", "participant", "thread", "round", "action", "decision", "vote", "update", "escalation")
#: The kinds with a timeline (rule A2): their rounds (a thread's turns, an action's log) are numbered 1..n.
PARENTS = ("thread", "action")
THREAD_PREFIX = "ACC-"
SLUG_LENGTH = 48
_SLUG_CUT = re.compile(r"[^a-z0-9]+")
# what may stand next to an id in a search query without being part of it: a token is cut at anything an id
# never holds, then trimmed of the punctuation a sentence puts around it ("ACC-7," "(decision:x)")
_NOT_ID = re.compile(r"[^A-Za-z0-9:._@+\-]+")
_TRIM = ".:,-_"
MAX_QUERY_IDS = 32  # a search probes at most this many tokens of its query (each under nine prefixes)


def kind_of_id(text: str) -> str | None:
    """The kind an id names by its prefix, or None for a bare id."""
    head, colon, _ = text.partition(":")
    return head if colon and head in KINDS else None


def probes(text: str, kinds: tuple[str, ...] = KINDS) -> list[str]:
    """The ids ``text`` may stand for: itself when it carries a kind's prefix or is a row's engine id (a UUID),
    else ``<kind>:<text>`` for each of ``kinds``, in their order; none that could not name a row."""
    if kind_of_id(text) is not None or _engine_id(text):
        return [text] if _fits(text) else []
    return [key for key in (f"{kind}:{text}" for kind in kinds) if _fits(key)]


def _fits(key: str) -> bool:
    """Whether ``key`` can name a row: a natural key (1 to 256 characters, no control character) or a UUID."""
    try:
        K.resolve(key)
    except R.InvalidArgumentError:
        return False
    return True


def _engine_id(text: str) -> bool:
    """Whether ``text`` is a row's engine id (a UUID) rather than a natural key."""
    return _fits(text) and K.resolve(text)[1] is None


def row_id(key: str) -> str:
    """The engine id of the record keyed ``key``."""
    return K.resolve(key)[0]


def query_ids(query: str) -> list[str]:
    """The tokens of a search query that may be protocol ids, bare or prefixed, each once, at most
    :data:`MAX_QUERY_IDS`: the query cut at what no id holds, each piece trimmed of sentence punctuation."""
    found: dict[str, None] = {}
    for piece in _NOT_ID.split(query):
        token = piece.strip(_TRIM)
        if token:
            found[token] = None
            if len(found) == MAX_QUERY_IDS:
                break
    return list(found)


# -- the id forms of DOORS 9.1 ------------------------------------------------------------------------------


def thread(n: int) -> str:
    return f"thread:{THREAD_PREFIX}{n}"


def mandate(n: int) -> str:
    return f"mandate:{n}"


def participant(principal: str) -> str:
    return f"participant:{principal}"


def round_(parent: str, seq: int) -> str:
    return f"round:{parent}:{seq}"


def vote(target: str, principal: str) -> str:
    return f"vote:{target}:{principal}"


def update(target: str, n: int) -> str:
    return f"update:{target}:{n}"


def escalation(target: str, n: int) -> str:
    return f"escalation:{target}:{n}"


def slug(title: str, kind: str, taken: Callable[[str], bool]) -> str:
    """``<kind>:<slug>`` for a new record titled ``title``: lower-case, hyphenated, at most 48 characters
    (``-2``, ``-3``, … included), the first such id ``taken`` says is free."""
    base = _SLUG_CUT.sub("-", title.lower()).strip("-") or kind
    n = 1
    while True:
        suffix = "" if n == 1 else f"-{n}"
        key = f"{kind}:{base[: SLUG_LENGTH - len(suffix)].strip('-')}{suffix}"
        if not taken(key):
            return key
        n += 1


def next_free(first: int, make: Callable[[int], str], taken: Callable[[str], bool]) -> tuple[int, str]:
    """``(n, make(n))`` for the first ``n`` from ``first`` whose id ``taken`` says is free."""
    n = first
    while taken(make(n)):
        n += 1
    return n, make(n)


def checked_id(value: Any, field: str) -> str:
    """A protocol id argument: a non-empty string that could be a natural key (bare or prefixed)."""
    if not isinstance(value, str) or not value.strip():
        raise invalid(field, "missing" if value is None else "empty", "a protocol id, bare or prefixed")
    K.check_natural_key(value, field)
    return value
