"""Listeners and transports (h1, h2, h3, gRPC, WebSocket, SSE, MCP) over one dispatcher."""
