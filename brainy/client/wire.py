"""The client's wire, without a socket (STYLE 1): a door call as its requests (:func:`plan`), each as HTTP/1.1 bytes
(:func:`head`) or HTTP/2 header fields (:func:`fields`; the streams are ``h2conn.py``'s), the bytes of a response as
the door's answer or its refusal, the held change feed's events and its resume rule (:class:`Feed`), and which
failures a call may be sent again after (:func:`again`). ``sync.py`` and ``aio.py`` move the bytes; everything
they mean is here.

A call is built from the contract's door table (``brainy.contract.doors``): its method and path, its path
parameters filled from the positional arguments, a GET door's arguments as query parameters typed as the server
reads them (``brainy/net/routes.py``), a body door's as MessagePack (vectors as float32s, DOORS.md 0.3) or JSON.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NoReturn
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
EVENT_STREAM = "text/event-stream"
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


class NotSpoken(ValueError):
    """The server does not speak the protocol the client was told to use (``Client(http2=True)`` against a server
    without HTTP/2): asking again gets the same answer, so the call is not tried again."""


class Unprocessed(ConnectionError):
    """The server says it did not act on the request (HTTP/2's REFUSED_STREAM, or a GOAWAY below its stream; RFC
    9113 8.7): it may be sent again, whatever it was."""


@dataclass
class Plan:
    """A door call as requests: one, or a batch split by bytes (:func:`split`), each its own commit; ``offsets``
    holds where each request's items begin in the whole batch, for :meth:`join`."""

    requests: list[Request]
    offsets: list[int]

    def join(self, answers: list[Any]) -> Any:
        """The answers of the requests, in order, as the call's one answer."""
        return join(answers, self.offsets)


def plan(
    door: D.Door, brain: str | None, positional: tuple[Any, ...], options: dict[str, Any], msgpack_body: bool
) -> Plan:
    """The requests of ``door`` called on ``brain`` (None: on the client) with ``positional`` and ``options`` as the
    caller gave them: a host door of one brain called on the client names the brain first; a trailing positional
    dict is the argument document, ``options`` merged over it; a batch past :data:`BATCH_BYTES` goes in runs."""
    if brain is None and positional and any(p.name == "brain" for p in door.path_params):
        brain, positional = str(positional[0]), positional[1:]  # client.call("host.provision", "notes")
    document = dict(options) if options else None
    if len(positional) > len([p for p in door.path_params if p.name != "brain"]):
        *ids, extra = positional
        positional, document = tuple(ids), {**(extra or {}), **(document or {})}
    requests, offsets, at = [], [], 0
    for part in split(door.name, document, msgpack_body):
        requests.append(request(door, brain, positional, part, msgpack_body))
        offsets.append(at)
        at += len((part or {}).get("items", []))
    return Plan(requests, offsets)


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
    MessagePack packer writes as float32s. Marked as it is: shortest decimals are JSON's business (the server's
    ``brainy.store.rows.vector_out``), and a float32 packs the same from either."""
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


def fields(
    request: Request, key: str | None, accept: str, extra: dict[str, str] | None = None
) -> list[tuple[str, str]]:
    """The header fields of ``request`` on either protocol, names lower-case (as HTTP/2 requires, RFC 9113
    8.2.1): what it accepts, the key, its body's type and length, then ``extra``."""
    out = [("accept", accept)]
    if key:
        out.append(("authorization", f"Bearer {key}"))
    if request.content_type is not None:
        out.append(("content-type", request.content_type))
    if request.body or request.method != "GET":
        out.append(("content-length", str(len(request.body))))
    for name, value in (extra or {}).items():
        out.append((name.lower(), value))
    return out


def head(request: Request, host: str, key: str | None, accept: str, extra: dict[str, str] | None = None) -> bytes:
    """The HTTP/1.1 request line and headers of ``request``, keep-alive."""
    lines = [f"{request.method} {request.target} HTTP/1.1", f"host: {host}", "connection: keep-alive"]
    lines += [f"{name}: {value}" for name, value in fields(request, key, accept, extra)]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def h2_fields(
    request: Request, key: str | None, accept: str, extra: dict[str, str] | None = None
) -> list[tuple[bytes, bytes]]:
    """:func:`fields` as the bytes an HTTP/2 header block carries (the pseudo-headers are ``h2conn.py``'s)."""
    return [(name.encode("latin-1"), value.encode("latin-1")) for name, value in fields(request, key, accept, extra)]


def accepts(msgpack_answers: bool) -> str:
    """The ``Accept`` of a door call: MessagePack, or JSON when the client was asked for JSON."""
    return MSGPACK if msgpack_answers else JSON


@dataclass
class Response:
    """A response read off the connection: status, headers (lower-case names), body; ``keep`` says the connection
    may carry the next request. ``fields`` holds every header field as it came over HTTP/1.1 (lower-case names,
    in order, a repeated one each time): what a proxy passes on (brainy.fleet.proxy), where ``headers`` keeps the
    last of each name for a lookup."""

    status: int = 0
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    keep: bool = True
    fields: list[tuple[bytes, bytes]] = field(default_factory=list)


class Reader:
    """Feed it the bytes of one response as they arrive; ``done`` once it is whole (httptools' parser): the one
    HTTP/1.1 response reader, the client's and the fleet's (brainy.fleet.http1). A ``held``
    response (the change feed) hands its body out as it comes (:meth:`take`) when it is a 200; any other status
    is a refusal, its body kept whole like any answer's."""

    def __init__(self, held: bool = False, lookup: bool = True) -> None:
        self.response = Response()
        self._parts: list[bytes] = []
        self._name = b""
        self.done = False
        self._parser = httptools.HttpResponseParser(self)
        self._held = held
        self._chunks: list[bytes] = []
        # False: only ``fields`` (a proxy passes them on as read; ``headers`` stays empty, no field decoded)
        self._lookup = lookup

    def again(self) -> None:
        """Read the next response on the same connection with the same parser (kept alive: a peer's answers one
        after another), once this one is done."""
        self.response = Response()
        self._parts = []
        self.done = False

    def on_header(self, name: bytes, value: bytes) -> None:
        name = name.lower()
        self.response.fields.append((name, value))
        if self._lookup:
            self.response.headers[name.decode("latin-1")] = value.decode("latin-1")

    def on_headers_complete(self) -> None:
        self.response.status = self._parser.get_status_code()
        self.response.keep = self._parser.should_keep_alive()
        self._held = self._held and self.response.status == 200

    def on_body(self, body: bytes) -> None:
        if self._held:
            self._chunks.append(body)
        else:
            self._parts.append(body)

    def take(self) -> list[bytes]:
        """A held answer's body pieces since the last take."""
        chunks, self._chunks = self._chunks, []
        return chunks

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


def held_refused(response: Response) -> NoReturn:
    """A held stream answered other than 200: its refusal raised by name, else a ``ValueError`` saying so."""
    answer(response)
    raise ValueError(f"the held stream answered {response.status}")


class EventReader:
    """Server-sent events out of a held stream's body as it comes: :meth:`feed` a piece, get the events it
    completed as ``(id, event, data)``; comments (heartbeats) are skipped."""

    def __init__(self) -> None:
        self._buffer = b""

    def feed(self, chunk: bytes) -> list[tuple[str, str, str]]:
        out = []
        self._buffer += chunk
        while b"\n\n" in self._buffer:
            block, self._buffer = self._buffer.split(b"\n\n", 1)
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
                out.append((id_, event or "message", "\n".join(data)))
        return out


class Feed:
    """The held change feed of ``brain`` from ``since``, across connections: :meth:`request` opens (or reopens) it,
    :meth:`receive` turns its body into change frames. A reopened feed names the last frame handed out
    (``Last-Event-ID``); the server resumes at that frame's commit, from its start (DOORS.md's resume rule), so the
    frames of that commit already handed out are dropped here: none is lost, none handed out twice."""

    def __init__(self, brain: str, since: int | str | None) -> None:
        self.brain = brain
        self.since = since
        self.last: tuple[int, int] | None = None  # (generation, index) of the last frame handed out
        self._events = EventReader()

    def request(self) -> tuple[Request, dict[str, str]]:
        """The request that opens the feed from where it stands, and its extra header fields."""
        self._events = EventReader()  # a new connection's body starts afresh
        query = f"?since={self.since}" if self.since is not None and self.last is None else ""
        target = f"/v1/brains/{quote(self.brain, safe='')}/changes{query}"
        extra = {"accept-encoding": "identity"}
        if self.last is not None:
            extra["last-event-id"] = f"{self.last[0]}.{self.last[1]}"
        return Request("changes", "GET", target, b"", None, True), extra

    def receive(self, chunk: bytes) -> list[dict[str, Any]]:
        """The new change frames in ``chunk``; an error event raises its refusal by name."""
        frames = []
        for _, event, payload in self._events.feed(chunk):
            if event == "error":
                raise errors.from_wire(orjson.loads(payload).get("error"))
            if event != "change":
                continue
            frame = orjson.loads(payload)
            spot = (frame["generation"], frame["index"])
            if self.last is not None and spot <= self.last:
                continue  # the commit again, from its start (the resume rule): already handed out
            self.last = spot
            frames.append(frame)
        return frames


def again(request: Request, error: Exception, sent: bool, attempt: int, retries: int) -> bool:
    """Whether a call whose transport failed with ``error`` goes again (its ``attempt``-th failure): while
    ``retries`` last, when sending it twice is harmless — a read, a request that never left, one the server says it
    did not act on (:class:`Unprocessed`) — and never after a timeout (the call's time is spent) or a server's not
    speaking the protocol asked for (:class:`NotSpoken`: it will not start to)."""
    if attempt >= retries or isinstance(error, (TimeoutError, NotSpoken)):
        return False
    return request.safe or not sent or isinstance(error, Unprocessed)


def backoff(attempt: int) -> float:
    """Seconds to wait before the ``attempt``-th try again: doubling from 0.1 s, at most 2 s."""
    return min(2.0, 0.05 * 2**attempt)


def failure(request: Request, error: Exception, url: str) -> errors.TransportError:
    """The :class:`brainy.errors.TransportError` a call raises when its transport failed with ``error``."""
    what = "timed out" if isinstance(error, TimeoutError) else f"failed: {error}"
    return errors.TransportError(f"{request.method} {request.target} {what}", url=url, cause=error)
