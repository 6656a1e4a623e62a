"""HTTP/1.1 framing: answers, the plain request's head, a proxied request's two halves; pure-Python twin of
``h1frame.pyx`` (RFC 9112).

::

    response     := status-line  header-line*  framing-line*  CRLF  body?
    status-line  := "HTTP/1.1" SP status: 3DIGIT SP reason CRLF    reason from REASONS, else empty
    header-line  := name: token ":" SP value: field-value CRLF     in the caller's order
    framing-line := "content-length: " decimal CRLF                frame_response, unless no-content
                  | "transfer-encoding: chunked" CRLF              frame_chunked_head
                  | "connection: close" CRLF                       when not keep_alive
    chunk        := size: lowercase hex  CRLF  data[size]  CRLF    frame_chunk; size 0 is the last

A no-content status (1xx, 204, 304) has neither content-length nor body (RFC 9110 section 8.6,
RFC 9112 section 6.3). A HEAD answer states the body's length and leaves the body out.

Nothing the caller passes can split the response: a header name must be an RFC 9110 token
(section 5.1), a value must be a field-value (section 5.5: no CR, LF, NUL or other control byte
but HTAB, no leading or trailing whitespace), and content-length and transfer-encoding belong to
the framing, so a caller may not set them. Anything this module frames therefore parses back to
the same status, headers and body. Both twins have the same names, raise the same errors with the
same messages (checked in the same order) and return byte-identical results.

:func:`parse_head` reads the head of the one kind of request the server gets nearly always, and
answers None for everything else, which the caller hands to the full parser (httptools)::

    head    := method SP target SP "HTTP/1." ("0" | "1") CRLF  (field CRLF)*  CRLF
    method  := "GET" | "HEAD" | "POST" | "PUT" | "PATCH" | "DELETE" | "OPTIONS"
    target  := "/" (unreserved | sub-delims | ":" | "@" | "/" | "?" | "%")*   RFC 3986, origin form
    field   := name: token ":" OWS value             value: field-vchar, SP and HTAB (its trailing OWS kept,
                                                     as llhttp keeps it)

None also when the head is not whole within ``max_head`` bytes, a field names transfer-encoding or
upgrade, content-length is given twice or is not 1 to 18 digits, or connection names upgrade or
both close and keep-alive. So the fast parse never decides a hard case: what it reads, llhttp reads
the same (tests/test_h1frame.py checks that against httptools).

:func:`answer_head` reads the one kind of answer a node of the fleet passes on as it came (brainy/net/edge.py,
a proxied request's answer), and answers None for everything else, which the caller hands to httptools::

    answer  := "HTTP/1.1" SP status: 3DIGIT SP reason CRLF  (field CRLF)*  CRLF  body
    reason  := (field-vchar | SP | HTAB)*
    field   := as parse_head's; content-length given once, 1 to 18 digits

None also when a field names transfer-encoding or upgrade, content-length is missing, connection names
upgrade or both close and keep-alive, the status is one with no body (1xx, 204, 304), or bytes follow the body.
"""

from __future__ import annotations

import operator
import re

__all__ = [
    "answer_head",
    "frame_request",
    "frame_response",
    "frame_chunk",
    "frame_chunked_head",
    "parse_head",
    "relay_answer",
    "REASONS",
    "LAST_CHUNK",
    "Filling",
]

# RFC 9110 section 15 phrases, plus the registered extensions brainy may answer with. The compiled
# twin builds its status lines from this table too, so the two cannot drift.
REASONS: dict[int, bytes] = {
    100: b"Continue",
    101: b"Switching Protocols",
    200: b"OK",
    201: b"Created",
    202: b"Accepted",
    203: b"Non-Authoritative Information",
    204: b"No Content",
    205: b"Reset Content",
    206: b"Partial Content",
    207: b"Multi-Status",  # RFC 4918
    300: b"Multiple Choices",
    301: b"Moved Permanently",
    302: b"Found",
    303: b"See Other",
    304: b"Not Modified",
    307: b"Temporary Redirect",
    308: b"Permanent Redirect",
    400: b"Bad Request",
    401: b"Unauthorized",
    402: b"Payment Required",
    403: b"Forbidden",
    404: b"Not Found",
    405: b"Method Not Allowed",
    406: b"Not Acceptable",
    407: b"Proxy Authentication Required",
    408: b"Request Timeout",
    409: b"Conflict",
    410: b"Gone",
    411: b"Length Required",
    412: b"Precondition Failed",
    413: b"Content Too Large",
    414: b"URI Too Long",
    415: b"Unsupported Media Type",
    416: b"Range Not Satisfiable",
    417: b"Expectation Failed",
    421: b"Misdirected Request",
    422: b"Unprocessable Content",
    423: b"Locked",  # RFC 4918
    424: b"Failed Dependency",  # RFC 4918
    426: b"Upgrade Required",
    428: b"Precondition Required",  # RFC 6585
    429: b"Too Many Requests",  # RFC 6585
    431: b"Request Header Fields Too Large",  # RFC 6585
    451: b"Unavailable For Legal Reasons",  # RFC 7725
    500: b"Internal Server Error",
    501: b"Not Implemented",
    502: b"Bad Gateway",
    503: b"Service Unavailable",
    504: b"Gateway Timeout",
    505: b"HTTP Version Not Supported",
    507: b"Insufficient Storage",  # RFC 4918
    511: b"Network Authentication Required",  # RFC 6585
}

LAST_CHUNK = b"0\r\n\r\n"  # last-chunk with no trailers, then the final CRLF (RFC 9112 section 7.1)

_STATUS_MIN, _STATUS_MAX = 100, 999  # three digits (RFC 9112 section 4)
_FRAMING_NAMES = (b"content-length", b"transfer-encoding")  # set here, never by the caller

# Index status - _STATUS_MIN; an unregistered status keeps its SP and has an empty reason.
_STATUS_LINES = [b"HTTP/1.1 %d %s\r\n" % (s, REASONS.get(s, b"")) for s in range(_STATUS_MIN, _STATUS_MAX + 1)]

_TOKEN = re.compile(rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")  # tchar, RFC 9110 section 5.6.2
_FIELD_BYTES = re.compile(rb"[\t\x20-\x7e\x80-\xff]*")  # field-vchar, SP, HTAB
_WHITESPACE = b" \t"


def _no_content(status: int) -> bool:
    return status < 200 or status == 204 or status == 304


def _check_status(status) -> int:
    status = operator.index(status)
    if not _STATUS_MIN <= status <= _STATUS_MAX:
        raise ValueError(f"status must be 100..999, got {status}")
    return status


def _check_header(i: int, item) -> tuple[bytes, bytes]:
    """``headers[i]`` as its (name, value), or the refusal saying what is wrong with it.

    The compiled twin runs faster checks of the same rules and, when one fails, calls this for the
    message, so both twins refuse alike. Exact types only: a subclass could answer ``len`` or
    ``lower`` differently from the bytes it writes.
    """
    if type(item) is not tuple:
        raise TypeError(f"headers[{i}] must be a (name, value) tuple, got {type(item).__name__}")
    if len(item) != 2:
        raise TypeError(f"headers[{i}] must be a (name, value) pair, got {len(item)} items")
    name, value = item
    if type(name) is not bytes:
        raise TypeError(f"headers[{i}] name must be bytes, got {type(name).__name__}")
    if type(value) is not bytes:
        raise TypeError(f"headers[{i}] value must be bytes, got {type(value).__name__}")
    if _TOKEN.fullmatch(name) is None:
        raise ValueError(f"headers[{i}] name {name!r} is not a token (RFC 9110 section 5.1)")
    if name.lower() in _FRAMING_NAMES:
        raise ValueError(f"headers[{i}] name {name!r} is set by the framing, not the caller")
    if _FIELD_BYTES.fullmatch(value) is None:
        raise ValueError(
            f"headers[{i}] value {value!r} holds CR, LF, NUL or another control byte (RFC 9110 section 5.5)"
        )
    if value and (value[0] in _WHITESPACE or value[-1] in _WHITESPACE):
        raise ValueError(f"headers[{i}] value {value!r} begins or ends with whitespace (RFC 9110 section 5.5)")
    return name, value


def _header_lines(headers) -> list[bytes]:
    parts = []
    for i, item in enumerate(headers):
        name, value = _check_header(i, item)
        parts += (name, b": ", value, b"\r\n")
    return parts


def frame_response(status: int, headers, body: bytes, keep_alive: bool, head: bool = False) -> bytes:
    """One whole response: status line, ``headers`` in order, content-length, connection: close
    unless ``keep_alive``, a blank line, then ``body`` (left out when ``head``, its length still
    stated). A 1xx, 204 or 304 has no content-length and must have an empty body.

    ``headers`` is a sequence of ``(name, value)`` bytes pairs. A name that is not a token, or is
    content-length or transfer-encoding, and a value with CR, LF or another control byte or with
    whitespace at either end, are refused with ValueError; so is a status outside 100..999.
    """
    status = _check_status(status)
    parts = _header_lines(headers)
    if type(body) is not bytes:
        raise TypeError(f"body must be bytes, got {type(body).__name__}")
    parts.insert(0, _STATUS_LINES[status - _STATUS_MIN])
    if _no_content(status):
        if body:
            raise ValueError(f"a {status} response has no body, got {len(body)} bytes")
    else:
        parts.append(b"content-length: %d\r\n" % len(body))
    if not keep_alive:
        parts.append(b"connection: close\r\n")
    parts.append(b"\r\n")
    if not head:
        parts.append(body)
    return b"".join(parts)


def frame_chunked_head(status: int, headers, keep_alive: bool) -> bytes:
    """The head of a response whose body follows as chunks (:func:`frame_chunk`): status line,
    ``headers`` in order, transfer-encoding: chunked, connection: close unless ``keep_alive``,
    a blank line. Refusals as :func:`frame_response`; a no-content status has no body to chunk.
    """
    status = _check_status(status)
    parts = _header_lines(headers)
    if _no_content(status):
        raise ValueError(f"a {status} response has no body to send in chunks")
    parts.insert(0, _STATUS_LINES[status - _STATUS_MIN])
    parts.append(b"transfer-encoding: chunked\r\n")
    if not keep_alive:
        parts.append(b"connection: close\r\n")
    parts.append(b"\r\n")
    return b"".join(parts)


def frame_chunk(data: bytes) -> bytes:
    """One chunk of a chunked body: ``<size in hex>\\r\\n<data>\\r\\n``. An empty ``data`` is the
    last chunk, ``0\\r\\n\\r\\n``, which ends the body."""
    if type(data) is not bytes:
        raise TypeError(f"data must be bytes, got {type(data).__name__}")
    if not data:
        return LAST_CHUNK
    return b"%x\r\n%s\r\n" % (len(data), data)


# -- the plain request's head ---------------------------------------------------------------------

_REQUEST_LINE = re.compile(
    rb"(GET|HEAD|POST|PUT|PATCH|DELETE|OPTIONS) (/[A-Za-z0-9\-._~!$&'()*+,;=:@/?%]*) "
    rb"HTTP/1\.([01])\r\n"
)
# the value as llhttp hands it over: leading OWS dropped, trailing kept
_FIELD_LINE = re.compile(rb"([!#$%&'*+\-.^_`|~0-9A-Za-z]+):[ \t]*([\t\x20-\x7e\x80-\xff]*)\r\n")
MAX_CONTENT_LENGTH_DIGITS = 18  # fits a signed 64-bit length with room to spare


def frame_request(
    method: str,
    target: str,
    authority: str,
    headers: dict[str, str],
    drop: frozenset[str],
    extra: tuple[tuple[str, str], ...],
    body: bytes,
) -> bytes:
    """A request forwarded as it came (a fleet's edge to a brain's owner, brainy/fleet/proxy.py): the request
    line, ``host: authority``, each of ``headers`` (lowercase names) but those in ``drop`` and pseudo-fields
    (``:``-names), then ``extra``, ``content-length``, the body. Text as latin-1 (UnicodeEncodeError past it);
    the fields are the caller's, as its parser read them."""
    lines = [f"{method} {target} HTTP/1.1", f"host: {authority}"]
    lines += [f"{name}: {value}" for name, value in headers.items() if name not in drop and name[:1] != ":"]
    lines += [f"{name}: {value}" for name, value in extra]
    lines.append(f"content-length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


def relay_answer(data: bytes, head: int, added: bytes, more: bytes) -> bytes:
    """An answer passed on as it came (``answer_head``'s plain answer, ``head`` where its body starts): its status
    line and fields but any ``connection`` field (a field of the hop it came over), then ``added`` and ``more``
    (framed lines), the blank line, the body as it is."""
    if head < 4 or head > len(data):
        raise ValueError("head is not where a body starts in data")
    start = data[: head - 2]  # the status line and fields, each ending in CRLF
    if b"\r\nconnection:" in start.lower():
        start = b"".join(
            line + b"\r\n" for line in start[:-2].split(b"\r\n") if not line.lower().startswith(b"connection:")
        )
    return b"".join((start, added, more, b"\r\n", data[head:]))


_STATUS_LINE = re.compile(rb"HTTP/1\.1 ([0-9]{3}) [\t\x20-\x7e\x80-\xff]*\r\n")


def answer_head(data: bytes, max_head: int):
    """The one plain answer ``data`` holds (see the module's grammar): ``(body_start, status, keep_alive)`` once
    it is whole, the body ``data[body_start:]``; while it is not, the number of bytes still to come at least
    (1 while its head is not whole within ``max_head`` bytes); None for anything else."""
    end = data.find(b"\r\n\r\n", 0, max_head)
    if end < 0:
        return 1 if len(data) < max_head else None
    line = _STATUS_LINE.match(data)
    if line is None:
        return None
    status = int(line[1])
    if status < 200 or status in (204, 304):
        return None
    framing = _fields(data, line.end(), end + 2, None)
    if framing is None:
        return None
    length, close, _ = framing
    if length < 0:
        return None
    whole = end + 4 + length
    if len(data) < whole:
        return whole - len(data)
    if len(data) > whole:
        return None
    return end + 4, status, not close


def _fields(data: bytes, pos: int, stop: int, headers: dict[str, str] | None) -> tuple[int, bool, bool] | None:
    """The field lines of a head, from ``pos`` to ``stop`` (the last line's CRLF): ``(content_length, close,
    keep_alive)`` as its fields say them (-1: no length), each put in ``headers`` when given (lowercase names, a
    repeated field's values joined by ", "); None for a line that is not a field, a length given twice or not 1 to
    18 digits, a connection naming upgrade or both close and keep-alive, transfer-encoding or upgrade."""
    length = -1
    close = keep = False
    while pos < stop:
        field = _FIELD_LINE.match(data, pos, stop)
        if field is None:
            return None
        pos = field.end()
        name = field[1].lower().decode("latin-1")
        value = field[2]
        if name == "content-length":
            digits = value.rstrip(b" \t")
            if length >= 0 or not digits.isdigit() or len(digits) > MAX_CONTENT_LENGTH_DIGITS:
                return None
            length = int(digits)
        elif name == "connection":
            for token in value.lower().split(b","):
                token = token.strip(b" \t")
                if token == b"close":
                    close = True
                elif token == b"keep-alive":
                    keep = True
                elif token == b"upgrade":
                    return None
            if close and keep:
                return None
        elif name in ("transfer-encoding", "upgrade"):
            return None
        if headers is not None:
            text = value.decode("latin-1")
            headers[name] = f"{headers[name]}, {text}" if name in headers else text
    return length, close, keep


def parse_head(data: bytes, start: int, max_head: int):
    """The head of the plain request at ``data[start:]``: ``(method, path, query, headers, keep_alive,
    content_length, body_start)``, or None for anything else (see the module's grammar).

    ``path`` and ``query`` are the target split at its first ``?`` (still percent-encoded), ``headers``
    has lowercase names, a repeated field's values joined by ", " in order, all text as latin-1;
    ``keep_alive`` is as llhttp's should_keep_alive reads the version and connection; the body is
    ``data[body_start:body_start + content_length]``, whether or not it has all arrived.
    """
    end = data.find(b"\r\n\r\n", start, start + max_head)
    if end < 0:
        return None
    line = _REQUEST_LINE.match(data, start)
    if line is None:
        return None
    headers: dict[str, str] = {}
    framing = _fields(data, line.end(), end + 2, headers)
    if framing is None:
        return None
    length, close, keep = framing
    path, _, query = line[2].partition(b"?")
    keep_alive = not close if line[3] == b"1" else keep
    return (
        line[1].decode("ascii"),
        path.decode("latin-1"),
        query.decode("latin-1"),
        headers,
        keep_alive,
        max(length, 0),
        end + 4,
    )


class Filling:
    """A request body of ``size`` bytes filled in place as it arrives (the socket's reads go straight into
    :meth:`room`), then taken once whole: one copy from the kernel, none joining reads. Here a bytearray, copied
    once into the bytes :meth:`take` answers; the compiled twin fills the bytes object itself, which nothing else
    has seen until :meth:`take` hands it out."""

    def __init__(self, size: int) -> None:
        if size <= 0:
            raise ValueError("a body filled in place has at least one byte")
        self._buffer: bytearray | None = bytearray(size)

    def room(self, at: int) -> memoryview:
        """The writable bytes from ``at`` to the end."""
        if self._buffer is None:
            raise BufferError("the body was taken")
        return memoryview(self._buffer)[at:]

    def take(self) -> bytes:
        """The body, once: no view of it is made after."""
        if self._buffer is None:
            raise BufferError("the body was taken")
        body, self._buffer = bytes(self._buffer), None
        return body
