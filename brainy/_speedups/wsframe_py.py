"""WebSocket framing (RFC 6455 section 5.2), the pure twin of ``wsframe.pyx``.

    frame   := b0  b1  extlen?  mask?  payload[length]
    b0      := fin: 1 bit  rsv: 3 bits  opcode: 4 bits
    b1      := masked: 1 bit  len7: 7 bits
    extlen  := u16 big-endian when len7 = 126 | u64 big-endian when len7 = 127
    mask    := 4 bytes, present when masked (every client frame, section 5.3)

The three hot steps of a server's session: :func:`parse_header` reads one frame's header without
copying, :func:`unmask` XORs a payload with its key, :func:`build` frames a server answer (FIN set,
never masked, the shortest length form). Rules above framing (which opcodes, which limits) are the
protocol object's (``brainy/net/ws.py``); framing only reads and writes the layout.
"""

from __future__ import annotations

import struct

__all__ = ["build", "parse_header", "unmask"]

_U16 = struct.Struct(">H")
_U64 = struct.Struct(">Q")


def parse_header(data, start: int = 0) -> tuple[int, int, int, int, int, int] | None:
    """``(fin, rsv, opcode, masked, length, header_size)`` of the frame at ``data[start:]``, or None while
    its header has not all arrived. ``header_size`` counts the mask key; a 64-bit length is read as is
    (one with its top bit set is a length no limit admits)."""
    available = len(data) - start
    if available < 2:
        return None
    b0, b1 = data[start], data[start + 1]
    masked = b1 >> 7
    length = b1 & 0x7F
    size = 2
    if length == 126:
        if available < 4:
            return None
        length = _U16.unpack_from(data, start + 2)[0]
        size = 4
    elif length == 127:
        if available < 10:
            return None
        length = _U64.unpack_from(data, start + 2)[0]
        size = 10
    if masked:
        size += 4
    if available < size:
        return None
    return b0 >> 7, (b0 >> 4) & 7, b0 & 0x0F, masked, length, size


def unmask(data, start: int, length: int, key) -> bytes:
    """``data[start:start + length]`` XORed with the 4-byte ``key``, repeating (section 5.3)."""
    if length == 0:
        return b""
    word = int.from_bytes(bytes(key) * ((length + 3) // 4), "little")
    chunk = int.from_bytes(bytes(memoryview(data)[start : start + length]), "little")
    return (chunk ^ word).to_bytes(((length + 3) // 4) * 4, "little")[:length]


def build(opcode: int, payload: bytes) -> bytes:
    """One unfragmented, unmasked server frame of ``opcode`` carrying ``payload``."""
    n = len(payload)
    if n < 126:
        head = bytes((0x80 | opcode, n))
    elif n < 65536:
        head = bytes((0x80 | opcode, 126)) + _U16.pack(n)
    else:
        head = bytes((0x80 | opcode, 127)) + _U64.pack(n)
    return head + payload
