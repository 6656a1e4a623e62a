"""memory.write and memory.cite of a VFS path (DOORS 9.2; docs/memory.md "Notes"), in process on a real store with
the real embedder: the file and its note memory in ONE commit, a path's one note, the refusals of 9.2 and of
writeFile, and the guardrails on it. Served with a real ``brainy serve`` and a reading-door receiver on loopback:
tests/test_memory_write_served.py."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from helpers import new_store

from brainy.contract import refusals as R
from brainy.doors import vfs
from brainy.engine import Brain

ME = "person:agent@example.com"
NOTE = "# Alice\n\nAlice prefers green tea to coffee, and drinks it without sugar.\n"


@pytest.fixture
def brain(tmp_path):
    b = Brain.open(new_store(tmp_path), name="test")
    yield b
    b.close()


def write(b: Brain, path: str = "/notes/alice.md", content: str = NOTE, **more: Any) -> dict[str, Any]:
    return b.call("memory.write", {"path": path, "content": content, **more}, caller=ME)


def test_the_file_and_its_note_are_one_commit(brain):
    """One generation holds the file (its parent made), the note memory and the note's references relation to the
    file; the generation before holds none of them. The answer is the stored file's, doorUrl null in process."""
    got = write(brain, summary="What Alice drinks", tags=["alice"], scope="user:alice")
    assert brain.head == got["generation"] == 1
    assert {k: got[k] for k in ("path", "contentType", "doorUrl", "doorUrlReason")} == {
        "path": "/notes/alice.md",
        "contentType": "text/markdown",
        "doorUrl": None,
        "doorUrlReason": "not-configured",
    }
    node = brain.call("stat", {"path": "/notes/alice.md"})["node"]
    assert (node["entityId"], node["hash"], node["size"], node["generation"]) == (
        got["entityId"],
        got["hash"],
        got["size"],
        got["generation"],
    )
    assert brain.call("readFile", {"path": "/notes/alice.md"})["content"] == NOTE
    assert brain.call("stat", {"path": "/notes"})["node"]["generation"] == got["generation"]
    read = brain.call("memory.read", {"path": "/notes/alice.md"})["memory"]
    assert read == {
        **read,
        "id": got["id"],
        "kind": "note",
        "text": "What Alice drinks",
        "tags": ["alice"],
        "scope": "user:alice",
        "path": "/notes/alice.md",
        "contentType": "text/markdown",
        "generation": got["generation"],
        "author": ME,
        "status": "active",
    }
    links = brain.call(
        "related", {"from": got["id"], "type": "references", "subtype": "memory.file", "visibility": "all"}
    )
    assert [(r["to"], r["generation"]) for r in links["relations"]] == [(got["entityId"], got["generation"])]
    earlier = brain.at().at(0)  # the generation before holds neither part
    assert vfs.node(earlier, "/notes/alice.md") is None and earlier.entity(got["id"]) is None
    assert brain.at().commit(1)["author"] == ME
    assert brain.call("history", got["id"])["versions"][-1]["generation"] == got["generation"]
    assert brain.call("history", got["entityId"])["versions"][-1]["generation"] == got["generation"]


def test_a_note_without_a_summary_is_its_file_text_and_recalled_by_meaning(brain):
    """No summary: the note's text is the file's text, embedded, so a paraphrased question finds it first."""
    got = write(brain)
    brain.call("memory.remember", {"text": "Bob drives a blue Volvo estate"}, caller=ME)
    read = brain.call("memory.read", {"id": got["id"]})["memory"]
    assert read["text"] == NOTE
    hits = brain.call("memory.recall", {"query": "What does Alice like to drink?"})["memories"]
    assert hits[0]["memory"]["id"] == got["id"] and hits[0]["why"]["semantic"] > 0


def test_binary_content_is_a_note_named_by_its_path(brain):
    """base64 content that is not text: the file is stored byte for byte as octets; the note's text is the path."""
    raw = bytes(range(256))
    got = write(brain, "/blobs/raw.bin", base64.b64encode(raw).decode(), encoding="base64")
    assert got["contentType"] == "application/octet-stream" and got["size"] == 256
    back = brain.call("readFile", {"path": "/blobs/raw.bin", "encoding": "base64"})["content"]
    assert base64.b64decode(back) == raw
    assert brain.call("memory.read", {"path": "/blobs/raw.bin"})["memory"]["text"] == "/blobs/raw.bin"


def test_a_path_holds_one_note_and_a_rewrite_keeps_its_strength_and_revives_it(brain):
    """Writing the path again: a new version of the file and of the same note (strength and citations kept), active
    again if it was retired; reading by path answers it."""
    first = write(brain, summary="tea")
    brain.call("memory.reinforce", {"id": first["id"], "amount": 0.2}, caller=ME)
    brain.call("memory.retire", {"id": first["id"], "reason": "outdated"}, caller=ME)
    again = write(brain, content="# Alice\n\nAlice now drinks mint tea.\n", summary="mint tea")
    assert (again["id"], again["entityId"]) == (first["id"], first["entityId"])
    assert again["hash"] != first["hash"] and again["generation"] > first["generation"]
    read = brain.call("memory.read", {"path": "/notes/alice.md"})["memory"]
    assert read == {
        **read,
        "id": first["id"],
        "text": "mint tea",
        "status": "active",
        "strength": pytest.approx(0.7),
        "generation": again["generation"],
    }
    assert "retiredReason" not in read
    notes = brain.call("memory.list", {"kind": "note", "status": "all"})["memories"]
    assert [n["id"] for n in notes] == [first["id"]]


def test_a_file_written_by_writefile_gains_a_note(brain):
    """A path writeFile wrote has no note; memory.write there writes the file anew and adds its note."""
    plain = brain.call("writeFile", {"path": "/todo.txt", "content": "buy tea"}, caller=ME)
    got = write(brain, "/todo.txt", "buy green tea")
    assert got["entityId"] == plain["entityId"] and got["contentType"] == "text/plain"
    assert brain.call("memory.read", {"path": "/todo.txt"})["memory"]["text"] == "buy green tea"


@pytest.mark.parametrize(
    "setup, args, refusal",
    [
        (None, {"path": "notes/x.md"}, R.InvalidPathError),
        (None, {"path": "/x.md", "content": "%%%", "encoding": "base64"}, R.InvalidArgumentError),
        (None, {"path": "/"}, R.IsADirectoryError),
        (("mkdir", {"path": "/dir"}), {"path": "/dir"}, R.IsADirectoryError),
        (("writeFile", {"path": "/file.txt", "content": "x"}), {"path": "/file.txt/x.md"}, R.NotADirectoryError),
        (None, {"path": "/x.md", "summary": 3}, R.InvalidArgumentError),
        (None, {"path": "/x.md", "tags": [""]}, R.InvalidArgumentError),
    ],
    ids=["relative path", "bad base64", "the root", "a directory", "a file as parent", "summary type", "empty tag"],
)
def test_refusals_write_nothing(brain, setup, args, refusal):
    """Each refusal of memory.write (writeFile's, and the arguments') leaves no file, no note and no commit."""
    if setup is not None:
        brain.call(setup[0], setup[1], caller=ME)
    head = brain.head
    with pytest.raises(refusal):
        brain.call("memory.write", {"content": "a note", **args}, caller=ME)
    assert brain.head == head
    assert brain.call("memory.stats")["total"] == 0


def test_a_guardrail_stops_memory_write_and_neither_part_lands(brain):
    """A rule the caller declared on memory.write refuses GuardrailRefusedError: no file, no note, and the refusal
    audited; another caller still writes."""
    rule = brain.call("policy.declare", {"doors": ["memory.*"], "reason": "no notes today"}, caller=ME)
    with pytest.raises(R.GuardrailRefusedError) as stopped:
        write(brain)
    assert stopped.value.fields["rules"] == [{"id": rule["id"], "tier": 2, "reason": "no notes today"}]
    assert brain.call("exists", {"path": "/notes/alice.md"}) == {"exists": False}
    assert brain.call("memory.stats")["total"] == 0
    assert [e["door"] for e in brain.call("policy.audit", {})["events"]] == ["memory.write"]
    other = brain.call("memory.write", {"path": "/notes/alice.md", "content": NOTE}, caller="person:other")
    assert brain.call("memory.read", {"path": "/notes/alice.md"})["memory"]["id"] == other["id"]


def test_cite_a_file_by_its_path(brain):
    """cite's evidence may be a VFS path: the relation references the file's entity, strength rises by 0.05,
    read answers the evidence as the path; a path with nothing there is FileNotFoundError."""
    note = write(brain)
    fact = brain.call("memory.remember", {"text": "Alice prefers green tea"}, caller=ME)
    got = brain.call(
        "memory.cite", {"id": fact["id"], "evidence": "/notes/alice.md", "note": "her own note"}, caller=ME
    )
    assert (got["citations"], got["strength"]) == (1, pytest.approx(0.55))
    links = brain.call(
        "related", {"from": fact["id"], "type": "references", "subtype": "memory.cite", "visibility": "all"}
    )["relations"]
    assert [r["to"] for r in links] == [note["entityId"]]
    read = brain.call("memory.read", {"id": fact["id"]})
    assert read["citations"] == [
        {"relationId": got["relationId"], "evidence": "/notes/alice.md", "note": "her own note"}
    ]
    with pytest.raises(R.FileNotFoundError) as missing:
        brain.call("memory.cite", {"id": fact["id"], "evidence": "/notes/bob.md"}, caller=ME)
    assert missing.value.fields["path"] == "/notes/bob.md"
    with pytest.raises(R.InvalidPathError):
        brain.call("memory.cite", {"id": fact["id"], "evidence": "/notes/"}, caller=ME)
