"""Lint and format as a test (STYLE 14): ruff over every Python file in the tree, by pyproject.toml's
``[tool.ruff]`` table and nothing else, so CI and an editor see the same rules."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _ruff(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ruff", *args, "--no-cache"], capture_output=True, text=True, cwd=cwd, check=False
    )


def test_ruff_finds_nothing_to_lint():
    result = _ruff("check", ".")
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_finds_nothing_to_reformat():
    result = _ruff("format", "--check", ".")
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_check_sees_a_planted_fault(tmp_path):
    """The same configuration finds an unused import and an unformatted line where they are planted."""
    (tmp_path / "pyproject.toml").write_text((ROOT / "pyproject.toml").read_text())
    (tmp_path / "planted.py").write_text("import os\nx=1\n")
    assert "F401" in _ruff("check", ".", cwd=tmp_path).stdout
    assert _ruff("format", "--check", ".", cwd=tmp_path).returncode == 1
