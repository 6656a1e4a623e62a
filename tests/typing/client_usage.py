"""What mypy checks against the client's generated stubs (brainy/client/sync.pyi, aio.pyi): every line here is a
use the stubs must type (tests/test_types.py runs mypy over this file; tests/test_client.py runs it too)."""

from __future__ import annotations

from typing import Any

from brainy import errors
from brainy.client import AsyncClient, Client


def blocking() -> dict[str, Any]:
    with Client("http://127.0.0.1:8300", "key", timeout=5.0) as client:
        notes = client.brain("notes")
        added = notes.add({"type": "document", "data": "x"})
        notes.get(str(added["id"]), includeVector=True)
        notes.find({"query": "x"}, timeout=2.0)
        for frame in notes.changes(since=0):
            print(frame["generation"])
        try:
            return notes.update({"id": "nobody"})
        except errors.EntityNotFoundError as refused:
            return {"refused": refused.name}


async def concurrent() -> dict[str, Any]:
    async with AsyncClient() as client:
        notes = client.brain("notes")
        async for frame in notes.changes():
            print(frame["index"])
        return await notes.counts()
