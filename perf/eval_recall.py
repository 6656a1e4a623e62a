"""Recall quality: recall@1 and recall@3 of memory.recall's fusion against its legs alone, on agent memories where
several facts share a subject (DOORS 9.2).

Each subject has five or six facts; each fact has one natural question that names the subject and paraphrases
the rest, so the subject's name is in every one of that subject's memories and the question's other words are
mostly not in the memory it asks for. That is the case a plain RRF over ranks fails: the memories matching
only the name (or "what", "does") outvote the one that answers.

    python perf/eval_recall.py            # the table, one line per fusion
    python perf/eval_recall.py --json     # the same, as JSON

Every fusion runs through recall's own ranking (``brainy.doors.memory.recall.rank``) on a real store with the
real embedder; only the ``Fusion`` differs. The fusion recall ships is the one this measurement chose.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from brainy.doors.memory import recall as RC  # noqa: E402
from brainy.engine import init_store  # noqa: E402
from brainy.engine.brain import Brain  # noqa: E402

# (memory, question): the question names the subject and paraphrases the fact
SET: list[tuple[str, str]] = [
    ("Alice prefers green tea to coffee", "What does Alice like to drink?"),
    ("Alice's daughter starts school in September", "When does Alice's kid begin classes?"),
    ("Alice works night shifts as a nurse at St. Mary's", "What is Alice's job?"),
    ("Alice is allergic to penicillin", "Which medication must Alice avoid?"),
    ("Alice lives in Porto with her husband Rui", "Where is Alice based?"),
    ("Alice's birthday is on the 14th of March", "When should we celebrate Alice turning a year older?"),
    ("Bob drives a blue 2015 Volvo estate", "What car does Bob have?"),
    ("Bob is training for the Berlin marathon in the autumn", "What race is Bob preparing for?"),
    ("Bob is vegetarian and does not eat fish either", "What can't Bob have for dinner?"),
    ("Bob manages the payments team at the bank", "Which group does Bob lead at work?"),
    ("Bob speaks fluent Japanese after living in Osaka", "Which foreign language does Bob know?"),
    ("Bob's flat is on the fourth floor with no lift", "How many stairs does Bob climb to get home?"),
    ("Project Atlas ships its public beta on June 3", "When is the Atlas release going out?"),
    ("Project Atlas uses PostgreSQL 16 for storage", "Which database sits behind Atlas?"),
    ("Project Atlas is owned by the platform team in Lisbon", "Who is responsible for Atlas?"),
    ("Project Atlas has a budget of 120,000 euros for the year", "How much money can Atlas spend?"),
    ("Project Atlas deploys to Kubernetes on AWS in eu-west-1", "Where does Atlas run in production?"),
    ("The customer Acme Corp renews its contract every January", "When is Acme's renewal due?"),
    ("Acme Corp's main contact is Dana Whitfield, their CTO", "Who should I talk to at Acme?"),
    ("Acme Corp complained about slow invoice exports last week", "What was Acme unhappy about recently?"),
    ("Acme Corp pays in US dollars by wire transfer", "How does Acme settle its bills?"),
    ("Acme Corp has 340 seats on the enterprise plan", "How many licences has Acme bought?"),
    ("The user prefers answers in British English", "Which spelling should I use with the user?"),
    (
        "The user wants code examples in Python rather than JavaScript",
        "Which programming language should samples be in for the user?",
    ),
    ("The user is in the Central European time zone", "What hours does the user keep?"),
    ("The user dislikes long preambles and wants the answer first", "How should I structure replies to the user?"),
    ("The user's laptop is a 2021 MacBook Pro with an M1 chip", "What computer does the user work on?"),
    ("Grandma Rosa's lasagne recipe uses béchamel, not ricotta", "What goes into Rosa's lasagne?"),
    ("Grandma Rosa takes blood pressure pills every morning", "What medicine does Rosa need daily?"),
    ("Grandma Rosa gets confused by video calls and prefers the phone", "How is it best to reach Rosa?"),
    ("Grandma Rosa moved into the Oak Lane care home in 2023", "Where does Rosa live now?"),
    ("Grandma Rosa loves crossword puzzles from the Sunday paper", "What hobby keeps Rosa busy?"),
    (
        "The office wifi password changes on the first Monday of each month",
        "How often is the office network key rotated?",
    ),
    ("The office closes at 6 pm on Fridays", "Until when is the office open at the end of the week?"),
    ("The office printer on floor 2 jams with thick paper", "Which printer in the office gives trouble?"),
    ("The office kitchen is cleaned by a service on Wednesdays", "When does someone tidy the office kitchen?"),
    ("The office parking is reserved for visitors before 10 am", "Can I leave my car at the office in the morning?"),
    ("Max the dog needs his heartworm tablet on the first of the month", "When does Max get his medicine?"),
    ("Max the dog is scared of fireworks and hides under the bed", "What frightens Max?"),
    ("Max the dog eats grain-free kibble twice a day", "What is Max fed?"),
    ("Max the dog was adopted from the shelter in 2019", "Where did Max come from?"),
]

FUSIONS = {
    "meaning alone": RC.MEANING_ONLY,
    "words alone": RC.WORDS_ONLY,
    "plain RRF (k 60)": RC.Fusion(text=1.0, rrf=60, stop_words=False),
    "RRF, stop-word-free words": RC.Fusion(text=1.0, rrf=60),
    "0.7 meaning + 0.3 max-normalised BM25": RC.Fusion(semantic=0.7, text=0.3),
    "meaning + 0.05 words": RC.Fusion(text=0.05),
    "meaning + 0.2 words": RC.Fusion(text=0.2),
    f"shipped: meaning + {RC.TEXT_WEIGHT} words": RC.SHIPPED,
}


def measure() -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as directory:
        init_store(Path(directory) / "eval")
        with Brain.open(Path(directory) / "eval") as brain:
            ids = [
                brain.call("memory.remember", {"text": text, "dedupe": False}, caller="person:eval")["id"]
                for text, _ in SET
            ]
            view = brain.at()
            narrowed = RC.narrowing(RC.M.KNOWN)
            for name, fusion in FUSIONS.items():
                at1 = at3 = 0
                for want, (_, question) in zip(ids, SET):
                    hits, _ = RC.rank(view, question, narrowed, 3, fusion)
                    got = [h["memory"]["id"] for h in hits]
                    at1 += got[:1] == [want]
                    at3 += want in got
                out[name] = {"recall@1": round(at1 / len(SET), 3), "recall@3": round(at3 / len(SET), 3)}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    figures = measure()
    if parser.parse_args().json:
        print(json.dumps({"memories": len(SET), "fusions": figures}, indent=2))
        return
    print(f"{len(SET)} memories, {len(SET)} questions")
    for name, f in figures.items():
        print(f"{name:<40} recall@1 {f['recall@1']:.3f}  recall@3 {f['recall@3']:.3f}")


if __name__ == "__main__":
    main()
