"""The everyday commands: ``get``, ``find``, ``call``, ``health``, ``export``, ``import``, ``backup``, ``restore``,
``doctor`` — against a server (``--url``/``--key`` or ``$BRAINY_URL``/``$BRAINY_KEY``; ``--brain`` left out when
the key reaches one brain) or a local store (``--store PATH``: a read attaches it read-only, a write claims the
writer lease).

Answers go to stdout as JSON (``--table``: a table a person reads); a refusal goes to stderr as its name and
message with exit status 2, a transport failure with 1. ``export`` writes JSON lines (docs/client.md, "Export and
import"); ``import`` reads them back, or CSV, restartably (``--resume``), with a progress line on a terminal.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import shutil
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

import orjson

from brainy import errors
from brainy.client import Client
from brainy.contract import doors as D

EXPORT_FORMAT = "brainy-export"
EXPORT_VERSION = 1
#: what a store sets for itself when a row is written: left out of an export, so an import reproduces the rest
ASSIGNED = frozenset({"generation", "createdAt", "updatedAt", "denseInt", "createdBy", "updatedBy", "hasVector"})
PAGE = 1000
LONG_CATCH_UP = 100_000  # generations an open's catch-up may take before doctor calls it something to act on
IMPORT_BATCH_BYTES = 4 << 20
COMMANDS = ("get", "find", "call", "health", "export", "import", "backup", "restore", "doctor")


def add_commands(sub: Any) -> None:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--url", help="the server (default $BRAINY_URL, else http://127.0.0.1:8300)")
    common.add_argument("--key", help="the key (default $BRAINY_KEY)")
    common.add_argument("--brain", help="the brain (left out: the one brain the key reaches)")
    common.add_argument("--store", metavar="PATH", help="a local store instead of a server")
    common.add_argument("--table", action="store_true", help="a readable table instead of JSON")
    common.add_argument("--timeout", type=float, default=30.0, help="seconds a call may take (default 30)")
    p = sub.add_parser("get", parents=[common], help="one entity by id or natural key")
    p.add_argument("id")
    p = sub.add_parser("find", parents=[common], help="a find, its arguments as JSON")
    p.add_argument("query", help='e.g. \'{"query": "tea", "limit": 5}\'')
    p = sub.add_parser("call", parents=[common], help="any door by its contract name")
    p.add_argument("door")
    p.add_argument("args", nargs="?", default="{}", help="the argument document as JSON")
    p.add_argument("--id", help="the door's path id (get, history, generation, ...)")
    sub.add_parser("health", parents=[common], help="the server's health, and the brain's when --brain names one")
    p = sub.add_parser("export", parents=[common], help="every entity, relation and file, as JSON lines")
    p.add_argument("--out", help="the file (default stdout)")
    p = sub.add_parser("import", parents=[common], help="JSON lines from export, or CSV")
    p.add_argument("file")
    p.add_argument("--resume", action="store_true", help="continue an interrupted import where it stopped")
    p.add_argument("--type", help="the type of CSV rows (required for CSV)")
    p = sub.add_parser("backup", parents=[common], help="a snapshot: a directory (--store) or a named ceremony")
    p.add_argument("dest")
    p = sub.add_parser("restore", parents=[common], help="a store from a backup directory (--store: the new store)")
    p.add_argument("src")
    p = sub.add_parser("doctor", help="what a store needs, in words; non-zero when something needs acting on")
    p.add_argument("path")


# -- where the doors go ---------------------------------------------------------------------------


class Target:
    """The brain the command works on: a server's (through :class:`brainy.client.Client`) or a local store's
    (an attach for reads, the writer for writes)."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.client: Client | None = None
        self._reader: Any = None
        self._writer: Any = None
        self.name = args.brain
        if args.store is None:
            # JSON answers: a vector comes as the shortest decimals of its float32s, as an export line holds it
            self.client = Client(args.url, args.key, timeout=args.timeout, json=True)
            if self.name is None:
                reached = [b["name"] for b in self.client.brains()]
                if len(reached) != 1:
                    raise errors.InvalidArgumentError(
                        f"--brain: the key reaches {len(reached)} brains ({', '.join(reached) or 'none'}); name one",
                        field="--brain",
                        reason="missing",
                    )
                self.name = reached[0]

    def call(self, door: str, *positional: Any, **options: Any) -> Any:
        if self.client is not None:
            if door.startswith("host."):
                return self.client.call(door, *((self.name,) if _takes_brain(door) else ()), *positional, **options)
            return self.client.brain(self.name).call(door, *positional, **options)
        return self.local(D.BY_NAME[door].kind == "write" if door in D.BY_NAME else False).call(
            door, *positional, **options
        )

    def local(self, write: bool) -> Any:
        from brainy.engine import Brain

        if write:
            if self._writer is None:
                if self._reader is not None:
                    self._reader.close()
                    self._reader = None
                self._writer = Brain.open(self.args.store)
            return self._writer
        if self._writer is not None:
            return self._writer
        if self._reader is None:
            self._reader = Brain.attach(self.args.store)
        return self._reader

    def close(self) -> None:
        for held in (self._reader, self._writer):
            if held is not None:
                held.close()
        if self.client is not None:
            self.client.close()


def _takes_brain(door: str) -> bool:
    return any(p.name == "brain" for p in D.BY_NAME[door].path_params)


# -- output -----------------------------------------------------------------------------------------


def emit(answer: Any, table: bool, out: TextIO | None = None) -> None:
    out = out or sys.stdout
    if not table:
        out.write(orjson.dumps(answer, option=orjson.OPT_INDENT_2).decode() + "\n")
        return
    rows = _rows(answer)
    if rows is None:
        for key, value in answer.items() if isinstance(answer, dict) else [("answer", answer)]:
            out.write(f"{key:<20} {_cell(value)}\n")
        return
    columns = [c for c in ("id", "type", "subtype", "score", "data", "metadata") if any(c in r for r in rows)]
    columns = columns or sorted({k for r in rows for k in r})[:6]
    widths = {c: min(40, max([len(c)] + [len(_cell(r.get(c))) for r in rows])) for c in columns}
    out.write("  ".join(c.ljust(widths[c]) for c in columns) + "\n")
    for r in rows:
        out.write("  ".join(_cell(r.get(c))[: widths[c]].ljust(widths[c]) for c in columns) + "\n")


def _rows(answer: Any) -> list[dict[str, Any]] | None:
    if isinstance(answer, dict):
        for key in ("results", "entities", "versions", "frames", "relations", "nodes"):
            value = answer.get(key)
            if isinstance(value, list) and all(isinstance(v, dict) for v in value):
                return [v.get("entity", v) if key == "results" and "entity" in v else v for v in value]
        if isinstance(answer.get("entity"), dict):
            return [answer["entity"]]
    return None


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value.replace("\n", " ")
    return orjson.dumps(value).decode()


class Progress:
    """One line on stderr, redrawn at most four times a second, when stderr is a terminal: rows, bytes, rate and,
    with ``total`` bytes known, the time left. Piped, it says nothing."""

    def __init__(self, what: str, total: int | None = None, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stderr
        self.on = self.stream.isatty()
        self.what, self.total = what, total
        self.rows = self.bytes = 0
        self.started = self._drawn = time.monotonic()

    def step(self, rows: int, nbytes: int) -> None:
        self.rows += rows
        self.bytes += nbytes
        now = time.monotonic()
        if self.on and now - self._drawn >= 0.25:
            self._drawn = now
            self._draw(now)

    def _draw(self, now: float) -> None:
        took = max(now - self.started, 1e-6)
        line = f"{self.what}: {self.rows:,} rows, {self.bytes / 1e6:,.1f} MB, {self.rows / took:,.0f} rows/s"
        if self.total:
            left = (self.total - self.bytes) / max(self.bytes / took, 1.0)
            line += f", {100 * self.bytes / self.total:.0f}%, {left:,.0f} s left"
        self.stream.write("\r" + line + "\x1b[K")
        self.stream.flush()

    def done(self) -> None:
        if self.on:
            self._draw(time.monotonic())
            self.stream.write("\n")


# -- export and import ----------------------------------------------------------------------------------


def portable(row: dict[str, Any], relation: bool) -> dict[str, Any]:
    """A row as an export line holds it: what an import reproduces (not what the store assigns at the write)."""
    out = {k: v for k, v in row.items() if k not in ASSIGNED and v is not None}
    if relation:
        out.pop("id", None)  # an import mints a relation's id; its identity is (from, to, type, subtype)
    return out


def export_lines(target: Target, progress: Progress) -> Iterator[dict[str, Any]]:
    """Every line of one brain's export, at the generation its first page pinned."""
    cursor, generation, relations = None, None, []
    while True:
        page = target.call("export", {"includeVectors": True, "limit": PAGE, **({"cursor": cursor} if cursor else {})})
        if generation is None:
            generation = page["generation"]
            # nothing of the store it came from: an export of an import of it is the same bytes
            yield {"format": EXPORT_FORMAT, "version": EXPORT_VERSION}
        for entity in page["entities"]:
            if not str(entity.get("subtype") or "").startswith("vfs."):  # files come as files, below
                yield {"entity": portable(entity, False)}
        relations += [portable(r, True) for r in page["relations"] if r.get("subtype") != "vfs"]
        progress.step(len(page["entities"]) + len(page["relations"]), 0)
        if not page["hasMore"]:
            break
        cursor = page["cursor"]
    relations.sort(key=lambda r: (r["from"], r["to"], r["type"], r.get("subtype") or ""))  # stable across stores
    for relation in relations:
        yield {"relation": relation}
    listing = target.call("asOf", {"generation": generation, "read": {"door": "readdir", "args": {"inline": False}}})
    for node in listing["result"]["nodes"]:
        if node["type"] == "directory":
            yield {"directory": {"path": node["path"]}}
            continue
        read = target.call("readFile", {"path": node["path"], "encoding": "base64", "generation": generation})
        line: dict[str, Any] = {"path": node["path"], "content": read["content"]}
        if node.get("contentType"):
            line["contentType"] = node["contentType"]
        progress.step(1, node.get("size", 0))
        yield {"file": line}


def run_export(target: Target, out: str | None) -> int:
    progress = Progress("export")
    stream: Any = open(out, "wb") if out else sys.stdout.buffer  # noqa: SIM115  (closed below)
    try:
        for line in export_lines(target, progress):
            stream.write(orjson.dumps(line, option=orjson.OPT_SORT_KEYS) + b"\n")
    finally:
        if out:
            stream.close()
        else:
            stream.flush()
    progress.done()
    return 0


def run_import(target: Target, file: str, resume: bool, csv_type: str | None) -> int:
    path = Path(file)
    state = path.with_name(path.name + ".import-state")
    start = 0
    if resume and state.exists():
        start = int(json.loads(state.read_text())["offset"])
    elif state.exists():
        raise errors.InvalidArgumentError(
            f"{state} says an import of {file} stopped part way: --resume continues it",
            field="--resume",
            reason="missing",
        )
    progress = Progress("import", total=path.stat().st_size)
    progress.bytes = start
    if path.suffix.lower() == ".csv":
        _import_csv(target, path, start, state, csv_type, progress)
    else:
        _import_lines(target, path, start, state, resume, progress)
    state.unlink(missing_ok=True)
    progress.done()
    return 0


def _import_lines(target: Target, path: Path, start: int, state: Path, resume: bool, progress: Progress) -> None:
    on_conflict = "skip" if resume else "refuse"  # a resumed batch may have committed before its state was kept
    batch: dict[str, list[Any]] = {"entities": [], "relations": []}
    files: list[dict[str, Any]] = []
    held, offset = 0, start

    def flush(at: int) -> None:
        nonlocal held
        rows = len(batch["entities"]) + len(batch["relations"])
        if rows:
            target.call(
                "import", {"format": "brainy", "content": {"format": "brainy", **batch}, "onConflict": on_conflict}
            )
        for f in files:
            target.call(
                "writeFile",
                {
                    "path": f["path"],
                    "content": f["content"],
                    "encoding": "base64",
                    "createParents": True,
                    **({"contentType": f["contentType"]} if "contentType" in f else {}),
                },
            )
        progress.step(rows + len(files), at - offset_done[0])
        offset_done[0] = at
        state.write_text(json.dumps({"offset": at}))
        batch["entities"], batch["relations"], files[:] = [], [], []
        held = 0

    offset_done = [start]
    with open(path, "rb") as f:
        f.seek(start)
        for raw in f:
            offset += len(raw)
            if not raw.strip():
                continue
            try:
                line = orjson.loads(raw)
            except orjson.JSONDecodeError as exc:
                raise errors.InvalidArgumentError(
                    f"{path}: the line at byte {offset - len(raw)} is not JSON ({exc.msg})",
                    field="file",
                    reason="malformed",
                ) from None
            if "format" in line:
                if line.get("format") != EXPORT_FORMAT:
                    raise errors.InvalidArgumentError(f"{path}: not a brainy export", field="file", reason="wrong-type")
                continue
            if "entity" in line:
                batch["entities"].append(line["entity"])
            elif "relation" in line:
                batch["relations"].append(line["relation"])
            elif "file" in line:
                files.append(line["file"])
            elif "directory" in line:
                _mkdir(target, line["directory"]["path"])
            held += len(raw)
            if held >= IMPORT_BATCH_BYTES or len(batch["entities"]) + len(batch["relations"]) >= PAGE:
                flush(offset)
        flush(offset)


def _mkdir(target: Target, path: str) -> None:
    if path == "/":
        return
    try:
        target.call("mkdir", {"path": path, "parents": True})
    except errors.FileExistsError:
        pass


def _import_csv(target: Target, path: Path, start: int, state: Path, csv_type: str | None, progress: Progress) -> None:
    if not csv_type:
        raise errors.InvalidArgumentError("--type: CSV rows need a type", field="--type", reason="missing")
    with open(path, "rb") as f:
        header = f.readline()
        start = max(start, len(header))
        f.seek(start)
        offset, chunk = start, []
        for raw in f:
            chunk.append(raw)
            offset += len(raw)
            if len(chunk) >= PAGE:
                _csv_chunk(target, header, chunk, csv_type, offset, state, progress)
                chunk = []
        if chunk:
            _csv_chunk(target, header, chunk, csv_type, offset, state, progress)


def _csv_chunk(
    target: Target, header: bytes, chunk: list[bytes], kind: str, at: int, state: Path, progress: Progress
) -> None:
    text = (header + b"".join(chunk)).decode("utf-8")
    list(csv.reader(io.StringIO(text)))  # a malformed chunk fails here, before anything is sent
    target.call("import", {"format": "csv", "content": text, "type": kind, "onConflict": "skip"})
    progress.step(len(chunk), sum(len(c) for c in chunk))
    state.write_text(json.dumps({"offset": at}))


# -- backup, restore, doctor --------------------------------------------------------------------------


def run_backup(target: Target, dest: str) -> int:
    if target.client is None:
        folder = Path(dest)
        if folder.exists() and any(folder.iterdir()):
            raise errors.InvalidArgumentError(f"{dest}: not empty; nothing was written", field="dest", reason="exists")
        folder.mkdir(parents=True, exist_ok=True)
        brain = target.local(write=False)
        with brain.hold_files() as files:
            files.copy_to(folder)
        emit({"backup": dest, "generation": files.generation}, target.args.table)
        return 0
    started = target.call("host.persist", name=dest)
    deadline = time.monotonic() + 3600
    status = started
    while status.get("state") not in ("done", "failed") and time.monotonic() < deadline:
        time.sleep(0.5)
        status = target.call("host.persistStatus", name=dest)
    emit(status, target.args.table)
    return 0 if status.get("state") == "done" else 1


def run_restore(args: argparse.Namespace) -> int:
    if args.store is None:
        raise errors.InvalidArgumentError(
            "--store: restore makes a local store from a backup directory (a server's are restored on its host)",
            field="--store",
            reason="missing",
        )
    src, dest = Path(args.src), Path(args.store)
    if dest.exists() and any(dest.iterdir()):
        raise errors.InvalidArgumentError(
            f"--store {dest}: not empty; nothing was written", field="--store", reason="exists"
        )
    shutil.copytree(src, dest, dirs_exist_ok=True)
    from brainy.engine import Brain

    with Brain.open(dest) as brain:
        checked = brain.verify()
        emit({"restored": str(dest), "generation": brain.head, **checked}, args.table)
    return 0


def run_doctor(path: str) -> int:
    """The store's state in words: the lease, the log, each projection, the horizons; exit 1 when something needs
    acting on."""
    from brainy.doors import mechanics
    from brainy.engine import Brain

    brain = Brain.attach(path)
    advice: list[str] = []
    try:
        found = mechanics.diagnostics(brain, deep=True)
        lines = [f"brain {found['brain']} at generation {found['generation']} (brainy {found['version']})"]
        lease = found["lease"]
        holder = getattr(brain.claim, "holder", None) if brain.claim else None
        lines.append(f"lease: {holder or 'no writer holds it' if lease.get('role') == 'reader' else lease}")
        log = found["log"]
        lines.append(
            f"log: {log['segments']} segment(s), {log['bytes']:,} bytes, generations {log['oldestRetained']} on"
        )
        for p in found["projections"]:
            lines.append(
                f"projection {p['name']}: its snapshot stands at {p['stamp']}; an open catches up {p['behind']}"
            )
            if p["behind"] > LONG_CATCH_UP:
                advice.append(
                    f"{p['name']}: an open catches up {p['behind']:,} generations; run the repair door (brainy call "
                    f"repair) on its writer so the next open does not"
                )
        h = found["horizons"]
        lines.append(f"horizons: history from generation {h['historyFrom']}, the feed from since={h['feedFrom']}")
        for problem in found["problems"]:
            advice.append(f"{problem['code']}: {problem['detail']}")
    except errors.Refusal as refusal:
        lines = [f"the store refused: {refusal.name}: {refusal.message}"]
        advice.append("restore it from a backup (brainy restore), or ask for help with the diagnostics above")
    finally:
        brain.close()
    for line in lines:
        print(line)
    for line in advice:
        print(f"needs acting on: {line}")
    if not advice:
        print("nothing needs acting on")
    return 1 if advice else 0


# -- the command --------------------------------------------------------------------------------------


def run(args: argparse.Namespace) -> int:
    """One chore; refusals and transport failures become their exit statuses."""
    try:
        if args.command == "doctor":
            return run_doctor(args.path)
        if args.command == "restore":
            return run_restore(args)
        target = Target(args)
        try:
            if args.command == "get":
                emit(target.call("get", args.id), args.table)
            elif args.command == "find":
                emit(target.call("find", _json(args.query)), args.table)
            elif args.command == "call":
                positional = (args.id,) if args.id is not None else ()
                emit(target.call(args.door, *positional, _json(args.args)), args.table)
            elif args.command == "health":
                answer = target.client.health() if target.client is not None else {}
                if args.brain or target.client is None:
                    answer = {"server": answer} if answer else {}
                    answer["brain"] = target.call("now")
                emit(answer, args.table)
            elif args.command == "export":
                return run_export(target, args.out)
            elif args.command == "import":
                return run_import(target, args.file, args.resume, args.type)
            elif args.command == "backup":
                return run_backup(target, args.dest)
            return 0
        finally:
            target.close()
    except errors.TransportError as failed:
        print(f"brainy: {failed}", file=sys.stderr)
        return 1
    except OSError as failed:  # a file the command reads or writes
        print(f"brainy {args.command}: {failed}", file=sys.stderr)
        return 1
    except errors.Refusal as refusal:
        print(f"brainy: {refusal.name}: {refusal.message}", file=sys.stderr)
        return 2


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as exc:
        raise errors.InvalidArgumentError(f"not JSON: {exc}", field="args", reason="malformed") from None
