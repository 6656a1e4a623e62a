# Generated from the contract by tools/gen_client_stubs.py: do not edit.
import ssl
from collections.abc import AsyncIterator
from typing import Any

from brainy.client import wire as wire

DEFAULT_URL: str

class AsyncClient:
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
    async def call(self, door: str, *positional: Any, timeout: float | None = None, **options: Any) -> Any: ...
    def brain(self, name: str) -> AsyncBrain: ...
    async def health(self) -> Any: ...
    async def brains(self) -> list[dict[str, Any]]: ...
    async def contract(self) -> Any: ...
    async def close(self) -> None: ...
    async def __aenter__(self) -> AsyncClient: ...
    async def __aexit__(self, *exc: object) -> None: ...

class AsyncBrain:
    client: AsyncClient
    name: str
    def __init__(self, client: AsyncClient, name: str) -> None: ...
    async def call(self, door: str, *positional: Any, timeout: float | None = None, **options: Any) -> Any: ...
    def changes(self, since: int | str | None = None) -> AsyncIterator[dict[str, Any]]: ...
    async def add(
        self, args: dict[str, Any] | None, /, *, timeout: float | None = None, **options: Any
    ) -> dict[str, Any]:
        """Embedded when a model is present; an existing id refuses unless `upsert`."""
    async def addMany(
        self, args: dict[str, Any] | None, /, *, timeout: float | None = None, **options: Any
    ) -> dict[str, Any]:
        """Up to 10000; one bad item aborts all unless `continueOnError`."""
    async def aggregate(
        self, args: dict[str, Any] | None, /, *, timeout: float | None = None, **options: Any
    ) -> dict[str, Any]:
        """Filtered and ordered on group keys and metrics."""
    async def aggregates(
        self, args: dict[str, Any] | None = None, /, *, timeout: float | None = None, **options: Any
    ) -> dict[str, Any]:
        """As defineAggregate stored them."""
    async def appendFile(
        self, args: dict[str, Any] | None, /, *, timeout: float | None = None, **options: Any
    ) -> dict[str, Any]:
        """`ifMatch` makes it conditional."""
    async def asOf(
        self, args: dict[str, Any] | None = None, /, *, timeout: float | None = None, **options: Any
    ) -> dict[str, Any]:
        """Runs one inner read door there; what it cannot serve refuses."""
    async def batchGet(
        self, args: dict[str, Any] | None, /, *, timeout: float | None = None, **options: Any
    ) -> dict[str, Any]:
        """Answers in the order asked and lists the missing ids."""
    async def clear(
        self, args: dict[str, Any] | None, /, *, timeout: float | None = None, **options: Any
    ) -> dict[str, Any]:
        """Files and profile rows too; `confirm` names the brain."""
    async def close(
        self, args: dict[str, Any] | None = None, /, *, timeout: float | None = None, **options: Any
    ) -> dict[str, Any]:
        """Doors in flight finish first."""
    async def copy(
        self, args: dict[str, Any] | None, /, *, timeout: float | None = None, **options: Any
    ) -> dict[str, Any]:
        """A tree needs `recursive`, an existing target `overwrite`."""
    async def counts(
        self, args: dict[str, Any] | None = None, /, *, timeout: float | None = None, **options: Any
    ) -> dict[str, Any]:
        """Public and all-tier counts, and the vector shape."""
    async def defineAggregate(
        self, args: dict[str, Any] | None, /, *, timeout: float | None = None, **options: Any
    ) -> dict[str, Any]:
        """Kept current on every commit, stored as a system row."""
    async def diagnostics(
        self, args: dict[str, Any] | None = None, /, *, timeout: float | None = None, **options: Any
    ) -> dict[str, Any]:
        """Lists problems; `deep` also verifies checksums."""
    async def diff(
        self, args: dict[str, Any] | None, /, *, timeout: float | None = None, **options: Any
    ) -> dict[str, Any]:
        """Added, changed, removed; a row written and removed between them is absent."""
    async def embed(
        self, args: dict[str, Any] | None, /, *, timeout: float | None = None, **options: Any
    ) -> dict[str, Any]:
        """384 dimensions, local model; says if the input was truncated."""
    async def embedBatch(
        self, args: dict[str, Any] | None, /, *, timeout: float | None = None, **options: Any
    ) -> dict[str, Any]:
        """One vector and one truncated flag per text."""
    async def exists(
        self, args: dict[str, Any] | None, /, *, timeout: float | None = None, **options: Any
    ) -> dict[str, Any]:
        """Only an invalid path refuses."""
    async def explain(
        self, args: dict[str, Any] | None = None, /, *, timeout: float | None = None, **options: Any
    ) -> dict[str, Any]:
        """Fetches nothing, and says what it would refuse."""
    async def export(
        self, args: dict[str, Any] | None = None, /, *, timeout: float | None = None, **options: Any
    ) -> dict[str, Any]:
        """The cursor pins one generation, so every page is one consistent state."""
    async def fields(
        self, args: dict[str, Any] | None = None, /, *, timeout: float | None = None, **options: Any
    ) -> dict[str, Any]:
        """Field paths with their counts and value kinds."""
    async def fileHistory(
        self, args: dict[str, Any] | None, /, *, timeout: float | None = None, **options: Any
    ) -> dict[str, Any]:
        """Newest first; read an old one with readFile and `generation`."""
    async def find(
        self, args: dict[str, Any] | None = None, /, *, timeout: float | None = None, **options: Any
    ) -> dict[str, Any]:
        """A leg it cannot serve is reported (auto mode) or refused, never approximated."""
    async def generation(
        self, id: str, args: dict[str, Any] | None = None, /, *, timeout: float | None = None, **options: Any
    ) -> dict[str, Any]:
        """Also through what service, and its row counts."""
    async def get(
        self, id: str, args: dict[str, Any] | None = None, /, *, timeout: float | None = None, **options: Any
    ) -> dict[str, Any]:
        """An absent row answers `entity: null`, not a refusal."""
    async def getxattr(
        self, args: dict[str, Any] | None, /, *, timeout: float | None = None, **options: Any
    ) -> dict[str, Any]:
        """An absent one answers `exists: false`."""
    async def health(
        self, args: dict[str, Any] | None = None, /, *, timeout: float | None = None, **options: Any
    ) -> dict[str, Any]:
        """Checks lease, write doors, log, projections, blobs, embedder and counts."""
    async def history(
        self, id: str, args: dict[str, Any] | None = None, /, *, timeout: float | None = None, **options: Any
    ) -> dict[str, Any]:
        """Newest first; an id never written answers no versions."""
    async def init(
        self, args: dict[str, Any] | None = None, /, *, timeout: float | None = None, **options: Any
    ) -> dict[str, Any]:
        """`force` takes it from a live holder: an explicit operator act."""
    async def listxattr(
        self, args: dict[str, Any] | None, /, *, timeout: float | None = None, **options: Any
    ) -> dict[str, Any]:
        """Names only; read each with getxattr."""
    async def mkdir(
        self, args: dict[str, Any] | None, /, *, timeout: float | None = None, **options: Any
    ) -> dict[str, Any]:
        """`parents` creates missing ancestors and accepts one that exists."""
    async def move(
        self, args: dict[str, Any] | None, /, *, timeout: float | None = None, **options: Any
    ) -> dict[str, Any]:
        """Replacing an existing target needs `overwrite`."""
    async def now(
        self, args: dict[str, Any] | None = None, /, *, timeout: float | None = None, **options: Any
    ) -> dict[str, Any]:
        """With its timestamp and the oldest generation still readable."""
    async def onChange(
        self, args: dict[str, Any] | None, /, *, timeout: float | None = None, **options: Any
    ) -> dict[str, Any]:
        """No wire carries a callback."""
    async def readFile(
        self, args: dict[str, Any] | None, /, *, timeout: float | None = None, **options: Any
    ) -> dict[str, Any]:
        """UTF-8 or base64, whole or a range; verified, never decoded lossily."""
    async def readdir(
        self, args: dict[str, Any] | None = None, /, *, timeout: float | None = None, **options: Any
    ) -> dict[str, Any]:
        """Every depth by default, in path order."""
    async def relate(
        self, args: dict[str, Any] | None, /, *, timeout: float | None = None, **options: Any
    ) -> dict[str, Any]:
        """The same from, to, type and subtype again updates it in place."""
    async def relateMany(
        self, args: dict[str, Any] | None, /, *, timeout: float | None = None, **options: Any
    ) -> dict[str, Any]:
        """One generation; existing ones update in place."""
    async def related(
        self, args: dict[str, Any] | None = None, /, *, timeout: float | None = None, **options: Any
    ) -> dict[str, Any]:
        """Either direction or one, in relation-id order."""
    async def remove(
        self, args: dict[str, Any] | None, /, *, timeout: float | None = None, **options: Any
    ) -> dict[str, Any]:
        """One commit, answering how many relations went with it."""
    async def removeAggregate(
        self, args: dict[str, Any] | None, /, *, timeout: float | None = None, **options: Any
    ) -> dict[str, Any]:
        """An unknown name refuses AggregateNotFoundError."""
    async def removeMany(
        self, args: dict[str, Any] | None = None, /, *, timeout: float | None = None, **options: Any
    ) -> dict[str, Any]:
        """More matches than `limit` refuses and deletes nothing."""
    async def removexattr(
        self, args: dict[str, Any] | None, /, *, timeout: float | None = None, **options: Any
    ) -> dict[str, Any]:
        """An absent one is not a refusal."""
    async def rename(
        self, args: dict[str, Any] | None, /, *, timeout: float | None = None, **options: Any
    ) -> dict[str, Any]:
        """The target must not exist."""
    async def repair(
        self, args: dict[str, Any] | None = None, /, *, timeout: float | None = None, **options: Any
    ) -> dict[str, Any]:
        """`dryRun` only reports what it would do."""
    async def rmdir(
        self, args: dict[str, Any] | None, /, *, timeout: float | None = None, **options: Any
    ) -> dict[str, Any]:
        """A non-empty one refuses without `recursive`."""
    async def setxattr(
        self, args: dict[str, Any] | None, /, *, timeout: float | None = None, **options: Any
    ) -> dict[str, Any]:
        """Replaces any value under that name."""
    async def similar(
        self, args: dict[str, Any] | None = None, /, *, timeout: float | None = None, **options: Any
    ) -> dict[str, Any]:
        """Ranked by cosine, with find's filters."""
    async def similarity(
        self, args: dict[str, Any] | None, /, *, timeout: float | None = None, **options: Any
    ) -> dict[str, Any]:
        """Cosine, from -1 to 1."""
    async def snapshot(
        self, args: dict[str, Any] | None = None, /, *, timeout: float | None = None, **options: Any
    ) -> dict[str, Any]:
        """Immutable files; a copy of them reopens at that generation."""
    async def stat(
        self, args: dict[str, Any] | None, /, *, timeout: float | None = None, **options: Any
    ) -> dict[str, Any]:
        """Also its times, entity id and attributes."""
    async def stats(
        self, args: dict[str, Any] | None = None, /, *, timeout: float | None = None, **options: Any
    ) -> dict[str, Any]:
        """Row counts, bytes by part, and the embedder's state."""
    async def storageAdapter(
        self, args: dict[str, Any] | None = None, /, *, timeout: float | None = None, **options: Any
    ) -> dict[str, Any]:
        """No wire carries a live object."""
    async def transact(
        self, args: dict[str, Any] | None, /, *, timeout: float | None = None, **options: Any
    ) -> dict[str, Any]:
        """Up to 10000 ops, in order; the first bad op aborts all."""
    async def traverse(
        self, args: dict[str, Any] | None, /, *, timeout: float | None = None, **options: Any
    ) -> dict[str, Any]:
        """Up to 6 hops, breadth- or depth-first, expanding only matching nodes."""
    async def unlink(
        self, args: dict[str, Any] | None, /, *, timeout: float | None = None, **options: Any
    ) -> dict[str, Any]:
        """A directory refuses; that is rmdir."""
    async def unrelate(
        self, args: dict[str, Any] | None = None, /, *, timeout: float | None = None, **options: Any
    ) -> dict[str, Any]:
        """Answers the ids removed."""
    async def update(
        self, args: dict[str, Any] | None, /, *, timeout: float | None = None, **options: Any
    ) -> dict[str, Any]:
        """Metadata merges; new content is re-embedded; `ifGeneration` makes it conditional."""
    async def updateMany(
        self, args: dict[str, Any] | None, /, *, timeout: float | None = None, **options: Any
    ) -> dict[str, Any]:
        """Up to 10000, all or nothing unless `continueOnError`."""
    async def updateRelation(
        self, args: dict[str, Any] | None, /, *, timeout: float | None = None, **options: Any
    ) -> dict[str, Any]:
        """Also confidence and data; `ifGeneration` makes it conditional."""
    async def use(
        self, args: dict[str, Any] | None, /, *, timeout: float | None = None, **options: Any
    ) -> dict[str, Any]:
        """A plugin is code, so no wire carries it."""
    async def warm(
        self, args: dict[str, Any] | None = None, /, *, timeout: float | None = None, **options: Any
    ) -> dict[str, Any]:
        """Reports what each projection cost."""
    async def writeFile(
        self, args: dict[str, Any] | None, /, *, timeout: float | None = None, **options: Any
    ) -> dict[str, Any]:
        """Text is embedded; `exclusive` and `ifMatch` make it conditional."""
