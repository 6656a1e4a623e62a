"""The HTTP/2 floor: bare uvloop + the `h2` library alone, answering a fixed 30-byte body to every request.

perf/h2load_get.py runs it beside brainy: the cost of the `h2` library's own
state machine, framing and HPACK, with no app behind it.

    python perf/h2lib_floor.py PORT
"""

import asyncio
import socket
import sys

import h2.config
import h2.connection
import h2.events
import uvloop

BODY = b'{"ok":true,"floor":"30 bytes"}'
HEADERS = [(b":status", b"200"), (b"content-type", b"application/json"), (b"content-length", b"30")]


class Floor(asyncio.Protocol):
    def connection_made(self, transport):
        self.transport = transport
        transport.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False, header_encoding=None))
        self.conn.initiate_connection()
        transport.write(self.conn.data_to_send())

    def data_received(self, data):
        try:
            events = self.conn.receive_data(data)
        except Exception:
            self.transport.close()
            return
        for event in events:
            if isinstance(event, h2.events.RequestReceived):
                self.conn.send_headers(event.stream_id, HEADERS)
                self.conn.send_data(event.stream_id, BODY, end_stream=True)
            elif isinstance(event, h2.events.DataReceived):
                self.conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
        self.transport.write(self.conn.data_to_send())


async def main(port):
    server = await asyncio.get_running_loop().create_server(Floor, "127.0.0.1", port, backlog=1024)
    await server.serve_forever()


if __name__ == "__main__":
    uvloop.run(main(int(sys.argv[1])))
