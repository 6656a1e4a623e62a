"""Long two-person conversations over many dated sessions, with questions labelled by the turns that answer
them: the set ``perf/eval_conversations.py`` measures memory.recall on. A benchmark asset, not product code.

Made from a seed and nothing else (no network, no language model): ``conversation(seed)`` is the same every
time. Each conversation has two speakers who talk over 15 to 30 sessions, a few days to three weeks apart, 15
to 40 turns each. Between the turns that carry a fact there is small talk, much of it on the facts' own topics
(work, the city, pets, music, food, running…) so a word match is no proof of an answer. Each speaker has a life
that changes as the sessions go by (moves to another city, leaves a job and starts another, adopts a pet, takes
up a hobby), fixed facts (an instrument, an allergy, a degree…), dated events told with a relative date ("last
Saturday"), tastes told in passing, and a relative or friend who is named once and talked about by name later.

Every fact is told in exactly one turn, and no other turn repeats its answer, so a question's evidence is
exact. Questions come in four categories:

- ``single-fact``: one turn answers ("What instrument does Maya play?"); where a fact changed, the question
  asks for the latest ("Which city is Maya living in now?"), and the earlier turns are there to mislead.
- ``multi-hop``: two turns, neither enough alone ("Which city did Maya move to after she left the bakery?",
  "What does Maya's sister do for work?" when the sister is named in one turn and her job told by name in another).
- ``temporal``: when something happened, answered by the turn's session date or the relative date in it.
- ``open-domain``: what a speaker might like, answered by the two or three turns where the taste shows.

The questions paraphrase the turns (their templates are written apart from the turns'); ``answer`` is kept for
reading a miss, recall is scored on ``evidence`` only.

The split is fixed by the seed: even seeds are ``dev`` (tune on these), odd seeds ``held-out`` (report only).
"""

from __future__ import annotations

import datetime as dt
import random
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

SEEDS = tuple(range(12))
DEV = tuple(s for s in SEEDS if s % 2 == 0)
HELD_OUT = tuple(s for s in SEEDS if s % 2 == 1)
CATEGORIES = ("single-fact", "multi-hop", "temporal", "open-domain")

MAX_BEATS = 8  # fact turns in one session, at most: with their lead-ins, reactions and filler they fit in 40 turns


def split_of(seed: int) -> str:
    """The split a conversation belongs to: even seeds ``dev``, odd seeds ``held-out``."""
    return "dev" if seed % 2 == 0 else "held-out"


# -- what a conversation is -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Turn:
    """One thing one speaker said: ``id`` is ``<conversation>:D<session>:<n>``, both counted from 1."""

    id: str
    session: int
    speaker: str
    date: dt.date
    text: str

    def stored(self) -> str:
        """The turn as memory.remember keeps it: ``<speaker> (<session date>): <text>``."""
        return f"{self.speaker} ({day(self.date)}): {self.text}"


@dataclass(frozen=True)
class Question:
    """A question, its category, the ids of the turns that answer it, and the answer for a reader."""

    id: str
    category: str
    text: str
    evidence: tuple[str, ...]
    answer: str


@dataclass(frozen=True)
class Session:
    number: int
    date: dt.date
    turns: tuple[Turn, ...]


@dataclass(frozen=True)
class Conversation:
    seed: int
    name: str
    speakers: tuple[str, str]
    sessions: tuple[Session, ...]
    questions: tuple[Question, ...]

    @property
    def split(self) -> str:
        return split_of(self.seed)

    @property
    def turns(self) -> list[Turn]:
        return [t for s in self.sessions for t in s.turns]


# -- speaking from templates ----------------------------------------------------------------------------------

_CHOICE = re.compile(r"\[([^\[\]]*)\]")
MONTHS = (
    "January February March April May June July August September October November December".split()
)  # not strftime's %B, which follows the locale
WEEKDAYS = "Monday Tuesday Wednesday Thursday Friday Saturday Sunday".split()


def choose(rng: random.Random, template: str) -> str:
    """Each ``[a|b|c]`` of a template replaced by one of its choices, innermost first."""
    text = template
    while (m := _CHOICE.search(text)) is not None:
        text = text[: m.start()] + rng.choice(m.group(1).split("|")) + text[m.end() :]
    return text


def say(rng: random.Random, template: str, **slots: str) -> str:
    """A template spoken: its choices made, then ``{slots}`` filled; spaces tidied and the first letter raised."""
    return fill(choose(rng, template), **slots)


def fill(text: str, **slots: str) -> str:
    text = text.format(**slots)
    text = re.sub(r"\s+", " ", text).strip()
    text = re.sub(r"\s+([,.!?])", r"\1", text)
    return text[:1].upper() + text[1:]


def day(d: dt.date) -> str:
    return f"{d.day} {MONTHS[d.month - 1]} {d.year}"


def _last(d: dt.date, weekday: int) -> dt.date:
    """The latest ``weekday`` strictly before ``d``."""
    return d - dt.timedelta(days=(d.weekday() - weekday) % 7 or 7)


def _month_before(d: dt.date) -> str:
    m = d.month - 2
    return f"{MONTHS[m % 12]} {d.year - (m < 0)}"


# (phrase put in the turn, the date it names as an answer)
WHEN: list[tuple[str, Callable[[dt.date], str]]] = [
    ("yesterday", lambda d: day(d - dt.timedelta(days=1))),
    ("the day before yesterday", lambda d: day(d - dt.timedelta(days=2))),
    ("two days ago", lambda d: day(d - dt.timedelta(days=2))),
    ("three days ago", lambda d: day(d - dt.timedelta(days=3))),
    ("last Saturday", lambda d: day(_last(d, 5))),
    ("last Sunday", lambda d: day(_last(d, 6))),
    ("last Friday", lambda d: day(_last(d, 4))),
    ("on Tuesday", lambda d: day(_last(d, 1))),
    ("last weekend", lambda d: f"the weekend of {day(_last(d, 5))}"),
    ("last week", lambda d: f"the week before {day(d)}"),
    ("a few days ago", lambda d: f"a few days before {day(d)}"),
    ("last month", _month_before),
    ("this morning", day),
    ("earlier today", day),
    ("today", day),
]


def _when(rng: random.Random, d: dt.date) -> tuple[str, str]:
    phrase, answer = rng.choice(WHEN)
    return phrase, answer(d)


class Deck:
    """Items of one pool handed out without repeats, so no two facts of a conversation share an answer."""

    def __init__(self, rng: random.Random, items: Sequence) -> None:
        self._items = list(items)
        rng.shuffle(self._items)

    def take(self):
        return self._items.pop()


# -- the world: names, places, jobs, animals, tastes ---------------------------------------------------------

WOMEN = """Maya Caroline Melanie Priya Hannah Sofia Ingrid Amara Leila Nadia Rosa Yuki Chloe Fatima Greta Imani
Jasmine Keiko Lucia Marta Noor Olivia Paula Renata Sana Tamsin Uma Vera Wen Zoe Ada Bianca Daria Elif Freya Gemma
Iris Joanna Kira Lena Mira Nell Orla Pia Ruth Selma Thea Wanda""".split()
MEN = """Tom Jon Raj Omar Daniel Mateo Kofi Lars Hiro Felix Andre Bruno Carlos Dev Emil Farid Gabriel Henrik
Ivan Jamal Kenji Leo Marco Nikhil Oscar Pablo Quinn Rafael Sami Theo Umar Viktor Wes Yusuf Zack Aaron Ben Caleb
Diego Ezra Finn Gus Hugo Idris Joel Karl Luca Milo Nils""".split()
PRONOUNS = {"f": ("she", "her", "her"), "m": ("he", "him", "his")}

CITIES = """Denver Portland Austin Lisbon Glasgow Seattle Boston Chicago Toronto Vancouver Melbourne Dublin Bristol
Leeds Porto Valencia Montreal Atlanta Nashville Phoenix Minneapolis Pittsburgh Edinburgh Manchester Cork Oslo
Copenhagen Hamburg Rotterdam Wellington Auckland Calgary Sacramento Tucson Savannah Halifax Brighton Belfast
Marseille Bologna""".split()
TOWNS = """Galway Boise Flagstaff Asheville Whitby Durango Taos Bend Kendal Tralee Nelson Lund Bergen Hobart
Duluth Missoula Ithaca Burlington Truro Moab""".split()
PARKS = ["Yosemite", "the Lake District", "Big Sur", "the Cairngorms", "Zion", "Acadia", "Joshua Tree",
         "the Peak District", "Olympic National Park", "Snowdonia", "Banff", "the Dolomites"]  # fmt: skip
BANDS = ["Fleetwood Mac", "Arctic Monkeys", "Lizzo", "Radiohead", "Florence and the Machine", "the Killers",
         "Bon Iver", "Paramore", "Coldplay", "Haim", "Vampire Weekend", "the National", "Tame Impala",
         "Mumford and Sons"]  # fmt: skip
PET_NAMES = """Biscuit Pepper Miso Juniper Waffles Luna Ziggy Clementine Moose Noodle Pickle Olive Bean Pixel
Mochi Rocket Toffee Basil Sprout Maple Ginger Nacho Pumpkin Hazel Bandit Cosmo Dumpling Fig""".split()

# (role, the workplace as named, the workplace as a short noun phrase)
JOBS = [
    ("pastry chef", "Sunrise Bakery", "the bakery"),
    ("barista", "Blue Door Coffee", "the coffee shop"),
    ("junior architect", "Holm & Vance", "the architecture firm"),
    ("ward nurse", "St. Anne's Hospital", "the hospital"),
    ("software tester", "Brightloop", "the tech startup"),
    ("primary school teacher", "Maple Street Elementary", "the school"),
    ("sous chef", "a tapas restaurant called Olivo", "the restaurant"),
    ("librarian", "the Central Library", "the library"),
    ("bike mechanic", "Spoke & Chain", "the bike shop"),
    ("paralegal", "Ortiz Legal", "the law firm"),
    ("data analyst", "Northstar Insurance", "the insurance company"),
    ("florist", "Petal & Stem", "the flower shop"),
    ("physiotherapist", "the Riverside Sports Clinic", "the clinic"),
    ("zookeeper", "the city zoo", "the zoo"),
    ("sales rep", "Copperhill Brewery", "the brewery"),
    ("graphic designer", "an ad agency called Loud", "the agency"),
    ("lab technician", "a vaccine lab", "the lab"),
    ("hotel receptionist", "the Grand Harbour Hotel", "the hotel"),
    ("dental hygienist", "Smile Street Dental", "the dental practice"),
    ("bookkeeper", "a family accounting firm", "the accounting firm"),
    ("carpenter", "Oakline Joinery", "the joinery"),
    ("museum guide", "the Natural History Museum", "the museum"),
    ("radio producer", "the local radio station", "the radio station"),
    ("vet assistant", "Paws & Claws Veterinary", "the vet clinic"),
    ("copy editor", "a small publishing house", "the publisher"),
    ("personal trainer", "Ironworks Gym", "the gym"),
]
# (species as said, how a question names it)
PETS = [
    ("golden retriever puppy", "dog"),
    ("beagle", "dog"),
    ("rescue greyhound", "dog"),
    ("tabby kitten", "cat"),
    ("black cat", "cat"),
    ("lop-eared rabbit", "rabbit"),
    ("cockatiel", "bird"),
    ("tortoise", "tortoise"),
    ("hamster", "hamster"),
    ("guinea pig", "guinea pig"),
    ("leopard gecko", "lizard"),
    ("ferret", "ferret"),
]
# (activity as said, what kind of thing it is, the -ing form a question uses)
HOBBIES = [
    ("pottery", "craft", "throwing pots"),
    ("knitting", "craft", "knitting"),
    ("woodcarving", "craft", "carving wood"),
    ("rock climbing", "sport", "climbing"),
    ("bouldering", "sport", "bouldering"),
    ("salsa dancing", "dance", "dancing salsa"),
    ("tango", "dance", "dancing tango"),
    ("birdwatching", "outdoor pastime", "watching birds"),
    ("kayaking", "water sport", "paddling"),
    ("paddleboarding", "water sport", "paddleboarding"),
    ("chess", "game", "playing chess"),
    ("watercolour painting", "art", "painting"),
    ("film photography", "art", "taking photos"),
    ("beekeeping", "outdoor pastime", "keeping bees"),
    ("improv comedy", "performing art", "doing improv"),
    ("sourdough baking", "kitchen project", "baking bread"),
]
RELATIONS = [("sister", "f"), ("brother", "m"), ("cousin", "f"), ("cousin", "m"), ("best friend", "f"),
             ("best friend", "m"), ("roommate", "f"), ("roommate", "m")]  # fmt: skip


@dataclass
class Attribute:
    """A fact about a speaker that does not change: its values, how the speaker tells it (first person), how the
    other asks about it, how a question asks it, and how the other reacts."""

    key: str
    values: list[str]
    tell: list[str]
    ask: list[str]
    lead: list[str] = field(default_factory=list)
    react: list[str] = field(default_factory=list)


ATTRIBUTES = [
    Attribute(
        "instrument",
        "cello violin piano ukulele drums saxophone trumpet banjo flute clarinet mandolin accordion harp".split()
        + ["bass guitar", "double bass"],
        [
            "[I've been playing|I've played] the {v} since I was [nine|a kid|twelve|in middle school]",
            "[Honestly|Funny enough], the {v} is how I [unwind|switch off] — I [practise|play] most evenings",
            "I [finally|just] had my {v} [serviced|repaired], it sounds [amazing|so much better] [now|again]",
            "My neighbours [must|probably] hate me, I [practise|rehearse] the {v} every night",
        ],
        [
            "What instrument does {P} play?",
            "Which musical instrument can {P} play?",
            "What does {P} make music on?",
        ],
        ["Are you musical at all, {P}?", "Do you play anything? Music-wise I mean."],
        [
            "[Oh|Wow], I [never knew|didn't know] you were musical!",
            "That's [so cool|lovely]! Play me something sometime.",
        ],
    ),
    Attribute(
        "allergy",
        "peanuts shellfish strawberries kiwi mustard celery".split() + ["tree nuts", "soy", "pineapple"],
        [
            "I have to be [careful|so careful], I'm [really|seriously] allergic to {v}",
            "I can't touch anything with {v} in it — I [swell up|break out in hives|end up at the doctor]",
            "[Last time|Once] I [accidentally|by mistake] ate {v} I ended up in the ER, so I [check every label|always ask the waiter] now",
        ],
        [
            "What food allergy does {P} have?",
            "Which food does {P} need to avoid for health reasons?",
            "What can {P} not eat without a reaction?",
        ],
        ["Anything you can't eat? I'm planning the menu."],
        ["[Yikes|Oh no], that must make eating out [tricky|stressful]."],
    ),
    Attribute(
        "hometown",
        TOWNS,
        [
            "I grew up in {v}, [so|and] this kind of weather is nothing [new|to me]",
            "Back in {v}, where I spent my childhood, we [used to|would] [sled|swim in the river] [every winter|all summer]",
            "[Whenever|Every time] I [visit|go back to] {v} it feels like I'm [ten|a kid] again",
        ],
        ["Where is {P} originally from?", "What is {P}'s hometown?", "Which town is {P} from?"],
        ["Where did you grow up, by the way?"],
        ["[Oh|Ah], I've [always wanted to go there|heard it's beautiful]!"],
    ),
    Attribute(
        "car",
        [
            "a beat-up 2009 Honda Civic",
            "a red Mini Cooper",
            "an old Subaru Outback",
            "a Toyota Prius",
            "a vintage VW camper van",
            "a Tesla Model 3",
            "a Ford pickup",
            "a tiny Fiat 500",
            "a Volvo estate",
            "a Jeep Wrangler",
        ],  # fmt: skip
        [
            "I drive {v}, [it's ancient|it's not pretty] but it [gets me around|never lets me down]",
            "[Ugh|So], {v} made a [weird|horrible] noise [on the way to work|this morning], [garage again|fingers crossed]",
            "[Washed|Vacuumed] {v} [for the first time in months|at last] — you could [see the seats|breathe in there] again",
        ],
        ["What car does {P} drive?", "What vehicle does {P} own?", "What does {P} get around in?"],
        ["Are you driving there or taking the train?"],
        ["[Ha|Haha], [classic|at least it runs]."],
    ),
    Attribute(
        "language",
        "Japanese Portuguese Korean Italian German Mandarin Spanish French Arabic Greek Dutch Turkish Swahili Polish".split(),
        [
            "I've been [doing|practising] {v} on [an app|Duolingo] every night, [my streak is at 200 days|it's slowly sticking]",
            "My {v} tutor says my [pronunciation|grammar] is [getting better|finally improving]",
            "I [managed|got through] a whole conversation in {v} [yesterday|with a waiter] without [switching|panicking]",
        ],
        [
            "Which language is {P} studying?",
            "What foreign language is {P} trying to learn?",
            "What second language is {P} working on?",
        ],
        ["Still doing your language lessons?"],
        ["[Impressive|Nice]! I gave up on [French|Spanish] after a week."],
    ),
    Attribute(
        "sport",
        [
            "goalkeeper in a Sunday league football team",
            "point guard in a rec basketball league",
            "doubles tennis every Thursday",
            "ultimate frisbee on Wednesdays",
            "beach volleyball most weekends",
            "water polo at the local pool",
            "netball with some old school friends",
            "squash at lunch",
            "hockey in a beer league",
            "cricket for the village club",
        ],  # fmt: skip
        [
            "I play {v}, [it's the highlight of my week|it keeps me sane]",
            "[Bruised|Sore] again — that's what I get for playing {v}",
        ],
        ["Which sport does {P} play regularly?", "What game does {P} compete in every week?"],
        ["Do you still do any sport?"],
        ["[Ha|Nice], [stay in one piece|sounds fun]!"],
    ),
    Attribute(
        "degree",
        [
            "marine biology",
            "architecture",
            "philosophy",
            "accounting",
            "graphic design",
            "chemistry",
            "history",
            "computer science",
            "economics",
            "linguistics",
            "geology",
            "astrophysics",
            "anthropology",
        ],  # fmt: skip
        [
            "[Back when I was|When I was] at uni I [did|studied] {v}, [believe it or not|if you can believe it]",
            "My degree is in {v}, though I [barely use it|haven't used it in years]",
        ],
        ["What did {P} study in college?", "What is {P}'s university degree in?", "What subject did {P} major in?"],
        ["What did you study, actually?"],
        ["[Really?|Oh,] I [never knew that|wouldn't have guessed]!"],
    ),
    Attribute(
        "fear",
        [
            "spiders",
            "heights",
            "deep water",
            "flying",
            "clowns",
            "snakes",
            "the dentist",
            "thunderstorms",
            "bees",
            "crowds",
        ],  # fmt: skip
        [
            "I'm [absolutely|genuinely] terrified of {v}, [always have been|since I was little]",
            "I get [so scared|completely freaked out] by {v}, [don't laugh|I know it's silly]",
        ],
        ["What is {P} afraid of?", "What scares {P} most?", "What phobia does {P} have?"],
        [],
        ["[Ha|Oh], [fair enough|you're not alone there]."],
    ),
    Attribute(
        "drink",
        [
            "oat flat white",
            "double espresso",
            "chai latte",
            "matcha latte",
            "iced americano",
            "cortado",
            "hot chocolate with cinnamon",
            "mocha with extra cream",
        ],  # fmt: skip
        [
            "My [usual|go-to] order is a {v}, [every single morning|no exceptions]",
            "I can't start the day without a {v}, [it's a ritual|don't talk to me before]",
        ],
        ["What does {P} usually order at a café?", "What is {P}'s regular coffee-shop drink?"],
        ["I'm grabbing coffee, want anything?"],
        ["[Noted|Good to know] for next time!"],
    ),
    Attribute(
        "birthday",
        [
            "the 3rd of July",
            "the 14th of February",
            "the 29th of October",
            "the 1st of April",
            "the 22nd of August",
            "the 9th of December",
            "the 17th of March",
            "the 5th of June",
        ],  # fmt: skip
        [
            "My birthday's on {v}, [I'm thinking|maybe] a small dinner this year",
            "[Don't forget|Reminder], I turn [thirty|a year older] on {v}!",
        ],
        ["When is {P}'s birthday?", "On what date does {P} celebrate turning a year older?"],
        ["When's your birthday again?"],
        ["[Noted|Putting it in my calendar]!"],
    ),
    Attribute(
        "book",
        [
            "Pride and Prejudice",
            "The Hobbit",
            "Dune",
            "Little Women",
            "One Hundred Years of Solitude",
            "Beloved",
            "The Secret History",
            "Jane Eyre",
            "The Left Hand of Darkness",
            "East of Eden",
            "Rebecca",
        ],  # fmt: skip
        [
            "I'm rereading {v} for the [third|fifth] time, it's my [comfort read|all-time favourite]",
            "[Nothing|No book] will ever beat {v} for me, I [cry|get goosebumps] every time",
        ],
        ["Which novel does {P} love most?", "What is {P}'s favourite book of all time?"],
        ["Reading anything good?"],
        ["[Oh|Ooh], good [choice|taste]!"],
    ),
    Attribute(
        "dream",
        [
            "an astronaut",
            "a vet",
            "a marine biologist",
            "a firefighter",
            "a pilot",
            "a ballerina",
            "a rock star",
            "a detective",
        ],  # fmt: skip
        [
            "When I was little I wanted to be {v} [so badly|more than anything]",
            "[Six-year-old me|Little me] [was sure|was convinced] I'd grow up to be {v}",
        ],
        ["What did {P} dream of becoming as a child?", "What career did {P} imagine as a small kid?"],
        [],
        ["[Aww|Ha], [that's adorable|love that]!"],
    ),
    Attribute(
        "routine",
        [
            "swim laps at six",
            "do twenty minutes of yoga",
            "run five kilometres before breakfast",
            "write three pages in my journal",
            "walk to the river and back",
            "do a crossword with my coffee",
        ],  # fmt: skip
        [
            "I [always|try to] {v} [every morning|first thing], [it sets me up|it's non-negotiable]",
            "[Every day|Each morning] starts the same: I {v} [before anything else|before work]",
        ],
        ["How does {P} begin {their} mornings?", "How does {P} kick off each day?"],
        [],
        ["[Wow|Impressive], I can barely get out of bed."],
    ),
    Attribute(
        "volunteer",
        [
            "at the animal shelter",
            "at a food bank",
            "tutoring kids in maths",
            "at the community garden",
            "at a hospice",
            "with a river clean-up group",
            "at the refugee centre",
            "reading to kids at the library",
        ],  # fmt: skip
        [
            "I volunteer {v} on Saturdays, [it's the best part of my week|it really grounds me]",
            "[Spent|Did] my usual Saturday shift {v} — [exhausting but worth it|always humbling]",
        ],
        ["How does {P} give back to the community?", "What unpaid work does {P} do on weekends?"],
        [],
        ["That's [really lovely|so kind] of you."],
    ),
    Attribute(
        "siblings",
        ["the youngest of four", "the oldest of five", "one of twins", "the middle of three kids"],
        [
            "I'm {v}, [so|which explains a lot about] [holidays are loud|me]",
            "[Growing up|As a kid], being {v} [meant|taught me] a lot",
        ],
        ["How many brothers and sisters does {P} have?", "Where does {P} fall in {their} family?"],
        [],
        ["[Ha|Oh], that explains [a lot|so much]!"],
    ),
    Attribute(
        "collection",
        [
            "vinyl records",
            "vintage postcards",
            "fountain pens",
            "succulents",
            "board games",
            "enamel pins",
            "old maps",
            "snow globes",
        ],  # fmt: skip
        [
            "I have [way too many|over two hundred] {v}, my shelves are [full|groaning]",
            "[Found|Bought] [two|three] more {v} at the flea market, [don't judge me|my collection is out of control]",
        ],
        ["What does {P} collect?", "What hoard of things does {P} keep?"],
        [],
        ["[Ha|Haha], [show me sometime|every house needs one]!"],
    ),
    Attribute(
        "commute",
        ["ferry", "night bus", "tram", "train", "cargo bike", "e-scooter"],
        [
            "I take the {v} to work every day, [it's actually relaxing|I read the whole way]",
            "The {v} [was late|broke down] again [this morning|today], [so I was late|classic]",
        ],
        ["How does {P} get to work?", "What does {P} travel to the office on?"],
        [],
        ["[Ugh|Oof], [commutes are the worst|that's annoying]."],
    ),
    Attribute(
        "tattoo",
        [
            "a small compass on my wrist",
            "a fern on my shoulder",
            "a whale on my ankle",
            "my grandma's handwriting on my arm",
            "a moon on my finger",
        ],  # fmt: skip
        [
            "[I finally got|Guess what, I got] a tattoo: {v} — [no regrets|it healed perfectly]",
            "[Mum|My mum] still hasn't noticed my new tattoo, {v}",
        ],
        ["What tattoo does {P} have?", "What ink does {P} have, and where?"],
        [],
        ["[Ooh|Oh], show me!"],
    ),
]


@dataclass
class Event:
    """A dated event (the temporal category): how it is told, with ``{when}``; how a question asks when; and its
    gist, for a multi-hop question asking where the speaker lived at the time."""

    key: str
    tell: list[str]
    ask: list[str]
    gist: str


EVENTS = [
    Event(
        "half-marathon",
        [
            "I ran the [city|spring] half marathon {when}! [My legs are dead|Finished in under two hours]",
            "[Did it|Made it] — 21 kilometres {when}, [first half marathon ever|and I didn't walk once]",
        ],
        ["When did {P} complete a half marathon?", "On what date did {P} do the 21k race?"],
        "completed a half marathon",
    ),
    Event(
        "concert",
        [
            "I saw {band} live {when}, [best show ever|my ears are still ringing]",
            "{band} played [the arena|an outdoor show] {when} and I was [in the front row|screaming every word]",
        ],
        ["When did {P} go to see {band} perform?", "When was {P} at the {band} gig?"],
        "went to the {band} show",
    ),
    Event(
        "wisdom-teeth",
        ["I had my wisdom teeth [out|removed] {when}, [living on soup|my face is so swollen]"],
        ["When did {P} have {their} dental surgery?", "When did {P} get teeth pulled?"],
        "had dental surgery",
    ),
    Event(
        "driving-test",
        [
            "I passed my driving test {when}! [Third time lucky|Finally legal]",
            "[Guess who's|I'm officially] allowed on the road — passed the test {when}",
        ],
        ["When did {P} get {their} driver's licence?", "When did {P} qualify to drive?"],
        "got a driver's licence",
    ),
    Event(
        "camping",
        [
            "We went camping in {park} {when} — [it rained the whole time|I saw so many stars]",
            "[Pitched a tent|Slept in a tent] in {park} {when}, [freezing but magical|never again]",
        ],
        ["When did {P} spend nights outdoors in {park}?", "When was {P}'s trip to {park}?"],
        "stayed out in {park}",
    ),
    Event(
        "wedding",
        [
            "My cousin's wedding was {when}, I danced until [2am|the band packed up]",
            "[Gave|Made] a speech at my cousin's wedding {when} and [cried|everyone laughed]",
        ],
        ["When did {P} attend a family wedding?", "When did {P}'s cousin get married?"],
        "went to a cousin's wedding",
    ),
    Event(
        "redecorating",
        ["Spent {when} painting the living room [sage green|navy|terracotta], [my arms hurt|it looks amazing]"],
        ["When did {P} redecorate {their} lounge?", "When did {P} give {their} front room a new colour?"],
        "repainted the lounge",
    ),
    Event(
        "conference",
        [
            "I flew to {city} for a conference {when}, [so many talks|hardly slept]",
            "[Work sent me|I got sent] to {city} for a conference {when}",
        ],
        ["When did {P} travel to {city} for work?", "When was {P}'s business trip to {city}?"],
        "went on a work trip to {city}",
    ),
    Event(
        "ankle",
        ["I [sprained|twisted] my ankle {when} [on the stairs|chasing the bus], [ice pack life|so annoying]"],
        ["When did {P} hurt {their} ankle?", "When did {P} get injured on {their} foot?"],
        "injured an ankle",
    ),
    Event(
        "bike",
        ["I bought a [road bike|second-hand bike|folding bike] {when}, [already planning rides|my legs are not ready]"],
        ["When did {P} purchase a bicycle?", "When did {P} get {their} new set of wheels for cycling?"],
        "bought a bicycle",
    ),
    Event(
        "dinner-party",
        [
            "I hosted a dinner party {when}, [made lasagne for ten people|nobody left until midnight]",
            "[Had|Threw] a dinner party {when} — [first time hosting|the dishes took all morning]",
        ],
        ["When did {P} have friends over for a big meal?", "When did {P} cook for a crowd at home?"],
        "hosted friends for dinner",
    ),
    Event(
        "baking-contest",
        [
            "I entered a baking contest {when} and came [second|third]!",
            "[My lemon tart|My carrot cake] [won a ribbon|placed] at the village bake-off {when}",
        ],
        ["When did {P} compete in a baking competition?", "When did {P} enter a bake-off?"],
        "entered a bake-off",
    ),
    Event(
        "grandparents",
        [
            "I visited my grandparents in {town} {when}, [Grandma made pie|they look so well]",
            "[Drove|Went] up to {town} {when} to see my grandparents",
        ],
        [
            "When did {P} go to see {their} grandparents?",
            "When did {P} make a trip to visit {their} grandma and grandpa?",
        ],
        "visited grandparents",
    ),
    Event(
        "phone",
        [
            "I lost my phone on the bus {when}, [total nightmare|still haven't found it]",
            "[Left|Dropped] my phone [in a taxi|at the gym] {when} and it's gone",
        ],
        ["When did {P} misplace {their} mobile?", "When did {P} lose {their} cell?"],
        "lost a phone",
    ),
    Event(
        "haircut",
        ["I got a [drastic|really short] haircut {when}, [chopped it all off|barely recognise myself]"],
        ["When did {P} change {their} hairstyle?", "When did {P} go for a big new look at the hairdresser?"],
        "got a drastic new hairstyle",
    ),
    Event(
        "skydiving",
        ["I went skydiving {when}!! [Still shaking|Never felt so alive]"],
        ["When did {P} jump out of a plane?", "When did {P} do a parachute jump?"],
        "did a parachute jump",
    ),
    Event(
        "cooking-class",
        ["I took a [Thai|pasta-making|dumpling] cooking class {when}, [so much fun|I'm a chef now]"],
        ["When did {P} attend a cookery lesson?", "When did {P} learn to cook at a workshop?"],
        "took a cookery lesson",
    ),
    Event(
        "meteor-shower",
        ["We drove out of town {when} to watch the meteor shower, [counted forty|freezing but worth it]"],
        ["When did {P} watch shooting stars?", "When did {P} go stargazing for the meteors?"],
        "watched the meteor shower",
    ),
    Event(
        "comedy",
        ["[Went to|Saw] a stand-up comedy show {when}, [I cried laughing|the opener was better than the headliner]"],
        ["When did {P} see a comedian perform?", "When did {P} go to a stand-up night?"],
        "went to a stand-up night",
    ),
    Event(
        "beach-cleanup",
        ["[Joined|Helped at] a beach clean-up {when}, we filled [forty bags|a whole skip]"],
        ["When did {P} pick up litter on the coast?", "When did {P} help clear rubbish from the shore?"],
        "helped clear litter from the shore",
    ),
    Event(
        "road-trip",
        ["We did a road trip along the coast {when}, [five towns in three days|the views were unreal]"],
        ["When did {P} drive along the seaside on a trip?", "When did {P} take a coastal drive?"],
        "took a coastal drive",
    ),
    Event(
        "promotion",
        ["I got promoted {when}! [Team lead now|More money, more meetings]"],
        ["When did {P} move up at work?", "When did {P} earn a higher position?"],
        "was given a higher position",
    ),
    Event(
        "surf",
        ["I had my first surf lesson {when}, [swallowed half the ocean|stood up once!]"],
        ["When did {P} try surfing for the first time?", "When did {P} take to the waves on a board?"],
        "tried surfing",
    ),
    Event(
        "blood-donation",
        ["Gave blood {when} — [they gave me two biscuits|felt a bit dizzy after]"],
        ["When did {P} donate blood?", "When did {P} go to a blood drive?"],
        "donated blood",
    ),
]


@dataclass
class Taste:
    """One way a speaker's taste in a topic can go: its label (the answer) and the remarks that show it."""

    label: str
    remarks: list[str]


@dataclass
class Topic:
    key: str
    tastes: list[Taste]
    ask: list[str]
    lead: list[str]


TOPICS = [
    Topic(
        "music",
        [
            Taste(
                "jazz",
                [
                    "I've had Coltrane on repeat all week",
                    "Found a [tiny|basement] club with live bebop on Thursdays — heaven",
                    "Nothing beats Kind of Blue on a rainy evening",
                ],
            ),  # fmt: skip
            Taste(
                "country and bluegrass",
                [
                    "Dolly Parton's old records are my comfort listening",
                    "I'd drive [hours|all day] for a good bluegrass festival",
                    "A fiddle and a steel guitar and I'm happy",
                ],
            ),  # fmt: skip
            Taste(
                "hip hop",
                [
                    "Kendrick's album is all I've played this month",
                    "I still know every word of [Illmatic|The Miseducation of Lauryn Hill]",
                    "Went to an open-mic rap battle, the freestyles were unreal",
                ],
            ),  # fmt: skip
            Taste(
                "classical",
                [
                    "I put on Chopin nocturnes whenever I need to focus",
                    "Got tickets for the symphony, they're doing Mahler",
                    "Bach's cello suites are the soundtrack of my Sundays",
                ],
            ),  # fmt: skip
            Taste(
                "80s synth-pop",
                [
                    "Can't stop listening to Depeche Mode, I'm stuck in 1985",
                    "Made a playlist of Eurythmics and New Order for the drive",
                    "Anything with a drum machine and big hair, I'm in",
                ],
            ),  # fmt: skip
            Taste(
                "heavy metal",
                [
                    "Metallica in the car, windows down, every time",
                    "The louder and heavier the riffs the better, honestly",
                    "Got a new Iron Maiden shirt at the record fair",
                ],
            ),  # fmt: skip
            Taste(
                "folk",
                [
                    "Joni Mitchell's Blue has been on my turntable for days",
                    "Give me an acoustic guitar and someone singing about the sea",
                    "There's a pub with a folk session on Sundays, I go every week",
                ],
            ),  # fmt: skip
            Taste(
                "electronic dance music",
                [
                    "Danced until sunrise at a techno night, no regrets",
                    "My running playlist is all house and trance",
                    "Daft Punk is basically my personality",
                ],
            ),  # fmt: skip
        ],
        [
            "What kind of music might {P} enjoy?",
            "What genre would make a good record to gift {P}?",
            "What sort of gig would {P} want tickets for?",
            "What style of songs is {P} into?",
        ],  # fmt: skip
        ["What have you been listening to lately?", "Any new music I should hear?"],
    ),
    Topic(
        "food",
        [
            Taste(
                "Thai food",
                [
                    "I could eat green curry every single day",
                    "The pad see ew place near me is my weakness",
                    "Tom yum soup fixes everything",
                ],
            ),  # fmt: skip
            Taste(
                "Ethiopian food",
                [
                    "Injera with lentil wat is my ultimate comfort meal",
                    "Eating with my hands off one huge shared platter is the best way to eat",
                ],
            ),  # fmt: skip
            Taste(
                "Japanese food",
                [
                    "I'd walk miles for a proper bowl of tonkotsu ramen",
                    "Omakase at the sushi counter is my treat-yourself dinner",
                    "Okonomiyaki night at mine, I've perfected the sauce",
                ],
            ),  # fmt: skip
            Taste(
                "Mexican food",
                [
                    "Tacos al pastor from the truck downtown, nothing better",
                    "I put salsa verde on literally everything",
                    "Made mole from scratch, took all day, worth it",
                ],
            ),  # fmt: skip
            Taste(
                "Indian food",
                [
                    "A good dal and fresh naan is my idea of heaven",
                    "I've been learning to make biryani from my friend's mum",
                    "The spicier the vindaloo the happier I am",
                ],
            ),  # fmt: skip
            Taste(
                "Italian food",
                [
                    "Fresh pasta with just butter and sage, perfect",
                    "I'm on a quest for the best margherita in town",
                    "Risotto is my Sunday ritual, stirring is therapy",
                ],
            ),  # fmt: skip
            Taste(
                "Korean food",
                [
                    "Korean barbecue with friends is my favourite night out",
                    "I make my own kimchi now, the fridge smells wild",
                    "Bibimbap with a runny egg, every time",
                ],
            ),  # fmt: skip
            Taste(
                "Lebanese food",
                [
                    "Mezze platters are my love language",
                    "I'd eat hummus and tabbouleh for breakfast",
                    "Found a bakery doing proper manakish",
                ],
            ),  # fmt: skip
        ],
        [
            "Which cuisine should we pick for dinner with {P}?",
            "What sort of restaurant would {P} like best?",
            "What type of dishes does {P} crave?",
        ],  # fmt: skip
        ["Eaten anything good lately?", "What should we cook next time you're over?"],
    ),
    Topic(
        "films",
        [
            Taste(
                "horror films",
                [
                    "Watched three horror films back to back, the scarier the better",
                    "Nothing beats a creepy haunted-house movie with the lights off",
                ],
            ),  # fmt: skip
            Taste(
                "romantic comedies",
                [
                    "I've seen Notting Hill about forty times, don't judge",
                    "Give me a meet-cute and a rainy airport chase any day",
                ],
            ),  # fmt: skip
            Taste(
                "documentaries",
                [
                    "Watched a four-hour documentary about fungi and loved every minute",
                    "Nature docs with a calm narrator are my bedtime routine",
                ],
            ),  # fmt: skip
            Taste(
                "science fiction",
                [
                    "Rewatched Blade Runner, still the best thing ever made",
                    "Anything with spaceships and time loops and I'm there",
                ],
            ),  # fmt: skip
            Taste(
                "animated films",
                [
                    "Studio Ghibli marathon this weekend, Spirited Away made me cry again",
                    "Cartoons aren't just for kids — Pixar gets me every time",
                ],
            ),  # fmt: skip
            Taste(
                "westerns",
                [
                    "Watched The Good, the Bad and the Ugly again, those standoffs",
                    "Cowboys, dusty towns and a good showdown, that's cinema",
                ],
            ),  # fmt: skip
        ],
        [
            "What kind of movie would {P} pick for a film night?",
            "Which film genre is {P} a fan of?",
            "What should we put on if {P} comes over to watch something?",
        ],  # fmt: skip
        ["Seen any good movies?", "What are you watching these days?"],
    ),
    Topic(
        "books",
        [
            Taste(
                "fantasy novels",
                [
                    "Dragons, maps at the front and a thousand pages — perfect",
                    "Just finished a huge trilogy with elves and wizards, I'm bereft",
                ],
            ),  # fmt: skip
            Taste(
                "true crime",
                [
                    "I read true crime at night and then can't sleep",
                    "That book about the unsolved bank robbery was gripping",
                ],
            ),  # fmt: skip
            Taste(
                "poetry", ["Mary Oliver's poems get me through hard weeks", "I keep a little book of haiku in my bag"]
            ),  # fmt: skip
            Taste(
                "biographies",
                [
                    "Reading a life of Lincoln, nine hundred pages and worth it",
                    "I love learning how real people got where they did",
                ],
            ),  # fmt: skip
            Taste(
                "graphic novels",
                ["Maus wrecked me, comics can do anything", "The art in the new Saga volume is stunning"],
            ),  # fmt: skip
            Taste(
                "historical fiction",
                [
                    "Wolf Hall has me obsessed with the Tudors",
                    "Anything set in the past with real people mixed in, I'm hooked",
                ],
            ),  # fmt: skip
        ],
        ["What sort of books would {P} like as a present?", "What does {P} like to read?"],
        ["Read anything good?"],
    ),
    Topic(
        "holidays",
        [
            Taste(
                "beach holidays",
                [
                    "Give me sand, a paperback and warm sea and I'm happy",
                    "My perfect week off is lying by the ocean doing nothing",
                ],
            ),  # fmt: skip
            Taste(
                "mountain and hiking trips",
                [
                    "I'd take a hut in the Alps over a resort any day",
                    "Nothing beats reaching a summit after a long climb",
                ],
            ),  # fmt: skip
            Taste(
                "city breaks with museums",
                [
                    "Give me a new city, a museum pass and good cafés",
                    "I spent six hours in the Louvre once and wanted more",
                ],
            ),  # fmt: skip
            Taste(
                "camping and the outdoors",
                ["A tent, a campfire and no phone signal, perfect", "Sleeping under the stars beats any hotel"],
            ),  # fmt: skip
        ],
        [
            "What kind of vacation would {P} enjoy most?",
            "Would {P} rather spend time off by the sea, up a hill or in a city?",
            "Where should {P} go for a dream week away?",
        ],  # fmt: skip
        ["Thinking about a holiday this year?"],
    ),
    Topic(
        "drinks",
        [
            Taste(
                "craft beer",
                ["Tried a sour IPA at the taproom, so good", "I rate breweries like other people rate restaurants"],
            ),
            Taste(
                "natural wine",
                [
                    "Found a tiny natural wine bar, cloudy orange wine is my thing",
                    "Skin-contact whites are all I drink now",
                ],
            ),  # fmt: skip
            Taste(
                "cocktails",
                ["I've been learning to make a proper negroni", "A good bartender and a smoky mezcal sour, heaven"],
            ),
            Taste(
                "tea",
                [
                    "I have eleven kinds of loose-leaf oolong in the cupboard",
                    "Afternoon tea with a proper pot is sacred",
                ],
            ),
        ],
        ["What would {P} like to drink at a party?", "What should we order for {P} at the bar?"],
        ["Fancy a drink after work sometime?"],
    ),
    Topic(
        "watching-sport",
        [
            Taste("basketball", ["Stayed up until 3am for the NBA finals", "Courtside tickets would be my dream gift"]),
            Taste(
                "Formula One",
                ["Race weekend, phone off, don't talk to me", "The pit-stop strategy last Sunday was genius"],
            ),
            Taste(
                "tennis",
                [
                    "Wimbledon fortnight is my favourite time of year",
                    "That five-set final had me screaming at the telly",
                ],
            ),
            Taste(
                "cycling races",
                [
                    "Watching the Tour de France mountain stages every afternoon",
                    "The sprint finishes in the Giro are so tense",
                ],
            ),  # fmt: skip
            Taste(
                "rugby", ["Six Nations weekends are sacred in my house", "That last-minute try, I jumped off the sofa"]
            ),
        ],
        ["Which sport does {P} like watching on TV?", "What would {P} want to watch at a sports bar?"],
        ["Did you see the match?"],
    ),
    Topic(
        "evenings",
        [
            Taste(
                "quiet nights in",
                [
                    "Candles, soup and a blanket — my ideal Friday",
                    "I'd honestly rather stay home with a book than go out",
                ],
            ),  # fmt: skip
            Taste(
                "big nights out",
                [
                    "Out dancing till four, I need it after a long week",
                    "The bigger the party the better, I love a crowd",
                ],
            ),  # fmt: skip
            Taste(
                "board game nights",
                [
                    "Settlers of Catan with friends is my perfect evening",
                    "Hosting a game night, twelve people and three tables",
                ],
            ),  # fmt: skip
        ],
        ["Would {P} prefer a quiet evening or a wild party?", "How does {P} like to spend a Friday night?"],
        ["Plans for Friday?"],
    ),
    Topic(
        "seasons",
        [
            Taste(
                "autumn",
                [
                    "Crunchy leaves and jumpers, best time of year",
                    "The first cold morning with foggy breath, I love it",
                ],
            ),
            Taste("winter and snow", ["I live for snow days", "Give me frost on the windows and a fire going"]),
            Taste(
                "summer heat", ["The hotter the better, I'm a lizard", "Long light evenings and barbecues, never end"]
            ),
            Taste("spring", ["Blossom everywhere, I could cry", "When the first tulips come up I'm a new person"]),
        ],
        ["What time of year does {P} like most?", "Which season is {P}'s favourite?"],
        ["Are you enjoying the weather?"],
    ),
]


# -- how the changing facts are told ---------------------------------------------------------------------------

CITY_FIRST = [
    "I've lived in {city} for [six|eight|almost ten] years now, [it still surprises me|I know every corner]",
    "[Typical|Classic] {city} weather today — [grey and drizzly|blazing hot], [love it|of course]",
    "[Nothing beats|I love] {city} in the [spring|evenings], [I'm never leaving|best place I've lived]",
]
MOVE = [
    "[It's official|Big news] — I'm moving to {city}! [Signed the lease {when}|The movers came {when}]",
    "[Landed|Arrived] in {city} {when} with all my boxes, [new place is tiny but I love it|still sleeping on a mattress]",
    "[Well|So], {city} is home now, [finished unpacking {when}|the last box went up the stairs {when}]",
]
JOB_FIRST = [
    "[Work at {place} was|{Place} was] [crazy|packed] today — being a {role} [is never boring|keeps me on my feet]",
    "I've been a {role} at {place} for [three|four|two] years now, [still enjoy it|some days are long]",
]
QUIT = [
    "Big news: I handed in my notice at {place}. [My last day was {when}|I finished {when}]",
    "So I officially quit {short} {when} — [I needed a change|the hours were killing me]",
    "[Walked out of|Said goodbye to] {short} for the last time {when}, [weird feeling|no regrets]",
]
START = [
    "I started my new job {when} — I'm a {role} at {place} now!",
    "First week as a {role} at {place} [done|survived] — I started {when}, [the team is lovely|so much to learn]",
    "[Guess what|So], I got the job! I'm the new {role} at {place}, [started {when}|signed the contract {when}]",
]
ADOPT = [
    "We adopted a {species} {when} — [his|her] name is {name}!",
    "Meet {name}, my new {species}! [Brought|Picked] [him|her] home {when}",
    "[I did it|It happened] — I got a {species} {when} and named [him|her] {name}",
]
HOBBY = [
    "I signed up for a {hobby} class {when} and I'm [hooked|obsessed]",
    "I've gotten really into {hobby} — [had my first session {when}|started {when}], [it's addictive|I love it]",
    "[New obsession|New thing]: {hobby}. [Tried it for the first time {when}|Went along {when}] and [loved it|can't stop]",
]
INTRO = [
    "My [younger|older] {rel} {x} is [coming to stay|visiting] [this weekend|next week], [the flat is a mess|can't wait]",
    "[Had lunch with|Spent the day with] my {rel} {x} [yesterday|on Sunday], [we laughed so much|it was lovely]",
    "My {rel} {x} [called|rang] me [for an hour|last night], [we talk every week|always cheers me up]",
]
OTHER_JOB = [
    "{x} just started as a {role} at {place}, [so proud|{x} sounds so happy]",
    "Talked to {x} — {they} got a job as a {role} at {place}!",
]
OTHER_CITY = [
    "{x} [moved|relocated] to {city} [for work|for a fresh start], [I'll have to visit|the flat has a view]",
    "{x} sent me photos of {their} new place in {city}, [it's gorgeous|so jealous]",
]
ENGAGED = [
    "{x} got engaged {when}! [I cried|The ring is gorgeous]",
    "[Huge|Big] news from {x}: {they} got engaged {when}",
]

LEADS = {
    "city": ["How's life in the city?", "What's it like where you are?"],
    "move": ["How's the flat hunt going?", "Any news on the move?"],
    "job": ["How's work treating you?", "Busy at work?"],
    "quit": ["How are things at work these days?", "Still thinking about leaving?"],
    "start": ["Any luck with the job search?", "How's the new job?"],
    "adopt": ["Still thinking about getting a pet?", "Any news on the animal front?"],
    "hobby": ["Doing anything new in your free time?", "Found a new hobby yet?"],
    "event": ["What did you get up to lately?", "What's new with you?", "Anything exciting happen?"],
    "relation": ["How's your family doing?", "Seen any friends lately?"],
    "other": ["Any news from your people?", "How's everyone doing?"],
}
REACTS = {
    "city": ["[Ha|Haha], I need to visit sometime!", "Sounds lovely there."],
    "move": [
        "A new city, [that's huge|how exciting]! Is the new place nice?",
        "[Wow|Oh wow], how's the packing going?",
    ],
    "job": ["[Ha|Oof], sounds busy.", "Glad you like it there."],
    "quit": ["[Good for you|Brave move] — leaving a job is never easy. What's next?"],
    "start": ["[Congrats|Congratulations] on the new role! How's the team?", "That's brilliant, well done!"],
    "adopt": ["[Aww|Omg], send pictures of the little one!", "I need photos right now!"],
    "hobby": ["That sounds [like so much fun|really relaxing]! Are you any good yet?", "I'd love to try that."],
    "event": ["How did it go?", "[Wow|No way]! Tell me everything.", "That sounds intense!"],
    "pref": ["[Ooh|Oh], good taste.", "I can see that.", "Fair enough!"],
    "relation": ["[Oh nice|Aw], say hi from me!", "Hope you have fun together!"],
    "other": ["[That's great news|Wow], tell {x} congrats from me!", "Oh, lovely!"],
}

# -- small talk ------------------------------------------------------------------------------------------------

GREET = [
    "[Hey|Hi|Hiya] {o}! [Long time no talk|It's been a while|Good to hear from you] — [how are you|how have you been|what's new]?",
    "[Morning|Evening|Hey] {o}, [got a minute to chat|how's your week going]?",
]
GREET_BACK = [
    "[Hey|Hi] {o}! [Doing well|All good|Hanging in there], [thanks|thank you]. [So much has happened|Quite a bit to tell you|Not much to report]!",
    "[Oh hi|Hey you]! [Busy as ever|Can't complain], [you?|how about you?]",
]
BYE = [
    "[Anyway|Okay], I [should|have to] [get going|run|start dinner] — [talk soon|catch up later|speak next week]!",
    "[Right|Okay], [bedtime for me|I'm off to the shops]. [Good chatting|Lovely to catch up]!",
]
BYE_BACK = [
    "[Bye|Take care|Talk soon], {o}! [Good chatting|Always nice catching up].",
    "[Night|See ya], {o}! [Speak soon|Don't be a stranger].",
]
# (prompts, replies that fit any of them)
EXCHANGES = [
    (
        ["How's [work|the week|life] been?", "How are you feeling [today|this week]?", "How's everything at home?",
         "Is your family [all right|doing okay]?", "How's the [flat|house|neighbourhood]?"],
        ["[Pretty good|Not bad|Busy but fine], [thanks|honestly]! [You?|How about you?]",
         "[Oh, the usual|Same old], nothing exciting, [you know how it is|ha].",
         "[Honestly|Ha], [could be better|can't complain].", "[It's fine|All fine], [thanks for asking|nothing to report]."],
    ),
    (
        ["What have you been up to?", "Did you do anything fun [lately|recently]?",
         "Any plans for the [weekend|long weekend|holidays]?"],
        ["[Not really|Nothing big], [just|mostly] [resting|cleaning the flat|seeing some friends|doing laundry].",
         "[Honestly|Ha], work has eaten [every evening|all my free time]."],
    ),
    (
        ["Have you [watched|seen] anything good lately?", "Eaten anywhere nice [lately|this week]?"],
        ["[Not really|Nothing worth mentioning], [I've been lazy|I keep going back to the same places].",
         "[Hmm|Let me think], [not lately|nothing comes to mind], [I'll let you know|sorry]."],
    ),
    (
        ["Are you sleeping any better?", "Do you ever get time to [practise|read|go running] these days?"],
        ["[Yeah|Mostly], [I'm trying|I'm working on it], [slowly|one day at a time].",
         "[Barely|Not at all], work has eaten [every evening|all my free time]."],
    ),
    (
        ["Did you catch the [game|match] [last night|on Sunday]?"],
        ["[No|Nope], I missed it — [who won?|was it good?]", "[Only the end|Just the highlights], [what a finish|it was tense]!"],
    ),
    (
        ["What's the weather like over there?"],
        ["[Grey|Drizzly|Sunny for once], [as usual|of course].", "[Boiling|Freezing], I'm [hiding indoors|wearing three jumpers]."],
    ),
]  # fmt: skip
STATEMENTS = [
    "[Work|The office] has been [hectic|a zoo|non-stop] this week, I [barely|hardly] had time to [eat lunch|breathe|practise anything]",
    "My manager [moved|pushed] our deadline again, [classic|typical]",
    "I keep thinking about [changing jobs|a career change] someday, but not yet",
    "The traffic in town has been [awful|ridiculous] lately",
    "They're [building|opening] a new [café|gym|bakery|climbing wall] on my street",
    "I [love|miss] how walkable [this neighbourhood|my old neighbourhood] [is|was]",
    "[It's|It has been] [pouring|boiling|freezing] here all week",
    "Finally some sun! I [sat in the park|went for a walk] at lunch",
    "I tried to cook something new [last night|yesterday] and [burnt it|it was a disaster|it actually worked]",
    "I've been eating way too much [takeaway|pizza|toast] lately",
    "[There's|I heard there's] a [music festival|concert series] in the park [next month|this summer], might check it out",
    "I've had the same song stuck in my head all day",
    "Any good [podcasts|albums|playlists] I should try?",
    "My neighbour's [dog|cat] [keeps visiting|sat on my car] [again|all morning]",
    "I saw the [cutest|fluffiest] [puppy|kitten] at the park today",
    "I really need to [get back into running|go to the gym more|stretch more]",
    "I [started|gave up on] a [book|series] [everyone recommended|that was way too long]",
    "Any [shows|films] worth watching? I've run out of things",
    "I'm [craving|dreaming about] a [holiday|trip|long weekend] somewhere [warm|quiet|far away]",
    "Flights are so [expensive|pricey] right now, it's [unreal|wild]",
    "My [mum|dad|grandma] [called|texted] [three times|twice] today about [nothing|the holidays]",
    "The family group chat has been [chaos|wild] this week",
    "I [barely slept|slept terribly] last night, [too much coffee|the neighbours were loud]",
    "I think I'm [coming down with|fighting off] a cold",
    "I [finally|just] [fixed|replaced] the [leaky tap|broken lamp|squeaky door] at home",
    "Spent way too much at the [supermarket|market|hardware store] today",
    "My phone [screen cracked|battery dies by lunch] [again|these days], I need a new one",
    "[The wifi|My laptop] has been [so slow|acting up] all week",
    "I keep meaning to [learn a language|take a class|pick up a new hobby], maybe this year",
    "[A friend|An old friend from school] [messaged me|reached out] out of nowhere today",
    "The [coffee|tea] at work is [terrible|undrinkable], I should bring my own",
    "I [walked|cycled] past [the river|the old market] [this morning|on Sunday], it was [so pretty|packed]",
    "[Everyone|Half the office] is [off sick|on holiday] so I'm doing three jobs",
    "I need to [book|plan] something for my [mum's|dad's|friend's] birthday",
    "Did you know [octopuses|crows|bees] can [recognise faces|solve puzzles]? Saw it on a [documentary|podcast]",
    "My plants are [dying|thriving], I don't know what I'm doing",
    "The [gym|pool|park] was [packed|empty] [this morning|tonight]",
    "I [made|baked] [banana bread|cookies|soup] [for the neighbours|for no reason]",
    "My [cousin|brother|sister] [keeps sending|sent] me [memes|videos] at 2am",
    "[Weekends|Sundays] go [way|so] too fast",
]
BACKCHANNELS = [
    "[Haha|Ha], [totally|same|I know the feeling].",
    "[That's fair|Fair enough]. [Hope it gets better!|Fingers crossed.]",
    "[Oh no!|Ugh,] [that sounds rough|that's annoying].",
    "[Ooh|Oh], [nice|lovely]!",
    "[Right?|Exactly!] [Same here.|Tell me about it.]",
    "[Ha|Lol], [classic|of course].",
    "[Mm|Yeah], I [hear you|get it].",
]

# said around a fact turn: never an answer, only the way people talk
OPENERS = [
    "Oh, [by the way|before I forget],",
    "[Funny you should ask|Funny you mention it] —",
    "[So|Okay so|Right], [news|update]:",
    "[Honestly|I have to say],",
    "[Ha|Haha], well,",
    "[Oh|Ooh], [guess what|I have to tell you]:",
]
TAILS = [
    "[Anyway|Anyhow], how are you [doing|holding up]?",
    "[Life's been|It's been] [a lot|a bit of a whirlwind] lately.",
    "I'll tell you more [next time|when we catch up properly].",
    "[Still can't quite believe it|Still processing it], [honestly|to be fair].",
    "[Mum|My mum] [thought I was mad|was thrilled] when I told her.",
    "[Not bad for a Monday|Not a bad week], all things considered.",
    "[What about you|And you], anything new?",
    "[Sorry|Ugh], I'm [rambling|going on and on] again.",
]


# first words an opener may go before (lower-cased after it unless "I"): never a name
OPENS = frozenset("I I've I'm I'd My We So The Just Big Back When Found Nothing Give Had Spent Went Got Guess".split())


def sentence(text: str) -> str:
    return text if text[-1:] in ".!?" else text + "."


# -- building a conversation -----------------------------------------------------------------------------------


@dataclass
class Person:
    name: str
    they: str
    them: str
    their: str

    def slots(self) -> dict[str, str]:
        return {"P": self.name, "they": self.they, "them": self.them, "their": self.their}


@dataclass
class Beat:
    """A fact turn waiting for its place: who says it, in which session, its text, and what the other says
    before (lead) and after (react), if anything. ``rank`` orders beats within a session."""

    speaker: Person
    session: int
    text: str
    lead: str | None = None
    react: str | None = None
    rank: float = 0.0
    turn_id: str = ""


@dataclass
class Draft:
    category: str
    text: str
    beats: list[Beat]
    answer: str


class Builder:
    """One conversation in the making: its sessions' dates, the beats placed in them, the questions drafted."""

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self.rng = rng = random.Random(seed)
        self.name = f"conv-{seed:02d}"
        self.sessions = rng.randint(15, 30)
        start = dt.date(2022, 1, 1) + dt.timedelta(days=rng.randrange(540))
        self.dates = [start]
        for _ in range(self.sessions - 1):
            self.dates.append(self.dates[-1] + dt.timedelta(days=rng.randint(3, 21)))
        self.beats: list[Beat] = []
        self.drafts: list[Draft] = []
        self.load = [0] * self.sessions
        self.used: set[str] = set()  # values already told in this conversation: no answer is told twice
        self.cities = Deck(rng, CITIES)
        self.towns = Deck(rng, TOWNS)
        self.jobs = Deck(rng, JOBS)
        self.pet_names = Deck(rng, PET_NAMES)
        self.parks = Deck(rng, PARKS)
        self.bands = Deck(rng, BANDS)

    # where beats go

    def session(self, lo: int = 0, hi: int | None = None) -> int:
        """A session in [lo, hi] with room for one more beat."""
        hi = self.sessions - 1 if hi is None else hi
        return self.rng.choice([s for s in range(lo, hi + 1) if self.load[s] < MAX_BEATS])

    def sessions_in_order(self, n: int, lo: int) -> list[int]:
        """``n`` distinct sessions from ``lo`` on, each with room, ascending."""
        return sorted(self.rng.sample([s for s in range(lo, self.sessions) if self.load[s] < MAX_BEATS], n))

    def tell(
        self,
        person: Person,
        other: Person,
        session: int,
        templates: list[str],
        lead: list[str],
        react: list[str],
        **slots: str,
    ) -> tuple[Beat, str]:
        """A fact turn of ``person`` in ``session`` from one of ``templates``, and the day it says the thing
        happened: the relative date put for ``{when}``, or the session's own day when the template says none."""
        rng = self.rng
        text = choose(rng, rng.choice(templates))
        phrase, date = _when(rng, self.dates[session]) if "{when}" in text else ("", day(self.dates[session]))
        heard = {"P": person.name, "o": other.name, **slots}
        text = sentence(fill(text, **slots, o=other.name, when=phrase))
        first = text.split()[0]
        if first in OPENS and rng.random() < 0.4:
            opener = say(rng, rng.choice(OPENERS))
            text = f"{opener} {text if first.startswith('I') else text[:1].lower() + text[1:]}"
        if rng.random() < 0.35:
            text = f"{text} {say(rng, rng.choice(TAILS))}"
        b = Beat(
            person,
            session,
            text,
            lead=say(rng, rng.choice(lead), **heard) if lead and rng.random() < 0.35 else None,
            react=say(rng, rng.choice(react), **heard) if react and rng.random() < 0.6 else None,
            rank=rng.random(),
        )
        self.load[session] += 1
        self.beats.append(b)
        return b, date

    def ask(self, category: str, templates: list[str], person: Person, beats: list[Beat], answer: str, **slots: str):
        text = say(self.rng, self.rng.choice(templates), **person.slots(), **slots)
        self.drafts.append(Draft(category, text, beats, answer))

    def fresh(self, values: Sequence[str]) -> str:
        value = self.rng.choice([v for v in values if v not in self.used])
        self.used.add(value)
        return value

    # one speaker's life

    def life(self, person: Person, other: Person, used_names: set[str]) -> None:
        rng = self.rng

        def tell(session, templates, lead, react, **slots):
            return self.tell(person, other, session, templates, lead, react, **slots)

        def ask(category, templates, beats, answer, **slots):
            self.ask(category, templates, person, beats, answer, **slots)

        # fixed facts: one turn each, one single-fact question each
        for attr in rng.sample(ATTRIBUTES, 13):
            value = self.fresh(attr.values)
            b, _ = tell(self.session(), attr.tell, attr.lead, attr.react, v=value)
            ask("single-fact", attr.ask, [b], value.removeprefix("my "))

        # where they live and work, as it changes: (session, beat, city) and (session, beat, job or None)
        city0, job0 = self.cities.take(), self.jobs.take()
        s = self.session(0, 2)
        cities = [(s, tell(s, CITY_FIRST, LEADS["city"], REACTS["city"], city=city0)[0], city0)]
        role, place, short = job0
        s = self.session(0, 3)
        b, _ = tell(
            s, JOB_FIRST, LEADS["job"], REACTS["job"], role=role, place=place, Place=place[:1].upper() + place[1:]
        )
        jobs: list[tuple[int, Beat, tuple[str, str, str] | None]] = [(s, b, job0)]

        changes = ["move"] * rng.randint(1, 2) + ["adopt"] * rng.randint(1, 2) + ["hobby", "hobby"]
        if rng.random() < 0.8:
            changes += ["quit", "start"]
        rng.shuffle(changes)
        if "quit" in changes and changes.index("quit") > changes.index("start"):
            i, j = changes.index("quit"), changes.index("start")
            changes[i], changes[j] = changes[j], changes[i]
        pets: list[tuple[int, Beat, str, str]] = []  # (session, beat, species, name)
        hobbies: list[tuple[int, Beat, tuple[str, str, str]]] = []
        quit: tuple[int, Beat, tuple[str, str, str]] | None = None
        nouns: list[str] = []
        kinds: list[str] = []
        for change, s in zip(changes, self.sessions_in_order(len(changes), 4)):
            if change == "move":
                city = self.cities.take()
                b, date = tell(s, MOVE, LEADS["move"], REACTS["move"], city=city)
                cities.append((s, b, city))
                ask(
                    "temporal",
                    ["When did {P} relocate to {city}?", "When did {P} settle in {city}?"],
                    [b],
                    date,
                    city=city,
                )
            elif change == "adopt":
                species, noun = rng.choice([p for p in PETS if p[1] not in nouns])
                nouns.append(noun)
                name = self.pet_names.take()
                b, date = tell(s, ADOPT, LEADS["adopt"], REACTS["adopt"], species=species, name=name)
                pets.append((s, b, species, name))
                ask(
                    "single-fact",
                    ["What did {P} name {their} {noun}?", "What is {P}'s {noun} called?"],
                    [b],
                    name,
                    noun=noun,
                )
                ask(
                    "temporal",
                    ["When did {name} join {P}'s household?", "When did {P} get {their} {noun}?"],
                    [b],
                    date,
                    name=name,
                    noun=noun,
                )
            elif change == "hobby":
                hobby = rng.choice([h for h in HOBBIES if h[1] not in kinds and h[0] not in self.used])
                kinds.append(hobby[1])
                self.used.add(hobby[0])
                b, date = tell(s, HOBBY, LEADS["hobby"], REACTS["hobby"], hobby=hobby[0])
                hobbies.append((s, b, hobby))
                ask(
                    "single-fact",
                    ["What new {kind} has {P} taken up?", "Which {kind} has {P} started doing for fun?"],
                    [b],
                    hobby[0],
                    kind=hobby[1],
                )
                ask(
                    "temporal", ["When did {P} begin {ing}?", "Since when has {P} been {ing}?"], [b], date, ing=hobby[2]
                )
            elif change == "quit":
                held = jobs[-1][2]
                assert held is not None  # a quit comes before the start, never after another quit
                b, date = tell(s, QUIT, LEADS["quit"], REACTS["quit"], place=held[1], short=held[2])
                quit = (s, b, held)
                jobs.append((s, b, None))
                ask(
                    "temporal",
                    ["When did {P} leave {short}?", "When did {P} stop working at {short}?"],
                    [b],
                    date,
                    short=held[2],
                )
            else:  # start
                job = self.jobs.take()
                b, date = tell(s, START, LEADS["start"], REACTS["start"], role=job[0], place=job[1])
                jobs.append((s, b, job))
                ask(
                    "temporal",
                    ["When did {P} begin working at {short}?", "When was {P}'s first day at {short}?"],
                    [b],
                    date,
                    short=job[2],
                )

        ask("single-fact", ["Which city is {P} living in now?", "Where is {P} based these days?", "What city does {P} call home at the moment?"],
            [cities[-1][1]], cities[-1][2])  # fmt: skip
        current = jobs[-1][2]
        if current is not None:
            ask(
                "single-fact",
                ["What does {P} do for a living these days?", "What is {P}'s current job?"],
                [jobs[-1][1]],
                f"{current[0]} at {current[1]}",
            )

        # multi-hop over the timeline: one turn fixes the moment, another answers
        def state_at(history, s):
            """What held before session ``s`` (None when nothing was told yet, or it changed in ``s`` itself)."""
            if any(h[0] == s for h in history):
                return None
            before = [h for h in history if h[0] < s]
            return before[-1] if before else None

        def until_next(history, i):
            return history[i + 1][0] if i + 1 < len(history) else self.sessions

        if quit is not None:
            after = [c for c in cities if c[0] > quit[0]]
            if after:
                ask("multi-hop", ["Which city did {P} move to after leaving {short}?", "Where did {P} go to live once {they} had quit {short}?"],
                    [quit[1], after[0][1]], after[0][2], short=quit[2][2])  # fmt: skip
        for s, b, _, name in pets:
            at = state_at(cities, s)
            if at is not None:
                ask("multi-hop", ["Which city was {P} living in when {they} got {name}?", "Where did {P} live at the time {name} arrived?"],
                    [at[1], b], at[2], name=name)  # fmt: skip
        for i, (s, b, city) in enumerate(cities):
            if i == 0:
                continue
            ask("multi-hop", ["Where did {P} live before moving to {city}?", "Which city did {P} leave for {city}?"],
                [cities[i - 1][1], b], cities[i - 1][2], city=city)  # fmt: skip
            adopted = [p for p in pets if s < p[0] < until_next(cities, i)]
            if adopted:
                ask("multi-hop", ["What animal did {P} adopt after settling in {city}?", "Which pet joined {P} once {they} had moved to {city}?"],
                    [b, adopted[0][1]], f"{adopted[0][3]} the {adopted[0][2]}", city=city)  # fmt: skip
            hired = [j for j in jobs if s < j[0] < until_next(cities, i) and j[2] is not None]
            if hired:
                job = hired[0][2]
                ask("multi-hop", ["What job did {P} find after relocating to {city}?", "Where did {P} get hired once {they} lived in {city}?"],
                    [b, hired[0][1]], f"{job[0]} at {job[1]}", city=city)  # fmt: skip
        for s, b, hobby in hobbies:
            at = state_at(jobs, s)
            if at is not None and at[2] is not None:
                ask("multi-hop", ["Where was {P} working when {they} took up {hobby}?", "What was {P}'s job at the time {they} got into {hobby}?"],
                    [at[1], b], f"{at[2][0]} at {at[2][1]}", hobby=hobby[0])  # fmt: skip

        # someone the speaker names once and then talks about by name only
        rel, g = rng.choice(RELATIONS)
        x = rng.choice([n for n in (WOMEN if g == "f" else MEN) if n not in used_names])
        used_names.add(x)
        xs = dict(zip(("they", "them", "their"), PRONOUNS[g]))
        s_intro = self.session(0, self.sessions // 3)
        intro, _ = tell(s_intro, INTRO, LEADS["relation"], REACTS["relation"], rel=rel, x=x)
        ask("single-fact", ["What is the name of {P}'s {rel}?", "Who is {P}'s {rel}?"], [intro], x, rel=rel)
        xjob = self.jobs.take()
        b, _ = tell(
            self.session(s_intro + 1),
            OTHER_JOB,
            LEADS["other"],
            REACTS["other"],
            x=x,
            role=xjob[0],
            place=xjob[1],
            **xs,
        )
        ask(
            "multi-hop",
            ["What does {P}'s {rel} do for work?", "What job did {P}'s {rel} land?"],
            [intro, b],
            xjob[0],
            rel=rel,
        )
        xcity = self.cities.take()
        b, _ = tell(self.session(s_intro + 1), OTHER_CITY, LEADS["other"], REACTS["other"], x=x, city=xcity, **xs)
        ask(
            "multi-hop",
            ["Which city did {P}'s {rel} move to?", "Where does {P}'s {rel} live now?"],
            [intro, b],
            xcity,
            rel=rel,
        )
        b, date = tell(self.session(s_intro + 1), ENGAGED, LEADS["other"], REACTS["other"], x=x, **xs)
        ask(
            "temporal",
            ["When did {P}'s {rel} get engaged?", "When did {P}'s {rel} decide to marry?"],
            [intro, b],
            date,
            rel=rel,
        )

        # dated events: one temporal question each; the first two also ask where the speaker lived then
        for i, event in enumerate(rng.sample(EVENTS, 11)):
            said = " ".join(event.tell + event.ask)
            slots = {}
            for slot, deck in (("band", self.bands), ("park", self.parks), ("city", self.cities), ("town", self.towns)):
                if "{" + slot + "}" in said:
                    slots[slot] = deck.take()
            s = self.session()
            b, date = tell(s, event.tell, LEADS["event"], REACTS["event"], **slots)
            ask("temporal", event.ask, [b], date, **slots)
            at = state_at(cities, s)
            if i < 2 and at is not None:
                ask("multi-hop", ["Which city was {P} living in when {they} {gist}?", "Where was {P}'s home when {they} {gist}?"],
                    [at[1], b], at[2], gist=event.gist.format(**slots))  # fmt: skip

        # tastes: two or three remarks in different sessions, one open-domain question
        for topic in rng.sample(TOPICS, 7):
            taste = rng.choice(topic.tastes)
            remarks = rng.sample(taste.remarks, min(len(taste.remarks), rng.choice((2, 2, 3))))
            sessions = self.sessions_in_order(len(remarks), 0)
            said = [tell(s, [remark], topic.lead, REACTS["pref"])[0] for s, remark in zip(sessions, remarks)]
            ask("open-domain", topic.ask, said, taste.label)

    # turns

    def filler(self, n: int, first: int, people: tuple[Person, Person]) -> list[tuple[Person, str]]:
        """``n`` turns of small talk starting with ``people[first]``: prompts and replies, remarks, nods."""
        rng = self.rng
        out: list[tuple[Person, str]] = []
        who = first
        while len(out) < n:
            speaker, other = people[who], people[1 - who]
            if n - len(out) >= 2 and rng.random() < 0.45:
                prompts, replies = rng.choice(EXCHANGES)
                out.append((speaker, say(rng, rng.choice(prompts))))
                out.append((other, self.more(say(rng, rng.choice(replies)), 0.6)))
                continue  # two turns: the same speaker goes next
            if rng.random() < 0.7:
                text = self.more(sentence(say(rng, rng.choice(STATEMENTS))), 0.4)
            else:
                text = self.more(say(rng, rng.choice(BACKCHANNELS)), 0.75)
            out.append((speaker, text))
            who = 1 - who
        return out

    def more(self, text: str, chance: float) -> str:
        """``text``, and with ``chance`` a remark after it (people rarely say only "ha, same")."""
        if self.rng.random() < chance:
            return f"{text} {sentence(say(self.rng, self.rng.choice(STATEMENTS)))}"
        return text

    def session_turns(self, s: int, people: tuple[Person, Person]) -> tuple[Turn, ...]:
        """Session ``s`` as turns: a greeting, the session's beats (each with its lead-in and reaction, if any)
        spread among small talk, a goodbye. Speakers alternate throughout."""
        rng = self.rng

        def other(p: Person) -> Person:
            return people[1] if p is people[0] else people[0]

        segments = []
        for beat in sorted((b for b in self.beats if b.session == s), key=lambda b: b.rank):
            seg: list[tuple[Person, str, Beat | None]] = []
            if beat.lead:
                seg.append((other(beat.speaker), beat.lead, None))
            seg.append((beat.speaker, beat.text, beat))
            if beat.react:
                seg.append((other(beat.speaker), beat.react, None))
            segments.append(seg)
        # each gap before a segment may grow or shrink by one turn to keep speakers alternating, so the target
        # leaves that much room on both sides of 15..40
        fixed = 4 + sum(len(seg) for seg in segments)
        n = rng.randint(max(15 + len(segments), fixed), 40 - len(segments))
        gaps = [0] * (len(segments) + 1)
        for _ in range(n - fixed):
            gaps[rng.randrange(len(gaps))] += 1
        a = people[rng.randrange(2)]
        lines: list[tuple[Person, str, Beat | None]] = [
            (a, say(rng, rng.choice(GREET), o=other(a).name), None),
            (other(a), say(rng, rng.choice(GREET_BACK), o=a.name), None),
        ]
        for gap, seg in zip(gaps, [*segments, None]):
            last = lines[-1][0]
            if seg is not None and (gap % 2 == 0) != (last is other(seg[0][0])):
                gap = gap - 1 if gap > 0 else 1
            lines += [(p, t, None) for p, t in self.filler(gap, people.index(other(last)), people)]
            lines += seg or []
        closer = other(lines[-1][0])
        lines.append((closer, say(rng, rng.choice(BYE)), None))
        lines.append((other(closer), say(rng, rng.choice(BYE_BACK), o=closer.name), None))
        turns = []
        for i, (p, text, beat) in enumerate(lines, 1):
            turn = Turn(f"{self.name}:D{s + 1}:{i}", s + 1, p.name, self.dates[s], text)
            if beat is not None:
                beat.turn_id = turn.id
            turns.append(turn)
        return tuple(turns)

    def build(self) -> Conversation:
        rng = self.rng
        genders = [rng.choice("fm"), rng.choice("fm")]
        names = [rng.choice(WOMEN if g == "f" else MEN) for g in genders]
        while names[1] == names[0]:
            names[1] = rng.choice(WOMEN if genders[1] == "f" else MEN)
        people = (Person(names[0], *PRONOUNS[genders[0]]), Person(names[1], *PRONOUNS[genders[1]]))
        used_names = set(names)
        for i in (0, 1):
            self.life(people[i], people[1 - i], used_names)
        sessions = tuple(Session(s + 1, self.dates[s], self.session_turns(s, people)) for s in range(self.sessions))
        rng.shuffle(self.drafts)  # so a run cut short by --limit-questions still sees every category
        questions = tuple(
            Question(f"{self.name}:q{i:03d}", d.category, d.text, tuple(b.turn_id for b in d.beats), d.answer)
            for i, d in enumerate(self.drafts, 1)
        )
        return Conversation(self.seed, self.name, (names[0], names[1]), sessions, questions)


def conversation(seed: int) -> Conversation:
    """The conversation made from ``seed``: the same every time."""
    return Builder(seed).build()


def conversations(seeds: Sequence[int]) -> Iterator[Conversation]:
    for seed in seeds:
        yield conversation(seed)
