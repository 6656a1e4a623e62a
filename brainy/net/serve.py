"""``brainy serve`` and the starter: argument resolution to a running server, and the stop narrated."""

from __future__ import annotations

import asyncio
import importlib
import json
import logging
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from brainy.auth.keys import KeyTable, default_keys_path
from brainy.auth.reading_door import ReadingDoor
from brainy.auth.reading_door import configure as configure_reading_door
from brainy.auth.tokens import TokenVerifier, default_issuers_path
from brainy.contract import refusals as R
from brainy.doors import language
from brainy.fleet.etcd import Etcd
from brainy.fleet.membership import STAGE_SECONDS, Fleet, FleetJoinError
from brainy.fleet.objectstore import ObjectStore, ObjectStoreError
from brainy.fleet.proxy import owner_address
from brainy.host.arbiter import meminfo
from brainy.host.backups import Backups, check_start
from brainy.host.dispatch import check_brain_name
from brainy.host.host_doors import Host
from brainy.host.pool import Pool
from brainy.host.shipped import Shipping
from brainy.net.app import App
from brainy.net.server import Listen, Server, serve_until_stopped
from brainy.net.tls import Certificate, judge

log = logging.getLogger("brainy.serve")

DEFAULT_LISTEN = "127.0.0.1:8300"


def _loop() -> None:
    """uvloop when it imports (it does wherever brainy is installed); the loop policy is set once."""
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency
        return
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())


def _logging() -> None:
    logging.basicConfig(
        stream=sys.stderr, level=logging.INFO, format="%(asctime)s brainy %(levelname)s %(name)s: %(message)s"
    )


def _language() -> None:
    """The language provider, resolved once from the environment before anything binds: a misconfiguration
    (LanguageConfigError, a ValueError) refuses the start (docs/language-providers.md)."""
    provider = language.configure()
    log.info("language provider: %s", provider.describe() if provider else f"none (looked for {language.LOOKED_FOR})")


def run(
    pool: Pool,
    keys: KeyTable,
    listens: list[Listen],
    on_ready: Any = None,
    certificate: Certificate | None = None,
    reading_door: ReadingDoor | None = None,
    host: Host | None = None,
    auth_server: str | None = None,
    sign_in: Any = None,
) -> int:
    """Serve until SIGTERM/SIGINT; then stop in order and narrate each brain closed. ``sign_in`` (a
    ``--sign-in`` door) is closed last: its identity store is the one this process keeps resident."""
    _loop()
    built_at = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

    async def main() -> list[dict[str, Any]]:
        fleet = host.fleet if host is not None else None
        if fleet is not None:  # joined before anything listens: a name or an etcd it cannot have refuses the start
            await fleet.join(claim=False)
        app = App(pool, keys, built_at, reading_door=reading_door, host=host, auth_server=auth_server, sign_in=sign_in)
        server = Server(app, listens, certificate)

        def ready(s: Server) -> None:
            host, port = s.addresses[0]
            app.listeners = [(f"{h}:{p}", listen.protocols) for (h, p), listen in zip(s.addresses, s.bound)]
            # a sign-in door names one fixed origin (--public-url): its documents and this server's agree
            app.base_url = (
                sign_in.public_url
                if sign_in is not None
                else f"http://{host if ':' not in host else f'[{host}]'}:{port}"
            )
            if fleet is not None:  # claims once it listens: a brain it serves is forwarded here from then on
                fleet.start()
            if on_ready is not None:
                on_ready(s)

        try:
            return await serve_until_stopped(server, ready)
        finally:
            if app.edge is not None:
                app.edge.close()
            if host is not None and host.shipping is not None:  # async: what is durable is shipped once more
                await asyncio.get_running_loop().run_in_executor(None, host.shipping.stop)
            if fleet is not None:  # after the last request: its registration and claims end with the lease
                await fleet.leave()
            if sign_in is not None:
                sign_in.close()

    closed = asyncio.run(main())
    if host is not None:
        host.backups.wait()  # a backup run in flight finishes its copy before the process exits (bounded)
    for answer in closed:
        log.info(
            "closed brain %s (lease released: %s, clean close recorded: %s)",
            answer["brain"],
            answer["leaseReleased"],
            answer["cleanCloseRecorded"],
        )
    log.info("stopped")
    return 0


def open_keys(
    keys_path: str | None, issuers: str | None = None, revoked: str | None = None, mint_if_missing: bool = True
) -> KeyTable:
    """The keys file and the bk1 token verifier behind it (docs/keys.md). The issuers file and the revoked
    list are read first, so a refused one refuses the start before a first keys file is minted."""
    keys_at = Path(keys_path) if keys_path else default_keys_path()
    issuers_at = Path(issuers) if issuers else default_issuers_path(keys_at)
    verifier = TokenVerifier.open(issuers_at, Path(revoked) if revoked else None)
    counts = verifier.counts()
    log.info(
        "issuers file %s: %d keys%s; revoked list %s: %d jtis",
        issuers_at,
        counts["issuers"],
        "" if issuers_at.exists() else " (absent: no issuer is trusted)",
        verifier.revoked.path,
        counts["revoked"],
    )
    return KeyTable.open(keys_at, mint_if_missing=mint_if_missing, token_verifier=verifier, revoked=verifier.revoked)


def identity(auth_server: str | None, sign_in: str | None) -> str | None:
    """The start's identity flags, checked before anything is opened (seed 001, "Sign-in"): ``--auth-server``
    names someone else's issuer and ``--sign-in`` would make this server one, so both together refuse.
    Answers ``--auth-server``'s URL, or None (``--sign-in`` is settled by :func:`sign_in_door`)."""
    if auth_server is not None and sign_in is not None:
        raise R.InvalidArgumentError(
            "--auth-server and --sign-in are mutually exclusive: one names another "
            "issuer, the other would make this server the issuer",
            field="--sign-in",
            reason="exclusive",
        )
    if auth_server is not None:
        parts = urlsplit(auth_server)
        if parts.scheme not in ("https", "http") or not parts.netloc or parts.query or parts.fragment:
            raise R.InvalidArgumentError(
                f"--auth-server {auth_server!r}: an absolute http(s) URL, without a query or fragment",
                field="--auth-server",
                reason="malformed",
            )
    return auth_server


def sign_in_module(name: str) -> Callable[[Any], Any]:
    """``--sign-in MODULE``'s ``create_sign_in``, resolved by import: a module that will not import, or has no
    such function, refuses the start by name; never a server that came up without the sign-in it was asked
    for."""
    try:
        module = importlib.import_module(name)
    except Exception as exc:  # any failure to import is the same refusal, naming why
        raise R.SignInModuleUnavailableError(
            f"--sign-in {name}: the module does not import ({type(exc).__name__}: {exc})", module=name
        ) from None
    create = getattr(module, "create_sign_in", None)
    if not callable(create):
        raise R.SignInModuleUnavailableError(f"--sign-in {name}: the module has no create_sign_in", module=name)
    return create


def _missing(flag: str, why: str) -> R.Refusal:
    return R.InvalidArgumentError(f"--sign-in needs {flag}: {why}", field=flag, reason="missing")


def sign_in_door(args: Any, create: Callable[[Any], Any], keys: KeyTable, brains_dir: Path | None) -> Any:
    """The sign-in door ``--sign-in`` asked for, its required flags checked first (seed 001, "Sign-in"), its
    keyring's public key merged into the issuers table every bk1 token is verified against."""
    from brainy.auth.signin import SignInConfig
    from brainy.auth.signin.keyring import KEY_NAME
    from brainy.auth.signin.records import IDENTITY_NAME
    from brainy.auth.signin.register import REGISTER_NAME

    public = getattr(args, "public_url", None)
    if not public:
        raise _missing("--public-url", "the fixed origin the issuer, its pages and its tokens name")
    parts = urlsplit(public)
    if (
        parts.scheme not in ("https", "http")
        or not parts.hostname
        or parts.path not in ("", "/")
        or parts.query
        or parts.fragment
    ):  # an origin: the sign-in answers /auth/* and /.well-known/* at this server's root
        raise R.InvalidArgumentError(
            f"--public-url {public!r}: an origin, http(s)://HOST[:PORT], without a path, query or fragment",
            field="--public-url",
            reason="malformed",
        )
    mail = getattr(args, "sign_in_mail", None)
    if not mail:
        raise _missing("--sign-in-mail", "the mail sender a sign-in code is POSTed to")
    if urlsplit(mail).scheme not in ("https", "http") or not urlsplit(mail).hostname:
        raise R.InvalidArgumentError(
            f"--sign-in-mail {mail!r}: an http(s) URL with a host", field="--sign-in-mail", reason="malformed"
        )
    if keys.service_key() is None:
        raise _missing("a service-key line (! reach) in --keys", "the bearer of the mail POST")
    if brains_dir is None:
        raise _missing("--brains-dir", "its accounts live in <brains-dir>/.identity")
    door_id = getattr(args, "door_id", None) or parts.hostname
    accounts = getattr(args, "sign_in_accounts", None)
    config = SignInConfig(
        public_url=public.rstrip("/"),
        door_id=door_id,
        mail_url=mail,
        service_key=keys.service_key,
        accounts=Path(accounts) if accounts else keys.path.with_name(REGISTER_NAME),
        identity=brains_dir / IDENTITY_NAME,
        key=brains_dir / KEY_NAME,
    )
    door = create(config)
    verifier = keys.token_verifier
    if not isinstance(verifier, TokenVerifier):  # open_keys always builds one: the table a minted token meets
        door.close()
        raise RuntimeError("--sign-in needs the bk1 token verifier the keys file is opened with")
    verifier.merge(door.issuers())
    log.info(
        "sign-in: this server is issuer %r at %s; accounts register %s", door_id, config.public_url, config.accounts
    )
    return door


def join_args(args: Any, pool: Pool) -> Fleet | None:
    """The fleet ``--fleet``, ``--node``, ``--advertise`` and ``--fleet-ttl`` describe (docs/fleet.md), or None
    without ``--fleet``; a flag missing or malformed refuses the start. Nothing is contacted yet."""
    urls = getattr(args, "fleet", None)
    if urls is None:
        for flag in ("node", "advertise"):
            if getattr(args, flag, None) is not None:
                raise FleetJoinError(f"--{flag} is a fleet's flag: give --fleet ETCD_URL too")
        return None
    node, advertise = getattr(args, "node", None), getattr(args, "advertise", None)
    if not node or not advertise:
        raise FleetJoinError("--fleet needs --node NAME and --advertise URL")
    try:
        check_brain_name(node)  # a node's name is one legal segment, as a brain's is
    except R.Refusal:
        raise FleetJoinError(f"--node {node!r}: one legal name segment") from None
    stage = getattr(args, "move_stage_seconds", None)
    if stage is None:
        stage = STAGE_SECONDS
    elif not stage > 0:
        raise FleetJoinError(f"--move-stage-seconds {stage}: more than 0")
    try:
        owner_address(advertise)
        client = Etcd([url.strip() for url in urls.split(",") if url.strip()])
    except ValueError as exc:
        raise FleetJoinError(f"--fleet / --advertise: {exc}") from None
    return Fleet(
        client,
        node,
        advertise.rstrip("/"),
        args.fleet_ttl,
        free_bytes=lambda: meminfo().get("MemAvailable", 0),
        local=pool.known,
        stage_seconds=stage,
    )


def shipping_args(args: Any, pool: Pool, fleet: Fleet | None, backups: Backups) -> Shipping | None:
    """The shipping ``--object-store``, ``--ship`` and ``--ship-interval`` describe (docs/fleet.md), or None; the
    bucket is created if absent. A flag malformed, no ``--fleet``, or a store that does not answer refuses the
    start."""
    url = getattr(args, "object_store", None)
    if url is None:
        return None
    if fleet is None:
        raise FleetJoinError("--object-store ships a fleet's brains: give --fleet ETCD_URL too")
    if pool.brains_dir is None:
        raise FleetJoinError("--object-store needs --brains-dir: a brain taken over is restored there")
    try:
        store = ObjectStore.from_url(url)
        store.create_bucket()
    except (ValueError, ObjectStoreError) as exc:
        raise FleetJoinError(f"--object-store: {exc}") from None
    shipping = Shipping(store, fleet, pool, args.ship, args.ship_interval)
    if backups.root is None:  # host.persist uploads a snapshot instead (docs/fleet.md)
        backups.remote = shipping.persist
    log.info("object store %s (%s), --ship %s", url, store.creds.endpoint, args.ship)
    return shipping


def serve(args: Any) -> int:
    _logging()
    _language()
    auth_server = identity(getattr(args, "auth_server", None), getattr(args, "sign_in", None))
    create_sign_in = sign_in_module(args.sign_in) if getattr(args, "sign_in", None) is not None else None
    listens = [Listen.parse(text) for text in (args.listen or [DEFAULT_LISTEN])]
    # judged before anything opens or binds: a refused pair refuses the start, never an h2 fallback
    certificate = judge(args.tls_cert, args.tls_key, sum(listen.protocols == ("h3",) for listen in listens))
    named: dict[str, Path] = {}
    for spec in args.brain or []:
        name, sep, path = spec.partition("=")
        if not sep or not name or not path:
            raise SystemExit(f"brainy serve: --brain {spec!r}: expected NAME=PATH")
        named[name] = Path(path)
    brains_dir = Path(args.brains_dir) if args.brains_dir else None
    snapshots = Path(args.snapshots_dir) if getattr(args, "snapshots_dir", None) else None
    if snapshots is not None:
        check_start(snapshots, brains_dir)  # SnapshotRootUnusableError refuses the start
    # a horizon it cannot read refuses the start: misread, it would drop what the operator meant to keep
    pool = Pool(
        named, brains_dir, horizons=(getattr(args, "feed_retention", None), getattr(args, "history_horizon", None))
    )
    keys = open_keys(args.keys, args.issuers, args.revoked)
    if keys.minted:
        print(
            f"brainy: no keys file was at {keys.path}; minted one key (shown once, reaching every brain):\n"
            f"  {keys.minted}",
            flush=True,
        )
    sign_in = sign_in_door(args, create_sign_in, keys, brains_dir) if create_sign_in is not None else None
    if sign_in is not None:
        auth_server = sign_in.public_url  # this door's RFC 9728 document names ITSELF (seed 001, "Discovery")
    fleet = join_args(args, pool)
    backups = Backups(snapshots, brains_dir)
    shipping = shipping_args(args, pool, fleet, backups)
    reading_door = configure_reading_door(args.reading_door, keys.service_key)
    if reading_door is not None:
        log.info("reading door: %s", reading_door.url)
    return run(
        pool,
        keys,
        listens,
        certificate=certificate,
        reading_door=reading_door,
        host=Host(keys, backups, fleet, shipping),
        auth_server=auth_server,
        sign_in=sign_in,
    )


def starter(store: Path, keys_path: str | None = None) -> int:
    """Serve ./brain read-write on a free loopback port and print the MCP client snippet."""
    _logging()
    _language()
    keys = open_keys(keys_path)  # a refused keys or issuers file must refuse before the claim
    pool = Pool({"brain": store})
    opened = pool.init("brain")
    key = keys.minted or keys.key_for("brain")

    def ready(server: Server) -> None:
        host, port = server.addresses[0]
        snippet = {
            "mcpServers": {
                "brainy": {
                    "type": "http",
                    "url": f"http://{host}:{port}/mcp",
                    "headers": {"Authorization": f"Bearer {key}"},
                }
            }
        }
        print(
            f"brainy: serving {store} (generation {opened['generation']}, "
            f"{opened['writer']['role']}) on http://{host}:{port}",
            flush=True,
        )
        if key is None:
            print(f"brainy: no key in {keys.path} reaches this brain; add one to connect", flush=True)
        print("brainy: MCP client configuration:\n" + json.dumps(snippet, indent=2), flush=True)

    return run(pool, keys, [Listen("127.0.0.1", 0)], ready)
