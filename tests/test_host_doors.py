"""The host provisioning doors (DOORS.md 10.3) against a REAL ``brainy serve`` process, spoken to with curl.

Seed 001, "Provisioning — the service key's own doors", "The backup door" and "Revocation": every door
wants the service key and takes effect without a restart; nothing is ever deleted; a minted key is shown
once and honoured on the very next request; a revocation holds from the very next request; a persisted
snapshot is one generation that opens as a store.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from server import BRAIN, PERSON_KEY, SERVICE_KEY, TIMEOUT, Answer, ServerProcess, curl, start_server

from brainy.engine import Brain, init_store
from brainy.host.backups import RECORDS

pytestmark = pytest.mark.slow

CALLER = (("X-Brainy-Caller", "person:ops@example.com"),)


def call(
    server: ServerProcess,
    method: str,
    path: str,
    doc: Any = None,
    key: str | None = SERVICE_KEY,
    headers: tuple[tuple[str, str], ...] = (),
    timeout: float = TIMEOUT,
) -> Answer:
    sent = headers + ((("Authorization", f"Bearer {key}"),) if key is not None else ())
    if doc is not None:
        sent += (("Content-Type", "application/json"),)
    return curl(
        server, method, path, json.dumps(doc).encode() if doc is not None else None, headers=sent, timeout=timeout
    )


def ok(answer: Answer) -> dict[str, Any]:
    assert answer.status == 200, answer
    return answer.result()


def refused(answer: Answer, status: int, name: str) -> dict[str, Any]:
    assert answer.status == status and answer.refusal == name, answer
    return answer.doc["error"]


def files_of(root: Path) -> dict[str, str]:
    """Every file under ``root``, relative name -> sha256 of its bytes."""
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def add(server: ServerProcess, brain: str, key: str, data: str) -> dict[str, Any]:
    return ok(call(server, "POST", f"/v1/brains/{brain}/add", {"type": "concept", "data": data}, key=key))


def counts(server: ServerProcess, brain: str, key: str = PERSON_KEY) -> dict[str, Any]:
    return ok(call(server, "GET", f"/v1/brains/{brain}/counts", key=key))


@pytest.fixture
def hosted(tmp_path: Path):
    """A server with ``--brains-dir`` (holding ``notes``) and ``--snapshots-dir`` beside it."""
    brains, snaps = tmp_path / "brains", tmp_path / "snaps"
    snaps.mkdir()
    (snaps / "operator-notes.txt").write_text("placed by the operator\n")
    with start_server(brains, extra_args=("--brains-dir", str(brains), "--snapshots-dir", str(snaps))) as server:
        server.extra.update(brains=brains, snaps=snaps)
        yield server


def test_provision_writes_exactly_what_brainy_init_writes(hosted, tmp_path):
    """host.provision makes a new empty store under --brains-dir with the file set ``brainy init`` writes; the
    name is then a brain (a minted key reaches it); a taken name is BrainExistsError, an illegal one
    BrainNameInvalidError, and a principal key is refused at the gate (ForbiddenError)."""
    made = ok(call(hosted, "POST", "/v1/brains/fresh/provision"))
    assert made["brain"] == "fresh" and made["created"] is True and made["generation"] == 0
    store = hosted.extra["brains"] / "fresh"
    identity = json.loads((store / "IDENTITY").read_text().splitlines()[0])
    assert identity["storeId"] == made["storeId"]
    init_store(tmp_path / "by-init")
    assert sorted(files_of(store)) == sorted(files_of(tmp_path / "by-init"))
    assert sorted(p.name for p in store.iterdir()) == sorted(p.name for p in (tmp_path / "by-init").iterdir())

    minted = ok(call(hosted, "POST", "/v1/keys", {"principal": "person:new@example.com", "brains": ["fresh"]}))
    add(hosted, "fresh", minted["key"], "the first row of a new brain")
    assert counts(hosted, "fresh", minted["key"])["entities"] == 1

    refused(call(hosted, "POST", "/v1/brains/fresh/provision"), 409, "BrainExistsError")
    refused(call(hosted, "POST", f"/v1/brains/{BRAIN}/provision"), 409, "BrainExistsError")
    refused(call(hosted, "POST", "/v1/brains/.hidden/provision"), 400, "BrainNameInvalidError")
    refused(call(hosted, "POST", "/v1/brains/other/provision", key=PERSON_KEY), 403, "ForbiddenError")
    assert not (hosted.extra["brains"] / "other").exists()


def test_a_mint_is_honoured_on_the_next_request_and_a_revocation_from_the_next(hosted):
    """host.mintKey appends one parsed line (the file's old bytes stay its prefix) and the key answers at once;
    listKeys shows fingerprints, never a key; host.revokeKey lists the SHA-256 with exp 253402300799 and the
    very next request with that key is UnauthenticatedError, for a minted key and for a placed one alike."""
    keys_path = hosted.keys_path
    before = keys_path.read_bytes()
    minted = ok(call(hosted, "POST", "/v1/keys", {"principal": "person:carol@example.com", "brains": [BRAIN]}))
    key = minted["key"]
    assert key.startswith("bky_") and len(key) == 4 + 43
    assert minted["sha256"] == hashlib.sha256(key.encode()).hexdigest()
    assert minted["principal"] == "person:carol@example.com" and minted["brains"] == [BRAIN]
    after = keys_path.read_bytes()
    assert after.startswith(before) and after.count(b"\n") == before.count(b"\n") + 1
    assert counts(hosted, BRAIN, key)["entities"] == 0  # the very next request

    listing = call(hosted, "GET", "/v1/keys")
    assert key.encode() not in listing.body and PERSON_KEY.encode() not in listing.body
    listed = {k["sha256"]: k for k in ok(listing)["keys"]}
    assert listed[minted["sha256"]] == {
        "sha256": minted["sha256"],
        "principal": "person:carol@example.com",
        "brains": [BRAIN],
        "revoked": False,
    }
    assert hashlib.sha256(SERVICE_KEY.encode()).hexdigest() not in listed  # the operator's key is not listed

    revoked = ok(call(hosted, "DELETE", f"/v1/keys/{minted['sha256']}"))
    assert revoked == {"sha256": minted["sha256"], "revoked": True, "known": True, "exp": 253402300799}
    refused(call(hosted, "GET", f"/v1/brains/{BRAIN}/counts", key=key), 401, "UnauthenticatedError")
    assert keys_path.read_bytes() == after  # revocation never rewrites the keys file
    document = json.loads((keys_path.parent / "revoked.json").read_text())
    assert {"jti": minted["sha256"], "exp": 253402300799} in document["revoked"]
    assert ok(call(hosted, "GET", "/v1/keys"))["keys"][-1]["revoked"] is True

    placed = hashlib.sha256(PERSON_KEY.encode()).hexdigest()  # a key the operator placed by hand
    assert counts(hosted, BRAIN)["entities"] == 0
    assert ok(call(hosted, "DELETE", f"/v1/keys/{placed}"))["known"] is True
    refused(call(hosted, "GET", f"/v1/brains/{BRAIN}/counts", key=PERSON_KEY), 401, "UnauthenticatedError")
    assert ok(call(hosted, "DELETE", f"/v1/keys/{'0' * 64}"))["known"] is False

    refused(call(hosted, "POST", "/v1/keys", {"principal": "service:x", "brains": "!"}), 400, "InvalidArgumentError")
    refused(call(hosted, "POST", "/v1/keys", {"principal": "robot:x", "brains": "*"}), 400, "InvalidArgumentError")
    for principal, brains in (("person:two words", [BRAIN]), ("person:x", ["../etc"]), ("person:x", ["a", "*"])):
        refused(
            call(hosted, "POST", "/v1/keys", {"principal": principal, "brains": brains}), 422, "KeyLineRefusedError"
        )
    refused(call(hosted, "DELETE", "/v1/keys/not-a-fingerprint"), 400, "InvalidArgumentError")
    refused(call(hosted, "GET", "/v1/keys", key=PERSON_KEY), 401, "UnauthenticatedError")
    assert keys_path.read_bytes() == after  # no refused mint wrote a byte


def test_archive_leaves_the_store_byte_identical_and_refuses_by_name(hosted):
    """host.archive writes its marker beside the stores (``.archived/<name>.json``), never inside one: the store
    is byte-identical through archive, refused doors and unarchive; every door on it is BrainArchivedError
    (never NoSuchBrainError), /v1/brains says archived; unarchive serves the same rows again."""
    for n in range(3):
        add(hosted, BRAIN, PERSON_KEY, f"row {n}")
    ok(call(hosted, "POST", f"/v1/brains/{BRAIN}/close"))
    store = hosted.store
    before = files_of(store)

    archived = ok(call(hosted, "POST", f"/v1/brains/{BRAIN}/archive"))
    assert archived["archived"] is True and isinstance(archived["archivedAt"], int)
    marker = hosted.extra["brains"] / ".archived" / f"{BRAIN}.json"
    assert json.loads(marker.read_text()) == {"brain": BRAIN, "archivedAt": archived["archivedAt"]}
    assert ok(call(hosted, "POST", f"/v1/brains/{BRAIN}/archive")) == archived  # no change
    error = refused(call(hosted, "GET", f"/v1/brains/{BRAIN}/counts", key=PERSON_KEY), 423, "BrainArchivedError")
    assert error["brain"] == BRAIN and error["archivedAt"] == archived["archivedAt"]
    refused(
        call(hosted, "POST", f"/v1/brains/{BRAIN}/add", {"type": "concept", "data": "x"}, key=PERSON_KEY),
        423,
        "BrainArchivedError",
    )
    refused(call(hosted, "GET", f"/v1/brains/{BRAIN}/health"), 423, "BrainArchivedError")
    assert {"name": BRAIN, "archived": True, "resident": False, "writer": False} in ok(
        call(hosted, "GET", "/v1/brains")
    )["brains"]
    refused(call(hosted, "POST", f"/v1/brains/{BRAIN}/provision"), 409, "BrainExistsError")
    assert files_of(store) == before

    assert ok(call(hosted, "POST", f"/v1/brains/{BRAIN}/unarchive")) == {"brain": BRAIN, "archived": False}
    assert not marker.exists() and files_of(store) == before
    assert counts(hosted, BRAIN)["entities"] == 3

    add(hosted, BRAIN, PERSON_KEY, "written while open")  # archiving an open writer closes it cleanly first
    ok(call(hosted, "POST", f"/v1/brains/{BRAIN}/archive"))
    assert (store / "locks" / "_writer.close").exists() and not (store / "locks" / "_writer.lock").exists()
    ok(call(hosted, "POST", f"/v1/brains/{BRAIN}/unarchive"))
    assert counts(hosted, BRAIN)["entities"] == 4
    refused(call(hosted, "POST", "/v1/brains/nobody/archive"), 404, "NoSuchBrainError")


def _settled(server: ServerProcess, name: str) -> dict[str, Any]:
    deadline = time.monotonic() + 20
    while True:
        runs = ok(call(server, "GET", f"/v1/brains/{BRAIN}/ceremonies/persist?name={name}"))["runs"]
        if runs[0]["state"] in ("done", "failed") or time.monotonic() > deadline:
            return runs[0]
        time.sleep(0.05)


def test_a_persisted_snapshot_reopens_with_the_same_counts(hosted):
    """host.persist writes one consistent generation at ``<root>/<brain>/<name>``; the copy opens as a store at
    that generation with the same counts; the refusals come in the seeds' order, before any run, with the
    root shown as ``<snapshots-dir>``; nothing under the root is deleted."""
    for n in range(5):
        add(hosted, BRAIN, PERSON_KEY, f"row {n}")
    ok(
        call(
            hosted,
            "POST",
            f"/v1/brains/{BRAIN}/relate",
            {
                "from": add(hosted, BRAIN, PERSON_KEY, "a")["id"],
                "to": add(hosted, BRAIN, PERSON_KEY, "b")["id"],
                "type": "relatedTo",
            },
            key=PERSON_KEY,
        )
    )
    expected = counts(hosted, BRAIN)
    started = ok(call(hosted, "POST", f"/v1/brains/{BRAIN}/ceremonies/persist", {"name": "nightly"}))
    assert started["brain"] == BRAIN and started["name"] == "nightly"
    assert started["run"]["state"] in ("queued", "running") and started["run"]["generation"] == expected["generation"]
    run = _settled(hosted, "nightly")
    assert run["state"] == "done", run
    assert run["files"] > 0 and run["bytes"] > 0 and run["finishedAt"] >= run["startedAt"]
    snaps = hosted.extra["snaps"]
    copy = snaps / BRAIN / "nightly"
    with Brain.attach(copy) as opened:
        assert opened.head == started["run"]["generation"]
        answer = opened.counts()
    for field in ("generation", "entities", "relationships", "byType", "byRelationType"):
        assert answer[field] == expected[field], field
    assert answer["entities"] == 7 and answer["relationships"] == 1
    with Brain.open(copy) as writable:  # the copy is a whole store: it opens read-write too
        assert writable.role == "writer" and writable.counts()["entities"] == 7

    root_text = str(snaps)
    for name, status, refusal in (
        ("../escape", 400, "SnapshotNameInvalidError"),
        (".hidden", 400, "SnapshotNameInvalidError"),
        ("nightly", 409, "SnapshotTargetNotEmptyError"),
    ):
        answer = call(hosted, "POST", f"/v1/brains/{BRAIN}/ceremonies/persist", {"name": name})
        error = refused(answer, status, refusal)
        assert root_text.encode() not in answer.body, error
    assert "<snapshots-dir>/notes/nightly" in error["message"]
    os.symlink(snaps / "elsewhere", snaps / BRAIN / "linked")
    error = refused(
        call(hosted, "POST", f"/v1/brains/{BRAIN}/ceremonies/persist", {"name": "linked"}),
        409,
        "SnapshotTargetUnsafeError",
    )
    assert error["message"] == "<snapshots-dir>/notes/linked is a symlink"
    ok(call(hosted, "POST", "/v1/brains/other/provision"))
    os.symlink(snaps / "elsewhere", snaps / "other")
    refused(
        call(hosted, "POST", "/v1/brains/other/ceremonies/persist", {"name": "n"}), 409, "SnapshotTargetUnsafeError"
    )
    refused(call(hosted, "GET", f"/v1/brains/{BRAIN}/ceremonies/persist?name=never"), 404, "SnapshotRunNotFoundError")
    refused(call(hosted, "POST", "/v1/brains/nobody/ceremonies/persist", {"name": "n"}), 404, "NoSuchBrainError")
    assert len(ok(call(hosted, "GET", f"/v1/brains/{BRAIN}/ceremonies/persist"))["runs"]) == 1
    assert (snaps / "operator-notes.txt").read_text() == "placed by the operator\n"
    assert not (snaps / "elsewhere").exists()  # nothing was written through either symlink

    ok(call(hosted, "POST", f"/v1/brains/{BRAIN}/archive"))  # an archived brain is still backed up
    ok(call(hosted, "POST", f"/v1/brains/{BRAIN}/ceremonies/persist", {"name": "archived"}))
    assert _settled(hosted, "archived")["state"] == "done"
    with Brain.attach(snaps / BRAIN / "archived") as opened:
        assert opened.counts()["entities"] == 7


def test_persist_status_remembers_its_runs_across_a_restart(tmp_path):
    """Each state a run reaches is appended to ``<root>/<brain>/.runs.jsonl``: a server started again over the
    same snapshots root answers persistStatus with the runs an earlier process ran, as they ended; a run the
    earlier process left in flight (its last record ``running``, as a SIGKILL mid-copy leaves it) answers
    ``failed`` with ShuttingDownError; a torn last line is skipped; the records are only ever appended to."""
    brains, snaps = tmp_path / "brains", tmp_path / "snaps"
    snaps.mkdir()
    with start_server(brains, extra_args=("--brains-dir", str(brains), "--snapshots-dir", str(snaps))) as first:
        add(first, BRAIN, PERSON_KEY, "kept")
        ok(call(first, "POST", f"/v1/brains/{BRAIN}/ceremonies/persist", {"name": "before"}))
        before = _settled(first, "before")
        assert before["state"] == "done", before
    records = snaps / BRAIN / RECORDS
    states = [json.loads(line)["state"] for line in records.read_text().splitlines()]
    assert states == ["queued", "running", "done"]
    cut = dict(before, name="cut", state="running")  # a run its process never finished: the copy was cut off
    del cut["finishedAt"], cut["files"], cut["bytes"]
    (snaps / BRAIN / "cut").mkdir()
    (snaps / BRAIN / "cut" / "IDENTITY").write_text("half a copy\n")
    with open(records, "a") as f:
        f.write(json.dumps(cut) + "\n" + '{"name": "torn", "sta')
    written = records.read_bytes()

    with start_server(
        tmp_path / "again", brain="other", extra_args=("--brains-dir", str(brains), "--snapshots-dir", str(snaps))
    ) as second:
        runs = ok(call(second, "GET", f"/v1/brains/{BRAIN}/ceremonies/persist"))["runs"]
        assert [r["name"] for r in runs] == ["before", "cut"]
        assert runs[0] == before
        assert runs[1]["state"] == "failed" and runs[1]["error"]["name"] == "ShuttingDownError", runs[1]
        assert "finishedAt" not in runs[1] and runs[1]["generation"] == before["generation"]
        refused(
            call(second, "POST", f"/v1/brains/{BRAIN}/ceremonies/persist", {"name": "cut"}),
            409,
            "SnapshotTargetNotEmptyError",
        )  # what the cut run wrote is left for the operator
        ok(call(second, "POST", f"/v1/brains/{BRAIN}/ceremonies/persist", {"name": "after"}))
        assert _settled(second, "after")["state"] == "done"
        assert [r["name"] for r in ok(call(second, "GET", f"/v1/brains/{BRAIN}/ceremonies/persist"))["runs"]] == [
            "before",
            "cut",
            "after",
        ]
    assert records.read_bytes().startswith(written)  # appended to, never rewritten
    after = [json.loads(line)["state"] for line in records.read_text().splitlines()[len(states) + 2 :]]
    assert after == ["queued", "running", "done"]  # the torn line did not swallow the next record
    assert (snaps / BRAIN / "cut" / "IDENTITY").read_text() == "half a copy\n"


def test_every_host_door_wants_the_service_key(hosted):
    """All eight host doors refuse a person key that reaches the brain (ForbiddenError, 403) and change nothing:
    no store provisioned, no marker, no key minted or revoked, no snapshot run."""
    brains, snaps = hosted.extra["brains"], hosted.extra["snaps"]
    keys_before = hosted.keys_path.read_bytes()
    for method, path, doc in (
        ("POST", "/v1/brains/fresh/provision", None),
        ("POST", f"/v1/brains/{BRAIN}/archive", None),
        ("POST", f"/v1/brains/{BRAIN}/unarchive", None),
        ("POST", "/v1/keys", {"principal": "person:x@example.com", "brains": [BRAIN]}),
        ("GET", "/v1/keys", None),
        ("DELETE", "/v1/keys/" + "0" * 64, None),
        ("POST", f"/v1/brains/{BRAIN}/ceremonies/persist", {"name": "n"}),
        ("GET", f"/v1/brains/{BRAIN}/ceremonies/persist", None),
    ):
        refused(call(hosted, method, path, doc, key=PERSON_KEY), 403, "ForbiddenError")
    assert not (brains / "fresh").exists() and not (brains / ".archived").exists()
    assert hosted.keys_path.read_bytes() == keys_before
    assert not (hosted.keys_path.with_name("revoked.json")).exists()
    assert sorted(p.name for p in snaps.iterdir()) == ["operator-notes.txt"]
    assert counts(hosted, BRAIN)["generation"] == 0


def test_without_brains_dir_or_snapshots_dir_the_doors_refuse_by_name(tmp_path):
    """No --brains-dir: provision and archive refuse BrainsDirNotConfiguredError. No --snapshots-dir: persist and
    persistStatus refuse SnapshotRootNotConfiguredError, and every other door still serves."""
    with start_server(tmp_path) as server:
        refused(call(server, "POST", "/v1/brains/fresh/provision"), 503, "BrainsDirNotConfiguredError")
        refused(call(server, "POST", f"/v1/brains/{BRAIN}/archive"), 503, "BrainsDirNotConfiguredError")
        refused(
            call(server, "POST", f"/v1/brains/{BRAIN}/ceremonies/persist", {"name": "n"}),
            503,
            "SnapshotRootNotConfiguredError",
        )
        refused(call(server, "GET", f"/v1/brains/{BRAIN}/ceremonies/persist"), 503, "SnapshotRootNotConfiguredError")
        assert counts(server, BRAIN)["entities"] == 0


@pytest.mark.parametrize("where", ["same", "inside", "around"])
def test_a_snapshots_root_overlapping_the_brains_dir_refuses_to_start(tmp_path, where):
    """--snapshots-dir equal to, inside or containing --brains-dir refuses the start: SnapshotRootUnusableError."""
    brains = tmp_path / "outer" / "brains"
    (brains / "inner").mkdir(parents=True)
    root = {"same": brains, "inside": brains / "inner", "around": tmp_path / "outer"}[where]
    keys = tmp_path / "keys"
    keys.write_text(f"{SERVICE_KEY}  service:operator  !\n")
    keys.chmod(0o600)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "brainy.cli",
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--keys",
            str(keys),
            "--brains-dir",
            str(brains),
            "--snapshots-dir",
            str(root),
        ],
        capture_output=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 2
    assert b"SnapshotRootUnusableError" in done.stderr


def test_a_snapshots_root_that_is_not_there_refuses_at_the_door_and_is_never_created(tmp_path):
    """The host never creates the root: a --snapshots-dir that is not there (yet) starts, and persist refuses
    SnapshotRootUnusableError with the root shown as ``<snapshots-dir>``; the root is still not there."""
    missing = tmp_path / "not-mounted"
    with start_server(tmp_path / "brains", extra_args=("--snapshots-dir", str(missing))) as server:
        answer = call(server, "POST", f"/v1/brains/{BRAIN}/ceremonies/persist", {"name": "n"})
        error = refused(answer, 409, "SnapshotRootUnusableError")
        assert error["message"].startswith("<snapshots-dir>") and str(missing).encode() not in answer.body
        assert str(missing) in server.log()  # the whole text goes to the host's log
        assert ok(call(server, "GET", f"/v1/brains/{BRAIN}/ceremonies/persist"))["runs"] == []
    assert not missing.exists()
