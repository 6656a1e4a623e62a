"""The keys file: which bearer is which principal, and which brains each one reaches.

A file the host places, mode 0600, one key per line (seed 001, "Keys, reach and
access")::

    # <key>            <kind>:<principal>        <brains…>
    bky_9f3a…          person:you@example.com    notes team
    bky_2c81…          business:acme             team
    bky_7d40…          service:orders            *
    bks_a19f…          service:operator          !

Laws, each enforced below:

* Fields are separated by whitespace. A field that begins with ``#`` begins a
  comment that runs to the end of the line; blank lines are ignored.
* ``<key>`` is at least 16 printable non-space ASCII characters, and may not
  begin with ``bk1.`` (that prefix is a minted token's, and a static key there
  could never be reached).
* ``<kind>`` is ``person``, ``business`` or ``service``; ``<principal>`` is a
  non-empty printable name, the whole ``kind:principal`` at most 256 characters.
* ``<brains…>`` is one or more legal brain names, or ``*`` alone (every brain),
  or ``!`` alone (the service key: engine mechanics on every brain, no
  principal's rows), and only a ``service:`` principal may carry ``!``.
* Every line ends with a newline: a last line with fields and none after it may
  be a write cut short, and is refused.
* A duplicate key, or any line breaking the above, refuses the WHOLE file, by
  line number. A refusal never quotes a field: a column put in the wrong place
  may be a key, and keys are never written to a message or a log.
* A file the group or the world may read or write is refused before it is read.

The file is re-read when it changes (seed 001, "Revocation"): a removed line
stops answering within a second. A reload that fails keeps the last good table
and logs why.

A missing file at first start mints one key for ``person:local`` reaching every
brain (seed 000, "Sovereignty"); this module hands it back and never prints it.

Static keys fail flat: no header, another scheme, an unknown or removed key all
answer the same :class:`UnauthenticatedError`, because the difference is a probe.
A minted ``bk1.`` token is the opposite: it fails by the name of its check.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import functools
import hashlib
import logging
import os
import re
import secrets
import stat
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from brainy.auth.principal import Principal
from brainy.contract import refusals as R
from brainy.contract.limits import json_loads

log = logging.getLogger("brainy.keys")

KINDS = frozenset(("person", "business", "service"))
EVERY_BRAIN = "*"
SERVICE_REACH = "!"
MIN_KEY_LENGTH = 16
MAX_PRINCIPAL_LENGTH = 256
TOKEN_PREFIX = "bk1."
MINTED_PRINCIPAL = "person:local"

# How often a request may pay for one stat of the keys file. A quarter second
# keeps "a removed line stops answering within a second" with room to spare,
# while a busy server stats at most four times a second, never once per request.
CHECK_INTERVAL = 0.25

# Authorization values whose static key the table remembers (bounded: only a valid key's are kept, but one
# key may be sent under any number of spellings of the scheme).
KNOWN_HELD = 256

# The same segment law as brainy.host.dispatch.BRAIN_NAME (kept here so reading
# the keys file does not import the engine): no "/", not starting with ".",
# at most 64 characters; "." and ".." are refused by the leading-dot rule.
BRAIN_NAME = re.compile(r"[^/.][^/]{0,63}")
_KEY = re.compile(rf"[\x21-\x7e]{{{MIN_KEY_LENGTH},}}")
_ROLE = re.compile(r"[a-z0-9._-]+")
_CALLER_KIND = re.compile(r"[a-z][a-z0-9_-]*")

CALLER_HEADER = "x-brainy-caller"
OWNER_HEADER = "x-brainy-owner"
ROLES_HEADER = "x-brainy-roles"

# One message for every static-key failure, so none of them can be told apart.
UNAUTHENTICATED_MESSAGE = "a valid key is required: send Authorization: Bearer <key>"

MINT_PREFIX = "bky_"
MINT_RANDOM_BYTES = 32  # 43 base64url characters (DOORS.md 10.3)

TokenVerifier = Callable[[str], Principal]
"""Verifies a ``bk1.`` bearer: answers its Principal or raises its named BRAINY_KEY_* refusal."""

HEADER = """\
# brainy keys file: who may call this server, and which brains each key reaches.
#
# One key per line, fields separated by spaces:
#
#   <key>   <kind>:<principal>   <brains...>
#
# <key>        at least 16 printable ASCII characters, no spaces; keep it secret.
# <kind>       person, business or service.
# <brains...>  one or more brain names; or * for every brain; or ! (a service
#              principal only, alone on its line) for the service key, which
#              opens the engine mechanics on every brain and no principal's rows.
#
# A field starting with # starts a comment. This file must stay mode 0600: brainy
# refuses it if the group or the world can read or write it. It is re-read when it
# changes, so removing a line stops that key answering within a second.
#
# The key below was minted at first start and printed once.
"""


class KeysFileError(Exception):
    """The keys file cannot be used: missing, unreadable, too open, or not parseable.

    ``line`` is the 1-based line a parse error is on (None for whole-file
    failures). The message never contains a key.
    """

    def __init__(self, path: str | os.PathLike[str], reason: str, line: int | None = None) -> None:
        self.path = os.fspath(path)
        self.reason = reason
        self.line = line
        where = self.path if line is None else f"{self.path}:{line}"
        super().__init__(f"keys file {where}: {reason}")


def default_keys_path() -> Path:
    """``$BRAINY_KEYS`` if set, else ``$XDG_CONFIG_HOME/brainy/keys`` (XDG default ``~/.config``)."""
    named = os.environ.get("BRAINY_KEYS")
    if named:
        return Path(named).expanduser()
    config = os.environ.get("XDG_CONFIG_HOME")
    # The XDG spec says a relative XDG_CONFIG_HOME is invalid and must be ignored.
    base = Path(config) if config and os.path.isabs(config) else Path.home() / ".config"
    return base / "brainy" / "keys"


# --- parsing -----------------------------------------------------------------------------------


# A line with fields and no newline after it ends the file in mid-line: a write cut short there reads as a
# shorter last field (a key reaching brain "te" instead of "team", perhaps another brain), so it is refused.
UNTERMINATED = "the file ends inside this line (no newline after it): a write cut short, or an editor that left the last line open; end it with a newline"


def _fields(line: str) -> list[str]:
    out: list[str] = []
    for field in line.split():
        if field.startswith("#"):
            break
        out.append(field)
    return out


def _principal_problem(principal: str) -> str | None:
    kind, colon, name = principal.partition(":")
    if not colon or not name:
        return "field 2 is not <kind>:<principal>"
    if kind not in KINDS:
        return "field 2 names an unknown kind (person, business or service)"
    if len(principal) > MAX_PRINCIPAL_LENGTH or not name.isprintable():
        return f"field 2: a principal is printable and at most {MAX_PRINCIPAL_LENGTH} characters"
    return None


def _reach(kind: str, brains: list[str]) -> tuple[frozenset[str] | None, bool] | str:
    """A line's brains as (reach, service_key), or the reason they are refused."""
    if SERVICE_REACH in brains:
        if len(brains) > 1:
            return "! stands alone: the service key reaches the mechanics of every brain, not named ones"
        if kind != "service":
            return "! is the service key, and only a service: principal may carry it"
        return None, True
    if EVERY_BRAIN in brains:
        if len(brains) > 1:
            return "* stands alone: it already means every brain"
        return None, False
    for number, brain in enumerate(brains, start=3):
        if not BRAIN_NAME.fullmatch(brain):
            return (
                f"field {number} is not a legal brain name (one path segment, no '/', "
                f"not starting with '.', at most 64 characters)"
            )
    return frozenset(brains), False


def parse_keys(data: bytes | str, source: str | os.PathLike[str] = "<keys>") -> dict[str, Principal]:
    """The table a keys file describes, key -> Principal; :class:`KeysFileError` names the first bad line.

    One bad line refuses the whole file: half a keys file is a file that grants
    or denies what its author did not write.
    """
    lines = data.split(b"\n") if isinstance(data, bytes) else data.split("\n")
    table: dict[str, Principal] = {}
    first_line: dict[str, int] = {}
    for number, raw in enumerate(lines, start=1):
        if isinstance(raw, bytes):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError:
                raise KeysFileError(source, "not valid UTF-8", number) from None
        else:
            line = raw
        fields = _fields(line)
        if not fields:
            continue
        if number == len(lines):
            raise KeysFileError(source, UNTERMINATED, number)
        if len(fields) < 3:
            raise KeysFileError(
                source,
                f"expected <key> <kind>:<principal> <brains...>, found {len(fields)} "
                f"field{'s' if len(fields) != 1 else ''}",
                number,
            )
        key, principal, brains = fields[0], fields[1], fields[2:]
        if not _KEY.fullmatch(key):
            raise KeysFileError(
                source, f"field 1: a key is at least {MIN_KEY_LENGTH} printable ASCII characters with no spaces", number
            )
        if key.startswith(TOKEN_PREFIX):
            raise KeysFileError(
                source, f"field 1: a key may not begin with {TOKEN_PREFIX!r}, which marks a minted token", number
            )
        problem = _principal_problem(principal)
        if problem is not None:
            raise KeysFileError(source, problem, number)
        reach = _reach(principal.partition(":")[0], brains)
        if isinstance(reach, str):
            raise KeysFileError(source, reach, number)
        if key in table:
            raise KeysFileError(source, f"duplicate key (first on line {first_line[key]})", number)
        first_line[key] = number
        table[key] = Principal.static_key(principal, brains=reach[0], service_key=reach[1])
    return table


# --- the file ----------------------------------------------------------------------------------


def _signature(st: os.stat_result) -> tuple[int, ...]:
    # mtime, size and inode are the brief's; ctime and mode are free in the same
    # stat and catch a chmod (which a reload must refuse) and a same-size rewrite
    # inside one mtime tick.
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_mode)


class Watch:
    """When a placed file is worth re-reading: at most one ``stat`` per ``interval`` of a monotonic ``now``,
    and only when its stat signature moved. A cheap check on the request path, never a watcher.

    Shared by the keys file and the token files (brainy.auth.tokens).
    """

    def __init__(
        self, path: Path, interval: float, seen: tuple[int, ...] | None, checked_at: float | None = None
    ) -> None:
        self.path = path
        self.interval = interval
        self.seen = seen  # the file state last read (or last refused), by its stat signature
        self.checked_at = checked_at

    def moved(self, now: float | None = None) -> bool:
        """True when the interval has passed and the file is not as last seen; the new state is then
        remembered even if the caller's read of it fails, so a refused state is logged once, not every check."""
        now = time.monotonic() if now is None else now
        checked = self.checked_at
        # now < checked: a caller mixing clocks; check rather than go deaf until it catches up.
        if checked is not None and 0 <= now - checked < self.interval:
            return False
        self.checked_at = now
        try:
            current: tuple[int, ...] | None = _signature(os.stat(self.path))
        except OSError:
            current = None
        if current == self.seen:
            return False
        self.seen = current
        return True


def read_placed(
    path: Path,
    refuse: Callable[[str], Exception],
    mask: int = 0o077,
) -> tuple[bytes, tuple[int, ...]]:
    """A file the host placed, read whole, and its stat signature; its mode is checked before a byte is read.

    ``mask`` is the mode bits that refuse the file (0o077: the group or the world
    may read or write it; 0o022: they may write it). FileNotFoundError passes
    through; every other failure raises ``refuse(reason)``. Shared by the keys
    file, the issuers file and the revoked list (brainy.auth.tokens).
    """
    try:
        # O_NONBLOCK: a FIFO placed at the path must not hang the open; it is refused below.
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise refuse(f"cannot open: {exc.strerror}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise refuse("not a regular file")
        # Seed 000, "Sovereignty": keys are files at mode 0600. Checked on the
        # descriptor that is then read, so a file swapped between check and read cannot slip by.
        if st.st_mode & mask:
            reads = mask & 0o044
            raise refuse(
                f"mode {stat.S_IMODE(st.st_mode):04o} lets the group or the world "
                f"{'read or write' if reads else 'write'} it; run: "
                f"{'chmod 600' if reads else 'chmod go-w'} {path}"
            )
        chunks = []
        while chunk := os.read(fd, 1 << 16):
            chunks.append(chunk)
        data = b"".join(chunks)
    except OSError as exc:
        raise refuse(f"cannot read: {exc.strerror}") from None
    finally:
        os.close(fd)
    return data, _signature(st)


def _load(path: Path) -> tuple[dict[str, Principal], tuple[int, ...]]:
    """Read (mode checked first) and parse the keys file.

    FileNotFoundError passes through (first start mints on it); every other
    failure is a :class:`KeysFileError`.
    """
    data, signature = read_placed(path, lambda reason: KeysFileError(path, reason))
    return parse_keys(data, path), signature


def _mint(path: Path) -> str | None:
    """Write a first keys file holding one new key; the key, or None if another process placed a file first.

    The file is written whole under a temporary name and linked into place, so
    nobody ever reads a half-written keys file, and an existing one is never
    replaced. It is created at 0600 by ``os.open`` (never chmod-ed after), so
    there is no moment at which the key is readable by anyone else.
    """
    key = "bky_" + secrets.token_urlsafe(24)  # 24 random bytes: 32 url-safe characters
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    temp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    body = (HEADER + f"{key}  {MINTED_PRINCIPAL}  {EVERY_BRAIN}\n").encode("utf-8")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o600)
    try:
        try:
            _write_all(fd, body)
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.link(temp, path)  # fails if a file is already there: never clobber a placed keys file
        except FileExistsError:
            return None
        except OSError:
            # A filesystem without hard links: rename is still atomic, only not no-clobber,
            # and the window is one first start racing another.
            if path.exists():
                return None
            os.rename(temp, path)
    finally:
        try:
            os.unlink(temp)
        except FileNotFoundError:
            pass
    _fsync_dir(path.parent)
    return key


def _write_all(fd: int, data: bytes) -> None:
    # brainy.store.files.write_all's twin: reading or writing the keys file never imports the engine
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def fingerprint(key: str) -> str:
    """A static key's id: the SHA-256 of its bytes, hex (``printf %s "$KEY" | sha256sum``). Not a credential."""
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def _append(path: Path, line: bytes) -> None:
    """Add ``line`` at the end of the keys file, on a line of its own, and make it durable; nothing else moves."""
    fd = os.open(path, os.O_RDWR | os.O_APPEND | getattr(os, "O_CLOEXEC", 0))
    try:
        st = os.fstat(fd)
        if st.st_size and os.pread(fd, 1, st.st_size - 1) != b"\n":
            line = b"\n" + line  # the placed file's last line had no newline: never join the new key onto it
        _write_all(fd, line)
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some filesystems refuse a directory fsync; the link itself has landed
    finally:
        os.close(fd)


# --- the table ---------------------------------------------------------------------------------


def _unauthenticated() -> R.Refusal:
    return R.UnauthenticatedError(UNAUTHENTICATED_MESSAGE)


def _read_bearer(authorization: str | bytes | None) -> str:
    """The credential of ``Authorization: Bearer <credential>``, or the one flat refusal."""
    if authorization is None:
        raise _unauthenticated()
    if isinstance(authorization, bytes):
        authorization = authorization.decode("latin-1")
    parts = authorization.split()
    # The scheme is case-insensitive (RFC 9110 11.1); the credential is one token.
    if len(parts) != 2 or parts[0].lower() != "bearer" or not parts[1].isascii() or not parts[1].isprintable():
        raise _unauthenticated()
    return parts[1]


# A keep-alive client sends the same Authorization on every request: its reading is remembered (bounded, as
# any cache of what a caller sends must be; a refusal is never kept). Only the split is remembered: the
# table, the revoked list and a token's verification are asked on every request.
_bearer = functools.lru_cache(maxsize=256)(_read_bearer)


def _b64url(segment: str) -> bytes:
    if not segment or not re.fullmatch(r"[A-Za-z0-9_-]+", segment):
        raise ValueError("not base64url")
    return base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4))


def _token_issuer(token: str) -> str:
    """The ``iss`` of a ``bk1.`` token, or BRAINY_KEY_MALFORMED if it does not parse that far."""
    parts = token.split(".")
    try:
        if len(parts) != 3 or parts[0] != "bk1":
            raise ValueError("a bk1 token is bk1.<payload>.<signature>")
        payload = json_loads(_b64url(parts[1]))
        _b64url(parts[2])
        if not isinstance(payload, dict):
            raise ValueError("the payload is not an object")
        iss = payload.get("iss")
        if not isinstance(iss, str) or not iss:
            raise ValueError("the payload names no issuer")
    except (ValueError, binascii.Error) as exc:  # json.JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise R.BRAINY_KEY_MALFORMED(f"the bk1 token does not parse: {exc}") from None
    return iss


class KeyTable:
    """The keys file, parsed, and kept current by a cheap check on the request path.

    Build one with :meth:`open`. :meth:`authenticate` turns an Authorization
    header into a :class:`Principal` or a named refusal.
    """

    def __init__(
        self,
        path: Path,
        table: dict[str, Principal],
        signature: tuple[int, ...] | None,
        minted: str | None = None,
        token_verifier: TokenVerifier | None = None,
        revoked: Any = None,
    ) -> None:
        self.path = path
        self.minted = minted
        """The key minted at first start, for the caller to print once; None when the file was placed."""
        self.token_verifier = token_verifier
        self.revoked = revoked
        """The revoked list (``brainy.auth.tokens.Placed``: ``value`` jti -> exp, ``refresh``, and the ``watch`` and
        ``generation`` a remembered key is checked against), or None. A static key is listed there under its
        SHA-256 (seed 001, "Revocation")."""
        self._table = table
        self._watch = Watch(path, CHECK_INTERVAL, signature)
        self.generation = 0
        """Moves whenever the table is taken afresh (a reload, a mint's reload, a revocation's): with the revoked
        list's own generation, what a remembered principal (:meth:`authenticate`) was proven under."""
        # Authorization value -> (principal, generation, revoked list's generation): a keep-alive caller sends the
        # same header on every request, and its static key is resolved once per table, not once per request.
        # Only successes are kept, and only for a key the revoked list does not name at all.
        self._known: dict[str | bytes, tuple[Principal, int, int]] = {}

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str] | None = None,
        *,
        mint_if_missing: bool = False,
        token_verifier: TokenVerifier | None = None,
        revoked: Any = None,
    ) -> KeyTable:
        """Load the keys file at ``path`` (default :func:`default_keys_path`) or refuse to start.

        With ``mint_if_missing``, a missing file is a first start: one key for
        ``person:local`` reaching every brain is minted, written at 0600, and
        left in :attr:`minted` for the caller to print once.
        """
        where = Path(path) if path is not None else default_keys_path()
        minted = None
        try:
            table, signature = _load(where)
        except FileNotFoundError:
            if not mint_if_missing:
                raise KeysFileError(where, "no keys file here; place one at mode 0600") from None
            try:
                minted = _mint(where)
            except OSError as exc:
                raise KeysFileError(where, f"cannot write the first keys file: {exc.strerror}") from None
            try:
                table, signature = _load(where)
            except FileNotFoundError:
                raise KeysFileError(where, "the keys file vanished as it was written") from None
            if minted is not None:
                log.info("keys file %s: first start, minted one key for %s", where, MINTED_PRINCIPAL)
        return cls(where, table, signature, minted=minted, token_verifier=token_verifier, revoked=revoked)

    def __len__(self) -> int:
        return len(self._table)

    def key_for(self, brain: str) -> str | None:
        """A principal key (not the service key) that reaches ``brain``: what the starter prints for a client."""
        for key, principal in self._table.items():
            if not principal.service_key and (principal.brains is None or brain in principal.brains):
                return key
        return None

    def service_key(self) -> str | None:
        """The keys file's service-key line (``!``): the credential this server presents when it calls out
        (the reading-door receiver); None when there is none."""
        for key, principal in self._table.items():
            if principal.service_key:
                return key
        return None

    def refresh(self, now: float | None = None) -> bool:
        """Re-read the file if it moved; True when a new table was taken.

        At most one ``stat`` per :data:`CHECK_INTERVAL` of ``now`` (monotonic
        seconds). A file that moved but fails to load (gone, too open, a bad
        line) is logged once and the last good table stays: an edit in progress
        must not lock every caller out, and must not be half-applied.
        """
        if not self._watch.moved(now):
            return False
        return self.reload()

    def reload(self) -> bool:
        """Re-read the file now, whatever the interval: a door that wrote it answers only once the table holds
        what it wrote (seed 001: a minted key is honoured on the very next request)."""
        try:
            table, signature = _load(self.path)
        except FileNotFoundError:
            log.error("keys file %s is gone; keeping the last good table (%d keys)", self.path, len(self._table))
            return False
        except KeysFileError as exc:
            log.error("keys file reload refused, keeping the last good table (%d keys): %s", len(self._table), exc)
            return False
        self._table = table
        self._watch.seen = signature
        self.generation += 1
        log.info("keys file %s reloaded: %d keys", self.path, len(table))
        return True

    def authenticate(
        self, authorization: str | bytes | None, now: float | None = None, token_verifier: TokenVerifier | None = None
    ) -> Principal:
        """The Principal an ``Authorization`` header value proves, or a named refusal.

        A static key that is missing, unknown, removed, or sent under another
        scheme answers :class:`UnauthenticatedError` with one message. A
        ``bk1.`` bearer goes to ``token_verifier`` (this call's, else the
        table's); with none, no issuer is trusted (seed 000, "The issuers
        file": a missing issuers file trusts nobody), so it answers
        BRAINY_KEY_UNKNOWN_ISSUER, or BRAINY_KEY_MALFORMED if it does not parse.
        """
        known = self._known.get(authorization)  # type: ignore[arg-type]
        if known is not None:  # a static key proven before: still so if neither file moved since
            now = time.monotonic() if now is None else now
            # each file's reload check (Watch.moved's first test inline: a comparison, not two calls)
            checked = self._watch.checked_at
            if checked is None or not 0 <= now - checked < CHECK_INTERVAL:
                self.refresh(now)
            revoked = self.revoked
            if revoked is None:
                if known[1] == self.generation:
                    return known[0]
            else:
                watch = revoked.watch
                checked = watch.checked_at
                if checked is None or not 0 <= now - checked < watch.interval:
                    revoked.refresh(now)
                if known[1] == self.generation and known[2] == revoked.generation:
                    return known[0]
        credential = _bearer(authorization)
        if credential.startswith(TOKEN_PREFIX):
            verifier = token_verifier or self.token_verifier
            if verifier is not None:
                return verifier(credential)
            iss = _token_issuer(credential)
            raise R.BRAINY_KEY_UNKNOWN_ISSUER(
                f"the token's issuer {iss!r} is not trusted: no issuers file is configured, so no issuer is", iss=iss
            )
        now = time.monotonic() if now is None else now  # one clock read for both files' reload checks
        self.refresh(now)
        revoked = self.revoked
        if revoked is not None:
            revoked.refresh(now)
        # the generations before the reads: a reload between them leaves the remembered answer already stale
        generation, revoked_generation = self.generation, 0 if revoked is None else revoked.generation
        principal = self._table.get(credential)
        if principal is None or self.is_revoked(credential, now):
            raise _unauthenticated()  # a revoked static key fails flat, as a removed one does
        # remembered only while the revoked list names it not at all (an entry past its exp would count again
        # were the wall clock set back): what a hit answers is then exactly what this path would
        if revoked is None or fingerprint(credential) not in revoked.value:
            if len(self._known) >= KNOWN_HELD:
                self._known.clear()
            self._known[authorization] = (principal, generation, revoked_generation)  # type: ignore[index]
        return principal

    def is_revoked(self, credential: str, now: float | None = None) -> bool:
        """Whether the revoked list names this static key's SHA-256 inside that entry's exp."""
        if self.revoked is None:
            return False
        self.revoked.refresh(now)
        if not self.revoked.value:
            return False
        until = self.revoked.value.get(fingerprint(credential))
        return until is not None and time.time() < until

    def entries(self) -> list[tuple[str, Principal]]:
        """Every line's (fingerprint, principal), in file order: what a listing may show (never a key)."""
        return [(fingerprint(key), principal) for key, principal in self._table.items()]

    def mint(self, principal: str, brains: list[str] | str) -> str:
        """Append one new key line for ``principal`` reaching ``brains`` (names, or ``*``); answer the key.

        The line is parsed before it is written, and must parse to exactly what was asked (a principal
        holding a space would otherwise parse as a principal and a brain): a line the loader would refuse
        or misread is ``KeyLineRefusedError`` and nothing is written. The file is only appended to, never
        rewritten (seed 001, "Provisioning"), and re-read before the answer, so the key is honoured on
        the very next request.
        """
        reach = [EVERY_BRAIN] if brains == EVERY_BRAIN else list(brains)
        key = MINT_PREFIX + secrets.token_urlsafe(MINT_RANDOM_BYTES)
        line = f"{key}  {principal}  {' '.join(reach)}\n"
        try:
            placed, _ = read_placed(self.path, lambda reason: KeysFileError(self.path, reason))
            # the file as it will read after the append, parsed whole: the loader's verdict, before a byte moves
            parsed = parse_keys(
                placed + (b"" if placed.endswith(b"\n") or not placed else b"\n") + line.encode("utf-8"), self.path
            )
        except KeysFileError as exc:
            raise R.KeyLineRefusedError(f"the key line would be refused: {exc.reason}", reason=exc.reason) from None
        except FileNotFoundError:
            raise R.KeyLineRefusedError("the keys file is gone; place one first", reason="no keys file") from None
        got = parsed.get(key)
        wanted = None if brains == EVERY_BRAIN else frozenset(reach)
        if got is None or got.id != principal or got.brains != wanted or got.service_key:
            raise R.KeyLineRefusedError(
                "the key line would not read back as the principal and brains asked for",
                reason="does not read back as asked",
            )
        _append(self.path, line.encode("utf-8"))
        self.reload()
        return key


# --- the caller on the call --------------------------------------------------------------------


def _malformed(why: str) -> R.Refusal:
    return R.CallerAssertionRefusedError(f"the caller assertion is unreadable: {why}", reason="malformed")


def apply_caller_assertion(principal: Principal, headers: Mapping[str, str]) -> Principal:
    """The request's credential once ``X-Brainy-Caller``/``-Owner``/``-Roles`` are read (DOORS.md 0.4).

    ``headers`` has lowercase names. None of the three: ``principal`` unchanged.
    Any of them on anything but a static ``service:`` key (person, business, a
    minted token): CallerAssertionRefusedError ``not-a-service`` — never
    ignored, since an ignored assertion is a row attributed to the wrong actor.
    A service's assertion that cannot be read: the same class, ``malformed`` —
    refused, never guessed at. Otherwise the service's credential carrying the
    asserted caller, owner and roles, with ``via`` naming the service.
    """
    caller = headers.get(CALLER_HEADER)
    owner = headers.get(OWNER_HEADER)
    roles = headers.get(ROLES_HEADER)
    if caller is None and owner is None and roles is None:
        return principal
    # KIND, not reach, and a static key, never a token: a token is signed FOR one
    # subject and already is the caller (seed 001, "The caller on the call").
    is_token = principal.kind == "token" or principal.token_brain is not None or principal.scope is not None
    if principal.kind != "service" or is_token:
        raise R.CallerAssertionRefusedError(
            f"only a service key may assert a caller; this credential is {principal.kind}", reason="not-a-service"
        )
    if caller is None:
        raise _malformed("X-Brainy-Owner or X-Brainy-Roles without X-Brainy-Caller")
    caller = caller.strip()
    kind, colon, name = caller.partition(":")
    if not caller or len(caller) > MAX_PRINCIPAL_LENGTH or not caller.isprintable():
        raise _malformed(
            f"X-Brainy-Caller is empty, over {MAX_PRINCIPAL_LENGTH} characters, or holds a control character"
        )
    if not colon or not name.strip() or not _CALLER_KIND.fullmatch(kind):
        raise _malformed("X-Brainy-Caller is not <kind>:<name>")
    # A transport joins a repeated header with ", "; two callers on one call is not one caller.
    if "," in caller:
        raise _malformed("X-Brainy-Caller names more than one caller")
    is_owner = False
    if owner is not None:
        owner = owner.strip()
        if owner not in ("true", "false"):
            raise _malformed("X-Brainy-Owner is neither true nor false")
        is_owner = owner == "true"
    named: tuple[str, ...] = ()
    if roles is not None:
        items = [item.strip() for item in roles.split(",")]
        if not all(_ROLE.fullmatch(item) for item in items):
            raise _malformed("X-Brainy-Roles is not a comma-separated list of roles [a-z0-9._-]+")
        named = tuple(dict.fromkeys(items))
    return dataclasses.replace(principal, caller=caller, via=principal.id, owner=is_owner, roles=named)


__all__ = [
    "CHECK_INTERVAL",
    "HEADER",
    "KeyTable",
    "KeysFileError",
    "TokenVerifier",
    "UNAUTHENTICATED_MESSAGE",
    "Watch",
    "apply_caller_assertion",
    "default_keys_path",
    "fingerprint",
    "parse_keys",
    "read_placed",
]
