"""No module of brainy/ is over 1,000 lines.

One module holds one concept (STYLE.md, "Floors, not a flat folder", and the anchors' one module per protocol
concept); a module past this size has taken on a second one and is split along it, as the vector index was
into its slot matrix, its snapshot format and the index itself. The count takes every line of the ``.py`` and
``.pyx`` sources, generated ones included (``brainy/contract/refusals.py``: its generator keeps it under), and
leaves out the C that Cython writes from them. The last test shows the check can fail.
"""

from __future__ import annotations

from pathlib import Path

import brainy

ROOT = Path(brainy.__file__).parent
LIMIT = 1_000
SOURCES = ("*.py", "*.pyx")


def too_long(root: Path = ROOT, limit: int = LIMIT) -> list[str]:
    """Each module under ``root`` over ``limit`` lines, as ``path (N lines)`` from ``root``'s parent, longest
    first."""
    found = []
    for pattern in SOURCES:
        for path in root.rglob(pattern):
            lines = len(path.read_text("utf-8").splitlines())
            if lines > limit:
                found.append((lines, path.relative_to(root.parent).as_posix()))
    return [f"{name} ({lines} lines)" for lines, name in sorted(found, key=lambda f: (-f[0], f[1]))]


def test_no_module_is_over_the_limit():
    """Every .py and .pyx module under brainy/ has at most 1,000 lines; the message names any that has more."""
    offenders = too_long()
    assert offenders == [], f"over {LIMIT} lines, split along their concepts: {', '.join(offenders)}"


def test_the_check_names_a_planted_long_module(tmp_path):
    """The check can fail: a .py and a .pyx over the limit are named, longest first, while a module at the limit
    and the C generated beside a .pyx are not."""
    pkg = tmp_path / "brainy"
    (pkg / "index").mkdir(parents=True)
    (pkg / "_speedups").mkdir()
    (pkg / "index" / "long.py").write_text("x = 1\n" * (LIMIT + 1))
    (pkg / "index" / "at_the_limit.py").write_text("x = 1\n" * LIMIT)
    (pkg / "_speedups" / "fast.pyx").write_text("x = 1\n" * (LIMIT + 200))
    (pkg / "_speedups" / "fast.c").write_text("int x;\n" * (10 * LIMIT))
    assert too_long(pkg) == ["brainy/_speedups/fast.pyx (1200 lines)", "brainy/index/long.py (1001 lines)"]
