"""The one dispatcher every transport calls: ``dispatch(principal, door, brain, id, document)``.

It takes the one clock of the call, asks the gate's questions in the seeds'
order (access class, reach, ruling, token scope, then the door), resolves the
brain, calls the engine, and answers an :class:`Outcome` carrying the answer
or the refusal and the measured milliseconds. Transports only encode it.

Which engine call a door makes is a table (``ENGINE``) joined to the contract
at import: every native door has exactly one entry and every entry is a
native door, so nothing outside the contract is callable and no contract door
is silently absent.
"""

from __future__ import annotations

import logging
import re
import time
import uuid
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Protocol

from brainy.contract import doors as D
from brainy.contract import refusals as R
from brainy.engine import Brain
from brainy.net.principal import Principal

log = logging.getLogger("brainy.dispatch")

BRAIN_NAME = re.compile(r"[^/.][^/]{0,63}")


class Brains(Protocol):
    """Where the dispatcher finds a brain by name (the residency pool, or a fixed set)."""

    def resolve(self, name: str, for_write: bool) -> Brain: ...


class FixedBrains:
    """A fixed set of already-open brains, by name: the dispatcher's simplest resolver."""

    def __init__(self, brains: dict[str, Brain]) -> None:
        self._brains = dict(brains)

    def resolve(self, name: str, for_write: bool) -> Brain:
        try:
            return self._brains[name]
        except KeyError:
            raise R.NoSuchBrainError(f"no brain named {name!r} is served here", brain=name) from None


@dataclass
class Outcome:
    """A door's answer or refusal, with the call's one measured wall time."""

    door: str
    ms: float
    answer: dict[str, Any] | None = None
    refusal: R.Refusal | None = None

    @property
    def ok(self) -> bool:
        return self.refusal is None

    @property
    def status(self) -> int:
        if self.refusal is None:
            return 200
        return self.refusal.status or 500

    def body(self) -> dict[str, Any]:
        """The wire document: the answer or ``{"error": ...}``, with ``_meta.ms`` merged in."""
        doc = dict(self.answer) if self.refusal is None else {"error": self.refusal.to_wire()}
        doc["_meta"] = {"ms": self.ms}
        return doc


def check_brain_name(name: Any) -> str:
    if not isinstance(name, str) or not BRAIN_NAME.fullmatch(name) or name in (".", ".."):
        raise R.BrainNameInvalidError(f"{name!r} is not one legal brain name segment", brain=str(name))
    return name


def _id_as_generation(id_: Any) -> int:
    if isinstance(id_, int) and not isinstance(id_, bool):
        return id_
    if isinstance(id_, str) and id_.isdigit():
        return int(id_)
    raise R.InvalidArgumentError("id: a generation is a non-negative integer", field="id", reason="wrong-type")


def _options(document: dict[str, Any], allowed: tuple[str, ...]) -> dict[str, Any]:
    extra = sorted(set(document) - set(allowed))
    if extra:
        raise R.InvalidArgumentError(f"{extra[0]}: not an argument of this door (takes {list(allowed)})",
                                     field=extra[0], reason="unknown-argument")
    for name, value in document.items():
        if not isinstance(value, bool):
            raise R.InvalidArgumentError(f"{name}: must be true or false", field=name, reason="wrong-type")
    return document


Call = Callable[[Brain, Any, dict[str, Any], Principal], "dict[str, Any] | Awaitable[dict[str, Any]]"]


def _read(fn: Callable[[Brain, Any, dict[str, Any]], dict[str, Any]]) -> Call:
    return lambda brain, id_, doc, who: fn(brain, id_, doc)


def _write(door: str) -> Call:
    return lambda brain, id_, doc, who: brain.awrite(door, doc, caller=who.caller, via=who.via)


# The engine call behind each native door. Joined to the contract below.
ENGINE: dict[str, Call] = {
    "get": _read(lambda b, id_, doc: b.get(id_, **_options(doc, ("includeVector", "includeData")))),
    "batchGet": _read(lambda b, id_, doc: b.batchGet(doc)),
    "counts": _read(lambda b, id_, doc: b.counts() if not _options(doc, ()) else {}),
    "generation": _read(lambda b, id_, doc: b.generation(_id_as_generation(id_)) if not _options(doc, ()) else {}),
    **{door: _write(door) for door in ("add", "addMany", "update", "updateMany", "remove", "removeMany",
                                       "relate", "relateMany", "updateRelation", "unrelate", "transact", "clear")},
}


def _join() -> dict[str, D.Door]:
    native = {d.name: d for d in D.DOORS if d.native}
    missing = sorted(set(native) - set(ENGINE))
    stray = sorted(set(ENGINE) - set(native))
    if missing or stray:
        raise RuntimeError(f"dispatch table and contract disagree: native doors without an engine call "
                           f"{missing}, engine calls that are not native doors {stray}")
    return dict(D.BY_NAME)


TABLE: dict[str, D.Door] = _join()


def gate(principal: Principal, door: D.Door, brain: str | None) -> None:
    """The gate's questions, in order; raises the first refusal (DOORS.md 0.4)."""
    # 1. access class: the service key opens mechanics and host doors, and no others
    if (door.access == "service") != principal.service_key:
        raise R.ForbiddenError(f"{door.name} is a {door.access} door; this key is "
                               f"{'the service key' if principal.service_key else 'a principal key'}",
                               reason="access-class")
    # 2. reach
    if brain is not None:
        if principal.token_brain is not None:
            if brain != principal.token_brain:
                raise R.BRAINY_KEY_BRAIN(f"the token was minted for brain {principal.token_brain!r}", brain=brain)
        elif principal.brains is not None and brain not in principal.brains:
            raise R.ForbiddenError("this key does not reach that brain", reason="reach")
    # 3. ruling: the strict owner rung is the owner triple on a minted token
    if door.rung == "ownerTriple" and not principal.owner_triple:
        raise R.PolicyOwnerScopeRequiredError(f"{door.name} needs a token scoped read, write and owner",
                                              door=door.name)
    # 4. token scope
    if principal.scope is not None and door.kind == "write" and "write" not in principal.scope:
        raise R.BRAINY_KEY_SCOPE(f"{door.name} writes; the token's scope is {sorted(principal.scope)}",
                                 door=door.name, scope=sorted(principal.scope))


class Dispatcher:
    def __init__(self, brains: Brains) -> None:
        self.brains = brains

    async def dispatch(self, principal: Principal, door: str, brain: str | None = None, id: Any = None,
                       document: Any = None) -> Outcome:
        """Run one door for one principal; never raises for a refusal, always answers an Outcome."""
        started = time.perf_counter_ns()
        try:
            answer = await self._run(principal, door, brain, id, document)
            outcome = Outcome(door, 0.0, answer=answer)
        except R.Refusal as refusal:
            outcome = Outcome(door, 0.0, refusal=refusal)
        except Exception:  # a fault is logged under a reference, never shown
            ref = str(uuid.uuid4())
            log.exception("internal error in door %s (ref %s)", door, ref)
            outcome = Outcome(door, 0.0, refusal=R.InternalError(f"an unexpected fault; see the log under {ref}",
                                                                   ref=ref))
        outcome.ms = round((time.perf_counter_ns() - started) / 1e6, 3)
        return outcome

    async def _run(self, principal: Principal, name: str, brain: str | None, id_: Any,
                   document: Any) -> dict[str, Any]:
        door = TABLE.get(name) if isinstance(name, str) else None
        if door is None:
            raise R.UnknownDoorError(f"no door is named {name!r}", door=str(name))
        if brain is not None:
            check_brain_name(brain)
        gate(principal, door, brain)
        # 5. the door: its disposition, the caller rule, then the engine
        if door.disposition == "notYetNative":
            raise R.NotYetNativeError(f"{door.name} arrives in {door.release}", door=door.name, release=door.release)
        if door.disposition == "inProcessOnly":
            raise R.InProcessOnlyError(f"{door.name} hands back a live object; call {door.instead} instead",
                                       door=door.name, instead=door.instead)
        if "W" in door.sets and principal.caller is None:
            raise R.ServiceKeyCannotWriteError(f"{door.name} writes rows, and this service key asserted no caller "
                                               "(X-Brainy-Caller)", door=door.name)
        if document is None:
            document = {}
        if not isinstance(document, dict):
            raise R.InvalidArgumentError("the argument document must be an object", field="document",
                                         reason="wrong-type")
        if any(p.name == "id" for p in door.path_params) and id_ is None:
            raise R.InvalidArgumentError("id: required", field="id", reason="missing")
        if brain is None:
            raise R.InvalidArgumentError("brain: required", field="brain", reason="missing")
        handle = self.brains.resolve(brain, door.kind == "write")
        result = ENGINE[door.name](handle, id_, document, principal)
        if not isinstance(result, dict):
            result = await result
        return result
