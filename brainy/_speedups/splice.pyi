# Types for the compiled spliced road (splice.pyx); the pure twin splice_py.py has the same surface.
from typing import Any

__all__ = ["Road", "Spliced"]

class Road:
    fleet: Any
    def __init__(
        self,
        fleet: Any,
        routes: dict[Any, Any],
        route: Any,
        placed: frozenset[str],
        refusal: type[BaseException],
        passes: Any,
        write_id: Any,
        forwarded: str,
        write: str,
        owners: dict[str, tuple[tuple[str, int], str]],
        owner_of: Any,
        fields: dict[str, bytes],
        field_of: Any,
        frame: Any,
        drop: frozenset[str],
        extra: tuple[tuple[str, str], ...],
        idle: dict[tuple[str, int], list[Any]],
        keep_seconds: float,
        idle_per_peer: int,
        idle_peer: Any,
        timeout: float,
        passed: type,
        raw: type,
        moved: int,
        off_road: Any,
        parse_head: Any,
        request: type,
        received: type,
    ) -> None: ...
    def splice(self, request: Any, deliver: Any) -> bool: ...
    def take(self, conn: Any, data: bytes, now: float, deliver: Any) -> Any: ...

class Spliced:
    road: Road
    peer: Any
    address: tuple[str, int]
    request: Any
    brain: str
    field: bytes
    deliver: Any
    began: float
    def __init__(
        self, road: Road, peer: Any, address: tuple[str, int], request: Any, brain: str, field: bytes, deliver: Any
    ) -> None: ...
    def landed(self, whole: bytes, framed: tuple[int, int, bool]) -> None: ...
    def __call__(self, got: Any) -> None: ...
