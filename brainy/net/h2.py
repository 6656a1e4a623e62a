"""HTTP/2 with prior knowledge, through the h2 library's sans-IO connection.

One task per stream, so many streams are answered concurrently on one
connection; answers are sent as the peer's flow-control windows allow, and
request bodies are acknowledged as they are consumed. A bad preface or a
protocol violation ends the connection with GOAWAY (the h2 library's own
handling); a stream over the body limit is answered 413 and its request
dropped.
"""

from __future__ import annotations

import asyncio
from typing import Any

import h2.config
import h2.connection
import h2.errors
import h2.events
import h2.exceptions
import h2.settings

from brainy.contract import refusals as R
from brainy.net.http import MAX_BODY, MAX_HEADER_BYTES, Request, Response, refusal_response

MAX_CONCURRENT_STREAMS = 128
PREFACE_BYTES = 24  # b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", which precedes the first frame


class _Stream:
    __slots__ = ("headers", "body", "size", "task", "refused")

    def __init__(self, headers: list[tuple[bytes, bytes]]) -> None:
        self.headers = headers
        self.body: list[bytes] = []
        self.size = 0
        self.task: asyncio.Task[None] | None = None
        self.refused: R.Refusal | None = None


class H2Session:
    def __init__(self, app: Any, transport: asyncio.Transport, server: Any) -> None:
        self.app = app
        self.transport = transport
        self.server = server
        config = h2.config.H2Configuration(client_side=False, header_encoding=None, validate_inbound_headers=True)
        self.conn = h2.connection.H2Connection(config=config)
        self.conn.local_settings = h2.settings.Settings(client=False, initial_values={
            h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS: MAX_CONCURRENT_STREAMS,
            h2.settings.SettingCodes.MAX_HEADER_LIST_SIZE: MAX_HEADER_BYTES,
        })
        self.conn.initiate_connection()
        self.streams: dict[int, _Stream] = {}
        self._window_open: dict[int, asyncio.Event] = {}
        self._closed = False
        self._skip = PREFACE_BYTES  # bytes before the next frame header starts (the preface comes first)
        self._frame_head = b""      # the first bytes of a frame header split across reads
        self._flush()

    def _flush(self) -> None:
        data = self.conn.data_to_send()
        if data and not self._closed:
            self.transport.write(data)

    def _oversized_frame(self, data: bytes) -> bool:
        """True when a frame header in ``data`` announces a length over our SETTINGS_MAX_FRAME_SIZE.

        The h2 library checks a frame's length only once the whole announced frame has arrived, so a
        peer announcing 16 MiB would be buffered, unanswered, until 16 MiB came; each header is read
        here as it lands instead (RFC 9113 4.2: FRAME_SIZE_ERROR)."""
        at = 0
        while at < len(data):
            if self._skip:
                step = min(self._skip, len(data) - at)
                self._skip -= step
                at += step
                continue
            take = 9 - len(self._frame_head)
            self._frame_head += data[at:at + take]
            at += take
            if len(self._frame_head) < 9:
                break
            self._skip = int.from_bytes(self._frame_head[:3], "big")
            self._frame_head = b""
            if self._skip > self.conn.max_inbound_frame_size:
                return True
        return False

    def data_received(self, data: bytes) -> None:
        if self._oversized_frame(data):
            self.conn.close_connection(error_code=h2.errors.ErrorCodes.FRAME_SIZE_ERROR)
            self._flush()
            self._close()
            return
        try:
            events = self.conn.receive_data(data)
        except h2.exceptions.ProtocolError:
            self._flush()  # the library queued a GOAWAY naming the violation
            self._close()
            return
        for event in events:
            if isinstance(event, h2.events.RequestReceived):
                self.streams[event.stream_id] = _Stream(event.headers)
                if event.stream_ended:
                    self._start(event.stream_id)
            elif isinstance(event, h2.events.DataReceived):
                self._data(event)
            elif isinstance(event, h2.events.StreamEnded):
                self._start(event.stream_id)
            elif isinstance(event, h2.events.StreamReset):
                self._drop(event.stream_id)
            elif isinstance(event, h2.events.WindowUpdated):
                self._wake(event.stream_id)
            elif isinstance(event, h2.events.RemoteSettingsChanged):
                if h2.settings.SettingCodes.INITIAL_WINDOW_SIZE in event.changed_settings:
                    self._wake(0)  # a new initial window resizes every open stream's window (RFC 9113 6.9.2)
            elif isinstance(event, h2.events.ConnectionTerminated):
                self._flush()
                self._close()
                return
        self._flush()

    def _data(self, event: h2.events.DataReceived) -> None:
        stream = self.streams.get(event.stream_id)
        self.conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
        if stream is None or stream.refused is not None:
            return
        stream.size += len(event.data)
        if stream.size > MAX_BODY:
            stream.refused = R.PayloadTooLargeError(f"the body is over {MAX_BODY} bytes", limit=MAX_BODY)
            stream.body = []
            return
        stream.body.append(event.data)

    def _start(self, stream_id: int) -> None:
        stream = self.streams.get(stream_id)
        if stream is not None and stream.task is None:
            stream.task = asyncio.get_running_loop().create_task(self._answer(stream_id, stream))

    async def _answer(self, stream_id: int, stream: _Stream) -> None:
        self.server.in_flight += 1
        try:
            headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in stream.headers}
            method = headers.get(":method", "GET")
            path, _, query = headers.get(":path", "/").partition("?")
            if stream.refused is not None:
                response = refusal_response(stream.refused)
            else:
                plain = {k: v for k, v in headers.items() if not k.startswith(":")}
                answered = self.app.handle(Request(method, path, query, plain, b"".join(stream.body)))
                response = answered if isinstance(answered, Response) else await answered
            await self._send(stream_id, response, head=method == "HEAD")
        except (h2.exceptions.StreamClosedError, h2.exceptions.ProtocolError):
            pass  # the peer reset or closed the stream meanwhile
        finally:
            self.server.in_flight -= 1
            self.streams.pop(stream_id, None)

    async def _send(self, stream_id: int, response: Response, head: bool) -> None:
        if self._closed:
            return
        headers = [(b":status", str(response.status).encode())] + response.headers
        body = b"" if head else response.body
        headers.append((b"content-length", str(len(response.body)).encode()))
        self.conn.send_headers(stream_id, headers, end_stream=not body)
        self._flush()
        view = memoryview(body)
        while view:
            window = min(self.conn.local_flow_control_window(stream_id), self.conn.max_outbound_frame_size)
            if window <= 0:
                event = self._window_open.setdefault(stream_id, asyncio.Event())
                event.clear()
                await event.wait()
                if self._closed or stream_id not in self.streams:
                    return
                continue
            chunk, view = view[:window], view[window:]
            self.conn.send_data(stream_id, chunk.tobytes(), end_stream=not view)
            self._flush()

    def _wake(self, stream_id: int) -> None:
        if stream_id == 0:
            for event in self._window_open.values():
                event.set()
        elif stream_id in self._window_open:
            self._window_open[stream_id].set()

    def _drop(self, stream_id: int) -> None:
        stream = self.streams.pop(stream_id, None)
        if stream is not None and stream.task is not None:
            stream.task.cancel()
        self._wake(stream_id)

    def _close(self) -> None:
        if not self._closed:
            self._closed = True
            self.transport.close()

    def close(self) -> None:
        """A polite end: GOAWAY, then close once the streams in flight have answered."""
        if self._closed:
            return
        self.conn.close_connection()
        self._flush()
        if not self.streams:
            self._close()

    def connection_lost(self) -> None:
        self._closed = True
        for stream in list(self.streams.values()):
            if stream.task is not None:
                stream.task.cancel()
        for event in self._window_open.values():
            event.set()
