"""The engine mechanics (DOORS 5.3: diagnostics, repair, snapshot, warm, stats) against a REAL ``brainy serve``.

Each answers in DOORS 5.3's shape, for the service key only, and names files relative to the store: no
absolute host path ever appears in an answer. ``snapshot`` lists one generation's exact file set, and a
copy of exactly those bytes reopens at that generation; ``diagnostics`` with ``deep`` finds a damaged
table that the shallow call does not read; ``repair`` rebuilds projections that are behind and embeds
rows that have text and no vector.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys

import pytest
from server import BRAIN, PERSON_KEY, start_server
from test_host_doors import add, call, counts, ok, refused

from brainy.engine import Brain, init_store
from brainy.store.directory import FOLDERS

pytestmark = pytest.mark.slow


def test_each_mechanic_answers_in_its_shape_with_no_host_path(tmp_path):
    """diagnostics, stats, warm, snapshot and repair answer DOORS 5.3's fields; none names tmp_path; a principal
    key is refused at the gate."""
    with start_server(tmp_path) as server:
        for n in range(4):
            add(server, BRAIN, PERSON_KEY, f"a note about topic {n}")
        p = f"/v1/brains/{BRAIN}"
        answers = {}
        for method, door, doc in (
            ("GET", "diagnostics?deep=true", None),
            ("GET", "stats", None),
            ("GET", "snapshot", None),
            ("POST", "repair", {"dryRun": True}),
            ("POST", "warm", {}),
            ("GET", "diagnostics", None),
        ):
            answer = call(server, method, f"{p}/{door}", doc)
            assert str(tmp_path).encode() not in answer.body, (door, answer.body[:400])
            answers[door.split("?")[0] + ("-deep" if "deep" in door else "")] = ok(answer)
        deep = answers["diagnostics-deep"]
        assert set(deep) == {
            "brain",
            "version",
            "generation",
            "log",
            "sstables",
            "memtable",
            "projections",
            "blobs",
            "lease",
            "residency",
            "problems",
            "horizons",  # beside DOORS' fields: where the feed retention and the history horizon stand
        }
        assert (
            deep["horizons"]
            == answers["stats"]["horizons"]
            == {
                "feedRetention": "7d",
                "history": None,
                "logFrom": 1,
                "historyFrom": 0,
                "feedFrom": 0,
                "droppedVersions": 0,
                "trimmedSegments": 0,
            }
        )
        assert deep["generation"] == 4 and deep["log"]["head"] == 4 and deep["problems"] == []
        assert deep["memtable"]["rows"] > 0 and deep["lease"]["role"] == "writer"
        assert deep["residency"]["resident"] is True and deep["residency"]["doorsInFlight"] == 0
        assert {p["name"] for p in deep["projections"]} == {"projections", "vectors"}
        stats = answers["stats"]
        assert stats["rows"] == {"entities": 4, "relations": 0, "files": 0}
        assert set(stats["bytes"]) == {"log", "sstables", "projections", "blobs"} and stats["bytes"]["log"] > 0
        assert stats["embedder"]["dimensions"] == 384 and stats["residency"]["resident"] is True
        # the writer's indexes follow its commits from the first one on (read-your-writes): nothing is behind
        assert answers["repair"]["repaired"] == [] and answers["repair"]["embedded"] == 0
        assert [w["projection"] for w in answers["warm"]["warmed"]] == [
            "metadata",
            "words",
            "graph",
            "idmap",
            "vectors",
        ]
        assert all(p["behind"] == 0 for p in answers["diagnostics"]["projections"])  # warmed: followed to the head
        refused(call(server, "GET", f"{p}/stats", key=PERSON_KEY), 403, "ForbiddenError")
        refused(call(server, "POST", f"{p}/warm", {"projections": ["nothing"]}), 400, "InvalidArgumentError")


def test_a_copy_of_the_snapshot_file_set_reopens_at_its_generation(tmp_path):
    """snapshot's files, copied byte for byte (the first ``size`` bytes of each), open as a store at its
    generation with the same counts, and each checksum is the sha256 of what was copied."""
    with start_server(tmp_path) as server:
        for n in range(6):
            add(server, BRAIN, PERSON_KEY, f"row {n}")
        ok(call(server, "POST", f"/v1/brains/{BRAIN}/close"))  # a flush: tables and a log both in the set
        for n in range(3):
            add(server, BRAIN, PERSON_KEY, f"after the flush {n}")
        expected = counts(server, BRAIN)
        listed = ok(call(server, "GET", f"/v1/brains/{BRAIN}/snapshot"))
        assert listed["generation"] == expected["generation"] == 9
        names = [f["name"] for f in listed["files"]]
        assert "IDENTITY" in names and "MANIFEST" in names and any(n.startswith("sst/") for n in names)
        assert all(not n.startswith("/") and not n.startswith("locks/") for n in names)
        copy = tmp_path / "copy"
        for folder in FOLDERS:
            (copy / folder).mkdir(parents=True)
        for f in listed["files"]:
            data = (server.store / f["name"]).read_bytes()[: f["size"]]
            assert len(data) == f["size"] and f["checksum"] == "sha256:" + hashlib.sha256(data).hexdigest()
            (copy / f["name"]).parent.mkdir(parents=True, exist_ok=True)
            (copy / f["name"]).write_bytes(data)
    with Brain.attach(copy) as opened:
        assert opened.head == 9
        got = opened.counts()
    for field in ("generation", "entities", "byType"):
        assert got[field] == expected[field]


def test_deep_diagnostics_finds_a_damaged_table_the_shallow_one_does_not_read(tmp_path):
    """A byte flipped inside a table's data block: diagnostics lists no problem, diagnostics?deep=true lists the
    torn table by its store-relative name, with no host path."""
    with start_server(tmp_path) as server:
        for n in range(20):
            add(server, BRAIN, PERSON_KEY, f"row number {n} with some words in it")
        ok(call(server, "POST", f"/v1/brains/{BRAIN}/close"))
        table = sorted((server.store / "sst").iterdir())[0]
        with open(table, "r+b") as f:
            f.seek(40)
            byte = f.read(1)
            f.seek(40)
            f.write(bytes([byte[0] ^ 0xFF]))
        assert ok(call(server, "GET", f"/v1/brains/{BRAIN}/diagnostics"))["problems"] == []
        answer = call(server, "GET", f"/v1/brains/{BRAIN}/diagnostics?deep=true")
        assert str(tmp_path).encode() not in answer.body
        problems = ok(answer)["problems"]
        assert len(problems) == 1 and f"sst/{table.name}" in problems[0]["detail"], problems


def test_repair_embeds_rows_written_without_a_model(tmp_path):
    """Rows written while no model could load have text and no vector; repair embeds every one of them (one
    commit per batch) and a dry run only counts them."""
    other = tmp_path / "other"
    init_store(other)
    script = (
        "import sys; from brainy.engine import Brain\n"
        "with Brain.open(sys.argv[1]) as b:\n"
        "    for n in range(5): b.add({'type': 'concept', 'data': f'unembedded note {n}'}, caller='person:a')\n"
    )
    env = dict(os.environ, BRAINY_EMBED_MODEL_DIR=str(tmp_path / "no-model"))
    subprocess.run([sys.executable, "-c", script, str(other)], check=True, env=env, timeout=120)
    with Brain.attach(other) as before:
        assert before.counts()["vectoredEntities"] == 0 and before.counts()["entities"] == 5
    with start_server(tmp_path / "served", extra_args=("--brain", f"other={other}")) as server:
        dry = ok(call(server, "POST", "/v1/brains/other/repair", {"dryRun": True}))
        assert dry["embedded"] == 5 and dry["generation"] == 5
        done = ok(call(server, "POST", "/v1/brains/other/repair", {}))
        assert done["embedded"] == 5 and done["generation"] == 6
        again = ok(call(server, "POST", "/v1/brains/other/repair", {}))
        assert again["embedded"] == 0 and again["repaired"] == []
    with Brain.attach(other) as after:
        assert after.counts()["vectoredEntities"] == 5
