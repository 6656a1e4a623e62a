"""The floors: a bare uvloop server answering a fixed 30-byte body to every request.

    python perf/floor_server.py PORT        # HTTP/1.1 on httptools
    python perf/floor_server.py PORT h2     # HTTP/2 (prior knowledge) on the `h2` library

perf/measure.py runs both beside brainy in the same sweep, so every brainy
figure has the cost of the event loop, the parser and the socket beside it;
the h2 floor is what the `h2` library alone costs per request (its framing,
HPACK and flow control in Python), beside which brainy's own HTTP/2 framing is
judged.
"""

import asyncio
import socket
import sys

import h2.config
import h2.connection
import h2.events
import httptools
import uvloop

BODY = b'{"ok":true,"floor":"30 bytes"}'
assert len(BODY) == 30
RESPONSE = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 30\r\n\r\n" + BODY
H2_HEADERS = [(b":status", b"200"), (b"content-type", b"application/json"), (b"content-length", b"30")]


class Floor(asyncio.Protocol):
    def connection_made(self, transport):
        self.transport = transport
        transport.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.parser = httptools.HttpRequestParser(self)

    def on_message_complete(self):
        self.transport.write(RESPONSE)

    def data_received(self, data):
        self.parser.feed_data(data)


class H2Floor(asyncio.Protocol):
    def connection_made(self, transport):
        self.transport = transport
        transport.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False, header_encoding=None))
        self.conn.initiate_connection()
        transport.write(self.conn.data_to_send())

    def data_received(self, data):
        for event in self.conn.receive_data(data):
            if isinstance(event, h2.events.RequestReceived):
                self.conn.send_headers(event.stream_id, H2_HEADERS)
                self.conn.send_data(event.stream_id, BODY, end_stream=True)
            elif isinstance(event, h2.events.DataReceived):
                self.conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
        out = self.conn.data_to_send()
        if out:
            self.transport.write(out)


async def main(port, protocol):
    loop = asyncio.get_running_loop()
    server = await loop.create_server(protocol, "127.0.0.1", port, backlog=1024)
    print("ready", flush=True)
    await server.serve_forever()


if __name__ == "__main__":
    uvloop.install()
    asyncio.run(main(int(sys.argv[1]), H2Floor if sys.argv[2:] == ["h2"] else Floor))
