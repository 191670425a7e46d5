"""MCP at ``/mcp/{objective}`` (``seif serve --mcp``): its HTTP boundary, spoken raw.

Every refusal is a clear HTTP or JSON-RPC error (never a 5xx, never a JSON-RPC internal error,
never a silent ``202`` for a request that is owed an answer) and nothing is dispatched: the
executor's counts stay at zero until the last test makes one ordinary call. Both protocol
styles are spoken where they differ:

- ``session``: the ``2025-11-25`` handshake (``initialize``, then ``Mcp-Session-Id`` and
  ``MCP-Protocol-Version`` on every request; the SDK answers requests as SSE events);
- ``stateless``: ``2026-07-28`` (``MCP-Protocol-Version``, ``Mcp-Method`` and ``Mcp-Name``
  headers, the protocol version, client info and capabilities in ``params._meta``; plain
  JSON answers), as the official client 2.3.0 sends it in its default ``auto`` mode.

One runtime (MCP mounted, in a thread of its own) serves the whole module; the CLI tests run
``seif serve`` in process or as a subprocess.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import gzip
import json
import logging
import os
import re
import threading
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import aiohttp
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp.shared.inbound import encode_header_value
from multidict import CIMultiDict

from seif.cli import build_parser, main
from servers.mcp.app import McpOptions
from servers.wire.limits import MAX_BODY_BYTES
from tests.support.runtime_harness import (
    APP_TOKEN,
    CREDENTIALS,
    ENV,
    EXECUTOR,
    OPERATOR_TOKEN,
    OTHER_APP_TOKEN,
    PROPOSAL,
    READ_ARGS,
    READER_TOKEN,
    TOOL_TOKENS,
    Stack,
    Threaded,
    ThreadedStack,
    listening,
    runtime_stack,
    serving,
    start_serve,
    stop,
    write_config,
)

SESSION_REVISION = "2025-11-25"
STATELESS_REVISION = "2026-07-28"
STYLES = ("session", "stateless")
ACCEPT = "application/json, text/event-stream"
AUTHORING = "/mcp/authoring?consumer=course-authoring"
LEARNER = "/mcp/learner"
CALL_ID = "io.seif/callId"
COORDINATES = ("consumer", "environment", "deployment")
CONTEXT_REF = "io.seif/contextRef"
PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS = -32700, -32600, -32601, -32602
INTERNAL_ERROR, HEADER_MISMATCH, UNSUPPORTED_REVISION = -32603, -32020, -32022
ENVELOPE: dict[str, Any] = {
    "io.modelcontextprotocol/protocolVersion": STATELESS_REVISION,
    "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {},
}
INITIALIZE: dict[str, Any] = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": SESSION_REVISION,
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    },
}
EXECUTE_ONLY_TOKEN = "execute-only-token-7a1c3e5b9d"  # tools.execute without context.resolve
CREDENTIALS_HERE: dict[str, Any] = {
    "credentials": [
        *CREDENTIALS["credentials"],
        {
            "id": "execute-only",
            "tokenRef": "env:SEIF_EXECUTE_ONLY_TOKEN",
            "scopes": ["tools.execute"],
        },
    ]
}
ENV_HERE = {**ENV, "SEIF_EXECUTE_ONLY_TOKEN": EXECUTE_ONLY_TOKEN}
REQUIRED_ARGUMENTS = frozenset({"ref", "query", "limit", "target", "kind", "summary"})
"""Every required parameter of the reference tools: arguments without them never validate."""
DISPATCH_COUNTS = ("requests", "executions", "byCallId", "proposals")
NOTHING_DISPATCHED = {"requests": {}, "executions": {}, "byCallId": {}, "proposals": 0}
TIMEOUT = aiohttp.ClientTimeout(total=20)


# --- answers -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Answer:
    """One HTTP answer as it came off the wire."""

    status: int
    headers: Mapping[str, str]
    body: bytes

    @property
    def content_type(self) -> str:
        return self.headers.get("Content-Type", "")

    def messages(self) -> list[Any]:
        """The JSON-RPC messages it carries: its JSON body, or the data of its SSE events."""
        if self.content_type.startswith("text/event-stream"):
            found = []
            for event in self.body.decode().replace("\r\n", "\n").split("\n\n"):
                data = [ln[5:].lstrip() for ln in event.split("\n") if ln.startswith("data:")]
                if data and any(data):
                    found.append(json.loads("\n".join(data)))
            return found
        if self.content_type.startswith("application/json") and self.body.strip():
            return [json.loads(self.body)]
        return []

    def error(self) -> dict[str, Any]:
        """The JSON-RPC error it answers with (an assertion error if it has none)."""
        errors = [m["error"] for m in self.messages() if isinstance(m, dict) and "error" in m]
        assert len(errors) == 1, self
        found: dict[str, Any] = errors[0]
        return found

    def result(self) -> dict[str, Any]:
        """The JSON-RPC result it answers with (an assertion error if it has none)."""
        results = [m["result"] for m in self.messages() if isinstance(m, dict) and "result" in m]
        assert len(results) == 1, self
        found: dict[str, Any] = results[0]
        return found

    def __str__(self) -> str:
        return f"{self.status} {self.content_type} {self.body[:400]!r}"


def assert_clear(answer: Answer) -> None:
    """No 5xx, and no JSON-RPC internal error hidden in a 200 (or in an SSE event)."""
    assert answer.status < 500, answer
    for message in answer.messages():
        if isinstance(message, dict) and isinstance(message.get("error"), dict):
            assert message["error"].get("code") != INTERNAL_ERROR, answer


def assert_rpc_error(answer: Answer, code: int, *statuses: int) -> dict[str, Any]:
    """A JSON-RPC error of ``code``, in an answer of one of ``statuses``."""
    assert_clear(answer)
    assert answer.status in statuses, answer
    error = answer.error()
    assert error["code"] == code, answer
    assert isinstance(error.get("message"), str) and error["message"], answer
    return error


def assert_http_error(answer: Answer, status: int, code: str | None = None) -> None:
    """seif's own HTTP error (``{"error": {"code", "message"}}``) of ``status``."""
    assert answer.status == status, answer
    if code is not None:
        body = json.loads(answer.body)
        assert body["error"]["code"] == code, answer
        assert body["error"]["message"], answer


# --- requests ------------------------------------------------------------------------------

Headers = Mapping[str, str] | Sequence[tuple[str, str]]


def base_headers(token: str | None = APP_TOKEN) -> dict[str, str]:
    found = {"Accept": ACCEPT, "Content-Type": "application/json"}
    if token is not None:
        found["Authorization"] = f"Bearer {token}"
    return found


def session_headers(session: str, token: str | None = APP_TOKEN) -> dict[str, str]:
    return {
        **base_headers(token),
        "Mcp-Session-Id": session,
        "MCP-Protocol-Version": SESSION_REVISION,
    }


def stateless_headers(message: Any, token: str | None = APP_TOKEN) -> dict[str, str]:
    """The headers the official client sends with ``message`` at ``2026-07-28``: the revision,
    the method and (for ``tools/call``) the tool's name."""
    found = {**base_headers(token), "MCP-Protocol-Version": STATELESS_REVISION}
    method = message.get("method") if isinstance(message, dict) else None
    if isinstance(method, str) and method.isascii() and method.isprintable():
        found["Mcp-Method"] = method
    params = message.get("params") if isinstance(message, dict) else None
    name = params.get("name") if isinstance(params, dict) else None
    if isinstance(name, str):
        found["Mcp-Name"] = encode_header_value(name)
    return found


def rpc(method: str, params: Any = None, ident: Any = 1, *, style: str = "session") -> Any:
    """A JSON-RPC request; in the ``stateless`` style its params carry the envelope."""
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": ident, "method": method}
    if style == "stateless":
        params = dict(params or {})
        params["_meta"] = {**ENVELOPE, **params.get("_meta", {})}
    if params is not None:
        message["params"] = params
    return message


def dump(value: Any) -> bytes:
    return json.dumps(value, allow_nan=False).encode()


@dataclass
class Boundary:
    """The module's runtime (MCP mounted) and a way to speak raw HTTP to it."""

    threaded: ThreadedStack
    _session: str | None = field(default=None)

    @property
    def stack(self) -> Stack:
        return self.threaded.stack

    def send(
        self,
        method: str,
        path: str,
        data: bytes | None = None,
        headers: Headers | None = None,
        *,
        skip: Sequence[str] = (),
        base: str | None = None,
    ) -> Answer:
        async def sending() -> Answer:
            async with self.stack.http.request(
                method,
                (base or self.stack.runtime) + path,
                data=data,
                headers=CIMultiDict(headers or {}),
                skip_auto_headers=skip,
                timeout=TIMEOUT,
            ) as r:
                return Answer(r.status, r.headers, await r.read())

        return self.threaded.run(sending())

    def post(self, path: str, message: Any, headers: Headers, **kw: Any) -> Answer:
        return self.send("POST", path, dump(message), headers, **kw)

    def open_session(self, path: str = AUTHORING, token: str = APP_TOKEN) -> str:
        """A new ``2025-11-25`` session (initialized) of ``token``'s credential at ``path``."""
        opened = self.post(path, INITIALIZE, base_headers(token))
        assert opened.status == 200, opened
        assert opened.result()["protocolVersion"] == SESSION_REVISION, opened
        session = opened.headers["Mcp-Session-Id"]
        initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        assert self.post(path, initialized, session_headers(session, token)).status == 202
        return session

    @property
    def session(self) -> str:
        """The module's shared session at :data:`AUTHORING` (opened on first use)."""
        if self._session is None:
            self._session = self.open_session()
        return self._session

    def headers_for(
        self, style: str, message: Any, token: str | None = APP_TOKEN
    ) -> dict[str, str]:
        if style == "session":
            return session_headers(self.session, token)
        return stateless_headers(message, token)

    def stats(self) -> dict[str, Any]:
        return self.threaded.run(self.stack.stats())

    def dispatched(self) -> dict[str, Any]:
        """What the executor was asked to run (its describes are not dispatches)."""
        stats = self.stats()
        return {k: stats[k] for k in DISPATCH_COUNTS}


QUICK = McpOptions(approval_wait_s=1.0)


@asynccontextmanager
async def boundary_stack(root: Path, options: McpOptions = QUICK) -> AsyncIterator[Stack]:
    """The reference executor and a runtime with MCP mounted (by default with an approval
    wait of 1 s, on loopback), with the harness's credentials and one that may execute but
    not resolve."""
    executor_app = EXECUTOR.create_app(tokens=TOOL_TOKENS, knobs={})
    async with serving(executor_app) as executor_url:
        config = write_config(root, executor_url, credentials=CREDENTIALS_HERE)
        async with runtime_stack(
            config, executor_url, executor_app, env=ENV_HERE, mcp=options
        ) as stack:
            yield stack


@contextlib.contextmanager
def stack_in_a_thread(root: Path, options: McpOptions = QUICK) -> Iterator[ThreadedStack]:
    """:func:`boundary_stack` on an event loop of a thread of its own, entered and left in
    one task (the SDK's session managers run anyio task groups, which must be)."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="mcp-boundary", daemon=True)
    thread.start()
    ready: concurrent.futures.Future[tuple[Stack, asyncio.Event]] = concurrent.futures.Future()

    async def hold() -> None:
        leave = asyncio.Event()
        async with boundary_stack(root, options) as stack:
            ready.set_result((stack, leave))
            await leave.wait()

    held = asyncio.run_coroutine_threadsafe(hold(), loop)
    try:
        either: list[concurrent.futures.Future[Any]] = [ready, held]
        concurrent.futures.wait(either, 60, concurrent.futures.FIRST_COMPLETED)
        if not ready.done():
            held.result(0)  # its failure, or a timeout
        stack, leave = ready.result(0)
        try:
            yield Threaded(stack, loop)
        finally:
            loop.call_soon_threadsafe(leave.set)
            held.result(60)
            asyncio.run_coroutine_threadsafe(cancel_the_rest(), loop).result(10)
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


async def cancel_the_rest() -> None:
    """Tasks left on the loop (sse_starlette's shutdown watcher polls for good)."""
    rest = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    for task in rest:
        task.cancel()
    await asyncio.gather(*rest, return_exceptions=True)


@pytest.fixture(scope="module")
def mcp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Boundary]:
    with stack_in_a_thread(tmp_path_factory.mktemp("mcp-boundary")) as threaded:
        yield Boundary(threaded)


# --- the body: JSON, one object, a JSON-RPC envelope -----------------------------------------

NOT_STRICT_JSON = [
    pytest.param(b"", id="empty"),
    pytest.param(b"   \n", id="whitespace"),
    pytest.param(b"{", id="truncated"),
    pytest.param(b'{"jsonrpc":"2.0","id":1,"method":"tools/list",}', id="trailing-comma"),
    pytest.param(b"{'jsonrpc':'2.0'}", id="single-quotes"),
    pytest.param(b"\xff\xfe{}", id="not-utf8"),
    pytest.param(
        b'{"jsonrpc":"2.0","jsonrpc":"2.0","id":1,"method":"tools/list"}', id="duplicate-key"
    ),
    pytest.param(
        b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":'
        b'{"name":"inspect_context","arguments":{"ref":"a","ref":"b"}}}',
        id="duplicate-nested-key",
    ),
    pytest.param(b'{"jsonrpc":"2.0","id":NaN,"method":"tools/list"}', id="nan"),
    pytest.param(b'{"jsonrpc":"2.0","id":1,"method":"tools/list","x":Infinity}', id="infinity"),
    pytest.param(b'{"jsonrpc":"2.0","id":1e999,"method":"tools/list"}', id="huge-number"),
    pytest.param(b'{"jsonrpc":"2.0","id":"\\ud800","method":"tools/list"}', id="lone-surrogate"),
    pytest.param(b'{"a":' * 80 + b"1" + b"}" * 80, id="too-deep"),
    pytest.param(b'{"jsonrpc":"2.0"} {"jsonrpc":"2.0"}', id="two-documents"),
]


@pytest.mark.parametrize("style", STYLES)
@pytest.mark.parametrize("body", NOT_STRICT_JSON)
def test_a_body_that_is_not_strict_json_is_a_parse_error(
    mcp: Boundary, style: str, body: bytes
) -> None:
    answer = mcp.send("POST", AUTHORING, body, mcp.headers_for(style, None))
    assert_rpc_error(answer, PARSE_ERROR, 400)
    assert answer.messages()[0]["id"] is None


@pytest.mark.parametrize("style", STYLES)
@pytest.mark.parametrize(
    "value",
    [
        pytest.param([INITIALIZE], id="batch-of-initialize"),
        pytest.param([rpc("tools/list"), rpc("tools/list", ident=2)], id="batch-of-two"),
        pytest.param([], id="empty-batch"),
        pytest.param(1, id="number"),
        pytest.param("tools/list", id="string"),
        pytest.param(None, id="null"),
        pytest.param(True, id="true"),
    ],
)
def test_a_batch_or_a_non_object_is_an_invalid_request(
    mcp: Boundary, style: str, value: Any
) -> None:
    answer = mcp.post(AUTHORING, value, mcp.headers_for(style, value))
    assert_rpc_error(answer, INVALID_REQUEST, 400)


BAD_ENVELOPES = [
    pytest.param({"id": 7, "method": "tools/list"}, id="no-jsonrpc"),
    pytest.param({"jsonrpc": "1.0", "id": 7, "method": "tools/list"}, id="jsonrpc-1.0"),
    pytest.param({"jsonrpc": 2, "id": 7, "method": "tools/list"}, id="jsonrpc-number"),
    pytest.param({"jsonrpc": "2.0", "id": 7}, id="no-method"),
    pytest.param({"jsonrpc": "2.0", "id": 7, "method": 5}, id="method-number"),
    pytest.param({"jsonrpc": "2.0", "id": 7, "method": None}, id="method-null"),
    pytest.param({}, id="empty-object"),
]


@pytest.mark.parametrize("style", STYLES)
@pytest.mark.parametrize("message", BAD_ENVELOPES)
def test_a_message_without_a_valid_envelope_is_an_invalid_request(
    mcp: Boundary, style: str, message: dict[str, Any]
) -> None:
    """JSON-RPC 2.0 section 5.1: a JSON value that is not a valid request object is -32600."""
    if style == "stateless" and isinstance(message.get("method"), str):
        message = {**message, "params": {"_meta": ENVELOPE}}
    answer = mcp.post(AUTHORING, message, mcp.headers_for(style, message))
    assert_rpc_error(answer, INVALID_REQUEST, 400)


@pytest.mark.parametrize("style", STYLES)
@pytest.mark.parametrize(
    "ident",
    [
        pytest.param(None, id="null"),
        pytest.param(1.5, id="fraction"),
        pytest.param(True, id="true"),
        pytest.param({}, id="object"),
        pytest.param([1], id="array"),
    ],
)
def test_a_request_whose_id_is_not_a_string_or_an_integer_is_refused_not_dropped(
    mcp: Boundary, style: str, ident: Any
) -> None:
    """MCP: a request id is a string or an integer, never null. A message with an ``id``
    member is a request (JSON-RPC 2.0 section 4.1), owed an answer: a ``202`` (as for a
    notification) would leave the client waiting for one that never comes."""
    message = rpc("tools/list", ident=ident, style=style)
    answer = mcp.post(AUTHORING, message, mcp.headers_for(style, message))
    assert answer.status != 202, f"a request with id {ident!r} was taken for a notification"
    assert_rpc_error(answer, INVALID_REQUEST, 400)


@pytest.mark.parametrize("style", STYLES)
@pytest.mark.parametrize(
    "method", ["no/such-method", "resources/list", "prompts/list", "notifications/initialized"]
)
def test_an_unknown_method_is_method_not_found(mcp: Boundary, style: str, method: str) -> None:
    """Resources and prompts are not served; a notification's method sent as a request
    (with an id) is not a request method either."""
    message = rpc(method, style=style)
    answer = mcp.post(AUTHORING, message, mcp.headers_for(style, message))
    # with a session the SDK answers in an SSE event; without, 404 as the 2026 revision says
    assert_rpc_error(answer, METHOD_NOT_FOUND, 200 if style == "session" else 404)


BAD_CALL_IDS = [
    pytest.param(5, id="number"),
    pytest.param("", id="empty"),
    pytest.param("x" * 257, id="257-chars"),
    pytest.param(True, id="true"),
    pytest.param(["c1"], id="array"),
    pytest.param({"id": "c1"}, id="object"),
]


@pytest.mark.parametrize("style", STYLES)
@pytest.mark.parametrize("call_id", BAD_CALL_IDS)
def test_a_bad_seif_call_id_is_invalid_params_and_nothing_runs(
    mcp: Boundary, style: str, call_id: Any
) -> None:
    """The arguments are valid: the call id alone refuses the call."""
    params = {"name": "inspect_context", "arguments": READ_ARGS, "_meta": {CALL_ID: call_id}}
    message = rpc("tools/call", params, style=style)
    answer = mcp.post(AUTHORING, message, mcp.headers_for(style, message))
    error = assert_rpc_error(answer, INVALID_PARAMS, 200 if style == "session" else 400)
    assert CALL_ID in error["message"]
    assert mcp.dispatched() == NOTHING_DISPATCHED


WRONG_PARAMS = [
    pytest.param("tools/call", [1], id="call-params-array"),
    pytest.param("tools/call", "inspect_context", id="call-params-string"),
    pytest.param("tools/call", {}, id="call-without-name"),
    pytest.param("tools/call", {"name": 5}, id="call-name-number"),
    pytest.param("tools/call", {"name": None, "arguments": READ_ARGS}, id="call-name-null"),
    pytest.param(
        "tools/call", {"name": "inspect_context", "arguments": "x"}, id="call-arguments-string"
    ),
    pytest.param(
        "tools/call", {"name": "inspect_context", "arguments": [READ_ARGS]}, id="call-args-array"
    ),
    pytest.param(
        "tools/call",
        {"name": "inspect_context", "arguments": READ_ARGS, "_meta": "c1"},
        id="call-meta-string",
    ),
    pytest.param(
        "tools/call",
        {"name": "inspect_context", "arguments": READ_ARGS, "_meta": [{CALL_ID: "c1"}]},
        id="call-meta-array",
    ),
    pytest.param("tools/list", {"cursor": 5}, id="list-cursor-number"),
    pytest.param("tools/list", [None], id="list-params-array"),
]


@pytest.mark.parametrize("style", STYLES)
@pytest.mark.parametrize(("method", "params"), WRONG_PARAMS)
def test_params_of_the_wrong_type_are_refused_and_nothing_runs(
    mcp: Boundary, style: str, method: str, params: Any
) -> None:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": 3, "method": method, "params": params}
    meta = params.get("_meta", {}) if isinstance(params, dict) else None
    if style == "stateless" and isinstance(meta, dict):  # else the envelope is what is wrong
        message["params"] = {**params, "_meta": {**ENVELOPE, **meta}}
    answer = mcp.post(AUTHORING, message, mcp.headers_for(style, message))
    assert_clear(answer)
    assert answer.status in (200, 400), answer  # an SSE event with a session, else 400
    assert answer.error()["code"] in (INVALID_PARAMS, INVALID_REQUEST, HEADER_MISMATCH), answer
    assert mcp.dispatched() == NOTHING_DISPATCHED


@pytest.mark.parametrize("style", STYLES)
def test_a_call_of_a_tool_not_disclosed_or_with_invalid_arguments_runs_nothing(
    mcp: Boundary, style: str
) -> None:
    """Refused as the engine refuses them, as ``isError`` results (not JSON-RPC errors)."""
    for name, arguments, reason in [
        ("no_such_tool", {}, "TOOL_NOT_DISCLOSED"),
        ("inspect_context", {"depth": 1}, "ARGUMENTS_INVALID"),
        ("inspect_context", {**READ_ARGS, "extra": 1}, "ARGUMENTS_INVALID"),
    ]:
        message = rpc("tools/call", {"name": name, "arguments": arguments}, style=style)
        answer = mcp.post(AUTHORING, message, mcp.headers_for(style, message))
        assert_clear(answer)
        if answer.status == 200 and "result" in answer.messages()[0]:
            result = answer.result()
            assert result["isError"] is True, answer
            assert "structuredContent" not in result, answer
            assert result["_meta"]["io.seif/receipt"]["reason"] == reason, answer
        else:  # the SDK may refuse an unknown tool itself, as MCP says: -32602
            assert answer.error()["code"] == INVALID_PARAMS, answer
    assert mcp.dispatched() == NOTHING_DISPATCHED


@pytest.mark.parametrize("style", STYLES)
def test_stateless_routing_headers_that_disagree_with_the_body_are_refused(
    mcp: Boundary, style: str
) -> None:
    """``Mcp-Method``/``Mcp-Name`` missing, wrong or given twice (2026-07-28); in the session
    style an unknown revision header leaves the session path (refused, never served)."""
    call = rpc("tools/call", {"name": "inspect_context", "arguments": READ_ARGS}, style=style)
    if style == "session":
        unknown = {**mcp.headers_for(style, call), "MCP-Protocol-Version": "1999-01-01"}
        answer = mcp.post(AUTHORING, call, unknown)
        assert_clear(answer)
        assert answer.status == 400, answer
        return
    good = stateless_headers(call)
    variants: list[Headers] = [
        {k: v for k, v in good.items() if k != "Mcp-Method"},
        {**good, "Mcp-Method": "tools/list"},
        {**good, "Mcp-Name": "propose_change"},
        {**good, "MCP-Protocol-Version": "2099-01-01"},
        [*good.items(), ("Mcp-Method", "tools/call")],
    ]
    for headers in variants:
        answer = mcp.post(AUTHORING, call, headers)
        assert_clear(answer)
        assert answer.status == 400, answer
        assert answer.error()["code"] in (HEADER_MISMATCH, UNSUPPORTED_REVISION), answer
    missing = rpc("tools/call", {"name": "inspect_context", "arguments": READ_ARGS})
    answer = mcp.post(AUTHORING, missing, good)  # no envelope in _meta
    assert_rpc_error(answer, INVALID_PARAMS, 400)
    assert mcp.dispatched() == NOTHING_DISPATCHED


# --- the body's size and the media types ---------------------------------------------------


@pytest.mark.parametrize("style", STYLES)
def test_a_body_past_one_mib_is_413_however_it_is_framed(mcp: Boundary, style: str) -> None:
    headers = dict(mcp.headers_for(style, rpc("tools/list")))
    padded = rpc("tools/list", {"cursor": "x" * MAX_BODY_BYTES}, style=style)
    answer = mcp.post(AUTHORING, padded, headers)
    assert_http_error(answer, 413, "TOO_LARGE")

    async def chunks() -> AsyncIterator[bytes]:
        for _ in range(MAX_BODY_BYTES // 65536 + 2):
            yield b" " * 65536

    async def chunked() -> Answer:
        async with mcp.stack.http.post(
            mcp.stack.runtime + AUTHORING, data=chunks(), headers=headers, timeout=TIMEOUT
        ) as r:
            return Answer(r.status, r.headers, await r.read())

    assert_http_error(mcp.threaded.run(chunked()), 413, "TOO_LARGE")
    bomb = gzip.compress(b" " * (2 * MAX_BODY_BYTES))  # small on the wire, 2 MiB decoded
    answer = mcp.send("POST", AUTHORING, bomb, {**headers, "Content-Encoding": "gzip"})
    assert_http_error(answer, 413, "TOO_LARGE")
    at_limit = b" " * (MAX_BODY_BYTES - 2) + b"{}"  # exactly 1 MiB: read, then refused as JSON-RPC
    answer = mcp.send("POST", AUTHORING, at_limit, headers)
    assert answer.status == 400, answer
    assert mcp.dispatched() == NOTHING_DISPATCHED


@pytest.mark.parametrize("style", STYLES)
@pytest.mark.parametrize(
    "accept", ["text/html", "application/json", "text/event-stream", "image/*", None]
)
def test_an_accept_the_answer_cannot_meet_is_406(
    mcp: Boundary, style: str, accept: str | None
) -> None:
    message = rpc("tools/list", style=style)
    headers = {k: v for k, v in mcp.headers_for(style, message).items() if k != "Accept"}
    if accept is not None:
        headers["Accept"] = accept
    answer = mcp.post(AUTHORING, message, headers, skip=("Accept",))
    assert_clear(answer)
    if style == "stateless" and accept == "application/json":
        # a stateless request that asks for no progress is answered with JSON: JSON suffices
        assert answer.status == 200, answer
        assert answer.headers["Content-Type"].startswith("application/json")
        return
    assert answer.status == 406, answer


@pytest.mark.parametrize("style", STYLES)
@pytest.mark.parametrize(
    "content_type", ["text/plain", "application/x-www-form-urlencoded", "application/xml", None]
)
def test_a_content_type_that_is_not_json_is_a_clear_4xx(
    mcp: Boundary, style: str, content_type: str | None
) -> None:
    """The SDK's transport security refuses it (400 ``Invalid Content-Type header``)."""
    message = rpc("tools/call", {"name": "inspect_context", "arguments": READ_ARGS}, style=style)
    headers = {k: v for k, v in mcp.headers_for(style, message).items() if k != "Content-Type"}
    if content_type is not None:
        headers["Content-Type"] = content_type
    answer = mcp.post(AUTHORING, message, headers, skip=("Content-Type",))
    assert_clear(answer)
    assert answer.status in (400, 415), answer
    assert answer.body, answer
    assert mcp.dispatched() == NOTHING_DISPATCHED


# --- the credential ------------------------------------------------------------------------

BAD_AUTHORIZATION = [
    pytest.param(None, id="none"),
    pytest.param("Bearer wrong-token", id="wrong-token"),
    pytest.param("Bearer ", id="empty-token"),
    pytest.param(APP_TOKEN, id="no-scheme"),
    pytest.param(f"Basic {APP_TOKEN}", id="basic"),
    pytest.param(f"Bearer {APP_TOKEN}x", id="token-plus-one"),
    pytest.param(f"Bearer {APP_TOKEN[:-1]}", id="token-minus-one"),
]


@pytest.mark.parametrize("style", STYLES)
@pytest.mark.parametrize("authorization", BAD_AUTHORIZATION)
@pytest.mark.parametrize("method", ["POST", "GET", "DELETE"])
def test_a_missing_or_wrong_token_is_401_with_a_bearer_challenge(
    mcp: Boundary, style: str, authorization: str | None, method: str
) -> None:
    message = INITIALIZE if style == "session" else rpc("tools/list", style=style)
    headers = {
        k: v for k, v in mcp.headers_for(style, message).items() if k.lower() != "authorization"
    }
    if authorization is not None:
        headers["Authorization"] = authorization
    data = dump(message) if method == "POST" else None
    for path in (AUTHORING, "/mcp/no-such-objective"):  # the objective is not told before
        answer = mcp.send(method, path, data, headers)
        assert_http_error(answer, 401, "UNAUTHENTICATED")
        assert answer.headers.get("WWW-Authenticate", "").startswith("Bearer"), answer


@pytest.mark.parametrize("style", STYLES)
@pytest.mark.parametrize(
    ("token", "lacking"),
    [
        pytest.param(READER_TOKEN, "tools.execute", id="resolve-only"),
        pytest.param(EXECUTE_ONLY_TOKEN, "context.resolve", id="execute-only"),
        pytest.param(OPERATOR_TOKEN, "context.resolve", id="traces-only"),
    ],
)
def test_a_credential_lacking_a_scope_is_403(
    mcp: Boundary, style: str, token: str, lacking: str
) -> None:
    for message in (
        INITIALIZE if style == "session" else rpc("tools/list", style=style),
        rpc("tools/call", {"name": "inspect_context", "arguments": READ_ARGS}, style=style),
    ):
        headers = {**mcp.headers_for(style, message), "Authorization": f"Bearer {token}"}
        answer = mcp.post(AUTHORING, message, headers)
        assert_http_error(answer, 403, "FORBIDDEN")
        assert lacking in json.loads(answer.body)["error"]["message"]
    assert mcp.dispatched() == NOTHING_DISPATCHED


# --- the path and the query ----------------------------------------------------------------


@pytest.mark.parametrize("style", STYLES)
@pytest.mark.parametrize("method", ["POST", "GET", "DELETE"])
def test_an_unknown_objective_is_404(mcp: Boundary, style: str, method: str) -> None:
    message = INITIALIZE if style == "session" else rpc("tools/list", style=style)
    data = dump(message) if method == "POST" else None
    for objective in ("no-such-objective", "AUTHORING", "authoring%20", "..%2Fv1"):
        answer = mcp.send(method, f"/mcp/{objective}", data, mcp.headers_for(style, message))
        assert_http_error(answer, 404, "OBJECTIVE_UNKNOWN")
    for path in ("/mcp/", "/mcp", "/mcp/authoring/tools"):  # no such route
        answer = mcp.send(method, path, data, mcp.headers_for(style, message))
        assert_clear(answer)
        assert answer.status in (404, 405), answer


@pytest.mark.parametrize("style", STYLES)
@pytest.mark.parametrize(
    "query",
    [
        pytest.param("consumer=course-authoring&objective=learner", id="unknown-objective-param"),
        pytest.param("consumer=course-authoring&x=1", id="unknown"),
        pytest.param("Consumer=course-authoring", id="wrong-case"),
        pytest.param("consumer=course-authoring&consumer=course-authoring", id="repeated-same"),
        pytest.param("consumer=course-authoring&consumer=tutor", id="repeated-other"),
        pytest.param("environment=test&environment=prod", id="repeated-environment"),
        pytest.param("consumer=", id="empty"),
        pytest.param("consumer", id="no-value"),
        pytest.param("consumer=" + "c" * 257, id="too-long"),
        pytest.param("deployment=" + "d" * 257, id="deployment-too-long"),
    ],
)
def test_an_unknown_repeated_or_bad_query_parameter_is_400(
    mcp: Boundary, style: str, query: str
) -> None:
    message = INITIALIZE if style == "session" else rpc("tools/list", style=style)
    answer = mcp.post(
        f"/mcp/authoring?{query}",
        message,
        base_headers() | ({} if style == "session" else stateless_headers(message)),
    )
    assert_http_error(answer, 400, "BAD_REQUEST")
    assert "Mcp-Session-Id" not in answer.headers


# --- sessions ------------------------------------------------------------------------------


def list_in_session(mcp: Boundary, session: str, path: str = AUTHORING, **kw: Any) -> Answer:
    return mcp.post(path, rpc("tools/list", ident=2), session_headers(session, **kw))


def assert_session_unknown(answer: Answer) -> None:
    assert_rpc_error(answer, INVALID_REQUEST, 404)


def test_a_session_does_not_cross_objectives(mcp: Boundary) -> None:
    session = mcp.open_session(AUTHORING)
    for path in (LEARNER, "/mcp/learner?consumer=course-authoring"):
        assert_session_unknown(list_in_session(mcp, session, path))
        assert_session_unknown(mcp.send("GET", path, None, session_headers(session)))
        assert_session_unknown(mcp.send("DELETE", path, None, session_headers(session)))
    learner = mcp.open_session(LEARNER)
    assert_session_unknown(list_in_session(mcp, learner, AUTHORING))
    for own, path in ((session, AUTHORING), (learner, LEARNER)):  # both still served
        assert list_in_session(mcp, own, path).status == 200


def test_a_session_does_not_cross_credentials(mcp: Boundary) -> None:
    session = mcp.open_session()
    for token in (OTHER_APP_TOKEN, EXECUTE_ONLY_TOKEN):
        answer = list_in_session(mcp, session, token=token)
        if token == EXECUTE_ONLY_TOKEN:
            assert_http_error(answer, 403, "FORBIDDEN")
            continue
        assert_session_unknown(answer)
        call = rpc("tools/call", {"name": "inspect_context", "arguments": READ_ARGS}, 3)
        assert_session_unknown(mcp.post(AUTHORING, call, session_headers(session, token)))
        assert_session_unknown(mcp.send("GET", AUTHORING, None, session_headers(session, token)))
        assert_session_unknown(mcp.send("DELETE", AUTHORING, None, session_headers(session, token)))
    owned = list_in_session(mcp, session)  # another credential's DELETE ended nothing
    assert owned.status == 200, owned
    assert owned.result()["tools"], owned
    assert mcp.dispatched() == NOTHING_DISPATCHED


def test_an_unknown_session_id_is_404(mcp: Boundary) -> None:
    for session in ("0" * 32, "not-a-session", "x" * 300, mcp.session.upper()):
        assert_session_unknown(list_in_session(mcp, session))
        assert_session_unknown(mcp.send("GET", AUTHORING, None, session_headers(session)))
        assert_session_unknown(mcp.send("DELETE", AUTHORING, None, session_headers(session)))


def test_the_session_id_of_a_refused_opening_is_never_a_session(mcp: Boundary) -> None:
    """Without a session id only ``initialize`` opens one: the SDK names a session in its
    400 to anything else, and that id must not be usable."""
    refused = mcp.post(AUTHORING, rpc("tools/list"), base_headers())
    assert_rpc_error(refused, INVALID_REQUEST, 400)
    named = refused.headers.get("Mcp-Session-Id")
    if named is not None:
        assert_session_unknown(list_in_session(mcp, named))
    bad = {**INITIALIZE, "params": {"protocolVersion": 5}}
    refused = mcp.post(AUTHORING, bad, base_headers())  # answered as an SSE event
    assert_rpc_error(refused, INVALID_PARAMS, 200, 400)
    named = refused.headers.get("Mcp-Session-Id")
    if named is not None:  # the SDK keeps it, but it serves nothing
        answer = list_in_session(mcp, named)
        assert_clear(answer)
        assert "result" not in answer.messages()[0], answer


def test_a_deleted_session_is_gone(mcp: Boundary) -> None:
    session = mcp.open_session()
    assert list_in_session(mcp, session).status == 200
    deleted = mcp.send("DELETE", AUTHORING, None, session_headers(session))
    assert deleted.status == 200, deleted
    assert_session_unknown(list_in_session(mcp, session))
    call = rpc("tools/call", {"name": "inspect_context", "arguments": READ_ARGS}, 3)
    assert_session_unknown(mcp.post(AUTHORING, call, session_headers(session)))
    assert_session_unknown(mcp.send("GET", AUTHORING, None, session_headers(session)))
    assert_session_unknown(mcp.send("DELETE", AUTHORING, None, session_headers(session)))
    reopened = mcp.post(AUTHORING, INITIALIZE, session_headers(session))  # not revived
    assert_session_unknown(reopened)
    assert mcp.dispatched() == NOTHING_DISPATCHED


def test_a_stateless_request_naming_a_session_uses_its_own_credential_s_context(
    mcp: Boundary,
) -> None:
    """The 2026-07-28 revision has no sessions: an ``Mcp-Session-Id`` header on such a
    request (here: another credential's session) never selects that session's context."""
    session = mcp.open_session()
    in_session = list_in_session(mcp, session).result()["_meta"][CONTEXT_REF]
    listing = rpc("tools/list", style="stateless")

    def stateless_context(token: str, *extra: tuple[str, str]) -> str:
        headers = [*stateless_headers(listing, token).items(), *extra]
        answer = mcp.post(AUTHORING, listing, headers)
        assert answer.status == 200, answer
        ref: str = answer.result()["_meta"][CONTEXT_REF]
        return ref

    other = stateless_context(OTHER_APP_TOKEN)
    other_naming = stateless_context(OTHER_APP_TOKEN, ("Mcp-Session-Id", session))
    own = stateless_context(APP_TOKEN)
    own_naming = stateless_context(APP_TOKEN, ("Mcp-Session-Id", session))
    assert other_naming == other != in_session
    assert own_naming == own != in_session


# --- HTTP methods --------------------------------------------------------------------------


@pytest.mark.parametrize("method", ["PUT", "PATCH", "OPTIONS", "HEAD", "TRACE"])
def test_other_http_methods_are_405(mcp: Boundary, method: str) -> None:
    for headers in (session_headers(mcp.session), stateless_headers(rpc("tools/list"))):
        answer = mcp.send(method, AUTHORING, b"{}" if method != "HEAD" else None, headers)
        assert answer.status == 405, answer
        if method != "HEAD":
            assert set(answer.headers["Allow"].split(",")) == {"GET", "POST", "DELETE"}, answer


async def opened_stream(mcp: Boundary, session: str) -> asyncio.Task[aiohttp.ClientResponse]:
    """A GET of ``session``'s SSE stream, under way (its answer may not have come yet)."""
    url = mcp.stack.runtime + AUTHORING
    task = asyncio.create_task(mcp.stack.http.get(url, headers=session_headers(session)))
    await asyncio.sleep(0.3)  # the request is in: the stream is the session's
    return task


async def leave(stream: asyncio.Task[aiohttp.ClientResponse]) -> None:
    """The client leaves its stream (whether or not its answer has begun)."""
    if stream.done() and not stream.cancelled() and stream.exception() is None:
        stream.result().close()
    stream.cancel()
    await asyncio.gather(stream, return_exceptions=True)


def test_a_get_stream_s_status_and_headers_come_at_once(mcp: Boundary) -> None:
    """An SSE stream's 200 and ``text/event-stream`` are sent when the stream opens, not
    with its first event (a client waiting for them would time out first: the SDK's first
    keep-alive ping comes after 15 s)."""
    session = mcp.open_session()

    async def headers_within(seconds: float) -> tuple[int, str] | None:
        stream = await opened_stream(mcp, session)
        try:
            await asyncio.wait_for(asyncio.shield(stream), seconds)
        except TimeoutError:
            return None
        finally:
            await leave(stream)
        response = stream.result()
        return response.status, response.headers.get("Content-Type", "")

    got = mcp.threaded.run(headers_within(3.0))
    assert got is not None, "no status and headers 3 s after GET opened the session's stream"
    status, content_type = got
    assert status == 200 and content_type.startswith("text/event-stream"), got


def test_get_opens_one_sse_stream_per_session_and_refuses_the_rest(mcp: Boundary) -> None:
    session = mcp.open_session()

    async def streams() -> tuple[Answer, Answer]:
        url = mcp.stack.runtime + AUTHORING
        first = await opened_stream(mcp, session)
        try:
            async with mcp.stack.http.get(url, headers=session_headers(session)) as second:
                again = Answer(second.status, second.headers, await second.read())
            wrong_accept = {**session_headers(session), "Accept": "application/json"}
            async with mcp.stack.http.get(url, headers=wrong_accept) as third:
                refused = Answer(third.status, third.headers, await third.read())
            return again, refused
        finally:
            await leave(first)

    again, refused = mcp.threaded.run(streams())
    assert_rpc_error(again, INVALID_REQUEST, 409)
    assert_rpc_error(refused, INVALID_REQUEST, 406)
    assert list_in_session(mcp, session).status == 200  # the session still serves
    no_session = mcp.send("GET", AUTHORING, None, base_headers())
    assert_rpc_error(no_session, INVALID_REQUEST, 400)
    no_session = mcp.send("DELETE", AUTHORING, None, base_headers())
    assert_rpc_error(no_session, INVALID_REQUEST, 400)


def test_get_and_delete_are_405_at_the_stateless_revision(mcp: Boundary) -> None:
    headers = stateless_headers(rpc("tools/list"))
    for method in ("GET", "DELETE"):
        answer = mcp.send(method, AUTHORING, None, headers)
        assert answer.status == 405, answer
        assert answer.headers.get("Allow") == "POST", answer


def test_a_client_leaving_its_sse_stream_then_deleting_its_session_logs_no_error(
    mcp: Boundary, caplog: pytest.LogCaptureFixture
) -> None:
    """A client that closes its GET stream and ends its session at once does nothing wrong:
    the runtime must not log an error (with a traceback) for it."""
    session = mcp.open_session()

    async def leave_then_delete() -> int:
        url = mcp.stack.runtime + AUTHORING
        await leave(await opened_stream(mcp, session))
        async with mcp.stack.http.delete(url, headers=session_headers(session)) as deleted:
            status = deleted.status
        await asyncio.sleep(0.6)  # past the bridge's disconnect poll
        return status

    with caplog.at_level(logging.INFO):
        assert mcp.threaded.run(leave_then_delete()) == 200
    assert error_logs(caplog) == []


def error_logs(caplog: pytest.LogCaptureFixture) -> list[str]:
    """Errors logged, and answers the access log records as 5xx (sent to nobody, perhaps)."""
    return [
        f"{r.name}: {r.getMessage()}"
        for r in caplog.records
        if r.levelno >= logging.ERROR
        or (r.name == "aiohttp.access" and re.search(r'" 5\d\d ', r.getMessage()))
    ]


@pytest.mark.parametrize("style", STYLES)
def test_a_client_leaving_before_its_answer_logs_no_internal_error(
    mcp: Boundary, style: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A call held for approval (the wait is 1 s here) whose client gives up after 0.3 s:
    nothing runs, and leaving is not an internal error of the runtime (neither logged as one
    nor answered, to nobody, with a 500)."""
    session = mcp.open_session() if style == "session" else ""
    params = {"name": "propose_change", "arguments": PROPOSAL, "_meta": {CALL_ID: f"gone-{style}"}}
    call = rpc("tools/call", params, 11, style=style)
    headers = session_headers(session) if style == "session" else stateless_headers(call)

    async def give_up() -> None:
        posted = mcp.stack.http.post(
            mcp.stack.runtime + AUTHORING, data=dump(call), headers=headers
        )
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(0.3), posted as r:
                await r.read()
        await asyncio.sleep(1.5)  # past the approval wait: the runtime answers nobody

    with caplog.at_level(logging.INFO):
        mcp.threaded.run(give_up())
    assert error_logs(caplog) == []
    assert mcp.dispatched() == NOTHING_DISPATCHED


def test_concurrent_requests_with_one_id_in_a_session_are_each_answered_as_asked(
    mcp: Boundary,
) -> None:
    """A client that reuses an id while the first request is in flight breaks MCP's rule,
    but each request is still answered within seconds: with its own method's result or
    with an error, never with another request's result, never left hanging."""
    session = mcp.open_session()
    listing = rpc("tools/list", ident=5)
    call = rpc("tools/call", {"name": "inspect_context", "arguments": {"depth": 1}}, 5)

    async def answered(message: Any) -> Answer | None:
        try:
            async with asyncio.timeout(3):
                url = mcp.stack.runtime + AUTHORING
                async with mcp.stack.http.post(
                    url, data=dump(message), headers=session_headers(session)
                ) as r:
                    return Answer(r.status, r.headers, await r.read())
        except TimeoutError:
            return None

    async def together() -> list[Answer | None]:
        return list(await asyncio.gather(*(answered(m) for m in (listing, listing, call))))

    answers = mcp.threaded.run(together())
    problems = []
    for message, answer in zip((listing, listing, call), answers, strict=True):
        if answer is None:
            problems.append(f"{message['method']}: no answer in 3 s")
            continue
        assert_clear(answer)
        (reply,) = answer.messages()
        if "result" in reply and ("tools" in reply["result"]) != (
            message["method"] == "tools/list"
        ):
            problems.append(f"{message['method']}: answered with another request's result")
    assert problems == [], [str(a) for a in answers]
    assert mcp.dispatched() == NOTHING_DISPATCHED


# --- anything at all as the body -----------------------------------------------------------

TEXT = st.text(max_size=12)
SAFE_KEYS = TEXT.filter(lambda k: k not in REQUIRED_ARGUMENTS)
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | TEXT
)
JSON_VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(SAFE_KEYS, inner, max_size=4),
    max_leaves=12,
)
SAFE_OBJECTS = st.dictionaries(SAFE_KEYS, JSON_VALUES, max_size=4)
"""Objects without any required parameter: as arguments they never validate (never run)."""
METHODS = st.sampled_from(
    [
        "initialize",
        "ping",
        "tools/list",
        "tools/call",
        "server/discover",
        "notifications/initialized",
        "notifications/cancelled",
        "notifications/progress",
        "resources/list",
        "resources/read",
        "prompts/get",
        "completion/complete",
        "logging/setLevel",
        "subscriptions/listen",
        "sampling/createMessage",
        "elicitation/create",
    ]
) | st.text(max_size=16)
TOOL_NAMES = st.sampled_from(
    ["inspect_context", "search_knowledge", "propose_change", "inspect-context", "nope"]
) | st.text(max_size=12)
IDS: st.SearchStrategy[Any] = SCALARS | st.just({}) | st.just([1])


@st.composite
def messages(draw: st.DrawFn) -> Any:
    """Something shaped like a JSON-RPC message (any part of it may be wrong), never a call
    whose arguments validate."""
    message: dict[str, Any] = {}
    if draw(st.booleans()) or draw(st.booleans()):
        message["jsonrpc"] = draw(st.sampled_from(["2.0", "2.0", "1.0"]) | SCALARS)
    if draw(st.booleans()):
        message["id"] = draw(IDS)
    method = draw(METHODS)
    message["method"] = method
    kind = draw(st.sampled_from(["call", "call", "json", "none", "object"]))
    params: Any
    if kind == "call":
        params = {"name": draw(TOOL_NAMES), "arguments": draw(st.none() | SAFE_OBJECTS | SCALARS)}
        meta = draw(SAFE_OBJECTS)
        if draw(st.booleans()):
            meta[CALL_ID] = draw(SCALARS | st.text(min_size=250, max_size=260))
        if draw(st.booleans()):
            meta["progressToken"] = draw(SCALARS)
        if draw(st.booleans()):
            meta.update(ENVELOPE)
        params["_meta"] = meta
    elif kind == "json":
        params = draw(JSON_VALUES)
    elif kind == "object":
        params = draw(SAFE_OBJECTS)
        if draw(st.booleans()):
            params["_meta"] = dict(ENVELOPE)
    else:
        params = None
    if params is not None or draw(st.booleans()):
        message["params"] = params
    if draw(st.booleans()):
        message.update(draw(st.dictionaries(st.sampled_from(["result", "error", "x"]), SCALARS)))
    return message


HEADER_STYLES = st.sampled_from(["session", "stateless", "none", "other-revision", "other-session"])
REVISION_TEXT = st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), max_size=12)


def headers_of(mcp: Boundary, style: str, message: Any, revision: str) -> list[tuple[str, str]]:
    if style == "none":  # no session, no revision: the SDK's handshake path
        return list(base_headers().items())
    if style == "other-revision":
        return [*base_headers().items(), ("MCP-Protocol-Version", revision)]
    if style == "other-session":  # a session id of no session, maybe of no sane shape
        return list(session_headers(revision).items())
    return list(mcp.headers_for(style, message).items())


def assert_answered_clearly(mcp: Boundary, answer: Answer) -> None:
    assert_clear(answer)
    assert mcp.dispatched() == NOTHING_DISPATCHED, answer


FUZZ = settings(
    max_examples=int(os.environ.get("SEIF_MCP_FUZZ_EXAMPLES", "60")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


@FUZZ
@given(value=JSON_VALUES, style=HEADER_STYLES, revision=REVISION_TEXT)
def test_any_json_value_as_the_body_is_answered_clearly_and_runs_nothing(
    mcp: Boundary, value: Any, style: str, revision: str
) -> None:
    answer = mcp.post(AUTHORING, value, headers_of(mcp, style, value, revision))
    assert_answered_clearly(mcp, answer)


@FUZZ
@given(body=st.binary(max_size=256), style=HEADER_STYLES, revision=REVISION_TEXT)
def test_any_bytes_as_the_body_are_answered_clearly_and_run_nothing(
    mcp: Boundary, body: bytes, style: str, revision: str
) -> None:
    answer = mcp.send("POST", AUTHORING, body, headers_of(mcp, style, None, revision))
    assert_answered_clearly(mcp, answer)


@FUZZ
@given(
    query=st.lists(st.tuples(st.sampled_from([*COORDINATES, "x"]) | TEXT, TEXT), max_size=4),
    style=st.sampled_from(STYLES),
)
def test_any_query_is_answered_clearly_and_runs_nothing(
    mcp: Boundary, query: list[tuple[str, str]], style: str
) -> None:
    message = INITIALIZE if style == "session" else rpc("tools/list", style=style)
    headers = base_headers() if style == "session" else stateless_headers(message)
    answer = mcp.post(f"/mcp/authoring?{urlencode(query)}", message, headers)
    assert_answered_clearly(mcp, answer)
    names = [name for name, _ in query]
    if set(names) - set(COORDINATES) or len(set(names)) < len(names):
        assert_http_error(answer, 400, "BAD_REQUEST")


@FUZZ
@given(message=messages(), style=HEADER_STYLES, revision=REVISION_TEXT)
def test_any_json_rpc_shaped_message_is_answered_clearly_and_runs_nothing(
    mcp: Boundary, message: Any, style: str, revision: str
) -> None:
    answer = mcp.post(AUTHORING, message, headers_of(mcp, style, message, revision))
    assert_answered_clearly(mcp, answer)


# --- after all of it -----------------------------------------------------------------------


def test_nothing_was_dispatched_and_the_runtime_still_serves_both_revisions(
    mcp: Boundary,
) -> None:
    """Run last: no refusal above reached the executor; tools/list still answers in both
    styles, and one ordinary call (its call id exactly 256 characters) runs once."""
    assert mcp.dispatched() == NOTHING_DISPATCHED
    session = mcp.open_session()
    listed = list_in_session(mcp, session)
    assert listed.status == 200, listed
    names = [t["name"] for t in listed.result()["tools"]]
    assert "inspect_context" in names, listed
    stateless = rpc("tools/list", style="stateless")
    answer = mcp.post(AUTHORING, stateless, stateless_headers(stateless))
    assert answer.status == 200, answer
    assert [t["name"] for t in answer.result()["tools"]] == names
    call_id = "c" * 256
    call = rpc(
        "tools/call",
        {"name": "inspect_context", "arguments": READ_ARGS, "_meta": {CALL_ID: call_id}},
        7,
    )
    called = mcp.post(AUTHORING, call, session_headers(session))
    assert called.status == 200, called
    assert called.result()["isError"] is False, called
    assert called.result()["structuredContent"]["ref"] == READ_ARGS["ref"], called
    dispatched = mcp.dispatched()
    assert dispatched["executions"] == {"inspect-context": 1}, dispatched
    assert dispatched["byCallId"] == {call_id: 1}, dispatched


# --- the command line ----------------------------------------------------------------------

SERVE = [
    "serve",
    "--build",
    "no-build",
    "--bindings",
    "no-bindings.json",
    "--credentials",
    "no-credentials.json",
]


def test_mcp_with_require_turn_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "data"
    code = main([*SERVE, "--data", str(data), "--mcp", "--require-turn"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "--mcp" in err and "--require-turn" in err, err
    assert not data.exists()  # refused before anything was opened


@pytest.mark.parametrize("wait", ["0", "-1", "301", "300.5", "nan", "inf", "-inf", "soon", ""])
def test_an_approval_wait_out_of_range_is_refused_by_the_parser(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], wait: str
) -> None:
    with pytest.raises(SystemExit) as exited:
        main([*SERVE, "--data", str(tmp_path / "data"), "--mcp", "--mcp-approval-wait", wait])
    err = capsys.readouterr().err
    assert exited.value.code == 2, err
    assert "--mcp-approval-wait" in err, err
    assert not (tmp_path / "data").exists()


@pytest.mark.parametrize(("wait", "seconds"), [("300", 300.0), ("0.5", 0.5), (None, 120.0)])
def test_an_approval_wait_in_range_is_taken(wait: str | None, seconds: float) -> None:
    extra = [] if wait is None else ["--mcp-approval-wait", wait]
    args = build_parser().parse_args([*SERVE, "--data", "d", "--mcp", *extra])
    assert args.mcp is True
    assert args.mcp_approval_wait == seconds


def test_seif_serve_mcp_serves_the_boundary_in_a_real_process(
    mcp: Boundary, tmp_path: Path
) -> None:
    """`seif serve --mcp` (a subprocess, on the module's executor): the same refusals."""
    config = write_config(tmp_path / "serve", mcp.stack.executor, credentials=CREDENTIALS_HERE)
    proc = start_serve(config, "--mcp", "--mcp-approval-wait", "5", env=ENV_HERE)
    try:
        base = listening(proc)
        unauthenticated = mcp.send(
            "POST", AUTHORING, dump(INITIALIZE), base_headers(None), base=base
        )
        assert_http_error(unauthenticated, 401, "UNAUTHENTICATED")
        assert unauthenticated.headers["WWW-Authenticate"].startswith("Bearer")
        opened = mcp.send("POST", AUTHORING, dump(INITIALIZE), base_headers(), base=base)
        assert opened.status == 200, opened
        assert opened.headers.get("Mcp-Session-Id"), opened
        batch = mcp.send("POST", AUTHORING, dump([INITIALIZE]), base_headers(), base=base)
        assert_rpc_error(batch, INVALID_REQUEST, 400)
        stateless = rpc("tools/list", style="stateless")
        listed = mcp.send(
            "POST", AUTHORING, dump(stateless), stateless_headers(stateless), base=base
        )
        assert listed.status == 200, listed
        assert listed.result()["tools"], listed
        unknown = mcp.send("POST", "/mcp/nope", dump(INITIALIZE), base_headers(), base=base)
        assert_http_error(unknown, 404, "OBJECTIVE_UNKNOWN")
    finally:
        stop(proc)
    err = (config.data.parent / "serve.err").read_text()
    assert "/mcp/{objective}" in err, err
    assert "Traceback" not in err, err
