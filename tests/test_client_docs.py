"""docs/client.md's examples, run in order against a real server: the Python blocks as one session (``BRAIN``
names the served brain; ``$BRAINY_URL`` and ``$BRAINY_KEY`` reach it), each ``$ brainy ...`` line of the shell
blocks as a real process in a scratch folder (``COPIED_ID`` is the id the Python session added)."""

from __future__ import annotations

import contextlib
import io
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from server import start_server

from brainy.client import Client

DOC = Path(__file__).resolve().parent.parent / "docs" / "client.md"
BLOCK = re.compile(r"```(python|shell)\n(.*?)```", re.S)


@pytest.mark.slow
def test_every_example_in_the_client_doc_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocks = BLOCK.findall(DOC.read_text())
    assert sum(kind == "python" for kind, _ in blocks) >= 5 and any(kind == "shell" for kind, _ in blocks)
    with start_server(tmp_path / "served") as server:
        env = {"BRAINY_URL": f"http://{server.address[0]}:{server.address[1]}", "BRAINY_KEY": server.key}
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        session: dict[str, object] = {"BRAIN": server.brain}
        printed = io.StringIO()
        work = tmp_path / "work"
        work.mkdir()
        for kind, code in blocks:
            if kind == "python":
                with contextlib.redirect_stdout(printed):
                    exec(compile(code, str(DOC), "exec"), session)  # noqa: S102  (the doc's own examples)
                continue
            for line in code.splitlines():
                assert line.startswith("$ brainy "), line
                args = shlex.split(line[len("$ brainy ") :].replace("COPIED_ID", session["added"]["id"]))  # type: ignore[index]
                if args[:1] == ["import"]:
                    subprocess.run([sys.executable, "-m", "brainy.cli", "init", "./copy"], cwd=work, check=True)
                done = subprocess.run(
                    [sys.executable, "-m", "brainy.cli", *args],
                    cwd=work,
                    env={**os.environ, **env},
                    capture_output=True,
                    text=True,
                    timeout=120,
                    check=False,
                )
                assert done.returncode == 0, (line, done.stderr)
                printed.write(done.stdout)
        for value in session.values():
            if isinstance(value, Client):
                value.close()
        out = printed.getvalue()
        assert "True" in out.splitlines()[1]  # find by meaning: the tea note first
        assert "EntityNotFoundError 404 nobody" in out
        assert "green tea is best brewed" in out  # the copy answers the get
