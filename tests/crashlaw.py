"""The crash law's harness: spawn ``tests/procs/writer.py crash``, SIGKILL it, reopen the store and hold what
the store answers to a model of everything the writer printed (docs/store-format.md, "The fact log", "Why
this design": a crash never loses an acknowledged write and never leaves part of a commit).

Shared by tests/test_crash.py (one writer thread), tests/test_kill_loop.py and tools/kill_loop.py (several
writer threads, a mix of write doors, kills aimed at the maintenance thread's flush and compaction steps).

The model is exact, not a bound. A writer thread tries one commit at a time and prints ``TRY`` before it and
``ACK`` once it is durable, so after a kill every thread has at most one commit in doubt: its last ``TRY``.
Threads own disjoint keys (thread t writes only the seqs, entities, files and scopes of its slot, seq mod W),
so the commits in doubt touch disjoint rows. Each one is settled by reading the rows it touches: they must
read exactly as before it or exactly as after it (whole, at one generation), never a mix. Then the store's
head must count exactly the commits landed, each generation of the round must record the entity, relation
and op counts of the commit the model gives it, the rows every commit of the round touched must read as the
model says (metadata and generation), and the counts ledger must equal the model's totals; every
``full_every`` rounds (and at the end) an export of the whole store must equal the whole model.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import queue
import random
import signal
import struct
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from brainy.contract import refusals as R
from brainy.engine import Brain, init_store
from brainy.store.files import read_document

WRITER = Path(__file__).parent / "procs" / "writer.py"
_spec = importlib.util.spec_from_file_location("crash_writer", WRITER)
assert _spec is not None and _spec.loader is not None
_writer = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_writer)
key_vector = _writer.key_vector  # the vector the writer gives each thing, from its key

# tuned so that a writer killed after a fraction of a second has flushed, compacted and rotated its log
FLUSH_BYTES = 16 << 10
COMPACT_AT = 3
SEGMENT_BYTES = 64 << 10
TUNING = dict(flush_bytes=FLUSH_BYTES, compact_at=COMPACT_AT, segment_bytes=SEGMENT_BYTES)

OWNED_THINGS = 32  # live entities of its slot each thread is handed to update, relate and remove
OWNED_FILES = 8  # and files to write over
ANY = None  # a generation the model leaves open: the commit in doubt that wrote the row landed at some generation

# the maintenance steps a kill aims at (tests/procs/writer.py prints them as MARK lines), each but "done": the
# memtable frozen (the table not yet written), the table written (the MANIFEST not yet swapped), the MANIFEST
# swapped (the follower snapshots not yet stamped, or the merged tables not yet deleted)
STEPS = {"flush": ("froze", "wrote", "swapped"), "compact": ("merges", "wrote", "swapped")}


class Child:
    """A spawned ``writer.py``: its stdout lines arrive on a queue as it prints them."""

    def __init__(self, *args: str, env: dict[str, str] | None = None) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(WRITER), *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            bufsize=1,
            env=env,
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.seen: list[str] = []
        self.err: list[str] = []
        self._pumps = [
            threading.Thread(target=self._pump, daemon=True),
            threading.Thread(target=self._pump_err, daemon=True),
        ]
        for t in self._pumps:
            t.start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            line = line.rstrip("\n")
            self.seen.append(line)
            self.lines.put(line)
        self.lines.put(None)

    def _pump_err(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.err.append(line)

    def expect(self, prefix: str | tuple[str, ...], timeout: float = 20.0, fail: bool = True) -> str | None:
        """The first line starting with ``prefix`` (one of them, for a tuple); None if the child's output ended
        first, or (``fail`` false) if ``timeout`` seconds passed first."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                if not fail:
                    return None
                raise AssertionError(f"no {prefix!r} line within {timeout} s; stderr: {''.join(self.err)}")
            try:
                line = self.lines.get(timeout=left)
            except queue.Empty:
                continue
            if line is None:
                return None
            if line.startswith(prefix):
                return line

    def kill(self) -> list[str]:
        """SIGKILL the child, reap it, and answer every line it printed."""
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=20)
        for t in self._pumps:
            t.join(timeout=20)
        for pipe in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if pipe is not None:
                try:
                    pipe.close()
                except BrokenPipeError:
                    pass
        return list(self.seen)


# -- the model -----------------------------------------------------------------------------------------------


def slot_of_key(key: str, writers: int) -> int:
    return int(key[1:].partition("-")[0]) % writers


@dataclass
class Op:
    """One commit a writer thread tried: ``spec`` as its TRY line said; ``generation`` and ``answer`` from its
    ACK line (None when it was not acknowledged)."""

    t: int
    seq: int
    spec: dict[str, Any]
    generation: int | None = None
    answer: dict[str, Any] | None = None

    @property
    def keys(self) -> set[str]:
        s = self.spec
        return (
            {k for k, _ in s.get("put", ())}
            | {k for a, b, _ in s.get("rel", ()) for k in (a, b)}
            | set(s.get("del", ()))
        )

    @property
    def paths(self) -> set[str]:
        return {self.spec["file"][0]} if self.spec.get("file") else set()

    @property
    def scopes(self) -> set[str]:
        return {self.spec["mem"][0]} if self.spec.get("mem") else set()


@dataclass
class Model:
    """What the store must hold: every row the landed commits wrote, with the generation that wrote it.

    ``things``: key -> [metadata, generation]; ``rels``: (from key, to key) -> [metadata, generation], with
    ``adj`` indexing them by endpoint; ``files``: path -> [hash, size, generation]; ``mems``: scope -> [text,
    generation]; ``dirs``: the directories made before the first round (the files' parents)."""

    writers: int = 1
    things: dict[str, list[Any]] = field(default_factory=dict)
    rels: dict[tuple[str, str], list[Any]] = field(default_factory=dict)
    adj: dict[str, set[tuple[str, str]]] = field(default_factory=dict)
    files: dict[str, list[Any]] = field(default_factory=dict)
    mems: dict[str, list[Any]] = field(default_factory=dict)
    dirs: list[str] = field(default_factory=list)
    head: int = 0  # the store's generation: the setup's commits, then every landed commit
    next_seq: int = 0  # the first seq of the next round, a multiple of ``writers``
    created: list[str] = field(default_factory=list)  # every key ever made, in order: where owned keys are drawn
    acked: int = 0  # commits acknowledged, over every round: each read back after the kill that followed it
    by_door: Counter[str] = field(default_factory=Counter)  # the acknowledged commits by door
    landed_in_doubt: int = 0  # commits in doubt (tried, not acknowledged) that the store holds
    lost_in_doubt: int = 0  # and that it does not

    def signature(self, spec: dict[str, Any]) -> tuple[int, int, int]:
        """The (entities, relations, ops) a generation record must say for ``spec`` applied now: a remove takes
        its entity's relations with it, a new file its directory's ``contains`` relation."""
        file = spec.get("file")
        entities = (
            len(spec.get("put", ())) + len(spec.get("del", ())) + (1 if file else 0) + (1 if spec.get("mem") else 0)
        )
        relations = len(spec.get("rel", ())) + sum(len(self.adj.get(k, ())) for k in spec.get("del", ()))
        relations += 1 if file and file[0] not in self.files else 0
        return entities, relations, entities + relations

    def apply(self, spec: dict[str, Any], generation: int | None) -> None:
        for key, meta in spec.get("put", ()):
            if key not in self.things:
                self.created.append(key)
            self.things[key] = [meta, generation]
        for a, b, meta in spec.get("rel", ()):
            self.rels[(a, b)] = [meta, generation]
            self.adj.setdefault(a, set()).add((a, b))
            self.adj.setdefault(b, set()).add((a, b))
        for key in spec.get("del", ()):
            del self.things[key]
            for pair in self.adj.pop(key, set()):
                del self.rels[pair]
                other = pair[1] if pair[0] == key else pair[0]
                self.adj[other].discard(pair)
        if spec.get("file"):
            path, digest, size = spec["file"]
            self.files[path] = [digest, size, generation]
        if spec.get("mem"):
            scope, text = spec["mem"]
            self.mems[scope] = [text, generation]

    def neighbours(self, keys: set[str]) -> set[str]:
        return {k for key in keys for pair in self.adj.get(key, ()) for k in pair}

    def view(self, core: set[str], keys: set[str], paths: set[str], scopes: set[str]) -> dict[str, Any]:
        """The model's rows that a read of the store restricted the same way answers (``read_view``)."""
        return {
            "things": {k: self.things[k] for k in sorted(keys) if k in self.things},
            "rels": {p: self.rels[p] for k in core for p in self.adj.get(k, ())},
            "files": {p: self.files[p] for p in paths if p in self.files},
            "mems": {s: [self.mems[s]] for s in scopes if s in self.mems},
        }

    def sub(self, keys: set[str], paths: set[str], scopes: set[str]) -> Model:
        """A small model of only these rows (and every relation touching the keys), to apply a commit in doubt
        to without touching this one."""
        small = Model(writers=self.writers)
        small.things = {k: list(self.things[k]) for k in keys if k in self.things}
        for key in keys:
            for pair in self.adj.get(key, ()):
                small.rels[pair] = list(self.rels[pair])
                for k in pair:
                    small.adj.setdefault(k, set()).add(pair)
        small.files = {p: list(self.files[p]) for p in paths if p in self.files}
        small.mems = {s: list(self.mems[s]) for s in scopes if s in self.mems}
        return small

    def owned(self, rng: random.Random) -> dict[str, Any]:
        """For each writer thread, a sample of the live entities and files of its slot (``--owned``)."""
        things: dict[str, list[str]] = {str(t): [] for t in range(self.writers)}
        for _ in range(OWNED_THINGS * self.writers * 8):  # bounded: a sparse slot gets fewer
            if not self.created:
                break
            key = self.created[rng.randrange(len(self.created))]
            bucket = things[str(slot_of_key(key, self.writers))]
            if key in self.things and key not in bucket and len(bucket) < OWNED_THINGS:
                bucket.append(key)
        files: dict[str, list[str]] = {str(t): [] for t in range(self.writers)}
        for path in rng.sample(list(self.files), min(len(self.files), OWNED_FILES * self.writers * 4)):
            bucket = files[path.split("/")[2][1:]]
            if len(bucket) < OWNED_FILES:
                bucket.append(path)
        return {"things": things, "files": files}


# -- reading the store -----------------------------------------------------------------------------------------


def read_view(brain: Brain, core: set[str], keys: set[str], paths: set[str], scopes: set[str]) -> dict[str, Any]:
    """The store's rows: the entities of ``keys`` (a superset of ``core``), every relation touching a key of
    ``core`` (its other end named by key when it is one of ``keys``, else by ``?<id>``), the files at ``paths``
    and the memories of ``scopes``."""
    things: dict[str, list[Any]] = {}
    ids: dict[str, str] = {}
    ordered = sorted(keys)
    for i in range(0, len(ordered), 1000):
        chunk = ordered[i : i + 1000]
        answer = brain.batchGet({"ids": chunk, "includeData": False, "includeVector": True})
        for key, row in zip(chunk, answer["entities"]):
            if row is not None:
                assert row["key"] == key and row["type"] == "thing", f"{key} reads as {row}"
                # every thing keeps the vector it was added with, whatever updated its metadata since
                assert row["hasVector"] and _f32(row.get("vector", [])) == _f32(key_vector(key)), (
                    f"{key}: another vector"
                )
                things[key] = [row["metadata"], row["generation"]]
                ids[row["id"]] = key
    rels: dict[tuple[str, str], list[Any]] = {}
    for key in sorted(core & set(things)):
        cursor = None
        for _ in range(1000):  # bounded: a page is 1,000 relations
            args: dict[str, Any] = {"node": key, "limit": 1000}
            if cursor:
                args["cursor"] = cursor
            page = brain.related(args)
            for rel in page["relations"]:
                assert rel["type"] == "relatedTo", f"{key}: {rel}"
                pair = (ids.get(rel["from"], "?" + rel["from"]), ids.get(rel["to"], "?" + rel["to"]))
                rels[pair] = [rel["metadata"], rel["generation"]]
            cursor = page.get("cursor")
            if not page.get("hasMore"):
                break
    files: dict[str, list[Any]] = {}
    for path in paths:
        try:
            node = brain.stat({"path": path})["node"]
        except R.FileNotFoundError:
            continue
        files[path] = [node["hash"], node["size"], node["generation"]]
        read_back(brain, path, node["hash"])
    mems: dict[str, list[Any]] = {}
    for scope in scopes:
        found = brain.call("memory.list", {"scope": scope, "status": "all"})["memories"]
        if found:
            mems[scope] = [[m["text"], m["generation"]] for m in found]
    return {"things": things, "rels": rels, "files": files, "mems": mems}


def _f32(numbers: list[float]) -> bytes:
    """A vector as its float32 bytes (the wire gives each number as the shortest decimal of its float32)."""
    return struct.pack(f"<{len(numbers)}f", *numbers)


def read_back(brain: Brain, path: str, digest: str) -> None:
    """The file's content reads whole and hashes as its row says: its blob chunks outlived the kill and the sweep."""
    content = brain.readFile({"path": path})["content"]
    got = "sha256:" + hashlib.sha256(content.encode()).hexdigest()
    assert got == digest, f"{path} reads {len(content)} characters hashing {got}, its row says {digest}"


def _rows(view: dict[str, Any]) -> dict[tuple[str, Any], list[Any]]:
    """A view flattened to one map, row name -> [value..., generation]."""
    out: dict[tuple[str, Any], list[Any]] = {}
    for kind, rows in view.items():
        for name, row in rows.items():
            if kind == "mems":  # a list of the scope's memories: more than one is a row too many
                out[(kind, name)] = row[0] if len(row) == 1 else ["<several>", row]
            else:
                out[(kind, name)] = row
    return out


def differences(got: dict[str, Any], want: dict[str, Any]) -> list[str]:
    """Where ``got`` (the store) differs from ``want`` (the model), a generation of ANY matching any."""
    g, w = _rows(got), _rows(want)
    out = []
    for name in sorted(set(g) | set(w), key=repr):
        a, b = g.get(name), w.get(name)
        if a is None or b is None or a[:-1] != b[:-1] or (b[-1] is not ANY and a[-1] != b[-1]):
            out.append(f"{name}: store {a}, model {b}")
    return out


def landed_at(got: dict[str, Any], want: dict[str, Any]) -> set[int]:
    """The generations the store gives the rows the model leaves open (ANY)."""
    g, w = _rows(got), _rows(want)
    return {g[name][-1] for name, row in w.items() if row[-1] is ANY and name in g}


# -- one round -------------------------------------------------------------------------------------------------


@dataclass
class Seen:
    """What one writer printed, read into its commits and the maintenance steps it reached."""

    ready: str | None = None
    ops: list[Op] = field(default_factory=list)
    closing: bool = False
    closed: bool = False
    marks: list[str] = field(default_factory=list)  # "flush froze", "compact wrote", ...

    @property
    def inside(self) -> str | None:
        """The maintenance step the writer was in when it died: the last one it named, unless that was done."""
        if not self.marks or self.marks[-1].endswith(" done"):
            return None
        return self.marks[-1]


def absorb(model: Model, lines: list[str], ctx: str) -> Seen:
    seen = Seen()
    by_seq: dict[int, Op] = {}
    for line in lines:
        word, _, rest = line.partition(" ")
        if word == "READY":
            claim, head = rest.split()
            assert int(head) == model.head, f"{ctx}: the writer opened at {head}, the model is at {model.head}"
            seen.ready = claim
        elif word == "TRY":
            t, seq, spec = rest.split(" ", 2)
            op = Op(int(t), int(seq), json.loads(spec))
            assert op.seq >= model.next_seq and op.seq % model.writers == op.t and op.seq not in by_seq, (
                f"{ctx}: a TRY out of its thread's sequence: {line[:200]}"
            )
            by_seq[op.seq] = op
            seen.ops.append(op)
        elif word == "ACK":
            t, seq, generation, answer = rest.split(" ", 3)
            op = by_seq[int(seq)]
            assert op.generation is None and op.t == int(t), f"{ctx}: ACK without its TRY: {line}"
            op.generation, op.answer = int(generation), json.loads(answer)
        elif word == "MARK":
            seen.marks.append(" ".join(rest.split()[:2]))
        elif word == "OPENING":
            pass
        elif word == "CLOSING":
            seen.closing = True
        elif word == "CLOSED":
            seen.closed = True
        else:  # REFUSED, ERROR: a commit the store should have taken, refused or failed
            raise AssertionError(f"{ctx}: the writer printed {line!r}")
    last: dict[int, Op] = {}
    for op in seen.ops:
        previous = last.get(op.t)
        assert previous is None or previous.generation is not None, (
            f"{ctx}: thread {op.t} tried seq {op.seq} before seq {previous.seq} was acknowledged"
        )
        last[op.t] = op
    return seen


def _check_answer(model: Model, op: Op, ctx: str) -> None:
    """What the ACK said against the model just before the commit is applied to it."""
    s, a = op.spec, op.answer
    assert a is not None
    if s["door"] == "addMany":
        assert a["failed"] == [], f"{ctx}: seq {op.seq}: {a}"
    elif s["door"] == "relate":
        ((x, y, _),) = s["rel"]
        assert a["existed"] == ((x, y) in model.rels), f"{ctx}: seq {op.seq} relate {x}->{y}: {a}"
    elif s["door"] == "remove":
        n = len(model.adj.get(s["del"][0], ()))
        assert a["removedRelations"] == n, f"{ctx}: seq {op.seq} removed {a['removedRelations']} relations, not {n}"
    elif s["door"] == "writeFile":
        assert a["created"] == (s["file"][0] not in model.files), f"{ctx}: seq {op.seq}: {a}"
    elif s["door"] == "memory.remember":
        assert a["deduplicated"] is False, f"{ctx}: seq {op.seq}: {a}"


def settle(brain: Brain, model: Model, seen: Seen, ctx: str) -> None:
    """Move the model over one killed writer's commits, checking the reopened store at every step."""
    before = model.head
    acked = sorted((op for op in seen.ops if op.generation is not None), key=lambda op: op.generation or 0)
    doubt = [op for op in seen.ops if op.generation is None]
    gens = [op.generation for op in acked]
    assert len(set(gens)) == len(gens), f"{ctx}: two acknowledgements name one generation: {gens}"
    for op in acked:  # a lost acknowledged commit shows here first, as a head short of it
        assert op.generation is not None and before < op.generation <= brain.head, (
            f"{ctx}: LOST: seq {op.seq} ({op.spec['door']}) was acknowledged at generation {op.generation}, the"
            f" reopened store's head is {brain.head} (the round began at {before})"
        )
    sigs: dict[int, tuple[int, int, int]] = {}
    for op in acked:
        assert op.generation is not None  # (for the type checker: checked above)
        _check_answer(model, op, ctx)
        sigs[op.generation] = model.signature(op.spec)
        model.apply(op.spec, op.generation)
    pinned: list[tuple[Op, int | None, tuple[int, int, int]]] = []
    for op in doubt:  # each thread's last commit, unacknowledged: wholly landed or wholly not
        core = op.keys
        keys = core | model.neighbours(core)
        without = model.view(core, keys, op.paths, op.scopes)
        small = model.sub(keys, op.paths, op.scopes)
        sig = small.signature(op.spec)
        small.apply(op.spec, ANY)
        with_ = small.view(core, keys, op.paths, op.scopes)
        got = read_view(brain, core, keys, op.paths, op.scopes)
        if not differences(got, with_) and differences(got, without):
            at = landed_at(got, with_)
            assert len(at) <= 1, f"{ctx}: seq {op.seq} ({op.spec['door']}) landed across generations {at}"
            generation = at.pop() if at else None
            assert generation is None or (before < generation <= brain.head and generation not in sigs), (
                f"{ctx}: seq {op.seq} in doubt landed at generation {generation}, taken or out of the round"
            )
            model.apply(op.spec, generation)
            pinned.append((op, generation, sig))
            model.landed_in_doubt += 1
        else:
            assert not differences(got, without), (
                f"{ctx}: PARTIAL: seq {op.seq} ({op.spec['door']}, in doubt) reads neither as before it: "
                + "; ".join(differences(got, without))[:1500]
                + " nor as after it: "
                + "; ".join(differences(got, with_))[:1500]
            )
            model.lost_in_doubt += 1
    model.head = before + len(acked) + len(pinned)
    assert brain.head == model.head, (
        f"{ctx}: head {brain.head}, but {len(acked)} acknowledged and {len(pinned)} in doubt landed after {before}"
    )
    # every generation of the round is one commit the model holds, recording that commit's counts
    records = {g: brain.generation(g) for g in range(before + 1, model.head + 1)}
    found = {g: (r["entities"], r["relations"], r["ops"]) for g, r in records.items()}
    for _, generation, sig in pinned:
        if generation is not None:
            sigs[generation] = sig
    for g, sig in sigs.items():
        assert found[g] == sig, f"{ctx}: generation {g} records {records[g]}, the commit made {sig}"
    open_gens = Counter(found[g] for g in found if g not in sigs)
    open_ops = Counter(sig for _, generation, sig in pinned if generation is None)
    assert open_gens == open_ops, f"{ctx}: generations {open_gens} do not match the removes in doubt {open_ops}"
    try:
        brain.generation(model.head + 1)
    except R.GenerationAheadError:
        pass
    else:
        raise AssertionError(f"{ctx}: generation {model.head + 1} answers past the head")
    # the rows every commit of the round touched read as the model says, at their generations
    core = set().union(*(op.keys for op in seen.ops)) if seen.ops else set()
    keys = core | model.neighbours(core)
    paths = set().union(*(op.paths for op in seen.ops)) if seen.ops else set()
    scopes = set().union(*(op.scopes for op in seen.ops)) if seen.ops else set()
    wrong = differences(read_view(brain, core, keys, paths, scopes), model.view(core, keys, paths, scopes))
    assert not wrong, f"{ctx}: the rows of the round differ from the model: " + "; ".join(wrong)[:3000]
    model.acked += len(acked)
    model.by_door.update(op.spec["door"] for op in acked)
    check_counts(brain, model, ctx)
    if seen.ops:
        top = max(op.seq for op in seen.ops) + 1
        model.next_seq = -(-top // model.writers) * model.writers


def check_counts(brain: Brain, model: Model, ctx: str) -> None:
    """The counts ledger equals the model's rows: a lost or extra row anywhere in the store shows here."""
    counts = brain.counts()
    by_type = {"thing": len(model.things), "file": len(model.files), "collection": len(model.dirs)}
    by_type = {t: n for t, n in by_type.items() if n}
    all_tiers = dict(by_type, proposition=len(model.mems)) if model.mems else by_type
    contains = len(model.files) + max(len(model.dirs) - 1, 0)  # every file and directory but the root has a parent
    by_rel = {t: n for t, n in {"relatedTo": len(model.rels), "contains": contains}.items() if n}
    want = {
        "byType": by_type,
        "byTypeAllTiers": all_tiers,
        "entities": sum(by_type.values()),
        "entitiesAllTiers": sum(all_tiers.values()),
        "byRelationType": by_rel,
        "relationships": sum(by_rel.values()),
    }
    got = {k: counts[k] for k in want}
    assert got == want, f"{ctx}: counts {got}, the model {want}"


def full_check(brain: Brain, model: Model, ctx: str) -> int:
    """Every row of the store, exported, against the whole model; answers the rows read."""
    entities: list[dict[str, Any]] = []
    relations: list[dict[str, Any]] = []
    cursor = None
    for _ in range(100_000):  # bounded: a page is 10,000 rows
        args: dict[str, Any] = {"limit": 10_000}
        if cursor:
            args["cursor"] = cursor
        page = brain.export(args)
        entities += page["entities"]
        relations += page["relations"]
        cursor = page.get("cursor")
        if not cursor:
            break
    keys: dict[str, str] = {}
    things, files, mems, dirs = {}, {}, {}, []
    for row in entities:
        if row["type"] == "thing":
            things[row["key"]] = [row["metadata"], row["generation"]]
            keys[row["id"]] = row["key"]
        elif row["type"] == "file":
            m = row["metadata"]
            files[m["path"]] = [m["hash"], m["size"], row["generation"]]
            keys[row["id"]] = m["path"]
        elif row["type"] == "collection":
            dirs.append(row["metadata"]["path"])
            keys[row["id"]] = row["metadata"]["path"]
        elif row["type"] == "proposition":
            scope = row["metadata"]["scope"]
            assert scope not in mems, f"{ctx}: two memories in scope {scope}"
            mems[scope] = [row["data"], row["generation"]]
        else:
            raise AssertionError(f"{ctx}: a row the writers never wrote: {row}")
    rels, contains = {}, set()
    for rel in relations:
        pair = (keys.get(rel["from"], "?" + rel["from"]), keys.get(rel["to"], "?" + rel["to"]))
        if rel["type"] == "contains":
            contains.add(pair)
        else:
            assert rel["type"] == "relatedTo", f"{ctx}: {rel}"
            rels[pair] = [rel["metadata"], rel["generation"]]
    assert sorted(dirs) == sorted(model.dirs), f"{ctx}: directories {dirs}"
    for name, got, want in (("entities", things, model.things), ("relations", rels, model.rels)):
        if got != want:
            missing = [k for k in want if k not in got][:20]
            extra = [k for k in got if k not in want][:20]
            changed = [(k, got[k], want[k]) for k in want if k in got and got[k] != want[k]][:20]
            raise AssertionError(f"{ctx}: {name} missing {missing}, extra {extra}, changed {changed}")
    assert files == model.files, f"{ctx}: files {files}, the model {model.files}"
    for path, (digest, _, _) in files.items():
        read_back(brain, path, digest)
    assert mems == {s: list(v) for s, v in model.mems.items()}, f"{ctx}: memories differ from the model"
    want_contains = {(p.rpartition("/")[0] or "/", p) for p in [*model.files, *model.dirs] if p != "/"}
    assert contains == want_contains, f"{ctx}: contains {sorted(contains ^ want_contains)[:20]} differ"
    return len(entities) + len(relations)


# -- rounds ----------------------------------------------------------------------------------------------------

RANDOM = ("run", "start", "close")  # a random moment of a phase
AIMED = ("flush", "compact")  # right after a maintenance step the writer named
# how often each kind of round comes in a loop of them: mid-run most, aimed at the maintenance as often as not
MIX = {"run": 40, "flush": 25, "compact": 25, "start": 5, "close": 5}


def modes(rng: random.Random, n: int) -> list[str]:
    """``n`` rounds' modes, drawn by ``MIX``."""
    return rng.choices(list(MIX), list(MIX.values()), k=n)


@dataclass
class Rounds:
    """One accumulating store, its model and what the kills hit."""

    store: Path
    work: Path  # scratch: the empty model directory the writers see, the owned-keys file
    seed: int
    writers: int = 1
    doors: str = "transact"
    full_every: int = 1
    feed_retention: str | None = None  # the writers' (--feed-retention): "0B" trims the log at every flush
    model: Model = field(default_factory=Model)
    rng: random.Random = field(init=False)
    done: int = 0
    inside: Counter[str] = field(default_factory=Counter)  # kills by the maintenance step they landed in
    missed: Counter[str] = field(default_factory=Counter)  # aimed rounds whose step did not come in time
    aimed: Counter[str] = field(default_factory=Counter)  # aimed rounds, by mode
    full_rows: int = 0

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        self.model.writers = self.writers
        init_store(self.store)
        (self.work / "no-model").mkdir(parents=True, exist_ok=True)
        if self.doors == "mixed":  # the writers' files go under /kill/w<t>; making the directories is setup
            brain = Brain.open(self.store, **TUNING)
            try:
                for t in range(self.writers):
                    brain.mkdir({"path": f"/kill/w{t}", "parents": True})
                self.model.dirs = ["/", "/kill", *(f"/kill/w{t}" for t in range(self.writers))]
                self.model.head = brain.head
            finally:
                brain.close()

    @property
    def mid_flush(self) -> int:
        return sum(n for step, n in self.inside.items() if step.startswith("flush"))

    @property
    def mid_compaction(self) -> int:
        return sum(n for step, n in self.inside.items() if step.startswith("compact"))

    def round(self, mode: str, ctx: str) -> Seen:
        """Spawn the writers, kill them at a moment of phase ``mode``, reopen and verify the store."""
        seen = self.kill(mode, ctx)
        self.reopen(mode, seen, ctx)
        self.done += 1
        return seen

    def kill(self, mode: str, ctx: str) -> Seen:
        """Spawn the writers and kill them at a moment of phase ``mode``; answers what they printed."""
        model, rng = self.model, self.rng
        args = [
            "crash",
            str(self.store),
            "--seed",
            str(rng.randrange(1 << 32)),
            "--first-seq",
            str(model.next_seq),
            "--writers",
            str(self.writers),
            "--doors",
            self.doors,
            "--flush-bytes",
            str(FLUSH_BYTES),
            "--compact-at",
            str(COMPACT_AT),
            "--segment-bytes",
            str(SEGMENT_BYTES),
        ]
        if self.feed_retention is not None:
            args += ["--feed-retention", self.feed_retention]
        if self.doors == "mixed":
            owned = self.work / "owned.json"
            owned.write_text(json.dumps(model.owned(rng)))
            args += ["--owned", str(owned)]
        if mode == "close":
            args += ["--close-after", str(rng.randint(1, 120))]
        died = False
        if mode in AIMED:  # a step of the maintenance: the writer dies at it, or the parent kills it just after
            step = f"{mode} {rng.choice(STEPS[mode])}"
            died = self.aimed[mode] % 2 == 0  # by turns, so a few aimed rounds are sure to land in the step
            self.aimed[mode] += 1
            if died:
                args += ["--die-at", step, "--die-nth", str(rng.randint(1, 3))]
        # no text is embedded: the writers' memories and files are stored without vectors, and no model loads
        env = dict(os.environ, BRAINY_EMBED_MODEL_DIR=str(self.work / "no-model"))
        child = Child(*args, env=env)
        try:
            if mode in ("run", *AIMED):  # commits, flushes, compactions and rotations in flight
                assert child.expect("READY") is not None, f"{ctx}: writer died: {''.join(child.err)}"
            if mode == "run":
                time.sleep(rng.uniform(0.05, 0.4))
            elif mode in AIMED and died:  # the writer kills itself at its nth such step
                try:
                    child.proc.wait(timeout=15.0)
                except subprocess.TimeoutExpired:
                    self.missed[mode] += 1
            elif mode in AIMED:  # soon after the step: the next is a few milliseconds of work away, or less
                if child.expect(f"MARK {step}", timeout=15.0, fail=False) is None:
                    self.missed[mode] += 1
                time.sleep(rng.uniform(0.0, 0.003))
            elif mode == "close":  # somewhere inside close(): flush, close record, lease removal
                assert child.expect("CLOSING") is not None, f"{ctx}: writer died: {''.join(child.err)}"
                time.sleep(rng.uniform(0.0, 0.015))
            else:  # right after start: before, during or just after the claim, the replay and the first commits
                child.expect("OPENING")
                time.sleep(rng.uniform(0.0, 0.15))
        finally:
            lines = child.kill()
        said = [line for line in lines if line.startswith(("REFUSED", "ERROR"))]  # what made a writer give up
        assert child.proc.returncode == -signal.SIGKILL, (
            f"{ctx}: writer exited {child.proc.returncode}: {said} {''.join(child.err)[-3000:]}"
        )
        seen = absorb(model, lines, ctx)
        if seen.ready is not None:
            assert seen.ready == "fresh", f"{ctx}: the writer claimed by {seen.ready}, after a clean close"
        if seen.inside is not None:
            self.inside[seen.inside] += 1
        return seen

    def reopen(self, mode: str, seen: Seen, ctx: str) -> None:
        """Reopen the killed writer's store as the writer, check the reopen, then the store against the model."""
        store, model = self.store, self.model
        flushed = int(read_document(store / "MANIFEST")["generation"])
        attached = None
        try:
            attached = Brain.attach(store)
        except R.StoreUnservableError as exc:  # a claim killed between creating and removing the handoff
            assert mode == "start" and exc.reason == "writer-handoff-in-flight", f"{ctx}: {exc.to_wire()}"
        brain = Brain.open(store, **TUNING)
        try:
            assert brain.role == "writer", f"{ctx}: {brain.writer_block()}"
            claim = brain.writer_block()["claimPath"]
            if mode in ("run", *AIMED):
                assert claim == "stale-after-crash", f"{ctx}: reopened by {claim}"
                assert any(w["code"] == "recovered-after-crash" for w in brain.warnings), f"{ctx}: {brain.warnings}"
            elif mode == "close":
                allowed = {"fresh"} if seen.closed else {"stale-after-crash", "leftover-after-clean-close", "fresh"}
                assert claim in allowed, f"{ctx}: reopened by {claim} (close finished: {seen.closed})"
            else:
                allowed = {"stale-after-crash"} if seen.ready else {"stale-after-crash", "fresh"}
                assert claim in allowed, f"{ctx}: reopened by {claim} (writer ready: {seen.ready})"
            assert brain.recovery == {"replayedGenerations": brain.head - flushed}, (
                f"{ctx}: recovery {brain.recovery}, MANIFEST at {flushed}, head {brain.head}"
            )
            settle(brain, model, seen, ctx)
            if self.full_every and self.done % self.full_every == self.full_every - 1:
                self.full_rows += full_check(brain, model, ctx)
            if attached is not None:  # a read-only attach of the crashed store answers the same
                assert attached.head == brain.head, f"{ctx}: attach at {attached.head}, reopen at {brain.head}"
                assert attached.counts()["entities"] == brain.counts()["entities"], f"{ctx}"
        finally:
            if attached is not None:
                attached.close()
            answer = brain.close()
        assert answer["cleanCloseRecorded"], f"{ctx}: {answer}"

    def final(self, ctx: str) -> None:
        """A read-only attach after the last round: the whole store against the whole model."""
        brain = Brain.attach(self.store)
        try:
            check_counts(brain, self.model, ctx)
            self.full_rows += full_check(brain, self.model, ctx)
        finally:
            brain.close()


def run_rounds(rounds: Rounds, modes: list[str]) -> Rounds:
    """Run one round per mode, then the final check; an engine error is named with the seed and round."""
    print(f"BRAINY_CRASH_SEED={rounds.seed}")  # shown with a failure's captured output
    for i, mode in enumerate(modes):
        ctx = f"seed={rounds.seed} round={i} mode={mode}"
        try:
            rounds.round(mode, ctx)
        except AssertionError:
            raise
        except Exception as exc:  # a refusal or error from the engine: name the seed that found it
            raise AssertionError(f"{ctx}: {exc!r}") from exc
    rounds.final(f"seed={rounds.seed} final")
    return rounds
