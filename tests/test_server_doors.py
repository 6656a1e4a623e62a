"""The server's own doors come from the contract (brainy/net/server_doors.py): every one the contract lists
answers or refuses by name, in memory through the app (no socket).

DOORS.md 10.2; DESIGN.md "The door table is a law" (a door is never quietly absent); issue 10, "Server
doors from the contract".
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from brainy.auth.keys import KeyTable
from brainy.contract import doors as D
from brainy.engine import init_store
from brainy.host.pool import Pool
from brainy.net import routes
from brainy.net import server_doors as S
from brainy.net.app import SERVER_HANDLERS, App, Request, Response
from brainy.net.http import StreamingResponse

KEY = "bky_server_doors_person_key_0123456"
SERVICE_KEY = "bks_server_doors_service_key_012345"


@pytest.fixture
def app(tmp_path: Path) -> App:
    """An App over one fresh brain, ``notes``, with one person key reaching it and the service key."""
    init_store(tmp_path / "notes")
    keys = tmp_path / "keys"
    keys.write_text(f"{KEY}  person:one@example.com  notes\n{SERVICE_KEY}  service:operator  !\n")
    keys.chmod(0o600)
    pool = Pool({"notes": tmp_path / "notes"})
    yield App(pool, KeyTable.open(keys), "1970-01-01T00:00:00Z")
    pool.close_all()


def call(app: App, method: str, path: str, key: str | None = KEY, **headers: str) -> tuple[int, Any]:
    fields = {k.replace("_", "-"): v for k, v in headers.items()}
    if key is not None:
        fields["authorization"] = f"Bearer {key}"
    answered = app.handle(Request(method, path, "", fields, b""))
    if not isinstance(answered, Response):
        answered = asyncio.run(answered)
    kind = dict(answered.headers).get(b"content-type", b"")
    return answered.status, json.loads(answered.body) if kind.startswith(b"application/json") else answered.body


def _path(door: D.ServerDoor) -> str:
    return door.path.replace("{brain}", "notes")


@pytest.mark.parametrize("door", S.SERVER_DOORS, ids=lambda d: d.name)
def test_every_server_door_answers_or_refuses_by_name(app, door):
    """Each server door of the contract (and /openapi.json beside it) answers (native), refuses NotYetNativeError
    with its release (not yet native), or, served only when configured, refuses the UnknownDoorError its entry
    lists. None is absent."""
    headers = {"accept": door.accept} if door.accept else {}
    status, body = call(app, door.method, _path(door), **headers)
    if door.name in S.CONFIGURED_ONLY:
        assert (status, body["error"]["name"]) == (404, "UnknownDoorError")
        assert "UnknownDoorError" in door.refusals
    elif door.disposition == "notYetNative":
        assert status == 501, body
        assert body["error"] == {
            "name": "NotYetNativeError",
            "message": f"{door.name} arrives in {door.release}",
            "door": door.name,
            "release": door.release,
        }
    elif door.name in S.HANDED_OFF:
        assert status not in (404, 501), (status, body)  # MCP answers for itself (a JSON-RPC refusal, here)
    elif door.name == "server.ws":  # the session is reached by an upgrade only (tests/test_ws_session.py)
        assert (status, body["error"]["reason"]) == (400, "websocket-handshake"), body
    else:
        assert status == 200, (status, body)


def test_websocket_and_stream_refusals(app):
    """server.ws: no credential is 401, and a credential without an upgrade is 400 MalformedRequestError (the
    session itself is tests/test_ws_session.py); POST is 405. server.changesStream: Accept text/event-stream on
    GET P/changes opens the stream (tests/test_change_stream.py) after the brain name and the credential are
    checked; without it (or with JSON first) the changes door answers its JSON page."""
    assert call(app, "GET", "/v1/ws", key=None)[1]["error"]["name"] == "UnauthenticatedError"
    assert call(app, "GET", "/v1/ws", key="bky_not_a_key_of_this_server_000000")[0] == 401
    status, body = call(app, "GET", "/v1/ws", key=SERVICE_KEY)
    assert (status, body["error"]["name"]) == (400, "MalformedRequestError")
    status, body = call(app, "GET", "/v1/ws")
    assert (status, body["error"]["reason"]) == (400, "websocket-handshake")
    status, body = call(app, "POST", "/v1/ws")
    assert (status, body["error"]["allowed"]) == (405, ["GET"])

    changes = "/v1/brains/notes/changes"
    for accept in ("text/event-stream", "text/event-stream; charset=utf-8", "text/html, text/event-stream"):
        answered = app.handle(Request("GET", changes, "", {"authorization": f"Bearer {KEY}", "accept": accept}))
        assert isinstance(answered, StreamingResponse) and answered.status == 200, accept
        assert answered.feed.stream.data_to_send().startswith(b"event: caught-up\n")
    for accept in (None, "application/json", "application/json, text/event-stream", "*/*, text/event-stream"):
        status, body = call(app, "GET", changes, **({"accept": accept} if accept else {}))
        assert status == 200 and body["brain"] == "notes" and "frames" in body, accept
    status, body = call(app, "GET", "/v1/brains/.hidden/changes", accept="text/event-stream")
    assert (status, body["error"]["name"]) == (400, "BrainNameInvalidError")
    assert call(app, "GET", changes, key=None, accept="text/event-stream")[0] == 401
    status, body = call(app, "GET", changes, key=SERVICE_KEY, accept="text/event-stream")
    assert (status, body["error"]["name"]) == (403, "ForbiddenError")  # the changes door's gate: a principal read


def test_the_oauth_document_is_routed_only_when_configured(tmp_path):
    """DOORS.md 10.2: the RFC 9728 document is served only when an authorization server is configured; without
    one its path is no route (404 UnknownDoorError); with one (``--auth-server``) it names that server, to
    anyone, and every 401 names the document in its challenge (RFC 9728 5.1)."""
    name = "server.oauthProtectedResource"
    assert name not in {r.name for r in S.routes()}
    router = routes.Router(server=S.routes(configured={name}))
    assert router.match("GET", "/.well-known/oauth-protected-resource").server == name
    init_store(tmp_path / "b")
    keys = tmp_path / "keys"
    keys.write_text(f"{KEY}  person:one@example.com  b\n")
    keys.chmod(0o600)
    pool = Pool({"b": tmp_path / "b"})
    app = App(
        pool,
        KeyTable.open(keys),
        "1970-01-01T00:00:00Z",
        base_url="http://127.0.0.1:8300",
        auth_server="https://id.example.com",
    )
    status, body = call(app, "GET", "/.well-known/oauth-protected-resource", key=None)
    assert (status, body["authorization_servers"], body["bearer_methods_supported"], body["resource"]) == (
        200,
        ["https://id.example.com"],
        ["header"],
        "http://127.0.0.1:8300",
    )
    answered = app.handle(Request("GET", "/v1/brains/b/counts", "", {}, b""))
    assert answered.status == 401 and dict(answered.headers)[b"www-authenticate"] == (
        b'Bearer realm="brainy", resource_metadata="http://127.0.0.1:8300/.well-known/oauth-protected-resource"'
    )
    pool.close_all()


def test_the_handler_table_joins_the_contract_both_ways():
    """Every native server door has a handler (but the handed-off /mcp), and every handler is a native server
    door; routes reach every server door but the handed-off and the unconfigured. Beyond the contract there is
    /openapi.json alone, since DOORS.md 10.2 (which the contract's nine transcribe) does not list it."""
    native = {s.name for s in S.SERVER_DOORS if s.disposition == "native"}
    assert set(SERVER_HANDLERS) == native - set(S.HANDED_OFF)
    assert {r.name for r in S.routes()} == {s.name for s in S.SERVER_DOORS} - set(S.HANDED_OFF) - set(S.CONFIGURED_ONLY)
    assert S.HANDED_OFF == {"server.mcp": "/mcp"}
    assert [(s.name, s.method, s.path, s.who) for s in S.BEYOND_CONTRACT] == [
        ("server.openapi", "GET", "/openapi.json", "anyone")
    ]
    assert not {s.name for s in S.BEYOND_CONTRACT} & {s.name for s in D.SERVER_DOORS}


def test_a_missing_or_stray_handler_stops_the_import_by_name():
    """join() refuses a table without a native server door's handler, or with a handler for no native server
    door (a not-yet-native one included), naming them."""
    table = dict(SERVER_HANDLERS)
    del table["server.health"]
    with pytest.raises(
        RuntimeError,
        match=r"without a handler \['server.health'\], handlers that are not native "
        r"server doors \[\]",
    ):
        S.join(table)
    with pytest.raises(
        RuntimeError,
        match=r"without a handler \[\], handlers that are not native server doors "
        r"\['server.telemetry'\]",
    ):
        S.join({**SERVER_HANDLERS, "server.telemetry": print})


def test_a_shared_route_needs_its_door():
    """A server door negotiated onto a door's route needs that route to be a door's."""
    with pytest.raises(RuntimeError, match="no door route GET /v1/brains/{brain}/nowhere to share"):
        routes.Router(server=[routes.ServerRoute("GET", "/v1/brains/{brain}/nowhere", "server.x", "text/x")])
