"""MCP in memory (brainy/net/mcp/): the lifecycle table, JSON-RPC messages, tools and resources over the
dispatcher, streamable HTTP through the app, and stdio framing; no socket and no subprocess.

Seed 000, "MCP"; seed 001, "Which brain a call reaches"; DOORS.md 0.2, 0.7, 11.1; MCP 2025-06-18
("Lifecycle", "Transports", "Tools", "Resources").
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from brainy.auth.keys import KeyTable
from brainy.auth.principal import Principal
from brainy.contract import doors as D
from brainy.engine import init_store
from brainy.host.dispatch import Dispatcher
from brainy.host.pool import Pool
from brainy.net import mcp as M
from brainy.net.app import App, Request, Response

ONE_KEY = "bky_mcp_session_one_brain_0123456789"
TWO_KEY = "bky_mcp_session_two_brains_012345678"
SERVICE_KEY = "bks_mcp_session_service_key_01234567"
INIT = {"protocolVersion": M.PROTOCOL_VERSION, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}


@pytest.fixture
def app(tmp_path: Path) -> App:
    """An App over two fresh brains, ``notes`` and ``other``: one key reaching ``notes``, one reaching both,
    and the service key."""
    for name in ("notes", "other"):
        init_store(tmp_path / name)
    keys = tmp_path / "keys"
    keys.write_text(
        f"{ONE_KEY}  person:one@example.com  notes\n{TWO_KEY}  person:two@example.com  notes other\n"
        f"{SERVICE_KEY}  service:operator  !\n"
    )
    keys.chmod(0o600)
    pool = Pool({"notes": tmp_path / "notes", "other": tmp_path / "other"})
    yield App(pool, KeyTable.open(keys), "1970-01-01T00:00:00Z")
    pool.close_all()


class Http:
    """Streamable HTTP against the app in memory: POST one message, keep the session id."""

    def __init__(self, app: App, key: str | None = ONE_KEY) -> None:
        self.app = app
        self.key = key
        self.session: str | None = None
        self.next_id = 0

    def send(self, method: str, body: bytes = b"", headers: dict[str, str] | None = None) -> Response:
        fields = {"content-type": "application/json"}
        if self.key is not None:
            fields["authorization"] = f"Bearer {self.key}"
        if self.session is not None:
            fields["mcp-session-id"] = self.session
        fields.update(headers or {})
        answered = self.app.handle(Request(method, M.MCP_PATH, "", fields, body))
        if not isinstance(answered, Response):
            answered = asyncio.run(answered)
        return answered

    def post(self, doc: Any, headers: dict[str, str] | None = None) -> Response:
        return self.send("POST", orjson.dumps(doc), headers)

    def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        self.next_id += 1
        response = self.post({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params or {}})
        assert response.status == 200, response
        reply = json.loads(response.body)
        assert reply["id"] == self.next_id
        return reply

    def call(self, tool: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
        return self.request("tools/call", {"name": tool, "arguments": arguments or {}})


def _header(response: Response, name: bytes) -> str | None:
    for key, value in response.headers:
        if key == name:
            return value.decode()
    return None


def opened(app: App, key: str = ONE_KEY) -> Http:
    """A session opened by initialize and notifications/initialized."""
    http = Http(app, key)
    response = http.post({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": INIT})
    assert response.status == 200, response
    http.session = _header(response, b"mcp-session-id")
    assert http.session
    assert http.post({"jsonrpc": "2.0", "method": "notifications/initialized"}).status == 202
    return http


# -- the lifecycle ------------------------------------------------------------------------------------


def test_the_lifecycle_table_is_whole_and_its_refusals_keep_the_state():
    """Every (state, input) pair has an entry; a refusing action never moves the session; CLOSED is terminal."""
    assert set(M.LIFECYCLE) == {(s, i) for s in M.State for i in M.Input}
    refusing = {M.Action.REFUSE_UNINITIALIZED, M.Action.REFUSE_REINITIALIZE, M.Action.REFUSE_CLOSED}
    for (state, given_input), (action, following) in M.LIFECYCLE.items():
        if action in refusing or action is M.Action.DROP:
            assert following is state, (state, given_input)
        if state is M.State.CLOSED:
            assert following is M.State.CLOSED
        if given_input is M.Input.CLOSE and state is not M.State.CLOSED:
            assert (action, following) == (M.Action.CLOSE, M.State.CLOSED)


_MESSAGES = {
    M.Input.INITIALIZE: {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT},
    M.Input.INITIALIZED: {"jsonrpc": "2.0", "method": "notifications/initialized"},
    M.Input.PING: {"jsonrpc": "2.0", "id": 2, "method": "ping"},
    M.Input.REQUEST: {
        "jsonrpc": "2.0",
        "id": 3,
        "method": "tools/call",
        "params": {"name": "brainy_counts", "arguments": {"brain": "notes"}},
    },
    M.Input.NOTIFICATION: {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 9}},
    M.Input.RESPONSE: {"jsonrpc": "2.0", "id": 4, "result": {}},
}


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(list(M.Input)), max_size=12))
def test_any_sequence_of_inputs_walks_the_table(tmp_path_factory, inputs):
    """Driven by any sequence of messages, a session is where the table says, every request is answered (a
    result where the table serves it, INVALID_REQUEST where it refuses), and nothing else is."""
    root = tmp_path_factory.mktemp("walk")
    init_store(root / "notes")
    pool = Pool({"notes": root / "notes"})
    server = M.McpServer(Dispatcher(pool))
    principal = Principal.static_key("person:walker@example.com", frozenset({"notes"}))
    session = M.Session("s", ("", "", None))
    try:
        for given_input in inputs:
            action, following = M.LIFECYCLE[(session.state, given_input)]
            if given_input is M.Input.CLOSE:
                session.state = following
                continue
            message = M.parse_message(_MESSAGES[given_input])
            assert message.input is given_input
            reply = server.handle(session, principal, message)
            assert session.state is following, (given_input, action)
            if message.kind != "request":
                assert reply is M.NO_REPLY
            elif action.name.startswith("REFUSE"):
                assert reply["error"]["code"] == M.INVALID_REQUEST
            else:
                assert "result" in reply, reply
    finally:
        pool.close_all()


@pytest.mark.parametrize(
    "doc, code",
    [
        ([{"jsonrpc": "2.0", "id": 1, "method": "ping"}], M.INVALID_REQUEST),
        ({"jsonrpc": "1.0", "id": 1, "method": "ping"}, M.INVALID_REQUEST),
        ({"jsonrpc": "2.0", "id": None, "method": "ping"}, M.INVALID_REQUEST),
        ({"jsonrpc": "2.0", "id": True, "method": "ping"}, M.INVALID_REQUEST),
        ({"jsonrpc": "2.0", "id": 1.5, "method": "ping"}, M.INVALID_REQUEST),
        ({"jsonrpc": "2.0", "id": 1, "method": ""}, M.INVALID_REQUEST),
        ({"jsonrpc": "2.0", "id": 1, "method": "ping", "params": [1]}, M.INVALID_PARAMS),
        ({"jsonrpc": "2.0", "id": 1}, M.INVALID_REQUEST),
    ],
)
def test_malformed_messages_are_protocol_errors(doc, code):
    """A message that is not one JSON-RPC 2.0 object (a batch, a wrong version, a null, boolean or fractional
    id, no method, params that are not an object) is a protocol error with its JSON-RPC code."""
    with pytest.raises(M.ProtocolError) as caught:
        M.parse_message(doc)
    assert caught.value.code == code


# -- streamable HTTP through the app --------------------------------------------------------------------


def test_initialize_opens_a_session_and_answers_the_one_revision(app):
    """initialize without Mcp-Session-Id opens a session named in the answer's header; whatever revision the
    client asks for, the answer is 2025-06-18 (the one served), with tools and resources, the server's
    name, and instructions naming the one brain this key reaches."""
    http = Http(app)
    response = http.post(
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {**INIT, "protocolVersion": "2099-01-01"}}
    )
    assert response.status == 200 and _header(response, b"content-type") == "application/json"
    assert _header(response, b"mcp-session-id") and _header(response, b"server-timing").startswith("brainy;dur=")
    result = json.loads(response.body)["result"]
    assert result["protocolVersion"] == "2025-06-18"
    assert result["capabilities"] == {"tools": {}, "resources": {}}
    assert result["serverInfo"]["name"] == "brainy"
    assert "one brain, `notes`" in result["instructions"]


def test_every_message_after_initialize_needs_its_session(app):
    """A message without Mcp-Session-Id is 400 InvalidArgumentError; an id this server does not hold, or one
    another credential opened, is 404 (the client initializes again); DELETE ends a session, after which its
    id is 404 too. Each refusal is a JSON-RPC error whose data is the refusal document."""
    http = opened(app)
    lone = Http(app)
    response = lone.post({"jsonrpc": "2.0", "id": 5, "method": "ping"})
    assert response.status == 400
    error = json.loads(response.body)["error"]
    assert error["data"]["name"] == "InvalidArgumentError" and error["data"]["field"] == "Mcp-Session-Id"
    assert json.loads(response.body)["id"] == 5
    lone.session = "no-such-session"
    assert (
        json.loads(lone.post({"jsonrpc": "2.0", "id": 1, "method": "ping"}).body)["error"]["data"]["name"]
        == "UnknownDoorError"
    )
    thief = Http(app, TWO_KEY)
    thief.session = http.session
    assert thief.post({"jsonrpc": "2.0", "id": 1, "method": "ping"}).status == 404
    assert http.request("ping")["result"] == {}
    assert http.send("DELETE").status == 200
    assert http.post({"jsonrpc": "2.0", "id": 1, "method": "ping"}).status == 404
    assert http.send("DELETE").status == 404


def test_get_is_405_and_other_transport_refusals_travel_by_name(app):
    """GET /mcp is 405 with Allow: DELETE, POST (no server-sent stream is offered); a body that is not JSON is
    400 BodyDecodeError as a JSON-RPC parse error; a non-JSON media type is 415; a foreign browser Origin is
    403; a missing key is the same 401 UnauthenticatedError every door answers, with WWW-Authenticate."""
    http = Http(app)
    got = http.send("GET")
    assert got.status == 405 and _header(got, b"allow") == "DELETE, POST"
    assert json.loads(got.body)["error"]["data"]["name"] == "MethodNotAllowedError"
    got = http.send("POST", b"{not json")
    assert got.status == 400
    assert json.loads(got.body)["error"]["code"] == M.PARSE_ERROR
    assert json.loads(got.body)["error"]["data"]["name"] == "BodyDecodeError"
    got = http.send("POST", b"{}", {"content-type": "application/msgpack"})
    assert got.status == 415 and json.loads(got.body)["error"]["data"]["name"] == "UnsupportedMediaTypeError"
    got = http.post(
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT}, {"origin": "https://attacker.example"}
    )
    assert got.status == 403 and json.loads(got.body)["error"]["data"]["reason"] == "origin"
    assert (
        http.post(
            {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT}, {"origin": "http://localhost:6274"}
        ).status
        == 200
    )
    for key in (None, "bky_not_a_key_anyone_placed_00000"):
        got = Http(app, key).post({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT})
        assert got.status == 401 and _header(got, b"www-authenticate") == 'Bearer realm="brainy"'
        assert json.loads(got.body)["error"]["data"]["name"] == "UnauthenticatedError"


@pytest.mark.parametrize("origin", ["http://[::1", "http://[", "https://[fe80::1", "http://[::1x]", "http://a[b]"])
def test_an_origin_that_does_not_parse_is_refused_as_foreign(app, origin):
    """An Origin that is no URL (an unclosed IPv6 bracket, which urlsplit refuses with a ValueError) names no
    loopback host: 403 ForbiddenError, reason origin, never the 500 InternalError it was until a fuzzer sent one."""
    got = Http(app).post({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT}, {"origin": origin})
    assert got.status == 403, got
    error = json.loads(got.body)["error"]
    assert (
        error["data"]["name"] == "ForbiddenError"
        and error["data"]["reason"] == "origin"
        and error["code"] != M.INTERNAL_ERROR
    )


@pytest.mark.parametrize("version", ["2025-03-26", "2025-11-25", "2024-11-05", "junk", ""])
def test_a_protocol_version_header_other_than_2025_06_18_is_refused_by_name(app, version):
    """MCP-Protocol-Version other than 2025-06-18 is 400 ProtocolVersionError with supported, on initialize
    and within a session alike; the header left out is served (the session knows its revision)."""
    for http in (Http(app), opened(app)):
        got = http.post({"jsonrpc": "2.0", "id": 9, "method": "ping"}, {"mcp-protocol-version": version})
        assert got.status == 400, got
        data = json.loads(got.body)["error"]["data"]
        assert data == {"name": "ProtocolVersionError", "message": data["message"], "supported": "2025-06-18"}
    http = opened(app)
    assert (
        http.post({"jsonrpc": "2.0", "id": 1, "method": "ping"}, {"mcp-protocol-version": "2025-06-18"}).status == 200
    )
    assert http.request("ping")["result"] == {}


def test_tools_list_is_the_generated_table_whole(app):
    """tools/list answers every contract door as a tool, in contract order, exactly as doors.mcp_tools makes
    it: brain optional for a key reaching one brain, required for a key reaching two."""
    assert opened(app).request("tools/list")["result"] == {"tools": D.mcp_tools(single_brain=True)}
    assert opened(app, TWO_KEY).request("tools/list")["result"] == {"tools": D.mcp_tools(single_brain=False)}
    assert len(D.mcp_tools()) == len(D.DOORS)


def test_tools_call_answers_through_the_dispatcher(app):
    """A door's answer is JSON text plus the same document in structuredContent, isError false, with the
    call's measured milliseconds in result._meta.ms and the same figure in Server-Timing; a write goes through
    the same gate and lands with its caller."""
    http = opened(app)
    added = http.call("brainy_add", {"body": {"type": "person", "id": "alice", "data": "hello"}})["result"]
    assert added["isError"] is False and added["structuredContent"]["generation"] == 1
    response = http.post(
        {
            "jsonrpc": "2.0",
            "id": 77,
            "method": "tools/call",
            "params": {"name": "brainy_get", "arguments": {"id": "alice"}},
        }
    )
    result = json.loads(response.body)["result"]
    entity = result["structuredContent"]["entity"]
    assert entity["key"] == "alice" and entity["createdBy"] == "person:one@example.com"
    assert json.loads(result["content"][0]["text"]) == result["structuredContent"]
    assert result["content"][0]["type"] == "text" and result["isError"] is False
    assert _header(response, b"server-timing") == "brainy;dur=%.3f" % result["_meta"]["ms"]
    counts = http.call("brainy_counts", {"brain": "notes"})["result"]["structuredContent"]
    assert counts["entities"] == 1


def test_a_door_refusal_is_an_is_error_result_with_the_class_in_structured_content(app):
    """FleetNotConfiguredError (host.move without --fleet), InProcessOnlyError, ForbiddenError (a brain the
    key does not reach; a service-key door) and InvalidArgumentError (the door's own argument rule) all come
    back as results flagged isError, {"error": {name, message, ...fields}} in structuredContent and the same
    as JSON text, never as JSON-RPC errors."""
    http = opened(app)
    # host.move (the last door to land) opens to the service key, over its own session
    moving = D.BY_NAME["host.move"]
    service = opened(app, SERVICE_KEY)
    pending_call = (moving.mcp_tool, {"brain": "notes", "body": {"node": "b"}})
    cases = [
        ("brainy_use", {"body": {}}, "InProcessOnlyError"),
        ("brainy_counts", {"brain": "other"}, "ForbiddenError"),
        ("brainy_stats", {}, "ForbiddenError"),
        ("brainy_get", {"id": "x", "body": {"bogus": True}}, "InvalidArgumentError"),
    ]
    for tool, arguments, name in cases:
        reply = http.call(tool, arguments)
        assert "error" not in reply, (tool, reply)
        result = reply["result"]
        assert result["isError"] is True, (tool, result)
        assert result["structuredContent"]["error"]["name"] == name, (tool, result)
        assert json.loads(result["content"][0]["text"]) == result["structuredContent"]
    refusal = service.call(*pending_call)["result"]
    assert refusal["isError"] is True and json.loads(refusal["content"][0]["text"]) == refusal["structuredContent"]
    assert refusal["structuredContent"]["error"]["name"] == "FleetNotConfiguredError"


def test_protocol_errors_are_kept_for_the_malformed(app):
    """An unknown tool, a missing argument (id, a required body), an argument the tool does not take, an
    argument of the wrong type and an unknown method are JSON-RPC errors, not tool results."""
    http = opened(app)
    for params, code in [
        ({"name": "brainy_nosuch", "arguments": {}}, M.INVALID_PARAMS),
        ({"name": "brainy_get", "arguments": {}}, M.INVALID_PARAMS),
        ({"name": "brainy_add", "arguments": {}}, M.INVALID_PARAMS),
        ({"name": "brainy_counts", "arguments": {"colour": "red"}}, M.INVALID_PARAMS),
        ({"name": "brainy_get", "arguments": {"id": 7}}, M.INVALID_PARAMS),
        ({"name": "brainy_add", "arguments": {"body": "type=person"}}, M.INVALID_PARAMS),
        ({"arguments": {}}, M.INVALID_PARAMS),
    ]:
        reply = http.request("tools/call", params)
        assert reply["error"]["code"] == code, (params, reply)
    assert http.request("prompts/list").get("error", {}).get("code") == M.METHOD_NOT_FOUND


def test_a_key_reaching_two_brains_must_name_brain(app):
    """Seed 001: a key reaching several brains names one in every tools/call; a call naming none is a parameter
    error that lists the brains; naming one reaches it; resources/list is empty for such a key and its
    instructions name both brains."""
    http = opened(app, TWO_KEY)
    reply = http.call("brainy_counts", {})
    assert reply["error"]["code"] == M.INVALID_PARAMS and "brain" in reply["error"]["message"]
    assert reply["error"]["data"] == {"brains": ["notes", "other"]}
    for brain in ("notes", "other"):
        assert http.call("brainy_counts", {"brain": brain})["result"]["structuredContent"]["brain"] == brain
    assert http.request("resources/list")["result"] == {"resources": []}
    again = Http(app, TWO_KEY)
    instructions = json.loads(again.post({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT}).body)[
        "result"
    ]["instructions"]
    assert "2 brains (`notes`, `other`)" in instructions


def test_resources_are_the_templates_whose_door_answers_and_read_through_it(app):
    """resources/templates/list offers DOORS.md 0.7's templates whose door is native (no relation resource, no
    template for a door that is not there yet); resources/list names the one brain's census; reading the
    census and an entity calls counts and get; an entity id travels percent-encoded; a refusal on a read is a
    JSON-RPC error (resources are the application's, not the model's) with the refusal in data."""
    http = opened(app)
    http.call("brainy_add", {"body": {"type": "document", "id": "a/b", "data": "slashed"}})
    templates = http.request("resources/templates/list")["result"]["resourceTemplates"]
    offered = [t.template for t in M.RESOURCE_TEMPLATES if D.BY_NAME[t.door].native]
    assert [t["uriTemplate"] for t in templates] == offered
    assert "brainy://{brain}/counts" in offered and "brainy://{brain}/entities/{id}" in offered
    assert not any("relation" in t for t in offered)
    assert ("brainy://skills/{path}" in offered) == D.BY_NAME["readFile"].native
    assert http.request("resources/list")["result"]["resources"][0]["uri"] == "brainy://notes/counts"
    read = http.request("resources/read", {"uri": "brainy://notes/counts"})["result"]
    assert read["contents"][0]["mimeType"] == "application/json"
    assert json.loads(read["contents"][0]["text"])["entities"] == 1
    read = http.request("resources/read", {"uri": "brainy://notes/entities/a%2Fb"})["result"]
    assert json.loads(read["contents"][0]["text"])["entity"]["key"] == "a/b"
    refused = http.request("resources/read", {"uri": "brainy://other/counts"})["error"]
    assert refused["code"] == M.INVALID_PARAMS and refused["data"]["name"] == "ForbiddenError"
    for uri in ("brainy://notes/relations/r1", "https://example.com/x", "brainy://notes"):
        refused = http.request("resources/read", {"uri": uri})["error"]
        assert refused["code"] == M.INVALID_PARAMS and refused["data"] == {"uri": uri}


def test_a_notification_or_response_is_accepted_with_202_and_no_body(app):
    """2025-06-18: a notification or a response POSTed is 202 Accepted with no body."""
    http = opened(app)
    for doc in (
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}},
        {"jsonrpc": "2.0", "id": 3, "result": {}},
    ):
        got = http.post(doc)
        assert (got.status, got.body) == (202, b"")


def test_sessions_are_bounded_and_expire(tmp_path):
    """Opening a session past the cap forgets the one idle longest; a session idle past the limit is gone."""
    init_store(tmp_path / "notes")
    pool = Pool({"notes": tmp_path / "notes"})
    principal = Principal.static_key("person:p@example.com", frozenset({"notes"}))
    http = M.StreamableHttp(M.McpServer(Dispatcher(pool)), lambda h: principal, max_sessions=3, idle_seconds=10.0)
    body = orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT})
    ids = []
    for now in range(5):
        reply = http.handle("POST", {}, body, float(now))
        ids.append(dict(reply.headers)[b"mcp-session-id"].decode())
    assert list(http.sessions) == ids[2:]
    ping = orjson.dumps({"jsonrpc": "2.0", "id": 2, "method": "ping"})
    assert http.handle("POST", {"mcp-session-id": ids[4]}, ping, 5.0).status == 200
    assert http.handle("POST", {"mcp-session-id": ids[3]}, ping, 14.5).status == 404
    pool.close_all()


# -- stdio framing ------------------------------------------------------------------------------------


def test_stdio_framing_reads_lines_whole_and_refuses_the_unreadable_once():
    """Lines split anywhere are read whole; blank lines are skipped; a line that is not JSON is reported once;
    a line over the limit is consumed to its end and reported once, never half-read; frames out are one line
    each with no newline inside."""
    framing = M.StdioFraming(max_line=64)
    events = framing.receive_data(b'{"a":1}\n\n{"b"')
    assert events == [M.LineReceived({"a": 1})]
    events = framing.receive_data(b":2}\nnope\n" + b"x" * 100)
    assert events[0] == M.LineReceived({"b": 2})
    assert events[1].refusal.name == "BodyDecodeError"
    assert events[2].refusal.name == "PayloadTooLargeError"
    assert framing.receive_data(b"y" * 100) == []
    assert framing.receive_data(b'zz\n{"c":3}\n') == [M.LineReceived({"c": 3})]
    framing.send({"text": "two\nlines"})
    out = framing.data_to_send()
    assert out.count(b"\n") == 1 and out.endswith(b"\n") and framing.data_to_send() == b""


def test_stdio_stops_reading_while_sixty_four_answers_are_owed():
    """Back-pressure over stdio: each message whose answer waits (a write's commit) is a task, and while
    MAX_PENDING of them are owed stdin is read no further (``room`` is clear, the reader thread waits on it),
    so a client pipelining writes faster than they commit fills the pipe, not this process's memory (the
    fuzzer's stdio run grew by what it had queued); reading resumes once half are answered, and every answer
    is written."""
    from brainy.host.dispatch import Outcome
    from brainy.net.mcp import stdio_glue

    owed: list[asyncio.Future[Outcome]] = []

    class Waiting:
        def exchange(self, session, authenticate, message):
            owed.append(asyncio.get_running_loop().create_future())
            return owed[-1]

    written: list[bytes] = []

    async def run() -> None:
        stdio = stdio_glue.StdioServer(Waiting(), lambda: None, written.append)  # type: ignore[arg-type]
        lines = b"".join(b'{"jsonrpc":"2.0","id":%d,"method":"ping"}\n' % i for i in range(stdio_glue.MAX_PENDING))
        stdio.receive(lines[: len(lines) // 2])
        assert stdio.room.is_set()
        stdio.receive(lines[len(lines) // 2 :])
        assert len(stdio.pending) == stdio_glue.MAX_PENDING and not stdio.room.is_set()
        for i, future in enumerate(owed[: stdio_glue.MAX_PENDING // 2]):
            future.set_result(Outcome("server.mcp", 0.1, {"jsonrpc": "2.0", "id": i, "result": {}}))
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        assert stdio.room.is_set() and len(stdio.pending) == stdio_glue.MAX_PENDING // 2
        for i, future in enumerate(owed):
            if not future.done():
                future.set_result(Outcome("server.mcp", 0.1, {"jsonrpc": "2.0", "id": i, "result": {}}))
        await stdio.drain()

    asyncio.run(run())
    replies = [json.loads(line) for line in b"".join(written).splitlines()]
    assert sorted(r["id"] for r in replies) == list(range(stdio_glue.MAX_PENDING))


def test_the_stdin_reader_waits_for_room_before_each_read():
    """The reader thread reads a chunk only while ``room`` is set: with it clear, bytes in the pipe stay there."""
    import os
    import threading

    from brainy.net.mcp import stdio_glue

    read, write = os.pipe()
    got: list[bytes | None] = []
    seen = threading.Event()
    room = threading.Event()

    class Loop:
        def call_soon_threadsafe(self, feed, chunk):
            feed(chunk)

    def feed(chunk):
        got.append(chunk)
        seen.set()

    try:
        thread = threading.Thread(target=stdio_glue._reader, args=(Loop(), feed, room, read), daemon=True)
        thread.start()
        os.write(write, b"one\n")
        assert not seen.wait(0.3) and got == []
        room.set()
        assert seen.wait(5) and got == [b"one\n"]
        os.close(write)
        write = -1
        thread.join(5)
        assert got == [b"one\n", None]
    finally:
        if write >= 0:
            os.close(write)
        os.close(read)
