"""The WebSocket session, sans-IO: the RFC 6455 handshake, frames in, events out, answers framed (DOORS.md 10.2).

Bytes and time in (:meth:`WsConnection.receive_data`), events out; answers in
(:meth:`WsConnection.send_text`), bytes out (:meth:`WsConnection.data_to_send`).
No socket, no task, no clock: the glue (``brainy.net.glue.ws``) runs the calls.
The framing hot path (header decoding, unmasking, answer frames) is the
``wsframe`` speedup.

Deliberately small (seed 001, "The WebSocket session"), and every omission is a
refusal by name, never a silence:

* a text frame is one call, JSON ``{ref, door, brain?, id?, body?}``
  (:func:`parse_call`), answered ``{ref, ok, door, result | error, meta: {ms}}``
  (:func:`answer`);
* a binary frame is ``BinaryFrameError``, a fragmented message
  ``FragmentedFrameError`` (its later fragments are skipped, never half-read);
  the session stays open after either;
* an unmasked client frame, a reserved bit (or a reserved opcode), a frame over
  :data:`MAX_FRAME` (read off its header, before a byte of it is buffered) and a
  control frame over 125 bytes end the session with the class's own RFC 6455
  close code (its ``ws.close`` in the contract), the class name as the reason;
* ping is answered with pong, close with close;
* a session that ended (its close frame framed) reads nothing more; the glue
  half-closes the connection and lingers (``brainy.net.deadlines.Lingering``), so
  a peer still sending gets the close frame, not a reset that would throw it away
  (RFC 6455 7.1.1: the server closes first, the client then).

The lifecycle is a table (:data:`LIFECYCLE`, STYLE 3): (state, input) to
(what is done, next state).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from dataclasses import dataclass
from typing import Any, Protocol

import orjson

from brainy._speedups import nesting, wsframe
from brainy.contract import refusals as R
from brainy.contract.limits import MAX_NESTING
from brainy.net import codecs

GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"  # RFC 6455 1.3: what the accept value hashes the key with
MAX_FRAME = 8 << 20  # FrameTooLargeError above this (DOORS.md 11.1)
MAX_CONTROL = 125  # RFC 6455 5.5: a control frame's payload limit
PATH = "/v1/ws"

TEXT, BINARY, CONTINUATION, CLOSE, PING, PONG = 0x1, 0x2, 0x0, 0x8, 0x9, 0xA
NORMAL_CLOSE, GOING_AWAY, PROTOCOL_ERROR, INVALID_PAYLOAD = 1000, 1001, 1002, 1007  # RFC 6455 7.4.1
_INPUTS = {TEXT: "text", BINARY: "binary", CONTINUATION: "continuation", CLOSE: "close", PING: "ping", PONG: "pong"}


# -- the handshake (RFC 6455 4.2) -------------------------------------------------------------------


def accept_value(key: str) -> str:
    """``Sec-WebSocket-Accept`` for a client's ``Sec-WebSocket-Key``."""
    return base64.b64encode(hashlib.sha1(key.encode("ascii") + GUID).digest()).decode("ascii")


def _handshake_refusal(why: str) -> R.Refusal:
    return R.MalformedRequestError(f"not a WebSocket handshake: {why}", reason="websocket-handshake")


def check_handshake(method: str, headers: dict[str, str]) -> str:
    """The accept value of a valid opening handshake, or ``MalformedRequestError`` (reason
    ``websocket-handshake``) saying what is missing. Checked with the credential, before any upgrade."""
    if method != "GET":
        raise _handshake_refusal("the method must be GET")
    if "websocket" not in [t.strip().lower() for t in headers.get("upgrade", "").split(",")]:
        raise _handshake_refusal("Upgrade must name websocket")
    if "upgrade" not in [t.strip().lower() for t in headers.get("connection", "").split(",")]:
        raise _handshake_refusal("Connection must name upgrade")
    if headers.get("sec-websocket-version", "").strip() != "13":
        raise _handshake_refusal("Sec-WebSocket-Version must be 13")
    key = headers.get("sec-websocket-key", "").strip()
    try:
        nonce = base64.b64decode(key, validate=True)
    except (binascii.Error, ValueError):
        nonce = b""
    if len(nonce) != 16:
        raise _handshake_refusal("Sec-WebSocket-Key must be 16 bytes in base64")
    return accept_value(key)


def switching_headers(accept: str) -> list[tuple[bytes, bytes]]:
    """The header fields of the ``101 Switching Protocols`` answer."""
    return [(b"upgrade", b"websocket"), (b"connection", b"Upgrade"), (b"sec-websocket-accept", accept.encode())]


# -- events ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TextReceived:
    """A whole text frame: one call's JSON (decoded by :func:`parse_call`)."""

    payload: bytes


@dataclass(frozen=True)
class FrameRefused:
    """A frame refused by name with the session left open: answer ``refusal`` as an error frame."""

    refusal: R.Refusal


@dataclass(frozen=True)
class SessionEnded:
    """The session is over: a close frame is framed (``code``); write ``data_to_send()``, then close.
    ``refusal`` is the violation that ended it, None for a close the peer asked for."""

    code: int
    refusal: R.Refusal | None = None


WsEvent = TextReceived | FrameRefused | SessionEnded

# -- the lifecycle ---------------------------------------------------------------------------------

OPEN, SKIPPING, CLOSED = "open", "skipping", "closed"  # skipping: the rest of a refused fragmented message

#: (state, input) -> (action, next state). An input is an opcode's name, or "fragment" (a data frame
#: without FIN, or a continuation with no message begun), "last-fragment" (a continuation with FIN),
#: or "violation" (a frame that ends the session). A pair missing here is itself a violation.
LIFECYCLE: dict[tuple[str, str], tuple[str, str]] = {
    (OPEN, "text"): ("deliver", OPEN),
    (OPEN, "binary"): ("refuse-binary", OPEN),
    (OPEN, "fragment"): ("refuse-fragmented", SKIPPING),
    (OPEN, "continuation"): ("refuse-fragmented", OPEN),
    (OPEN, "last-fragment"): ("refuse-fragmented", OPEN),
    (OPEN, "ping"): ("pong", OPEN),
    (OPEN, "pong"): ("ignore", OPEN),
    (OPEN, "close"): ("echo-close", CLOSED),
    (OPEN, "violation"): ("close", CLOSED),
    (SKIPPING, "continuation"): ("ignore", SKIPPING),
    (SKIPPING, "last-fragment"): ("ignore", OPEN),
    # a new message abandons the refused one: it is answered on its own
    (SKIPPING, "text"): ("deliver", OPEN),
    (SKIPPING, "binary"): ("refuse-binary", OPEN),
    (SKIPPING, "fragment"): ("refuse-fragmented", SKIPPING),
    (SKIPPING, "ping"): ("pong", SKIPPING),
    (SKIPPING, "pong"): ("ignore", SKIPPING),
    (SKIPPING, "close"): ("echo-close", CLOSED),
    (SKIPPING, "violation"): ("close", CLOSED),
}
STATES = (OPEN, SKIPPING, CLOSED)
INPUTS = ("text", "binary", "fragment", "continuation", "last-fragment", "ping", "pong", "close", "violation")


def close_code_sendable(code: int) -> bool:
    """True for a code a close frame may carry (RFC 6455 7.4.1, 7.4.2 and IANA's registry): 1000-1003,
    1007-1014 and 3000-4999. 1005, 1006 and 1015 only ever name what an endpoint saw itself; the rest under
    3000 are unassigned."""
    return NORMAL_CLOSE <= code <= 1003 or INVALID_PAYLOAD <= code <= 1014 or 3000 <= code <= 4999


def close_answer(payload: bytes) -> int:
    """The code that answers a peer's close frame (RFC 6455 5.5.1): its own code, echoed, when a close frame
    may carry it; 1000 for a close with no code; 1002 for a one-byte payload or a code no endpoint may send;
    1007 for a reason that is not UTF-8 (7.1.6 and 8.1). Never a code the RFC keeps off the wire, as echoing
    the peer's blindly once did."""
    if not payload:
        return NORMAL_CLOSE
    code = int.from_bytes(payload[:2], "big") if len(payload) >= 2 else 0
    if not close_code_sendable(code):
        return PROTOCOL_ERROR
    try:
        bytes(payload[2:]).decode("utf-8")
    except UnicodeDecodeError:
        return INVALID_PAYLOAD
    return code


class WsConnection:
    """One WebSocket session, server side, from the first byte after the ``101`` answer."""

    def __init__(self, max_frame: int = MAX_FRAME) -> None:
        self.state = OPEN
        self._max_frame = max_frame
        self._buf = bytearray()
        self._out: list[bytes] = []
        self.pending_bytes = 0  # framed and not yet handed over (back-pressure reads it)

    @property
    def ended(self) -> bool:
        return self.state == CLOSED

    def receive_data(self, data: bytes, now: float = 0.0) -> list[WsEvent]:
        """Feed the bytes that arrived at ``now``; answer the events of every whole frame in them."""
        if self.state == CLOSED:
            return []
        if self._buf:
            self._buf += data
            view: bytes | bytearray = self._buf
        else:
            view = data
        events: list[WsEvent] = []
        pos, size = 0, len(view)
        parse, unmask = wsframe.parse_header, wsframe.unmask
        while pos < size and self.state != CLOSED:
            header = parse(view, pos)
            if header is None:
                break
            fin, rsv, opcode, masked, length, head = header
            violation = self._violation(fin, rsv, opcode, masked, length)
            if violation is not None:
                self._step("violation", violation, events)
                break
            if size - pos < head + length:
                break  # the payload has not all arrived (it is within the limit)
            payload = unmask(view, pos + head, length, view[pos + head - 4 : pos + head])
            pos += head + length
            if opcode == CONTINUATION:
                kind = "last-fragment" if fin else "continuation"
            elif not fin and opcode in (TEXT, BINARY):
                kind = "fragment"
            else:
                kind = _INPUTS[opcode]
            self._step(kind, None, events, payload)
        if self.state == CLOSED or pos == size:
            self._buf = bytearray()
        elif view is data:
            self._buf = bytearray(data[pos:])
        elif pos:
            del self._buf[:pos]  # only what was consumed: a large frame arriving in pieces is not re-copied
        return events

    def _violation(self, fin: int, rsv: int, opcode: int, masked: int, length: int) -> R.Refusal | None:
        """The refusal that ends the session for this frame header, or None."""
        if rsv:
            return R.ReservedBitError("a frame with a reserved bit set (no extension is negotiated)")
        if opcode not in _INPUTS:
            return R.ReservedBitError(f"a frame with the reserved opcode {opcode:#x}")
        if not masked:
            return R.UnmaskedFrameError("a client frame without a mask (RFC 6455 5.1)")
        if opcode >= CLOSE:
            if length > MAX_CONTROL:
                return R.ControlFrameTooLargeError(f"a control frame of {length} bytes, over {MAX_CONTROL}")
            if not fin:
                return R.ControlFrameTooLargeError("a fragmented control frame (RFC 6455 5.5)")
        if length > self._max_frame:
            return R.FrameTooLargeError(f"a frame of {length} bytes, over {self._max_frame}", limit=self._max_frame)
        return None

    def _step(self, kind: str, violation: R.Refusal | None, events: list[WsEvent], payload: bytes = b"") -> None:
        action, self.state = LIFECYCLE[(self.state, kind)]
        if action == "deliver":
            events.append(TextReceived(payload))
        elif action == "refuse-binary":
            events.append(FrameRefused(R.BinaryFrameError("binary frames are not spoken; send JSON text frames")))
        elif action == "refuse-fragmented":
            events.append(
                FrameRefused(
                    R.FragmentedFrameError("fragmented messages are not reassembled; send each call in one frame")
                )
            )
        elif action == "pong":
            self._frame(PONG, payload)
        elif action == "echo-close":
            code = close_answer(payload)
            self._frame(CLOSE, code.to_bytes(2, "big"))
            events.append(SessionEnded(code))
        elif action == "close":
            assert violation is not None and violation.ws is not None
            code = int(violation.ws["close"])
            self._frame(CLOSE, code.to_bytes(2, "big") + violation.name.encode()[: MAX_CONTROL - 2])
            events.append(SessionEnded(code, violation))

    def _frame(self, opcode: int, payload: bytes) -> None:
        frame = wsframe.build(opcode, payload)
        self._out.append(frame)
        self.pending_bytes += len(frame)

    def send_text(self, payload: bytes) -> None:
        """Frame one answer (UTF-8 JSON) as a text frame; nothing once the session has ended."""
        if self.state != CLOSED:
            self._frame(TEXT, payload)

    def close(self, code: int = GOING_AWAY) -> None:
        """End the session from this side (the server is stopping): a close frame, then ``ended``."""
        if self.state != CLOSED:
            self._frame(CLOSE, code.to_bytes(2, "big"))
            self.state = CLOSED

    def data_to_send(self) -> bytes:
        """The bytes framed so far, handed over once (no IO here: the caller writes them)."""
        out = self._out[0] if len(self._out) == 1 else b"".join(self._out)
        self._out = []
        self.pending_bytes = 0
        return out

    # a session has no deadline of its own: it lives as long as its peer (the glue's timer asks)
    def next_deadline(self) -> float | None:
        return None

    def timer_fired(self, now: float) -> None:
        return None


# -- the call frames -------------------------------------------------------------------------------

_CALL_FIELDS = frozenset(("ref", "door", "brain", "id", "body"))
#: The frame wraps the argument document (``body``) in one level: a body may nest as deep as an HTTP body.
ENVELOPE = 1


@dataclass(frozen=True)
class WsCall:
    ref: Any
    door: str
    brain: str | None
    id: Any
    body: Any


def parse_call(payload: bytes) -> WsCall:
    """One call frame's document, or a refusal: ``BodyDecodeError`` for JSON that does not decode or nests
    past the limit, ``InvalidArgumentError`` for a frame that is not ``{ref, door, brain?, id?, body?}``."""
    document = codecs.decode(payload, codecs.JSON, ENVELOPE)
    if not isinstance(document, dict):
        raise R.InvalidArgumentError(
            "a call frame is a JSON object {ref, door, brain, id, body}", field="frame", reason="wrong-type"
        )
    stray = sorted(set(document) - _CALL_FIELDS)
    if stray:
        raise R.InvalidArgumentError(f"{stray[0]}: not a call frame field", field=stray[0], reason="unknown-field")
    door = document.get("door")
    if not isinstance(door, str):
        raise R.InvalidArgumentError("door: required, a contract door name", field="door", reason="missing")
    brain = document.get("brain")
    if brain is not None and not isinstance(brain, str):
        raise R.InvalidArgumentError("brain: a brain name", field="brain", reason="wrong-type")
    return WsCall(document.get("ref"), door, brain, document.get("id"), document.get("body"))


def ref_of(payload: bytes) -> Any:
    """The ref of a frame that failed :func:`parse_call`, when it has one that can be echoed: a ref nested past
    the limit is answered as null (it may be the very value the frame was refused for, and orjson writes only
    255 levels: echoing a deeper one would leave the call unanswered)."""
    try:
        document = orjson.loads(payload)
    except orjson.JSONDecodeError:
        return None
    ref = document.get("ref") if isinstance(document, dict) else None
    return ref if nesting.too_deep(ref, MAX_NESTING) is None else None


class CallOutcome(Protocol):
    """What :func:`answer` reads of a call's outcome (the dispatcher's ``brainy.host.dispatch.Outcome``, which
    this module does not import: the session knows nothing above it)."""

    @property
    def ms(self) -> float: ...

    @property
    def answer(self) -> Any: ...

    @property
    def refusal(self) -> R.Refusal | None: ...


def answer(ref: Any, door: str | None, outcome: CallOutcome) -> bytes:
    """The answer frame of one call: ``{ref, ok: true, door, result, meta}`` or ``{ref, ok: false, door, error,
    meta}``, ``meta.ms`` the dispatcher's one clock."""
    if outcome.refusal is None:
        document: dict[str, Any] = {
            "ref": ref,
            "ok": True,
            "door": door,
            "result": outcome.answer,
            "meta": {"ms": outcome.ms},
        }
    else:
        document = {
            "ref": ref,
            "ok": False,
            "door": door,
            "error": outcome.refusal.to_wire(),
            "meta": {"ms": outcome.ms},
        }
    return codecs.to_json(document)
