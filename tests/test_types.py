"""The type check runs as a test (STYLE 14): mypy, configured by ``[tool.mypy]`` in pyproject.toml, over the
contract, the store and the sans-IO protocol objects, finds nothing."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

from tests.test_net_layering import SANS_IO

ROOT = Path(__file__).resolve().parent.parent


def _checked() -> list[str]:
    """The paths ``[tool.mypy]`` names, as mypy reads them (relative to the repository's root)."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return list(config["tool"]["mypy"]["files"])


def test_mypy_finds_nothing(tmp_path: Path) -> None:
    """``python -m mypy`` with the repository's configuration exits 0. Its cache is a fresh folder, so a clean
    clone checks the same as a developer's tree and the tree is left unwritten."""
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--cache-dir", str(tmp_path / "mypy")],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_every_sans_io_module_is_checked() -> None:
    """Each protocol module tests/test_net_layering.py holds to sans-IO is among the paths mypy checks, so
    a protocol added there is type-checked too."""
    checked = _checked()
    for module in SANS_IO:
        path = module.replace(".", "/")
        candidates = (f"{path}.py", f"{path}/__init__.py")
        assert any(c in checked or any(c.startswith(d.rstrip("/") + "/") for d in checked) for c in candidates), (
            f"{module} is sans-IO (tests/test_net_layering.py) but not in [tool.mypy] files"
        )
        assert any((ROOT / c).exists() for c in candidates), module
