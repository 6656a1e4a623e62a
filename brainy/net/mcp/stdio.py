"""MCP's stdio framing (2025-06-18 "stdio"), sans-IO: bytes in, documents out; documents in, lines out.

The process around it (stdin, stdout, the loop, the signals) is
:mod:`brainy.net.mcp.stdio_glue`; this module never touches a file descriptor.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from brainy.contract import refusals as R
from brainy.net import codecs
from brainy.net.mcp.jsonrpc import ENVELOPE, MAX_MESSAGE, JsonDoc, request_id


@dataclass(frozen=True)
class LineReceived:
    """One whole line that decoded as JSON."""

    document: Any


@dataclass(frozen=True)
class LineRefused:
    """One line that could not be read: too long, not JSON, or nested past the limit. Answered with ``id``: the
    message's own when it decoded and has a legal one (a string or an integer, safe to echo), else null."""

    refusal: R.Refusal
    id: Any = None


class StdioFraming:
    """Newline-delimited JSON-RPC: a message never holds a newline, so a line is a message.

    A blank line is skipped; a line over ``max_line`` bytes is consumed to its end and
    reported once, never half-read.
    """

    def __init__(self, max_line: int = MAX_MESSAGE) -> None:
        self.max_line = max_line
        self._buffer = bytearray()
        self._discarding = False
        self._out = bytearray()

    def receive_data(self, data: bytes) -> list[LineReceived | LineRefused]:
        events: list[LineReceived | LineRefused] = []
        self._buffer += data
        while True:
            end = self._buffer.find(b"\n")
            if end < 0:
                if len(self._buffer) > self.max_line:
                    if not self._discarding:
                        events.append(
                            LineRefused(
                                R.PayloadTooLargeError(f"a message is over {self.max_line} bytes", limit=self.max_line)
                            )
                        )
                    self._discarding = True
                    self._buffer.clear()
                return events
            line = bytes(self._buffer[:end])
            del self._buffer[: end + 1]
            if self._discarding:  # the tail of a line already refused
                self._discarding = False
                continue
            if len(line) > self.max_line:
                events.append(
                    LineRefused(R.PayloadTooLargeError(f"a message is over {self.max_line} bytes", limit=self.max_line))
                )
                continue
            if not line.strip():
                continue
            try:
                document = codecs.loads_json(line, "the line")
            except R.BodyDecodeError as refusal:
                events.append(LineRefused(refusal))
                continue
            try:
                codecs.check_nesting(document, "json", ENVELOPE)
            except R.BodyDecodeError as refusal:
                events.append(LineRefused(refusal, request_id(document)))
                continue
            events.append(LineReceived(document))

    def send(self, document: JsonDoc) -> None:
        """Frame one message (orjson writes no newline inside a document)."""
        self._out += codecs.to_json(document)
        self._out += b"\n"

    def data_to_send(self) -> bytes:
        """The lines framed so far, handed over once (no IO here: the glue writes them)."""
        out, self._out = bytes(self._out), bytearray()
        return out
