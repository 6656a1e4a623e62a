"""A brainy writer in its own process, for the crash and lease tests (run with ``sys.executable``).

It speaks line by line on stdout, flushing after every line, so a parent that kills it with
SIGKILL still holds everything it printed.

    writer.py crash STORE --seed S --first-seq N [--flush-bytes B] [--compact-at C]
                          [--segment-bytes G] [--close-after M]

Opens STORE as its writer and prints ``READY <claimPath> <head>``, then commits transactions
forever, seq = N, N+1, ...: each adds K entities (K in 1..8, drawn from the seed) with natural
keys ``c<seq>-<j>`` and metadata ``{"seq", "j", "of": K}``, and relates ``c<seq>-0`` to the first
R of the others (R often 0). Before a commit it prints ``TRY <seq> <K> <R>``; once the commit has
returned (durable) it prints ``ACK <seq> <K> <generation>``. With ``--close-after M`` it prints
``CLOSING`` after M commits, closes the brain, prints ``CLOSED <json>`` and waits for stdin to
end.

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
import json
import os
import random
import sys

from brainy.contract import refusals as R
from brainy.engine import Brain


def say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def crash(args: argparse.Namespace) -> int:
    brain = Brain.open(
        args.store, flush_bytes=args.flush_bytes, compact_at=args.compact_at, segment_bytes=args.segment_bytes
    )
    if brain.role != "writer":
        say(f"ERROR not-writer {json.dumps(brain.writer_block())}")
        return 2
    say(f"READY {brain.writer_block()['claimPath']} {brain.head}")
    rng = random.Random(args.seed)
    seq = args.first_seq
    done = 0
    while True:
        k = rng.randint(1, 8)
        r = rng.randint(1, k - 1) if k > 1 and rng.random() < 0.4 else 0
        ops = [
            {"door": "add", "args": {"type": "thing", "id": f"c{seq}-{j}", "metadata": {"seq": seq, "j": j, "of": k}}}
            for j in range(k)
        ]
        ops += [
            {"door": "relate", "args": {"from": f"c{seq}-0", "to": f"c{seq}-{j}", "type": "relatedTo"}}
            for j in range(1, r + 1)
        ]
        say(f"TRY {seq} {k} {r}")
        answer = brain.transact({"ops": ops})
        say(f"ACK {seq} {k} {answer['generation']}")
        seq += 1
        done += 1
        if args.close_after and done == args.close_after:
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
    c.add_argument("--flush-bytes", type=int, default=16 << 10)
    c.add_argument("--compact-at", type=int, default=3)
    c.add_argument("--segment-bytes", type=int, default=64 << 10)
    c.add_argument("--close-after", type=int, default=0)
    h = sub.add_parser("hold")
    h.add_argument("store")
    h.add_argument("--force", action="store_true")
    args = parser.parse_args()
    return crash(args) if args.mode == "crash" else hold(args)


if __name__ == "__main__":
    sys.exit(main())
