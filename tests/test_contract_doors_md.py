"""api-contract.json is a faithful transcription of the door catalogue, DOORS.md.

This reads the catalogue's own tables (sections 5-10) and signatures, independently of the
contract, and checks every door's name, kind, access, HTTP binding, when line, signature and
refusal column against it, plus the counts of section 12.1. The catalogue lives in
``../shared/DOORS.md`` beside the repository; without it these tests skip.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from brainy.contract import doors as D

DOORS_MD = Path(__file__).resolve().parent.parent.parent / "shared" / "DOORS.md"
pytestmark = pytest.mark.skipif(not DOORS_MD.exists(), reason="the door catalogue ../shared/DOORS.md is not here")

P = D.BRAIN_PREFIX


def _cells(line: str) -> list[str]:
    """Split one Markdown table row on | outside backticks, honouring \\|."""
    cells, cur, tick = [], [], False
    body = line.strip()[1:-1]
    i = 0
    while i < len(body):
        ch = body[i]
        if ch == "\\" and body[i + 1 : i + 2] == "|":
            cur.append("|")
            i += 2
            continue
        if ch == "`":
            tick = not tick
        if ch == "|" and not tick:
            cells.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
        i += 1
    cells.append("".join(cur).strip())
    return cells


def _tables(text: str) -> list[tuple[list[str], list[dict[str, str]]]]:
    """Every table whose first header cell starts with "door" or "method": (header, rows)."""
    lines = text.splitlines()
    out = []
    i = 0
    while i < len(lines):
        if lines[i].startswith("|") and i + 1 < len(lines) and re.fullmatch(r"\|[-| ]+\|", lines[i + 1].strip()):
            header = [h.lower() for h in _cells(lines[i])]
            rows = []
            j = i + 2
            while j < len(lines) and lines[j].startswith("|"):
                rows.append(dict(zip(header, _cells(lines[j]), strict=False)))
                j += 1
            if header[0].startswith(("door", "method")):
                out.append((header, rows))
            i = j
        else:
            i += 1
    return out


@pytest.fixture(scope="module")
def catalogue():
    """The catalogue's door rows by name, its server rows, its signatures and its text."""
    text = DOORS_MD.read_text("utf-8")
    rows, server = {}, []
    for header, table in _tables(text):
        for row in table:
            if header[0].startswith("method"):
                server.append(row)
            else:
                name = row[header[0]].strip("`")
                assert name not in rows, f"{name} appears in two tables"
                rows[name] = row
    signatures = {
        m.group(1): re.sub(r"\s*\n\s*", " ", m.group(2)).strip()
        for m in re.finditer(r"\*\*([\w.]+)\*\* — `([^`]+)`", text)
    }
    find = re.search(r"^`(find\([^`]+)` — `POST P/find`", text, re.M)
    assert find is not None
    signatures["find"] = find.group(1)
    return {"rows": rows, "server": server, "signatures": signatures, "text": text}


def _binding(cell: str) -> tuple[str, str]:
    method, path = cell.strip("`").split(" ", 1)
    return method, (P + path[1:] if path.startswith("P/") else path)


def _refusal_cell(row: dict[str, str]) -> str:
    return next(v for k, v in row.items() if k.startswith("refusals"))


def _find_refusals(text: str) -> list[str]:
    paragraph = text[text.index("Refusals (+C): `IndexNotAttachedError`") :]
    paragraph = re.sub(r"\([^()]*\)", "", paragraph[: paragraph.index("\n\n")])
    return re.findall(r"`(\w+)`", paragraph)


def _added(cell: str, catalogue: dict) -> list[str]:
    """The names a refusal column adds: parentheticals are notes, "—" is none, references are spelled out."""
    if cell.startswith("—"):
        return []
    if cell == "see 4.4":
        return _find_refusals(catalogue["text"])
    body = cell
    while re.search(r"\([^()]*\)", body):
        body = re.sub(r"\([^()]*\)", "", body)
    names = re.findall(r"`(\w+)`", body.replace("vfs `writeFile` refusals", ""))
    if "vfs `writeFile` refusals" in body:
        names += _added(_refusal_cell(catalogue["rows"]["writeFile"]), catalogue)
    return list(dict.fromkeys(names))


def test_the_catalogue_and_the_contract_list_the_same_doors(catalogue):
    """Every door in DOORS.md's tables is in the contract, and every contract door is in those tables."""
    assert set(catalogue["rows"]) == set(D.BY_NAME)
    assert len(catalogue["rows"]) == 109


def test_counts_table_agrees(catalogue):
    """DOORS.md 12.1's totals are what the tables hold: 109 contract doors, 9 server doors, 89 refusals."""
    text = catalogue["text"]
    assert "| **contract doors** | **109** |" in text
    assert "| server's own doors | 9 |" in text
    assert len(catalogue["server"]) == len(D.SERVER_DOORS) == 9
    assert "There are 89 refusal classes" in text
    section_11 = text[text.index("## 11. Refusal classes") : text.index("## 12.")]
    classes = [m.group(1) for m in re.finditer(r"^\| `(\w+)` \|", section_11, re.M)]
    added = ("MalformedRequestError", "HeaderTooLargeError")  # api-contract.md: beyond the catalogue
    assert classes == [r["name"] for r in D.CONTRACT.refusals if r["name"] not in added]


def test_kind_access_and_http_agree(catalogue):
    """Each door's kind, access and HTTP binding are its table row's (host doors are all service, 10.3)."""
    for name, row in catalogue["rows"].items():
        door = D.BY_NAME[name]
        assert door.kind == row["kind"], name
        access = row.get("access", "service").split()[0]
        assert door.access == access, name
        assert (door.method, door.path) == _binding(row["http"]), name


def test_when_lines_are_verbatim(catalogue):
    """Each door's `when` is its table's "when to reach for it" cell, word for word."""
    for name, row in catalogue["rows"].items():
        assert D.BY_NAME[name].when == row["when to reach for it"], name


def test_signatures_are_verbatim(catalogue):
    """Each door's signature is the catalogue's, with wrapped lines joined by one space."""
    for name in catalogue["rows"]:
        assert D.BY_NAME[name].signature == catalogue["signatures"][name], name


def test_refusal_columns_agree(catalogue):
    """Each door's own refusals are exactly the names its table's refusal column adds."""
    for name, row in catalogue["rows"].items():
        door = D.BY_NAME[name]
        if door.disposition == "inProcessOnly":
            assert door.refusals == ("InProcessOnlyError",)
            assert door.instead == row["`instead`"].strip('"'), name
        else:
            assert list(door.refusals) == _added(_refusal_cell(row), catalogue), name


def test_server_doors_agree(catalogue):
    """The server doors are 10.2's rows: same method and path, same when line, in the same order."""
    for sdoor, row in zip(D.SERVER_DOORS, catalogue["server"], strict=True):
        method, path = re.match(r"`(GET|POST) (\S+)`", row["method and path"]).groups()
        assert (sdoor.method, sdoor.path) == (method, P + path[1:] if path.startswith("P/") else path)
        assert sdoor.when == row["when to reach for it"]
