"""The sign-in pages: plain HTML forms that work without scripts, every value escaped.

Each form carries what it needs in a hidden input (the sign-in's ``request`` id) and posts to a fixed
action, so a browser with scripts off signs in the same way. The style sheet is inline and allowed by
its hash in the page's Content-Security-Policy (``STYLE_HASH``), so the policy can stay ``default-src
'none'``.
"""

from __future__ import annotations

import base64
import hashlib
from html import escape

EMAIL_ACTION = "/auth/sign-in/email"
CODE_ACTION = "/auth/sign-in/code"

STYLE = (
    "body{font-family:system-ui,sans-serif;max-width:26rem;margin:4rem auto;padding:0 1rem}"
    "input,button{font-size:1rem;padding:.4rem;margin:.3rem 0;width:100%;box-sizing:border-box}"
    ".refused{color:#a00;border:2px solid #a00;padding:.6rem;font-weight:bold}"
)
STYLE_HASH = "sha256-" + base64.b64encode(hashlib.sha256(STYLE.encode()).digest()).decode()


def _page(title: str, body: str) -> str:
    return (
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        '<meta name=viewport content="width=device-width,initial-scale=1">'
        f"<title>{escape(title)}</title><style>{STYLE}</style></head>"
        f"<body><h1>{escape(title)}</h1>{body}</body></html>"
    )


def _refusal(error: str | None, message: str | None) -> str:
    if message is None:
        return ""
    return f'<p class=refused role=alert id=refusal data-error="{escape(error or "")}">{escape(message)}</p>'


def email_page(door: str, request_id: str, error: str | None = None, message: str | None = None) -> str:
    return _page(
        f"Sign in to {door}",
        _refusal(error, message) + f'<form method=post action="{EMAIL_ACTION}">'
        f'<input type=hidden name=request value="{escape(request_id)}">'
        "<label for=email>Your email</label>"
        "<input id=email name=email type=email autocomplete=email required autofocus>"
        "<button type=submit>Email me a code</button></form>",
    )


def code_page(door: str, request_id: str, email: str, error: str | None = None, message: str | None = None) -> str:
    return _page(
        f"Sign in to {door}",
        _refusal(error, message) + f"<p>We sent a code to <b>{escape(email)}</b>. It works once, for a few minutes.</p>"
        f'<form method=post action="{CODE_ACTION}">'
        f'<input type=hidden name=request value="{escape(request_id)}">'
        "<label for=code>The code</label>"
        "<input id=code name=code inputmode=numeric autocomplete=one-time-code required autofocus>"
        "<button type=submit>Sign in</button></form>"
        f'<form method=post action="{EMAIL_ACTION}">'
        f'<input type=hidden name=request value="{escape(request_id)}">'
        f'<input type=hidden name=email value="{escape(email)}">'
        "<button type=submit>Send another code</button></form>",
    )


def refused_page(door: str, error: str, message: str) -> str:
    """A sign-in that cannot go on (an unknown client, an unregistered account, an expired request)."""
    return _page(f"Sign in to {door}", _refusal(error, message) + "<p>Start again from the app you came from.</p>")
