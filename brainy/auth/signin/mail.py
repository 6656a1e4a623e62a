"""The mail sender ``--sign-in-mail`` names: how a one-time code reaches a person (seed 001, "Sign-in").

``POST <URL>`` with ``{"email", "code", "expiresInMinutes"}`` and this host's service key as the bearer,
the same pattern as the reading-door callback. A non-2xx answer, a timeout or an unreachable sender is
a :class:`MailFailed` the sign-in page shows, loudly; there is never a silent retry.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import ssl
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

#: Seconds the sender has for the whole exchange.
MAIL_TIMEOUT = 5.0


class MailFailed(Exception):
    """The code did not reach the mail sender; the message says how, and never holds the code."""


@dataclass(frozen=True)
class Mailer:
    url: str
    service_key: Callable[[], str | None]  # asked at each send: the keys file reloads
    timeout: float = MAIL_TIMEOUT

    async def send(self, email: str, code: str, minutes: int) -> None:
        key = self.service_key()
        if key is None:
            raise MailFailed("this server's keys file has no service-key line to authenticate to the mail sender")
        body = json.dumps({"email": email, "code": code, "expiresInMinutes": minutes}).encode()
        loop = asyncio.get_running_loop()
        try:
            status = await asyncio.wait_for(loop.run_in_executor(None, self._post, key, body), self.timeout)
        except TimeoutError:
            raise MailFailed(f"the mail sender did not answer within {self.timeout:g} s") from None
        except (OSError, http.client.HTTPException) as exc:
            raise MailFailed(f"the mail sender is unreachable ({type(exc).__name__})") from None
        if not 200 <= status < 300:
            raise MailFailed(f"the mail sender answered {status}")

    def _post(self, key: str, body: bytes) -> int:
        parts = urlsplit(self.url)
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        connection: http.client.HTTPConnection
        if parts.scheme == "https":
            connection = http.client.HTTPSConnection(
                parts.hostname or "", parts.port, timeout=self.timeout, context=ssl.create_default_context()
            )
        else:
            connection = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=self.timeout)
        try:
            connection.request(
                "POST", path, body, {"Content-Type": "application/json", "Authorization": f"Bearer {key}"}
            )
            response = connection.getresponse()
            response.read(64 * 1024)
            return response.status
        finally:
            connection.close()
