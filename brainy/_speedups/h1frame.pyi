# Types for the compiled h1frame (h1frame.pyx); the pure twin h1frame_py.py has the same surface.
from collections.abc import Iterable
from typing import Final

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

REASONS: Final[dict[int, bytes]]
LAST_CHUNK: Final[bytes]

def frame_response(
    status: int,
    headers: Iterable[tuple[bytes, bytes]],
    body: bytes,
    keep_alive: bool,
    head: bool = False,
) -> bytes: ...
def frame_chunked_head(status: int, headers: Iterable[tuple[bytes, bytes]], keep_alive: bool) -> bytes: ...
def frame_chunk(data: bytes) -> bytes: ...
def parse_head(
    data: bytes, start: int, max_head: int
) -> tuple[str, str, str, dict[str, str], bool, int, int] | None: ...
def answer_head(data: bytes, max_head: int) -> tuple[int, int, bool] | int | None: ...
def frame_request(
    method: str,
    target: str,
    authority: str,
    headers: dict[str, str],
    drop: frozenset[str],
    extra: tuple[tuple[str, str], ...],
    body: bytes,
) -> bytes: ...
def relay_answer(data: bytes, head: int, added: bytes, more: bytes) -> bytes: ...

class Filling:
    def __init__(self, size: int) -> None: ...
    def room(self, at: int) -> memoryview: ...
    def take(self) -> bytes: ...
