"""The rig for the sign-in tests: a real ``brainy serve --sign-in`` on loopback, a mail receiver that keeps
every code it is sent, and a browser-less person who signs in by submitting the pages' forms over HTTP.

Nothing is mocked: the server is its own process, the receiver a real HTTP server on a thread, the
person an HTTP client with a cookie jar that reads each page's forms (action, hidden inputs) as a
browser without scripts would.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from html.parser import HTMLParser
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urljoin, urlsplit

import httpx2
from server import HOST, _answers, _stop, free_port, write_keys

from brainy.engine import init_store

ALICE = "alice@example.com"
ALICE_BRAIN = "alice"
START_SECONDS = 30.0


class MailReceiver:
    """``--sign-in-mail`` on loopback: keeps each POST (headers, JSON) and answers as ``mode`` says."""

    def __init__(self) -> None:
        self.mode = "ok"
        self.seen: list[tuple[dict[str, str], dict[str, Any]]] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (the stdlib's name)
                length = int(self.headers.get("Content-Length", "0"))
                receiver.seen.append(
                    ({k.lower(): v for k, v in self.headers.items()}, json.loads(self.rfile.read(length)))
                )
                status = 500 if receiver.mode == "500" else 202
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer((HOST, 0), Handler)
        self.url = f"http://{HOST}:{self.server.server_address[1]}/send"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def code_for(self, email: str) -> str:
        """The last code mailed to ``email``."""
        for _headers, body in reversed(self.seen):
            if body["email"] == email:
                return str(body["code"])
        raise AssertionError(f"no code was mailed to {email}")

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@dataclass
class SignInServer:
    url: str
    directory: Path
    keys: Path
    brains: Path
    register: Path
    revoked: Path
    mail: MailReceiver
    proc: subprocess.Popen[bytes]
    log_path: Path = field(default_factory=Path)


def sign_in_command(directory: Path, port: int, mail_url: str, *extra: str, public_host: str = HOST) -> list[str]:
    return [
        sys.executable,
        "-m",
        "brainy.cli",
        "serve",
        "--listen",
        f"{HOST}:{port}",
        "--brains-dir",
        str(directory / "brains"),
        "--keys",
        str(directory / "keys"),
        "--sign-in",
        "--public-url",
        f"http://{public_host}:{port}",
        "--sign-in-mail",
        mail_url,
        *extra,
    ]


def prepare(directory: Path, register: str | None) -> None:
    """A brains directory holding ``alice``, a keys file (a person key and the ``!`` service key), and the
    register beside the keys file (``None``: no register at all)."""
    (directory / "brains").mkdir(parents=True, exist_ok=True)
    init_store(directory / "brains" / ALICE_BRAIN)
    write_keys(directory / "keys", ALICE_BRAIN)
    if register is not None:
        (directory / "sign-in-accounts").write_text(register)


@contextlib.contextmanager
def start_sign_in(
    directory: Path, register: str | None = f"person:{ALICE}  {ALICE_BRAIN}\n", public_host: str = HOST
) -> Iterator[SignInServer]:
    """``public_host`` names the public URL's host: ``localhost`` for a browser's passkey (WebAuthn refuses an
    IP address as the relying party), which the browser is told resolves to the loopback address served."""
    prepare(directory, register)
    mail = MailReceiver()
    log_path = directory / "serve.log"
    port = free_port()
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(
            sign_in_command(directory, port, mail.url, public_host=public_host),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=dict(os.environ, PYTHONUNBUFFERED="1"),
            cwd=directory,
        )
    deadline = time.monotonic() + START_SECONDS
    while time.monotonic() < deadline and proc.poll() is None and not _answers(HOST, port):
        time.sleep(0.05)
    if proc.poll() is not None or not _answers(HOST, port):
        _stop(proc)
        mail.close()
        raise RuntimeError("brainy serve --sign-in did not start; its log ends:\n" + log_path.read_text()[-4000:])
    server = SignInServer(
        f"http://{public_host}:{port}",
        directory,
        directory / "keys",
        directory / "brains",
        directory / "sign-in-accounts",
        directory / "revoked.json",
        mail,
        proc,
        log_path,
    )
    try:
        yield server
    finally:
        code = _stop(proc)
        mail.close()
        assert code is not None, "brainy serve --sign-in did not stop on SIGTERM"


class _Forms(HTMLParser):
    """Every form of a page: its action and its inputs' names and values (hidden ones carry the state)."""

    def __init__(self) -> None:
        super().__init__()
        self.forms: list[dict[str, Any]] = []
        self.refusal: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "form":
            self.forms.append({"action": a.get("action"), "method": a.get("method"), "inputs": {}})
        elif tag == "input" and self.forms and a.get("name"):
            self.forms[-1]["inputs"][a["name"]] = a.get("value") or ""
        elif tag == "p" and a.get("id") == "refusal":
            self.refusal = a.get("data-error")


def forms(html: str) -> _Forms:
    parsed = _Forms()
    parsed.feed(html)
    return parsed


def submit(http: httpx2.Client, page: httpx2.Response, field_name: str, value: str) -> httpx2.Response:
    """Fill the page's form that has an input named ``field_name`` and post it, as a browser would."""
    form = next(f for f in forms(page.text).forms if field_name in f["inputs"])
    data = {**form["inputs"], field_name: value}
    return http.post(urljoin(str(page.url), form["action"]), data=data)


def pkce() -> tuple[str, str]:
    import hashlib
    import secrets

    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    return verifier, challenge


REDIRECT = "http://127.0.0.1:9/callback"


def register_client(server: SignInServer, redirect: str = REDIRECT) -> str:
    answer = httpx2.post(f"{server.url}/auth/register", json={"redirect_uris": [redirect], "client_name": "t"})
    assert answer.status_code == 201, answer.text
    return str(answer.json()["client_id"])


def open_sign_in(
    http: httpx2.Client, server: SignInServer, client_id: str, challenge: str, **more: str
) -> httpx2.Response:
    params = {
        "response_type": "code",
        "client_id": client_id,
        "redirect_uri": REDIRECT,
        "state": "st-123",
        "code_challenge": challenge,
        "code_challenge_method": "S256",
        **more,
    }
    page = http.get(f"{server.url}/auth/authorize", params=params)
    assert page.status_code == 200, page.text
    return page


def sign_in(http: httpx2.Client, server: SignInServer, page: httpx2.Response, email: str = ALICE) -> httpx2.Response:
    """Email form, code from the receiver, code form: the answer to the code form."""
    code_page = submit(http, page, "email", email)
    assert code_page.status_code == 200, code_page.text
    return submit(http, code_page, "code", server.mail.code_for(email))


def redirect_params(answer: httpx2.Response) -> dict[str, str]:
    assert answer.status_code in (302, 303), answer.text
    location = answer.headers["location"]
    assert location.startswith(REDIRECT)
    return {k: v[0] for k, v in parse_qs(urlsplit(location).query).items()}


def payload(token: str) -> dict[str, Any]:
    """The claims of a bk1 token (its middle segment)."""
    segment = token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4)))
