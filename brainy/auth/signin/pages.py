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
PASSKEY_ACTION = "/auth/sign-in/passkey"
PASSKEYS_PATH = "/auth/passkeys"
SCRIPT_PATH = "/auth/sign-in.js"

# The one script (served from SCRIPT_PATH, so the policy says script-src 'self' and nothing inline). A passkey
# form stays hidden unless the browser has WebAuthn; on submit the script runs the ceremony with the options
# the server put in the form's data-options, writes the credential into the hidden input and posts the form.
# Without scripts every page still works by email code.
SCRIPT = """"use strict";
for (const form of document.querySelectorAll("form[data-webauthn]")) {
  const PKC = window.PublicKeyCredential;
  if (!PKC || !PKC.parseCreationOptionsFromJSON || !PKC.parseRequestOptionsFromJSON) continue;
  form.hidden = false;
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const options = JSON.parse(form.dataset.options);
    try {
      const credential = form.dataset.webauthn === "create"
        ? await navigator.credentials.create({publicKey: PKC.parseCreationOptionsFromJSON(options)})
        : await navigator.credentials.get({publicKey: PKC.parseRequestOptionsFromJSON(options)});
      form.elements.credential.value = JSON.stringify(credential.toJSON());
      form.submit();
    } catch (error) {
      const shown = document.createElement("p");
      shown.className = "refused";
      shown.id = "refusal";
      shown.dataset.error = "passkey_cancelled";
      shown.textContent = "The passkey was not used: " + error.message;
      form.before(shown);
    }
  });
}
"""

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
        f"<body><h1>{escape(title)}</h1>{body}<script src={SCRIPT_PATH}></script></body></html>"
    )


def _refusal(error: str | None, message: str | None) -> str:
    if message is None:
        return ""
    return f'<p class=refused role=alert id=refusal data-error="{escape(error or "")}">{escape(message)}</p>'


def _passkey_form(action: str, kind: str, options: str, hidden: dict[str, str], label: str) -> str:
    fields = "".join(f'<input type=hidden name={name} value="{escape(value)}">' for name, value in hidden.items())
    return (
        f'<form id=passkey method=post action="{action}" data-webauthn={kind} data-options="{escape(options)}" '
        f'hidden>{fields}<input type=hidden name=credential value=""><button type=submit>{escape(label)}</button>'
        "</form>"
    )


def email_page(
    door: str, request_id: str, error: str | None = None, message: str | None = None, passkey: str | None = None
) -> str:
    """The first page: an email form; with ``passkey`` (request options, JSON) a passkey form the script shows."""
    offer = (
        _passkey_form(PASSKEY_ACTION, "get", passkey, {"request": request_id}, "Sign in with a passkey")
        if passkey
        else ""
    )
    return _page(
        f"Sign in to {door}",
        _refusal(error, message) + offer + f'<form id=by-email method=post action="{EMAIL_ACTION}">'
        f'<input type=hidden name=request value="{escape(request_id)}">'
        "<label for=email>Your email</label>"
        "<input id=email name=email type=email autocomplete=email required autofocus>"
        "<button type=submit>Email me a code</button></form>",
    )


def code_page(door: str, request_id: str, email: str, error: str | None = None, message: str | None = None) -> str:
    return _page(
        f"Sign in to {door}",
        _refusal(error, message) + f"<p>We sent a code to <b>{escape(email)}</b>. It works once, for a few minutes.</p>"
        f'<form id=by-code method=post action="{CODE_ACTION}">'
        f'<input type=hidden name=request value="{escape(request_id)}">'
        "<label for=code>The code</label>"
        "<input id=code name=code inputmode=numeric autocomplete=one-time-code required autofocus>"
        "<button type=submit>Sign in</button></form>"
        f'<form method=post action="{EMAIL_ACTION}">'
        f'<input type=hidden name=request value="{escape(request_id)}">'
        f'<input type=hidden name=email value="{escape(email)}">'
        "<button type=submit>Send another code</button></form>",
    )


def passkeys_page(
    door: str, account: str, options: str | None, error: str | None = None, message: str | None = None
) -> str:
    """Signed in (a session): add a passkey. ``options`` None: the passkey was just added."""
    if options is None:
        body = f"<p id=added>A passkey was added for <b>{escape(account)}</b>. Next time, sign in with it.</p>"
    else:
        body = f"<p>Signed in as <b>{escape(account)}</b>. Add a passkey to sign in without a code next time.</p>"
        body += _passkey_form(PASSKEYS_PATH, "create", options, {}, "Add a passkey")
        body += "<noscript><p>Passkeys need JavaScript; signing in by email code works without it.</p></noscript>"
    return _page(f"Passkeys for {door}", _refusal(error, message) + body)


def refused_page(door: str, error: str, message: str) -> str:
    """A sign-in that cannot go on (an unknown client, an unregistered account, an expired request)."""
    return _page(f"Sign in to {door}", _refusal(error, message) + "<p>Start again from the app you came from.</p>")
