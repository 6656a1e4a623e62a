"""Time travel and the change feed: now, history, asOf, diff, export, changes (door catalogue, section 6).

Every generation from the history horizon on stays readable (``oldestRetained``, the MANIFEST's
``historyFrom``; 0 while no ``--history`` was set); a read below it is refused
``GenerationCompactedError`` (docs/store-format.md, "Horizons"). A paged answer's cursor pins the
generation its first page read, so a multi-page walk is one consistent state.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any

from brainy.contract import arguments
from brainy.contract import doors as D
from brainy.contract import refusals as R
from brainy.contract.limits import quote
from brainy.doors import registry
from brainy.doors.cursors import decode_cursor, encode_cursor
from brainy.doors.registry import door
from brainy.index import encoded_rows as E
from brainy.index.snapshot import Snapshot
from brainy.store import horizons as H
from brainy.store import keys as K
from brainy.store import rows

MAX_PAGE = 10_000


def _limit(a: dict[str, Any], most: int = MAX_PAGE) -> int:
    return rows.integer(a["limit"], "limit", 1, most)


# -- generations and instants ------------------------------------------------------------------------


@door("now")
def now(snap: Snapshot, id_: Any, args: dict[str, Any]) -> dict[str, Any]:
    return {
        "generation": snap.generation,
        "timestamp": snap.timestamp(snap.generation),
        "oldestRetained": snap.oldest_retained,
    }


@door("generation")
def generation(snap: Snapshot, id_: Any, args: dict[str, Any]) -> dict[str, Any]:
    """What one commit was: its time, its ops, who made it."""
    if isinstance(id_, str) and id_.isdigit():  # a path segment
        id_ = int(id_)
    if isinstance(id_, bool) or not isinstance(id_, int):
        raise R.InvalidArgumentError("id: a generation is a non-negative integer", field="id", reason="wrong-type")
    n = rows.integer(id_, "id", 0)
    head = snap.generation
    if n > head:
        raise R.GenerationAheadError(f"generation {n} is past the head {head}", generation=n, head=head)
    if n < snap.oldest_retained:
        raise H.compacted(n, snap.oldest_retained, "generation")
    if n == 0:
        return {
            "generation": 0,
            "timestamp": snap.created_at,
            "ops": 0,
            "entities": 0,
            "relations": 0,
            "author": None,
            "via": None,
        }
    return {"generation": n, **snap.commit(n)}


def _instant(value: Any) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str):
        try:
            moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            pass
        else:
            if moment.tzinfo is not None:
                return int(moment.timestamp() * 1000)
    raise R.InvalidArgumentError(
        "at: an ISO-8601 instant with a zone, or milliseconds since the epoch", field="at", reason="wrong-type"
    )


def resolve_generation(snap: Snapshot, a: dict[str, Any]) -> int:
    """The generation ``generation`` names, or the last one committed at or before the instant ``at``."""
    head = snap.generation
    if ("generation" in a) == ("at" in a):
        raise R.InvalidArgumentError(
            "give exactly one of generation and at", field="generation", reason="ambiguous" if "at" in a else "missing"
        )
    if "generation" in a:
        generation = rows.integer(a["generation"], "generation", 0)
        if generation > head:
            raise R.GenerationAheadError(
                f"generation {generation} is past the head {head}", generation=generation, head=head
            )
        return generation
    at = _instant(a["at"])
    view, oldest = snap, snap.oldest_retained

    class Timestamps:  # commit times never go down, so the generations bisect by time
        def __len__(self) -> int:
            return head

        def __getitem__(self, i: int) -> int:
            return view.commit(i + 1)["timestamp"]

    found = bisect.bisect_right(Timestamps(), at, lo=oldest)  # no commit record is kept below the horizon
    if found == oldest and oldest and at < view.timestamp(oldest):
        raise R.GenerationCompactedError(
            f"at: {a['at']!r} is before generation {oldest}, the oldest retained",
            generation=oldest - 1,
            oldestRetained=oldest,
        )
    return found


# -- history -----------------------------------------------------------------------------------------


@door("history")
def history(view: Snapshot, id_text: Any, a: dict[str, Any]) -> dict[str, Any]:
    """Every recorded version of one entity, newest first."""
    limit = _limit(a)
    id_, _ = K.resolve(id_text)
    generation, start = view.generation, 0
    if a.get("cursor") is not None:
        generation, start = decode_cursor(a["cursor"], "history", {"id": id_})
        view = view.at(min(generation, view.generation))
    user_key = K.entity_key(id_)
    oldest = view.oldest_retained
    # a version below the horizon stood there, but its commit's record is gone: history ends at the horizon
    versions = [v for v in view.versions(user_key) if v[0] >= oldest]
    page = versions[start : start + limit]
    out = []
    for gen, raw in page:
        commit = view.commit(gen)
        entry: dict[str, Any] = {
            "generation": gen,
            "timestamp": commit["timestamp"],
            "op": "update" if raw else "delete",
            "author": commit["author"],
        }
        if raw:
            entry["entity"] = E.answer(view, user_key, gen, raw)
        out.append(entry)
    more = start + limit < len(versions)
    answer = {
        "id": id_,
        "versions": out,
        "hasMore": more,
        "cursor": encode_cursor("history", {"id": id_}, view.generation, start + limit) if more else None,
    }
    if oldest and not more:
        answer["truncatedAt"] = oldest
    return answer


# -- diff --------------------------------------------------------------------------------------------


def _touched(snap: Snapshot, after: int, upto: int) -> list[tuple[str, str]]:
    """(kind, id) of every row an op touched in generations (after, upto], read from the fact log; once the
    feed retention deleted those frames, every row either state holds (the states compared row by row)."""
    seen: set[tuple[str, str]] = set()
    try:
        for frame in snap.frames(after):
            if frame.generation > upto:
                break
            for op in frame.ops:
                seen.add((op["k"], op["id"] if op["o"] == "del" else rows.unpack(op["row"])["id"]))
    except R.GenerationCompactedError:
        seen.clear()
        for state in (snap.at(after), snap.at(upto)):
            seen.update(("e", row["id"]) for row in state.entities())
            seen.update(("r", row["id"]) for row in state.relations())
    return sorted(seen)


@door("diff")
def diff(snap: Snapshot, id_: Any, a: dict[str, Any]) -> dict[str, Any]:
    """What changed between two generations, row by row (the states compared, not the path between)."""
    head = snap.generation
    start_gen = rows.integer(rows.need(a, "from"), "from", 0)
    end_gen = rows.integer(a.get("to", head), "to", 0)
    for name, g in (("from", start_gen), ("to", end_gen)):
        if g > head:
            raise R.GenerationAheadError(f"{name}: generation {g} is past the head {head}", generation=g, head=head)
    if end_gen < start_gen:
        raise R.InvalidArgumentError("to: must not be before from", field="to", reason="out-of-range")
    kinds = a["kinds"]
    if not isinstance(kinds, list) or not kinds or any(k not in ("entity", "relation") for k in kinds):
        raise R.InvalidArgumentError("kinds: a list of entity and/or relation", field="kinds", reason="bad-operand")
    detail = a["detail"]
    if detail not in ("ids", "full"):
        raise R.InvalidArgumentError("detail: ids or full", field="detail", reason="bad-operand")
    limit = _limit(a)
    query = {"from": start_gen, "to": end_gen, "kinds": sorted(kinds), "detail": detail}
    position = 0
    if a.get("cursor") is not None:
        _, position = decode_cursor(a["cursor"], "diff", query)
    before, after = snap.at(start_gen), snap.at(end_gen)
    wanted = {"e" if k == "entity" else "r" for k in kinds}
    changes: list[dict[str, Any]] = []
    touched = [t for t in _touched(snap, start_gen, end_gen) if t[0] in wanted]
    index = position
    while index < len(touched) and len(changes) < limit:
        kind, id_ = touched[index]
        index += 1
        old, new = (
            (before.entity(id_), after.entity(id_)) if kind == "e" else (before.relation(id_), after.relation(id_))
        )
        if old is None and new is None:
            continue  # written and removed between the two states
        change: dict[str, Any] = {
            "kind": "entity" if kind == "e" else "relation",
            "id": id_,
            "change": "added" if old is None else "removed" if new is None else "changed",
        }
        if old is not None and new is not None and old == new:
            continue
        if detail == "full":
            if old is not None:
                change["before"] = rows.public_view(old)
            if new is not None:
                change["after"] = rows.public_view(new)
        changes.append(change)
    more = index < len(touched)
    return {
        "from": start_gen,
        "to": end_gen,
        "changes": changes,
        "hasMore": more,
        "cursor": encode_cursor("diff", query, end_gen, index) if more else None,
    }


# -- export ------------------------------------------------------------------------------------------


@door("export")
def export(view: Snapshot, id_: Any, a: dict[str, Any]) -> dict[str, Any]:
    """Every entity, then every relation, of one pinned generation, a page at a time (import's shape)."""
    include = a["include"]
    if not isinstance(include, list) or any(i not in ("entities", "relations") for i in include):
        raise R.InvalidArgumentError(
            "include: a list of entities and/or relations", field="include", reason="bad-operand"
        )
    types = a.get("type")
    if types is not None:
        types = {rows.noun(t) for t in (types if isinstance(types, list) else [types])}
    given = a["visibility"]
    tiers = None
    if given != "all":
        listed = given if isinstance(given, list) else [given]
        # strings only, before the set is made: an object among them is unhashable
        if not all(isinstance(t, str) for t in listed) or not set(listed) <= {"public", "internal", "system"}:
            raise R.InvalidArgumentError(
                "visibility: a tier, a list of tiers, or all", field="visibility", reason="bad-visibility"
            )
        tiers = set(listed)
    matches: Callable[[dict[str, Any]], bool] | None = None
    if a.get("where") is not None:
        from brainy.index.where import compile_where

        matches = compile_where(a["where"]).matches
    include_vectors = a["includeVectors"]
    limit = _limit(a)
    query = {k: v for k, v in a.items() if k not in ("limit", "cursor")}
    phase, after_key = "e", ""
    if a.get("cursor") is not None:
        generation, (phase, after_key) = decode_cursor(a["cursor"], "export", query)
        view = view.at(generation)
    entities: list[dict[str, Any]] = []
    relations: list[dict[str, Any]] = []
    count = 0
    next_position = None
    phases = [p for p in ("e", "r") if ("entities" if p == "e" else "relations") in include]
    for kind in phases[phases.index(phase) if phase in phases else 0 :]:
        start = bytes.fromhex(after_key) + b"\x00" if (kind == phase and after_key) else kind.encode()
        stop = b"f" if kind == "e" else b"s"
        # a row is decoded only to be filtered; every answered row is its stored bytes, encoded once
        filtered = tiers is not None or (kind == "e" and (types is not None or matches is not None))
        for key, generation, raw in view.scan_versions(start, stop):
            if filtered:
                row = rows.unpack(raw)
                if tiers is not None and row.get("visibility", "public") not in tiers:
                    continue
                if kind == "e" and (
                    (types is not None and row["type"] not in types) or (matches is not None and not matches(row))
                ):
                    continue
            (entities if kind == "e" else relations).append(E.answer(view, key, generation, raw, include_vectors))
            count += 1
            if count == limit:
                next_position = [kind, key.hex()]
                break
        if next_position is not None:
            break
        after_key = ""
    more = next_position is not None and _has_more(view, phases, next_position)
    return {
        "format": "brainy",
        "generation": view.generation,
        "entities": entities,
        "relations": relations,
        "hasMore": more,
        "cursor": encode_cursor("export", query, view.generation, next_position) if more else None,
    }


def _has_more(view: Snapshot, phases: list[str], position: list[str]) -> bool:
    kind, key = position
    stop = b"f" if kind == "e" else b"s"
    if next(iter(view.scan(bytes.fromhex(key) + b"\x00", stop)), None) is not None:
        return True
    return kind == "e" and "r" in phases and next(iter(view.scan(b"r", b"s")), None) is not None


# -- the change feed ---------------------------------------------------------------------------------


def change_frame(view: Any, generation: int, index: int, op: dict[str, Any]) -> dict[str, Any]:
    """One op of a commit as its change frame (DOORS.md 1.4); ``view`` answers the endpoints of a relation
    (``entity(id)``) as they stood at that commit. The changes door and the held stream both build here."""
    kind = "entity" if op["k"] == "e" else "relation"
    if op["o"] == "del":
        return {"generation": generation, "index": index, "kind": kind, "op": "delete", "id": op["id"]}
    row = rows.unpack(op["row"])
    frame: dict[str, Any] = {
        "generation": generation,
        "index": index,
        "kind": kind,
        "op": "update",
        "id": row["id"],
        "denseInt": row["denseInt"],
        "hasVector": bool(row.get("hasVector")),
    }
    if kind == "entity":
        frame["entity"] = {
            "type": row["type"],
            "subtype": row.get("subtype"),
            "service": row.get("service"),
            "visibility": row.get("visibility", "public"),
            "metadata": row.get("metadata", {}),
        }
    else:
        tags = []
        for end in (row["from"], row["to"]):
            endpoint = view.entity(end)
            value = (endpoint or {}).get("metadata", {}).get("tags", [])
            tags.append(list(value) if isinstance(value, list) else [])
        frame["relation"] = {
            "id": row["id"],
            "from": row["from"],
            "to": row["to"],
            "type": row["type"],
            "subtype": row.get("subtype"),
            "weight": row.get("weight"),
            "service": row.get("service"),
            "metadata": row.get("metadata", {}),
            "fromTags": tags[0],
            "toTags": tags[1],
        }
    return frame


def iter_changes(snap: Snapshot, since: int, upto: int) -> Iterator[list[dict[str, Any]]]:
    """The commits after ``since`` up to ``upto``, each as its list of change frames (one per op, in order)."""
    for frame in snap.frames(since):
        if frame.generation > upto:
            return
        view = snap.at(frame.generation)
        yield [change_frame(view, frame.generation, i, op) for i, op in enumerate(frame.ops)]


@door("changes")
def changes(snap: Snapshot, id_: Any, a: dict[str, Any]) -> dict[str, Any]:
    """The change log from a generation onward, one page at a time; a page never ends inside a commit."""
    head = snap.generation
    since = a["since"]
    if since == "head":
        since = head
    if isinstance(since, bool) or not isinstance(since, int) or since < 0:
        raise R.BadQueryParameterError("since: a generation, or head", param="since", head=head)
    if since > head:
        raise R.BadQueryParameterError(f"since: {since} is past the head {head}", param="since", head=head)
    limit = a["limit"]
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise R.BadQueryParameterError("limit: a positive whole number", param="limit")
    frames: list[dict[str, Any]] = []
    cursor = since
    for commit in iter_changes(snap, since, head):
        if frames and len(frames) + len(commit) > limit:
            break
        frames.extend(commit)
        cursor = commit[0]["generation"] if commit else cursor + 1
        if len(frames) >= limit:
            break
    return {"brain": snap.brain, "head": head, "frames": frames, "cursor": cursor, "hasMore": cursor < head}


# -- asOf ------------------------------------------------------------------------------------------


@door("asOf")
def as_of(snap: Snapshot, id_: Any, a: dict[str, Any]) -> dict[str, Any]:
    """Run one read on the snapshot pinned at a past generation or instant; the pin lasts only this call.

    The contract says which reads may be pinned (``pinnable``): each runs its own registered function
    on the older snapshot, its arguments checked as its own door's are."""
    generation = resolve_generation(snap, a)
    view = snap.at(generation)
    answer: dict[str, Any] = {"generation": generation, "timestamp": view.timestamp(generation)}
    read = a.get("read")
    if read is None:
        return answer
    spec = rows.check_args(read, frozenset(("door", "id", "args")), "read.")
    name = rows.need(spec, "door", "read.")
    inner = D.BY_NAME.get(name) if isinstance(name, str) else None
    if inner is None or not inner.pinnable:
        raise R.InvalidArgumentError(
            f"read.door: {quote(name)} is not a read asOf can pin", field="read.door", reason="not-pinnable"
        )
    if not inner.native:
        raise R.NotYetNativeError(f"{name} arrives in {inner.release}", door=name, release=inner.release)
    inner_id = spec.get("id")
    if inner_id is None and any(p.name == "id" for p in inner.path_params):
        raise R.InvalidArgumentError(f"read.id: required for {name}", field="read.id", reason="missing")
    run = registry.reads(name)
    assert run is not None, f"pinnable native door {name} has no registered read"  # registry.join checks it
    answer["door"] = name
    answer["result"] = run.fn(view, inner_id, arguments.check(inner, spec.get("args") or {}))
    return answer
