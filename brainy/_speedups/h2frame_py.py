"""HTTP/2 frames (RFC 9113 4.1) and HPACK (RFC 7541), the pure twin of ``h2frame.pyx``.

    frame   := length: u24  type: u8  flags: u8  R: 1 bit  stream_id: u31  payload[length]

What the connection (``brainy/net/h2.py``) needs at every frame, and nothing of its rules:
:func:`parse_header` reads one frame header, :func:`frame` lays one out, :class:`Decoder` turns a
header block into fields (static and dynamic table, Huffman, table-size updates, the header-list
limit), :func:`request_head` reads a request's fields once (and refuses a malformed one), and
:class:`Encoder` turns fields into HEADERS and CONTINUATION frames. A block that does not decode
raises :class:`~brainy._speedups.errors.HpackError` (or its :class:`HeaderListTooLarge`).
The fixed tables are ``h2frame_tables``, shared with the compiled twin.
"""

from __future__ import annotations

from brainy._speedups.errors import HeaderListTooLarge, HpackError, RequestMalformed
from brainy._speedups.h2frame_tables import (
    ACCEPT,
    CONNECTION_SPECIFIC,
    EMIT,
    FAIL,
    HUFFMAN,
    REQUEST_PSEUDO,
    SECRET,
    STATIC,
    UNINDEXED,
    huffman_states,
)

__all__ = ["Decoder", "Encoder", "frame", "huffman_decode", "huffman_encode", "parse_header", "request_head"]

HEADERS, CONTINUATION = 0x1, 0x9
END_STREAM, END_HEADERS = 0x1, 0x4
ENTRY_OVERHEAD = 32  # RFC 7541 4.1: an entry's size is its name, its value and 32
DEFAULT_TABLE_SIZE = 4096

_STATES = huffman_states()
_FULL = {field: i + 1 for i, field in reversed(list(enumerate(STATIC)))}  # (name, value) -> first index
_NAMES = {name: i + 1 for i, (name, _) in reversed(list(enumerate(STATIC)))}  # name -> first index


def parse_header(data, at: int = 0) -> tuple[int, int, int, int] | None:
    """``(length, type, flags, stream_id)`` of the frame whose nine-byte header starts at ``data[at]``,
    or None while fewer than nine bytes are there. The reserved bit is dropped (RFC 9113 4.1)."""
    if len(data) - at < 9:
        return None
    return (
        (data[at] << 16) | (data[at + 1] << 8) | data[at + 2],
        data[at + 3],
        data[at + 4],
        int.from_bytes(data[at + 5 : at + 9], "big") & 0x7FFFFFFF,
    )


def frame(kind: int, flags: int, stream_id: int, payload=b"") -> bytes:
    """One frame: its nine-byte header, then ``payload``."""
    return len(payload).to_bytes(3, "big") + bytes((kind, flags)) + stream_id.to_bytes(4, "big") + bytes(payload)


def request_head(fields) -> tuple[str, str, str, dict[str, str], int]:
    """``(method, path, query, headers, content_length)`` of a request's decoded header fields: the
    pseudo-headers read, ``:path`` split at its ``?``, the regular fields by name (latin-1; the last of a
    repeated name), ``content_length`` -1 when none is stated. Fields that make the request malformed
    (RFC 9113 8.1.1, 8.2, 8.3.1) raise :class:`RequestMalformed`."""
    pseudo: dict[bytes, bytes] = {}
    headers: dict[str, str] = {}
    length = -1
    for name, value in fields:
        if b"\r" in value or b"\n" in value or b"\0" in value:
            raise RequestMalformed(f"{name!r} holds CR, LF or NUL")
        if name[:1] == b":":
            if headers:
                raise RequestMalformed(f"{name!r} after a regular field")
            if name not in REQUEST_PSEUDO:
                raise RequestMalformed(f"{name!r} is not a request pseudo-header")
            if name in pseudo:
                raise RequestMalformed(f"{name!r} twice")
            pseudo[name] = value
            continue
        if name.lower() != name or not name:
            raise RequestMalformed(f"{name!r} is not a lowercase name")
        if name in CONNECTION_SPECIFIC or (name == b"te" and value != b"trailers"):
            raise RequestMalformed(f"{name!r} is connection-specific")
        if name == b"content-length":
            if not value.isdigit() or len(value) > 18 or (length >= 0 and int(value) != length):
                raise RequestMalformed("content-length is not one decimal length")
            length = int(value)
        headers[name.decode("latin-1")] = value.decode("latin-1")
    method = pseudo.get(b":method")
    if method is None:
        raise RequestMalformed("no :method")
    if method != b"CONNECT" and (not pseudo.get(b":scheme") or not pseudo.get(b":path")):
        raise RequestMalformed("no :scheme or no :path")
    path, _, query = pseudo.get(b":path", b"/").decode("latin-1").partition("?")
    return method.decode("latin-1"), path, query, headers, length


# -- Huffman (RFC 7541 5.2, Appendix B) -----------------------------------------------------------------


def huffman_decode(data) -> bytes:
    """The octets ``data`` Huffman-encodes, or HpackError (EOS inside, or padding that is not EOS's prefix)."""
    out = bytearray()
    state, flags = 0, ACCEPT
    states = _STATES
    for byte in bytes(data):
        for nibble in (byte >> 4, byte & 0xF):
            entry = states[state << 4 | nibble]
            flags = entry >> 16
            if flags & FAIL:
                raise HpackError("a Huffman string contains EOS")
            if flags & EMIT:
                out.append((entry >> 8) & 0xFF)
            state = entry & 0xFF
    if not flags & ACCEPT:
        raise HpackError("a Huffman string ends in padding that is not EOS's prefix")
    return bytes(out)


def huffman_encode(data) -> bytes:
    """``data`` Huffman-encoded, padded to a whole octet with EOS's prefix (all ones)."""
    acc = bits = 0
    for byte in bytes(data):
        code, length = HUFFMAN[byte]
        acc = (acc << length) | code
        bits += length
    pad = -bits % 8
    acc = (acc << pad) | ((1 << pad) - 1)
    return acc.to_bytes((bits + pad) // 8, "big")


def _huffman_length(data) -> int:
    return (sum(HUFFMAN[byte][1] for byte in bytes(data)) + 7) // 8


# -- integers and strings (RFC 7541 5.1, 5.2) ----------------------------------------------------------


def _integer(data, at: int, prefix: int) -> tuple[int, int]:
    """The integer whose first octet is ``data[at]`` with a ``prefix``-bit prefix, and where it ends."""
    limit = (1 << prefix) - 1
    value = data[at] & limit
    at += 1
    if value < limit:
        return value, at
    shift = 0
    while True:
        if at >= len(data):
            raise HpackError("an integer runs past the header block")
        if shift > 28:
            raise HpackError("an integer is longer than any header block could need")
        byte = data[at]
        at += 1
        value += (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return value, at


def _put_integer(out: bytearray, value: int, prefix: int, first: int) -> None:
    limit = (1 << prefix) - 1
    if value < limit:
        out.append(first | value)
        return
    out.append(first | limit)
    value -= limit
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)


def _string(data, at: int) -> tuple[bytes, int]:
    if at >= len(data):
        raise HpackError("a string literal runs past the header block")
    huffman = data[at] & 0x80
    length, at = _integer(data, at, 7)
    end = at + length
    if end > len(data):
        raise HpackError("a string literal runs past the header block")
    raw = bytes(data[at:end])
    return (huffman_decode(raw) if huffman else raw), end


def _put_string(out: bytearray, value: bytes, huffman: bool) -> None:
    if huffman and value:
        size = _huffman_length(value)
        if size < len(value):
            _put_integer(out, size, 7, 0x80)
            out += huffman_encode(value)
            return
    _put_integer(out, len(value), 7, 0)
    out += value


# -- the dynamic table (RFC 7541 2.3.2, 4) --------------------------------------------------------------


class _Table:
    """The dynamic table: newest entry at index 62, the oldest evicted first once over ``max_size``."""

    def __init__(self, max_size: int) -> None:
        self.entries: list[tuple[bytes, bytes]] = []  # oldest first
        self.size = 0
        self.max_size = max_size
        self.evicted = 0  # entries evicted so far: an entry's absolute number less this is its list position

    def field(self, index: int) -> tuple[bytes, bytes]:
        if 1 <= index <= 61:
            return STATIC[index - 1]
        at = len(self.entries) - 1 - (index - 62)
        if index < 1 or at < 0:
            raise HpackError(f"index {index} is in neither table")
        return self.entries[at]

    def add(self, name: bytes, value: bytes) -> None:
        self.entries.append((name, value))
        self.size += len(name) + len(value) + ENTRY_OVERHEAD
        self._evict()

    def resize(self, max_size: int) -> None:
        self.max_size = max_size
        self._evict()

    def _evict(self) -> None:
        while self.size > self.max_size:
            name, value = self.entries.pop(0)
            self.size -= len(name) + len(value) + ENTRY_OVERHEAD
            self.evicted += 1


class Decoder:
    """The peer's header blocks, in order, into fields ``[(name, value), ...]`` (bytes, as sent).

    ``max_table_size`` is our SETTINGS_HEADER_TABLE_SIZE, the most a table-size update may ask for;
    ``max_header_list_size`` our SETTINGS_MAX_HEADER_LIST_SIZE."""

    def __init__(self, max_table_size: int = DEFAULT_TABLE_SIZE, max_header_list_size: int = 1 << 16) -> None:
        self._table = _Table(max_table_size)
        self.max_table_size = max_table_size
        self.max_header_list_size = max_header_list_size

    @property
    def table_size(self) -> int:
        """The bytes the dynamic table holds now (RFC 7541 4.1)."""
        return self._table.size

    def decode(self, block) -> list[tuple[bytes, bytes]]:
        data = bytes(block)
        table = self._table
        fields: list[tuple[bytes, bytes]] = []
        listed = 0
        at, end = 0, len(data)
        first = True
        while at < end:
            byte = data[at]
            if byte & 0x80:  # indexed field
                index, at = _integer(data, at, 7)
                if index == 0:
                    raise HpackError("index 0 names no field")
                name, value = table.field(index)
            elif byte & 0x40:  # literal with incremental indexing
                index, at = _integer(data, at, 6)
                name, at = _string(data, at) if index == 0 else (table.field(index)[0], at)
                value, at = _string(data, at)
                table.add(name, value)
            elif byte & 0x20:  # dynamic table size update: only before the first field
                size, at = _integer(data, at, 5)
                if not first:
                    raise HpackError("a table size update after a field")
                if size > self.max_table_size:
                    raise HpackError(f"a table size update to {size}, over the {self.max_table_size} allowed")
                table.resize(size)
                continue
            else:  # literal without indexing, or never indexed
                index, at = _integer(data, at, 4)
                name, at = _string(data, at) if index == 0 else (table.field(index)[0], at)
                value, at = _string(data, at)
            first = False
            listed += len(name) + len(value) + ENTRY_OVERHEAD
            if listed > self.max_header_list_size:
                raise HeaderListTooLarge(f"the header list is over {self.max_header_list_size} bytes")
            fields.append((name, value))
        return fields


class Encoder:
    """Our header lists, in order, into header blocks and their frames, for a peer whose dynamic table
    is at most ``max_table_size`` (its SETTINGS_HEADER_TABLE_SIZE; 4,096 until it says otherwise)."""

    def __init__(self, max_table_size: int = DEFAULT_TABLE_SIZE) -> None:
        self._table = _Table(min(max_table_size, DEFAULT_TABLE_SIZE))
        self._where: dict[tuple[bytes, bytes], int] = {}  # field -> its entry's absolute number
        self._named: dict[bytes, int] = {}  # name -> the newest entry's absolute number
        self._updates: list[int] = []  # table-size updates owed at the start of the next block
        self.huffman = True

    @property
    def table_size(self) -> int:
        return self._table.size

    def set_max_table_size(self, size: int) -> None:
        """The peer's SETTINGS_HEADER_TABLE_SIZE changed: use at most that (and never over 4,096), and say
        so at the start of the next block (RFC 7541 4.2: the smallest size first when it shrank twice)."""
        size = min(size, DEFAULT_TABLE_SIZE)
        smallest = min(self._updates[0], size) if self._updates else size
        self._updates = [smallest, size] if smallest != size else [size]
        self._table.resize(size)

    def encode(self, fields) -> bytes:
        out = bytearray()
        for size in self._updates:
            _put_integer(out, size, 5, 0x20)
        self._updates = []
        table = self._table
        for name, value in fields:
            index = _FULL.get((name, value))
            if index is None:
                number = self._where.get((name, value))
                if number is not None and number >= table.evicted:
                    index = 62 + len(table.entries) - 1 - (number - table.evicted)
            if index is not None:
                _put_integer(out, index, 7, 0x80)
                continue
            name_index = _NAMES.get(name, 0)
            if not name_index:
                number = self._named.get(name)
                if number is not None and number >= table.evicted:
                    name_index = 62 + len(table.entries) - 1 - (number - table.evicted)
            indexing = (
                name not in UNINDEXED
                and name not in SECRET
                and len(name) + len(value) + ENTRY_OVERHEAD <= table.max_size // 2
            )
            if indexing:
                _put_integer(out, name_index, 6, 0x40)
            else:
                _put_integer(out, name_index, 4, 0x10 if name in SECRET else 0)
            if not name_index:
                _put_string(out, name, self.huffman)
            _put_string(out, value, self.huffman)
            if indexing:
                self._where[(name, value)] = self._named[name] = table.evicted + len(table.entries)
                table.add(name, value)
        if len(self._where) > 2 * len(table.entries) + 64:
            self._forget_evicted()
        return bytes(out)

    def _forget_evicted(self) -> None:
        """Drop the lookups of evicted entries, so a peer's stream of distinct values cannot grow them."""
        table = self._table
        self._where = {field: table.evicted + i for i, field in enumerate(table.entries)}
        self._named = {field[0]: table.evicted + i for i, field in enumerate(table.entries)}

    def headers(self, stream_id: int, fields, end_stream: bool, max_frame_size: int) -> bytes:
        """``fields`` as one HEADERS frame (END_STREAM when ``end_stream``), continued in CONTINUATION
        frames when the block is over ``max_frame_size`` (the peer's SETTINGS_MAX_FRAME_SIZE)."""
        block = self.encode(fields)
        if len(block) <= max_frame_size:
            return frame(HEADERS, END_HEADERS | (END_STREAM if end_stream else 0), stream_id, block)
        out = [frame(HEADERS, END_STREAM if end_stream else 0, stream_id, block[:max_frame_size])]
        for at in range(max_frame_size, len(block), max_frame_size):
            last = at + max_frame_size >= len(block)
            out.append(frame(CONTINUATION, END_HEADERS if last else 0, stream_id, block[at : at + max_frame_size]))
        return b"".join(out)
