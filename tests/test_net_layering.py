"""The net layer's seams (STYLE 1, 2): the sans-IO protocol objects import nothing of the app, the server,
the glue or the event loop, and the asyncio glue is the only place they meet.

Read two ways: a fresh interpreter imports the protocol modules and shows what came with them (what
runs at import), and each module's source is read for every import it names, at its top or inside a
function (what could run later), since a lazy import would pass the first check and still tie the layers.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import brainy

NET = Path(brainy.__file__).parent / "net"
SANS_IO = (
    "brainy.net.http",
    "brainy.net.deadlines",
    "brainy.net.preface",
    "brainy.net.h1",
    "brainy.net.h2",
    "brainy.net.grpc",
    "brainy.net.h3",
    "brainy.net.quic_shim",
    "brainy.net.ws",
    "brainy.net.sse",
    # MCP: everything but the stdio glue is sans-IO (the package's docstring); importing any of its
    # modules runs the package, which imports the methods and the streamable HTTP transport too
    "brainy.net.mcp",
    "brainy.net.mcp.jsonrpc",
    "brainy.net.mcp.lifecycle",
    "brainy.net.mcp.stdio",
    "brainy.net.mcp.tools",
    "brainy.net.mcp.resources",
    "brainy.net.mcp.server",
    "brainy.net.mcp.streamable_http",
)
# what a protocol object must never pull in: the app and everything behind it, the listeners, the
# glue, and any IO (STYLE 1: it never imports asyncio/uvloop or touches a socket or a clock)
FORBIDDEN = (
    "brainy.net.app",
    "brainy.net.server",
    "brainy.net.glue",
    "brainy.host.dispatch",
    "brainy.net.mcp",
    "brainy.engine",
    "asyncio",
    "uvloop",
    "socket",
)
CLOCK = ("time",)
# aioquic's TLS 1.3 (under brainy.net.h3) imports the standard ssl module, which imports socket at its top:
# loaded, never used; no import in our sources names it (the second test)
THROUGH_SSL = ("socket",)  # loaded by every interpreter, so only the source can show a protocol reading it


def _forbidden(module: str, names: tuple[str, ...] = FORBIDDEN) -> bool:
    """A module under a forbidden name, unless it is itself a protocol module (the MCP ones, under
    ``brainy.net.mcp``, may import each other; its stdio glue stays forbidden)."""
    return module not in SANS_IO and any(module == f or module.startswith(f + ".") for f in names)


def _source(module: str) -> Path:
    path = NET.joinpath(*module.split(".")[2:])
    return path / "__init__.py" if path.is_dir() else path.with_suffix(".py")


def _imports(module: str, types: bool = False) -> set[str]:
    """Every module ``module``'s source imports at run time, wherever the import stands (``if
    TYPE_CHECKING:`` blocks left out: they never run), and with ``types`` those blocks' imports too."""
    tree = ast.parse(_source(module).read_text())
    skipped: set[int] = set()
    for node in () if types else ast.walk(tree):
        if isinstance(node, ast.If) and ast.unparse(node.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING"):
            skipped.update(id(n) for child in node.body for n in ast.walk(child))
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(
                f"{node.module}.{alias.name}" for alias in node.names if _source_exists(f"{node.module}.{alias.name}")
            )
    return found


def _source_exists(module: str) -> bool:
    return module.startswith("brainy.net.") and _source(module).exists()


def test_the_protocol_modules_import_without_the_app_the_server_or_an_event_loop():
    """Importing the protocol modules (h1, h2, h3, ws, sse, MCP, ...) and their leaves in a fresh interpreter
    brings in no app, server, glue, dispatcher, engine, asyncio, uvloop or socket."""
    code = "import sys, json\n" + "".join(f"import {m}\n" for m in SANS_IO) + "print(json.dumps(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    loaded = json.loads(done.stdout)
    assert set(SANS_IO) <= set(loaded)
    assert [m for m in loaded if _forbidden(m) and not (m in THROUGH_SSL and "ssl" in loaded)] == []


def test_no_protocol_module_names_the_app_the_server_or_the_loop_even_lazily():
    """No import in the sans-IO modules' source, at the top or inside a function, names a forbidden
    module or the clock (the old h2 reached ``brainy.net.server`` from inside a method)."""
    named = {module: sorted(m for m in _imports(module) if _forbidden(m, FORBIDDEN + CLOCK)) for module in SANS_IO}
    assert named == {module: [] for module in SANS_IO}


def test_the_request_model_is_a_leaf():
    """``brainy.net.http`` imports only the contract's refusals, the codecs and the standard library; the
    codecs only the refusals, the wire's vector type (a leaf of numpy, DOORS.md 0.3), its pre-encoded
    document type (a leaf of msgpack and orjson), the nesting limit and its words (a leaf of the standard
    library) and the speedups (the MessagePack writer, the nesting walk), which reach nothing of ours beyond
    those two types and each other."""
    ours = {m for m in _imports("brainy.net.http") if m.startswith("brainy")}
    assert ours <= {"brainy.contract", "brainy.contract.refusals", "brainy.net", "brainy.net.codecs"}, ours
    leaves = {
        "brainy.contract",
        "brainy.contract.refusals",
        "brainy.contract.vectors",
        "brainy.contract.encoded",
        "brainy.contract.limits",
    }
    assert {m for m in _imports("brainy.net.codecs") if m.startswith("brainy")} <= leaves | {"brainy._speedups"}
    code = "import sys, json, brainy.net.codecs\nprint(json.dumps(sorted(m for m in sys.modules if m.startswith('brainy'))))"
    loaded = set(
        json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)
    )
    # and through the speedups and the refusals, nothing of ours but the contract: no engine, no other net module
    assert {m for m in loaded if not m.startswith(("brainy._speedups", "brainy.contract"))} <= {
        "brainy",
        "brainy.net",
        "brainy.net.codecs",
    }, loaded


def _modules() -> list[str]:
    """Every module of ``brainy.net``, packages included."""
    names = []
    for path in sorted(NET.rglob("*.py")):
        parts = ["brainy", "net", *path.relative_to(NET).with_suffix("").parts]
        names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


def test_the_net_layer_has_no_import_cycle():
    """STYLE 15: among every module of ``brainy.net``, imports only point one way (protocols ← glue ← server):
    no module reaches back to one that imports it, counting imports inside functions and under
    ``TYPE_CHECKING`` (a lower module is handed a narrow Protocol, never the object above it)."""
    layer = _modules()
    graph = {m: {i for i in _imports(m, types=True) if i in layer and i != m} for m in layer}

    def reachable(start: str) -> set[str]:
        seen: set[str] = set()
        todo = list(graph[start])
        while todo:
            module = todo.pop()
            if module not in seen:
                seen.add(module)
                todo.extend(graph[module])
        return seen

    assert [m for m in layer if m in reachable(m)] == []


# Words that are door names and also the transports' own words: a WebSocket close and an MCP session's
# close, a key table's counts() method, a change frame's generation field. Any other door name written in
# brainy/net is a transport naming a door.
NOT_DOORS = {
    "ws.py": {"close"},
    "lifecycle.py": {"close"},
    "app.py": {"counts"},
    "sse.py": {"generation"},
    "serve.py": {"generation"},
}
DOOR_NAMES = frozenset(
    door["name"] for door in json.loads((NET.parent / "contract" / "api-contract.json").read_text())["doors"]
)


def _doors_named(path: Path, allowed: frozenset[str] | set[str] = frozenset()) -> list[tuple[int, str]]:
    """Every string literal in ``path`` that is a door's name, but for ``allowed``."""
    return [
        (node.lineno, node.value)
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and node.value in DOOR_NAMES
        and node.value not in allowed
    ]


def test_no_transport_names_a_door(tmp_path):
    """One road (the dispatcher): no transport's code names a door to treat it apart; a door's route, tool,
    rpc and resource are the contract's tables, read, never written out here. The dispatcher names only the
    host doors it registers."""
    named = {str(p.relative_to(NET)): _doors_named(p, NOT_DOORS.get(p.name, set())) for p in NET.rglob("*.py")}
    assert {where: found for where, found in named.items() if found} == {}
    dispatch = NET.parent / "host" / "dispatch.py"
    registered = {"init", "close", "health"}
    assert _doors_named(dispatch, registered) == []
    planted = tmp_path / "planted.py"
    planted.write_text('if door.name == "memory.write":\n    pass\n')
    assert _doors_named(planted) == [(1, "memory.write")]
