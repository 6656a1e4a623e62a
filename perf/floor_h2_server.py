"""The HTTP/2 floor: a bare uvloop server on the `h2` library answering a fixed 30-byte body to every stream.

perf/measure.py runs it beside brainy: what the `h2` library alone costs per
request (its framing, HPACK and flow control in Python), the figure brainy's
own HTTP/2 framing is judged against.
"""

import asyncio
import socket
import sys

import h2.config
import h2.connection
import h2.events
import uvloop

BODY = b'{"ok":true,"floor":"30 bytes"}'
assert len(BODY) == 30
HEADERS = [(b":status", b"200"), (b"content-type", b"application/json"), (b"content-length", b"30")]


class Floor(asyncio.Protocol):
    def connection_made(self, transport):
        self.transport = transport
        transport.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False, header_encoding=None))
        self.conn.initiate_connection()
        transport.write(self.conn.data_to_send())

    def data_received(self, data):
        for event in self.conn.receive_data(data):
            if isinstance(event, h2.events.RequestReceived):
                self.conn.send_headers(event.stream_id, HEADERS)
                self.conn.send_data(event.stream_id, BODY, end_stream=True)
            elif isinstance(event, h2.events.DataReceived):
                self.conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
        out = self.conn.data_to_send()
        if out:
            self.transport.write(out)


async def main(port):
    loop = asyncio.get_running_loop()
    server = await loop.create_server(Floor, "127.0.0.1", port, backlog=1024)
    print("ready", flush=True)
    await server.serve_forever()


if __name__ == "__main__":
    uvloop.install()
    asyncio.run(main(int(sys.argv[1])))
