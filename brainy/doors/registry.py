"""Which function answers each native door: registered by name, beside the code that implements it.

A door is one contract entry plus one registered function. Four shapes of function:

- ``READ``: ``fn(snapshot, id, args) -> answer`` — a read at the snapshot's generation. ``asOf`` runs
  the same function on an older snapshot when the contract marks the door ``pinnable``.
- ``WRITE``: ``fn(txn, args, context) -> answer`` — the rule of one commit: it validates and stages
  ops on the transaction; the commit path appends, applies and makes it durable.
- ``HOST``: ``fn(call) -> answer`` — a door answered by the process that holds the brains (open,
  close, health), registered by ``brainy.net``.
- ``MODEL``: ``fn(args) -> answer`` — a door answered by the embedding model, not the store
  (``embed``, ``embedBatch``, ``similarity``; DOORS 7): the path names a brain, for reach, but
  the store is not opened. The dispatcher runs it on the embedder's threads, off the event loop;
  in process it runs where it is called.

``join`` checks the registry against the contract in both directions: a native door without a
function, a function for a door that is not native, or a function of the wrong shape fails the
import by name, so nothing outside the contract is callable and no contract door is silently absent.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

READ, WRITE, HOST, MODEL = "read", "write", "host", "model"


@dataclass(frozen=True)
class Stamp:
    """The write a read's answer may ask for once it has answered: ``accords.inbox``'s presence stamp (DOORS 9.1,
    R16), the one read that moves what it reads. ``wanted(answer)``: the write's arguments (the read door's own
    document), or None when this answer asks none; ``rule(txn, args, ctx)``: its commit rule, run by the commit
    path under the read door's name (``staging.rule_of``); ``said(answer, at, reason)``: the answer told whether
    it was written (at ``at``) or not (for ``reason``). A road to the door (``calling.py``) writes it only when
    its brain holds the lease and the credential may write; a pinned read (``asOf``) never."""

    wanted: Callable[[dict[str, Any]], dict[str, Any] | None]
    rule: Callable[..., dict[str, Any]]
    said: Callable[[dict[str, Any], int | None, str | None], None]


@dataclass(frozen=True)
class Registered:
    name: str
    runs: str
    fn: Callable[..., Any]
    # the texts a read will embed, from its checked arguments: the server embeds them off the event loop
    # first, so the read itself finds them embedded (brainy/index/embedder.py's recent queries); for a
    # write, the texts its rule stores (brainy/doors/writes.py ``texts``), embedded before the commit lock
    embeds: Callable[[dict[str, Any]], list[str]] | None = None
    # a write's work before its commit lock, off the event loop: ``fn(brain, args) -> (args, prepared)``, the
    # arguments completed (a summary a language provider wrote) and what the rule reads as ``ctx.prepared``
    prepares: Callable[[Any, dict[str, Any]], tuple[dict[str, Any], dict[str, Any]]] | None = None
    # a read that reads who is asking (``policy.asking``, bound by the dispatcher around it); every other read
    # sees only its snapshot and arguments, and the binding (a ContextVar set and reset) is not paid for it
    asks: bool = False
    # a write whose answer names a reading-door link (``doorUrl``), which only a server with a receiver can
    # ask for: the dispatcher completes the answer once the commit is durable (brainy/auth/reading_door.py)
    links: bool = False
    # a read the dispatcher runs on a worker thread, never the event loop: ``policy.check`` stages a write as
    # the commit path does (brainy/doors/staging.py), which may hash a file, embed texts and ask a language
    # provider, the steps a write itself takes off the loop
    threaded: bool = False
    # a read whose answer may ask for one write after it (``Stamp``)
    stamp: Stamp | None = None


REGISTERED: dict[str, Registered] = {}


def door(
    name: str,
    runs: str = READ,
    embeds: Callable[[dict[str, Any]], list[str]] | None = None,
    prepares: Callable[[Any, dict[str, Any]], tuple[dict[str, Any], dict[str, Any]]] | None = None,
    asks: bool = False,
    links: bool = False,
    threaded: bool = False,
    stamp: Stamp | None = None,
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register the decorated function as the answer of door ``name``."""
    if runs not in (READ, WRITE, HOST, MODEL):
        raise ValueError(f"door {name!r}: runs must be one of {READ}, {WRITE}, {HOST}, {MODEL}")
    if stamp is not None and runs != READ:
        raise ValueError(f"door {name!r}: only a read's answer asks for a stamp")

    def register(fn: Callable[..., Any]) -> Callable[..., Any]:
        if name in REGISTERED:
            raise RuntimeError(
                f"door {name!r} is registered twice: {REGISTERED[name].fn.__qualname__} and {fn.__qualname__}"
            )
        REGISTERED[name] = Registered(name, runs, fn, embeds, prepares, asks, links, threaded, stamp)
        return fn

    return register


def join(doors: Iterable[Any]) -> dict[str, Registered]:
    """The registry checked against the contract's doors; raises RuntimeError naming every disagreement."""
    native = {d.name: d for d in doors if d.native}
    missing = sorted(set(native) - set(REGISTERED))
    stray = sorted(set(REGISTERED) - set(native))
    wrong = sorted(
        name
        for name, d in native.items()
        if name in REGISTERED
        and (
            (REGISTERED[name].runs == WRITE) != (d.kind == "write" and "W" in d.sets)
            or (d.pinnable and REGISTERED[name].runs != READ)
        )
    )
    if missing or stray or wrong:
        raise RuntimeError(
            f"door registry and contract disagree: native doors without a function {missing}, "
            f"functions that are not native doors {stray}, functions of the wrong shape {wrong}"
        )
    return dict(REGISTERED)


def reads(name: str) -> Registered | None:
    """The registered read of ``name``, if it has one."""
    entry = REGISTERED.get(name)
    return entry if entry is not None and entry.runs == READ else None
