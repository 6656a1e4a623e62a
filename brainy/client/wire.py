"""The client's wire, without a socket (STYLE 1): a door call as an HTTP/1.1 request, and the bytes of a response
as the door's answer or its refusal. ``sync.py`` and ``aio.py`` move the bytes; everything they mean is here.

A call is built from the contract's door table (``brainy.contract.doors``): its method and path, its path
parameters filled from the positional arguments, a GET door's arguments as query parameters typed as the server
reads them (``brainy/net/routes.py``), a body door's as MessagePack (vectors as float32s, DOORS.md 0.3) or JSON.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urlencode

import httptools
import msgpack
import orjson

from brainy import errors
from brainy._speedups import wirepack
from brainy.contract import doors as D
from brainy.contract.vectors import Vector

MSGPACK = "application/msgpack"
JSON = "application/json"
#: a batch door's body past this many bytes goes as several requests (each its own commit), so no request nears
#: the server's 64 MiB limit or a call's timeout
BATCH_BYTES = 16 << 20
#: the doors whose ``items`` may be split across requests: each item is its own write, and the answers join
BATCHES = frozenset({"addMany", "updateMany", "relateMany"})
VFS_PATH = "/v1/brains/{brain}/vfs"


@dataclass
class Request:
    """One HTTP request of a door call: ``safe`` says whether sending it twice is harmless (a read)."""

    door: str
    method: str
    target: str
    body: bytes
    content_type: str | None
    safe: bool


def request(
    door: D.Door, brain: str | None, positional: tuple[Any, ...], document: dict[str, Any] | None, msgpack_body: bool
) -> Request:
    """The request of ``door`` on ``brain`` (None for a host door outside any brain), its path parameters other
    than ``brain`` filled in order from ``positional``, its argument document ``document``."""
    names = [p.name for p in door.path_params if p.name != "brain"]
    if len(positional) > len(names) + 1:
        raise TypeError(f"{door.name}() takes {', '.join(names + ['one argument document'])}")
    values = dict(zip(names, positional, strict=False))
    if len(positional) > len(names):
        extra = positional[len(names)]
        if extra is not None and not isinstance(extra, dict):
            raise TypeError(f"{door.name}(): the argument document must be a dict")
        document = {**(extra or {}), **(document or {})}
    document = dict(document or {})
    if "brain" in {p.name for p in door.path_params}:
        if brain is None:
            raise TypeError(f"{door.name} is a door of a brain: call it on client.brain(name)")
        values["brain"] = brain
    for name in names:
        if name not in values:
            if name not in document:
                raise TypeError(f"{door.name}() needs {name}")
            values[name] = document.pop(name)
    target = door.path
    for name, value in values.items():
        target = target.replace("{" + name + "}", quote(str(value), safe=""))
    if door.path == VFS_PATH:
        document.setdefault("op", door.short)  # every vfs door is one path; the body's op names it (DOORS 8)
    if door.method == "GET":
        if document:
            target += "?" + urlencode({k: _query(v) for k, v in document.items()})
        return Request(door.name, "GET", target, b"", None, True)
    body, kind = encode(document, msgpack_body)
    return Request(door.name, door.method, target, body, kind, door.kind == "read")


def _query(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float, str)):
        return str(value)
    return orjson.dumps(value).decode()


def encode(document: Any, msgpack_body: bool) -> tuple[bytes, str]:
    if msgpack_body:
        return wirepack.pack(_vectors(document)), MSGPACK
    return orjson.dumps(document), JSON


def _vectors(document: Any) -> Any:
    """``document`` with each ``vector`` list (top level, or in a batch's items) marked a :class:`Vector`, which the
    MessagePack packer writes as float32s. Marked as it is: its shortest decimals (``Vector.of``, 0.7 ms a vector)
    are JSON's business, and a float32 packs the same from either."""
    if not isinstance(document, dict):
        return document
    out = dict(document)
    if isinstance(out.get("vector"), list):
        out["vector"] = Vector(out["vector"])
    if isinstance(out.get("items"), list):
        out["items"] = [_vectors(item) for item in out["items"]]
    return out


def split(door: str, document: dict[str, Any] | None, msgpack_body: bool, limit: int | None = None) -> list[Any]:
    """The argument documents one batch call goes as: itself, or its ``items`` in runs each under ``limit`` bytes
    (default :data:`BATCH_BYTES`; a single item over it still goes alone: the server names the refusal)."""
    limit = BATCH_BYTES if limit is None else limit
    items = (document or {}).get("items")
    if door not in BATCHES or not isinstance(items, list) or len(encode(document, msgpack_body)[0]) <= limit:
        return [document]
    runs: list[list[Any]] = [[]]
    held = 0
    for item in items:
        size = len(encode(item, msgpack_body)[0])
        if runs[-1] and held + size > limit:
            runs.append([])
            held = 0
        runs[-1].append(item)
        held += size
    return [{**document, "items": run} for run in runs]  # type: ignore[dict-item]


def join(answers: list[dict[str, Any]], offsets: list[int]) -> dict[str, Any]:
    """The answers of one split batch as one: ids in order, failures at their index in the whole batch, the last
    commit's generation and timestamp."""
    if len(answers) == 1:
        return answers[0]
    whole = dict(answers[-1])
    whole["ids"] = [i for a in answers for i in a.get("ids", [])]
    whole["failed"] = [
        {**f, "index": f["index"] + offset}
        for a, offset in zip(answers, offsets, strict=True)
        for f in a.get("failed", [])
    ]
    whole["generations"] = [a.get("generation") for a in answers]
    return whole


def head(
    request: Request, host: str, key: str | None, msgpack_answers: bool, extra: dict[str, str] | None = None
) -> bytes:
    """The request line and headers of ``request``, keep-alive."""
    lines = [f"{request.method} {request.target} HTTP/1.1", f"Host: {host}", "Connection: keep-alive"]
    lines.append(f"Accept: {MSGPACK if msgpack_answers else JSON}")
    if key:
        lines.append(f"Authorization: Bearer {key}")
    if request.content_type is not None:
        lines.append(f"Content-Type: {request.content_type}")
    lines.append(f"Content-Length: {len(request.body)}")
    for name, value in (extra or {}).items():
        lines.append(f"{name}: {value}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


@dataclass
class Response:
    """A response read off the connection: status, headers (lower-case names), body; ``keep`` says the connection
    may carry the next request."""

    status: int = 0
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    keep: bool = True


class Reader:
    """Feed it the bytes of one response as they arrive; ``done`` once it is whole (httptools' parser)."""

    def __init__(self) -> None:
        self.response = Response()
        self._parts: list[bytes] = []
        self._name = b""
        self.done = False
        self._parser = httptools.HttpResponseParser(self)
        self.events: list[bytes] | None = None  # a held stream's body chunks as they come (stream())

    def on_header(self, name: bytes, value: bytes) -> None:
        self.response.headers[name.decode("latin-1").lower()] = value.decode("latin-1")

    def on_headers_complete(self) -> None:
        self.response.status = self._parser.get_status_code()
        self.response.keep = self._parser.should_keep_alive()

    def on_body(self, body: bytes) -> None:
        if self.events is not None:
            self.events.append(body)
        else:
            self._parts.append(body)

    def on_message_complete(self) -> None:
        self.response.body = b"".join(self._parts)
        self.done = True

    def feed(self, data: bytes) -> None:
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as exc:
            raise ValueError(f"the server's answer is not HTTP/1.1: {exc}") from None

    def eof(self) -> None:
        """The peer closed: a body read to the close is whole; anything else was cut short."""
        if not self.done:
            raise ValueError("the connection closed before the answer was whole")


def answer(response: Response) -> Any:
    """The door's answer, or its refusal raised as its own class (``brainy.errors``)."""
    kind = (response.headers.get("content-type") or "").split(";")[0].strip().lower()
    try:
        if kind == MSGPACK:
            document = msgpack.unpackb(response.body, raw=False, strict_map_key=False) if response.body else {}
        elif kind in (JSON, "") or kind.endswith("+json"):
            document = orjson.loads(response.body) if response.body else {}
        else:
            document = response.body.decode("utf-8", "replace")  # the text server doors (/llms.txt)
    except (ValueError, msgpack.UnpackException) as exc:
        raise ValueError(f"the answer ({response.status}, {kind}) does not decode: {exc}") from None
    if isinstance(document, dict):
        if "error" in document and response.status >= 400:
            raise errors.from_wire(document["error"], response.status)
        document.pop("_meta", None)
    elif response.status >= 400:
        raise errors.from_wire({"name": "InternalError", "message": str(document)[:200]}, response.status)
    return document


def events(chunks: Iterator[bytes]) -> Iterator[tuple[str, str, str]]:
    """Server-sent events out of a held stream's body chunks: ``(id, event, data)`` per event; comments
    (heartbeats) are skipped."""
    buffer = b""
    for chunk in chunks:
        buffer += chunk
        while b"\n\n" in buffer:
            block, buffer = buffer.split(b"\n\n", 1)
            id_ = event = ""
            data: list[str] = []
            for line in block.decode("utf-8").split("\n"):
                if not line or line.startswith(":"):
                    continue
                name, _, value = line.partition(":")
                value = value[1:] if value.startswith(" ") else value
                if name == "id":
                    id_ = value
                elif name == "event":
                    event = value
                elif name == "data":
                    data.append(value)
            if event or data:
                yield id_, event or "message", "\n".join(data)
