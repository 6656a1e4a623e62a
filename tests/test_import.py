"""The ``import`` door (DOORS 5.2) against a REAL ``brainy serve``: export pages, JSON lines and CSV.

One commit per import; a long import narrates its batches on the server's log; content that does not
parse is ImportFormatError naming its line; a row its door refuses is TransactionAbortedError naming its
line, and nothing is committed, unless continueOnError.
"""

from __future__ import annotations

import base64
import json

import pytest
from server import BRAIN, PERSON_KEY, start_server
from test_host_doors import call, counts, ok, refused

pytestmark = pytest.mark.slow


def imported(server, doc, brain=BRAIN, key=PERSON_KEY):
    # an import embeds every row's text before its one commit: thousands of rows take seconds on a loaded box
    return call(server, "POST", f"/v1/brains/{brain}/import", doc, key=key, timeout=IMPORT_SECONDS)


IMPORT_SECONDS = 60.0


def test_jsonl_and_csv_import_in_one_commit_each_with_progress_on_the_log(tmp_path):
    """2,500 JSON lines (entities, then a relation naming two of them) land in one commit and the log narrates
    the batches; CSV takes its type and makes every other column metadata; base64 content decodes first."""
    with start_server(tmp_path) as server:
        lines = [json.dumps({"id": f"n{i}", "type": "concept", "data": f"note {i}"}) for i in range(2500)]
        lines.append(json.dumps({"from": "n1", "to": "n2", "type": "relatedTo"}))
        answer = ok(imported(server, {"format": "jsonl", "content": "\n".join(lines) + "\n"}))
        assert answer["entities"] == 2500 and answer["relations"] == 1 and answer["generation"] == 1
        assert answer["failed"] == [] and answer["skipped"] == 0
        assert counts(server, BRAIN)["entities"] == 2500
        assert "import into notes: 1000 of 2501 rows staged" in server.log()
        assert "import into notes: 2000 of 2501 rows staged" in server.log()

        table = "id,data,city\np1,Ann,Oslo\np2,Bob,Rome\n"
        answer = ok(imported(server, {"format": "csv", "type": "person", "content": table}))
        assert answer["entities"] == 2 and answer["generation"] == 2
        got = ok(call(server, "GET", f"/v1/brains/{BRAIN}/get/p1", key=PERSON_KEY))["entity"]
        assert got["type"] == "person" and got["data"] == "Ann" and got["metadata"] == {"city": "Oslo"}
        refused(imported(server, {"format": "csv", "content": table}), 400, "InvalidArgumentError")

        encoded = base64.b64encode(b'{"id": "b64", "type": "concept", "data": "decoded"}\n').decode()
        assert ok(imported(server, {"format": "jsonl", "content": encoded, "encoding": "base64"}))["entities"] == 1


def test_a_bad_row_refuses_by_its_line_and_commits_nothing_unless_continue_on_error(tmp_path):
    """A row its door refuses: TransactionAbortedError naming the line, the row's own refusal inside it, and the
    brain unchanged. With continueOnError the row is listed in failed (index and line) and the rest land.
    A line that is not JSON is ImportFormatError {line}. onConflict skip and replace decide existing ids."""
    with start_server(tmp_path) as server:
        content = "\n".join(
            [
                json.dumps({"type": "concept", "data": "fine"}),
                "",
                json.dumps({"type": "no-such-type", "data": "bad"}),
                json.dumps({"type": "concept", "data": "also fine"}),
            ]
        )
        error = refused(imported(server, {"format": "jsonl", "content": content}), 409, "TransactionAbortedError")
        assert "line 3" in error["message"] and error["index"] == 1
        assert error["error"]["name"] == "InvalidArgumentError"
        assert counts(server, BRAIN)["entities"] == 0 and counts(server, BRAIN)["generation"] == 0

        answer = ok(imported(server, {"format": "jsonl", "content": content, "continueOnError": True}))
        assert answer["entities"] == 2
        assert [(f["index"], f["line"], f["error"]["name"]) for f in answer["failed"]] == [
            (1, 3, "InvalidArgumentError")
        ]

        error = refused(
            imported(server, {"format": "jsonl", "content": '{"type": "concept"}\n{oops\n'}), 422, "ImportFormatError"
        )
        assert error["line"] == 2
        refused(
            imported(server, {"format": "csv", "type": "concept", "content": "id,data\na,b,c\n"}),
            422,
            "ImportFormatError",
        )

        first = json.dumps({"id": "same", "type": "concept", "data": "first"})
        ok(imported(server, {"format": "jsonl", "content": first}))
        again = json.dumps({"id": "same", "type": "concept", "data": "second"})
        error = refused(imported(server, {"format": "jsonl", "content": again}), 409, "TransactionAbortedError")
        assert error["error"]["name"] == "EntityExistsError"
        assert ok(imported(server, {"format": "jsonl", "content": again, "onConflict": "skip"}))["skipped"] == 1
        assert ok(imported(server, {"format": "jsonl", "content": again, "onConflict": "replace"}))["entities"] == 1
        assert ok(call(server, "GET", f"/v1/brains/{BRAIN}/get/same", key=PERSON_KEY))["entity"]["data"] == "second"


def test_an_export_page_imports_into_another_brain_with_the_same_rows(tmp_path):
    """export's page is import's ``brainy`` format: provisioned, keyed and imported over the wire, the second
    brain counts what the first does, relations included."""
    brains = tmp_path / "brains"
    with start_server(brains, extra_args=("--brains-dir", str(brains))) as server:
        rows = [json.dumps({"id": f"e{i}", "type": "concept", "data": f"entity {i}"}) for i in range(30)]
        rows += [json.dumps({"from": f"e{i}", "to": f"e{i + 1}", "type": "relatedTo"}) for i in range(10)]
        ok(imported(server, {"format": "jsonl", "content": "\n".join(rows)}))
        page = ok(call(server, "POST", f"/v1/brains/{BRAIN}/export", {"limit": 1000}, key=PERSON_KEY))
        ok(call(server, "POST", "/v1/brains/copy/provision"))
        key = ok(call(server, "POST", "/v1/keys", {"principal": "person:copier@example.com", "brains": ["copy"]}))[
            "key"
        ]
        answer = ok(imported(server, {"format": "brainy", "content": page}, brain="copy", key=key))
        assert answer["entities"] == 30 and answer["relations"] == 10
        source, copy = counts(server, BRAIN), counts(server, "copy", key)
        for field in ("entities", "relationships", "byType", "byRelationType"):
            assert copy[field] == source[field], field
        same = ok(call(server, "GET", "/v1/brains/copy/get/e3", key=key))["entity"]
        assert same["data"] == "entity 3" and same["key"] == "e3"
