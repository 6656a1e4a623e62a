"""`brainy init` is the only way a store comes to exist; the starter refuses a missing store by name."""

from __future__ import annotations

import subprocess
import sys

import pytest

from brainy.contract import refusals as R
from brainy.engine import Brain, StoreExistsError, init_store
from brainy.store.files import read_document


def brainy(*args, cwd):
    return subprocess.run(
        [sys.executable, "-m", "brainy.cli", *args], cwd=cwd, capture_output=True, text=True, timeout=60
    )


def test_init_writes_identity_manifest_ledger_and_an_empty_log(tmp_path):
    """init writes IDENTITY, MANIFEST, the counts ledger and one empty log segment, and nothing else."""
    identity = init_store(tmp_path / "b")
    root = tmp_path / "b"
    assert read_document(root / "IDENTITY") == identity and identity["format"] == 2
    manifest = read_document(root / "MANIFEST")
    assert manifest["generation"] == 0 and manifest["tables"] == [] and manifest["storeId"] == identity["storeId"]
    assert read_document(root / manifest["ledger"])["entities"] == 0
    assert [p.name for p in (root / "log").iterdir()] == ["00000000000000000001.log"]
    assert sorted(p.name for p in root.iterdir()) == ["IDENTITY", "MANIFEST", "index", "ledger", "locks", "log", "sst"]


def test_init_refuses_an_existing_store_or_a_non_empty_directory(tmp_path):
    """init never overwrites: an existing store and a non-empty directory are refused, their bytes unchanged."""
    init_store(tmp_path / "b")
    before = (tmp_path / "b" / "IDENTITY").read_bytes()
    with pytest.raises(StoreExistsError):
        init_store(tmp_path / "b")
    assert (tmp_path / "b" / "IDENTITY").read_bytes() == before
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "notes.txt").write_text("mine")
    with pytest.raises(StoreExistsError):
        init_store(tmp_path / "c")
    assert sorted(p.name for p in (tmp_path / "c").iterdir()) == ["notes.txt"]


def test_open_and_attach_refuse_a_path_with_no_store(tmp_path):
    """Opening a directory that holds no store is StoreNotFoundError with the cure; nothing is created."""
    (tmp_path / "empty").mkdir()
    for opener in (Brain.open, Brain.attach):
        with pytest.raises(R.StoreNotFoundError) as exc:
            opener(tmp_path / "empty")
        assert exc.value.cure.startswith("brainy init")
    assert list((tmp_path / "empty").iterdir()) == []


def test_a_newer_format_is_refused(tmp_path):
    """A store written by a newer format refuses by name rather than being misread."""
    from brainy.store.files import write_document

    identity = init_store(tmp_path / "b")
    write_document(tmp_path / "b" / "IDENTITY", {**identity, "format": 3})
    with pytest.raises(R.StoreUnservableError) as exc:
        Brain.attach(tmp_path / "b")
    assert exc.value.reason == "newer-record-profile"


def test_cli_init_and_the_starter(tmp_path):
    """`brainy` with no store refuses naming `brainy init ./brain` and creates nothing; `brainy init` makes one,
    and refuses the second time. (The starter serving a store is tested in test_serve_stop.py.)"""
    out = brainy(cwd=tmp_path)
    assert out.returncode == 2 and "StoreNotFoundError" in out.stderr and "brainy init brain" in out.stderr
    assert not (tmp_path / "brain").exists()
    out = brainy("init", "./brain", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    again = brainy("init", "./brain", cwd=tmp_path)
    assert again.returncode == 2 and "already a brainy store" in again.stderr
