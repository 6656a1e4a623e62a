"""The everyday commands (brainy/cli/chores.py) as a user runs them: real processes of ``python -m brainy.cli``
against a real server and against local stores; answers on stdout, refusals on stderr with status 2, transport
failures with 1; export, import into a fresh store and export again give the same bytes; an import cut part way
resumes without duplicates; backup, restore and doctor on a local store."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from server import ServerProcess, start_server

from brainy.engine import Brain, init_store


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with start_server(tmp_path_factory.mktemp("cli") / "served") as server:
        yield server


def brainy(*args: str, server: ServerProcess | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    if server is not None:
        env.update(BRAINY_URL=f"http://{server.address[0]}:{server.address[1]}", BRAINY_KEY=server.key)
    return subprocess.run(
        [sys.executable, "-m", "brainy.cli", *args], capture_output=True, text=True, env=env, timeout=120, check=False
    )


@pytest.mark.slow
def test_a_door_from_the_command_line_answers_json_and_refuses_by_name(served: ServerProcess) -> None:
    added = brainy("call", "add", '{"type": "document", "data": "green tea", "metadata": {"cup": 1}}', server=served)
    assert added.returncode == 0, added.stderr
    id_ = json.loads(added.stdout)["id"]
    got = brainy("get", id_, server=served)  # the key reaches one brain: --brain left out
    assert got.returncode == 0 and json.loads(got.stdout)["entity"]["data"] == "green tea"
    table = brainy("find", '{"where": {"cup": 1}}', "--table", server=served)
    assert table.returncode == 0 and table.stdout.splitlines()[0].split()[:2] == ["id", "type"]
    assert id_ in table.stdout
    refused = brainy("call", "update", '{"id": "nobody", "metadata": {}}', server=served)
    assert refused.returncode == 2 and refused.stdout == ""
    assert refused.stderr.startswith("brainy: EntityNotFoundError:")
    health = brainy("health", "--brain", served.brain, server=served)
    assert health.returncode == 0 and json.loads(health.stdout)["brain"]["generation"] >= 1
    gone = brainy("get", id_, "--url", "http://127.0.0.1:9", "--key", "k", "--brain", "x")
    assert gone.returncode == 1 and "brainy:" in gone.stderr


def _fill(brain: Brain) -> None:
    a = brain.add({"type": "document", "data": "alpha", "metadata": {"n": 1}, "vector": [0.25] * 384})
    b = brain.add({"type": "person", "data": {"name": "bea"}, "metadata": {"n": 2}})
    brain.relate({"from": a["id"], "to": b["id"], "type": "relatedTo", "metadata": {"why": "test"}})
    brain.addMany({"items": [{"type": "document", "data": f"row {i}", "metadata": {"n": i}} for i in range(30)]})
    brain.writeFile({"path": "/docs/a.txt", "content": "hello", "createParents": True})
    brain.writeFile({"path": "/bin/b.dat", "content": "AAEC/w==", "encoding": "base64", "createParents": True})
    brain.mkdir({"path": "/empty", "parents": True})


@pytest.mark.slow
def test_export_import_export_gives_the_same_bytes(tmp_path: Path, served: ServerProcess) -> None:
    source, copy = tmp_path / "source", tmp_path / "copy"
    init_store(source)
    init_store(copy)
    with Brain.open(source) as brain:
        _fill(brain)
    first = brainy("export", "--store", str(source), "--out", str(tmp_path / "one.jsonl"))
    assert first.returncode == 0 and first.stderr == ""  # piped: no progress line
    lines = [orjson.loads(line) for line in (tmp_path / "one.jsonl").read_bytes().splitlines()]
    assert {next(iter(line)) for line in lines} >= {"format", "entity", "relation", "file", "directory"}
    imported = brainy("import", str(tmp_path / "one.jsonl"), "--store", str(copy))
    assert imported.returncode == 0, imported.stderr
    again = brainy("export", "--store", str(copy), "--out", str(tmp_path / "two.jsonl"))
    assert again.returncode == 0
    assert (tmp_path / "two.jsonl").read_bytes() == (tmp_path / "one.jsonl").read_bytes()
    served_import = brainy("import", str(tmp_path / "one.jsonl"), "--brain", served.brain, server=served)
    assert served_import.returncode == 0, served_import.stderr
    with Brain.open(copy) as brain:
        read = brain.readFile({"path": "/bin/b.dat", "encoding": "base64"})
        assert read["content"] == "AAEC/w==" and brain.counts()["entities"] >= 32


@pytest.mark.slow
def test_an_import_cut_part_way_resumes_without_duplicates(tmp_path: Path) -> None:
    source, copy = tmp_path / "source", tmp_path / "copy"
    init_store(source)
    init_store(copy)
    with Brain.open(source) as brain:
        brain.addMany({"items": [{"type": "document", "data": f"r{i}", "metadata": {"n": i}} for i in range(2500)]})
    assert brainy("export", "--store", str(source), "--out", str(tmp_path / "all.jsonl")).returncode == 0
    data = (tmp_path / "all.jsonl").read_bytes()
    cut = len(b"".join(data.splitlines(keepends=True)[:1700]))  # the first 1,699 rows, and past the first batch
    (tmp_path / "part.jsonl").write_bytes(data[:cut])
    assert brainy("import", str(tmp_path / "part.jsonl"), "--store", str(copy)).returncode == 0
    # as if the import of the whole file had committed those rows and died before keeping its state past them
    kept = len(b"".join(data.splitlines(keepends=True)[:800]))
    (tmp_path / "all.jsonl.import-state").write_text(json.dumps({"offset": kept}))
    refused = brainy("import", str(tmp_path / "all.jsonl"), "--store", str(copy))
    assert refused.returncode == 2 and "--resume" in refused.stderr
    resumed = brainy("import", str(tmp_path / "all.jsonl"), "--store", str(copy), "--resume")
    assert resumed.returncode == 0, resumed.stderr
    assert not (tmp_path / "all.jsonl.import-state").exists()
    with Brain.open(copy) as brain:
        assert brain.counts()["entities"] == 2500


@pytest.mark.slow
def test_backup_restore_and_doctor_on_a_local_store(tmp_path: Path) -> None:
    store = tmp_path / "store"
    init_store(store)
    with Brain.open(store) as brain:
        _fill(brain)
        head = brain.head
    backed = brainy("backup", str(tmp_path / "bk"), "--store", str(store))
    assert backed.returncode == 0 and json.loads(backed.stdout)["generation"] == head
    restored = brainy("restore", str(tmp_path / "bk"), "--store", str(tmp_path / "restored"))
    assert restored.returncode == 0, restored.stderr
    assert json.loads(restored.stdout)["generation"] == head
    again = brainy("restore", str(tmp_path / "bk"), "--store", str(tmp_path / "restored"))
    assert again.returncode == 2 and "not empty" in again.stderr
    doctor = brainy("doctor", str(tmp_path / "restored"))
    assert doctor.returncode == 0 and "nothing needs acting on" in doctor.stdout, doctor.stdout
    log = next((tmp_path / "restored" / "log").iterdir())
    log.write_bytes(log.read_bytes()[:20] + b"\xff" * 40 + log.read_bytes()[60:])  # a damaged frame
    sick = brainy("doctor", str(tmp_path / "restored"))
    assert sick.returncode == 1 and "needs acting on" in sick.stdout


@pytest.mark.slow
def test_on_a_terminal_an_export_draws_its_progress_line(tmp_path: Path) -> None:
    """stderr a terminal (a pty here): the line says rows, bytes and rate, redrawn in place; the export is the same."""
    import pty

    store = tmp_path / "store"
    init_store(store)
    with Brain.open(store) as brain:
        brain.addMany({"items": [{"type": "document", "data": f"r{i}"} for i in range(3000)]})
    main, side = pty.openpty()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "brainy.cli", "export", "--store", str(store), "--out", str(tmp_path / "e.jsonl")],
            stderr=side,
            stdout=subprocess.PIPE,
            timeout=120,
            check=False,
        )
        os.close(side)
        side = -1
        drawn = b""
        while True:
            try:
                chunk = os.read(main, 65536)
            except OSError:  # the pty's other end is closed: all of it was read
                break
            if not chunk:
                break
            drawn += chunk
    finally:
        os.close(main)
        if side != -1:
            os.close(side)
    assert done.returncode == 0
    text = drawn.decode().replace("\r\n", "\n")  # the terminal's own line ending
    assert text.startswith("\rexport: ") and "rows/s" in text and text.endswith("\n"), text
    assert "3,000 rows" in text.rsplit("\r", 1)[1]
