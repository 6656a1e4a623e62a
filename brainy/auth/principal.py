"""Who is calling: one credential per request, whatever carried it (a keys-file line or a minted token).

The transports build a :class:`Principal` once per request and hand it to the
dispatcher; nothing after that point reads a header or a key again.
"""

from __future__ import annotations

from dataclasses import dataclass

OWNER_TRIPLE = frozenset(("read", "write", "owner"))


@dataclass(frozen=True)
class Principal:
    """A proven credential.

    ``brains`` is the set of brains a static key reaches (None: every brain,
    the keys file's ``*``). A minted token instead names one ``token_brain``
    and carries a ``scope``. ``caller`` is who a write is attributed to; a
    service key has none unless the request asserted one, and then ``via``
    names the service that asserted it.
    """

    id: str
    kind: str  # "person" | "business" | "service" | "token"
    brains: frozenset[str] | None = None
    service_key: bool = False  # the keys file's "!" key: mechanics and host doors only
    token_brain: str | None = None
    scope: frozenset[str] | None = None  # a token's scope; None for static keys
    caller: str | None = None
    via: str | None = None
    owner: bool = False
    roles: tuple[str, ...] = ()

    @classmethod
    def static_key(
        cls,
        principal: str,
        brains: frozenset[str] | None = None,
        service_key: bool = False,
    ) -> Principal:
        """A keys-file line: ``kind:name``; person and business keys are their own caller."""
        kind = principal.partition(":")[0]
        caller = None if kind == "service" else principal
        return cls(principal, kind, brains, service_key, caller=caller)

    @classmethod
    def token(cls, sub: str, brain: str, scope: frozenset[str]) -> Principal:
        """A verified ``bk1.`` token: its subject is its caller."""
        return cls(sub, "token", token_brain=brain, scope=scope, caller=sub)

    @property
    def owner_triple(self) -> bool:
        """The strict owner rung: the owner triple on a minted token (the three ruling doors)."""
        return self.scope is not None and OWNER_TRIPLE <= self.scope

    @property
    def owner_rung(self) -> bool:
        """The loose owner rung (DOORS 0.4): the owner triple, or a service's asserted ``X-Brainy-Owner: true``
        (``accords.decide``, the reading-door mint)."""
        return self.owner_triple or self.owner
