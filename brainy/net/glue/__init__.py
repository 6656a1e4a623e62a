"""The asyncio side of the net layer: one thin glue module per transport over its sans-IO protocol object.

The protocols themselves (``brainy.net.preface``, ``brainy.net.h1``,
``brainy.net.h2``) are handed bytes and time and hand back events and bytes;
they never touch a socket, a task or a clock. The modules here are the only
place those meet the event loop (STYLE 2):

* ``tcp``: the asyncio protocol of an accepted TCP connection: TCP_NODELAY, the
  preface that tells h1 from h2, the loop's time, and the connection's one timer;
* ``seams``: what the glue is handed from above (the app, the server), as narrow
  Protocols: no glue module imports the app or the server (STYLE 15);
* ``session``: the seam between ``tcp`` and a transport's glue (what each one does);
* ``h1``: HTTP/1.1 requests handed to the app in order (pipelining), answers written;
* ``h2``: HTTP/2 streams handed to the app at once, a task only for an answer that waits.

A new transport (WebSocket, SSE, gRPC, HTTP/3) is one more sans-IO object beside
them and one more module here.
"""
