"""The reading-door callback (seed 001, "The reading-door callback"; DOORS 9.2, ``memory.write``).

``brainy serve --reading-door URL`` names the one outside receiver this process may reach: after a
path-bearing ``memory.write`` by a caller holding the owner rung (the owner triple, or an asserted
``X-Brainy-Owner: true``), the write asks it for a browsable link to the file it just wrote::

    POST <URL>
    Content-Type: application/json
    Authorization: Bearer <this server's own service key, the keys file's ! line>

    {"vfsPath": "/notes/idea.md", "owner": "person:you@example.com", "summary": "a one-line gist",
     "tags": ["idea", "note"], "contentType": "text/markdown"}

and expects ``{"doorUrl": "<a URL>"}`` within :data:`MINT_TIMEOUT` seconds. Anything else (a non-2xx
status, an answer with no ``doorUrl`` string, a timeout, an unreachable receiver, no service key) is
a MINT failure, never a write failure: the write's answer carries ``doorUrl: null`` and a
``doorUrlReason`` naming what happened, and the rows it wrote stand. No receiver configured, or a
caller without the owner rung: no request, ``doorUrlReason`` ``not-configured`` / ``not-owner``.

The memory door calls :func:`door_url` once its commit is durable, with the receiver the server
holds (``Dispatcher.reading_door``, None when the flag is absent). :func:`configure` is the start-up
check: a receiver with no service-key line refuses the start, since every mint would fail alike.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import logging
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from brainy.auth.principal import Principal
from brainy.contract.limits import json_loads

log = logging.getLogger("brainy.reading_door")

#: Seconds the receiver has to answer, the whole exchange (the seed's READING_DOOR_MINT_TIMEOUT_MS).
MINT_TIMEOUT = 5.0
#: An answer larger than this is not a ``{"doorUrl": …}`` document.
MAX_ANSWER = 64 * 1024


class ReadingDoorConfigError(ValueError):
    """``--reading-door`` cannot work as given; the server refuses to start."""


@dataclass(frozen=True)
class ReadingDoor:
    """The receiver: its URL, and where this server's service key is read at each mint (the keys file
    reloads, so the key is asked for then, not kept)."""

    url: str
    service_key: Callable[[], str | None]
    timeout: float = MINT_TIMEOUT

    async def mint(self, body: dict[str, Any]) -> dict[str, Any]:
        """``{"doorUrl": url}``, or ``{"doorUrl": None, "doorUrlReason": "mint-failed: …"}``; never raises.
        The exchange runs on a worker thread, off the loop, bounded as a whole by ``timeout``."""
        key = self.service_key()
        if key is None:
            return _failed("no service key in the keys file")
        loop = asyncio.get_running_loop()
        try:
            status, raw = await asyncio.wait_for(loop.run_in_executor(None, self._post, key, body), self.timeout)
        except TimeoutError:
            return _failed(f"the receiver did not answer within {self.timeout:g} s")
        except (OSError, http.client.HTTPException) as exc:
            return _failed(f"the receiver is unreachable ({type(exc).__name__}: {exc})")
        if not 200 <= status < 300:
            return _failed(f"the receiver answered {status}")
        try:
            answer = json_loads(raw)
        except ValueError:
            return _failed("the receiver's answer is not JSON")
        if not isinstance(answer, dict) or not isinstance(answer.get("doorUrl"), str) or not answer["doorUrl"]:
            return _failed("the receiver's answer has no doorUrl string")
        return {"doorUrl": answer["doorUrl"]}

    def _post(self, key: str, body: dict[str, Any]) -> tuple[int, bytes]:
        parts = urlsplit(self.url)
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        connection: http.client.HTTPConnection
        if parts.scheme == "https":
            connection = http.client.HTTPSConnection(
                parts.hostname or "", parts.port, timeout=self.timeout, context=ssl.create_default_context()
            )
        else:
            connection = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=self.timeout)
        try:
            connection.request(
                "POST",
                path,
                json.dumps(body).encode(),
                {"Content-Type": "application/json", "Authorization": f"Bearer {key}"},
            )
            response = connection.getresponse()
            return response.status, response.read(MAX_ANSWER + 1)
        finally:
            connection.close()


def _failed(why: str) -> dict[str, Any]:
    log.warning("reading-door mint failed: %s", why)
    return {"doorUrl": None, "doorUrlReason": f"mint-failed: {why}"}


def body(vfs_path: str, owner: str, summary: str | None, tags: list[str] | None, content_type: str) -> dict[str, Any]:
    """The request document: the path the write used, the calling credential's own id (never the
    service key's), the write's own classifier fields, and the content type read back from the file."""
    return {
        "vfsPath": vfs_path,
        "owner": owner,
        "summary": summary or "",
        "tags": list(tags or []),
        "contentType": content_type,
    }


async def door_url(
    door: ReadingDoor | None,
    principal: Principal,
    vfs_path: str,
    summary: str | None,
    tags: list[str] | None,
    content_type: str,
) -> dict[str, Any]:
    """What ``memory.write`` adds to its answer after its commit: ``doorUrl`` (and ``doorUrlReason`` when it
    is null). Called once the write is durable; a failure here never undoes it."""
    if door is None:
        return {"doorUrl": None, "doorUrlReason": "not-configured"}
    if not principal.owner_rung or principal.caller is None:
        return {"doorUrl": None, "doorUrlReason": "not-owner"}
    return await door.mint(body(vfs_path, principal.caller, summary, tags, content_type))


async def after_write(
    door: ReadingDoor | None, principal: Principal, document: dict[str, Any], committed: Awaitable[dict[str, Any]]
) -> dict[str, Any]:
    """A ``memory.write`` answer once its commit is durable, its ``doorUrl`` fields the receiver's: the
    dispatcher's step after that door's commit (engine code cannot reach the net)."""
    answer = await committed
    answer.pop("doorUrlReason", None)  # the rule's in-process not-configured, replaced by this server's answer
    answer.update(
        await door_url(
            door, principal, answer["path"], document.get("summary"), document.get("tags"), answer["contentType"]
        )
    )
    return answer


def configure(url: str | None, service_key: Callable[[], str | None]) -> ReadingDoor | None:
    """The receiver ``--reading-door`` names, checked at start: an http(s) URL with a host, and a
    service-key line in the keys file. None when the flag is absent."""
    if url is None:
        return None
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ReadingDoorConfigError(f"--reading-door {url!r}: expected an http:// or https:// URL with a host")
    if service_key() is None:
        raise ReadingDoorConfigError(
            "--reading-door is set, but the keys file has no service-key line (! reach): "
            "every mint would fail to authenticate"
        )
    return ReadingDoor(url, service_key)
