# Generated from the contract by tools/gen_client_stubs.py: do not edit.
import ssl
from collections.abc import Iterator
from typing import Any

from brainy.client import wire as wire

DEFAULT_URL: str

class Client:
    url: str
    key: str | None
    timeout: float
    retries: int
    msgpack: bool
    server_contract: dict[str, Any] | None
    def __init__(
        self,
        url: str | None = None,
        key: str | None = None,
        *,
        timeout: float = 30.0,
        retries: int = 3,
        json: bool = False,
        pool: int = 4,
        http2: bool | None = None,
        tls: ssl.SSLContext | None = None,
    ) -> None: ...
    @property
    def http_version(self) -> str | None: ...
    def call(self, door: str, *positional: Any, timeout: float | None = None, **options: Any) -> Any: ...
    def brain(self, name: str) -> RemoteBrain: ...
    def health(self) -> Any: ...
    def brains(self) -> list[dict[str, Any]]: ...
    def contract(self) -> Any: ...
    def close(self) -> None: ...
    def __enter__(self) -> Client: ...
    def __exit__(self, *exc: object) -> None: ...

class RemoteBrain:
    client: Client
    name: str
    def __init__(self, client: Client, name: str) -> None: ...
    def call(self, door: str, *positional: Any, timeout: float | None = None, **options: Any) -> Any: ...
    def changes(
        self, since: int | str | None = None, *, page: dict[str, Any] | None = None
    ) -> Iterator[dict[str, Any]]: ...
    def add(self, args: dict[str, Any] | None, /, *, timeout: float | None = None, **options: Any) -> dict[str, Any]:
        """Embedded when a model is present; an existing id refuses unless `upsert`."""
    def addMany(
        self, args: dict[str, Any] | None, /, *, timeout: float | None = None, **options: Any
    ) -> dict[str, Any]:
        """Up to 10000; one bad item aborts all unless `continueOnError`."""
    def aggregate(
        self, args: dict[str, Any] | None, /, *, timeout: float | None = None, **options: Any
    ) -> dict[str, Any]:
        """Filtered and ordered on group keys and metrics."""
    def aggregates(
        self, args: dict[str, Any] | None = None, /, *, timeout: float | None = None, **options: Any
    ) -> dict[str, Any]:
        """As defineAggregate stored them."""
    def appendFile(
        self, args: dict[str, Any] | None, /, *, timeout: float | None = None, **options: Any
    ) -> dict[str, Any]:
        """`ifMatch` makes it conditional."""
    def asOf(
        self, args: dict[str, Any] | None = None, /, *, timeout: float | None = None, **options: Any
    ) -> dict[str, Any]:
        """Runs one inner read door there; what it cannot serve refuses."""
    def batchGet(
        self, args: dict[str, Any] | None, /, *, timeout: float | None = None, **options: Any
    ) -> dict[str, Any]:
        """Answers in the order asked and lists the missing ids."""
    def clear(self, args: dict[str, Any] | None, /, *, timeout: float | None = None, **options: Any) -> dict[str, Any]:
        """Files and profile rows too; `confirm` names the brain."""
    def close(
        self, args: dict[str, Any] | None = None, /, *, timeout: float | None = None, **options: Any
    ) -> dict[str, Any]:
        """Doors in flight finish first."""
    def copy(self, args: dict[str, Any] | None, /, *, timeout: float | None = None, **options: Any) -> dict[str, Any]:
        """A tree needs `recursive`, an existing target `overwrite`."""
    def counts(
        self, args: dict[str, Any] | None = None, /, *, timeout: float | None = None, **options: Any
    ) -> dict[str, Any]:
        """Public and all-tier counts, and the vector shape."""
    def defineAggregate(
        self, args: dict[str, Any] | None, /, *, timeout: float | None = None, **options: Any
    ) -> dict[str, Any]:
        """Kept current on every commit, stored as a system row."""
    def diagnostics(
        self, args: dict[str, Any] | None = None, /, *, timeout: float | None = None, **options: Any
    ) -> dict[str, Any]:
        """Lists problems; `deep` also verifies checksums."""
    def diff(self, args: dict[str, Any] | None, /, *, timeout: float | None = None, **options: Any) -> dict[str, Any]:
        """Added, changed, removed; a row written and removed between them is absent."""
    def embed(self, args: dict[str, Any] | None, /, *, timeout: float | None = None, **options: Any) -> dict[str, Any]:
        """384 dimensions, local model; says if the input was truncated."""
    def embedBatch(
        self, args: dict[str, Any] | None, /, *, timeout: float | None = None, **options: Any
    ) -> dict[str, Any]:
        """One vector and one truncated flag per text."""
    def exists(self, args: dict[str, Any] | None, /, *, timeout: float | None = None, **options: Any) -> dict[str, Any]:
        """Only an invalid path refuses."""
    def explain(
        self, args: dict[str, Any] | None = None, /, *, timeout: float | None = None, **options: Any
    ) -> dict[str, Any]:
        """Fetches nothing, and says what it would refuse."""
    def export(
        self, args: dict[str, Any] | None = None, /, *, timeout: float | None = None, **options: Any
    ) -> dict[str, Any]:
        """The cursor pins one generation, so every page is one consistent state."""
    def fields(
        self, args: dict[str, Any] | None = None, /, *, timeout: float | None = None, **options: Any
    ) -> dict[str, Any]:
        """Field paths with their counts and value kinds."""
    def fileHistory(
        self, args: dict[str, Any] | None, /, *, timeout: float | None = None, **options: Any
    ) -> dict[str, Any]:
        """Newest first; read an old one with readFile and `generation`."""
    def find(
        self, args: dict[str, Any] | None = None, /, *, timeout: float | None = None, **options: Any
    ) -> dict[str, Any]:
        """A leg it cannot serve is reported (auto mode) or refused, never approximated."""
    def generation(
        self, id: str, args: dict[str, Any] | None = None, /, *, timeout: float | None = None, **options: Any
    ) -> dict[str, Any]:
        """Also through what service, and its row counts."""
    def get(
        self, id: str, args: dict[str, Any] | None = None, /, *, timeout: float | None = None, **options: Any
    ) -> dict[str, Any]:
        """An absent row answers `entity: null`, not a refusal."""
    def getxattr(
        self, args: dict[str, Any] | None, /, *, timeout: float | None = None, **options: Any
    ) -> dict[str, Any]:
        """An absent one answers `exists: false`."""
    def health(
        self, args: dict[str, Any] | None = None, /, *, timeout: float | None = None, **options: Any
    ) -> dict[str, Any]:
        """Checks lease, write doors, log, projections, blobs, embedder and counts."""
    def history(
        self, id: str, args: dict[str, Any] | None = None, /, *, timeout: float | None = None, **options: Any
    ) -> dict[str, Any]:
        """Newest first; an id never written answers no versions."""
    def init(
        self, args: dict[str, Any] | None = None, /, *, timeout: float | None = None, **options: Any
    ) -> dict[str, Any]:
        """`force` takes it from a live holder: an explicit operator act."""
    def listxattr(
        self, args: dict[str, Any] | None, /, *, timeout: float | None = None, **options: Any
    ) -> dict[str, Any]:
        """Names only; read each with getxattr."""
    def mkdir(self, args: dict[str, Any] | None, /, *, timeout: float | None = None, **options: Any) -> dict[str, Any]:
        """`parents` creates missing ancestors and accepts one that exists."""
    def move(self, args: dict[str, Any] | None, /, *, timeout: float | None = None, **options: Any) -> dict[str, Any]:
        """Replacing an existing target needs `overwrite`."""
    def now(
        self, args: dict[str, Any] | None = None, /, *, timeout: float | None = None, **options: Any
    ) -> dict[str, Any]:
        """With its timestamp and the oldest generation still readable."""
    def onChange(
        self, args: dict[str, Any] | None, /, *, timeout: float | None = None, **options: Any
    ) -> dict[str, Any]:
        """No wire carries a callback."""
    def readFile(
        self, args: dict[str, Any] | None, /, *, timeout: float | None = None, **options: Any
    ) -> dict[str, Any]:
        """UTF-8 or base64, whole or a range; verified, never decoded lossily."""
    def readdir(
        self, args: dict[str, Any] | None = None, /, *, timeout: float | None = None, **options: Any
    ) -> dict[str, Any]:
        """Every depth by default, in path order."""
    def relate(self, args: dict[str, Any] | None, /, *, timeout: float | None = None, **options: Any) -> dict[str, Any]:
        """The same from, to, type and subtype again updates it in place."""
    def relateMany(
        self, args: dict[str, Any] | None, /, *, timeout: float | None = None, **options: Any
    ) -> dict[str, Any]:
        """One generation; existing ones update in place."""
    def related(
        self, args: dict[str, Any] | None = None, /, *, timeout: float | None = None, **options: Any
    ) -> dict[str, Any]:
        """Either direction or one, in relation-id order."""
    def remove(self, args: dict[str, Any] | None, /, *, timeout: float | None = None, **options: Any) -> dict[str, Any]:
        """One commit, answering how many relations went with it."""
    def removeAggregate(
        self, args: dict[str, Any] | None, /, *, timeout: float | None = None, **options: Any
    ) -> dict[str, Any]:
        """An unknown name refuses AggregateNotFoundError."""
    def removeMany(
        self, args: dict[str, Any] | None = None, /, *, timeout: float | None = None, **options: Any
    ) -> dict[str, Any]:
        """More matches than `limit` refuses and deletes nothing."""
    def removexattr(
        self, args: dict[str, Any] | None, /, *, timeout: float | None = None, **options: Any
    ) -> dict[str, Any]:
        """An absent one is not a refusal."""
    def rename(self, args: dict[str, Any] | None, /, *, timeout: float | None = None, **options: Any) -> dict[str, Any]:
        """The target must not exist."""
    def repair(
        self, args: dict[str, Any] | None = None, /, *, timeout: float | None = None, **options: Any
    ) -> dict[str, Any]:
        """`dryRun` only reports what it would do."""
    def rmdir(self, args: dict[str, Any] | None, /, *, timeout: float | None = None, **options: Any) -> dict[str, Any]:
        """A non-empty one refuses without `recursive`."""
    def setxattr(
        self, args: dict[str, Any] | None, /, *, timeout: float | None = None, **options: Any
    ) -> dict[str, Any]:
        """Replaces any value under that name."""
    def similar(
        self, args: dict[str, Any] | None = None, /, *, timeout: float | None = None, **options: Any
    ) -> dict[str, Any]:
        """Ranked by cosine, with find's filters."""
    def similarity(
        self, args: dict[str, Any] | None, /, *, timeout: float | None = None, **options: Any
    ) -> dict[str, Any]:
        """Cosine, from -1 to 1."""
    def snapshot(
        self, args: dict[str, Any] | None = None, /, *, timeout: float | None = None, **options: Any
    ) -> dict[str, Any]:
        """Immutable files; a copy of them reopens at that generation."""
    def stat(self, args: dict[str, Any] | None, /, *, timeout: float | None = None, **options: Any) -> dict[str, Any]:
        """Also its times, entity id and attributes."""
    def stats(
        self, args: dict[str, Any] | None = None, /, *, timeout: float | None = None, **options: Any
    ) -> dict[str, Any]:
        """Row counts, bytes by part, and the embedder's state."""
    def storageAdapter(
        self, args: dict[str, Any] | None = None, /, *, timeout: float | None = None, **options: Any
    ) -> dict[str, Any]:
        """No wire carries a live object."""
    def transact(
        self, args: dict[str, Any] | None, /, *, timeout: float | None = None, **options: Any
    ) -> dict[str, Any]:
        """Up to 10000 ops, in order; the first bad op aborts all."""
    def traverse(
        self, args: dict[str, Any] | None, /, *, timeout: float | None = None, **options: Any
    ) -> dict[str, Any]:
        """Up to 6 hops, breadth- or depth-first, expanding only matching nodes."""
    def unlink(self, args: dict[str, Any] | None, /, *, timeout: float | None = None, **options: Any) -> dict[str, Any]:
        """A directory refuses; that is rmdir."""
    def unrelate(
        self, args: dict[str, Any] | None = None, /, *, timeout: float | None = None, **options: Any
    ) -> dict[str, Any]:
        """Answers the ids removed."""
    def update(self, args: dict[str, Any] | None, /, *, timeout: float | None = None, **options: Any) -> dict[str, Any]:
        """Metadata merges; new content is re-embedded; `ifGeneration` makes it conditional."""
    def updateMany(
        self, args: dict[str, Any] | None, /, *, timeout: float | None = None, **options: Any
    ) -> dict[str, Any]:
        """Up to 10000, all or nothing unless `continueOnError`."""
    def updateRelation(
        self, args: dict[str, Any] | None, /, *, timeout: float | None = None, **options: Any
    ) -> dict[str, Any]:
        """Also confidence and data; `ifGeneration` makes it conditional."""
    def use(self, args: dict[str, Any] | None, /, *, timeout: float | None = None, **options: Any) -> dict[str, Any]:
        """A plugin is code, so no wire carries it."""
    def warm(
        self, args: dict[str, Any] | None = None, /, *, timeout: float | None = None, **options: Any
    ) -> dict[str, Any]:
        """Reports what each projection cost."""
    def writeFile(
        self, args: dict[str, Any] | None, /, *, timeout: float | None = None, **options: Any
    ) -> dict[str, Any]:
        """Text is embedded; `exclusive` and `ifMatch` make it conditional."""
