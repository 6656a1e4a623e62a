"""The language seam: which provider writes the text a door needs generated (``memory.abstract`` without
``text``), resolved once, from the environment, at start (seed 000, "Sovereignty"; docs/language-providers.md
is the full matrix).

Precedence, first match wins:

1. ``BRAINY_LANGUAGE_PROVIDER`` — ``anthropic``, ``openai``, ``ollama`` or ``none``, chosen outright.
2. Exactly one recognised vendor key — ``ANTHROPIC_API_KEY`` or ``OPENAI_API_KEY``. Both, with no explicit
   choice, is a misconfiguration.
3. A local model server on its well-known port — Ollama on 127.0.0.1:11434, found by one connect.
4. None: a door that needs generated text refuses ``LanguageProviderUnavailableError``.

``BRAINY_LANGUAGE_URL`` moves the provider's endpoint (a proxy, a self-hosted gateway, a test's stub) and
``BRAINY_LANGUAGE_MODEL`` names its model. ``BRAINY_OUTBOUND_ALLOW``, when set, is the outbound gate: a comma
list of the hosts this process may call; a provider endpoint outside it is a misconfiguration. A
misconfiguration raises :class:`LanguageConfigError` from :func:`configure`, which ``brainy serve`` calls before
it binds anything, so a server that would fail its first summary never starts. Nothing is contacted at start
beyond the local port probe of step 3; a provider is called only when a door asks it for text.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from brainy.contract import refusals as R
from brainy.contract.limits import json_loads

CHOOSE = "BRAINY_LANGUAGE_PROVIDER"
URL = "BRAINY_LANGUAGE_URL"
MODEL = "BRAINY_LANGUAGE_MODEL"
OUTBOUND = "BRAINY_OUTBOUND_ALLOW"
VENDOR_KEYS = {"anthropic": "ANTHROPIC_API_KEY", "openai": "OPENAI_API_KEY"}
LOCAL = ("ollama", "127.0.0.1", 11434)
PROBE_SECONDS = 0.2
CALL_SECONDS = 30.0

ENDPOINTS = {
    "anthropic": "https://api.anthropic.com",
    "openai": "https://api.openai.com",
    "ollama": f"http://{LOCAL[1]}:{LOCAL[2]}",
}
MODELS = {"anthropic": "claude-3-5-haiku-latest", "openai": "gpt-4o-mini", "ollama": "llama3.2"}
LOOKED_FOR = (
    f"{CHOOSE}, one of {', '.join(v for v in VENDOR_KEYS.values())}, or a model server on {LOCAL[1]}:{LOCAL[2]}"
)


class LanguageConfigError(ValueError):
    """The environment names a provider this process cannot use: the server refuses to start."""


@dataclass(frozen=True)
class Provider:
    """One configured provider: its name, endpoint, model and key (None for a local server)."""

    name: str
    url: str
    model: str
    key: str | None
    chosen_by: str

    def describe(self) -> dict[str, Any]:
        return {"provider": self.name, "url": self.url, "model": self.model, "chosenBy": self.chosen_by}

    def summarise(self, lines: Sequence[str], title: str | None = None) -> str:
        """A short summary of ``lines``, written by the provider. A provider that fails or answers nothing
        usable refuses ``LanguageProviderUnavailableError`` naming it: no summary is ever made up."""
        prompt = (
            "Summarise the following memories in a few plain sentences, keeping names, numbers and dates."
            + (f" The summary is titled: {title}." if title else "")
            + "\n\n"
            + "\n".join(lines)
        )
        try:
            text = _CALLS[self.name](self, prompt)
        except (OSError, ValueError, KeyError, IndexError, TypeError) as exc:
            raise R.LanguageProviderUnavailableError(
                f"the language provider {self.name} at {self.url} did not answer: {exc}"
            ) from None
        if not isinstance(text, str) or not text.strip():
            raise R.LanguageProviderUnavailableError(f"the language provider {self.name} answered no text")
        return text.strip()


def _post(url: str, body: dict[str, Any], headers: dict[str, str]) -> Any:
    request = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json", **headers})
    with urllib.request.urlopen(request, timeout=CALL_SECONDS) as answer:  # noqa: S310 (the host's own endpoint)
        return json_loads(answer.read())


def _anthropic(p: Provider, prompt: str) -> str:
    answer = _post(
        p.url.rstrip("/") + "/v1/messages",
        {"model": p.model, "max_tokens": 512, "messages": [{"role": "user", "content": prompt}]},
        {"x-api-key": p.key or "", "anthropic-version": "2023-06-01"},
    )
    return "".join(part.get("text", "") for part in answer["content"])


def _openai(p: Provider, prompt: str) -> str:
    answer = _post(
        p.url.rstrip("/") + "/v1/chat/completions",
        {"model": p.model, "messages": [{"role": "user", "content": prompt}]},
        {"Authorization": f"Bearer {p.key or ''}"},
    )
    return answer["choices"][0]["message"]["content"]


def _ollama(p: Provider, prompt: str) -> str:
    return _post(p.url.rstrip("/") + "/api/generate", {"model": p.model, "prompt": prompt, "stream": False}, {})[
        "response"
    ]


_CALLS = {"anthropic": _anthropic, "openai": _openai, "ollama": _ollama}


def _listening(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=PROBE_SECONDS):
            return True
    except OSError:
        return False


def _built(name: str, env: Mapping[str, str], chosen_by: str) -> Provider:
    url = env.get(URL) or ENDPOINTS[name]
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise LanguageConfigError(f"{URL}={url!r} is not an http(s) URL")
    allowed = env.get(OUTBOUND)
    if allowed is not None and parts.hostname not in {h.strip() for h in allowed.split(",") if h.strip()}:
        raise LanguageConfigError(
            f"the {name} provider's endpoint {parts.hostname} is outside the outbound gate ({OUTBOUND}={allowed!r})"
        )
    key = None
    if name in VENDOR_KEYS:
        key = env.get(VENDOR_KEYS[name])
        if not key:
            raise LanguageConfigError(f"{CHOOSE}={name} needs {VENDOR_KEYS[name]}, which is not set")
    return Provider(name, url, env.get(MODEL) or MODELS[name], key, chosen_by)


def resolve(env: Mapping[str, str]) -> Provider | None:
    """The provider ``env`` configures, in the seed's precedence; None when there is none.
    Raises :class:`LanguageConfigError` for a misconfiguration."""
    chosen = env.get(CHOOSE)
    if chosen is not None:
        chosen = chosen.strip().lower()
        if chosen == "none":
            return None
        if chosen not in _CALLS:
            raise LanguageConfigError(f"{CHOOSE}={env[CHOOSE]!r}: expected one of {', '.join(_CALLS)} or none")
        return _built(chosen, env, CHOOSE)
    keyed = [name for name, variable in VENDOR_KEYS.items() if env.get(variable)]
    if len(keyed) > 1:
        raise LanguageConfigError(
            f"{' and '.join(VENDOR_KEYS[n] for n in keyed)} are both set: choose one with {CHOOSE}"
        )
    if keyed:
        return _built(keyed[0], env, VENDOR_KEYS[keyed[0]])
    name, host, port = LOCAL
    if _listening(host, port):  # found at its well-known address, so called there (not at BRAINY_LANGUAGE_URL)
        return _built(name, {k: v for k, v in env.items() if k != URL}, f"a model server on {host}:{port}")
    return None


_configured: list[Provider | None] = []
_lock = threading.Lock()


def configure(env: Mapping[str, str] | None = None) -> Provider | None:
    """Resolve the provider once for this process (a server calls this at start, before it binds)."""
    provider = resolve(os.environ if env is None else env)
    with _lock:
        _configured[:] = [provider]
    return provider


def provider() -> Provider:
    """The provider resolved at start (resolved now, once, for an in-process caller that never configured),
    or ``LanguageProviderUnavailableError`` naming what was looked for."""
    with _lock:
        if not _configured:
            try:
                _configured.append(resolve(os.environ))
            except LanguageConfigError as exc:  # a server never gets here: it refused to start
                raise R.LanguageProviderUnavailableError(f"the language provider is misconfigured: {exc}") from None
        found = _configured[0]
    if found is None:
        raise R.LanguageProviderUnavailableError(f"no language provider is configured: looked for {LOOKED_FOR}")
    return found
