"""A brainy writer in its own process, for the crash and lease tests (run with ``sys.executable``).

It speaks line by line on stdout, flushing after every line, so a parent that kills it with
SIGKILL still holds everything it printed.

    writer.py crash STORE --seed S --first-seq N [--writers W] [--doors transact|mixed]
                          [--owned FILE] [--flush-bytes B] [--compact-at C]
                          [--segment-bytes G] [--close-after M] [--die-at STEP [--die-nth N]]

Prints ``OPENING`` once brainy is imported, opens STORE as its writer and prints ``READY
<claimPath> <head>``, then runs W writer threads (one by default) committing through the one
handle, forever. Thread t commits seq = N + t, N + t + W, N + t + 2W, ... (so with N a multiple
of W, every seq's thread is seq mod W). Before a commit it prints ``TRY <t> <seq> <json>``, the
json saying everything the commit writes:

    {"door": name, "put": [[key, metadata], ...], "rel": [[from, to, metadata], ...],
     "del": [key, ...], "file": [path, hash, size] | null, "mem": [scope, text] | null}

(``put``: entities of type ``thing`` written whole, new or over a live one, each new one with the vector
:func:`key_vector` derives from its key, which an update of its metadata keeps; ``rel``: relatedTo
relations written whole; ``del``: entities removed with their relations; ``file``: a file
written under ``/kill/w<t>/``; ``mem``: a fact remembered in its own scope). Once the commit has
returned (durable) it prints ``ACK <t> <seq> <generation> <json>``, the json holding what the
answer said that the parent can check (``existed``, ``removedRelations``, ``created``). A
refusal prints ``REFUSED <t> <seq> <name> <json fields>`` and any other failure ``ERROR <t>
<seq> <repr>``, and the process exits: every commit a thread tries is one the store must take.

``--doors transact`` (the default) makes every commit a transaction of K entities ``c<seq>-<j>``
(K in 1..8) with metadata ``{"seq", "j", "of": K}``, relating ``c<seq>-0`` to the first R
others (R often 0). ``--doors mixed`` draws each commit's door: add, addMany, transact, update,
relate and remove on entities the thread owns (those it made, and those ``--owned`` hands it:
``{"things": {t: [key, ...]}, "files": {t: [path, ...]}}``), writeFile, and memory.remember. With
BRAINY_EMBED_MODEL_DIR naming an empty directory nothing is embedded.

While the store's maintenance thread flushes or compacts it prints ``MARK <step>`` at each step
it reaches (``flush froze generation 12``, ``flush wrote sst/...``, ``flush swapped the
manifest``, ``flush done``, and the same for ``compact``): brainy/store/maintenance.py names
them at DEBUG, so a parent can kill the writer between two of them. With ``--die-at STEP`` (a
prefix such as ``flush wrote``) the writer kills itself with SIGKILL at the ``--die-nth`` (1st by
default) step so named, right after printing it.

With ``--close-after M`` the threads stop once they have made M commits among them; it
prints ``CLOSING``, closes the brain, prints ``CLOSED <json>`` and waits for stdin to end.

    writer.py hold STORE [--force]

Opens STORE (forcing the lease with ``--force``) and prints ``READY <json>`` (role, the writer
block, head), then obeys one command a line from stdin, answering one line each:

    add KEY      ->  ACK KEY <generation>     |  REFUSED <refusal name> <reason or ->
    relate A B   ->  ACK A->B <generation>    |  REFUSED ...   (a relatedTo relation from A to B)
    flush        ->  FLUSHED <bool>
    compact      ->  COMPACTED <bool>
    close        ->  CLOSED <json of the close answer>
    exit / EOF   ->  exits at once, without closing (as a crash would, minus the kill)
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import os
import random
import signal
import sys
import threading
from typing import Any

from brainy.contract import refusals as R
from brainy.engine import Brain
from brainy.store.horizons import Horizons

_SAID = threading.Lock()  # the writer threads and the maintenance thread print; a line is one write
CALLER = "killer"  # memory.remember writes need a caller to attribute the fact to
KNOWN_MAX = 64  # the keys a thread keeps to update, relate and remove: a bounded sample, oldest dropped


def key_vector(key: str) -> list[float]:
    """The vector a thing is written with, from its key alone: 384 numbers (2b - 255) / 256 over the bytes b of
    the key's SHAKE-256, each a float32 exactly and never zero. The crash law reads every thing back with it."""
    return [(2 * b - 255) / 256 for b in hashlib.shake_256(key.encode()).digest(384)]


def say(line: str) -> None:
    # one write and one flush under a lock: a line reaches the pipe whole (well under PIPE_BUF, so the
    # kernel delivers it whole too) and before anything the thread does after it
    with _SAID:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


class Marks(logging.Handler):
    """Prints each step the maintenance names (brainy/store/maintenance.py, at DEBUG) as ``MARK <step>``; at the
    ``nth`` step that starts with ``die_at`` it SIGKILLs its own process, right there in the maintenance thread,
    so the kill lands exactly between that step and the next while the writer threads commit on."""

    def __init__(self, die_at: str, nth: int) -> None:
        super().__init__()
        self.die_at, self.nth, self.count = die_at, nth, 0

    def emit(self, record: logging.LogRecord) -> None:
        step = record.getMessage()
        say(f"MARK {step}")
        if self.die_at and step.startswith(self.die_at):
            self.count += 1
            if self.count == self.nth:
                os.kill(os.getpid(), signal.SIGKILL)


def transaction(seq: int, rng: random.Random) -> dict[str, Any]:
    k = rng.randint(1, 8)
    r = rng.randint(1, k - 1) if k > 1 and rng.random() < 0.4 else 0
    put = [[f"c{seq}-{j}", {"seq": seq, "j": j, "of": k}] for j in range(k)]
    rel = [[f"c{seq}-0", f"c{seq}-{j}", {"seq": seq}] for j in range(1, r + 1)]
    return {"door": "transact", "put": put, "rel": rel}


# the mixed doors and how often each is drawn: the entity writes most, a file or a memory now and then
MIXED = {
    "add": 14,
    "addMany": 14,
    "transact": 18,
    "update": 16,
    "relate": 14,
    "remove": 8,
    "writeFile": 8,
    "memory.remember": 8,
}


def file_content(path: str, seq: int, size: int) -> str:
    return (f"{path} written by commit {seq}. " * (size // 20 + 1))[:size]


def mixed(seq: int, t: int, rng: random.Random, known: list[str], files: list[str]) -> dict[str, Any]:
    door = rng.choices(list(MIXED), list(MIXED.values()))[0]
    if (door in ("update", "remove") and not known) or (door == "relate" and len(known) < 2):
        door = "addMany"
    if door == "add":
        return {"door": door, "put": [[f"c{seq}-0", {"seq": seq, "j": 0, "of": 1}]]}
    if door == "addMany":
        k = rng.randint(2, 8)
        return {"door": door, "put": [[f"c{seq}-{j}", {"seq": seq, "j": j, "of": k}] for j in range(k)]}
    if door == "transact":
        return transaction(seq, rng)
    if door == "update":
        return {"door": door, "put": [[rng.choice(known), {"v": seq}]]}
    if door == "relate":
        a, b = rng.sample(known, 2)
        return {"door": door, "rel": [[a, b, {"seq": seq}]]}
    if door == "remove":
        return {"door": door, "del": [rng.choice(known)]}
    if door == "writeFile":
        # a new file mostly, else one the thread owns written over; sometimes big enough to need blob chunks
        path = rng.choice(files) if files and rng.random() < 0.3 else f"/kill/w{t}/f{seq}.txt"
        size = rng.choice([rng.randint(64, 200), rng.randint(1000, 20000)])
        content = file_content(path, seq, size)
        digest = "sha256:" + hashlib.sha256(content.encode()).hexdigest()
        return {"door": door, "file": [path, digest, len(content.encode())]}
    return {"door": door, "mem": [f"s{seq}", f"memory m{seq}: fact {rng.randrange(1 << 30)}"]}


def commit(brain: Brain, seq: int, op: dict[str, Any]) -> dict[str, Any]:
    """Run ``op`` through its door; answers the generation and what the answer said worth checking."""
    door = op["door"]
    if door == "transact":
        ops = [
            {"door": "add", "args": {"type": "thing", "id": key, "metadata": meta, "vector": key_vector(key)}}
            for key, meta in op["put"]
        ]
        ops += [
            {"door": "relate", "args": {"from": a, "to": b, "type": "relatedTo", "metadata": meta}}
            for a, b, meta in op.get("rel", [])
        ]
        return {"generation": brain.transact({"ops": ops})["generation"]}
    if door == "add":
        ((key, meta),) = op["put"]
        added = brain.add({"type": "thing", "id": key, "metadata": meta, "vector": key_vector(key)})
        return {"generation": added["generation"]}
    if door == "addMany":
        answer = brain.addMany(
            {
                "items": [
                    {"type": "thing", "id": key, "metadata": meta, "vector": key_vector(key)} for key, meta in op["put"]
                ]
            }
        )
        return {"generation": answer["generation"], "failed": answer["failed"]}
    if door == "update":
        ((key, meta),) = op["put"]
        return {"generation": brain.update({"id": key, "metadata": meta, "merge": False})["generation"]}
    if door == "relate":
        ((a, b, meta),) = op["rel"]
        answer = brain.relate({"from": a, "to": b, "type": "relatedTo", "metadata": meta})
        return {"generation": answer["generation"], "existed": answer["existed"]}
    if door == "remove":
        answer = brain.remove({"id": op["del"][0]})
        return {"generation": answer["generation"], "removedRelations": answer["removedRelations"]}
    if door == "writeFile":
        path, digest, _ = op["file"]
        answer = brain.writeFile({"path": path, "content": file_content(path, seq, op["file"][2])})
        assert answer["hash"] == digest, (answer, digest)
        return {"generation": answer["generation"], "created": answer["created"]}
    scope, text = op["mem"]
    answer = brain.call(
        "memory.remember", {"text": text, "scope": scope, "metadata": {"seq": seq}, "dedupe": False}, caller=CALLER
    )
    return {"generation": answer["generation"], "deduplicated": answer["deduplicated"]}


class Budget:
    """How many commits the threads may still start (``--close-after``); unbounded without one."""

    def __init__(self, most: int) -> None:
        self.left = most or -1
        self.lock = threading.Lock()

    def take(self) -> bool:
        with self.lock:
            if self.left == 0:
                return False
            self.left -= 1
            return True


def writer_thread(brain: Brain, t: int, args: argparse.Namespace, owned: dict[str, Any], budget: Budget) -> None:
    rng = random.Random(f"{args.seed}/{t}")
    known: list[str] = list(owned.get("things", {}).get(str(t), []))
    files: list[str] = list(owned.get("files", {}).get(str(t), []))
    seq = args.first_seq + t
    while budget.take():
        op = transaction(seq, rng) if args.doors == "transact" else mixed(seq, t, rng, known, files)
        say(f"TRY {t} {seq} {json.dumps(op, separators=(',', ':'))}")
        try:
            answer = commit(brain, seq, op)
        except R.Refusal as exc:
            say(f"REFUSED {t} {seq} {exc.name} {json.dumps(exc.fields, default=str)}")
            os._exit(3)
        except BaseException as exc:  # the parent names it with the seed that found it
            say(f"ERROR {t} {seq} {exc!r}")
            os._exit(3)
        generation = answer.pop("generation")
        say(f"ACK {t} {seq} {generation} {json.dumps(answer, separators=(',', ':'))}")
        if op["door"] in ("add", "addMany", "transact"):
            known += [key for key, _ in op["put"]]
            del known[:-KNOWN_MAX]
        elif op["door"] == "remove":
            known.remove(op["del"][0])
        elif op["door"] == "writeFile" and op["file"][0] not in files:
            files.append(op["file"][0])
        seq += args.writers


def crash(args: argparse.Namespace) -> int:
    marks = logging.getLogger("brainy.store.maintenance")
    marks.addHandler(Marks(args.die_at, args.die_nth))
    marks.setLevel(logging.DEBUG)
    owned = {}
    if args.owned:
        with open(args.owned) as f:
            owned = json.load(f)
    say("OPENING")  # brainy is imported: what follows is the claim, the replay and the open
    brain = Brain.open(
        args.store,
        flush_bytes=args.flush_bytes,
        compact_at=args.compact_at,
        segment_bytes=args.segment_bytes,
        horizons=Horizons.of(feed_retention=args.feed_retention),
    )
    if brain.role != "writer":
        say(f"ERROR not-writer {json.dumps(brain.writer_block())}")
        return 2
    say(f"READY {brain.writer_block()['claimPath']} {brain.head}")
    budget = Budget(args.close_after)
    threads = [
        threading.Thread(target=writer_thread, args=(brain, t, args, owned, budget), name=f"writer-{t}")
        for t in range(args.writers)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    say("CLOSING")
    say(f"CLOSED {json.dumps(brain.close())}")
    sys.stdin.read()
    return 0


def hold(args: argparse.Namespace) -> int:
    brain = Brain.open(args.store, force=args.force)
    say(f"READY {json.dumps({'role': brain.role, 'block': brain.writer_block(), 'head': brain.head})}")
    for line in sys.stdin:
        words = line.split()
        if not words:
            continue
        command = words[0]
        if command in ("add", "relate"):
            try:
                if command == "add":
                    name, answer = words[1], brain.add({"type": "thing", "id": words[1]})
                else:
                    name = f"{words[1]}->{words[2]}"
                    answer = brain.relate({"from": words[1], "to": words[2], "type": "relatedTo"})
            except R.Refusal as exc:
                say(f"REFUSED {exc.name} {exc.fields.get('reason') or '-'}")
            else:
                say(f"ACK {name} {answer['generation']}")
        elif command == "flush":
            say(f"FLUSHED {brain.flush()}")
        elif command == "compact":
            say(f"COMPACTED {brain.compact()}")
        elif command == "close":
            say(f"CLOSED {json.dumps(brain.close())}")
        elif command == "exit":
            break
        else:
            say(f"ERROR unknown-command {command}")
    sys.stdout.flush()
    os._exit(0)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="mode", required=True)
    c = sub.add_parser("crash")
    c.add_argument("store")
    c.add_argument("--seed", type=int, required=True)
    c.add_argument("--first-seq", type=int, required=True)
    c.add_argument("--writers", type=int, default=1)
    c.add_argument("--doors", choices=("transact", "mixed"), default="transact")
    c.add_argument("--owned", default="")
    c.add_argument("--flush-bytes", type=int, default=16 << 10)
    c.add_argument("--compact-at", type=int, default=3)
    c.add_argument("--segment-bytes", type=int, default=64 << 10)
    c.add_argument("--feed-retention", default=None, help="e.g. 0B: every flushed sealed segment is deleted")
    c.add_argument("--close-after", type=int, default=0)
    c.add_argument("--die-at", default="")
    c.add_argument("--die-nth", type=int, default=1)
    h = sub.add_parser("hold")
    h.add_argument("store")
    h.add_argument("--force", action="store_true")
    args = parser.parse_args()
    return crash(args) if args.mode == "crash" else hold(args)


if __name__ == "__main__":
    sys.exit(main())
