"""The identity store: ``<brains-dir>/.identity``, a brainy store of its own (seed 001, "Where accounts live").

It holds what must outlive a restart: accounts, registered clients, and refresh-token records (under
the SHA-256 of the token, never the token). It is a sibling of the served brains, never one of them:
the dot keeps it out of the brains directory's listing, and it is opened once, at start, directly,
never through the residency arbiter, and kept resident until the server stops.

Each record is one internal entity keyed ``<kind>:<id>`` whose metadata carries the record as JSON
text, so no field of a record can collide with a name the engine reserves.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from brainy.engine import Brain, StoreExistsError, init_store

IDENTITY_NAME = ".identity"


class Records:
    """Put, get and delete small JSON records in the identity store (each write durable when it returns)."""

    def __init__(self, brain: Brain) -> None:
        self.brain = brain

    @classmethod
    def open(cls, path: Path) -> Records:
        try:
            init_store(path)
        except StoreExistsError:
            pass
        brain = Brain.open(path, name=IDENTITY_NAME)
        if brain.role != "writer":  # another live process holds it: every sign-in here would fail to record
            brain.close()
            raise ValueError(f"the identity store {path} is held by another live process; one server signs in")
        return cls(brain)

    def put(self, key: str, record: dict[str, Any]) -> None:
        self.brain.call(
            "add",
            {
                "type": "document",
                "id": key,
                "metadata": {"record": json.dumps(record, separators=(",", ":"))},
                "visibility": "internal",
                "upsert": True,
            },
        )

    def get(self, key: str) -> dict[str, Any] | None:
        entity = self.brain.call("get", key)["entity"]
        if entity is None:
            return None
        record = json.loads(entity["metadata"]["record"])
        return record if isinstance(record, dict) else None

    def delete(self, key: str) -> None:
        if self.get(key) is not None:
            self.brain.call("remove", {"id": key})

    def close(self) -> None:
        self.brain.close()
