"""The house has floors (STYLE 15, docs/architecture.md): each package of ``brainy/`` is one floor and imports
only the floors below it, and no two modules import each other, however indirectly.

Every import is read from the source, wherever it stands: at a module's top, inside a function, and under
``if TYPE_CHECKING:`` (a type that names the floor above is still an arrow up). The checks run on the tree
as it is, and the last test shows that a planted circle and a planted arrow up are caught.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import brainy

ROOT = Path(brainy.__file__).parent

#: The floors, ground first. A module may import its own floor and the floors below it. ``brainy`` itself
#: (its ``__init__``: the version) is under every floor.
FLOORS = (
    "contract",
    "_speedups",
    "errors",
    "client",
    "store",
    "index",
    "doors",
    "engine",
    "auth",
    "fleet",
    "host",
    "net",
    "cli",
)


def _modules(root: Path) -> dict[str, Path]:
    out = {}
    for path in root.rglob("*.py"):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _resolve(name: str, modules: dict[str, Path]) -> str | None:
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def arrows(root: Path = ROOT) -> dict[str, dict[str, int]]:
    """Each module's imports of other modules of the package, with the line of the first: top-level,
    in-function and ``TYPE_CHECKING`` imports alike."""
    modules = _modules(root)
    found: dict[str, dict[str, int]] = defaultdict(dict)
    for module, path in modules.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")
                    base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
                # ``from pkg import mod`` names the module ``pkg.mod``; ``from mod import name`` names ``mod``
                targets = [
                    f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base for alias in node.names
                ]
            for target in targets:
                if not target.startswith(root.name):
                    continue
                resolved = _resolve(target, modules)
                if resolved is not None and resolved != module:
                    found[module].setdefault(resolved, node.lineno)
    return found


def floor_of(module: str) -> int:
    """The floor a module stands on: its first package under ``brainy``; -1 for ``brainy`` itself."""
    parts = module.split(".")
    if len(parts) == 1:
        return -1
    return FLOORS.index(parts[1])


def circles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    nodes = sorted(set(graph) | {t for targets in graph.values() for t in targets})
    for start in nodes:
        if start in index:
            continue
        work = [(start, iter(sorted(graph.get(start, {}))))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, {})))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    out.append(sorted(component))
    return out


def arrows_up(graph: dict[str, dict[str, int]]) -> list[str]:
    return [
        f"{module} (floor {FLOORS[floor_of(module)]}) imports {target} (floor {FLOORS[floor_of(target)]}) at "
        f"line {line}"
        for module, targets in sorted(graph.items())
        for target, line in sorted(targets.items())
        if floor_of(target) > floor_of(module)
    ]


def test_every_package_is_a_floor():
    """Every package directly under brainy/ (and the command line) has a place in FLOORS."""
    tops = {p.name for p in ROOT.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    tops |= {p.stem for p in ROOT.glob("*.py") if p.name != "__init__.py"}
    assert tops == set(FLOORS)


def test_no_import_circle():
    """No module reaches itself through its imports, counting imports inside functions and under
    TYPE_CHECKING."""
    assert circles(arrows()) == []


def test_no_arrow_runs_up_a_floor():
    """The store knows no index, the indexes no door, the doors neither the handle, the host nor a transport."""
    assert arrows_up(arrows()) == []


def test_the_walk_sees_a_planted_circle_and_arrow_up(tmp_path):
    """The checks can fail: a circle made by a TYPE_CHECKING import and an arrow up made inside a function
    are both found."""
    pkg = tmp_path / "brainy"
    for floor in ("store", "index"):
        (pkg / floor).mkdir(parents=True)
        (pkg / floor / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "store" / "log.py").write_text("from brainy.store import rows\n")
    (pkg / "store" / "rows.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from brainy.store.log import Frame\n"
        "def late():\n    from brainy.index import vectors\n"
    )
    (pkg / "index" / "vectors.py").write_text("import math\n")
    graph = arrows(pkg)
    assert circles(graph) == [["brainy.store.log", "brainy.store.rows"]]
    assert arrows_up(graph) == ["brainy.store.rows (floor store) imports brainy.index.vectors (floor index) at line 5"]
