"""The ``import`` door (DOORS 5.2): rows from an export page, JSON lines or CSV, in one commit.

The content is read into rows first, each with the line it came from (a JSON-lines line, a CSV
record's line, an export page's index); content that does not parse is ``ImportFormatError {line,
reason}`` before any row is staged. Each row then runs the rule of the door it is (``add`` for an
entity, ``relate`` for a relation), on one transaction, under a savepoint: a refused row refuses the
whole import as ``TransactionAbortedError {index, error}`` naming its line, and nothing is
committed, unless ``continueOnError``, when it is listed in ``failed`` and the rest go on.

``onConflict`` is about entities, whose ids a caller names: ``refuse`` (an existing id is
``EntityExistsError``), ``replace`` (the row is written over it) or ``skip`` (counted in
``skipped``). A relation is its endpoints, type and subtype, and ``relate`` already writes over the
relation with that identity.

Rows are staged in batches of :data:`BATCH`; an import longer than one batch narrates each batch on
the server's log, so an operator watching a long import sees it move. The texts the rows store are
embedded before the commit lock is taken, as every write's are (``brainy.doors.writes.texts``).

Mapping (``mapping: {id?, type?, data?, metadata?: [...]}``) names the field (JSON lines) or column
(CSV) each part comes from. Without one, a JSON-lines object is an entity document (or a relation
when it has ``from`` and ``to``), and a CSV record's ``id``, ``type`` and ``data`` columns are those
parts and every other column is metadata. CSV needs a type: ``type`` or ``mapping.type``.
"""

from __future__ import annotations

import base64
import binascii
import csv
import io
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from brainy.contract import refusals as R
from brainy.contract.limits import json_loads
from brainy.doors.registry import WRITE, door
from brainy.doors.writes import TX_DOORS, Context, _nested, texts
from brainy.store import keys as K
from brainy.store.txn import Txn

log = logging.getLogger("brainy.engine")

BATCH = 1_000
ENTITY_FIELDS = ("id", "type", "subtype", "service", "data", "metadata", "visibility", "confidence", "weight", "vector")
RELATION_FIELDS = ("from", "to", "type", "subtype", "service", "data", "metadata", "visibility", "confidence", "weight")


@dataclass(frozen=True)
class Row:
    line: int  # where the row came from: 1-based for text, the page index for an export page
    door: str  # "add" or "relate"
    args: dict[str, Any]


def _format_error(reason: str, line: int | None = None) -> R.Refusal:
    where = f"line {line}: " if line is not None else ""
    fields: dict[str, Any] = {"reason": reason}
    if line is not None:
        fields["line"] = line
    return R.ImportFormatError(f"the import does not parse: {where}{reason}", **fields)


def _text(a: dict[str, Any]) -> str:
    content = a["content"]
    if not isinstance(content, str):
        raise _format_error(f"{a['format']} content is text, not {type(content).__name__}")
    if a.get("encoding") == "base64":
        try:
            raw = base64.b64decode(content, validate=True)
        except (binascii.Error, ValueError):
            raise _format_error("content is not base64") from None
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise _format_error("the decoded content is not UTF-8") from None
    return content


def _pick(source: dict[str, Any], names: tuple[str, ...]) -> dict[str, Any]:
    return {name: source[name] for name in names if name in source and source[name] is not None}


def _entity(fields: dict[str, Any], a: dict[str, Any]) -> dict[str, Any]:
    args = _pick(fields, ENTITY_FIELDS)
    if "key" in fields and fields["key"] is not None:  # an exported natural key: its id is derived from it
        args["id"] = fields["key"]
    if "type" not in args and a.get("type") is not None:
        args["type"] = a["type"]
    return args


def _mapped(record: dict[str, Any], mapping: dict[str, Any], a: dict[str, Any], every_other: bool) -> dict[str, Any]:
    """An entity's add arguments from one record (a JSON object or a CSV row) through ``mapping``."""
    id_field, type_field = mapping.get("id", "id"), mapping.get("type", "type")
    data_field = mapping.get("data", "data")
    args: dict[str, Any] = {}
    if record.get(id_field) not in (None, ""):
        args["id"] = record[id_field]
    kind = record.get(type_field) if record.get(type_field) not in (None, "") else a.get("type")
    if kind is not None:
        args["type"] = kind
    if data_field in record:
        args["data"] = record[data_field]
    named = mapping.get("metadata")
    if named is None and every_other:
        named = [c for c in record if c not in (id_field, type_field, data_field)]
    if named:
        args["metadata"] = {field: record[field] for field in named if field in record}
    return args


def _page(a: dict[str, Any]) -> Iterator[Row]:
    page = a["content"]
    if isinstance(page, str):
        try:
            page = json_loads(_text(a))
        except ValueError as exc:
            raise _format_error(f"an export page is a JSON object: {exc}") from None
    if (
        not isinstance(page, dict)
        or not isinstance(page.get("entities", []), list)
        or not isinstance(page.get("relations", []), list)
    ):
        raise _format_error("an export page is {entities: [...], relations: [...]}")
    index = 0
    for entity in page.get("entities", []):
        if not isinstance(entity, dict):
            raise _format_error("an entity is an object", index)
        yield Row(index, "add", _entity(entity, a))
        index += 1
    for relation in page.get("relations", []):
        if not isinstance(relation, dict):
            raise _format_error("a relation is an object", index)
        yield Row(index, "relate", _pick(relation, RELATION_FIELDS))
        index += 1


def _jsonl(a: dict[str, Any]) -> Iterator[Row]:
    mapping = a.get("mapping")
    for number, line in enumerate(_text(a).split("\n"), start=1):
        if not line.strip():
            continue
        try:
            record = json_loads(line)
        except ValueError as exc:
            raise _format_error(f"not JSON: {exc}", number) from None
        if not isinstance(record, dict):
            raise _format_error("each line is one JSON object", number)
        if mapping is not None:
            yield Row(number, "add", _mapped(record, mapping, a, every_other=False))
        elif "from" in record and "to" in record:
            yield Row(number, "relate", _pick(record, RELATION_FIELDS))
        else:
            yield Row(number, "add", _entity(record, a))


def _csv(a: dict[str, Any]) -> Iterator[Row]:
    mapping = a.get("mapping") or {}
    reader = csv.DictReader(io.StringIO(_text(a), newline=""), strict=True)
    try:
        header = reader.fieldnames
        if not header:
            raise _format_error("no header row", 1)
        if a.get("type") is None and mapping.get("type", "type") not in header:
            raise R.InvalidArgumentError(
                "type: required for csv, unless mapping.type names a column", field="type", reason="missing"
            )
        for record in reader:
            if None in record or any(v is None for v in record.values()):
                raise _format_error(f"{len(header)} columns in the header, another count here", reader.line_num)
            yield Row(reader.line_num, "add", _mapped(record, mapping, a, every_other="metadata" not in mapping))
    except csv.Error as exc:
        raise _format_error(str(exc), reader.line_num) from None


READERS = {"brainy": _page, "jsonl": _jsonl, "csv": _csv}


def rows_of(a: dict[str, Any]) -> list[Row]:
    """The import's rows, read whole before any is staged (``ImportFormatError`` names the first bad line)."""
    given = a.get("format")
    reader = READERS.get(given) if isinstance(given, str) else None
    if reader is None:
        raise R.InvalidArgumentError(f"format: one of {sorted(READERS)}", field="format", reason="out-of-range")
    return list(reader(a))


def _texts_of(a: dict[str, Any]) -> list[str]:
    """The texts the import's rows store, as each row's own door would embed them (``writes.texts``); none
    when the rows do not read (the rule refuses them)."""
    try:
        rows = rows_of(a)
    except R.Refusal:
        return []
    return [text for row in rows for text in texts(row.door, row.args)]


@door("import", WRITE, embeds=_texts_of)
def import_rows(txn: Txn, a: dict[str, Any], ctx: Context) -> dict[str, Any]:
    rows = rows_of(a)
    on_conflict, keep_going = a["onConflict"], a["continueOnError"]
    if on_conflict not in ("refuse", "replace", "skip"):
        raise R.InvalidArgumentError("onConflict: refuse, replace or skip", field="onConflict", reason="out-of-range")
    entities = relations = skipped = 0
    failed: list[dict[str, Any]] = []
    for index, row in enumerate(rows):
        point = txn.savepoint()
        try:
            args = dict(row.args)
            if row.door == "add" and on_conflict != "refuse" and args.get("id") is not None:
                if txn.entity(K.resolve(args["id"])[0]) is not None:
                    if on_conflict == "skip":
                        skipped += 1
                        continue
                    args["upsert"] = True
            _nested(row.door, TX_DOORS[row.door], txn, args, ctx)
            if row.door == "add":
                entities += 1
            else:
                relations += 1
        except R.Refusal as exc:
            txn.rollback(point)
            if not keep_going:
                raise R.TransactionAbortedError(
                    f"line {row.line} was refused ({exc.name}): nothing was written", index=index, error=exc.to_wire()
                ) from exc
            failed.append({"index": index, "line": row.line, "error": exc.to_wire()})
        if (index + 1) % BATCH == 0 and len(rows) > BATCH:
            log.info("import into %s: %d of %d rows staged", ctx.brain, index + 1, len(rows))
    return {"entities": entities, "relations": relations, "skipped": skipped, "failed": failed}
