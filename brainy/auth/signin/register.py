"""The accounts register (seed 001, "Which store a signed-in account opens"): which store each account opens.

One line per account, ``#`` comments, the host's own file beside the keys file::

    # <account id>                 <store>
    person:alice@example.com       alice

A missing file is not a refusal to start: it recognises no account yet. A line that does not parse is
skipped with a warning naming its number (the host sees it in the log; the account it meant stays
unrecognised, which refuses that sign-in rather than guessing). The file is re-read when its stat moves.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from brainy.auth.keys import BRAIN_NAME

log = logging.getLogger("brainy.sign_in")

REGISTER_NAME = "sign-in-accounts"


class Register:
    """The register at ``path``: ``store_for(account)`` answers the store its line names, or None."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._stat: tuple[int, int, int] | None = None
        self._table: dict[str, str] = {}

    def _load(self) -> None:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            self._stat, self._table = None, {}
            return
        signature = (st.st_mtime_ns, st.st_size, st.st_ino)
        if signature == self._stat:
            return
        table: dict[str, str] = {}
        for number, line in enumerate(self.path.read_text("utf-8", "replace").splitlines(), start=1):
            fields = line.split("#", 1)[0].split()
            if not fields:
                continue
            if len(fields) != 2 or not BRAIN_NAME.fullmatch(fields[1]):
                log.warning("sign-in accounts %s:%d: expected <account id> <store>; line skipped", self.path, number)
                continue
            table[fields[0]] = fields[1]
        self._stat, self._table = signature, table

    def store_for(self, account: str) -> str | None:
        self._load()
        return self._table.get(account)
