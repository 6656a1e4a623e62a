"""MCP resource templates (DOORS.md 0.7), declared once and joined to the door table at import.

Seed 000, "MCP": resources are records with addresses, and every template names the
door that reads it; reading one calls that door through the same path everything
else uses. This table is the one place a template is written: the MCP server matches
addresses against it and lists it, ``initialize.instructions`` names it, and a test
holds it equal to DOORS.md 0.7 and to ``docs/mcp.md``.

A template's placeholders fill the door's arguments: a placeholder named like one of
the door's path parameters (``brain``, ``id``) travels as that parameter, and
``fills`` writes document fields from the address (the skills folder's ``path``).
An address without ``{brain}`` is the store's own and reads the one brain a one-brain
key reaches. The join is checked in both directions: every placeholder reaches an
argument, and every other argument the door requires is reached, or the import fails
naming the template.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from brainy.contract import doors as D

SCHEME = "brainy://"
_PLACEHOLDER = re.compile(r"\{([A-Za-z0-9]+)\}")


@dataclass(frozen=True)
class ResourceTemplate:
    """A resource address (RFC 6570 level 1, one percent-encoded segment per placeholder) and its door."""

    template: str
    door: str
    name: str
    title: str
    description: str
    #: Document fields filled from the address: field name -> text with placeholders.
    fills: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    #: The door answers a stored file, served as the resource's own text and media type (not as JSON).
    file: bool = False

    @property
    def placeholders(self) -> tuple[str, ...]:
        return tuple(_PLACEHOLDER.findall(self.template))

    @property
    def offered(self) -> bool:
        """A resource whose door has no implementation is not offered (seed 000, "MCP")."""
        return D.BY_NAME[self.door].native

    def fill(self, values: Mapping[str, str]) -> str:
        """The address with each placeholder replaced by ``values`` (unencoded: names are plain)."""
        return fill(self.template, values)


def fill(text: str, values: Mapping[str, str]) -> str:
    """``text`` with each ``{placeholder}`` replaced by its value."""
    return _PLACEHOLDER.sub(lambda m: values[m.group(1)], text)


#: DOORS.md 0.7, in order. There is no relation resource: no door reads one relation by id.
RESOURCE_TEMPLATES: tuple[ResourceTemplate, ...] = (
    ResourceTemplate(
        "brainy://{brain}/counts",
        "counts",
        "census",
        "A brain's census",
        "The brain's size: entities and relations by type (the counts door).",
    ),
    ResourceTemplate(
        "brainy://{brain}/entities/{id}",
        "get",
        "entity",
        "An entity",
        "One entity by its id or natural key (the get door).",
    ),
    ResourceTemplate(
        "brainy://{brain}/entities/{id}/history",
        "history",
        "history",
        "An entity's history",
        "Every version of one entity (the history door).",
    ),
    ResourceTemplate(
        "brainy://skills/{path}",
        "readFile",
        "skill",
        "A skill",
        "A document of the store's /skills/ folder (the readFile door).",
        MappingProxyType({"path": "/skills/{path}"}),
        file=True,
    ),
)

#: The skills: the template that reads one (and, as it does, any store file MCP serves), and the door
#: whose listing of the folder names them in ``resources/list``.
SKILL = RESOURCE_TEMPLATES[-1]
SKILLS_LISTED_BY = "readdir"


def join_to_doors(templates: tuple[ResourceTemplate, ...]) -> None:
    """Fail the import when a template and its door's arguments do not meet (see the module docstring)."""
    for t in templates:
        where = f"MCP resource {t.template!r}"
        door = D.BY_NAME.get(t.door)
        if door is None:
            raise D.ContractError(f"{where}: names {t.door!r}, which is not a door")
        if not t.template.startswith(SCHEME):
            raise D.ContractError(f"{where}: an address starts {SCHEME}")
        names = {p.name for p in door.params}
        path = {p.name for p in door.path_params}
        filled = {n for text in t.fills.values() for n in _PLACEHOLDER.findall(text)}
        for name in t.placeholders:
            if name not in path and name not in filled:
                raise D.ContractError(f"{where}: {{{name}}} reaches no argument of {door.name}")
        for name in t.fills:
            if name not in names or name in path:
                raise D.ContractError(f"{where}: fills {name!r}, which is not a document field of {door.name}")
        reached = (set(t.placeholders) & path) | set(t.fills)
        for p in door.params:
            # An address without {brain} is the store's own (the skills): it reads the one brain a
            # one-brain key reaches, as a tool call that leaves brain out does.
            if p.required and p.name != "brain" and p.name not in reached:
                raise D.ContractError(f"{where}: {door.name} requires {p.name!r}, and the address does not give it")


join_to_doors(RESOURCE_TEMPLATES)
