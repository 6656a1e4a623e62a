"""The one dispatcher every transport calls: ``call(principal, door, brain, id, document)``.

It proves the credential a transport hands it (:meth:`Dispatcher.credential`),
completes a call that names no brain by the one rule (DOORS.md 0.2), takes the
one clock of the call, asks the gate's questions in the seeds'
order (access class, reach, ruling, token scope, then the door), checks the
argument document against the door's declared arguments, resolves the brain,
calls the door's registered function, and answers an :class:`Outcome`
carrying the answer or the refusal and the measured milliseconds. Transports
only encode it.

Which function answers a door is the registry (``brainy.doors.registry``),
joined to the contract at import: every native door has exactly one function
and every function is a native door's, so nothing outside the contract is
callable and no contract door is silently absent. A read runs on the brain's
read snapshot at its head (on a worker thread if registered ``threaded``), a write on its commit path, a host door here, a
model door on the embedder's threads without opening the store. The changes
door may also be held open (:meth:`Dispatcher.hold`): the Outcome's ``held``
answer, drained through the pool (``brainy.host.feeds``).
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from brainy.auth import reading_door
from brainy.auth.keys import CALLER_HEADER, OWNER_HEADER, ROLES_HEADER, apply_caller_assertion
from brainy.auth.principal import Principal
from brainy.auth.reading_door import ReadingDoor
from brainy.contract import doors as D
from brainy.contract import refusals as R
from brainy.contract.limits import quote
from brainy.doors import calling, feed, registry
from brainy.doors.registry import HOST, READ, door
from brainy.engine import Brain
from brainy.fleet.membership import Fleet
from brainy.host import host_doors, mechanics  # noqa: F401  (each registers its doors before the join below)
from brainy.host.feeds import HeldFeed
from brainy.index import embedder

log = logging.getLogger("brainy.dispatch")

BRAIN_NAME = re.compile(r"[^/.][^/]{0,63}")


class Brains(Protocol):
    """Where the dispatcher finds a brain by name: the pool."""

    def resolve(self, name: str, for_write: bool) -> Brain: ...

    def reach(self, principal: Principal) -> list[str]: ...

    def only_brain(self, principal: Principal) -> str | None: ...

    def open_writer(self, name: str) -> Brain | None: ...

    def init(self, name: str, force: bool = False) -> dict[str, Any]: ...

    async def close(self, name: str) -> dict[str, Any]: ...

    def health(self, name: str) -> dict[str, Any]: ...

    def enter(self, name: str) -> Any: ...

    def follow(self, name: str) -> Any: ...

    def held(self, entered: Any, for_write: bool) -> Brain: ...

    def left(self, entered: Any) -> None: ...


class Authenticating(Protocol):
    """What the dispatcher asks of the key table (``brainy.auth.keys.KeyTable``)."""

    def authenticate(self, authorization: str | None) -> Principal: ...


@dataclass(slots=True)
class Outcome:
    """A door's answer or refusal, with the call's one measured wall time."""

    door: str
    ms: float
    answer: dict[str, Any] | None = None
    refusal: R.Refusal | None = None
    held: HeldFeed | None = None  # a held answer (the changes door as a live feed), its answer {}

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


def elapsed_ms(started: int) -> float:
    """The milliseconds since ``started`` (a ``perf_counter_ns``), to the microsecond: the whole microseconds
    rounded in integers, then divided once (a float's ``round(x, 3)`` costs four times as much, and every
    answer pays it)."""
    return (time.perf_counter_ns() - started + 500) // 1000 / 1000


def check_brain_name(name: Any) -> str:
    if type(name) is str and name in _LEGAL_NAMES:  # every request names its brain: checked once per name
        return name
    if not isinstance(name, str) or not BRAIN_NAME.fullmatch(name) or name in (".", ".."):
        raise R.BrainNameInvalidError(f"{quote(name)} is not one legal brain name segment", brain=str(name))
    if len(_LEGAL_NAMES) < LEGAL_NAMES_HELD:
        _LEGAL_NAMES.add(name)
    return name


#: Names that passed :func:`check_brain_name` (bounded: a caller may send any number of names).
LEGAL_NAMES_HELD = 4096
# a write of a brain this node is handing to another (host.move) waits at most this for the hand-over to end, then
# goes on to meet whatever it left (BrainMovedError naming the new owner, or the brain served here still)
HAND_OVER_WAIT = 5.0
_LEGAL_NAMES: set[str] = set()


@dataclass
class Call:
    """One door call past the gate: what a host door needs to answer it."""

    principal: Principal
    door: D.Door
    brain: str
    id: Any
    document: dict[str, Any]
    brains: Brains
    host: Any = None  # the provisioning doors' ground (brainy.host.host_doors.Host)


Answer = dict[str, Any] | Awaitable[dict[str, Any]] | HeldFeed


# The doors the process answers (the pool holds the brains); every other native door is the engine's.
@door("init", HOST)
def _init(c: Call) -> dict[str, Any]:
    return c.brains.init(c.brain, c.document["force"])


@door("close", HOST)
def _close(c: Call) -> Awaitable[dict[str, Any]]:
    return c.brains.close(c.brain)


@door("health", HOST)
def _health(c: Call) -> dict[str, Any]:
    return c.brains.health(c.brain)


REGISTERED = registry.join(D.DOORS)
#: The doors whose answer may be held open (:meth:`Dispatcher.hold`): those a server door serves live.
HOLDS = frozenset(d.holds for d in D.SERVER_DOORS if d.holds)
TABLE: dict[str, D.Door] = dict(D.BY_NAME)
TAKES_BRAIN = frozenset(d.name for d in D.DOORS if any(p.name == "brain" for p in d.path_params))


class Plan:
    """What the dispatcher asks of one door on every call, worked out once, at import, from the contract:
    the gate's questions stay per call (they read the principal), the door's own facts do not."""

    __slots__ = (
        "door",
        "host",
        "writes_rows",
        "closed",
        "guarded",
        "takes_brain",
        "checked",
        "holds",
        "owned",
    )

    def __init__(self, door: D.Door) -> None:
        self.door = door
        self.host = door.layer == "host"
        self.writes_rows = "W" in door.sets
        self.closed = _closed(door)  # the disposition's refusal, made afresh per call; None for a native door
        self.guarded = self.writes_rows or self.closed is not None  # the caller rule or the disposition applies
        self.takes_brain = door.name in TAKES_BRAIN
        self.checked = calling.CHECKED[door.name]  # the argument check Brain.call makes too
        self.holds = door.name in HOLDS
        # in a fleet: whether the brain must be this node's (else BrainMovedError)
        self.owned = self.takes_brain and door.name not in host_doors.FLEET_PLACES


def _closed(door: D.Door) -> Callable[[], R.Refusal] | None:
    if door.disposition == "notYetNative":
        return lambda: R.NotYetNativeError(
            f"{door.name} arrives in {door.release}", door=door.name, release=door.release
        )
    if door.disposition == "inProcessOnly":
        return lambda: R.InProcessOnlyError(
            f"{door.name} hands back a live object; call {door.instead} instead", door=door.name, instead=door.instead
        )
    return None


PLANS: dict[str, Plan] = {name: Plan(d) for name, d in TABLE.items()}


def gate(principal: Principal, door: D.Door, brain: str | None) -> None:
    """The gate's questions, in order; raises the first refusal (DOORS.md 0.4)."""
    # 1. access class: the service key opens mechanics and host doors, and no others
    if (door.access == "service") != principal.service_key:
        raise R.ForbiddenError(
            f"{door.name} is a {door.access} door; this key is "
            f"{'the service key' if principal.service_key else 'a principal key'}",
            reason="access-class",
        )
    # 2. reach
    if brain is not None:
        if principal.token_brain is not None:
            if brain != principal.token_brain:
                raise R.BRAINY_KEY_BRAIN(f"the token was minted for brain {principal.token_brain!r}", brain=brain)
        elif principal.brains is not None and brain not in principal.brains:
            raise R.ForbiddenError("this key does not reach that brain", reason="reach")
    # 3. ruling: the strict owner rung is the owner triple on a minted token; the loose one (accords.decide, rule
    # A3) the triple or a service's asserted X-Brainy-Owner: true
    if door.rung == "ownerTriple" and not principal.owner_triple:
        raise R.PolicyOwnerScopeRequiredError(f"{door.name} needs a token scoped read, write and owner", door=door.name)
    if door.rung == "owner" and not principal.owner_rung:
        raise R.OwnerRungRequiredError(
            f"{door.name} is the owner's word: a token scoped read, write and owner, or an asserted owner",
            door=door.name,
        )
    # 4. token scope
    if principal.scope is not None and door.kind == "write" and "write" not in principal.scope:
        raise R.BRAINY_KEY_SCOPE(
            f"{door.name} writes; the token's scope is {sorted(principal.scope)}",
            door=door.name,
            scope=sorted(principal.scope),
        )


def owned_here(fleet: Fleet, brain: str) -> None:
    """A brain another node of the fleet owns is refused by name, never served from this node's copy: the HTTP
    edge forwards such a request before it gets here (brainy/net/edge.py); the transports that do not forward
    yet (gRPC, WebSocket, MCP, the held change stream) and a forwarded request that found the brain moved on
    meet this."""
    arriving = fleet.arriving.get(brain)
    if arriving is not None:  # claimed here, still being restored: not served from any copy yet
        raise R.BrainMovedError(
            f"brain {brain!r} is arriving at node {fleet.node!r} (epoch {arriving}); ask again",
            brain=brain,
            node=fleet.node,
            epoch=arriving,
        )
    owner = fleet.elsewhere(brain)
    at = fleet.archived.get(brain)
    if at is not None and (owner is None or not fleet.live(owner.node)):
        # archived fleet-wide and served by no node (its owner gone since): no node claims it, so every node
        # answers it archived, as its owner did, rather than as a brain it has never heard of
        raise R.BrainArchivedError(
            f"brain {brain!r} is archived; host.unarchive serves it again", brain=brain, archivedAt=at
        )
    if owner is not None:
        raise R.BrainMovedError(
            f"brain {brain!r} is served by node {owner.node!r} of the fleet (epoch {owner.epoch})",
            brain=brain,
            node=owner.node,
            epoch=owner.epoch,
        )
    placed = fleet.epochs.get(brain)
    if placed is not None and brain not in fleet.owned:
        # placed, and no live node is known to serve it (its owner's lease is ending: an earlier run of this
        # node's, say): the copy here may be stale, and is not served until this node claims the brain
        raise R.BrainMovedError(
            f"brain {brain!r} has no node serving it yet (a hand-over is under way); ask again",
            brain=brain,
            node="",
            epoch=placed,
        )


class Dispatcher:
    """The one road to a door from every transport: :meth:`credential` proves who calls, :meth:`call` runs the
    gate and the door under one clock and answers an :class:`Outcome`, :meth:`hold` opens a held change feed;
    a transport only frames what they answer."""

    def __init__(
        self,
        brains: Brains,
        reading_door: ReadingDoor | None = None,
        host: Any = None,
        keys: Authenticating | None = None,
        fleet: Fleet | None = None,
    ) -> None:
        self.brains = brains
        self.fleet = fleet  # --fleet: a brain another node owns is refused BrainMovedError (docs/fleet.md)
        self.keys = keys  # None: a dispatcher whose callers are proven elsewhere (tests, in-process use)
        # the --reading-door receiver (brainy/auth/reading_door.py), None when not configured: memory.write
        # asks it for a link after its commit (reading_door.door_url)
        self.reading_door = reading_door
        self.host = host

    def credential(self, headers: Mapping[str, str]) -> Principal:
        """The principal a request's headers prove (every transport's: HTTP headers, gRPC metadata, the MCP
        session's, the bearer stdio was started with), or the credential's refusal."""
        if self.keys is None:
            raise R.UnauthenticatedError("this dispatcher holds no key table to prove a credential against")
        principal = self.keys.authenticate(headers.get("authorization"))
        if CALLER_HEADER in headers or OWNER_HEADER in headers or ROLES_HEADER in headers:  # asserted: read it
            return apply_caller_assertion(principal, headers)
        return principal

    def reach(self, principal: Principal) -> list[str]:
        """The names of the brains ``principal`` reaches here."""
        return self.brains.reach(principal)

    def only_brain(self, principal: Principal) -> str | None:
        """The brain a call that names none reaches (DOORS 0.2): the one rule every transport's calls meet in
        :meth:`run`, asked beforehand only by MCP, whose tool list leaves ``brain`` out for such a key."""
        return self.brains.only_brain(principal)

    def call(
        self, principal: Principal, door: str, brain: str | None = None, id: Any = None, document: Any = None
    ) -> Outcome | Awaitable[Outcome]:
        """One door for one principal under its own clock: the Outcome now for a door that does not wait (every
        read), else an awaitable of it. Never raises for a refusal."""
        return self.timed(door, self.run, principal, door, brain, id, document)

    async def dispatch(
        self, principal: Principal, door: str, brain: str | None = None, id: Any = None, document: Any = None
    ) -> Outcome:
        """:meth:`call`, awaited."""
        outcome = self.timed(door, self.run, principal, door, brain, id, document)
        return outcome if isinstance(outcome, Outcome) else await outcome

    def timed(self, door: str, work: Callable[..., Answer], *args: Any) -> Outcome | Awaitable[Outcome]:
        """The one clock of a call: run ``work(*args)`` (a transport's whole handling of one request, the gate
        and the door included) and answer its Outcome with the measured milliseconds. The arguments are
        passed rather than closed over: no closure is made per request.

        A door that answers without waiting (every read) is answered here and now, with no task
        and no await; one that must wait (a write's shared fsync) answers an awaitable Outcome.
        """
        started = time.perf_counter_ns()
        try:
            answer = work(*args)
        except Exception as exc:
            return self._outcome(door, started, None, exc)
        if isinstance(answer, dict):  # elapsed_ms, inline: every read pays it
            return Outcome(door, (time.perf_counter_ns() - started + 500) // 1000 / 1000, answer, None)
        if isinstance(answer, HeldFeed):
            return Outcome(door, elapsed_ms(started), {}, None, answer)
        return self._later(door, started, answer)

    async def _later(self, door: str, started: int, pending: Awaitable[dict[str, Any]]) -> Outcome:
        try:
            answer = await pending
        except Exception as exc:
            return self._outcome(door, started, None, exc)
        return self._outcome(door, started, answer, None)

    @staticmethod
    def _outcome(door: str, started: int, answer: dict[str, Any] | None, exc: Exception | None) -> Outcome:
        if exc is None:
            return Outcome(door, elapsed_ms(started), answer, None)
        if isinstance(exc, R.Refusal):
            refusal = exc
        else:  # a fault is logged under a reference, never shown
            ref = str(uuid.uuid4())
            log.error("internal error in door %s (ref %s)", door, ref, exc_info=exc)
            refusal = R.InternalError(f"an unexpected fault; see the log under {ref}", ref=ref)
        return Outcome(door, elapsed_ms(started), None, refusal)

    def run(
        self, principal: Principal, name: str, brain: str | None, id_: Any, document: Any, write: str | None = None
    ) -> Answer:
        """The gate and the door, without the clock: the answer, or an awaitable of it for a door that waits.
        ``write``: the id a write was sent with (``brainy-write``, docs/fleet.md "A write sent twice")."""
        plan = PLANS.get(name) if isinstance(name, str) else None
        if plan is None:
            raise R.UnknownDoorError(f"no door is named {name!r}", door=str(name))
        door = plan.door
        if brain is None and plan.takes_brain:  # DOORS 0.2: a key that reaches one brain may leave it out
            brain = self.brains.only_brain(principal)
        if brain is not None and (type(brain) is not str or brain not in _LEGAL_NAMES):  # a name not yet seen
            check_brain_name(brain)
        gate(principal, door, brain)
        if self.fleet is not None and brain is not None and plan.owned:
            owned_here(self.fleet, brain)
            handing = self.fleet.handing.get(brain) if door.kind == "write" else None
            if handing is not None:
                return self._after_hand_over(handing, principal, name, brain, id_, document, write)
        # 5. the door: for a row-writing door first the caller rule (DOORS 0.4: one law for engine, vfs and
        # profile writes, whether or not the door has landed), then its disposition, then the engine (whose
        # commit path asks the policy guardrails before the write)
        if plan.guarded:
            if plan.writes_rows and principal.caller is None:
                raise R.ServiceKeyCannotWriteError(
                    f"{door.name} writes rows, and this service key asserted no caller (X-Brainy-Caller)",
                    door=door.name,
                )
            if plan.closed is not None:
                raise plan.closed()
        if brain is None and plan.takes_brain:
            raise R.InvalidArgumentError("brain: required", field="brain", reason="missing")
        document = plan.checked.document(id_, document)
        entry = REGISTERED[door.name]
        brains = self.brains
        if plan.host:  # the host's own doors reach archived and unborn brains: no door count
            return entry.fn(Call(principal, door, brain, id_, document, brains, self.host))
        entered = brains.enter(brain)
        try:
            if entry.runs == READ:
                handle = brains.held(entered, False)
                # a write answered before its followers moved: the read waits for them (read-your-writes), here,
                # so every read still answers at once; bounded by one group's follower step, which a read meeting
                # that step's state lock always waited for
                handle.until_visible()
            if entry.runs == READ and entry.threaded:
                result = self._read_threaded(entry, entered, id_, document, principal)
            elif entry.runs == READ:
                texts = entry.embeds(document) if entry.embeds is not None else ()
                if texts and not embedder.warmed(texts):  # the model runs off the loop, then the read on it
                    result = self._read_warmed(entry, entered, id_, document, texts, principal)
                else:
                    result = calling.read(entry, handle.wire_head(), id_, document, principal)
                    if entry.stamp is not None:  # the inbox's presence: written after it, when it may be
                        result = self._stamped(entry, handle, door.name, result, principal)
            elif entry.runs == registry.WRITE:
                result = brains.held(entered, True).awrite(
                    door.name, document, caller=principal.caller, via=principal.via, roles=principal.roles, write=write
                )
                if entry.links:  # then the reading door's link, once the commit is durable
                    result = reading_door.after_write(self.reading_door, principal, document, result)
            elif entry.runs == registry.MODEL:  # the brain is named for reach; its store is not opened
                result = embedder.run(entry.fn, document)
            else:
                result = entry.fn(Call(principal, door, brain, id_, document, brains, self.host))
        except BaseException:
            brains.left(entered)
            raise
        if isinstance(result, dict):
            brains.left(entered)
            return result
        return self._finish(entered, result)

    def hold(
        self, principal: Principal, name: str, brain: str | None, document: dict[str, Any], resume: str | None = None
    ) -> HeldFeed:
        """A door's answer held open: the changes door as a live feed of whole commits (DOORS.md 10.2), past
        the gate a call of it meets, resuming at the commit boundary ``resume`` (the stream's
        ``Last-Event-ID``) or ``document``'s ``since`` names, its first catch-up read. Under :meth:`timed` it
        is the Outcome's ``held``; a transport frames it and asks it for each later drain."""
        plan = PLANS.get(name) if isinstance(name, str) else None
        if plan is None or not plan.holds:
            raise R.UnknownDoorError(f"no door named {name!r} is held open", door=str(name))
        if brain is None:
            brain = self.brains.only_brain(principal)
        brain = check_brain_name(brain)
        gate(principal, plan.door, brain)
        if self.fleet is not None:
            owned_here(self.fleet, brain)
        stray = sorted(set(document) - feed.HELD_ARGUMENTS)
        if stray:
            raise R.BadQueryParameterError(f"{stray[0]}: not a parameter of the change stream", param=stray[0])
        writer = self.brains.open_writer(brain)
        if writer is not None:  # as a read door waits (run)
            writer.until_visible()
        held = HeldFeed(self.brains, brain, feed.check_limit(document.get("limit")))
        held.open(document.get("since", 0), resume)
        return held

    def _stamped(
        self, entry: registry.Registered, brain: Brain, name: str, answer: dict[str, Any], principal: Principal
    ) -> dict[str, Any] | Awaitable[dict[str, Any]]:
        """``answer``, or an awaitable of it once the stamp it asks for is written (``registry.Stamp``): only when
        this process holds the brain's lease (a read never claims it) and the credential may write."""

        def blocked() -> str | None:
            if principal.caller is None:
                return calling.NO_CALLER
            if principal.scope is not None and "write" not in principal.scope:
                return calling.READ_ONLY_CREDENTIAL
            return None if brain.role == "writer" else calling.LEASE_NOT_HELD

        args = calling.stamp_wanted(entry, answer, blocked)
        if args is None:
            return answer
        return self._stamp(entry, brain, name, answer, args, principal)

    @staticmethod
    async def _stamp(
        entry: registry.Registered,
        brain: Brain,
        name: str,
        answer: dict[str, Any],
        args: dict[str, Any],
        principal: Principal,
    ) -> dict[str, Any]:
        try:
            receipt = await brain.awrite(name, args, caller=principal.caller, via=principal.via, roles=principal.roles)
        except R.Refusal as refused:
            return calling.stamped(entry, answer, None, refused)
        return calling.stamped(entry, answer, receipt, None)

    async def _read_warmed(
        self,
        entry: registry.Registered,
        entered: Any,
        id_: Any,
        document: dict[str, Any],
        texts: list[str],
        principal: Principal,
    ) -> dict[str, Any]:
        await embedder.run(embedder.warm, texts)
        return calling.read(entry, self.brains.held(entered, False).wire_head(), id_, document, principal)

    async def _read_threaded(
        self, entry: registry.Registered, entered: Any, id_: Any, document: dict[str, Any], principal: Principal
    ) -> dict[str, Any]:
        """A read registered ``threaded``, at the head it is called at, on a worker thread (registry.py)."""
        head = self.brains.held(entered, False).wire_head()
        return await asyncio.to_thread(calling.read, entry, head, id_, document, principal)

    async def _after_hand_over(
        self,
        handing: asyncio.Event,
        principal: Principal,
        name: str,
        brain: str,
        id_: Any,
        document: Any,
        write: str | None,
    ) -> dict[str, Any]:
        """A write held back while its brain is handed over (docs/fleet.md "Planned move"): run once it has ended
        (bounded), so it is served here still or refused naming the new owner, whom a proxying node asks next."""
        try:
            await asyncio.wait_for(handing.wait(), HAND_OVER_WAIT)
        except TimeoutError:
            pass
        answer = self.run(principal, name, brain, id_, document, write)
        return answer if isinstance(answer, dict) else await answer

    async def _finish(self, entered: Any, pending: Awaitable[dict[str, Any]]) -> dict[str, Any]:
        try:
            return await pending
        finally:
            self.brains.left(entered)
