"""The ``brainy`` command: the starter, ``init``, and the commands later releases fill in.

Argument and environment resolution only; the work is done by ``brainy.engine``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from brainy import __version__
from brainy.contract import refusals as R

STARTER_STORE = "./brain"

# Commands whose implementation has not landed: each refuses by name with its release.
NOT_YET: dict[str, str] = {}
# serve flags of later releases: accepted by the parser so they refuse by name rather than as a typo.
LATER_FLAGS: dict[str, str] = {}  # serve flags parsed but not served yet, and the release each arrives in


def _refuse(refusal: R.Refusal) -> int:
    print(f"brainy: {refusal.name}: {refusal.message}", file=sys.stderr)
    print(json.dumps({"error": refusal.to_wire()}), file=sys.stderr)
    return 2


def _init(path: str) -> int:
    from brainy.engine import StoreExistsError, init_store

    try:
        identity = init_store(path)
    except StoreExistsError as exc:
        print(f"brainy init: refused: {exc}; nothing was written", file=sys.stderr)
        return 2
    print(f"brainy: created store {identity['storeId']} at {path}")
    return 0


def _starter(keys: str | None) -> int:
    """Serve ./brain read-write on a free loopback port; an absent store is a refusal naming `brainy init`."""
    from pathlib import Path

    from brainy.auth.keys import KeysFileError
    from brainy.auth.tokens import TokenFileError
    from brainy.doors.language import LanguageConfigError
    from brainy.net.serve import starter
    from brainy.store.directory import read_identity

    try:
        read_identity(Path(STARTER_STORE))
    except R.Refusal as refusal:
        return _refuse(refusal)
    try:
        return starter(Path(STARTER_STORE), keys)
    except (KeysFileError, TokenFileError, LanguageConfigError) as exc:
        print(f"brainy: refused to start: {exc}", file=sys.stderr)
        return 2


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="brainy", description="brainy: a knowledge store for agents.")
    parser.add_argument("--version", action="version", version=f"brainy {__version__}")
    sub = parser.add_subparsers(dest="command")
    p_init = sub.add_parser("init", help="create a new store (the only command that makes one)")
    p_init.add_argument("path")
    p_serve = sub.add_parser("serve", help="answer for brains over HTTP/1.1, HTTP/2, gRPC and HTTP/3")
    p_serve.add_argument(
        "--listen",
        action="append",
        metavar="HOST:PORT[,h1|h2|grpc|h3]",
        help="repeatable; default 127.0.0.1:8300 (h1 and h2 on one port)",
    )
    p_serve.add_argument("--brain", action="append", metavar="NAME=PATH", help="a named store (repeatable)")
    p_serve.add_argument("--brains-dir", metavar="DIR", help="every legal subdirectory of DIR is a brain")
    p_serve.add_argument(
        "--keys",
        metavar="FILE",
        help="the keys file (default $BRAINY_KEYS, else "
        "$XDG_CONFIG_HOME/brainy/keys); minted at first start when absent",
    )
    p_serve.add_argument(
        "--issuers",
        metavar="FILE",
        help="the issuers file bk1 tokens verify against (default "
        "$BRAINY_SERVE_ISSUERS, else `issuers` beside the keys file); absent: no issuer trusted",
    )
    p_serve.add_argument(
        "--revoked", metavar="FILE", help="the revoked list (default revoked.json beside the issuers file)"
    )
    p_serve.add_argument(
        "--tls-cert",
        metavar="PEM",
        help="the certificate (chain) the h3 listeners serve; the host's: this server mints none",
    )
    p_serve.add_argument("--tls-key", metavar="PEM", help="the certificate's private key")
    p_serve.add_argument(
        "--reading-door",
        metavar="URL",
        help="the receiver memory.write asks for a browsable link "
        "(POST with this server's service key, 5 s); needs a service-key line in the keys file",
    )
    p_serve.add_argument(
        "--auth-server",
        metavar="URL",
        help="the authorization server MCP clients get tokens "
        "from: named by GET /.well-known/oauth-protected-resource and on every 401",
    )
    p_serve.add_argument(
        "--sign-in",
        nargs="?",
        const="brainy.auth.signin",
        metavar="MODULE",
        help="make this server its own issuer (OAuth 2.1, email codes; docs/sign-in.md): MODULE exposes "
        "create_sign_in, default brainy's own; needs --public-url, --sign-in-mail, --brains-dir and a service key",
    )
    p_serve.add_argument("--public-url", metavar="URL", help="this server's fixed origin (needed by --sign-in)")
    p_serve.add_argument(
        "--sign-in-mail",
        metavar="URL",
        help="where a sign-in code is POSTed ({email, code, expiresInMinutes}, this server's service key as bearer)",
    )
    p_serve.add_argument("--door-id", metavar="ID", help="the sign-in's issuer id (default: --public-url's host)")
    p_serve.add_argument(
        "--sign-in-accounts",
        metavar="FILE",
        help="the register: `<account id> <store>` lines (default sign-in-accounts beside --keys; absent: none)",
    )
    p_serve.add_argument(
        "--snapshots-dir",
        metavar="DIR",
        help="the root host.persist writes named snapshots "
        "under (never created, never defaulted; not the brains directory, inside it or around it)",
    )
    p_serve.add_argument(
        "--feed-retention",
        metavar="SPAN",
        help="how long the log keeps frames for the change feed: a duration (30s, 15m, 12h, 7d) or a size "
        "(512MiB, 2GiB) of sealed segments; default 7d",
    )
    p_serve.add_argument(
        "--history",
        dest="history_horizon",
        metavar="SPAN",
        help="how far back time travel reads (a duration such as 30d); older versions are dropped at "
        "compaction; default: every generation is kept",
    )
    p_serve.add_argument(
        "--fleet",
        metavar="ETCD_URL[,ETCD_URL...]",
        help="join a fleet whose placement is in this etcd (v3 API, 3.4+): any node answers any brain "
        "(docs/fleet.md); needs --node and --advertise",
    )
    p_serve.add_argument("--node", metavar="NAME", help="this node's name in the fleet, unique among live nodes")
    p_serve.add_argument(
        "--advertise", metavar="URL", help="where the fleet's other nodes reach this one: http://HOST:PORT (h1)"
    )
    p_serve.add_argument(
        "--fleet-ttl",
        type=int,
        default=10,
        metavar="SECONDS",
        help="the lease this node's registration and brains are held under; default 10, at least 2",
    )
    p_serve.add_argument(
        "--move-stage-seconds",
        type=float,
        metavar="SECONDS",
        help="host.move: the named node stages the brain within this before any write is held, or the move is "
        "refused; default 20",
    )
    p_serve.add_argument(
        "--object-store",
        metavar="s3://BUCKET[/PREFIX]",
        help="ship every commit's log frames and host.persist snapshots to this S3-compatible store (endpoint and "
        "keys from AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_DEFAULT_REGION); needs --fleet",
    )
    p_serve.add_argument(
        "--ship",
        choices=("sync", "async"),
        default="sync",
        help="sync (default): a write is acknowledged once its frames are stored; async: after the local fsync, "
        "shipped within --ship-interval",
    )
    p_serve.add_argument(
        "--ship-interval",
        type=float,
        default=1.0,
        metavar="SECONDS",
        help="with --ship async: the most time between a write's fsync and its frames being stored; default 1",
    )
    for flag in LATER_FLAGS:
        p_serve.add_argument("--" + flag.replace("_", "-"), metavar="PATH", help=f"arrives in {LATER_FLAGS[flag]}")
    parser.add_argument("--keys", dest="starter_keys", metavar="FILE", help="the starter's keys file")
    p_mcp = sub.add_parser("mcp", help="MCP over stdio, as the principal whose key is in $BRAINY_KEY")
    p_mcp.add_argument("--brain", default=STARTER_STORE, metavar="PATH", help="the store (default ./brain)")
    p_mcp.add_argument(
        "--keys",
        metavar="FILE",
        help="the keys file (default as serve: $BRAINY_KEYS, else $XDG_CONFIG_HOME/brainy/keys)",
    )
    from brainy.auth.issuer import add_commands

    add_commands(sub)  # issuer keygen, token mint
    from brainy.cli.chores import COMMANDS
    from brainy.cli.chores import add_commands as add_chores

    add_chores(sub)
    for name in NOT_YET:
        sub.add_parser(name, help=f"arrives in {NOT_YET[name]}").add_argument("rest", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    if args.command is None:
        return _starter(args.starter_keys)
    if args.command == "init":
        return _init(args.path)
    if args.command == "mcp":
        from brainy.net.mcp.stdio_glue import main as mcp_main

        return mcp_main(args.brain, args.keys)
    if args.command in ("issuer", "token"):
        from brainy.auth.issuer import run

        return run(args)
    if args.command in COMMANDS:
        from brainy.cli.chores import run as run_chore

        return run_chore(args)
    if args.command == "serve":
        for flag, release in LATER_FLAGS.items():
            if getattr(args, flag) is not None:
                return _refuse(
                    R.NotYetNativeError(
                        f"--{flag.replace('_', '-')} arrives in {release}",
                        door=f"serve --{flag.replace('_', '-')}",
                        release=release,
                    )
                )
        from brainy.auth.keys import KeysFileError
        from brainy.auth.tokens import TokenFileError
        from brainy.net.serve import serve
        from brainy.net.tls import CertificateError

        try:
            return serve(args)
        except R.Refusal as refusal:  # a start the seeds refuse by name (SnapshotRootUnusableError, ...)
            print("brainy serve: refused to start: ", end="", file=sys.stderr)
            return _refuse(refusal)
        except (KeysFileError, TokenFileError, CertificateError, ValueError) as exc:
            print(f"brainy serve: refused to start: {exc}", file=sys.stderr)
            return 2
    return _refuse(
        R.NotYetNativeError(
            f"`brainy {args.command}` arrives in {NOT_YET[args.command]}",
            door=args.command,
            release=NOT_YET[args.command],
        )
    )
