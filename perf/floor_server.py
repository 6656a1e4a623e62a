"""The floor: a bare uvloop + httptools server answering a fixed 30-byte body to every request.

perf/measure.py runs it beside brainy in the same sweep, so every brainy figure
has the cost of the event loop, the parser and the socket beside it.
"""

import asyncio
import socket
import sys

import httptools
import uvloop

BODY = b'{"ok":true,"floor":"30 bytes"}'
assert len(BODY) == 30
RESPONSE = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 30\r\n\r\n" + BODY


class Floor(asyncio.Protocol):
    def connection_made(self, transport):
        self.transport = transport
        transport.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.parser = httptools.HttpRequestParser(self)

    def on_message_complete(self):
        self.transport.write(RESPONSE)

    def data_received(self, data):
        self.parser.feed_data(data)


async def main(port):
    loop = asyncio.get_running_loop()
    server = await loop.create_server(Floor, "127.0.0.1", port, backlog=1024)
    print("ready", flush=True)
    await server.serve_forever()


if __name__ == "__main__":
    uvloop.install()
    asyncio.run(main(int(sys.argv[1])))
