"""Who said a memory: the speaker a remembered line names at its start, lifted from the text
(docs/memory.md, "Speakers").

Agents keep what people said as ``<speaker> (<when>): <what was said>`` (or ``<speaker>: …``), one line a
memory. Left in the text, the prefix decides the ranking: the speaker's name is in every one of their lines,
so a question naming them is nearest to their shortest lines, whatever they said. So the prefix is lifted:
the memory keeps its text as written, its vector is made from what was said alone, and the speaker is kept
as a metadata leaf (``speaker``, lower-cased) that recall favours when a question names them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from brainy.index.projections import WORD

# One to three capitalised words, an optional parenthesised when, a colon and something said. The when is
# kept with the text; only the speaker is lifted, since a date answers a question about when.
_LEAD = re.compile(
    r"^\s*(?P<speaker>[A-Z][\w'’.-]{0,39}(?: [A-Z][\w'’.-]{0,39}){0,2})(?: \((?P<when>[^()\n]{1,60})\))?:[ \t]+(?=\S)"
)
SPEAKER = "speaker"  # the metadata leaf
NAME_WORDS = 3  # a speaker's name is at most this many words, so a query is looked at in runs this long


@dataclass(frozen=True)
class Said:
    speaker: str | None  # lower-cased, its words single-spaced; None when the text names no speaker
    when: str | None  # what the parentheses held, as written
    body: str  # the text without the lifted prefix: what the vector is made from


def said(text: str) -> Said:
    """The speaker, when and body of a memory's text; the whole text as the body when it names no speaker."""
    m = _LEAD.match(text)
    if m is None:
        return Said(None, None, text)
    return Said(" ".join(m.group("speaker").lower().split()), m.group("when"), text[m.end() :])


def body(text: str) -> str:
    """What a memory's vector is made from."""
    return said(text).body


def named(query: str) -> list[str]:
    """Every run of one to NAME_WORDS words of ``query``, lower-cased: the speakers a question could name
    ("Kofi", "Kofi's" and "Mary Jane" among them)."""
    words = WORD.findall(query.lower())
    runs = {" ".join(words[i : i + n]) for n in range(1, NAME_WORDS + 1) for i in range(len(words) - n + 1)}
    return sorted(runs)
