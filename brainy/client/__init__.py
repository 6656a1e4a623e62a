"""brainy's Python client: a remote brain with the embedded ``Brain``'s door surface.

    from brainy.client import Client
    with Client("http://127.0.0.1:8300", key="bky_...") as client:
        notes = client.brain("notes")
        notes.add({"type": "document", "data": "the first note"})
        hits = notes.find({"query": "first", "limit": 5})

Refusals raise the classes of :mod:`brainy.errors`, exactly as the embedded ``Brain`` does; a failed transport
raises :class:`brainy.errors.TransportError`. See docs/client.md.
"""

from brainy.client.aio import AsyncBrain, AsyncClient
from brainy.client.sync import Client, RemoteBrain

__all__ = ["AsyncBrain", "AsyncClient", "Client", "RemoteBrain"]
