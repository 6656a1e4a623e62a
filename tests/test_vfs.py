"""The virtual file system over real stores (DOORS.md 8; docs/store-format.md "Files").

Round trips byte for byte, every refusal of DOORS 8 by name, readdir's depth and inline caps, verified
reads refusing a flipped byte, files in find, time travel and the change feed, a read-only attach that
writes nothing, dedup measured on disk, lookups by the path posting (not the relations), and a SIGKILL
during large writes that loses nothing acknowledged and leaves no row naming missing bytes.
"""

from __future__ import annotations

import base64
import hashlib
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import new_store

from brainy.contract import refusals as R
from brainy.doors import vfs
from brainy.engine import Brain
from brainy.store import blobs as B

PROCS = Path(__file__).parent / "procs"
ME = "person:files@example.com"


@pytest.fixture
def brain(tmp_path):
    b = Brain.open(new_store(tmp_path))
    yield b
    b.close()


def rand(n: int, seed: int = 1) -> bytes:
    return random.Random(seed).randbytes(n)


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def address(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def write(brain: Brain, path: str, data: bytes | str, **options) -> dict:
    if isinstance(data, bytes):
        options.setdefault("encoding", "base64")
        data = b64(data)
    return brain.writeFile({"path": path, "content": data, "createParents": True, **options}, caller=ME)


def disk(folder: Path) -> int:
    """Bytes the folder's files take on disk (allocated blocks)."""
    return sum(p.stat().st_blocks * 512 for p in folder.rglob("*") if p.is_file())


# -- round trips ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("size", [0, 1, 8191, 100_000, 3_000_000])
def test_binary_round_trips_byte_for_byte(brain, size):
    data = rand(size, size)
    answer = write(brain, "/bin/blob.dat", data)
    assert answer["hash"] == address(data) and answer["size"] == size and answer["created"] is True
    assert answer["generation"] >= 1
    if size > 1:  # no extension it knows, and bytes that are not UTF-8 (an empty file sniffs as text)
        assert answer["contentType"] == "application/octet-stream"
    read = brain.readFile({"path": "/bin/blob.dat", "encoding": "base64"})
    assert base64.b64decode(read["content"]) == data and read["hash"] == address(data) and read["size"] == size
    if size:
        part = brain.readFile({"path": "/bin/blob.dat", "encoding": "base64", "offset": size // 2, "length": 77})
        assert base64.b64decode(part["content"]) == data[size // 2 : size // 2 + 77]
        assert part["range"] == {"offset": size // 2, "length": len(data[size // 2 : size // 2 + 77])}


def test_text_round_trips_and_utf8_is_the_default(brain):
    text = "# Notes\nnaïve café — 日本語 ✓\n" * 500
    answer = write(brain, "/notes/today.md", text)
    assert answer["contentType"] == "text/markdown" and answer["size"] == len(text.encode())
    read = brain.readFile({"path": "/notes/today.md"})
    assert read["content"] == text and read["encoding"] == "utf-8" and read["hash"] == address(text.encode())
    assert brain.readFile({"path": "/notes/today.md", "encoding": "base64"})["content"] == b64(text.encode())


def test_utf8_refuses_at_the_offset_where_text_stops(brain):
    data = b"plain text, then " + b"\xff\xfe" + b" more"
    write(brain, "/mixed.txt", data)
    with pytest.raises(R.TextDecodeError) as exc:
        brain.readFile({"path": "/mixed.txt"})
    assert exc.value.offset == 17 and exc.value.cure == "base64"
    with pytest.raises(R.TextDecodeError) as exc:
        brain.readFile({"path": "/mixed.txt", "offset": 10})
    assert exc.value.offset == 17  # the offset in the file, not in the range
    assert base64.b64decode(brain.readFile({"path": "/mixed.txt", "encoding": "base64"})["content"]) == data
    # a claim of text over bytes that are not UTF-8 is not what the row stores
    assert write(brain, "/claimed.txt", data, contentType="text/plain")["contentType"] == "application/octet-stream"


def test_append_extends_and_shares_the_chunks_before_the_last(brain):
    first = rand(2_000_000, 5)
    write(brain, "/log.bin", first)
    before = brain.blobs.disk_bytes()
    more = rand(1000, 6)
    answer = brain.appendFile({"path": "/log.bin", "content": b64(more), "encoding": "base64"}, caller=ME)
    assert answer["hash"] == address(first + more) and answer["created"] is False
    assert base64.b64decode(brain.readFile({"path": "/log.bin", "encoding": "base64"})["content"]) == first + more
    assert brain.blobs.disk_bytes() - before < 70_000 + 1000  # the last chunk again, not the file
    created = brain.appendFile({"path": "/new.txt", "content": "hello"}, caller=ME)
    assert created["created"] is True and brain.readFile({"path": "/new.txt"})["content"] == "hello"


# -- the tree --------------------------------------------------------------------------------------------


def test_storage_is_entities_and_contains_relations(brain):
    answer = write(brain, "/a/b/c.md", "deep")
    row = brain.get(answer["entityId"])["entity"]
    assert (row["type"], row["subtype"]) == ("file", "vfs.file")
    meta = row["metadata"]
    assert {k: meta[k] for k in ("path", "name", "parent", "contentType", "size", "hash", "xattrs")} == {
        "path": "/a/b/c.md",
        "name": "c.md",
        "parent": "/a/b",
        "contentType": "text/markdown",
        "size": 4,
        "hash": address(b"deep"),
        "xattrs": {},
    }
    parent = brain.stat({"path": "/a/b"})["node"]
    directory = brain.get(parent["entityId"])["entity"]
    assert (directory["type"], directory["subtype"]) == ("collection", "vfs.directory")
    related = brain.related({"from": parent["entityId"]})
    edges = [(r["type"], r["subtype"], r["to"]) for r in related["relations"]]
    assert ("contains", "vfs", answer["entityId"]) in edges


def test_readdir_answers_every_node_at_any_depth_with_small_text_inline(brain):
    write(brain, "/docs/a.md", "---\ntitle: A\n---\nalpha")
    write(brain, "/docs/sub/b.txt", "bravo")
    write(brain, "/docs/sub/deeper/c.json", '{"c": 1}')
    write(brain, "/docs/pic.png", rand(500, 1))
    write(brain, "/docs/big.txt", "x" * ((1 << 20) + 1))
    brain.mkdir({"path": "/docs/empty"}, caller=ME)
    write(brain, "/elsewhere.md", "not under docs")
    listing = brain.readdir({"path": "/docs"})
    paths = [n["path"] for n in listing["nodes"]]
    assert (
        paths
        == sorted(paths)
        == [
            "/docs/a.md",
            "/docs/big.txt",
            "/docs/empty",
            "/docs/pic.png",
            "/docs/sub",
            "/docs/sub/b.txt",
            "/docs/sub/deeper",
            "/docs/sub/deeper/c.json",
        ]
    )
    nodes = {n["path"]: n for n in listing["nodes"]}
    assert nodes["/docs/a.md"]["content"] == "---\ntitle: A\n---\nalpha"
    assert nodes["/docs/sub/deeper/c.json"]["content"] == '{"c": 1}'
    assert nodes["/docs/pic.png"]["omitted"] == "not-text" and "content" not in nodes["/docs/pic.png"]
    assert nodes["/docs/pic.png"]["contentType"] == "image/png" and nodes["/docs/pic.png"]["size"] == 500
    assert nodes["/docs/big.txt"]["omitted"] == "too-large" and nodes["/docs/big.txt"]["size"] == (1 << 20) + 1
    assert nodes["/docs/empty"]["type"] == "directory"
    direct = brain.readdir({"path": "/docs", "recursive": False})
    assert [n["path"] for n in direct["nodes"]] == [
        "/docs/a.md",
        "/docs/big.txt",
        "/docs/empty",
        "/docs/pic.png",
        "/docs/sub",
    ]
    capped = {n["path"]: n for n in brain.readdir({"path": "/docs", "inlineLimit": 6})["nodes"]}
    assert capped["/docs/sub/b.txt"]["content"] == "bravo" and capped["/docs/a.md"]["omitted"] == "too-large"
    bare = brain.readdir({"path": "/docs", "inline": False})["nodes"]
    assert not any("content" in n or "omitted" in n for n in bare)
    with pytest.raises(R.InvalidArgumentError):
        brain.readdir({"inlineLimit": (1 << 20) + 1})
    assert "/" not in [n["path"] for n in brain.readdir({})["nodes"]]
    assert {n["path"] for n in brain.readdir({})["nodes"]} >= set(paths) | {"/docs", "/elsewhere.md"}


def test_stat_exists_and_xattrs(brain):
    write(brain, "/f.txt", "12345")
    node = brain.stat({"path": "/f.txt"})["node"]
    assert node["type"] == "file" and node["size"] == 5 and node["contentType"] == "text/plain"
    assert node["hash"] == address(b"12345") and node["modifiedAt"] >= node["createdAt"]
    assert brain.stat({"path": "/"})["node"]["type"] == "directory"
    assert brain.exists({"path": "/f.txt"}) == {"exists": True, "type": "file"}
    assert brain.exists({"path": "/"}) == {"exists": True, "type": "directory"}
    assert brain.exists({"path": "/nope"}) == {"exists": False}
    brain.setxattr({"path": "/f.txt", "name": "colour", "value": {"rgb": [1, 2, 3]}}, caller=ME)
    brain.setxattr({"path": "/f.txt", "name": "flag", "value": True}, caller=ME)
    assert brain.getxattr({"path": "/f.txt", "name": "colour"}) == {"value": {"rgb": [1, 2, 3]}, "exists": True}
    assert brain.getxattr({"path": "/f.txt", "name": "none"}) == {"value": None, "exists": False}
    assert brain.listxattr({"path": "/f.txt"}) == {"names": ["colour", "flag"]}
    assert brain.stat({"path": "/f.txt"})["node"]["xattrs"] == {"colour": {"rgb": [1, 2, 3]}, "flag": True}
    gone = brain.removexattr({"path": "/f.txt", "name": "flag"}, caller=ME)
    assert gone["removed"] is True and brain.listxattr({"path": "/f.txt"}) == {"names": ["colour"]}
    assert brain.removexattr({"path": "/f.txt", "name": "flag"}, caller=ME)["removed"] is False
    write(brain, "/f.txt", "rewritten")  # a rewrite keeps the attributes
    assert brain.listxattr({"path": "/f.txt"}) == {"names": ["colour"]}


def test_rename_move_copy_rmdir_unlink(brain):
    write(brain, "/src/one.md", "one")
    write(brain, "/src/deep/two.bin", rand(200_000, 2))
    before = brain.blobs.disk_bytes()
    copied = brain.copy({"path": "/src", "to": "/dup", "recursive": True}, caller=ME)
    assert copied["copied"] == 4 and brain.blobs.disk_bytes() == before  # a copy shares every chunk
    assert brain.readFile({"path": "/dup/deep/two.bin", "encoding": "base64"})["content"] == b64(rand(200_000, 2))
    renamed = brain.rename({"path": "/src", "to": "/moved"}, caller=ME)
    assert renamed == {**renamed, "path": "/moved", "from": "/src"}
    assert brain.exists({"path": "/src/one.md"}) == {"exists": False}
    assert brain.readFile({"path": "/moved/deep/two.bin", "encoding": "base64"})["content"] == b64(rand(200_000, 2))
    brain.mkdir({"path": "/box"}, caller=ME)
    assert brain.move({"path": "/moved/one.md", "to": "/box"}, caller=ME)["path"] == "/box/one.md"
    assert brain.readFile({"path": "/box/one.md"})["content"] == "one"
    write(brain, "/box/other.md", "other")
    over = brain.move({"path": "/box/other.md", "to": "/box/one.md", "overwrite": True}, caller=ME)
    assert over["path"] == "/box/one.md" and brain.readFile({"path": "/box/one.md"})["content"] == "other"
    assert brain.unlink({"path": "/box/one.md"}, caller=ME)["path"] == "/box/one.md"
    assert brain.exists({"path": "/box/one.md"}) == {"exists": False}
    removed = brain.rmdir({"path": "/moved", "recursive": True}, caller=ME)
    assert removed["removed"] == 3 and brain.exists({"path": "/moved/deep"}) == {"exists": False}
    assert brain.readFile({"path": "/dup/one.md"})["content"] == "one"  # the copy is its own


def test_mkdir_parents(brain):
    made = brain.mkdir({"path": "/p/q/r", "parents": True}, caller=ME)
    assert made["created"] is True and brain.exists({"path": "/p/q"})["type"] == "directory"
    again = brain.mkdir({"path": "/p/q/r", "parents": True}, caller=ME)
    assert again["created"] is False and again["entityId"] == made["entityId"]


# -- refusals ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "path, reason",
    [
        ("a.md", "not-absolute"),
        ("", "not-absolute"),
        ("/a/", "trailing-slash"),
        ("/a//b", "empty-segment"),
        ("/a/./b", "dot-segment"),
        ("/a/../b", "dot-segment"),
        ("/" + "x" * 256, "segment-too-long"),
        ("/" + "/".join(["y" * 200] * 21), "too-long"),
        ("/a\nb", "control-character"),
    ],
)
def test_paths_that_are_not_normalised_refuse_by_name(brain, path, reason):
    for door in ("readFile", "stat", "exists", "fileHistory"):
        with pytest.raises(R.InvalidPathError) as exc:
            brain.call(door, {"path": path})
        assert exc.value.reason == reason and exc.value.path == path
    with pytest.raises(R.InvalidPathError):
        brain.writeFile({"path": path, "content": "x"}, caller=ME)


def test_every_refusal_of_doors_8(brain):
    write(brain, "/d/f.txt", "file")
    write(brain, "/bad.bin", b"\xff\xff")
    brain.mkdir({"path": "/empty"}, caller=ME)
    cases = [
        (R.FileNotFoundError, "readFile", {"path": "/nope"}),
        (R.IsADirectoryError, "readFile", {"path": "/d"}),
        (R.TextDecodeError, "readFile", {"path": "/bad.bin"}),
        (R.GenerationAheadError, "readFile", {"path": "/d/f.txt", "generation": 10_000}),
        (R.FileNotFoundError, "readdir", {"path": "/nope"}),
        (R.NotADirectoryError, "readdir", {"path": "/d/f.txt"}),
        (R.FileNotFoundError, "stat", {"path": "/nope"}),
        (R.FileNotFoundError, "getxattr", {"path": "/nope", "name": "a"}),
        (R.FileNotFoundError, "listxattr", {"path": "/nope"}),
        (R.IsADirectoryError, "writeFile", {"path": "/d", "content": "x"}),
        (R.NotADirectoryError, "writeFile", {"path": "/d/f.txt/g", "content": "x"}),
        (R.NotADirectoryError, "writeFile", {"path": "/d/f.txt/g/h", "content": "x", "createParents": True}),
        (R.FileNotFoundError, "writeFile", {"path": "/no/parent.txt", "content": "x"}),
        (R.FileExistsError, "writeFile", {"path": "/d/f.txt", "content": "x", "exclusive": True}),
        (R.PreconditionFailedError, "writeFile", {"path": "/d/f.txt", "content": "x", "ifMatch": "sha256:" + "0" * 64}),
        (R.IsADirectoryError, "appendFile", {"path": "/d", "content": "x"}),
        (R.FileNotFoundError, "appendFile", {"path": "/no/parent.txt", "content": "x"}),
        (
            R.PreconditionFailedError,
            "appendFile",
            {"path": "/d/f.txt", "content": "x", "ifMatch": "sha256:" + "1" * 64},
        ),
        (R.FileExistsError, "mkdir", {"path": "/d"}),
        (R.FileExistsError, "mkdir", {"path": "/d/f.txt", "parents": True}),
        (R.FileNotFoundError, "mkdir", {"path": "/x/y"}),
        (R.NotADirectoryError, "mkdir", {"path": "/d/f.txt/z"}),
        (R.FileNotFoundError, "rmdir", {"path": "/nope"}),
        (R.NotADirectoryError, "rmdir", {"path": "/d/f.txt"}),
        (R.DirectoryNotEmptyError, "rmdir", {"path": "/d"}),
        (R.FileNotFoundError, "unlink", {"path": "/nope"}),
        (R.IsADirectoryError, "unlink", {"path": "/empty"}),
        (R.FileNotFoundError, "rename", {"path": "/nope", "to": "/x"}),
        (R.FileExistsError, "rename", {"path": "/d/f.txt", "to": "/bad.bin"}),
        (R.InvalidPathError, "rename", {"path": "/d", "to": "/d/inside"}),
        (R.InvalidPathError, "rename", {"path": "/d", "to": "/d/"}),
        (R.FileNotFoundError, "move", {"path": "/nope", "to": "/x"}),
        (R.FileExistsError, "move", {"path": "/d/f.txt", "to": "/bad.bin"}),
        (R.InvalidPathError, "move", {"path": "/d", "to": "/d"}),
        (R.FileNotFoundError, "copy", {"path": "/nope", "to": "/x"}),
        (R.FileExistsError, "copy", {"path": "/d/f.txt", "to": "/bad.bin"}),
        (R.IsADirectoryError, "copy", {"path": "/d", "to": "/d2"}),
        (R.FileNotFoundError, "setxattr", {"path": "/nope", "name": "a", "value": 1}),
        (R.FileNotFoundError, "removexattr", {"path": "/nope", "name": "a"}),
    ]
    head = brain.now()["generation"]
    for refusal, door, args in cases:
        with pytest.raises(refusal) as exc:
            brain.call(door, args, caller=ME)
        assert exc.value.name == refusal.name, (door, args)
        if "path" in refusal.required:
            assert exc.value.path, (door, args)
    assert brain.now()["generation"] == head  # a refusal commits nothing
    with pytest.raises(R.FileNotFoundError) as exc:
        brain.writeFile({"path": "/no/parent.txt", "content": "x"}, caller=ME)
    assert exc.value.path == "/no"  # the missing parent is named


def damage(store: Path, words: bytes, after: int, at: int, change) -> None:
    """Change one byte of the first pack: byte ``at`` of the first ``words`` found past offset ``after``."""
    pack = store / "blobs" / B.pack_name(1)
    raw = bytearray(pack.read_bytes())
    where = raw.index(words, after) + at
    raw[where] = change(raw[where])
    pack.write_bytes(bytes(raw))


def test_a_flipped_byte_in_a_chunk_is_blob_corrupt_and_never_served(tmp_path):
    store = new_store(tmp_path)
    brain = Brain.open(store)
    data = b"precious words " * 4000
    answer = write(brain, "/keep/precious.txt", data.decode())
    brain.close()
    damage(store, b"precious words", B.HEADER_SIZE + B.RECORD_HEADER_SIZE, 3, lambda byte: byte ^ 0x01)
    brain = Brain.open(store)
    try:
        for encoding in ("utf-8", "base64"):
            with pytest.raises(R.BlobCorruptError) as exc:
                brain.readFile({"path": "/keep/precious.txt", "encoding": encoding})
            assert exc.value.address == answer["hash"] and exc.value.path == "/keep/precious.txt"
        with pytest.raises(R.BlobCorruptError):
            brain.readdir({"path": "/keep"})
        node = brain.stat({"path": "/keep/precious.txt"})["node"]  # stat opens no blob
        assert node["size"] == len(data)
        assert "content" not in brain.readdir({"path": "/keep", "inline": False})["nodes"][0]
    finally:
        brain.close()


def test_a_large_file_read_whole_is_exact_and_damage_that_breaks_its_text_is_still_blob_corrupt(tmp_path):
    """A whole read joins the file's pieces as they come: the text and the base64 are the whole file's, where
    text stops is named at its offset in the file (in a later chunk too), and a flipped byte that also makes
    the text invalid is damage first: BlobCorruptError, never TextDecodeError, never the bytes."""
    store = new_store(tmp_path)
    brain = Brain.open(store)
    rng = random.Random(5)
    text = "".join(rng.choice(["plain words ", "grüße ", "€ ", "\n"]) for _ in range(60_000))
    data = text.encode()
    answer = write(brain, "/big/words.txt", text)
    assert brain.readFile({"path": "/big/words.txt"})["content"] == text
    assert base64.b64decode(brain.readFile({"path": "/big/words.txt", "encoding": "base64"})["content"]) == data
    stops = len(data) * 2 // 3
    broken = data[:stops] + b"\xff" + data[stops:]
    write(brain, "/big/broken.bin", broken)
    with pytest.raises(R.TextDecodeError) as exc:
        brain.readFile({"path": "/big/broken.bin"})
    assert exc.value.offset == stops
    brain.close()
    damage(
        store, b"plain words", (store / "blobs" / B.pack_name(1)).stat().st_size // 4, 0, lambda byte: byte | 0x80
    )  # no longer UTF-8 there, and no longer the content its address names
    brain = Brain.open(store)
    try:
        for encoding in ("utf-8", "base64"):
            with pytest.raises(R.BlobCorruptError) as corrupt:
                brain.readFile({"path": "/big/words.txt", "encoding": encoding})
            assert corrupt.value.address == answer["hash"]
    finally:
        brain.close()


# -- the rest of the engine sees files ------------------------------------------------------------------


def test_find_reaches_text_files_unless_exclude_vfs(brain):
    write(brain, "/notes/plan.md", "the quarterly zeppelin deadline is friday")
    write(brain, "/notes/raw.bin", rand(3000, 9))
    brain.add({"type": "document", "data": "another zeppelin"}, caller=ME)
    found = brain.find({"query": "zeppelin", "searchMode": "text"})["results"]
    kinds = sorted(r["entity"]["subtype"] or "" for r in found)
    assert kinds == ["", "vfs.file"]
    hit = next(r for r in found if r["entity"]["subtype"] == "vfs.file")
    assert hit["entity"]["metadata"]["path"] == "/notes/plan.md"
    only = brain.find({"query": "zeppelin", "searchMode": "text", "excludeVFS": True})["results"]
    assert [r["entity"]["subtype"] for r in only] == [None]
    by_parent = brain.find({"where": {"parent": "/notes"}, "searchMode": "metadata"})["results"]
    assert {r["entity"]["metadata"]["name"] for r in by_parent} == {"plan.md", "raw.bin"}


def test_time_travel_history_and_the_change_feed_see_files(brain):
    first = write(brain, "/t.md", "version one")
    second = write(brain, "/t.md", "version two")
    brain.appendFile({"path": "/t.md", "content": "!"}, caller=ME)
    brain.rename({"path": "/t.md", "to": "/u.md"}, caller=ME)
    brain.unlink({"path": "/u.md"}, caller=ME)
    old = brain.readFile({"path": "/t.md", "generation": first["generation"]})
    assert old["content"] == "version one" and old["generation"] == first["generation"]
    with pytest.raises(R.FileNotFoundError):
        brain.readFile({"path": "/t.md"})
    history = brain.fileHistory({"path": "/t.md"})
    assert [v["op"] for v in history["versions"]] == ["rename", "append", "write", "write"]
    assert history["versions"][-1]["hash"] == address(b"version one")
    assert all(v["author"] == ME for v in history["versions"])
    assert [v["op"] for v in brain.fileHistory({"path": "/u.md"})["versions"]] == ["unlink", "rename"]
    page = brain.fileHistory({"path": "/t.md", "limit": 3})
    assert page["hasMore"] is True
    rest = brain.fileHistory({"path": "/t.md", "limit": 3, "cursor": page["cursor"]})
    assert [v["generation"] for v in page["versions"] + rest["versions"]] == [
        v["generation"] for v in history["versions"]
    ]
    assert len(brain.history(first["entityId"])["versions"]) == 5
    changes = brain.changes({"since": second["generation"] - 1})
    assert any(
        f.get("id") == first["entityId"] and f["entity"]["metadata"]["path"] == "/u.md" for f in changes["frames"]
    )


def test_lookups_use_the_path_posting_not_the_relations(brain):
    answer = write(brain, "/a/b/c.txt", "found by path")
    directory = brain.stat({"path": "/a/b"})["node"]["entityId"]
    relations = brain.related({"from": directory})["relations"]
    brain.unrelate({"id": relations[0]["id"]}, caller=ME)  # the tree's relation gone, the posting stays
    assert brain.readFile({"path": "/a/b/c.txt"})["content"] == "found by path"
    assert [n["entityId"] for n in brain.readdir({"path": "/a/b"})["nodes"]] == [answer["entityId"]]


def test_files_survive_a_reopen_and_a_flush(tmp_path):
    store = new_store(tmp_path)
    brain = Brain.open(store, flush_bytes=1 << 12)  # flush early: the posting lives in tables too
    for i in range(40):
        write(brain, f"/many/{i:02d}.txt", f"file {i}")
    brain.rename({"path": "/many", "to": "/all"}, caller=ME)
    brain.close()
    brain = Brain.open(store)
    try:
        assert len(brain.readdir({"path": "/all"})["nodes"]) == 40
        assert brain.readFile({"path": "/all/07.txt"})["content"] == "file 7"
        assert brain.exists({"path": "/many/07.txt"}) == {"exists": False}
    finally:
        brain.close()


def test_a_read_only_attach_reads_files_and_writes_nothing(tmp_path):
    store = new_store(tmp_path)
    writer = Brain.open(store)
    write(writer, "/skills/a.md", "a skill")
    write(writer, "/blob.bin", rand(100_000, 3))

    def state() -> dict[str, tuple[int, int]]:
        return {str(p.relative_to(store)): (p.stat().st_size, p.stat().st_mtime_ns) for p in store.rglob("*")}

    before = state()
    reader = Brain.attach(store)
    assert reader.readFile({"path": "/skills/a.md"})["content"] == "a skill"
    assert reader.readFile({"path": "/blob.bin", "encoding": "base64"})["content"] == b64(rand(100_000, 3))
    assert [n["path"] for n in reader.readdir({"path": "/skills"})["nodes"]] == ["/skills/a.md"]
    with pytest.raises(R.BRAINY_WRITER_LOCKED):
        reader.writeFile({"path": "/x.md", "content": "x"}, caller=ME)
    assert state() == before  # nothing claimed, created or written
    write(writer, "/later.md", "after the attach")
    assert reader.exists({"path": "/later.md"}) == {"exists": False}  # frozen at the generation it resolved
    reader.close()
    writer.close()


def test_dedup_measured_on_disk(tmp_path):
    """A 16 MiB file rewritten with 1 KiB changed in the middle stores well under 256 KiB of new chunks."""
    store = new_store(tmp_path)
    brain = Brain.open(store)
    try:
        data = bytearray(rand(16 << 20, 11))
        write(brain, "/big.bin", bytes(data))
        before = disk(store / "blobs")
        middle = len(data) // 2
        data[middle : middle + 1024] = rand(1024, 12)
        answer = write(brain, "/big.bin", bytes(data))
        grown = disk(store / "blobs") - before
        assert answer["hash"] == address(bytes(data))
        assert grown < 256 << 10, grown
        copied = disk(store / "blobs")
        brain.copy({"path": "/big.bin", "to": "/copy.bin"}, caller=ME)
        assert disk(store / "blobs") == copied
    finally:
        brain.close()


def test_the_sweep_collects_refused_writes_and_keeps_every_version_time_travel_reads(tmp_path):
    """A write refused after its content was stored leaves garbage, and the sweep collects it; an overwrite and
    an unlink leave none, because a past generation still reads the old bytes, and the sweep keeps them."""
    store = new_store(tmp_path)
    brain = Brain.open(store)
    try:
        first = write(brain, "/a.bin", rand(300_000, 100))
        write(brain, "/a.bin", rand(300_000, 101))
        gone = write(brain, "/b.bin", rand(200_000, 102))
        brain.unlink({"path": "/b.bin"}, caller=ME)
        with pytest.raises(R.FileExistsError):
            write(brain, "/a.bin", rand(1 << 20, 103), exclusive=True)
        with pytest.raises(R.FileNotFoundError):
            brain.writeFile(
                {"path": "/no/such/dir.bin", "content": b64(rand(1 << 20, 104)), "encoding": "base64"}, caller=ME
            )
        assert 2 << 20 <= brain.blobs.orphaned < (2 << 20) + 10_000
        before = disk(store / "blobs")
        swept = brain.sweep_blobs()
        assert swept is not None and swept.packs == 1 and brain.swept == swept
        assert (2 << 20) <= before - disk(store / "blobs") < (2 << 20) + 300_000
        assert brain.blobs.unreferenced(vfs.addresses(brain.at())) == (0, 0)
        assert brain.blobs.orphaned == 0
        for reader in (brain, None):
            if reader is None:  # and after a reopen
                brain.close()
                brain = reader = Brain.open(store)
            assert base64.b64decode(reader.readFile({"path": "/a.bin", "encoding": "base64"})["content"]) == rand(
                300_000, 101
            )
            old = reader.readFile({"path": "/a.bin", "encoding": "base64", "generation": first["generation"]})
            assert base64.b64decode(old["content"]) == rand(300_000, 100)
            was = reader.readFile({"path": "/b.bin", "encoding": "base64", "generation": gone["generation"]})
            assert base64.b64decode(was["content"]) == rand(200_000, 102)
            for version in reader.fileHistory({"path": "/a.bin"})["versions"]:
                assert reader.blobs.read_all(version["hash"])
    finally:
        brain.close()


def test_a_notes_stored_path_follows_a_rename_or_move_of_its_file(brain):
    """memory.write keeps the file's path on its note; renaming the file, then moving the directory above it,
    moves the note's path in the same commit, so memory.read by the new path finds it (and the old path does
    not). The note's id, text and file link stay."""
    note = brain.call(
        "memory.write", {"path": "/notes/tea.md", "content": "Alice drinks green tea", "summary": "tea"}, caller=ME
    )
    renamed = brain.rename({"path": "/notes/tea.md", "to": "/notes/green-tea.md"}, caller=ME)
    read = brain.call("memory.read", {"path": "/notes/green-tea.md"})["memory"]
    assert (read["id"], read["path"], read["text"], read["generation"]) == (
        note["id"],
        "/notes/green-tea.md",
        "tea",
        renamed["generation"],
    )
    with pytest.raises(R.RecordNotFoundError):
        brain.call("memory.read", {"path": "/notes/tea.md"})
    brain.mkdir({"path": "/archive"}, caller=ME)
    brain.move({"path": "/notes", "to": "/archive"}, caller=ME)  # the directory, into another
    read = brain.call("memory.read", {"path": "/archive/notes/green-tea.md"})["memory"]
    assert read["id"] == note["id"] and read["path"] == "/archive/notes/green-tea.md"
    assert brain.readFile({"path": "/archive/notes/green-tea.md"})["content"] == "Alice drinks green tea"
    links = brain.call(
        "related", {"from": note["id"], "type": "references", "subtype": "memory.file", "visibility": "all"}
    )["relations"]
    assert [r["to"] for r in links] == [note["entityId"]]
    plain = write(brain, "/plain.txt", "no note here")  # a file without a note moves as before
    assert brain.rename({"path": "/plain.txt", "to": "/still-plain.txt"}, caller=ME)["path"] == "/still-plain.txt"
    assert brain.stat({"path": "/still-plain.txt"})["node"]["entityId"] == plain["entityId"]


# -- a crash during large writes --------------------------------------------------------------------------


@pytest.mark.slow
def test_sigkill_during_large_writes_loses_nothing_acknowledged(tmp_path):
    """A writer process writes multi-MiB files and prints each answer; SIGKILL lands at a random moment, five
    times. On reopen every acknowledged write reads back byte for byte, and every file row names content
    whose every chunk is present and verifies: a crash leaves only unreferenced chunks. The reopen sweeps
    them (docs/store-format.md, "The sweep"), and everything acknowledged still reads, then and after another
    reopen."""
    store = new_store(tmp_path)
    acknowledged: dict[str, tuple[str, int]] = {}
    for round_ in range(5):
        proc = subprocess.Popen(
            [sys.executable, str(PROCS / "vfs_writer.py"), str(store), str(round_)], stdout=subprocess.PIPE, text=True
        )
        deadline = time.monotonic() + 60
        lines = 0
        while lines < 2 and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line.endswith("\n"):
                break
            path, hash_, seed = line.split()
            acknowledged[path] = (hash_, int(seed))
            lines += 1
        time.sleep(random.Random(round_).uniform(0, 0.2))
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        for line in proc.stdout:
            fields = line.split()
            if len(fields) == 3 and line.endswith("\n"):
                acknowledged[fields[0]] = (fields[1], int(fields[2]))
        proc.stdout.close()
        assert lines >= 2
    brain = Brain.open(store)
    try:
        for path, (hash_, seed) in acknowledged.items():
            read = brain.readFile({"path": path, "encoding": "base64"})
            assert read["hash"] == hash_ and base64.b64decode(read["content"]) == vfs_writer_content(seed)
        files = [r for r in brain.at().entities() if r.get("subtype") == "vfs.file"]
        assert len(files) >= len(acknowledged)
        for row in files:
            assert brain.blobs.read_all(row["metadata"]["hash"], row["metadata"]["path"])
        # the open after a crash sweeps on its own; then every pack with any garbage is rewritten
        deadline = time.monotonic() + 60
        while brain.swept is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert brain.swept is not None
        brain.sweep_blobs(garbage_share=1e-9)
        assert brain.blobs.unreferenced(vfs.addresses(brain.at())) == (0, 0)
        brain.close()
        brain = Brain.open(store)
        for path, (hash_, seed) in acknowledged.items():
            read = brain.readFile({"path": path, "encoding": "base64"})
            assert read["hash"] == hash_ and base64.b64decode(read["content"]) == vfs_writer_content(seed)
    finally:
        brain.close()


def vfs_writer_content(seed: int) -> bytes:
    rng = random.Random(seed)
    return rng.randbytes(rng.choice((1 << 20, 3 << 20, 6 << 20)))
