"""The keys file: its format, its mode, first start, reload, flat refusals, bk1 without issuers, the caller on the call."""

from __future__ import annotations

import base64
import json
import logging
import os
import stat
import time

import pytest

from brainy.auth import keys as K
from brainy.auth.principal import Principal
from brainy.contract import refusals as R

PERSON_KEY = "bky_9f3a0000000000000000person"
BUSINESS_KEY = "bky_2c81000000000000000business"
ORDERS_KEY = "bky_7d40000000000000000orders"
OPERATOR_KEY = "bks_a19f00000000000000operator"

SEED_EXAMPLE = f"""\
# <key>            <kind>:<principal>        <brains…>
{PERSON_KEY}          person:you@example.com    notes team
{BUSINESS_KEY}        business:acme             team
{ORDERS_KEY}          service:orders            *
{OPERATOR_KEY}        service:operator          !
"""


def place(path, text, mode=0o600):
    """Write ``text`` at ``path`` in place (same inode) and leave it at ``mode``."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with open(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.chmod(path, mode)
    return path


def replace(path, text):
    """Write ``text`` the way an editor saving atomically does: a new inode renamed over the old."""
    temp = path.with_name(path.name + ".new")
    place(temp, text)
    os.replace(temp, path)


def bearer(key):
    return f"Bearer {key}"


def refusal_of(table, header, **kw):
    with pytest.raises(R.Refusal) as caught:
        table.authenticate(header, **kw)
    return caught.value


@pytest.fixture
def keys_path(tmp_path):
    return place(tmp_path / "keys", SEED_EXAMPLE)


# --- format --------------------------------------------------------------------------------------


def test_seed_example_parses_to_its_principals():
    """Each line of the seeds' example is one key naming one principal and its reach."""
    table = K.parse_keys(SEED_EXAMPLE)
    assert set(table) == {PERSON_KEY, BUSINESS_KEY, ORDERS_KEY, OPERATOR_KEY}
    assert table[PERSON_KEY] == Principal.static_key("person:you@example.com", brains=frozenset({"notes", "team"}))
    assert table[PERSON_KEY].caller == "person:you@example.com"
    assert table[BUSINESS_KEY].kind == "business" and table[BUSINESS_KEY].brains == frozenset({"team"})
    assert table[ORDERS_KEY].kind == "service" and table[ORDERS_KEY].caller is None


def test_star_is_every_brain_and_bang_is_the_service_key():
    """``*`` reaches every brain (brains None) as a principal key; ``!`` is the service key, also brains None."""
    table = K.parse_keys(SEED_EXAMPLE)
    assert table[ORDERS_KEY].brains is None and not table[ORDERS_KEY].service_key
    assert table[OPERATOR_KEY].service_key and table[OPERATOR_KEY].brains is None
    assert table[OPERATOR_KEY].id == "service:operator" and table[OPERATOR_KEY].caller is None
    assert not table[PERSON_KEY].service_key


def test_comments_and_blank_lines_are_ignored():
    """A field starting with ``#`` ends the line; blank lines are nothing; a ``#`` inside a key is part of it."""
    text = (
        f"\n   \n# a whole-line comment\n{PERSON_KEY} person:ada notes # trailing, with: fields\n"
        "\t\n  bky_has#hash00000000000 person:bob notes#not-a-comment-here\n"
    )
    table = K.parse_keys(text)
    assert table[PERSON_KEY].brains == frozenset({"notes"})
    assert table["bky_has#hash00000000000"].brains == frozenset({"notes#not-a-comment-here"})
    assert len(table) == 2


def test_empty_file_is_an_empty_table():
    """A keys file with no keys parses; it simply answers nobody ("not placed yet")."""
    assert K.parse_keys(b"# nothing yet\n") == {}


BAD_LINES = {
    "too-few-fields": f"{ORDERS_KEY} service:x",
    "one-field": f"{ORDERS_KEY}",
    "short-key": "bky_short person:x notes",
    "non-ascii-key": "bky_ééééééééééééééééé person:x notes",
    "bk1-key": "bk1.aaaaaaaaaaaaaaaaaaaa person:x notes",
    "unknown-kind": f"{ORDERS_KEY} robot:x notes",
    "no-colon": f"{ORDERS_KEY} person notes",
    "empty-name": f"{ORDERS_KEY} person: notes",
    "long-principal": f"{ORDERS_KEY} person:{'a' * 260} notes",
    "brain-slash": f"{ORDERS_KEY} person:x a/b",
    "brain-dot": f"{ORDERS_KEY} person:x .",
    "brain-dotdot": f"{ORDERS_KEY} person:x ..",
    "brain-hidden": f"{ORDERS_KEY} person:x .identity",
    "brain-long": f"{ORDERS_KEY} person:x {'b' * 65}",
    "bang-on-person": f"{ORDERS_KEY} person:x !",
    "bang-on-business": f"{ORDERS_KEY} business:x !",
    "bang-with-brain": f"{ORDERS_KEY} service:x ! notes",
    "star-with-brain": f"{ORDERS_KEY} service:x * notes",
    "duplicate": f"{PERSON_KEY} service:again notes",
}


@pytest.mark.parametrize("bad", list(BAD_LINES.values()), ids=list(BAD_LINES))
def test_every_parse_error_names_its_line_and_refuses_the_whole_file(tmp_path, bad):
    """One bad line refuses the file, by line number, at start; the message never quotes a key."""
    path = place(tmp_path / "keys", f"{PERSON_KEY} person:ada notes\n# fine so far\n{bad}\n")
    with pytest.raises(K.KeysFileError) as caught:
        K.KeyTable.open(path)
    assert caught.value.line == 3
    assert f"{path}:3:" in str(caught.value)
    assert ORDERS_KEY not in str(caught.value) and PERSON_KEY not in str(caught.value)


def test_duplicate_names_both_lines():
    """A duplicate key names its own line and the line the key first appeared on."""
    with pytest.raises(K.KeysFileError) as caught:
        K.parse_keys(f"{PERSON_KEY} person:a x\n\n{PERSON_KEY} person:b y\n")
    assert caught.value.line == 3 and "first on line 1" in str(caught.value)


def test_invalid_utf8_names_its_line():
    """Bytes that are not UTF-8 are a parse error on the line that holds them."""
    with pytest.raises(K.KeysFileError) as caught:
        K.parse_keys(f"{PERSON_KEY} person:a x\n".encode() + b"bky_0000000000000000 person:\xff x\n")
    assert caught.value.line == 2


def test_brain_name_law_matches_the_dispatcher():
    """The keys file accepts exactly the brain names the dispatcher does."""
    from brainy.host import dispatch

    assert K.BRAIN_NAME.pattern == dispatch.BRAIN_NAME.pattern


# --- mode ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o620, 0o602, 0o644, 0o660])
def test_group_or_world_access_refuses_start_and_names_the_cure(tmp_path, mode):
    """A keys file the group or the world can read or write is refused before it is read, naming path, mode, cure."""
    path = place(tmp_path / "keys", SEED_EXAMPLE, mode)
    with pytest.raises(K.KeysFileError) as caught:
        K.KeyTable.open(path)
    message = str(caught.value)
    assert str(path) in message and f"{mode:04o}" in message and f"chmod 600 {path}" in message


def test_owner_only_modes_load(tmp_path):
    """0600 and 0400 are the owner's alone, and load."""
    for mode in (0o600, 0o400):
        path = place(tmp_path / f"keys{mode:o}", SEED_EXAMPLE, mode)
        assert len(K.KeyTable.open(path)) == 4


def test_missing_file_without_minting_refuses_start(tmp_path):
    """With minting off, a missing keys file is a refusal to start, never an open door."""
    with pytest.raises(K.KeysFileError, match="no keys file"):
        K.KeyTable.open(tmp_path / "absent")


def test_a_directory_is_not_a_keys_file(tmp_path):
    """Only a regular file is read as a keys file."""
    (tmp_path / "dir").mkdir(mode=0o700)
    with pytest.raises(K.KeysFileError, match="not a regular file"):
        K.KeyTable.open(tmp_path / "dir")


# --- first start ---------------------------------------------------------------------------------


def test_first_start_mints_one_key_at_0600_reaching_every_brain(tmp_path):
    """No keys file: one key is minted for person:local reaching *, written 0600 under a 0700 dir, handed back once."""
    path = tmp_path / "config" / "brainy" / "keys"
    table = K.KeyTable.open(path, mint_if_missing=True)
    key = table.minted
    assert key is not None and key.startswith("bky_") and len(key) == 36
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    text = path.read_text()
    assert text.startswith("# brainy keys file") and "<kind>:<principal>" in text
    who = table.authenticate(bearer(key))
    assert who.id == "person:local" and who.kind == "person" and who.brains is None and not who.service_key
    assert who.caller == "person:local"
    assert sorted(p.name for p in path.parent.iterdir()) == ["keys"]  # no temporary file left behind
    again = K.KeyTable.open(path, mint_if_missing=True)
    assert again.minted is None and again.authenticate(bearer(key)) == who


def test_first_start_never_replaces_a_placed_file(keys_path):
    """Minting happens only when there is no file; a placed file is loaded as it is."""
    table = K.KeyTable.open(keys_path, mint_if_missing=True)
    assert table.minted is None and len(table) == 4


def test_minted_keys_differ(tmp_path):
    """Each first start mints a fresh random key."""
    one = K.KeyTable.open(tmp_path / "a" / "keys", mint_if_missing=True).minted
    two = K.KeyTable.open(tmp_path / "b" / "keys", mint_if_missing=True).minted
    assert one != two


def test_default_path_follows_brainy_keys_then_xdg(monkeypatch, tmp_path):
    """$BRAINY_KEYS wins; else $XDG_CONFIG_HOME/brainy/keys; else ~/.config/brainy/keys (a relative XDG is ignored)."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("BRAINY_KEYS", str(tmp_path / "named"))
    assert K.default_keys_path() == tmp_path / "named"
    monkeypatch.delenv("BRAINY_KEYS")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    assert K.default_keys_path() == tmp_path / "xdg" / "brainy" / "keys"
    monkeypatch.setenv("XDG_CONFIG_HOME", "relative")
    assert K.default_keys_path() == tmp_path / "home" / ".config" / "brainy" / "keys"
    monkeypatch.delenv("XDG_CONFIG_HOME")
    assert K.default_keys_path() == tmp_path / "home" / ".config" / "brainy" / "keys"


# --- reload --------------------------------------------------------------------------------------


def test_removed_line_stops_answering_after_the_interval(keys_path):
    """A removed line keeps answering only until the next check, at most CHECK_INTERVAL later."""
    table = K.KeyTable.open(keys_path)
    assert table.authenticate(bearer(ORDERS_KEY), now=100.0).id == "service:orders"
    place(keys_path, SEED_EXAMPLE.replace(f"{ORDERS_KEY}          service:orders            *\n", ""))
    assert table.authenticate(bearer(ORDERS_KEY), now=100.1).id == "service:orders"  # not checked yet
    with pytest.raises(R.UnauthenticatedError):
        table.authenticate(bearer(ORDERS_KEY), now=100.0 + K.CHECK_INTERVAL)
    assert table.authenticate(bearer(PERSON_KEY), now=100.3).id == "person:you@example.com"


def test_added_line_answers_after_an_atomic_save(keys_path):
    """An editor's save (a new file renamed over the old) is seen like an in-place write."""
    table = K.KeyTable.open(keys_path)
    table.authenticate(bearer(PERSON_KEY), now=0.0)
    replace(keys_path, SEED_EXAMPLE + "bky_new0000000000000000 person:new notes\n")
    assert table.authenticate("Bearer bky_new0000000000000000", now=1.0).id == "person:new"


def test_no_stat_between_checks(keys_path, monkeypatch):
    """Inside the interval a request costs no filesystem call at all; past it, one stat."""
    table = K.KeyTable.open(keys_path)
    table.authenticate(bearer(PERSON_KEY), now=0.0)
    calls = []
    real_stat = os.stat
    monkeypatch.setattr(K.os, "stat", lambda *a, **kw: calls.append(a) or real_stat(*a, **kw))
    for step in range(10):
        table.authenticate(bearer(PERSON_KEY), now=0.01 * step)
    assert calls == []
    table.authenticate(bearer(PERSON_KEY), now=0.5)
    assert len(calls) == 1


def test_a_remembered_key_holds_only_while_its_table_and_revoked_list_do(keys_path, tmp_path, monkeypatch):
    """A static key proven once is answered from memory (the same Principal, no parse, no hash) while neither
    the table nor the revoked list moved; a reload, a mint and a revocation each move a generation, so the next
    request is asked afresh; a refusal is never remembered."""
    from brainy.auth import tokens as T

    revoked = T.Placed(
        tmp_path / "revoked.json", T.parse_revoked, T.RevokedFileError, 0o022, {}, keep_when_gone=True
    ).load(0.0)
    table = K.KeyTable.open(keys_path, revoked=revoked)
    first = table.authenticate(bearer(PERSON_KEY), now=0.0)
    hashed = []
    real_fingerprint = K.fingerprint
    monkeypatch.setattr(K, "fingerprint", lambda key: hashed.append(key) or real_fingerprint(key))
    assert all(table.authenticate(bearer(PERSON_KEY), now=0.01 * step) is first for step in range(5))
    assert hashed == []

    newcomer = "bky_newcomer0000000000000"
    assert isinstance(refusal_of(table, bearer(newcomer), now=0.1), R.UnauthenticatedError)
    replace(keys_path, SEED_EXAMPLE + f"{newcomer} person:newcomer notes\n")
    before = table.generation
    assert table.reload() and table.generation > before
    assert table.authenticate(bearer(newcomer), now=0.1).id == "person:newcomer"  # the refusal was not kept
    minted = table.mint("person:minted", ["notes"])
    assert table.authenticate(bearer(minted), now=0.1).id == "person:minted"

    before = revoked.generation
    T.add_revocation(revoked.path, real_fingerprint(PERSON_KEY), 253402300799)
    revoked.load()  # as host.revokeKey does before it answers
    assert revoked.generation > before
    assert isinstance(refusal_of(table, bearer(PERSON_KEY), now=0.2), R.UnauthenticatedError)
    assert table.authenticate(bearer(newcomer), now=0.2).id == "person:newcomer"


def test_removed_line_stops_answering_within_a_second_in_real_time(keys_path):
    """With the real monotonic clock, a removed key is refused once the interval has passed."""
    table = K.KeyTable.open(keys_path)
    assert table.authenticate(bearer(BUSINESS_KEY)).id == "business:acme"
    place(keys_path, SEED_EXAMPLE.replace(BUSINESS_KEY, "bky_rotated00000000000"))
    time.sleep(K.CHECK_INTERVAL + 0.05)
    with pytest.raises(R.UnauthenticatedError):
        table.authenticate(bearer(BUSINESS_KEY))
    assert table.authenticate("Bearer bky_rotated00000000000").id == "business:acme"


def test_bad_edit_keeps_the_last_good_table_and_logs_once(keys_path, caplog):
    """A reload that fails to parse is logged by line, once; the last good table answers until a good edit lands."""
    table = K.KeyTable.open(keys_path)
    table.authenticate(bearer(PERSON_KEY), now=0.0)
    place(keys_path, SEED_EXAMPLE + "bky_new0000000000000000 robot:x notes\n")
    with caplog.at_level(logging.INFO, logger="brainy.keys"):
        assert table.authenticate(bearer(ORDERS_KEY), now=1.0).id == "service:orders"
        with pytest.raises(R.UnauthenticatedError):
            table.authenticate("Bearer bky_new0000000000000000", now=2.0)
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1 and f"{keys_path}:6:" in errors[0].getMessage()
    place(keys_path, SEED_EXAMPLE + "bky_new0000000000000000 person:x notes\n")
    assert table.authenticate("Bearer bky_new0000000000000000", now=3.0).id == "person:x"


def test_reload_refuses_a_loosened_mode(keys_path, caplog):
    """A chmod to a group- or world-readable mode is noticed on reload: logged with the cure, last good table kept."""
    table = K.KeyTable.open(keys_path)
    table.authenticate(bearer(PERSON_KEY), now=0.0)
    place(keys_path, "bky_new0000000000000000 person:x notes\n", mode=0o644)
    with caplog.at_level(logging.ERROR, logger="brainy.keys"):
        assert table.authenticate(bearer(PERSON_KEY), now=1.0).id == "person:you@example.com"
    assert f"chmod 600 {keys_path}" in caplog.text
    os.chmod(keys_path, 0o600)
    assert table.authenticate("Bearer bky_new0000000000000000", now=2.0).id == "person:x"
    with pytest.raises(R.UnauthenticatedError):
        table.authenticate(bearer(PERSON_KEY), now=2.1)


def test_vanished_file_keeps_the_last_good_table(keys_path, caplog):
    """A keys file that disappears is logged; the last good table stays rather than locking every caller out."""
    table = K.KeyTable.open(keys_path)
    table.authenticate(bearer(PERSON_KEY), now=0.0)
    keys_path.unlink()
    with caplog.at_level(logging.ERROR, logger="brainy.keys"):
        assert table.authenticate(bearer(PERSON_KEY), now=1.0).id == "person:you@example.com"
    assert "gone" in caplog.text
    place(keys_path, "bky_back000000000000000 person:back notes\n")
    assert table.authenticate("Bearer bky_back000000000000000", now=2.0).id == "person:back"


def test_keys_never_reach_the_log(keys_path, caplog):
    """No log line, on load, reload or refusal, contains a key."""
    with caplog.at_level(logging.DEBUG, logger="brainy.keys"):
        table = K.KeyTable.open(keys_path)
        table.authenticate(bearer(PERSON_KEY), now=0.0)
        place(keys_path, f"{ORDERS_KEY} {PERSON_KEY} notes\n{PERSON_KEY} person:y {OPERATOR_KEY}\n")
        table.authenticate(bearer(PERSON_KEY), now=1.0)
        place(keys_path, SEED_EXAMPLE.replace("notes team", "notes"))
        table.authenticate(bearer(PERSON_KEY), now=2.0)
    assert caplog.records
    for key in (PERSON_KEY, BUSINESS_KEY, ORDERS_KEY, OPERATOR_KEY):
        assert key not in caplog.text


# --- flat refusals -------------------------------------------------------------------------------


def test_every_static_failure_is_the_same_refusal(keys_path):
    """No header, another scheme, an empty, unknown, removed or malformed bearer: one class, one wire document."""
    table = K.KeyTable.open(keys_path)
    table.authenticate(bearer(ORDERS_KEY), now=0.0)
    place(keys_path, SEED_EXAMPLE.replace(ORDERS_KEY, "bky_replaced0000000000"))
    headers = [
        None,
        "",
        "   ",
        "Bearer",
        "Bearer ",
        f"Basic {ORDERS_KEY}",
        f"Token {PERSON_KEY}",
        "Bearer bky_nobody00000000000000",
        f"Bearer {PERSON_KEY} extra",
        f"Bearer{PERSON_KEY}",
        f"Bearer {PERSON_KEY[:-1]}",
        b"Bearer \xff\xfe\xfd\xfc",
        "Bearer k\u00e9y0000000000000000",
        bearer(ORDERS_KEY),
    ]
    wires = []
    for header in headers:
        refusal = refusal_of(table, header, now=1.0)
        assert type(refusal) is R.UnauthenticatedError and refusal.status == 401
        wires.append(refusal.to_wire())
    assert all(w == wires[0] for w in wires)
    assert wires[0] == {"name": "UnauthenticatedError", "message": K.UNAUTHENTICATED_MESSAGE}


def test_scheme_is_case_insensitive_and_bytes_are_accepted(keys_path):
    """``bearer``, ``BEARER`` and bytes headers carry the same key."""
    table = K.KeyTable.open(keys_path)
    assert table.authenticate(f"bearer {PERSON_KEY}").id == "person:you@example.com"
    assert table.authenticate(f"  BEARER   {PERSON_KEY}  ").id == "person:you@example.com"
    assert table.authenticate(f"Bearer {OPERATOR_KEY}".encode()).service_key


# --- minted tokens without an issuers file -------------------------------------------------------


def b64(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def token(payload, signature=b"\x01" * 64):
    body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    return f"bk1.{b64(body)}.{b64(signature)}"


def test_bk1_without_issuers_is_unknown_issuer_by_name(keys_path):
    """With no verifier no issuer is trusted: a parseable bk1 token answers BRAINY_KEY_UNKNOWN_ISSUER naming its iss."""
    table = K.KeyTable.open(keys_path)
    refusal = refusal_of(table, bearer(token({"iss": "soulcraft-identity", "sub": "agent:a", "brain": "notes"})))
    assert type(refusal) is R.BRAINY_KEY_UNKNOWN_ISSUER and refusal.status == 401
    assert refusal.to_wire()["iss"] == "soulcraft-identity"
    assert "no issuers file" in refusal.message


MALFORMED = {
    "prefix-only": "bk1.",
    "two-segments": "bk1." + b64(b'{"iss":"x"}'),
    "four-segments": token({"iss": "x"}) + ".more",
    "bad-base64": "bk1.!!!!." + b64(b"sig"),
    "empty-signature": "bk1." + b64(b'{"iss":"x"}') + ".",
    "not-json": token(b"not json"),
    "not-utf8": token(b"\xff\xfe"),
    "json-array": token([1, 2]),
    "no-iss": token({"sub": "agent:a"}),
    "iss-not-string": token({"iss": 7}),
}


@pytest.mark.parametrize("value", list(MALFORMED.values()), ids=list(MALFORMED))
def test_bk1_that_does_not_parse_is_malformed(keys_path, value):
    """A bk1 bearer that does not parse as bk1.<payload>.<signature> with an iss answers BRAINY_KEY_MALFORMED."""
    refusal = refusal_of(K.KeyTable.open(keys_path), bearer(value))
    assert type(refusal) is R.BRAINY_KEY_MALFORMED and refusal.status == 401


def test_token_verifier_is_the_seam(keys_path):
    """A bk1 bearer goes to the token verifier (this call's over the table's) and never to the keys table."""
    seen = []

    def verifier(credential):
        seen.append(credential)
        return Principal.token("agent:a", "notes", frozenset({"read"}))

    def refusing(credential):
        raise R.BRAINY_KEY_BAD_SIGNATURE("no")

    value = token({"iss": "x"})
    table = K.KeyTable.open(keys_path, token_verifier=refusing)
    with pytest.raises(R.BRAINY_KEY_BAD_SIGNATURE):
        table.authenticate(bearer(value))
    assert table.authenticate(bearer(value), token_verifier=verifier).token_brain == "notes"
    assert seen == [value]


# --- the caller on the call ----------------------------------------------------------------------


ORDERS = Principal.static_key("service:orders")
OPERATOR = Principal.static_key("service:operator", service_key=True)


def test_no_assertion_leaves_the_principal_as_it_is():
    """Without any of the three headers the credential is unchanged, for every kind."""
    for who in (ORDERS, OPERATOR, Principal.static_key("person:ada"), Principal.token("a:b", "n", frozenset())):
        assert K.apply_caller_assertion(who, {"authorization": "x", "x-brainy-other": "y"}) is who


def test_service_assertion_sets_caller_via_owner_roles():
    """A service key's assertion makes the request the caller's, with via naming the service."""
    asserted = K.apply_caller_assertion(
        ORDERS,
        {
            "x-brainy-caller": "person:ada@example.com",
            "x-brainy-owner": "true",
            "x-brainy-roles": "editor, billing.read",
        },
    )
    assert asserted.caller == "person:ada@example.com" and asserted.via == "service:orders"
    assert asserted.owner is True and asserted.roles == ("editor", "billing.read")
    assert asserted.brains is ORDERS.brains and asserted.id == "service:orders" and asserted.kind == "service"


def test_caller_alone_means_not_owner_and_no_roles():
    """X-Brainy-Caller alone asserts a caller who is not the owner and holds no roles."""
    asserted = K.apply_caller_assertion(ORDERS, {"x-brainy-caller": "person:ada"})
    assert (asserted.caller, asserted.owner, asserted.roles) == ("person:ada", False, ())


def test_the_service_key_may_assert():
    """Kind, not reach: the ``!`` key is a service key and may assert too, keeping its access class."""
    asserted = K.apply_caller_assertion(OPERATOR, {"x-brainy-caller": "person:ada", "x-brainy-owner": "false"})
    assert asserted.caller == "person:ada" and asserted.via == "service:operator" and asserted.service_key


@pytest.mark.parametrize(
    "who",
    [
        Principal.static_key("person:ada"),
        Principal.static_key("business:acme"),
        Principal.token("service:orders", "notes", frozenset({"read", "write"})),
    ],
    ids=["person", "business", "token"],
)
@pytest.mark.parametrize(
    "headers",
    [{"x-brainy-caller": "person:bob"}, {"x-brainy-owner": "true"}, {"x-brainy-roles": "a"}, {"x-brainy-caller": ""}],
    ids=["caller", "owner", "roles", "malformed-caller"],
)
def test_non_service_credentials_are_refused_by_name(who, headers):
    """Any of the three headers on a person, business or minted-token credential is refused not-a-service."""
    with pytest.raises(R.CallerAssertionRefusedError) as caught:
        K.apply_caller_assertion(who, headers)
    assert caught.value.to_wire()["reason"] == "not-a-service" and caught.value.status == 403


def test_a_token_whose_principal_says_service_still_may_not_assert():
    """A minted token is refused even when built with kind "service": the question is static key or not."""
    forged = Principal("service:orders", "service", token_brain="notes", scope=frozenset({"read"}))
    with pytest.raises(R.CallerAssertionRefusedError) as caught:
        K.apply_caller_assertion(forged, {"x-brainy-caller": "person:ada"})
    assert caught.value.reason == "not-a-service"


UNREADABLE = {
    "empty-caller": {"x-brainy-caller": ""},
    "blank-caller": {"x-brainy-caller": "   "},
    "no-kind": {"x-brainy-caller": "ada"},
    "empty-name": {"x-brainy-caller": "person:"},
    "empty-kind": {"x-brainy-caller": ":ada"},
    "long-caller": {"x-brainy-caller": "person:" + "a" * 250},
    "control-char": {"x-brainy-caller": "person:ada\x00"},
    "newline": {"x-brainy-caller": "person:a\nX-Evil: 1"},
    "two-callers": {"x-brainy-caller": "person:ada, person:bob"},
    "owner-TRUE": {"x-brainy-caller": "person:ada", "x-brainy-owner": "TRUE"},
    "owner-yes": {"x-brainy-caller": "person:ada", "x-brainy-owner": "yes"},
    "owner-empty": {"x-brainy-caller": "person:ada", "x-brainy-owner": ""},
    "roles-empty": {"x-brainy-caller": "person:ada", "x-brainy-roles": ""},
    "roles-upper": {"x-brainy-caller": "person:ada", "x-brainy-roles": "Admin"},
    "roles-gap": {"x-brainy-caller": "person:ada", "x-brainy-roles": "a,,b"},
    "roles-trailing": {"x-brainy-caller": "person:ada", "x-brainy-roles": "a,"},
    "roles-space": {"x-brainy-caller": "person:ada", "x-brainy-roles": "a b"},
    "owner-without-caller": {"x-brainy-owner": "true"},
    "roles-without-caller": {"x-brainy-roles": "a"},
}


@pytest.mark.parametrize("headers", list(UNREADABLE.values()), ids=list(UNREADABLE))
def test_unreadable_service_assertion_is_malformed(headers):
    """A service's assertion this host cannot read is refused malformed, never guessed at."""
    for who in (ORDERS, OPERATOR):
        with pytest.raises(R.CallerAssertionRefusedError) as caught:
            K.apply_caller_assertion(who, headers)
        assert caught.value.to_wire()["reason"] == "malformed"


def test_caller_at_the_length_limit_is_read():
    """256 characters is the longest readable caller."""
    caller = "person:" + "a" * 249
    assert K.apply_caller_assertion(ORDERS, {"x-brainy-caller": caller}).caller == caller
