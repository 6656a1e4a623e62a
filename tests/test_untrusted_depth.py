"""The texts brainy reads with the standard library's JSON parser are refused by name when they nest too deep.

A request's body is checked at its decoder (tests/test_serve_nesting.py); a few texts inside a request are JSON
of their own and are read by ``json.loads``, which recurses in C and gives out with a RecursionError near a
thousand levels: a ``bk1.`` token's claims (in a header), a cursor (a string in the body), an import's
content (a string in the body). Each, nested 5,000 levels, is its own door's refusal (``BRAINY_KEY_MALFORMED``
401, ``CursorInvalidError`` 400, ``ImportFormatError`` 422), never a fault, and the connection answers the next
request. Real server, real HTTP/1.1 keep-alive connection, on loopback.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from server import H1Client, ServerProcess

pytestmark = pytest.mark.slow

DEPTH = 5_000  # past json.loads's recursion (about 1,000 levels), under the 64 KiB header limit as a token


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _deep(depth: int = DEPTH) -> bytes:
    return b"[" * depth + b"]" * depth


def _exchange(
    client: H1Client, server: ServerProcess, method: str, door: str, body: Any = None, key: str | None = None
) -> tuple[int, Any]:
    headers = (("authorization", f"Bearer {key or server.key}"), ("content-type", "application/json"))
    data = json.dumps(body).encode() if body is not None else None
    client.send(client.request(method, server.path(door), data, headers))
    answer = client.read_answer()
    return answer.status, answer.doc


def test_texts_nested_past_the_parser_are_refused_by_their_doors_names(server: ServerProcess) -> None:
    """On one connection: a bk1 token whose claims nest 5,000 levels is 401 BRAINY_KEY_MALFORMED; a cursor whose
    JSON does is 400 CursorInvalidError; a JSON-lines import with such a line is 422 ImportFormatError naming
    line 2; and then counts answers 200."""
    token = f"bk1.{_b64url(_deep())}.{_b64url(b'x' * 64)}"
    cursor = base64.urlsafe_b64encode(_deep()).decode()
    lines = '{"type": "thing", "id": "one"}\n' + _deep().decode() + "\n"
    with H1Client(server.address) as client:
        token_status, token_doc = _exchange(client, server, "GET", "counts", key=token)
        cursor_status, cursor_doc = _exchange(client, server, "POST", "find", {"cursor": cursor})
        import_status, import_doc = _exchange(
            client, server, "POST", "import", {"format": "jsonl", "content": lines, "type": "thing"}
        )
        counts_status, counts = _exchange(client, server, "GET", "counts")
    assert (token_status, token_doc["error"]["name"]) == (401, "BRAINY_KEY_MALFORMED"), token_doc
    assert "nest too deep" in token_doc["error"]["message"], token_doc
    assert (cursor_status, cursor_doc["error"]["name"]) == (400, "CursorInvalidError"), cursor_doc
    assert (import_status, import_doc["error"]["name"]) == (422, "ImportFormatError"), import_doc
    assert import_doc["error"]["line"] == 2 and "nest too deep" in import_doc["error"]["message"], import_doc
    assert counts_status == 200 and counts["entities"] == 0, counts  # the import wrote nothing
    assert "Traceback" not in server.log() and "InternalError" not in server.log()
