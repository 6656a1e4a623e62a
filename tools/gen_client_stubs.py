"""Write brainy/client/sync.pyi and aio.pyi: the client's typed surface, one method a door, from the contract.

    python tools/gen_client_stubs.py            # write them
    python tools/gen_client_stubs.py --check    # exit 1 when the committed stubs are not what this writes

The client finds its doors in the contract at import (``brainy/client/surface.py``); a type checker cannot, so
these stubs name each door of a brain as a method of ``RemoteBrain`` and ``AsyncBrain`` with its summary, its
path parameters (``id``) positional, then the argument document, then ``timeout``. tests/test_client.py holds
the committed stubs to this script, and mypy checks tests/typing/client_usage.py against them (tests/test_types.py).
"""

from __future__ import annotations

import argparse
import keyword
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from brainy.client.surface import BRAIN_DOORS  # noqa: E402
from brainy.contract import doors as D  # noqa: E402

HEAD = """# Generated from the contract by tools/gen_client_stubs.py: do not edit.
import ssl
from collections.abc import {iterator}
from typing import Any

from brainy.client import wire as wire

DEFAULT_URL: str

"""

CLIENT = """class {name}:
    url: str
    key: str | None
    timeout: float
    retries: int
    msgpack: bool
    server_contract: dict[str, Any] | None
    def __init__(
        self,
        url: str | None = None,
        key: str | None = None,
        *,
        timeout: float = 30.0,
        retries: int = 3,
        json: bool = False,
        pool: int = 4,
        http2: bool | None = None,
        tls: ssl.SSLContext | None = None,
    ) -> None: ...
    @property
    def http_version(self) -> str | None: ...
    {a}def call(self, door: str, *positional: Any, timeout: float | None = None, **options: Any) -> Any: ...
    def brain(self, name: str) -> {brain}: ...
    {a}def health(self) -> Any: ...
    {a}def brains(self) -> list[dict[str, Any]]: ...
    {a}def contract(self) -> Any: ...
    {a}def close(self) -> None: ...
    {enter}
    {exit}

class {brain}:
    client: {name}
    name: str
    def __init__(self, client: {name}, name: str) -> None: ...
    {a}def call(self, door: str, *positional: Any, timeout: float | None = None, **options: Any) -> Any: ...
{changes}
"""


def method(door: D.Door, asynchronous: bool) -> str:
    ids = [p.name for p in door.path_params if p.name != "brain"]
    params = "".join(f", {name}: str" for name in ids)
    optional = "" if any(p.required for p in door.document_params) else " = None"
    summary = door.summary.replace('"""', "'")
    a = "async " if asynchronous else ""
    return (
        f"    {a}def {door.name}(\n"
        f"        self{params}, args: dict[str, Any] | None{optional}, /, *, timeout: float | None = None, **options: Any\n"
        f"    ) -> dict[str, Any]:\n"
        f'        """{summary}"""\n'
    )


def stub(asynchronous: bool) -> str:
    a = "async " if asynchronous else ""
    if asynchronous:
        enter = "async def __aenter__(self) -> AsyncClient: ..."
        exit_ = "async def __aexit__(self, *exc: object) -> None: ..."
        changes = "    def changes(self, since: int | str | None = None) -> AsyncIterator[dict[str, Any]]: ...\n"
        text = CLIENT.format(name="AsyncClient", brain="AsyncBrain", a=a, enter=enter, exit=exit_, changes=changes)
    else:
        enter = "def __enter__(self) -> Client: ..."
        exit_ = "def __exit__(self, *exc: object) -> None: ..."
        changes = (
            "    def changes(\n        self, since: int | str | None = None, *, page: dict[str, Any] | None = None\n"
            "    ) -> Iterator[dict[str, Any]]: ...\n"
        )
        text = CLIENT.format(name="Client", brain="RemoteBrain", a=a, enter=enter, exit=exit_, changes=changes)
    # a door named by a keyword (import) is reached by call() alone: no method can carry its name
    doors = [D.BY_NAME[name] for name in sorted(BRAIN_DOORS) if name != "changes" and not keyword.iskeyword(name)]
    return (
        HEAD.format(iterator="AsyncIterator" if asynchronous else "Iterator")
        + text
        + "".join(method(door, asynchronous) for door in doors)
    )


def formatted(text: str, name: str) -> str:
    """``text`` as ruff formats it (the suite holds every file to ruff format)."""
    done = subprocess.run(
        [sys.executable, "-m", "ruff", "format", "--stdin-filename", name, "-"],
        input=text,
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
    )
    return done.stdout


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    stale = []
    for name, asynchronous in (("sync.pyi", False), ("aio.pyi", True)):
        path = ROOT / "brainy" / "client" / name
        text = formatted(stub(asynchronous), f"brainy/client/{name}")
        if args.check:
            if not path.exists() or path.read_text() != text:
                stale.append(str(path))
        else:
            path.write_text(text)
    if stale:
        print("stale: " + ", ".join(stale) + " (run python tools/gen_client_stubs.py)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
